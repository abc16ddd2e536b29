/* test_workload_move.c - live moves (workload_move.h, issue 24 item 4):
 * a table moved between the CPU tree and the C-simulated FPGA replay
 * module keeps every row, priority, key and the sampling stream exactly;
 * a learner moved between the CPU and the C-simulated FPGA keeps its
 * whole training state byte for byte; a workload moved back and forth
 * while another thread inserts and samples loses nothing and fails no
 * call; a move that would lose state is refused and changes nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csim_rmm.h"
#include "learner_backend.h"
#include "pipeline.h"
#include "placement.h"
#include "provider_fpga.h"
#include "rdt_learner.h"
#include "rdt_pb.h"
#include "rdt_schema.h"
#include "rdt_th_group.h"
#include "rdt_unit.h"
#include "registry.h"
#include "spec_pb.h"
#include "workload_move.h"
#include "rdt_main.h"

#define OBS 4

/* ---- Tables ---- */

/* Insert n rows of cartpole columns (obs[0] = key) with priorities. */
static void table_insert(rd_table_t *t, size_t n, uint64_t seed) {
  float *obs = malloc(n * OBS * 4), *next = malloc(n * OBS * 4), *rew = malloc(n * 4);
  int32_t *act = malloc(n * 4);
  float *disc = malloc(n * 4);
  double *pri = malloc(n * sizeof(double));
  assert_true(obs && next && rew && act && disc && pri);
  uint64_t first = rd_table_next_key(t);
  rdt_fill(next, n * OBS, seed, -1, 1);
  for (size_t i = 0; i < n; i++) {
    obs[i * OBS] = (float)(first + i);
    for (int j = 1; j < OBS; j++) obs[i * OBS + j] = (float)j;
    act[i] = (int32_t)((first + i) % 2);
    rew[i] = (float)i;
    disc[i] = 0.5f;
    pri[i] = rdt_unif(seed + 1, i, 0.0f, 3.0f);
  }
  rd_cbuf_t cols[5] = {{obs, n * OBS * 4}, {act, n * 4}, {rew, n * 4}, {next, n * OBS * 4},
                       {disc, n * 4}};
  rd_error_t err;
  if (rd_table_insert(t, n, cols, pri, NULL, &err) != RD_OK) fail_msg("insert: %s", err.msg);
  free(obs), free(next), free(rew), free(act), free(disc), free(pri);
}

static void table_update(rd_table_t *t, size_t n, uint64_t seed) {
  uint64_t keys[256];
  double pri[256];
  assert_true(n <= 256);
  for (size_t i = 0; i < n; i++) {
    keys[i] = rd_table_next_key(t) - 1 - (uint64_t)rdt_unif(seed, i, 0, (float)rd_table_size(t));
    pri[i] = rdt_unif(seed + 1, i, 0.0f, 5.0f);
  }
  rd_error_t err;
  if (rd_table_update(t, n, keys, pri, NULL, &err) != RD_OK) fail_msg("update: %s", err.msg);
}

/* Sample n from both; every key, probability, weight and row equal. */
static void same_samples(rd_table_t *a, rd_table_t *b, size_t n, unsigned flags) {
  uint64_t ka[256], kb[256];
  double pa[256], pb[256], wa[256], wb[256];
  assert_true(n <= 256);
  rd_sample_out_t oa = {ka, pa, wa, NULL}, ob = {kb, pb, wb, NULL};
  rd_error_t err;
  assert_int_equal(rd_table_sample(a, n, 0.4, flags, &oa, &err), RD_OK);
  assert_int_equal(rd_table_sample(b, n, 0.4, flags, &ob, &err), RD_OK);
  assert_memory_equal(ka, kb, n * sizeof ka[0]);
  assert_memory_equal(pa, pb, n * sizeof pa[0]);
  assert_memory_equal(wa, wb, n * sizeof wa[0]);
}

