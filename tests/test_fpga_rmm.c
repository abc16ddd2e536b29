/* test_fpga_rmm.c - C-simulation of the FPGA replay module
 * (backends/fpga/kernels/rmm.[ch]) against the CPU sum tree
 * (backends/cpu/sumtree.h) and the FPGA performance model
 * (backends/fpga/model.h).
 *
 * The kernel's shape is fixed at compile time, as a hardware build's is, so
 * meson compiles this file once per configuration (RMM_K, RMM_CAPACITY,
 * RMM_S, RMM_MAX_BATCH, RMM_PORT_REGS, RMM_PORT_BANKED; see
 * tests/meson.build). Each program checks that:
 * - the kernel's structure (levels, widths, nodes, S, replicated levels,
 *   bank depths, update ports and the banks they take, stage II, fill) is
 *   what model.c costs for the same design (workload.rmm_ports_fixed), and
 *   the kernel's structural cycle count equals the model's when the batch
 *   spreads evenly over the banks (serially through one-port replicas);
 * - a write-banked level spreads a node over its sub-banks (each written
 *   by one pipeline) and its replicas stay equal;
 * - for the same leaf integers, sample picks the same leaves as the CPU
 *   tree for random and boundary targets (papers/001 §IV-C4 "does not
 *   affect the sampling outcome": here exact, not approximately);
 * - update (explicit positions, duplicates included), update through the
 *   memo of the sampled paths (papers/001 §IV-D4) and insert leave the same
 *   leaves and total as the CPU tree, and the kernel's own tree consistent
 *   (every node the sum of its children, replicas equal, padding zero);
 * - trees of maximal leaves do not overflow the per-level widths;
 * - bad requests fail with their code and change nothing;
 * - the kernel top (rmm_kernel, op codes) does the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fpga_part.h"
#include "model.h"
#include "rmm.h"
#include "sumtree.h"
#include "rd_rng.h"

#ifndef RMM_TEST_BATCH
#define RMM_TEST_BATCH RMM_MAX_BATCH
#endif

#define N ((uint32_t)RMM_CAPACITY)

/* A leaf with a wide dynamic range: zeros, the maximum, anything between. */
static uint64_t wide_value(uint64_t *s) {
  uint64_t r = rd_splitmix64(s);
  if ((r & 15) == 0) return 0;
  if ((r & 15) == 1) return RMM_MAX_LEAF;
  return (rd_splitmix64(s) >> (r >> 58)) % (RMM_MAX_LEAF + 1);
}

typedef struct {
  rmm_tree_t *fpga;
  rd_sumtree_t cpu;
} trees_t;

static int setup(void **state) {
  trees_t *t = calloc(1, sizeof *t);
  assert_non_null(t);
  t->fpga = calloc(1, sizeof *t->fpga);
  assert_non_null(t->fpga);
  rmm_reset(t->fpga);
  rd_error_t err;
  assert_int_equal(rd_sumtree_init(&t->cpu, N, RMM_K, &err), RD_OK);
  *state = t;
  return 0;
}

static int teardown(void **state) {
  trees_t *t = *state;
  rd_sumtree_free(&t->cpu);
  free(t->fpga);
  free(t);
  return 0;
}

static void check_consistent(const rmm_tree_t *f) {
  char msg[256];
  if (rmm_check(f, msg, sizeof msg) != 0) fail_msg("rmm_check: %s", msg);
}

/* Same total and the same integer at every leaf. */
static void check_same_leaves(trees_t *t) {
  assert_int_equal(rmm_total(t->fpga), rd_sumtree_total(&t->cpu));
  for (uint32_t p = 0; p < N; p++) {
    uint64_t a = rmm_leaf(t->fpga, p), b = rd_sumtree_get(&t->cpu, p);
    if (a != b) fail_msg("leaf %u: fpga %llu, cpu %llu", p, (unsigned long long)a,
                         (unsigned long long)b);
  }
}

