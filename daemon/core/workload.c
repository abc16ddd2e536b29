/* workload.c - one workload: its lifetime and the calls on its data.
 *
 * Every data call has the same shape: check the request against the
 * workload's limits (no lock needed: they are constant), take the lock,
 * refuse a deleted workload, call the table, let go. The table's errors
 * are then said as a client should hear them (table_error).
 */
#include "workload.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "durable.h"
#include "log.h"
#include "tenant.h"

/* The table's errors are about the request's contents, except an empty
 * table (or only zero priorities: RD_EEMPTY) and memory: a key never
 * issued (RD_ENOTFOUND) or more rows than the table holds (RD_ETOOBIG)
 * is a bad argument, not a missing workload or a server limit. */
static int table_error(int rc, rd_error_t *err) {
  if (rc == RD_EEMPTY || rc == RD_ENOMEM || rc == RD_EINTERNAL) return rc; /* INTERNAL: a device */
  if (err) err->code = RD_EINVAL;
  return RD_EINVAL;
}

static int deleted_error(const rd_workload_t *w, rd_error_t *err) {
  return rd_error_set(err, RD_ENOTFOUND, "workload %s was deleted", w->id);
}

/* A table call failed with RD_EINTERNAL: the device under its replay module
 * or storage failed (table.h). Under the lock: move the table to the CPU
 * (what cannot come back is dropped as the ring drops old items), give the
 * device up and say so in the placement, so that the caller can make the
 * call again on the CPU. 1 if the table moved. */
static int table_fault(rd_workload_t *w, const rd_error_t *why) {
  if (!w->table.module_failed) return 0; /* not a module's failure */
  char mod[64];
  snprintf(mod, sizeof mod, "%s / %s", rd_table_rmm_name(&w->table),
           rd_table_storage_name(&w->table));
  uint64_t lost = 0;
  rd_error_t e;
  rd_error_clear(&e);
  if (rd_table_to_cpu(&w->table, &lost, &e) != RD_OK) {
    rd_log_error("workload", "workload %s: its replay module %s failed (%s) and the table "
                 "could not move to the CPU: %s", w->id, mod, why->msg, e.msg);
    return 0;
  }
  rd_log_error("workload", "workload %s: its replay module %s failed (%s); the table runs on "
               "the CPU from now on, %llu items lost%s%s", w->id, mod, why->msg,
               (unsigned long long)lost, e.msg[0] ? ": " : "", e.msg);
  if (w->placement) rd_placement_table_failed(w->placement, why->msg);
  return 1;
}

/* The same for the pipeline's calls on the table (pipeline.h table_fault). */
static int pipeline_table_fault(void *arg, const rd_error_t *why) {
  return table_fault(arg, why);
}

/* The pipeline's sampler through the limiter (pipeline.h limiter_take),
 * under the lock. */
static uint32_t pipeline_limiter_take(void *arg, uint32_t batch, uint32_t want, int gated) {
  rd_workload_t *w = arg;
  uint64_t n = rd_table_size(&w->table);
  if (gated) return rd_limiter_take_batches(&w->limiter, batch, want, n);
  rd_limiter_count_samples(&w->limiter, (uint64_t)batch * want, n);
  return want;
}

static void pipeline_limiter_give_back(void *arg, uint32_t batch, uint32_t n) {
  rd_workload_t *w = arg;
  rd_limiter_unsample(&w->limiter, (uint64_t)batch * n, rd_table_size(&w->table));
}

/* ------------------------------------------------------------------ */
/* Data calls                                                          */
/* ------------------------------------------------------------------ */

/* The table's size, as the limiter counts N. Under the lock. */
static uint64_t held(rd_workload_t *w) { return rd_table_size(&w->table); }

/* Under the lock: the workload was deleted; a grant wt holds goes back. */
static int deleted_wait(rd_workload_t *w, rd_limiter_wait_t *wt, rd_error_t *err) {
  if (wt != NULL) rd_limiter_release(&w->limiter, wt, held(w));
  return deleted_error(w, err);
}

int rd_workload_insert(rd_workload_t *w, const rd_insert_batch_t *b, uint64_t *keys,
                       uint64_t *first_key, rd_error_t *err) {
  return rd_workload_insert_wait(w, b, NULL, keys, first_key, NULL, err);
}

