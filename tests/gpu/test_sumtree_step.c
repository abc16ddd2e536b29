/* test_sumtree_step.c - the GPU sum tree's per-thread arithmetic, run on the
 * host over the memory of a real CPU tree, in the GPU's form (its leaf level
 * as prefix sums, where the CPU tree holds plain leaf values: sumtree.h).
 *
 * common/rd_tree_step.h holds every index computation, descent step
 * and block update the CUDA kernels perform. Here whole descents and whole
 * batched updates are assembled from those functions, exactly in the way the
 * kernels assemble them (including the sort / last-write-wins / prefix-sum /
 * owner-per-block update that the GPU runs instead of atomics), and compared
 * bit for bit with rd_sumtree_sample, rd_sumtree_update and
 * rd_sumtree_set_range for every fanout. Built in every configuration,
 * with or without CUDA.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sumtree.h"
#include "rd_tree_step.h"
#include "rd_rng.h"
#include "rdt_rand.h"
#include "rdt_main.h"

static const uint32_t fanouts[] = {2, 4, 8, 16, 32, 64};
#define N_FANOUTS (sizeof fanouts / sizeof fanouts[0])

/* Capacities per fanout: tiny, around one block, around level boundaries,
 * and a few thousand leaves. */
static size_t capacities(uint32_t K, uint32_t out[16]) {
  size_t n = 0;
  out[n++] = 1;
  out[n++] = K - 1 ? K - 1 : 1;
  out[n++] = K;
  out[n++] = K + 1;
  out[n++] = K * K;
  out[n++] = K * K + 3;
  out[n++] = 1000;
  out[n++] = 4099;
  if ((uint64_t)K * K * K <= 70000) out[n++] = K * K * K - 1;
  return n;
}

static void fill_random(rd_sumtree_t *t, uint64_t *seed) {
  uint64_t *v = malloc(t->capacity * sizeof *v);
  assert_non_null(v);
  for (uint32_t i = 0; i < t->capacity; i++) v[i] = rdt_wide_u64(seed, t->max_leaf);
  rd_error_t err;
  assert_int_equal(rd_sumtree_set_range(t, 0, t->capacity, v, &err), RD_OK);
  free(v);
}

/* src as the GPU holds it: the same shape and bytes above the leaves, the
 * leaf level as segment prefix sums (rd_st_leaves_to_prefix). The step
 * functions run on this copy; no rd_sumtree_* call may (its leaves are not
 * the CPU tree's). Converting back (rd_st_leaves_from_prefix, what
 * rd_gpu_sumtree_copy_to_host does) must give src's leaves again. */
static void gpu_form(rd_sumtree_t *dst, const rd_sumtree_t *src) {
  rd_error_t err;
  assert_int_equal(rd_sumtree_init(dst, src->capacity, src->fanout, &err), RD_OK);
  memcpy(dst->mem, src->mem, src->mem_bytes);
  const uint32_t H = src->height;
  const uint64_t n = src->level_blocks[H - 1] * src->fanout;
  rd_st_leaves_to_prefix(src->level[H - 1], dst->level[H - 1], n, src->fanout);
  uint64_t *back = malloc(n * sizeof *back);
  assert_non_null(back);
  memcpy(back, dst->level[H - 1], n * sizeof *back);
  rd_st_leaves_from_prefix(back, n, src->fanout);
  assert_memory_equal(back, src->level[H - 1], n * sizeof *back);
  free(back);
}

/* fn(t, seed) on a tree of every fanout at each of its test capacities,
 * filled at random from one splitmix64 stream that starts at seed (the
 * driver makes and frees the trees). */
static void for_each_tree(uint64_t seed, void (*fn)(rd_sumtree_t *t, uint64_t *seed)) {
  for (size_t f = 0; f < N_FANOUTS; f++) {
    uint32_t K = fanouts[f], caps[16];
    size_t nc = capacities(K, caps);
    for (size_t c = 0; c < nc; c++) {
      rd_sumtree_t t;
      rd_error_t err;
      assert_int_equal(rd_sumtree_init(&t, caps[c], K, &err), RD_OK);
      fill_random(&t, &seed);
      fn(&t, &seed);
      rd_sumtree_free(&t);
    }
  }
}

/* gpu, a tree in the GPU's form, holds the bits of cpu's GPU form. */
static void assert_same_tree(const rd_sumtree_t *gpu, const rd_sumtree_t *cpu) {
  rd_sumtree_t want;
  gpu_form(&want, cpu);
  assert_int_equal(gpu->mem_bytes, want.mem_bytes);
  assert_memory_equal(gpu->mem, want.mem, want.mem_bytes);
  rd_sumtree_free(&want);
  rd_error_t err;
  assert_int_equal(rd_sumtree_check(cpu, &err), RD_OK);
}

