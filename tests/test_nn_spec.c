/* test_nn_spec.c - network specs and the flat weight format: sizes, byte
 * layout, round trip, and every way a buffer or spec can be malformed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rd_le.h"
#include "rd_nn_spec.h"
#include "rdt_main.h"

/* 3 -> 4 (relu) -> 2 (identity): 16 + 10 = 26 parameters. */
static void small_spec(rd_nn_spec_t *s) {
  memset(s, 0, sizeof *s);
  s->n_layers = 2;
  s->sizes[0] = 3;
  s->sizes[1] = 4;
  s->sizes[2] = 2;
  s->act[0] = RD_NN_RELU;
  s->act[1] = RD_NN_IDENTITY;
}

static void fill_params(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (float)i * 0.25f - 3.0f;
}

/* small_spec, its 26 parameters (fill_params), and a buffer with room for
 * its flat form (136 bytes) and more. */
typedef struct {
  rd_nn_spec_t s;
  float p[26];
  uint8_t buf[200];
} small_net_t;

static void small_net(small_net_t *n) {
  small_spec(&n->s);
  fill_params(n->p, 26);
}

/* Parse, expect `code`; an error carries a message and leaves outputs alone. */
static void expect_parse(const void *buf, size_t len, int code) {
  rd_nn_spec_t s;
  memset(&s, 0xAB, sizeof s);
  float params[64];
  for (int i = 0; i < 64; i++) params[i] = 42.0f;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_nn_flat_parse(buf, len, &s, params, 64, &err);
  if (rc != code)
    fail_msg("parse returned %s (%s), expected %s", rd_err_name(rc), err.msg, rd_err_name(code));
  if (code != RD_OK) {
    assert_int_equal(err.code, code);
    assert_true(strlen(err.msg) > 0);
    uint8_t pat[sizeof s];
    memset(pat, 0xAB, sizeof pat);
    assert_memory_equal(&s, pat, sizeof s);
    for (int i = 0; i < 64; i++) assert_true(params[i] == 42.0f);
    assert_int_equal(rd_nn_flat_parse(buf, len, &s, NULL, 0, NULL), code);
  }
}

static void test_sizes_and_offsets(void **state) {
  (void)state;
  rd_nn_spec_t s;
  small_spec(&s);
  assert_int_equal(rd_nn_spec_validate(&s, NULL), RD_OK);
  assert_int_equal(rd_nn_spec_params(&s), 26);
  assert_int_equal(rd_nn_spec_offset(&s, 0), 0);
  assert_int_equal(rd_nn_spec_offset(&s, 1), 16);
  assert_int_equal(rd_nn_spec_offset(&s, 2), 26);
  assert_int_equal(rd_nn_spec_max_width(&s), 4);
  /* magic, version, L, 3 sizes, 2 activations = 8 u32, then 26 floats. */
  assert_int_equal(rd_nn_flat_bytes(&s), 8 * 4 + 26 * 4);
  assert_string_equal(rd_nn_act_name(RD_NN_TANH), "tanh");
  assert_string_equal(rd_nn_act_name((rd_nn_act_t)7), "invalid");
}

static void test_byte_layout(void **state) {
  (void)state;
  small_net_t n;
  small_net(&n);
  size_t written = 0;
  assert_int_equal(rd_nn_flat_write(&n.s, n.p, n.buf, sizeof n.buf, &written, NULL), RD_OK);
  assert_int_equal(written, 136);
  assert_memory_equal(n.buf, "RDNN", 4);
  const uint32_t hdr[] = {RD_NN_FLAT_MAGIC, 1, 2, 3, 4, 2, RD_NN_RELU, RD_NN_IDENTITY};
  for (int i = 0; i < 8; i++) assert_int_equal(rd_le_get32(n.buf + 4 * i), hdr[i]);
  for (int i = 0; i < 26; i++) {
    uint32_t bits;
    memcpy(&bits, &n.p[i], 4);
    assert_int_equal(rd_le_get32(n.buf + 32 + 4 * i), bits);
  }
  /* W_0[1][2] is parameter 1*3+2 = 5; b_1[1] is 16 + 8 + 1 = 25. */
  uint32_t bits;
  memcpy(&bits, &n.p[5], 4);
  assert_int_equal(rd_le_get32(n.buf + 32 + 4 * 5), bits);
}

