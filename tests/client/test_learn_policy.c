/* test_learn_policy.c - the client's policy forward pass
 * (clients/c/rdc_policy.c) against the daemon's MLP (backends/cpu/nn.c):
 * the same weights, saved by rd_mlp_save into the flat RDNN format, loaded
 * by rdc_policy_load, must give the same outputs on random inputs; and the
 * client's parser must refuse every malformed buffer that the daemon's
 * parser (rd_nn_flat_parse) refuses, leaving the loaded policy intact. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn.h"
#include "rd_le.h"
#include "rd_nn_spec.h"
#include "rdt_learner.h"
#include "replayd_client.h"
#include "rdt_main.h"

/* xorshift for inputs and biases (the weights come from rd_mlp_init). */
static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double uniform(double lo, double hi) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1.0p-53;
}

/* Build a daemon network with random weights and biases, serialize it. */
static uint8_t *make_net(const rd_nn_spec_t *s, uint64_t seed, uint32_t batch, rd_mlp_t *m,
                         size_t *len) {
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  c.spec = *s;
  c.max_batch = batch;
  c.seed = seed;
  c.inference_only = 1;
  rd_error_t e;
  if (rd_mlp_init(m, &c, &e) != RD_OK) fail_msg("rd_mlp_init: %s", e.msg);
  /* Non-zero biases, so a reader that skips or misplaces them is caught. */
  for (uint32_t l = 0; l < s->n_layers; l++)
    for (uint32_t o = 0; o < s->sizes[l + 1]; o++) m->params[m->b_off[l] + o] = (float)uniform(-0.5, 0.5);
  size_t n = rd_nn_flat_bytes(s);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  if (rd_mlp_save(m, buf, n, len, &e) != RD_OK) fail_msg("rd_mlp_save: %s", e.msg);
  assert_int_equal(*len, n);
  return buf;
}

/* Both forward passes over `batch` random inputs; the largest relative
 * difference. An output's error is measured against max(|daemon output|,
 * 0.1 * that output's largest magnitude over the batch): the daemon sums in
 * float (errors ~1e-7 of the terms' size), so an output that cancels to
 * near zero would otherwise turn ordinary float rounding into a huge
 * "relative" error; everywhere else this is the plain relative error. */
static double compare(const rd_nn_spec_t *s, uint64_t seed, uint32_t batch, double in_scale) {
  rd_mlp_t m;
  size_t len;
  uint8_t *buf = make_net(s, seed, batch, &m, &len);
  rdc_policy_t p;
  rdc_policy_init(&p);
  rdc_error_t e;
  assert_int_equal(rdc_policy_load(&p, buf, len, &e), RDC_OK);
  assert_int_equal(e.code, RDC_OK);
  const uint32_t in = s->sizes[0], out = s->sizes[s->n_layers];
  assert_int_equal(rdc_policy_inputs(&p), in);
  assert_int_equal(rdc_policy_outputs(&p), out);
  assert_int_equal(p.n_params, rd_nn_spec_params(s));

  float *x = malloc((size_t)batch * in * sizeof *x), *y_ref = malloc((size_t)batch * out * 4);
  float *y = malloc((size_t)out * sizeof *y);
  for (size_t i = 0; i < (size_t)batch * in; i++) x[i] = (float)uniform(-in_scale, in_scale);
  rd_error_t re;
  assert_int_equal(rd_mlp_forward(&m, batch, x, y_ref, &re), RD_OK);
  double scale[1024] = {0};
  assert_true(out <= 1024);
  for (size_t i = 0; i < (size_t)batch * out; i++)
    scale[i % out] = fmax(scale[i % out], fabs(y_ref[i]));
  double worst = 0;
  for (uint32_t b = 0; b < batch; b++) {
    memset(y, 0xff, (size_t)out * sizeof *y); /* NaN: every output must be written */
    assert_int_equal(rdc_policy_forward(&p, x + (size_t)b * in, y), RDC_OK);
    for (uint32_t j = 0; j < out; j++) {
      double ref = y_ref[(size_t)b * out + j];
      assert_true(isfinite(y[j]));
      assert_true(scale[j] > 0);
      double rel = fabs(y[j] - ref) / fmax(fabs(ref), 0.1 * scale[j]);
      if (rel > worst) worst = rel;
    }
  }
  free(x);
  free(y_ref);
  free(y);
  free(buf);
  rdc_policy_free(&p);
  assert_int_equal(p.n_layers, 0);
  assert_null(p.params);
  rd_mlp_free(&m);
  return worst;
}

/* compare() on the net of n_layers layers sizes/act: at most 1e-5 apart. */
static void expect_match(const char *what, uint32_t n_layers, const uint32_t *sizes,
                         const rd_nn_act_t *act, uint64_t seed, uint32_t batch, double in_scale) {
  rd_nn_spec_t s = rdt_nn_spec(n_layers, sizes, act);
  double w = compare(&s, seed, batch, in_scale);
  if (w > 1e-5) fail_msg("%s: worst relative difference %g", what, w);
}

