/* test_learner_backend.c - the learner backend interface
 * (daemon/learn/learner_backend.h) and what the pipeline does when a backend's
 * device fails (pipeline.h, "Learner backends"): a fake GPU backend fails
 * at init or in a step; the device is marked unusable and the workload goes
 * on with the CPU learner (from the last published weights mid-training);
 * a config beyond the device's build (unsupported) falls back the same way
 * but leaves the device usable.
 * Also the "gpu" backend of this build: the no-CUDA stub's error, or, in a
 * CUDA build on a machine without a GPU, a real init failure that falls
 * back the same way. And the "fpga" backend (the learner kernel's
 * C-simulation): it trains through the ops table like the CPU learner
 * (same initial weights, steps within learner.h's tolerance, the same
 * policy layout, the same errors), runs a pipeline, and a config beyond the
 * kernel's build limits falls back to the CPU naming the limit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "kernels/learner.h" /* the FPGA kernel's build limits */
#include "learner_backend.h"
#include "pipeline.h"
#include "profile_gpu.h"
#include "provider_fpga.h"
#include "learner_rows.h"
#include "rdt_schema.h"
#include "rdt_dse.h"
#include "rdt_learner.h"
#include "rdt_unit.h"

#define OBS 4
#define BATCH 8
enum { F_OBS, F_ACTION, F_REWARD, F_NEXT, F_DISCOUNT, NF };

typedef rdt_table_t wl_t;

static void wl_init(wl_t *w, uint32_t capacity) {
  rd_error_t err;
  if (rdt_table_init(w, capacity, OBS, 1, 11, &err) != RD_OK) fail_msg("table: %s", err.msg);
}

static void wl_free(wl_t *w) { rdt_table_free(w); }

static void fill(wl_t *w, size_t n) {
  float obs[64 * OBS], next[64 * OBS], rew[64], disc[64];
  int32_t act[64];
  assert_true(n <= 64);
  for (size_t i = 0; i < n; i++) {
    for (int j = 0; j < OBS; j++) {
      obs[i * OBS + j] = 0.1f * (float)((i * 7 + (size_t)j) % 13) - 0.5f;
      next[i * OBS + j] = 0.1f * (float)((i * 5 + (size_t)j) % 11) - 0.5f;
    }
    act[i] = (int32_t)(i % 2);
    rew[i] = (i % 3 == 0) ? 1.0f : 0.0f;
    disc[i] = (i % 5 == 0) ? 0.0f : 0.97f;
  }
  rd_cbuf_t cols[NF] = {{obs, n * OBS * 4}, {act, n * 4}, {rew, n * 4}, {next, n * OBS * 4},
                        {disc, n * 4}};
  rd_error_t err;
  pthread_mutex_lock(&w->lock);
  int rc = rd_table_insert(&w->table, n, cols, NULL, NULL, &err);
  pthread_mutex_unlock(&w->lock);
  if (rc) fail_msg("insert: %s", err.msg);
}

static void pcfg(rd_pipeline_config_t *c, const wl_t *w) {
  memset(c, 0, sizeof *c);
  rdt_dqn_config(&c->learner, 0, 2, 1, (const uint32_t[]){16}); /* obs_dim: the binding's */
  c->learner.max_batch = BATCH;
  c->learner.seed = 5;
  c->batch = BATCH;
  c->depth = 0;
  c->beta = 0.4;
  c->min_size = BATCH;
  rd_error_t err;
  if (rd_pipeline_bind_schema(c, &w->table.config.schema, &err) != RD_OK)
    fail_msg("bind: %s", err.msg);
}

/* ---- a TrainStep request waited on ---- */

static rd_train_result_t train(rd_pipeline_t *p, uint32_t steps) {
  rd_train_result_t res;
  rd_error_t err;
  int rc = rd_pipeline_train_wait(p, steps, 0, &res, &err);
  if (rc) fail_msg("train: %s %s", rd_err_name(rc), err.msg);
  return res;
}

static size_t weights(rd_pipeline_t *p, uint8_t *buf, size_t cap, uint64_t *version) {
  size_t len = 0;
  rd_error_t err;
  if (rd_pipeline_weights(p, 0, buf, cap, version, &len, &err) != RD_OK)
    fail_msg("weights: %s", err.msg);
  return len;
}

/* ---- the device list ---- */

static void inject_gpu(uint32_t index) {
  rd_device_t d;
  rdt_device(&d, "gpu", index);
  snprintf(d.model, sizeof d.model, "Test GPU %u", index);
  snprintf(d.name, sizeof d.name, "Test GPU %u", index);
  rd_device_fingerprint(&d);
  rd_devices_inject(&d);
}

static int find_gpu(uint32_t index, rd_device_t *out) {
  rd_device_t d[RD_MAX_DEVICES];
  size_t n = rd_devices_get(d, RD_MAX_DEVICES);
  for (size_t i = 0; i < n; i++)
    if (strcmp(d[i].kind, "gpu") == 0 && d[i].index == index) {
      *out = d[i];
      return 1;
    }
  return 0;
}

static int real_gpus(void) {
  rd_device_t d[RD_MAX_DEVICES];
  size_t n = rd_devices_get(d, RD_MAX_DEVICES);
  int k = 0;
  for (size_t i = 0; i < n; i++)
    k += strcmp(d[i].kind, "gpu") == 0 && strstr(d[i].status, "injected") == NULL &&
         strncmp(d[i].name, "Test GPU", 8) != 0;
  return k;
}

/* A full workload whose pipeline config asks for GPU `dev` (injected
 * into the device list as usable). */