/* Every scalar, every live key's stored priority and row equal. */
static void same_tables(const rd_table_t *a, const rd_table_t *b) {
  assert_int_equal(rd_table_next_key(a), rd_table_next_key(b));
  assert_int_equal(rd_table_size(a), rd_table_size(b));
  assert_int_equal(a->draws, b->draws);
  assert_true(a->max_p == b->max_p);
  rd_table_stats_t sa = rd_table_stats(a), sb = rd_table_stats(b);
  assert_memory_equal(&sa, &sb, sizeof sa);
  const uint64_t n = rd_table_size(a), lo = rd_table_next_key(a) - n;
  uint64_t *keys = malloc(n * sizeof *keys);
  assert_non_null(keys);
  for (uint64_t i = 0; i < n; i++) {
    keys[i] = lo + i;
    double pa, pb;
    rd_error_t err;
    assert_int_equal(rd_table_get_priority(a, lo + i, &pa, &err), RD_OK);
    assert_int_equal(rd_table_get_priority(b, lo + i, &pb, &err), RD_OK);
    assert_true(pa == pb);
  }
  const uint32_t nf = a->config.schema.n_fields;
  for (uint64_t at = 0; at < n; at += 1024) {
    size_t m = n - at < 1024 ? (size_t)(n - at) : 1024;
    rd_buf_t ca[RD_SCHEMA_MAX_FIELDS], cb[RD_SCHEMA_MAX_FIELDS];
    for (uint32_t f = 0; f < nf; f++) {
      size_t bytes = m * a->field_bytes[f];
      ca[f] = (rd_buf_t){malloc(bytes), bytes};
      cb[f] = (rd_buf_t){malloc(bytes), bytes};
    }
    rd_error_t err;
    assert_int_equal(rd_table_gather(a, m, keys + at, ca, &err), RD_OK);
    assert_int_equal(rd_table_gather(b, m, keys + at, cb, &err), RD_OK);
    for (uint32_t f = 0; f < nf; f++) {
      assert_memory_equal(ca[f].data, cb[f].data, ca[f].bytes);
      free(ca[f].data);
      free(cb[f].data);
    }
  }
  free(keys);
}

/* A table moved CPU -> FPGA (C-simulation) -> CPU against a twin that
 * never moved, through the same calls. */
static void test_table_move_exact(void **state) {
  (void)state;
  rdt_table_t a, b;
  rd_error_t err;
  assert_int_equal(rdt_table_init(&a, 3000, OBS, 1, 11, &err), RD_OK);
  assert_int_equal(rdt_table_init(&b, 3000, OBS, 1, 11, &err), RD_OK);
  for (int i = 0; i < 8; i++) { /* wraps: 4000 rows into 3000 */
    table_insert(&a.table, 500, 100 + (uint64_t)i);
    table_insert(&b.table, 500, 100 + (uint64_t)i);
  }
  table_update(&a.table, 200, 7);
  table_update(&b.table, 200, 7);
  same_samples(&a.table, &b.table, 64, 0);

  assert_int_equal(rd_table_move(&a.table, &rd_fpga_csim_rmm_ops, NULL, &err), RD_OK);
  assert_string_equal(rd_table_rmm_name(&a.table), rd_fpga_csim_rmm_ops.name);
  assert_string_equal(rd_table_rmm_name(&b.table), "cpu");
  same_tables(&a.table, &b.table);
  /* The same stream on: plain and stratified, and after more writes. */
  same_samples(&a.table, &b.table, 200, 0);
  same_samples(&a.table, &b.table, 100, RD_SAMPLE_STRATIFIED);
  table_insert(&a.table, 700, 300);
  table_insert(&b.table, 700, 300);
  table_update(&a.table, 150, 9);
  table_update(&b.table, 150, 9);
  same_tables(&a.table, &b.table);
  same_samples(&a.table, &b.table, 256, 0);

  assert_int_equal(rd_table_move(&a.table, NULL, NULL, &err), RD_OK);
  assert_string_equal(rd_table_rmm_name(&a.table), "cpu");
  same_tables(&a.table, &b.table);
  same_samples(&a.table, &b.table, 256, 0);
  /* Moving where it is changes nothing. */
  assert_int_equal(rd_table_move(&a.table, NULL, NULL, &err), RD_OK);
  same_tables(&a.table, &b.table);
  rdt_table_free(&a);
  rdt_table_free(&b);
}

