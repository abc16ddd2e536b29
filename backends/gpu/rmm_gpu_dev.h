/* rmm_gpu_dev.h - what the GPU replay module and storage (rmm_gpu.h) need
 * from a device, as a table of calls, so the module's own logic (host
 * leaves, checks, chunks, row layout, failures) is plain C that runs and
 * is tested on any host.
 *
 * rd_gpu_dev_cuda is the real one: sumtree_gpu.h and storage_gpu.h
 * (rmm_gpu_cuda.c), or, in a build without CUDA, calls that fail with
 * "built without CUDA" (rmm_gpu_nocuda.c). Tests pass their own (a host
 * tree and host rows, or the real one wrapped to fail on demand) through
 * rd_gpu_rmm_create_on / rd_gpu_storage_create_on.
 *
 * Contract of each call: the module has validated the batch (positions <
 * capacity, values <= the tree's max leaf, targets < total, n <= max_batch
 * of that object) and waits for the result (host pointers, synchronous).
 * A failure returns an rd_err_t code with a message; the module treats any
 * failure after create as the device's.
 */
#ifndef RD_RMM_GPU_DEV_H
#define RD_RMM_GPU_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "table.h"

typedef struct rd_gpu_dev_ops {
  const char *name;
  /* A tree of `capacity` zero leaves, fanout K, batches up to max_batch. */
  int (*tree_init)(void **tree, int device, uint32_t capacity, uint32_t fanout,
                   uint32_t max_batch, rd_error_t *err);
  void (*tree_free)(void *tree);
  int (*tree_set_range)(void *tree, uint32_t first, size_t n, const uint64_t *values,
                        rd_error_t *err);
  int (*tree_update)(void *tree, size_t n, const uint32_t *pos, const uint64_t *values,
                     rd_error_t *err);
  int (*tree_sample)(void *tree, size_t n, const uint64_t *targets, uint32_t *leaves,
                     rd_error_t *err);
  int (*tree_total)(void *tree, uint64_t *total, rd_error_t *err);
  size_t (*tree_device_bytes)(const void *tree); /* device memory it holds */
  /* `rows` zeroed rows of row_bytes, batches up to max_batch. tree, if not
   * NULL, is a tree of these ops on the same device whose stream the rows
   * share (it outlives them). */
  int (*rows_init)(void **rows, int device, void *tree, uint32_t nrows, uint32_t row_bytes,
                   uint32_t max_batch, rd_error_t *err);
  void (*rows_free)(void *rows);
  /* Row pos[i] = data + i * row_bytes (distinct positions). */
  int (*rows_scatter)(void *rows, size_t n, const uint32_t *pos, const void *data,
                      rd_error_t *err);
  /* out + i * row_bytes = row pos[i]. */
  int (*rows_gather)(void *rows, size_t n, const uint32_t *pos, void *out, rd_error_t *err);
  size_t (*rows_device_bytes)(const void *rows);
} rd_gpu_dev_ops_t;

/* The CUDA device calls of this build (see above). */
extern const rd_gpu_dev_ops_t rd_gpu_dev_cuda;

/* The create of rd_gpu_rmm_ops(device) and rd_gpu_storage_ops(device), on
 * the device calls `dev` (the table ops' own pass &rd_gpu_dev_cuda). A
 * storage shares the tree's stream when rmm_ops is a GPU replay module's
 * and its module was made with the same `dev` and device. */
int rd_gpu_rmm_create_on(void **rmm, const rd_gpu_dev_ops_t *dev, int device,
                         uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                         rd_error_t *err);
int rd_gpu_storage_create_on(void **st, const rd_gpu_dev_ops_t *dev, int device,
                             uint32_t capacity, uint32_t n_fields, const size_t *field_bytes,
                             const rd_rmm_ops_t *rmm_ops, void *rmm, rd_error_t *err);

/* The largest batch of one device call the module makes (it splits larger
 * ones): the tree's for a table of `capacity`, the storage's for rows of
 * row_bytes (about 4 MiB of rows at most). */
uint32_t rd_gpu_rmm_chunk(uint32_t capacity);
uint32_t rd_gpu_storage_chunk(uint32_t capacity, size_t row_bytes);

/* What one module did (tests, benchmarks). */
typedef struct {
  int broken;              /* a device call failed; see why */
  char why[RD_ERROR_MSG_MAX];
  uint64_t device_calls;   /* calls made to the device */
  size_t device_bytes;     /* device memory held (the device calls' own count) */
  int shares_stream;       /* storage only: runs on its table's tree stream */
} rd_gpu_module_info_t;
void rd_gpu_rmm_info(const void *rmm, rd_gpu_module_info_t *out);
void rd_gpu_storage_info(const void *st, rd_gpu_module_info_t *out);

#endif
