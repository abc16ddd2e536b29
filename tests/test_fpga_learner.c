/* test_fpga_learner.c - C-simulation of the FPGA learner module
 * (backends/fpga/kernels/learner.[ch]) against the CPU networks and the
 * CPU learner the hosted learner trains (backends/cpu/nn.h, learner.h) and
 * the FPGA model's learner structure (backends/fpga/model.h).
 *
 * Stages: FW, BW and WA of five networks at DP 1..4 against rd_mlp.
 * Train steps: the kernel top lrn_train_step and rd_learner_step from the
 * same seed (the CPU's init weights copied in, as a host DMAs them) on the
 * same 20 batches of n-step rows with IS weights: DQN 4-64-64-2 (CartPole)
 * with hard and Polyak targets, double and plain, clipped and not, full
 * and partial batches; DDPG with a tanh actor scaled to [-2, 2] and a
 * critic Q([s, a]), hard and Polyak; each at DP 1..4. Error paths: every
 * limit and inconsistency of the descriptor, a batch above its limit,
 * non-finite losses and norms (nothing changes).
 *
 * Tolerances (learner.h): per tensor, max |fpga - cpu| <= TOL * max(1,
 * max |cpu|): TOL = 1e-5 for one forward or backward; over 20 train-steps
 * TOL_STEP = 2e-4 for the parameters, targets and Adam moments at the end
 * and TOL_STEP_VALUES = 2e-5 for each step's td_abs, losses, |delta|
 * figures and gradient norm. Both compute in fp32 from the same
 * parameters, in different summation orders (and the CPU may fuse
 * multiply-adds); over steps, Adam turns a rounding-level difference in a
 * gradient near zero (|g| ~ its eps, 1e-8), or a relu, Huber or argmax
 * decision at a near-tie, into a difference of a fraction of lr in a
 * weight. The bounds are about 3.5 and 3 times the worst these cases give
 * on every CPU GEMM kernel (docs/benchmarks.md has the figures), and a
 * fifth of one Adam step (lr 1e-3..2e-3): a weight that misses a single
 * update fails.
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

#include "kernels/learner.h"
#include "learner.h"
#include "learner_host.h"
#include "model.h"
#include "nn.h"
#include "rd_rng.h"
#include "rdt_learner.h"
#include "rdt_main.h"

#define TOL 1e-5

static float uniform(uint64_t *s) { /* [-1, 1) */
  return (float)((double)(rd_splitmix64(s) >> 40) * 0x1p-23 - 1.0);
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

/* FW, BW and WA of every case, at DP 1..LRN_MAX_DP, against rd_mlp; the
 * input-only BW (no WA) gives the same dx. */
