/* rdt_learner.h - learner configs for tests: the defaults
 * (rd_learner_config_default) with a network's shape, so that a test
 * states only the shape and what it changes besides.
 *
 * Contract: the builders overwrite c and allocate nothing; hidden (and
 * critic) hold n_hidden (n_critic) widths. And the random batches the
 * learner tests and benchmarks step on. */
#ifndef RDT_LEARNER_H
#define RDT_LEARNER_H

#include <stddef.h>
#include <stdint.h>

#include "learner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DQN on obs inputs and `actions` discrete actions. */
void rdt_dqn_config(rd_learner_config_t *c, uint32_t obs, uint32_t actions, uint32_t n_hidden,
                    const uint32_t *hidden);

/* DDPG on obs inputs and an action of act dimensions; the critic's hidden
 * layers are critic[0..n_critic). */
void rdt_ddpg_config(rd_learner_config_t *c, uint32_t obs, uint32_t act, uint32_t n_hidden,
                     const uint32_t *hidden, uint32_t n_critic, const uint32_t *critic);

/* Draw d of Philox stream seed, uniform in [lo, hi) (53 random bits). */
float rdt_unif(uint64_t seed, uint64_t d, float lo, float hi);

/* a[i] = rdt_unif(seed, i, lo, hi) for i < n. */
void rdt_fill(float *a, size_t n, uint64_t seed, float lo, float hi);

/* The spec of an MLP of n_layers layers: sizes[0..n_layers] units,
 * activations act[0..n_layers). */
rd_nn_spec_t rdt_nn_spec(uint32_t n_layers, const uint32_t *sizes, const rd_nn_act_t *act);

/* A random learner batch of n rows for config c, owned by the struct:
 * observations, next observations and rewards uniform in [-1, 1), IS
 * weights in [0.2, 1), discount 0.99 with every fifth row terminal, valid
 * actions (DQN: in [0, num_actions); DDPG: in the action range); from
 * Philox streams seed, seed + 1, ... (the same seed, the same batch). */
typedef struct {
  rd_batch_t b;
  float *obs, *next, *reward, *discount, *w, *af;
  int32_t *ai;
} rdt_batch_t;

/* Allocates with malloc (a failed allocation aborts: these are tests). */
void rdt_batch_make(rdt_batch_t *bb, const rd_learner_config_t *c, size_t n, uint64_t seed);
void rdt_batch_free(rdt_batch_t *bb);

#ifdef __cplusplus
}
#endif

#endif
