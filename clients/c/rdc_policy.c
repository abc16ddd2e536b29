/* rdc_policy.c - the actor's side of hosted learning: load the flat "RDNN"
 * weights GetWeights serves and run the network on one observation.
 *
 * Written again here instead of linking common/rd_nn_spec.c: the client
 * library must stay libc + libm + gRPC (no rd_error_t, no project-internal
 * symbols in a shared library), and a second, independent reader of the
 * format lets the tests catch a writer and a reader that agree only with
 * themselves. The format (common/rd_nn_spec.h, version 1, little-endian):
 *
 *   u32 magic 0x4E4E4452 ("RDNN"), u32 version 1, u32 L (1..16),
 *   u32 sizes[L+1] (each 1..65536), u32 act[L] (0 identity, 1 relu, 2 tanh),
 *   f32 parameters: per layer W_l [out x in] row-major, then b_l [out];
 *   at most 2^26 floats, all finite, and nothing after them.
 *
 * Like the server's parser this one validates the whole buffer before it
 * touches the policy, so a failed load leaves the previous weights in use.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_error.h"
#include "rd_le.h"
#include "replayd_client.h"

#define FLAT_MAGIC 0x4E4E4452u
#define FLAT_VERSION 1u
#define HEADER_FIXED 12u

void rdc_policy_init(rdc_policy_t *p) { memset(p, 0, sizeof *p); }

void rdc_policy_free(rdc_policy_t *p) {
  if (p == NULL) return;
  free(p->params);
  memset(p, 0, sizeof *p);
}

uint32_t rdc_policy_inputs(const rdc_policy_t *p) {
  return p != NULL && p->n_layers > 0 ? p->sizes[0] : 0;
}

uint32_t rdc_policy_outputs(const rdc_policy_t *p) {
  return p != NULL && p->n_layers > 0 ? p->sizes[p->n_layers] : 0;
}

int rdc_policy_load(rdc_policy_t *p, const void *buf, size_t len, rdc_error_t *err) {
  if (p == NULL) return set_error(err, RDC_EINVAL, "policy is NULL");
  const uint8_t *b = buf;
  if (b == NULL || len < HEADER_FIXED)
    return set_error(err, RDC_EINVAL, "weights are %zu bytes, shorter than the %u-byte header",
                     b == NULL ? (size_t)0 : len, HEADER_FIXED);
  uint32_t magic = rd_le_get32(b), version = rd_le_get32(b + 4), L = rd_le_get32(b + 8);
  if (magic != FLAT_MAGIC)
    return set_error(err, RDC_EINVAL, "weights start with 0x%08x, not the RDNN magic 0x%08x", magic,
                     FLAT_MAGIC);
  if (version != FLAT_VERSION)
    return set_error(err, RDC_EINVAL, "weights have format version %u; this client reads %u",
                     version, FLAT_VERSION);
  if (L == 0 || L > RDC_POLICY_MAX_LAYERS)
    return set_error(err, RDC_EINVAL, "weights declare %u layers; 1 to %d are allowed", L,
                     RDC_POLICY_MAX_LAYERS);
  size_t hdr = HEADER_FIXED + 4u * ((size_t)L + 1u) + 4u * (size_t)L;
  if (len < hdr)
    return set_error(err, RDC_EINVAL, "weights are truncated: %zu bytes, the header of %u layers "
                     "needs %zu", len, L, hdr);

  uint32_t sizes[RDC_POLICY_MAX_LAYERS + 1];
  rdc_act_t act[RDC_POLICY_MAX_LAYERS];
  uint32_t max_width = 0;
  const uint8_t *q = b + HEADER_FIXED;
  for (uint32_t l = 0; l <= L; l++, q += 4) {
    sizes[l] = rd_le_get32(q);
    if (sizes[l] == 0 || sizes[l] > RDC_POLICY_MAX_UNITS)
      return set_error(err, RDC_EINVAL, "weights: size %u at layer boundary %u is outside [1, %u]",
                       sizes[l], l, RDC_POLICY_MAX_UNITS);
    if (sizes[l] > max_width) max_width = sizes[l];
  }
  for (uint32_t l = 0; l < L; l++, q += 4) {
    uint32_t a = rd_le_get32(q); /* checked before the cast into the enum */
    if (a > (uint32_t)RDC_ACT_TANH)
      return set_error(err, RDC_EINVAL, "weights: layer %u has activation code %u; expected 0 "
                       "(identity), 1 (relu) or 2 (tanh)", l, a);
    act[l] = (rdc_act_t)a;
  }
  /* 64-bit sum: with L <= 16 and sizes <= 2^16 it stays below 2^37, so a
   * hostile header cannot wrap it past the bound that sizes the block. */
  uint64_t np = 0;
  for (uint32_t l = 0; l < L; l++) np += (uint64_t)sizes[l + 1] * (sizes[l] + 1u);
  if (np > RDC_POLICY_MAX_PARAMS)
    return set_error(err, RDC_EINVAL, "weights: the network has %llu parameters; at most %u are "
                     "allowed", (unsigned long long)np, RDC_POLICY_MAX_PARAMS);
  size_t need = hdr + 4u * (size_t)np;
  if (len < need)
    return set_error(err, RDC_EINVAL, "weights are truncated: %zu bytes, the network needs %zu",
                     len, need);
  if (len > need)
    return set_error(err, RDC_EINVAL, "weights have %zu trailing bytes after %zu", len - need,
                     need);
  /* A diverged learner must not turn every action into NaN. */
  size_t off = 0;
  for (uint32_t l = 0; l < L; l++) {
    size_t nw = (size_t)sizes[l + 1] * sizes[l], nb = sizes[l + 1];
    for (size_t i = 0; i < nw + nb; i++) {
      float v = rd_le_get_f32(q + 4u * (off + i));
      if (!isfinite(v)) {
        if (i < nw)
          return set_error(err, RDC_EINVAL, "weights: layer %u weight [%zu][%zu] is %g", l,
                           i / sizes[l], i % sizes[l], (double)v);
        return set_error(err, RDC_EINVAL, "weights: layer %u bias [%zu] is %g", l, i - nw,
                         (double)v);
      }
    }
    off += nw + nb;
  }

  /* Everything is valid: now p may change. Reuse the block when it is big
   * enough (the usual case: the same network, newer weights). */
  size_t floats = (size_t)np + 2u * (size_t)max_width;
  float *block = p->params;
  if (block == NULL || p->capacity < floats) {
    block = malloc(floats * sizeof *block);
    if (block == NULL)
      return set_error(err, RDC_ENOMEM, "out of memory for a policy of %zu floats", floats);
    free(p->params);
    p->capacity = floats;
  }
  p->params = block;
  p->scratch = block + np;
  p->n_params = (size_t)np;
  p->n_layers = L;
  memset(p->sizes, 0, sizeof p->sizes);
  memset(p->act, 0, sizeof p->act);
  memcpy(p->sizes, sizes, ((size_t)L + 1u) * sizeof *sizes);
  memcpy(p->act, act, (size_t)L * sizeof *act);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p->params, q, 4u * (size_t)np);
