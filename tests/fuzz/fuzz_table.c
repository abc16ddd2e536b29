/* fuzz_table.c - probing a restored table (fuzz_table.h). */
#include "fuzz_table.h"

#include <math.h>
#include <pthread.h>

#define PROBE 8

void fuzz_table_probe(rd_workload_t *w) {
  uint64_t keys[PROBE];
  double prob[PROBE], weights[PROBE];
  rd_sample_out_t out = {keys, prob, weights, NULL};
  rd_error_t err;
  rd_error_clear(&err);
  pthread_mutex_lock(&w->lock);
  uint64_t size = rd_table_size(&w->table), next = rd_table_next_key(&w->table);
  int rc = size == 0 ? RD_OK : rd_table_sample(&w->table, PROBE, 0.5, 0, &out, &err);
  pthread_mutex_unlock(&w->lock);
  if (size == 0) return;
  if (rc != RD_OK) {
    if (err.msg[0] == '\0') __builtin_trap(); /* a refusal says why */
    return;
  }
  for (int i = 0; i < PROBE; i++) {
    if (keys[i] >= next || keys[i] < next - size) __builtin_trap(); /* a live key */
    if (!(prob[i] > 0.0 && prob[i] <= 1.0)) __builtin_trap();
    if (!isfinite(weights[i])) __builtin_trap();
  }
}
