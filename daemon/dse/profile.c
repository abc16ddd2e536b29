/* profile.c - measuring a workload's primitives on the CPU: the loop over
 * thread counts and primitives within the budget (profile.h has the method
 * and the time bound). The parts: profile_key.c (shapes and keys),
 * profile_timer.c (timing, pinning), profile_setup.c (what is measured),
 * profile_pipeline.c (the pipeline's own costs). */
#include "profile.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "profile_cache.h"
#include "profile_pipeline.h"
#include "profile_setup.h"
#include "profile_timer.h"

/* One primitive at one thread count: rd_profile_measure_cpu's loop body,
 * run by rd_profile_run_pinned. */
typedef struct {
  const rd_profile_shape_t *shape;
  rd_profile_train_t *tr;
  rd_profile_table_t *tab;
  uint32_t th;
  rd_primitive_t prim;
  double *calib_est; /* train: the calibration estimate, in and out */
  double slice_end, deadline;
  rd_profile_timing_t tm;       /* out; reps 0: no time */
  bool warned;       /* out: "no time" was logged already */
} slice_t;

static int measure_slice(void *arg, rd_error_t *err) {
  slice_t *sl = arg;
  const rd_profile_shape_t *shape = sl->shape;
  const rd_profile_key_t *k = &shape->key;
  rd_profile_train_t *tr = sl->tr;
  uint32_t th = sl->th;
  double now = rd_clock_now(), slice_end = sl->slice_end, deadline = sl->deadline;
  uint32_t calib_rows = k->batch < CALIB_ROWS ? k->batch : CALIB_ROWS;
  rd_profile_timing_t tm = {0, 0};
  int rc = RD_OK;
  if (sl->prim != RD_PRIM_TRAIN) {
    double est = 10e-6 + CALL_NS_PER_ITEM * k->batch;
    rc = rd_profile_time_calls(
        sl->prim == RD_PRIM_SAMPLE ? rd_profile_table_sample : rd_profile_table_update, sl->tab,
        est, 0, slice_end, deadline, &sl->tm, err);
    return rc;
  }
  /* The full step's estimate comes from a calibration step on the
   * batch's first CALIB_ROWS rows, scaled linearly (an overestimate:
   * larger products run at a higher rate), which is itself started only
   * if the FLOP estimate (or the last thread count's step, scaled down)
   * fits. Init and two calibration steps: the first touches the
   * parameters and a few rows' buffers for the first time. */
  double calib_bytes = rd_profile_learner_param_bytes(&shape->learner) +
                       rd_profile_learner_buffer_bytes(&shape->learner, calib_rows);
  double calib_guard = 2 * *sl->calib_est + COLD_SAFETY * calib_bytes / rd_profile_touch_bps();
  if (now + calib_guard > deadline) {
    rd_log_warn("profile", "%s batch %u: no time left for a train-step at %u threads",
                k->network, k->batch, th);
    sl->warned = true;
    return RD_OK;
  }
  rd_learner_config_t lc = shape->learner;
  lc.threads = th;
  if ((rc = rd_learner_init(&tr->l, &lc, err)) != RD_OK) return rc;
  tr->live = true;
  rd_batch_t cb = tr->b[0];
  cb.n = calib_rows;
  /* Twice: the first step of a new learner pays for first touches
   * of its buffers and the OpenMP team's start (3-10x a step). */
  double calib = 0;
  for (int rep = 0; rep < 2 && (rc == RD_OK || rc == RD_ERANGE); rep++) {
    double c0 = rd_clock_now();
    rc = rd_learner_step(&tr->l, &cb, tr->td, NULL, err);
    calib = rd_clock_now() - c0;
  }
  /* A warm step: the calibration scaled linearly (an overestimate:
   * larger products run at a higher rate); the first full step also
   * touches the buffers for the full batch for the first time. */
  double warm_est = calib * k->batch / calib_rows;
  double first_est = warm_est + COLD_SAFETY * rd_profile_learner_buffer_bytes(&lc, k->batch) /
                                    rd_profile_touch_bps();
  if (rc == RD_OK || rc == RD_ERANGE)
    rc = rd_profile_time_calls(rd_profile_train_call, tr, first_est, warm_est, slice_end, deadline,
                               &tm, err);
  rd_learner_free(&tr->l);
  tr->live = false;
  if (tm.reps > 0) *sl->calib_est = tm.latency_s * calib_rows / k->batch;
  else if (rc == RD_OK)
    rd_log_warn("profile", "%s batch %u: no time left for a train-step at %u threads "
                "(estimated %.0f ms, the first %.0f ms)", k->network, k->batch, th,
                warm_est * 1e3, first_est * 1e3);
  if (rc == RD_OK && tm.reps == 0) sl->warned = true;
  sl->tm = tm;
  return rc;
}

