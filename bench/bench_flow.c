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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "replayd_client.h"

#define OBS 4
#define ROW_BYTES 41

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static struct {
  int json, quick;
  double seconds;       /* per throughput figure */
  double ratio_seconds; /* ratio.error's run */
  double train_us;      /* the p99 figure's learner step */
  int rounds;           /* alternating slices of unary and stream */
  double actor_rate;    /* rows/s */
  uint32_t window;
  const char *replayd;
} O = {0, 0, 5.0, 30.0, 500.0, 5, 20000.0, 8, NULL};

static char target[64];

static void emit(const char *name, const char *params, double value, const char *unit) {
  if (O.json)
    printf("{\"name\": \"%s\", \"params\": {%s}, \"value\": %.6g, \"unit\": \"%s\"}\n", name,
           params, value, unit);
  else
    printf("%-28s %-28s %14.4g %s\n", name, params, value, unit);
  fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* The daemon                                                          */
/* ------------------------------------------------------------------ */

static pid_t daemon_pid;
static char state_dir[] = "/tmp/replayd-bench-flow-XXXXXX";

static void stop_daemon(void) {
  if (daemon_pid > 0) {
    kill(daemon_pid, SIGTERM);
    int st;
    waitpid(daemon_pid, &st, 0);
    daemon_pid = 0;
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", state_dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_flow: could not remove %s\n", state_dir);
}

static int start_daemon(void) {
  if (mkdtemp(state_dir) == NULL) return -1;
  char log[256];
  snprintf(log, sizeof log, "%s/replayd.log", state_dir);
  daemon_pid = fork();
  if (daemon_pid == 0) {
    setsid(); /* a session of its own, as under systemd (bench_grpc.c says why) */
    FILE *f = freopen(log, "w", stderr);
    (void)f;
    execl(O.replayd, O.replayd, "--listen", "127.0.0.1:0", "--state-dir", state_dir,
          "--threads", "2", "--max-memory", "2G", (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 300; i++) { /* the port is in the log's "listening on" line */
    usleep(20000);
    FILE *f = fopen(log, "r");
    if (f == NULL) continue;
    char line[512];
    while (fgets(line, sizeof line, f)) {
      char *p = strstr(line, "listening on 127.0.0.1:");
      if (p) {
        snprintf(target, sizeof target, "127.0.0.1:%d",
                 atoi(p + strlen("listening on 127.0.0.1:")));
        fclose(f);
        return 0;
      }
    }
    fclose(f);
  }
  fprintf(stderr, "bench_flow: %s did not start (see %s)\n", O.replayd, log);
  return -1;
}

/* ------------------------------------------------------------------ */
/* Workloads, rows, batches                                            */
/* ------------------------------------------------------------------ */

static int register_cartpole(rdc_client_t *c, const rdc_rate_limiter_t *rl, rdc_workload_t *w) {
  rdc_spec_t s;
  rdc_spec_init(&s);
  snprintf(s.name, sizeof s.name, "bench-flow");
  s.capacity = 1u << 20;
  s.n_fields = 5;
  const char *names[5] = {"obs", "action", "reward", "next_obs", "done"};
  rdc_dtype_t dt[5] = {RDC_DTYPE_FLOAT32, RDC_DTYPE_INT32, RDC_DTYPE_FLOAT32, RDC_DTYPE_FLOAT32,
                       RDC_DTYPE_BOOL};
  for (int f = 0; f < 5; f++) {
    snprintf(s.fields[f].name, sizeof s.fields[f].name, "%s", names[f]);
    s.fields[f].dtype = dt[f];
    s.fields[f].rank = (f == 0 || f == 3) ? 1 : 0;
    s.fields[f].shape[0] = OBS;
  }
  if (rl != NULL) {
    s.has_rate_limiter = 1;
    s.rate_limiter = *rl;
  }
  rdc_error_t e;
  if (rdc_register(c, &s, w, &e) != RDC_OK) {
    fprintf(stderr, "bench_flow: register: %s\n", e.msg);
    return -1;
  }
  return 0;
}

typedef struct {
  float obs[512 * OBS], next_obs[512 * OBS], reward[512];
  int32_t action[512];
  uint8_t done[512];
  rdc_column_t cols[5];
} rows_t;

static void rows_make(rows_t *r, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    for (int k = 0; k < OBS; k++) r->obs[i * OBS + k] = r->next_obs[i * OBS + k] = (float)(i + k);
    r->reward[i] = 1.0f;
    r->action[i] = (int32_t)(i & 1);
    r->done[i] = (i % 200) == 199;
  }
  r->cols[0] = (rdc_column_t){r->obs, n * OBS * sizeof(float)};
  r->cols[1] = (rdc_column_t){r->action, n * sizeof(int32_t)};
  r->cols[2] = (rdc_column_t){r->reward, n * sizeof(float)};
  r->cols[3] = (rdc_column_t){r->next_obs, n * OBS * sizeof(float)};
  r->cols[4] = (rdc_column_t){r->done, n};
}

/* A learner's batch buffers, for up to 512 rows. */
typedef struct {
  uint64_t keys[512];
  double pr[512], w[512];
  uint8_t mem[512 * ROW_BYTES];
  rdc_buffer_t bufs[5];
  rdc_sample_t io;
} batch_t;

static void batch_init(batch_t *b, uint32_t n) {
  const size_t widths[5] = {16, 4, 4, 16, 1};
  uint8_t *p = b->mem;
  for (int f = 0; f < 5; f++) {
    b->bufs[f] = (rdc_buffer_t){p, n * widths[f], 0};
    p += n * widths[f];
  }
  b->io = (rdc_sample_t){b->keys, b->pr, b->w, b->bufs, 5, 0, 0};
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ */
/* Unary against the stream                                            */
/* ------------------------------------------------------------------ */

static double unary_rate(rdc_client_t *c, const rdc_workload_t *w, uint32_t batch,
                         double seconds) {
  batch_t *b = malloc(sizeof *b);
  batch_init(b, batch);
  rdc_error_t e;
  uint64_t items = 0;
  double t0 = now_s(), t_end = t0 + seconds;
  while (now_s() < t_end) {
    if (rdc_sample(c, w->id, w->token, batch, NAN, 0, &b->io, &e) != RDC_OK) {
      fprintf(stderr, "bench_flow: sample: %s\n", e.msg);
      free(b);
      return -1;
    }
    items += batch;
  }
  free(b);
  return (double)items / (now_s() - t0);
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
  batch_t *b = malloc(sizeof *b);
  batch_init(b, batch);
  uint64_t items = 0, k = 0;
  if (n_lat) *n_lat = 0;
  double t0 = now_s(), t_end = t0 + seconds;
  int failed = 0;
  while (now_s() < t_end) {
    double ts = now_s();
    if (rdc_sampler_next(s, 10, &b->io, &e) != RDC_OK) {
      fprintf(stderr, "bench_flow: next: %s\n", e.msg);
      failed = 1;
      break;
    }
    double dt = now_s() - ts;
    if (lat && k >= window && *n_lat < cap_lat) lat[(*n_lat)++] = dt;
    k++;
    items += batch;
    if (train_us > 0) {
      double until = now_s() + train_us * 1e-6;
      while (now_s() < until) {
      }
    }
  }
  double rate = (double)items / (now_s() - t0);
  if (rdc_sampler_close(s, &e) != RDC_OK) {
    fprintf(stderr, "bench_flow: close: %s\n", e.msg);
    failed = 1;
  }
  free(b);
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
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect(target, 5, &c, &e) != RDC_OK) {
    a->failed = 1;
    return NULL;
  }
  rdc_set_deadline(c, 60);
  rows_t *r = malloc(sizeof *r);
  rows_make(r, 64);
  rdc_insert_stream_t *s;
  if (rdc_insert_stream_open(c, a->w->id, a->w->token, &s, &e) != RDC_OK) {
    a->failed = 1;
  } else {
    double t0 = now_s();
    uint64_t sent = 0;
    while (now_s() < a->t_end) {
      double due = t0 + (double)(sent + 64) / a->rate;
      double left = due - now_s();
      if (left > 0) usleep((useconds_t)(left * 1e6));
      if (rdc_insert_stream_write(s, 64, r->cols, 5, NULL, &e) != RDC_OK) {
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
  free(r);
  rdc_close(c);
  return NULL;
}

typedef struct {
  const rdc_workload_t *w;
  double t_end;
  uint64_t items;
  int failed;
} learner_t;

static void *learner_main(void *arg) {
  learner_t *l = arg;
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect(target, 5, &c, &e) != RDC_OK) {
    l->failed = 1;
    return NULL;
  }
  rdc_sampler_opts_t o;
  rdc_sampler_opts_init(&o);
  o.batch_size = 64;
  o.window = 8;
  rdc_sampler_t *s;
  batch_t *b = malloc(sizeof *b);
  batch_init(b, 64);
  if (rdc_sampler_open(c, l->w->id, l->w->token, &o, &s, &e) != RDC_OK) {
    l->failed = 1;
  } else {
    while (now_s() < l->t_end) {
      int rc = rdc_sampler_next(s, 0.2, &b->io, &e);
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
  free(b);
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
  rdc_workload_t *w = malloc(sizeof *w);
  if (register_cartpole(c, &rl, w) != 0) return -1;
  double t0 = now_s(), t_end = t0 + 1 + O.ratio_seconds + 0.5;
  actor_t a = {w, O.actor_rate, t_end, 0};
  learner_t l = {w, t_end, 0, 0};
  pthread_t ta, tl;
  pthread_create(&ta, NULL, actor_main, &a);
  pthread_create(&tl, NULL, learner_main, &l);
  /* From the first second on (min_size is filled), over ratio_seconds. */
  usleep(1000000);
  uint64_t i0 = 0, s0 = 0, i1 = 0, s1 = 0;
  int rc = limiter_counts(c, w, &i0, &s0);
  double m0 = now_s();
  usleep((useconds_t)(O.ratio_seconds * 1e6));
  if (rc == RDC_OK) rc = limiter_counts(c, w, &i1, &s1);
  double m1 = now_s();
  pthread_join(ta, NULL);
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

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) O.json = 1;
    else if (strcmp(argv[i], "--quick") == 0) O.quick = 1;
    else if (strcmp(argv[i], "--replayd") == 0 && i + 1 < argc) O.replayd = argv[++i];
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) O.seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--ratio-seconds") == 0 && i + 1 < argc)
      O.ratio_seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--train-us") == 0 && i + 1 < argc) O.train_us = atof(argv[++i]);
    else if (strcmp(argv[i], "--actor-rate") == 0 && i + 1 < argc)
      O.actor_rate = atof(argv[++i]);
    else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc)
      O.window = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) O.rounds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_flow --replayd PATH [--json] [--quick] [--seconds T] "
                      "[--ratio-seconds T] [--train-us U] [--actor-rate R] [--window W] "
                      "[--rounds N]\n");
      return 2;
    }
  }
  if (O.replayd == NULL || O.window == 0 || O.window > 64 || !(O.seconds > 0) ||
      !(O.actor_rate > 0) || O.rounds < 1 || O.rounds > 100) {
    fprintf(stderr, "bench_flow: --replayd PATH is required (window 1..64)\n");
    return 2;
  }
  if (O.quick) {
    O.seconds = 0.5;
    O.ratio_seconds = 3;
    O.rounds = 2;
  }
  if (start_daemon()) return 1;
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect(target, 5, &c, &e) != RDC_OK) {
    fprintf(stderr, "bench_flow: %s\n", e.msg);
    stop_daemon();
    return 1;
  }
  rdc_set_deadline(c, 30);
  int rc = 0;
  rdc_workload_t *w = malloc(sizeof *w);
  if (register_cartpole(c, NULL, w) != 0) rc = 1;
  rows_t *r = malloc(sizeof *r);
  rows_make(r, 512);
  for (int i = 0; rc == 0 && i < 200; i++) /* 102400 rows to sample from */
    if (rdc_insert_batch(c, w->id, w->token, 512, r->cols, 5, NULL, NULL, &e) != RDC_OK) {
      fprintf(stderr, "bench_flow: insert: %s\n", e.msg);
      rc = 1;
    }
  free(r);
  if (!O.json) {
    time_t tt = time(NULL);
    printf("# bench_flow: replayd over loopback, %.1f s per figure, %s", O.seconds, ctime(&tt));
    printf("%-28s %-28s %14s\n", "name", "params", "value");
  }
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
        double until = now_s() + O.train_us * 1e-6;
        while (now_s() < until) {
        }
        double ts = now_s(), end = ts + p50;
        while (now_s() < end) {
        }
        lat[i] = now_s() - ts;
      }
      qsort(lat, m, sizeof *lat, cmp_double);
      emit("baseline.grpc.sample_stream_p99_ms", p, lat[(size_t)((double)m * 0.99)] * 1e3, "ms");
    }
    free(lat);
  }
  if (rc == 0 && ratio_error(c) != 0) rc = 1;
  free(w);
  rdc_close(c);
  stop_daemon();
  return rc;
}
