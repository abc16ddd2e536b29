/* vpow.c - x^y as exp(y ln x) in double-double arithmetic (vpow.h).
 *
 * ln x: x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = (m - 1) / (m + 1)
 * carried as f_hi + f_lo, ln m = 2 atanh(f) = 2f + f^3 P(f^2) (|f| <=
 * 0.172: eleven odd terms leave 2^-67), ln x = e ln2 + ln m as hi + lo.
 * t = y ln x as hi + lo (exact products: a fused multiply-add's error
 * term, or Dekker's splitting where there is none; no other operation is
 * fused, so every variant computes the same bits). exp(t): t = k ln2
 * + r with |r| <= ln2 / 2, e^r = 1 + r + r^2 Q(r) (Taylor to r^14), times
 * 2^k. Error about 2^-54 relative before the last rounding: within 1 ulp.
 * Both polynomials go by Estrin's scheme, not Horner's: a lane's work is
 * one long chain of dependent operations, and the vectorized loop waits on
 * its latency more than on its arithmetic.
 * Lanes outside the fast path's range are redone with libm's pow.
 */
#include "vpow.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cpu_isa.h"

/* Every variant must round each operation on its own (vpow.h): no
 * contraction into fused multiply-adds, whatever the target allows. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#define NO_CONTRACT
#else
#define NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif
#define VPOW_FN static inline __attribute__((always_inline)) NO_CONTRACT

#define LN2_HI 6.93147180369123816490e-01 /* 0x3fe62e42fee00000: 21 low bits zero */
#define LN2_LO 1.90821492927058770002e-10
#define INV_LN2 1.44269504088896338700e+00
#define SHIFT 6755399441055744.0 /* 1.5 * 2^52: adding it rounds to an integer */
#define SPLIT 134217729.0        /* 2^27 + 1 */
#define T_MAX 708.0              /* |y ln x| beyond this: libm (results near the limits) */
#define BLK 64

VPOW_FN uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}

VPOW_FN double double_of(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}

/* a * b = p + *e exactly: by one fused multiply-add where the variant
 * has them (fma), else by Dekker's splitting. Both give the exact error of
 * the rounded product (for the operands vpow_lane passes: no overflow, no
 * error below the normal range), so the variants still agree bit for bit;
 * the fused form is 2 operations instead of 17. */
VPOW_FN double two_prod(double a, double b, double *e, const int fma) {
  double p = a * b;
  if (fma) {
    *e = __builtin_fma(a, b, -p);
    return p;
  }
  double ca = SPLIT * a, ah = ca - (ca - a), al = a - ah;
  double cb = SPLIT * b, bh = cb - (cb - b), bl = b - bh;
  *e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return p;
}

/* a + b = s + *e exactly (Knuth). */
VPOW_FN double two_sum(double a, double b, double *e) {
  double s = a + b, bb = s - a;
  *e = (a - (s - bb)) + (b - bb);
  return s;
}

