/* provider_gpu.c - the GPU's device provider (provider_gpu.h): the GPU row
 * of the primitive-platform table from stored, measured or assumed
 * profiles, and what of a mapping runs on the GPU. Built in every build;
 * the device-specific calls it makes are answered by the CUDA half or, in
 * a build without CUDA, by provider_gpu_nocuda.c. */
#include "provider_gpu.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "profile_gpu.h"
#include "provider.h"
#include "rmm_gpu.h"

/* ---- Figures ---- */

static int measure(const rd_profile_shape_t *shape, const rd_device_t *dev,
                   const uint32_t *threads, size_t n, double budget_s, rd_profile_t *out,
                   size_t cap, size_t *n_out, int *fault, rd_error_t *err) {
  (void)threads; /* a GPU call has no thread count: rows at "threads" 1 */
  (void)n;
  return rd_profile_measure_gpu(shape, dev, budget_s, out, cap, n_out, fault, err);
}

const rd_profiler_t rd_profiler_gpu = {NULL, measure};

/* The fastest row of primitive prim for shape k. */
static const rd_profile_t *best_row(const rd_profile_t *rows, size_t n, const rd_profile_key_t *k,
                                    rd_primitive_t prim) {
  const rd_profile_t *best = NULL;
  for (size_t i = 0; i < n; i++)
    if (rows[i].primitive == prim && rd_profile_key_equal(&rows[i].shape, k) &&
        (best == NULL || rows[i].latency_s < best->latency_s))
      best = &rows[i];
  return best;
}

/* The GPU row from profile rows (assumed, stored or measured). 1 if it has
 * anything. */
static int gpu_row(const rd_profile_t *rows, size_t n, const rd_profile_key_t *k,
                   rd_pt_source_t src, rd_placement_t *o) {
  const rd_profile_t *s = best_row(rows, n, k, RD_PRIM_SAMPLE);
  const rd_profile_t *u = best_row(rows, n, k, RD_PRIM_UPDATE);
  const rd_profile_t *t = best_row(rows, n, k, RD_PRIM_TRAIN);
  rd_pdevice_t *d = &o->table.dev[RD_DEV_GPU];
  if (s && u) {
    d->t_rmm = s->latency_s + u->latency_s;
    d->src_rmm = src;
  }
  if (t) {
    d->t_learner = t->latency_s;
    d->src_learner = src;
  }
  const rd_profile_t *any = t ? t : s ? s : u;
  if (any)
    snprintf(o->fingerprint[RD_DEV_GPU], sizeof o->fingerprint[RD_DEV_GPU], "%s",
             any->device_fp);
  return d->src_rmm != RD_PT_NONE || d->src_learner != RD_PT_NONE;
}

/* Assumed GPU rows must cover this shape: checked before anything is
 * measured, so a bad plan costs nothing. */
static int check(const rd_dse_workload_t *w, rd_error_t *err) {
  const rd_placement_assume_t *a = w->assume;
  if (a->gpu_rows == NULL || a->n_gpu_rows == 0) return RD_OK;
  rd_placement_t probe;
  memset(&probe, 0, sizeof probe);
  const rd_profile_key_t *k = &w->shape->key;
  if (!gpu_row(a->gpu_rows, a->n_gpu_rows, k, RD_PT_ASSUMED, &probe))
    return rd_error_set(err, RD_EINVAL,
                        "the assumed GPU profiles have no row for this workload's shape "
                        "(%s batch %u capacity %u fanout %u)",
                        k->network, k->batch, k->capacity, k->fanout);
  return RD_OK;
}

/* The row of present GPU gpu through the profile cache: stored rows of its
 * fingerprint, or measured now (with the profiler, not on a restart). A
 * device fault while measuring gives the GPU up and takes it out of the
 * table. */
