/* rpc_body.c - request bytes, inflated within the limit (rpc_body.h). */
#include "rpc_body.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The first output buffer of an inflate: a multiple of the input, since
 * real payloads (float observations) seldom shrink below a fifth. */
#define INFLATE_FIRST_RATIO 4
#define INFLATE_FIRST_MIN (64u << 10)

/* Inflate every slice of sb (zlib or gzip framing by windowBits) into a
 * malloc'd buffer of at most max_bytes. */
static int inflate_bounded(const grpc_slice_buffer *sb, int window_bits, size_t max_bytes,
                           grpc_slice *out, rd_error_t *err) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, window_bits) != Z_OK)
    return rd_error_set(err, RD_ENOMEM, "cannot start inflating the request");
  size_t cap = sb->length * INFLATE_FIRST_RATIO;
  if (cap < INFLATE_FIRST_MIN) cap = INFLATE_FIRST_MIN;
  if (cap > max_bytes) cap = max_bytes;
  /* One byte beyond the limit tells "exactly max_bytes" from "more". */
  uint8_t *buf = malloc(cap + 1);
  size_t used = 0;
  int rc = RD_OK, zr = Z_OK;
  if (buf == NULL) rc = rd_error_set(err, RD_ENOMEM, "out of memory inflating the request");
  size_t next = 0; /* the next slice to feed */
  while (rc == RD_OK && zr != Z_STREAM_END) {
    if (z.avail_in == 0 && next < sb->count) {
      z.next_in = GRPC_SLICE_START_PTR(sb->slices[next]);
      z.avail_in = (uInt)GRPC_SLICE_LENGTH(sb->slices[next]);
      next++;
      continue;
    }
    if (used == cap + 1) { /* full: grow, or the message is over the limit */
      if (cap == max_bytes) {
        rc = rd_error_set(err, RD_ETOOBIG, "the request inflates to more than the message "
                          "limit of %zu bytes", max_bytes);
        break;
      }
      size_t ncap = cap * 2 > max_bytes ? max_bytes : cap * 2;
      uint8_t *nb = realloc(buf, ncap + 1);
      if (nb == NULL) {
        rc = rd_error_set(err, RD_ENOMEM, "out of memory inflating the request");
        break;
      }
      buf = nb;
      cap = ncap;
    }
    size_t room = cap + 1 - used;
    z.next_out = buf + used;
    z.avail_out = room > UINT32_MAX ? UINT32_MAX : (uInt)room;
    uInt out_before = z.avail_out, in_before = z.avail_in;
    zr = inflate(&z, Z_NO_FLUSH);
    used += out_before - z.avail_out;
    if (zr == Z_BUF_ERROR && out_before == z.avail_out && in_before == z.avail_in &&
        next == sb->count)
      break; /* no input left and nothing more comes out: truncated */
    if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
      rc = rd_error_set(err, RD_EINVAL, "the request is not valid compressed data (%s)",
                        z.msg ? z.msg : "zlib error");
  }
  if (rc == RD_OK && used > max_bytes)
    rc = rd_error_set(err, RD_ETOOBIG, "the request inflates to more than the message limit "
                      "of %zu bytes", max_bytes);
  if (rc == RD_OK && zr != Z_STREAM_END)
    rc = rd_error_set(err, RD_EINVAL, "the request's compressed data is truncated");
  inflateEnd(&z);
  if (rc != RD_OK) {
    free(buf);
    return rc;
  }
  *out = grpc_slice_new(buf, used, free);
  return RD_OK;
}

int rd_rpc_body(grpc_byte_buffer *bb, size_t max_bytes, grpc_slice *out, rd_error_t *err) {
  if (bb == NULL) {
    *out = grpc_empty_slice();
    return RD_OK;
  }
  if (bb->type == GRPC_BB_RAW && bb->data.raw.compression != GRPC_COMPRESS_NONE) {
    switch (bb->data.raw.compression) {
    case GRPC_COMPRESS_DEFLATE: return inflate_bounded(&bb->data.raw.slice_buffer, 15, max_bytes, out, err);
    case GRPC_COMPRESS_GZIP: return inflate_bounded(&bb->data.raw.slice_buffer, 15 + 16, max_bytes, out, err);
    default:
      return rd_error_set(err, RD_EINVAL, "the request uses compression algorithm %d, which "
                          "replayd does not take", (int)bb->data.raw.compression);
    }
  }
  if (grpc_byte_buffer_length(bb) > max_bytes)
    return rd_error_set(err, RD_ETOOBIG, "the request is larger than the message limit of %zu "
                        "bytes", max_bytes);
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb))
    return rd_error_set(err, RD_EINVAL, "the request's bytes cannot be read");
  *out = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  return RD_OK;
}
