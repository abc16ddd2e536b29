/* rd_schema.c - validation and sizes of row schemas. */
#include "rd_schema.h"

#include <stdint.h>
#include <string.h>

size_t rd_dtype_size(rd_dtype_t dtype) {
  switch (dtype) {
  case RD_DTYPE_FLOAT32: return 4;
  case RD_DTYPE_INT32: return 4;
  case RD_DTYPE_INT64: return 8;
  case RD_DTYPE_UINT8: return 1;
  case RD_DTYPE_BOOL: return 1;
  default: return 0;
  }
}

static const char *const dtype_names[] = {"invalid", "float32", "int32", "int64", "uint8", "bool"};

const char *rd_dtype_name(rd_dtype_t dtype) {
  if (dtype <= RD_DTYPE_INVALID || dtype > RD_DTYPE_BOOL) return dtype_names[0];
  return dtype_names[dtype];
}

rd_dtype_t rd_dtype_parse(const char *name) {
  for (int d = RD_DTYPE_FLOAT32; d <= RD_DTYPE_BOOL; d++)
    if (name != NULL && strcmp(name, dtype_names[d]) == 0) return (rd_dtype_t)d;
  return RD_DTYPE_INVALID;
}

static int valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-';
}

int rd_schema_validate(const rd_schema_t *s, rd_error_t *err) {
  if (s->n_fields == 0 || s->n_fields > RD_SCHEMA_MAX_FIELDS)
    return rd_error_set(err, RD_EINVAL, "a schema needs 1 to %d fields, not %u",
                        RD_SCHEMA_MAX_FIELDS, s->n_fields);
  uint64_t row = 0;
  for (uint32_t i = 0; i < s->n_fields; i++) {
    const rd_field_t *f = &s->fields[i];
    size_t len = strnlen(f->name, RD_FIELD_NAME_MAX);
    if (len == 0) return rd_error_set(err, RD_EINVAL, "field %u has an empty name", i);
    if (len == RD_FIELD_NAME_MAX)
      return rd_error_set(err, RD_EINVAL, "field %u: name longer than %d characters", i,
                          RD_FIELD_NAME_MAX - 1);
    for (size_t c = 0; c < len; c++)
      if (!valid_name_char(f->name[c]))
        return rd_error_set(err, RD_EINVAL,
                            "field %u: name \"%s\" may use only letters, digits, '_', '.', '-'",
                            i, f->name);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(s->fields[j].name, f->name) == 0)
        return rd_error_set(err, RD_EINVAL, "field name \"%s\" is used twice", f->name);
    if (rd_dtype_size(f->dtype) == 0)
      return rd_error_set(err, RD_EINVAL, "field \"%s\": unknown dtype %d", f->name,
                          (int)f->dtype);
    if (f->rank > RD_FIELD_MAX_RANK)
      return rd_error_set(err, RD_EINVAL, "field \"%s\": rank %u exceeds %d", f->name, f->rank,
                          RD_FIELD_MAX_RANK);
    uint64_t bytes = rd_dtype_size(f->dtype);
    for (uint32_t d = 0; d < f->rank; d++) {
      if (f->shape[d] == 0)
        return rd_error_set(err, RD_EINVAL, "field \"%s\": dimension %u is 0", f->name, d);
      bytes *= f->shape[d];
      if (bytes > RD_ROW_MAX_BYTES) break; /* stop before any overflow */
    }
    row += bytes;
    if (row > RD_ROW_MAX_BYTES)
      return rd_error_set(err, RD_EINVAL, "a row of this schema exceeds %u bytes (at field \"%s\")",
                          RD_ROW_MAX_BYTES, f->name);
  }
  return RD_OK;
}

size_t rd_field_bytes(const rd_field_t *f) {
  size_t bytes = rd_dtype_size(f->dtype);
  for (uint32_t d = 0; d < f->rank; d++) bytes *= f->shape[d];
  return bytes;
}

size_t rd_schema_row_bytes(const rd_schema_t *s) {
  size_t row = 0;
  for (uint32_t i = 0; i < s->n_fields; i++) row += rd_field_bytes(&s->fields[i]);
  return row;
}

int rd_schema_find(const rd_schema_t *s, const char *name) {
  for (uint32_t i = 0; i < s->n_fields && i < RD_SCHEMA_MAX_FIELDS; i++)
    if (strncmp(s->fields[i].name, name, RD_FIELD_NAME_MAX) == 0) return (int)i;
  return -1;
}

/* Offset of the first byte of p[0, len) that is neither 0 nor 1, or len. */
static size_t first_non_bool(const uint8_t *p, size_t len) {
  const uint64_t high7 = 0xFEFEFEFEFEFEFEFEull; /* any bit but the lowest of a byte */
  size_t i = 0;
  for (; i + 256 <= len; i += 256) { /* a branch per 256 bytes; the OR vectorizes */
    uint64_t acc = 0;
    for (size_t k = 0; k < 256; k += 8) {
      uint64_t w;
      memcpy(&w, p + i + k, sizeof w);
      acc |= w;
    }
    if ((acc & high7) != 0) break;
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, sizeof w);
    if ((w & high7) != 0) break;
  }
  for (; i < len; i++)
    if (p[i] > 1) return i;
  return len;
}

int rd_field_check_column(const rd_field_t *f, const void *data, size_t n, rd_error_t *err) {
  if (f->dtype != RD_DTYPE_BOOL || n == 0) return RD_OK;
  size_t per_row = rd_field_bytes(f), len = n * per_row;
  const uint8_t *p = data;
  size_t at = first_non_bool(p, len);
  if (at == len) return RD_OK;
  if (per_row == 1)
    return rd_error_set(err, RD_EINVAL,
                        "field \"%s\" (bool): row %zu holds 0x%02x; a bool is 0 or 1", f->name,
                        at, (unsigned)p[at]);
  return rd_error_set(err, RD_EINVAL,
                      "field \"%s\" (bool): row %zu, element %zu holds 0x%02x; a bool is 0 or 1",
                      f->name, at / per_row, at % per_row, (unsigned)p[at]);
}
