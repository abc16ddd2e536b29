/* nn.h - multilayer perceptrons on the CPU: forward, backward, losses, Adam,
 * gradient clipping and target-network updates.
 *
 * The learner of a hosted workload (papers/001 §II-A2: forward, loss,
 * backward, weight update per gradient step; §IV-B2: on the CPU the paper
 * uses PyTorch, this replaces it). Shapes come from an rd_nn_spec_t
 * (rd_nn_spec.h); the parameters live in one float array in the flat
 * format's layout (per layer W [out x in] row-major, then b [out]), so
 * serializing, Adam, clipping and Polyak averaging are single passes over
 * one array.
 *
 * Batches are row-major [n x width]: sample i's features are contiguous.
 * Dense work is a packed, register-blocked GEMM of nn.c's own (GotoBLAS
 * blocking, one micro-kernel body compiled for SSE2, AVX2+FMA and AVX-512
 * and picked once from the CPU; RD_NN_ISA=generic|avx2|avx512 forces one,
 * rd_mlp_isa names it). Bias and relu are fused into the forward product,
 * act' into the backward one. With config.threads > 1 a product of at
 * least 2^18 multiply-adds is split over OpenMP threads by whole tiles of
 * its output rows or columns; other element-wise loops are split only when
 * they have at least RD_MLP_OMP_MIN elements, because for the small
 * networks of RL a thread team costs more than the loop.
 *
 * config.threads is a maximum. A parallel region that takes much longer
 * than the calling thread's own share (more than twice it, plus 0.2 ms)
 * means the team was slow to assemble: another process holds the cores, and
 * a sleeping OpenMP thread may then be woken only at the next scheduler
 * tick. Every network of the process then runs on its
 * calling thread for a backoff time (10 ms, doubled by each slow region up
 * to 1 s, halved by each prompt one) before it tries a team again. This
 * changes speed only, never results (below). On such machines run a process
 * that uses threads > 1 with OMP_WAIT_POLICY=passive: a libgomp thread left
 * spinning between regions (its default) stalls the calling thread itself
 * for whole ticks while another process is busy (docs/benchmarks.md).
 *
 * Determinism. For a seed, init gives the same weights everywhere (Philox,
 * below). Every reduction runs in a fixed order that does not depend on the
 * thread count: a product's element is one fixed sequence of FMAs over the
 * inner dimension whichever thread computes it (threads split outputs,
 * never the sum; which kernel runs depends on the shape only), bias
 * gradients are column sums in row order, the norm sums 16 fixed lanes.
 * So a given build on a given CPU (instruction-set variant) produces
 * bit-identical weights and outputs for the same calls, whatever
 * config.threads is. Different variants round differently (FMA or not).
 * No BLAS is called, so no BLAS thread pool competes with the caller's.
 *
 * Allocation. rd_mlp_init allocates everything for batches up to
 * max_batch: parameters, gradients, Adam moments, activations, backward
 * scratch and per-thread GEMM packing buffers. No other call allocates.
 *
 * Thread safety: none inside; the caller serializes calls on one network.
 * Distinct networks may be used from distinct threads.
 */
#ifndef RD_NN_H
#define RD_NN_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "rd_nn_spec.h"

#define RD_MLP_MAX_BATCH (1u << 20)
#define RD_MLP_MAX_THREADS 64u
/* Element-wise loops shorter than this stay on the calling thread. */
#define RD_MLP_OMP_MIN 32768u
/* Init draws use Philox counters from 2^63 on, so a network and a table
 * keyed by the same seed never share draws (a table uses counters from 0). */
#define RD_MLP_INIT_DRAW0 (UINT64_C(1) << 63)

typedef struct {
  rd_nn_spec_t spec;
  uint32_t max_batch;  /* largest forward batch, 1..RD_MLP_MAX_BATCH; default 256 */
  uint64_t seed;       /* weight initialisation; default 0 */
  uint32_t threads;    /* OpenMP threads for large products and loops, 0..RD_MLP_MAX_THREADS
                        * (0 = 1); default 1 */
  int inference_only;  /* no gradients or Adam state (target networks, actors) */
} rd_mlp_config_t;

