/* bench_sumtree.c - ns per item of the K-ary sum tree's three operations.
 *
 * Measures rd_sumtree_sample, rd_sumtree_update and rd_sumtree_set_range
 * (insert) for every combination of capacity, batch, fanout K and threads,
 * and two baselines for every capacity and batch, in the same run, so the
 * "vs baseline" ratios compare like with like on one machine: the
 * textbook binary tree (baseline_bintree.h) and the paper's K-ary float
 * tree with per-item set and descent (baseline_karyfloat.h, K = 16).
 *
 * Operations, as a replay buffer uses them: sample draws stratified
 * targets (item i of B in the i-th B-quantile of the total); update gives
 * the leaves those targets select new priorities (the leaves a sample just
 * returned, in its order); update_random writes random leaves; insert
 * writes `batch` contiguous leaves of a ring.
 *
 * Method. Every input (leaf values, targets, positions) comes from a
 * splitmix64 stream with a fixed seed and is generated outside the timed
 * region. Each operation cycles through a pool of at least 64 batches and at
 * least 2^18 items of pre-generated input, so consecutive batches touch
 * different paths and the tree is not simply cache-resident. Every tree of
 * a capacity, batch and operation (both baselines, ours at every K and
 * thread count) is measured as one group: each gets a warm-up that doubles
 * the number of batches until they have run for the warm-up time (which
 * also sizes its repetitions); then `reps` rounds each run one repetition
 * of every tree in turn, each lasting about the minimum time and preceded
 * by an untimed quarter of one (the tree back in the caches). A tree's
 * result is its median repetition in ns per item. Interleaved, a tree and
 * its baseline see the same stretches of a shared machine's drifting
 * speed, so their ratio holds when the speed changes mid-run.
 *
 * Update values alternate between two pools on successive passes over the
 * positions, so a repeated pass rarely writes a leaf's current value (which
 * the tree skips). Insert writes `batch` contiguous leaves at a ring cursor
 * that advances by `batch` and wraps (a wrapped range is two calls), like a
 * table's ring.
 *
 * Before timing, an exactness check samples 4096 targets (including the
 * edge targets 0, total-1 and exact prefix boundaries) from a 2^20-leaf tree
 * with some zero leaves for each K and thread count, and verifies
 * prefix(i-1) <= target < prefix(i) from rd_sumtree_get reads; the baseline
 * is checked the same way (its sums are exact: integers below 2^53). After
 * timing, each tree is verified with rd_sumtree_check. A failure prints a
 * message and exits 1: a wrong tree is not worth timing.
 *
 * Output: an aligned table (default) or, with --json, one JSON object per
 * line and nothing else on stdout. Run with --help for the options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baseline_bintree.h"
#include "baseline_karyfloat.h"
#include "bench_util.h"
#include "rd_clock.h"
#include "rd_rng.h"
#include "rd_error.h"
#include "sumtree.h"

/* ------------------------------------------------------------------ */
/* Input generation                                                    */
/* ------------------------------------------------------------------ */

#define LEAF_MAX (UINT64_C(1) << 20)
/* A leaf value, uniform in [1, 2^20]. */
static uint64_t leaf_value(uint64_t *s) { return 1 + (rd_splitmix64(s) >> 44); }

#define SEED UINT64_C(0x7265706c61796400) /* "replayd" */

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  bool json, quick, baseline, cpu_clock;
  bool op[4];    /* sample, update, update_random, insert: which to measure */
  bench_list_t capacity, batch, fanout, threads;
  bench_timing_t timing;
} opts_t;

static void usage(FILE *f) {
  fputs(
      "usage: bench_sumtree [--json] [--quick] [--capacity N] [--batch B]\n"
      "                     [--fanout K] [--threads T]\n"
      "                     [--op sample|update|update_random|insert]\n"
      "                     [--no-baseline] [--time-ms MS] [--clock wall|cpu]\n"
      "\n"
      "Nanoseconds per item of the K-ary sum tree's sample (stratified targets),\n"
      "update (the leaves the last sample returned, as a replay buffer does),\n"
      "update_random (random leaves) and insert (rd_sumtree_set_range on a ring),\n"
      "against a textbook binary sum tree and the paper's K-ary float tree (K=16).\n"
      "\n"
      "  --json         one JSON object per line on stdout, nothing else\n"
      "  --quick        capacity 2^20, batches 32,512, fanouts 16,32, threads 1,2,\n"
      "                 15 ms per repetition, median of 3 (default: capacities\n"
      "                 2^20,2^24, batches 32,512,4096, fanouts 2..64, threads 1,2,\n"
      "                 100 ms per repetition, median of 5)\n"
      "  --capacity N   only this capacity (a number or 2^E)\n"
      "  --batch B      only this batch size\n"
      "  --fanout K     only this fanout (2, 4, 8, 16, 32 or 64)\n"
      "  --threads T    only this thread count (the baseline always uses 1)\n"
      "  --op OP        only this operation: sample, update, update_random or insert\n"
      "  --no-baseline  skip the baselines (no ratio columns then)\n"
      "  --time-ms MS   minimum time of one repetition\n"
      "  --clock CLOCK  wall (default): CLOCK_MONOTONIC; cpu: the thread's CPU time,\n"
      "                 which leaves out other processes on a shared machine\n"
      "                 (one thread: threads default to 1)\n"
      "\n"
      "RD_SUMTREE_ISA=generic|avx2|avx512 forces a kernel variant.\n",
      f);
}

