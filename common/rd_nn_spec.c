/* rd_nn_spec.c - network spec validation and the flat weight format.
 *
 * The format is little-endian on every host: integers and float bits are
 * assembled byte by byte, so a big-endian actor reads what an x86 learner
 * wrote. The parser validates the whole buffer before it writes anything.
 */
#include "rd_nn_spec.h"

#include <math.h>
#include <string.h>

#include "rd_le.h"

#define HEADER_FIXED 12u /* magic, version, L */

const char *rd_nn_act_name(rd_nn_act_t a) {
  switch (a) {
  case RD_NN_IDENTITY: return "identity";
  case RD_NN_RELU: return "relu";
  case RD_NN_TANH: return "tanh";
  default: return "invalid";
  }
}

/* Parameters of layers [0, n) in 64-bit arithmetic: with L <= 16 and sizes
 * <= 2^16 the sum stays below 2^37, so it cannot wrap before the bound
 * check, which is what keeps a hostile header from sizing an allocation. */
static uint64_t params_u64(const rd_nn_spec_t *s, uint32_t n) {
  uint64_t p = 0;
  for (uint32_t l = 0; l < n; l++) p += (uint64_t)s->sizes[l + 1] * (s->sizes[l] + 1u);
  return p;
}

int rd_nn_spec_validate(const rd_nn_spec_t *s, rd_error_t *err) {
  if (s == NULL) return rd_error_set(err, RD_EINVAL, "network spec is missing");
  if (s->n_layers == 0 || s->n_layers > RD_NN_MAX_LAYERS)
    return rd_error_set(err, RD_EINVAL, "network has %u layers; it must have 1 to %d",
                        s->n_layers, RD_NN_MAX_LAYERS);
  for (uint32_t l = 0; l <= s->n_layers; l++) {
    if (s->sizes[l] == 0 || s->sizes[l] > RD_NN_MAX_UNITS)
      return rd_error_set(err, RD_EINVAL, "%s size %u (layer boundary %u) is outside [1, %u]",
                          l == 0 ? "input" : (l == s->n_layers ? "output" : "hidden"),
                          s->sizes[l], l, RD_NN_MAX_UNITS);
  }
  for (uint32_t l = 0; l < s->n_layers; l++) {
    if ((unsigned)s->act[l] > (unsigned)RD_NN_TANH)
      return rd_error_set(err, RD_EINVAL,
                          "layer %u has activation code %u; expected 0 (identity), 1 (relu) "
                          "or 2 (tanh)",
                          l, (unsigned)s->act[l]);
  }
  uint64_t p = params_u64(s, s->n_layers);
  if (p > RD_NN_MAX_PARAMS)
    return rd_error_set(err, RD_EINVAL, "network has %llu parameters; at most %u are allowed",
                        (unsigned long long)p, RD_NN_MAX_PARAMS);
  return RD_OK;
}

size_t rd_nn_spec_params(const rd_nn_spec_t *s) {
  if (rd_nn_spec_validate(s, NULL) != RD_OK) return 0;
  return (size_t)params_u64(s, s->n_layers);
}

size_t rd_nn_spec_offset(const rd_nn_spec_t *s, uint32_t l) {
  return (size_t)params_u64(s, l < s->n_layers ? l : s->n_layers);
}

uint32_t rd_nn_spec_max_width(const rd_nn_spec_t *s) {
  uint32_t w = 0;
  for (uint32_t l = 0; l <= s->n_layers && l <= RD_NN_MAX_LAYERS; l++)
    if (s->sizes[l] > w) w = s->sizes[l];
  return w;
}

int rd_nn_spec_equal(const rd_nn_spec_t *a, const rd_nn_spec_t *b) {
  if (a->n_layers != b->n_layers || a->n_layers > RD_NN_MAX_LAYERS) return 0;
  for (uint32_t l = 0; l <= a->n_layers; l++)
    if (a->sizes[l] != b->sizes[l]) return 0;
  for (uint32_t l = 0; l < a->n_layers; l++)
    if (a->act[l] != b->act[l]) return 0;
  return 1;
}

static size_t header_bytes(uint32_t n_layers) {
  return HEADER_FIXED + 4u * ((size_t)n_layers + 1u) + 4u * (size_t)n_layers;
}

size_t rd_nn_flat_bytes(const rd_nn_spec_t *s) {
  size_t p = rd_nn_spec_params(s);
  if (p == 0) return 0;
  return header_bytes(s->n_layers) + 4u * p;
}

/* Name the layer and position of parameter i for error messages. */
static int bad_param(const rd_nn_spec_t *s, size_t i, float v, const char *what,
                     rd_error_t *err) {
  uint32_t l = 0;
  while (l + 1 < s->n_layers && rd_nn_spec_offset(s, l + 1) <= i) l++;
  size_t off = i - rd_nn_spec_offset(s, l);
  size_t nw = (size_t)s->sizes[l + 1] * s->sizes[l];
  if (off < nw)
    return rd_error_set(err, RD_EINVAL, "%s: layer %u weight [%zu][%zu] is %g", what, l,
                        off / s->sizes[l], off % s->sizes[l], (double)v);
  return rd_error_set(err, RD_EINVAL, "%s: layer %u bias [%zu] is %g", what, l, off - nw,
                      (double)v);
}

