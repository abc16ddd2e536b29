/* rmm_xrt.h - the FPGA replay module over XRT, as a table's replay module
 * (backends/cpu/table.h, rd_rmm_ops_t): every leaf write and descent is a
 * request to rmm_kernel (kernels/rmm.h) through the host path of
 * host_xrt.h.
 *
 * WHAT RUNS HERE: only XRT's no-op shim (XCL_EMULATION_MODE=noop). Every
 * XRT call of every request is made and checked, but no kernel executes:
 * inserts and updates go through and are counted as unverified (the host
 * keeps the truth, below), and a sample fails with RD_EINTERNAL after its
 * first request's whole XRT path, because no kernel computed its leaves.
 * No FPGA board has ever run this module. tests/test_fpga_xrt_ops.c runs
 * it against the shim.
 *
 * The kernel build. rmm_kernel keeps ONE tree on chip (a static rmm_state
 * of compile-time shape: fanout K, N leaves, RMM_MAX_BATCH, RMM_MAX_LEAF;
 * kernels/build_xclbin.sh), and the xclbin does not say that shape, so the
 * daemon states it (rd_fpga_xrt_rmm_configure; by default rmm.h's default
 * build). Consequences: a device holds one module at a time (a second
 * create on it is RD_EBUSY); a table runs on it if its fanout is K, its
 * capacity at most N (leaves [capacity, N) stay zero: create resets the
 * tree) and its leaf bound at most the build's (a table below N items has
 * a larger bound than rmm.h's default RMM_MAX_LEAF: the build must raise
 * it, as csim_rmm_shape.c does).
 *
 * The host shadow. The kernel has no operation that reads one leaf, and
 * the table's contract needs leaf(pos) and total(); the host wrote every
 * leaf, so it keeps a copy of them (capacity u64s, counted by memsize) and
 * their sum. leaf() and total() answer from it without a device round
 * trip. On a board the kernel returns its total after every request
 * (info_out[1]) and the module checks it against the shadow's, and checks
 * every sampled leaf (inside the table, non-zero in the shadow).
 *
 * Requests. Every operation is split into requests of at most the
 * buffers' batch (the configured max_batch, at most the build's
 * RMM_MAX_BATCH), inserts too (their input buffer is that size). A whole
 * call is validated first (positions, leaves, targets below the total), so
 * a bad call makes no request and changes nothing. Updates go by position
 * (RMM_OP_UPDATE), as in csim_rmm.c.
 *
 * Device failures (an XRT call fails, a run times out, the kernel answers
 * a checked request with an error status or a total other than the
 * shadow's) are RD_EINTERNAL or RD_ETIMEDOUT with XRT's reason; the
 * module is then broken (earlier requests of the call may have been
 * applied) and refuses every later call with RD_EINTERNAL.
 *
 * Built only with XRT (meson option xrt). Calls on one module are
 * serialized by the table; configure is for startup, before any create.
 */
#ifndef RD_FPGA_RMM_XRT_H
#define RD_FPGA_RMM_XRT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "host_xrt.h"
#include "rd_error.h"
#include "table.h"

/* Where the module's device and kernel are, and the kernel build's shape. */
typedef struct {
  unsigned device;        /* XRT device index */
  char xclbin[PATH_MAX];  /* an xclbin with rmm_kernel; empty: not configured */
  uint32_t k;             /* the build's RMM_K */
  uint32_t capacity;      /* the build's RMM_CAPACITY (N) */
  uint32_t max_batch;     /* items per request: the buffers' size, <= the build's RMM_MAX_BATCH */
  uint64_t max_leaf;      /* the build's RMM_MAX_LEAF */
} rd_fpga_xrt_rmm_params_t;

/* Device 0, no xclbin, and rmm.h's default build (K 16, N 65536, batch
 * 1024, RMM_MAX_LEAF for N). */
void rd_fpga_xrt_rmm_params_default(rd_fpga_xrt_rmm_params_t *p);

/* Set the parameters every later create uses (copied). RD_EINVAL for an
 * empty xclbin path, K not a power of two in [2, 64], capacity 0,
 * max_batch outside [1, 2^24] or max_leaf 0. NULL clears them (create then
 * fails with RD_EINVAL "not configured"). */
int rd_fpga_xrt_rmm_configure(const rd_fpga_xrt_rmm_params_t *p, rd_error_t *err);

/* The module for table configs (config.rmm = &rd_fpga_xrt_rmm_ops). Its
 * memsize is the host shadow's; 0 when not configured or the shape does
 * not fit the build. */
extern const rd_rmm_ops_t rd_fpga_xrt_rmm_ops;

/* What one module did. */
typedef struct {
  uint64_t requests;   /* kernel runs completed (the create's reset included) */
  uint64_t inserted, sampled, updated; /* items */
  uint64_t unverified; /* requests whose status no kernel wrote (the no-op shim) */
  uint64_t cycles;     /* the kernel's reported cycles (info_out[2]; 0 in the shim) */
  int broken;          /* a device failure: every later call fails */
} rd_fpga_xrt_rmm_stats_t;
void rd_fpga_xrt_rmm_stats(const void *rmm, rd_fpga_xrt_rmm_stats_t *out);

/* The module's host path (its buffers' maps: host_xrt.h), for tests. */
const rd_fpga_xrt_rmm_t *rd_fpga_xrt_rmm_host(const void *rmm);

/* Ask the device for its total (RMM_OP_TOTAL) and compare it with the
 * shadow's: RD_OK and *verified = 1 when they agree; RD_OK and
 * *verified = 0 when no kernel answered (the no-op shim); RD_EINTERNAL on
 * a mismatch or a device failure. */
int rd_fpga_xrt_rmm_check(void *rmm, int *verified, rd_error_t *err);

/* How the module reads one request's info words (exposed so tests can
 * feed it words no kernel here can produce). info[0] the kernel's status,
 * info[1] its total after the request; want_total the shadow's. RD_OK with
 * *verified = 1: status RMM_OK and the totals agree. RD_OK with
 * *verified = 0: info[0] is RD_XRT_RMM_UNWRITTEN and noop is set (no
 * kernel ran; nothing to check). RD_EINTERNAL otherwise (an error status
 * for a request the host had checked, a total mismatch, or an unwritten
 * status on a real device), naming op. */
int rd_fpga_xrt_rmm_status(const uint64_t info[3], int noop, uint64_t want_total, const char *op,
                           int *verified, rd_error_t *err);

#endif
