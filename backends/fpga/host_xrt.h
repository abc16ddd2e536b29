/* host_xrt.h - the FPGA backend's host path over XRT's native C API
 * (papers/001 §V-B: the processing unit's host thread moves the batch to the
 * device and back; the paper used OpenCL, issue 7 asks for XRT's C API):
 * open a device, load an xclbin, open the replay kernel (rmm_kernel,
 * kernels/rmm.h), and run one request: copy the inputs into device buffers,
 * sync them, set the arguments, start, wait, sync the outputs back.
 *
 * WHAT RUNS HERE: only against XRT's no-op shim (XCL_EMULATION_MODE=noop,
 * XILINX_XRT pointing at a folder whose lib is the multiarch lib dir; see
 * shared/stack-notes.md): every XRT call of the path is made and checked,
 * but no kernel executes, so the outputs are whatever the buffers held
 * (this code zeroes them first). tests/test_fpga_xrt.c runs it so, with an
 * xclbin from xclbin_gen.c. Never run against a board.
 *
 * Not thread-safe: one host thread per handle (the RMM processing unit's).
 * Built only with XRT (meson option xrt).
 */
#ifndef RD_FPGA_HOST_XRT_H
#define RD_FPGA_HOST_XRT_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

/* rmm_kernel's arguments: 0 op, 1 n, 2 first, 3 u64_in, 4 pos_in,
 * 5 leaf_out, 6 info_out (xclbin_gen.c's rd_fpga_rmm_kernel_desc). */
enum { RD_XRT_BO_U64_IN, RD_XRT_BO_POS_IN, RD_XRT_BO_LEAF_OUT, RD_XRT_BO_INFO_OUT, RD_XRT_N_BO };

typedef struct {
  void *device;  /* xrtDeviceHandle */
  void *kernel;  /* xrtKernelHandle */
  void *run;     /* xrtRunHandle, reused per request */
  void *bo[RD_XRT_N_BO];
  void *map[RD_XRT_N_BO];
  size_t bo_bytes[RD_XRT_N_BO];
  uint32_t max_batch;
  unsigned timeout_ms;
} rd_fpga_xrt_rmm_t;

/* Open device `index`, load `xclbin` and open its rmm_kernel with buffers
 * for batches of up to max_batch items (u64 in, u32 positions and leaves,
 * 3 info words), each in the memory bank its argument is connected to.
 * Errors (nothing is left open): RD_ENOTFOUND no such device (or XRT not
 * set up: XILINX_XRT unset makes XRT abort the process, so this refuses to
 * call it then) or no rmm_kernel in the xclbin; RD_EINVAL a bad argument
 * or an xclbin XRT refuses; RD_ENOMEM a buffer XRT cannot allocate. */
int rd_fpga_xrt_rmm_open(rd_fpga_xrt_rmm_t *x, unsigned index, const char *xclbin,
                         uint32_t max_batch, rd_error_t *err);

/* One request (op codes of kernels/rmm.h); inputs n items, outputs n
 * leaves (RMM_OP_SAMPLE) and info[3] (status, total, cycles) as the kernel
 * wrote them. RD_ETOOBIG if n > max_batch; RD_ETIMEDOUT if the run did not
 * complete within timeout_ms (default 5000); RD_EINTERNAL if XRT fails a
 * sync or the run ends in another state. */
int rd_fpga_xrt_rmm_call(rd_fpga_xrt_rmm_t *x, uint32_t op, uint32_t n, uint32_t first,
                         const uint64_t *u64_in, const uint32_t *pos_in, uint32_t *leaf_out,
                         uint64_t info[3], rd_error_t *err);

void rd_fpga_xrt_rmm_close(rd_fpga_xrt_rmm_t *x);

#endif
