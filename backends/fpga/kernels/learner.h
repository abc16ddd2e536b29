/* learner.h - the FPGA learner module as HLS C (Vitis HLS dialect) that
 * also compiles and runs as plain C (and as C++, as Vitis compiles it).
 *
 * Source: papers/001 §IV-B3 (the learner module: DP pipelines of n = 3L
 * tensor units each, FW through the L layers, LOSS, BW through L-1 layers,
 * WA for the L weight tensors, joined by FIFOs; pipeline p takes the
 * sub-batch of PI = ceil(B/DP) samples [p PI, (p + 1) PI); the pipelines'
 * weight gradients are summed in a reduction buffer; then WU) and thesis
 * 004 §4.4.2.2 (each tensor unit an array of UF multiply-accumulate units:
 * the per-layer unroll factor, here LRN_UNITS).
 *
 * WHAT IS HERE: one whole train-step of the hosted learner's algorithms,
 * with exactly the semantics of backends/cpu/learner.c (the config fields
 * of rd_learner_config_t, the order of operations, the failure rules):
 *  - DQN: target network forward on s', double-DQN action choice by the
 *    online network (or the target's max), y = R + discount Q'(s', a*)
 *    from the row's n-step return and bootstrap factor; online forward on
 *    s; LOSS = IS-weighted Huber (torch HuberLoss, mean), gradient on the
 *    taken action only; |delta| out; BW + WA; reduction.
 *  - DDPG: actor (tanh output scaled to [action_low, action_high]) and
 *    critic Q([s, a]); critic target y = R + discount Q'(s', mu'(s'));
 *    critic LOSS = IS-weighted MSE (as the CPU learner: not Huber);
 *    actor LOSS = -mean Q(s, mu(s)) through the critic's input gradient
 *    (BW of the critic down to its input, no WA) into the actor's BW + WA.
 *    Both gradients at the step's starting parameters, then both updates.
 *  - WU: Adam as torch.optim.Adam (bias corrections in double, per-element
 *    arithmetic in fp32 in nn.c's order); SGD (lrn_sgd) stays as a stage.
 *  - gradient-norm clipping per network (torch clip_grad_norm_), the norm
 *    in double over 16 interleaved partial sums (nn.c's order; in hardware
 *    the 16 accumulators hide the double adder's latency at II = 1);
 *  - target networks: hard copy every target_period steps, else Polyak tau.
 * Every check (non-finite loss or gradient norm: LRN_ERANGE) comes before
 * the first parameter, moment or target moves.
 *
 * Data flow. The kernel top lrn_train_step takes flat pointers and scalars,
 * as an xclbin top function does: a descriptor (u32 words: algorithm,
 * shapes, DP, the batch its workspace was sized for, flags), the
 * hyper-parameters (doubles), the step count, the online parameters,
 * target parameters and Adam moments (all networks concatenated: DQN's Q
 * network; DDPG's actor then critic; each in the rd_nn_spec.h flat layout:
 * per layer W [out x in] row-major, then b [out]), the batch arrays, a
 * workspace, and the outputs td_abs and stats. The host builds the
 * descriptor with lrn_config_pack and sizes the buffers with
 * lrn_params_floats and lrn_ws_floats.
 *
 * In one pipeline the stages of a step form a chain per sample (DQN:
 * FW target(s'), FW online(s'), FW online(s), LOSS, BW, WA; DDPG: FW
 * actor'(s'), FW critic'(s', mu'), FW critic(s, a), LOSS, BW + WA critic,
 * FW actor(s), FW critic(s, mu), BW critic to its input, BW + WA actor),
 * written as a DATAFLOW region of stage loops over the pipeline's
 * sub-batch; each stage has its own buffer, so a stage has one producer
 * and one consumer. In C each stage runs over its samples in turn, as
 * Vitis C-simulation runs a DATAFLOW region, which computes the same
 * values as the overlapped hardware. Whole-batch work comes after the
 * pipelines: the gradient reduction, the loss and |delta| statistics (in
 * sample order), the norm checks, WU and the target update.
 *
 * Memory and reentrancy. Nothing is static: the activations, gradients and
 * per-pipeline WA accumulators live in the caller's workspace (an m_axi
 * buffer in a hardware build, one per learner instance), per-sample
 * vectors of at most LRN_MAX_WIDTH floats are locals (on-chip registers or
 * BRAM). So two learners may run the kernel at once on their own buffers.
 *
 * NOT here: fixed-point precisions, FIFOs between stages (C-simulation
 * only; never synthesised, placed or run on a board), any tool check of
 * the pragmas or interfaces.
 *
 * Agreement with the CPU learner (tests/test_fpga_learner.c). The same
 * parameters give the same outputs and gradients up to fp32 rounding: the
 * FW/BW/WA units sum products in input order one multiply-add at a time,
 * and the gradients per pipeline and then over the pipelines, while nn.c's
 * GEMM blocks its sums and fuses multiply-adds (FMA) where the CPU has
 * them; tanh is the CPU's own (common/rd_tanh.h), bit for bit. Tolerances,
 * per tensor, max |fpga - cpu| <= TOL * max(1, max |cpu|):
 *  - one FW or BW (outputs, weight and input gradients): TOL = 1e-5;
 *  - 20 train-steps from the same seed and batches: every online, target
 *    and Adam tensor at the end within TOL = 2e-4 (a fifth of one Adam
 *    step at the tests' lr 1e-3..2e-3, so a weight that misses one update
 *    fails); td_abs, losses, |delta| figures and the gradient norm at
 *    every step within 2e-5. Both hold for the suite's seeds on every CPU
 *    GEMM kernel with a margin of about 3; other seeds can drift further
 *    (docs/benchmarks.md has the figures).
 * Why whole steps drift further than one pass. Adam divides by
 * sqrt(v) + eps: where a gradient element sums to nearly zero (|g| near
 * eps = 1e-8; e.g. 7e-10 on one side, 5e-10 on the other, both rounding
 * noise) the two learners move that weight by different fractions of lr
 * (seen: up to 0.03 lr). And a decision at a near-tie (a relu unit at
 * z ~ 0, a Huber branch, a double-DQN argmax) can go the other way in one
 * learner: in the 3.2e-4 run one gradient element differs by a third at
 * step 14 and Adam's momentum carries the gap on. Errors of the algorithm
 * are larger: skipping the clip, the IS weights, the double-DQN choice,
 * (high - low)/2 in the actor's gradient or a 1% error in tau show as
 * 2e-3 .. 0.5 in the parameters (doubling Adam's eps: 1.1e-3).
 */