/* The kernel's update count for n items whose busiest pipeline has
 * max_bank of them (rmm.h, UPDATE PORTS), for n <= RMM_MAX_BATCH. */
static uint64_t update_cycles(uint32_t n, uint32_t max_bank) {
  if (n == 0) return 0;
  return (uint64_t)(RMM_SERIAL ? n : max_bank) * RMM_UPDATE_ITEM_II + RMM_UPDATE_FILL;
}

/* The loads an update of n items can have: at least the mean, at most all
 * (of one request: an insert goes in parts of RMM_MAX_BATCH). */
static void check_update_stats(uint32_t n, const rmm_stats_t *st) {
  const uint32_t part = n < RMM_MAX_BATCH ? n : RMM_MAX_BATCH;
  assert_int_equal(st->max_lane, 0);
  assert_true(st->max_bank >= (part + RMM_S - 1) / RMM_S);
  assert_true(st->max_bank <= part);
  if (n <= RMM_MAX_BATCH) {
    assert_int_equal(st->cycles, update_cycles(n, st->max_bank));
  } else { /* an insert, in parts of RMM_MAX_BATCH, each with its fill */
    const uint64_t parts = (n + RMM_MAX_BATCH - 1) / RMM_MAX_BATCH;
    assert_true(st->cycles >= (RMM_SERIAL ? n : (n + RMM_S - 1) / RMM_S) + parts * RMM_UPDATE_FILL);
    assert_true(st->cycles <= (uint64_t)n + parts * RMM_UPDATE_FILL);
  }
}

/* Fill both trees with the same leaves, in ring-order chunks. */
static void fill(trees_t *t, uint64_t *seed, int all_max) {
  static uint64_t v[RMM_CAPACITY];
  for (uint32_t p = 0; p < N; p++) v[p] = all_max ? RMM_MAX_LEAF : wide_value(seed);
  rd_error_t err;
  uint32_t first = 0;
  while (first < N) {
    uint32_t n = 1 + (uint32_t)(rd_splitmix64(seed) % 3000);
    if (n > N - first) n = N - first;
    rmm_stats_t st;
    assert_int_equal(rmm_insert(t->fpga, first, n, v + first, &st), RMM_OK);
    check_update_stats(n, &st);
    assert_int_equal(rd_sumtree_set_range(&t->cpu, first, n, v + first, &err), RD_OK);
    first += n;
  }
  check_same_leaves(t);
  check_consistent(t->fpga);
}

/* Sample one batch on both and compare. */
static void sample_both(trees_t *t, uint32_t n, const uint64_t *targets) {
  static uint32_t lf[RMM_MAX_BATCH], lc[RMM_MAX_BATCH];
  rd_error_t err;
  rmm_stats_t st;
  memset(lf, 0xff, sizeof lf); /* poison: every leaf must be written */
  assert_int_equal(rmm_sample(t->fpga, n, targets, lf, &st), RMM_OK);
  assert_int_equal(rd_sumtree_sample(&t->cpu, n, targets, lc, &err), RD_OK);
  for (uint32_t i = 0; i < n; i++)
    if (lf[i] != lc[i])
      fail_msg("target %llu: fpga leaf %u, cpu leaf %u", (unsigned long long)targets[i], lf[i],
               lc[i]);
  /* The structural count: the busiest of lanes (above J) and banks. */
  uint32_t busiest = st.max_lane > st.max_bank ? st.max_lane : st.max_bank;
  assert_int_equal(st.cycles, n ? (uint64_t)busiest * RMM_SAMPLE_ITEM_II + RMM_SAMPLE_FILL : 0);
  assert_true(busiest >= (n + RMM_S - 1) / RMM_S);
}

