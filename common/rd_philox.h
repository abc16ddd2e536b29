/* rd_philox.h - Philox4x32-10, the counter-based RNG every backend shares.
 *
 * Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11).
 * A counter-based generator is a pure function of (key, counter), so the
 * CPU, a CUDA thread and an HLS kernel can each compute draw d of a table's
 * stream on their own and get the same bits: that is what lets a seed
 * reproduce a batch of samples on any backend.
 *
 * Stream of a table with seed s (the contract other backends implement):
 *   draw d (d = 0, 1, 2, ... counted over the table's life) is
 *     out = philox4x32_10(ctr = {lo32(d), hi32(d), 0, 0},
 *                         key = {lo32(s), hi32(s)})
 *     u64 = ((uint64_t)out[1] << 32) | out[0]
 *   and a sampling target in [0, total) is floor(u64 * total / 2^64).
 *
 * Header-only and free of libc so it can be compiled for a device as well.
 */
#ifndef RD_PHILOX_H
#define RD_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define RD_HD __host__ __device__
#else
#define RD_HD
#endif

typedef struct {
  uint32_t v[4];
} rd_philox_ctr_t;

/* The round multipliers and the key's Weyl increments (also used by the
 * CPU's vectorized rounds, backends/cpu/philox_fill.c). */
#define RD_PHILOX_M0 0xD2511F53u
#define RD_PHILOX_M1 0xCD9E8D57u
#define RD_PHILOX_W0 0x9E3779B9u
#define RD_PHILOX_W1 0xBB67AE85u

static inline RD_HD rd_philox_ctr_t rd_philox4x32_10(rd_philox_ctr_t c, uint32_t k0,
                                                     uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)RD_PHILOX_M0 * c.v[0];
    uint64_t p1 = (uint64_t)RD_PHILOX_M1 * c.v[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    rd_philox_ctr_t n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += RD_PHILOX_W0;
    k1 += RD_PHILOX_W1;
  }
  return c;
}

/* The 64-bit value of draw d of the stream keyed by seed. */
static inline RD_HD uint64_t rd_philox_u64(uint64_t seed, uint64_t d) {
  rd_philox_ctr_t c = {{(uint32_t)d, (uint32_t)(d >> 32), 0u, 0u}};
  rd_philox_ctr_t o = rd_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
  return ((uint64_t)o.v[1] << 32) | o.v[0];
}

/* floor(u * range / 2^64): maps a uniform 64-bit draw into [0, range).
 * The bias is below range / 2^64, i.e. < 2^-1 ulp-of-a-draw for our ranges
 * (range < 2^63), far below anything a sampler can observe. */
static inline RD_HD uint64_t rd_scale_u64(uint64_t u, uint64_t range) {
  return (uint64_t)(((unsigned __int128)u * range) >> 64);
}

#endif
