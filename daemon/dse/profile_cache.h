/* profile_cache.h - the one profile cache: every measured figure of every
 * device kind is reused from the store or measured (and stored) here.
 *
 * The rule: the next registration of the same shape reuses the
 * profiles without measuring. A lookup hits when the store holds profiles
 * for this device's fingerprint, this shape and this build (measured here
 * before, or imported from a machine of the same fingerprint) of the
 * primitives asked for; the hit returns those, whatever they cover (a
 * measurement that ran out of budget is not retried at every registration:
 * `profiles --clear` forgets it). A miss measures with the device kind's
 * profiler within the budget and stores the results. Either way one log
 * line says which. A kind whose figures come from a model (the FPGA's,
 * arithmetic) has nothing to cache and does not come here.
 *
 * A store that fails to read or write is logged and treated as a miss / not
 * stored: profiles are an optimisation, registration goes on.
 */
#ifndef RD_PROFILE_CACHE_H
#define RD_PROFILE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "profile.h"
#include "rd_error.h"
#include "store.h"

/* A device kind's profiler (its provider's, provider.h). */
typedef struct {
  /* The checks measure makes of its arguments, made on a hit too, so a bad
   * request fails alike either way. NULL: none. */
  int (*check)(const rd_profile_shape_t *shape, const uint32_t *threads, size_t n,
               double budget_s, size_t cap, rd_error_t *err);
  /* Measure shape on dev within budget_s: rows into out (cap), their count
   * into *n_out. *fault = 1 when the device failed (the caller gives it up,
   * devices.h); 0 when the error is the request's or the build's. */
  int (*measure)(const rd_profile_shape_t *shape, const rd_device_t *dev, const uint32_t *threads,
                 size_t n, double budget_s, rd_profile_t *out, size_t cap, size_t *n_out,
                 int *fault, rd_error_t *err);
} rd_profiler_t;

/* This machine's CPU (profile.c: rd_profile_check, rd_profile_measure_cpu;
 * the device is the CPU of the device list). */
extern const rd_profiler_t rd_profiler_cpu;

/* One lookup. */
typedef struct {
  rd_store_t *store;               /* NULL: measure, store nothing */
  const rd_device_t *device;       /* whose fingerprint keys the rows */
  const rd_profile_shape_t *shape;
  /* The thread counts wanted (rd_profile_measure_cpu's order: sample,
   * update, train per count, then the pipeline's costs at threads[0]); NULL:
   * a device without thread counts, whose hit is the fastest stored row of
   * each of sample, update and train (an import may carry several). */
  const uint32_t *threads;
  size_t n_threads;
  double budget_s;
  int cache_only; /* never measure: RD_ENOTFOUND when the store has none (a restart) */
} rd_profile_request_t;

/* The profiles of q: from the store (*hit = 1; each row's source says
 * measured or imported), or measured now with p and stored (*hit = 0).
 * Rows go to out (cap as the profiler needs). Errors: the profiler's (with
 * *fault), or RD_ENOTFOUND when q->cache_only and the store has no rows (or
 * cannot be read). *fault may be NULL. */
int rd_profile_cached(const rd_profiler_t *p, const rd_profile_request_t *q, rd_profile_t *out,
                      size_t cap, size_t *n_out, int *hit, int *fault, rd_error_t *err);

/* Since start, in this process: lookups rd_profile_cached answered from the
 * store (hits) and those it had to measure or found nothing for (misses). */
void rd_profile_cache_counts(uint64_t *hits, uint64_t *misses);

/* The CPU's profiles of shape at the n thread counts through
 * rd_profile_cached with rd_profiler_cpu (profile.h): sample, update,
 * train per thread count in the given order, then the pipeline's costs.
 * Errors: those of rd_profile_measure_cpu. */
int rd_profile_cpu_cached(rd_store_t *store, const rd_profile_shape_t *shape,
                          const uint32_t *thread_counts, size_t n, double budget_s,
                          rd_profile_t *out, size_t cap, size_t *n_out, int *hit,
                          rd_error_t *err);

#endif