/* A checkpoint's snapshot in progress: RD_EBUSY, nothing changed; an
 * empty table moves too. */
static void test_table_move_busy_and_empty(void **state) {
  (void)state;
  rdt_table_t a;
  rd_error_t err;
  assert_int_equal(rdt_table_init(&a, 100, OBS, 1, 3, &err), RD_OK);
  assert_int_equal(rd_table_move(&a.table, &rd_fpga_csim_rmm_ops, NULL, &err), RD_OK);
  assert_int_equal(rd_table_move(&a.table, NULL, NULL, &err), RD_OK);
  table_insert(&a.table, 50, 1);
  rd_table_snapshot_t s;
  assert_int_equal(rd_table_snapshot_alloc(&s, &a.table.config, 100, &err), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&a.table, &s, &err), RD_OK);
  assert_int_equal(rd_table_move(&a.table, &rd_fpga_csim_rmm_ops, NULL, &err), RD_EBUSY);
  assert_string_equal(rd_table_rmm_name(&a.table), "cpu");
  rd_table_snapshot_cancel(&a.table, &s);
  rd_table_snapshot_free(&s);
  assert_int_equal(rd_table_size(&a.table), 50);
  rdt_table_free(&a);
}

/* ---- Learner backends ---- */

static void *save_state(rd_learner_backend_t *b, size_t *len) {
  size_t cap = b->ops->state_bytes(b);
  assert_true(cap > 0);
  void *buf = malloc(cap);
  rd_error_t err;
  if (b->ops->state_save(b, buf, cap, len, &err) != RD_OK) fail_msg("save: %s", err.msg);
  return buf;
}

/* CPU -> FPGA -> CPU: the state saved at each end is the same bytes. */
static void learner_round_trip(const rd_learner_config_t *c) {
  rd_learner_backend_t cpu, fpga, back;
  memset(&cpu, 0, sizeof cpu);
  memset(&fpga, 0, sizeof fpga);
  memset(&back, 0, sizeof back);
  rd_error_t err;
  assert_int_equal(rd_learner_backend_init(&cpu, &rd_learner_ops_cpu, c, 0, &err), RD_OK);
  for (int i = 0; i < 7; i++) {
    rdt_batch_t bb;
    rdt_batch_make(&bb, c, 32, 40 + (uint64_t)i);
    float td[64];
    assert_int_equal(cpu.ops->step(&cpu, &bb.b, td, NULL, &err), RD_OK);
    rdt_batch_free(&bb);
  }
  size_t l1, l2, l3;
  void *s1 = save_state(&cpu, &l1);
  assert_int_equal(rd_learner_backend_init(&fpga, &rd_learner_ops_fpga, c, 0, &err), RD_OK);
  assert_int_equal(fpga.ops->state_load(&fpga, s1, l1, &err), RD_OK);
  void *s2 = save_state(&fpga, &l2);
  assert_int_equal(l1, l2);
  assert_memory_equal(s1, s2, l1);
  /* The FPGA learner trains on from there, and its state comes back. */
  rdt_batch_t bb;
  rdt_batch_make(&bb, c, 32, 99);
  float td[64];
  assert_int_equal(fpga.ops->step(&fpga, &bb.b, td, NULL, &err), RD_OK);
  rdt_batch_free(&bb);
  free(s2);
  s2 = save_state(&fpga, &l2);
  assert_int_equal(rd_learner_backend_init(&back, &rd_learner_ops_cpu, c, 0, &err), RD_OK);
  assert_int_equal(back.ops->state_load(&back, s2, l2, &err), RD_OK);
  void *s3 = save_state(&back, &l3);
  assert_int_equal(l2, l3);
  assert_memory_equal(s2, s3, l2);
  assert_int_equal(((rd_learner_t *)back.impl)->steps, 8);
  /* A damaged state: refused, nothing changed. */
  ((uint8_t *)s1)[0] ^= 1;
  assert_int_equal(fpga.ops->state_load(&fpga, s1, l1, &err), RD_EINVAL);
  void *s4 = save_state(&fpga, &l3);
  assert_memory_equal(s2, s4, l2);
  free(s1), free(s2), free(s3), free(s4);
  rd_learner_backend_destroy(&cpu);
  rd_learner_backend_destroy(&fpga);
  rd_learner_backend_destroy(&back);
}

