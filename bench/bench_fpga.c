/* bench_fpga.c - the FPGA backend's figures, each labelled with what
 * produced it (issue 7, "Honesty": there is no FPGA board and no Vitis
 * toolchain here, so nothing below ran on an FPGA).
 *
 * Two kinds of figures, never mixed in one column or one JSON name:
 *
 * 1. MODEL PREDICTIONS (fpga.model.*, "source": "model"). Arithmetic only:
 *    the analytical model of papers/001 §VI-A2 / thesis 004 Eqs 4.1-4.4
 *    (backends/fpga/model.h) for the parts in backends/fpga/parts (U200,
 *    U250, U280), the shapes of bench/learner_shapes.h at batch 32, 256
 *    and 2048, a table of 10^6 items at fanout 16 (the paper's setting),
 *    fp32 and Adam as our learner. Per point: the replay module's (RMM)
 *    sample and update latency per batch and its bank parallelism S, the
 *    learner's train-step latency with its DP and PI, the resulting
 *    F-F-F steps/s, and the resources the model charges. Nothing is
 *    timed; these are what a board built as the model says would reach.
 *
 * 2. C-SIMULATION (fpga.csim.*, "source": "csim"), measured on this CPU.
 *    The kernels' own C code (backends/fpga/kernels: what HLS would
 *    synthesise) run as plain C:
 *    - the replay kernel as a table's replay module (rd_fpga_csim_rmm_ops,
 *      a build with S = 1), sample and update ns/item, against the CPU sum
 *      tree (rd_sumtree, the default table's module, one thread) on the
 *      same leaves and targets in the same run (baseline.cpu.rmm_*); next
 *      to them the kernel's structural cycle count per request
 *      (rd_fpga_csim_rmm_stats: from the batch's real loads per lane and
 *      bank, not an RTL simulation) and, for reference, the model's cycle
 *      formula for the same shape at S = 1;
 *    - the learner kernel's train-step (lrn_train_step, with the host
 *      mapping of backends/fpga/learner_host.h and the per-step checks of
 *      backends/fpga/learner_backend_fpga.c, whose "C-sim device" this is),
 *      against the CPU learner (rd_learner_step, one thread) on the same
 *      batches in the same run (baseline.cpu.learner_step_us).
 *    These are CPU timings of C code written for an FPGA. They say how fast
 *    the daemon's "fpga" C-simulation device runs here, not how fast an
 *    FPGA would be.
 *
 * Validation before timing (a failure prints why and exits 1): for each
 * capacity, the C-simulated tree and the CPU tree hold the same leaves and
 * total, pick the same leaf for 8192 targets (the edges 0 and total - 1,
 * exact prefix boundaries and uniform ones), and still do after one update
 * batch of 4096 items (repeated positions included); after timing both
 * trees pass their consistency checks. For each learner point, the first
 * step of the kernel and of the CPU learner from the same weights on the
 * same batch give the same |delta| within 1e-4 * max(1, max |delta|)
 * (kernels/learner.h states 1e-5 for one forward pass).
 *
 * Method (as bench_sumtree and bench_learner): inputs from fixed-seed
 * streams, generated before timing, cycled through pools (>= 64 batches and
 * >= 2^18 items for the trees, 4 batches for the learner); one measurement
 * is a warm-up that sizes a repetition, then `reps` repetitions of about
 * the minimum time; the figure is the median repetition (CLOCK_MONOTONIC).
 * Each C-simulation point is timed right after its CPU baseline, so both
 * see the same load.
 *
 * Output: readable tables (default) or, with --json, one JSON object per
 * line and nothing else on stdout. Run with --help for the options.
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
#include <unistd.h>

#include "bench_util.h"
#include "rd_clock.h"
#include "rd_rng.h"
#include "csim_rmm.h"
#include "kernels/learner.h"
#include "learner.h"
#include "learner_backend.h"
#include "learner_backend_fpga.h"
#include "learner_host.h"
#include "learner_pool.h"
#include "learner_shapes.h"
#include "model.h"
#include "rd_error.h"
#include "rd_philox.h"
#include "sumtree.h"

#ifndef RD_BENCH_FPGA_PARTS_DIR
#define RD_BENCH_FPGA_PARTS_DIR "backends/fpga/parts"
#endif

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

#define LEAF_MAX (UINT64_C(1) << 20)
/* A leaf value, uniform in [1, 2^20] (as bench_sumtree's). */
static uint64_t leaf_value(uint64_t *s) { return 1 + (rd_splitmix64(s) >> 44); }

static double pct(uint64_t used, uint64_t avail) {
  return avail ? 100.0 * (double)used / (double)avail : 0.0;
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  bool json, quick, model, csim;
  const char *parts;
  bench_timing_t timing;
} opts_t;

static void usage(FILE *f) {
  fputs(
      "usage: bench_fpga [--json] [--quick] [--only model|csim] [--parts DIR] [--time-ms MS]\n"
      "\n"
      "The FPGA backend's figures, each labelled with what produced it. No FPGA board\n"
      "and no Vitis toolchain exist here: nothing below runs on an FPGA.\n"
      "  model  predictions of the analytical model (backends/fpga/model.h) for the\n"
      "         parts in DIR and the shapes of bench/learner_shapes.h; no measurement\n"
      "  csim   the FPGA kernels' C code (C-simulation) timed on this CPU, against the\n"
      "         CPU sum tree and CPU learner in the same run: CPU timings, not FPGA ones\n"
      "\n"
      "  --json         one JSON object per line on stdout, nothing else\n"
      "  --quick        C-simulation: 15 ms per repetition, median of 3, learner at\n"
      "                 batch 32 only (default: 100 ms, median of 5, batches 32, 256);\n"
      "                 the model's points are the same (arithmetic, milliseconds)\n"
      "  --only WHAT    only the model's predictions or only the C-simulation\n"
      "  --parts DIR    part files (default " RD_BENCH_FPGA_PARTS_DIR ")\n"
      "  --time-ms MS   minimum time of one repetition\n",
      f);
}