static void gpu_workload(wl_t *w, rd_pipeline_config_t *c, uint32_t dev) {
  inject_gpu(dev);
  wl_init(w, 64);
  fill(w, 64);
  pcfg(c, w);
  c->learner_kind = RD_LEARNER_ON_GPU;
  c->learner_device = dev;
}

/* A pipeline for config c on w's table (the test fails if it cannot be
 * made), and what its learner is: the backend asked for, the one running
 * (kind, name), whether it fell back; the rest in *li. */
static rd_pipeline_t *create_expect(rd_pipeline_config_t *c, wl_t *w,
                                    rd_learner_kind_t requested, rd_learner_kind_t kind,
                                    const char *backend, int fell_back,
                                    rd_pipeline_learner_info_t *li) {
  rd_pipeline_t *p = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_pipeline_create(&p, c, &w->table, &w->lock, &err);
  if (rc) fail_msg("create: %s", err.msg);
  rd_pipeline_learner_info(p, li);
  assert_int_equal(li->requested, requested);
  assert_int_equal(li->kind, kind);
  assert_string_equal(li->backend, backend);
  assert_int_equal(li->fell_back, fell_back);
  return p;
}

/* ---- fake GPU backends ---- */

/* init fails as a device would (out of device memory). */
static int fake_init_oom(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t dev,
                         rd_error_t *err) {
  (void)c;
  b->fault = 1;
  return rd_error_set(err, RD_ENOMEM, "fake GPU %u: out of device memory", dev);
}

/* init fails on the config: the caller's error, no fallback. */
static int fake_init_config(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t dev,
                            rd_error_t *err) {
  (void)c;
  (void)dev;
  b->fault = 0;
  return rd_error_set(err, RD_EINVAL, "fake: bad learner config");
}

/* A working "GPU" learner: the CPU learner with seed + 1 (so its weights
 * differ from what the CPU fallback would start from), whose steps fail as
 * a device would once fail_at steps have run. */
static int fake_fail_at = 0;
static int fake_steps = 0;

static int fake_init_ok(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t dev,
                        rd_error_t *err) {
  rd_learner_config_t c2 = *c;
  c2.seed = c->seed + 1;
  fake_steps = 0;
  return rd_learner_ops_cpu.init(b, &c2, dev, err);
}

static int fake_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td,
                     rd_step_stats_t *st, rd_error_t *err) {
  if (fake_steps++ >= fake_fail_at) {
    b->fault = 1;
    return rd_error_set(err, RD_EINTERNAL, "fake cuBLAS sgemm failed: CUBLAS_STATUS_EXECUTION_FAILED");
  }
  return rd_learner_ops_cpu.step(b, batch, td, st, err);
}

static size_t fake_bytes(const rd_learner_backend_t *b) { return rd_learner_ops_cpu.policy_bytes(b); }
static int fake_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *w, rd_error_t *err) {
  return rd_learner_ops_cpu.policy_save(b, buf, cap, w, err);
}
static void fake_destroy(rd_learner_backend_t *b) { rd_learner_ops_cpu.destroy(b); }

/* A step beyond what the device's build can run (as the FPGA kernel's
 * limits): RD_LEARNER_FAULT_UNSUPPORTED, the device itself is fine. */
static int fake_step_unsupported(rd_learner_backend_t *b, const rd_batch_t *batch, float *td,
                                 rd_step_stats_t *st, rd_error_t *err) {
  if (fake_steps++ >= fake_fail_at) {
    b->fault = RD_LEARNER_FAULT_UNSUPPORTED;
    return rd_error_set(err, RD_EINVAL, "fake GPU: batch beyond this build's limit (FAKE_MAX)");
  }
  return rd_learner_ops_cpu.step(b, batch, td, st, err);
}

/* init refuses the config as beyond the build (the device is fine). */
static int fake_init_unsupported(rd_learner_backend_t *b, const rd_learner_config_t *c,
                                 uint32_t dev, rd_error_t *err) {
  (void)c;
  b->fault = RD_LEARNER_FAULT_UNSUPPORTED;
  return rd_error_set(err, RD_EINVAL, "fake GPU %u: width beyond this build's limit (FAKE_MAX)",
                      dev);
}

static const rd_learner_ops_t fake_oom = {"fake-gpu", RD_LEARNER_ON_GPU, fake_init_oom, fake_step,
                                          fake_bytes, fake_save, NULL, fake_destroy, NULL, NULL, NULL, NULL, NULL};
static const rd_learner_ops_t fake_config = {"fake-gpu", RD_LEARNER_ON_GPU, fake_init_config,
                                             fake_step, fake_bytes, fake_save, NULL, fake_destroy, NULL, NULL, NULL, NULL, NULL};
static const rd_learner_ops_t fake_midway = {"fake-gpu", RD_LEARNER_ON_GPU, fake_init_ok, fake_step,
                                             fake_bytes, fake_save, NULL, fake_destroy, NULL, NULL, NULL, NULL, NULL};
static const rd_learner_ops_t fake_unsupported_step = {"fake-gpu", RD_LEARNER_ON_GPU,
                                                       fake_init_ok, fake_step_unsupported,
                                                       fake_bytes, fake_save, NULL,
                                                       fake_destroy, NULL, NULL, NULL, NULL, NULL};
static const rd_learner_ops_t fake_unsupported_init = {"fake-gpu", RD_LEARNER_ON_GPU,
                                                       fake_init_unsupported, fake_step,
                                                       fake_bytes, fake_save, NULL,
                                                       fake_destroy, NULL, NULL, NULL, NULL, NULL};

/* ---- tests ---- */

/* Init fails with a device fault: create succeeds on the CPU learner with
 * the same initial weights as a CPU workload, the device is unusable. */