static void test_matches_cpu_network(void **state) {
  (void)state;
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
    float *acc = malloc(sizeof(float) * LRN_MAX_DP * np), *dx_in = malloc(sizeof(float) * B * in);
    const size_t na = lrn_acts_floats(&ks, B);
    float *acts = malloc(sizeof(float) * na);
    assert_true(x && dy && y_cpu && y_k && y_k1 && dx_cpu && dx_k && g_k && kp && acc && dx_in &&
                acts);
    for (size_t i = 0; i < (size_t)B * in; i++) x[i] = 2.0f * uniform(&seed);
    for (size_t i = 0; i < (size_t)B * out; i++) dy[i] = uniform(&seed) / (float)B;
    memcpy(kp, params, np * sizeof(float));

    assert_int_equal(rd_mlp_forward(&m, B, x, y_cpu, &err), RD_OK);
    assert_int_equal(rd_mlp_backward(&m, dy, dx_cpu, &err), RD_OK);
    const float *g_cpu = rd_mlp_grads(&m);

    for (uint32_t dp = 1; dp <= LRN_MAX_DP; dp++) {
      /* Poison (NaN) whatever the kernel should write. */
      memset(acts, 0xff, sizeof(float) * na);
      memset(dx_in, 0xff, sizeof(float) * B * in);
      memset(y_k, 0xff, sizeof(float) * B * out);
      memset(g_k, 0xff, sizeof(float) * np);
      memset(dx_k, 0xff, sizeof(float) * B * in);
      assert_int_equal(lrn_forward(&ks, kp, dp, B, x, y_k, acts), LRN_OK);
      assert_memory_equal(lrn_acts_output(&ks, B, acts), y_k, sizeof(float) * B * out);
      if (dp == 1)
        memcpy(y_k1, y_k, sizeof(float) * B * out);
      else /* a sample's forward does not depend on its pipeline */
        assert_memory_equal(y_k, y_k1, sizeof(float) * B * out);
      double ey = rel_err(y_k, y_cpu, (size_t)B * out);
      assert_int_equal(lrn_backward(&ks, kp, dp, B, acts, dy, g_k, acc, dx_k), LRN_OK);
      /* BW alone (the critic's input gradient in DDPG): the same dx, no WA. */
      assert_int_equal(lrn_backward(&ks, kp, dp, B, acts, dy, NULL, NULL, dx_in), LRN_OK);
      assert_memory_equal(dx_in, dx_k, sizeof(float) * B * in);
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
    free(acc), free(dx_in), free(acts);
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

/* The stages' argument checks. */
static void test_stage_errors(void **state) {
  (void)state;
  float x[4] = {0}, g[64], p[64] = {0}, acc[64 * LRN_MAX_DP], dx[4];
  static float acts[16];
  lrn_shape_t s = {1, {2, 2}, {LRN_IDENTITY}};
  assert_int_equal(lrn_forward(&s, p, 0, 1, x, NULL, acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, LRN_MAX_DP + 1, 1, x, NULL, acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, 1, 0, x, NULL, acts), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, 1, LRN_MAX_BATCH + 1, x, NULL, acts), LRN_EINVAL);
  lrn_shape_t bad = s;
  bad.sizes[1] = LRN_MAX_WIDTH + 1;
  assert_int_equal(lrn_shape_check(&bad), LRN_EINVAL);
  assert_int_equal(lrn_forward(&bad, p, 1, 1, x, NULL, acts), LRN_EINVAL);
  bad = s;
  bad.act[0] = 9;
  assert_int_equal(lrn_shape_check(&bad), LRN_EINVAL);
  bad = s;
  bad.n_layers = 0;
  assert_int_equal(lrn_forward(&bad, p, 1, 1, x, NULL, acts), LRN_EINVAL);
  bad.n_layers = LRN_MAX_LAYERS + 1;
  assert_int_equal(lrn_shape_check(&bad), LRN_EINVAL);
  assert_int_equal(lrn_forward(&s, p, 1, 2, x, NULL, acts), LRN_OK);
  assert_int_equal(lrn_backward(&s, p, 0, 2, acts, x, g, acc, NULL), LRN_EINVAL);
  assert_int_equal(lrn_backward(&s, p, 1, LRN_MAX_BATCH + 1, acts, x, g, acc, NULL), LRN_EINVAL);
  assert_int_equal(lrn_backward(&s, p, 1, 2, acts, x, NULL, NULL, NULL), LRN_EINVAL); /* no output */
  assert_int_equal(lrn_backward(&s, p, 1, 2, acts, x, g, NULL, NULL), LRN_EINVAL);   /* no acc */
  assert_int_equal(lrn_backward(&s, p, 1, 2, acts, x, g, acc, NULL), LRN_OK);
  assert_int_equal(lrn_backward(&s, p, 1, 2, acts, x, NULL, NULL, dx), LRN_OK);
}

/* ------------------------------------------------------------------ */
/* Train steps against the CPU learner                                 */
/* ------------------------------------------------------------------ */

#ifndef TOL_STEP
#define TOL_STEP 2e-4
#endif
#ifndef TOL_STEP_VALUES
#define TOL_STEP_VALUES 2e-5
#endif
#define N_STEPS 20

/* The worst relative errors over every train-step case (learner.h quotes them). */
static double worst_param, worst_td, worst_loss;

/* The kernel's learner as a host holds it: descriptor, hyper-parameters
 * and the board's buffers. */
typedef struct {
  lrn_config_t kc;
  uint32_t desc[LRN_D_WORDS];
  double hp[LRN_HP_COUNT];
  size_t np, nws;
  float *params, *target, *m, *v, *ws;
} kl_t;

/* From the CPU learner's freshly initialised networks, as a host DMAs the
 * initial weights to the board. The workspace starts as NaN, so a stage
 * that reads scratch no stage wrote poisons the results. */
static void kl_init(kl_t *k, const rd_learner_t *cpu, uint32_t dp) {
  rd_fpga_learner_config(&cpu->config, dp, &k->kc); /* as the daemon's backend does */
  lrn_why_t why;
  if (lrn_config_check(&k->kc, &why) != LRN_OK) {
    char msg[256];
    lrn_why_format(&why, msg, sizeof msg);
    fail_msg("config: %s", msg);
  }
  lrn_config_pack(&k->kc, k->desc, k->hp);
  k->np = lrn_params_floats(&k->kc);
  k->nws = lrn_ws_floats(&k->kc);
  k->params = malloc(k->np * sizeof(float));
  k->target = malloc(k->np * sizeof(float));
  k->m = calloc(k->np, sizeof(float));
  k->v = calloc(k->np, sizeof(float));
  k->ws = malloc(k->nws * sizeof(float));
  assert_true(k->params && k->target && k->m && k->v && k->ws);
  memset(k->ws, 0xff, k->nws * sizeof(float));
  size_t off = 0;
  for (int i = 0; i < cpu->n_nets; i += 2) {
    size_t n = rd_mlp_n_params(&cpu->net[i]);
    memcpy(k->params + off, cpu->net[i].params, n * sizeof(float));
    memcpy(k->target + off, cpu->net[i + 1].params, n * sizeof(float));
    off += n;
  }
  assert_int_equal(off, k->np);
}

static void kl_free(kl_t *k) {
  free(k->params), free(k->target), free(k->m), free(k->v), free(k->ws);
}

/* Rows as an Ape-X actor sends them (papers/003): 3-step returns
 * R = r0 + g r1 + g^2 r2 with discount g^3, or a return cut short and
 * discount 0 where the episode ended; IS weights in (0, 1]. */
typedef struct {
  float *obs, *next, *reward, *discount, *w, *af;
  int32_t *ai;
} rows_t;

static void rows_make(rows_t *r, const rd_learner_config_t *c, size_t n, uint64_t *seed) {
  const size_t O = c->obs_dim, D = c->action_dim ? c->action_dim : 1;
  r->obs = malloc(n * O * sizeof(float));
  r->next = malloc(n * O * sizeof(float));
  r->reward = malloc(n * sizeof(float));
  r->discount = malloc(n * sizeof(float));
  r->w = malloc(n * sizeof(float));
  r->af = malloc(n * D * sizeof(float));
  r->ai = malloc(n * sizeof(int32_t));
  assert_true(r->obs && r->next && r->reward && r->discount && r->w && r->af && r->ai);
  const float gamma = 0.99f;
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < O; j++) {
      r->obs[i * O + j] = 1.5f * uniform(seed);
      r->next[i * O + j] = r->obs[i * O + j] + 0.2f * uniform(seed);
    }
    const int ends = (rd_splitmix64(seed) % 7) == 0;
    const int steps = ends ? 1 + (int)(rd_splitmix64(seed) % 3) : 3;
    float ret = 0.0f, g = 1.0f;
    for (int k = 0; k < steps; k++) {
      ret += g * 2.0f * uniform(seed);
      g *= gamma;
    }
    r->reward[i] = ret;
    r->discount[i] = ends ? 0.0f : gamma * gamma * gamma;
    r->w[i] = 0.2f + 0.4f * (uniform(seed) + 1.0f);
    r->ai[i] = c->algo == RD_ALGO_DQN ? (int32_t)(rd_splitmix64(seed) % c->num_actions) : 0;
    for (size_t j = 0; j < D; j++) {
      float u = 0.5f * (uniform(seed) + 1.0f); /* [0, 1) */
      r->af[i * D + j] = c->action_low + u * (c->action_high - c->action_low);
    }
  }
}

