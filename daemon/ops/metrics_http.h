/* metrics_http.h - the metrics endpoint: GET /metrics over HTTP, served by
 * libmicrohttpd on one thread of its own.
 *
 * Off unless --metrics-listen is set; then on loopback unless the address
 * names a host ("9464" and ":9464" mean 127.0.0.1:9464): the metrics say
 * what runs and for whom, so exposing them to a network is the operator's
 * explicit choice. Plain HTTP (Prometheus's default scrape); put it behind
 * a TLS proxy, or keep it on loopback, when that matters.
 *
 * Bounded: at most RD_METRICS_HTTP_CONNECTIONS connections, each closed
 * after RD_METRICS_HTTP_TIMEOUT_S idle seconds; requests are read with
 * libmicrohttpd's fixed per-connection memory; only GET and HEAD of
 * /metrics are served (other paths 404, other methods 405); a response is
 * rendered per request (metrics.h) and freed when sent.
 */
#ifndef RD_METRICS_HTTP_H
#define RD_METRICS_HTTP_H

#include <stddef.h>
#include <stdio.h>

#include "rd_error.h"

#define RD_METRICS_HTTP_CONNECTIONS 32
#define RD_METRICS_HTTP_TIMEOUT_S 10

typedef struct rd_metrics_http rd_metrics_http_t;

/* The body of one response: write it to f; RD_OK, else a 500. */
typedef int (*rd_metrics_render_fn)(void *arg, FILE *f);

/* Split a --metrics-listen value into host and port: "PORT" and ":PORT"
 * are 127.0.0.1; "HOST:PORT"; "[V6ADDR]:PORT". PORT is 0..65535 (0: any
 * free port). RD_EINVAL with a message otherwise (host and port untouched). */
int rd_metrics_listen_parse(const char *listen, char *host, size_t host_cap, char *port,
                            size_t port_cap, rd_error_t *err);

/* Bind listen and serve until stop. bound (may be NULL) receives
 * "HOST:PORT" with the port actually bound. RD_EINVAL (bad address,
 * cannot bind), RD_EINTERNAL (libmicrohttpd would not start). */
int rd_metrics_http_start(const char *listen, rd_metrics_render_fn render, void *arg,
                          rd_metrics_http_t **out, char *bound, size_t bound_cap,
                          rd_error_t *err);

/* Stop serving (a response being rendered is finished first) and free. */
void rd_metrics_http_stop(rd_metrics_http_t *h);

#endif
