/* fuzz_profile_jsonl.c - profile JSON lines, as ImportProfiles and an
 * operator's file bring them.
 *
 * Every line of the input is parsed (rd_profile_jsonl_parse); a line that
 * parses must format and parse back to the same profile. Then the whole
 * input is imported into a store (rd_store_import_profiles: the line
 * reader, validation, one transaction: all lines or none).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_scratch.h"
#include "log.h"
#include "profile_jsonl.h"
#include "store.h"

static rd_store_t *store;

static void close_store(void) { rd_store_close(store); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  rd_log_open(NULL, RD_LOG_ERROR, NULL);
  if (rd_store_open(&store, fuzz_scratch(), NULL) != RD_OK) abort();
  fuzz_scratch_on_exit(close_store);
  return 0;
}

static int same(const rd_profile_t *a, const rd_profile_t *b) {
  return strcmp(a->device_fp, b->device_fp) == 0 && a->primitive == b->primitive &&
         a->threads == b->threads && a->shape.batch == b->shape.batch &&
         a->shape.capacity == b->shape.capacity && a->shape.fanout == b->shape.fanout &&
         strcmp(a->shape.algorithm, b->shape.algorithm) == 0 &&
         strcmp(a->shape.network, b->shape.network) == 0 && strcmp(a->build, b->build) == 0 &&
         a->latency_s == b->latency_s && a->reps == b->reps && a->items == b->items &&
         a->source == b->source && a->measured_unix == b->measured_unix;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  for (size_t at = 0; at < size;) {
    const char *nl = memchr(s + at, '\n', size - at);
    size_t len = nl ? (size_t)(nl - (s + at)) + 1 : size - at;
    rd_profile_t p, q;
    if (rd_profile_jsonl_parse(s + at, len, &p, NULL) == RD_OK) {
      char buf[RD_PROFILE_JSONL_MAX + 2];
      size_t n;
      if (rd_profile_jsonl_format(&p, buf, sizeof buf, &n, NULL) != RD_OK) __builtin_trap();
      if (rd_profile_jsonl_parse(buf, n, &q, NULL) != RD_OK || !same(&p, &q)) __builtin_trap();
    }
    at += len;
  }
  if (size > 0) {
    FILE *f = fmemopen((void *)data, size, "r");
    if (f != NULL) {
      size_t n = 0;
      rd_store_import_profiles(store, f, &n, NULL);
      fclose(f);
    }
    if ((data[0] & 7) == 0) rd_store_clear_profiles(store, NULL, NULL); /* keep it small */
  }
  return 0;
}
