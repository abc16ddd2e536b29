/* train_request.h - the state of one TrainStep request: how many steps it
 * asked for, what they did, when it stops, and its result.
 *
 * Contract. A pipeline runs one request at a time (rd_pipeline_train in
 * pipeline.h accepts it; RD_EBUSY otherwise). Every function here is
 * called under the pipeline's mutex and does no I/O; the done callback a
 * request carries is returned to the caller, which runs it after
 * unlocking (pipeline.h: no callback under a lock). A stopped request
 * (deadline, error, stop) takes no new batches and ends once the batches
 * already sampled for it are written back or dropped.
 *
 * Why apart from the threads: the learner counts steps into the request,
 * the sampler ends it when sampling fails, stop cancels it; one type keeps
 * the result's arithmetic (means, steps per second) in one place.
 */
#ifndef RD_TRAIN_REQUEST_H
#define RD_TRAIN_REQUEST_H

#include <stdint.h>

#include "learner.h"
#include "pipeline.h"

typedef struct {
  int active;         /* a request is running */
  int stop;           /* it takes no new batches (deadline, error) */
  uint32_t steps, done, skipped;
  double loss, td_sum, td_max, items; /* sums over its trained steps */
  double start, deadline;             /* CLOCK_MONOTONIC seconds; deadline <= 0: none */
  int status;                         /* RD_OK, or why it stopped */
  char msg[200];
  rd_train_done_cb cb;
  void *arg;
} rd_train_req_t;

/* Start a request of `steps` steps at time now. */
void rd_train_req_begin(rd_train_req_t *r, uint32_t steps, double deadline, rd_train_done_cb cb,
                        void *arg, double now);

/* Stop taking batches with this status and message. 1 if this call
 * stopped it (it was active and not stopped yet), else 0. */
int rd_train_req_stop(rd_train_req_t *r, int status, const char *msg);

/* 1 if the deadline has passed at time now. */
int rd_train_req_expired(const rd_train_req_t *r, double now);

/* 1 if the next counted step is the request's last. */
int rd_train_req_next_is_last(const rd_train_req_t *r);

/* Count one step of `items` items: trained (st) or skipped. */
void rd_train_req_trained(rd_train_req_t *r, const rd_step_stats_t *st, uint32_t items);
void rd_train_req_skipped(rd_train_req_t *r);

/* 1 if every step is counted or the request stopped (its batches still in
 * flight are the caller's to wait for). */
int rd_train_req_over(const rd_train_req_t *r);

/* End the request: fill *res (steps, means, steps/s up to now, status,
 * weight_version), clear it, and return its callback and *arg. */
rd_train_done_cb rd_train_req_finish(rd_train_req_t *r, uint64_t weight_version, double now,
                                     rd_train_result_t *res, void **arg);

/* End the request because the pipeline stops: *res says RD_ECANCELED. */
rd_train_done_cb rd_train_req_cancel(rd_train_req_t *r, uint64_t weight_version,
                                     rd_train_result_t *res, void **arg);

#endif
