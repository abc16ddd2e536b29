/* workload.h - one workload and the calls on its data.
 *
 * A workload is a registered spec plus its state: a prioritized table
 * (backends/cpu/table.h), the mutex that serializes every call on it, a
 * hosted learner's pipeline (or none) and its secret token. The registry
 * (registry.h) creates, lists and deletes workloads; a caller borrows one
 * (rd_registry_get) and gives it back with rd_workload_unref, so a workload
 * deleted during a call is freed only when that call is done.
 *
 * Insert, sample, update and train-step go through the calls below, never
 * straight to the table or the pipeline: each owns what every caller would
 * otherwise repeat. It checks the request against the workload's limits
 * first (RD_ETOOBIG past max_batch or max_sample_bytes), takes the lock
 * only around the table call, and refuses a workload deleted meanwhile
 * (RD_ENOTFOUND). Errors say what the caller should tell its client:
 *   RD_EINVAL     the request's contents (a column of the wrong size, a NaN
 *                 priority, a key never issued, more rows than the table
 *                 holds): the table's own messages, naming field and row;
 *   RD_EEMPTY     nothing to sample yet (an empty table, all priorities 0);
 *   RD_ESTATE     the workload cannot do this (no learner; it trains
 *                 continuously);
 *   RD_EBUSY, RD_ECANCELED, RD_ENOMEM as rd_error.h says.
 * A failing call changes nothing. No protobuf type appears in core.
 *
 * Flow control (rate_limiter.h). Inserts and samples, the hosted learner's
 * included, go through the workload's rate limiter, under the same lock
 * hold as the table call. A call the limiter holds back fails at once
 * (RD_ETIMEDOUT) or, given a rd_limiter_wait_t, waits without a thread:
 * rd_workload_insert_wait / rd_workload_sample_wait return RD_LIMIT_QUEUED
 * and the wait's wake runs once, later, when the call may go (call again
 * with the same wait: it runs on its grant) or must end (call again: it
 * returns the end, RD_ENOTFOUND once the workload is deleted, RD_ECANCELED
 * when the server drains).
 */
#ifndef RD_WORKLOAD_H
#define RD_WORKLOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline.h"
#include "place_history.h"
#include "placement.h"
#include "rate_limiter.h"
#include "rd_error.h"
#include "secrets.h"
#include "table.h"
#include "workload_spec.h"

#define RD_WORKLOAD_ID_LEN 32    /* hex characters */
#define RD_WORKLOAD_TOKEN_LEN 64 /* hex characters */

typedef struct rd_workload {
  char id[RD_WORKLOAD_ID_LEN + 1];
  uint8_t token_hash[RD_TOKEN_HASH_LEN]; /* SHA-256 of the token (secrets.h): never the token */
  char name[RD_WORKLOAD_NAME_MAX + 1];
  int64_t created_unix;
  uint8_t *spec;       /* the spec as stored (rd_workload_spec_t.stored); owned; under
                          lock once published (rd_workload_set_limiter replaces it) */
  size_t spec_len;
  double default_beta;
  uint32_t max_batch;       /* rows an insert, sample or update may carry */
  uint64_t max_sample_bytes; /* a sample's rows, keys, probabilities and weights
                                together (--max-message-bytes: its reply must fit) */
  rd_table_t table;
  pthread_mutex_t lock;      /* serializes every table call */
  rd_pipeline_t *pipeline;   /* hosted learner, or NULL */
  uint64_t charge;           /* bytes counted against --max-memory */
  uint64_t gpu_charge;       /* GPU bytes counted against its tenant's quota */
  rd_placement_t *placement; /* a hosted learner's mapping (placement.h), or NULL; set
                                before the workload is published; a move (workload_move.h)
                                rewrites its contents under lock */
  atomic_int refs;
  atomic_bool deleted;
  struct rd_wl_durable *durable; /* checkpoints and journal (durable.h); NULL: durability none */
  rd_limiter_t limiter;      /* under lock; bounds set by the registry before publishing */
  struct rd_tenant *tenant;  /* its owner (tenant.h), referenced; NULL only outside a registry */
  rd_place_history_t history; /* under lock: its placement events (workload_move.h) */
} rd_workload_t;

