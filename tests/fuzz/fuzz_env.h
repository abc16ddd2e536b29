/* fuzz_env.h - what the RPC harnesses share: a daemon's handler layer in
 * process, fresh for every input.
 *
 * Each input gets a new registry (this server's limits, small: see
 * fuzz_env.c) holding two workloads, W1 (replay only) and W2 (a hosted DQN
 * learner, so TrainStep and GetWeights reach the pipeline), and a profile
 * store kept across inputs in a scratch directory. Requests name them by
 * placeholders the harness swaps for their random ids before handing the
 * bytes to rd_handle: FUZZ_W1 and FUZZ_W2, 32 characters like an id, so
 * protobuf lengths stay as the corpus wrote them. The call's token comes
 * from the input's flags byte (fuzz_env_metadata): none, W1's, W2's, the
 * admin's, or a wrong one.
 *
 * Registration and Plan place a hosted learner through rd_place, which
 * this file defines in place of core/placer.c's (not linked): the same
 * rd_placement_compute with a profiling budget of FUZZ_PROFILE_BUDGET_S
 * instead of 1.5 s, and no pinning, so a fuzzed shape costs milliseconds.
 *
 * fuzz_env.c defines LLVMFuzzerInitialize (gRPC, the log, the profile
 * store); a harness linking it defines only LLVMFuzzerTestOneInput.
 */
#ifndef RD_FUZZ_ENV_H
#define RD_FUZZ_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "fuzz.h"
#include "handlers.h"

#define FUZZ_W1 "W1@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"
#define FUZZ_W2 "W2@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"
#define FUZZ_PROFILE_BUDGET_S 0.02
#define FUZZ_MAX_MESSAGE_BYTES (1u << 20)

/* A fresh registry with W1 and W2, in ctx (fuzz_env_end releases it). */
rd_handler_ctx_t *fuzz_env_begin(void);
void fuzz_env_end(void);

/* Copy of data[0, n) with the placeholders replaced by W1's and W2's ids
 * (malloc'd; free it). */
uint8_t *fuzz_env_body(const uint8_t *data, size_t n);

/* The call's metadata for flags (its low 3 bits): 0 none, 1 W1's token,
 * 2 W2's, 3 the admin's, 4 a token of the right form that opens nothing,
 * 5 an empty token, 6 W1's token with a byte flipped, 7 W1's twice. */
void fuzz_env_metadata(uint8_t flags, grpc_metadata_array *md);

/* Run method m on body through rd_handle as server.c would (unary call
 * info, the deadline a short time ahead), wait for a TrainStep's late
 * reply, and release the reply. */
void fuzz_env_call(rd_method_t m, uint8_t flags, const uint8_t *body, size_t n);

#endif
