/* learner_backend.h - the hosted learner behind one interface, whatever
 * device runs it.
 *
 * The pipeline (pipeline.h) trains through an rd_learner_backend_t: an ops
 * table plus the backend's own state. Three backends exist:
 *
 *  - "cpu": backends/cpu/learner.h (rd_learner_*), always built
 *    (backends/cpu/learner_backend_cpu.c);
 *  - "gpu": backends/gpu/learner_gpu.h (rd_gpu_learner_*), built only when
 *    meson built the GPU backend (rd_gpu_enabled: nvcc, libcudart and
 *    libcublas found, option cuda not disabled; learner_backend_gpu.c).
 *    Otherwise provider_gpu_nocuda.c stands in: asking for it fails with
 *    RD_EINVAL "built without CUDA: ...".
 *  - "fpga": the FPGA learner kernel (backends/fpga/kernels/learner.h,
 *    lrn_train_step) run in C-simulation in this process, the "C-sim
 *    device" (learner_backend_fpga.c), always built. Its buffers (weights,
 *    targets, Adam moments, the kernel's workspace) are per instance, so
 *    any number of FPGA learners run at once. The device ordinal names the
 *    board the C-simulation stands in for; no board is opened.
 *
 * Nothing here or in its callers knows about CUDA or XRT: the GPU backend's
 * C header has no CUDA types, and its errors arrive as rd_error.h codes.
 *
 * Device faults. init and step set b->fault (and fill err) when an error
 * is not the input's, and the pipeline then goes on with the CPU backend
 * (pipeline.h says when and with which weights). An error with fault = 0
 * is the caller's (a bad config or batch) and is handled as on the CPU.
 * The CPU backend never sets fault. Two kinds:
 *  - RD_LEARNER_FAULT_DEVICE (1): the device failed: no device or driver, a
 *    driver older than the runtime, device or pinned memory exhausted, a
 *    cuBLAS or kernel-launch failure, a kernel that refused a step the host
 *    had checked. The pipeline gives the device up (marks it unusable in
 *    the device list, devices.h).
 *  - RD_LEARNER_FAULT_UNSUPPORTED (2): the config is valid (the CPU learner
 *    takes it) but beyond what this device's build can run: the FPGA
 *    kernel's build limits (layers, width, batch; rd_learner_fpga_supports
 *    names the limit in an RD_EINVAL message). Neither the caller's error
 *    (fault 0 would fail the registration of a config the daemon can
 *    train) nor the device's: the workload falls back to the CPU learner
 *    with that message as the logged reason, and the device stays usable
 *    for other workloads. The mapper can avoid placing such a learner on
 *    the FPGA with rd_learner_fpga_supports.
 * rd_learner_fault_gives_up_device is that rule.
 *
 * Not thread-safe: one thread (the pipeline's learner thread, or create)
 * uses a backend at a time.
 */
#ifndef RD_LEARNER_BACKEND_H
#define RD_LEARNER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "learner.h" /* rd_learner_config_t, rd_batch_t, rd_step_stats_t */
#include "rd_error.h"

/* The device kind a learner runs on. */
typedef enum {
  RD_LEARNER_ON_CPU = 0, /* the default (a zeroed config) */
  RD_LEARNER_ON_GPU = 1,
  RD_LEARNER_ON_FPGA = 2, /* learner_backend_fpga.c: the FPGA learner kernel */
} rd_learner_kind_t;

/* Values of rd_learner_backend_t.fault (see "Device faults" above). */
enum {
  RD_LEARNER_FAULT_NONE = 0,
  RD_LEARNER_FAULT_DEVICE = 1,
  RD_LEARNER_FAULT_UNSUPPORTED = 2,
};

typedef struct rd_learner_backend rd_learner_backend_t;

