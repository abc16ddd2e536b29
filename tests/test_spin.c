/* test_spin.c - the bounded spin before a hand-off's sleep (common/rd_spin.h):
 * the budget rule, a spin that sees its partner's bump, a spin that gives
 * up at its budget, and a ping-pong of two threads that only spin and
 * sleep as the pipeline does (a lost wake-up would hang it). Also the
 * monotonic condition variables its timed sleep runs on (common/rd_cond.h):
 * a deadline is in the future and normalised, and a timed wait lasts until
 * it (on the wall clock's reading it would already be long past). Run under
 * TSan in CI (scripts/test TSAN_TESTS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>

#include "rd_clock.h"
#include "rd_cond.h"
#include "rd_spin.h"
#include "rdt_main.h"

static void test_budget(void **state) {
  (void)state;
  assert_true(rd_spin_budget(0) == 0);
  assert_true(rd_spin_budget(-1) == 0);
  assert_true(rd_spin_budget(0.0 / 0.0) == 0); /* NaN: unknown */
  assert_true(rd_spin_budget(RD_SPIN_MAX_S * 1.01) == 0); /* a long wait: sleep at once */
  /* Twice the expected wait plus the slack, at most the maximum. */
  assert_float_equal(rd_spin_budget(10e-6), 25e-6, 1e-12);
  assert_float_equal(rd_spin_budget(40e-6), 85e-6, 1e-12);
  assert_float_equal(rd_spin_budget(50e-6), RD_SPIN_MAX_S, 1e-12);
  assert_float_equal(rd_spin_budget(RD_SPIN_MAX_S), RD_SPIN_MAX_S, 1e-12);
}

/* Short waits spin, long ones sleep until the lead and then spin, very
 * long or unknown ones block. */
static void test_plan(void **state) {
  (void)state;
  double sl, sp;
  rd_spin_plan(10e-6, &sl, &sp);
  assert_true(sl == 0);
  assert_float_equal(sp, 25e-6, 1e-12);
  rd_spin_plan(750e-6, &sl, &sp); /* a Hopper step */
  assert_float_equal(sl, 750e-6 - RD_SPIN_LEAD_S, 1e-12);
  assert_float_equal(sp, 2 * RD_SPIN_LEAD_S, 1e-12);
  rd_spin_plan(RD_SPIN_SLEEP_MAX_S * 1.5, &sl, &sp);
  assert_true(sl == 0 && sp == 0);
  rd_spin_plan(0, &sl, &sp);
  assert_true(sl == 0 && sp == 0);
}

static void test_gives_up(void **state) {
  (void)state;
  _Atomic uint64_t ev = 7;
  assert_int_equal(rd_spin_until_changed(&ev, 7, 0), 0); /* no budget: no spin */
  double t0 = rd_clock_now();
  assert_int_equal(rd_spin_until_changed(&ev, 7, 2e-3), 0);
  double dt = rd_clock_now() - t0;
  assert_true(dt >= 2e-3);
  assert_true(dt < 0.5); /* generous: a busy machine may deschedule us */
  /* Already changed: returns at once with 1. */
  assert_int_equal(rd_spin_until_changed(&ev, 6, 1.0), 1);
}

/* A partner thread bumps the counter after a moment; the spinner, given a
 * budget far longer than that, must see it and return 1 well before the
 * budget. */
static void *bump_later(void *arg) {
  _Atomic uint64_t *ev = arg;
  double t0 = rd_clock_now();
  while (rd_clock_now() - t0 < 1e-3) {
  }
  rd_spin_bump(ev);
  return NULL;
}

static void test_sees_bump(void **state) {
  (void)state;
  _Atomic uint64_t ev = 0;
  pthread_t th;
  double t0 = rd_clock_now();
  assert_int_equal(pthread_create(&th, NULL, bump_later, &ev), 0);
  assert_int_equal(rd_spin_until_changed(&ev, 0, 10.0), 1);
  assert_true(rd_clock_now() - t0 < 5.0);
  pthread_join(th, NULL);
  assert_int_equal(atomic_load(&ev), 1);
}

