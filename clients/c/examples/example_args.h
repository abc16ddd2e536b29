/* example_args.h - the few argument helpers the example programs share. */
#ifndef RDC_EXAMPLE_ARGS_H
#define RDC_EXAMPLE_ARGS_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "rd_clock.h"

/* "--name value" or "--name=value" at argv[*i]: returns the value (moving
 * *i past it) or NULL if argv[*i] is another option. Exits 2 when the value
 * is missing. */
static inline const char *ex_opt(int argc, char **argv, int *i, const char *name,
                                 const char *prog) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s: %s needs a value\n", prog, name);
    exit(2);
  }
  return argv[++*i];
}

static inline uint64_t ex_u64(const char *v, const char *name, uint64_t min, uint64_t max,
                              const char *prog) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || v[0] == '-' || x < min || x > max) {
    fprintf(stderr, "%s: %s needs an integer in [%llu, %llu], not \"%s\"\n", prog, name,
            (unsigned long long)min, (unsigned long long)max, v);
    exit(2);
  }
  return x;
}

static inline double ex_double(const char *v, const char *name, double min, double max,
                               const char *prog) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !(x >= min && x <= max)) {
    fprintf(stderr, "%s: %s needs a number in [%g, %g], not \"%s\"\n", prog, name, min, max, v);
    exit(2);
  }
  return x;
}

static inline const char *ex_env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

#endif
