/* cartpole.h - CartPole-v1, the classic-control task, written from its
 * equations (Barto, Sutton and Anderson 1983, as in Gym/Gymnasium's
 * cartpole.py) so the examples need no Python.
 *
 * A pole hinged on a cart; action 0 pushes the cart left with 10 N, 1
 * pushes it right. Physics: gravity 9.8, cart mass 1.0, pole mass 0.1,
 * pole half-length 0.5, time step tau 0.02 s, explicit Euler integration.
 * Reward 1 for every step, including the last. The episode terminates when
 * |x| > 2.4 or |theta| > 12 degrees, and is truncated after 500 steps.
 * reset draws every state variable uniformly from [-0.05, 0.05].
 */
#ifndef RDC_CARTPOLE_H
#define RDC_CARTPOLE_H

#include <stdint.h>

#define CARTPOLE_OBS_DIM 4
#define CARTPOLE_MAX_STEPS 500
#define CARTPOLE_X_LIMIT 2.4
#define CARTPOLE_THETA_LIMIT (12.0 * 2.0 * 3.14159265358979323846 / 360.0)

/* xoshiro256** (Blackman and Vigna): small, fast, good enough for
 * environments and epsilon-greedy, seeded through splitmix64. */
typedef struct {
  uint64_t s[4];
} cp_rng_t;

void cp_rng_seed(cp_rng_t *r, uint64_t seed);
uint64_t cp_rng_next(cp_rng_t *r);
/* Uniform in [0, 1). */
double cp_rng_uniform(cp_rng_t *r);

typedef struct {
  double x, x_dot, theta, theta_dot; /* the state, in double as Gym keeps it */
  uint32_t steps;                    /* steps taken in this episode */
  int done;                          /* terminated or truncated: reset next */
  cp_rng_t rng;
} cartpole_t;

/* Seed the environment's generator (call once, then reset). */
void cartpole_seed(cartpole_t *env, uint64_t seed);

/* Start an episode; obs receives the first observation (float32, as Gym's
 * observation space). */
void cartpole_reset(cartpole_t *env, float obs[CARTPOLE_OBS_DIM]);

/* Take one step with action 0 or 1 (anything else counts as 1). obs gets
 * the next observation, *reward 1. *terminated: the pole fell or the cart
 * left the track (a true end: no bootstrapping); *truncated: the 500-step
 * limit (not a failure: a learner should bootstrap). Stepping a finished
 * episode returns -1 and changes nothing; 0 otherwise. */
int cartpole_step(cartpole_t *env, int action, float obs[CARTPOLE_OBS_DIM], float *reward,
                  int *terminated, int *truncated);

/* The examples' fixed stand-in policy (there are no trained weights yet):
 * push the cart toward the side the pole is falling to. Returns 0 or 1. */
int cartpole_heuristic_action(const float obs[CARTPOLE_OBS_DIM]);

#endif
