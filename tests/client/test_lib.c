/* test_lib.c - libreplayd-client against a scripted gRPC server.
 *
 * Each test scripts the mock's reply, makes one client call, and checks
 * both sides: what the client returned and what reached the server (method
 * path, x-replayd-token metadata, the decoded request). Includes the
 * failure paths a real daemon never produces on purpose: undecodable and
 * inconsistent replies, silence past the deadline, a stream ended early.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mock_server.h"
#include "rdt_cl_mock.h"
#include "rdt_client.h"
#include "rdt_pb.h"
#include "replayd.pb-c.h"
#include "rdt_daemon.h"
#include "replayd_client.h"
#include "rd_clock.h"
#include "rdt_main.h"

/* obs float32[4], action int32. */
static void cartpole_spec(rdc_spec_t *s) {
  rdt_client_spec(s, "cartpole", 1000);
  rdt_client_cartpole(s, 2);
}

/* ------------------------------------------------------------------ */

static void test_strerror(void **state) {
  (void)state;
  assert_string_equal(rdc_strerror(RDC_OK), "OK");
  assert_string_equal(rdc_strerror(RDC_NOT_FOUND), "NOT_FOUND");
  assert_string_equal(rdc_strerror(RDC_UNAUTHENTICATED), "UNAUTHENTICATED");
  assert_string_equal(rdc_strerror(RDC_EPROTO), "RDC_EPROTO");
  assert_non_null(rdc_strerror(12345));
  assert_non_null(rdc_strerror(-999));
  assert_string_equal(rdc_dtype_name(RDC_DTYPE_BOOL), "bool");
  assert_string_equal(rdc_dtype_name(77), "invalid");
  rdc_field_t f = {.dtype = RDC_DTYPE_FLOAT32, .rank = 2, .shape = {3, 5}};
  assert_int_equal(rdc_field_bytes(&f), 60);
}

static void test_connect_refused_fails_fast(void **state) {
  (void)state;
  char t[64];
  snprintf(t, sizeof t, "127.0.0.1:%d", rdt_free_port());
  rdc_client_t *c = (rdc_client_t *)0x1;
  rdc_error_t e;
  double t0 = rd_clock_now();
  int rc = rdc_connect(t, 10.0, &c, &e);
  double dt = rd_clock_now() - t0;
  assert_int_equal(rc, RDC_ECONNECT);
  assert_int_equal(e.code, RDC_ECONNECT);
  assert_null(c);
  assert_non_null(strstr(e.msg, t));
  assert_true(dt < 3.0); /* refused: not the whole 10 s */
}

static void test_connect_wait_times_out(void **state) {
  (void)state;
  char t[64];
  snprintf(t, sizeof t, "127.0.0.1:%d", rdt_free_port());
  rdc_connect_opts_t o;
  rdc_connect_opts_init(&o);
  o.wait_for_ready = 1;
  rdc_client_t *c;
  rdc_error_t e;
  double t0 = rd_clock_now();
  assert_int_equal(rdc_connect_ex(t, 0.5, &o, &c, &e), RDC_ECONNECT);
  double dt = rd_clock_now() - t0;
  assert_true(dt >= 0.45 && dt < 3.0);
  assert_non_null(strstr(e.msg, "within"));
}

static void test_connect_bad_args(void **state) {
  (void)state;
  rdc_client_t *c;
  rdc_error_t e;
  assert_int_equal(rdc_connect(NULL, 1, &c, &e), RDC_EINVAL);
  assert_int_equal(rdc_connect("", 1, &c, &e), RDC_EINVAL);
  assert_int_equal(rdc_connect(mock_target, 0, &c, &e), RDC_EINVAL);
  assert_int_equal(rdc_connect(mock_target, NAN, &c, &e), RDC_EINVAL);
  assert_int_equal(rdc_connect(mock_target, 1, NULL, &e), RDC_EINVAL);
  assert_int_equal(rdc_set_deadline(mock_cli, 0), RDC_EINVAL);
  assert_int_equal(rdc_set_deadline(mock_cli, -1), RDC_EINVAL);
  assert_int_equal(rdc_set_deadline(mock_cli, INFINITY), RDC_OK);
}

