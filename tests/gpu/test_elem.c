/* test_elem.c - the GPU learner's per-element arithmetic
 * (backends/gpu/rd_gpu_elem.h), built by the host compiler, against the CPU
 * backend's own functions on the same inputs, bit for bit. Host only: runs
 * in every build, with or without CUDA or a GPU.
 *
 * What each case compares with (all results compared as bit patterns):
 *   adam         rd_mlp_adam_step (nn.c, the "generic" SSE2 variant, pinned
 *                with RD_NN_ISA=generic: the AVX2 / AVX-512 variants are
 *                compiled with FMA and may contract; the test prints whether
 *                the variant this CPU picks by default agrees too) over 3
 *                steps, parameters, both moments;
 *   huber, mse   rd_nn_huber / rd_nn_mse (nn.c) with dim 1 and IS weights:
 *                dL/dy per sample, and the loss as sum(term) * inv summed
 *                in sample order as the CPU does;
 *   clip         rd_mlp_clip_grad_norm (nn.c): the scaled gradients from
 *                rd_ge_clip_scale(max, rd_mlp_grad_norm);
 *   polyak       rd_mlp_polyak (nn.c);
 *   activations  rd_mlp_forward of a one-layer network (in 1, x = 1, b = 0,
 *                so the product is W exactly) with relu and tanh outputs:
 *                rd_ge_bias_act; rd_mlp_backward of the same network with
 *                batch 1: its bias gradient is the output's dz = act_grad
 *                (nn.c act_grad), compared with rd_ge_act_grad;
 *   targets      rd_ge_target, rd_ge_argmax, rd_ge_action_from_tanh,
 *                rd_ge_td_abs: learner.c computes these inline in static
 *                functions, so they are checked against its expressions as
 *                documented there (dqn_shard, critic_input_from_policy,
 *                td_stats), written out in this file.
 * A planted error (one Adam constant one ulp off) must be caught, so the
 * comparison itself is shown able to fail.
 *
 * The device build of the same functions is checked against this host
 * build on a GPU by tests/gpu/check_learner.cu.
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
#include "nn.h"
#include "rd_gpu_elem.h"
#include "rd_rng.h"
#include "rdt_rand.h"
#include "rdt_main.h"


static float unit(uint64_t *s) { return (float)rd_rng_unit(s); }

static uint32_t fbits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static uint64_t dbits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Index of the first bitwise difference, or n. */
static size_t first_diff(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fbits(a[i]) != fbits(b[i])) return i;
  return n;
}

/* A trainable network of one layer in x out; force the generic ISA if asked. */
static void make_net(rd_mlp_t *m, uint32_t in, uint32_t out, rd_nn_act_t act, int trainable) {
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  c.spec.n_layers = 1;
  c.spec.sizes[0] = in;
  c.spec.sizes[1] = out;
  c.spec.act[0] = act;
  c.max_batch = 4;
  c.inference_only = !trainable;
  rd_error_t err;
  assert_int_equal(rd_mlp_init(m, &c, &err), RD_OK);
}

static int generic_isa(void) { return setenv("RD_NN_ISA", "generic", 1) == 0; }

/* Run 3 Adam steps on the CPU network and with rd_ge_adam; 0 if identical.
 * plant: make the rd_ge side's step size one ulp off at step 1. */
