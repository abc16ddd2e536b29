/* bench_durability.c - what durability costs (daemon/core/durable.h).
 *
 * In process (the daemon's library, a checkpoint directory under /tmp):
 *   durability.checkpoint_s      a checkpoint of R CartPole rows (41 bytes
 *                                each, capacity 2^20): snapshot in slices,
 *                                learner none, write, fsync, rename
 *   durability.checkpoint_stall_ms
 *                                the longest Sample(256) call of a thread
 *                                sampling in a loop while that checkpoint
 *                                runs; baseline.checkpoint_stall_ms: the
 *                                longest over as long a time without one
 *   durability.restore_s         a fresh workload restored from that file
 *   durability.journal_rows_s    the journal alone (no table, no gRPC): T = 8
 *                                and 64 threads each append a 512-row insert
 *                                record and wait for its fdatasync; params
 *                                prealloc = fallocate (the daemon's) or
 *                                zeroed (zeros written ahead), sync =
 *                                pipelined (the daemon's: a round written
 *                                while the one before syncs);
 *                                baseline.journal_rows_s sync = inline (each
 *                                write waits for its fdatasync), interleaved;
 *                                *.journal_commit_ms_max the longest round
 *                                (first write to fdatasync's end)
 * Over loopback against a real replayd (--replayd, as bench_grpc):
 *   grpc.insert                  rows/s of Insert streams of 512-row
 *                                messages (bench_grpc's grpc.insert), one
 *                                stream per client thread (one connection
 *                                each: actors), acknowledged at its end
 *   grpc.insert_batch            rows/s of InsertBatch(512) calls, each
 *                                waiting for its own acknowledgement
 *   Both into workloads of durability none, checkpoint and journal, the
 *   modes interleaved in one run, for S = 8 and 64 client threads
 *   (--streams); durability.journal_vs_none (params call = stream or
 *   unary) the journal's rate over none's. A journal-mode InsertBatch waits
 *   for the fdatasync that covers it, so its rate grows with the calls in
 *   flight that one fdatasync covers.
 *
 * usage: bench_durability [--json] [--quick] [--rows R] [--replayd PATH]
 *                         [--streams S[,S...]] [--seconds T] [--journal-commit-us US]
 *                         [--checkpoint-dir DIR] [--journal-direct 0|1]
 *   --checkpoint-dir: the daemon's (its journal on a tmpfs separates the
 *   daemon's cost from the disk's); --journal-direct: the daemon's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "config.h"
#include "durable.h"
#include "journal.h"
#include "rd_clock.h"
#include "bench_daemon.h"
#include "bench_rows.h"
#include "rdt_daemon.h"
#include "rdt_dir.h"
#include "rdt_unit.h"
#include "rd_rng.h"
#include "registry.h"
#include "replayd_client.h"
#include "workload.h"

#define ROW_BYTES 41

static struct {
  bool json, quick;
  uint64_t rows;
  const char *replayd;
  uint32_t streams[4]; /* the loopback runs' client threads, one run each */
  int n_streams;
  double seconds;
  const char *commit_us; /* the daemon's --journal-commit-us; NULL: its default */
  const char *direct;    /* the daemon's --journal-direct; NULL: its default */
  const char *ckpt_dir;  /* the daemon's --checkpoint-dir; NULL: under its state dir */
} O = {0, 0, 1000000, NULL, {8, 64}, 2, 2.0, NULL, NULL, NULL};

static char isa[32];

static void find_isa(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[4096];
  snprintf(isa, sizeof isa, "generic");
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    if (strstr(line, " avx512f")) snprintf(isa, sizeof isa, "avx512");
    else if (strstr(line, " avx2")) snprintf(isa, sizeof isa, "avx2");
    break;
  }
  if (f) fclose(f);
}

static void emit(const char *name, const char *params, double value, const char *unit) {
  bench_emit(O.json, name, params, value, unit);
}

/* ------------------------------------------------------------------ */
/* In process                                                          */
/* ------------------------------------------------------------------ */

