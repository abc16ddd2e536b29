/* philox_fill.c - rd_philox_fill (philox_fill.h): the rounds of
 * common/rd_philox.h over 16 (AVX-512) or 8 (AVX2) counters at once.
 *
 * A round multiplies counter words 0 and 2 by constants and needs both
 * halves of each 64-bit product. The vector multiply (vpmuludq) takes the
 * even 32-bit lanes, so the odd lanes go through it shifted down, and the
 * halves are blended back into 32-bit lanes: products of even lanes give
 * their high halves by a shift, those of odd lanes in place. Items past the
 * last whole vector take the scalar function.
 */
#include "philox_fill.h"

#include "cpu_isa.h"
#include "rd_philox.h"

#include <pthread.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static void fill_generic(uint64_t seed, uint64_t d0, size_t n, uint64_t *out) {
  for (size_t i = 0; i < n; i++) out[i] = rd_philox_u64(seed, d0 + i);
}

#if defined(__x86_64__)
/* The counter words of draws d, d+1, ..., d+w-1: each draw's own 64-bit
 * counter split, since the high word may carry inside a vector. */
static inline void counters(uint64_t d, uint32_t w, uint32_t *lo32, uint32_t *hi32) {
  for (uint32_t l = 0; l < w; l++) {
    lo32[l] = (uint32_t)(d + l);
    hi32[l] = (uint32_t)((d + l) >> 32);
  }
}

#define ATTR512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))

/* hi:lo = c * m for each 32-bit lane (m in the low half of each 64-bit lane). */
ATTR512 static inline void mul512(__m512i c, __m512i m, __m512i *hi, __m512i *lo) {
  const __m512i even = _mm512_mul_epu32(c, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

ATTR512 static void fill_avx512(uint64_t seed, uint64_t d0, size_t n, uint64_t *out) {
  const __m512i m0 = _mm512_set1_epi64(RD_PHILOX_M0), m1 = _mm512_set1_epi64(RD_PHILOX_M1);
  /* 64-bit lane j of the outputs: 32-bit lanes j of c0 (low) and c1 (high);
   * unpacklo/hi pair them within 128-bit blocks, these put them in order. */
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint32_t lo32[16], hi32[16];
    counters(d0 + i, 16, lo32, hi32);
    __m512i c0 = _mm512_loadu_si512(lo32), c1 = _mm512_loadu_si512(hi32);
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
      __m512i hi0, lo0, hi1, lo1;
      mul512(c0, m0, &hi0, &lo0);
      mul512(c2, m1, &hi1, &lo1);
      /* 0x96: a ^ b ^ c */
      c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32((int)k0), 0x96);
      c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32((int)k1), 0x96);
      c1 = lo1;
      c3 = lo0;
      k0 += RD_PHILOX_W0;
      k1 += RD_PHILOX_W1;
    }
    const __m512i a = _mm512_unpacklo_epi32(c0, c1), b = _mm512_unpackhi_epi32(c0, c1);
    _mm512_storeu_si512(out + i, _mm512_permutex2var_epi64(a, first, b));
    _mm512_storeu_si512(out + i + 8, _mm512_permutex2var_epi64(a, second, b));
  }
  fill_generic(seed, d0 + i, n - i, out + i);
}

#define ATTR2 __attribute__((target("avx2")))

ATTR2 static inline void mul256(__m256i c, __m256i m, __m256i *hi, __m256i *lo) {
  const __m256i even = _mm256_mul_epu32(c, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

ATTR2 static void fill_avx2(uint64_t seed, uint64_t d0, size_t n, uint64_t *out) {
  const __m256i m0 = _mm256_set1_epi64x(RD_PHILOX_M0), m1 = _mm256_set1_epi64x(RD_PHILOX_M1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t lo32[8], hi32[8];
    counters(d0 + i, 8, lo32, hi32);
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo32);
    __m256i c1 = _mm256_loadu_si256((const __m256i *)hi32);
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
      __m256i hi0, lo0, hi1, lo1;
      mul256(c0, m0, &hi0, &lo0);
      mul256(c2, m1, &hi1, &lo1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
      c1 = lo1;
      c3 = lo0;
      k0 += RD_PHILOX_W0;
      k1 += RD_PHILOX_W1;
    }
    /* unpacklo: outputs 0, 1 | 4, 5; unpackhi: 2, 3 | 6, 7. */
    const __m256i a = _mm256_unpacklo_epi32(c0, c1), b = _mm256_unpackhi_epi32(c0, c1);
    _mm256_storeu_si256((__m256i *)(out + i), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256((__m256i *)(out + i + 4), _mm256_permute2x128_si256(a, b, 0x31));
  }
  fill_generic(seed, d0 + i, n - i, out + i);
}
#endif

typedef void (*fill_fn)(uint64_t, uint64_t, size_t, uint64_t *);
#if defined(__x86_64__)
static const fill_fn fns[] = {fill_generic, fill_avx2, fill_avx512};
#else
static const fill_fn fns[] = {fill_generic};
#endif
#define N_FNS (sizeof fns / sizeof fns[0])
static size_t chosen;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick(void) { chosen = rd_cpu_isa_pick(N_FNS, false, false, "RD_PHILOX_ISA"); }

void rd_philox_fill(uint64_t seed, uint64_t d0, size_t n, uint64_t *out) {
  pthread_once(&pick_once, pick);
  fns[chosen](seed, d0, n, out);
}

int rd_philox_fill_variant(const char *isa, uint64_t seed, uint64_t d0, size_t n,
                           uint64_t *out) {
  const int i = rd_cpu_isa_find(N_FNS, isa, false, false);
  if (i < 0) return -1;
  fns[i](seed, d0, n, out);
  return 0;
}
