/* bench_daemon.h - a real replayd for the benches that measure one over
 * loopback (bench_flow, bench_grpc, bench_metrics, bench_durability,
 * bench_dse, bench_tenancy, bench_remap): started on a loopback port,
 * clients with a long deadline, registration, and random rows for a
 * workload's own fields.
 *
 * Contract: every call dies (bench_util.h die) rather than fail: a bench
 * with no daemon has nothing to report. A daemon still running when the
 * program exits (through die too) is stopped and its state directory
 * removed, so that a failed run leaves nothing behind. */
#ifndef RD_BENCH_DAEMON_H
#define RD_BENCH_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "rdt_daemon.h"
#include "replayd_client.h"

/* Start replayd into d as rdt_daemon_start(d, replayd, o) does (its args,
 * tag, session and timeout); admin (NULL: not read) receives the admin
 * token (cap bytes). */
void bench_daemon_start(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *o,
                        char *admin, size_t cap);

/* Stop d, remove its state directory (saying so on stderr when it could
 * not), and zero it for the next start. */
void bench_daemon_stop(rdt_daemon_t *d);

/* A client of the daemon at target ("HOST:PORT") whose calls may take
 * deadline_s. */
rdc_client_t *bench_connect(const char *target, double deadline_s);

/* bench_connect to d's target. */
rdc_client_t *bench_daemon_client(const rdt_daemon_t *d, double deadline_s);

/* Register s for the tenant whose token is tenant (NULL: the default
 * tenant) into w. */
void bench_register(rdc_client_t *c, const char *tenant, const rdc_spec_t *s, rdc_workload_t *w);

/* Insert n rows of random values for w's fields (a DQN's action an int
 * below its num_actions (2 when unset), a discount of 0.99 or 0, floats in
 * [-1, 1)), in batches within the server's max_batch. */
void bench_daemon_fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n);

#endif
