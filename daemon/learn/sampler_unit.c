/* sampler_unit.c - the sampler thread: priority updates, samples and
 * gathers in bursts of one table-lock hold each (sampler_unit.h).
 *
 * Burst sizes. While the learner is short of batches a burst samples no
 * more than it has left (at least 1), so bursts grow 1, 1, 2, 4, ... from
 * an empty pipeline and the first batch reaches the learner without
 * waiting for the rest.
 *
 * Wake-ups. Waking a sleeping thread is a futex call and, on a VM, an
 * interrupt to the other vCPU: as long as a small network's whole
 * train-step. So:
 *  - the sampler wakes the learner only when a push makes its queue
 *    non-empty (the learner sleeps only on an empty queue);
 *  - at D < RD_PIPELINE_POLL_DEPTH, or while D/4 of the learner's recent
 *    steps take less than RD_PIPELINE_MIN_POLL_S, the learner wakes the
 *    sampler after every step (the sampler spins briefly first, so that
 *    wake is mostly a counter bump);
 *  - otherwise (polling), while batches are in flight, the sampler does
 *    not wait to be woken: it sleeps for about D/4 of those step times,
 *    then writes the priorities of the batches trained meanwhile and
 *    samples and gathers as many ahead again, in one go, while the
 *    learner trains on the rest. Its timer fires on its own core, so the
 *    learner pays nothing, and a woken thread is not queued on the
 *    learner's core. The learner wakes it only if the pipeline runs low
 *    anyway (at most D/2 batches left untrained). A VM does not keep a
 *    timed sleep much shorter than RD_PIPELINE_MIN_POLL_S, so polling
 *    needs D/4 steps at least that long: with shorter steps the sleep
 *    would outlast D/2 steps and the learner would run low and pay the
 *    wake after all.
 * This changes when updates land, never how many batches are in flight
 * (<= D + 1).
 */
#define _GNU_SOURCE /* sched_getcpu */
#include "sampler_unit.h"

#include <sched.h>
#include <stdio.h>

#include "learner_bind.h"
#include "log.h"
#include "rd_clock.h"

#define RD_PIPELINE_POLL_DEPTH 4u
#define RD_PIPELINE_MIN_POLL_S 50e-6

/* Under mu. Batches sampled but not yet trained. */
static uint32_t untrained(const rd_pipeline_t *p) {
  return p->sampling + rd_ring_len(&p->q_train);
}

static uint32_t burst_max(const rd_pipeline_t *p) {
  uint32_t b = RD_PIPELINE_BURST_ITEMS / p->cfg.batch;
  return b > 0 ? b : 1;
}

/* Under mu: the sampler polls on a timer (see above). */
static int polling(const rd_pipeline_t *p) {
  return p->cfg.depth >= RD_PIPELINE_POLL_DEPTH &&
         p->step_s * (double)(p->cfg.depth / 4) >= RD_PIPELINE_MIN_POLL_S;
}

int rd_sampler_unit_wanted(const rd_pipeline_t *p) {
  return !polling(p) || untrained(p) <= p->cfg.depth / 2;
}

/* Under mu, the sampler has nothing to do: sleep until woken, or, while
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

/* Write the priorities of n trained (or dropped) batches and free their
 * slots. Called without either lock. */