static void present_row(const rd_dse_workload_t *w, const rd_device_t *gpu, rd_placement_t *o) {
  o->table.dev[RD_DEV_GPU].present = 1;
  o->device[RD_DEV_GPU] = *gpu;
  o->has_device[RD_DEV_GPU] = 1;
  snprintf(o->fingerprint[RD_DEV_GPU], sizeof o->fingerprint[RD_DEV_GPU], "%s",
           gpu->fingerprint);
  const int built = rd_profile_gpu_built();
  rd_profile_request_t q = {w->store, gpu, w->shape, NULL, 0, w->budget_s,
                            w->assume->cache_only || !built};
  rd_profile_t rows[3];
  size_t n = 0;
  int hit = 0, fault = 0;
  rd_error_t err;
  rd_error_clear(&err);
  const char *how = NULL;
  char gerr[RD_ERROR_MSG_MAX + 64] = "";
  int rc = rd_profile_cached(&rd_profiler_gpu, &q, rows, 3, &n, &hit, &fault, &err);
  if (rc == RD_OK) {
    if (gpu_row(rows, n, &w->shape->key, hit ? RD_PT_CACHED : RD_PT_MEASURED, o))
      how = hit ? "profiles from the store" : "measured on this GPU (or stored by this build)";
  } else if (rc != RD_ENOTFOUND || !q.cache_only) {
    rd_log_warn("profile", "gpu%u: %s", gpu->index, err.msg);
    if (fault) {
      rd_devices_mark_unusable("gpu", gpu->index, err.msg);
      o->table.dev[RD_DEV_GPU].present = 0;
      o->has_device[RD_DEV_GPU] = 0;
    }
    snprintf(gerr, sizeof gerr, "GPU profile failed%s: %.200s", fault ? " (now unusable)" : "",
             err.msg);
  }
  snprintf(o->detail[RD_DEV_GPU], sizeof o->detail[RD_DEV_GPU], "%.199s",
           how ? how
           : gerr[0] ? gerr
           : built ? "no stored profiles for this shape (restore: never measured at start)"
                   : "no GPU profiler in this build and no stored profiles for this shape "
                     "(import them: replayctl profiles import)");
}

/* The GPU row: assumed rows, or the first usable GPU of this server. */
static int figures(const rd_dse_workload_t *w, const rd_device_t *devs, size_t nd,
                   rd_placement_t *o, rd_error_t *err) {
  (void)err;
  const rd_placement_assume_t *a = w->assume;
  if (a->gpu_rows != NULL && a->n_gpu_rows > 0) {
    o->table.dev[RD_DEV_GPU].present = 1;
    gpu_row(a->gpu_rows, a->n_gpu_rows, &w->shape->key, RD_PT_ASSUMED, o);
    snprintf(o->detail[RD_DEV_GPU], sizeof o->detail[RD_DEV_GPU],
             "assumed: the fastest given profile of each primitive");
    return RD_OK;
  }
  if (a->ignore_present) return RD_OK;
  for (size_t i = 0; i < nd; i++) {
    if (strcmp(devs[i].kind, "gpu") != 0) continue;
    if (!rd_device_usable(&devs[i])) { /* given up after a failure: not a candidate */
      snprintf(o->detail[RD_DEV_GPU], sizeof o->detail[RD_DEV_GPU], "gpu%u %.180s",
               devs[i].index, devs[i].status);
      continue;
    }
    present_row(w, &devs[i], o);
    break; /* one GPU row: the first usable GPU */
  }
  return RD_OK;
}

/* ---- What runs here ---- */

/* Whether the GPU replay module (part RD_PART_RMM) or storage
 * (RD_PART_STORAGE) of rmm_gpu.h can hold table tc on d: its ops in *run,
 * or 0 and why. */
static int module_for(const rd_device_t *d, rd_part_t part, const rd_table_config_t *tc,
                      rd_dse_runner_t *run, char *why, size_t len) {
  if (!rd_gpu_rmm_built()) {
    snprintf(why, len, "built without CUDA");
    return 0;
  }
  size_t row = rd_schema_row_bytes(&tc->schema);
  size_t bytes = part == RD_PART_RMM ? rd_gpu_rmm_device_bytes(tc->capacity, tc->fanout)
                                     : rd_gpu_storage_device_bytes(tc->capacity, row);
  const char *what = part == RD_PART_RMM ? "sum tree" : "rows";
  if (bytes == 0 || bytes > d->memory_bytes) {
    snprintf(why, len, "gpu%u cannot hold this table's %s (%u items%s: %zu bytes; it has "
             "%llu)", d->index, what, tc->capacity,
             part == RD_PART_RMM ? "" : bytes == 0 ? " of rows too wide" : "", bytes,
             (unsigned long long)d->memory_bytes);
    return 0;
  }
  if (part == RD_PART_RMM)
    run->rmm_ops = rd_gpu_rmm_ops((int)d->index);
  else
    run->storage_ops = rd_gpu_storage_ops((int)d->index);
  if ((part == RD_PART_RMM && run->rmm_ops == NULL) ||
      (part == RD_PART_STORAGE && run->storage_ops == NULL)) {
    snprintf(why, len, "gpu%u is beyond the %d GPUs the replay module serves", d->index,
             RD_GPU_RMM_MAX_DEVICES);
    return 0;
  }
  return 1;
}

