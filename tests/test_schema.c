/* test_schema.c - row schemas: validation, sizes, dtype names, lookup. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "rd_schema.h"
#include "rdt_schema.h"
#include "rdt_main.h"

/* A valid schema of every dtype, scalars and tensors. */
static void mixed_schema(rd_schema_t *s) {
  memset(s, 0, sizeof *s);
  static const uint32_t obs[] = {4};
  static const uint32_t img[] = {84, 84, 4};
  static const uint32_t ids[] = {2, 3};
  rdt_field_shape(&s->fields[0], "obs", RD_DTYPE_FLOAT32, 1, obs);
  rdt_field_shape(&s->fields[1], "action", RD_DTYPE_INT32, 0, NULL);
  rdt_field_shape(&s->fields[2], "reward", RD_DTYPE_FLOAT32, 0, NULL);
  rdt_field_shape(&s->fields[3], "pixels.next-frame_0", RD_DTYPE_UINT8, 3, img);
  rdt_field_shape(&s->fields[4], "done", RD_DTYPE_BOOL, 0, NULL);
  rdt_field_shape(&s->fields[5], "ids", RD_DTYPE_INT64, 2, ids);
  s->n_fields = 6;
}

/* Validate, expect `code`; on failure the error must carry a message. */
static void expect_validate(const rd_schema_t *s, int code) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_schema_validate(s, &err);
  if (rc != code)
    fail_msg("rd_schema_validate returned %s (%s), expected %s", rd_err_name(rc), err.msg,
             rd_err_name(code));
  if (code != RD_OK) {
    assert_int_equal(err.code, code);
    assert_true(strlen(err.msg) > 0);
    /* A NULL error pointer is allowed and gives the same code. */
    assert_int_equal(rd_schema_validate(s, NULL), code);
  }
}

/* RD_SCHEMA_MAX_FIELDS uint8 fields named <prefix>0, <prefix>1, ... of
 * the given shape. */
static void all_fields(rd_schema_t *s, char prefix, uint32_t rank, const uint32_t *shape) {
  memset(s, 0, sizeof *s);
  for (uint32_t i = 0; i < RD_SCHEMA_MAX_FIELDS; i++) {
    char name[16];
    snprintf(name, sizeof name, "%c%u", prefix, i);
    rdt_field_shape(&s->fields[i], name, RD_DTYPE_UINT8, rank, shape);
  }
  s->n_fields = RD_SCHEMA_MAX_FIELDS;
}

static void test_valid_schema_sizes(void **state) {
  (void)state;
  rd_schema_t s;
  mixed_schema(&s);
  expect_validate(&s, RD_OK);
  assert_int_equal(rd_field_bytes(&s.fields[0]), 16);
  assert_int_equal(rd_field_bytes(&s.fields[1]), 4);
  assert_int_equal(rd_field_bytes(&s.fields[2]), 4);
  assert_int_equal(rd_field_bytes(&s.fields[3]), 84 * 84 * 4);
  assert_int_equal(rd_field_bytes(&s.fields[4]), 1);
  assert_int_equal(rd_field_bytes(&s.fields[5]), 2 * 3 * 8);
  assert_int_equal(rd_schema_row_bytes(&s), 16 + 4 + 4 + 84 * 84 * 4 + 1 + 48);

  /* Boundaries that are still valid: 32 fields, a 63-character name, rank 8,
   * and a row of exactly 64 MiB. */
  rd_schema_t b;
  all_fields(&b, 'f', 0, NULL);
  expect_validate(&b, RD_OK);
  assert_int_equal(rd_schema_row_bytes(&b), RD_SCHEMA_MAX_FIELDS);

  memset(&b, 0, sizeof b);
  memset(b.fields[0].name, 'a', RD_FIELD_NAME_MAX - 1);
  b.fields[0].name[RD_FIELD_NAME_MAX - 1] = '\0';
  b.fields[0].dtype = RD_DTYPE_INT64;
  b.fields[0].rank = RD_FIELD_MAX_RANK;
  for (int d = 0; d < RD_FIELD_MAX_RANK; d++) b.fields[0].shape[d] = 2;
  b.n_fields = 1;
  expect_validate(&b, RD_OK);
  assert_int_equal(rd_field_bytes(&b.fields[0]), 8 * 256);

  static const uint32_t half[] = {32u << 20};
  memset(&b, 0, sizeof b);
  rdt_field_shape(&b.fields[0], "a", RD_DTYPE_UINT8, 1, half);
  rdt_field_shape(&b.fields[1], "b", RD_DTYPE_BOOL, 1, half);
  b.n_fields = 2;
  expect_validate(&b, RD_OK);
  assert_int_equal(rd_schema_row_bytes(&b), RD_ROW_MAX_BYTES);
}