/* ------------------------------------------------------------------ */
/* Shape                                                               */
/* ------------------------------------------------------------------ */

static void test_shape(void **state) {
  (void)state;
  assert_int_equal(RD_ST_MAX_CAPACITY, RD_SUMTREE_MAX_CAPACITY);
  assert_int_equal(RD_ST_MAX_FANOUT, RD_SUMTREE_MAX_FANOUT);
  assert_int_equal(RD_ST_MIN_FANOUT, RD_SUMTREE_MIN_FANOUT);
  assert_int_equal(RD_ST_MAX_LEVELS, RD_SUMTREE_MAX_LEVELS);
  uint64_t blocks[RD_ST_MAX_LEVELS];
  for (uint32_t K = 0; K <= 130; K++) {
    int valid = K >= 2 && K <= 64 && (K & (K - 1)) == 0;
    assert_int_equal(rd_st_valid_fanout(K), valid);
    assert_int_equal(rd_st_shape(100, K, blocks) != 0, valid);
  }
  assert_int_equal(rd_st_shape(0, 8, blocks), 0);
  assert_int_equal(rd_st_shape(RD_ST_MAX_CAPACITY + 1, 8, blocks), 0);
  const uint32_t caps[] = {1, 2, 3, 7, 8, 9, 63, 64, 65, 4095, 4096, 4097, 100000, 1u << 20,
                           (1u << 24) + 1};
  for (size_t f = 0; f < N_FANOUTS; f++) {
    uint32_t K = fanouts[f];
    assert_int_equal(1u << rd_st_log2(K), K);
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
      rd_sumtree_t t;
      rd_error_t err;
      assert_int_equal(rd_sumtree_init(&t, caps[c], K, &err), RD_OK);
      uint32_t H = rd_st_shape(caps[c], K, blocks);
      assert_int_equal(H, t.height);
      assert_int_equal(rd_st_log2(K), t.log2_fanout);
      assert_true(rd_st_max_leaf(caps[c]) == t.max_leaf);
      for (uint32_t h = 0; h < H; h++) assert_true(blocks[h] == t.level_blocks[h]);
      /* Index arithmetic against the definitions in sumtree.c. */
      uint64_t p = caps[c] - 1;
      for (uint32_t h = 0; h < H; h++) {
        uint64_t e = rd_st_entry(p, t.log2_fanout, H, h);
        assert_true(e == p >> (t.log2_fanout * (H - 1 - h)));
        assert_true(rd_st_block(p, t.log2_fanout, H, h) == e / K);
        assert_true(rd_st_slot(e, K) == e % K);
        assert_true(e < t.level_blocks[h] * K);
        if (h + 1 < H)
          assert_true(rd_st_child(e, t.log2_fanout, rd_st_slot(rd_st_entry(p, t.log2_fanout, H, h + 1), K)) ==
                      rd_st_entry(p, t.log2_fanout, H, h + 1));
      }
      rd_sumtree_free(&t);
    }
  }
}

/* ------------------------------------------------------------------ */
/* Sample                                                              */
/* ------------------------------------------------------------------ */

/* The descent a GPU thread group performs, built from the step functions,
 * on t in the GPU's form. */
static uint32_t descend(const rd_sumtree_t *t, uint64_t target) {
  uint64_t e = 0;
  for (uint32_t h = 0; h < t->height; h++) {
    const uint64_t *blk = t->level[h] + (e << t->log2_fanout);
    uint32_t j = rd_st_descend(blk, t->fanout, &target);
    e = rd_st_child(e, t->log2_fanout, j);
  }
  return (uint32_t)e;
}

static void check_targets(const rd_sumtree_t *t, size_t n, const uint64_t *targets) {
  uint32_t *leaves = malloc(n * sizeof *leaves);
  assert_non_null(leaves);
  rd_error_t err;
  assert_int_equal(rd_sumtree_sample(t, n, targets, leaves, &err), RD_OK);
  rd_sumtree_t g;
  gpu_form(&g, t);
  for (size_t i = 0; i < n; i++) {
    uint32_t mine = descend(&g, targets[i]);
    if (mine != leaves[i])
      fail_msg("K=%u cap=%u target %llu: step descent %u, rd_sumtree_sample %u", t->fanout,
               t->capacity, (unsigned long long)targets[i], mine, leaves[i]);
    assert_true(rd_sumtree_get(t, mine) > 0); /* zero leaves are never sampled */
  }
  rd_sumtree_free(&g);
  free(leaves);
}

