/* learner.c - the hosted learner's gradient step on the CPU: DQN and DDPG.
 *
 * One call of rd_learner_step is the training loop's steps iii-v of
 * papers/001 §II-A2 (forward propagation and loss, backward propagation,
 * weight update) on a batch the sampler drew, plus the new priorities that
 * its step vi writes back. The rows are Ape-X transitions (papers/003,
 * "N-step returns" and the learner of Algorithm 2): reward is the n-step
 * return and discount the bootstrap factor gamma^n (0 at termination), so
 *   G = R + discount * Q_target(s', a').
 * Every product goes through nn.h (forward, backward, Adam, clipping,
 * Polyak); this file only wires the two algorithms' data flow.
 *
 * DQN (Mnih et al. 2015) with double-DQN targets (van Hasselt et al. 2016):
 *   a* = argmax_a Q(s', a)          online network picks (plain DQN: the target's max)
 *   y  = R + discount * Q'(s', a*)  target network values it
 *   L  = (1/n) sum_i w_i huber(Q(s_i, a_i) - y_i)     (torch HuberLoss, IS weights w)
 * The loss gradient reaches only the taken action's output.
 *
 * DDPG (Lillicrap et al. 2016), as OpenAI Baselines' DDPG computes it: both
 * gradients from the parameters at the start of the step, then both Adam
 * steps. With mu(s) = low + (tanh(.) + 1)/2 (high - low):
 *   critic: y = R + discount * Q'(s', mu'(s')),  L_Q = (1/n) sum w_i (Q(s_i, a_i) - y_i)^2
 *   actor:  L_mu = -(1/n) sum Q(s_i, mu(s_i)),
 *           dL_mu/dtheta = sum_i dL/dQ_i * dQ/da (rd_mlp_backward_input of the critic,
 *                          the action columns of dx) * (high - low)/2 * tanh' (in the actor)
 * The deterministic policy gradient of papers/003 ("Gradient for actor
 * update": grad_theta pi(x) grad_a Q(x, a) at a = pi(x)). Computing both
 * gradients before either update is what makes a failed step atomic: a
 * non-finite loss or gradient anywhere is found before any weight moves.
 *
 * Scratch is allocated once for max_batch rows; nothing else allocates.
 */
#include "learner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rd_philox.h"
#include "team.h"
#include "rd_clock.h"

/* Buffers of one learner, for max_batch rows (see rd_learner_t.scratch). */
typedef struct {
  float *y;       /* n targets */
  float *q;       /* n: Q(s, a) */
  float *dq;      /* n: dL/dQ(s, a) */
  float *td;      /* n: |delta| when the caller passes no td_abs */
  float *dy;      /* DQN: n x num_actions, dL/dQ(s, .) */
  float *x;       /* DDPG: n x (obs + act): critic input [s, a], then [s, mu(s)] */
  float *dx;      /* DDPG: n x (obs + act): dL_mu/d[s, a] */
  float *dmu;     /* DDPG: n x act: dL_mu/d(actor output) */
  float *dq_pi;   /* DDPG: n: dL_mu/dQ(s, mu(s)) = -1/n */
  /* The data-parallel step (learner.h: shards): views of the networks per
   * shard (view[k][i] of net[i]), and the team that runs the shards. */
  rd_mlp_t view[RD_LEARNER_MAX_SHARDS][4];
  uint32_t n_views; /* shards with views: 0 if max_batch < 2 shard rows */
  rd_team_t *team;  /* NULL at config.threads 1 */
  uint32_t team_threads; /* the team's threads (1: no team) */
  /* Replicas (learner.h): rep[r][i], r in [1, n_reps), a copy of net[i]
   * (replica 0 is net[] itself); n_reps 1: none. */
  rd_mlp_t rep[RD_LEARNER_MAX_SHARDS][4];
  uint32_t n_reps;
  int reps_fresh;    /* every replica equals net[] */
  int idle_on;       /* the team has idle work (rd_learner_set_idle): no replicas */
  uint32_t views_on; /* the views read replicas [0, views_on): shard k reads k % views_on */
  /* Packing net[]'s weights once a sharded step (nn.h: prepacked
   * weights): one team task per part, the largest first, so that the
   * heavy parts alternate between the threads. */
  struct {
    uint8_t net, part;
  } pp_task[4 * 2 * RD_NN_MAX_LAYERS];
  uint32_t pp_tasks;
  int wide;          /* wide_nets(config): the shard count's rule */
} scratch_t;

enum { NET_Q = 0, NET_Q_TARGET = 1 };
enum { NET_ACTOR = 0, NET_ACTOR_TARGET = 1, NET_CRITIC = 2, NET_CRITIC_TARGET = 3 };

void rd_learner_config_default(rd_learner_config_t *c) {
  memset(c, 0, sizeof *c);
  c->algo = RD_ALGO_DQN;
  c->hidden_act = RD_NN_RELU;
  c->lr = 1e-3;
  c->critic_lr = 1e-3;
  c->target_period = 0;
  c->tau = 0.005;
  c->grad_clip = 10.0;
  c->huber_delta = 1.0;
  c->double_dqn = 1;
  c->action_low = -1.0f;
  c->action_high = 1.0f;
  c->max_batch = 256;
  c->seed = 0;
  c->threads = 1;
}

/* ---- configuration ---- */

static int positive_finite(double x) { return isfinite(x) && x > 0; }

static int check_widths(const char *what, uint32_t n, const uint32_t *v, rd_error_t *err) {
  if (n > RD_LEARNER_MAX_HIDDEN)
    return rd_error_set(err, RD_EINVAL, "%s has %u hidden layers; at most %d", what, n,
                        RD_LEARNER_MAX_HIDDEN);
  for (uint32_t i = 0; i < n; i++)
    if (v[i] == 0 || v[i] > RD_NN_MAX_UNITS)
      return rd_error_set(err, RD_EINVAL, "%s[%u] is %u; widths are 1..%u", what, i, v[i],
                          RD_NN_MAX_UNITS);
  return RD_OK;
}

/* in -> hidden... -> out with the hidden activation, then out_act. */
static void build_spec(rd_nn_spec_t *s, uint32_t in, uint32_t n_hidden, const uint32_t *hidden,
                       rd_nn_act_t hidden_act, uint32_t out, rd_nn_act_t out_act) {
  memset(s, 0, sizeof *s);
  s->n_layers = n_hidden + 1;
  s->sizes[0] = in;
  for (uint32_t i = 0; i < n_hidden; i++) {
    s->sizes[i + 1] = hidden[i];
    s->act[i] = hidden_act;
  }
  s->sizes[n_hidden + 1] = out;
  s->act[n_hidden] = out_act;
}

