/* tenant.c - the tenants of this server: the set, quotas, usage, rates.
 *
 * The set is a small array sorted by name (at most RD_TENANTS_MAX), under
 * one mutex; lookups by token compare with every tenant in constant time
 * each, so a token's match says nothing about the others. Changes are
 * stored first and listed after, so a failed store write changes nothing.
 */
#include "tenant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "rd_sorted.h"
#include "secrets.h"
#include "share.h"
#include "store_tenant.h"

struct rd_tenants {
  pthread_mutex_t mu;
  rd_store_t *store; /* NULL: memory only */
  rd_tenant_t *v[RD_TENANTS_MAX];
  size_t n;
};

/* ------------------------------------------------------------------ */
/* One tenant                                                          */
/* ------------------------------------------------------------------ */

static void bucket_init(rd_rate_bucket_t *b, double rate, double now) {
  b->rate = rate;
  b->tokens = rate > 1.0 ? rate : 1.0;
  b->last = now;
}

static void apply_quota(rd_tenant_t *t, const rd_tenant_quota_t *q, unsigned mask, double now) {
  if (mask & RD_TQ_MEMORY) t->quota.max_memory_bytes = q->max_memory_bytes;
  if (mask & RD_TQ_GPU_MEMORY) t->quota.max_gpu_memory_bytes = q->max_gpu_memory_bytes;
  if (mask & RD_TQ_WORKLOADS) t->quota.max_workloads = q->max_workloads;
  if (mask & RD_TQ_WEIGHT) t->quota.weight = q->weight ? q->weight : 1;
  if (mask & RD_TQ_INSERT_RATE) {
    t->quota.insert_rows_per_s = q->insert_rows_per_s;
    bucket_init(&t->insert_bucket, q->insert_rows_per_s, now);
  }
  if (mask & RD_TQ_SAMPLE_RATE) {
    t->quota.sample_rows_per_s = q->sample_rows_per_s;
    bucket_init(&t->sample_bucket, q->sample_rows_per_s, now);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* hash: the token's SHA-256, or NULL for none (the default tenant). */
static rd_tenant_t *tenant_new(const char *name, const uint8_t *hash, int64_t created) {
  rd_tenant_t *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  snprintf(t->name, sizeof t->name, "%s", name);
  if (hash != NULL) {
    memcpy(t->token_hash, hash, RD_TOKEN_HASH_LEN);
    t->has_token = 1;
  }
  t->created_unix = created;
  pthread_mutex_init(&t->mu, NULL);
  rd_tenant_quota_t q = {0, 0, 1, 0, 0, 0};
  apply_quota(t, &q, RD_TQ_ALL, now_s());
  atomic_init(&t->refs, 1);
  atomic_init(&t->removed, false);
  return t;
}

void rd_tenant_ref(rd_tenant_t *t) { atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); }

void rd_tenant_unref(rd_tenant_t *t) {
  if (t == NULL) return;
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* The presented token's hash against t's, in constant time: a tenant
 * without a token (the default) matches nothing. */
static int hash_ok(const rd_tenant_t *t, const uint8_t hash[RD_TOKEN_HASH_LEN]) {
  unsigned diff = 0;
  for (size_t i = 0; i < RD_TOKEN_HASH_LEN; i++) diff |= (unsigned)(t->token_hash[i] ^ hash[i]);
  return t->has_token && diff == 0;
}

int rd_tenant_quota_check(const rd_tenant_quota_t *q, unsigned mask, rd_error_t *err) {
  if ((mask & RD_TQ_WEIGHT) && q->weight > RD_TENANT_WEIGHT_MAX)
    return rd_error_set(err, RD_EINVAL, "quota.weight %u is outside [1, %u] (0 means 1)",
                        q->weight, RD_TENANT_WEIGHT_MAX);
  const struct {
    unsigned bit;
    double v;
    const char *name;
  } rates[] = {{RD_TQ_INSERT_RATE, q->insert_rows_per_s, "insert_rows_per_second"},
               {RD_TQ_SAMPLE_RATE, q->sample_rows_per_s, "sample_rows_per_second"}};
  for (size_t i = 0; i < 2; i++)
    if ((mask & rates[i].bit) && !(rates[i].v >= 0 && rates[i].v <= RD_TENANT_RATE_MAX))
      return rd_error_set(err, RD_EINVAL, "quota.%s %g is not in [0, %g] rows/s (0: no limit)",
                          rates[i].name, rates[i].v, RD_TENANT_RATE_MAX);
  return RD_OK;
}

static int name_check(const char *name, rd_error_t *err) {
  size_t n = name ? strnlen(name, RD_TENANT_NAME_MAX + 1) : 0;
  if (n == 0 || n > RD_TENANT_NAME_MAX)
    return rd_error_set(err, RD_EINVAL, "a tenant name has 1 to %d characters",
                        RD_TENANT_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || !(c == '_' || c == '.' || c == '-')))
      return rd_error_set(err, RD_EINVAL, "tenant name \"%.64s\": use lowercase letters, digits "
                          "and _ . - (starting with a letter or digit)", name);
  }
  return RD_OK;
}

