/* nn.c - MLP forward/backward through CBLAS, losses, Adam, target updates.
 *
 * Layer l maps a_l [n x in] to a_{l+1} [n x out]:
 *   Z = 1 b^T + a_l W^T        (rows pre-filled with b, then sgemm beta = 1)
 *   a_{l+1} = act(Z)           (in place)
 * Backward keeps only the outputs: relu' = [a > 0], tanh' = 1 - a^2, so no
 * pre-activation buffer is needed. With dZ = dA * act'(a_{l+1}):
 *   dW = dZ^T a_l   (sgemm)    db = dZ^T 1   (sgemv)    dA_l = dZ W   (sgemm)
 */
#include "nn.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rd_philox.h"

/* Run `for (size_t i = 0; i < n; i++) body` on the calling thread below
 * RD_MLP_OMP_MIN elements (a thread team costs microseconds, more than the
 * loop of a small net), else split statically over threads. Element-wise
 * bodies only: no reductions, so the result never depends on the split. */
#define RD_MLP_FOR(m_, n_, ...)                                                       \
  do {                                                                                \
    size_t rd_n_ = (n_);                                                              \
    int rd_nt_ = (int)(m_)->threads;                                                  \
    if (rd_n_ >= RD_MLP_OMP_MIN && rd_nt_ > 1) {                                      \
      _Pragma("omp parallel for simd num_threads(rd_nt_) schedule(static)") for (     \
          size_t i = 0; i < rd_n_; i++) __VA_ARGS__                                   \
    } else {                                                                          \
      _Pragma("omp simd") for (size_t i = 0; i < rd_n_; i++) __VA_ARGS__              \
    }                                                                                 \
  } while (0)

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_thread(void) {
#if defined(OPENBLAS_VERSION)
  openblas_set_num_threads(1);
#endif
}

void rd_mlp_config_default(rd_mlp_config_t *c) {
  memset(c, 0, sizeof *c);
  c->max_batch = 256;
  c->seed = 0;
  c->threads = 1;
}

void rd_adam_config_default(rd_adam_config_t *c) {
  c->lr = 1e-3;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
}

/* 64-byte aligned so sgemm's packing and the simd loops start on a line. */
static float *alloc_floats(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) return NULL;
  return p;
}

void rd_mlp_free(rd_mlp_t *m) {
  free(m->params);
  free(m->grads);
  free(m->adam_m);
  free(m->adam_v);
  free(m->input);
  for (int l = 0; l < RD_NN_MAX_LAYERS; l++) free(m->act[l]);
  free(m->delta[0]);
  free(m->delta[1]);
  free(m->ones);
  memset(m, 0, sizeof *m);
}

static void init_weights(rd_mlp_t *m, uint64_t seed) {
  const rd_nn_spec_t *s = &m->spec;
  for (uint32_t l = 0; l < s->n_layers; l++) {
    double in = s->sizes[l], out = s->sizes[l + 1];
    double limit = s->act[l] == RD_NN_RELU ? sqrt(6.0 / in) : sqrt(6.0 / (in + out));
    size_t nw = (size_t)s->sizes[l + 1] * s->sizes[l];
    for (size_t k = 0; k < nw; k++) {
      size_t g = m->w_off[l] + k;
      /* 24 random bits: exactly representable, so u is the same everywhere. */
      double u = (double)(rd_philox_u64(seed, RD_MLP_INIT_DRAW0 + g) >> 40) * 0x1p-24;
      m->params[g] = (float)((2.0 * u - 1.0) * limit);
    }
    memset(m->params + m->b_off[l], 0, (size_t)s->sizes[l + 1] * sizeof(float));
  }
}

