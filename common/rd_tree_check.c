/* rd_tree_check.c - shared validation of sum-tree batches. */
#include "rd_tree_check.h"

#include "rd_tree_step.h"

int rd_tree_check_shape(uint32_t capacity, uint32_t fanout, rd_error_t *err) {
  if (!rd_st_valid_fanout(fanout))
    return rd_error_set(err, RD_EINVAL, "fanout %u is not a power of two in [%u, %u]", fanout,
                        RD_ST_MIN_FANOUT, RD_ST_MAX_FANOUT);
  if (capacity == 0 || capacity > RD_ST_MAX_CAPACITY)
    return rd_error_set(err, RD_EINVAL, "capacity %u is outside [1, %u]", capacity,
                        RD_ST_MAX_CAPACITY);
  return RD_OK;
}

/* The batch checks first scan the whole batch without an early exit, a loop
 * the compiler vectorizes (one that returns at the first bad item it does
 * not), and only look for the first bad item once they know there is one:
 * they run on every sample and update, where a valid batch is the rule.
 * The scan is compiled for AVX-512 and AVX2 too and picked per call from
 * the CPU's features (a load and a test): baseline SSE2 compares two
 * 64-bit values a vector and had made the checks about a tenth of a
 * 512-item update. Not an ifunc (target_clones): ThreadSanitizer
 * instruments the resolver, which runs before it is initialized.
 * FIRST_BAD(name, type, bad) defines size_t name(n, v, limit): the index of
 * the first v[i] for which `bad` (an expression of v[i] and limit) holds,
 * or n if none does. */
#define SCAN(name, type, bad, attr)                                                              \
  attr static uint32_t name(size_t n, const type *v, type limit) {                               \
    uint32_t any = 0;                                                                            \
    for (size_t i = 0; i < n; i++) any |= (bad);                                                 \
    return any;                                                                                  \
  }
