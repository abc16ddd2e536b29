/* sample_reply.h - a SampleResponse built where the table writes it.
 *
 * A Sample's rows go from the table into the reply's memory once: the
 * reply (api/replayd.proto SampleResponse) is encoded by hand into one
 * buffer whose column offsets are known before sampling, and
 * rd_table_sample copies each row straight to its place there. The fields
 * whose sizes the batch size fixes come first (probabilities, weights,
 * rows); then the varints, whose lengths only the sample tells (keys,
 * table_size): protobuf parsers accept fields in any order. The table
 * writes keys, probabilities and weights (aligned arrays) to scratch at
 * the buffer's end; rd_sample_reply_finish encodes them into the message
 * and hands the buffer to gRPC without copying it.
 */
#ifndef RD_SAMPLE_REPLY_H
#define RD_SAMPLE_REPLY_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "table.h"

typedef struct {
  uint8_t *buf;     /* the message, then the scratch: one allocation */
  size_t head;      /* bytes of the message before the keys */
  uint32_t n;
  uint8_t *probabilities_at, *weights_at; /* where their packed values go */
  uint64_t *keys;   /* scratch the table writes */
  double *probabilities, *weights;
  rd_buf_t cols[RD_SCHEMA_MAX_FIELDS]; /* the columns, in the message */
} rd_sample_reply_t;

/* Lay out the reply of an n-row sample of fields of these sizes (bytes a
 * row) and point out's keys, probabilities, weights and cols at it.
 * RD_ENOMEM, RD_ETOOBIG (sizes past size_t), RD_EINVAL (more than
 * RD_SCHEMA_MAX_FIELDS fields). */
int rd_sample_reply_init(rd_sample_reply_t *s, uint32_t n, const size_t *field_bytes,
                         uint32_t n_fields, rd_sample_out_t *out, rd_error_t *err);

/* rd_sample_alloc_cb (workload.h) over rd_sample_reply_init; arg is the
 * rd_sample_reply_t. */
int rd_sample_reply_alloc(void *arg, const rd_table_t *table, uint32_t n, rd_sample_out_t *out,
                          rd_error_t *err);

/* Once out has been filled: encode keys, probabilities, weights and
 * table_size and return the reply, which takes the buffer (s is empty
 * then). keys_le: the keys go as field 6, n x 8 little-endian bytes that a
 * client reads without decoding (SampleRequest.keys_fixed64), instead of
 * packed varints in field 1. */
grpc_byte_buffer *rd_sample_reply_finish(rd_sample_reply_t *s, uint64_t table_size,
                                         int keys_le);

/* Free a reply never finished (idempotent). */
void rd_sample_reply_free(rd_sample_reply_t *s);

#endif