int rd_mlp_init(rd_mlp_t *m, const rd_mlp_config_t *c, rd_error_t *err) {
  memset(m, 0, sizeof *m);
  int rc = rd_nn_spec_validate(&c->spec, err);
  if (rc) return rc;
  if (c->max_batch == 0 || c->max_batch > RD_MLP_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "max_batch %u is outside [1, %u]", c->max_batch,
                        RD_MLP_MAX_BATCH);
  pthread_once(&blas_once, blas_single_thread);

  const rd_nn_spec_t *s = &c->spec;
  m->spec = *s;
  m->max_batch = c->max_batch;
  m->threads = c->threads ? c->threads : 1;
  m->trainable = !c->inference_only;
  m->n_params = rd_nn_spec_params(s);
  for (uint32_t l = 0; l < s->n_layers; l++) {
    m->w_off[l] = rd_nn_spec_offset(s, l);
    m->b_off[l] = m->w_off[l] + (size_t)s->sizes[l + 1] * s->sizes[l];
  }
  size_t B = c->max_batch, width = rd_nn_spec_max_width(s);
  int ok = (m->params = alloc_floats(m->n_params)) != NULL;
  ok = ok && (m->input = alloc_floats(B * s->sizes[0])) != NULL;
  for (uint32_t l = 0; ok && l < s->n_layers; l++)
    ok = (m->act[l] = alloc_floats(B * s->sizes[l + 1])) != NULL;
  if (ok && m->trainable) {
    ok = (m->grads = alloc_floats(m->n_params)) != NULL &&
         (m->adam_m = alloc_floats(m->n_params)) != NULL &&
         (m->adam_v = alloc_floats(m->n_params)) != NULL &&
         (m->delta[0] = alloc_floats(B * width)) != NULL &&
         (m->delta[1] = alloc_floats(B * width)) != NULL &&
         (m->ones = alloc_floats(B)) != NULL;
  }
  if (!ok) {
    rd_mlp_free(m);
    return rd_error_set(err, RD_ENOMEM,
                        "cannot allocate a network of %zu parameters for batches of %zu",
                        rd_nn_spec_params(s), B);
  }
  if (m->trainable) {
    memset(m->grads, 0, m->n_params * sizeof(float));
    memset(m->adam_m, 0, m->n_params * sizeof(float));
    memset(m->adam_v, 0, m->n_params * sizeof(float));
    for (size_t i = 0; i < B; i++) m->ones[i] = 1.0f;
  }
  init_weights(m, c->seed);
  return RD_OK;
}

/* ---- forward ---- */

static void activate(rd_mlp_t *m, rd_nn_act_t act, float *a, size_t n) {
  switch (act) {
  case RD_NN_RELU: RD_MLP_FOR(m, n, { a[i] = a[i] > 0.0f ? a[i] : 0.0f; }); break;
  case RD_NN_TANH: RD_MLP_FOR(m, n, { a[i] = tanhf(a[i]); }); break;
  case RD_NN_IDENTITY: break;
  }
}

int rd_mlp_forward(rd_mlp_t *m, size_t n, const float *x, float *y, rd_error_t *err) {
  if (n == 0) return rd_error_set(err, RD_EINVAL, "forward batch is empty");
  if (n > m->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "forward batch %zu exceeds max_batch %u", n,
                        m->max_batch);
  const rd_nn_spec_t *s = &m->spec;
  memcpy(m->input, x, n * s->sizes[0] * sizeof(float));
  const float *a = m->input;
  for (uint32_t l = 0; l < s->n_layers; l++) {
    int in = (int)s->sizes[l], out = (int)s->sizes[l + 1];
    float *z = m->act[l];
    const float *b = m->params + m->b_off[l];
    for (size_t i = 0; i < n; i++) memcpy(z + i * (size_t)out, b, (size_t)out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, out, in, 1.0f, a, in,
                m->params + m->w_off[l], in, 1.0f, z, out);
    activate(m, s->act[l], z, n * (size_t)out);
    a = z;
  }
  if (y != NULL) memcpy(y, a, n * s->sizes[s->n_layers] * sizeof(float));
  m->fwd_batch = (uint32_t)n;
  return RD_OK;
}

/* ---- backward ---- */

/* dz = da * act'(a), where a is the layer's output. da and dz may alias. */
static void act_grad(rd_mlp_t *m, rd_nn_act_t act, const float *a, const float *da, float *dz,
                     size_t n) {
  switch (act) {
  case RD_NN_RELU: RD_MLP_FOR(m, n, { dz[i] = a[i] > 0.0f ? da[i] : 0.0f; }); break;
  case RD_NN_TANH: RD_MLP_FOR(m, n, { dz[i] = da[i] * (1.0f - a[i] * a[i]); }); break;
  case RD_NN_IDENTITY:
    if (dz != da) memcpy(dz, da, n * sizeof(float));
    break;
  }
}