static size_t adam_mismatch(int plant, const char **isa) {
  rd_mlp_t m;
  make_net(&m, 97, 103, RD_NN_IDENTITY, 1); /* 10088 parameters: not a multiple of 16 */
  *isa = rd_mlp_isa(&m);
  const size_t n = rd_mlp_n_params(&m);
  float *p = malloc(n * sizeof *p), *mm = calloc(n, sizeof *mm), *vv = calloc(n, sizeof *vv);
  float *g = malloc(n * sizeof *g);
  uint64_t s = 42;
  for (size_t i = 0; i < n; i++) p[i] = m.params[i] = rdt_wide_float(&s);
  rd_adam_config_t ac;
  rd_adam_config_default(&ac);
  const double lrs[3] = {1e-3, 3e-4, 0.5};
  rd_error_t err;
  for (int t = 1; t <= 3; t++) {
    /* Every 7th gradient just above FLT_MIN: its m falls below it (nn.h: kept as 0). */
    for (size_t i = 0; i < n; i++) g[i] = m.grads[i] = i % 7 ? rdt_wide_float(&s) : 3e-38f;
    ac.lr = lrs[t - 1];
    assert_int_equal(rd_mlp_adam_step(&m, &ac, &err), RD_OK);
    rd_ge_adam_coef_t k = rd_ge_adam_coef(ac.lr, ac.beta1, ac.beta2, ac.eps, (uint64_t)t);
    if (plant && t == 1) k.step = nextafterf(k.step, 1.0f); /* one ulp off in one constant */
    for (size_t i = 0; i < n; i++) rd_ge_adam(&p[i], &mm[i], &vv[i], g[i], &k);
  }
  size_t d = first_diff(p, m.params, n);
  if (d == n) d = first_diff(mm, m.adam_m, n);
  if (d == n) d = first_diff(vv, m.adam_v, n);
  if (d < n && !plant)
    printf("# Adam (%s) first difference at %zu: p %a / %a, m %a / %a, v %a / %a\n", *isa, d,
           (double)p[d], (double)m.params[d], (double)mm[d], (double)m.adam_m[d], (double)vv[d],
           (double)m.adam_v[d]);
  rd_mlp_free(&m);
  free(p), free(mm), free(vv), free(g);
  return d == n ? 0 : d + 1;
}

static void test_adam(void **state) {
  (void)state;
  const char *isa;
  unsetenv("RD_NN_ISA");
  size_t dflt = adam_mismatch(0, &isa);
  printf("# Adam vs the default CPU variant (%s): %s\n", isa,
         dflt ? "differs (FMA contraction; not required)" : "bit-identical");
  assert_true(generic_isa());
  assert_int_equal(adam_mismatch(0, &isa), 0);
  assert_string_equal(isa, "generic");
  /* The comparison catches a one-ulp difference in one parameter. */
  assert_int_not_equal(adam_mismatch(1, &isa), 0);
  unsetenv("RD_NN_ISA");
}

static void test_losses(void **state) {
  (void)state;
  enum { N = 4099 };
  float *y = malloc(N * sizeof *y), *t = malloc(N * sizeof *t), *w = malloc(N * sizeof *w);
  float *dy = malloc(N * sizeof *dy), *gy = malloc(N * sizeof *gy);
  uint64_t s = 7;
  for (size_t i = 0; i < N; i++) {
    y[i] = rdt_wide_float(&s) * 1e5f;
    t[i] = (i % 3 == 0) ? y[i] + (unit(&s) - 0.5f) : rdt_wide_float(&s) * 1e5f; /* both Huber branches */
    w[i] = (i % 17 == 0) ? 0.0f : unit(&s) * 2.0f;
  }
  rd_error_t err;
  const double inv = 1.0 / (double)N;
  for (int wt = 0; wt < 2; wt++) {
    const float *wp = wt ? w : NULL;
    for (int kind = 0; kind < 2; kind++) {
      double loss, sum = 0.0;
      const double delta = 0.75;
      if (kind == 0)
        assert_int_equal(rd_nn_huber(N, 1, y, t, wp, delta, dy, &loss, &err), RD_OK);
      else
        assert_int_equal(rd_nn_mse(N, 1, y, t, wp, dy, &loss, &err), RD_OK);
      for (size_t i = 0; i < N; i++) {
        float wi = wp ? wp[i] : 1.0f;
        sum += kind == 0 ? rd_ge_huber(y[i], t[i], wi, inv, delta, &gy[i])
                         : rd_ge_mse(y[i], t[i], wi, inv, &gy[i]);
      }
      assert_int_equal(first_diff(gy, dy, N), N);
      assert_true(dbits(sum * inv) == dbits(loss));
    }
  }
  free(y), free(t), free(w), free(dy), free(gy);
}

/* An identity net of make_net(in, out) with gradients of a wide spread
 * (seed, times scale), and a copy of them the caller frees; *n parameters. */
static float *net_with_grads(rd_mlp_t *m, uint32_t in, uint32_t out, uint64_t seed, float scale,
                             size_t *n) {
  make_net(m, in, out, RD_NN_IDENTITY, 1);
  *n = rd_mlp_n_params(m);
  float *g = malloc(*n * sizeof *g);
  uint64_t s = seed;
  for (size_t i = 0; i < *n; i++) g[i] = m->grads[i] = rdt_wide_float(&s) * scale;
  return g;
}