static void to_stored(const rd_tenant_t *t, const rd_tenant_quota_t *q, rd_stored_tenant_t *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", t->name);
  if (t->has_token) rd_token_hash_format(t->token_hash, s->token); /* the hash, never the token */
  s->created_unix = t->created_unix;
  s->max_memory = q->max_memory_bytes;
  s->max_workloads = q->max_workloads;
  s->weight = q->weight;
  s->insert_rate = q->insert_rows_per_s;
  s->sample_rate = q->sample_rows_per_s;
  s->max_gpu_memory = q->max_gpu_memory_bytes;
}

/* ------------------------------------------------------------------ */
/* The set                                                             */
/* ------------------------------------------------------------------ */

static const char *tenant_name(const void *t) { return ((const rd_tenant_t *)t)->name; }

/* Index of name, or -(insertion point + 1). Caller holds ts->mu. */
static ptrdiff_t find(const rd_tenants_t *ts, const char *name) {
  return rd_sorted_find((const void *const *)ts->v, ts->n, name, tenant_name);
}

static void insert_at(rd_tenants_t *ts, rd_tenant_t *t) {
  size_t pos = (size_t)(-find(ts, t->name) - 1);
  memmove(&ts->v[pos + 1], &ts->v[pos], (ts->n - pos) * sizeof *ts->v);
  ts->v[pos] = t;
  ts->n++;
}

static int load(rd_tenants_t *ts, rd_error_t *err) {
  rd_stored_tenant_t *v = NULL;
  size_t n = 0;
  int rc = rd_store_list_tenants(ts->store, &v, &n, err);
  if (rc != RD_OK) return rc;
  for (size_t i = 0; i < n && rc == RD_OK; i++) {
    rd_tenant_quota_t q = {v[i].max_memory, v[i].max_workloads, v[i].weight, v[i].insert_rate,
                           v[i].sample_rate, v[i].max_gpu_memory};
    int is_default = strcmp(v[i].name, RD_TENANT_DEFAULT) == 0;
    uint8_t hash[RD_TOKEN_HASH_LEN];
    if (name_check(v[i].name, NULL) != RD_OK || rd_tenant_quota_check(&q, RD_TQ_ALL, NULL) ||
        (!is_default && rd_token_hash_parse(v[i].token, hash) != RD_OK) ||
        ts->n >= RD_TENANTS_MAX) {
      rc = rd_error_set(err, RD_ESTORE, "stored tenant \"%.64s\" does not validate", v[i].name);
      break;
    }
    if (is_default) { /* its quota, set by an operator */
      rd_tenant_t *d = ts->v[find(ts, RD_TENANT_DEFAULT)];
      apply_quota(d, &q, RD_TQ_ALL, now_s());
      continue;
    }
    rd_tenant_t *t = tenant_new(v[i].name, hash, v[i].created_unix);
    if (t == NULL) {
      rc = rd_error_set(err, RD_ENOMEM, "out of memory reading tenants");
      break;
    }
    apply_quota(t, &q, RD_TQ_ALL, now_s());
    insert_at(ts, t);
  }
  free(v);
  return rc;
}

int rd_tenants_open(rd_tenants_t **out, rd_store_t *store, rd_error_t *err) {
  *out = NULL;
  rd_tenants_t *ts = calloc(1, sizeof *ts);
  rd_tenant_t *d = tenant_new(RD_TENANT_DEFAULT, NULL, 0);
  if (ts == NULL || d == NULL) {
    free(ts);
    rd_tenant_unref(d);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the tenants");
  }
  pthread_mutex_init(&ts->mu, NULL);
  ts->store = store;
  insert_at(ts, d);
  if (store != NULL) {
    int rc = load(ts, err);
    if (rc != RD_OK) {
      rd_tenants_close(ts);
      return rc;
    }
  }
  *out = ts;
  return RD_OK;
}

void rd_tenants_close(rd_tenants_t *ts) {
  if (ts == NULL) return;
  for (size_t i = 0; i < ts->n; i++) rd_tenant_unref(ts->v[i]);
  pthread_mutex_destroy(&ts->mu);
  free(ts);
}