/* Adam (Kingma & Ba 2015) exactly as torch.optim.Adam (no weight decay):
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  t += 1
 *   theta -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * so learning rates tuned against the PyTorch baseline carry over; theta
 * moves by the m and v just computed, but an m or v below FLT_MIN is kept
 * as 0. Why: a parameter whose gradient stays 0 (a dead ReLU unit's) has
 * m decay into the denormals, where 0.9 m rounds back to the smallest one
 * and stays there, and every Adam step after pays the CPU's slow path on
 * it (docs/benchmarks.md, "Denormal Adam moments"). The move such an m
 * makes is below half an ulp of any parameter not itself within about
 * 1e-30 of 0. The GPU's (rd_gpu_elem.h) and the FPGA kernel's Adam do the
 * same. */
typedef struct {
  double lr;    /* > 0; default 1e-3 */
  double beta1; /* [0, 1); default 0.9 */
  double beta2; /* [0, 1); default 0.999 */
  double eps;   /* > 0; default 1e-8 */
} rd_adam_config_t;

typedef struct rd_mlp_kernel rd_mlp_kernel_t; /* nn.c: one instruction set's GEMM kernel */

typedef struct rd_mlp {
  rd_nn_spec_t spec;
  uint32_t max_batch, threads;
  const rd_mlp_kernel_t *kernel;
  int trainable;
  size_t n_params;
  size_t w_off[RD_NN_MAX_LAYERS]; /* W_l at params + w_off[l], b_l right after */
  size_t b_off[RD_NN_MAX_LAYERS];
  float *params;  /* n_params, flat-format layout */
  float *grads;   /* n_params, same layout; NULL if inference_only */
  float *adam_m;  /* first moments; NULL if inference_only */
  float *adam_v;  /* second moments; NULL if inference_only */
  uint64_t adam_t; /* Adam steps taken */
  float *input;   /* max_batch x sizes[0]: the last forward's input */
  float *act[RD_NN_MAX_LAYERS]; /* max_batch x sizes[l+1]: layer outputs */
  float *delta[2]; /* max_batch x max width: backward ping-pong; NULL if inference_only */
  float *pack;    /* threads x pack_floats: GEMM packing buffers, one set per thread */
  size_t pack_floats, pack_b_off;
  uint32_t fwd_batch; /* batch of the last forward if backward may use it, else 0 */
  int view;           /* a shard view: params borrowed from its owner (rd_mlp_init_view) */
  /* Prepacked weights (below): the large layers' W^T (forward) and W
   * (backward) as the GEMM packs them, at bpre + bpre_off[l][0 or 1],
   * bpre_len floats (0: not packed), used while bpre_on. A view uses
   * those of bpre_from (its owner) while it reads the same params. */
  float *bpre;
  size_t bpre_off[RD_NN_MAX_LAYERS][2], bpre_len[RD_NN_MAX_LAYERS][2];
  int bpre_on;
  const struct rd_mlp *bpre_from;
} rd_mlp_t;

void rd_mlp_config_default(rd_mlp_config_t *c);
void rd_adam_config_default(rd_adam_config_t *c);

/* Validate c, allocate, and initialise the weights from c->seed:
 * W_l[k] = (2u - 1) * limit_l, u = (philox(seed, RD_MLP_INIT_DRAW0 + g) >> 40)
 * * 2^-24 where g is the weight's index in the parameter block;
 * limit_l = sqrt(6 / in) for relu layers (He et al. 2015, uniform) and
 * sqrt(6 / (in + out)) for tanh and identity (Glorot & Bengio 2010);
 * biases 0. Errors: RD_EINVAL (spec, max_batch, threads), RD_ENOMEM. */
int rd_mlp_init(rd_mlp_t *m, const rd_mlp_config_t *c, rd_error_t *err);

/* RD_EINVAL unless max_batch is in [1, RD_MLP_MAX_BATCH] and threads at
 * most RD_MLP_MAX_THREADS (rd_mlp_init's limits, for a caller that checks
 * a configuration before it builds networks). */