static void test_init_fault_falls_back(void **state) {
  (void)state;
  wl_t w;
  rd_pipeline_config_t c;
  gpu_workload(&w, &c, 7);
  c.learner_ops = &fake_oom;
  rd_pipeline_learner_info_t li;
  rd_pipeline_t *p = create_expect(&c, &w, RD_LEARNER_ON_GPU, RD_LEARNER_ON_CPU, "cpu", 1, &li);
  assert_int_equal(li.at_init, 1);
  assert_int_equal(li.dead, 0);
  assert_non_null(strstr(li.reason, "out of device memory"));

  rd_device_t d;
  assert_true(find_gpu(7, &d));
  assert_false(rd_device_usable(&d));
  assert_non_null(strstr(d.status, "unusable: "));
  assert_non_null(strstr(d.status, "out of device memory"));

  /* The same initial weights as a CPU pipeline of the same config. */
  rd_pipeline_config_t c0;
  pcfg(&c0, &w);
  rd_pipeline_t *q = create_expect(&c0, &w, RD_LEARNER_ON_CPU, RD_LEARNER_ON_CPU, "cpu", 0, &li);
  uint8_t a[8192], b[8192];
  uint64_t va, vb;
  size_t la = weights(p, a, sizeof a, &va), lb = weights(q, b, sizeof b, &vb);
  assert_int_equal(va, 1);
  assert_int_equal(vb, 1);
  assert_int_equal(la, lb);
  assert_memory_equal(a, b, la);
  rd_pipeline_destroy(q);

  /* And it trains. */
  rd_train_result_t r = train(p, 5);
  assert_int_equal(r.status, RD_OK);
  assert_int_equal(r.steps_done, 5);
  rd_pipeline_destroy(p);
  wl_free(&w);
}

/* A config error from the backend is the caller's: create fails, the
 * device stays usable. */
static void test_init_config_error_no_fallback(void **state) {
  (void)state;
  inject_gpu(8);
  wl_t w;
  wl_init(&w, 64);
  rd_pipeline_config_t c;
  pcfg(&c, &w);
  c.learner_kind = RD_LEARNER_ON_GPU;
  c.learner_device = 8;
  c.learner_ops = &fake_config;
  rd_pipeline_t *p = NULL;
  rd_error_t err;
  assert_int_equal(rd_pipeline_create(&p, &c, &w.table, &w.lock, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "bad learner config"));
  rd_device_t d;
  assert_true(find_gpu(8, &d));
  assert_true(rd_device_usable(&d));
  wl_free(&w);
}

/* Batches the learner saw, in order (D = 0: one at a time). */
typedef struct {
  int n;
  float obs[4][BATCH * OBS], next[4][BATCH * OBS], rew[4][BATCH], disc[4][BATCH], w[4][BATCH];
  int32_t act[4][BATCH];
} seen_t;

static void keep_batch(void *arg, const uint64_t *keys, const rd_batch_t *b) {
  (void)keys;
  seen_t *s = arg;
  if (s->n >= 4) return;
  int i = s->n++;
  memcpy(s->obs[i], b->obs, sizeof s->obs[i]);
  memcpy(s->next[i], b->next_obs, sizeof s->next[i]);
  memcpy(s->rew[i], b->reward, sizeof s->rew[i]);
  memcpy(s->disc[i], b->discount, sizeof s->disc[i]);
  memcpy(s->w[i], b->weights, sizeof s->w[i]);
  memcpy(s->act[i], b->action_i, sizeof s->act[i]);
}

/* A step fails with a device fault mid-training: the batch is skipped, the
 * device unusable, and the CPU learner continues from the last published
 * weights: its next step equals a reference learner's that starts from
 * those weights (the fake's seed + 1) and trains on the same batch. */
static void test_step_fault_resumes_on_cpu(void **state) {
  (void)state;
  wl_t w;
  rd_pipeline_config_t c;
  gpu_workload(&w, &c, 9);
  static seen_t seen;
  memset(&seen, 0, sizeof seen);
  c.batch_hook = keep_batch;
  c.hook_arg = &seen;
  c.learner_ops = &fake_midway;
  fake_fail_at = 0; /* the first step fails */
  rd_pipeline_t *p = NULL;
  rd_error_t err;
  assert_int_equal(rd_pipeline_create(&p, &c, &w.table, &w.lock, &err), RD_OK);
  rd_pipeline_learner_info_t li;
  rd_pipeline_learner_info(p, &li);
  assert_int_equal(li.fell_back, 0);
  assert_int_equal(li.kind, RD_LEARNER_ON_GPU);
  assert_string_equal(li.backend, "fake-gpu");
  uint8_t v1[8192];
  uint64_t ver;
  size_t len1 = weights(p, v1, sizeof v1, &ver);
  assert_int_equal(ver, 1);

  rd_train_result_t r = train(p, 2);
  assert_int_equal(r.status, RD_OK);
  assert_int_equal(r.skipped_steps, 1);
  assert_int_equal(r.steps_done, 1);
  assert_int_equal(seen.n, 2);

  rd_pipeline_learner_info(p, &li);
  assert_int_equal(li.fell_back, 1);
  assert_int_equal(li.at_init, 0);
  assert_int_equal(li.kind, RD_LEARNER_ON_CPU);
  assert_string_equal(li.backend, "cpu");
  assert_non_null(strstr(li.reason, "CUBLAS_STATUS_EXECUTION_FAILED"));
  rd_device_t d;
  assert_true(find_gpu(9, &d));
  assert_false(rd_device_usable(&d));

  /* Reference: the fake's initial weights (seed + 1), one CPU step on the
   * second batch. */
  rd_learner_t ref;
  rd_learner_config_t rc2 = c.learner;
  rc2.seed = c.learner.seed + 1;
  assert_int_equal(rd_learner_init(&ref, &rc2, &err), RD_OK);
  uint8_t r0[8192];
  size_t lr0 = 0;
  assert_int_equal(rd_learner_policy_save(&ref, r0, sizeof r0, &lr0, &err), RD_OK);
  assert_int_equal(lr0, len1);
  assert_memory_equal(r0, v1, len1); /* version 1 was the fake's */
  rd_batch_t b = {BATCH, seen.obs[1], seen.act[1], NULL, seen.rew[1], seen.disc[1], seen.next[1],
                  seen.w[1]};
  assert_int_equal(rd_learner_step(&ref, &b, NULL, NULL, &err), RD_OK);
  uint8_t r1[8192], got[8192];
  size_t lr1 = 0;
  assert_int_equal(rd_learner_policy_save(&ref, r1, sizeof r1, &lr1, &err), RD_OK);
  size_t lg = weights(p, got, sizeof got, &ver);
  assert_true(ver >= 2);
  assert_int_equal(lg, lr1);
  assert_memory_equal(got, r1, lg);
  rd_learner_free(&ref);

  /* Training goes on. */
  r = train(p, 3);
  assert_int_equal(r.steps_done, 3);
  rd_pipeline_destroy(p);
  wl_free(&w);
}

