/* profile_cache.c - reuse stored profiles or measure and store them. */
#include "profile_cache.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

static const char *shape_name(const rd_profile_key_t *k) {
  return k->network[0] ? k->network : "replay";
}

/* Copy the stored rows of the requested thread counts into out, in the
 * order measuring would write them. Returns how many. */
static size_t pick(const rd_profile_t *rows, size_t n_rows, const uint32_t *threads, size_t n,
                   rd_profile_t *out, size_t cap) {
  size_t m = 0;
  for (size_t t = 0; t < n; t++)
    for (int prim = 0; prim < RD_PRIM_GATHER; prim++)
      for (size_t i = 0; i < n_rows && m < cap; i++)
        if (rows[i].threads == threads[t] && rows[i].primitive == (rd_primitive_t)prim)
          out[m++] = rows[i];
  /* The pipeline's costs are measured once, at the first thread count. */
  for (int prim = RD_PRIM_GATHER; prim < RD_PRIM_COUNT; prim++)
    for (size_t i = 0; i < n_rows && m < cap; i++)
      if (rows[i].threads == threads[0] && rows[i].primitive == (rd_primitive_t)prim)
        out[m++] = rows[i];
  return m;
}

int rd_profile_cpu_cached(rd_store_t *store, const rd_profile_shape_t *shape,
                          const uint32_t *thread_counts, size_t n, double budget_s,
                          rd_profile_t *out, size_t cap, size_t *n_out, int *hit,
                          rd_error_t *err) {
  *n_out = 0;
  *hit = 0;
  /* The same errors on a hit as on a miss. */
  int rc = rd_profile_check(shape, thread_counts, n, budget_s, cap, err);
  if (rc) return rc;
  rd_device_t cpu;
  rd_devices_cpu(&cpu);
  const rd_profile_key_t *k = &shape->key;

  if (store != NULL) {
    rd_profile_t *rows = NULL;
    size_t n_rows = 0;
    rd_error_t serr;
    rd_error_clear(&serr);
    if (rd_store_get_profiles(store, cpu.fingerprint, k, rd_profile_build(), &rows, &n_rows,
                              &serr) != RD_OK) {
      rd_log_warn("profile", "cannot read stored profiles (measuring instead): %s", serr.msg);
    } else if (n_rows > 0) {
      size_t m = pick(rows, n_rows, thread_counts, n, out, cap);
      rd_store_free_profiles(rows);
      if (m > 0) {
        size_t imported = 0;
        for (size_t i = 0; i < m; i++) imported += out[i].source == RD_PROFILE_IMPORTED;
        rd_log_info("profile", "%s: %s batch %u capacity %u K %u: %zu profiles from the store "
                    "(hit; %zu imported), nothing measured",
                    cpu.fingerprint, shape_name(k), k->batch, k->capacity, k->fanout, m, imported);
        *n_out = m;
        *hit = 1;
        return RD_OK;
      }
    } else {
      rd_store_free_profiles(rows);
    }
  }

  rc = rd_profile_measure_cpu(shape, thread_counts, n, budget_s, out, cap, n_out, err);
  if (rc) return rc;
  if (store != NULL && *n_out > 0) {
    rd_error_t serr;
    rd_error_clear(&serr);
    if (rd_store_put_profiles(store, out, *n_out, &serr) != RD_OK)
      rd_log_warn("profile", "measured profiles not stored: %s", serr.msg);
    else
      rd_log_info("profile", "%s: %s batch %u capacity %u K %u: %zu profiles measured (miss) "
                  "and stored", cpu.fingerprint, shape_name(k), k->batch, k->capacity, k->fanout,
                  *n_out);
  }
  return RD_OK;
}