int rd_learner_config_validate(const rd_learner_config_t *c, rd_error_t *err) {
  if (c->algo != RD_ALGO_DQN && c->algo != RD_ALGO_DDPG)
    return rd_error_set(err, RD_EINVAL, "algo %d is neither DQN (%d) nor DDPG (%d)", (int)c->algo,
                        RD_ALGO_DQN, RD_ALGO_DDPG);
  const int dqn = c->algo == RD_ALGO_DQN;
  if (c->obs_dim == 0 || c->obs_dim > RD_NN_MAX_UNITS)
    return rd_error_set(err, RD_EINVAL, "obs_dim is %u; it must be in 1..%u", c->obs_dim,
                        RD_NN_MAX_UNITS);
  if (dqn && (c->num_actions < 2 || c->num_actions > RD_NN_MAX_UNITS))
    return rd_error_set(err, RD_EINVAL, "num_actions is %u; DQN needs 2..%u", c->num_actions,
                        RD_NN_MAX_UNITS);
  if (!dqn) {
    if (c->action_dim == 0 || c->action_dim > RD_NN_MAX_UNITS)
      return rd_error_set(err, RD_EINVAL, "action_dim is %u; DDPG needs 1..%u", c->action_dim,
                          RD_NN_MAX_UNITS);
    if ((uint64_t)c->obs_dim + c->action_dim > RD_NN_MAX_UNITS)
      return rd_error_set(err, RD_EINVAL,
                          "obs_dim + action_dim is %llu; the critic takes at most %u inputs",
                          (unsigned long long)c->obs_dim + c->action_dim, RD_NN_MAX_UNITS);
    if (!(isfinite(c->action_low) && isfinite(c->action_high) && c->action_low < c->action_high))
      return rd_error_set(err, RD_EINVAL,
                          "action range [%g, %g] must be finite with action_low < action_high",
                          (double)c->action_low, (double)c->action_high);
  }
  int rc = check_widths("hidden", c->n_hidden, c->hidden, err);
  if (rc) return rc;
  if (!dqn) {
    rc = check_widths("critic_hidden", c->n_critic_hidden, c->critic_hidden, err);
    if (rc) return rc;
  }
  if (c->hidden_act != RD_NN_RELU && c->hidden_act != RD_NN_TANH)
    return rd_error_set(err, RD_EINVAL, "hidden_act %d is neither relu nor tanh",
                        (int)c->hidden_act);
  if (!positive_finite(c->lr))
    return rd_error_set(err, RD_EINVAL, "lr must be positive and finite, not %g", c->lr);
  if (!dqn && !positive_finite(c->critic_lr))
    return rd_error_set(err, RD_EINVAL, "critic_lr must be positive and finite, not %g",
                        c->critic_lr);
  if (!(c->tau > 0 && c->tau <= 1))
    return rd_error_set(err, RD_EINVAL, "tau must be in (0, 1], not %g", c->tau);
  if (!(isfinite(c->grad_clip) && c->grad_clip >= 0))
    return rd_error_set(err, RD_EINVAL, "grad_clip must be >= 0 and finite (0 = off), not %g",
                        c->grad_clip);
  if (dqn && !positive_finite(c->huber_delta))
    return rd_error_set(err, RD_EINVAL, "huber_delta must be positive and finite, not %g",
                        c->huber_delta);
  if (c->double_dqn != 0 && c->double_dqn != 1)
    return rd_error_set(err, RD_EINVAL, "double_dqn is %d; use 1 (double DQN) or 0 (plain max)",
                        c->double_dqn);
  rc = rd_mlp_check_limits(c->max_batch, c->threads, err);
  if (rc) return rc;
  /* The networks themselves (layer count, parameter budget). */
  rd_nn_spec_t s;
  rc = rd_learner_policy_spec(c, &s, err);
  if (rc == RD_OK && !dqn) rc = rd_learner_critic_spec(c, &s, err);
  return rc;
}

int rd_learner_policy_spec(const rd_learner_config_t *c, rd_nn_spec_t *out, rd_error_t *err) {
  int rc = check_widths("hidden", c->n_hidden, c->hidden, err);
  if (rc) return rc;
  rd_nn_spec_t s;
  if (c->algo == RD_ALGO_DQN)
    build_spec(&s, c->obs_dim, c->n_hidden, c->hidden, c->hidden_act, c->num_actions,
               RD_NN_IDENTITY);
  else if (c->algo == RD_ALGO_DDPG)
    build_spec(&s, c->obs_dim, c->n_hidden, c->hidden, c->hidden_act, c->action_dim, RD_NN_TANH);
  else
    return rd_error_set(err, RD_EINVAL, "algo %d is neither DQN nor DDPG", (int)c->algo);
  rc = rd_nn_spec_validate(&s, err);
  if (rc) return rc;
  *out = s;
  return RD_OK;
}

int rd_learner_critic_spec(const rd_learner_config_t *c, rd_nn_spec_t *out, rd_error_t *err) {
  if (c->algo != RD_ALGO_DDPG)
    return rd_error_set(err, RD_EINVAL, "only DDPG has a critic network");
  int rc = check_widths("critic_hidden", c->n_critic_hidden, c->critic_hidden, err);
  if (rc) return rc;
  rd_nn_spec_t s;
  build_spec(&s, c->obs_dim + c->action_dim, c->n_critic_hidden, c->critic_hidden, c->hidden_act,
             1, RD_NN_IDENTITY);
  rc = rd_nn_spec_validate(&s, err);
  if (rc) return rc;
  *out = s;
  return RD_OK;
}

/* ---- life cycle ---- */

static float *alloc_floats(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) return NULL;
  return p;
}

static void scratch_free(scratch_t *s) {
  if (s == NULL) return;
  rd_team_destroy(s->team);
  for (uint32_t k = 0; k < RD_LEARNER_MAX_SHARDS; k++)
    for (int i = 0; i < 4; i++) rd_mlp_free(&s->view[k][i]), rd_mlp_free(&s->rep[k][i]);
  free(s->y);
  free(s->q);
  free(s->dq);
  free(s->td);
  free(s->dy);
  free(s->x);
  free(s->dx);
  free(s->dmu);
  free(s->dq_pi);
  free(s);
}

void rd_learner_free(rd_learner_t *l) {
  scratch_free(l->scratch); /* views first: they borrow the networks' parameters */
  for (int i = 0; i < l->n_nets; i++) rd_mlp_free(&l->net[i]);
  memset(l, 0, sizeof *l);
}

/* One online network and its target (a copy, inference only). Online
 * networks get distinct init streams: seed k of learner seed s is Philox
 * draw 2^63 - 1 - k of s, a counter no table reaches and below the range
 * the networks' own init draws use (nn.h). */
static int make_pair(rd_learner_t *l, int online, const rd_nn_spec_t *spec, uint64_t k,
                     rd_error_t *err) {
  const rd_learner_config_t *c = &l->config;
  rd_mlp_config_t mc;
  rd_mlp_config_default(&mc);
  mc.spec = *spec;
  mc.max_batch = c->max_batch;
  mc.threads = c->threads ? c->threads : 1;
  mc.seed = rd_philox_u64(c->seed, RD_MLP_INIT_DRAW0 - 1 - k);
  int rc = rd_mlp_init(&l->net[online], &mc, err);
  if (rc) return rc;
  l->n_nets = online + 1;
  mc.inference_only = 1;
  rc = rd_mlp_init(&l->net[online + 1], &mc, err);
  if (rc) return rc;
  l->n_nets = online + 2;
  return rd_mlp_copy_params(&l->net[online + 1], &l->net[online], err);
}

static size_t trainable_params(const rd_learner_t *l) {
  size_t n = 0;
  for (int i = 0; i < l->n_nets; i++)
    if (l->net[i].trainable) n += l->net[i].n_params;
  return n;
}

/* Whether c's networks have a hidden layer of RD_LEARNER_WIDE_UNITS. */
static int wide_nets(const rd_learner_config_t *c) {
  int wide = 0;
  for (uint32_t i = 0; i < c->n_hidden && i < RD_LEARNER_MAX_HIDDEN; i++)
    wide |= c->hidden[i] >= RD_LEARNER_WIDE_UNITS;
  for (uint32_t i = 0; c->algo == RD_ALGO_DDPG && i < c->n_critic_hidden &&
                       i < RD_LEARNER_MAX_HIDDEN; i++)
    wide |= c->critic_hidden[i] >= RD_LEARNER_WIDE_UNITS;
  return wide;
}

/* rd_learner_shards with wide_nets known. */
static uint32_t shards_of(int wide, size_t n) {
  size_t k = n / RD_LEARNER_SHARD_ROWS;
  if (k < 2) return 1;
  if (wide && n > RD_LEARNER_BASE_SHARDS * (size_t)RD_LEARNER_WIDE_ROWS) {
    k = (n + RD_LEARNER_WIDE_ROWS - 1) / RD_LEARNER_WIDE_ROWS;
    return k > RD_LEARNER_MAX_SHARDS ? RD_LEARNER_MAX_SHARDS : (uint32_t)k;
  }
  return k > RD_LEARNER_BASE_SHARDS ? RD_LEARNER_BASE_SHARDS : (uint32_t)k;
}

/* The packing tasks of net[]'s weights (scratch_t pp_task), largest first. */
static void plan_prepack(rd_learner_t *l) {
  scratch_t *s = l->scratch;
  s->pp_tasks = 0;
  for (int i = 0; i < l->n_nets; i++)
    for (uint32_t q = 0; q < rd_mlp_prepack_parts(&l->net[i]); q++) {
      if (rd_mlp_prepack_floats(&l->net[i], q) == 0) continue;
      uint32_t t = s->pp_tasks++;
      s->pp_task[t].net = (uint8_t)i;
      s->pp_task[t].part = (uint8_t)q;
    }
  /* Insertion sort by size, descending: a few dozen tasks. */
  for (uint32_t a = 1; a < s->pp_tasks; a++)
    for (uint32_t b = a; b > 0; b--) {
      size_t fa = rd_mlp_prepack_floats(&l->net[s->pp_task[b].net], s->pp_task[b].part);
      size_t fb = rd_mlp_prepack_floats(&l->net[s->pp_task[b - 1].net], s->pp_task[b - 1].part);
      if (fa <= fb) break;
      __typeof__(s->pp_task[0]) t = s->pp_task[b];
      s->pp_task[b] = s->pp_task[b - 1];
      s->pp_task[b - 1] = t;
    }
}

