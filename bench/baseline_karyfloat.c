/* baseline_karyfloat.c - the paper's K-ary float sum tree (see the header). */
#include "baseline_karyfloat.h"

#include <stdlib.h>
#include <string.h>

int rd_bench_kary_init(rd_bench_kary_t *t, uint32_t capacity, uint32_t fanout) {
  memset(t, 0, sizeof *t);
  if (capacity == 0 || fanout < 2 || fanout > 64 || (fanout & (fanout - 1)) != 0) return -1;
  uint32_t lk = (uint32_t)__builtin_ctz(fanout), h = 1;
  uint64_t leaves = 1;
  while (leaves < capacity) {
    leaves <<= lk;
    h++;
  }
  if (h > RD_BENCH_KARY_MAX_LEVELS) return -1;
  t->capacity = capacity;
  t->fanout = fanout;
  t->log_k = lk;
  t->height = h;
  for (uint32_t l = 0; l < h; l++) {
    /* level l holds K^l nodes (the last level rounded up to whole blocks) */
    t->level[l] = calloc((size_t)1 << (lk * l), sizeof(float));
    if (t->level[l] == NULL) {
      rd_bench_kary_free(t);
      return -1;
    }
  }
  return 0;
}

void rd_bench_kary_free(rd_bench_kary_t *t) {
  for (uint32_t l = 0; l < RD_BENCH_KARY_MAX_LEVELS; l++) free(t->level[l]);
  memset(t, 0, sizeof *t);
}

void rd_bench_kary_rebuild(rd_bench_kary_t *t) {
  for (uint32_t l = t->height - 1; l-- > 0;) {
    size_t nodes = (size_t)1 << (t->log_k * l);
    for (size_t i = 0; i < nodes; i++) {
      float s = 0;
      for (uint32_t c = 0; c < t->fanout; c++) s += t->level[l + 1][i * t->fanout + c];
      t->level[l][i] = s;
    }
  }
}

void rd_bench_kary_set(rd_bench_kary_t *t, uint32_t i, float p) {
  float *leaf = t->level[t->height - 1];
  float d = p - leaf[i];
  leaf[i] = p;
  size_t node = i;
  for (uint32_t l = t->height - 1; l-- > 0;) {
    node >>= t->log_k;
    t->level[l][node] += d;
  }
}

uint32_t rd_bench_kary_sample(const rd_bench_kary_t *t, float prefix) {
  size_t node = 0;
  for (uint32_t l = 1; l < t->height; l++) {
    const float *child = t->level[l] + (node << t->log_k);
    uint32_t c = 0;
    for (; c + 1 < t->fanout; c++) { /* the last child takes what is left */
      float rest = prefix - child[c];
      if (rest < 0) break;
      prefix = rest;
    }
    node = (node << t->log_k) + c;
  }
  return node < t->capacity ? (uint32_t)node : t->capacity - 1;
}

void rd_bench_kary_update(rd_bench_kary_t *t, size_t n, const uint32_t *pos, const float *val) {
  for (size_t k = 0; k < n; k++) rd_bench_kary_set(t, pos[k], val[k]);
}

void rd_bench_kary_sample_batch(const rd_bench_kary_t *t, size_t n, const float *prefix,
                                uint32_t *leaves) {
  for (size_t k = 0; k < n; k++) leaves[k] = rd_bench_kary_sample(t, prefix[k]);
}
