/* fuzz_table.h - after a harness restored a table from a file: use it as
 * a client would, and trap on what a consistent table never does. */
#ifndef RD_FUZZ_TABLE_H
#define RD_FUZZ_TABLE_H

#include "workload.h"

/* Under w's lock: sample a few items, insert a row and update its
 * priority, sample again. A refusal must say why; a sample must name live
 * keys with probabilities in (0, 1] and finite weights. */
void fuzz_table_probe(rd_workload_t *w);

#endif