/* Replicas 1..reps-1 of every network: networks of one row (only their
 * parameters, gradients and Adam state are used), synced before their
 * first team step (sync_replicas). */
static int make_replicas(rd_learner_t *l, uint32_t reps, rd_error_t *err) {
  scratch_t *s = l->scratch;
  for (uint32_t r = 1; r < reps; r++)
    for (int i = 0; i < l->n_nets; i++) {
      rd_mlp_config_t mc;
      rd_mlp_config_default(&mc);
      mc.spec = l->net[i].spec;
      mc.max_batch = 1;
      mc.threads = 1;
      mc.inference_only = !l->net[i].trainable;
      int rc = rd_mlp_init(&s->rep[r][i], &mc, err);
      if (rc) return rc;
    }
  s->n_reps = reps;
  s->reps_fresh = 0;
  return RD_OK;
}

int rd_learner_init(rd_learner_t *l, const rd_learner_config_t *c, rd_error_t *err) {
  memset(l, 0, sizeof *l);
  int rc = rd_learner_config_validate(c, err);
  if (rc) return rc;
  l->config = *c;
  if (l->config.threads == 0) l->config.threads = 1;
  l->tune.threads = l->config.threads;
  const int dqn = c->algo == RD_ALGO_DQN;
  const size_t B = c->max_batch;

  rd_nn_spec_t policy, critic;
  rd_learner_policy_spec(c, &policy, NULL);
  rc = make_pair(l, dqn ? NET_Q : NET_ACTOR, &policy, 0, err);
  if (rc == RD_OK && !dqn) {
    rd_learner_critic_spec(c, &critic, NULL);
    rc = make_pair(l, NET_CRITIC, &critic, 1, err);
  }
  if (rc) {
    rd_learner_free(l);
    return rc;
  }

  scratch_t *s = calloc(1, sizeof *s);
  int ok = s != NULL;
  if (ok) {
    l->scratch = s;
    ok = (s->y = alloc_floats(B)) && (s->q = alloc_floats(B)) && (s->dq = alloc_floats(B)) &&
         (s->td = alloc_floats(B));
    if (ok && dqn) ok = (s->dy = alloc_floats(B * c->num_actions)) != NULL;
    if (ok && !dqn) {
      size_t X = (size_t)c->obs_dim + c->action_dim;
      ok = (s->x = alloc_floats(B * X)) && (s->dx = alloc_floats(B * X)) &&
           (s->dmu = alloc_floats(B * c->action_dim)) && (s->dq_pi = alloc_floats(B));
    }
  }
  if (!ok) {
    rd_learner_free(l);
    return rd_error_set(err, RD_ENOMEM, "cannot allocate the learner's buffers for batches of %zu",
                        B);
  }
  /* Shard views for every batch size up to max_batch that is sharded:
   * the most rows a shard of any such batch has. */
  s->wide = wide_nets(c);
  s->n_views = shards_of(s->wide, B);
  if (s->n_views > 1) {
    size_t rows = 0;
    for (size_t n = 2 * RD_LEARNER_SHARD_ROWS; n <= B; n++) {
      const size_t k = shards_of(s->wide, n), r = (n + k - 1) / k;
      if (r > rows) rows = r;
    }
    for (uint32_t k = 0; k < s->n_views && rc == RD_OK; k++)
      for (int i = 0; i < l->n_nets && rc == RD_OK; i++)
        rc = rd_mlp_init_view(&s->view[k][i], &l->net[i], (uint32_t)rows, l->net[i].trainable,
                              err);
    for (int i = 0; i < l->n_nets && rc == RD_OK; i++) rc = rd_mlp_prepack_init(&l->net[i], err);
    if (rc == RD_OK) plan_prepack(l);
    s->n_reps = 1;
    s->views_on = 1;
    s->team_threads = 1;
    if (rc == RD_OK && l->config.threads > 1) {
      uint32_t t = l->config.threads < s->n_views ? l->config.threads : s->n_views;
      if (t > 1) rc = rd_team_create(&s->team, t, err);
      if (rc == RD_OK && t > 1) s->team_threads = t;
      if (rc == RD_OK && t > 1 && trainable_params(l) <= RD_LEARNER_REPLICATE_MAX)
        rc = make_replicas(l, t, err);
    }
    if (rc) {
      rd_learner_free(l);
      return rc;
    }
  }
  return RD_OK;
}

uint32_t rd_learner_shards(const rd_learner_config_t *c, size_t n) {
  return shards_of(wide_nets(c), n);
}

const rd_mlp_t *rd_learner_policy(const rd_learner_t *l) { return &l->net[0]; }

size_t rd_learner_policy_bytes(const rd_learner_t *l) { return rd_nn_flat_bytes(&l->net[0].spec); }

int rd_learner_policy_save(const rd_learner_t *l, void *buf, size_t cap, size_t *written,
                           rd_error_t *err) {
  return rd_mlp_save(&l->net[0], buf, cap, written, err);
}

/* ---- training state (checkpoints) ---- */

#define LSTATE_MAGIC 0x534c4452u /* "RDLS" */
#define LSTATE_VERSION 1u
#define LSTATE_HEAD 24u

size_t rd_learner_state_bytes(const rd_learner_t *l) {
  size_t b = LSTATE_HEAD;
  for (int i = 0; i < l->n_nets; i++) b += 8 + rd_mlp_state_bytes(&l->net[i]);
  return b;
}

int rd_learner_state_save(const rd_learner_t *l, void *buf, size_t cap, size_t *written,
                          rd_error_t *err) {
  size_t need = rd_learner_state_bytes(l);
  if (cap < need)
    return rd_error_set(err, RD_ETOOBIG, "the learner's state needs %zu bytes, not %zu", need,
                        cap);
  uint8_t *p = buf;
  uint32_t head[4] = {LSTATE_MAGIC, LSTATE_VERSION, (uint32_t)l->config.algo,
                      (uint32_t)l->n_nets};
  memcpy(p, head, sizeof head);
  memcpy(p + 16, &l->steps, 8);
  size_t off = LSTATE_HEAD;
  for (int i = 0; i < l->n_nets; i++) {
    uint64_t n = rd_mlp_state_bytes(&l->net[i]);
    memcpy(p + off, &n, 8);
    int rc = rd_mlp_state_save(&l->net[i], p + off + 8, (size_t)n, NULL, err);
    if (rc) return rc;
    off += 8 + (size_t)n;
  }
  if (written) *written = need;
  return RD_OK;
}

int rd_learner_state_check(const rd_learner_t *l, const void *buf, size_t len, rd_error_t *err) {
  const uint8_t *p = buf;
  uint32_t head[4];
  if (len < LSTATE_HEAD) return rd_error_set(err, RD_EINVAL, "not a learner's saved state");
  memcpy(head, p, sizeof head);
  if (head[0] != LSTATE_MAGIC) return rd_error_set(err, RD_EINVAL, "not a learner's saved state");
  if (head[1] != LSTATE_VERSION)
    return rd_error_set(err, RD_EINVAL, "learner state version %u; this build reads %u", head[1],
                        LSTATE_VERSION);
  if (head[2] != (uint32_t)l->config.algo || head[3] != (uint32_t)l->n_nets)
    return rd_error_set(err, RD_EINVAL, "the saved learner is %s with %u networks; this one is "
                        "%s with %d", head[2] == RD_ALGO_DDPG ? "DDPG" : "DQN", head[3],
                        l->config.algo == RD_ALGO_DDPG ? "DDPG" : "DQN", l->n_nets);
  size_t off = LSTATE_HEAD;
  for (int i = 0; i < l->n_nets; i++) {
    uint64_t n;
    if (len - off < 8) return rd_error_set(err, RD_EINVAL, "the saved learner is truncated");
    memcpy(&n, p + off, 8);
    if (n > len - off - 8) return rd_error_set(err, RD_EINVAL, "the saved learner is truncated");
    int rc = rd_mlp_state_check(&l->net[i], p + off + 8, (size_t)n, err);
    if (rc) return rc;
    off += 8 + (size_t)n;
  }
  if (off != len)
    return rd_error_set(err, RD_EINVAL, "%zu bytes follow the saved learner", len - off);
  return RD_OK;
}