/* p fell back to the CPU learner (at init or not), for a reason naming
 * `why`, and GPU `dev` is still usable. */
static void fell_back_gpu_usable(rd_pipeline_t *p, int at_init, const char *why, uint32_t dev) {
  rd_pipeline_learner_info_t li;
  rd_pipeline_learner_info(p, &li);
  assert_int_equal(li.fell_back, 1);
  assert_int_equal(li.at_init, at_init);
  assert_int_equal(li.kind, RD_LEARNER_ON_CPU);
  assert_non_null(strstr(li.reason, why));
  rd_device_t d;
  assert_true(find_gpu(dev, &d));
  if (!rd_device_usable(&d)) fail_msg("an unsupported config gave the GPU up: %s", d.status);
}

/* An unsupported config is no fault of the device (learner_backend.h):
 * at init or mid-training the workload goes on with the CPU learner, and
 * the device stays usable for other workloads; a device fault gives it up. */
static void test_unsupported_keeps_device(void **state) {
  (void)state;
  assert_int_equal(rd_learner_fault_gives_up_device(RD_LEARNER_FAULT_NONE), 0);
  assert_int_equal(rd_learner_fault_gives_up_device(RD_LEARNER_FAULT_DEVICE), 1);
  assert_int_equal(rd_learner_fault_gives_up_device(RD_LEARNER_FAULT_UNSUPPORTED), 0);

  wl_t w;
  rd_pipeline_config_t c;
  gpu_workload(&w, &c, 10);
  rd_pipeline_t *p = NULL;
  rd_error_t err;

  /* At init. */
  c.learner_ops = &fake_unsupported_init;
  assert_int_equal(rd_pipeline_create(&p, &c, &w.table, &w.lock, &err), RD_OK);
  fell_back_gpu_usable(p, 1, "FAKE_MAX", 10);
  rd_train_result_t r = train(p, 2);
  assert_int_equal(r.steps_done, 2);
  rd_pipeline_destroy(p);

  /* Mid-training: the second step is refused as unsupported. */
  c.learner_ops = &fake_unsupported_step;
  fake_fail_at = 1;
  assert_int_equal(rd_pipeline_create(&p, &c, &w.table, &w.lock, &err), RD_OK);
  r = train(p, 3);
  assert_int_equal(r.status, RD_OK);
  assert_int_equal(r.steps_done, 2);
  assert_int_equal(r.skipped_steps, 1);
  fell_back_gpu_usable(p, 0, "FAKE_MAX", 10);
  rd_pipeline_destroy(p);

  /* The same step failing as a device fault gives the GPU up. */
  c.learner_ops = &fake_midway;
  fake_fail_at = 1;
  assert_int_equal(rd_pipeline_create(&p, &c, &w.table, &w.lock, &err), RD_OK);
  r = train(p, 3);
  assert_int_equal(r.skipped_steps, 1);
  rd_device_t d;
  assert_true(find_gpu(10, &d));
  assert_false(rd_device_usable(&d));
  rd_pipeline_destroy(p);
  wl_free(&w);
}

/* This build's "gpu" backend: the stub's clear error without CUDA; with
 * CUDA on a machine without a GPU, a real init failure that falls back. */
