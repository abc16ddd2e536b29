/* bench_daemon.c - see bench_daemon.h. */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "bench_daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "replayctl_cli.h"

/* The daemons started and not yet stopped, for stop_left at exit. */
enum { MAX_DAEMONS = 8 };
static rdt_daemon_t *running[MAX_DAEMONS];

static void stop_left(void) {
  for (int i = 0; i < MAX_DAEMONS; i++)
    if (running[i] != NULL) bench_daemon_stop(running[i]);
}

void bench_daemon_start(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *o,
                        char *admin, size_t cap) {
  static int registered;
  int slot = 0;
  while (slot < MAX_DAEMONS && running[slot] != NULL) slot++;
  if (slot == MAX_DAEMONS) die("more than %d daemons at once", MAX_DAEMONS);
  if (!registered) {
    atexit(stop_left);
    registered = 1;
  }
  memset(d, 0, sizeof *d);
  if (rdt_daemon_start(d, replayd, o) != 0) die("%s did not start (see %s)", replayd, d->log);
  running[slot] = d;
  if (admin == NULL) return;
  char path[sizeof d->dir + 16], msg[512];
  snprintf(path, sizeof path, "%s/admin.token", d->dir);
  if (rctl_read_token_file(path, admin, cap, msg, sizeof msg) != 0) die("%s", msg);
}

void bench_daemon_stop(rdt_daemon_t *d) {
  for (int i = 0; i < MAX_DAEMONS; i++)
    if (running[i] == d) running[i] = NULL;
  rdt_daemon_stop(d);
  if (rdt_daemon_remove(d) != 0)
    fprintf(stderr, "%s: could not remove %s\n", program_invocation_short_name, d->dir);
  memset(d, 0, sizeof *d);
}

rdc_client_t *bench_connect(const char *target, double deadline_s) {
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect(target, 10, &c, &e) != RDC_OK) die("connect: %s", e.msg);
  rdc_set_deadline(c, deadline_s);
  return c;
}

rdc_client_t *bench_daemon_client(const rdt_daemon_t *d, double deadline_s) {
  return bench_connect(d->target, deadline_s);
}

void bench_register(rdc_client_t *c, const char *tenant, const rdc_spec_t *s, rdc_workload_t *w) {
  rdc_error_t e;
  if (rdc_register_as(c, tenant, s, w, &e) != RDC_OK) die("register: %s", e.msg);
}

void bench_daemon_fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n) {
  const rdc_spec_t *s = &w->spec;
  void *bufs[RDC_MAX_FIELDS];
  uint64_t x = 88172645463325252ull;
  /* A DQN's action is an int below num_actions; a DDPG's, floats. */
  int int_action = strcmp(s->learner.algorithm, "ddpg") != 0;
  uint32_t actions = s->learner.num_actions ? s->learner.num_actions : 2;
  for (uint32_t f = 0; f < s->n_fields; f++) {
    size_t b = rdc_field_bytes(&s->fields[f]);
    bufs[f] = xmalloc((size_t)n * b);
    for (size_t i = 0; i < (size_t)n * b / 4; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const char *name = s->fields[f].name;
      if (strcmp(name, "action") == 0 && int_action)
        ((int32_t *)bufs[f])[i] = (int32_t)((x >> 33) % actions);
      else if (strcmp(name, "discount") == 0)
        ((float *)bufs[f])[i] = i % 10 == 9 ? 0.0f : 0.99f;
      else
        ((float *)bufs[f])[i] = (float)((x >> 40) * 0x1p-24) * 2 - 1;
    }
  }
  rdc_error_t e;
  for (uint32_t done = 0; done < n;) { /* batches within max_batch */
    uint32_t k = n - done < 4096 ? n - done : 4096;
    rdc_column_t part[RDC_MAX_FIELDS];
    for (uint32_t f = 0; f < s->n_fields; f++) {
      size_t b = rdc_field_bytes(&s->fields[f]);
      part[f].data = (char *)bufs[f] + (size_t)done * b;
      part[f].bytes = (size_t)k * b;
    }
    if (rdc_insert_batch(c, w->id, w->token, k, part, s->n_fields, NULL, NULL, &e) != RDC_OK)
      die("insert: %s", e.msg);
    done += k;
  }
  for (uint32_t f = 0; f < s->n_fields; f++) free(bufs[f]);
}
