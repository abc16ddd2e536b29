/* profile_cache.c - reuse stored profiles or measure and store them
 * (profile_cache.h). */
#include "profile_cache.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Lookups answered from the store, and those that were not (measured, or
 * refused as cache_only): the metrics endpoint's counters. */
static atomic_uint_fast64_t cache_hits, cache_misses;

void rd_profile_cache_counts(uint64_t *hits, uint64_t *misses) {
  *hits = atomic_load_explicit(&cache_hits, memory_order_relaxed);
  *misses = atomic_load_explicit(&cache_misses, memory_order_relaxed);
}

static const char *shape_name(const rd_profile_key_t *k) {
  return k->network[0] ? k->network : "replay";
}

/* Copy the stored rows q asks for into out, in the order measuring would
 * write them. Returns how many. */
static size_t pick(const rd_profile_t *rows, size_t n_rows, const rd_profile_request_t *q,
                   rd_profile_t *out, size_t cap) {
  size_t m = 0;
  if (q->threads == NULL) { /* the fastest row of each primitive, any thread count */
    for (int prim = RD_PRIM_SAMPLE; prim <= RD_PRIM_TRAIN && m < cap; prim++) {
      const rd_profile_t *best = NULL;
      for (size_t i = 0; i < n_rows; i++)
        if (rows[i].primitive == (rd_primitive_t)prim &&
            (best == NULL || rows[i].latency_s < best->latency_s))
          best = &rows[i];
      if (best != NULL) out[m++] = *best;
    }
    return m;
  }
  for (size_t t = 0; t < q->n_threads; t++)
    for (int prim = 0; prim < RD_PRIM_GATHER; prim++)
      for (size_t i = 0; i < n_rows && m < cap; i++)
        if (rows[i].threads == q->threads[t] && rows[i].primitive == (rd_primitive_t)prim)
          out[m++] = rows[i];
  /* The pipeline's costs are measured once, at the first thread count. */
  for (int prim = RD_PRIM_GATHER; prim < RD_PRIM_COUNT; prim++)
    for (size_t i = 0; i < n_rows && m < cap; i++)
      if (rows[i].threads == q->threads[0] && rows[i].primitive == (rd_primitive_t)prim)
        out[m++] = rows[i];
  return m;
}

/* The stored rows of q into out: RD_OK with *n_out (0: none), or the
 * store's error. */
static int lookup(const rd_profile_request_t *q, rd_profile_t *out, size_t cap, size_t *n_out,
                  rd_error_t *err) {
  rd_profile_t *rows = NULL;
  size_t n_rows = 0;
  *n_out = 0;
  int rc = rd_store_get_profiles(q->store, q->device->fingerprint, &q->shape->key,
                                 rd_profile_build(), &rows, &n_rows, err);
  if (rc == RD_OK && n_rows > 0) *n_out = pick(rows, n_rows, q, out, cap);
  rd_store_free_profiles(rows);
  return rc;
}

int rd_profile_cached(const rd_profiler_t *p, const rd_profile_request_t *q, rd_profile_t *out,
                      size_t cap, size_t *n_out, int *hit, int *fault, rd_error_t *err) {
  int f = 0;
  if (fault == NULL) fault = &f;
  *n_out = 0;
  *hit = 0;
  *fault = 0;
  /* The same errors on a hit as on a miss. */
  if (p->check != NULL) {
    int rc = p->check(q->shape, q->threads, q->n_threads, q->budget_s, cap, err);
    if (rc) return rc;
  }
  const char *fp = q->device->fingerprint;
  const rd_profile_key_t *k = &q->shape->key;
  if (q->store != NULL) {
    rd_error_t serr;
    rd_error_clear(&serr);
    size_t m = 0;
    if (lookup(q, out, cap, &m, &serr) != RD_OK) {
      if (q->cache_only)
        return rd_error_set(err, RD_ENOTFOUND, "the profile store cannot be read");
      rd_log_warn("profile", "cannot read stored profiles (measuring instead): %s", serr.msg);
    } else if (m > 0) {
      size_t imported = 0;
      for (size_t i = 0; i < m; i++) imported += out[i].source == RD_PROFILE_IMPORTED;
      rd_log_info("profile", "%s: %s batch %u capacity %u K %u: %zu profiles from the store "
                  "(hit; %zu imported), nothing measured",
                  fp, shape_name(k), k->batch, k->capacity, k->fanout, m, imported);
      *n_out = m;
      *hit = 1;
      atomic_fetch_add_explicit(&cache_hits, 1, memory_order_relaxed);
      return RD_OK;
    }
  } else if (q->cache_only) {
    return rd_error_set(err, RD_ENOTFOUND, "the profile store cannot be read");
  }
  atomic_fetch_add_explicit(&cache_misses, 1, memory_order_relaxed);
  if (q->cache_only) return rd_error_set(err, RD_ENOTFOUND, "no stored profiles for this shape");

  int rc = p->measure(q->shape, q->device, q->threads, q->n_threads, q->budget_s, out, cap, n_out,
                      fault, err);
  if (rc) return rc;
  if (q->store != NULL && *n_out > 0) {
    rd_error_t serr;
    rd_error_clear(&serr);
    if (rd_store_put_profiles(q->store, out, *n_out, &serr) != RD_OK)
      rd_log_warn("profile", "measured profiles not stored: %s", serr.msg);
    else
      rd_log_info("profile", "%s: %s batch %u capacity %u K %u: %zu profiles measured (miss) "
                  "and stored", fp, shape_name(k), k->batch, k->capacity, k->fanout, *n_out);
  }
  return RD_OK;
}

int rd_profile_cpu_cached(rd_store_t *store, const rd_profile_shape_t *shape,
                          const uint32_t *thread_counts, size_t n, double budget_s,
                          rd_profile_t *out, size_t cap, size_t *n_out, int *hit,
                          rd_error_t *err) {
  rd_device_t cpu;
  rd_devices_cpu(&cpu);
  rd_profile_request_t q = {store, &cpu, shape, thread_counts, n, budget_s, 0};
  return rd_profile_cached(&rd_profiler_cpu, &q, out, cap, n_out, hit, NULL, err);
}
