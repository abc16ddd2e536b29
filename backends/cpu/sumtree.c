/* sumtree.c - exact, batched K-ary sum tree (see sumtree.h for the layout).
 *
 * Reading order: shape and allocation, the three kernels (sample, update,
 * insert) written once as always-inline bodies specialised on the fanout K,
 * the per-ISA instantiations and their dispatch, then the public entry
 * points, which validate a whole batch before touching anything.
 *
 * Indexing. Level h = 0 is the root block, level height-1 holds the leaves.
 * level[h] is an array of blocks of K entries. Above the leaves, entry e of
 * level h is the inclusive prefix sum, within its segment of W = min(K, 8)
 * entries, of the children of block e/K from the segment's first to e mod
 * K; the leaf level holds the leaves' own values (sumtree.h says why). The
 * child of entry e is block e of level h+1, so the entry of leaf p at level
 * h is p >> (log2(K) * (height-1-h)).
 */
#include "sumtree.h"

#include "cpu_isa.h"
#include "hugemem.h"
#include "rd_tree_check.h"
#include "rd_tree_step.h"
#include "rd_tsan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define RD_ALWAYS_INLINE inline __attribute__((always_inline))

/* How many descents one thread keeps in flight. Each level, a group issues
 * the prefetches for the next level of all its members before it needs any
 * of them, so the cache misses of the lower levels overlap instead of
 * adding up (the software analogue of the FPGA pipeline of §IV-C4). Large
 * trees keep two groups in flight (sample_pairs). */
#define SAMPLE_GROUP 64
/* Updates look this many items ahead to prefetch the leaf and its
 * parent entry's: about the latency of a line from a shared L3 or DRAM at
 * a few ns per item. */
#define UPDATE_PREFETCH 48
/* Walks up to this many levels per item are instantiated unrolled (K = 16
 * at 2^20 and 2^24 walks 3 and 4). */
#define UPDATE_WALK_MAX 4
/* Below these batch sizes a second thread costs more than it saves. */
#define SAMPLE_PAR_MIN 256
#define UPDATE_PAR_MIN 1024
/* A single-threaded update collects the deltas of a level near the root per
 * entry when the batch has at least UPDATE_ACC_ITEMS items per entry of
 * that level, in a stack array of at most UPDATE_ACC_MAX entries. */
#define UPDATE_ACC_ITEMS 2
#define UPDATE_ACC_MAX 1024
/* Insert propagates per-block deltas upward; it works in chunks of this
 * many leaves so the delta scratch lives on the stack (no allocation). */
#define INSERT_CHUNK 8192

/* ------------------------------------------------------------------ */
/* Shape                                                               */
/* ------------------------------------------------------------------ */

static uint32_t log2u(uint32_t k) { return (uint32_t)__builtin_ctz(k); }

/* The layout (blocks per level) is defined once, in rd_tree_step.h, for
 * every backend; so is the shape's check (rd_tree_check_shape). */
static uint32_t shape(uint32_t capacity, uint32_t fanout,
                      uint64_t blocks[RD_SUMTREE_MAX_LEVELS]) {
  return rd_st_shape(capacity, fanout, blocks);
}

static size_t level_bytes(uint64_t blocks, uint32_t fanout) {
  size_t b = (size_t)blocks * fanout * sizeof(uint64_t);
  return (b + 63) & ~(size_t)63; /* every level starts on a cache line */
}

size_t rd_sumtree_memsize(uint32_t capacity, uint32_t fanout) {
  uint64_t blocks[RD_SUMTREE_MAX_LEVELS];
  uint32_t height = shape(capacity, fanout, blocks);
  size_t total = 0;
  for (uint32_t h = 0; h < height; h++) total += level_bytes(blocks[h], fanout);
  return total;
}

/* ------------------------------------------------------------------ */
/* Kernels, specialised on K through always-inline bodies              */
/* ------------------------------------------------------------------ */

/* Number of entries of a block of K < 8 (one segment) that are <= t: the
 * index of the child the descent takes. Unrolled scalar compares; from
 * K = 8 on, count_le8 below. */
static RD_ALWAYS_INLINE uint32_t count_le(const uint64_t *blk, uint64_t t, const uint32_t K) {
  uint32_t c = 0;
  for (uint32_t i = 0; i < K; i++) c += blk[i] <= t;
  return c;
}

/* Entries per segment (rd_st_seg): a block's prefix sums restart every W
 * entries, one cache line. */
#define SEG(K) ((K) < 8u ? (K) : 8u)

/* Kernel variants: the bodies below take one of these as a constant and
 * pick the matching helper, so each instantiation uses its own ISA. */
enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512 };

/* Number of entries of one 8-entry segment that are <= t, compared as
 * signed integers: every entry lies in [0, 2^63), so a t that went negative
 * (a target below the segment's offset, see descend) counts none. */
static inline uint32_t count_le8_generic(const uint64_t *seg, int64_t t) {
  uint32_t c = 0;
  for (uint32_t i = 0; i < 8; i++) c += (int64_t)seg[i] <= t;
  return c;
}

#if defined(__x86_64__)
__attribute__((target("avx2,popcnt"))) static inline uint32_t count_le8_avx2(const uint64_t *seg,
                                                                             int64_t t) {
  __m256i tv = _mm256_set1_epi64x(t);
  __m256i a = _mm256_cmpgt_epi64(_mm256_load_si256((const __m256i *)seg), tv);
  __m256i b = _mm256_cmpgt_epi64(_mm256_load_si256((const __m256i *)(seg + 4)), tv);
  int gt = _mm256_movemask_pd(_mm256_castsi256_pd(a)) |
           (_mm256_movemask_pd(_mm256_castsi256_pd(b)) << 4);
  return 8 - (uint32_t)__builtin_popcount((unsigned)gt);
}

__attribute__((target("avx512f,popcnt"))) static inline uint32_t count_le8_avx512(
    const uint64_t *seg, int64_t t) {
  __mmask8 le = _mm512_cmple_epi64_mask(_mm512_load_si512(seg), _mm512_set1_epi64(t));
  return (uint32_t)__builtin_popcount((unsigned)le);
}
#endif

static RD_ALWAYS_INLINE uint32_t count_le8(const uint64_t *seg, int64_t t, const int isa) {
#if defined(__x86_64__)
  if (isa == ISA_AVX512) return count_le8_avx512(seg, t);
  if (isa == ISA_AVX2) return count_le8_avx2(seg, t);
#endif
  (void)isa;
  return count_le8_generic(seg, t);
}

/* The same for a block of two segments, the second compared with t1 (the
 * target minus the first segment's end): the generic kernel's K = 16 (the
 * vector ones take descend16_* below). */
static RD_ALWAYS_INLINE uint32_t count_le16(const uint64_t *blk, int64_t t, int64_t t1,
                                            const int isa) {
  return count_le8(blk, t, isa) + count_le8(blk + 8, t1, isa);
}