static void test_matches_daemon_relu(void **state) {
  (void)state;
  /* DQN CartPole: 4 -> 64 -> 64 -> 2, relu hidden, identity out. */
  const uint32_t sz[] = {4, 64, 64, 2};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_RELU, RD_NN_IDENTITY};
  expect_match("relu net", 3, sz, act, 1, 512, 3.0);
}

static void test_matches_daemon_tanh(void **state) {
  (void)state;
  /* DDPG actor: 3 -> 128 -> 128 -> 1 with tanh everywhere (tanh hidden
   * activation and the actor's tanh output). */
  const uint32_t sz[] = {3, 128, 128, 1};
  const rd_nn_act_t act[] = {RD_NN_TANH, RD_NN_TANH, RD_NN_TANH};
  expect_match("tanh net", 3, sz, act, 2, 512, 2.0);
}

static void test_matches_daemon_identity(void **state) {
  (void)state;
  /* Linear layers only, and a single-layer net (no hidden layer). */
  const uint32_t sz[] = {17, 9, 5};
  const rd_nn_act_t act[] = {RD_NN_IDENTITY, RD_NN_IDENTITY};
  expect_match("identity net", 2, sz, act, 3, 256, 1.0);
  const uint32_t sz1[] = {6, 3};
  const rd_nn_act_t act1[] = {RD_NN_IDENTITY};
  expect_match("one-layer net", 1, sz1, act1, 4, 64, 1.0);
}

static void test_matches_daemon_deep_mixed(void **state) {
  (void)state;
  /* Odd widths (no multiple of any vector length) and every activation,
   * deeper than two scratch buffers. */
  const uint32_t sz[] = {7, 33, 65, 31, 19, 3};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_TANH, RD_NN_RELU, RD_NN_IDENTITY, RD_NN_TANH};
  rd_nn_spec_t s = rdt_nn_spec(5, sz, act);
  /* Five layers of float activations on the daemon's side compound its
   * rounding: about 7e-6 here with every GEMM variant (generic, AVX2,
   * AVX-512), so this net gets twice the shallow nets' 1e-5. */
  double w = compare(&s, 5, 300, 2.0);
  if (w > 2e-5) fail_msg("deep net: worst relative difference %g", w);
}

/* A valid buffer to corrupt: 2 -> 3 -> 1, relu then identity. */
static size_t small_net(uint8_t *buf, size_t cap) {
  const uint32_t sz[] = {2, 3, 1};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(2, sz, act);
  float params[13];
  for (int i = 0; i < 13; i++) params[i] = (float)(i + 1) * 0.25f;
  size_t len;
  assert_int_equal(rd_nn_flat_write(&s, params, buf, cap, &len, NULL), RD_OK);
  assert_int_equal(len, 12 + 4 * 3 + 4 * 2 + 4 * 13);
  return len;
}

/* Both parsers refuse; the client's message mentions `word`; p unchanged. */
static void refused(rdc_policy_t *p, const uint8_t *buf, size_t len, const char *word) {
  rd_nn_spec_t s;
  assert_int_not_equal(rd_nn_flat_parse(buf, len, &s, NULL, 0, NULL), RD_OK);
  float *before = p->params;
  uint32_t layers = p->n_layers;
  rdc_error_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(rdc_policy_load(p, buf, len, &e), RDC_EINVAL);
  assert_int_equal(e.code, RDC_EINVAL);
  if (strstr(e.msg, word) == NULL) fail_msg("message \"%s\" does not mention \"%s\"", e.msg, word);
  assert_ptr_equal(p->params, before);
  assert_int_equal(p->n_layers, layers);
  /* The old weights still work: x = (1, 1) through the small net. */
  float x[2] = {1, 1}, y;
  assert_int_equal(rdc_policy_forward(p, x, &y), RDC_OK);
  /* h_o = relu(W0[o] . x + b0[o]); W0 = [[.25 .5] [.75 1] [1.25 1.5]],
   * b0 = [1.75 2 2.25] -> h = [2.5, 3.75, 5]; W1 = [2.5 2.75 3], b1 = 3.25:
   * y = 6.25 + 10.3125 + 15 + 3.25 = 34.8125 */
  assert_true(y == 34.8125f);
}

