/* learner_spec.c - LearnerSpec -> rd_pipeline_config_t, defaults, limits.
 *
 * Defaults follow the papers' and the usual libraries' settings: Adam
 * 1e-3 (DDPG's actor 1e-4, Lillicrap et al. 2016), gamma 0.99, Polyak
 * tau 0.005, gradient-norm clip 10, Huber delta 1, double DQN on.
 */
#include "learner_spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pb_opt.h"

#define DEFAULT_LR 1e-3
#define DEFAULT_DDPG_ACTOR_LR 1e-4
#define DEFAULT_CRITIC_LR 1e-3
#define DEFAULT_GAMMA 0.99
#define DEFAULT_TAU 0.005
#define DEFAULT_GRAD_CLIP 10.0
#define DEFAULT_HUBER 1.0

static int positive_finite(double v) { return isfinite(v) && v > 0; }

static int hidden_list(const char *what, size_t n, const uint32_t *v, uint32_t *out_n,
                       uint32_t *out, rd_error_t *err) {
  if (n > RD_LEARNER_MAX_HIDDEN)
    return rd_error_set(err, RD_EINVAL, "learner.%s has %zu layers; at most %d", what, n,
                        RD_LEARNER_MAX_HIDDEN);
  for (size_t i = 0; i < n; i++) {
    if (v[i] == 0 || v[i] > RD_LEARNER_MAX_WIDTH)
      return rd_error_set(err, RD_EINVAL, "learner.%s[%zu] is %u; widths are 1..%u", what, i,
                          v[i], RD_LEARNER_MAX_WIDTH);
    out[i] = v[i];
  }
  *out_n = (uint32_t)n;
  return RD_OK;
}

