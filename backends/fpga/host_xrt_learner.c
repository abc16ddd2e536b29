/* host_xrt_learner.c - the learner kernel's host path over XRT's C API
 * (host_xrt.h, second half; only ever run against XRT's no-op shim).
 *
 * The buffers are sized as backends/fpga/learner_backend_fpga.c sizes its
 * C-simulation buffers (lrn_params_floats, lrn_ws_floats, the config's
 * batch), one XRT buffer object per pointer argument, each in the memory
 * bank its argument is connected to. The descriptor and hyper-parameters
 * are written once at open; the parameter blocks live on the device
 * between steps (the kernel updates them in place), so a step moves only
 * the batch in and td_abs and stats out. */
#include "host_xrt.h"

#include <errno.h>
#include <string.h>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include "kernels/learner.h"

#define LRN_KERNEL_NAME "lrn_train_step"

/* Kernel argument id of each buffer (2 step and 3 n are scalars). */
static const int L_ARG[RD_XRT_L_N_BO] = {0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};

void rd_fpga_xrt_learner_close(rd_fpga_xrt_learner_t *x) {
  if (!x) return;
  rd_fpga_xrt_close_handles(x->device, x->kernel, x->run, x->bo, RD_XRT_L_N_BO);
  memset(x, 0, sizeof *x);
}

static int sync_range(rd_fpga_xrt_learner_t *x, int i, enum xclBOSyncDirection dir, size_t off,
                      size_t bytes, rd_error_t *err) {
  if (bytes == 0) return RD_OK;
  if (xrtBOSync(x->bo[i], dir, bytes, off) != 0)
    return rd_error_set(err, RD_EINTERNAL, "xrt: learner buffer %d sync of %zu bytes failed (%s)",
                        L_ARG[i], bytes, strerror(errno));
  return RD_OK;
}

int rd_fpga_xrt_learner_open(rd_fpga_xrt_learner_t *x, unsigned index, const char *xclbin,
                             const void *lrn_config, rd_error_t *err) {
  if (!x || !xclbin || !lrn_config)
    return rd_error_set(err, RD_EINVAL, "xrt: handle, xclbin path and config needed");
  memset(x, 0, sizeof *x);
  const lrn_config_t *c = lrn_config;
  /* The kernel would refuse it on every step (LRN_EINVAL, which XRT cannot
   * report): refuse it here, with the reason. */
  lrn_why_t why;
  if (lrn_config_check(c, &why) != LRN_OK) {
    char msg[160];
    lrn_why_format(&why, msg, sizeof msg);
    return rd_error_set(err, RD_EINVAL, "xrt: the learner kernel cannot take this config: %s",
                        msg);
  }
  int rc = rd_fpga_xrt_open_kernel(index, xclbin, LRN_KERNEL_NAME, &x->device, &x->kernel,
                                   &x->noop, err);
  if (rc) return rc;
  const lrn_shape_t *s0 = &c->net[0];
  x->batch = c->batch;
  x->obs_dim = s0->sizes[0];
  x->action_dim = c->algo == LRN_ALGO_DDPG ? s0->sizes[s0->n_layers] : 0;
  x->n_params = lrn_params_floats(c);
  x->ws_floats = lrn_ws_floats(c);
  const size_t B = c->batch, P = x->n_params * sizeof(float);
  const size_t bytes[RD_XRT_L_N_BO] = {
      LRN_D_WORDS * sizeof(uint32_t), LRN_HP_COUNT * sizeof(double), P, P, P, P,
      x->ws_floats * sizeof(float), B * x->obs_dim * sizeof(float), B * sizeof(int32_t),
      B * x->action_dim * sizeof(float), B * sizeof(float), B * sizeof(float),
      B * x->obs_dim * sizeof(float), B * sizeof(float), B * sizeof(float),
      LRN_ST_COUNT * sizeof(double)};
  for (int i = 0; i < RD_XRT_L_N_BO; i++) {
    /* XRT allocates no empty buffer; DQN's action_f is never read. */
    const size_t n = bytes[i] ? bytes[i] : sizeof(float);
    int grp = xrtKernelArgGroupId(x->kernel, L_ARG[i]);
    if (grp < 0) {
      rc = rd_error_set(err, RD_EINVAL, "xrt: learner kernel argument %d has no memory bank",
                        L_ARG[i]);
      goto fail;
    }
    x->bo[i] = xrtBOAlloc(x->device, n, XCL_BO_FLAGS_NONE, (xrtMemoryGroup)grp);
    x->map[i] = x->bo[i] ? xrtBOMap(x->bo[i]) : NULL;
    if (!x->map[i]) {
      rc = rd_error_set(err, RD_ENOMEM,
                        "xrt: cannot allocate the learner's %zu-byte buffer (argument %d) in "
                        "bank %d",
                        n, L_ARG[i], grp);
      goto fail;
    }
    memset(x->map[i], 0, n);
    x->bo_bytes[i] = n;
  }
  lrn_config_pack(c, (uint32_t *)x->map[RD_XRT_L_DESC], (double *)x->map[RD_XRT_L_HP]);
  /* Everything to the device once: the descriptor, the hyper-parameters,
   * and zeroed parameter blocks, workspace and moments. */
  for (int i = 0; i < RD_XRT_L_N_BO; i++)
    if ((rc = sync_range(x, i, XCL_BO_SYNC_BO_TO_DEVICE, 0, x->bo_bytes[i], err)) != RD_OK)
      goto fail;
  x->run = xrtRunOpen(x->kernel);
  if (!x->run) {
    rc = rd_error_set(err, RD_EINTERNAL, "xrt: cannot open a run of " LRN_KERNEL_NAME);
    goto fail;
  }
  x->timeout_ms = 30000; /* a step of the largest build is far longer than a replay request */
  return RD_OK;
fail:
  rd_fpga_xrt_learner_close(x);
  return rc;
}