static void test_clip(void **state) {
  (void)state;
  rd_mlp_t m;
  size_t n;
  float *g = net_with_grads(&m, 61, 67, 9, 50.0f, &n);
  double nrm = rd_mlp_grad_norm(&m), got;
  const double max = nrm / 3.0;
  rd_error_t err;
  assert_int_equal(rd_mlp_clip_grad_norm(&m, max, &got, &err), RD_OK);
  assert_true(dbits(got) == dbits(nrm));
  const float sc = rd_ge_clip_scale(max, nrm);
  for (size_t i = 0; i < n; i++) g[i] = g[i] * sc;
  assert_int_equal(first_diff(g, m.grads, n), n);
  rd_mlp_free(&m);
  free(g);
}

static void test_polyak(void **state) {
  (void)state;
  rd_mlp_t a, b;
  make_net(&a, 33, 35, RD_NN_IDENTITY, 0);
  make_net(&b, 33, 35, RD_NN_IDENTITY, 0);
  const size_t n = rd_mlp_n_params(&a);
  float *d = malloc(n * sizeof *d);
  uint64_t s = 11;
  const double taus[] = {0.005, 0.3, 1.0};
  rd_error_t err;
  for (size_t k = 0; k < 3; k++) {
    for (size_t i = 0; i < n; i++) {
      a.params[i] = rdt_wide_float(&s);
      d[i] = b.params[i] = rdt_wide_float(&s);
    }
    assert_int_equal(rd_mlp_polyak(&b, &a, taus[k], &err), RD_OK);
    const float t = (float)taus[k], keep = (float)(1.0 - taus[k]);
    for (size_t i = 0; i < n; i++) d[i] = rd_ge_polyak(d[i], a.params[i], t, keep);
    assert_int_equal(first_diff(d, b.params, n), n);
  }
  rd_mlp_free(&a), rd_mlp_free(&b);
  free(d);
}

/* Forward and output-gradient of a 1 -> out layer with activation act. */
static void check_activation(rd_nn_act_t act) {
  enum { OUT = 3001 };
  rd_mlp_t m;
  make_net(&m, 1, OUT, act, 1);
  uint64_t s = 13 + (uint64_t)act;
  for (size_t j = 0; j < OUT; j++) m.params[j] = (j % 50 == 0) ? 0.0f : rdt_wide_float(&s) * 1e4f;
  for (size_t j = 0; j < OUT; j++) m.params[OUT + j] = 0.0f; /* bias */
  const float x = 1.0f;
  float *y = malloc(OUT * sizeof *y), *da = malloc(OUT * sizeof *da);
  rd_error_t err;
  assert_int_equal(rd_mlp_forward(&m, 1, &x, y, &err), RD_OK);
  for (size_t j = 0; j < OUT; j++) {
    float want = rd_ge_bias_act(m.params[j], 0.0f, (int)act);
    assert_true(fbits(want) == fbits(y[j]));
  }
  for (size_t j = 0; j < OUT; j++) da[j] = rdt_wide_float(&s);
  assert_int_equal(rd_mlp_backward(&m, da, NULL, &err), RD_OK);
  const float *db = m.grads + OUT; /* bias gradient: dz of the one row */
  for (size_t j = 0; j < OUT; j++) {
    /* db = 0 + dz (col_sums starts from zero), which turns -0 into +0. */
    float want = 0.0f + rd_ge_act_grad(y[j], da[j], (int)act);
    if (fbits(want) != fbits(db[j]))
      fail_msg("act %d unit %zu: a %a da %a: %a, CPU %a", (int)act, j, (double)y[j],
               (double)da[j], (double)want, (double)db[j]);
  }
  rd_mlp_free(&m);
  free(y), free(da);
}

static void test_activations(void **state) {
  (void)state;
  check_activation(RD_NN_RELU);
  check_activation(RD_NN_TANH);
  check_activation(RD_NN_IDENTITY);
}

/* learner.c's inline expressions (dqn_shard, critic_input_from_policy,
 * td_stats, ddpg_shard), written out as that file has them. */