int rd_learner_state_load(rd_learner_t *l, const void *buf, size_t len, rd_error_t *err) {
  int rc = rd_learner_state_check(l, buf, len, err);
  if (rc) return rc;
  const uint8_t *p = buf;
  size_t off = LSTATE_HEAD;
  for (int i = 0; i < l->n_nets; i++) {
    uint64_t n;
    memcpy(&n, p + off, 8);
    rc = rd_mlp_state_load(&l->net[i], p + off + 8, (size_t)n, err);
    if (rc) return rc; /* checked above: cannot happen */
    off += 8 + (size_t)n;
  }
  memcpy(&l->steps, p + 16, 8);
  rd_learner_params_changed(l);
  return RD_OK;
}

void rd_learner_params_changed(rd_learner_t *l) {
  scratch_t *s = l->scratch;
  if (s != NULL) s->reps_fresh = 0;
}

/* A CPU learner of c at batch 1: the carrier of the arrays' format. */
static int state_carrier(const rd_learner_config_t *config, rd_learner_t *cpu, rd_error_t *err) {
  rd_learner_config_t c = *config;
  c.max_batch = 1;
  c.threads = 1;
  return rd_learner_init(cpu, &c, err);
}

/* Copy between the arrays and cpu's networks (to_cpu: a -> cpu). */
static int state_arrays_move(rd_learner_t *cpu, rd_learner_state_arrays_t *a, int to_cpu,
                             rd_error_t *err) {
  for (int k = 0; k < cpu->n_nets; k++) {
    const rd_mlp_t *m = &cpu->net[k];
    if (a->params[k] == NULL || (m->trainable && (a->adam_m[k] == NULL || a->adam_v[k] == NULL)))
      return rd_error_set(err, RD_EINVAL, "the state arrays of network %d are missing", k);
  }
  for (int k = 0; k < cpu->n_nets; k++) {
    rd_mlp_t *m = &cpu->net[k];
    const size_t bytes = rd_mlp_n_params(m) * sizeof(float);
    if (to_cpu) {
      memcpy(m->params, a->params[k], bytes);
      if (m->trainable) {
        memcpy(m->adam_m, a->adam_m[k], bytes);
        memcpy(m->adam_v, a->adam_v[k], bytes);
        m->adam_t = a->adam_t[k];
      }
    } else {
      memcpy(a->params[k], m->params, bytes);
      if (m->trainable) {
        memcpy(a->adam_m[k], m->adam_m, bytes);
        memcpy(a->adam_v[k], m->adam_v, bytes);
        a->adam_t[k] = m->adam_t;
      }
    }
  }
  if (to_cpu) cpu->steps = a->steps;
  else a->steps = cpu->steps;
  return RD_OK;
}

size_t rd_learner_state_bytes_for(const rd_learner_config_t *c) {
  rd_learner_t cpu;
  rd_error_t err;
  if (state_carrier(c, &cpu, &err) != RD_OK) return 0;
  size_t n = rd_learner_state_bytes(&cpu);
  rd_learner_free(&cpu);
  return n;
}

int rd_learner_state_save_arrays(const rd_learner_config_t *c, const rd_learner_state_arrays_t *a,
                                 void *buf, size_t cap, size_t *written, rd_error_t *err) {
  rd_learner_t cpu;
  int rc = state_carrier(c, &cpu, err);
  if (rc) return rc;
  rd_learner_state_arrays_t in = *a;
  rc = state_arrays_move(&cpu, &in, 1, err);
  if (rc == RD_OK) rc = rd_learner_state_save(&cpu, buf, cap, written, err);
  rd_learner_free(&cpu);
  return rc;
}

int rd_learner_state_load_arrays(const rd_learner_config_t *c, const void *buf, size_t len,
                                 rd_learner_state_arrays_t *a, rd_error_t *err) {
  rd_learner_t cpu;
  int rc = state_carrier(c, &cpu, err);
  if (rc) return rc;
  rc = rd_learner_state_load(&cpu, buf, len, err);
  if (rc == RD_OK) rc = state_arrays_move(&cpu, a, 0, err);
  rd_learner_free(&cpu);
  return rc;
}

/* ---- batch validation ---- */

/* Index of the first non-finite value of v[0..n), or n. The fast pass adds
 * x * 0 (NaN for NaN and +-inf, else 0) so it vectorizes; only a batch with
 * a bad value pays for the search. */
static size_t first_nonfinite(const float *v, size_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (size_t i = 0; i < n; i++) acc += v[i] * 0.0f;
  if (acc == 0.0f) return n;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return i;
  return n;
}

static int check_matrix(const char *name, const float *v, size_t n, size_t dim, rd_error_t *err) {
  if (v == NULL) return rd_error_set(err, RD_EINVAL, "batch has no %s", name);
  size_t k = first_nonfinite(v, n * dim);
  if (k < n * dim)
    return rd_error_set(err, RD_EINVAL, "%s[%zu][%zu] is %g", name, k / dim, k % dim,
                        (double)v[k]);
  return RD_OK;
}

int rd_learner_batch_validate(const rd_learner_config_t *c, const rd_batch_t *b, rd_error_t *err) {
  if (b == NULL) return rd_error_set(err, RD_EINVAL, "no batch");
  const size_t n = b->n;
  if (n == 0) return rd_error_set(err, RD_EINVAL, "batch is empty");
  if (n > c->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "batch of %zu exceeds max_batch %u", n, c->max_batch);
  int rc = check_matrix("obs", b->obs, n, c->obs_dim, err);
  if (rc == RD_OK) rc = check_matrix("next_obs", b->next_obs, n, c->obs_dim, err);
  if (rc == RD_OK) rc = check_matrix("reward", b->reward, n, 1, err);
  if (rc == RD_OK) rc = check_matrix("discount", b->discount, n, 1, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++)
    if (!(b->discount[i] >= 0.0f && b->discount[i] <= 1.0f))
      return rd_error_set(err, RD_EINVAL, "discount[%zu] is %g; it must be in [0, 1]", i,
                          (double)b->discount[i]);
  if (b->weights != NULL)
    for (size_t i = 0; i < n; i++)
      if (!(isfinite(b->weights[i]) && b->weights[i] >= 0.0f))
        return rd_error_set(err, RD_EINVAL, "weights[%zu] is %g; IS weights are finite and >= 0",
                            i, (double)b->weights[i]);
  if (c->algo == RD_ALGO_DQN) {
    if (b->action_i == NULL) return rd_error_set(err, RD_EINVAL, "batch has no action_i (DQN)");
    for (size_t i = 0; i < n; i++)
      if (b->action_i[i] < 0 || (uint32_t)b->action_i[i] >= c->num_actions)
        return rd_error_set(err, RD_EINVAL, "action_i[%zu] is %d; actions are 0..%u", i,
                            (int)b->action_i[i], c->num_actions - 1);
  } else {
    rc = check_matrix("action_f", b->action_f, n, c->action_dim, err);
    if (rc) return rc;
    const float lo = c->action_low, hi = c->action_high;
    for (size_t k = 0; k < n * c->action_dim; k++)
      if (!(b->action_f[k] >= lo && b->action_f[k] <= hi))
        return rd_error_set(err, RD_EINVAL, "action_f[%zu][%zu] is %g, outside [%g, %g]",
                            k / c->action_dim, k % c->action_dim, (double)b->action_f[k],
                            (double)lo, (double)hi);
  }
  return RD_OK;
}

/* ---- shared pieces of a step ---- */

/* td[i] = |q_i - y_i|; the mean and max into st. */
static void td_stats(size_t n, const float *q, const float *y, float *td, rd_step_stats_t *st) {
  double sum = 0.0, mx = 0.0;
  for (size_t i = 0; i < n; i++) {
    float d = fabsf(q[i] - y[i]);
    td[i] = d;
    sum += d;
    if (d > mx || isnan(d)) mx = d;
  }
  st->td_abs_mean = sum / (double)n;
  st->td_abs_max = mx;
}

/* The norm check of one network's gradients before any update: RD_ERANGE
 * if the norm is not finite. *norm receives it (before clipping), *scale
 * the factor that clips them (0: none; clip 0: never). */
static int grad_norm_checked(rd_mlp_t *m, double clip, const char *who, double *norm,
                             float *scale, rd_error_t *err) {
  *scale = 0.0f;
  if (clip > 0) {
    int rc = rd_mlp_clip_begin(m, clip, norm, scale, err);
    if (rc == RD_ERANGE)
      return rd_error_set(err, RD_ERANGE, "%s gradient norm is not finite; step skipped", who);
    return rc;
  }
  *norm = rd_mlp_grad_norm(m);
  if (!isfinite(*norm))
    return rd_error_set(err, RD_ERANGE, "%s gradient norm is %g; step skipped", who, *norm);
  return RD_OK;
}

