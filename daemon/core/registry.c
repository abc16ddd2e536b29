/* registry.c - the workloads this server holds, by id.
 *
 * Locks, outermost first:
 *   mutate_mu  serializes every change (register, delete, restore), so the
 *              limit checks, the store write and the publication of one
 *              change cannot interleave with another's. It is held across
 *              SQLite I/O and table allocation, which only other changes
 *              wait for.
 *   map_lock   a rwlock over the two arrays and the memory total. Lookups
 *              (every data call makes one) take it shared and only for a
 *              binary search and a reference increment; changes take it
 *              exclusively for a memmove.
 *   w->lock    one workload's table; never taken while holding the others.
 *
 * Lifetime: the registry holds one reference to each workload it lists;
 * every rd_registry_get/list adds one. Delete removes the workload from the
 * arrays and the store, marks it deleted and drops the registry's
 * reference; whoever drops the last one frees it, so a call that is using
 * a workload when it is deleted finishes on valid memory.
 */
#include "registry.h"
#include "durable.h"
#include "secrets.h"
#include "tenant.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "rd_sorted.h"

struct rd_registry {
  rd_config_t cfg;
  rd_store_t *store;          /* NULL: nothing persists */
  pthread_mutex_t mutate_mu;
  pthread_rwlock_t map_lock;
  rd_workload_t **by_id;      /* sorted by id; cfg.max_workloads slots */
  rd_workload_t **order;      /* creation order; cfg.max_workloads slots */
  size_t n;
  /* Memory charged for the workloads held (and moves' reservations):
   * changed under the map's write lock, read without it by
   * rd_registry_charged (a gauge). */
  _Atomic uint64_t bytes;
  rd_placer_fn placer;        /* restore: placements from stored profiles */
  void *placer_arg;
  rd_tenants_t *tenants;      /* the owners (tenant.h); each workload references one */
  rd_durable_t *durable;      /* checkpoints (durable.h), or NULL */
  rd_limiter_bounds_t bounds; /* the waiting calls of every workload's rate limiter */
  rd_registry_change_fn on_change; /* under mutate_mu */
  void *on_change_arg;
};

void rd_registry_set_on_change(rd_registry_t *r, rd_registry_change_fn fn, void *arg) {
  pthread_mutex_lock(&r->mutate_mu);
  r->on_change = fn;
  r->on_change_arg = arg;
  pthread_mutex_unlock(&r->mutate_mu);
}

void rd_registry_set_durable(rd_registry_t *r, rd_durable_t *d) {
  pthread_mutex_lock(&r->mutate_mu);
  r->durable = d;
  pthread_mutex_unlock(&r->mutate_mu);
}

/* Where a placed workload runs: the learner's device and backend (a
 * failing GPU or FPGA learner falls back inside the pipeline: pipeline.h)
 * and the table's replay module (the FPGA C-simulation's or an XRT
 * board's when the RMM was placed there; rd_workload_new falls back to the
 * CPU tree if it cannot be created). */
static void apply_placement(rd_workload_config_t *wc, const rd_placement_t *pl) {
  wc->learner.learner_kind = pl->learner_kind;
  wc->learner.learner_device = pl->learner_device;
  wc->learner.learner_ops = pl->learner_ops;
  wc->learner.learner_pin = pl->learner_pin;
  wc->learner.sampler_pin = pl->sampler_pin;
  wc->table.rmm = pl->rmm_ops;
  wc->table.storage = pl->storage_ops;
}

/* ------------------------------------------------------------------ */
/* Workloads                                                           */
/* ------------------------------------------------------------------ */

static int random_hex(char *out, size_t hex_len, rd_error_t *err) {
  return rd_random_hex(out, hex_len, RD_ENOMEM, err);
}