static void apply_updates(rd_pipeline_t *p, const uint32_t *idx, uint32_t n) {
  size_t *stale = p->burst_stale;
  int *rcs = p->burst_rc, any = 0, bad = 0;
  rd_error_t err;
  for (uint32_t k = 0; k < n; k++) {
    rd_batch_slot_t *s = &p->slots[idx[k]];
    stale[k] = 0;
    rcs[k] = RD_OK;
    if (!s->trained) continue;
    for (uint32_t i = 0; i < p->cfg.batch; i++) s->prio[i] = s->td[i];
    any = 1;
  }
  if (any) {
    pthread_mutex_lock(p->table_lock);
    for (uint32_t k = 0; k < n; k++) {
      rd_batch_slot_t *s = &p->slots[idx[k]];
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
    rd_batch_slot_t *s = &p->slots[idx[k]];
    if (s->trained && rcs[k] == RD_OK) {
      p->stats.stale_updates += stale[k];
      if (p->seq > s->seq) p->stats.late_updates++;
    }
    p->in_flight--;
    rd_pl_push(&p->q_free, idx[k]);
  }
  rd_train_done_cb cb = rd_pl_request_take_done(p, &res, &arg);
  if (p->in_flight == 0) pthread_cond_broadcast(&p->cv_idle);
  pthread_mutex_unlock(&p->mu);
  if (cb) cb(arg, &res);
}

/* Under mu: how many batches the sampler may sample now. */
static uint32_t sample_room(const rd_pipeline_t *p) {
  if (p->sample_failing || p->sampled >= p->target || p->in_flight >= (uint64_t)p->cfg.depth + 1)
    return 0;
  uint64_t n = p->target - p->sampled, r = (uint64_t)p->cfg.depth + 1 - p->in_flight;
  if (r < n) n = r;
  if (rd_ring_len(&p->q_free) < n) n = rd_ring_len(&p->q_free);
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
    rd_batch_slot_t *s = &p->slots[idx[ok]];
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

/* Gather the rows of the sampled batches idx[0, n) (unless an insert
 * gathered them first) and prepare the learner's inputs; rcs[k] is each
 * batch's result. In a table-lock hold of its own, so inserts can come
 * between sampling and gathering. */
static void gather_burst(rd_pipeline_t *p, const uint32_t *idx, uint32_t n, int *rcs) {
  const rd_pipeline_config_t *c = &p->cfg;
  rd_error_t err;
  int bad = 0;
  pthread_mutex_lock(p->table_lock);
  for (uint32_t k = 0; k < n; k++) {
    rd_batch_slot_t *s = &p->slots[idx[k]];
    rcs[k] = RD_OK;
    if (s->gathered) continue; /* an insert gathered it first */
    rcs[k] = rd_table_gather(p->table, c->batch, s->keys, s->cols, bad ? NULL : &err);
    if (rcs[k] != RD_OK) bad = 1;
    s->gathered = 1;
    rd_pl_unpin(p, idx[k]);
  }
  pthread_mutex_unlock(p->table_lock);
  if (bad) rd_log_error("pipeline", "gather failed: %s", err.msg);

  for (uint32_t k = 0; k < n; k++) {
    rd_batch_slot_t *s = &p->slots[idx[k]];
    for (uint32_t i = 0; i < c->batch; i++) s->w[i] = (float)s->w64[i];
    rd_learner_bind_discount(c, c->batch, s->cols, s->discount);
    s->trained = 0;
  }
}

void *rd_sampler_unit_main(void *arg) {
  rd_pipeline_t *p = arg;
  uint32_t *idx = p->burst_upd;
  int *rcs = p->burst_rc;
  int spun = 0;        /* sampler_sleep's stage since the last work */
  double t_update = 0; /* seconds per batch of the last priority update */
  pthread_mutex_lock(&p->mu);
  while (!p->stopping) {
    if (rd_ring_len(&p->q_update) > 0) {
      uint32_t n = 0, m = burst_max(p);
      while (n < m && rd_ring_len(&p->q_update) > 0) idx[n++] = rd_pl_pop(&p->q_update);
      pthread_mutex_unlock(&p->mu);
      double t0 = rd_clock_now();
      apply_updates(p, idx, n);
      t_update = (rd_clock_now() - t0) / n;
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
      idx[k] = rd_pl_pop(&p->q_free);
      p->slots[idx[k]].seq = ++p->seq;
    }
    p->sampled += n;
    p->in_flight += n;
    p->sampling = n;
    pthread_mutex_unlock(&p->mu);

    double t0 = rd_clock_now();
    rd_error_t err;
    int rc;
    uint32_t ok = sample_burst(p, idx, n, &rc, &err); /* sampled: idx[0, ok) */
    if (ok > 0) gather_burst(p, idx, ok, rcs);
    atomic_store_explicit(&p->cpu_sampler, sched_getcpu(), memory_order_relaxed);

    pthread_mutex_lock(&p->mu);
    p->sampling = 0;
    int was_empty = rd_ring_len(&p->q_train) == 0;
    for (uint32_t k = 0; k < ok; k++)
      rd_pl_push(rcs[k] == RD_OK ? &p->q_train : &p->q_update, idx[k]); /* else dropped */
    if (ok > 0) {
      if (was_empty) rd_pl_wake_learner(p);
      rd_pl_ewma(&p->produce_s, (rd_clock_now() - t0) / ok + t_update);
    }
    if (ok < n) {
      /* E.g. every priority is zero: nothing to train on until the data
       * changes. End a request; pause continuous mode until an insert. The
       * batches not sampled go back. */
      uint32_t back = n - ok;
      p->sampled -= back;
      p->in_flight -= back;
      p->seq -= back;
      for (uint32_t k = ok; k < n; k++) rd_pl_push(&p->q_free, idx[k]);
      if (p->req.active) {
        char m[sizeof p->req.msg];
        snprintf(m, sizeof m, "sampling failed: %.150s", err.msg);
        rd_pl_request_stop(p, rc, m);
        rd_train_result_t res;
        void *cbarg = NULL;
        rd_train_done_cb cb = rd_pl_request_take_done(p, &res, &cbarg);
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
