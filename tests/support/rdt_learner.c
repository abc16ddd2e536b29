/* rdt_learner.c - learner configs for tests (rdt_learner.h). */
#include "rdt_learner.h"

/* The defaults with algo, obs inputs and the hidden layers. */
static void shape(rd_learner_config_t *c, rd_algo_t algo, uint32_t obs, uint32_t n_hidden,
                  const uint32_t *hidden) {
  rd_learner_config_default(c);
  c->algo = algo;
  c->obs_dim = obs;
  c->n_hidden = n_hidden;
  for (uint32_t i = 0; i < n_hidden; i++) c->hidden[i] = hidden[i];
}

void rdt_dqn_config(rd_learner_config_t *c, uint32_t obs, uint32_t actions, uint32_t n_hidden,
                    const uint32_t *hidden) {
  shape(c, RD_ALGO_DQN, obs, n_hidden, hidden);
  c->num_actions = actions;
}

void rdt_ddpg_config(rd_learner_config_t *c, uint32_t obs, uint32_t act, uint32_t n_hidden,
                     const uint32_t *hidden, uint32_t n_critic, const uint32_t *critic) {
  shape(c, RD_ALGO_DDPG, obs, n_hidden, hidden);
  c->action_dim = act;
  c->n_critic_hidden = n_critic;
  for (uint32_t i = 0; i < n_critic; i++) c->critic_hidden[i] = critic[i];
}
