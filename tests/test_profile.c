/* test_profile.c - measuring a workload's primitives on the CPU: shapes and
 * their keys, results for every primitive and thread count, the time
 * bound, and bad requests; and rd_profile_cpu_cached, which reuses stored
 * profiles (the store itself: test_store.c). Workloads here are small: a
 * test machine may be busy with something else. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "profile.h"
#include "profile_cache.h"
#include "profile_timer.h"
#include "store.h"
#include "rd_clock.h"
#include "rdt_unit.h"
#include "rdt_main.h"

/* Wall-time slack over the budget: the bound holds up to one call's
 * misestimate and the scheduler; these shapes' calls take well under a
 * millisecond, so this is generous for a loaded machine. */
#define SLACK_S 0.25

static void table_config(rd_table_config_t *tc, uint32_t capacity, uint32_t obs) {
  rd_table_config_default(tc);
  tc->capacity = capacity;
  rd_schema_t *s = &tc->schema;
  s->n_fields = 2;
  snprintf(s->fields[0].name, sizeof s->fields[0].name, "obs");
  s->fields[0].dtype = RD_DTYPE_FLOAT32;
  s->fields[0].rank = 1;
  s->fields[0].shape[0] = obs;
  snprintf(s->fields[1].name, sizeof s->fields[1].name, "reward");
  s->fields[1].dtype = RD_DTYPE_FLOAT32;
}

/* A learner of the benchmark shapes' kind: obs - h - h - out. */
static void pipeline_config(rd_pipeline_config_t *pc, rd_algo_t algo, uint32_t obs,
                            uint32_t out, uint32_t hidden, uint32_t critic_hidden,
                            uint32_t batch) {
  memset(pc, 0, sizeof *pc);
  rd_learner_config_t *c = &pc->learner;
  rd_learner_config_default(c);
  c->algo = algo;
  c->obs_dim = obs;
  c->n_hidden = 2;
  c->hidden[0] = c->hidden[1] = hidden;
  if (algo == RD_ALGO_DQN) {
    c->num_actions = out;
  } else {
    c->action_dim = out;
    c->n_critic_hidden = 2;
    c->critic_hidden[0] = c->critic_hidden[1] = critic_hidden;
  }
  c->max_batch = batch;
  pc->batch = batch;
}

/* A table of 4096 items whose schema has these fields (rank 1 of n
 * elements, or a scalar for n = 0). */
typedef struct {
  const char *name;
  rd_dtype_t t;
  uint32_t n;
} field_t;

static void table_with_fields(rd_table_config_t *tc, const field_t *f, uint32_t n_fields) {
  rd_table_config_default(tc);
  tc->capacity = 4096;
  rd_schema_t *sc = &tc->schema;
  sc->n_fields = n_fields;
  for (uint32_t i = 0; i < n_fields; i++) {
    snprintf(sc->fields[i].name, sizeof sc->fields[i].name, "%s", f[i].name);
    sc->fields[i].dtype = f[i].t;
    sc->fields[i].rank = f[i].n ? 1 : 0;
    sc->fields[i].shape[0] = f[i].n;
  }
}

static void shape_ok(rd_profile_shape_t *s, const rd_table_config_t *tc,
                     const rd_pipeline_config_t *pc, uint32_t batch) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_profile_shape_init(s, tc, pc, batch, &err);
  if (rc) fail_msg("rd_profile_shape_init: %s %s", rd_err_name(rc), err.msg);
}

/* The shape of a workload of `capacity` items of obs floats with a
 * pipeline_config learner. */
static void learner_shape(rd_profile_shape_t *s, uint32_t capacity, rd_algo_t algo, uint32_t obs,
                          uint32_t out, uint32_t hidden, uint32_t critic_hidden, uint32_t batch) {
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  table_config(&tc, capacity, obs);
  pipeline_config(&pc, algo, obs, out, hidden, critic_hidden, batch);
  shape_ok(s, &tc, &pc, 0);
}

/* ------------------------------------------------------------------ */
/* Shapes and names                                                    */
/* ------------------------------------------------------------------ */

