/* rd_schema.h - the row schema of a table: named, typed, shaped fields.
 *
 * A row is the concatenation of its fields; on the wire and in every batch
 * API a field travels as one packed little-endian column of n rows, so a
 * batch of n rows is n_fields columns of n * rd_field_bytes(f) bytes.
 */
#ifndef RD_SCHEMA_H
#define RD_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

#define RD_SCHEMA_MAX_FIELDS 32
#define RD_FIELD_NAME_MAX 64 /* including the terminating NUL */
#define RD_FIELD_MAX_RANK 8
#define RD_ROW_MAX_BYTES (64u << 20) /* one row may not exceed 64 MiB */

typedef enum {
  RD_DTYPE_INVALID = 0,
  RD_DTYPE_FLOAT32 = 1,
  RD_DTYPE_INT32 = 2,
  RD_DTYPE_INT64 = 3,
  RD_DTYPE_UINT8 = 4,
  RD_DTYPE_BOOL = 5, /* one byte, 0 or 1 */
} rd_dtype_t;

typedef struct {
  char name[RD_FIELD_NAME_MAX];
  rd_dtype_t dtype;
  uint32_t rank;                     /* 0 = scalar */
  uint32_t shape[RD_FIELD_MAX_RANK]; /* each dimension >= 1 */
} rd_field_t;

typedef struct {
  uint32_t n_fields;
  rd_field_t fields[RD_SCHEMA_MAX_FIELDS];
} rd_schema_t;

/* Bytes of one element (0 for an invalid dtype). */
size_t rd_dtype_size(rd_dtype_t dtype);
/* "float32", "int32", "int64", "uint8", "bool"; "invalid" otherwise. */
const char *rd_dtype_name(rd_dtype_t dtype);
/* Parse a dtype name; RD_DTYPE_INVALID if unknown. */
rd_dtype_t rd_dtype_parse(const char *name);

/* Checks: 1..RD_SCHEMA_MAX_FIELDS fields; names non-empty, of
 * [A-Za-z0-9_.-], NUL-terminated within RD_FIELD_NAME_MAX and unique; a
 * known dtype; rank <= RD_FIELD_MAX_RANK with every dimension >= 1; the row
 * at most RD_ROW_MAX_BYTES. */
int rd_schema_validate(const rd_schema_t *s, rd_error_t *err);

/* Bytes of one row of a field / of the whole row (schema must be valid). */
size_t rd_field_bytes(const rd_field_t *f);
size_t rd_schema_row_bytes(const rd_schema_t *s);

/* Index of the field called name, or -1. */
int rd_schema_find(const rd_schema_t *s, const char *name);

/* Check that a packed column of n rows of field f holds only values of its
 * dtype. A BOOL element is one byte, 0 or 1: any other byte is RD_EINVAL
 * naming the field and the first bad row (a learner reads `done` as a bool,
 * and a sampled 0x02 would be a value no client wrote as one). Every bit
 * pattern is a value of the other dtypes. data holds n * rd_field_bytes(f)
 * bytes. A word at a time: this runs on every insert. */
int rd_field_check_column(const rd_field_t *f, const void *data, size_t n, rd_error_t *err);

#endif
