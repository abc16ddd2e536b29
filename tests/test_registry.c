/* test_registry.c - workload registry: validation, limits, lifetime,
 * persistence through the store, and concurrent use. */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "messages.h"
#include "registry.h"
#include "tenant.h"
#include "workload_spec.h"
#include "spec_pb.h"
#include "rdt_pb.h"
#include "rdt_unit.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* A spec built on the stack, with room for any number of fields we test. */
typedef rdt_pb_spec_t spec_t;

/* obs: float32[4], action: int32, reward: float32 -> 24 bytes a row. */
static void basic_spec(spec_t *s) {
  rdt_pb_spec_init(s, "cartpole", 1024);
  rdt_pb_cartpole(s, 3);
}

static rd_config_t test_config(void) {
  rd_config_t c;
  rd_config_defaults(&c);
  c.max_batch = 4096;
  return c;
}

static rd_registry_t *make_registry(const rd_config_t *cfg, rd_store_t *store) {
  rd_registry_t *r = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_registry_create(&r, cfg, store, &err);
  if (rc) fail_msg("rd_registry_create: %s", err.msg);
  return r;
}

static rd_workload_t *register_ok(rd_registry_t *r, const spec_t *s) {
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_spec_pb_register(r, &s->spec, NULL, &w, &err);
  if (rc) fail_msg("register: %s %s", rd_err_name(rc), err.msg);
  assert_non_null(w);
  return w;
}

/* register_ok that also gives the workload's token (the only copy). */
static rd_workload_t *register_tok(rd_registry_t *r, const spec_t *s, char *token) {
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  rd_spec_pb_t d;
  int rc = rd_spec_pb_decode(rd_registry_config(r), &s->spec, &d, &err);
  if (rc == RD_OK) rc = rd_registry_register(r, &d.spec, NULL, &w, token, &err);
  if (rc) fail_msg("register: %s %s", rd_err_name(rc), err.msg);
  rd_spec_pb_release(&d);
  assert_non_null(w);
  return w;
}

/* The stored form of the token "%064d" of i (secrets.h). */
static void stored_token(int i, char *out, size_t cap) {
  char t[65];
  uint8_t h[RD_TOKEN_HASH_LEN];
  snprintf(t, sizeof t, "%064d", i);
  rd_token_hash(t, 64, h);
  assert_true(cap > RD_TOKEN_HASH_TEXT_LEN);
  rd_token_hash_format(h, out);
}

static rd_store_t *open_store(const char *dir) {
  rd_store_t *st = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_open(&st, dir, &err);
  if (rc) fail_msg("rd_store_open: %s", err.msg);
  return st;
}

static size_t restore_ok(rd_registry_t *r) {
  size_t n = 99;
  rd_error_t err;
  rd_error_clear(&err);
  rd_spec_decoder_t dec = rd_spec_pb_decoder(rd_registry_config(r));
  int rc = rd_registry_restore(r, &dec, &n, &err);
  if (rc) fail_msg("restore: %s %s", rd_err_name(rc), err.msg);
  return n;
}

static size_t stored_count(rd_store_t *st) {
  rd_stored_workload_t *v;
  size_t n;
  assert_int_equal(rd_store_list_workloads(st, &v, &n, NULL), RD_OK);
  rd_store_free_workloads(v, n);
  return n;
}

static int is_hex(const char *s, size_t n) {
  if (strlen(s) != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* Insert n rows (all columns zero except obs[0] = i) with the workload lock. */
static void insert_rows(rd_workload_t *w, size_t n) {
  float *obs = calloc(n * 4, sizeof(float));
  int32_t *act = calloc(n, sizeof(int32_t));
  float *rew = calloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) obs[i * 4] = (float)i;
  rd_cbuf_t cols[3] = {{obs, n * 16}, {act, n * 4}, {rew, n * 4}};
  pthread_mutex_lock(&w->lock);
  int rc = rd_table_insert(&w->table, n, cols, NULL, NULL, NULL);
  pthread_mutex_unlock(&w->lock);
  free(obs);
  free(act);
  free(rew);
  assert_int_equal(rc, RD_OK);
}

/* The workload's stored spec (the normalised WorkloadSpec), unpacked;
 * freed by free_spec. */
static Replayd__V1__WorkloadSpec *stored_spec(const rd_workload_t *w) {
  Replayd__V1__WorkloadSpec *n = rd_spec_pb_stored(w->spec, w->spec_len);
  assert_non_null(n);
  return n;
}

static void free_spec(Replayd__V1__WorkloadSpec *n) {
  replayd__v1__workload_spec__free_unpacked(n, NULL);
}

/* A copy of the workload's stored spec bytes. */
static uint8_t *stored_bytes(const rd_workload_t *w, size_t *len) {
  *len = w->spec_len;
  uint8_t *buf = malloc(*len + 1);
  memcpy(buf, w->spec, *len);
  return buf;
}

static uint8_t *pack_spec(const Replayd__V1__WorkloadSpec *s, size_t *len) {
  *len = replayd__v1__workload_spec__get_packed_size(s);
  uint8_t *buf = malloc(*len + 1);
  replayd__v1__workload_spec__pack(s, buf);
  return buf;
}

/* ------------------------------------------------------------------ */
/* Register                                                            */
/* ------------------------------------------------------------------ */

static void test_register_fills_defaults(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  char token[RD_WORKLOAD_TOKEN_LEN + 1];
  rd_workload_t *w = register_tok(r, &s, token);

  assert_true(is_hex(w->id, RD_WORKLOAD_ID_LEN));
  assert_true(is_hex(token, RD_WORKLOAD_TOKEN_LEN));
  assert_true(rd_workload_token_ok(w, token, RD_WORKLOAD_TOKEN_LEN));
  assert_true(llabs((long long)(w->created_unix - (int64_t)time(NULL))) < 5);
  assert_false(atomic_load(&w->deleted));
  assert_int_equal(atomic_load(&w->refs), 2); /* the registry's and ours */

  /* The normalised spec: a deep copy with every default written out. */
  Replayd__V1__WorkloadSpec *n = stored_spec(w);
  assert_ptr_not_equal(n, &s.spec);
  assert_string_equal(n->name, "cartpole");
  assert_int_equal(n->n_fields, 3);
  assert_ptr_not_equal(n->fields[0]->name, s.spec.fields[0]->name);
  assert_string_equal(n->fields[0]->name, "obs");
  assert_int_equal(n->fields[0]->n_shape, 1);
  assert_int_equal(n->fields[0]->shape[0], 4);
  assert_int_equal(n->capacity, 1024);
  assert_int_equal(n->fanout, 16);
  assert_int_equal(n->alpha_opt_case, REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA);
  assert_true(n->alpha == 0.6);
  assert_int_equal(n->epsilon_opt_case, REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON);
  assert_true(n->epsilon == 1e-6);
  assert_int_equal(n->beta_opt_case, REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA);
  assert_true(n->beta == 0.4);
  assert_int_equal(n->max_priority_opt_case,
                   REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY);
  assert_true(n->max_priority == 1048576.0);
  assert_int_equal(n->max_batch, cfg.max_batch);
  assert_null(n->learner);
  assert_true(w->default_beta == 0.4);
  assert_string_equal(w->name, "cartpole");
  free_spec(n);

  /* The table was built from it. */
  const rd_table_config_t *tc = &w->table.config;
  assert_int_equal(tc->capacity, 1024);
  assert_int_equal(tc->fanout, 16);
  assert_int_equal(tc->max_batch, cfg.max_batch);
  assert_int_equal(tc->schema.n_fields, 3);
  assert_int_equal(tc->schema.fields[0].dtype, RD_DTYPE_FLOAT32);
  assert_int_equal(tc->schema.fields[1].dtype, RD_DTYPE_INT32);
  assert_int_equal(rd_schema_row_bytes(&tc->schema), 24);

  /* Changing the caller's spec afterwards changes nothing of ours. */
  s.name[0][0] = 'X';
  s.spec.capacity = 7;
  n = stored_spec(w);
  assert_string_equal(n->fields[0]->name, "obs");
  free_spec(n);

  assert_int_equal(rd_registry_count(r), 1);
  rd_workload_t *g = rd_registry_get(r, w->id);
  assert_ptr_equal(g, w);
  assert_int_equal(atomic_load(&w->refs), 3);
  rd_workload_unref(g);
  rd_workload_unref(w);
  assert_int_equal(atomic_load(&w->refs), 1);

  /* A NULL out registers without handing back a reference. */
  basic_spec(&s);
  rd_error_t err;
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_OK);
  assert_int_equal(rd_registry_count(r), 2);
  rd_registry_destroy(r);
}