static bool is_hex_id(const char *s, size_t want) {
  if (s == NULL || strnlen(s, want + 1) != want) return false;
  for (size_t i = 0; i < want; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

/* ------------------------------------------------------------------ */
/* The map                                                             */
/* ------------------------------------------------------------------ */

static const char *workload_id(const void *w) { return ((const rd_workload_t *)w)->id; }

/* Index of id in by_id, or the insertion point as -(pos + 1). Caller holds
 * map_lock (either way) or mutate_mu. */
static ptrdiff_t find_index(const rd_registry_t *r, const char *id) {
  return rd_sorted_find((const void *const *)r->by_id, r->n, id, workload_id);
}

/* Caller holds mutate_mu and has checked the count. */
static void publish(rd_registry_t *r, rd_workload_t *w) {
  pthread_rwlock_wrlock(&r->map_lock);
  ptrdiff_t at = find_index(r, w->id);
  size_t pos = (size_t)(-at - 1); /* absent: ids were checked unique */
  memmove(&r->by_id[pos + 1], &r->by_id[pos], (r->n - pos) * sizeof *r->by_id);
  r->by_id[pos] = w;
  r->order[r->n] = w;
  r->n++;
  r->bytes += w->charge;
  pthread_rwlock_unlock(&r->map_lock);
  rd_tenant_charge(w->tenant, +1, w->charge);
  rd_tenant_charge_gpu(w->tenant, +1, w->gpu_charge);
}

/* Caller holds mutate_mu; w is listed. */
static void unpublish(rd_registry_t *r, rd_workload_t *w) {
  pthread_rwlock_wrlock(&r->map_lock);
  size_t pos = (size_t)find_index(r, w->id);
  memmove(&r->by_id[pos], &r->by_id[pos + 1], (r->n - pos - 1) * sizeof *r->by_id);
  for (size_t i = 0; i < r->n; i++)
    if (r->order[i] == w) {
      memmove(&r->order[i], &r->order[i + 1], (r->n - i - 1) * sizeof *r->order);
      break;
    }
  r->n--;
  r->bytes -= w->charge;
  pthread_rwlock_unlock(&r->map_lock);
  rd_tenant_charge(w->tenant, -1, w->charge);
  rd_tenant_charge_gpu(w->tenant, -1, w->gpu_charge);
}

/* The server limits a new workload must fit. Caller holds mutate_mu (all
 * writers of n and bytes do, so they can be read without map_lock). */
static int check_limits(const rd_registry_t *r, rd_tenant_t *tenant,
                        const rd_workload_config_t *wc, rd_error_t *err) {
  uint64_t tree, rows, scratch, learner;
  /* The tenant's quota first: the more specific limit is the one to name. */
  int rc = tenant != NULL
               ? rd_tenant_admit(tenant, rd_workload_config_charge(wc, &tree, &rows, &scratch,
                                                                   &learner), err)
               : RD_OK;
  /* GPU memory where the placement uses a GPU (the tenant's only: the
   * server has no GPU-memory limit of its own). */
  if (rc == RD_OK && tenant != NULL)
    rc = rd_tenant_admit_gpu(tenant, rd_workload_config_gpu_bytes(wc), err);
  if (rc != RD_OK) return rc;
  if (r->n >= r->cfg.max_workloads)
    return rd_error_set(err, RD_ETOOBIG,
                        "this server already holds %zu workloads, its --max-workloads limit; "
                        "delete one first",
                        r->n);
  uint64_t need = rd_workload_config_charge(wc, &tree, &rows, &scratch, &learner);
  uint64_t max = r->cfg.max_memory_bytes;
  uint64_t free_bytes = r->bytes < max ? max - r->bytes : 0;
  if (need > free_bytes)
    return rd_error_set(err, RD_ETOOBIG,
                        "this workload needs %" PRIu64 " bytes (tree %" PRIu64 ", rows %" PRIu64
                        ", scratch %" PRIu64 ", learner %" PRIu64 ") but only %" PRIu64
                        " of this server's --max-memory %" PRIu64 " are free",
                        need, tree, rows, scratch, learner, free_bytes, max);
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Public API                                                          */
/* ------------------------------------------------------------------ */

int rd_registry_create(rd_registry_t **out, const rd_config_t *cfg, rd_store_t *store,
                       rd_error_t *err) {
  *out = NULL;
  if (cfg->max_workloads == 0 || cfg->max_workloads > 4096)
    return rd_error_set(err, RD_EINVAL, "max_workloads %u is outside [1, 4096]",
                        cfg->max_workloads);
  rd_registry_t *r = calloc(1, sizeof *r);
  if (r == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory creating the registry");
  r->cfg = *cfg;
  r->store = store;
  r->by_id = calloc(cfg->max_workloads, sizeof *r->by_id);
  r->order = calloc(cfg->max_workloads, sizeof *r->order);
  if (r->by_id == NULL || r->order == NULL) {
    free(r->by_id);
    free(r->order);
    free(r);
    return rd_error_set(err, RD_ENOMEM, "out of memory creating the registry");
  }
  int rc = rd_tenants_open(&r->tenants, store, err);
  if (rc != RD_OK) {
    free(r->by_id);
    free(r->order);
    free(r);
    return rc;
  }
  pthread_mutex_init(&r->mutate_mu, NULL);
  pthread_rwlock_init(&r->map_lock, NULL);
  rd_limiter_bounds_init(&r->bounds, cfg->max_waiting_calls, cfg->max_waiting_per_workload);
  *out = r;
  return RD_OK;
}

void rd_registry_destroy(rd_registry_t *r) {
  if (r == NULL) return;
  /* Drop the registry's references; a workload still borrowed by a caller
   * lives until that caller's unref (it does not point back here). */
  for (size_t i = 0; i < r->n; i++) {
    rd_workload_t *w = r->order[i];
    pthread_mutex_lock(&w->lock);
    w->limiter.bounds = NULL; /* the bounds go with the registry */
    pthread_mutex_unlock(&w->lock);
    rd_workload_unref(w);
  }
  free(r->by_id);
  free(r->order);
  rd_tenants_close(r->tenants);
  pthread_rwlock_destroy(&r->map_lock);
  pthread_mutex_destroy(&r->mutate_mu);
  free(r);
}

const rd_config_t *rd_registry_config(const rd_registry_t *r) { return &r->cfg; }

static int persist(rd_registry_t *r, const rd_workload_t *w, rd_error_t *err) {
  if (r->store == NULL) return RD_OK;
  /* The owner's row first: a crash between the two leaves a row naming a
   * workload that never was (ids are random: harmless), never a stored
   * workload restored into the wrong tenant. */
  int rc = rd_tenants_put_owner(r->tenants, w->id, w->tenant->name, err);
  if (rc != RD_OK) return rc;
  rd_stored_workload_t sw;
  memset(&sw, 0, sizeof sw);
  memcpy(sw.id, w->id, sizeof w->id);
  rd_token_hash_format(w->token_hash, sw.token); /* the hash, never the token */
  sw.created_unix = w->created_unix;
  sw.spec = w->spec;
  sw.spec_len = w->spec_len;
  return rd_store_put_workload(r->store, &sw, err);
}

int rd_registry_spec_config(rd_registry_t *r, const rd_workload_spec_t *spec,
                            rd_workload_config_t *out, rd_error_t *err) {
  return rd_workload_spec_resolve(&r->cfg, spec, out, err);
}

void rd_registry_set_restore_placer(rd_registry_t *r, rd_placer_fn fn, void *arg) {
  pthread_mutex_lock(&r->mutate_mu);
  r->placer = fn;
  r->placer_arg = arg;
  pthread_mutex_unlock(&r->mutate_mu);
}

/* Build a workload of wc (placed by pl, which it takes) within the limits.
 * Caller holds mutate_mu. */
static int build(rd_registry_t *r, rd_tenant_t *tenant, rd_workload_config_t *wc,
                 rd_placement_t *pl, const rd_workload_spec_t *spec, const char *id,
                 const uint8_t token_hash[RD_TOKEN_HASH_LEN], int64_t created,
                 rd_workload_t **out, rd_error_t *err) {
  const rd_rmm_ops_t *placed_rmm = wc->table.rmm;
  const rd_storage_ops_t *placed_storage = wc->table.storage;
  /* Its learner's share of the device, in its owner's group (share.h). */
  wc->learner.share_group = r->cfg.learner_shares ? tenant : NULL;
  wc->learner.share_conserving = r->cfg.learner_shares == 2;
  wc->learner.share_weight = rd_tenant_weight(tenant);
  rd_workload_t *w;
  rd_wl_durable_t *wd = NULL; /* before the pipeline: it keeps weight versions there */
  int rc = rd_durable_prepare(r->durable, id, wc, &wd, err);
  if (rc == RD_OK)
    rc = rd_workload_new(wc, pl, spec->name, spec->stored, spec->stored_len, id, token_hash,
                         created, r->cfg.max_message_bytes, &w, err);
  if (rc) {
    rd_durable_release(wd);
    free(pl);
    return rc;
  }
  w->durable = wd;
  rd_tenant_ref(tenant);
  w->tenant = tenant;
  /* The CPU tree instead of a module it could not create: charge what it holds. */
  if ((wc->table.rmm != placed_rmm || wc->table.storage != placed_storage) &&
      (rc = check_limits(r, NULL, wc, err)) != RD_OK) {
    free(pl);
    rd_workload_free(w);
    return rc;
  }
  w->placement = pl;
  w->gpu_charge = rd_workload_config_gpu_bytes(wc); /* what it holds after any fallback */
  w->limiter.bounds = &r->bounds; /* before anyone can see it */
  *out = w;
  return RD_OK;
}

static int register_owned(rd_registry_t *r, rd_tenant_t *owner, const rd_workload_spec_t *spec,
                          const rd_placement_t *placement, rd_workload_t **out,
                          char *token_out, rd_error_t *err);

int rd_registry_register(rd_registry_t *r, const rd_workload_spec_t *spec,
                         const rd_placement_t *placement, rd_workload_t **out,
                         char *token_out, rd_error_t *err) {
  return rd_registry_register_as(r, NULL, spec, placement, out, token_out, err);
}

int rd_registry_register_as(rd_registry_t *r, rd_tenant_t *tenant,
                            const rd_workload_spec_t *spec, const rd_placement_t *placement,
                            rd_workload_t **out, char *token_out, rd_error_t *err) {
  if (out) *out = NULL;
  if (token_out) token_out[0] = '\0';
  rd_tenant_t *owner = tenant != NULL ? tenant : rd_tenants_default(r->tenants);
  if (tenant != NULL) rd_tenant_ref(owner);
  int rc = register_owned(r, owner, spec, placement, out, token_out, err);
  rd_tenant_unref(owner);
  return rc;
}

static int register_owned(rd_registry_t *r, rd_tenant_t *owner, const rd_workload_spec_t *spec,
                          const rd_placement_t *placement, rd_workload_t **out,
                          char *token_out, rd_error_t *err) {
  rd_workload_config_t wc;
  int rc = rd_workload_spec_resolve(&r->cfg, spec, &wc, err);
  if (rc) return rc;
  rd_placement_t *pl = NULL;
  if (placement != NULL) {
    pl = malloc(sizeof *pl);
    if (pl == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the placement");
    *pl = *placement;
    apply_placement(&wc, pl);
  }

  /* The token leaves this function only through token_out: the
   * workload and the store keep its hash. */
  char id[RD_WORKLOAD_ID_LEN + 1], token[RD_WORKLOAD_TOKEN_LEN + 1] = "";
  pthread_mutex_lock(&r->mutate_mu);
  rd_workload_t *w = NULL;
  if ((rc = check_limits(r, owner, &wc, err)) != RD_OK) goto out;

  /* 128 random bits: a collision is never expected, but costs one lookup. */
  do {
    if ((rc = random_hex(id, RD_WORKLOAD_ID_LEN, err)) != RD_OK) goto out;
  } while (find_index(r, id) >= 0);
  if ((rc = random_hex(token, RD_WORKLOAD_TOKEN_LEN, err)) != RD_OK) goto out;
  uint8_t hash[RD_TOKEN_HASH_LEN];
  rd_token_hash(token, RD_WORKLOAD_TOKEN_LEN, hash);

  rc = build(r, owner, &wc, pl, spec, id, hash, (int64_t)time(NULL), &w, err);
  pl = NULL; /* build took it */
  if (rc) goto out;
  /* Its checkpoint directory and journal, before anything is stored. */
  if ((rc = rd_durable_attach(r->durable, w, err)) != RD_OK) {
    rd_workload_free(w);
    goto out;
  }
  /* Durable before visible: a client never holds an id that a restart
   * would forget, and a failed write leaves nothing registered. */
  if ((rc = persist(r, w, err)) != RD_OK) {
    rd_durable_forget(r->durable, w);
    rd_workload_free(w);
    goto out;
  }
  if (out) atomic_fetch_add(&w->refs, 1);
  publish(r, w);
  if (out) *out = w;
  if (token_out) memcpy(token_out, token, sizeof token);
  /* Registration and deletion are logged by the handlers, which know the
   * call; the registry logs only what no call does (restore). */
out:;
  rd_registry_change_fn changed = rc == RD_OK ? r->on_change : NULL;
  void *changed_arg = r->on_change_arg;
  if (changed != NULL) atomic_fetch_add(&w->refs, 1);
  pthread_mutex_unlock(&r->mutate_mu);
  rd_secret_wipe(token, sizeof token);
  free(pl);
  if (changed != NULL) {
    changed(changed_arg, 0, w);
    rd_workload_unref(w);
  }
  return rc;
}

/* The placement a restored workload with a learner gets from the placer
 * (stored profiles only), or NULL. */
static rd_placement_t *restore_placement(rd_registry_t *r, const rd_stored_workload_t *sw,
                                         rd_workload_config_t *wc) {
  if (!wc->has_learner || r->placer == NULL) return NULL;
  rd_placement_t *pl = malloc(sizeof *pl);
  if (pl != NULL && r->placer(r->placer_arg, &wc->table, &wc->learner, pl) == RD_OK) {
    apply_placement(wc, pl);
    return pl;
  }
  free(pl);
  rd_log_info("registry", "workload %s restored without a placement (no stored profiles "
              "for its shape)", sw->id);
  return NULL;
}

/* Bring back one stored workload. Caller holds mutate_mu. */
static bool restore_one(rd_registry_t *r, const rd_spec_decoder_t *dec,
                        const rd_stored_workload_t *sw) {
  rd_error_t err;
  rd_error_clear(&err);
  uint8_t hash[RD_TOKEN_HASH_LEN];
  if (!is_hex_id(sw->id, RD_WORKLOAD_ID_LEN) || rd_token_hash_parse(sw->token, hash) != RD_OK) {
    rd_log_warn("registry", "skipping a stored workload with a malformed id or token hash");
    return false;
  }
  if (find_index(r, sw->id) >= 0) {
    rd_log_warn("registry", "skipping stored workload %s: already registered", sw->id);
    return false;
  }
  rd_workload_spec_t spec;
  void *hold = NULL;
  rd_workload_config_t wc;
  rd_placement_t *pl = NULL;
  rd_workload_t *w = NULL;
  int rc = dec->decode(dec->arg, sw->spec, sw->spec_len, &spec, &hold, &err);
  if (rc == RD_OK) rc = rd_workload_spec_resolve(&r->cfg, &spec, &wc, &err);
  if (rc == RD_OK) rc = check_limits(r, NULL, &wc, &err);
  /* The placement first: it says where the learner runs. A replay module
   * placed off the CPU holds its own tree: charge that. */
  if (rc == RD_OK && (pl = restore_placement(r, sw, &wc)) != NULL &&
      (rc = check_limits(r, NULL, &wc, &err)) != RD_OK) {
    free(pl);
    pl = NULL;
  }
  /* Its owner as stored; a tenant's quota lowered since does not drop a
   * workload it already owned (only admissions check quotas). */
  rd_tenant_t *owner = rd_tenants_owner(r->tenants, sw->id);
  if (rc == RD_OK) {
    rc = build(r, owner, &wc, pl, &spec, sw->id, hash, sw->created_unix, &w, &err);
    pl = NULL; /* build took it */
  }
  rd_tenant_unref(owner);
  dec->release(hold);
  if (rc != RD_OK) {
    rd_log_warn("registry", "skipping stored workload %s: %s (it stays stored)", sw->id, err.msg);
    return false;
  }
  /* Its data, from its checkpoints and journal, before anyone can call. */
  if (r->durable != NULL) rd_durable_restore(r->durable, w);
  publish(r, w);
  rd_log_info("registry", "restored workload %s \"%s\" (%llu items): %u fields, capacity %u%s%s",
              w->id, w->name, (unsigned long long)rd_table_size(&w->table),
              wc.table.schema.n_fields, wc.table.capacity,
              w->placement != NULL ? "; " : "", w->placement != NULL ? w->placement->note : "");
  return true;
}

int rd_registry_restore(rd_registry_t *r, const rd_spec_decoder_t *dec, size_t *restored_out,
                        rd_error_t *err) {
  if (restored_out) *restored_out = 0;
  if (r->store == NULL) return RD_OK;
  if (dec == NULL || dec->decode == NULL || dec->release == NULL)
    return rd_error_set(err, RD_EINVAL, "restoring needs a decoder of stored specs");
  rd_stored_workload_t *v;
  size_t n;
  rd_error_t serr;
  rd_error_clear(&serr);
  /* Nothing is restored unless every row reads: serving some of the
   * stored workloads would look like a working daemon that lost others. */
  int rc = rd_store_list_workloads(r->store, &v, &n, &serr);
  if (rc != RD_OK)
    return rd_error_set(err, rc, "cannot read the stored workloads: %s", serr.msg);
  size_t restored = 0;
  pthread_mutex_lock(&r->mutate_mu);
  for (size_t i = 0; i < n; i++) restored += restore_one(r, dec, &v[i]);
  pthread_mutex_unlock(&r->mutate_mu);
  rd_store_free_workloads(v, n);
  if (n > 0)
    rd_log_info("registry", "restored %zu of %zu stored workloads", restored, n);
  if (restored_out) *restored_out = restored;
  return RD_OK;
}

rd_workload_t *rd_registry_get(rd_registry_t *r, const char *id) {
  if (id == NULL || strnlen(id, RD_WORKLOAD_ID_LEN + 1) != RD_WORKLOAD_ID_LEN) return NULL;
  rd_workload_t *w = NULL;
  pthread_rwlock_rdlock(&r->map_lock);
  ptrdiff_t at = find_index(r, id);
  if (at >= 0) {
    w = r->by_id[at];
    atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
  }
  pthread_rwlock_unlock(&r->map_lock);
  return w;
}

/* ---- Moves (the re-mapper's) ---- */

static uint64_t growth(uint64_t now, uint64_t then) { return then > now ? then - now : 0; }

/* w is still listed. Caller holds mutate_mu. */
static bool listed(const rd_registry_t *r, const rd_workload_t *w) {
  ptrdiff_t at = find_index(r, w->id);
  return at >= 0 && r->by_id[at] == w;
}

int rd_registry_move_begin(rd_registry_t *r, rd_workload_t *w, uint64_t bytes,
                           uint64_t gpu_bytes, rd_error_t *err) {
  pthread_mutex_lock(&r->mutate_mu);
  const uint64_t more = growth(w->charge, bytes), more_gpu = growth(w->gpu_charge, gpu_bytes);
  const uint64_t max = r->cfg.max_memory_bytes;
  const uint64_t free_bytes = r->bytes < max ? max - r->bytes : 0;
  int rc = RD_OK;
  if (!listed(r, w))
    rc = rd_error_set(err, RD_ENOTFOUND, "workload %s was deleted", w->id);
  else if (bytes > free_bytes)
    rc = rd_error_set(err, RD_ETOOBIG, "this server's --max-memory: the move needs %" PRIu64
                      " bytes while both copies exist, %" PRIu64 " of %" PRIu64 " free", bytes,
                      free_bytes, max);
  else if (w->tenant != NULL)
    rc = rd_tenant_admit_growth(w->tenant, more, more_gpu, err);
  if (rc == RD_OK) {
    pthread_rwlock_wrlock(&r->map_lock);
    r->bytes += bytes;
    pthread_rwlock_unlock(&r->map_lock);
    if (w->tenant != NULL) rd_tenant_recharge(w->tenant, (int64_t)more, (int64_t)more_gpu);
  }
  pthread_mutex_unlock(&r->mutate_mu);
  return rc;
}

void rd_registry_move_end(rd_registry_t *r, rd_workload_t *w, uint64_t bytes, uint64_t gpu_bytes,
                          uint64_t now_bytes, uint64_t now_gpu) {
  pthread_mutex_lock(&r->mutate_mu);
  const uint64_t more = growth(w->charge, bytes), more_gpu = growth(w->gpu_charge, gpu_bytes);
  const bool still = listed(r, w);
  pthread_rwlock_wrlock(&r->map_lock);
  r->bytes -= bytes;
  if (still) r->bytes = r->bytes - w->charge + now_bytes;
  pthread_rwlock_unlock(&r->map_lock);
  if (w->tenant != NULL) {
    int64_t d = -(int64_t)more, dg = -(int64_t)more_gpu;
    if (still) {
      d += (int64_t)now_bytes - (int64_t)w->charge;
      dg += (int64_t)now_gpu - (int64_t)w->gpu_charge;
    }
    rd_tenant_recharge(w->tenant, d, dg);
  }
  if (still) {
    w->charge = now_bytes;
    w->gpu_charge = now_gpu;
  }
  pthread_mutex_unlock(&r->mutate_mu);
}

int rd_registry_delete(rd_registry_t *r, const char *id, rd_error_t *err) {
  if (id == NULL || id[0] == '\0') return rd_error_set(err, RD_EINVAL, "no workload id given");
  pthread_mutex_lock(&r->mutate_mu);
  /* mutate_mu excludes every other writer, so the index stays valid. */
  ptrdiff_t at = is_hex_id(id, RD_WORKLOAD_ID_LEN) ? find_index(r, id) : -1;
  if (at < 0) {
    pthread_mutex_unlock(&r->mutate_mu);
    if (is_hex_id(id, RD_WORKLOAD_ID_LEN))
      return rd_error_set(err, RD_ENOTFOUND, "no workload has id %s", id);
    return rd_error_set(err, RD_ENOTFOUND, "no workload has this id (ids are %d hex digits)",
                        RD_WORKLOAD_ID_LEN);
  }
  rd_workload_t *w = r->by_id[at];
  if (r->store != NULL) {
    rd_error_t serr;
    rd_error_clear(&serr);
    int rc = rd_store_delete_workload(r->store, id, &serr);
    if (rc == RD_ENOTFOUND) {
      /* Held but not stored (someone edited the database): deleting it
       * here is still what the caller asked for. */
      rd_log_warn("registry", "workload %s was not in the store; deleting it anyway", id);
    } else if (rc != RD_OK) {
      pthread_mutex_unlock(&r->mutate_mu);
      rd_error_set(err, rc, "%s", serr.msg);
      return rc;
    }
  }
  if (r->store != NULL) {
    rd_error_t oerr;
    rd_error_clear(&oerr);
    /* After the workload's own row: a leftover owner row names nothing. */
    if (rd_tenants_delete_owner(r->tenants, id, &oerr) != RD_OK)
      rd_log_warn("registry", "workload %s: %s (the row names no workload now)", id, oerr.msg);
  }
  unpublish(r, w);
  atomic_store(&w->deleted, true);
  rd_registry_change_fn changed = r->on_change;
  void *changed_arg = r->on_change_arg;
  pthread_mutex_unlock(&r->mutate_mu);
  rd_workload_close_waits(w, RD_ENOTFOUND); /* calls waiting on its limiter end NOT_FOUND */
  /* Stop training now (a pending TrainStep ends CANCELLED); the memory
   * goes with the last reference, its checkpoints and journal now. */
  if (w->pipeline) rd_pipeline_stop(w->pipeline);
  rd_durable_forget(r->durable, w);
  if (changed != NULL) changed(changed_arg, 1, w);
  rd_workload_unref(w); /* the registry's reference */
  return RD_OK;
}

size_t rd_registry_list(rd_registry_t *r, rd_workload_t **out, size_t max) {
  pthread_rwlock_rdlock(&r->map_lock);
  size_t n = r->n < max ? r->n : max;
  for (size_t i = 0; i < n; i++) {
    out[i] = r->order[i];
    atomic_fetch_add_explicit(&out[i]->refs, 1, memory_order_relaxed);
  }
  pthread_rwlock_unlock(&r->map_lock);
  return n;
}

size_t rd_registry_list_after(rd_registry_t *r, const char *after, rd_workload_t **out,
                              size_t max) {
  return rd_registry_list_owned_after(r, NULL, after, out, max);
}

size_t rd_registry_list_owned_after(rd_registry_t *r, const rd_tenant_t *owner,
                                    const char *after, rd_workload_t **out, size_t max) {
  pthread_rwlock_rdlock(&r->map_lock);
  size_t from = 0;
  if (after != NULL && after[0] != '\0') {
    ptrdiff_t at = find_index(r, after);
    from = at >= 0 ? (size_t)at + 1 : (size_t)(-at - 1);
  }
  size_t n = 0;
  for (size_t i = from; i < r->n && n < max; i++) {
    if (owner != NULL && r->by_id[i]->tenant != owner) continue;
    out[n] = r->by_id[i];
    atomic_fetch_add_explicit(&out[n]->refs, 1, memory_order_relaxed);
    n++;
  }
  pthread_rwlock_unlock(&r->map_lock);
  return n;
}

/* fn on every workload, in chunks taken under the map lock and run outside
 * it, each workload held by a reference: no allocation on the way down. */
static void each_workload(rd_registry_t *r, void (*fn)(rd_workload_t *)) {
  rd_workload_t *ws[64];
  size_t from = 0;
  for (;;) {
    pthread_rwlock_rdlock(&r->map_lock);
    size_t n = 0;
    for (size_t i = from; i < r->n && n < 64; i++) {
      ws[n] = r->order[i];
      atomic_fetch_add_explicit(&ws[n]->refs, 1, memory_order_relaxed);
      n++;
    }
    pthread_rwlock_unlock(&r->map_lock);
    if (n == 0) return;
    for (size_t i = 0; i < n; i++) {
      fn(ws[i]);
      rd_workload_unref(ws[i]);
    }
    from += n;
  }
}

static void stop_learner(rd_workload_t *w) {
  if (w->pipeline) rd_pipeline_stop(w->pipeline);
}

void rd_registry_stop_learners(rd_registry_t *r) { each_workload(r, stop_learner); }

static void cancel_waits(rd_workload_t *w) { rd_workload_close_waits(w, RD_ECANCELED); }

void rd_registry_drain_waits(rd_registry_t *r) {
  atomic_store(&r->bounds.closed, RD_ECANCELED); /* no wait starts from now on */
  each_workload(r, cancel_waits);
}

int rd_registry_set_limiter(rd_registry_t *r, rd_workload_t *w, const rd_limiter_config_t *cfg,
                            const uint8_t *stored, size_t stored_len, rd_error_t *err) {
  if (cfg != NULL) {
    int rc = rd_limiter_config_check(cfg, err);
    if (rc) return rc;
  }
  if (cfg == NULL && w->pipeline != NULL && rd_pipeline_continuous(w->pipeline))
    return rd_workload_set_limiter(w, NULL, NULL, 0, err); /* its refusal, before any write */
  pthread_mutex_lock(&r->mutate_mu);
  int rc = RD_OK;
  if (atomic_load(&w->deleted)) {
    rc = rd_error_set(err, RD_ENOTFOUND, "workload %s was deleted", w->id);
  } else if (r->store != NULL && stored != NULL) {
    rd_error_t serr;
    rd_error_clear(&serr);
    if ((rc = rd_store_update_spec(r->store, w->id, stored, stored_len, &serr)) != RD_OK)
      rd_error_set(err, rc, "%s; the rate limiter is unchanged", serr.msg);
  }
  /* Under mutate_mu: a delete cannot come between the write and this. */
  if (rc == RD_OK) rc = rd_workload_set_limiter(w, cfg, stored, stored_len, err);
  pthread_mutex_unlock(&r->mutate_mu);
  return rc;
}

void rd_registry_cpu_load(rd_registry_t *r, const int *cpus, size_t n, uint32_t *load) {
  memset(load, 0, n * sizeof *load);
  pthread_rwlock_rdlock(&r->map_lock);
  for (size_t i = 0; i < r->n; i++) {
    rd_pipeline_t *p = r->order[i]->pipeline;
    if (p == NULL) continue;
    rd_pipeline_cpus_t c;
    rd_pipeline_cpus(p, &c);
    for (size_t k = 0; k < n; k++) {
      for (uint32_t j = 0; j < c.learner_pin.n; j++) load[k] += c.learner_pin.cpu[j] == cpus[k];
      for (uint32_t j = 0; j < c.sampler_pin.n; j++) load[k] += c.sampler_pin.cpu[j] == cpus[k];
    }
  }
  pthread_rwlock_unlock(&r->map_lock);
}

size_t rd_registry_count(rd_registry_t *r) {
  pthread_rwlock_rdlock(&r->map_lock);
  size_t n = r->n;
  pthread_rwlock_unlock(&r->map_lock);
  return n;
}

uint64_t rd_registry_charged(rd_registry_t *r) { return atomic_load(&r->bytes); }

size_t rd_registry_count_owned(rd_registry_t *r, const rd_tenant_t *owner) {
  if (owner == NULL) return rd_registry_count(r);
  pthread_rwlock_rdlock(&r->map_lock);
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++) n += r->by_id[i]->tenant == owner;
  pthread_rwlock_unlock(&r->map_lock);
  return n;
}

/* ------------------------------------------------------------------ */
/* Tenants                                                             */
/* ------------------------------------------------------------------ */

rd_tenants_t *rd_registry_tenants(rd_registry_t *r) { return r->tenants; }

int rd_registry_admit(rd_registry_t *r, rd_tenant_t *tenant, const rd_workload_config_t *wc,
                      rd_error_t *err) {
  pthread_mutex_lock(&r->mutate_mu);
  int rc = check_limits(r, tenant, wc, err);
  pthread_mutex_unlock(&r->mutate_mu);
  return rc;
}

int rd_registry_remove_tenant(rd_registry_t *r, const char *name, rd_error_t *err) {
  /* Under the change lock: no admission into it can be between its check
   * of the tenant's workloads and the removal. */
  pthread_mutex_lock(&r->mutate_mu);
  int rc = rd_tenants_remove(r->tenants, name, err);
  pthread_mutex_unlock(&r->mutate_mu);
  return rc;
}
