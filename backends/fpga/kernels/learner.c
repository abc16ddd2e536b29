/* learner.c - the FPGA learner module: one DQN or DDPG train-step (see
 * learner.h for what it covers, its interface and its tolerance against
 * the CPU learner).
 *
 * Structure (papers/001 §IV-B3, Fig. 3): DP pipelines, pipeline p takes
 * samples [p PI, (p + 1) PI). In one pipeline the tensor units form a chain
 * FW0 .. FW(L-1), LOSS, BW(L-1) .. BW1, WA0 .. WA(L-1) joined by FIFOs, so
 * in hardware different samples occupy different stages at once; in C each
 * stage runs over its samples in turn (as C-simulation runs a DATAFLOW
 * region), which computes the same values. Each FW/BW/WA TU is an array of
 * multiply-accumulate units (the unrolled loops; thesis 004 §4.4.2.2's
 * unroll factor), LRN_UNITS_N<net>_L<l> of them for layer l of network net
 * (learner.h). A train-step chains several networks' TUs in
 * one pipeline (the targets' FW, the online FW, LOSS, BW and WA); the
 * whole-batch stages (reduction, loss statistics, clipping, WU, target
 * update) follow the pipelines.
 *
 * The arithmetic is backends/cpu/learner.c's and nn.c's, expression by
 * expression (the losses in double, Adam's coefficients rounded to float
 * from double, the norm's 16 partial sums), so the only differences from
 * the CPU are the summation orders of the products (learner.h).
 */
#if !defined(__SYNTHESIS__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

#include "learner.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The tanh of every learner backend (common/rd_tanh.h): the CPU's and the
 * GPU's bits, and in hardware a branch-free polynomial datapath (no table,
 * no divide but one), which suits a pipelined TU better than hls::tanh. */
#include "rd_tanh.h"

int lrn_shape_check(const lrn_shape_t *s) {
  if (s->n_layers < 1 || s->n_layers > LRN_MAX_LAYERS) return LRN_EINVAL;
  for (uint32_t l = 0; l <= s->n_layers; l++)
    if (s->sizes[l] < 1 || s->sizes[l] > LRN_MAX_WIDTH) return LRN_EINVAL;
  for (uint32_t l = 0; l < s->n_layers; l++)
    if (s->act[l] > LRN_TANH) return LRN_EINVAL;
  return LRN_OK;
}

size_t lrn_n_params(const lrn_shape_t *s) {
  size_t n = 0;
  for (uint32_t l = 0; l < s->n_layers; l++)
    n += (size_t)s->sizes[l + 1] * s->sizes[l] + s->sizes[l + 1];
  return n;
}

void lrn_stage_label(uint32_t L, uint32_t i, char *buf, size_t cap) {
  if (i < L)
    snprintf(buf, cap, "FW%u", i);
  else if (i == L)
    snprintf(buf, cap, "LOSS");
  else if (i < 2 * L)
    snprintf(buf, cap, "BW%u", 2 * L - i);
  else
    snprintf(buf, cap, "WA%u", i - 2 * L);
}

static size_t w_offset(const lrn_shape_t *s, uint32_t layer) {
  size_t off = 0;
  for (uint32_t l = 0; l < layer; l++)
    off += (size_t)s->sizes[l + 1] * s->sizes[l] + s->sizes[l + 1];
  return off;
}

static float act_apply(uint32_t act, float z) {
  if (act == LRN_RELU) return z > 0.0f ? z : 0.0f;
  if (act == LRN_TANH) return rd_tanh(z);
  return z;
}

/* act' from the activation's output a (relu: [a > 0]; tanh: 1 - a^2). */
static float act_grad(uint32_t act, float a) {
  if (act == LRN_RELU) return a > 0.0f ? 1.0f : 0.0f;
  if (act == LRN_TANH) return 1.0f - a * a;
  return 1.0f;
}

/* ------------------------------------------------------------------ */
/* Activations                                                         */
/* ------------------------------------------------------------------ */

/* Offset of activation k (0: the input, l + 1: layer l's output) in the
 * acts of an n-sample forward. */
static size_t acts_off(const lrn_shape_t *s, uint32_t n, uint32_t k) {
  size_t off = 0;
  for (uint32_t i = 0; i < k; i++) off += (size_t)n * s->sizes[i];
  return off;
}

size_t lrn_acts_floats(const lrn_shape_t *s, uint32_t n) { return acts_off(s, n, s->n_layers + 1); }

const float *lrn_acts_output(const lrn_shape_t *s, uint32_t n, const float *acts) {
  return acts + acts_off(s, n, s->n_layers);
}

static float *acts_output(const lrn_shape_t *s, uint32_t n, float *acts) {
  return acts + acts_off(s, n, s->n_layers);
}

/* ------------------------------------------------------------------ */
/* FW                                                                  */
/* ------------------------------------------------------------------ */

/* The tensor units of one layer of one network, with that layer's own
 * MAC units (learner.h, LRN_UNITS_N<net>_L<l>): a pragma's factor must be a
 * constant, so each (network, layer) gets its own copy of the three TUs,
 * and fw_tu, wa_tu and bw_tu pick the copy of the layer they run. In C the
 * copies compute the same; in hardware each is its own unit array.
 * Each TU is one loop over its in x out multiply-adds, unrolled by its U
 * units: ceil(in x out / U) cycles per sample, the model's T_i, whatever U
 * is against in or out. The loop index is the flattened (row, column) of
 * W, kept as two counters (no division), and every sum still runs in
 * input order, as the CPU learner's reference does.
 * FW (samples [lo, hi)): a_out = act(W a_in + b), row o of W after row o-1.
 * WA (one sample): dW += delta a_in^T, db += delta.
 * BW (one sample): prev = W^T delta (column i of W, rows in order), then
 * act' of the layer below. */
#define LRN_STR(x) #x
#define LRN_PRAGMA(x) _Pragma(LRN_STR(x))
#define LRN_FOR_UNIT_LAYERS(X)                                                          \
  X(0, 0) X(0, 1) X(0, 2) X(0, 3) X(0, 4) X(0, 5) X(0, 6) X(0, 7) X(1, 0) X(1, 1) X(1, 2) \
  X(1, 3) X(1, 4) X(1, 5) X(1, 6) X(1, 7)

