/* workload_move.c - a placed workload moved live, and its placement
 * history (workload_move.h). */
#include "workload_move.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pipeline.h"

int rd_table_move(rd_table_t *t, const rd_rmm_ops_t *rmm, const rd_storage_ops_t *storage,
                  rd_error_t *err) {
  if (t->config.rmm == rmm && t->config.storage == storage) return RD_OK;
  if (t->snap != NULL)
    return rd_error_set(err, RD_EBUSY, "a checkpoint's snapshot of the table is in progress");
  rd_table_config_t c = t->config;
  c.rmm = rmm;
  c.storage = storage;
  rd_table_t nt;
  int rc = rd_table_init(&nt, &c, err);
  if (rc) return rc;
  rd_table_snapshot_t s;
  rc = rd_table_snapshot_alloc(&s, &t->config, rd_table_size(t), err);
  if (rc == RD_OK) rc = rd_table_snapshot_begin(t, &s, err);
  while (rc == RD_OK) {
    rc = rd_table_snapshot_step(t, &s, 1u << 16, err);
    if (rc == 1) rc = 2; /* complete */
  }
  if (rc == 2) rc = rd_table_restore(&nt, &s.img, err);
  rd_table_snapshot_free(&s);
  if (rc) {
    rd_table_free(&nt);
    return rc;
  }
  /* The counters restored are the same values; the observer (the
   * journal's) stays, since a move changes no data (rd_table_adopt). */
  rd_table_adopt(t, &nt);
  return RD_OK;
}

/* t restricted to learner on l and RMM on r. */
static void force(rd_ptable_t *t, rd_devkind_t l, rd_devkind_t r) {
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    if (d != (int)l) t->dev[d].src_learner = RD_PT_NONE;
    if (d != (int)r) t->dev[d].src_rmm = RD_PT_NONE;
  }
}

int rd_workload_plan_move(rd_workload_t *w, rd_devkind_t l, rd_devkind_t r, rd_placement_t *to,
                          rd_error_t *err) {
  int has = 0;
  rd_workload_placement_copy(w, to, &has);
  if (!has || !to->mapped || w->pipeline == NULL)
    return rd_error_set(err, RD_EINVAL, "workload %s has no mapped hosted learner", w->id);
  rd_ptable_t t = to->table;
  force(&t, l, r);
  rd_mapping_t m;
  int rc = rd_map(&t, &m, err);
  if (rc) return rc;
  to->mapping = m;
  rd_mapping_format(&m, to->code, sizeof to->code);
  pthread_mutex_lock(&w->lock);
  rd_table_config_t tc = w->table.config;
  pthread_mutex_unlock(&w->lock);
  tc.rmm = NULL;
  tc.storage = NULL;
  rd_placement_bind(to, &tc, rd_pipeline_learner_config(w->pipeline));
  return RD_OK;
}

void rd_workload_charge_for(rd_workload_t *w, const rd_placement_t *pl, uint64_t *bytes,
                            uint64_t *gpu_bytes) {
  rd_workload_config_t wc;
  memset(&wc, 0, sizeof wc);
  pthread_mutex_lock(&w->lock);
  wc.table = w->table.config;
  pthread_mutex_unlock(&w->lock);
  wc.table.rmm = pl->rmm_ops;
  wc.table.storage = pl->storage_ops;
  if (w->pipeline != NULL) {
    wc.has_learner = 1;
    wc.learner = *rd_pipeline_config(w->pipeline);
    wc.learner.learner_kind = pl->learner_kind;
    wc.learner.learner_device = pl->learner_device;
  }
  uint64_t tree, rows, scratch, learner;
  *bytes = rd_workload_config_charge(&wc, &tree, &rows, &scratch, &learner);
  *gpu_bytes = rd_workload_config_gpu_bytes(&wc);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void history_add_locked(rd_workload_t *w, const rd_place_event_t *ev) {
  rd_place_history_t *h = &w->history;
  h->ev[h->next] = *ev;
  h->ev[h->next].unix_ms = now_ms();
  h->next = (h->next + 1) % RD_PLACE_HISTORY_MAX;
  if (h->n < RD_PLACE_HISTORY_MAX) h->n++;
  h->total++;
}

void rd_workload_history_add(rd_workload_t *w, const rd_place_event_t *ev) {
  pthread_mutex_lock(&w->lock);
  history_add_locked(w, ev);
  pthread_mutex_unlock(&w->lock);
}

void rd_workload_history(rd_workload_t *w, rd_place_history_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&w->lock);
  const rd_place_history_t *h = &w->history;
  uint32_t first = (h->next + RD_PLACE_HISTORY_MAX - h->n) % RD_PLACE_HISTORY_MAX;
  for (uint32_t i = 0; i < h->n; i++) out->ev[i] = h->ev[(first + i) % RD_PLACE_HISTORY_MAX];
  out->n = h->n;
  out->next = h->n % RD_PLACE_HISTORY_MAX;
  out->total = h->total;
  pthread_mutex_unlock(&w->lock);
}