#if defined(__x86_64__)
/* K = 16 on AVX-512: the block's full prefix sums are segment 0 as stored
 * and segment 1 plus segment 0's end, one add with a broadcast. The reduced
 * target is t minus full prefix j - 1: both vectors go to fb[8..23], after a
 * zero at fb[7] (the "none before" of j = 0), and one load reads it. That
 * takes fewer instructions than a second target for segment 1 and a masked
 * scalar read, and a descent is bound by instructions once its lines are
 * prefetched. fb: 24 entries aligned to 64 bytes, fb[7] == 0. */
__attribute__((target("avx512f,popcnt"))) static inline uint32_t descend16_avx512(
    const uint64_t *blk, uint64_t *tp, uint64_t *fb) {
  const uint64_t t = *tp;
  const __m512i tv = _mm512_set1_epi64((long long)t);
  const __m512i f0 = _mm512_load_si512(blk);
  const __m512i f1 = _mm512_add_epi64(_mm512_load_si512(blk + 8),
                                      _mm512_set1_epi64((long long)blk[7]));
  const __mmask8 a = _mm512_cmple_epu64_mask(f0, tv), b = _mm512_cmple_epu64_mask(f1, tv);
  _mm512_store_si512(fb + 8, f0);
  _mm512_store_si512(fb + 16, f1);
  const uint32_t j = (uint32_t)__builtin_popcount(_cvtmask16_u32(_mm512_kunpackb(b, a)));
  *tp = t - fb[7 + j];
  return j;
}

/* x's inclusive prefix sums, 8 lanes: plus x one lane up, then two, then
 * four. */
__attribute__((target("avx512f"))) static inline __m512i scan8_avx512(__m512i x) {
  const __m512i z = _mm512_setzero_si512();
  x = _mm512_add_epi64(x, _mm512_alignr_epi64(x, z, 7));
  x = _mm512_add_epi64(x, _mm512_alignr_epi64(x, z, 6));
  return _mm512_add_epi64(x, _mm512_alignr_epi64(x, z, 4));
}

/* descend16_avx512 on a block of plain leaf values: their segment prefix
 * sums built in registers first, then the same count. The last step of a
 * descent: the reduced target is not needed, so *tp is left as it is. */
__attribute__((target("avx512f,popcnt"))) static inline uint32_t descend16_leaf_avx512(
    const uint64_t *blk, const uint64_t *tp) {
  const __m512i tv = _mm512_set1_epi64((long long)*tp);
  const __m512i f0 = scan8_avx512(_mm512_load_si512(blk));
  /* Segment 1's full prefix sums: its own plus segment 0's end. */
  const __m512i f1 = _mm512_add_epi64(scan8_avx512(_mm512_load_si512(blk + 8)),
                                      _mm512_permutexvar_epi64(_mm512_set1_epi64(7), f0));
  const __mmask8 a = _mm512_cmple_epu64_mask(f0, tv), b = _mm512_cmple_epu64_mask(f1, tv);
  return (uint32_t)__builtin_popcount(_cvtmask16_u32(_mm512_kunpackb(b, a)));
}

/* How many of the 16 entries f0..f3 are > t (tv: t broadcast), compared
 * signed (every entry and target is below 2^63). Only the count matters,
 * not which entries, so the four compares' results are packed down to
 * bytes, two per entry, and one movemask reads them all: three packs where
 * a movemask per vector took four, and shifts and ors to merge. */
__attribute__((target("avx2,popcnt"))) static inline uint32_t count_gt16_avx2(
    __m256i f0, __m256i f1, __m256i f2, __m256i f3, __m256i tv) {
  const __m256i p = _mm256_packs_epi16(
      _mm256_packs_epi32(_mm256_cmpgt_epi64(f0, tv), _mm256_cmpgt_epi64(f1, tv)),
      _mm256_packs_epi32(_mm256_cmpgt_epi64(f2, tv), _mm256_cmpgt_epi64(f3, tv)));
  return (uint32_t)__builtin_popcount((unsigned)_mm256_movemask_epi8(p)) / 2;
}

/* The same on AVX2: four 4-entry compares, counted by count_gt16_avx2. */
__attribute__((target("avx2,popcnt"))) static inline uint32_t descend16_avx2(const uint64_t *blk,
                                                                             uint64_t *tp,
                                                                             uint64_t *fb) {
  const uint64_t t = *tp;
  const __m256i tv = _mm256_set1_epi64x((long long)t);
  const __m256i end0 = _mm256_set1_epi64x((long long)blk[7]);
  const __m256i f0 = _mm256_load_si256((const __m256i *)blk);
  const __m256i f1 = _mm256_load_si256((const __m256i *)(blk + 4));
  const __m256i f2 = _mm256_add_epi64(_mm256_load_si256((const __m256i *)(blk + 8)), end0);
  const __m256i f3 = _mm256_add_epi64(_mm256_load_si256((const __m256i *)(blk + 12)), end0);
  _mm256_store_si256((__m256i *)(fb + 8), f0);
  _mm256_store_si256((__m256i *)(fb + 12), f1);
  _mm256_store_si256((__m256i *)(fb + 16), f2);
  _mm256_store_si256((__m256i *)(fb + 20), f3);
  const uint32_t j = 16 - count_gt16_avx2(f0, f1, f2, f3, tv);
  *tp = t - fb[7 + j];
  return j;
}
#endif

/* One descent step: the child j of the block that target *t falls in; *t
 * becomes the target within that child (rd_st_descend). From K = 8 on, a
 * block is K/8 segments. With one or two, each segment counts its entries
 * <= t minus the ends of the segments before it (signed: a negative
 * difference counts none); with more, the running sums of the segments'
 * last entries pick the segment (those <= t lie wholly before the target),
 * then one 8-entry count within it. */
static RD_ALWAYS_INLINE uint32_t descend(const uint64_t *blk, uint64_t *tp, const uint32_t K,
                                         const int isa, uint64_t *fb) {
#if defined(__x86_64__)
  if (K == 16 && isa == ISA_AVX512) return descend16_avx512(blk, tp, fb);
  if (K == 16 && isa == ISA_AVX2) return descend16_avx2(blk, tp, fb);
#endif
  (void)fb;
  uint64_t t = *tp;
  if (K < 8) {
    uint32_t j = count_le(blk, t, K);
    *tp = t - (j ? blk[j - 1] : 0);
    return j;
  }
  if (K <= 16) { /* one or two segments: count both, no dependent load */
    const uint64_t t1 = t - blk[7]; /* the target within segment 1 */
    uint32_t j;
    if (K == 16)
      j = count_le16(blk, (int64_t)t, (int64_t)t1, isa);
    else
      j = count_le8(blk, (int64_t)t, isa);
    /* The full prefix before j: entry j-1, plus segment 0's end if j-1 is
     * in segment 1; no branch on j == 0 (read entry 0, mask it). */
    const uint64_t none = j == 0;
    *tp = (K == 16 && j > 8 ? t1 : t) - (blk[j + none - 1] & (none - 1));
    return j;
  }
  uint32_t s = 0;
  uint64_t full = 0, off = 0;
  for (uint32_t q = 0; q + 1 < K / 8; q++) {
    uint64_t end = blk[8 * q + 7];
    full += end;
    uint32_t before = full <= t;
    s += before;
    off += before ? end : 0;
  }
  const uint64_t *seg = blk + 8 * s;
  t -= off;
  uint32_t c = count_le8(seg, (int64_t)t, isa);
  /* No branch on c == 0: read entry 0 and mask it. */
  const uint64_t none = c == 0;
  *tp = t - (seg[c + none - 1] & (none - 1));
  return 8 * s + c;
}