/* The end of a write, under w->lock: *lsn (when asked) = the journal record
 * a durable reply must wait for (0: none, the write failed or nothing is
 * journaled); unlocks, returns rc. */
static int write_done(rd_workload_t *w, int rc, uint64_t *lsn) {
  rd_journal_t *j = rd_durable_journal(w);
  uint64_t at = rc == RD_OK && j ? rd_journal_last_lsn(j) : 0;
  pthread_mutex_unlock(&w->lock);
  if (lsn) *lsn = at;
  return rc;
}

int rd_workload_insert_wait(rd_workload_t *w, const rd_insert_batch_t *b, rd_limiter_wait_t *wt,
                            uint64_t *keys, uint64_t *first_key, uint64_t *lsn, rd_error_t *err) {
  const rd_schema_t *schema = &w->table.config.schema;
  if (b->count == 0)
    return rd_error_set(err, RD_EINVAL, "insert needs rows with count >= 1");
  if (b->count > w->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "insert of %u rows exceeds max_batch %u", b->count,
                        w->max_batch);
  if (b->n_cols != schema->n_fields)
    return rd_error_set(err, RD_EINVAL, "insert has %zu columns; the schema has %u fields",
                        b->n_cols, schema->n_fields);
  if (b->n_priorities != 0 && b->n_priorities != b->count)
    return rd_error_set(err, RD_EINVAL, "%zu priorities for %u rows (send one per row or none)",
                        b->n_priorities, b->count);
  pthread_mutex_lock(&w->lock);
  int rc;
  uint64_t first = rd_table_next_key(&w->table);
  if (atomic_load(&w->deleted)) {
    rc = deleted_wait(w, wt, err);
  } else if ((rc = rd_durable_admit(w, rd_journal_insert_bytes(b->count, schema->n_fields,
                                                                 w->table.field_bytes,
                                                                 b->n_priorities != 0),
                                    err)) != RD_OK) {
    /* journal mode: refused before anything is applied (a grant given back) */
    if (wt != NULL) rd_limiter_release(&w->limiter, wt, held(w));
  } else if ((rc = rd_limiter_acquire(&w->limiter, RD_LIMIT_INSERT, b->count, held(w), wt,
                                      err)) == RD_OK) {
    if (w->pipeline) rd_pipeline_before_insert(w->pipeline, b->count);
    rc = rd_table_insert(&w->table, b->count, b->cols, b->n_priorities ? b->priorities : NULL,
                         keys, err);
    if (rc == RD_EINTERNAL && table_fault(w, err)) { /* again, on the CPU */
      first = rd_table_next_key(&w->table);
      rc = rd_table_insert(&w->table, b->count, b->cols,
                           b->n_priorities ? b->priorities : NULL, keys, err);
    }
    rd_limiter_inserted(&w->limiter, b->count, rc == RD_OK, held(w));
    if (rc == RD_OK && w->pipeline) rd_pipeline_after_insert(w->pipeline, b->count);
    if (rc) rc = table_error(rc, err);
  }
  rc = write_done(w, rc, lsn);
  if (rc == RD_OK && first_key) *first_key = first;
  return rc;
}

int rd_workload_sample(rd_workload_t *w, const rd_sample_request_t *q, rd_sample_alloc_cb alloc,
                       void *arg, uint64_t *table_size, rd_error_t *err) {
  return rd_workload_sample_wait(w, q, alloc, arg, table_size, NULL, err);
}

