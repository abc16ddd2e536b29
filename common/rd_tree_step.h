/* rd_tree_step.h - the arithmetic of the exact K-ary sum tree that every
 * backend shares: its shape (backends/cpu/sumtree.c uses rd_st_shape), and
 * the per-thread steps that the CUDA kernels (backends/gpu/sumtree_gpu.cu)
 * run and the host tests replay against the CPU tree.
 *
 * The GPU tree has the representation of backends/cpu/sumtree.h: uint64
 * leaves, levels of blocks of K entries, level 0 the root block, the leaves
 * the last level, the same number of blocks per level (both compute it with
 * rd_st_shape). Two things differ: where a level starts in memory (the GPU
 * aligns levels to 256 bytes, the CPU to 64), and the leaf level, which the
 * CPU keeps as plain leaf values and the GPU, like its other levels, as
 * segment prefix sums (rd_st_leaves_to_prefix and _from_prefix convert).
 * Because the representation and the search rule are integer-exact, a
 * target selects the same leaf on both and an update leaves the same sums.
 *
 * Segments. A block's K entries are split into segments of W = min(K, 8)
 * entries, one 64-byte cache line each, and entry i holds the inclusive
 * prefix sum of the children from the start of its segment up to i. For
 * K <= 8 a block is one segment (the plain prefix-sum block). An update
 * then writes one line per level (the suffix of one segment), as a tree of
 * plain node sums would, while a descent still compares a block of prefix
 * sums: entry i plus the ends of the segments before it (rd_st_full).
 *
 * Everything here is a static inline function marked RD_HD (__host__
 * __device__ under nvcc, nothing under a C compiler), free of libc, so a C
 * test (tests/gpu/test_sumtree_step.c) can assemble whole descents and
 * updates from the very functions the kernels run and compare them bit for
 * bit with rd_sumtree_sample / rd_sumtree_update on a real CPU tree.
 *
 * Vocabulary. H = height (block levels), K = fanout = 2^LK. Entry e of level
 * h is the prefix sum at slot e mod K of block e / K; its child is block e of
 * level h+1. Leaf p's entry at level h is p >> rd_st_shift(LK, H, h).
 *
 * The batched update (what the GPU runs, and the test replays on the host):
 *   1. sort the batch's (position, batch index) pairs by position, stably;
 *   2. item k of the sorted list keeps its value only if it is the last one
 *      of its position (last write wins); its leaf delta is
 *      d_k = value - old leaf (0 for the items that lose);
 *   3. S = inclusive prefix sum of d over the sorted list (mod 2^64);
 *   4. for every level h and every block B of level h that the batch touches,
 *      the first sorted item below B (its "owner", rd_st_is_owner) adds to
 *      slot i of B the sum of the deltas of the items below the entries from
 *      the start of i's segment to B*K+i, which is S[c-1] - S[c0-1] with c0
 *      and c = rd_st_upper_bound of the first leaf of that segment and of the
 *      first leaf after entry B*K+i (rd_st_slot_add).
 * Each block, the root included, is written by exactly one owner, with one
 * plain add per slot, and no level waits for another: no atomics and no
 * contention at the root. The true value of every entry lies in [0, 2^63),
 * so modular uint64 arithmetic gives the exact result whatever the order.
 */
#ifndef RD_TREE_STEP_H
#define RD_TREE_STEP_H

#include <stdint.h>

#ifndef RD_HD
#if defined(__CUDACC__)
#define RD_HD __host__ __device__
#else
#define RD_HD
#endif
#endif

/* Same limits as backends/cpu/sumtree.h (checked by the host test). */
#define RD_ST_MAX_CAPACITY (1u << 28)
#define RD_ST_MIN_FANOUT 2u
#define RD_ST_MAX_FANOUT 64u
#define RD_ST_MAX_LEVELS 29

/* ------------------------------------------------------------------ */
/* Shape and index arithmetic                                          */
/* ------------------------------------------------------------------ */

static inline RD_HD int rd_st_valid_fanout(uint32_t k) {
  return k >= RD_ST_MIN_FANOUT && k <= RD_ST_MAX_FANOUT && (k & (k - 1)) == 0;
}

/* log2 of a power of two (no builtins, so it runs anywhere). */
static inline RD_HD uint32_t rd_st_log2(uint32_t k) {
  uint32_t l = 0;
  while (((uint32_t)1 << l) < k) l++;
  return l;
}

/* Blocks per level of a tree; returns the height, 0 if the shape is invalid.
 * The one definition of the layout, used by the CPU and GPU trees. */
