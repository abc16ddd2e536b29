/* learner.c - the FPGA learner module's skeleton (see learner.h for what
 * it covers, what it leaves out, and its tolerance against the CPU).
 *
 * Structure (papers/001 §IV-B3, Fig. 3): DP pipelines, pipeline p takes
 * samples [p PI, (p + 1) PI). In one pipeline the tensor units form a chain
 * FW0 .. FW(L-1), LOSS, BW(L-1) .. BW1, WA0 .. WA(L-1) joined by FIFOs, so
 * in hardware different samples occupy different stages at once; in C each
 * stage runs over its samples in turn (as C-simulation runs a DATAFLOW
 * region), which computes the same values. Each FW/BW/WA TU is an array of
 * LRN_UNITS multiply-accumulate units (the unrolled loops).
 */
#if !defined(__SYNTHESIS__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

#include "learner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
  if (act == LRN_TANH) return tanhf(z);
  return z;
}

/* act' from the activation's output a (relu: [a > 0]; tanh: 1 - a^2). */
static float act_grad(uint32_t act, float a) {
  if (act == LRN_RELU) return a > 0.0f ? 1.0f : 0.0f;
  if (act == LRN_TANH) return 1.0f - a * a;
  return 1.0f;
}

/* ------------------------------------------------------------------ */
/* FW                                                                  */
/* ------------------------------------------------------------------ */

/* FW TU of layer l for samples [lo, hi): a_out = act(W a_in + b). */
static void fw_tu(const lrn_shape_t *s, const float *params, uint32_t l, uint32_t lo, uint32_t hi,
                  const float *a_in, float *a_out) {
  const uint32_t in = s->sizes[l], out = s->sizes[l + 1];
  const float *W = params + w_offset(s, l);
  const float *b = W + (size_t)out * in;
  for (uint32_t j = lo; j < hi; j++) {
    for (uint32_t o = 0; o < out; o++) {
#pragma HLS UNROLL factor = LRN_UNITS
      float acc = 0.0f;
      for (uint32_t i = 0; i < in; i++) {
#pragma HLS PIPELINE II = 1
        acc += W[(size_t)o * in + i] * a_in[(size_t)j * in + i];
      }
      a_out[(size_t)j * out + o] = act_apply(s->act[l], acc + b[o]);
    }
  }
}

int lrn_forward(const lrn_shape_t *s, const float *params, uint32_t dp, uint32_t n,
                const float *x, float *y, lrn_acts_t *acts) {
  if (lrn_shape_check(s) != LRN_OK || dp < 1 || dp > LRN_MAX_DP || n < 1 || n > LRN_MAX_BATCH)
    return LRN_EINVAL;
  const uint32_t L = s->n_layers, pi = lrn_pi(n, dp);
  memcpy(acts->in, x, (size_t)n * s->sizes[0] * sizeof(float));
  for (uint32_t p = 0; p < dp; p++) {
#pragma HLS UNROLL
    const uint32_t lo = p * pi, hi = lo + pi < n ? lo + pi : n;
    if (lo >= hi) continue;
    /* The FW TUs of one pipeline (FIFO-connected in hardware). */
    for (uint32_t l = 0; l < L; l++) {
      fw_tu(s, params, l, lo, hi, l == 0 ? acts->in : acts->act[l - 1], acts->act[l]);
    }
  }
  acts->n = n;
  if (y) memcpy(y, acts->act[L - 1], (size_t)n * s->sizes[L] * sizeof(float));
  return LRN_OK;
}

/* ------------------------------------------------------------------ */
/* LOSS -> BW -> WA, reduction                                         */
/* ------------------------------------------------------------------ */

/* The WA TUs' accumulators, one weight-gradient copy per pipeline. */
static float lrn_acc[LRN_MAX_DP][LRN_MAX_PARAMS];

int lrn_backward(const lrn_shape_t *s, const float *params, uint32_t dp, const lrn_acts_t *acts,
                 const float *dy, float *grads, float *dx) {
  if (lrn_shape_check(s) != LRN_OK || dp < 1 || dp > LRN_MAX_DP || acts->n < 1 ||
      acts->n > LRN_MAX_BATCH)
    return LRN_EINVAL;
  const uint32_t L = s->n_layers, n = acts->n, pi = lrn_pi(n, dp);
  const size_t np = lrn_n_params(s);
  for (uint32_t p = 0; p < dp; p++) memset(lrn_acc[p], 0, np * sizeof(float));

  for (uint32_t p = 0; p < dp; p++) {
#pragma HLS UNROLL
    const uint32_t lo = p * pi, hi = lo + pi < n ? lo + pi : n;
    for (uint32_t j = lo; j < hi; j++) {
      float delta[LRN_MAX_WIDTH], prev[LRN_MAX_WIDTH];
      /* LOSS: dL/dz of the output layer. */
      const uint32_t out_L = s->sizes[L];
      for (uint32_t o = 0; o < out_L; o++)
        delta[o] = dy[(size_t)j * out_L + o] *
                   act_grad(s->act[L - 1], acts->act[L - 1][(size_t)j * out_L + o]);
      for (uint32_t l = L; l-- > 0;) {
        const uint32_t in = s->sizes[l], out = s->sizes[l + 1];
        const float *a_in = (l == 0 ? acts->in : acts->act[l - 1]) + (size_t)j * in;
        const float *W = params + w_offset(s, l);
        float *gW = lrn_acc[p] + w_offset(s, l), *gb = gW + (size_t)out * in;
        /* WA l: dW += delta a_in^T, db += delta. */
        for (uint32_t o = 0; o < out; o++) {
#pragma HLS UNROLL factor = LRN_UNITS
          for (uint32_t i = 0; i < in; i++) {
#pragma HLS PIPELINE II = 1
            gW[(size_t)o * in + i] += delta[o] * a_in[i];
          }
          gb[o] += delta[o];
        }
        if (l == 0 && dx == NULL) break;
        /* BW l: dL/da_in = W^T delta, then act' of the layer below. */
        for (uint32_t i = 0; i < in; i++) {
#pragma HLS UNROLL factor = LRN_UNITS
          float acc = 0.0f;
          for (uint32_t o = 0; o < out; o++) {
#pragma HLS PIPELINE II = 1
            acc += W[(size_t)o * in + i] * delta[o];
          }
          prev[i] = l > 0 ? acc * act_grad(s->act[l - 1], a_in[i]) : acc;
        }
        if (l == 0) {
          memcpy(dx + (size_t)j * in, prev, in * sizeof(float));
        } else {
          memcpy(delta, prev, in * sizeof(float));
        }
      }
    }
  }
  /* Reduction buffer (papers/001 §IV-B3): sum the DP copies in order. */
  for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
    float g = lrn_acc[0][k];
    for (uint32_t p = 1; p < dp; p++) g += lrn_acc[p][k];
    grads[k] = g;
  }
  return LRN_OK;
}

void lrn_sgd(const lrn_shape_t *s, float *params, const float *grads, float lr) {
  const size_t np = lrn_n_params(s);
  for (size_t k = 0; k < np; k++) {
#pragma HLS PIPELINE II = 1
    params[k] -= lr * grads[k];
  }
}
