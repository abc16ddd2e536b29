/* placement.c - providers' figures -> mapper -> bind (placement.h). */
#include "placement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "provider.h"
#include "rd_clock.h"

#define DEFAULT_N_ACTOR 16.0 /* papers/001 §VII-A: 16 actors, one item each per step */

/* Every time of the table (a reply's PlatformRow seconds) is a finite
 * number > 0, and the CPU pipeline's costs finite and >= 0: RD_EINVAL
 * naming the entry when it is the client's (an assumed GPU's profiles),
 * RD_EINTERNAL when it is this server's (a measurement, a stored profile,
 * the FPGA model of an operator's part file). Profiles hold latencies in
 * [RD_PROFILE_LATENCY_MIN_S, _MAX_S] and the model's inputs are bounded,
 * so this fails only where something upstream let a figure through. */
static int table_finite(const rd_ptable_t *t, rd_error_t *err) {
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    const rd_pdevice_t *p = &t->dev[d];
    if (!p->present) continue;
    const double v[2] = {p->t_learner, p->t_rmm};
    const rd_pt_source_t src[2] = {p->src_learner, p->src_rmm};
    for (int k = 0; k < 2; k++) {
      if (src[k] == RD_PT_NONE || (isfinite(v[k]) && v[k] > 0)) continue;
      return rd_error_set(err, src[k] == RD_PT_ASSUMED ? RD_EINVAL : RD_EINTERNAL,
                          "the %s %s time (%s) is %g s, not a finite number > 0",
                          rd_devkind_name((rd_devkind_t)d), k ? "rmm" : "learner",
                          rd_pt_source_name(src[k]), v[k]);
    }
  }
  const double extra[3] = {t->cpu_gather_s, t->cpu_handoff_s, t->cpu_pass_s};
  for (int i = 0; i < 3; i++)
    if (!(isfinite(extra[i]) && extra[i] >= 0))
      return rd_error_set(err, RD_EINTERNAL, "the cpu pipeline's %s cost is %g s",
                          i == 0 ? "gather" : i == 1 ? "handoff" : "pass", extra[i]);
  return RD_OK;
}

/* Each provider's row, in table order (the CPU's first): what every device
 * kind can do for this workload, measured, cached, modelled or assumed.
 * Each provider checks its part of the request first, so a bad plan
 * measures nothing. */
static int providers_figures(const rd_dse_workload_t *w, rd_placement_t *o, rd_error_t *err) {
  const rd_device_provider_t *const *p = rd_providers();
  for (int r = 0; r < RD_DEV_COUNT; r++) {
    int rc = p[r]->check != NULL ? p[r]->check(w, err) : RD_OK;
    if (rc) return rc;
  }
  rd_device_t devs[RD_MAX_DEVICES];
  size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
  for (int r = 0; r < RD_DEV_COUNT; r++) {
    int rc = p[r]->figures(w, devs, nd, o, err);
    if (rc) return rc;
  }
  return RD_OK;
}

/* The table's workload figures (mapper.h rd_ptable_t; placement.h). */
static void workload_figures(const rd_dse_workload_t *w, rd_placement_t *o) {
  const rd_pipeline_config_t *pc = w->pc;
  o->table.batch = pc->batch;
  uint64_t row = rd_schema_row_bytes(&w->tc->schema);
  o->table.item_words = (uint32_t)((row + RD_MAPPER_WORD_BYTES - 1) / RD_MAPPER_WORD_BYTES);
  if (o->table.item_words == 0) o->table.item_words = 1;
  o->table.n_actor =
      pc->samples_per_insert > 0 ? (double)pc->batch / pc->samples_per_insert : DEFAULT_N_ACTOR;
  o->table.depth = pc->depth;
  o->table.link_bytes_per_s = 0;
  o->table.cpu_cores = o->device[RD_DEV_CPU].cores;
  o->table.cpu_learner_threads = w->learner_threads;
}

/* o->note from o's code, running, the providers' glosses and why. The
 * providers see running first (a part that no longer runs on them). */
static void compose_note(rd_placement_t *o) {
  const rd_device_provider_t *const *p = rd_providers();
  char text[RD_DEV_COUNT][RD_PLACEMENT_NOTE_MAX];
  for (int r = 0; r < RD_DEV_COUNT; r++) {
    text[r][0] = '\0';
    if (p[r]->running != NULL) p[r]->running(o, text[r], sizeof text[r]);
  }
  size_t n = (size_t)snprintf(o->note, sizeof o->note, "mapped %s; running %s", o->code,
                              o->running);
  for (int r = 0; r < RD_DEV_COUNT; r++)
    if (text[r][0] && n < sizeof o->note)
      n += (size_t)snprintf(o->note + n, sizeof o->note - n, " (%s)", text[r]);
  if (o->why[0]) {
    rd_provider_append(o->note, sizeof o->note, ": ");
    rd_provider_append(o->note, sizeof o->note, o->why);
  }
}

