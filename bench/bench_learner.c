/* bench_learner.c - gradient steps per second of the CPU learner
 * (backends/cpu/learner.h) against the same step in PyTorch.
 *
 * Shapes (papers/001 Table III; §II-A "training throughput" is gradient
 * steps per second, GPS; defined in learner_shapes.h, shared with
 * bench_loop.c):
 *   cartpole_ddpg  actor 4-8-8-1 (tanh out), critic 5-8-8-1
 *   cartpole_dqn   Q network 4-64-64-2, double DQN
 *   hopper_ddpg    actor 11-256-256-3 (tanh out), critic 14-256-256-1
 * relu hidden layers, Adam (lr 1e-3), grad-norm clip 10, Polyak tau 0.005,
 * IS weights in (0.2, 1], discount 0.99 with every fifth row terminal.
 *
 * Method. Inputs are synthetic (Philox, fixed seed), generated before
 * timing into a pool of 4 batches that the steps cycle through. Before
 * timing, each shape and batch is checked: the step succeeds, its |delta|
 * are finite, and with T threads the first step's weights are bit-identical
 * to one thread's (the learner's determinism contract). One measurement: a
 * warm-up of at least warm-up time and 2 steps (which sizes the
 * repetitions), then `reps` repetitions of about the minimum time each; the
 * result is the median repetition in steps/s (CLOCK_MONOTONIC).
 *
 * Baseline. With --pytorch, bench/pytorch_learner.py (run by /usr/bin/python3)
 * times the same step in PyTorch for every setting of torch threads,
 * OMP_WAIT_POLICY, OPENBLAS_NUM_THREADS and OPENBLAS_CORETYPE (one worker
 * process per setting, kept alive); per point it picks the setting with the
 * best median and times that setting again, and the second timing is the
 * baseline (the first, the largest of many noisy medians, overstates it;
 * the script says why; JSON params.screen_value keeps it). The table then
 * shows ours / PyTorch per point and the targets.
 * Point by point, PyTorch's settings are timed first and the C learner right
 * after, so that on a shared machine both sides see the same load; the
 * script answers only once its workers' threads have stopped using CPU, so
 * no side is timed beside the other's leftover spinning threads.
 *
 * Threads. The learner's threads are an OpenMP team. Unless OMP_WAIT_POLICY
 * is already set, the program re-executes itself with OMP_WAIT_POLICY=passive:
 * on this project's VMs an OpenMP thread left spinning between regions
 * (libgomp's default) stalls the calling thread for whole 4 ms scheduler
 * ticks whenever another process is busy (measured: a 0.1 ms CartPole DQN
 * step took 40 ms with 2 threads), while a sleeping one only delays the
 * region it is woken for, which the learner detects and then stays on one
 * thread for a while (nn.h). The PyTorch baseline tries both policies.
 *
 * Output: an aligned table (default) or, with --json, one JSON object per
 * line and nothing else on stdout (the baseline's lines included). Run with
 * --help for the options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "learner.h"
#include "learner_pool.h"
#include "learner_shapes.h"
#include "bench_util.h"
#include "rd_clock.h"
#include "rd_error.h"
#include "rd_philox.h"

#ifndef RD_BENCH_DIR
#define RD_BENCH_DIR "bench"
#endif

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Targets                                                             */
/* ------------------------------------------------------------------ */

/* The project's targets against the best PyTorch setting (docs/benchmarks.md):
 * >= 10x for the CartPole shapes and >= 2x for Hopper at batch <= 256,
 * >= 1.2x for every shape at batch >= 2048. 0: none. */
static double target_ratio(const shape_t *s, uint32_t batch) {
  if (batch <= 256) return strcmp(s->name, "hopper_ddpg") == 0 ? 2.0 : 10.0;
  if (batch >= 2048) return 1.2;
  return 0.0;
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  bool json, quick, pytorch;
  bool shape_on[N_SHAPES];
  bench_list_t batch, threads;
  bench_timing_t timing;
  const char *script;
} opts_t;

