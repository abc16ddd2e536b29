/* philox_fill.h - many consecutive draws of a table's Philox stream at once.
 *
 * Why: a stratified sample of a batch draws one Philox4x32-10 value per
 * item, and one draw is ten rounds of two 32x32->64 multiplies, about 7 ns
 * on its own, the largest part of rd_table_sample's own time in the loop's
 * sampler work (docs/benchmarks.md). The draws of a batch are independent,
 * so 8 or 16 of them run in vector lanes.
 *
 * Contract: out[i] = rd_philox_u64(seed, d0 + i) (common/rd_philox.h, the
 * stream every backend shares) for i < n, bit for bit, whichever variant
 * runs (cpu_isa.h picks it; RD_PHILOX_ISA may name one). The counter
 * d0 + i wraps modulo 2^64 as rd_philox_u64's argument does.
 */
#ifndef RD_PHILOX_FILL_H
#define RD_PHILOX_FILL_H

#include <stddef.h>
#include <stdint.h>

void rd_philox_fill(uint64_t seed, uint64_t d0, size_t n, uint64_t *out);

/* rd_philox_fill by the named variant, for tests and benches: 0, or -1
 * (nothing written) when this CPU or build has no such variant. */
int rd_philox_fill_variant(const char *isa, uint64_t seed, uint64_t d0, size_t n,
                           uint64_t *out);

#endif