static void test_register(void **state) {
  (void)state;
  /* The reply: a normalised spec with every default filled. */
  rdt_pb_spec_t spec; /* obs float32[4], action int32 */
  rdt_pb_spec_init(&spec, "cartpole", 1000);
  rdt_pb_cartpole(&spec, 2);
  rdt_pb_normalised(&spec, 0.7);
  Replayd__V1__Workload w = REPLAYD__V1__WORKLOAD__INIT;
  w.id = "0123456789abcdef0123456789abcdef";
  w.token = "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface";
  w.spec = &spec.spec;
  w.created_unix = 1700000000;
  mock_reply_msg(&w.base);

  rdc_spec_t s;
  cartpole_spec(&s);
  s.has_alpha = 1;
  s.alpha = 0.7;
  s.seed = 42;
  rdc_workload_t out;
  rdc_error_t e;
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_OK);
  assert_int_equal(e.code, 0);
  assert_string_equal(out.id, w.id);
  assert_string_equal(out.token, w.token);
  assert_string_equal(out.spec.name, "cartpole");
  assert_int_equal(out.spec.n_fields, 2);
  assert_string_equal(out.spec.fields[0].name, "obs");
  assert_int_equal(out.spec.fields[0].rank, 1);
  assert_int_equal(out.spec.fields[0].shape[0], 4);
  assert_int_equal(out.spec.fields[1].dtype, RDC_DTYPE_INT32);
  assert_int_equal(out.spec.fields[1].rank, 0);
  assert_true(out.spec.has_alpha && out.spec.has_epsilon && out.spec.has_beta &&
              out.spec.has_max_priority);
  assert_true(out.spec.beta == 0.4);
  assert_int_equal(out.spec.fanout, 16);
  assert_int_equal(out.created_unix, 1700000000);

  /* What the server got. */
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "RegisterWorkload", NULL), 0);
  assert_false(seen.had_token);
  Replayd__V1__WorkloadSpec *req =
      replayd__v1__workload_spec__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(req);
  assert_string_equal(req->name, "cartpole");
  assert_int_equal(req->n_fields, 2);
  assert_string_equal(req->fields[0]->name, "obs");
  assert_int_equal(req->fields[0]->dtype, REPLAYD__V1__DTYPE__FLOAT32);
  assert_int_equal(req->fields[0]->n_shape, 1);
  assert_int_equal(req->fields[0]->shape[0], 4);
  assert_int_equal(req->fields[1]->n_shape, 0);
  assert_int_equal(req->capacity, 1000);
  assert_int_equal(req->seed, 42);
  assert_int_equal(req->alpha_opt_case, REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA);
  assert_true(req->alpha == 0.7);
  /* Unset optional scalars stay absent on the wire (server defaults). */
  assert_int_equal(req->epsilon_opt_case, REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT__NOT_SET);
  assert_int_equal(req->beta_opt_case, REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT__NOT_SET);
  assert_int_equal(req->max_priority_opt_case,
                   REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT__NOT_SET);
  replayd__v1__workload_spec__free_unpacked(req, NULL);
}

static void test_register_bad_spec_is_local(void **state) {
  (void)state;
  rdc_spec_t s;
  cartpole_spec(&s);
  s.n_fields = RDC_MAX_FIELDS + 1;
  rdc_workload_t out;
  rdc_error_t e;
  mock_seen_t before, after;
  mock_seen(&before);
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_EINVAL);
  cartpole_spec(&s);
  s.fields[0].rank = RDC_MAX_RANK + 1;
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_EINVAL);
  assert_non_null(strstr(e.msg, "obs"));
  mock_seen(&after);
  assert_int_equal(before.calls, after.calls); /* nothing was sent */
}

static void test_register_reply_without_token(void **state) {
  (void)state;
  Replayd__V1__Workload w = REPLAYD__V1__WORKLOAD__INIT;
  w.id = "abc";
  mock_reply_msg(&w.base);
  rdc_spec_t s;
  cartpole_spec(&s);
  rdc_workload_t out;
  rdc_error_t e;
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_EPROTO);
}

static void test_server_status_details(void **state) {
  (void)state;
  mock_reply_status(5, "no workload abc");
  rdc_workload_t out;
  rdc_error_t e;
  assert_int_equal(rdc_describe(mock_cli, "abc", &out, &e), RDC_NOT_FOUND);
  assert_int_equal(e.code, RDC_NOT_FOUND);
  assert_string_equal(e.msg, "no workload abc");
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "DescribeWorkload", NULL), 0);
  Replayd__V1__WorkloadRef *ref = replayd__v1__workload_ref__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(ref);
  assert_string_equal(ref->id, "abc");
  replayd__v1__workload_ref__free_unpacked(ref, NULL);

  /* No details: the message still says what failed. */
  mock_reply_status(9, "");
  assert_int_equal(rdc_describe(mock_cli, "abc", &out, &e), RDC_FAILED_PRECONDITION);
  assert_non_null(strstr(e.msg, "FAILED_PRECONDITION"));
  assert_int_equal(rdc_describe(mock_cli, "", &out, &e), RDC_EINVAL);
  assert_int_equal(rdc_describe(mock_cli, NULL, &out, &e), RDC_EINVAL);
}

static void test_undecodable_reply(void **state) {
  (void)state;
  rdc_workload_t out;
  rdc_error_t e;
  static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a};
  mock_reply_bytes(garbage, sizeof garbage);
  assert_int_equal(rdc_describe(mock_cli, "abc", &out, &e), RDC_EPROTO);
  assert_non_null(strstr(e.msg, "could not be decoded"));
  /* OK without a message is a broken server too... */
  mock_reply_no_message();
  assert_int_equal(rdc_describe(mock_cli, "abc", &out, &e), RDC_EPROTO);
  /* ...except for DeleteWorkload, whose reply is empty anyway. */
  assert_int_equal(rdc_delete(mock_cli, "abc", "tok", &e), RDC_OK);
  /* A field name longer than the client holds. */
  char longname[100];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  Replayd__V1__Field f = REPLAYD__V1__FIELD__INIT;
  f.name = longname;
  Replayd__V1__Field *fp[] = {&f};
  Replayd__V1__WorkloadSpec spec = REPLAYD__V1__WORKLOAD_SPEC__INIT;
  spec.n_fields = 1;
  spec.fields = fp;
  Replayd__V1__Workload w = REPLAYD__V1__WORKLOAD__INIT;
  w.id = "abc";
  w.spec = &spec;
  mock_reply_msg(&w.base);
  assert_int_equal(rdc_describe(mock_cli, "abc", &out, &e), RDC_ETOOSMALL);
}

