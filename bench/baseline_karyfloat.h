/* baseline_karyfloat.h - a K-ary float sum tree done as papers/001 §IV-C
 * describes it, as a benchmark baseline.
 *
 * The paper's CPU replay module, written from Algorithms 1 and 2: one array
 * of float node values per level (level 0 is the root, the last level holds
 * the leaves, a node's K children are contiguous), sampling descends from
 * the root subtracting each child's value from the target until it would
 * go negative (Algorithm 1), and a priority update writes the leaf and adds
 * the change to each ancestor, one value per level (Algorithm 2), item by
 * item. Floats are what the authors' tree keeps; their sums drift and a
 * target can fall past the last child, which this descent clamps, so it is
 * inexact by construction. It is here for speed only: replayd's own tree
 * must beat it while staying exact (issue 27).
 */
#ifndef RD_BENCH_KARYFLOAT_H
#define RD_BENCH_KARYFLOAT_H

#include <stddef.h>
#include <stdint.h>

#define RD_BENCH_KARY_MAX_LEVELS 32

typedef struct {
  uint32_t capacity, fanout, height; /* leaves, K, levels (root included) */
  uint32_t log_k;
  float *level[RD_BENCH_KARY_MAX_LEVELS];
} rd_bench_kary_t;

/* A tree of `capacity` zero leaves, K a power of two in [2, 64]. Returns 0,
 * or -1 (bad arguments, out of memory). */
int rd_bench_kary_init(rd_bench_kary_t *t, uint32_t capacity, uint32_t fanout);
void rd_bench_kary_free(rd_bench_kary_t *t);

/* Setup, not measured: recompute every internal node from the leaves. */
void rd_bench_kary_rebuild(rd_bench_kary_t *t);

static inline float rd_bench_kary_total(const rd_bench_kary_t *t) { return t->level[0][0]; }

/* Algorithm 2: leaf i = p, its change added to every ancestor. */
void rd_bench_kary_set(rd_bench_kary_t *t, uint32_t i, float p);

/* Algorithm 1: the leaf where the running sum passes prefix. */
uint32_t rd_bench_kary_sample(const rd_bench_kary_t *t, float prefix);

/* Batches: loops over the items, as the paper's OpenMP loops with one thread. */
void rd_bench_kary_update(rd_bench_kary_t *t, size_t n, const uint32_t *pos, const float *val);
void rd_bench_kary_sample_batch(const rd_bench_kary_t *t, size_t n, const float *prefix,
                                uint32_t *leaves);

#endif
