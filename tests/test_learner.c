/* test_learner.c - the CPU learner's train step (backends/cpu/learner.h).
 *
 * DQN: a network small enough to compute by hand (targets, double vs plain
 * argmax, Huber in both regions, |delta|, every gradient, one Adam step).
 * DDPG: the critic target and loss against a double-precision reference,
 * the actor and critic gradients against central differences of the
 * losses computed in double, Polyak and hard-copy target rules. Learning:
 * DQN recovers Q* of a deterministic chain from a fixed dataset of 1- and
 * 2-step rows; DDPG finds a quadratic bandit's optimal action.
 * Determinism across learners and thread counts. Every validation path and
 * every non-finite step leaves the learner unchanged, byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "learner.h"
#include "rd_clock.h"
#include "rd_philox.h"
#include "rdt_learner.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static void make(rd_learner_t *l, const rd_learner_config_t *c) {
  rd_error_t err;
  int rc = rd_learner_init(l, c, &err);
  if (rc != RD_OK) fail_msg("rd_learner_init: %s: %s", rd_err_name(rc), err.msg);
}

/* Everything a step may change: every network's parameters, the online
 * networks' Adam moments and step counts, the learner's step count. */
typedef struct {
  unsigned char *bytes;
  size_t len;
} snap_t;

static void snap_append(snap_t *s, const void *p, size_t n) {
  s->bytes = realloc(s->bytes, s->len + n);
  assert_non_null(s->bytes);
  memcpy(s->bytes + s->len, p, n);
  s->len += n;
}

static snap_t snapshot(const rd_learner_t *l) {
  snap_t s = {NULL, 0};
  snap_append(&s, &l->steps, sizeof l->steps);
  for (int i = 0; i < l->n_nets; i++) {
    const rd_mlp_t *m = &l->net[i];
    size_t nb = m->n_params * sizeof(float);
    snap_append(&s, m->params, nb);
    if (m->trainable) {
      snap_append(&s, m->adam_m, nb);
      snap_append(&s, m->adam_v, nb);
      snap_append(&s, &m->adam_t, sizeof m->adam_t);
    }
  }
  /* And the policy as actors receive it. */
  size_t pb = rd_learner_policy_bytes(l), w = 0;
  unsigned char *buf = malloc(pb);
  assert_int_equal(rd_learner_policy_save(l, buf, pb, &w, NULL), RD_OK);
  assert_int_equal(w, pb);
  snap_append(&s, buf, pb);
  free(buf);
  return s;
}

static void assert_unchanged(const rd_learner_t *l, const snap_t *before) {
  snap_t now = snapshot(l);
  assert_int_equal(now.len, before->len);
  assert_memory_equal(now.bytes, before->bytes, now.len);
  free(now.bytes);
}

/* ------------------------------------------------------------------ */
/* Double-precision reference MLP                                      */
/* ------------------------------------------------------------------ */

#define REF_MAX_W 64

/* y = net(x) for one sample, parameters p in the flat layout (doubles). */
static void ref_forward(const rd_nn_spec_t *s, const double *p, const double *x, double *y) {
  double a[REF_MAX_W], z[REF_MAX_W];
  for (uint32_t k = 0; k < s->sizes[0]; k++) a[k] = x[k];
  size_t off = 0;
  for (uint32_t l = 0; l < s->n_layers; l++) {
    uint32_t in = s->sizes[l], out = s->sizes[l + 1];
    for (uint32_t o = 0; o < out; o++) {
      double acc = p[off + (size_t)out * in + o];
      for (uint32_t k = 0; k < in; k++) acc += p[off + (size_t)o * in + k] * a[k];
      z[o] = s->act[l] == RD_NN_RELU   ? (acc > 0 ? acc : 0)
             : s->act[l] == RD_NN_TANH ? tanh(acc)
                                       : acc;
    }
    memcpy(a, z, out * sizeof(double));
    off += (size_t)out * (in + 1);
  }
  for (uint32_t o = 0; o < s->sizes[s->n_layers]; o++) y[o] = a[o];
}

static double *to_double(const float *p, size_t n) {
  double *d = malloc(n * sizeof *d);
  for (size_t i = 0; i < n; i++) d[i] = p[i];
  return d;
}

/* The DDPG quantities in double for a batch. */
typedef struct {
  const rd_learner_config_t *c;
  rd_nn_spec_t aspec, cspec;
  const rd_batch_t *b;
} ddpg_ref_t;

/* Q(s, mu(s)) for the observation s, actor params pa and critic params pc. */
static double ref_q_of_policy(const ddpg_ref_t *r, const double *pa, const double *pc,
                              const float *s) {
  const size_t O = r->c->obs_dim, D = r->c->action_dim;
  double x[REF_MAX_W], mu[REF_MAX_W], q;
  const double lo = r->c->action_low, range = (double)r->c->action_high - r->c->action_low;
  for (size_t k = 0; k < O; k++) x[k] = s[k];
  ref_forward(&r->aspec, pa, x, mu);
  for (size_t j = 0; j < D; j++) x[O + j] = lo + (mu[j] + 1) / 2 * range;
  ref_forward(&r->cspec, pc, x, &q);
  return q;
}

/* -(1/n) sum Q(s_i, mu(s_i)) for the actor params pa and critic params pc. */
static double ref_actor_loss(const ddpg_ref_t *r, const double *pa, const double *pc) {
  double sum = 0;
  for (size_t i = 0; i < r->b->n; i++)
    sum += ref_q_of_policy(r, pa, pc, r->b->obs + i * r->c->obs_dim);
  return -sum / (double)r->b->n;
}

/* y_i = R + discount Q'(s', mu'(s')) with target params. */
static void ref_targets(const ddpg_ref_t *r, const double *pat, const double *pct, double *y) {
  for (size_t i = 0; i < r->b->n; i++)
    y[i] = (double)r->b->reward[i] +
           (double)r->b->discount[i] *
               ref_q_of_policy(r, pat, pct, r->b->next_obs + i * r->c->obs_dim);
}

/* (1/n) sum w_i (Q(s_i, a_i) - y_i)^2; q (may be NULL) receives Q(s_i, a_i). */
static double ref_critic_loss(const ddpg_ref_t *r, const double *pc, const double *y, double *q) {
  const size_t O = r->c->obs_dim, D = r->c->action_dim;
  double x[REF_MAX_W], qi, sum = 0;
  for (size_t i = 0; i < r->b->n; i++) {
    for (size_t k = 0; k < O; k++) x[k] = r->b->obs[i * O + k];
    for (size_t j = 0; j < D; j++) x[O + j] = r->b->action_f[i * D + j];
    ref_forward(&r->cspec, pc, x, &qi);
    if (q) q[i] = qi;
    double w = r->b->weights ? r->b->weights[i] : 1.0;
    sum += w * (qi - y[i]) * (qi - y[i]);
  }
  return sum / (double)r->b->n;
}

/* ------------------------------------------------------------------ */
/* DQN by hand                                                         */
/* ------------------------------------------------------------------ */

/* Q(s) = W2 relu(W1 s + b1) + b2 with 2 inputs, 2 hidden units, 2 actions.
 *   online: W1 = I, b1 = 0, W2 = diag(1, 2), b2 = (0.5, 0) -> Q(s) = (h1 + 0.5, 2 h2)
 *   target: W1 = I, b1 = 0, W2 = diag(2, 1), b2 = 0        -> Q'(s) = (2 h1, h2)
 * Row 0: s = (1, 0.25), a = 0, R = 1, discount 0.9, s' = (1, 1), w = 1.
 *   Q(s') = (1.5, 2): double DQN picks a* = 1 and Q'(s', 1) = 1, y = 1.9;
 *   plain DQN takes max Q'(s') = 2, y = 2.8. Q(s, 0) = 1.5.
 * Row 1: s = (0.5, 2), a = 1, R = 0.5, discount 0 (terminal), s' = (0, 0.5),
 *   w = 0.5: y = 0.5, Q(s, 1) = 4, delta = 3.5 (Huber's linear region). */
