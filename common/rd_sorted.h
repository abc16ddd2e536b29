/* rd_sorted.h - a binary search over an array of pointers kept sorted by a
 * string key (strcmp), that also says where an absent key would go: the
 * registry's workloads by id and the tenants by name. Header-only. */
#ifndef RD_SORTED_H
#define RD_SORTED_H

#include <stddef.h>
#include <string.h>

/* The key of one element of the array. */
typedef const char *(*rd_sorted_key_fn)(const void *item);

/* The index of key in v[0..n), or the insertion point p as -(p + 1). */
static inline ptrdiff_t rd_sorted_find(const void *const *v, size_t n, const char *key,
                                       rd_sorted_key_fn key_of) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(key_of(v[mid]), key);
    if (c == 0) return (ptrdiff_t)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -(ptrdiff_t)lo - 1;
}

#endif