static void test_gpu_backend_of_this_build(void **state) {
  (void)state;
  rd_learner_config_t lc;
  rd_learner_config_default(&lc);
  lc.obs_dim = OBS;
  lc.num_actions = 2;
  lc.n_hidden = 1;
  lc.hidden[0] = 16;
  lc.max_batch = BATCH;
  rd_learner_backend_t b;
  rd_error_t err;
  rd_error_clear(&err);
  int gpus = real_gpus();
  if (!rd_learner_gpu_built()) {
    assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_gpu, &lc, 0, &err), RD_EINVAL);
    assert_int_equal(b.fault, 1);
    assert_null(b.impl);
    assert_non_null(strstr(err.msg, "built without CUDA"));
    assert_int_equal(rd_profile_gpu_built(), 0);
    rd_profile_shape_t shape;
    memset(&shape, 0, sizeof shape);
    rd_device_t g;
    memset(&g, 0, sizeof g);
    snprintf(g.kind, sizeof g.kind, "gpu");
    rd_profile_t out[3];
    size_t n = 9;
    int fault = 7;
    assert_int_equal(rd_profile_measure_gpu(&shape, &g, 1.0, out, 3, &n, &fault, &err), RD_EINVAL);
    assert_int_equal(n, 0);
    assert_int_equal(fault, 0);
    assert_non_null(strstr(err.msg, "built without CUDA"));
  } else if (gpus == 0) {
    int rc = rd_learner_backend_init(&b, &rd_learner_ops_gpu, &lc, 0, &err);
    assert_int_not_equal(rc, RD_OK);
    assert_int_equal(b.fault, 1);
    assert_non_null(strstr(err.msg, "CUDA"));
    /* A bad config is not the device's fault. */
    rd_learner_config_t bad = lc;
    bad.obs_dim = 0;
    assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_gpu, &bad, 0, &err), RD_EINVAL);
    assert_int_equal(b.fault, 0);
  } else {
    /* A real GPU: init must work (then this is no failure test). */
    int rc = rd_learner_backend_init(&b, &rd_learner_ops_gpu, &lc, 0, &err);
    if (rc) fail_msg("GPU learner init on a present GPU: %s", err.msg);
    assert_true(b.ops->policy_bytes(&b) > 0);
    rd_learner_backend_destroy(&b);
    return;
  }

  /* The pipeline asked for GPU 0 of this build falls back to the CPU. */
  wl_t w;
  rd_pipeline_config_t c;
  gpu_workload(&w, &c, 0);
  rd_pipeline_t *p = NULL;
  int rc = rd_pipeline_create(&p, &c, &w.table, &w.lock, &err);
  if (rc) fail_msg("create: %s", err.msg);
  rd_pipeline_learner_info_t li;
  rd_pipeline_learner_info(p, &li);
  assert_int_equal(li.fell_back, 1);
  assert_int_equal(li.kind, RD_LEARNER_ON_CPU);
  assert_non_null(strstr(li.reason, rd_learner_gpu_built() ? "CUDA" : "built without CUDA"));
  rd_device_t d;
  assert_true(find_gpu(0, &d));
  assert_false(rd_device_usable(&d));
  rd_train_result_t r = train(p, 2);
  assert_int_equal(r.steps_done, 2);
  rd_pipeline_destroy(p);
  wl_free(&w);
}

static void test_mark_unknown(void **state) {
  (void)state;
  assert_int_equal(rd_devices_mark_unusable("gpu", 99, "nothing"), 0);
  rd_device_t cpu;
  rd_devices_cpu(&cpu);
  assert_true(rd_device_usable(&cpu));
  assert_string_equal(rd_learner_kind_name(RD_LEARNER_ON_GPU), "gpu");
  assert_ptr_equal(rd_learner_ops_for(RD_LEARNER_ON_CPU), &rd_learner_ops_cpu);
  assert_ptr_equal(rd_learner_ops_for(RD_LEARNER_ON_GPU), &rd_learner_ops_gpu);
  assert_ptr_equal(rd_learner_ops_for(RD_LEARNER_ON_FPGA), &rd_learner_ops_fpga);
  assert_string_equal(rd_learner_kind_name(RD_LEARNER_ON_FPGA), "fpga");
  assert_string_equal(rd_learner_ops_fpga.name, "fpga");
  assert_int_equal(rd_learner_ops_fpga.kind, RD_LEARNER_ON_FPGA);
}

/* ---- the "fpga" backend ---- */

/* learner.h's tolerance for whole train-steps (per tensor, relative to
 * max(1, max |cpu|)). */
#define FPGA_TOL 1e-3

static double rel_err(const float *a, const float *b, size_t n) {
  double diff = 0, scale = 1;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (isnan(d)) return INFINITY;
    if (d > diff) diff = d;
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
  }
  return diff / scale;
}



/* The "fpga" and "cpu" backends of one config: the same initial policy,
 * byte for byte; steps whose |delta| and losses agree; a policy of the
 * same layout (header byte for byte, weights within the tolerance). */
