/* learner_backend_gpu.c - the "gpu" learner backend over
 * learner_gpu.h, the GPU provider's learner (provider_gpu.h). Compiled
 * only in a build with the GPU backend (daemon/meson.build:
 * rd_gpu_enabled); provider_gpu_nocuda.c stands in otherwise.
 *
 * Fault classification (learner_backend.h). init: the config is validated
 * here first, so a bad config is the caller's (fault 0); every later
 * failure (no device or driver, too old a driver, out of device or pinned
 * memory, cuBLAS) is the device's. step: the GPU learner checks the batch
 * on the host before any CUDA call and returns RD_EINVAL naming the array
 * (the caller's, fault 0) or RD_ERANGE for a non-finite loss (fault 0);
 * RD_ENOMEM, RD_EINTERNAL (cuBLAS, a launch, a failed synchronisation) and
 * RD_EINVAL for a lost device (learner_gpu.cu words those "... CUDA ...")
 * are device faults. policy_save copies the weights back from the device
 * and is classified the same way. */
#include <stdlib.h>
#include <string.h>

#include "learner_backend.h"
#include "learner_gpu.h"

int rd_learner_gpu_built(void) { return 1; }

static int gpu_init(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
                    rd_error_t *err) {
  int rc = rd_learner_config_validate(c, err);
  if (rc) return rc;
  rd_gpu_learner_t *l = calloc(1, sizeof *l);
  if (l == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the GPU learner");
  rc = rd_gpu_learner_init(l, c, (int)device, err);
  if (rc) {
    free(l);
    b->fault = 1;
    return rc;
  }
  b->impl = l;
  return RD_OK;
}

static int is_fault(int rc, const rd_error_t *err) {
  if (rc == RD_ENOMEM || rc == RD_EINTERNAL) return 1;
  return rc == RD_EINVAL && err != NULL && strstr(err->msg, "CUDA") != NULL;
}

static int gpu_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
                    rd_step_stats_t *st, rd_error_t *err) {
  rd_error_t local;
  if (err == NULL) err = &local;
  int rc = rd_gpu_learner_step(b->impl, batch, td_abs, st, err);
  b->fault = rc != RD_OK && is_fault(rc, err);
  return rc;
}

static size_t gpu_policy_bytes(const rd_learner_backend_t *b) {
  return rd_gpu_learner_policy_bytes(b->impl);
}

static int gpu_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                           rd_error_t *err) {
  rd_error_t local;
  if (err == NULL) err = &local;
  int rc = rd_gpu_learner_policy_weights(b->impl, buf, cap, written, err);
  b->fault = rc != RD_OK && is_fault(rc, err);
  return rc;
}

static void gpu_destroy(rd_learner_backend_t *b) {
  if (b->impl == NULL) return;
  rd_gpu_learner_destroy(b->impl);
  free(b->impl);
  b->impl = NULL;
}

const rd_learner_ops_t rd_learner_ops_gpu = {
    .name = "gpu",
    .kind = RD_LEARNER_ON_GPU,
    .init = gpu_init,
    .step = gpu_step,
    .policy_bytes = gpu_policy_bytes,
    .policy_save = gpu_policy_save,
    .policy_load = NULL,
    .destroy = gpu_destroy,
};
