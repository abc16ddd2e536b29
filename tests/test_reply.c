/* test_reply.c - what a call answers: the one RD_E* -> gRPC status
 * mapping (status.h), and the hand-encoded SampleResponse
 * (sample_reply.h) read back by protobuf-c's own unpack, every field, for
 * empty, small and large batches, and filled by a real table. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replayd.pb-c.h"
#include "sample_reply.h"
#include "status.h"
#include "rd_rng.h"
#include "rdt_schema.h"
#include "rdt_main.h"

/* ---- The status mapping ---- */

static void test_status_mapping(void **state) {
  (void)state;
  static const struct {
    int code;
    grpc_status_code st;
  } want[] = {
      {RD_OK, GRPC_STATUS_OK},
      {RD_EINVAL, GRPC_STATUS_INVALID_ARGUMENT},
      {RD_ERANGE, GRPC_STATUS_INVALID_ARGUMENT},
      {RD_ENOMEM, GRPC_STATUS_RESOURCE_EXHAUSTED},
      {RD_EEMPTY, GRPC_STATUS_FAILED_PRECONDITION},
      {RD_ETOOBIG, GRPC_STATUS_RESOURCE_EXHAUSTED},
      {RD_ENOTFOUND, GRPC_STATUS_NOT_FOUND},
      {RD_ESTORE, GRPC_STATUS_INTERNAL},
      {RD_EBUSY, GRPC_STATUS_ABORTED},
      {RD_ETIMEDOUT, GRPC_STATUS_DEADLINE_EXCEEDED},
      {RD_ECANCELED, GRPC_STATUS_UNAVAILABLE},
      {RD_EINTERNAL, GRPC_STATUS_INTERNAL},
      {RD_ESTATE, GRPC_STATUS_FAILED_PRECONDITION},
      {-999, GRPC_STATUS_INTERNAL},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (rd_grpc_status(want[i].code) != want[i].st)
      fail_msg("%s -> %d, want %d", rd_err_name(want[i].code), rd_grpc_status(want[i].code),
               want[i].st);
    rd_reply_t r;
    memset(&r, 0, sizeof r);
    assert_int_equal(rd_reply_error(&r, want[i].code, "code %d", want[i].code), want[i].code);
    /* A failure is never OK, whatever code it was given. */
    assert_int_equal(r.status, want[i].code == RD_OK ? GRPC_STATUS_INTERNAL : want[i].st);
    assert_null(r.reply);
  }
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  Replayd__V1__DeleteWorkloadResponse m = REPLAYD__V1__DELETE_WORKLOAD_RESPONSE__INIT;
  rd_reply_pack(&r, &m.base);
  assert_int_equal(r.status, GRPC_STATUS_OK);
  assert_non_null(r.reply);
  rd_reply_status(&r, GRPC_STATUS_PERMISSION_DENIED, "no %s", "entry");
  assert_int_equal(r.status, GRPC_STATUS_PERMISSION_DENIED);
  assert_string_equal(r.message, "no entry");
  assert_null(r.reply); /* the failure dropped the packed reply */
}

/* ---- The SampleResponse ---- */

/* A buffer's bytes, contiguous. */
static uint8_t *bytes_of(grpc_byte_buffer *bb, size_t *len) {
  grpc_byte_buffer_reader rd;
  assert_true(grpc_byte_buffer_reader_init(&rd, bb));
  grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  *len = GRPC_SLICE_LENGTH(s);
  uint8_t *out = malloc(*len + 1);
  memcpy(out, GRPC_SLICE_START_PTR(s), *len);
  grpc_slice_unref(s);
  return out;
}

