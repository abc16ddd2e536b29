#define _GNU_SOURCE /* memfd_create */
/* test_ckpt_file.c - the checkpoint container (daemon/core/ckpt_file.h):
 * sections raw and compressed read back exactly; every flipped byte, every
 * truncation, an empty file, a wrong version or magic, a dropped or extra
 * section is refused with a reason; a full disk is an RD_ESTORE.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_file.h"
#include "rdt_main.h"

#define BIG 100000

static uint8_t *pattern(size_t n, uint32_t salt) {
  uint8_t *p = malloc(n);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i / 7) * 13 + salt); /* compressible */
  return p;
}

/* A file of three sections (one empty) in a memfd; its bytes in *out. */
static size_t write_file(int level, uint8_t **out) {
  int fd = memfd_create("ckpt", 0);
  assert_true(fd >= 0);
  rd_ckpt_writer_t w;
  rd_error_t e;
  assert_int_equal(rd_ckpt_writer_init(&w, fd, level, &e), RD_OK);
  uint8_t *a = pattern(BIG, 1), *b = pattern(300, 2);
  assert_int_equal(rd_ckpt_write_section(&w, 7, 0, a, BIG, &e), RD_OK);
  assert_int_equal(rd_ckpt_write_section(&w, 8, 3, b, 300, &e), RD_OK);
  assert_int_equal(rd_ckpt_write_section(&w, 9, 0, NULL, 0, &e), RD_OK);
  assert_int_equal(rd_ckpt_writer_finish(&w, &e), RD_OK);
  size_t n = (size_t)w.bytes;
  rd_ckpt_writer_free(&w);
  if (level > 0) assert_true(n < BIG); /* the big section compressed */
  *out = malloc(n);
  assert_int_equal(pread(fd, *out, n, 0), (ssize_t)n);
  close(fd);
  free(a);
  free(b);
  return n;
}

static int fd_of(const uint8_t *bytes, size_t n) {
  int fd = memfd_create("ckpt-read", 0);
  assert_true(fd >= 0);
  if (n > 0) assert_int_equal(write(fd, bytes, n), (ssize_t)n);
  return fd;
}

/* Open and read every section: RD_OK, or the first error. */
static int read_all(const uint8_t *bytes, size_t n, rd_error_t *e) {
  int fd = fd_of(bytes, n);
  rd_ckpt_reader_t r;
  int rc = rd_ckpt_reader_open(&r, fd, e);
  if (rc == RD_OK) {
    for (uint32_t i = 0; i < r.n && rc == RD_OK; i++) {
      uint8_t *dst = malloc(r.sec[i].raw_len + 1);
      rc = rd_ckpt_read_section(&r, &r.sec[i], dst, e);
      free(dst);
    }
    rd_ckpt_reader_close(&r);
  }
  close(fd);
  return rc;
}

static void test_round_trip(void **state) {
  (void)state;
  for (int level = 0; level <= 3; level += 3) {
    uint8_t *f;
    size_t n = write_file(level, &f);
    int fd = fd_of(f, n);
    rd_ckpt_reader_t r;
    rd_error_t e;
    assert_int_equal(rd_ckpt_reader_open(&r, fd, &e), RD_OK);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.version, RD_CKPT_VERSION);
    const rd_ckpt_section_t *s7 = rd_ckpt_find(&r, 7, UINT32_MAX);
    const rd_ckpt_section_t *s8 = rd_ckpt_find(&r, 8, 3);
    assert_non_null(s7);
    assert_non_null(s8);
    assert_null(rd_ckpt_find(&r, 8, 4));
    assert_int_equal(s7->raw_len, BIG);
    assert_int_equal(!!(s7->flags & RD_CKPT_ZSTD), level > 0);
    uint8_t *a = malloc(BIG), *want = pattern(BIG, 1);
    assert_int_equal(rd_ckpt_read_section(&r, s7, a, &e), RD_OK);
    assert_memory_equal(a, want, BIG);
    uint8_t b[300];
    uint8_t *wb = pattern(300, 2);
    assert_int_equal(rd_ckpt_read_section(&r, s8, b, &e), RD_OK);
    assert_memory_equal(b, wb, 300);
    free(a);
    free(want);
    free(wb);
    rd_ckpt_reader_close(&r);
    close(fd);
    free(f);
  }
}