/* Two threads pass a token back and forth ROUNDS times, each waiting as the
 * pipeline's threads do (rd_spin_wait_stage under the mutex, looking again
 * after each stage, then sleeping on the condition variable). The partner
 * changes the state, bumps and signals under the mutex. The expected
 * waits rotate between unknown (block at once), short (spin) and long
 * (timed sleep, then spin), so every path runs. */
#define ROUNDS 20000
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv[2];
  _Atomic uint64_t ev[2];
  int turn; /* whose turn: 0 or 1 */
  uint64_t passes;
} pp_t;

static pp_t pp;

static void *player(void *arg) {
  int me = (int)(intptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) {
    pthread_mutex_lock(&pp.mu);
    int stage = 0;
    const double expected = r % 3 == 0 ? 0 : r % 3 == 1 ? 20e-6 : 300e-6;
    while (pp.turn != me) {
      if (rd_spin_wait_stage(&pp.cv[me], &pp.mu, &pp.ev[me], expected, &stage, NULL)) continue;
      pthread_cond_wait(&pp.cv[me], &pp.mu);
    }
    pp.passes++;
    pp.turn = !me;
    rd_spin_bump(&pp.ev[!me]);
    pthread_cond_signal(&pp.cv[!me]);
    pthread_mutex_unlock(&pp.mu);
  }
  return NULL;
}

static void test_ping_pong(void **state) {
  (void)state;
  pthread_mutex_init(&pp.mu, NULL);
  /* rd_spin_wait_stage's timed sleep */
  assert_int_equal(rd_cond_init_monotonic(&pp.cv[0]), 0);
  assert_int_equal(rd_cond_init_monotonic(&pp.cv[1]), 0);
  pthread_t a, b;
  assert_int_equal(pthread_create(&a, NULL, player, (void *)(intptr_t)0), 0);
  assert_int_equal(pthread_create(&b, NULL, player, (void *)(intptr_t)1), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  assert_int_equal(pp.passes, 2 * ROUNDS);
  assert_int_equal(atomic_load(&pp.ev[0]) + atomic_load(&pp.ev[1]), 2 * ROUNDS);
  pthread_cond_destroy(&pp.cv[0]);
  pthread_cond_destroy(&pp.cv[1]);
  pthread_mutex_destroy(&pp.mu);
}

static void test_deadline(void **state) {
  (void)state;
  struct timespec now, d = rd_cond_deadline(1.5e-3);
  clock_gettime(CLOCK_MONOTONIC, &now);
  assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
  double dt = (double)(d.tv_sec - now.tv_sec) + 1e-9 * (double)(d.tv_nsec - now.tv_nsec);
  assert_true(dt > 0 && dt <= 1.5e-3);
  d = rd_cond_deadline(2.75); /* whole seconds carry */
  clock_gettime(CLOCK_MONOTONIC, &now);
  assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
  dt = (double)(d.tv_sec - now.tv_sec) + 1e-9 * (double)(d.tv_nsec - now.tv_nsec);
  assert_true(dt > 2.7 && dt <= 2.75);
}

/* Only a lower bound: a loaded machine may wake us late, never early. */
static void test_timed_wait_lasts(void **state) {
  (void)state;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  assert_int_equal(rd_cond_init_monotonic(&cv), 0);
  pthread_mutex_lock(&mu);
  double t0 = rd_clock_now();
  struct timespec ts = rd_cond_deadline(0.05);
  int rc = 0;
  while (rc != ETIMEDOUT) rc = pthread_cond_timedwait(&cv, &mu, &ts); /* spurious wake-ups */
  double waited = rd_clock_now() - t0;
  pthread_mutex_unlock(&mu);
  assert_true(waited >= 0.05 - 1e-3);
  pthread_cond_destroy(&cv);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_budget),
         cmocka_unit_test(test_plan),
         cmocka_unit_test(test_gives_up),
         cmocka_unit_test(test_sees_bump),
         cmocka_unit_test(test_ping_pong),
         cmocka_unit_test(test_deadline),
         cmocka_unit_test(test_timed_wait_lasts))