static inline RD_HD uint32_t rd_st_shape(uint32_t capacity, uint32_t fanout,
                                         uint64_t blocks[RD_ST_MAX_LEVELS]) {
  if (capacity == 0 || capacity > RD_ST_MAX_CAPACITY || !rd_st_valid_fanout(fanout)) return 0;
  uint32_t lk = rd_st_log2(fanout);
  uint32_t height = 1;
  while (((uint64_t)1 << (lk * height)) < capacity) height++;
  for (uint32_t h = 0; h < height; h++) {
    uint32_t shift = lk * (height - h); /* leaves under one block of level h */
    blocks[h] = ((uint64_t)capacity + ((uint64_t)1 << shift) - 1) >> shift;
  }
  return height;
}

/* Largest leaf value accepted: the total of capacity leaves stays < 2^63. */
static inline RD_HD uint64_t rd_st_max_leaf(uint32_t capacity) {
  return (((uint64_t)1 << 63) - 1) / capacity;
}

/* log2 of the leaves under one entry of level h. */
static inline RD_HD uint32_t rd_st_shift(uint32_t lk, uint32_t height, uint32_t h) {
  return lk * (height - 1 - h);
}

/* Entry of leaf p at level h. */
static inline RD_HD uint64_t rd_st_entry(uint64_t p, uint32_t lk, uint32_t height, uint32_t h) {
  return p >> rd_st_shift(lk, height, h);
}

/* Block of level h that holds leaf p's entry. */
static inline RD_HD uint64_t rd_st_block(uint64_t p, uint32_t lk, uint32_t height, uint32_t h) {
  return p >> (rd_st_shift(lk, height, h) + lk);
}

/* Slot of entry e within its block. */
static inline RD_HD uint32_t rd_st_slot(uint64_t e, uint32_t fanout) {
  return (uint32_t)(e & (fanout - 1));
}

/* Entry j of the child block of entry e (the next level down). */
static inline RD_HD uint64_t rd_st_child(uint64_t e, uint32_t lk, uint32_t j) {
  return (e << lk) + j;
}

/* Entries per segment: min(K, 8), one 64-byte line of uint64. */
#define RD_ST_SEG_MAX 8u
static inline RD_HD uint32_t rd_st_seg(uint32_t fanout) {
  return fanout < RD_ST_SEG_MAX ? fanout : RD_ST_SEG_MAX;
}

/* Sum of a block's children (the value its parent entry stands for): the
 * last entries of its segments. */
static inline RD_HD uint64_t rd_st_block_total(const uint64_t *blk, uint32_t fanout) {
  uint32_t w = rd_st_seg(fanout);
  uint64_t s = 0;
  for (uint32_t i = w - 1; i < fanout; i += w) s += blk[i];
  return s;
}

/* Full prefix sum of children 0..i of a block: entry i plus the ends of the
 * segments before i's. */
static inline RD_HD uint64_t rd_st_full(const uint64_t *blk, uint32_t fanout, uint32_t i) {
  uint32_t w = rd_st_seg(fanout);
  uint64_t s = blk[i];
  for (uint32_t e = w - 1; e < i - i % w; e += w) s += blk[e];
  return s;
}

/* Value of leaf p, given the leaf level (the last one). */
static inline RD_HD uint64_t rd_st_leaf_value(const uint64_t *leaf, uint64_t p, uint32_t fanout) {
  return leaf[p] - ((p & (rd_st_seg(fanout) - 1)) ? leaf[p - 1] : 0);
}

/* The two forms of a leaf level of n entries (see the top): out = the
 * segment prefix sums of the plain values in plain (the GPU's form of the
 * CPU's), and in place back to plain values (each entry less the one before
 * it in its segment, from the end, so every entry read is still a sum). */
static inline RD_HD void rd_st_leaves_to_prefix(const uint64_t *plain, uint64_t *out, uint64_t n,
                                                uint32_t fanout) {
  const uint32_t w = rd_st_seg(fanout);
  uint64_t run = 0;
  for (uint64_t e = 0; e < n; e++) out[e] = run = (e % w ? run : 0) + plain[e];
}

static inline RD_HD void rd_st_leaves_from_prefix(uint64_t *level, uint64_t n, uint32_t fanout) {
  const uint32_t w = rd_st_seg(fanout);
  for (uint64_t e = n; e-- > 0;)
    if (e % w) level[e] -= level[e - 1];
}

/* ------------------------------------------------------------------ */
/* Sample: one level of the descent                                    */
/* ------------------------------------------------------------------ */

/* Number of children i of a block whose full prefix sum is <= t. The full
 * prefix sums are non-decreasing, so this is the index of the child the
 * descent takes; the GPU computes it as popc(ballot(full[lane] <= t)). */
static inline RD_HD uint32_t rd_st_count_le(const uint64_t *blk, uint32_t fanout, uint64_t t) {
  uint32_t c = 0;
  for (uint32_t i = 0; i < fanout; i++) c += rd_st_full(blk, fanout, i) <= t;
  return c;
}

