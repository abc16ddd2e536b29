/* test_divide.c - common/rd_divide.h: rd_divide equals the hardware
 * quotient for every divisor class (1, powers of two and their
 * neighbours, 32- and 64-bit extremes) at the numerators where a short
 * reciprocal would first go wrong (multiples of d and one below them, the
 * top of the range); rd_strata_target equals floor((i total + r) / n)
 * computed in 128 bits, over the table's range of n and total. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rd_divide.h"
#include "rd_rng.h"
#include "rdt_main.h"

static void check_div(uint64_t d, uint64_t x) {
  rd_divisor_t v = rd_divisor(d);
  uint64_t got = rd_divide(&v, x), want = x / d;
  if (got != want)
    fail_msg("%llu / %llu: got %llu, want %llu", (unsigned long long)x, (unsigned long long)d,
             (unsigned long long)got, (unsigned long long)want);
}

static void test_divide_edges(void **state) {
  (void)state;
  uint64_t ds[64 * 3 + 8];
  size_t nd = 0;
  for (int b = 0; b < 64; b++) {
    uint64_t p = (uint64_t)1 << b;
    ds[nd++] = p;
    ds[nd++] = p + 1;
    if (p > 1) ds[nd++] = p - 1;
  }
  ds[nd++] = UINT64_MAX;
  ds[nd++] = UINT64_MAX - 1;
  ds[nd++] = 3;
  ds[nd++] = 7;
  ds[nd++] = 1000000007;
  ds[nd++] = 65536 * 3;
  uint64_t s = 42;
  for (size_t k = 0; k < nd; k++) {
    uint64_t d = ds[k];
    const uint64_t xs[] = {0, 1, d - 1, d, d + 1, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - d,
                           (UINT64_MAX / d) * d, (UINT64_MAX / d) * d - 1};
    for (size_t j = 0; j < sizeof xs / sizeof xs[0]; j++) check_div(d, xs[j]);
    for (int j = 0; j < 2000; j++) {
      const uint64_t qmax = UINT64_MAX / d; /* a quotient in range */
      uint64_t q = qmax == UINT64_MAX ? rd_splitmix64(&s) : rd_splitmix64(&s) % (qmax + 1);
      uint64_t m = q * d;
      check_div(d, m);
      if (m > 0) check_div(d, m - 1);
      check_div(d, rd_splitmix64(&s));
    }
  }
}

static void test_divide_random(void **state) {
  (void)state;
  uint64_t s = 7;
  for (int k = 0; k < 200000; k++) {
    uint64_t d = rd_splitmix64(&s) >> (rd_splitmix64(&s) % 64);
    if (d == 0) d = 1;
    check_div(d, rd_splitmix64(&s) >> (rd_splitmix64(&s) % 64));
  }
}

/* The table's targets: n up to RD_TABLE_MAX_BATCH (2^24), total < 2^63. */
static void test_strata(void **state) {
  (void)state;
  uint64_t s = 99;
  const uint64_t ns[] = {1, 2, 3, 32, 255, 256, 512, 1000, 2048, 65535, 65536, 1u << 24};
  const uint64_t totals[] = {1, 2, 255, 256, 1000003, (uint64_t)1 << 40,
                             ((uint64_t)1 << 63) - 1, ((uint64_t)1 << 63) - 25};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof totals / sizeof totals[0]; b++) {
      uint64_t n = ns[a], total = totals[b];
      rd_strata_t st = rd_strata(n, total);
      for (int j = 0; j < 3000; j++) {
        uint64_t i = j < 3 ? (uint64_t)j : j < 6 ? n - 1 - (uint64_t)(j - 3) % n
                                                  : rd_splitmix64(&s) % n;
        if (i >= n) i = n - 1;
        uint64_t r = j % 4 == 0 ? total - 1 : j % 4 == 1 ? 0 : rd_splitmix64(&s) % total;
        uint64_t want = (uint64_t)(((unsigned __int128)i * total + r) / n);
        uint64_t got = rd_strata_target(&st, i, r);
        if (got != want)
          fail_msg("n %llu total %llu i %llu r %llu: got %llu, want %llu",
                   (unsigned long long)n, (unsigned long long)total, (unsigned long long)i,
                   (unsigned long long)r, (unsigned long long)got, (unsigned long long)want);
        assert_true(got < total);
      }
    }
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_divide_edges),
         cmocka_unit_test(test_divide_random),
         cmocka_unit_test(test_strata))
