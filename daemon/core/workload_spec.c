/* workload_spec.c - a workload's spec -> its configuration: defaults, the
 * table's rules, the server's limits. */
#include "workload_spec.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "learner.h"
#include "rmm_gpu.h"
#include "rd_fixed.h"
#include "rd_nn_spec.h"
#include "sumtree.h"

#define DEFAULT_FANOUT 16u
#define DEFAULT_ALPHA 0.6
#define DEFAULT_EPSILON 1e-6
#define DEFAULT_BETA 0.4
#define DEFAULT_MAX_PRIORITY 1048576.0 /* 2^20 */
/* Per item of max_batch, the table's scratch: one uint64_t and one uint32_t. */
#define SCRATCH_PER_ITEM (sizeof(uint64_t) + sizeof(uint32_t))

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

/* One field into out; i is its index, the fields before it are in schema. */
static int field_to_schema(const rd_field_spec_t *f, size_t i, const rd_schema_t *schema,
                           rd_field_t *out, uint64_t *bytes_out, rd_error_t *err) {
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
      return rd_error_set(err, RD_EINVAL, "fields[%zu].name \"%s\" repeats fields[%zu].name", i,
                          name, j);
  memcpy(out->name, name, len + 1);
  if (rd_dtype_size(f->dtype) == 0)
    return rd_error_set(err, RD_EINVAL,
                        "fields[%zu].dtype is unspecified; use FLOAT32, INT32, INT64, UINT8 or "
                        "BOOL", i);
  out->dtype = f->dtype;
  if (f->rank > RD_FIELD_MAX_RANK)
    return rd_error_set(err, RD_EINVAL, "fields[%zu].shape has rank %zu; at most %d", i,
                        f->rank, RD_FIELD_MAX_RANK);
  out->rank = (uint32_t)f->rank;
  uint64_t bytes = rd_dtype_size(out->dtype);
  for (size_t d = 0; d < f->rank; d++) {
    if (f->shape[d] == 0) return rd_error_set(err, RD_EINVAL, "fields[%zu].shape[%zu] is 0", i, d);
    out->shape[d] = f->shape[d];
    /* bytes <= 64 MiB * 2^32 before the check below: no overflow. */
    bytes *= f->shape[d];
    if (bytes > RD_ROW_MAX_BYTES)
      return rd_error_set(err, RD_EINVAL, "fields[%zu] is more than %u bytes per row (at "
                          "shape[%zu]); a row may hold at most %u bytes",
                          i, RD_ROW_MAX_BYTES, d, RD_ROW_MAX_BYTES);
  }
  *bytes_out = bytes;
  return RD_OK;
}