static void rows_free(rows_t *r) {
  free(r->obs), free(r->next), free(r->reward), free(r->discount), free(r->w), free(r->af),
      free(r->ai);
}

/* Each tensor (W_l, b_l) of a network block against the CPU's. */
static double cmp_block(const rd_nn_spec_t *s, const float *k, const float *c, const char *what,
                        const char *name) {
  double worst = 0;
  size_t off = 0;
  for (uint32_t l = 0; l < s->n_layers; l++) {
    size_t nw = (size_t)s->sizes[l + 1] * s->sizes[l], nb = s->sizes[l + 1];
    double ew = rel_err(k + off, c + off, nw), eb = rel_err(k + off + nw, c + off + nw, nb);
    if (ew > TOL_STEP || eb > TOL_STEP)
      fail_msg("%s: %s layer %u: W error %.3g, b error %.3g", name, what, l, ew, eb);
    if (ew > worst) worst = ew;
    if (eb > worst) worst = eb;
    off += nw + nb;
  }
  return worst;
}

static double rel1(double a, double b) { return fabs(a - b) / fmax(1.0, fabs(b)); }

/* N_STEPS steps of the kernel and of the CPU learner from config c at DP
 * dp, on the same batches (every third a partial one); td_abs, losses,
 * |delta| figures and gradient norms per step, and at the end every
 * online, target and Adam tensor, within TOL_STEP_VALUES and TOL_STEP. */
