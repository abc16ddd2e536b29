/* devices_fpga.c - FPGAs: the C-simulation device and the XRT probe's
 * entry (devices.h).
 *
 * Boards are found through XRT only in a build with XRT (meson option
 * `xrt`, RD_FPGA_XRT=1): devices_xrt.c, the one daemon file that includes
 * an XRT header. The C-simulation FPGA needs no XRT: it is this process
 * running the kernels' C code (backends/fpga/kernels, csim_rmm.h), modelled
 * as a part file's FPGA, added when the `fpga-csim` setting names a part. */
#include <stdio.h>
#include <string.h>

#include "devices.h"
#include "model.h"

#ifndef RD_FPGA_XRT
#define RD_FPGA_XRT 0
#endif

#if RD_FPGA_XRT
size_t rd_devices_probe_xrt(rd_device_t *out, size_t max, char *why, size_t len);
#endif

size_t rd_devices_probe_fpgas(rd_device_t *out, size_t max, char *why, size_t len) {
#if RD_FPGA_XRT
  return rd_devices_probe_xrt(out, max, why, len);
#else
  (void)out;
  (void)max;
  snprintf(why, len, "built without XRT: no FPGA discovery");
  return 0;
#endif
}

/* What an XRT board runs, and how far that is verified; keep it true.
 * With an xclbin, placement runs the replay module and the learner mapped
 * to the board through its kernels (placement.h); nothing of replayd has
 * run on a board, so the status says so either way. */
void rd_devices_xrt_board_text(int xclbin, rd_device_t *d) {
  if (xclbin) {
    snprintf(d->capabilities, sizeof d->capabilities, "rmm,learner: XRT (fpga-xclbin)");
    snprintf(d->status, sizeof d->status,
             "ok (XRT board): the replay module and learner mapped here run the kernels of "
             "the fpga-xclbin setting; replayd has never run on a board");
  } else {
    snprintf(d->capabilities, sizeof d->capabilities, "none (no xclbin: model only)");
    snprintf(d->status, sizeof d->status,
             "ok (XRT board); no xclbin configured (the fpga-xclbin setting), so nothing runs "
             "on it; replayd has never run on a board");
  }
}

/* What a C-simulation runs and how far it is verified; keep it true. */
#define RD_CSIM_CAPABILITIES "rmm,storage(host memory),learner: C-simulation"

int rd_devices_fpga_csim(const char *part, const char *parts_dir, uint32_t index,
                         rd_device_t *out, rd_error_t *err) {
  if (part == NULL || part[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "fpga-csim: no part named");
  rd_fpga_part_t p;
  int rc = rd_fpga_part_find(part, parts_dir, &p, err);
  if (rc) return rc;
  rd_device_t *d = out;
  memset(d, 0, sizeof *d);
  snprintf(d->kind, sizeof d->kind, "fpga");
  snprintf(d->backend, sizeof d->backend, "csim");
  snprintf(d->isa, sizeof d->isa, "csim");
  snprintf(d->model, sizeof d->model, "%s", p.name);
  d->index = index;
  d->cores = p.slrs;
  d->memory_bytes = 0; /* its storage is this host's memory */
  snprintf(d->capabilities, sizeof d->capabilities, "%s", RD_CSIM_CAPABILITIES);
  snprintf(d->name, sizeof d->name, "%.40s C-simulation (no board), %u SLRs, %u MHz",
           p.name, p.slrs, p.clock_mhz);
  snprintf(d->status, sizeof d->status,
           "ok: C-simulation (no board): the replay kernel's C code runs in the daemon; "
           "figures for %.40s (%.60s) are the model's, never measured on an FPGA",
           p.name, p.device);
  rd_device_fingerprint(d);
  return RD_OK;
}
