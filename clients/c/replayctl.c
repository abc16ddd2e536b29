/* replayctl.c - inspect and operate a replayd server.
 *
 *   replayctl [--server HOST:PORT] [--json] [--timeout S] COMMAND [ARGS]
 *
 * Commands: status, ls, describe ID, devices, rm ID [--token T], profiles
 * [--clear | import FILE | export], plan SPEC [--assume gpu=FILE|fpga=PART]. Human
 * output is aligned tables; --json prints exactly one JSON document on
 * stdout. Errors go to stderr as "replayctl: STATUS: message". Exit 0 ok, 1
 * the server or the call failed, 2 usage error (see replayctl_cli.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_writer.h"
#include "replayctl_cli.h"
#include "replayctl_top.h"
#include "replayd_client.h"
#include "replayctl_tenant.h"

#ifndef RDC_VERSION
#define RDC_VERSION "unknown"
#endif

/* ------------------------------------------------------------------ */
/* Aligned tables                                                      */
/* ------------------------------------------------------------------ */

#define TBL_MAX_COLS 10

/* A table is collected whole, then printed with each column as wide as
 * its widest cell. Cells are copied, so callers may format into stack
 * buffers. */
typedef struct {
  int n_cols;
  const char *head[TBL_MAX_COLS];
  int right[TBL_MAX_COLS]; /* right-align (numbers) */
  char **cells;            /* n_rows * n_cols */
  size_t n_rows, cap_rows;
} table_t;

static void tbl_init(table_t *t, int n_cols, const char *const *head, const int *right) {
  memset(t, 0, sizeof *t);
  t->n_cols = n_cols;
  for (int i = 0; i < n_cols; i++) {
    t->head[i] = head[i];
    t->right[i] = right ? right[i] : 0;
  }
}

static void oom(void) {
  fputs("replayctl: out of memory\n", stderr);
  exit(RCTL_EXIT_CALL);
}

/* Control characters (a tab or newline in a workload name) would break
 * the alignment or fake extra lines: show them as '?'. */
static void sanitize(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

static void tbl_row(table_t *t, const char *const *cells) {
  if (t->n_rows == t->cap_rows) {
    size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
    char **c = realloc(t->cells, cap * (size_t)t->n_cols * sizeof *c);
    if (c == NULL) oom();
    t->cells = c;
    t->cap_rows = cap;
  }
  for (int i = 0; i < t->n_cols; i++) {
    char *s = strdup(cells[i] ? cells[i] : "");
    if (s == NULL) oom();
    sanitize(s);
    t->cells[t->n_rows * (size_t)t->n_cols + (size_t)i] = s;
  }
  t->n_rows++;
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t width(const char *s) {
  size_t w = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xc0) != 0x80) w++;
  return w;
}

static void put_cell(const char *s, size_t w, int right, int last) {
  size_t pad = w - width(s);
  if (right)
    printf("%*s%s", (int)pad, "", s);
  else if (last)
    fputs(s, stdout); /* no trailing blanks */
  else
    printf("%s%*s", s, (int)pad, "");
}

static void tbl_print(table_t *t, const char *indent) {
  size_t w[TBL_MAX_COLS];
  for (int i = 0; i < t->n_cols; i++) {
    w[i] = width(t->head[i]);
    for (size_t r = 0; r < t->n_rows; r++) {
      size_t cw = width(t->cells[r * (size_t)t->n_cols + (size_t)i]);
      if (cw > w[i]) w[i] = cw;
    }
  }
  for (size_t r = 0; r <= t->n_rows; r++) {
    fputs(indent, stdout);
    for (int i = 0; i < t->n_cols; i++) {
      const char *s = r == 0 ? t->head[i] : t->cells[(r - 1) * (size_t)t->n_cols + (size_t)i];
      if (i > 0) fputs("  ", stdout);
      put_cell(s, w[i], t->right[i], i == t->n_cols - 1);
    }
    fputc('\n', stdout);
  }
  for (size_t k = 0; k < t->n_rows * (size_t)t->n_cols; k++) free(t->cells[k]);
  free(t->cells);
  t->cells = NULL;
}

