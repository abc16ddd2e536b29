/* rd_divide.h - exact unsigned division by a divisor shared by many
 * numerators, and the stratified sample targets built on it.
 *
 * A 64-bit hardware divide costs tens of cycles; the table's stratified
 * sample divides once per item by the same batch size. With
 * inv = floor((2^64-1)/d), mulhi(x, inv) falls short of x/d by
 * x (1 + (2^64-1) mod d) / (d 2^64) < x / 2^64 < 1, so it is floor(x/d) or
 * one less, and one remainder check makes it exact (the simplest exact
 * form of Granlund and Montgomery's division by invariant integers).
 * Header-only: the table calls it per item.
 */
#ifndef RD_DIVIDE_H
#define RD_DIVIDE_H

#include <stdint.h>

typedef struct {
  uint64_t d;   /* the divisor, >= 1 */
  uint64_t inv; /* floor((2^64 - 1) / d) */
} rd_divisor_t;

/* d must be >= 1. */
static inline rd_divisor_t rd_divisor(uint64_t d) {
  rd_divisor_t v = {d, UINT64_MAX / d};
  return v;
}

/* floor(x / v->d), for every x < 2^64. */
static inline uint64_t rd_divide(const rd_divisor_t *v, uint64_t x) {
  const uint64_t q = (uint64_t)(((unsigned __int128)x * v->inv) >> 64);
  return q + (x - q * v->d >= v->d);
}

/* The stratified targets of a batch of n over a total: item i gets
 * floor((i total + r_i) / n) for its draw r_i < total, the i-th n-quantile
 * of [0, total). Set up once per batch; each target then costs one
 * rd_divide, since floor((i total + r) / n) = i (total / n) +
 * floor((i (total mod n) + r) / n), whose numerator stays below
 * n^2 + total < 2^64 for n < 2^32 and total < 2^63. */
typedef struct {
  rd_divisor_t n;
  uint64_t q, rem; /* total / n, total mod n */
} rd_strata_t;

/* 1 <= n < 2^32, total < 2^63. */
static inline rd_strata_t rd_strata(uint64_t n, uint64_t total) {
  rd_strata_t s = {rd_divisor(n), total / n, total % n};
  return s;
}

static inline uint64_t rd_strata_target(const rd_strata_t *s, uint64_t i, uint64_t r) {
  return i * s->q + rd_divide(&s->n, i * s->rem + r);
}

#endif