#if defined(__x86_64__)
/* The inclusive prefix sums of the 8 plain values at src, stored at dst
 * with the width the descent's loads then read them with: a vector load of
 * lanes written by scalar stores waits for them to reach the cache (no
 * store forwarding). */
__attribute__((target("avx512f"))) static inline void seg_prefix8_avx512(const uint64_t *src,
                                                                        uint64_t *dst) {
  _mm512_store_si512(dst, scan8_avx512(_mm512_load_si512(src)));
}

/* x's inclusive prefix sums, 4 lanes, and in *total the sum of all four
 * in every lane. A shuffle across the two 128-bit halves costs more than
 * one within a half on AVX2 cores, so each half is scanned in place (plus
 * x one lane up, within the half) and only the low half's sum crosses
 * over; the total adds the two halves' sums, swapped, beside the scan
 * rather than after it. */
__attribute__((target("avx2"))) static inline __m256i scan4_avx2(__m256i x, __m256i *total) {
  const __m256i pair = _mm256_add_epi64(x, _mm256_slli_si256(x, 8)); /* x0, x0+x1 | x2, x2+x3 */
  const __m256i ends = _mm256_shuffle_epi32(pair, 0xEE);  /* each half's sum, twice */
  *total = _mm256_add_epi64(ends, _mm256_permute2x128_si256(ends, ends, 0x01));
  return _mm256_add_epi64(pair, _mm256_permute2x128_si256(ends, ends, 0x08));
}

/* descend16_leaf_avx512 on AVX2: the four vectors' scans, each plus
 * the totals of the vectors before it (sums of independent totals, not a
 * chain through the previous vector's last lane), compared signed (every
 * sum is below 2^63). */
__attribute__((target("avx2,popcnt"))) static inline uint32_t descend16_leaf_avx2(
    const uint64_t *blk, const uint64_t *tp) {
  const __m256i tv = _mm256_set1_epi64x((long long)*tp);
  __m256i s0, s1, s2, s3;
  const __m256i f0 = scan4_avx2(_mm256_load_si256((const __m256i *)blk), &s0);
  const __m256i f1 = scan4_avx2(_mm256_load_si256((const __m256i *)(blk + 4)), &s1);
  const __m256i f2 = scan4_avx2(_mm256_load_si256((const __m256i *)(blk + 8)), &s2);
  const __m256i f3 = scan4_avx2(_mm256_load_si256((const __m256i *)(blk + 12)), &s3);
  (void)s3;
  const __m256i s01 = _mm256_add_epi64(s0, s1);
  return 16 - count_gt16_avx2(f0, _mm256_add_epi64(f1, s0), _mm256_add_epi64(f2, s01),
                              _mm256_add_epi64(f3, _mm256_add_epi64(s01, s2)), tv);
}

__attribute__((target("avx2"))) static inline void seg_prefix8_avx2(const uint64_t *src,
                                                                   uint64_t *dst) {
  __m256i sa, sb;
  const __m256i a = scan4_avx2(_mm256_load_si256((const __m256i *)src), &sa);
  const __m256i b = scan4_avx2(_mm256_load_si256((const __m256i *)(src + 4)), &sb);
  (void)sb;
  _mm256_store_si256((__m256i *)dst, a);
  _mm256_store_si256((__m256i *)(dst + 4), _mm256_add_epi64(b, sa));
}
#endif

/* The segment prefix sums of a leaf block's K plain values, into sb (K
 * entries, 64-byte aligned): by vectors of one segment where the ISA has
 * them, else rd_tree_step.h's conversion. */
static RD_ALWAYS_INLINE void leaf_block_prefix(const uint64_t *blk, uint64_t *sb,
                                               const uint32_t K, const int isa) {
#if defined(__x86_64__)
  if (SEG(K) == 8 && isa != ISA_GENERIC) {
    for (uint32_t s = 0; s < K; s += 8) {
      if (isa == ISA_AVX512)
        seg_prefix8_avx512(blk + s, sb + s);
      else
        seg_prefix8_avx2(blk + s, sb + s);
    }
    return;
  }
#endif
  rd_st_leaves_to_prefix(blk, sb, K, K);
}

/* One descent step in a block of the leaf level, which holds plain values:
 * the prefix descent on the block's segment prefix sums, built in
 * registers at K = 16, else in sb by leaf_block_prefix. */
static RD_ALWAYS_INLINE uint32_t descend_leaf(const uint64_t *blk, uint64_t *tp, const uint32_t K,
                                              const int isa, uint64_t *fb, uint64_t *sb) {
#if defined(__x86_64__)
  if (K == 16 && isa == ISA_AVX512) return descend16_leaf_avx512(blk, tp);
  if (K == 16 && isa == ISA_AVX2) return descend16_leaf_avx2(blk, tp);
#endif
  leaf_block_prefix(blk, sb, K, isa);
  return descend(sb, tp, K, isa, fb);
}

static RD_ALWAYS_INLINE void prefetch_block(const uint64_t *blk, const uint32_t K) {
  for (uint32_t off = 0; off < K; off += 8) __builtin_prefetch(blk + off, 0, 3);
}

/* Below this many bytes a level stays in the L1 (next to the levels above
 * it), and prefetching its blocks only costs instructions. */
#define SAMPLE_PREFETCH_BYTES ((uint64_t)32 << 10)

/* One step of one descent, at entry *e of the level above (0 at the root)
 * with target *tp. With pf, prefetch the child block it reaches. */
static RD_ALWAYS_INLINE void sample_step(const uint64_t *L, const uint64_t *next, uint64_t *tp,
                                         uint64_t *e, const uint32_t K, const uint32_t LK,
                                         const int isa, const bool pf, const bool leaf,
                                         uint64_t *fb, uint64_t *sb) {
  const uint64_t *blk = L + (*e << LK);
  const uint64_t c = (*e << LK) + (leaf ? descend_leaf(blk, tp, K, isa, fb, sb)
                                        : descend(blk, tp, K, isa, fb));
  *e = c;
  if (pf) prefetch_block(next + (c << LK), K);
}

/* A level as a pass over it sees it. The last level is the leaves' (plain
 * values); it prefetches nothing. */
typedef struct {
  const uint64_t *L, *next;
  bool pf, leaf;
} sample_pass_t;

static RD_ALWAYS_INLINE sample_pass_t sample_pass(const rd_sumtree_t *t, uint32_t h,
                                                  const uint32_t K) {
  const uint32_t H = t->height;
  sample_pass_t v;
  v.L = t->level[h];
  v.next = h + 1 < H ? t->level[h + 1] : NULL;
  v.pf = v.next && t->level_blocks[h + 1] * K * sizeof(uint64_t) > SAMPLE_PREFETCH_BYTES;
  v.leaf = h + 1 == H;
  return v;
}

