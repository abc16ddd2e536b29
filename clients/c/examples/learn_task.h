/* learn_task.h - what replayd-learn's actors learn: an environment
 * (CartPole-v1 or Pendulum-v1), an algorithm of the hosted learner (DQN or
 * DDPG), the row schema that joins them, default hyperparameters, and how a
 * policy network's output becomes an environment action.
 *
 * Any environment works with either algorithm:
 *   DQN   K discrete actions (int32). CartPole: K = 2, the push direction.
 *         Pendulum: K torques evenly spaced over [-2, 2] (default K = 5).
 *   DDPG  one continuous action (float32[1]) in [action_low, action_high].
 *         Pendulum: the torque, [-2, 2]. CartPole: [-1, 1], push right if
 *         the action is > 0.
 *
 * The schema is the learner's (api/replayd.proto, LearnerSpec):
 *   obs float32[obs_dim], action (int32 | float32[1]), reward float32,
 *   next_obs float32[obs_dim], discount float32 (n-step rows, nstep.h).
 *
 * Policies (the weights GetWeights serves, run by rdc_policy_forward):
 * DQN's is the Q network, obs -> K values, greedy = argmax. DDPG's is the
 * actor, obs -> tanh output y in [-1, 1]^1, the action
 * low + (y + 1) / 2 * (high - low) (backends/cpu/learner.h).
 */
#ifndef RDC_LEARN_TASK_H
#define RDC_LEARN_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "cartpole.h"
#include "pendulum.h"
#include "replayd_client.h"

typedef enum { LT_CARTPOLE = 1, LT_PENDULUM = 2 } lt_env_t;
typedef enum { LT_DQN = 1, LT_DDPG = 2 } lt_algo_t;

enum { LT_F_OBS = 0, LT_F_ACTION, LT_F_REWARD, LT_F_NEXT_OBS, LT_F_DISCOUNT, LT_N_FIELDS };

#define LT_MAX_OBS 4            /* the largest obs_dim of the environments */
#define LT_MAX_ACTIONS 256      /* DQN actions this program handles */
#define LT_PENDULUM_DEFAULT_K 5
#define LT_MAX_PRIORITY 1e5     /* initial priorities are capped here */

typedef struct {
  lt_env_t env;
  lt_algo_t algo;
  uint32_t obs_dim;
  uint32_t num_actions;          /* DQN */
  double action_low, action_high; /* DDPG */
} lt_task_t;

/* "cartpole" / "pendulum", "dqn" / "ddpg"; 0 or -1. */
int lt_env_parse(const char *s, lt_env_t *out);
int lt_algo_parse(const char *s, lt_algo_t *out);
const char *lt_env_name(lt_env_t e);
const char *lt_algo_name(lt_algo_t a);
/* CartPole learns with DQN, Pendulum with DDPG, unless told otherwise. */
lt_algo_t lt_default_algo(lt_env_t e);

/* A task with the environment's action space. num_actions: DQN's K, 0 =
 * the default (CartPole needs exactly 2). 0, or -1 with a message. */
int lt_task_init(lt_task_t *t, lt_env_t env, lt_algo_t algo, uint32_t num_actions, char *msg,
                 size_t cap);

/* Bytes of one row's action: 4 (an int32, or one float32). */
static inline uint32_t lt_action_bytes(const lt_task_t *t) {
  (void)t;
  return 4;
}

/* The row schema (LT_N_FIELDS fields). */
void lt_fields(const lt_task_t *t, rdc_field_t f[LT_N_FIELDS]);

/* A workload spec with the schema and this task's default hyperparameters
 * (capacity, replay exponents, learner section; continuous mode with the
 * default samples-per-insert). The caller may then change any of it. */
void lt_default_spec(const lt_task_t *t, uint64_t seed, rdc_spec_t *spec);

/* The task a described workload runs for environment env: the algorithm,
 * K and action range from its (normalised) learner section, checked
 * against the environment and the schema. 0, or -1 with a message that
 * names the mismatch. */
int lt_task_from_spec(lt_task_t *t, lt_env_t env, const rdc_spec_t *spec, char *msg, size_t cap);

/* The policy fits the task: inputs obs_dim; outputs K (DQN) or 1 (DDPG).
 * 0, or -1 with a message. */
int lt_check_policy(const lt_task_t *t, const rdc_policy_t *p, char *msg, size_t cap);

/* One environment of the task. */
typedef struct {
  const lt_task_t *task;
  cartpole_t cp;
  pendulum_t pd;
  double ret;      /* return of the episode so far */
  uint32_t length; /* its steps */
} lt_env_state_t;

void lt_env_seed(lt_env_state_t *e, const lt_task_t *t, uint64_t seed);
void lt_env_reset(lt_env_state_t *e, float *obs);
/* Step with the row's action (an int32 or a float, as lt_action_bytes).
 * Adds the reward to e->ret. Returns 0, or -1 for a finished episode. */
int lt_env_step(lt_env_state_t *e, const void *action, float *obs, float *reward,
                int *terminated, int *truncated);

/* Choosing actions. policy NULL (no weights yet): uniformly random over the
 * action space. DQN: with probability epsilon random, else argmax Q (the
 * lowest index on ties). DDPG: the actor's action plus Gaussian noise of
 * standard deviation noise * (high - low) / 2, clipped to [low, high]
 * (noise 0: deterministic). Writes lt_action_bytes bytes to action. q_out
 * (may be NULL) receives the network outputs when the policy ran. Returns
 * 0, or -1 if the forward pass failed (policy not loaded). */
int lt_act(const lt_task_t *t, rdc_policy_t *policy, const float *obs, double epsilon,
           double noise, cp_rng_t *rng, void *action);

/* Ape-X's per-actor exploration (papers/003): epsilon_i = base^(1 + 7 i /
 * (N - 1)) for actor i of N (base for a single actor). */
double lt_apex_epsilon(double base, uint32_t i, uint32_t n);

/* A standard normal draw (Box-Muller). */
double lt_gaussian(cp_rng_t *rng);

/* Initial priorities for DQN rows from the actor's copy of the Q network
 * (the only network it has: Ape-X actors do the same): |delta| =
 * |reward + discount * max_a Q(next_obs, a) - Q(obs, action)|, with the
 * network as its own target, capped at LT_MAX_PRIORITY. n rows in the
 * batch's column layout. 0, or -1 if the policy does not fit or a value is
 * not finite (then send no priorities: the server gives the rows its
 * largest priority). */
int lt_dqn_priorities(const lt_task_t *t, rdc_policy_t *policy, size_t n, const float *obs,
                      const int32_t *action, const float *reward, const float *next_obs,
                      const float *discount, double *out);

#endif
