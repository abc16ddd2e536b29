/* rd_fixed.h - the exact priority representation shared by all backends.
 *
 * A priority p >= 0 is stored in the sum tree as the integer
 *   leaf(p) = floor(p * 2^F + 0.5), and 1 if p > 0 but that rounds to 0,
 * so that a positive priority is never unsampleable. F (fraction bits) is
 * fixed per table: the largest F such that capacity * max_priority * 2^F
 * stays below 2^63, i.e. the root can never overflow (the root bit-width
 * bound of papers/001 §IV-C4, with every level sharing the root's width
 * so a leaf's integer is the same on CPU, GPU and FPGA).
 *
 * Scaling by a power of two is exact in binary floating point, so every
 * backend computes the same integer for the same double. Sampling
 * probabilities are then reported from the integers (leaf / total), which
 * is the distribution actually sampled.
 */
#ifndef RD_FIXED_H
#define RD_FIXED_H

#include <math.h>
#include <stdint.h>

#include "rd_error.h"

typedef struct {
  int frac_bits;       /* F */
  double scale;        /* 2^F */
  double max_priority; /* largest priority accepted */
} rd_fixed_t;

/* Choose F for a table. RD_ERANGE if max_priority is not a positive finite
 * number or leaves no fraction bits (F < 0) at this capacity. */
static inline int rd_fixed_init(rd_fixed_t *f, double max_priority, uint32_t capacity,
                                rd_error_t *err) {
  if (!(max_priority > 0) || !isfinite(max_priority) || capacity == 0)
    return rd_error_set(err, RD_ERANGE, "max_priority must be a positive finite number");
  /* Largest F whose leaf for max_priority still fits the tree's bound,
   * compared as integers: a double cannot hold (2^63-1)/capacity exactly
   * above 2^53, and rounding there once let F come out one too large. The
   * test expression is the one rd_fixed_from_priority uses, and rounding is
   * monotonic, so every p <= max_priority then fits as well. */
  const uint64_t max_leaf = ((UINT64_C(1) << 63) - 1) / capacity;
  int F = 62;
  for (; F >= 0; F--) {
    double x = ldexp(max_priority, F) + 0.5;
    if (x < 0x1p63 && (uint64_t)x <= max_leaf) break;
  }
  if (F < 0)
    return rd_error_set(err, RD_ERANGE,
                        "max_priority %g is too large for capacity %u (the total would "
                        "overflow 63 bits)", max_priority, capacity);
  f->frac_bits = F;
  f->scale = ldexp(1.0, F);
  f->max_priority = max_priority;
  return RD_OK;
}

/* p must be finite, >= 0 and <= max_priority (callers validate). */
static inline uint64_t rd_fixed_from_priority(const rd_fixed_t *f, double p) {
  uint64_t v = (uint64_t)(p * f->scale + 0.5);
  return (v == 0 && p > 0) ? 1 : v;
}

static inline double rd_fixed_to_priority(const rd_fixed_t *f, uint64_t v) {
  return (double)v / f->scale;
}

#endif
