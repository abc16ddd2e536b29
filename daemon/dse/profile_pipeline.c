/* profile_pipeline.c - the CPU pipeline's own costs: gather, handoff,
 * pass (profile_pipeline.h; profile.h has the method). */
#define _GNU_SOURCE /* pthread_setaffinity_np, sched_getcpu */
#include "profile_pipeline.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pipeline.h"
#include "rd_ring.h"
#include "rd_cond.h"
#include "rd_spin.h"

#define PASS_SLOTS 8u              /* batches in flight for the emulated "pass" */
#define PASS_DEPTH 50u             /* the pipeline's D for "pass" (pipeline_step) */
#define PASS_MIN_DEPTH 8u          /* below this, pass is emulated (pass_depth) */
#define PASS_MAX_BYTES (256u << 20) /* pass's pipeline slots, all D + 2 of them */

/* Two threads joined by two bounded queues of batch slots under one mutex,
 * as daemon/learn/pipeline.c's sampler and learner: the producer fills a free
 * slot's batch (B rows), the consumer reads it and writes B |delta|, the
 * producer reads those before it fills the slot again. Each side signals
 * the other only when it may be asleep on an empty queue. The calling
 * thread runs one side per call (handoff: the producer, which waits for
 * each batch to come back; pass: the consumer, with PASS_SLOTS slots so the
 * producer keeps ahead); a helper thread runs the other side until stop. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv_prod, cv_cons;
  uint32_t n_slots;
  uint32_t wake_at; /* the consumer wakes a waiting producer at this many free slots */
  rd_ring_t full, free_q; /* slot indices */
  int prod_waiting, cons_waiting, stop;
  /* Spinning before a wait, as the pipeline's threads (rd_spin.h): each
   * side's recent seconds per batch, and a counter per side bumped when
   * the other makes it work. The producer spins only in handoff (the
   * pipeline's sampler spins only below RD_PIPELINE_POLL_DEPTH). */
  _Atomic uint64_t ev_prod, ev_cons;
  double prod_s, cons_s;
  int prod_spins;
  float *data; /* n_slots x floats */
  float *td;   /* n_slots x batch */
  size_t floats;
  uint32_t batch;
  volatile float sink;
  float fill;
  rd_profile_call_fn work;   /* handoff: the consumer's train-step per batch, or NULL */
  void *work_ctx;
  rd_profile_call_fn
      pwork; /* handoff: the producer's sample, gather and update per batch, or NULL */
  void *pwork_ctx;
  int work_rc;    /* the first failure of work */
  pthread_t th;
  bool started;
  bool pinned;       /* pass: both threads pinned (handoff_pin); caller_mask restores */
  cpu_set_t caller_mask;
} handoff_ctx_t;

static void avg_in(double *avg, double x) { *avg = *avg > 0 ? 0.875 * *avg + 0.125 * x : x; }

/* Under h->mu: one wait for cv, staged as the pipeline's waits
 * (rd_spin_plan for the partner's expected time: a timed sleep, then a
 * spin, then blocking; *stage 0, 1, 2). The caller looks at its condition
 * again after each. */
static void hwait(handoff_ctx_t *h, pthread_cond_t *cv, _Atomic uint64_t *ev, double expected,
                  int *stage, int *waiting) {
  if (rd_spin_wait_stage(cv, &h->mu, ev, expected, stage, waiting)) return;
  *waiting = 1;
  pthread_cond_wait(cv, &h->mu);
  *waiting = 0;
}

/* Waits (staged, as hwait, the partner's expected seconds read under the
 * lock) until ring q holds a slot or the profile stops, and takes it into
 * *si. 0 when stopped. */
static int take_slot(handoff_ctx_t *h, rd_ring_t *q, pthread_cond_t *cv, _Atomic uint64_t *ev,
                     const double *expected, int spun, int *waiting, uint32_t *si) {
  pthread_mutex_lock(&h->mu);
  while (!h->stop && rd_ring_len(q) == 0) hwait(h, cv, ev, *expected, &spun, waiting);
  int taken = !h->stop && rd_ring_pop(q, si) == RD_OK;
  pthread_mutex_unlock(&h->mu);
  return taken;
}

