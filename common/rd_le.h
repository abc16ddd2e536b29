/* rd_le.h - 32-bit little-endian fields in a byte buffer, whatever the
 * host's byte order: the "RDNN" weight format (rd_nn_spec.h) is read and
 * written with these by the daemon, the client library and the tests.
 * Header-only. */
#ifndef RD_LE_H
#define RD_LE_H

#include <stdint.h>
#include <string.h>

static inline uint32_t rd_le_get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void rd_le_put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* An IEEE-754 binary32 stored as its bits' little-endian uint32. */
static inline float rd_le_get_f32(const uint8_t *p) {
  uint32_t u = rd_le_get_u32(p);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#endif