/* Fill out with values of every varint length and double kind. */
static void fill(const rd_sample_out_t *out, uint32_t n, const size_t *fb, uint32_t nf,
                 uint64_t seed) {
  static const uint64_t edge[] = {0, 1, 127, 128, 16383, 16384, 1ull << 35, UINT64_MAX};
  static const double dedge[] = {0.0, -0.0, 1e-310, 1.0, INFINITY, 3.5e300};
  for (uint32_t i = 0; i < n; i++) {
    uint64_t r = rd_splitmix64(&seed);
    out->keys[i] = i < 8 ? edge[i] : r >> (r & 63);
    out->probabilities[i] = i < 6 ? dedge[i] : (double)(r >> 11) / 9007199254740992.0;
    out->weights[i] = (double)i / (n ? n : 1);
  }
  for (uint32_t f = 0; f < nf; f++) {
    assert_int_equal(out->cols[f].bytes, (size_t)n * fb[f]);
    uint8_t *p = out->cols[f].data;
    for (size_t b = 0; b < out->cols[f].bytes; b++) p[b] = (uint8_t)(rd_splitmix64(&seed) + f);
  }
}

/* What protobuf-c would pack for the same values. */
static void expected(const rd_sample_out_t *out, uint32_t n, uint32_t nf, uint64_t table_size,
                     Replayd__V1__SampleResponse *m, Replayd__V1__RowBatch *rb,
                     ProtobufCBinaryData *cols) {
  replayd__v1__sample_response__init(m);
  replayd__v1__row_batch__init(rb);
  for (uint32_t f = 0; f < nf; f++) {
    cols[f].data = out->cols[f].data;
    cols[f].len = out->cols[f].bytes;
  }
  rb->count = n;
  rb->n_columns = nf;
  rb->columns = cols;
  m->n_keys = m->n_probabilities = m->n_weights = n;
  m->keys = out->keys;
  m->probabilities = out->probabilities;
  m->weights = out->weights;
  m->table_size = table_size;
  m->rows = rb;
}

/* Encode n rows of fields fb[0..nf), read the reply back with protobuf-c
 * and compare every field with what was written; keys_le: the keys as
 * field 6's fixed-width bytes, the same values as protobuf-c's varints. */
static void round_trip_as(uint32_t n, const size_t *fb, uint32_t nf, uint64_t table_size,
                          int keys_le) {
  rd_sample_reply_t s;
  rd_sample_out_t out;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_sample_reply_init(&s, n, fb, nf, &out, &err) != RD_OK) fail_msg("%s", err.msg);
  fill(&out, n, fb, nf, n * 31u + nf);
  /* Keep what was written: finish hands the buffer over. */
  Replayd__V1__SampleResponse want;
  Replayd__V1__RowBatch rb;
  ProtobufCBinaryData cols[RD_SCHEMA_MAX_FIELDS];
  expected(&out, n, nf, table_size, &want, &rb, cols);
  size_t want_len = replayd__v1__sample_response__get_packed_size(&want);
  uint8_t *want_bytes = malloc(want_len + 1);
  replayd__v1__sample_response__pack(&want, want_bytes);
  Replayd__V1__SampleResponse *ref = replayd__v1__sample_response__unpack(NULL, want_len,
                                                                           want_bytes);
  assert_non_null(ref);

  grpc_byte_buffer *bb = rd_sample_reply_finish(&s, table_size, keys_le);
  assert_null(s.buf);
  size_t len;
  uint8_t *got_bytes = bytes_of(bb, &len);
  grpc_byte_buffer_destroy(bb);
  /* The same fields in another order: exactly as many bytes. */
  if (!keys_le) assert_int_equal(len, want_len);
  Replayd__V1__SampleResponse *got = replayd__v1__sample_response__unpack(NULL, len, got_bytes);
  assert_non_null(got);
  assert_int_equal(got->base.n_unknown_fields, 0);
  assert_int_equal(got->n_keys, keys_le ? 0 : n);
  assert_int_equal(got->keys_le.len, keys_le ? (size_t)n * 8 : 0);
  assert_int_equal(got->n_probabilities, n);
  assert_int_equal(got->n_weights, n);
  if (n && keys_le) {
    for (uint32_t i = 0; i < n; i++) { /* little-endian, whatever the host */
      uint64_t k = 0;
      for (int b = 7; b >= 0; b--) k = k << 8 | got->keys_le.data[(size_t)i * 8 + b];
      if (k != ref->keys[i]) fail_msg("key %u: %llu, want %llu", i, (unsigned long long)k,
                                      (unsigned long long)ref->keys[i]);
    }
  }
  if (n) {
    if (!keys_le) assert_memory_equal(got->keys, ref->keys, n * sizeof(uint64_t));
    assert_memory_equal(got->probabilities, ref->probabilities, n * sizeof(double));
    assert_memory_equal(got->weights, ref->weights, n * sizeof(double));
  }
  assert_true(got->table_size == table_size);
  assert_non_null(got->rows);
  assert_int_equal(got->rows->count, n);
  assert_int_equal(got->rows->n_columns, nf);
  for (uint32_t f = 0; f < nf; f++) {
    assert_int_equal(got->rows->columns[f].len, ref->rows->columns[f].len);
    if (ref->rows->columns[f].len)
      assert_memory_equal(got->rows->columns[f].data, ref->rows->columns[f].data,
                          ref->rows->columns[f].len);
  }
  replayd__v1__sample_response__free_unpacked(got, NULL);
  replayd__v1__sample_response__free_unpacked(ref, NULL);
  free(got_bytes);
  free(want_bytes);
}

