/* rd_pem.h - a PEM file read whole for TLS credentials: gRPC takes PEM as
 * NUL-terminated strings, so a file holding a NUL byte is refused, and one
 * larger than the caller's bound is not read into memory. The daemon
 * (rpc/tls.c) and the client library each word the refusal their own way.
 */
#ifndef RD_PEM_H
#define RD_PEM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  RD_PEM_OK,
  RD_PEM_OPEN,    /* fopen failed: errno says why */
  RD_PEM_NOMEM,
  RD_PEM_READ,    /* a read error */
  RD_PEM_TOO_BIG, /* more than max bytes */
  RD_PEM_BINARY,  /* a NUL byte: not PEM text */
} rd_pem_status_t;

/* RD_PEM_OK: *out holds the file, NUL-terminated (malloc'd: the caller
 * frees it), *len its length. Otherwise *out is NULL. */
static inline rd_pem_status_t rd_pem_read(const char *path, size_t max, char **out, size_t *len) {
  *out = NULL;
  FILE *f = fopen(path, "re");
  if (f == NULL) return RD_PEM_OPEN;
  char *buf = malloc(max + 1);
  size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
  rd_pem_status_t s = buf == NULL  ? RD_PEM_NOMEM
                      : ferror(f)  ? RD_PEM_READ
                      : n > max    ? RD_PEM_TOO_BIG
                      : memchr(buf, '\0', n) ? RD_PEM_BINARY
                                             : RD_PEM_OK;
  fclose(f);
  if (s != RD_PEM_OK) {
    free(buf);
    return s;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return RD_PEM_OK;
}

#endif