#define LRN_DEFINE_TUS(nn, ll)                                                            \
  static void fw_tu_n##nn##_l##ll(const lrn_shape_t *s, const float *params, uint32_t lo,  \
                                  uint32_t hi, const float *a_in, float *a_out) {          \
    const uint32_t in = s->sizes[ll], out = s->sizes[ll + 1];                              \
    const float *W = params + w_offset(s, ll);                                             \
    const float *b = W + (size_t)out * in;                                                 \
    const size_t macs = (size_t)out * in;                                                  \
    for (uint32_t j = lo; j < hi; j++) {                                                   \
      const float *a = a_in + (size_t)j * in;                                              \
      float acc = 0.0f;                                                                    \
      uint32_t o = 0, i = 0;                                                               \
      for (size_t k = 0; k < macs; k++) { /* k = o * in + i */                             \
        LRN_PRAGMA(HLS UNROLL factor = LRN_UNITS_N##nn##_L##ll)                            \
        acc += W[k] * a[i];                                                                \
        if (++i == in) {                                                                   \
          a_out[(size_t)j * out + o] = act_apply(s->act[ll], acc + b[o]);                  \
          acc = 0.0f;                                                                      \
          i = 0;                                                                           \
          o++;                                                                             \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  static void wa_tu_n##nn##_l##ll(const lrn_shape_t *s, float *acc, const float *delta,    \
                                  const float *a_in) {                                     \
    const uint32_t in = s->sizes[ll], out = s->sizes[ll + 1];                              \
    float *gW = acc + w_offset(s, ll), *gb = gW + (size_t)out * in;                        \
    const size_t macs = (size_t)out * in;                                                  \
    uint32_t o = 0, i = 0;                                                                 \
    for (size_t k = 0; k < macs; k++) { /* k = o * in + i */                               \
      LRN_PRAGMA(HLS UNROLL factor = LRN_UNITS_N##nn##_L##ll)                              \
      gW[k] += delta[o] * a_in[i];                                                         \
      if (++i == in) {                                                                     \
        gb[o] += delta[o];                                                                 \
        i = 0;                                                                             \
        o++;                                                                               \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  static void bw_tu_n##nn##_l##ll(const lrn_shape_t *s, const float *params,               \
                                  const float *delta, const float *a_in, float *prev) {    \
    const uint32_t in = s->sizes[ll], out = s->sizes[ll + 1];                              \
    const float *W = params + w_offset(s, ll);                                             \
    const size_t macs = (size_t)out * in;                                                  \
    float sum = 0.0f;                                                                      \
    uint32_t o = 0, i = 0;                                                                 \
    for (size_t k = 0; k < macs; k++) { /* k = i * out + o */                              \
      LRN_PRAGMA(HLS UNROLL factor = LRN_UNITS_N##nn##_L##ll)                              \
      sum += W[(size_t)o * in + i] * delta[o];                                             \
      if (++o == out) {                                                                    \
        prev[i] = ll > 0 ? sum * act_grad(s->act[ll > 0 ? ll - 1 : 0], a_in[i]) : sum;     \
        sum = 0.0f;                                                                        \
        o = 0;                                                                             \
        i++;                                                                               \
      }                                                                                    \
    }                                                                                      \
  }
LRN_FOR_UNIT_LAYERS(LRN_DEFINE_TUS)
#undef LRN_DEFINE_TUS

#if LRN_MAX_LAYERS > LRN_UNIT_LAYERS
#error "LRN_MAX_LAYERS above the layers with their own TU code (learner.h, LRN_UNIT_LAYERS)"
#endif

uint32_t lrn_units(uint32_t net, uint32_t l) {
  if (net > 1 || l >= LRN_UNIT_LAYERS) return 0;
  switch (net * LRN_UNIT_LAYERS + l) {
#define LRN_UNITS_CASE(nn, ll) \
  case nn * LRN_UNIT_LAYERS + ll: \
    return LRN_UNITS_N##nn##_L##ll;
    LRN_FOR_UNIT_LAYERS(LRN_UNITS_CASE)
#undef LRN_UNITS_CASE
  default:
    return 0;
  }
}

/* Layer l's FW TU of network net for samples [lo, hi). */
static void fw_tu(const lrn_shape_t *s, uint32_t net, const float *params, uint32_t l,
                  uint32_t lo, uint32_t hi, const float *a_in, float *a_out) {
  switch (net * LRN_UNIT_LAYERS + l) {
#define LRN_FW_CASE(nn, ll)                                  \
  case nn * LRN_UNIT_LAYERS + ll:                            \
    fw_tu_n##nn##_l##ll(s, params, lo, hi, a_in, a_out);     \
    return;
    LRN_FOR_UNIT_LAYERS(LRN_FW_CASE)
#undef LRN_FW_CASE
  default:
    return;
  }
}

/* Layer l's WA TU of network net, one sample. */
static void wa_tu(const lrn_shape_t *s, uint32_t net, uint32_t l, float *acc, const float *delta,
                  const float *a_in) {
  switch (net * LRN_UNIT_LAYERS + l) {
#define LRN_WA_CASE(nn, ll)                        \
  case nn * LRN_UNIT_LAYERS + ll:                  \
    wa_tu_n##nn##_l##ll(s, acc, delta, a_in);      \
    return;
    LRN_FOR_UNIT_LAYERS(LRN_WA_CASE)
#undef LRN_WA_CASE
  default:
    return;
  }
}

/* Layer l's BW TU of network net, one sample. */
static void bw_tu(const lrn_shape_t *s, uint32_t net, const float *params, uint32_t l,
                  const float *delta, const float *a_in, float *prev) {
  switch (net * LRN_UNIT_LAYERS + l) {
#define LRN_BW_CASE(nn, ll)                               \
  case nn * LRN_UNIT_LAYERS + ll:                         \
    bw_tu_n##nn##_l##ll(s, params, delta, a_in, prev);    \
    return;
    LRN_FOR_UNIT_LAYERS(LRN_BW_CASE)
#undef LRN_BW_CASE
  default:
    return;
  }
}

/* The FW TUs of one pipeline over samples [lo, hi) of an n-sample batch:
 * the first keeps its input rows, each the layer's output. */
static void fw_range(const lrn_shape_t *s, uint32_t net, const float *params, uint32_t lo,
                     uint32_t hi, uint32_t n, const float *x, float *acts) {
  const uint32_t in = s->sizes[0];
  memcpy(acts + (size_t)lo * in, x + (size_t)lo * in, (size_t)(hi - lo) * in * sizeof(float));
  for (uint32_t l = 0; l < s->n_layers; l++)
    fw_tu(s, net, params, l, lo, hi, acts + acts_off(s, n, l), acts + acts_off(s, n, l + 1));
}

static int batch_ok(const lrn_shape_t *s, uint32_t dp, uint32_t n) {
  return lrn_shape_check(s) == LRN_OK && dp >= 1 && dp <= LRN_MAX_DP && n >= 1 &&
         n <= LRN_MAX_BATCH;
}

int lrn_forward(const lrn_shape_t *s, const float *params, uint32_t dp, uint32_t n,
                const float *x, float *y, float *acts) {
  if (!batch_ok(s, dp, n)) return LRN_EINVAL;
  const uint32_t pi = lrn_pi(n, dp);
  for (uint32_t p = 0; p < LRN_MAX_DP; p++) {
#pragma HLS UNROLL
    const uint32_t lo = p * pi, hi = lo + pi < n ? lo + pi : n;
    if (p >= dp || lo >= hi) continue;
    fw_range(s, 0, params, lo, hi, n, x, acts);
  }
  if (y) memcpy(y, lrn_acts_output(s, n, acts), (size_t)n * s->sizes[s->n_layers] * sizeof(float));
  return LRN_OK;
}

/* ------------------------------------------------------------------ */
/* BW, WA, reduction                                                   */
/* ------------------------------------------------------------------ */

/* The BW (and, with acc, WA) TUs of one pipeline over samples [lo, hi):
 * acc += dL/dtheta of each sample (acc NULL: no WA), dx rows = dL/dx (dx
 * NULL: BW stops at layer 1). dy is dL/dy of the network's output. */
static void bw_range(const lrn_shape_t *s, uint32_t net, const float *params, uint32_t lo,
                     uint32_t hi, uint32_t n, const float *acts, const float *dy, float *acc,
                     float *dx) {
  const uint32_t L = s->n_layers, out_L = s->sizes[L];
  const float *y = acts + acts_off(s, n, L);
  for (uint32_t j = lo; j < hi; j++) {
    float delta[LRN_MAX_WIDTH], prev[LRN_MAX_WIDTH];
    /* Partitioned by the default units: a layer with more reads them in
     * fewer cycles only if its factor divides this one (not checked by a
     * tool here). */
#pragma HLS ARRAY_PARTITION variable = delta cyclic factor = LRN_UNITS
#pragma HLS ARRAY_PARTITION variable = prev cyclic factor = LRN_UNITS
    /* LOSS -> dL/dz of the output layer. */
    for (uint32_t o = 0; o < out_L; o++)
      delta[o] = dy[(size_t)j * out_L + o] * act_grad(s->act[L - 1], y[(size_t)j * out_L + o]);
    for (uint32_t l = L; l-- > 0;) {
      const uint32_t in = s->sizes[l];
      const float *a_in = acts + acts_off(s, n, l) + (size_t)j * in;
      if (acc != NULL) wa_tu(s, net, l, acc, delta, a_in); /* WA l */
      if (l == 0 && dx == NULL) break;
      bw_tu(s, net, params, l, delta, a_in, prev); /* BW l: dL/da_in */
      if (l == 0)
        memcpy(dx + (size_t)j * in, prev, in * sizeof(float));
      else
        memcpy(delta, prev, in * sizeof(float));
    }
  }
}

/* Reduction buffer (papers/001 §IV-B3): grads = the DP pipelines'
 * accumulators summed in pipeline order. */
static void reduce(size_t np, uint32_t dp, const float *acc, float *grads) {
  for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
    float g = acc[k];
    for (uint32_t p = 1; p < dp; p++) g += acc[(size_t)p * np + k];
    grads[k] = g;
  }
}

int lrn_backward(const lrn_shape_t *s, const float *params, uint32_t dp, uint32_t n,
                 const float *acts, const float *dy, float *grads, float *acc, float *dx) {
  if (!batch_ok(s, dp, n) || (grads == NULL && dx == NULL) || (grads != NULL && acc == NULL))
    return LRN_EINVAL;
  const uint32_t pi = lrn_pi(n, dp);
  const size_t np = lrn_n_params(s);
  if (grads != NULL) memset(acc, 0, (size_t)dp * np * sizeof(float));
  for (uint32_t p = 0; p < LRN_MAX_DP; p++) {
#pragma HLS UNROLL
    const uint32_t lo = p * pi, hi = lo + pi < n ? lo + pi : n;
    if (p >= dp || lo >= hi) continue;
    bw_range(s, 0, params, lo, hi, n, acts, dy, grads != NULL ? acc + (size_t)p * np : NULL, dx);
  }
  if (grads != NULL) reduce(np, dp, acc, grads);
  return LRN_OK;
}

/* ------------------------------------------------------------------ */
/* WU, clipping, targets                                               */
/* ------------------------------------------------------------------ */

void lrn_sgd(const lrn_shape_t *s, float *params, const float *grads, float lr) {
  const size_t np = lrn_n_params(s);
  for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
    params[k] -= lr * grads[k];
  }
}

/* torch.optim.Adam as nn.c's rd_mlp_adam_step: the bias corrections in
 * double once per step (1 - b^t loses float precision early), then one
 * fp32 pass in nn.c's expression order. */
void lrn_adam(size_t np, float *params, const float *grads, float *m, float *v, double lr,
              double beta1, double beta2, double eps, uint64_t t) {
  const double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  const float b1 = (float)beta1, b2 = (float)beta2, g1 = (float)(1.0 - beta1),
              g2 = (float)(1.0 - beta2), step = (float)(lr / bc1),
              inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2)), e = (float)eps;
  for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
    const float gk = grads[k];
    const float mk = b1 * m[k] + g1 * gk;
    const float vk = b2 * v[k] + g2 * gk * gk;
    params[k] = params[k] - step * mk / (sqrtf(vk) * inv_sqrt_bc2 + e);
    m[k] = fabsf(mk) < FLT_MIN ? 0.0f : mk; /* as nn.c: no denormal moments */
    v[k] = fabsf(vk) < FLT_MIN ? 0.0f : vk;
  }
}

/* 16 interleaved double accumulators combined pairwise: nn.c's order, and
 * what lets a pipelined loop add one square per cycle despite the double
 * adder's latency. */
double lrn_grad_norm(size_t np, const float *g) {
  double part[16];
#pragma HLS ARRAY_PARTITION variable = part complete
  for (uint32_t j = 0; j < 16; j++) part[j] = 0.0;
  size_t i = 0;
  for (; i + 16 <= np; i += 16) {
#pragma HLS PIPELINE II = 1
    for (uint32_t j = 0; j < 16; j++) part[j] += (double)g[i + j] * g[i + j];
  }
  for (uint32_t j = 0; i < np; i++, j++) part[j] += (double)g[i] * g[i];
  for (uint32_t w = 8; w > 0; w /= 2)
    for (uint32_t j = 0; j < w; j++) part[j] += part[j + w];
  return sqrt(part[0]);
}

/* The learner's check_and_clip: with clip > 0 as rd_mlp_clip_grad_norm
 * (a non-finite norm fails before *norm is written; above clip the
 * gradients scale by clip / (norm + 1e-6)); with clip 0 the norm only. */
static int clip_grads(size_t np, float *g, double clip, double *norm) {
  const double nrm = lrn_grad_norm(np, g);
  if (clip > 0) {
    if (!isfinite(nrm)) return LRN_ERANGE;
    *norm = nrm;
    if (nrm > clip) {
      const float scale = (float)(clip / (nrm + 1e-6));
      for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
        g[k] *= scale;
      }
    }
    return LRN_OK;
  }
  *norm = nrm;
  return isfinite(nrm) ? LRN_OK : LRN_ERANGE;
}

/* Hard copy every period steps (step1 is this step's 1-based number),
 * else Polyak: target = tau online + (1 - tau) target. */
static void update_target(size_t np, float *target, const float *online, uint32_t period,
                          double tau, uint64_t step1) {
  if (period > 0) {
    if (step1 % period == 0) memcpy(target, online, np * sizeof(float));
    return;
  }
  const float t = (float)tau, keep = (float)(1.0 - tau);
  for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
    target[k] = t * online[k] + keep * target[k];
  }
}

/* ------------------------------------------------------------------ */
/* Config, descriptor, workspace                                       */
/* ------------------------------------------------------------------ */

enum {
  WHY_OK = 0,
  WHY_ALGO,
  WHY_DP,
  WHY_BATCH,
  WHY_LAYERS,
  WHY_WIDTH,
  WHY_ACT,
  WHY_OUTPUT,       /* DQN: fewer than 2 actions; DDPG critic: not 1 output */
  WHY_OUTPUT_ACT,   /* DQN / critic output not identity, actor output not tanh */
  WHY_CRITIC_INPUT, /* critic input != actor input + actor output */
  WHY_DOUBLE_DQN
};

static int why(lrn_why_t *w, uint32_t code, uint32_t net, uint32_t layer, uint32_t value,
               uint32_t max) {
  if (w != NULL) {
    w->code = code;
    w->net = net;
    w->layer = layer;
    w->value = value;
    w->max = max;
  }
  return code == WHY_OK ? LRN_OK : LRN_EINVAL;
}

static int check_net(const lrn_shape_t *s, uint32_t k, lrn_why_t *w) {
  if (s->n_layers < 1 || s->n_layers > LRN_MAX_LAYERS)
    return why(w, WHY_LAYERS, k, 0, s->n_layers, LRN_MAX_LAYERS);
  for (uint32_t l = 0; l <= s->n_layers; l++)
    if (s->sizes[l] < 1 || s->sizes[l] > LRN_MAX_WIDTH)
      return why(w, WHY_WIDTH, k, l, s->sizes[l], LRN_MAX_WIDTH);
  for (uint32_t l = 0; l < s->n_layers; l++)
    if (s->act[l] > LRN_TANH) return why(w, WHY_ACT, k, l, s->act[l], LRN_TANH);
  return LRN_OK;
}

int lrn_config_check(const lrn_config_t *c, lrn_why_t *w) {
  if (w != NULL) {
    memset(w, 0, sizeof *w);
    w->algo = c->algo;
  }
  if (c->algo != LRN_ALGO_DQN && c->algo != LRN_ALGO_DDPG)
    return why(w, WHY_ALGO, 0, 0, c->algo, LRN_ALGO_DDPG);
  if (c->dp < 1 || c->dp > LRN_MAX_DP) return why(w, WHY_DP, 0, 0, c->dp, LRN_MAX_DP);
  if (c->batch < 1 || c->batch > LRN_MAX_BATCH)
    return why(w, WHY_BATCH, 0, 0, c->batch, LRN_MAX_BATCH);
  const uint32_t nets = c->algo == LRN_ALGO_DQN ? 1 : 2;
  for (uint32_t k = 0; k < nets; k++)
    if (check_net(&c->net[k], k, w) != LRN_OK) return LRN_EINVAL;
  const lrn_shape_t *a = &c->net[0];
  const uint32_t La = a->n_layers;
  if (c->algo == LRN_ALGO_DQN) {
    if (c->double_dqn > 1) return why(w, WHY_DOUBLE_DQN, 0, 0, c->double_dqn, 1);
    if (a->sizes[La] < 2) return why(w, WHY_OUTPUT, 0, La, a->sizes[La], 2);
    if (a->act[La - 1] != LRN_IDENTITY)
      return why(w, WHY_OUTPUT_ACT, 0, La - 1, a->act[La - 1], LRN_IDENTITY);
    return why(w, WHY_OK, 0, 0, 0, 0);
  }
  const lrn_shape_t *q = &c->net[1];
  const uint32_t Lq = q->n_layers;
  if (a->act[La - 1] != LRN_TANH) return why(w, WHY_OUTPUT_ACT, 0, La - 1, a->act[La - 1], LRN_TANH);
  if (q->sizes[0] != a->sizes[0] + a->sizes[La])
    return why(w, WHY_CRITIC_INPUT, 1, 0, q->sizes[0], a->sizes[0] + a->sizes[La]);
  if (q->sizes[Lq] != 1) return why(w, WHY_OUTPUT, 1, Lq, q->sizes[Lq], 1);
  if (q->act[Lq - 1] != LRN_IDENTITY)
    return why(w, WHY_OUTPUT_ACT, 1, Lq - 1, q->act[Lq - 1], LRN_IDENTITY);
  return why(w, WHY_OK, 0, 0, 0, 0);
}

void lrn_why_format(const lrn_why_t *w, char *buf, size_t cap) {
  const char *net = w->algo == LRN_ALGO_DDPG ? (w->net == 0 ? "actor" : "critic") : "Q network";
  switch (w->code) {
  case WHY_OK: snprintf(buf, cap, "within this FPGA learner build's limits"); break;
  case WHY_ALGO: snprintf(buf, cap, "algorithm %u is neither DQN nor DDPG", w->value); break;
  case WHY_DP:
    snprintf(buf, cap, "%u pipelines; this FPGA learner build has 1..%u (LRN_MAX_DP)", w->value,
             w->max);
    break;
  case WHY_BATCH:
    snprintf(buf, cap,
             "max_batch %u exceeds this FPGA learner build's limit of %u rows (LRN_MAX_BATCH)",
             w->value, w->max);
    break;
  case WHY_LAYERS:
    snprintf(buf, cap, "the %s has %u layers; this FPGA learner build takes 1..%u (LRN_MAX_LAYERS)",
             net, w->value, w->max);
    break;
  case WHY_WIDTH:
    snprintf(buf, cap,
             "the %s's width %u (sizes[%u]) exceeds this FPGA learner build's limit of %u "
             "(LRN_MAX_WIDTH)",
             net, w->value, w->layer, w->max);
    break;
  case WHY_ACT:
    snprintf(buf, cap, "the %s's layer %u has activation code %u; the FPGA learner has 0..%u", net,
             w->layer, w->value, w->max);
    break;
  case WHY_OUTPUT:
    snprintf(buf, cap, "the %s has %u outputs; the FPGA learner needs %s%u", net, w->value,
             w->algo == LRN_ALGO_DQN ? "at least " : "", w->max);
    break;
  case WHY_OUTPUT_ACT:
    snprintf(buf, cap, "the %s's output activation is code %u; the FPGA learner needs %u", net,
             w->value, w->max);
    break;
  case WHY_CRITIC_INPUT:
    snprintf(buf, cap, "the critic takes %u inputs; the actor's input plus output is %u", w->value,
             w->max);
    break;
  case WHY_DOUBLE_DQN: snprintf(buf, cap, "double_dqn is %u; 0 or 1", w->value); break;
  default: snprintf(buf, cap, "config refused (code %u)", w->code); break;
  }
}

static void pack_shape(const lrn_shape_t *s, uint32_t *d) {
  d[0] = s->n_layers;
  for (uint32_t l = 0; l <= LRN_MAX_LAYERS; l++) d[1 + l] = s->sizes[l];
  for (uint32_t l = 0; l < LRN_MAX_LAYERS; l++) d[2 + LRN_MAX_LAYERS + l] = s->act[l];
}

static void unpack_shape(const uint32_t *d, lrn_shape_t *s) {
  s->n_layers = d[0];
  for (uint32_t l = 0; l <= LRN_MAX_LAYERS; l++) s->sizes[l] = d[1 + l];
  for (uint32_t l = 0; l < LRN_MAX_LAYERS; l++) s->act[l] = d[2 + LRN_MAX_LAYERS + l];
}

void lrn_config_pack(const lrn_config_t *c, uint32_t *desc, double *hp) {
  desc[LRN_D_ALGO] = c->algo;
  desc[LRN_D_DP] = c->dp;
  desc[LRN_D_BATCH] = c->batch;
  desc[LRN_D_DOUBLE_DQN] = c->double_dqn;
  desc[LRN_D_TARGET_PERIOD] = c->target_period;
  pack_shape(&c->net[0], desc + LRN_D_NET0);
  pack_shape(&c->net[1], desc + LRN_D_NET1);
  hp[LRN_HP_LR] = c->lr;
  hp[LRN_HP_CRITIC_LR] = c->critic_lr;
  hp[LRN_HP_TAU] = c->tau;
  hp[LRN_HP_GRAD_CLIP] = c->grad_clip;
  hp[LRN_HP_HUBER_DELTA] = c->huber_delta;
  hp[LRN_HP_BETA1] = c->beta1;
  hp[LRN_HP_BETA2] = c->beta2;
  hp[LRN_HP_EPS] = c->eps;
  hp[LRN_HP_ACTION_LOW] = c->action_low;
  hp[LRN_HP_ACTION_HIGH] = c->action_high;
}

static void config_unpack(const uint32_t *desc, const double *hp, lrn_config_t *c) {
  memset(c, 0, sizeof *c);
  c->algo = desc[LRN_D_ALGO];
  c->dp = desc[LRN_D_DP];
  c->batch = desc[LRN_D_BATCH];
  c->double_dqn = desc[LRN_D_DOUBLE_DQN];
  c->target_period = desc[LRN_D_TARGET_PERIOD];
  unpack_shape(desc + LRN_D_NET0, &c->net[0]);
  unpack_shape(desc + LRN_D_NET1, &c->net[1]);
  c->lr = hp[LRN_HP_LR];
  c->critic_lr = hp[LRN_HP_CRITIC_LR];
  c->tau = hp[LRN_HP_TAU];
  c->grad_clip = hp[LRN_HP_GRAD_CLIP];
  c->huber_delta = hp[LRN_HP_HUBER_DELTA];
  c->beta1 = hp[LRN_HP_BETA1];
  c->beta2 = hp[LRN_HP_BETA2];
  c->eps = hp[LRN_HP_EPS];
  c->action_low = (float)hp[LRN_HP_ACTION_LOW];
  c->action_high = (float)hp[LRN_HP_ACTION_HIGH];
}

size_t lrn_params_floats(const lrn_config_t *c) {
  size_t n = lrn_n_params(&c->net[0]);
  if (c->algo == LRN_ALGO_DDPG) n += lrn_n_params(&c->net[1]);
  return n;
}

/* The workspace's buffers (offsets in floats). Every stage of a pipeline
 * has its own buffer, so each has one producer and one consumer (the
 * DATAFLOW rule); per-sample vectors: y, q, dq, dq_pi. */
typedef struct {
  size_t total;
  /* both: targets, Q(s, a), dL/dQ(s, a); net 0's gradients and WA accumulators */
  size_t y, q, dq, grads0, acc0;
  /* DQN: target FW on s', online FW on s' (double DQN), online FW on s, dL/dQ(s, .) */
  size_t acts_t, acts_n, acts_q, dy;
  /* DDPG: actor' FW on s' -> x_t -> critic' FW; x_c = [s, a] -> critic FW;
   * actor FW on s -> x_pi = [s, mu(s)] -> critic FW (acts_c2) -> dx -> dmu;
   * the critic's gradients and accumulators */
  size_t acts_at, x_t, acts_ct, x_c, acts_c, acts_a, x_pi, acts_c2, dx, dmu, dq_pi, grads1, acc1;
} ws_plan_t;

static size_t take(size_t *off, size_t n) {
  size_t at = *off;
  *off += n;
  return at;
}

static void ws_plan(const lrn_config_t *c, ws_plan_t *w) {
  memset(w, 0, sizeof *w);
  const size_t B = c->batch;
  const lrn_shape_t *a = &c->net[0];
  const size_t np0 = lrn_n_params(a);
  size_t off = 0;
  w->y = take(&off, B);
  w->q = take(&off, B);
  w->dq = take(&off, B);
  w->grads0 = take(&off, np0);
  w->acc0 = take(&off, (size_t)c->dp * np0);
  if (c->algo == LRN_ALGO_DQN) {
    w->acts_t = take(&off, lrn_acts_floats(a, c->batch));
    w->acts_n = take(&off, c->double_dqn ? lrn_acts_floats(a, c->batch) : 0);
    w->acts_q = take(&off, lrn_acts_floats(a, c->batch));
    w->dy = take(&off, B * a->sizes[a->n_layers]);
  } else {
    const lrn_shape_t *q = &c->net[1];
    const size_t X = q->sizes[0], D = a->sizes[a->n_layers], np1 = lrn_n_params(q);
    w->acts_at = take(&off, lrn_acts_floats(a, c->batch));
    w->x_t = take(&off, B * X);
    w->acts_ct = take(&off, lrn_acts_floats(q, c->batch));
    w->x_c = take(&off, B * X);
    w->acts_c = take(&off, lrn_acts_floats(q, c->batch));
    w->acts_a = take(&off, lrn_acts_floats(a, c->batch));
    w->x_pi = take(&off, B * X);
    w->acts_c2 = take(&off, lrn_acts_floats(q, c->batch));
    w->dx = take(&off, B * X);
    w->dmu = take(&off, B * D);
    w->dq_pi = take(&off, B);
    w->grads1 = take(&off, np1);
    w->acc1 = take(&off, (size_t)c->dp * np1);
  }
  w->total = off;
}

size_t lrn_ws_floats(const lrn_config_t *c) {
  ws_plan_t w;
  ws_plan(c, &w);
  return w.total;
}

/* ------------------------------------------------------------------ */
/* DQN                                                                 */
/* ------------------------------------------------------------------ */

/* The batch arrays of one step (the top function's m_axi inputs). */
typedef struct {
  const float *obs, *action_f, *reward, *discount, *next_obs, *weights;
  const int32_t *action_i;
} batch_in_t;

/* Targets for samples [lo, hi): y = R + discount Q'(s', a*), a* the
 * online network's argmax (the first of equal maxima, as torch.argmax) or,
 * plain DQN, the target's max. */
static void dqn_targets(const lrn_config_t *c, uint32_t lo, uint32_t hi, const float *qn_t,
                        const float *qn, const batch_in_t *b, float *y) {
  const uint32_t A = c->net[0].sizes[c->net[0].n_layers];
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE
    if (c->double_dqn) {
      const float *row = qn + (size_t)i * A;
      uint32_t best = 0;
      for (uint32_t a = 1; a < A; a++)
        if (row[a] > row[best]) best = a;
      y[i] = b->reward[i] + b->discount[i] * qn_t[(size_t)i * A + best];
    } else {
      const float *row = qn_t + (size_t)i * A;
      float best = row[0];
      for (uint32_t a = 1; a < A; a++)
        if (row[a] > best) best = row[a];
      y[i] = b->reward[i] + b->discount[i] * best;
    }
  }
}

