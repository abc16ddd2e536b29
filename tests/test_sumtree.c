/* test_sumtree.c - the exact K-ary sum tree against independent references.
 *
 * References: a Fenwick tree (a different exact integer structure, O(log N)
 * search) for long runs, and a plain linear scan over the leaves for small
 * trees and spot checks. Sampling semantics under test: target t selects the
 * smallest leaf i with leaf[0] + ... + leaf[i] > t.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sumtree.h"
#include "rd_rng.h"
#include "rdt_rand.h"
#include "rdt_main.h"

static const uint32_t fanouts[] = {2, 4, 8, 16, 32, 64};
#define N_FANOUTS (sizeof fanouts / sizeof fanouts[0])

typedef struct {
  uint64_t n;
  uint64_t *bit; /* 1-indexed */
  uint64_t *val;
  uint64_t top;  /* highest power of two <= n */
  uint64_t sum;  /* running total, kept independently */
} fenwick_t;

static void fw_init(fenwick_t *f, uint64_t n) {
  f->n = n;
  f->bit = calloc(n + 1, sizeof(uint64_t));
  f->val = calloc(n, sizeof(uint64_t));
  f->top = 1;
  f->sum = 0;
  while (f->top * 2 <= n) f->top *= 2;
}
static void fw_free(fenwick_t *f) {
  free(f->bit);
  free(f->val);
}
static void fw_set(fenwick_t *f, uint64_t i, uint64_t v) {
  uint64_t d = v - f->val[i];
  f->val[i] = v;
  f->sum += d;
  for (uint64_t k = i + 1; k <= f->n; k += k & (~k + 1)) f->bit[k] += d;
}
static uint64_t fw_search(const fenwick_t *f, uint64_t t) {
  uint64_t pos = 0;
  for (uint64_t step = f->top; step > 0; step >>= 1)
    if (pos + step <= f->n && f->bit[pos + step] <= t) {
      pos += step;
      t -= f->bit[pos];
    }
  return pos;
}

/* sum(val[0..i]), inclusive. */
static uint64_t fw_prefix(const fenwick_t *f, uint64_t i) {
  uint64_t s = 0;
  for (uint64_t k = i + 1; k > 0; k -= k & (~k + 1)) s += f->bit[k];
  return s;
}

static uint64_t linear_search(const uint64_t *val, uint64_t n, uint64_t t) {
  uint64_t run = 0;
  for (uint64_t i = 0; i < n; i++) {
    run += val[i];
    if (run > t) return i;
  }
  return n; /* not reached for t < total */
}

static void test_init_errors(void **state) {
  (void)state;
  rd_sumtree_t t;
  rd_error_t err;
  uint32_t bad_k[] = {0, 1, 3, 6, 128, 256};
  for (size_t i = 0; i < sizeof bad_k / sizeof bad_k[0]; i++) {
    assert_int_equal(rd_sumtree_init(&t, 100, bad_k[i], &err), RD_EINVAL);
    assert_true(err.msg[0] != '\0');
    assert_int_equal(rd_sumtree_memsize(100, bad_k[i]), 0);
  }
  assert_int_equal(rd_sumtree_init(&t, 0, 16, &err), RD_EINVAL);
  assert_int_equal(rd_sumtree_init(&t, RD_SUMTREE_MAX_CAPACITY + 1, 16, &err), RD_EINVAL);
  /* The largest shape is described without being allocated. */
  assert_true(rd_sumtree_memsize(RD_SUMTREE_MAX_CAPACITY, 16) >=
              (size_t)RD_SUMTREE_MAX_CAPACITY * 8);
}

static void test_shapes_and_alignment(void **state) {
  (void)state;
  uint32_t caps[] = {1, 2, 3, 63, 64, 65, 1000, 4096, 4097};
  for (size_t k = 0; k < N_FANOUTS; k++)
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
      rd_sumtree_t t;
      assert_int_equal(rd_sumtree_init(&t, caps[c], fanouts[k], NULL), RD_OK);
      /* K^height >= capacity > K^(height-1) */
      uint64_t span = 1;
      for (uint32_t h = 0; h < t.height; h++) span *= fanouts[k];
      assert_true(span >= caps[c]);
      if (t.height > 1) assert_true(span / fanouts[k] < caps[c]);
      for (uint32_t h = 0; h < t.height; h++) {
        assert_int_equal((uintptr_t)t.level[h] % 64, 0);
        assert_int_equal((uintptr_t)(t.level[h] + fanouts[k]) % (fanouts[k] * 8 < 64 ? fanouts[k] * 8 : 64), 0);
      }
      assert_int_equal(rd_sumtree_total(&t), 0);
      rd_sumtree_free(&t);
    }
}

