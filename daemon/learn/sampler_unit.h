/* sampler_unit.h - the pipeline's sampler and storage units (papers/001
 * §V) on one thread: it writes trained batches' priorities back, samples
 * new index batches and gathers their rows.
 *
 * Contract. The thread works in bursts: several priority updates (slots
 * from q_update, back to q_free), or several samples and then their
 * gathers (slots from q_free to q_train), each kind under one hold of the
 * table lock and one of the pipeline's mutex. A sampled batch is pinned
 * until gathered: an insert that would overwrite one of its rows gathers it
 * first (rd_pipeline_before_insert), so a batch always holds the rows its
 * keys named (thesis 004 §4.2.2). A burst handles at most
 * RD_PIPELINE_BURST_ITEMS items (at least one batch), so an insert never
 * waits long for the table lock.
 *
 * Why one thread and bursts: on the CPU a small batch's sample, gather and
 * update each cost less than waking a thread, so a storage thread of its
 * own only added wake-ups. docs/benchmarks.md has the measurements behind
 * the wake-up policy in sampler_unit.c.
 */
#ifndef RD_SAMPLER_UNIT_H
#define RD_SAMPLER_UNIT_H

#include "pipeline_internal.h"

/* Items per burst (at least one batch). */
#define RD_PIPELINE_BURST_ITEMS 4096u

/* The sampler thread (pthread start routine; arg is the pipeline). */
void *rd_sampler_unit_main(void *arg);

/* Under mu, after the learner queued a batch for its update: 1 if the
 * learner should wake the sampler now (see the wake-up policy in
 * sampler_unit.c). */
int rd_sampler_unit_wanted(const rd_pipeline_t *p);

#endif
