/* sample_reply.c - SampleResponse's wire format, by hand.
 *
 * A field is a tag (field number << 3 | wire type) then its value
 * (pb_wire.h: varints; packed repeated scalars and bytes are
 * length-delimited, wire type 2). Doubles are 8 bytes little-endian. The
 * message, as protobuf-c would write it except for the order of its
 * fields:
 *   2 probabilities  packed double   (omitted when n = 0)
 *   3 weights        packed double   (omitted when n = 0)
 *   5 rows           RowBatch { 1 count uint32 (omitted when 0),
 *                               2 columns bytes, one per field }
 *   1 keys           packed uint64   (omitted when n = 0), or, when the
 *   6 keys_le        bytes           request asked (keys_fixed64): n x 8
 *                                    bytes, each key little-endian
 *   4 table_size     uint64          (omitted when 0)
 */
#include "sample_reply.h"

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <stdlib.h>
#include <string.h>

#include "pb_wire.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "doubles and keys_le are copied as little-endian 8-byte values");

#define WIRE_VARINT 0
#define WIRE_LEN 2
#define TAG(field, wire) ((uint8_t)((field) << 3 | (wire))) /* one byte: fields 1..15 */

/* A length-delimited field's tag and length; returns where its data go. */
static uint8_t *put_len(uint8_t *p, uint8_t field, uint64_t len) {
  *p++ = TAG(field, WIRE_LEN);
  return rd_pb_put_varint(p, len);
}

/* The reply's layout for n rows: the RowBatch's bytes (rows), the
 * message's before the keys (head) and in all with the scratch (cap). */
typedef struct {
  size_t col[RD_SCHEMA_MAX_FIELDS];
  size_t rows, head, scratch, cap;
} layout_t;

static int layout(uint32_t n, const size_t *field_bytes, uint32_t n_fields, layout_t *l,
                  rd_error_t *err) {
  if (n_fields > RD_SCHEMA_MAX_FIELDS)
    return rd_error_set(err, RD_EINVAL, "a sample reply of %u fields; at most %d", n_fields,
                        RD_SCHEMA_MAX_FIELDS);
  l->rows = n ? 1 + rd_pb_varint_bytes(n) : 0;
  for (uint32_t f = 0; f < n_fields; f++) {
    if (__builtin_mul_overflow(field_bytes[f], (size_t)n, &l->col[f]) || l->col[f] > SIZE_MAX / 4)
      return rd_error_set(err, RD_ETOOBIG, "a sample reply's column %u is too large", f);
    l->rows += rd_pb_len_field_bytes(l->col[f]);
  }
  size_t doubles = n ? 2 * rd_pb_len_field_bytes((uint64_t)n * 8) : 0;
  l->head = doubles + rd_pb_len_field_bytes(l->rows);
  /* At most what the keys (varints; their fixed64 form takes no more)
   * and table_size take after it. */
  size_t tail = (n ? rd_pb_len_field_bytes((uint64_t)n * RD_PB_VARINT_MAX) : 0) + 1 + RD_PB_VARINT_MAX;
  l->scratch = (l->head + tail + 7) & ~(size_t)7; /* 8-aligned, as malloc's buffer is */
  l->cap = l->scratch + (size_t)n * (sizeof(uint64_t) + 2 * sizeof(double));
  if (l->head > SIZE_MAX / 4 || l->cap < l->scratch)
    return rd_error_set(err, RD_ETOOBIG, "a sample reply of %u rows is too large", n);
  return RD_OK;
}

int rd_sample_reply_init(rd_sample_reply_t *s, uint32_t n, const size_t *field_bytes,
                         uint32_t n_fields, rd_sample_out_t *out, rd_error_t *err) {
  memset(s, 0, sizeof *s);
  layout_t l;
  memset(&l, 0, sizeof l);
  int rc = layout(n, field_bytes, n_fields, &l, err);
  if (rc) return rc;
  s->buf = malloc(l.cap ? l.cap : 1);
  if (s->buf == NULL)
    return rd_error_set(err, RD_ENOMEM, "out of memory for a sample of %u rows (%zu bytes)", n,
                        l.cap);
  s->n = n;
  s->keys = (uint64_t *)(void *)(s->buf + l.scratch);
  s->probabilities = (double *)(void *)(s->keys + n);
  s->weights = s->probabilities + n;
  uint8_t *p = s->buf;
  if (n) {
    s->probabilities_at = p = put_len(p, 2, (uint64_t)n * 8);
    s->weights_at = p = put_len(p + (size_t)n * 8, 3, (uint64_t)n * 8);
    p += (size_t)n * 8;
  }
  p = put_len(p, 5, l.rows);
  if (n) {
    *p++ = TAG(1, WIRE_VARINT);
    p = rd_pb_put_varint(p, n);
  }
  for (uint32_t f = 0; f < n_fields; f++) {
    s->cols[f].data = p = put_len(p, 2, l.col[f]);
    s->cols[f].bytes = l.col[f];
    p += l.col[f];
  }
  s->head = (size_t)(p - s->buf);
  out->keys = s->keys;
  out->probabilities = s->probabilities;
  out->weights = s->weights;
  out->cols = s->cols;
  return RD_OK;
}

int rd_sample_reply_alloc(void *arg, const rd_table_t *table, uint32_t n, rd_sample_out_t *out,
                          rd_error_t *err) {
  return rd_sample_reply_init(arg, n, table->field_bytes, table->config.schema.n_fields, out,
                              err);
}

static void free_buf(void *p) { free(p); }

grpc_byte_buffer *rd_sample_reply_finish(rd_sample_reply_t *s, uint64_t table_size,
                                         int keys_le) {
  uint32_t n = s->n;
  uint8_t *p = s->buf + s->head;
  if (n) {
    memcpy(s->probabilities_at, s->probabilities, (size_t)n * 8);
    memcpy(s->weights_at, s->weights, (size_t)n * 8);
  }
  if (n && keys_le) {
    /* The scratch starts past the varint keys' bound, which is larger:
     * the copy does not overlap it. */
    p = put_len(p, 6, (uint64_t)n * 8);
    memcpy(p, s->keys, (size_t)n * 8);
    p += (size_t)n * 8;
  } else if (n) {
    uint64_t keys = 0;
    for (uint32_t i = 0; i < n; i++) keys += rd_pb_varint_bytes(s->keys[i]);
    p = put_len(p, 1, keys);
    for (uint32_t i = 0; i < n; i++) p = rd_pb_put_varint(p, s->keys[i]);
  }
  if (table_size) {
    *p++ = TAG(4, WIRE_VARINT);
    p = rd_pb_put_varint(p, table_size);
  }
  grpc_slice slice = grpc_slice_new(s->buf, (size_t)(p - s->buf), free_buf);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
  grpc_slice_unref(slice);
  memset(s, 0, sizeof *s);
  return bb;
}

void rd_sample_reply_free(rd_sample_reply_t *s) {
  free(s->buf);
  memset(s, 0, sizeof *s);
}