rd_tenant_t *rd_tenants_get(rd_tenants_t *ts, const char *name) {
  if (name == NULL) return NULL;
  pthread_mutex_lock(&ts->mu);
  ptrdiff_t at = find(ts, name);
  rd_tenant_t *t = at >= 0 ? ts->v[at] : NULL;
  if (t) rd_tenant_ref(t);
  pthread_mutex_unlock(&ts->mu);
  return t;
}

rd_tenant_t *rd_tenants_default(rd_tenants_t *ts) { return rd_tenants_get(ts, RD_TENANT_DEFAULT); }

rd_tenant_t *rd_tenants_by_token(rd_tenants_t *ts, const char *token, size_t len) {
  if (token == NULL || len == 0) return NULL;
  uint8_t hash[RD_TOKEN_HASH_LEN];
  rd_token_hash(token, len, hash);
  rd_tenant_t *found = NULL;
  pthread_mutex_lock(&ts->mu);
  for (size_t i = 0; i < ts->n; i++) /* no early exit: every tenant is compared */
    if (hash_ok(ts->v[i], hash) && found == NULL) found = ts->v[i];
  if (found) rd_tenant_ref(found);
  pthread_mutex_unlock(&ts->mu);
  return found;
}

int rd_tenants_add(rd_tenants_t *ts, const char *name, const rd_tenant_quota_t *q,
                   char *token_out, rd_error_t *err) {
  int rc;
  if ((rc = name_check(name, err)) != RD_OK) return rc;
  if ((rc = rd_tenant_quota_check(q, RD_TQ_ALL, err)) != RD_OK) return rc;
  char token[RD_TENANT_TOKEN_LEN + 1];
  if ((rc = rd_random_hex(token, RD_TENANT_TOKEN_LEN, RD_ENOMEM, err)) != RD_OK) return rc;
  uint8_t hash[RD_TOKEN_HASH_LEN];
  rd_token_hash(token, RD_TENANT_TOKEN_LEN, hash);
  rd_tenant_t *t = tenant_new(name, hash, (int64_t)time(NULL));
  if (t == NULL) {
    rd_secret_wipe(token, sizeof token);
    return rd_error_set(err, RD_ENOMEM, "out of memory for a tenant");
  }
  apply_quota(t, q, RD_TQ_ALL, now_s());
  pthread_mutex_lock(&ts->mu);
  if (find(ts, name) >= 0)
    rc = rd_error_set(err, RD_EINVAL, "tenant \"%s\" already exists", name);
  else if (ts->n >= RD_TENANTS_MAX)
    rc = rd_error_set(err, RD_ETOOBIG, "this server already has %d tenants, its limit",
                      RD_TENANTS_MAX);
  else if (ts->store != NULL) {
    rd_stored_tenant_t st;
    to_stored(t, &t->quota, &st);
    rc = rd_store_put_tenant(ts->store, &st, err);
    rd_secret_wipe(st.token, sizeof st.token);
  }
  if (rc == RD_OK) {
    insert_at(ts, t);
    memcpy(token_out, token, sizeof token);
  }
  pthread_mutex_unlock(&ts->mu);
  if (rc != RD_OK) rd_tenant_unref(t);
  rd_secret_wipe(token, sizeof token);
  return rc;
}

int rd_tenants_set(rd_tenants_t *ts, const char *name, const rd_tenant_quota_t *q, unsigned mask,
                   rd_error_t *err) {
  int rc = rd_tenant_quota_check(q, mask, err);
  if (rc != RD_OK) return rc;
  pthread_mutex_lock(&ts->mu);
  ptrdiff_t at = name ? find(ts, name) : -1;
  if (at < 0) {
    pthread_mutex_unlock(&ts->mu);
    return rd_error_set(err, RD_ENOTFOUND, "no tenant is named \"%.64s\"", name ? name : "");
  }
  rd_tenant_t *t = ts->v[at];
  pthread_mutex_lock(&t->mu);
  rd_tenant_t next = {.quota = t->quota};
  apply_quota(&next, q, mask, now_s());
  if (ts->store != NULL) {
    rd_stored_tenant_t st;
    to_stored(t, &next.quota, &st);
    rc = rd_store_put_tenant(ts->store, &st, err);
    rd_secret_wipe(st.token, sizeof st.token);
  }
  if (rc == RD_OK) apply_quota(t, q, mask, now_s());
  uint32_t weight = t->quota.weight;
  pthread_mutex_unlock(&t->mu);
  pthread_mutex_unlock(&ts->mu);
  /* Its learners' shares take the new weight at their next step. */
  if (rc == RD_OK && (mask & RD_TQ_WEIGHT)) rd_share_set_group_weight_all(t, weight);
  return rc;
}

