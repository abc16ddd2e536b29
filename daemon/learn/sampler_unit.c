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
 *    samples and gathers as many ahead again, in one burst, while the
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
#include "share.h"

#include <sched.h>
#include <stdio.h>

#include "learner_bind.h"
#include "log.h"
#include "rd_clock.h"
#include "rd_cond.h"

#define RD_PIPELINE_POLL_DEPTH 4u
#define RD_PIPELINE_MIN_POLL_S 50e-6
#define RD_PIPELINE_HELPED_SLEEP_S 0.1

/* burst_flags bits: what an updated slot was before the burst reused it. */
#define UPD_TRAINED 1u /* its priorities are to be written */
#define UPD_LATE 2u    /* a newer batch had been sampled before its update */

/* Under mu. Batches sampled but not yet trained. */
/* Under the table lock: a table call failed with RD_EINTERNAL; 1 if the
 * owner moved the table to the CPU and the call may be made again. */
static int table_fault(const rd_pipeline_config_t *c, const rd_error_t *why) {
  return c->table_fault != NULL && c->table_fault(c->table_fault_arg, why);
}

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
 * for D/4 steps (RD_PIPELINE_HELPED_SLEEP_S once helpers ran a burst since
 * the last sleep: sampler_unit.h "Helpers"; at most 1 s). Otherwise, with
 * a batch at the learner, the sampler first waits by rd_spin_wait_stage for the step's time (a
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
  double dt = p->helped ? RD_PIPELINE_HELPED_SLEEP_S : p->step_s * (double)(p->cfg.depth / 4);
  p->helped = 0;
  dt = dt > 1.0 ? 1.0 : dt;
  struct timespec ts = rd_cond_deadline(dt);
  pthread_cond_timedwait(&p->cv_sampler, &p->mu, &ts);
}

/* Under mu: how many batches the burst may sample (at most m), counting
 * the nu batches whose updates it writes first as already written back. */
static uint32_t sample_room(const rd_pipeline_t *p, uint32_t nu, uint32_t m) {
  const uint64_t in_flight = p->in_flight - nu, limit = (uint64_t)p->cfg.depth + 1;
  if (!rd_pl_wants_more(p) || in_flight >= limit) return 0;
  uint64_t n = p->target - p->sampled, r = limit - in_flight, slots = rd_ring_len(&p->q_free) + nu;
  if (r < n) n = r;
  if (slots < n) n = slots;
  uint32_t u = untrained(p);
  if (u < m) m = u > 0 ? u : 1;
  return n < m ? (uint32_t)n : m;
}

/* A burst: the slots whose priorities it writes (upd[0, nu)) and the slots
 * it samples into (smp[0, ns)), and what came of it. */
typedef struct {
  uint32_t *upd, *smp;
  uint32_t nu, ns;
  uint32_t reused; /* smp's last `reused` slots are upd's last ones */
  uint32_t ok;     /* batches sampled: smp[0, ok) */
  uint32_t allowed; /* batches the rate limiter let through (<= ns) */
  uint64_t insert_seq; /* the pipeline's insert_seq when the limiter was asked */
  int sample_rc;   /* why sampling stopped at ok < allowed */
  rd_error_t sample_err;
  int *upd_rc, *gather_rc;
  size_t *stale;
  uint8_t *flags;
  double t_update; /* seconds per batch of the updates (when nu > 0) */
  double t_sample; /* seconds per batch of sampling and gathering (when ok > 0) */
} burst_t;

/* Under mu: take the burst's work (the priorities of at most mu batches,
 * at most ms new batches) and its slots. */
