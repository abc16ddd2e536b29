/* learner_backend_xrt.h - the FPGA learner over XRT (learner_backend.h's
 * interface): the learner kernel lrn_train_step run through XRT's C API
 * (backends/fpga/host_xrt.h), on the XRT device whose index is the
 * backend's device ordinal, from the xclbin the daemon configured.
 *
 * WHAT RUNS HERE: only XRT's no-op shim (XCL_EMULATION_MODE=noop). init
 * runs the whole host path (device, xclbin, kernel, every buffer; the
 * initial weights, rd_learner_init's for the seed, written to the device)
 * and succeeds; a step runs the whole path too (batch in, 18 arguments,
 * start, wait, stats back) and then fails with RD_EINTERNAL and
 * RD_LEARNER_FAULT_DEVICE, because no kernel executed and the step has no
 * result. No FPGA board has ever run it. The C-simulation backend
 * (rd_learner_ops_fpga) is the one that trains.
 *
 * Fault classification (learner_backend.h), as the C-simulation backend:
 * an invalid config or batch is the caller's (fault 0); a config beyond
 * the kernel build's limits is RD_EINVAL with RD_LEARNER_FAULT_UNSUPPORTED;
 * a non-finite loss or gradient norm the kernel reports is RD_ERANGE
 * (fault 0). Everything of the device is RD_LEARNER_FAULT_DEVICE: no
 * xclbin configured, XILINX_XRT unset, no device, an xclbin XRT refuses or
 * without lrn_train_step, a buffer XRT cannot allocate, a failed sync or
 * run, a timeout, and a step whose stats no kernel wrote (the no-op shim;
 * on a board, a kernel that refused a step the host had checked).
 *
 * Built only with XRT (daemon/meson.build). Not thread-safe per backend
 * (learner_backend.h); configure is for startup. */
#ifndef RD_LEARNER_BACKEND_XRT_H
#define RD_LEARNER_BACKEND_XRT_H

#include "host_xrt.h"
#include "learner_backend.h"
#include "rd_error.h"

extern const rd_learner_ops_t rd_learner_ops_fpga_xrt; /* name "fpga-xrt", kind FPGA */

/* The xclbin (with lrn_train_step) every later init loads, copied. NULL or
 * "" clears it (init then fails: fault DEVICE). RD_EINVAL if the path does
 * not fit PATH_MAX. */
int rd_learner_fpga_xrt_configure(const char *xclbin, rd_error_t *err);

/* The host path under a backend of rd_learner_ops_fpga_xrt (its buffers'
 * maps, its run count), for tests; NULL for another backend. */
const rd_fpga_xrt_learner_t *rd_learner_fpga_xrt_host(const rd_learner_backend_t *b);

#endif
