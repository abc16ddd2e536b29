/* rmm_gpu_nocuda.c - the device calls of the GPU replay module and storage
 * (rmm_gpu_dev.h) in a build without the CUDA backend: creating a tree or
 * rows fails, saying so; nothing else can be reached. */
#include "rmm_gpu.h"
#include "rmm_gpu_dev.h"

int rd_gpu_rmm_built(void) { return 0; }

static int tree_init(void **out, int device, uint32_t capacity, uint32_t fanout,
                     uint32_t max_batch, rd_error_t *err) {
  (void)capacity, (void)fanout, (void)max_batch;
  *out = NULL;
  (void)device;
  return rd_error_set(err, RD_EINVAL, "built without CUDA (meson option cuda)");
}

static int rows_init(void **out, int device, void *tree, uint32_t nrows, uint32_t row_bytes,
                     uint32_t max_batch, rd_error_t *err) {
  (void)tree, (void)nrows, (void)row_bytes, (void)max_batch;
  *out = NULL;
  (void)device;
  return rd_error_set(err, RD_EINVAL, "built without CUDA (meson option cuda)");
}

/* Unreachable: nothing is ever created. */
static void nothing(void *p) { (void)p; }
static size_t no_bytes(const void *p) {
  (void)p;
  return 0;
}

const rd_gpu_dev_ops_t rd_gpu_dev_cuda = {
    .name = "none (built without CUDA)",
    .tree_init = tree_init,
    .tree_free = nothing,
    .tree_device_bytes = no_bytes,
    .rows_init = rows_init,
    .rows_free = nothing,
    .rows_device_bytes = no_bytes,
};
