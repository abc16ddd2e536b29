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
 * (zero from the open, or the host's sentinels below).
 * tests/test_fpga_xrt.c and tests/test_fpga_xrt_ops.c run it so, with
 * xclbins from xclbin_gen.c. Never run against a board.
 *
 * Not thread-safe: one host thread per handle (the RMM processing unit's).
 * Built only with XRT (meson option xrt).
 *
 * Two handles: the replay kernel's (rd_fpga_xrt_rmm_t, one request per
 * call; rmm_xrt.h builds a table's replay module on it) and the learner
 * kernel's (rd_fpga_xrt_learner_t, one train-step per call, this file's
 * second half, host_xrt_learner.c; backends/fpga/learner_backend_xrt.c builds the
 * learner backend on it).
 *
 * Knowing that no kernel ran. Before each run the host writes a sentinel
 * into the word the kernel always writes on a request it accepts (the
 * replay kernel's status, info_out[0]; the learner kernel's
 * stats[LRN_ST_FAILED]). After the run the word is still the sentinel when
 * no kernel executed (the no-op shim, always) or the kernel refused the
 * request (the learner's LRN_EINVAL writes nothing; its int return value
 * is an ap_return register that XRT's C API cannot read). The handles
 * record whether XRT runs the no-op shim (`noop`), so their users can tell
 * "no result exists" from "the device failed".
 */
#ifndef RD_FPGA_HOST_XRT_H
#define RD_FPGA_HOST_XRT_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

/* XRT's environment, checked before any XRT call: RD_ENOTFOUND when
 * XILINX_XRT is unset or empty (XRT would abort the process), RD_EINVAL for
 * an XCL_EMULATION_MODE other than "noop" (sw_emu and hw_emu need Vitis and
 * hang without it). *noop = 1 under XCL_EMULATION_MODE=noop. */
int rd_fpga_xrt_env(int *noop, rd_error_t *err);

/* The value of info_out[0] (the replay kernel's status word) that no
 * kernel writes: the host's, left in place when no kernel ran. */
#define RD_XRT_RMM_UNWRITTEN UINT64_MAX

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
  int noop;      /* XCL_EMULATION_MODE=noop: XRT's no-op shim, no kernel executes */
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
 * wrote them; before the run the host sets info_out to
 * {RD_XRT_RMM_UNWRITTEN, 0, 0}, so info[0] is RD_XRT_RMM_UNWRITTEN when no
 * kernel wrote it. RD_ETOOBIG if n > max_batch; RD_ETIMEDOUT if the run did
 * not complete within timeout_ms (default 5000); RD_EINTERNAL if XRT fails
 * a sync or the run ends in another state. The kernel's status is the
 * caller's to read (rmm_xrt.c). */
int rd_fpga_xrt_rmm_call(rd_fpga_xrt_rmm_t *x, uint32_t op, uint32_t n, uint32_t first,
                         const uint64_t *u64_in, const uint32_t *pos_in, uint32_t *leaf_out,
                         uint64_t info[3], rd_error_t *err);

void rd_fpga_xrt_rmm_close(rd_fpga_xrt_rmm_t *x);

/* ------------------------------------------------------------------ */
/* The learner kernel (lrn_train_step, kernels/learner.h)               */
/* ------------------------------------------------------------------ */

/* One buffer per pointer argument of lrn_train_step, in argument order
 * (xclbin_gen.c's rd_fpga_learner_kernel_desc: ids 0, 1, then 4..17; 2
 * step and 3 n are scalars). */
enum {
  RD_XRT_L_DESC, RD_XRT_L_HP, RD_XRT_L_PARAMS, RD_XRT_L_TARGET, RD_XRT_L_ADAM_M,
  RD_XRT_L_ADAM_V, RD_XRT_L_WS, RD_XRT_L_OBS, RD_XRT_L_ACTION_I, RD_XRT_L_ACTION_F,
  RD_XRT_L_REWARD, RD_XRT_L_DISCOUNT, RD_XRT_L_NEXT_OBS, RD_XRT_L_WEIGHTS, RD_XRT_L_TD_ABS,
  RD_XRT_L_STATS, RD_XRT_L_N_BO
};

/* The value of stats[LRN_ST_FAILED] that the kernel never writes (it
 * writes 0..4 on every step it accepts). */
#define RD_XRT_LRN_UNWRITTEN (-1.0)

typedef struct {
  void *device, *kernel, *run;
  void *bo[RD_XRT_L_N_BO];
  void *map[RD_XRT_L_N_BO];
  size_t bo_bytes[RD_XRT_L_N_BO];
  uint32_t batch;      /* rows the batch buffers hold (the config's batch) */
  uint32_t obs_dim;    /* net[0]'s input */
  uint32_t action_dim; /* DDPG: the actor's output; DQN: 0 (action_f unused) */
  size_t n_params;     /* lrn_params_floats: floats of params, target, adam_m, adam_v */
  size_t ws_floats;    /* lrn_ws_floats */
  unsigned timeout_ms;
  int noop;
  uint64_t runs;       /* kernel runs started and completed */
} rd_fpga_xrt_learner_t;

/* Open device `index`, load `xclbin`, open its lrn_train_step and allocate
 * its buffers for config c (struct lrn_config_t of kernels/learner.h,
 * passed as void so this header needs no kernel header): the descriptor
 * and hyper-parameters (lrn_config_pack's, written and synced here), the
 * four parameter blocks (zero until written), the workspace, the batch
 * arrays for c's batch, td_abs and stats. Errors (nothing is left open):
 * RD_EINVAL a config the kernel build refuses (lrn_config_check's reason),
 * an xclbin XRT refuses, or a bad argument; RD_ENOTFOUND no device, no
 * XILINX_XRT, or no lrn_train_step in the xclbin; RD_ENOMEM a buffer XRT
 * cannot allocate. */
int rd_fpga_xrt_learner_open(rd_fpga_xrt_learner_t *x, unsigned index, const char *xclbin,
                             const void *lrn_config, rd_error_t *err);

/* Host -> device: floats [off, off + n) of a parameter block (which is
 * RD_XRT_L_PARAMS, _TARGET, _ADAM_M or _ADAM_V). RD_EINVAL for another
 * buffer or a range outside it; RD_EINTERNAL if XRT fails the sync. */
int rd_fpga_xrt_learner_write(rd_fpga_xrt_learner_t *x, int which, const float *src, size_t off,
                              size_t n, rd_error_t *err);
/* Device -> host: the same ranges back. */
int rd_fpga_xrt_learner_read(rd_fpga_xrt_learner_t *x, int which, float *dst, size_t off,
                             size_t n, rd_error_t *err);

/* One train-step on n rows (1..batch) at Adam step `step`: copies the
 * batch into its buffers (obs and next_obs n x obs_dim; action_i n or
 * action_f n x action_dim, whichever is not NULL; reward, discount n;
 * weights n, or ones when NULL), syncs them, sets the 18 arguments, runs,
 * waits, and syncs td_abs (n) and stats (LRN_ST_COUNT) back into td_abs
 * (may be NULL) and stats. RD_OK when the kernel wrote stats (the step's
 * outcome is then stats[LRN_ST_FAILED]: LRN_FAIL_NONE or what made it
 * LRN_ERANGE). RD_EINTERNAL when stats[LRN_ST_FAILED] is still
 * RD_XRT_LRN_UNWRITTEN after the run (no kernel executed: the no-op shim;
 * or the kernel refused the step), or when XRT fails a sync, an argument,
 * the start or the run; RD_ETIMEDOUT past timeout_ms; RD_ETOOBIG n above
 * batch; RD_EINVAL n = 0 or a missing input. The parameter blocks stay on
 * the device (read them with rd_fpga_xrt_learner_read). */
int rd_fpga_xrt_learner_step(rd_fpga_xrt_learner_t *x, uint64_t step, uint32_t n,
                             const float *obs, const int32_t *action_i, const float *action_f,
                             const float *reward, const float *discount, const float *next_obs,
                             const float *weights, float *td_abs, double *stats,
                             rd_error_t *err);

void rd_fpga_xrt_learner_close(rd_fpga_xrt_learner_t *x);

/* Shared by both handles: open device `index`, load `xclbin`, open kernel
 * `name` (the errors of the opens above). On failure nothing is open. */
int rd_fpga_xrt_open_kernel(unsigned index, const char *xclbin, const char *name, void **device,
                            void **kernel, int *noop, rd_error_t *err);

/* And its reverse: close run, the n_bo buffers (NULL ones skipped), the
 * kernel and the device, whichever are open (NULL: not). */
void rd_fpga_xrt_close_handles(void *device, void *kernel, void *run, void *const *bo, int n_bo);

/* Also shared: start `run` (an xrtRunHandle, its arguments set) and wait
 * up to timeout_ms for it. RD_EINTERNAL if the start fails or the run ends
 * other than completed, RD_ETIMEDOUT past timeout_ms; `kernel` names the
 * kernel in the message ("the kernel", "the learner kernel"). */
int rd_fpga_xrt_start_wait(void *run, unsigned timeout_ms, const char *kernel, rd_error_t *err);

#endif
