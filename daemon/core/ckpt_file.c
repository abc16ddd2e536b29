/* ckpt_file.c - the checkpoint container (ckpt_file.h): header, sections
 * with XXH3 checksums and optional zstd, the end section's hash chain. */
#include "ckpt_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

/* Arrays inside sections (leaves, columns) are written in host order. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the checkpoint format is little-endian");

static const char magic[8] = {'R', 'P', 'L', 'Y', 'D', 'C', 'K', 'P'};

static int io_error(rd_error_t *err, const char *what, int e) {
  return rd_error_set(err, RD_ESTORE, "%s: %s", what, strerror(e));
}

/* Write all of buf; RD_ESTORE on a short or failed write. */
static int write_all(int fd, const void *buf, size_t len, rd_error_t *err) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t k = write(fd, p, len);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return io_error(err, "writing the checkpoint", errno);
    if (k == 0) return io_error(err, "writing the checkpoint", EIO);
    p += k;
    len -= (size_t)k;
  }
  return RD_OK;
}

/* Read exactly len bytes at off; RD_EINVAL if the file ends first. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off, const char *what,
                     rd_error_t *err) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t k = pread(fd, p, len, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return io_error(err, "reading the checkpoint", errno);
    if (k == 0) return rd_error_set(err, RD_EINVAL, "the file is truncated in %s", what);
    p += k;
    len -= (size_t)k;
    off += (uint64_t)k;
  }
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Writer                                                              */
/* ------------------------------------------------------------------ */