/* Random targets, then boundary targets around prefix sums. */
static void sample_compare(trees_t *t, uint64_t *seed, int rounds) {
  static uint64_t tg[RMM_MAX_BATCH];
  const uint64_t total = rd_sumtree_total(&t->cpu);
  for (int r = 0; r < rounds; r++) {
    uint32_t n = 1 + (uint32_t)(rd_splitmix64(seed) % RMM_MAX_BATCH);
    for (uint32_t i = 0; i < n; i++) tg[i] = rd_splitmix64(seed) % total;
    sample_both(t, n, tg);
  }
  /* Boundaries: with P(i) = leaf[0] + ... + leaf[i], target P(i) - 1 is
   * the last that selects i and P(i) the first that selects the next
   * non-zero leaf; also 0 and total - 1. */
  uint32_t n = 0;
  tg[n++] = 0;
  tg[n++] = total - 1;
  uint64_t prefix = 0;
  for (uint32_t p = 0; p < N && n + 2 <= RMM_MAX_BATCH; p++) {
    prefix += rd_sumtree_get(&t->cpu, p);
    if (prefix == 0 || (rd_splitmix64(seed) % (N / 64 + 1)) != 0) continue;
    tg[n++] = prefix - 1;
    if (prefix < total) tg[n++] = prefix;
  }
  sample_both(t, n, tg);
}

/* ------------------------------------------------------------------ */
/* Structure against the model                                          */
/* ------------------------------------------------------------------ */

/* A part with room for any tree these tests build, so the model keeps the
 * fixed S (workload.rmm_s) and reports the structure. */
static void roomy_part(rd_fpga_part_t *p) {
  test_fpga_part(p, "roomy", 1, 100000000, 1000000000, 1000000000, 100000000, 100000000, 300);
}