/* Two-column "key  value" lines. */
static void kv(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kv(const char *key, const char *fmt, ...) {
  printf("%-14s", key);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
}

/* ------------------------------------------------------------------ */
/* Formatting                                                          */
/* ------------------------------------------------------------------ */

static void fmt_shape(char *buf, size_t cap, const rdc_field_t *f) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (uint32_t d = 0; d < f->rank && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, d ? ",%" PRIu32 : "%" PRIu32, f->shape[d]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* "[64,64]": a learner's layer widths. */
static void fmt_widths(char *buf, size_t cap, uint32_t n, const uint32_t *v) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ",%" PRIu32 : "%" PRIu32, v[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

static void fmt_duration(char *buf, size_t cap, double s) {
  if (!(s >= 0) || s > 1e12) {
    snprintf(buf, cap, "?");
    return;
  }
  uint64_t t = (uint64_t)s;
  uint64_t d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
  if (d > 0)
    snprintf(buf, cap, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", d, h, m, sec);
  else if (h > 0)
    snprintf(buf, cap, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", h, m, sec);
  else if (m > 0)
    snprintf(buf, cap, "%" PRIu64 "m %02" PRIu64 "s", m, sec);
  else
    snprintf(buf, cap, "%.1fs", s);
}

static void fmt_bytes(char *buf, size_t cap, uint64_t b) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, cap, "%" PRIu64 " B", b);
  else
    snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static void fmt_time(char *buf, size_t cap, int64_t unix_s) {
  time_t t = (time_t)unix_s;
  struct tm tm;
  if (unix_s <= 0 || gmtime_r(&t, &tm) == NULL || strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    snprintf(buf, cap, "unknown");
}

/* An optional scalar: the value, or "default" when the server left it
 * unset (a normalised spec always sets it). */
static void fmt_opt(char *buf, size_t cap, int has, double v) {
  if (has)
    snprintf(buf, cap, "%.10g", v);
  else
    snprintf(buf, cap, "default");
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */
/* ------------------------------------------------------------------ */

static void json_opt(jw_t *w, const char *key, int has, double v) {
  jw_key(w, key);
  if (has)
    jw_double(w, v);
  else
    jw_null(w);
}

static void json_counters(jw_t *w, const rdc_counters_t *c) {
  jw_object_begin(w);
  jw_key(w, "size");
  jw_u64(w, c->size);
  jw_key(w, "inserts");
  jw_u64(w, c->inserts);
  jw_key(w, "samples");
  jw_u64(w, c->samples);
  jw_key(w, "updates");
  jw_u64(w, c->updates);
  jw_key(w, "stale_updates");
  jw_u64(w, c->stale_updates);
  jw_key(w, "bytes");
  jw_u64(w, c->bytes);
  jw_object_end(w);
}

static void json_widths(jw_t *w, const char *key, uint32_t n, const uint32_t *v) {
  jw_key(w, key);
  jw_array_begin(w);
  for (uint32_t i = 0; i < n; i++) jw_u64(w, v[i]);
  jw_array_end(w);
}

/* The learner section as the server normalised it; unset optional values
 * (those that do not apply to the algorithm) are null. */
static void json_learner(jw_t *w, const rdc_learner_spec_t *l) {
  jw_object_begin(w);
  jw_key(w, "algorithm");
  jw_string(w, l->algorithm);
  json_widths(w, "hidden", l->n_hidden, l->hidden);
  json_widths(w, "critic_hidden", l->n_critic_hidden, l->critic_hidden);
  jw_key(w, "activation");
  jw_string(w, l->activation);
  jw_key(w, "batch_size");
  jw_u64(w, l->batch_size);
  json_opt(w, "lr", l->has_lr, l->lr);
  json_opt(w, "critic_lr", l->has_critic_lr, l->critic_lr);
  json_opt(w, "gamma", l->has_gamma, l->gamma);
  jw_key(w, "target_update_period");
  jw_u64(w, l->target_update_period);
  json_opt(w, "tau", l->has_tau, l->tau);
  jw_key(w, "relaxation_depth");
  jw_u64(w, l->relaxation_depth);
  json_opt(w, "grad_clip", l->has_grad_clip, l->grad_clip);
  json_opt(w, "huber_delta", l->has_huber_delta, l->huber_delta);
  jw_key(w, "double_dqn");
  if (l->has_double_dqn)
    jw_bool(w, l->double_dqn);
  else
    jw_null(w);
  jw_key(w, "num_actions");
  jw_u64(w, l->num_actions);
  json_opt(w, "action_low", l->has_action_low, l->action_low);
  json_opt(w, "action_high", l->has_action_high, l->action_high);
  jw_key(w, "samples_per_insert");
  jw_double(w, l->samples_per_insert);
  jw_key(w, "min_size");
  jw_u64(w, l->min_size);
  jw_object_end(w);
}

static void json_learner_counters(jw_t *w, const rdc_learner_counters_t *c) {
  jw_object_begin(w);
  jw_key(w, "steps");
  jw_u64(w, c->steps);
  jw_key(w, "weight_version");
  jw_u64(w, c->weight_version);
  jw_key(w, "loss");
  jw_double(w, c->loss);
  jw_key(w, "steps_per_second");
  jw_double(w, c->steps_per_second);
  jw_key(w, "skipped_steps");
  jw_u64(w, c->skipped_steps);
  jw_key(w, "late_updates");
  jw_u64(w, c->late_updates);
  jw_object_end(w);
}

static void json_placement(jw_t *w, const rdc_placement_t *p);

static void json_checkpoint(jw_t *w, const rdc_checkpoint_info_t *c) {
  jw_object_begin(w);
  jw_key(w, "generation");
  jw_u64(w, c->generation);
  jw_key(w, "taken_unix_ms");
  jw_i64(w, c->taken_unix_ms);
  jw_key(w, "bytes");
  jw_u64(w, c->bytes);
  jw_key(w, "seconds");
  jw_double(w, c->seconds);
  jw_key(w, "items");
  jw_u64(w, c->items);
  jw_key(w, "learner_full");
  jw_bool(w, c->learner_full);
  jw_key(w, "pause_ms");
  jw_double(w, c->pause_ms);
  jw_object_end(w);
}

static void json_durability(jw_t *w, const rdc_durability_t *d) {
  jw_object_begin(w);
  jw_key(w, "mode");
  jw_string(w, d->mode);
  jw_key(w, "checkpoint_interval_s");
  jw_double(w, d->checkpoint_interval_s);
  jw_key(w, "last_checkpoint");
  if (d->has_last)
    json_checkpoint(w, &d->last);
  else
    jw_null(w);
  jw_key(w, "checkpoints");
  jw_u64(w, d->checkpoints);
  jw_key(w, "last_error");
  jw_string(w, d->last_error);
  jw_key(w, "restored");
  jw_string(w, d->restored);
  jw_key(w, "journal_records");
  jw_u64(w, d->journal_records);
  jw_key(w, "journal_commits");
  jw_u64(w, d->journal_commits);
  jw_key(w, "journal_commit_ms_max");
  jw_double(w, d->journal_commit_ms_max);
  jw_key(w, "journal_error");
  jw_string(w, d->journal_error);
  jw_object_end(w);
}

/* Unbounded diffs are null (JSON has no infinity). */
static void json_rate_limiter(jw_t *w, const rdc_limiter_state_t *l) {
  jw_object_begin(w);
  jw_key(w, "min_size_to_sample");
  jw_u64(w, l->config.min_size_to_sample);
  jw_key(w, "samples_per_insert");
  jw_double(w, l->config.samples_per_insert);
  jw_key(w, "min_diff");
  jw_double(w, l->config.has_min_diff ? l->config.min_diff : -INFINITY);
  jw_key(w, "max_diff");
  jw_double(w, l->config.has_max_diff ? l->config.max_diff : INFINITY);
  jw_key(w, "inserted");
  jw_u64(w, l->inserted);
  jw_key(w, "sampled");
  jw_u64(w, l->sampled);
  jw_key(w, "ratio");
  jw_double(w, l->ratio);
  jw_key(w, "blocked_inserts");
  jw_u64(w, l->blocked_inserts);
  jw_key(w, "blocked_samples");
  jw_u64(w, l->blocked_samples);
  jw_key(w, "insert_wait_seconds");
  jw_double(w, l->insert_wait_s);
  jw_key(w, "sample_wait_seconds");
  jw_double(w, l->sample_wait_s);
  jw_key(w, "insert_waits");
  jw_u64(w, l->insert_waits);
  jw_key(w, "sample_waits");
  jw_u64(w, l->sample_waits);
  jw_object_end(w);
}

/* The rate limiter, for people: its rule and what it did. */
static void describe_rate_limiter(const rdc_limiter_state_t *l) {
  const rdc_rate_limiter_t *c = &l->config;
  printf("\nrate limiter\n");
  kv("  min size", "%" PRIu32 " items before sampling", c->min_size_to_sample);
  if (c->samples_per_insert > 0) {
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, c->has_min_diff && isfinite(c->min_diff) ? "%.10g" : "-inf",
             c->min_diff);
    snprintf(hi, sizeof hi, c->has_max_diff && isfinite(c->max_diff) ? "%.10g" : "+inf",
             c->max_diff);
    kv("  ratio", "%.10g samples per insert; inserted x ratio - sampled within [%s, %s]",
       c->samples_per_insert, lo, hi);
  } else {
    kv("  ratio", "none (min size only)");
  }
  kv("  now", "%" PRIu64 " sampled / %" PRIu64 " inserted = %.4g", l->sampled, l->inserted,
     l->ratio);
  kv("  blocked", "%" PRIu32 " inserts, %" PRIu32 " samples waiting", l->blocked_inserts,
     l->blocked_samples);
  kv("  waited", "%.3f s by %" PRIu64 " inserts, %.3f s by %" PRIu64 " samples",
     l->insert_wait_s, l->insert_waits, l->sample_wait_s, l->sample_waits);
}

static void json_workload(jw_t *w, const rdc_workload_t *wl) {
  const rdc_spec_t *s = &wl->spec;
  jw_object_begin(w);
  jw_key(w, "id");
  jw_string(w, wl->id);
  jw_key(w, "name");
  jw_string(w, s->name);
  jw_key(w, "created_unix");
  jw_i64(w, wl->created_unix);
  jw_key(w, "tenant");
  jw_string(w, wl->tenant);
  jw_key(w, "capacity");
  jw_u64(w, s->capacity);
  jw_key(w, "fanout");
  jw_u64(w, s->fanout);
  json_opt(w, "alpha", s->has_alpha, s->alpha);
  json_opt(w, "epsilon", s->has_epsilon, s->epsilon);
  json_opt(w, "beta", s->has_beta, s->beta);
  json_opt(w, "max_priority", s->has_max_priority, s->max_priority);
  jw_key(w, "seed");
  jw_u64(w, s->seed);
  jw_key(w, "max_batch");
  jw_u64(w, s->max_batch);
  jw_key(w, "fields");
  jw_array_begin(w);
  for (uint32_t i = 0; i < s->n_fields; i++) {
    const rdc_field_t *f = &s->fields[i];
    jw_object_begin(w);
    jw_key(w, "name");
    jw_string(w, f->name);
    jw_key(w, "dtype");
    jw_string(w, rdc_dtype_name((int)f->dtype));
    jw_key(w, "shape");
    jw_array_begin(w);
    for (uint32_t d = 0; d < f->rank; d++) jw_u64(w, f->shape[d]);
    jw_array_end(w);
    jw_key(w, "bytes_per_row");
    jw_u64(w, rdc_field_bytes(f));
    jw_object_end(w);
  }
  jw_array_end(w);
  jw_key(w, "counters");
  json_counters(w, &wl->counters);
  /* null for plain replay workloads, so every document has the keys. */
  jw_key(w, "learner");
  if (s->has_learner)
    json_learner(w, &s->learner);
  else
    jw_null(w);
  jw_key(w, "learner_counters");
  if (wl->has_learner_counters)
    json_learner_counters(w, &wl->learner);
  else
    jw_null(w);
  jw_key(w, "placement");
  if (wl->has_placement)
    json_placement(w, &wl->placement);
  else
    jw_null(w);
  jw_key(w, "durability");
  if (wl->has_durability)
    json_durability(w, &wl->durability);
  else
    jw_null(w);
  jw_key(w, "rate_limiter");
  if (wl->has_rate_limiter)
    json_rate_limiter(w, &wl->rate_limiter);
  else
    jw_null(w);
  jw_object_end(w);
}

static void json_device(jw_t *w, const rdc_device_t *d) {
  jw_object_begin(w);
  jw_key(w, "kind");
  jw_string(w, d->kind);
  jw_key(w, "name");
  jw_string(w, d->name);
  jw_key(w, "fingerprint");
  jw_string(w, d->fingerprint);
  jw_key(w, "status");
  jw_string(w, d->status);
  jw_key(w, "capabilities");
  jw_string(w, d->capabilities);
  jw_key(w, "model");
  jw_string(w, d->model);
  jw_key(w, "cores");
  jw_u64(w, d->cores);
  jw_key(w, "memory_bytes");
  jw_u64(w, d->memory_bytes);
  jw_key(w, "isa");
  jw_string(w, d->isa);
  jw_object_end(w);
}

static void json_placement(jw_t *w, const rdc_placement_t *p) {
  jw_object_begin(w);
  jw_key(w, "mapping");
  jw_string(w, p->mapping);
  jw_key(w, "running");
  jw_string(w, p->running);
  jw_key(w, "learner_device");
  jw_string(w, p->learner_device);
  jw_key(w, "rmm_device");
  jw_string(w, p->rmm_device);
  jw_key(w, "storage_device");
  jw_string(w, p->storage_device);
  jw_key(w, "predicted_gps");
  jw_double(w, p->predicted_gps);
  jw_key(w, "measured_gps");
  if (p->measured_gps > 0)
    jw_double(w, p->measured_gps);
  else
    jw_null(w);
  jw_key(w, "bottleneck");
  jw_string(w, p->bottleneck);
  jw_key(w, "batch");
  jw_u64(w, p->batch);
  jw_key(w, "learner_threads");
  jw_u64(w, p->learner_threads);
  jw_key(w, "learner_cpus");
  jw_string(w, p->learner_cpus);
  jw_key(w, "sampler_cpus");
  jw_string(w, p->sampler_cpus);
  jw_key(w, "profile_cache_hit");
  jw_bool(w, p->profile_cache_hit);
  jw_key(w, "profiles_measured");
  jw_u64(w, p->profiles_measured);
  jw_key(w, "register_ms");
  jw_double(w, p->register_ms);
  jw_key(w, "note");
  jw_string(w, p->note);
  jw_key(w, "explain");
  jw_string(w, p->explain);
  jw_key(w, "table");
  jw_array_begin(w);
  for (size_t i = 0; i < p->n_rows; i++) {
    const rdc_platform_row_t *r = &p->rows[i];
    jw_object_begin(w);
    jw_key(w, "device");
    jw_string(w, r->device);
    jw_key(w, "present");
    jw_bool(w, r->present);
    jw_key(w, "learner_seconds");
    if (r->learner_s > 0) jw_double(w, r->learner_s); else jw_null(w);
    jw_key(w, "learner_source");
    jw_string(w, r->learner_source);
    jw_key(w, "rmm_seconds");
    if (r->rmm_s > 0) jw_double(w, r->rmm_s); else jw_null(w);
    jw_key(w, "rmm_source");
    jw_string(w, r->rmm_source);
    jw_key(w, "fingerprint");
    jw_string(w, r->fingerprint);
    jw_key(w, "detail");
    jw_string(w, r->detail);
    jw_object_end(w);
  }
  jw_array_end(w);
  jw_key(w, "history");
  jw_array_begin(w);
  for (size_t i = 0; i < p->n_history; i++) {
    const rdc_placement_event_t *e = &p->history[i];
    jw_object_begin(w);
    jw_key(w, "unix_ms");
    jw_i64(w, e->unix_ms);
    jw_key(w, "moved");
    jw_bool(w, e->moved);
    jw_key(w, "from");
    jw_string(w, e->from);
    jw_key(w, "to");
    jw_string(w, e->to);
    jw_key(w, "predicted_gps_from");
    jw_double(w, e->gps_from);
    jw_key(w, "predicted_gps_to");
    jw_double(w, e->gps_to);
    jw_key(w, "predicted_total_from");
    jw_double(w, e->total_from);
    jw_key(w, "predicted_total_to");
    jw_double(w, e->total_to);
    jw_key(w, "reason");
    jw_string(w, e->reason);
    jw_object_end(w);
  }
  jw_array_end(w);
  jw_key(w, "history_total");
  jw_u64(w, p->history_total);
  jw_object_end(w);
}

/* ------------------------------------------------------------------ */
/* Commands                                                            */
/* ------------------------------------------------------------------ */

static int call_failed(const rdc_error_t *e) {
  if (e->code > 0)
    fprintf(stderr, "replayctl: %s: %s\n", rdc_strerror(e->code), e->msg);
  else
    fprintf(stderr, "replayctl: %s\n", e->msg[0] ? e->msg : rdc_strerror(e->code));
  return RCTL_EXIT_CALL;
}

static void devices_table(const rdc_server_info_t *info, const char *indent) {
  static const char *const head[] = {"KIND", "NAME", "FINGERPRINT", "STATUS"};
  table_t t;
  tbl_init(&t, 4, head, NULL);
  for (size_t i = 0; i < info->n_devices; i++) {
    const rdc_device_t *d = &info->devices[i];
    const char *row[] = {d->kind, d->name, d->fingerprint, d->status};
    tbl_row(&t, row);
  }
  tbl_print(&t, indent);
}

/* Where a registered workload ran and why (the re-mapping's events). */
static void print_history(const rdc_placement_t *p, const char *indent) {
  char k[64];
  snprintf(k, sizeof k, "%shistory", indent);
  kv(k, "%zu event%s%s", p->n_history, p->n_history == 1 ? "" : "s",
     p->history_total > p->n_history ? " (the newest; older ones dropped)" : "");
  static const char *const head[] = {"TIME (UTC)", "MOVE", "PREDICTED GPS", "REASON"};
  table_t t;
  tbl_init(&t, 4, head, NULL);
  for (size_t i = 0; i < p->n_history; i++) {
    const rdc_placement_event_t *e = &p->history[i];
    char when[40], move[32], gps[64], reason[sizeof e->reason];
    time_t s = (time_t)(e->unix_ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(when + n, sizeof when - n, ".%03d", (int)(e->unix_ms % 1000));
    if (e->moved)
      snprintf(move, sizeof move, "%s -> %s", e->from, e->to);
    else if (!e->from[0])
      snprintf(move, sizeof move, "placed %s", e->to);
    else
      snprintf(move, sizeof move, "kept %s", e->to);
    snprintf(gps, sizeof gps, "%.4g -> %.4g", e->gps_from, e->gps_to);
    snprintf(reason, sizeof reason, "%s", e->reason);
    sanitize(reason);
    const char *row[] = {when, move, gps, reason};
    tbl_row(&t, row);
  }
  char in2[64];
  snprintf(in2, sizeof in2, "%s  ", indent);
  tbl_print(&t, in2);
}

/* The placement section of describe and the answer of plan. */
static void print_placement(const rdc_placement_t *p, const char *indent) {
  static const char *const head[] = {"DEVICE", "LEARNER S", "FROM", "RMM S", "FROM",
                                     "FINGERPRINT"};
  static const int right[] = {0, 1, 0, 1, 0, 0};
  table_t t;
  tbl_init(&t, 6, head, right);
  for (size_t i = 0; i < p->n_rows; i++) {
    const rdc_platform_row_t *r = &p->rows[i];
    char ls[32], rs[32];
    if (!r->present) {
      const char *row[] = {r->device, "(absent)", "", "", "", ""};
      tbl_row(&t, row);
      continue;
    }
    if (r->learner_s > 0) snprintf(ls, sizeof ls, "%.3e", r->learner_s); else snprintf(ls, sizeof ls, "-");
    if (r->rmm_s > 0) snprintf(rs, sizeof rs, "%.3e", r->rmm_s); else snprintf(rs, sizeof rs, "-");
    const char *row[] = {r->device, ls, r->learner_source, rs, r->rmm_source, r->fingerprint};
    tbl_row(&t, row);
  }
  tbl_print(&t, indent);
  for (size_t i = 0; i < p->n_rows; i++)
    if (p->rows[i].present && p->rows[i].detail[0]) {
      char d[300];
      snprintf(d, sizeof d, "%s", p->rows[i].detail);
      sanitize(d);
      printf("%s%s: %s\n", indent, p->rows[i].device, d);
    }
  char k[64];
  snprintf(k, sizeof k, "%smapping", indent);
  if (p->mapping[0])
    kv(k, "%s (learner %s, rmm %s, storage %s)", p->mapping, p->learner_device, p->rmm_device,
       p->storage_device);
  else
    kv(k, "none");
  snprintf(k, sizeof k, "%srunning", indent);
  kv(k, "%s", p->running);
  snprintf(k, sizeof k, "%snote", indent);
  kv(k, "%s", p->note);
  snprintf(k, sizeof k, "%spredicted", indent);
  kv(k, "%.1f steps/s (batch %" PRIu32 ", %s-bound, learner on %" PRIu32 " thread%s)",
     p->predicted_gps, p->batch, p->bottleneck[0] ? p->bottleneck : "?", p->learner_threads,
     p->learner_threads == 1 ? "" : "s");
  snprintf(k, sizeof k, "%scpus", indent);
  kv(k, "learner %s, sampler %s", p->learner_cpus[0] ? p->learner_cpus : "unpinned",
     p->sampler_cpus[0] ? p->sampler_cpus : "unpinned");
  snprintf(k, sizeof k, "%smeasured", indent);
  if (p->measured_gps > 0) {
    double e = p->predicted_gps > 0 ? fabs(p->predicted_gps - p->measured_gps) / p->measured_gps
                                    : 0;
    kv(k, "%.1f steps/s (prediction off by %.1f%%)", p->measured_gps, e * 100);
  } else {
    kv(k, "- (no training yet)");
  }
  snprintf(k, sizeof k, "%sprofiles", indent);
  kv(k, "%s, %" PRIu32 " measured, %.0f ms", p->profile_cache_hit ? "cache hit" : "cache miss",
     p->profiles_measured, p->register_ms);
  if (p->explain[0]) {
    char ex[RDC_EXPLAIN_MAX];
    snprintf(ex, sizeof ex, "%s", p->explain);
    sanitize(ex);
    snprintf(k, sizeof k, "%swhy", indent);
    kv(k, "%s", ex);
  }
  if (p->n_history > 0) print_history(p, indent);
}

static void devices_list_table(const rdc_device_t *d, size_t n) {
  static const char *const head[] = {"KIND",   "NAME",  "FINGERPRINT", "CORES",
                                     "MEMORY", "ISA",   "RUNS",        "STATUS"};
  static const int right[] = {0, 0, 0, 1, 1, 0, 0, 0};
  table_t t;
  tbl_init(&t, 8, head, right);
  for (size_t i = 0; i < n; i++) {
    char cores[16], mem[32];
    snprintf(cores, sizeof cores, "%" PRIu32, d[i].cores);
    fmt_bytes(mem, sizeof mem, d[i].memory_bytes);
    const char *row[] = {d[i].kind, d[i].model[0] ? d[i].model : d[i].name, d[i].fingerprint,
                         cores, mem, d[i].isa, d[i].capabilities, d[i].status};
    tbl_row(&t, row);
  }
  tbl_print(&t, "");
}

static int cmd_status(rdc_client_t *c, const rctl_opts_t *o) {
  rdc_server_info_t *info;
  rdc_error_t e;
  if (rdc_server_info(c, &info, &e) != RDC_OK) return call_failed(&e);
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_object_begin(&w);
    jw_key(&w, "server");
    jw_string(&w, o->server);
    jw_key(&w, "version");
    jw_string(&w, info->version);
    jw_key(&w, "uptime_seconds");
    jw_double(&w, info->uptime_s);
    jw_key(&w, "workloads");
    jw_u64(&w, info->workload_count);
    jw_key(&w, "devices");
    jw_array_begin(&w);
    for (size_t i = 0; i < info->n_devices; i++) json_device(&w, &info->devices[i]);
    jw_array_end(&w);
    jw_object_end(&w);
    jw_finish(&w);
  } else {
    char up[64];
    fmt_duration(up, sizeof up, info->uptime_s);
    kv("server", "%s", o->server);
    kv("version", "%s", info->version);
    kv("uptime", "%s", up);
    kv("workloads", "%zu", info->workload_count);
    kv("devices", "%zu", info->n_devices);
    if (info->n_devices > 0) devices_table(info, "  ");
  }
  rdc_server_info_free(info);
  return RCTL_EXIT_OK;
}

static int cmd_devices(rdc_client_t *c, const rctl_opts_t *o) {
  rdc_device_t *devs;
  size_t n;
  rdc_error_t e;
  if (rdc_list_devices(c, &devs, &n, &e) != RDC_OK) return call_failed(&e);
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_object_begin(&w);
    jw_key(&w, "devices");
    jw_array_begin(&w);
    for (size_t i = 0; i < n; i++) json_device(&w, &devs[i]);
    jw_array_end(&w);
    jw_object_end(&w);
    jw_finish(&w);
  } else {
    devices_list_table(devs, n);
  }
  rdc_devices_free(devs);
  return RCTL_EXIT_OK;
}

/* Read a whole file of at most max bytes (NUL-terminated). */
static char *read_file(const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replayctl: cannot read %s: %s\n", path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(max + 2);
  if (buf == NULL) oom();
  size_t n = fread(buf, 1, max + 1, f);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "replayctl: cannot read %s\n", path);
    free(buf);
    return NULL;
  }
  if (n > max) {
    fprintf(stderr, "replayctl: %s is larger than %zu bytes\n", path, max);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

#define IMPORT_MAX (16u << 20) /* the server's limit (RD_IMPORT_MAX_BYTES) */
#define GPU_FILE_MAX (1u << 20) /* the server's RD_PLAN_GPU_MAX_BYTES */

static int cmd_profiles(rdc_client_t *c, const rctl_opts_t *o, const char *token) {
  rdc_error_t e;
  if (o->clear) {
    uint64_t removed = 0;
    if (rdc_clear_profiles(c, token, &removed, &e) != RDC_OK) return call_failed(&e);
    if (o->json) {
      jw_print_u64(stdout, "removed", removed);
    } else {
      printf("cleared %" PRIu64 " profiles\n", removed);
    }
    return RCTL_EXIT_OK;
  }
  if (o->n_args > 0 && strcmp(o->args[0], "export") == 0) {
    char *buf;
    size_t len;
    if (rdc_export_profiles(c, token, &buf, &len, NULL, &e) != RDC_OK) return call_failed(&e);
    fwrite(buf, 1, len, stdout); /* JSON lines either way */
    free(buf);
    return RCTL_EXIT_OK;
  }
  if (o->n_args > 0) { /* import FILE */
    size_t len;
    char *buf = read_file(o->args[1], IMPORT_MAX, &len);
    if (buf == NULL) return RCTL_EXIT_CALL;
    uint64_t imported = 0;
    int rc = rdc_import_profiles(c, token, buf, len, &imported, &e);
    free(buf);
    if (rc != RDC_OK) return call_failed(&e);
    if (o->json) {
      jw_print_u64(stdout, "imported", imported);
    } else {
      printf("imported %" PRIu64 " profiles\n", imported);
    }
    return RCTL_EXIT_OK;
  }
  rdc_profile_t *p;
  size_t n;
  if (rdc_list_profiles(c, token, &p, &n, &e) != RDC_OK) return call_failed(&e);
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_object_begin(&w);
    jw_key(&w, "profiles");
    jw_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
      jw_object_begin(&w);
      jw_key(&w, "device");
      jw_string(&w, p[i].device);
      jw_key(&w, "primitive");
      jw_string(&w, p[i].primitive);
      jw_key(&w, "threads");
      jw_u64(&w, p[i].threads);
      jw_key(&w, "batch");
      jw_u64(&w, p[i].batch);
      jw_key(&w, "capacity");
      jw_u64(&w, p[i].capacity);
      jw_key(&w, "fanout");
      jw_u64(&w, p[i].fanout);
      jw_key(&w, "algorithm");
      jw_string(&w, p[i].algorithm);
      jw_key(&w, "network");
      jw_string(&w, p[i].network);
      jw_key(&w, "build");
      jw_string(&w, p[i].build);
      jw_key(&w, "latency_s");
      jw_double(&w, p[i].latency_s);
      jw_key(&w, "reps");
      jw_u64(&w, p[i].reps);
      jw_key(&w, "items");
      jw_u64(&w, p[i].items);
      jw_key(&w, "source");
      jw_string(&w, p[i].source);
      jw_key(&w, "measured_unix");
      jw_i64(&w, p[i].measured_unix);
      jw_object_end(&w);
    }
    jw_array_end(&w);
    jw_object_end(&w);
    jw_finish(&w);
  } else {
    static const char *const head[] = {"DEVICE", "PRIMITIVE", "THREADS", "NETWORK", "BATCH",
                                       "CAPACITY", "K", "LATENCY S", "SOURCE"};
    static const int right[] = {0, 0, 1, 0, 1, 1, 1, 1, 0};
    table_t t;
    tbl_init(&t, 9, head, right);
    for (size_t i = 0; i < n; i++) {
      char th[16], b[16], cap[16], k[16], lat[32];
      snprintf(th, sizeof th, "%" PRIu32, p[i].threads);
      snprintf(b, sizeof b, "%" PRIu32, p[i].batch);
      snprintf(cap, sizeof cap, "%" PRIu32, p[i].capacity);
      snprintf(k, sizeof k, "%" PRIu32, p[i].fanout);
      snprintf(lat, sizeof lat, "%.3e", p[i].latency_s);
      const char *row[] = {p[i].device, p[i].primitive, th, p[i].network[0] ? p[i].network : "-",
                           b, cap, k, lat, p[i].source};
      tbl_row(&t, row);
    }
    tbl_print(&t, "");
  }
  rdc_profiles_free(p);
  return RCTL_EXIT_OK;
}

static int cmd_plan(rdc_client_t *c, const rctl_opts_t *o, const char *token) {
  rdc_spec_t *spec = malloc(sizeof *spec);
  rdc_placement_t *pl = malloc(sizeof *pl);
  if (spec == NULL || pl == NULL) oom();
  char msg[256];
  int rc = RCTL_EXIT_OK;
  char *gpu = NULL;
  size_t gpu_len = 0;
  const char *fpga = NULL;
  if (rctl_parse_plan_spec(o->args[0], spec, msg, sizeof msg) != 0) {
    fprintf(stderr, "replayctl: %s\n", msg);
    rc = RCTL_EXIT_USAGE;
    goto out;
  }
  for (int i = 0; i < o->n_assume; i++) {
    char kind;
    const char *v;
    rctl_parse_assume(o->assume[i], &kind, &v, msg, sizeof msg); /* checked when parsed */
    if (kind == 'f') {
      fpga = v;
    } else {
      free(gpu);
      gpu = read_file(v, GPU_FILE_MAX, &gpu_len);
      if (gpu == NULL) {
        rc = RCTL_EXIT_CALL;
        goto out;
      }
    }
  }
  rdc_error_t e;
  if (rdc_plan(c, token, spec, gpu, gpu_len, fpga, 0, pl, &e) != RDC_OK) {
    rc = call_failed(&e);
    goto out;
  }
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    json_placement(&w, pl);
    jw_finish(&w);
  } else {
    print_placement(pl, "");
  }
out:
  free(gpu);
  free(spec);
  free(pl);
  return rc;
}

static int cmd_ls(rdc_client_t *c, const rctl_opts_t *o) {
  rdc_workload_t *items;
  size_t n;
  rdc_error_t e;
  if (rdc_list(c, &items, &n, &e) != RDC_OK) return call_failed(&e);
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_object_begin(&w);
    jw_key(&w, "workloads");
    jw_array_begin(&w);
    for (size_t i = 0; i < n; i++) json_workload(&w, &items[i]);
    jw_array_end(&w);
    jw_object_end(&w);
    jw_finish(&w);
  } else {
    static const char *const head[] = {"ID",      "NAME",    "SIZE/CAPACITY", "INSERTS",
                                       "SAMPLES", "UPDATES", "STALE"};
    static const int right[] = {0, 0, 1, 1, 1, 1, 1};
    table_t t;
    tbl_init(&t, 7, head, right);
    for (size_t i = 0; i < n; i++) {
      const rdc_workload_t *wl = &items[i];
      char size[48], ins[24], smp[24], upd[24], stale[24];
      snprintf(size, sizeof size, "%" PRIu64 "/%" PRIu32, wl->counters.size, wl->spec.capacity);
      snprintf(ins, sizeof ins, "%" PRIu64, wl->counters.inserts);
      snprintf(smp, sizeof smp, "%" PRIu64, wl->counters.samples);
      snprintf(upd, sizeof upd, "%" PRIu64, wl->counters.updates);
      snprintf(stale, sizeof stale, "%" PRIu64, wl->counters.stale_updates);
      const char *row[] = {wl->id, wl->spec.name, size, ins, smp, upd, stale};
      tbl_row(&t, row);
    }
    tbl_print(&t, "");
  }
  rdc_list_free(items);
  return RCTL_EXIT_OK;
}