static void burst_plan(rd_pipeline_t *p, burst_t *b, uint32_t mu, uint32_t ms) {
  b->nu = 0;
  while (b->nu < mu && rd_ring_len(&p->q_update) > 0) b->upd[b->nu++] = rd_pl_pop(&p->q_update);
  b->ns = ms > 0 ? sample_room(p, b->nu, ms) : 0;
  /* Late: a newer batch was sampled before this update lands (against the
   * last sample before this burst: its updates are written first). */
  for (uint32_t k = 0; k < b->nu; k++) {
    const rd_batch_slot_t *s = &p->slots[b->upd[k]];
    b->flags[k] = (uint8_t)((s->trained ? UPD_TRAINED : 0) | (p->seq > s->seq ? UPD_LATE : 0));
  }
  b->reused = 0;
  for (uint32_t k = 0; k < b->ns; k++) {
    uint32_t si;
    if (rd_ring_pop(&p->q_free, &si) != RD_OK) si = b->upd[b->nu - 1 - b->reused++];
    b->smp[k] = si;
    p->slots[si].seq = ++p->seq;
  }
  p->sampled += b->ns;
  p->in_flight += b->ns;
  p->sampling = b->ns;
}

/* No lock held: the burst's work, in one hold of the table lock. */
static void burst_run(rd_pipeline_t *p, burst_t *b) {
  const rd_pipeline_config_t *c = &p->cfg;
  rd_error_t uerr, gerr;
  int ubad = 0, gbad = 0, table_work = b->ns > 0;
  for (uint32_t k = 0; k < b->nu; k++) {
    rd_batch_slot_t *s = &p->slots[b->upd[k]];
    b->stale[k] = 0;
    b->upd_rc[k] = RD_OK;
    if (!(b->flags[k] & UPD_TRAINED)) continue; /* dropped: only freed */
    for (uint32_t i = 0; i < c->batch; i++) s->prio[i] = s->td[i];
    table_work = 1;
  }
  double t0 = rd_clock_now();
  b->ok = 0;
  if (!table_work) {
    b->t_update = (rd_clock_now() - t0) / b->nu;
    return;
  }

  pthread_mutex_lock(p->table_lock);
  for (uint32_t k = 0; k < b->nu; k++) {
    if (!(b->flags[k] & UPD_TRAINED)) continue;
    rd_batch_slot_t *s = &p->slots[b->upd[k]];
    b->upd_rc[k] = rd_table_update(p->table, c->batch, s->keys, s->prio, &b->stale[k],
                                   ubad ? NULL : &uerr);
    if (b->upd_rc[k] == RD_EINTERNAL && table_fault(c, &uerr))
      b->upd_rc[k] = rd_table_update(p->table, c->batch, s->keys, s->prio, &b->stale[k], &uerr);
    if (b->upd_rc[k] != RD_OK) ubad = 1;
  }
  double t1 = rd_clock_now();
  b->sample_rc = RD_OK;
  /* The limiter counts what it lets through; a TrainStep's batches are
   * counted, not held back. insert_seq is written under this lock too. */
  b->allowed = b->ns;
  if (b->ns > 0 && c->limiter_take != NULL)
    b->allowed = c->limiter_take(c->limiter_arg, c->batch, b->ns, c->samples_per_insert > 0);
  b->insert_seq = p->insert_seq;
  for (b->ok = 0; b->ok < b->allowed; b->ok++) {
    rd_batch_slot_t *s = &p->slots[b->smp[b->ok]];
    rd_sample_out_t out = {s->keys, s->prob, s->w64, NULL};
    b->sample_rc = rd_table_sample(p->table, c->batch, c->beta, 0, &out, &b->sample_err);
    if (b->sample_rc == RD_EINTERNAL && table_fault(c, &b->sample_err))
      b->sample_rc = rd_table_sample(p->table, c->batch, c->beta, 0, &out, &b->sample_err);
    if (b->sample_rc != RD_OK) break;
  }
  if (b->ok < b->allowed && c->limiter_take != NULL) c->limiter_give_back(c->limiter_arg, c->batch, b->allowed - b->ok);
  for (uint32_t k = 0; k < b->ok; k++) {
    rd_batch_slot_t *s = &p->slots[b->smp[k]];
    b->gather_rc[k] = rd_table_gather(p->table, c->batch, s->keys, s->cols, gbad ? NULL : &gerr);
    if (b->gather_rc[k] == RD_EINTERNAL && table_fault(c, &gerr))
      b->gather_rc[k] = rd_table_gather(p->table, c->batch, s->keys, s->cols, &gerr);
    if (b->gather_rc[k] != RD_OK) gbad = 1;
  }
  pthread_mutex_unlock(p->table_lock);

  if (ubad) rd_log_warn("pipeline", "priority update refused: %s", uerr.msg);
  if (gbad) rd_log_error("pipeline", "gather failed: %s", gerr.msg);
  /* The learner's inputs: float IS weights, discount from done. */
  for (uint32_t k = 0; k < b->ok; k++) {
    rd_batch_slot_t *s = &p->slots[b->smp[k]];
    for (uint32_t i = 0; i < c->batch; i++) s->w[i] = (float)s->w64[i];
    rd_learner_bind_discount(c, c->batch, s->cols, s->discount);
    s->trained = 0;
  }
  if (b->nu > 0) b->t_update = (t1 - t0) / b->nu;
  if (b->ok > 0) b->t_sample = (rd_clock_now() - t1) / b->ok;
  if (b->ns > 0) atomic_store_explicit(&p->cpu_sampler, sched_getcpu(), memory_order_relaxed);
}