static void parse_opts(opts_t *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->model = o->csim = true;
  o->parts = RD_BENCH_FPGA_PARTS_DIR;
  double time_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_common_opt(argc, argv, &i, &o->json, &o->quick, &time_ms, usage)) continue;
    if ((v = bench_opt(argc, argv, &i, "--only"))) {
      if (strcmp(v, "model") == 0)
        o->csim = false;
      else if (strcmp(v, "csim") == 0)
        o->model = false;
      else
        die("--only: '%s' is not model or csim", v);
    } else if ((v = bench_opt(argc, argv, &i, "--parts"))) {
      o->parts = v;
    } else {
      bench_unknown_opt(argv[i], usage);
    }
  }
  bench_timing_init(&o->timing, time_ms, o->quick, 0.015, 0.100, 0.005, 0.020);
}

/* ------------------------------------------------------------------ */
/* Measurement                                                         */
/* ------------------------------------------------------------------ */

/* Seconds per unit of work (a batch of an operation, or a train-step). */
static double measure(bench_unit_fn fn, void *ctx, const opts_t *o) {
  return bench_seconds_per_unit(fn, ctx, &o->timing);
}

static bool g_progress;

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
  if (!g_progress) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("\r\033[K  ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
}

/* ------------------------------------------------------------------ */
/* 1. Model predictions                                                */
/* ------------------------------------------------------------------ */

#define MODEL_CAPACITY 1000000u /* papers/001's tables hold 10^6 items */
#define MODEL_FANOUT 16u

static const uint32_t model_batches[] = {32, 256, 2048};
#define N_MODEL_BATCHES (sizeof model_batches / sizeof model_batches[0])

static const char *const res_name[5] = {"dsp", "lut", "ff", "bram36", "uram"};

static uint64_t res_get(const rd_fpga_res_t *r, int i) {
  switch (i) {
  case 0: return r->dsp;
  case 1: return r->lut;
  case 2: return r->ff;
  case 3: return r->bram36;
  default: return r->uram;
  }
}

/* The model's workload for a shape: the networks as the daemon's mapper
 * builds them (daemon/dse/placement.c rd_fpga_provider_workload: the learner
 * config's policy and critic specs), everything else the model's default
 * (fp32, Adam, the part's clock, the RMM in one SLR and the learner in the
 * rest). */
static void model_workload(const shape_t *s, uint32_t batch, rd_fpga_workload_t *w) {
  rd_learner_config_t c;
  make_config(s, batch, 1, &c);
  rd_fpga_workload_default(w);
  w->batch = batch;
  w->capacity = MODEL_CAPACITY;
  w->fanout = MODEL_FANOUT;
  rd_error_t err;
  if (rd_learner_policy_spec(&c, &w->net[0], &err) != RD_OK)
    die("%s: policy spec: %s", s->name, err.msg);
  if (s->algo == RD_ALGO_DQN) {
    w->algo = RD_FPGA_DQN;
    w->double_dqn = c.double_dqn;
  } else {
    w->algo = RD_FPGA_DDPG;
    if (rd_learner_critic_spec(&c, &w->net[1], &err) != RD_OK)
      die("%s: critic spec: %s", s->name, err.msg);
  }
  if (rd_fpga_workload_validate(w, &err) != RD_OK)
    die("%s batch %u: the model refuses the workload: %s", s->name, batch, err.msg);
}

/* The JSON params every model line shares. */
static void model_params(char *buf, size_t len, const rd_fpga_part_t *p, const shape_t *s,
                         uint32_t batch) {
  snprintf(buf, len,
           "\"part\": \"%.31s\", \"shape\": \"%.31s\", \"batch\": %u, \"capacity\": %u, "
           "\"fanout\": %u, \"source\": \"model\"",
           p->name, s->name, batch, MODEL_CAPACITY, MODEL_FANOUT);
}