static const float HAND_ONLINE[12] = {1, 0, 0, 1, 0, 0, 1, 0, 0, 2, 0.5f, 0};
static const float HAND_TARGET[12] = {1, 0, 0, 1, 0, 0, 2, 0, 0, 1, 0, 0};
static const float HAND_OBS[4] = {1, 0.25f, 0.5f, 2}, HAND_NEXT[4] = {1, 1, 0, 0.5f};
static const float HAND_R[2] = {1, 0.5f}, HAND_D[2] = {0.9f, 0}, HAND_W[2] = {1, 0.5f};
static const int32_t HAND_A[2] = {0, 1};

static void hand_learner(rd_learner_t *l, int double_dqn, double grad_clip) {
  const uint32_t hidden[] = {2};
  rd_learner_config_t c;
  rdt_dqn_config(&c, 2, 2, 1, hidden);
  c.double_dqn = double_dqn;
  c.grad_clip = grad_clip;
  c.lr = 0.01;
  c.target_period = 1; /* hard copy after every step */
  make(l, &c);
  assert_int_equal(l->n_nets, 2);
  assert_int_equal(rd_mlp_n_params(&l->net[0]), 12);
  memcpy(rd_mlp_params(&l->net[0]), HAND_ONLINE, sizeof HAND_ONLINE);
  memcpy(rd_mlp_params(&l->net[1]), HAND_TARGET, sizeof HAND_TARGET);
}

static rd_batch_t hand_batch(void) {
  rd_batch_t b = {2, HAND_OBS, HAND_A, NULL, HAND_R, HAND_D, HAND_NEXT, HAND_W};
  return b;
}

/* theta - lr * m^ / (sqrt(v^) + eps) after one Adam step from zero moments,
 * computed in double from the float gradient g (torch.optim.Adam). */
static double adam_first(double theta, float g, double lr) {
  double m = 0.1 * g, v = 0.001 * (double)g * g;
  double mh = m / (1 - 0.9), vh = v / (1 - 0.999);
  return theta - lr * mh / (sqrt(vh) + 1e-8);
}

static void test_dqn_by_hand(void **state) {
  (void)state;
  rd_learner_t l;
  hand_learner(&l, 1, 0.0);
  rd_batch_t b = hand_batch();
  float td[2];
  rd_step_stats_t st;
  rd_error_t err;
  assert_int_equal(rd_learner_step(&l, &b, td, &st, &err), RD_OK);

  /* delta_0 = 1.5 - 1.9 = -0.4 (quadratic: 0.08), delta_1 = 3.5 (linear:
   * 1 * (3.5 - 0.5) = 3, weight 0.5): L = (0.08 + 1.5) / 2 = 0.79. */
  assert_true(fabs(td[0] - 0.4) < 1e-6);
  assert_true(fabs(td[1] - 3.5) < 1e-6);
  assert_true(fabs(st.loss - 0.79) < 1e-6);
  assert_true(fabs(st.td_abs_mean - 1.95) < 1e-6);
  assert_true(fabs(st.td_abs_max - 3.5) < 1e-6);
  assert_true(st.actor_loss == 0.0);

  /* dL/dQ: row 0 w e / n = -0.2 on action 0; row 1 w delta / n = 0.25 on
   * action 1. h_0 = (1, 0.25), h_1 = (0.5, 2), both units active.
   *   dW2 = [-0.2 h_0; 0.25 h_1]    db2 = (-0.2, 0.25)
   *   dh_0 = W2^T (-0.2, 0) = (-0.2, 0), dh_1 = W2^T (0, 0.25) = (0, 0.5)
   *   dW1 = dh_0^T s_0 + dh_1^T s_1 = [-0.2 s_0; 0.5 s_1]   db1 = (-0.2, 0.5) */
  const double g_want[12] = {-0.2, -0.05, 0.25, 1.0, -0.2, 0.5,
                             -0.2, -0.05, 0.125, 0.5, -0.2, 0.25};
  const float *g = rd_mlp_grads(&l.net[0]);
  double nrm = 0;
  for (int k = 0; k < 12; k++) {
    if (fabs(g[k] - g_want[k]) > 1e-6) fail_msg("grad[%d] = %.8g, want %.8g", k, g[k], g_want[k]);
    nrm += g_want[k] * g_want[k];
  }
  assert_true(fabs(st.grad_norm - sqrt(nrm)) < 1e-6);

  /* One Adam step on exactly those gradients, then the hard copy. */
  const float *p = rd_mlp_params(&l.net[0]);
  for (int k = 0; k < 12; k++) {
    double want = adam_first(HAND_ONLINE[k], g[k], 0.01);
    if (fabs(p[k] - want) > 1e-6) fail_msg("param[%d] = %.9g, want %.9g", k, p[k], want);
  }
  assert_memory_equal(rd_mlp_params(&l.net[1]), p, 12 * sizeof(float));
  assert_int_equal(l.steps, 1);
  assert_int_equal(l.net[0].adam_t, 1);
  rd_learner_free(&l);

  /* Plain DQN: y_0 = 1 + 0.9 * max(2, 1) = 2.8, delta_0 = -1.3 is now in
   * the linear region: L = (0.8 + 1.5) / 2 = 1.15, dL/dQ_0 = -0.5. */
  hand_learner(&l, 0, 0.0);
  assert_int_equal(rd_learner_step(&l, &b, td, &st, &err), RD_OK);
  assert_true(fabs(td[0] - 1.3) < 1e-6);
  assert_true(fabs(td[1] - 3.5) < 1e-6);
  assert_true(fabs(st.loss - 1.15) < 1e-6);
  g = rd_mlp_grads(&l.net[0]);
  assert_true(fabs(g[10] - -0.5) < 1e-6); /* db2[0] */
  assert_true(fabs(g[6] - -0.5) < 1e-6);  /* dW2[0][0] = -0.5 * h_0[0] */
  rd_learner_free(&l);

  /* Clipping to 0.5: the gradient that reaches Adam has norm 0.5 (the
   * reported norm is the one before clipping). */
  hand_learner(&l, 1, 0.5);
  assert_int_equal(rd_learner_step(&l, &b, td, &st, &err), RD_OK);
  assert_true(fabs(st.grad_norm - sqrt(nrm)) < 1e-6);
  double clipped = 0;
  g = rd_mlp_grads(&l.net[0]);
  for (int k = 0; k < 12; k++) {
    double want = g_want[k] * 0.5 / (sqrt(nrm) + 1e-6);
    assert_true(fabs(g[k] - want) < 1e-6);
    clipped += (double)g[k] * g[k];
  }
  assert_true(fabs(sqrt(clipped) - 0.5) < 1e-6);
  rd_learner_free(&l);
}

/* ------------------------------------------------------------------ */
/* DDPG against double-precision references                            */
/* ------------------------------------------------------------------ */

static void ddpg_small(rd_learner_config_t *c) {
  const uint32_t ah[] = {7, 5}, ch[] = {6, 5};
  rdt_ddpg_config(c, 3, 2, 2, ah, 2, ch);
  c->hidden_act = RD_NN_TANH; /* smooth, so differences need no kink handling */
  c->action_low = -2.0f;
  c->action_high = 1.0f;
  c->grad_clip = 0.0; /* the raw gradients stay in the networks' buffers */
  c->tau = 0.1;
  c->critic_lr = 1e-2;
  c->lr = 1e-2;
  c->seed = 42;
}

/* Central differences of f over every parameter of p (n doubles) against
 * the float gradient g. h = 1e-6 in double leaves ~1e-10 of error, so the
 * tolerance is the float gradient's own rounding. */
typedef double (*loss_fn)(const void *ctx, const double *p);

