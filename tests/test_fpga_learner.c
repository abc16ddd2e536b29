/* test_fpga_learner.c - C-simulation of the FPGA learner skeleton
 * (backends/fpga/kernels/learner.[ch]) against the CPU networks the hosted
 * learner trains (backends/cpu/nn.h) and the FPGA model's learner structure
 * (backends/fpga/model.h).
 *
 * Tolerance (learner.h): per tensor, max |fpga - cpu| <= 1e-5 * max(1,
 * max |cpu|): both compute in fp32 from the same parameters, in different
 * summation orders (and the CPU may fuse multiply-adds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner.h"
#include "model.h"
#include "nn.h"

#define TOL 1e-5

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float uniform(uint64_t *s) { /* [-1, 1) */
  return (float)((double)(rng_next(s) >> 40) * 0x1p-23 - 1.0);
}

/* max |a - b| / max(1, max |b|) over n values. */
static double rel_err(const float *a, const float *b, size_t n) {
  double diff = 0, scale = 1;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (isnan(d)) return INFINITY; /* an output never written (poisoned) */
    if (d > diff) diff = d;
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
  }
  return diff / scale;
}

typedef struct {
  const char *name;
  uint32_t n_layers;
  uint32_t sizes[5];
  uint32_t act[4];
  uint32_t batch;
} net_case_t;

