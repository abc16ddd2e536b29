/* rdt_cl_mock.c - replies the client tests script (rdt_cl_mock.h). */
#include "rdt_cl_mock.h"

#include <stdio.h>
#include <string.h>

void rdt_cl_device(Replayd__V1__Device *d, const char *kind, const char *name,
                   const char *fingerprint, const char *status) {
  replayd__v1__device__init(d);
  d->kind = (char *)kind;
  d->name = (char *)name;
  if (fingerprint) d->fingerprint = (char *)fingerprint;
  d->status = (char *)status;
}

void rdt_cl_two_devices(Replayd__V1__Device d[2], Replayd__V1__Device *dp[2]) {
  rdt_cl_device(&d[0], "cpu", "Test CPU \"16 cores\"", "cpu-abc", "ok");
  rdt_cl_device(&d[1], "gpu", "Test GPU", "gpu-def", "no driver");
  dp[0] = &d[0];
  dp[1] = &d[1];
}

void rdt_cl_workload(Replayd__V1__Workload *w, const char *id, Replayd__V1__WorkloadSpec *spec,
                     Replayd__V1__WorkloadCounters *counters) {
  replayd__v1__workload__init(w);
  w->id = (char *)id;
  w->spec = spec;
  w->counters = counters;
}

void rdt_cl_counters(Replayd__V1__WorkloadCounters *k, uint64_t inserts, uint64_t samples,
                     uint64_t updates, uint64_t stale_updates, uint64_t size) {
  replayd__v1__workload_counters__init(k);
  k->inserts = inserts;
  k->samples = samples;
  k->updates = updates;
  k->stale_updates = stale_updates;
  k->size = size;
}

void rdt_cl_reply_list(Replayd__V1__Workload **wp, size_t n, const char *next_page_token) {
  Replayd__V1__ListWorkloadsResponse r = REPLAYD__V1__LIST_WORKLOADS_RESPONSE__INIT;
  r.n_workloads = n;
  r.workloads = wp;
  if (next_page_token) r.next_page_token = (char *)next_page_token;
  mock_reply_msg(&r.base);
}

int rdt_cl_list(Replayd__V1__Workload **wp, size_t n, rdc_workload_t **items) {
  rdt_cl_reply_list(wp, n, NULL);
  size_t got;
  rdc_error_t e;
  if (rdc_list(mock_cli, items, &got, &e) != RDC_OK) {
    fprintf(stderr, "rdc_list: %s\n", e.msg);
    return -1;
  }
  return (int)got;
}

void rdt_cl_server_info(Replayd__V1__ServerInfoResponse *r, const char *version, double uptime_s,
                        Replayd__V1__Device **dp, size_t n_devices, Replayd__V1__Workload **wp,
                        size_t n_workloads) {
  replayd__v1__server_info_response__init(r);
  r->version = (char *)version;
  r->uptime_seconds = uptime_s;
  r->n_devices = n_devices;
  r->devices = dp;
  r->n_workloads = n_workloads;
  r->workloads = wp;
}

int rdt_cl_info(const Replayd__V1__ServerInfoResponse *r, rdc_server_info_t **info) {
  mock_reply_msg(&r->base);
  rdc_error_t e;
  int rc = rdc_server_info(mock_cli, info, &e);
  if (rc != RDC_OK) fprintf(stderr, "rdc_server_info: %s\n", e.msg);
  return rc;
}

int rdt_cl_seen(mock_seen_t *seen, const char *method, const char *token) {
  mock_seen_t mine;
  if (seen == NULL) seen = &mine;
  mock_seen(seen);
  char want[160];
  snprintf(want, sizeof want, "/replayd.v1.Replay/%s", method);
  if (strcmp(seen->method, want) != 0) {
    fprintf(stderr, "the last call was %s, not %s\n", seen->method, want);
    return -1;
  }
  if (token && (!seen->had_token || strcmp(seen->token, token) != 0)) {
    fprintf(stderr, "%s came with token \"%s\"%s, not \"%s\"\n", method, seen->token,
            seen->had_token ? "" : " (none)", token);
    return -1;
  }
  return 0;
}
