/* test_vpow.c - backends/cpu/vpow.h: rd_vpow within 2 ulp of libm's pow
 * over the table's ranges (the transform's alpha in (0, 1], the IS
 * weights' -beta in [-1, 0)) and beyond; libm's own result wherever the
 * fast path does not apply; the same bits from every variant this CPU runs;
 * out may be the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vpow.h"
#include "rdt_main.h"

#define N 20000

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double unit(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

/* The distance in ulps between two finite doubles of one sign. */
static uint64_t ulps(double a, double b) {
  int64_t ia, ib;
  memcpy(&ia, &a, 8);
  memcpy(&ib, &b, 8);
  return ia > ib ? (uint64_t)(ia - ib) : (uint64_t)(ib - ia);
}

static void fill(double *x) {
  for (size_t i = 0; i < N; i++) {
    if (i % 5 == 0)
      x[i] = 1 + (unit() - 0.5) * 1e-6; /* near 1: ln x tiny */
    else
      x[i] = exp((unit() * 2 - 1) * 100); /* log-uniform in [e^-100, e^100] */
  }
}

static void test_accuracy(void **state) {
  (void)state;
  static double x[N], got[N];
  const double ys[] = {0.6, 0.4, 0.7, 1e-3, 0.999, -0.4, -1.0, -0.1, -0.999, 2.5, -2.7, 3.0};
  uint64_t worst = 0;
  for (size_t k = 0; k < sizeof ys / sizeof ys[0] + 20; k++) {
    double y = k < sizeof ys / sizeof ys[0] ? ys[k] : (unit() * 2 - 1) * 3;
    fill(x);
    rd_vpow(N, x, y, got);
    for (size_t i = 0; i < N; i++) {
      double want = pow(x[i], y);
      uint64_t d = ulps(got[i], want);
      if (d > worst) worst = d;
      if (d > 2) fail_msg("%a ^ %a: %a, pow %a (%llu ulp)", x[i], y, got[i], want,
                          (unsigned long long)d);
    }
  }
  print_message("worst %llu ulp, variant %s\n", (unsigned long long)worst, rd_vpow_isa());
}

/* Outside the fast path: libm's result, bit for bit (NaN as NaN). */
static void test_special_cases(void **state) {
  (void)state;
  const double xs[] = {0.0, -0.0, -1.0, -2.5, INFINITY, -INFINITY, NAN, 0x1p-1070, DBL_MIN / 4,
                       DBL_MIN, DBL_MAX, 1e300, 1e-300, 1.0, 2.0};
  const double ys[] = {0.6, -0.4, 0.0, 1.0, -1.0, 2.5, 1.1, -1.1, INFINITY, -INFINITY, NAN};
  const size_t nx = sizeof xs / sizeof xs[0];
  for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++) {
    double got[sizeof xs / sizeof xs[0]];
    rd_vpow(nx, xs, ys[j], got);
    for (size_t i = 0; i < nx; i++) {
      double want = pow(xs[i], ys[j]);
      if (isnan(want)) {
        if (!isnan(got[i])) fail_msg("%a ^ %a: %a, pow NaN", xs[i], ys[j], got[i]);
      } else if (isinf(want) || want == 0 || !isnormal(want)) {
        if (memcmp(&got[i], &want, 8) != 0)
          fail_msg("%a ^ %a: %a, pow %a", xs[i], ys[j], got[i], want);
      } else if (ulps(got[i], want) > 2) {
        fail_msg("%a ^ %a: %a, pow %a", xs[i], ys[j], got[i], want);
      }
    }
  }
  assert_true(rd_vpow1(1.0, 0.6) == 1.0);
  assert_true(rd_vpow1(7.5, 0.0) == 1.0);
}

/* Every variant the CPU runs gives the same bits (the vector ones take a
 * product's error term from a fused multiply-add, the generic one from
 * Dekker's splitting), over the table's exponents and ones whose products
 * with ln x reach the subnormals; in place works. */
static void test_variants_agree(void **state) {
  (void)state;
  static double x[N], ref[N], got[N];
  fill(x);
  for (size_t i = 0; i < N; i += 7) x[i] = exp((unit() * 2 - 1) * 700); /* most of the range */
  const double ys[] = {-0.4, 0.6, 1e-3, 0.999, -1.0, 2.5, 1e-300, -3e-308, 0x1p-1000, 5e-324};
  const char *isas[] = {"avx2", "avx512"};
  for (size_t q = 0; q < sizeof ys / sizeof ys[0]; q++) {
    assert_int_equal(rd_vpow_variant("generic", N, x, ys[q], ref), 0);
    for (int k = 0; k < 2; k++) {
      memset(got, 0, sizeof got);
      if (rd_vpow_variant(isas[k], N, x, ys[q], got) != 0) {
        if (q == 0) print_message("variant %s: not on this CPU\n", isas[k]);
        continue;
      }
      for (size_t i = 0; i < N; i++)
        if (memcmp(&got[i], &ref[i], sizeof got[i]) != 0)
          fail_msg("%a ^ %a: %s %a, generic %a", x[i], ys[q], isas[k], got[i], ref[i]);
    }
  }
  assert_int_equal(rd_vpow_variant("generic", N, x, -0.4, ref), 0);
  assert_int_equal(rd_vpow_variant("sse9", N, x, -0.4, got), -1);
  rd_vpow(N, x, -0.4, got);
  assert_memory_equal(got, ref, sizeof ref);
  memcpy(got, x, sizeof x);
  rd_vpow(N, got, -0.4, got); /* out == x */
  assert_memory_equal(got, ref, sizeof ref);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_accuracy),
         cmocka_unit_test(test_special_cases),
         cmocka_unit_test(test_variants_agree))
