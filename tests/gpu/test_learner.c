/* test_learner.c - the GPU learner's and storage's host-side contract:
 * config errors before any CUDA call, a clean error (never an abort) when
 * there is no usable device, a zeroed handle that destroy accepts, and, on
 * a machine with a GPU, one DQN step and a scatter / gather round trip.
 * The numerical comparison with the CPU learner is tests/gpu/
 * check_learner.cu (bench/gpu.sh runs it on a GPU machine).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "learner_gpu.h"
#include "storage_gpu.h"
#include "sumtree_gpu.h"
#include "rdt_learner.h"
#include "rdt_main.h"

static int have_gpu(void) {
  int n = 0;
  rd_error_t err;
  return rd_gpu_device_count(&n, &err) == RD_OK && n > 0;
}

static void dqn_config(rd_learner_config_t *c) {
  rdt_dqn_config(c, 4, 2, 2, (const uint32_t[]){16, 16});
  c->max_batch = 8;
}

/* A learner of dqn_config on device ordinal. */
static int init_dqn(rd_gpu_learner_t *l, int ordinal, rd_error_t *err) {
  rd_learner_config_t c;
  dqn_config(&c);
  return rd_gpu_learner_init(l, &c, ordinal, err);
}

/* init_dqn for the tests that need a GPU: they skip without one. */
static int init_dqn_on_gpu(rd_gpu_learner_t *l, int ordinal, rd_error_t *err) {
  if (!have_gpu()) skip();
  return init_dqn(l, ordinal, err);
}

static void test_bad_config(void **state) {
  (void)state;
  rd_learner_config_t c;
  dqn_config(&c);
  c.lr = -1.0;
  rd_gpu_learner_t l;
  rd_error_t err;
  assert_int_equal(rd_gpu_learner_init(&l, &c, 0, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "lr"));
  assert_null(l.impl);
  rd_gpu_learner_destroy(&l);
}

static void test_no_device(void **state) {
  (void)state;
  if (have_gpu()) skip();
  rd_gpu_learner_t l;
  rd_error_t err;
  int rc = init_dqn(&l, 0, &err);
  assert_int_equal(rc, RD_EINVAL);
  assert_non_null(strstr(err.msg, "no usable CUDA device"));
  assert_null(l.impl);
  rd_gpu_learner_destroy(&l); /* safe on a failed init */
  float td[1];
  const float x[4] = {0};
  rd_batch_t b = {.n = 1, .obs = x, .next_obs = x};
  assert_int_equal(rd_gpu_learner_step(&l, &b, td, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_gpu_learner_policy_bytes(&l), 0);

  rd_gpu_storage_t s;
  rc = rd_gpu_storage_init(&s, 16, 8, 4, 0, &err);
  assert_int_equal(rc, RD_EINVAL);
  assert_non_null(strstr(err.msg, "no usable CUDA device"));
  assert_null(s.impl);
  rd_gpu_storage_free(&s);
}

static void test_bad_ordinal(void **state) {
  (void)state;
  rd_gpu_learner_t l;
  rd_error_t err;
  assert_int_equal(init_dqn_on_gpu(&l, 1000, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "ordinal"));
}

static void test_one_step(void **state) {
  (void)state;
  rd_gpu_learner_t l;
  rd_error_t err;
  assert_int_equal(init_dqn_on_gpu(&l, 0, &err), RD_OK);
  float obs[8 * 4], next[8 * 4], r[8], d[8], td[8];
  int32_t a[8];
  for (int i = 0; i < 32; i++) obs[i] = (float)(i % 7) * 0.1f, next[i] = (float)(i % 5) * 0.1f;
  for (int i = 0; i < 8; i++) r[i] = 1.0f, d[i] = 0.99f, a[i] = i % 2;
  rd_batch_t b = {.n = 8, .obs = obs, .action_i = a, .reward = r, .discount = d,
                  .next_obs = next};
  rd_step_stats_t st;
  for (int k = 0; k < 3; k++) assert_int_equal(rd_gpu_learner_step(&l, &b, td, &st, &err), RD_OK);
  assert_int_equal(l.steps, 3);
  assert_true(st.loss > 0);
  a[3] = 2;
  assert_int_equal(rd_gpu_learner_step(&l, &b, td, &st, &err), RD_EINVAL);
  rd_gpu_learner_destroy(&l);

  rd_gpu_storage_t s;
  assert_int_equal(rd_gpu_storage_init(&s, 16, 12, 4, 0, &err), RD_OK);
  uint32_t pos[2] = {3, 15};
  unsigned char in[24], out[24];
  for (int i = 0; i < 24; i++) in[i] = (unsigned char)(i * 7 + 1);
  assert_int_equal(rd_gpu_storage_scatter(&s, 2, pos, in, &err), RD_OK);
  pos[0] = 15, pos[1] = 3;
  assert_int_equal(rd_gpu_storage_gather(&s, 2, pos, out, &err), RD_OK);
  assert_memory_equal(out, in + 12, 12);
  assert_memory_equal(out + 12, in, 12);
  rd_gpu_storage_free(&s);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_bad_config),
         cmocka_unit_test(test_no_device),
         cmocka_unit_test(test_bad_ordinal),
         cmocka_unit_test(test_one_step))
