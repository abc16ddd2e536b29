/* rmm_gpu_cuda.c - the device calls of the GPU replay module and storage
 * (rmm_gpu_dev.h) on CUDA: sumtree_gpu.h's tree and storage_gpu.h's rows,
 * host-pointer calls (synchronous). Built with the CUDA backend;
 * rmm_gpu_nocuda.c otherwise. */
#include <stdlib.h>

#include "rmm_gpu.h"
#include "rmm_gpu_dev.h"
#include "storage_gpu.h"
#include "sumtree_gpu.h"

int rd_gpu_rmm_built(void) { return 1; }

/* The end of tree_init and rows_init: with rc RD_OK, *out takes p; else p
 * (whose own init freed what it had made) is freed. Returns rc. */
static int hand_over(void **out, void *p, int rc) {
  if (rc) {
    free(p);
    return rc;
  }
  *out = p;
  return RD_OK;
}

static int tree_init(void **out, int device, uint32_t capacity, uint32_t fanout,
                     uint32_t max_batch, rd_error_t *err) {
  rd_gpu_sumtree_t *t = malloc(sizeof *t);
  if (t == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for a GPU sum tree");
  return hand_over(out, t, rd_gpu_sumtree_init(t, capacity, fanout, device, max_batch, err));
}

static void tree_free(void *t) {
  rd_gpu_sumtree_free(t);
  free(t);
}

static int tree_set_range(void *t, uint32_t first, size_t n, const uint64_t *v, rd_error_t *err) {
  return rd_gpu_sumtree_set_range(t, first, n, v, err);
}

static int tree_update(void *t, size_t n, const uint32_t *pos, const uint64_t *v,
                       rd_error_t *err) {
  return rd_gpu_sumtree_update(t, n, pos, v, err);
}

static int tree_sample(void *t, size_t n, const uint64_t *targets, uint32_t *leaves,
                       rd_error_t *err) {
  return rd_gpu_sumtree_sample(t, n, targets, leaves, err);
}

static int tree_total(void *t, uint64_t *total, rd_error_t *err) {
  return rd_gpu_sumtree_total(t, total, err);
}

static size_t tree_device_bytes(const void *t) {
  return ((const rd_gpu_sumtree_t *)t)->device_bytes;
}

static int rows_init(void **out, int device, void *tree, uint32_t nrows, uint32_t row_bytes,
                     uint32_t max_batch, rd_error_t *err) {
  rd_gpu_storage_t *s = malloc(sizeof *s);
  if (s == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for a GPU storage");
  void *stream = tree != NULL ? rd_gpu_sumtree_stream(tree) : NULL;
  int rc = rd_gpu_storage_init_on(s, nrows, row_bytes, max_batch, device, stream, err);
  return hand_over(out, s, rc);
}

static void rows_free(void *s) {
  rd_gpu_storage_free(s);
  free(s);
}

static int rows_scatter(void *s, size_t n, const uint32_t *pos, const void *data,
                        rd_error_t *err) {
  return rd_gpu_storage_scatter(s, n, pos, data, err);
}

static int rows_gather(void *s, size_t n, const uint32_t *pos, void *out, rd_error_t *err) {
  return rd_gpu_storage_gather(s, n, pos, out, err);
}

static size_t rows_device_bytes(const void *s) { return ((const rd_gpu_storage_t *)s)->mem_bytes; }

const rd_gpu_dev_ops_t rd_gpu_dev_cuda = {
    .name = "cuda",
    .tree_init = tree_init,
    .tree_free = tree_free,
    .tree_set_range = tree_set_range,
    .tree_update = tree_update,
    .tree_sample = tree_sample,
    .tree_total = tree_total,
    .tree_device_bytes = tree_device_bytes,
    .rows_init = rows_init,
    .rows_free = rows_free,
    .rows_scatter = rows_scatter,
    .rows_gather = rows_gather,
    .rows_device_bytes = rows_device_bytes,
};