int rd_tenants_remove(rd_tenants_t *ts, const char *name, rd_error_t *err) {
  pthread_mutex_lock(&ts->mu);
  ptrdiff_t at = name ? find(ts, name) : -1;
  int rc = RD_OK;
  rd_tenant_t *t = at >= 0 ? ts->v[at] : NULL;
  if (t == NULL)
    rc = rd_error_set(err, RD_ENOTFOUND, "no tenant is named \"%.64s\"", name ? name : "");
  else if (strcmp(name, RD_TENANT_DEFAULT) == 0)
    rc = rd_error_set(err, RD_ESTATE, "the default tenant cannot be removed");
  if (rc == RD_OK) {
    pthread_mutex_lock(&t->mu);
    uint32_t owned = t->workloads;
    pthread_mutex_unlock(&t->mu);
    if (owned > 0)
      rc = rd_error_set(err, RD_ESTATE, "tenant \"%s\" owns %u workloads: delete them first",
                        name, owned);
  }
  if (rc == RD_OK && ts->store != NULL) rc = rd_store_delete_tenant(ts->store, name, err);
  if (rc == RD_OK) {
    memmove(&ts->v[at], &ts->v[at + 1], (ts->n - (size_t)at - 1) * sizeof *ts->v);
    ts->n--;
    atomic_store(&t->removed, true);
  }
  pthread_mutex_unlock(&ts->mu);
  if (rc == RD_OK) rd_tenant_unref(t); /* the set's reference */
  return rc;
}

void rd_tenant_info(rd_tenant_t *t, rd_tenant_info_t *out) {
  memset(out, 0, sizeof *out);
  memcpy(out->name, t->name, sizeof out->name);
  out->created_unix = t->created_unix;
  pthread_mutex_lock(&t->mu);
  out->quota = t->quota;
  out->bytes = t->bytes;
  out->gpu_bytes = t->gpu_bytes;
  out->workloads = t->workloads;
  pthread_mutex_unlock(&t->mu);
}

size_t rd_tenants_list(rd_tenants_t *ts, rd_tenant_info_t *out, size_t max) {
  pthread_mutex_lock(&ts->mu);
  size_t n = ts->n < max ? ts->n : max;
  for (size_t i = 0; i < n; i++) rd_tenant_info(ts->v[i], &out[i]);
  pthread_mutex_unlock(&ts->mu);
  return n;
}

/* ------------------------------------------------------------------ */
/* Admission and usage                                                 */
/* ------------------------------------------------------------------ */

uint32_t rd_tenant_weight(rd_tenant_t *t) {
  pthread_mutex_lock(&t->mu);
  uint32_t w = t->quota.weight;
  pthread_mutex_unlock(&t->mu);
  return w;
}

/* Under t->mu: RD_OK if `need` more bytes fit beside `have` under the
 * quota `what` of `max` (0: no limit), else RD_ETOOBIG naming it, what
 * needs the bytes (`who`) and what is free. */
static int room(const rd_tenant_t *t, const char *who, const char *what, uint64_t have,
                uint64_t max, uint64_t need, rd_error_t *err) {
  if (need == 0 || max == 0 || (need <= max && have <= max - need)) return RD_OK;
  return rd_error_set(err, RD_ETOOBIG, "tenant \"%s\"'s quota %s %llu: %s needs %llu more "
                      "bytes, %llu are free", t->name, what, (unsigned long long)max, who,
                      (unsigned long long)need, (unsigned long long)(have < max ? max - have : 0));
}

