/* baseline_bintree.h - the textbook binary sum tree, as a benchmark baseline.
 *
 * A C port of the sum tree most Python replay buffers use (OpenAI baselines'
 * SumSegmentTree and its many copies): one array of 2*cap doubles, cap
 * rounded up to a power of two, node i has children 2i and 2i+1, the leaves
 * live at [cap, 2cap) and node 0 is unused. set() writes a leaf and walks up
 * recomputing parent = left + right; sample() descends from the root
 * comparing the target with the left child, one item at a time and without
 * prefetching. The batch functions are plain loops over items.
 *
 * This is deliberately not optimised: it is what replayd is measured
 * against, so it must stay the ordinary implementation.
 */
#ifndef RD_BENCH_BINTREE_H
#define RD_BENCH_BINTREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t capacity; /* leaves usable by callers */
  uint32_t cap;      /* capacity rounded up to a power of two */
  double *value;     /* 2*cap nodes; value[1] is the total */
} rd_bench_bintree_t;

/* Allocate a tree of `capacity` zero leaves. Returns 0, or -1 when out of
 * memory or capacity is 0 or > 2^31. */
int rd_bench_bintree_init(rd_bench_bintree_t *t, uint32_t capacity);
void rd_bench_bintree_free(rd_bench_bintree_t *t);

static inline double rd_bench_bintree_total(const rd_bench_bintree_t *t) {
  return t->value[1];
}

static inline double rd_bench_bintree_get(const rd_bench_bintree_t *t, uint32_t i) {
  return t->value[t->cap + i];
}

/* Setup, not a measured operation: after writing leaves directly
 * (value[cap + i]), recompute every internal node bottom-up in O(cap). */
void rd_bench_bintree_rebuild(rd_bench_bintree_t *t);

/* Set leaf i to p and recompute its ancestors. */
void rd_bench_bintree_set(rd_bench_bintree_t *t, uint32_t i, double p);

/* The leaf i with sum(leaf[0..i-1]) <= prefix < sum(leaf[0..i]), for
 * 0 <= prefix < total (find_prefixsum_idx). */
uint32_t rd_bench_bintree_sample(const rd_bench_bintree_t *t, double prefix);

/* Batch wrappers: loops over the items. */
void rd_bench_bintree_update(rd_bench_bintree_t *t, size_t n, const uint32_t *pos,
                             const double *val);
void rd_bench_bintree_set_range(rd_bench_bintree_t *t, uint32_t first, size_t n,
                                const double *val);
void rd_bench_bintree_sample_batch(const rd_bench_bintree_t *t, size_t n,
                                   const double *prefix, uint32_t *leaves);

#endif
