/* pipeline.c - sampler, storage and learner units of one hosted workload.
 *
 * The contract (batch slots, relaxation depth D, collision-free inserts,
 * double-buffered weights, lock order) is in pipeline.h; this file is the
 * two thread loops (the sampler and storage units share one thread, the
 * learner has the other) and the bookkeeping between them. Every counter
 * that more than one thread touches is under p->mu; the table, the pin list
 * and each slot's `gathered` flag are under the table lock.
 */
#define _GNU_SOURCE /* sched_getcpu */
#include "pipeline.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "log.h"
#include "rd_spin.h"

typedef struct {
  uint64_t *keys;
  double *prob;
  double *w64;      /* IS weights as the table returns them */
  float *w;         /* the same, for the learner */
  float *td;        /* |delta| from the learner */
  double *prio;     /* td as raw priorities for the table */
  float *discount;  /* computed from done (f_done), else NULL */
  rd_buf_t cols[RD_SCHEMA_MAX_FIELDS]; /* only the learner's fields have memory */
  uint64_t seq;     /* sampling order, from 1 */
  uint64_t min_key; /* the oldest key in the batch: what an insert can overwrite first */
  int gathered;     /* table lock */
  int trained;      /* 1: priorities to write; 0: dropped (skipped step, deadline) */
  rd_step_stats_t st;
} slot_t;

/* A bounded FIFO of slot indices; capacity = number of slots, so a push
 * never fails (every slot is in exactly one place). */
typedef struct {
  uint32_t *v;
  uint32_t cap, head, len;
} slotq_t;

struct rd_pipeline {
  rd_pipeline_config_t cfg;
  rd_table_t *table;
  pthread_mutex_t *table_lock;
  rd_learner_backend_t learner; /* learner thread only (create before it starts) */
  rd_pipeline_learner_info_t linfo; /* under mu */
  uint32_t n_slots;
  slot_t *slots;

  /* Under the table lock: sampled batches whose rows are not gathered. */
  uint32_t *pinned;
  uint32_t n_pinned;

  pthread_mutex_t mu;
  pthread_cond_t cv_sampler, cv_learner, cv_idle;
  slotq_t q_free, q_train, q_update;
  uint32_t sampling;   /* batches the sampler thread is sampling and gathering */
  double step_s;       /* the learner's recent seconds per train-step (moving average) */
  double produce_s;    /* the sampler's recent seconds per batch: update, sample, gather */
  int idle_gap;        /* work arrived after the pipeline idled (learner_main) */
  /* Bumped (under mu) with every wake-up of each thread, so a thread that
   * expects its partner soon can spin on it before it sleeps (rd_spin.h). */
  _Atomic uint64_t ev_sampler, ev_learner;
  int stopping;
  uint64_t target;     /* steps to sample in total (requests or continuous budget) */
  uint64_t sampled;    /* batches sampled */
  uint64_t in_flight;  /* sampled, not yet updated or dropped */
  uint64_t seq;        /* last sample's sequence number */
  /* Continuous mode. */
  int ready;           /* the table has held min_size items */
  uint64_t inserted_since_ready;
  int sample_failing;  /* logged once until an insert */
  /* The TrainStep request. */
  int req_active, req_stop;
  uint32_t req_steps, req_done, req_skipped;
  double req_loss, req_td_sum, req_td_max, req_items, req_start, req_deadline;
  int req_status;
  char req_msg[200];
  rd_train_done_cb req_cb;
  void *req_arg;
  /* Counters. */
  rd_pipeline_stats_t stats;
  double window_start;  /* continuous mode's steps/s window */
  uint64_t window_steps; /* stats.steps at window_start */

  /* Weights: two flat buffers; readers copy the front under rdlock. */
  pthread_rwlock_t wlock;
  uint8_t *wbuf[2];
  size_t wbytes;
  int front;
  uint64_t version;    /* under wlock */
  double last_publish; /* learner thread only */

  /* The sampler thread's bursts: slot indices and results per batch. */
  uint32_t *burst_idx;
  size_t *burst_stale;
  int *burst_rc;

  pthread_t th_sampler, th_learner;
  int started;         /* threads started */
  /* Where they run (rd_pipeline_cpus): pins as applied (set before the
   * threads start, then read-only), last CPUs seen (each by its thread). */
  rd_pin_t pin_learner, pin_sampler;
  int pin_learner_refused, pin_sampler_refused;
  _Atomic int cpu_learner, cpu_sampler;
};

static double now_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void q_push(slotq_t *q, uint32_t s) {
  q->v[(q->head + q->len) % q->cap] = s;
  q->len++;
}

static uint32_t q_pop(slotq_t *q) {
  uint32_t s = q->v[q->head];
  q->head = (q->head + 1) % q->cap;
  q->len--;
  return s;
}

/* Under p->mu, after the state change the thread is to see. */
static void wake_sampler(rd_pipeline_t *p) {
  rd_spin_bump(&p->ev_sampler);
  pthread_cond_signal(&p->cv_sampler);
}

static void wake_learner(rd_pipeline_t *p) {
  rd_spin_bump(&p->ev_learner);
  pthread_cond_signal(&p->cv_learner);
}

/* A moving average of seconds: each new value weighs 1/8. */
static void ewma(double *avg, double x) { *avg = *avg > 0 ? 0.875 * *avg + 0.125 * x : x; }

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

static size_t field_elems(const rd_field_t *f) {
  size_t e = 1;
  for (uint32_t d = 0; d < f->rank; d++) e *= f->shape[d];
  return e;
}

static int want_field(const rd_schema_t *s, const char *name, rd_dtype_t dtype, int scalar,
                      int *idx, size_t *elems, rd_error_t *err) {
  int i = rd_schema_find(s, name);
  if (i < 0)
    return rd_error_set(err, RD_EINVAL, "learner: the schema has no field \"%s\" (%s%s)", name,
                        rd_dtype_name(dtype), scalar ? " scalar" : "");
  const rd_field_t *f = &s->fields[i];
  if (f->dtype != dtype || (scalar && f->rank != 0))
    return rd_error_set(err, RD_EINVAL, "learner: field \"%s\" is %s of rank %u; the learner "
                        "needs %s%s", name, rd_dtype_name(f->dtype), f->rank,
                        rd_dtype_name(dtype), scalar ? " scalar" : "");
  *idx = i;
  if (elems) *elems = field_elems(f);
  return RD_OK;
}