#ifndef RD_FPGA_LEARNER_KERNEL_H
#define RD_FPGA_LEARNER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Build limits: the widths of the on-chip per-sample vectors, the largest
 * network, batch and DP a build takes. A config beyond them is refused
 * (lrn_config_check; the kernel returns LRN_EINVAL and touches nothing). */
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
 * loop of FW and WA, the input loop of BW are unrolled by it.
 *
 * Per layer: LRN_UNITS_N<net>_L<l> is the MAC units of the FW, BW and WA
 * TUs of layer l of network net (0: the Q network or the actor, 1: the
 * critic), every pass of that layer (online, target) alike. This is the
 * model's allocation (backends/fpga/model.h, papers/001's pipeline local
 * optimization: TU i gets ceil(macs_i / T) units; the FW, BW and WA TUs of
 * one layer do in x out multiply-adds each, so they get the same), which
 * rd_fpga_learner_unit_defs writes as -D flags for a build of a plan. Each
 * (network, layer) has its own code (learner.c), so each can have its own
 * factor although the layer loop takes the shape at run time. Default:
 * LRN_UNITS for all. A TU is one loop over its in x out multiply-adds
 * unrolled by U (learner.c), ceil(in x out / U) cycles per sample: the
 * model's T_i for any U (tests/test_fpga_learner_units.c checks the units
 * against the model's, TU by TU). */
