/* baseline_bintree.c - the textbook binary sum tree (see baseline_bintree.h). */
#include "baseline_bintree.h"

#include <stdlib.h>

int rd_bench_bintree_init(rd_bench_bintree_t *t, uint32_t capacity) {
  t->capacity = 0;
  t->cap = 0;
  t->value = NULL;
  if (capacity == 0 || capacity > (UINT32_C(1) << 31)) return -1;
  uint32_t cap = 1;
  while (cap < capacity) cap <<= 1;
  double *v = calloc((size_t)2 * cap, sizeof *v);
  if (v == NULL) return -1;
  t->capacity = capacity;
  t->cap = cap;
  t->value = v;
  return 0;
}

void rd_bench_bintree_free(rd_bench_bintree_t *t) {
  free(t->value);
  t->value = NULL;
  t->capacity = 0;
  t->cap = 0;
}

void rd_bench_bintree_rebuild(rd_bench_bintree_t *t) {
  double *v = t->value;
  for (size_t idx = t->cap; idx-- > 1;) v[idx] = v[2 * idx] + v[2 * idx + 1];
}

void rd_bench_bintree_set(rd_bench_bintree_t *t, uint32_t i, double p) {
  double *v = t->value;
  size_t idx = (size_t)t->cap + i;
  v[idx] = p;
  idx >>= 1;
  while (idx >= 1) {
    v[idx] = v[2 * idx] + v[2 * idx + 1];
    idx >>= 1;
  }
}

uint32_t rd_bench_bintree_sample(const rd_bench_bintree_t *t, double prefix) {
  const double *v = t->value;
  size_t idx = 1;
  while (idx < t->cap) {
    if (v[2 * idx] > prefix) {
      idx = 2 * idx;
    } else {
      prefix -= v[2 * idx];
      idx = 2 * idx + 1;
    }
  }
  return (uint32_t)(idx - t->cap);
}

void rd_bench_bintree_update(rd_bench_bintree_t *t, size_t n, const uint32_t *pos,
                             const double *val) {
  for (size_t k = 0; k < n; k++) rd_bench_bintree_set(t, pos[k], val[k]);
}

void rd_bench_bintree_set_range(rd_bench_bintree_t *t, uint32_t first, size_t n,
                                const double *val) {
  for (size_t k = 0; k < n; k++) rd_bench_bintree_set(t, first + (uint32_t)k, val[k]);
}

void rd_bench_bintree_sample_batch(const rd_bench_bintree_t *t, size_t n,
                                   const double *prefix, uint32_t *leaves) {
  for (size_t k = 0; k < n; k++) leaves[k] = rd_bench_bintree_sample(t, prefix[k]);
}