static void test_field_count_errors(void **state) {
  (void)state;
  rd_schema_t s;
  mixed_schema(&s);
  s.n_fields = 0;
  expect_validate(&s, RD_EINVAL);
  memset(&s, 0, sizeof s);
  for (uint32_t i = 0; i < RD_SCHEMA_MAX_FIELDS; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%u", i);
    rdt_field_shape(&s.fields[i], name, RD_DTYPE_UINT8, 0, NULL);
  }
  s.n_fields = RD_SCHEMA_MAX_FIELDS + 1;
  expect_validate(&s, RD_EINVAL);
  s.n_fields = UINT32_MAX;
  expect_validate(&s, RD_EINVAL);
}

static void test_name_errors(void **state) {
  (void)state;
  rd_schema_t s;

  /* Empty name, first and later field. */
  mixed_schema(&s);
  s.fields[0].name[0] = '\0';
  expect_validate(&s, RD_EINVAL);
  mixed_schema(&s);
  s.fields[5].name[0] = '\0';
  expect_validate(&s, RD_EINVAL);

  /* Characters outside [A-Za-z0-9_.-]. */
  static const char *const bad[] = {"ob s", "a/b", "x:y", "r\xc3\xa9ward", "tab\t", "q\"",
                                    "n\n", "a,b", "+x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mixed_schema(&s);
    snprintf(s.fields[2].name, sizeof s.fields[2].name, "%s", bad[i]);
    expect_validate(&s, RD_EINVAL);
  }
  /* ... and the allowed ones really are allowed. */
  mixed_schema(&s);
  snprintf(s.fields[2].name, sizeof s.fields[2].name, "%s", "Az09_.-");
  expect_validate(&s, RD_OK);

  /* Duplicate names, adjacent and far apart. */
  mixed_schema(&s);
  snprintf(s.fields[1].name, sizeof s.fields[1].name, "%s", "obs");
  expect_validate(&s, RD_EINVAL);
  mixed_schema(&s);
  snprintf(s.fields[5].name, sizeof s.fields[5].name, "%s", "action");
  expect_validate(&s, RD_EINVAL);

  /* No NUL within 64 bytes. */
  mixed_schema(&s);
  memset(s.fields[3].name, 'n', RD_FIELD_NAME_MAX);
  expect_validate(&s, RD_EINVAL);
}

static void test_dtype_and_shape_errors(void **state) {
  (void)state;
  rd_schema_t s;
  mixed_schema(&s);
  s.fields[1].dtype = RD_DTYPE_INVALID;
  expect_validate(&s, RD_EINVAL);
  mixed_schema(&s);
  s.fields[1].dtype = (rd_dtype_t)6;
  expect_validate(&s, RD_EINVAL);
  mixed_schema(&s);
  s.fields[1].dtype = (rd_dtype_t)-1;
  expect_validate(&s, RD_EINVAL);

  /* Rank above 8. */
  mixed_schema(&s);
  s.fields[0].rank = RD_FIELD_MAX_RANK + 1;
  expect_validate(&s, RD_EINVAL);
  mixed_schema(&s);
  s.fields[0].rank = UINT32_MAX;
  expect_validate(&s, RD_EINVAL);

  /* A zero dimension anywhere in the shape. */
  for (uint32_t d = 0; d < 3; d++) {
    mixed_schema(&s);
    s.fields[3].shape[d] = 0;
    expect_validate(&s, RD_EINVAL);
  }
}