static void run_against_cpu(const rd_learner_config_t *c, uint32_t dp, const char *name) {
  rd_learner_t cpu;
  rd_error_t err;
  if (rd_learner_init(&cpu, c, &err) != RD_OK) fail_msg("%s: init: %s", name, err.msg);
  kl_t k;
  kl_init(&k, &cpu, dp);
  float *start = malloc(k.np * sizeof(float));
  assert_non_null(start);
  memcpy(start, k.params, k.np * sizeof(float));
  const int dqn = c->algo == RD_ALGO_DQN;
  const uint32_t B = c->max_batch;
  float *td_c = malloc(B * sizeof(float)), *td_k = malloc(B * sizeof(float));
  assert_true(td_c && td_k);
  uint64_t seed = 0xfeed0000 + c->seed;
  double e_td = 0, e_loss = 0, e_par = 0;
  int clipped = 0, huber_lin = 0, huber_sq = 0;
  for (uint32_t step = 0; step < N_STEPS; step++) {
    const uint32_t n = step % 3 == 2 ? B * 2 / 3 + 1 : B;
    rows_t r;
    rows_make(&r, c, n, &seed);
    rd_batch_t b = {n, r.obs, dqn ? r.ai : NULL, dqn ? NULL : r.af, r.reward, r.discount, r.next,
                    r.w};
    rd_step_stats_t st;
    int rc = rd_learner_step(&cpu, &b, td_c, &st, &err);
    if (rc != RD_OK) fail_msg("%s: CPU step %u: %s", name, step, err.msg);
    double stats[LRN_ST_COUNT];
    memset(td_k, 0xff, B * sizeof(float));
    int kr = lrn_train_step(k.desc, k.hp, step, n, k.params, k.target, k.m, k.v, k.ws, r.obs,
                            r.ai, r.af, r.reward, r.discount, r.next, r.w, td_k, stats);
    if (kr != LRN_OK) fail_msg("%s: kernel step %u returned %d", name, step, kr);
    double et = rel_err(td_k, td_c, n);
    double el = rel1(stats[LRN_ST_LOSS], st.loss);
    if (!dqn) el = fmax(el, rel1(stats[LRN_ST_ACTOR_LOSS], st.actor_loss));
    double em = fmax(rel1(stats[LRN_ST_TD_MEAN], st.td_abs_mean),
                     rel1(stats[LRN_ST_TD_MAX], st.td_abs_max));
    double eg = rel1(stats[LRN_ST_GRAD_NORM], st.grad_norm);
    if (et > TOL_STEP_VALUES || el > TOL_STEP_VALUES || em > TOL_STEP_VALUES ||
        eg > TOL_STEP_VALUES)
      fail_msg("%s dp %u step %u: td_abs error %.3g, loss %.3g, td mean/max %.3g, grad norm %.3g",
               name, dp, step, et, el, em, eg);
    e_td = fmax(e_td, et);
    e_loss = fmax(e_loss, fmax(el, em));
    clipped |= c->grad_clip > 0 && st.grad_norm > c->grad_clip;
    for (uint32_t i = 0; i < n; i++) {
      huber_lin |= td_c[i] > c->huber_delta;
      huber_sq |= td_c[i] <= c->huber_delta;
    }
    rows_free(&r);
  }
  /* Every tensor of every network, online and target, and the moments. */
  size_t off = 0;
  for (int i = 0; i < cpu.n_nets; i += 2) {
    const rd_mlp_t *on = &cpu.net[i], *tg = &cpu.net[i + 1];
    e_par = fmax(e_par, cmp_block(&on->spec, k.params + off, on->params, "online", name));
    e_par = fmax(e_par, cmp_block(&on->spec, k.target + off, tg->params, "target", name));
    e_par = fmax(e_par, cmp_block(&on->spec, k.m + off, on->adam_m, "Adam m", name));
    e_par = fmax(e_par, cmp_block(&on->spec, k.v + off, on->adam_v, "Adam v", name));
    off += rd_mlp_n_params(on);
  }
  /* The step moved the weights (a kernel without WU would fail here). */
  double moved = 0;
  for (size_t i = 0; i < k.np; i++) moved = fmax(moved, fabs(k.params[i] - start[i]));
  assert_true(moved > 5e-3);
  /* Hard targets: step N_STEPS copied the online networks. */
  if (c->target_period > 0 && N_STEPS % c->target_period == 0)
    assert_memory_equal(k.target, k.params, k.np * sizeof(float));
  else
    assert_memory_not_equal(k.target, k.params, k.np * sizeof(float));
  if (c->grad_clip > 0 && c->grad_clip < 1) assert_true(clipped);
  if (dqn) assert_true(huber_lin && huber_sq); /* both Huber regions seen */
  if (dp == LRN_MAX_DP)
    printf("  %-44s max rel. error params %.2e, td_abs %.2e, losses %.2e\n", name, e_par, e_td,
           e_loss);
  worst_param = fmax(worst_param, e_par);
  worst_td = fmax(worst_td, e_td);
  worst_loss = fmax(worst_loss, e_loss);
  free(start), free(td_c), free(td_k);
  kl_free(&k);
  rd_learner_free(&cpu);
}