/* One level of a group's descents: descent g is at entry e[g] of the level
 * above (root: the root block, target from src), with target tt[g].
 * Specialised on root, pf and leaf by the caller, so the per-step loop
 * carries no test. */
static RD_ALWAYS_INLINE void sample_level(const sample_pass_t *v, size_t m, const uint64_t *src,
                                          uint64_t *tt, uint64_t *e, const uint32_t K,
                                          const uint32_t LK, const int isa, const bool root,
                                          const bool pf, const bool leaf, uint64_t *fb,
                                          uint64_t *sb) {
  for (size_t g = 0; g < m; g++) {
    uint64_t tg = root ? src[g] : tt[g];
    uint64_t eg = root ? 0 : e[g];
    sample_step(v->L, v->next, &tg, &eg, K, LK, isa, pf, leaf, fb, sb);
    if (!leaf) tt[g] = tg; /* the last step's target is not needed */
    e[g] = eg;
  }
}

/* Below this many bytes of leaves the sample runs one group at a time
 * (sample_groups); from here on two at a time (sample_pairs), for fanouts
 * of two lines a block or more. docs/benchmarks.md has the crossover. */
#define SAMPLE_PAIRS_MIN_BYTES ((uint64_t)8 << 20)
/* A group of sample_pairs prefetches this many lines a pass (32 descents
 * at K = 16): with more, the pass that issues them stalls on the core's
 * miss buffers and holds up the other group's steps behind it. At most
 * SAMPLE_GROUP descents for K >= 8. */
#define SAMPLE_PAIR_LINES 64u

/* Algorithm 1 for two groups at a time, for trees whose lower levels miss
 * the caches. Group i's steps on the upper half of the levels (cached:
 * instructions) alternate item by item with group i - 1's on the lower
 * half (misses, prefetched a pass before), in one loop: the core computes
 * one group's steps while the other's lines are in flight, where a group
 * alone first waits on its lines and then computes with none in flight
 * (the overlap of the FPGA's level pipeline, papers/001 §IV-C4). On trees
 * that fit the caches there is nothing to overlap, and the longer loop
 * body costs more than one group's passes. */
static RD_ALWAYS_INLINE void sample_pairs(const rd_sumtree_t *t, size_t n,
                                          const uint64_t *targets, uint32_t *leaves,
                                          const uint32_t K, const uint32_t LK, const int isa) {
  const uint32_t H = t->height, top = H / 2; /* upper levels [0, top), lower [top, H) */
  /* descend's and descend_leaf's scratch, one set per group: a store of
   * one group's step never waits behind a load of the other's. */
  uint64_t fb[2][24] __attribute__((aligned(64)));
  uint64_t sb[2][RD_SUMTREE_MAX_FANOUT] __attribute__((aligned(64)));
  fb[0][7] = fb[1][7] = 0;
  uint64_t tt[2][SAMPLE_GROUP], e[2][SAMPLE_GROUP];
  const size_t G = SAMPLE_PAIR_LINES / (K / 8), ngroups = (n + G - 1) / G;
  for (size_t i = 0; i <= ngroups; i++) {
    const int u = (int)(i & 1), l = u ^ 1; /* group i's slot, group i - 1's */
    const size_t ub = i * G, lb = (i - 1) * G;
    const size_t mu = i < ngroups ? (n - ub < G ? n - ub : G) : 0;
    const size_t ml = i > 0 ? (n - lb < G ? n - lb : G) : 0;
    for (size_t g = 0; g < mu; g++) {
      tt[u][g] = targets[ub + g];
      e[u][g] = 0;
    }
    for (uint32_t j = 0; top + j < H; j++) {
      const sample_pass_t lo = sample_pass(t, top + j, K);
      const sample_pass_t up = sample_pass(t, j < top ? j : 0, K); /* never the leaves */
      const size_t mup = j < top ? mu : 0, both = ml < mup ? ml : mup;
      size_t g = 0;
#define SAMPLE_PAIR(LPF, LLEAF, UPF)                                                        \
  for (; g < both; g++) {                                                                   \
    sample_step(lo.L, lo.next, &tt[l][g], &e[l][g], K, LK, isa, LPF, LLEAF, fb[l], sb[l]);  \
    sample_step(up.L, up.next, &tt[u][g], &e[u][g], K, LK, isa, UPF, false, fb[u], sb[u]);  \
  }
      if (lo.leaf && up.pf) SAMPLE_PAIR(false, true, true)
      else if (lo.leaf) SAMPLE_PAIR(false, true, false)
      else if (lo.pf && up.pf) SAMPLE_PAIR(true, false, true)
      else if (lo.pf) SAMPLE_PAIR(true, false, false)
      else if (up.pf) SAMPLE_PAIR(false, false, true)
      else SAMPLE_PAIR(false, false, false)
#undef SAMPLE_PAIR
      /* The last group's tail, or a pass only one group has. */
      for (size_t k = g; k < ml; k++)
        sample_step(lo.L, lo.next, &tt[l][k], &e[l][k], K, LK, isa, lo.pf, lo.leaf, fb[l], sb[l]);
      for (size_t k = g; k < mup; k++)
        sample_step(up.L, up.next, &tt[u][k], &e[u][k], K, LK, isa, up.pf, false, fb[u], sb[u]);
    }
    for (size_t g = 0; g < ml; g++) leaves[lb + g] = (uint32_t)e[l][g];
  }
}

/* Algorithm 1 of papers/001 for a group of descents at a time. */
static RD_ALWAYS_INLINE void sample_groups(const rd_sumtree_t *t, size_t n,
                                           const uint64_t *targets, uint32_t *leaves,
                                           const uint32_t K, const uint32_t LK, const int isa) {
  const uint32_t H = t->height;
  uint64_t fb[24] __attribute__((aligned(64))); /* descend's scratch */
  uint64_t sb[RD_SUMTREE_MAX_FANOUT] __attribute__((aligned(64))); /* descend_leaf's */
  fb[7] = 0;
  for (size_t base = 0; base < n; base += SAMPLE_GROUP) {
    size_t m = n - base < SAMPLE_GROUP ? n - base : SAMPLE_GROUP;
    uint64_t tt[SAMPLE_GROUP];
    uint64_t e[SAMPLE_GROUP];
    for (uint32_t h = 0; h < H; h++) {
      const sample_pass_t v = sample_pass(t, h, K);
      const uint64_t *src = targets + base;
      if (h == 0 && v.pf)
        sample_level(&v, m, src, tt, e, K, LK, isa, true, true, false, fb, sb);
      else if (h == 0 && v.leaf)
        sample_level(&v, m, src, tt, e, K, LK, isa, true, false, true, fb, sb);
      else if (h == 0)
        sample_level(&v, m, src, tt, e, K, LK, isa, true, false, false, fb, sb);
      else if (v.pf)
        sample_level(&v, m, NULL, tt, e, K, LK, isa, false, true, false, fb, sb);
      else if (v.leaf)
        sample_level(&v, m, NULL, tt, e, K, LK, isa, false, false, true, fb, sb);
      else
        sample_level(&v, m, NULL, tt, e, K, LK, isa, false, false, false, fb, sb);
    }
    for (size_t g = 0; g < m; g++) leaves[base + g] = (uint32_t)e[g];
  }
}

