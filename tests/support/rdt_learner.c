/* rdt_learner.c - learner configs for tests (rdt_learner.h). */
#include "rdt_learner.h"

#include <stdlib.h>
#include <string.h>

#include "rd_philox.h"

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

rd_nn_spec_t rdt_nn_spec(uint32_t n_layers, const uint32_t *sizes, const rd_nn_act_t *act) {
  rd_nn_spec_t s;
  memset(&s, 0, sizeof s);
  s.n_layers = n_layers;
  for (uint32_t l = 0; l <= n_layers; l++) s.sizes[l] = sizes[l];
  for (uint32_t l = 0; l < n_layers; l++) s.act[l] = act[l];
  return s;
}

float rdt_unif(uint64_t seed, uint64_t d, float lo, float hi) {
  double u = (double)(rd_philox_u64(seed, d) >> 11) * 0x1p-53;
  return (float)(lo + (hi - lo) * u);
}

void rdt_fill(float *a, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = 0; i < n; i++) a[i] = rdt_unif(seed, i, lo, hi);
}

static void *alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL) abort();
  return p;
}

static float *filled(size_t n, uint64_t seed, float lo, float hi) {
  float *a = alloc(n * sizeof *a);
  rdt_fill(a, n, seed, lo, hi);
  return a;
}

void rdt_batch_make(rdt_batch_t *bb, const rd_learner_config_t *c, size_t n, uint64_t seed) {
  memset(bb, 0, sizeof *bb);
  bb->obs = filled(n * c->obs_dim, seed, -1, 1);
  bb->next = filled(n * c->obs_dim, seed + 1, -1, 1);
  bb->reward = filled(n, seed + 2, -1, 1);
  bb->w = filled(n, seed + 3, 0.2f, 1.0f);
  bb->discount = alloc(n * sizeof *bb->discount);
  for (size_t i = 0; i < n; i++) bb->discount[i] = i % 5 == 4 ? 0.0f : 0.99f;
  bb->b.n = n;
  bb->b.obs = bb->obs;
  bb->b.next_obs = bb->next;
  bb->b.reward = bb->reward;
  bb->b.discount = bb->discount;
  bb->b.weights = bb->w;
  if (c->algo == RD_ALGO_DQN) {
    bb->ai = alloc(n * sizeof *bb->ai);
    for (size_t i = 0; i < n; i++)
      bb->ai[i] = (int32_t)(rd_philox_u64(seed + 4, i) % c->num_actions);
    bb->b.action_i = bb->ai;
  } else {
    bb->af = filled(n * c->action_dim, seed + 5, c->action_low, c->action_high);
    bb->b.action_f = bb->af;
  }
}

void rdt_batch_free(rdt_batch_t *bb) {
  free(bb->obs);
  free(bb->next);
  free(bb->reward);
  free(bb->discount);
  free(bb->w);
  free(bb->af);
  free(bb->ai);
  memset(bb, 0, sizeof *bb);
}
