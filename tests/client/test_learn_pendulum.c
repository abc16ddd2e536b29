/* test_learn_pendulum.c - Pendulum-v1 (clients/c/examples/pendulum.c)
 * against steps worked out by hand from Gym's equations:
 *
 *   u' = clip(u, -2, 2); r = -(norm(th)^2 + 0.1 thdot^2 + 0.001 u'^2)
 *   thdot' = clip(thdot + (15 sin th + 3 u') * 0.05, -8, 8); th' = th + 0.05 thdot'
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pendulum.h"
#include "rdt_main.h"

#define PI 3.14159265358979323846

static void near(double got, double want, double tol) {
  if (fabs(got - want) > tol) fail_msg("got %.9g, want %.9g (tol %g)", got, want, tol);
}

/* A pendulum and what its last step gave. */
typedef struct {
  pendulum_t p;
  float obs[3], r;
  int term, trunc;
} pend_t;

static pend_t pend(uint64_t seed) {
  pend_t e;
  memset(&e, 0, sizeof e);
  pendulum_seed(&e.p, seed);
  return e;
}

/* pendulum_step with torque u: its return value. */
static int step(pend_t *e, double u) {
  return pendulum_step(&e->p, u, e->obs, &e->r, &e->term, &e->trunc);
}

static void test_angle_normalize(void **state) {
  (void)state;
  near(pendulum_angle_normalize(0), 0, 1e-12);
  near(pendulum_angle_normalize(7.0), 7.0 - 2 * PI, 1e-12);        /* 0.71681469 */
  near(pendulum_angle_normalize(3 * PI / 2), -PI / 2, 1e-12);
  near(pendulum_angle_normalize(-3 * PI / 2), PI / 2, 1e-12);      /* negative fmod fixed */
  near(pendulum_angle_normalize(PI), -PI, 1e-12);                  /* [-pi, pi) */
  near(pendulum_angle_normalize(-PI), -PI, 1e-12);
  near(pendulum_angle_normalize(-0.5), -0.5, 1e-12);
  near(pendulum_angle_normalize(-7.0), -7.0 + 2 * PI, 1e-12);
}

static void test_upright_rest_is_free(void **state) {
  (void)state;
  pend_t e = pend(1);
  pendulum_set_state(&e.p, 0, 0, e.obs);
  assert_true(e.obs[0] == 1.0f && e.obs[1] == 0.0f && e.obs[2] == 0.0f);
  assert_int_equal(step(&e, 0), 0);
  assert_true(e.r == 0.0f); /* -(0 + 0 + 0) */
  assert_true(e.p.theta == 0 && e.p.theta_dot == 0);
  assert_false(e.term);
  assert_false(e.trunc);
}

static void test_step_by_hand(void **state) {
  (void)state;
  pend_t e = pend(1);
  /* th = pi/2 (horizontal), thdot = 1, u = 1:
   *   r       = -((pi/2)^2 + 0.1 + 0.001)     = -2.5684011
   *   thdot'  = 1 + (15 * 1 + 3 * 1) * 0.05    = 1.9
   *   th'     = pi/2 + 1.9 * 0.05              = 1.66579633
   *   obs     = (cos th', sin th', 1.9)        = (-0.09485717, 0.99549089, 1.9) */
  pendulum_set_state(&e.p, PI / 2, 1.0, e.obs);
  assert_int_equal(step(&e, 1.0), 0);
  near(e.r, -(PI * PI / 4 + 0.1 + 0.001), 1e-6);
  near(e.r, -2.5684011, 1e-6);
  near(e.p.theta_dot, 1.9, 1e-12);
  near(e.p.theta, PI / 2 + 0.095, 1e-12);
  near(e.obs[0], -0.09485717, 1e-7);
  near(e.obs[1], 0.99549089, 1e-7);
  near(e.obs[2], 1.9, 1e-6);

  /* Hanging down (th = pi, normalised to -pi), fast, torque beyond the
   * limit: u' = 2, r = -(pi^2 + 0.1 * 7.9^2 + 0.001 * 4) = -16.1146044;
   * thdot' = 7.9 + (15 sin(pi) + 6) * 0.05 = 8.2 -> clipped to 8;
   * th' = pi + 0.4. */
  pendulum_set_state(&e.p, PI, 7.9, e.obs);
  assert_int_equal(step(&e, 5.0), 0);
  near(e.r, -(PI * PI + 0.1 * 7.9 * 7.9 + 0.004), 1e-5);
  near(e.r, -16.1146044, 1e-5);
  near(e.p.theta_dot, 8.0, 0);
  near(e.p.theta, PI + 0.4, 1e-12);
  near(e.obs[0], cos(PI + 0.4), 1e-7);
  near(e.obs[2], 8.0, 0);

  /* Negative side: th = -0.3, thdot = -2, u = -5 -> -2:
   * r = -(0.09 + 0.4 + 0.004) = -0.494;
   * thdot' = -2 + (15 sin(-0.3) - 6) * 0.05 = -2.52164015;
   * th' = -0.3 + 0.05 thdot' = -0.42608201. */
  pendulum_set_state(&e.p, -0.3, -2.0, e.obs);
  assert_int_equal(step(&e, -5.0), 0);
  near(e.r, -0.494, 1e-6);
  near(e.p.theta_dot, -2.0 + (15 * sin(-0.3) - 6) * 0.05, 1e-12);
  near(e.p.theta_dot, -2.52164015, 1e-8);
  near(e.p.theta, -0.42608201, 1e-8);
  near(e.obs[1], -0.41330629, 1e-7);

  /* Two steps in a row: the second starts from the first's state. */
  pendulum_set_state(&e.p, 0.1, 0.0, e.obs);
  step(&e, 0.0);
  double td1 = 0.75 * sin(0.1), th1 = 0.1 + 0.05 * td1; /* 15 * 0.05 = 0.75 */
  near(e.p.theta_dot, td1, 1e-12);
  step(&e, 0.0);
  near(e.r, -(th1 * th1 + 0.1 * td1 * td1), 1e-7);
  near(e.p.theta_dot, td1 + 0.75 * sin(th1), 1e-12);
}