static void test_targets(void **state) {
  (void)state;
  uint64_t s = 17;
  for (int i = 0; i < 100000; i++) {
    float r = rdt_wide_float(&s) * 100.0f, d = unit(&s), q = rdt_wide_float(&s) * 1e3f;
    float want = r + d * q; /* dqn_shard: b.reward[i] + b.discount[i] * qn_t[...] */
    assert_true(fbits(rd_ge_target(r, d, q)) == fbits(want));
    float lo = -unit(&s) * 3.0f, hi = unit(&s) * 3.0f + 0.1f, yv = unit(&s) * 2.0f - 1.0f;
    float range = hi - lo;
    float a = lo + (yv + 1.0f) * 0.5f * range; /* critic_input_from_policy */
    assert_true(fbits(rd_ge_action_from_tanh(yv, lo, range)) == fbits(a));
    float dx = rdt_wide_float(&s), half = 0.5f * (hi - lo);
    assert_true(fbits(rd_ge_dmu(dx, half)) == fbits(dx * half)); /* ddpg_shard */
    assert_true(fbits(rd_ge_td_abs(q, r)) == fbits(fabsf(q - r))); /* td_stats */
  }
  const float row[] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  assert_int_equal(rd_ge_argmax(row, 5), 1); /* first of equal maxima, as torch.argmax */
  assert_true(rd_ge_rowmax(row, 5) == 3.0f);
  const float neg[] = {-5.0f, -1.0f};
  assert_int_equal(rd_ge_argmax(neg, 2), 1);
}


/* ---- what a step composes from these, against the CPU learner ---- */

/* k_stats's sums (rd_ge_stats_fold) against learner.c's, which add in
 * sample order: the same to rounding, the same max and NaN, at batches
 * below, at and above the block's 512 threads (and the CPU's shards). */
static void test_step_stats(void **state) {
  (void)state;
  const size_t ns[] = {1, 7, 256, 257, 512, 513, 1024, 4099};
  uint64_t s = 23;
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
    for (int with_nan = 0; with_nan < 2; with_nan++) {
      const size_t n = ns[k];
      double *elem = malloc(n * sizeof *elem);
      float *td = malloc(n * sizeof *td), *q = malloc(n * sizeof *q);
      double l = 0, a = 0, qs = 0, mx = 0;
      for (size_t i = 0; i < n; i++) {
        elem[i] = (double)rdt_wide_float(&s) * rdt_wide_float(&s);
        td[i] = fabsf(rdt_wide_float(&s)) * 100.0f;
        q[i] = rdt_wide_float(&s);
        if (with_nan && i == n / 2) td[i] = NAN;
      }
      for (size_t i = 0; i < n; i++) { /* learner.c: td_stats, the loss and Q sums */
        l += elem[i], a += td[i], qs += q[i];
        if (td[i] > mx || isnan(td[i])) mx = td[i];
      }
      rd_ge_stats_t st = rd_ge_stats_fold(n, elem, td, q);
      const double gmax = st.nan ? (double)NAN : st.max;
      assert_true(fabs(st.loss - l) <= 1e-12 * fabs(l) + 1e-300);
      assert_true(fabs(st.q - qs) <= 1e-12 * fabs(qs) + 1e-300);
      if (with_nan) {
        assert_true(isnan(gmax) && isnan(mx) && isnan(st.td));
      } else {
        assert_true(fabs(st.td - a) <= 1e-12 * a);
        assert_true(dbits(gmax) == dbits(mx)); /* the max does not depend on the order */
      }
      free(elem), free(td), free(q);
    }
}

/* rd_ge_finalize (k_finalize) against the CPU's clip (learner.c
 * check_and_clip): grad_clip 0 never clips and never scales; a norm above
 * a positive clip scales the gradients to the CPU's bits; non-finite
 * figures stop the step. */
