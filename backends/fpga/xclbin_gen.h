/* xclbin_gen.h - the FPGA kernels' argument lists, and a writer of the
 * metadata-only xclbin that XRT's no-op shim (XCL_EMULATION_MODE=noop)
 * loads, so the real host path (host_xrt.c) can run without a board or a
 * Vitis installation (shared/stack-notes.md, "XRT").
 *
 * The xclbin written here has no bitstream: an axlf header ("xclbin2")
 * and the four sections XRT reads to find a kernel and its arguments:
 * MEM_TOPOLOGY (one DDR bank), IP_LAYOUT (one compute unit per kernel,
 * AP_CTRL_HS), CONNECTIVITY (every pointer argument to that bank) and
 * EMBEDDED_METADATA (the XML description of each kernel's ports and
 * arguments: name, id, register offset, size, type). On a board, the
 * xclbin comes from v++ instead (kernels/build_xclbin.sh).
 *
 * Argument registers follow Vitis HLS's s_axilite layout: control at 0x00,
 * arguments from 0x10, a 32-bit scalar every 8 bytes, a 64-bit pointer or
 * scalar every 12 (0x10, 0x18, ..., 0x28, 0x34, ...).
 *
 * Built only with XRT (it needs XRT's <xclbin.h>).
 */
#ifndef RD_FPGA_XCLBIN_GEN_H
#define RD_FPGA_XCLBIN_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

typedef struct {
  const char *name;
  int pointer;       /* 1: a global memory pointer (m_axi); 0: a scalar */
  const char *type;  /* C type, informational ("uint", "ulong*") */
  const char *port;  /* m_axi bundle of a pointer ("M_AXI_GMEM0") */
  int wide;          /* a scalar: 1 for 64 bits (laid out as a pointer), 0 for 32 */
} rd_fpga_karg_t;

typedef struct {
  const char *name;  /* the HLS top function */
  uint32_t n_args;
  const rd_fpga_karg_t *args;
} rd_fpga_kernel_desc_t;

/* rmm_kernel (kernels/rmm.h): op, n, first, u64_in, pos_in, leaf_out,
 * info_out, in that order (argument ids 0..6). */
extern const rd_fpga_kernel_desc_t rd_fpga_rmm_kernel_desc;

/* lrn_train_step (kernels/learner.h), its 18 arguments in order, the
 * bundles of its m_axi pragmas (gmem0..gmem4), step a 64-bit scalar. */
extern const rd_fpga_kernel_desc_t rd_fpga_learner_kernel_desc;

/* Register offset of argument i under the layout above. */
uint32_t rd_fpga_karg_offset(const rd_fpga_kernel_desc_t *k, uint32_t i);

/* Write a metadata-only xclbin for n kernels (one compute unit each,
 * "NAME_1") to path. RD_EINVAL for a bad description, RD_ESTORE if the
 * file cannot be written (nothing is left behind then). */
int rd_fpga_xclbin_write(const char *path, const rd_fpga_kernel_desc_t *const *kernels, size_t n,
                         rd_error_t *err);

#endif
