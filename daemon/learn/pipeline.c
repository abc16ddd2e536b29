/* pipeline.c - a hosted workload's pipeline: its config and memory, its
 * life cycle (create, stop, destroy), the insert hooks that schedule
 * continuous training, and what callers may ask of it (weights, stats,
 * learner, CPUs). pipeline.h has the contract; the two threads are
 * sampler_unit.c and learner_unit.c, TrainStep requests train_request.c;
 * pipeline_internal.h says which lock guards what.
 */
#include "pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "learner_bind.h"
#include "learner_unit.h"
#include "log.h"
#include "pipeline_internal.h"
#include "rmm_gpu.h"
#include "share.h"
#include "rd_clock.h"
#include "sampler_unit.h"
#include "rd_cond.h"

/* ------------------------------------------------------------------ */
/* Configuration and memory                                            */
/* ------------------------------------------------------------------ */

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
  if (c->samples_per_insert > 0 && (c->limiter_take == NULL || c->limiter_give_back == NULL))
    return rd_error_set(err, RD_EINVAL, "continuous mode (samples_per_insert %g) needs the "
                        "table's rate limiter", c->samples_per_insert);
  if (c->f_done >= 0 && !(c->gamma >= 0 && c->gamma <= 1))
    return rd_error_set(err, RD_EINVAL, "gamma must be in [0, 1], not %g", (double)c->gamma);
  if ((rc = rd_pin_check(&c->learner_pin, err)) != RD_OK ||
      (rc = rd_pin_check(&c->sampler_pin, err)) != RD_OK)
    return rc;
  return rd_learner_bind_check(c, tc->schema.n_fields, err);
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
  const uint64_t shards = rd_learner_shards(lc, lc->max_batch);
  uint64_t b = 0;
  for (int i = 0; i < n; i++) {
    uint64_t units = 0;
    for (uint32_t l = 0; l <= specs[i].n_layers; l++) units += specs[i].sizes[l];
    uint64_t params = rd_nn_spec_params(&specs[i]);
    b += params * 5 * sizeof(float);                                /* online x4 + target */
    b += (uint64_t)lc->max_batch * units * 2 * 3 * sizeof(float);  /* both nets' buffers */
    if (shards > 1) /* views; the weights prepacked (online W^T and W, target W^T) */
      b += 2 * (uint64_t)lc->max_batch * units * 2 * 3 * sizeof(float) +
           shards * params * sizeof(float) + 3 * (params + 16 * units) * sizeof(float);
  }
  return b;
}

uint64_t rd_pipeline_memsize(const rd_pipeline_config_t *c, const rd_table_config_t *tc) {
  if (validate(c, tc, NULL) != RD_OK) return 0;
  uint64_t slots = (uint64_t)(c->depth + 2) * c->batch * rd_batch_slot_item_bytes(c, &tc->schema);
  rd_nn_spec_t ps;
  if (rd_learner_policy_spec(&c->learner, &ps, NULL) != RD_OK) return 0;
  return slots + learner_bytes(&c->learner) + 2 * (uint64_t)rd_nn_flat_bytes(&ps);
}

/* ------------------------------------------------------------------ */
/* Life cycle                                                          */
/* ------------------------------------------------------------------ */

/* The locks and condition variables, before anything can fail: discard
 * destroys them whatever create got to. */
static void init_sync(rd_pipeline_t *p) {
  pthread_mutex_init(&p->mu, NULL); /* a fallback at init takes it */
  pthread_mutex_init(&p->call_mu, NULL);
  pthread_cond_init(&p->cv_call, NULL);
  /* Every timed wait of the pipeline runs on rd_cond_deadline. */
  rd_cond_init_monotonic(&p->cv_sampler);
  rd_cond_init_monotonic(&p->cv_learner);
  rd_cond_init_monotonic(&p->cv_idle);
}

/* Everything create made (safe on a partly built pipeline), p included. */
static void discard(rd_pipeline_t *p) {
  pthread_cond_destroy(&p->cv_sampler);
  pthread_cond_destroy(&p->cv_learner);
  pthread_cond_destroy(&p->cv_idle);
  pthread_cond_destroy(&p->cv_call);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->call_mu);
  rd_batch_slots_free(p->slots, p->n_slots);
  free(p->burst_stale); /* alloc_burst's block */
  rd_ring_free(&p->q_free);
  rd_ring_free(&p->q_train);
  rd_ring_free(&p->q_update);
  rd_weights_buf_free(&p->weights);
  rd_learner_backend_destroy(&p->learner);
  free(p);
}

/* The sampler's burst arrays (sampler_unit.c) in one block, the widest
 * type first so that each array starts aligned. 0: out of memory. */
