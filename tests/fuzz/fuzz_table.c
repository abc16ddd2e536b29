/* fuzz_table.c - the durable harnesses' server, and probing a restored
 * table (fuzz_table.h). */
#include "fuzz_table.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_scratch.h"
#include "log.h"

static rd_durable_t *the_durable;
static rd_registry_t *the_registry;

void fuzz_durable_config(rd_config_t *cfg) {
  rd_log_open("/dev/null", RD_LOG_ERROR, NULL);
  rd_config_defaults(cfg);
  snprintf(cfg->state_dir, sizeof cfg->state_dir, "%s", fuzz_scratch());
  snprintf(cfg->checkpoint_dir, sizeof cfg->checkpoint_dir, "%s",
           fuzz_scratch_file("checkpoints"));
  cfg->max_capacity = 4096;
  cfg->max_memory_bytes = 64u << 20;
  cfg->max_workloads = 4;
}

int fuzz_verbose(void) {
  return getenv("FUZZ_VERBOSE") != NULL;
}

static void durable_close(void) {
  rd_registry_destroy(the_registry);
  rd_durable_destroy(the_durable);
}

void fuzz_durable_open(const rd_config_t *cfg, rd_durable_t **durable, rd_registry_t **registry) {
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_durable_create(&the_durable, cfg, &err) != RD_OK ||
      rd_registry_create(&the_registry, cfg, NULL, &err) != RD_OK) {
    fprintf(stderr, "fuzz: the server: %s\n", err.msg);
    abort();
  }
  fuzz_scratch_on_exit(durable_close);
  *durable = the_durable;
  *registry = the_registry;
}

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