/* The check, and the clip applied. */
static int check_and_clip(rd_mlp_t *m, double clip, const char *who, double *norm,
                          rd_error_t *err) {
  float scale;
  int rc = grad_norm_checked(m, clip, who, norm, &scale, err);
  if (rc == RD_OK && scale != 0.0f) rd_mlp_scale_grads_range(m, scale, 0, m->n_params);
  return rc;
}

/* Hard copy every target_period successful steps, else Polyak with tau.
 * step is the number of this step (1-based). */
static int update_target(const rd_learner_config_t *c, rd_mlp_t *target, const rd_mlp_t *online,
                         uint64_t step, rd_error_t *err) {
  if (c->target_period > 0)
    return step % c->target_period == 0 ? rd_mlp_copy_params(target, online, err) : RD_OK;
  return rd_mlp_polyak(target, online, c->tau, err);
}

static rd_adam_config_t adam_with_lr(double lr) {
  rd_adam_config_t a;
  rd_adam_config_default(&a);
  a.lr = lr;
  return a;
}

/* ---- DDPG's critic input ---- */

/* x[i] = [obs_i, low + (y_i + 1)/2 (high - low)]: the critic input for the
 * actor's tanh outputs y (the mapping rd_learner_policy documents). */
static void critic_input_from_policy(const rd_learner_config_t *c, size_t n, const float *obs,
                                     const float *y, float *x) {
  const size_t O = c->obs_dim, D = c->action_dim, X = O + D;
  const float lo = c->action_low, range = c->action_high - c->action_low;
  for (size_t i = 0; i < n; i++) {
    memcpy(x + i * X, obs + i * O, O * sizeof(float));
    for (size_t j = 0; j < D; j++) x[i * X + O + j] = lo + (y[i * D + j] + 1.0f) * 0.5f * range;
  }
}

/* ---- the data-parallel step (learner.h: shards) ---- */

/* One sharded step's shared state. Shard k has rows [lo(k), lo(k + 1)). */
typedef struct {
  rd_learner_t *l;
  const rd_batch_t *b;
  size_t n;
  uint32_t shards;
  int phase;                            /* which part of the step the tasks run */
  int rc[RD_LEARNER_MAX_SHARDS];
  rd_error_t err[RD_LEARNER_MAX_SHARDS];
  /* Gradient reduction (PH_REDUCE) and the update (PH_UPDATE): tasks are
   * (network red_net[w], block of part[w] params), about a team thread's
   * share (part_size); the update's is the clip's scaling (scale 0: none),
   * Adam, then the target's move, all on the block. */
  int red_net[2];
  size_t part[2];
  uint32_t blocks[2];
  float upd_scale[2];
  rd_adam_coef_t upd_adam[2];
  int upd_target[2];
  int upd_mode; /* UPD_POLYAK, UPD_COPY or UPD_KEEP (no target move this step) */
  /* The replicas' update (PH_REPLICAS): task r updates replica r and
   * leaves its norms here. */
  double rep_norm[RD_LEARNER_MAX_SHARDS][2];
} sharded_t;

/* Parameters per reduction and update block of a network of n: a team
 * thread's share, a multiple of 64 (nn.h: rd_mlp_adam_range wants 16).
 * Why shares and not small blocks: with one block per thread, block q is
 * thread q's every step (team.c: home tasks), so its gradients, Adam
 * moments and weights stay in that core's cache; small blocks went to
 * whichever thread came first and moved between the cores. */
static size_t part_size(size_t n, uint32_t threads) {
  const size_t p = (n + threads - 1) / threads;
  return p < 64 ? 64 : (p + 63) / 64 * 64;
}

/* Network w's blocks for the reduction and the update. */
static void set_parts(sharded_t *j) {
  scratch_t *s = j->l->scratch;
  for (int w = 0; w < 2; w++) {
    const size_t n = j->red_net[w] < 0 ? 0 : j->l->net[j->red_net[w]].n_params;
    j->part[w] = part_size(n ? n : 1, s->team_threads);
    j->blocks[w] = (uint32_t)((n + j->part[w] - 1) / j->part[w]);
  }
}

enum { PH_DQN, PH_TARGETS_AND_Q, PH_BACKWARD, PH_REDUCE, PH_UPDATE, PH_REPLICAS };
enum { UPD_POLYAK, UPD_COPY, UPD_KEEP };

static size_t shard_lo(const sharded_t *j, uint32_t k) { return j->n * k / j->shards; }

/* Network i as shard k computes with it: the learner's own when the batch
 * is one shard (its gradients are then the step's, with no reduction),
 * else shard k's view. */
static rd_mlp_t *shard_net(const sharded_t *j, uint32_t k, int i) {
  scratch_t *s = j->l->scratch;
  return j->shards == 1 ? &j->l->net[i] : &s->view[k][i];
}

/* Network i of replica r (learner.h: replicas); replica 0 is net[]. */
static rd_mlp_t *rep_net(rd_learner_t *l, uint32_t r, int i) {
  scratch_t *s = l->scratch;
  return r == 0 ? &l->net[i] : &s->rep[r][i];
}

/* Make every replica equal net[]: parameters, Adam's moments and steps. */
static void sync_replicas(rd_learner_t *l) {
  scratch_t *s = l->scratch;
  for (uint32_t r = 1; r < s->n_reps; r++)
    for (int i = 0; i < l->n_nets; i++) {
      const rd_mlp_t *m = &l->net[i];
      rd_mlp_t *c = &s->rep[r][i];
      const size_t bytes = m->n_params * sizeof(float);
      memcpy(c->params, m->params, bytes);
      if (m->trainable) {
        memcpy(c->adam_m, m->adam_m, bytes);
        memcpy(c->adam_v, m->adam_v, bytes);
        c->adam_t = m->adam_t;
      }
    }
  s->reps_fresh = 1;
}

/* Point shard k's views at replica k % reps. */
static void views_read(rd_learner_t *l, uint32_t reps) {
  scratch_t *s = l->scratch;
  if (s->views_on == reps) return;
  for (uint32_t k = 0; k < s->n_views; k++)
    for (int i = 0; i < l->n_nets; i++) s->view[k][i].params = rep_net(l, k % reps, i)->params;
  s->views_on = reps;
}

/* The rows [lo, lo + m) of b, as a batch of its own. */
static rd_batch_t sub_batch(const rd_learner_config_t *c, const rd_batch_t *b, size_t lo,
                            size_t m) {
  rd_batch_t r = *b;
  r.n = m;
  r.obs = b->obs + lo * c->obs_dim;
  r.next_obs = b->next_obs + lo * c->obs_dim;
  r.reward = b->reward + lo;
  r.discount = b->discount + lo;
  if (b->action_i) r.action_i = b->action_i + lo;
  if (b->action_f) r.action_f = b->action_f + lo * c->action_dim;
  if (b->weights) r.weights = b->weights + lo;
  return r;
}

/* DQN, shard k, the whole step's part of it at once (PH_DQN): the targets
 * y = R + discount * Q'(s', a*) (double DQN: a* by the online network, the
 * first of equal maxima as torch.argmax), Q(s, a), the Huber gradient of
 * its rows (rd_nn_huber_rows: each row's depends on that row alone) and the
 * backward of dL/dQ(s, .) into the shard's gradients. No barrier between
 * the forward and backward passes; the loss is summed after the shards. */
static int dqn_shard(sharded_t *j, uint32_t k, rd_error_t *err) {
  rd_learner_t *l = j->l;
  const rd_learner_config_t *c = &l->config;
  scratch_t *s = l->scratch;
  rd_mlp_t *q = shard_net(j, k, NET_Q), *qt = shard_net(j, k, NET_Q_TARGET);
  const size_t lo = shard_lo(j, k), m = shard_lo(j, k + 1) - lo, A = c->num_actions;
  const rd_batch_t b = sub_batch(c, j->b, lo, m);
  int rc;
  if ((rc = rd_mlp_forward(qt, m, b.next_obs, NULL, err))) return rc;
  const float *qn_t = rd_mlp_output(qt);
  float *y = s->y + lo;
  if (c->double_dqn) {
    if ((rc = rd_mlp_forward(q, m, b.next_obs, NULL, err))) return rc;
    const float *qn = rd_mlp_output(q);
    for (size_t i = 0; i < m; i++) {
      const float *row = qn + i * A;
      size_t best = 0;
      for (size_t a = 1; a < A; a++)
        if (row[a] > row[best]) best = a;
      y[i] = b.reward[i] + b.discount[i] * qn_t[i * A + best];
    }
  } else {
    for (size_t i = 0; i < m; i++) {
      const float *row = qn_t + i * A;
      float best = row[0];
      for (size_t a = 1; a < A; a++)
        if (row[a] > best) best = row[a];
      y[i] = b.reward[i] + b.discount[i] * best;
    }
  }
  if ((rc = rd_mlp_forward(q, m, b.obs, NULL, err))) return rc;
  const float *qs = rd_mlp_output(q);
  for (size_t i = 0; i < m; i++) s->q[lo + i] = qs[i * A + (size_t)b.action_i[i]];
  if ((rc = rd_nn_huber_rows(j->n, lo, m, 1, s->q, s->y, j->b->weights, c->huber_delta, s->dq,
                             err)))
    return rc;
  float *dy = s->dy + lo * A;
  memset(dy, 0, m * A * sizeof(float));
  for (size_t i = 0; i < m; i++) dy[i * A + (size_t)b.action_i[i]] = s->dq[lo + i];
  return rd_mlp_backward(q, dy, NULL, err);
}