static rd_workload_spec_t spec_of(void) {
  rd_workload_spec_t s;
  memset(&s, 0, sizeof s);
  s.name = "bench";
  s.fields = rdt_cartpole_field_specs;
  s.n_fields = 5;
  s.capacity = 1u << 20;
  s.seed = 5;
  s.durability = RD_DURABILITY_CHECKPOINT;
  s.has_checkpoint_interval = 1; /* no periodic checkpoint in the way */
  return s;
}

static void fill(rd_workload_t *w, uint64_t rows) {
  const uint32_t B = 65536;
  float *obs = xmalloc(B * 16), *rew = xmalloc(B * 4), *nxt = xmalloc(B * 16);
  int32_t *act = xmalloc(B * 4);
  uint8_t *done = xmalloc(B);
  double *prio = xmalloc(B * sizeof *prio);
  uint64_t s = 1;
  for (uint64_t k = 0; k < rows; k += B) {
    uint32_t n = rows - k < B ? (uint32_t)(rows - k) : B;
    for (uint32_t i = 0; i < n; i++) {
      for (int j = 0; j < 4; j++) obs[i * 4 + j] = nxt[i * 4 + j] = (float)(k + i + (uint64_t)j);
      act[i] = (int32_t)(i & 1);
      rew[i] = 1.0f;
      done[i] = (uint8_t)(i % 200 == 199);
      prio[i] = (double)rd_rng_below(&s, 1000) / 100.0;
    }
    rd_cbuf_t cols[5] = {{obs, n * 16u}, {act, n * 4u}, {rew, n * 4u}, {nxt, n * 16u}, {done, n}};
    rd_insert_batch_t b = {n, cols, 5, prio, n};
    rd_error_t e;
    if (rd_workload_insert(w, &b, NULL, NULL, &e) != RD_OK) die("insert: %s", e.msg);
  }
  free(obs);
  free(rew);
  free(nxt);
  free(act);
  free(done);
  free(prio);
}

/* A thread sampling 256 rows in a loop, noting the longest call. */
typedef struct {
  rd_workload_t *w;
  volatile int stop;
  double max_s;
  uint64_t calls;
  uint8_t *mem;
} sampler_t;

static int sample_alloc(void *arg, const rd_table_t *t, uint32_t n, rd_sample_out_t *out,
                        rd_error_t *err) {
  (void)t;
  (void)err;
  sampler_t *s = arg;
  static __thread rd_buf_t cols[5];
  static const size_t fb[5] = {16, 4, 4, 16, 1};
  uint8_t *p = s->mem;
  out->keys = (uint64_t *)p;
  out->probabilities = (double *)(p + 8 * n);
  out->weights = (double *)(p + 16 * n);
  p += 24 * n;
  for (int f = 0; f < 5; f++) {
    cols[f] = (rd_buf_t){p, n * fb[f]};
    p += n * fb[f];
  }
  out->cols = cols;
  return RD_OK;
}

static void *sampler_main(void *arg) {
  sampler_t *s = arg;
  s->mem = xmalloc(256 * (24 + ROW_BYTES));
  rd_sample_request_t q = {256, 1, 0.4, 0};
  while (!s->stop) {
    double t0 = rd_clock_now();
    rd_error_t e;
    if (rd_workload_sample(s->w, &q, sample_alloc, s, NULL, &e) != RD_OK) die("sample: %s", e.msg);
    double dt = rd_clock_now() - t0;
    if (dt > s->max_s) s->max_s = dt;
    s->calls++;
  }
  free(s->mem);
  return NULL;
}

/* The longest Sample while fn runs (or for `seconds` when fn is NULL). */
static double longest_sample(rd_workload_t *w, void (*fn)(void *), void *arg, double seconds) {
  sampler_t s = {w, 0, 0, 0, NULL};
  pthread_t th;
  pthread_create(&th, NULL, sampler_main, &s);
  usleep(50000);
  s.max_s = 0; /* from here on */
  if (fn) fn(arg);
  else usleep((useconds_t)(seconds * 1e6));
  s.stop = 1;
  pthread_join(th, NULL);
  return s.max_s;
}