/* LOSS for samples [lo, hi) of n: Huber's gradient (rd_nn_huber, mean over
 * n, IS weight w_i) on the taken action only, |delta| out. */
static void dqn_loss(const lrn_config_t *c, uint32_t lo, uint32_t hi, uint32_t n,
                     const float *qs, const batch_in_t *b, const float *y, float *q, float *dy,
                     float *td) {
  const uint32_t A = c->net[0].sizes[c->net[0].n_layers];
  const double inv = 1.0 / ((double)n * 1.0), delta = c->huber_delta;
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE
    const uint32_t a = (uint32_t)b->action_i[i];
    const float qi = qs[(size_t)i * A + a];
    q[i] = qi;
    const double wi = b->weights[i], e = (double)qi - y[i], ae = fabs(e);
    const double g = ae <= delta ? e : (e > 0 ? delta : -delta);
    for (uint32_t k = 0; k < A; k++) dy[(size_t)i * A + k] = 0.0f;
    dy[(size_t)i * A + a] = (float)(wi * inv * g);
    td[i] = fabsf(qi - y[i]);
  }
}

/* One DQN pipeline over samples [lo, hi): FW target(s'), FW online(s'),
 * targets, FW online(s), LOSS, BW + WA into its accumulators acc. */
static void dqn_pipeline(const lrn_config_t *c, const ws_plan_t *w, float *ws, uint32_t n,
                         uint32_t lo, uint32_t hi, const float *params, const float *target,
                         const batch_in_t *b, float *acc, float *td) {
#pragma HLS DATAFLOW
  const lrn_shape_t *s = &c->net[0];
  float *acts_t = ws + w->acts_t, *acts_n = ws + w->acts_n, *acts_q = ws + w->acts_q;
  fw_range(s, 0, target, lo, hi, n, b->next_obs, acts_t);
  if (c->double_dqn) fw_range(s, 0, params, lo, hi, n, b->next_obs, acts_n);
  dqn_targets(c, lo, hi, acts_output(s, n, acts_t), acts_output(s, n, acts_n), b, ws + w->y);
  fw_range(s, 0, params, lo, hi, n, b->obs, acts_q);
  dqn_loss(c, lo, hi, n, acts_output(s, n, acts_q), b, ws + w->y, ws + w->q, ws + w->dy, td);
  bw_range(s, 0, params, lo, hi, n, acts_q, ws + w->dy, acc, NULL);
}

