/* learner.h - skeleton of the FPGA learner module as HLS C (Vitis HLS
 * dialect) that also compiles and runs as plain C. Source: papers/001
 * §IV-B3 (a learner pipeline of n = 3L tensor units, FW through the L
 * layers, LOSS, BW through L-1 layers, WA for the L weight tensors,
 * connected by FIFOs; DP such pipelines over sub-batches of PI = ceil(B/DP)
 * samples, their weight gradients summed in a reduction buffer; then WU),
 * thesis 004 §4.4.2.2 (per-layer unroll factor of multiply-accumulate
 * units).
 *
 * WHAT IS HERE (a skeleton, C-simulation only, never synthesised): the FW,
 * BW and WA stages of one MLP (relu, tanh, identity, fp32 as our CPU
 * learner computes) in DP pipelines, the DP reduction, and plain SGD as the
 * WU stage. The LOSS stage takes dL/dy from the caller. NOT here: DQN's and
 * DDPG's losses, targets, target networks, Adam, clipping (the CPU learner,
 * backends/cpu/learner.c, has them), fixed-point precisions, the on-chip
 * FIFOs between stages (in C the stages run one after another, as Vitis
 * C-simulation runs a DATAFLOW region), and an xclbin top function.
 *
 * Not reentrant: the WA accumulators are one static buffer (the on-chip
 * ones), so one learner runs at a time per process.
 *
 * Agreement with the CPU learner (tests/test_fpga_learner.c): the same
 * flat parameters (rd_nn_spec.h layout: per layer W [out x in] row-major,
 * then b [out]) give the same outputs and gradients up to fp32 rounding:
 * the stages sum products in input order, one multiply-add at a time, and
 * the gradients per pipeline and then over pipelines, while backends/cpu's
 * GEMM blocks and may fuse (FMA). Documented tolerance, per tensor:
 *   max |fpga - cpu| <= 1e-5 * max(1, max |cpu|)
 * (measured on the test networks, up to 256 wide: below 1e-6).
 */
#ifndef RD_FPGA_LEARNER_KERNEL_H
#define RD_FPGA_LEARNER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* Build limits (on-chip buffer sizes). */
#ifndef LRN_MAX_LAYERS
#define LRN_MAX_LAYERS 8
#endif
#ifndef LRN_MAX_WIDTH
#define LRN_MAX_WIDTH 256
#endif
#ifndef LRN_MAX_DP
#define LRN_MAX_DP 4
#endif
#ifndef LRN_MAX_BATCH
#define LRN_MAX_BATCH 512
#endif
/* MAC units per tensor unit (thesis 004's unroll factor UF): the output
 * loop of FW, the input loop of BW and WA are unrolled by it. */
#ifndef LRN_UNITS
#define LRN_UNITS 8
#endif
/* Largest parameter block: LRN_MAX_LAYERS layers of LRN_MAX_WIDTH^2 + bias. */
#define LRN_MAX_PARAMS ((size_t)LRN_MAX_LAYERS * LRN_MAX_WIDTH * (LRN_MAX_WIDTH + 1))

/* The chain of one pipeline (papers/001 §IV-B3): n = 3L stages. */
#define LRN_CHAIN_STAGES(L) (3u * (L))

enum { LRN_IDENTITY = 0, LRN_RELU = 1, LRN_TANH = 2 }; /* = rd_nn_act_t */

typedef struct {
  uint32_t n_layers;                    /* L, 1..LRN_MAX_LAYERS */
  uint32_t sizes[LRN_MAX_LAYERS + 1];   /* each 1..LRN_MAX_WIDTH */
  uint32_t act[LRN_MAX_LAYERS];
} lrn_shape_t;

enum { LRN_OK = 0, LRN_EINVAL = 1 };

/* 0 or LRN_EINVAL for a shape beyond this build's limits. */
int lrn_shape_check(const lrn_shape_t *s);

/* Floats of the flat parameter block. */
size_t lrn_n_params(const lrn_shape_t *s);

/* Label of chain stage i (0..3L-1) of an L-layer network, as model.c names
 * its TUs: FW0..FW(L-1), LOSS, BW(L-1)..BW1, WA0..WA(L-1). */
void lrn_stage_label(uint32_t L, uint32_t i, char *buf, size_t cap);

/* Samples per pipeline: ceil(B / DP). */
static inline uint32_t lrn_pi(uint32_t batch, uint32_t dp) { return (batch + dp - 1) / dp; }

/* The activations one forward keeps for BW and WA (each FW TU keeps its
 * input for the samples in flight; here the whole batch):
 * act[l] is layer l's output, [n x sizes[l+1]]; act_in the input. */
typedef struct {
  float in[LRN_MAX_BATCH * LRN_MAX_WIDTH];
  float act[LRN_MAX_LAYERS][LRN_MAX_BATCH * LRN_MAX_WIDTH];
  uint32_t n;
} lrn_acts_t;

/* FW: y [n x sizes[L]] (may be NULL) from x [n x sizes[0]], over dp
 * pipelines of PI samples each; keeps the activations in acts. */
int lrn_forward(const lrn_shape_t *s, const float *params, uint32_t dp, uint32_t n,
                const float *x, float *y, lrn_acts_t *acts);

/* BW + WA + reduction: grads (n_params, overwritten) = sum over the batch
 * of dL/dtheta for dL/dy = dy [n x sizes[L]], after lrn_forward with the
 * same dp; dx [n x sizes[0]] (may be NULL) = dL/dx. */
int lrn_backward(const lrn_shape_t *s, const float *params, uint32_t dp, const lrn_acts_t *acts,
                 const float *dy, float *grads, float *dx);

/* WU: params -= lr * grads (papers/001's SGD weight update). */
void lrn_sgd(const lrn_shape_t *s, float *params, const float *grads, float lr);

#endif
