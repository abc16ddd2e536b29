/* pb_check.h - a request's strings, checked on the wire before protobuf-c
 * unpacks it.
 *
 * protobuf-c unpacks a `string` field into a NUL-terminated C string and
 * drops its length, so "a\0b" arrives as "a" and no later check can see
 * what was cut. rd_pb_check walks a request's encoded bytes with its
 * message descriptor, into nested messages and repeated fields (and
 * oneofs, which are plain fields on the wire), and refuses a string field
 * that
 *   - holds a NUL byte,
 *   - is not valid UTF-8 (proto3 requires it of `string`), or
 *   - is longer than RD_PB_STRING_MAX bytes,
 * with RD_EINVAL and a message naming the field's path, e.g.
 * "spec.fields[1].name contains a NUL byte". The daemon checks every
 * request with it before unpacking (handlers.c).
 *
 * It reads only [buf, buf + len) and allocates nothing. It decodes the
 * wire format as protobuf-c's unpack does (a tag of at most 5 bytes, a
 * length of at most 5 bytes taken modulo 2^32, known string and message
 * fields by the descriptor's field numbers), so the strings it reads are
 * the strings unpack would fill in. Bytes it cannot decode (a cut or
 * over-long varint, a length past the end, a group or a wire type with no
 * meaning, nesting deeper than RD_PB_MAX_DEPTH) are RD_EINVAL too, "not a
 * decodable ...": unpack refuses those as well, and no string is passed
 * on unchecked behind them. Unknown fields, bytes and packed fields are
 * skipped without being read.
 */
#ifndef RD_PB_CHECK_H
#define RD_PB_CHECK_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

#define RD_PB_STRING_MAX (64u << 10) /* longest string field accepted, in bytes */
#define RD_PB_MAX_DEPTH 32           /* nested messages walked, at most */

/* RD_OK, or RD_EINVAL naming the first bad string (or the undecodable
 * byte) of the message of type desc encoded in buf[0, len). */
int rd_pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                rd_error_t *err);

#endif
