/* provider_gpu_nocuda.c - the GPU provider's device-specific half in a
 * build without the GPU backend (meson option cuda disabled, or nvcc,
 * libcudart or libcublas not found; provider_gpu.h): no GPU discovery, and
 * a profiler, a learner backend and a replay module that refuse, clearly,
 * with "built without CUDA". The CUDA build compiles provider_gpu_cuda.c,
 * profile_gpu.c, learner_backend_gpu.c and the GPU replay module instead. */
#include <stdio.h>
#include <string.h>

#include "learner_backend.h"
#include "profile_gpu.h"
#include "provider_gpu.h"
#include "rmm_gpu.h"

/* ---- Discovery ---- */

size_t rd_gpu_provider_discover(rd_device_t *out, size_t max, char *why, size_t len) {
  (void)out;
  (void)max;
  snprintf(why, len, "built without CUDA: no GPU discovery");
  return 0;
}

/* ---- The profiler: no GPU profiler in this build (not the device's fault) ---- */

int rd_profile_gpu_built(void) { return 0; }

int rd_profile_measure_gpu(const rd_profile_shape_t *shape, const rd_device_t *gpu,
                           double budget_s, rd_profile_t *out, size_t cap, size_t *n_out,
                           int *fault, rd_error_t *err) {
  (void)shape;
  (void)gpu;
  (void)budget_s;
  (void)out;
  (void)cap;
  if (fault) *fault = 0;
  *n_out = 0;
  return rd_error_set(err, RD_EINVAL, "built without CUDA: no GPU profiler in this build");
}

/* ---- The learner backend: every init fails as a device fault, so a
 * caller that asked for it falls back to the CPU (learner_backend.h) ---- */

int rd_learner_gpu_built(void) { return 0; }

static int nogpu_init(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
                      rd_error_t *err) {
  (void)c;
  b->fault = 1;
  return rd_error_set(err, RD_EINVAL, "built without CUDA: this replayd has no GPU learner "
                      "(meson option cuda, nvcc and libcublas; GPU %u not used)", device);
}

static int nogpu_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
                      rd_step_stats_t *st, rd_error_t *err) {
  (void)batch;
  (void)td_abs;
  (void)st;
  b->fault = 1;
  return rd_error_set(err, RD_EINVAL, "built without CUDA: this replayd has no GPU learner");
}

static size_t nogpu_policy_bytes(const rd_learner_backend_t *b) {
  (void)b;
  return 0;
}

static int nogpu_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                             rd_error_t *err) {
  (void)buf;
  (void)cap;
  if (written) *written = 0;
  b->fault = 1;
  return rd_error_set(err, RD_EINVAL, "built without CUDA: this replayd has no GPU learner");
}

static void nogpu_destroy(rd_learner_backend_t *b) { b->impl = NULL; }

const rd_learner_ops_t rd_learner_ops_gpu = {
    .name = "gpu",
    .kind = RD_LEARNER_ON_GPU,
    .init = nogpu_init,
    .step = nogpu_step,
    .policy_bytes = nogpu_policy_bytes,
    .policy_save = nogpu_policy_save,
    .policy_load = NULL,
    .destroy = nogpu_destroy,
};