static void test_finalize_and_clip(void **state) {
  (void)state;
  rd_mlp_t m;
  size_t n;
  float *g = net_with_grads(&m, 29, 31, 31, 40.0f, &n);
  const double nrm = rd_mlp_grad_norm(&m), sumsq[2] = {nrm * nrm, 4.0};
  double norm[2];
  int clipped[2];
  float scale[2];
  /* grad_clip 0: the CPU only takes the norm. */
  assert_int_equal(rd_ge_finalize(1.5, 0.0, 0, 1, sumsq, 0.0, norm, clipped, scale), 1);
  assert_int_equal(clipped[0], 0);
  assert_true(scale[0] == 1.0f);
  assert_true(fabs(norm[0] - nrm) <= 1e-12 * nrm);
  /* A clip below the norm: the CPU's factor, applied as k_adam does. */
  rd_error_t err;
  const double clip = nrm / 4.0;
  assert_int_equal(rd_ge_finalize(1.5, 2.0, 1, 2, sumsq, clip, norm, clipped, scale), 1);
  assert_int_equal(clipped[0], 1);
  assert_int_equal(clipped[1], 0); /* norm 2 < clip */
  double got;
  assert_int_equal(rd_mlp_clip_grad_norm(&m, clip, &got, &err), RD_OK);
  for (size_t i = 0; i < n; i++) g[i] = rd_ge_fmul(g[i], scale[0]);
  assert_int_equal(first_diff(g, m.grads, n), n);
  /* A clip above the norm: nothing. */
  assert_int_equal(rd_ge_finalize(1.5, 0.0, 0, 1, sumsq, nrm * 2, norm, clipped, scale), 1);
  assert_int_equal(clipped[0], 0);
  /* Non-finite: the loss, DDPG's Q sum (DQN ignores it), a norm. */
  const double bad[1] = {INFINITY};
  assert_int_equal(rd_ge_finalize(NAN, 0.0, 0, 1, sumsq, 0.0, norm, clipped, scale), 0);
  assert_int_equal(rd_ge_finalize(1.0, INFINITY, 1, 1, sumsq, 0.0, norm, clipped, scale), 0);
  assert_int_equal(rd_ge_finalize(1.0, INFINITY, 0, 1, sumsq, 0.0, norm, clipped, scale), 1);
  assert_int_equal(rd_ge_finalize(1.0, 0.0, 0, 1, bad, 10.0, norm, clipped, scale), 0);
  rd_mlp_free(&m);
  free(g);
}

/* A DQN learner on the CPU with hard target copies: its target equals its
 * network exactly after the steps rd_ge_copies_target names, never
 * between (Adam moves the network every step), and never with Polyak. */
static void test_hard_copy_schedule(void **state) {
  (void)state;
  for (uint32_t period = 0; period <= 3; period += 3) {
    rd_learner_config_t c;
    rd_learner_config_default(&c);
    c.obs_dim = 3, c.num_actions = 2, c.n_hidden = 1, c.hidden[0] = 8;
    c.hidden_act = RD_NN_TANH, c.grad_clip = 0, c.double_dqn = 0;
    c.target_period = period, c.max_batch = 16, c.seed = 5;
    rd_learner_t l;
    rd_error_t err;
    assert_int_equal(rd_learner_init(&l, &c, &err), RD_OK);
    float obs[16 * 3], next[16 * 3], r[16], d[16];
    int32_t a[16];
    uint64_t s = 41;
    for (uint64_t t = 1; t <= 7; t++) {
      for (int i = 0; i < 48; i++) obs[i] = rdt_wide_float(&s) * 1e4f, next[i] = rdt_wide_float(&s) * 1e4f;
      for (int i = 0; i < 16; i++) r[i] = unit(&s), d[i] = 0.99f, a[i] = (int32_t)(i % 2);
      rd_batch_t b = {.n = 16, .obs = obs, .action_i = a, .reward = r, .discount = d,
                      .next_obs = next};
      assert_int_equal(rd_learner_step(&l, &b, NULL, NULL, &err), RD_OK);
      const size_t n = l.net[0].n_params;
      int same = memcmp(l.net[0].params, l.net[1].params, n * sizeof(float)) == 0;
      if (same != rd_ge_copies_target(period, t))
        fail_msg("period %u step %llu: target %s the network", period, (unsigned long long)t,
                 same ? "equals" : "differs from");
    }
    rd_learner_free(&l);
  }
}

/* Plain DQN's target (rd_ge_rowmax) against learner.c dqn_shard's plain
 * branch, and double DQN's choice (rd_ge_argmax) against its double
 * branch, written out as that file has them, on rows with ties, zeros of
 * both signs and infinities. */
