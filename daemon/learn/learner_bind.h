/* learner_bind.h - which schema fields a hosted learner reads, and how a
 * gathered batch becomes the learner's input.
 *
 * Contract. rd_pipeline_bind_schema (declared in pipeline.h) finds the
 * fields by name and sets the config's field indices (f_obs, f_action,
 * f_reward, f_next_obs, and f_discount or f_done); the functions here then
 * read only those indices. A batch's columns hold one packed column per
 * bound field, as rd_table_gather writes them.
 *
 * Why a file of its own: the DQN-versus-DDPG field rules (an int32 action
 * index or a float action vector; a discount column or a done flag turned
 * into gamma * (1 - done)) are the learner's knowledge, next to
 * learner_spec.c which turns a LearnerSpec into the same config; the
 * pipeline's threads move batches without knowing what is in them.
 */
#ifndef RD_LEARNER_BIND_H
#define RD_LEARNER_BIND_H

#include <stddef.h>

#include "learner.h"
#include "pipeline.h"
#include "rd_schema.h"
#include "table.h"

/* 1 if schema field f is one the learner reads under c's binding. */
int rd_learner_bind_is_field(const rd_pipeline_config_t *c, int f);

/* RD_OK if every field index the learner needs is set and inside a schema
 * of n_fields fields; else RD_EINVAL. */
int rd_learner_bind_check(const rd_pipeline_config_t *c, uint32_t n_fields, rd_error_t *err);

/* After a gather of n rows into cols: with a done field, write the
 * per-row discount gamma * (1 - done) into discount (n floats); without
 * one, nothing (the discount column is used as it is). */
void rd_learner_bind_discount(const rd_pipeline_config_t *c, size_t n, const rd_buf_t *cols,
                              float *discount);

/* The learner's view of n gathered rows: pointers into cols (and into
 * discount when a done field is bound), IS weights w. No copy. */
void rd_learner_bind_batch(const rd_pipeline_config_t *c, size_t n, const rd_buf_t *cols,
                           const float *discount, const float *w, rd_batch_t *b);

/* Bytes of each input array of a batch view of n rows, in the order obs,
 * next_obs, reward, action, discount, weights (for prefetching). */
void rd_learner_bind_input_bytes(const rd_pipeline_config_t *c, size_t n, size_t bytes[6]);

#endif
