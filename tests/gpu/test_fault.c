/* test_fault.c - a workload whose table runs on a GPU's replay module
 * and storage survives the device failing mid-call: the call is answered
 * from the CPU, the table stays on the CPU afterwards, the GPU is given up
 * in the device list, and the placement's running code and note say so.
 *
 * The module runs over host device calls that fail on demand
 * (tests/gpu/rmm_check.h), so this runs on any machine. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "log.h"
#include "pipeline.h"
#include "placement.h"
#include "registry.h"
#include "rdt_dse.h"
#include "rdt_learner.h"
#include "rmm_check.h"

static const uint32_t obs_shape[] = {4};
static const rd_field_spec_t fields[] = {
    {"obs", RD_DTYPE_FLOAT32, 1, obs_shape},
    {"reward", RD_DTYPE_FLOAT32, 0, NULL},
};
static const uint8_t stored[] = "opaque to core";

#define CAP 4096u
#define BATCH 256u

static rd_workload_t *gpu_workload(rd_registry_t *r) {
  rd_device_t gpu;
  rdt_device(&gpu, "gpu", 0);
  snprintf(gpu.name, sizeof gpu.name, "a GPU of host calls");
  gpu.memory_bytes = 1ull << 30;
  rd_devices_inject(&gpu);
  rd_placement_t *pl = calloc(1, sizeof *pl);
  pl->mapped = 1;
  snprintf(pl->code, sizeof pl->code, "C-G-G");
  snprintf(pl->running, sizeof pl->running, "C-G-G");
  snprintf(pl->note, sizeof pl->note, "mapped C-G-G; running C-G-G");
  pl->device[RD_DEV_GPU] = gpu;
  pl->has_device[RD_DEV_GPU] = 1;
  rmm_check_fault_base(&rmm_check_host_dev);
  rmm_check_arm(0, 0, 0);
  rmm_check_ops(&rmm_check_fault_dev, 0, &pl->rmm_ops, &pl->storage_ops);
  rd_workload_spec_t s;
  memset(&s, 0, sizeof s);
  s.name = "on-a-gpu";
  s.fields = fields;
  s.n_fields = 2;
  s.capacity = CAP;
  s.max_batch = BATCH;
  s.stored = stored;
  s.stored_len = sizeof stored;
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_register(r, &s, pl, &w, NULL, &err) != RD_OK) fail_msg("register: %s", err.msg);
  free(pl);
  assert_string_equal(rd_table_rmm_name(&w->table), "gpu0");
  assert_string_equal(rd_table_storage_name(&w->table), "gpu0");
  return w;
}

static void insert(rd_workload_t *w, uint32_t n, float base) {
  static float obs[BATCH * 4], rew[BATCH];
  for (uint32_t i = 0; i < n; i++) {
    obs[i * 4] = base + (float)i;
    rew[i] = 1;
  }
  rd_cbuf_t cols[2] = {{obs, (size_t)n * 16}, {rew, (size_t)n * 4}};
  rd_insert_batch_t b;
  memset(&b, 0, sizeof b);
  b.count = n;
  b.cols = cols;
  b.n_cols = 2;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_workload_insert(w, &b, NULL, NULL, &err) != RD_OK) fail_msg("insert: %s", err.msg);
}

/* A sample whose device call fails: answered anyway, from the CPU. */
static rd_sample_out_t *g_out;
static int alloc_out(void *arg, const rd_table_t *t, uint32_t n, rd_sample_out_t *out,
                     rd_error_t *err) {
  (void)arg, (void)t, (void)n, (void)err;
  *out = *g_out;
  return RD_OK;
}

/* Where a sample of up to BATCH rows lands: alloc_out hands it out. */
typedef struct {
  uint64_t keys[BATCH];
  double pr[BATCH], wt[BATCH];
  float obs[BATCH * 4], rew[BATCH];
  rd_buf_t cols[2];
  rd_sample_out_t out;
} sample_to_t;

static void sample_to(sample_to_t *s) {
  s->cols[0] = (rd_buf_t){s->obs, sizeof s->obs};
  s->cols[1] = (rd_buf_t){s->rew, sizeof s->rew};
  s->out = (rd_sample_out_t){s->keys, s->pr, s->wt, s->cols};
  g_out = &s->out;
}

/* The fixture of the workload tests: a registry of the default config
 * and, on it, gpu_workload; the teardown disarms the fault first. */
typedef struct {
  rd_registry_t *r;
  rd_workload_t *w;
} fixture_t;

static int gpu_setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  rd_config_t cfg;
  rd_config_defaults(&cfg);
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_create(&f->r, &cfg, NULL, &err) != RD_OK) fail_msg("registry: %s", err.msg);
  f->w = gpu_workload(f->r);
  *state = f;
  return 0;
}