static void test_row_size_limit(void **state) {
  (void)state;
  rd_schema_t s;

  /* One field of 64 MiB + 1 byte. */
  static const uint32_t over[] = {(64u << 20) + 1};
  memset(&s, 0, sizeof s);
  rdt_field_shape(&s.fields[0], "big", RD_DTYPE_UINT8, 1, over);
  s.n_fields = 1;
  expect_validate(&s, RD_EINVAL);

  /* Two fields that fit alone but not together. */
  static const uint32_t half[] = {32u << 20};
  memset(&s, 0, sizeof s);
  rdt_field_shape(&s.fields[0], "a", RD_DTYPE_UINT8, 1, half);
  rdt_field_shape(&s.fields[1], "b", RD_DTYPE_UINT8, 1, half);
  rdt_field_shape(&s.fields[2], "c", RD_DTYPE_BOOL, 0, NULL);
  s.n_fields = 3;
  expect_validate(&s, RD_EINVAL);

  /* 16 Mi float32 elements = 64 MiB exactly is fine; one more is not. */
  static const uint32_t f16m[] = {4096, 4096};
  memset(&s, 0, sizeof s);
  rdt_field_shape(&s.fields[0], "x", RD_DTYPE_FLOAT32, 2, f16m);
  s.n_fields = 1;
  expect_validate(&s, RD_OK);
  s.fields[0].shape[1] = 4097;
  expect_validate(&s, RD_EINVAL);

  /* Shapes whose byte count overflows 64 bits (or 32) when multiplied
   * naively: 4 * 2^48 = 2^50, 1 * 2^64 = 0 (mod 2^64), 8 * 2^64 = 0. */
  static const uint32_t huge3[] = {65536, 65536, 65536};
  memset(&s, 0, sizeof s);
  rdt_field_shape(&s.fields[0], "h", RD_DTYPE_FLOAT32, 3, huge3);
  s.n_fields = 1;
  expect_validate(&s, RD_EINVAL);

  static const uint32_t wrap4[] = {65536, 65536, 65536, 65536};
  memset(&s, 0, sizeof s);
  rdt_field_shape(&s.fields[0], "w", RD_DTYPE_UINT8, 4, wrap4);
  s.n_fields = 1;
  expect_validate(&s, RD_EINVAL);
  s.fields[0].dtype = RD_DTYPE_INT64;
  expect_validate(&s, RD_EINVAL);

  static const uint32_t max8[] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
                                  UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};
  memset(&s, 0, sizeof s);
  rdt_field_shape(&s.fields[0], "m", RD_DTYPE_INT64, 8, max8);
  s.n_fields = 1;
  expect_validate(&s, RD_EINVAL);

  /* 32 fields of 2 MiB + 1 byte each: every field fits, the row is 32
   * bytes too long. */
  static const uint32_t g2[] = {(2u << 20) + 1};
  all_fields(&s, 'g', 1, g2);
  expect_validate(&s, RD_EINVAL);
}

static void test_dtype_names(void **state) {
  (void)state;
  static const struct {
    rd_dtype_t d;
    const char *name;
    size_t size;
  } all[] = {{RD_DTYPE_FLOAT32, "float32", 4},
             {RD_DTYPE_INT32, "int32", 4},
             {RD_DTYPE_INT64, "int64", 8},
             {RD_DTYPE_UINT8, "uint8", 1},
             {RD_DTYPE_BOOL, "bool", 1}};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    assert_string_equal(rd_dtype_name(all[i].d), all[i].name);
    assert_int_equal(rd_dtype_parse(all[i].name), all[i].d);
    assert_int_equal(rd_dtype_parse(rd_dtype_name(all[i].d)), all[i].d);
    assert_int_equal(rd_dtype_size(all[i].d), all[i].size);
  }
  assert_string_equal(rd_dtype_name(RD_DTYPE_INVALID), "invalid");
  assert_string_equal(rd_dtype_name((rd_dtype_t)6), "invalid");
  assert_string_equal(rd_dtype_name((rd_dtype_t)-3), "invalid");
  assert_int_equal(rd_dtype_size(RD_DTYPE_INVALID), 0);
  assert_int_equal(rd_dtype_size((rd_dtype_t)6), 0);
  assert_int_equal(rd_dtype_parse("invalid"), RD_DTYPE_INVALID);
  assert_int_equal(rd_dtype_parse("float64"), RD_DTYPE_INVALID);
  assert_int_equal(rd_dtype_parse("float"), RD_DTYPE_INVALID);
  assert_int_equal(rd_dtype_parse("float32 "), RD_DTYPE_INVALID);
  assert_int_equal(rd_dtype_parse(""), RD_DTYPE_INVALID);
  assert_int_equal(rd_dtype_parse(NULL), RD_DTYPE_INVALID);
}

