/* remapper.h - issue 24 item 4 applied: every registration and deletion
 * re-maps the live hosted learners together (dse/remap.h, Algorithm 3
 * over the set, with hysteresis) and moves the ones the decision moves,
 * live (workload_move.h).
 *
 * The registry calls rd_remapper_kick (its change hook, on the calling
 * thread); the work runs on the re-mapper's own job queue (jobs.h: one
 * thread, a bounded wait list), never on a call's thread. A job re-maps
 * the set as it is when the job runs, so a kick the full queue refuses
 * loses only its reason (logged): a waiting job covers the set.
 *
 * The set: every workload with a mapped placement and a pipeline, in
 * registration order, each with its tenant's weight. One that has no
 * placement event yet (just registered) enters unplaced: it takes its
 * best response to the others (it is "registered beside them"), moving
 * at once if that is not where it was placed alone. The others move
 * only when the decision is adopted (the set's predicted GPS gains more
 * than the threshold); when a proposal is refused, each placed workload
 * it would have moved gets a "kept (hysteresis)" event.
 */
#ifndef RD_REMAPPER_H
#define RD_REMAPPER_H

#include <stdint.h>

#include "rd_error.h"
#include "registry.h"

typedef struct rd_remapper rd_remapper_t;

/* A re-mapper over r's workloads with threshold (relative, >= 0: 0.10 is
 * ten percent); not yet hooked into r (rd_remapper_attach). */
int rd_remapper_create(rd_remapper_t **out, rd_registry_t *r, double threshold,
                       rd_error_t *err);
/* Unhook from the registry, cancel the waiting jobs, wait for the running
 * one, free. NULL is fine. */
void rd_remapper_destroy(rd_remapper_t *m);

/* Hook into the registry: from now on every change kicks a re-mapping. */
void rd_remapper_attach(rd_remapper_t *m);

/* The registry's change hook (arg: the re-mapper). */
void rd_remapper_kick(void *arg, int deleted, const rd_workload_t *w);

/* Re-map now, on this thread (the job's body; tests). reason says why,
 * e.g. "register of \"a\"". *moves (may be NULL) receives the moves done. */
int rd_remapper_run(rd_remapper_t *m, const char *reason, uint32_t *moves, rd_error_t *err);

/* Re-mappings done (jobs finished) so far, and jobs running or waiting. */
uint64_t rd_remapper_done(rd_remapper_t *m);
uint32_t rd_remapper_pending(rd_remapper_t *m);

#endif
