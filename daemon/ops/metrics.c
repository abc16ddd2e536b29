/* metrics.c - the Prometheus text exposition of the daemon (metrics.h). */
#include "metrics.h"
#include "workload_move.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "mapper.h"
#include "pipeline.h"
#include "profile_cache.h"
#include "rpc_stats.h"
#include "tenant.h"

void rd_metrics_label(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '\\') fputs("\\\\", f);
    else if (*s == '"') fputs("\\\"", f);
    else if (*s == '\n') fputs("\\n", f);
    else fputc(*s, f);
  }
}

static void head(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A double as the format writes it: +Inf, -Inf, NaN, or the shortest of
 * %.15g and %.17g that reads back as v (0.00025, not 0.00025000000000000001). */
static void value(FILE *f, double v) {
  if (isnan(v)) {
    fputs("NaN", f);
  } else if (isinf(v)) {
    fputs(v > 0 ? "+Inf" : "-Inf", f);
  } else {
    char s[32];
    snprintf(s, sizeof s, "%.15g", v);
    if (strtod(s, NULL) != v) snprintf(s, sizeof s, "%.17g", v);
    fputs(s, f);
  }
}

/* ------------------------------------------------------------------ */
/* Workloads                                                           */
/* ------------------------------------------------------------------ */

/* What one scrape reads of a workload, once. */
typedef struct {
  rd_workload_t *w;
  rd_workload_counters_t c;
  int learner;
  rd_pipeline_stats_t ls;
  rd_pipeline_queues_t lq;
  char running[RD_MAPPING_CODE_MAX]; /* "L-R-S" device letters now; "" without a learner */
  char mapped[RD_MAPPING_CODE_MAX];  /* the mapping's letters; "-" if not mapped */
} wl_t;

static void read_workload(wl_t *x) {
  rd_workload_counters(x->w, &x->c);
  x->learner = x->w->pipeline != NULL;
  x->running[0] = '\0';
  if (!x->learner) return;
  rd_pipeline_stats(x->w->pipeline, &x->ls);
  rd_pipeline_queues(x->w->pipeline, &x->lq);
  static _Thread_local rd_placement_t pl; /* a move rewrites the workload's: a copy */
  int has_pl = 0;
  rd_workload_placement_copy(x->w, &pl, &has_pl);
  if (has_pl && pl.running[0]) {
    /* As the placement's message says it (messages.c): a learner that
     * failed over runs on the CPU, a dead one nowhere. */
    rd_pipeline_learner_info_t li;
    rd_pipeline_learner_info(x->w->pipeline, &li);
    snprintf(x->mapped, sizeof x->mapped, "%s", pl.code[0] ? pl.code : "-");
    snprintf(x->running, sizeof x->running, "%s", pl.running);
    if (li.dead) x->running[0] = '-';
    else if (li.fell_back) x->running[0] = 'C';
  }
}

typedef enum { U64, DBL } kind_t;

/* One series per workload (with a learner, when learner_only). */
static void per_workload(FILE *f, const wl_t *v, size_t n, const char *name, const char *type,
                         const char *help, int learner_only, size_t off, kind_t k) {
  int any = 0;
  for (size_t i = 0; i < n && !any; i++) any = !learner_only || v[i].learner;
  if (!any) return;
  head(f, name, type, help);
  for (size_t i = 0; i < n; i++) {
    if (learner_only && !v[i].learner) continue;
    fprintf(f, "%s{workload=\"%s\"} ", name, v[i].w->id);
    const char *p = (const char *)&v[i] + off;
    if (k == U64) fprintf(f, "%" PRIu64 "\n", *(const uint64_t *)(const void *)p);
    else {
      value(f, *(const double *)(const void *)p);
      fputc('\n', f);
    }
  }
}

#define AT(field) offsetof(wl_t, field)

static void workloads(FILE *f, const wl_t *v, size_t n) {
  head(f, "replayd_workloads", "gauge", "Workloads registered.");
  fprintf(f, "replayd_workloads %zu\n", n);
  if (n > 0) {
    head(f, "replayd_workload_info", "gauge",
         "A registered workload: its name, its tenant and whether the server hosts its "
         "learner; always 1 (join on workload for per-tenant sums).");
    for (size_t i = 0; i < n; i++) {
      fprintf(f, "replayd_workload_info{workload=\"%s\",name=\"", v[i].w->id);
      rd_metrics_label(f, v[i].w->name);
      fputs("\",tenant=\"", f);
      rd_metrics_label(f, v[i].w->tenant != NULL ? v[i].w->tenant->name : "");
      fprintf(f, "\",learner=\"%s\"} 1\n", v[i].learner ? "hosted" : "none");
    }
  }
  per_workload(f, v, n, "replayd_inserts_total", "counter", "Rows inserted.", 0,
               AT(c.inserts), U64);
  per_workload(f, v, n, "replayd_samples_total", "counter", "Rows sampled.", 0, AT(c.samples),
               U64);
  per_workload(f, v, n, "replayd_updates_total", "counter", "Priority updates applied.", 0,
               AT(c.updates), U64);
  per_workload(f, v, n, "replayd_stale_updates_total", "counter",
               "Priority updates skipped because their row had been overwritten.", 0,
               AT(c.stale_updates), U64);
  per_workload(f, v, n, "replayd_table_items", "gauge", "Rows the table holds.", 0, AT(c.size),
               U64);
  per_workload(f, v, n, "replayd_table_bytes", "gauge",
               "Memory of the table: rows, sum tree and keys.", 0, AT(c.bytes), U64);
  if (n > 0) {
    head(f, "replayd_table_capacity_items", "gauge", "Rows the table can hold.");
    for (size_t i = 0; i < n; i++)
      fprintf(f, "replayd_table_capacity_items{workload=\"%s\"} %u\n", v[i].w->id,
              v[i].w->table.config.capacity);
  }
  per_workload(f, v, n, "replayd_learner_steps_total", "counter",
               "Gradient steps of the hosted learner.", 1, AT(ls.steps), U64);
  per_workload(f, v, n, "replayd_learner_skipped_steps_total", "counter",
               "Gradient steps skipped for a non-finite loss or gradient.", 1,
               AT(ls.skipped_steps), U64);
  per_workload(f, v, n, "replayd_learner_late_updates_total", "counter",
               "Priority updates that landed after a newer batch was sampled.", 1,
               AT(ls.late_updates), U64);
  per_workload(f, v, n, "replayd_learner_steps_per_second", "gauge",
               "Gradient steps per second over the last training window (GPS).", 1,
               AT(ls.steps_per_second), DBL);
  per_workload(f, v, n, "replayd_learner_loss", "gauge", "Loss of the last gradient step.", 1,
               AT(ls.loss), DBL);
  per_workload(f, v, n, "replayd_learner_weight_version", "gauge",
               "Version of the published policy weights (1: initial).", 1,
               AT(ls.weight_version), U64);
  per_workload(f, v, n, "replayd_learner_batches_in_flight", "gauge",
               "Batches sampled whose priorities are not yet updated.", 1, AT(lq.in_flight),
               U64);
  int any_learner = 0;
  for (size_t i = 0; i < n; i++) any_learner |= v[i].learner;
  if (any_learner) {
    head(f, "replayd_learner_queued_batches", "gauge",
         "Batches waiting between the pipeline's units: gathered for the learner (train), "
         "trained for their priority update (update).");
    for (size_t i = 0; i < n; i++)
      if (v[i].learner)
        fprintf(f, "replayd_learner_queued_batches{workload=\"%s\",queue=\"train\"} %u\n"
                   "replayd_learner_queued_batches{workload=\"%s\",queue=\"update\"} %u\n",
                v[i].w->id, v[i].lq.to_train, v[i].w->id, v[i].lq.to_update);
  }
  int any_placed = 0;
  for (size_t i = 0; i < n; i++) any_placed |= v[i].running[0] != '\0';
  if (any_placed) {
    head(f, "replayd_workload_placement_info", "gauge",
         "Where a hosted learner's workload was mapped and what runs now, as learner-replay-"
         "storage device letters (C, G, F); always 1.");
    for (size_t i = 0; i < n; i++)
      if (v[i].running[0])
        fprintf(f, "replayd_workload_placement_info{workload=\"%s\",mapped=\"%s\","
                   "running=\"%s\"} 1\n",
                v[i].w->id, v[i].mapped, v[i].running);
  }
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

/* Parts of live workloads on each device kind: a placement's running
 * letters; a workload without one keeps its table and rows on the CPU. */
static void device_use(FILE *f, const wl_t *v, size_t n) {
  static const char *const kinds[] = {"cpu", "gpu", "fpga"};
  static const char letters[] = "CGF";
  static const char *const parts[] = {"learner", "replay", "storage"};
  uint32_t use[3][3] = {{0}};
  for (size_t i = 0; i < n; i++) {
    const char *r = v[i].running;
    char at[3] = {'-', 'C', 'C'};
    if (r[0] != '\0' && strlen(r) == 5) {
      at[0] = r[0];
      at[1] = r[2];
      at[2] = r[4];
    }
    for (int p = 0; p < 3; p++)
      for (int k = 0; k < 3; k++) use[k][p] += at[p] == letters[k];
  }
  head(f, "replayd_device_workload_parts", "gauge",
       "Parts of live workloads (hosted learner, replay module, storage) running on each "
       "device kind.");
  for (int k = 0; k < 3; k++)
    for (int p = 0; p < 3; p++)
      fprintf(f, "replayd_device_workload_parts{kind=\"%s\",part=\"%s\"} %u\n", kinds[k],
              parts[p], use[k][p]);
}

static void devices(FILE *f) {
  rd_device_t d[RD_MAX_DEVICES];
  size_t n = rd_devices_get(d, RD_MAX_DEVICES);
  head(f, "replayd_device_up", "gauge",
       "1 while a device can take work, 0 once the daemon gave it up after a failure.");
  for (size_t i = 0; i < n; i++)
    fprintf(f, "replayd_device_up{device=\"%s%u\",kind=\"%s\"} %d\n", d[i].kind, d[i].index,
            d[i].kind, rd_device_usable(&d[i]));
  head(f, "replayd_device_info", "gauge",
       "A device the daemon found: its backend, model and profile fingerprint; always 1.");
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "replayd_device_info{device=\"%s%u\",kind=\"%s\",backend=\"", d[i].kind,
            d[i].index, d[i].kind);
    rd_metrics_label(f, d[i].backend);
    fputs("\",model=\"", f);
    rd_metrics_label(f, d[i].model);
    fputs("\",fingerprint=\"", f);
    rd_metrics_label(f, d[i].fingerprint);
    fputs("\"} 1\n", f);
  }
}