static void fd_check(const char *what, loss_fn f, const void *ctx, double *p, size_t n,
                     const float *g) {
  double gmax = 0;
  for (size_t k = 0; k < n; k++) gmax = fmax(gmax, fabs(g[k]));
  assert_true(gmax > 1e-3); /* a non-trivial gradient */
  size_t significant = 0;
  double worst = 0;
  for (size_t k = 0; k < n; k++) {
    double orig = p[k], h = 1e-6;
    p[k] = orig + h;
    double lp = f(ctx, p);
    p[k] = orig - h;
    double lm = f(ctx, p);
    p[k] = orig;
    double num = (lp - lm) / (2 * h), a = g[k];
    double tol = 2e-4 * fmax(fabs(a), fabs(num)) + 2e-6 * gmax;
    if (fabs(a) > 1e-2 * gmax) significant++;
    worst = fmax(worst, fabs(a - num) / tol);
    if (fabs(a - num) > tol)
      fail_msg("%s[%zu]: analytic %.9g, finite differences %.9g", what, k, a, num);
  }
  assert_true(significant * 2 > n);
  print_message("%s: %zu parameters, worst error %.3g of tolerance\n", what, n, worst);
}

typedef struct {
  const ddpg_ref_t *r;
  const double *other; /* the fixed network's params */
  const double *y;
} fd_ctx_t;

static double actor_loss_of_actor(const void *ctx, const double *pa) {
  const fd_ctx_t *c = ctx;
  return ref_actor_loss(c->r, pa, c->other);
}

static double critic_loss_of_critic(const void *ctx, const double *pc) {
  const fd_ctx_t *c = ctx;
  return ref_critic_loss(c->r, pc, c->y, NULL);
}

static void test_ddpg_gradients_and_targets(void **state) {
  (void)state;
  rd_learner_config_t c;
  ddpg_small(&c);
  rd_learner_t l;
  make(&l, &c);
  assert_int_equal(l.n_nets, 4);
  /* Targets start as copies of the online networks. */
  assert_memory_equal(l.net[0].params, l.net[1].params, l.net[0].n_params * sizeof(float));
  assert_memory_equal(l.net[2].params, l.net[3].params, l.net[2].n_params * sizeof(float));
  /* Move the targets away from the online networks so the target path is
   * really the target networks' (and nonzero biases everywhere). */
  for (int i = 0; i < 4; i++)
    for (size_t k = 0; k < l.net[i].n_params; k++)
      l.net[i].params[k] += rdt_unif(900 + (uint64_t)i, k, -0.3f, 0.3f);

  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, 6, 77);
  bb.discount[1] = 0.0f;
  double *pa = to_double(l.net[0].params, l.net[0].n_params);
  double *pat = to_double(l.net[1].params, l.net[1].n_params);
  double *pc = to_double(l.net[2].params, l.net[2].n_params);
  double *pct = to_double(l.net[3].params, l.net[3].n_params);
  float *old_at = malloc(l.net[1].n_params * sizeof(float));
  float *old_ct = malloc(l.net[3].n_params * sizeof(float));
  memcpy(old_at, l.net[1].params, l.net[1].n_params * sizeof(float));
  memcpy(old_ct, l.net[3].params, l.net[3].n_params * sizeof(float));

  float td[6];
  rd_step_stats_t st;
  rd_error_t err;
  assert_int_equal(rd_learner_step(&l, &bb.b, td, &st, &err), RD_OK);

  ddpg_ref_t r = {&c, l.net[0].spec, l.net[2].spec, &bb.b};
  assert_int_equal(r.cspec.sizes[0], 5);
  assert_int_equal(r.cspec.n_layers, 3);
  assert_int_equal(r.aspec.n_layers, 3);
  assert_int_equal(r.aspec.act[2], RD_NN_TANH);
  assert_int_equal(r.cspec.act[2], RD_NN_IDENTITY);
  for (int k = 0; k < 2; k++) { /* the configured hidden activation in both */
    assert_int_equal(r.aspec.act[k], RD_NN_TANH);
    assert_int_equal(r.cspec.act[k], RD_NN_TANH);
  }
  double y[6], q[6];
  ref_targets(&r, pat, pct, y);
  double closs = ref_critic_loss(&r, pc, y, q);
  /* Critic target and priorities: |Q(s, a) - y| before the update. */
  for (int i = 0; i < 6; i++)
    if (fabs(td[i] - fabs(q[i] - y[i])) > 1e-5 * (1 + fabs(y[i])))
      fail_msg("td[%d] = %.8g, reference %.8g", i, td[i], fabs(q[i] - y[i]));
  assert_true(fabs(st.loss - closs) < 1e-5 * (1 + closs));
  double aloss = ref_actor_loss(&r, pa, pc);
  assert_true(fabs(st.actor_loss - aloss) < 1e-5 * (1 + fabs(aloss)));

  /* Gradients of both losses against central differences in double. */
  fd_ctx_t ca = {&r, pc, NULL}, cc = {&r, NULL, y};
  fd_check("actor dL/dtheta", actor_loss_of_actor, &ca, pa, l.net[0].n_params, l.net[0].grads);
  fd_check("critic dL/dphi", critic_loss_of_critic, &cc, pc, l.net[2].n_params, l.net[2].grads);

  /* Polyak: target = tau online_new + (1 - tau) target_old. */
  for (int t = 1; t <= 3; t += 2) {
    const float *old = t == 1 ? old_at : old_ct;
    for (size_t k = 0; k < l.net[t].n_params; k++) {
      float want = 0.1f * l.net[t - 1].params[k] + 0.9f * old[k];
      assert_true(fabsf(l.net[t].params[k] - want) <= 1e-6f * (1 + fabsf(want)));
    }
  }
  free(pa);
  free(pat);
  free(pc);
  free(pct);
  free(old_at);
  free(old_ct);
  rdt_batch_free(&bb);
  rd_learner_free(&l);
}

/* Hard copies every target_period steps: untouched before, equal after. */
static void check_hard_copy(rd_learner_config_t *c) {
  c->target_period = 3;
  rd_learner_t l;
  make(&l, c);
  int pairs = l.n_nets / 2;
  float *init[2];
  for (int p = 0; p < pairs; p++) {
    rd_mlp_t *t = &l.net[2 * p + 1];
    init[p] = malloc(t->n_params * sizeof(float));
    memcpy(init[p], t->params, t->n_params * sizeof(float));
  }
  rdt_batch_t bb;
  rdt_batch_make(&bb, c, 16, 5);
  for (int s = 1; s <= 6; s++) {
    assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
    for (int p = 0; p < pairs; p++) {
      rd_mlp_t *on = &l.net[2 * p], *t = &l.net[2 * p + 1];
      size_t nb = t->n_params * sizeof(float);
      if (s % 3 == 0) {
        assert_memory_equal(t->params, on->params, nb);
        memcpy(init[p], t->params, nb);
      } else {
        assert_memory_equal(t->params, init[p], nb);
        assert_memory_not_equal(t->params, on->params, nb);
      }
    }
  }
  for (int p = 0; p < pairs; p++) free(init[p]);
  rdt_batch_free(&bb);
  rd_learner_free(&l);
}

static void test_target_rules(void **state) {
  (void)state;
  rd_learner_config_t c;
  ddpg_small(&c);
  check_hard_copy(&c);
  const uint32_t h[] = {8};
  rdt_dqn_config(&c, 3, 3, 1, h);
  check_hard_copy(&c);
  /* DQN Polyak. */
  c.target_period = 0;
  c.tau = 0.25;
  rd_learner_t l;
  make(&l, &c);
  for (size_t k = 0; k < l.net[1].n_params; k++) l.net[1].params[k] = 0.0f;
  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, 8, 9);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
  for (size_t k = 0; k < l.net[1].n_params; k++)
    assert_true(l.net[1].params[k] == 0.25f * l.net[0].params[k] + 0.75f * 0.0f);
  rdt_batch_free(&bb);
  rd_learner_free(&l);
}

/* ------------------------------------------------------------------ */
/* Learning                                                            */
/* ------------------------------------------------------------------ */

/* A learner for c, seeded with seed, that took `steps` steps on the whole
 * data set b; st receives the last step's statistics. */
static void train_on(rd_learner_t *l, rd_learner_config_t *c, uint64_t seed, const rd_batch_t *b,
                     int steps, rd_step_stats_t *st) {
  c->max_batch = (uint32_t)b->n;
  c->seed = seed;
  make(l, c);
  for (int k = 0; k < steps; k++) assert_int_equal(rd_learner_step(l, b, NULL, st, NULL), RD_OK);
}