static void parse_opts(opts_t *o, int argc, char **argv) {
  double time_ms = 0;
  memset(o, 0, sizeof *o);
  o->baseline = true;
  bool op_given = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_common_opt(argc, argv, &i, &o->json, &o->quick, &time_ms, usage)) continue;
    if (strcmp(argv[i], "--no-baseline") == 0) {
      o->baseline = false;
    } else if ((v = bench_opt(argc, argv, &i, "--clock"))) {
      if (strcmp(v, "cpu") == 0)
        o->cpu_clock = true;
      else if (strcmp(v, "wall") != 0)
        die("--clock: '%s' is not wall or cpu", v);
    } else if ((v = bench_opt(argc, argv, &i, "--op"))) {
      int k = strcmp(v, "sample") == 0 ? 0 : strcmp(v, "update") == 0 ? 1
            : strcmp(v, "update_random") == 0 ? 2 : strcmp(v, "insert") == 0 ? 3 : -1;
      if (k < 0) die("--op: '%s' is not sample, update, update_random or insert", v);
      op_given = true;
      o->op[k] = true;
    } else if ((v = bench_opt(argc, argv, &i, "--capacity"))) { /* one value: the last given */
      o->capacity.n = 0;
      bench_list_add(&o->capacity, "--capacity",
                     bench_parse_u32("--capacity", v, 1, RD_SUMTREE_MAX_CAPACITY));
    } else if ((v = bench_opt(argc, argv, &i, "--batch"))) {
      o->batch.n = 0;
      bench_list_add(&o->batch, "--batch", bench_parse_u32("--batch", v, 1, UINT64_C(1) << 20));
    } else if ((v = bench_opt(argc, argv, &i, "--fanout"))) {
      uint32_t k = bench_parse_u32("--fanout", v, RD_SUMTREE_MIN_FANOUT, RD_SUMTREE_MAX_FANOUT);
      if (k & (k - 1)) die("--fanout: %u is not a power of two", k);
      o->fanout.n = 0;
      bench_list_add(&o->fanout, "--fanout", k);
    } else if ((v = bench_opt(argc, argv, &i, "--threads"))) {
      o->threads.n = 0;
      bench_list_add(&o->threads, "--threads", bench_parse_u32("--threads", v, 1, 256));
    } else {
      bench_unknown_opt(argv[i], usage);
    }
  }

  static const uint32_t cap_full[] = {1u << 20, 1u << 24}, cap_quick[] = {1u << 20};
  static const uint32_t bat_full[] = {32, 512, 4096}, bat_quick[] = {32, 512};
  static const uint32_t fan_full[] = {2, 4, 8, 16, 32, 64}, fan_quick[] = {16, 32};
  static const uint32_t thr_all[] = {1, 2};
#define PICK(dst, opt, q, f)                                                                  \
  do {                                                                                        \
    if (o->quick)                                                                             \
      bench_list_default(&(dst), opt, q, sizeof q / sizeof q[0]);                             \
    else                                                                                      \
      bench_list_default(&(dst), opt, f, sizeof f / sizeof f[0]);                             \
  } while (0)
  PICK(o->capacity, "--capacity", cap_quick, cap_full);
  PICK(o->batch, "--batch", bat_quick, bat_full);
  PICK(o->fanout, "--fanout", fan_quick, fan_full);
  if (o->cpu_clock) bench_list_default(&o->threads, "--threads", (const uint32_t[]){1}, 1);
  PICK(o->threads, "--threads", thr_all, thr_all);
#undef PICK
  bench_timing_init(&o->timing, time_ms, o->quick, 0.015, 0.100, 0.005, 0.020);
  if (o->cpu_clock) {
    o->timing.clock = bench_thread_cpu_now;
    for (size_t i = 0; i < o->threads.n; i++)
      if (o->threads.v[i] != 1) die("--clock cpu measures one thread: add --threads 1");
  }
  if (!op_given) o->op[0] = o->op[1] = o->op[2] = o->op[3] = true;
}

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

enum { OP_SAMPLE, OP_UPDATE, OP_UPDATE_RANDOM, OP_INSERT, N_OPS };
static const char *const op_name[N_OPS] = {"sample", "update", "update_random", "insert"};

/* Whose tree a result is: ours, or one of the two baselines. */
enum { MINE = 0, BASE_BINARY = 1, BASE_KARY = 2 };
static const char *const base_name[3] = {"sumtree", "baseline.binary_tree", "baseline.kary_float"};
#define KARY_FANOUT 16 /* the baseline's K: our default fanout */

typedef struct {
  int op;
  int baseline; /* MINE, BASE_BINARY or BASE_KARY */
  uint32_t capacity, batch, fanout, threads;
  double ns;
} result_t;

static result_t *results;
static size_t n_results, cap_results;

