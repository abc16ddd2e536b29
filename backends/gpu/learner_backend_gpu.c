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
  if (rc) b->fault = 1;
  return rd_learner_backend_adopt(b, l, rc, free);
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

/* ---- training state (checkpoints): the CPU learner's format through
 * host arrays (learner.h rd_learner_state_*_arrays), so a GPU learner's
 * checkpoint loads on the CPU or the FPGA learner of the same config and
 * theirs on it. A load is checked whole (into the host arrays) before
 * anything goes to the device. ---- */

/* Host arrays for every network of l (one allocation, *mem; NULL: out of
 * memory). */
static int state_arrays(const rd_gpu_learner_t *l, rd_learner_state_arrays_t *a, float **mem) {
  memset(a, 0, sizeof *a);
  size_t total = 0;
  for (int k = 0; k < l->n_nets; k++)
    total += rd_nn_spec_params(&l->spec[k]) * (k % 2 == 0 ? 3 : 1);
  float *p = *mem = malloc(total * sizeof(float) + 1);
  if (p == NULL) return RD_ENOMEM;
  for (int k = 0; k < l->n_nets; k++) {
    const size_t n = rd_nn_spec_params(&l->spec[k]);
    a->params[k] = p;
    p += n;
    if (k % 2 == 0) { /* online: Adam's moments */
      a->adam_m[k] = p;
      a->adam_v[k] = p + n;
      p += 2 * n;
    }
  }
  return RD_OK;
}

static size_t gpu_state_bytes(const rd_learner_backend_t *b) {
  return rd_learner_state_bytes_for(&((const rd_gpu_learner_t *)b->impl)->config);
}

/* A state save (load 0: the device's state into the host arrays, then
 * into out) or load (load 1: in checked whole into the host arrays, then
 * to the device); n is out's capacity or in's length. */
static int state_move(rd_learner_backend_t *b, int load, void *out, const void *in, size_t n,
                      size_t *written, rd_error_t *err) {
  rd_error_t local;
  if (err == NULL) err = &local;
  rd_gpu_learner_t *l = b->impl;
  rd_learner_state_arrays_t a;
  float *mem;
  if (state_arrays(l, &a, &mem) != RD_OK)
    return rd_error_set(err, RD_ENOMEM, "out of memory for the GPU learner's state");
  int rc;
  if (!load) {
    rc = rd_gpu_learner_get_state(l, &a, err);
    b->fault = rc != RD_OK && is_fault(rc, err);
    if (rc == RD_OK) rc = rd_learner_state_save_arrays(&l->config, &a, out, n, written, err);
  } else {
    rc = rd_learner_state_load_arrays(&l->config, in, n, &a, err);
    if (rc == RD_OK) {
      rc = rd_gpu_learner_set_state(l, &a, err);
      b->fault = rc != RD_OK && is_fault(rc, err);
    }
  }
  free(mem);
  return rc;
}

static int gpu_state_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                          rd_error_t *err) {
  return state_move(b, 0, buf, NULL, cap, written, err);
}

static int gpu_state_load(rd_learner_backend_t *b, const void *buf, size_t len,
                          rd_error_t *err) {
  return state_move(b, 1, NULL, buf, len, NULL, err);
}

static void gpu_free(void *l) {
  rd_gpu_learner_destroy(l);
  free(l);
}

static void gpu_destroy(rd_learner_backend_t *b) { rd_learner_backend_release(b, gpu_free); }

const rd_learner_ops_t rd_learner_ops_gpu = {
    .name = "gpu",
    .kind = RD_LEARNER_ON_GPU,
    .init = gpu_init,
    .step = gpu_step,
    .policy_bytes = gpu_policy_bytes,
    .policy_save = gpu_policy_save,
    .policy_load = NULL,
    .destroy = gpu_destroy,
    .state_bytes = gpu_state_bytes,
    .state_save = gpu_state_save,
    .state_load = gpu_state_load,
};
