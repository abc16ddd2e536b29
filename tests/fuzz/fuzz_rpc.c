/* fuzz_rpc.c - every unary RPC's request through the handler layer.
 *
 * Input: byte 0 picks the method (rd_method_t, modulo the count; the
 * Insert stream has fuzz_insert_stream), byte 1 the call's token
 * (fuzz_env.h), the rest is the request's bytes, FUZZ_W1/FUZZ_W2 standing
 * for the workloads' ids. rd_handle runs as server.c runs it: the wire
 * check, the decode, the handler, core, the reply's bound.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "fuzz_env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size - 2 > FUZZ_MAX_MESSAGE_BYTES) return 0;
  rd_method_t m = (rd_method_t)(data[0] % RD_M_COUNT);
  if (m == RD_M_INSERT) return 0;
  fuzz_env_begin();
  uint8_t *body = fuzz_env_body(data + 2, size - 2);
  fuzz_env_call(m, data[1], body, size - 2);
  free(body);
  fuzz_env_end();
  return 0;
}