static void add_result(int op, int baseline, uint32_t capacity, uint32_t batch, uint32_t fanout,
                       uint32_t threads, double ns) {
  if (n_results == cap_results) {
    cap_results = cap_results ? 2 * cap_results : 256;
    results = realloc(results, cap_results * sizeof *results);
    if (results == NULL) die("out of memory");
  }
  results[n_results++] = (result_t){op, baseline, capacity, batch, fanout, threads, ns};
}

static void result_name(const result_t *r, char *buf, size_t len) {
  snprintf(buf, len, "%s.%s", base_name[r->baseline], op_name[r->op]);
}

/* Table order: capacity, op, batch, then the baseline first, threads, K. */
static int cmp_result(const void *a, const void *b) {
  const result_t *x = a, *y = b;
#define CMP(f)                                \
  if (x->f != y->f) return x->f < y->f ? -1 : 1;
  CMP(capacity)
  CMP(op)
  CMP(batch)
  if (x->baseline != y->baseline) return x->baseline > y->baseline ? -1 : 1;
  CMP(threads)
  CMP(fanout)
#undef CMP
  return 0;
}

static const result_t *find_baseline(const result_t *r, int which) {
  for (size_t i = 0; i < n_results; i++) {
    const result_t *b = &results[i];
    if (b->baseline == which && b->op == r->op && b->capacity == r->capacity &&
        b->batch == r->batch)
      return b;
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Measurement                                                         */
/* ------------------------------------------------------------------ */

static const opts_t *g_opts;
static bool g_progress;

/* Input pools, shared by the sum tree and the baseline. */
typedef struct {
  uint32_t capacity, batch;
  size_t nb;          /* batches in the pool */
  size_t items;       /* nb * batch */
  uint64_t *targets;  /* sample targets, < total of the tree being measured */
  double *dtargets;   /* the same targets for the baseline */
  uint32_t *pos;      /* update_random positions */
  uint32_t *spos;     /* update positions: the leaves the sample pool's targets select */
  const uint32_t *upos; /* the op measured's update positions: pos or spos (pool_op) */
  float *ftargets;    /* the targets for the float baseline, scaled to its total */
  float *fval, *fins; /* update and insert values as floats */
  uint64_t *val;      /* update values: two pools of `items` (alternate passes) */
  double *dval;       /* the same as doubles */
  uint64_t *ins;      /* insert values, `items` */
  double *dins;
  uint32_t *leaves;   /* sample output, one batch */
  uint32_t cursor;    /* insert ring cursor */
  rd_sumtree_t *t;
  rd_bench_bintree_t *bt;
  rd_bench_kary_t *kt;
  bench_arena_t mem;  /* the arrays above */
} pool_t;

#define POOL_MIN_BATCHES 64
#define POOL_MIN_ITEMS (1u << 18)

static void pool_init(pool_t *p, uint32_t capacity, uint32_t batch, uint64_t seed) {
  memset(p, 0, sizeof *p);
  p->capacity = capacity;
  p->batch = batch;
  p->nb = POOL_MIN_BATCHES;
  if ((size_t)p->nb * batch < POOL_MIN_ITEMS) p->nb = (POOL_MIN_ITEMS + batch - 1) / batch;
  p->items = p->nb * batch;
  p->targets = bench_arena_alloc(&p->mem, p->items * sizeof *p->targets);
  p->dtargets = bench_arena_alloc(&p->mem, p->items * sizeof *p->dtargets);
  p->pos = bench_arena_alloc(&p->mem, p->items * sizeof *p->pos);
  p->spos = bench_arena_alloc(&p->mem, p->items * sizeof *p->spos);
  p->ftargets = bench_arena_alloc(&p->mem, p->items * sizeof *p->ftargets);
  p->fval = bench_arena_alloc(&p->mem, 2 * p->items * sizeof *p->fval);
  p->fins = bench_arena_alloc(&p->mem, p->items * sizeof *p->fins);
  p->val = bench_arena_alloc(&p->mem, 2 * p->items * sizeof *p->val);
  p->dval = bench_arena_alloc(&p->mem, 2 * p->items * sizeof *p->dval);
  p->ins = bench_arena_alloc(&p->mem, p->items * sizeof *p->ins);
  p->dins = bench_arena_alloc(&p->mem, p->items * sizeof *p->dins);
  p->leaves = bench_arena_alloc(&p->mem, batch * sizeof *p->leaves);
  uint64_t s = seed;
  for (size_t i = 0; i < p->items; i++) {
    p->pos[i] = (uint32_t)rd_rng_below(&s, capacity);
    uint64_t a = leaf_value(&s), b = leaf_value(&s);
    if (a == b) b = a == LEAF_MAX ? a - 1 : a + 1;
    p->val[i] = a;
    p->val[p->items + i] = b;
    p->ins[i] = leaf_value(&s);
  }
  for (size_t i = 0; i < 2 * p->items; i++) p->fval[i] = (float)(p->dval[i] = (double)p->val[i]);
  for (size_t i = 0; i < p->items; i++) p->fins[i] = (float)(p->dins[i] = (double)p->ins[i]);
}

static void pool_free(pool_t *p) {
  bench_arena_free(&p->mem);
  memset(p, 0, sizeof *p);
}

/* Fresh stratified targets for the tree's current total, as a table's
 * stratified sample draws them: item i of a batch of B gets
 * floor((i * total + u) / B), u uniform in [0, total). */
static void pool_targets(pool_t *p, uint64_t total, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < p->items; i++) {
    unsigned __int128 k = (unsigned __int128)(i % p->batch) * total + rd_rng_below(&s, total);
    p->targets[i] = (uint64_t)(k / p->batch);
    p->dtargets[i] = (double)p->targets[i];
  }
}

/* The float baseline's targets: the same fractions of its own total. */
static void pool_float_targets(pool_t *p, uint64_t total, float ftotal) {
  for (size_t i = 0; i < p->items; i++)
    p->ftargets[i] = (float)((double)p->targets[i] / (double)total * ftotal);
}

static void fail_rc(const char *what, int rc, const rd_error_t *err) {
  die("%s failed: %s: %s", what, rd_err_name(rc), err->msg);
}

/* Where unit `it`'s batch starts in the pool's per-item arrays. */
static size_t pool_at(const pool_t *p, uint64_t it) { return (size_t)(it % p->nb) * p->batch; }

/* Where unit `it`'s update values start: passes over the pool alternate
 * between its two pools of values, so that an update changes its leaves. */
static size_t pool_val_at(const pool_t *p, uint64_t it) {
  return (size_t)((it / p->nb) & 1) * p->items + pool_at(p, it);
}

/* The update positions of op (update: the sampled leaves, update_random:
 * random ones), for the update units measured next. */
static void pool_op(pool_t *p, int op) { p->upos = op == OP_UPDATE_RANDOM ? p->pos : p->spos; }

/* Sets the n leaves from `first` on to the insert values from `off` on. */
typedef void (*ring_set_fn)(pool_t *p, uint32_t first, size_t n, size_t off);

/* Ring insert: `batch` leaves from the cursor on, one set per contiguous
 * piece (two when the range wraps; more only if batch > capacity). */
static void pool_ring_insert(pool_t *p, uint64_t it, ring_set_fn set) {
  size_t off = pool_at(p, it), left = p->batch;
  while (left > 0) {
    size_t room = (size_t)(p->capacity - p->cursor), n = left < room ? left : room;
    set(p, p->cursor, n, off);
    off += n;
    left -= n;
    p->cursor = n == room ? 0 : p->cursor + (uint32_t)n;
  }
}

static void st_sample(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  rd_error_t err;
  int rc = rd_sumtree_sample(p->t, p->batch, p->targets + pool_at(p, it), p->leaves, &err);
  if (rc) fail_rc("rd_sumtree_sample", rc, &err);
}

static void st_update(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  rd_error_t err;
  int rc = rd_sumtree_update(p->t, p->batch, p->upos + pool_at(p, it), p->val + pool_val_at(p, it),
                             &err);
  if (rc) fail_rc("rd_sumtree_update", rc, &err);
}

static void st_set(pool_t *p, uint32_t first, size_t n, size_t off) {
  rd_error_t err;
  int rc = rd_sumtree_set_range(p->t, first, n, p->ins + off, &err);
  if (rc) fail_rc("rd_sumtree_set_range", rc, &err);
}

static void st_insert(void *ctx, uint64_t it) { pool_ring_insert(ctx, it, st_set); }

static void bt_sample(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  rd_bench_bintree_sample_batch(p->bt, p->batch, p->dtargets + pool_at(p, it), p->leaves);
}

static void bt_update(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  rd_bench_bintree_update(p->bt, p->batch, p->upos + pool_at(p, it), p->dval + pool_val_at(p, it));
}

static void bt_set(pool_t *p, uint32_t first, size_t n, size_t off) {
  rd_bench_bintree_set_range(p->bt, first, n, p->dins + off);
}

static void bt_insert(void *ctx, uint64_t it) { pool_ring_insert(ctx, it, bt_set); }

static void kt_sample(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  rd_bench_kary_sample_batch(p->kt, p->batch, p->ftargets + pool_at(p, it), p->leaves);
}

static void kt_update(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  rd_bench_kary_update(p->kt, p->batch, p->upos + pool_at(p, it), p->fval + pool_val_at(p, it));
}

/* Insert into the float tree item by item, as its per-item set does. */
static void kt_insert(void *ctx, uint64_t it) {
  pool_t *p = ctx;
  const float *v = p->fins + pool_at(p, it);
  for (size_t i = 0; i < p->batch; i++) {
    rd_bench_kary_set(p->kt, p->cursor, v[i]);
    p->cursor = p->cursor + 1 == p->capacity ? 0 : p->cursor + 1;
  }
}

/* ------------------------------------------------------------------ */
/* Tree setup                                                          */
/* ------------------------------------------------------------------ */

#define FILL_CHUNK (1u << 16)

/* Leaf i of the fill: uniform in [1, 2^20], or 0 for about 1 in 16 leaves
 * (and the last leaf) when `zeros`. The stream depends only on the seed, so
 * every K and the baseline get the same leaves. */
static void fill_values(uint64_t *s, uint64_t *buf, size_t n, uint64_t first,
                        uint32_t capacity, bool zeros) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rd_splitmix64(s);
    uint64_t v = 1 + (r >> 44);
    if (zeros && ((r & 15) == 0 || first + i == (uint64_t)capacity - 1)) v = 0;
    buf[i] = v;
  }
}