/* Under mu: hand the burst's results on. Returns a request's done
 * callback to run after unlocking (NULL: none). */
static rd_train_done_cb burst_finish(rd_pipeline_t *p, burst_t *b, rd_train_result_t *res,
                                     void **cbarg) {
  if (b->nu > 0) p->t_update = b->t_update;
  for (uint32_t k = 0; k < b->nu; k++) {
    if ((b->flags[k] & UPD_TRAINED) && b->upd_rc[k] == RD_OK) {
      p->stats.stale_updates += b->stale[k];
      if (b->flags[k] & UPD_LATE) p->stats.late_updates++;
    }
  }
  p->in_flight -= b->nu;
  for (uint32_t k = 0; k < b->nu - b->reused; k++) rd_pl_push(&p->q_free, b->upd[k]);

  p->sampling = 0;
  const int was_empty = rd_ring_len(&p->q_train) == 0;
  for (uint32_t k = 0; k < b->ok; k++) {
    if (b->gather_rc[k] == RD_OK) {
      rd_pl_push(&p->q_train, b->smp[k]);
      continue;
    }
    /* Not gathered (the table refused: cannot happen for keys sampled in
     * this hold): a skipped step, freed without an update, so a request
     * still counts every batch it sampled. */
    p->stats.skipped_steps++;
    if (p->req.active) rd_train_req_skipped(&p->req);
    rd_pl_push(&p->q_update, b->smp[k]);
  }
  if (b->ok > 0) {
    if (was_empty) rd_pl_wake_learner(p);
    rd_pl_ewma(&p->produce_s, b->t_sample + p->t_update);
  }
  if (b->ok < b->ns) {
    /* The limiter held some back (continuous mode waits for an insert
     * unless one came since it was asked), or sampling failed, e.g. every
     * priority is zero: nothing to train on until the data changes (end a
     * request; pause continuous mode until an insert). The batches not
     * sampled go back. */
    const uint32_t back = b->ns - b->ok;
    p->sampled -= back;
    p->in_flight -= back;
    p->seq -= back;
    for (uint32_t k = b->ok; k < b->ns; k++) rd_pl_push(&p->q_free, b->smp[k]);
    if (b->ok == b->allowed) {
      if (p->insert_seq == b->insert_seq) p->limited = 1;
    } else if (p->req.active) {
      char m[sizeof p->req.msg];
      snprintf(m, sizeof m, "sampling failed: %.150s", b->sample_err.msg);
      rd_pl_request_stop(p, b->sample_rc, m);
    } else {
      p->sample_failing = 1;
      rd_log_warn("pipeline", "continuous training paused: %s", b->sample_err.msg);
    }
  }
  rd_train_done_cb cb = rd_pl_request_take_done(p, res, cbarg);
  if (p->in_flight == 0) pthread_cond_broadcast(&p->cv_idle);
  /* Out of work: its device share holds nobody back meanwhile (share.h). */
  if (p->share != NULL && p->in_flight == 0 && p->sampled >= p->target) {
    rd_share_idle(p->share);
    if (p->sampler_share != p->share) rd_share_idle(p->sampler_share);
  }
  return cb;
}

