/* rdt_client.h - schema builders for tests and benches that talk to a
 * daemon through the C client (clients/c/replayd_client.h), and a real
 * daemon with a client connected to it.
 *
 * Contract: the builders overwrite what they are given (the appenders add
 * to it, at most RDC_MAX_FIELDS fields) and allocate nothing.
 */
#ifndef RDT_CLIENT_H
#define RDT_CLIENT_H

#include <stdint.h>

#include "rdt_daemon.h"
#include "replayd_client.h"

/* A field of dtype: a scalar when dim is 0, else a vector of dim. */
void rdt_client_field(rdc_field_t *f, const char *name, rdc_dtype_t dtype, uint32_t dim);

/* A spec of name and capacity, the rest rdc_spec_init's defaults: no
 * fields yet. */
void rdt_client_spec(rdc_spec_t *s, const char *name, uint32_t capacity);

/* Appends rdt_client_field(name, dtype, dim) to s's fields. */
void rdt_client_add_field(rdc_spec_t *s, const char *name, rdc_dtype_t dtype, uint32_t dim);

/* Appends the first n of CartPole's columns: obs float32[4], action
 * int32, reward float32, next_obs float32[4], done bool. */
void rdt_client_cartpole(rdc_spec_t *s, uint32_t n);

/* rdt_daemon_start(d, replayd, opts), then a client of it in *cli that
 * waits for the server to be ready and gives each call deadline_s. 0, or
 * -1 with the reason on stderr and the daemon stopped and removed. */
int rdt_client_daemon_start(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *opts,
                            double deadline_s, rdc_client_t **cli);

/* Closes cli, stops the daemon and removes its state directory: 0 when it
 * exited 0 on SIGTERM (a clean shutdown is part of what tests check). */
int rdt_client_daemon_stop(rdt_daemon_t *d, rdc_client_t *cli);

/* A cmocka group of tests against one real daemon, as mock_cli is of the
 * tests against the mock: rdt_client_group_start, called by the group's
 * set-up, is rdt_client_daemon_start into rdt_replayd and rdt_cli;
 * rdt_client_group_teardown, the group's teardown, rdt_client_daemon_stop
 * of them (the daemon must exit 0). */
extern rdt_daemon_t rdt_replayd;
extern rdc_client_t *rdt_cli;
int rdt_client_group_start(const char *replayd, const rdt_daemon_opts_t *opts, double deadline_s);
int rdt_client_group_teardown(void **state);

#endif