/* The learner section of describe: what runs, with the normalised
 * values; settings that do not apply to the algorithm are left out. */
static void describe_learner(const rdc_learner_spec_t *l) {
  char buf[RDC_MAX_HIDDEN * 12 + 16], v[64];
  int ddpg = strcmp(l->algorithm, "ddpg") == 0;
  printf("\nlearner\n");
  char algo[RDC_LEARNER_STR_MAX], act[RDC_LEARNER_STR_MAX];
  snprintf(algo, sizeof algo, "%s", l->algorithm);
  snprintf(act, sizeof act, "%s", l->activation[0] ? l->activation : "relu");
  sanitize(algo);
  sanitize(act);
  kv("  algorithm", "%s", algo);
  fmt_widths(buf, sizeof buf, l->n_hidden, l->hidden);
  kv(ddpg ? "  actor" : "  hidden", "%s %s", buf, act);
  if (ddpg) {
    if (l->n_critic_hidden > 0)
      fmt_widths(buf, sizeof buf, l->n_critic_hidden, l->critic_hidden);
    else
      fmt_widths(buf, sizeof buf, l->n_hidden, l->hidden);
    kv("  critic", "%s %s", buf, act);
  }
  kv("  batch size", "%" PRIu32, l->batch_size);
  fmt_opt(v, sizeof v, l->has_lr, l->lr);
  kv(ddpg ? "  actor lr" : "  lr", "%s", v);
  if (ddpg) {
    fmt_opt(v, sizeof v, l->has_critic_lr, l->critic_lr);
    kv("  critic lr", "%s", v);
  }
  fmt_opt(v, sizeof v, l->has_gamma, l->gamma);
  kv("  gamma", "%s", v);
  if (l->target_update_period > 0) {
    kv("  target", "hard copy every %" PRIu32 " steps", l->target_update_period);
  } else {
    fmt_opt(v, sizeof v, l->has_tau, l->tau);
    kv("  target", "Polyak, tau %s", v);
  }
  fmt_opt(v, sizeof v, l->has_grad_clip, l->grad_clip);
  kv("  grad clip", "%s", v);
  if (ddpg) {
    char lo[32], hi[32];
    fmt_opt(lo, sizeof lo, l->has_action_low, l->action_low);
    fmt_opt(hi, sizeof hi, l->has_action_high, l->action_high);
    kv("  actions", "[%s, %s]", lo, hi);
  } else {
    fmt_opt(v, sizeof v, l->has_huber_delta, l->huber_delta);
    kv("  huber delta", "%s", v);
    kv("  double dqn", "%s", !l->has_double_dqn ? "default" : l->double_dqn ? "yes" : "no");
    kv("  actions", "%" PRIu32, l->num_actions);
  }
  kv("  depth D", "%" PRIu32, l->relaxation_depth);
  if (l->samples_per_insert > 0)
    kv("  training", "continuous, %.10g samples per insert", l->samples_per_insert);
  else
    kv("  training", "on TrainStep calls");
  kv("  min size", "%" PRIu32, l->min_size);
}

