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
#include "cartpole_schema.h"
#include "replayd_client.h"

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

/* "<prog>: [<what>: ]<reason>: <message>" on stderr for a failed client
 * call (a local error: its message, or its code's name when it has none);
 * what may be NULL. Returns exit status 1. */
static inline int ex_fail(const char *prog, const char *what, const rdc_error_t *e) {
  fprintf(stderr, "%s: ", prog);
  if (what != NULL) fprintf(stderr, "%s: ", what);
  if (e->code > 0)
    fprintf(stderr, "%s: %s\n", rdc_strerror(e->code), e->msg);
  else
    fprintf(stderr, "%s\n", e->msg[0] ? e->msg : rdc_strerror(e->code));
  return 1;
}

/* Describe workload id into wl and check that its schema is the CartPole
 * one (cartpole_schema.h), so that a mismatch fails at once with a clear
 * message rather than on every batch: 0, or 1 after saying why. */
static inline int ex_cartpole_workload(rdc_client_t *c, const char *id, rdc_workload_t *wl,
                                       const char *prog) {
  rdc_error_t e;
  if (rdc_describe(c, id, wl, &e) != RDC_OK) return ex_fail(prog, NULL, &e);
  char msg[256];
  if (cartpole_check_schema(&wl->spec, msg, sizeof msg) != 0) {
    fprintf(stderr, "%s: workload %s is not a CartPole workload: %s\n", prog, id, msg);
    return 1;
  }
  return 0;
}

/* Where an example connects, and (for those that take one) to which
 * workload: the options every example program spells the same way. */
typedef struct {
  const char *server;   /* --server HOST:PORT; $REPLAYD_SERVER, else 127.0.0.1:50051 */
  double timeout;       /* --timeout S: connect timeout and per-call deadline; 10 */
  int wait;             /* --wait: wait for the server instead of failing at once */
  const char *workload; /* --workload ID; $REPLAYD_WORKLOAD */
  const char *token;    /* --token T; $REPLAYD_TOKEN */
} ex_conn_t;

static inline void ex_conn_init(ex_conn_t *c) {
  c->server = ex_env("REPLAYD_SERVER") ? ex_env("REPLAYD_SERVER") : "127.0.0.1:50051";
  c->timeout = 10;
  c->wait = 0;
  c->workload = ex_env("REPLAYD_WORKLOAD");
  c->token = ex_env("REPLAYD_TOKEN");
}

/* 1 if argv[*i] is one of c's options (consumed; --workload and --token
 * only when with_workload), else 0. Exits 2 on a bad value. */
static inline int ex_conn_opt(ex_conn_t *c, int with_workload, int argc, char **argv, int *i,
                              const char *prog) {
  const char *v;
  if (strcmp(argv[*i], "--wait") == 0) {
    c->wait = 1;
  } else if ((v = ex_opt(argc, argv, i, "--server", prog))) {
    c->server = v;
  } else if ((v = ex_opt(argc, argv, i, "--timeout", prog))) {
    c->timeout = ex_double(v, "--timeout", 1e-3, 1e6, prog);
  } else if (with_workload && (v = ex_opt(argc, argv, i, "--workload", prog))) {
    c->workload = v;
  } else if (with_workload && (v = ex_opt(argc, argv, i, "--token", prog))) {
    c->token = v;
  } else {
    return 0;
  }
  return 1;
}

/* ex_conn_opt's options and -h/--help (usage on stdout, then exit 0): 1
 * if argv[*i] is one of them (consumed), else 0. */
static inline int ex_common_opt(ex_conn_t *c, int with_workload, int argc, char **argv, int *i,
                                void (*usage)(FILE *), const char *prog) {
  if (strcmp(argv[*i], "-h") == 0 || strcmp(argv[*i], "--help") == 0) {
    usage(stdout);
    exit(0);
  }
  return ex_conn_opt(c, with_workload, argc, argv, i, prog);
}

/* A command line the program cannot run with: "<prog>: <why>" and a
 * pointer to --help on stderr, then exit 2. */
static inline void ex_usage_exit(const char *prog, const char *why, const char *arg)
    __attribute__((noreturn));
static inline void ex_usage_exit(const char *prog, const char *why, const char *arg) {
  fprintf(stderr, "%s: %s%s\nTry '%s --help'.\n", prog, why, arg, prog);
  exit(2);
}

/* rdc_connect_ex to c->server, c->timeout the deadline of every call. */
static inline int ex_connect(const ex_conn_t *c, rdc_client_t **out, rdc_error_t *e) {
  rdc_connect_opts_t o;
  rdc_connect_opts_init(&o);
  o.deadline_s = c->timeout;
  o.wait_for_ready = c->wait;
  return rdc_connect_ex(c->server, c->timeout, &o, out, e);
}

#endif
