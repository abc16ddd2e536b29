/* pipeline.h - the hosted learner of one workload: sampler, storage and
 * learner units on two threads (sampler and storage share one, the
 * learner has the other), joined by bounded queues of batch slots.
 *
 * papers/001 §V (Fig. 7, Table II): the sampler unit owns the sum tree (it
 * samples index batches and applies priority updates), the storage unit
 * gathers the sampled rows, the learner unit runs the train-step
 * (backends/cpu/learner.h). A batch travels through a fixed pool of slots:
 *
 *   free -> [sampler: sample + gather] -> gathered -> [learner: train]
 *        -> trained -> [sampler: update priorities] -> free
 *
 * Relaxed dependency (§V-A). At most D + 1 batches are between sampling and
 * their priority update. D = 0 is the strict loop: the next batch is
 * sampled only after the previous batch's priorities are written. With
 * D > 0 the sampler runs up to D batches ahead of the learner and their
 * updates land late (the paper found D = 50 harmless; late_updates counts
 * updates that landed after a newer batch had been sampled).
 *
 * Inserts (thesis 004 §4.2.2, "replay-collision-free"). The sampler
 * gathers a batch in the same hold of the table lock that sampled it
 * (sampler_unit.h), so a batch always holds the rows its keys named, and an
 * insert never waits for training. A priority update for a key whose slot
 * has since been overwritten is dropped as stale by the key's generation
 * (table.h), never applied to the new row.
 *
 * Work comes from TrainStep requests (one at a time, train_request.h) or,
 * in continuous mode, from the table's rate limiter (the workload's,
 * core/rate_limiter.h, reached through config.limiter_take): the sampler
 * samples as many batches as it lets through, the same limiter, and the
 * same ratio, that remote samplers of the table go through. An insert (or
 * a change of the limiter) wakes a sampler the limiter held back. A
 * TrainStep's batches are counted by the limiter but not held back.
 *
 * Weights (weights_buf.h, double-buffered). Version 1 is the initial
 * weights; each publication adds one. The learner publishes at the end of
 * every TrainStep request, when it runs out of batches, and, while
 * training, at most every RD_PIPELINE_PUBLISH_MS.
 *
 * Learner backends (learner_backend.h). The learner unit trains through
 * the backend config.learner_kind names (the CPU by default). When that
 * backend fails with a fault (not a bad config or batch):
 *  - at create: the error is logged, the device is marked unusable in the
 *    device list (rd_devices_mark_unusable) unless the fault is only a
 *    config beyond the device's build (RD_LEARNER_FAULT_UNSUPPORTED), and
 *    the CPU learner is built from the same config and seed, so it starts
 *    from the same initial weights; create succeeds;
 *  - during a step or a weight publication: the same, and the CPU learner
 *    then loads the last published policy (weights version v) into its
 *    policy network and that network's target. What the device had changed
 *    since version v, the target networks' own values, DDPG's critic (which
 *    is never published: it restarts from its seed initialisation) and the
 *    Adam moments are lost. The failed step's batch counts as skipped and
 *    its priorities are not written; training goes on from the next batch.
 *    If the CPU learner cannot be built either (out of memory), the
 *    pipeline stops training: batches are dropped and a TrainStep request
 *    ends RD_EINTERNAL; weights stay at the last published version.
 * rd_pipeline_learner_info says what runs and why.
 *
 * Locks: the caller's table lock (the workload's mutex) guards the table;
 * the pipeline's own mutex guards its queues and counters. Order: table
 * lock, then pipeline mutex. No callback runs under either.
 *
 * The files: pipeline.c (this API), sampler_unit.c, learner_unit.c,
 * train_request.c, weights_buf.c, batch_slots.c, learner_bind.c
 * (rd_pipeline_bind_schema); pipeline_internal.h joins them.
 */
#ifndef RD_PIPELINE_H
#define RD_PIPELINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cores.h"
#include "learner.h"
#include "learner_backend.h"
#include "rd_error.h"
#include "table.h"

#define RD_PIPELINE_MAX_DEPTH 256
#define RD_PIPELINE_PUBLISH_MS 10
#define RD_PIPELINE_MAX_STEPS 65536u /* per TrainStep request */
#define RD_PIPELINE_VERSION_BLOCK 65536u /* weight versions reserved at a time */

