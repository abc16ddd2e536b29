/* rd_tanh.h - the tanh activation of every learner backend, one definition
 * for the CPU (backends/cpu/nn.c), the GPU (backends/gpu/rd_gpu_elem.h, host
 * and device) and whoever must match them bit for bit.
 *
 * Why not tanhf: glibc's is a scalar call that no `omp simd` loop can
 * vectorise (docs/benchmarks.md has its cost in a DDPG step), and CUDA's
 * differs from glibc's in the last bits. This
 * one is branch-free, so `omp simd` loops keep it in vector registers, and
 * on the device every operation is a round-to-nearest intrinsic that nvcc
 * never contracts, so a GPU thread computes the same bits as an x86-64 core
 * without FMA (the CPU backend's element-wise loops, baseline build):
 *   |x| <  0.5: the Taylor series x + c3 x^3 + ... + c17 x^17 (exact
 *               rational coefficients 2^2n (2^2n - 1) B_2n / (2n)!; the
 *               first omitted term is below 1e-8 relative there);
 *   |x| >= 0.5: 1 - 2 / (e^(2|x|) + 1), e^y = 2^k e^r with k = round(y /
 *               ln 2), |r| <= ln(2) / 2, e^r by its Taylor polynomial to r^7
 *               (remainder below 6e-9); |x| is capped at 10, where tanh
 *               rounds to 1 (at 9 it does not yet).
 * Sign by copysign (-0 stays -0), NaN passes through. Measured against
 * double tanh on every 7th float: at most 2.06 ulp, glibc's tanhf 2.16;
 * tests/test_nn.c checks <= 3 ulp on every 97th.
 *
 * C (gnu11) and CUDA C++; header-only.
 */
#ifndef RD_TANH_H
#define RD_TANH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define RD_TANH_FN static inline __host__ __device__
#else
#define RD_TANH_FN static inline
#endif

#if defined(__CUDA_ARCH__)
#define RD_TANH_MUL(a, b) __fmul_rn((a), (b))
#define RD_TANH_ADD(a, b) __fadd_rn((a), (b))
#define RD_TANH_SUB(a, b) __fsub_rn((a), (b))
#define RD_TANH_DIV(a, b) __fdiv_rn((a), (b))
#else
#define RD_TANH_MUL(a, b) ((a) * (b))
#define RD_TANH_ADD(a, b) ((a) + (b))
#define RD_TANH_SUB(a, b) ((a) - (b))
#define RD_TANH_DIV(a, b) ((a) / (b))
#endif

/* Coefficients as exact float literals (so constant folding cannot differ
 * between compilers): 1/n! for e^r, the Taylor coefficients of tanh. */
#define RD_TANH_E2 0x1p-1f            /* 1/2 */
#define RD_TANH_E3 0x1.555556p-3f     /* 1/6 */
#define RD_TANH_E4 0x1.555556p-5f     /* 1/24 */
#define RD_TANH_E5 0x1.111112p-7f     /* 1/120 */
#define RD_TANH_E6 0x1.6c16c2p-10f    /* 1/720 */
#define RD_TANH_E7 0x1.a01a02p-13f    /* 1/5040 */
#define RD_TANH_T3 -0x1.555556p-2f    /* -1/3 */
#define RD_TANH_T5 0x1.111112p-3f     /* 2/15 */
#define RD_TANH_T7 -0x1.ba1ba2p-5f    /* -17/315 */
#define RD_TANH_T9 0x1.664f48p-6f     /* 62/2835 */
#define RD_TANH_T11 -0x1.226e36p-7f   /* -1382/155925 */
#define RD_TANH_T13 0x1.d6d3d0p-9f    /* 21844/6081075 */
#define RD_TANH_T15 -0x1.7da364p-10f  /* -929569/638512875 */
#define RD_TANH_T17 0x1.355824p-11f   /* 6404582/10854718875 */
#define RD_TANH_LOG2E 0x1.715476p+0f  /* 1 / ln 2 */
#define RD_TANH_LN2_HI 0x1.62e400p-1f /* ln 2, high 16 bits: k * it is exact */
#define RD_TANH_LN2_LO 0x1.7f7d1cp-20f /* ln 2 - LN2_HI */

/* c[0] + x (c[1] + x (... + x c[n - 1])), innermost first (Horner). */
RD_TANH_FN float rd_tanh_horner(float x, const float *c, int n) {
  float p = c[n - 1];
  for (int k = n - 2; k >= 0; k--) p = RD_TANH_ADD(c[k], RD_TANH_MUL(x, p));
  return p;
}

RD_TANH_FN float rd_tanh(float x) {
  float a = fabsf(x);
  a = a < 10.0f ? a : 10.0f;
  float y = RD_TANH_MUL(2.0f, a);
  float kf = rintf(RD_TANH_MUL(y, RD_TANH_LOG2E));
  float r = RD_TANH_SUB(RD_TANH_SUB(y, RD_TANH_MUL(kf, RD_TANH_LN2_HI)),
                        RD_TANH_MUL(kf, RD_TANH_LN2_LO));
  const float exp_c[8] = {1.0f,       1.0f,       RD_TANH_E2, RD_TANH_E3,
                          RD_TANH_E4, RD_TANH_E5, RD_TANH_E6, RD_TANH_E7};
  float p = rd_tanh_horner(r, exp_c, 8); /* e^r */
  /* 2^k for k in [0, 29], from its exponent bits */
  int32_t bits = ((int32_t)kf + 127) << 23;
  float two_k;
#if defined(__CUDA_ARCH__)
  two_k = __int_as_float(bits);
#else
  memcpy(&two_k, &bits, sizeof two_k);
#endif
  float big = RD_TANH_SUB(1.0f, RD_TANH_DIV(2.0f, RD_TANH_ADD(RD_TANH_MUL(p, two_k), 1.0f)));
  float s = RD_TANH_MUL(a, a);
  const float tanh_c[8] = {RD_TANH_T3,  RD_TANH_T5,  RD_TANH_T7,  RD_TANH_T9,
                           RD_TANH_T11, RD_TANH_T13, RD_TANH_T15, RD_TANH_T17};
  float q = rd_tanh_horner(s, tanh_c, 8);
  float small = RD_TANH_ADD(a, RD_TANH_MUL(RD_TANH_MUL(a, s), q));
  float t = copysignf(a < 0.5f ? small : big, x);
  return x != x ? x : t;
}

#endif