/* Every single flipped byte anywhere is found (at open or at read). */
static void test_every_flip(void **state) {
  (void)state;
  for (int level = 0; level <= 1; level++) {
    uint8_t *f;
    size_t n = write_file(level, &f);
    size_t step = level ? 1 : 97; /* raw: the big section's bytes are alike */
    for (size_t i = 0; i < n; i += (i < 200 || i > n - 200) ? 1 : step) {
      for (int bit = 0; bit < 8; bit += 3) {
        f[i] ^= (uint8_t)(1u << bit);
        rd_error_t e;
        rd_error_clear(&e);
        int rc = read_all(f, n, &e);
        if (rc != RD_EINVAL) fail_msg("flip of bit %d at byte %zu of %zu (level %d): rc %d",
                                      bit, i, n, level, rc);
        assert_true(e.msg[0] != '\0');
        f[i] ^= (uint8_t)(1u << bit);
      }
    }
    free(f);
  }
}

/* Every truncation is found, the empty file too; one byte more as well. */
static void test_truncations(void **state) {
  (void)state;
  uint8_t *f;
  size_t n = write_file(0, &f);
  for (size_t len = 0; len < n; len += (len < 400 || len > n - 400) ? 1 : 113) {
    rd_error_t e;
    rd_error_clear(&e);
    int rc = read_all(f, len, &e);
    if (rc != RD_EINVAL) fail_msg("truncated to %zu of %zu: rc %d", len, n, rc);
    if (len == 0) assert_non_null(strstr(e.msg, "empty"));
  }
  uint8_t *more = malloc(n + 1);
  memcpy(more, f, n);
  more[n] = 0;
  rd_error_t e;
  assert_int_equal(read_all(more, n + 1, &e), RD_EINVAL);
  assert_int_equal(read_all(f, n, &e), RD_OK);
  free(more);
  free(f);
}

/* A wrong version with a valid header checksum says so; so does a file
 * that is no checkpoint. */
static void test_version_and_magic(void **state) {
  (void)state;
  uint8_t *f;
  size_t n = write_file(0, &f);
  rd_le_put32(f + 8, RD_CKPT_VERSION + 1);
  rd_le_put64(f + 56, XXH3_64bits(f, 56));
  rd_error_t e;
  assert_int_equal(read_all(f, n, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "version 2"));
  memcpy(f, "NOTCKPT!", 8);
  assert_int_equal(read_all(f, n, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "not a replayd checkpoint"));
  free(f);
}

/* A section cut out whole (its header and data): the end's chain sees it. */
static void test_dropped_section(void **state) {
  (void)state;
  uint8_t *f;
  size_t n = write_file(0, &f);
  size_t s8 = RD_CKPT_HEADER_BYTES + RD_CKPT_SECTION_BYTES + BIG; /* the second section */
  size_t len8 = RD_CKPT_SECTION_BYTES + 300;
  uint8_t *g = malloc(n);
  memcpy(g, f, s8);
  memcpy(g + s8, f + s8 + len8, n - s8 - len8);
  rd_error_t e;
  assert_int_equal(read_all(g, n - len8, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "end section"));
  free(g);
  free(f);
}

/* A write that fails (a full disk: /dev/full) is RD_ESTORE saying why. */
static void test_disk_full(void **state) {
  (void)state;
  int fd = open("/dev/full", O_WRONLY);
  if (fd < 0) skip();
  rd_ckpt_writer_t w;
  rd_error_t e;
  int rc = rd_ckpt_writer_init(&w, fd, 0, &e);
  assert_int_equal(rc, RD_ESTORE);
  assert_non_null(strstr(e.msg, "No space left"));
  rd_ckpt_writer_free(&w);
  close(fd);
  assert_int_equal(rd_ckpt_writer_init(&w, 0, 99, &e), RD_EINVAL);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_every_flip),
         cmocka_unit_test(test_truncations),    cmocka_unit_test(test_version_and_magic),
         cmocka_unit_test(test_dropped_section), cmocka_unit_test(test_disk_full))