/* A chain of 4 states (one-hot observations), actions left (0) and right
 * (1). Right from state 3 ends the episode with reward 1; every other move
 * gives 0; left from state 0 stays. With gamma = 0.9:
 *   Q*(s, right) = gamma^(3 - s),  Q*(0, left) = gamma^4,  Q*(s, left) = gamma^(5 - s).
 * The dataset holds every (s, a) as a 1-step row and, for s < 3, as a
 * 2-step row continuing with "right" (optimal, so its target is unbiased):
 * R = r_0 + gamma r_1, discount gamma^2 or 0. */
static void test_dqn_learns_chain(void **state) {
  (void)state;
  enum { S = 4, ROWS = 8 + 6 };
  const double gamma = 0.9;
  float obs[ROWS * S] = {0}, next[ROWS * S] = {0}, R[ROWS], D[ROWS];
  int32_t A[ROWS];
  int row = 0;
  for (int steps = 1; steps <= 2; steps++)
    for (int s = 0; s < S; s++)
      for (int a = 0; a < 2; a++) {
        if (steps == 2 && s == 3) continue; /* 2-step rows for s < 3 only */
        int s1 = a == 1 ? s + 1 : (s > 0 ? s - 1 : 0);
        double r = (s == 3 && a == 1) ? 1.0 : 0.0, disc = s1 == S ? 0.0 : gamma;
        int end = s1;
        if (steps == 2 && s1 < S) { /* then right from s1 */
          int s2 = s1 + 1;
          r += gamma * (s1 == 3 ? 1.0 : 0.0);
          disc = s2 == S ? 0.0 : gamma * gamma;
          end = s2;
        }
        obs[row * S + s] = 1.0f;
        if (end < S) next[row * S + end] = 1.0f;
        A[row] = a;
        R[row] = (float)r;
        D[row] = (float)disc;
        row++;
      }
  assert_int_equal(row, ROWS);

  const uint32_t h[] = {32, 32};
  rd_learner_config_t c;
  rdt_dqn_config(&c, S, 2, 2, h);
  c.lr = 3e-3;
  c.target_period = 25;
  rd_learner_t l;
  rd_step_stats_t st;
  train_on(&l, &c, 7, &(rd_batch_t){ROWS, obs, A, NULL, R, D, next, NULL}, 3000, &st);

  float probe[S * S] = {0}, qv[S * 2];
  for (int s = 0; s < S; s++) probe[s * S + s] = 1.0f;
  assert_int_equal(rd_mlp_forward(&l.net[0], S, probe, qv, NULL), RD_OK);
  double worst = 0;
  for (int s = 0; s < S; s++) {
    double qr = pow(gamma, 3 - s), ql = s == 0 ? pow(gamma, 4) : pow(gamma, 5 - s);
    worst = fmax(worst, fmax(fabs(qv[2 * s + 1] - qr), fabs(qv[2 * s] - ql)));
    assert_true(qv[2 * s + 1] > qv[2 * s]); /* greedy policy goes right */
  }
  print_message("chain: max |Q - Q*| = %.4f after 3000 steps (loss %.2g)\n", worst, st.loss);
  assert_true(worst < 0.03);
  rd_learner_free(&l);
}

/* A one-step bandit: reward -(a - 0.6)^2 for a in [-2, 2], so the best
 * action is 0.6 (actor output tanh = 0.3). 64 fixed actions spread over the
 * range; the critic learns the parabola, the actor climbs it. */
static void test_ddpg_learns_bandit(void **state) {
  (void)state;
  enum { N = 64 };
  float obs[N], next[N], act[N], R[N], D[N];
  for (int i = 0; i < N; i++) {
    obs[i] = next[i] = 0.5f;
    act[i] = -2.0f + 4.0f * (float)i / (N - 1);
    R[i] = -(act[i] - 0.6f) * (act[i] - 0.6f);
    D[i] = 0.0f;
  }
  const uint32_t h[] = {32, 32};
  rd_learner_config_t c;
  rdt_ddpg_config(&c, 1, 1, 2, h, 2, h);
  c.action_low = -2.0f;
  c.action_high = 2.0f;
  c.lr = 3e-3;
  c.critic_lr = 1e-2;
  rd_learner_t l;
  rd_step_stats_t st;
  train_on(&l, &c, 3, &(rd_batch_t){N, obs, NULL, act, R, D, next, NULL}, 2000, &st);

  /* The policy as an actor would run it: shipped in the flat format. */
  size_t nb = rd_learner_policy_bytes(&l);
  unsigned char *buf = malloc(nb);
  assert_int_equal(rd_learner_policy_save(&l, buf, nb, NULL, NULL), RD_OK);
  rd_mlp_config_t mc;
  rd_mlp_config_default(&mc);
  assert_int_equal(rd_learner_policy_spec(&c, &mc.spec, NULL), RD_OK);
  mc.inference_only = 1;
  rd_mlp_t actor;
  assert_int_equal(rd_mlp_init(&actor, &mc, NULL), RD_OK);
  assert_int_equal(rd_mlp_load(&actor, buf, nb, NULL), RD_OK);
  float y;
  assert_int_equal(rd_mlp_forward(&actor, 1, obs, &y, NULL), RD_OK);
  float a = c.action_low + (y + 1.0f) / 2.0f * (c.action_high - c.action_low);
  print_message("bandit: action %.4f (best 0.6), critic loss %.2g, actor loss %.4f\n", a, st.loss,
                st.actor_loss);
  assert_true(fabsf(a - 0.6f) < 0.05f);
  /* -Q(s, mu(s)) ~ 0 at the optimum, up to the critic's error there:
   * 0.005 in optimised builds, 0.017 at -O0 (whose products are not
   * contracted into FMAs, so training takes another path). */
  assert_true(fabs(st.actor_loss) < 0.03);
  free(buf);
  rd_mlp_free(&actor);
  rd_learner_free(&l);
}

/* ------------------------------------------------------------------ */
/* Determinism                                                         */
/* ------------------------------------------------------------------ */

/* steps steps of the same batches on a learner with the given threads;
 * returns its snapshot and the last td. */
static snap_t run_steps(const rd_learner_config_t *c0, uint32_t threads, size_t n, int steps,
                        float *td) {
  rd_learner_config_t c = *c0;
  c.threads = threads;
  c.max_batch = (uint32_t)n;
  rd_learner_t l;
  make(&l, &c);
  for (int k = 0; k < steps; k++) {
    rdt_batch_t bb;
    rdt_batch_make(&bb, &c, n, 1000 + 10 * (uint64_t)k);
    assert_int_equal(rd_learner_step(&l, &bb.b, td, NULL, NULL), RD_OK);
    rdt_batch_free(&bb);
  }
  snap_t s = snapshot(&l);
  rd_learner_free(&l);
  return s;
}

static void determinism_case(const rd_learner_config_t *c, size_t n, int steps) {
  float *td1 = malloc(n * sizeof *td1), *td2 = malloc(n * sizeof *td2);
  snap_t a = run_steps(c, 1, n, steps, td1);
  snap_t a2 = run_steps(c, 1, n, steps, td2);
  assert_int_equal(a.len, a2.len);
  assert_memory_equal(a.bytes, a2.bytes, a.len);
  assert_memory_equal(td1, td2, n * sizeof *td1);
  for (uint32_t t = 2; t <= 3; t++) {
    snap_t b = run_steps(c, t, n, steps, td2);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.bytes, b.bytes, a.len);
    assert_memory_equal(td1, td2, n * sizeof *td1);
    free(b.bytes);
  }
  /* Another seed gives other weights (the comparison is not vacuous). */
  rd_learner_config_t other = *c;
  other.seed ^= 1;
  snap_t d = run_steps(&other, 1, n, steps, td2);
  assert_memory_not_equal(a.bytes + sizeof(uint64_t), d.bytes + sizeof(uint64_t), 64);
  free(d.bytes);
  free(a.bytes);
  free(a2.bytes);
  free(td1);
  free(td2);
}