static void test_shape_keys(void **state) {
  (void)state;
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  rd_profile_shape_t s;

  table_config(&tc, 100000, 4);
  pipeline_config(&pc, RD_ALGO_DQN, 4, 2, 64, 0, 32);
  shape_ok(&s, &tc, &pc, 0);
  assert_int_equal(s.key.batch, 32);
  assert_int_equal(s.key.capacity, 100000);
  assert_int_equal(s.key.fanout, 16);
  assert_string_equal(s.key.algorithm, "dqn");
  assert_string_equal(s.key.network, "dqn:4-64-64-2");
  assert_int_equal(s.row_bytes, 20);
  assert_true(s.has_learner);

  table_config(&tc, 1000000, 11);
  tc.fanout = 32;
  pipeline_config(&pc, RD_ALGO_DDPG, 11, 3, 256, 256, 256);
  shape_ok(&s, &tc, &pc, 0);
  assert_string_equal(s.key.algorithm, "ddpg");
  assert_string_equal(s.key.network, "ddpg:11-256-256-3/14-256-256-1");
  assert_int_equal(s.key.fanout, 32);

  /* An explicit batch wins over the pipeline's (the learner's max_batch
   * grows to it). */
  shape_ok(&s, &tc, &pc, 1024);
  assert_int_equal(s.key.batch, 1024);
  assert_true(s.learner.max_batch >= 1024);

  /* Replay only: the batch the clients sample. */
  shape_ok(&s, &tc, NULL, 512);
  assert_string_equal(s.key.algorithm, "none");
  assert_string_equal(s.key.network, "");
  assert_false(s.has_learner);

  rd_profile_key_t a = s.key, b = s.key;
  assert_true(rd_profile_key_equal(&a, &b));
  b.capacity++;
  assert_false(rd_profile_key_equal(&a, &b));
}

/* The columns gather copies are the learner's fields as the pipeline binds
 * them, in the table's sizes; other fields and an unbound config are not. */
static void test_shape_columns(void **state) {
  (void)state;
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  rd_profile_shape_t s;
  rd_error_t err;
  const field_t f[] = {{"obs", RD_DTYPE_FLOAT32, 11},  {"info", RD_DTYPE_FLOAT32, 100},
                       {"action", RD_DTYPE_FLOAT32, 3}, {"reward", RD_DTYPE_FLOAT32, 0},
                       {"next_obs", RD_DTYPE_FLOAT32, 11}, {"done", RD_DTYPE_BOOL, 0}};
  table_with_fields(&tc, f, 6);
  rd_schema_t *sc = &tc.schema;
  pipeline_config(&pc, RD_ALGO_DDPG, 11, 3, 64, 64, 64);
  shape_ok(&s, &tc, &pc, 0);
  assert_int_equal(s.n_cols, 0); /* not bound yet */
  assert_int_equal(rd_pipeline_bind_schema(&pc, sc, &err), RD_OK);
  shape_ok(&s, &tc, &pc, 0);
  assert_int_equal(s.row_bytes, 44 + 400 + 12 + 4 + 44 + 1);
  assert_int_equal(s.n_cols, 5);
  const uint32_t want[5] = {44, 12, 4, 44, 1}; /* obs, action, reward, next_obs, done */
  for (int i = 0; i < 5; i++) assert_int_equal(s.col_bytes[i], want[i]);
  shape_ok(&s, &tc, NULL, 64); /* replay only: no pipeline */
  assert_int_equal(s.n_cols, 0);
}

static void test_bad_shapes(void **state) {
  (void)state;
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  rd_profile_shape_t s;
  rd_error_t err;
  table_config(&tc, 1000, 4);
  assert_int_equal(rd_profile_shape_init(&s, &tc, NULL, 0, &err), RD_EINVAL); /* no batch */
  assert_int_equal(rd_profile_shape_init(&s, &tc, NULL, 1001, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "above the capacity"));
  tc.fanout = 12;
  assert_int_equal(rd_profile_shape_init(&s, &tc, NULL, 32, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "fanout 12"));
  table_config(&tc, 1000, 4);
  pipeline_config(&pc, RD_ALGO_DQN, 4, 2, 64, 0, 32);
  pc.learner.num_actions = 0;
  assert_int_equal(rd_profile_shape_init(&s, &tc, &pc, 0, &err), RD_EINVAL);
  assert_int_equal(rd_profile_shape_init(&s, NULL, &pc, 0, &err), RD_EINVAL);

  /* Keys as an import would bring them. */
  rd_profile_key_t k = {32, 1000, 16, "dqn", "dqn:4-64-64-2"};
  assert_int_equal(rd_profile_key_validate(&k, &err), RD_OK);
  const char *bad_net[] = {"dqn:4", "dqn:4-0-2", "dqn:4--2", "ddpg:4-8-1", "dqn:4-8-2/5-8-1",
                           "dqn:4-8-2x", "dqn4-8-2", "dqn:04-8-2", "dqn:4-99999999-2"};
  for (size_t i = 0; i < sizeof bad_net / sizeof bad_net[0]; i++) {
    rd_profile_key_t b = k;
    snprintf(b.network, sizeof b.network, "%s", bad_net[i]);
    if (rd_profile_key_validate(&b, &err) != RD_EINVAL) fail_msg("accepted network %s", bad_net[i]);
  }
  rd_profile_key_t b = k;
  snprintf(b.algorithm, sizeof b.algorithm, "ddpg");
  snprintf(b.network, sizeof b.network, "ddpg:11-256-256-3/14-256-256-1");
  assert_int_equal(rd_profile_key_validate(&b, &err), RD_OK);
  snprintf(b.algorithm, sizeof b.algorithm, "none");
  assert_int_equal(rd_profile_key_validate(&b, &err), RD_EINVAL); /* none has no network */
  b.network[0] = '\0';
  assert_int_equal(rd_profile_key_validate(&b, &err), RD_OK);
  snprintf(b.algorithm, sizeof b.algorithm, "sac");
  assert_int_equal(rd_profile_key_validate(&b, &err), RD_EINVAL);
  b = k;
  b.batch = 0;
  assert_int_equal(rd_profile_key_validate(&b, &err), RD_EINVAL);
  b = k;
  b.capacity = (1u << 28) + 1;
  assert_int_equal(rd_profile_key_validate(&b, &err), RD_EINVAL);
}