typedef struct {
  rd_durable_t *d;
  rd_workload_t *w;
  rd_checkpoint_info_t info;
  double seconds;
} ck_t;

static void take_checkpoint(void *arg) {
  ck_t *c = arg;
  rd_error_t e;
  double t0 = rd_clock_now();
  if (rd_durable_checkpoint(c->d, c->w, &c->info, &e) != RD_OK) die("checkpoint: %s", e.msg);
  c->seconds = rd_clock_now() - t0;
}

static void in_process(void) {
  char dir[64];
  if (rdt_tmpdir(dir, sizeof dir, "bench_durable") != 0) die("mkdtemp: %s", strerror(errno));
  rd_config_t cfg;
  rd_config_defaults(&cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", dir);
  cfg.max_memory_bytes = UINT64_C(8) << 30;
  rd_error_t e;
  rd_durable_t *d;
  rd_registry_t *r;
  if (rd_durable_create(&d, &cfg, &e) != RD_OK) die("durable: %s", e.msg);
  if (rd_registry_create(&r, &cfg, NULL, &e) != RD_OK) die("registry: %s", e.msg);
  rd_registry_set_durable(r, d);
  rd_workload_spec_t spec = spec_of();
  rd_workload_t *w;
  if (rd_registry_register(r, &spec, NULL, &w, NULL, &e) != RD_OK) die("register: %s", e.msg);
  fill(w, O.rows);

  char params[128];
  snprintf(params, sizeof params, "\"rows\": %" PRIu64 ", \"row_bytes\": %d", O.rows, ROW_BYTES);
  /* A first checkpoint warms the page cache and the file system. */
  ck_t c = {d, w, {0}, 0};
  take_checkpoint(&c);
  double best = 1e30, stall = 0;
  int reps = O.quick ? 1 : 3;
  for (int i = 0; i < reps; i++) {
    double st = longest_sample(w, take_checkpoint, &c, 0);
    if (c.seconds < best) best = c.seconds;
    if (st > stall) stall = st;
  }
  emit("durability.checkpoint_s", params, best, "s");
  double base = longest_sample(w, NULL, NULL, best * reps);
  snprintf(params, sizeof params, "\"rows\": %" PRIu64 ", \"sample_batch\": 256", O.rows);
  emit("durability.checkpoint_stall_ms", params, stall * 1e3, "ms");
  emit("durability.checkpoint_lock_hold_ms", params, c.info.hold_max_s * 1e3, "ms");
  emit("baseline.checkpoint_stall_ms", params, base * 1e3, "ms");
  snprintf(params, sizeof params, "\"rows\": %" PRIu64 ", \"bytes\": %" PRIu64, O.rows,
           c.info.bytes);
  emit("durability.checkpoint_bytes", params, (double)c.info.bytes, "bytes");

  /* Restore: the same id, a new workload built as a restart builds it. */
  rd_workload_config_t wc;
  if (rd_workload_spec_resolve(&cfg, &spec, &wc, &e) != RD_OK) die("resolve: %s", e.msg);
  double t_restore = 1e30;
  for (int i = 0; i < reps; i++) {
    rd_wl_durable_t *wd;
    rd_workload_t *w2;
    if (rd_durable_prepare(d, w->id, &wc, &wd, &e) != RD_OK) die("prepare: %s", e.msg);
    if (rd_workload_new(&wc, NULL, "bench", NULL, 0, w->id, w->token_hash, 0, 1u << 26, &w2, &e))
      die("workload: %s", e.msg);
    w2->durable = wd;
    double t0 = rd_clock_now();
    rd_durable_restore(d, w2);
    double dt = rd_clock_now() - t0;
    if (rd_table_size(&w2->table) != O.rows) die("restored %" PRIu64 " rows", rd_table_size(&w2->table));
    if (dt < t_restore) t_restore = dt;
    rd_workload_free(w2);
  }
  snprintf(params, sizeof params, "\"rows\": %" PRIu64, O.rows);
  emit("durability.restore_s", params, t_restore, "s");
  rd_workload_unref(w);
  rd_registry_destroy(r);
  rd_durable_destroy(d);
  if (rdt_rmtree(dir) != 0) fprintf(stderr, "bench_durability: could not remove %s\n", dir);
}

/* What every client thread of a timed run starts with. */
typedef struct {
  double t_end;
  uint64_t rows;
  uint64_t refused; /* calls refused with RESOURCE_EXHAUSTED */
  int failed;
} worker_t;

/* n threads running fn for O.seconds, each on its item of items (size
 * bytes each, a worker_t first); rows/s over them all (*refused: their
 * refusals summed). Dies if one failed. */
static double run_workers(void *(*fn)(void *), void *items, size_t size, uint32_t n,
                          uint64_t *refused, const char *what) {
  pthread_t *th = calloc(n, sizeof *th);
  if (th == NULL) die("out of memory");
  double t0 = rd_clock_now();
  for (uint32_t i = 0; i < n; i++) {
    worker_t *wk = (worker_t *)(void *)((char *)items + i * size);
    *wk = (worker_t){t0 + O.seconds, 0, 0, 0};
    if (pthread_create(&th[i], NULL, fn, wk) != 0) die("pthread_create");
  }
  uint64_t rows = 0;
  int failed = 0;
  for (uint32_t i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    const worker_t *wk = (const worker_t *)(const void *)((const char *)items + i * size);
    rows += wk->rows;
    if (refused) *refused += wk->refused;
    failed |= wk->failed;
  }
  double dt = rd_clock_now() - t0;
  free(th);
  if (failed) die("%s failed", what);
  return (double)rows / dt;
}

/* ------------------------------------------------------------------ */
/* The journal alone                                                   */
/* ------------------------------------------------------------------ */

/* T threads each append a 512-row CartPole insert record (as the table's
 * observer does, one at a time) and wait until it is on disk, as
 * journal-mode InsertBatch calls do, without gRPC's CPU around them: the
 * committer's rounds and the disk under them. */
typedef struct {
  worker_t wk;
  rd_journal_t *j;
  pthread_mutex_t *mu; /* the table lock's part: appends in order, the lsn read right after */
} jthread_t;

static void *journal_main(void *arg) {
  jthread_t *t = arg;
  enum { B = 512 };
  static uint8_t obs[B * 16], act[B * 4], rew[B * 4], nxt[B * 16], dn[B];
  const rd_cbuf_t cols[5] = {{obs, sizeof obs}, {act, sizeof act}, {rew, sizeof rew},
                             {nxt, sizeof nxt}, {dn, sizeof dn}};
  rd_table_observer_t o = rd_journal_observer(t->j);
  while (rd_clock_now() < t->wk.t_end) {
    pthread_mutex_lock(t->mu);
    o.insert(o.arg, 0, B, 5, cols, NULL);
    uint64_t lsn = rd_journal_last_lsn(t->j);
    pthread_mutex_unlock(t->mu);
    rd_error_t e;
    if (rd_journal_sync(t->j, lsn, &e) != RD_OK) {
      fprintf(stderr, "bench_durability: journal: %s\n", e.msg);
      t->wk.failed = 1;
      break;
    }
    t->wk.rows += B;
  }
  return NULL;
}

/* rows/s made durable by T threads into a fresh journal under dir. */
static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

static double journal_rate(const char *dir, rd_journal_prealloc_t prealloc, int sync_inline,
                           int buffered, uint32_t T, double *commit_ms_max, double *cpu_ns,
                           int *direct) {
  char sub[PATH_MAX];
  if (snprintf(sub, sizeof sub, "%s/j", dir) >= (int)sizeof sub) die("path too long");
  if (mkdir(sub, 0700) != 0) die("mkdir %s: %s", sub, strerror(errno));
  rd_journal_config_t cfg = {200, UINT64_C(256) << 20, prealloc, sync_inline, buffered, NULL};
  rd_journal_t *j;
  rd_error_t e;
  if (rd_journal_open(&j, sub, 1, 1, &cfg, &e) != RD_OK) die("journal: %s", e.msg);
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  jthread_t *t = calloc(T, sizeof *t);
  if (t == NULL) die("out of memory");
  for (uint32_t i = 0; i < T; i++) {
    t[i].j = j;
    t[i].mu = &mu;
  }
  double c0 = cpu_s();
  double rate = run_workers(journal_main, t, sizeof *t, T, NULL, "a journal append");
  rd_journal_stats_t st;
  rd_journal_stats(j, &st);
  *commit_ms_max = st.commit_s_max * 1e3;
  *direct = st.direct;
  *cpu_ns = (cpu_s() - c0) / (double)(st.records * 512) * 1e9; /* 512 rows a record */
  rd_journal_close(j);
  free(t);
  if (rdt_rmtree(sub) != 0) die("could not remove %s", sub);
  return rate;
}

/* durability.journal_rows_s the daemon's way (space allocated ahead, each
 * round written while the one before it syncs), with zeros written ahead
 * instead, and baseline.journal_rows_s with each round's write waiting for
 * its fdatasync (one thread's write-then-sync rounds), interleaved. */
static void journal_alone(void) {
  char dir[PATH_MAX];
  if (O.ckpt_dir) {
    if (snprintf(dir, sizeof dir, "%s/bench_journal", O.ckpt_dir) >= (int)sizeof dir ||
        (mkdir(dir, 0700) != 0 && errno != EEXIST))
      die("cannot make a directory under %s", O.ckpt_dir);
  } else if (rdt_tmpdir(dir, sizeof dir, "bench_journal") != 0) {
    die("mkdtemp: %s", strerror(errno));
  }
  /* The daemon's way (O_DIRECT where the file system allows it), through
   * the page cache, zeros written ahead, and the baseline. */
  enum { M = 4 };
  static const uint32_t threads[2] = {8, 64};
  for (int k = 0; k < 2; k++) {
    double sum[M] = {0}, cmax[M] = {0}, cpu[M] = {0};
    int direct[M] = {0};
    int rounds = O.quick ? 1 : 3;
    for (int r = 0; r < rounds; r++)
      for (int m = 0; m < M; m++) { /* interleaved */
        double c, ns;
        sum[m] += journal_rate(dir, m == 2 ? RD_JOURNAL_ZEROED : RD_JOURNAL_FALLOCATE, m == 3,
                               m != 0, threads[k], &c, &ns, &direct[m]) / rounds;
        cpu[m] += ns / rounds;
        if (c > cmax[m]) cmax[m] = c;
      }
    for (int m = 0; m < M; m++) {
      char params[192];
      snprintf(params, sizeof params,
               "\"prealloc\": \"%s\", \"sync\": \"%s\", \"io\": \"%s\", \"threads\": %u, "
               "\"batch\": 512", m == 2 ? "zeroed" : "fallocate",
               m == 3 ? "inline" : "pipelined", direct[m] ? "direct" : "buffered", threads[k]);
      emit(m == 3 ? "baseline.journal_rows_s" : "durability.journal_rows_s", params, sum[m],
           "rows/s");
      emit(m == 3 ? "baseline.journal_commit_ms_max" : "durability.journal_commit_ms_max",
           params, cmax[m], "ms");
      emit(m == 3 ? "baseline.journal_cpu_ns" : "durability.journal_cpu_ns", params, cpu[m],
           "ns/row");
    }
  }
  if (rdt_rmtree(dir) != 0) fprintf(stderr, "bench_durability: could not remove %s\n", dir);
}

/* ------------------------------------------------------------------ */
/* Over loopback                                                       */
/* ------------------------------------------------------------------ */

static rdt_daemon_t daemon_;
static void start_daemon(void) {
  const char *args[16] = {"--threads", "2", "--max-memory", "4G", "--checkpoint-interval-s", "0"};
  int n = 6;
  if (O.commit_us) {
    args[n++] = "--journal-commit-us";
    args[n++] = O.commit_us;
  }
  if (O.direct) {
    args[n++] = "--journal-direct";
    args[n++] = O.direct;
  }
  if (O.ckpt_dir) {
    args[n++] = "--checkpoint-dir";
    args[n++] = O.ckpt_dir;
  }
  args[n] = NULL;
  /* A session of its own, as under systemd (bench_grpc.c). */
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_durable_daemon", .new_session = 1};
  bench_daemon_start(&daemon_, O.replayd, &o, NULL, 0);
}

typedef struct {
  worker_t wk; /* refused: streams refused with RESOURCE_EXHAUSTED */
  const rdc_workload_t *w;
  int stream; /* an Insert stream, else InsertBatch calls */
} inserter_t;

static void *insert_main(void *arg) {
  inserter_t *in = arg;
  const uint32_t B = 512;
  bench_rows_t r;
  bench_rows_make(&r, B);
  const rdc_column_t *cols = r.cols;
  rdc_client_t *c = bench_daemon_client(&daemon_, 30);
  rdc_error_t e;
  if (in->stream) {
    /* bench_grpc's grpc.insert: Insert streams, each acknowledged at its
     * end. As an actor does, a stream refused with RESOURCE_EXHAUSTED
     * (journal mode: more than --journal-max-pending waiting for the disk)
     * backs off and starts another; its rows are not counted (they may
     * have been applied: the figure errs low). A stream carries at most
     * 64 messages, so a refusal loses little of the count. */
    while (rd_clock_now() < in->wk.t_end && !in->wk.failed) {
      rdc_insert_stream_t *st;
      if (rdc_insert_stream_open(c, in->w->id, in->w->token, &st, &e) != RDC_OK) {
        fprintf(stderr, "bench_durability: insert stream: %s\n", e.msg);
        in->wk.failed = 1;
        break;
      }
      uint64_t sent = 0, inserted = 0;
      int rc = RDC_OK;
      for (int m = 0; m < 64 && rd_clock_now() < in->wk.t_end; m++) {
        if ((rc = rdc_insert_stream_write(st, B, cols, 5, NULL, &e)) != RDC_OK) break;
        sent += B;
      }
      if (rc == RDC_OK) rc = rdc_insert_stream_close(st, &inserted, NULL, &e);
      else rdc_insert_stream_cancel(st);
      if (rc == RDC_RESOURCE_EXHAUSTED) {
        in->wk.refused++;
        struct timespec ts = {0, 2000000}; /* 2 ms */
        nanosleep(&ts, NULL);
      } else if (rc != RDC_OK || inserted != sent) {
        fprintf(stderr, "bench_durability: insert stream: %s\n", e.msg);
        in->wk.failed = 1;
      } else {
        in->wk.rows += inserted;
      }
    }
  } else { /* InsertBatch: each call acknowledged alone (in journal mode once on disk) */
    while (rd_clock_now() < in->wk.t_end) {
      if (rdc_insert_batch(c, in->w->id, in->w->token, B, cols, 5, NULL, NULL, &e) != RDC_OK) {
        fprintf(stderr, "bench_durability: insert: %s\n", e.msg);
        in->wk.failed = 1;
        break;
      }
      in->wk.rows += B;
    }
  }
  rdc_close(c);
  bench_rows_free(&r);
  return NULL;
}

static double insert_rate(const rdc_workload_t *w, uint32_t streams, int stream,
                          uint64_t *refused) {
  inserter_t *in = calloc(streams, sizeof *in);
  if (in == NULL) die("out of memory");
  for (uint32_t i = 0; i < streams; i++) {
    in[i].w = w;
    in[i].stream = stream;
  }
  double rate = run_workers(insert_main, in, sizeof *in, streams, refused, "an insert");
  free(in);
  return rate;
}

static void over_loopback(void) {
  start_daemon();
  rdc_client_t *c = bench_daemon_client(&daemon_, 30);
  static const char *modes[3] = {"none", "checkpoint", "journal"};
  rdc_workload_t w[3];
  for (int m = 0; m < 3; m++) {
    char name[32];
    snprintf(name, sizeof name, "bench-%s", modes[m]);
    rdc_spec_t s;
    bench_rows_spec(&s, name, 1u << 20);
    snprintf(s.durability, sizeof s.durability, "%s", modes[m]);
    bench_register(c, NULL, &s, &w[m]);
  }
  rdc_close(c);
  /* grpc.insert is bench_grpc's figure: Insert streams, each acknowledged
   * once at its end (in journal mode when its last record is on disk);
   * grpc.insert_batch is InsertBatch calls, each waiting for its own
   * acknowledgement (in journal mode its own fdatasync round). */
  static const char *names[2] = {"grpc.insert", "grpc.insert_batch"};
  static const char *calls[2] = {"stream", "unary"};
  for (int k = 0; k < O.n_streams; k++) {
    const uint32_t S = O.streams[k];
    for (int call = 0; call < 2; call++) {
      double sum[3] = {0, 0, 0};
      uint64_t refused[3] = {0, 0, 0};
      int rounds = O.quick ? 1 : 3;
      for (int r = 0; r < rounds; r++) /* interleaved, so drift hits every mode alike */
        for (int m = 0; m < 3; m++)
          sum[m] += insert_rate(&w[m], S, call == 0, &refused[m]) / rounds;
      for (int m = 0; m < 3; m++) {
        char params[128];
        snprintf(params, sizeof params,
                 "\"durability\": \"%s\", \"batch\": 512, \"streams\": %u", modes[m], S);
        emit(names[call], params, sum[m], "rows/s");
        if (refused[m] > 0) /* backed off and retried: "retry later" */
          emit("durability.insert_refused", params, (double)refused[m], "calls");
      }
      char params[96];
      snprintf(params, sizeof params, "\"call\": \"%s\", \"batch\": 512, \"streams\": %u",
               calls[call], S);
      emit("durability.journal_vs_none", params, sum[2] / sum[0], "ratio");
    }
  }
  bench_daemon_stop(&daemon_);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_durability [--json] [--quick] [--rows R] [--replayd PATH]\n"
             "                        [--streams S[,S...]] [--seconds T] [--journal-commit-us US]\n"
             "                        [--checkpoint-dir DIR] [--journal-direct 0|1]\n");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (bench_common_opt(argc, argv, &i, &O.json, &O.quick, NULL, usage)) continue;
    if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
      O.rows = bench_parse_u32("--rows", argv[++i], 1, 1u << 20);
    else if (strcmp(argv[i], "--replayd") == 0 && i + 1 < argc) O.replayd = argv[++i];
    else if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc) { /* S[,S...] */
      O.n_streams = 0;
      for (char *p = argv[++i]; *p && O.n_streams < 4;) {
        O.streams[O.n_streams++] = (uint32_t)strtoul(p, &p, 10);
        if (*p == ',') p++;
        else if (*p) die("--streams takes counts separated by commas");
      }
    }
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) O.seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--journal-direct") == 0 && i + 1 < argc) O.direct = argv[++i];
    else if (strcmp(argv[i], "--checkpoint-dir") == 0 && i + 1 < argc) O.ckpt_dir = argv[++i];
    else if (strcmp(argv[i], "--journal-commit-us") == 0 && i + 1 < argc) {
      bench_parse_u32("--journal-commit-us", argv[i + 1], 0, 1000000);
      O.commit_us = argv[++i];
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (O.quick && O.rows == 1000000) O.rows = 100000;
  if (O.quick) O.seconds = 1.0;
  if (O.rows == 0 || O.rows > (1u << 20) || O.n_streams == 0) die("bad --rows or --streams");
  for (int k = 0; k < O.n_streams; k++)
    if (O.streams[k] == 0 || O.streams[k] > 256) die("--streams counts are 1..256");
  find_isa();
  if (!O.json) {
    char cpu[128], load[32], when[64];
    cpu_model(cpu, sizeof cpu);
    load_average(load, sizeof load);
    utc_now(when, sizeof when);
    printf("bench_durability: %s, %s, %s, load %s\n", when, cpu, isa, load);
    printf("%-34s %-44s %14s\n", "figure", "params", "value");
  }
  in_process();
  journal_alone();
  if (O.replayd) over_loopback();
  else if (!O.json) printf("(no --replayd: the loopback figures are skipped)\n");
  return 0;
}
