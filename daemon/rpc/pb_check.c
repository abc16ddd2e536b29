/* pb_check.c - walk a request's wire bytes and check its strings
 * (pb_check.h).
 *
 * The decoding mirrors protobuf-c's unpack (protobuf-c.c:
 * parse_tag_and_wiretype, scan_length_prefixed_data, the varint scan),
 * including where it is looser than the protobuf specification, so that
 * this walk and unpack always agree on which bytes are which string.
 */
#include "pb_check.h"

#include <stdio.h>
#include <string.h>

#define PATH_MAX_BYTES 200
#define INDEXED_FIELDS 64 /* repeated fields numbered in paths: the first 64 of a message */

typedef struct {
  const uint8_t *base;                     /* the whole request */
  const ProtobufCMessageDescriptor *top;   /* its type */
  char path[PATH_MAX_BYTES];               /* the field being read, "spec.fields[1]" */
  size_t path_len;
  rd_error_t *err;
} walk_t;

/* A tag: at most 5 bytes; the 5th is taken whole, bits past 32 are lost,
 * as unpack takes it. Bytes used, or 0 if it is cut off or longer. */
static size_t read_tag(const uint8_t *p, size_t rem, uint32_t *tag, unsigned *wire) {
  if (rem == 0) return 0;
  size_t max = rem > 5 ? 5 : rem;
  uint32_t t = (uint32_t)(p[0] & 0x7f) >> 3;
  unsigned shift = 4;
  *wire = p[0] & 7;
  if ((p[0] & 0x80) == 0) {
    *tag = t;
    return 1;
  }
  for (size_t i = 1; i < max; i++) {
    if (p[i] & 0x80) {
      t |= (uint32_t)(p[i] & 0x7f) << shift;
      shift += 7;
    } else {
      t |= (uint32_t)p[i] << shift;
      *tag = t;
      return i + 1;
    }
  }
  return 0;
}

/* A varint value: at most 10 bytes. Bytes used, or 0. */
static size_t varint_len(const uint8_t *p, size_t rem) {
  size_t max = rem < 10 ? rem : 10;
  for (size_t i = 0; i < max; i++)
    if ((p[i] & 0x80) == 0) return i + 1;
  return 0;
}

/* A length prefix: at most 5 bytes, the value modulo 2^32 (bits shifted
 * past 32 are lost, as unpack loses them). Bytes used, or 0. */
static size_t read_length(const uint8_t *p, size_t rem, uint32_t *len) {
  size_t max = rem < 5 ? rem : 5;
  uint32_t v = 0;
  for (size_t i = 0; i < max; i++) {
    v |= (uint32_t)((uint64_t)(p[i] & 0x7f) << (7 * i));
    if ((p[i] & 0x80) == 0) {
      *len = v;
      return i + 1;
    }
  }
  return 0;
}

/* Offset of the first byte of s[0, n) that does not continue valid UTF-8
 * (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
 * or n. */
static size_t utf8_bad_at(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;      /* overlong */
      else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;      /* overlong */
      else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
      return i;
    }
    if (n - i - 1 < need) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k <= need; k++)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += need + 1;
  }
  return n;
}

static const char *path_or_top(const walk_t *w) { return w->path_len ? w->path : "the request"; }

static int check_string(walk_t *w, const uint8_t *s, size_t n) {
  if (n > RD_PB_STRING_MAX)
    return rd_error_set(w->err, RD_EINVAL, "%s is %zu bytes; a string may have at most %u",
                        path_or_top(w), n, RD_PB_STRING_MAX);
  const uint8_t *nul = memchr(s, '\0', n);
  if (nul != NULL)
    return rd_error_set(w->err, RD_EINVAL, "%s contains a NUL byte (at byte %zu of %zu)",
                        path_or_top(w), (size_t)(nul - s), n);
  size_t bad = utf8_bad_at(s, n);
  if (bad < n)
    return rd_error_set(w->err, RD_EINVAL, "%s is not valid UTF-8 (byte 0x%02x at byte %zu of %zu)",
                        path_or_top(w), (unsigned)s[bad], bad, n);
  return RD_OK;
}

