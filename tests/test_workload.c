/* test_workload.c - core's workload API (workload.h, workload_spec.h)
 * without the wire: a spec in C, and insert, sample, update and
 * train-step owning their limits, the lock and the deleted check. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "rdt_pb.h"
#include "rdt_unit.h"
#include "spec_pb.h"
#include "rdt_main.h"

static const uint8_t stored[] = "opaque to core";

static rd_workload_spec_t c_spec(void) {
  rd_workload_spec_t s;
  memset(&s, 0, sizeof s);
  s.name = "c-spec";
  s.fields = rdt_cartpole_field_specs; /* obs float32[4], action, reward: 24 bytes a row */
  s.n_fields = 3;
  s.capacity = 256;
  s.max_batch = 64;
  s.stored = stored;
  s.stored_len = sizeof stored;
  return s;
}

static rd_config_t test_config(void) {
  rd_config_t c;
  rd_config_defaults(&c);
  c.max_batch = 1024;
  return c;
}

static rd_registry_t *make_registry(const rd_config_t *cfg) {
  rd_registry_t *r = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_create(&r, cfg, NULL, &err) != RD_OK) fail_msg("registry: %s", err.msg);
  return r;
}

static rd_workload_t *make_workload(rd_registry_t *r) {
  rd_workload_spec_t s = c_spec();
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_register(r, &s, NULL, &w, NULL, &err) != RD_OK) fail_msg("register: %s", err.msg);
  return w;
}

/* n rows: obs[0] = i, everything else 0. */
typedef struct {
  float obs[64 * 4];
  int32_t act[64];
  float rew[64];
  rd_cbuf_t cols[3];
  rd_insert_batch_t b;
} rows_t;

static void make_rows(rows_t *r, uint32_t n) {
  memset(r, 0, sizeof *r);
  for (uint32_t i = 0; i < n && i < 64; i++) r->obs[i * 4] = (float)i;
  r->cols[0] = (rd_cbuf_t){r->obs, (size_t)n * 16};
  r->cols[1] = (rd_cbuf_t){r->act, (size_t)n * 4};
  r->cols[2] = (rd_cbuf_t){r->rew, (size_t)n * 4};
  r->b.count = n;
  r->b.cols = r->cols;
  r->b.n_cols = 3;
}

static int expect(int rc, int want, const rd_error_t *err, const char *text) {
  if (rc != want || (text && strstr(err->msg, text) == NULL))
    fail_msg("got %s \"%s\", want %s with \"%s\"", rd_err_name(rc), err->msg, rd_err_name(want),
             text ? text : "");
  return rc;
}

/* The tests' fixture: a registry of test_config() holding one c_spec()
 * workload; with ten_rows_setup (the update and deleted-workload tests),
 * the 10 rows inserted into it too. */
typedef struct {
  rd_registry_t *r;
  rows_t rows;
  rd_workload_t *w;
} wl_fx_t;

static int workload_setup(void **state) {
  wl_fx_t *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  rd_config_t cfg = test_config();
  f->r = make_registry(&cfg);
  f->w = make_workload(f->r);
  *state = f;
  return 0;
}

static int ten_rows_setup(void **state) {
  if (workload_setup(state) != 0) return -1;
  wl_fx_t *f = *state;
  make_rows(&f->rows, 10);
  assert_int_equal(rd_workload_insert(f->w, &f->rows.b, NULL, NULL, NULL), RD_OK);
  return 0;
}

static int workload_teardown(void **state) {
  wl_fx_t *f = *state;
  rd_workload_unref(f->w);
  rd_registry_destroy(f->r);
  free(f);
  return 0;
}

/* ---- The spec in C ---- */

static void test_c_spec_registers_and_stores_bytes(void **state) {
  rd_workload_t *w = ((wl_fx_t *)*state)->w;
  assert_string_equal(w->name, "c-spec");
  assert_int_equal(w->spec_len, sizeof stored);
  assert_memory_equal(w->spec, stored, sizeof stored);
  assert_ptr_not_equal(w->spec, stored); /* a copy */
  assert_int_equal(w->table.config.capacity, 256);
  assert_int_equal(w->table.config.fanout, 16); /* defaults */
  assert_true(w->table.config.alpha == 0.6);
  assert_true(w->default_beta == 0.4);
  assert_int_equal(w->max_batch, 64);
  assert_int_equal(w->max_sample_bytes, test_config().max_message_bytes);
  assert_int_equal(rd_schema_row_bytes(&w->table.config.schema), 24);
}

