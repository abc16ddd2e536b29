/* learner_pool.h - synthetic train-step batches for the learner benchmarks
 * (bench_learner, bench_fpga): LEARNER_POOL batches of the shape's config,
 * from Philox streams keyed by SEED and the batch size, so every program
 * steps on the same data. Observations and rewards in [-1, 1), IS weights
 * in [0.2, 1), discount 0.99 with every fifth row terminal, valid actions. */
#ifndef RD_BENCH_LEARNER_POOL_H
#define RD_BENCH_LEARNER_POOL_H

#include <stdint.h>

#include "learner.h"

#define LEARNER_POOL 4

typedef struct {
  float *obs, *next, *reward, *discount, *w, *af, *td; /* td: one batch's |delta| */
  int32_t *ai;
  rd_batch_t b[LEARNER_POOL];
} learner_pool_t;

/* Allocates (dies on failure) and fills the batches for config c. */
void learner_pool_init(learner_pool_t *p, const rd_learner_config_t *c, uint32_t batch);
void learner_pool_free(learner_pool_t *p);

#endif
