/* devices_fpga.c - FPGA discovery through XRT: the hook.
 *
 * This build has no XRT dependency yet (backends/fpga holds only the
 * performance model), so there is nothing to discover. When the XRT host
 * code lands, this becomes the XRT-only file (like devices_cuda.c, picked
 * by meson): xrtDeviceOpen per index until it returns NULL (errno ENOENT:
 * no more boards; it prints a banner and must not abort - see
 * shared/stack-notes.md on XILINX_XRT), the board's name and DDR/HBM size
 * from its xclbin-independent info, fingerprint as rd_device_fingerprint
 * does for "fpga". */
#include <stdio.h>

#include "devices.h"

size_t rd_devices_probe_fpgas(rd_device_t *out, size_t max, char *why, size_t len) {
  (void)out;
  (void)max;
  snprintf(why, len, "built without XRT: no FPGA discovery");
  return 0;
}
