/* bench_util.c - see bench_util.h. */
#define _GNU_SOURCE
#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", program_invocation_short_name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL) die("out of memory allocating %zu bytes", bytes);
  return p;
}

int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = '\0';
        snprintf(buf, len, "%s", c);
      }
      break;
    }
  }
  fclose(f);
}

void cpu_isa(char *buf, size_t len) {
  snprintf(buf, len, "baseline");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    if (strstr(line, " avx512f") != NULL)
      snprintf(buf, len, "avx512");
    else if (strstr(line, " avx2") != NULL)
      snprintf(buf, len, "avx2");
    break;
  }
  fclose(f);
}

void load_average(char *buf, size_t len) {
  snprintf(buf, len, "?");
  FILE *f = fopen("/proc/loadavg", "r");
  if (f == NULL) return;
  char first[32];
  if (fscanf(f, "%31s", first) == 1) snprintf(buf, len, "%s", first);
  fclose(f);
}

void utc_now(char *buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    snprintf(buf, len, "?");
}

uint32_t bench_parse_u32(const char *opt, const char *s, uint64_t lo, uint64_t hi) {
  uint64_t v;
  char *end;
  errno = 0;
  if (s[0] == '2' && s[1] == '^') {
    unsigned long e = strtoul(s + 2, &end, 10);
    if (*end != '\0' || e > 40) die("%s: cannot parse '%s'", opt, s);
    v = UINT64_C(1) << e;
  } else {
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == '-') die("%s: cannot parse '%s'", opt, s);
    v = x;
  }
  if (v < lo || v > hi)
    die("%s: %" PRIu64 " is outside [%" PRIu64 ", %" PRIu64 "]", opt, v, lo, hi);
  return (uint32_t)v;
}

int bench_common_opt(const char *a, bool *json, bool *quick, void (*usage)(FILE *)) {
  if (strcmp(a, "--json") == 0) {
    *json = true;
  } else if (strcmp(a, "--quick") == 0) {
    *quick = true;
  } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
    usage(stdout);
    exit(0);
  } else {
    return 0;
  }
  return 1;
}