int rd_pipeline_bind_schema(rd_pipeline_config_t *c, const rd_schema_t *s, rd_error_t *err) {
  size_t obs = 0, next = 0, act = 0;
  int rc;
  if ((rc = want_field(s, "obs", RD_DTYPE_FLOAT32, 0, &c->f_obs, &obs, err))) return rc;
  if ((rc = want_field(s, "next_obs", RD_DTYPE_FLOAT32, 0, &c->f_next_obs, &next, err)))
    return rc;
  if (next != obs || s->fields[c->f_obs].rank != s->fields[c->f_next_obs].rank)
    return rd_error_set(err, RD_EINVAL, "learner: next_obs must have the shape of obs");
  if (obs > RD_NN_MAX_UNITS)
    return rd_error_set(err, RD_EINVAL, "learner: obs has %zu elements; at most %u", obs,
                        RD_NN_MAX_UNITS);
  if ((rc = want_field(s, "reward", RD_DTYPE_FLOAT32, 1, &c->f_reward, NULL, err))) return rc;
  if (c->learner.algo == RD_ALGO_DQN) {
    if ((rc = want_field(s, "action", RD_DTYPE_INT32, 1, &c->f_action, NULL, err))) return rc;
  } else {
    if ((rc = want_field(s, "action", RD_DTYPE_FLOAT32, 0, &c->f_action, &act, err))) return rc;
    if (act > RD_NN_MAX_UNITS)
      return rd_error_set(err, RD_EINVAL, "learner: action has %zu elements; at most %u", act,
                          RD_NN_MAX_UNITS);
    c->learner.action_dim = (uint32_t)act;
  }
  c->f_discount = rd_schema_find(s, "discount");
  c->f_done = rd_schema_find(s, "done");
  if (c->f_discount >= 0) {
    if ((rc = want_field(s, "discount", RD_DTYPE_FLOAT32, 1, &c->f_discount, NULL, err)))
      return rc;
    c->f_done = -1; /* discount wins: it already carries gamma^n */
  } else if (c->f_done >= 0) {
    if ((rc = want_field(s, "done", RD_DTYPE_BOOL, 1, &c->f_done, NULL, err))) return rc;
  } else {
    return rd_error_set(err, RD_EINVAL, "learner: the schema needs a \"discount\" field "
                        "(float32 scalar, gamma^n or 0) or a \"done\" field (bool scalar)");
  }
  c->learner.obs_dim = (uint32_t)obs;
  return RD_OK;
}

static int is_learner_field(const rd_pipeline_config_t *c, int f) {
  return f == c->f_obs || f == c->f_action || f == c->f_reward || f == c->f_next_obs ||
         f == c->f_discount || f == c->f_done;
}

static int validate(const rd_pipeline_config_t *c, const rd_table_config_t *tc, rd_error_t *err) {
  int rc = rd_learner_config_validate(&c->learner, err);
  if (rc) return rc;
  if (c->batch == 0 || c->batch > c->learner.max_batch)
    return rd_error_set(err, RD_EINVAL, "batch_size %u is outside [1, %u]", c->batch,
                        c->learner.max_batch);
  if (c->batch > tc->max_batch)
    return rd_error_set(err, RD_EINVAL, "batch_size %u exceeds the workload's max_batch %u",
                        c->batch, tc->max_batch);
  if (c->batch > tc->capacity)
    return rd_error_set(err, RD_EINVAL, "batch_size %u exceeds the capacity %u", c->batch,
                        tc->capacity);
  if (c->depth > RD_PIPELINE_MAX_DEPTH)
    return rd_error_set(err, RD_EINVAL, "relaxation_depth %u is above %u", c->depth,
                        RD_PIPELINE_MAX_DEPTH);
  if (!(c->beta >= 0 && c->beta <= 1))
    return rd_error_set(err, RD_EINVAL, "beta must be in [0, 1], not %g", c->beta);
  if (c->min_size < c->batch || c->min_size > tc->capacity)
    return rd_error_set(err, RD_EINVAL, "min_size %u is outside [batch_size %u, capacity %u]",
                        c->min_size, c->batch, tc->capacity);
  if (!isfinite(c->samples_per_insert) || c->samples_per_insert < 0 ||
      c->samples_per_insert > 1e6)
    return rd_error_set(err, RD_EINVAL, "samples_per_insert must be in [0, 1e6], not %g",
                        c->samples_per_insert);
  if (c->f_done >= 0 && !(c->gamma >= 0 && c->gamma <= 1))
    return rd_error_set(err, RD_EINVAL, "gamma must be in [0, 1], not %g", (double)c->gamma);
  if ((rc = rd_pin_check(&c->learner_pin, err)) != RD_OK ||
      (rc = rd_pin_check(&c->sampler_pin, err)) != RD_OK)
    return rc;
  const int fs[5] = {c->f_obs, c->f_action, c->f_reward, c->f_next_obs,
                     c->f_discount >= 0 ? c->f_discount : c->f_done};
  for (int i = 0; i < 5; i++)
    if (fs[i] < 0 || (uint32_t)fs[i] >= tc->schema.n_fields)
      return rd_error_set(err, RD_EINVAL, "learner fields are not bound to the schema");
  return RD_OK;
}

/* Bytes of one batch slot per item. */
static size_t slot_item_bytes(const rd_pipeline_config_t *c, const rd_table_config_t *tc) {
  size_t b = sizeof(uint64_t) + 3 * sizeof(double) + 3 * sizeof(float);
  for (uint32_t f = 0; f < tc->schema.n_fields; f++)
    if (is_learner_field(c, (int)f)) b += rd_field_bytes(&tc->schema.fields[f]);
  return b;
}

/* An estimate of the learner's memory: every network's parameters (x4 for
 * trainable ones: params, gradients, two Adam moments) and its activation
 * and backward buffers for max_batch; from two shards on (learner.h), the
 * shard views' buffers (at most twice max_batch rows in all) and their
 * gradients. */
static uint64_t learner_bytes(const rd_learner_config_t *lc) {
  rd_nn_spec_t specs[2];
  int n = 0;
  if (rd_learner_policy_spec(lc, &specs[n], NULL) == RD_OK) n++;
  if (lc->algo == RD_ALGO_DDPG && rd_learner_critic_spec(lc, &specs[n], NULL) == RD_OK) n++;
  const uint64_t shards = rd_learner_shards(lc->max_batch);
  uint64_t b = 0;
  for (int i = 0; i < n; i++) {
    uint64_t units = 0;
    for (uint32_t l = 0; l <= specs[i].n_layers; l++) units += specs[i].sizes[l];
    uint64_t params = rd_nn_spec_params(&specs[i]);
    b += params * 5 * sizeof(float);                                /* online x4 + target */
    b += (uint64_t)lc->max_batch * units * 2 * 3 * sizeof(float);  /* both nets' buffers */
    if (shards > 1)
      b += 2 * (uint64_t)lc->max_batch * units * 2 * 3 * sizeof(float) +
           shards * params * sizeof(float);
  }
  return b;
}

uint64_t rd_pipeline_memsize(const rd_pipeline_config_t *c, const rd_table_config_t *tc) {
  if (validate(c, tc, NULL) != RD_OK) return 0;
  uint64_t slots = (uint64_t)(c->depth + 2) * c->batch * slot_item_bytes(c, tc);
  rd_nn_spec_t ps;
  if (rd_learner_policy_spec(&c->learner, &ps, NULL) != RD_OK) return 0;
  return slots + learner_bytes(&c->learner) + 2 * (uint64_t)rd_nn_flat_bytes(&ps);
}

/* ------------------------------------------------------------------ */
/* Weights                                                             */
/* ------------------------------------------------------------------ */

/* The learner's device failed (learner_backend.h: a fault): log, give the
 * device up, and go on with the CPU learner, which loads the last
 * published policy if there is one (pipeline.h, "Learner backends"). Only
 * the thread that owns p->learner calls this (create, then the learner
 * thread). RD_OK if the CPU learner runs now. */