static void test_c_spec_errors(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_workload_config_t wc;
  rd_error_t err;
  rd_workload_spec_t s = c_spec();
  rd_field_spec_t bad[3];
  memcpy(bad, rdt_cartpole_field_specs, sizeof bad);
  bad[1].dtype = RD_DTYPE_INVALID; /* the client left it unspecified */
  s.fields = bad;
  expect(rd_workload_spec_resolve(&cfg, &s, &wc, &err), RD_EINVAL, &err,
         "fields[1].dtype is unspecified");
  bad[1].dtype = RD_DTYPE_INT32;
  bad[2].rank = 9;
  expect(rd_workload_spec_resolve(&cfg, &s, &wc, &err), RD_EINVAL, &err,
         "fields[2].shape has rank 9; at most 8");
  s = c_spec();
  s.has_alpha = 1; /* an explicit 0 is a value */
  assert_int_equal(rd_workload_spec_resolve(&cfg, &s, &wc, NULL), RD_OK);
  assert_true(wc.table.alpha == 0);
  s.alpha = NAN;
  expect(rd_workload_spec_resolve(&cfg, &s, &wc, &err), RD_EINVAL, &err, "alpha must be");
  s = c_spec();
  s.max_batch = 2000;
  expect(rd_workload_spec_resolve(&cfg, &s, &wc, &err), RD_ETOOBIG, &err, "--max-batch");
  expect(rd_workload_spec_resolve(&cfg, NULL, &wc, &err), RD_EINVAL, &err, "no workload spec");
}

/* ---- Insert ---- */

static void test_insert_limits_and_errors(void **state) {
  rd_workload_t *w = ((wl_fx_t *)*state)->w;
  rows_t rows;
  rd_error_t err;
  uint64_t keys[64], first = 99;

  make_rows(&rows, 0);
  expect(rd_workload_insert(w, &rows.b, NULL, NULL, &err), RD_EINVAL, &err, "count >= 1");
  make_rows(&rows, 10);
  rows.b.count = 65;
  expect(rd_workload_insert(w, &rows.b, NULL, NULL, &err), RD_ETOOBIG, &err,
         "insert of 65 rows exceeds max_batch 64");
  make_rows(&rows, 10);
  rows.b.n_cols = 2;
  expect(rd_workload_insert(w, &rows.b, NULL, NULL, &err), RD_EINVAL, &err,
         "insert has 2 columns; the schema has 3 fields");
  make_rows(&rows, 10);
  double pr[3] = {1, 1, 1};
  rows.b.priorities = pr;
  rows.b.n_priorities = 3;
  expect(rd_workload_insert(w, &rows.b, NULL, NULL, &err), RD_EINVAL, &err,
         "3 priorities for 10 rows");
  /* The table's own errors, said as the request's: a short column. */
  make_rows(&rows, 10);
  rows.cols[1].bytes -= 1;
  expect(rd_workload_insert(w, &rows.b, NULL, NULL, &err), RD_EINVAL, &err, "action");
  assert_int_equal(err.code, RD_EINVAL);
  assert_int_equal(rd_table_size(&w->table), 0); /* none of it changed anything */

  make_rows(&rows, 10);
  assert_int_equal(rd_workload_insert(w, &rows.b, keys, &first, &err), RD_OK);
  assert_int_equal(first, 0);
  assert_int_equal(keys[9], 9);
  assert_int_equal(rd_workload_insert(w, &rows.b, NULL, &first, &err), RD_OK);
  assert_int_equal(first, 10);
  rd_workload_counters_t c;
  rd_workload_counters(w, &c);
  assert_int_equal(c.inserts, 20);
  assert_int_equal(c.size, 20);
}