static void test_names_and_threads(void **state) {
  (void)state;
  rd_primitive_t p;
  rd_profile_source_t s;
  rd_error_t err;
  for (int i = 0; i < RD_PRIM_COUNT; i++) {
    assert_int_equal(rd_primitive_parse(rd_primitive_name((rd_primitive_t)i), &p, &err), RD_OK);
    assert_int_equal(p, i);
  }
  assert_int_equal(rd_primitive_parse("scatter", &p, &err), RD_EINVAL);
  assert_string_equal(rd_primitive_name((rd_primitive_t)7), "invalid");
  assert_int_equal(rd_profile_source_parse("imported", &s, &err), RD_OK);
  assert_int_equal(s, RD_PROFILE_IMPORTED);
  assert_int_equal(rd_profile_source_parse("modelled", &s, &err), RD_EINVAL);

  uint32_t t[8];
  assert_int_equal(rd_profile_default_threads(1, t, 8), 1);
  assert_int_equal(t[0], 1);
  assert_int_equal(rd_profile_default_threads(2, t, 8), 2);
  assert_int_equal(t[1], 2);
  assert_int_equal(rd_profile_default_threads(6, t, 8), 4);
  assert_int_equal(t[2], 4);
  assert_int_equal(t[3], 6);
  assert_int_equal(rd_profile_default_threads(8, t, 8), 4);
  assert_int_equal(t[3], 8);
  assert_int_equal(rd_profile_default_threads(64, t, 3), 3);

  const char *b = rd_profile_build();
  assert_int_equal(strncmp(b, "0.", 2), 0); /* the meson project version first */
  assert_true(strlen(b) < RD_PROFILE_BUILD_MAX);
}

/* ------------------------------------------------------------------ */
/* Measuring                                                           */
/* ------------------------------------------------------------------ */

static void check_results(const rd_profile_t *r, size_t n, const rd_profile_shape_t *s) {
  rd_device_t cpu;
  rd_devices_cpu(&cpu);
  for (size_t i = 0; i < n; i++) {
    assert_true(isfinite(r[i].latency_s) && r[i].latency_s > 0);
    assert_true(r[i].latency_s < 1.0);
    assert_true(r[i].reps >= 1 && r[i].reps <= RD_PROFILE_REPS);
    assert_string_equal(r[i].device_fp, cpu.fingerprint);
    assert_string_equal(r[i].build, rd_profile_build());
    assert_true(rd_profile_key_equal(&r[i].shape, &s->key));
    assert_int_equal(r[i].source, RD_PROFILE_MEASURED);
    assert_true(r[i].measured_unix > 1600000000);
  }
}

/* Exactly want results, each as check_results requires. */
static void check_n_results(const rd_profile_t *r, size_t n, size_t want,
                            const rd_profile_shape_t *s) {
  assert_int_equal(n, want);
  check_results(r, n, s);
}