/* DDPG, shard k: critic targets y = R + discount * Q'(s', mu'(s')) and
 * Q(s, a) (PH_TARGETS_AND_Q), or the critic's backward, then the actor's
 * loss -mean Q(s, mu(s)) through the (not yet updated) critic and the
 * actor's backward, dL/dy = dL/da * da/dy with a = low + (y + 1)/2 (high -
 * low) (PH_BACKWARD). */
static int ddpg_shard(sharded_t *j, uint32_t k, rd_error_t *err) {
  rd_learner_t *l = j->l;
  const rd_learner_config_t *c = &l->config;
  scratch_t *s = l->scratch;
  rd_mlp_t *actor = shard_net(j, k, NET_ACTOR), *actor_t = shard_net(j, k, NET_ACTOR_TARGET);
  rd_mlp_t *critic = shard_net(j, k, NET_CRITIC), *critic_t = shard_net(j, k, NET_CRITIC_TARGET);
  const size_t lo = shard_lo(j, k), m = shard_lo(j, k + 1) - lo;
  const size_t O = c->obs_dim, D = c->action_dim, X = O + D;
  const rd_batch_t b = sub_batch(c, j->b, lo, m);
  float *x = s->x + lo * X, *q = s->q + lo;
  int rc;
  if (j->phase == PH_TARGETS_AND_Q) {
    if ((rc = rd_mlp_forward(actor_t, m, b.next_obs, NULL, err))) return rc;
    critic_input_from_policy(c, m, b.next_obs, rd_mlp_output(actor_t), x);
    if ((rc = rd_mlp_forward(critic_t, m, x, NULL, err))) return rc;
    const float *qn = rd_mlp_output(critic_t);
    for (size_t i = 0; i < m; i++) s->y[lo + i] = b.reward[i] + b.discount[i] * qn[i];
    for (size_t i = 0; i < m; i++) {
      memcpy(x + i * X, b.obs + i * O, O * sizeof(float));
      memcpy(x + i * X + O, b.action_f + i * D, D * sizeof(float));
    }
    return rd_mlp_forward(critic, m, x, q, err);
  }
  if ((rc = rd_mlp_backward(critic, s->dq + lo, NULL, err))) return rc;
  if ((rc = rd_mlp_forward(actor, m, b.obs, NULL, err))) return rc;
  critic_input_from_policy(c, m, b.obs, rd_mlp_output(actor), x);
  if ((rc = rd_mlp_forward(critic, m, x, q, err))) return rc; /* q: Q(s, mu(s)) now */
  const float g = (float)(-1.0 / (double)j->n);
  for (size_t i = 0; i < m; i++) s->dq_pi[lo + i] = g;
  if ((rc = rd_mlp_backward_input(critic, s->dq_pi + lo, s->dx + lo * X, err))) return rc;
  const float half_range = 0.5f * (c->action_high - c->action_low);
  for (size_t i = 0; i < m; i++)
    for (size_t d = 0; d < D; d++) s->dmu[(lo + i) * D + d] = s->dx[(lo + i) * X + O + d] * half_range;
  return rd_mlp_backward(actor, s->dmu + lo * D, NULL, err);
}

/* A reduction task: a block of one trainable network's gradients, summed
 * over the shard views in shard order (so the sum does not depend on which
 * thread adds it). */
/* g[lo, hi) = the shards' gradients of network net summed in shard order,
 * the one sum every path uses, so the paths agree bit for bit. */
static void sum_views(const sharded_t *j, int net, float *g, size_t lo, size_t hi) {
  const scratch_t *s = j->l->scratch;
  memcpy(g + lo, s->view[0][net].grads + lo, (hi - lo) * sizeof(float));
  for (uint32_t k = 1; k < j->shards; k++) {
    const float *v = s->view[k][net].grads;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) g[i] += v[i];
  }
}

/* A reduction task: a block of one trainable network's gradients. */
static void reduce_block(sharded_t *j, uint32_t task) {
  int w = task < j->blocks[0] ? 0 : 1;
  uint32_t blk = w ? task - j->blocks[0] : task;
  rd_mlp_t *owner = &j->l->net[j->red_net[w]];
  size_t lo = (size_t)blk * j->part[w], hi = lo + j->part[w];
  if (hi > owner->n_params) hi = owner->n_params;
  sum_views(j, j->red_net[w], owner->grads, lo, hi);
}

/* Replica r's online network w (0: Q or critic, 1: actor) and its target. */
static rd_mlp_t *online(const sharded_t *j, uint32_t r, int w) {
  return rep_net(j->l, r, j->red_net[w]);
}
static rd_mlp_t *target(const sharded_t *j, uint32_t r, int w) {
  return rep_net(j->l, r, j->upd_target[w]);
}

/* The norm checks of replica r's gradients, all before any weight moves:
 * norm[w] and the clip factor scale[w] per online network. */
static int check_norms(const sharded_t *j, uint32_t r, double norm[2], float scale[2],
                       rd_error_t *err) {
  const rd_learner_config_t *c = &j->l->config;
  const int dqn = c->algo == RD_ALGO_DQN;
  scale[1] = 0.0f;
  for (int w = 0; w < 2; w++) {
    if (j->red_net[w] < 0) continue;
    int rc = grad_norm_checked(online(j, r, w), c->grad_clip,
                               w ? "actor" : dqn ? "Q network" : "critic", &norm[w], &scale[w],
                               err);
    if (rc) return rc;
  }
  return RD_OK;
}

/* Adam's step count and constants for replica r's online networks, and
 * the targets' checks (nn.h: the begins). */
static int begin_moves(const sharded_t *j, uint32_t r, rd_adam_coef_t k[2], rd_error_t *err) {
  const rd_learner_config_t *c = &j->l->config;
  const int dqn = c->algo == RD_ALGO_DQN;
  for (int w = 0; w < 2; w++) {
    if (j->red_net[w] < 0) continue;
    const rd_adam_config_t adam = adam_with_lr(w == 0 && !dqn ? c->critic_lr : c->lr);
    int rc = rd_mlp_adam_begin(online(j, r, w), &adam, &k[w], err);
    if (rc == RD_OK && j->upd_mode != UPD_KEEP)
      rc = rd_mlp_polyak_begin(target(j, r, w), online(j, r, w), c->tau, err);
    if (rc) return rc;
  }
  return RD_OK;
}

/* Parameters [lo, hi) of replica r's network w: the clip's scaling (scale
 * 0: none), Adam, then the target's move. Element-wise, so any split over
 * threads gives the bits of the whole-network calls. */
static void move_range(const sharded_t *j, uint32_t r, int w, float scale,
                       const rd_adam_coef_t *k, size_t lo, size_t hi) {
  rd_mlp_t *m = online(j, r, w), *t = target(j, r, w);
  if (scale != 0.0f) rd_mlp_scale_grads_range(m, scale, lo, hi);
  rd_mlp_adam_range(m, k, lo, hi);
  if (j->upd_mode == UPD_POLYAK)
    rd_mlp_polyak_range(t, m, j->l->config.tau, lo, hi);
  else if (j->upd_mode == UPD_COPY)
    memcpy(t->params + lo, m->params + lo, (hi - lo) * sizeof(float));
}

/* An update task (sharded_t: PH_UPDATE): a block of net[]'s network w. */
static void update_block(sharded_t *j, uint32_t task) {
  const int w = task < j->blocks[0] ? 0 : 1;
  const uint32_t blk = w ? task - j->blocks[0] : task;
  size_t lo = (size_t)blk * j->part[w], hi = lo + j->part[w];
  const size_t n = online(j, 0, w)->n_params;
  move_range(j, 0, w, j->upd_scale[w], &j->upd_adam[w], lo, hi < n ? hi : n);
}