static void test_nan_action_is_zero(void **state) {
  (void)state;
  pendulum_t a, b;
  pendulum_seed(&a, 1);
  pendulum_seed(&b, 1);
  float oa[3], ob[3], ra, rb;
  int term, trunc;
  pendulum_set_state(&a, 1.0, 0.5, oa);
  pendulum_set_state(&b, 1.0, 0.5, ob);
  pendulum_step(&a, NAN, oa, &ra, &term, &trunc);
  pendulum_step(&b, 0.0, ob, &rb, &term, &trunc);
  assert_true(ra == rb && oa[0] == ob[0] && oa[1] == ob[1] && oa[2] == ob[2]);
  assert_true(isfinite(a.theta));
}

static void test_truncation_at_200(void **state) {
  (void)state;
  pend_t e = pend(7);
  pendulum_reset(&e.p, e.obs);
  for (int t = 1; t <= PENDULUM_MAX_STEPS; t++) {
    assert_int_equal(step(&e, 2.0), 0);
    assert_false(e.term); /* never terminates */
    assert_int_equal(e.trunc, t == PENDULUM_MAX_STEPS);
    assert_true(e.r <= 0 && e.r >= -(PI * PI + 0.1 * 64 + 0.004) - 1e-4);
    assert_true(fabs(e.obs[2]) <= 8.0f);
  }
  assert_int_equal(step(&e, 0.0), -1);
  assert_int_equal(e.p.steps, PENDULUM_MAX_STEPS);
  pendulum_reset(&e.p, e.obs);
  assert_int_equal(e.p.steps, 0);
  assert_int_equal(step(&e, 0.0), 0);
}

static void test_reset_distribution(void **state) {
  (void)state;
  pendulum_t p;
  pendulum_seed(&p, 3);
  float obs[3];
  double min_th = 10, max_th = -10, min_td = 10, max_td = -10, mean_th = 0;
  const int n = 20000;
  for (int i = 0; i < n; i++) {
    pendulum_reset(&p, obs);
    assert_true(p.theta >= -PI && p.theta <= PI);
    assert_true(p.theta_dot >= -1 && p.theta_dot <= 1);
    near(obs[0], cos(p.theta), 1e-7);
    near(obs[1], sin(p.theta), 1e-7);
    near(obs[2], p.theta_dot, 1e-7);
    min_th = fmin(min_th, p.theta);
    max_th = fmax(max_th, p.theta);
    min_td = fmin(min_td, p.theta_dot);
    max_td = fmax(max_td, p.theta_dot);
    mean_th += p.theta / n;
  }
  /* Uniform over the whole ranges. */
  assert_true(min_th < -3.1 && max_th > 3.1);
  assert_true(min_td < -0.99 && max_td > 0.99);
  assert_true(fabs(mean_th) < 0.1);
  /* The same seed gives the same starts. */
  pendulum_t q;
  pendulum_seed(&p, 11);
  pendulum_seed(&q, 11);
  float o2[3];
  pendulum_reset(&p, obs);
  pendulum_reset(&q, o2);
  assert_true(p.theta == q.theta && p.theta_dot == q.theta_dot);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_angle_normalize),    cmocka_unit_test(test_upright_rest_is_free),
         cmocka_unit_test(test_step_by_hand),       cmocka_unit_test(test_nan_action_is_zero),
         cmocka_unit_test(test_truncation_at_200),  cmocka_unit_test(test_reset_distribution))