static void test_measure_tiny(void **state) {
  (void)state;
  rd_profile_shape_t s;
  learner_shape(&s, 4096, RD_ALGO_DQN, 4, 2, 16, 0, 32);

  const uint32_t threads[] = {1, 2};
  const double budget = 1.0;
  rd_profile_t r[9];
  size_t n = 99;
  rd_error_t err;
  rd_error_clear(&err);
  /* Room for every primitive is required up front. */
  assert_int_equal(rd_profile_measure_cpu(&s, threads, 2, budget, r, 8, &n, &err), RD_EINVAL);
  double t0 = rd_clock_now();
  int rc = rd_profile_measure_cpu(&s, threads, 2, budget, r, 9, &n, &err);
  double wall = rd_clock_now() - t0;
  if (rc) fail_msg("measure: %s %s", rd_err_name(rc), err.msg);
  /* A bound check, not a performance assertion: measuring stays within
   * its budget (plus scheduling slack) however fast the machine is. */
  assert_true(wall <= budget + SLACK_S);
  /* A tiny shape gets every primitive at every thread count, in order,
   * then the pipeline's costs once, at the first thread count. */
  check_n_results(r, n, 9, &s);
  for (size_t i = 0; i < 6; i++) {
    assert_int_equal(r[i].threads, threads[i / 3]);
    assert_int_equal(r[i].primitive, (rd_primitive_t)(i % 3));
    /* The tree fits, so the table held every item; train has no table. */
    assert_int_equal(r[i].items, r[i].primitive == RD_PRIM_TRAIN ? 0 : 4096);
  }
  for (size_t i = 6; i < 9; i++) {
    assert_int_equal(r[i].threads, threads[0]);
    assert_int_equal(r[i].primitive, (rd_primitive_t)(RD_PRIM_GATHER + (i - 6)));
    assert_int_equal(r[i].items, 0);
  }
  /* No ordering between handoff and gather is asserted: with the
   * pipeline's spin (rd_spin.h) a hand-off need not sleep, and the train
   * step it carries is taken off, so it can be below a gather of fresh
   * rows (it was, under ASan). check_results holds every latency > 0. */
}

static void test_measure_ddpg_replay_only(void **state) {
  (void)state;
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  rd_profile_shape_t s;
  rd_profile_t r[6];
  size_t n;
  rd_error_t err;
  rd_error_clear(&err);
  const uint32_t one = 1;

  table_config(&tc, 2048, 3);
  pipeline_config(&pc, RD_ALGO_DDPG, 3, 1, 8, 8, 16);
  shape_ok(&s, &tc, &pc, 0);
  /* A budget a loaded machine cannot overrun: every primitive is measured. */
  int rc = rd_profile_measure_cpu(&s, &one, 1, 3.0, r, 6, &n, &err);
  if (rc) fail_msg("measure ddpg: %s", err.msg);
  check_n_results(r, n, 6, &s);

  /* Without a learner: sample and update only. */
  shape_ok(&s, &tc, NULL, 64);
  rc = rd_profile_measure_cpu(&s, &one, 1, 0.3, r, 2, &n, &err);
  if (rc) fail_msg("measure replay: %s", err.msg);
  check_n_results(r, n, 2, &s);
  assert_int_equal(r[0].primitive, RD_PRIM_SAMPLE);
  assert_int_equal(r[1].primitive, RD_PRIM_UPDATE);
}

/* A schema the pipeline binds: handoff and pass then run the daemon's
 * pipeline (D = 0 and D = 50) on a table of the learner's fields, whose
 * every batch the learner must accept (a refused one fails the
 * measurement; both are reported only when every step trained): DQN with
 * a done flag, DDPG with a discount field. An unbound config (no pipeline
 * can run it) gets the emulation on synthetic batches. */
static void test_measure_trains_on_gathered_rows(void **state) {
  (void)state;
  for (int ddpg = 0; ddpg < 2; ddpg++) {
    rd_table_config_t tc;
    rd_pipeline_config_t pc;
    rd_profile_shape_t s;
    rd_error_t err;
    rd_error_clear(&err);
    const field_t f[] = {
        {"obs", RD_DTYPE_FLOAT32, 4},
        {"action", ddpg ? RD_DTYPE_FLOAT32 : RD_DTYPE_INT32, ddpg ? 1 : 0},
        {"reward", RD_DTYPE_FLOAT32, 0}, {"next_obs", RD_DTYPE_FLOAT32, 4},
        {ddpg ? "discount" : "done", ddpg ? RD_DTYPE_FLOAT32 : RD_DTYPE_BOOL, 0}};
    table_with_fields(&tc, f, 5);
    rd_schema_t *sc = &tc.schema;
    pipeline_config(&pc, ddpg ? RD_ALGO_DDPG : RD_ALGO_DQN, 4, ddpg ? 1 : 2, 16, 16, 32);
    shape_ok(&s, &tc, &pc, 0);
    assert_false(rd_profile_shape_trains_on_gather(&s)); /* not bound yet */
    assert_int_equal(rd_pipeline_bind_schema(&pc, sc, &err), RD_OK);
    /* Pinned as the daemon pins a workload (cores.h): the DDPG case on
     * this machine's first and last CPUs, the DQN one on a CPU it lacks,
     * which the kernel refuses, so every primitive falls back to
     * unpinned, logged, and is still measured. */
    int cpus[RD_CORES_MAX];
    size_t nc = rd_cores_allowed(cpus, RD_CORES_MAX);
    assert_true(nc >= 1);
    pc.learner_pin.n = pc.sampler_pin.n = 1;
    pc.learner_pin.cpu[0] = ddpg ? cpus[0] : RD_CORES_MAX - 1;
    pc.sampler_pin.cpu[0] = ddpg ? cpus[nc - 1] : RD_CORES_MAX - 1;
    shape_ok(&s, &tc, &pc, 0);
    assert_int_equal(s.learner_pin.cpu[0], pc.learner_pin.cpu[0]);
    assert_int_equal(s.sampler_pin.cpu[0], pc.sampler_pin.cpu[0]);
    assert_true(rd_profile_shape_trains_on_gather(&s));
    const uint32_t one = 1;
    rd_profile_t r[6];
    size_t n = 0;
    int rc = rd_profile_measure_cpu(&s, &one, 1, 3.0, r, 6, &n, &err);
    if (rc) fail_msg("measure %s: %s %s", ddpg ? "ddpg" : "dqn", rd_err_name(rc), err.msg);
    check_n_results(r, n, 6, &s);
    assert_int_equal(r[4].primitive, RD_PRIM_HANDOFF);
    assert_int_equal(r[5].primitive, RD_PRIM_PASS);
  }
}

