/* json_writer.c - see json_writer.h. */
#include "json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 if the bytes
 * there are not one (overlong forms, surrogates and code points above
 * U+10FFFF are not well-formed: RFC 3629). */
static size_t utf8_len(const unsigned char *s) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return (s[1] & 0xc0) == 0x80 ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
  }
  return 0;
}

size_t jw_escape(char *dst, size_t cap, const char *src) {
  size_t n = 0; /* bytes the full escape needs */
#define PUT(str, len)                                                                   \
  do {                                                                                  \
    size_t l_ = (len);                                                                  \
    for (size_t i_ = 0; i_ < l_; i_++, n++)                                             \
      if (n + 1 < cap) dst[n] = (str)[i_];                                              \
  } while (0)
  const unsigned char *s = (const unsigned char *)src;
  while (*s) {
    unsigned char c = *s;
    char buf[8];
    if (c == '"') {
      PUT("\\\"", 2);
    } else if (c == '\\') {
      PUT("\\\\", 2);
    } else if (c < 0x20) {
      switch (c) {
      case '\n': PUT("\\n", 2); break;
      case '\r': PUT("\\r", 2); break;
      case '\t': PUT("\\t", 2); break;
      case '\b': PUT("\\b", 2); break;
      case '\f': PUT("\\f", 2); break;
      default:
        snprintf(buf, sizeof buf, "\\u%04x", c);
        PUT(buf, 6);
      }
    } else if (c < 0x80) {
      PUT((const char *)s, 1);
    } else {
      size_t len = utf8_len(s);
      if (len == 0) {
        PUT("\xef\xbf\xbd", 3); /* U+FFFD for one bad byte */
        s++;
        continue;
      }
      PUT((const char *)s, len);
      s += len;
      continue;
    }
    s++;
  }
#undef PUT
  if (cap > 0) dst[n < cap ? n : cap - 1] = '\0';
  return n;
}

void jw_init(jw_t *w, FILE *f) {
  memset(w, 0, sizeof *w);
  w->f = f;
}

/* Before any value: the comma after a previous item of an array or object
 * (not after a key, whose value this is). */
static void item(jw_t *w) {
  if (w->after_key) {
    w->after_key = 0;
    return;
  }
  if (w->depth > 0 && w->depth <= JW_MAX_DEPTH) {
    if (w->has_items[w->depth - 1]) fputc(',', w->f);
    w->has_items[w->depth - 1] = 1;
  }
}

static void put_string(jw_t *w, const char *s) {
  char buf[512];
  size_t need = jw_escape(buf, sizeof buf, s);
  fputc('"', w->f);
  if (need < sizeof buf) {
    fputs(buf, w->f);
  } else { /* rare: long strings escape through a heap-free slow path */
    for (const char *p = s; *p;) {
      /* Escape in chunks that end on a character boundary of the input. */
      char chunk[80];
      size_t take = 0;
      while (p[take] && take < sizeof chunk - 5) {
        size_t l = utf8_len((const unsigned char *)p + take);
        take += l ? l : 1;
      }
      memcpy(chunk, p, take);
      chunk[take] = '\0';
      jw_escape(buf, sizeof buf, chunk); /* < 80 bytes, <= 6x each: fits */
      fputs(buf, w->f);
      p += take;
    }
  }
  fputc('"', w->f);
}

static void open_(jw_t *w, char c) {
  item(w);
  fputc(c, w->f);
  if (w->depth < JW_MAX_DEPTH) w->has_items[w->depth] = 0;
  w->depth++;
}

static void close_(jw_t *w, char c) {
  if (w->depth > 0) w->depth--;
  fputc(c, w->f);
}

void jw_object_begin(jw_t *w) { open_(w, '{'); }
void jw_object_end(jw_t *w) { close_(w, '}'); }
void jw_array_begin(jw_t *w) { open_(w, '['); }
void jw_array_end(jw_t *w) { close_(w, ']'); }

void jw_key(jw_t *w, const char *key) {
  item(w);
  put_string(w, key);
  fputc(':', w->f);
  w->after_key = 1;
}

void jw_string(jw_t *w, const char *s) {
  if (s == NULL) {
    jw_null(w);
    return;
  }
  item(w);
  put_string(w, s);
}

void jw_u64(jw_t *w, uint64_t v) {
  item(w);
  fprintf(w->f, "%" PRIu64, v);
}

void jw_i64(jw_t *w, int64_t v) {
  item(w);
  fprintf(w->f, "%" PRId64, v);
}

void jw_double(jw_t *w, double v) {
  if (!isfinite(v)) {
    jw_null(w);
    return;
  }
  item(w);
  /* The shortest of %.15g / %.17g that reads back as v: 0.6 stays "0.6",
   * and every double round-trips. */
  char buf[32];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, w->f);
}

void jw_bool(jw_t *w, int v) {
  item(w);
  fputs(v ? "true" : "false", w->f);
}

void jw_null(jw_t *w) {
  item(w);
  fputs("null", w->f);
}

void jw_finish(jw_t *w) { fputc('\n', w->f); }

/* The one-member documents: {"key": then the value, then }\n. */
static void one_member_begin(jw_t *w, FILE *f, const char *key) {
  jw_init(w, f);
  jw_object_begin(w);
  jw_key(w, key);
}

static void one_member_end(jw_t *w) {
  jw_object_end(w);
  jw_finish(w);
}

void jw_print_u64(FILE *f, const char *key, uint64_t v) {
  jw_t w;
  one_member_begin(&w, f, key);
  jw_u64(&w, v);
  one_member_end(&w);
}

void jw_print_string(FILE *f, const char *key, const char *v) {
  jw_t w;
  one_member_begin(&w, f, key);
  jw_string(&w, v);
  one_member_end(&w);
}