static void test_determinism(void **state) {
  (void)state;
  /* Shapes whose products and loops take the threaded paths (papers/001
   * Table III sizes: DQN and the small DDPG on replicas, the large DDPG on
   * one copy), and a small one that stays serial. */
  const uint32_t q[] = {64, 64}, big[] = {256, 256}, eight[] = {8, 8};
  rd_learner_config_t c;
  rdt_dqn_config(&c, 4, 2, 2, q);
  determinism_case(&c, 2048, 3);
  rdt_ddpg_config(&c, 11, 3, 2, big, 2, big);
  determinism_case(&c, 512, 2);
  rdt_ddpg_config(&c, 4, 1, 2, q, 2, q); /* small enough for replicas (learner.h) */
  determinism_case(&c, 512, 3);
  rdt_ddpg_config(&c, 4, 1, 2, eight, 2, eight);
  determinism_case(&c, 64, 5);
  /* Shards of at most 512 rows past 8 of them (wide layers), up to 32. */
  rdt_dqn_config(&c, 4, 2, 2, q);
  determinism_case(&c, 4608, 2);
}

/* rd_learner_shards: 128-row shards up to 8; past 8 shards of 512 rows,
 * networks with a hidden layer of 64 units or more get shards of at most
 * 512 rows, up to 32; narrower ones stay at 8. Every batch size up to
 * max_batch steps within the views' rows (ASan's check). */
static void test_shard_counts(void **state) {
  (void)state;
  const uint32_t q[] = {64, 64}, narrow[] = {8, 63}, wide[] = {8, 64};
  rd_learner_config_t c, n, w;
  rdt_dqn_config(&c, 4, 2, 2, q);
  rdt_ddpg_config(&n, 4, 1, 2, narrow, 2, narrow);
  rdt_ddpg_config(&w, 4, 1, 2, narrow, 2, wide); /* only the critic is wide */
  const struct {
    size_t rows;
    uint32_t wide, narrow;
  } want[] = {{1, 1, 1},     {255, 1, 1},    {256, 2, 2},    {1024, 8, 8},
              {4096, 8, 8},  {4097, 9, 8},   {4608, 9, 8},   {4609, 10, 8},
              {16384, 32, 8}, {16385, 32, 8}, {1u << 20, 32, 8}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_int_equal(rd_learner_shards(&c, want[i].rows), want[i].wide);
    assert_int_equal(rd_learner_shards(&w, want[i].rows), want[i].wide);
    assert_int_equal(rd_learner_shards(&n, want[i].rows), want[i].narrow);
  }
  c.max_batch = 5200;
  c.threads = 2;
  rd_learner_t l;
  make(&l, &c);
  const size_t sizes[] = {5200, 4097, 5119, 4608, 4100, 4096, 1100};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    rdt_batch_t bb;
    rdt_batch_make(&bb, &c, sizes[i], 77 + i);
    assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
    rdt_batch_free(&bb);
  }
  rd_learner_free(&l);
}

/* a and b hold the same weights, moments and step counts. */
static void same_state(const rd_learner_t *a, const rd_learner_t *b) {
  snap_t x = snapshot(a), y = snapshot(b);
  assert_int_equal(x.len, y.len);
  assert_memory_equal(x.bytes, y.bytes, x.len);
  free(x.bytes);
  free(y.bytes);
}

/* The tuning tests' learners: the same DQN (4-64-64-2, max_batch 512) on
 * one thread and on two; *c is left at two threads. */
static void make_tuning_pair(rd_learner_config_t *c, rd_learner_t *one, rd_learner_t *two) {
  const uint32_t q[] = {64, 64};
  rdt_dqn_config(c, 4, 2, 2, q);
  c->max_batch = 512;
  c->threads = 1;
  make(one, c);
  c->threads = 2;
  make(two, c);
}

/* Steps a and b on batch bb until b's tuning leaves `phase` (bounded: a
 * trial lasts RD_LEARNER_TUNE_TRIAL_S), checking they agree. */
static void step_out_of_phase(rd_learner_t *a, rd_learner_t *b, rdt_batch_t *bb, uint32_t phase) {
  static float ta[512], tb[512];
  double t0 = rd_clock_now();
  while (b->tune.phase == phase) {
    assert_true(rd_clock_now() - t0 < 60.0);
    assert_int_equal(rd_learner_step(a, &bb->b, ta, NULL, NULL), RD_OK);
    assert_int_equal(rd_learner_step(b, &bb->b, tb, NULL, NULL), RD_OK);
    assert_memory_equal(ta, tb, bb->b.n * sizeof ta[0]);
  }
}

/* Thread tuning (learner.h): a 2-thread learner runs a trial with its team,
 * one alone, then holds the faster mode; weights stay bit-identical to a
 * 1-thread learner through every switch, and a new batch size restarts the
 * trial. */
static void test_thread_tuning(void **state) {
  (void)state;
  rd_learner_config_t c;
  rd_learner_t one, two;
  make_tuning_pair(&c, &one, &two);
  assert_int_equal(two.tune.threads, 2);
  static float td1[512], td2[512];
  int team_steps = 0, alone_steps = 0, k = 0, held_at = -1;
  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, 256, 77);
  /* Trials take at least RD_LEARNER_TUNE_TRIAL_S each: bounded by time. */
  for (; k < 200000 && held_at < 0; k++) {
    assert_int_equal(rd_learner_step(&one, &bb.b, td1, NULL, NULL), RD_OK);
    assert_int_equal(rd_learner_step(&two, &bb.b, td2, NULL, NULL), RD_OK);
    if (k % 64 == 0) assert_memory_equal(td1, td2, 256 * sizeof td1[0]);
    if (two.tune.phase == 0) team_steps += two.tune.threads == 2;
    if (two.tune.phase == 1) alone_steps += two.tune.threads == 1;
    if (two.tune.phase == 2) held_at = k;
  }
  rdt_batch_free(&bb);
  assert_true(held_at > 0);
  assert_true(team_steps >= RD_LEARNER_TUNE_STEPS);
  assert_true(alone_steps >= RD_LEARNER_TUNE_STEPS);
  assert_true(two.tune.threads == 1 || two.tune.threads == 2);
  assert_true(two.tune.t_team > 0 && two.tune.t_alone > 0);
  /* The hold: short after a close call (learner.h), the full one else. */
  double win = fmin(two.tune.t_team, two.tune.t_alone), lose = fmax(two.tune.t_team, two.tune.t_alone);
  double hold = lose < win * (1.0 + RD_LEARNER_TUNE_CLOSE) ? RD_LEARNER_TUNE_RETRY_S
                                                             : RD_LEARNER_TUNE_HOLD_S;
  assert_true(fabs(two.tune.hold - hold) < 1e-9);
  assert_true(two.tune.held == 0);
  /* The hold counts steps, not wall time: a pause longer than the hold
   * (a pipeline between train requests) does not end it... */
  rdt_batch_make(&bb, &c, 256, 77);
  usleep((useconds_t)(hold * 1e6) + 100000);
  assert_int_equal(rd_learner_step(&one, &bb.b, td1, NULL, NULL), RD_OK);
  assert_int_equal(rd_learner_step(&two, &bb.b, td2, NULL, NULL), RD_OK);
  assert_int_equal(two.tune.phase, 2);
  assert_true(two.tune.held < hold);
  /* ...and stepping for the hold's length starts the next trial (one
   * steps too, so that the weights still compare below). */
  double t_start = rd_clock_now();
  step_out_of_phase(&one, &two, &bb, 2);
  assert_int_equal(two.tune.phase, 0);
  assert_true(rd_clock_now() - t_start < hold + 2.0);
  assert_true(rd_clock_now() - t_start >= hold * 0.9);
  rdt_batch_free(&bb);
  /* A new batch size: a new trial, with the team first. */
  rdt_batch_make(&bb, &c, 512, 78);
  assert_int_equal(rd_learner_step(&one, &bb.b, td1, NULL, NULL), RD_OK);
  assert_int_equal(rd_learner_step(&two, &bb.b, td2, NULL, NULL), RD_OK);
  assert_memory_equal(td1, td2, 512 * sizeof td1[0]);
  rdt_batch_free(&bb);
  assert_int_equal(two.tune.phase, 0);
  assert_int_equal(two.tune.batch, 512);
  assert_int_equal(two.tune.threads, 2);
  same_state(&one, &two);
  assert_int_equal(one.tune.phase, 0); /* a 1-thread learner never tunes */
  assert_int_equal(one.tune.count, 0);
  rd_learner_free(&one);
  rd_learner_free(&two);
}

