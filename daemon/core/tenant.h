/* tenant.h - who owns workloads, and what each owner may take.
 *
 * A tenant is one experiment (or team) sharing the server: it owns
 * workloads, holds a secret token that opens them (per-workload tokens
 * stay and still open their own workload), and has a quota: memory and
 * workload count, checked when a workload is admitted (registry.c); a
 * share weight for the devices its hosted learners share (docs/
 * architecture.md, "Tenants"); and two row rates, token buckets that the
 * RPC layer charges for remote inserts and samples (a hosted learner's own
 * sampling is not charged: it is bounded by its share of the CPU).
 *
 * The tenant "default" always exists, has no token and owns what callers
 * without a tenant token register: a server nobody configured works as it
 * did before tenants. Its quota can be set like any other's; it cannot be
 * removed.
 *
 * The set is kept in the store (tenants and workload_tenants tables,
 * store.h) and in memory. A tenant is reference-counted: a workload holds
 * its owner, so a tenant removed while a call on one of its (deleted)
 * workloads finishes stays valid until that call lets go. Removal is
 * refused while it owns workloads (the registry checks under its change
 * lock, rd_registry_remove_tenant).
 *
 * Thread-safety: every call takes the set's or the tenant's mutex; the
 * usage counters are changed by the registry under its change lock and
 * the tenant's mutex.
 */
#ifndef RD_TENANT_H
#define RD_TENANT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "secrets.h"

struct rd_store;

#define RD_TENANT_NAME_MAX 63
#define RD_TENANT_TOKEN_LEN 64 /* hex characters */
#define RD_TENANT_DEFAULT "default"
#define RD_TENANTS_MAX 256
#define RD_TENANT_WEIGHT_MAX 1000
#define RD_TENANT_RATE_MAX 1e9 /* rows per second */

/* What a tenant may take. 0 means "no limit of the tenant's own": the
 * server's limits (--max-memory, --max-workloads) still apply to all. */
typedef struct {
  uint64_t max_memory_bytes;   /* rows, trees and learners of its workloads */
  uint32_t max_workloads;
  uint32_t weight;             /* 1..RD_TENANT_WEIGHT_MAX: its share of a shared device */
  double insert_rows_per_s;    /* remote inserts (InsertBatch, the Insert stream) */
  double sample_rows_per_s;    /* remote samples */
  /* GPU memory of its workloads whose replay module, storage or learner
   * the placement puts on a GPU (rd_workload_config_gpu_bytes: from the
   * spec, not measured) */
  uint64_t max_gpu_memory_bytes;
} rd_tenant_quota_t;

/* A quota update: each field applies only when its bit is set. */
enum {
  RD_TQ_MEMORY = 1u << 0,
  RD_TQ_WORKLOADS = 1u << 1,
  RD_TQ_WEIGHT = 1u << 2,
  RD_TQ_INSERT_RATE = 1u << 3,
  RD_TQ_SAMPLE_RATE = 1u << 4,
  RD_TQ_GPU_MEMORY = 1u << 5,
  RD_TQ_ALL = 0x3f,
};

/* A token bucket of rows per second with a burst of one second's rows (at
 * least 1). A charge is admitted while the bucket is not in debt and then
 * takes its whole count, so a batch larger than the burst passes once and
 * the next waits until the debt is paid back: the long-run rate is the
 * quota's whatever the batch size, and no batch size is refused outright. */
typedef struct {
  double rate;   /* rows/s; 0 = unlimited */
  double tokens; /* may be negative (debt) */
  double last;   /* rd_clock_now() of the last refill */
} rd_rate_bucket_t;

typedef struct rd_tenant {
  char name[RD_TENANT_NAME_MAX + 1];
  uint8_t token_hash[RD_TOKEN_HASH_LEN]; /* SHA-256 of its token (secrets.h), never the token */
  int has_token;          /* 0 for the default tenant */
  int64_t created_unix;
  pthread_mutex_t mu;      /* quota, usage, buckets */
  rd_tenant_quota_t quota;
  uint64_t bytes;          /* memory charged for its workloads */
  uint64_t gpu_bytes;      /* GPU memory charged for them */
  uint32_t workloads;      /* workloads it owns */
  rd_rate_bucket_t insert_bucket, sample_bucket;
  atomic_int refs;
  atomic_bool removed;
} rd_tenant_t;

typedef struct rd_tenants rd_tenants_t;

/* The set, read from store (NULL: memory only, for tests). RD_ESTORE if
 * the stored tenants cannot be read. */
int rd_tenants_open(rd_tenants_t **out, struct rd_store *store, rd_error_t *err);
void rd_tenants_close(rd_tenants_t *ts);

void rd_tenant_ref(rd_tenant_t *t);
void rd_tenant_unref(rd_tenant_t *t);

/* Referenced tenants (unref each), or NULL. */
rd_tenant_t *rd_tenants_default(rd_tenants_t *ts);
rd_tenant_t *rd_tenants_get(rd_tenants_t *ts, const char *name);
/* The tenant whose token is token[0, len): its SHA-256 compared in
 * constant time with every tenant's hash; NULL if none (the default
 * tenant has none). */
rd_tenant_t *rd_tenants_by_token(rd_tenants_t *ts, const char *token, size_t len);

