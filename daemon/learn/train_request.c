/* train_request.c - TrainStep requests: their state (train_request.h) and
 * the pipeline's side of them: accepting one (rd_pipeline_train), waiting
 * for one (rd_pipeline_train_wait), stopping and ending one under the
 * pipeline's mutex. */
#include "train_request.h"

#include <stdio.h>
#include <string.h>

#include "pipeline_internal.h"
#include "rd_clock.h"

void rd_train_req_begin(rd_train_req_t *r, uint32_t steps, double deadline, rd_train_done_cb cb,
                        void *arg, double now) {
  memset(r, 0, sizeof *r);
  r->active = 1;
  r->steps = steps;
  r->start = now;
  r->deadline = deadline;
  r->status = RD_OK;
  r->cb = cb;
  r->arg = arg;
}

int rd_train_req_stop(rd_train_req_t *r, int status, const char *msg) {
  if (!r->active || r->stop) return 0;
  r->stop = 1;
  r->status = status;
  snprintf(r->msg, sizeof r->msg, "%s", msg);
  return 1;
}

int rd_train_req_expired(const rd_train_req_t *r, double now) {
  return r->deadline > 0 && now >= r->deadline;
}

int rd_train_req_next_is_last(const rd_train_req_t *r) {
  return r->active && r->done + r->skipped + 1 == r->steps;
}

void rd_train_req_trained(rd_train_req_t *r, const rd_step_stats_t *st, uint32_t items) {
  r->done++;
  r->loss += st->loss;
  r->td_sum += st->td_abs_mean * items;
  r->items += items;
  if (st->td_abs_max > r->td_max) r->td_max = st->td_abs_max;
}

void rd_train_req_skipped(rd_train_req_t *r) { r->skipped++; }

int rd_train_req_over(const rd_train_req_t *r) {
  return r->active && (r->stop || r->done + r->skipped >= r->steps);
}

static rd_train_done_cb req_end(rd_train_req_t *r, void **arg) {
  rd_train_done_cb cb = r->cb;
  *arg = r->arg;
  r->active = 0;
  r->cb = NULL;
  return cb;
}

rd_train_done_cb rd_train_req_finish(rd_train_req_t *r, uint64_t weight_version, double now,
                                     rd_train_result_t *res, void **arg) {
  memset(res, 0, sizeof *res);
  res->steps_done = r->done;
  res->skipped_steps = r->skipped;
  res->loss_mean = r->done ? r->loss / r->done : 0;
  res->td_abs_mean = r->items > 0 ? r->td_sum / r->items : 0;
  res->td_abs_max = r->td_max;
  res->weight_version = weight_version;
  double dt = now - r->start;
  res->steps_per_second = dt > 0 ? (double)r->done / dt : 0;
  res->status = r->status;
  snprintf(res->message, sizeof res->message, "%s", r->msg);
  return req_end(r, arg);
}

rd_train_done_cb rd_train_req_cancel(rd_train_req_t *r, uint64_t weight_version,
                                     rd_train_result_t *res, void **arg) {
  memset(res, 0, sizeof *res);
  res->steps_done = r->done;
  res->skipped_steps = r->skipped;
  res->loss_mean = r->done ? r->loss / r->done : 0;
  res->weight_version = weight_version;
  res->status = RD_ECANCELED;
  snprintf(res->message, sizeof res->message, "the workload stopped training (deleted, or the "
           "server is shutting down)");
  return req_end(r, arg);
}

/* ------------------------------------------------------------------ */
/* The pipeline's side                                                 */
/* ------------------------------------------------------------------ */

void rd_pl_request_stop(rd_pipeline_t *p, int status, const char *msg) {
  if (rd_train_req_stop(&p->req, status, msg)) p->target = p->sampled;
}

rd_train_done_cb rd_pl_request_take_done(rd_pipeline_t *p, rd_train_result_t *res, void **arg) {
  if (p->in_flight != 0 || !rd_train_req_over(&p->req)) return NULL;
  rd_train_done_cb cb =
      rd_train_req_finish(&p->req, p->stats.weight_version, rd_clock_now(), res, arg);
  p->stats.steps_per_second = res->steps_per_second;
  pthread_cond_broadcast(&p->cv_idle);
  return cb;
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
  } else if (p->req.active) {
    rc = rd_error_set(err, RD_EBUSY, "a TrainStep is already running on this workload");
  } else {
    rd_train_req_begin(&p->req, steps, deadline_mono, cb, arg, rd_clock_now());
    if (p->in_flight == 0 && p->sampled >= p->target) p->idle_gap = 1;
    p->target = p->sampled + steps;
    rd_pl_wake_sampler(p);
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
