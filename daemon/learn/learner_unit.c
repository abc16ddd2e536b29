/* learner_unit.c - the pipeline's learner thread, weight publication and
 * the fallback to the CPU learner (learner_unit.h). */
#define _GNU_SOURCE /* sched_getcpu */
#include "learner_unit.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "devices.h"
#include "learner_bind.h"
#include "log.h"
#include "rd_clock.h"
#include "sampler_unit.h"
#include "share.h"

/* The learner's device failed (learner_backend.h: a fault): log, give the
 * device up if the fault says it is broken, and go on with the CPU
 * learner, which loads the last published policy if there is one. Only
 * the thread that owns p->learner calls this (create, then the learner
 * thread). RD_OK if the CPU learner runs now. */
static int fall_back(rd_pipeline_t *p, const char *why, int at_init, rd_error_t *err) {
  const rd_learner_ops_t *failed = p->learner.ops;
  rd_learner_kind_t kind = failed ? failed->kind : p->cfg.learner_kind;
  uint32_t dev = p->learner.ops ? p->learner.device : p->cfg.learner_device;
  rd_log_error("pipeline", "%s learner on %s%u failed %s: %s; continuing on the CPU learner",
               failed ? failed->name : rd_learner_kind_name(kind), rd_learner_kind_name(kind),
               dev, at_init ? "at init" : "while training", why);
  if (kind != RD_LEARNER_ON_CPU && rd_learner_fault_gives_up_device(p->learner.fault))
    rd_devices_mark_unusable(rd_learner_kind_name(kind), dev, why);
  rd_learner_backend_destroy(&p->learner);
  rd_error_t lerr;
  rd_error_clear(&lerr);
  const uint64_t version = rd_weights_buf_version(&p->weights);
  int rc = rd_learner_backend_init(&p->learner, &rd_learner_ops_cpu, &p->cfg.learner, 0, &lerr);
  if (rc == RD_OK && version > 0) {
    /* The last published policy, from the front buffer: only this thread
     * flips it, so it does not move under us. */
    rc = rd_learner_ops_cpu.policy_load(&p->learner, rd_weights_buf_front(&p->weights),
                                        p->weights.bytes, &lerr);
    if (rc) rd_learner_backend_destroy(&p->learner);
  }
  pthread_mutex_lock(&p->mu);
  p->linfo.fell_back = 1;
  p->linfo.at_init = at_init;
  snprintf(p->linfo.reason, sizeof p->linfo.reason, "%s", why);
  if (rc == RD_OK) {
    p->linfo.kind = RD_LEARNER_ON_CPU;
    p->linfo.device = 0;
    snprintf(p->linfo.backend, sizeof p->linfo.backend, "%s", rd_learner_ops_cpu.name);
  } else {
    p->linfo.dead = 1;
  }
  pthread_mutex_unlock(&p->mu);
  if (rc == RD_OK) {
    rd_sampler_unit_lend(p, 1);
    rd_log_info("pipeline", "the CPU learner took over%s", version > 0 ? " from the last "
                "published weights" : " with the same initial weights");
    return RD_OK;
  }
  rd_log_error("pipeline", "no learner: the CPU fallback failed too: %s", lerr.msg);
  return rd_error_set(err, rc, "%s; the CPU learner could not be built either: %s", why,
                      lerr.msg);
}

int rd_learner_unit_init(rd_pipeline_t *p, rd_error_t *err) {
  const rd_pipeline_config_t *c = &p->cfg;
  const rd_learner_ops_t *ops =
      c->learner_ops ? c->learner_ops : rd_learner_ops_for(c->learner_kind);
  p->linfo.requested = ops->kind;
  p->linfo.kind = ops->kind;
  p->linfo.device = ops->kind == RD_LEARNER_ON_CPU ? 0 : c->learner_device;
  snprintf(p->linfo.backend, sizeof p->linfo.backend, "%s", ops->name);
  int rc = rd_learner_backend_init(&p->learner, ops, &c->learner, p->linfo.device, err);
  if (rc && p->learner.fault && ops != &rd_learner_ops_cpu) {
    char why[RD_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err ? err->msg : rd_err_name(rc));
    p->learner.ops = ops; /* for fall_back's log: the backend that failed */
    p->learner.device = p->linfo.device;
    rc = fall_back(p, why, 1, err);
  }
  return rc;
}