#ifndef LRN_UNITS
#define LRN_UNITS 8
#endif
#ifndef LRN_UNITS_N0_L0
#define LRN_UNITS_N0_L0 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L1
#define LRN_UNITS_N0_L1 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L2
#define LRN_UNITS_N0_L2 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L3
#define LRN_UNITS_N0_L3 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L4
#define LRN_UNITS_N0_L4 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L5
#define LRN_UNITS_N0_L5 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L6
#define LRN_UNITS_N0_L6 LRN_UNITS
#endif
#ifndef LRN_UNITS_N0_L7
#define LRN_UNITS_N0_L7 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L0
#define LRN_UNITS_N1_L0 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L1
#define LRN_UNITS_N1_L1 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L2
#define LRN_UNITS_N1_L2 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L3
#define LRN_UNITS_N1_L3 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L4
#define LRN_UNITS_N1_L4 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L5
#define LRN_UNITS_N1_L5 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L6
#define LRN_UNITS_N1_L6 LRN_UNITS
#endif
#ifndef LRN_UNITS_N1_L7
#define LRN_UNITS_N1_L7 LRN_UNITS
#endif
/* The (network, layer) pairs with their own units: 2 networks x 8 layers. */
#define LRN_UNIT_LAYERS 8
/* Largest parameter block: LRN_MAX_LAYERS layers of LRN_MAX_WIDTH^2 + bias. */
#define LRN_MAX_PARAMS ((size_t)LRN_MAX_LAYERS * LRN_MAX_WIDTH * (LRN_MAX_WIDTH + 1))

/* The chain of one pipeline (papers/001 §IV-B3): n = 3L stages. */
#define LRN_CHAIN_STAGES(L) (3u * (L))

enum { LRN_IDENTITY = 0, LRN_RELU = 1, LRN_TANH = 2 }; /* = rd_nn_act_t */
enum { LRN_ALGO_DQN = 1, LRN_ALGO_DDPG = 2 };          /* = rd_algo_t */

typedef struct {
  uint32_t n_layers;                    /* L, 1..LRN_MAX_LAYERS */
  uint32_t sizes[LRN_MAX_LAYERS + 1];   /* each 1..LRN_MAX_WIDTH */
  uint32_t act[LRN_MAX_LAYERS];
} lrn_shape_t;

/* Status codes. LRN_ERANGE: a non-finite loss or gradient norm; nothing
 * changed but td_abs and stats (see lrn_train_step). */
enum { LRN_OK = 0, LRN_EINVAL = 1, LRN_ERANGE = 2 };

/* 0 or LRN_EINVAL for a shape beyond this build's limits. */
int lrn_shape_check(const lrn_shape_t *s);

/* Floats of the flat parameter block. */
size_t lrn_n_params(const lrn_shape_t *s);

/* Label of chain stage i (0..3L-1) of an L-layer network, as model.c names
 * its TUs: FW0..FW(L-1), LOSS, BW(L-1)..BW1, WA0..WA(L-1). */
void lrn_stage_label(uint32_t L, uint32_t i, char *buf, size_t cap);

/* The build's MAC units of layer l of network net (LRN_UNITS_N<net>_L<l>);
 * 0 outside net < 2, l < LRN_UNIT_LAYERS. */
uint32_t lrn_units(uint32_t net, uint32_t l);

/* Samples per pipeline: ceil(B / DP). */
static inline uint32_t lrn_pi(uint32_t batch, uint32_t dp) { return (batch + dp - 1) / dp; }

/* ------------------------------------------------------------------ */
/* Stages (used by the train step; exported for tests)                */
/* ------------------------------------------------------------------ */

/* The activations one forward of n samples keeps for BW and WA (each FW TU
 * keeps its input for the samples in flight; here the whole batch): the
 * input [n x sizes[0]], then each layer's output [n x sizes[l+1]]. */
size_t lrn_acts_floats(const lrn_shape_t *s, uint32_t n);
/* The output [n x sizes[L]] inside acts. */
const float *lrn_acts_output(const lrn_shape_t *s, uint32_t n, const float *acts);