static void cartpole(rd_learner_config_t *c, uint64_t seed) {
  rdt_dqn_config(c, 4, 2, 2, (const uint32_t[]){64, 64});
  c->max_batch = 64;
  c->lr = 2e-3;
  c->seed = seed;
}

static void test_train_dqn(void **state) {
  (void)state;
  for (uint32_t dp = 1; dp <= LRN_MAX_DP; dp++) {
    rd_learner_config_t c;
    cartpole(&c, 3);
    c.target_period = 5;
    c.grad_clip = 0.5;
    run_against_cpu(&c, dp, "dqn 4-64-64-2 double, hard/5, clip 0.5");
    cartpole(&c, 4);
    c.tau = 0.05;
    run_against_cpu(&c, dp, "dqn 4-64-64-2 double, polyak 0.05, clip 10");
    cartpole(&c, 5);
    c.double_dqn = 0;
    c.grad_clip = 0;
    c.tau = 0.01;
    c.huber_delta = 0.5;
    run_against_cpu(&c, dp, "dqn 4-64-64-2 plain, polyak 0.01, no clip");
    cartpole(&c, 6);
    c.hidden_act = RD_NN_TANH;
    c.num_actions = 3;
    c.max_batch = 50;
    c.target_period = 4;
    run_against_cpu(&c, dp, "dqn 4-64-64-3 tanh, hard/4");
  }
}

static void pendulum(rd_learner_config_t *c, uint64_t seed) {
  rdt_ddpg_config(c, 3, 2, 2, (const uint32_t[]){32, 32}, 2, (const uint32_t[]){32, 32});
  c->action_low = -2.0f;
  c->action_high = 2.0f;
  c->max_batch = 48;
  c->lr = 1e-3;
  c->critic_lr = 2e-3;
  c->seed = seed;
}

static void test_train_ddpg(void **state) {
  (void)state;
  for (uint32_t dp = 1; dp <= LRN_MAX_DP; dp++) {
    rd_learner_config_t c;
    pendulum(&c, 7);
    c.tau = 0.05;
    c.grad_clip = 0.5;
    run_against_cpu(&c, dp, "ddpg 3-32-32-2 / 5-32-32-1, polyak, clip 0.5");
    pendulum(&c, 8);
    c.action_dim = 1;
    c.action_low = -1.0f;
    c.action_high = 3.0f;
    c.target_period = 4;
    c.grad_clip = 0;
    c.n_critic_hidden = 1;
    c.critic_hidden[0] = 48;
    run_against_cpu(&c, dp, "ddpg 3-32-32-1 [-1, 3] / 4-48-1, hard/4");
  }
}

