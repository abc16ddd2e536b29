/* sumtree_gpu.h - the exact K-ary sum tree in CUDA device memory.
 *
 * The representation of backends/cpu/sumtree.h: uint64
 * fixed-point leaves, levels of blocks of K entries, each an inclusive
 * prefix sum within its segment of min(K, 8) entries, level 0 the root
 * block, the same blocks per level (common/rd_tree_step.h).
 * Same rules: a target t in [0, total) selects the smallest leaf i with
 * leaf[0] + ... + leaf[i] > t, so CPU and GPU pick the same leaf for the same
 * target; leaves are bounded by max_leaf = (2^63 - 1) / capacity; an update
 * batch applies in order (a position given twice ends with the later value).
 * The one difference in representation: the CPU tree's leaf level holds the
 * leaves' plain values (sumtree.h), this one their segment prefix sums like
 * every other level, so a descent's last step is the same coalesced compare
 * as the others. rd_gpu_sumtree_copy_to_host gives the leaves in the CPU's
 * form, so after the same calls it yields the CPU tree's bytes. The levels
 * live in one device allocation, each starting on a 256-byte boundary.
 *
 * Kernels (sumtree_gpu.cu):
 * - sample: one group of min(K, 32) lanes per target; each lane loads one
 *   entry of the block (two for K = 64) and adds the ends of the segments
 *   before it (shuffles), j = popc(ballot(full <= t)), the reduced target
 *   comes from a shuffle. One coalesced load per level.
 * - update: no atomics, no contention at the root. The batch is sorted by
 *   position (CUB radix sort of (position, batch index), stable), the last
 *   item of each position keeps its value, leaf deltas are prefix-summed, and
 *   every touched block of every level is written once, by the first item
 *   below it, with the sums it reads off the prefix (rd_tree_step.h). The
 *   root block gets K plain adds, at most. Batches of up to 1024 items do
 *   the sort, deltas and scan in one thread block (one launch, plus one for
 *   the block writes unless n * min(K, 32) <= 1024, when the same block does
 *   them): at small batches the cost is launches, not work.
 * - set_range (insert): the same without the sort (contiguous leaves).
 *
 * Two forms of each operation:
 * - host pointers (rd_gpu_sumtree_sample, _update, _set_range): validated on
 *   the host first, as on the CPU (a call that fails changed nothing); any n,
 *   split internally into batches of max_batch; synchronous (copies in,
 *   kernels, copies out, then return).
 * - device pointers (the _dev variants): n <= max_batch, the pointers are
 *   device memory on the tree's device; asynchronous on the tree's stream
 *   (rd_gpu_sumtree_stream); items are validated by the kernels themselves:
 *   an invalid item makes the update / insert change nothing, an invalid
 *   target gets leaf RD_GPU_BAD_LEAF, and the error is returned by the next
 *   rd_gpu_sumtree_sync (or by the next host-pointer call, which then does
 *   nothing else). Until then later updates and inserts are skipped too.
 *
 * No allocation happens after init: device scratch (sort buffers, deltas,
 * staging) and pinned host staging are sized for max_batch items there.
 *
 * Errors follow rd_error.h. No usable GPU (no device, no or too old a
 * driver) is RD_EINVAL, out of device or pinned memory RD_ENOMEM, any other
 * CUDA failure (a launch, a copy, a lost device) RD_EINTERNAL, each with
 * CUDA's own words in the message. Nothing aborts. Every initialising fill
 * runs on the tree's stream, which init waits for.
 * A tree is not thread-safe; callers serialize calls, as on the CPU.
 */
#ifndef RD_SUMTREE_GPU_H
#define RD_SUMTREE_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "rd_error.h" /* a C header without its own extern "C" */

#define RD_GPU_MAX_LEVELS 29
/* Largest max_batch accepted at init. */
#define RD_GPU_MAX_BATCH (1u << 30)
/* Leaf written for a target the device found out of range. */
#define RD_GPU_BAD_LEAF UINT32_MAX

struct rd_gpu_impl;