int rd_workload_sample_wait(rd_workload_t *w, const rd_sample_request_t *q,
                            rd_sample_alloc_cb alloc, void *arg, uint64_t *table_size,
                            rd_limiter_wait_t *wt, rd_error_t *err) {
  uint32_t n = q->batch;
  if (n == 0) return rd_error_set(err, RD_EINVAL, "batch_size must be >= 1");
  if (n > w->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "sample of %u items exceeds max_batch %u", n,
                        w->max_batch);
  size_t row = rd_schema_row_bytes(&w->table.config.schema);
  size_t bytes = (size_t)n * (3 * sizeof(double) + row);
  if (bytes > w->max_sample_bytes)
    return rd_error_set(err, RD_ETOOBIG, "a sample of %u rows (%zu bytes) would exceed the "
                        "message limit of %llu bytes", n, bytes,
                        (unsigned long long)w->max_sample_bytes);
  rd_sample_out_t out;
  memset(&out, 0, sizeof out);
  int rc = alloc(arg, &w->table, n, &out, err);
  if (rc) return rc;
  double beta = q->has_beta ? q->beta : w->default_beta;
  pthread_mutex_lock(&w->lock);
  if (atomic_load(&w->deleted)) {
    rc = deleted_wait(w, wt, err);
  } else if ((rc = rd_limiter_acquire(&w->limiter, RD_LIMIT_SAMPLE, n, held(w), wt, err)) ==
             RD_OK) {
    rc = rd_table_sample(&w->table, n, beta, q->flags, &out, err);
    if (rc == RD_EINTERNAL && table_fault(w, err))
      rc = rd_table_sample(&w->table, n, beta, q->flags, &out, err);
    if (rc) {
      rd_limiter_unsample(&w->limiter, n, held(w));
      rc = table_error(rc, err);
    }
    if (table_size) *table_size = rd_table_size(&w->table);
  }
  pthread_mutex_unlock(&w->lock);
  return rc;
}

int rd_workload_wait_cancel(rd_workload_t *w, rd_limiter_wait_t *wt) {
  pthread_mutex_lock(&w->lock);
  int r = rd_limiter_cancel(&w->limiter, wt, held(w));
  pthread_mutex_unlock(&w->lock);
  return r;
}

void rd_workload_wait_release(rd_workload_t *w, rd_limiter_wait_t *wt) {
  pthread_mutex_lock(&w->lock);
  rd_limiter_release(&w->limiter, wt, held(w));
  pthread_mutex_unlock(&w->lock);
}

int rd_workload_wait_hold(rd_workload_t *w, rd_limiter_wait_t *wt, rd_error_t *err) {
  pthread_mutex_lock(&w->lock);
  int rc = atomic_load(&w->deleted) ? deleted_error(w, err)
                                    : rd_limiter_hold_slot(&w->limiter, wt, err);
  pthread_mutex_unlock(&w->lock);
  return rc;
}

void rd_workload_wait_end(rd_workload_t *w, rd_limiter_wait_t *wt) {
  pthread_mutex_lock(&w->lock);
  rd_limiter_release(&w->limiter, wt, held(w));
  rd_limiter_drop_slot(&w->limiter, wt);
  pthread_mutex_unlock(&w->lock);
}

int rd_workload_set_limiter(rd_workload_t *w, const rd_limiter_config_t *cfg,
                            const uint8_t *spec, size_t spec_len, rd_error_t *err) {
  if (cfg != NULL) {
    int rc = rd_limiter_config_check(cfg, err);
    if (rc) return rc;
  }
  if (cfg == NULL && w->pipeline != NULL && rd_pipeline_continuous(w->pipeline))
    return rd_error_set(err, RD_ESTATE, "workload %s's hosted learner trains continuously: it "
                        "samples through the rate limiter, which it cannot lose (change its "
                        "ratio instead)", w->id);
  uint8_t *copy = NULL;
  if (spec != NULL && (copy = malloc(spec_len ? spec_len : 1)) == NULL)
    return rd_error_set(err, RD_ENOMEM, "out of memory for the workload's spec");
  if (copy != NULL && spec_len) memcpy(copy, spec, spec_len);
  pthread_mutex_lock(&w->lock);
  int rc = RD_OK;
  if (atomic_load(&w->deleted)) {
    rc = deleted_error(w, err);
  } else {
    rd_limiter_configure(&w->limiter, cfg, held(w));
    if (w->pipeline) rd_pipeline_after_insert(w->pipeline, 0); /* it may sample now */
    if (copy != NULL) {
      uint8_t *old = w->spec;
      w->spec = copy;
      w->spec_len = spec_len;
      copy = old;
    }
  }
  pthread_mutex_unlock(&w->lock);
  free(copy);
  return rc;
}

