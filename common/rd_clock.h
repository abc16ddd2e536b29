/* rd_clock.h - the one monotonic clock the project reads.
 *
 * CLOCK_MONOTONIC as seconds in a double (or nanoseconds): deadlines and
 * durations only
 * (never wall time; it does not jump when the clock is set).
 */
#ifndef RD_CLOCK_H
#define RD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double rd_clock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same clock in whole nanoseconds, for spin budgets that compare often. */
static inline uint64_t rd_clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