/* |delta| mean and max in sample order (the CPU learner's td_stats). */
static void td_stats(uint32_t n, const float *td, double *stats) {
  double sum = 0.0, mx = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    const float d = td[i];
    sum += d;
    if (d > mx || isnan(d)) mx = d;
  }
  stats[LRN_ST_TD_MEAN] = sum / (double)n;
  stats[LRN_ST_TD_MAX] = mx;
}

static int dqn_step(const lrn_config_t *c, const ws_plan_t *w, float *ws, uint64_t step,
                    uint32_t n, float *params, float *target, float *adam_m, float *adam_v,
                    const batch_in_t *b, float *td, double *stats) {
  const size_t np = lrn_n_params(&c->net[0]);
  const uint32_t pi = lrn_pi(n, c->dp);
  float *acc = ws + w->acc0, *grads = ws + w->grads0;
  memset(acc, 0, (size_t)c->dp * np * sizeof(float));
  for (uint32_t p = 0; p < LRN_MAX_DP; p++) {
#pragma HLS UNROLL
    const uint32_t lo = p * pi, hi = lo + pi < n ? lo + pi : n;
    if (p >= c->dp || lo >= hi) continue;
    dqn_pipeline(c, w, ws, n, lo, hi, params, target, b, acc + (size_t)p * np, td);
  }
  reduce(np, c->dp, acc, grads);

  /* The loss (rd_nn_huber's sum, in sample order) and |delta| figures. */
  const double inv = 1.0 / ((double)n * 1.0), delta = c->huber_delta;
  const float *q = ws + w->q, *y = ws + w->y;
  double sum = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    const double wi = b->weights[i], e = (double)q[i] - y[i], ae = fabs(e);
    const double row = ae <= delta ? 0.5 * e * e : delta * (ae - 0.5 * delta);
    sum += wi * row;
  }
  stats[LRN_ST_LOSS] = sum * inv;
  td_stats(n, td, stats);
  if (!isfinite(stats[LRN_ST_LOSS])) {
    stats[LRN_ST_FAILED] = LRN_FAIL_LOSS;
    return LRN_ERANGE;
  }
  if (clip_grads(np, grads, c->grad_clip, &stats[LRN_ST_GRAD_NORM]) != LRN_OK) {
    stats[LRN_ST_FAILED] = LRN_FAIL_NORM;
    return LRN_ERANGE;
  }
  /* Nothing has changed yet; from here the step cannot fail. */
  lrn_adam(np, params, grads, adam_m, adam_v, c->lr, c->beta1, c->beta2, c->eps, step + 1);
  update_target(np, target, params, c->target_period, c->tau, step + 1);
  return LRN_OK;
}

