/* bench_daemon.h - a real replayd for the benches that run tenants on one
 * (bench_tenancy, bench_remap): started on a loopback port with its admin
 * token read, a client with a long deadline, and random rows for a
 * workload's own fields.
 *
 * Contract: every call dies (bench_util.h die) rather than fail: a bench
 * with no daemon has nothing to report. */
#ifndef RD_BENCH_DAEMON_H
#define RD_BENCH_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "rdt_daemon.h"
#include "replayd_client.h"

/* Start replayd (args: NULL-terminated extra arguments) into d, tagged for
 * its state directory, waiting up to timeout_s; admin receives the admin
 * token (cap bytes). */
void bench_daemon_start(rdt_daemon_t *d, const char *replayd, const char *const *args,
                        const char *tag, double timeout_s, char *admin, size_t cap);

/* Stop d, remove its state directory, and zero it for the next start. */
void bench_daemon_stop(rdt_daemon_t *d);

/* A client of d whose calls may take deadline_s. */
rdc_client_t *bench_daemon_client(const rdt_daemon_t *d, double deadline_s);

/* Insert n rows of random values for w's fields (an int action below 2, a
 * discount of 0.99 or 0, floats in [-1, 1)), in batches within the
 * server's max_batch. */
void bench_daemon_fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n);

#endif
