/* test_sumtree.c - the CUDA sum tree through its C API (cmocka).
 *
 * Built only when meson found CUDA (option 'cuda'). Cases that need a GPU
 * report a cmocka skip when there is none (cudaGetDeviceCount fails on a
 * machine without a driver), so a machine without a GPU never counts them
 * as passed. The thorough device checks are tests/gpu/check_sumtree.cu
 * (run by bench/gpu.sh); these are the same comparisons, smaller.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sumtree.h"
#include "sumtree_gpu.h"
#include "rd_rng.h"
#include "rdt_rand.h"
#include "rdt_main.h"

static const uint32_t fanouts[] = {2, 4, 8, 16, 32, 64};
#define N_FANOUTS (sizeof fanouts / sizeof fanouts[0])

static int have_gpu(void) {
  int count = 0;
  rd_error_t err;
  if (rd_gpu_device_count(&count, &err) != RD_OK) {
    print_message("no usable GPU: %s\n", err.msg);
    return 0;
  }
  return count > 0;
}

/* Arguments are checked before any CUDA call: these pass with or without a GPU. */
static void test_init_rejects_bad_arguments(void **state) {
  (void)state;
  rd_gpu_sumtree_t g;
  rd_error_t err;
  assert_int_equal(rd_gpu_sumtree_init(&g, 100, 3, 0, 64, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "fanout"));
  assert_int_equal(rd_gpu_sumtree_init(&g, 100, 128, 0, 64, &err), RD_EINVAL);
  assert_int_equal(rd_gpu_sumtree_init(&g, 0, 8, 0, 64, &err), RD_EINVAL);
  assert_int_equal(rd_gpu_sumtree_init(&g, (1u << 28) + 1, 8, 0, 64, &err), RD_EINVAL);
  assert_int_equal(rd_gpu_sumtree_init(&g, 100, 8, 0, 0, &err), RD_EINVAL);
  assert_int_equal(rd_gpu_sumtree_memsize(0, 8), 0);
  /* Same number of blocks per level as the CPU tree; levels 256-aligned. */
  for (size_t f = 0; f < N_FANOUTS; f++) {
    rd_sumtree_t c;
    assert_int_equal(rd_sumtree_init(&c, 100000, fanouts[f], &err), RD_OK);
    size_t want = 0;
    for (uint32_t h = 0; h < c.height; h++)
      want += ((size_t)c.level_blocks[h] * fanouts[f] * 8 + 255) & ~(size_t)255;
    assert_int_equal(rd_gpu_sumtree_memsize(100000, fanouts[f]), want);
    rd_sumtree_free(&c);
  }
}

/* Without a GPU every entry point that needs one fails cleanly; with one, a
 * device that does not exist does. Runs (and passes) either way. */
static void test_missing_device_is_a_clean_error(void **state) {
  (void)state;
  rd_gpu_sumtree_t g;
  rd_error_t err;
  int count = -1;
  int rc = rd_gpu_device_count(&count, &err);
  char name[128];
  if (rc != RD_OK) {
    assert_int_equal(rc, RD_EINVAL);
    assert_int_equal(count, 0);
    assert_non_null(strstr(err.msg, "CUDA"));
    assert_int_equal(rd_gpu_sumtree_init(&g, 1000, 32, 0, 64, &err), RD_EINVAL);
    assert_non_null(strstr(err.msg, "no usable CUDA device"));
    assert_null(g.impl);
    assert_int_equal(rd_gpu_device_name(0, name, sizeof name, &err), RD_EINVAL);
  } else {
    assert_true(count > 0);
    assert_int_equal(rd_gpu_sumtree_init(&g, 1000, 32, count, 64, &err), RD_EINVAL);
    assert_int_equal(rd_gpu_sumtree_init(&g, 1000, 32, -1, 64, &err), RD_EINVAL);
    assert_int_equal(rd_gpu_device_name(0, name, sizeof name, &err), RD_OK);
    assert_true(strlen(name) > 0);
  }
}

static void assert_same_levels(const rd_gpu_sumtree_t *g, const rd_sumtree_t *c,
                               rd_sumtree_t *mirror) {
  rd_error_t err;
  assert_int_equal(rd_gpu_sumtree_copy_to_host(g, mirror->level, &err), RD_OK);
  assert_memory_equal(mirror->mem, c->mem, c->mem_bytes);
  uint64_t total = 0;
  assert_int_equal(rd_gpu_sumtree_total(g, &total, &err), RD_OK);
  assert_true(total == rd_sumtree_total(c));
}

