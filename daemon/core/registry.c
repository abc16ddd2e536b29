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
#include "secrets.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "learner_spec.h"
#include "log.h"

#define DEFAULT_FANOUT 16u
#define DEFAULT_ALPHA 0.6
#define DEFAULT_EPSILON 1e-6
#define DEFAULT_BETA 0.4
#define DEFAULT_MAX_PRIORITY 1048576.0 /* 2^20 */
#define NAME_MAX_BYTES 256             /* the spec's label, returned to every lister */
/* Per item of max_batch, the table's scratch: one uint64_t and one uint32_t. */
#define SCRATCH_PER_ITEM (sizeof(uint64_t) + sizeof(uint32_t))

/* What a spec turns into: the table's config, the default IS exponent and,
 * for a hosted learner, the pipeline's config. */
typedef struct {
  rd_table_config_t tc;
  double beta;
  int has_learner;
  rd_pipeline_config_t pc;
} wl_config_t;

struct rd_registry {
  rd_config_t cfg;
  rd_store_t *store;          /* NULL: nothing persists */
  pthread_mutex_t mutate_mu;
  pthread_rwlock_t map_lock;
  rd_workload_t **by_id;      /* sorted by id; cfg.max_workloads slots */
  rd_workload_t **order;      /* creation order; cfg.max_workloads slots */
  size_t n;
  uint64_t bytes;             /* memory charged for the workloads held */
  rd_placer_fn placer;        /* restore: placements from stored profiles */
  void *placer_arg;
};

/* ------------------------------------------------------------------ */
/* Spec validation                                                     */
/* ------------------------------------------------------------------ */

/* Well-formed UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF) without control characters: the name is echoed to every
 * client and into logs. */
static bool valid_label(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    unsigned c = p[i];
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) { i++; continue; }
    size_t n;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) { n = 2; cp = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 3; cp = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 4; cp = c & 0x07; min = 0x10000; }
    else return false;
    if (i + n > len) return false;
    for (size_t k = 1; k < n; k++) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    if (cp >= 0x80 && cp < 0xa0) return false; /* C1 controls */
    i += n;
  }
  return true;
}

static bool field_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-';
}

static int map_dtype(const Replayd__V1__Field *f, size_t i, rd_dtype_t *out, rd_error_t *err) {
  switch (f->dtype) {
  case REPLAYD__V1__DTYPE__FLOAT32: *out = RD_DTYPE_FLOAT32; return RD_OK;
  case REPLAYD__V1__DTYPE__INT32: *out = RD_DTYPE_INT32; return RD_OK;
  case REPLAYD__V1__DTYPE__INT64: *out = RD_DTYPE_INT64; return RD_OK;
  case REPLAYD__V1__DTYPE__UINT8: *out = RD_DTYPE_UINT8; return RD_OK;
  case REPLAYD__V1__DTYPE__BOOL: *out = RD_DTYPE_BOOL; return RD_OK;
  case REPLAYD__V1__DTYPE__DTYPE_UNSPECIFIED:
    return rd_error_set(err, RD_EINVAL,
                        "fields[%zu].dtype is unspecified; use FLOAT32, INT32, INT64, UINT8 or "
                        "BOOL", i);
  default:
    return rd_error_set(err, RD_EINVAL, "fields[%zu].dtype %d is not a known dtype", i,
                        (int)f->dtype);
  }
}