int rd_mlp_backward(rd_mlp_t *m, const float *dy, float *dx, rd_error_t *err) {
  if (!m->trainable)
    return rd_error_set(err, RD_EINVAL, "backward on an inference-only network");
  if (m->fwd_batch == 0)
    return rd_error_set(err, RD_EINVAL,
                        "backward needs a forward on the current parameters first");
  const rd_nn_spec_t *s = &m->spec;
  int n = (int)m->fwd_batch;
  const float *da = dy;
  int cur = 0;
  for (uint32_t l = s->n_layers; l-- > 0;) {
    int in = (int)s->sizes[l], out = (int)s->sizes[l + 1];
    float *dz = m->delta[cur];
    act_grad(m, s->act[l], m->act[l], da, dz, (size_t)n * (size_t)out);
    const float *a_in = l > 0 ? m->act[l - 1] : m->input;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dz, out, a_in, in,
                0.0f, m->grads + m->w_off[l], in);
    cblas_sgemv(CblasRowMajor, CblasTrans, n, out, 1.0f, dz, out, m->ones, 1, 0.0f,
                m->grads + m->b_off[l], 1);
    float *dst = l > 0 ? m->delta[cur ^ 1] : dx;
    if (dst != NULL)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dz, out,
                  m->params + m->w_off[l], in, 0.0f, dst, in);
    da = dst;
    cur ^= 1;
  }
  return RD_OK;
}

/* ---- optimizer ---- */