int rd_profile_check(const rd_profile_shape_t *s, const uint32_t *threads, size_t n,
                     double budget_s, size_t cap, rd_error_t *err) {
  if (s == NULL) return rd_error_set(err, RD_EINVAL, "no profile shape given");
  int rc = rd_profile_key_validate(&s->key, err);
  if (rc) return rc;
  bool none = strcmp(s->key.algorithm, "none") == 0;
  if (none == (s->has_learner != 0))
    return rd_error_set(err, RD_EINVAL, "profile algorithm \"%s\" and the learner config disagree",
                        s->key.algorithm);
  if (s->has_learner) {
    if ((rc = rd_learner_config_validate(&s->learner, err)) != RD_OK) return rc;
    if ((rc = rd_pin_check(&s->learner_pin, err)) != RD_OK ||
        (rc = rd_pin_check(&s->sampler_pin, err)) != RD_OK)
      return rc;
    if (s->learner.max_batch < s->key.batch)
      return rd_error_set(err, RD_EINVAL, "the learner's max_batch %u is below the batch %u",
                          s->learner.max_batch, s->key.batch);
  }
  if (!(s->alpha >= 0) || isinf(s->alpha))
    return rd_error_set(err, RD_EINVAL, "profile alpha must be a finite number >= 0, not %g",
                        s->alpha);
  if (!(budget_s > 0 && budget_s <= RD_PROFILE_MAX_BUDGET_S))
    return rd_error_set(err, RD_EINVAL, "profile budget %g s is outside (0, %g]", budget_s,
                        RD_PROFILE_MAX_BUDGET_S);
  if (threads == NULL || n == 0 || n > RD_PROFILE_MAX_THREAD_COUNTS)
    return rd_error_set(err, RD_EINVAL, "profiles need 1 to %d thread counts, not %zu",
                        RD_PROFILE_MAX_THREAD_COUNTS, threads ? n : 0);
  for (size_t i = 0; i < n; i++) {
    if (threads[i] == 0 || threads[i] > RD_MLP_MAX_THREADS)
      return rd_error_set(err, RD_EINVAL, "thread count %u is outside [1, %u]", threads[i],
                          RD_MLP_MAX_THREADS);
    for (size_t j = 0; j < i; j++)
      if (threads[j] == threads[i])
        return rd_error_set(err, RD_EINVAL, "thread count %u is given twice", threads[i]);
  }
  size_t need = s->has_learner ? n * 3 + RD_PRIM_PIPELINE_COUNT : n * 2;
  if (cap < need)
    return rd_error_set(err, RD_EINVAL, "room for %zu profiles is needed, not %zu", need, cap);
  return RD_OK;
}