void rd_workload_placement_copy(rd_workload_t *w, rd_placement_t *out, int *has_pl) {
  pthread_mutex_lock(&w->lock);
  *has_pl = w->placement != NULL;
  if (*has_pl) *out = *w->placement;
  pthread_mutex_unlock(&w->lock);
}

/* What runs now, in the placement (under w's lock): `to`'s parts that
 * moved, the old placement's for those that did not. */
static void settle(rd_placement_t *pl, const rd_placement_t *to, int table_moved,
                   int learner_moved) {
  if (table_moved && learner_moved) {
    *pl = *to;
    return;
  }
  if (!table_moved && !learner_moved) return;
  rd_placement_t mix = *to;
  if (!table_moved) {
    mix.rmm_ops = pl->rmm_ops;
    mix.storage_ops = pl->storage_ops;
    mix.running[2] = pl->running[2];
    mix.running[4] = pl->running[4];
  } else {
    mix.learner_kind = pl->learner_kind;
    mix.learner_device = pl->learner_device;
    mix.learner_ops = pl->learner_ops;
    mix.running[0] = pl->running[0];
  }
  snprintf(mix.note, sizeof mix.note, "mapped %s; running %s (a move was cut short)", mix.code,
           mix.running);
  *pl = mix;
}

int rd_workload_move(rd_workload_t *w, const rd_placement_t *to, rd_place_event_t *ev,
                     rd_error_t *err) {
  rd_placement_t from;
  int has = 0;
  rd_workload_placement_copy(w, &from, &has);
  if (!has || w->pipeline == NULL)
    return rd_error_set(err, RD_EINVAL, "workload %s has no hosted learner to move", w->id);
  snprintf(ev->from, sizeof ev->from, "%s", from.running);
  ev->moved = 1;
  const int table_part = from.rmm_ops != to->rmm_ops || from.storage_ops != to->storage_ops;
  const rd_learner_ops_t *lops =
      to->learner_ops ? to->learner_ops : rd_learner_ops_for(to->learner_kind);
  rd_pipeline_learner_info_t li;
  rd_pipeline_learner_info(w->pipeline, &li);
  const int learner_part = li.kind != to->learner_kind ||
                           (to->learner_kind != RD_LEARNER_ON_CPU &&
                            li.device != to->learner_device) ||
                           strcmp(li.backend, lops->name) != 0;
  int rc = RD_OK, table_moved = 0, learner_moved = 0;
  if (table_part) {
    pthread_mutex_lock(&w->lock);
    rc = rd_table_move(&w->table, to->rmm_ops, to->storage_ops, err);
    pthread_mutex_unlock(&w->lock);
    table_moved = rc == RD_OK;
  }
  if (rc == RD_OK && learner_part) {
    rc = rd_pipeline_move_learner(w->pipeline, lops, to->learner_device, err);
    learner_moved = rc == RD_OK;
  }
  pthread_mutex_lock(&w->lock);
  if (rc == RD_OK) {
    *w->placement = *to;
  } else {
    settle(w->placement, to, table_moved, learner_moved);
    size_t n = strlen(ev->reason);
    snprintf(ev->reason + n, sizeof ev->reason - n, "; the move failed: %.120s", err->msg);
  }
  snprintf(ev->to, sizeof ev->to, "%s", w->placement->running);
  ev->moved = strcmp(ev->from, ev->to) != 0;
  history_add_locked(w, ev);
  pthread_mutex_unlock(&w->lock);
  return rc;
}