/* Puts slot si on ring q after work begun at t0 (its time into *avg) and
 * wakes the other side: its spin counter, and cv when it sleeps there and
 * q holds at least wake_at slots. */
static void give_slot(handoff_ctx_t *h, rd_ring_t *q, uint32_t si, double t0, double *avg,
                      _Atomic uint64_t *ev, pthread_cond_t *cv, const int *waiting,
                      uint32_t wake_at) {
  double t = rd_clock_now() - t0;
  pthread_mutex_lock(&h->mu);
  avg_in(avg, t);
  (void)rd_ring_push(q, si);
  rd_spin_bump(ev);
  if (*waiting && rd_ring_len(q) >= wake_at) pthread_cond_signal(cv);
  pthread_mutex_unlock(&h->mu);
}

/* One side's per-batch work, if any; the first failure is kept. */
static void run_work(handoff_ctx_t *h, rd_profile_call_fn fn, void *ctx) {
  if (fn == NULL) return;
  int rc = fn(ctx, NULL);
  if (rc != RD_OK && h->work_rc == RD_OK) h->work_rc = rc;
}

/* Producer: take a free slot (reading the |delta| the consumer left), fill
 * it, queue it. Returns 0 when stopped. */
static int produce_one(handoff_ctx_t *h) {
  uint32_t si = 0;
  if (!take_slot(h, &h->free_q, &h->cv_prod, &h->ev_prod, &h->cons_s, h->prod_spins ? 0 : 2,
                 &h->prod_waiting, &si))
    return 0;
  double t0 = rd_clock_now();
  float acc = 0, *td = h->td + (size_t)si * h->batch, *d = h->data + (size_t)si * h->floats;
  for (uint32_t i = 0; i < h->batch; i++) acc += td[i];
  h->fill += 1.0f;
  for (size_t i = 0; i < h->floats; i++) d[i] = h->fill;
  h->sink = acc;
  run_work(h, h->pwork, h->pwork_ctx);
  give_slot(h, &h->full, si, t0, &h->prod_s, &h->ev_cons, &h->cv_cons, &h->cons_waiting, 1);
  return 1;
}

/* Consumer: take a full slot, read its batch, write |delta|, free it. */
static int consume_one(handoff_ctx_t *h) {
  uint32_t si = 0;
  if (!take_slot(h, &h->full, &h->cv_cons, &h->ev_cons, &h->prod_s, 0, &h->cons_waiting, &si))
    return 0;
  double t0 = rd_clock_now();
  float acc = 0, *td = h->td + (size_t)si * h->batch;
  const float *d = h->data + (size_t)si * h->floats;
  for (size_t i = 0; i < h->floats; i++) acc += d[i];
  for (uint32_t i = 0; i < h->batch; i++) td[i] = acc * (float)i;
  run_work(h, h->work, h->work_ctx);
  give_slot(h, &h->free_q, si, t0, &h->cons_s, &h->ev_prod, &h->cv_prod, &h->prod_waiting,
            h->wake_at);
  return 1;
}

/* The sampler's part of one emulated strict-loop step (an unbound shape,
 * pipeline_step below has the bound one), on the measuring tables: the
 * last batch's priority update, a sample, a gather of rows. */
typedef struct {
  rd_profile_table_t *tab;
  rd_profile_gather_t *g;
} sampler_work_t;

static int sampler_work(void *p, rd_error_t *err) {
  sampler_work_t *w = p;
  int rc = rd_profile_table_update(w->tab, err);
  if (rc == RD_OK) rc = rd_profile_table_sample(w->tab, err);
  if (rc == RD_OK) rc = rd_profile_gather_call(w->g, err);
  return rc;
}

/* A step on the daemon's own pipeline (pipeline.c; D = 0 for handoff,
 * pass_depth for pass), for a shape whose learner fields are bound
 * (rd_profile_shape_trains_on_gather): a table of those five fields
 * filled with rows a learner accepts, and rd_pipeline_train requests of
 * `steps` steps, each awaited.
 * An emulation of the loop (two threads handing synthetic batches over,
 * as below for unbound shapes) ran the step about 10% faster than the
 * pipeline it copied (CartPole DDPG, batch 64: 25-27 us against 28-30 us
 * measured through TrainStep), so the pipeline is measured itself. */
