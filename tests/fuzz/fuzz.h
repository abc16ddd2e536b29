/* fuzz.h - libFuzzer's entry points, which every harness defines
 * (LLVMFuzzerInitialize where it has set-up to do once; the RPC harnesses
 * get theirs from fuzz_env.c). */
#ifndef RD_FUZZ_H
#define RD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
