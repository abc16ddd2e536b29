/* test_learn_nstep.c - n-step rows (clients/c/examples/nstep.c) on
 * hand-made episodes with gamma = 0.5, so every return is exact in binary.
 * obs_t is the number t (1-dimensional), the action 10 t (an int32). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nstep.h"
#include "rdt_main.h"

typedef struct {
  float obs, next_obs, reward, discount;
  int32_t action;
} row_t;

static row_t row(const nstep_batch_t *b, size_t i) {
  row_t r;
  r.obs = b->obs[i];
  r.next_obs = b->next_obs[i];
  r.reward = b->reward[i];
  r.discount = b->discount[i];
  memcpy(&r.action, b->action + 4 * i, 4);
  return r;
}

static void expect(const nstep_batch_t *b, size_t i, float obs, float reward, float next_obs,
                   float discount) {
  row_t r = row(b, i);
  if (r.obs != obs || r.reward != reward || r.next_obs != next_obs || r.discount != discount ||
      r.action != (int32_t)(10 * obs))
    fail_msg("row %zu: obs %g action %d R %g next %g disc %g; want obs %g action %d R %g next %g "
             "disc %g", i, r.obs, r.action, r.reward, r.next_obs, r.discount, obs,
             (int)(10 * obs), reward, next_obs, discount);
}

/* Push step (obs_t = o, reward r, next obs o + 1) into batch b. */
static int push_into(nstep_t *ns, nstep_batch_t *b, float o, float r, int term, int trunc) {
  int32_t a = (int32_t)(10 * o);
  float next = o + 1;
  return nstep_push(ns, &o, &a, r, &next, term, trunc, b);
}

/* A window of n steps of this file's layout (obs float32[1], action
 * int32) with gamma, and a batch of cap rows for it. */
typedef struct {
  nstep_t ns;
  nstep_batch_t b;
} fix_t;

static fix_t fix(uint32_t n, double gamma, size_t cap) {
  fix_t f;
  assert_int_equal(nstep_init(&f.ns, n, gamma, 1, 4), 0);
  assert_int_equal(nstep_batch_init(&f.b, cap, 1, 4), 0);
  return f;
}

static void fix_free(fix_t *f) {
  nstep_batch_free(&f->b);
  nstep_free(&f->ns);
}

/* push_into f's own batch. */
static int push(fix_t *f, float o, float r, int term, int trunc) {
  return push_into(&f->ns, &f->b, o, r, term, trunc);
}

static void test_episode_ends(void **state) {
  (void)state;
  fix_t f = fix(3, 0.5, 64);

  /* Episode A: obs 0..5, rewards 1..5, truncated at the 5th step. */
  assert_int_equal(push(&f, 0, 1, 0, 0), 0);
  assert_int_equal(push(&f, 1, 2, 0, 0), 0);
  assert_int_equal(nstep_pending(&f.ns), 2);
  assert_int_equal(push(&f, 2, 3, 0, 0), 1);
  expect(&f.b, 0, 0, 1 + 0.5f * 2 + 0.25f * 3, 3, 0.125f); /* R = 2.75, gamma^3 */
  assert_int_equal(push(&f, 3, 4, 0, 0), 1);
  expect(&f.b, 1, 1, 2 + 0.5f * 3 + 0.25f * 4, 4, 0.125f); /* 4.5 */
  /* Truncation: the three pending windows end at obs 5, bootstrapped with
   * gamma^m for their m = 3, 2, 1 steps. */
  assert_int_equal(push(&f, 4, 5, 0, 1), 3);
  expect(&f.b, 2, 2, 3 + 0.5f * 4 + 0.25f * 5, 5, 0.125f); /* 6.25 */
  expect(&f.b, 3, 3, 4 + 0.5f * 5, 5, 0.25f);               /* 6.5 */
  expect(&f.b, 4, 4, 5, 5, 0.5f);
  assert_int_equal(nstep_pending(&f.ns), 0);

  /* Episode B: obs 100, 101, terminated at its 2nd step (shorter than n):
   * discount 0 for both rows. */
  assert_int_equal(push(&f, 100, 1, 0, 0), 0);
  assert_int_equal(push(&f, 101, -1, 1, 0), 2);
  expect(&f.b, 5, 100, 1 - 0.5f, 102, 0);
  expect(&f.b, 6, 101, -1, 102, 0);

  /* Episode C: obs 200..203, rewards 1, terminated at the 4th step: one
   * full window, then three ending in the termination. */
  assert_int_equal(push(&f, 200, 1, 0, 0), 0);
  assert_int_equal(push(&f, 201, 1, 0, 0), 0);
  assert_int_equal(push(&f, 202, 1, 0, 0), 1);
  expect(&f.b, 7, 200, 1.75f, 203, 0.125f);
  assert_int_equal(push(&f, 203, 1, 1, 0), 3);
  expect(&f.b, 8, 201, 1.75f, 204, 0);
  expect(&f.b, 9, 202, 1.5f, 204, 0);
  expect(&f.b, 10, 203, 1, 204, 0);

  /* A one-step episode that is truncated at once. */
  assert_int_equal(push(&f, 300, 2, 0, 1), 1);
  expect(&f.b, 11, 300, 2, 301, 0.5f);
  /* Every step gave exactly one row. */
  assert_int_equal(f.b.count, 5 + 2 + 4 + 1);
  fix_free(&f);
}

