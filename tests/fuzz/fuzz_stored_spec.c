/* fuzz_stored_spec.c - a workload's spec as the state database holds it
 * (a file: it may be old, edited or damaged). The restore's decoder
 * (rd_spec_pb_decoder: unpack, check, resolve against this server's
 * limits) must refuse what it cannot serve with a message, never crash.
 */
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "spec_pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static rd_config_t cfg;
  static int ready;
  if (!ready) {
    rd_config_defaults(&cfg);
    cfg.max_capacity = 1u << 16;
    ready = 1;
  }
  rd_spec_decoder_t dec = rd_spec_pb_decoder(&cfg);
  rd_workload_spec_t spec;
  void *hold = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (dec.decode(dec.arg, data, size, &spec, &hold, &err) == RD_OK) {
    rd_workload_config_t wc;
    rd_workload_spec_resolve(&cfg, &spec, &wc, &err);
  } else if (err.msg[0] == '\0') {
    __builtin_trap(); /* a refusal says why */
  }
  dec.release(hold);
  return 0;
}
