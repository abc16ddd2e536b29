/* profile_jsonl.c - profiles as JSON lines: writer, strict parser and the
 * validation both directions share. */
#include "profile_jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 65535u /* CPU threads; other devices may give it their own meaning */

/* ------------------------------------------------------------------ */
/* Validation                                                          */
/* ------------------------------------------------------------------ */

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* "kind-" + 16 lowercase hex digits, kind 1..4 lowercase letters. */
static bool valid_fingerprint(const char *s, size_t cap) {
  size_t n = strnlen(s, cap);
  if (n == cap) return false;
  size_t k = 0;
  while (k < n && s[k] >= 'a' && s[k] <= 'z') k++;
  if (k == 0 || k > 4 || s[k] != '-' || n != k + 17) return false;
  for (size_t i = k + 1; i < n; i++)
    if (!is_hex(s[i])) return false;
  return true;
}

int rd_profile_validate(const rd_profile_t *p, rd_error_t *err) {
  if (!valid_fingerprint(p->device_fp, sizeof p->device_fp))
    return rd_error_set(err, RD_EINVAL,
                        "device \"%.24s\" is not a fingerprint (kind-0123456789abcdef)",
                        p->device_fp);
  if ((unsigned)p->primitive >= RD_PRIM_COUNT)
    return rd_error_set(err, RD_EINVAL, "primitive %d is not sample, update or train",
                        (int)p->primitive);
  if (p->threads > MAX_THREADS)
    return rd_error_set(err, RD_EINVAL, "threads %u is above %u", p->threads, MAX_THREADS);
  int rc = rd_profile_key_validate(&p->shape, err);
  if (rc) return rc;
  size_t bl = strnlen(p->build, sizeof p->build);
  if (bl == 0 || bl == sizeof p->build)
    return rd_error_set(err, RD_EINVAL, "build must be 1 to %zu characters", sizeof p->build - 1);
  for (size_t i = 0; i < bl; i++)
    if (p->build[i] < 0x20 || p->build[i] > 0x7e)
      return rd_error_set(err, RD_EINVAL, "build holds a byte 0x%02x that is not printable ASCII",
                          (unsigned)(uint8_t)p->build[i]);
  if (!(p->latency_s >= RD_PROFILE_LATENCY_MIN_S && p->latency_s <= RD_PROFILE_LATENCY_MAX_S))
    return rd_error_set(err, RD_EINVAL, "latency_s %g is outside [%g, %g] seconds", p->latency_s,
                        RD_PROFILE_LATENCY_MIN_S, RD_PROFILE_LATENCY_MAX_S);
  if (p->reps == 0) return rd_error_set(err, RD_EINVAL, "reps must be at least 1");
  if ((unsigned)p->source > RD_PROFILE_IMPORTED)
    return rd_error_set(err, RD_EINVAL, "source %d is not measured or imported", (int)p->source);
  if (p->measured_unix < 0)
    return rd_error_set(err, RD_EINVAL, "measured_unix %" PRId64 " is negative", p->measured_unix);
  if (p->items > (uint64_t)INT64_MAX)
    return rd_error_set(err, RD_EINVAL, "items %" PRIu64 " is above 2^63 - 1", p->items);
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  char *buf;
  size_t cap, len;
  bool full;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  if (o->full) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= o->cap - o->len) o->full = true;
  else o->len += (size_t)n;
}

/* A JSON string. Validated profiles hold printable ASCII only, so '"' and
 * '\\' are the only characters to escape. */
static void put_str(out_t *o, const char *name, const char *s) {
  put(o, "%s\"%s\":\"", o->len > 1 ? "," : "", name);
  for (; *s && !o->full; s++) {
    if (*s == '"' || *s == '\\') put(o, "\\%c", *s);
    else put(o, "%c", *s);
  }
  put(o, "\"");
}