static void model_point(const opts_t *o, const rd_fpga_part_t *p, const shape_t *s,
                        uint32_t batch, FILE *res_table, FILE *build_table) {
  rd_fpga_workload_t w;
  model_workload(s, batch, &w);
  rd_error_t rerr, lerr;
  rd_error_clear(&rerr);
  rd_error_clear(&lerr);
  /* The RMM alone first: an RMM that fits keeps its figures when the
   * learner does not (as the mapper's table, daemon/dse/placement.c). */
  rd_fpga_rmm_est_t r;
  const bool rmm_ok = rd_fpga_model_rmm(p, &w, &r, &rerr) == RD_OK;
  rd_fpga_estimate_t e;
  const bool est_ok = rd_fpga_model_estimate(p, &w, &e, &lerr) == RD_OK && e.has_learner;
  if (est_ok && rmm_ok && (e.rmm.s != r.s || e.rmm.sample_cycles != r.sample_cycles))
    die("model: %s %s batch %u: the RMM alone and in the estimate differ (S %u vs %u)", p->name,
        s->name, batch, r.s, e.rmm.s);
  const double t_rmm = rmm_ok ? r.sample_s + r.update_s : 0;
  const double t_l = est_ok ? e.learner.step_s : 0;
  /* F-F-F as the mapper predicts it (daemon/dse/mapper.h): relaxed pipeline
   * (D > 0), learner and RMM on their own SLRs, 1 / max(T_L, T_RMM);
   * strict loop (D = 0), 1 / (T_L + T_RMM), transfers left out. */
  const double gps = t_l > t_rmm ? 1 / t_l : 1 / t_rmm;
  const double gps_strict = 1 / (t_l + t_rmm);

  char pp[320];
  model_params(pp, sizeof pp, p, s, batch);
  if (o->json) {
    if (rmm_ok) {
      printf("{\"name\": \"fpga.model.rmm_sample_us\", \"params\": {%s, \"s\": %u, "
             "\"cycles\": %" PRIu64 ", \"clock_mhz\": %u, \"limit\": \"%s\"}, \"value\": %.4f, "
             "\"unit\": \"us\"}\n",
             pp, r.s, r.sample_cycles, r.clock_mhz, r.limit, r.sample_s * 1e6);
      printf("{\"name\": \"fpga.model.rmm_update_us\", \"params\": {%s, \"s\": %u, "
             "\"cycles\": %" PRIu64 ", \"clock_mhz\": %u, \"limit\": \"%s\", \"update_serial\": "
             "%d}, \"value\": %.4f, \"unit\": \"us\"}\n",
             pp, r.s, r.update_cycles, r.clock_mhz, r.limit, r.update_serial, r.update_s * 1e6);
      for (int i = 0; i < 5; i++)
        printf("{\"name\": \"fpga.model.rmm_used_pct\", \"params\": {%s, \"resource\": \"%s\", "
               "\"used\": %" PRIu64 ", \"available\": %" PRIu64 ", \"slrs\": 1}, "
               "\"value\": %.2f, \"unit\": \"%%\"}\n",
               pp, res_name[i], res_get(&r.used, i), res_get(&r.avail, i),
               pct(res_get(&r.used, i), res_get(&r.avail, i)));
    }
    if (est_ok) {
      const rd_fpga_learner_est_t *l = &e.learner;
      printf("{\"name\": \"fpga.model.learner_step_us\", \"params\": {%s, \"dp\": %u, "
             "\"pi\": %u, \"cycles\": %" PRIu64 ", \"clock_mhz\": %u, \"limit\": \"%s\"}, "
             "\"value\": %.4f, \"unit\": \"us\"}\n",
             pp, l->dp, l->pi, l->cycles, l->clock_mhz, l->limit, l->step_s * 1e6);
      for (int i = 0; i < 5; i++)
        printf("{\"name\": \"fpga.model.learner_used_pct\", \"params\": {%s, \"resource\": "
               "\"%s\", \"used\": %" PRIu64 ", \"available\": %" PRIu64 ", \"slrs\": %u}, "
               "\"value\": %.2f, \"unit\": \"%%\"}\n",
               pp, res_name[i], res_get(&l->used, i), res_get(&l->avail, i), l->slrs,
               pct(res_get(&l->used, i), res_get(&l->avail, i)));
    }
    if (rmm_ok && est_ok) {
      printf("{\"name\": \"fpga.model.gps\", \"params\": {%s, \"mapping\": \"F-F-F\", "
             "\"pipeline\": \"relaxed\"}, \"value\": %.1f, \"unit\": \"steps/s\"}\n",
             pp, gps);
      printf("{\"name\": \"fpga.model.gps_strict\", \"params\": {%s, \"mapping\": \"F-F-F\", "
             "\"pipeline\": \"strict\"}, \"value\": %.1f, \"unit\": \"steps/s\"}\n",
             pp, gps_strict);
    }
    if (!rmm_ok || !est_ok)
      fprintf(stderr, "# model: %s %s batch %u: %s%s%s\n", p->name, s->name, batch,
              rmm_ok ? "" : "RMM does not fit: ", rmm_ok ? "" : rerr.msg,
              est_ok ? "" : (lerr.msg[0] ? lerr.msg : "learner does not fit"));
    return;
  }

  /* Latency table row. */
  printf("%-5s %-14s %6u ", p->name, s->name, batch);
  if (rmm_ok)
    printf("%5u%s %10.3f %10.3f ", r.s, r.update_serial ? "*" : " ", r.sample_s * 1e6,
           r.update_s * 1e6);
  else
    printf("%6s %10s %10s ", "-", "-", "-");
  if (est_ok)
    printf("%3u %5u %11.3f ", e.learner.dp, e.learner.pi, e.learner.step_s * 1e6);
  else
    printf("%3s %5s %11s ", "-", "-", "-");
  if (rmm_ok && est_ok)
    printf("%11.0f %11.0f %s", gps, gps_strict, t_l >= t_rmm ? "learner" : "rmm");
  else
    printf("%11s %11s", "-", "-");
  printf("\n");
  if (!rmm_ok) printf("      RMM does not fit: %s\n", rerr.msg);
  if (!est_ok) printf("      learner does not fit: %s\n", lerr.msg[0] ? lerr.msg : "-");

  /* Resource table row, printed after the latency table. */
  fprintf(res_table, "%-5s %-14s %6u ", p->name, s->name, batch);
  for (int i = 0; i < 5; i++) {
    if (rmm_ok)
      fprintf(res_table, "%6.1f", pct(res_get(&r.used, i), res_get(&r.avail, i)));
    else
      fprintf(res_table, "%6s", "-");
  }
  fprintf(res_table, "  |");
  for (int i = 0; i < 5; i++) {
    if (est_ok)
      fprintf(res_table, "%6.1f", pct(res_get(&e.learner.used, i), res_get(&e.learner.avail, i)));
    else
      fprintf(res_table, "%6s", "-");
  }
  fprintf(res_table, "  %-8s %-8s", rmm_ok ? r.limit : "-", est_ok ? e.learner.limit : "-");
  if (est_ok)
    fprintf(res_table, " %u SLR%s, %u DSP", e.learner.slrs, e.learner.slrs == 1 ? "" : "s",
            (unsigned)e.learner.used.dsp);
  fprintf(res_table, "\n");

  /* The kernels' build parameters for this design (build_xclbin.sh). */
  fprintf(build_table, "%-5s %-14s %6u ", p->name, s->name, batch);
  if (rmm_ok) {
    uint32_t regs, banked;
    rd_fpga_rmm_port_masks(&r, &regs, &banked);
    fprintf(build_table, " RMM_S=%u RMM_PORT_REGS=0x%x RMM_PORT_BANKED=0x%x", r.s, regs, banked);
  }
  char defs[512];
  rd_error_t derr;
  if (est_ok && rd_fpga_learner_unit_defs(&e.learner, defs, sizeof defs, &derr) == RD_OK)
    fprintf(build_table, " LRN_DEFS=\"%s\"", defs);
  fprintf(build_table, "\n");
}