static int validate_fields(const Replayd__V1__WorkloadSpec *spec, rd_schema_t *schema,
                           rd_error_t *err) {
  if (spec->n_fields == 0)
    return rd_error_set(err, RD_EINVAL, "fields is empty; a schema needs 1 to %d fields",
                        RD_SCHEMA_MAX_FIELDS);
  if (spec->n_fields > RD_SCHEMA_MAX_FIELDS)
    return rd_error_set(err, RD_EINVAL, "fields has %zu entries; at most %d are allowed",
                        spec->n_fields, RD_SCHEMA_MAX_FIELDS);
  memset(schema, 0, sizeof *schema);
  uint64_t row = 0;
  for (size_t i = 0; i < spec->n_fields; i++) {
    const Replayd__V1__Field *f = spec->fields[i];
    rd_field_t *out = &schema->fields[i];
    if (f == NULL) return rd_error_set(err, RD_EINVAL, "fields[%zu] is missing", i);
    const char *name = f->name ? f->name : "";
    size_t len = strlen(name);
    if (len == 0) return rd_error_set(err, RD_EINVAL, "fields[%zu].name is empty", i);
    if (len >= RD_FIELD_NAME_MAX)
      return rd_error_set(err, RD_EINVAL, "fields[%zu].name is %zu bytes; at most %d", i, len,
                          RD_FIELD_NAME_MAX - 1);
    for (size_t c = 0; c < len; c++)
      if (!field_name_char(name[c]))
        return rd_error_set(err, RD_EINVAL,
                            "fields[%zu].name has byte 0x%02x at position %zu; names use only "
                            "letters, digits, '_', '.' and '-'",
                            i, (unsigned char)name[c], c);
    for (size_t j = 0; j < i; j++)
      if (strcmp(schema->fields[j].name, name) == 0)
        return rd_error_set(err, RD_EINVAL, "fields[%zu].name \"%s\" repeats fields[%zu].name",
                            i, name, j);
    memcpy(out->name, name, len + 1);
    int rc = map_dtype(f, i, &out->dtype, err);
    if (rc) return rc;
    if (f->n_shape > RD_FIELD_MAX_RANK)
      return rd_error_set(err, RD_EINVAL, "fields[%zu].shape has rank %zu; at most %d", i,
                          f->n_shape, RD_FIELD_MAX_RANK);
    out->rank = (uint32_t)f->n_shape;
    uint64_t bytes = rd_dtype_size(out->dtype);
    for (size_t d = 0; d < f->n_shape; d++) {
      if (f->shape[d] == 0)
        return rd_error_set(err, RD_EINVAL, "fields[%zu].shape[%zu] is 0", i, d);
      out->shape[d] = f->shape[d];
      /* bytes <= 64 MiB * 2^32 before the check below: no overflow. */
      bytes *= f->shape[d];
      if (bytes > RD_ROW_MAX_BYTES)
        return rd_error_set(err, RD_EINVAL, "fields[%zu] is more than %u bytes per row (at "
                            "shape[%zu]); a row may hold at most %u bytes",
                            i, RD_ROW_MAX_BYTES, d, RD_ROW_MAX_BYTES);
    }
    row += bytes;
    if (row > RD_ROW_MAX_BYTES)
      return rd_error_set(err, RD_EINVAL,
                          "the row is more than %u bytes by fields[%zu]; a row may hold at most "
                          "%u bytes",
                          RD_ROW_MAX_BYTES, i, RD_ROW_MAX_BYTES);
  }
  schema->n_fields = (uint32_t)spec->n_fields;
  /* Backstop: the table's own rules, which the checks above mirror. */
  return rd_schema_validate(schema, err);
}

/* Turn a spec into a table config, applying defaults and server limits.
 * RD_EINVAL names the offending field; RD_ETOOBIG names the server limit. */
