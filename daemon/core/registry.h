/* registry.h - the workloads this server holds, by id.
 *
 * The registry creates workloads (workload.h) from specs
 * (workload_spec.h), persists them in the store before publishing them,
 * lists and deletes them, and brings them back at start. It owns them;
 * callers borrow one with rd_registry_get (a reference) and give it back
 * with rd_workload_unref, so a workload deleted while a call is using it
 * is freed only when that call is done.
 */
#ifndef RD_REGISTRY_H
#define RD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pipeline.h"
#include "placement.h"
#include "rd_error.h"
#include "store.h"
#include "table.h"
#include "tenant.h"
#include "workload.h"

typedef struct rd_registry rd_registry_t;

int rd_registry_create(rd_registry_t **out, const rd_config_t *cfg, rd_store_t *store,
                       rd_error_t *err);
void rd_registry_destroy(rd_registry_t *r);

/* Checkpoints, restore and journals (durable.h) for the workloads from now
 * on: registrations attach to it, restore restores through it, deletes
 * remove their files. NULL (the default): nothing is checkpointed. */
struct rd_durable;
void rd_registry_set_durable(rd_registry_t *r, struct rd_durable *d);

/* Called after every registration (deleted 0) and deletion (deleted 1)
 * of workload w, outside the registry's locks, on the caller's thread:
 * the re-mapper's kick (remapper.h). NULL (the default): nothing. */
typedef void (*rd_registry_change_fn)(void *arg, int deleted, const rd_workload_t *w);
void rd_registry_set_on_change(rd_registry_t *r, rd_registry_change_fn fn, void *arg);

/* The server configuration the registry applies (its copy). */
const rd_config_t *rd_registry_config(const rd_registry_t *r);

/* Resolve spec (rd_workload_spec_resolve) with this server's limits, then
 * check what depends on what is registered (workload count, memory),
 * create the workload with its placement (copied; NULL for none), store
 * spec->stored and publish it. *out (may be NULL) receives it with one
 * reference held; token_out (may be NULL; RD_WORKLOAD_TOKEN_LEN + 1
 * bytes) its new token, the only copy: the workload and the store keep
 * its hash (secrets.h). Errors: RD_EINVAL (a bad spec, naming the field),
 * RD_ETOOBIG (a server limit), RD_ENOMEM, RD_ESTORE (the store write
 * failed and nothing was registered). */
int rd_registry_register(rd_registry_t *r, const rd_workload_spec_t *spec,
                         const rd_placement_t *placement, rd_workload_t **out,
                         char *token_out, rd_error_t *err);

/* rd_registry_register for an owner: tenant (tenant.h; NULL: the default
 * tenant) must admit the workload (its quota: RD_ETOOBIG naming the limit,
 * before the server's limits), and owns it once registered; the ownership
 * is stored with the workload. */
int rd_registry_register_as(rd_registry_t *r, rd_tenant_t *tenant,
                            const rd_workload_spec_t *spec, const rd_placement_t *placement,
                            rd_workload_t **out, char *token_out, rd_error_t *err);

/* The admission check alone (tenant's quota, then the server's workload
 * count and memory) for a resolved configuration, so a registration that
 * cannot fit is refused before it is profiled and placed;
 * rd_registry_register_as checks again under the same lock as it commits. */
int rd_registry_admit(rd_registry_t *r, rd_tenant_t *tenant, const rd_workload_config_t *wc,
                      rd_error_t *err);

/* The server's tenants (owned by the registry, read from its store). */
rd_tenants_t *rd_registry_tenants(rd_registry_t *r);
/* rd_tenants_remove serialized with admissions. */
int rd_registry_remove_tenant(rd_registry_t *r, const char *name, rd_error_t *err);

/* Validate spec as rd_registry_register does (without the limits that
 * depend on what is registered) and return its configuration. */
int rd_registry_spec_config(rd_registry_t *r, const rd_workload_spec_t *spec,
                            rd_workload_config_t *out, rd_error_t *err);

/* Called by rd_registry_restore for each stored workload with a learner:
 * fill *out and return RD_OK to restore it with a placement (the daemon
 * recomputes it from stored profiles only), or an error for none. */
typedef int (*rd_placer_fn)(void *arg, const rd_table_config_t *tc,
                            const rd_pipeline_config_t *pc, rd_placement_t *out);