static int alloc_burst(rd_pipeline_t *p, uint32_t n) {
  const size_t per_slot = sizeof *p->burst_stale + 2 * sizeof *p->burst_rc +
                          2 * sizeof *p->burst_upd + sizeof *p->burst_flags;
  char *m = malloc(n * per_slot);
  if (m == NULL) return 0;
  p->burst_stale = (size_t *)m;
  p->burst_rc = (int *)(p->burst_stale + n); /* updates, then gathers */
  p->burst_upd = (uint32_t *)(p->burst_rc + 2 * n);
  p->burst_smp = p->burst_upd + n;
  p->burst_flags = (uint8_t *)(p->burst_smp + n);
  return 1;
}

/* The slots, queues, burst arrays and weight buffers. RD_OK or RD_ENOMEM. */
static int alloc_all(rd_pipeline_t *p) {
  const uint32_t n = p->cfg.depth + 2;
  p->n_slots = n;
  int ok = (p->slots = rd_batch_slots_alloc(n, &p->cfg, &p->table->config.schema)) != NULL;
  ok = ok && rd_ring_init(&p->q_free, n) == RD_OK && rd_ring_init(&p->q_train, n) == RD_OK &&
       rd_ring_init(&p->q_update, n) == RD_OK;
  ok = ok && alloc_burst(p, n);
  ok = ok && rd_weights_buf_init(&p->weights, p->learner.ops->policy_bytes(&p->learner)) == RD_OK;
  if (!ok) return RD_ENOMEM;
  for (uint32_t i = 0; i < n; i++) rd_pl_push(&p->q_free, i);
  return RD_OK;
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

/* The pool of the device the sampler's bursts run on: the GPU that holds
 * the table's replay module or storage, else the CPU (an FPGA's replay
 * module is driven from the CPU's side; its own pool would only serialize
 * the sampler with that board's learner steps). */
static rd_share_pool_t *sampler_pool(const rd_table_config_t *tc) {
  int d = tc->rmm != NULL ? rd_gpu_rmm_device(tc->rmm) : -1;
  if (d < 0 && tc->storage != NULL) d = rd_gpu_storage_device(tc->storage);
  return d >= 0 ? rd_share_pool_device(RD_LEARNER_ON_GPU, (uint32_t)d)
                : rd_share_pool_device(RD_LEARNER_ON_CPU, 0);
}

/* Join the learner's device pool, and the sampler's when it is another
 * device's: each burst takes turns on the device it runs on, whichever
 * that is (share.h). */
static int join_shares(rd_pipeline_t *p, const rd_pipeline_config_t *c,
                       const rd_table_config_t *tc) {
  rd_share_pool_t *lp = rd_share_pool_device(c->learner_kind, c->learner_device);
  rd_share_pool_t *sp = sampler_pool(tc);
  if (lp == NULL || sp == NULL) return RD_ENOMEM;
  if ((p->share = rd_share_join(lp, c->share_group, c->share_weight)) == NULL) return RD_ENOMEM;
  rd_share_pool_set_conserving(lp, c->share_conserving);
  if (sp == lp) {
    p->sampler_share = p->share;
    return RD_OK;
  }
  if ((p->sampler_share = rd_share_join(sp, c->share_group, c->share_weight)) == NULL)
    return RD_ENOMEM;
  rd_share_pool_set_conserving(sp, c->share_conserving);
  return RD_OK;
}

void rd_pipeline_shares(rd_pipeline_t *p, struct rd_share **learner, struct rd_share **sampler) {
  *learner = p->share;
  *sampler = p->sampler_share;
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
  init_sync(p);
  /* The learner's backend; a device fault falls back to the CPU. */
  if ((rc = rd_learner_unit_init(p, err)) != RD_OK) {
    discard(p);
    return rc;
  }
  if (alloc_all(p) != RD_OK) {
    discard(p);
    return rd_error_set(err, RD_ENOMEM, "out of memory for %u batch slots of %u items",
                        c->depth + 2, c->batch);
  }
  p->window_start = rd_clock_now();
  if (c->samples_per_insert > 0) p->target = UINT64_MAX; /* as much as the limiter lets through */
  rd_learner_unit_publish(p); /* version 1: the initial weights */
  if (rd_weights_buf_version(&p->weights) != 1) {
    rd_pipeline_destroy(p);
    return rd_error_set(err, RD_EINTERNAL, "the initial weights could not be serialized");
  }
  if (c->share_group != NULL && join_shares(p, c, &table->config) != RD_OK) {
    rd_pipeline_destroy(p);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the learner's device share");
  }
  rd_sampler_unit_lend(p, 1);
  atomic_init(&p->cpu_learner, -1);
  atomic_init(&p->cpu_sampler, -1);
  p->pin_sampler = c->sampler_pin;
  p->pin_learner = c->learner_pin;
  if (start_thread(&p->th_sampler, rd_sampler_unit_main, p, &p->pin_sampler,
                   &p->pin_sampler_refused, "sampler") != 0)
    goto threads_failed;
  p->started = 1;
  if (start_thread(&p->th_learner, rd_learner_unit_main, p, &p->pin_learner,
                   &p->pin_learner_refused, "learner") != 0)
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
  rd_spin_wake_all(&p->ev_sampler, &p->cv_sampler);
  rd_spin_wake_all(&p->ev_learner, &p->cv_learner);
  pthread_cond_broadcast(&p->cv_idle);
  pthread_mutex_unlock(&p->mu);
  if (was) return;
  if (p->started >= 1) pthread_join(p->th_sampler, NULL);
  if (p->started >= 2) pthread_join(p->th_learner, NULL);
  rd_sampler_unit_lend(p, 0); /* and wait out a helper's burst */
  /* Batches left in flight are dropped. */
  pthread_mutex_lock(&p->mu);
  p->started = 0;
  pthread_cond_broadcast(&p->cv_call); /* rd_pl_on_learner runs calls itself now */
  rd_train_done_cb cb = NULL;
  void *arg = NULL;
  rd_train_result_t res;
  if (p->req.active) cb = rd_train_req_cancel(&p->req, p->stats.weight_version, &res, &arg);
  pthread_mutex_unlock(&p->mu);
  if (cb) cb(arg, &res);
}

void rd_pipeline_destroy(rd_pipeline_t *p) {
  if (p == NULL) return;
  rd_pipeline_stop(p);
  /* The threads have stopped: no burst holds either share. */
  if (p->sampler_share != p->share) rd_share_leave(p->sampler_share);
  rd_share_leave(p->share);
  discard(p);
}

/* ------------------------------------------------------------------ */
/* Inserts                                                             */
/* ------------------------------------------------------------------ */

void rd_pipeline_before_insert(rd_pipeline_t *p, size_t n) {
  /* Nothing to do: the sampler gathers every batch in the table-lock hold
   * that sampled it (sampler_unit.h), so no insert comes between. */
  (void)p;
  (void)n;
}

void rd_pipeline_after_insert(rd_pipeline_t *p, size_t n) {
  (void)n; /* the limiter counted the rows */
  pthread_mutex_lock(&p->mu);
  p->sample_failing = 0;
  p->insert_seq++;
  if (p->limited) {
    p->limited = 0;
    if (p->in_flight == 0) p->idle_gap = 1;
    rd_pl_wake_sampler(p);
  }
  pthread_mutex_unlock(&p->mu);
}

/* ------------------------------------------------------------------ */
/* Queries                                                             */
/* ------------------------------------------------------------------ */

size_t rd_pipeline_weights_bytes(const rd_pipeline_t *p) { return p->weights.bytes; }

int rd_pipeline_weights(rd_pipeline_t *p, uint64_t have_version, void *buf, size_t cap,
                        uint64_t *version, size_t *len, rd_error_t *err) {
  return rd_weights_buf_read(&p->weights, have_version, buf, cap, version, len, err);
}

void rd_pipeline_stats(rd_pipeline_t *p, rd_pipeline_stats_t *out) {
  pthread_mutex_lock(&p->mu);
  *out = p->stats;
  pthread_mutex_unlock(&p->mu);
}

void rd_pipeline_queues(rd_pipeline_t *p, rd_pipeline_queues_t *out) {
  pthread_mutex_lock(&p->mu);
  out->to_train = rd_ring_len(&p->q_train);
  out->to_update = rd_ring_len(&p->q_update);
  out->in_flight = p->in_flight;
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

const rd_learner_config_t *rd_pipeline_learner_config(const rd_pipeline_t *p) {
  return &p->cfg.learner;
}

const rd_pipeline_config_t *rd_pipeline_config(const rd_pipeline_t *p) { return &p->cfg; }

int rd_pipeline_continuous(const rd_pipeline_t *p) { return p->cfg.samples_per_insert > 0; }

int rd_pipeline_wait_idle(rd_pipeline_t *p, double timeout_s) {
  double end = rd_clock_now() + timeout_s;
  pthread_mutex_lock(&p->mu);
  int idle;
  for (;;) {
    idle = p->in_flight == 0 && !p->req.active && !rd_pl_wants_more(p);
    if (idle || p->stopping) break;
    if (timeout_s > 0) {
      double left = end - rd_clock_now();
      if (left <= 0) break;
      struct timespec ts = rd_cond_deadline(left < 0.05 ? left : 0.05);
      pthread_cond_timedwait(&p->cv_idle, &p->mu, &ts);
    } else {
      pthread_cond_wait(&p->cv_idle, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return idle;
}