void rd_learner_unit_publish(rd_pipeline_t *p) {
  rd_error_t err;
  size_t w = 0;
  if (p->learner.impl == NULL) return; /* no learner (pipeline.h) */
  void *back = rd_weights_buf_back(&p->weights);
  int rc = p->learner.ops->policy_save(&p->learner, back, p->weights.bytes, &w, &err);
  if (rc != RD_OK && p->learner.fault) {
    rd_error_t ferr;
    if (fall_back(p, err.msg, rd_weights_buf_version(&p->weights) == 0, &ferr) != RD_OK) return;
    rc = p->learner.ops->policy_save(&p->learner, back, p->weights.bytes, &w, &err);
  }
  if (rc != RD_OK) {
    /* Non-finite weights: keep serving the last good set. */
    rd_log_warn("pipeline", "weights not published: %s", err.msg);
    return;
  }
  /* Versions must keep increasing across a crash (pipeline.h
   * "Checkpoints"): a block of them is made durable before the first is
   * published. A failure is logged once; publication goes on. */
  uint64_t next = rd_weights_buf_version(&p->weights) + 1;
  if (p->cfg.reserve_versions != NULL && next > p->version_limit) {
    uint64_t limit = next + RD_PIPELINE_VERSION_BLOCK - 1;
    rd_error_t rerr;
    rd_error_clear(&rerr);
    if (p->cfg.reserve_versions(p->cfg.reserve_arg, limit, &rerr) != RD_OK) {
      if (!p->reserve_failed)
        rd_log_error("pipeline", "weight versions up to %llu could not be made durable (%s): "
                     "after a crash, versions may repeat", (unsigned long long)limit, rerr.msg);
      p->reserve_failed = 1;
    } else {
      p->reserve_failed = 0;
    }
    p->version_limit = limit;
  }
  uint64_t v = rd_weights_buf_flip(&p->weights);
  pthread_mutex_lock(&p->mu);
  p->stats.weight_version = v;
  pthread_mutex_unlock(&p->mu);
  p->last_publish = rd_clock_now();
}

/* Touch every cache line of the learner's inputs in batch view b and of
 * slot s's outputs (a hint only: prefetches never fault and change
 * nothing). At most 256 KiB, so a huge batch does not flush what the
 * current step is using. */
static void prefetch_batch(const rd_pipeline_t *p, const rd_batch_t *b,
                           const rd_batch_slot_t *s) {
  const rd_pipeline_config_t *c = &p->cfg;
  const void *bufs[6] = {b->obs, b->next_obs, b->reward,
                         c->learner.algo == RD_ALGO_DQN ? (const void *)b->action_i
                                                        : (const void *)b->action_f,
                         b->discount, b->weights};
  size_t sizes[6], budget = 256u << 10;
  rd_learner_bind_input_bytes(c, b->n, sizes);
  for (size_t k = 0; k < 6 && budget > 0; k++) {
    size_t len = sizes[k] < budget ? sizes[k] : budget;
    for (size_t off = 0; off < len; off += 64) __builtin_prefetch((const char *)bufs[k] + off);
    budget -= len;
  }
  /* The outputs: the sampler read them last (the previous use of this slot). */
  size_t len = c->batch * sizeof(float) < budget ? c->batch * sizeof(float) : budget;
  for (size_t off = 0; off < len; off += 64) __builtin_prefetch((const char *)s->td + off, 1);
  __builtin_prefetch(&s->st, 1);
}

/* Under mu: a failure the request cannot go on from. */
static void stop_request_unlocked(rd_pipeline_t *p, const char *why) {
  char m[sizeof p->req.msg];
  snprintf(m, sizeof m, "%.190s", why);
  pthread_mutex_lock(&p->mu);
  rd_pl_request_stop(p, RD_EINTERNAL, m);
  pthread_mutex_unlock(&p->mu);
}

/* One train-step on slot s (no lock held). Returns the step's seconds;
 * s->trained says whether it counts. A device fault falls back to the CPU
 * learner; no learner at all stops the request. */
static double train_one(rd_pipeline_t *p, rd_batch_slot_t *s, const rd_batch_slot_t *next) {
  const rd_pipeline_config_t *c = &p->cfg;
  rd_batch_t b;
  rd_learner_bind_batch(c, c->batch, s->cols, s->discount, s->w, &b);
  if (c->batch_hook) c->batch_hook(c->hook_arg, s->keys, &b);
  /* The next batch was gathered on the sampler's core: start pulling it
   * into this core's cache now, while this step runs. */
  if (next != NULL) {
    rd_batch_t nb;
    rd_learner_bind_batch(c, c->batch, next->cols, next->discount, next->w, &nb);
    prefetch_batch(p, &nb, next);
  }
  int rc;
  rd_error_t err;
  /* Its turn on the device it shares with other workloads (share.h). */
  if (p->share != NULL) rd_share_begin(p->share, c->learner.threads);
  double t = rd_clock_now();
  if (p->learner.impl != NULL) {
    rc = p->learner.ops->step(&p->learner, &b, s->td, &s->st, &err);
  } else {
    rc = rd_error_set(&err, RD_EINTERNAL, "this workload has no learner: %.200s",
                      p->linfo.reason);
  }
  t = rd_clock_now() - t;
  if (p->share != NULL) rd_share_end(p->share, c->learner.threads, t);
  atomic_store_explicit(&p->cpu_learner, sched_getcpu(), memory_order_relaxed);
  s->trained = rc == RD_OK;
  if (rc != RD_OK && p->learner.impl != NULL && p->learner.fault) {
    /* The device failed: the batch is skipped, the CPU takes over. */
    rd_error_t ferr;
    if (fall_back(p, err.msg, 0, &ferr) != RD_OK) stop_request_unlocked(p, ferr.msg);
  } else if (rc != RD_OK && rc != RD_ERANGE && p->learner.impl != NULL) {
    rd_log_warn("pipeline", "train step refused its batch: %s", err.msg);
  } else if (p->learner.impl == NULL) {
    stop_request_unlocked(p, err.msg);
  }
  return t;
}