static void tree_fill(rd_sumtree_t *t, uint32_t capacity, uint64_t seed, bool zeros) {
  uint64_t *buf = xmalloc(FILL_CHUNK * sizeof *buf);
  uint64_t s = seed;
  rd_error_t err;
  for (uint64_t first = 0; first < capacity; first += FILL_CHUNK) {
    size_t n = capacity - first < FILL_CHUNK ? (size_t)(capacity - first) : FILL_CHUNK;
    fill_values(&s, buf, n, first, capacity, zeros);
    int rc = rd_sumtree_set_range(t, (uint32_t)first, n, buf, &err);
    if (rc) fail_rc("rd_sumtree_set_range (fill)", rc, &err);
  }
  free(buf);
}

static void bintree_fill(rd_bench_bintree_t *t, uint32_t capacity, uint64_t seed, bool zeros) {
  uint64_t *buf = xmalloc(FILL_CHUNK * sizeof *buf);
  uint64_t s = seed;
  for (uint64_t first = 0; first < capacity; first += FILL_CHUNK) {
    size_t n = capacity - first < FILL_CHUNK ? (size_t)(capacity - first) : FILL_CHUNK;
    fill_values(&s, buf, n, first, capacity, zeros);
    for (size_t i = 0; i < n; i++) t->value[t->cap + first + i] = (double)buf[i];
  }
  rd_bench_bintree_rebuild(t);
  free(buf);
}

