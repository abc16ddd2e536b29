/* learner_gpu.cu - DQN and DDPG train-steps on a CUDA device (learner_gpu.h).
 *
 * Layout. Each network keeps its parameters in one device array in the
 * flat-format layout (rd_nn_spec.h: per layer W [out x in] row-major, then
 * b), as the CPU backend does, with gradients and Adam moments alongside
 * for online networks. Batches are row-major [rows x width]. cuBLAS is
 * column-major, so a row-major [r x c] matrix is its column-major [c x r]
 * transpose, and the three products of a layer (in, out, n rows) are:
 *   forward   Z^T (out x n)  = W (T: in x out stored)  * A^T (in x n)
 *   dW        dW^T (in x out) = A^T (in x n)  * dZ (T: out x n stored)
 *   dA        dA^T (in x n)  = W^T (in x out) * dZ^T (out x n)
 * and db = dZ^T 1 is an SGEMV with a ones vector.
 *
 * One step is enqueued by enqueue_step(); it runs either directly on the
 * stream or inside a captured graph (learner_gpu.h). It begins with the
 * host-to-device copy of the pinned batch and the step's control block
 * (Adam constants for step t + 1, whether this step hard-copies targets),
 * and ends with the device-to-host copy of |TD| and the result block.
 */
#include "learner_gpu.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fail.h"
#include "rd_gpu_elem.h"

enum { NET_Q = 0, NET_Q_TARGET = 1 };
enum { NET_ACTOR = 0, NET_ACTOR_TARGET = 1, NET_CRITIC = 2, NET_CRITIC_TARGET = 3 };

#define RED_THREADS RD_GE_STATS_THREADS /* k_stats's block: rd_ge_stats_fold's order */
#define NORM_PARTS 256
#define WS_BYTES (32u << 20) /* cuBLAS workspace: set explicitly so capture never allocates */

/* Host -> device, once per step. */
typedef struct {
  rd_ge_adam_coef_t adam[2]; /* [0] Q / actor, [1] critic */
  int do_copy;               /* hard target copy this step */
} ctl_t;

/* Device -> host, once per step. */
typedef struct {
  double loss, qsum, td_sum, td_max;
  double norm[2];     /* [0] Q / actor, [1] critic, before clipping */
  int ok;             /* every loss and norm finite: the weights moved */
  int clipped[2];
  float scale[2];
} res_t;

typedef struct {
  rd_nn_spec_t spec;
  uint32_t L;
  size_t n_params;
  size_t w_off[RD_NN_MAX_LAYERS], b_off[RD_NN_MAX_LAYERS];
  float *p, *g, *m, *v;            /* g, m, v NULL for targets */
  float *act[RD_NN_MAX_LAYERS];    /* max_batch x sizes[l+1] */
  float *delta[2];                 /* max_batch x max width; online only */
  const float *in;                 /* input of the last forward */
  size_t rows;
  uint64_t adam_t;
} gnet_t;

struct rd_gpu_learner_impl {
  cudaStream_t stream;
  cublasHandle_t blas;
  void *ws;
  gnet_t net[4];
  /* device scratch */
  unsigned char *d_batch; /* packed batch */
  ctl_t *d_ctl;
  res_t *d_res;
  double *d_elem;         /* per-sample loss terms */
  double *d_part;         /* 2 x NORM_PARTS norm partial sums */
  float *y, *q, *dq, *td, *dy, *x, *dx, *dmu, *dq_pi, *ones;
  /* pinned host */
  unsigned char *h_batch;
  ctl_t *h_ctl;
  res_t *h_res;
  float *h_td;
  float *h_params;
  size_t batch_bytes, max_params, dev_bytes;
  /* graph of the last batch size seen twice in a row */
  int graphs_on;
  int fail_capture; /* tests: break the next capture (rd_gpu_learner_fail_next_capture) */
  cudaGraphExec_t gexec;
  size_t graph_n, last_n;
};

/* ---- errors ---- */

static int blas_fail(rd_error_t *err, cublasStatus_t s, const char *what) {
  int code = s == CUBLAS_STATUS_ALLOC_FAILED ? RD_ENOMEM : RD_EINTERNAL;
  return rd_error_set(err, code, "cuBLAS %s failed: %s (%s)", what, cublasGetStatusName(s),
                      cublasGetStatusString(s));
}

#define BK(call, what) RD_CK_STATUS(cublasStatus_t, call, CUBLAS_STATUS_SUCCESS, blas_fail, what)

/* A launch error (bad configuration) is reported at once. */
#define LK(what) RD_CUDA_CK(cudaGetLastError(), what)

/* ---- kernels ---- */

static unsigned grid_for(size_t n, unsigned threads) {
  size_t b = (n + threads - 1) / threads;
  if (b > 8192) b = 8192;
  return b ? (unsigned)b : 1u;
}

#define GRID_STRIDE(i, n)                                                                     \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                     \
       i += (size_t)gridDim.x * blockDim.x)

/* z[r][j] = act(z[r][j] + b[j]) over rows x out. */
__global__ void k_bias_act(float *z, const float *b, size_t total, uint32_t out, int act) {
  GRID_STRIDE(i, total) z[i] = rd_ge_bias_act(z[i], b[i % out], act);
}

/* dz = act_grad(a, dz) in place. */
__global__ void k_act_grad(float *dz, const float *a, size_t total, int act) {
  GRID_STRIDE(i, total) dz[i] = rd_ge_act_grad(a[i], dz[i], act);
}

/* dz = act_grad(a, dy) from a separate input. */
__global__ void k_act_grad2(float *dz, const float *dy, const float *a, size_t total, int act) {
  GRID_STRIDE(i, total) dz[i] = rd_ge_act_grad(a[i], dy[i], act);
}