static void test_register_explicit_values(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  static const uint32_t img[] = {2, 3, 4, 1, 1, 1, 1, 5}; /* rank 8 is allowed */
  rdt_pb_field(&s, "pixels.next-frame_0", REPLAYD__V1__DTYPE__UINT8, 8, img);
  rdt_pb_field(&s, "done", REPLAYD__V1__DTYPE__BOOL, 0, NULL);
  rdt_pb_field(&s, "ids", REPLAYD__V1__DTYPE__INT64, 1, img);
  s.spec.fanout = 4;
  s.spec.capacity = 4096;
  s.spec.seed = 12345;
  s.spec.max_batch = 100;
  /* An explicit 0 is honoured, not replaced by the default. */
  s.spec.alpha_opt_case = REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
  s.spec.alpha = 0;
  s.spec.epsilon_opt_case = REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON;
  s.spec.epsilon = 0.5;
  s.spec.beta_opt_case = REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
  s.spec.beta = 1.0;
  s.spec.max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  s.spec.max_priority = 10.0;
  s.spec.name = "名前 with ünïcode"; /* UTF-8 is fine in a label */
  rd_workload_t *w = register_ok(r, &s);
  const rd_table_config_t *tc = &w->table.config;
  assert_int_equal(tc->fanout, 4);
  assert_true(tc->alpha == 0);
  assert_true(tc->epsilon == 0.5);
  assert_true(tc->max_priority == 10.0);
  assert_int_equal(tc->max_batch, 100);
  assert_true(tc->seed == 12345);
  assert_true(w->default_beta == 1.0);
  Replayd__V1__WorkloadSpec *n = stored_spec(w);
  assert_true(n->alpha == 0);
  assert_int_equal(n->alpha_opt_case, REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA);
  assert_int_equal(n->fanout, 4);
  assert_int_equal(n->max_batch, 100);
  assert_string_equal(n->name, "名前 with ünïcode");
  assert_string_equal(w->name, "名前 with ünïcode");
  free_spec(n);
  assert_int_equal(tc->schema.fields[3].rank, 8);
  assert_int_equal(tc->schema.fields[4].dtype, RD_DTYPE_BOOL);
  assert_int_equal(tc->schema.fields[5].dtype, RD_DTYPE_INT64);
  assert_int_equal(rd_schema_row_bytes(&tc->schema), 24 + 120 + 1 + 16);
  rd_workload_unref(w);
  rd_registry_destroy(r);
}

/* ------------------------------------------------------------------ */
/* Validation: every rule, with a message naming the field             */
/* ------------------------------------------------------------------ */

typedef void (*mutate_fn)(spec_t *s);

static void m_learner(spec_t *s) {
  Replayd__V1__LearnerSpec init = REPLAYD__V1__LEARNER_SPEC__INIT;
  s->learner = init;
  s->spec.learner = &s->learner;
}
static void m_no_fields(spec_t *s) { s->spec.n_fields = 0; }
static void m_33_fields(spec_t *s) {
  for (int i = 3; i < 33; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%d", i);
    rdt_pb_field(s, name, REPLAYD__V1__DTYPE__UINT8, 0, NULL);
  }
}
static void m_empty_name(spec_t *s) { s->name[1][0] = '\0'; }
static void m_long_name(spec_t *s) {
  memset(s->name[1], 'a', 64);
  s->name[1][64] = '\0';
}
static void m_bad_char(spec_t *s) { snprintf(s->name[2], 80, "re ward"); }
static void m_dup_name(spec_t *s) { snprintf(s->name[2], 80, "obs"); }
static void m_unspecified(spec_t *s) { s->field[1].dtype = REPLAYD__V1__DTYPE__DTYPE_UNSPECIFIED; }
static void m_unknown_dtype(spec_t *s) { s->field[0].dtype = (Replayd__V1__DType)99; }
static void m_rank9(spec_t *s) {
  static const uint32_t sh[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  s->field[2].n_shape = 9;
  memcpy(s->shape[2], sh, sizeof sh);
  s->field[2].shape = s->shape[2];
}
static void m_zero_dim(spec_t *s) {
  static const uint32_t sh[2] = {0, 3};
  s->field[2].n_shape = 2;
  memcpy(s->shape[2], sh, sizeof sh);
  s->field[2].shape = s->shape[2];
}
static void m_huge_field(spec_t *s) {
  static const uint32_t sh[3] = {65536, 65536, 65536}; /* would overflow 64 bits unchecked */
  s->field[0].n_shape = 3;
  memcpy(s->shape[0], sh, sizeof sh);
}
static void m_huge_row(spec_t *s) {
  static const uint32_t sh[1] = {40u << 20};
  s->field[0].dtype = REPLAYD__V1__DTYPE__UINT8;
  s->field[0].n_shape = 1;
  memcpy(s->shape[0], sh, sizeof sh);
  s->field[2].dtype = REPLAYD__V1__DTYPE__UINT8;
  s->field[2].n_shape = 1;
  memcpy(s->shape[2], sh, sizeof sh);
  s->field[2].shape = s->shape[2];
}
static void m_long_label(spec_t *s) {
  static char label[300];
  memset(label, 'x', sizeof label - 1);
  s->spec.name = label;
}
static void m_bad_utf8(spec_t *s) { s->spec.name = "caf\xc3"; }
static void m_overlong_utf8(spec_t *s) { s->spec.name = "\xc0\xaf"; }
static void m_newline_label(spec_t *s) { s->spec.name = "two\nlines"; }
static void m_capacity0(spec_t *s) { s->spec.capacity = 0; }
static void m_capacity_huge(spec_t *s) { s->spec.capacity = (1u << 28) + 1; }
static void m_fanout3(spec_t *s) { s->spec.fanout = 3; }
static void m_fanout128(spec_t *s) { s->spec.fanout = 128; }
static void m_alpha_neg(spec_t *s) {
  s->spec.alpha_opt_case = REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
  s->spec.alpha = -1;
}
static void m_alpha_nan(spec_t *s) {
  s->spec.alpha_opt_case = REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
  s->spec.alpha = NAN;
}
static void m_epsilon_inf(spec_t *s) {
  s->spec.epsilon_opt_case = REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON;
  s->spec.epsilon = INFINITY;
}
static void m_beta_big(spec_t *s) {
  s->spec.beta_opt_case = REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
  s->spec.beta = 1.5;
}
static void m_beta_neg(spec_t *s) {
  s->spec.beta_opt_case = REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
  s->spec.beta = -0.1;
}
static void m_maxp_zero(spec_t *s) {
  s->spec.max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  s->spec.max_priority = 0;
}
static void m_maxp_nan(spec_t *s) {
  s->spec.max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  s->spec.max_priority = NAN;
}
static void m_maxp_huge(spec_t *s) {
  s->spec.max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  s->spec.max_priority = 1e300;
}

static void test_spec_errors(void **state) {
  (void)state;
  static const struct {
    mutate_fn fn;
    const char *want;
  } cases[] = {
      {m_learner, "learner.algorithm is \"\"; use \"dqn\" or \"ddpg\""},
      {m_no_fields, "fields is empty"},
      {m_33_fields, "fields has 33 entries; at most 32"},
      {m_empty_name, "fields[1].name is empty"},
      {m_long_name, "fields[1].name is 64 bytes; at most 63"},
      {m_bad_char, "fields[2].name has byte 0x20 at position 2"},
      {m_dup_name, "fields[2].name \"obs\" repeats fields[0].name"},
      {m_unspecified, "fields[1].dtype is unspecified"},
      {m_unknown_dtype, "fields[0].dtype 99 is not a known dtype"},
      {m_rank9, "fields[2].shape has rank 9; at most 8"},
      {m_zero_dim, "fields[2].shape[0] is 0"},
      {m_huge_field, "fields[0] is more than 67108864 bytes per row"},
      {m_huge_row, "the row is more than 67108864 bytes by fields[2]"},
      {m_long_label, "name is 299 bytes; at most 256"},
      {m_bad_utf8, "name is not UTF-8"},
      {m_overlong_utf8, "name is not UTF-8"},
      {m_newline_label, "name is not UTF-8 text without control characters"},
      {m_capacity0, "capacity 0 is outside [1, 16777216]"},
      {m_capacity_huge, "capacity 268435457 is outside [1, 16777216]"},
      {m_fanout3, "fanout 3 is not 0 (default 16) or a power of two in [2, 64]"},
      {m_fanout128, "fanout 128 is not"},
      {m_alpha_neg, "alpha must be a finite number >= 0, not -1"},
      {m_alpha_nan, "alpha must be a finite number >= 0, not nan"},
      {m_epsilon_inf, "epsilon must be a finite number >= 0, not inf"},
      {m_beta_big, "beta must be in [0, 1], not 1.5"},
      {m_beta_neg, "beta must be in [0, 1], not -0.1"},
      {m_maxp_zero, "max_priority must be a finite number > 0, not 0"},
      {m_maxp_nan, "max_priority must be a finite number > 0, not nan"},
      {m_maxp_huge, "max_priority 1e+300 is too large for capacity 1024"},
  };
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(rdt_fresh("spec-errors"));
  rd_registry_t *r = make_registry(&cfg, st);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec_t s;
    basic_spec(&s);
    cases[i].fn(&s);
    rd_workload_t *w = (rd_workload_t *)&s; /* must come back NULL */
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_spec_pb_register(r, &s.spec, NULL, &w, &err);
    if (rc != RD_EINVAL || strstr(err.msg, cases[i].want) == NULL)
      fail_msg("case %zu: got %s \"%s\", want RD_EINVAL with \"%s\"", i, rd_err_name(rc),
               err.msg, cases[i].want);
    assert_int_equal(err.code, RD_EINVAL);
    assert_null(w);
    /* A NULL error pointer gives the same answer. */
    assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, NULL), RD_EINVAL);
  }
  assert_int_equal(rd_registry_count(r), 0);
  assert_int_equal(stored_count(st), 0);
  rd_error_t err;
  assert_int_equal(rd_spec_pb_register(r, NULL, NULL, NULL, &err), RD_EINVAL);
  rd_registry_destroy(r);
  rd_store_close(st);
}

