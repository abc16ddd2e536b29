/* rdt_unit.h - cmocka group set-ups of the daemon's unit tests.
 *
 * Contract: rdt_root_setup makes a fresh scratch directory (rdt_root) and
 * opens the daemon's log at error level (registration and restore log at
 * info: the test output stays short); rdt_root_teardown closes the log
 * and removes the directory. rdt_quiet_setup/teardown do the log alone.
 * Each returns 0 or -1, as cmocka's group functions do.
 */
#ifndef RDT_UNIT_H
#define RDT_UNIT_H

extern char rdt_root[64];

int rdt_root_setup(void **state);
int rdt_root_teardown(void **state);
int rdt_quiet_setup(void **state);
int rdt_quiet_teardown(void **state);

/* "<rdt_root>/<name>", not created (rdt_path's buffers). */
const char *rdt_fresh(const char *name);

#endif