int rd_learner_spec_parse(const Replayd__V1__LearnerSpec *ls, const rd_table_config_t *tc,
                          double beta, uint32_t threads, rd_pipeline_config_t *out,
                          rd_error_t *err) {
  memset(out, 0, sizeof *out);
  rd_learner_config_t *lc = &out->learner;
  rd_learner_config_default(lc);
  const char *algo = ls->algorithm ? ls->algorithm : "";
  if (strcmp(algo, "dqn") == 0)
    lc->algo = RD_ALGO_DQN;
  else if (strcmp(algo, "ddpg") == 0)
    lc->algo = RD_ALGO_DDPG;
  else
    return rd_error_set(err, RD_EINVAL, "learner.algorithm is \"%.32s\"; use \"dqn\" or \"ddpg\"",
                        algo);
  const int dqn = lc->algo == RD_ALGO_DQN;

  int rc = hidden_list("hidden", ls->n_hidden, ls->hidden, &lc->n_hidden, lc->hidden, err);
  if (rc) return rc;
  if (dqn && ls->n_critic_hidden > 0)
    return rd_error_set(err, RD_EINVAL, "learner.critic_hidden is for ddpg; dqn has one network");
  if (ls->n_critic_hidden > 0)
    rc = hidden_list("critic_hidden", ls->n_critic_hidden, ls->critic_hidden,
                     &lc->n_critic_hidden, lc->critic_hidden, err);
  else
    rc = hidden_list("hidden", ls->n_hidden, ls->hidden, &lc->n_critic_hidden, lc->critic_hidden,
                     err);
  if (rc) return rc;

  const char *act = ls->activation ? ls->activation : "";
  if (act[0] == '\0' || strcmp(act, "relu") == 0)
    lc->hidden_act = RD_NN_RELU;
  else if (strcmp(act, "tanh") == 0)
    lc->hidden_act = RD_NN_TANH;
  else
    return rd_error_set(err, RD_EINVAL, "learner.activation is \"%.32s\"; use \"relu\" or "
                        "\"tanh\"", act);

  if (ls->batch_size == 0)
    return rd_error_set(err, RD_EINVAL, "learner.batch_size is required (items per step)");
  out->batch = ls->batch_size;
  if (out->batch > tc->max_batch || out->batch > RD_MLP_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "learner.batch_size %u is above the workload's "
                        "max_batch %u", out->batch, tc->max_batch);
  if (out->batch > tc->capacity)
    return rd_error_set(err, RD_EINVAL, "learner.batch_size %u is above the capacity %u",
                        out->batch, tc->capacity);
  lc->max_batch = out->batch;

  lc->lr = ls->lr_opt_case ? ls->lr : dqn ? DEFAULT_LR : DEFAULT_DDPG_ACTOR_LR;
  if (!positive_finite(lc->lr) || lc->lr > 1)
    return rd_error_set(err, RD_EINVAL, "learner.lr must be in (0, 1], not %g", lc->lr);
  if (dqn && ls->critic_lr_opt_case)
    return rd_error_set(err, RD_EINVAL, "learner.critic_lr is for ddpg");
  lc->critic_lr = ls->critic_lr_opt_case ? ls->critic_lr : DEFAULT_CRITIC_LR;
  if (!positive_finite(lc->critic_lr) || lc->critic_lr > 1)
    return rd_error_set(err, RD_EINVAL, "learner.critic_lr must be in (0, 1], not %g",
                        lc->critic_lr);
  double gamma = ls->gamma_opt_case ? ls->gamma : DEFAULT_GAMMA;
  if (!(gamma >= 0 && gamma <= 1))
    return rd_error_set(err, RD_EINVAL, "learner.gamma must be in [0, 1], not %g", gamma);
  out->gamma = (float)gamma;
  lc->target_period = ls->target_update_period;
  lc->tau = ls->tau_opt_case ? ls->tau : DEFAULT_TAU;
  if (!(lc->tau > 0 && lc->tau <= 1))
    return rd_error_set(err, RD_EINVAL, "learner.tau must be in (0, 1], not %g", lc->tau);
  if (ls->tau_opt_case && lc->target_period > 0)
    return rd_error_set(err, RD_EINVAL, "learner: set target_update_period (hard copies) or tau "
                        "(Polyak averaging), not both");
  lc->grad_clip = ls->grad_clip_opt_case ? ls->grad_clip : DEFAULT_GRAD_CLIP;
  if (!isfinite(lc->grad_clip) || lc->grad_clip < 0)
    return rd_error_set(err, RD_EINVAL, "learner.grad_clip must be >= 0 (0 = off), not %g",
                        lc->grad_clip);
  lc->huber_delta = ls->huber_delta_opt_case ? ls->huber_delta : DEFAULT_HUBER;
  if (!positive_finite(lc->huber_delta))
    return rd_error_set(err, RD_EINVAL, "learner.huber_delta must be > 0, not %g",
                        lc->huber_delta);
  lc->double_dqn = ls->double_dqn_opt_case ? (ls->double_dqn != 0) : 1;

  if (dqn) {
    if (ls->num_actions < 2 || ls->num_actions > RD_LEARNER_MAX_WIDTH)
      return rd_error_set(err, RD_EINVAL, "learner.num_actions is %u; dqn needs 2..%u",
                          ls->num_actions, RD_LEARNER_MAX_WIDTH);
    lc->num_actions = ls->num_actions;
    if (ls->action_low_opt_case || ls->action_high_opt_case)
      return rd_error_set(err, RD_EINVAL, "learner.action_low/high are for ddpg");
  } else {
    if (ls->num_actions != 0)
      return rd_error_set(err, RD_EINVAL, "learner.num_actions is for dqn; ddpg takes the "
                          "action size from the action field");
    double lo = ls->action_low_opt_case ? ls->action_low : -1.0;
    double hi = ls->action_high_opt_case ? ls->action_high : 1.0;
    if (!isfinite(lo) || !isfinite(hi) || !(lo < hi) || fabs(lo) > 1e6 || fabs(hi) > 1e6)
      return rd_error_set(err, RD_EINVAL, "learner.action_low %g and action_high %g must be "
                          "finite with low < high", lo, hi);
    lc->action_low = (float)lo;
    lc->action_high = (float)hi;
  }
  if (ls->relaxation_depth > RD_PIPELINE_MAX_DEPTH)
    return rd_error_set(err, RD_EINVAL, "learner.relaxation_depth %u is above %u",
                        ls->relaxation_depth, RD_PIPELINE_MAX_DEPTH);
  out->depth = ls->relaxation_depth;
  out->samples_per_insert = ls->samples_per_insert;
  if (!isfinite(out->samples_per_insert) || out->samples_per_insert < 0 ||
      out->samples_per_insert > 1e6)
    return rd_error_set(err, RD_EINVAL, "learner.samples_per_insert must be in [0, 1e6], not %g",
                        out->samples_per_insert);
  out->min_size = ls->min_size ? ls->min_size : out->batch;
  if (out->min_size < out->batch || out->min_size > tc->capacity)
    return rd_error_set(err, RD_EINVAL, "learner.min_size %u is outside [batch_size %u, "
                        "capacity %u]", out->min_size, out->batch, tc->capacity);
  out->beta = beta;
  lc->seed = tc->seed;
  lc->threads = threads ? threads : 1;

  rc = rd_pipeline_bind_schema(out, &tc->schema, err);
  if (rc) return rc;
  return rd_learner_config_validate(lc, err);
}