static int fields_to_schema(const rd_workload_spec_t *spec, rd_schema_t *schema,
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
    uint64_t bytes = 0;
    int rc = field_to_schema(&spec->fields[i], i, schema, &schema->fields[i], &bytes, err);
    if (rc) return rc;
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

/* The priority transform's settings and the default beta. */
static int priorities(const rd_workload_spec_t *spec, rd_table_config_t *tc, double *beta,
                      rd_error_t *err) {
  tc->alpha = spec->has_alpha ? spec->alpha : DEFAULT_ALPHA;
  if (!isfinite(tc->alpha) || tc->alpha < 0)
    return rd_error_set(err, RD_EINVAL, "alpha must be a finite number >= 0, not %g", tc->alpha);
  tc->epsilon = spec->has_epsilon ? spec->epsilon : DEFAULT_EPSILON;
  if (!isfinite(tc->epsilon) || tc->epsilon < 0)
    return rd_error_set(err, RD_EINVAL, "epsilon must be a finite number >= 0, not %g",
                        tc->epsilon);
  *beta = spec->has_beta ? spec->beta : DEFAULT_BETA;
  if (!(*beta >= 0 && *beta <= 1))
    return rd_error_set(err, RD_EINVAL, "beta must be in [0, 1], not %g", *beta);
  tc->max_priority = spec->has_max_priority ? spec->max_priority : DEFAULT_MAX_PRIORITY;
  if (!isfinite(tc->max_priority) || !(tc->max_priority > 0))
    return rd_error_set(err, RD_EINVAL, "max_priority must be a finite number > 0, not %g",
                        tc->max_priority);
  rd_fixed_t fixed;
  if (rd_fixed_init(&fixed, tc->max_priority, tc->capacity, err) != RD_OK) {
    if (err) err->code = RD_EINVAL; /* a bad spec, whatever the fixed-point layer calls it */
    return RD_EINVAL;
  }
  return RD_OK;
}

const char *rd_durability_name(rd_durability_t d) {
  switch (d) {
  case RD_DURABILITY_NONE: return "none";
  case RD_DURABILITY_CHECKPOINT: return "checkpoint";
  case RD_DURABILITY_JOURNAL: return "journal";
  }
  return "?";
}

int rd_durability_parse(const char *name) {
  for (int d = RD_DURABILITY_NONE; d <= RD_DURABILITY_JOURNAL; d++)
    if (name != NULL && strcmp(name, rd_durability_name((rd_durability_t)d)) == 0) return d;
  return -1;
}

/* The durability mode and checkpoint period. */
static int durability(const rd_config_t *cfg, const rd_workload_spec_t *spec,
                      rd_workload_config_t *wc, rd_error_t *err) {
  int d = spec->durability;
  if (d < 0) {
    d = rd_durability_parse(cfg->durability);
    if (d < 0)
      return rd_error_set(err, RD_EINVAL, "this server's --durability \"%s\" is not none, "
                          "checkpoint or journal", cfg->durability);
  } else if (d > RD_DURABILITY_JOURNAL) {
    return rd_error_set(err, RD_EINVAL, "durability %d is not none, checkpoint or journal", d);
  }
  wc->durability = (rd_durability_t)d;
  double iv = spec->has_checkpoint_interval ? spec->checkpoint_interval_s
                                            : (double)cfg->checkpoint_interval_s;
  if (!(iv >= 0 && iv <= 1e9))
    return rd_error_set(err, RD_EINVAL, "checkpoint_interval_s must be in [0, 1e9] seconds, "
                        "not %g", iv);
  wc->checkpoint_interval_s = iv;
  return RD_OK;
}

/* The hosted learner, read against the resolved table. */
static int learner(const rd_config_t *cfg, const rd_workload_spec_t *spec,
                   rd_workload_config_t *wc, rd_error_t *err) {
  if (spec->learner == NULL) return RD_OK;
  if (spec->learner_parse == NULL)
    return rd_error_set(err, RD_EINVAL, "the spec's learner section has no reader");
  wc->has_learner = 1;
  int rc = spec->learner_parse(spec->learner, &wc->table, wc->beta, cfg->learner_threads,
                               &wc->learner, err);
  if (rc) return rc;
  uint64_t wbytes = 0;
  rd_nn_spec_t ps;
  if (rd_learner_policy_spec(&wc->learner.learner, &ps, NULL) == RD_OK)
    wbytes = rd_nn_flat_bytes(&ps);
  if (wbytes + 1024 > cfg->max_message_bytes)
    return rd_error_set(err, RD_ETOOBIG, "the policy's weights are %llu bytes, more than this "
                        "server's --max-message-bytes %llu: actors could not fetch them",
                        (unsigned long long)wbytes, (unsigned long long)cfg->max_message_bytes);
  return RD_OK;
}

int rd_limiter_spec_resolve(const rd_limiter_spec_t *s, uint32_t capacity,
                            rd_limiter_config_t *out, rd_error_t *err) {
  memset(out, 0, sizeof *out);
  out->min_size_to_sample = s->min_size_to_sample ? s->min_size_to_sample : 1;
  if (out->min_size_to_sample > capacity)
    return rd_error_set(err, RD_EINVAL, "rate_limiter.min_size_to_sample %u is above the "
                        "capacity %u: nothing could ever be sampled", out->min_size_to_sample,
                        capacity);
  const double spi = s->samples_per_insert;
  if (!isfinite(spi) || spi < 0 || spi > 1e6)
    return rd_error_set(err, RD_EINVAL, "rate_limiter.samples_per_insert must be in [0, 1e6], "
                        "not %g", spi);
  const int diffs = s->has_min_diff || s->has_max_diff;
  if (spi == 0) { /* min size only, as Reverb's MinSize */
    if (diffs || s->has_error_buffer)
      return rd_error_set(err, RD_EINVAL, "rate_limiter.%s is set but samples_per_insert is 0 "
                          "(no ratio to keep)", s->has_error_buffer ? "error_buffer"
                          : s->has_min_diff ? "min_diff" : "max_diff");
    out->samples_per_insert = 1;
    out->min_diff = -INFINITY;
    out->max_diff = INFINITY;
    return RD_OK;
  }
  out->samples_per_insert = spi;
  if (s->has_error_buffer && diffs)
    return rd_error_set(err, RD_EINVAL, "rate_limiter: give error_buffer or min_diff/max_diff, "
                        "not both");
  if (s->has_error_buffer) {
    if (!isfinite(s->error_buffer) || s->error_buffer < 0)
      return rd_error_set(err, RD_EINVAL, "rate_limiter.error_buffer must be a finite number "
                          ">= 0, not %g", s->error_buffer);
    double offset = spi * out->min_size_to_sample;
    out->min_diff = offset - s->error_buffer;
    out->max_diff = offset + s->error_buffer;
  } else if (diffs) {
    out->min_diff = s->has_min_diff ? s->min_diff : -INFINITY;
    out->max_diff = s->has_max_diff ? s->max_diff : INFINITY;
  } else {
    return rd_error_set(err, RD_EINVAL, "rate_limiter.samples_per_insert %g needs an error "
                        "buffer: error_buffer, or min_diff and/or max_diff", spi);
  }
  return rd_limiter_config_check(out, err);
}

/* The table's rate limiter: the spec's, or a continuous learner's. */
static int limiter(const rd_workload_spec_t *spec, rd_workload_config_t *wc, rd_error_t *err) {
  const double learner_spi = wc->has_learner ? wc->learner.samples_per_insert : 0;
  if (spec->rate_limiter != NULL) {
    int rc = rd_limiter_spec_resolve(spec->rate_limiter, wc->table.capacity, &wc->limiter, err);
    if (rc) return rc;
    wc->has_limiter = 1;
    if (learner_spi > 0 && spec->rate_limiter->samples_per_insert != learner_spi)
      return rd_error_set(err, RD_EINVAL, "learner.samples_per_insert %g and "
                          "rate_limiter.samples_per_insert %g differ: the hosted learner samples "
                          "through the table's one rate limiter (give it in one place)",
                          learner_spi, spec->rate_limiter->samples_per_insert);
    return RD_OK;
  }
  if (learner_spi > 0) { /* what continuous mode always kept: S <= spi * I */
    wc->has_limiter = 1;
    wc->limiter.min_size_to_sample = wc->learner.min_size;
    wc->limiter.samples_per_insert = learner_spi;
    wc->limiter.min_diff = 0;
    wc->limiter.max_diff = INFINITY;
  }
  return RD_OK;
}

int rd_workload_spec_resolve(const rd_config_t *cfg, const rd_workload_spec_t *spec,
                             rd_workload_config_t *wc, rd_error_t *err) {
  memset(wc, 0, sizeof *wc);
  rd_table_config_t *tc = &wc->table;
  if (spec == NULL) return rd_error_set(err, RD_EINVAL, "no workload spec given");
  const char *name = spec->name ? spec->name : "";
  size_t name_len = strlen(name);
  if (name_len > RD_WORKLOAD_NAME_MAX)
    return rd_error_set(err, RD_EINVAL, "name is %zu bytes; at most %d", name_len,
                        RD_WORKLOAD_NAME_MAX);
  if (!valid_label(name, name_len))
    return rd_error_set(err, RD_EINVAL, "name is not UTF-8 text without control characters");

  rd_table_config_default(tc);
  int rc = fields_to_schema(spec, &tc->schema, err);
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
  if ((rc = priorities(spec, tc, &wc->beta, err)) != RD_OK) return rc;

  uint32_t batch_limit = cfg->max_batch < RD_TABLE_MAX_BATCH ? cfg->max_batch : RD_TABLE_MAX_BATCH;
  tc->max_batch = spec->max_batch ? spec->max_batch : batch_limit;
  if (tc->max_batch > batch_limit)
    return rd_error_set(err, RD_ETOOBIG, "max_batch %u is outside [1, %u] (this server's "
                        "--max-batch)", spec->max_batch, batch_limit);
  tc->seed = spec->seed;
  tc->threads = 1; /* calls run on gRPC threads; one table call = one thread */
  if ((rc = durability(cfg, spec, wc, err)) != RD_OK) return rc;
  if ((rc = learner(cfg, spec, wc, err)) != RD_OK) return rc;
  return limiter(spec, wc, err);
}

uint64_t rd_workload_config_charge(const rd_workload_config_t *wc, uint64_t *tree,
                                   uint64_t *rows, uint64_t *scratch, uint64_t *learner) {
  const rd_table_config_t *tc = &wc->table;
  *tree = rd_table_tree_memsize(tc); /* the CPU tree or the placement's replay module */
  *rows = rd_table_rows_memsize(tc); /* host rows, or the storage's host memory */
  *scratch = (uint64_t)tc->max_batch * SCRATCH_PER_ITEM;
  *learner = wc->has_learner ? rd_pipeline_memsize(&wc->learner, tc) : 0;
  return *tree + *rows + *scratch + *learner;
}

uint64_t rd_workload_config_gpu_bytes(const rd_workload_config_t *wc) {
  const rd_table_config_t *tc = &wc->table;
  uint64_t bytes = 0;
  if (tc->rmm != NULL && rd_gpu_rmm_device(tc->rmm) >= 0)
    bytes += rd_gpu_rmm_device_bytes(tc->capacity, tc->fanout);
  if (tc->storage != NULL && rd_gpu_storage_device(tc->storage) >= 0) {
    size_t row = 0;
    for (uint32_t f = 0; f < tc->schema.n_fields; f++) row += rd_field_bytes(&tc->schema.fields[f]);
    bytes += rd_gpu_storage_device_bytes(tc->capacity, row);
  }
  if (wc->has_learner && wc->learner.learner_kind == RD_LEARNER_ON_GPU)
    bytes += rd_pipeline_memsize(&wc->learner, tc);
  return bytes;
}