/* ------------------------------------------------------------------ */
/* DDPG                                                                */
/* ------------------------------------------------------------------ */

/* x rows [lo, hi) = [obs_i, low + (y_i + 1)/2 (high - low)]: the critic
 * input for the actor's tanh outputs y (rd_learner_policy's mapping). */
static void critic_input(const lrn_config_t *c, uint32_t lo, uint32_t hi, const float *obs,
                         const float *y, float *x) {
  const uint32_t O = c->net[0].sizes[0], D = c->net[0].sizes[c->net[0].n_layers], X = O + D;
  const float low = c->action_low, range = c->action_high - c->action_low;
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE
    for (uint32_t j = 0; j < O; j++) x[(size_t)i * X + j] = obs[(size_t)i * O + j];
    for (uint32_t j = 0; j < D; j++)
      x[(size_t)i * X + O + j] = low + (y[(size_t)i * D + j] + 1.0f) * 0.5f * range;
  }
}

/* x rows [lo, hi) = [obs_i, action_i]: the critic input for the batch's actions. */
static void critic_input_batch(const lrn_config_t *c, uint32_t lo, uint32_t hi, const batch_in_t *b,
                               float *x) {
  const uint32_t O = c->net[0].sizes[0], D = c->net[0].sizes[c->net[0].n_layers], X = O + D;
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE
    for (uint32_t j = 0; j < O; j++) x[(size_t)i * X + j] = b->obs[(size_t)i * O + j];
    for (uint32_t j = 0; j < D; j++) x[(size_t)i * X + O + j] = b->action_f[(size_t)i * D + j];
  }
}

