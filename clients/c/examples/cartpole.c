/* cartpole.c - see cartpole.h. */
#include "cartpole.h"

#include <math.h>
#include "rd_rng.h"

#define GRAVITY 9.8
#define MASSCART 1.0
#define MASSPOLE 0.1
#define TOTAL_MASS (MASSPOLE + MASSCART)
#define LENGTH 0.5 /* half the pole's length */
#define POLEMASS_LENGTH (MASSPOLE * LENGTH)
#define FORCE_MAG 10.0
#define TAU 0.02

void cp_rng_seed(cp_rng_t *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = rd_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t cp_rng_next(cp_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double cp_rng_uniform(cp_rng_t *r) { return (double)(cp_rng_next(r) >> 11) * 0x1.0p-53; }

void cartpole_seed(cartpole_t *env, uint64_t seed) {
  cp_rng_seed(&env->rng, seed);
  env->x = env->x_dot = env->theta = env->theta_dot = 0;
  env->steps = 0;
  env->done = 1; /* reset before the first step */
}

static void observe(const cartpole_t *env, float obs[CARTPOLE_OBS_DIM]) {
  obs[0] = (float)env->x;
  obs[1] = (float)env->x_dot;
  obs[2] = (float)env->theta;
  obs[3] = (float)env->theta_dot;
}

void cartpole_reset(cartpole_t *env, float obs[CARTPOLE_OBS_DIM]) {
  env->x = cp_rng_uniform(&env->rng) * 0.1 - 0.05;
  env->x_dot = cp_rng_uniform(&env->rng) * 0.1 - 0.05;
  env->theta = cp_rng_uniform(&env->rng) * 0.1 - 0.05;
  env->theta_dot = cp_rng_uniform(&env->rng) * 0.1 - 0.05;
  env->steps = 0;
  env->done = 0;
  observe(env, obs);
}

int cartpole_step(cartpole_t *env, int action, float obs[CARTPOLE_OBS_DIM], float *reward,
                  int *terminated, int *truncated) {
  if (env->done) return -1;
  double force = action == 0 ? -FORCE_MAG : FORCE_MAG;
  double costheta = cos(env->theta), sintheta = sin(env->theta);
  /* The cart-pole equations of motion (Florian 2007, correcting Barto et
   * al. 1983), as in Gym. */
  double temp =
      (force + POLEMASS_LENGTH * env->theta_dot * env->theta_dot * sintheta) / TOTAL_MASS;
  double thetaacc = (GRAVITY * sintheta - costheta * temp) /
                    (LENGTH * (4.0 / 3.0 - MASSPOLE * costheta * costheta / TOTAL_MASS));
  double xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
  /* Explicit Euler: positions move with the old velocities. */
  env->x += TAU * env->x_dot;
  env->x_dot += TAU * xacc;
  env->theta += TAU * env->theta_dot;
  env->theta_dot += TAU * thetaacc;
  env->steps++;

  int term = env->x < -CARTPOLE_X_LIMIT || env->x > CARTPOLE_X_LIMIT ||
             env->theta < -CARTPOLE_THETA_LIMIT || env->theta > CARTPOLE_THETA_LIMIT;
  int trunc = !term && env->steps >= CARTPOLE_MAX_STEPS;
  env->done = term || trunc;
  observe(env, obs);
  *reward = 1.0f;
  *terminated = term;
  *truncated = trunc;
  return 0;
}

int cartpole_heuristic_action(const float obs[CARTPOLE_OBS_DIM]) {
  /* Where the pole is heading a few steps from now, plus a weak pull of
   * the cart back to the centre: push that way. */
  double lean = obs[2] + 0.5 * obs[3] + 0.01 * obs[0] + 0.05 * obs[1];
  return lean > 0 ? 1 : 0;
}
