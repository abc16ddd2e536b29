/* profile_gpu.c - the GPU profiler (profile_gpu.h). Compiled only with the
 * GPU backend (daemon/meson.build: rd_gpu_enabled); provider_gpu_nocuda.c
 * stands in otherwise. */
#include "profile_gpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "learner_gpu.h"
#include "log.h"
#include "profile_timer.h"
#include "rd_clock.h"
#include "sumtree_gpu.h"
#include "rd_rng.h"

int rd_profile_gpu_built(void) { return 1; }

#define GPU_REP_TARGET_S 1e-3 /* a repetition: about 1 ms of calls */
#define GPU_MAX_CALLS_PER_REP 4096u
#define FILL_CHUNK (1u << 16)  /* leaves uploaded per set_range while filling */

static float unif(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)rd_rng_unit(s);
}

typedef int (*call_fn)(void *ctx, rd_error_t *err);

/* `warmups` untimed calls (each started only if the previous one's time
 * still fits before slice_end), then up to RD_PROFILE_REPS repetitions of
 * k calls, each started only if it ends by slice_end at the slowest
 * per-call time seen (at first: the last warm-up's). *latency = the median
 * per-call time; *reps = 0 when nothing fit. */
static int time_calls(call_fn fn, void *ctx, int warmups, double slice_end, double *latency,
                      uint32_t *reps_out, rd_error_t *err) {
  *reps_out = 0;
  double slowest = 0;
  for (int w = 0; w < warmups; w++) {
    double t0 = rd_clock_now();
    if (t0 + slowest > slice_end) return RD_OK;
    int rc = fn(ctx, err);
    if (rc) return rc;
    slowest = rd_clock_now() - t0;
  }
  if (slowest < 1e-9) slowest = 1e-9;
  /* The repetitions as the CPU profiler's, each ending by slice_end, the
   * first one's time replacing the last warm-up's. */
  rd_profile_timing_t tm;
  int rc = rd_profile_reps(fn, ctx, slowest, GPU_REP_TARGET_S, GPU_MAX_CALLS_PER_REP, slice_end,
                           slice_end, 1, &tm, err);
  if (rc) return rc;
  if (tm.reps == 0) return RD_OK;
  *latency = tm.latency_s;
  *reps_out = tm.reps;
  return RD_OK;
}

/* ---- sum tree ---- */

typedef struct {
  rd_gpu_sumtree_t tree;
  uint32_t batch, items;
  uint64_t *targets, *values;
  uint32_t *leaves, *positions;
  uint64_t rng;
} tree_ctx_t;

static int sample_call(void *p, rd_error_t *err) {
  tree_ctx_t *c = p;
  return rd_gpu_sumtree_sample(&c->tree, c->batch, c->targets, c->leaves, err);
}

static int update_call(void *p, rd_error_t *err) {
  tree_ctx_t *c = p;
  return rd_gpu_sumtree_update(&c->tree, c->batch, c->positions, c->values, err);
}

static void tree_free(tree_ctx_t *c) {
  if (c->tree.impl != NULL) rd_gpu_sumtree_free(&c->tree);
  free(c->targets);
  free(c->values);
  free(c->leaves);
  free(c->positions);
}

