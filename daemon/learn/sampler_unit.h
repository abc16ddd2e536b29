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

/* Batches whose priorities one helper's burst writes back at most. */
#define RD_PIPELINE_HELP_BATCHES 2u

/* Helpers. With learner threads > 1 the CPU learner's team workers wait
 * while the learner's thread runs a step's serial parts; with as many
 * CPUs as learner threads, the sampler thread can only run by taking a
 * core from the team, often in the middle of a job that then waits for
 * it. So the workers are offered the sampler's work in their idle time
 * (team.h rd_team_set_idle), in small bursts: the priorities of at most
 * RD_PIPELINE_HELP_BATCHES trained batches, or else the sample and gather
 * of one batch. They are the sampler thread's bursts, under the same rules
 * (one at a time: p->bursting; at most D + 1 batches in flight), taken
 * only when mu is free. The sampler thread does what the helpers leave;
 * while they help, its polling sleeps last up to RD_PIPELINE_HELPED_SLEEP_S
 * (the learner still wakes it when half the batches ahead are gone).
 *
 * rd_sampler_unit_help is that idle function (arg: the pipeline; 1 if it
 * ran a burst). rd_sampler_unit_lend(p, 1) offers it to the learner now in
 * p->learner (the learner thread, or create before the threads start),
 * unless the pipeline has device shares (a helper's burst would run
 * outside the sampler's share);
 * rd_sampler_unit_lend(p, 0) withdraws it and returns when no helper's
 * burst runs any more. */
int rd_sampler_unit_help(void *arg);
void rd_sampler_unit_lend(rd_pipeline_t *p, int on);

/* Under mu, after the learner queued a batch for its update: 1 if the
 * learner should wake the sampler now (see the wake-up policy in
 * sampler_unit.c). */
int rd_sampler_unit_wanted(const rd_pipeline_t *p);

#endif
