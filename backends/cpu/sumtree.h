/* sumtree.h - exact, batched K-ary sum tree on the CPU.
 *
 * The replay management module of papers/001 §IV-C/D (Algorithms 1 and 2)
 * and thesis 000 §3.2.2, with two changes that make it exact and fast:
 *
 * 1. Integer leaves. Priorities are unsigned 64-bit fixed-point integers
 *    (see common/rd_fixed.h), so every sum is exact and a delta update can
 *    never drift: integer addition is associative, float addition is not.
 *    This is the FPGA design's fixed point (papers/001 §IV-C4) applied to
 *    every backend, so CPU, GPU and FPGA pick the same leaf for the same
 *    target. The tree bounds leaves so that the total stays below 2^63.
 *
 * 2. Prefix blocks in segments. Each node's K children are stored as one
 *    block of K entries, aligned to K*8 bytes, split into segments of
 *    W = min(K, 8) entries (one 64-byte cache line); entry j holds the
 *    inclusive prefix sum of the children from the start of its segment to
 *    j. A descent step is then "count the full prefix sums <= target" (entry
 *    plus the ends of the segments before it), a branch-free SIMD compare
 *    with no loop-carried addition (Algorithm 1's inner loop has one), and
 *    an update changes the suffix of one segment: one cache line per level,
 *    as a tree of plain node sums writes. A block's total (the value its
 *    parent entry stands for) is the sum of its segments' last entries.
 *    The leaf level is the exception: it holds the leaves' own values. An
 *    update then writes its leaf with one store, where a prefix segment
 *    took a read of two entries and a vector add; the descent's last step
 *    builds the block's prefix sums in registers instead (docs/benchmarks.md
 *    has both costs). The GPU tree keeps prefix leaves (rd_tree_step.h
 *    converts between the two).
 *
 * Sampling semantics (identical on every backend): for a target t with
 * 0 <= t < total, the sampled leaf is the smallest i with
 * sum(leaf[0..i]) > t. Zero leaves are never sampled (Lemma 3.2.3 of
 * thesis 000 for the existence of i at every level).
 *
 * Threading: one tree is not thread-safe; callers serialize calls (the table
 * lock does). Inside a call the tree may use up to `threads` OpenMP threads
 * (rd_sumtree_set_threads) where the batch is large enough to pay for it.
 */
#ifndef RD_SUMTREE_H
#define RD_SUMTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "rd_tree_step.h"

#define RD_SUMTREE_MAX_CAPACITY (1u << 28)
#define RD_SUMTREE_MIN_FANOUT 2u
#define RD_SUMTREE_MAX_FANOUT 64u
#define RD_SUMTREE_MAX_LEVELS 29

typedef struct rd_sumtree rd_sumtree_t;

/* Build-time dispatch: one function per fanout, specialised on K. */
typedef void (*rd_sumtree_sample_fn)(const rd_sumtree_t *t, size_t n,
                                     const uint64_t *targets, uint32_t *leaves);

struct rd_sumtree {
  uint32_t capacity;   /* leaves usable by callers */
  uint32_t fanout;     /* K, a power of two in [2, 64] */
  uint32_t log2_fanout;
  uint32_t height;     /* number of block levels; level 0 is the root block */
  uint32_t threads;    /* max OpenMP threads per call (>= 1) */
  uint64_t max_leaf;   /* largest leaf value accepted */
  uint64_t *level[RD_SUMTREE_MAX_LEVELS]; /* level[h]: blocks of K segment prefix sums */
  uint64_t level_blocks[RD_SUMTREE_MAX_LEVELS];
  void *mem;           /* one aligned allocation holding every level */
  size_t mem_bytes;
  bool mem_mapped;     /* mem is a mapping of its own (munmap), else malloc'd */
  const char *isa;     /* kernel variant in use: "generic", "avx2", "avx512" */
  rd_sumtree_sample_fn sample_fn;
  void (*update_fn)(rd_sumtree_t *t, size_t n, const uint32_t *pos, const uint64_t *val,
                    uint32_t lo, bool part, uint64_t c_lo, uint64_t c_hi, uint64_t *acc);
  void (*set_range_fn)(rd_sumtree_t *t, uint64_t first, size_t n, const uint64_t *val,
                       uint32_t threads);
};

/* Bytes rd_sumtree_init will allocate for this shape (0 if the shape is
 * invalid), so a caller can bound memory before creating a tree. */
size_t rd_sumtree_memsize(uint32_t capacity, uint32_t fanout);

/* Allocate a tree of `capacity` zero leaves. Errors: RD_EINVAL (fanout not a
 * power of two in [2,64], capacity 0 or > 2^28), RD_ENOMEM. */
int rd_sumtree_init(rd_sumtree_t *t, uint32_t capacity, uint32_t fanout,
                    rd_error_t *err);
void rd_sumtree_free(rd_sumtree_t *t);

/* Threads to use inside one call (clamped to >= 1). */
void rd_sumtree_set_threads(rd_sumtree_t *t, uint32_t threads);

/* Sum of the K leaves of leaf block b. */
static inline uint64_t rd_sumtree_leaf_block_total(const rd_sumtree_t *t, uint64_t b) {
  const uint64_t *blk = t->level[t->height - 1] + b * t->fanout;
  uint64_t s = 0;
  for (uint32_t i = 0; i < t->fanout; i++) s += blk[i];
  return s;
}

/* Sum of all leaves, O(1). */
static inline uint64_t rd_sumtree_total(const rd_sumtree_t *t) {
  if (t->height == 1) return rd_sumtree_leaf_block_total(t, 0); /* the root holds leaves */
  return rd_st_block_total(t->level[0], t->fanout);
}

/* Value of one leaf, O(1). pos must be < capacity. */
static inline uint64_t rd_sumtree_get(const rd_sumtree_t *t, uint32_t pos) {
  return t->level[t->height - 1][pos];
}

/* Read n leaves at positions into out. RD_ERANGE if a position >= capacity. */
int rd_sumtree_get_batch(const rd_sumtree_t *t, size_t n, const uint32_t *positions,
                         uint64_t *out, rd_error_t *err);

/* Insert: set the n contiguous leaves [first, first + n) to values. This is
 * the ring-order write of a table (a wrapped range is two calls). Rebuilds
 * the touched blocks from their children, level by level, so the cost is
 * about n + (n/K + 2) * K * height words. */
int rd_sumtree_set_range(rd_sumtree_t *t, uint32_t first, size_t n,
                         const uint64_t *values, rd_error_t *err);

/* Update: set leaf positions[i] to values[i] for each i, in order (a
 * position given twice ends with the later value). Validates the whole
 * batch first: on error nothing changed. */
int rd_sumtree_update(rd_sumtree_t *t, size_t n, const uint32_t *positions,
                      const uint64_t *values, rd_error_t *err);

/* Sample: leaves[i] = the leaf selected by targets[i] (see above). Every
 * target must be < total; RD_EEMPTY if the total is 0, RD_ERANGE if a target
 * is out of range (nothing is written then). Read-only. */
int rd_sumtree_sample(const rd_sumtree_t *t, size_t n, const uint64_t *targets,
                      uint32_t *leaves, rd_error_t *err);

/* Debug/test: verify every block above the leaves is a correct prefix of
 * its children and padding leaves are zero. Returns 0 or RD_ERANGE with the first bad node. */
int rd_sumtree_check(const rd_sumtree_t *t, rd_error_t *err);

#endif
