/* learner_backend.h - the hosted learner behind one interface, whatever
 * device runs it.
 *
 * The pipeline (pipeline.h) trains through an rd_learner_backend_t: an ops
 * table plus the backend's own state. Two backends exist:
 *
 *  - "cpu": backends/cpu/learner.h (rd_learner_*), always built;
 *  - "gpu": backends/gpu/learner_gpu.h (rd_gpu_learner_*), built only when
 *    meson built the GPU backend (rd_gpu_enabled: nvcc, libcudart and
 *    libcublas found, option cuda not disabled; learner_backend_gpu.c).
 *    Otherwise learner_backend_nogpu.c stands in: asking for it fails with
 *    RD_EINVAL "built without CUDA: ...".
 *
 * Nothing here or in its callers knows about CUDA: the GPU backend's C
 * header has no CUDA types, and its errors arrive as rd_error.h codes.
 *
 * Device faults. init and step set b->fault = 1 (and fill err) when an
 * error is the device's, not the input's: no device or driver, a driver
 * older than the runtime, device or pinned memory exhausted, a cuBLAS or
 * kernel-launch failure. The pipeline then gives the device up (marks it
 * unusable in the device list, devices.h) and goes on with the CPU backend
 * (pipeline.h says when and with which weights). An error with fault = 0
 * is the caller's (a bad config or batch) and is handled as on the CPU.
 * The CPU backend never sets fault.
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

typedef struct rd_learner_backend rd_learner_backend_t;

typedef struct {
  const char *name; /* "cpu", "gpu", or a test's own */
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
} rd_learner_ops_t;

struct rd_learner_backend {
  const rd_learner_ops_t *ops;
  uint32_t device; /* ordinal among its kind */
  int fault;       /* the last failed init/step was a device fault (see above) */
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

/* The ops for a kind (RD_LEARNER_ON_CPU -> cpu, RD_LEARNER_ON_GPU -> gpu,
 * RD_LEARNER_ON_FPGA -> fpga). */
const rd_learner_ops_t *rd_learner_ops_for(rd_learner_kind_t kind);

/* "cpu" / "gpu" / "fpga" for a kind; "?" otherwise. */
const char *rd_learner_kind_name(rd_learner_kind_t kind);

/* Convenience wrappers (b->ops must be set; init sets b->ops = ops). */
int rd_learner_backend_init(rd_learner_backend_t *b, const rd_learner_ops_t *ops,
                            const rd_learner_config_t *c, uint32_t device, rd_error_t *err);
void rd_learner_backend_destroy(rd_learner_backend_t *b); /* safe on a failed or zeroed one */

#endif
