/* rdt_learner.c - learner configs for tests (rdt_learner.h). */
#include "rdt_learner.h"

void rdt_dqn_config(rd_learner_config_t *c, uint32_t obs, uint32_t actions, uint32_t n_hidden,
                    const uint32_t *hidden) {
  rd_learner_config_default(c);
  c->algo = RD_ALGO_DQN;
  c->obs_dim = obs;
  c->num_actions = actions;
  c->n_hidden = n_hidden;
  for (uint32_t i = 0; i < n_hidden; i++) c->hidden[i] = hidden[i];
}

void rdt_ddpg_config(rd_learner_config_t *c, uint32_t obs, uint32_t act, uint32_t n_hidden,
                     const uint32_t *hidden, uint32_t n_critic, const uint32_t *critic) {
  rd_learner_config_default(c);
  c->algo = RD_ALGO_DDPG;
  c->obs_dim = obs;
  c->action_dim = act;
  c->n_hidden = n_hidden;
  for (uint32_t i = 0; i < n_hidden; i++) c->hidden[i] = hidden[i];
  c->n_critic_hidden = n_critic;
  for (uint32_t i = 0; i < n_critic; i++) c->critic_hidden[i] = critic[i];
}