static void usage(FILE *f) {
  fputs(
      "usage: bench_learner [--json] [--quick] [--shape NAME] [--batch B] [--threads T]\n"
      "                     [--pytorch] [--pytorch-script PATH] [--time-ms MS]\n"
      "\n"
      "Gradient steps per second of the CPU learner (DQN, DDPG) on the shapes of\n"
      "papers/001 Table III, optionally against the same step in PyTorch.\n"
      "\n"
      "  --json         one JSON object per line on stdout, nothing else\n"
      "  --quick        batches 32,2048, 40 ms per repetition, median of 3\n"
      "                 (default: batches 32,256,2048,16384, 250 ms, median of 5)\n"
      "  --shape NAME   only this shape: cartpole_ddpg, cartpole_dqn or hopper_ddpg\n"
      "                 (repeatable)\n"
      "  --batch B      only this batch size (repeatable)\n"
      "  --threads T    only this thread count (repeatable; default 1 and 2)\n"
      "  --pytorch      also run bench/pytorch_learner.py (same shapes and batches, every\n"
      "                 thread/OpenMP/OpenBLAS setting; per point the best one, timed\n"
      "                 again) with\n"
      "                 /usr/bin/python3 and print ours / PyTorch per point\n"
      "  --pytorch-script PATH  the script (default " RD_BENCH_DIR "/pytorch_learner.py)\n"
      "  --time-ms MS   minimum time of one repetition\n",
      f);
}

static void parse_opts(opts_t *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->script = RD_BENCH_DIR "/pytorch_learner.py";
  double time_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_common_opt(argc, argv, &i, &o->json, &o->quick, &time_ms, usage)) continue;
    if (learner_opt(argc, argv, &i, o->shape_on, &o->batch, RD_MLP_MAX_BATCH, &o->threads))
      continue;
    if (strcmp(argv[i], "--pytorch") == 0) {
      o->pytorch = true;
    } else if ((v = bench_opt(argc, argv, &i, "--pytorch-script"))) {
      o->script = v;
      o->pytorch = true;
    } else {
      bench_unknown_opt(argv[i], usage);
    }
  }
  learner_opts_default(o->shape_on, &o->batch, o->quick);
  if (o->threads.n == 0) {
    bench_list_add(&o->threads, "--threads", 1);
    bench_list_add(&o->threads, "--threads", 2);
  }
  bench_timing_init(&o->timing, time_ms, o->quick, 0.040, 0.250, 0.020, 0.100);
}

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  const shape_t *shape;
  uint32_t batch, threads;
  double gps;
} result_t;

typedef struct {
  char shape[32];
  uint32_t batch, threads;
  char setting[192];
  char blas[160], blas_core[48]; /* the BLAS the best setting's PyTorch ran on */
  double gps;    /* the best setting timed again */
  double screen; /* its median in the screen of every setting (NAN: not given) */
} baseline_t;

static result_t *results;
static size_t n_results, cap_results;
static baseline_t *baselines;
static size_t n_baselines, cap_baselines;

static void add_result(const shape_t *s, uint32_t batch, uint32_t threads, double gps) {
  if (n_results == cap_results) {
    cap_results = cap_results ? 2 * cap_results : 64;
    results = realloc(results, cap_results * sizeof *results);
    if (results == NULL) die("out of memory");
  }
  results[n_results++] = (result_t){s, batch, threads, gps};
}

static const baseline_t *find_baseline(const shape_t *s, uint32_t batch) {
  for (size_t i = 0; i < n_baselines; i++)
    if (strcmp(baselines[i].shape, s->name) == 0 && baselines[i].batch == batch)
      return &baselines[i];
  return NULL;
}

/* ------------------------------------------------------------------ */
/* The PyTorch baseline                                                */
/* ------------------------------------------------------------------ */

/* The string value of "key": "..." in a JSON line (no escapes in ours). */
static bool json_str(const char *line, const char *key, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": \"", key);
  const char *p = strstr(line, pat);
  if (p == NULL) return false;
  p += strlen(pat);
  const char *q = strchr(p, '"');
  if (q == NULL || (size_t)(q - p) >= cap) return false;
  memcpy(out, p, (size_t)(q - p));
  out[q - p] = '\0';
  return true;
}

static bool json_num(const char *line, const char *key, double *out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(line, pat);
  if (p == NULL) return false;
  char *end;
  *out = strtod(p + strlen(pat), &end);
  return end != p + strlen(pat);
}