/* Build and fill the tree by setup_end. *fault on a device error. */
static int tree_setup(tree_ctx_t *c, const rd_profile_key_t *k, int ordinal, double setup_end,
                      int *fault, rd_error_t *err) {
  memset(c, 0, sizeof *c);
  c->rng = 0x5eed0001ull;
  c->batch = k->batch;
  uint32_t cap = k->capacity;
  while (cap / 2 >= k->batch && rd_gpu_sumtree_memsize(cap, k->fanout) > RD_PROFILE_TREE_BYTES)
    cap /= 2;
  size_t fill = FILL_CHUNK > k->batch ? FILL_CHUNK : k->batch;
  c->targets = malloc(k->batch * sizeof *c->targets);
  c->leaves = malloc(k->batch * sizeof *c->leaves);
  c->positions = malloc(k->batch * sizeof *c->positions);
  c->values = malloc(fill * sizeof *c->values);
  if (!c->targets || !c->leaves || !c->positions || !c->values)
    return rd_error_set(err, RD_ENOMEM, "out of memory for the GPU profile's buffers");
  int rc = rd_gpu_sumtree_init(&c->tree, cap, k->fanout, ordinal, k->batch, err);
  if (rc) {
    *fault = 1;
    return rc;
  }
  /* Fill in chunks until the setup share is spent, at least one batch. */
  uint32_t filled = 0;
  while (filled < cap && (filled < k->batch || rd_clock_now() < setup_end)) {
    size_t n = cap - filled < fill ? cap - filled : fill;
    for (size_t i = 0; i < n; i++) c->values[i] = 1 + (rd_splitmix64(&c->rng) >> 44); /* <= 2^20 */
    if ((rc = rd_gpu_sumtree_set_range(&c->tree, filled, n, c->values, err))) {
      *fault = 1;
      return rc;
    }
    filled += (uint32_t)n;
  }
  c->items = filled;
  uint64_t total = 0;
  if ((rc = rd_gpu_sumtree_total(&c->tree, &total, err))) {
    *fault = 1;
    return rc;
  }
  for (uint32_t i = 0; i < k->batch; i++) {
    c->targets[i] = total > 0 ? rd_splitmix64(&c->rng) % total : 0;
    c->positions[i] = (uint32_t)(rd_splitmix64(&c->rng) % filled);
    c->values[i] = 1 + (rd_splitmix64(&c->rng) >> 44);
  }
  return RD_OK;
}

/* ---- learner ---- */

typedef struct {
  rd_gpu_learner_t l;
  rd_batch_t b;
  float *f;
  int32_t *ai;
} train_ctx_t;

static int train_call(void *p, rd_error_t *err) {
  train_ctx_t *c = p;
  int rc = rd_gpu_learner_step(&c->l, &c->b, NULL, NULL, err);
  return rc == RD_ERANGE ? RD_OK : rc; /* a skipped step cost the same */
}

static void train_free(train_ctx_t *c) {
  if (c->l.impl != NULL) rd_gpu_learner_destroy(&c->l);
  free(c->f);
  free(c->ai);
}

static int train_setup(train_ctx_t *c, const rd_learner_config_t *lc0, uint32_t batch, int ordinal,
                       int *fault, rd_error_t *err) {
  memset(c, 0, sizeof *c);
  rd_learner_config_t lc = *lc0;
  if (lc.max_batch < batch) lc.max_batch = batch;
  lc.seed = 7;
  size_t obs = (size_t)batch * lc.obs_dim;
  size_t act = lc.algo == RD_ALGO_DDPG ? (size_t)batch * lc.action_dim : 0;
  size_t nf = 2 * obs + act + 3 * (size_t)batch;
  c->f = malloc(nf * sizeof *c->f);
  c->ai = malloc((size_t)batch * sizeof *c->ai);
  if (c->f == NULL || c->ai == NULL)
    return rd_error_set(err, RD_ENOMEM, "out of memory for the GPU profile's batch");
  uint64_t rng = 0x5eed0002ull;
  for (size_t i = 0; i < nf; i++) c->f[i] = unif(&rng, -1, 1);
  float *o = c->f, *no = o + obs, *af = no + obs, *r = af + act, *d = r + batch, *w = d + batch;
  for (uint32_t i = 0; i < batch; i++) {
    d[i] = 0.99f;
    w[i] = 1.0f;
    c->ai[i] = lc.algo == RD_ALGO_DQN ? (int32_t)(rd_splitmix64(&rng) % lc.num_actions) : 0;
  }
  for (size_t i = 0; i < act; i++)
    af[i] = lc.action_low + (lc.action_high - lc.action_low) * 0.5f * (af[i] + 1.0f);
  c->b.n = batch;
  c->b.obs = o;
  c->b.next_obs = no;
  c->b.reward = r;
  c->b.discount = d;
  c->b.weights = w;
  if (lc.algo == RD_ALGO_DQN) c->b.action_i = c->ai;
  else c->b.action_f = af;
  int rc = rd_learner_config_validate(&lc, err);
  if (rc) return rc;
  if ((rc = rd_gpu_learner_init(&c->l, &lc, ordinal, err))) *fault = 1;
  return rc;
}

