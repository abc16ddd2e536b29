/* metrics.h - the daemon's state in the Prometheus text exposition format
 * (version 0.0.4), for the metrics endpoint (metrics_http.h).
 *
 * Everything is read at scrape time from where it already lives: the
 * registry's live workloads (their table counters, hosted learners and
 * placements), the device list, the profile cache's counters, the RPC
 * layer's latency histograms (rpc_stats.h) and the server's load. Nothing
 * is kept per series between scrapes, so a deleted workload's series are
 * gone from the next scrape and the series count is bounded by
 * --max-workloads, the devices and the methods.
 *
 * Names follow Prometheus's conventions: a replayd_ prefix, counters end
 * in _total, base units (seconds, bytes), histograms in _seconds. Workload
 * series carry one label, workload="<id>"; replayd_workload_info carries
 * the name (a label value is escaped as the format says).
 */
#ifndef RD_METRICS_H
#define RD_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "registry.h"

/* The server's load now (server.c fills it; the server is above this file). */
#define RD_METRICS_QUEUES 3
typedef struct {
  uint64_t calls_started;
  uint64_t calls_active;
  const char *queue_name[RD_METRICS_QUEUES]; /* NULL: no such queue */
  uint32_t queue_jobs[RD_METRICS_QUEUES];    /* running or waiting */
} rd_metrics_server_t;

typedef struct {
  rd_registry_t *registry;
  void (*server)(void *arg, rd_metrics_server_t *out); /* NULL: no server series */
  void *server_arg;
  int64_t start_unix;
  const char *version;
} rd_metrics_source_t;

/* Write every metric to f. RD_OK, or RD_ENOMEM (a workload list could not
 * be allocated; nothing useful was written). */
int rd_metrics_render(const rd_metrics_source_t *src, FILE *f);

/* Write s to f as a label value: \ " and newline escaped. */
void rd_metrics_label(FILE *f, const char *s);

#endif
