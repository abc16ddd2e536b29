/* learner_spec.h - a workload's LearnerSpec (api/replayd.proto) turned into
 * the hosted learner's configuration, with defaults and limits.
 *
 * Kept apart from registry.c, which only asks "is there a learner, and
 * what does it cost": this file knows every learner setting.
 */
#ifndef RD_LEARNER_SPEC_H
#define RD_LEARNER_SPEC_H

#include "pipeline.h"
#include "rd_error.h"
#include "replayd.pb-c.h"
#include "table.h"

/* Hosted learners' limits, beyond the table's. */
#define RD_LEARNER_MAX_WIDTH 4096u /* units per hidden layer */

/* Validate ls against the workload's table config (schema, max_batch,
 * capacity, seed) and fill *out: learner settings with defaults, batch,
 * D, min_size, continuous mode and the schema binding. threads is the
 * learner's OpenMP thread count. RD_EINVAL names the field ("learner.lr
 * must be ..."). */
int rd_learner_spec_parse(const Replayd__V1__LearnerSpec *ls, const rd_table_config_t *tc,
                          double beta, uint32_t threads, rd_pipeline_config_t *out,
                          rd_error_t *err);

/* Write every default of c into ls (oneof cases set, critic_hidden filled
 * for DDPG, activation and algorithm spelled out) so the stored and
 * described spec says what runs. RD_ENOMEM. */
int rd_learner_spec_normalise(Replayd__V1__LearnerSpec *ls, const rd_pipeline_config_t *c,
                              rd_error_t *err);

#endif
