/* test_philox.c - Philox4x32-10 known answers (Random123's kat_vectors) and
 * the stream helpers every backend must reproduce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_kat_zeros),       cmocka_unit_test(test_kat_ones),
         cmocka_unit_test(test_kat_pi),          cmocka_unit_test(test_stream_contract),
         cmocka_unit_test(test_scale))