static void test_unknown_fields_dropped(void **state) {
  (void)state;
  /* A newer client's field this server does not know is neither stored nor
   * echoed back as if it were honoured. */
  spec_t s;
  basic_spec(&s);
  size_t len;
  uint8_t *buf = pack_spec(&s.spec, &len);
  uint8_t *more = malloc(len + 3);
  memcpy(more, buf, len);
  more[len] = 0x98; /* field 99, varint */
  more[len + 1] = 0x06;
  more[len + 2] = 0x2a;
  Replayd__V1__WorkloadSpec *in = replayd__v1__workload_spec__unpack(NULL, len + 3, more);
  assert_non_null(in);
  assert_int_equal(in->base.n_unknown_fields, 1);

  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  rd_workload_t *w;
  rd_error_t err;
  assert_int_equal(rd_spec_pb_register(r, in, NULL, &w, &err), RD_OK);
  Replayd__V1__WorkloadSpec *n = stored_spec(w);
  assert_int_equal(n->base.n_unknown_fields, 0);
  assert_null(n->base.unknown_fields);
  free_spec(n);
  rd_workload_unref(w);
  rd_registry_destroy(r);
  replayd__v1__workload_spec__free_unpacked(in, NULL);
  free(more);
  free(buf);
}

/* ------------------------------------------------------------------ */
/* Server limits                                                       */
/* ------------------------------------------------------------------ */

static void test_limit_workload_count(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  cfg.max_workloads = 2;
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  rd_workload_t *a = register_ok(r, &s);
  rd_workload_t *b = register_ok(r, &s);
  rd_workload_t *c = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, &c, &err), RD_ETOOBIG);
  assert_null(c);
  assert_non_null(strstr(err.msg, "already holds 2 workloads, its --max-workloads limit"));
  assert_int_equal(rd_registry_count(r), 2);
  /* Deleting one makes room. */
  assert_int_equal(rd_registry_delete(r, a->id, &err), RD_OK);
  c = register_ok(r, &s);
  rd_workload_unref(a);
  rd_workload_unref(b);
  rd_workload_unref(c);
  rd_registry_destroy(r);

  rd_config_t bad = test_config();
  bad.max_workloads = 0;
  assert_int_equal(rd_registry_create(&r, &bad, NULL, &err), RD_EINVAL);
  assert_null(r);
}

static void test_limit_capacity_and_batch(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  cfg.max_capacity = 5000;
  cfg.max_batch = 256;
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  rd_error_t err;
  s.spec.capacity = 5001;
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_ETOOBIG);
  assert_non_null(strstr(err.msg, "capacity 5001 is outside [1, 5000] (this server's --max-capacity)"));
  s.spec.capacity = 0;
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "capacity 0 is outside [1, 5000]"));
  s.spec.capacity = 5000;
  s.spec.max_batch = 257;
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_ETOOBIG);
  assert_non_null(strstr(err.msg, "max_batch 257 is outside [1, 256] (this server's --max-batch)"));
  assert_int_equal(rd_registry_count(r), 0);

  s.spec.max_batch = 256;
  rd_workload_t *w = register_ok(r, &s);
  assert_int_equal(w->table.config.max_batch, 256);
  assert_int_equal(w->table.config.capacity, 5000);
  rd_workload_unref(w);
  s.spec.max_batch = 0; /* the server's default */
  w = register_ok(r, &s);
  Replayd__V1__WorkloadSpec *n = stored_spec(w);
  assert_int_equal(n->max_batch, 256);
  free_spec(n);
  rd_workload_unref(w);
  rd_registry_destroy(r);
}

static void test_limit_memory(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  cfg.max_memory_bytes = 1u << 20;
  cfg.max_batch = 1024;
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  s.spec.n_fields = 0;
  static const uint32_t blob[] = {1000};
  rdt_pb_field(&s, "blob", REPLAYD__V1__DTYPE__UINT8, 1, blob);
  s.spec.capacity = 600;
  uint64_t tree = rd_sumtree_memsize(600, 16);
  uint64_t need = tree + 600 * 1000 + 1024 * 12;

  rd_workload_t *a = register_ok(r, &s);
  /* What the registry charges is what the table holds, plus its scratch. */
  assert_true(rd_table_memsize(&a->table) + 1024 * 12 == need);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_ETOOBIG);
  char want[160];
  snprintf(want, sizeof want,
           "needs %llu bytes (tree %llu, rows 600000, scratch 12288, learner 0) but only %llu",
           (unsigned long long)need, (unsigned long long)tree,
           (unsigned long long)((1u << 20) - need));
  if (strstr(err.msg, want) == NULL) fail_msg("\"%s\" lacks \"%s\"", err.msg, want);
  assert_non_null(strstr(err.msg, "--max-memory 1048576"));
  assert_int_equal(rd_registry_count(r), 1);

  /* A smaller one still fits; the freed memory of a delete is reusable. */
  s.spec.capacity = 100;
  rd_workload_t *b = register_ok(r, &s);
  s.spec.capacity = 600;
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_ETOOBIG);
  assert_int_equal(rd_registry_delete(r, a->id, &err), RD_OK);
  rd_workload_t *c = register_ok(r, &s);
  rd_workload_unref(a);
  rd_workload_unref(b);
  rd_workload_unref(c);
  rd_registry_destroy(r);
}

/* ------------------------------------------------------------------ */
/* Hosted learners (learner_spec.c, pipeline.h)                        */
/* ------------------------------------------------------------------ */

/* CartPole DQN: obs float32[4], action int32, reward float32,
 * next_obs float32[4], done bool, with a learner spec. */
static void learner_spec(spec_t *s) {
  rdt_pb_spec_init(s, "cartpole", 1024);
  rdt_pb_cartpole(s, 5);
  rdt_pb_dqn(s, 2, 64, 32);
}

/* A DDPG variant: action float32[2] in [-2, 2], discount instead of done. */
static void ddpg_spec(spec_t *s) {
  learner_spec(s);
  static const uint32_t act[] = {2};
  s->field[1].dtype = REPLAYD__V1__DTYPE__FLOAT32;
  s->field[1].n_shape = 1;
  s->field[1].shape = (uint32_t *)act;
  snprintf(s->name[4], sizeof s->name[4], "discount");
  s->field[4].dtype = REPLAYD__V1__DTYPE__FLOAT32;
  s->learner.algorithm = "ddpg";
  s->learner.num_actions = 0;
  s->learner.action_low_opt_case = REPLAYD__V1__LEARNER_SPEC__ACTION_LOW_OPT_ACTION_LOW;
  s->learner.action_low = -2;
  s->learner.action_high_opt_case = REPLAYD__V1__LEARNER_SPEC__ACTION_HIGH_OPT_ACTION_HIGH;
  s->learner.action_high = 2;
}

static void test_learner_register(void **state) {
  (void)state;
  const char *dir = rdt_fresh("learner");
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(dir);
  rd_registry_t *r = make_registry(&cfg, st);
  spec_t s;
  learner_spec(&s);
  rd_workload_t *a = register_ok(r, &s);
  assert_non_null(a->pipeline);
  /* Every default is written out, so describe says what runs. */
  Replayd__V1__WorkloadSpec *na = stored_spec(a);
  const Replayd__V1__LearnerSpec *n = na->learner;
  assert_non_null(n);
  assert_ptr_not_equal(n, &s.learner);
  assert_string_equal(n->algorithm, "dqn");
  assert_string_equal(n->activation, "relu");
  assert_int_equal(n->lr_opt_case, REPLAYD__V1__LEARNER_SPEC__LR_OPT_LR);
  assert_true(fabs(n->lr - 1e-3) < 1e-12);
  assert_true(n->gamma == 0.99);
  assert_int_equal(n->double_dqn_opt_case, REPLAYD__V1__LEARNER_SPEC__DOUBLE_DQN_OPT_DOUBLE_DQN);
  assert_true(n->double_dqn);
  assert_int_equal(n->min_size, 32);
  assert_int_equal(n->n_hidden, 2);
  free_spec(na);
  /* The charge counts the learner on top of the table. */
  assert_true(a->charge > rd_table_memsize(&a->table) + 4096 * 12);
  /* Weights version 1 (the initial ones) are there before any step. */
  uint64_t ver = 0;
  size_t len = 0;
  size_t cap = rd_pipeline_weights_bytes(a->pipeline);
  void *buf = malloc(cap);
  assert_int_equal(rd_pipeline_weights(a->pipeline, 0, buf, cap, &ver, &len, NULL), RD_OK);
  assert_int_equal(ver, 1);
  assert_int_equal(len, cap);

  ddpg_spec(&s);
  rd_workload_t *b = register_ok(r, &s);
  assert_non_null(b->pipeline);
  Replayd__V1__WorkloadSpec *nb = stored_spec(b);
  assert_string_equal(nb->learner->algorithm, "ddpg");
  assert_int_equal(nb->learner->n_critic_hidden, 2); /* defaults to hidden */
  assert_int_equal(nb->learner->critic_hidden[1], 64);
  assert_true(nb->learner->action_low == -2);
  free_spec(nb);

  /* A restart brings the learners back from the stored specs. */
  size_t la, lb;
  uint8_t *pa = stored_bytes(a, &la), *pb = stored_bytes(b, &lb);
  char ida[33];
  snprintf(ida, sizeof ida, "%s", a->id);
  rd_workload_unref(a);
  rd_workload_unref(b);
  rd_registry_stop_learners(r);
  rd_registry_destroy(r);
  rd_store_close(st);
  st = open_store(dir);
  r = make_registry(&cfg, st);
  assert_int_equal(restore_ok(r), 2);
  rd_workload_t *l[2];
  assert_int_equal(rd_registry_list(r, l, 2), 2);
  assert_string_equal(l[0]->id, ida);
  for (int i = 0; i < 2; i++) {
    assert_non_null(l[i]->pipeline);
    size_t len2;
    uint8_t *got = stored_bytes(l[i], &len2);
    assert_int_equal(len2, i ? lb : la);
    assert_memory_equal(got, i ? pb : pa, len2);
    free(got);
  }
  /* Same seed, same initial weights. */
  void *buf2 = malloc(cap);
  assert_int_equal(rd_pipeline_weights(l[0]->pipeline, 0, buf2, cap, &ver, &len, NULL), RD_OK);
  assert_int_equal(len, cap);
  assert_memory_equal(buf, buf2, cap);
  /* Delete stops the learner; a holder of a reference still reads it. */
  rd_error_t err;
  assert_int_equal(rd_registry_delete(r, l[0]->id, &err), RD_OK);
  assert_int_equal(rd_pipeline_train(l[0]->pipeline, 1, 0, NULL, NULL, &err), RD_ECANCELED);
  assert_int_equal(rd_pipeline_weights(l[0]->pipeline, 0, buf2, cap, &ver, &len, NULL), RD_OK);
  rd_workload_unref(l[0]);
  rd_workload_unref(l[1]);
  free(buf);
  free(buf2);
  free(pa);
  free(pb);
  rd_registry_destroy(r);
  rd_store_close(st);
}