static void test_structure_matches_model(void **state) {
  (void)state;
  rd_fpga_part_t part;
  roomy_part(&part);
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  w.batch = RMM_TEST_BATCH;
  w.capacity = N;
  w.fanout = RMM_K;
  w.rmm_s = RMM_S;
  w.rmm_ports_fixed = 1; /* this build's design, as it names it */
  w.rmm_port_regs = RMM_PORT_REGS;
  w.rmm_port_banked = RMM_PORT_BANKED;
  rd_fpga_rmm_est_t e;
  rd_error_t err;
  int rc = rd_fpga_model_rmm(&part, &w, &e, &err);
  if (rc != RD_OK) fail_msg("rd_fpga_model_rmm: %s", err.msg);

  assert_int_equal(e.levels, RMM_H);
  assert_int_equal(e.leaf_bits, RMM_LEAF_BITS);
  assert_int_equal(e.s, RMM_S);
  assert_int_equal(e.shared_levels, RMM_J);
  assert_int_equal(e.width[0], RMM_W(0));
  assert_int_equal(e.nodes[0], 1);
  /* Level by level, through the kernel's own level list. */
  uint32_t levels_seen = 0;
#define CHECK_LEVEL(hh)                                                           \
  do {                                                                            \
    assert_int_equal(e.width[hh], RMM_W(hh));                                     \
    assert_int_equal(e.nodes[hh], RMM_NODES(hh));                                 \
    assert_int_equal(e.bank_words[hh], RMM_DEPTH(hh));                            \
    /* The banks the model costs are the kernel's memories: S per level,  \
     * S^2 sub-banks on a write-banked level, none (S bank_words words of \
     * registers) on a level in registers. */                             \
    assert_int_equal(e.port[hh], !RMM_REPLICATED(hh) ? RD_FPGA_PORT_NONE           \
                                 : RMM_IS_REGS(hh)   ? RD_FPGA_PORT_REGS           \
                                 : RMM_IS_BANKED(hh) ? RD_FPGA_PORT_BANKED         \
                                                     : RD_FPGA_PORT_ONE);          \
    assert_int_equal(sizeof ((rmm_tree_t *)0)->l##hh,                              \
                     (size_t)RMM_S * RMM_SUB(hh) * RMM_DEPTH(hh) * sizeof(rmm_l##hh##_t)); \
    assert_int_equal(e.banks[hh], RMM_IS_REGS(hh) ? 0 : (uint64_t)RMM_S * RMM_SUB(hh)); \
    levels_seen++;                                                                \
  } while (0);
  RMM_FOR_LEVELS(CHECK_LEVEL)
#undef CHECK_LEVEL
  assert_int_equal(levels_seen, e.levels);
  /* The kernel's stages (one per level, K cycles per item in a sampler,
   * one in an updater) are the model's: same fill, and for an even spread
   * the same cycles, ceil(B/S) K + (H-1) K and ceil(B/S) + (H-1), or
   * B + (H-1) through one-port replicas. */
  assert_int_equal(RMM_STAGES, e.levels);
  assert_int_equal(e.sample_fill_cycles, RMM_SAMPLE_FILL);
  assert_int_equal(e.update_fill_cycles, RMM_UPDATE_FILL);
  const uint64_t per_pipe = (RMM_TEST_BATCH + RMM_S - 1) / RMM_S;
  assert_int_equal(e.sample_cycles, per_pipe * RMM_SAMPLE_ITEM_II + RMM_SAMPLE_FILL);
  assert_int_equal(e.update_serial, RMM_SERIAL);
  assert_int_equal(e.update_cycles,
                   (RMM_SERIAL ? RMM_TEST_BATCH : per_pipe) * RMM_UPDATE_ITEM_II + RMM_UPDATE_FILL);
  assert_null(e.port_limit);
  assert_int_equal(e.port[0], RD_FPGA_PORT_NONE);
  uint32_t regs, banked;
  rd_fpga_rmm_port_masks(&e, &regs, &banked);
  assert_int_equal(regs, RMM_PORT_REGS);
  assert_int_equal(banked, RMM_PORT_BANKED);
  /* Widths shrink by log2 K per level (papers/001 §IV-C4). */
  for (uint32_t h = 1; h <= e.levels; h++) assert_int_equal(e.width[h - 1] - e.width[h], RMM_LOG2K);
}

/* Balanced loads: all leaves 1 and stratified targets / evenly spaced
 * positions put ceil(B/S) items in every lane and bank when the banks hold
 * equal numbers of leaves; the kernel's count is then the model's. When
 * they do not (N not a multiple of a bank's span), the busiest bank is
 * above the mean and the kernel's count at or above the model's. */
static void test_cycles_balanced(void **state) {
  trees_t *t = *state;
  const uint64_t leaves_per_bank = (uint64_t)RMM_C << ((RMM_H - RMM_J) * RMM_LOG2K);
  /* Sampling deals round-robin above J; updates go to the leaf's owner. */
  const int even_update = RMM_S == 1 || leaves_per_bank * RMM_S == N;
  const int even = even_update || RMM_J == RMM_H;
  static uint64_t ones[RMM_CAPACITY];
  for (uint32_t p = 0; p < N; p++) ones[p] = 1;
  assert_int_equal(rmm_insert(t->fpga, 0, N, ones, NULL), RMM_OK);
  const uint32_t B = RMM_TEST_BATCH >= RMM_S ? RMM_TEST_BATCH / RMM_S * RMM_S : RMM_TEST_BATCH;
  static uint64_t tg[RMM_MAX_BATCH];
  static uint32_t pos[RMM_MAX_BATCH], lf[RMM_MAX_BATCH];
  /* Target i * N / B: bank q receives the B/S targets in its leaf range. */
  for (uint32_t i = 0; i < B; i++) tg[i] = (uint64_t)i * N / B;
  rmm_stats_t st;
  assert_int_equal(rmm_sample(t->fpga, B, tg, lf, &st), RMM_OK);
  for (uint32_t i = 0; i < B; i++) assert_int_equal(lf[i], tg[i]); /* all leaves 1 */
  const uint64_t per_pipe = (B + RMM_S - 1) / RMM_S;
  const uint64_t model_sample = per_pipe * RMM_K + (RMM_H - 1) * RMM_K;
  const uint64_t model_update = (RMM_SERIAL ? B : per_pipe) + (RMM_H - 1);
  if (even)
    assert_int_equal(st.cycles, model_sample);
  else
    assert_true(st.cycles >= model_sample);
  for (uint32_t i = 0; i < B; i++) pos[i] = (uint32_t)tg[i];
  assert_int_equal(rmm_update(t->fpga, B, pos, tg, &st), RMM_OK);
  if (even_update)
    assert_int_equal(st.cycles, model_update);
  else
    assert_true(st.cycles >= model_update);
}

/* ------------------------------------------------------------------ */
/* Same leaves as the CPU tree                                         */
/* ------------------------------------------------------------------ */

static void test_sample_matches_cpu(void **state) {
  trees_t *t = *state;
  uint64_t seed = 0x5eed0001 + RMM_K * 131 + N;
  fill(t, &seed, 0);
  sample_compare(t, &seed, 100);
}

/* The write-banked levels hold each node as S sub-banks, sub-bank p the
 * sum of pipeline p's deltas: after updates from every pipeline, some node
 * of each such level above J is spread over several sub-banks (else the
 * banking would be a name only; such a node is on the paths of K^(J-h)
 * level-J nodes, more than the C < K that one pipeline owns). A level-J
 * node (a leaf when J = H) is on its owner's paths only: one sub-bank
 * holds it, and the sub-banks are there for the S writes a replica takes
 * per cycle on different nodes. */
static void check_banked_spread(const rmm_tree_t *f) {
  uint32_t banked_levels = 0;
#define SPREAD(hh)                                                              \
  if (RMM_IS_BANKED(hh)) {                                                      \
    banked_levels++;                                                            \
    uint32_t widest = 0; /* most non-zero sub-banks of one node */               \
    for (uint64_t i = 0; i < (uint64_t)RMM_DEPTH(hh); i++) {                    \
      uint32_t nz = 0;                                                          \
      for (uint32_t sb = 0; sb < (uint32_t)RMM_SUB(hh); sb++)                   \
        nz += f->l##hh[0][sb][i] != 0;                                          \
      if (nz > widest) widest = nz;                                             \
    }                                                                           \
    if (hh < RMM_J)                                                             \
      assert_true(widest >= 2);                                                 \
    else                                                                        \
      assert_int_equal(widest, 1);                                              \
  }
  RMM_FOR_LEVELS(SPREAD)
#undef SPREAD
  assert_int_equal(banked_levels, __builtin_popcount(RMM_PORT_BANKED));
}

static void test_update_matches_cpu(void **state) {
  trees_t *t = *state;
  uint64_t seed = 0x5eed0002 + RMM_K * 131 + N;
  fill(t, &seed, 0);
  static uint32_t pos[RMM_MAX_BATCH];
  static uint64_t val[RMM_MAX_BATCH];
  rd_error_t err;
  for (int r = 0; r < 200; r++) {
    uint32_t n = 1 + (uint32_t)(rd_splitmix64(&seed) % RMM_MAX_BATCH);
    /* Every fourth round draws from 8 positions: many duplicates. */
    for (uint32_t i = 0; i < n; i++) {
      pos[i] = (r % 4 == 0) ? (uint32_t)(rd_splitmix64(&seed) % 8) * (N / 8)
                            : (uint32_t)(rd_splitmix64(&seed) % N);
      val[i] = wide_value(&seed);
    }
    rmm_stats_t st;
    assert_int_equal(rmm_update(t->fpga, n, pos, val, &st), RMM_OK);
    assert_int_equal(rd_sumtree_update(&t->cpu, n, pos, val, &err), RD_OK);
    check_update_stats(n, &st);
    if (r % 8 == 7) {
      check_same_leaves(t);
      check_consistent(t->fpga);
      if (rd_sumtree_total(&t->cpu) > 0) sample_compare(t, &seed, 2);
    }
  }
  check_same_leaves(t);
  check_consistent(t->fpga);
  check_banked_spread(t->fpga);
}

/* papers/001 §IV-D4: the update of a sampled batch follows the memoised
 * paths; the CPU gets the same values at the sampled leaves. */
static void test_update_sampled_memo(void **state) {
  trees_t *t = *state;
  uint64_t seed = 0x5eed0003 + RMM_K * 131 + N;
  fill(t, &seed, 0);
  static uint64_t tg[RMM_MAX_BATCH], val[RMM_MAX_BATCH];
  static uint32_t lf[RMM_MAX_BATCH];
  rd_error_t err;
  for (int r = 0; r < 20; r++) {
    const uint64_t total = rmm_total(t->fpga);
    if (total == 0) break;
    uint32_t n = 1 + (uint32_t)(rd_splitmix64(&seed) % RMM_MAX_BATCH);
    for (uint32_t i = 0; i < n; i++) tg[i] = rd_splitmix64(&seed) % total;
    assert_int_equal(rmm_sample(t->fpga, n, tg, lf, NULL), RMM_OK);
    /* Priorities back for the first m of the n sampled items. */
    uint32_t m = 1 + (uint32_t)(rd_splitmix64(&seed) % n);
    for (uint32_t i = 0; i < m; i++) { /* non-zero: keep the tree non-empty */
      val[i] = wide_value(&seed);
      if (val[i] == 0) val[i] = 1;
    }
    assert_int_equal(rmm_update_sampled(t->fpga, m, val, NULL), RMM_OK);
    assert_int_equal(rd_sumtree_update(&t->cpu, m, lf, val, &err), RD_OK);
    assert_int_equal(rmm_total(t->fpga), rd_sumtree_total(&t->cpu));
  }
  check_same_leaves(t);
  check_consistent(t->fpga);
  /* More items than the last sample had: refused, nothing changes. */
  uint32_t n_last = t->fpga->memo_n;
  const uint64_t before = rmm_total(t->fpga);
  assert_int_equal(rmm_update_sampled(t->fpga, n_last + 1, val, NULL), RMM_ETOOBIG);
  assert_int_equal(rmm_total(t->fpga), before);
}

/* Every leaf at the CPU's largest: the per-level widths must hold N times
 * the largest leaf at the root and K^(H-h) of them at level h; a width one
 * bit short wraps, and the total or a leaf comes out wrong. */
static void test_max_leaves_fit_widths(void **state) {
  trees_t *t = *state;
  uint64_t seed = 0x5eed0004;
  fill(t, &seed, 1);
  assert_int_equal(rmm_total(t->fpga), (uint64_t)N * RMM_MAX_LEAF);
  sample_compare(t, &seed, 4);
  /* Down to one non-zero leaf at the end and back. */
  static uint32_t pos[RMM_MAX_BATCH];
  static uint64_t val[RMM_MAX_BATCH];
  rd_error_t err;
  for (uint32_t first = 0; first + 1 < N; first += RMM_MAX_BATCH) {
    uint32_t n = N - 1 - first < RMM_MAX_BATCH ? N - 1 - first : RMM_MAX_BATCH;
    for (uint32_t i = 0; i < n; i++) pos[i] = first + i, val[i] = 0;
    assert_int_equal(rmm_update(t->fpga, n, pos, val, NULL), RMM_OK);
    assert_int_equal(rd_sumtree_update(&t->cpu, n, pos, val, &err), RD_OK);
  }
  assert_int_equal(rmm_total(t->fpga), RMM_MAX_LEAF);
  uint64_t tg[2] = {0, RMM_MAX_LEAF - 1};
  sample_both(t, 2, tg);
  uint32_t lf[2];
  assert_int_equal(rmm_sample(t->fpga, 2, tg, lf, NULL), RMM_OK);
  assert_int_equal(lf[0], N - 1);
  assert_int_equal(lf[1], N - 1);
  check_consistent(t->fpga);
}

/* ------------------------------------------------------------------ */
/* Errors change nothing                                               */
/* ------------------------------------------------------------------ */

static void test_errors(void **state) {
  trees_t *t = *state;
  uint64_t tg[2] = {0, 0};
  uint32_t lf[2] = {77, 77};
  uint32_t pos[2] = {0, 0};
  uint64_t val[2] = {1, 1};
  assert_int_equal(rmm_sample(t->fpga, 1, tg, lf, NULL), RMM_EEMPTY);
  assert_int_equal(lf[0], 77);

  uint64_t seed = 0x5eed0005;
  fill(t, &seed, 0);
  const uint64_t total = rmm_total(t->fpga);
  tg[1] = total; /* one past the last valid target */
  assert_int_equal(rmm_sample(t->fpga, 2, tg, lf, NULL), RMM_ERANGE);
  assert_int_equal(lf[0], 77);
  static uint64_t many[RMM_MAX_BATCH + 1];
  static uint32_t many_lf[RMM_MAX_BATCH + 1];
  assert_int_equal(rmm_sample(t->fpga, RMM_MAX_BATCH + 1, many, many_lf, NULL), RMM_ETOOBIG);

  static uint32_t many_pos[RMM_MAX_BATCH + 1];
  assert_int_equal(rmm_update(t->fpga, RMM_MAX_BATCH + 1, many_pos, many, NULL), RMM_ETOOBIG);
  pos[1] = N; /* out of range, after a valid item */
  assert_int_equal(rmm_update(t->fpga, 2, pos, val, NULL), RMM_ERANGE);
  pos[1] = 1;
  val[1] = RMM_MAX_LEAF + 1;
  assert_int_equal(rmm_update(t->fpga, 2, pos, val, NULL), RMM_ERANGE);
  assert_int_equal(rmm_insert(t->fpga, N - 1, 2, val, NULL), RMM_ERANGE);
  val[1] = 1;
  assert_int_equal(rmm_insert(t->fpga, N - 1, 2, val, NULL), RMM_ERANGE); /* past the end */
  check_same_leaves(t); /* nothing changed */
  assert_int_equal(rmm_total(t->fpga), total);
  check_consistent(t->fpga);
}

/* A corrupted node is detected, by the check and by a descent through it. */
static void test_check_detects_corruption(void **state) {
  trees_t *t = *state;
  uint64_t seed = 0x5eed0006;
  fill(t, &seed, 1);
  char msg[256];
  /* Break leaf N-1's word in its bank without telling its ancestors. */
  uint32_t b = 0;
  uint64_t loc = N - 1;
  if (RMM_H > RMM_J) {
    b = (uint32_t)(((uint64_t)(N - 1) >> ((RMM_H - RMM_J) * RMM_LOG2K)) / RMM_C);
    loc = (N - 1) - b * ((uint64_t)RMM_C << ((RMM_H - RMM_J) * RMM_LOG2K));
  }
  /* A write-banked leaf level (J = H) keeps a leaf in its owner's sub-bank. */
  const uint32_t sb = RMM_IS_BANKED(RMM_H) ? (uint32_t)((N - 1) / RMM_C) : 0;
#define BREAK_LEAF(hh) \
  if (hh == RMM_H) t->fpga->l##hh[b][sb][loc] -= 1;
  RMM_FOR_LEVELS(BREAK_LEAF)
#undef BREAK_LEAF
  assert_int_equal(rmm_check(t->fpga, msg, sizeof msg), -1);
  /* A private leaf breaks its parent's sum; a replicated one (J = H) first
   * differs from the other copies. */
  assert_non_null(strstr(msg, RMM_H > RMM_J || RMM_S == 1 ? "children sum" : "differs"));
  uint64_t tg[1] = {rmm_total(t->fpga) - 1};
  uint32_t lf[1];
  int rc = rmm_sample(t->fpga, 1, tg, lf, NULL);
  assert_int_equal(rc, RMM_ECORRUPT);
  /* A failed descent leaves no memo behind for update_sampled. */
  uint64_t v1[1] = {1};
  assert_int_equal(rmm_update_sampled(t->fpga, 1, v1, NULL), RMM_ETOOBIG);
}

/* ------------------------------------------------------------------ */
/* The kernel top                                                      */
/* ------------------------------------------------------------------ */

static void test_kernel_top(void **state) {
  trees_t *t = *state;
  uint64_t info[3];
  static uint64_t v[RMM_CAPACITY];
  static uint32_t lf[RMM_MAX_BATCH], lc[RMM_MAX_BATCH], pos[RMM_MAX_BATCH];
  static uint64_t tg[RMM_MAX_BATCH], vb[RMM_MAX_BATCH];
  uint64_t seed = 0x5eed0007;
  rd_error_t err;

  rmm_kernel(RMM_OP_RESET, 0, 0, NULL, NULL, NULL, info);
  assert_int_equal(info[0], RMM_OK);
  assert_int_equal(info[1], 0);
  rmm_kernel(RMM_OP_SAMPLE, 1, 0, tg, NULL, lf, info);
  assert_int_equal(info[0], RMM_EEMPTY);

  for (uint32_t p = 0; p < N; p++) v[p] = wide_value(&seed);
  rmm_kernel(RMM_OP_INSERT, N, 0, v, NULL, NULL, info);
  assert_int_equal(info[0], RMM_OK);
  assert_int_equal(rd_sumtree_set_range(&t->cpu, 0, N, v, &err), RD_OK);
  assert_int_equal(info[1], rd_sumtree_total(&t->cpu));

  const uint32_t n = RMM_MAX_BATCH;
  for (uint32_t i = 0; i < n; i++) tg[i] = rd_splitmix64(&seed) % info[1];
  rmm_kernel(RMM_OP_SAMPLE, n, 0, tg, NULL, lf, info);
  assert_int_equal(info[0], RMM_OK);
  assert_true(info[2] >= (uint64_t)RMM_SAMPLE_FILL);
  assert_int_equal(rd_sumtree_sample(&t->cpu, n, tg, lc, &err), RD_OK);
  assert_memory_equal(lf, lc, n * sizeof lf[0]);

  for (uint32_t i = 0; i < n; i++) {
    vb[i] = wide_value(&seed);
    if (vb[i] == 0) vb[i] = 1;
  }
  rmm_kernel(RMM_OP_UPDATE_SAMPLED, n, 0, vb, NULL, NULL, info);
  assert_int_equal(info[0], RMM_OK);
  assert_int_equal(rd_sumtree_update(&t->cpu, n, lc, vb, &err), RD_OK);
  assert_int_equal(info[1], rd_sumtree_total(&t->cpu));

  for (uint32_t i = 0; i < n; i++) pos[i] = (uint32_t)(rd_splitmix64(&seed) % N), vb[i] = wide_value(&seed);
  rmm_kernel(RMM_OP_UPDATE, n, 0, vb, pos, NULL, info);
  assert_int_equal(info[0], RMM_OK);
  assert_int_equal(rd_sumtree_update(&t->cpu, n, pos, vb, &err), RD_OK);
  assert_int_equal(info[1], rd_sumtree_total(&t->cpu));

  rmm_kernel(RMM_OP_TOTAL, 0, 0, NULL, NULL, NULL, info);
  assert_int_equal(info[0], RMM_OK);
  assert_int_equal(info[1], rd_sumtree_total(&t->cpu));
  rmm_kernel(99, 0, 0, NULL, NULL, NULL, info);
  assert_int_equal(info[0], RMM_EBADOP);
  assert_int_equal(info[1], rd_sumtree_total(&t->cpu));
}

int main(void) {
  printf("rmm C-simulation: K=%d N=%d S=%d H=%d J=%d leaf bits %d, max batch %d, ports regs "
         "0x%x banked 0x%x%s\n", RMM_K, RMM_CAPACITY, RMM_S, (int)RMM_H, (int)RMM_J,
         (int)RMM_LEAF_BITS, RMM_MAX_BATCH, (unsigned)RMM_PORT_REGS, (unsigned)RMM_PORT_BANKED,
         RMM_SERIAL ? " (serial update)" : "");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure_matches_model),
      cmocka_unit_test_setup_teardown(test_cycles_balanced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sample_matches_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_matches_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_update_sampled_memo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_leaves_fit_widths, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_detects_corruption, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernel_top, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