/* ------------------------------------------------------------------ */
/* RPCs, the server, the process                                       */
/* ------------------------------------------------------------------ */

static const char *const code_names[RD_RPC_STATS_CODES] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"};

static void rpcs(FILE *f) {
  size_t n = rd_rpc_stats_methods();
  if (n == 0) return;
  head(f, "replayd_rpc_duration_seconds", "histogram",
       "Time in the server's handler per call (an Insert stream: per message), by method.");
  rd_rpc_method_stats_t s;
  for (size_t m = 0; m < n; m++) {
    rd_rpc_stats_read((int)m, &s);
    if (s.name == NULL) continue;
    uint64_t cum = 0;
    for (size_t b = 0; b <= RD_RPC_STATS_BUCKETS; b++) {
      cum += s.buckets[b];
      fprintf(f, "replayd_rpc_duration_seconds_bucket{method=\"%s\",le=\"", s.name);
      value(f, b < RD_RPC_STATS_BUCKETS ? rd_rpc_stats_bounds[b] : INFINITY);
      fprintf(f, "\"} %" PRIu64 "\n", cum);
    }
    fprintf(f, "replayd_rpc_duration_seconds_sum{method=\"%s\"} ", s.name);
    value(f, s.sum_s);
    fprintf(f, "\nreplayd_rpc_duration_seconds_count{method=\"%s\"} %" PRIu64 "\n", s.name,
            s.count);
  }
  head(f, "replayd_rpc_failures_total", "counter",
       "Calls that ended with a gRPC status other than OK, by method and status.");
  for (size_t m = 0; m < n; m++) {
    rd_rpc_stats_read((int)m, &s);
    for (int c = 1; s.name != NULL && c < RD_RPC_STATS_CODES; c++)
      if (s.by_code[c] > 0)
        fprintf(f, "replayd_rpc_failures_total{method=\"%s\",code=\"%s\"} %" PRIu64 "\n",
                s.name, code_names[c], s.by_code[c]);
  }
}