/* x^y for one lane; *bad = 1 when the lane is outside the fast path. */
VPOW_FN double vpow_lane(double x, double y, uint64_t *bad, const int fma) {
  const uint64_t ix = bits_of(x);
  /* Positive normal x only (a negative x has the sign bit: above the bound). */
  uint64_t out = ix < 0x0010000000000000ull || ix >= 0x7ff0000000000000ull;
  int64_t e = (int64_t)(ix >> 52) - 1023;
  uint64_t mb = (ix & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  const int64_t big = mb > 0x3ff6a09e667f3bcdull; /* m > sqrt(2): halve it */
  mb -= (uint64_t)big << 52;
  e += big;
  const double m = double_of(mb);
  /* f = (m - 1) / (m + 1) as f_hi + f_lo; m - 1 is exact (Sterbenz). */
  const double a = m - 1.0;
  double b_lo, b_hi = two_sum(m, 1.0, &b_lo);
  const double f_hi = a / b_hi;
  double pe, p = two_prod(f_hi, b_hi, &pe, fma);
  const double f_lo = (((a - p) - pe) - f_hi * b_lo) / b_hi;
  const double s = f_hi * f_hi;
  /* P(s) = sum of 2/(2i+3) s^i, i = 0..10, by Estrin's scheme: pairs, then
   * pairs of pairs, so the chain is four multiply-adds deep, not eleven. */
  const double s2 = s * s, s4 = s2 * s2, s8 = s4 * s4;
  const double p0 = (2.0 / 3 + s * (2.0 / 5)) + s2 * (2.0 / 7 + s * (2.0 / 9));
  const double p1 = (2.0 / 11 + s * (2.0 / 13)) + s2 * (2.0 / 15 + s * (2.0 / 17));
  const double p2 = (2.0 / 19 + s * (2.0 / 21)) + s2 * (2.0 / 23);
  const double P = (p0 + s4 * p1) + s8 * p2;
  /* (double)e by the bits of 1.5 * 2^52 + e: no int64 conversion in AVX2. */
  const double ed = double_of(0x4338000000000000ull + (uint64_t)e) - SHIFT;
  double l_err, l_hi = two_sum(ed * LN2_HI, 2.0 * f_hi, &l_err);
  double l_lo = l_err + (ed * LN2_LO + 2.0 * f_lo + f_hi * s * P);
  double t = l_hi + l_lo; /* normalise (|l_hi| >= |l_lo|) */
  l_lo = l_lo - (t - l_hi);
  l_hi = t;
  /* t = y ln x as t_hi + t_lo. */
  double te, tp = two_prod(y, l_hi, &te, fma);
  double t_lo = te + y * l_lo;
  const double t_hi = tp + t_lo;
  t_lo = t_lo - (t_hi - tp);
  out |= !(fabs(t_hi) <= T_MAX);
  /* exp: k = round(t / ln2), r = t - k ln2 (k ln2_hi exact, the
   * difference exact by Sterbenz). */
  const double ks = t_hi * INV_LN2 + SHIFT;
  const int64_t k = (int64_t)(bits_of(ks) - bits_of(SHIFT));
  const double kd = ks - SHIFT;
  const double r = ((t_hi - kd * LN2_HI) - kd * LN2_LO) + t_lo;
  /* Q(r) = sum of r^i / (i+2)!, i = 0..12, by Estrin's scheme as P. */
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double q0 = (0.5 + r * (1.0 / 6.0)) + r2 * (1.0 / 24.0 + r * (1.0 / 120.0));
  const double q1 = (1.0 / 720.0 + r * (1.0 / 5040.0)) + r2 * (1.0 / 40320.0 + r * (1.0 / 362880.0));
  const double q2 = (1.0 / 3628800.0 + r * (1.0 / 39916800.0)) +
                    r2 * (1.0 / 479001600.0 + r * (1.0 / 6227020800.0));
  const double Q = (q0 + r4 * q1) + r8 * (q2 + r4 * (1.0 / 87178291200.0));
  double s1e, s1 = two_sum(1.0, r, &s1e);
  const double er = s1 + (s1e + r * r * Q);
  /* 2^k; a lane out of range computes garbage here, replaced below. */
  const uint64_t sc = (uint64_t)((k + 1023) & 0x7ff) << 52;
  *bad = out;
  return er * double_of(sc);
}

/* One block of at most BLK items; lanes outside the fast path from libm. */
VPOW_FN void vpow_block(size_t n, const double *x, double y, double *out, const int fma) {
  double xb[BLK];
  uint64_t bad[BLK]; /* as wide as a double: one vector width for the loop */
  memcpy(xb, x, n * sizeof *xb); /* out may be x */
  uint64_t any = 0;
#pragma omp simd reduction(| : any)
  for (size_t i = 0; i < n; i++) {
    out[i] = vpow_lane(xb[i], y, &bad[i], fma);
    any |= bad[i];
  }
  if (any)
    for (size_t i = 0; i < n; i++)
      if (bad[i]) out[i] = pow(xb[i], y);
}

#define VPOW_VARIANT(name, attr, fma)                                                \
  attr NO_CONTRACT static void name(size_t n, const double *x, double y, double *out) { \
    for (size_t i = 0; i < n; i += BLK)                                                 \
      vpow_block(n - i < BLK ? n - i : BLK, x + i, y, out + i, fma);                    \
  }

VPOW_VARIANT(vpow_generic, , 0)
#if defined(__x86_64__)
VPOW_VARIANT(vpow_avx2, __attribute__((target("avx2,fma"))), 1)
VPOW_VARIANT(vpow_avx512, __attribute__((target("avx512f,avx512dq,avx512vl,fma"))), 1)
#endif

typedef void (*vpow_fn)(size_t, const double *, double, double *);
#if defined(__x86_64__)
static const vpow_fn fns[] = {vpow_generic, vpow_avx2, vpow_avx512};
#else
static const vpow_fn fns[] = {vpow_generic};
#endif
#define N_FNS (sizeof fns / sizeof fns[0])
static size_t chosen;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick(void) { chosen = rd_cpu_isa_pick(N_FNS, true, false, "RD_VPOW_ISA"); }

/* fn over the items; a non-finite exponent is libm's for every item. */
static void run(vpow_fn fn, size_t n, const double *x, double y, double *out) {
  if (isfinite(y)) {
    fn(n, x, y, out);
    return;
  }
  for (size_t i = 0; i < n; i++) out[i] = pow(x[i], y);
}

int rd_vpow_variant(const char *isa, size_t n, const double *x, double y, double *out) {
  const int i = rd_cpu_isa_find(N_FNS, isa, true, false);
  if (i < 0) return -1;
  run(fns[i], n, x, y, out);
  return 0;
}

void rd_vpow(size_t n, const double *x, double y, double *out) {
  pthread_once(&pick_once, pick);
  run(fns[chosen], n, x, y, out);
}

double rd_vpow1(double x, double y) {
  double r;
  rd_vpow(1, &x, y, &r);
  return r;
}

const char *rd_vpow_isa(void) {
  pthread_once(&pick_once, pick);
  return rd_cpu_isa_name(chosen);
}
