/* rdt_rand.h - test data with a wide dynamic range, drawn from
 * common/rd_rng.h's splitmix64 (the same seed, the same data).
 *
 * Header-only and valid C++ (the CUDA checks use it).
 */
#ifndef RDT_RAND_H
#define RDT_RAND_H

#include <math.h>
#include <stdint.h>

#include "rd_rng.h"

/* A leaf value <= max: zero about 1 in 8, max about 1 in 64, else a random
 * 64-bit number shifted right by 0..63 (every magnitude), mod max + 1. */
static inline uint64_t rdt_wide_u64(uint64_t *s, uint64_t max) {
  uint64_t r = rd_splitmix64(s);
  if ((r & 7) == 0) return 0;
  if ((r & 63) == 8) return max;
  uint64_t v = rd_splitmix64(s) >> (r >> 58);
  return v % (max + 1);
}

/* A float with a wide spread: signed, exponents 2^-30..2^4, some zeros. */
static inline float rdt_wide_float(uint64_t *s) {
  uint64_t r = rd_splitmix64(s);
  if ((r & 31) == 0) return 0.0f;
  double u = (double)(r >> 11) * 0x1p-53;
  double e = ldexp(1.0, (int)(rd_splitmix64(s) % 35) - 30);
  return (float)((u * 2.0 - 1.0) * e);
}

#endif
