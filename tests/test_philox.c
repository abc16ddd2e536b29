/* test_philox.c - Philox4x32-10 known answers (Random123's kat_vectors) and
 * the stream helpers every backend must reproduce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "philox_fill.h"
#include "rd_philox.h"
#include "rdt_main.h"

static void check_kat(const uint32_t ctr[4], uint32_t k0, uint32_t k1, const uint32_t want[4]) {
  rd_philox_ctr_t c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
  rd_philox_ctr_t o = rd_philox4x32_10(c, k0, k1);
  for (int i = 0; i < 4; i++) assert_int_equal(o.v[i], want[i]);
}

static void test_kat_zeros(void **state) {
  (void)state;
  const uint32_t ctr[4] = {0, 0, 0, 0}, want[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  check_kat(ctr, 0, 0, want);
}

static void test_kat_ones(void **state) {
  (void)state;
  const uint32_t ctr[4] = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
  const uint32_t want[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
  check_kat(ctr, 0xffffffff, 0xffffffff, want);
}

static void test_kat_pi(void **state) {
  (void)state;
  const uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
  const uint32_t want[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
  check_kat(ctr, 0xa4093822, 0x299f31d0, want);
}

/* Draw d of seed s is Philox of counter {lo(d), hi(d), 0, 0}, key {lo(s), hi(s)}. */
static void test_stream_contract(void **state) {
  (void)state;
  uint64_t seed = 0x299f31d0a4093822ull;
  uint64_t d = 0x85a308d3243f6a88ull;
  rd_philox_ctr_t c = {{0x243f6a88, 0x85a308d3, 0, 0}};
  rd_philox_ctr_t o = rd_philox4x32_10(c, 0xa4093822, 0x299f31d0);
  assert_int_equal(rd_philox_u64(seed, d), ((uint64_t)o.v[1] << 32) | o.v[0]);
  assert_int_not_equal(rd_philox_u64(seed, d), rd_philox_u64(seed, d + 1));
  assert_int_not_equal(rd_philox_u64(seed, d), rd_philox_u64(seed + 1, d));
}

static void test_scale(void **state) {
  (void)state;
  assert_int_equal(rd_scale_u64(0, 1000), 0);
  assert_int_equal(rd_scale_u64(UINT64_MAX, 1000), 999);
  assert_int_equal(rd_scale_u64(UINT64_C(1) << 63, 1000), 500);
  assert_int_equal(rd_scale_u64(UINT64_MAX, 1), 0);
  /* Uniform bits map uniformly: 10^5 draws into 10 bins, each within 5%. */
  uint32_t bins[10] = {0};
  for (uint64_t d = 0; d < 100000; d++) bins[rd_scale_u64(rd_philox_u64(7, d), 10)]++;
  for (int b = 0; b < 10; b++) {
    assert_true(bins[b] > 9500);
    assert_true(bins[b] < 10500);
  }
}

/* rd_philox_fill, every variant this CPU runs, against rd_philox_u64: at
 * counters whose high word carries within a vector and at the 2^64 wrap,
 * for lengths around the vector widths; nothing written past n. */
static void test_fill_variants(void **state) {
  (void)state;
  const uint64_t seeds[] = {0, 0x299f31d0a4093822ull, UINT64_MAX};
  const uint64_t starts[] = {0, 5, (UINT64_C(1) << 32) - 7, UINT64_MAX - 20, 0x85a308d3243f6a88ull};
  const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 256, 1000};
  const char *isas[] = {"generic", "avx2", "avx512"};
  static uint64_t got[1001], want[1000];
  int ran[3] = {0};
  for (size_t a = 0; a < sizeof seeds / sizeof seeds[0]; a++)
    for (size_t b = 0; b < sizeof starts / sizeof starts[0]; b++)
      for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
        const size_t n = lens[c];
        for (size_t i = 0; i < n; i++) want[i] = rd_philox_u64(seeds[a], starts[b] + i);
        for (int k = 0; k < 3; k++) {
          memset(got, 0xa5, sizeof got);
          if (rd_philox_fill_variant(isas[k], seeds[a], starts[b], n, got) != 0) continue;
          ran[k] = 1;
          for (size_t i = 0; i < n; i++)
            if (got[i] != want[i])
              fail_msg("%s: seed %llx, draw %llu + %zu of %zu: %llx, want %llx", isas[k],
                       (unsigned long long)seeds[a], (unsigned long long)starts[b], i, n,
                       (unsigned long long)got[i], (unsigned long long)want[i]);
          assert_true(got[n] == 0xa5a5a5a5a5a5a5a5ull);
        }
        rd_philox_fill(seeds[a], starts[b], n, got);
        assert_memory_equal(got, want, n * sizeof want[0]);
      }
  assert_true(ran[0]);
  for (int k = 1; k < 3; k++)
    if (!ran[k]) print_message("variant %s: not on this CPU\n", isas[k]);
  assert_int_equal(rd_philox_fill_variant("sse9", 1, 0, 4, got), -1);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_fill_variants),
         cmocka_unit_test(test_kat_zeros),       cmocka_unit_test(test_kat_ones),
         cmocka_unit_test(test_kat_pi),          cmocka_unit_test(test_stream_contract),
         cmocka_unit_test(test_scale))
