/* fuzz_journal.c - a write-ahead journal segment (a file a crash, a disk
 * or a copy may have damaged), replayed as a restart replays it.
 *
 * Per input: a workload is registered (capacity 16, the cartpole schema
 * make_durable_corpus.py's seeds were written with; durability
 * checkpoint, so no committer thread), the bytes become its segment 0
 * (the journal since registration, which continues its empty table), and
 * rd_durable_restore runs as at start: it reads the segment
 * (rd_journal_read: torn tails, damaged and out-of-sequence records),
 * decodes and applies each insert and update, cuts a torn tail off, and
 * checkpoints what it restored when replaying stopped early. Then the
 * table is used as a client would (fuzz_table.h) and the workload is
 * deleted with its files. In this build the reader passes over checksum mismatches
 * (journal.h), so a mutated record reaches the decoders.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "durable.h"
#include "fuzz.h"
#include "fuzz_table.h"
#include "rdt_pb.h"
#include "registry.h"
#include "spec_pb.h"

static rd_config_t cfg;
static rd_durable_t *durable;
static rd_registry_t *registry;
static rdt_pb_spec_t spec;

static void die(const char *what, const rd_error_t *err) {
  fprintf(stderr, "fuzz_journal: %s: %s\n", what, err->msg);
  abort();
}

/* make_durable_corpus.py's journal workload: CartPole's rows, capacity
 * 16, seed 7, durability checkpoint. */
static void cartpole(void) {
  rdt_pb_spec_init(&spec, "journal", 16);
  rdt_pb_cartpole(&spec, 5);
  spec.spec.seed = 7;
  spec.spec.durability = "checkpoint";
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_durable_config(&cfg);
  cfg.max_batch = 1024;
  cfg.checkpoint_interval_s = 0;
  fuzz_durable_open(&cfg, &durable, &registry);
  rd_registry_set_durable(registry, durable);
  cartpole();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rd_error_t err;
  rd_error_clear(&err);
  rd_workload_t *w = NULL;
  if (rd_spec_pb_register(registry, &spec.spec, NULL, &w, &err) != RD_OK) die("register", &err);
  char path[PATH_MAX + 64], dir[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s/%s", rd_durable_dir(durable), w->id);
  rd_journal_path(path, sizeof path, dir, 0);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || (size > 0 && write(fd, data, size) != (ssize_t)size)) abort();
  close(fd);

  rd_durable_restore(durable, w);
  rd_durable_info_t di;
  rd_durable_info(w, &di);
  if (di.restored[0] == '\0') __builtin_trap(); /* Describe says what came back */
  if (fuzz_verbose()) fprintf(stderr, "fuzz_journal: %s\n", di.restored);
  fuzz_table_probe(w);

  if (rd_registry_delete(registry, w->id, &err) != RD_OK) die("delete", &err);
  rd_workload_unref(w);
  return 0;
}
