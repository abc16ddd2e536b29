/* rd_gpu_elem.h - the GPU learner's per-element arithmetic, shared by the
 * CUDA kernels (backends/gpu/learner_gpu.cu) and the host.
 *
 * Every function here is what one CUDA thread computes for one element:
 * the Adam update of one parameter, an activation and its derivative, the
 * Huber / MSE loss term and gradient of one sample (IS-weighted), the
 * Polyak step of one target parameter, the DQN / DDPG target of one sample,
 * the action mapping of the DDPG critic input. They are written so the
 * device and the host compute the same bits as the CPU backend
 * (backends/cpu/nn.c, learner.c) on the same inputs:
 *
 *  - every float / double operation is spelled out in the CPU's order, and
 *    on the device goes through the round-to-nearest intrinsics
 *    (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __dmul_rn, ...), which
 *    nvcc never contracts into an FMA. So a device thread rounds exactly as
 *    an x86-64 core without FMA contraction does: the CPU backend's
 *    "generic" (SSE2) variant, and every plain loop of nn.c / learner.c on
 *    a baseline x86-64 build (no -march: gcc has no FMA to contract into).
 *    nn.c's AVX2 / AVX-512 Adam kernels are compiled with FMA enabled and
 *    may contract a * b + c; they can then differ from these functions in
 *    the last bit (tests/gpu/test_elem.c pins RD_NN_ISA=generic).
 *  - the host build of this header must not be compiled with FMA enabled
 *    (-mfma, -march=haswell or later) either, for the same reason.
 *  - tanh is common/rd_tanh.h's, written with the same intrinsics, so it
 *    too is the CPU's bits (glibc's and CUDA's tanhf differ by a few ulp).
 *
 * tests/gpu/test_elem.c (host only, no GPU) checks each function bit
 * for bit against the CPU backend's own functions; check_learner.cu
 * checks the device build against the host build on a GPU.
 *
 * C (gnu11) and CUDA C++; header-only.
 */
#ifndef RD_GPU_ELEM_H
#define RD_GPU_ELEM_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_tanh.h"

#if defined(__CUDACC__)
#define RD_GE static inline __host__ __device__
#else
#define RD_GE static inline
#endif

/* ---- uncontracted float / double arithmetic ---- */

/* The device's round-to-nearest intrinsic, or the host's plain operation. */
#if defined(__CUDA_ARCH__)
#define RD_GE_RN(device, host) (device)
#else
#define RD_GE_RN(device, host) (host)
#endif

RD_GE float rd_ge_fmul(float a, float b) { return RD_GE_RN(__fmul_rn(a, b), a * b); }
RD_GE float rd_ge_fadd(float a, float b) { return RD_GE_RN(__fadd_rn(a, b), a + b); }
RD_GE float rd_ge_fsub(float a, float b) { return RD_GE_RN(__fsub_rn(a, b), a - b); }
RD_GE float rd_ge_fdiv(float a, float b) { return RD_GE_RN(__fdiv_rn(a, b), a / b); }
RD_GE float rd_ge_fsqrt(float a) { return RD_GE_RN(__fsqrt_rn(a), sqrtf(a)); }
RD_GE double rd_ge_dmul(double a, double b) { return RD_GE_RN(__dmul_rn(a, b), a * b); }
RD_GE double rd_ge_dadd(double a, double b) { return RD_GE_RN(__dadd_rn(a, b), a + b); }
RD_GE double rd_ge_dsub(double a, double b) { return RD_GE_RN(__dsub_rn(a, b), a - b); }

/* ---- activations (codes of rd_nn_act_t: 0 identity, 1 relu, 2 tanh) ---- */

/* Layer output from the pre-activation product z and the bias b:
 * nn.c's forward adds the bias to the finished product (v = v + bias), then
 * relu as v > 0 ? v : 0 (so NaN -> 0) or rd_tanh. */
RD_GE float rd_ge_bias_act(float z, float b, int act) {
  float v = rd_ge_fadd(z, b);
  if (act == 1) return v > 0.0f ? v : 0.0f;
  if (act == 2) return rd_tanh(v);
  return v;
}

/* dz = da * act'(.) given the layer's output a (nn.c act_grad and the gated
 * backward product): relu a > 0 ? da : 0; tanh da * (1 - a a). */
RD_GE float rd_ge_act_grad(float a, float da, int act) {
  if (act == 1) return a > 0.0f ? da : 0.0f;
  if (act == 2) return rd_ge_fmul(da, rd_ge_fsub(1.0f, rd_ge_fmul(a, a)));
  return da;
}

/* ---- Adam (nn.h: torch.optim.Adam) ---- */

/* The per-step constants of rd_mlp_adam_step (nn.c adam_coef_t), same
 * field order. */