/* Printed once the cases above ran: the figures learner.h quotes. */
static void test_train_report(void **state) {
  (void)state;
  printf("  worst over all train-step cases: params %.2e, td_abs %.2e, losses %.2e "
         "(tolerances %.0e, %.0e)\n",
         worst_param, worst_td, worst_loss, TOL_STEP, TOL_STEP_VALUES);
  assert_true(worst_param <= TOL_STEP && worst_td <= TOL_STEP_VALUES &&
              worst_loss <= TOL_STEP_VALUES);
}

/* ------------------------------------------------------------------ */
/* The train step's error paths                                        */
/* ------------------------------------------------------------------ */

/* lrn_config_check refuses c, naming `limit` in its message. */
static void refused(const lrn_config_t *c, const char *limit) {
  lrn_why_t why;
  assert_int_equal(lrn_config_check(c, &why), LRN_EINVAL);
  char msg[256];
  lrn_why_format(&why, msg, sizeof msg);
  if (strstr(msg, limit) == NULL) fail_msg("message \"%s\" does not name %s", msg, limit);
}

/* A kernel call that must be refused before it writes anything. */
static void call_refused(kl_t *k, const lrn_config_t *c, uint32_t n, const rows_t *r) {
  uint32_t desc[LRN_D_WORDS];
  double hp[LRN_HP_COUNT], stats[LRN_ST_COUNT];
  lrn_config_pack(c, desc, hp);
  float *p0 = malloc(k->np * sizeof(float)), *t0 = malloc(k->np * sizeof(float));
  float td[LRN_MAX_BATCH + 2];
  assert_true(p0 && t0);
  memcpy(p0, k->params, k->np * sizeof(float));
  memcpy(t0, k->target, k->np * sizeof(float));
  for (int i = 0; i < LRN_MAX_BATCH + 2; i++) td[i] = 12345.0f;
  for (int i = 0; i < LRN_ST_COUNT; i++) stats[i] = 777.0;
  assert_int_equal(lrn_train_step(desc, hp, 0, n, k->params, k->target, k->m, k->v, k->ws, r->obs,
                                  r->ai, r->af, r->reward, r->discount, r->next, r->w, td, stats),
                   LRN_EINVAL);
  assert_memory_equal(p0, k->params, k->np * sizeof(float));
  assert_memory_equal(t0, k->target, k->np * sizeof(float));
  for (int i = 0; i < LRN_MAX_BATCH + 2; i++) assert_true(td[i] == 12345.0f);
  for (int i = 0; i < LRN_ST_COUNT; i++) assert_true(stats[i] == 777.0);
  free(p0), free(t0);
}