static int undecodable(walk_t *w, const uint8_t *at, const char *what) {
  return rd_error_set(w->err, RD_EINVAL, "request is not a decodable %s: %s at byte %zu%s%s",
                      w->top->name, what, (size_t)(at - w->base), w->path_len ? " in " : "",
                      w->path);
}

/* Append ".name" or ".name[index]" to the path (cut if it does not fit:
 * the path is for people). Returns the length to restore. */
static size_t path_push(walk_t *w, const ProtobufCFieldDescriptor *f, long index) {
  size_t mark = w->path_len, room = sizeof w->path - mark;
  int n = index >= 0 ? snprintf(w->path + mark, room, "%s%s[%ld]", mark ? "." : "", f->name, index)
                     : snprintf(w->path + mark, room, "%s%s", mark ? "." : "", f->name);
  w->path_len = n < 0 ? mark : (size_t)n < room ? mark + (size_t)n : sizeof w->path - 1;
  return mark;
}

static void path_pop(walk_t *w, size_t mark) {
  w->path_len = mark;
  w->path[mark] = '\0';
}

static int walk(walk_t *w, const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                unsigned depth) {
  if (depth > RD_PB_MAX_DEPTH) return undecodable(w, p, "messages nested too deep");
  uint32_t seen[INDEXED_FIELDS] = {0}; /* elements of each repeated field so far */
  size_t at = 0;
  while (at < len) {
    uint32_t tag;
    unsigned wire;
    size_t n = read_tag(p + at, len - at, &tag, &wire);
    if (n == 0) return undecodable(w, p + at, "a field tag is cut off or longer than 5 bytes");
    at += n;
    switch (wire) {
    case PROTOBUF_C_WIRE_TYPE_VARINT:
      n = varint_len(p + at, len - at);
      if (n == 0) return undecodable(w, p + at, "a varint is cut off or longer than 10 bytes");
      at += n;
      continue;
    case PROTOBUF_C_WIRE_TYPE_64BIT:
      if (len - at < 8) return undecodable(w, p + at, "a 64-bit value is cut off");
      at += 8;
      continue;
    case PROTOBUF_C_WIRE_TYPE_32BIT:
      if (len - at < 4) return undecodable(w, p + at, "a 32-bit value is cut off");
      at += 4;
      continue;
    case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
      break;
    default:
      return undecodable(w, p + at - n, wire == 3 || wire == 4
                                            ? "a group (wire types 3 and 4 are not supported)"
                                            : "a field of no wire type (6 or 7)");
    }
    uint32_t body_len;
    n = read_length(p + at, len - at, &body_len);
    if (n == 0)
      return undecodable(w, p + at, "a length prefix is cut off or longer than 5 bytes");
    if (body_len > len - at - n) return undecodable(w, p + at, "a length runs past the end");
    const uint8_t *body = p + at + n;
    at += n + body_len;
    /* Only a known string or message field with this wire type is filled
     * in by unpack; with another wire type unpack refuses the request. */
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, tag);
    if (f == NULL || (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE))
      continue;
    long index = -1;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t fi = (size_t)(f - d->fields);
      index = fi < INDEXED_FIELDS ? (long)seen[fi]++ : -1;
    }
    size_t mark = path_push(w, f, index);
    int rc = f->type == PROTOBUF_C_TYPE_STRING
                 ? check_string(w, body, body_len)
                 : walk(w, f->descriptor, body, body_len, depth + 1);
    if (rc) return rc;
    path_pop(w, mark);
  }
  return RD_OK;
}

int rd_pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                rd_error_t *err) {
  if (desc == NULL) return rd_error_set(err, RD_EINVAL, "no message type to check against");
  if (len > 0 && buf == NULL) return rd_error_set(err, RD_EINVAL, "no request bytes");
  walk_t w = {buf, desc, "", 0, err};
  return walk(&w, desc, buf, len, 0);
}
