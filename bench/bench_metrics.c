/* bench_metrics.c - what the metrics endpoint costs the data path:
 * grpc.sample (Sample, batch 512, S streams) on a replayd with
 * --metrics-listen against one without, in the same run.
 *
 * Starts two replayd (--replayd PATH) on 127.0.0.1:0, each with a fresh
 * state directory and the same CartPole workload filled with 100k rows;
 * one of them serves /metrics, and a scraper thread reads it every
 * --scrape-interval seconds (1 s: fifteen times Prometheus's default rate)
 * while that daemon is measured. Rounds alternate off/on, on/off, ... so a
 * drift of the machine falls on both; each figure is the median over the
 * rounds. Reported:
 *   baseline.grpc.sample  metrics off, transitions/s
 *   grpc.sample           metrics on, transitions/s
 *   metrics.overhead      the median of each round's on / off (1.0: free; the
 *                         issue asks >= 0.97)
 *   metrics.observe_ns    in this process, what a call pays with metrics on
 *                         (rpc_stats.h: two clock reads and the observation),
 *                         with S threads observing at once: the only work
 *                         on the data path the endpoint adds, measured
 *                         without the noise of two daemons on a shared VM
 * --control runs the same with neither daemon serving metrics
 * (metrics.overhead_control): how far apart two identical daemons come out
 * on this machine, the noise the figure above must be read against.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_daemon.h"
#include "bench_rows.h"
#include "bench_util.h"
#include "rd_clock.h"
#include "rdt_daemon.h"
#include "replayd_client.h"
#include "rpc_stats.h"

#define BATCH 512
#define FILL_ROWS 100000

typedef struct {
  bool json;
  double seconds; /* per measurement */
  uint32_t rounds, streams;
  double scrape_interval;
  const char *replayd;
  int control; /* --control: neither daemon serves metrics (the noise alone) */
} opts_t;

static opts_t O = {false, 2.0, 5, 2, 1.0, NULL, 0};

/* ------------------------------------------------------------------ */
/* A daemon                                                            */
/* ------------------------------------------------------------------ */

typedef struct {
  rdt_daemon_t d;
  int metrics_port; /* 0: off */
  rdc_workload_t wl;
} daemon_t;

static int log_port(const char *log, const char *key) {
  FILE *f = fopen(log, "r");
  if (f == NULL) return 0;
  char line[512];
  int port = 0;
  while (port == 0 && fgets(line, sizeof line, f)) {
    char *p = strstr(line, key);
    if (p) port = atoi(p + strlen(key));
  }
  fclose(f);
  return port;
}

static void daemon_start(daemon_t *d, int metrics) {
  const char *args[8] = {"--threads", "2", "--max-memory", "4G"};
  int n = 4;
  if (metrics) {
    args[n++] = "--metrics-listen";
    args[n++] = "0";
  }
  args[n] = NULL;
  /* As under systemd: the scheduler shares by session, not thread. */
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_metrics", .new_session = 1};
  bench_daemon_start(&d->d, O.replayd, &o, NULL, 0);
  /* The metrics line comes before the gRPC one (main.c). */
  d->metrics_port = metrics ? log_port(d->d.log, "metrics on http://127.0.0.1:") : 0;
  if (metrics && d->metrics_port == 0) die("no metrics endpoint (see %s)", d->d.log);
}

/* The CartPole workload with FILL_ROWS rows. */
static void daemon_fill(daemon_t *d) {
  rdc_client_t *c = bench_daemon_client(&d->d, 30);
  rdc_spec_t spec;
  bench_rows_spec(&spec, "bench-metrics", 1u << 20);
  bench_register(c, NULL, &spec, &d->wl);
  bench_rows_fill(c, &d->wl, FILL_ROWS, 10000);
  rdc_close(c);
}

/* ------------------------------------------------------------------ */
/* The scraper                                                         */
/* ------------------------------------------------------------------ */