static void sample_case(rd_sumtree_t *t, uint64_t *seed) {
  rd_error_t err;
  if (rd_sumtree_total(t) == 0) { /* a 1-leaf tree that drew 0 */
    uint64_t one = 1;
    assert_int_equal(rd_sumtree_set_range(t, 0, 1, &one, &err), RD_OK);
  }
  uint64_t total = rd_sumtree_total(t);
  /* Edges: 0, total-1, and both sides of every leaf boundary (the
   * targets where a prefix sum equals the target, the <= in the rule). */
  size_t cap = 4 * (size_t)t->capacity + 4000;
  uint64_t *tg = malloc(cap * sizeof *tg);
  assert_non_null(tg);
  size_t n = 0;
  tg[n++] = 0;
  tg[n++] = total - 1;
  uint64_t run = 0;
  for (uint32_t i = 0; i < t->capacity; i++) {
    run += rd_sumtree_get(t, i);
    if (run > 0 && run - 1 < total) tg[n++] = run - 1;
    if (run < total) tg[n++] = run;
  }
  for (int r = 0; r < 4000; r++) {
    uint64_t u = rd_splitmix64(seed);
    tg[n++] = r & 1 ? u % total : (uint64_t)(((unsigned __int128)u * total) >> 64);
  }
  check_targets(t, n, tg);
  free(tg);
}

static void test_sample_matches_cpu(void **state) {
  (void)state;
  for_each_tree(0x5A3D1E, sample_case);
}

/* ------------------------------------------------------------------ */
/* Update                                                              */
/* ------------------------------------------------------------------ */

/* One item at a time, leaf to root, with the step functions: what the CPU
 * does, as a check of rd_st_leaf_value / rd_st_suffix_add / index maths. */
static void update_sequential(rd_sumtree_t *t, size_t n, const uint32_t *pos,
                              const uint64_t *val) {
  const uint32_t K = t->fanout, LK = t->log2_fanout, H = t->height;
  for (size_t i = 0; i < n; i++) {
    uint64_t d = val[i] - rd_st_leaf_value(t->level[H - 1], pos[i], K);
    for (uint32_t h = H; h-- > 0;) {
      uint64_t e = rd_st_entry(pos[i], LK, H, h);
      rd_st_suffix_add(t->level[h] + (rd_st_block(pos[i], LK, H, h) << LK), K,
                       rd_st_slot(e, K), d);
    }
  }
}

typedef struct {
  uint32_t pos, idx;
} pair_t;

