/* rmm_gpu_none.c - rmm_gpu.h in a CUDA build whose GPU backend does not
 * provide the replay module: the GPU provider then runs the learner on the
 * GPU and keeps the sum tree and storage on the CPU, and the placement's
 * note says so. daemon/meson.build compiles it in CUDA builds while
 * backends/gpu has no replay module of its own. */
#include "rmm_gpu.h"

#include <string.h>

int rd_gpu_rmm_get(uint32_t device, rd_gpu_rmm_t *out, rd_error_t *err) {
  (void)device;
  memset(out, 0, sizeof *out);
  return rd_error_set(err, RD_EINVAL, "the GPU sum tree and storage are not used by the pipeline");
}

uint64_t rd_gpu_rmm_memsize(const rd_table_config_t *tc) {
  (void)tc;
  return 0;
}