/* Under mu: count a step that ran (trained or skipped) into the stats and
 * the request. */
static void count_step(rd_pipeline_t *p, const rd_batch_slot_t *s, double t_step) {
  if (s->trained) {
    p->stats.steps++;
    p->stats.loss = s->st.loss;
    rd_pl_ewma(&p->step_s, t_step);
    if (p->req.active) rd_train_req_trained(&p->req, &s->st, p->cfg.batch);
  } else {
    p->stats.skipped_steps++;
    if (p->req.active) rd_train_req_skipped(&p->req);
  }
  /* Continuous mode: steps per second over windows of >= 1 s. */
  double t = rd_clock_now();
  if (!p->req.active && t - p->window_start >= 1.0) {
    p->stats.steps_per_second =
        (double)(p->stats.steps - p->window_steps) / (t - p->window_start);
    p->window_start = t;
    p->window_steps = p->stats.steps;
  }
}

void rd_pl_run_call(rd_pipeline_t *p) {
  if (!p->lcall.pending) return;
  p->lcall.pending = 0;
  pthread_mutex_unlock(&p->mu);
  int rc = p->lcall.fn(p, p->lcall.arg, p->lcall.err);
  pthread_mutex_lock(&p->mu);
  p->lcall.rc = rc;
  p->lcall.done = 1;
  pthread_cond_broadcast(&p->cv_call);
}

void *rd_learner_unit_main(void *arg) {
  rd_pipeline_t *p = arg;
  int dirty = 0; /* steps trained since the last publication */
  int spun = 0;  /* the wait stage (rd_spin_wait_stage) since the last batch */
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && rd_ring_len(&p->q_train) == 0) {
      if (p->lcall.pending) { /* a checkpoint's save or load, between steps */
        rd_pl_run_call(p);
        continue;
      }
      if (dirty) { /* idle: let actors see the newest weights */
        dirty = 0;
        pthread_mutex_unlock(&p->mu);
        rd_learner_unit_publish(p);
        pthread_mutex_lock(&p->mu);
        continue;
      }
      /* A batch is on its way (being sampled, or the sampler is writing
       * the last step's priorities and will sample next): in the strict
       * loop, wait for about the sampler's time first by rd_spin_wait_stage
       * (stages as the sampler's, sampler_unit.c). */
      if ((p->sampling > 0 || rd_pl_wants_more(p)) &&
          rd_spin_wait_stage(&p->cv_learner, &p->mu, &p->ev_learner, p->produce_s, &spun, NULL))
        continue;
      pthread_cond_wait(&p->cv_learner, &p->mu);
    }
    rd_pl_run_call(p);
    if (p->stopping) break;
    spun = 0;
    if (p->idle_gap) {
      /* The pipeline idled since the last step: that wait is not the
       * learner's time (its thread tuning leaves it out). */
      p->idle_gap = 0;
      if (p->learner.impl != NULL && p->learner.ops->pause != NULL)
        p->learner.ops->pause(&p->learner);
    }
    uint32_t si = rd_pl_pop(&p->q_train), ni = 0;
    rd_batch_slot_t *s = &p->slots[si];
    const rd_batch_slot_t *next = rd_ring_peek(&p->q_train, &ni) == RD_OK ? &p->slots[ni] : NULL;
    int drop = 0;
    if (p->req.active) {
      if (p->req.stop) {
        drop = 1;
      } else if (rd_train_req_expired(&p->req, rd_clock_now())) {
        rd_pl_request_stop(p, RD_ETIMEDOUT, "the deadline passed");
        drop = 1;
      }
    }
    int last_of_request = !drop && rd_train_req_next_is_last(&p->req);
    pthread_mutex_unlock(&p->mu);

    double t_step = 0;
    if (!drop) {
      t_step = train_one(p, s, next);
      if (s->trained) {
        dirty = 1;
        if (last_of_request ||
            rd_clock_now() - p->last_publish >= RD_PIPELINE_PUBLISH_MS * 1e-3) {
          rd_learner_unit_publish(p);
          dirty = 0;
        }
      }
    }

    pthread_mutex_lock(&p->mu);
    if (!drop) count_step(p, s, t_step);
    rd_pl_push(&p->q_update, si);
    if (rd_sampler_unit_wanted(p)) rd_pl_wake_sampler(p);
  }
  rd_pl_run_call(p); /* one that came with the stop */
  pthread_mutex_unlock(&p->mu);
  return NULL;
}