/* The process's mapped bytes (/proc/self/statm, first field). */
static size_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  assert_non_null(f);
  unsigned long pages = 0;
  assert_int_equal(fscanf(f, "%lu", &pages), 1);
  fclose(f);
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* A tree of 2 MiB or more has a mapping of its own on a 2 MiB boundary,
 * and freeing it leaves nothing mapped: 64 trees made and freed, whose
 * sizes are not whole pages, must not grow the process by more than
 * slack (a leaked tail would be up to 2 MiB each). */
static void test_large_tree_mapping(void **state) {
  (void)state;
  const uint32_t capacity = (1u << 18) + 12345;
  assert_true(rd_sumtree_memsize(capacity, 16) % (size_t)sysconf(_SC_PAGESIZE) != 0);
  rd_sumtree_t t;
  assert_int_equal(rd_sumtree_init(&t, capacity, 16, NULL), RD_OK); /* warm the allocator */
  rd_sumtree_free(&t);
  const size_t before = mapped_bytes();
  for (int i = 0; i < 64; i++) {
    assert_int_equal(rd_sumtree_init(&t, capacity, 16, NULL), RD_OK);
    assert_true(t.mem_mapped);
    assert_int_equal((uintptr_t)t.mem % (2u << 20), 0);
    uint64_t v = 7;
    assert_int_equal(rd_sumtree_update(&t, 1, &(uint32_t){capacity - 1}, &v, NULL), RD_OK);
    assert_int_equal(rd_sumtree_total(&t), 7);
    rd_sumtree_free(&t);
  }
  const size_t after = mapped_bytes();
  assert_true(after <= before + (8u << 20));
}

/* Every target of small trees, with zeros between the leaves, against a
 * linear scan: zero leaves must never be chosen. */
static void test_exhaustive_small(void **state) {
  (void)state;
  uint32_t caps[] = {1, 5, 17, 64, 100};
  uint64_t s = 1;
  for (size_t k = 0; k < N_FANOUTS; k++)
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
      rd_sumtree_t t;
      uint32_t cap = caps[c];
      assert_int_equal(rd_sumtree_init(&t, cap, fanouts[k], NULL), RD_OK);
      uint64_t *v = calloc(cap, sizeof *v);
      for (uint32_t i = 0; i < cap; i++) v[i] = (rd_splitmix64(&s) % 3 == 0) ? 0 : rd_splitmix64(&s) % 7;
      v[cap - 1] = 3; /* never an all-zero tree */
      assert_int_equal(rd_sumtree_set_range(&t, 0, cap, v, NULL), RD_OK);
      assert_int_equal(rd_sumtree_check(&t, NULL), RD_OK);
      uint64_t total = rd_sumtree_total(&t);
      for (uint32_t i = 0; i < cap; i++) assert_int_equal(rd_sumtree_get(&t, i), v[i]);
      uint64_t *targets = malloc(total * sizeof *targets);
      uint32_t *leaves = malloc(total * sizeof *leaves);
      for (uint64_t x = 0; x < total; x++) targets[x] = x;
      assert_int_equal(rd_sumtree_sample(&t, total, targets, leaves, NULL), RD_OK);
      for (uint64_t x = 0; x < total; x++) {
        assert_int_equal(leaves[x], linear_search(v, cap, x));
        assert_true(v[leaves[x]] > 0);
      }
      free(targets);
      free(leaves);
      free(v);
      rd_sumtree_free(&t);
    }
}

/* Sample m targets and check every leaf against the Fenwick reference;
 * `what` names the case in a failure. */
static void sample_and_check(const rd_sumtree_t *t, const fenwick_t *f, uint32_t m,
                             const uint64_t *tg, uint32_t *lv, const char *what) {
  assert_int_equal(rd_sumtree_sample(t, m, tg, lv, NULL), RD_OK);
  for (uint32_t i = 0; i < m; i++)
    if (lv[i] != fw_search(f, tg[i]))
      fail_msg("%s m %u item %u: leaf %u, want %llu", what, m, i, lv[i],
               (unsigned long long)fw_search(f, tg[i]));
}

/* Batches as stratified sampling draws them (sorted targets): against
 * the Fenwick reference, for every fanout and kernel ISA, with zero runs
 * (whole blocks empty: a zero child must get no target), targets on the
 * exact prefix sums of leaves (the boundary between two children),
 * repeats, a batch that sorts only in part, and batches of every small
 * size (partial sample groups). */