/* Critic targets for [lo, hi): y = R + discount Q'(s', mu'(s')). */
static void ddpg_targets(uint32_t lo, uint32_t hi, const float *qn, const batch_in_t *b, float *y) {
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE II = 1
    y[i] = b->reward[i] + b->discount[i] * qn[i];
  }
}

/* Critic LOSS for [lo, hi) of n: rd_nn_mse's gradient (IS-weighted, mean
 * over n), |delta| out. */
static void ddpg_critic_loss(uint32_t lo, uint32_t hi, uint32_t n, const float *qs,
                             const batch_in_t *b, const float *y, float *q, float *dq, float *td) {
  const double inv = 1.0 / ((double)n * 1.0);
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE II = 1
    const float qi = qs[i];
    q[i] = qi;
    const double wi = b->weights[i], e = (double)qi - y[i];
    dq[i] = (float)(2.0 * wi * inv * e);
    td[i] = fabsf(qi - y[i]);
  }
}

/* Actor LOSS for [lo, hi) of n: dL/dQ(s, mu(s)) = -1/n each. */
static void ddpg_actor_loss(uint32_t lo, uint32_t hi, uint32_t n, float *dq_pi) {
  const float g = (float)(-1.0 / (double)n);
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE II = 1
    dq_pi[i] = g;
  }
}

