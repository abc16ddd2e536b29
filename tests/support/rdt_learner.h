/* rdt_learner.h - learner configs for tests: the defaults
 * (rd_learner_config_default) with a network's shape, so that a test
 * states only the shape and what it changes besides.
 *
 * Contract: the builders overwrite c and allocate nothing; hidden (and
 * critic) hold n_hidden (n_critic) widths. */
#ifndef RDT_LEARNER_H
#define RDT_LEARNER_H

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

#ifdef __cplusplus
}
#endif

#endif
