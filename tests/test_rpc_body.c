/* test_rpc_body.c - request bodies inflated within the message limit
 * (daemon/rpc/rpc_body.h): the compression-bomb guard. */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <zlib.h>

#include "rpc_body.h"

/* n bytes of data compressed with zlib framing (window_bits 15) or gzip
 * (31), cut into pieces of at most piece bytes. */
static grpc_byte_buffer *compressed(const uint8_t *data, size_t n, int window_bits,
                                    grpc_compression_algorithm alg, size_t piece,
                                    size_t *wire_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  size_t cap = deflateBound(&z, n) + 64;
  uint8_t *out = malloc(cap);
  z.next_in = (uint8_t *)data;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
  size_t len = cap - z.avail_out;
  deflateEnd(&z);
  size_t k = (len + piece - 1) / piece;
  grpc_slice *sl = calloc(k, sizeof *sl);
  for (size_t i = 0; i < k; i++) {
    size_t m = len - i * piece < piece ? len - i * piece : piece;
    sl[i] = grpc_slice_from_copied_buffer((const char *)out + i * piece, m);
  }
  grpc_byte_buffer *bb = grpc_raw_compressed_byte_buffer_create(sl, k, alg);
  for (size_t i = 0; i < k; i++) grpc_slice_unref(sl[i]);
  free(sl);
  free(out);
  if (wire_len) *wire_len = len;
  return bb;
}

static uint8_t *pattern(size_t n) {
  uint8_t *p = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 2654435761u) >> 13);
  return p;
}

static void expect_body(grpc_byte_buffer *bb, size_t max, const uint8_t *want, size_t n) {
  grpc_slice s;
  rd_error_t err;
  assert_int_equal(rd_rpc_body(bb, max, &s, &err), RD_OK);
  assert_int_equal(GRPC_SLICE_LENGTH(s), n);
  assert_memory_equal(GRPC_SLICE_START_PTR(s), want, n);
  grpc_slice_unref(s);
}

static void expect_error(grpc_byte_buffer *bb, size_t max, int code, const char *text) {
  grpc_slice s = grpc_slice_from_static_string("untouched");
  rd_error_t err;
  assert_int_equal(rd_rpc_body(bb, max, &s, &err), code);
  assert_non_null(strstr(err.msg, text));
  assert_string_equal((const char *)GRPC_SLICE_START_PTR(s), "untouched");
}

static void test_plain(void **state) {
  (void)state;
  uint8_t *d = pattern(1000);
  grpc_slice s = grpc_slice_from_copied_buffer((const char *)d, 1000);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  expect_body(bb, 1000, d, 1000);
  expect_error(bb, 999, RD_ETOOBIG, "message limit of 999");
  grpc_byte_buffer_destroy(bb);
  grpc_slice e;
  assert_int_equal(rd_rpc_body(NULL, 10, &e, NULL), RD_OK);
  assert_int_equal(GRPC_SLICE_LENGTH(e), 0);
  free(d);
}

static void test_gzip_and_deflate_round_trip(void **state) {
  (void)state;
  const size_t sizes[] = {0, 1, 1000, 300000, 1u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i];
    uint8_t *d = pattern(n);
    grpc_byte_buffer *g = compressed(d, n, 31, GRPC_COMPRESS_GZIP, 7000, NULL);
    grpc_byte_buffer *z = compressed(d, n, 15, GRPC_COMPRESS_DEFLATE, 1 << 20, NULL);
    expect_body(g, n, d, n); /* exactly at the limit */
    expect_body(z, n + 10, d, n);
    if (n > 0) {
      expect_error(g, n - 1, RD_ETOOBIG, "inflates to more than");
      expect_error(z, n - 1, RD_ETOOBIG, "inflates to more than");
    }
    grpc_byte_buffer_destroy(g);
    grpc_byte_buffer_destroy(z);
    free(d);
  }
}