typedef struct {
  rd_table_t t;
  pthread_mutex_t lock; /* the workload's table lock, as the registry's */
  rd_pipeline_t *p;
  uint32_t steps; /* per call */
  bool table_live, lock_live;
} pipe_ctx_t;

static void pipe_free(pipe_ctx_t *c) {
  if (c->p != NULL) rd_pipeline_destroy(c->p);
  if (c->table_live) rd_table_free(&c->t);
  if (c->lock_live) pthread_mutex_destroy(&c->lock);
  memset(c, 0, sizeof *c);
}

/* The five learner fields, named as rd_pipeline_bind_schema finds them,
 * with the shape's column sizes (learner_columns checked them). */
static void pipe_schema(const rd_profile_shape_t *s, rd_schema_t *sc) {
  const rd_learner_config_t *lc = &s->learner;
  const bool dqn = lc->algo == RD_ALGO_DQN, done = s->col_bytes[4] == 1;
  memset(sc, 0, sizeof *sc);
  sc->n_fields = 5;
  rd_field_t *f = sc->fields;
  f[0] = (rd_field_t){"obs", RD_DTYPE_FLOAT32, 1, {lc->obs_dim}};
  f[1] = dqn ? (rd_field_t){"action", RD_DTYPE_INT32, 0, {0}}
             : (rd_field_t){"action", RD_DTYPE_FLOAT32, 1, {lc->action_dim}};
  f[2] = (rd_field_t){"reward", RD_DTYPE_FLOAT32, 0, {0}};
  f[3] = (rd_field_t){"next_obs", RD_DTYPE_FLOAT32, 1, {lc->obs_dim}};
  f[4] = done ? (rd_field_t){"done", RD_DTYPE_BOOL, 0, {0}}
              : (rd_field_t){"discount", RD_DTYPE_FLOAT32, 0, {0}};
}

/* The table (the measuring table's capacity, rows at most GATHER_MAX_BYTES,
 * never below batch), filled until fill_end (at least one batch), and the
 * pipeline on it. */
static int pipe_setup(pipe_ctx_t *c, const rd_profile_shape_t *s,
                        const rd_learner_config_t *lc, uint32_t capacity, uint32_t depth,
                        double fill_end, rd_error_t *err) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  c->lock_live = true;
  const uint32_t B = s->key.batch;
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  pipe_schema(s, &tc.schema);
  size_t row = rd_schema_row_bytes(&tc.schema);
  if ((uint64_t)capacity * row > GATHER_MAX_BYTES) capacity = (uint32_t)(GATHER_MAX_BYTES / row);
  if (capacity < B) capacity = B;
  tc.capacity = capacity;
  tc.fanout = s->key.fanout;
  tc.alpha = s->alpha == 0.0 || s->alpha == 0.5 || s->alpha == 1.0 ? s->alpha : 0.6;
  tc.seed = DATA_SEED;
  uint32_t chunk = capacity < FILL_CHUNK ? capacity : FILL_CHUNK;
  tc.max_batch = B > chunk ? B : chunk;
  int rc = rd_table_init(&c->t, &tc, err);
  if (rc) {
    pipe_free(c);
    return rc;
  }
  c->table_live = true;
  uint8_t *col[5] = {NULL};
  size_t fb[5];
  rd_cbuf_t cols[5];
  double *raw = malloc((size_t)chunk * sizeof *raw);
  bool ok = raw != NULL;
  for (int f = 0; f < 5; f++) {
    fb[f] = rd_field_bytes(&tc.schema.fields[f]);
    col[f] = malloc((size_t)chunk * fb[f]);
    ok = ok && col[f] != NULL;
  }
  if (!ok) {
    rc = rd_error_set(err, RD_ENOMEM, "out of memory for the pipeline profile's rows");
    goto out;
  }
  uint64_t seed = DATA_SEED ^ 0x737472696374ull; /* "strict" */
  for (uint32_t i = 0; i < chunk; i++) raw[i] = 0.01 + 2.0 * (double)rd_profile_unif(&seed, 0, 1);
  for (uint64_t filled = 0; filled < capacity;) {
    uint32_t n = capacity - filled < chunk ? (uint32_t)(capacity - filled) : chunk;
    rd_profile_fill_learner_rows(col, fb, filled, n, lc);
    for (int f = 0; f < 5; f++) cols[f] = (rd_cbuf_t){col[f], (size_t)n * fb[f]};
    if ((rc = rd_table_insert(&c->t, n, cols, raw, NULL, err)) != RD_OK) goto out;
    filled += n;
    if (filled >= B && rd_clock_now() > fill_end) break;
  }
  rd_pipeline_config_t pc;
  memset(&pc, 0, sizeof pc);
  pc.learner = *lc;
  pc.batch = B;
  pc.depth = depth;
  pc.beta = 0.4;
  pc.min_size = B;
  pc.gamma = 0.99f;
  pc.learner_kind = RD_LEARNER_ON_CPU;
  rd_cores_for_threads(&s->learner_pin, &s->sampler_pin, lc->threads, &pc.learner_pin);
  pc.sampler_pin = s->sampler_pin;
  if ((rc = rd_pipeline_bind_schema(&pc, &tc.schema, err)) != RD_OK) goto out;
  rc = rd_pipeline_create(&c->p, &pc, &c->t, &c->lock, err);