static void server(FILE *f, const rd_metrics_source_t *src) {
  if (src->server == NULL) return;
  rd_metrics_server_t s;
  memset(&s, 0, sizeof s);
  src->server(src->server_arg, &s);
  head(f, "replayd_server_calls_total", "counter", "gRPC calls the server accepted.");
  fprintf(f, "replayd_server_calls_total %" PRIu64 "\n", s.calls_started);
  head(f, "replayd_server_calls_in_flight", "gauge", "gRPC calls accepted and not yet ended.");
  fprintf(f, "replayd_server_calls_in_flight %" PRIu64 "\n", s.calls_active);
  head(f, "replayd_server_queued_jobs", "gauge",
       "Calls running or waiting on each of the server's job queues.");
  for (int q = 0; q < RD_METRICS_QUEUES; q++)
    if (s.queue_name[q] != NULL)
      fprintf(f, "replayd_server_queued_jobs{queue=\"%s\"} %u\n", s.queue_name[q],
              s.queue_jobs[q]);
}

/* CPU time and resident memory from /proc/self/stat (the names of
 * Prometheus's own process collector). */
static void process(FILE *f) {
  FILE *p = fopen("/proc/self/stat", "re");
  if (p == NULL) return;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  fclose(p);
  buf[n] = '\0';
  const char *s = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long utime = 0, stime = 0;
  long threads = 0, rss = 0;
  /* Fields 3.. after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt
   * cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize
   * rss. */
  if (s == NULL || sscanf(s + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d "
                                 "%*d %*d %ld %*d %*u %*u %ld", &utime, &stime, &threads, &rss) != 4)
    return;
  double tick = (double)sysconf(_SC_CLK_TCK);
  head(f, "process_cpu_seconds_total", "counter", "User and system CPU time of the daemon.");
  fprintf(f, "process_cpu_seconds_total ");
  value(f, tick > 0 ? (double)(utime + stime) / tick : 0);
  fputc('\n', f);
  head(f, "process_resident_memory_bytes", "gauge", "Resident memory of the daemon.");
  fprintf(f, "process_resident_memory_bytes %ld\n", rss * sysconf(_SC_PAGESIZE));
  head(f, "process_threads", "gauge", "Threads of the daemon.");
  fprintf(f, "process_threads %ld\n", threads);
}

