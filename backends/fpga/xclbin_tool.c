/* replayd-fpga-xclbin - write the metadata-only xclbin of the replay and
 * learner kernels (xclbin_gen.h) for XRT's no-op shim:
 *   replayd-fpga-xclbin OUT.xclbin
 * Not a hardware image: it has no bitstream (see kernels/build_xclbin.sh). */
#include <stdio.h>

#include "xclbin_gen.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.xclbin\n", argv[0]);
    return 2;
  }
  const rd_fpga_kernel_desc_t *k[2] = {&rd_fpga_rmm_kernel_desc, &rd_fpga_learner_kernel_desc};
  rd_error_t err;
  if (rd_fpga_xclbin_write(argv[1], k, 2, &err) != RD_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  return 0;
}
