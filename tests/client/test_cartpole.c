/* test_cartpole.c - the examples' CartPole-v1 against its equations.
 *
 * Reference values are computed here by hand from the equations (written
 * out independently of cartpole.c), plus the task's rules: thresholds,
 * 500-step truncation, reset range, determinism.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cartpole.h"
#include "rdt_main.h"

/* A fresh episode of a CartPole seeded seed: its first observation in obs. */
static void start(cartpole_t *env, uint64_t seed, float obs[4]) {
  cartpole_seed(env, seed);
  cartpole_reset(env, obs);
}

/* Puts env in the state (x, x_dot, theta, theta_dot). */
static void put(cartpole_t *env, double x, double x_dot, double theta, double theta_dot) {
  env->x = x;
  env->x_dot = x_dot;
  env->theta = theta;
  env->theta_dot = theta_dot;
}

/* From rest with action 1 (F = +10 N):
 *   temp     = F / (mc + mp)                         = 10 / 1.1
 *   thetaacc = -temp / (l (4/3 - mp / (mc + mp)))    (sin 0 = 0, cos 0 = 1)
 *   xacc     = temp - mp l thetaacc / (mc + mp)
 * and Euler moves velocities only: x, theta stay 0 after one step. */
static void test_first_step_from_rest(void **state) {
  (void)state;
  cartpole_t env;
  float obs[4];
  start(&env, 1, obs);
  put(&env, 0, 0, 0, 0);
  float r;
  int term, trunc;
  assert_int_equal(cartpole_step(&env, 1, obs, &r, &term, &trunc), 0);
  double temp = 10.0 / 1.1;
  double thetaacc = -temp / (0.5 * (4.0 / 3.0 - 0.1 / 1.1));
  double xacc = temp - 0.05 * thetaacc / 1.1;
  assert_true(fabs(env.x) < 1e-15);
  assert_true(fabs(env.theta) < 1e-15);
  assert_true(fabs(env.x_dot - 0.02 * xacc) < 1e-12);
  assert_true(fabs(env.theta_dot - 0.02 * thetaacc) < 1e-12);
  assert_true(fabs(env.x_dot - 0.195122) < 1e-6);    /* 0.02 * 9.7561 */
  assert_true(fabs(env.theta_dot + 0.292683) < 1e-6); /* 0.02 * -14.634 */
  assert_true(r == 1.0f);
  assert_false(term);
  assert_false(trunc);
  assert_true(obs[1] == (float)env.x_dot && obs[3] == (float)env.theta_dot);

  /* Action 0 mirrors it. */
  put(&env, 0, 0, 0, 0);
  cartpole_step(&env, 0, obs, &r, &term, &trunc);
  assert_true(fabs(env.x_dot + 0.02 * xacc) < 1e-12);
  assert_true(fabs(env.theta_dot + 0.02 * thetaacc) < 1e-12);
}

/* A general state, checked against the full equations. */
static void test_step_general_state(void **state) {
  (void)state;
  cartpole_t env;
  float obs[4];
  start(&env, 2, obs);
  double x = 0.3, xd = -0.4, th = 0.1, thd = 0.7;
  put(&env, x, xd, th, thd);
  float r;
  int term, trunc;
  cartpole_step(&env, 0, obs, &r, &term, &trunc);
  double F = -10, c = cos(th), s = sin(th);
  double temp = (F + 0.05 * thd * thd * s) / 1.1;
  double ta = (9.8 * s - c * temp) / (0.5 * (4.0 / 3.0 - 0.1 * c * c / 1.1));
  double xa = temp - 0.05 * ta * c / 1.1;
  assert_true(fabs(env.x - (x + 0.02 * xd)) < 1e-12);
  assert_true(fabs(env.x_dot - (xd + 0.02 * xa)) < 1e-12);
  assert_true(fabs(env.theta - (th + 0.02 * thd)) < 1e-12);
  assert_true(fabs(env.theta_dot - (thd + 0.02 * ta)) < 1e-12);
}