static void fpga_against_cpu(const rd_learner_config_t *c, uint32_t steps, size_t n) {
  rd_learner_backend_t f, k;
  backend_init_ok(&f, &rd_learner_ops_fpga, c);
  backend_init_ok(&k, &rd_learner_ops_cpu, c);
  static uint8_t bf[1 << 16], bc[1 << 16], b0[1 << 16];
  size_t lf = backend_save(&f, bf, sizeof bf), lc = backend_save(&k, bc, sizeof bc);
  assert_int_equal(lf, lc);
  assert_memory_equal(bf, bc, lf); /* the CPU learner's initial weights for the seed */
  memcpy(b0, bf, lf);
  rd_error_t err;
  for (uint32_t s = 0; s < steps; s++) {
    rows_t r;
    rows(&r, c, n, s + 1);
    float tf[64], tc[64];
    rd_step_stats_t sf, sc;
    int rf = f.ops->step(&f, &r.b, tf, &sf, &err);
    if (rf) fail_msg("fpga step %u: %s", s, err.msg);
    assert_int_equal(k.ops->step(&k, &r.b, tc, &sc, &err), RD_OK);
    assert_true(rel_err(tf, tc, n) <= FPGA_TOL);
    assert_true(fabs(sf.loss - sc.loss) <= FPGA_TOL * fmax(1.0, fabs(sc.loss)));
    assert_true(fabs(sf.actor_loss - sc.actor_loss) <= FPGA_TOL * fmax(1.0, fabs(sc.actor_loss)));
    assert_true(fabs(sf.td_abs_mean - sc.td_abs_mean) <= FPGA_TOL * fmax(1.0, sc.td_abs_mean));
    assert_true(fabs(sf.grad_norm - sc.grad_norm) <= FPGA_TOL * fmax(1.0, sc.grad_norm));
  }
  lf = backend_save(&f, bf, sizeof bf);
  lc = backend_save(&k, bc, sizeof bc);
  assert_int_equal(lf, lc);
  rd_nn_spec_t sf, sc;
  static float pf[1 << 14], pc[1 << 14];
  assert_int_equal(rd_nn_flat_parse(bf, lf, &sf, pf, 1 << 14, &err), RD_OK);
  assert_int_equal(rd_nn_flat_parse(bc, lc, &sc, pc, 1 << 14, &err), RD_OK);
  assert_true(rd_nn_spec_equal(&sf, &sc));
  const size_t np = rd_nn_spec_params(&sf), header = lf - np * sizeof(float);
  assert_memory_equal(bf, bc, header);
  for (uint32_t l = 0; l < sf.n_layers; l++) {
    size_t off = rd_nn_spec_offset(&sf, l), nw = (size_t)sf.sizes[l + 1] * sf.sizes[l];
    assert_true(rel_err(pf + off, pc + off, nw) <= FPGA_TOL);
    assert_true(rel_err(pf + off + nw, pc + off + nw, sf.sizes[l + 1]) <= FPGA_TOL);
  }
  assert_memory_not_equal(bf, b0, lf); /* it trained */

  /* policy_load: the CPU's policy in, the same bytes out; loaded into
   * both, it is also both targets (as a fallback loads it), so the next
   * step agrees again. */
  assert_non_null(f.ops->policy_load);
  assert_int_equal(f.ops->policy_load(&f, bc, lc, &err), RD_OK);
  assert_int_equal(backend_save(&f, bf, sizeof bf), lc);
  assert_memory_equal(bf, bc, lc);
  assert_int_equal(k.ops->policy_load(&k, bc, lc, &err), RD_OK);
  rows_t r;
  rows(&r, c, n, 99);
  float tf[64], tc[64];
  assert_int_equal(f.ops->step(&f, &r.b, tf, NULL, &err), RD_OK);
  assert_int_equal(k.ops->step(&k, &r.b, tc, NULL, &err), RD_OK);
  assert_true(rel_err(tf, tc, n) <= FPGA_TOL);
  rd_learner_backend_destroy(&f);
  rd_learner_backend_destroy(&k);
}

static void dqn_cfg(rd_learner_config_t *c) {
  rdt_dqn_config(c, OBS, 2, 2, (const uint32_t[]){64, 64});
  c->max_batch = 32;
  c->seed = 5;
  c->target_period = 3;
}

static void ddpg_cfg(rd_learner_config_t *d) {
  rdt_ddpg_config(d, 3, 2, 2, (const uint32_t[]){32, 32}, 2, (const uint32_t[]){32, 32});
  d->action_low = -2.0f;
  d->action_high = 2.0f;
  d->max_batch = 24;
  d->seed = 8;
}

/* n steps of b on batches of seeds from seed on. */
static void steps(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t n,
                  uint32_t seed) {
  rd_error_t err;
  for (uint32_t s = 0; s < n; s++) {
    rows_t r;
    rows(&r, c, c->max_batch, seed + s);
    if (b->ops->step(b, &r.b, NULL, NULL, &err) != RD_OK) fail_msg("step: %s", err.msg);
  }
}

/* The "fpga" backend's whole training state (issue 22): saved after some
 * steps and loaded into a fresh instance, the two go on bit for bit alike
 * (targets, Adam's moments and step, the step count: the DQN target's
 * hard copy every 3 steps depends on it). The bytes are the CPU learner's
 * format: a CPU learner loads them. A damaged state is refused and
 * changes nothing. */
static void fpga_state_round_trip(const rd_learner_config_t *c) {
  rd_learner_backend_t a, b, k;
  backend_init_ok(&a, &rd_learner_ops_fpga, c);
  backend_init_ok(&b, &rd_learner_ops_fpga, c);
  backend_init_ok(&k, &rd_learner_ops_cpu, c);
  steps(&a, c, 7, 1);
  static uint8_t sa[1 << 17], sb[1 << 17], s0[1 << 17];
  rd_error_t err;
  size_t na = a.ops->state_bytes(&a), la = 0, lb = 0, l0 = 0;
  assert_true(na > 0 && na <= sizeof sa);
  assert_int_equal(a.ops->state_save(&a, sa, sizeof sa, &la, &err), RD_OK);
  assert_int_equal(la, na);
  assert_int_equal(b.ops->state_save(&b, s0, sizeof s0, &l0, &err), RD_OK);
  assert_int_equal(b.ops->state_load(&b, sa, la - 1, &err), RD_EINVAL); /* cut short */
  assert_int_equal(b.ops->state_save(&b, sb, sizeof sb, &lb, &err), RD_OK);
  assert_memory_equal(sb, s0, l0); /* unchanged */
  assert_int_equal(b.ops->state_load(&b, sa, la, &err), RD_OK);
  assert_int_equal(k.ops->state_load(&k, sa, la, &err), RD_OK); /* device-neutral */
  steps(&a, c, 5, 100);
  steps(&b, c, 5, 100);
  assert_int_equal(a.ops->state_save(&a, sa, sizeof sa, &la, &err), RD_OK);
  assert_int_equal(b.ops->state_save(&b, sb, sizeof sb, &lb, &err), RD_OK);
  assert_int_equal(la, lb);
  assert_memory_equal(sa, sb, la);
  assert_memory_not_equal(sa, s0, la); /* it trained */
  rd_learner_backend_destroy(&a);
  rd_learner_backend_destroy(&b);
  rd_learner_backend_destroy(&k);
}

static void test_fpga_state(void **state) {
  (void)state;
  rd_learner_config_t c;
  dqn_cfg(&c);
  fpga_state_round_trip(&c);
  ddpg_cfg(&c);
  fpga_state_round_trip(&c);
}