/* DQN targets from Q'(s', .) and, for double DQN, Q(s', .). */
__global__ void k_dqn_targets(size_t n, uint32_t A, const float *qn_t, const float *qn,
                              const float *reward, const float *discount, float *y) {
  GRID_STRIDE(i, n) {
    float v;
    if (qn != NULL)
      v = qn_t[i * A + rd_ge_argmax(qn + i * A, A)];
    else
      v = rd_ge_rowmax(qn_t + i * A, A);
    y[i] = rd_ge_target(reward[i], discount[i], v);
  }
}

/* DQN loss on the taken action: q, dL/dQ(s, .) (zero but for the action),
 * the sample's loss term and |delta|. */
__global__ void k_dqn_loss(size_t n, uint32_t A, const float *qs, const int32_t *action,
                           const float *y, const float *w, double inv, double delta, float *q,
                           float *dy, double *elem, float *td) {
  GRID_STRIDE(i, n) {
    const uint32_t a = (uint32_t)action[i];
    const float qi = qs[i * A + a];
    float g;
    elem[i] = rd_ge_huber(qi, y[i], w[i], inv, delta, &g);
    q[i] = qi;
    td[i] = rd_ge_td_abs(qi, y[i]);
    for (uint32_t k = 0; k < A; k++) dy[i * A + k] = k == a ? g : 0.0f;
  }
}

/* Critic input [obs, low + (y + 1)/2 range] from the actor's tanh outputs. */
__global__ void k_critic_in_policy(size_t n, uint32_t O, uint32_t D, const float *obs,
                                   const float *ya, float lo, float range, float *x) {
  const uint32_t X = O + D;
  GRID_STRIDE(k, n * X) {
    size_t i = k / X;
    uint32_t j = (uint32_t)(k % X);
    x[k] = j < O ? obs[i * O + j] : rd_ge_action_from_tanh(ya[i * D + (j - O)], lo, range);
  }
}

/* Critic input [obs, action]. */
__global__ void k_critic_in_actions(size_t n, uint32_t O, uint32_t D, const float *obs,
                                    const float *act, float *x) {
  const uint32_t X = O + D;
  GRID_STRIDE(k, n * X) {
    size_t i = k / X;
    uint32_t j = (uint32_t)(k % X);
    x[k] = j < O ? obs[i * O + j] : act[i * D + (j - O)];
  }
}

/* DDPG critic: y = R + discount Q'(s', mu'(s')), MSE of Q(s, a). */
__global__ void k_ddpg_loss(size_t n, const float *qn_t, const float *qs, const float *reward,
                            const float *discount, const float *w, double inv, float *y,
                            float *dq, double *elem, float *td) {
  GRID_STRIDE(i, n) {
    const float yi = rd_ge_target(reward[i], discount[i], qn_t[i]);
    float g;
    elem[i] = rd_ge_mse(qs[i], yi, w[i], inv, &g);
    y[i] = yi;
    dq[i] = g;
    td[i] = rd_ge_td_abs(qs[i], yi);
  }
}

__global__ void k_fill(float *v, size_t n, float x) {
  GRID_STRIDE(i, n) v[i] = x;
}

/* dL/d(actor output) from the action columns of dL/d[s, a]. */
__global__ void k_dmu(size_t n, uint32_t O, uint32_t D, const float *dx, float half_range,
                      float *dmu) {
  GRID_STRIDE(k, n * D) {
    size_t i = k / D;
    uint32_t j = (uint32_t)(k % D);
    dmu[k] = rd_ge_dmu(dx[i * (O + D) + O + j], half_range);
  }
}

/* One block of RED_THREADS: the loss (sum of terms times inv), |TD| sum
 * and max (NaN if any is NaN, as td_stats), and for DDPG the sum of
 * Q(s, mu(s)), in the fixed order of rd_ge_stats_fold: deterministic. */
__global__ void k_stats(size_t n, const double *elem, const float *td, const float *qpi,
                        double inv, res_t *res) {
  __shared__ rd_ge_stats_t s[RED_THREADS];
  const unsigned t = threadIdx.x;
  rd_ge_stats_t a = {0.0, 0.0, 0.0, 0.0, 0};
  for (size_t i = t; i < n; i += RED_THREADS)
    rd_ge_stats_add(&a, elem[i], td[i], qpi != NULL ? (double)qpi[i] : 0.0);
  s[t] = a;
  __syncthreads();
  for (unsigned w = RED_THREADS / 2; w > 0; w /= 2) {
    if (t < w) rd_ge_stats_merge(&s[t], &s[t + w]);
    __syncthreads();
  }
  if (t == 0) {
    res->loss = s[0].loss * inv;
    res->td_sum = s[0].td;
    res->td_max = s[0].nan ? (double)NAN : s[0].max;
    res->qsum = s[0].q;
  }
}

/* Partial sums of g^2 in double: block b covers a fixed range. */
__global__ void k_sumsq(const float *g, size_t n, double *part) {
  __shared__ double s[256];
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t lo = per * blockIdx.x, hi = lo + per < n ? lo + per : n;
  double acc = 0.0;
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) acc += (double)g[i] * g[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

/* One thread: norms, clip factors and the go / no-go of the step. */
__global__ void k_finalize(res_t *res, const double *part, int nparts0, int nparts1, int nets,
                           int ddpg, double clip) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double sumsq[2] = {0.0, 0.0};
  for (int k = 0; k < nets; k++) {
    const double *p = part + k * NORM_PARTS;
    int np = k == 0 ? nparts0 : nparts1;
    for (int i = 0; i < np; i++) sumsq[k] += p[i];
  }
  res->ok = rd_ge_finalize(res->loss, res->qsum, ddpg, nets, sumsq, clip, res->norm,
                           res->clipped, res->scale);
}

/* Clip (scaled gradients are stored, as the CPU does) and Adam, if the step
 * is good. */
