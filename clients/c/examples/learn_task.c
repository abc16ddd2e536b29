/* learn_task.c - see learn_task.h. */
#include "learn_task.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ex_schema.h"

#define PI 3.14159265358979323846

/* Callers keep observations in float[LT_MAX_OBS]. */
_Static_assert(CARTPOLE_OBS_DIM <= LT_MAX_OBS && PENDULUM_OBS_DIM <= LT_MAX_OBS,
               "LT_MAX_OBS is smaller than an environment's observation");

int lt_env_parse(const char *s, lt_env_t *out) {
  if (strcmp(s, "cartpole") == 0) *out = LT_CARTPOLE;
  else if (strcmp(s, "pendulum") == 0) *out = LT_PENDULUM;
  else return -1;
  return 0;
}

int lt_algo_parse(const char *s, lt_algo_t *out) {
  if (strcmp(s, "dqn") == 0) *out = LT_DQN;
  else if (strcmp(s, "ddpg") == 0) *out = LT_DDPG;
  else return -1;
  return 0;
}

const char *lt_env_name(lt_env_t e) { return e == LT_CARTPOLE ? "cartpole" : "pendulum"; }
const char *lt_algo_name(lt_algo_t a) { return a == LT_DQN ? "dqn" : "ddpg"; }
lt_algo_t lt_default_algo(lt_env_t e) { return e == LT_CARTPOLE ? LT_DQN : LT_DDPG; }

int lt_task_init(lt_task_t *t, lt_env_t env, lt_algo_t algo, uint32_t num_actions, char *msg,
                 size_t cap) {
  memset(t, 0, sizeof *t);
  t->env = env;
  t->algo = algo;
  t->obs_dim = env == LT_CARTPOLE ? CARTPOLE_OBS_DIM : PENDULUM_OBS_DIM;
  if (algo == LT_DQN) {
    if (num_actions == 0) num_actions = env == LT_CARTPOLE ? 2 : LT_PENDULUM_DEFAULT_K;
    if (env == LT_CARTPOLE && num_actions != 2) {
      snprintf(msg, cap, "cartpole has 2 actions, not %u", num_actions);
      return -1;
    }
    if (num_actions < 2 || num_actions > LT_MAX_ACTIONS) {
      snprintf(msg, cap, "dqn needs 2 to %d actions, not %u", LT_MAX_ACTIONS, num_actions);
      return -1;
    }
    t->num_actions = num_actions;
  } else {
    if (num_actions != 0) {
      snprintf(msg, cap, "ddpg has a continuous action: no action count");
      return -1;
    }
    t->action_low = env == LT_CARTPOLE ? -1.0 : -PENDULUM_MAX_TORQUE;
    t->action_high = env == LT_CARTPOLE ? 1.0 : PENDULUM_MAX_TORQUE;
  }
  return 0;
}

void lt_fields(const lt_task_t *t, rdc_field_t f[LT_N_FIELDS]) {
  ex_field(&f[LT_F_OBS], "obs", RDC_DTYPE_FLOAT32, t->obs_dim);
  if (t->algo == LT_DQN)
    ex_field(&f[LT_F_ACTION], "action", RDC_DTYPE_INT32, 0);
  else
    ex_field(&f[LT_F_ACTION], "action", RDC_DTYPE_FLOAT32, 1);
  ex_field(&f[LT_F_REWARD], "reward", RDC_DTYPE_FLOAT32, 0);
  ex_field(&f[LT_F_NEXT_OBS], "next_obs", RDC_DTYPE_FLOAT32, t->obs_dim);
  ex_field(&f[LT_F_DISCOUNT], "discount", RDC_DTYPE_FLOAT32, 0);
}

/* Defaults that learn each task within minutes on a few CPU cores (see
 * clients/c/README.md for measured runs). The replay side is the
 * prioritized replay paper's (alpha 0.6, beta 0.4); both algorithms use
 * small two-layer networks, which is all these tasks need. */
