/* weights_buf.c - double-buffered policy weights (weights_buf.h). */
#include "weights_buf.h"

#include <stdlib.h>
#include <string.h>

int rd_weights_buf_init(rd_weights_buf_t *w, size_t bytes) {
  memset(w, 0, sizeof *w);
  w->bytes = bytes;
  if ((w->buf[0] = malloc(bytes)) == NULL || (w->buf[1] = malloc(bytes)) == NULL) {
    free(w->buf[0]);
    w->buf[0] = NULL;
    return RD_ENOMEM;
  }
  pthread_rwlock_init(&w->lock, NULL);
  w->front = 1; /* the first flip publishes buf[0] */
  return RD_OK;
}

void rd_weights_buf_free(rd_weights_buf_t *w) {
  if (w->buf[0] == NULL) return;
  pthread_rwlock_destroy(&w->lock);
  free(w->buf[0]);
  free(w->buf[1]);
  w->buf[0] = w->buf[1] = NULL;
}

void *rd_weights_buf_back(rd_weights_buf_t *w) { return w->buf[1 - w->front]; }

uint64_t rd_weights_buf_flip(rd_weights_buf_t *w) {
  pthread_rwlock_wrlock(&w->lock);
  w->front = 1 - w->front;
  uint64_t v = ++w->version;
  pthread_rwlock_unlock(&w->lock);
  return v;
}

void rd_weights_buf_set_version(rd_weights_buf_t *w, uint64_t v) {
  pthread_rwlock_wrlock(&w->lock);
  w->version = v;
  pthread_rwlock_unlock(&w->lock);
}

const void *rd_weights_buf_front(const rd_weights_buf_t *w) { return w->buf[w->front]; }

uint64_t rd_weights_buf_version(const rd_weights_buf_t *w) { return w->version; }

int rd_weights_buf_read(rd_weights_buf_t *w, uint64_t have_version, void *buf, size_t cap,
                        uint64_t *version, size_t *len, rd_error_t *err) {
  pthread_rwlock_rdlock(&w->lock);
  uint64_t v = w->version;
  *version = v;
  *len = 0;
  int rc = RD_OK;
  if (v > have_version) {
    if (cap < w->bytes) {
      *len = w->bytes;
      rc = rd_error_set(err, RD_ETOOBIG, "the weights are %zu bytes; the buffer holds %zu",
                        w->bytes, cap);
    } else {
      memcpy(buf, w->buf[w->front], w->bytes);
      *len = w->bytes;
    }
  }
  pthread_rwlock_unlock(&w->lock);
  return rc;
}