static void test_list(void **state) {
  (void)state;
  Replayd__V1__WorkloadCounters k;
  rdt_cl_counters(&k, 10, 20, 30, 4, 10);
  k.bytes = 4096;
  rdt_pb_spec_t spec;
  rdt_pb_spec_init(&spec, "a", 100);
  Replayd__V1__Workload w1, w2, *wp[] = {&w1, &w2};
  rdt_cl_workload(&w1, "id1", &spec.spec, &k);
  rdt_cl_workload(&w2, "id2", NULL, NULL);
  rdc_workload_t *items;
  assert_int_equal(rdt_cl_list(wp, 2, &items), 2);
  assert_string_equal(items[0].id, "id1");
  assert_string_equal(items[0].spec.name, "a");
  assert_int_equal(items[0].spec.capacity, 100);
  assert_int_equal(items[0].counters.stale_updates, 4);
  assert_int_equal(items[0].counters.bytes, 4096);
  assert_string_equal(items[1].id, "id2");
  assert_int_equal(items[1].counters.inserts, 0);
  assert_string_equal(items[1].token, "");
  rdc_list_free(items);

  assert_int_equal(rdt_cl_list(NULL, 0, &items), 0);
  assert_null(items);
}

/* One page: the request carries page_size and page_token, the reply's
 * next_page_token comes back. */
static void test_list_page(void **state) {
  (void)state;
  Replayd__V1__Workload w1, *wp[] = {&w1};
  rdt_cl_workload(&w1, "id1", NULL, NULL);
  rdt_cl_reply_list(wp, 1, "tok-2");
  rdc_workload_t *items;
  size_t n;
  rdc_error_t e;
  char next[RDC_PAGE_TOKEN_MAX];
  assert_int_equal(rdc_list_page(mock_cli, 7, "tok-1", &items, &n, next, &e), RDC_OK);
  assert_int_equal(n, 1);
  assert_string_equal(items[0].id, "id1");
  assert_string_equal(next, "tok-2");
  rdc_list_free(items);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "ListWorkloads", NULL), 0);
  Replayd__V1__ListWorkloadsRequest *q =
      replayd__v1__list_workloads_request__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(q);
  assert_int_equal(q->page_size, 7);
  assert_string_equal(q->page_token, "tok-1");
  replayd__v1__list_workloads_request__free_unpacked(q, NULL);

  /* A token longer than the client holds. */
  char longtok[RDC_PAGE_TOKEN_MAX + 1];
  memset(longtok, 't', sizeof longtok - 1);
  longtok[sizeof longtok - 1] = '\0';
  rdt_cl_reply_list(wp, 1, longtok);
  assert_int_equal(rdc_list_page(mock_cli, 0, NULL, &items, &n, next, &e), RDC_ETOOSMALL);
  assert_null(items);
  assert_int_equal(rdc_list_page(mock_cli, 0, NULL, &items, &n, NULL, &e), RDC_EINVAL);
}

/* rdc_list fetches pages until the token is empty, and gives up on a
 * server whose pages do not advance instead of asking forever. */
static void test_list_pages_must_advance(void **state) {
  (void)state;
  Replayd__V1__Workload w1, *wp[] = {&w1};
  rdt_cl_workload(&w1, "id1", NULL, NULL);
  rdt_cl_reply_list(wp, 1, "same");
  mock_seen_t before, after;
  mock_seen(&before);
  rdc_workload_t *items = (rdc_workload_t *)1;
  size_t n = 5;
  rdc_error_t e;
  assert_int_equal(rdc_list(mock_cli, &items, &n, &e), RDC_EPROTO);
  assert_non_null(strstr(e.msg, "do not advance"));
  assert_null(items);
  assert_int_equal(n, 0);
  mock_seen(&after);
  assert_int_equal(after.calls - before.calls, 2); /* "" then "same", which came back */
  Replayd__V1__ListWorkloadsRequest *q =
      replayd__v1__list_workloads_request__unpack(NULL, after.body_len, after.body);
  assert_non_null(q);
  assert_string_equal(q->page_token, "same"); /* the second call resumed from the first */
  replayd__v1__list_workloads_request__free_unpacked(q, NULL);

  /* An empty page that is not the last. */
  rdt_cl_reply_list(wp, 0, "more");
  assert_int_equal(rdc_list(mock_cli, &items, &n, &e), RDC_EPROTO);
  assert_non_null(strstr(e.msg, "empty page"));

  /* The same for profiles. */
  Replayd__V1__Profile p = REPLAYD__V1__PROFILE__INIT, *pp = &p;
  p.device = "cpu-0011223344556677";
  Replayd__V1__ListProfilesResponse pr = REPLAYD__V1__LIST_PROFILES_RESPONSE__INIT;
  pr.n_profiles = 1;
  pr.profiles = &pp;
  pr.next_page_token = "same";
  mock_reply_msg(&pr.base);
  rdc_profile_t *profiles;
  assert_int_equal(rdc_list_profiles(mock_cli, "admin", &profiles, &n, &e), RDC_EPROTO);
  assert_null(profiles);
  mock_seen(&after);
  assert_true(after.had_token);
  assert_string_equal(after.token, "admin");
}