/* The script in --serve mode: one worker per PyTorch setting stays alive;
 * each "shape batch" line we write is timed in every setting and answered
 * with the best one's line. */
typedef struct {
  pid_t pid;
  FILE *to, *from;
  char blas[160]; /* the script's first line: the BLAS its PyTorch runs on */
} baseline_proc_t;

static void pytorch_start(const opts_t *o, baseline_proc_t *bp) {
  if (access(o->script, R_OK) != 0) die("cannot read the baseline script %s", o->script);
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) die("pipe: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    char *args[] = {"/usr/bin/python3", (char *)o->script, "--serve", o->quick ? "--quick" : NULL,
                    NULL};
    execv("/usr/bin/python3", args);
    fprintf(stderr, "bench_learner: cannot run /usr/bin/python3: %s\n", strerror(errno));
    _exit(127);
  }
  close(in[0]), close(out[1]);
  bp->pid = pid;
  bp->to = fdopen(in[1], "w");
  bp->from = fdopen(out[0], "r");
  if (bp->to == NULL || bp->from == NULL) die("fdopen: %s", strerror(errno));
  fprintf(stderr, "bench_learner: baseline: /usr/bin/python3 %s --serve%s\n", o->script,
          o->quick ? " --quick" : "");
  /* Its first line names the BLAS; it exits 3 instead when that is the
   * reference BLAS, which would make every ratio against it meaningless. */
  char line[1024];
  if (fgets(line, sizeof line, bp->from) == NULL || !json_str(line, "name", bp->blas,
                                                               sizeof bp->blas)) {
    int st;
    waitpid(bp->pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
      die("the PyTorch baseline refused to run on the reference BLAS (see above): install "
          "an optimized one (scripts/install-deps bench)");
    die("the baseline script did not say which BLAS it runs on");
  }
}

static void pytorch_point(baseline_proc_t *bp, const shape_t *s, uint32_t batch) {
  fprintf(bp->to, "%s %u\n", s->name, batch);
  fflush(bp->to);
  char line[1024];
  while (fgets(line, sizeof line, bp->from)) {
    if (strstr(line, "\"baseline.pytorch.gps\"") == NULL) continue;
    baseline_t b;
    memset(&b, 0, sizeof b);
    double bt, threads;
    if (!json_str(line, "shape", b.shape, sizeof b.shape) ||
        !json_str(line, "setting", b.setting, sizeof b.setting) ||
        !json_str(line, "blas", b.blas, sizeof b.blas) ||
        !json_str(line, "blas_core", b.blas_core, sizeof b.blas_core) ||
        !json_num(line, "batch", &bt) || !json_num(line, "threads", &threads) ||
        !json_num(line, "value", &b.gps))
      die("cannot parse the baseline's line: %s", line);
    if (!json_num(line, "screen_value", &b.screen)) b.screen = NAN;
    b.batch = (uint32_t)bt;
    b.threads = (uint32_t)threads;
    if (strcmp(b.shape, s->name) != 0 || b.batch != batch)
      die("the baseline answered for %s/%u, not %s/%u", b.shape, b.batch, s->name, batch);
    if (n_baselines == cap_baselines) {
      cap_baselines = cap_baselines ? 2 * cap_baselines : 32;
      baselines = realloc(baselines, cap_baselines * sizeof *baselines);
      if (baselines == NULL) die("out of memory");
    }
    baselines[n_baselines++] = b;
    return;
  }
  die("the baseline script ended without an answer for %s/%u", s->name, batch);
}