/* The burst arrays (pipeline.c alloc_burst), for whoever runs the burst. */
static burst_t burst_arrays(rd_pipeline_t *p) {
  burst_t b = {.upd = p->burst_upd,
               .smp = p->burst_smp,
               .upd_rc = p->burst_rc,
               .gather_rc = p->burst_rc + p->n_slots,
               .stale = p->burst_stale,
               .flags = p->burst_flags};
  return b;
}

/* Under mu, with a burst planned and p->bursting set: run it (mu released
 * meanwhile) and hand its results on; mu held again on return, the
 * request's callback (if any) run unlocked before. */
static void burst_go(rd_pipeline_t *p, burst_t *b) {
  pthread_mutex_unlock(&p->mu);
  /* The sampler's device time is its pipeline's too (share.h), on the
   * device its bursts run on (pipeline.c sampler_pool). */
  rd_share_t *sh = p->sampler_share;
  double t_burst = sh != NULL ? (rd_share_begin(sh, 1), rd_clock_now()) : 0;
  burst_run(p, b);
  if (sh != NULL) rd_share_end(sh, 1, rd_clock_now() - t_burst);
  pthread_mutex_lock(&p->mu);
  rd_train_result_t res;
  void *cbarg = NULL;
  rd_train_done_cb cb = burst_finish(p, b, &res, &cbarg);
  p->bursting = 0;
  if (p->sampler_waits) rd_pl_wake_sampler(p);
  if (cb) {
    pthread_mutex_unlock(&p->mu);
    cb(cbarg, &res);
    pthread_mutex_lock(&p->mu);
  }
}

void *rd_sampler_unit_main(void *arg) {
  rd_pipeline_t *p = arg;
  burst_t b = burst_arrays(p);
  int spun = 0; /* sampler_sleep's stage since the last work */
  pthread_mutex_lock(&p->mu);
  while (!p->stopping) {
    if (p->bursting) { /* a helper's (rd_sampler_unit_help) */
      p->sampler_waits = 1;
      pthread_cond_wait(&p->cv_sampler, &p->mu);
      p->sampler_waits = 0;
      continue;
    }
    burst_plan(p, &b, burst_max(p), burst_max(p));
    if (b.nu == 0 && b.ns == 0) {
      sampler_sleep(p, &spun);
      continue;
    }
    spun = 0;
    p->bursting = 1;
    burst_go(p, &b);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int rd_sampler_unit_help(void *arg) {
  rd_pipeline_t *p = arg;
  /* Never wait here: the learner's next job may be waiting for this
   * worker, and whoever holds mu is busy only briefly. */
  if (pthread_mutex_trylock(&p->mu) != 0) return 0;
  int did = 0;
  if (!p->stopping && !p->bursting) {
    burst_t b = burst_arrays(p);
    /* Short bursts: a job that comes meanwhile waits for this worker. */
    if (rd_ring_len(&p->q_update) > 0) burst_plan(p, &b, RD_PIPELINE_HELP_BATCHES, 0);
    else burst_plan(p, &b, 0, 1);
    if (b.nu > 0 || b.ns > 0) {
      p->bursting = 1;
      p->helped = 1;
      p->stats.helped_updates += b.nu;
      burst_go(p, &b);
      p->stats.helped_samples += b.ok;
      did = 1;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return did;
}

void rd_sampler_unit_lend(rd_pipeline_t *p, int on) {
  rd_learner_backend_t *lb = &p->learner;
  if (lb->impl == NULL || lb->ops->set_idle == NULL) return;
  /* A helper's burst is outside the sampler's device share (share.h): only
   * in a pipeline without shares. */
  pthread_mutex_lock(&p->mu);
  int use = on && !p->stopping && p->share == NULL;
  pthread_mutex_unlock(&p->mu);
  lb->ops->set_idle(lb, use ? rd_sampler_unit_help : NULL, use ? p : NULL);
}
