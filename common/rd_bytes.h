/* rd_bytes.h - a growing byte buffer whose out-of-memory is sticky.
 *
 * For writers that append many small pieces (an encoder, a file image):
 * they append without a check per call and test `oom` once at the end; after
 * a failed growth every later append is dropped, so the buffer never holds
 * a gap. Starts zeroed ({0}); the owner frees p.
 */
#ifndef RD_BYTES_H
#define RD_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t *p;
  size_t len, cap;
  int oom;
} rd_bytes_t;

/* Appends n bytes of v (doubling the capacity as needed, from 256). */
static inline void rd_bytes_put(rd_bytes_t *b, const void *v, size_t n) {
  if (b->oom) return;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap - b->len < n) cap *= 2;
    uint8_t *np = realloc(b->p, cap);
    if (np == NULL) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
  if (n > 0) memcpy(b->p + b->len, v, n);
  b->len += n;
}

#endif