static void test_delete_sends_token(void **state) {
  (void)state;
  Replayd__V1__DeleteWorkloadResponse r = REPLAYD__V1__DELETE_WORKLOAD_RESPONSE__INIT;
  mock_reply_msg(&r.base);
  rdc_error_t e;
  assert_int_equal(rdc_delete(mock_cli, "w1", "s3cret-token", &e), RDC_OK);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "DeleteWorkload", "s3cret-token"), 0);
  /* No token: no metadata at all (the server answers UNAUTHENTICATED). */
  mock_reply_status(16, "DeleteWorkload needs the x-replayd-token metadata");
  assert_int_equal(rdc_delete(mock_cli, "w1", NULL, &e), RDC_UNAUTHENTICATED);
  mock_seen(&seen);
  assert_false(seen.had_token);
  /* A token gRPC metadata cannot carry fails here, before any call. */
  int calls = seen.calls;
  assert_int_equal(rdc_delete(mock_cli, "w1", "bad\ntoken", &e), RDC_EINVAL);
  mock_seen(&seen);
  assert_int_equal(seen.calls, calls);
}

static void test_insert_batch(void **state) {
  (void)state;
  uint64_t rkeys[] = {10, 11, 12};
  Replayd__V1__InsertResponse r = REPLAYD__V1__INSERT_RESPONSE__INIT;
  r.n_keys = 3;
  r.keys = rkeys;
  r.inserted = 3;
  mock_reply_msg(&r.base);
  float obs[12];
  int32_t act[3] = {0, 1, 0};
  for (int i = 0; i < 12; i++) obs[i] = (float)i;
  rdc_column_t cols[] = {{obs, sizeof obs}, {act, sizeof act}};
  double prio[] = {0.5, 1.5, 2.5};
  uint64_t keys[3] = {0};
  rdc_error_t e;
  assert_int_equal(rdc_insert_batch(mock_cli, "w1", "tok", 3, cols, 2, prio, keys, &e), RDC_OK);
  assert_int_equal(keys[0], 10);
  assert_int_equal(keys[2], 12);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "InsertBatch", "tok"), 0);
  Replayd__V1__InsertRequest *req =
      replayd__v1__insert_request__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(req);
  assert_string_equal(req->workload_id, "w1");
  assert_int_equal(req->rows->count, 3);
  assert_int_equal(req->rows->n_columns, 2);
  assert_int_equal(req->rows->columns[0].len, sizeof obs);
  assert_memory_equal(req->rows->columns[0].data, obs, sizeof obs);
  assert_memory_equal(req->rows->columns[1].data, act, sizeof act);
  assert_int_equal(req->n_priorities, 3);
  assert_true(req->priorities[1] == 1.5);
  replayd__v1__insert_request__free_unpacked(req, NULL);

  /* Without priorities the field stays empty ("max seen"). */
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_insert_batch(mock_cli, "w1", "tok", 3, cols, 2, NULL, NULL, &e), RDC_OK);
  mock_seen(&seen);
  req = replayd__v1__insert_request__unpack(NULL, seen.body_len, seen.body);
  assert_int_equal(req->n_priorities, 0);
  replayd__v1__insert_request__free_unpacked(req, NULL);

  /* A reply with the wrong number of keys is caught. */
  r.n_keys = 2;
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_insert_batch(mock_cli, "w1", "tok", 3, cols, 2, NULL, keys, &e), RDC_EPROTO);
  /* Local argument errors. */
  assert_int_equal(rdc_insert_batch(mock_cli, "w1", "tok", 3, NULL, 2, NULL, NULL, &e), RDC_EINVAL);
  rdc_column_t nulls[] = {{NULL, 8}};
  assert_int_equal(rdc_insert_batch(mock_cli, "w1", "tok", 1, nulls, 1, NULL, NULL, &e), RDC_EINVAL);
}