static void test_one_step(void **state) {
  (void)state;
  fix_t f = fix(1, 0.5, 8);
  assert_int_equal(push(&f, 0, 3, 0, 0), 1);
  assert_int_equal(push(&f, 1, 4, 0, 1), 1);
  assert_int_equal(push(&f, 7, 5, 1, 0), 1);
  expect(&f.b, 0, 0, 3, 1, 0.5f);
  expect(&f.b, 1, 1, 4, 2, 0.5f); /* truncated: still bootstraps */
  expect(&f.b, 2, 7, 5, 8, 0);
  fix_free(&f);
}

static void test_long_window_wraps(void **state) {
  (void)state;
  /* n = 4 over 10 steps: the ring wraps; row t spans t..t+3. */
  fix_t f = fix(4, 0.5, 32);
  for (int t = 0; t < 10; t++) push(&f, (float)t, (float)(t + 1), 0, t == 9);
  assert_int_equal(f.b.count, 10);
  for (int t = 0; t < 10; t++) {
    int m = 10 - t < 4 ? 10 - t : 4;
    float R = 0, g = 1;
    for (int k = 0; k < m; k++, g *= 0.5f) R += g * (float)(t + k + 1);
    expect(&f.b, (size_t)t, (float)t, R, (float)(t + m), g);
  }
  fix_free(&f);
}

static void test_full_batch_changes_nothing(void **state) {
  (void)state;
  fix_t f = fix(3, 0.5, 4);
  nstep_batch_t other;
  assert_int_equal(nstep_batch_init(&other, 8, 2, 4), 0);
  push(&f, 0, 1, 0, 0);
  push(&f, 1, 1, 0, 0);
  assert_int_equal(push(&f, 2, 1, 0, 0), 1);
  assert_int_equal(f.b.count, 1);
  assert_false(nstep_batch_fits(&f.ns, &f.b) == 0); /* 3 free of 4 */
  assert_int_equal(push(&f, 3, 1, 0, 0), 1);
  /* 2 rows free, a push may need 3: refused, state unchanged. */
  assert_false(nstep_batch_fits(&f.ns, &f.b));
  assert_int_equal(push(&f, 4, 1, 0, 1), -1);
  assert_int_equal(f.b.count, 2);
  assert_int_equal(nstep_pending(&f.ns), 2);
  /* A batch of another layout is refused too. */
  assert_int_equal(push_into(&f.ns, &other, 4, 1, 0, 1), -1);
  assert_int_equal(other.count, 0);
  /* After a flush the same push goes through. */
  f.b.count = 0;
  assert_int_equal(push(&f, 4, 1, 0, 1), 3);
  expect(&f.b, 0, 2, 1.75f, 5, 0.125f);
  nstep_reset(&f.ns);
  assert_int_equal(nstep_pending(&f.ns), 0);
  nstep_batch_free(&other);
  fix_free(&f);
}

static void test_bad_arguments(void **state) {
  (void)state;
  nstep_t ns;
  nstep_batch_t b;
  assert_int_equal(nstep_init(&ns, 0, 0.5, 1, 4), -1);
  assert_int_equal(nstep_init(&ns, NSTEP_MAX_N + 1, 0.5, 1, 4), -1);
  assert_int_equal(nstep_init(&ns, 3, 1.5, 1, 4), -1);
  assert_int_equal(nstep_init(&ns, 3, -0.1, 1, 4), -1);
  assert_int_equal(nstep_init(&ns, 3, NAN, 1, 4), -1);
  assert_int_equal(nstep_init(&ns, 3, 0.5, 0, 4), -1);
  assert_int_equal(nstep_init(&ns, 3, 0.5, 1, 0), -1);
  assert_int_equal(nstep_batch_init(&b, 0, 1, 4), -1);
  assert_int_equal(nstep_batch_init(&b, 4, 0, 4), -1);
  /* gamma 0 and 1 are allowed. */
  fix_t f = fix(2, 1.0, 4);
  push(&f, 0, 1, 0, 0);
  push(&f, 1, 1, 0, 0);
  expect(&f.b, 0, 0, 2, 2, 1.0f);
  fix_free(&f);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_episode_ends),      cmocka_unit_test(test_one_step),
         cmocka_unit_test(test_long_window_wraps), cmocka_unit_test(test_full_batch_changes_nothing),
         cmocka_unit_test(test_bad_arguments))
