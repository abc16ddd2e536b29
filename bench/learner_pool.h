/* learner_pool.h - synthetic train-step batches for the learner benchmarks
 * (bench_learner, bench_fpga): LEARNER_POOL batches of the shape's config,
 * slices of one tests/support batch (rdt_batch_make: its data) seeded by
 * SEED and the batch size, so every program steps on the same data. */
#ifndef RD_BENCH_LEARNER_POOL_H
#define RD_BENCH_LEARNER_POOL_H

#include <stdint.h>

#include "learner.h"
#include "rdt_learner.h"

#define LEARNER_POOL 4

typedef struct {
  rdt_batch_t rows; /* LEARNER_POOL x batch rows */
  float *td;        /* one batch's |delta| */
  rd_batch_t b[LEARNER_POOL];
} learner_pool_t;

/* Allocates (dies on failure) and fills the batches for config c. */
void learner_pool_init(learner_pool_t *p, const rd_learner_config_t *c, uint32_t batch);
void learner_pool_free(learner_pool_t *p);

#endif