static RD_ALWAYS_INLINE void sample_body(const rd_sumtree_t *t, size_t n,
                                         const uint64_t *targets, uint32_t *leaves,
                                         const uint32_t K, const uint32_t LK, const int isa) {
  const uint64_t leaf_bytes = t->level_blocks[t->height - 1] * K * sizeof(uint64_t);
  if (K >= 16 && leaf_bytes >= SAMPLE_PAIRS_MIN_BYTES)
    sample_pairs(t, n, targets, leaves, K, LK, isa);
  else
    sample_groups(t, n, targets, leaves, K, LK, isa);
}

/* Add d (mod 2^64) to entry e of a level and the entries after it in its
 * segment: the prefix sums that include the changed child, one cache line.
 * Branch-free so it vectorizes: the entries before e add d & 0, with the
 * mask read from a table (one load, where building it from e's slot takes
 * a shift and a mask move per level). Modular arithmetic is exact here
 * because every true result lies in [0, 2^63). */
#define SM(j, i) ((i) >= (j) ? ~UINT64_C(0) : 0)
#define SM_ROW(j) {SM(j, 0), SM(j, 1), SM(j, 2), SM(j, 3), SM(j, 4), SM(j, 5), SM(j, 6), SM(j, 7)}
static const uint64_t suffix_mask[8][8] __attribute__((aligned(64))) = {
    SM_ROW(0), SM_ROW(1), SM_ROW(2), SM_ROW(3), SM_ROW(4), SM_ROW(5), SM_ROW(6), SM_ROW(7)};
#undef SM_ROW
#undef SM

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static inline void seg_add8_avx512(uint64_t *seg, uint32_t jj,
                                                                       uint64_t d) {
  /* A full-width store, not a masked one: the next item's update of the
   * same line (the root's, every item) can then take the value straight
   * from the store buffer instead of waiting for the store to commit. */
  __m512i add = _mm512_and_si512(_mm512_set1_epi64((long long)d),
                                 _mm512_load_si512(suffix_mask[jj]));
  _mm512_store_si512(seg, _mm512_add_epi64(_mm512_load_si512(seg), add));
}

__attribute__((target("avx2"))) static inline void seg_add8_avx2(uint64_t *seg, uint32_t jj,
                                                                 uint64_t d) {
  __m256i dv = _mm256_set1_epi64x((long long)d);
  __m256i a = _mm256_and_si256(dv, _mm256_load_si256((const __m256i *)suffix_mask[jj]));
  __m256i b = _mm256_and_si256(dv, _mm256_load_si256((const __m256i *)(suffix_mask[jj] + 4)));
  _mm256_store_si256((__m256i *)seg, _mm256_add_epi64(_mm256_load_si256((__m256i *)seg), a));
  _mm256_store_si256((__m256i *)(seg + 4),
                     _mm256_add_epi64(_mm256_load_si256((__m256i *)(seg + 4)), b));
}
#endif

static RD_ALWAYS_INLINE void seg_add(uint64_t *level, uint64_t e, uint64_t d, const uint32_t K,
                                     const int isa) {
  const uint32_t W = SEG(K);
  uint64_t *seg = level + (e & ~(uint64_t)(W - 1));
  const uint32_t jj = (uint32_t)(e & (W - 1));
#if defined(__x86_64__)
  if (W == 8 && isa == ISA_AVX512) {
    seg_add8_avx512(seg, jj, d);
    return;
  }
  if (W == 8 && isa == ISA_AVX2) {
    seg_add8_avx2(seg, jj, d);
    return;
  }
#endif
  (void)isa;
  if (W == 8) {
    /* Generic 2-lane vectors, so a CPU without AVX2 (baseline x86-64, or
     * another architecture) still adds the line in four vector adds: GCC
     * 12 left the loop below scalar, and a 64-byte generic vector made it
     * build the broadcast of d on the stack, a store-forwarding stall per
     * level. */
    typedef uint64_t v2u64 __attribute__((vector_size(16), may_alias));
    const v2u64 dv = {d, d};
    v2u64 *s2 = (v2u64 *)seg;
    const v2u64 *m2 = (const v2u64 *)suffix_mask[jj];
    for (uint32_t q = 0; q < 4; q++) s2[q] += m2[q] & dv;
    return;
  }
  _Pragma("GCC unroll 1")
  for (uint32_t i = 0; i < W; i++) seg[i] += i >= jj ? d : 0;
}

/* Whether this caller handles leaf q: always, or with part set, when q's
 * root child is in [c_lo, c_hi) (update_body). */
static RD_ALWAYS_INLINE bool own_item(uint64_t q, bool part, uint32_t root_shift, uint64_t c_lo,
                                      uint64_t c_hi) {
  const uint64_t c = q >> root_shift;
  return !part || (c >= c_lo && c < c_hi);
}

/* Prefetch the lines an update of leaf q writes first: the leaf's and its
 * parent entry's segment (up, when the tree has that level). Only for this
 * caller's items: prefetching the others' blocks would double the memory
 * traffic of a partitioned update. */
static RD_ALWAYS_INLINE void prefetch_item(const uint64_t *leaf, const uint64_t *up, bool have_up,
                                           uint64_t q, bool part, uint32_t root_shift,
                                           uint64_t c_lo, uint64_t c_hi, const uint32_t LK,
                                           const uint32_t W) {
  if (!own_item(q, part, root_shift, c_lo, c_hi)) return;
  __builtin_prefetch(leaf + q, 1, 3);
  if (have_up) __builtin_prefetch(up + ((q >> LK) & ~(uint64_t)(W - 1)), 1, 3);
}

/* Algorithm 2 of papers/001 without atomics: one caller walks each leaf's
 * path itself, from the leaf up to level lo. The levels above lo are not
 * written per item: each item's delta is added to acc[its entry at level
 * lo - 1] instead, and fold_acc applies those sums once per call (with lo
 * = 0 every item adds to acc[0], which the caller ignores: a dead add is
 * cheaper than a test per item). The levels near the root are where the
 * items of a batch meet, so there one scalar add per item replaces a
 * vector update per item and level. With part set, only leaves whose root
 * child c is in [c_lo, c_hi) are handled (lo is then 1 and acc the
 * thread's root deltas), so threads that own disjoint root children never
 * write the same block.
 *
 * The loop runs in two parts, the items that look ahead and the last
 * UPDATE_PREFETCH that do not, so neither tests per item whether it does. */