static void test_stratified_targets(void **state) {
  (void)state;
  const char *isas[] = {"generic", "avx2", "avx512"};
  const uint32_t cap = 70001, n = 2048;
  uint64_t *v = malloc(cap * sizeof *v), *tg = malloc(n * sizeof *tg);
  uint32_t *lv = malloc(n * sizeof *lv);
  for (size_t k = 0; k < N_FANOUTS; k++)
    for (size_t is = 0; is < 3; is++) {
      setenv("RD_SUMTREE_ISA", isas[is], 1);
      rd_sumtree_t t;
      assert_int_equal(rd_sumtree_init(&t, cap, fanouts[k], NULL), RD_OK);
      fenwick_t f;
      fw_init(&f, cap);
      uint64_t s = 5 + k;
      for (uint32_t i = 0; i < cap; i++) { /* long zero runs: whole blocks empty */
        v[i] = (i / 700) % 3 == 1 || rd_splitmix64(&s) % 4 == 0 ? 0 : rdt_wide_u64(&s, t.max_leaf / cap);
        fw_set(&f, i, v[i]);
      }
      assert_int_equal(rd_sumtree_set_range(&t, 0, cap, v, NULL), RD_OK);
      const uint64_t total = rd_sumtree_total(&t);
      for (int round = 0; round < 4; round++) {
        for (uint32_t i = 0; i < n; i++) /* stratified: one target per segment */
          tg[i] = (uint64_t)((unsigned __int128)total * i / n) +
                  rd_splitmix64(&s) % (total / n);
        if (round == 1) /* prefix sums of leaves, exactly */
          for (uint32_t i = 0, leaf = 0; i < n; i++, leaf = (leaf + 31) % cap) {
            uint64_t p = fw_prefix(&f, leaf);
            tg[i] = p < total ? p : total - 1;
          }
        if (round == 1 || round == 2) /* sorted, with repeats */
          for (uint32_t i = 1; i < n; i++) {
            if (round == 2 && i % 3 == 0) tg[i] = tg[i - 1];
            if (tg[i] < tg[i - 1]) { uint64_t x = tg[i]; tg[i] = tg[i - 1]; tg[i - 1] = x; }
          }
        if (round == 1)
          for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = i; j > 0 && tg[j] < tg[j - 1]; j--) {
              uint64_t x = tg[j]; tg[j] = tg[j - 1]; tg[j - 1] = x;
            }
        if (round == 3) tg[n / 2 + 5] = 0; /* one group unsorted: the per-target path */
        char what[64];
        snprintf(what, sizeof what, "K %u %s round %d", fanouts[k], isas[is], round);
        for (uint32_t m = 1; m <= n; m = m < 80 ? m + 1 : m * 2)
          sample_and_check(&t, &f, m, tg, lv, what);
      }
      fw_free(&f);
      rd_sumtree_free(&t);
    }
  unsetenv("RD_SUMTREE_ISA");
  free(v);
  free(tg);
  free(lv);
}

/* Trees whose leaf level is 8 MiB or more sample two groups of descents at
 * a time (sumtree.c's sample_pairs, for K >= 16); smaller ones one group.
 * Both against the Fenwick reference at a capacity past that size, every
 * ISA, batch sizes around the group size and its multiples (a group alone
 * at the start and end, a last group short of a full one), one and two
 * threads. */