static int cmp_pair(const void *a, const void *b) {
  const pair_t *x = a, *y = b;
  if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The GPU's batched update, replayed on the host: sort (position, index)
 * stably, last write wins, deltas from the old leaves, inclusive prefix sum,
 * then every owner adds rd_st_slot_add to each slot of its block, at every
 * level, in an arbitrary order (here: levels top-down, owners backwards, to
 * show that no order is needed). pos == NULL: the contiguous leaves
 * [first, first + n) of an insert, values in batch order. */
static void update_batched(rd_sumtree_t *t, size_t n, const uint32_t *pos, uint64_t first,
                           const uint64_t *val) {
  if (n == 0) return;
  const uint32_t K = t->fanout, LK = t->log2_fanout, H = t->height;
  uint32_t *sorted = NULL;
  uint64_t *v = malloc(n * sizeof *v), *S = malloc(n * sizeof *S);
  assert_non_null(v);
  assert_non_null(S);
  if (pos) {
    pair_t *p = malloc(n * sizeof *p);
    sorted = malloc(n * sizeof *sorted);
    assert_non_null(p);
    assert_non_null(sorted);
    for (size_t i = 0; i < n; i++) p[i] = (pair_t){pos[i], (uint32_t)i};
    qsort(p, n, sizeof *p, cmp_pair);
    for (size_t k = 0; k < n; k++) {
      sorted[k] = p[k].pos;
      v[k] = val[p[k].idx];
    }
    free(p);
  } else {
    memcpy(v, val, n * sizeof *v);
  }
  /* Deltas (the kernel reads the old leaves before any level changes). */
  const uint64_t *leaf = t->level[H - 1];
  for (size_t k = 0; k < n; k++) {
    int last = k + 1 == n || rd_st_item_leaf(sorted, first, k + 1) != rd_st_item_leaf(sorted, first, k);
    uint64_t p = rd_st_item_leaf(sorted, first, k);
    S[k] = last ? v[k] - rd_st_leaf_value(leaf, p, K) : 0;
  }
  for (size_t k = 1; k < n; k++) S[k] += S[k - 1];
  size_t owners = 0;
  for (uint32_t h = 0; h < H; h++)
    for (size_t k = n; k-- > 0;) {
      if (!rd_st_is_owner(sorted, first, k, LK, H, h)) continue;
      owners++;
      uint64_t B = rd_st_block(rd_st_item_leaf(sorted, first, k), LK, H, h);
      uint64_t *blk = t->level[h] + (B << LK);
      for (uint32_t i = 0; i < K; i++) blk[i] += rd_st_slot_add(sorted, first, S, n, k, B, i, LK, H, h);
    }
  assert_true(owners >= H); /* at least one block per level, the root once */
  free(sorted);
  free(v);
  free(S);
}

static void update_case(rd_sumtree_t *ref, uint64_t *seed) {
  rd_error_t err;
  rd_sumtree_t seq, bat;
  gpu_form(&seq, ref);
  gpu_form(&bat, ref);
  const size_t sizes[] = {1, 2, 7, 32, 100, 513, 3000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    uint32_t *pos = malloc(n * sizeof *pos);
    uint64_t *val = malloc(n * sizeof *val);
    assert_non_null(pos);
    assert_non_null(val);
    /* Alternate: spread over the tree, crowded into a few leaves (many
     * duplicates, shared blocks), and a run of the last leaves. */
    uint32_t span = s % 3 == 1 ? (ref->capacity < 5 ? ref->capacity : 5) : ref->capacity;
    for (size_t i = 0; i < n; i++) {
      pos[i] = s % 3 == 2 ? ref->capacity - 1 - (uint32_t)(i % ref->capacity)
                          : (uint32_t)(rd_splitmix64(seed) % span);
      val[i] = rdt_wide_u64(seed, ref->max_leaf);
    }
    assert_int_equal(rd_sumtree_update(ref, n, pos, val, &err), RD_OK);
    update_sequential(&seq, n, pos, val);
    update_batched(&bat, n, pos, 0, val);
    assert_same_tree(&seq, ref);
    assert_same_tree(&bat, ref);
    free(pos);
    free(val);
  }
  rd_sumtree_free(&seq);
  rd_sumtree_free(&bat);
}

static void test_update_matches_cpu(void **state) {
  (void)state;
  for_each_tree(0xC0FFEE, update_case);
}

/* Insert = the batched update over contiguous leaves, no sort. */
static void set_range_case(rd_sumtree_t *ref, uint64_t *seed) {
  rd_error_t err;
  rd_sumtree_t bat;
  gpu_form(&bat, ref);
  uint64_t *val = malloc(ref->capacity * sizeof *val);
  assert_non_null(val);
  for (int r = 0; r < 12; r++) {
    uint32_t first = (uint32_t)(rd_splitmix64(seed) % ref->capacity);
    uint32_t n = r == 0 ? ref->capacity - first : 1 + (uint32_t)(rd_splitmix64(seed) % (ref->capacity - first));
    if (r == 1) { /* the whole tree */
      first = 0;
      n = ref->capacity;
    }
    for (uint32_t i = 0; i < n; i++) val[i] = rdt_wide_u64(seed, ref->max_leaf);
    assert_int_equal(rd_sumtree_set_range(ref, first, n, val, &err), RD_OK);
    update_batched(&bat, n, NULL, first, val);
    assert_same_tree(&bat, ref);
  }
  free(val);
  rd_sumtree_free(&bat);
}

static void test_set_range_matches_cpu(void **state) {
  (void)state;
  for_each_tree(0xBEEF, set_range_case);
}

/* The upper-bound search on its own: gallop + bisect against a scan. */
static void test_upper_bound(void **state) {
  (void)state;
  uint64_t seed = 42;
  uint32_t pos[300];
  for (int r = 0; r < 200; r++) {
    size_t n = 1 + rd_splitmix64(&seed) % 300;
    uint32_t range = 1 + (uint32_t)(rd_splitmix64(&seed) % 1000);
    for (size_t i = 0; i < n; i++) pos[i] = (uint32_t)(rd_splitmix64(&seed) % range);
    for (size_t i = 1; i < n; i++) /* insertion sort */
      for (size_t j = i; j > 0 && pos[j - 1] > pos[j]; j--) {
        uint32_t x = pos[j];
        pos[j] = pos[j - 1];
        pos[j - 1] = x;
      }
    for (int q = 0; q < 50; q++) {
      uint64_t lo = rd_splitmix64(&seed) % (n + 1);
      uint64_t hi = lo + rd_splitmix64(&seed) % (n + 1 - lo);
      uint64_t bound = rd_splitmix64(&seed) % (range + 2);
      uint64_t want = lo;
      while (want < hi && pos[want] < bound) want++;
      assert_true(rd_st_upper_bound(pos, 0, lo, hi, bound, 0) == want);
      assert_true(rd_st_upper_bound(pos, 0, lo, hi, bound, 1) == want);
      /* contiguous: leaves first .. first+hi-1 */
      uint64_t first = rd_splitmix64(&seed) % 50, cw = lo;
      while (cw < hi && first + cw < bound) cw++;
      assert_true(rd_st_upper_bound(NULL, first, lo, hi, bound, q & 1) == cw);
    }
  }
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_shape),
         cmocka_unit_test(test_upper_bound),
         cmocka_unit_test(test_sample_matches_cpu),
         cmocka_unit_test(test_update_matches_cpu),
         cmocka_unit_test(test_set_range_matches_cpu))