static const net_case_t CASES[] = {
    {"cartpole dqn 4-64-64-2", 3, {4, 64, 64, 2}, {LRN_RELU, LRN_RELU, LRN_IDENTITY}, 64},
    {"pendulum actor 3-64-64-1 tanh", 3, {3, 64, 64, 1}, {LRN_RELU, LRN_RELU, LRN_TANH}, 37},
    {"hopper critic 14-256-256-1", 3, {14, 256, 256, 1}, {LRN_RELU, LRN_RELU, LRN_IDENTITY}, 256},
    {"tanh 5-32-32-32-4", 4, {5, 32, 32, 32, 4}, {LRN_TANH, LRN_TANH, LRN_RELU, LRN_IDENTITY}, 100},
    {"linear 7-3", 1, {7, 3}, {LRN_IDENTITY}, 9},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

static void to_specs(const net_case_t *c, lrn_shape_t *ks, rd_nn_spec_t *cs) {
  memset(ks, 0, sizeof *ks);
  memset(cs, 0, sizeof *cs);
  ks->n_layers = cs->n_layers = c->n_layers;
  for (uint32_t l = 0; l <= c->n_layers; l++) ks->sizes[l] = cs->sizes[l] = c->sizes[l];
  for (uint32_t l = 0; l < c->n_layers; l++) {
    ks->act[l] = c->act[l];
    cs->act[l] = (rd_nn_act_t)c->act[l];
  }
}

/* FW, BW and WA of every case, at DP 1..LRN_MAX_DP, against rd_mlp. */
static void test_matches_cpu_network(void **state) {
  (void)state;
  static lrn_acts_t acts;
  uint64_t seed = 0x1ea4;
  for (size_t k = 0; k < N_CASES; k++) {
    const net_case_t *c = &CASES[k];
    lrn_shape_t ks;
    rd_mlp_config_t cfg;
    rd_mlp_config_default(&cfg);
    to_specs(c, &ks, &cfg.spec);
    cfg.max_batch = c->batch;
    cfg.seed = 7 + k;
    rd_mlp_t m;
    rd_error_t err;
    assert_int_equal(rd_mlp_init(&m, &cfg, &err), RD_OK);
    const size_t np = lrn_n_params(&ks);
    assert_int_equal(np, rd_mlp_n_params(&m));
    /* Non-zero biases too (init leaves them 0). */
    float *params = rd_mlp_params(&m);
    for (size_t i = 0; i < np; i++) params[i] += 0.05f * uniform(&seed);

    const uint32_t B = c->batch, in = c->sizes[0], out = c->sizes[c->n_layers];
    float *x = malloc(sizeof(float) * B * in), *dy = malloc(sizeof(float) * B * out);
    float *y_cpu = malloc(sizeof(float) * B * out), *y_k = malloc(sizeof(float) * B * out);
    float *y_k1 = malloc(sizeof(float) * B * out);
    float *dx_cpu = malloc(sizeof(float) * B * in), *dx_k = malloc(sizeof(float) * B * in);
    float *g_k = malloc(sizeof(float) * np), *kp = malloc(sizeof(float) * np);
    assert_true(x && dy && y_cpu && y_k && y_k1 && dx_cpu && dx_k && g_k && kp);
    for (size_t i = 0; i < (size_t)B * in; i++) x[i] = 2.0f * uniform(&seed);
    for (size_t i = 0; i < (size_t)B * out; i++) dy[i] = uniform(&seed) / (float)B;
    memcpy(kp, params, np * sizeof(float));

    assert_int_equal(rd_mlp_forward(&m, B, x, y_cpu, &err), RD_OK);
    assert_int_equal(rd_mlp_backward(&m, dy, dx_cpu, &err), RD_OK);
    const float *g_cpu = rd_mlp_grads(&m);

    for (uint32_t dp = 1; dp <= LRN_MAX_DP; dp++) {
      /* Poison (NaN) whatever the kernel should write. */
      memset(&acts, 0xff, sizeof acts);
      memset(y_k, 0xff, sizeof(float) * B * out);
      memset(g_k, 0xff, sizeof(float) * np);
      memset(dx_k, 0xff, sizeof(float) * B * in);
      assert_int_equal(lrn_forward(&ks, kp, dp, B, x, y_k, &acts), LRN_OK);
      if (dp == 1)
        memcpy(y_k1, y_k, sizeof(float) * B * out);
      else /* a sample's forward does not depend on its pipeline */
        assert_memory_equal(y_k, y_k1, sizeof(float) * B * out);
      double ey = rel_err(y_k, y_cpu, (size_t)B * out);
      assert_int_equal(lrn_backward(&ks, kp, dp, &acts, dy, g_k, dx_k), LRN_OK);
      double eg = rel_err(g_k, g_cpu, np), ex = rel_err(dx_k, dx_cpu, (size_t)B * in);
      /* Per tensor, as documented: each layer's W and b on its own scale. */
      for (uint32_t l = 0, off = 0; l < c->n_layers; l++) {
        size_t nw = (size_t)c->sizes[l + 1] * c->sizes[l], nb = c->sizes[l + 1];
        double ew = rel_err(g_k + off, g_cpu + off, nw), eb = rel_err(g_k + off + nw, g_cpu + off + nw, nb);
        if (ew > TOL || eb > TOL)
          fail_msg("%s dp %u layer %u: dW error %.3g, db error %.3g", c->name, dp, l, ew, eb);
        off += (uint32_t)(nw + nb);
      }
      if (ey > TOL || eg > TOL || ex > TOL)
        fail_msg("%s dp %u: y error %.3g, grads %.3g, dx %.3g", c->name, dp, ey, eg, ex);
      if (dp == LRN_MAX_DP)
        printf("  %-32s B %3u: max rel. error y %.2e, grads %.2e, dx %.2e\n", c->name, B, ey, eg, ex);
    }
    /* WU (SGD): params -= lr * grads. */
    lrn_sgd(&ks, kp, g_k, 0.5f);
    for (size_t i = 0; i < np; i++) assert_true(kp[i] == params[i] - 0.5f * g_k[i]);

    free(x), free(dy), free(y_cpu), free(y_k), free(y_k1), free(dx_cpu), free(dx_k), free(g_k), free(kp);
    rd_mlp_free(&m);
  }
}

/* The kernel's chain is the model's: n = 3L stages in the model's order,
 * PI = ceil(B / DP) for the model's DP. */
static void test_structure_matches_model(void **state) {
  (void)state;
  rd_fpga_part_t part;
  rd_error_t err;
  assert_int_equal(rd_fpga_part_find("u200", RD_FPGA_PARTS_DIR, &part, &err), RD_OK);
  for (size_t k = 0; k < N_CASES; k++) {
    const net_case_t *c = &CASES[k];
    lrn_shape_t ks;
    rd_fpga_workload_t w;
    rd_fpga_workload_default(&w);
    w.algo = RD_FPGA_DQN;
    w.batch = c->batch;
    to_specs(c, &ks, &w.net[0]);
    rd_fpga_learner_est_t e;
    int rc = rd_fpga_model_learner(&part, &w, &e, &err);
    if (rc != RD_OK) fail_msg("%s: %s", c->name, err.msg);
    assert_int_equal(e.n, LRN_CHAIN_STAGES(c->n_layers));
    uint32_t chain = 0;
    for (uint32_t i = 0; i < e.n_tus; i++) {
      if (!e.tu[i].chain) continue;
      char label[16];
      lrn_stage_label(c->n_layers, e.tu[i].depth - 1, label, sizeof label);
      assert_string_equal(e.tu[i].label, label);
      chain++;
    }
    assert_int_equal(chain, e.n);
    assert_int_equal(e.pi, lrn_pi(c->batch, e.dp));
  }
}

static void test_errors(void **state) {
  (void)state;
  static lrn_acts_t acts;
  float x[4] = {0}, g[64], p[64] = {0};
  lrn_shape_t s = {1, {2, 2}, {LRN_IDENTITY}};
  assert_int_equal(lrn_forward(&s, p, 0, 1, x, NULL, &acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, LRN_MAX_DP + 1, 1, x, NULL, &acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, 1, 0, x, NULL, &acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, 1, LRN_MAX_BATCH + 1, x, NULL, &acts), LRN_EINVAL);
  lrn_shape_t bad = s;
  bad.sizes[1] = LRN_MAX_WIDTH + 1;
  assert_int_equal(lrn_shape_check(&bad), LRN_EINVAL);
  bad = s;
  bad.act[0] = 9;
  assert_int_equal(lrn_shape_check(&bad), LRN_EINVAL);
  bad = s;
  bad.n_layers = 0;
  assert_int_equal(lrn_forward(&bad, p, 1, 1, x, NULL, &acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, 1, 2, x, NULL, &acts), LRN_OK);
  assert_int_equal(lrn_backward(&s, p, 0, &acts, x, g, NULL), LRN_EINVAL);
  assert_int_equal(lrn_backward(&s, p, 1, &acts, x, g, NULL), LRN_OK);
}

static void test_stage_labels(void **state) {
  (void)state;
  static const char *L3[] = {"FW0", "FW1", "FW2", "LOSS", "BW2", "BW1", "WA0", "WA1", "WA2"};
  char b[16];
  for (uint32_t i = 0; i < 9; i++) {
    lrn_stage_label(3, i, b, sizeof b);
    assert_string_equal(b, L3[i]);
  }
  assert_int_equal(lrn_pi(256, 3), 86);
  assert_int_equal(lrn_pi(256, 2), 128);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_cpu_network),
      cmocka_unit_test(test_structure_matches_model),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_stage_labels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
