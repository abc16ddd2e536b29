/* bench_grpc.c - replayd over loopback: inserted and sampled transitions/s
 * and Sample latency, with client and daemon on the same machine.
 *
 * Starts the replayd given by --replayd on 127.0.0.1:0 (a fresh state
 * directory), registers a CartPole-shaped workload (obs float32[4], action
 * int32, reward float32, next_obs float32[4], done bool: 41 bytes a row),
 * then:
 *   grpc.insert  S threads, each with its own connection and Insert stream,
 *                writing batches of B rows for the measuring time;
 *   grpc.sample  S threads calling Sample(batch 512) with rows, in a loop;
 *                every call's latency goes into the p50/p99.
 *   grpc.sample_p99_under_insert_load
 *                one thread calling Sample(batch 256) while L Insert streams
 *                (batch 64 each, one connection each, in a process and
 *                session of their own, as actors are) write as fast as the
 *                server takes them: the tail a remote learner sees while
 *                many actors feed the same server (L = 0: the quiet
 *                reference). The daemon runs in a session of its own too,
 *                as under systemd or in another terminal.
 * Baseline, measured in the same run: the same inserts and samples on an
 * in-process rd_table (baseline.table.insert / .sample), i.e. what the
 * data structure alone costs; the ratio is the price of the RPC path.
 */
#include <errno.h>
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
#include "table.h"
#include "rd_clock.h"
#include "rdt_daemon.h"
#include "rdt_schema.h"
#include "bench_daemon.h"
#include "bench_rows.h"
#include "bench_util.h"


typedef struct {
  int json;
  double seconds;
  uint32_t streams;
  const char *replayd;
  uint32_t load_streams[4]; /* grpc.sample_p99_under_insert_load's L values */
  uint32_t n_load;
  int load_only; /* only the figures under insert load */
  const char *daemon_args[8]; /* --daemon-arg: more flags for replayd */
  int n_daemon_args;
} opts_t;

static opts_t O = {0, 2.0, 4, NULL, {0, 64}, 2, 0, {NULL}, 0};
static char target[64];
static rdc_workload_t wl;

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