#else
  for (size_t i = 0; i < (size_t)np; i++) p->params[i] = rd_le_get_f32(q + 4u * i);
#endif
  if (err != NULL) {
    err->code = RDC_OK;
    err->msg[0] = '\0';
  }
  return RDC_OK;
}

int rdc_policy_forward(rdc_policy_t *p, const float *x, float *y) {
  if (p == NULL || p->n_layers == 0 || x == NULL || y == NULL) return RDC_EINVAL;
  uint32_t max_width = 0;
  for (uint32_t l = 0; l <= p->n_layers; l++)
    if (p->sizes[l] > max_width) max_width = p->sizes[l];
  float *buf[2] = {p->scratch, p->scratch + max_width};
  const float *in = x;
  const float *w = p->params;
  for (uint32_t l = 0; l < p->n_layers; l++) {
    const uint32_t ni = p->sizes[l], no = p->sizes[l + 1];
    const float *bias = w + (size_t)no * ni;
    /* The last layer writes straight into y. */
    float *out = l + 1 == p->n_layers ? y : buf[l & 1];
    for (uint32_t o = 0; o < no; o++) {
      /* Double accumulation: the result is then as close to the exact
       * value as the float inputs allow, whatever order a BLAS learner
       * sums in. */
      const float *row = w + (size_t)o * ni;
      double z = bias[o];
      for (uint32_t i = 0; i < ni; i++) z += (double)row[i] * (double)in[i];
      switch (p->act[l]) {
      case RDC_ACT_RELU: z = z > 0 ? z : 0; break;
      case RDC_ACT_TANH: z = tanh(z); break;
      case RDC_ACT_IDENTITY: break;
      }
      out[o] = (float)z;
    }
    in = out;
    w = bias + no;
  }
  return RDC_OK;
}