static void test_round_trip(void **state) {
  (void)state;
  rd_nn_spec_t s;
  memset(&s, 0, sizeof s);
  s.n_layers = 3;
  s.sizes[0] = 5;
  s.sizes[1] = 7;
  s.sizes[2] = 6;
  s.sizes[3] = 1;
  s.act[0] = RD_NN_TANH;
  s.act[1] = RD_NN_RELU;
  s.act[2] = RD_NN_IDENTITY;
  size_t np = rd_nn_spec_params(&s), nb = rd_nn_flat_bytes(&s);
  assert_int_equal(np, 7 * 6 + 6 * 8 + 1 * 7);
  float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q);
  uint8_t *buf = malloc(nb);
  for (size_t i = 0; i < np; i++) p[i] = sinf((float)i) * 1e3f;
  p[3] = -0.0f;        /* the sign of zero survives */
  p[np - 1] = 1e-40f; /* and denormals */
  size_t written;
  assert_int_equal(rd_nn_flat_write(&s, p, buf, nb, &written, NULL), RD_OK);
  assert_int_equal(written, nb);
  rd_nn_spec_t t;
  assert_int_equal(rd_nn_flat_parse(buf, nb, &t, q, np, NULL), RD_OK);
  assert_true(rd_nn_spec_equal(&s, &t));
  assert_memory_equal(p, q, np * sizeof *p);
  /* The spec alone, without a destination. */
  memset(&t, 0, sizeof t);
  assert_int_equal(rd_nn_flat_parse(buf, nb, &t, NULL, 0, NULL), RD_OK);
  assert_true(rd_nn_spec_equal(&s, &t));
  /* Destination too small is the caller's limit, not bad input. */
  assert_int_equal(rd_nn_flat_parse(buf, nb, &t, q, np - 1, NULL), RD_ETOOBIG);
  free(p);
  free(q);
  free(buf);
}

static void test_write_errors(void **state) {
  (void)state;
  small_net_t n;
  small_net(&n);
  memset(n.buf, 0x5A, sizeof n.buf);
  rd_error_t err;
  size_t written = 99;
  assert_int_equal(rd_nn_flat_write(&n.s, n.p, n.buf, 135, &written, &err), RD_ETOOBIG);
  assert_int_equal(written, 99);
  n.p[20] = NAN; /* layer 1 weight [1][0] */
  assert_int_equal(rd_nn_flat_write(&n.s, n.p, n.buf, sizeof n.buf, &written, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "layer 1 weight [1][0]"));
  n.p[20] = 0;
  n.p[25] = -INFINITY; /* layer 1 bias [1] */
  assert_int_equal(rd_nn_flat_write(&n.s, n.p, n.buf, sizeof n.buf, &written, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "layer 1 bias [1]"));
  for (size_t i = 0; i < sizeof n.buf; i++) assert_int_equal(n.buf[i], 0x5A);
  n.s.n_layers = 0;
  assert_int_equal(rd_nn_flat_write(&n.s, n.p, n.buf, sizeof n.buf, &written, &err), RD_EINVAL);
  assert_int_equal(written, 99);
}

static void test_validate_errors(void **state) {
  (void)state;
  rd_nn_spec_t s;
  rd_error_t err;
  small_spec(&s);
  s.n_layers = 0;
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  assert_int_equal(rd_nn_spec_params(&s), 0);
  assert_int_equal(rd_nn_flat_bytes(&s), 0);
  s.n_layers = RD_NN_MAX_LAYERS + 1;
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  small_spec(&s);
  s.sizes[1] = 0;
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "hidden"));
  small_spec(&s);
  s.sizes[2] = RD_NN_MAX_UNITS + 1;
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "output"));
  small_spec(&s);
  s.act[1] = (rd_nn_act_t)3;
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  assert_int_equal(rd_nn_spec_validate(NULL, &err), RD_EINVAL);
  /* 16 layers of the widest size: ~2^36 parameters. Counted in 64 bits, so
   * the bound fires instead of a wrapped small count. */
  memset(&s, 0, sizeof s);
  s.n_layers = RD_NN_MAX_LAYERS;
  for (int l = 0; l <= RD_NN_MAX_LAYERS; l++) s.sizes[l] = RD_NN_MAX_UNITS;
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "parameters"));
  /* Just at and just over the parameter bound: 1 -> N with N*(1+1) params. */
  memset(&s, 0, sizeof s);
  s.n_layers = 2;
  s.sizes[0] = 1023;
  s.sizes[1] = 65536;
  s.sizes[2] = 1; /* 65536*1024 + 65537 > 2^26 */
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  s.sizes[0] = 1022; /* 65536*1023 + 65537 = 2^26 - 65536 + 65537 > 2^26 still */
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_EINVAL);
  s.sizes[0] = 1021; /* 65536*1022 + 65537 <= 2^26 */
  assert_int_equal(rd_nn_spec_validate(&s, &err), RD_OK);
  assert_int_equal(rd_nn_spec_params(&s), (size_t)65536 * 1022 + 65537);
}

