/* rmm_gpu.h - a table's sum tree and rows on a CUDA device: the GPU's
 * replay module (rd_rmm_ops_t) and storage (rd_storage_ops_t) for
 * backends/cpu/table.h. A placement that puts the RMM on GPU d sets
 * config.rmm = rd_gpu_rmm_ops(d); one that puts the storage there sets
 * config.storage = rd_gpu_storage_ops(d). Either, both or neither.
 *
 * Replay module. The tree is sumtree_gpu.h's: the CPU tree's layout and
 * rules integer for integer, so the table samples the same keys,
 * probabilities and weights as on the CPU. The module keeps a host copy of
 * the leaves and of their total (capacity u64s, counted by the ops'
 * memsize): total() and leaf() answer from it without a device round trip,
 * and it is what rd_table_to_cpu moves onto the CPU tree after a failure.
 * Every sample is checked against it: the device's total must equal the
 * host's, and every leaf drawn must lie inside the table with a non-zero
 * value; anything else is a device failure.
 *
 * Storage. The table's rows in device memory (storage_gpu.h), one row of
 * all fields after another; write and read move whole rows through pinned
 * staging. Nothing of the rows stays on the host.
 *
 * One CUDA stream per table: the tree's. A storage created for a table
 * whose replay module is this GPU's, on the same device, runs on the tree's
 * stream; otherwise on its own. No work goes to the legacy default stream.
 *
 * Failures. Batches are validated on the host first (a bad one is the
 * table's contract error, RD_ERANGE, nothing changed). A CUDA failure after
 * that (a launch, a copy, a lost device, the consistency checks above) is
 * RD_EINTERNAL, a device fault, with CUDA's words; the module is then
 * broken: later writes and samples fail with RD_EINTERNAL at once, while
 * total() and leaf() keep answering from the host copy, and the storage's
 * read keeps trying the device (a copy back works after a failure CUDA did
 * not make sticky). The caller moves the table to the CPU with
 * rd_table_to_cpu, which says what could not come back.
 *
 * Memory. The ops' memsize is host memory (the host leaves, staging),
 * what the daemon charges to its memory limit; the device memory a table
 * would take is rd_gpu_rmm_device_bytes + rd_gpu_storage_device_bytes, for
 * a GPU memory limit.
 *
 * Built in every build (meson: backends/gpu/rmm_gpu.c always; the CUDA half
 * rmm_gpu_cuda.c in CUDA builds, rmm_gpu_nocuda.c otherwise, whose create
 * fails with RD_EINVAL "built without CUDA"). Calls are serialized by the
 * table's caller; different tables may be used from different threads.
 */
#ifndef RD_RMM_GPU_H
#define RD_RMM_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "table.h"

/* Device ordinals the ops below exist for: [0, RD_GPU_RMM_MAX_DEVICES). */
#define RD_GPU_RMM_MAX_DEVICES 16

/* The replay module on CUDA device `device` (name "gpu<d>"), or NULL for an
 * ordinal outside [0, RD_GPU_RMM_MAX_DEVICES). The ops are static: the same
 * pointer for the same ordinal. Whether the device exists is found at
 * create (RD_EINVAL "no usable CUDA device: ..."). */
const rd_rmm_ops_t *rd_gpu_rmm_ops(int device);

/* The storage on CUDA device `device` (name "gpu<d>"), or NULL as above.
 * Rows up to RD_GPU_STORAGE_MAX_ROW_BYTES bytes (all fields together);
 * a wider schema gets memsize 0 and a create that says why. */
const rd_storage_ops_t *rd_gpu_storage_ops(int device);
#define RD_GPU_STORAGE_MAX_ROW_BYTES (1u << 20)

/* The device ordinal of a table's replay module or storage if it is one of
 * these, else -1. */
int rd_gpu_rmm_device(const rd_rmm_ops_t *ops);
int rd_gpu_storage_device(const rd_storage_ops_t *ops);

/* Device bytes a replay module of this shape takes (levels, scratch); 0 if
 * the shape is invalid. */
size_t rd_gpu_rmm_device_bytes(uint32_t capacity, uint32_t fanout);

/* Device bytes a storage of `capacity` rows of row_bytes takes (rows,
 * staging); 0 if row_bytes is 0 or above RD_GPU_STORAGE_MAX_ROW_BYTES. */
size_t rd_gpu_storage_device_bytes(uint32_t capacity, size_t row_bytes);

/* 1 in a build with the CUDA backend, 0 otherwise. */
int rd_gpu_rmm_built(void);

#endif