/* FW: acts (lrn_acts_floats(s, n)) from x [n x sizes[0]], over dp pipelines
 * of PI samples each; y [n x sizes[L]] (may be NULL) gets a copy of the
 * output. LRN_EINVAL (shape, dp, n beyond the limits) writes nothing. */
int lrn_forward(const lrn_shape_t *s, const float *params, uint32_t dp, uint32_t n,
                const float *x, float *y, float *acts);

/* LOSS gradient in -> BW (+ WA) -> reduction, after lrn_forward of the same
 * n and dp: grads (n_params, overwritten; NULL: BW only, no WA, as
 * rd_mlp_backward_input) = sum over the batch of dL/dtheta for dL/dy = dy
 * [n x sizes[L]]; acc is the WA accumulators, dp x n_params floats (unused
 * if grads is NULL); dx [n x sizes[0]] (may be NULL if grads is not)
 * = dL/dx. */
int lrn_backward(const lrn_shape_t *s, const float *params, uint32_t dp, uint32_t n,
                 const float *acts, const float *dy, float *grads, float *acc, float *dx);

/* WU, SGD: params -= lr * grads (papers/001's weight update). */
void lrn_sgd(const lrn_shape_t *s, float *params, const float *grads, float lr);

/* WU, Adam step t (1-based) as rd_mlp_adam_step: m, v updated in place. */
void lrn_adam(size_t np, float *params, const float *grads, float *m, float *v, double lr,
              double beta1, double beta2, double eps, uint64_t t);

/* Global L2 norm of g[0..np), in double, nn.c's order (rd_mlp_grad_norm). */
double lrn_grad_norm(size_t np, const float *g);

/* ------------------------------------------------------------------ */
/* The train step                                                      */
/* ------------------------------------------------------------------ */

/* A learner as the host describes it. DQN: net[0] is the Q network
 * (identity output, >= 2 actions). DDPG: net[0] the actor (tanh output),
 * net[1] the critic (input actor-input + actor-output, one identity
 * output). Hyper-parameters as rd_learner_config_t; beta1, beta2, eps are
 * Adam's (rd_adam_config_default: 0.9, 0.999, 1e-8). */
typedef struct {
  uint32_t algo;          /* LRN_ALGO_DQN or LRN_ALGO_DDPG */
  uint32_t dp;            /* pipelines, 1..LRN_MAX_DP */
  uint32_t batch;         /* largest batch (the workspace's), 1..LRN_MAX_BATCH */
  uint32_t double_dqn;    /* 0 or 1 */
  uint32_t target_period; /* > 0: hard copy every this many steps; 0: Polyak */
  lrn_shape_t net[2];
  double lr, critic_lr, tau, grad_clip, huber_delta, beta1, beta2, eps;
  float action_low, action_high;
} lrn_config_t;