/* ---- Data calls ---- */

/* A batch of rows to insert: one column per schema field, in schema
 * order, count rows each; priorities: one per row, or none (n = 0: the
 * largest seen so far). */
typedef struct {
  uint32_t count;
  const rd_cbuf_t *cols;
  size_t n_cols;
  const double *priorities;
  size_t n_priorities;
} rd_insert_batch_t;

/* Insert a batch whole. keys (may be NULL; room for b->count) receives the
 * new keys, *first_key (may be NULL) the first. A sampled batch whose rows
 * this insert would overwrite is gathered first (pipeline.h). */
int rd_workload_insert(rd_workload_t *w, const rd_insert_batch_t *b, uint64_t *keys,
                       uint64_t *first_key, rd_error_t *err);

/* Where a sample goes: called once the request has passed the limits and
 * before the lock is taken. Point out's keys, probabilities and weights at
 * n values each and out->cols[f] at n * table->field_bytes[f] bytes, all
 * memory the caller owns (the reply's, so rows are copied once), or return
 * an error (RD_ENOMEM), which ends the sample. */
typedef int (*rd_sample_alloc_cb)(void *arg, const rd_table_t *table, uint32_t n,
                                  rd_sample_out_t *out, rd_error_t *err);

typedef struct {
  uint32_t batch;
  int has_beta; /* 0: the workload's default_beta */
  double beta;
  unsigned flags; /* table.h RD_SAMPLE_* */
} rd_sample_request_t;

/* Sample q->batch rows into the memory alloc provides. *table_size
 * receives the items held. */
int rd_workload_sample(rd_workload_t *w, const rd_sample_request_t *q, rd_sample_alloc_cb alloc,
                       void *arg, uint64_t *table_size, rd_error_t *err);

/* Set the priorities of n keys (raw |delta|, transformed as inserts are);
 * n_priorities must equal n. *stale (may be NULL) receives how many keys
 * had been overwritten already and were skipped. */
int rd_workload_update(rd_workload_t *w, size_t n, const uint64_t *keys, size_t n_priorities,
                       const double *priorities, size_t *stale, rd_error_t *err);
/* The same, with its journal record's lsn (as rd_workload_insert_wait's). */
int rd_workload_update_lsn(rd_workload_t *w, size_t n, const uint64_t *keys, size_t n_priorities,
                           const double *priorities, size_t *stale, uint64_t *lsn,
                           rd_error_t *err);

/* rd_workload_insert and rd_workload_sample with a wait (see "Flow
 * control" above); wt NULL: fail fast, RD_ETIMEDOUT when held back. A
 * queued sample has called alloc: the caller frees that memory now rather
 * than hold it while it waits.
 * The insert also says where its journal record is (journal mode,
 * durable.h): *lsn (may be NULL) receives it, 0 when there is no journal;
 * the caller acknowledges the insert once that record is on disk
 * (rd_journal_when_durable on rd_durable_journal(w)). In journal mode an
 * insert is refused, nothing applied, while the journal is failed
 * (RD_ESTORE) or too far behind the disk (RD_ETOOBIG). */
int rd_workload_insert_wait(rd_workload_t *w, const rd_insert_batch_t *b, rd_limiter_wait_t *wt,
                            uint64_t *keys, uint64_t *first_key, uint64_t *lsn,
                            rd_error_t *err);
int rd_workload_sample_wait(rd_workload_t *w, const rd_sample_request_t *q,
                            rd_sample_alloc_cb alloc, void *arg, uint64_t *table_size,
                            rd_limiter_wait_t *wt, rd_error_t *err);

/* The caller of wt is gone (rd_limiter_cancel): 1 if wt was queued and
 * will not be woken, else 0. */
int rd_workload_wait_cancel(rd_workload_t *w, rd_limiter_wait_t *wt);