/* Replica r's whole update (PH_REPLICAS): its gradients summed, the norm
 * checks, then every network's moves. Every replica computes the same
 * bits, so all fail or none does, and nothing moves in a replica that
 * fails. */
static int replica_update(sharded_t *j, uint32_t r, rd_error_t *err) {
  for (int w = 0; w < 2; w++)
    if (j->red_net[w] >= 0) {
      rd_mlp_t *m = online(j, r, w);
      sum_views(j, j->red_net[w], m->grads, 0, m->n_params);
    }
  float scale[2] = {0.0f, 0.0f};
  rd_adam_coef_t k[2];
  int rc = check_norms(j, r, j->rep_norm[r], scale, err);
  if (rc == RD_OK) rc = begin_moves(j, r, k, err);
  if (rc) return rc;
  for (int w = 0; w < 2; w++)
    if (j->red_net[w] >= 0) move_range(j, r, w, scale[w], &k[w], 0, online(j, r, w)->n_params);
  return RD_OK;
}

static void shard_task(void *arg, uint32_t task) {
  sharded_t *j = arg;
  if (j->phase == PH_REPLICAS) {
    j->rc[task] = replica_update(j, task, &j->err[task]);
    return;
  }
  if (j->phase == PH_REDUCE) {
    reduce_block(j, task);
    return;
  }
  if (j->phase == PH_UPDATE) {
    update_block(j, task);
    return;
  }
  j->rc[task] = j->l->config.algo == RD_ALGO_DQN ? dqn_shard(j, task, &j->err[task])
                                                 : ddpg_shard(j, task, &j->err[task]);
}

/* Run one phase over the shards; the first shard's error, if any. */
static int run_shards(sharded_t *j, int phase, int solo, rd_error_t *err) {
  scratch_t *s = j->l->scratch;
  j->phase = phase;
  for (uint32_t k = 0; k < j->shards; k++) {
    j->rc[k] = RD_OK;
    rd_error_clear(&j->err[k]);
  }
  rd_team_run(s->team, solo, j->shards, shard_task, j);
  for (uint32_t k = 0; k < j->shards; k++)
    if (j->rc[k] != RD_OK) {
      if (err) *err = j->err[k];
      return j->rc[k];
    }
  return RD_OK;
}

/* What a sharded step's update works on: the online networks with
 * gradients (red_net, -1: none), their targets, and this step's target
 * rule. */
static void plan_update(sharded_t *j) {
  const rd_learner_config_t *c = &j->l->config;
  const int dqn = c->algo == RD_ALGO_DQN;
  j->red_net[0] = dqn ? NET_Q : NET_CRITIC;
  j->red_net[1] = dqn ? -1 : NET_ACTOR;
  j->upd_target[0] = dqn ? NET_Q_TARGET : NET_CRITIC_TARGET;
  j->upd_target[1] = NET_ACTOR_TARGET;
  const uint64_t step = j->l->steps + 1;
  j->upd_mode = c->target_period == 0 ? UPD_POLYAK
                : step % c->target_period == 0 ? UPD_COPY : UPD_KEEP;
}

/* The update of a sharded step on one copy (net[]): the gradients summed
 * over the team in blocks, the norms and their checks (nothing moves if
 * one fails; Adam's and Polyak's arguments were checked at init), then
 * the clip, Adam and the targets over the team in the same blocks, so the
 * serial part of the step does not grow with the network. The same bits
 * as the unsharded path's whole-network calls (move_range). */
static int update_sharded(sharded_t *j, rd_step_stats_t *st, int solo, rd_error_t *err) {
  scratch_t *s = j->l->scratch;
  set_parts(j);
  j->phase = PH_REDUCE;
  rd_team_run(s->team, solo, j->blocks[0] + j->blocks[1], shard_task, j);
  double norm[2];
  int rc = check_norms(j, 0, norm, j->upd_scale, err);
  if (rc == RD_OK) rc = begin_moves(j, 0, j->upd_adam, err);
  if (rc) return rc;
  st->grad_norm = norm[0];
  j->phase = PH_UPDATE;
  rd_team_run(s->team, solo, j->blocks[0] + j->blocks[1], shard_task, j);
  return RD_OK;
}

/* The update of a sharded team step on replicas (learner.h): one job, a
 * task per replica. */
static int update_replicas(sharded_t *j, rd_step_stats_t *st, rd_error_t *err) {
  scratch_t *s = j->l->scratch;
  for (uint32_t r = 0; r < s->n_reps; r++) {
    j->rc[r] = RD_OK;
    rd_error_clear(&j->err[r]);
  }
  j->phase = PH_REPLICAS;
  rd_team_run(s->team, 0, s->n_reps, shard_task, j);
  if (j->rc[0] != RD_OK) {
    if (err) *err = j->err[0];
    return j->rc[0];
  }
  st->grad_norm = j->rep_norm[0][0];
  return RD_OK;
}

/* Packing task q (scratch_t pp_task). */
static void prepack_task(void *arg, uint32_t q) {
  rd_learner_t *l = arg;
  scratch_t *s = l->scratch;
  rd_mlp_prepack_part(&l->net[s->pp_task[q].net], s->pp_task[q].part);
}

/* Turn net[]'s prepacked weights on (packing them first) or off. */
static void prepack_use(rd_learner_t *l, int on, int solo) {
  scratch_t *s = l->scratch;
  if (on) rd_team_run(s->team, solo, s->pp_tasks, prepack_task, l);
  for (int i = 0; i < l->n_nets; i++) rd_mlp_prepack_use(&l->net[i], on);
}

/* train_step's passes: forward, the loss, backward (per shard with
 * shards), nothing moved yet. */
static int shard_passes(rd_learner_t *l, sharded_t *jp, const rd_batch_t *b, float *td,
                        rd_step_stats_t *st, int solo, rd_error_t *err) {
  const rd_learner_config_t *c = &l->config;
  scratch_t *s = l->scratch;
  const int dqn = c->algo == RD_ALGO_DQN;
  const size_t n = b->n;
  int rc = run_shards(jp, dqn ? PH_DQN : PH_TARGETS_AND_Q, solo, err);
  if (rc) return rc;
  if (dqn) { /* the shards ran the backward passes too (dqn_shard) */
    if ((rc = rd_nn_huber(n, 1, s->q, s->y, b->weights, c->huber_delta, NULL, &st->loss, err)))
      return rc;
    td_stats(n, s->q, s->y, td, st);
    if (!isfinite(st->loss))
      return rd_error_set(err, RD_ERANGE, "DQN loss is %g; step skipped", st->loss);
  } else {
    if ((rc = rd_nn_mse(n, 1, s->q, s->y, b->weights, s->dq, &st->loss, err))) return rc;
    td_stats(n, s->q, s->y, td, st);
    if (!isfinite(st->loss))
      return rd_error_set(err, RD_ERANGE, "DDPG critic loss is %g; step skipped", st->loss);
    if ((rc = run_shards(jp, PH_BACKWARD, solo, err))) return rc;
  }
  if (!dqn) {
    double qsum = 0.0;
    for (size_t i = 0; i < n; i++) qsum += s->q[i];
    st->actor_loss = -qsum / (double)n;
    if (!isfinite(st->actor_loss))
      return rd_error_set(err, RD_ERANGE, "DDPG actor loss is %g; step skipped", st->actor_loss);
  }
  return RD_OK;
}

/* The update of an unsharded step: the whole networks' calls. */
static int update_whole(rd_learner_t *l, rd_step_stats_t *st, rd_error_t *err) {
  const rd_learner_config_t *c = &l->config;
  const int dqn = c->algo == RD_ALGO_DQN;
  int rc;
  if (dqn) {
    rd_mlp_t *q = &l->net[NET_Q], *qt = &l->net[NET_Q_TARGET];
    if ((rc = check_and_clip(q, c->grad_clip, "Q network", &st->grad_norm, err))) return rc;
    rd_adam_config_t adam = adam_with_lr(c->lr);
    if ((rc = rd_mlp_adam_step(q, &adam, err))) return rc;
    return update_target(c, qt, q, l->steps + 1, err);
  }
  rd_mlp_t *actor = &l->net[NET_ACTOR], *actor_t = &l->net[NET_ACTOR_TARGET];
  rd_mlp_t *critic = &l->net[NET_CRITIC], *critic_t = &l->net[NET_CRITIC_TARGET];
  double actor_norm;
  if ((rc = check_and_clip(critic, c->grad_clip, "critic", &st->grad_norm, err))) return rc;
  if ((rc = check_and_clip(actor, c->grad_clip, "actor", &actor_norm, err))) return rc;
  rd_adam_config_t adam_c = adam_with_lr(c->critic_lr), adam_a = adam_with_lr(c->lr);
  if ((rc = rd_mlp_adam_step(critic, &adam_c, err))) return rc;
  if ((rc = rd_mlp_adam_step(actor, &adam_a, err))) return rc;
  if ((rc = update_target(c, critic_t, critic, l->steps + 1, err))) return rc;
  return update_target(c, actor_t, actor, l->steps + 1, err);
}