static void round_trip(uint32_t n, const size_t *fb, uint32_t nf, uint64_t table_size) {
  round_trip_as(n, fb, nf, table_size, 0);
  round_trip_as(n, fb, nf, table_size, 1);
}

static void test_sample_reply_empty(void **state) {
  (void)state;
  static const size_t fb[] = {16, 4, 4, 16, 1};
  round_trip(0, fb, 5, 0);
  round_trip(0, fb, 5, 7);
  round_trip(0, fb, 0, 0); /* no fields: an empty RowBatch */
}

static void test_sample_reply_small(void **state) {
  (void)state;
  static const size_t fb[] = {16, 4, 4, 16, 1};
  round_trip(1, fb, 5, 1);
  round_trip(8, fb, 5, UINT64_MAX);
  round_trip(9, fb, 1, 1ull << 40);
  static const size_t one[] = {1};
  for (uint32_t n = 1; n < 200; n += 13) round_trip(n, one, 1, n);
}

static void test_sample_reply_large(void **state) {
  (void)state;
  /* The largest batch, CartPole's fields: lengths of 3-byte varints. */
  static const size_t cartpole[] = {16, 4, 4, 16, 1};
  round_trip(65536, cartpole, 5, 16777216);
  /* Wide rows, all 32 fields: columns of several MiB. */
  size_t wide[RD_SCHEMA_MAX_FIELDS];
  for (int f = 0; f < RD_SCHEMA_MAX_FIELDS; f++) wide[f] = (size_t)(f + 1) * 97;
  round_trip(256, wide, RD_SCHEMA_MAX_FIELDS, 4096);
}

static void test_sample_reply_refuses(void **state) {
  (void)state;
  rd_sample_reply_t s;
  rd_sample_out_t out;
  rd_error_t err;
  size_t fb[RD_SCHEMA_MAX_FIELDS + 1] = {1};
  assert_int_equal(rd_sample_reply_init(&s, 4, fb, RD_SCHEMA_MAX_FIELDS + 1, &out, &err),
                   RD_EINVAL);
  assert_null(s.buf);
  fb[0] = SIZE_MAX / 2;
  assert_int_equal(rd_sample_reply_init(&s, 4, fb, 1, &out, &err), RD_ETOOBIG);
  assert_null(s.buf);
  /* Freeing an unfinished reply, twice, is fine. */
  fb[0] = 8;
  assert_int_equal(rd_sample_reply_init(&s, 4, fb, 1, &out, &err), RD_OK);
  rd_sample_reply_free(&s);
  rd_sample_reply_free(&s);
}

/* A real table sampling straight into the reply gives what it gives into
 * plain buffers: the same keys, probabilities, weights and rows. */
