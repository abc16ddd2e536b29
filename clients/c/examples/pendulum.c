/* pendulum.c - see pendulum.h. */
#include "pendulum.h"

#include <math.h>

#define PI 3.14159265358979323846

double pendulum_angle_normalize(double x) {
  double r = fmod(x + PI, 2.0 * PI);
  if (r < 0) r += 2.0 * PI; /* Python's % is non-negative for a positive divisor */
  return r - PI;
}

void pendulum_seed(pendulum_t *env, uint64_t seed) {
  cp_rng_seed(&env->rng, seed);
  env->theta = env->theta_dot = 0;
  env->steps = 0;
  env->done = 1; /* reset before the first step */
}

static void observe(const pendulum_t *env, float obs[PENDULUM_OBS_DIM]) {
  obs[0] = (float)cos(env->theta);
  obs[1] = (float)sin(env->theta);
  obs[2] = (float)env->theta_dot;
}

void pendulum_set_state(pendulum_t *env, double theta, double theta_dot,
                        float obs[PENDULUM_OBS_DIM]) {
  env->theta = theta;
  env->theta_dot = theta_dot;
  env->steps = 0;
  env->done = 0;
  observe(env, obs);
}

void pendulum_reset(pendulum_t *env, float obs[PENDULUM_OBS_DIM]) {
  double th = (cp_rng_uniform(&env->rng) * 2.0 - 1.0) * PI;
  double thdot = cp_rng_uniform(&env->rng) * 2.0 - 1.0;
  pendulum_set_state(env, th, thdot, obs);
}

int pendulum_step(pendulum_t *env, double u, float obs[PENDULUM_OBS_DIM], float *reward,
                  int *terminated, int *truncated) {
  if (env->done) return -1;
  if (isnan(u)) u = 0;
  if (u > PENDULUM_MAX_TORQUE) u = PENDULUM_MAX_TORQUE;
  if (u < -PENDULUM_MAX_TORQUE) u = -PENDULUM_MAX_TORQUE;
  double th = env->theta, thdot = env->theta_dot;
  double an = pendulum_angle_normalize(th);
  /* The cost of the state the action was taken in, as Gym computes it. */
  double cost = an * an + 0.1 * thdot * thdot + 0.001 * u * u;
  double newthdot =
      thdot + (3.0 * PENDULUM_G / (2.0 * PENDULUM_L) * sin(th) +
               3.0 / (PENDULUM_M * PENDULUM_L * PENDULUM_L) * u) * PENDULUM_DT;
  if (newthdot > PENDULUM_MAX_SPEED) newthdot = PENDULUM_MAX_SPEED;
  if (newthdot < -PENDULUM_MAX_SPEED) newthdot = -PENDULUM_MAX_SPEED;
  /* Semi-implicit Euler: the angle moves with the new velocity. */
  env->theta = th + newthdot * PENDULUM_DT;
  env->theta_dot = newthdot;
  env->steps++;
  int trunc = env->steps >= PENDULUM_MAX_STEPS;
  env->done = trunc;
  observe(env, obs);
  *reward = (float)-cost;
  *terminated = 0;
  *truncated = trunc;
  return 0;
}
