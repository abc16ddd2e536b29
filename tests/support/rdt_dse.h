/* rdt_dse.h - rows of the design-space exploration for tests: devices
 * injected into the device list (daemon/dse/devices.h) and stored profiles
 * (daemon/dse/profile.h).
 *
 * Contract: rdt_device overwrites d with a device of kind and index whose
 * status is "ok (injected by a test)", the rest 0 for the caller. rdt_profile returns a row by value (no allocation) keyed by
 * device fingerprint, primitive, threads and build, for a table of
 * capacity 100000 and fanout 16 at batch, with algorithm and network as
 * given; 7 repetitions of latency_s, measured at 1700000000 (2023-11-14).
 * items and source are left 0 for the caller. */
#ifndef RDT_DSE_H
#define RDT_DSE_H

#include <stdint.h>

#include "devices.h"
#include "profile.h"

void rdt_device(rd_device_t *d, const char *kind, uint32_t index);

rd_profile_t rdt_profile(const char *fp, rd_primitive_t prim, uint32_t threads, uint32_t batch,
                         const char *algorithm, const char *network, const char *build,
                         double latency_s);

#endif