static void emit(const char *name, uint32_t batch, uint32_t streams, double value,
                 const char *unit) {
  if (O.json) {
    if (streams)
      printf("{\"name\": \"%s\", \"params\": {\"batch\": %u, \"streams\": %u}, \"value\": %.6g, "
             "\"unit\": \"%s\"}\n", name, batch, streams, value, unit);
    else
      printf("{\"name\": \"%s\", \"params\": {\"batch\": %u}, \"value\": %.6g, \"unit\": \"%s\"}\n",
             name, batch, value, unit);
  } else {
    printf("%-24s %6u %8u %16.2f %s\n", name, batch, streams, value, unit);
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* The daemon                                                          */
/* ------------------------------------------------------------------ */

static rdt_daemon_t daemon_;

static void start_daemon(void) {
  const char *args[16] = {"--threads", "2", "--max-memory", "4G"};
  int n = 4;
  for (int i = 0; i < O.n_daemon_args; i++) args[n++] = O.daemon_args[i];
  args[n] = NULL;
  /* A session of its own, as a daemon has under systemd or in another
   * terminal (the README's set-up): the scheduler then shares the CPUs
   * between the daemon and this load generator's many threads by group,
   * not thread by thread. */
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_grpc", .new_session = 1, .timeout_s = 6};
  bench_daemon_start(&daemon_, O.replayd, &o, NULL, 0);
  snprintf(target, sizeof target, "%s", daemon_.target);
}

/* ------------------------------------------------------------------ */
/* Workers                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  uint32_t batch;
  double t_end;
  uint64_t items;
  bench_lat_t lat; /* sample latencies */
  int failed;
} job_t;

static void *insert_worker(void *arg) {
  job_t *j = arg;
  rdc_client_t *c = bench_connect(target, 60);
  rdc_error_t err;
  bench_rows_t r;
  bench_rows_make(&r, j->batch);
  rdc_insert_stream_t *s;
  if (rdc_insert_stream_open(c, wl.id, wl.token, &s, &err)) {
    j->failed = 1;
  } else {
    uint64_t sent = 0;
    while (rd_clock_now() < j->t_end) {
      if (rdc_insert_stream_write(s, j->batch, r.cols, 5, NULL, &err)) {
        fprintf(stderr, "bench_grpc: write: %s\n", err.msg);
        j->failed = 1;
        break;
      }
      sent += j->batch;
    }
    uint64_t inserted = 0;
    if (rdc_insert_stream_close(s, &inserted, NULL, &err)) {
      fprintf(stderr, "bench_grpc: close: %s\n", err.msg);
      j->failed = 1;
    }
    j->items = inserted;
    if (!j->failed && inserted != sent) j->failed = 1;
  }
  rdc_close(c);
  bench_rows_free(&r);
  return NULL;
}

static void *sample_worker(void *arg) {
  job_t *j = arg;
  rdc_client_t *c = bench_connect(target, 10);
  bench_sample_t s;
  bench_sample_make(&s, j->batch);
  int64_t items = bench_sample_until(c, &wl, &s, j->batch, j->t_end, &j->lat);
  if (items < 0) j->failed = 1;
  else j->items = (uint64_t)items;
  bench_sample_free(&s);
  rdc_close(c);
  return NULL;
}

/* Run S workers for O.seconds; returns items/s (negative on failure). */
static double run(void *(*fn)(void *), uint32_t batch, uint32_t streams, double *p50,
                  double *p99) {
  job_t *jobs = calloc(streams, sizeof *jobs);
  pthread_t *th = calloc(streams, sizeof *th);
  double t0 = rd_clock_now();
  for (uint32_t i = 0; i < streams; i++) {
    jobs[i].batch = batch;
    jobs[i].t_end = t0 + O.seconds;
    pthread_create(&th[i], NULL, fn, &jobs[i]);
  }
  uint64_t items = 0;
  size_t n_lat = 0;
  int failed = 0;
  for (uint32_t i = 0; i < streams; i++) {
    pthread_join(th[i], NULL);
    items += jobs[i].items;
    n_lat += jobs[i].lat.n;
    failed |= jobs[i].failed;
  }
  double elapsed = rd_clock_now() - t0;
  if (p50 && n_lat) {
    double *all = malloc(n_lat * sizeof *all);
    size_t k = 0;
    for (uint32_t i = 0; i < streams; i++) {
      memcpy(all + k, jobs[i].lat.v, jobs[i].lat.n * sizeof *all);
      k += jobs[i].lat.n;
    }
    qsort(all, n_lat, sizeof *all, cmp_double);
    *p50 = all[n_lat / 2];
    *p99 = all[(size_t)((double)n_lat * 0.99)];
    free(all);
  }
  for (uint32_t i = 0; i < streams; i++) free(jobs[i].lat.v);
  free(jobs);
  free(th);
  return failed ? -1 : (double)items / elapsed;
}

/* The insert load, in a process of its own: hundreds of actors are other
 * processes (other machines, usually), and a sampler thread that shared a
 * process with 64 busy insert threads would measure its own scheduling
 * behind them, not the server. The child runs `--insert-load` below. */
static pid_t start_load(const char *self, uint32_t streams, uint32_t batch, double seconds,
                        int report_fd) {
  char s_streams[16], s_batch[16], s_seconds[32], s_fd[16];
  snprintf(s_fd, sizeof s_fd, "%d", report_fd);
  snprintf(s_streams, sizeof s_streams, "%u", streams);
  snprintf(s_batch, sizeof s_batch, "%u", batch);
  snprintf(s_seconds, sizeof s_seconds, "%.3f", seconds);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setsid(); /* its own session, as actors started elsewhere have */
    execl("/proc/self/exe", self, "--insert-load", target, wl.id, wl.token, s_streams, s_batch,
          s_seconds, s_fd, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* --insert-load TARGET ID TOKEN STREAMS BATCH SECONDS FD: the child's side;
 * writes "ROWS SECONDS" (what the streams inserted) to FD at the end. */
static int insert_load_main(char **a) {
  snprintf(target, sizeof target, "%s", a[0]);
  snprintf(wl.id, sizeof wl.id, "%s", a[1]);
  snprintf(wl.token, sizeof wl.token, "%s", a[2]);
  uint32_t streams = (uint32_t)atoi(a[3]), batch = (uint32_t)atoi(a[4]);
  double seconds = atof(a[5]);
  if (streams == 0 || streams > 512 || batch == 0 || seconds <= 0) return 2;
  int fd = atoi(a[6]);
  job_t *jobs = calloc(streams, sizeof *jobs);
  pthread_t *th = calloc(streams, sizeof *th);
  double t0 = rd_clock_now(), t_end = t0 + seconds;
  for (uint32_t i = 0; i < streams; i++) {
    jobs[i].batch = batch;
    jobs[i].t_end = t_end;
    pthread_create(&th[i], NULL, insert_worker, &jobs[i]);
  }
  int failed = 0;
  uint64_t rows = 0;
  for (uint32_t i = 0; i < streams; i++) {
    pthread_join(th[i], NULL);
    failed |= jobs[i].failed;
    rows += jobs[i].items;
  }
  char msg[64];
  int n = snprintf(msg, sizeof msg, "%" PRIu64 " %.6f\n", rows, rd_clock_now() - t0);
  if (write(fd, msg, (size_t)n) != n) failed = 1;
  free(jobs);
  free(th);
  return failed;
}

/* One sampler (batch 256) for O.seconds while `load` Insert streams of
 * batch 64 write as fast as the server takes them; *insert_rate: what
 * they inserted, transitions/s (0 without load). */
static int sample_under_load(const char *self, uint32_t load, double *p50, double *p99,
                             double *insert_rate) {
  pid_t child = 0;
  int fds[2] = {-1, -1};
  *insert_rate = 0;
  if (load) {
    if (pipe(fds) != 0) return -1;
    child = start_load(self, load, 64, O.seconds + 0.6, fds[1]);
    close(fds[1]);
    usleep(300000); /* the streams are open and writing before we sample */
  }
  double v = run(sample_worker, 256, 1, p50, p99);
  if (child > 0) {
    char buf[64] = "";
    FILE *f = fdopen(fds[0], "r");
    unsigned long long rows = 0;
    double secs = 0;
    if (f != NULL && fgets(buf, sizeof buf, f) != NULL && sscanf(buf, "%llu %lf", &rows, &secs) == 2
        && secs > 0)
      *insert_rate = (double)rows / secs;
    if (f != NULL) fclose(f);
    int st = 0;
    if (waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "bench_grpc: the insert load failed\n");
      return -1;
    }
  }
  return v < 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Baseline: the same operations on an in-process table               */
/* ------------------------------------------------------------------ */

static void baseline(uint32_t capacity) {
  rd_table_config_t c;
  rd_table_config_default(&c);
  c.capacity = capacity;
  rdt_cartpole_schema(&c.schema, BENCH_OBS, 0);
  rd_table_t t;
  if (rd_table_init(&t, &c, NULL)) return;
  bench_rows_t r;
  bench_rows_make(&r, 512);
  rd_cbuf_t cols[5];
  for (int f = 0; f < 5; f++) cols[f] = (rd_cbuf_t){r.cols[f].data, r.cols[f].bytes};
  uint64_t n = 0;
  double t0 = rd_clock_now();
  while (rd_clock_now() - t0 < O.seconds / 2) {
    rd_table_insert(&t, 512, cols, NULL, NULL, NULL);
    n += 512;
  }
  emit("baseline.table.insert", 512, 0, (double)n / (rd_clock_now() - t0), "transitions/s");
  uint64_t keys[512];
  double pr[512], w[512];
  uint8_t mem[512 * BENCH_ROW_BYTES];
  rd_buf_t out[5];
  size_t widths[5] = {16, 4, 4, 16, 1};
  uint8_t *p = mem;
  for (int f = 0; f < 5; f++) {
    out[f] = (rd_buf_t){p, 512 * widths[f]};
    p += 512 * widths[f];
  }
  rd_sample_out_t so = {keys, pr, w, out};
  n = 0;
  t0 = rd_clock_now();
  while (rd_clock_now() - t0 < O.seconds / 2) {
    rd_table_sample(&t, 512, 0.4, 0, &so, NULL);
    n += 512;
  }
  emit("baseline.table.sample", 512, 0, (double)n / (rd_clock_now() - t0), "transitions/s");
  bench_rows_free(&r);
  rd_table_free(&t);
}

int main(int argc, char **argv) {
  if (argc == 9 && strcmp(argv[1], "--insert-load") == 0) return insert_load_main(argv + 2);
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) O.json = 1;
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--replayd") == 0 && i + 1 < argc) O.replayd = argv[++i];
    else if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc) O.streams = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) O.seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--load-only") == 0) O.load_only = 1;
    else if (strcmp(argv[i], "--daemon-arg") == 0 && i + 1 < argc && O.n_daemon_args < 8)
      O.daemon_args[O.n_daemon_args++] = argv[++i];
    else if (strcmp(argv[i], "--load-streams") == 0 && i + 1 < argc) {
      /* a comma-separated list of L, each 0..512 */
      O.n_load = 0;
      for (char *t = strtok(argv[++i], ","); t && O.n_load < 4; t = strtok(NULL, ","))
        O.load_streams[O.n_load++] = (uint32_t)atoi(t);
    } else {
      fprintf(stderr, "usage: bench_grpc --replayd PATH [--json] [--quick] [--streams S] "
                      "[--seconds T] [--load-streams L[,L...]] [--load-only] "
                      "[--daemon-arg FLAG]...\n");
      return 2;
    }
  }
  for (uint32_t k = 0; k < O.n_load; k++)
    if (O.load_streams[k] > 512) {
      fprintf(stderr, "bench_grpc: --load-streams values are 0..512\n");
      return 2;
    }
  if (O.replayd == NULL || O.streams == 0 || O.streams > 64) {
    fprintf(stderr, "bench_grpc: --replayd PATH is required (streams 1..64)\n");
    return 2;
  }
  if (quick) O.seconds = 0.5;
  const uint32_t capacity = 1u << 20;
  start_daemon();
  rdc_client_t *c = bench_daemon_client(&daemon_, 30);
  rdc_spec_t spec;
  bench_rows_spec(&spec, "bench-cartpole", capacity);
  bench_register(c, NULL, &spec, &wl);
  rdc_close(c);

  if (!O.json) {
    time_t tt = time(NULL);
    printf("# bench_grpc: replayd over loopback, %u streams, %.1f s per figure, %s", O.streams,
           O.seconds, ctime(&tt));
    printf("%-24s %6s %8s %16s\n", "name", "batch", "streams", "value");
  }
  int rc = 0;
  if (!O.load_only) baseline(capacity);
  else { /* rows to sample from: half a second of one stream */
    double secs = O.seconds;
    O.seconds = 0.5;
    if (run(insert_worker, 512, 1, NULL, NULL) < 0) rc = 1;
    O.seconds = secs;
  }
  const uint32_t batches[3] = {1, 64, 512};
  for (int b = 0; b < (O.load_only ? 0 : 3); b++) {
    double v = run(insert_worker, batches[b], O.streams, NULL, NULL);
    if (v < 0) rc = 1;
    emit("grpc.insert", batches[b], O.streams, v, "transitions/s");
  }
  /* Sample at 2 streams (one per core) and at --streams: on a small
   * machine the tail latency shows oversubscription, not service time. */
  uint32_t sample_streams[2] = {2, O.streams};
  for (int k = 0; k < (O.load_only ? 0 : O.streams == 2 ? 1 : 2); k++) {
    double p50 = 0, p99 = 0;
    double v = run(sample_worker, 512, sample_streams[k], &p50, &p99);
    if (v < 0) rc = 1;
    emit("grpc.sample", 512, sample_streams[k], v, "transitions/s");
    emit("grpc.sample_p50", 512, sample_streams[k], p50 * 1e3, "ms");
    emit("grpc.sample_p99", 512, sample_streams[k], p99 * 1e3, "ms");
  }
  /* One sampler under L insert streams. Its own latency, not throughput:
   * the streams take the rest of the machine. */
  for (uint32_t k = 0; k < O.n_load; k++) {
    double p50 = 0, p99 = 0, inserted = 0;
    if (sample_under_load(argv[0], O.load_streams[k], &p50, &p99, &inserted) != 0) rc = 1;
    emit("grpc.sample_p50_under_insert_load", 256, O.load_streams[k], p50 * 1e3, "ms");
    emit("grpc.sample_p99_under_insert_load", 256, O.load_streams[k], p99 * 1e3, "ms");
    /* What the streams got through meanwhile: latency is not bought by
     * starving the actors. */
    if (O.load_streams[k]) emit("grpc.insert_under_sample_load", 64, O.load_streams[k], inserted,
                                "transitions/s");
  }
  bench_daemon_stop(&daemon_);
  return rc;
}