typedef void (*lmutate_fn)(spec_t *s);
static void lm_algo(spec_t *s) { s->learner.algorithm = "ppo"; }
static void lm_batch0(spec_t *s) { s->learner.batch_size = 0; }
static void lm_batch_big(spec_t *s) { s->learner.batch_size = 5000; }
static void lm_batch_cap(spec_t *s) {
  s->spec.capacity = 16;
}
static void lm_lr_neg(spec_t *s) {
  s->learner.lr_opt_case = REPLAYD__V1__LEARNER_SPEC__LR_OPT_LR;
  s->learner.lr = -1;
}
static void lm_lr_nan(spec_t *s) {
  s->learner.lr_opt_case = REPLAYD__V1__LEARNER_SPEC__LR_OPT_LR;
  s->learner.lr = NAN;
}
static void lm_gamma(spec_t *s) {
  s->learner.gamma_opt_case = REPLAYD__V1__LEARNER_SPEC__GAMMA_OPT_GAMMA;
  s->learner.gamma = 1.5;
}
static void lm_tau_and_period(spec_t *s) {
  s->learner.tau_opt_case = REPLAYD__V1__LEARNER_SPEC__TAU_OPT_TAU;
  s->learner.tau = 0.01;
  s->learner.target_update_period = 100;
}
static void lm_tau0(spec_t *s) {
  s->learner.tau_opt_case = REPLAYD__V1__LEARNER_SPEC__TAU_OPT_TAU;
  s->learner.tau = 0;
}
static void lm_actions1(spec_t *s) { s->learner.num_actions = 1; }
static void lm_critic_dqn(spec_t *s) {
  static uint32_t c[] = {8};
  s->learner.n_critic_hidden = 1;
  s->learner.critic_hidden = c;
}
static void lm_width0(spec_t *s) { s->learner.hidden[1] = 0; }
static void lm_width_huge(spec_t *s) {
  static uint32_t h[] = {64, 5000};
  s->learner.hidden = h;
}
static void lm_deep(spec_t *s) {
  static uint32_t h[64];
  for (int i = 0; i < 64; i++) h[i] = 8;
  s->learner.hidden = h;
  s->learner.n_hidden = 64;
}
static void lm_act(spec_t *s) { s->learner.activation = "sigmoid"; }
static void lm_depth(spec_t *s) { s->learner.relaxation_depth = 257; }
static void lm_spi(spec_t *s) { s->learner.samples_per_insert = -1; }
static void lm_spi_nan(spec_t *s) { s->learner.samples_per_insert = NAN; }
static void lm_min_size(spec_t *s) { s->learner.min_size = 8; }
static void lm_min_size_big(spec_t *s) { s->learner.min_size = 5000; }
static void lm_no_next(spec_t *s) { snprintf(s->name[3], sizeof s->name[3], "nxt"); }
static void lm_float_action(spec_t *s) { s->field[1].dtype = REPLAYD__V1__DTYPE__FLOAT32; }
static void lm_next_shape(spec_t *s) {
  static const uint32_t five[] = {5};
  s->field[3].shape = (uint32_t *)five;
}
static void lm_no_done(spec_t *s) { snprintf(s->name[4], sizeof s->name[4], "finished"); }
static void lm_grad_clip(spec_t *s) {
  s->learner.grad_clip_opt_case = REPLAYD__V1__LEARNER_SPEC__GRAD_CLIP_OPT_GRAD_CLIP;
  s->learner.grad_clip = -1;
}
static void lm_huber(spec_t *s) {
  s->learner.huber_delta_opt_case = REPLAYD__V1__LEARNER_SPEC__HUBER_DELTA_OPT_HUBER_DELTA;
  s->learner.huber_delta = 0;
}
static void lm_dqn_bounds(spec_t *s) {
  s->learner.action_low_opt_case = REPLAYD__V1__LEARNER_SPEC__ACTION_LOW_OPT_ACTION_LOW;
  s->learner.action_low = -1;
}
static void lm_dqn_critic_lr(spec_t *s) {
  s->learner.critic_lr_opt_case = REPLAYD__V1__LEARNER_SPEC__CRITIC_LR_OPT_CRITIC_LR;
  s->learner.critic_lr = 0.1;
}
static void lm_ddpg_actions(spec_t *s) {
  ddpg_spec(s);
  s->learner.num_actions = 3;
}
static void lm_ddpg_bounds(spec_t *s) {
  ddpg_spec(s);
  s->learner.action_low = 2;
}
static void lm_ddpg_int_action(spec_t *s) {
  ddpg_spec(s);
  s->field[1].dtype = REPLAYD__V1__DTYPE__INT32;
  s->field[1].n_shape = 0;
}
static void lm_ddpg_no_discount(spec_t *s) {
  ddpg_spec(s);
  snprintf(s->name[4], sizeof s->name[4], "disc");
}

static void test_learner_spec_errors(void **state) {
  (void)state;
  static const struct {
    lmutate_fn fn;
    const char *want;
  } cases[] = {
      {lm_algo, "learner.algorithm is \"ppo\""},
      {lm_batch0, "learner.batch_size is required"},
      {lm_batch_big, "learner.batch_size 5000 is above the workload's max_batch 4096"},
      {lm_batch_cap, "learner.batch_size 32 is above the capacity 16"},
      {lm_lr_neg, "learner.lr must be in (0, 1], not -1"},
      {lm_lr_nan, "learner.lr must be in (0, 1], not nan"},
      {lm_gamma, "learner.gamma must be in [0, 1], not 1.5"},
      {lm_tau_and_period, "not both"},
      {lm_tau0, "learner.tau must be in (0, 1], not 0"},
      {lm_actions1, "learner.num_actions is 1; dqn needs 2..4096"},
      {lm_critic_dqn, "learner.critic_hidden is for ddpg"},
      {lm_width0, "learner.hidden[1] is 0"},
      {lm_width_huge, "learner.hidden[1] is 5000"},
      {lm_deep, "learner.hidden has 64 layers"},
      {lm_act, "learner.activation is \"sigmoid\""},
      {lm_depth, "learner.relaxation_depth 257 is above 256"},
      {lm_spi, "learner.samples_per_insert must be in [0, 1e6], not -1"},
      {lm_spi_nan, "learner.samples_per_insert must be in [0, 1e6], not nan"},
      {lm_min_size, "learner.min_size 8 is outside [batch_size 32, capacity 1024]"},
      {lm_min_size_big, "learner.min_size 5000 is outside"},
      {lm_no_next, "the schema has no field \"next_obs\""},
      {lm_float_action, "field \"action\""},
      {lm_next_shape, "next_obs must have the shape of obs"},
      {lm_no_done, "\"discount\""},
      {lm_grad_clip, "learner.grad_clip must be >= 0"},
      {lm_huber, "learner.huber_delta must be > 0, not 0"},
      {lm_dqn_bounds, "learner.action_low/high are for ddpg"},
      {lm_dqn_critic_lr, "learner.critic_lr is for ddpg"},
      {lm_ddpg_actions, "learner.num_actions is for dqn"},
      {lm_ddpg_bounds, "learner.action_low 2 and action_high 2"},
      {lm_ddpg_int_action, "field \"action\""},
      {lm_ddpg_no_discount, "\"discount\""},
  };
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(rdt_fresh("learner-errors"));
  rd_registry_t *r = make_registry(&cfg, st);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec_t s;
    learner_spec(&s);
    static uint32_t hidden[2];
    hidden[0] = hidden[1] = 64;
    s.learner.hidden = hidden;
    cases[i].fn(&s);
    rd_workload_t *w = (rd_workload_t *)&s;
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_spec_pb_register(r, &s.spec, NULL, &w, &err);
    if (rc != RD_EINVAL || strstr(err.msg, cases[i].want) == NULL)
      fail_msg("case %zu: got %s \"%s\", want RD_EINVAL with \"%s\"", i, rd_err_name(rc),
               err.msg, cases[i].want);
    assert_null(w);
  }
  assert_int_equal(rd_registry_count(r), 0);
  assert_int_equal(stored_count(st), 0);
  /* The unmutated spec is fine, so each case failed for its own reason. */
  spec_t s;
  learner_spec(&s);
  rd_workload_t *w = register_ok(r, &s);
  rd_workload_unref(w);
  rd_registry_destroy(r);
  rd_store_close(st);
}