static int spec_to_config(const rd_config_t *cfg, const Replayd__V1__WorkloadSpec *spec,
                          wl_config_t *wc, rd_error_t *err) {
  memset(wc, 0, sizeof *wc);
  rd_table_config_t *tc = &wc->tc;
  double *beta = &wc->beta;
  if (spec == NULL) return rd_error_set(err, RD_EINVAL, "no workload spec given");
  if (spec->base.descriptor != &replayd__v1__workload_spec__descriptor)
    return rd_error_set(err, RD_EINVAL, "the spec is not a replayd.v1.WorkloadSpec");
  const char *name = spec->name ? spec->name : "";
  size_t name_len = strlen(name);
  if (name_len > NAME_MAX_BYTES)
    return rd_error_set(err, RD_EINVAL, "name is %zu bytes; at most %d", name_len,
                        NAME_MAX_BYTES);
  if (!valid_label(name, name_len))
    return rd_error_set(err, RD_EINVAL, "name is not UTF-8 text without control characters");

  rd_table_config_default(tc);
  int rc = validate_fields(spec, &tc->schema, err);
  if (rc) return rc;

  uint32_t cap_limit = cfg->max_capacity < RD_SUMTREE_MAX_CAPACITY ? cfg->max_capacity
                                                                   : RD_SUMTREE_MAX_CAPACITY;
  if (spec->capacity == 0 || spec->capacity > RD_SUMTREE_MAX_CAPACITY)
    return rd_error_set(err, RD_EINVAL, "capacity %u is outside [1, %u]", spec->capacity,
                        cap_limit);
  if (spec->capacity > cap_limit)
    return rd_error_set(err, RD_ETOOBIG,
                        "capacity %u is outside [1, %u] (this server's --max-capacity)",
                        spec->capacity, cap_limit);
  tc->capacity = spec->capacity;

  tc->fanout = spec->fanout ? spec->fanout : DEFAULT_FANOUT;
  if (rd_sumtree_memsize(tc->capacity, tc->fanout) == 0)
    return rd_error_set(err, RD_EINVAL, "fanout %u is not 0 (default %u) or a power of two in "
                        "[%u, %u]", spec->fanout, DEFAULT_FANOUT, RD_SUMTREE_MIN_FANOUT,
                        RD_SUMTREE_MAX_FANOUT);

  tc->alpha = spec->alpha_opt_case == REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA ? spec->alpha
                                                                                  : DEFAULT_ALPHA;
  if (!isfinite(tc->alpha) || tc->alpha < 0)
    return rd_error_set(err, RD_EINVAL, "alpha must be a finite number >= 0, not %g", tc->alpha);
  tc->epsilon = spec->epsilon_opt_case == REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON
                    ? spec->epsilon
                    : DEFAULT_EPSILON;
  if (!isfinite(tc->epsilon) || tc->epsilon < 0)
    return rd_error_set(err, RD_EINVAL, "epsilon must be a finite number >= 0, not %g",
                        tc->epsilon);
  *beta = spec->beta_opt_case == REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA ? spec->beta
                                                                          : DEFAULT_BETA;
  if (!(*beta >= 0 && *beta <= 1))
    return rd_error_set(err, RD_EINVAL, "beta must be in [0, 1], not %g", *beta);
  tc->max_priority =
      spec->max_priority_opt_case == REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY
          ? spec->max_priority
          : DEFAULT_MAX_PRIORITY;
  if (!isfinite(tc->max_priority) || !(tc->max_priority > 0))
    return rd_error_set(err, RD_EINVAL, "max_priority must be a finite number > 0, not %g",
                        tc->max_priority);
  rd_fixed_t fixed;
  if (rd_fixed_init(&fixed, tc->max_priority, tc->capacity, err) != RD_OK) {
    if (err) err->code = RD_EINVAL; /* a bad spec, whatever the fixed-point layer calls it */
    return RD_EINVAL;
  }

  uint32_t batch_limit = cfg->max_batch < RD_TABLE_MAX_BATCH ? cfg->max_batch : RD_TABLE_MAX_BATCH;
  tc->max_batch = spec->max_batch ? spec->max_batch : batch_limit;
  if (tc->max_batch > batch_limit)
    return rd_error_set(err, RD_ETOOBIG, "max_batch %u is outside [1, %u] (this server's "
                        "--max-batch)", spec->max_batch, batch_limit);
  tc->seed = spec->seed;
  tc->threads = 1; /* calls run on gRPC threads; one table call = one thread */
  if (spec->learner != NULL) {
    wc->has_learner = 1;
    int rc = rd_learner_spec_parse(spec->learner, tc, *beta, cfg->learner_threads, &wc->pc, err);
    if (rc) return rc;
    uint64_t wbytes = 0;
    rd_nn_spec_t ps;
    if (rd_learner_policy_spec(&wc->pc.learner, &ps, NULL) == RD_OK) wbytes = rd_nn_flat_bytes(&ps);
    if (wbytes + 1024 > cfg->max_message_bytes)
      return rd_error_set(err, RD_ETOOBIG, "the policy's weights are %llu bytes, more than this "
                          "server's --max-message-bytes %llu: actors could not fetch them",
                          (unsigned long long)wbytes, (unsigned long long)cfg->max_message_bytes);
  }
  return RD_OK;
}