int rd_nn_flat_write(const rd_nn_spec_t *s, const float *params, void *buf, size_t cap,
                     size_t *written, rd_error_t *err) {
  int rc = rd_nn_spec_validate(s, err);
  if (rc) return rc;
  size_t np = rd_nn_spec_params(s);
  size_t need = header_bytes(s->n_layers) + 4u * np;
  if (cap < need)
    return rd_error_set(err, RD_ETOOBIG, "flat weights need %zu bytes; the buffer has %zu",
                        need, cap);
  for (size_t i = 0; i < np; i++)
    if (!isfinite(params[i]))
      return bad_param(s, i, params[i], "cannot serialize a non-finite parameter", err);

  uint8_t *p = buf;
  rd_le_put32(p, RD_NN_FLAT_MAGIC);
  rd_le_put32(p + 4, RD_NN_FLAT_VERSION);
  rd_le_put32(p + 8, s->n_layers);
  p += HEADER_FIXED;
  for (uint32_t l = 0; l <= s->n_layers; l++, p += 4) rd_le_put32(p, s->sizes[l]);
  for (uint32_t l = 0; l < s->n_layers; l++, p += 4) rd_le_put32(p, (uint32_t)s->act[l]);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, params, 4u * np);
#else
  for (size_t i = 0; i < np; i++, p += 4) {
    uint32_t u;
    memcpy(&u, &params[i], sizeof u);
    rd_le_put32(p, u);
  }
#endif
  if (written != NULL) *written = need;
  return RD_OK;
}

int rd_nn_flat_parse(const void *buf, size_t len, rd_nn_spec_t *spec, float *params,
                     size_t max_params, rd_error_t *err) {
  const uint8_t *p = buf;
  if (p == NULL || len < HEADER_FIXED)
    return rd_error_set(err, RD_EINVAL,
                        "flat weights are %zu bytes, shorter than the %u-byte header",
                        p == NULL ? (size_t)0 : len, HEADER_FIXED);
  uint32_t magic = rd_le_get32(p), version = rd_le_get32(p + 4), n_layers = rd_le_get32(p + 8);
  if (magic != RD_NN_FLAT_MAGIC)
    return rd_error_set(err, RD_EINVAL, "flat weights start with 0x%08x, not the magic 0x%08x",
                        magic, RD_NN_FLAT_MAGIC);
  if (version != RD_NN_FLAT_VERSION)
    return rd_error_set(err, RD_EINVAL, "flat weights have version %u; this build reads %u",
                        version, RD_NN_FLAT_VERSION);
  if (n_layers == 0 || n_layers > RD_NN_MAX_LAYERS)
    return rd_error_set(err, RD_EINVAL, "flat weights declare %u layers; 1 to %d are allowed",
                        n_layers, RD_NN_MAX_LAYERS);
  size_t hdr = header_bytes(n_layers);
  if (len < hdr)
    return rd_error_set(err, RD_EINVAL,
                        "flat weights are truncated: %zu bytes, the header of %u layers needs %zu",
                        len, n_layers, hdr);
  rd_nn_spec_t s;
  memset(&s, 0, sizeof s);
  s.n_layers = n_layers;
  const uint8_t *q = p + HEADER_FIXED;
  for (uint32_t l = 0; l <= n_layers; l++, q += 4) s.sizes[l] = rd_le_get32(q);
  for (uint32_t l = 0; l < n_layers; l++, q += 4) {
    /* Checked before the cast: an enum need not hold an arbitrary u32. */
    uint32_t a = rd_le_get32(q);
    if (a > (uint32_t)RD_NN_TANH)
      return rd_error_set(err, RD_EINVAL,
                          "layer %u has activation code %u; expected 0 (identity), 1 (relu) "
                          "or 2 (tanh)",
                          l, a);
    s.act[l] = (rd_nn_act_t)a;
  }
  int rc = rd_nn_spec_validate(&s, err);
  if (rc) return rc;
  size_t np = rd_nn_spec_params(&s);
  size_t need = hdr + 4u * np;
  if (len < need)
    return rd_error_set(err, RD_EINVAL,
                        "flat weights are truncated: %zu bytes, the network needs %zu", len, need);
  if (len > need)
    return rd_error_set(err, RD_EINVAL, "flat weights have %zu trailing bytes after %zu",
                        len - need, need);
  if (params != NULL && max_params < np)
    return rd_error_set(err, RD_ETOOBIG,
                        "the network has %zu parameters; the destination holds %zu", np,
                        max_params);
  for (size_t i = 0; i < np; i++) {
    float v = rd_le_get_f32(q + 4u * i);
    if (!isfinite(v)) return bad_param(&s, i, v, "flat weights hold a non-finite parameter", err);
  }
  if (params != NULL) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(params, q, 4u * np);
#else
    for (size_t i = 0; i < np; i++) params[i] = rd_le_get_f32(q + 4u * i);
#endif
  }
  *spec = s;
  return RD_OK;
}

int rd_nn_flat_load(const void *buf, size_t len, const rd_nn_spec_t *want, float *params,
                    size_t max_params, rd_error_t *err) {
  rd_nn_spec_t s;
  int rc = rd_nn_flat_parse(buf, len, &s, NULL, 0, err); /* the header alone first */
  if (rc) return rc;
  if (!rd_nn_spec_equal(&s, want))
    return rd_error_set(err, RD_EINVAL, "flat weights describe a different network");
  return rd_nn_flat_parse(buf, len, &s, params, max_params, err);
}