typedef struct {
  rd_learner_config_t learner;
  uint32_t batch;             /* items per step, 1..learner.max_batch */
  uint32_t depth;             /* D, 0..RD_PIPELINE_MAX_DEPTH */
  double beta;                /* IS exponent */
  uint32_t min_size;          /* items before training, >= batch */
  double samples_per_insert;  /* > 0: continuous mode (the limiter has the ratio) */
  /* Schema field indices the learner reads (-1: absent). */
  int f_obs, f_action, f_reward, f_next_obs, f_discount, f_done;
  float gamma;                /* with f_done: discount = gamma * (1 - done) */
  /* Where the learner runs (learner_backend.h): RD_LEARNER_ON_CPU (what a
   * zeroed config says) or RD_LEARNER_ON_GPU on CUDA ordinal learner_device.
   * See "Learner backends" above for what happens when the GPU fails. */
  rd_learner_kind_t learner_kind;
  uint32_t learner_device;
  /* This backend instead of learner_kind's (NULL: learner_kind's): the
   * placement's (the XRT learner on an FPGA board, placement.h), or a
   * test's. */
  const rd_learner_ops_t *learner_ops;
  /* The CPUs each thread runs on (cores.h; zeroed: unpinned). The
   * learner's OpenMP team forms on its thread, so it inherits
   * learner_pin. A pin the kernel refuses (a CPU gone offline) is logged
   * and that thread runs unpinned: pinning is for speed and for the
   * prediction, never a reason not to train. */
  rd_pin_t learner_pin, sampler_pin;
  /* Its share of the learner's device (share.h): share_group non-NULL
   * joins the device's pool in that group (the owner tenant) with the
   * group's weight share_weight, and every train-step then waits for its
   * turn; NULL (tests, the profiler) trains unscheduled. */
  const void *share_group;
  uint32_t share_weight;
  bool share_conserving; /* the device pool's policy: work-conserving (share.h) */
  /* Tests: called on the learner thread with each batch before its step. */
  void (*batch_hook)(void *arg, const uint64_t *keys, const rd_batch_t *b);
  void *hook_arg;
  /* Called with the table's lock held when a table call fails with
   * RD_EINTERNAL (the device under its replay module or storage failed,
   * table.h): returns 1 when the table runs on the CPU now and the call may
   * be made again. NULL: the failure stands (the batch is skipped). */
  int (*table_fault)(void *arg, const rd_error_t *why);
  void *table_fault_arg;
  /* Make durable that weight versions up to `upto` may be published
   * ("Checkpoints" below); called on the learner thread (or create) before
   * the first version above the last block. NULL: versions are not kept. */
  int (*reserve_versions)(void *arg, uint64_t upto, rd_error_t *err);
  void *reserve_arg;
  /* The table's rate limiter, called with the table lock held before each
   * burst samples: limiter_take returns how many batches of `batch` items
   * (at most want) may be sampled now and counts them as sampled (gated =
   * 0: all of them, counted: a TrainStep's); limiter_give_back uncounts n
   * batches taken but not sampled. NULL: nothing is counted; continuous
   * mode needs them. */
  uint32_t (*limiter_take)(void *arg, uint32_t batch, uint32_t want, int gated);
  void (*limiter_give_back)(void *arg, uint32_t batch, uint32_t n);
  void *limiter_arg;
} rd_pipeline_config_t;

typedef struct {
  uint32_t steps_done;
  uint32_t skipped_steps;
  double loss_mean;
  double td_abs_mean, td_abs_max;
  uint64_t weight_version;
  double steps_per_second;
  int status;        /* RD_OK, RD_ETIMEDOUT (deadline), RD_ECANCELED (stopped) */
  char message[200]; /* why, when status != RD_OK */
} rd_train_result_t;

typedef struct {
  uint64_t steps, skipped_steps, late_updates, weight_version;
  double loss, steps_per_second;
  uint64_t stale_updates; /* priority updates dropped: slot overwritten */
  /* Batches the learner's team workers sampled or wrote the priorities of
   * in their idle time (sampler_unit.h "Helpers"); the rest the sampler
   * thread did. */
  uint64_t helped_samples, helped_updates;
} rd_pipeline_stats_t;

/* The learner backend a pipeline runs on now. */
typedef struct {
  rd_learner_kind_t requested; /* what the config asked for */
  rd_learner_kind_t kind;      /* what runs now */
  uint32_t device;             /* its ordinal among its kind */
  char backend[16];            /* the backend's name: "cpu", "gpu" */
  int fell_back;               /* 1: the requested device failed; the CPU learner runs */
  int at_init;                 /* fell back at create (1) or while training (0) */
  int dead;                    /* even the CPU learner could not be built: no training */
  char reason[RD_ERROR_MSG_MAX]; /* the device's error, when fell_back */
} rd_pipeline_learner_info_t;

/* Where a pipeline's threads run: their pins as configured and as
 * applied, and the CPU each was last seen on (sched_getcpu after each
 * step, or each sampled burst; -1 before the first). */
typedef struct {
  rd_pin_t learner_pin, sampler_pin; /* as applied: zeroed where refused */
  int learner_pin_refused, sampler_pin_refused;
  int learner_cpu, sampler_cpu;
} rd_pipeline_cpus_t;