static void result(rd_profile_t *o, const rd_profile_shape_t *s, const rd_device_t *gpu,
                   rd_primitive_t prim, double latency, uint32_t reps, uint64_t items) {
  memset(o, 0, sizeof *o);
  snprintf(o->device_fp, sizeof o->device_fp, "%s", gpu->fingerprint);
  o->primitive = prim;
  o->threads = 1;
  o->shape = s->key;
  snprintf(o->build, sizeof o->build, "%s", rd_profile_build());
  o->latency_s = latency;
  o->reps = reps;
  o->items = items;
  o->source = RD_PROFILE_MEASURED;
  o->measured_unix = (int64_t)time(NULL);
}

int rd_profile_measure_gpu(const rd_profile_shape_t *s, const rd_device_t *gpu, double budget_s,
                           rd_profile_t *out, size_t cap, size_t *n_out, int *fault,
                           rd_error_t *err) {
  int f = 0;
  if (fault == NULL) fault = &f;
  *fault = 0;
  *n_out = 0;
  double t0 = rd_clock_now();
  if (gpu == NULL || strcmp(gpu->kind, "gpu") != 0)
    return rd_error_set(err, RD_EINVAL, "GPU profile: not a GPU device");
  if (!(budget_s > 0 && budget_s <= RD_PROFILE_MAX_BUDGET_S))
    return rd_error_set(err, RD_EINVAL, "GPU profile: budget %g s is outside (0, %g]", budget_s,
                        RD_PROFILE_MAX_BUDGET_S);
  if (cap < 3) return rd_error_set(err, RD_EINVAL, "GPU profile: room for %zu results; 3 needed", cap);
  int rc = rd_profile_key_validate(&s->key, err);
  if (rc) return rc;
  if (s->key.batch == 0 || s->key.capacity < s->key.batch)
    return rd_error_set(err, RD_EINVAL, "GPU profile: batch %u and capacity %u", s->key.batch,
                        s->key.capacity);
  const double deadline = t0 + budget_s;
  const int ordinal = (int)gpu->index;
  size_t n = 0;

  tree_ctx_t tc;
  rc = tree_setup(&tc, &s->key, ordinal, t0 + budget_s * RD_PROFILE_SETUP_SHARE, fault, err);
  if (rc == RD_OK) {
    int left = s->has_learner ? 3 : 2;
    call_fn fns[2] = {sample_call, update_call};
    for (int prim = 0; prim < 2 && rc == RD_OK; prim++, left--) {
      double slice_end = rd_clock_now() + (deadline - rd_clock_now()) / left;
      double lat = 0;
      uint32_t reps = 0;
      rc = time_calls(fns[prim], &tc, 1, slice_end, &lat, &reps, err);
      if (rc) *fault = 1;
      else if (reps > 0) result(&out[n++], s, gpu, (rd_primitive_t)prim, lat, reps, tc.items);
      else rd_log_info("profile", "%s: no %s within the budget", gpu->fingerprint,
                       prim == 0 ? "sample" : "update");
    }
  }
  tree_free(&tc);
  if (rc == RD_OK && s->has_learner && rd_clock_now() < deadline) {
    train_ctx_t lc;
    rc = train_setup(&lc, &s->learner, s->key.batch, ordinal, fault, err);
    double lat = 0;
    uint32_t reps = 0;
    if (rc == RD_OK) {
      rc = time_calls(train_call, &lc, 2, deadline, &lat, &reps, err);
      if (rc) *fault = 1;
    }
    if (rc == RD_OK && reps > 0) result(&out[n++], s, gpu, RD_PRIM_TRAIN, lat, reps, 0);
    else if (rc == RD_OK) rd_log_info("profile", "%s: no train-step within the budget",
                                      gpu->fingerprint);
    train_free(&lc);
  }
  if (rc) return rc;
  *n_out = n;
  return RD_OK;
}
