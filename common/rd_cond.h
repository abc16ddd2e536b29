/* rd_cond.h - condition variables whose timed waits run on rd_clock's clock.
 *
 * A pthread condition variable measures a timed wait's deadline on
 * CLOCK_REALTIME unless it is told otherwise, and a wall clock that is set
 * would then stretch or cut the wait. Every timed wait of the project is on
 * CLOCK_MONOTONIC instead: initialise the condition variable with
 * rd_cond_init_monotonic and build the deadline with rd_cond_deadline.
 */
#ifndef RD_COND_H
#define RD_COND_H

#include <pthread.h>
#include <time.h>

/* pthread_cond_init with CLOCK_MONOTONIC for pthread_cond_timedwait;
 * 0 or pthread_cond_init's error. */
static inline int rd_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0) return rc;
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}

/* The absolute CLOCK_MONOTONIC time s (>= 0) seconds from now, for a timed
 * wait on a condition variable made by rd_cond_init_monotonic. */
static inline struct timespec rd_cond_deadline(double s) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long ns = ts.tv_nsec + (long)(s * 1e9);
  ts.tv_sec += ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  return ts;
}

#endif
