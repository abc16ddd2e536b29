/* bench_flow.c - a remote learner's flow control over loopback: the
 * streaming sampler against unary Sample, the latency of a batch with the
 * window full, and how closely a rate limiter keeps its ratio.
 *
 * Starts the replayd given by --replayd on 127.0.0.1:0 (a fresh state
 * directory), registers CartPole-shaped workloads (obs float32[4], action
 * int32, reward float32, next_obs float32[4], done bool: 41 bytes a row),
 * then:
 *   grpc.sample         one client calling Sample(batch B) with rows in a
 *                       loop, one call at a time: what a remote learner got
 *                       before SampleStream (the same-run baseline, also
 *                       emitted as baseline.grpc.sample);
 *   grpc.sample_stream  one sampler (rdc_sampler_*, window W) taking batches
 *                       of B as fast as they come; both in transitions/s,
 *                       at B = 32 and 512, each the median of --rounds
 *                       slices of --seconds / rounds run alternately (the
 *                       machine is shared: what else runs then hits both);
 *   grpc.sample_stream_p99_ms / _p50_ms
 *                       with the window full: the learner "trains" for
 *                       --train-us (busy, 500 us by default) between
 *                       batches, so the server has W batches ready, and
 *                       the time rdc_sampler_next takes is what a learner
 *                       waits for its batch (B = 512, one stream). Its
 *                       same-run control, baseline.grpc.sample_stream_p99_ms:
 *                       the same loop with a local busy section as long as
 *                       that p50 in place of the call, i.e. what this
 *                       machine's scheduling alone puts in a p99;
 *   ratio.error         an actor inserting at a fixed rate (--actor-rate,
 *                       rows/s, in batches of 64) and a learner sampling on
 *                       a stream as fast as it can, on a workload whose rate
 *                       limiter keeps samples_per_insert SPI (8) within an
 *                       error buffer; over --ratio-seconds (30 s; 3 with
 *                       --quick) after a second to fill min_size:
 *                       |dS/dI - SPI| / SPI (ratio.measured has dS/dI, and
 *                       ratio.learner_rate the learner's transitions/s).
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_daemon.h"
#include "bench_rows.h"
#include "bench_util.h"
#include "rd_clock.h"
#include "rdt_daemon.h"
#include "replayd_client.h"

static struct {
  bool json, quick;
  double seconds;       /* per throughput figure */
  double ratio_seconds; /* ratio.error's run */
  double train_us;      /* the p99 figure's learner step */
  int rounds;           /* alternating slices of unary and stream */
  double actor_rate;    /* rows/s */
  uint32_t window;
  const char *replayd;
} O = {0, 0, 5.0, 30.0, 500.0, 5, 20000.0, 8, NULL};

static void emit(const char *name, const char *params, double value, const char *unit) {
  bench_emit(O.json, name, params, value, unit);
}

/* ------------------------------------------------------------------ */
/* The daemon                                                          */
/* ------------------------------------------------------------------ */

static rdt_daemon_t daemon_;