static void run_model(const opts_t *o, FILE *info) {
  rd_fpga_part_t parts[RD_FPGA_MAX_PARTS];
  size_t np = 0;
  rd_error_t err;
  if (rd_fpga_parts_load(o->parts, parts, RD_FPGA_MAX_PARTS, &np, &err) != RD_OK)
    die("cannot load the FPGA parts from %s: %s", o->parts, err.msg);

  fprintf(info,
          "\n# 1. FPGA MODEL PREDICTIONS, not measurements; no FPGA board ran.\n"
          "#    Arithmetic of backends/fpga/model.h (papers/001 §VI-A2, thesis 004 Eqs 4.1-4.4)"
          "\n#    for the part files in %s; capacity %u, fanout %u, fp32, Adam,\n"
          "#    the part's clock; the RMM in one SLR, the learner in the others.\n",
          o->parts, MODEL_CAPACITY, MODEL_FANOUT);
  fflush(info);

  /* The resource table is written after the latency table: collect it. */
  char *res_buf = NULL, *build_buf = NULL;
  size_t res_len = 0, build_len = 0;
  FILE *res = o->json ? NULL : open_memstream(&res_buf, &res_len);
  FILE *build = o->json ? NULL : open_memstream(&build_buf, &build_len);
  if (!o->json && (res == NULL || build == NULL)) die("open_memstream: %s", strerror(errno));
  if (!o->json)
    printf("# model: latency per batch (us) and predicted steps/s of F-F-F (learner, RMM and\n"
           "# storage on the FPGA); relaxed = 1/max(T_learner, T_rmm) (pipeline D > 0),\n"
           "# strict = 1/(T_learner + T_rmm) (D = 0, transfers left out); '*' after S: the\n"
           "# replicated levels take one update per cycle (update_serial)\n"
           "%-5s %-14s %6s %6s %10s %10s %3s %5s %11s %11s %11s %s\n",
           "part", "shape", "batch", "S", "sample_us", "update_us", "DP", "PI", "learner_us",
           "gps_relax", "gps_strict", "bound");

  for (size_t i = 0; i < np; i++) {
    if (!o->json && i > 0) putchar('\n');
    for (size_t k = 0; k < N_SHAPES; k++)
      for (size_t b = 0; b < N_MODEL_BATCHES; b++)
        model_point(o, &parts[i], &shapes[k], model_batches[b], res, build);
  }
  if (!o->json) {
    fclose(res);
    printf("\n# model: resources used, %% of the usable resources (usable_pct of each SLR, part "
           "file) of\n# the RMM's one SLR and of the learner's SLRs; limit: what bounds the "
           "RMM's S and the\n# learner's design (model.h: batch, capacity, dsp, lut, ff, sram, "
           "stage, ...)\n");
    printf("%-5s %-14s %6s %6s%6s%6s%6s%6s  |%6s%6s%6s%6s%6s  %-8s %s\n", "part", "shape",
           "batch", "dsp", "lut", "ff", "bram", "uram", "dsp", "lut", "ff", "bram", "uram",
           "rmm_lim", "lrn_lim");
    printf("%28s%-30s  |%s\n", "", "  RMM (its 1 SLR)", "  learner (its SLRs)");
    fwrite(res_buf, 1, res_len, stdout);
    free(res_buf);
    fclose(build);
    printf("\n# model: the kernels' build parameters of each design (backends/fpga/kernels/"
           "build_xclbin.sh;\n# the replay kernel's S and update ports, the learner kernel's "
           "MAC units per layer)\n");
    fwrite(build_buf, 1, build_len, stdout);
    free(build_buf);
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* 2a. C-simulation: the replay kernel against the CPU sum tree         */
/* ------------------------------------------------------------------ */

static const uint32_t csim_capacities[] = {1u << 16, 1u << 20};
static const uint32_t csim_batches[] = {32, 512};
#define CSIM_FANOUT 16u
#define POOL_MIN_BATCHES 64
#define POOL_MIN_ITEMS (1u << 18)
#define CHECK_TARGETS 8192
#define CHECK_UPDATES 4096
#define FILL_CHUNK (1u << 16)

/* The two trees of one capacity: the CPU sum tree and the kernel's
 * C-simulation behind the replay-module interface, with the same leaves. */
typedef struct {
  uint32_t capacity;
  rd_sumtree_t cpu;
  void *csim;
} trees_t;

/* Input of one (capacity, batch) point, shared by both trees. */
typedef struct {
  trees_t *tr;
  uint32_t batch;
  size_t nb, items;
  uint64_t *targets; /* < the total of the tree being measured */
  uint32_t *pos;
  uint64_t *val;     /* two pools of `items`: alternate passes never rewrite a leaf's value */
  uint32_t *leaves;
} rpool_t;

static void fail_rc(const char *what, int rc, const rd_error_t *err) {
  die("%s failed: %s: %s", what, rd_err_name(rc), err->msg);
}

static void rpool_init(rpool_t *p, trees_t *tr, uint32_t batch, uint64_t seed) {
  memset(p, 0, sizeof *p);
  p->tr = tr;
  p->batch = batch;
  p->nb = POOL_MIN_BATCHES;
  if (p->nb * batch < POOL_MIN_ITEMS) p->nb = (POOL_MIN_ITEMS + batch - 1) / batch;
  p->items = p->nb * batch;
  p->targets = xmalloc(p->items * sizeof *p->targets);
  p->pos = xmalloc(p->items * sizeof *p->pos);
  p->val = xmalloc(2 * p->items * sizeof *p->val);
  p->leaves = xmalloc(batch * sizeof *p->leaves);
  uint64_t s = seed;
  for (size_t i = 0; i < p->items; i++) {
    p->pos[i] = (uint32_t)rd_rng_below(&s, tr->capacity);
    uint64_t a = leaf_value(&s), b = leaf_value(&s);
    if (a == b) b = a == LEAF_MAX ? a - 1 : a + 1;
    p->val[i] = a;
    p->val[p->items + i] = b;
  }
}

static void rpool_free(rpool_t *p) {
  free(p->targets);
  free(p->pos);
  free(p->val);
  free(p->leaves);
}

/* Targets uniform in [0, total) for the tree about to be measured; the same
 * seed and total give the same targets for both trees. */
static void rpool_targets(rpool_t *p, uint64_t total, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < p->items; i++) p->targets[i] = rd_rng_below(&s, total);
}

static void cpu_sample(void *ctx, uint64_t it) {
  rpool_t *p = ctx;
  rd_error_t err;
  int rc = rd_sumtree_sample(&p->tr->cpu, p->batch, p->targets + (it % p->nb) * p->batch,
                             p->leaves, &err);
  if (rc) fail_rc("rd_sumtree_sample", rc, &err);
}

static void cpu_update(void *ctx, uint64_t it) {
  rpool_t *p = ctx;
  size_t b = (size_t)(it % p->nb), pass = (size_t)((it / p->nb) & 1);
  rd_error_t err;
  int rc = rd_sumtree_update(&p->tr->cpu, p->batch, p->pos + b * p->batch,
                             p->val + pass * p->items + b * p->batch, &err);
  if (rc) fail_rc("rd_sumtree_update", rc, &err);
}

static void csim_sample(void *ctx, uint64_t it) {
  rpool_t *p = ctx;
  rd_error_t err;
  int rc = rd_fpga_csim_rmm_ops.sample(p->tr->csim, p->batch,
                                       p->targets + (it % p->nb) * p->batch, p->leaves, &err);
  if (rc) fail_rc("fpga-csim sample", rc, &err);
}

static void csim_update(void *ctx, uint64_t it) {
  rpool_t *p = ctx;
  size_t b = (size_t)(it % p->nb), pass = (size_t)((it / p->nb) & 1);
  rd_error_t err;
  int rc = rd_fpga_csim_rmm_ops.update(p->tr->csim, p->batch, p->pos + b * p->batch,
                                       p->val + pass * p->items + b * p->batch, &err);
  if (rc) fail_rc("fpga-csim update", rc, &err);
}

/* Both trees with the same leaves: uniform in [1, 2^20], about 1 in 16 zero
 * (and the last), so the check meets zero leaves at every level. */
static void trees_init(trees_t *tr, uint32_t capacity) {
  memset(tr, 0, sizeof *tr);
  tr->capacity = capacity;
  rd_error_t err;
  int rc = rd_sumtree_init(&tr->cpu, capacity, CSIM_FANOUT, &err);
  if (rc) fail_rc("rd_sumtree_init", rc, &err);
  rd_sumtree_set_threads(&tr->cpu, 1);
  if (LEAF_MAX > tr->cpu.max_leaf)
    die("capacity %u: leaves up to %" PRIu64 " exceed the CPU tree's bound %" PRIu64, capacity,
        LEAF_MAX, tr->cpu.max_leaf);
  /* The table's bound for this capacity is the CPU tree's (table.h). */
  rc = rd_fpga_csim_rmm_ops.create(&tr->csim, capacity, CSIM_FANOUT, tr->cpu.max_leaf, &err);
  if (rc) fail_rc("fpga-csim create", rc, &err);
  uint64_t *buf = xmalloc(FILL_CHUNK * sizeof *buf), s = SEED ^ capacity;
  for (uint32_t first = 0; first < capacity; first += FILL_CHUNK) {
    size_t n = capacity - first < FILL_CHUNK ? capacity - first : FILL_CHUNK;
    for (size_t i = 0; i < n; i++) {
      uint64_t x = rd_splitmix64(&s);
      buf[i] = ((x & 15) == 0 || first + i == capacity - 1u) ? 0 : 1 + (x >> 44);
    }
    if ((rc = rd_sumtree_set_range(&tr->cpu, first, n, buf, &err)) != RD_OK)
      fail_rc("rd_sumtree_set_range", rc, &err);
    if ((rc = rd_fpga_csim_rmm_ops.set_range(tr->csim, first, n, buf, &err)) != RD_OK)
      fail_rc("fpga-csim insert", rc, &err);
  }
  free(buf);
}

static void trees_free(trees_t *tr) {
  rd_sumtree_free(&tr->cpu);
  rd_fpga_csim_rmm_ops.destroy(tr->csim);
}

/* Equal totals and leaves; the prefix sums of the leaves into prefix. */
static void check_same_leaves(const trees_t *tr, uint64_t *prefix, const char *when) {
  uint64_t run = 0;
  for (uint32_t i = 0; i < tr->capacity; i++) {
    uint64_t a = rd_sumtree_get(&tr->cpu, i), b = rd_fpga_csim_rmm_ops.leaf(tr->csim, i);
    if (a != b)
      die("C-simulation check FAILED (capacity %u, %s): leaf %u is %" PRIu64
          " in the CPU tree and %" PRIu64 " in the C-simulation",
          tr->capacity, when, i, a, b);
    run += a;
    prefix[i] = run;
  }
  uint64_t ta = rd_sumtree_total(&tr->cpu), tb = rd_fpga_csim_rmm_ops.total(tr->csim);
  if (ta != run || tb != run)
    die("C-simulation check FAILED (capacity %u, %s): totals %" PRIu64 " (CPU) and %" PRIu64
        " (C-simulation), leaves sum to %" PRIu64,
        tr->capacity, when, ta, tb, run);
}

/* The same leaf from both trees for targets at the edges, at exact prefix
 * boundaries (t = prefix(i) and prefix(i) - 1) and uniform. */
static void check_same_samples(const trees_t *tr, const uint64_t *prefix, const char *when) {
  uint64_t *tg = xmalloc(CHECK_TARGETS * sizeof *tg);
  uint32_t *la = xmalloc(CHECK_TARGETS * sizeof *la), *lb = xmalloc(CHECK_TARGETS * sizeof *lb);
  bench_check_targets(prefix, tr->capacity, SEED ^ 0xc4ec ^ tr->capacity, tg, CHECK_TARGETS);
  rd_error_t err;
  int rc = rd_sumtree_sample(&tr->cpu, CHECK_TARGETS, tg, la, &err);
  if (rc) fail_rc("rd_sumtree_sample (check)", rc, &err);
  rc = rd_fpga_csim_rmm_ops.sample(tr->csim, CHECK_TARGETS, tg, lb, &err);
  if (rc) fail_rc("fpga-csim sample (check)", rc, &err);
  for (size_t i = 0; i < CHECK_TARGETS; i++) {
    uint32_t leaf = la[i];
    uint64_t lo = leaf ? prefix[leaf - 1] : 0;
    if (leaf >= tr->capacity || !(lo <= tg[i] && tg[i] < prefix[leaf]))
      die("C-simulation check FAILED (capacity %u, %s): the CPU tree maps target %" PRIu64
          " to leaf %u, outside its prefix range",
          tr->capacity, when, tg[i], leaf);
    if (la[i] != lb[i])
      die("C-simulation check FAILED (capacity %u, %s): target %" PRIu64 " picks leaf %u on "
          "the CPU tree but leaf %u in the C-simulation",
          tr->capacity, when, tg[i], la[i], lb[i]);
  }
  free(tg);
  free(la);
  free(lb);
}

static void trees_check(trees_t *tr) {
  uint64_t *prefix = xmalloc((size_t)tr->capacity * sizeof *prefix);
  check_same_leaves(tr, prefix, "after the fill");
  check_same_samples(tr, prefix, "after the fill");
  /* One update batch on both, with repeated positions: the later write wins. */
  uint32_t *pos = xmalloc(CHECK_UPDATES * sizeof *pos);
  uint64_t *val = xmalloc(CHECK_UPDATES * sizeof *val), s = SEED ^ 0x0bd ^ tr->capacity;
  for (size_t i = 0; i < CHECK_UPDATES; i++) {
    pos[i] = i % 8 == 7 ? pos[i - 3] : (uint32_t)rd_rng_below(&s, tr->capacity);
    val[i] = i % 5 == 0 ? 0 : leaf_value(&s);
  }
  rd_error_t err;
  int rc = rd_sumtree_update(&tr->cpu, CHECK_UPDATES, pos, val, &err);
  if (rc) fail_rc("rd_sumtree_update (check)", rc, &err);
  rc = rd_fpga_csim_rmm_ops.update(tr->csim, CHECK_UPDATES, pos, val, &err);
  if (rc) fail_rc("fpga-csim update (check)", rc, &err);
  check_same_leaves(tr, prefix, "after an update batch");
  check_same_samples(tr, prefix, "after an update batch");
  free(pos);
  free(val);
  free(prefix);
}

/* The model's cycle formula for this C-simulation build's shape (S = 1):
 * what the kernel's structural count should agree with. 0 if the model
 * refuses the shape. */
static void model_cycles_s1(const opts_t *o, uint32_t capacity, uint32_t batch,
                            uint64_t *sample, uint64_t *update) {
  *sample = *update = 0;
  rd_fpga_part_t part;
  rd_error_t err;
  /* Any part holds these trees at S = 1; the cycle counts do not depend on it. */
  if (rd_fpga_part_find("u200", o->parts, &part, &err) != RD_OK) return;
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  w.batch = batch;
  w.capacity = capacity;
  w.fanout = CSIM_FANOUT;
  w.rmm_s = 1;
  rd_fpga_rmm_est_t r;
  if (rd_fpga_model_rmm(&part, &w, &r, &err) != RD_OK) return;
  *sample = r.sample_cycles;
  *update = r.update_cycles;
}

enum { OP_SAMPLE = 0, OP_UPDATE = 1 };
static const char *const op_name[2] = {"sample", "update"};

static void run_csim_rmm(const opts_t *o, FILE *info) {
  if (!o->json)
    printf("\n# 2a. C-SIMULATION: the kernels' C code on the CPU; these are CPU timings, not "
           "FPGA figures.\n"
           "#     The replay kernel (backends/fpga/kernels/rmm.c, a build with K %u and S = 1) "
           "as a table's\n"
           "#     replay module (rd_fpga_csim_rmm_ops) against the CPU sum tree (rd_sumtree, "
           "1 thread,\n"
           "#     baseline.cpu), same leaves and targets, timed back to back; ns per item.\n"
           "#     cycles/req: the kernel's structural cycle count per request (not RTL "
           "simulation);\n"
           "#     model/req: the model's formula for the same build (S = 1).\n"
           "#     csim/cpu: ratio of the times per item (> 1: the C-simulation is slower).\n"
           "%-7s %9s %6s %4s %12s %12s %9s %12s %12s\n",
           CSIM_FANOUT, "op", "capacity", "batch", "K", "csim ns/item", "cpu ns/item",
           "csim/cpu", "cycles/req", "model/req");
  fflush(stdout);
  for (size_t c = 0; c < sizeof csim_capacities / sizeof csim_capacities[0]; c++) {
    const uint32_t cap = csim_capacities[c];
    trees_t tr;
    trees_init(&tr, cap);
    trees_check(&tr);
    fprintf(info, "# C-simulation check, capacity %u: same leaves, totals and %d sampled "
                  "leaves as the CPU tree, before and after a %d-item update batch: OK\n",
            cap, CHECK_TARGETS, CHECK_UPDATES);
    fflush(info);
    for (int op = 0; op < 2; op++) {
      for (size_t b = 0; b < sizeof csim_batches / sizeof csim_batches[0]; b++) {
        const uint32_t B = csim_batches[b];
        rpool_t p;
        rpool_init(&p, &tr, B, SEED ^ ((uint64_t)cap << 20) ^ B);
        /* The CPU baseline first, then the C-simulation: same load. */
        if (op == OP_SAMPLE) rpool_targets(&p, rd_sumtree_total(&tr.cpu), SEED ^ 0x7a ^ B);
        const double cpu_ns = measure(op == OP_SAMPLE ? cpu_sample : cpu_update, &p, o) * 1e9 / B;
        progress("cpu  %s capacity %u batch %u: %.2f ns/item", op_name[op], cap, B, cpu_ns);
        if (op == OP_SAMPLE)
          rpool_targets(&p, rd_fpga_csim_rmm_ops.total(tr.csim), SEED ^ 0x7a ^ B);
        rd_fpga_csim_rmm_stats_t s0, s1;
        rd_fpga_csim_rmm_stats(tr.csim, &s0);
        const double csim_ns =
            measure(op == OP_SAMPLE ? csim_sample : csim_update, &p, o) * 1e9 / B;
        rd_fpga_csim_rmm_stats(tr.csim, &s1);
        progress("csim %s capacity %u batch %u: %.2f ns/item", op_name[op], cap, B, csim_ns);
        const uint64_t reqs = s1.requests - s0.requests;
        const double cyc = reqs ? (double)(s1.cycles - s0.cycles) / (double)reqs : 0;
        uint64_t ms, mu;
        model_cycles_s1(o, cap, B, &ms, &mu);
        const uint64_t mcyc = op == OP_SAMPLE ? ms : mu;
        rpool_free(&p);
        if (o->json) {
          printf("{\"name\": \"baseline.cpu.rmm_%s\", \"params\": {\"capacity\": %u, \"batch\": "
                 "%u, \"fanout\": %u, \"threads\": 1, \"source\": \"cpu\"}, \"value\": %.2f, "
                 "\"unit\": \"ns/item\"}\n",
                 op_name[op], cap, B, CSIM_FANOUT, cpu_ns);
          printf("{\"name\": \"fpga.csim.rmm_%s\", \"params\": {\"capacity\": %u, \"batch\": "
                 "%u, \"fanout\": %u, \"s\": 1, \"source\": \"csim\"}, \"value\": %.2f, "
                 "\"unit\": \"ns/item\"}\n",
                 op_name[op], cap, B, CSIM_FANOUT, csim_ns);
          printf("{\"name\": \"fpga.csim.rmm_%s_cycles\", \"params\": {\"capacity\": %u, "
                 "\"batch\": %u, \"fanout\": %u, \"s\": 1, \"source\": \"csim\", \"kind\": "
                 "\"structural, not RTL simulation\", \"model_cycles\": %" PRIu64 "}, "
                 "\"value\": %.1f, \"unit\": \"cycles/request\"}\n",
                 op_name[op], cap, B, CSIM_FANOUT, mcyc, cyc);
        } else {
          if (g_progress) fputs("\r\033[K", stderr);
          char mc[24] = "-";
          if (mcyc) snprintf(mc, sizeof mc, "%" PRIu64, mcyc);
          printf("%-7s %9u %6u %4u %12.2f %12.2f %8.2fx %12.1f %12s\n", op_name[op], cap, B,
                 CSIM_FANOUT, csim_ns, cpu_ns, csim_ns / cpu_ns, cyc, mc);
        }
        fflush(stdout);
      }
    }
    rd_error_t err;
    if (rd_sumtree_check(&tr.cpu, &err) != RD_OK)
      die("CPU tree check FAILED after timing (capacity %u): %s", cap, err.msg);
    if (rd_fpga_csim_rmm_check(tr.csim, &err) != RD_OK)
      die("C-simulation tree check FAILED after timing (capacity %u): %s", cap, err.msg);
    trees_free(&tr);
  }
}

/* ------------------------------------------------------------------ */
/* 2b. C-simulation: the learner kernel against the CPU learner         */
/* ------------------------------------------------------------------ */


/* The learner kernel as the daemon runs it: its "fpga" learner backend
 * (backends/fpga/learner_backend_fpga.c: the host's batch check, then the
 * kernel top, on the CPU learner's initial weights for the seed). */
static void kernel_learner_init(rd_learner_backend_t *k, const rd_learner_config_t *c) {
  rd_error_t err;
  int rc = rd_learner_backend_init(k, &rd_learner_ops_fpga, c, 0, &err);
  if (rc) die("the FPGA learner backend cannot train this learner: %s", err.msg);
}

static void kernel_learner_step(rd_learner_backend_t *k, const rd_batch_t *b, float *td) {
  rd_error_t err;
  int rc = k->ops->step(k, b, td, NULL, &err);
  if (rc) fail_rc("the FPGA learner backend's step", rc, &err);
}

typedef struct {
  learner_pool_t *p;
  rd_learner_t *cpu;
  rd_learner_backend_t *k;
} lctx_t;

static void cpu_step(void *ctx, uint64_t it) {
  lctx_t *x = ctx;
  rd_error_t err;
  int rc = rd_learner_step(x->cpu, &x->p->b[it % LEARNER_POOL], x->p->td, NULL, &err);
  if (rc) fail_rc("rd_learner_step", rc, &err);
}

static void csim_step(void *ctx, uint64_t it) {
  lctx_t *x = ctx;
  kernel_learner_step(x->k, &x->p->b[it % LEARNER_POOL], x->p->td);
}

#define TD_TOL 1e-4

static void run_csim_learner(const opts_t *o, FILE *info) {
  static const uint32_t full[] = {32, 256}, quick[] = {32};
  const uint32_t *batches = o->quick ? quick : full;
  const size_t nbat = o->quick ? 1 : 2;
  if (!o->json)
    printf("\n# 2b. C-SIMULATION: the kernels' C code on the CPU; these are CPU timings, not "
           "FPGA figures.\n"
           "#     The learner kernel (backends/fpga/kernels/learner.c, lrn_train_step, DP "
           "pipelines run\n"
           "#     one after another in C) against the CPU learner (rd_learner_step, 1 thread, "
           "baseline.cpu),\n"
           "#     same initial weights and batches, timed back to back; us per train-step.\n"
           "#     td_err: max |delta_csim - delta_cpu| / max(1, max |delta_cpu|) of the first "
           "step;\n"
           "#     csim/cpu: ratio of the times per step (> 1: the C-simulation is slower).\n"
           "%-14s %6s %3s %13s %13s %9s %10s\n",
           "shape", "batch", "DP", "csim us/step", "cpu us/step", "csim/cpu", "td_err");
  fflush(stdout);
  for (size_t s = 0; s < N_SHAPES; s++) {
    for (size_t b = 0; b < nbat; b++) {
      const shape_t *sh = &shapes[s];
      const uint32_t B = batches[b];
      rd_learner_config_t c;
      make_config(sh, B, 1, &c);
      rd_learner_t cpu;
      rd_error_t err;
      int rc = rd_learner_init(&cpu, &c, &err);
      if (rc) fail_rc("rd_learner_init", rc, &err);
      rd_learner_backend_t k;
      kernel_learner_init(&k, &c);
      lrn_config_t kc; /* for its DP */
      rd_learner_fpga_kernel_config(&c, &kc);
      learner_pool_t p;
      learner_pool_init(&p, &c, B);

      /* Validation: the first step from the same weights on the same batch. */
      float *td_cpu = xmalloc(B * sizeof(float)), *td_k = xmalloc(B * sizeof(float));
      rc = rd_learner_step(&cpu, &p.b[0], td_cpu, NULL, &err);
      if (rc) fail_rc("rd_learner_step (check)", rc, &err);
      kernel_learner_step(&k, &p.b[0], td_k);
      double mx = 1, dev = 0;
      for (uint32_t i = 0; i < B; i++) {
        if (!isfinite(td_cpu[i]) || !isfinite(td_k[i]))
          die("learner check FAILED (%s, batch %u): |delta|[%u] is %g (CPU), %g (kernel)",
              sh->name, B, i, (double)td_cpu[i], (double)td_k[i]);
        if (fabs(td_cpu[i]) > mx) mx = fabs(td_cpu[i]);
      }
      for (uint32_t i = 0; i < B; i++) {
        double d = fabs((double)td_cpu[i] - (double)td_k[i]);
        if (d > dev) dev = d;
      }
      dev /= mx;
      if (dev > TD_TOL)
        die("learner check FAILED (%s, batch %u): the kernel's first-step |delta| differs from "
            "the CPU learner's by %.3g (relative to max(1, max |delta|)), above %g",
            sh->name, B, dev, TD_TOL);
      free(td_cpu);
      free(td_k);

      lctx_t x = {&p, &cpu, &k};
      const double cpu_us = measure(cpu_step, &x, o) * 1e6;
      progress("cpu  learner %s batch %u: %.2f us/step", sh->name, B, cpu_us);
      const double csim_us = measure(csim_step, &x, o) * 1e6;
      progress("csim learner %s batch %u: %.2f us/step", sh->name, B, csim_us);
      if (o->json) {
        printf("{\"name\": \"baseline.cpu.learner_step_us\", \"params\": {\"shape\": \"%s\", "
               "\"batch\": %u, \"threads\": 1, \"source\": \"cpu\"}, \"value\": %.3f, "
               "\"unit\": \"us\"}\n",
               sh->name, B, cpu_us);
        printf("{\"name\": \"fpga.csim.learner_step_us\", \"params\": {\"shape\": \"%s\", "
               "\"batch\": %u, \"dp\": %u, \"source\": \"csim\", \"td_rel_err\": %.3g}, "
               "\"value\": %.3f, \"unit\": \"us\"}\n",
               sh->name, B, kc.dp, dev, csim_us);
      } else {
        if (g_progress) fputs("\r\033[K", stderr);
        printf("%-14s %6u %3u %13.2f %13.2f %8.2fx %10.2g\n", sh->name, B, kc.dp, csim_us,
               cpu_us, csim_us / cpu_us, dev);
      }
      fflush(stdout);
      learner_pool_free(&p);
      rd_learner_backend_destroy(&k);
      rd_learner_free(&cpu);
    }
  }
  fprintf(info, "# learner check: the kernel's first-step |delta| within %g of the CPU "
                "learner's at every point: OK\n", TD_TOL);
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(&o, argc, argv);
  g_progress = isatty(STDERR_FILENO) && !o.json;
  /* In JSON mode stdout carries only the JSON lines; the rest goes to stderr. */
  FILE *info = o.json ? stderr : stdout;

  bench_machine_t m;
  bench_machine(&m);
  fprintf(info,
          "# bench_fpga: %s, %s, %ld CPUs (load %s), %.0f ms per repetition, median of %d\n"
          "# WHAT RAN: the FPGA model's arithmetic and the FPGA kernels' C-simulation on this "
          "CPU.\n"
          "# No FPGA board and no Vitis toolchain exist here; nothing ran on an FPGA (XRT has "
          "only\n"
          "# run against its no-op shim, in the tests).\n",
          m.date, m.cpu, m.cpus, m.load, o.timing.min_s * 1e3, o.timing.reps);
  fflush(info);

  if (o.model) run_model(&o, info);
  if (o.csim) {
    run_csim_rmm(&o, info);
    run_csim_learner(&o, info);
  }
  bench_end(info, g_progress);
  return 0;
}
