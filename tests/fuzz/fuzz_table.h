/* fuzz_table.h - after a harness restored a table from a file: use it as
 * a client would, and trap on what a consistent table never does. */
#ifndef RD_FUZZ_TABLE_H
#define RD_FUZZ_TABLE_H

#include "workload.h"

/* Sample a few items from w's table (under its lock): a refusal must say
 * why; a sample must name live keys with finite, positive probabilities. */
void fuzz_table_probe(rd_workload_t *w);

#endif