static void print_durability(const rdc_durability_t *d);

static int cmd_describe(rdc_client_t *c, const rctl_opts_t *o) {
  rdc_workload_t *wl = malloc(sizeof *wl); /* ~13 KiB: keep it off the stack */
  if (wl == NULL) oom();
  rdc_error_t e;
  if (rdc_describe(c, o->args[0], wl, &e) != RDC_OK) {
    free(wl);
    return call_failed(&e);
  }
  const rdc_spec_t *s = &wl->spec;
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    json_workload(&w, wl);
    jw_finish(&w);
  } else {
    char buf[64], alpha[32], eps[32], beta[32], maxp[32];
    fmt_time(buf, sizeof buf, wl->created_unix);
    fmt_opt(alpha, sizeof alpha, s->has_alpha, s->alpha);
    fmt_opt(eps, sizeof eps, s->has_epsilon, s->epsilon);
    fmt_opt(beta, sizeof beta, s->has_beta, s->beta);
    fmt_opt(maxp, sizeof maxp, s->has_max_priority, s->max_priority);
    char name[RDC_NAME_MAX];
    snprintf(name, sizeof name, "%s", s->name);
    sanitize(name);
    kv("id", "%s", wl->id);
    kv("name", "%s", name);
    kv("created", "%s", buf);
    kv("tenant", "%s", wl->tenant);
    kv("capacity", "%" PRIu32, s->capacity);
    kv("fanout", "%" PRIu32, s->fanout);
    kv("alpha", "%s", alpha);
    kv("epsilon", "%s", eps);
    kv("beta", "%s", beta);
    kv("max priority", "%s", maxp);
    kv("seed", "%" PRIu64, s->seed);
    kv("max batch", "%" PRIu32, s->max_batch);

    printf("\nschema\n");
    static const char *const head[] = {"FIELD", "DTYPE", "SHAPE", "BYTES/ROW"};
    static const int right[] = {0, 0, 0, 1};
    table_t t;
    tbl_init(&t, 4, head, right);
    size_t row_bytes = 0;
    for (uint32_t i = 0; i < s->n_fields; i++) {
      const rdc_field_t *f = &s->fields[i];
      char shape[RDC_MAX_RANK * 12 + 4], bytes[24];
      fmt_shape(shape, sizeof shape, f);
      snprintf(bytes, sizeof bytes, "%zu", rdc_field_bytes(f));
      row_bytes += rdc_field_bytes(f);
      const char *row[] = {f->name, rdc_dtype_name((int)f->dtype), shape, bytes};
      tbl_row(&t, row);
    }
    tbl_print(&t, "  ");
    printf("  %zu bytes per row\n", row_bytes);

    const rdc_counters_t *k = &wl->counters;
    fmt_bytes(buf, sizeof buf, k->bytes);
    printf("\ncounters\n");
    kv("  size", "%" PRIu64 "/%" PRIu32, k->size, s->capacity);
    kv("  inserts", "%" PRIu64, k->inserts);
    kv("  samples", "%" PRIu64, k->samples);
    kv("  updates", "%" PRIu64, k->updates);
    kv("  stale", "%" PRIu64, k->stale_updates);
    kv("  memory", "%s", buf);
    if (s->has_learner) describe_learner(&s->learner);
    if (wl->has_learner_counters) {
      const rdc_learner_counters_t *lc = &wl->learner;
      printf("\nlearner counters\n");
      kv("  steps", "%" PRIu64, lc->steps);
      kv("  weights", "version %" PRIu64, lc->weight_version);
      kv("  loss", "%.6g", lc->loss);
      kv("  steps/s", "%.1f", lc->steps_per_second);
      kv("  skipped", "%" PRIu64, lc->skipped_steps);
      kv("  late", "%" PRIu64 " priority updates", lc->late_updates);
    }
    if (wl->has_placement) {
      printf("\nplacement\n");
      print_placement(&wl->placement, "  ");
    }
    if (wl->has_rate_limiter) describe_rate_limiter(&wl->rate_limiter);
    if (wl->has_durability) print_durability(&wl->durability);
  }
  free(wl);
  return RCTL_EXIT_OK;
}

