/* sampler_unit.h - the pipeline's sampler and storage units (papers/001
 * §V) on one thread: it writes trained batches' priorities back, samples
 * new index batches and gathers their rows.
 *
 * Contract. The thread works in bursts. One burst takes the priority
 * updates waiting in q_update and as many new batches as the relaxation
 * depth and the work target allow, and does all of it in ONE hold of the
 * table lock, in this order: update the priorities (so at most D + 1
 * batches are ever between sampling and their update), sample, gather.
 * A batch is therefore gathered in the same hold that sampled it: no
 * insert can overwrite its rows in between, and it holds exactly the rows
 * its keys named (thesis 004 §4.2.2). Gathered batches go to q_train, the
 * updated slots back to q_free (or straight into the burst's samples).
 * A burst handles at most RD_PIPELINE_BURST_ITEMS items of updates and as
 * many of samples (at least one batch each), so an insert never waits long
 * for the table lock.
 *
 * Why one thread and bursts: on the CPU a small batch's sample, gather and
 * update each cost less than waking a thread, so a storage thread of its
 * own only added wake-ups, and one lock hold per burst instead of one per
 * kind of work keeps the table lock's traffic (and the inserts' waits
 * behind it) to one acquisition per burst. docs/benchmarks.md has the
 * measurements behind the wake-up policy in sampler_unit.c.
 */
#ifndef RD_SAMPLER_UNIT_H
#define RD_SAMPLER_UNIT_H

#include "pipeline_internal.h"

/* Items per burst, per kind of work (at least one batch). */
#define RD_PIPELINE_BURST_ITEMS 4096u

/* The sampler thread (pthread start routine; arg is the pipeline). */
void *rd_sampler_unit_main(void *arg);

/* Under mu, after the learner queued a batch for its update: 1 if the
 * learner should wake the sampler now (see the wake-up policy in
 * sampler_unit.c). */
int rd_sampler_unit_wanted(const rd_pipeline_t *p);

#endif