static void test_big_messages(void **state) {
  (void)state;
  /* 8 MiB request: over the mock's (gRPC default) 4 MiB receive limit, so
   * the server refuses it with RESOURCE_EXHAUSTED and the client says so. */
  size_t big = 8u << 20;
  uint8_t *data = calloc(1, big);
  rdc_column_t col = {data, big};
  rdc_error_t e;
  mock_reply_status(0, "");
  int rc = rdc_insert_batch(mock_cli, "w1", "tok", (uint32_t)big, &col, 1, NULL, NULL, &e);
  assert_int_equal(rc, RDC_RESOURCE_EXHAUSTED);
  assert_true(strlen(e.msg) > 0);

  /* 8 MiB reply: within the client's default 64 MiB. */
  Replayd__V1__SampleResponse r = REPLAYD__V1__SAMPLE_RESPONSE__INIT;
  uint64_t k = 7;
  double p = 1, wgt = 1;
  r.n_keys = r.n_probabilities = r.n_weights = 1;
  r.keys = &k;
  r.probabilities = &p;
  r.weights = &wgt;
  Replayd__V1__RowBatch rows = REPLAYD__V1__ROW_BATCH__INIT;
  ProtobufCBinaryData bin = {big, data};
  rows.count = 1;
  rows.n_columns = 1;
  rows.columns = &bin;
  r.rows = &rows;
  mock_reply_msg(&r.base);
  uint8_t *buf = malloc(big);
  rdc_buffer_t out = {buf, big, 0};
  uint64_t keys[1];
  rdc_sample_t s = {.keys = keys, .columns = &out, .n_columns = 1};
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 1, NAN, 0, &s, &e), RDC_OK);
  assert_int_equal(out.bytes, big);

  /* A client that accepts at most 1 MiB refuses it. */
  rdc_connect_opts_t o;
  rdc_connect_opts_init(&o);
  o.max_receive_bytes = 1 << 20;
  rdc_client_t *small;
  assert_int_equal(rdc_connect_ex(mock_target, 5, &o, &small, &e), RDC_OK);
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_sample(small, "w1", "tok", 1, NAN, 0, &s, &e), RDC_RESOURCE_EXHAUSTED);
  rdc_close(small);
  free(buf);
  free(data);
}

/* A sample reply of n items with two columns (float32[2], uint8). */
static void script_sample(size_t n, size_t n_probs, uint32_t rows_count) {
  static uint64_t keys[8];
  static double probs[8], weights[8];
  static float c0[16];
  static uint8_t c1[8];
  for (size_t i = 0; i < 8; i++) {
    keys[i] = 100 + i;
    probs[i] = 0.1 * (double)(i + 1);
    weights[i] = 1.0 / (double)(i + 1);
    c0[2 * i] = (float)i;
    c0[2 * i + 1] = -(float)i;
    c1[i] = (uint8_t)(i & 1);
  }
  Replayd__V1__SampleResponse r = REPLAYD__V1__SAMPLE_RESPONSE__INIT;
  r.n_keys = n;
  r.keys = keys;
  r.n_probabilities = n_probs;
  r.probabilities = probs;
  r.n_weights = n;
  r.weights = weights;
  r.table_size = 555;
  Replayd__V1__RowBatch rows = REPLAYD__V1__ROW_BATCH__INIT;
  ProtobufCBinaryData bins[2] = {{n * 8, (uint8_t *)c0}, {n, c1}};
  rows.count = rows_count;
  rows.n_columns = 2;
  rows.columns = bins;
  r.rows = &rows;
  mock_reply_msg(&r.base);
}

/* Where rdc_sample puts script_sample's items: keys, probabilities and
 * weights for 8 items, the columns for 3 rows. */
typedef struct {
  uint64_t keys[8];
  double probs[8], weights[8];
  float c0[6];
  uint8_t c1[3];
  rdc_buffer_t cols[2];
  rdc_sample_t s;
} sample_bufs_t;

static void sample_bufs_init(sample_bufs_t *b) {
  memset(b, 0, sizeof *b);
  b->cols[0] = (rdc_buffer_t){b->c0, sizeof b->c0, 0};
  b->cols[1] = (rdc_buffer_t){b->c1, sizeof b->c1, 0};
  b->s = (rdc_sample_t){.keys = b->keys, .probabilities = b->probs, .weights = b->weights,
                        .columns = b->cols, .n_columns = 2};
}

static void test_sample(void **state) {
  (void)state;
  script_sample(3, 3, 3);
  sample_bufs_t b;
  sample_bufs_init(&b);
  rdc_error_t e;
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 1, &b.s, &e), RDC_OK);
  assert_int_equal(b.s.count, 3);
  assert_int_equal(b.s.table_size, 555);
  assert_int_equal(b.keys[2], 102);
  assert_true(fabs(b.probs[1] - 0.2) < 1e-12);
  assert_true(b.weights[0] == 1.0);
  assert_int_equal(b.cols[0].bytes, 24);
  assert_int_equal(b.cols[1].bytes, 3);
  assert_true(b.c0[2] == 1.0f && b.c0[3] == -1.0f);
  assert_int_equal(b.c1[1], 1);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "Sample", "tok"), 0);
  Replayd__V1__SampleRequest *req =
      replayd__v1__sample_request__unpack(NULL, seen.body_len, seen.body);
  assert_int_equal(req->batch_size, 3);
  assert_true(req->stratified);
  assert_int_equal(req->beta_opt_case, REPLAYD__V1__SAMPLE_REQUEST__BETA_OPT__NOT_SET);
  replayd__v1__sample_request__free_unpacked(req, NULL);

  /* An explicit beta (even 0) travels in the oneof. */
  script_sample(3, 3, 3);
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, 0.0, 0, &b.s, &e), RDC_OK);
  mock_seen(&seen);
  req = replayd__v1__sample_request__unpack(NULL, seen.body_len, seen.body);
  assert_int_equal(req->beta_opt_case, REPLAYD__V1__SAMPLE_REQUEST__BETA_OPT_BETA);
  assert_true(req->beta == 0.0);
  assert_false(req->stratified);
  replayd__v1__sample_request__free_unpacked(req, NULL);

  /* Keys only: no buffers for rows. */
  script_sample(3, 3, 3);
  rdc_sample_t k = {.keys = b.keys};
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 0, &k, &e), RDC_OK);
  assert_int_equal(k.count, 3);
}