out:
  free(raw);
  for (int f = 0; f < 5; f++) free(col[f]);
  if (rc) pipe_free(c);
  return rc;
}

/* One request of c->steps steps, awaited. Every step must train: a batch
 * the learner refuses is a failure of the profile, not a fast step. */
static int pipe_call(void *p, rd_error_t *err) {
  pipe_ctx_t *c = p;
  rd_train_result_t res;
  int rc = rd_pipeline_train_wait(c->p, c->steps, 0, &res, err);
  if (rc) return rc;
  if (res.status != RD_OK)
    return rd_error_set(err, res.status, "the pipeline profile's request: %s", res.message);
  if (res.steps_done != c->steps)
    return rd_error_set(err, RD_EINTERNAL, "the pipeline profile trained %u of %u steps "
                        "(%u batches refused)", res.steps_done, c->steps, res.skipped_steps);
  return RD_OK;
}

/* For a bound shape, the daemon's pipeline itself, into *tm:
 *   handoff (depth 0): the strict step less t_train and t_sampler (their
 *     isolated latencies);
 *   pass (depth PASS_DEPTH, papers/001 §VII's D = 50, or less for large
 *     batches: pass_depth): the relaxed step less t_train: what the
 *     learner's thread pays per step beyond its train-step while the
 *     sampler keeps batches ahead. The emulation below (a consumer
 *     reading synthetic batches) measured 1.4-2.3 us a batch for CartPole
 *     DDPG, batch 64, where the daemon's relaxed loop ran about 0.8 us
 *     above its train-step (2026-11-25), so D = 50 was predicted 7-30%
 *     slow in 9 of 9 runs. The key has no depth, so one pass serves every
 *     D > 0: the loop's rate at D = 1, 4, 8, 16, 200 stayed within 2% of
 *     D = 50's (bench_loop, CartPole DDPG, batch 64, 1 thread, after
 *     pipeline.c's polling rule of 2026-11-25). When the sampler's side is
 *     the slower (T_R + T_G above the learner's), the relaxed step is the
 *     sampler's and so is this pass: the prediction
 *     1/max(T_L + T_P, T_R + T_G) is then that step. */