typedef struct {
  float b1, b2, g1, g2, step, inv_sqrt_bc2, eps;
} rd_ge_adam_coef_t;

/* Constants of Adam step t (1-based) as rd_mlp_adam_step computes them:
 * bias corrections in double, then rounded to float. Host only. */
static inline rd_ge_adam_coef_t rd_ge_adam_coef(double lr, double beta1, double beta2, double eps,
                                                uint64_t t) {
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  rd_ge_adam_coef_t k;
  k.b1 = (float)beta1;
  k.b2 = (float)beta2;
  k.g1 = (float)(1.0 - beta1);
  k.g2 = (float)(1.0 - beta2);
  k.step = (float)(lr / bc1);
  k.inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
  k.eps = (float)eps;
  return k;
}

/* One parameter: m = b1 m + g1 g; v = b2 v + g2 g g;
 * p = p - step m / (sqrt(v) inv_sqrt_bc2 + eps), evaluated left to right as
 * nn.c's RD_ADAM_KERNEL body; then an m or v below FLT_MIN is kept as 0, as
 * there (nn.h: no denormal moments). */
RD_GE void rd_ge_adam(float *p, float *m, float *v, float g, const rd_ge_adam_coef_t *c) {
  float mi = rd_ge_fadd(rd_ge_fmul(c->b1, *m), rd_ge_fmul(c->g1, g));
  float vi = rd_ge_fadd(rd_ge_fmul(c->b2, *v), rd_ge_fmul(rd_ge_fmul(c->g2, g), g));
  float den = rd_ge_fadd(rd_ge_fmul(rd_ge_fsqrt(vi), c->inv_sqrt_bc2), c->eps);
  *p = rd_ge_fsub(*p, rd_ge_fdiv(rd_ge_fmul(c->step, mi), den));
  *m = fabsf(mi) < FLT_MIN ? 0.0f : mi;
  *v = fabsf(vi) < FLT_MIN ? 0.0f : vi;
}

/* ---- gradient clipping (rd_mlp_clip_grad_norm) ---- */

/* The factor gradients are multiplied by when the norm exceeds max_norm. */
RD_GE float rd_ge_clip_scale(double max_norm, double norm) {
  return (float)RD_GE_RN(__ddiv_rn(max_norm, __dadd_rn(norm, 1e-6)), max_norm / (norm + 1e-6));
}

/* The clip decision and the go / no-go of a step (learner_gpu.cu
 * k_finalize; learner.c check_and_clip): net k's norm is sqrt(sumsq[k]);
 * it is clipped iff clip > 0 and norm > clip (clip 0: never), by the
 * factor rd_ge_clip_scale; the step goes ahead (returns 1) iff the loss,
 * for DDPG the Q sum, and every norm are finite. */
RD_GE int rd_ge_finalize(double loss, double qsum, int ddpg, int nets, const double *sumsq,
                         double clip, double *norm, int *clipped, float *scale) {
  int ok = isfinite(loss) && (!ddpg || isfinite(qsum));
  for (int k = 0; k < nets; k++) {
    double nrm = RD_GE_RN(__dsqrt_rn(sumsq[k]), sqrt(sumsq[k]));
    norm[k] = nrm;
    ok = ok && isfinite(nrm);
    clipped[k] = clip > 0 && nrm > clip;
    scale[k] = clipped[k] ? rd_ge_clip_scale(clip, nrm) : 1.0f;
  }
  return ok;
}

/* ---- the step's figures (learner_gpu.cu k_stats) ---- */

/* Sums of one step's loss terms, |TD| and (DDPG) Q(s, mu(s)) in double, the
 * largest |TD|, and whether one was NaN (then the max is NaN, as
 * learner.c's td_stats gives). k_stats runs RD_GE_STATS_THREADS threads:
 * thread t adds items t, t + T, t + 2T, ... in order, then the threads'
 * sums are merged pairwise (t += t + w for w = T/2, T/4, ..., 1);
 * rd_ge_stats_fold is that order on the host. */
#define RD_GE_STATS_THREADS 512
typedef struct {
  double loss, td, q, max;
  int nan;
} rd_ge_stats_t;

RD_GE void rd_ge_stats_add(rd_ge_stats_t *s, double elem, float td, double q) {
  s->loss += elem;
  s->td += (double)td;
  if (isnan(td)) s->nan = 1;
  else if ((double)td > s->max) s->max = td;
  s->q += q;
}

RD_GE void rd_ge_stats_merge(rd_ge_stats_t *a, const rd_ge_stats_t *b) {
  a->loss += b->loss;
  a->td += b->td;
  a->q += b->q;
  a->max = b->max > a->max ? b->max : a->max;
  a->nan |= b->nan;
}