static int gpu_teardown(void **state) {
  fixture_t *f = *state;
  rmm_check_arm(0, 0, 0);
  rd_workload_unref(f->w);
  rd_registry_destroy(f->r);
  free(f);
  return 0;
}

static void gpu_status(char *status, size_t len) {
  rd_device_t devs[RD_MAX_DEVICES];
  size_t n = rd_devices_get(devs, RD_MAX_DEVICES);
  status[0] = '\0';
  for (size_t i = 0; i < n; i++)
    if (strcmp(devs[i].kind, "gpu") == 0 && devs[i].index == 0)
      snprintf(status, len, "%s", devs[i].status);
}

static void test_sample_fault_moves_to_cpu(void **state) {
  rd_workload_t *w = ((fixture_t *)*state)->w;
  rd_error_t err;
  rd_error_clear(&err);
  for (uint32_t k = 0; k < 4; k++) insert(w, BATCH, (float)(k * BATCH));
  sample_to_t to;
  sample_to(&to);
  rd_sample_request_t q;
  memset(&q, 0, sizeof q);
  q.batch = BATCH;
  uint64_t size = 0;
  /* The next tree call on the device fails (the rows still read back). */
  rmm_check_arm(RMM_FAIL_TREE, 1, 0);
  int rc = rd_workload_sample(w, &q, alloc_out, NULL, &size, &err);
  assert_int_equal(rc, RD_OK);
  assert_int_equal(size, 4 * BATCH);
  for (uint32_t i = 0; i < BATCH; i++) /* the rows belong to their keys */
    assert_int_equal((uint64_t)to.obs[i * 4], to.keys[i]);
  assert_string_equal(rd_table_rmm_name(&w->table), "cpu");
  assert_string_equal(rd_table_storage_name(&w->table), "host");
  assert_string_equal(w->placement->running, "C-C-C");
  assert_non_null(strstr(w->placement->note, "failed while serving, moved to the CPU"));
  char status[256];
  gpu_status(status, sizeof status);
  assert_non_null(strstr(status, "unusable"));
  /* It goes on as any CPU table: inserts, updates, samples. */
  insert(w, BATCH, 10000);
  double p[BATCH];
  for (uint32_t i = 0; i < BATCH; i++) p[i] = 2.0;
  size_t stale = 0;
  assert_int_equal(rd_workload_update(w, BATCH, to.keys, BATCH, p, &stale, &err), RD_OK);
  assert_int_equal(rd_workload_sample(w, &q, alloc_out, NULL, &size, &err), RD_OK);
  rmm_check_arm(0, 0, 0);
}

/* A device that is gone for good: the rows cannot come back, the table is
 * empty on the CPU (the loss is logged), and the sample says so. */
static void test_dead_device_loses_rows_loudly(void **state) {
  rd_workload_t *w = ((fixture_t *)*state)->w;
  rd_error_t err;
  rd_error_clear(&err);
  insert(w, BATCH, 0);
  sample_to_t to;
  sample_to(&to);
  rd_sample_request_t q;
  memset(&q, 0, sizeof q);
  q.batch = 8;
  rmm_check_arm(RMM_FAIL_TREE | RMM_FAIL_READ, 1, 1);
  assert_int_equal(rd_workload_sample(w, &q, alloc_out, NULL, NULL, &err), RD_EEMPTY);
  assert_string_equal(rd_table_rmm_name(&w->table), "cpu");
  assert_int_equal(rd_table_size(&w->table), 0);
  rmm_check_arm(0, 0, 0);
  insert(w, BATCH, 0); /* and it serves again */
  assert_int_equal(rd_workload_sample(w, &q, alloc_out, NULL, NULL, &err), RD_OK);
}

/* An insert whose device write fails: the rows go into the CPU table. */
static void test_insert_fault_moves_to_cpu(void **state) {
  rd_workload_t *w = ((fixture_t *)*state)->w;
  rd_error_t err;
  rd_error_clear(&err);
  insert(w, BATCH, 0);
  rmm_check_arm(RMM_FAIL_WRITE, 1, 0);
  insert(w, BATCH, (float)BATCH); /* fails on the device, done on the CPU */
  assert_string_equal(rd_table_storage_name(&w->table), "host");
  assert_int_equal(rd_table_next_key(&w->table), 2 * BATCH);
  rmm_check_arm(0, 0, 0);
}

/* The hosted learner's sampler meets the fault: its table call is made
 * again once the owner has moved the table (pipeline.h table_fault), so a
 * TrainStep does all its steps. Here the owner is the test. */