static void test_sample_errors(void **state) {
  (void)state;
  sample_bufs_t b;
  sample_bufs_init(&b);
  rdc_error_t e;
  /* A column buffer too small. */
  b.cols[0].capacity = 20;
  script_sample(3, 3, 3);
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 0, &b.s, &e), RDC_ETOOSMALL);
  assert_non_null(strstr(e.msg, "24 bytes"));
  b.cols[0].capacity = sizeof b.c0;
  /* Inconsistent counts. */
  script_sample(3, 2, 3);
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 0, &b.s, &e), RDC_EPROTO);
  script_sample(3, 3, 2);
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 0, &b.s, &e), RDC_EPROTO);
  /* More items than asked for. */
  script_sample(3, 3, 3);
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 2, NAN, 0, &b.s, &e), RDC_EPROTO);
  /* Buffers for a different number of fields. */
  script_sample(3, 3, 3);
  b.s.n_columns = 1;
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 0, &b.s, &e), RDC_EINVAL);
  assert_int_equal(b.s.count, 0);
  /* The server's own refusal. */
  mock_reply_status(9, "workload w1 is empty: insert before sampling");
  b.s.n_columns = 2;
  assert_int_equal(rdc_sample(mock_cli, "w1", "tok", 3, NAN, 0, &b.s, &e), RDC_FAILED_PRECONDITION);
  assert_string_equal(e.msg, "workload w1 is empty: insert before sampling");
}

static void test_update(void **state) {
  (void)state;
  Replayd__V1__UpdatePrioritiesResponse r = REPLAYD__V1__UPDATE_PRIORITIES_RESPONSE__INIT;
  r.applied = 3;
  r.stale = 1;
  mock_reply_msg(&r.base);
  uint64_t keys[] = {1, 2, 3, 4};
  double pr[] = {0.1, 0.2, 0.3, 0.4};
  uint64_t applied = 0, stale = 0;
  rdc_error_t e;
  assert_int_equal(rdc_update_priorities(mock_cli, "w1", "tok", 4, keys, pr, &applied, &stale, &e),
                   RDC_OK);
  assert_int_equal(applied, 3);
  assert_int_equal(stale, 1);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "UpdatePriorities", "tok"), 0);
  Replayd__V1__UpdatePrioritiesRequest *req =
      replayd__v1__update_priorities_request__unpack(NULL, seen.body_len, seen.body);
  assert_int_equal(req->n_keys, 4);
  assert_int_equal(req->n_priorities, 4);
  assert_int_equal(req->keys[3], 4);
  assert_true(req->priorities[3] == 0.4);
  replayd__v1__update_priorities_request__free_unpacked(req, NULL);
  assert_int_equal(rdc_update_priorities(mock_cli, "w1", "tok", 4, NULL, pr, NULL, NULL, &e),
                   RDC_EINVAL);
}

static void test_server_info(void **state) {
  (void)state;
  Replayd__V1__Device d[2], *dp[2];
  rdt_cl_two_devices(d, dp);
  Replayd__V1__Workload w, *wp[] = {&w};
  rdt_cl_workload(&w, "w1", NULL, NULL);
  Replayd__V1__ServerInfoResponse r;
  rdt_cl_server_info(&r, "0.1.0", 12.5, dp, 2, wp, 1);
  rdc_server_info_t *info;
  assert_int_equal(rdt_cl_info(&r, &info), RDC_OK);
  assert_string_equal(info->version, "0.1.0");
  assert_true(info->uptime_s == 12.5);
  assert_int_equal(info->n_devices, 2);
  assert_string_equal(info->devices[1].status, "no driver");
  assert_int_equal(info->n_workloads, 1);
  assert_string_equal(info->workloads[0].id, "w1");
  /* A server without the count: the list is every workload. */
  assert_int_equal(info->workload_count, 1);
  assert_false(info->workloads_truncated);
  rdc_server_info_free(info);
  r.workload_count = 40;
  r.workloads_truncated = 1;
  r.devices_truncated = 1;
  assert_int_equal(rdt_cl_info(&r, &info), RDC_OK);
  assert_int_equal(info->n_workloads, 1);
  assert_int_equal(info->workload_count, 40);
  assert_true(info->workloads_truncated);
  assert_true(info->devices_truncated);
  rdc_server_info_free(info);
  assert_int_equal(rdt_cl_seen(NULL, "ServerInfo", NULL), 0);
}

static void test_deadline(void **state) {
  (void)state;
  mock_set_delay_ms(1500);
  Replayd__V1__ServerInfoResponse r = REPLAYD__V1__SERVER_INFO_RESPONSE__INIT;
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_set_deadline(mock_cli, 0.3), RDC_OK);
  rdc_server_info_t *info;
  rdc_error_t e;
  double t0 = rd_clock_now();
  assert_int_equal(rdc_server_info(mock_cli, &info, &e), RDC_DEADLINE_EXCEEDED);
  assert_true(rd_clock_now() - t0 < 1.4);
  /* Let the mock finish that call before the next test. */
  mock_set_delay_ms(0);
  rdc_set_deadline(mock_cli, 10);
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_server_info(mock_cli, &info, &e), RDC_OK);
  rdc_server_info_free(info);
}