#if defined(__x86_64__) && defined(__GNUC__)
#define SCANS(name, type, bad)                                                                   \
  SCAN(name##_sse2, type, bad, )                                                                 \
  SCAN(name##_avx2, type, bad, __attribute__((target("avx2"))))                                  \
  SCAN(name##_avx512, type, bad, __attribute__((target("avx512f"))))                             \
  static uint32_t name##_any(size_t n, const type *v, type limit) {                              \
    if (__builtin_cpu_supports("avx512f")) return name##_avx512(n, v, limit);                    \
    if (__builtin_cpu_supports("avx2")) return name##_avx2(n, v, limit);                         \
    return name##_sse2(n, v, limit);                                                             \
  }
#else
#define SCANS(name, type, bad) SCAN(name##_any, type, bad, )
#endif
#define FIRST_BAD(name, type, bad)                                                               \
  SCANS(name, type, bad)                                                                         \
  static size_t name(size_t n, const type *v, type limit) {                                      \
    if (!name##_any(n, v, limit)) return n;                                                      \
    for (size_t i = 0; i < n; i++)                                                               \
      if (bad) return i;                                                                         \
    return n;                                                                                    \
  }

FIRST_BAD(first_at_or_above_u32, uint32_t, v[i] >= limit)
FIRST_BAD(first_above_u64_plain, uint64_t, v[i] > limit)
/* SSE2 and AVX2 have no unsigned 64-bit compare, so `v[i] > limit` does not
 * vectorize there. For limit < 2^63, v > limit exactly when bit 63 of
 * (limit - v) | v is set (v < 2^63 and above limit makes the difference
 * wrap negative; v >= 2^63 sets the bit itself): subtract, or, shift,
 * which vectorize. Every limit here (a tree's max_leaf, a total - 1) is
 * below 2^63. */
FIRST_BAD(first_above_u64_low, uint64_t, (uint32_t)(((limit - v[i]) | v[i]) >> 63))
#undef FIRST_BAD
#undef SCANS
#undef SCAN

/* The update batch's two scans in one loop: the arrays are read once, side
 * by side, so their cache misses overlap (an update's inputs may come from
 * far memory). Bad when a position is >= cap or a value > limit (< 2^63,
 * as above). */
#define UPDATE_SCAN(name, attr)                                                                  \
  attr static uint32_t name(size_t n, const uint32_t *p, const uint64_t *v, uint32_t cap,        \
                            uint64_t limit) {                                                    \
    uint32_t any = 0;                                                                            \
    for (size_t i = 0; i < n; i++)                                                               \
      any |= (p[i] >= cap) | (uint32_t)(((limit - v[i]) | v[i]) >> 63);                          \
    return any;                                                                                  \
  }
#if defined(__x86_64__) && defined(__GNUC__)
UPDATE_SCAN(update_bad_sse2, )
UPDATE_SCAN(update_bad_avx2, __attribute__((target("avx2"))))
UPDATE_SCAN(update_bad_avx512, __attribute__((target("avx512f"))))
static uint32_t update_bad(size_t n, const uint32_t *p, const uint64_t *v, uint32_t cap,
                           uint64_t limit) {
  if (__builtin_cpu_supports("avx512f")) return update_bad_avx512(n, p, v, cap, limit);
  if (__builtin_cpu_supports("avx2")) return update_bad_avx2(n, p, v, cap, limit);
  return update_bad_sse2(n, p, v, cap, limit);
}
#else
UPDATE_SCAN(update_bad, )
#endif
#undef UPDATE_SCAN

static size_t first_above_u64(size_t n, const uint64_t *v, uint64_t limit) {
  return limit >> 63 ? first_above_u64_plain(n, v, limit) : first_above_u64_low(n, v, limit);
}

int rd_tree_check_positions(size_t n, const uint32_t *positions, uint32_t capacity,
                            rd_error_t *err) {
  const size_t i = first_at_or_above_u32(n, positions, capacity);
  if (i == n) return RD_OK;
  return rd_error_set(err, RD_ERANGE, "position %u at batch index %zu is >= capacity %u",
                      positions[i], i, capacity);
}

int rd_tree_check_values(size_t n, const uint64_t *values, uint64_t max_leaf, uint32_t capacity,
                         rd_error_t *err) {
  const size_t i = first_above_u64(n, values, max_leaf);
  if (i == n) return RD_OK;
  return rd_error_set(err, RD_ERANGE,
                      "leaf value %llu at batch index %zu exceeds the maximum %llu "
                      "(the total of %u leaves must stay below 2^63)",
                      (unsigned long long)values[i], i, (unsigned long long)max_leaf, capacity);
}

int rd_tree_check_range(uint32_t first, size_t n, uint32_t capacity, rd_error_t *err) {
  if (first >= capacity || n > (size_t)(capacity - first))
    return rd_error_set(err, RD_ERANGE, "range [%u, %u + %zu) is outside capacity %u", first,
                        first, n, capacity);
  return RD_OK;
}

int rd_tree_check_targets(size_t n, const uint64_t *targets, uint64_t total, rd_error_t *err) {
  if (n == 0) return RD_OK;
  if (total == 0) return rd_error_set(err, RD_EEMPTY, "cannot sample: every priority is zero");
  const size_t i = first_above_u64(n, targets, total - 1);
  if (i == n) return RD_OK;
  return rd_error_set(err, RD_ERANGE, "target %llu at batch index %zu is >= total %llu",
                      (unsigned long long)targets[i], i, (unsigned long long)total);
}

int rd_tree_check_update(size_t n, const uint32_t *positions, const uint64_t *values,
                         uint64_t max_leaf, uint32_t capacity, rd_error_t *err) {
  if (max_leaf >> 63 == 0 && !update_bad(n, positions, values, capacity, max_leaf)) return RD_OK;
  int rc = rd_tree_check_positions(n, positions, capacity, err);
  return rc ? rc : rd_tree_check_values(n, values, max_leaf, capacity, err);
}
