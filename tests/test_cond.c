/* test_cond.c - condition variables on the monotonic clock (common/rd_cond.h):
 * a deadline is in the future and normalised, and a timed wait on a
 * condition variable from rd_cond_init_monotonic lasts until that deadline
 * (on the wall clock's reading it would already be long past). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>

#include "rd_clock.h"
#include "rd_cond.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deadline),
      cmocka_unit_test(test_timed_wait_lasts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
