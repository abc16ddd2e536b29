/* rd_le.h - 32- and 64-bit little-endian fields in a byte buffer, whatever
 * the host's byte order: the "RDNN" weight format (rd_nn_spec.h) is read
 * and written with these by the daemon, the client library and the tests,
 * and so are the checkpoint and journal files (ckpt_file.h, journal.h).
 * Header-only. */
#ifndef RD_LE_H
#define RD_LE_H

#include <stdint.h>
#include <string.h>

static inline void rd_le_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void rd_le_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t rd_le_get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static inline uint64_t rd_le_get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* An IEEE-754 binary32 stored as its bits' little-endian uint32. */
static inline float rd_le_get_f32(const uint8_t *p) {
  uint32_t u = rd_le_get32(p);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#endif
