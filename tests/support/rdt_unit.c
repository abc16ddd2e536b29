/* rdt_unit.c - cmocka group set-ups of the daemon's unit tests (rdt_unit.h). */
#include "rdt_unit.h"

#include <stddef.h>

#include "log.h"
#include "rdt_dir.h"

char rdt_root[64];

int rdt_quiet_setup(void **state) {
  (void)state;
  return rd_log_open(NULL, RD_LOG_ERROR, NULL);
}

int rdt_quiet_teardown(void **state) {
  (void)state;
  rd_log_close();
  return 0;
}

int rdt_root_setup(void **state) {
  if (rdt_tmpdir(rdt_root, sizeof rdt_root, "unit") != 0) return -1;
  return rdt_quiet_setup(state);
}

int rdt_root_teardown(void **state) {
  rdt_quiet_teardown(state);
  return rdt_rmtree(rdt_root);
}

const char *rdt_fresh(const char *name) { return rdt_path(rdt_root, name); }