static int pipeline_step(const rd_profile_shape_t *s, const rd_learner_config_t *lc, uint32_t depth,
                         double t_train, double t_sampler, uint32_t capacity, double slice_end,
                         double deadline, rd_profile_timing_t *tm, rd_error_t *err) {
  double now = rd_clock_now();
  pipe_ctx_t c;
  /* A quarter of the slice for the table; the rest for the requests. */
  int rc = pipe_setup(&c, s, lc, capacity, depth, now + 0.25 * (slice_end - now), err);
  if (rc) return rc;
  /* Steps per request: a repetition's length (REP_TARGET_S, or less in a
   * short slice) at the isolated parts' pace; a request's start (waking
   * the two threads, and at depth > 0 the sampler filling the queue) is
   * then a small part of it. */
  double est_step = depth == 0 ? t_train + t_sampler : fmax(t_train, t_sampler);
  double quota = slice_end - rd_clock_now();
  double target = quota / (RD_PROFILE_REPS + 2) < REP_TARGET_S ? quota / (RD_PROFILE_REPS + 2)
                                                                 : REP_TARGET_S;
  double m = target / est_step;
  c.steps = m < 1 ? 1 : m > RD_PIPELINE_MAX_STEPS ? RD_PIPELINE_MAX_STEPS : (uint32_t)m;
  /* A step inside the loop ran 1.15-1.3x its parts' isolated sum; the
   * first request also starts a fresh learner (its first step touches its
   * buffers: up to 10 steps). */
  double est_call = 1.5 * c.steps * est_step + 100e-6;
  double est_first = est_call + 10 * t_train + depth * t_sampler;
  const uint32_t steps = c.steps;
  rc = rd_profile_time_calls(pipe_call, &c, est_first, est_call, slice_end, deadline, tm, err);
  pipe_free(&c);
  if (rc == RD_OK && tm->reps > 0) {
    tm->latency_s = tm->latency_s / steps - t_train - (depth == 0 ? t_sampler : 0);
    if (!(tm->latency_s > RD_PROFILE_LATENCY_MIN_S)) tm->latency_s = RD_PROFILE_LATENCY_MIN_S;
  }
  return rc;
}

static void *producer_main(void *p) {
  while (produce_one(p)) {
  }
  return NULL;
}

static void *consumer_main(void *p) {
  while (consume_one(p)) {
  }
  return NULL;
}

/* handoff: the caller produces and waits for the batch's return. */
static int handoff_call(void *p, rd_error_t *err) {
  (void)err;
  handoff_ctx_t *h = p;
  produce_one(h);
  /* Wait until the consumer has freed it: the strict loop's round trip. */
  pthread_mutex_lock(&h->mu);
  int spun = 0;
  while (rd_ring_len(&h->free_q) == 0)
    hwait(h, &h->cv_prod, &h->ev_prod, h->cons_s, &spun, &h->prod_waiting);
  pthread_mutex_unlock(&h->mu);
  return RD_OK;
}

/* pass: the caller consumes while the helper produces ahead. */
static int pass_call(void *p, rd_error_t *err) {
  (void)err;
  consume_one(p);
  return RD_OK;
}

/* pass: the caller on the CPU it runs on, the helper on another of the
 * caller's CPUs (attr), when it may use two. In the relaxed loop the
 * learner's thread is always busy and the sampler's mostly, so they run
 * on two cores; here the producer has little to do, and unpinned the
 * scheduler often woke it on the consumer's CPU: pass then measured both
 * sides' work and the switches between them, 2.3-3.7 us against 0.9-1.3
 * us a batch (CartPole DDPG, batch 64; the daemon's relaxed loop ran
 * 1.7 us above its train-step). Returns 1 if attr carries a CPU. */
static int handoff_pin(handoff_ctx_t *h, const rd_profile_shape_t *s, pthread_attr_t *attr) {
  cpu_set_t mine, other;
  if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2)
    return 0;
  int here = sched_getcpu(), there = -1;
  if (here < 0 || !CPU_ISSET(here, &mine)) return 0;
  for (int c = 0; c < CPU_SETSIZE && there < 0; c++)
    if (c != here && CPU_ISSET(c, &mine)) there = c;
  /* A pinned workload: the learner's first CPU and the sampler's. */
  if (s->learner_pin.n > 0 && s->sampler_pin.n > 0 && s->learner_pin.cpu[0] < CPU_SETSIZE &&
      s->sampler_pin.cpu[0] < CPU_SETSIZE && s->learner_pin.cpu[0] != s->sampler_pin.cpu[0] &&
      CPU_ISSET(s->learner_pin.cpu[0], &mine) && CPU_ISSET(s->sampler_pin.cpu[0], &mine)) {
    here = s->learner_pin.cpu[0];
    there = s->sampler_pin.cpu[0];
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(here, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return 0;
  h->caller_mask = mine;
  h->pinned = true;
  CPU_ZERO(&other);
  CPU_SET(there, &other);
  return pthread_attr_setaffinity_np(attr, sizeof other, &other) == 0;
}

static void handoff_stop(handoff_ctx_t *h) {
  if (h->started) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    rd_spin_wake_all(&h->ev_prod, &h->cv_prod);
    rd_spin_wake_all(&h->ev_cons, &h->cv_cons);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    h->started = false;
  }
  if (h->pinned) pthread_setaffinity_np(pthread_self(), sizeof h->caller_mask, &h->caller_mask);
  h->pinned = false;
  pthread_cond_destroy(&h->cv_prod);
  pthread_cond_destroy(&h->cv_cons);
  pthread_mutex_destroy(&h->mu);
  free(h->data);
  free(h->td);
  h->data = h->td = NULL;
  rd_ring_free(&h->full);
  rd_ring_free(&h->free_q);
}

