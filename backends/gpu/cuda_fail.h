/* cuda_fail.h - one mapping of a CUDA runtime error to an RD_E* code, for
 * every CUDA source of the GPU backend (the sum tree, the storage, the
 * learner), so that a caller tells the same failures apart the same way.
 *
 * Out of memory is RD_ENOMEM; no usable device (no driver, too old a
 * driver, no such device) RD_EINVAL; anything else (a launch, a copy, a
 * lost device) RD_EINTERNAL, the device's failure. The message names what
 * failed and CUDA's own words for why. */
#ifndef RD_CUDA_FAIL_H
#define RD_CUDA_FAIL_H

#include <cuda_runtime.h>

#include "rd_error.h"

static inline int rd_cuda_fail(rd_error_t *err, cudaError_t e, const char *what) {
  int code = RD_EINTERNAL;
  const char *why = "";
  switch (e) {
  case cudaErrorMemoryAllocation: code = RD_ENOMEM; why = "out of device or pinned memory: "; break;
  case cudaErrorInsufficientDriver:
    code = RD_EINVAL;
    why = "no usable CUDA device (no driver, or a driver older than this CUDA runtime): ";
    break;
  case cudaErrorNoDevice:
  case cudaErrorInvalidDevice:
  case cudaErrorDevicesUnavailable:
    code = RD_EINVAL;
    why = "no usable CUDA device: ";
    break;
  default: break;
  }
  return rd_error_set(err, code, "%s%s: %s (%s)", why, what, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

/* Return fail(err, status, what) from the calling function when call's
 * status of type T is not ok (the caller has an rd_error_t *err in scope). */
#define RD_CK_STATUS(T, call, ok, fail, what)                                                 \
  do {                                                                                       \
    T s_ = (call);                                                                           \
    if (s_ != (ok)) return fail(err, s_, what);                                              \
  } while (0)

/* The same for a CUDA runtime call, through rd_cuda_fail. */
#define RD_CUDA_CK(call, what) RD_CK_STATUS(cudaError_t, call, cudaSuccess, rd_cuda_fail, what)

#endif