static int check_block(const rd_fpga_xrt_learner_t *x, int which, size_t off, size_t n,
                       rd_error_t *err) {
  if (!x || !x->run) return rd_error_set(err, RD_EINVAL, "xrt: the learner is not open");
  if (which != RD_XRT_L_PARAMS && which != RD_XRT_L_TARGET && which != RD_XRT_L_ADAM_M &&
      which != RD_XRT_L_ADAM_V)
    return rd_error_set(err, RD_EINVAL, "xrt: buffer %d is not a parameter block", which);
  if (off > x->n_params || n > x->n_params - off)
    return rd_error_set(err, RD_EINVAL, "xrt: floats [%zu, %zu) outside a block of %zu", off,
                        off + n, x->n_params);
  return RD_OK;
}

int rd_fpga_xrt_learner_write(rd_fpga_xrt_learner_t *x, int which, const float *src, size_t off,
                              size_t n, rd_error_t *err) {
  int rc = check_block(x, which, off, n, err);
  if (rc) return rc;
  memcpy((float *)x->map[which] + off, src, n * sizeof(float));
  return sync_range(x, which, XCL_BO_SYNC_BO_TO_DEVICE, off * sizeof(float), n * sizeof(float),
                    err);
}

int rd_fpga_xrt_learner_read(rd_fpga_xrt_learner_t *x, int which, float *dst, size_t off,
                             size_t n, rd_error_t *err) {
  int rc = check_block(x, which, off, n, err);
  if (rc) return rc;
  rc = sync_range(x, which, XCL_BO_SYNC_BO_FROM_DEVICE, off * sizeof(float), n * sizeof(float),
                  err);
  if (rc) return rc;
  memcpy(dst, (const float *)x->map[which] + off, n * sizeof(float));
  return RD_OK;
}

/* Copy n bytes of src into buffer i and sync them to the device. */
static int put(rd_fpga_xrt_learner_t *x, int i, const void *src, size_t n, rd_error_t *err) {
  memcpy(x->map[i], src, n);
  return sync_range(x, i, XCL_BO_SYNC_BO_TO_DEVICE, 0, n, err);
}