/* ---- Sample ---- */

typedef struct {
  int calls;
  uint32_t n;
  uint64_t keys[64];
  double probs[64], weights[64];
  uint8_t obs[64 * 16], act[64 * 4], rew[64 * 4];
  rd_buf_t cols[3];
} sink_t;

static int sink_alloc(void *arg, const rd_table_t *t, uint32_t n, rd_sample_out_t *out,
                      rd_error_t *err) {
  sink_t *s = arg;
  (void)err;
  assert_int_equal(t->config.schema.n_fields, 3);
  s->calls++;
  s->n = n;
  s->cols[0] = (rd_buf_t){s->obs, (size_t)n * 16};
  s->cols[1] = (rd_buf_t){s->act, (size_t)n * 4};
  s->cols[2] = (rd_buf_t){s->rew, (size_t)n * 4};
  *out = (rd_sample_out_t){s->keys, s->probs, s->weights, s->cols};
  return RD_OK;
}

static int refuse_alloc(void *arg, const rd_table_t *t, uint32_t n, rd_sample_out_t *out,
                        rd_error_t *err) {
  (void)arg, (void)t, (void)n, (void)out;
  return rd_error_set(err, RD_ENOMEM, "no room");
}

static void test_sample_limits_then_memory_then_table(void **state) {
  rd_workload_t *w = ((wl_fx_t *)*state)->w;
  sink_t sink;
  memset(&sink, 0, sizeof sink);
  rd_error_t err;
  uint64_t size = 99;
  rd_sample_request_t q = {0, 0, 0, 0};
  /* Limits first: the caller's memory is never asked for. */
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_EINVAL, &err,
         "batch_size must be >= 1");
  q.batch = 65;
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_ETOOBIG, &err,
         "sample of 65 items exceeds max_batch 64");
  q.batch = 8;
  w->max_sample_bytes = 8 * (24 + 24) - 1;
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_ETOOBIG, &err,
         "a sample of 8 rows (384 bytes) would exceed the message limit of 383 bytes");
  assert_int_equal(sink.calls, 0);
  w->max_sample_bytes = test_config().max_message_bytes;
  /* Then the memory, then the table: empty. */
  expect(rd_workload_sample(w, &q, refuse_alloc, NULL, &size, &err), RD_ENOMEM, &err, "no room");
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_EEMPTY, &err, "empty");
  assert_int_equal(sink.calls, 1);

  rows_t rows;
  make_rows(&rows, 5);
  assert_int_equal(rd_workload_insert(w, &rows.b, NULL, NULL, &err), RD_OK);
  /* More rows than the table holds: the table's RD_ETOOBIG is the
   * request's error, not a server limit. */
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_EINVAL, &err,
         "sample of 8 items from a table holding 5");
  assert_int_equal(err.code, RD_EINVAL);
  q.has_beta = 1;
  q.beta = 2;
  q.batch = 4;
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_EINVAL, &err,
         "beta must be in [0, 1]");
  q.beta = 0; /* no IS correction: every weight 1 */
  assert_int_equal(rd_workload_sample(w, &q, sink_alloc, &sink, &size, &err), RD_OK);
  assert_int_equal(sink.n, 4);
  assert_int_equal(size, 5);
  for (int i = 0; i < 4; i++) {
    assert_true(sink.keys[i] < 5);
    assert_true(sink.weights[i] == 1.0);
    float o0;
    memcpy(&o0, sink.obs + i * 16, 4);
    assert_true(o0 == (float)sink.keys[i]); /* the row of that key */
  }
}

/* ---- Update ---- */