int rd_mlp_adam_step(rd_mlp_t *m, const rd_adam_config_t *c, rd_error_t *err) {
  if (!m->trainable) return rd_error_set(err, RD_EINVAL, "Adam step on an inference-only network");
  if (!(isfinite(c->lr) && c->lr > 0))
    return rd_error_set(err, RD_EINVAL, "Adam lr must be positive and finite, not %g", c->lr);
  if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
    return rd_error_set(err, RD_EINVAL, "Adam betas must be in [0, 1), not %g and %g", c->beta1,
                        c->beta2);
  if (!(isfinite(c->eps) && c->eps > 0))
    return rd_error_set(err, RD_EINVAL, "Adam eps must be positive and finite, not %g", c->eps);
  uint64_t t = ++m->adam_t;
  /* Bias corrections in double: 1 - b^t underflows float precision early. */
  double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
  const float b1 = (float)c->beta1, b2 = (float)c->beta2;
  const float g1 = (float)(1.0 - c->beta1), g2 = (float)(1.0 - c->beta2);
  const float step = (float)(c->lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
  const float eps = (float)c->eps;
  float *restrict p = m->params, *restrict g = m->grads;
  float *restrict mm = m->adam_m, *restrict vv = m->adam_v;
  RD_MLP_FOR(m, m->n_params, {
    float gi = g[i];
    float mi = b1 * mm[i] + g1 * gi;
    float vi = b2 * vv[i] + g2 * gi * gi;
    mm[i] = mi;
    vv[i] = vi;
    p[i] -= step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  });
  m->fwd_batch = 0;
  return RD_OK;
}

double rd_mlp_grad_norm(const rd_mlp_t *m) {
  if (!m->trainable) return 0.0;
  /* Serial, in double: a fixed order keeps it bit-reproducible and double
   * keeps a 10^6-parameter sum accurate; it is one pass over the grads. */
  double s = 0.0;
  for (size_t i = 0; i < m->n_params; i++) s += (double)m->grads[i] * m->grads[i];
  return sqrt(s);
}

int rd_mlp_clip_grad_norm(rd_mlp_t *m, double max_norm, double *norm, rd_error_t *err) {
  if (!m->trainable) return rd_error_set(err, RD_EINVAL, "clipping an inference-only network");
  if (!(isfinite(max_norm) && max_norm > 0))
    return rd_error_set(err, RD_EINVAL, "max gradient norm must be positive and finite, not %g",
                        max_norm);
  double nrm = rd_mlp_grad_norm(m);
  if (!isfinite(nrm))
    return rd_error_set(err, RD_ERANGE, "gradient norm is %g; skip this step", nrm);
  if (norm != NULL) *norm = nrm;
  if (nrm > max_norm) {
    const float scale = (float)(max_norm / (nrm + 1e-6));
    float *g = m->grads;
    RD_MLP_FOR(m, m->n_params, { g[i] *= scale; });
  }
  return RD_OK;
}

/* ---- target networks ---- */

static int same_spec(const rd_mlp_t *dst, const rd_mlp_t *src, rd_error_t *err) {
  if (!rd_nn_spec_equal(&dst->spec, &src->spec))
    return rd_error_set(err, RD_EINVAL, "target and source networks have different specs");
  return RD_OK;
}

int rd_mlp_copy_params(rd_mlp_t *dst, const rd_mlp_t *src, rd_error_t *err) {
  int rc = same_spec(dst, src, err);
  if (rc) return rc;
  memcpy(dst->params, src->params, src->n_params * sizeof(float));
  dst->fwd_batch = 0;
  return RD_OK;
}

int rd_mlp_polyak(rd_mlp_t *dst, const rd_mlp_t *src, double tau, rd_error_t *err) {
  int rc = same_spec(dst, src, err);
  if (rc) return rc;
  if (!(tau > 0 && tau <= 1))
    return rd_error_set(err, RD_EINVAL, "Polyak tau must be in (0, 1], not %g", tau);
  const float t = (float)tau, keep = (float)(1.0 - tau);
  float *restrict d = dst->params;
  const float *restrict s = src->params;
  RD_MLP_FOR(dst, dst->n_params, { d[i] = t * s[i] + keep * d[i]; });
  dst->fwd_batch = 0;
  return RD_OK;
}

/* ---- flat format ---- */

int rd_mlp_save(const rd_mlp_t *m, void *buf, size_t cap, size_t *written, rd_error_t *err) {
  return rd_nn_flat_write(&m->spec, m->params, buf, cap, written, err);
}

int rd_mlp_load(rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err) {
  rd_nn_spec_t s;
  /* Parse the header alone first, so a mismatched network writes nothing. */
  int rc = rd_nn_flat_parse(buf, len, &s, NULL, 0, err);
  if (rc) return rc;
  if (!rd_nn_spec_equal(&s, &m->spec))
    return rd_error_set(err, RD_EINVAL, "flat weights describe a different network");
  rc = rd_nn_flat_parse(buf, len, &s, m->params, m->n_params, err);
  if (rc) return rc;
  m->fwd_batch = 0;
  return RD_OK;
}

/* ---- losses ---- */

static int check_loss_args(size_t n, size_t dim, const float *w, rd_error_t *err) {
  if (n == 0 || dim == 0)
    return rd_error_set(err, RD_EINVAL, "loss over %zu samples of %zu outputs", n, dim);
  if (w != NULL)
    for (size_t i = 0; i < n; i++)
      if (!(isfinite(w[i]) && w[i] >= 0))
        return rd_error_set(err, RD_EINVAL, "importance weight %zu is %g", i, (double)w[i]);
  return RD_OK;
}

int rd_nn_mse(size_t n, size_t dim, const float *y, const float *target, const float *w,
              float *dy, double *loss, rd_error_t *err) {
  int rc = check_loss_args(n, dim, w, err);
  if (rc) return rc;
  const double inv = 1.0 / ((double)n * (double)dim);
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) {
    double wi = w != NULL ? w[i] : 1.0, row = 0.0;
    for (size_t j = 0; j < dim; j++) {
      double e = (double)y[i * dim + j] - target[i * dim + j];
      row += e * e;
      dy[i * dim + j] = (float)(2.0 * wi * inv * e);
    }
    sum += wi * row;
  }
  if (loss != NULL) *loss = sum * inv;
  return RD_OK;
}

int rd_nn_huber(size_t n, size_t dim, const float *y, const float *target, const float *w,
                double delta, float *dy, double *loss, rd_error_t *err) {
  if (!(isfinite(delta) && delta > 0))
    return rd_error_set(err, RD_EINVAL, "Huber delta must be positive and finite, not %g", delta);
  int rc = check_loss_args(n, dim, w, err);
  if (rc) return rc;
  const double inv = 1.0 / ((double)n * (double)dim);
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) {
    double wi = w != NULL ? w[i] : 1.0, row = 0.0;
    for (size_t j = 0; j < dim; j++) {
      double e = (double)y[i * dim + j] - target[i * dim + j], ae = fabs(e), g;
      if (ae <= delta) {
        row += 0.5 * e * e;
        g = e;
      } else {
        row += delta * (ae - 0.5 * delta);
        g = e > 0 ? delta : -delta;
      }
      dy[i * dim + j] = (float)(wi * inv * g);
    }
    sum += wi * row;
  }
  if (loss != NULL) *loss = sum * inv;
  return RD_OK;
}
