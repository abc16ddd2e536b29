/* share.h - hosted learners sharing a device get its time by weight.
 *
 * One pool per device (the CPU, each GPU, each FPGA); each hosted
 * learner's pipeline on it holds a share. Its threads ask the share before
 * every burst of work (rd_share_begin: the learner's train-step, the
 * sampler's sample/gather/update burst) and report the burst's time after
 * (rd_share_end). Virtual time is start-time fair queueing (stride
 * scheduling) over groups and shares: a share's virtual time advances by
 * its bursts' seconds divided by its effective weight, group_weight / (the
 * group's shares that are busy on this pool), so a group (a tenant) gets
 * its weight's part of the device and its busy shares split that equally.
 *
 * A burst starts when no waiting share is before it in virtual time, its
 * units fit beside the other shares' running bursts, and it is not more
 * than RD_SHARE_QUANTUM_S ahead of a busy share behind it, by the pool's
 * policy. The last rule is for pipelines: their threads hand work to each
 * other, so between two bursts a pipeline asks for nothing for a moment,
 * and a rule that looked only at waiting shares would give its units to
 * the others in every such gap (work-conserving, and blind to weights).
 *
 *  - Strict (the default): a share ahead waits while the one behind is
 *    busy at all (running, waiting, or between two bursts: within
 *    handoff_s of its last one and not out of work, rd_share_idle). Weights
 *    hold even where the device is not the bottleneck, and a share that
 *    cannot use its part (a pipeline whose steps follow one another, bound
 *    by its hand-over latency) holds the others to its pace: the device
 *    idles meanwhile.
 *  - Work-conserving (rd_share_pool_set_conserving): the share behind keeps
 *    only its width (its widest burst) free, and only while it is in a
 *    short gap between two bursts (RD_SHARE_GAP_FRACTION of its mean burst,
 *    handoff_s at most). Units it does not use while it runs, or after such
 *    a gap, go to the others, and its credit beyond RD_SHARE_LAG_S passes
 *    on: a share gets its weight's part where it can use it, all it can use
 *    otherwise (first whenever it asks), and the rest goes to the others.
 *    Weights then hold as far as the pool's units are the bottleneck: a
 *    pipeline that waits mostly on something else (hand-overs between its
 *    threads, the OS's run queue) gets what it can take, not its weight.
 *
 * A share that was idle (RD_SHARE_IDLE_S without a burst) comes back at
 * the busiest share's virtual time (no credit for sleeping): alone, a
 * learner has the whole device; when a second arrives the first yields
 * part of it at its next step, without a restart.
 *
 * Capacity: the CPU pool's is the CPUs this process may run on; a
 * learner's step takes its threads (at most the capacity), a sampler's
 * burst one, so pipelines that fit the cores side by side never wait, and
 * when they do not, each pipeline's CPU time (both its threads) follows
 * its weight. A GPU's or FPGA's pool has capacity 1: its steps take turns,
 * a share of the device's time.
 *
 * Charged time is wall time of the step, so a step slowed by other
 * threads on its cores costs its share more: what is divided is the
 * device's time as the learners experience it.
 */
#ifndef RD_SHARE_H
#define RD_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "learner_backend.h"

typedef struct rd_share_pool rd_share_pool_t;
typedef struct rd_share rd_share_t;

/* A pool of `capacity` units whose shares count as busy for idle_s
 * seconds after a burst and as between two bursts for handoff_s, unless
 * rd_share_idle says sooner (tests; the daemon's come from
 * rd_share_pool_device, with RD_SHARE_IDLE_S for both). Strict. */
rd_share_pool_t *rd_share_pool_create(uint32_t capacity, double idle_s, double handoff_s);
void rd_share_pool_destroy(rd_share_pool_t *pool);

/* The pool's policy (above): work-conserving, or strict. */
void rd_share_pool_set_conserving(rd_share_pool_t *pool, bool conserving);

/* Tests: the pool reads the time from now(arg) instead of the monotonic
 * clock (a simulated clock for a model driven without threads). Set it
 * before any share joins. */
void rd_share_pool_set_clock(rd_share_pool_t *pool, double (*now)(void *arg), void *arg);

/* The process's pool of a device: kind's ordinal `device` (created at first
 * use, lives for the process). NULL when out of memory. */
rd_share_pool_t *rd_share_pool_device(rd_learner_kind_t kind, uint32_t device);

/* Join pool in group (an opaque key: the owner tenant; NULL is a group of
 * its own) of weight group_weight (>= 1; the group's weight, the same for
 * every share of it). NULL when out of memory. */
rd_share_t *rd_share_join(rd_share_pool_t *pool, const void *group, uint32_t group_weight);
void rd_share_leave(rd_share_t *s);

/* Set group's weight in every pool (a tenant's weight changed). */
void rd_share_set_group_weight(rd_share_pool_t *pool, const void *group, uint32_t weight);
void rd_share_set_group_weight_all(const void *group, uint32_t weight);

/* Wait for a turn of `units` (clamped to [1, capacity]); then do the
 * work and report its seconds with the same units. A share's threads may
 * hold turns at once. */
void rd_share_begin(rd_share_t *s, uint32_t units);
void rd_share_end(rd_share_t *s, uint32_t units, double seconds);

/* rd_share_begin's two halves, without waiting (a model of the pool driven
 * without threads): rd_share_ask queues an ask of s as a thread entering
 * rd_share_begin does; rd_share_try_start starts one queued ask if the
 * rule allows it now (true; then rd_share_end as usual) or leaves it queued
 * (false). */
void rd_share_ask(rd_share_t *s, uint32_t units);
bool rd_share_try_start(rd_share_t *s, uint32_t units);

/* When, on the pool's clock, the rule may next let a queued ask start with
 * no call in between (a gap kept for a share ends), or INFINITY. */
double rd_share_pool_next_change(rd_share_pool_t *pool);

/* The share the pool would start next if every share asked now (the
 * smallest virtual time, earliest joined first among equals), or NULL for
 * an empty pool: the rule rd_share_begin applies, for tests that drive a
 * pool without threads. */
rd_share_t *rd_share_pick(rd_share_pool_t *pool);

/* The pool s joined (tests). */
rd_share_pool_t *rd_share_pool_of(const rd_share_t *s);

/* Seconds charged to s so far, and its virtual time (tests, describe). */
double rd_share_charged(const rd_share_t *s);
double rd_share_vtime(const rd_share_t *s);

/* A share counts as busy for this long after its last step ends: between
 * two steps of a training learner there is a short gap, which must not
 * make its group's other shares look alone. */
#define RD_SHARE_IDLE_S 0.02

/* How far (in virtual seconds) a share may run ahead of a busy share
 * behind it before the policy's rule holds it: the slack that lets a
 * pipeline's threads hand work to each other. */
#define RD_SHARE_QUANTUM_S 0.01

/* Work-conserving: a gap kept for a share is at most this fraction of its
 * mean burst (so keeping it idles a unit for at most a fifth of the time). */
#define RD_SHARE_GAP_FRACTION 0.25

/* The most virtual time a share is owed behind the busy others. */
#define RD_SHARE_LAG_S (2 * RD_SHARE_QUANTUM_S)

/* The pipeline has no work left (its request is done, or continuous
 * training waits for inserts): until its next burst s holds nobody back. It stays busy for the group split and keeps its virtual time
 * for RD_SHARE_IDLE_S (a TrainStep that follows within a round trip loses
 * no place); after that it is idle and comes back with no credit. */
void rd_share_idle(rd_share_t *s);

#endif