/* A team trial that lost clearly (as one run while a pipeline fills) is
 * run again before the learner goes alone for the hold, and the round
 * decides on the second one; if alone still wins, it goes alone. */
static void test_tuning_second_team_trial(void **state) {
  (void)state;
  rd_learner_config_t c;
  rd_learner_t one, two;
  make_tuning_pair(&c, &one, &two);
  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, 256, 77);
  step_out_of_phase(&one, &two, &bb, 0); /* the first team trial */
  assert_int_equal(two.tune.phase, 1);
  two.tune.t_team = 1.0; /* as if the team had taken a second a step */
  step_out_of_phase(&one, &two, &bb, 1); /* the alone trial wins clearly */
  assert_int_equal(two.tune.phase, 0);
  assert_int_equal(two.tune.second, 1);
  assert_int_equal(two.tune.threads, 2);
  const double alone = two.tune.t_alone;
  step_out_of_phase(&one, &two, &bb, 0); /* the team's second trial decides */
  assert_int_equal(two.tune.phase, 2);
  assert_int_equal(two.tune.second, 0);
  assert_true(two.tune.t_team < 1.0);
  assert_true(two.tune.t_alone == alone);
  assert_int_equal(two.tune.threads, two.tune.t_alone <= two.tune.t_team ? 1 : 2);
  rdt_batch_free(&bb);

  /* A new round (a new batch size): alone wins the second time too. */
  rdt_batch_make(&bb, &c, 512, 78);
  step_out_of_phase(&one, &two, &bb, 2);
  step_out_of_phase(&one, &two, &bb, 0);
  two.tune.t_team = 1.0;
  step_out_of_phase(&one, &two, &bb, 1);
  assert_int_equal(two.tune.phase, 0);
  assert_int_equal(two.tune.second, 1);
  two.tune.t_alone = 1e-9; /* alone still far ahead when the second trial ends */
  step_out_of_phase(&one, &two, &bb, 0);
  assert_int_equal(two.tune.phase, 2);
  assert_int_equal(two.tune.threads, 1);
  assert_true(fabs(two.tune.hold - RD_LEARNER_TUNE_HOLD_S) < 1e-9);
  rdt_batch_free(&bb);
  rd_learner_free(&one);
  rd_learner_free(&two);
}

/* A sharded step's update (learner.c: the blocks over the team, or the
 * replicas) is the whole-network calls' (nn.h): from the state before the
 * step and the gradients it left (summed and clipped), one
 * rd_mlp_adam_step and rd_mlp_polyak (or the target rule's copy) give its
 * weights, moments and targets bit for bit; the clip took the gradients
 * to the clip norm. */
static void whole_calls_case(const rd_learner_config_t *c0, uint32_t threads, size_t n) {
  rd_learner_config_t c = *c0;
  c.threads = threads;
  c.max_batch = (uint32_t)n;
  c.grad_clip = 0.01; /* below any norm here: every step clips */
  rd_learner_t l;
  make(&l, &c);
  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, n, 5);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
  rd_mlp_t before[4];
  for (int i = 0; i < l.n_nets; i++) {
    rd_mlp_config_t mc;
    rd_mlp_config_default(&mc);
    mc.spec = l.net[i].spec;
    mc.max_batch = 1;
    mc.inference_only = !l.net[i].trainable;
    assert_int_equal(rd_mlp_init(&before[i], &mc, NULL), RD_OK);
    const size_t bytes = l.net[i].n_params * sizeof(float);
    memcpy(before[i].params, l.net[i].params, bytes);
    if (l.net[i].trainable) {
      memcpy(before[i].adam_m, l.net[i].adam_m, bytes);
      memcpy(before[i].adam_v, l.net[i].adam_v, bytes);
      before[i].adam_t = l.net[i].adam_t;
    }
  }
  rd_step_stats_t st;
  rdt_batch_free(&bb);
  rdt_batch_make(&bb, &c, n, 6);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, &st, NULL), RD_OK);
  assert_true(st.grad_norm > c.grad_clip);
  for (int i = 0; i < l.n_nets; i += 2) { /* the online networks; i + 1 their targets */
    rd_mlp_t *m = &before[i], *t = &before[i + 1];
    const size_t bytes = m->n_params * sizeof(float);
    memcpy(m->grads, l.net[i].grads, bytes);
    const double norm = rd_mlp_grad_norm(m);
    assert_true(fabs(norm - c.grad_clip) <= 1e-4 * c.grad_clip);
    rd_adam_config_t a;
    rd_adam_config_default(&a);
    a.lr = c.algo == RD_ALGO_DDPG && i == 2 ? c.critic_lr : c.lr;
    assert_int_equal(rd_mlp_adam_step(m, &a, NULL), RD_OK);
    if (c.target_period == 0)
      assert_int_equal(rd_mlp_polyak(t, m, c.tau, NULL), RD_OK);
    else if (l.steps % c.target_period == 0)
      assert_int_equal(rd_mlp_copy_params(t, m, NULL), RD_OK);
    assert_memory_equal(m->params, l.net[i].params, bytes);
    assert_memory_equal(m->adam_m, l.net[i].adam_m, bytes);
    assert_memory_equal(m->adam_v, l.net[i].adam_v, bytes);
    assert_int_equal(m->adam_t, l.net[i].adam_t);
    assert_memory_equal(t->params, l.net[i + 1].params, bytes);
  }
  for (int i = 0; i < l.n_nets; i++) rd_mlp_free(&before[i]);
  rdt_batch_free(&bb);
  rd_learner_free(&l);
}

static void test_sharded_update_whole_calls(void **state) {
  (void)state;
  const uint32_t q[] = {64, 64}, big[] = {256, 256};
  rd_learner_config_t c;
  rdt_dqn_config(&c, 4, 2, 2, q);
  whole_calls_case(&c, 1, 256); /* blocks, on the caller */
  whole_calls_case(&c, 2, 256); /* replicas */
  c.target_period = 2; /* the second step copies the target */
  whole_calls_case(&c, 1, 256);
  whole_calls_case(&c, 2, 256);
  c.target_period = 3; /* and the second of three keeps it */
  whole_calls_case(&c, 1, 256);
  whole_calls_case(&c, 2, 256);
  rdt_ddpg_config(&c, 4, 1, 2, q, 2, q);
  c.critic_lr = 2e-3;
  whole_calls_case(&c, 2, 256); /* replicas, two online networks */
  rdt_ddpg_config(&c, 11, 3, 2, big, 2, big);
  c.critic_lr = 2e-3;
  whole_calls_case(&c, 2, 256); /* blocks over the team */
}

/* Replicas (learner.h): a 2-thread learner's team steps run on copies of
 * its networks. A state loaded into it, or parameters written directly
 * and announced with rd_learner_params_changed, reach every copy before
 * the next team step; while the team has idle work (a pipeline's
 * sampler, rd_learner_set_idle) it updates one copy in blocks, and the
 * copies are synced when the idle work goes. Through all of it the
 * learner agrees bit for bit with a 1-thread learner given the same. */
static int no_work(void *arg) {
  (void)arg;
  return 0;
}


static void steps_agree(rd_learner_t *a, rd_learner_t *b, rdt_batch_t *bb, int steps) {
  static float ta[512], tb[512];
  for (int k = 0; k < steps; k++) {
    assert_int_equal(rd_learner_step(a, &bb->b, ta, NULL, NULL), RD_OK);
    assert_int_equal(rd_learner_step(b, &bb->b, tb, NULL, NULL), RD_OK);
    assert_memory_equal(ta, tb, bb->b.n * sizeof ta[0]);
  }
}

