/* fuzz_table.h - the durable harnesses' (fuzz_checkpoint, fuzz_journal)
 * shared parts: the server they restore into, and, after a harness
 * restored a table from a file, using it as a client would, trapping on
 * what a consistent table never does. */
#ifndef RD_FUZZ_TABLE_H
#define RD_FUZZ_TABLE_H

#include "config.h"
#include "durable.h"
#include "registry.h"
#include "workload.h"

/* The server's config: defaults, logging off (refusals are logged: expected
 * here), the state and checkpoint directories in the scratch directory,
 * and limits that keep one input fast (4096 items, 64 MiB, 4 workloads).
 * A harness changes what it needs before fuzz_durable_open. */
void fuzz_durable_config(rd_config_t *cfg);

/* Whether FUZZ_VERBOSE is set: then a harness reports each input's
 * outcome on stderr (do the seeds import, or replay?). */
int fuzz_verbose(void);

/* A durable store and a registry (no SQLite store) made with cfg, which
 * must outlive them; aborts when either cannot be made. Both are
 * destroyed before the scratch directory is removed at exit. */
void fuzz_durable_open(const rd_config_t *cfg, rd_durable_t **durable, rd_registry_t **registry);

/* Under w's lock: sample a few items, insert a row and update its
 * priority, sample again. A refusal must say why; a sample must name live
 * keys with probabilities in (0, 1] and finite weights. */
void fuzz_table_probe(rd_workload_t *w);

#endif