static int fall_back(rd_pipeline_t *p, const char *why, int at_init, rd_error_t *err) {
  const rd_learner_ops_t *failed = p->learner.ops;
  rd_learner_kind_t kind = failed ? failed->kind : p->cfg.learner_kind;
  uint32_t dev = p->learner.ops ? p->learner.device : p->cfg.learner_device;
  rd_log_error("pipeline", "%s learner on %s%u failed %s: %s; continuing on the CPU learner",
               failed ? failed->name : rd_learner_kind_name(kind), rd_learner_kind_name(kind),
               dev, at_init ? "at init" : "while training", why);
  /* A config beyond a device's build limits says nothing about the device:
   * other workloads may still use it (learner_backend.h). */
  if (kind != RD_LEARNER_ON_CPU && p->learner.fault != RD_LEARNER_FAULT_UNSUPPORTED)
    rd_devices_mark_unusable(rd_learner_kind_name(kind), dev, why);
  rd_learner_backend_destroy(&p->learner);
  rd_error_t lerr;
  rd_error_clear(&lerr);
  int rc = rd_learner_backend_init(&p->learner, &rd_learner_ops_cpu, &p->cfg.learner, 0, &lerr);
  if (rc == RD_OK && p->version > 0) {
    /* The last published policy, from the front buffer: only this thread
     * flips it, so it does not move under us. */
    rc = rd_learner_ops_cpu.policy_load(&p->learner, p->wbuf[p->front], p->wbytes, &lerr);
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
    rd_log_info("pipeline", "the CPU learner took over%s", p->version > 0 ? " from the last "
                "published weights" : " with the same initial weights");
    return RD_OK;
  }
  rd_log_error("pipeline", "no learner: the CPU fallback failed too: %s", lerr.msg);
  return rd_error_set(err, rc, "%s; the CPU learner could not be built either: %s", why,
                      lerr.msg);
}

static void publish(rd_pipeline_t *p) {
  int back = 1 - p->front; /* only this thread (or create) writes back buffers */
  rd_error_t err;
  size_t w = 0;
  if (p->learner.impl == NULL) return; /* no learner (pipeline.h) */
  int rc = p->learner.ops->policy_save(&p->learner, p->wbuf[back], p->wbytes, &w, &err);
  if (rc != RD_OK && p->learner.fault) {
    rd_error_t ferr;
    if (fall_back(p, err.msg, p->version == 0, &ferr) != RD_OK) return;
    rc = p->learner.ops->policy_save(&p->learner, p->wbuf[back], p->wbytes, &w, &err);
  }
  if (rc != RD_OK) {
    /* Non-finite weights: keep serving the last good set. */
    rd_log_warn("pipeline", "weights not published: %s", err.msg);
    return;
  }
  pthread_rwlock_wrlock(&p->wlock);
  p->front = back;
  p->version++;
  uint64_t v = p->version;
  pthread_rwlock_unlock(&p->wlock);
  pthread_mutex_lock(&p->mu);
  p->stats.weight_version = v;
  pthread_mutex_unlock(&p->mu);
  p->last_publish = now_mono();
}

size_t rd_pipeline_weights_bytes(const rd_pipeline_t *p) { return p->wbytes; }

