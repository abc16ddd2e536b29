/* weights_buf.h - a learner's published policy weights, double-buffered
 * (thesis 004 §4.2.3).
 *
 * Contract. One writer (the learner thread, or create before it starts)
 * fills the back buffer and flips it; any number of readers copy the front
 * under a read lock, so a reader never sees a half-written set and the
 * writer never waits for a reader longer than one copy. Each flip adds one
 * to the version; 0 means nothing was published yet. The buffers hold a
 * fixed number of bytes (the policy's flat format, rd_nn_spec.h).
 *
 * Why two buffers: the learner writes the next set while actors still copy
 * the last one, and the flip is a pointer swap under the write lock.
 */
#ifndef RD_WEIGHTS_BUF_H
#define RD_WEIGHTS_BUF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

typedef struct {
  pthread_rwlock_t lock;
  uint8_t *buf[2];
  size_t bytes;
  int front;
  uint64_t version; /* written under lock by the writer */
} rd_weights_buf_t;

/* Two buffers of `bytes` bytes, version 0. RD_ENOMEM (then nothing held). */
int rd_weights_buf_init(rd_weights_buf_t *w, size_t bytes);
void rd_weights_buf_free(rd_weights_buf_t *w);

/* The writer's side. back: where to write the next set. flip: make it the
 * front; returns the new version. front and version: what was published
 * last (the writer reads them without the lock: only it changes them). */
void *rd_weights_buf_back(rd_weights_buf_t *w);
uint64_t rd_weights_buf_flip(rd_weights_buf_t *w);
const void *rd_weights_buf_front(const rd_weights_buf_t *w);
uint64_t rd_weights_buf_version(const rd_weights_buf_t *w);

/* The writer's: the next flip publishes version v + 1 (a restored
 * learner continues the versions it had, pipeline.h "Checkpoints"). */
void rd_weights_buf_set_version(rd_weights_buf_t *w, uint64_t v);

/* A reader's copy: if the version is newer than have_version, copy the
 * front into buf (cap bytes) and set *len to its size; else *len = 0.
 * *version receives the current version. RD_ETOOBIG when cap is too small
 * (*len = the bytes needed, nothing copied). Thread-safe. */
int rd_weights_buf_read(rd_weights_buf_t *w, uint64_t have_version, void *buf, size_t cap,
                        uint64_t *version, size_t *len, rd_error_t *err);

#endif