/* ---- durability ---- */

static void print_checkpoint(const char *what, const rdc_checkpoint_info_t *ck) {
  time_t t = (time_t)(ck->taken_unix_ms / 1000);
  struct tm tm;
  char when[32] = "?";
  if (gmtime_r(&t, &tm) != NULL) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  printf("%s %" PRIu64 " at %s: %" PRIu64 " items, %" PRIu64 " bytes, %.3f s (calls paused "
         "%.3f ms at most)%s\n", what, ck->generation, when, ck->items, ck->bytes, ck->seconds,
         ck->pause_ms, ck->learner_full ? ", the learner's whole state" : "");
}

static void print_durability(const rdc_durability_t *d) {
  printf("\ndurability: %s\n", d->mode);
  if (d->checkpoint_interval_s > 0)
    kv("  every", "%.0f s (when it changed)", d->checkpoint_interval_s);
  else
    kv("  every", "%s", "on request and at shutdown only");
  if (d->has_last) {
    printf("  ");
    print_checkpoint("last checkpoint", &d->last);
  } else {
    kv("  last checkpoint", "%s", "none yet");
  }
  kv("  since start", "%" PRIu64 " checkpoints", d->checkpoints);
  if (d->last_error[0]) kv("  last error", "%s", d->last_error);
  kv("  restored", "%s", d->restored);
  if (strcmp(d->mode, "journal") == 0) {
    kv("  journal", "%" PRIu64 " records, %" PRIu64 " commits, slowest %.2f ms",
       d->journal_records, d->journal_commits, d->journal_commit_ms_max);
    if (d->journal_error[0]) kv("  journal error", "%s", d->journal_error);
  }
}

