/* profile_gpu.h - the GPU's profiler: its entries of the
 * primitive-platform table, measured on a present GPU (papers/001
 * §VI-A1), for the mapper. The GPU provider (provider_gpu.c) reaches it
 * through the profile cache (daemon/dse/profile_cache.h: rd_profiler_gpu).
 *
 * What is measured, for a workload shape (profile.h: rd_profile_shape_t),
 * on one GPU of the device list, at "threads" 1 (a GPU call has no thread
 * count; 1 keys the rows):
 *  - sample: rd_gpu_sumtree_sample of `batch` targets on a CUDA sum tree of
 *    the workload's capacity and fanout (host pointers: the targets' copy
 *    in, the kernel, the leaves' copy out, as a caller without device
 *    buffers pays). The tree is filled with varied priorities; where it
 *    would exceed RD_PROFILE_TREE_BYTES the capacity is halved until it
 *    fits, and filling stops when the setup share of the budget is spent
 *    (at least one batch): `items` records what the tree held.
 *  - update: rd_gpu_sumtree_update of `batch` random positions and values.
 *  - train: rd_gpu_learner_step on a synthetic batch of the shape (fixed
 *    seed), after two warm-up steps (the second captures the CUDA graph,
 *    which is then replayed, as in training).
 * Probabilities, IS weights and keys (the CPU table's share of a sample)
 * are not in the sample figure.
 *
 * The bound: the same per-device budget as the CPU's (budget_s, normally
 * RD_PROFILE_DEFAULT_BUDGET_S), counted from the call, setup included:
 * RD_PROFILE_SETUP_SHARE of it for the tree's init and fill, the rest
 * shared by the primitives still to measure; a repetition starts only if
 * it ends, at the slowest call seen, by its share; a primitive without a
 * repetition is left out. Not covered: the CUDA context's creation by the
 * first call of the process on that GPU (typically 0.1-0.5 s), and a
 * single call that hangs.
 *
 * Build: measuring needs the GPU backend (daemon/meson.build:
 * rd_gpu_enabled; profile_gpu.c). Without it provider_gpu_nocuda.c stands
 * in: rd_profile_gpu_built() is 0 and rd_profile_measure_gpu fails with
 * RD_EINVAL "built without CUDA: no GPU profiler in this build" and
 * *fault = 0 (the device is not to blame).
 *
 * Faults: after the shape is checked, any failing CUDA call (no device or
 * driver, out of memory, cuBLAS, a launch) sets *fault = 1: the caller
 * should mark the device unusable (devices.h).
 *
 * Never run on a GPU so far (compiled and host-tested only): see
 * docs/architecture.md.
 */
#ifndef RD_PROFILE_GPU_H
#define RD_PROFILE_GPU_H

#include <stddef.h>

#include "devices.h"
#include "profile.h"
#include "profile_cache.h"
#include "rd_error.h"

/* 1 in a build with the GPU backend, else 0. */
int rd_profile_gpu_built(void);

/* Measure sample, update and (with a learner) train on GPU `gpu` (a "gpu"
 * entry of the device list; its index is the CUDA ordinal) within budget_s
 * (0 < budget_s <= RD_PROFILE_MAX_BUDGET_S). Up to 3 results (cap >= 3),
 * in that order, with gpu->fingerprint, threads 1, rd_profile_build(),
 * source measured. Errors: RD_EINVAL (bad shape, budget or cap; no GPU
 * profiler in this build; a device error of RD_EINVAL kind), RD_ENOMEM,
 * RD_EINTERNAL; *fault (may be NULL) says whether the device failed. */
int rd_profile_measure_gpu(const rd_profile_shape_t *shape, const rd_device_t *gpu,
                           double budget_s, rd_profile_t *out, size_t cap, size_t *n_out,
                           int *fault, rd_error_t *err);

/* The GPU profiler as the profile cache calls it (provider_gpu.c): one
 * row per primitive at "threads" 1, whatever thread counts are asked. */
extern const rd_profiler_t rd_profiler_gpu;

#endif