static void test_sample_reply_from_table(void **state) {
  (void)state;
  rd_table_config_t c;
  rd_table_config_default(&c);
  c.schema.n_fields = 3;
  rdt_field(&c.schema.fields[0], "obs", RD_DTYPE_FLOAT32, 3);
  rdt_field(&c.schema.fields[1], "a", RD_DTYPE_INT64, 0);
  rdt_field(&c.schema.fields[2], "d", RD_DTYPE_BOOL, 0);
  c.capacity = 1000;
  c.max_batch = 512;
  c.seed = 42;
  rd_table_t ta, tb;
  assert_int_equal(rd_table_init(&ta, &c, NULL), RD_OK);
  assert_int_equal(rd_table_init(&tb, &c, NULL), RD_OK);
  enum { N = 1500 }; /* wraps the ring: keys past the capacity */
  float *obs = calloc(N * 3, sizeof *obs);
  int64_t *a = calloc(N, sizeof *a);
  uint8_t *d = calloc(N, 1);
  double *pr = calloc(N, sizeof *pr);
  for (int i = 0; i < N; i++) {
    obs[i * 3] = (float)i;
    a[i] = -i;
    d[i] = i & 1;
    pr[i] = 1 + i % 7;
  }
  for (int i = 0; i < N; i += 500) { /* within max_batch */
    rd_cbuf_t cols[3] = {{obs + i * 3, 500 * 12}, {a + i, 500 * 8}, {d + i, 500}};
    assert_int_equal(rd_table_insert(&ta, 500, cols, pr + i, NULL, NULL), RD_OK);
    assert_int_equal(rd_table_insert(&tb, 500, cols, pr + i, NULL, NULL), RD_OK);
  }

  rd_sample_reply_t s;
  rd_sample_out_t out;
  assert_int_equal(rd_sample_reply_alloc(&s, &ta, 512, &out, NULL), RD_OK);
  assert_int_equal(rd_table_sample(&ta, 512, 0.4, 0, &out, NULL), RD_OK);
  grpc_byte_buffer *bb = rd_sample_reply_finish(&s, rd_table_size(&ta), 0);
  size_t len;
  uint8_t *bytes = bytes_of(bb, &len);
  grpc_byte_buffer_destroy(bb);
  Replayd__V1__SampleResponse *got = replayd__v1__sample_response__unpack(NULL, len, bytes);
  assert_non_null(got);

  uint64_t keys[512];
  double probs[512], weights[512];
  float o[512 * 3];
  int64_t aa[512];
  uint8_t dd[512];
  rd_buf_t bcols[3] = {{o, sizeof o}, {aa, sizeof aa}, {dd, sizeof dd}};
  rd_sample_out_t plain = {keys, probs, weights, bcols};
  assert_int_equal(rd_table_sample(&tb, 512, 0.4, 0, &plain, NULL), RD_OK);
  assert_int_equal(got->n_keys, 512);
  assert_memory_equal(got->keys, keys, sizeof keys);
  assert_memory_equal(got->probabilities, probs, sizeof probs);
  assert_memory_equal(got->weights, weights, sizeof weights);
  assert_int_equal(got->table_size, 1000);
  assert_int_equal(got->rows->count, 512);
  assert_int_equal(got->rows->n_columns, 3);
  assert_int_equal(got->rows->columns[0].len, sizeof o);
  assert_memory_equal(got->rows->columns[0].data, o, sizeof o);
  assert_memory_equal(got->rows->columns[1].data, aa, sizeof aa);
  assert_memory_equal(got->rows->columns[2].data, dd, sizeof dd);
  for (int i = 0; i < 512; i++) assert_true(keys[i] >= N - 1000 && keys[i] < N);
  replayd__v1__sample_response__free_unpacked(got, NULL);
  free(bytes);
  free(obs);
  free(a);
  free(d);
  free(pr);
  rd_table_free(&ta);
  rd_table_free(&tb);
}

static int setup(void **state) {
  (void)state;
  grpc_init();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  grpc_shutdown();
  return 0;
}

RDT_MAIN(setup, teardown,
         cmocka_unit_test(test_status_mapping),
         cmocka_unit_test(test_sample_reply_empty),
         cmocka_unit_test(test_sample_reply_small),
         cmocka_unit_test(test_sample_reply_large),
         cmocka_unit_test(test_sample_reply_refuses),
         cmocka_unit_test(test_sample_reply_from_table))