static int cmd_checkpoint(rdc_client_t *c, const rctl_opts_t *o, const char *token) {
  rdc_error_t e;
  rdc_checkpoint_result_t *v = NULL;
  size_t n = 0;
  if (o->all) {
    if (rdc_checkpoint_all(c, token, &v, &n, &e) != RDC_OK) return call_failed(&e);
  } else {
    v = calloc(1, sizeof *v);
    if (v == NULL) return RCTL_EXIT_CALL;
    if (rdc_checkpoint(c, o->args[0], token, &v->info, &e) != RDC_OK) {
      free(v);
      return call_failed(&e);
    }
    snprintf(v->id, sizeof v->id, "%s", o->args[0]);
    n = 1;
  }
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
      jw_object_begin(&w);
      jw_key(&w, "id");
      jw_string(&w, v[i].id);
      jw_key(&w, "checkpoint");
      json_checkpoint(&w, &v[i].info);
      jw_object_end(&w);
    }
    jw_array_end(&w);
    jw_finish(&w);
  } else {
    for (size_t i = 0; i < n; i++) {
      printf("%s ", v[i].id);
      print_checkpoint("checkpoint", &v[i].info);
    }
  }
  free(v);
  return RCTL_EXIT_OK;
}

/* export and import stream the file (rdc_export_stream, rdc_import_stream):
 * a table of any size, one chunk in memory at a time. The export goes to
 * PATH.part and is renamed to PATH once whole, so a failed one leaves no
 * partial PATH. */
