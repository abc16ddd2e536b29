/* rd_rng.h - splitmix64: the small, seedable generator of tests, benches,
 * synthetic profiling data and examples.
 *
 * Contract: rd_splitmix64 advances *s by the golden-ratio increment and
 * returns the mixed value (Steele, Lea and Flood's SplitMix64, the
 * generator that seeds xoshiro); the same seed gives the same numbers on
 * every machine, so a test or a bench that depends on a sequence keeps it.
 * Not for sampling: the replay tables draw from rd_philox.h, a counter-based
 * stream that any thread or device can index.
 *
 * Header-only and valid C++, so the CUDA checks and benches share it.
 */
#ifndef RD_RNG_H
#define RD_RNG_H

#include <stdint.h>

static inline uint64_t rd_splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n) by multiply-shift (n >= 1): no division, a bias below
 * n / 2^64. */
static inline uint64_t rd_rng_below(uint64_t *s, uint64_t n) {
  return (uint64_t)(((unsigned __int128)rd_splitmix64(s) * n) >> 64);
}

/* Uniform in [0, 1), 53 bits. */
static inline double rd_rng_unit(uint64_t *s) {
  return (double)(rd_splitmix64(s) >> 11) * 0x1p-53;
}

#endif