static void test_matches_cpu(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  uint64_t seed = 77;
  const uint32_t caps[] = {1, 33, 1000, 70001};
  for (size_t f = 0; f < N_FANOUTS; f++)
    for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
      uint32_t K = fanouts[f], cap = caps[ci];
      rd_sumtree_t c, mirror;
      rd_gpu_sumtree_t g;
      rd_error_t err;
      assert_int_equal(rd_sumtree_init(&c, cap, K, &err), RD_OK);
      assert_int_equal(rd_sumtree_init(&mirror, cap, K, &err), RD_OK);
      assert_int_equal(rd_gpu_sumtree_init(&g, cap, K, 0, 4096, &err), RD_OK);
      uint64_t *v = malloc(cap * sizeof *v);
      assert_non_null(v);
      for (uint32_t i = 0; i < cap; i++) v[i] = rdt_wide_u64(&seed, c.max_leaf);
      v[0] = 1;
      assert_int_equal(rd_sumtree_set_range(&c, 0, cap, v, &err), RD_OK);
      assert_int_equal(rd_gpu_sumtree_set_range(&g, 0, cap, v, &err), RD_OK);
      assert_same_levels(&g, &c, &mirror);
      /* updates with duplicates, larger than max_batch (chunked) */
      const size_t n = 10000;
      uint32_t *pos = malloc(n * sizeof *pos);
      uint64_t *val = malloc(n * sizeof *val);
      uint64_t *tg = malloc(n * sizeof *tg);
      uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
      assert_true(pos && val && tg && a && b);
      for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < n; i++) {
          pos[i] = (uint32_t)(rd_splitmix64(&seed) % (round == 1 ? (cap < 9 ? cap : 9) : cap));
          val[i] = rdt_wide_u64(&seed, c.max_leaf);
        }
        assert_int_equal(rd_sumtree_update(&c, n, pos, val, &err), RD_OK);
        assert_int_equal(rd_gpu_sumtree_update(&g, n, pos, val, &err), RD_OK);
        assert_same_levels(&g, &c, &mirror);
        uint64_t total = rd_sumtree_total(&c);
        if (total == 0) continue;
        for (size_t i = 0; i < n; i++) tg[i] = rd_splitmix64(&seed) % total;
        tg[0] = 0;
        tg[1] = total - 1;
        assert_int_equal(rd_sumtree_sample(&c, n, tg, a, &err), RD_OK);
        assert_int_equal(rd_gpu_sumtree_sample(&g, n, tg, b, &err), RD_OK);
        assert_memory_equal(a, b, n * sizeof *a);
      }
      free(pos);
      free(val);
      free(tg);
      free(a);
      free(b);
      free(v);
      rd_gpu_sumtree_free(&g);
      rd_sumtree_free(&c);
      rd_sumtree_free(&mirror);
    }
}

static void test_errors_change_nothing(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  rd_sumtree_t c, mirror;
  rd_gpu_sumtree_t g;
  rd_error_t err;
  assert_int_equal(rd_sumtree_init(&c, 500, 16, &err), RD_OK);
  assert_int_equal(rd_sumtree_init(&mirror, 500, 16, &err), RD_OK);
  assert_int_equal(rd_gpu_sumtree_init(&g, 500, 16, 0, 128, &err), RD_OK);
  uint64_t t0 = 0;
  uint32_t leaf;
  assert_int_equal(rd_gpu_sumtree_sample(&g, 1, &t0, &leaf, &err), RD_EEMPTY);
  uint32_t pos[2] = {3, 500};
  uint64_t val[2] = {10, 10};
  assert_int_equal(rd_gpu_sumtree_update(&g, 2, pos, val, &err), RD_ERANGE);
  pos[1] = 4;
  val[1] = c.max_leaf + 1;
  assert_int_equal(rd_gpu_sumtree_update(&g, 2, pos, val, &err), RD_ERANGE);
  assert_int_equal(rd_gpu_sumtree_set_range(&g, 499, 2, val, &err), RD_ERANGE);
  assert_same_levels(&g, &c, &mirror);
  val[1] = 7;
  assert_int_equal(rd_sumtree_update(&c, 2, pos, val, &err), RD_OK);
  assert_int_equal(rd_gpu_sumtree_update(&g, 2, pos, val, &err), RD_OK);
  assert_same_levels(&g, &c, &mirror);
  uint64_t tg = rd_sumtree_total(&c);
  assert_int_equal(rd_gpu_sumtree_sample(&g, 1, &tg, &leaf, &err), RD_ERANGE);
  rd_gpu_sumtree_free(&g);
  rd_sumtree_free(&c);
  rd_sumtree_free(&mirror);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_init_rejects_bad_arguments),
         cmocka_unit_test(test_missing_device_is_a_clean_error),
         cmocka_unit_test(test_matches_cpu),
         cmocka_unit_test(test_errors_change_nothing))