/* One gradient step (learner.h): forward passes per shard, the loss over
 * the whole batch, backward passes per shard, the shards' gradients summed
 * in order (none to sum for one shard), then the norm checks (and clip),
 * Adam and the targets. Every check comes before the first weight moves. */
static int train_step(rd_learner_t *l, const rd_batch_t *b, float *td, rd_step_stats_t *st,
                        int solo, rd_error_t *err) {
  scratch_t *s = l->scratch;
  const size_t n = b->n;
  sharded_t j;
  j.l = l;
  j.b = b;
  j.n = n;
  j.shards = shards_of(s->wide, n);
  /* Replicas: a team step runs on them, synced first if anything else
   * moved net[], and keeps them equal (update_replicas); any other step
   * moves net[] alone. */
  const int on_reps = j.shards > 1 && !solo && s->n_reps > 1 && !s->idle_on;
  if (on_reps && !s->reps_fresh) sync_replicas(l);
  if (!on_reps) s->reps_fresh = 0;
  if (j.shards > 1) views_read(l, on_reps ? s->n_reps : 1);
  /* Views of net[] read its weights packed once for the step (nn.h);
   * dropped below, after the last shard job, before any weight moves. */
  const int packed = j.shards > 1 && !on_reps && s->pp_tasks > 0;
  if (packed) prepack_use(l, 1, solo);
  int rc = shard_passes(l, &j, b, td, st, solo, err);
  if (packed) prepack_use(l, 0, solo);
  if (rc) return rc;
  if (j.shards > 1) {
    plan_update(&j);
    return on_reps ? update_replicas(&j, st, err) : update_sharded(&j, st, solo, err);
  }
  return update_whole(l, st, err);
}

/* ---- thread tuning (learner.h) ---- */

static void tune_set_threads(rd_learner_t *l, uint32_t threads) {
  l->tune.threads = threads;
  for (int i = 0; i < l->n_nets; i++) l->net[i].threads = threads;
}

/* After the round's trials: run the faster mode, for the short hold after
 * a close call. */
static void tune_decide(rd_learner_t *l) {
  const double win = fmin(l->tune.t_alone, l->tune.t_team);
  const double lose = fmax(l->tune.t_alone, l->tune.t_team);
  const int close = lose < win * (1.0 + RD_LEARNER_TUNE_CLOSE);
  tune_set_threads(l, l->tune.t_alone <= l->tune.t_team ? 1 : l->config.threads);
  l->tune.phase = 2;
  l->tune.hold = close ? RD_LEARNER_TUNE_RETRY_S : RD_LEARNER_TUNE_HOLD_S;
  l->tune.held = 0;
  l->tune.second = 0;
}

/* At the start (t0) of a step of n rows: account the previous step's
 * period to its mode, and choose this step's mode. A mode is measured by
 * the period from one step's start to the next, not by the step alone:
 * in the pipeline that period also holds the wait for the next batch, so
 * a team that takes the core the sampler needs shows up as slower (it
 * did: CartPole DDPG at batch 2048 stepped in 0.26 ms with the team, but
 * the loop ran at 0.59 of that, below one thread's loop). A trial lasts
 * RD_LEARNER_TUNE_STEPS steps and at least RD_LEARNER_TUNE_TRIAL_S, long
 * enough to drain the D batches the pipeline samples ahead, and its mean
 * period leaves out the first, which may wait for a sleeping thread (a
 * scheduler tick here). */
static void tune_before(rd_learner_t *l, size_t n, double t0) {
  if (l->config.threads <= 1) return;
  const int prev = l->tune.prev_mode; /* 1: a team trial step, 2: an alone one, 3: held */
  const double period = t0 - l->tune.prev_t0;
  if (l->tune.phase == 2 && prev == 3) {
    /* The hold counts the chosen mode's step periods, not a pause. */
    const double mean = l->tune.threads > 1 ? l->tune.t_team : l->tune.t_alone;
    if (period <= RD_LEARNER_TUNE_GAP * mean) l->tune.held += period;
  }
  if (l->tune.phase == 2 ? n != l->tune.batch || l->tune.held >= l->tune.hold
                         : n != l->tune.batch) {
    l->tune.phase = 0; /* a trial measures one batch size */
    l->tune.second = 0;
    l->tune.count = 0;
    l->tune.sum = 0;
    l->tune.batch = n;
    l->tune.trial_start = t0;
  } else if (l->tune.phase < 2 && prev == (l->tune.phase == 0 ? 1 : 2)) {
    if (l->tune.count++ > 0) { /* the first may have waited */
      /* A period far above the trial's mean so far spans a pause in the
       * work that no caller announced (rd_learner_tune_pause), not this
       * mode's speed. */
      uint32_t have = l->tune.count - 2; /* periods already in sum */
      if (have > 0 && period > RD_LEARNER_TUNE_GAP * (l->tune.sum / have))
        l->tune.count--;
      else
        l->tune.sum += period;
    }
    if (l->tune.count > RD_LEARNER_TUNE_STEPS && t0 - l->tune.trial_start >= RD_LEARNER_TUNE_TRIAL_S) {
      const double mean = l->tune.sum / (double)(l->tune.count - 1);
      l->tune.count = 0;
      l->tune.sum = 0;
      l->tune.trial_start = t0;
      if (l->tune.phase == 0) {
        l->tune.t_team = mean;
        if (l->tune.second)
          tune_decide(l);
        else
          l->tune.phase = 1;
      } else {
        l->tune.t_alone = mean;
        if (!l->tune.second && l->tune.t_alone * (1.0 + RD_LEARNER_TUNE_CLOSE) <= l->tune.t_team) {
          /* Alone won clearly: the team gets a second trial before it is
           * set aside for the whole hold (learner.h). */
          l->tune.second = 1;
          l->tune.phase = 0;
        } else {
          tune_decide(l);
        }
      }
    }
  }
  if (l->tune.phase < 2) tune_set_threads(l, l->tune.phase == 0 ? l->config.threads : 1);
  l->tune.prev_mode = l->tune.phase == 0 ? 1 : l->tune.phase == 1 ? 2 : 3;
  l->tune.prev_t0 = t0;
}

void rd_learner_tune_pause(rd_learner_t *l) {
  l->tune.prev_mode = 0; /* tune_before counts a period only after a trial or held step */
}

void rd_learner_set_idle(rd_learner_t *l, int (*fn)(void *arg), void *arg) {
  scratch_t *s = l->scratch;
  if (s == NULL) return;
  rd_team_set_idle(s->team, fn, arg);
  s->idle_on = fn != NULL;
}

int rd_learner_step(rd_learner_t *l, const rd_batch_t *b, float *td_abs, rd_step_stats_t *st,
                    rd_error_t *err) {
  int rc = rd_learner_batch_validate(&l->config, b, err);
  if (rc) return rc;
  rd_step_stats_t local;
  if (st == NULL) st = &local;
  memset(st, 0, sizeof *st);
  float *td = td_abs != NULL ? td_abs : ((scratch_t *)l->scratch)->td;
  if (l->config.threads > 1) tune_before(l, b->n, rd_clock_now());
  if (shards_of(((scratch_t *)l->scratch)->wide, b->n) > 1) {
    /* The team runs the shards; the networks' own products stay on this
     * thread (a product team inside a shard would fight the shard team). */
    const uint32_t th = l->tune.threads;
    for (int i = 0; i < l->n_nets; i++) l->net[i].threads = 1;
    rc = train_step(l, b, td, st, th <= 1, err);
    for (int i = 0; i < l->n_nets; i++) l->net[i].threads = th;
  } else {
    rc = train_step(l, b, td, st, 1, err); /* one shard: the products may use threads */
  }
  if (rc == RD_OK) l->steps++;
  return rc;
}