/* The defaults a new tenant gets for fields its quota leaves 0: weight 1,
 * everything else unlimited. RD_EINVAL naming the field for a weight
 * outside [1, RD_TENANT_WEIGHT_MAX] or a rate that is negative, not finite
 * or above RD_TENANT_RATE_MAX. */
int rd_tenant_quota_check(const rd_tenant_quota_t *q, unsigned mask, rd_error_t *err);

/* Create tenant `name` (1..63 of [a-z0-9_.-], starting with a letter or
 * digit) with quota q (fields of mask; weight 0 means 1) and a new random
 * token, stored before it is listed; token_out (RD_TENANT_TOKEN_LEN + 1
 * bytes) receives the token, which is never shown again. Errors: RD_EINVAL
 * (name, quota, "already exists"), RD_ETOOBIG (RD_TENANTS_MAX), RD_ESTORE. */
int rd_tenants_add(rd_tenants_t *ts, const char *name, const rd_tenant_quota_t *q,
                   char *token_out, rd_error_t *err);

/* Change the fields of mask in name's quota (stored first). A lower quota
 * than the tenant uses now refuses only later admissions. RD_ENOTFOUND,
 * RD_EINVAL, RD_ESTORE. */
int rd_tenants_set(rd_tenants_t *ts, const char *name, const rd_tenant_quota_t *q, unsigned mask,
                   rd_error_t *err);

/* Remove name (its store rows, then the listing). RD_ENOTFOUND; RD_ESTATE
 * for the default tenant or one that owns workloads; RD_ESTORE. Callers
 * serialize it with admissions (rd_registry_remove_tenant). */
int rd_tenants_remove(rd_tenants_t *ts, const char *name, rd_error_t *err);

/* A tenant as listed: name, quota and usage, never the token. */
typedef struct {
  char name[RD_TENANT_NAME_MAX + 1];
  rd_tenant_quota_t quota;
  uint64_t bytes;
  uint32_t workloads;
  int64_t created_unix;
  uint64_t gpu_bytes;
} rd_tenant_info_t;

void rd_tenant_info(rd_tenant_t *t, rd_tenant_info_t *out);
/* Up to max tenants in name order (the default first among equals: it is
 * just a name); returns how many. */
size_t rd_tenants_list(rd_tenants_t *ts, rd_tenant_info_t *out, size_t max);

/* Its quota's weight now. */
uint32_t rd_tenant_weight(rd_tenant_t *t);

/* ---- Admission (the registry's, under its change lock) ---- */

/* RD_OK if t may own one more workload of `bytes`; else RD_ETOOBIG naming
 * the tenant's limit, or RD_ENOTFOUND for a removed tenant. */
int rd_tenant_admit(rd_tenant_t *t, uint64_t bytes, rd_error_t *err);
/* Count (sign +1) or uncount (-1) a workload of `bytes`. */
void rd_tenant_charge(rd_tenant_t *t, int sign, uint64_t bytes);
/* The same for GPU memory (a workload placed on a GPU, in addition to
 * rd_tenant_admit / rd_tenant_charge): RD_ETOOBIG naming the tenant's
 * max_gpu_memory_bytes. A workload of no GPU bytes is always admitted. */
int rd_tenant_admit_gpu(rd_tenant_t *t, uint64_t gpu_bytes, rd_error_t *err);
void rd_tenant_charge_gpu(rd_tenant_t *t, int sign, uint64_t gpu_bytes);
/* A workload t owns grows by `bytes` of memory and `gpu_bytes` of GPU
 * memory (a move to another device, workload_move.h): RD_OK if both fit
 * its quotas, else RD_ETOOBIG naming the quota. Checks only; its
 * workload count is not a limit here (the workload is already counted). */
int rd_tenant_admit_growth(rd_tenant_t *t, uint64_t bytes, uint64_t gpu_bytes, rd_error_t *err);
/* Change what t is charged by the deltas (a move's), its count unchanged. */
void rd_tenant_recharge(rd_tenant_t *t, int64_t bytes, int64_t gpu_bytes);

/* ---- Rates ---- */

typedef enum { RD_TENANT_INSERT = 0, RD_TENANT_SAMPLE = 1 } rd_tenant_rate_t;

/* Charge rows to t's bucket of kind at time now (rd_clock_now()): RD_OK,
 * or RD_ETOOBIG naming the quota and when to retry (nothing charged). */
int rd_tenant_take_rows(rd_tenant_t *t, rd_tenant_rate_t kind, uint64_t rows, double now,
                        rd_error_t *err);

/* Give back rows charged for a call that then failed (a failing call
 * changes nothing, its tenant's bucket included). */
void rd_tenant_return_rows(rd_tenant_t *t, rd_tenant_rate_t kind, uint64_t rows);

/* ---- Ownership in the store ---- */

/* Record (or forget) that workload id belongs to tenant name; the default
 * tenant's workloads have no row (so state written before tenants
 * restores into it). No-op without a store. */
int rd_tenants_put_owner(rd_tenants_t *ts, const char *workload_id, const char *name,
                         rd_error_t *err);
int rd_tenants_delete_owner(rd_tenants_t *ts, const char *workload_id, rd_error_t *err);
/* The referenced owner of a stored workload: its tenant, or the default
 * one when it has no row or names a tenant that is gone (logged). */
rd_tenant_t *rd_tenants_owner(rd_tenants_t *ts, const char *workload_id);

#endif