/* In a session of its own, as under systemd (bench_grpc.c says why). */
static void start_daemon(void) {
  static const char *const args[] = {"--threads", "2", "--max-memory", "2G", NULL};
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_flow", .new_session = 1, .timeout_s = 6};
  bench_daemon_start(&daemon_, O.replayd, &o, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Workloads, rows, batches                                            */
/* ------------------------------------------------------------------ */

static void register_cartpole(rdc_client_t *c, const rdc_rate_limiter_t *rl, rdc_workload_t *w) {
  rdc_spec_t s;
  bench_rows_spec(&s, "bench-flow", 1u << 20);
  if (rl != NULL) {
    s.has_rate_limiter = 1;
    s.rate_limiter = *rl;
  }
  bench_register(c, NULL, &s, w);
}

/* ------------------------------------------------------------------ */
/* Unary against the stream                                            */
/* ------------------------------------------------------------------ */

static double unary_rate(rdc_client_t *c, const rdc_workload_t *w, uint32_t batch,
                         double seconds) {
  bench_sample_t b;
  bench_sample_make(&b, batch);
  double t0 = rd_clock_now();
  int64_t items = bench_sample_until(c, w, &b, batch, t0 + seconds, NULL);
  bench_sample_free(&b);
  return items < 0 ? -1 : (double)items / (rd_clock_now() - t0);
}

/* Batches of `batch` on one sampler for `seconds`; train_us > 0: a busy
 * learner step between batches, and the latencies of next into lat
 * (after the first window's worth). Returns transitions/s. */
static double stream_run(rdc_client_t *c, const rdc_workload_t *w, uint32_t batch,
                         uint32_t window, double seconds, double train_us, double *lat,
                         size_t cap_lat, size_t *n_lat) {
  rdc_sampler_opts_t o;
  rdc_sampler_opts_init(&o);
  o.batch_size = batch;
  o.window = window;
  rdc_sampler_t *s;
  rdc_error_t e;
  if (rdc_sampler_open(c, w->id, w->token, &o, &s, &e) != RDC_OK) {
    fprintf(stderr, "bench_flow: sampler: %s\n", e.msg);
    return -1;
  }
  bench_sample_t b;
  bench_sample_make(&b, batch);
  uint64_t items = 0, k = 0;
  if (n_lat) *n_lat = 0;
  double t0 = rd_clock_now(), t_end = t0 + seconds;
  int failed = 0;
  while (rd_clock_now() < t_end) {
    double ts = rd_clock_now();
    if (rdc_sampler_next(s, 10, &b.io, &e) != RDC_OK) {
      fprintf(stderr, "bench_flow: next: %s\n", e.msg);
      failed = 1;
      break;
    }
    double dt = rd_clock_now() - ts;
    if (lat && k >= window && *n_lat < cap_lat) lat[(*n_lat)++] = dt;
    k++;
    items += batch;
    if (train_us > 0) {
      double until = rd_clock_now() + train_us * 1e-6;
      while (rd_clock_now() < until) {
      }
    }
  }
  double rate = (double)items / (rd_clock_now() - t0);
  if (rdc_sampler_close(s, &e) != RDC_OK) {
    fprintf(stderr, "bench_flow: close: %s\n", e.msg);
    failed = 1;
  }
  bench_sample_free(&b);
  return failed ? -1 : rate;
}

/* ------------------------------------------------------------------ */
/* The ratio a rate limiter keeps                                      */
/* ------------------------------------------------------------------ */

typedef struct {
  const rdc_workload_t *w;
  double rate, t_end;
  int failed;
} actor_t;

/* Inserts at a fixed rate: batches of 64 on their schedule (it catches
 * up after the limiter held it back, as an actor's buffer would). */
static void *actor_main(void *arg) {
  actor_t *a = arg;
  rdc_client_t *c = bench_daemon_client(&daemon_, 60);
  bench_rows_t r;
  bench_rows_make(&r, 64);
  rdc_insert_stream_t *s;
  rdc_error_t e;
  if (rdc_insert_stream_open(c, a->w->id, a->w->token, &s, &e) != RDC_OK) {
    a->failed = 1;
  } else {
    double t0 = rd_clock_now();
    uint64_t sent = 0;
    while (rd_clock_now() < a->t_end) {
      double due = t0 + (double)(sent + 64) / a->rate;
      double left = due - rd_clock_now();
      if (left > 0) usleep((useconds_t)(left * 1e6));
      if (rdc_insert_stream_write(s, 64, r.cols, 5, NULL, &e) != RDC_OK) {
        fprintf(stderr, "bench_flow: actor: %s\n", e.msg);
        a->failed = 1;
        break;
      }
      sent += 64;
    }
    if (rdc_insert_stream_close(s, NULL, NULL, &e) != RDC_OK && !a->failed) {
      fprintf(stderr, "bench_flow: actor close: %s\n", e.msg);
      a->failed = 1;
    }
  }
  bench_rows_free(&r);
  rdc_close(c);
  return NULL;
}

/* Samples until told to stop: after the actor has finished, so that the
 * actor's last inserts are never left waiting for samples. */
typedef struct {
  const rdc_workload_t *w;
  atomic_int stop;
  uint64_t items;
  int failed;
} learner_t;

static void *learner_main(void *arg) {
  learner_t *l = arg;
  rdc_client_t *c = bench_daemon_client(&daemon_, 30);
  rdc_sampler_opts_t o;
  rdc_sampler_opts_init(&o);
  o.batch_size = 64;
  o.window = 8;
  rdc_sampler_t *s;
  rdc_error_t e;
  bench_sample_t b;
  bench_sample_make(&b, 64);
  if (rdc_sampler_open(c, l->w->id, l->w->token, &o, &s, &e) != RDC_OK) {
    l->failed = 1;
  } else {
    while (!atomic_load(&l->stop)) {
      int rc = rdc_sampler_next(s, 0.2, &b.io, &e);
      if (rc == RDC_DEADLINE_EXCEEDED) continue; /* the limiter holds it: look at the clock */
      if (rc != RDC_OK) {
        fprintf(stderr, "bench_flow: learner: %s\n", e.msg);
        l->failed = 1;
        break;
      }
      l->items += 64;
    }
    rdc_sampler_close(s, NULL);
  }
  bench_sample_free(&b);
  rdc_close(c);
  return NULL;
}

static int limiter_counts(rdc_client_t *c, const rdc_workload_t *w, uint64_t *ins,
                          uint64_t *smp) {
  rdc_workload_t *d = malloc(sizeof *d);
  rdc_error_t e;
  int rc = rdc_describe(c, w->id, d, &e);
  if (rc == RDC_OK) {
    *ins = d->rate_limiter.inserted;
    *smp = d->rate_limiter.sampled;
  } else {
    fprintf(stderr, "bench_flow: describe: %s\n", e.msg);
  }
  free(d);
  return rc;
}

static int ratio_error(rdc_client_t *c) {
  const double spi = 8, buffer = 2048;
  rdc_rate_limiter_t rl = {.min_size_to_sample = 1000, .samples_per_insert = spi,
                           .has_error_buffer = 1, .error_buffer = buffer};
  rdc_workload_t *w = xmalloc(sizeof *w);
  register_cartpole(c, &rl, w);
  double t0 = rd_clock_now(), t_end = t0 + 1 + O.ratio_seconds + 0.5;
  actor_t a = {w, O.actor_rate, t_end, 0};
  learner_t l = {.w = w};
  pthread_t ta, tl;
  pthread_create(&ta, NULL, actor_main, &a);
  pthread_create(&tl, NULL, learner_main, &l);
  /* From the first second on (min_size is filled), over ratio_seconds. */
  usleep(1000000);
  uint64_t i0 = 0, s0 = 0, i1 = 0, s1 = 0;
  int rc = limiter_counts(c, w, &i0, &s0);
  double m0 = rd_clock_now();
  usleep((useconds_t)(O.ratio_seconds * 1e6));
  if (rc == RDC_OK) rc = limiter_counts(c, w, &i1, &s1);
  double m1 = rd_clock_now();
  pthread_join(ta, NULL);
  atomic_store(&l.stop, 1);
  pthread_join(tl, NULL);
  free(w);
  if (rc != RDC_OK || a.failed || l.failed || i1 <= i0) return -1;
  double measured = (double)(s1 - s0) / (double)(i1 - i0);
  char p[160];
  snprintf(p, sizeof p, "\"spi\": %g, \"error_buffer\": %g, \"actor_rate\": %g, \"seconds\": %g",
           spi, buffer, O.actor_rate, O.ratio_seconds);
  emit("ratio.error", p, fabs(measured - spi) / spi, "fraction");
  emit("ratio.measured", p, measured, "samples/insert");
  emit("ratio.learner_rate", p, (double)(s1 - s0) / (m1 - m0), "transitions/s");
  return 0;
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f, "usage: bench_flow --replayd PATH [--json] [--quick] [--seconds T] "
             "[--ratio-seconds T] [--train-us U] [--actor-rate R] [--window W] [--rounds N]\n");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (bench_common_opt(argc, argv, &i, &O.json, &O.quick, NULL, usage)) continue;
    if (v == NULL) bench_usage_error(usage);
    if (strcmp(argv[i], "--replayd") == 0) O.replayd = v;
    else if (strcmp(argv[i], "--seconds") == 0) O.seconds = atof(v);
    else if (strcmp(argv[i], "--ratio-seconds") == 0) O.ratio_seconds = atof(v);
    else if (strcmp(argv[i], "--train-us") == 0) O.train_us = atof(v);
    else if (strcmp(argv[i], "--actor-rate") == 0) O.actor_rate = atof(v);
    else if (strcmp(argv[i], "--window") == 0) O.window = bench_parse_u32(argv[i], v, 1, 64);
    else if (strcmp(argv[i], "--rounds") == 0) O.rounds = (int)bench_parse_u32(argv[i], v, 1, 100);
    else bench_usage_error(usage);
    i++;
  }
  if (O.replayd == NULL || !(O.seconds > 0) || !(O.ratio_seconds > 0) || !(O.actor_rate > 0))
    die("--replayd PATH is required; --seconds, --ratio-seconds and --actor-rate are > 0");
  if (O.quick) {
    O.seconds = 0.5;
    O.ratio_seconds = 3;
    O.rounds = 2;
  }
  start_daemon();
  rdc_client_t *c = bench_daemon_client(&daemon_, 30);
  int rc = 0;
  rdc_workload_t *w = xmalloc(sizeof *w);
  register_cartpole(c, NULL, w);
  bench_rows_fill(c, w, 200 * 512, 512); /* rows to sample from */
  /* In JSON mode stdout carries only the JSON lines; the header goes to
   * stderr. */
  FILE *info = O.json ? stderr : stdout;
  char date[64], cpu[256], load[32];
  utc_now(date, sizeof date);
  cpu_model(cpu, sizeof cpu);
  load_average(load, sizeof load);
  fprintf(info, "# bench_flow: replayd over loopback, %s, %s (ISA %s), %ld CPUs (load %s), "
                "%.1f s per throughput figure in %d alternating rounds, window %u\n",
          date, cpu, cpu_isa(), sysconf(_SC_NPROCESSORS_ONLN), load, O.seconds, O.rounds, O.window);
  if (!O.json) printf("%-28s %-28s %14s\n", "name", "params", "value");
  fflush(info);
  const uint32_t batches[2] = {32, 512};
  for (int k = 0; rc == 0 && k < 2; k++) {
    char p[64];
    snprintf(p, sizeof p, "\"batch\": %u, \"window\": %u", batches[k], O.window);
    double us[100], ss[100], slice = O.seconds / O.rounds;
    for (int r = 0; rc == 0 && r < O.rounds; r++) {
      us[r] = unary_rate(c, w, batches[k], slice);
      ss[r] = stream_run(c, w, batches[k], O.window, slice, 0, NULL, 0, NULL);
      if (us[r] < 0 || ss[r] < 0) rc = 1;
    }
    if (rc) break;
    qsort(us, (size_t)O.rounds, sizeof us[0], cmp_double);
    qsort(ss, (size_t)O.rounds, sizeof ss[0], cmp_double);
    double u = us[O.rounds / 2], st = ss[O.rounds / 2];
    char pu[64];
    snprintf(pu, sizeof pu, "\"batch\": %u, \"streams\": 1", batches[k]);
    emit("grpc.sample", pu, u, "transitions/s");
    emit("baseline.grpc.sample", pu, u, "transitions/s");
    emit("grpc.sample_stream", p, st, "transitions/s");
    emit("grpc.sample_stream_speedup", p, st / u, "x");
  }
  if (rc == 0) { /* the window full: a learner step between batches */
    size_t cap = 1000000, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    double v = stream_run(c, w, 512, O.window, O.seconds * 2, O.train_us, lat, cap, &n);
    if (v < 0 || n == 0) {
      rc = 1;
    } else {
      qsort(lat, n, sizeof *lat, cmp_double);
      char p[96];
      snprintf(p, sizeof p, "\"batch\": 512, \"window\": %u, \"train_us\": %g", O.window,
               O.train_us);
      double p50 = lat[n / 2];
      emit("grpc.sample_stream_p50_ms", p, p50 * 1e3, "ms");
      emit("grpc.sample_stream_p99_ms", p, lat[(size_t)((double)n * 0.99)] * 1e3, "ms");
      /* The control: as many rounds, the call replaced by p50 of spinning. */
      size_t m = n;
      for (size_t i = 0; i < m; i++) {
        double until = rd_clock_now() + O.train_us * 1e-6;
        while (rd_clock_now() < until) {
        }
        double ts = rd_clock_now(), end = ts + p50;
        while (rd_clock_now() < end) {
        }
        lat[i] = rd_clock_now() - ts;
      }
      qsort(lat, m, sizeof *lat, cmp_double);
      emit("baseline.grpc.sample_stream_p99_ms", p, lat[(size_t)((double)m * 0.99)] * 1e3, "ms");
    }
    free(lat);
  }
  if (rc == 0 && ratio_error(c) != 0) rc = 1;
  load_average(load, sizeof load);
  fprintf(info, "# load average at the end: %s\n", load);
  free(w);
  rdc_close(c);
  bench_daemon_stop(&daemon_);
  return rc;
}
