/* storage_gpu.h - a table's data storage in CUDA device memory: rows of a
 * fixed byte width, written by scatter (insert at ring positions) and read
 * by gather (the rows of a sampled batch), for when the mapper puts the
 * storage on the GPU (papers/001 §IV-C3: the learner then reads its batch
 * without a host round trip).
 *
 * One CUDA stream per storage (its own, or one it is given). The kernels move the widest word the row
 * width allows (16, 8, 4 or 1 bytes), one thread per word of the batch, so
 * a gather is one coalesced pass over the output whatever the row width.
 *
 * Host-pointer calls (scatter, gather) check every index on the host
 * (RD_ERANGE for a position >= rows, nothing moved) and wait for the copy.
 * Device-pointer calls (_dev) are asynchronous on the storage's stream; a
 * kernel that meets a position >= rows skips that row (gather writes zeros)
 * and the next rd_gpu_storage_sync reports RD_ERANGE.
 *
 * The positions of one scatter must be distinct (FIFO insertion produces
 * distinct ring positions): with a repeated position the row written is one
 * of the candidates, unspecified which. The host scatter refuses repeats
 * (RD_EINVAL).
 *
 * Errors as learner_gpu.h: RD_EINVAL (bad argument, no usable device),
 * RD_ENOMEM, RD_ETOOBIG (n > max_batch), RD_EINTERNAL (a launch failed).
 * Not thread-safe.
 */
#ifndef RD_STORAGE_GPU_H
#define RD_STORAGE_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "rd_error.h"

struct rd_gpu_storage_impl;

typedef struct rd_gpu_storage {
  uint32_t rows;      /* capacity in rows */
  uint32_t row_bytes; /* bytes per row, 1..2^20 */
  uint32_t max_batch; /* largest n of one call */
  int device;
  size_t mem_bytes;   /* device bytes held */
  struct rd_gpu_storage_impl *impl;
} rd_gpu_storage_t;

/* rows x row_bytes of zeroed device memory plus staging for max_batch rows. */
int rd_gpu_storage_init(rd_gpu_storage_t *s, uint32_t rows, uint32_t row_bytes,
                        uint32_t max_batch, int device, rd_error_t *err);
/* The same on a stream of the caller's (a cudaStream_t on `device`; NULL:
 * its own), e.g. the sum tree's of the same table, so that the two need no
 * events between them. The stream must outlive the storage. */
int rd_gpu_storage_init_on(rd_gpu_storage_t *s, uint32_t rows, uint32_t row_bytes,
                           uint32_t max_batch, int device, void *stream, rd_error_t *err);
void rd_gpu_storage_free(rd_gpu_storage_t *s);

/* Row positions[i] = data + i * row_bytes, i < n (host memory). */
int rd_gpu_storage_scatter(rd_gpu_storage_t *s, size_t n, const uint32_t *positions,
                           const void *data, rd_error_t *err);
/* out + i * row_bytes = row positions[i], i < n (host memory). */
int rd_gpu_storage_gather(rd_gpu_storage_t *s, size_t n, const uint32_t *positions, void *out,
                          rd_error_t *err);

/* The same on device pointers, asynchronous. */
int rd_gpu_storage_scatter_dev(rd_gpu_storage_t *s, size_t n, const uint32_t *d_positions,
                               const void *d_data, rd_error_t *err);
int rd_gpu_storage_gather_dev(rd_gpu_storage_t *s, size_t n, const uint32_t *d_positions,
                              void *d_out, rd_error_t *err);

/* Wait for pending work; RD_ERANGE if a device call met a bad position. */
int rd_gpu_storage_sync(rd_gpu_storage_t *s, rd_error_t *err);

/* The storage's CUDA stream (a cudaStream_t) and its row array. */
void *rd_gpu_storage_stream(const rd_gpu_storage_t *s);
void *rd_gpu_storage_rows(const rd_gpu_storage_t *s);

#ifdef __cplusplus
}
#endif

#endif
