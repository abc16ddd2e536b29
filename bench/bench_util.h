/* bench_util.h - what every CPU benchmark program needs besides its
 * measurement: fatal errors, checked allocation, the monotonic clock and
 * the machine facts its report header prints. */
#ifndef RD_BENCH_UTIL_H
#define RD_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* "<program>: <message>" on stderr, exit status 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* malloc that dies on failure (0 bytes allocates 1). */
void *xmalloc(size_t bytes);

/* qsort comparator for doubles, ascending (medians of repetitions). */
int cmp_double(const void *a, const void *b);

/* The CPU's model name from /proc/cpuinfo, or "unknown CPU". */
void cpu_model(char *buf, size_t len);

/* The widest vector ISA the CPU's /proc/cpuinfo flags list: "avx512",
 * "avx2" or "baseline" (what a loopback benchmark's header says of the
 * machine; the kernels' own benches print the variant they ran). */
void cpu_isa(char *buf, size_t len);

/* The 1-minute load average from /proc/loadavg, or "?": figures taken on a
 * small machine mean little when something else is running. */
void load_average(char *buf, size_t len);

/* Now as "YYYY-MM-DD HH:MM:SS UTC", for a bench header: a figure is worth
 * little without when it was taken. */
void utc_now(char *buf, size_t len);

/* An option's value as a uint32 in [lo, hi]: decimal, or 2^e; dies with
 * "<opt>: ..." otherwise. */
uint32_t bench_parse_u32(const char *opt, const char *s, uint64_t lo, uint64_t hi);

/* The options every benchmark takes: --json, --quick, --help (prints
 * usage, exits 0). 1 when a is one of them, else 0. */
int bench_common_opt(const char *a, bool *json, bool *quick, void (*usage)(FILE *));

#endif
