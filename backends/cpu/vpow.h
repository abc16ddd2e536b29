/* vpow.h - x^y over an array with one exponent: the table's priority
 * transform (x + epsilon)^alpha and its IS weights (N P)^-beta.
 *
 * Why not pow(): those two calls were about 40% of the pipeline sampler's
 * work per batch (bench_loop, loop.sampler_batch_us; docs/benchmarks.md),
 * one libm call per item that the compiler cannot vectorize. Here every
 * item is the same branch-free arithmetic (a double-double logarithm, the
 * product with y, an exponential), which the compiler vectorizes.
 *
 * Contract. For x > 0 normal and finite y whose result is a normal double,
 * the result is within 1 ulp of x^y (tests/test_vpow.c checks 2 ulp
 * against libm's pow over the table's ranges); every other case (0,
 * subnormals, infinities, NaN, negative x, results near overflow or
 * underflow) is libm's pow. The result is a function of (x, y) alone: the
 * same bits whichever instruction set ran it (a fused multiply-add only
 * where it yields an exact product's error term, which the generic variant
 * computes exactly without one; cpu_isa.h picks the variant), so a table
 * computes the same leaves and weights on every x86-64 machine. rd_vpow1 is one item of rd_vpow.
 */
#ifndef RD_VPOW_H
#define RD_VPOW_H

#include <stddef.h>

/* out[i] = x[i]^y for i < n; out may be x. */
void rd_vpow(size_t n, const double *x, double y, double *out);

double rd_vpow1(double x, double y);

/* The variant rd_vpow runs ("generic", "avx2", "avx512"; RD_VPOW_ISA may
 * name one, as RD_SUMTREE_ISA does for the sum tree). */
const char *rd_vpow_isa(void);

/* rd_vpow by the named variant, for tests and benches that compare them:
 * 0, or -1 (nothing written) when this CPU or build has no such variant. */
int rd_vpow_variant(const char *isa, size_t n, const double *x, double y, double *out);

#endif