static void test_learner_state_moves_exactly(void **state) {
  (void)state;
  rd_learner_config_t c;
  rdt_dqn_config(&c, 4, 2, 2, (const uint32_t[]){16, 8});
  c.max_batch = 64;
  c.seed = 3;
  learner_round_trip(&c);
  rdt_ddpg_config(&c, 3, 2, 1, (const uint32_t[]){16}, 2, (const uint32_t[]){16, 8});
  c.max_batch = 64;
  c.seed = 4;
  learner_round_trip(&c);
}

/* ---- A registered workload, moved live ---- */

typedef struct {
  rd_registry_t *r;
  rd_workload_t *w;
  rd_device_t csim;
} fixture_t;

/* w's placement mapped (l, rmm, st) with the C-simulated u250 behind the
 * FPGA row, as rd_placement_compute leaves it. */
static void placement_for(rd_placement_t *o, const fixture_t *f, rd_devkind_t l,
                          rd_devkind_t rmm, rd_devkind_t st, const rd_table_config_t *tc,
                          const rd_learner_config_t *lc) {
  memset(o, 0, sizeof *o);
  o->mapped = 1;
  /* Every row can run every part, so a forced mapping maps. */
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    o->table.dev[d].present = 1;
    o->table.dev[d].src_learner = RD_PT_MODEL;
    o->table.dev[d].src_rmm = RD_PT_MODEL;
    o->table.dev[d].t_learner = 1e-3;
    o->table.dev[d].t_rmm = 1e-4;
  }
  o->table.batch = 32;
  o->mapping.learner = l;
  o->mapping.rmm = rmm;
  o->mapping.storage = st;
  rd_mapping_format(&o->mapping, o->code, sizeof o->code);
  o->device[RD_DEV_FPGA] = f->csim;
  o->has_device[RD_DEV_FPGA] = 1;
  o->fpga_device = f->csim.index;
  snprintf(o->fpga_part, sizeof o->fpga_part, "u250");
  rd_placement_bind(o, tc, lc);
}

static int fixture_setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_fpga_provider_csim("u250", RD_FPGA_PARTS_DIR, 0, &f->csim, &err) != RD_OK)
    fail_msg("csim: %s", err.msg);
  rd_config_t cfg;
  rd_config_defaults(&cfg);
  if (rd_registry_create(&f->r, &cfg, NULL, &err) != RD_OK) fail_msg("registry: %s", err.msg);
  rdt_pb_spec_t s;
  rdt_pb_spec_init(&s, "mover", 4096);
  rdt_pb_cartpole(&s, 5);
  rdt_pb_dqn(&s, 2, 32, 32);
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  int has_learner = 0;
  if (rd_spec_pb_config(f->r, &s.spec, &tc, &pc, &has_learner, &err) != RD_OK)
    fail_msg("spec: %s", err.msg);
  rd_placement_t pl;
  placement_for(&pl, f, RD_DEV_CPU, RD_DEV_CPU, RD_DEV_CPU, &tc, &pc.learner);
  rd_spec_pb_t d;
  if (rd_spec_pb_decode(rd_registry_config(f->r), &s.spec, &d, &err) != RD_OK ||
      rd_registry_register(f->r, &d.spec, &pl, &f->w, NULL, &err) != RD_OK)
    fail_msg("register: %s", err.msg);
  rd_spec_pb_release(&d);
  *state = f;
  return 0;
}

static int fixture_teardown(void **state) {
  fixture_t *f = *state;
  rd_workload_unref(f->w);
  rd_registry_destroy(f->r);
  free(f);
  return 0;
}

/* Rows of the workload's schema: obs float[4] (obs[0] = key), action,
 * reward, next_obs, done. */