/* dL/d(actor output) = dL/da (the critic input's action columns) times
 * da/dy = (high - low)/2, for rows [lo, hi). */
static void ddpg_dmu(const lrn_config_t *c, uint32_t lo, uint32_t hi, const float *dx, float *dmu) {
  const uint32_t O = c->net[0].sizes[0], D = c->net[0].sizes[c->net[0].n_layers], X = O + D;
  const float half_range = 0.5f * (c->action_high - c->action_low);
  for (uint32_t i = lo; i < hi; i++) {
#pragma HLS PIPELINE
    for (uint32_t j = 0; j < D; j++) dmu[(size_t)i * D + j] = dx[(size_t)i * X + O + j] * half_range;
  }
}

/* One DDPG pipeline over [lo, hi): the critic's chain (targets, FW, LOSS,
 * BW + WA into acc_c), then the actor's through the same (not yet
 * updated) critic (FW actor, FW critic, BW critic to its input, BW + WA
 * actor into acc_a). params/target: actor then critic. */
static void ddpg_pipeline(const lrn_config_t *c, const ws_plan_t *w, float *ws, uint32_t n,
                          uint32_t lo, uint32_t hi, const float *params, const float *target,
                          const batch_in_t *b, float *acc_a, float *acc_c, float *td) {
#pragma HLS DATAFLOW
  const lrn_shape_t *sa = &c->net[0], *sc = &c->net[1];
  const size_t npa = lrn_n_params(sa);
  const float *pa = params, *pc = params + npa, *ta = target, *tc = target + npa;
  float *acts_at = ws + w->acts_at, *acts_ct = ws + w->acts_ct, *acts_c = ws + w->acts_c;
  float *acts_a = ws + w->acts_a, *acts_c2 = ws + w->acts_c2;
  /* Critic targets. */
  fw_range(sa, 0, ta, lo, hi, n, b->next_obs, acts_at);
  critic_input(c, lo, hi, b->next_obs, acts_output(sa, n, acts_at), ws + w->x_t);
  fw_range(sc, 1, tc, lo, hi, n, ws + w->x_t, acts_ct);
  ddpg_targets(lo, hi, acts_output(sc, n, acts_ct), b, ws + w->y);
  /* Critic: Q(s, a), LOSS, BW + WA. */
  critic_input_batch(c, lo, hi, b, ws + w->x_c);
  fw_range(sc, 1, pc, lo, hi, n, ws + w->x_c, acts_c);
  ddpg_critic_loss(lo, hi, n, acts_output(sc, n, acts_c), b, ws + w->y, ws + w->q, ws + w->dq, td);
  bw_range(sc, 1, pc, lo, hi, n, acts_c, ws + w->dq, acc_c, NULL);
  /* Actor: mu(s), Q(s, mu(s)), dQ/da through the critic, BW + WA. */
  fw_range(sa, 0, pa, lo, hi, n, b->obs, acts_a);
  critic_input(c, lo, hi, b->obs, acts_output(sa, n, acts_a), ws + w->x_pi);
  fw_range(sc, 1, pc, lo, hi, n, ws + w->x_pi, acts_c2);
  ddpg_actor_loss(lo, hi, n, ws + w->dq_pi);
  bw_range(sc, 1, pc, lo, hi, n, acts_c2, ws + w->dq_pi, NULL, ws + w->dx);
  ddpg_dmu(c, lo, hi, ws + w->dx, ws + w->dmu);
  bw_range(sa, 0, pa, lo, hi, n, acts_a, ws + w->dmu, acc_a, NULL);
}