/* One client shared by threads: calls are serialized, none is lost. */
static void *describe_loop(void *arg) {
  int *failures = arg;
  for (int i = 0; i < 25; i++) {
    rdc_workload_t w;
    rdc_error_t e;
    if (rdc_describe(mock_cli, "w1", &w, &e) != RDC_OK || strcmp(w.id, "w1") != 0) (*failures)++;
  }
  return NULL;
}

static void test_shared_client_threads(void **state) {
  (void)state;
  Replayd__V1__Workload w = REPLAYD__V1__WORKLOAD__INIT;
  w.id = "w1";
  mock_reply_msg(&w.base); /* the script stays until reset */
  mock_seen_t before, after;
  mock_seen(&before);
  pthread_t t[4];
  int failures[4] = {0};
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, describe_loop, &failures[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) assert_int_equal(failures[i], 0);
  mock_seen(&after);
  assert_int_equal(after.calls - before.calls, 100);
}

/* ------------------------------------------------------------------ */
/* Insert stream                                                       */

/* n rows (at most 100) of obs float32[4], action int32 as columns: row i
 * holds obs (i, i + 1, i + 2, i + 3) and action i & 1. The buffers are
 * static, the next call's too. */
static rdc_column_t *rows(uint32_t n) {
  static float obs[4 * 100];
  static int32_t act[100];
  static rdc_column_t cols[2];
  assert_true(n <= 100);
  for (uint32_t i = 0; i < n; i++) {
    for (int j = 0; j < 4; j++) obs[4 * i + (uint32_t)j] = (float)(i + (uint32_t)j);
    act[i] = (int32_t)(i & 1);
  }
  cols[0] = (rdc_column_t){obs, n * 4 * sizeof(float)};
  cols[1] = (rdc_column_t){act, n * sizeof(int32_t)};
  return cols;
}

/* An Insert stream to workload w1 with token, opened. */
static rdc_insert_stream_t *open_stream(const char *token) {
  rdc_insert_stream_t *st;
  rdc_error_t e;
  assert_int_equal(rdc_insert_stream_open(mock_cli, "w1", token, &st, &e), RDC_OK);
  return st;
}

static void test_stream(void **state) {
  (void)state;
  rdc_insert_stream_t *st = open_stream("tok");
  rdc_error_t e;
  uint32_t total = 0;
  for (uint32_t k = 1; k <= 20; k++) {
    uint32_t n = k * 5 % 100 + 1;
    assert_int_equal(rdc_insert_stream_write(st, n, rows(n), 2, NULL, &e), RDC_OK);
    total += n;
  }
  uint64_t inserted = 0, first = 0;
  assert_int_equal(rdc_insert_stream_close(st, &inserted, &first, &e), RDC_OK);
  assert_int_equal(inserted, total);
  assert_int_equal(first, 1000);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "Insert", "tok"), 0);
  assert_int_equal(seen.stream_msgs, 20);
  assert_true(seen.stream_half_closed);
  for (int i = 0; i < 20; i++) assert_string_equal(seen.stream_ids[i], "w1");
  assert_int_equal(seen.stream_rows[0], 6);
}

static void test_stream_close_without_writes(void **state) {
  (void)state;
  rdc_insert_stream_t *st = open_stream("tok");
  rdc_error_t e;
  uint64_t inserted = 99;
  assert_int_equal(rdc_insert_stream_close(st, &inserted, NULL, &e), RDC_OK);
  assert_int_equal(inserted, 0);
}

static void test_stream_rejected(void **state) {
  (void)state;
  /* The server ends the stream at the first message: the error surfaces at
   * a later write (or at the latest at close) with the server's words. */
  mock_stream_fail_at(1, 7, "wrong token for workload w1");
  rdc_insert_stream_t *st = open_stream("bad");
  rdc_error_t e;
  rdc_column_t *cols = rows(10);
  int rc = RDC_OK;
  for (int i = 0; i < 200 && rc == RDC_OK; i++) {
    rc = rdc_insert_stream_write(st, 10, cols, 2, NULL, &e);
    if (rc == RDC_OK) usleep(5000);
  }
  assert_int_equal(rc, RDC_PERMISSION_DENIED);
  assert_string_equal(e.msg, "wrong token for workload w1");
  /* Sticky: the next write says the same. */
  assert_int_equal(rdc_insert_stream_write(st, 10, cols, 2, NULL, &e), RDC_PERMISSION_DENIED);
  assert_int_equal(rdc_insert_stream_close(st, NULL, NULL, &e), RDC_PERMISSION_DENIED);
  assert_string_equal(e.msg, "wrong token for workload w1");
}

static void test_stream_rejected_at_close(void **state) {
  (void)state;
  mock_stream_fail_at(2, 3, "column 0 has 12 bytes; 2 rows of obs need 32");
  rdc_insert_stream_t *st = open_stream("tok");
  rdc_error_t e;
  for (int i = 0; i < 2; i++)
    assert_int_equal(rdc_insert_stream_write(st, 2, rows(2), 2, NULL, &e), RDC_OK);
  assert_int_equal(rdc_insert_stream_close(st, NULL, NULL, &e), RDC_INVALID_ARGUMENT);
  assert_string_equal(e.msg, "column 0 has 12 bytes; 2 rows of obs need 32");
}