uint8_t *rd_workload_spec_copy(rd_workload_t *w, size_t *len) {
  pthread_mutex_lock(&w->lock);
  uint8_t *copy = malloc(w->spec_len ? w->spec_len : 1);
  if (copy != NULL) {
    if (w->spec_len) memcpy(copy, w->spec, w->spec_len);
    *len = w->spec_len;
  }
  pthread_mutex_unlock(&w->lock);
  return copy;
}

void rd_workload_close_waits(rd_workload_t *w, int status) {
  pthread_mutex_lock(&w->lock);
  rd_limiter_close(&w->limiter, status);
  pthread_mutex_unlock(&w->lock);
}

void rd_workload_limiter_info(rd_workload_t *w, rd_limiter_info_t *out) {
  pthread_mutex_lock(&w->lock);
  rd_limiter_info(&w->limiter, out);
  pthread_mutex_unlock(&w->lock);
}

int rd_workload_update(rd_workload_t *w, size_t n, const uint64_t *keys, size_t n_priorities,
                       const double *priorities, size_t *stale, rd_error_t *err) {
  return rd_workload_update_lsn(w, n, keys, n_priorities, priorities, stale, NULL, err);
}

int rd_workload_update_lsn(rd_workload_t *w, size_t n, const uint64_t *keys, size_t n_priorities,
                           const double *priorities, size_t *stale, uint64_t *lsn,
                           rd_error_t *err) {
  if (n != n_priorities)
    return rd_error_set(err, RD_EINVAL, "%zu keys but %zu priorities", n, n_priorities);
  if (n > w->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "update of %zu keys exceeds max_batch %u", n,
                        w->max_batch);
  size_t skipped = 0;
  pthread_mutex_lock(&w->lock);
  int rc;
  if (atomic_load(&w->deleted)) {
    rc = deleted_error(w, err);
  } else if ((rc = rd_durable_admit(w, rd_journal_update_bytes(n), err)) != RD_OK) {
    /* journal mode: refused before anything is applied */
  } else {
    rc = rd_table_update(&w->table, n, keys, priorities, &skipped, err);
    if (rc == RD_EINTERNAL && table_fault(w, err))
      rc = rd_table_update(&w->table, n, keys, priorities, &skipped, err);
    if (rc) rc = table_error(rc, err);
  }
  rc = write_done(w, rc, lsn);
  if (rc == RD_OK && stale) *stale = skipped;
  return rc;
}

int rd_workload_learner(const rd_workload_t *w, rd_error_t *err) {
  if (w->pipeline != NULL) return RD_OK;
  return rd_error_set(err, RD_ESTATE, "workload %s has no learner: register it with a learner "
                      "spec to train in the server", w->id);
}

int rd_workload_train(rd_workload_t *w, uint32_t steps, double deadline_mono,
                      rd_train_done_cb cb, void *arg, rd_error_t *err) {
  int rc = rd_workload_learner(w, err);
  if (rc) return rc;
  rc = rd_pipeline_train(w->pipeline, steps, deadline_mono, cb, arg, err);
  /* Continuous mode is a property of the workload, not a request that a
   * retry could get through: the pipeline's RD_EBUSY means both. */
  if (rc == RD_EBUSY && rd_pipeline_continuous(w->pipeline)) {
    if (err) err->code = RD_ESTATE;
    rc = RD_ESTATE;
  }
  return rc;
}

void rd_workload_counters(rd_workload_t *w, rd_workload_counters_t *out) {
  pthread_mutex_lock(&w->lock);
  rd_table_stats_t st = rd_table_stats(&w->table);
  uint64_t size = rd_table_size(&w->table);
  size_t bytes = rd_table_memsize(&w->table);
  pthread_mutex_unlock(&w->lock);
  out->inserts = st.inserts;
  out->samples = st.samples;
  out->updates = st.updates;
  out->stale_updates = st.stale_updates;
  out->size = size;
  out->bytes = bytes;
}