/* The reduced target after taking child j: t minus the full prefix before j. */
static inline RD_HD uint64_t rd_st_reduce(const uint64_t *blk, uint32_t fanout, uint32_t j,
                                          uint64_t t) {
  return t - (j ? rd_st_full(blk, fanout, j - 1) : 0);
}

/* One descent step: child index j of the block for target *t, which becomes
 * the target within that child. Requires *t < rd_st_block_total (then
 * j < K). */
static inline RD_HD uint32_t rd_st_descend(const uint64_t *blk, uint32_t fanout, uint64_t *t) {
  uint32_t j = rd_st_count_le(blk, fanout, *t);
  *t = rd_st_reduce(blk, fanout, j, *t);
  return j;
}

/* ------------------------------------------------------------------ */
/* Update: one level                                                   */
/* ------------------------------------------------------------------ */

/* Add d (mod 2^64) to slots j.. of j's segment: the entries that include
 * child j (one item's change at one level, as the CPU applies it). */
static inline RD_HD void rd_st_suffix_add(uint64_t *blk, uint32_t fanout, uint32_t j,
                                          uint64_t d) {
  uint32_t end = (j | (rd_st_seg(fanout) - 1)) + 1;
  for (uint32_t i = j; i < end; i++) blk[i] += d;
}

/* Leaf of sorted item k: pos[k], or first + k when pos is NULL (the
 * contiguous leaves of an insert, which need no sort). */
static inline RD_HD uint64_t rd_st_item_leaf(const uint32_t *pos, uint64_t first, uint64_t k) {
  return pos ? (uint64_t)pos[k] : first + k;
}

/* Whether sorted item k owns the block of level h that holds its leaf: it is
 * the first item below that block. A duplicate position never owns. */
static inline RD_HD int rd_st_is_owner(const uint32_t *pos, uint64_t first, uint64_t k,
                                       uint32_t lk, uint32_t height, uint32_t h) {
  if (k == 0) return 1;
  return rd_st_block(rd_st_item_leaf(pos, first, k), lk, height, h) !=
         rd_st_block(rd_st_item_leaf(pos, first, k - 1), lk, height, h);
}

/* First index c in [lo, hi) whose leaf is >= bound (hi if none), over the
 * sorted leaves of the batch; closed form when the leaves are contiguous.
 * With gallop set, probe lo, lo+1, lo+3, lo+7, ... first and bisect only the
 * last gap: 2 log2(c - lo) loads instead of log2(hi - lo), the better deal
 * near the leaves, where c is a few items past lo. */
static inline RD_HD uint64_t rd_st_upper_bound(const uint32_t *pos, uint64_t first, uint64_t lo,
                                               uint64_t hi, uint64_t bound, int gallop) {
  if (!pos) {
    uint64_t c = bound > first ? bound - first : 0;
    return c < lo ? lo : c > hi ? hi : c;
  }
  if (gallop) {
    uint64_t probe = lo, step = 1;
    while (probe < hi && (uint64_t)pos[probe] < bound) { /* every index <= probe is < bound */
      lo = probe + 1;
      probe += step;
      step <<= 1;
    }
    if (probe < hi) hi = probe; /* pos[probe] >= bound */
  }
  while (lo < hi) {
    uint64_t mid = lo + ((hi - lo) >> 1);
    if ((uint64_t)pos[mid] < bound)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* What owner k of block B of level h adds to slot i of B: the sum of the
 * deltas of the sorted items whose leaves lie below the entries from the
 * start of i's segment to B*K+i, from S, the inclusive prefix sums of the
 * deltas over n sorted items. */
static inline RD_HD uint64_t rd_st_slot_add(const uint32_t *pos, uint64_t first, const uint64_t *S,
                                            uint64_t n, uint64_t k, uint64_t B, uint32_t i,
                                            uint32_t lk, uint32_t height, uint32_t h) {
  uint32_t sh = rd_st_shift(lk, height, h);
  uint32_t i0 = i & ~(rd_st_seg((uint32_t)1 << lk) - 1); /* first slot of i's segment */
  uint64_t bound = ((B << lk) + i + 1) << sh; /* first leaf after entry B*K+i */
  /* Gallop on the two lowest levels (few items per block), bisect above. */
  int gallop = h + 2 >= height;
  uint64_t c0 = i0 ? rd_st_upper_bound(pos, first, k, n, ((B << lk) + i0) << sh, gallop) : k;
  uint64_t c = rd_st_upper_bound(pos, first, c0, n, bound, gallop);
  if (c == c0) return 0;
  return S[c - 1] - (c0 ? S[c0 - 1] : 0);
}

#endif