static void karytree_fill(rd_bench_kary_t *t, uint32_t capacity, uint64_t seed) {
  uint64_t *buf = xmalloc(FILL_CHUNK * sizeof *buf);
  uint64_t s = seed;
  float *leaf = t->level[t->height - 1];
  for (uint64_t first = 0; first < capacity; first += FILL_CHUNK) {
    size_t n = capacity - first < FILL_CHUNK ? (size_t)(capacity - first) : FILL_CHUNK;
    fill_values(&s, buf, n, first, capacity, false);
    for (size_t i = 0; i < n; i++) leaf[first + i] = (float)buf[i];
  }
  rd_bench_kary_rebuild(t);
  free(buf);
}

/* The update positions a replay buffer writes: the leaves its last sample
 * returned, here the leaves the pool's (stratified) targets select in the
 * exact binary tree, which holds the same leaves as every other tree. */
static void pool_sampled_positions(pool_t *p, const rd_bench_bintree_t *bt) {
  for (size_t i = 0; i < p->items; i++) p->spos[i] = rd_bench_bintree_sample(bt, p->dtargets[i]);
}

static void tree_init(rd_sumtree_t *t, uint32_t capacity, uint32_t fanout) {
  rd_error_t err;
  int rc = rd_sumtree_init(t, capacity, fanout, &err);
  if (rc) fail_rc("rd_sumtree_init", rc, &err);
  if (LEAF_MAX > t->max_leaf)
    die("capacity %u: leaf values up to %" PRIu64 " exceed the tree's max_leaf %" PRIu64,
        capacity, LEAF_MAX, t->max_leaf);
}

/* ------------------------------------------------------------------ */
/* Exactness check                                                     */
/* ------------------------------------------------------------------ */

#define CHECK_CAPACITY (1u << 20)
#define CHECK_TARGETS 4096

static void check_leaf(const char *who, uint32_t fanout, uint32_t threads, const uint64_t *prefix,
                       uint32_t capacity, uint64_t target, uint32_t leaf) {
  if (leaf >= capacity)
    die("exactness check FAILED (%s, K=%u, threads=%u): target %" PRIu64
        " -> leaf %u >= capacity %u",
        who, fanout, threads, target, leaf, capacity);
  uint64_t lo = leaf ? prefix[leaf - 1] : 0, hi = prefix[leaf];
  if (!(lo <= target && target < hi))
    die("exactness check FAILED (%s, K=%u, threads=%u): target %" PRIu64 " -> leaf %u, but "
        "prefix(leaf-1) = %" PRIu64 " and prefix(leaf) = %" PRIu64,
        who, fanout, threads, target, leaf, lo, hi);
}