static void test_replicas_follow_changes(void **state) {
  (void)state;
  rd_learner_config_t c, oc;
  rd_learner_t one, two, other;
  make_tuning_pair(&c, &one, &two);
  oc = c;
  oc.threads = 1;
  oc.seed = c.seed + 99;
  make(&other, &oc);
  rdt_batch_t bb;
  rdt_batch_make(&bb, &c, 256, 41);
  steps_agree(&one, &two, &bb, 3);
  /* Another learner's state, loaded into both. */
  assert_int_equal(rd_learner_step(&other, &bb.b, NULL, NULL, NULL), RD_OK);
  const size_t len = rd_learner_state_bytes(&other);
  uint8_t *buf = malloc(len);
  size_t written = 0;
  assert_int_equal(rd_learner_state_save(&other, buf, len, &written, NULL), RD_OK);
  assert_int_equal(rd_learner_state_load(&one, buf, written, NULL), RD_OK);
  assert_int_equal(rd_learner_state_load(&two, buf, written, NULL), RD_OK);
  steps_agree(&one, &two, &bb, 3);
  /* Parameters written directly, then announced. */
  rd_learner_t *ls[2] = {&one, &two};
  for (int i = 0; i < 2; i++) {
    float *p = rd_mlp_params(&ls[i]->net[0]);
    for (size_t k = 0; k < rd_mlp_n_params(&ls[i]->net[0]); k++) p[k] *= 0.5f;
    rd_learner_params_changed(ls[i]);
  }
  steps_agree(&one, &two, &bb, 3);
  /* Idle work on, then off again. */
  rd_learner_set_idle(&two, no_work, NULL);
  steps_agree(&one, &two, &bb, 3);
  rd_learner_set_idle(&two, NULL, NULL);
  steps_agree(&one, &two, &bb, 3);
  /* Every step above ran on the team (its first trial lasts longer). */
  assert_int_equal(two.tune.phase, 0);
  assert_int_equal(two.tune.threads, 2);
  same_state(&one, &two);
  free(buf);
  rdt_batch_free(&bb);
  rd_learner_free(&one);
  rd_learner_free(&two);
  rd_learner_free(&other);
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static void expect_config_error(const rd_learner_config_t *c, const char *what) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_learner_config_validate(c, &err);
  if (rc != RD_EINVAL) fail_msg("%s: validate returned %d", what, rc);
  assert_true(strlen(err.msg) > 0);
  rd_learner_t l;
  memset(&l, 0xab, sizeof l);
  assert_int_equal(rd_learner_init(&l, c, &err), RD_EINVAL);
  assert_int_equal(l.n_nets, 0);
  rd_learner_free(&l); /* safe after a failed init */
}

