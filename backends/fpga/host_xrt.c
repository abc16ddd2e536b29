/* host_xrt.c - the replay kernel's host path over XRT's C API, and the
 * environment check and kernel open both handles share (see host_xrt.h;
 * only ever run against XRT's no-op shim). */
#include "host_xrt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#define RMM_KERNEL_NAME "rmm_kernel"
#define MAX_BATCH_LIMIT (1u << 24)

/* Kernel argument id of each buffer. */
static const int BO_ARG[RD_XRT_N_BO] = {3, 4, 5, 6};

void rd_fpga_xrt_close_handles(void *device, void *kernel, void *run, void *const *bo, int n_bo) {
  if (run) xrtRunClose(run);
  for (int i = 0; i < n_bo; i++)
    if (bo[i]) xrtBOFree(bo[i]);
  if (kernel) xrtKernelClose(kernel);
  if (device) xrtDeviceClose(device);
}

void rd_fpga_xrt_rmm_close(rd_fpga_xrt_rmm_t *x) {
  if (!x) return;
  rd_fpga_xrt_close_handles(x->device, x->kernel, x->run, x->bo, RD_XRT_N_BO);
  memset(x, 0, sizeof *x);
}

int rd_fpga_xrt_env(int *noop, rd_error_t *err) {
  *noop = 0;
  /* Without XILINX_XRT, xrtDeviceOpen aborts the process (an uncaught C++
   * exception, shared/stack-notes.md): refuse instead. */
  const char *root = getenv("XILINX_XRT");
  if (!root || !*root)
    return rd_error_set(err, RD_ENOTFOUND,
                        "xrt: XILINX_XRT is not set (point it at a folder whose lib is XRT's "
                        "library directory); not opening FPGA devices");
  const char *emu = getenv("XCL_EMULATION_MODE");
  if (emu && *emu) {
    if (strcmp(emu, "noop") != 0)
      return rd_error_set(err, RD_EINVAL,
                          "xrt: XCL_EMULATION_MODE=%.20s needs a Vitis installation (it hangs "
                          "without one); only noop or a board are supported", emu);
    *noop = 1;
  }
  return RD_OK;
}

int rd_fpga_xrt_start_wait(void *run, unsigned timeout_ms, const char *kernel, rd_error_t *err) {
  if (xrtRunStart(run) != 0)
    return rd_error_set(err, RD_EINTERNAL, "xrt: starting %s failed (%s)", kernel,
                        strerror(errno));
  enum ert_cmd_state s = xrtRunWaitFor(run, timeout_ms);
  if (s == ERT_CMD_STATE_COMPLETED) return RD_OK;
  if (s == ERT_CMD_STATE_TIMEOUT || s == ERT_CMD_STATE_NEW || s == ERT_CMD_STATE_QUEUED ||
      s == ERT_CMD_STATE_RUNNING)
    return rd_error_set(err, RD_ETIMEDOUT, "xrt: %s did not complete in %u ms", kernel,
                        timeout_ms);
  return rd_error_set(err, RD_EINTERNAL, "xrt: %s's run ended in state %d", kernel, (int)s);
}

int rd_fpga_xrt_open_kernel(unsigned index, const char *xclbin, const char *name, void **device,
                            void **kernel, int *noop, rd_error_t *err) {
  *device = *kernel = NULL;
  int rc = rd_fpga_xrt_env(noop, err);
  if (rc) return rc;
  struct stat st;
  if (stat(xclbin, &st) != 0)
    return rd_error_set(err, RD_ENOTFOUND, "xrt: xclbin %s: %s", xclbin, strerror(errno));
  errno = 0;
  xrtDeviceHandle dev = xrtDeviceOpen(index);
  if (!dev)
    return rd_error_set(err, RD_ENOTFOUND, "xrt: no FPGA device %u (%s)", index,
                        strerror(errno ? errno : ENOENT));
  if (xrtDeviceLoadXclbinFile(dev, xclbin) != 0) {
    rc = rd_error_set(err, RD_EINVAL, "xrt: the device refused xclbin %s (%s)", xclbin,
                      strerror(errno));
    goto fail;
  }
  xuid_t uuid;
  if (xrtDeviceGetXclbinUUID(dev, uuid) != 0) {
    rc = rd_error_set(err, RD_EINVAL, "xrt: no xclbin UUID after loading %s", xclbin);
    goto fail;
  }
  xrtKernelHandle k = xrtPLKernelOpen(dev, uuid, name);
  if (!k) {
    rc = rd_error_set(err, RD_ENOTFOUND, "xrt: xclbin %s has no kernel %s (%s)", xclbin, name,
                      strerror(errno));
    goto fail;
  }
  *device = dev;
  *kernel = k;
  return RD_OK;
fail:
  xrtDeviceClose(dev);
  return rc;
}