static void exactness_check(const opts_t *o, FILE *info) {
  const uint32_t cap = CHECK_CAPACITY;
  uint64_t *prefix = xmalloc(cap * sizeof *prefix);
  uint64_t *tg = xmalloc(CHECK_TARGETS * sizeof *tg);
  uint32_t *lv = xmalloc(CHECK_TARGETS * sizeof *lv);
  rd_error_t err;
  bool have_prefix = false;
  for (size_t k = 0; k < o->fanout.n; k++) {
    uint32_t K = o->fanout.v[k];
    rd_sumtree_t t;
    tree_init(&t, cap, K);
    tree_fill(&t, cap, SEED ^ 0xc4ec, true);
    int rc = rd_sumtree_check(&t, &err);
    if (rc) die("exactness check FAILED (K=%u): rd_sumtree_check: %s", K, err.msg);
    /* The prefix sums from leaf reads; the same leaves for every K. */
    uint64_t run = 0;
    for (uint32_t i = 0; i < cap; i++) {
      run += rd_sumtree_get(&t, i);
      if (have_prefix && prefix[i] != run)
        die("exactness check FAILED (K=%u): leaf %u reads differently than for K=%u", K, i,
            o->fanout.v[0]);
      prefix[i] = run;
    }
    if (rd_sumtree_total(&t) != run)
      die("exactness check FAILED (K=%u): total %" PRIu64 " but the leaves sum to %" PRIu64, K,
          rd_sumtree_total(&t), run);
    if (!have_prefix) bench_check_targets(prefix, cap, SEED ^ 0xc4ec, tg, CHECK_TARGETS);
    have_prefix = true;
    for (size_t h = 0; h < o->threads.n; h++) {
      uint32_t T = o->threads.v[h];
      rd_sumtree_set_threads(&t, T);
      memset(lv, 0xff, CHECK_TARGETS * sizeof *lv);
      rc = rd_sumtree_sample(&t, CHECK_TARGETS, tg, lv, &err);
      if (rc) fail_rc("rd_sumtree_sample (check)", rc, &err);
      for (size_t i = 0; i < CHECK_TARGETS; i++) check_leaf("sumtree", K, T, prefix, cap, tg[i], lv[i]);
    }
    rd_sumtree_free(&t);
  }
  if (o->baseline) {
    rd_bench_bintree_t bt;
    if (rd_bench_bintree_init(&bt, cap)) die("out of memory for the baseline tree");
    bintree_fill(&bt, cap, SEED ^ 0xc4ec, true);
    if (rd_bench_bintree_total(&bt) != (double)prefix[cap - 1])
      die("exactness check FAILED (baseline): total differs");
    for (size_t i = 0; i < CHECK_TARGETS; i++) {
      uint32_t leaf = rd_bench_bintree_sample(&bt, (double)tg[i]);
      check_leaf("baseline", 2, 1, prefix, cap, tg[i], leaf);
    }
    rd_bench_bintree_free(&bt);
  }
  fprintf(info, "# exactness check: capacity %u, %d targets, K =", cap, CHECK_TARGETS);
  for (size_t k = 0; k < o->fanout.n; k++) fprintf(info, " %u", o->fanout.v[k]);
  fprintf(info, ", threads =");
  for (size_t h = 0; h < o->threads.n; h++) fprintf(info, " %u", o->threads.v[h]);
  fprintf(info, "%s: OK\n", o->baseline ? ", and the baseline" : "");
  free(prefix);
  free(tg);
  free(lv);
}

/* ------------------------------------------------------------------ */
/* Driver                                                              */
/* ------------------------------------------------------------------ */

static void progress(const char *what, uint32_t capacity, uint32_t batch, uint32_t fanout,
                     uint32_t threads, double ns) {
  if (!g_progress) return;
  fprintf(stderr, "\r\033[K  %-28s cap %-9u batch %-5u K %-3u threads %u: %8.2f ns/item", what,
          capacity, batch, fanout, threads, ns);
  fflush(stderr);
}

/* One tree measured in a group: its operation, the pool that feeds it, and
 * (for ours) the tree and thread count to set before each of its runs,
 * since the entrants of one K share a tree. */
typedef struct {
  bench_unit_fn fn;
  pool_t *pool;
  rd_sumtree_t *t; /* ours; NULL for a baseline */
  int which;       /* MINE, BASE_BINARY or BASE_KARY */
  uint32_t fanout, threads;
  uint64_t it, units; /* the next unit's index; units per repetition */
  double v[BENCH_MAX_REPS];
} entrant_t;

static void entrant_run(void *ctx, uint64_t n) {
  entrant_t *e = ctx;
  for (uint64_t i = 0; i < n; i++) e->fn(e->pool, e->it++);
}

static void entrant_prepare(entrant_t *e) {
  if (e->t) rd_sumtree_set_threads(e->t, e->threads);
}

/* Nanoseconds per item of each entrant, their repetitions interleaved:
 * round r runs repetition r of every entrant in turn, so the median of
 * each is drawn from the same stretch of time. A shared machine's speed
 * drifts over seconds; measured one after the other, a tree and its
 * baseline could land in different phases of it and skew their ratio. */
static void measure_group(entrant_t *e, size_t n, uint32_t batch, double *ns) {
  const bench_timing_t *tm = &g_opts->timing;
  for (size_t i = 0; i < n; i++) {
    entrant_prepare(&e[i]);
    e[i].units = bench_warm_up(entrant_run, &e[i], tm);
  }
  for (int r = 0; r < tm->reps; r++)
    for (size_t i = 0; i < n; i++) {
      entrant_prepare(&e[i]);
      /* The entrants before it have evicted its tree: an untimed quarter
       * repetition brings back what fits in the caches, as a tree measured
       * alone would find it. */
      entrant_run(&e[i], (e[i].units + 3) / 4);
      e[i].v[r] = bench_rep_seconds(entrant_run, &e[i], e[i].units, tm);
    }
  for (size_t i = 0; i < n; i++) ns[i] = bench_median(e[i].v, tm->reps) * 1e9 / batch;
}

/* The trees of one capacity: the baselines and ours for every K, filled
 * with the same leaves. */
typedef struct {
  uint32_t capacity;
  rd_bench_bintree_t bt;  /* the binary baseline */
  rd_bench_kary_t kt;     /* the float K-ary baseline */
  rd_bench_bintree_t xb;  /* a copy of one of ours: where its sampled positions come from */
  rd_sumtree_t st[BENCH_MAX_LIST];
} trees_t;