/* The "fpga" backend trains through the ops table like the CPU learner,
 * DQN and DDPG, and fails as it does. */
static void test_fpga_backend_trains(void **state) {
  (void)state;
  rd_learner_config_t c;
  dqn_cfg(&c);
  fpga_against_cpu(&c, 10, 32);
  c.double_dqn = 0;
  c.target_period = 0;
  c.tau = 0.02;
  fpga_against_cpu(&c, 6, 19);

  rd_learner_config_t d;
  ddpg_cfg(&d);
  fpga_against_cpu(&d, 8, 24);

  /* The errors of a step, as the CPU backend's (fault 0: the caller's). */
  rd_learner_backend_t f, k;
  backend_init_ok(&f, &rd_learner_ops_fpga, &c);
  backend_init_ok(&k, &rd_learner_ops_cpu, &c);
  static uint8_t before[1 << 16], after[1 << 16];
  size_t lb = backend_save(&f, before, sizeof before);
  rows_t r;
  rows(&r, &c, 33, 3);
  rd_error_t ef, ec;
  assert_int_equal(f.ops->step(&f, &r.b, NULL, NULL, &ef), RD_ETOOBIG); /* 33 > max_batch */
  assert_int_equal(f.fault, 0);
  assert_non_null(strstr(ef.msg, "max_batch 32"));
  rows(&r, &c, 8, 3);
  r.obs[5] = NAN;
  assert_int_equal(f.ops->step(&f, &r.b, NULL, NULL, &ef), RD_EINVAL);
  assert_int_equal(k.ops->step(&k, &r.b, NULL, NULL, &ec), RD_EINVAL);
  assert_string_equal(ef.msg, ec.msg);
  assert_int_equal(f.fault, 0);
  /* A non-finite step (inputs that overflow the first layer): RD_ERANGE
   * with the CPU learner's message, fault 0, no weight moved. */
  rows(&r, &c, 8, 3);
  for (size_t i = 0; i < 8 * OBS; i++) r.obs[i] = 3e38f;
  assert_int_equal(f.ops->step(&f, &r.b, NULL, NULL, &ef), RD_ERANGE);
  assert_int_equal(k.ops->step(&k, &r.b, NULL, NULL, &ec), RD_ERANGE);
  assert_string_equal(ef.msg, ec.msg);
  assert_int_equal(f.fault, 0);
  assert_int_equal(backend_save(&f, after, sizeof after), lb);
  assert_memory_equal(before, after, lb);
  /* policy_load of another network changes nothing. */
  rd_learner_backend_t g;
  backend_init_ok(&g, &rd_learner_ops_fpga, &d);
  static uint8_t other[1 << 16];
  size_t lo = backend_save(&g, other, sizeof other);
  assert_int_equal(f.ops->policy_load(&f, other, lo, &ef), RD_EINVAL);
  assert_non_null(strstr(ef.msg, "different network"));
  assert_int_equal(backend_save(&f, after, sizeof after), lb);
  assert_memory_equal(before, after, lb);
  rd_learner_backend_destroy(&g);
  rd_learner_backend_destroy(&f);
  rd_learner_backend_destroy(&k);
}

/* A config beyond the kernel's build limits: RD_EINVAL naming the limit,
 * RD_LEARNER_FAULT_UNSUPPORTED (not the caller's error, not a broken
 * device); an invalid config is the caller's (fault 0). */
static void test_fpga_backend_limits(void **state) {
  (void)state;
  rd_learner_config_t c;
  dqn_cfg(&c);
  rd_error_t err;
  assert_int_equal(rd_learner_fpga_supports(&c, &err), 1);
  rd_learner_backend_t b;
  c.hidden[1] = 2 * LRN_MAX_WIDTH;
  assert_int_equal(rd_learner_fpga_supports(&c, &err), 0);
  assert_non_null(strstr(err.msg, "LRN_MAX_WIDTH"));
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_UNSUPPORTED);
  assert_null(b.impl);
  assert_non_null(strstr(err.msg, "LRN_MAX_WIDTH"));
  assert_non_null(strstr(err.msg, "Q network"));
  dqn_cfg(&c);
  c.max_batch = LRN_MAX_BATCH + 1;
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "LRN_MAX_BATCH"));
  dqn_cfg(&c);
  c.n_hidden = LRN_MAX_LAYERS; /* LRN_MAX_LAYERS + 1 layers */
  for (uint32_t i = 0; i < c.n_hidden; i++) c.hidden[i] = 8;
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "LRN_MAX_LAYERS"));
  /* DDPG: the critic's width. */
  rd_learner_config_t d;
  rdt_ddpg_config(&d, 3, 1, 1, (const uint32_t[]){16}, 1, (const uint32_t[]){LRN_MAX_WIDTH + 1});
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga, &d, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "critic"));
  /* Invalid for every learner: the caller's. */
  dqn_cfg(&c);
  c.obs_dim = 0;
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, 0);
  assert_non_null(strstr(err.msg, "obs_dim"));
}

/* A pipeline on the "fpga" backend: it runs there, starts from the CPU
 * pipeline's initial weights and trains. One beyond the kernel's limits
 * runs on the CPU instead, the limit named as the reason. */