int rd_pipeline_weights(rd_pipeline_t *p, uint64_t have_version, void *buf, size_t cap,
                        uint64_t *version, size_t *len, rd_error_t *err) {
  pthread_rwlock_rdlock(&p->wlock);
  uint64_t v = p->version;
  *version = v;
  *len = 0;
  int rc = RD_OK;
  if (v > have_version) {
    if (cap < p->wbytes) {
      *len = p->wbytes;
      rc = rd_error_set(err, RD_ETOOBIG, "the weights are %zu bytes; the buffer holds %zu",
                        p->wbytes, cap);
    } else {
      memcpy(buf, p->wbuf[p->front], p->wbytes);
      *len = p->wbytes;
    }
  }
  pthread_rwlock_unlock(&p->wlock);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Requests                                                            */
/* ------------------------------------------------------------------ */

/* Under p->mu. If the request is over (all steps done, or stopped with
 * nothing in flight), fill *res and return its callback (the caller
 * runs it after unlocking). */
static rd_train_done_cb request_take_done(rd_pipeline_t *p, rd_train_result_t *res, void **arg) {
  if (!p->req_active || p->in_flight != 0) return NULL;
  if (!p->req_stop && p->req_done + p->req_skipped < p->req_steps) return NULL;
  memset(res, 0, sizeof *res);
  res->steps_done = p->req_done;
  res->skipped_steps = p->req_skipped;
  res->loss_mean = p->req_done ? p->req_loss / p->req_done : 0;
  res->td_abs_mean = p->req_items > 0 ? p->req_td_sum / p->req_items : 0;
  res->td_abs_max = p->req_td_max;
  res->weight_version = p->stats.weight_version;
  double dt = now_mono() - p->req_start;
  res->steps_per_second = dt > 0 ? (double)p->req_done / dt : 0;
  res->status = p->req_status;
  snprintf(res->message, sizeof res->message, "%s", p->req_msg);
  p->stats.steps_per_second = res->steps_per_second;
  p->req_active = 0;
  *arg = p->req_arg;
  rd_train_done_cb cb = p->req_cb;
  p->req_cb = NULL;
  pthread_cond_broadcast(&p->cv_idle);
  return cb;
}

/* Under p->mu: stop sampling for the request (deadline, error). */
static void request_stop(rd_pipeline_t *p, int status, const char *msg) {
  if (!p->req_active || p->req_stop) return;
  p->req_stop = 1;
  p->req_status = status;
  snprintf(p->req_msg, sizeof p->req_msg, "%s", msg);
  p->target = p->sampled;
}

int rd_pipeline_train(rd_pipeline_t *p, uint32_t steps, double deadline_mono, rd_train_done_cb cb,
                      void *arg, rd_error_t *err) {
  if (steps == 0 || steps > RD_PIPELINE_MAX_STEPS)
    return rd_error_set(err, RD_EINVAL, "steps %u is outside [1, %u]", steps,
                        RD_PIPELINE_MAX_STEPS);
  if (p->cfg.samples_per_insert > 0)
    return rd_error_set(err, RD_EBUSY, "this workload trains continuously (samples_per_insert "
                        "%g); TrainStep is for workloads without it", p->cfg.samples_per_insert);
  /* A stopped pipeline says so first: nothing else about it matters. */
  pthread_mutex_lock(&p->mu);
  int stopping = p->stopping;
  pthread_mutex_unlock(&p->mu);
  if (stopping) return rd_error_set(err, RD_ECANCELED, "the workload is shutting down");
  pthread_mutex_lock(p->table_lock);
  uint64_t size = rd_table_size(p->table);
  pthread_mutex_unlock(p->table_lock);
  if (size < p->cfg.min_size)
    return rd_error_set(err, RD_EEMPTY, "the workload holds %llu items; training starts at "
                        "min_size %u", (unsigned long long)size, p->cfg.min_size);
  pthread_mutex_lock(&p->mu);
  int rc = RD_OK;
  if (p->stopping) {
    rc = rd_error_set(err, RD_ECANCELED, "the workload is shutting down");
  } else if (p->req_active) {
    rc = rd_error_set(err, RD_EBUSY, "a TrainStep is already running on this workload");
  } else {
    p->req_active = 1;
    p->req_stop = 0;
    p->req_steps = steps;
    p->req_done = p->req_skipped = 0;
    p->req_loss = p->req_td_sum = p->req_td_max = p->req_items = 0;
    p->req_start = now_mono();
    p->req_deadline = deadline_mono;
    p->req_status = RD_OK;
    p->req_msg[0] = '\0';
    p->req_cb = cb;
    p->req_arg = arg;
    if (p->in_flight == 0 && p->sampled >= p->target) p->idle_gap = 1;
    p->target = p->sampled + steps;
    wake_sampler(p);
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* rd_pipeline_train_wait's waiter, on the caller's stack. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  rd_train_result_t *res;
} train_waiter_t;

static void train_waiter_done(void *arg, const rd_train_result_t *res) {
  train_waiter_t *w = arg;
  pthread_mutex_lock(&w->mu);
  *w->res = *res;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int rd_pipeline_train_wait(rd_pipeline_t *p, uint32_t steps, double deadline_mono,
                           rd_train_result_t *res, rd_error_t *err) {
  train_waiter_t w = {.done = 0, .res = res};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  int rc = rd_pipeline_train(p, steps, deadline_mono, train_waiter_done, &w, err);
  if (rc == RD_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
  }
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Inserts                                                             */
/* ------------------------------------------------------------------ */

static int gather(rd_pipeline_t *p, slot_t *s, rd_error_t *err) {
  return rd_table_gather(p->table, p->cfg.batch, s->keys, s->cols, err);
}

/* Table lock held. Remove slot index si from the pin list. */
static void unpin(rd_pipeline_t *p, uint32_t si) {
  for (uint32_t i = 0; i < p->n_pinned; i++)
    if (p->pinned[i] == si) {
      p->pinned[i] = p->pinned[--p->n_pinned];
      return;
    }
}

void rd_pipeline_before_insert(rd_pipeline_t *p, size_t n) {
  /* Inserting keys [next, next + n) overwrites the slots of keys
   * [next + n - capacity, ...) and older: a pinned batch whose oldest key
   * is below next + n - capacity would lose a row before its gather. */
  uint64_t next = rd_table_next_key(p->table), cap = p->table->config.capacity;
  if (next + n < cap) return;
  uint64_t first_lost = next + n - cap; /* keys < this are gone after the insert */
  for (uint32_t i = 0; i < p->n_pinned;) {
    uint32_t si = p->pinned[i];
    slot_t *s = &p->slots[si];
    if (s->min_key < first_lost) {
      rd_error_t err;
      if (gather(p, s, &err) != RD_OK) /* cannot happen: the keys are pinned, hence live */
        rd_log_error("pipeline", "early gather failed: %s", err.msg);
      s->gathered = 1;
      p->pinned[i] = p->pinned[--p->n_pinned];
    } else {
      i++;
    }
  }
}

void rd_pipeline_after_insert(rd_pipeline_t *p, size_t n) {
  uint64_t size = rd_table_size(p->table);
  pthread_mutex_lock(&p->mu);
  p->sample_failing = 0;
  if (p->cfg.samples_per_insert > 0) {
    if (!p->ready && size >= p->cfg.min_size) {
      p->ready = 1;
      /* Every item held when it became ready counts, as in Reverb's rate
       * limiter (inserts counted from the start, sampling gated by
       * min_size): an insert of 200 that crosses min_size 32 earns 200. */
      n = (size_t)size;
    }
    if (p->ready) {
      p->inserted_since_ready += n;
      uint64_t t = (uint64_t)(p->cfg.samples_per_insert * (double)p->inserted_since_ready /
                              (double)p->cfg.batch);
      if (t > p->target) {
        if (p->in_flight == 0 && p->sampled >= p->target) p->idle_gap = 1;
        p->target = t;
        wake_sampler(p);
      }
    }
  }
  pthread_mutex_unlock(&p->mu);
}

/* ------------------------------------------------------------------ */
/* Bursts and wake-ups                                                  */
/* ------------------------------------------------------------------ */

/* Threads. The sampler and storage units run on one thread, the learner
 * on another. On the CPU, sampling, gathering and a priority update of a
 * small batch each take 1-3 us, less than waking a thread: a storage unit
 * of its own (measured on 2 vCPUs) added a wake-up per batch and, with
 * three runnable threads on two cores, preempted the learner, while it
 * never had enough work to gain from a core of its own.
 *
 * Bursts. The sampler thread handles batches in bursts: several priority
 * updates, or several samples and then their gathers, under one hold of
 * the table lock and one of p->mu. A burst holds at most
 * RD_PIPELINE_BURST_ITEMS items (at least one batch), so an insert never
 * waits long for the table lock; and while the learner is short of batches
 * a burst is no larger than what it has left (at least 1), so bursts grow
 * 1, 1, 2, 4, ... from an empty pipeline and the first batch reaches the
 * learner without waiting for the rest.
 *
 * Wake-ups. Waking a sleeping thread is a futex call and, on a VM, an
 * interrupt to the other vCPU: microseconds, as long as a small network's
 * whole train-step. So:
 *  - the sampler wakes the learner only when a push makes its queue
 *    non-empty (the learner sleeps only on an empty queue);
 *  - at D < RD_PIPELINE_POLL_DEPTH, or while D/4 of the learner's recent
 *    steps take less than RD_PIPELINE_MIN_POLL_S, the learner wakes the
 *    sampler after every step (the sampler spins briefly first, so that
 *    wake is mostly a counter bump);
 *  - otherwise (polling), while batches are in flight, the sampler does
 *    not wait to be woken: it sleeps for about D/4 of those step times,
 *    then writes the priorities of the batches trained meanwhile and
 *    samples and gathers as many ahead again, in one go, while the learner
 *    trains on the rest. Its timer fires on its own core, so the learner
 *    pays nothing: on a VM a futex wake cost the waking learner about 30 us
 *    (measured on 2 vCPUs), and the woken thread was often queued on the
 *    waker's core, preempting the learner. The learner wakes it only if
 *    the pipeline runs low anyway (at most D/2 batches left untrained).
 *    A timed sleep much under 50 us is not kept on a VM, so polling needs
 *    D/4 steps of at least that: with shorter steps the sleep outlasted
 *    D/2 steps and the learner ran low and paid the futex wake after all
 *    (CartPole DDPG, batch 64, ~9 us steps: the loop at D = 4 ran 22% and
 *    at D = 8 5% below D = 50, and below D = 1's).
 * This changes when updates land, never how many batches are in flight
 * (<= D + 1). */
#define RD_PIPELINE_BURST_ITEMS 4096u
#define RD_PIPELINE_POLL_DEPTH 4u
#define RD_PIPELINE_MIN_POLL_S 50e-6

/* Under p->mu. Batches sampled but not yet trained. */
static uint32_t untrained(const rd_pipeline_t *p) { return p->sampling + p->q_train.len; }

static uint32_t burst_max(const rd_pipeline_t *p) {
  uint32_t b = RD_PIPELINE_BURST_ITEMS / p->cfg.batch;
  return b > 0 ? b : 1;
}

/* Under p->mu: the sampler polls on a timer (see above). */
static int polling(const rd_pipeline_t *p) {
  return p->cfg.depth >= RD_PIPELINE_POLL_DEPTH &&
         p->step_s * (double)(p->cfg.depth / 4) >= RD_PIPELINE_MIN_POLL_S;
}

/* Under p->mu: the learner wakes the sampler (see above). */
static int sampler_wanted(const rd_pipeline_t *p) {
  return !polling(p) || untrained(p) <= p->cfg.depth / 2;
}

/* Under p->mu, the sampler has nothing to do: sleep until woken, or, while
 * polling with batches in flight, at most for the time the learner takes
 * for D/4 steps (at most 1 s). Otherwise, with a batch at the learner,
 * the sampler first waits by rd_spin_wait_stage for the step's time (a
 * timed sleep, then a spin; once per idle spell: *stage 0 -> 1 slept -> 2
 * spun): in the strict loop the learner's wake-up is on every step's
 * path. The caller looks again after each stage. */
static void sampler_sleep(rd_pipeline_t *p, int *stage) {
  const int poll = polling(p);
  if (!poll && p->in_flight > 0 &&
      rd_spin_wait_stage(&p->cv_sampler, &p->mu, &p->ev_sampler, p->step_s, stage, NULL))
    return;
  if (!poll || p->in_flight == 0) {
    pthread_cond_wait(&p->cv_sampler, &p->mu);
    return;
  }
  double dt = p->step_s * (double)(p->cfg.depth / 4);
  dt = dt > 1.0 ? 1.0 : dt;
  struct timespec ts = rd_spin_deadline(dt);
  pthread_cond_timedwait(&p->cv_sampler, &p->mu, &ts);
}

/* ------------------------------------------------------------------ */
/* The sampler unit: samples batches, writes priorities back            */
/* ------------------------------------------------------------------ */

/* Write the priorities of n trained (or dropped) batches and free their
 * slots. Called without either lock. */
static void apply_updates(rd_pipeline_t *p, const uint32_t *idx, uint32_t n) {
  size_t *stale = p->burst_stale;
  int *rcs = p->burst_rc, any = 0, bad = 0;
  rd_error_t err;
  for (uint32_t k = 0; k < n; k++) {
    slot_t *s = &p->slots[idx[k]];
    stale[k] = 0;
    rcs[k] = RD_OK;
    if (!s->trained) continue;
    for (uint32_t i = 0; i < p->cfg.batch; i++) s->prio[i] = s->td[i];
    any = 1;
  }
  if (any) {
    pthread_mutex_lock(p->table_lock);
    for (uint32_t k = 0; k < n; k++) {
      slot_t *s = &p->slots[idx[k]];
      if (!s->trained) continue;
      rcs[k] = rd_table_update(p->table, p->cfg.batch, s->keys, s->prio, &stale[k],
                               bad ? NULL : &err);
      if (rcs[k] != RD_OK) bad = 1;
    }
    pthread_mutex_unlock(p->table_lock);
    if (bad) rd_log_warn("pipeline", "priority update refused: %s", err.msg);
  }
  rd_train_result_t res;
  void *arg = NULL;
  pthread_mutex_lock(&p->mu);
  for (uint32_t k = 0; k < n; k++) {
    slot_t *s = &p->slots[idx[k]];
    if (s->trained && rcs[k] == RD_OK) {
      p->stats.stale_updates += stale[k];
      if (p->seq > s->seq) p->stats.late_updates++;
    }
    p->in_flight--;
    q_push(&p->q_free, idx[k]);
  }
  rd_train_done_cb cb = request_take_done(p, &res, &arg);
  if (p->in_flight == 0) pthread_cond_broadcast(&p->cv_idle);
  pthread_mutex_unlock(&p->mu);
  if (cb) cb(arg, &res);
}

/* Under p->mu: how many batches the sampler may sample now. */
static uint32_t sample_room(const rd_pipeline_t *p) {
  if (p->sample_failing || p->sampled >= p->target || p->in_flight >= (uint64_t)p->cfg.depth + 1)
    return 0;
  uint64_t n = p->target - p->sampled, r = (uint64_t)p->cfg.depth + 1 - p->in_flight;
  if (r < n) n = r;
  if (p->q_free.len < n) n = p->q_free.len;
  uint32_t m = burst_max(p), u = untrained(p);
  if (u < m) m = u > 0 ? u : 1;
  return n < m ? (uint32_t)n : m;
}

/* Sample batches into the slots idx[0, n) and pin them. Returns how many
 * were sampled (the first failure stops the burst: rc, err). */
static uint32_t sample_burst(rd_pipeline_t *p, const uint32_t *idx, uint32_t n, int *rc,
                             rd_error_t *err) {
  uint32_t ok = 0;
  *rc = RD_OK;
  pthread_mutex_lock(p->table_lock);
  for (; ok < n; ok++) {
    slot_t *s = &p->slots[idx[ok]];
    rd_sample_out_t out = {s->keys, s->prob, s->w64, NULL};
    *rc = rd_table_sample(p->table, p->cfg.batch, p->cfg.beta, 0, &out, err);
    if (*rc != RD_OK) break;
    uint64_t mk = s->keys[0];
    for (uint32_t i = 1; i < p->cfg.batch; i++)
      if (s->keys[i] < mk) mk = s->keys[i];
    s->min_key = mk;
    s->gathered = 0;
    p->pinned[p->n_pinned++] = idx[ok];
  }
  pthread_mutex_unlock(p->table_lock);
  return ok;
}

/* ------------------------------------------------------------------ */
/* The storage unit: gathers sampled rows into the batch                */
/* ------------------------------------------------------------------ */

/* Gather the rows of the sampled batches idx[0, n) (unless an insert
 * gathered them first) and prepare the learner's inputs; rcs[k] is each
 * batch's result. On the sampler's thread, in a table-lock hold of its own,
 * so inserts can come between sampling and gathering. */
static void gather_burst(rd_pipeline_t *p, const uint32_t *idx, uint32_t n, int *rcs) {
  const rd_pipeline_config_t *c = &p->cfg;
  rd_error_t err;
  int bad = 0;
  pthread_mutex_lock(p->table_lock);
  for (uint32_t k = 0; k < n; k++) {
    slot_t *s = &p->slots[idx[k]];
    rcs[k] = RD_OK;
    if (s->gathered) continue; /* an insert gathered it first */
    rcs[k] = gather(p, s, bad ? NULL : &err);
    if (rcs[k] != RD_OK) bad = 1;
    s->gathered = 1;
    unpin(p, idx[k]);
  }
  pthread_mutex_unlock(p->table_lock);
  if (bad) rd_log_error("pipeline", "gather failed: %s", err.msg);

  for (uint32_t k = 0; k < n; k++) {
    slot_t *s = &p->slots[idx[k]];
    for (uint32_t i = 0; i < c->batch; i++) s->w[i] = (float)s->w64[i];
    if (c->f_done >= 0) {
      const uint8_t *done = s->cols[c->f_done].data;
      for (uint32_t i = 0; i < c->batch; i++) s->discount[i] = done[i] ? 0.0f : c->gamma;
    }
    s->trained = 0;
  }
}

/* ------------------------------------------------------------------ */
/* The sampler thread: updates, samples, gathers                        */
/* ------------------------------------------------------------------ */

static void *sampler_main(void *arg) {
  rd_pipeline_t *p = arg;
  uint32_t *idx = p->burst_idx;
  int *rcs = p->burst_rc;
  int spun = 0;        /* sampler_sleep's stage since the last work */
  double t_update = 0; /* seconds per batch of the last priority update */
  pthread_mutex_lock(&p->mu);
  while (!p->stopping) {
    if (p->q_update.len > 0) {
      uint32_t n = 0, m = burst_max(p);
      while (n < m && p->q_update.len > 0) idx[n++] = q_pop(&p->q_update);
      pthread_mutex_unlock(&p->mu);
      double t0 = now_mono();
      apply_updates(p, idx, n);
      t_update = (now_mono() - t0) / n;
      spun = 0;
      pthread_mutex_lock(&p->mu);
      continue;
    }
    uint32_t n = sample_room(p);
    if (n == 0) {
      sampler_sleep(p, &spun);
      continue;
    }
    spun = 0;
    for (uint32_t k = 0; k < n; k++) {
      idx[k] = q_pop(&p->q_free);
      p->slots[idx[k]].seq = ++p->seq;
    }
    p->sampled += n;
    p->in_flight += n;
    p->sampling = n;
    pthread_mutex_unlock(&p->mu);

    double t0 = now_mono();
    rd_error_t err;
    int rc;
    uint32_t ok = sample_burst(p, idx, n, &rc, &err); /* sampled: idx[0, ok) */
    if (ok > 0) gather_burst(p, idx, ok, rcs);
    atomic_store_explicit(&p->cpu_sampler, sched_getcpu(), memory_order_relaxed);

    pthread_mutex_lock(&p->mu);
    p->sampling = 0;
    int was_empty = p->q_train.len == 0;
    for (uint32_t k = 0; k < ok; k++)
      q_push(rcs[k] == RD_OK ? &p->q_train : &p->q_update, idx[k]); /* else dropped */
    if (ok > 0) {
      if (was_empty) wake_learner(p);
      ewma(&p->produce_s, (now_mono() - t0) / ok + t_update);
    }
    if (ok < n) {
      /* E.g. every priority is zero: nothing to train on until the data
       * changes. End a request; pause continuous mode until an insert. The
       * batches not sampled go back. */
      uint32_t back = n - ok;
      p->sampled -= back;
      p->in_flight -= back;
      p->seq -= back;
      for (uint32_t k = ok; k < n; k++) q_push(&p->q_free, idx[k]);
      if (p->req_active) {
        char m[sizeof p->req_msg];
        snprintf(m, sizeof m, "sampling failed: %.150s", err.msg);
        request_stop(p, rc, m);
        rd_train_result_t res;
        void *cbarg = NULL;
        rd_train_done_cb cb = request_take_done(p, &res, &cbarg);
        if (cb) {
          pthread_mutex_unlock(&p->mu);
          cb(cbarg, &res);
          pthread_mutex_lock(&p->mu);
        }
      } else {
        p->sample_failing = 1;
        rd_log_warn("pipeline", "continuous training paused: %s", err.msg);
      }
      if (p->in_flight == 0) pthread_cond_broadcast(&p->cv_idle);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* The learner unit: one train-step per batch                           */
/* ------------------------------------------------------------------ */

/* Touch every cache line of the learner's inputs in slot s (a hint only:
 * prefetches never fault and change nothing). At most 256 KiB, so a huge
 * batch does not flush what the current step is using. */
static void prefetch_slot(const rd_pipeline_t *p, const slot_t *s) {
  const rd_pipeline_config_t *c = &p->cfg;
  const void *bufs[6];
  size_t sizes[6], n = 0, budget = 256u << 10;
  int fields[4] = {c->f_obs, c->f_next_obs, c->f_reward, c->f_action};
  for (int k = 0; k < 4; k++) {
    if (fields[k] < 0) continue;
    bufs[n] = s->cols[fields[k]].data;
    sizes[n++] = s->cols[fields[k]].bytes;
  }
  bufs[n] = c->f_done >= 0 ? (const void *)s->discount : s->cols[c->f_discount].data;
  sizes[n++] = c->batch * sizeof(float);
  bufs[n] = s->w;
  sizes[n++] = c->batch * sizeof(float);
  for (size_t k = 0; k < n && budget > 0; k++) {
    size_t len = sizes[k] < budget ? sizes[k] : budget;
    for (size_t off = 0; off < len; off += 64) __builtin_prefetch((const char *)bufs[k] + off);
    budget -= len;
  }
  /* The outputs: the sampler read them last (the previous use of this slot). */
  size_t len = c->batch * sizeof(float) < budget ? c->batch * sizeof(float) : budget;
  for (size_t off = 0; off < len; off += 64) __builtin_prefetch((const char *)s->td + off, 1);
  __builtin_prefetch(&s->st, 1);
}

static void *learner_main(void *arg) {
  rd_pipeline_t *p = arg;
  const rd_pipeline_config_t *c = &p->cfg;
  int dirty = 0; /* steps trained since the last publication */
  int spun = 0;  /* the wait stage (sampler_sleep) since the last batch */
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && p->q_train.len == 0) {
      if (dirty) { /* idle: let actors see the newest weights */
        dirty = 0;
        pthread_mutex_unlock(&p->mu);
        publish(p);
        pthread_mutex_lock(&p->mu);
        continue;
      }
      /* A batch is on its way (being sampled, or the sampler is writing
       * the last step's priorities and will sample next): in the strict
       * loop, wait for about the sampler's time first by rd_spin_wait_stage
       * (stages as the sampler's, sampler_sleep). */
      if ((p->sampling > 0 || p->sampled < p->target) &&
          rd_spin_wait_stage(&p->cv_learner, &p->mu, &p->ev_learner, p->produce_s, &spun, NULL))
        continue;
      pthread_cond_wait(&p->cv_learner, &p->mu);
    }
    if (p->stopping) break;
    spun = 0;
    if (p->idle_gap) {
      /* The pipeline idled since the last step: that wait is not the
       * learner's time (its thread tuning leaves it out). */
      p->idle_gap = 0;
      if (p->learner.impl != NULL && p->learner.ops->pause != NULL)
        p->learner.ops->pause(&p->learner);
    }
    uint32_t si = q_pop(&p->q_train);
    slot_t *s = &p->slots[si];
    slot_t *next = p->q_train.len > 0 ? &p->slots[p->q_train.v[p->q_train.head]] : NULL;
    int drop = 0;
    if (p->req_active) {
      if (p->req_stop) {
        drop = 1;
      } else if (p->req_deadline > 0 && now_mono() >= p->req_deadline) {
        request_stop(p, RD_ETIMEDOUT, "the deadline passed");
        drop = 1;
      }
    }
    int last_of_request = p->req_active && !drop &&
                          p->req_done + p->req_skipped + 1 == p->req_steps;
    pthread_mutex_unlock(&p->mu);

    int rc = RD_OK;
    rd_error_t err;
    double t_step = 0;
    if (!drop) {
      rd_batch_t b;
      memset(&b, 0, sizeof b);
      b.n = c->batch;
      b.obs = s->cols[c->f_obs].data;
      b.next_obs = s->cols[c->f_next_obs].data;
      b.reward = s->cols[c->f_reward].data;
      b.discount = c->f_done >= 0 ? s->discount : s->cols[c->f_discount].data;
      if (c->learner.algo == RD_ALGO_DQN)
        b.action_i = s->cols[c->f_action].data;
      else
        b.action_f = s->cols[c->f_action].data;
      b.weights = s->w;
      if (c->batch_hook) c->batch_hook(c->hook_arg, s->keys, &b);
      /* The next batch was gathered on the sampler's core: start pulling
       * it into this core's cache now, while this step runs. Measured with
       * bench_loop (CartPole DDPG, batch 32, D = 50, learner pinned): the
       * step took 6.25 us on a batch already in this core's cache, 7.2 us
       * on one fresh from the sampler, 6.95 us with this prefetch. */
      if (next != NULL) prefetch_slot(p, next);
      t_step = now_mono();
      if (p->learner.impl != NULL) {
        rc = p->learner.ops->step(&p->learner, &b, s->td, &s->st, &err);
      } else {
        rc = rd_error_set(&err, RD_EINTERNAL, "this workload has no learner: %.200s",
                          p->linfo.reason);
      }
      t_step = now_mono() - t_step;
      atomic_store_explicit(&p->cpu_learner, sched_getcpu(), memory_order_relaxed);
      s->trained = rc == RD_OK;
      if (rc != RD_OK && p->learner.impl != NULL && p->learner.fault) {
        /* The device failed: the batch is skipped, the CPU takes over. */
        rd_error_t ferr;
        if (fall_back(p, err.msg, 0, &ferr) != RD_OK) {
          char m[sizeof p->req_msg];
          snprintf(m, sizeof m, "%.190s", ferr.msg);
          pthread_mutex_lock(&p->mu);
          request_stop(p, RD_EINTERNAL, m);
          pthread_mutex_unlock(&p->mu);
        }
      } else if (rc != RD_OK && rc != RD_ERANGE && p->learner.impl != NULL) {
        rd_log_warn("pipeline", "train step refused its batch: %s", err.msg);
      } else if (p->learner.impl == NULL) {
        char m[sizeof p->req_msg];
        snprintf(m, sizeof m, "%.190s", err.msg);
        pthread_mutex_lock(&p->mu);
        request_stop(p, RD_EINTERNAL, m);
        pthread_mutex_unlock(&p->mu);
      }
      if (s->trained) {
        dirty = 1;
        if (last_of_request || now_mono() - p->last_publish >= RD_PIPELINE_PUBLISH_MS * 1e-3) {
          publish(p);
          dirty = 0;
        }
      }
    }

    pthread_mutex_lock(&p->mu);
    if (!drop) {
      if (s->trained) {
        p->stats.steps++;
        p->stats.loss = s->st.loss;
        ewma(&p->step_s, t_step);
        if (p->req_active) {
          p->req_done++;
          p->req_loss += s->st.loss;
          p->req_td_sum += s->st.td_abs_mean * c->batch;
          p->req_items += c->batch;
          if (s->st.td_abs_max > p->req_td_max) p->req_td_max = s->st.td_abs_max;
        }
      } else {
        p->stats.skipped_steps++;
        if (p->req_active) p->req_skipped++;
      }
      /* Continuous mode: steps per second over windows of >= 1 s. */
      double t = now_mono();
      if (!p->req_active && t - p->window_start >= 1.0) {
        p->stats.steps_per_second =
            (double)(p->stats.steps - p->window_steps) / (t - p->window_start);
        p->window_start = t;
        p->window_steps = p->stats.steps;
      }
    }
    q_push(&p->q_update, si);
    if (sampler_wanted(p)) wake_sampler(p);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Life cycle                                                          */
/* ------------------------------------------------------------------ */

static void free_all(rd_pipeline_t *p) {
  if (p->slots) {
    for (uint32_t i = 0; i < p->n_slots; i++) {
      slot_t *s = &p->slots[i];
      free(s->keys);
      free(s->prob);
      free(s->w64);
      free(s->w);
      free(s->td);
      free(s->prio);
      free(s->discount);
      for (uint32_t f = 0; f < RD_SCHEMA_MAX_FIELDS; f++) free(s->cols[f].data);
    }
    free(p->slots);
  }
  free(p->pinned);
  free(p->burst_idx);
  free(p->burst_stale);
  free(p->burst_rc);
  free(p->q_free.v);
  free(p->q_train.v);
  free(p->q_update.v);
  free(p->wbuf[0]);
  free(p->wbuf[1]);
  rd_learner_backend_destroy(&p->learner);
  free(p);
}

/* Start a thread on the CPUs of *pin (cores.h); if the kernel refuses
 * them, unpinned, and *pin is cleared and *refused set (logged). */
static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg, rd_pin_t *pin,
                        int *refused, const char *who) {
  if (pin->n > 0) {
    pthread_attr_t attr;
    rd_error_t err;
    rd_error_clear(&err);
    int rc = pthread_attr_init(&attr) == 0 ? RD_OK : RD_EINTERNAL;
    if (rc == RD_OK) {
      rc = rd_pin_attr(&attr, pin, &err);
      if (rc == RD_OK && pthread_create(th, &attr, fn, arg) != 0) rc = RD_EINTERNAL;
      pthread_attr_destroy(&attr);
    }
    if (rc == RD_OK) return 0;
    char cpus[64];
    rd_pin_format(pin, cpus, sizeof cpus);
    rd_log_warn("pipeline", "the %s thread cannot run pinned to CPUs %s (%s); it runs unpinned",
                who, cpus, err.msg[0] ? err.msg : "the kernel refused the CPU set");
    memset(pin, 0, sizeof *pin);
    *refused = 1;
  }
  return pthread_create(th, NULL, fn, arg);
}

int rd_pipeline_create(rd_pipeline_t **out, const rd_pipeline_config_t *c, rd_table_t *table,
                       pthread_mutex_t *table_lock, rd_error_t *err) {
  int rc = validate(c, &table->config, err);
  if (rc) return rc;
  rd_pipeline_t *p = calloc(1, sizeof *p);
  if (p == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the pipeline");
  p->cfg = *c;
  p->table = table;
  p->table_lock = table_lock;
  pthread_mutex_init(&p->mu, NULL); /* fall_back takes it */
  /* The learner's backend; a device fault falls back to the CPU. */
  const rd_learner_ops_t *ops = c->learner_ops ? c->learner_ops : rd_learner_ops_for(c->learner_kind);
  p->linfo.requested = ops->kind;
  p->linfo.kind = ops->kind;
  p->linfo.device = ops->kind == RD_LEARNER_ON_CPU ? 0 : c->learner_device;
  snprintf(p->linfo.backend, sizeof p->linfo.backend, "%s", ops->name);
  rc = rd_learner_backend_init(&p->learner, ops, &c->learner, p->linfo.device, err);
  if (rc && p->learner.fault && ops != &rd_learner_ops_cpu) {
    char why[RD_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err ? err->msg : rd_err_name(rc));
    p->learner.ops = ops; /* for fall_back's log: the backend that failed */
    p->learner.device = p->linfo.device;
    rc = fall_back(p, why, 1, err);
  }
  if (rc) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return rc;
  }
  p->n_slots = c->depth + 2;
  size_t B = c->batch;
  int ok = (p->slots = calloc(p->n_slots, sizeof *p->slots)) != NULL;
  for (uint32_t i = 0; ok && i < p->n_slots; i++) {
    slot_t *s = &p->slots[i];
    ok = (s->keys = malloc(B * sizeof *s->keys)) && (s->prob = malloc(B * sizeof *s->prob)) &&
         (s->w64 = malloc(B * sizeof *s->w64)) && (s->w = malloc(B * sizeof *s->w)) &&
         (s->td = malloc(B * sizeof *s->td)) && (s->prio = malloc(B * sizeof *s->prio));
    if (ok && c->f_done >= 0) ok = (s->discount = malloc(B * sizeof *s->discount)) != NULL;
    for (uint32_t f = 0; ok && f < table->config.schema.n_fields; f++) {
      if (!is_learner_field(c, (int)f)) continue;
      s->cols[f].bytes = B * rd_field_bytes(&table->config.schema.fields[f]);
      ok = (s->cols[f].data = malloc(s->cols[f].bytes)) != NULL;
    }
  }
  slotq_t *qs[3] = {&p->q_free, &p->q_train, &p->q_update};
  for (int i = 0; ok && i < 3; i++) {
    qs[i]->cap = p->n_slots;
    ok = (qs[i]->v = malloc(p->n_slots * sizeof(uint32_t))) != NULL;
  }
  ok = ok && (p->pinned = malloc(p->n_slots * sizeof *p->pinned)) != NULL;
  ok = ok && (p->burst_idx = malloc(p->n_slots * sizeof *p->burst_idx)) != NULL;
  ok = ok && (p->burst_stale = malloc(p->n_slots * sizeof *p->burst_stale)) != NULL;
  ok = ok && (p->burst_rc = malloc(p->n_slots * sizeof *p->burst_rc)) != NULL;
  p->wbytes = p->learner.ops->policy_bytes(&p->learner);
  ok = ok && (p->wbuf[0] = malloc(p->wbytes)) && (p->wbuf[1] = malloc(p->wbytes));
  if (!ok) {
    free_all(p);
    return rd_error_set(err, RD_ENOMEM, "out of memory for %u batch slots of %u items",
                        c->depth + 2, c->batch);
  }
  for (uint32_t i = 0; i < p->n_slots; i++) q_push(&p->q_free, i);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv_sampler, &ca);
  pthread_cond_init(&p->cv_learner, &ca); /* timed waits: rd_spin_deadline */
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&p->cv_idle, NULL);
  pthread_rwlock_init(&p->wlock, NULL);
  p->front = 1;
  p->window_start = now_mono();
  publish(p); /* version 1: the initial weights */
  if (p->version != 1) {
    free_all(p);
    return rd_error_set(err, RD_EINTERNAL, "the initial weights could not be serialized");
  }
  atomic_init(&p->cpu_learner, -1);
  atomic_init(&p->cpu_sampler, -1);
  p->pin_sampler = c->sampler_pin;
  p->pin_learner = c->learner_pin;
  if (start_thread(&p->th_sampler, sampler_main, p, &p->pin_sampler, &p->pin_sampler_refused,
                   "sampler") != 0)
    goto threads_failed;
  p->started = 1;
  if (start_thread(&p->th_learner, learner_main, p, &p->pin_learner, &p->pin_learner_refused,
                   "learner") != 0)
    goto threads_failed;
  p->started = 2;
  *out = p;
  return RD_OK;

threads_failed:
  rd_pipeline_destroy(p);
  return rd_error_set(err, RD_EINTERNAL, "could not start the pipeline's threads");
}

void rd_pipeline_stop(rd_pipeline_t *p) {
  pthread_mutex_lock(&p->mu);
  int was = p->stopping;
  p->stopping = 1;
  rd_spin_bump(&p->ev_sampler);
  rd_spin_bump(&p->ev_learner);
  pthread_cond_broadcast(&p->cv_sampler);
  pthread_cond_broadcast(&p->cv_learner);
  pthread_cond_broadcast(&p->cv_idle);
  pthread_mutex_unlock(&p->mu);
  if (was) return;
  if (p->started >= 1) pthread_join(p->th_sampler, NULL);
  if (p->started >= 2) pthread_join(p->th_learner, NULL);
  p->started = 0;
  /* Batches left in flight are dropped; their pins go with them. */
  pthread_mutex_lock(p->table_lock);
  p->n_pinned = 0;
  pthread_mutex_unlock(p->table_lock);
  pthread_mutex_lock(&p->mu);
  rd_train_done_cb cb = NULL;
  void *arg = NULL;
  rd_train_result_t res;
  if (p->req_active) {
    memset(&res, 0, sizeof res);
    res.steps_done = p->req_done;
    res.skipped_steps = p->req_skipped;
    res.loss_mean = p->req_done ? p->req_loss / p->req_done : 0;
    res.weight_version = p->stats.weight_version;
    res.status = RD_ECANCELED;
    snprintf(res.message, sizeof res.message, "the workload stopped training (deleted, or the "
             "server is shutting down)");
    p->req_active = 0;
    cb = p->req_cb;
    arg = p->req_arg;
    p->req_cb = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  if (cb) cb(arg, &res);
}

void rd_pipeline_destroy(rd_pipeline_t *p) {
  if (p == NULL) return;
  rd_pipeline_stop(p);
  pthread_cond_destroy(&p->cv_sampler);
  pthread_cond_destroy(&p->cv_learner);
  pthread_cond_destroy(&p->cv_idle);
  pthread_mutex_destroy(&p->mu);
  pthread_rwlock_destroy(&p->wlock);
  free_all(p);
}

void rd_pipeline_stats(rd_pipeline_t *p, rd_pipeline_stats_t *out) {
  pthread_mutex_lock(&p->mu);
  *out = p->stats;
  pthread_mutex_unlock(&p->mu);
}

void rd_pipeline_learner_info(rd_pipeline_t *p, rd_pipeline_learner_info_t *out) {
  pthread_mutex_lock(&p->mu);
  *out = p->linfo;
  pthread_mutex_unlock(&p->mu);
}

void rd_pipeline_cpus(rd_pipeline_t *p, rd_pipeline_cpus_t *out) {
  memset(out, 0, sizeof *out);
  out->learner_pin = p->pin_learner;
  out->sampler_pin = p->pin_sampler;
  out->learner_pin_refused = p->pin_learner_refused;
  out->sampler_pin_refused = p->pin_sampler_refused;
  out->learner_cpu = atomic_load_explicit(&p->cpu_learner, memory_order_relaxed);
  out->sampler_cpu = atomic_load_explicit(&p->cpu_sampler, memory_order_relaxed);
}

int rd_pipeline_continuous(const rd_pipeline_t *p) { return p->cfg.samples_per_insert > 0; }

int rd_pipeline_wait_idle(rd_pipeline_t *p, double timeout_s) {
  double end = now_mono() + timeout_s;
  pthread_mutex_lock(&p->mu);
  int idle;
  for (;;) {
    idle = p->in_flight == 0 && !p->req_active && (p->sampled >= p->target || p->sample_failing);
    if (idle || p->stopping) break;
    if (timeout_s > 0) {
      double left = end - now_mono();
      if (left <= 0) break;
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + (left < 0.05 ? left : 0.05);
      ts.tv_sec = (time_t)t;
      ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
      pthread_cond_timedwait(&p->cv_idle, &p->mu, &ts);
    } else {
      pthread_cond_wait(&p->cv_idle, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return idle;
}