static void trees_init(trees_t *tr, uint32_t capacity, const opts_t *o) {
  tr->capacity = capacity;
  if (o->baseline) {
    if (rd_bench_bintree_init(&tr->bt, capacity))
      die("out of memory for a baseline tree of %u", capacity);
    bintree_fill(&tr->bt, capacity, SEED ^ capacity, false);
    if (rd_bench_kary_init(&tr->kt, capacity, KARY_FANOUT))
      die("out of memory for a K-ary float tree of %u", capacity);
    karytree_fill(&tr->kt, capacity, SEED ^ capacity);
  }
  if (rd_bench_bintree_init(&tr->xb, capacity))
    die("out of memory for a baseline tree of %u", capacity);
  for (size_t k = 0; k < o->fanout.n; k++) {
    tree_init(&tr->st[k], capacity, o->fanout.v[k]);
    tree_fill(&tr->st[k], capacity, SEED ^ capacity, false);
  }
}

static void trees_free(trees_t *tr, const opts_t *o) {
  rd_error_t err;
  for (size_t k = 0; k < o->fanout.n; k++) {
    if (rd_sumtree_check(&tr->st[k], &err))
      die("tree check FAILED after timing (capacity %u, K=%u): %s", tr->capacity,
          o->fanout.v[k], err.msg);
    rd_sumtree_free(&tr->st[k]);
  }
  rd_bench_bintree_free(&tr->xb);
  if (o->baseline) {
    rd_bench_kary_free(&tr->kt);
    rd_bench_bintree_free(&tr->bt);
  }
}

/* The baselines' pool for batch B: targets and sampled positions from the
 * exact binary tree, shared with the float one (targets scaled to its
 * total before each of its operations). */
static void baseline_pool(pool_t *p, trees_t *tr, uint32_t B) {
  pool_init(p, tr->capacity, B, SEED ^ ((uint64_t)tr->capacity << 20) ^ B);
  p->bt = &tr->bt;
  p->kt = &tr->kt;
  /* Targets are integers below 2^53, so the double tree sums them exactly. */
  pool_targets(p, (uint64_t)rd_bench_bintree_total(&tr->bt), SEED ^ 0x7a ^ B);
  pool_sampled_positions(p, &tr->bt);
}

/* Our tree k's pool for batch B. Updates and inserts change the total:
 * targets are drawn against the tree as it is now, just before sampling. */
static void sumtree_pool(pool_t *p, trees_t *tr, size_t k, uint32_t B) {
  rd_sumtree_t *t = &tr->st[k];
  pool_init(p, tr->capacity, B, SEED ^ ((uint64_t)tr->capacity << 20) ^ B);
  p->t = t;
  pool_targets(p, rd_sumtree_total(t), SEED ^ 0x7a ^ B ^ ((uint64_t)t->fanout << 32));
  for (uint32_t i = 0; i < tr->capacity; i++)
    tr->xb.value[tr->xb.cap + i] = (double)rd_sumtree_get(t, i);
  rd_bench_bintree_rebuild(&tr->xb);
  pool_sampled_positions(p, &tr->xb);
}

static void run_capacity(uint32_t capacity, const opts_t *o) {
  static const bench_unit_fn sfns[N_OPS] = {st_sample, st_update, st_update, st_insert};
  static const bench_unit_fn bfns[N_OPS] = {bt_sample, bt_update, bt_update, bt_insert};
  static const bench_unit_fn kfns[N_OPS] = {kt_sample, kt_update, kt_update, kt_insert};
  trees_t *tr = xmalloc(sizeof *tr);
  memset(tr, 0, sizeof *tr);
  trees_init(tr, capacity, o);
  const size_t nk = o->fanout.n, nt = o->threads.n, max_e = 2 + nk * nt;
  entrant_t *e = xmalloc(max_e * sizeof *e);
  double *ns = xmalloc(max_e * sizeof *ns);
  pool_t bp, sp[BENCH_MAX_LIST];
  for (size_t b = 0; b < o->batch.n; b++) {
    const uint32_t B = o->batch.v[b];
    if (o->baseline) baseline_pool(&bp, tr, B);
    for (size_t k = 0; k < nk; k++) sumtree_pool(&sp[k], tr, k, B);
    for (int op = 0; op < N_OPS; op++) {
      if (!o->op[op]) continue;
      size_t n = 0;
      if (o->baseline) {
        pool_op(&bp, op);
        /* The float tree's total moves with its updates: its targets follow. */
        pool_float_targets(&bp, (uint64_t)rd_bench_bintree_total(&tr->bt),
                           rd_bench_kary_total(&tr->kt));
        e[n++] = (entrant_t){.fn = bfns[op], .pool = &bp, .which = BASE_BINARY, .fanout = 2,
                             .threads = 1};
        e[n++] = (entrant_t){.fn = kfns[op], .pool = &bp, .which = BASE_KARY,
                             .fanout = KARY_FANOUT, .threads = 1};
      }
      for (size_t k = 0; k < nk; k++) {
        pool_op(&sp[k], op);
        for (size_t h = 0; h < nt; h++)
          e[n++] = (entrant_t){.fn = sfns[op], .pool = &sp[k], .t = &tr->st[k], .which = MINE,
                               .fanout = o->fanout.v[k], .threads = o->threads.v[h]};
      }
      measure_group(e, n, B, ns);
      for (size_t i = 0; i < n; i++) {
        add_result(op, e[i].which, capacity, B, e[i].fanout, e[i].threads, ns[i]);
        progress(op_name[op], capacity, B, e[i].fanout, e[i].threads, ns[i]);
      }
    }
    if (o->baseline) pool_free(&bp);
    for (size_t k = 0; k < nk; k++) pool_free(&sp[k]);
  }
  free(ns);
  free(e);
  trees_free(tr, o);
  free(tr);
}

