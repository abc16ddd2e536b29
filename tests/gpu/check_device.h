/* check_device.h - how a device check starts: it names device 0, or it
 * says SKIP and exits with meson's skip status where no CUDA device is
 * usable (a machine without a GPU, where CI builds and runs the checks).
 * Header-only, for the CUDA checks. */
#ifndef RD_CHECK_DEVICE_H
#define RD_CHECK_DEVICE_H

#include <cuda_runtime.h>
#include <stdio.h>

#define CHECK_SKIP 77 /* meson's exit status of a skipped test */

/* 0 after printing "# device 0: NAME, sm_XY", or CHECK_SKIP after printing
 * "SKIP no usable CUDA device". */
static inline int check_device_or_skip(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIP no usable CUDA device\n");
    return CHECK_SKIP;
  }
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("# device 0: %s, sm_%d%d\n", p.name, p.major, p.minor);
  return 0;
}

#endif