/* Called from a pipeline thread when a TrainStep request ends (done,
 * deadline, or stop). No pipeline or table lock is held. */
typedef void (*rd_train_done_cb)(void *arg, const rd_train_result_t *res);

typedef struct rd_pipeline rd_pipeline_t;

/* (learner_bind.c) Find the learner's fields (obs, action, reward,
 * next_obs, discount or done) in schema by name, check their types and
 * shapes against c's algorithm, and set c's field indices,
 * learner.obs_dim and, for DDPG, learner.action_dim. RD_EINVAL names the
 * field and what it should be. */
int rd_pipeline_bind_schema(rd_pipeline_config_t *c, const rd_schema_t *schema, rd_error_t *err);

/* Bytes the pipeline holds for this config (batch slots, learner), for the
 * server's memory limit; 0 if the config is invalid. */
uint64_t rd_pipeline_memsize(const rd_pipeline_config_t *c, const rd_table_config_t *tc);

/* Validate c against the table's schema, allocate everything, build the
 * learner, publish weights version 1 and start the two threads. The
 * table and its lock must outlive the pipeline. RD_EINVAL, RD_ENOMEM,
 * RD_EINTERNAL (a thread could not start). */
int rd_pipeline_create(rd_pipeline_t **out, const rd_pipeline_config_t *c, rd_table_t *table,
                       pthread_mutex_t *table_lock, rd_error_t *err);

/* Stop training: join the threads and end a pending TrainStep (its
 * callback gets RD_ECANCELED). Idempotent. Afterwards rd_pipeline_train
 * fails with RD_ECANCELED; weights, stats and the insert hooks still work,
 * so callers that hold the workload may keep using it until it is freed. */
void rd_pipeline_stop(rd_pipeline_t *p);

/* Stop, then free everything. */
void rd_pipeline_destroy(rd_pipeline_t *p);

/* Start `steps` gradient steps; cb(arg, result) runs when they are done or
 * deadline_mono (CLOCK_MONOTONIC seconds; <= 0 for none) passes, after the
 * step in progress. Errors (cb not called): RD_EINVAL (steps 0 or above
 * RD_PIPELINE_MAX_STEPS), RD_EBUSY (a request is running, or continuous
 * mode), RD_EEMPTY (fewer than min_size items), RD_ECANCELED (stopping).
 * Takes the table lock briefly: do not call with it held. */
int rd_pipeline_train(rd_pipeline_t *p, uint32_t steps, double deadline_mono, rd_train_done_cb cb,
                      void *arg, rd_error_t *err);

/* rd_pipeline_train, then wait for the request's end and copy its result
 * to *res: for callers with a thread of their own to block (the profile,
 * benchmarks, tests). The same errors, and then *res is untouched. Never
 * call it from a train-done callback or with the table lock held. */
int rd_pipeline_train_wait(rd_pipeline_t *p, uint32_t steps, double deadline_mono,
                           rd_train_result_t *res, rd_error_t *err);

/* Call with the table lock held, before inserting n rows into the table.
 * Nothing to do today (a batch is gathered in the hold that sampled it);
 * kept so that callers follow one insert protocol whatever the sampler
 * does between its lock holds. */
void rd_pipeline_before_insert(rd_pipeline_t *p, size_t n);

/* Call with the table lock still held, after inserting n rows, or with n =
 * 0 after anything else that may let the rate limiter through (its config
 * changed): a sampler the limiter held back looks again. */
void rd_pipeline_after_insert(rd_pipeline_t *p, size_t n);

/* The current policy weights (flat format) if newer than have_version.
 * *version receives the current version; *len the bytes written, 0 when
 * not newer. RD_ETOOBIG if cap is too small (*len = bytes needed). */
int rd_pipeline_weights(rd_pipeline_t *p, uint64_t have_version, void *buf, size_t cap,
                        uint64_t *version, size_t *len, rd_error_t *err);
size_t rd_pipeline_weights_bytes(const rd_pipeline_t *p);

void rd_pipeline_stats(rd_pipeline_t *p, rd_pipeline_stats_t *out);

/* The batches between the pipeline's units now (thread-safe; metrics):
 * gathered ones waiting for the learner, trained ones waiting for their
 * priority update, and all that are sampled and not yet updated. */
typedef struct {
  uint32_t to_train, to_update;
  uint64_t in_flight;
} rd_pipeline_queues_t;
void rd_pipeline_queues(rd_pipeline_t *p, rd_pipeline_queues_t *out);

/* Which learner backend runs, and whether it fell back (thread-safe). */
void rd_pipeline_learner_info(rd_pipeline_t *p, rd_pipeline_learner_info_t *out);