static void test_update_limits_and_errors(void **state) {
  rd_workload_t *w = ((wl_fx_t *)*state)->w;
  rd_error_t err;
  uint64_t keys[65] = {0};
  double pr[65] = {0};
  expect(rd_workload_update(w, 2, keys, 1, pr, NULL, &err), RD_EINVAL, &err,
         "2 keys but 1 priorities");
  expect(rd_workload_update(w, 65, keys, 65, pr, NULL, &err), RD_ETOOBIG, &err,
         "update of 65 keys exceeds max_batch 64");
  keys[1] = 10; /* never issued: the request's error */
  pr[0] = pr[1] = 1;
  expect(rd_workload_update(w, 2, keys, 2, pr, NULL, &err), RD_EINVAL, &err,
         "key 10 at batch index 1 was never issued");
  keys[1] = 1;
  pr[1] = NAN;
  expect(rd_workload_update(w, 2, keys, 2, pr, NULL, &err), RD_EINVAL, &err, NULL);
  pr[1] = 2;
  size_t stale = 99;
  assert_int_equal(rd_workload_update(w, 2, keys, 2, pr, &stale, &err), RD_OK);
  assert_int_equal(stale, 0);
  rd_workload_counters_t c;
  rd_workload_counters(w, &c);
  assert_int_equal(c.updates, 2);
}

/* ---- Deleted, learner ---- */

static void test_deleted_workload_refuses_data_calls(void **state) {
  wl_fx_t *f = *state;
  rd_workload_t *w = f->w;
  rd_error_t err;
  assert_int_equal(rd_registry_delete(f->r, w->id, &err), RD_OK);
  char want[80];
  snprintf(want, sizeof want, "workload %s was deleted", w->id);
  expect(rd_workload_insert(w, &f->rows.b, NULL, NULL, &err), RD_ENOTFOUND, &err, want);
  sink_t sink;
  memset(&sink, 0, sizeof sink);
  rd_sample_request_t q = {4, 0, 0, 0};
  expect(rd_workload_sample(w, &q, sink_alloc, &sink, NULL, &err), RD_ENOTFOUND, &err, want);
  uint64_t keys[1] = {0};
  double pr[1] = {1};
  expect(rd_workload_update(w, 1, keys, 1, pr, NULL, &err), RD_ENOTFOUND, &err, want);
  rd_workload_counters_t c;
  rd_workload_counters(w, &c);
  assert_int_equal(c.inserts, 10); /* nothing changed */
  assert_int_equal(c.samples, 0);
  assert_int_equal(c.updates, 0);
  expect(rd_workload_train(w, 1, 0, NULL, NULL, &err), RD_ESTATE, &err, "has no learner");
  expect(rd_workload_learner(w, &err), RD_ESTATE, &err, "has no learner");
}

/* A learner in continuous mode: TrainStep is not for it (RD_ESTATE, a
 * property of the workload), unlike a request already running (RD_EBUSY). */
static void test_train_continuous_is_a_state(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg);
  rdt_pb_spec_t s;
  rdt_pb_spec_init(&s, "continuous", 128);
  rdt_pb_cartpole(&s, 5);
  rdt_pb_dqn(&s, 1, 8, 8);
  s.learner.samples_per_insert = 1;
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_spec_pb_register(r, &s.spec, NULL, &w, &err) != RD_OK) fail_msg("%s", err.msg);
  assert_int_equal(rd_workload_learner(w, &err), RD_OK);
  expect(rd_workload_train(w, 1, 0, NULL, NULL, &err), RD_ESTATE, &err, "continuously");
  assert_int_equal(err.code, RD_ESTATE);
  rd_workload_unref(w);
  rd_registry_stop_learners(r);
  rd_registry_destroy(r);
}

RDT_MAIN(rdt_quiet_setup, rdt_quiet_teardown,
         cmocka_unit_test_setup_teardown(test_c_spec_registers_and_stores_bytes, workload_setup,
                                         workload_teardown),
         cmocka_unit_test(test_c_spec_errors),
         cmocka_unit_test_setup_teardown(test_insert_limits_and_errors, workload_setup,
                                         workload_teardown),
         cmocka_unit_test_setup_teardown(test_sample_limits_then_memory_then_table,
                                         workload_setup, workload_teardown),
         cmocka_unit_test_setup_teardown(test_update_limits_and_errors, ten_rows_setup,
                                         workload_teardown),
         cmocka_unit_test_setup_teardown(test_deleted_workload_refuses_data_calls, ten_rows_setup,
                                         workload_teardown),
         cmocka_unit_test(test_train_continuous_is_a_state))
