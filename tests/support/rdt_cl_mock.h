/* rdt_cl_mock.h - the replies that several client tests script on the
 * mock server (mock_server.h): devices, workloads, a ListWorkloads page
 * and a ServerInfo answer of api/replayd.proto, built in place.
 *
 * Contract: the builders overwrite what they are given and allocate
 * nothing; the strings, messages and arrays they are given are borrowed
 * and must live until the message is packed. rdt_cl_reply_list,
 * rdt_cl_list and rdt_cl_info script the mock's next reply
 * (mock_reply_msg packs it at once); rdt_cl_list, rdt_cl_info and
 * rdt_cl_seen use mock_cli and the mock of mock_group_setup.
 */
#ifndef RDT_CL_MOCK_H
#define RDT_CL_MOCK_H

#include <stddef.h>
#include <stdint.h>

#include "mock_server.h"
#include "replayd.pb-c.h"
#include "replayd_client.h"

/* A device of kind and name, fingerprint (NULL: none) and status. */
void rdt_cl_device(Replayd__V1__Device *d, const char *kind, const char *name,
                   const char *fingerprint, const char *status);

/* The two devices of the tests' servers, in d: a CPU "Test CPU \"16
 * cores\"" (cpu-abc, ok) and a GPU "Test GPU" (gpu-def, "no driver");
 * pointers to them in dp, as a reply lists them. */
void rdt_cl_two_devices(Replayd__V1__Device d[2], Replayd__V1__Device *dp[2]);

/* A workload of id with spec and counters (each NULL: none). */
void rdt_cl_workload(Replayd__V1__Workload *w, const char *id, Replayd__V1__WorkloadSpec *spec,
                     Replayd__V1__WorkloadCounters *counters);

/* A workload's counters: inserts, samples, updates, stale_updates, size
 * (the rest 0). */
void rdt_cl_counters(Replayd__V1__WorkloadCounters *k, uint64_t inserts, uint64_t samples,
                     uint64_t updates, uint64_t stale_updates, uint64_t size);

/* The next reply: a ListWorkloads page of the n workloads in wp, then
 * next_page_token (NULL: the last page). */
void rdt_cl_reply_list(Replayd__V1__Workload **wp, size_t n, const char *next_page_token);

/* rdc_list on mock_cli of a reply of the n workloads in wp: how many items
 * it read, in *items (rdc_list_free them), or -1 with the error on stderr. */
int rdt_cl_list(Replayd__V1__Workload **wp, size_t n, rdc_workload_t **items);

/* A ServerInfo answer: version, uptime_s, the n_devices devices in dp and
 * the n_workloads workloads in wp. */
void rdt_cl_server_info(Replayd__V1__ServerInfoResponse *r, const char *version, double uptime_s,
                        Replayd__V1__Device **dp, size_t n_devices, Replayd__V1__Workload **wp,
                        size_t n_workloads);

/* rdc_server_info on mock_cli of the reply r: its code, the answer in
 * *info (rdc_server_info_free it), the error on stderr. */
int rdt_cl_info(const Replayd__V1__ServerInfoResponse *r, rdc_server_info_t **info);

/* What the mock received in the last call, in *seen (NULL: not kept): 0
 * when it was the Replay service's method (its name: "Sample") with the
 * x-replayd-token token (NULL: any or none), else -1 with what it was on
 * stderr. */
int rdt_cl_seen(mock_seen_t *seen, const char *method, const char *token);

#endif
