/* rdt_profile.h - stored-profile rows for the tests of the profile store
 * and its listing (daemon/dse/profile.h).
 *
 * Contract: rdt_profile returns a row by value (no allocation) keyed by
 * device fingerprint, primitive, threads and build, for a table of
 * capacity 100000 and fanout 16 at batch, with algorithm and network as
 * given; 7 repetitions of latency_s, measured at 1700000000 (2023-11-14).
 * items and source are left 0 for the caller. */
#ifndef RDT_PROFILE_H
#define RDT_PROFILE_H

#include <stdint.h>

#include "profile.h"

rd_profile_t rdt_profile(const char *fp, rd_primitive_t prim, uint32_t threads, uint32_t batch,
                         const char *algorithm, const char *network, const char *build,
                         double latency_s);

#endif