int rd_profile_measure_cpu(const rd_profile_shape_t *shape, const uint32_t *thread_counts,
                           size_t n, double budget_s, rd_profile_t *out, size_t cap,
                           size_t *n_out, rd_error_t *err) {
  double start = rd_clock_now();
  *n_out = 0;
  int rc = rd_profile_check(shape, thread_counts, n, budget_s, cap, err);
  if (rc) return rc;
  const rd_profile_key_t *k = &shape->key;
  double deadline = start + budget_s;
  double setup_s = budget_s * RD_PROFILE_SETUP_SHARE;
  double tree_limit = setup_s * TREE_FILL_BPS;
  if (tree_limit > RD_PROFILE_TREE_BYTES) tree_limit = RD_PROFILE_TREE_BYTES;

  rd_device_t cpu;
  rd_devices_cpu(&cpu);

  rd_profile_table_t tab;
  if ((rc = rd_profile_table_setup(&tab, shape, tree_limit, start + setup_s, err)) != RD_OK)
    return rc;
  uint64_t items = rd_table_size(&tab.t);
  double setup_done = rd_clock_now();

  /* The train-step's synthetic batches, if they are not too large to make
   * in the time left (generation and first touches). */
  rd_profile_train_t tr;
  memset(&tr, 0, sizeof tr);
  bool train = false;
  if (shape->has_learner) {
    size_t floats = rd_profile_batch_floats(&shape->learner, k->batch);
    double gen = 2 * (floats * GEN_S_PER_FLOAT +
                      COLD_SAFETY * floats * sizeof(float) / rd_profile_touch_bps());
    if (floats == 0)
      rd_log_warn("profile", "%s batch %u: a synthetic batch would exceed %u MiB; train-step not "
                  "measured", k->network, k->batch, MAX_BATCH_BYTES >> 20);
    else if (rd_clock_now() + gen > deadline)
      rd_log_warn("profile", "%s batch %u: no time left to make train-step batches", k->network,
                  k->batch);
    else
      train = true;
  }
  if (train && (rc = rd_profile_train_data(&tr, &shape->learner, k->batch, err)) != RD_OK) {
    rd_profile_table_free(&tab);
    return rc;
  }
  uint32_t calib_rows = k->batch < CALIB_ROWS ? k->batch : CALIB_ROWS;
  double calib_est = train ? rd_profile_train_estimate(&shape->learner, calib_rows) : 0;

  size_t m = 0, n_prims = train ? 3 : 2, n_pipe = shape->has_learner ? RD_PRIM_PIPELINE_COUNT : 0;
  size_t slices = n * n_prims + n_pipe;
  double t_train0 = 0; /* the warm train-step at thread_counts[0], if measured */
  double t_rmm0 = 0;   /* sample + update at thread_counts[0], if both measured */
  int rmm0_parts = 0;
  for (size_t ti = 0; ti < n && rc == RD_OK; ti++) {
    uint32_t th = thread_counts[ti];
    tab.t.config.threads = th; /* the table passes it to the sum tree's kernels */
    rd_sumtree_set_threads(&tab.t.tree, th);
    for (size_t pi = 0; pi < n_prims && rc == RD_OK; pi++, slices--) {
      rd_primitive_t prim = (rd_primitive_t)pi;
      double now = rd_clock_now();
      slice_t sl = {shape, &tr, &tab, th, prim, &calib_est, now + (deadline - now) / (double)slices,
                    deadline, {0, 0}, false};
      rd_pin_t pin;
      if (prim == RD_PRIM_TRAIN)
        rd_cores_for_threads(&shape->learner_pin, &shape->sampler_pin, th, &pin);
      else
        rd_cores_for_threads(&shape->sampler_pin, &shape->learner_pin, th, &pin);
      if ((rc = rd_profile_run_pinned(&pin, measure_slice, &sl, err)) != RD_OK) break;
      rd_profile_timing_t tm = sl.tm;
      if (tm.reps == 0) {
        if (!sl.warned)
          rd_log_warn("profile", "%s batch %u: no time left to measure %s at %u threads",
                      k->network[0] ? k->network : "replay", k->batch, rd_primitive_name(prim),
                      th);
        continue;
      }
      if (prim == RD_PRIM_TRAIN && ti == 0) t_train0 = tm.latency_s;
      if (prim != RD_PRIM_TRAIN && ti == 0) {
        t_rmm0 += tm.latency_s;
        rmm0_parts++;
      }
      rd_profile_t *r = &out[m++];
      memset(r, 0, sizeof *r);
      snprintf(r->device_fp, sizeof r->device_fp, "%s", cpu.fingerprint);
      r->primitive = prim;
      r->threads = th;
      r->shape = *k;
      snprintf(r->build, sizeof r->build, "%s", rd_profile_build());
      r->latency_s = tm.latency_s;
      r->reps = tm.reps;
      r->items = prim == RD_PRIM_TRAIN ? 0 : items;
      r->source = RD_PROFILE_MEASURED;
    }
  }
  /* The pipeline's own costs, once (profile.h), at the first thread count. */
  double t_gather = 0;
  tab.t.config.threads = thread_counts[0];
  rd_sumtree_set_threads(&tab.t.tree, thread_counts[0]);
  for (size_t pi = 0; pi < n_pipe && rc == RD_OK; pi++, slices--) {
    rd_primitive_t prim = (rd_primitive_t)(RD_PRIM_GATHER + pi);
    double now = rd_clock_now();
    double slice_end = now + (deadline - now) / (double)slices;
    rd_profile_timing_t tm = {0, 0};
    rd_learner_config_t lc = shape->learner;
    lc.threads = thread_counts[0];
    double t_sampler = rmm0_parts == 2 && t_gather > 0 ? t_rmm0 + t_gather : 0;
    if ((rc = rd_profile_measure_pipeline(prim, shape, train ? &tr : NULL, &lc, t_train0, &tab,
                                          t_sampler, slice_end, deadline, &tm, err)) != RD_OK)
      break;
    if (prim == RD_PRIM_GATHER && tm.reps > 0) t_gather = tm.latency_s;
    if (tm.reps == 0) {
      if (tm.latency_s == 0)
        rd_log_warn("profile", "%s batch %u: no time left to measure %s", k->network, k->batch,
                    rd_primitive_name(prim));
      continue;
    }
    rd_profile_t *r = &out[m++];
    memset(r, 0, sizeof *r);
    snprintf(r->device_fp, sizeof r->device_fp, "%s", cpu.fingerprint);
    r->primitive = prim;
    r->threads = thread_counts[0];
    r->shape = *k;
    snprintf(r->build, sizeof r->build, "%s", rd_profile_build());
    r->latency_s = tm.latency_s;
    r->reps = tm.reps;
    r->items = 0;
    r->source = RD_PROFILE_MEASURED;
  }
  rd_profile_train_free(&tr);
  rd_profile_table_free(&tab);
  if (rc) {
    /* A valid shape never makes a primitive fail; report it as ours. */
    if (rc != RD_ENOMEM) {
      char why[RD_ERROR_MSG_MAX];
      snprintf(why, sizeof why, "%s", err ? err->msg : rd_err_name(rc));
      rc = rd_error_set(err, RD_EINTERNAL, "profiling failed: %.200s", why);
    }
    return rc;
  }
  int64_t when = (int64_t)time(NULL);
  for (size_t i = 0; i < m; i++) out[i].measured_unix = when;
  double end = rd_clock_now();
  rd_log_info("profile", "%s: %s batch %u capacity %u K %u: %zu of %zu latencies in %.0f ms "
              "(budget %.0f ms; table of %llu items set up in %.0f ms)",
              cpu.fingerprint, k->network[0] ? k->network : "replay", k->batch, k->capacity,
              k->fanout, m, n * n_prims + n_pipe, (end - start) * 1e3, budget_s * 1e3,
              (unsigned long long)items, (setup_done - start) * 1e3);
  *n_out = m;
  return RD_OK;
}
static int measure_cpu(const rd_profile_shape_t *shape, const rd_device_t *dev,
                       const uint32_t *threads, size_t n, double budget_s, rd_profile_t *out,
                       size_t cap, size_t *n_out, int *fault, rd_error_t *err) {
  (void)dev; /* this machine's CPU: rd_profile_measure_cpu takes the listed one */
  *fault = 0;
  return rd_profile_measure_cpu(shape, threads, n, budget_s, out, cap, n_out, err);
}

const rd_profiler_t rd_profiler_cpu = {rd_profile_check, measure_cpu};
