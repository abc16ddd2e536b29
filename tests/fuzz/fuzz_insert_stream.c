/* fuzz_insert_stream.c - the Insert stream's messages, one call.
 *
 * Input: byte 0 the call's token (fuzz_env.h); then messages, each a
 * 2-byte little-endian length and that many bytes (FUZZ_W1/FUZZ_W2 for the
 * workloads' ids), at most 16. They go through rd_handle as server.c
 * hands over a stream's messages, until the handler ends the call or they
 * run out; then the stream's end (the client's half-close) and release.
 */
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>

#include "fuzz.h"
#include "auth.h"
#include "fuzz_env.h"

#define MAX_MESSAGES 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  rd_handler_ctx_t *ctx = fuzz_env_begin();
  grpc_metadata_array md;
  fuzz_env_metadata(data[0], &md);
  rd_insert_stream_t st;
  memset(&st, 0, sizeof st);
  rd_call_info_t ci = {&md, 0, NULL, &st, NULL, NULL}; /* no wait: a limiter refuses at once */
  size_t at = 1;
  rd_reply_when_t when = RD_REPLY_MORE;
  for (int k = 0; k < MAX_MESSAGES && when == RD_REPLY_MORE && at + 2 <= size; k++) {
    size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
    at += 2;
    if (len > size - at) len = size - at;
    uint8_t *body = fuzz_env_body(data + at, len);
    at += len;
    rd_reply_t r;
    memset(&r, 0, sizeof r);
    when = rd_handle(ctx, RD_M_INSERT, &ci, body, len, &r);
    free(body);
    if (r.reply) grpc_byte_buffer_destroy(r.reply);
  }
  if (when == RD_REPLY_MORE) {
    rd_reply_t r;
    memset(&r, 0, sizeof r);
    rd_handle_insert_end(&st, NULL, &r); /* no journal here: the reply is now */
    if (r.reply) grpc_byte_buffer_destroy(r.reply);
  }
  rd_insert_stream_release(&st);
  fuzz_env_end();
  return 0;
}
