/* server.h - the gRPC core server: completion-queue threads and per-call
 * state machines. */
#ifndef RD_SERVER_H
#define RD_SERVER_H

#include "config.h"
#include "handlers.h"
#include "metrics.h"
#include "rd_error.h"

typedef struct rd_server rd_server_t;

/* Bind cfg->listen, start cfg->threads completion-queue threads. The bound
 * port (useful with ":0") is stored in *port. */
int rd_server_start(rd_server_t **out, const rd_config_t *cfg, rd_handler_ctx_t *ctx, int *port,
                    rd_error_t *err);

/* Stop accepting calls, let in-flight calls finish for up to grace_s
 * seconds, cancel the rest (and idle connections), join the threads, free
 * everything. Returns 0, or -1 if gRPC never confirmed the shutdown within
 * a few more seconds: the server is then abandoned (threads still run) and
 * the caller should just exit. */
int rd_server_stop(rd_server_t *s, double grace_s);

/* Calls started and running right now (for logs and tests). */
uint64_t rd_server_calls_started(const rd_server_t *s);

/* The server's load now, for the metrics endpoint (metrics.h's server
 * callback; arg is the rd_server_t): calls, and the jobs running or
 * waiting on each job queue. */
void rd_server_metrics(void *arg, rd_metrics_server_t *out);

#endif
