/* rd_clock.h - the one monotonic clock the project reads.
 *
 * CLOCK_MONOTONIC as seconds in a double: deadlines and durations only
 * (never wall time; it does not jump when the clock is set).
 */
#ifndef RD_CLOCK_H
#define RD_CLOCK_H

#include <time.h>

static inline double rd_clock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
