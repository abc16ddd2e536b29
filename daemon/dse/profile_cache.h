/* profile_cache.h - profiles for a registration: reuse what the store
 * holds, measure (and store) what it does not.
 *
 * The rule: the next registration of the same shape reuses the
 * profiles without measuring. A lookup hits when the store holds profiles
 * for this device's fingerprint, this shape and this build (measured here
 * before, or imported from a machine of the same fingerprint) at one or
 * more of the requested thread counts; the hit returns those, whatever
 * they cover (a measurement that ran out of budget is not retried at every
 * registration: `profiles --clear` forgets it). A miss measures within
 * the budget and stores the results. Either way one log line says which.
 */
#ifndef RD_PROFILE_CACHE_H
#define RD_PROFILE_CACHE_H

#include "profile.h"
#include "store.h"

/* Profiles of shape on this machine's CPU at the n thread counts (as
 * rd_profile_measure_cpu takes them): from the store (*hit = 1; each
 * result's source says measured or imported), or measured now within
 * budget_s and stored (*hit = 0). Results go to out (cap as for
 * rd_profile_measure_cpu), sample, update, train per thread count in the
 * given order. A store that fails to read or write is logged and treated
 * as a miss / not stored: profiles are an optimisation, registration goes
 * on. Errors: those of rd_profile_measure_cpu. */
int rd_profile_cpu_cached(rd_store_t *store, const rd_profile_shape_t *shape,
                          const uint32_t *thread_counts, size_t n, double budget_s,
                          rd_profile_t *out, size_t cap, size_t *n_out, int *hit,
                          rd_error_t *err);

#endif