int rd_tenant_admit(rd_tenant_t *t, uint64_t bytes, rd_error_t *err) {
  if (atomic_load(&t->removed))
    return rd_error_set(err, RD_ENOTFOUND, "tenant \"%s\" was removed", t->name);
  int rc = RD_OK;
  pthread_mutex_lock(&t->mu);
  const rd_tenant_quota_t *q = &t->quota;
  if (q->max_workloads != 0 && t->workloads >= q->max_workloads)
    rc = rd_error_set(err, RD_ETOOBIG, "tenant \"%s\" already owns %u workloads, its quota "
                      "max_workloads; delete one or raise the quota", t->name, t->workloads);
  else
    rc = room(t, "this workload", "max_memory_bytes", t->bytes, q->max_memory_bytes, bytes, err);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void rd_tenant_charge(rd_tenant_t *t, int sign, uint64_t bytes) {
  pthread_mutex_lock(&t->mu);
  if (sign > 0) {
    t->workloads++;
    t->bytes += bytes;
  } else {
    t->workloads--;
    t->bytes -= bytes;
  }
  pthread_mutex_unlock(&t->mu);
}

int rd_tenant_admit_gpu(rd_tenant_t *t, uint64_t gpu_bytes, rd_error_t *err) {
  pthread_mutex_lock(&t->mu);
  int rc = room(t, "this workload's GPU memory", "max_gpu_memory_bytes", t->gpu_bytes,
                t->quota.max_gpu_memory_bytes, gpu_bytes, err);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void rd_tenant_charge_gpu(rd_tenant_t *t, int sign, uint64_t gpu_bytes) {
  pthread_mutex_lock(&t->mu);
  if (sign > 0) t->gpu_bytes += gpu_bytes;
  else t->gpu_bytes -= gpu_bytes;
  pthread_mutex_unlock(&t->mu);
}

int rd_tenant_admit_growth(rd_tenant_t *t, uint64_t bytes, uint64_t gpu_bytes, rd_error_t *err) {
  pthread_mutex_lock(&t->mu);
  const rd_tenant_quota_t *q = &t->quota;
  int rc = room(t, "the move", "max_memory_bytes", t->bytes, q->max_memory_bytes, bytes, err);
  if (rc == RD_OK)
    rc = room(t, "the move's GPU memory", "max_gpu_memory_bytes", t->gpu_bytes,
              q->max_gpu_memory_bytes, gpu_bytes, err);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void rd_tenant_recharge(rd_tenant_t *t, int64_t bytes, int64_t gpu_bytes) {
  pthread_mutex_lock(&t->mu);
  t->bytes += (uint64_t)bytes; /* two's complement: a negative delta subtracts */
  t->gpu_bytes += (uint64_t)gpu_bytes;
  pthread_mutex_unlock(&t->mu);
}

int rd_tenant_take_rows(rd_tenant_t *t, rd_tenant_rate_t kind, uint64_t rows, double now,
                        rd_error_t *err) {
  rd_rate_bucket_t *b = kind == RD_TENANT_INSERT ? &t->insert_bucket : &t->sample_bucket;
  int rc = RD_OK;
  pthread_mutex_lock(&t->mu);
  if (b->rate > 0) {
    double burst = b->rate > 1.0 ? b->rate : 1.0;
    if (now > b->last) {
      b->tokens = fmin(burst, b->tokens + (now - b->last) * b->rate);
      b->last = now;
    }
    if (b->tokens < 0)
      rc = rd_error_set(err, RD_ETOOBIG, "tenant \"%s\" is over its %s quota of %g rows/s; "
                        "retry in %.0f ms", t->name,
                        kind == RD_TENANT_INSERT ? "insert_rows_per_second"
                                                 : "sample_rows_per_second",
                        b->rate, ceil(-b->tokens / b->rate * 1e3));
    else
      b->tokens -= (double)rows;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void rd_tenant_return_rows(rd_tenant_t *t, rd_tenant_rate_t kind, uint64_t rows) {
  rd_rate_bucket_t *b = kind == RD_TENANT_INSERT ? &t->insert_bucket : &t->sample_bucket;
  pthread_mutex_lock(&t->mu);
  if (b->rate > 0) b->tokens = fmin(b->rate > 1.0 ? b->rate : 1.0, b->tokens + (double)rows);
  pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------------ */
/* Ownership                                                           */
/* ------------------------------------------------------------------ */

int rd_tenants_put_owner(rd_tenants_t *ts, const char *workload_id, const char *name,
                         rd_error_t *err) {
  if (ts->store == NULL || strcmp(name, RD_TENANT_DEFAULT) == 0) return RD_OK;
  return rd_store_put_owner(ts->store, workload_id, name, err);
}

int rd_tenants_delete_owner(rd_tenants_t *ts, const char *workload_id, rd_error_t *err) {
  if (ts->store == NULL) return RD_OK;
  return rd_store_delete_owner(ts->store, workload_id, err);
}

rd_tenant_t *rd_tenants_owner(rd_tenants_t *ts, const char *workload_id) {
  char name[64] = "";
  rd_error_t err;
  rd_error_clear(&err);
  if (ts->store != NULL && rd_store_get_owner(ts->store, workload_id, name, &err) != RD_OK)
    rd_log_warn("tenant", "workload %s: %s; it goes to the default tenant", workload_id,
                err.msg);
  rd_tenant_t *t = name[0] ? rd_tenants_get(ts, name) : NULL;
  if (name[0] && t == NULL)
    rd_log_warn("tenant", "workload %s names tenant \"%s\", which is gone; it goes to the "
                "default tenant", workload_id, name);
  return t ? t : rd_tenants_default(ts);
}