static void test_termination(void **state) {
  (void)state;
  cartpole_t env;
  cartpole_seed(&env, 3);
  float obs[4], r;
  int term, trunc;
  /* Pole past 12 degrees after the step. */
  cartpole_reset(&env, obs);
  put(&env, 0, 0, 12.0 * M_PI / 180.0 - 0.001, 0.1); /* theta_dot: + 0.002 rad this step */
  cartpole_step(&env, 1, obs, &r, &term, &trunc);
  assert_true(term);
  assert_false(trunc);
  assert_true(r == 1.0f); /* the last step is rewarded too */
  assert_true(env.done);
  assert_int_equal(cartpole_step(&env, 1, obs, &r, &term, &trunc), -1);
  /* Just inside stays alive. */
  cartpole_reset(&env, obs);
  put(&env, 0, 0, -(12.0 * M_PI / 180.0) + 0.01, 0);
  cartpole_step(&env, 0, obs, &r, &term, &trunc);
  assert_false(term);
  /* Cart past 2.4 (either side). */
  cartpole_reset(&env, obs);
  put(&env, -2.39, -1.0, 0, 0);
  cartpole_step(&env, 0, obs, &r, &term, &trunc);
  assert_true(term);
  cartpole_reset(&env, obs);
  put(&env, 2.395, 0.5, 0, 0);
  cartpole_step(&env, 1, obs, &r, &term, &trunc);
  assert_true(term);
}

static void test_truncation_at_500(void **state) {
  (void)state;
  cartpole_t env;
  cartpole_seed(&env, 4);
  float obs[4], r;
  int term = 0, trunc = 0;
  cartpole_reset(&env, obs);
  int steps = 0;
  while (!term && !trunc) {
    cartpole_step(&env, cartpole_heuristic_action(obs), obs, &r, &term, &trunc);
    steps++;
  }
  /* The heuristic balances: the episode ends by the limit, not a fall. */
  assert_int_equal(steps, CARTPOLE_MAX_STEPS);
  assert_true(trunc);
  assert_false(term);
}

static void test_reset_range_and_determinism(void **state) {
  (void)state;
  cartpole_t a, b;
  cartpole_seed(&a, 77);
  cartpole_seed(&b, 77);
  double lo = 1, hi = -1;
  for (int ep = 0; ep < 2000; ep++) {
    float oa[4], ob[4];
    cartpole_reset(&a, oa);
    cartpole_reset(&b, ob);
    assert_memory_equal(oa, ob, sizeof oa);
    for (int i = 0; i < 4; i++) {
      assert_true(oa[i] >= -0.05f && oa[i] <= 0.05f);
      if (oa[i] < lo) lo = oa[i];
      if (oa[i] > hi) hi = oa[i];
    }
  }
  assert_true(lo < -0.049 && hi > 0.049); /* the whole range is used */
  cartpole_t c;
  cartpole_seed(&c, 78);
  float oc[4], oa[4];
  cartpole_reset(&c, oc);
  cartpole_seed(&a, 77);
  cartpole_reset(&a, oa);
  assert_memory_not_equal(oa, oc, sizeof oa);
}

static void test_rng_uniform(void **state) {
  (void)state;
  cp_rng_t r;
  cp_rng_seed(&r, 0);
  double sum = 0;
  int n = 100000;
  for (int i = 0; i < n; i++) {
    double u = cp_rng_uniform(&r);
    assert_true(u >= 0 && u < 1);
    sum += u;
  }
  assert_true(fabs(sum / n - 0.5) < 0.01);
}

/* Random play lasts about 22 steps on average (a known CartPole figure);
 * the heuristic far longer. */
static void test_random_vs_heuristic(void **state) {
  (void)state;
  cartpole_t env;
  cartpole_seed(&env, 5);
  cp_rng_t pol;
  cp_rng_seed(&pol, 6);
  float obs[4], r;
  int term, trunc;
  long total = 0;
  int episodes = 2000;
  for (int ep = 0; ep < episodes; ep++) {
    cartpole_reset(&env, obs);
    do {
      cartpole_step(&env, (int)(cp_rng_next(&pol) >> 63), obs, &r, &term, &trunc);
      total++;
    } while (!term && !trunc);
  }
  double mean = (double)total / episodes;
  assert_true(mean > 18 && mean < 27);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_first_step_from_rest),
         cmocka_unit_test(test_step_general_state),
         cmocka_unit_test(test_termination),
         cmocka_unit_test(test_truncation_at_500),
         cmocka_unit_test(test_reset_range_and_determinism),
         cmocka_unit_test(test_rng_uniform),
         cmocka_unit_test(test_random_vs_heuristic))
