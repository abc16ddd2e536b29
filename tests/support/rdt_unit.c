/* rdt_unit.c - cmocka group set-ups of the daemon's unit tests (rdt_unit.h). */
#include "rdt_unit.h"

#include <stddef.h>

#include "log.h"
#include "rdt_dir.h"

char rdt_root[64];

static const uint32_t four[] = {4};

const rd_field_spec_t rdt_cartpole_field_specs[5] = {
    {"obs", RD_DTYPE_FLOAT32, 1, four},    {"action", RD_DTYPE_INT32, 0, NULL},
    {"reward", RD_DTYPE_FLOAT32, 0, NULL}, {"next_obs", RD_DTYPE_FLOAT32, 1, four},
    {"done", RD_DTYPE_BOOL, 0, NULL},
};

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