static int cmd_export(rdc_client_t *c, const rctl_opts_t *o, const char *token) {
  const char *path = o->args[1];
  char part[PATH_MAX];
  if (snprintf(part, sizeof part, "%s.part", path) >= (int)sizeof part) {
    fprintf(stderr, "replayctl: file name too long: %s\n", path);
    return RCTL_EXIT_USAGE;
  }
  int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "replayctl: cannot write %s: %s\n", part, strerror(errno));
    return RCTL_EXIT_CALL;
  }
  rdc_error_t e;
  uint64_t len = 0, items = 0;
  if (rdc_export_stream(c, o->args[0], token, fd, &len, &items, &e) != RDC_OK) {
    close(fd);
    unlink(part);
    return call_failed(&e);
  }
  int bad = fsync(fd) != 0;
  if (close(fd) != 0) bad = 1;
  if (bad || rename(part, path) != 0) {
    fprintf(stderr, "replayctl: cannot write %s: %s\n", path, strerror(errno));
    unlink(part);
    return RCTL_EXIT_CALL;
  }
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_object_begin(&w);
    jw_key(&w, "file");
    jw_string(&w, path);
    jw_key(&w, "bytes");
    jw_u64(&w, len);
    jw_key(&w, "items");
    jw_u64(&w, items);
    jw_object_end(&w);
    jw_finish(&w);
  } else {
    printf("exported workload %s to %s: %" PRIu64 " items, %" PRIu64 " bytes\n", o->args[0],
           path, items, len);
  }
  return RCTL_EXIT_OK;
}