/* Its device shares (share.h; NULL: unscheduled): the learner's steps', in
 * the learner device's pool, and the sampler's bursts', in the pool of the
 * device its table's replay module or storage runs on (a GPU's, else the
 * CPU's; the same share when that is the learner's device). */
struct rd_share;
void rd_pipeline_shares(rd_pipeline_t *p, struct rd_share **learner, struct rd_share **sampler);

/* Where its threads run (rd_pipeline_cpus_t). Thread-safe. */
void rd_pipeline_cpus(rd_pipeline_t *p, rd_pipeline_cpus_t *out);

/* The learner's config (constant after create). */
const rd_learner_config_t *rd_pipeline_learner_config(const rd_pipeline_t *p);
/* The whole configuration it was created with (constant for its life). */
const rd_pipeline_config_t *rd_pipeline_config(const rd_pipeline_t *p);

/* 1 if the workload trains continuously (samples_per_insert > 0). */
int rd_pipeline_continuous(const rd_pipeline_t *p);

/* ---- Checkpoints (daemon/core/durable.h) ----
 *
 * The learner's state is saved and loaded on the learner thread, between
 * two steps (the call waits for the step in progress), so training goes on
 * around it and the table lock is not taken. What is saved: the counters
 * (steps, skipped steps, late updates, loss, the weight version, continuous
 * mode's insert count) and the published policy (the CPU copy of the
 * weights, which every backend has), and, from a backend with state ops
 * (every backend here: CPU, FPGA C-simulation, XRT, GPU), its whole
 * training state: every network, the target networks, Adam moments and
 * step counts, in the CPU learner's format (learner_backend.h). A full
 * state restores into a backend with state ops; into one without (a
 * test's), its policy is used (policy_load).
 *
 * Weight versions never go back, so that an actor polling GetWeights with
 * the version it has never misses newer weights: a restore publishes the
 * loaded weights as version floor + 1, where the floor is at least the
 * saved version and every version reserved before (reserve_versions: the
 * pipeline makes each block of RD_PIPELINE_VERSION_BLOCK versions durable
 * before it publishes the first of them, so a version seen by an actor
 * before a crash is never above the floor). */

/* Bytes rd_pipeline_state_save may write (an upper bound). */
size_t rd_pipeline_state_bytes(rd_pipeline_t *p);

/* The learner's state and counters into buf (on the learner thread; waits
 * for the step in progress). *len receives the bytes written, *full (may be
 * NULL) 1 if the whole training state is in it, 0 for the policy only.
 * RD_ETOOBIG (cap), RD_EINVAL (non-finite weights: nothing to save). */
int rd_pipeline_state_save(rd_pipeline_t *p, void *buf, size_t cap, size_t *len, int *full,
                           rd_error_t *err);

/* Check a saved state against this pipeline (its learner's algorithm and
 * shapes) without loading it. RD_EINVAL naming what differs. */
int rd_pipeline_state_check(rd_pipeline_t *p, const void *buf, size_t len, rd_error_t *err);

/* Load a saved state (on the learner thread): the learner's state (or its
 * policy, above), the counters, and publish the weights as version
 * max(saved version, version_floor) + 1. Call before training resumes: the
 * continuous-mode budget restarts from the saved insert count with no
 * steps owed. On error nothing changed. *policy_only (may be NULL) is set
 * when only the policy could be loaded. */
int rd_pipeline_state_load(rd_pipeline_t *p, const void *buf, size_t len, uint64_t version_floor,
                           int *policy_only, rd_error_t *err);

/* Publish the current weights as version max(version, floor) + 1 (a
 * restored workload whose learner starts afresh keeps counting up). */
int rd_pipeline_version_floor(rd_pipeline_t *p, uint64_t floor, rd_error_t *err);

/* Move the learner to another device, live (issue 24's re-mapping): on
 * the learner thread between two steps, build ops' backend on `device`,
 * move the whole training state into it (the old backend's state_save,
 * the new one's state_load: every network, target, Adam moments and step
 * count, exactly), then drop the old one. Batches sampled meanwhile wait
 * in their queue and are trained by the new backend; the counters and the
 * weight version carry on. A backend without state ops cannot move
 * without loss: RD_ESTATE, nothing changed (the GPU learner). Errors of
 * the new backend's init or load (RD_EINVAL, RD_ENOMEM) change nothing. */
int rd_pipeline_move_learner(rd_pipeline_t *p, const rd_learner_ops_t *ops, uint32_t device,
                             rd_error_t *err);

/* Block until no batch is in flight and no work is scheduled (tests and
 * benchmarks: wait for continuous mode to catch up). timeout_s <= 0 waits
 * forever. Returns 1 when idle, 0 on timeout. */
int rd_pipeline_wait_idle(rd_pipeline_t *p, double timeout_s);

#endif