typedef struct {
  const char *name; /* "cpu", "gpu", "fpga", or a test's own */
  rd_learner_kind_t kind;
  /* Validate c and build the learner on device `device` (the ordinal among
   * devices of the kind; the CPU backend ignores it). Initial weights are
   * those of rd_learner_init for c->seed. On failure nothing is held and
   * destroy is safe. */
  int (*init)(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
              rd_error_t *err);
  /* One gradient step, as rd_learner_step (learner.h). */
  int (*step)(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
              rd_step_stats_t *st, rd_error_t *err);
  /* The policy in the flat format (rd_nn_spec.h), as rd_learner_policy_save. */
  size_t (*policy_bytes)(const rd_learner_backend_t *b);
  int (*policy_save)(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                     rd_error_t *err);
  /* Set the policy network (and its target) from a flat buffer of the same
   * spec; the other networks and the optimiser state stay. NULL when the
   * backend cannot (the GPU backend: a fallback never loads into it). */
  int (*policy_load)(rd_learner_backend_t *b, const void *buf, size_t len, rd_error_t *err);
  void (*destroy)(rd_learner_backend_t *b);
  /* Optional (NULL: nothing to do): the caller had no work for the
   * learner since its last step, as rd_learner_tune_pause. */
  void (*pause)(rd_learner_backend_t *b);
  /* Optional (NULL: the backend cannot; checkpoints then keep its published
   * policy only, pipeline.h "Checkpoints"): the whole training state, as
   * learner.h rd_learner_state_* (every network, Adam moments, step
   * counts), in the CPU learner's format whatever the device, so a
   * checkpoint loads on another backend of the same config (device
   * backends through learner.h rd_learner_state_*_arrays) and a learner
   * moves between backends exactly (rd_pipeline_move_learner). The CPU,
   * the FPGA C-simulation and the GPU backends have them; the XRT one not. */
  size_t (*state_bytes)(const rd_learner_backend_t *b);
  int (*state_save)(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                    rd_error_t *err);
  int (*state_load)(rd_learner_backend_t *b, const void *buf, size_t len, rd_error_t *err);
  /* Optional (NULL: the backend has no idle threads to lend): offer the
   * idle time of the backend's helper threads to fn(arg), as learner.h
   * rd_learner_set_idle (the CPU learner's team workers). */
  void (*set_idle)(rd_learner_backend_t *b, int (*fn)(void *arg), void *arg);
} rd_learner_ops_t;

struct rd_learner_backend {
  const rd_learner_ops_t *ops;
  uint32_t device; /* ordinal among its kind */
  int fault;       /* RD_LEARNER_FAULT_*: why the last failed init/step is not the caller's */
  void *impl;      /* the backend's learner */
};

/* The built-in backends. rd_learner_ops_gpu exists in every build; in one
 * without the GPU backend its init fails with RD_EINVAL "built without
 * CUDA: ..." and fault = 1. */
extern const rd_learner_ops_t rd_learner_ops_cpu;
extern const rd_learner_ops_t rd_learner_ops_gpu;
extern const rd_learner_ops_t rd_learner_ops_fpga;

/* 1 if this build has the GPU learner (rd_gpu_enabled), else 0. */
int rd_learner_gpu_built(void);

/* 1 if the FPGA learner kernel of this build can train a learner of config
 * c (already valid: rd_learner_config_validate); else 0 and err (RD_EINVAL)
 * names the build limit it breaks, e.g. "the critic's width 512 (sizes[1])
 * exceeds this FPGA learner build's limit of 256 (LRN_MAX_WIDTH)". */
int rd_learner_fpga_supports(const rd_learner_config_t *c, rd_error_t *err);

/* The ops for a kind (RD_LEARNER_ON_CPU -> cpu, RD_LEARNER_ON_GPU -> gpu,
 * RD_LEARNER_ON_FPGA -> fpga). */
const rd_learner_ops_t *rd_learner_ops_for(rd_learner_kind_t kind);

/* "cpu" / "gpu" / "fpga" for a kind; "?" otherwise. */
const char *rd_learner_kind_name(rd_learner_kind_t kind);

/* 1 if a failure with this fault means the device itself is broken and
 * is to be given up (RD_LEARNER_FAULT_DEVICE); 0 for none or
 * RD_LEARNER_FAULT_UNSUPPORTED. */
int rd_learner_fault_gives_up_device(int fault);

/* For the backends' own init and destroy (their ops), so that each says
 * only how its learner is freed. adopt ends an init that built l: with rc
 * RD_OK, b holds l; otherwise discard(l) (what l's own init built is freed
 * already, or by discard) and b holds nothing. Returns rc. release is a
 * destroy: release(b->impl) if b holds a learner, and then b holds none
 * (so a second call does nothing). */
int rd_learner_backend_adopt(rd_learner_backend_t *b, void *l, int rc, void (*discard)(void *l));
void rd_learner_backend_release(rd_learner_backend_t *b, void (*release)(void *impl));

/* Convenience wrappers (b->ops must be set; init sets b->ops = ops). */
int rd_learner_backend_init(rd_learner_backend_t *b, const rd_learner_ops_t *ops,
                            const rd_learner_config_t *c, uint32_t device, rd_error_t *err);
void rd_learner_backend_destroy(rd_learner_backend_t *b); /* safe on a failed or zeroed one */

#endif