int rd_mlp_check_limits(uint32_t max_batch, uint32_t threads, rd_error_t *err);
void rd_mlp_free(rd_mlp_t *m);

/* A shard view of owner, for the learner's data-parallel step (learner.h:
 * shards): its own input, activations and backward buffers for up to
 * max_rows rows, its own gradients if with_grads, one thread, no Adam
 * state, and the owner's parameters, borrowed: forward, backward and
 * backward_input on the view compute with the owner's current weights.
 * Adam, clipping, Polyak and copies into it, and loads refuse a view
 * (RD_EINVAL). rd_mlp_free frees what the view owns, never the owner's
 * parameters; free views before their owner. RD_EINVAL, RD_ENOMEM. */
int rd_mlp_init_view(rd_mlp_t *v, const rd_mlp_t *owner, uint32_t max_rows, int with_grads,
                     rd_error_t *err);

/* Prepacked weights. The GEMM copies B into panels before its products; a
 * forward pass's B is W^T and a backward pass's is W, the same for every
 * shard of a step, so the learner packs them once a step instead of once
 * per shard and pass. rd_mlp_prepack_init allocates m's buffer (m not a
 * view; RD_EINVAL, RD_ENOMEM). The packing is in rd_mlp_prepack_parts(m)
 * parts (a layer's forward or backward B; none for the backward of an
 * inference-only network), which different threads may pack at once;
 * rd_mlp_prepack_floats says how much each copies. rd_mlp_prepack_use(m,
 * 1), after every part, makes forward and backward on m, and on views
 * reading m's params, use them (the same bits: packing only copies);
 * rd_mlp_prepack_use(m, 0) stops that, and must come before anything
 * writes m's weights. */
int rd_mlp_prepack_init(rd_mlp_t *m, rd_error_t *err);
uint32_t rd_mlp_prepack_parts(const rd_mlp_t *m);
size_t rd_mlp_prepack_floats(const rd_mlp_t *m, uint32_t part);
void rd_mlp_prepack_part(rd_mlp_t *m, uint32_t part);
void rd_mlp_prepack_use(rd_mlp_t *m, int on);

/* The GEMM variant in use: "generic", "avx2" or "avx512". */
const char *rd_mlp_isa(const rd_mlp_t *m);

/* The plain products of layer l (in -> out) that forward and backward run,
 * for n <= max_batch rows, all matrices row-major:
 *   RD_MLP_GEMM_FORWARD  c[n x out] = a[n x in] b^T, b = W [out x in]
 *   RD_MLP_GEMM_GRAD_W   c[out x in] = a^T b, a = dZ [n x out], b = X [n x in]
 *   RD_MLP_GEMM_GRAD_X   c[n x in] = a b, a = dZ [n x out], b = W [out x in]
 * with the network's kernel, packing buffers and threads (no bias,
 * activation or gate: what a BLAS sgemm computes). For benchmarks: nn.c
 * keeps its own GEMM instead of a BLAS, and bench_gemm shows on the
 * machine at hand what that costs or gains on the learner's shapes. */
typedef enum { RD_MLP_GEMM_FORWARD, RD_MLP_GEMM_GRAD_W, RD_MLP_GEMM_GRAD_X } rd_mlp_gemm_t;
int rd_mlp_layer_gemm(rd_mlp_t *m, uint32_t l, rd_mlp_gemm_t which, size_t n, const float *a,
                      const float *b, float *c, rd_error_t *err);

/* y = net(x) for n samples, x [n x sizes[0]] (copied in). The output stays
 * in rd_mlp_output(m) until the next forward; y (may be NULL) also gets a
 * copy [n x sizes[L]]. NaN inputs propagate; they are not checked here.
 * Errors: RD_EINVAL (n == 0), RD_ETOOBIG (n > max_batch). */
int rd_mlp_forward(rd_mlp_t *m, size_t n, const float *x, float *y, rd_error_t *err);