static int set_list(size_t *n, uint32_t **v, uint32_t cnt, const uint32_t *src) {
  if (*n == cnt) return 0;
  uint32_t *nv = malloc((cnt ? cnt : 1) * sizeof *nv);
  if (nv == NULL) return -1;
  memcpy(nv, src, cnt * sizeof *nv);
  free(*v);
  *v = nv;
  *n = cnt;
  return 0;
}

static int set_string(char **s, const char *v) {
  char *d = strdup(v);
  if (d == NULL) return -1;
  /* protobuf-c's default empty string is a static: never free it. */
  if (*s != NULL && *s != protobuf_c_empty_string) free(*s);
  *s = d;
  return 0;
}

int rd_learner_spec_normalise(Replayd__V1__LearnerSpec *ls, const rd_pipeline_config_t *c,
                              rd_error_t *err) {
  const rd_learner_config_t *lc = &c->learner;
  const int ddpg = lc->algo == RD_ALGO_DDPG;
  if ((ddpg && set_list(&ls->n_critic_hidden, &ls->critic_hidden, lc->n_critic_hidden,
                        lc->critic_hidden)) ||
      set_string(&ls->activation, rd_nn_act_name(lc->hidden_act)))
    return rd_error_set(err, RD_ENOMEM, "out of memory normalising the learner spec");
  RD_PB_SET_OPT(ls, LEARNER_SPEC, LR, lr, lc->lr);
  if (ddpg) {
    RD_PB_SET_OPT(ls, LEARNER_SPEC, CRITIC_LR, critic_lr, lc->critic_lr);
    RD_PB_SET_OPT(ls, LEARNER_SPEC, ACTION_LOW, action_low, lc->action_low);
    RD_PB_SET_OPT(ls, LEARNER_SPEC, ACTION_HIGH, action_high, lc->action_high);
  } else {
    RD_PB_SET_OPT(ls, LEARNER_SPEC, HUBER_DELTA, huber_delta, lc->huber_delta);
    RD_PB_SET_OPT(ls, LEARNER_SPEC, DOUBLE_DQN, double_dqn, lc->double_dqn);
  }
  if (!ls->gamma_opt_case) ls->gamma = DEFAULT_GAMMA; /* not c->gamma: a float */
  ls->gamma_opt_case = REPLAYD__V1__LEARNER_SPEC__GAMMA_OPT_GAMMA;
  if (lc->target_period == 0) {
    RD_PB_SET_OPT(ls, LEARNER_SPEC, TAU, tau, lc->tau);
  }
  RD_PB_SET_OPT(ls, LEARNER_SPEC, GRAD_CLIP, grad_clip, lc->grad_clip);
  ls->min_size = c->min_size;
  return RD_OK;
}