void lt_default_spec(const lt_task_t *t, uint64_t seed, rdc_spec_t *spec) {
  rdc_spec_init(spec);
  snprintf(spec->name, sizeof spec->name, "%s-%s", lt_env_name(t->env), lt_algo_name(t->algo));
  spec->n_fields = LT_N_FIELDS;
  lt_fields(t, spec->fields);
  spec->capacity = 100000;
  spec->has_alpha = 1;
  spec->alpha = 0.6;
  spec->has_beta = 1;
  spec->beta = 0.4;
  spec->seed = seed;
  spec->has_learner = 1;
  rdc_learner_spec_t *l = &spec->learner;
  snprintf(l->algorithm, sizeof l->algorithm, "%s", lt_algo_name(t->algo));
  snprintf(l->activation, sizeof l->activation, "relu");
  l->n_hidden = 2;
  l->has_gamma = 1;
  l->gamma = 0.99;
  l->has_grad_clip = 1;
  l->grad_clip = 10;
  if (t->algo == LT_DQN) {
    /* Double DQN with Huber loss and Polyak targets, a small
     * batch and many updates per transition (as the DQN zoo tunings for
     * CartPole: about one update of 64 per 2 steps). */
    l->hidden[0] = l->hidden[1] = 64;
    l->batch_size = 64;
    l->has_lr = 1;
    l->lr = 1e-3;
    l->has_tau = 1;
    l->tau = 0.01;
    l->num_actions = t->num_actions;
    l->has_double_dqn = 1;
    l->double_dqn = 1;
    l->samples_per_insert = 32;
    l->min_size = 1000;
  } else {
    /* DDPG as Lillicrap et al. with the usual Pendulum settings: one
     * update of 128 per environment step, tau 0.005, critic 1e-3. */
    l->hidden[0] = l->hidden[1] = 128;
    l->batch_size = 128;
    l->has_lr = 1;
    l->lr = 1e-3;
    l->has_critic_lr = 1;
    l->critic_lr = 1e-3;
    l->has_tau = 1;
    l->tau = 0.005;
    l->has_action_low = 1;
    l->action_low = t->action_low;
    l->has_action_high = 1;
    l->action_high = t->action_high;
    l->samples_per_insert = 128;
    l->min_size = 1000;
  }
}

int lt_task_from_spec(lt_task_t *t, lt_env_t env, const rdc_spec_t *spec, char *msg, size_t cap) {
  if (!spec->has_learner) {
    snprintf(msg, cap, "the workload has no learner section: register it with "
                       "replayd-learn register");
    return -1;
  }
  const rdc_learner_spec_t *l = &spec->learner;
  lt_algo_t algo;
  if (lt_algo_parse(l->algorithm, &algo) != 0) {
    snprintf(msg, cap, "the workload's learner algorithm \"%s\" is neither dqn nor ddpg",
             l->algorithm);
    return -1;
  }
  if (lt_task_init(t, env, algo, algo == LT_DQN ? l->num_actions : 0, msg, cap) != 0) return -1;
  if (algo == LT_DDPG) {
    /* The range the learner scales its tanh output to: normalised specs
     * carry it; if not, the server's default. */
    t->action_low = l->has_action_low ? l->action_low : -1.0;
    t->action_high = l->has_action_high ? l->action_high : 1.0;
    if (!(t->action_low < t->action_high)) {
      snprintf(msg, cap, "the workload's action range [%g, %g] is empty", t->action_low,
               t->action_high);
      return -1;
    }
  }
  rdc_field_t want[LT_N_FIELDS];
  lt_fields(t, want);
  if (spec->n_fields != LT_N_FIELDS) {
    snprintf(msg, cap, "the workload has %u fields; a %s %s workload has %d", spec->n_fields,
             lt_env_name(env), lt_algo_name(algo), LT_N_FIELDS);
    return -1;
  }
  for (int i = 0; i < LT_N_FIELDS; i++) {
    const rdc_field_t *a = &spec->fields[i], *b = &want[i];
    if (!ex_field_same(a, b)) {
      snprintf(msg, cap, "field %d is \"%.63s\" %s of rank %u (first dim %u); %s %s wants "
               "\"%.63s\" %s of rank %u (first dim %u)", i, a->name,
               rdc_dtype_name((int)a->dtype), a->rank, a->rank ? a->shape[0] : 0,
               lt_env_name(env), lt_algo_name(algo), b->name, rdc_dtype_name((int)b->dtype),
               b->rank, b->rank ? b->shape[0] : 0);
      return -1;
    }
  }
  return 0;
}

int lt_check_policy(const lt_task_t *t, const rdc_policy_t *p, char *msg, size_t cap) {
  uint32_t want_out = t->algo == LT_DQN ? t->num_actions : 1;
  if (rdc_policy_inputs(p) != t->obs_dim || rdc_policy_outputs(p) != want_out) {
    snprintf(msg, cap, "the served network maps %u inputs to %u outputs; %s %s needs %u -> %u",
             rdc_policy_inputs(p), rdc_policy_outputs(p), lt_env_name(t->env),
             lt_algo_name(t->algo), t->obs_dim, want_out);
    return -1;
  }
  return 0;
}

void lt_env_seed(lt_env_state_t *e, const lt_task_t *t, uint64_t seed) {
  memset(e, 0, sizeof *e);
  e->task = t;
  cartpole_seed(&e->cp, seed);
  pendulum_seed(&e->pd, seed);
}

