/* provider_gpu.h - the GPU's device provider (daemon/dse/provider.h:
 * rd_provider_gpu, provider_gpu.c) and the halves meson picks for it.
 *
 * provider_gpu.c is built everywhere: the GPU row from stored, imported or
 * assumed profiles (a plan for a GPU box can be made on a machine without
 * one), the bind of a mapping to a present GPU and the note's words. Its
 * device-specific half is built only with the GPU backend (meson option
 * `cuda`, rd_gpu_enabled): discovery (provider_gpu_cuda.c), the profiler
 * (profile_gpu.c), the learner backend (learner_backend_gpu.c) and the
 * replay module (rmm_gpu.h). Without it provider_gpu_nocuda.c answers for
 * all of them: no GPU is listed, the profiler and the learner refuse with
 * "built without CUDA", and so does the replay module.
 *
 * What has run on a GPU and what not: docs/architecture.md. */
#ifndef RD_PROVIDER_GPU_H
#define RD_PROVIDER_GPU_H

#include <stddef.h>

#include "devices.h"

/* GPUs through the CUDA runtime (provider_gpu_cuda.c), or none when built
 * without CUDA. Fills up to max devices and returns the count; when it
 * returns 0, why (len bytes) says why, for the log. Only the runtime's
 * query calls: no context is created, no GPU memory held. */
size_t rd_gpu_provider_discover(rd_device_t *out, size_t max, char *why, size_t len);

#endif
