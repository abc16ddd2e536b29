/* rdt_client.c - client-side schema builders, a daemon and its client (rdt_client.h). */
#include "rdt_client.h"

#include <stdio.h>
#include <string.h>

void rdt_client_field(rdc_field_t *f, const char *name, rdc_dtype_t dtype, uint32_t dim) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  f->dtype = dtype;
  f->rank = dim ? 1 : 0;
  f->shape[0] = dim;
}

void rdt_client_spec(rdc_spec_t *s, const char *name, uint32_t capacity) {
  rdc_spec_init(s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->capacity = capacity;
}

void rdt_client_add_field(rdc_spec_t *s, const char *name, rdc_dtype_t dtype, uint32_t dim) {
  if (s->n_fields < RDC_MAX_FIELDS) rdt_client_field(&s->fields[s->n_fields++], name, dtype, dim);
}

void rdt_client_cartpole(rdc_spec_t *s, uint32_t n) {
  static const char *names[] = {"obs", "action", "reward", "next_obs", "done"};
  static const rdc_dtype_t dtypes[] = {RDC_DTYPE_FLOAT32, RDC_DTYPE_INT32, RDC_DTYPE_FLOAT32,
                                       RDC_DTYPE_FLOAT32, RDC_DTYPE_BOOL};
  for (uint32_t i = 0; i < n && i < 5; i++)
    rdt_client_add_field(s, names[i], dtypes[i], i == 0 || i == 3 ? 4 : 0);
}

int rdt_client_daemon_start(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *opts,
                            double deadline_s, rdc_client_t **cli) {
  if (rdt_daemon_start(d, replayd, opts) != 0) return -1;
  rdc_connect_opts_t co;
  rdc_connect_opts_init(&co);
  co.wait_for_ready = 1;
  co.deadline_s = deadline_s;
  rdc_error_t e;
  if (rdc_connect_ex(d->target, 15, &co, cli, &e) != RDC_OK) {
    fprintf(stderr, "connect to %s: %s\n", d->target, e.msg);
    rdt_daemon_stop(d);
    rdt_daemon_remove(d);
    return -1;
  }
  return 0;
}

int rdt_client_daemon_stop(rdt_daemon_t *d, rdc_client_t *cli) {
  rdc_close(cli);
  int rc = rdt_daemon_stop(d);
  if (rdt_daemon_remove(d) != 0) fprintf(stderr, "could not remove the state directory\n");
  if (rc != 0) fprintf(stderr, "replayd did not exit cleanly (exit code %d)\n", rc);
  return rc == 0 ? 0 : -1;
}

rdt_daemon_t rdt_replayd;
rdc_client_t *rdt_cli;

int rdt_client_group_start(const char *replayd, const rdt_daemon_opts_t *opts, double deadline_s) {
  return rdt_client_daemon_start(&rdt_replayd, replayd, opts, deadline_s, &rdt_cli);
}

int rdt_client_group_teardown(void **state) {
  (void)state;
  return rdt_client_daemon_stop(&rdt_replayd, rdt_cli);
}