static void test_measure_large_capacity_bounded(void **state) {
  (void)state;
  /* 2^24 items: the tree would be 143 MiB. With 0.3 s, the setup share
   * allows about 15 MB, so the table gets the same height (16^5 + 1 items
   * at K = 16) and the whole call stays within the budget. */
  rd_table_config_t tc;
  rd_profile_shape_t s;
  table_config(&tc, 1u << 24, 4);
  shape_ok(&s, &tc, NULL, 256);
  rd_profile_t r[2];
  size_t n;
  rd_error_t err;
  rd_error_clear(&err);
  const uint32_t one = 1;
  const double budget = 0.3;
  double t0 = rd_clock_now();
  int rc = rd_profile_measure_cpu(&s, &one, 1, budget, r, 2, &n, &err);
  double wall = rd_clock_now() - t0;
  if (rc) fail_msg("measure: %s", err.msg);
  assert_true(wall <= budget + SLACK_S); /* bound check, as above */
  check_n_results(r, n, 2, &s);
  assert_true(r[0].items >= 256 && r[0].items <= (1u << 20) + 1);
  assert_int_equal(r[0].shape.capacity, 1u << 24); /* keyed by the workload's shape */
}

static void test_measure_budget_runs_out(void **state) {
  (void)state;
  /* A budget too small for everything: fewer results, never a late
   * return. Hopper-sized networks at batch 256 take milliseconds a step. */
  rd_profile_shape_t s;
  learner_shape(&s, 65536, RD_ALGO_DDPG, 11, 3, 256, 256, 256);
  const uint32_t threads[] = {1, 2, 3, 4};
  rd_profile_t r[15];
  size_t n;
  rd_error_t err;
  rd_error_clear(&err);
  const double budget = 0.02;
  double t0 = rd_clock_now();
  int rc = rd_profile_measure_cpu(&s, threads, 4, budget, r, 15, &n, &err);
  double wall = rd_clock_now() - t0;
  if (rc) fail_msg("measure: %s", err.msg);
  assert_true(wall <= budget + SLACK_S); /* bound check, as above */
  assert_true(n <= 15);
  check_results(r, n, &s);
}

