/* pipeline_internal.h - the state the pipeline's files share; not for
 * callers outside daemon/learn (they use pipeline.h).
 *
 * Who owns what:
 *  - the table lock (the caller's workload mutex): the table;
 *  - mu: the queues, the work counters, the request, stats and linfo;
 *    every change another thread must see is made under it, and the
 *    partner is woken with wake_sampler / wake_learner;
 *  - whoever set bursting (under mu): the burst arrays; the sampler
 *    thread or a learner worker helping it (sampler_unit.h "Helpers");
 *  - the learner thread alone (create before it starts): the learner
 *    backend, last_publish, the writer side of weights.
 * Lock order: table lock, then mu. No callback runs under either.
 *
 * The files: pipeline.c (life cycle, config, inserts, queries),
 * sampler_unit.c (the sampler thread), learner_unit.c (the learner
 * thread, publication, device fallback), train_request.c (TrainStep
 * requests), batch_slots.c, weights_buf.c, learner_bind.c.
 */
#ifndef RD_PIPELINE_INTERNAL_H
#define RD_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "batch_slots.h"
#include "learner_backend.h"
#include "pipeline.h"
#include "rd_ring.h"
#include "rd_spin.h"
#include "train_request.h"
#include "weights_buf.h"

struct rd_pipeline {
  rd_pipeline_config_t cfg;
  struct rd_share *share; /* share.h; NULL: unscheduled. Constant after create */
  /* The sampler's bursts' share: of the device its table's replay module
   * or storage runs on (a GPU's), else the CPU's; share itself when that
   * is the learner's device too. NULL with share. Constant after create. */
  struct rd_share *sampler_share;
  rd_table_t *table;
  pthread_mutex_t *table_lock;
  uint32_t n_slots;
  rd_batch_slot_t *slots;

  pthread_mutex_t mu;
  pthread_cond_t cv_sampler, cv_learner, cv_idle;
  /* Bumped (under mu) with every wake-up of each thread, so a thread that
   * expects its partner soon can spin on it before it sleeps (rd_spin.h). */
  _Atomic uint64_t ev_sampler, ev_learner;
  /* Slot indices: free -> (sampling) -> q_train -> (training) -> q_update
   * -> free. Each ring holds every slot, so a push cannot fail. */
  rd_ring_t q_free, q_train, q_update;
  int stopping;

  /* Work, under mu. */
  uint64_t target;    /* steps to sample in total (requests; continuous: all) */
  uint64_t sampled;   /* batches sampled */
  uint64_t in_flight; /* sampled, not yet updated or dropped */
  uint64_t seq;       /* last sample's sequence number */
  uint32_t sampling;  /* batches the running burst is sampling and gathering */
  int bursting;       /* a burst runs (the sampler thread's or a helper's) */
  int sampler_waits;  /* the sampler thread waits for a helper's burst to end */
  int helped;         /* a helper ran a burst since the sampler thread last slept */
  double t_update;    /* seconds per batch of the last priority update */
  int idle_gap;       /* work arrived after the pipeline idled (learner_unit.c) */
  int limited;        /* the rate limiter held the sampler back; an insert clears it */
  uint64_t insert_seq; /* inserts (and limiter changes) so far: written under the table lock too */
  int sample_failing; /* logged once until an insert */
  rd_train_req_t req;
  rd_pipeline_stats_t stats;
  double window_start;   /* continuous mode's steps/s window */
  uint64_t window_steps; /* stats.steps at window_start */

  /* Timing both threads read (under mu) to decide how to wait. */
  double step_s;    /* the learner's recent seconds per train-step (moving average) */
  double produce_s; /* the sampler's recent seconds per batch: update, sample, gather */

  /* The running burst's arrays, n_slots each (sampler_unit.c). */
  uint32_t *burst_upd, *burst_smp;
  size_t *burst_stale;
  int *burst_rc;
  uint8_t *burst_flags;

  /* The learner. */
  rd_learner_backend_t learner;     /* learner thread only (create before it starts) */
  rd_pipeline_learner_info_t linfo; /* under mu */
  double last_publish;              /* learner thread only */
  rd_weights_buf_t weights;         /* written by the learner thread only */

  /* A function to run on the learner thread between steps (rd_pl_on_learner:
   * checkpoints save and load the learner there), under mu; call_mu
   * serializes the callers. */
  pthread_mutex_t call_mu;
  pthread_cond_t cv_call;
  struct {
    int (*fn)(rd_pipeline_t *p, void *arg, rd_error_t *err);
    void *arg;
    rd_error_t *err;
    int rc, pending, done;
  } lcall;
  uint64_t version_limit; /* learner thread: versions reserved (reserve_versions) */
  int reserve_failed;     /* learner thread: logged once */

  pthread_t th_sampler, th_learner;
  int started; /* threads started; set to 0 under mu once they are joined */
  /* Where they run (rd_pipeline_cpus): pins as applied (set before the
   * threads start, then read-only), last CPUs seen (each by its thread). */
  rd_pin_t pin_learner, pin_sampler;
  int pin_learner_refused, pin_sampler_refused;
  _Atomic int cpu_learner, cpu_sampler;
};

/* Under mu, after the state change the thread is to see. */
static inline void rd_pl_wake_sampler(rd_pipeline_t *p) {
  rd_spin_bump(&p->ev_sampler);
  pthread_cond_signal(&p->cv_sampler);
}

static inline void rd_pl_wake_learner(rd_pipeline_t *p) {
  rd_spin_bump(&p->ev_learner);
  pthread_cond_signal(&p->cv_learner);
}

/* Under mu: the sampler has batches to sample (a request's, or continuous
 * mode's while the limiter lets it). */
static inline int rd_pl_wants_more(const rd_pipeline_t *p) {
  return p->sampled < p->target && !p->limited && !p->sample_failing;
}

/* Under mu. A slot goes to a queue; cannot fail (every ring holds all). */
static inline void rd_pl_push(rd_ring_t *q, uint32_t si) { (void)rd_ring_push(q, si); }

/* Under mu, the caller having seen q non-empty. */
static inline uint32_t rd_pl_pop(rd_ring_t *q) {
  uint32_t si = 0;
  (void)rd_ring_pop(q, &si);
  return si;
}

/* A moving average of seconds: each new value weighs 1/8. */
static inline void rd_pl_ewma(double *avg, double x) {
  *avg = *avg > 0 ? 0.875 * *avg + 0.125 * x : x;
}

/* learner_unit.c, under mu, on the learner thread: run a pending
 * rd_pl_on_learner call (mu is released while it runs). */
void rd_pl_run_call(rd_pipeline_t *p);

/* train_request.c, under mu: stop sampling for the request (deadline,
 * error); if it is over and nothing is in flight, end it and return its
 * callback (run it after unlocking). */
void rd_pl_request_stop(rd_pipeline_t *p, int status, const char *msg);
rd_train_done_cb rd_pl_request_take_done(rd_pipeline_t *p, rd_train_result_t *res, void **arg);

#endif