/* Drop wt: dequeue it or give back the grant it holds (rd_limiter_release). */
void rd_workload_wait_release(rd_workload_t *w, rd_limiter_wait_t *wt);

/* A long call that waits again and again (a sample stream) holds one
 * waiting slot from open to end (rate_limiter.h): RD_ETOOBIG past the
 * bounds, RD_ENOTFOUND for a deleted workload, RD_ECANCELED when draining.
 * End: wt is dequeued or gives its grant back, and the slot goes. */
int rd_workload_wait_hold(rd_workload_t *w, rd_limiter_wait_t *wt, rd_error_t *err);
void rd_workload_wait_end(rd_workload_t *w, rd_limiter_wait_t *wt);

/* Replace the rate limiter's config (NULL: none) and, when spec is not
 * NULL, the stored spec that says so (copied); counts stay, waiting calls
 * that may run now are woken. RD_ESTATE: a continuous learner needs one.
 * Writes nothing to the store (registry.h rd_registry_set_limiter does). */
int rd_workload_set_limiter(rd_workload_t *w, const rd_limiter_config_t *cfg,
                            const uint8_t *spec, size_t spec_len, rd_error_t *err);

/* A copy of the stored spec (malloc'd, *len bytes), or NULL (out of memory). */
uint8_t *rd_workload_spec_copy(rd_workload_t *w, size_t *len);

/* Wake every waiting call with status and refuse later waits (delete:
 * RD_ENOTFOUND; drain: RD_ECANCELED). */
void rd_workload_close_waits(rd_workload_t *w, int status);

void rd_workload_limiter_info(rd_workload_t *w, rd_limiter_info_t *out);

/* RD_OK if w has a hosted learner, else RD_ESTATE saying so. */
int rd_workload_learner(const rd_workload_t *w, rd_error_t *err);

/* Start a TrainStep (pipeline.h rd_pipeline_train): cb(arg, result) runs
 * once, from another thread, when it ends. Errors (cb not called):
 * RD_ESTATE (no learner; trains continuously), RD_EINVAL (steps),
 * RD_EBUSY (one is running), RD_EEMPTY (fewer than min_size items),
 * RD_ECANCELED (stopping). */
int rd_workload_train(rd_workload_t *w, uint32_t steps, double deadline_mono,
                      rd_train_done_cb cb, void *arg, rd_error_t *err);

typedef struct {
  uint64_t inserts, samples, updates, stale_updates; /* table.h rd_table_stats_t */
  uint64_t size;  /* items held */
  uint64_t bytes; /* the table's memory */
} rd_workload_counters_t;

/* The table's counters, read under the lock. */
void rd_workload_counters(rd_workload_t *w, rd_workload_counters_t *out);

/* 1 if token[0, len) is the workload's token: its hash compared in
 * constant time (secrets.h). */
int rd_workload_token_ok(const rd_workload_t *w, const char *token, size_t len);

/* ---- Lifetime (the registry's) ---- */

/* A new workload with one reference: its table (and pipeline, when wc has
 * a learner) built, spec_len bytes of spec copied. name, id and the
 * token's hash are copied. When wc->table.rmm is busy (RD_EBUSY: an XRT
 * board's replay kernel holds another workload's tree, rmm_xrt.h), the table gets the CPU
 * tree instead: wc->table.rmm becomes NULL (the caller re-checks the
 * charge) and pl's running and note say so. max_sample_bytes: the server's
 * --max-message-bytes. */
int rd_workload_new(rd_workload_config_t *wc, rd_placement_t *pl, const char *name,
                    const uint8_t *spec, size_t spec_len, const char *id,
                    const uint8_t token_hash[RD_TOKEN_HASH_LEN], int64_t created,
                    uint64_t max_sample_bytes, rd_workload_t **out, rd_error_t *err);

/* Free it now (a workload never published; everyone else unrefs). */
void rd_workload_free(rd_workload_t *w);

void rd_workload_unref(rd_workload_t *w);

#endif
