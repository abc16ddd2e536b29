/* provider_fpga_xrt.c - the FPGA provider's XRT half (provider_fpga_xrt.h):
 * board discovery through XRT's C API, and the XRT replay module
 * (rmm_xrt.h) and learner (learner_backend_xrt.h) it configures. Compiled
 * only when the build has XRT (daemon/meson.build, rd_fpga_xrt_enabled);
 * provider_fpga_noxrt.c otherwise. provider_fpga.h says what discovery
 * finds.
 *
 * XRT traps (shared/stack-notes.md), each handled before it bites:
 *  - with XILINX_XRT unset, xrtDeviceOpen aborts the process (an uncaught
 *    C++ exception): no XRT call is made then;
 *  - XCL_EMULATION_MODE=sw_emu/hw_emu need a Vitis installation and hang
 *    here: refused; only "noop" (XRT's no-op shim) and no emulation (boards)
 *    are probed;
 *  - without a board, xrtDeviceOpen(0) returns NULL (errno ENOENT) after
 *    XRT prints its own error banner: nothing is listed, and the reason is
 *    logged once by the caller;
 *  - the no-op shim opens every index (the same handle each time), so the
 *    count comes from the shim's xclProbe, and the no-op shim is one device.
 * The C API of XRT 2.13 has no device-information call; the HAL's
 * xclProbe and xclGetDeviceInfo2 (xrt.h) live in the shim library that
 * libxrt_coreutil loads at the first open, so they are looked up there at
 * run time (dlsym) and used when present. A board is named from
 * xclGetDeviceInfo2 (its shell name and DDR size). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xrt.h>
#include <xrt/xrt_device.h>

#include "learner_backend_xrt.h"
#include "provider_fpga.h"
#include "provider_fpga_xrt.h"
#include "rmm_xrt.h"

typedef unsigned (*probe_fn)(void);
typedef int (*info_fn)(xclDeviceHandle, struct xclDeviceInfo2 *);

static void fill_noop(rd_device_t *d) {
  snprintf(d->backend, sizeof d->backend, "xrt-noop");
  snprintf(d->isa, sizeof d->isa, "xrt-noop");
  snprintf(d->model, sizeof d->model, "XRT no-op shim");
  snprintf(d->name, sizeof d->name, "XRT no-op shim (XCL_EMULATION_MODE=noop), no board");
  snprintf(d->capabilities, sizeof d->capabilities, "none (no kernel executes)");
  snprintf(d->status, sizeof d->status,
           "unusable: XRT no-op shim (no board): the host path's calls succeed but no kernel "
           "executes, so no workload runs here; the fpga-csim setting runs the kernels in "
           "C-simulation");
}

static void fill_board(rd_device_t *d, info_fn info, xrtDeviceHandle h) {
  snprintf(d->backend, sizeof d->backend, "xrt");
  snprintf(d->isa, sizeof d->isa, "xrt");
  struct xclDeviceInfo2 di;
  memset(&di, 0, sizeof di);
  xclDeviceHandle x = xrtDeviceToXclDevice(h);
  if (info != NULL && x != NULL && info(x, &di) == 0 && di.mName[0] != '\0') {
    snprintf(d->model, sizeof d->model, "%.*s", (int)strnlen(di.mName, sizeof di.mName),
             di.mName);
    d->memory_bytes = (uint64_t)di.mDDRSize;
  } else {
    snprintf(d->model, sizeof d->model, "unknown FPGA board (no device info from XRT)");
  }
  snprintf(d->name, sizeof d->name, "%.100s, %.1f GiB", d->model,
           (double)d->memory_bytes / (double)(1ull << 30));
  /* Found, and nothing of replayd has ever run on a board: with an
   * xclbin configured (fpga-xclbin) what is mapped here runs its kernels
   * (provider_fpga.c), else the CPU runs it; the mapper's figures for it
   * are the model's either way. */
  rd_fpga_provider_board_text(rd_fpga_provider_xclbin(), d);
}