int rd_ckpt_writer_init(rd_ckpt_writer_t *w, int fd, int zstd_level, rd_error_t *err) {
  memset(w, 0, sizeof *w);
  if (zstd_level < 0 || zstd_level > RD_CKPT_MAX_ZSTD_LEVEL)
    return rd_error_set(err, RD_EINVAL, "zstd level %d is outside [0, %d]", zstd_level,
                        RD_CKPT_MAX_ZSTD_LEVEL);
  w->fd = fd;
  w->zstd_level = zstd_level;
  uint8_t h[RD_CKPT_HEADER_BYTES];
  memset(h, 0, sizeof h);
  memcpy(h, magic, sizeof magic);
  rd_le_put32(h + 8, RD_CKPT_VERSION);
  rd_le_put32(h + 12, RD_CKPT_HEADER_BYTES);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rd_le_put64(h + 16, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
  rd_le_put64(h + 56, XXH3_64bits(h, 56));
  int rc = write_all(fd, h, sizeof h, err);
  if (rc == RD_OK) w->bytes = sizeof h;
  return rc;
}

static int write_header(rd_ckpt_writer_t *w, uint32_t type, uint32_t aux, uint32_t flags,
                        uint64_t raw, uint64_t stored, uint64_t hash, rd_error_t *err) {
  uint8_t h[RD_CKPT_SECTION_BYTES];
  memset(h, 0, sizeof h);
  rd_le_put32(h + 0, type);
  rd_le_put32(h + 4, aux);
  rd_le_put32(h + 8, flags);
  rd_le_put64(h + 16, raw);
  rd_le_put64(h + 24, stored);
  rd_le_put64(h + 32, hash);
  uint64_t hh = XXH3_64bits(h, 40);
  rd_le_put64(h + 40, hh);
  int rc = write_all(w->fd, h, sizeof h, err);
  if (rc) return rc;
  w->chain = XXH3_64bits_withSeed(&hh, sizeof hh, w->chain);
  w->bytes += sizeof h;
  return RD_OK;
}

int rd_ckpt_write_section(rd_ckpt_writer_t *w, uint32_t type, uint32_t aux, const void *data,
                          size_t len, rd_error_t *err) {
  if (type == RD_CKPT_END) return rd_error_set(err, RD_EINVAL, "section type reserved");
  if (w->n + 1 >= RD_CKPT_MAX_SECTIONS)
    return rd_error_set(err, RD_EINVAL, "a checkpoint holds at most %u sections",
                        RD_CKPT_MAX_SECTIONS - 1);
  const void *out = data;
  size_t out_len = len;
  uint32_t flags = 0;
  if (w->zstd_level > 0 && len > 64) {
    size_t bound = ZSTD_compressBound(len);
    if (bound > w->zcap) {
      void *nb = realloc(w->zbuf, bound);
      if (nb == NULL)
        return rd_error_set(err, RD_ENOMEM, "out of memory compressing %zu bytes", len);
      w->zbuf = nb;
      w->zcap = bound;
    }
    size_t z = ZSTD_compress(w->zbuf, w->zcap, data, len, w->zstd_level);
    if (ZSTD_isError(z))
      return rd_error_set(err, RD_EINTERNAL, "zstd: %s", ZSTD_getErrorName(z));
    if (z < len) { /* only when it helps */
      out = w->zbuf;
      out_len = z;
      flags = RD_CKPT_ZSTD;
    }
  }
  uint64_t hash = XXH3_64bits(out, out_len);
  int rc = write_header(w, type, aux, flags, len, out_len, hash, err);
  if (rc == RD_OK && out_len > 0) rc = write_all(w->fd, out, out_len, err);
  if (rc) return rc;
  w->bytes += out_len;
  w->n++;
  return RD_OK;
}

int rd_ckpt_writer_finish(rd_ckpt_writer_t *w, rd_error_t *err) {
  return write_header(w, RD_CKPT_END, w->n, 0, 0, 0, w->chain, err);
}

void rd_ckpt_writer_free(rd_ckpt_writer_t *w) {
  free(w->zbuf);
  w->zbuf = NULL;
  w->zcap = 0;
}

/* ------------------------------------------------------------------ */
/* Reader                                                              */
/* ------------------------------------------------------------------ */

int rd_ckpt_reader_open(rd_ckpt_reader_t *r, int fd, rd_error_t *err) {
  memset(r, 0, sizeof *r);
  r->fd = fd;
  off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0) return io_error(err, "reading the checkpoint's size", errno);
  r->size = (uint64_t)end;
  if (r->size == 0) return rd_error_set(err, RD_EINVAL, "the file is empty");
  uint8_t h[RD_CKPT_HEADER_BYTES];
  if (r->size < sizeof h)
    return rd_error_set(err, RD_EINVAL, "the file is truncated in its header (%llu bytes)",
                        (unsigned long long)r->size);
  int rc = pread_all(fd, h, sizeof h, 0, "its header", err);
  if (rc) return rc;
  if (memcmp(h, magic, sizeof magic) != 0)
    return rd_error_set(err, RD_EINVAL, "not a replayd checkpoint (no RPLYDCKP magic)");
  if (rd_sum_differs(rd_le_get64(h + 56), XXH3_64bits(h, 56)))
    return rd_error_set(err, RD_EINVAL, "checksum mismatch in the file header");
  r->version = rd_le_get32(h + 8);
  if (r->version != RD_CKPT_VERSION)
    return rd_error_set(err, RD_EINVAL, "checkpoint format version %u; this build reads "
                        "version %u", r->version, RD_CKPT_VERSION);
  if (rd_le_get32(h + 12) != RD_CKPT_HEADER_BYTES)
    return rd_error_set(err, RD_EINVAL, "header of %u bytes; version %u has %u",
                        rd_le_get32(h + 12), RD_CKPT_VERSION, RD_CKPT_HEADER_BYTES);
  r->created_ns = rd_le_get64(h + 16);

  size_t cap = 16;
  r->sec = malloc(cap * sizeof *r->sec);
  if (r->sec == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory reading a checkpoint");
  uint64_t off = sizeof h, chain = 0;
  for (;;) {
    char what[48];
    snprintf(what, sizeof what, "the header of section %u", r->n);
    uint8_t s[RD_CKPT_SECTION_BYTES];
    if ((rc = pread_all(fd, s, sizeof s, off, what, err)) != RD_OK) goto fail;
    uint64_t hh = rd_le_get64(s + 40);
    if (rd_sum_differs(hh, XXH3_64bits(s, 40))) {
      rc = rd_error_set(err, RD_EINVAL, "checksum mismatch in %s (byte %llu)", what,
                        (unsigned long long)off);
      goto fail;
    }
    off += sizeof s;
    rd_ckpt_section_t c = {rd_le_get32(s), rd_le_get32(s + 4), rd_le_get32(s + 8),
                           rd_le_get64(s + 16), rd_le_get64(s + 24), off, rd_le_get64(s + 32)};
    if (c.type == RD_CKPT_END) {
      if (c.aux != r->n || rd_sum_differs(c.hash, chain)) {
        rc = rd_error_set(err, RD_EINVAL, "the end section does not match the %u sections "
                          "before it (one is missing or out of order)", r->n);
        goto fail;
      }
      if (off != r->size) {
        rc = rd_error_set(err, RD_EINVAL, "%llu bytes follow the end section",
                          (unsigned long long)(r->size - off));
        goto fail;
      }
      return RD_OK;
    }
    chain = XXH3_64bits_withSeed(&hh, sizeof hh, chain);
    if (c.stored_len > r->size - off) {
      rc = rd_error_set(err, RD_EINVAL, "the file is truncated in section %u (type %u: %llu "
                        "bytes announced, %llu left)", r->n, c.type,
                        (unsigned long long)c.stored_len, (unsigned long long)(r->size - off));
      goto fail;
    }
    if ((c.flags & ~RD_CKPT_ZSTD) != 0 ||
        (!(c.flags & RD_CKPT_ZSTD) && c.stored_len != c.raw_len)) {
      rc = rd_error_set(err, RD_EINVAL, "section %u has flags %#x and sizes %llu/%llu that "
                        "this build does not read", r->n, c.flags,
                        (unsigned long long)c.stored_len, (unsigned long long)c.raw_len);
      goto fail;
    }
    if (r->n + 1 >= RD_CKPT_MAX_SECTIONS) {
      rc = rd_error_set(err, RD_EINVAL, "more than %u sections", RD_CKPT_MAX_SECTIONS - 1);
      goto fail;
    }
    if (r->n == cap) {
      cap *= 2;
      void *nb = realloc(r->sec, cap * sizeof *r->sec);
      if (nb == NULL) {
        rc = rd_error_set(err, RD_ENOMEM, "out of memory reading a checkpoint");
        goto fail;
      }
      r->sec = nb;
    }
    r->sec[r->n++] = c;
    off += c.stored_len;
  }
fail:
  rd_ckpt_reader_close(r);
  return rc;
}

void rd_ckpt_reader_close(rd_ckpt_reader_t *r) {
  free(r->sec);
  r->sec = NULL;
  r->n = 0;
}

const rd_ckpt_section_t *rd_ckpt_find(const rd_ckpt_reader_t *r, uint32_t type, uint32_t aux) {
  for (uint32_t i = 0; i < r->n; i++)
    if (r->sec[i].type == type && (aux == UINT32_MAX || r->sec[i].aux == aux)) return &r->sec[i];
  return NULL;
}

int rd_ckpt_read_section(const rd_ckpt_reader_t *r, const rd_ckpt_section_t *s, void *dst,
                         rd_error_t *err) {
  char what[64];
  snprintf(what, sizeof what, "section type %u", s->type);
  if (!(s->flags & RD_CKPT_ZSTD)) {
    int rc = pread_all(r->fd, dst, s->raw_len, s->offset, what, err);
    if (rc) return rc;
    if (rd_sum_differs(s->hash, XXH3_64bits(dst, s->raw_len)))
      return rd_error_set(err, RD_EINVAL, "checksum mismatch in the data of %s (%u)", what,
                          s->aux);
    return RD_OK;
  }
  void *z = malloc(s->stored_len ? s->stored_len : 1);
  if (z == NULL)
    return rd_error_set(err, RD_ENOMEM, "out of memory reading %llu bytes",
                        (unsigned long long)s->stored_len);
  int rc = pread_all(r->fd, z, s->stored_len, s->offset, what, err);
  if (rc == RD_OK && rd_sum_differs(s->hash, XXH3_64bits(z, s->stored_len)))
    rc = rd_error_set(err, RD_EINVAL, "checksum mismatch in the data of %s (%u)", what, s->aux);
  if (rc == RD_OK) {
    size_t got = ZSTD_decompress(dst, s->raw_len, z, s->stored_len);
    if (ZSTD_isError(got))
      rc = rd_error_set(err, RD_EINVAL, "%s does not decompress: %s", what,
                        ZSTD_getErrorName(got));
    else if (got != s->raw_len)
      rc = rd_error_set(err, RD_EINVAL, "%s decompresses to %zu bytes, not %llu", what, got,
                        (unsigned long long)s->raw_len);
  }
  free(z);
  return rc;
}