static void test_measure_bad_requests(void **state) {
  (void)state;
  rd_profile_shape_t s;
  learner_shape(&s, 1024, RD_ALGO_DQN, 4, 2, 8, 0, 16);
  rd_profile_t r[8];
  size_t n = 5;
  rd_error_t err;
  const uint32_t one = 1, zero = 0, many = 65, dup[] = {2, 2};

  assert_int_equal(rd_profile_measure_cpu(&s, &one, 1, 0, r, 8, &n, &err), RD_EINVAL);
  assert_int_equal(n, 0);
  assert_int_equal(rd_profile_measure_cpu(&s, &one, 1, NAN, r, 8, &n, &err), RD_EINVAL);
  assert_int_equal(rd_profile_measure_cpu(&s, &one, 1, 61, r, 8, &n, &err), RD_EINVAL);
  assert_int_equal(rd_profile_measure_cpu(&s, &zero, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  assert_int_equal(rd_profile_measure_cpu(&s, &many, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  assert_int_equal(rd_profile_measure_cpu(&s, dup, 2, 0.1, r, 8, &n, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "twice"));
  assert_int_equal(rd_profile_measure_cpu(&s, &one, 0, 0.1, r, 8, &n, &err), RD_EINVAL);
  assert_int_equal(rd_profile_measure_cpu(&s, &one, 1, 0.1, r, 2, &n, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "room for 6"));
  assert_int_equal(rd_profile_measure_cpu(NULL, &one, 1, 0.1, r, 8, &n, &err), RD_EINVAL);

  /* A shape that was never initialised, or edited into nonsense. */
  rd_profile_shape_t bad = s;
  bad.key.batch = 2048; /* above the capacity */
  assert_int_equal(rd_profile_measure_cpu(&bad, &one, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  bad = s;
  bad.has_learner = 0; /* "dqn" without a learner */
  assert_int_equal(rd_profile_measure_cpu(&bad, &one, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  bad = s;
  bad.learner.max_batch = 8; /* below the batch */
  assert_int_equal(rd_profile_measure_cpu(&bad, &one, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  bad = s;
  bad.alpha = -1;
  assert_int_equal(rd_profile_measure_cpu(&bad, &one, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  bad = s;
  bad.sampler_pin.n = 1;
  bad.sampler_pin.cpu[0] = -1; /* no such CPU number */
  assert_int_equal(rd_profile_measure_cpu(&bad, &one, 1, 0.1, r, 8, &n, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "CPU -1"));
}

/* The cache tests' set-up: a store in a fresh directory (teardown closes
 * and removes it), and test_measure_tiny's shape. */
typedef struct {
  char dir[64];
  rd_store_t *st;
  rd_profile_shape_t s;
} cache_fixture_t;

static int cache_setup(void **state) {
  cache_fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/rd_test_profile.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_open(&f->st, f->dir, &err), RD_OK);
  learner_shape(&f->s, 4096, RD_ALGO_DQN, 4, 2, 16, 0, 32);
  *state = f;
  return 0;
}

static int cache_teardown(void **state) {
  cache_fixture_t *f = *state;
  rd_store_close(f->st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  int rc = system(cmd);
  free(f);
  return rc == 0 ? 0 : -1;
}

static void test_cached(void **state) {
  cache_fixture_t *f = *state;
  rd_error_t err;
  rd_error_clear(&err);
  const uint32_t threads[] = {1, 2}, two = 2;
  rd_profile_t a[9], b[9];
  size_t na, nb;
  int hit = 7;

  /* Miss: measured and stored. */
  assert_int_equal(rd_profile_cpu_cached(f->st, &f->s, threads, 2, 1.0, a, 9, &na, &hit, &err),
                   RD_OK);
  assert_int_equal(hit, 0);
  assert_int_equal(na, 9);
  /* Hit: the same rows, nothing measured. */
  assert_int_equal(rd_profile_cpu_cached(f->st, &f->s, threads, 2, 1.0, b, 9, &nb, &hit, &err),
                   RD_OK);
  assert_int_equal(hit, 1);
  assert_int_equal(nb, 9);
  for (size_t i = 0; i < 9; i++) {
    assert_int_equal(b[i].primitive, a[i].primitive);
    assert_int_equal(b[i].threads, a[i].threads);
    assert_true(b[i].latency_s == a[i].latency_s);
  }
  /* A subset of the thread counts: a hit with those rows only. */
  assert_int_equal(rd_profile_cpu_cached(f->st, &f->s, &two, 1, 1.0, b, 6, &nb, &hit, &err), RD_OK);
  assert_int_equal(hit, 1);
  assert_int_equal(nb, 3);
  assert_int_equal(b[0].threads, 2);
  assert_true(b[2].latency_s == a[5].latency_s);
  /* Bad requests fail alike on a hit. */
  assert_int_equal(rd_profile_cpu_cached(f->st, &f->s, threads, 2, 1.0, b, 5, &nb, &hit, &err),
                   RD_EINVAL);
  /* Another shape misses; so does this one once the store forgets. */
  rd_profile_shape_t s2 = f->s;
  s2.key.capacity = 8192;
  assert_int_equal(rd_profile_cpu_cached(f->st, &s2, threads, 1, 0.5, b, 6, &nb, &hit, &err),
                   RD_OK);
  assert_int_equal(hit, 0);
  size_t removed;
  assert_int_equal(rd_store_clear_profiles(f->st, &removed, &err), RD_OK);
  assert_int_equal(removed, 15);
  assert_int_equal(rd_profile_cpu_cached(f->st, &f->s, threads, 2, 1.0, b, 9, &nb, &hit, &err),
                   RD_OK);
  assert_int_equal(hit, 0);
  /* Without a store: always measured. */
  assert_int_equal(rd_profile_cpu_cached(NULL, &f->s, threads, 1, 0.5, b, 6, &nb, &hit, &err),
                   RD_OK);
  assert_int_equal(hit, 0);
  assert_int_equal(nb, 6);

}

/* The one cache with any device kind's profiler (profile_cache.h): a fake
 * "gpu" whose measurements the test scripts. */
static struct {
  int checks, measures, fault, rc;
  double latency[3];
} fake;

static int fake_check(const rd_profile_shape_t *shape, const uint32_t *threads, size_t n,
                      double budget_s, size_t cap, rd_error_t *err) {
  (void)shape;
  (void)threads;
  (void)n;
  (void)budget_s;
  fake.checks++;
  return cap < 3 ? rd_error_set(err, RD_EINVAL, "room for 3 needed") : RD_OK;
}

static int fake_measure(const rd_profile_shape_t *shape, const rd_device_t *dev,
                        const uint32_t *threads, size_t n, double budget_s, rd_profile_t *out,
                        size_t cap, size_t *n_out, int *fault, rd_error_t *err) {
  (void)threads;
  (void)n;
  (void)budget_s;
  (void)cap;
  fake.measures++;
  *n_out = 0;
  *fault = fake.fault;
  if (fake.rc) return rd_error_set(err, fake.rc, "the fake device failed");
  for (int p = 0; p < 3; p++) {
    memset(&out[p], 0, sizeof out[p]);
    snprintf(out[p].device_fp, sizeof out[p].device_fp, "%s", dev->fingerprint);
    out[p].primitive = (rd_primitive_t)p;
    out[p].threads = 1;
    out[p].shape = shape->key;
    snprintf(out[p].build, sizeof out[p].build, "%s", rd_profile_build());
    out[p].latency_s = fake.latency[p];
    out[p].reps = 1;
    out[p].source = RD_PROFILE_MEASURED;
  }
  *n_out = 3;
  return RD_OK;
}

static void test_cache_any_kind(void **state) {
  cache_fixture_t *f = *state;
  rd_error_t err;
  rd_error_clear(&err);
  rd_device_t gpu;
  memset(&gpu, 0, sizeof gpu);
  snprintf(gpu.kind, sizeof gpu.kind, "gpu");
  snprintf(gpu.fingerprint, sizeof gpu.fingerprint, "gpu-00000000000000aa");
  const rd_profiler_t prof = {fake_check, fake_measure};
  memset(&fake, 0, sizeof fake);
  fake.latency[0] = 2e-6;
  fake.latency[1] = 3e-6;
  fake.latency[2] = 5e-5;
  rd_profile_t out[4];
  size_t n;
  int hit = 7, fault = 7;

  /* A restart never measures: nothing stored is RD_ENOTFOUND. */
  rd_profile_request_t q = {f->st, &gpu, &f->s, NULL, 0, 1.0, 1};
  assert_int_equal(rd_profile_cached(&prof, &q, out, 4, &n, &hit, &fault, &err), RD_ENOTFOUND);
  assert_int_equal(fake.measures, 0);
  q.store = NULL;
  assert_int_equal(rd_profile_cached(&prof, &q, out, 4, &n, &hit, &fault, &err), RD_ENOTFOUND);
  q.store = f->st;
  /* Miss: measured by the kind's profiler and stored under its fingerprint. */
  q.cache_only = 0;
  assert_int_equal(rd_profile_cached(&prof, &q, out, 4, &n, &hit, &fault, &err), RD_OK);
  assert_int_equal(hit, 0);
  assert_int_equal(fault, 0);
  assert_int_equal(n, 3);
  assert_int_equal(fake.measures, 1);
  /* Hit: nothing measured, the rows as stored; a restart finds them too. */
  for (int only = 0; only < 2; only++) {
    q.cache_only = only;
    assert_int_equal(rd_profile_cached(&prof, &q, out, 4, &n, &hit, &fault, &err), RD_OK);
    assert_int_equal(hit, 1);
    assert_int_equal(n, 3);
    assert_int_equal(fake.measures, 1);
    for (int p = 0; p < 3; p++) {
      assert_int_equal(out[p].primitive, p);
      assert_true(out[p].latency_s == fake.latency[p]);
      assert_string_equal(out[p].device_fp, gpu.fingerprint);
    }
  }
  /* The kind's checks on a hit as on a miss. */
  int checks = fake.checks;
  assert_int_equal(rd_profile_cached(&prof, &q, out, 2, &n, &hit, &fault, &err), RD_EINVAL);
  assert_int_equal(fake.checks, checks + 1);
  /* Any thread count (threads NULL): the fastest stored row of each. */
  rd_profile_t faster = out[2];
  faster.threads = 8;
  faster.latency_s = 1e-5;
  faster.source = RD_PROFILE_IMPORTED;
  assert_int_equal(rd_store_put_profiles(f->st, &faster, 1, &err), RD_OK);
  assert_int_equal(rd_profile_cached(&prof, &q, out, 4, &n, &hit, &fault, &err), RD_OK);
  assert_int_equal(n, 3);
  assert_true(out[2].latency_s == 1e-5);
  assert_int_equal(out[2].threads, 8);
  /* Another device's rows are not this one's; its fault comes back. */
  snprintf(gpu.fingerprint, sizeof gpu.fingerprint, "gpu-00000000000000bb");
  q.cache_only = 0;
  fake.rc = RD_EINTERNAL;
  fake.fault = 1;
  assert_int_equal(rd_profile_cached(&prof, &q, out, 4, &n, &hit, &fault, &err), RD_EINTERNAL);
  assert_int_equal(fault, 1);
  assert_int_equal(n, 0);
  assert_int_equal(fake.measures, 2);

}

/* rd_profile_reps, the repetitions the CPU and GPU profilers share: how
 * many calls, which ends a repetition must keep, errors. Ends far off or
 * already past, so that no figure depends on the machine's speed. */
typedef struct {
  uint32_t calls, fail_at;
} counted_t;

static int counted_call(void *ctx, rd_error_t *err) {
  counted_t *c = ctx;
  if (++c->calls == c->fail_at) return rd_error_set(err, RD_EINTERNAL, "call %u failed", c->calls);
  return RD_OK;
}

static void test_reps(void **state) {
  (void)state;
  const double far = rd_clock_now() + 3600, past = rd_clock_now() - 1;
  rd_profile_timing_t tm;
  rd_error_t err;
  rd_error_clear(&err);
  /* k = target / slowest (8 ms / 1 ms): every repetition fits. */
  counted_t c = {0, 0};
  assert_int_equal(rd_profile_reps(counted_call, &c, 1e-3, 8e-3, 1000, far, far, 0, &tm, &err),
                   RD_OK);
  assert_int_equal(tm.reps, RD_PROFILE_REPS);
  assert_int_equal(c.calls, 8 * RD_PROFILE_REPS);
  assert_true(tm.latency_s > 0);
  /* k at most max_calls; the GPU's first_sets changes no count. */
  c = (counted_t){0, 0};
  assert_int_equal(rd_profile_reps(counted_call, &c, 1e-9, 1.0, 7, far, far, 1, &tm, &err),
                   RD_OK);
  assert_int_equal(tm.reps, RD_PROFILE_REPS);
  assert_int_equal(c.calls, 7 * RD_PROFILE_REPS);
  /* The first repetition keeps first_end, the others end. */
  c = (counted_t){0, 0};
  assert_int_equal(rd_profile_reps(counted_call, &c, 1e-3, 5e-3, 1000, far, past, 0, &tm, &err),
                   RD_OK);
  assert_int_equal(tm.reps, 1);
  assert_int_equal(c.calls, 5);
  c = (counted_t){0, 0};
  assert_int_equal(rd_profile_reps(counted_call, &c, 1e-3, 5e-3, 1000, past, far, 0, &tm, &err),
                   RD_OK);
  assert_int_equal(tm.reps, 0);
  assert_int_equal(c.calls, 0);
  /* A failing call ends it with its error; nothing is reported. */
  c = (counted_t){0, 12};
  assert_int_equal(rd_profile_reps(counted_call, &c, 1e-3, 5e-3, 1000, far, far, 0, &tm, &err),
                   RD_EINTERNAL);
  assert_string_equal(err.msg, "call 12 failed");
  assert_int_equal(tm.reps, 0);
  assert_int_equal(c.calls, 12);
}

RDT_MAIN(rdt_quiet_setup, rdt_quiet_teardown,
         cmocka_unit_test(test_shape_keys),
         cmocka_unit_test(test_shape_columns),
         cmocka_unit_test(test_bad_shapes),
         cmocka_unit_test(test_names_and_threads),
         cmocka_unit_test(test_measure_tiny),
         cmocka_unit_test(test_measure_ddpg_replay_only),
         cmocka_unit_test(test_measure_trains_on_gathered_rows),
         cmocka_unit_test(test_measure_large_capacity_bounded),
         cmocka_unit_test(test_measure_budget_runs_out),
         cmocka_unit_test(test_measure_bad_requests),
         cmocka_unit_test_setup_teardown(test_cached, cache_setup, cache_teardown),
         cmocka_unit_test_setup_teardown(test_cache_any_kind, cache_setup, cache_teardown),
         cmocka_unit_test(test_reps))