static int workload_insert(rd_workload_t *w, uint32_t n, rd_error_t *err) {
  float obs[256 * OBS], next[256 * OBS], rew[256];
  int32_t act[256];
  uint8_t done[256];
  for (uint32_t i = 0; i < n; i++) {
    for (int j = 0; j < OBS; j++) obs[i * OBS + j] = next[i * OBS + j] = 0.1f * (float)j;
    act[i] = (int32_t)(i % 2);
    rew[i] = 1.0f;
    done[i] = (uint8_t)(i % 7 == 0);
  }
  rd_cbuf_t cols[5] = {{obs, n * OBS * 4}, {act, n * 4}, {rew, n * 4}, {next, n * OBS * 4},
                       {done, n}};
  rd_insert_batch_t b = {n, cols, 5, NULL, 0};
  return rd_workload_insert(w, &b, NULL, NULL, err);
}

typedef struct {
  uint64_t keys[64];
  double p[64], wt[64];
} sample_buf_t;

static int sample_alloc(void *arg, const rd_table_t *t, uint32_t n, rd_sample_out_t *out,
                        rd_error_t *err) {
  (void)t, (void)err;
  sample_buf_t *b = arg;
  assert_true(n <= 64);
  out->keys = b->keys;
  out->probabilities = b->p;
  out->weights = b->wt;
  out->cols = NULL;
  return RD_OK;
}

/* Inserts and samples on w until stopped, counting the calls and the
 * failures, the first one's message in why. */
typedef struct {
  rd_workload_t *w;
  atomic_ulong calls, failures;
  char why[RD_ERROR_MSG_MAX];
} traffic_t;

static int traffic(void *arg, int unused) {
  (void)unused;
  traffic_t *t = arg;
  sample_buf_t buf;
  while (!rdt_th_stopping()) {
    rd_error_t err;
    rd_error_clear(&err);
    int rc = workload_insert(t->w, 64, &err);
    rd_sample_request_t q = {64, 0, 0, 0};
    uint64_t size = 0;
    if (rc == RD_OK) rc = rd_workload_sample(t->w, &q, sample_alloc, &buf, &size, &err);
    atomic_fetch_add(&t->calls, 2);
    if (rc != RD_OK && atomic_fetch_add(&t->failures, 1) == 0)
      snprintf(t->why, sizeof t->why, "%s", err.msg);
  }
  return 0;
}

static void *learner_state(rd_workload_t *w, size_t *len) {
  size_t cap = rd_pipeline_state_bytes(w->pipeline);
  void *buf = malloc(cap);
  rd_error_t err;
  if (rd_pipeline_state_save(w->pipeline, buf, cap, len, NULL, &err) != RD_OK)
    fail_msg("state: %s", err.msg);
  return buf;
}

static void train(rd_workload_t *w, uint32_t steps) {
  rd_train_result_t res;
  rd_error_t err;
  if (rd_pipeline_train_wait(w->pipeline, steps, 0, &res, &err) != RD_OK ||
      res.status != RD_OK)
    fail_msg("train: %s %s", err.msg, res.message);
}

/* The fixture's workload, with rows inserted and then steps trained. */
static rd_workload_t *trained(fixture_t *f, uint32_t rows, uint32_t steps) {
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(workload_insert(f->w, rows, &err), RD_OK);
  train(f->w, steps);
  return f->w;
}

/* C-C-C <-> F-F-F six times while another thread inserts and samples and
 * the learner trains between moves: no call fails, the table's and the
 * learner's state at each move are those after it, and the history says
 * what moved. */