static int can_run(const rd_device_t *d, rd_part_t part, const rd_table_config_t *tc,
                   const rd_learner_config_t *lc, rd_dse_runner_t *run, char *why, size_t len) {
  (void)lc;
  if (len > 0) why[0] = '\0';
  if (d == NULL) {
    snprintf(why, len, "no usable GPU on this server");
    return 0;
  }
  if (strcmp(d->kind, "gpu") != 0 || !rd_device_usable(d)) {
    snprintf(why, len, "%.8s%u %.200s", d->kind, d->index,
             strcmp(d->kind, "gpu") != 0 ? "is not a GPU" : d->status);
    return 0;
  }
  memset(run, 0, sizeof *run);
  if (part == RD_PART_LEARNER) {
    if (!rd_learner_gpu_built()) {
      snprintf(why, len, "built without CUDA");
      return 0;
    }
    run->learner_kind = RD_LEARNER_ON_GPU;
    run->learner_device = d->index;
    return 1;
  }
  return module_for(d, part, tc, run, why, len);
}

/* The parts mapped to the GPU that run on o's GPU, and why the others do
 * not: "GPU backend not available" when nothing of the mapping runs on
 * the GPU (saying why for a learner mapped there); else each part's own. */
static void bind(rd_placement_t *o, const rd_table_config_t *tc, const rd_learner_config_t *lc,
                 char run[RD_PART_COUNT]) {
  const rd_mapping_t *m = &o->mapping;
  const rd_devkind_t want[RD_PART_COUNT] = {m->learner, m->rmm, m->storage};
  const rd_device_t *d = o->has_device[RD_DEV_GPU] ? &o->device[RD_DEV_GPU] : NULL;
  char why[RD_PART_COUNT][RD_ERROR_MSG_MAX];
  int runs[RD_PART_COUNT];
  int missing = rd_provider_bind_parts(&rd_provider_gpu, o, tc, lc, run, runs, why);
  int any = runs[0] || runs[1] || runs[2];
  if (!missing) return;
  if (!any) {
    char text[RD_ERROR_MSG_MAX + 64];
    snprintf(text, sizeof text, "GPU backend not available%s",
             m->learner != RD_DEV_GPU ? ""
             : !rd_learner_gpu_built() ? " (built without CUDA)"
             : d == NULL ? " (no usable GPU on this server)" : "");
    rd_provider_add_why(o->why, sizeof o->why, text);
    return;
  }
  static const char *const stays[RD_PART_COUNT] = {
      "the learner stays on the CPU: ", "the replay module stays on the CPU: ",
      "the storage stays in host memory: "};
  const int module = rd_gpu_rmm_built();
  for (int i = 0; i < RD_PART_COUNT; i++) {
    if (want[i] != RD_DEV_GPU || runs[i]) continue;
    if (i > 0 && !module) { /* no replay module in this build: one reason for both */
      if (strstr(o->why, why[i]) == NULL) rd_provider_add_why(o->why, sizeof o->why, why[i]);
      continue;
    }
    char text[RD_ERROR_MSG_MAX + 64];
    snprintf(text, sizeof text, "%s%.250s", stays[i], why[i]);
    rd_provider_add_why(o->why, sizeof o->why, text);
  }
}

/* Nothing to add to the note: the running code says where each part is. */
static void running(rd_placement_t *o, char *text, size_t len) {
  (void)o;
  if (len > 0) text[0] = '\0';
}

const rd_device_provider_t rd_provider_gpu = {
    .kind = "gpu",
    .row = RD_DEV_GPU,
    .discover = rd_gpu_provider_discover,
    .fingerprint_key = NULL,
    .profiler = &rd_profiler_gpu,
    .check = check,
    .figures = figures,
    .can_run = can_run,
    .bind = bind,
    .running = running,
};