/* A learner too large for --max-memory is refused, naming its share. */
static void test_learner_memory(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  cfg.max_memory_bytes = 4u << 20;
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  learner_spec(&s);
  static uint32_t wide[] = {1024, 1024}; /* 1.05M parameters, 4 MiB a copy */
  s.learner.hidden = wide;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_ETOOBIG);
  if (strstr(err.msg, ", learner ") == NULL) fail_msg("%s", err.msg);
  assert_int_equal(rd_registry_count(r), 0);
  rd_registry_destroy(r);
}

/* A tenant's GPU-memory quota counts where the placement puts the learner
 * on a GPU (no GPU needed: admission runs before anything is built, and a
 * GPU learner that cannot start falls back to the CPU inside the
 * pipeline): refused naming the limit with nothing created, admitted when
 * it fits, charged to the tenant while the workload lives; on the CPU the
 * same workload takes no GPU memory. */
static void test_learner_gpu_quota(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  rd_tenants_t *ts = rd_registry_tenants(r);
  char tok[RD_TENANT_TOKEN_LEN + 1];
  rd_tenant_quota_t q = {.max_gpu_memory_bytes = 1000};
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_tenants_add(ts, "g", &q, tok, &err), RD_OK);
  rd_tenant_t *t = rd_tenants_get(ts, "g");
  spec_t s;
  learner_spec(&s);
  rd_spec_pb_t d;
  assert_int_equal(rd_spec_pb_decode(rd_registry_config(r), &s.spec, &d, &err), RD_OK);
  rd_workload_config_t wc;
  assert_int_equal(rd_workload_spec_resolve(&cfg, &d.spec, &wc, &err), RD_OK);
  assert_int_equal(rd_workload_config_gpu_bytes(&wc), 0); /* on the CPU */
  wc.learner.learner_kind = RD_LEARNER_ON_GPU;
  uint64_t need = rd_workload_config_gpu_bytes(&wc);
  assert_true(need > 1000);
  rd_placement_t pl;
  memset(&pl, 0, sizeof pl);
  pl.learner_kind = RD_LEARNER_ON_GPU;
  rd_workload_t *w = NULL;
  char wtok[RD_WORKLOAD_TOKEN_LEN + 1];
  assert_int_equal(rd_registry_register_as(r, t, &d.spec, &pl, &w, wtok, &err), RD_ETOOBIG);
  if (strstr(err.msg, "max_gpu_memory_bytes") == NULL) fail_msg("%s", err.msg);
  assert_int_equal(rd_registry_count(r), 0);
  /* The same workload on the CPU is not the GPU quota's business. */
  assert_int_equal(rd_registry_register_as(r, t, &d.spec, NULL, &w, wtok, &err), RD_OK);
  rd_tenant_info_t info;
  rd_tenant_info(t, &info);
  assert_int_equal(info.gpu_bytes, 0);
  assert_int_equal(rd_registry_delete(r, w->id, &err), RD_OK);
  rd_workload_unref(w);
  /* Room for one: admitted and charged, a second refused, room again after a delete. */
  rd_tenant_quota_t more = {.max_gpu_memory_bytes = need + need / 2};
  assert_int_equal(rd_tenants_set(ts, "g", &more, RD_TQ_GPU_MEMORY, &err), RD_OK);
  assert_int_equal(rd_registry_register_as(r, t, &d.spec, &pl, &w, wtok, &err), RD_OK);
  rd_tenant_info(t, &info);
  assert_true(info.gpu_bytes == need);
  rd_workload_t *w2 = NULL;
  assert_int_equal(rd_registry_register_as(r, t, &d.spec, &pl, &w2, wtok, &err), RD_ETOOBIG);
  if (strstr(err.msg, "max_gpu_memory_bytes") == NULL) fail_msg("%s", err.msg);
  assert_int_equal(rd_registry_count(r), 1);
  assert_int_equal(rd_registry_delete(r, w->id, &err), RD_OK);
  rd_workload_unref(w);
  rd_tenant_info(t, &info);
  assert_int_equal(info.gpu_bytes, 0);
  rd_spec_pb_release(&d);
  rd_tenant_unref(t);
  rd_registry_destroy(r);
}

/* A live move (the re-mapper's) is charged: the new copy against
 * --max-memory while both exist, the growth against the tenant's quota,
 * and afterwards what the workload holds then. */
static void test_move_charges(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  spec_t s;
  learner_spec(&s);
  rd_registry_t *probe = make_registry(&cfg, NULL);
  rd_workload_t *p = register_ok(probe, &s);
  const uint64_t c = p->charge;
  rd_workload_unref(p);
  rd_registry_destroy(probe);

  cfg.max_memory_bytes = 6 * c;
  rd_registry_t *r = make_registry(&cfg, NULL);
  rd_tenants_t *ts = rd_registry_tenants(r);
  char tok[RD_TENANT_TOKEN_LEN + 1], wtok[RD_WORKLOAD_TOKEN_LEN + 1];
  rd_tenant_quota_t q = {.max_memory_bytes = 2 * c + c / 2};
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_tenants_add(ts, "m", &q, tok, &err), RD_OK);
  rd_tenant_t *t = rd_tenants_get(ts, "m");
  rd_spec_pb_t d;
  assert_int_equal(rd_spec_pb_decode(rd_registry_config(r), &s.spec, &d, &err), RD_OK);
  rd_workload_t *w = NULL;
  assert_int_equal(rd_registry_register_as(r, t, &d.spec, NULL, &w, wtok, &err), RD_OK);
  assert_int_equal(w->charge, c);
  rd_tenant_info_t info;

  /* Over the server's memory while both copies exist: refused, nothing reserved. */
  assert_int_equal(rd_registry_move_begin(r, w, 5 * c + 1, 0, &err), RD_ETOOBIG);
  if (strstr(err.msg, "--max-memory") == NULL) fail_msg("%s", err.msg);
  assert_int_equal(rd_registry_charged(r), c);
  assert_int_equal(rd_registry_move_begin(r, w, 2 * c, 1, &err), RD_OK); /* fits both */
  rd_tenant_info(t, &info);
  assert_int_equal(info.bytes, 2 * c); /* the growth reserved */
  assert_int_equal(info.gpu_bytes, 1);
  assert_int_equal(rd_registry_charged(r), 3 * c); /* both copies */
  rd_registry_move_end(r, w, 2 * c, 1, 2 * c, 1);   /* done: it holds 2c now */
  assert_int_equal(w->charge, 2 * c);
  assert_int_equal(w->gpu_charge, 1);
  assert_int_equal(rd_registry_charged(r), 2 * c);
  rd_tenant_info(t, &info);
  assert_int_equal(info.bytes, 2 * c);
  assert_int_equal(info.gpu_bytes, 1);
  /* Growth past the tenant's quota (2c -> 2c + c/2 + 1): refused. */
  assert_int_equal(rd_registry_move_begin(r, w, 2 * c + c / 2 + 1, 0, &err), RD_ETOOBIG);
  if (strstr(err.msg, "max_memory_bytes") == NULL) fail_msg("%s", err.msg);
  /* A move that shrinks it needs no quota; one cut short charges what it holds. */
  assert_int_equal(rd_registry_move_begin(r, w, c / 2, 0, &err), RD_OK);
  rd_tenant_info(t, &info);
  assert_int_equal(info.bytes, 2 * c);
  rd_registry_move_end(r, w, c / 2, 0, c, 0);
  assert_int_equal(w->charge, c);
  assert_int_equal(rd_registry_charged(r), c);
  rd_tenant_info(t, &info);
  assert_int_equal(info.bytes, c);
  assert_int_equal(info.gpu_bytes, 0);

  /* Deleted during the move: the delete uncharged it, the end only releases. */
  assert_int_equal(rd_registry_move_begin(r, w, 2 * c, 0, &err), RD_OK);
  assert_int_equal(rd_registry_delete(r, w->id, &err), RD_OK);
  rd_registry_move_end(r, w, 2 * c, 0, 2 * c, 0);
  assert_int_equal(rd_registry_charged(r), 0);
  rd_tenant_info(t, &info);
  assert_int_equal(info.bytes, 0);
  assert_int_equal(info.workloads, 0);
  assert_int_equal(rd_registry_move_begin(r, w, c, 0, &err), RD_ENOTFOUND);
  rd_workload_unref(w);
  rd_spec_pb_release(&d);
  rd_tenant_unref(t);
  rd_registry_destroy(r);
}

/* ------------------------------------------------------------------ */
/* Lookup, list, delete, lifetime                                      */
/* ------------------------------------------------------------------ */