/* Memory a workload of this config holds: tree + rows + per-call scratch
 * + the hosted learner (batch slots, networks). */
static uint64_t config_charge(const wl_config_t *wc, uint64_t *tree, uint64_t *rows,
                              uint64_t *scratch, uint64_t *learner) {
  const rd_table_config_t *tc = &wc->tc;
  *tree = rd_table_tree_memsize(tc); /* the CPU tree or the placement's replay module */
  *rows = rd_table_rows_memsize(tc); /* host rows, or the storage's host memory */
  *scratch = (uint64_t)tc->max_batch * SCRATCH_PER_ITEM;
  *learner = wc->has_learner ? rd_pipeline_memsize(&wc->pc, tc) : 0;
  return *tree + *rows + *scratch + *learner;
}

/* Where a placed workload runs: the learner's device and backend (a
 * failing GPU or FPGA learner falls back inside the pipeline: pipeline.h)
 * and the table's replay module (the FPGA C-simulation's or an XRT
 * board's when the RMM was placed there; workload_new falls back to the
 * CPU tree if it cannot be created). */
static void apply_placement(wl_config_t *wc, const rd_placement_t *pl) {
  wc->pc.learner_kind = pl->learner_kind;
  wc->pc.learner_device = pl->learner_device;
  wc->pc.learner_ops = pl->learner_ops;
  wc->pc.learner_pin = pl->learner_pin;
  wc->pc.sampler_pin = pl->sampler_pin;
  wc->tc.rmm = pl->rmm_ops;
  wc->tc.storage = pl->storage_ops;
}

static uint64_t workload_charge(const rd_workload_t *w) {
  return w->charge;
}

/* Drop what protobuf-c kept of fields this build does not know, so they
 * are neither stored nor echoed back as if honoured. */
static void drop_unknown_fields(ProtobufCMessage *m) {
  for (size_t i = 0; i < m->n_unknown_fields; i++) free(m->unknown_fields[i].data);
  free(m->unknown_fields);
  m->unknown_fields = NULL;
  m->n_unknown_fields = 0;
}