/* Host only: k_stats's result for n items (qpi may be NULL: DQN). */
static inline rd_ge_stats_t rd_ge_stats_fold(size_t n, const double *elem, const float *td,
                                             const float *qpi) {
  static const rd_ge_stats_t zero = {0.0, 0.0, 0.0, 0.0, 0};
  rd_ge_stats_t t[RD_GE_STATS_THREADS];
  for (unsigned k = 0; k < RD_GE_STATS_THREADS; k++) {
    t[k] = zero;
    for (size_t i = k; i < n; i += RD_GE_STATS_THREADS)
      rd_ge_stats_add(&t[k], elem[i], td[i], qpi != NULL ? (double)qpi[i] : 0.0);
  }
  for (unsigned w = RD_GE_STATS_THREADS / 2; w > 0; w /= 2)
    for (unsigned k = 0; k < w; k++) rd_ge_stats_merge(&t[k], &t[k + w]);
  return t[0];
}

/* ---- target networks (rd_mlp_polyak) ---- */

/* Whether step `step` (1-based) hard-copies the targets: every period-th
 * (learner.c update_target); period 0 means Polyak, never a copy. */
RD_GE int rd_ge_copies_target(uint32_t period, uint64_t step) {
  return period > 0 && step % period == 0;
}

/* d = tau s + keep d with tau = (float)tau, keep = (float)(1 - tau). */
RD_GE float rd_ge_polyak(float d, float s, float tau, float keep) {
  return rd_ge_fadd(rd_ge_fmul(tau, s), rd_ge_fmul(keep, d));
}

/* ---- losses (rd_nn_mse, rd_nn_huber with dim 1) ---- */

/* Sample i of a loss over n samples: inv = 1 / n (in double, as the CPU's
 * 1 / (n * dim)), w the IS weight (1 if none). *dy receives dL/dy; the
 * return value is the sample's term w_i l(e_i) of the sum that, times inv,
 * is the loss. */
RD_GE double rd_ge_huber(float y, float t, float w, double inv, double delta, float *dy) {
  double wi = (double)w;
  double e = rd_ge_dsub((double)y, (double)t), ae = fabs(e), g, row;
  if (ae <= delta) {
    row = rd_ge_dadd(0.0, rd_ge_dmul(rd_ge_dmul(0.5, e), e));
    g = e;
  } else {
    row = rd_ge_dadd(0.0, rd_ge_dmul(delta, rd_ge_dsub(ae, rd_ge_dmul(0.5, delta))));
    g = e > 0 ? delta : -delta;
  }
  *dy = (float)rd_ge_dmul(rd_ge_dmul(wi, inv), g);
  return rd_ge_dmul(wi, row);
}

RD_GE double rd_ge_mse(float y, float t, float w, double inv, float *dy) {
  double wi = (double)w;
  double e = rd_ge_dsub((double)y, (double)t);
  double row = rd_ge_dadd(0.0, rd_ge_dmul(e, e));
  *dy = (float)rd_ge_dmul(rd_ge_dmul(rd_ge_dmul(2.0, wi), inv), e);
  return rd_ge_dmul(wi, row);
}

/* |delta| of one sample (learner.c td_stats): fabsf(q - y). */
RD_GE float rd_ge_td_abs(float q, float y) { return fabsf(rd_ge_fsub(q, y)); }

/* ---- targets and the DDPG action mapping (learner.c) ---- */

/* y = R + discount * Q'(s', a'). */
RD_GE float rd_ge_target(float reward, float discount, float qnext) {
  return rd_ge_fadd(reward, rd_ge_fmul(discount, qnext));
}

/* Index of the first maximum of row[0..A) (torch.argmax; learner.c dqn_shard). */
RD_GE uint32_t rd_ge_argmax(const float *row, uint32_t A) {
  uint32_t best = 0;
  for (uint32_t a = 1; a < A; a++)
    if (row[a] > row[best]) best = a;
  return best;
}

/* Largest of row[0..A) as plain DQN's target takes it. */
RD_GE float rd_ge_rowmax(const float *row, uint32_t A) {
  float best = row[0];
  for (uint32_t a = 1; a < A; a++)
    if (row[a] > best) best = row[a];
  return best;
}

/* Critic input of a tanh output y: low + (y + 1) / 2 (high - low), written
 * as learner.c critic_input_from_policy: lo + (y + 1.0f) * 0.5f * range. */
RD_GE float rd_ge_action_from_tanh(float y, float lo, float range) {
  return rd_ge_fadd(lo, rd_ge_fmul(rd_ge_fmul(rd_ge_fadd(y, 1.0f), 0.5f), range));
}

/* dL/dy of the actor output from dL/da: dx * half_range (learner.c ddpg_shard). */
RD_GE float rd_ge_dmu(float dx, float half_range) { return rd_ge_fmul(dx, half_range); }

#endif