int rd_workload_token_ok(const rd_workload_t *w, const char *token, size_t len) {
  if (w == NULL || token == NULL) return 0;
  return rd_token_matches(w->token_hash, token, len);
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                            */
/* ------------------------------------------------------------------ */

void rd_workload_free(rd_workload_t *w) {
  rd_pipeline_destroy(w->pipeline); /* its threads use the table: first */
  rd_durable_release(w->durable);   /* the journal, which the table's observer feeds */
  rd_table_free(&w->table);
  free(w->spec);
  free(w->placement);
  rd_tenant_unref(w->tenant);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

void rd_workload_unref(rd_workload_t *w) {
  if (w == NULL) return;
  int before = atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel);
  if (before == 1) rd_workload_free(w);
}

/* The table; or, when the placement's replay module or storage cannot be
 * created (busy: an XRT board's kernel holds one tree, rmm_xrt.h; a GPU out
 * of memory or failing, rmm_gpu.h), the CPU tree and host rows, with
 * wc->table and pl's running and note saying so. */
static int table_init(rd_workload_config_t *wc, rd_placement_t *pl, const char *id,
                      rd_table_t *t, rd_error_t *err) {
  const rd_table_config_t *tc = &wc->table;
  const int off_cpu = tc->rmm != NULL || tc->storage != NULL;
  rd_error_t rerr;
  rd_error_clear(&rerr);
  int rc = rd_table_init(t, tc, off_cpu ? &rerr : err);
  if (rc && off_cpu) {
    rd_log_warn("registry", "workload %s: its replay module %s / storage %s cannot be created "
                "(%s); its table runs on the CPU tree with its rows in host memory", id,
                tc->rmm ? tc->rmm->name : "cpu", tc->storage ? tc->storage->name : "host",
                rerr.msg);
    if (pl != NULL) rd_placement_rmm_on_cpu(pl, rerr.msg);
    wc->table.rmm = NULL;
    wc->table.storage = NULL;
    rc = rd_table_init(t, tc, err);
  }
  return rc;
}

int rd_workload_new(rd_workload_config_t *wc, rd_placement_t *pl, const char *name,
                    const uint8_t *spec, size_t spec_len, const char *id,
                    const uint8_t token_hash[RD_TOKEN_HASH_LEN], int64_t created,
                    uint64_t max_sample_bytes, rd_workload_t **out, rd_error_t *err) {
  rd_workload_t *w = calloc(1, sizeof *w);
  uint8_t *copy = malloc(spec_len ? spec_len : 1);
  if (w == NULL || copy == NULL) {
    free(w);
    free(copy);
    return rd_error_set(err, RD_ENOMEM, "out of memory creating a workload");
  }
  int rc = table_init(wc, pl, id, &w->table, err);
  if (rc) {
    free(copy);
    free(w);
    return rc;
  }
  pthread_mutex_init(&w->lock, NULL);
  rd_limiter_init(&w->limiter, wc->has_limiter ? &wc->limiter : NULL, wc->table.capacity, NULL);
  if (wc->has_learner) {
    wc->learner.table_fault = pipeline_table_fault; /* the pipeline's table calls too */
    wc->learner.table_fault_arg = w;
    wc->learner.limiter_take = pipeline_limiter_take; /* one limiter, one ratio */
    wc->learner.limiter_give_back = pipeline_limiter_give_back;
    wc->learner.limiter_arg = w;
    rc = rd_pipeline_create(&w->pipeline, &wc->learner, &w->table, &w->lock, err);
    if (rc) {
      pthread_mutex_destroy(&w->lock);
      rd_table_free(&w->table);
      free(copy);
      free(w);
      return rc;
    }
  }
  uint64_t a, b, c, d;
  w->charge = rd_workload_config_charge(wc, &a, &b, &c, &d);
  memcpy(w->id, id, RD_WORKLOAD_ID_LEN + 1);
  memcpy(w->token_hash, token_hash, RD_TOKEN_HASH_LEN);
  snprintf(w->name, sizeof w->name, "%s", name ? name : "");
  if (spec_len) memcpy(copy, spec, spec_len);
  w->spec = copy;
  w->spec_len = spec_len;
  w->created_unix = created;
  w->default_beta = wc->beta;
  w->max_batch = wc->table.max_batch;
  w->max_sample_bytes = max_sample_bytes;
  atomic_init(&w->refs, 1);
  atomic_init(&w->deleted, false);
  *out = w;
  return RD_OK;
}