/* A deep copy of spec with every default written out (oneof cases set). */
static int normalised_copy(const Replayd__V1__WorkloadSpec *spec, const wl_config_t *wc,
                           Replayd__V1__WorkloadSpec **out, rd_error_t *err) {
  const rd_table_config_t *tc = &wc->tc;
  double beta = wc->beta;
  size_t len = replayd__v1__workload_spec__get_packed_size(spec);
  uint8_t *buf = malloc(len ? len : 1);
  if (buf == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory copying the spec");
  replayd__v1__workload_spec__pack(spec, buf);
  Replayd__V1__WorkloadSpec *c = replayd__v1__workload_spec__unpack(NULL, len, buf);
  free(buf);
  if (c == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory copying the spec");
  drop_unknown_fields(&c->base);
  for (size_t i = 0; i < c->n_fields; i++) drop_unknown_fields(&c->fields[i]->base);
  c->capacity = tc->capacity;
  c->fanout = tc->fanout;
  c->alpha_opt_case = REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
  c->alpha = tc->alpha;
  c->epsilon_opt_case = REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON;
  c->epsilon = tc->epsilon;
  c->beta_opt_case = REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
  c->beta = beta;
  c->max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  c->max_priority = tc->max_priority;
  c->max_batch = tc->max_batch;
  c->seed = tc->seed;
  if (c->learner != NULL) {
    drop_unknown_fields(&c->learner->base);
    int rc = rd_learner_spec_normalise(c->learner, &wc->pc, err);
    if (rc) {
      replayd__v1__workload_spec__free_unpacked(c, NULL);
      return rc;
    }
  }
  *out = c;
  return RD_OK;
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

static void workload_free(rd_workload_t *w) {
  rd_pipeline_destroy(w->pipeline); /* its threads use the table: first */
  rd_table_free(&w->table);
  if (w->spec) replayd__v1__workload_spec__free_unpacked(w->spec, NULL);
  free(w->placement);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

/* A new workload holding one reference (the registry's). Takes spec.
 * When the placement's replay module or storage cannot be created (busy:
 * an XRT board's replay kernel holds one tree, rmm_xrt.h; a GPU out of
 * memory or failing, rmm_gpu.h), the table gets the CPU tree and host
 * rows instead: wc->tc.rmm and .storage become NULL (the caller re-checks
 * the memory charge) and pl's running and note say so. */
static int workload_new(wl_config_t *wc, rd_placement_t *pl, Replayd__V1__WorkloadSpec *spec,
                        const char *id, const char *token, int64_t created,
                        rd_workload_t **out, rd_error_t *err) {
  const rd_table_config_t *tc = &wc->tc;
  rd_workload_t *w = calloc(1, sizeof *w);
  if (w == NULL) {
    replayd__v1__workload_spec__free_unpacked(spec, NULL);
    return rd_error_set(err, RD_ENOMEM, "out of memory creating a workload");
  }
  rd_error_t rerr;
  rd_error_clear(&rerr);
  const int off_cpu = tc->rmm != NULL || tc->storage != NULL;
  int rc = rd_table_init(&w->table, tc, off_cpu ? &rerr : err);
  if (rc && off_cpu) {
    rd_log_warn("registry", "workload %s: its replay module %s / storage %s cannot be created "
                "(%s); its table runs on the CPU tree with its rows in host memory", id,
                tc->rmm ? tc->rmm->name : "cpu", tc->storage ? tc->storage->name : "host",
                rerr.msg);
    if (pl != NULL) rd_placement_rmm_on_cpu(pl, rerr.msg);
    wc->tc.rmm = NULL;
    wc->tc.storage = NULL;
    rc = rd_table_init(&w->table, tc, err);
  }
  if (rc) {
    replayd__v1__workload_spec__free_unpacked(spec, NULL);
    free(w);
    return rc;
  }
  pthread_mutex_init(&w->lock, NULL);
  if (wc->has_learner) {
    rc = rd_pipeline_create(&w->pipeline, &wc->pc, &w->table, &w->lock, err);
    if (rc) {
      pthread_mutex_destroy(&w->lock);
      rd_table_free(&w->table);
      replayd__v1__workload_spec__free_unpacked(spec, NULL);
      free(w);
      return rc;
    }
  }
  uint64_t a, b, c, d;
  w->charge = config_charge(wc, &a, &b, &c, &d);
  memcpy(w->id, id, RD_WORKLOAD_ID_LEN + 1);
  memcpy(w->token, token, RD_WORKLOAD_TOKEN_LEN + 1);
  w->created_unix = created;
  w->spec = spec;
  w->default_beta = wc->beta;
  atomic_init(&w->refs, 1);
  atomic_init(&w->deleted, false);
  *out = w;
  return RD_OK;
}

void rd_workload_unref(rd_workload_t *w) {
  if (w == NULL) return;
  int before = atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel);
  if (before == 1) workload_free(w);
}

int rd_workload_token_ok(const rd_workload_t *w, const char *token, size_t len) {
  if (w == NULL || token == NULL) return 0;
  /* Compare all 64 bytes whatever the input: the time depends only on
   * len, which every client knows anyway. */
  unsigned diff = len != RD_WORKLOAD_TOKEN_LEN;
  for (size_t i = 0; i < RD_WORKLOAD_TOKEN_LEN; i++) {
    unsigned char c = i < len ? (unsigned char)token[i] : 0;
    diff |= (unsigned char)w->token[i] ^ c;
  }
  return diff == 0;
}

void rd_workload_counters(rd_workload_t *w, Replayd__V1__WorkloadCounters *out) {
  replayd__v1__workload_counters__init(out);
  pthread_mutex_lock(&w->lock);
  rd_table_stats_t st = rd_table_stats(&w->table);
  uint64_t size = rd_table_size(&w->table);
  size_t bytes = rd_table_memsize(&w->table);
  pthread_mutex_unlock(&w->lock);
  out->inserts = st.inserts;
  out->samples = st.samples;
  out->updates = st.updates;
  out->stale_updates = st.stale_updates;
  out->size = size;
  out->bytes = bytes;
}

/* ------------------------------------------------------------------ */
/* The map                                                             */
/* ------------------------------------------------------------------ */

/* Index of id in by_id, or the insertion point as -(pos + 1). Caller holds
 * map_lock (either way) or mutate_mu. */
static ptrdiff_t find_index(const rd_registry_t *r, const char *id) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(r->by_id[mid]->id, id);
    if (c == 0) return (ptrdiff_t)mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -(ptrdiff_t)lo - 1;
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
  r->bytes += workload_charge(w);
  pthread_rwlock_unlock(&r->map_lock);
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
  r->bytes -= workload_charge(w);
  pthread_rwlock_unlock(&r->map_lock);
}

/* The server limits a new workload must fit. Caller holds mutate_mu (all
 * writers of n and bytes do, so they can be read without map_lock). */
static int check_limits(const rd_registry_t *r, const wl_config_t *wc, rd_error_t *err) {
  if (r->n >= r->cfg.max_workloads)
    return rd_error_set(err, RD_ETOOBIG,
                        "this server already holds %zu workloads, its --max-workloads limit; "
                        "delete one first",
                        r->n);
  uint64_t tree, rows, scratch, learner;
  uint64_t need = config_charge(wc, &tree, &rows, &scratch, &learner);
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
  pthread_mutex_init(&r->mutate_mu, NULL);
  pthread_rwlock_init(&r->map_lock, NULL);
  *out = r;
  return RD_OK;
}

void rd_registry_destroy(rd_registry_t *r) {
  if (r == NULL) return;
  /* Drop the registry's references; a workload still borrowed by a caller
   * lives until that caller's unref (it does not point back here). */
  for (size_t i = 0; i < r->n; i++) rd_workload_unref(r->order[i]);
  free(r->by_id);
  free(r->order);
  pthread_rwlock_destroy(&r->map_lock);
  pthread_mutex_destroy(&r->mutate_mu);
  free(r);
}

static int persist(rd_registry_t *r, const rd_workload_t *w, rd_error_t *err) {
  if (r->store == NULL) return RD_OK;
  rd_stored_workload_t sw;
  memset(&sw, 0, sizeof sw);
  memcpy(sw.id, w->id, sizeof w->id);
  memcpy(sw.token, w->token, sizeof w->token);
  sw.created_unix = w->created_unix;
  sw.spec_len = replayd__v1__workload_spec__get_packed_size(w->spec);
  sw.spec = malloc(sw.spec_len ? sw.spec_len : 1);
  if (sw.spec == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory storing the spec");
  replayd__v1__workload_spec__pack(w->spec, sw.spec);
  int rc = rd_store_put_workload(r->store, &sw, err);
  free(sw.spec);
  return rc;
}

int rd_registry_spec_config(rd_registry_t *r, const Replayd__V1__WorkloadSpec *spec,
                            rd_table_config_t *tc, rd_pipeline_config_t *pc, int *has_learner,
                            rd_error_t *err) {
  wl_config_t wc;
  int rc = spec_to_config(&r->cfg, spec, &wc, err);
  if (rc) return rc;
  *tc = wc.tc;
  *pc = wc.pc;
  *has_learner = wc.has_learner;
  return RD_OK;
}

void rd_registry_set_restore_placer(rd_registry_t *r, rd_placer_fn fn, void *arg) {
  pthread_mutex_lock(&r->mutate_mu);
  r->placer = fn;
  r->placer_arg = arg;
  pthread_mutex_unlock(&r->mutate_mu);
}

int rd_registry_register(rd_registry_t *r, const Replayd__V1__WorkloadSpec *spec,
                         rd_workload_t **out, rd_error_t *err) {
  return rd_registry_register_placed(r, spec, NULL, out, err);
}

int rd_registry_register_placed(rd_registry_t *r, const Replayd__V1__WorkloadSpec *spec,
                                const rd_placement_t *placement, rd_workload_t **out,
                                rd_error_t *err) {
  if (out) *out = NULL;
  wl_config_t wc;
  int rc = spec_to_config(&r->cfg, spec, &wc, err);
  if (rc) return rc;
  rd_placement_t *pl = NULL;
  if (placement != NULL) {
    pl = malloc(sizeof *pl);
    if (pl == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the placement");
    *pl = *placement;
    apply_placement(&wc, pl);
  }

  pthread_mutex_lock(&r->mutate_mu);
  if ((rc = check_limits(r, &wc, err)) != RD_OK) goto out;

  char id[RD_WORKLOAD_ID_LEN + 1], token[RD_WORKLOAD_TOKEN_LEN + 1];
  /* 128 random bits: a collision is never expected, but costs one lookup. */
  do {
    if ((rc = random_hex(id, RD_WORKLOAD_ID_LEN, err)) != RD_OK) goto out;
  } while (find_index(r, id) >= 0);
  if ((rc = random_hex(token, RD_WORKLOAD_TOKEN_LEN, err)) != RD_OK) goto out;

  Replayd__V1__WorkloadSpec *norm;
  if ((rc = normalised_copy(spec, &wc, &norm, err)) != RD_OK) goto out;
  rd_workload_t *w;
  const rd_rmm_ops_t *placed_rmm = wc.tc.rmm;
  const rd_storage_ops_t *placed_storage = wc.tc.storage;
  if ((rc = workload_new(&wc, pl, norm, id, token, (int64_t)time(NULL), &w, err)) != RD_OK)
    goto out;
  /* The CPU tree instead of a module it could not create: charge what it holds. */
  if ((wc.tc.rmm != placed_rmm || wc.tc.storage != placed_storage) &&
      (rc = check_limits(r, &wc, err)) != RD_OK) {
    workload_free(w);
    goto out;
  }
  w->placement = pl;
  pl = NULL;
  /* Durable before visible: a client never holds an id that a restart
   * would forget, and a failed write leaves nothing registered. */
  if ((rc = persist(r, w, err)) != RD_OK) {
    workload_free(w);
    goto out;
  }
  if (out) atomic_fetch_add(&w->refs, 1);
  publish(r, w);
  if (out) *out = w;
  /* Registration and deletion are logged by the handlers, which know the
   * call; the registry logs only what no call does (restore). */
out:
  pthread_mutex_unlock(&r->mutate_mu);
  free(pl);
  return rc;
}

/* Bring back one stored workload. Caller holds mutate_mu. */
static bool restore_one(rd_registry_t *r, const rd_stored_workload_t *sw) {
  rd_error_t err;
  rd_error_clear(&err);
  if (!is_hex_id(sw->id, RD_WORKLOAD_ID_LEN) || !is_hex_id(sw->token, RD_WORKLOAD_TOKEN_LEN)) {
    rd_log_warn("registry", "skipping a stored workload with a malformed id or token");
    return false;
  }
  if (find_index(r, sw->id) >= 0) {
    rd_log_warn("registry", "skipping stored workload %s: already registered", sw->id);
    return false;
  }
  Replayd__V1__WorkloadSpec *spec = replayd__v1__workload_spec__unpack(NULL, sw->spec_len, sw->spec);
  if (spec == NULL) {
    rd_log_warn("registry", "skipping stored workload %s: its spec does not decode", sw->id);
    return false;
  }
  wl_config_t wc;
  Replayd__V1__WorkloadSpec *norm = NULL;
  int rc = spec_to_config(&r->cfg, spec, &wc, &err);
  if (rc == RD_OK) rc = check_limits(r, &wc, &err);
  if (rc == RD_OK) rc = normalised_copy(spec, &wc, &norm, &err);
  replayd__v1__workload_spec__free_unpacked(spec, NULL);
  /* The placement first: it says where the learner runs. */
  rd_placement_t *pl = NULL;
  if (rc == RD_OK && wc.has_learner && r->placer != NULL) {
    pl = malloc(sizeof *pl);
    if (pl != NULL && r->placer(r->placer_arg, &wc.tc, &wc.pc, pl) == RD_OK) {
      apply_placement(&wc, pl);
    } else {
      free(pl);
      pl = NULL;
      rd_log_info("registry", "workload %s restored without a placement (no stored profiles "
                  "for its shape)", sw->id);
    }
  }
  /* A replay module placed off the CPU holds its own tree: charge that. */
  if (rc == RD_OK && pl != NULL && (rc = check_limits(r, &wc, &err)) != RD_OK) {
    replayd__v1__workload_spec__free_unpacked(norm, NULL);
    norm = NULL;
  }
  rd_workload_t *w = NULL;
  const rd_rmm_ops_t *placed_rmm = wc.tc.rmm;
  const rd_storage_ops_t *placed_storage = wc.tc.storage;
  if (rc == RD_OK)
    rc = workload_new(&wc, pl, norm, sw->id, sw->token, sw->created_unix, &w, &err);
  /* The CPU tree instead of a module it could not create: charge what it holds. */
  if (rc == RD_OK && (wc.tc.rmm != placed_rmm || wc.tc.storage != placed_storage) &&
      (rc = check_limits(r, &wc, &err)) != RD_OK) {
    workload_free(w);
    w = NULL;
  }
  if (rc != RD_OK) {
    free(pl);
    rd_log_warn("registry", "skipping stored workload %s: %s (it stays stored)", sw->id, err.msg);
    return false;
  }
  w->placement = pl;
  publish(r, w);
  rd_log_info("registry", "restored workload %s \"%s\" (empty): %u fields, capacity %u%s%s",
              w->id, w->spec->name, wc.tc.schema.n_fields, wc.tc.capacity,
              pl != NULL ? "; " : "", pl != NULL ? pl->note : "");
  return true;
}

int rd_registry_restore(rd_registry_t *r, size_t *restored_out, rd_error_t *err) {
  if (restored_out) *restored_out = 0;
  if (r->store == NULL) return RD_OK;
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
  for (size_t i = 0; i < n; i++) restored += restore_one(r, &v[i]);
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
  unpublish(r, w);
  atomic_store(&w->deleted, true);
  pthread_mutex_unlock(&r->mutate_mu);
  /* Stop training now (a pending TrainStep ends CANCELLED); the memory
   * goes with the last reference. */
  if (w->pipeline) rd_pipeline_stop(w->pipeline);
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
  pthread_rwlock_rdlock(&r->map_lock);
  size_t from = 0;
  if (after != NULL && after[0] != '\0') {
    ptrdiff_t at = find_index(r, after);
    from = at >= 0 ? (size_t)at + 1 : (size_t)(-at - 1);
  }
  size_t n = 0;
  for (size_t i = from; i < r->n && n < max; i++) {
    out[n] = r->by_id[i];
    atomic_fetch_add_explicit(&out[n]->refs, 1, memory_order_relaxed);
    n++;
  }
  pthread_rwlock_unlock(&r->map_lock);
  return n;
}

void rd_registry_stop_learners(rd_registry_t *r) {
  rd_workload_t *ws[64];
  size_t from = 0;
  for (;;) { /* in chunks: no allocation on the way down */
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
      if (ws[i]->pipeline) rd_pipeline_stop(ws[i]->pipeline);
      rd_workload_unref(ws[i]);
    }
    from += n;
  }
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