__global__ void k_adam(float *p, float *g, float *m, float *v, size_t n, const ctl_t *ctl,
                       const res_t *res, int k) {
  if (!res->ok) return;
  const rd_ge_adam_coef_t c = ctl->adam[k];
  const int clipped = res->clipped[k];
  const float scale = res->scale[k];
  GRID_STRIDE(i, n) {
    float gi = g[i];
    if (clipped) g[i] = gi = rd_ge_fmul(gi, scale);
    float pi = p[i], mi = m[i], vi = v[i];
    rd_ge_adam(&pi, &mi, &vi, gi, &c);
    p[i] = pi, m[i] = mi, v[i] = vi;
  }
}

/* Target update, if the step is good: hard copy when ctl says so (period
 * mode), else Polyak (tau mode, period 0). */
__global__ void k_target(float *d, const float *s, size_t n, const ctl_t *ctl, const res_t *res,
                         int period_mode, float tau, float keep) {
  if (!res->ok) return;
  if (period_mode) {
    if (!ctl->do_copy) return;
    GRID_STRIDE(i, n) d[i] = s[i];
  } else {
    GRID_STRIDE(i, n) d[i] = rd_ge_polyak(d[i], s[i], tau, keep);
  }
}

/* ---- networks ---- */

static int net_alloc(rd_gpu_learner_impl *im, gnet_t *g, const rd_nn_spec_t *s, size_t B,
                     int trainable, rd_error_t *err) {
  memset(g, 0, sizeof *g);
  g->spec = *s;
  g->L = s->n_layers;
  g->n_params = rd_nn_spec_params(s);
  for (uint32_t l = 0; l < g->L; l++) {
    g->w_off[l] = rd_nn_spec_offset(s, l);
    g->b_off[l] = g->w_off[l] + (size_t)s->sizes[l + 1] * s->sizes[l];
  }
  size_t P = g->n_params * sizeof(float);
  RD_CUDA_CK(cudaMalloc(&g->p, P), "cudaMalloc(parameters)");
  im->dev_bytes += P;
  for (uint32_t l = 0; l < g->L; l++) {
    size_t b = B * s->sizes[l + 1] * sizeof(float);
    RD_CUDA_CK(cudaMalloc(&g->act[l], b), "cudaMalloc(activations)");
    im->dev_bytes += b;
  }
  if (trainable) {
    RD_CUDA_CK(cudaMalloc(&g->g, P), "cudaMalloc(gradients)");
    RD_CUDA_CK(cudaMalloc(&g->m, P), "cudaMalloc(Adam moments)");
    RD_CUDA_CK(cudaMalloc(&g->v, P), "cudaMalloc(Adam moments)");
    RD_CUDA_CK(cudaMemsetAsync(g->g, 0, P, im->stream), "cudaMemsetAsync");
    RD_CUDA_CK(cudaMemsetAsync(g->m, 0, P, im->stream), "cudaMemsetAsync");
    RD_CUDA_CK(cudaMemsetAsync(g->v, 0, P, im->stream), "cudaMemsetAsync");
    size_t d = B * rd_nn_spec_max_width(s) * sizeof(float);
    RD_CUDA_CK(cudaMalloc(&g->delta[0], d), "cudaMalloc(backward scratch)");
    RD_CUDA_CK(cudaMalloc(&g->delta[1], d), "cudaMalloc(backward scratch)");
    im->dev_bytes += 3 * P + 2 * d;
  }
  return RD_OK;
}

static void net_free(gnet_t *g) {
  cudaFree(g->p);
  cudaFree(g->g);
  cudaFree(g->m);
  cudaFree(g->v);
  for (uint32_t l = 0; l < RD_NN_MAX_LAYERS; l++) cudaFree(g->act[l]);
  cudaFree(g->delta[0]);
  cudaFree(g->delta[1]);
  memset(g, 0, sizeof *g);
}

static const float k_one = 1.0f, k_zero = 0.0f;

static int net_forward(rd_gpu_learner_impl *im, gnet_t *g, size_t n, const float *x,
                       rd_error_t *err) {
  const float *a = x;
  for (uint32_t l = 0; l < g->L; l++) {
    const int in = (int)g->spec.sizes[l], out = (int)g->spec.sizes[l + 1];
    BK(cublasSgemm(im->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)n, in, &k_one, g->p + g->w_off[l],
                   in, a, in, &k_zero, g->act[l], out),
       "forward SGEMM");
    size_t total = n * (size_t)out;
    k_bias_act<<<grid_for(total, 256), 256, 0, im->stream>>>(g->act[l], g->p + g->b_off[l], total,
                                                            (uint32_t)out, (int)g->spec.act[l]);
    LK("bias/activation kernel");
    a = g->act[l];
  }
  g->in = x;
  g->rows = n;
  return RD_OK;
}

static const float *net_out(const gnet_t *g) { return g->act[g->L - 1]; }

/* Backward of the last forward from dy: gradients (if want_grads) and,
 * if dx is not NULL, dL/dx. */
static int net_backward(rd_gpu_learner_impl *im, gnet_t *g, const float *dy, float *dx,
                        int want_grads, rd_error_t *err) {
  const size_t n = g->rows;
  const uint32_t L = g->L;
  const float *dz = dy;
  if (g->spec.act[L - 1] != RD_NN_IDENTITY) {
    size_t total = n * g->spec.sizes[L];
    k_act_grad2<<<grid_for(total, 256), 256, 0, im->stream>>>(g->delta[0], dy, g->act[L - 1],
                                                              total, (int)g->spec.act[L - 1]);
    LK("activation gradient kernel");
    dz = g->delta[0];
  }
  for (uint32_t l = L; l-- > 0;) {
    const int in = (int)g->spec.sizes[l], out = (int)g->spec.sizes[l + 1];
    const float *a_in = l > 0 ? g->act[l - 1] : g->in;
    if (want_grads) {
      BK(cublasSgemm(im->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)n, &k_one, a_in, in, dz,
                     out, &k_zero, g->g + g->w_off[l], in),
         "weight-gradient SGEMM");
      BK(cublasSgemv(im->blas, CUBLAS_OP_N, out, (int)n, &k_one, dz, out, im->ones, 1, &k_zero,
                     g->g + g->b_off[l], 1),
         "bias-gradient SGEMV");
    }
    float *dst = l > 0 ? (dz == g->delta[0] ? g->delta[1] : g->delta[0]) : dx;
    if (dst == NULL) break;
    BK(cublasSgemm(im->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, (int)n, out, &k_one,
                   g->p + g->w_off[l], in, dz, out, &k_zero, dst, in),
       "input-gradient SGEMM");
    if (l > 0 && g->spec.act[l - 1] != RD_NN_IDENTITY) {
      size_t total = n * (size_t)in;
      k_act_grad<<<grid_for(total, 256), 256, 0, im->stream>>>(dst, a_in, total,
                                                               (int)g->spec.act[l - 1]);
      LK("activation gradient kernel");
    }
    dz = dst;
  }
  return RD_OK;
}

