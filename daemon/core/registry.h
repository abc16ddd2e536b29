/* registry.h - the workloads this server holds, by id.
 *
 * A workload is a registered spec plus its state: a prioritized table
 * (backends/cpu/table.h), its lock, its secret token. The registry owns
 * them; callers borrow one with rd_registry_get (a reference) and give it
 * back with rd_workload_unref, so a workload deleted while a call is using
 * it is freed only when that call is done.
 */
#ifndef RD_REGISTRY_H
#define RD_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pipeline.h"
#include "placement.h"
#include "rd_error.h"
#include "replayd.pb-c.h"
#include "store.h"
#include "table.h"

#define RD_WORKLOAD_ID_LEN 32    /* hex characters */
#define RD_WORKLOAD_TOKEN_LEN 64 /* hex characters */

typedef struct rd_workload {
  char id[RD_WORKLOAD_ID_LEN + 1];
  char token[RD_WORKLOAD_TOKEN_LEN + 1];
  int64_t created_unix;
  Replayd__V1__WorkloadSpec *spec; /* normalised (defaults filled); owned */
  double default_beta;
  rd_table_t table;
  pthread_mutex_t lock;            /* serializes every table call */
  rd_pipeline_t *pipeline;         /* hosted learner, or NULL */
  uint64_t charge;                 /* bytes counted against --max-memory */
  rd_placement_t *placement;       /* a hosted learner's mapping (placement.h), or NULL;
                                      set before the workload is published, then constant */
  atomic_int refs;
  atomic_bool deleted;
} rd_workload_t;

typedef struct rd_registry rd_registry_t;

int rd_registry_create(rd_registry_t **out, const rd_config_t *cfg, rd_store_t *store,
                       rd_error_t *err);
void rd_registry_destroy(rd_registry_t *r);

/* Validate spec against the table rules and the server limits (capacity,
 * max_batch, memory, workload count), fill defaults, create the table,
 * persist it, and return it with one reference held. Errors: RD_EINVAL (bad
 * spec, message names the field), RD_ETOOBIG (a server limit), RD_ENOMEM.
 * Also RD_ESTORE (store.h): the store write failed and nothing was
 * registered. out may be NULL (no reference is handed back then). */
int rd_registry_register(rd_registry_t *r, const Replayd__V1__WorkloadSpec *spec,
                         rd_workload_t **out, rd_error_t *err);

/* The same with the workload's placement (copied; NULL for none). */
int rd_registry_register_placed(rd_registry_t *r, const Replayd__V1__WorkloadSpec *spec,
                                const rd_placement_t *placement, rd_workload_t **out,
                                rd_error_t *err);

/* Validate a spec as rd_registry_register does (without the limits that
 * depend on what is registered) and return its table config and, when it
 * has a learner (*has_learner = 1), its pipeline config. */
int rd_registry_spec_config(rd_registry_t *r, const Replayd__V1__WorkloadSpec *spec,
                            rd_table_config_t *tc, rd_pipeline_config_t *pc, int *has_learner,
                            rd_error_t *err);

/* Called by rd_registry_restore for each stored workload with a learner:
 * fill *out and return RD_OK to restore it with a placement (the daemon
 * recomputes it from stored profiles only), or an error for none. */
typedef int (*rd_placer_fn)(void *arg, const rd_table_config_t *tc,
                            const rd_pipeline_config_t *pc, rd_placement_t *out);
void rd_registry_set_restore_placer(rd_registry_t *r, rd_placer_fn fn, void *arg);

/* Recreate every stored workload (empty); *restored (may be NULL) receives
 * how many came back. Logs and skips a stored spec that no longer
 * validates (it stays stored: fixing the config brings it back). A store
 * that cannot be read (RD_ESTORE, ...) restores nothing and is returned:
 * the daemon stops rather than serve fewer workloads than it stored. */
int rd_registry_restore(rd_registry_t *r, size_t *restored, rd_error_t *err);

/* A referenced workload, or NULL if there is none with this id. */
rd_workload_t *rd_registry_get(rd_registry_t *r, const char *id);
void rd_workload_unref(rd_workload_t *w);

/* Remove from the registry and the store. RD_ENOTFOUND if absent; RD_ESTORE
 * if the store could not delete it (it stays registered then). Callers still
 * holding a reference keep a valid workload whose `deleted` is now true. */
int rd_registry_delete(rd_registry_t *r, const char *id, rd_error_t *err);

/* References to up to max workloads, in creation order; returns the count.
 * Unref each. */
size_t rd_registry_list(rd_registry_t *r, rd_workload_t **out, size_t max);
/* References to up to max workloads whose id sorts after `after` (strcmp;
 * NULL or "" = from the first), in id order; returns the count. Unref
 * each. A page of a keyset listing (paging.h): the next page starts after
 * the last id returned, so workloads registered or deleted between pages
 * never make one that stays registered appear twice or not at all. */
size_t rd_registry_list_after(rd_registry_t *r, const char *after, rd_workload_t **out,
                              size_t max);
size_t rd_registry_count(rd_registry_t *r);

/* load[i] = the pipeline threads of live workloads pinned to cpus[i]
 * (cores.h: a learner pin counts once per CPU it names, as does a sampler
 * pin), for rd_cores_assign. Thread-safe. */
void rd_registry_cpu_load(rd_registry_t *r, const int *cpus, size_t n, uint32_t *load);

/* Stop every workload's hosted learner (shutdown: before the server stops,
 * so pending TrainStep calls end instead of holding the drain). */
void rd_registry_stop_learners(rd_registry_t *r);

/* Constant-time token comparison. */
int rd_workload_token_ok(const rd_workload_t *w, const char *token, size_t len);

/* Fill a counters message from the table (caller holds no lock). */
void rd_workload_counters(rd_workload_t *w, Replayd__V1__WorkloadCounters *out);

#endif
