/* remap.c - Algorithm 3 over a set of workloads with shared devices (see
 * remap.h). */
#include "remap.h"

#include <math.h>
#include <string.h>

/* The devices each workload's primitives occupy under a choice. */
typedef struct {
  int used; /* 1: decided (placed, or chosen in this search) */
  rd_devkind_t l, r;
} choice_t;

static int uses(const choice_t *c, int d) { return c->used && ((int)c->l == d || (int)c->r == d); }

/* Item i's table with each device's times divided by the share it would
 * get there beside the others' choices. */
static void scaled_table(const rd_remap_item_t *items, const choice_t *ch, size_t n, size_t i,
                         rd_ptable_t *t) {
  *t = items[i].table;
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    double others = 0;
    for (size_t j = 0; j < n; j++)
      if (j != i && uses(&ch[j], d)) others += items[j].weight;
    double share = items[i].weight / (items[i].weight + others);
    t->dev[d].t_learner /= share;
    t->dev[d].t_rmm /= share;
  }
}

/* t restricted to learner on l and RMM on r (other entries removed). */
static void forced(rd_ptable_t *t, rd_devkind_t l, rd_devkind_t r) {
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    if (d != (int)l) t->dev[d].src_learner = RD_PT_NONE;
    if (d != (int)r) t->dev[d].src_rmm = RD_PT_NONE;
  }
}

/* Item i's GPS with learner l and RMM r under the sharing of ch. */
static int gps_of(const rd_remap_item_t *items, const choice_t *ch, size_t n, size_t i,
                  rd_devkind_t l, rd_devkind_t r, rd_mapping_t *m, rd_error_t *err) {
  rd_ptable_t t;
  scaled_table(items, ch, n, i, &t);
  forced(&t, l, r);
  return rd_map(&t, m, err);
}

/* Item i's best response to the others' choices. */
static int best_response(const rd_remap_item_t *items, const choice_t *ch, size_t n, size_t i,
                         rd_mapping_t *m, rd_error_t *err) {
  rd_ptable_t t;
  scaled_table(items, ch, n, i, &t);
  return rd_map(&t, m, err);
}

/* Total GPS of every decided item under ch; each item's in gps[]. */
static int total_of(const rd_remap_item_t *items, const choice_t *ch, size_t n, double *gps,
                    rd_devkind_t *storage, double *total, rd_error_t *err) {
  *total = 0;
  for (size_t i = 0; i < n; i++) {
    rd_mapping_t m;
    int rc = gps_of(items, ch, n, i, ch[i].l, ch[i].r, &m, err);
    if (rc != RD_OK) return rc;
    gps[i] = m.gps;
    if (storage) storage[i] = m.storage;
    *total += m.gps;
  }
  return RD_OK;
}

int rd_remap(const rd_remap_item_t *items, size_t n, double threshold, rd_remap_result_t *out,
             rd_remap_summary_t *sum, rd_error_t *err) {
  if (n > RD_REMAP_MAX)
    return rd_error_set(err, RD_EINVAL, "%zu workloads: at most %d at once", n, RD_REMAP_MAX);
  if (!isfinite(threshold) || threshold < 0)
    return rd_error_set(err, RD_EINVAL, "threshold %g: must be finite and >= 0", threshold);
  choice_t base[RD_REMAP_MAX], prop[RD_REMAP_MAX];
  double g_base[RD_REMAP_MAX], g_prop[RD_REMAP_MAX];
  rd_devkind_t s_base[RD_REMAP_MAX], s_prop[RD_REMAP_MAX];
  memset(base, 0, sizeof base);
  for (size_t i = 0; i < n; i++) {
    if (items[i].weight == 0)
      return rd_error_set(err, RD_EINVAL, "workload %zu: weight 0 (must be >= 1)", i);
    if (!items[i].placed) continue;
    const rd_pdevice_t *dl = &items[i].table.dev[items[i].learner];
    const rd_pdevice_t *dr = &items[i].table.dev[items[i].rmm];
    if ((unsigned)items[i].learner >= RD_DEV_COUNT || (unsigned)items[i].rmm >= RD_DEV_COUNT ||
        !dl->present || dl->src_learner == RD_PT_NONE || !dr->present ||
        dr->src_rmm == RD_PT_NONE)
      return rd_error_set(err, RD_EINVAL, "workload %zu: its current mapping uses a device that "
                          "cannot run its primitive", i);
    base[i] = (choice_t){1, items[i].learner, items[i].rmm};
  }
  /* The baseline: new workloads register alone, in order, nobody moves. */
  for (size_t i = 0; i < n; i++) {
    if (base[i].used) continue;
    rd_mapping_t m;
    int rc = best_response(items, base, n, i, &m, err);
    if (rc != RD_OK) return rc;
    base[i] = (choice_t){1, m.learner, m.rmm};
  }
  double total_base, total_prop;
  int rc = total_of(items, base, n, g_base, s_base, &total_base, err);
  if (rc != RD_OK) return rc;
  /* The proposal: best responses from the baseline until nothing changes. */
  memcpy(prop, base, sizeof prop[0] * n);
  uint32_t rounds = 0;
  for (int changed = 1; changed && rounds < 4 * n; rounds++) {
    changed = 0;
    for (size_t i = 0; i < n; i++) {
      rd_mapping_t m;
      if ((rc = best_response(items, prop, n, i, &m, err)) != RD_OK) return rc;
      if (m.learner != prop[i].l || m.rmm != prop[i].r) {
        prop[i].l = m.learner;
        prop[i].r = m.rmm;
        changed = 1;
      }
    }
  }
  if ((rc = total_of(items, prop, n, g_prop, s_prop, &total_prop, err)) != RD_OK) return rc;
  int adopt = total_prop > total_base * (1 + threshold);
  const choice_t *win = adopt ? prop : base;
  uint32_t moves = 0;
  for (size_t i = 0; i < n; i++) {
    rd_remap_result_t *o = &out[i];
    o->learner = win[i].l;
    o->rmm = win[i].r;
    o->storage = adopt ? s_prop[i] : s_base[i];
    o->gps = adopt ? g_prop[i] : g_base[i];
    o->gps_before = g_base[i];
    o->moved = items[i].placed && (o->learner != items[i].learner || o->rmm != items[i].rmm);
    moves += (uint32_t)o->moved;
  }
  if (sum != NULL)
    *sum = (rd_remap_summary_t){total_base, total_prop, adopt, rounds, moves};
  return RD_OK;
}
