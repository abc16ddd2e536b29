/* learner_unit.h - the pipeline's learner unit (papers/001 §V): one thread
 * that trains on each gathered batch, hands it back for its priority
 * update, and publishes the weights.
 *
 * Contract. The thread takes batches from q_train in sampling order, runs
 * one train-step on each through the learner backend (learner_backend.h),
 * counts it into the stats and the TrainStep request, and pushes the slot
 * to q_update (trained: its |delta| become priorities; dropped or skipped:
 * freed without an update). It publishes the policy (weights_buf.h) at
 * the end of every request, when it runs out of batches, and at most every
 * RD_PIPELINE_PUBLISH_MS while training. It alone touches the backend
 * after create.
 *
 * Device failures (pipeline.h, "Learner backends"): a backend error flagged
 * as a fault makes the unit go on with the CPU learner. Only a device fault
 * gives the device up (rd_learner_fault_gives_up_device); a config beyond a
 * device's build limits (RD_LEARNER_FAULT_UNSUPPORTED) leaves it usable for
 * other workloads.
 */
#ifndef RD_LEARNER_UNIT_H
#define RD_LEARNER_UNIT_H

#include "pipeline_internal.h"

/* At create, before the threads start: build the backend the config names,
 * falling back to the CPU on a fault; fill p->linfo. RD_OK, or the
 * backend's error (a caller's error, or no learner at all). */
int rd_learner_unit_init(rd_pipeline_t *p, rd_error_t *err);

/* Publish the policy as the next weights version (the learner thread, or
 * create before it starts). A set that cannot be saved (non-finite
 * weights) is not published: readers keep the last good one. */
void rd_learner_unit_publish(rd_pipeline_t *p);

/* The learner thread (pthread start routine; arg is the pipeline). */
void *rd_learner_unit_main(void *arg);

#endif