static void test_large_tree_samples(void **state) {
  (void)state;
  const char *isas[] = {"generic", "avx2", "avx512"};
  const uint32_t cap = (1u << 20) + 5, n = 1100, ks[] = {8, 16, 32, 64};
  const uint32_t ms[] = {1, 2, 7, 9, 15, 17, 31, 33, 63, 64, 65, 127, 128, 129, 191, 200, 257, 512, 1000, 1100};
  uint64_t *v = malloc(cap * sizeof *v), *tg = malloc(n * sizeof *tg);
  uint32_t *lv = malloc(n * sizeof *lv);
  for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
    fenwick_t f;
    fw_init(&f, cap);
    uint64_t s = 11 + k;
    for (size_t is = 0; is < 3; is++) {
      setenv("RD_SUMTREE_ISA", isas[is], 1);
      rd_sumtree_t t;
      assert_int_equal(rd_sumtree_init(&t, cap, ks[k], NULL), RD_OK);
      if (is == 0)
        for (uint32_t i = 0; i < cap; i++) { /* zero runs: whole blocks empty */
          v[i] = (i / 5000) % 4 == 1 || rd_splitmix64(&s) % 4 == 0
                     ? 0 : rdt_wide_u64(&s, t.max_leaf / cap);
          fw_set(&f, i, v[i]);
        }
      assert_int_equal(rd_sumtree_set_range(&t, 0, cap, v, NULL), RD_OK);
      const uint64_t total = rd_sumtree_total(&t);
      assert_int_equal(total, f.sum);
      for (uint32_t threads = 1; threads <= 2; threads++) {
        rd_sumtree_set_threads(&t, threads);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
          const uint32_t m = ms[mi];
          for (uint32_t i = 0; i < m; i++) /* stratified, as a replay batch draws */
            tg[i] = (uint64_t)((unsigned __int128)total * i / m) + rd_splitmix64(&s) % (total / m);
          if (m > 3) tg[m - 1] = total - 1, tg[m / 2] = 0;
          char what[64];
          snprintf(what, sizeof what, "K %u %s threads %u", ks[k], isas[is], threads);
          sample_and_check(&t, &f, m, tg, lv, what);
        }
      }
      rd_sumtree_free(&t);
    }
    fw_free(&f);
  }
  unsetenv("RD_SUMTREE_ISA");
  free(v);
  free(tg);
  free(lv);
}

/* The exactness requirement: 10^7 random updates (K = 16, the
 * default), 10^6 for every other fanout, each batch followed by samples
 * checked against the Fenwick reference, with full invariant checks and
 * linear-scan spot checks along the way. Values span 0..2^40 so a float
 * tree would misplace targets. */
static void exactness_run(uint32_t fanout, uint64_t n_updates, uint32_t threads) {
  const uint32_t cap = 100003, batch = 2000, n_samples = 64;
  rd_sumtree_t t;
  fenwick_t f;
  uint64_t s = 42 + fanout;
  assert_int_equal(rd_sumtree_init(&t, cap, fanout, NULL), RD_OK);
  rd_sumtree_set_threads(&t, threads);
  fw_init(&f, cap);
  uint64_t maxv = (uint64_t)1 << 40;
  uint32_t *pos = malloc(batch * sizeof *pos);
  uint64_t *val = malloc(batch * sizeof *val);
  uint64_t targets[64];
  uint32_t leaves[64];
  for (uint64_t done = 0, round = 0; done < n_updates; done += batch, round++) {
    for (uint32_t i = 0; i < batch; i++) {
      /* Some duplicate positions inside a batch: the later value wins. */
      pos[i] = (i > 0 && (rd_splitmix64(&s) & 31) == 0) ? pos[i - 1] : (uint32_t)(rd_splitmix64(&s) % cap);
      val[i] = rdt_wide_u64(&s, maxv);
    }
    assert_int_equal(rd_sumtree_update(&t, batch, pos, val, NULL), RD_OK);
    for (uint32_t i = 0; i < batch; i++) fw_set(&f, pos[i], val[i]);
    uint64_t total = rd_sumtree_total(&t);
    assert_int_equal(total, f.sum);
    for (uint32_t i = 0; i < n_samples; i++) targets[i] = rd_splitmix64(&s) % total;
    targets[0] = 0;
    targets[1] = total - 1;
    assert_int_equal(rd_sumtree_sample(&t, n_samples, targets, leaves, NULL), RD_OK);
    for (uint32_t i = 0; i < n_samples; i++) assert_int_equal(leaves[i], fw_search(&f, targets[i]));
    if (round % 500 == 0) {
      uint64_t sum = 0;
      for (uint32_t i = 0; i < cap; i++) sum += f.val[i];
      assert_int_equal(total, sum);
      assert_int_equal(rd_sumtree_check(&t, NULL), RD_OK);
      assert_int_equal(leaves[5], linear_search(f.val, cap, targets[5]));
    }
  }
  assert_int_equal(rd_sumtree_check(&t, NULL), RD_OK);
  for (uint32_t i = 0; i < cap; i++) assert_int_equal(rd_sumtree_get(&t, i), f.val[i]);
  free(pos);
  free(val);
  fw_free(&f);
  rd_sumtree_free(&t);
}

static void test_exactness_1e7_updates_k16(void **state) {
  (void)state;
  exactness_run(16, 10000000, 1);
}

static void test_exactness_other_fanouts(void **state) {
  (void)state;
  for (size_t k = 0; k < N_FANOUTS; k++)
    if (fanouts[k] != 16) exactness_run(fanouts[k], 1000000, 1);
}

static void test_exactness_two_threads(void **state) {
  (void)state;
  exactness_run(8, 1000000, 2);
  exactness_run(64, 1000000, 2);
}