/* n zero bytes as gzip, compressed from a small buffer fed n / 64 KiB
 * times, so that the test itself never holds n bytes. */
static grpc_byte_buffer *zero_bomb(size_t n, size_t *wire_len) {
  static const uint8_t zeros[64 << 10];
  z_stream z;
  memset(&z, 0, sizeof z);
  assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  size_t cap = n / 512 + (1 << 16);
  uint8_t *out = malloc(cap);
  z.next_out = out;
  z.avail_out = (uInt)cap;
  for (size_t done = 0; done < n; done += sizeof zeros) {
    z.next_in = (uint8_t *)zeros;
    z.avail_in = sizeof zeros;
    assert_int_equal(deflate(&z, done + sizeof zeros >= n ? Z_FINISH : Z_NO_FLUSH),
                     done + sizeof zeros >= n ? Z_STREAM_END : Z_OK);
  }
  size_t len = cap - z.avail_out;
  deflateEnd(&z);
  grpc_slice sl = grpc_slice_from_copied_buffer((const char *)out, len);
  free(out);
  grpc_byte_buffer *bb = grpc_raw_compressed_byte_buffer_create(&sl, 1, GRPC_COMPRESS_GZIP);
  grpc_slice_unref(sl);
  *wire_len = len;
  return bb;
}

static long max_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* 256 MiB of zeros is about 256 KiB of gzip: refused at a 1 MiB limit,
 * and the process's peak memory does not grow by anything near the
 * inflated size while refusing it. */
static void test_bomb_refused_within_the_limit(void **state) {
  (void)state;
  size_t wire;
  grpc_byte_buffer *g = zero_bomb(256u << 20, &wire);
  assert_true(wire < 1u << 20);
  long before = max_rss_kib();
  expect_error(g, 1u << 20, RD_ETOOBIG, "limit of 1048576");
  long grew = max_rss_kib() - before;
  assert_true(grew < 32 << 10); /* KiB: the limit plus slack, not 256 MiB */
  grpc_byte_buffer_destroy(g);
}

static void test_bad_streams(void **state) {
  (void)state;
  uint8_t *d = pattern(5000);
  size_t wire;
  grpc_byte_buffer *g = compressed(d, 5000, 31, GRPC_COMPRESS_GZIP, 1 << 20, &wire);
  /* Truncated: the first half of the compressed bytes. */
  grpc_slice all = grpc_slice_ref(g->data.raw.slice_buffer.slices[0]);
  grpc_slice half = grpc_slice_sub(all, 0, wire / 2);
  grpc_byte_buffer *t = grpc_raw_compressed_byte_buffer_create(&half, 1, GRPC_COMPRESS_GZIP);
  expect_error(t, 1 << 20, RD_EINVAL, "truncated");
  /* Garbage claimed as gzip, and gzip claimed as deflate. */
  grpc_slice junk = grpc_slice_from_static_string("this is not compressed at all");
  grpc_byte_buffer *j = grpc_raw_compressed_byte_buffer_create(&junk, 1, GRPC_COMPRESS_GZIP);
  expect_error(j, 1 << 20, RD_EINVAL, "not valid compressed data");
  grpc_byte_buffer *w = grpc_raw_compressed_byte_buffer_create(&all, 1, GRPC_COMPRESS_DEFLATE);
  expect_error(w, 1 << 20, RD_EINVAL, "not valid compressed data");
  grpc_byte_buffer_destroy(t);
  grpc_byte_buffer_destroy(j);
  grpc_byte_buffer_destroy(w);
  grpc_byte_buffer_destroy(g);
  grpc_slice_unref(half);
  grpc_slice_unref(all);
  free(d);
}

int main(void) {
  grpc_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bomb_refused_within_the_limit),
      cmocka_unit_test(test_plain),
      cmocka_unit_test(test_gzip_and_deflate_round_trip),
      cmocka_unit_test(test_bad_streams),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  grpc_shutdown();
  return rc;
}
