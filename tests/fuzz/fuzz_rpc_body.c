/* fuzz_rpc_body.c - a request body as the client compressed it
 * (rpc_body.h): the daemon inflates gzip and deflate itself, within the
 * message limit.
 *
 * Input: byte 0 the algorithm the body claims (0 none, 1 deflate, 2 gzip,
 * else one the server does not take), byte 1 where the body is cut into
 * two slices (gRPC hands over a message in pieces), the rest the body.
 */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "rpc_body.h"

#define LIMIT (64u << 10)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  grpc_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  static const grpc_compression_algorithm algos[] = {
      GRPC_COMPRESS_NONE, GRPC_COMPRESS_DEFLATE, GRPC_COMPRESS_GZIP, GRPC_COMPRESS_ALGORITHMS_COUNT};
  grpc_compression_algorithm a = algos[data[0] % 4];
  size_t n = size - 2, cut = n ? data[1] % (n + 1) : 0;
  grpc_slice parts[2] = {grpc_slice_from_copied_buffer((const char *)data + 2, cut),
                         grpc_slice_from_copied_buffer((const char *)data + 2 + cut, n - cut)};
  grpc_byte_buffer *bb = grpc_raw_compressed_byte_buffer_create(parts, 2, a);
  grpc_slice_unref(parts[0]);
  grpc_slice_unref(parts[1]);
  grpc_slice out;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_rpc_body(bb, LIMIT, &out, &err);
  if (rc == RD_OK) {
    if (GRPC_SLICE_LENGTH(out) > LIMIT) __builtin_trap(); /* the bound is the point */
    if (a == GRPC_COMPRESS_NONE &&
        (GRPC_SLICE_LENGTH(out) != n || memcmp(GRPC_SLICE_START_PTR(out), data + 2, n) != 0))
      __builtin_trap(); /* an uncompressed body comes through as it is */
    grpc_slice_unref(out);
  }
  grpc_byte_buffer_destroy(bb);
  return 0;
}