static void test_dqn_targets(void **state) {
  (void)state;
  uint64_t s = 43;
  float row[9];
  for (int it = 0; it < 20000; it++) {
    const uint32_t A = 2 + (uint32_t)(rd_splitmix64(&s) % 8);
    for (uint32_t k = 0; k < A; k++) {
      uint64_t u = rd_splitmix64(&s) % 16;
      row[k] = u == 0 ? 0.0f : u == 1 ? -0.0f : u == 2 ? -INFINITY : u < 6 ? 1.5f : rdt_wide_float(&s);
    }
    float best = row[0];
    size_t arg = 0;
    for (uint32_t k = 1; k < A; k++) {
      if (row[k] > best) best = row[k];
      if (row[k] > row[arg]) arg = k;
    }
    assert_true(fbits(rd_ge_rowmax(row, A)) == fbits(best));
    assert_int_equal(rd_ge_argmax(row, A), arg);
  }
}

/* A tanh hidden layer: a 1 -> 1 -> 1 network (tanh, identity) whose
 * products are exact (input 1, second weight 1), so the CPU's forward and
 * the hidden bias gradient of its backward must be rd_ge_bias_act and
 * rd_ge_act_grad composed as the GPU's kernels compose them. The CPU
 * applies a hidden layer's activation gradient inside its product (the
 * gated GEMM), which the AVX2 / AVX-512 variants compile with FMA: the
 * generic variant is the reference, as for Adam. */
static void test_tanh_hidden_layer(void **state) {
  (void)state;
  assert_true(generic_isa());
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  c.spec.n_layers = 2;
  c.spec.sizes[0] = 1, c.spec.sizes[1] = 1, c.spec.sizes[2] = 1;
  c.spec.act[0] = RD_NN_TANH, c.spec.act[1] = RD_NN_IDENTITY;
  c.max_batch = 1;
  rd_mlp_t m;
  rd_error_t err;
  assert_int_equal(rd_mlp_init(&m, &c, &err), RD_OK);
  /* flat layout: W1, b1, W2, b2 */
  uint64_t s = 47;
  const float x = 1.0f;
  for (int it = 0; it < 20000; it++) {
    const float w1 = rdt_wide_float(&s) * 1e4f, b1 = rdt_wide_float(&s), b2 = rdt_wide_float(&s), dy = rdt_wide_float(&s);
    m.params[0] = w1, m.params[1] = b1, m.params[2] = 1.0f, m.params[3] = b2;
    float y;
    assert_int_equal(rd_mlp_forward(&m, 1, &x, &y, &err), RD_OK);
    const float h = rd_ge_bias_act(w1, b1, RD_NN_TANH); /* k_bias_act, layer 1 */
    const float want = rd_ge_bias_act(h, b2, RD_NN_IDENTITY);
    if (fbits(want) != fbits(y)) fail_msg("forward: %a, CPU %a", (double)want, (double)y);
    assert_int_equal(rd_mlp_backward(&m, &dy, NULL, &err), RD_OK);
    /* dA1 = W2^T dz2 = dz2 (exact); dz1 = k_act_grad(h, dA1); db1 = dz1. */
    const float dz1 = 0.0f + rd_ge_act_grad(h, dy, RD_NN_TANH);
    if (fbits(dz1) != fbits(m.grads[1]))
      fail_msg("hidden tanh gradient: h %a dy %a: %a, CPU %a", (double)h, (double)dy,
               (double)dz1, (double)m.grads[1]);
  }
  assert_string_equal(rd_mlp_isa(&m), "generic");
  rd_mlp_free(&m);
  unsetenv("RD_NN_ISA");
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_adam),        cmocka_unit_test(test_losses),
         cmocka_unit_test(test_clip),        cmocka_unit_test(test_polyak),
         cmocka_unit_test(test_activations), cmocka_unit_test(test_targets),
         cmocka_unit_test(test_step_stats),  cmocka_unit_test(test_finalize_and_clip),
         cmocka_unit_test(test_hard_copy_schedule), cmocka_unit_test(test_dqn_targets),
         cmocka_unit_test(test_tanh_hidden_layer))