size_t rd_fpga_provider_discover(rd_device_t *out, size_t max, char *why, size_t len) {
  const char *root = getenv("XILINX_XRT");
  if (root == NULL || root[0] == '\0') {
    snprintf(why, len, "XILINX_XRT is not set (XRT would abort the process on a device "
             "open): not looking for FPGA boards");
    return 0;
  }
  const char *emu = getenv("XCL_EMULATION_MODE");
  int noop = emu != NULL && strcmp(emu, "noop") == 0;
  if (emu != NULL && emu[0] != '\0' && !noop) {
    snprintf(why, len, "XCL_EMULATION_MODE=%.20s needs Vitis, which this machine lacks: not "
             "looking for FPGA boards", emu);
    return 0;
  }
  if (max == 0) {
    snprintf(why, len, "no room in the device list for an FPGA");
    return 0;
  }
  errno = 0;
  xrtDeviceHandle first = xrtDeviceOpen(0);
  if (first == NULL) {
    snprintf(why, len, "XRT opens no FPGA board (xrtDeviceOpen(0): %s)",
             strerror(errno ? errno : ENOENT));
    return 0;
  }
  probe_fn probe = (probe_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "xclProbe");
  info_fn info = (info_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "xclGetDeviceInfo2");
  size_t count = noop ? 1 : probe != NULL ? probe() : 1;
  if (count == 0) count = 1; /* device 0 opened */
  size_t n = 0;
  for (size_t i = 0; i < count && n < max; i++) {
    xrtDeviceHandle h = i == 0 ? first : xrtDeviceOpen((unsigned)i);
    if (h == NULL) continue; /* gone or broken since the probe: skip it */
    rd_device_t *d = &out[n];
    memset(d, 0, sizeof *d);
    snprintf(d->kind, sizeof d->kind, "fpga");
    /* XRT's own index: what xrtDeviceOpen, the XRT replay module and the
     * XRT learner open for this entry (provider_fpga.c passes it on). */
    d->index = (uint32_t)i;
    if (noop)
      fill_noop(d);
    else
      fill_board(d, info, h);
    rd_device_fingerprint(d);
    xrtDeviceClose(h);
    n++;
  }
  if (n == 0) snprintf(why, len, "XRT lists %zu FPGA boards but opens none", count);
  return n;
}

/* ---- The XRT replay module and learner ---- */

int rd_fpga_provider_xrt_built(void) { return 1; }

int rd_fpga_provider_xrt_configure(const char *path, uint32_t device,
                                   const rd_fpga_xclbin_shape_t *shape, rd_error_t *err) {
  if (path == NULL) {
    rd_fpga_xrt_rmm_configure(NULL, NULL);
    rd_learner_fpga_xrt_configure(NULL, NULL);
    return RD_OK;
  }
  rd_fpga_xrt_rmm_params_t p;
  rd_fpga_xrt_rmm_params_default(&p);
  if (strlen(path) >= sizeof p.xclbin)
    return rd_error_set(err, RD_EINVAL, "fpga-xclbin: the path is longer than %zu bytes",
                        sizeof p.xclbin - 1);
  snprintf(p.xclbin, sizeof p.xclbin, "%s", path);
  p.device = device;
  p.k = shape->k;
  p.capacity = shape->n;
  p.max_batch = shape->batch;
  p.max_leaf = rd_fpga_xclbin_max_leaf(shape);
  rd_error_t e;
  rd_error_clear(&e);
  int rc = rd_fpga_xrt_rmm_configure(&p, &e);
  if (rc == RD_OK && (rc = rd_learner_fpga_xrt_configure(path, &e)) != RD_OK)
    rd_fpga_xrt_rmm_configure(NULL, NULL);
  if (rc) return rd_error_set(err, rc, "fpga-xclbin-shape/fpga-xclbin: %s", e.msg);
  return RD_OK;
}

size_t rd_fpga_provider_xrt_rmm_memsize(uint32_t capacity, uint32_t fanout) {
  return rd_fpga_xrt_rmm_ops.memsize(capacity, fanout);
}

const rd_rmm_ops_t *rd_fpga_provider_xrt_rmm_ops(void) { return &rd_fpga_xrt_rmm_ops; }

const rd_learner_ops_t *rd_fpga_provider_xrt_learner_ops(void) { return &rd_learner_ops_fpga_xrt; }