static void test_parse_errors(void **state) {
  (void)state;
  small_net_t n;
  small_net(&n);
  uint8_t good[136], b[200];
  assert_int_equal(rd_nn_flat_write(&n.s, n.p, good, sizeof good, NULL, NULL), RD_OK);
  expect_parse(good, sizeof good, RD_OK);

  expect_parse(NULL, 136, RD_EINVAL);
  for (size_t len = 0; len < sizeof good; len++) expect_parse(good, len, RD_EINVAL); /* truncated */
  memcpy(b, good, sizeof good);
  b[136] = 0;
  expect_parse(b, 137, RD_EINVAL); /* trailing byte */

  memcpy(b, good, sizeof good);
  b[0] ^= 1;
  expect_parse(b, sizeof good, RD_EINVAL); /* magic */
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 4, 2);
  expect_parse(b, sizeof good, RD_EINVAL); /* version from the future */
  rd_le_put32(b + 4, 0);
  expect_parse(b, sizeof good, RD_EINVAL);
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 8, 0);
  expect_parse(b, sizeof good, RD_EINVAL); /* no layers */
  rd_le_put32(b + 8, RD_NN_MAX_LAYERS + 1);
  expect_parse(b, sizeof good, RD_EINVAL); /* too many layers */
  rd_le_put32(b + 8, 0xFFFFFFFFu);
  expect_parse(b, sizeof good, RD_EINVAL);
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 16, 0);
  expect_parse(b, sizeof good, RD_EINVAL); /* hidden size 0 */
  rd_le_put32(b + 16, RD_NN_MAX_UNITS + 1);
  expect_parse(b, sizeof good, RD_EINVAL); /* hidden size too wide */
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 24, 3);
  expect_parse(b, sizeof good, RD_EINVAL); /* unknown activation */
  rd_le_put32(b + 24, 0x80000000u);
  expect_parse(b, sizeof good, RD_EINVAL);
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 12, 65536);
  rd_le_put32(b + 16, 65536);
  expect_parse(b, sizeof good, RD_EINVAL); /* 2^32 parameters declared: size overflow */
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 12, 4);
  expect_parse(b, sizeof good, RD_EINVAL); /* one more input: 4 bytes short */
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 12, 2);
  expect_parse(b, sizeof good, RD_EINVAL); /* one fewer input: 4 bytes over */

  /* Non-finite weights: NaN (quiet and signalling), +inf, -inf, anywhere. */
  const uint32_t bad[] = {0x7FC00000u, 0x7F800001u, 0x7F800000u, 0xFF800000u};
  const size_t where[] = {0, 15, 16, 25};
  for (int k = 0; k < 4; k++) {
    memcpy(b, good, sizeof good);
    rd_le_put32(b + 32 + 4 * where[k], bad[k]);
    expect_parse(b, sizeof good, RD_EINVAL);
  }
  /* The largest finite float is fine. */
  memcpy(b, good, sizeof good);
  rd_le_put32(b + 32, 0x7F7FFFFFu);
  expect_parse(b, sizeof good, RD_OK);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_sizes_and_offsets), cmocka_unit_test(test_byte_layout),
         cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_write_errors),
         cmocka_unit_test(test_validate_errors),   cmocka_unit_test(test_parse_errors))