int rd_profile_jsonl_format(const rd_profile_t *p, char *buf, size_t cap, size_t *len,
                            rd_error_t *err) {
  int rc = rd_profile_validate(p, err);
  if (rc) return rc;
  if (cap == 0) return rd_error_set(err, RD_ETOOBIG, "no room for a profile line");
  out_t o = {buf, cap, 0, false};
  put(&o, "{");
  put_str(&o, "device", p->device_fp);
  put_str(&o, "primitive", rd_primitive_name(p->primitive));
  put(&o, ",\"threads\":%u,\"batch\":%u,\"capacity\":%u,\"fanout\":%u", p->threads,
      p->shape.batch, p->shape.capacity, p->shape.fanout);
  put_str(&o, "algorithm", p->shape.algorithm);
  put_str(&o, "network", p->shape.network);
  put_str(&o, "build", p->build);
  put(&o, ",\"latency_s\":%.17g,\"reps\":%u,\"items\":%" PRIu64, p->latency_s, p->reps, p->items);
  put_str(&o, "source", rd_profile_source_name(p->source));
  put(&o, ",\"measured_unix\":%" PRId64 "}\n", p->measured_unix);
  if (o.full) {
    buf[0] = '\0';
    return rd_error_set(err, RD_ETOOBIG, "a profile line does not fit %zu bytes", cap);
  }
  if (len) *len = o.len;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */
/* ------------------------------------------------------------------ */

enum {
  M_DEVICE, M_PRIMITIVE, M_THREADS, M_BATCH, M_CAPACITY, M_FANOUT, M_ALGORITHM, M_NETWORK,
  M_BUILD, M_LATENCY, M_REPS, M_ITEMS, M_SOURCE, M_WHEN, M_COUNT
};

typedef enum { T_STR, T_U32, T_U64, T_I64, T_NUM } mtype_t;

static const struct {
  const char *name;
  mtype_t type;
} members[M_COUNT] = {
    [M_DEVICE] = {"device", T_STR},       [M_PRIMITIVE] = {"primitive", T_STR},
    [M_THREADS] = {"threads", T_U32},     [M_BATCH] = {"batch", T_U32},
    [M_CAPACITY] = {"capacity", T_U32},   [M_FANOUT] = {"fanout", T_U32},
    [M_ALGORITHM] = {"algorithm", T_STR}, [M_NETWORK] = {"network", T_STR},
    [M_BUILD] = {"build", T_STR},         [M_LATENCY] = {"latency_s", T_NUM},
    [M_REPS] = {"reps", T_U32},           [M_ITEMS] = {"items", T_U64},
    [M_SOURCE] = {"source", T_STR},       [M_WHEN] = {"measured_unix", T_I64},
};

typedef struct {
  const char *start, *p, *end;
  rd_error_t *err;
} cur_t;

static int fail(cur_t *c, const char *what) {
  return rd_error_set(c->err, RD_EINVAL, "column %zu: %s", (size_t)(c->p - c->start) + 1, what);
}

static void skip_ws(cur_t *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* A JSON string into out (cap bytes with the NUL). ASCII only: every
 * member's value is ASCII, so anything else is refused here. */
static int parse_string(cur_t *c, char *out, size_t cap) {
  if (c->p >= c->end || *c->p != '"') return fail(c, "expected a string");
  c->p++;
  size_t n = 0;
  for (;;) {
    if (c->p >= c->end) return fail(c, "unterminated string");
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '"') break;
    if (ch < 0x20) return fail(c, "control character in a string");
    if (ch >= 0x80) return fail(c, "non-ASCII byte in a string");
    if (ch == '\\') {
      if (c->end - c->p < 2) return fail(c, "unterminated escape");
      char e = c->p[1];
      c->p += 2;
      switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
          if (c->end - c->p < 4) return fail(c, "short \\u escape");
          int v = 0;
          for (int i = 0; i < 4; i++) {
            int h = hexval(c->p[i]);
            if (h < 0) return fail(c, "bad \\u escape");
            v = v * 16 + h;
          }
          if (v >= 0x80) return fail(c, "\\u escape of a non-ASCII character");
          ch = (unsigned char)v;
          c->p += 4;
          break;
        }
        default: c->p--; return fail(c, "unknown escape");
      }
    } else {
      c->p++;
    }
    if (n + 1 >= cap) return fail(c, "string too long");
    out[n++] = (char)ch;
  }
  c->p++; /* closing quote */
  out[n] = '\0';
  return RD_OK;
}

/* A JSON number's text (RFC 8259 grammar) into text; *integral says
 * whether it has neither fraction nor exponent. */
