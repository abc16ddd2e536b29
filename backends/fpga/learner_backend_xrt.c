/* learner_backend_xrt.c - the "fpga-xrt" learner backend: the learner
 * kernel through XRT (learner_backend_xrt.h says what runs and how faults
 * are classified). The host side is the C-simulation backend's
 * (learner_backend_fpga.h: the kernel config, the initial weights, the
 * stats), with XRT buffers in place of heap buffers: the weights, targets
 * and Adam moments stay on the device between steps and are read back
 * only for a policy or state save. */
#include "learner_backend_xrt.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/learner.h"
#include "learner_backend_fpga.h"
#include "nn.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char xclbin_path[PATH_MAX];

typedef struct {
  rd_learner_fpga_shape_t s;
  uint64_t steps;       /* successful steps: Adam's t - 1 */
  float *host;          /* n_policy floats: the policy on its way in or out */
  rd_fpga_xrt_learner_t x;
} xrt_learner_t;

int rd_learner_fpga_xrt_configure(const char *xclbin, rd_error_t *err) {
  const char *p = xclbin ? xclbin : "";
  if (strlen(p) >= sizeof xclbin_path)
    return rd_error_set(err, RD_EINVAL, "fpga-xrt: the xclbin path is longer than %d bytes",
                        PATH_MAX - 1);
  pthread_mutex_lock(&lock);
  snprintf(xclbin_path, sizeof xclbin_path, "%s", p);
  pthread_mutex_unlock(&lock);
  return RD_OK;
}

static void xrt_free(void *p) {
  xrt_learner_t *l = p;
  rd_fpga_xrt_learner_close(&l->x);
  free(l->host);
  free(l);
}

/* A device error: the pipeline gives the device up (learner_backend.h). */
static int device_fault(rd_learner_backend_t *b, int rc) {
  b->fault = RD_LEARNER_FAULT_DEVICE;
  return rc;
}

static int xrt_init(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
                    rd_error_t *err) {
  rd_learner_fpga_shape_t shape;
  int rc = rd_learner_fpga_shape(b, c, &shape, err);
  if (rc) return rc;
  char path[PATH_MAX];
  pthread_mutex_lock(&lock);
  snprintf(path, sizeof path, "%s", xclbin_path);
  pthread_mutex_unlock(&lock);
  if (path[0] == '\0')
    return device_fault(b, rd_error_set(err, RD_EINVAL, "FPGA %u (XRT): no xclbin configured "
                                        "for the learner kernel", device));
  xrt_learner_t *l = calloc(1, sizeof *l);
  if (l == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the FPGA learner");
  l->s = shape;
  /* The initial weights, computed on the host, as the C-sim backend's. */
  float *params = malloc(l->s.n_params * sizeof(float));
  float *target = malloc(l->s.n_params * sizeof(float));
  l->host = malloc((l->s.n_policy ? l->s.n_policy : 1) * sizeof(float));
  if (params == NULL || target == NULL || l->host == NULL) {
    free(params);
    free(target);
    xrt_free(l);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the FPGA learner's initial weights");
  }
  rc = rd_learner_fpga_initial_weights(c, params, target, l->s.n_params, err);
  if (rc == RD_OK) {
    rc = rd_fpga_xrt_learner_open(&l->x, device, path, &l->s.kc, err);
    /* Open zeroed the Adam moments on the device; the weights go over. */
    if (rc == RD_OK)
      rc = rd_fpga_xrt_learner_write(&l->x, RD_XRT_L_PARAMS, params, 0, l->s.n_params, err);
    if (rc == RD_OK)
      rc = rd_fpga_xrt_learner_write(&l->x, RD_XRT_L_TARGET, target, 0, l->s.n_params, err);
    if (rc) b->fault = RD_LEARNER_FAULT_DEVICE;
  }
  free(params);
  free(target);
  return rd_learner_backend_adopt(b, l, rc, xrt_free);
}

static int xrt_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
                    rd_step_stats_t *st, rd_error_t *err) {
  xrt_learner_t *l = b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  int rc = rd_learner_batch_validate(&l->s.config, batch, err);
  if (rc) return rc; /* the caller's */
  double stats[LRN_ST_COUNT];
  rc = rd_fpga_xrt_learner_step(&l->x, l->steps, (uint32_t)batch->n, batch->obs,
                                batch->action_i, batch->action_f, batch->reward,
                                batch->discount, batch->next_obs, batch->weights, td_abs,
                                stats, err);
  /* The batch was checked against the config the buffers were sized for,
   * so every failure here is the device's. */
  if (rc) return device_fault(b, rc);
  if (st != NULL) rd_learner_fpga_step_stats(stats, st);
  if (stats[LRN_ST_FAILED] != LRN_FAIL_NONE)
    return rd_learner_fpga_range_error(&l->s.config, stats, err);
  l->steps++;
  return RD_OK;
}

static size_t xrt_policy_bytes(const rd_learner_backend_t *b) {
  const xrt_learner_t *l = b->impl;
  return rd_nn_flat_bytes(&l->s.policy);
}

/* The policy block is params[0..n_policy) on the device: read it back,
 * then the CPU learner's flat writer. */