static void test_train_errors(void **state) {
  (void)state;
  rd_learner_config_t c;
  cartpole(&c, 9);
  c.max_batch = 16;
  rd_learner_t cpu;
  rd_error_t err;
  assert_int_equal(rd_learner_init(&cpu, &c, &err), RD_OK);
  kl_t k;
  kl_init(&k, &cpu, 2);
  uint64_t seed = 1;
  rows_t r;
  rows_make(&r, &c, LRN_MAX_BATCH + 2, &seed); /* rows enough for any n below */

  /* Batches: above the workspace's batch, above the build's, empty. */
  call_refused(&k, &k.kc, 17, &r);
  call_refused(&k, &k.kc, LRN_MAX_BATCH + 1, &r);
  call_refused(&k, &k.kc, 0, &r);
  lrn_config_t bad = k.kc;
  bad.batch = LRN_MAX_BATCH + 1;
  refused(&bad, "LRN_MAX_BATCH");
  call_refused(&k, &bad, 16, &r);
  /* Shapes: too wide, too deep, a bad activation code. */
  bad = k.kc;
  bad.net[0].sizes[1] = LRN_MAX_WIDTH + 1;
  refused(&bad, "LRN_MAX_WIDTH");
  refused(&bad, "Q network");
  call_refused(&k, &bad, 16, &r);
  bad = k.kc;
  bad.net[0].n_layers = LRN_MAX_LAYERS + 1;
  refused(&bad, "LRN_MAX_LAYERS");
  call_refused(&k, &bad, 16, &r);
  bad = k.kc;
  bad.net[0].act[0] = 7;
  refused(&bad, "activation");
  /* DP and algorithm. */
  bad = k.kc;
  bad.dp = 0;
  refused(&bad, "LRN_MAX_DP");
  call_refused(&k, &bad, 16, &r);
  bad.dp = LRN_MAX_DP + 1;
  refused(&bad, "LRN_MAX_DP");
  bad = k.kc;
  bad.algo = 3;
  refused(&bad, "neither DQN nor DDPG");
  call_refused(&k, &bad, 16, &r);
  /* What DQN needs: an identity output of >= 2 actions; double_dqn 0/1. */
  bad = k.kc;
  bad.net[0].act[bad.net[0].n_layers - 1] = LRN_TANH;
  refused(&bad, "output activation");
  bad = k.kc;
  bad.net[0].sizes[bad.net[0].n_layers] = 1;
  refused(&bad, "at least 2");
  bad = k.kc;
  bad.double_dqn = 2;
  refused(&bad, "double_dqn");

  /* DDPG's structure: the critic takes [s, a] to one identity output. */
  lrn_config_t d;
  memset(&d, 0, sizeof d);
  d.algo = LRN_ALGO_DDPG;
  d.dp = 1;
  d.batch = 8;
  d.net[0] = (lrn_shape_t){2, {3, 16, 2}, {LRN_RELU, LRN_TANH}};
  d.net[1] = (lrn_shape_t){2, {5, 16, 1}, {LRN_RELU, LRN_IDENTITY}};
  assert_int_equal(lrn_config_check(&d, NULL), LRN_OK);
  bad = d;
  bad.net[1].sizes[0] = 4;
  refused(&bad, "critic takes 4 inputs");
  bad = d;
  bad.net[1].sizes[2] = 2;
  refused(&bad, "critic has 2 outputs");
  bad = d;
  bad.net[0].act[1] = LRN_IDENTITY;
  refused(&bad, "actor's output activation");
  bad = d;
  bad.net[1].sizes[1] = LRN_MAX_WIDTH * 2;
  refused(&bad, "critic's width 512");

  /* A non-finite step: LRN_ERANGE where the CPU learner says RD_ERANGE;
   * nothing but td_abs and stats changes. kind 0: Q(s, a) = inf (output
   * weights at FLT_MAX in both learners), the loss check; kind 1 and 2:
   * inputs at 3e38 overflow the first layer, the gradients are NaN, the
   * norm check without and with clipping. */
  for (int kind = 0; kind < 3; kind++) {
    rows_t h;
    uint64_t s2 = 5;
    rows_make(&h, &c, 16, &s2);
    if (kind > 0)
      for (size_t i = 0; i < 16 * 4; i++) h.obs[i] = 3e38f;
    rd_learner_config_t cc = c;
    cc.grad_clip = kind == 1 ? 0.0 : 10.0;
    rd_learner_t ref;
    assert_int_equal(rd_learner_init(&ref, &cc, &err), RD_OK);
    lrn_config_t kc = k.kc;
    kc.grad_clip = cc.grad_clip;
    uint32_t desc[LRN_D_WORDS];
    double hp[LRN_HP_COUNT], stats[LRN_ST_COUNT];
    lrn_config_pack(&kc, desc, hp);
    const rd_nn_spec_t *sp = &ref.net[0].spec;
    const size_t w_last = rd_nn_spec_offset(sp, sp->n_layers - 1);
    const size_t n_last = (size_t)sp->sizes[sp->n_layers] * sp->sizes[sp->n_layers - 1];
    if (kind == 0)
      for (size_t i = 0; i < n_last; i++)
        k.params[w_last + i] = rd_mlp_params(&ref.net[0])[w_last + i] = 3.4e38f;
    float *snap = malloc(4 * k.np * sizeof(float)), td[16];
    assert_non_null(snap);
    memcpy(snap, k.params, k.np * sizeof(float));
    memcpy(snap + k.np, k.target, k.np * sizeof(float));
    memcpy(snap + 2 * k.np, k.m, k.np * sizeof(float));
    memcpy(snap + 3 * k.np, k.v, k.np * sizeof(float));
    assert_int_equal(lrn_train_step(desc, hp, 0, 16, k.params, k.target, k.m, k.v, k.ws, h.obs,
                                    h.ai, h.af, h.reward, h.discount, h.next, h.w, td, stats),
                     LRN_ERANGE);
    assert_int_equal((int)stats[LRN_ST_FAILED], kind == 0 ? LRN_FAIL_LOSS : LRN_FAIL_NORM);
    if (kind == 0) assert_false(isfinite(stats[LRN_ST_LOSS]));
    if (kind == 1) assert_false(isfinite(stats[LRN_ST_GRAD_NORM]));
    if (kind == 2) assert_true(stats[LRN_ST_GRAD_NORM] == 0.0); /* clip: no norm reported */
    assert_memory_equal(snap, k.params, k.np * sizeof(float));
    assert_memory_equal(snap + k.np, k.target, k.np * sizeof(float));
    assert_memory_equal(snap + 2 * k.np, k.m, k.np * sizeof(float));
    assert_memory_equal(snap + 3 * k.np, k.v, k.np * sizeof(float));
    /* The CPU learner fails the same batch the same way. */
    rd_batch_t b = {16, h.obs, h.ai, NULL, h.reward, h.discount, h.next, h.w};
    rd_step_stats_t st;
    assert_int_equal(rd_learner_step(&ref, &b, NULL, &st, &err), RD_ERANGE);
    assert_non_null(strstr(err.msg, kind == 0 ? "DQN loss" : "Q network gradient norm"));
    assert_true(st.grad_norm == stats[LRN_ST_GRAD_NORM] ||
                (isnan(st.grad_norm) && isnan(stats[LRN_ST_GRAD_NORM])));
    if (kind == 0) memcpy(k.params, snap, k.np * sizeof(float)); /* undo FLT_MAX */
    rd_learner_free(&ref);
    free(snap);
    rows_free(&h);
  }
  rows_free(&r);
  kl_free(&k);
  rd_learner_free(&cpu);
}