int rd_metrics_render(const rd_metrics_source_t *src, FILE *f) {
  size_t max = rd_registry_config(src->registry)->max_workloads;
  rd_workload_t **ws = calloc(max ? max : 1, sizeof *ws);
  wl_t *v = calloc(max ? max : 1, sizeof *v);
  if (ws == NULL || v == NULL) {
    free(ws);
    free(v);
    return RD_ENOMEM;
  }
  size_t n = rd_registry_list(src->registry, ws, max);
  for (size_t i = 0; i < n; i++) {
    v[i].w = ws[i];
    read_workload(&v[i]);
  }

  head(f, "replayd_build_info", "gauge", "The replayd version serving; always 1.");
  fputs("replayd_build_info{version=\"", f);
  rd_metrics_label(f, src->version ? src->version : "");
  fputs("\"} 1\n", f);
  head(f, "replayd_start_time_seconds", "gauge", "When the daemon started, Unix time.");
  fprintf(f, "replayd_start_time_seconds %" PRId64 "\n", src->start_unix);
  workloads(f, v, n);
  device_use(f, v, n);
  devices(f);
  uint64_t hits, misses;
  rd_profile_cache_counts(&hits, &misses);
  head(f, "replayd_profile_cache_hits_total", "counter",
       "Placements whose device profiles came from the profile store.");
  fprintf(f, "replayd_profile_cache_hits_total %" PRIu64 "\n", hits);
  head(f, "replayd_profile_cache_misses_total", "counter",
       "Placements that found no stored profiles for their shape (measured, or left unmapped).");
  fprintf(f, "replayd_profile_cache_misses_total %" PRIu64 "\n", misses);
  rpcs(f);
  server(f, src);
  process(f);

  for (size_t i = 0; i < n; i++) rd_workload_unref(ws[i]);
  free(ws);
  free(v);
  return RD_OK;
}