void rd_registry_set_restore_placer(rd_registry_t *r, rd_placer_fn fn, void *arg);

/* Reads a stored spec's bytes back (the layer that wrote them: rpc/spec_pb.h).
 * decode fills *spec, which may point into memory it hands back in *hold
 * until release(hold); spec->stored is what to keep storing (the bytes
 * read, or them normalised anew). An error skips the workload with its
 * message ("its spec does not decode", a limit it no longer fits). */
typedef struct {
  int (*decode)(void *arg, const uint8_t *bytes, size_t len, rd_workload_spec_t *spec,
                void **hold, rd_error_t *err);
  void (*release)(void *hold);
  void *arg;
} rd_spec_decoder_t;

/* Recreate every stored workload (empty) through dec; *restored (may be
 * NULL) receives how many came back. Logs and skips a stored spec that no
 * longer decodes or validates (it stays stored: fixing the config brings
 * it back). A store that cannot be read (RD_ESTORE, ...) restores nothing
 * and is returned: the daemon stops rather than serve fewer workloads than
 * it stored. */
int rd_registry_restore(rd_registry_t *r, const rd_spec_decoder_t *dec, size_t *restored,
                        rd_error_t *err);

/* A referenced workload, or NULL if there is none with this id. */
rd_workload_t *rd_registry_get(rd_registry_t *r, const char *id);

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
/* rd_registry_list_after of owner's workloads only (NULL: everyone's). */
size_t rd_registry_list_owned_after(rd_registry_t *r, const rd_tenant_t *owner,
                                    const char *after, rd_workload_t **out, size_t max);
size_t rd_registry_count(rd_registry_t *r);
/* Memory charged against --max-memory now (moves' reservations included). */
uint64_t rd_registry_charged(rd_registry_t *r);
size_t rd_registry_count_owned(rd_registry_t *r, const rd_tenant_t *owner);

/* load[i] = the pipeline threads of live workloads pinned to cpus[i]
 * (cores.h: a learner pin counts once per CPU it names, as does a sampler
 * pin), for rd_cores_assign. Thread-safe. */
void rd_registry_cpu_load(rd_registry_t *r, const int *cpus, size_t n, uint32_t *load);

/* A live move of w (workload_move.h, the re-mapper's) to a placement that
 * will hold `bytes` of memory and `gpu_bytes` of GPU memory
 * (rd_workload_charge_for). While it runs both copies exist, so the new
 * one must fit the server's --max-memory beside everything charged now;
 * the tenant's quotas must hold what the workload grows by. Reserves both;
 * RD_ETOOBIG naming the limit (nothing reserved: do not move). */
int rd_registry_move_begin(rd_registry_t *r, rd_workload_t *w, uint64_t bytes,
                           uint64_t gpu_bytes, rd_error_t *err);
/* The move begun with `bytes`/`gpu_bytes` is over (done, cut short or
 * failed): the reservation is released and w is charged what it holds
 * now, `now_bytes`/`now_gpu` (its placement's after the move). A workload
 * deleted meanwhile was uncharged by the delete: only the reservation
 * goes. */
void rd_registry_move_end(rd_registry_t *r, rd_workload_t *w, uint64_t bytes, uint64_t gpu_bytes,
                          uint64_t now_bytes, uint64_t now_gpu);

/* Stop every workload's hosted learner (shutdown: before the server stops,
 * so pending TrainStep calls end instead of holding the drain). */
void rd_registry_stop_learners(rd_registry_t *r);

/* The server drains: every call waiting for a rate limiter ends
 * (RD_ECANCELED) and no call waits from now on (rate_limiter.h). */
void rd_registry_drain_waits(rd_registry_t *r);

/* Change w's rate limiter (rd_workload_set_limiter; NULL: none) and store
 * its spec as `stored` (the workload's spec with the new limiter, the
 * decoding layer's bytes; NULL: nothing is stored), so a restart brings it
 * back. The store first: when it fails, nothing changes (RD_ESTORE).
 * RD_ENOTFOUND for a deleted workload; RD_EINVAL, RD_ESTATE as
 * rd_workload_set_limiter. */
int rd_registry_set_limiter(rd_registry_t *r, rd_workload_t *w, const rd_limiter_config_t *cfg,
                            const uint8_t *stored, size_t stored_len, rd_error_t *err);

#endif
