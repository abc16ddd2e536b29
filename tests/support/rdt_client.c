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