static RD_ALWAYS_INLINE void update_item(rd_sumtree_t *t, uint64_t p, uint64_t v, uint32_t lo,
                                         uint64_t *const *walk, uint64_t *acc,
                                         uint32_t acc_shift, const uint32_t K, const uint32_t LK,
                                         const int isa, const uint32_t NL) {
  uint64_t *leaf = walk[0];
  const uint64_t d = v - leaf[p]; /* the leaf level holds plain values */
  leaf[p] = v;
  if (d == 0) return;
  uint64_t e = p >> LK;
  if (NL > 0) {
    _Pragma("GCC unroll 4")
    for (uint32_t k = 1; k < NL; k++) {
      seg_add(walk[k], e, d, K, isa);
      e >>= LK;
    }
  } else {
    for (uint32_t h = t->height - 1; h-- > lo;) {
      seg_add(t->level[h], e, d, K, isa);
      e >>= LK;
    }
  }
  acc[p >> acc_shift] += d;
}

static RD_ALWAYS_INLINE void update_body(rd_sumtree_t *t, size_t n, const uint32_t *pos,
                                         const uint64_t *val, uint32_t lo, bool part,
                                         uint64_t c_lo, uint64_t c_hi, uint64_t *acc,
                                         const uint32_t K, const uint32_t LK, const int isa,
                                         const uint32_t NL) {
  const uint32_t H = t->height, W = SEG(K);
  uint64_t *leaf = t->level[H - 1];
  /* A walk of two levels or more implies the leaves' parent level. */
  const bool have_up = NL >= 2 || H >= 2;
  uint64_t *up = have_up ? t->level[H - 2] : NULL;
  /* NL, when not 0, is the number of levels each item walks (H - lo), a
   * constant of the instantiation: the walk is then unrolled with the
   * levels' pointers in registers instead of a loop that reloads them. */
  uint64_t *walk[UPDATE_WALK_MAX] = {leaf};
  for (uint32_t k = 0; k < NL; k++) walk[k] = t->level[H - 1 - k];
  const uint32_t root_shift = LK * (H - 1);
  const uint32_t acc_shift = LK * (H - lo); /* leaf -> entry of level lo - 1 */
  /* The first items' lines, which the loop's look-ahead never reaches. */
  for (size_t i = 0; i < n && i < UPDATE_PREFETCH; i++)
    prefetch_item(leaf, up, have_up, pos[i], part, root_shift, c_lo, c_hi, LK, W);
  const size_t ahead = n > UPDATE_PREFETCH ? n - UPDATE_PREFETCH : 0;
  size_t i = 0;
  for (; i < ahead; i++) {
    prefetch_item(leaf, up, have_up, pos[i + UPDATE_PREFETCH], part, root_shift, c_lo, c_hi, LK, W);
    if (own_item(pos[i], part, root_shift, c_lo, c_hi))
      update_item(t, pos[i], val[i], lo, walk, acc, acc_shift, K, LK, isa, NL);
  }
  for (; i < n; i++)
    if (own_item(pos[i], part, root_shift, c_lo, c_hi))
      update_item(t, pos[i], val[i], lo, walk, acc, acc_shift, K, LK, isa, NL);
}

/* Apply acc, the deltas per entry of level a that update_body collected,
 * to levels a, a-1, ..., 0: within each segment an entry gets the sum of
 * the deltas up to it, and a block's total delta goes to its parent entry
 * (acc is reused in place for the level above, as insert does). Specialised
 * on K like the kernels: it runs on every call, and with K a constant the
 * segment arithmetic is shifts and masks the compiler vectorizes. */
static RD_ALWAYS_INLINE void fold_body(rd_sumtree_t *t, uint32_t a, uint64_t *acc,
                                       const uint32_t K, const uint32_t LK) {
  const uint32_t W = SEG(K);
  for (uint32_t h = a + 1; h-- > 0;) {
    uint64_t *L = t->level[h];
    const uint64_t blocks = t->level_blocks[h];
    for (uint64_t b = 0; b < blocks; b++) {
      uint64_t *blk = L + (b << LK);
      const uint64_t *d = acc + (b << LK);
      uint64_t total = 0;
      for (uint32_t s = 0; s < K; s += W) {
        uint64_t run = 0;
        for (uint32_t j = s; j < s + W; j++) {
          run += d[j];
          blk[j] += run;
        }
        total += run;
      }
      acc[b] = total; /* safe: b <= (b << LK), every entry of block b read */
    }
    /* The level above reads level_blocks[h-1] * K entries: those past this
     * level's blocks are padding, with nothing to add. */
    if (h > 0)
      for (uint64_t e = blocks; e < t->level_blocks[h - 1] * K; e++) acc[e] = 0;
  }
}

static void fold_acc(rd_sumtree_t *t, uint32_t a, uint64_t *acc) {
  switch (t->fanout) {
  case 2: fold_body(t, a, acc, 2, 1); break;
  case 4: fold_body(t, a, acc, 4, 2); break;
  case 8: fold_body(t, a, acc, 8, 3); break;
  case 16: fold_body(t, a, acc, 16, 4); break;
  case 32: fold_body(t, a, acc, 32, 5); break;
  default: fold_body(t, a, acc, 64, 6); break;
  }
}

/* Insert: write the leaves of [first, first+n), then push each touched
 * leaf block's change of total up, level by level. */
/* Single-threaded on purpose: a contiguous rebuild is bound by memory
 * bandwidth at ~1 ns/item, and entering an OpenMP region (even one whose
 * if() clause is false) cost ~1.4 us per call, 40 ns/item at batch 32. */
static RD_ALWAYS_INLINE void set_range_body(rd_sumtree_t *t, uint64_t first, size_t n,
                                            const uint64_t *values, uint32_t threads,
                                            const uint32_t K, const uint32_t LK) {
  (void)threads;
  const uint32_t H = t->height, W = SEG(K);
  uint64_t delta[INSERT_CHUNK / 2 + 2]; /* K >= 2: at most n/2 + 2 blocks */
  uint64_t *leaf = t->level[H - 1];
  const uint64_t lo = first, hi = first + n;
  const uint64_t blo = lo >> LK, bhi = (hi - 1) >> LK;

  /* The leaves take their values; each block's change of total goes up. */
  for (uint64_t b = blo; b <= bhi; b++) {
    const uint64_t e0 = b << LK;
    const uint64_t s = e0 > lo ? e0 : lo, f = e0 + K < hi ? e0 + K : hi;
    uint64_t total = 0; /* new total minus old total of the block, mod 2^64 */
    for (uint64_t e = s; e < f; e++) {
      total += values[e - lo] - leaf[e];
      leaf[e] = values[e - lo];
    }
    delta[b - blo] = total;
  }

  uint64_t clo = blo, chi = bhi; /* changed entries at the level above */
  for (uint32_t h = H - 1; h-- > 0;) {
    uint64_t *L = t->level[h];
    uint64_t plo = clo >> LK, phi = chi >> LK;
    for (uint64_t b = plo; b <= phi; b++) {
      uint64_t *blk = L + (b << LK);
      uint64_t run = 0, total = 0;
      for (uint32_t j = 0; j < K; j++) {
        uint64_t e = (b << LK) + j;
        if (j % W == 0) run = 0;
        if (e >= clo && e <= chi) {
          run += delta[e - clo];
          total += delta[e - clo];
        }
        blk[j] += run;
      }
      delta[b - plo] = total; /* safe: b - plo <= e - clo for every e read */
    }
    clo = plo;
    chi = phi;
  }
}