static void test_malformed_buffers(void **state) {
  (void)state;
  uint8_t good[256], bad[sizeof good + 8];
  size_t len = small_net(good, sizeof good);
  rdc_policy_t p;
  rdc_policy_init(&p);
  rdc_error_t e;
  assert_int_equal(rdc_policy_load(&p, good, len, &e), RDC_OK);

  refused(&p, good, 0, "shorter");
  refused(&p, good, 11, "shorter");
  assert_int_equal(rdc_policy_load(&p, NULL, 100, &e), RDC_EINVAL);
#define CORRUPT(off, val, word)                                                                \
  do {                                                                                         \
    memcpy(bad, good, len);                                                                    \
    rd_le_put32(bad + (off), (val));                                                         \
    refused(&p, bad, len, word);                                                               \
  } while (0)
  CORRUPT(0, 0x4E4E4453u, "magic");
  CORRUPT(4, 2, "version");
  CORRUPT(8, 0, "layers");
  CORRUPT(8, 17, "layers");
  CORRUPT(8, 40, "layers");
  CORRUPT(12, 0, "size");      /* input size 0 */
  CORRUPT(16, 65537, "size");  /* hidden size above the limit */
  CORRUPT(24, 3, "activation"); /* act[0] = 3 */
  CORRUPT(28, 0xffffffffu, "activation");
  /* Sizes within limits but 65536 x 65536 parameters: above 2^26. */
  memcpy(bad, good, len);
  rd_le_put32(bad + 12, 65536);
  rd_le_put32(bad + 16, 65536);
  refused(&p, bad, len, "parameters");
  /* Sizes that need more parameters than the buffer has. */
  CORRUPT(16, 4, "truncated");
  refused(&p, good, len - 1, "truncated");
  refused(&p, good, 20, "truncated"); /* inside the header */
  memcpy(bad, good, len);
  bad[len] = 0;
  refused(&p, bad, len + 1, "trailing");
  /* Non-finite parameters: a weight (layer 0, [1][0]) and a bias (layer 1). */
  const size_t params_off = 12 + 12 + 8;
  memcpy(bad, good, len);
  float nan = NAN, inf = INFINITY;
  memcpy(bad + params_off + 4 * 2, &nan, 4);
  refused(&p, bad, len, "layer 0 weight [1][0]");
  memcpy(bad, good, len);
  memcpy(bad + params_off + 4 * 12, &inf, 4);
  refused(&p, bad, len, "layer 1 bias [0]");
  rdc_policy_free(&p);
}

static void test_reload_and_unloaded(void **state) {
  (void)state;
  rdc_policy_t p;
  rdc_policy_init(&p);
  float x[8] = {0}, y[8];
  assert_int_equal(rdc_policy_forward(&p, x, y), RDC_EINVAL);
  assert_int_equal(rdc_policy_forward(NULL, x, y), RDC_EINVAL);
  assert_int_equal(rdc_policy_inputs(&p), 0);
  assert_int_equal(rdc_policy_load(NULL, x, 8, NULL), RDC_EINVAL);
  rdc_policy_free(&p); /* unloaded: no-op */
  rdc_policy_free(NULL);

  uint8_t buf[256];
  size_t len = small_net(buf, sizeof buf);
  assert_int_equal(rdc_policy_load(&p, buf, len, NULL), RDC_OK);
  float *block = p.params;
  /* Same shape again (new weights): the block is reused. */
  float params[13];
  for (int i = 0; i < 13; i++) params[i] = -0.5f;
  const uint32_t sz[] = {2, 3, 1};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(2, sz, act);
  assert_int_equal(rd_nn_flat_write(&s, params, buf, sizeof buf, &len, NULL), RD_OK);
  assert_int_equal(rdc_policy_load(&p, buf, len, NULL), RDC_OK);
  assert_ptr_equal(p.params, block);
  x[0] = x[1] = 1;
  assert_int_equal(rdc_policy_forward(&p, x, y), RDC_OK);
  /* hidden relu(-1.5) = 0, output = bias = -0.5 */
  assert_true(y[0] == -0.5f);

  /* A bigger network replaces it. */
  rd_mlp_t m;
  const uint32_t sz2[] = {8, 40, 8};
  const rd_nn_act_t act2[] = {RD_NN_TANH, RD_NN_IDENTITY};
  rd_nn_spec_t s2 = rdt_nn_spec(2, sz2, act2);
  size_t len2;
  uint8_t *big = make_net(&s2, 9, 1, &m, &len2);
  assert_int_equal(rdc_policy_load(&p, big, len2, NULL), RDC_OK);
  assert_int_equal(rdc_policy_inputs(&p), 8);
  assert_int_equal(rdc_policy_outputs(&p), 8);
  for (int i = 0; i < 8; i++) x[i] = 0.1f * (float)i;
  float ref[8];
  assert_int_equal(rd_mlp_forward(&m, 1, x, ref, NULL), RD_OK);
  assert_int_equal(rdc_policy_forward(&p, x, y), RDC_OK);
  for (int i = 0; i < 8; i++) assert_true(fabs(y[i] - ref[i]) <= 1e-5 * fmax(1, fabs(ref[i])));
  free(big);
  rd_mlp_free(&m);
  rdc_policy_free(&p);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_matches_daemon_relu),     cmocka_unit_test(test_matches_daemon_tanh),
         cmocka_unit_test(test_matches_daemon_identity), cmocka_unit_test(test_matches_daemon_deep_mixed),
         cmocka_unit_test(test_malformed_buffers),       cmocka_unit_test(test_reload_and_unloaded))
