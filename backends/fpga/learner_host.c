/* learner_host.c - CPU learner config -> FPGA learner kernel config
 * (learner_host.h). */
#include "learner_host.h"

#include <string.h>

#include "nn.h"

static void spec_to_shape(const rd_nn_spec_t *s, lrn_shape_t *k) {
  memset(k, 0, sizeof *k);
  /* A spec deeper than the build is kept deep (lrn_config_check refuses
   * it by its layer count); only what fits the arrays is copied. */
  k->n_layers = s->n_layers;
  const uint32_t L = s->n_layers < LRN_MAX_LAYERS ? s->n_layers : LRN_MAX_LAYERS;
  for (uint32_t l = 0; l <= L; l++) k->sizes[l] = s->sizes[l];
  for (uint32_t l = 0; l < L; l++) k->act[l] = (uint32_t)s->act[l];
}

void rd_fpga_learner_config(const rd_learner_config_t *c, uint32_t dp, lrn_config_t *k) {
  memset(k, 0, sizeof *k);
  rd_nn_spec_t s;
  k->algo = c->algo == RD_ALGO_DQN ? LRN_ALGO_DQN : LRN_ALGO_DDPG;
  k->batch = c->max_batch;
  k->dp = dp;
  k->double_dqn = (uint32_t)c->double_dqn;
  k->target_period = c->target_period;
  if (rd_learner_policy_spec(c, &s, NULL) == RD_OK) spec_to_shape(&s, &k->net[0]);
  if (c->algo == RD_ALGO_DDPG && rd_learner_critic_spec(c, &s, NULL) == RD_OK)
    spec_to_shape(&s, &k->net[1]);
  rd_adam_config_t adam;
  rd_adam_config_default(&adam); /* the CPU learner's Adam: only lr differs */
  k->lr = c->lr;
  k->critic_lr = c->critic_lr;
  k->tau = c->tau;
  k->grad_clip = c->grad_clip;
  k->huber_delta = c->huber_delta;
  k->beta1 = adam.beta1;
  k->beta2 = adam.beta2;
  k->eps = adam.eps;
  k->action_low = c->action_low;
  k->action_high = c->action_high;
}