static int norm_parts(size_t n) {
  size_t p = (n + 4095) / 4096;
  if (p < 1) p = 1;
  if (p > NORM_PARTS) p = NORM_PARTS;
  return (int)p;
}

/* Norms, go / no-go, Adam and the target update of online net k (slot j
 * of the result block). */
static int enqueue_norm(rd_gpu_learner_impl *im, gnet_t *g, int j, rd_error_t *err) {
  k_sumsq<<<norm_parts(g->n_params), 256, 0, im->stream>>>(g->g, g->n_params,
                                                           im->d_part + j * NORM_PARTS);
  LK("norm kernel");
  return RD_OK;
}

static int enqueue_update(rd_gpu_learner_t *l, gnet_t *g, gnet_t *t, int j, rd_error_t *err) {
  rd_gpu_learner_impl *im = l->impl;
  const size_t P = g->n_params;
  k_adam<<<grid_for(P, 256), 256, 0, im->stream>>>(g->p, g->g, g->m, g->v, P, im->d_ctl,
                                                   im->d_res, j);
  LK("Adam kernel");
  const rd_learner_config_t *c = &l->config;
  k_target<<<grid_for(P, 256), 256, 0, im->stream>>>(t->p, g->p, P, im->d_ctl, im->d_res,
                                                     c->target_period > 0, (float)c->tau,
                                                     (float)(1.0 - c->tau));
  LK("target kernel");
  return RD_OK;
}

/* Offsets of the packed batch for n rows. */
typedef struct {
  size_t obs, next_obs, reward, discount, weights, action, bytes;
} layout_t;

static size_t al16(size_t b) { return (b + 15) & ~(size_t)15; }

static layout_t batch_layout(const rd_learner_config_t *c, size_t n) {
  layout_t L;
  size_t fo = n * c->obs_dim * sizeof(float), f1 = n * sizeof(float);
  size_t fa = c->algo == RD_ALGO_DQN ? n * sizeof(int32_t) : n * c->action_dim * sizeof(float);
  L.obs = 0;
  L.next_obs = al16(L.obs + fo);
  L.reward = al16(L.next_obs + fo);
  L.discount = al16(L.reward + f1);
  L.weights = al16(L.discount + f1);
  L.action = al16(L.weights + f1);
  L.bytes = al16(L.action + fa);
  return L;
}