int rd_fpga_xrt_learner_step(rd_fpga_xrt_learner_t *x, uint64_t step, uint32_t n,
                             const float *obs, const int32_t *action_i, const float *action_f,
                             const float *reward, const float *discount, const float *next_obs,
                             const float *weights, float *td_abs, double *stats,
                             rd_error_t *err) {
  if (!x || !x->run) return rd_error_set(err, RD_EINVAL, "xrt: the learner is not open");
  if (n == 0) return rd_error_set(err, RD_EINVAL, "xrt: a step of 0 rows");
  if (n > x->batch)
    return rd_error_set(err, RD_ETOOBIG, "xrt: %u rows, the learner's buffers hold %u", n,
                        x->batch);
  if (!obs || !reward || !discount || !next_obs || !stats ||
      (x->action_dim ? !action_f : !action_i))
    return rd_error_set(err, RD_EINVAL, "xrt: a step needs obs, %s, reward, discount, "
                        "next_obs and stats", x->action_dim ? "action_f" : "action_i");
  const size_t rows = n, ob = rows * x->obs_dim * sizeof(float), fb = rows * sizeof(float);
  int rc;
  /* Host -> device: the batch. */
  if ((rc = put(x, RD_XRT_L_OBS, obs, ob, err)) != RD_OK ||
      (rc = put(x, RD_XRT_L_NEXT_OBS, next_obs, ob, err)) != RD_OK ||
      (rc = put(x, RD_XRT_L_REWARD, reward, fb, err)) != RD_OK ||
      (rc = put(x, RD_XRT_L_DISCOUNT, discount, fb, err)) != RD_OK)
    return rc;
  if (x->action_dim)
    rc = put(x, RD_XRT_L_ACTION_F, action_f, fb * x->action_dim, err);
  else
    rc = put(x, RD_XRT_L_ACTION_I, action_i, rows * sizeof(int32_t), err);
  if (rc) return rc;
  if (weights) {
    rc = put(x, RD_XRT_L_WEIGHTS, weights, fb, err);
  } else { /* no IS weights: ones, as the kernel expects */
    float *w = x->map[RD_XRT_L_WEIGHTS];
    for (size_t i = 0; i < rows; i++) w[i] = 1.0f;
    rc = sync_range(x, RD_XRT_L_WEIGHTS, XCL_BO_SYNC_BO_TO_DEVICE, 0, fb, err);
  }
  if (rc) return rc;
  /* The sentinel no kernel writes (host_xrt.h). */
  double *st = x->map[RD_XRT_L_STATS];
  for (int k = 0; k < LRN_ST_COUNT; k++) st[k] = 0.0;
  st[LRN_ST_FAILED] = RD_XRT_LRN_UNWRITTEN;
  if ((rc = sync_range(x, RD_XRT_L_STATS, XCL_BO_SYNC_BO_TO_DEVICE, 0,
                       LRN_ST_COUNT * sizeof(double), err)) != RD_OK)
    return rc;
  /* Arguments in lrn_train_step's order: step is a 64-bit scalar (12
   * bytes of registers, xclbin_gen.h), n a 32-bit one. */
  int bad = 0;
  for (int i = 0; i < RD_XRT_L_N_BO && !bad; i++)
    bad = xrtRunSetArg(x->run, L_ARG[i], x->bo[i]) != 0;
  if (bad || xrtRunSetArg(x->run, 2, (uint64_t)step) != 0 || xrtRunSetArg(x->run, 3, n) != 0)
    return rd_error_set(err, RD_EINTERNAL,
                        "xrt: setting the learner kernel's arguments failed (%s)",
                        strerror(errno));
  if ((rc = rd_fpga_xrt_start_wait(x->run, x->timeout_ms, "the learner kernel", err)) != RD_OK)
    return rc;
  x->runs++;
  /* Device -> host: stats, then td_abs. */
  if ((rc = sync_range(x, RD_XRT_L_STATS, XCL_BO_SYNC_BO_FROM_DEVICE, 0,
                       LRN_ST_COUNT * sizeof(double), err)) != RD_OK)
    return rc;
  memcpy(stats, st, LRN_ST_COUNT * sizeof(double));
  if (stats[LRN_ST_FAILED] == RD_XRT_LRN_UNWRITTEN) {
    if (x->noop)
      return rd_error_set(err, RD_EINTERNAL,
                          "xrt: the learner step has no result: XRT's no-op shim "
                          "(XCL_EMULATION_MODE=noop) executes no kernel");
    return rd_error_set(err, RD_EINTERNAL,
                        "xrt: the learner kernel wrote no stats for a step of %u rows the host "
                        "had checked (it refused the step)", n);
  }
  if (td_abs) {
    if ((rc = sync_range(x, RD_XRT_L_TD_ABS, XCL_BO_SYNC_BO_FROM_DEVICE, 0, fb, err)) != RD_OK)
      return rc;
    memcpy(td_abs, x->map[RD_XRT_L_TD_ABS], fb);
  }
  return RD_OK;
}