static const char *kernel_isa(void) {
  rd_sumtree_t t;
  static char isa[32];
  tree_init(&t, 64, 8);
  snprintf(isa, sizeof isa, "%s", t.isa);
  rd_sumtree_free(&t);
  return isa;
}

static void print_json(void) {
  char name[64];
  for (size_t i = 0; i < n_results; i++) {
    const result_t *r = &results[i];
    result_name(r, name, sizeof name);
    if (r->baseline == BASE_BINARY)
      printf("{\"name\": \"%s\", \"params\": {\"capacity\": %u, \"batch\": %u}, "
             "\"value\": %.2f, \"unit\": \"ns/item\"}\n",
             name, r->capacity, r->batch, r->ns);
    else if (r->baseline == BASE_KARY)
      printf("{\"name\": \"%s\", \"params\": {\"capacity\": %u, \"batch\": %u, "
             "\"fanout\": %u}, \"value\": %.2f, \"unit\": \"ns/item\"}\n",
             name, r->capacity, r->batch, r->fanout, r->ns);
    else
      printf("{\"name\": \"%s\", \"params\": {\"capacity\": %u, \"batch\": %u, \"fanout\": %u, "
             "\"threads\": %u}, \"value\": %.2f, \"unit\": \"ns/item\"}\n",
             name, r->capacity, r->batch, r->fanout, r->threads, r->ns);
  }
}

static void print_table(void) {
  char name[64];
  printf("%-32s %10s %6s %6s %7s %10s %10s %10s\n", "op", "capacity", "batch", "fanout",
         "threads", "ns/item", "vs binary", "vs k-ary");
  for (size_t i = 0; i < n_results; i++) {
    const result_t *r = &results[i];
    if (i > 0) {
      const result_t *q = &results[i - 1];
      if (q->capacity != r->capacity || q->op != r->op || q->batch != r->batch) putchar('\n');
    }
    /* '*': the fastest K for this capacity, op, batch and thread count. */
    bool best = false;
    if (!r->baseline) {
      best = true;
      for (size_t j = 0; j < n_results; j++) {
        const result_t *s = &results[j];
        if (!s->baseline && s->op == r->op && s->capacity == r->capacity &&
            s->batch == r->batch && s->threads == r->threads && s->ns < r->ns)
          best = false;
      }
    }
    char fan[16], ratio[2][32];
    snprintf(fan, sizeof fan, "%u", r->fanout);
    for (int w = 0; w < 2; w++) {
      const result_t *b = r->baseline ? NULL : find_baseline(r, w ? BASE_KARY : BASE_BINARY);
      if (b && r->ns > 0)
        snprintf(ratio[w], sizeof ratio[w], "%.2fx", b->ns / r->ns);
      else
        snprintf(ratio[w], sizeof ratio[w], "-");
    }
    result_name(r, name, sizeof name);
    printf("%-32s %10u %6u %6s %7u %10.2f %10s %10s%s\n", name, r->capacity, r->batch, fan,
           r->threads, r->ns, ratio[0], ratio[1], best ? " *" : "");
  }
  printf("\n# ratio = baseline ns / sumtree ns for the same capacity, batch and op (binary:"
         " the textbook binary tree; k-ary: the paper's K=16 float tree);"
         " * = fastest K for its capacity, op, batch and threads\n");
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(&o, argc, argv);
  g_opts = &o;
  g_progress = isatty(STDERR_FILENO) && !o.json;
  /* In JSON mode stdout carries only the JSON lines; the header goes to
   * stderr. */
  FILE *info = o.json ? stderr : stdout;

  bench_machine_t m;
  bench_machine(&m);
  fprintf(info, "# bench_sumtree: kernel ISA %s, %s, %s, %ld CPUs (load %s), %.0f ms per "
                "repetition, median of %d, %s\n",
          kernel_isa(), m.date, m.cpu, m.cpus, m.load, o.timing.min_s * 1e3, o.timing.reps,
          o.cpu_clock ? "thread CPU time" : "wall clock");
  fflush(info);

  exactness_check(&o, info);
  fflush(info);

  for (size_t c = 0; c < o.capacity.n; c++) {
    uint32_t cap = o.capacity.v[c];
    run_capacity(cap, &o);
  }
  if (g_progress) fputs("\r\033[K", stderr);

  qsort(results, n_results, sizeof *results, cmp_result);
  bench_report(o.json, print_json, print_table);
  free(results);
  return 0;
}