/* Two threads (subtree-partitioned update, parallel insert and sample) must
 * leave the very same bytes as one thread, duplicates included. */
static void test_threads_bitwise_equal(void **state) {
  (void)state;
  const uint32_t cap = 300000, batch = 8192;
  for (size_t k = 0; k < N_FANOUTS; k++) {
    rd_sumtree_t a, b;
    assert_int_equal(rd_sumtree_init(&a, cap, fanouts[k], NULL), RD_OK);
    assert_int_equal(rd_sumtree_init(&b, cap, fanouts[k], NULL), RD_OK);
    rd_sumtree_set_threads(&b, 2);
    uint64_t s = 7;
    uint64_t *v = malloc(40000 * sizeof *v);
    for (uint32_t i = 0; i < 40000; i++) v[i] = rd_splitmix64(&s) % 1000000;
    assert_int_equal(rd_sumtree_set_range(&a, 1000, 40000, v, NULL), RD_OK);
    assert_int_equal(rd_sumtree_set_range(&b, 1000, 40000, v, NULL), RD_OK);
    assert_memory_equal(a.mem, b.mem, a.mem_bytes);
    uint32_t *pos = malloc(batch * sizeof *pos);
    uint64_t *val = malloc(batch * sizeof *val);
    for (int r = 0; r < 10; r++) {
      for (uint32_t i = 0; i < batch; i++) {
        pos[i] = (i && (rd_splitmix64(&s) & 7) == 0) ? pos[i - 1] : (uint32_t)(rd_splitmix64(&s) % cap);
        val[i] = rd_splitmix64(&s) % 1000000;
      }
      assert_int_equal(rd_sumtree_update(&a, batch, pos, val, NULL), RD_OK);
      assert_int_equal(rd_sumtree_update(&b, batch, pos, val, NULL), RD_OK);
      assert_memory_equal(a.mem, b.mem, a.mem_bytes);
    }
    uint64_t total = rd_sumtree_total(&a);
    uint64_t *tg = malloc(batch * sizeof *tg);
    uint32_t *la = malloc(batch * sizeof *la), *lb = malloc(batch * sizeof *lb);
    for (uint32_t i = 0; i < batch; i++) tg[i] = rd_splitmix64(&s) % total;
    assert_int_equal(rd_sumtree_sample(&a, batch, tg, la, NULL), RD_OK);
    assert_int_equal(rd_sumtree_sample(&b, batch, tg, lb, NULL), RD_OK);
    assert_memory_equal(la, lb, batch * sizeof *la);
    assert_int_equal(rd_sumtree_check(&b, NULL), RD_OK);
    free(tg);
    free(la);
    free(lb);
    free(pos);
    free(val);
    free(v);
    rd_sumtree_free(&a);
    rd_sumtree_free(&b);
  }
}

/* Every compiled kernel variant the CPU can run gives the same answers. */
static void test_isa_variants_agree(void **state) {
  (void)state;
  const char *isas[] = {"generic", "avx2", "avx512"};
  const uint32_t cap = 50000, batch = 3000;
  for (size_t k = 0; k < N_FANOUTS; k++) {
    rd_sumtree_t ref;
    unsetenv("RD_SUMTREE_ISA");
    setenv("RD_SUMTREE_ISA", "generic", 1);
    assert_int_equal(rd_sumtree_init(&ref, cap, fanouts[k], NULL), RD_OK);
    assert_string_equal(ref.isa, "generic");
    for (size_t i = 1; i < 3; i++) {
      rd_sumtree_t t;
      setenv("RD_SUMTREE_ISA", isas[i], 1);
      assert_int_equal(rd_sumtree_init(&t, cap, fanouts[k], NULL), RD_OK);
      uint64_t s = 99;
      uint32_t *pos = malloc(batch * sizeof *pos);
      uint64_t *val = malloc(batch * sizeof *val);
      for (uint32_t i2 = 0; i2 < batch; i2++) {
        pos[i2] = (uint32_t)(rd_splitmix64(&s) % cap);
        val[i2] = rdt_wide_u64(&s, t.max_leaf);
      }
      rd_sumtree_t *trees[2] = {&ref, &t};
      uint32_t *out[2];
      for (int w = 0; w < 2; w++) {
        memset(trees[w]->mem, 0, trees[w]->mem_bytes);
        assert_int_equal(rd_sumtree_update(trees[w], batch, pos, val, NULL), RD_OK);
      }
      assert_memory_equal(ref.mem, t.mem, t.mem_bytes);
      uint64_t total = rd_sumtree_total(&t);
      uint64_t *tg = malloc(batch * sizeof *tg);
      for (uint32_t i2 = 0; i2 < batch; i2++) tg[i2] = rd_splitmix64(&s) % total;
      for (int w = 0; w < 2; w++) {
        out[w] = malloc(batch * sizeof(uint32_t));
        assert_int_equal(rd_sumtree_sample(trees[w], batch, tg, out[w], NULL), RD_OK);
      }
      assert_memory_equal(out[0], out[1], batch * sizeof(uint32_t));
      free(out[0]);
      free(out[1]);
      free(tg);
      free(pos);
      free(val);
      rd_sumtree_free(&t);
    }
    rd_sumtree_free(&ref);
  }
  unsetenv("RD_SUMTREE_ISA");
}