static int enqueue_step(rd_gpu_learner_t *l, size_t n, rd_error_t *err) {
  rd_gpu_learner_impl *im = l->impl;
  const rd_learner_config_t *c = &l->config;
  cudaStream_t s = im->stream;
  const layout_t lay = batch_layout(c, n);
  RD_CUDA_CK(cudaMemcpyAsync(im->d_batch, im->h_batch, lay.bytes, cudaMemcpyHostToDevice, s),
             "batch copy to the device");
  RD_CUDA_CK(cudaMemcpyAsync(im->d_ctl, im->h_ctl, sizeof(ctl_t), cudaMemcpyHostToDevice, s),
             "control copy to the device");
  const float *obs = (const float *)(im->d_batch + lay.obs);
  const float *next_obs = (const float *)(im->d_batch + lay.next_obs);
  const float *reward = (const float *)(im->d_batch + lay.reward);
  const float *discount = (const float *)(im->d_batch + lay.discount);
  const float *w = (const float *)(im->d_batch + lay.weights);
  const double inv = 1.0 / (double)n;
  const unsigned gn = grid_for(n, 256);
  int rc;

  if (c->algo == RD_ALGO_DQN) {
    gnet_t *q = &im->net[NET_Q], *qt = &im->net[NET_Q_TARGET];
    const uint32_t A = c->num_actions;
    const int32_t *action = (const int32_t *)(im->d_batch + lay.action);
    if ((rc = net_forward(im, qt, n, next_obs, err))) return rc;
    if (c->double_dqn && (rc = net_forward(im, q, n, next_obs, err))) return rc;
    k_dqn_targets<<<gn, 256, 0, s>>>(n, A, net_out(qt), c->double_dqn ? net_out(q) : NULL, reward,
                                    discount, im->y);
    LK("target kernel");
    if ((rc = net_forward(im, q, n, obs, err))) return rc;
    k_dqn_loss<<<gn, 256, 0, s>>>(n, A, net_out(q), action, im->y, w, inv, c->huber_delta, im->q,
                                 im->dy, im->d_elem, im->td);
    LK("loss kernel");
    if ((rc = net_backward(im, q, im->dy, NULL, 1, err))) return rc;
    k_stats<<<1, RED_THREADS, 0, s>>>(n, im->d_elem, im->td, NULL, inv, im->d_res);
    LK("stats kernel");
    if ((rc = enqueue_norm(im, q, 0, err))) return rc;
    k_finalize<<<1, 1, 0, s>>>(im->d_res, im->d_part, norm_parts(q->n_params), 0, 1, 0,
                               c->grad_clip);
    LK("finalize kernel");
    if ((rc = enqueue_update(l, q, qt, 0, err))) return rc;
  } else {
    gnet_t *ac = &im->net[NET_ACTOR], *at = &im->net[NET_ACTOR_TARGET];
    gnet_t *cr = &im->net[NET_CRITIC], *ct = &im->net[NET_CRITIC_TARGET];
    const uint32_t O = c->obs_dim, D = c->action_dim;
    const float lo = c->action_low, range = c->action_high - c->action_low;
    const float half_range = 0.5f * (c->action_high - c->action_low);
    const float *action = (const float *)(im->d_batch + lay.action);
    const unsigned gx = grid_for(n * (O + D), 256);
    /* Critic targets and loss. */
    if ((rc = net_forward(im, at, n, next_obs, err))) return rc;
    k_critic_in_policy<<<gx, 256, 0, s>>>(n, O, D, next_obs, net_out(at), lo, range, im->x);
    LK("critic input kernel");
    if ((rc = net_forward(im, ct, n, im->x, err))) return rc;
    k_critic_in_actions<<<gx, 256, 0, s>>>(n, O, D, obs, action, im->x);
    LK("critic input kernel");
    if ((rc = net_forward(im, cr, n, im->x, err))) return rc;
    k_ddpg_loss<<<gn, 256, 0, s>>>(n, net_out(ct), net_out(cr), reward, discount, w, inv, im->y,
                                  im->dq, im->d_elem, im->td);
    LK("loss kernel");
    if ((rc = net_backward(im, cr, im->dq, NULL, 1, err))) return rc;
    /* Actor through the critic as it was at the start of the step. */
    if ((rc = net_forward(im, ac, n, obs, err))) return rc;
    k_critic_in_policy<<<gx, 256, 0, s>>>(n, O, D, obs, net_out(ac), lo, range, im->x);
    LK("critic input kernel");
    if ((rc = net_forward(im, cr, n, im->x, err))) return rc;
    k_stats<<<1, RED_THREADS, 0, s>>>(n, im->d_elem, im->td, net_out(cr), inv, im->d_res);
    LK("stats kernel");
    k_fill<<<gn, 256, 0, s>>>(im->dq_pi, n, (float)(-1.0 / (double)n));
    LK("fill kernel");
    if ((rc = net_backward(im, cr, im->dq_pi, im->dx, 0, err))) return rc;
    k_dmu<<<grid_for(n * D, 256), 256, 0, s>>>(n, O, D, im->dx, half_range, im->dmu);
    LK("actor gradient kernel");
    if ((rc = net_backward(im, ac, im->dmu, NULL, 1, err))) return rc;
    if ((rc = enqueue_norm(im, ac, 0, err))) return rc;
    if ((rc = enqueue_norm(im, cr, 1, err))) return rc;
    k_finalize<<<1, 1, 0, s>>>(im->d_res, im->d_part, norm_parts(ac->n_params),
                               norm_parts(cr->n_params), 2, 1, c->grad_clip);
    LK("finalize kernel");
    if ((rc = enqueue_update(l, cr, ct, 1, err))) return rc;
    if ((rc = enqueue_update(l, ac, at, 0, err))) return rc;
  }
  RD_CUDA_CK(cudaMemcpyAsync(im->h_td, im->td, n * sizeof(float), cudaMemcpyDeviceToHost, s),
             "|TD| copy to the host");
  RD_CUDA_CK(cudaMemcpyAsync(im->h_res, im->d_res, sizeof(res_t), cudaMemcpyDeviceToHost, s),
             "result copy to the host");
  return RD_OK;
}

/* ---- life cycle ---- */

static int device_ready(int device, rd_error_t *err) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    if (e == cudaErrorInsufficientDriver && drv > 0 && drv < rt)
      return rd_error_set(err, RD_EINVAL,
                          "no usable CUDA device: the driver supports CUDA %d.%d, this runtime "
                          "needs %d.%d",
                          drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    return rd_cuda_fail(err, e, "cudaGetDeviceCount");
  }
  if (device < 0 || device >= count)
    return rd_error_set(err, RD_EINVAL, "no usable CUDA device: ordinal %d, %d device(s) found",
                        device, count);
  e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rd_cuda_fail(err, e, "cudaSetDevice");
  }
  return RD_OK;
}

void rd_gpu_learner_destroy(rd_gpu_learner_t *l) {
  rd_gpu_learner_impl *im = l->impl;
  if (im != NULL) {
    cudaSetDevice(l->device);
    if (im->stream) cudaStreamSynchronize(im->stream);
    if (im->gexec) cudaGraphExecDestroy(im->gexec);
    if (im->blas) cublasDestroy(im->blas);
    for (int k = 0; k < 4; k++) net_free(&im->net[k]);
    cudaFree(im->ws);
    cudaFree(im->d_batch);
    cudaFree(im->d_ctl);
    cudaFree(im->d_res);
    cudaFree(im->d_elem);
    cudaFree(im->d_part);
    float *bufs[] = {im->y, im->q, im->dq, im->td, im->dy, im->x, im->dx, im->dmu, im->dq_pi,
                     im->ones};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) cudaFree(bufs[k]);
    cudaFreeHost(im->h_batch);
    cudaFreeHost(im->h_ctl);
    cudaFreeHost(im->h_res);
    cudaFreeHost(im->h_td);
    cudaFreeHost(im->h_params);
    if (im->stream) cudaStreamDestroy(im->stream);
    (void)cudaGetLastError();
    free(im);
  }
  memset(l, 0, sizeof *l);
}

/* Everything init writes to the device (zeroed moments and scratch, the
 * weights, the ones vector) goes on the learner's stream, in order, and
 * init waits for it: the steps run on that non-blocking stream, which
 * would not wait for work on the legacy default stream. */