static int cmd_import(rdc_client_t *c, const rctl_opts_t *o) {
  int fd = open(o->args[0], O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "replayctl: cannot read %s: %s\n", o->args[0], strerror(errno));
    return RCTL_EXIT_CALL;
  }
  rdc_workload_t *wl = malloc(sizeof *wl);
  rdc_error_t e;
  int rc = wl ? rdc_import_stream(c, fd, o->name, wl, &e) : RDC_ENOMEM;
  close(fd);
  if (rc != RDC_OK) {
    free(wl);
    return wl ? call_failed(&e) : RCTL_EXIT_CALL;
  }
  if (o->json) {
    jw_t w;
    jw_init(&w, stdout);
    jw_object_begin(&w);
    jw_key(&w, "id");
    jw_string(&w, wl->id);
    jw_key(&w, "token");
    jw_string(&w, wl->token);
    jw_key(&w, "items");
    jw_u64(&w, wl->counters.size);
    jw_object_end(&w);
    jw_finish(&w);
  } else {
    printf("imported workload %s (\"%s\", %" PRIu64 " items)\ntoken %s\n", wl->id,
           wl->spec.name, wl->counters.size, wl->token);
  }
  free(wl);
  return RCTL_EXIT_OK;
}

static int cmd_rm(rdc_client_t *c, const rctl_opts_t *o, const char *token) {
  rdc_error_t e;
  if (rdc_delete(c, o->args[0], token, &e) != RDC_OK) return call_failed(&e);
  if (o->json) {
    jw_print_string(stdout, "deleted", o->args[0]);
  } else {
    printf("deleted workload %s\n", o->args[0]);
  }
  return RCTL_EXIT_OK;
}

/* A command's token: --token, else the admin token file (given or
 * default). A missing token is a usage error (nothing was asked of the
 * server), unless quiet: then token is "" (no token). */
static int cmd_token(const rctl_opts_t *o, char *token, size_t cap, int quiet) {
  if (o->token != NULL) {
    snprintf(token, cap, "%s", o->token);
    return 0;
  }
  char path[PATH_MAX];
  if (o->admin_token_file != NULL) {
    snprintf(path, sizeof path, "%s", o->admin_token_file);
  } else {
    char dir[PATH_MAX - 16];
    if (rctl_state_dir(getenv("STATE_DIRECTORY"), getenv("XDG_STATE_HOME"), getenv("HOME"), dir,
                       sizeof dir) != 0) {
      fprintf(stderr, "replayctl: the state directory path is too long; use --token T or "
                      "--admin-token-file PATH\n");
      return -1;
    }
    snprintf(path, sizeof path, "%s/admin.token", dir);
  }
  char msg[PATH_MAX + 128];
  if (rctl_read_token_file(path, token, cap, msg, sizeof msg) != 0) {
    token[0] = '\0';
    if (quiet) return 0;
    fprintf(stderr, "replayctl: %s\nreplayctl: %s needs --token T, or the server's admin "
                    "token file (--admin-token-file PATH)\n", msg,
            o->cmd == RCTL_CMD_RM ? "rm" : o->cmd == RCTL_CMD_PLAN ? "plan"
            : o->cmd == RCTL_CMD_CHECKPOINT ? "checkpoint" : o->cmd == RCTL_CMD_EXPORT ? "export"
            : o->cmd == RCTL_CMD_TENANT ? "tenant" : "profiles");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  rctl_opts_t o;
  char msg[256];
  if (rctl_parse_args(argc, argv, getenv("REPLAYD_SERVER"), &o, msg, sizeof msg) != 0) {
    fprintf(stderr, "replayctl: %s\nTry 'replayctl --help'.\n", msg);
    return RCTL_EXIT_USAGE;
  }
  if (o.help) {
    fputs(rctl_usage(), stdout);
    return RCTL_EXIT_OK;
  }
  if (o.version) {
    printf("replayctl %s\n", RDC_VERSION);
    return RCTL_EXIT_OK;
  }
  char token[RDC_TOKEN_MAX];
  if ((o.cmd == RCTL_CMD_RM || o.cmd == RCTL_CMD_PROFILES || o.cmd == RCTL_CMD_PLAN ||
       o.cmd == RCTL_CMD_CHECKPOINT || o.cmd == RCTL_CMD_EXPORT || o.cmd == RCTL_CMD_TENANT) &&
      cmd_token(&o, token, sizeof token, 0) != 0)
    return RCTL_EXIT_USAGE;
  /* The views show what their token may see: --token, else the admin
   * token when its file is readable (every tenant's workloads), else none
   * (the default tenant's). */
  const int view = o.cmd == RCTL_CMD_STATUS || o.cmd == RCTL_CMD_LS ||
                   o.cmd == RCTL_CMD_DESCRIBE || o.cmd == RCTL_CMD_TOP;
  if (view && cmd_token(&o, token, sizeof token, o.admin_token_file == NULL) != 0)
    return RCTL_EXIT_USAGE;

  rdc_connect_opts_t copts;
  rdc_connect_opts_init(&copts);
  copts.deadline_s = o.timeout_s;
  copts.tls_ca_file = o.tls_ca;
  copts.tls_cert_file = o.tls_cert;
  copts.tls_key_file = o.tls_key;
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect_ex(o.server, o.timeout_s, &copts, &c, &e) != RDC_OK) return call_failed(&e);
  if (view && rdc_set_view_token(c, token, &e) != RDC_OK) {
    rdc_close(c);
    return call_failed(&e);
  }
  int rc = RCTL_EXIT_USAGE;
  switch (o.cmd) {
  case RCTL_CMD_STATUS: rc = cmd_status(c, &o); break;
  case RCTL_CMD_LS: rc = cmd_ls(c, &o); break;
  case RCTL_CMD_DESCRIBE: rc = cmd_describe(c, &o); break;
  case RCTL_CMD_DEVICES: rc = cmd_devices(c, &o); break;
  case RCTL_CMD_RM: rc = cmd_rm(c, &o, token); break;
  case RCTL_CMD_PROFILES: rc = cmd_profiles(c, &o, token); break;
  case RCTL_CMD_PLAN: rc = cmd_plan(c, &o, token); break;
  case RCTL_CMD_CHECKPOINT: rc = cmd_checkpoint(c, &o, token); break;
  case RCTL_CMD_EXPORT: rc = cmd_export(c, &o, token); break;
  case RCTL_CMD_IMPORT: rc = cmd_import(c, &o); break;
  case RCTL_CMD_TOP: rc = rctl_top(c, &o); break;
  case RCTL_CMD_TENANT: rc = rctl_cmd_tenant(c, &o, token); break;
  case RCTL_CMD_NONE: break;
  }
  rdc_close(c);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fputs("replayctl: cannot write the output\n", stderr);
    return RCTL_EXIT_CALL;
  }
  return rc;
}
