/* fuzz_table.c - probing a restored table (fuzz_table.h). */
#include "fuzz_table.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define PROBE 8

/* A sample of PROBE: a refusal says why; else live keys, sane figures. */
static void probe_sample(rd_table_t *t) {
  uint64_t keys[PROBE];
  double prob[PROBE], weights[PROBE];
  rd_sample_out_t out = {keys, prob, weights, NULL};
  rd_error_t err;
  rd_error_clear(&err);
  uint64_t size = rd_table_size(t), next = rd_table_next_key(t);
  if (size == 0) return;
  if (rd_table_sample(t, PROBE, 0.5, 0, &out, &err) != RD_OK) {
    if (err.msg[0] == '\0') __builtin_trap(); /* a refusal says why */
    return;
  }
  for (int i = 0; i < PROBE; i++) {
    if (keys[i] >= next || keys[i] < next - size) __builtin_trap(); /* a live key */
    if (!(prob[i] > 0.0 && prob[i] <= 1.0)) __builtin_trap();
    if (!isfinite(weights[i])) __builtin_trap();
  }
}

/* One row of zeros (valid in every dtype) and a new priority for it: what
 * a client does next to a restored table. */
static void probe_insert(rd_table_t *t) {
  const uint32_t nf = t->config.schema.n_fields;
  rd_cbuf_t cols[RD_SCHEMA_MAX_FIELDS];
  for (uint32_t f = 0; f < nf; f++) {
    cols[f].data = calloc(1, t->field_bytes[f]);
    if (cols[f].data == NULL) abort();
    cols[f].bytes = t->field_bytes[f];
  }
  uint64_t key;
  double p = 2.0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_insert(t, 1, cols, NULL, &key, &err);
  if (rc == RD_OK) rc = rd_table_update(t, 1, &key, &p, NULL, &err);
  if (rc != RD_OK && err.msg[0] == '\0') __builtin_trap();
  for (uint32_t f = 0; f < nf; f++) free((void *)cols[f].data);
}

void fuzz_table_probe(rd_workload_t *w) {
  pthread_mutex_lock(&w->lock);
  probe_sample(&w->table);
  probe_insert(&w->table);
  probe_sample(&w->table);
  pthread_mutex_unlock(&w->lock);
}