static void test_get_list_delete(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(rdt_fresh("gld"));
  rd_registry_t *r = make_registry(&cfg, st);
  spec_t s;
  basic_spec(&s);
  rd_workload_t *w[5];
  for (int i = 0; i < 5; i++) w[i] = register_ok(r, &s);
  assert_int_equal(stored_count(st), 5);

  /* list: creation order, one reference each, bounded by max. */
  rd_workload_t *l[8];
  assert_int_equal(rd_registry_list(r, l, 8), 5);
  for (int i = 0; i < 5; i++) {
    assert_ptr_equal(l[i], w[i]);
    assert_int_equal(atomic_load(&w[i]->refs), 3);
    rd_workload_unref(l[i]);
  }
  assert_int_equal(rd_registry_list(r, l, 2), 2);
  assert_ptr_equal(l[0], w[0]);
  rd_workload_unref(l[0]);
  rd_workload_unref(l[1]);
  assert_int_equal(rd_registry_list(r, l, 0), 0);

  /* get: exact ids only. */
  for (int i = 0; i < 5; i++) {
    rd_workload_t *g = rd_registry_get(r, w[i]->id);
    assert_ptr_equal(g, w[i]);
    rd_workload_unref(g);
  }
  char id[64];
  snprintf(id, sizeof id, "%s", w[0]->id);
  id[31] = id[31] == '0' ? '1' : '0';
  assert_null(rd_registry_get(r, id));
  snprintf(id, sizeof id, "%sx", w[0]->id);
  assert_null(rd_registry_get(r, id));
  assert_null(rd_registry_get(r, ""));
  assert_null(rd_registry_get(r, NULL));

  /* delete: gone from map and store; the rest keep their order. */
  rd_error_t err;
  assert_int_equal(rd_registry_delete(r, w[2]->id, &err), RD_OK);
  assert_true(atomic_load(&w[2]->deleted));
  assert_null(rd_registry_get(r, w[2]->id));
  assert_int_equal(rd_registry_count(r), 4);
  assert_int_equal(stored_count(st), 4);
  assert_int_equal(rd_registry_list(r, l, 8), 4);
  assert_ptr_equal(l[0], w[0]);
  assert_ptr_equal(l[1], w[1]);
  assert_ptr_equal(l[2], w[3]);
  assert_ptr_equal(l[3], w[4]);
  for (int i = 0; i < 4; i++) rd_workload_unref(l[i]);

  rd_error_clear(&err);
  assert_int_equal(rd_registry_delete(r, w[2]->id, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, w[2]->id));
  assert_int_equal(rd_registry_delete(r, "not-an-id\n", &err), RD_ENOTFOUND);
  assert_null(strchr(err.msg, '\n')); /* client text is not echoed raw */
  assert_int_equal(rd_registry_delete(r, "", &err), RD_EINVAL);
  assert_int_equal(rd_registry_count(r), 4);
  for (int i = 0; i < 5; i++) rd_workload_unref(w[i]);
  rd_registry_destroy(r);
  rd_store_close(st);
}

static void test_unref_after_delete(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  rd_workload_t *w = register_ok(r, &s);
  rd_workload_t *g = rd_registry_get(r, w->id);
  insert_rows(g, 10);
  rd_error_t err;
  assert_int_equal(rd_registry_delete(r, w->id, &err), RD_OK);
  /* Two references remain; the workload is still fully usable (ASan
   * would report a use after free here if delete had freed it). */
  assert_int_equal(atomic_load(&w->refs), 2);
  assert_true(atomic_load(&g->deleted));
  insert_rows(g, 5);
  rd_workload_counters_t c;
  rd_workload_counters(g, &c);
  assert_int_equal(c.inserts, 15);
  rd_workload_unref(g);
  assert_string_equal(w->name, "cartpole");
  rd_workload_unref(w); /* the last one: freed now */
  rd_workload_unref(NULL);

  /* destroy drops the registry's references but not a caller's. */
  w = register_ok(r, &s);
  rd_registry_destroy(r);
  assert_int_equal(atomic_load(&w->refs), 1);
  insert_rows(w, 3);
  rd_workload_unref(w);
}

static void test_token_ok(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  char wt[RD_WORKLOAD_TOKEN_LEN + 1], vt[RD_WORKLOAD_TOKEN_LEN + 1];
  rd_workload_t *w = register_tok(r, &s, wt);
  rd_workload_t *v = register_tok(r, &s, vt);
  assert_string_not_equal(wt, vt);
  assert_string_not_equal(w->id, v->id);
  /* The workload holds the token's SHA-256, not the token. */
  uint8_t h[RD_TOKEN_HASH_LEN];
  rd_token_hash(wt, 64, h);
  assert_memory_equal(w->token_hash, h, sizeof h);
  assert_null(memmem(w, sizeof *w, wt, 64));
  char t[80];
  snprintf(t, sizeof t, "%s", wt);
  assert_true(rd_workload_token_ok(w, t, 64));
  assert_false(rd_workload_token_ok(v, t, 64));
  assert_false(rd_workload_token_ok(w, t, 63)); /* a prefix */
  snprintf(t, sizeof t, "%s0", wt);
  assert_false(rd_workload_token_ok(w, t, 65)); /* an extension */
  snprintf(t, sizeof t, "%s", wt);
  t[63] ^= 1;
  assert_false(rd_workload_token_ok(w, t, 64));
  t[63] ^= 1;
  t[0] ^= 1;
  assert_false(rd_workload_token_ok(w, t, 64));
  assert_false(rd_workload_token_ok(w, NULL, 0));
  assert_false(rd_workload_token_ok(w, "", 0));
  assert_false(rd_workload_token_ok(NULL, wt, 64));
  rd_workload_unref(w);
  rd_workload_unref(v);
  rd_registry_destroy(r);
}

static void test_counters(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  s.spec.capacity = 100;
  rd_workload_t *w = register_ok(r, &s);
  rd_workload_counters_t c;
  rd_workload_counters(w, &c);
  assert_int_equal(c.inserts, 0);
  assert_int_equal(c.size, 0);
  assert_int_equal(c.bytes, rd_table_memsize(&w->table));
  assert_true(c.bytes >= 100 * 24);

  insert_rows(w, 80);
  insert_rows(w, 80); /* wraps: size stays at capacity */
  uint64_t keys[4];
  double probs[4], weights[4];
  rd_sample_out_t out = {keys, probs, weights, NULL};
  pthread_mutex_lock(&w->lock);
  assert_int_equal(rd_table_sample(&w->table, 4, w->default_beta, 0, &out, NULL), RD_OK);
  uint64_t upd[2] = {0, 159};
  double pr[2] = {1.0, 2.0};
  assert_int_equal(rd_table_update(&w->table, 2, upd, pr, NULL, NULL), RD_OK);
  pthread_mutex_unlock(&w->lock);
  rd_workload_counters(w, &c);
  assert_int_equal(c.inserts, 160);
  assert_int_equal(c.samples, 4);
  assert_int_equal(c.updates, 1);
  assert_int_equal(c.stale_updates, 1);
  assert_int_equal(c.size, 100);
  /* As the wire's message (rpc/messages.h): packable, base initialised. */
  Replayd__V1__WorkloadCounters m;
  rd_counters_msg(&m, &c);
  assert_int_equal(m.inserts, 160);
  assert_int_equal(m.size, 100);
  assert_true(replayd__v1__workload_counters__get_packed_size(&m) > 0);
  rd_workload_unref(w);
  rd_registry_destroy(r);
}

/* ------------------------------------------------------------------ */
/* Persistence                                                         */
/* ------------------------------------------------------------------ */

static void test_restore_after_reopen(void **state) {
  (void)state;
  const char *dir = rdt_fresh("restore");
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(dir);
  rd_registry_t *r = make_registry(&cfg, st);
  spec_t s;
  basic_spec(&s);
  char tokens[2][RD_WORKLOAD_TOKEN_LEN + 1];
  rd_workload_t *a = register_tok(r, &s, tokens[0]);
  s.spec.capacity = 4000;
  s.spec.seed = 77;
  s.spec.name = "second";
  rd_workload_t *b = register_tok(r, &s, tokens[1]);
  s.spec.name = "deleted";
  rd_workload_t *c = register_ok(r, &s);
  insert_rows(a, 50);
  rd_error_t err;
  assert_int_equal(rd_registry_delete(r, c->id, &err), RD_OK);

  /* Remember what must come back. */
  struct {
    char id[33], token[65];
    int64_t created;
    uint8_t *spec;
    size_t len;
  } want[2];
  rd_workload_t *ws[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    snprintf(want[i].id, sizeof want[i].id, "%s", ws[i]->id);
    snprintf(want[i].token, sizeof want[i].token, "%s", tokens[i]);
    want[i].created = ws[i]->created_unix;
    want[i].spec = stored_bytes(ws[i], &want[i].len);
  }
  rd_workload_unref(a);
  rd_workload_unref(b);
  rd_workload_unref(c);
  rd_registry_destroy(r);
  rd_store_close(st);

  /* A restart. */
  st = open_store(dir);
  r = make_registry(&cfg, st);
  assert_int_equal(restore_ok(r), 2);
  assert_int_equal(rd_registry_count(r), 2);
  rd_workload_t *l[4];
  assert_int_equal(rd_registry_list(r, l, 4), 2);
  for (int i = 0; i < 2; i++) {
    assert_string_equal(l[i]->id, want[i].id);
    assert_true(rd_workload_token_ok(l[i], want[i].token, 64));
    assert_int_equal(l[i]->created_unix, want[i].created);
    size_t len;
    uint8_t *got = stored_bytes(l[i], &len);
    assert_int_equal(len, want[i].len);
    assert_memory_equal(got, want[i].spec, len);
    free(got);
    free(want[i].spec);
    rd_workload_counters_t cnt;
    rd_workload_counters(l[i], &cnt);
    assert_int_equal(cnt.size, 0); /* data does not persist yet */
    assert_int_equal(cnt.inserts, 0);
    assert_false(atomic_load(&l[i]->deleted));
  }
  assert_int_equal(l[1]->table.config.capacity, 4000);
  assert_true(l[1]->table.config.seed == 77);
  rd_workload_t *g = rd_registry_get(r, want[0].id);
  assert_ptr_equal(g, l[0]);
  assert_true(rd_workload_token_ok(g, want[0].token, 64));
  rd_workload_unref(g);
  insert_rows(l[0], 5); /* a working table */
  rd_workload_unref(l[0]);
  rd_workload_unref(l[1]);

  /* Restoring twice brings nothing new back. */
  assert_int_equal(restore_ok(r), 0);
  assert_int_equal(rd_registry_count(r), 2);
  /* New registrations after a restore are stored after the old ones. */
  basic_spec(&s);
  rd_workload_t *d = register_ok(r, &s);
  assert_int_equal(stored_count(st), 3);
  rd_workload_unref(d);
  rd_registry_destroy(r);
  rd_store_close(st);
}