/* Two learners in one process, interleaved, each on its own buffers: the
 * kernel keeps no state of its own, so each ends as it would alone. */
static void test_train_two_instances(void **state) {
  (void)state;
  rd_learner_config_t c;
  cartpole(&c, 11);
  c.max_batch = 32;
  rd_learner_t cpu;
  rd_error_t err;
  assert_int_equal(rd_learner_init(&cpu, &c, &err), RD_OK);
  kl_t a, b, alone;
  kl_init(&a, &cpu, 2);
  kl_init(&b, &cpu, 3);
  kl_init(&alone, &cpu, 2);
  float td[32];
  double stats[LRN_ST_COUNT];
  uint64_t sa = 21, sb = 22, s_alone = 21;
  /* a and b take turns. */
  for (uint32_t step = 0; step < 5; step++) {
    rows_t ra, rb;
    rows_make(&ra, &c, 32, &sa);
    rows_make(&rb, &c, 32, &sb);
    assert_int_equal(lrn_train_step(a.desc, a.hp, step, 32, a.params, a.target, a.m, a.v, a.ws,
                                    ra.obs, ra.ai, ra.af, ra.reward, ra.discount, ra.next, ra.w,
                                    td, stats), LRN_OK);
    assert_int_equal(lrn_train_step(b.desc, b.hp, step, 32, b.params, b.target, b.m, b.v, b.ws,
                                    rb.obs, rb.ai, rb.af, rb.reward, rb.discount, rb.next, rb.w,
                                    td, stats), LRN_OK);
    rows_free(&ra), rows_free(&rb);
  }
  /* alone: the same batches as a, with nobody else in between. */
  for (uint32_t step = 0; step < 5; step++) {
    rows_t r0;
    rows_make(&r0, &c, 32, &s_alone);
    assert_int_equal(lrn_train_step(alone.desc, alone.hp, step, 32, alone.params, alone.target,
                                    alone.m, alone.v, alone.ws, r0.obs, r0.ai, r0.af, r0.reward,
                                    r0.discount, r0.next, r0.w, td, stats), LRN_OK);
    rows_free(&r0);
  }
  assert_memory_equal(a.params, alone.params, a.np * sizeof(float));
  assert_memory_equal(a.target, alone.target, a.np * sizeof(float));
  assert_memory_not_equal(a.params, b.params, a.np * sizeof(float));
  kl_free(&a), kl_free(&b), kl_free(&alone);
  rd_learner_free(&cpu);
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

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_matches_cpu_network),
         cmocka_unit_test(test_structure_matches_model),
         cmocka_unit_test(test_stage_errors),
         cmocka_unit_test(test_train_dqn),
         cmocka_unit_test(test_train_ddpg),
         cmocka_unit_test(test_train_report),
         cmocka_unit_test(test_train_errors),
         cmocka_unit_test(test_train_two_instances),
         cmocka_unit_test(test_stage_labels))