static int init_device_side(rd_gpu_learner_t *l, const rd_learner_t *cpu, rd_error_t *err) {
  rd_gpu_learner_impl *im = l->impl;
  const rd_learner_config_t *c = &l->config;
  const int dqn = c->algo == RD_ALGO_DQN;
  const size_t B = c->max_batch;
  RD_CUDA_CK(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasStatus_t bs = cublasCreate(&im->blas);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    im->blas = NULL;
    return blas_fail(err, bs, "cublasCreate");
  }
  BK(cublasSetStream(im->blas, im->stream), "cublasSetStream");
  RD_CUDA_CK(cudaMalloc(&im->ws, WS_BYTES), "cudaMalloc(cuBLAS workspace)");
  im->dev_bytes += WS_BYTES;
  BK(cublasSetWorkspace(im->blas, im->ws, WS_BYTES), "cublasSetWorkspace");
  BK(cublasSetPointerMode(im->blas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  /* Full FP32 products, whatever the library's or the environment's
   * default: no TF32 tensor-op math (10-bit mantissas would move results
   * ~1e-3 away from the CPU learner's). Pedantic mode adds nothing for
   * FP32 SGEMM and may cost speed. */
  BK(cublasSetMathMode(im->blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");

  int rc;
  for (int k = 0; k < l->n_nets; k++) {
    if ((rc = net_alloc(im, &im->net[k], &l->spec[k], B, k % 2 == 0, err))) return rc;
    size_t P = im->net[k].n_params;
    if (P > im->max_params) im->max_params = P;
    /* Online and target both start from the CPU learner's online init
     * (from pageable memory: the copy has left it when the call returns). */
    RD_CUDA_CK(cudaMemcpyAsync(im->net[k].p, cpu->net[k & ~1].params, P * sizeof(float),
                               cudaMemcpyHostToDevice, im->stream),
               "weight upload");
  }
  const size_t X = dqn ? 0 : (size_t)c->obs_dim + c->action_dim;
  im->batch_bytes = batch_layout(c, B).bytes;
  struct {
    void **p;
    size_t bytes;
  } bufs[] = {
      {(void **)&im->d_batch, im->batch_bytes},
      {(void **)&im->d_ctl, sizeof(ctl_t)},
      {(void **)&im->d_res, sizeof(res_t)},
      {(void **)&im->d_elem, B * sizeof(double)},
      {(void **)&im->d_part, 2 * NORM_PARTS * sizeof(double)},
      {(void **)&im->y, B * sizeof(float)},
      {(void **)&im->q, B * sizeof(float)},
      {(void **)&im->dq, B * sizeof(float)},
      {(void **)&im->td, B * sizeof(float)},
      {(void **)&im->ones, B * sizeof(float)},
      {(void **)&im->dy, dqn ? B * c->num_actions * sizeof(float) : 0},
      {(void **)&im->x, B * X * sizeof(float)},
      {(void **)&im->dx, B * X * sizeof(float)},
      {(void **)&im->dmu, dqn ? 0 : B * c->action_dim * sizeof(float)},
      {(void **)&im->dq_pi, dqn ? 0 : B * sizeof(float)},
  };
  for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) {
    if (bufs[k].bytes == 0) continue;
    RD_CUDA_CK(cudaMalloc(bufs[k].p, bufs[k].bytes), "cudaMalloc(step buffers)");
    im->dev_bytes += bufs[k].bytes;
  }
  RD_CUDA_CK(cudaMemsetAsync(im->d_part, 0, 2 * NORM_PARTS * sizeof(double), im->stream),
             "cudaMemsetAsync");
  k_fill<<<grid_for(B, 256), 256, 0, im->stream>>>(im->ones, B, 1.0f);
  LK("fill kernel");
  RD_CUDA_CK(cudaMallocHost(&im->h_batch, im->batch_bytes), "cudaMallocHost(batch)");
  RD_CUDA_CK(cudaMallocHost(&im->h_ctl, sizeof(ctl_t)), "cudaMallocHost(control)");
  RD_CUDA_CK(cudaMallocHost(&im->h_res, sizeof(res_t)), "cudaMallocHost(results)");
  RD_CUDA_CK(cudaMallocHost(&im->h_td, B * sizeof(float)), "cudaMallocHost(|TD|)");
  RD_CUDA_CK(cudaMallocHost(&im->h_params, im->max_params * sizeof(float)),
             "cudaMallocHost(weights)");
  RD_CUDA_CK(cudaStreamSynchronize(im->stream), "initialisation");
  return RD_OK;
}

extern "C" int rd_gpu_learner_init(rd_gpu_learner_t *l, const rd_learner_config_t *c, int device,
                                   rd_error_t *err) {
  memset(l, 0, sizeof *l);
  int rc = rd_learner_config_validate(c, err);
  if (rc) return rc;
  if ((rc = device_ready(device, err))) return rc;
  /* The CPU learner's initialisation, for one row: same seed, same weights. */
  rd_learner_config_t c1 = *c;
  c1.max_batch = 1;
  c1.threads = 1;
  rd_learner_t cpu;
  if ((rc = rd_learner_init(&cpu, &c1, err))) return rc;
  l->config = *c;
  l->device = device;
  l->n_nets = cpu.n_nets;
  for (int k = 0; k < cpu.n_nets; k++) l->spec[k] = cpu.net[k].spec;
  l->impl = (rd_gpu_learner_impl *)calloc(1, sizeof(rd_gpu_learner_impl));
  if (l->impl == NULL) {
    rd_learner_free(&cpu);
    memset(l, 0, sizeof *l);
    return rd_error_set(err, RD_ENOMEM, "cannot allocate the GPU learner");
  }
  l->impl->graphs_on = 1;
  rc = init_device_side(l, &cpu, err);
  rd_learner_free(&cpu);
  if (rc) {
    rd_gpu_learner_destroy(l);
    return rc;
  }
  return RD_OK;
}

extern "C" void rd_gpu_learner_set_graphs(rd_gpu_learner_t *l, int on) {
  if (l->impl != NULL) l->impl->graphs_on = on != 0;
}

extern "C" void rd_gpu_learner_fail_next_capture(rd_gpu_learner_t *l) {
  if (l->impl != NULL) l->impl->fail_capture = 1;
}

extern "C" size_t rd_gpu_learner_device_bytes(const rd_gpu_learner_t *l) {
  return l->impl != NULL ? l->impl->dev_bytes : 0;
}

/* Graphs are an optimisation: when one cannot be captured, instantiated or
 * launched, the step runs on the stream instead and graphs stay off for
 * this learner (graph_failures counts it, graph_error says why). Only the
 * uncaptured step's own failure is the device's. Nothing of a failed
 * capture ran: captured work is recorded, not executed. */
static int graphs_off(rd_gpu_learner_t *l, cudaError_t e, const char *what) {
  rd_gpu_learner_impl *im = l->impl;
  (void)cudaGetLastError(); /* a capture error is not sticky: clear it */
  if (im->gexec) cudaGraphExecDestroy(im->gexec);
  im->gexec = NULL;
  im->graphs_on = 0;
  l->graph_failures++;
  snprintf(l->graph_error, sizeof l->graph_error, "%s: %s", what, cudaGetErrorName(e));
  return RD_OK;
}

/* Capture the step for n into a graph and launch it. */
static int capture(rd_gpu_learner_t *l, size_t n, rd_error_t *err) {
  rd_gpu_learner_impl *im = l->impl;
  if (im->gexec) {
    cudaGraphExecDestroy(im->gexec);
    im->gexec = NULL;
  }
  cudaError_t e = cudaStreamBeginCapture(im->stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    graphs_off(l, e, "cudaStreamBeginCapture");
    return enqueue_step(l, n, err);
  }
  rd_error_t cap_err;
  int rc = enqueue_step(l, n, &cap_err);
  if (rc == RD_OK && im->fail_capture) {
    im->fail_capture = 0;
    (void)cudaStreamSynchronize(im->stream); /* not allowed while capturing */
  }
  cudaGraph_t graph = NULL;
  e = cudaStreamEndCapture(im->stream, &graph);
  if (rc != RD_OK || e != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    graphs_off(l, e, "cudaStreamEndCapture");
    if (rc != RD_OK) /* the first thing that failed under capture */
      snprintf(l->graph_error, sizeof l->graph_error, "under capture: %.80s", cap_err.msg);
    return enqueue_step(l, n, err);
  }
  e = cudaGraphInstantiate(&im->gexec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    im->gexec = NULL;
    graphs_off(l, e, "cudaGraphInstantiate");
    return enqueue_step(l, n, err);
  }
  im->graph_n = n;
  l->graph_captures++;
  e = cudaGraphLaunch(im->gexec, im->stream);
  if (e != cudaSuccess) {
    graphs_off(l, e, "cudaGraphLaunch");
    return enqueue_step(l, n, err);
  }
  l->graph_launches++;
  return RD_OK;
}

extern "C" int rd_gpu_learner_step(rd_gpu_learner_t *l, const rd_batch_t *b, float *td_abs,
                                   rd_step_stats_t *st, rd_error_t *err) {
  if (l->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU learner is not initialised");
  /* The CPU learner's checks and messages (learner.h). */
  int rc = rd_learner_batch_validate(&l->config, b, err);
  if (rc) return rc;
  rd_gpu_learner_impl *im = l->impl;
  const rd_learner_config_t *c = &l->config;
  const size_t n = b->n;
  RD_CUDA_CK(cudaSetDevice(l->device), "cudaSetDevice");

  /* Pack the batch and the step's constants into pinned memory. */
  const layout_t lay = batch_layout(c, n);
  unsigned char *h = im->h_batch;
  memcpy(h + lay.obs, b->obs, n * c->obs_dim * sizeof(float));
  memcpy(h + lay.next_obs, b->next_obs, n * c->obs_dim * sizeof(float));
  memcpy(h + lay.reward, b->reward, n * sizeof(float));
  memcpy(h + lay.discount, b->discount, n * sizeof(float));
  float *hw = (float *)(h + lay.weights);
  if (b->weights != NULL) memcpy(hw, b->weights, n * sizeof(float));
  else
    for (size_t i = 0; i < n; i++) hw[i] = 1.0f;
  if (c->algo == RD_ALGO_DQN) memcpy(h + lay.action, b->action_i, n * sizeof(int32_t));
  else memcpy(h + lay.action, b->action_f, n * c->action_dim * sizeof(float));
  const int dqn = c->algo == RD_ALGO_DQN;
  gnet_t *n0 = &im->net[0], *n2 = dqn ? NULL : &im->net[NET_CRITIC];
  im->h_ctl->adam[0] = rd_ge_adam_coef(c->lr, 0.9, 0.999, 1e-8, n0->adam_t + 1);
  im->h_ctl->adam[1] =
      rd_ge_adam_coef(dqn ? c->lr : c->critic_lr, 0.9, 0.999, 1e-8, (n2 ? n2->adam_t : 0) + 1);
  im->h_ctl->do_copy = rd_ge_copies_target(c->target_period, l->steps + 1);

  if (im->graphs_on && im->gexec != NULL && im->graph_n == n) {
    cudaError_t e = cudaGraphLaunch(im->gexec, im->stream);
    if (e == cudaSuccess) {
      l->graph_launches++;
    } else {
      graphs_off(l, e, "cudaGraphLaunch");
      if ((rc = enqueue_step(l, n, err))) return rc;
    }
  } else if (im->graphs_on && im->last_n == n) {
    if ((rc = capture(l, n, err))) return rc;
  } else {
    if ((rc = enqueue_step(l, n, err))) return rc;
  }
  im->last_n = n;
  RD_CUDA_CK(cudaStreamSynchronize(im->stream), "train-step");

  const res_t *r = im->h_res;
  rd_step_stats_t local;
  if (st == NULL) st = &local;
  memset(st, 0, sizeof *st);
  st->loss = r->loss;
  st->actor_loss = dqn ? 0.0 : -r->qsum / (double)n;
  st->td_abs_mean = r->td_sum / (double)n;
  st->td_abs_max = r->td_max;
  st->grad_norm = dqn ? r->norm[0] : r->norm[1];
  if (td_abs != NULL) memcpy(td_abs, im->h_td, n * sizeof(float));
  if (!r->ok) {
    /* The CPU learner's checks, in its order. */
    if (!isfinite(st->loss)) {
      st->grad_norm = 0.0;
      return rd_error_set(err, RD_ERANGE, dqn ? "DQN loss is %g; step skipped"
                                              : "DDPG critic loss is %g; step skipped",
                          st->loss);
    }
    if (!dqn && !isfinite(st->actor_loss))
      return rd_error_set(err, RD_ERANGE, "DDPG actor loss is %g; step skipped", st->actor_loss);
    const char *who = dqn ? "Q network" : (!isfinite(r->norm[1]) ? "critic" : "actor");
    double nrm = dqn ? r->norm[0] : (!isfinite(r->norm[1]) ? r->norm[1] : r->norm[0]);
    if (c->grad_clip > 0)
      return rd_error_set(err, RD_ERANGE, "%s gradient norm is not finite; step skipped", who);
    return rd_error_set(err, RD_ERANGE, "%s gradient norm is %g; step skipped", who, nrm);
  }
  n0->adam_t++;
  if (n2 != NULL) n2->adam_t++;
  l->steps++;
  return RD_OK;
}

extern "C" int rd_gpu_learner_get_params(rd_gpu_learner_t *l, int net, float *out, size_t cap,
                                         size_t *n, rd_error_t *err) {
  if (l->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU learner is not initialised");
  if (net < 0 || net >= l->n_nets)
    return rd_error_set(err, RD_EINVAL, "network %d: this learner has %d", net, l->n_nets);
  const gnet_t *g = &l->impl->net[net];
  if (cap < g->n_params)
    return rd_error_set(err, RD_ETOOBIG, "network %d has %zu parameters, room for %zu", net,
                        g->n_params, cap);
  RD_CUDA_CK(cudaSetDevice(l->device), "cudaSetDevice");
  RD_CUDA_CK(cudaMemcpyAsync(out, g->p, g->n_params * sizeof(float), cudaMemcpyDeviceToHost,
                             l->impl->stream),
             "weight copy to the host");
  RD_CUDA_CK(cudaStreamSynchronize(l->impl->stream), "weight copy to the host");
  if (n != NULL) *n = g->n_params;
  return RD_OK;
}

extern "C" int rd_gpu_learner_get_state(rd_gpu_learner_t *l, rd_learner_state_arrays_t *a,
                                        rd_error_t *err) {
  if (l->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU learner is not initialised");
  RD_CUDA_CK(cudaSetDevice(l->device), "cudaSetDevice");
  cudaStream_t st = l->impl->stream;
  for (int k = 0; k < l->n_nets; k++) {
    const gnet_t *g = &l->impl->net[k];
    const size_t bytes = g->n_params * sizeof(float);
    RD_CUDA_CK(cudaMemcpyAsync(a->params[k], g->p, bytes, cudaMemcpyDeviceToHost, st),
               "state copy to the host");
    if (g->m != NULL) {
      RD_CUDA_CK(cudaMemcpyAsync(a->adam_m[k], g->m, bytes, cudaMemcpyDeviceToHost, st),
                 "state copy to the host");
      RD_CUDA_CK(cudaMemcpyAsync(a->adam_v[k], g->v, bytes, cudaMemcpyDeviceToHost, st),
                 "state copy to the host");
      a->adam_t[k] = g->adam_t;
    }
  }
  RD_CUDA_CK(cudaStreamSynchronize(st), "state copy to the host");
  a->steps = l->steps;
  return RD_OK;
}

extern "C" int rd_gpu_learner_set_state(rd_gpu_learner_t *l, const rd_learner_state_arrays_t *a,
                                        rd_error_t *err) {
  if (l->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU learner is not initialised");
  RD_CUDA_CK(cudaSetDevice(l->device), "cudaSetDevice");
  cudaStream_t st = l->impl->stream;
  for (int k = 0; k < l->n_nets; k++) {
    gnet_t *g = &l->impl->net[k];
    const size_t bytes = g->n_params * sizeof(float);
    RD_CUDA_CK(cudaMemcpyAsync(g->p, a->params[k], bytes, cudaMemcpyHostToDevice, st),
               "state copy to the device");
    if (g->m != NULL) {
      RD_CUDA_CK(cudaMemcpyAsync(g->m, a->adam_m[k], bytes, cudaMemcpyHostToDevice, st),
                 "state copy to the device");
      RD_CUDA_CK(cudaMemcpyAsync(g->v, a->adam_v[k], bytes, cudaMemcpyHostToDevice, st),
                 "state copy to the device");
    }
  }
  RD_CUDA_CK(cudaStreamSynchronize(st), "state copy to the device");
  for (int k = 0; k < l->n_nets; k++)
    if (l->impl->net[k].m != NULL) l->impl->net[k].adam_t = a->adam_t[k];
  l->steps = a->steps;
  return RD_OK;
}

extern "C" size_t rd_gpu_learner_policy_bytes(const rd_gpu_learner_t *l) {
  return l->impl != NULL ? rd_nn_flat_bytes(&l->spec[0]) : 0;
}

extern "C" int rd_gpu_learner_policy_weights(rd_gpu_learner_t *l, void *buf, size_t cap,
                                             size_t *written, rd_error_t *err) {
  if (l->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU learner is not initialised");
  int rc = rd_gpu_learner_get_params(l, 0, l->impl->h_params, l->impl->max_params, NULL, err);
  if (rc) return rc;
  return rd_nn_flat_write(&l->spec[0], l->impl->h_params, buf, cap, written, err);
}
