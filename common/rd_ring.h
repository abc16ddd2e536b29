/* rd_ring.h - a bounded FIFO of uint32_t values (slot indices, ids).
 *
 * Contract: capacity fixed at init, one allocation, none after; push on a
 * full ring and pop or peek on an empty one are refused (RD_ETOOBIG,
 * RD_EEMPTY) and change nothing. Not thread-safe: the caller's lock guards
 * it. Header-only, because the pipeline pushes and pops on every step.
 *
 * Why a ring of indices: a fixed pool of objects (batch slots) moves between
 * queues by index, so the queues never allocate and a push of an object
 * that the pool owns cannot fail when each ring holds the whole pool.
 */
#ifndef RD_RING_H
#define RD_RING_H

#include <stdint.h>
#include <stdlib.h>

#include "rd_error.h"

typedef struct {
  uint32_t *v;
  uint32_t cap, head, len;
} rd_ring_t;

/* An empty ring of capacity cap (>= 1). RD_EINVAL, RD_ENOMEM; on failure
 * *r is empty and rd_ring_free is safe. */
static inline int rd_ring_init(rd_ring_t *r, uint32_t cap) {
  r->v = NULL;
  r->cap = r->head = r->len = 0;
  if (cap == 0) return RD_EINVAL;
  if ((r->v = (uint32_t *)malloc((size_t)cap * sizeof *r->v)) == NULL) return RD_ENOMEM;
  r->cap = cap;
  return RD_OK;
}

static inline void rd_ring_free(rd_ring_t *r) {
  free(r->v);
  r->v = NULL;
  r->cap = r->head = r->len = 0;
}

static inline uint32_t rd_ring_len(const rd_ring_t *r) { return r->len; }

/* Append x at the tail. RD_ETOOBIG when full. */
static inline int rd_ring_push(rd_ring_t *r, uint32_t x) {
  if (r->len == r->cap) return RD_ETOOBIG;
  uint32_t i = r->head + r->len;
  r->v[i >= r->cap ? i - r->cap : i] = x;
  r->len++;
  return RD_OK;
}

/* Take the head into *x. RD_EEMPTY when empty. */
static inline int rd_ring_pop(rd_ring_t *r, uint32_t *x) {
  if (r->len == 0) return RD_EEMPTY;
  *x = r->v[r->head];
  r->head = r->head + 1 == r->cap ? 0 : r->head + 1;
  r->len--;
  return RD_OK;
}

/* Read the head into *x without taking it. RD_EEMPTY when empty. */
static inline int rd_ring_peek(const rd_ring_t *r, uint32_t *x) {
  if (r->len == 0) return RD_EEMPTY;
  *x = r->v[r->head];
  return RD_OK;
}

#endif