static void test_fpga_backend_pipeline(void **state) {
  (void)state;
  wl_t w;
  wl_init(&w, 64);
  fill(&w, 64);
  rd_pipeline_config_t c, c0;
  pcfg(&c, &w);
  pcfg(&c0, &w);
  c.learner_kind = RD_LEARNER_ON_FPGA;
  c.learner_device = 0;
  rd_pipeline_learner_info_t li;
  rd_pipeline_t *q = NULL,
                *p = create_expect(&c, &w, RD_LEARNER_ON_FPGA, RD_LEARNER_ON_FPGA, "fpga", 0, &li);
  rd_error_t err;
  assert_int_equal(rd_pipeline_create(&q, &c0, &w.table, &w.lock, &err), RD_OK);
  uint8_t a[8192], b[8192];
  uint64_t va, vb;
  size_t la = weights(p, a, sizeof a, &va), lb = weights(q, b, sizeof b, &vb);
  assert_int_equal(va, 1);
  assert_int_equal(la, lb);
  assert_memory_equal(a, b, la);
  rd_train_result_t r = train(p, 5);
  assert_int_equal(r.status, RD_OK);
  assert_int_equal(r.steps_done, 5);
  la = weights(p, a, sizeof a, &va);
  assert_true(va >= 2);
  assert_int_equal(la, lb);
  assert_memory_not_equal(a, b, la);
  rd_pipeline_learner_info(p, &li);
  assert_int_equal(li.kind, RD_LEARNER_ON_FPGA);
  rd_pipeline_destroy(p);
  rd_pipeline_destroy(q);

  /* Too wide for the kernel: the CPU learner, with the same initial weights,
   * and the FPGA stays usable for other workloads (a config beyond the
   * kernel's limits is no fault of the device). */
  rd_device_t fd;
  rd_error_t derr;
  assert_int_equal(rd_fpga_provider_csim("u250", RD_FPGA_PARTS_DIR, 0, &fd, &derr), RD_OK);
  rd_devices_inject(&fd);
  c.learner.hidden[0] = 2 * LRN_MAX_WIDTH;
  c0.learner.hidden[0] = 2 * LRN_MAX_WIDTH;
  p = create_expect(&c, &w, RD_LEARNER_ON_FPGA, RD_LEARNER_ON_CPU, "cpu", 1, &li);
  assert_int_equal(li.at_init, 1);
  assert_non_null(strstr(li.reason, "LRN_MAX_WIDTH"));
  rd_device_t all[16];
  size_t nd = rd_devices_get(all, 16), seen = 0;
  for (size_t i = 0; i < nd; i++)
    if (strcmp(all[i].kind, "fpga") == 0 && strcmp(all[i].backend, "csim") == 0) {
      seen++;
      if (!rd_device_usable(&all[i])) fail_msg("the FPGA was given up: %s", all[i].status);
    }
  assert_int_equal(seen, 1);
  assert_int_equal(rd_pipeline_create(&q, &c0, &w.table, &w.lock, &err), RD_OK);
  static uint8_t wa[1 << 16], wb[1 << 16];
  la = weights(p, wa, sizeof wa, &va);
  lb = weights(q, wb, sizeof wb, &vb);
  assert_int_equal(la, lb);
  assert_memory_equal(wa, wb, la);
  r = train(p, 2);
  assert_int_equal(r.steps_done, 2);
  rd_pipeline_destroy(p);
  rd_pipeline_destroy(q);
  wl_free(&w);
}

/* The CPU backend's policy_load into a learner with a team (threads 2,
 * batches of two shards: replicas, learner.h) reaches every copy of its
 * networks: its steps after the load agree bit for bit with a 1-thread
 * backend given the same policy. */
static void test_cpu_policy_load_team(void **state) {
  (void)state;
  const uint32_t h[] = {64, 64};
  rd_learner_config_t c, oc;
  rdt_dqn_config(&c, 4, 2, 2, h);
  c.max_batch = 256;
  c.threads = 1;
  oc = c;
  oc.seed = c.seed + 7;
  rd_learner_backend_t one, two, other;
  backend_init_ok(&one, &rd_learner_ops_cpu, &c);
  backend_init_ok(&other, &rd_learner_ops_cpu, &oc);
  c.threads = 2;
  backend_init_ok(&two, &rd_learner_ops_cpu, &c);
  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, 256, 3);
  static float ta[256], tb[256];
  static uint8_t pol[1 << 16];
  rd_error_t err;
  for (int round = 0; round < 2; round++) {
    if (round == 1) { /* another learner's policy, into both */
      size_t lp = backend_save(&other, pol, sizeof pol);
      assert_int_equal(one.ops->policy_load(&one, pol, lp, &err), RD_OK);
      assert_int_equal(two.ops->policy_load(&two, pol, lp, &err), RD_OK);
    }
    for (int k = 0; k < 3; k++) {
      assert_int_equal(one.ops->step(&one, &bb.b, ta, NULL, &err), RD_OK);
      assert_int_equal(two.ops->step(&two, &bb.b, tb, NULL, &err), RD_OK);
      assert_memory_equal(ta, tb, sizeof ta);
    }
  }
  rdt_batch_free(&bb);
  rd_learner_backend_destroy(&one);
  rd_learner_backend_destroy(&two);
  rd_learner_backend_destroy(&other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mark_unknown),
      cmocka_unit_test(test_init_fault_falls_back),
      cmocka_unit_test(test_init_config_error_no_fallback),
      cmocka_unit_test(test_step_fault_resumes_on_cpu),
      cmocka_unit_test(test_unsupported_keeps_device),
      cmocka_unit_test(test_gpu_backend_of_this_build),
      cmocka_unit_test(test_fpga_backend_trains),
      cmocka_unit_test(test_fpga_backend_limits),
      cmocka_unit_test(test_fpga_backend_pipeline),
      cmocka_unit_test(test_fpga_state),
      cmocka_unit_test(test_cpu_policy_load_team),
  };
  return cmocka_run_group_tests(tests, rdt_quiet_setup, rdt_quiet_teardown); /* the fallbacks' error lines show */
}