void rd_placement_bind(rd_placement_t *o, const rd_table_config_t *tc,
                       const rd_learner_config_t *lc) {
  o->learner_kind = RD_LEARNER_ON_CPU;
  o->learner_device = 0;
  o->learner_ops = NULL;
  o->rmm_ops = NULL;
  o->storage_ops = NULL;
  o->why[0] = '\0';
  char run[RD_PART_COUNT] = {'C', 'C', 'C'};
  const rd_device_provider_t *const *p = rd_providers();
  for (int r = 0; r < RD_DEV_COUNT; r++)
    if (p[r]->bind != NULL) p[r]->bind(o, tc, lc, run);
  snprintf(o->running, sizeof o->running, "%c-%c-%c", run[0], run[1], run[2]);
  compose_note(o);
}

void rd_placement_rmm_on_cpu(rd_placement_t *p, const char *why) {
  p->rmm_ops = NULL;
  if (strlen(p->running) == 5) p->running[2] = 'C';
  if (p->storage_ops != NULL && strlen(p->running) == 5) p->running[4] = 'C';
  p->storage_ops = NULL;
  char old[sizeof p->why];
  snprintf(old, sizeof old, "%s", p->why);
  snprintf(p->why, sizeof p->why, "the replay module stays on the CPU: %.250s", why);
  if (old[0]) rd_provider_add_why(p->why, sizeof p->why, old);
  compose_note(p);
}

void rd_placement_table_failed(rd_placement_t *p, const char *why) {
  /* The devices the sum tree and the rows ran on: running's letters 2, 4. */
  for (int pos = 2; pos <= 4; pos += 2) {
    if (strlen(p->running) != 5 || p->running[pos] == 'C') continue;
    for (int d = 0; d < RD_DEV_COUNT; d++)
      if (rd_devkind_letter((rd_devkind_t)d) == p->running[pos] && p->has_device[d])
        rd_devices_mark_unusable(p->device[d].kind, p->device[d].index, why);
  }
  char text[RD_ERROR_MSG_MAX + 64];
  snprintf(text, sizeof text, "failed while serving, moved to the CPU: %.200s", why);
  rd_placement_rmm_on_cpu(p, text);
}

/* The mapping of o's table and what of it runs; RD_EINVAL when the
 * workload's own figures cannot be predicted (mapper.h RD_ERANGE). */
static int map_and_bind(rd_placement_t *o, const rd_table_config_t *tc,
                        const rd_learner_config_t *lc, rd_error_t *err) {
  snprintf(o->running, sizeof o->running, "C-C-C");
  o->learner_kind = RD_LEARNER_ON_CPU;
  rd_error_t merr;
  rd_error_clear(&merr);
  int rc = rd_map(&o->table, &o->mapping, &merr);
  if (rc == RD_OK) {
    o->mapped = 1;
    rd_mapping_format(&o->mapping, o->code, sizeof o->code);
    rd_placement_bind(o, tc, lc);
  } else if (rc == RD_ERANGE) {
    /* Finite times whose prediction is not (mapper.h): every time is
     * bounded, so the workload's own figures put it out of range. */
    return rd_error_set(err, RD_EINVAL, "the mapping cannot be predicted: %.200s", merr.msg);
  } else {
    snprintf(o->note, sizeof o->note, "not mapped (%.120s); running %s", merr.msg, o->running);
  }
  return RD_OK;
}

int rd_placement_compute(rd_store_t *store, const rd_table_config_t *tc,
                         const rd_pipeline_config_t *pc, uint32_t learner_threads,
                         double budget_s, const char *fpga_parts_dir,
                         const rd_placement_assume_t *assume, rd_placement_t *out,
                         rd_error_t *err) {
  double t0 = rd_clock_now();
  static const rd_placement_assume_t none = {NULL, 0, NULL, 0, 0};
  if (assume == NULL) assume = &none;
  if (learner_threads == 0) learner_threads = 1;
  rd_placement_t o;
  memset(&o, 0, sizeof o);
  o.learner_threads = learner_threads;
  if (pc != NULL) {
    o.learner_pin = pc->learner_pin;
    o.sampler_pin = pc->sampler_pin;
  }
  rd_profile_shape_t shape;
  int rc = rd_profile_shape_init(&shape, tc, pc, 0, err);
  if (rc) return rc;
  const rd_dse_workload_t w = {store, &shape, tc, pc, learner_threads,
                               budget_s, fpga_parts_dir, assume};
  if ((rc = providers_figures(&w, &o, err)) != RD_OK) return rc;
  workload_figures(&w, &o);
  if ((rc = table_finite(&o.table, err)) != RD_OK) return rc;
  if ((rc = map_and_bind(&o, tc, &pc->learner, err)) != RD_OK) return rc;
  o.register_ms = (rd_clock_now() - t0) * 1e3;
  *out = o;
  return RD_OK;
}