typedef struct {
  rd_table_t table;
  pthread_mutex_t lock;
  int moved;
} owner_t;

static int move_table(void *arg, const rd_error_t *why) {
  owner_t *o = arg;
  (void)why;
  if (!o->table.module_failed) return 0;
  o->moved++;
  return rd_table_to_cpu(&o->table, NULL, NULL) == RD_OK;
}

static void test_pipeline_goes_on_after_a_fault(void **state) {
  (void)state;
  static const uint32_t obs4[] = {4};
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  const char *names[5] = {"obs", "action", "reward", "next_obs", "discount"};
  const rd_dtype_t dt[5] = {RD_DTYPE_FLOAT32, RD_DTYPE_INT32, RD_DTYPE_FLOAT32,
                            RD_DTYPE_FLOAT32, RD_DTYPE_FLOAT32};
  tc.schema.n_fields = 5;
  for (int f = 0; f < 5; f++) {
    snprintf(tc.schema.fields[f].name, RD_FIELD_NAME_MAX, "%s", names[f]);
    tc.schema.fields[f].dtype = dt[f];
    tc.schema.fields[f].rank = (f == 0 || f == 3) ? 1 : 0;
    tc.schema.fields[f].shape[0] = obs4[0];
  }
  tc.capacity = CAP;
  tc.max_batch = BATCH;
  rmm_check_fault_base(&rmm_check_host_dev);
  rmm_check_arm(0, 0, 0);
  rmm_check_ops(&rmm_check_fault_dev, 0, &tc.rmm, &tc.storage);
  owner_t o;
  memset(&o, 0, sizeof o);
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_table_init(&o.table, &tc, &err) != RD_OK) fail_msg("table: %s", err.msg);
  pthread_mutex_init(&o.lock, NULL);
  static float obs[BATCH * 4], rew[BATCH], nxt[BATCH * 4], disc[BATCH];
  static int32_t act[BATCH];
  for (uint32_t i = 0; i < BATCH; i++) {
    for (int j = 0; j < 4; j++) obs[i * 4 + j] = nxt[i * 4 + j] = (float)(i % 7) / 7.0f - 0.5f;
    act[i] = (int32_t)(i % 2);
    rew[i] = (float)(i % 3) - 1.0f;
    disc[i] = i % 5 ? 0.99f : 0.0f;
  }
  rd_cbuf_t cols[5] = {{obs, sizeof obs}, {act, sizeof act}, {rew, sizeof rew},
                       {nxt, sizeof nxt}, {disc, sizeof disc}};
  for (int k = 0; k < 4; k++)
    if (rd_table_insert(&o.table, BATCH, cols, NULL, NULL, &err) != RD_OK)
      fail_msg("insert: %s", err.msg);
  rd_pipeline_config_t c;
  memset(&c, 0, sizeof c);
  rdt_dqn_config(&c.learner, 0, 2, 1, (const uint32_t[]){16}); /* obs_dim: the binding's */
  c.learner.max_batch = 32;
  c.batch = 32;
  c.beta = 0.4;
  c.min_size = 32;
  c.gamma = 0.99f;
  c.table_fault = move_table;
  c.table_fault_arg = &o;
  if (rd_pipeline_bind_schema(&c, &o.table.config.schema, &err) != RD_OK)
    fail_msg("bind: %s", err.msg);
  rd_pipeline_t *p = NULL;
  if (rd_pipeline_create(&p, &c, &o.table, &o.lock, &err) != RD_OK)
    fail_msg("pipeline: %s", err.msg);
  rmm_check_arm(RMM_FAIL_TREE, 1, 0); /* the first sample on the device fails */
  rd_train_result_t res;
  assert_int_equal(rd_pipeline_train_wait(p, 20, 0, &res, &err), RD_OK);
  assert_int_equal(res.steps_done + res.skipped_steps, 20);
  assert_int_equal(res.skipped_steps, 0);
  assert_int_equal(o.moved, 1);
  assert_string_equal(rd_table_rmm_name(&o.table), "cpu");
  rmm_check_arm(0, 0, 0);
  rd_pipeline_destroy(p);
  pthread_mutex_destroy(&o.lock);
  rd_table_free(&o.table);
}

int main(void) {
  rd_log_open("", RD_LOG_ERROR, NULL);
  rd_devices_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sample_fault_moves_to_cpu, gpu_setup, gpu_teardown),
      cmocka_unit_test_setup_teardown(test_insert_fault_moves_to_cpu, gpu_setup, gpu_teardown),
      cmocka_unit_test_setup_teardown(test_dead_device_loses_rows_loudly, gpu_setup, gpu_teardown),
      cmocka_unit_test(test_pipeline_goes_on_after_a_fault),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