static void test_workload_moves_live(void **state) {
  fixture_t *f = *state;
  rd_workload_t *w = trained(f, 200, 5);
  rd_error_t err;
  rd_error_clear(&err);
  traffic_t t = {.w = w};
  rdt_th_group_t g = {0};
  assert_int_equal(rdt_th_start(&g, 1, traffic, &t), 0);
  const rd_table_config_t tc0 = w->table.config;
  for (int i = 0; i < 6; i++) {
    const int to_fpga = i % 2 == 0;
    rd_devkind_t d = to_fpga ? RD_DEV_FPGA : RD_DEV_CPU;
    rd_placement_t to;
    rd_table_config_t tc = tc0;
    tc.rmm = NULL;
    placement_for(&to, f, d, d, d, &tc, rd_pipeline_learner_config(w->pipeline));
    assert_string_equal(to.running, to_fpga ? "F-F-F" : "C-C-C");
    size_t l1, l2;
    void *before = learner_state(w, &l1);
    rd_place_event_t ev;
    memset(&ev, 0, sizeof ev);
    snprintf(ev.reason, sizeof ev.reason, "test move %d", i);
    if (rd_workload_move(w, &to, &ev, &err) != RD_OK) fail_msg("move: %s", err.msg);
    void *after = learner_state(w, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(before, after, l1); /* weights, moments, counters: exact */
    free(before), free(after);
    rd_pipeline_learner_info_t li;
    rd_pipeline_learner_info(w->pipeline, &li);
    assert_int_equal(li.kind, to_fpga ? RD_LEARNER_ON_FPGA : RD_LEARNER_ON_CPU);
    char rmm[32], running[RD_MAPPING_CODE_MAX]; /* read under the lock, checked after it */
    pthread_mutex_lock(&w->lock);
    snprintf(rmm, sizeof rmm, "%s", rd_table_rmm_name(&w->table));
    snprintf(running, sizeof running, "%s", w->placement->running);
    pthread_mutex_unlock(&w->lock);
    if (strcmp(rmm, to_fpga ? rd_fpga_csim_rmm_ops.name : "cpu") != 0 ||
        strcmp(running, to_fpga ? "F-F-F" : "C-C-C") != 0) {
      rdt_th_stop(&g);
      fail_msg("move %d: replay module %s, running %s", i, rmm, running);
    }
    train(w, 5); /* training continues on the new devices */
  }
  assert_int_equal(rdt_th_stop(&g), 0);
  if (atomic_load(&t.failures) != 0)
    fail_msg("%lu of %lu calls failed during moves: %s", atomic_load(&t.failures),
             atomic_load(&t.calls), t.why);
  assert_true(atomic_load(&t.calls) > 0);
  rd_pipeline_stats_t st;
  rd_pipeline_stats(w->pipeline, &st);
  assert_int_equal(st.steps, 35);
  rd_place_history_t h;
  rd_workload_history(w, &h);
  assert_int_equal(h.n, 6);
  for (uint32_t i = 0; i < h.n; i++) {
    assert_true(h.ev[i].moved);
    assert_string_equal(h.ev[i].from, i % 2 == 0 ? "C-C-C" : "F-F-F");
    assert_string_equal(h.ev[i].to, i % 2 == 0 ? "F-F-F" : "C-C-C");
    assert_true(h.ev[i].unix_ms > 0);
  }
}

/* A move to a backend that cannot take the state (the GPU learner with no
 * GPU here, or in a build without CUDA) is not made: an error, nothing
 * changed. */
static void test_lossy_move_refused(void **state) {
  rd_workload_t *w = trained(*state, 100, 3);
  rd_error_t err;
  rd_error_clear(&err);
  size_t l1, l2;
  void *before = learner_state(w, &l1);
  int rc = rd_pipeline_move_learner(w->pipeline, &rd_learner_ops_gpu, 0, &err);
  assert_true(rc == RD_ESTATE || rc == RD_EINVAL);
  void *after = learner_state(w, &l2);
  assert_int_equal(l1, l2);
  assert_memory_equal(before, after, l1);
  rd_pipeline_learner_info_t li;
  rd_pipeline_learner_info(w->pipeline, &li);
  assert_int_equal(li.kind, RD_LEARNER_ON_CPU);
  train(w, 2);
  free(before), free(after);
}

RDT_MAIN(rdt_quiet_setup, rdt_quiet_teardown,
         cmocka_unit_test(test_table_move_exact),
         cmocka_unit_test(test_table_move_busy_and_empty),
         cmocka_unit_test(test_learner_state_moves_exactly),
         cmocka_unit_test_setup_teardown(test_workload_moves_live, fixture_setup, fixture_teardown),
         cmocka_unit_test_setup_teardown(test_lossy_move_refused, fixture_setup, fixture_teardown))
