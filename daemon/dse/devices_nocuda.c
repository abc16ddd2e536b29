/* devices_nocuda.c - GPU discovery in a build without CUDA (meson option
 * `cuda` disabled, or nvcc/libcudart not found): there is none to do.
 * devices_cuda.c replaces this file when CUDA is built. */
#include <stdio.h>

#include "devices.h"

size_t rd_devices_probe_gpus(rd_device_t *out, size_t max, char *why, size_t len) {
  (void)out;
  (void)max;
  snprintf(why, len, "built without CUDA: no GPU discovery");
  return 0;
}