/* Gradients of the last forward: given dy = dL/dy [n x sizes[L]], sets
 * rd_mlp_grads(m) to dL/dtheta (overwriting) and, if dx is not NULL,
 * writes dL/dx [n x sizes[0]] (DDPG's actor update needs dQ/da).
 * Errors: RD_EINVAL if the network is inference-only or no forward is
 * pending (none yet, or parameters changed since: step, copy, polyak, load). */
int rd_mlp_backward(rd_mlp_t *m, const float *dy, float *dx, rd_error_t *err);

/* Only dL/dx of the last forward: like rd_mlp_backward but the gradients
 * (rd_mlp_grads) are left as they are and no weight-gradient product is
 * computed, about a third of a backward's work less. DDPG's actor step
 * takes dQ/da from the critic this way without disturbing the critic's own
 * gradients. dx must not be NULL. Errors as rd_mlp_backward. */
int rd_mlp_backward_input(rd_mlp_t *m, const float *dy, float *dx, rd_error_t *err);

/* One Adam step on the current gradients. RD_EINVAL for bad
 * hyperparameters or an inference-only network; changes nothing then. */
int rd_mlp_adam_step(rd_mlp_t *m, const rd_adam_config_t *c, rd_error_t *err);

/* Adam in pieces, for a caller that splits the parameters over its own
 * threads (the learner's team updates the blocks it has just summed).
 * rd_mlp_adam_begin checks c as rd_mlp_adam_step does (same errors, nothing
 * changed then), counts the step and sets *k; rd_mlp_adam_range then moves
 * the parameters [lo, hi). Ranges that cover [0, n_params) once each, every
 * lo a multiple of 16, in any order and on any threads, give the bits of
 * one rd_mlp_adam_step. Ranges are not checked. */
typedef struct {
  float b1, b2, g1, g2, step, inv_sqrt_bc2, eps;
} rd_adam_coef_t;
int rd_mlp_adam_begin(rd_mlp_t *m, const rd_adam_config_t *c, rd_adam_coef_t *k,
                      rd_error_t *err);
void rd_mlp_adam_range(rd_mlp_t *m, const rd_adam_coef_t *k, size_t lo, size_t hi);

/* Global L2 norm of the gradients, accumulated in double in a fixed order. */
double rd_mlp_grad_norm(const rd_mlp_t *m);

/* Scale the gradients by max_norm / (norm + 1e-6) if their global L2 norm
 * exceeds max_norm (as torch.nn.utils.clip_grad_norm_). *norm (may be NULL)
 * receives the norm before clipping. Errors: RD_EINVAL (max_norm not a
 * positive finite number, inference-only), RD_ERANGE (the norm is not
 * finite: the gradients are left as they are, and the caller should skip
 * the step). */
int rd_mlp_clip_grad_norm(rd_mlp_t *m, double max_norm, double *norm, rd_error_t *err);

/* Clipping in pieces (as Adam above): rd_mlp_clip_begin computes and checks
 * the norm as rd_mlp_clip_grad_norm does, without scaling, and sets *scale
 * to the factor it would apply, or 0 when the norm is within max_norm;
 * rd_mlp_scale_grads_range(m, scale, lo, hi) then scales [lo, hi). */
int rd_mlp_clip_begin(rd_mlp_t *m, double max_norm, double *norm, float *scale,
                      rd_error_t *err);
void rd_mlp_scale_grads_range(rd_mlp_t *m, float scale, size_t lo, size_t hi);

/* Target networks. Hard: dst = src. Polyak: dst = tau src + (1 - tau) dst,
 * tau in (0, 1]. Only parameters move (not Adam state). RD_EINVAL if the
 * specs differ or tau is out of range. */
int rd_mlp_copy_params(rd_mlp_t *dst, const rd_mlp_t *src, rd_error_t *err);
int rd_mlp_polyak(rd_mlp_t *dst, const rd_mlp_t *src, double tau, rd_error_t *err);

/* Polyak in pieces (as Adam above): rd_mlp_polyak_begin checks as
 * rd_mlp_polyak does; rd_mlp_polyak_range then averages [lo, hi). */
