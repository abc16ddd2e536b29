/* pb_wire.h - protobuf's wire format, the little the daemon writes or
 * sizes by hand: varints (7 bits a byte, low first, the high bit set on
 * every byte but the last) and length-delimited fields (tag, length as a
 * varint, bytes). Used where protobuf-c's packer is not: a page's exact
 * size (paging.h) and the hand-encoded SampleResponse (sample_reply.h).
 */
#ifndef RD_PB_WIRE_H
#define RD_PB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define RD_PB_VARINT_MAX 10 /* bytes of the longest varint (a uint64) */

static inline size_t rd_pb_varint_bytes(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Bytes of a length-delimited field of len bytes with a one-byte tag
 * (field numbers 1 to 15). */
static inline size_t rd_pb_len_field_bytes(uint64_t len) {
  return 1 + rd_pb_varint_bytes(len) + len;
}

/* Write v at p; returns the byte after it. */
static inline uint8_t *rd_pb_put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

#endif