static void test_restore_skips_invalid(void **state) {
  (void)state;
  const char *dir = rdt_fresh("restore-skip");
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(dir);
  rd_registry_t *r = make_registry(&cfg, st);
  spec_t s;
  basic_spec(&s);
  s.spec.capacity = 100;
  rd_workload_t *small = register_ok(r, &s);
  s.spec.capacity = 100000;
  rd_workload_t *big = register_ok(r, &s);
  char small_id[33], big_id[33];
  snprintf(small_id, sizeof small_id, "%s", small->id);
  snprintf(big_id, sizeof big_id, "%s", big->id);
  rd_workload_unref(small);
  rd_workload_unref(big);
  rd_registry_destroy(r);

  /* Rows the registry could not have written: undecodable bytes, a bad id. */
  rd_stored_workload_t junk;
  memset(&junk, 0, sizeof junk);
  snprintf(junk.id, sizeof junk.id, "%s", "0123456789abcdef0123456789abcdef");
  stored_token(0, junk.token, sizeof junk.token);
  uint8_t bytes[] = {0xff, 0xff, 0xff};
  junk.spec = bytes;
  junk.spec_len = sizeof bytes;
  assert_int_equal(rd_store_put_workload(st, &junk, NULL), RD_OK);
  snprintf(junk.id, sizeof junk.id, "%s", "NOT-HEX");
  size_t len;
  junk.spec = pack_spec(&s.spec, &len);
  junk.spec_len = len;
  assert_int_equal(rd_store_put_workload(st, &junk, NULL), RD_OK);
  free(junk.spec);

  /* The server restarts with a lower capacity limit and logs to a file. */
  char log_path[200];
  snprintf(log_path, sizeof log_path, "%s/restore.log", rdt_root);
  assert_int_equal(rd_log_open(log_path, RD_LOG_INFO, NULL), RD_OK);
  cfg.max_capacity = 1000;
  r = make_registry(&cfg, st);
  assert_int_equal(restore_ok(r), 1);
  rd_log_open(NULL, RD_LOG_ERROR, NULL);
  rd_workload_t *g = rd_registry_get(r, small_id);
  assert_non_null(g);
  rd_workload_unref(g);
  assert_null(rd_registry_get(r, big_id));
  /* Skipped workloads stay stored, so fixing the config brings them back. */
  assert_int_equal(stored_count(st), 4);

  FILE *f = fopen(log_path, "r");
  assert_non_null(f);
  static char logtext[8192];
  size_t got = fread(logtext, 1, sizeof logtext - 1, f);
  logtext[got] = '\0';
  fclose(f);
  char want[200];
  snprintf(want, sizeof want, "WARN registry: skipping stored workload %s: capacity 100000 is "
           "outside [1, 1000]", big_id);
  if (strstr(logtext, want) == NULL) fail_msg("log lacks \"%s\":\n%s", want, logtext);
  snprintf(want, sizeof want, "INFO registry: restored workload %s", small_id);
  if (strstr(logtext, want) == NULL) fail_msg("log lacks \"%s\":\n%s", want, logtext);
  assert_non_null(strstr(logtext, "0123456789abcdef0123456789abcdef: its spec does not decode"));
  assert_non_null(strstr(logtext, "malformed id or token hash"));
  assert_non_null(strstr(logtext, "restored 1 of 4 stored workloads"));
  rd_registry_destroy(r);
  rd_store_close(st);
}

/* Specs as the daemon before the rpc/core split stored them (its
 * workloads table, verbatim): a CartPole replay table with alpha 0 and
 * capacity 500, and a DQN learner's with capacity 2000. They must restore
 * to the same bytes and configuration: state directories outlive builds. */
static const uint8_t stored_replay[] =
    "\x0a\x08\x63\x61\x72\x74\x70\x6f\x6c\x65\x12\x0a\x0a\x03\x6f\x62"
    "\x73\x10\x01\x1a\x01\x04\x12\x0a\x0a\x06\x61\x63\x74\x69\x6f\x6e"
    "\x10\x02\x12\x0a\x0a\x06\x72\x65\x77\x61\x72\x64\x10\x01\x12\x0f"
    "\x0a\x08\x6e\x65\x78\x74\x5f\x6f\x62\x73\x10\x01\x1a\x01\x04\x12"
    "\x08\x0a\x04\x64\x6f\x6e\x65\x10\x05\x18\xf4\x03\x20\x10\x29\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x31\x8d\xed\xb5\xa0\xf7\xc6\xb0\x3e"
    "\x39\x9a\x99\x99\x99\x99\x99\xd9\x3f\x40\x07\x49\x00\x00\x00\x00"
    "\x00\x00\x30\x41\x50\x80\x80\x04";
static const uint8_t stored_dqn[] =
    "\x0a\x08\x63\x61\x72\x74\x70\x6f\x6c\x65\x12\x0a\x0a\x03\x6f\x62"
    "\x73\x10\x01\x1a\x01\x04\x12\x0a\x0a\x06\x61\x63\x74\x69\x6f\x6e"
    "\x10\x02\x12\x0a\x0a\x06\x72\x65\x77\x61\x72\x64\x10\x01\x12\x0f"
    "\x0a\x08\x6e\x65\x78\x74\x5f\x6f\x62\x73\x10\x01\x1a\x01\x04\x12"
    "\x08\x0a\x04\x64\x6f\x6e\x65\x10\x05\x18\xd0\x0f\x20\x10\x29\x33"
    "\x33\x33\x33\x33\x33\xe3\x3f\x31\x8d\xed\xb5\xa0\xf7\xc6\xb0\x3e"
    "\x39\x9a\x99\x99\x99\x99\x99\xd9\x3f\x40\x07\x49\x00\x00\x00\x00"
    "\x00\x00\x30\x41\x50\x80\x80\x04\xa2\x01\x45\x0a\x03\x64\x71\x6e"
    "\x12\x02\x10\x10\x18\x20\x2a\x04\x72\x65\x6c\x75\x31\xfc\xa9\xf1"
    "\xd2\x4d\x62\x50\x3f\x41\xae\x47\xe1\x7a\x14\xae\xef\x3f\x51\x7b"
    "\x14\xae\x47\xe1\x7a\x74\x3f\x61\x00\x00\x00\x00\x00\x00\x24\x40"
    "\x69\x00\x00\x00\x00\x00\x00\xf0\x3f\x70\x01\x78\x02\x98\x01\x20";

static void test_restore_stored_format(void **state) {
  (void)state;
  const char *dir = rdt_fresh("restore-format");
  rd_config_t cfg = test_config();
  cfg.max_batch = 65536; /* the default they were stored under */
  rd_store_t *st = open_store(dir);
  static const struct {
    const char *id;
    const uint8_t *spec;
    size_t len;
  } rows[] = {{"9e3787b780d749fd66247c3e03bf1cbe", stored_replay, sizeof stored_replay - 1},
              {"cdf336db5c384823cdbe30cd350accff", stored_dqn, sizeof stored_dqn - 1}};
  for (int i = 0; i < 2; i++) {
    rd_stored_workload_t sw;
    memset(&sw, 0, sizeof sw);
    snprintf(sw.id, sizeof sw.id, "%s", rows[i].id);
    stored_token(i, sw.token, sizeof sw.token);
    sw.created_unix = 1795655322 + i;
    sw.spec = (uint8_t *)rows[i].spec;
    sw.spec_len = rows[i].len;
    assert_int_equal(rd_store_put_workload(st, &sw, NULL), RD_OK);
  }
  rd_registry_t *r = make_registry(&cfg, st);
  assert_int_equal(restore_ok(r), 2);
  for (int i = 0; i < 2; i++) {
    rd_workload_t *w = rd_registry_get(r, rows[i].id);
    assert_non_null(w);
    assert_int_equal(w->spec_len, rows[i].len);
    assert_memory_equal(w->spec, rows[i].spec, rows[i].len);
    assert_string_equal(w->name, "cartpole");
    assert_int_equal(w->table.config.schema.n_fields, 5);
    assert_int_equal(rd_schema_row_bytes(&w->table.config.schema), 41);
    assert_int_equal(w->table.config.schema.fields[4].dtype, RD_DTYPE_BOOL);
    assert_int_equal(w->table.config.capacity, i ? 2000 : 500);
    assert_true(w->table.config.alpha == (i ? 0.6 : 0.0));
    assert_true(w->table.config.seed == 7);
    assert_int_equal(w->pipeline != NULL, i);
    rd_workload_unref(w);
  }
  rd_registry_stop_learners(r);
  rd_registry_destroy(r);
  rd_store_close(st);
}