void lt_env_reset(lt_env_state_t *e, float *obs) {
  e->ret = 0;
  e->length = 0;
  if (e->task->env == LT_CARTPOLE)
    cartpole_reset(&e->cp, obs);
  else
    pendulum_reset(&e->pd, obs);
}

int lt_env_step(lt_env_state_t *e, const void *action, float *obs, float *reward,
                int *terminated, int *truncated) {
  const lt_task_t *t = e->task;
  int32_t ai = 0;
  float af = 0;
  if (t->algo == LT_DQN)
    memcpy(&ai, action, sizeof ai);
  else
    memcpy(&af, action, sizeof af);
  int rc;
  if (t->env == LT_CARTPOLE) {
    int push = t->algo == LT_DQN ? (ai != 0) : (af > 0);
    rc = cartpole_step(&e->cp, push, obs, reward, terminated, truncated);
  } else {
    double u = t->algo == LT_DQN
                   ? -PENDULUM_MAX_TORQUE + 2.0 * PENDULUM_MAX_TORQUE * ai / (t->num_actions - 1)
                   : af;
    rc = pendulum_step(&e->pd, u, obs, reward, terminated, truncated);
  }
  if (rc == 0) {
    e->ret += *reward;
    e->length++;
  }
  return rc;
}

double lt_gaussian(cp_rng_t *rng) {
  double u1 = cp_rng_uniform(rng), u2 = cp_rng_uniform(rng);
  if (u1 < 1e-300) u1 = 1e-300; /* log(0) */
  return sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2);
}

double lt_apex_epsilon(double base, uint32_t i, uint32_t n) {
  if (n <= 1) return base;
  return pow(base, 1.0 + 7.0 * (double)i / (double)(n - 1));
}

static uint32_t argmax(const float *q, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t a = 1; a < n; a++)
    if (q[a] > q[best]) best = a;
  return best;
}

int lt_act(const lt_task_t *t, rdc_policy_t *policy, const float *obs, double epsilon,
           double noise, cp_rng_t *rng, void *action) {
  if (t->algo == LT_DQN) {
    int32_t a;
    if (policy == NULL || (epsilon > 0 && cp_rng_uniform(rng) < epsilon)) {
      a = (int32_t)(cp_rng_uniform(rng) * t->num_actions);
      if (a >= (int32_t)t->num_actions) a = (int32_t)t->num_actions - 1;
    } else {
      float q[LT_MAX_ACTIONS];
      if (rdc_policy_forward(policy, obs, q) != RDC_OK) return -1;
      a = (int32_t)argmax(q, t->num_actions);
    }
    memcpy(action, &a, sizeof a);
    return 0;
  }
  const double lo = t->action_low, hi = t->action_high;
  double u;
  if (policy == NULL) {
    u = lo + cp_rng_uniform(rng) * (hi - lo);
  } else {
    float y;
    if (rdc_policy_forward(policy, obs, &y) != RDC_OK) return -1;
    u = lo + ((double)y + 1.0) * 0.5 * (hi - lo);
    if (noise > 0) u += noise * (hi - lo) * 0.5 * lt_gaussian(rng);
  }
  if (u < lo) u = lo;
  if (u > hi) u = hi;
  float f = (float)u;
  memcpy(action, &f, sizeof f);
  return 0;
}

int lt_dqn_priorities(const lt_task_t *t, rdc_policy_t *policy, size_t n, const float *obs,
                      const int32_t *action, const float *reward, const float *next_obs,
                      const float *discount, double *out) {
  if (t->algo != LT_DQN || policy == NULL) return -1;
  char msg[8];
  if (lt_check_policy(t, policy, msg, sizeof msg) != 0) return -1;
  const uint32_t d = t->obs_dim, k = t->num_actions;
  float q[LT_MAX_ACTIONS], qn[LT_MAX_ACTIONS];
  for (size_t i = 0; i < n; i++) {
    if (rdc_policy_forward(policy, obs + i * d, q) != RDC_OK ||
        rdc_policy_forward(policy, next_obs + i * d, qn) != RDC_OK)
      return -1;
    int32_t a = action[i];
    if (a < 0 || (uint32_t)a >= k) return -1;
    double target = (double)reward[i] + (double)discount[i] * (double)qn[argmax(qn, k)];
    double p = fabs(target - (double)q[a]);
    if (!isfinite(p)) return -1;
    /* The server refuses raw priorities above the workload's max_priority
     * (2^20 by default); a diverging network must not end the stream. */
    out[i] = p < LT_MAX_PRIORITY ? p : LT_MAX_PRIORITY;
  }
  return 0;
}
