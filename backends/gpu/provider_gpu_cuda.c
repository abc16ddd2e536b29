/* provider_gpu_cuda.c - GPU discovery through the CUDA runtime, for the GPU
 * provider (provider_gpu.h). Compiled only when the build has CUDA
 * (daemon/meson.build); provider_gpu_nocuda.c stands in otherwise.
 *
 * Only the runtime's query calls: cudaGetDeviceCount and
 * cudaGetDeviceProperties initialise the driver but create no context, so
 * a daemon that never uses a GPU holds no GPU memory. Without a driver or
 * a device, cudaGetDeviceCount fails (cudaErrorInsufficientDriver or
 * cudaErrorNoDevice) and nothing is listed. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "provider_gpu.h"

/* What this build runs on a GPU, and what has been checked on one (the
 * device checks of bench/gpu.sh; docs/benchmarks.md says where and when). */
#define RD_GPU_CAPABILITIES "learner,sumtree,storage"
#define RD_GPU_VERIFIED                                                                    \
  "the learner, sum tree and storage pass their device checks (bench/gpu.sh) on an H100 and an H200"

size_t rd_gpu_provider_discover(rd_device_t *out, size_t max, char *why, size_t len) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(why, len, "no usable CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    return 0;
  }
  if (count <= 0) {
    snprintf(why, len, "the CUDA runtime sees no device");
    return 0;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  size_t n = 0;
  for (int i = 0; i < count && n < max; i++) {
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue; /* gone or broken: skip it */
    rd_device_t *d = &out[n];
    memset(d, 0, sizeof *d);
    snprintf(d->kind, sizeof d->kind, "gpu");
    snprintf(d->backend, sizeof d->backend, "cuda");
    snprintf(d->model, sizeof d->model, "%.100s", p.name);
    d->index = (uint32_t)i;
    d->cores = (uint32_t)p.multiProcessorCount;
    d->memory_bytes = (uint64_t)p.totalGlobalMem;
    d->l2_bytes = p.l2CacheSize > 0 ? (uint64_t)p.l2CacheSize : 0;
    snprintf(d->isa, sizeof d->isa, "sm_%d%d", p.major % 100, p.minor % 100);
    /* What the daemon runs here, each with how far it is verified. The
     * learner (learner_backend_gpu.c) trains workloads mapped to the GPU;
     * the sum tree is run by the GPU profiler (profile_gpu.c) and, where
     * the build has it, the GPU replay module (rmm_gpu.h).
     * RD_GPU_VERIFIED says where each was ever run: keep it true. */
    snprintf(d->capabilities, sizeof d->capabilities, "%s", RD_GPU_CAPABILITIES);
    snprintf(d->status, sizeof d->status, "ok (driver %d.%d, runtime %d.%d); %s",
             driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
             RD_GPU_VERIFIED);
    snprintf(d->name, sizeof d->name, "%.100s, %u SMs, %.1f GiB, %s", d->model, d->cores,
             (double)d->memory_bytes / (double)(1ull << 30), d->isa);
    rd_device_fingerprint(d);
    n++;
  }
  if (n == 0) snprintf(why, len, "cudaGetDeviceProperties failed on all %d devices", count);
  return n;
}