/* Insert ranges of every length and offset, including ones longer than the
 * internal chunk, against a value array. */
static void test_set_range(void **state) {
  (void)state;
  const uint32_t cap = 20011;
  uint64_t s = 3;
  for (size_t k = 0; k < N_FANOUTS; k++) {
    rd_sumtree_t t;
    assert_int_equal(rd_sumtree_init(&t, cap, fanouts[k], NULL), RD_OK);
    uint64_t *ref = calloc(cap, sizeof *ref);
    uint64_t *v = malloc(cap * sizeof *v);
    for (int r = 0; r < 200; r++) {
      uint32_t first = (uint32_t)(rd_splitmix64(&s) % cap);
      uint32_t n = (uint32_t)(rd_splitmix64(&s) % (r % 10 == 0 ? cap - first : 70)) + 1;
      if (n > cap - first) n = cap - first;
      for (uint32_t i = 0; i < n; i++) v[i] = ref[first + i] = rdt_wide_u64(&s, t.max_leaf / 2);
      assert_int_equal(rd_sumtree_set_range(&t, first, n, v, NULL), RD_OK);
    }
    assert_int_equal(rd_sumtree_check(&t, NULL), RD_OK);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < cap; i++) {
      assert_int_equal(rd_sumtree_get(&t, i), ref[i]);
      sum += ref[i];
    }
    assert_int_equal(rd_sumtree_total(&t), sum);
    free(ref);
    free(v);
    rd_sumtree_free(&t);
  }
}

/* Every error leaves the tree byte-for-byte unchanged. */
static void test_errors_change_nothing(void **state) {
  (void)state;
  rd_sumtree_t t;
  rd_error_t err;
  const uint32_t cap = 1000;
  assert_int_equal(rd_sumtree_init(&t, cap, 8, NULL), RD_OK);
  uint64_t tg = 0;
  uint32_t leaf = 12345;
  assert_int_equal(rd_sumtree_sample(&t, 1, &tg, &leaf, &err), RD_EEMPTY);
  assert_int_equal(leaf, 12345);

  uint64_t v[4] = {1, 2, 3, 4};
  assert_int_equal(rd_sumtree_set_range(&t, 10, 4, v, NULL), RD_OK);
  void *snap = malloc(t.mem_bytes);
  memcpy(snap, t.mem, t.mem_bytes);

  uint32_t pos[3] = {1, 2, cap};
  uint64_t val[3] = {5, 6, 7};
  assert_int_equal(rd_sumtree_update(&t, 3, pos, val, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "capacity"));
  pos[2] = 3;
  val[2] = t.max_leaf + 1;
  assert_int_equal(rd_sumtree_update(&t, 3, pos, val, &err), RD_ERANGE);
  uint64_t big[2] = {1, t.max_leaf + 1};
  assert_int_equal(rd_sumtree_set_range(&t, 0, 2, big, &err), RD_ERANGE);
  assert_int_equal(rd_sumtree_set_range(&t, cap - 1, 2, v, &err), RD_ERANGE);
  assert_int_equal(rd_sumtree_set_range(&t, cap, 1, v, &err), RD_ERANGE);
  uint64_t tgs[2] = {0, rd_sumtree_total(&t)};
  uint32_t out[2] = {77, 77};
  assert_int_equal(rd_sumtree_sample(&t, 2, tgs, out, &err), RD_ERANGE);
  assert_int_equal(out[0], 77);
  uint32_t gp[2] = {0, cap};
  uint64_t gv[2];
  assert_int_equal(rd_sumtree_get_batch(&t, 2, gp, gv, &err), RD_ERANGE);
  assert_memory_equal(snap, t.mem, t.mem_bytes);

  /* max_leaf itself is accepted at every position without overflow. */
  rd_sumtree_t full;
  assert_int_equal(rd_sumtree_init(&full, 70000, 16, NULL), RD_OK);
  uint64_t *mx = malloc(70000 * sizeof *mx);
  for (uint32_t i = 0; i < 70000; i++) mx[i] = full.max_leaf;
  assert_int_equal(rd_sumtree_set_range(&full, 0, 70000, mx, NULL), RD_OK);
  assert_true(rd_sumtree_total(&full) < (UINT64_C(1) << 63));
  assert_int_equal(rd_sumtree_total(&full), full.max_leaf * 70000);
  assert_int_equal(rd_sumtree_check(&full, NULL), RD_OK);
  uint64_t last = rd_sumtree_total(&full) - 1;
  assert_int_equal(rd_sumtree_sample(&full, 1, &last, &leaf, NULL), RD_OK);
  assert_int_equal(leaf, 69999);
  free(mx);
  rd_sumtree_free(&full);
  free(snap);
  rd_sumtree_free(&t);
}