static void pytorch_stop(baseline_proc_t *bp) {
  fclose(bp->to);
  fclose(bp->from);
  int st;
  if (waitpid(bp->pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    die("the baseline script failed");
}

/* ------------------------------------------------------------------ */
/* Measurement                                                         */
/* ------------------------------------------------------------------ */


static void step_or_die(rd_learner_t *l, const rd_batch_t *b, float *td) {
  rd_error_t err;
  int rc = rd_learner_step(l, b, td, NULL, &err);
  if (rc) die("rd_learner_step failed: %s: %s", rd_err_name(rc), err.msg);
}

static void learner_or_die(rd_learner_t *l, const rd_learner_config_t *c) {
  rd_error_t err;
  int rc = rd_learner_init(l, c, &err);
  if (rc) die("rd_learner_init failed: %s: %s", rd_err_name(rc), err.msg);
}

/* Before timing: one step succeeds with finite |delta|, and T threads give
 * the bits of one thread. */
static void check_point(const shape_t *s, uint32_t batch, const opts_t *o, const learner_pool_t *p) {
  rd_learner_config_t c;
  make_config(s, batch, 1, &c);
  rd_learner_t ref;
  learner_or_die(&ref, &c);
  step_or_die(&ref, &p->b[0], p->td);
  for (uint32_t i = 0; i < batch; i++)
    if (!(p->td[i] >= 0 && p->td[i] < 1e30f))
      die("check FAILED (%s, batch %u): |delta|[%u] = %g", s->name, batch, i, (double)p->td[i]);
  for (size_t h = 0; h < o->threads.n; h++) {
    if (o->threads.v[h] == 1) continue;
    make_config(s, batch, o->threads.v[h], &c);
    rd_learner_t l;
    learner_or_die(&l, &c);
    step_or_die(&l, &p->b[0], p->td);
    for (int k = 0; k < ref.n_nets; k++)
      if (memcmp(l.net[k].params, ref.net[k].params, ref.net[k].n_params * sizeof(float)) != 0)
        die("check FAILED (%s, batch %u): %u threads give other weights than 1", s->name, batch,
            o->threads.v[h]);
    rd_learner_free(&l);
  }
  rd_learner_free(&ref);
}

typedef struct {
  rd_learner_t *l;
  const learner_pool_t *p;
} step_ctx_t;

static void step_unit(void *ctx, uint64_t it) {
  step_ctx_t *x = ctx;
  step_or_die(x->l, &x->p->b[it % LEARNER_POOL], x->p->td);
}

/* Steps per second (the median repetition's). */
static double measure(rd_learner_t *l, const learner_pool_t *p, const opts_t *o) {
  step_ctx_t x = {l, p};
  return 1.0 / bench_seconds_per_unit(step_unit, &x, &o->timing);
}

static void run_point(const shape_t *s, uint32_t batch, const opts_t *o, bool progress) {
  rd_learner_config_t c;
  make_config(s, batch, 1, &c);
  learner_pool_t p;
  learner_pool_init(&p, &c, batch);
  check_point(s, batch, o, &p);
  for (size_t h = 0; h < o->threads.n; h++) {
    uint32_t T = o->threads.v[h];
    make_config(s, batch, T, &c);
    rd_learner_t l;
    learner_or_die(&l, &c);
    double gps = measure(&l, &p, o);
    rd_learner_free(&l);
    add_result(s, batch, T, gps);
    if (progress) {
      fprintf(stderr, "\r\033[K  %-14s batch %-6u threads %u: %10.1f steps/s", s->name, batch, T,
              gps);
      fflush(stderr);
    }
  }
  learner_pool_free(&p);
}

/* ------------------------------------------------------------------ */
/* Report                                                              */
/* ------------------------------------------------------------------ */

static const char *gemm_isa(void) {
  rd_learner_config_t c;
  make_config(&shapes[0], 1, 1, &c);
  rd_learner_t l;
  learner_or_die(&l, &c);
  static char isa[16];
  snprintf(isa, sizeof isa, "%s", rd_mlp_isa(&l.net[0]));
  rd_learner_free(&l);
  return isa;
}

static void print_json(void) {
  for (size_t i = 0; i < n_baselines; i++) {
    const baseline_t *b = &baselines[i];
    printf("{\"name\": \"baseline.pytorch.gps\", \"params\": {\"shape\": \"%s\", \"batch\": %u, "
           "\"threads\": %u, \"setting\": \"%s\", \"blas\": \"%s\", \"blas_core\": \"%s\"",
           b->shape, b->batch, b->threads, b->setting, b->blas, b->blas_core);
    if (!isnan(b->screen)) printf(", \"screen_value\": %.2f", b->screen);
    printf("}, \"value\": %.2f, \"unit\": \"steps/s\"}\n", b->gps);
  }
  for (size_t i = 0; i < n_results; i++) {
    const result_t *r = &results[i];
    printf("{\"name\": \"learner.gps\", \"params\": {\"shape\": \"%s\", \"batch\": %u, "
           "\"threads\": %u}, \"value\": %.2f, \"unit\": \"steps/s\"}\n",
           r->shape->name, r->batch, r->threads, r->gps);
  }
}

static void print_table(void) {
  bool base = n_baselines > 0;
  printf("%-14s %6s %7s %12s %10s", "shape", "batch", "threads", "steps/s", "ms/step");
  if (base) printf(" %12s %10s %8s %8s", "pytorch/s", "pt ms", "ratio", "target");
  printf("\n");
  int met = 0, missed = 0;
  uint32_t tmax = 0; /* targets are for the most threads run (2 by default) */
  for (size_t i = 0; i < n_results; i++)
    if (results[i].threads > tmax) tmax = results[i].threads;
  for (size_t i = 0; i < n_results; i++) {
    const result_t *r = &results[i];
    if (i > 0 && (results[i - 1].shape != r->shape || results[i - 1].batch != r->batch))
      putchar('\n');
    printf("%-14s %6u %7u %12.1f %10.3f", r->shape->name, r->batch, r->threads, r->gps,
           1e3 / r->gps);
    const baseline_t *b = base ? find_baseline(r->shape, r->batch) : NULL;
    if (b != NULL) {
      double ratio = r->gps / b->gps, t = target_ratio(r->shape, r->batch);
      char tgt[32] = "-";
      if (t > 0) {
        bool ok = ratio >= t;
        snprintf(tgt, sizeof tgt, ">=%.3gx %s", t, ok ? "met" : "MISSED");
        if (r->threads == tmax) ok ? met++ : missed++;
      }
      printf(" %12.1f %10.3f %7.2fx %s", b->gps, 1e3 / b->gps, ratio, tgt);
    }
    printf("\n");
  }
  if (base) {
    printf("\n# ratio = our steps/s / the best PyTorch setting's steps/s, same shape and batch;"
           "\n#   that setting picked by a screen of every setting, then timed again"
           "\n# PyTorch's BLAS: %s\n# PyTorch's best settings (OpenBLAS core; steps/s in the "
           "screen):\n",
           baselines[0].blas);
    for (size_t i = 0; i < n_baselines; i++) {
      char screen[32] = "-"; /* a script that gives no screen figure */
      if (!isnan(baselines[i].screen)) snprintf(screen, sizeof screen, "%.1f", baselines[i].screen);
      printf("#   %-14s batch %-6u %s (%s; %s)\n", baselines[i].shape, baselines[i].batch,
             baselines[i].setting, baselines[i].blas_core, screen);
    }
    printf("# targets at %u threads: %d met, %d missed\n", tmax, met, missed);
  }
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(&o, argc, argv);
  bench_omp_passive(argv);
  bool progress = isatty(STDERR_FILENO) && !o.json;
  FILE *info = o.json ? stderr : stdout;

  bench_machine_t m;
  bench_machine(&m);
  fprintf(info, "# bench_learner: GEMM %s, %s, %s, %ld CPUs (load %s), OMP_WAIT_POLICY=%s, "
                "%.0f ms per repetition, median of %d\n",
          gemm_isa(), m.date, m.cpu, m.cpus, m.load,
          getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "unset",
          o.timing.min_s * 1e3, o.timing.reps);
  fflush(info);

  baseline_proc_t bp = {0, NULL, NULL, ""};
  if (o.pytorch) {
    pytorch_start(&o, &bp);
    fprintf(info, "# PyTorch baseline's BLAS: %s\n", bp.blas);
    fflush(info);
  }
  for (size_t k = 0; k < N_SHAPES; k++) {
    if (!o.shape_on[k]) continue;
    for (size_t b = 0; b < o.batch.n; b++) {
      /* PyTorch's settings, then ours, point by point: both see the same load. */
      if (o.pytorch) pytorch_point(&bp, &shapes[k], o.batch.v[b]);
      run_point(&shapes[k], o.batch.v[b], &o, progress);
    }
  }
  if (o.pytorch) pytorch_stop(&bp);
  bench_end(info, progress);
  bench_report(o.json, print_json, print_table);
  free(results);
  free(baselines);
  return 0;
}