/* One stored row the store cannot read (an empty id, as a hand edit could
 * leave): the restore fails as a whole and brings nothing back, so the
 * daemon stops instead of serving the other workloads as if they were all. */
static void test_restore_unreadable_store_fails(void **state) {
  (void)state;
  const char *dir = rdt_fresh("restore-unreadable");
  rd_config_t cfg = test_config();
  rd_store_t *st = open_store(dir);
  rd_registry_t *r = make_registry(&cfg, st);
  spec_t s;
  basic_spec(&s);
  rd_workload_unref(register_ok(r, &s));
  rd_workload_unref(register_ok(r, &s));
  rd_registry_destroy(r);

  char db[200];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  sqlite3 *h;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "INSERT INTO workloads (id, token, created_unix, spec, seq) "
                                   "VALUES ('', 'tok', 1, x'', 1000)",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(h);

  r = make_registry(&cfg, st);
  size_t n = 99;
  rd_error_t err;
  rd_error_clear(&err);
  rd_spec_decoder_t dec = rd_spec_pb_decoder(rd_registry_config(r));
  assert_int_equal(rd_registry_restore(r, &dec, &n, &err), RD_ESTORE);
  assert_int_equal(n, 0);
  assert_int_equal(rd_registry_count(r), 0);
  assert_non_null(strstr(err.msg, "cannot read the stored workloads"));
  assert_non_null(strstr(err.msg, "malformed id or token"));
  assert_non_null(strstr(err.msg, db));
  /* Nothing was removed: the operator can still fix the row. */
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_prepare_v2(h, "SELECT count(*) FROM workloads", -1, &q, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(q, 0), 3);
  sqlite3_finalize(q);
  sqlite3_close(h);
  rd_registry_destroy(r);
  rd_store_close(st);
}

/* A trigger makes the next store write fail, as a full disk would. */
static void break_store(const char *dir, const char *when) {
  char db[200], sql[256];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  snprintf(sql, sizeof sql,
           "CREATE TRIGGER fail_%s BEFORE %s ON workloads BEGIN SELECT RAISE(ABORT, "
           "'disk on fire'); END;", when, when);
  sqlite3 *h;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
}

static void test_store_failure_changes_nothing(void **state) {
  (void)state;
  const char *dir = rdt_fresh("store-fail");
  rd_config_t cfg = test_config();
  /* Room for exactly two basic workloads. */
  uint64_t one = rd_sumtree_memsize(1024, 16) + 1024 * 24 + (uint64_t)cfg.max_batch * 12;
  cfg.max_memory_bytes = 2 * one;
  rd_store_t *st = open_store(dir);
  rd_registry_t *r = make_registry(&cfg, st);
  spec_t s;
  basic_spec(&s);
  rd_workload_t *a = register_ok(r, &s);

  break_store(dir, "INSERT");
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_spec_pb_register(r, &s.spec, NULL, &w, &err);
  assert_int_equal(rc, RD_ESTORE);
  assert_null(w);
  assert_non_null(strstr(err.msg, "disk on fire"));
  assert_int_equal(rd_registry_count(r), 1);
  assert_int_equal(stored_count(st), 1);

  /* A failed delete leaves the workload registered and stored. */
  break_store(dir, "DELETE");
  rd_error_clear(&err);
  assert_int_equal(rd_registry_delete(r, a->id, &err), RD_ESTORE);
  assert_non_null(strstr(err.msg, "disk on fire"));
  assert_false(atomic_load(&a->deleted));
  rd_workload_t *g = rd_registry_get(r, a->id);
  assert_ptr_equal(g, a);
  rd_workload_unref(g);
  assert_int_equal(stored_count(st), 1);

  /* The failed registration did not keep its memory: once the disk is
   * back, a second workload fits and a third does not. */
  char db[200];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  sqlite3 *h;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "DROP TRIGGER fail_INSERT; DROP TRIGGER fail_DELETE;", NULL,
                                NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_OK);
  assert_int_equal(rd_spec_pb_register(r, &s.spec, NULL, NULL, &err), RD_ETOOBIG);
  assert_non_null(strstr(err.msg, "--max-memory"));
  assert_int_equal(rd_registry_count(r), 2);
  assert_int_equal(stored_count(st), 2);
  rd_workload_unref(a);
  rd_registry_destroy(r);
  rd_store_close(st);
}

/* ------------------------------------------------------------------ */
/* Concurrency                                                         */
/* ------------------------------------------------------------------ */

typedef struct {
  rd_registry_t *r;
  char id[RD_WORKLOAD_ID_LEN + 1];
  atomic_int *stop;
  atomic_long uses;
} user_arg_t;

/* What a gRPC thread does: look up, use the table under its lock, give
 * back. Also list and read counters, as ServerInfo does. */
static void *user_thread(void *p) {
  user_arg_t *a = p;
  float obs[4] = {1, 2, 3, 4};
  int32_t act = 1;
  float rew = 0.5f;
  rd_cbuf_t cols[3] = {{obs, 16}, {&act, 4}, {&rew, 4}};
  while (!atomic_load(a->stop) || a->uses < 50) {
    rd_workload_t *w = rd_registry_get(a->r, a->id);
    if (w == NULL) {
      if (atomic_load(a->stop)) break;
      continue;
    }
    pthread_mutex_lock(&w->lock);
    rd_table_insert(&w->table, 1, cols, NULL, NULL, NULL);
    pthread_mutex_unlock(&w->lock);
    rd_workload_counters_t c;
    rd_workload_counters(w, &c);
    rd_workload_t *l[8];
    size_t n = rd_registry_list(a->r, l, 8);
    for (size_t i = 0; i < n; i++) rd_workload_unref(l[i]);
    rd_workload_unref(w);
    a->uses++;
    if (a->uses > 200000) break; /* bound the test whatever happens */
  }
  return NULL;
}

static void test_concurrent_use_and_delete(void **state) {
  (void)state;
  rd_config_t cfg = test_config();
  rd_registry_t *r = make_registry(&cfg, NULL);
  spec_t s;
  basic_spec(&s);
  for (int round = 0; round < 3; round++) {
    rd_workload_t *w = register_ok(r, &s);
    rd_workload_t *other = register_ok(r, &s); /* stays: lookups of it continue */
    atomic_int stop = 0;
    enum { N = 4 };
    pthread_t th[N];
    user_arg_t args[N];
    for (int i = 0; i < N; i++) {
      args[i].r = r;
      snprintf(args[i].id, sizeof args[i].id, "%s", (i & 1) ? other->id : w->id);
      args[i].stop = &stop;
      atomic_init(&args[i].uses, 0);
      assert_int_equal(pthread_create(&th[i], NULL, user_thread, &args[i]), 0);
    }
    /* Delete while every thread is inside its loop (each has used its
     * workload at least once), bounded at 10 s on a loaded machine. */
    struct timespec ts = {0, 1000 * 1000};
    for (int waited = 0; waited < 10000; waited++) {
      int ready = 0;
      for (int i = 0; i < N; i++) ready += atomic_load(&args[i].uses) > 0;
      if (ready == N) break;
      nanosleep(&ts, NULL);
    }
    nanosleep(&ts, NULL);
    rd_error_t err;
    assert_int_equal(rd_registry_delete(r, w->id, &err), RD_OK);
    rd_workload_unref(w); /* maybe the last reference, maybe not: either is fine */
    atomic_store(&stop, 1);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) assert_true(atomic_load(&args[i].uses) > 0);
    assert_int_equal(rd_registry_delete(r, other->id, &err), RD_OK);
    assert_int_equal(atomic_load(&other->refs), 1); /* every thread gave its references back */
    rd_workload_unref(other);
    assert_int_equal(rd_registry_count(r), 0);
  }
  rd_registry_destroy(r);
}

RDT_MAIN(rdt_root_setup, rdt_root_teardown,
         cmocka_unit_test(test_register_fills_defaults),
         cmocka_unit_test(test_register_explicit_values),
         cmocka_unit_test(test_spec_errors),
         cmocka_unit_test(test_unknown_fields_dropped),
         cmocka_unit_test(test_limit_workload_count),
         cmocka_unit_test(test_limit_capacity_and_batch),
         cmocka_unit_test(test_limit_memory),
         cmocka_unit_test(test_learner_register),
         cmocka_unit_test(test_learner_spec_errors),
         cmocka_unit_test(test_learner_memory),
         cmocka_unit_test(test_learner_gpu_quota),
         cmocka_unit_test(test_move_charges),
         cmocka_unit_test(test_get_list_delete),
         cmocka_unit_test(test_unref_after_delete),
         cmocka_unit_test(test_token_ok),
         cmocka_unit_test(test_counters),
         cmocka_unit_test(test_restore_after_reopen),
         cmocka_unit_test(test_restore_skips_invalid),
         cmocka_unit_test(test_restore_stored_format),
         cmocka_unit_test(test_restore_unreadable_store_fails),
         cmocka_unit_test(test_store_failure_changes_nothing),
         cmocka_unit_test(test_concurrent_use_and_delete))