int rd_mlp_polyak_begin(rd_mlp_t *dst, const rd_mlp_t *src, double tau, rd_error_t *err);
void rd_mlp_polyak_range(rd_mlp_t *dst, const rd_mlp_t *src, double tau, size_t lo, size_t hi);

/* The parameters in the flat weight format (rd_nn_spec.h). Save: errors of
 * rd_nn_flat_write. Load: the buffer's spec must equal m's (RD_EINVAL);
 * Adam state is kept. */
int rd_mlp_save(const rd_mlp_t *m, void *buf, size_t cap, size_t *written, rd_error_t *err);
int rd_mlp_load(rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err);

/* The whole training state of a network, for checkpoints: its parameters
 * in the flat format, and for a trainable network Adam's two moments and
 * step count. Loading it into a network of the same spec and trainability
 * and making the same calls gives bit-identical results to never having
 * saved. Layout (little-endian): u32 "RDMS", u32 trainable, u64 adam_t,
 * u64 flat bytes, the flat format, then adam_m and adam_v (n_params floats
 * each, trainable only). Check and load refuse a buffer of another spec,
 * trainability or length, or with a non-finite value (RD_EINVAL naming
 * it); load changes nothing then. A view refuses (RD_EINVAL). */
size_t rd_mlp_state_bytes(const rd_mlp_t *m);
int rd_mlp_state_save(const rd_mlp_t *m, void *buf, size_t cap, size_t *written, rd_error_t *err);
int rd_mlp_state_check(const rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err);
int rd_mlp_state_load(rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err);

/* The tanh activation the networks apply: rd_tanh (common/rd_tanh.h), a
 * vectorizable form within 3 ulp of the exact value, shared with the GPU. */
float rd_nn_tanh(float x);

/* Losses over n samples of dim outputs, with per-sample importance weights
 * w (NULL: all 1), averaged over the n * dim elements as PyTorch's "mean"
 * reduction does:  L = (1 / (n dim)) sum_i w_i sum_j l(y_ij - t_ij).
 *   MSE:   l(e) = e^2                                   (torch MSELoss)
 *   Huber: l(e) = e^2 / 2 if |e| <= delta, else delta (|e| - delta / 2)
 *                                                       (torch HuberLoss)
 * *loss (double, may be NULL) receives L and dy [n x dim] (may be NULL)
 * receives dL/dy. Errors: RD_EINVAL (n or dim 0, delta not positive and
 * finite, a weight negative or not finite). */
int rd_nn_mse(size_t n, size_t dim, const float *y, const float *target, const float *w,
              float *dy, double *loss, rd_error_t *err);
int rd_nn_huber(size_t n, size_t dim, const float *y, const float *target, const float *w,
                double delta, float *dy, double *loss, rd_error_t *err);

/* Only the rows [lo, lo + m) of rd_nn_huber's dy over a batch of n (y,
 * target, w and dy are the whole batch's arrays), bit for bit what the
 * whole-batch call writes there: a data-parallel step's shard writes its
 * own rows' gradient and runs its backward pass at once, and the loss is
 * summed over the batch afterwards. Errors as rd_nn_huber's, for these
 * rows; RD_EINVAL also if the rows are not inside the batch. */
int rd_nn_huber_rows(size_t n, size_t lo, size_t m, size_t dim, const float *y,
                     const float *target, const float *w, double delta, float *dy,
                     rd_error_t *err);

/* Parameters and gradients in the flat-format layout. A caller may write
 * either (e.g. to load, or to scale gradients); after writing parameters,
 * forward again before a backward, which reuses the last forward's state. */
static inline float *rd_mlp_params(rd_mlp_t *m) { return m->params; }
static inline float *rd_mlp_grads(rd_mlp_t *m) { return m->grads; }
static inline size_t rd_mlp_n_params(const rd_mlp_t *m) { return m->n_params; }
/* Output of layer l (0-based) of the last forward, [n x sizes[l+1]]. */
static inline const float *rd_mlp_activation(const rd_mlp_t *m, uint32_t l) {
  return m->act[l];
}
static inline const float *rd_mlp_output(const rd_mlp_t *m) {
  return m->act[m->spec.n_layers - 1];
}

#endif