static void test_stream_bad_final_reply(void **state) {
  (void)state;
  static const uint8_t garbage[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff};
  mock_reply_bytes(garbage, sizeof garbage);
  rdc_insert_stream_t *st = open_stream("tok");
  rdc_error_t e;
  assert_int_equal(rdc_insert_stream_close(st, NULL, NULL, &e), RDC_EPROTO);
}

static void test_stream_argument_error_not_sticky(void **state) {
  (void)state;
  rdc_insert_stream_t *st = open_stream("tok");
  rdc_error_t e;
  assert_int_equal(rdc_insert_stream_write(st, 2, NULL, 2, NULL, &e), RDC_EINVAL);
  assert_int_equal(rdc_insert_stream_write(st, 2, rows(2), 2, NULL, &e), RDC_OK);
  uint64_t inserted = 0;
  assert_int_equal(rdc_insert_stream_close(st, &inserted, NULL, &e), RDC_OK);
  assert_int_equal(inserted, 2);
  mock_seen_t seen;
  mock_seen(&seen);
  assert_int_equal(seen.stream_msgs, 1);
}

static void test_stream_cancel(void **state) {
  (void)state;
  rdc_insert_stream_t *st = open_stream("tok");
  rdc_error_t e;
  assert_int_equal(rdc_insert_stream_write(st, 2, rows(2), 2, NULL, &e), RDC_OK);
  rdc_insert_stream_cancel(st);
  rdc_insert_stream_cancel(NULL);
  /* The client still works afterwards. */
  Replayd__V1__ServerInfoResponse r = REPLAYD__V1__SERVER_INFO_RESPONSE__INIT;
  r.version = "x";
  mock_reset();
  mock_reply_msg(&r.base);
  rdc_server_info_t *info;
  assert_int_equal(rdc_server_info(mock_cli, &info, &e), RDC_OK);
  rdc_server_info_free(info);
}

static void test_stream_bad_args(void **state) {
  (void)state;
  rdc_insert_stream_t *st = NULL;
  rdc_error_t e;
  assert_int_equal(rdc_insert_stream_open(mock_cli, NULL, "tok", &st, &e), RDC_EINVAL);
  assert_int_equal(rdc_insert_stream_open(mock_cli, "w1", "t\x01k", &st, &e), RDC_EINVAL);
  assert_int_equal(rdc_insert_stream_open(NULL, "w1", "tok", &st, &e), RDC_EINVAL);
  assert_null(st);
  assert_int_equal(rdc_insert_stream_write(NULL, 1, NULL, 0, NULL, &e), RDC_EINVAL);
  assert_int_equal(rdc_insert_stream_close(NULL, NULL, NULL, &e), RDC_EINVAL);
}

RDT_MAIN(mock_group_setup, mock_group_teardown,
         cmocka_unit_test_setup(test_strerror, mock_test_setup),
         cmocka_unit_test_setup(test_connect_refused_fails_fast, mock_test_setup),
         cmocka_unit_test_setup(test_connect_wait_times_out, mock_test_setup),
         cmocka_unit_test_setup(test_connect_bad_args, mock_test_setup),
         cmocka_unit_test_setup(test_register, mock_test_setup),
         cmocka_unit_test_setup(test_register_bad_spec_is_local, mock_test_setup),
         cmocka_unit_test_setup(test_register_reply_without_token, mock_test_setup),
         cmocka_unit_test_setup(test_server_status_details, mock_test_setup),
         cmocka_unit_test_setup(test_undecodable_reply, mock_test_setup),
         cmocka_unit_test_setup(test_list, mock_test_setup),
         cmocka_unit_test_setup(test_list_page, mock_test_setup),
         cmocka_unit_test_setup(test_list_pages_must_advance, mock_test_setup),
         cmocka_unit_test_setup(test_delete_sends_token, mock_test_setup),
         cmocka_unit_test_setup(test_insert_batch, mock_test_setup),
         cmocka_unit_test_setup(test_big_messages, mock_test_setup),
         cmocka_unit_test_setup(test_sample, mock_test_setup),
         cmocka_unit_test_setup(test_sample_errors, mock_test_setup),
         cmocka_unit_test_setup(test_update, mock_test_setup),
         cmocka_unit_test_setup(test_server_info, mock_test_setup),
         cmocka_unit_test_setup(test_deadline, mock_test_setup),
         cmocka_unit_test_setup(test_shared_client_threads, mock_test_setup),
         cmocka_unit_test_setup(test_stream, mock_test_setup),
         cmocka_unit_test_setup(test_stream_close_without_writes, mock_test_setup),
         cmocka_unit_test_setup(test_stream_rejected, mock_test_setup),
         cmocka_unit_test_setup(test_stream_rejected_at_close, mock_test_setup),
         cmocka_unit_test_setup(test_stream_bad_final_reply, mock_test_setup),
         cmocka_unit_test_setup(test_stream_argument_error_not_sticky, mock_test_setup),
         cmocka_unit_test_setup(test_stream_cancel, mock_test_setup),
         cmocka_unit_test_setup(test_stream_bad_args, mock_test_setup))
