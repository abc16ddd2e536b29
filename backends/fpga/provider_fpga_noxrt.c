/* provider_fpga_noxrt.c - the FPGA provider's XRT half in a build without
 * XRT (meson option xrt disabled, or libxrt_coreutil or its headers not
 * found; provider_fpga_xrt.h): no board discovery, and no XRT replay
 * module or learner to configure. provider_fpga_xrt.c replaces this file
 * when XRT is built. */
#include <stdio.h>

#include "provider_fpga.h"
#include "provider_fpga_xrt.h"

size_t rd_fpga_provider_discover(rd_device_t *out, size_t max, char *why, size_t len) {
  (void)out;
  (void)max;
  snprintf(why, len, "built without XRT: no FPGA discovery");
  return 0;
}

int rd_fpga_provider_xrt_built(void) { return 0; }

int rd_fpga_provider_xrt_configure(const char *path, uint32_t device,
                                   const rd_fpga_xclbin_shape_t *shape, rd_error_t *err) {
  (void)device;
  (void)shape;
  if (path == NULL) return RD_OK;
  return rd_error_set(err, RD_EINVAL, "built without XRT");
}

size_t rd_fpga_provider_xrt_rmm_memsize(uint32_t capacity, uint32_t fanout) {
  (void)capacity;
  (void)fanout;
  return 0;
}

const rd_rmm_ops_t *rd_fpga_provider_xrt_rmm_ops(void) { return NULL; }

const rd_learner_ops_t *rd_fpga_provider_xrt_learner_ops(void) { return NULL; }