typedef struct rd_gpu_sumtree {
  uint32_t capacity;   /* leaves usable by callers */
  uint32_t fanout;     /* K, a power of two in [2, 64] */
  uint32_t log2_fanout;
  uint32_t height;     /* block levels; level 0 is the root block */
  uint32_t max_batch;  /* largest batch of one device call */
  int device;          /* CUDA device ordinal */
  uint64_t max_leaf;   /* largest leaf value accepted */
  uint64_t level_blocks[RD_GPU_MAX_LEVELS];
  size_t level_offset[RD_GPU_MAX_LEVELS]; /* byte offset of level h in the allocation */
  size_t mem_bytes;    /* device bytes of all levels */
  size_t device_bytes; /* device bytes held: levels and scratch */
  struct rd_gpu_impl *impl;
} rd_gpu_sumtree_t;

/* Usable CUDA devices. RD_OK and *count >= 1, or *count = 0 and RD_EINVAL
 * saying why (no device, no driver, driver older than the runtime). */
int rd_gpu_device_count(int *count, rd_error_t *err);

/* Name of device `ordinal` ("NVIDIA H100 80GB HBM3"), NUL-terminated. */
int rd_gpu_device_name(int ordinal, char *buf, size_t len, rd_error_t *err);

/* Device bytes of the levels of this shape (0 if the shape is invalid). */
size_t rd_gpu_sumtree_memsize(uint32_t capacity, uint32_t fanout);

/* A tree of `capacity` zero leaves on device `device`, with scratch for
 * batches of up to max_batch items. RD_EINVAL: bad shape, max_batch 0 or >
 * RD_GPU_MAX_BATCH, no such device, no usable GPU; RD_ENOMEM. */
int rd_gpu_sumtree_init(rd_gpu_sumtree_t *t, uint32_t capacity, uint32_t fanout, int device,
                        uint32_t max_batch, rd_error_t *err);
void rd_gpu_sumtree_free(rd_gpu_sumtree_t *t);

/* Sum of all leaves (one 8-byte copy after the pending work). */
int rd_gpu_sumtree_total(const rd_gpu_sumtree_t *t, uint64_t *total, rd_error_t *err);

/* Insert: set leaves [first, first + n) to values. RD_ERANGE if the range
 * leaves the capacity or a value exceeds max_leaf (nothing changed then). */
int rd_gpu_sumtree_set_range(rd_gpu_sumtree_t *t, uint32_t first, size_t n,
                             const uint64_t *values, rd_error_t *err);

/* Update: set leaf positions[i] to values[i], in order. RD_ERANGE if a
 * position >= capacity or a value > max_leaf (nothing changed then). */
int rd_gpu_sumtree_update(rd_gpu_sumtree_t *t, size_t n, const uint32_t *positions,
                          const uint64_t *values, rd_error_t *err);

/* Sample: leaves[i] = the leaf selected by targets[i]. RD_EEMPTY if the total
 * is 0, RD_ERANGE if a target >= total (nothing written then). */
int rd_gpu_sumtree_sample(const rd_gpu_sumtree_t *t, size_t n, const uint64_t *targets,
                          uint32_t *leaves, rd_error_t *err);

/* Device-pointer variants (asynchronous, n <= max_batch else RD_ETOOBIG;
 * see the top of this file for how item errors are reported). */
int rd_gpu_sumtree_set_range_dev(rd_gpu_sumtree_t *t, uint32_t first, size_t n,
                                 const uint64_t *d_values, rd_error_t *err);
int rd_gpu_sumtree_update_dev(rd_gpu_sumtree_t *t, size_t n, const uint32_t *d_positions,
                              const uint64_t *d_values, rd_error_t *err);
int rd_gpu_sumtree_sample_dev(const rd_gpu_sumtree_t *t, size_t n, const uint64_t *d_targets,
                              uint32_t *d_leaves, rd_error_t *err);

/* Wait for the tree's pending work; return the first error a kernel found
 * since the last sync (and forget it), or a CUDA error. */
int rd_gpu_sumtree_sync(const rd_gpu_sumtree_t *t, rd_error_t *err);

/* The tree's CUDA stream (a cudaStream_t), for events and for ordering
 * the caller's own work with the tree's. */
void *rd_gpu_sumtree_stream(const rd_gpu_sumtree_t *t);

/* Copy every level to the host, the leaf level as plain leaf values (the
 * CPU tree's form): levels[h] receives level_blocks[h] * fanout entries. A
 * CPU tree of the same shape can take them directly
 * (rd_gpu_sumtree_copy_to_host(&g, cpu.level, &err)). */
int rd_gpu_sumtree_copy_to_host(const rd_gpu_sumtree_t *t, uint64_t *const *levels,
                                rd_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
