/* fuzz_checkpoint.c - a checkpoint or export file (a file a disk, a copy or
 * a client controls), read as ImportWorkload reads it (rpc/durability.c):
 * rd_import_read verifies every section; when it does, the workload is
 * built from the spec the file carries (unpacked, then the stored-spec
 * decoder rd_spec_pb_decode with this server's limits) and registered,
 * and rd_import_apply puts the file's table and learner into it, the
 * checks a restore makes (durable.c apply_loaded) included. Then the
 * table is used as a client would (fuzz_table.h: sample, insert, update,
 * sample), and the workload is deleted.
 *
 * What differs from the handler, and why: no SQLite store (the registry
 * takes NULL; a store's write per input would only slow the fuzzer) and
 * no placement (a learner runs on the CPU, as a restore without profiles
 * places it); the workload has no durability here, so rd_import_apply
 * checkpoints nothing (writing a checkpoint is not reading one).
 *
 * Limits keep one input fast: 4096 items, 64 MiB for the whole server
 * (which also bounds what an import may make us allocate). In this build
 * the readers pass over checksum mismatches (ckpt_file.h), so a mutated
 * file reaches the sections' parsers. A refusal must say why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "durable.h"
#include "fuzz.h"
#include "fuzz_table.h"
#include "registry.h"
#include "spec_pb.h"

static rd_config_t cfg;
static rd_durable_t *durable;
static rd_registry_t *registry;

static void die(const char *what, const rd_error_t *err) {
  fprintf(stderr, "fuzz_checkpoint: %s: %s\n", what, err->msg);
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_durable_config(&cfg);
  cfg.learner_threads = 1;
  fuzz_durable_open(&cfg, &durable, &registry);
  return 0;
}

/* ImportWorkload's steps after the read (rpc/durability.c). */
static int import(rd_import_t *imp, const uint8_t *spec, size_t spec_len, rd_error_t *err) {
  Replayd__V1__WorkloadSpec *pb = replayd__v1__workload_spec__unpack(NULL, spec_len, spec);
  if (pb == NULL) return rd_error_set(err, RD_EINVAL, "the file's spec does not decode");
  rd_spec_pb_t s;
  memset(&s, 0, sizeof s);
  rd_workload_t *w = NULL;
  int rc = rd_spec_pb_decode(&cfg, pb, &s, err);
  if (rc == RD_OK) rc = rd_registry_register(registry, &s.spec, NULL, &w, NULL, err);
  if (rc == RD_OK) {
    rc = rd_import_apply(durable, imp, w, err);
    fuzz_table_probe(w);
    rd_error_t e2;
    rd_error_clear(&e2);
    if (rd_registry_delete(registry, w->id, &e2) != RD_OK) die("delete", &e2);
    rd_workload_unref(w);
  }
  rd_spec_pb_release(&s);
  replayd__v1__workload_spec__free_unpacked(pb, NULL);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rd_error_t err;
  rd_error_clear(&err);
  rd_import_t *imp = NULL;
  const uint8_t *spec = NULL;
  size_t spec_len = 0;
  int rc = rd_import_read(durable, data, size, &imp, &spec, &spec_len, &err);
  if (rc == RD_OK) {
    rc = import(imp, spec, spec_len, &err);
    rd_import_free(imp);
  }
  if (fuzz_verbose()) fprintf(stderr, "fuzz_checkpoint: %s\n", rc == RD_OK ? "imported" : err.msg);
  if (rc != RD_OK && err.msg[0] == '\0') __builtin_trap(); /* a refusal says why */
  if (rc != RD_OK && err.code != rc) __builtin_trap();    /* and with its own code */
  return 0;
}