static int ddpg_step(const lrn_config_t *c, const ws_plan_t *w, float *ws, uint64_t step,
                     uint32_t n, float *params, float *target, float *adam_m, float *adam_v,
                     const batch_in_t *b, float *td, double *stats) {
  const lrn_shape_t *sa = &c->net[0], *sc = &c->net[1];
  const size_t npa = lrn_n_params(sa), npc = lrn_n_params(sc);
  const uint32_t pi = lrn_pi(n, c->dp);
  float *acc_a = ws + w->acc0, *acc_c = ws + w->acc1;
  float *g_a = ws + w->grads0, *g_c = ws + w->grads1;
  memset(acc_a, 0, (size_t)c->dp * npa * sizeof(float));
  memset(acc_c, 0, (size_t)c->dp * npc * sizeof(float));
  for (uint32_t p = 0; p < LRN_MAX_DP; p++) {
#pragma HLS UNROLL
    const uint32_t lo = p * pi, hi = lo + pi < n ? lo + pi : n;
    if (p >= c->dp || lo >= hi) continue;
    ddpg_pipeline(c, w, ws, n, lo, hi, params, target, b, acc_a + (size_t)p * npa,
                  acc_c + (size_t)p * npc, td);
  }
  reduce(npc, c->dp, acc_c, g_c);
  reduce(npa, c->dp, acc_a, g_a);

  /* Critic loss (rd_nn_mse's sum, in sample order), |delta|, actor loss. */
  const double inv = 1.0 / ((double)n * 1.0);
  const float *q = ws + w->q, *y = ws + w->y;
  double sum = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    const double wi = b->weights[i], e = (double)q[i] - y[i];
    sum += wi * (e * e);
  }
  stats[LRN_ST_LOSS] = sum * inv;
  td_stats(n, td, stats);
  if (!isfinite(stats[LRN_ST_LOSS])) {
    stats[LRN_ST_FAILED] = LRN_FAIL_LOSS;
    return LRN_ERANGE;
  }
  const float *q_pi = lrn_acts_output(sc, n, ws + w->acts_c2);
  double qsum = 0.0;
  for (uint32_t i = 0; i < n; i++) qsum += q_pi[i];
  stats[LRN_ST_ACTOR_LOSS] = -qsum / (double)n;
  if (!isfinite(stats[LRN_ST_ACTOR_LOSS])) {
    stats[LRN_ST_FAILED] = LRN_FAIL_ACTOR_LOSS;
    return LRN_ERANGE;
  }
  if (clip_grads(npc, g_c, c->grad_clip, &stats[LRN_ST_GRAD_NORM]) != LRN_OK) {
    stats[LRN_ST_FAILED] = LRN_FAIL_NORM;
    return LRN_ERANGE;
  }
  if (clip_grads(npa, g_a, c->grad_clip, &stats[LRN_ST_ACTOR_GRAD_NORM]) != LRN_OK) {
    stats[LRN_ST_FAILED] = LRN_FAIL_ACTOR_NORM;
    return LRN_ERANGE;
  }
  /* Nothing has changed yet; from here the step cannot fail. Critic, then
   * actor, as the CPU learner. */
  lrn_adam(npc, params + npa, g_c, adam_m + npa, adam_v + npa, c->critic_lr, c->beta1, c->beta2,
           c->eps, step + 1);
  lrn_adam(npa, params, g_a, adam_m, adam_v, c->lr, c->beta1, c->beta2, c->eps, step + 1);
  update_target(npc, target + npa, params + npa, c->target_period, c->tau, step + 1);
  update_target(npa, target, params, c->target_period, c->tau, step + 1);
  return LRN_OK;
}

/* ------------------------------------------------------------------ */
/* Kernel top                                                          */
/* ------------------------------------------------------------------ */

int lrn_train_step(const uint32_t *desc, const double *hp, uint64_t step, uint32_t n,
                   float *params, float *target, float *adam_m, float *adam_v, float *ws,
                   const float *obs, const int32_t *action_i, const float *action_f,
                   const float *reward, const float *discount, const float *next_obs,
                   const float *weights, float *td_abs, double *stats) {
#pragma HLS INTERFACE m_axi port = desc offset = slave bundle = gmem0
#pragma HLS INTERFACE m_axi port = hp offset = slave bundle = gmem0
#pragma HLS INTERFACE m_axi port = params offset = slave bundle = gmem1
#pragma HLS INTERFACE m_axi port = target offset = slave bundle = gmem1
#pragma HLS INTERFACE m_axi port = adam_m offset = slave bundle = gmem2
#pragma HLS INTERFACE m_axi port = adam_v offset = slave bundle = gmem2
#pragma HLS INTERFACE m_axi port = ws offset = slave bundle = gmem3
#pragma HLS INTERFACE m_axi port = obs offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = action_i offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = action_f offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = reward offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = discount offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = next_obs offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = weights offset = slave bundle = gmem4
#pragma HLS INTERFACE m_axi port = td_abs offset = slave bundle = gmem0
#pragma HLS INTERFACE m_axi port = stats offset = slave bundle = gmem0
#pragma HLS INTERFACE s_axilite port = step
#pragma HLS INTERFACE s_axilite port = n
#pragma HLS INTERFACE s_axilite port = return
  lrn_config_t c;
  config_unpack(desc, hp, &c);
  if (lrn_config_check(&c, NULL) != LRN_OK || n < 1 || n > c.batch) return LRN_EINVAL;
  ws_plan_t w;
  ws_plan(&c, &w);
  batch_in_t b;
  b.obs = obs;
  b.action_i = action_i;
  b.action_f = action_f;
  b.reward = reward;
  b.discount = discount;
  b.next_obs = next_obs;
  b.weights = weights;
  for (uint32_t k = 0; k < LRN_ST_COUNT; k++) stats[k] = 0.0;
  if (c.algo == LRN_ALGO_DQN)
    return dqn_step(&c, &w, ws, step, n, params, target, adam_m, adam_v, &b, td_abs, stats);
  return ddpg_step(&c, &w, ws, step, n, params, target, adam_m, adam_v, &b, td_abs, stats);
}
