/* bench_util.h - what every CPU benchmark program needs besides its
 * measurement: fatal errors, checked allocation, the monotonic clock and
 * the machine facts its report header prints. */
#ifndef RD_BENCH_UTIL_H
#define RD_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* "<program>: <message>" on stderr, exit status 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* malloc that dies on failure (0 bytes allocates 1). */
void *xmalloc(size_t bytes);

/* qsort comparator for doubles, ascending (medians of repetitions). */
int cmp_double(const void *a, const void *b);

/* The CPU's model name from /proc/cpuinfo, or "unknown CPU". */
void cpu_model(char *buf, size_t len);

/* The 1-minute load average from /proc/loadavg, or "?": figures taken on a
 * small machine mean little when something else is running. */
void load_average(char *buf, size_t len);

/* Now as "YYYY-MM-DD HH:MM:SS UTC", for a bench header: a figure is worth
 * little without when it was taken. */
void utc_now(char *buf, size_t len);

#endif