/* ------------------------------------------------------------------ */
/* Instantiation per fanout and instruction set, and dispatch          */
/* ------------------------------------------------------------------ */

typedef void (*update_fn)(rd_sumtree_t *, size_t, const uint32_t *, const uint64_t *, uint32_t,
                          bool, uint64_t, uint64_t, uint64_t *);
typedef void (*set_range_fn)(rd_sumtree_t *, uint64_t, size_t, const uint64_t *, uint32_t);

#define ISA_ID_generic ISA_GENERIC
#define ISA_ID_avx2 ISA_AVX2
#define ISA_ID_avx512 ISA_AVX512
#define RD_KERNELS(K, LK, ISA, ATTR)                                                          \
  ATTR static void sample_k##K##_##ISA(const rd_sumtree_t *t, size_t n, const uint64_t *tg,  \
                                       uint32_t *lv) {                                       \
    sample_body(t, n, tg, lv, K, LK, ISA_ID_##ISA);                                          \
  }                                                                                          \
  ATTR static void update_k##K##_##ISA(rd_sumtree_t *t, size_t n, const uint32_t *p,         \
                                       const uint64_t *v, uint32_t lo, bool part,            \
                                       uint64_t clo, uint64_t chi, uint64_t *acc) {          \
    if (part) /* two copies of the loop: the single-threaded one tests nothing per item */   \
      update_body(t, n, p, v, lo, true, clo, chi, acc, K, LK, ISA_ID_##ISA, 0);              \
    else                                                                                     \
      switch (t->height - lo) { /* the walk's length: see update_body's NL */                \
      case 1: update_body(t, n, p, v, lo, false, 0, 0, acc, K, LK, ISA_ID_##ISA, 1); break;  \
      case 2: update_body(t, n, p, v, lo, false, 0, 0, acc, K, LK, ISA_ID_##ISA, 2); break;  \
      case 3: update_body(t, n, p, v, lo, false, 0, 0, acc, K, LK, ISA_ID_##ISA, 3); break;  \
      case 4: update_body(t, n, p, v, lo, false, 0, 0, acc, K, LK, ISA_ID_##ISA, 4); break;  \
      default: update_body(t, n, p, v, lo, false, 0, 0, acc, K, LK, ISA_ID_##ISA, 0); break; \
      }                                                                                      \
  }
#define RD_SET_RANGE(K, LK)                                                                   \
  static void set_range_k##K(rd_sumtree_t *t, uint64_t f, size_t n, const uint64_t *v,      \
                             uint32_t th) {                                                  \
    set_range_body(t, f, n, v, th, K, LK);                                                   \
  }

#define RD_ALL_K(X, ISA, ATTR)                                                                \
  X(2, 1, ISA, ATTR) X(4, 2, ISA, ATTR) X(8, 3, ISA, ATTR) X(16, 4, ISA, ATTR)               \
  X(32, 5, ISA, ATTR) X(64, 6, ISA, ATTR)

RD_ALL_K(RD_KERNELS, generic, )
RD_SET_RANGE(2, 1) RD_SET_RANGE(4, 2) RD_SET_RANGE(8, 3) RD_SET_RANGE(16, 4)
RD_SET_RANGE(32, 5) RD_SET_RANGE(64, 6)
#if defined(__x86_64__)
RD_ALL_K(RD_KERNELS, avx2, __attribute__((target("avx2,bmi2,popcnt"))))
RD_ALL_K(RD_KERNELS, avx512,
         __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,bmi2,popcnt"))))
#endif

#define RD_TABLE(ISA)                                                                         \
  {sample_k2_##ISA, sample_k4_##ISA, sample_k8_##ISA,                                        \
   sample_k16_##ISA, sample_k32_##ISA, sample_k64_##ISA},                                    \
  {update_k2_##ISA, update_k4_##ISA, update_k8_##ISA,                                        \
   update_k16_##ISA, update_k32_##ISA, update_k64_##ISA}

typedef struct {
  const char *name;
  rd_sumtree_sample_fn sample[6];
  update_fn update[6];
} isa_kernels_t;

static const isa_kernels_t kernels[] = {
    {"generic", RD_TABLE(generic)},
#if defined(__x86_64__)
    {"avx2", RD_TABLE(avx2)},
    {"avx512", RD_TABLE(avx512)},
#endif
};

static const set_range_fn set_range_k[6] = {set_range_k2,  set_range_k4,  set_range_k8,
                                            set_range_k16, set_range_k32, set_range_k64};

/* The variant to run (cpu_isa.h), RD_SUMTREE_ISA forcing one (tests run
 * every variant against each other; benchmarks compare them). */
static const isa_kernels_t *pick_isa(void) {
  return &kernels[rd_cpu_isa_pick(sizeof kernels / sizeof kernels[0], false, true,
                                  "RD_SUMTREE_ISA")];
}

/* ------------------------------------------------------------------ */
/* Public entry points                                                 */
/* ------------------------------------------------------------------ */

int rd_sumtree_init(rd_sumtree_t *t, uint32_t capacity, uint32_t fanout, rd_error_t *err) {
  memset(t, 0, sizeof *t);
  int rc = rd_tree_check_shape(capacity, fanout, err);
  if (rc) return rc;
  uint64_t blocks[RD_SUMTREE_MAX_LEVELS];
  uint32_t height = shape(capacity, fanout, blocks);
  size_t bytes = rd_sumtree_memsize(capacity, fanout);
  /* A descent or an update touches a different page at every low level
   * (hugemem.h). */
  void *mem = bytes >= RD_HUGE_PAGE ? rd_huge_map(bytes) : NULL;
  const bool mapped = mem != NULL;
  if (!mapped && posix_memalign(&mem, 64, bytes) != 0) mem = NULL;
  if (mem == NULL)
    return rd_error_set(err, RD_ENOMEM, "cannot allocate %zu bytes for a sum tree", bytes);
  memset(mem, 0, bytes); /* fault every page in now, not in the first calls */

  const isa_kernels_t *isa = pick_isa();
  t->capacity = capacity;
  t->fanout = fanout;
  t->log2_fanout = log2u(fanout);
  t->height = height;
  t->threads = 1;
  t->max_leaf = rd_st_max_leaf(capacity);
  t->mem = mem;
  t->mem_bytes = bytes;
  t->mem_mapped = mapped;
  t->isa = isa->name;
  t->sample_fn = isa->sample[t->log2_fanout - 1];
  t->update_fn = isa->update[t->log2_fanout - 1];
  t->set_range_fn = set_range_k[t->log2_fanout - 1];
  char *p = mem;
  for (uint32_t h = 0; h < height; h++) {
    t->level[h] = (uint64_t *)p;
    t->level_blocks[h] = blocks[h];
    p += level_bytes(blocks[h], fanout);
  }
  return RD_OK;
}

void rd_sumtree_free(rd_sumtree_t *t) {
  if (t->mem_mapped)
    rd_huge_unmap(t->mem, t->mem_bytes);
  else
    free(t->mem);
  memset(t, 0, sizeof *t);
}

void rd_sumtree_set_threads(rd_sumtree_t *t, uint32_t threads) {
  t->threads = threads == 0 ? 1 : threads;
}

int rd_sumtree_get_batch(const rd_sumtree_t *t, size_t n, const uint32_t *positions,
                         uint64_t *out, rd_error_t *err) {
  int rc = rd_tree_check_positions(n, positions, t->capacity, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) out[i] = rd_sumtree_get(t, positions[i]);
  return RD_OK;
}

int rd_sumtree_set_range(rd_sumtree_t *t, uint32_t first, size_t n, const uint64_t *values,
                         rd_error_t *err) {
  if (n == 0) return RD_OK;
  int rc = rd_tree_check_range(first, n, t->capacity, err);
  if (rc) return rc;
  rc = rd_tree_check_values(n, values, t->max_leaf, t->capacity, err);
  if (rc) return rc;
  for (size_t done = 0; done < n; done += INSERT_CHUNK) {
    size_t m = n - done < INSERT_CHUNK ? n - done : INSERT_CHUNK;
    t->set_range_fn(t, (uint64_t)first + done, m, values + done, t->threads);
  }
  return RD_OK;
}

/* Inside a parallel region: this thread's number and its share [*lo, *hi)
 * of `units` split evenly over the team. */
static inline void team_share(uint64_t units, uint64_t *me, uint64_t *lo, uint64_t *hi) {
#ifdef _OPENMP
  uint64_t i = (uint64_t)omp_get_thread_num(), nt = (uint64_t)omp_get_num_threads();
#else
  uint64_t i = 0, nt = 1;
#endif
  *me = i;
  *lo = units * i / nt;
  *hi = units * (i + 1) / nt;
}

int rd_sumtree_update(rd_sumtree_t *t, size_t n, const uint32_t *positions,
                      const uint64_t *values, rd_error_t *err) {
  int rc = rd_tree_check_update(n, positions, values, t->max_leaf, t->capacity, err);
  if (rc) return rc;

  const uint32_t H = t->height, K = t->fanout;
  uint32_t nthreads = t->threads;
  uint64_t roots = H >= 2 ? t->level_blocks[1] : 1; /* root children in use */
  if (nthreads > roots) nthreads = (uint32_t)roots;
  if (nthreads <= 1 || n < UPDATE_PAR_MIN) {
    /* Collect the deltas of the levels near the root per entry (lo - 1 is
     * the deepest level with at most n / UPDATE_ACC_ITEMS entries, and never
     * the leaves) and apply them once. */
    uint64_t acc[UPDATE_ACC_MAX];
    uint32_t lo = 0;
    while (lo + 1 < H && t->level_blocks[lo] * K <= UPDATE_ACC_MAX &&
           t->level_blocks[lo] * K * UPDATE_ACC_ITEMS <= n)
      lo++;
    /* With lo = 0 the kernel still adds to acc[0] (update_body). */
    memset(acc, 0, (lo > 0 ? t->level_blocks[lo - 1] * K : 1) * sizeof acc[0]);
    t->update_fn(t, n, positions, values, lo, false, 0, 0, acc);
    if (lo > 0) fold_acc(t, lo - 1, acc);
    return RD_OK;
  }
  /* Partition by subtree: thread i owns a contiguous range of the root's
   * children and walks only leaves below them, so no two threads write the
   * same block. The root block gets the summed deltas afterwards. Items of
   * one leaf go to one thread in batch order, so the later value wins. */
  uint64_t rdelta[RD_SUMTREE_MAX_FANOUT * 16];
  if (nthreads > 16) nthreads = 16;
  memset(rdelta, 0, sizeof rdelta);
#pragma omp parallel num_threads(RD_OMP_TEAM(nthreads))
  {
    uint64_t me, lo, hi;
    team_share(roots, &me, &lo, &hi);
    t->update_fn(t, n, positions, values, 1, true, lo, hi, rdelta + (size_t)me * K);
  }
  for (uint32_t th = 1; th < nthreads; th++)
    for (uint32_t c = 0; c < K; c++) rdelta[c] += rdelta[(size_t)th * K + c];
  fold_acc(t, 0, rdelta);
  return RD_OK;
}

int rd_sumtree_sample(const rd_sumtree_t *t, size_t n, const uint64_t *targets,
                      uint32_t *leaves, rd_error_t *err) {
  if (n == 0) return RD_OK;
  int rc = rd_tree_check_targets(n, targets, rd_sumtree_total(t), err);
  if (rc) return rc;
  uint32_t nthreads = t->threads;
  if (nthreads <= 1 || n < SAMPLE_PAR_MIN) {
    t->sample_fn(t, n, targets, leaves);
    return RD_OK;
  }
  /* Sampling is read-only: split the batch into per-thread slices of whole
   * groups (papers/001 §IV-C2). */
  size_t groups = (n + SAMPLE_GROUP - 1) / SAMPLE_GROUP;
#pragma omp parallel num_threads(RD_OMP_TEAM(nthreads))
  {
    uint64_t me, g0, g1;
    team_share(groups, &me, &g0, &g1);
    size_t i0 = g0 * SAMPLE_GROUP, i1 = g1 * SAMPLE_GROUP < n ? g1 * SAMPLE_GROUP : n;
    if (i1 > i0) t->sample_fn(t, i1 - i0, targets + i0, leaves + i0);
  }
  return RD_OK;
}

int rd_sumtree_check(const rd_sumtree_t *t, rd_error_t *err) {
  const uint32_t K = t->fanout, H = t->height, W = rd_st_seg(K);
  const uint64_t *leaf = t->level[H - 1];
  for (uint64_t e = t->capacity; e < t->level_blocks[H - 1] * K; e++)
    if (leaf[e] != 0)
      return rd_error_set(err, RD_ERANGE, "padding leaf %llu is %llu, not 0",
                          (unsigned long long)e, (unsigned long long)leaf[e]);
  for (uint32_t h = 0; h + 1 < H; h++) {
    const uint64_t *L = t->level[h];
    for (uint64_t b = 0; b < t->level_blocks[h]; b++) {
      uint64_t run = 0;
      for (uint32_t j = 0; j < K; j++) {
        uint64_t e = b * K + j, child = 0;
        if (j % W == 0) run = 0;
        if (e < t->level_blocks[h + 1])
          child = h + 2 == H ? rd_sumtree_leaf_block_total(t, e) /* plain leaves */
                             : rd_st_block_total(t->level[h + 1] + e * K, K);
        run += child;
        if (L[e] != run)
          return rd_error_set(err, RD_ERANGE,
                              "level %u entry %llu is %llu but its children sum to %llu", h,
                              (unsigned long long)e, (unsigned long long)L[e],
                              (unsigned long long)run);
      }
    }
  }
  return RD_OK;
}