/* Descriptor words and hyper-parameter slots of lrn_train_step. */
#define LRN_SHAPE_WORDS (1 + (LRN_MAX_LAYERS + 1) + LRN_MAX_LAYERS)
enum {
  LRN_D_ALGO = 0,
  LRN_D_DP,
  LRN_D_BATCH,
  LRN_D_DOUBLE_DQN,
  LRN_D_TARGET_PERIOD,
  LRN_D_NET0,
  LRN_D_NET1 = LRN_D_NET0 + LRN_SHAPE_WORDS,
  LRN_D_WORDS = LRN_D_NET1 + LRN_SHAPE_WORDS
};
enum {
  LRN_HP_LR = 0,
  LRN_HP_CRITIC_LR,
  LRN_HP_TAU,
  LRN_HP_GRAD_CLIP,
  LRN_HP_HUBER_DELTA,
  LRN_HP_BETA1,
  LRN_HP_BETA2,
  LRN_HP_EPS,
  LRN_HP_ACTION_LOW,
  LRN_HP_ACTION_HIGH,
  LRN_HP_COUNT
};
/* stats[] of lrn_train_step. */
enum {
  LRN_ST_LOSS = 0,       /* DQN: Huber; DDPG: critic MSE (IS-weighted) */
  LRN_ST_ACTOR_LOSS,     /* DDPG: -mean Q(s, mu(s)) */
  LRN_ST_TD_MEAN,        /* mean and max |delta| */
  LRN_ST_TD_MAX,
  LRN_ST_GRAD_NORM,      /* before clipping: DQN's Q network, DDPG's critic */
  LRN_ST_ACTOR_GRAD_NORM,
  LRN_ST_FAILED,         /* LRN_FAIL_*: what made the step LRN_ERANGE */
  LRN_ST_COUNT
};
enum {
  LRN_FAIL_NONE = 0,
  LRN_FAIL_LOSS,       /* DQN loss / DDPG critic loss not finite */
  LRN_FAIL_ACTOR_LOSS, /* DDPG actor loss not finite */
  LRN_FAIL_NORM,       /* DQN Q network's / DDPG critic's gradient norm */
  LRN_FAIL_ACTOR_NORM  /* DDPG actor's gradient norm */
};

/* Which limit a config breaks (lrn_config_check), for the host's message. */
typedef struct {
  uint32_t code;  /* 0: within the limits; else which check failed (learner.c) */
  uint32_t algo;  /* the config's, to name the network */
  uint32_t net;   /* 0 or 1 (c->net[]) */
  uint32_t layer; /* the layer or sizes[] index */
  uint32_t value; /* what the config has */
  uint32_t max;   /* what the build or the algorithm allows */
} lrn_why_t;

/* LRN_OK, or LRN_EINVAL with why (may be NULL) naming the first setting
 * beyond this build's limits or not what the algorithm needs. */
int lrn_config_check(const lrn_config_t *c, lrn_why_t *why);

/* "width 512 of net 0 layer 1 exceeds LRN_MAX_WIDTH (256)" and the like. */
void lrn_why_format(const lrn_why_t *why, char *buf, size_t cap);

/* The descriptor (LRN_D_WORDS) and hyper-parameters (LRN_HP_COUNT). */
void lrn_config_pack(const lrn_config_t *c, uint32_t *desc, double *hp);

/* Floats of params (= of target, adam_m, adam_v): all networks' blocks. */
size_t lrn_params_floats(const lrn_config_t *c);
/* Floats of the workspace for c (c->batch rows, c->dp pipelines). */
size_t lrn_ws_floats(const lrn_config_t *c);

/* The kernel top: one train-step on n rows (1..desc's batch).
 *   desc, hp      lrn_config_pack's output
 *   step          successful steps before this one (Adam's t = step + 1;
 *                 the hard target copy when (step + 1) % target_period == 0)
 *   params, target, adam_m, adam_v  lrn_params_floats each, updated in place
 *   ws            lrn_ws_floats, the kernel's scratch
 *   obs, next_obs [n x obs], reward, discount, weights [n] (IS weights; the
 *                 host passes ones for none), action_i [n] (DQN, in range),
 *                 action_f [n x action_dim] (DDPG); the host has checked them
 *                 (rd_learner_batch_validate)
 *   td_abs [n]    |delta|
 *   stats         LRN_ST_COUNT doubles
 * Returns LRN_OK; LRN_EINVAL for a descriptor beyond the build's limits or
 * n outside 1..batch (nothing written); LRN_ERANGE for a non-finite loss or
 * gradient norm (stats[LRN_ST_FAILED] says which; params, target and
 * moments unchanged; td_abs and stats hold what was computed). */
int lrn_train_step(const uint32_t *desc, const double *hp, uint64_t step, uint32_t n,
                   float *params, float *target, float *adam_m, float *adam_v, float *ws,
                   const float *obs, const int32_t *action_i, const float *action_f,
                   const float *reward, const float *discount, const float *next_obs,
                   const float *weights, float *td_abs, double *stats);

#ifdef __cplusplus
}
#endif

#endif
