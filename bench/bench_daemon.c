/* bench_daemon.c - see bench_daemon.h. */
#include "bench_daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "replayctl_cli.h"

void bench_daemon_start(rdt_daemon_t *d, const char *replayd, const char *const *args,
                        const char *tag, double timeout_s, char *admin, size_t cap) {
  rdt_daemon_opts_t o = {.args = args, .tag = tag, .timeout_s = timeout_s};
  if (rdt_daemon_start(d, replayd, &o) != 0) die("replayd did not start");
  char path[sizeof d->dir + 16], msg[512];
  snprintf(path, sizeof path, "%s/admin.token", d->dir);
  if (rctl_read_token_file(path, admin, cap, msg, sizeof msg) != 0) die("%s", msg);
}

void bench_daemon_stop(rdt_daemon_t *d) {
  rdt_daemon_stop(d);
  rdt_daemon_remove(d);
  memset(d, 0, sizeof *d);
}

rdc_client_t *bench_daemon_client(const rdt_daemon_t *d, double deadline_s) {
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect(d->target, 10, &c, &e) != RDC_OK) die("connect: %s", e.msg);
  rdc_set_deadline(c, deadline_s);
  return c;
}

void bench_daemon_fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n) {
  const rdc_spec_t *s = &w->spec;
  void *bufs[RDC_MAX_FIELDS];
  uint64_t x = 88172645463325252ull;
  for (uint32_t f = 0; f < s->n_fields; f++) {
    size_t b = rdc_field_bytes(&s->fields[f]);
    bufs[f] = xmalloc((size_t)n * b);
    for (size_t i = 0; i < (size_t)n * b / 4; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const char *name = s->fields[f].name;
      if (strcmp(name, "action") == 0)
        ((int32_t *)bufs[f])[i] = (int32_t)((x >> 33) % 2);
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
