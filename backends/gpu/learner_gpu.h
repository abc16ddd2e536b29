/* learner_gpu.h - the hosted learner's gradient step on a CUDA device: DQN
 * and DDPG, the same algorithms, network specs, configs and batch format as
 * the CPU learner (backends/cpu/learner.h, whose comment is the contract:
 * n-step targets, double DQN, Huber / MSE with IS weights, DDPG's actor
 * through the critic before its update, per-network grad-norm clipping,
 * Adam as torch.optim.Adam, Polyak or hard-copy targets, the order of a
 * step and its atomicity on a non-finite loss or gradient).
 *
 * How it runs. Each learner owns one CUDA stream and one cuBLAS handle
 * bound to it; every product is a cuBLAS SGEMM / SGEMV in full FP32
 * (CUBLAS_DEFAULT_MATH, set explicitly: no TF32), every element-wise step (bias + activation,
 * activation gradients, targets, losses, |TD|, Adam, clipping, Polyak or
 * hard copy) is a kernel of learner_gpu.cu whose per-thread arithmetic is
 * rd_gpu_elem.h. Reductions (loss, |TD| mean and max, gradient norms) run in
 * double in a fixed order, so a learner is deterministic for a given device
 * and batch sequence. One step is: the batch is packed into pinned host
 * memory, copied in one transfer, the kernels run, and |TD| plus the step's
 * figures come back in two transfers; the call waits for them.
 *
 * CUDA graphs: the first step of a batch size runs its kernels on the
 * stream; when the next step has the same batch size its work is captured
 * into a graph (copies, cuBLAS calls and kernels) and replayed from then on
 * while the size repeats (one graph is kept: for the last size captured).
 * A graph that cannot be captured, instantiated or launched is not a
 * device fault: that step runs on the stream and graphs stay off for the
 * learner (graph_failures, graph_error).
 * Weight moves are data-driven inside the graph: a device flag set from the
 * loss and gradient norms gates Adam and the target update, so a step whose
 * loss or norm is not finite changes no weight, Adam moment or step count
 * (RD_ERANGE, as on the CPU) without leaving the graph.
 *
 * Results versus the CPU learner: the same initial weights (the CPU
 * learner's initialisation, uploaded), the same element-wise rounding
 * (rd_gpu_elem.h), but cuBLAS sums each product in another order, so
 * weights and priorities agree to a tolerance, not bit for bit
 * (tests/gpu/check_learner.cu states and checks it).
 *
 * Errors (never an abort): RD_EINVAL for a bad config or batch (the CPU
 * learner's checks and messages), no usable device (no driver, a driver
 * older than the runtime, no device, a bad ordinal: the message says
 * which); RD_ENOMEM when device or pinned memory runs out; RD_ETOOBIG for
 * n > max_batch; RD_EINTERNAL when cuBLAS or a kernel launch fails
 * (message names the call and the status); RD_ERANGE as above. After an
 * RD_EINTERNAL from a step the learner should be destroyed: the device may
 * be in an unknown state.
 *
 * Not thread-safe; calls on one learner must be serialized. Each call makes
 * the learner's device current on the calling thread. All device work,
 * init's included, runs on the learner's own non-blocking stream.
 */
#ifndef RD_LEARNER_GPU_H
#define RD_LEARNER_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "learner.h" /* rd_learner_config_t, rd_batch_t, rd_step_stats_t */
#include "rd_error.h"

struct rd_gpu_learner_impl;

typedef struct rd_gpu_learner {
  rd_learner_config_t config;
  uint64_t steps; /* successful steps */
  int device;     /* CUDA ordinal */
  int n_nets;     /* DQN 2 (q, q_target), DDPG 4 (actor, actor_target, critic, critic_target) */
  rd_nn_spec_t spec[4];
  uint64_t graph_launches; /* steps that replayed a captured graph */
  uint64_t graph_captures; /* graphs captured */
  uint64_t graph_failures; /* graphs that could not be captured or run (then off) */
  char graph_error[96];    /* why, the last time */
  struct rd_gpu_learner_impl *impl;
} rd_gpu_learner_t;

/* Validate c (rd_learner_config_validate; threads is ignored), initialise
 * the online networks exactly as rd_learner_init does for the same seed,
 * copy them to the targets, and allocate every device and pinned buffer for
 * batches up to max_batch on CUDA device `device`. No other call allocates
 * (except the graph instantiation of a new batch size). On failure l is
 * zeroed and rd_gpu_learner_destroy on it is safe. */
int rd_gpu_learner_init(rd_gpu_learner_t *l, const rd_learner_config_t *c, int device,
                        rd_error_t *err);
void rd_gpu_learner_destroy(rd_gpu_learner_t *l);

/* 0 turns CUDA graphs off (every step runs on the stream), 1 back on
 * (default). For benchmarks and for checking that both paths agree. */
void rd_gpu_learner_set_graphs(rd_gpu_learner_t *l, int on);

/* Tests: make the next capture fail (an operation CUDA refuses while a
 * stream is captured), to check that the step still runs, on the stream. */
void rd_gpu_learner_fail_next_capture(rd_gpu_learner_t *l);

/* One gradient step, as rd_learner_step: td_abs (n floats, may be NULL)
 * receives |delta|, st (may be NULL) the step's figures. */
int rd_gpu_learner_step(rd_gpu_learner_t *l, const rd_batch_t *b, float *td_abs,
                        rd_step_stats_t *st, rd_error_t *err);

/* The policy (DQN's Q network, DDPG's actor) in the flat format of
 * rd_nn_spec.h, as rd_learner_policy_save writes it. */
size_t rd_gpu_learner_policy_bytes(const rd_gpu_learner_t *l);
int rd_gpu_learner_policy_weights(rd_gpu_learner_t *l, void *buf, size_t cap, size_t *written,
                                  rd_error_t *err);

/* Parameters of network `net` (the CPU learner's net[] index: 0 Q / actor,
 * 1 its target, 2 critic, 3 critic target) copied to out (cap floats;
 * RD_ETOOBIG if fewer than the network has). *n (may be NULL) receives the
 * count. */
int rd_gpu_learner_get_params(rd_gpu_learner_t *l, int net, float *out, size_t cap, size_t *n,
                              rd_error_t *err);

/* The whole training state (learner.h rd_learner_state_arrays_t: every
 * network's parameters, the online networks' Adam moments and steps, the
 * step count) copied to host arrays the caller sized from spec[] (get), or
 * from them onto the device (set; the arrays already checked, as
 * rd_learner_state_load_arrays does). A captured graph reads the same
 * device buffers, so it goes on from the state set. */
int rd_gpu_learner_get_state(rd_gpu_learner_t *l, rd_learner_state_arrays_t *a, rd_error_t *err);
int rd_gpu_learner_set_state(rd_gpu_learner_t *l, const rd_learner_state_arrays_t *a,
                             rd_error_t *err);

/* Device bytes the learner holds (buffers, cuBLAS workspace). */
size_t rd_gpu_learner_device_bytes(const rd_gpu_learner_t *l);

#ifdef __cplusplus
}
#endif

#endif