static int xrt_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                           rd_error_t *err) {
  xrt_learner_t *l = b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  if (cap < rd_nn_flat_bytes(&l->s.policy)) /* before the device is asked */
    return rd_nn_flat_write(&l->s.policy, l->host, buf, cap, written, err);
  int rc = rd_fpga_xrt_learner_read(&l->x, RD_XRT_L_PARAMS, l->host, 0, l->s.n_policy, err);
  if (rc) return device_fault(b, rc);
  return rd_nn_flat_write(&l->s.policy, l->host, buf, cap, written, err);
}

/* As the C-sim backend's load: the policy network and its target on the
 * device; the critic and the Adam moments stay. */
static int xrt_policy_load(rd_learner_backend_t *b, const void *buf, size_t len,
                           rd_error_t *err) {
  xrt_learner_t *l = b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  int rc = rd_nn_flat_load(buf, len, &l->s.policy, l->host, l->s.n_policy, err);
  if (rc) return rc;
  rc = rd_fpga_xrt_learner_write(&l->x, RD_XRT_L_PARAMS, l->host, 0, l->s.n_policy, err);
  if (rc == RD_OK)
    rc = rd_fpga_xrt_learner_write(&l->x, RD_XRT_L_TARGET, l->host, 0, l->s.n_policy, err);
  return rc ? device_fault(b, rc) : RD_OK;
}

/* ---- training state (checkpoints, moves) ----
 * The C-sim backend's format and layout (rd_learner_fpga_state_arrays):
 * the four parameter blocks read back from the device into a host copy
 * for a save; for a load, checked whole into a host copy before any block
 * on the device is written. The copy (4 x n_params floats) lives for the
 * call only: saves come at checkpoints and moves, not per step. */

static size_t xrt_state_bytes(const rd_learner_backend_t *b) {
  return rd_learner_state_bytes_for(&((const xrt_learner_t *)b->impl)->s.config);
}

static const int blocks[4] = {RD_XRT_L_PARAMS, RD_XRT_L_TARGET, RD_XRT_L_ADAM_M,
                              RD_XRT_L_ADAM_V};

static float *host_blocks(const xrt_learner_t *l, rd_error_t *err) {
  float *h = malloc(4 * (l->s.n_params ? l->s.n_params : 1) * sizeof(float));
  if (h == NULL) rd_error_set(err, RD_ENOMEM, "out of memory for the FPGA learner's state");
  return h;
}

static void arrays(const xrt_learner_t *l, float *h, uint64_t steps,
                   rd_learner_state_arrays_t *a) {
  const size_t n = l->s.n_params;
  rd_learner_fpga_state_arrays(&l->s, h, h + n, h + 2 * n, h + 3 * n, steps, a);
}

static int xrt_state_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                          rd_error_t *err) {
  xrt_learner_t *l = b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  if (cap < rd_learner_state_bytes_for(&l->s.config)) /* before the device is asked */
    return rd_error_set(err, RD_ETOOBIG, "a buffer of %zu bytes cannot hold the learner's "
                        "state (%zu)", cap, rd_learner_state_bytes_for(&l->s.config));
  float *h = host_blocks(l, err);
  if (h == NULL) return RD_ENOMEM;
  int rc = RD_OK;
  for (int k = 0; k < 4 && rc == RD_OK; k++)
    rc = rd_fpga_xrt_learner_read(&l->x, blocks[k], h + k * l->s.n_params, 0, l->s.n_params,
                                  err);
  if (rc) {
    free(h);
    return device_fault(b, rc);
  }
  rd_learner_state_arrays_t a;
  arrays(l, h, l->steps, &a);
  rc = rd_learner_state_save_arrays(&l->s.config, &a, buf, cap, written, err);
  free(h);
  return rc;
}

static int xrt_state_load(rd_learner_backend_t *b, const void *buf, size_t len,
                          rd_error_t *err) {
  xrt_learner_t *l = b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  float *h = host_blocks(l, err);
  if (h == NULL) return RD_ENOMEM;
  rd_learner_state_arrays_t a;
  arrays(l, h, l->steps, &a);
  int rc = rd_learner_state_load_arrays(&l->s.config, buf, len, &a, err);
  if (rc) { /* the caller's: nothing on the device changed */
    free(h);
    return rc;
  }
  for (int k = 0; k < 4 && rc == RD_OK; k++)
    rc = rd_fpga_xrt_learner_write(&l->x, blocks[k], h + k * l->s.n_params, 0, l->s.n_params,
                                   err);
  free(h);
  if (rc) return device_fault(b, rc);
  l->steps = a.steps;
  return RD_OK;
}

static void xrt_destroy(rd_learner_backend_t *b) { rd_learner_backend_release(b, xrt_free); }

const rd_learner_ops_t rd_learner_ops_fpga_xrt = {
    .name = "fpga-xrt",
    .kind = RD_LEARNER_ON_FPGA,
    .init = xrt_init,
    .step = xrt_step,
    .policy_bytes = xrt_policy_bytes,
    .policy_save = xrt_policy_save,
    .policy_load = xrt_policy_load,
    .destroy = xrt_destroy,
    .state_bytes = xrt_state_bytes,
    .state_save = xrt_state_save,
    .state_load = xrt_state_load,
};

const rd_fpga_xrt_learner_t *rd_learner_fpga_xrt_host(const rd_learner_backend_t *b) {
  if (b == NULL || b->ops != &rd_learner_ops_fpga_xrt || b->impl == NULL) return NULL;
  return &((const xrt_learner_t *)b->impl)->x;
}