static int scan_number(cur_t *c, char *text, size_t cap, bool *integral) {
  const char *s = c->p;
  const char *p = s;
  if (p < c->end && *p == '-') p++;
  if (p >= c->end || *p < '0' || *p > '9') return fail(c, "expected a number");
  if (*p == '0') p++;
  else while (p < c->end && *p >= '0' && *p <= '9') p++;
  *integral = true;
  if (p < c->end && *p == '.') {
    *integral = false;
    p++;
    if (p >= c->end || *p < '0' || *p > '9') return fail(c, "bad number: digits must follow '.'");
    while (p < c->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < c->end && (*p == 'e' || *p == 'E')) {
    *integral = false;
    p++;
    if (p < c->end && (*p == '+' || *p == '-')) p++;
    if (p >= c->end || *p < '0' || *p > '9') return fail(c, "bad number: exponent needs digits");
    while (p < c->end && *p >= '0' && *p <= '9') p++;
  }
  if ((size_t)(p - s) >= cap) return fail(c, "number too long");
  memcpy(text, s, (size_t)(p - s));
  text[p - s] = '\0';
  c->p = p;
  return RD_OK;
}

static int parse_member(cur_t *c, int m, rd_profile_t *p, char *prim, char *src) {
  char buf[RD_PROFILE_BUILD_MAX];
  if (members[m].type == T_STR) {
    switch (m) {
      case M_DEVICE: return parse_string(c, p->device_fp, sizeof p->device_fp);
      case M_PRIMITIVE: return parse_string(c, prim, 16);
      case M_ALGORITHM: return parse_string(c, p->shape.algorithm, sizeof p->shape.algorithm);
      case M_NETWORK: return parse_string(c, p->shape.network, sizeof p->shape.network);
      case M_BUILD: return parse_string(c, p->build, sizeof p->build);
      default: return parse_string(c, src, 16); /* M_SOURCE */
    }
  }
  const char *at = c->p;
  bool integral = false;
  int rc = scan_number(c, buf, 40, &integral);
  if (rc) return rc;
  if (members[m].type == T_NUM) {
    errno = 0;
    double v = strtod(buf, NULL);
    if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL)) {
      c->p = at;
      return fail(c, "number out of range");
    }
    p->latency_s = v;
    return RD_OK;
  }
  c->p = at;
  if (!integral) return fail(c, "expected an integer");
  errno = 0;
  if (members[m].type == T_I64) {
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) return fail(c, "integer out of range");
    p->measured_unix = (int64_t)v;
  } else {
    if (buf[0] == '-') return fail(c, "expected a non-negative integer");
    unsigned long long v = strtoull(buf, NULL, 10);
    if (errno == ERANGE || (members[m].type == T_U32 && v > UINT32_MAX))
      return fail(c, "integer out of range");
    switch (m) {
      case M_THREADS: p->threads = (uint32_t)v; break;
      case M_BATCH: p->shape.batch = (uint32_t)v; break;
      case M_CAPACITY: p->shape.capacity = (uint32_t)v; break;
      case M_FANOUT: p->shape.fanout = (uint32_t)v; break;
      case M_REPS: p->reps = (uint32_t)v; break;
      default: p->items = (uint64_t)v; break; /* M_ITEMS */
    }
  }
  c->p += strlen(buf);
  return RD_OK;
}

int rd_profile_jsonl_parse(const char *line, size_t len, rd_profile_t *out, rd_error_t *err) {
  if (len > 0 && line[len - 1] == '\n') len--;
  if (len > 0 && line[len - 1] == '\r') len--;
  cur_t c = {line, line, line + len, err};
  rd_profile_t p;
  memset(&p, 0, sizeof p);
  char prim[16] = "", src[16] = "";
  bool seen[M_COUNT] = {false};
  int rc;
  skip_ws(&c);
  if (c.p >= c.end || *c.p != '{') return fail(&c, "expected '{'");
  c.p++;
  skip_ws(&c);
  if (c.p < c.end && *c.p == '}') return fail(&c, "empty object");
  for (;;) {
    skip_ws(&c);
    char name[32];
    const char *name_at = c.p;
    if ((rc = parse_string(&c, name, sizeof name)) != RD_OK) return rc;
    int m = 0;
    while (m < M_COUNT && strcmp(name, members[m].name) != 0) m++;
    if (m == M_COUNT) {
      c.p = name_at;
      return rd_error_set(err, RD_EINVAL, "column %zu: unknown member \"%s\"",
                          (size_t)(c.p - c.start) + 1, name);
    }
    if (seen[m]) {
      c.p = name_at;
      return rd_error_set(err, RD_EINVAL, "column %zu: member \"%s\" given twice",
                          (size_t)(c.p - c.start) + 1, name);
    }
    seen[m] = true;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != ':') return fail(&c, "expected ':'");
    c.p++;
    skip_ws(&c);
    if ((rc = parse_member(&c, m, &p, prim, src)) != RD_OK) {
      char why[RD_ERROR_MSG_MAX];
      snprintf(why, sizeof why, "%s", err ? err->msg : "");
      return rd_error_set(err, RD_EINVAL, "member \"%s\": %.200s", name, why);
    }
    skip_ws(&c);
    if (c.p < c.end && *c.p == ',') {
      c.p++;
      continue;
    }
    if (c.p < c.end && *c.p == '}') {
      c.p++;
      break;
    }
    return fail(&c, "expected ',' or '}'");
  }
  skip_ws(&c);
  if (c.p != c.end) return fail(&c, "text after the object");
  for (int m = 0; m < M_COUNT; m++)
    if (!seen[m])
      return rd_error_set(err, RD_EINVAL, "member \"%s\" is missing", members[m].name);
  if ((rc = rd_primitive_parse(prim, &p.primitive, err)) != RD_OK) return rc;
  if ((rc = rd_profile_source_parse(src, &p.source, err)) != RD_OK) return rc;
  if ((rc = rd_profile_validate(&p, err)) != RD_OK) return rc;
  *out = p;
  return RD_OK;
}