/* The batch checks scan in vector blocks and then a scalar tail: a bad
 * value or target is found at every index of every batch length around
 * those blocks, including values with bit 63 set, and the message names
 * the first bad index; values at the limit pass. Nothing changes. */
static void test_batch_checks_every_index(void **state) {
  (void)state;
  rd_sumtree_t t;
  rd_error_t err;
  assert_int_equal(rd_sumtree_init(&t, 4096, 16, NULL), RD_OK);
  enum { MAXN = 37 };
  uint64_t v[MAXN], ones[MAXN];
  uint32_t pos[MAXN], leaves[MAXN];
  for (uint32_t i = 0; i < MAXN; i++) {
    pos[i] = i * 100;
    ones[i] = 1;
  }
  assert_int_equal(rd_sumtree_set_range(&t, 0, MAXN, ones, NULL), RD_OK);
  void *snap = malloc(t.mem_bytes);
  memcpy(snap, t.mem, t.mem_bytes);
  const uint64_t total = rd_sumtree_total(&t);
  const uint64_t bad_values[] = {t.max_leaf + 1, (UINT64_C(1) << 63) - 1, UINT64_C(1) << 63,
                                 UINT64_MAX};
  const uint64_t bad_targets[] = {total, total + 1, UINT64_C(1) << 63, UINT64_MAX};
  char want[64];
  for (uint32_t n = 1; n <= MAXN; n++) {
    for (uint32_t i = 0; i < n; i++) v[i] = t.max_leaf;
    for (uint32_t k = 0; k < 4; k++) {
      for (uint32_t b = 0; b < n; b++) {
        for (uint32_t i = 0; i < n; i++) v[i] = i < b ? t.max_leaf : i == b ? bad_values[k] : 0;
        /* A second bad value later: the first one is named. */
        if (b + 1 < n) v[n - 1] = UINT64_MAX;
        snprintf(want, sizeof want, "at batch index %u ", b);
        assert_int_equal(rd_sumtree_update(&t, n, pos, v, &err), RD_ERANGE);
        assert_non_null(strstr(err.msg, want));
        assert_int_equal(rd_sumtree_set_range(&t, 0, n, v, &err), RD_ERANGE);
        assert_non_null(strstr(err.msg, want));
        for (uint32_t i = 0; i < n; i++) v[i] = i < b ? total - 1 : i == b ? bad_targets[k] : 0;
        if (b + 1 < n) v[n - 1] = UINT64_MAX;
        assert_int_equal(rd_sumtree_sample(&t, n, v, leaves, &err), RD_ERANGE);
        assert_non_null(strstr(err.msg, want));
      }
    }
    /* A bad position at every index, with good values and with a bad value
     * anywhere (the one scan of an update covers both arrays): the first
     * bad position is named, positions being checked first. */
    const uint32_t bad_pos[] = {4096, 4097, UINT32_MAX};
    for (uint32_t b = 0; b < n; b++)
      for (uint32_t k = 0; k < 3; k++)
        for (uint32_t w = 0; w <= n; w++) { /* w == n: no bad value */
          uint32_t bp[MAXN];
          memcpy(bp, pos, sizeof bp);
          bp[b] = bad_pos[k];
          if (b + 1 < n) bp[n - 1] = UINT32_MAX;
          for (uint32_t i = 0; i < n; i++) v[i] = i == w ? UINT64_MAX : t.max_leaf;
          snprintf(want, sizeof want, "at batch index %u is >= capacity", b);
          assert_int_equal(rd_sumtree_update(&t, n, bp, v, &err), RD_ERANGE);
          assert_non_null(strstr(err.msg, want));
        }
    /* At the limits everything passes: targets up to total - 1. */
    for (uint32_t i = 0; i < n; i++) v[i] = total - 1 - i % 2;
    assert_int_equal(rd_sumtree_sample(&t, n, v, leaves, NULL), RD_OK);
  }
  assert_memory_equal(snap, t.mem, t.mem_bytes);
  /* And max_leaf at every index of every length is accepted. */
  for (uint32_t n = 1; n <= MAXN; n++) {
    for (uint32_t i = 0; i < n; i++) v[i] = t.max_leaf;
    assert_int_equal(rd_sumtree_update(&t, n, pos, v, NULL), RD_OK);
  }
  assert_int_equal(rd_sumtree_check(&t, NULL), RD_OK);
  free(snap);
  rd_sumtree_free(&t);
}