static void test_config_errors(void **state) {
  (void)state;
  const uint32_t h[] = {16, 16};
  rd_learner_config_t good, c;
  rdt_dqn_config(&good, 4, 2, 2, h);
  assert_int_equal(rd_learner_config_validate(&good, NULL), RD_OK);
  rd_learner_config_default(&c);
  expect_config_error(&c, "defaults without dims");
#define BAD(field, value)              \
  do {                                 \
    c = good;                          \
    c.field = value;                   \
    expect_config_error(&c, #field);   \
  } while (0)
  BAD(algo, (rd_algo_t)0);
  BAD(algo, (rd_algo_t)3);
  BAD(obs_dim, 0);
  BAD(obs_dim, RD_NN_MAX_UNITS + 1);
  BAD(num_actions, 0);
  BAD(num_actions, 1);
  BAD(n_hidden, RD_LEARNER_MAX_HIDDEN + 1);
  BAD(hidden[1], 0);
  BAD(hidden_act, RD_NN_IDENTITY);
  BAD(hidden_act, (rd_nn_act_t)7);
  BAD(lr, 0.0);
  BAD(lr, -1e-3);
  BAD(lr, NAN);
  BAD(lr, INFINITY);
  BAD(tau, 0.0);
  BAD(tau, 1.5);
  BAD(tau, NAN);
  BAD(grad_clip, -1.0);
  BAD(grad_clip, INFINITY);
  BAD(grad_clip, NAN);
  BAD(huber_delta, 0.0);
  BAD(huber_delta, NAN);
  BAD(double_dqn, 2);
  BAD(max_batch, 0);
  BAD(max_batch, RD_MLP_MAX_BATCH + 1);
  BAD(threads, RD_MLP_MAX_THREADS + 1);
  /* Too many parameters for one network (RD_NN_MAX_PARAMS). */
  c = good;
  c.hidden[0] = c.hidden[1] = 65536;
  expect_config_error(&c, "parameter budget");

  const uint32_t ah[] = {8};
  rdt_ddpg_config(&good, 3, 2, 1, ah, 1, ah);
  assert_int_equal(rd_learner_config_validate(&good, NULL), RD_OK);
  BAD(action_dim, 0);
  BAD(obs_dim, RD_NN_MAX_UNITS); /* obs + action exceeds the critic's input */
  BAD(critic_lr, 0.0);
  BAD(critic_lr, NAN);
  BAD(n_critic_hidden, RD_LEARNER_MAX_HIDDEN + 1);
  BAD(critic_hidden[0], 0);
  BAD(action_low, 1.0f);
  BAD(action_low, 2.0f);
  BAD(action_high, NAN);
  BAD(action_low, -INFINITY);
#undef BAD

  /* Specs: DQN has no critic; DDPG's policy is the tanh actor. */
  rd_nn_spec_t s;
  rd_error_t err;
  rdt_dqn_config(&c, 4, 2, 2, h);
  assert_int_equal(rd_learner_critic_spec(&c, &s, &err), RD_EINVAL);
  assert_int_equal(rd_learner_policy_spec(&c, &s, NULL), RD_OK);
  assert_int_equal(s.n_layers, 3);
  assert_int_equal(s.sizes[3], 2);
  assert_int_equal(s.act[2], RD_NN_IDENTITY);
  assert_int_equal(s.act[0], RD_NN_RELU);
  assert_int_equal(rd_learner_policy_spec(&good, &s, NULL), RD_OK);
  assert_int_equal(s.act[1], RD_NN_TANH);
  assert_int_equal(s.sizes[2], 2);
  assert_int_equal(rd_learner_critic_spec(&good, &s, NULL), RD_OK);
  assert_int_equal(s.sizes[0], 5);
  assert_int_equal(s.sizes[2], 1);
  assert_int_equal(s.act[0], RD_NN_RELU);
  assert_int_equal(s.act[1], RD_NN_IDENTITY);
  good.hidden_act = RD_NN_TANH;
  assert_int_equal(rd_learner_critic_spec(&good, &s, NULL), RD_OK);
  assert_int_equal(s.act[0], RD_NN_TANH);
}

/* One bad batch: its code, a message, and no change at all. */
static void expect_step_error(rd_learner_t *l, const rd_batch_t *b, int code, const char *what) {
  snap_t before = snapshot(l);
  const size_t n = 64; /* >= every batch here, so td is never written past */
  float *td = malloc(n * sizeof *td);
  for (size_t i = 0; i < n; i++) td[i] = -7.0f;
  rd_step_stats_t st;
  memset(&st, 0x5a, sizeof st);
  rd_step_stats_t st0 = st;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_learner_step(l, b, td, &st, &err);
  if (rc != code)
    fail_msg("%s: returned %s, want %s (%s)", what, rd_err_name(rc), rd_err_name(code), err.msg);
  assert_true(strlen(err.msg) > 0);
  assert_unchanged(l, &before);
  for (size_t i = 0; i < n; i++) assert_true(td[i] == -7.0f);
  assert_memory_equal(&st, &st0, sizeof st);
  free(td);
  free(before.bytes);
}

static void batch_errors(const rd_learner_config_t *c) {
  rd_learner_t l;
  make(&l, c);
  rdt_batch_t bb;
  rdt_batch_make(&bb, c, 16, 21);
  /* A couple of good steps first, so Adam state is not all zero. */
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
  rd_batch_t b;
  const int dqn = c->algo == RD_ALGO_DQN;

  expect_step_error(&l, NULL, RD_EINVAL, "NULL batch");
  b = bb.b, b.n = 0;
  expect_step_error(&l, &b, RD_EINVAL, "n == 0");
  b = bb.b, b.n = c->max_batch + 1;
  expect_step_error(&l, &b, RD_ETOOBIG, "n > max_batch");
  b = bb.b, b.obs = NULL;
  expect_step_error(&l, &b, RD_EINVAL, "no obs");
  b = bb.b, b.next_obs = NULL;
  expect_step_error(&l, &b, RD_EINVAL, "no next_obs");
  b = bb.b, b.reward = NULL;
  expect_step_error(&l, &b, RD_EINVAL, "no reward");
  b = bb.b, b.discount = NULL;
  expect_step_error(&l, &b, RD_EINVAL, "no discount");

  /* One bad value at a time, put back afterwards. */
  struct {
    float *p;
    float v;
    const char *what;
  } bad[] = {
      {&bb.obs[5], NAN, "NaN obs"},
      {&bb.obs[c->obs_dim * 15], INFINITY, "inf obs in the last row"},
      {&bb.next[3], -INFINITY, "-inf next_obs"},
      {&bb.reward[7], NAN, "NaN reward"},
      {&bb.discount[2], -0.1f, "negative discount"},
      {&bb.discount[2], 1.5f, "discount above 1"},
      {&bb.discount[2], NAN, "NaN discount"},
      {&bb.w[4], -0.5f, "negative weight"},
      {&bb.w[4], NAN, "NaN weight"},
      {&bb.w[4], INFINITY, "inf weight"},
      {dqn ? NULL : &bb.af[1], c->action_high + 0.01f, "action above high"},
      {dqn ? NULL : &bb.af[2], c->action_low - 0.01f, "action below low"},
      {dqn ? NULL : &bb.af[3], NAN, "NaN action"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    if (bad[k].p == NULL) continue;
    float keep = *bad[k].p;
    *bad[k].p = bad[k].v;
    expect_step_error(&l, &bb.b, RD_EINVAL, bad[k].what);
    *bad[k].p = keep;
  }
  if (dqn) {
    int32_t keep = bb.ai[9];
    bb.ai[9] = -1;
    expect_step_error(&l, &bb.b, RD_EINVAL, "negative action");
    bb.ai[9] = (int32_t)c->num_actions;
    expect_step_error(&l, &bb.b, RD_EINVAL, "action == num_actions");
    bb.ai[9] = keep;
    b = bb.b, b.action_i = NULL;
    expect_step_error(&l, &b, RD_EINVAL, "no action_i");
  } else {
    b = bb.b, b.action_f = NULL;
    expect_step_error(&l, &b, RD_EINVAL, "no action_f");
    /* The range's ends are valid actions. */
    bb.af[0] = c->action_low;
    bb.af[1] = c->action_high;
  }
  /* The batch is good again: it trains. No weights and no td is fine. */
  bb.b.weights = NULL;
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
  assert_int_equal(l.steps, 3);
  rdt_batch_free(&bb);
  rd_learner_free(&l);
}

static void test_batch_errors(void **state) {
  (void)state;
  const uint32_t h[] = {8};
  rd_learner_config_t c;
  rdt_dqn_config(&c, 4, 3, 1, h);
  c.max_batch = 16;
  batch_errors(&c);
  rdt_ddpg_config(&c, 3, 2, 1, h, 1, h);
  c.max_batch = 16;
  c.action_low = -0.5f;
  c.action_high = 2.0f;
  batch_errors(&c);
}

/* Steps that overflow: RD_ERANGE and not one weight or moment changed. */
static void test_nonfinite_steps(void **state) {
  (void)state;
  const uint32_t h[] = {2};
  rd_learner_config_t c;
  rd_learner_t l;
  rdt_batch_t bb;
  rd_error_t err;
  rd_step_stats_t st;

  /* DQN: the target network's output bias at FLT_MAX and a reward of
   * FLT_MAX: y overflows to inf, so the loss does. */
  rdt_dqn_config(&c, 4, 2, 1, h);
  c.max_batch = 8;
  make(&l, &c);
  rdt_batch_make(&bb, &c, 8, 31);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, NULL, NULL), RD_OK);
  rd_mlp_t *qt = &l.net[1];
  for (uint32_t o = 0; o < 2; o++) qt->params[qt->b_off[1] + o] = FLT_MAX;
  for (int i = 0; i < 8; i++) bb.reward[i] = bb.discount[i] = 0.0f;
  bb.reward[3] = FLT_MAX;
  bb.discount[3] = 1.0f;
  snap_t before = snapshot(&l);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, &st, &err), RD_ERANGE);
  assert_true(!isfinite(st.loss));
  assert_unchanged(&l, &before);
  free(before.bytes);
  /* The next good batch trains as usual. */
  bb.reward[3] = 0.0f;
  qt->params[qt->b_off[1]] = qt->params[qt->b_off[1] + 1] = 0.0f;
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, &st, &err), RD_OK);
  assert_int_equal(l.steps, 2);
  rdt_batch_free(&bb);
  rd_learner_free(&l);

  /* DDPG: critic output weights of 1e38 on tanh units: Q ~ 1e38 is finite
   * and so is the loss (accumulated in double), but dL/dh = W^T dL/dQ
   * overflows, so the gradient norm is not finite. */
  rdt_ddpg_config(&c, 3, 1, 1, h, 1, h);
  c.hidden_act = RD_NN_TANH;
  c.max_batch = 8;
  make(&l, &c);
  rdt_batch_make(&bb, &c, 8, 41);
  for (int i = 0; i < 8; i++) bb.discount[i] = 0.0f;
  rd_mlp_t *cr = &l.net[2];
  cr->params[cr->w_off[1]] = 1e38f;
  cr->params[cr->w_off[1] + 1] = 1e38f;
  before = snapshot(&l);
  assert_int_equal(rd_learner_step(&l, &bb.b, NULL, &st, &err), RD_ERANGE);
  assert_true(isfinite(st.loss));
  assert_unchanged(&l, &before);
  free(before.bytes);
  rdt_batch_free(&bb);
  rd_learner_free(&l);
}

/* The policy the daemon publishes, and its bytes. */
static void test_policy(void **state) {
  (void)state;
  const uint32_t h[] = {64, 64};
  rd_learner_config_t c;
  rdt_dqn_config(&c, 4, 2, 2, h);
  rd_learner_t l;
  make(&l, &c);
  const rd_mlp_t *p = rd_learner_policy(&l);
  assert_ptr_equal(p, &l.net[0]);
  assert_int_equal(rd_learner_policy_bytes(&l), rd_nn_flat_bytes(&p->spec));
  size_t nb = rd_learner_policy_bytes(&l), w = 0;
  unsigned char *buf = malloc(nb);
  rd_error_t err;
  assert_int_equal(rd_learner_policy_save(&l, buf, nb - 1, &w, &err), RD_ETOOBIG);
  assert_int_equal(rd_learner_policy_save(&l, buf, nb, &w, &err), RD_OK);
  assert_int_equal(w, nb);
  rd_nn_spec_t s;
  float *params = malloc(p->n_params * sizeof(float));
  assert_int_equal(rd_nn_flat_parse(buf, nb, &s, params, p->n_params, NULL), RD_OK);
  assert_true(rd_nn_spec_equal(&s, &p->spec));
  assert_memory_equal(params, p->params, p->n_params * sizeof(float));
  free(params);
  free(buf);
  rd_learner_free(&l);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_dqn_by_hand),
         cmocka_unit_test(test_ddpg_gradients_and_targets),
         cmocka_unit_test(test_target_rules),
         cmocka_unit_test(test_dqn_learns_chain),
         cmocka_unit_test(test_ddpg_learns_bandit),
         cmocka_unit_test(test_determinism),
         cmocka_unit_test(test_shard_counts),
         cmocka_unit_test(test_thread_tuning),
         cmocka_unit_test(test_tuning_second_team_trial),
      cmocka_unit_test(test_replicas_follow_changes),
      cmocka_unit_test(test_sharded_update_whole_calls),
         cmocka_unit_test(test_config_errors),
         cmocka_unit_test(test_batch_errors),
         cmocka_unit_test(test_nonfinite_steps),
         cmocka_unit_test(test_policy))