/* consumer_side: the helper thread consumes (handoff); else it produces (pass). */
static int handoff_start(handoff_ctx_t *h, const rd_profile_shape_t *s, uint32_t slots,
                         int helper_consumes, rd_error_t *err) {
  memset(h, 0, sizeof *h);
  h->batch = s->key.batch;
  uint32_t row = s->row_bytes > 0 ? s->row_bytes : 4;
  h->floats = ((size_t)h->batch * row + sizeof(float) - 1) / sizeof(float);
  while (slots > 1 && (double)slots * (h->floats + h->batch) * sizeof(float) > MAX_BATCH_BYTES)
    slots /= 2;
  h->n_slots = slots;
  /* As the pipeline: in the strict loop the learner wakes the sampler
   * after every step; with batches in flight only when half are used up. */
  h->wake_at = slots > 1 ? slots / 2 : 1;
  h->prod_spins = helper_consumes;
  pthread_mutex_init(&h->mu, NULL);
  rd_cond_init_monotonic(&h->cv_prod); /* timed waits: rd_cond_deadline */
  rd_cond_init_monotonic(&h->cv_cons);
  h->data = calloc((size_t)slots * h->floats, sizeof(float));
  h->td = calloc((size_t)slots * h->batch, sizeof(float));
  if (h->data == NULL || h->td == NULL || rd_ring_init(&h->full, slots) != RD_OK ||
      rd_ring_init(&h->free_q, slots) != RD_OK) {
    handoff_stop(h);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the hand-off profile");
  }
  for (uint32_t i = 0; i < slots; i++) (void)rd_ring_push(&h->free_q, i);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (!helper_consumes) handoff_pin(h, s, &attr);
  int prc = pthread_create(&h->th, &attr, helper_consumes ? consumer_main : producer_main, h);
  pthread_attr_destroy(&attr);
  if (prc != 0) {
    handoff_stop(h);
    return rd_error_set(err, RD_EINTERNAL, "cannot start the hand-off profile's thread");
  }
  h->started = true;
  return RD_OK;
}

typedef struct {
  const rd_profile_shape_t *s;
  double est, slice_end, deadline;
  rd_profile_timing_t *tm;
} gather_job_t;

static int gather_job(void *arg, rd_error_t *err) {
  gather_job_t *j = arg;
  rd_profile_gather_t g;
  int rc = rd_profile_gather_setup(&g, j->s, err);
  if (rc) return rc;
  rc = rd_profile_time_calls(rd_profile_gather_call, &g, j->est, 0, j->slice_end, j->deadline,
                             j->tm, err);
  rd_profile_gather_free(&g);
  return rc;
}

/* pass's pipeline depth for a shape: PASS_DEPTH, or less where its D + 2
 * batch slots (keys, probabilities, weights, |delta|, priorities,
 * discounts: 40 bytes an item, plus the learner's columns) would take
 * more than PASS_MAX_BYTES: a client picks batch and row size, and a
 * D = 0 workload should not make its profile allocate 52 batches. 0 if
 * even PASS_MIN_DEPTH does not fit (the emulation, bounded by
 * MAX_BATCH_BYTES, measures pass then). */
static uint32_t pass_depth(const rd_profile_shape_t *s) {
  uint64_t item = 40;
  for (uint32_t c = 0; c < s->n_cols; c++) item += s->col_bytes[c];
  uint64_t slots = PASS_MAX_BYTES / (item * s->key.batch);
  if (slots < PASS_MIN_DEPTH + 2) return 0;
  return slots - 2 < PASS_DEPTH ? (uint32_t)(slots - 2) : PASS_DEPTH;
}

