/* json_writer.h - a tiny streaming JSON writer for replayctl's --json.
 *
 * Enough for one document of objects, arrays, strings and numbers, written
 * straight to a FILE with the commas placed for the caller. Strings are
 * escaped per RFC 8259 and always come out as valid UTF-8: bytes that are
 * not well-formed UTF-8 become U+FFFD, so a bad name from a server cannot
 * break the document. Non-finite doubles become null (JSON has no NaN).
 * Not a library API: internal to the command-line tools.
 */
#ifndef RDC_JSON_WRITER_H
#define RDC_JSON_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32

typedef struct {
  FILE *f;
  int depth;
  unsigned char has_items[JW_MAX_DEPTH]; /* a comma is due before the next item */
  int after_key;                         /* the next value completes "key": */
} jw_t;

void jw_init(jw_t *w, FILE *f);
void jw_object_begin(jw_t *w);
void jw_object_end(jw_t *w);
void jw_array_begin(jw_t *w);
void jw_array_end(jw_t *w);
/* The key of the next value (inside an object). */
void jw_key(jw_t *w, const char *key);
void jw_string(jw_t *w, const char *s); /* NULL writes null */
void jw_u64(jw_t *w, uint64_t v);
void jw_i64(jw_t *w, int64_t v);
void jw_double(jw_t *w, double v);
void jw_bool(jw_t *w, int v);
void jw_null(jw_t *w);
/* End the document with a newline. */
void jw_finish(jw_t *w);

/* A whole document of one member, {"key":v} and its newline, on f: what a
 * command that changed something answers. */
void jw_print_u64(FILE *f, const char *key, uint64_t v);
void jw_print_string(FILE *f, const char *key, const char *v);

/* Escape src as the inside of a JSON string (no quotes) into dst, NUL
 * terminated. Returns the length the full escape needs (excluding the NUL);
 * like snprintf, the output is cut if that is >= cap. */
size_t jw_escape(char *dst, size_t cap, const char *src);

#endif
