/* batch_slots.h - the memory of the batches a pipeline has in flight.
 *
 * Contract. A pipeline of depth D owns D + 2 slots, allocated at create and
 * never again; a slot moves between the pipeline's queues by index
 * (rd_ring.h) and is written by one thread at a time: the sampler thread
 * from sampling to gathering and again for the priority update, the
 * learner thread while it trains (the queues' mutex orders the hand-offs).
 * Only the fields the learner reads (learner_bind.h) get column memory.
 *
 * Why D + 2: at most D + 1 batches are between sampling and their update
 * (pipeline.h), and one more lets the sampler sample the next batch in the
 * same table-lock hold that writes the oldest one's priorities.
 */
#ifndef RD_BATCH_SLOTS_H
#define RD_BATCH_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "learner.h"
#include "pipeline.h"
#include "table.h"

typedef struct {
  uint64_t *keys;
  double *prob;
  double *w64;     /* IS weights as the table returns them */
  float *w;        /* the same, for the learner */
  float *td;       /* |delta| from the learner */
  double *prio;    /* td as raw priorities for the table */
  float *discount; /* computed from done (f_done), else NULL */
  rd_buf_t cols[RD_SCHEMA_MAX_FIELDS]; /* only the learner's fields have memory */
  uint64_t seq;    /* sampling order, from 1 */
  int trained;     /* 1: priorities to write; 0: dropped (skipped step, deadline) */
  rd_step_stats_t st;
} rd_batch_slot_t;

/* Bytes of one slot per item of a batch, for c's binding to schema s. */
size_t rd_batch_slot_item_bytes(const rd_pipeline_config_t *c, const rd_schema_t *s);

/* n slots of c->batch items each for c's binding to schema s; NULL when
 * out of memory. */
rd_batch_slot_t *rd_batch_slots_alloc(uint32_t n, const rd_pipeline_config_t *c,
                                      const rd_schema_t *s);
void rd_batch_slots_free(rd_batch_slot_t *slots, uint32_t n); /* NULL is fine */

#endif