int rd_profile_measure_pipeline(rd_primitive_t prim, const rd_profile_shape_t *s,
                                rd_profile_train_t *tr, const rd_learner_config_t *lc,
                                double t_train, rd_profile_table_t *tab, double t_sampler,
                                double slice_end, double deadline, rd_profile_timing_t *tm,
                                rd_error_t *err) {
  int rc;
  double est = 20e-6 + 2e-9 * (double)s->key.batch * (s->row_bytes > 0 ? s->row_bytes : 1);
  /* A client chooses batch and row size: one batch of rows is bounded as
   * the train-step's synthetic batches are. */
  if ((double)s->key.batch * (s->row_bytes > 0 ? s->row_bytes : 4) > MAX_BATCH_BYTES) {
    rd_log_warn("profile", "%s batch %u: a batch of %u-byte rows would exceed %u MiB; %s not "
                "measured", s->key.network, s->key.batch, s->row_bytes, MAX_BATCH_BYTES >> 20,
                rd_primitive_name(prim));
    tm->latency_s = -1; /* not measured, and not for lack of time */
    return RD_OK;
  }
  if (prim == RD_PRIM_GATHER) {
    /* On the sampler's CPU, whose thread gathers in the pipeline. */
    gather_job_t j = {s, est, slice_end, deadline, tm};
    return rd_profile_run_pinned(&s->sampler_pin, gather_job, &j, err);
  }
  int handoff = prim == RD_PRIM_HANDOFF;
  /* A bound shape whose train-step and sampler side were measured: the
   * daemon's pipeline itself, strict for handoff, relaxed for pass. */
  uint32_t depth = handoff ? 0 : pass_depth(s);
  if (tr != NULL && t_train > 0 && tab != NULL && t_sampler > 0 &&
      rd_profile_shape_trains_on_gather(s) && (handoff || depth > 0))
    return pipeline_step(s, lc, depth, t_train, t_sampler, tab->t.config.capacity, slice_end,
                         deadline, tm, err);
  /* Otherwise emulated. With the sampler's work too (its isolated time
   * known), handoff's round trip is a whole strict-loop step on the
   * measuring tables. */
  bool train = handoff && tr != NULL && t_train > 0;
  bool sampler = train && tab != NULL && t_sampler > 0;
  handoff_ctx_t h;
  rd_profile_gather_t g;
  sampler_work_t sw = {tab, &g};
  double est_first = est + 100e-6, est_call = 0;
  memset(&g, 0, sizeof g);
  if (sampler && (rc = rd_profile_gather_setup(&g, s, err)) != RD_OK) return rc;
  if (train) {
    /* A fresh learner: its first step touches its buffers (the warm-up). */
    if ((rc = rd_learner_init(&tr->l, lc, err)) != RD_OK) {
      rd_profile_gather_free(&g);
      return rc;
    }
    tr->live = true;
    est_call = est + 100e-6 + t_train + (sampler ? 2 * t_sampler : 0);
    est_first = est_call + 10 * t_train;
  }
  if ((rc = handoff_start(&h, s, handoff ? 1 : PASS_SLOTS, handoff, err)) != RD_OK) goto out;
  if (train) {
    h.work = rd_profile_train_call;
    h.work_ctx = tr;
  }
  if (sampler) {
    h.pwork = sampler_work;
    h.pwork_ctx = &sw;
  }
  rc = rd_profile_time_calls(handoff ? handoff_call : pass_call, &h, est_first, est_call, slice_end,
                             deadline, tm, err);
  handoff_stop(&h);
  if (rc == RD_OK && h.work_rc != RD_OK)
    rc = rd_error_set(err, h.work_rc, "the hand-off profile's train-step or sampling failed");
  if (rc == RD_OK && train && tm->reps > 0) {
    tm->latency_s -= t_train + (sampler ? t_sampler : 0);
    if (!(tm->latency_s > RD_PROFILE_LATENCY_MIN_S)) tm->latency_s = RD_PROFILE_LATENCY_MIN_S;
  }
out:
  rd_profile_gather_free(&g);
  if (train) {
    rd_learner_free(&tr->l);
    tr->live = false;
  }
  return rc;
}