static void test_schema_find(void **state) {
  (void)state;
  rd_schema_t s;
  mixed_schema(&s);
  assert_int_equal(rd_schema_find(&s, "obs"), 0);
  assert_int_equal(rd_schema_find(&s, "action"), 1);
  assert_int_equal(rd_schema_find(&s, "reward"), 2);
  assert_int_equal(rd_schema_find(&s, "pixels.next-frame_0"), 3);
  assert_int_equal(rd_schema_find(&s, "done"), 4);
  assert_int_equal(rd_schema_find(&s, "ids"), 5);
  assert_int_equal(rd_schema_find(&s, "ob"), -1);     /* prefix */
  assert_int_equal(rd_schema_find(&s, "obs2"), -1);   /* extension */
  assert_int_equal(rd_schema_find(&s, "OBS"), -1);    /* case */
  assert_int_equal(rd_schema_find(&s, ""), -1);
  assert_int_equal(rd_schema_find(&s, "missing"), -1);
  /* Fields past n_fields are not part of the schema. */
  s.n_fields = 2;
  assert_int_equal(rd_schema_find(&s, "action"), 1);
  assert_int_equal(rd_schema_find(&s, "reward"), -1);
  s.n_fields = 0;
  assert_int_equal(rd_schema_find(&s, "obs"), -1);
}

/* A bool column holds 0 or 1 only; the error names the field and the
 * first bad row (and element, for a shaped field), at every offset of the
 * word-at-a-time scan: the 256-byte blocks, the 8-byte words, the tail. */
static void test_bool_column(void **state) {
  (void)state;
  rd_field_t scalar, shaped, other;
  static const uint32_t three[] = {3};
  rdt_field_shape(&scalar, "done", RD_DTYPE_BOOL, 0, NULL);
  rdt_field_shape(&shaped, "mask", RD_DTYPE_BOOL, 1, three);
  rdt_field_shape(&other, "pix", RD_DTYPE_UINT8, 0, NULL);
  uint8_t col[300]; /* a block of 256, 5 words of 8, a tail of 4 */
  for (size_t i = 0; i < sizeof col; i++) col[i] = (uint8_t)(i % 3 == 0);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_field_check_column(&scalar, col, sizeof col, &err), RD_OK);
  assert_int_equal(rd_field_check_column(&shaped, col, sizeof col / 3, &err), RD_OK);
  assert_int_equal(rd_field_check_column(&scalar, col, 0, &err), RD_OK);
  static const uint8_t bad_bytes[] = {2, 0x80, 0xFF, 0x10};
  for (size_t at = 0; at < sizeof col; at++) {
    for (size_t b = 0; b < sizeof bad_bytes; b++) {
      uint8_t keep = col[at];
      col[at] = bad_bytes[b];
      /* A second bad byte later: the first one is named. */
      uint8_t keep_last = col[sizeof col - 1];
      if (at + 1 < sizeof col) col[sizeof col - 1] = 3;
      rd_error_clear(&err);
      assert_int_equal(rd_field_check_column(&scalar, col, sizeof col, &err), RD_EINVAL);
      char want[128];
      snprintf(want, sizeof want, "field \"done\" (bool): row %zu holds 0x%02x", at,
               bad_bytes[b]);
      if (strstr(err.msg, want) == NULL) fail_msg("at %zu: \"%s\" lacks \"%s\"", at, err.msg, want);
      rd_error_clear(&err);
      assert_int_equal(rd_field_check_column(&shaped, col, sizeof col / 3, &err), RD_EINVAL);
      snprintf(want, sizeof want, "row %zu, element %zu holds", at / 3, at % 3);
      if (strstr(err.msg, want) == NULL) fail_msg("at %zu: \"%s\" lacks \"%s\"", at, err.msg, want);
      /* Every byte is a uint8. */
      assert_int_equal(rd_field_check_column(&other, col, sizeof col, NULL), RD_OK);
      col[sizeof col - 1] = keep_last;
      col[at] = keep;
    }
  }
  /* A NULL error pointer gives the same code. */
  col[7] = 9;
  assert_int_equal(rd_field_check_column(&scalar, col, sizeof col, NULL), RD_EINVAL);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_valid_schema_sizes),
         cmocka_unit_test(test_field_count_errors),
         cmocka_unit_test(test_name_errors),
         cmocka_unit_test(test_dtype_and_shape_errors),
         cmocka_unit_test(test_row_size_limit),
         cmocka_unit_test(test_dtype_names),
         cmocka_unit_test(test_schema_find),
         cmocka_unit_test(test_bool_column))