static atomic_int scrape_port; /* 0: idle */
static atomic_bool scraper_stop;
static atomic_uint_fast64_t scrapes, scrape_bytes;

/* One GET /metrics; the bytes read, or -1. */
static long scrape_once(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
  long got = 0;
  if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) got += n;
  }
  close(fd);
  return got;
}

static void *scraper(void *arg) {
  (void)arg;
  while (!atomic_load(&scraper_stop)) {
    int port = atomic_load(&scrape_port);
    if (port != 0) {
      long n = scrape_once(port);
      if (n > 0) {
        atomic_fetch_add(&scrapes, 1);
        atomic_fetch_add(&scrape_bytes, (uint64_t)n);
      }
    }
    struct timespec ts = {(time_t)O.scrape_interval,
                          (long)((O.scrape_interval - floor(O.scrape_interval)) * 1e9)};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Samplers                                                            */
/* ------------------------------------------------------------------ */

typedef struct {
  const daemon_t *d;
  double t_end;
  uint64_t items;
  int failed;
} job_t;

static void *sampler(void *arg) {
  job_t *j = arg;
  rdc_client_t *c = bench_daemon_client(&j->d->d, 30);
  bench_sample_t s;
  bench_sample_make(&s, BATCH);
  int64_t items = bench_sample_until(c, &j->d->wl, &s, BATCH, j->t_end, NULL);
  if (items < 0) j->failed = 1;
  else j->items = (uint64_t)items;
  bench_sample_free(&s);
  rdc_close(c);
  return NULL;
}

/* grpc.sample on d for O.seconds: transitions/s. */
static double measure(const daemon_t *d) {
  atomic_store(&scrape_port, d->metrics_port);
  job_t jobs[64];
  pthread_t th[64];
  double t0 = rd_clock_now();
  for (uint32_t i = 0; i < O.streams; i++) {
    jobs[i] = (job_t){d, t0 + O.seconds, 0, 0};
    pthread_create(&th[i], NULL, sampler, &jobs[i]);
  }
  uint64_t items = 0;
  for (uint32_t i = 0; i < O.streams; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].failed) die("a sampler failed");
    items += jobs[i].items;
  }
  double v = (double)items / (rd_clock_now() - t0);
  atomic_store(&scrape_port, 0);
  return v;
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

/* ns per rd_handle wrapper's work with metrics on, S threads at once. */
#define OBSERVE_N 2000000
static void *observe_loop(void *arg) {
  double *ns = arg;
  double t0 = rd_clock_now();
  for (int i = 0; i < OBSERVE_N; i++) {
    double s = rd_clock_now();
    rd_rpc_stats_observe(0, rd_clock_now() - s, i % 64 ? 0 : 5);
  }
  *ns = (rd_clock_now() - t0) * 1e9 / OBSERVE_N;
  return NULL;
}

static double observe_ns(void) {
  static const char *const names[1] = {"Sample"};
  rd_rpc_stats_enable(names, 1);
  pthread_t th[64];
  double ns[64], sum = 0;
  for (uint32_t i = 0; i < O.streams; i++) pthread_create(&th[i], NULL, observe_loop, &ns[i]);
  for (uint32_t i = 0; i < O.streams; i++) {
    pthread_join(th[i], NULL);
    sum += ns[i];
  }
  return sum / O.streams;
}

static double median(double *v, uint32_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void emit(const char *name, double value, const char *unit) {
  if (O.json)
    printf("{\"name\": \"%s\", \"params\": {\"batch\": %d, \"streams\": %u, \"rounds\": %u, "
           "\"seconds\": %g, \"scrape_interval_s\": %g}, \"value\": %.6g, \"unit\": \"%s\"}\n",
           name, BATCH, O.streams, O.rounds, O.seconds, O.scrape_interval, value, unit);
  else
    printf("%-22s %6d %8u %16.4g %s\n", name, BATCH, O.streams, value, unit);
  fflush(stdout);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_metrics --replayd PATH [--json] [--quick] [--seconds T] "
             "[--rounds R] [--streams S] [--scrape-interval S] [--control]\n");
}

int main(int argc, char **argv) {
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    if (bench_replayd_opt(argc, argv, &i, &O.json, &quick, &O.replayd, usage)) continue;
    if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) O.seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      O.rounds = bench_parse_u32("--rounds", argv[++i], 1, 100);
    else if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc)
      O.streams = bench_parse_u32("--streams", argv[++i], 1, 64);
    else if (strcmp(argv[i], "--control") == 0) O.control = 1;
    else if (strcmp(argv[i], "--scrape-interval") == 0 && i + 1 < argc)
      O.scrape_interval = atof(argv[++i]);
    else bench_usage_error(usage);
  }
  if (quick) {
    O.seconds = 0.5;
    O.rounds = 2;
  }
  if (O.replayd == NULL || !(O.seconds > 0) || !(O.scrape_interval > 0)) {
    fprintf(stderr, "bench_metrics: --replayd PATH is required; --seconds and "
                    "--scrape-interval > 0\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  daemon_t off, on;
  memset(&off, 0, sizeof off);
  memset(&on, 0, sizeof on);
  daemon_start(&off, 0);
  daemon_start(&on, !O.control);
  daemon_fill(&off);
  daemon_fill(&on);
  pthread_t scr;
  pthread_create(&scr, NULL, scraper, NULL);

  if (!O.json) {
    char cpu[128], load[32], when[32];
    cpu_model(cpu, sizeof cpu);
    load_average(load, sizeof load);
    utc_now(when, sizeof when);
    printf("# bench_metrics: grpc.sample with --metrics-listen vs without, %u rounds of %.1f s, "
           "scraped every %.1f s; %s, ISA %s, %ld CPUs (load %s), %s\n",
           O.rounds, O.seconds, O.scrape_interval, cpu, cpu_isa(), sysconf(_SC_NPROCESSORS_ONLN),
           load, when);
    printf("%-22s %6s %8s %16s\n", "name", "batch", "streams", "value");
  }
  double v_off[100], v_on[100];
  for (uint32_t r = 0; r < O.rounds; r++) {
    if (r % 2 == 0) {
      v_off[r] = measure(&off);
      v_on[r] = measure(&on);
    } else {
      v_on[r] = measure(&on);
      v_off[r] = measure(&off);
    }
    if (!O.json)
      fprintf(stderr, "round %u: off %.4g, on %.4g transitions/s\n", r + 1, v_off[r], v_on[r]);
  }
  atomic_store(&scraper_stop, true);
  pthread_join(scr, NULL);
  /* The ratio is the median of each round's on/off: the two of a round ran
   * back to back, so a burst of load elsewhere falls on one round. */
  double ratio[100];
  for (uint32_t r = 0; r < O.rounds; r++) ratio[r] = v_on[r] / v_off[r];
  double m_off = median(v_off, O.rounds), m_on = median(v_on, O.rounds);
  emit("baseline.grpc.sample", m_off, "transitions/s");
  emit(O.control ? "grpc.sample_second_daemon" : "grpc.sample", m_on, "transitions/s");
  emit(O.control ? "metrics.overhead_control" : "metrics.overhead", median(ratio, O.rounds),
       "ratio");
  if (!O.control) emit("metrics.observe_ns", observe_ns(), "ns/call");
  if (!O.json)
    printf("# %llu scrapes of %.0f bytes on average while measured\n",
           (unsigned long long)atomic_load(&scrapes),
           atomic_load(&scrapes) ? (double)atomic_load(&scrape_bytes) / atomic_load(&scrapes) : 0.0);
  bench_daemon_stop(&off.d);
  bench_daemon_stop(&on.d);
  /* An endpoint never read measured nothing. */
  return O.control || atomic_load(&scrapes) > 0 ? 0 : 1;
}
