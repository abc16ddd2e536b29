/* rdt_unit.h - cmocka group set-ups of the daemon's unit tests, and the
 * CartPole fields of core's C spec they register with.
 *
 * Contract: rdt_root_setup makes a fresh scratch directory (rdt_root) and
 * opens the daemon's log at error level (registration and restore log at
 * info: the test output stays short); rdt_root_teardown closes the log
 * and removes the directory. rdt_quiet_setup/teardown do the log alone.
 * Each returns 0 or -1, as cmocka's group functions do.
 */
#ifndef RDT_UNIT_H
#define RDT_UNIT_H

#include "workload_spec.h"

extern char rdt_root[64];

int rdt_root_setup(void **state);
int rdt_root_teardown(void **state);
int rdt_quiet_setup(void **state);
int rdt_quiet_teardown(void **state);

/* "<rdt_root>/<name>", not created (rdt_path's buffers). */
const char *rdt_fresh(const char *name);

/* obs float32[4], action int32, reward float32, next_obs float32[4],
 * done bool, for core's C spec (workload_spec.h): a spec takes the first
 * n_fields of them. */
extern const rd_field_spec_t rdt_cartpole_field_specs[5];

#endif