/* The largest shape, 2^28 leaves, really allocated (2.1 GiB at K = 64):
 * leaves at both ends and a few in the middle, every target class checked
 * against a reference over the non-zero leaves. */
static void test_max_capacity(void **state) {
  (void)state;
  rd_sumtree_t t;
  const uint32_t cap = RD_SUMTREE_MAX_CAPACITY;
  if (rd_sumtree_init(&t, cap, 64, NULL) != RD_OK) {
    skip(); /* not enough memory on this machine: say so rather than pass */
    return;
  }
  enum { NSET = 3000 };
  uint32_t pos[NSET];
  uint64_t val[NSET], s = 5;
  for (uint32_t i = 0; i < NSET; i++) {
    pos[i] = i < 1000 ? i : i < 2000 ? cap - 2000 + i : (uint32_t)(rd_splitmix64(&s) % cap);
    val[i] = 1 + rd_splitmix64(&s) % t.max_leaf;
  }
  assert_int_equal(rd_sumtree_update(&t, NSET, pos, val, NULL), RD_OK);
  /* Reference: the same writes on a sorted sparse list (later wins). */
  uint32_t *rp = malloc(NSET * sizeof *rp);
  uint64_t *rv = malloc(NSET * sizeof *rv);
  uint32_t m = 0;
  for (uint32_t i = 0; i < NSET; i++) {
    uint32_t k = 0;
    while (k < m && rp[k] != pos[i]) k++;
    rp[k] = pos[i];
    rv[k] = val[i];
    if (k == m) m++;
  }
  for (uint32_t a = 0; a < m; a++) /* insertion sort by position */
    for (uint32_t b = a; b > 0 && rp[b - 1] > rp[b]; b--) {
      uint32_t tp = rp[b]; rp[b] = rp[b - 1]; rp[b - 1] = tp;
      uint64_t tv = rv[b]; rv[b] = rv[b - 1]; rv[b - 1] = tv;
    }
  uint64_t total = 0;
  for (uint32_t a = 0; a < m; a++) total += rv[a];
  assert_int_equal(rd_sumtree_total(&t), total);
  assert_true(total < (UINT64_C(1) << 63));
  for (int r = 0; r < 2000; r++) {
    uint64_t tg = r == 0 ? 0 : r == 1 ? total - 1 : rd_splitmix64(&s) % total;
    uint32_t leaf;
    assert_int_equal(rd_sumtree_sample(&t, 1, &tg, &leaf, NULL), RD_OK);
    uint64_t run = 0;
    uint32_t a = 0;
    while (run + rv[a] <= tg) run += rv[a++];
    assert_int_equal(leaf, rp[a]);
  }
  assert_int_equal(rd_sumtree_get(&t, cap - 1), rv[m - 1]);
  free(rp);
  free(rv);
  rd_sumtree_free(&t);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_init_errors),
         cmocka_unit_test(test_shapes_and_alignment),
         cmocka_unit_test(test_large_tree_mapping),
         cmocka_unit_test(test_exhaustive_small),
         cmocka_unit_test(test_stratified_targets),
         cmocka_unit_test(test_large_tree_samples),
         cmocka_unit_test(test_set_range),
         cmocka_unit_test(test_errors_change_nothing),
         cmocka_unit_test(test_batch_checks_every_index),
         cmocka_unit_test(test_threads_bitwise_equal),
         cmocka_unit_test(test_isa_variants_agree),
         cmocka_unit_test(test_exactness_two_threads),
         cmocka_unit_test(test_exactness_other_fanouts),
         cmocka_unit_test(test_exactness_1e7_updates_k16),
         cmocka_unit_test(test_max_capacity))
