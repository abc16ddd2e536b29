/* remapper.c - re-map the live set on every change, move live
 * (remapper.h). */
#include "remapper.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "log.h"
#include "remap.h"
#include "tenant.h"
#include "workload_move.h"

#define REMAP_QUEUE_WAITING 64

struct rd_remapper {
  rd_registry_t *registry;
  double threshold;
  rd_jobs_t *jobs;
  pthread_mutex_t run_mu; /* one re-mapping at a time */
  _Atomic uint64_t done;
};

typedef struct {
  rd_remapper_t *m;
  char reason[120];
} job_t;

int rd_remapper_create(rd_remapper_t **out, rd_registry_t *r, double threshold,
                       rd_error_t *err) {
  *out = NULL;
  if (!(threshold >= 0 && threshold < 1e9))
    return rd_error_set(err, RD_EINVAL, "re-mapping threshold %g: must be in [0, 1e9)",
                        threshold);
  rd_remapper_t *m = calloc(1, sizeof *m);
  if (m == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the re-mapper");
  m->registry = r;
  m->threshold = threshold;
  int rc = rd_jobs_create(&m->jobs, "remap", 1, REMAP_QUEUE_WAITING, 0, err);
  if (rc) {
    free(m);
    return rc;
  }
  pthread_mutex_init(&m->run_mu, NULL);
  *out = m;
  return RD_OK;
}

void rd_remapper_attach(rd_remapper_t *m) {
  rd_registry_set_on_change(m->registry, rd_remapper_kick, m);
}

void rd_remapper_destroy(rd_remapper_t *m) {
  if (m == NULL) return;
  rd_registry_set_on_change(m->registry, NULL, NULL);
  rd_jobs_stop(m->jobs);
  pthread_mutex_destroy(&m->run_mu);
  free(m);
}

static void run_job(void *arg, int cancelled) {
  job_t *j = arg;
  if (!cancelled) {
    rd_error_t err;
    rd_error_clear(&err);
    if (rd_remapper_run(j->m, j->reason, NULL, &err) != RD_OK)
      rd_log_warn("remap", "re-mapping after %s failed: %s", j->reason, err.msg);
    atomic_fetch_add(&j->m->done, 1);
  }
  free(j);
}

void rd_remapper_kick(void *arg, int deleted, const rd_workload_t *w) {
  rd_remapper_t *m = arg;
  if (w->pipeline == NULL) return; /* replay-only: occupies no device the set maps */
  job_t *j = malloc(sizeof *j);
  rd_error_t err;
  rd_error_clear(&err);
  if (j == NULL) {
    rd_log_warn("remap", "no re-mapping after the %s of %s: out of memory",
                deleted ? "delete" : "register", w->id);
    return;
  }
  j->m = m;
  snprintf(j->reason, sizeof j->reason, "%s of \"%.40s\" (%.32s)",
           deleted ? "delete" : "register", w->name, w->id);
  if (rd_jobs_submit(m->jobs, run_job, j, &err) != RD_OK) {
    rd_log_warn("remap", "re-mapping after %s not queued (a waiting one covers the set): %s",
                j->reason, err.msg);
    free(j);
  }
}

uint64_t rd_remapper_done(rd_remapper_t *m) { return atomic_load(&m->done); }
uint32_t rd_remapper_pending(rd_remapper_t *m) { return rd_jobs_pending(m->jobs); }

/* One member of the set. */
typedef struct {
  rd_workload_t *w;
  rd_placement_t pl;
  int fresh; /* no placement event yet */
} member_t;

static int collect(rd_remapper_t *m, rd_workload_t **all, size_t n_all, member_t *set,
                   rd_remap_item_t *items) {
  size_t k = 0;
  for (size_t i = 0; i < n_all; i++) {
    rd_workload_t *w = all[i];
    if (w->pipeline == NULL || atomic_load(&w->deleted)) continue;
    int has = 0;
    rd_workload_placement_copy(w, &set[k].pl, &has);
    if (!has || !set[k].pl.mapped) continue;
    rd_place_history_t h;
    rd_workload_history(w, &h);
    set[k].w = w;
    set[k].fresh = h.total == 0;
    items[k].table = set[k].pl.table;
    items[k].weight = w->tenant != NULL ? rd_tenant_weight(w->tenant) : 1;
    if (items[k].weight == 0) items[k].weight = 1;
    items[k].placed = !set[k].fresh;
    items[k].learner = set[k].pl.mapping.learner;
    items[k].rmm = set[k].pl.mapping.rmm;
    k++;
  }
  (void)m;
  return (int)k;
}

/* After a move begun with bytes/gpu reserved: w is charged for what its
 * placement runs now (a move cut short holds parts of both). */
static void recharge(rd_remapper_t *m, rd_workload_t *w, uint64_t bytes, uint64_t gpu) {
  rd_placement_t now;
  int has = 0;
  uint64_t now_bytes = 0, now_gpu = 0;
  rd_workload_placement_copy(w, &now, &has);
  if (has) rd_workload_charge_for(w, &now, &now_bytes, &now_gpu);
  rd_registry_move_end(m->registry, w, bytes, gpu, now_bytes, now_gpu);
}

int rd_remapper_run(rd_remapper_t *m, const char *reason, uint32_t *moves_out, rd_error_t *err) {
  static rd_workload_t *all[RD_REMAP_MAX];
  static member_t set[RD_REMAP_MAX];
  static rd_remap_item_t items[RD_REMAP_MAX];
  static rd_remap_result_t out[RD_REMAP_MAX];
  pthread_mutex_lock(&m->run_mu); /* and the arrays above */
  size_t n_all = rd_registry_list(m->registry, all, RD_REMAP_MAX);
  size_t n = (size_t)collect(m, all, n_all, set, items);
  rd_remap_summary_t sum;
  memset(&sum, 0, sizeof sum);
  int rc = n > 0 ? rd_remap(items, n, m->threshold, out, &sum, err) : RD_OK;
  uint32_t moves = 0;
  for (size_t i = 0; rc == RD_OK && i < n; i++) {
    member_t *s = &set[i];
    const rd_remap_result_t *o = &out[i];
    rd_place_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.gps_from = o->gps_before;
    ev.gps_to = o->gps;
    ev.total_from = sum.total_before;
    ev.total_to = sum.adopted ? sum.total_proposed : sum.total_before;
    const int differs = o->learner != s->pl.mapping.learner || o->rmm != s->pl.mapping.rmm;
    if (s->fresh)
      snprintf(ev.reason, sizeof ev.reason, "registered (%s); placed beside %zu other%s",
               reason, n - 1, n == 2 ? "" : "s");
    else if (differs)
      snprintf(ev.reason, sizeof ev.reason, "re-mapped after %s: the set's predicted GPS "
               "%.4g -> %.4g", reason, sum.total_before, sum.total_proposed);
    if (differs) {
      rd_placement_t to;
      rd_error_t merr;
      rd_error_clear(&merr);
      int mrc = rd_workload_plan_move(s->w, o->learner, o->rmm, &to, &merr);
      uint64_t bytes = 0, gpu = 0;
      if (mrc == RD_OK) {
        rd_workload_charge_for(s->w, &to, &bytes, &gpu);
        mrc = rd_registry_move_begin(m->registry, s->w, bytes, gpu, &merr);
      }
      if (mrc == RD_OK) {
        mrc = rd_workload_move(s->w, &to, &ev, &merr);
        recharge(m, s->w, bytes, gpu); /* what runs now, whole move or not */
      } else {
        snprintf(ev.from, sizeof ev.from, "%s", s->pl.running);
        snprintf(ev.to, sizeof ev.to, "%s", s->pl.running);
        size_t l = strlen(ev.reason);
        snprintf(ev.reason + l, sizeof ev.reason - l, "; not moved: %.120s", merr.msg);
        rd_workload_history_add(s->w, &ev);
      }
      if (mrc == RD_OK) moves++;
      rd_log_info("remap", "workload %s: %s -> %s (%s)%s%s", s->w->id, ev.from, ev.to,
                  ev.reason, mrc ? ": " : "", mrc ? merr.msg : "");
      continue;
    }
    if (s->fresh) {
      snprintf(ev.from, sizeof ev.from, "%s", "");
      snprintf(ev.to, sizeof ev.to, "%s", s->pl.running);
      rd_workload_history_add(s->w, &ev);
    } else if (!sum.adopted && sum.total_proposed > sum.total_before &&
               sum.total_before > 0) {
      /* A better mapping of the set existed but not by the threshold: say
       * so on every placed workload, whose mapping stands. */
      snprintf(ev.from, sizeof ev.from, "%s", s->pl.running);
      snprintf(ev.to, sizeof ev.to, "%s", s->pl.running);
      ev.total_to = sum.total_proposed;
      snprintf(ev.reason, sizeof ev.reason, "kept (hysteresis) after %s: re-mapping the set "
               "would gain %.1f%% predicted, not more than the %.0f%% threshold", reason,
               100.0 * (sum.total_proposed / sum.total_before - 1), 100.0 * m->threshold);
      rd_workload_history_add(s->w, &ev);
    }
  }
  for (size_t i = 0; i < n_all; i++) rd_workload_unref(all[i]);
  pthread_mutex_unlock(&m->run_mu);
  if (moves_out) *moves_out = moves;
  return rc;
}
