/* pendulum.h - Pendulum-v1, the classic-control swing-up task, written from
 * its equations (as Gym/Gymnasium's pendulum.py) so the examples need no
 * Python.
 *
 * A pole of mass m = 1 and length l = 1 hangs from a motor that applies a
 * torque u in [-2, 2]; gravity g = 10, time step dt = 0.05 s. With theta
 * the angle from upright (0 = up):
 *
 *   u        = clip(u, -2, 2)
 *   reward   = -(angle_normalize(theta)^2 + 0.1 thdot^2 + 0.001 u^2)
 *              (of the state before the step)
 *   thdot'   = clip(thdot + (3 g / (2 l) sin(theta) + 3 / (m l^2) u) dt, -8, 8)
 *   theta'   = theta + thdot' dt
 *
 * The observation is (cos theta, sin theta, thdot) as float32. An episode
 * never terminates; it is truncated after 200 steps (a learner must
 * bootstrap there). reset draws theta from U[-pi, pi] and thdot from
 * U[-1, 1]. Returns lie in about [-1700, 0]; a good policy gets about -150.
 */
#ifndef RDC_PENDULUM_H
#define RDC_PENDULUM_H

#include <stdint.h>

#include "cartpole.h" /* cp_rng_t: the examples' one generator */

#define PENDULUM_OBS_DIM 3
#define PENDULUM_MAX_STEPS 200
#define PENDULUM_MAX_SPEED 8.0
#define PENDULUM_MAX_TORQUE 2.0
#define PENDULUM_G 10.0
#define PENDULUM_M 1.0
#define PENDULUM_L 1.0
#define PENDULUM_DT 0.05

typedef struct {
  double theta, theta_dot; /* the state, in double as Gym keeps it */
  uint32_t steps;          /* steps taken in this episode */
  int done;                /* truncated: reset next */
  cp_rng_t rng;
} pendulum_t;

/* theta mapped into [-pi, pi) as Gym's angle_normalize: ((x + pi) mod 2pi) - pi
 * with a non-negative modulo. */
double pendulum_angle_normalize(double x);

/* Seed the environment's generator (call once, then reset). */
void pendulum_seed(pendulum_t *env, uint64_t seed);

/* Start an episode; obs receives the first observation. */
void pendulum_reset(pendulum_t *env, float obs[PENDULUM_OBS_DIM]);

/* Set the state directly (tests, and evaluation from chosen starts), as
 * the start of a new episode. */
void pendulum_set_state(pendulum_t *env, double theta, double theta_dot,
                        float obs[PENDULUM_OBS_DIM]);

/* One step with torque u (clipped to [-2, 2]; NaN counts as 0, so a broken
 * policy cannot poison the state). obs gets the next observation, *reward
 * the reward; *terminated is always 0, *truncated 1 at the 200th step.
 * Stepping a finished episode returns -1 and changes nothing; 0 otherwise. */
int pendulum_step(pendulum_t *env, double u, float obs[PENDULUM_OBS_DIM], float *reward,
                  int *terminated, int *truncated);

#endif