int rd_fpga_xrt_rmm_open(rd_fpga_xrt_rmm_t *x, unsigned index, const char *xclbin,
                         uint32_t max_batch, rd_error_t *err) {
  if (!x || !xclbin) return rd_error_set(err, RD_EINVAL, "xrt: handle and xclbin path needed");
  memset(x, 0, sizeof *x);
  if (max_batch == 0 || max_batch > MAX_BATCH_LIMIT)
    return rd_error_set(err, RD_EINVAL, "xrt: max_batch %u outside [1, %u]", max_batch,
                        MAX_BATCH_LIMIT);
  int rc = rd_fpga_xrt_open_kernel(index, xclbin, RMM_KERNEL_NAME, &x->device, &x->kernel,
                                   &x->noop, err);
  if (rc) return rc;
  const size_t bytes[RD_XRT_N_BO] = {(size_t)max_batch * 8, (size_t)max_batch * 4,
                                     (size_t)max_batch * 4, 3 * 8};
  for (int i = 0; i < RD_XRT_N_BO; i++) {
    int grp = xrtKernelArgGroupId(x->kernel, BO_ARG[i]);
    if (grp < 0) {
      rc = rd_error_set(err, RD_EINVAL, "xrt: kernel argument %d has no memory bank", BO_ARG[i]);
      goto fail;
    }
    x->bo[i] = xrtBOAlloc(x->device, bytes[i], XCL_BO_FLAGS_NONE, (xrtMemoryGroup)grp);
    x->map[i] = x->bo[i] ? xrtBOMap(x->bo[i]) : NULL;
    if (!x->map[i]) {
      rc = rd_error_set(err, RD_ENOMEM, "xrt: cannot allocate a %zu-byte buffer in bank %d",
                        bytes[i], grp);
      goto fail;
    }
    memset(x->map[i], 0, bytes[i]);
    x->bo_bytes[i] = bytes[i];
  }
  x->run = xrtRunOpen(x->kernel);
  if (!x->run) {
    rc = rd_error_set(err, RD_EINTERNAL, "xrt: cannot open a run of " RMM_KERNEL_NAME);
    goto fail;
  }
  x->max_batch = max_batch;
  x->timeout_ms = 5000;
  return RD_OK;
fail:
  rd_fpga_xrt_rmm_close(x);
  return rc;
}

static int sync_bo(rd_fpga_xrt_rmm_t *x, int i, enum xclBOSyncDirection dir, size_t n,
                   rd_error_t *err) {
  if (n == 0) return RD_OK;
  if (xrtBOSync(x->bo[i], dir, n, 0) != 0)
    return rd_error_set(err, RD_EINTERNAL, "xrt: buffer sync failed (%s)", strerror(errno));
  return RD_OK;
}

int rd_fpga_xrt_rmm_call(rd_fpga_xrt_rmm_t *x, uint32_t op, uint32_t n, uint32_t first,
                         const uint64_t *u64_in, const uint32_t *pos_in, uint32_t *leaf_out,
                         uint64_t info[3], rd_error_t *err) {
  if (!x || !x->run) return rd_error_set(err, RD_EINVAL, "xrt: the device is not open");
  if (n > x->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "xrt: %u items, buffers hold %u", n, x->max_batch);
  int rc;
  /* Host -> device: the request's inputs. */
  if (u64_in) memcpy(x->map[RD_XRT_BO_U64_IN], u64_in, (size_t)n * 8);
  if (pos_in) memcpy(x->map[RD_XRT_BO_POS_IN], pos_in, (size_t)n * 4);
  /* The status word no kernel writes: still there after the run means no
   * kernel ran (host_xrt.h). */
  const uint64_t unwritten[3] = {RD_XRT_RMM_UNWRITTEN, 0, 0};
  memcpy(x->map[RD_XRT_BO_INFO_OUT], unwritten, sizeof unwritten);
  if ((rc = sync_bo(x, RD_XRT_BO_U64_IN, XCL_BO_SYNC_BO_TO_DEVICE, u64_in ? (size_t)n * 8 : 0,
                    err)) != RD_OK ||
      (rc = sync_bo(x, RD_XRT_BO_POS_IN, XCL_BO_SYNC_BO_TO_DEVICE, pos_in ? (size_t)n * 4 : 0,
                    err)) != RD_OK ||
      (rc = sync_bo(x, RD_XRT_BO_INFO_OUT, XCL_BO_SYNC_BO_TO_DEVICE, 3 * 8, err)) != RD_OK)
    return rc;
  /* Arguments, in rmm_kernel's order; start; wait. */
  if (xrtRunSetArg(x->run, 0, op) != 0 || xrtRunSetArg(x->run, 1, n) != 0 ||
      xrtRunSetArg(x->run, 2, first) != 0 ||
      xrtRunSetArg(x->run, 3, x->bo[RD_XRT_BO_U64_IN]) != 0 ||
      xrtRunSetArg(x->run, 4, x->bo[RD_XRT_BO_POS_IN]) != 0 ||
      xrtRunSetArg(x->run, 5, x->bo[RD_XRT_BO_LEAF_OUT]) != 0 ||
      xrtRunSetArg(x->run, 6, x->bo[RD_XRT_BO_INFO_OUT]) != 0)
    return rd_error_set(err, RD_EINTERNAL, "xrt: setting the kernel's arguments failed (%s)",
                        strerror(errno));
  if ((rc = rd_fpga_xrt_start_wait(x->run, x->timeout_ms, "the kernel", err)) != RD_OK)
    return rc;
  /* Device -> host: the outputs. */
  if ((rc = sync_bo(x, RD_XRT_BO_LEAF_OUT, XCL_BO_SYNC_BO_FROM_DEVICE,
                    leaf_out ? (size_t)n * 4 : 0, err)) != RD_OK ||
      (rc = sync_bo(x, RD_XRT_BO_INFO_OUT, XCL_BO_SYNC_BO_FROM_DEVICE, 3 * 8, err)) != RD_OK)
    return rc;
  if (leaf_out) memcpy(leaf_out, x->map[RD_XRT_BO_LEAF_OUT], (size_t)n * 4);
  memcpy(info, x->map[RD_XRT_BO_INFO_OUT], 3 * 8);
  return RD_OK;
}
