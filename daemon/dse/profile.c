/* profile.c - measuring a workload's primitives on the CPU (profile.h has
 * the method and the time bound). */
#define _GNU_SOURCE /* pthread_setaffinity_np, sched_getcpu */
#include "profile.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "log.h"
#include "nn.h"
#include "rd_build_info.h"
#include "rd_spin.h"
#include "rd_tree_step.h"

/* One repetition: about this long. 1 ms made a cold registration take
 * 60-120 ms of its 1.5 s bound but left each figure at the mercy of one
 * scheduler tick (4 ms on this project's VMs): profiles of the same shape
 * moved 10-25% between registrations. 8 ms repetitions span ticks. */
#define REP_TARGET_S 8e-3
#define MAX_CALLS_PER_REP 100000u
#define FILL_CHUNK 65536u          /* items per insert while filling */
#define TREE_FILL_BPS 128e6        /* tree bytes initialised and filled per second, at least */
#define TRAIN_FLOPS_PER_S 2e9      /* the calibration step's estimate: a slow CPU's rate */
#define CALIB_ROWS 64u             /* rows of the calibration step */
#define CALL_NS_PER_ITEM 200e-9    /* a sample/update's first-call estimate per item */
#define MAX_BATCH_BYTES (64u << 20) /* synthetic train batches; larger: train not measured */
#define COLD_SAFETY 1.5            /* on the first-touch estimate of a learner's first step */
#define GEN_S_PER_FLOAT 10e-9      /* generating synthetic batch data */
#define DATA_SEED UINT64_C(0x70726f66696c65) /* "profile" */
#define GATHER_MAX_BYTES (32u << 20) /* gather's source rows */
#define GATHER_POOL_MIN (1u << 18) /* random row indices, at least */
#define UPDATE_POOL_KEYS (1u << 18) /* sampled keys for update batches (then at least 4 batches) */
#define PASS_SLOTS 8u              /* batches in flight for the emulated "pass" */
#define PASS_DEPTH 50u             /* the pipeline's D for "pass" (pipeline_step) */
#define PASS_MIN_DEPTH 8u          /* below this, pass is emulated (pass_depth) */
#define PASS_MAX_BYTES (256u << 20) /* pass's pipeline slots, all D + 2 of them */

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

static const char *const prim_names[RD_PRIM_COUNT] = {"sample", "update", "train",
                                                      "gather", "handoff", "pass"};
static const char *const source_names[] = {"measured", "imported"};

const char *rd_primitive_name(rd_primitive_t p) {
  return (unsigned)p < RD_PRIM_COUNT ? prim_names[p] : "invalid";
}

int rd_primitive_parse(const char *s, rd_primitive_t *out, rd_error_t *err) {
  for (int i = 0; i < RD_PRIM_COUNT; i++)
    if (s != NULL && strcmp(s, prim_names[i]) == 0) {
      *out = (rd_primitive_t)i;
      return RD_OK;
    }
  return rd_error_set(err, RD_EINVAL, "primitive \"%.32s\" is not sample, update or train",
                      s ? s : "");
}

const char *rd_profile_source_name(rd_profile_source_t s) {
  return (unsigned)s < 2 ? source_names[s] : "invalid";
}

int rd_profile_source_parse(const char *s, rd_profile_source_t *out, rd_error_t *err) {
  for (int i = 0; i < 2; i++)
    if (s != NULL && strcmp(s, source_names[i]) == 0) {
      *out = (rd_profile_source_t)i;
      return RD_OK;
    }
  return rd_error_set(err, RD_EINVAL, "source \"%.32s\" is not measured or imported", s ? s : "");
}

const char *rd_profile_build(void) { return RD_BUILD_VERSION " " RD_BUILD_ID; }

size_t rd_profile_default_threads(uint32_t cores, uint32_t *out, size_t cap) {
  size_t n = 0;
  if (cores == 0) cores = 1;
  if (cores > RD_MLP_MAX_THREADS) cores = RD_MLP_MAX_THREADS;
  for (uint32_t t = 1; t < cores && n < cap; t *= 2) out[n++] = t;
  if (n < cap) out[n++] = cores;
  return n;
}

/* ------------------------------------------------------------------ */
/* Shapes and keys                                                     */
/* ------------------------------------------------------------------ */

static bool power_of_two(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Append "a-b-c" (the spec's sizes) to buf at *pos. */
static void append_sizes(char *buf, size_t cap, size_t *pos, const rd_nn_spec_t *s) {
  for (uint32_t l = 0; l <= s->n_layers && *pos < cap; l++) {
    int w = snprintf(buf + *pos, cap - *pos, l ? "-%u" : "%u", s->sizes[l]);
    *pos = w < 0 ? cap : *pos + (size_t)w;
  }
}

int rd_profile_shape_init(rd_profile_shape_t *out, const rd_table_config_t *tc,
                          const rd_pipeline_config_t *pc, uint32_t batch, rd_error_t *err) {
  rd_profile_shape_t s;
  memset(&s, 0, sizeof s);
  if (tc == NULL) return rd_error_set(err, RD_EINVAL, "a profile shape needs a table config");
  if (batch == 0 && pc != NULL) batch = pc->batch;
  s.key.batch = batch;
  s.key.capacity = tc->capacity;
  s.key.fanout = tc->fanout;
  s.row_bytes = (uint32_t)rd_schema_row_bytes(&tc->schema);
  s.alpha = tc->alpha;
  if (pc == NULL) {
    snprintf(s.key.algorithm, sizeof s.key.algorithm, "none");
  } else {
    s.has_learner = 1;
    s.learner = pc->learner;
    s.learner_pin = pc->learner_pin;
    s.sampler_pin = pc->sampler_pin;
    /* The fields the storage unit gathers (pipeline.c's gather), once the
     * config is bound to the schema (obs and next_obs are two fields);
     * unbound, gather takes the row as one column. */
    const int fields[] = {pc->f_obs, pc->f_action, pc->f_reward, pc->f_next_obs,
                          pc->f_done >= 0 ? pc->f_done : pc->f_discount};
    for (size_t i = 0; pc->f_obs != pc->f_next_obs && i < sizeof fields / sizeof fields[0]; i++)
      if (fields[i] >= 0 && (uint32_t)fields[i] < tc->schema.n_fields)
        s.col_bytes[s.n_cols++] = (uint32_t)rd_field_bytes(&tc->schema.fields[fields[i]]);
    s.learner.threads = 1; /* set per measured thread count */
    if (s.learner.max_batch < batch) s.learner.max_batch = batch;
    int rc = rd_learner_config_validate(&s.learner, err);
    if (rc) return rc;
    rd_nn_spec_t policy, critic;
    rd_learner_policy_spec(&s.learner, &policy, NULL);
    bool dqn = s.learner.algo == RD_ALGO_DQN;
    snprintf(s.key.algorithm, sizeof s.key.algorithm, "%s", dqn ? "dqn" : "ddpg");
    size_t pos = (size_t)snprintf(s.key.network, sizeof s.key.network, "%s:", s.key.algorithm);
    append_sizes(s.key.network, sizeof s.key.network, &pos, &policy);
    if (!dqn) {
      rd_learner_critic_spec(&s.learner, &critic, NULL);
      if (pos < sizeof s.key.network) s.key.network[pos++] = '/';
      s.key.network[pos < sizeof s.key.network ? pos : sizeof s.key.network - 1] = '\0';
      append_sizes(s.key.network, sizeof s.key.network, &pos, &critic);
    }
    if (pos >= sizeof s.key.network)
      return rd_error_set(err, RD_EINVAL,
                          "the network has too many layers to name in a profile (%zu characters)",
                          sizeof s.key.network - 1);
  }
  int rc = rd_profile_key_validate(&s.key, err);
  if (rc) return rc;
  *out = s;
  return RD_OK;
}

/* "a-b-c" of 2..RD_NN_MAX_LAYERS+1 positive sizes; *end is where it stops. */
static bool valid_sizes(const char *p, const char **end) {
  int n = 0;
  for (;;) {
    if (*p < '1' || *p > '9') return false;
    unsigned long v = 0;
    while (*p >= '0' && *p <= '9' && v <= RD_NN_MAX_UNITS) v = v * 10 + (unsigned long)(*p++ - '0');
    if (v > RD_NN_MAX_UNITS) return false;
    n++;
    if (*p != '-') break;
    p++;
  }
  *end = p;
  return n >= 2 && n <= RD_NN_MAX_LAYERS + 1;
}

int rd_profile_key_validate(const rd_profile_key_t *k, rd_error_t *err) {
  if (k->batch == 0 || k->batch > RD_TABLE_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "profile batch %u is outside [1, %u]", k->batch,
                        RD_TABLE_MAX_BATCH);
  if (k->capacity == 0 || k->capacity > RD_SUMTREE_MAX_CAPACITY)
    return rd_error_set(err, RD_EINVAL, "profile capacity %u is outside [1, %u]", k->capacity,
                        RD_SUMTREE_MAX_CAPACITY);
  if (k->batch > k->capacity)
    return rd_error_set(err, RD_EINVAL, "profile batch %u is above the capacity %u", k->batch,
                        k->capacity);
  if (!power_of_two(k->fanout) || k->fanout < RD_SUMTREE_MIN_FANOUT ||
      k->fanout > RD_SUMTREE_MAX_FANOUT)
    return rd_error_set(err, RD_EINVAL, "profile fanout %u is not a power of two in [%u, %u]",
                        k->fanout, RD_SUMTREE_MIN_FANOUT, RD_SUMTREE_MAX_FANOUT);
  size_t al = strnlen(k->algorithm, sizeof k->algorithm);
  size_t nl = strnlen(k->network, sizeof k->network);
  if (al == sizeof k->algorithm || nl == sizeof k->network)
    return rd_error_set(err, RD_EINVAL, "profile algorithm or network is not terminated");
  bool dqn = strcmp(k->algorithm, "dqn") == 0, ddpg = strcmp(k->algorithm, "ddpg") == 0;
  if (strcmp(k->algorithm, "none") == 0) {
    if (nl != 0)
      return rd_error_set(err, RD_EINVAL,
                          "profile algorithm \"none\" has no network, not \"%.40s\"", k->network);
    return RD_OK;
  }
  if (!dqn && !ddpg)
    return rd_error_set(err, RD_EINVAL, "profile algorithm \"%.8s\" is not dqn, ddpg or none",
                        k->algorithm);
  /* dqn:SIZES or ddpg:SIZES/SIZES */
  const char *p = k->network;
  bool ok = strncmp(p, k->algorithm, al) == 0 && p[al] == ':';
  if (ok) ok = valid_sizes(p + al + 1, &p);
  if (ok && ddpg) ok = *p == '/' && valid_sizes(p + 1, &p);
  if (!ok || *p != '\0')
    return rd_error_set(err, RD_EINVAL,
                        "profile network \"%.60s\" is not \"%s:%s\" with layer sizes 1..%u",
                        k->network, k->algorithm, dqn ? "A-B-..." : "A-B-.../C-D-...",
                        RD_NN_MAX_UNITS);
  return RD_OK;
}

int rd_profile_key_equal(const rd_profile_key_t *a, const rd_profile_key_t *b) {
  return a->batch == b->batch && a->capacity == b->capacity && a->fanout == b->fanout &&
         strncmp(a->algorithm, b->algorithm, sizeof a->algorithm) == 0 &&
         strncmp(a->network, b->network, sizeof a->network) == 0;
}

/* ------------------------------------------------------------------ */
/* Timing                                                              */
/* ------------------------------------------------------------------ */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef int (*call_fn)(void *ctx, rd_error_t *err);

typedef struct {
  double latency_s; /* median seconds per call */
  uint32_t reps;    /* 0: not measured (no time) */
} timing_t;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One warm-up call, then up to RD_PROFILE_REPS repetitions of k calls.
 * est_first is the warm-up's estimate: it starts only if that fits before
 * the deadline. est_call (0: the warm-up's time) is a warm call's estimate,
 * for a warm-up known to be slower than the calls after it (a learner's
 * first step touches its buffers for the first time). A repetition starts
 * only if it ends, at the slowest per-call time seen, by slice_end (the
 * first one: by the deadline). The warm-up is never reported: a primitive
 * with no repetition gets reps = 0. */
static int time_calls(call_fn fn, void *ctx, double est_first, double est_call,
                      double slice_end, double deadline, timing_t *out, rd_error_t *err) {
  out->reps = 0;
  double t0 = now_s();
  if (t0 + est_first > deadline) return RD_OK;
  int rc = fn(ctx, err);
  if (rc) return rc;
  double warm = now_s() - t0;
  double slowest = est_call > 0 && est_call < warm ? est_call : warm;
  if (slowest < 1e-9) slowest = 1e-9;
  double quota = slice_end - (t0 + warm);
  double target = quota / RD_PROFILE_REPS < REP_TARGET_S ? quota / RD_PROFILE_REPS : REP_TARGET_S;
  double kf = target / slowest;
  uint32_t k = kf < 1 ? 1 : kf > MAX_CALLS_PER_REP ? MAX_CALLS_PER_REP : (uint32_t)kf;
  double per_call[RD_PROFILE_REPS];
  uint32_t reps = 0;
  while (reps < RD_PROFILE_REPS) {
    double start = now_s();
    double end = reps == 0 ? deadline : (slice_end < deadline ? slice_end : deadline);
    if (start + k * slowest > end) break;
    for (uint32_t i = 0; i < k; i++)
      if ((rc = fn(ctx, err)) != RD_OK) return rc;
    double t = (now_s() - start) / k;
    per_call[reps++] = t;
    if (t > slowest) slowest = t;
  }
  if (reps == 0) return RD_OK;
  qsort(per_call, reps, sizeof per_call[0], cmp_double);
  out->latency_s =
      reps % 2 ? per_call[reps / 2] : 0.5 * (per_call[reps / 2 - 1] + per_call[reps / 2]);
  if (!(out->latency_s > 0)) out->latency_s = RD_PROFILE_LATENCY_MIN_S; /* a coarse clock */
  out->reps = reps;
  return RD_OK;
}

/* First touches of fresh memory (page faults), bytes per second, measured
 * once per process on an 8 MiB anonymous mapping: the cost of a new
 * learner's first step is mostly this (5-10x a warm step on this
 * project's VMs, about 0.7 GB/s here), and varies 10x between machines. */
static double touch_rate;
static pthread_once_t touch_once = PTHREAD_ONCE_INIT;

static void measure_touch(void) {
  const size_t bytes = 8u << 20;
  touch_rate = 0.5e9; /* if the mapping fails: a slow machine's rate */
  void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  double t0 = now_s();
  memset(m, 1, bytes);
  double t = now_s() - t0;
  munmap(m, bytes);
  if (t > 0) touch_rate = (double)bytes / t;
  if (touch_rate < 0.05e9) touch_rate = 0.05e9;
  if (touch_rate > 50e9) touch_rate = 50e9;
}

static double touch_bps(void) {
  pthread_once(&touch_once, measure_touch);
  return touch_rate;
}

/* ------------------------------------------------------------------ */
/* The measuring table                                                 */
/* ------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static float unif(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(splitmix(s) >> 40) * 0x1p-24);
}

/* The measuring table's capacity (profile.h): the workload's if its tree
 * fits limit bytes, else the smallest capacity with the same height, else
 * the largest that fits (never below batch). */
static uint32_t table_capacity(const rd_profile_key_t *k, double limit) {
  uint32_t cap = k->capacity;
  if ((double)rd_sumtree_memsize(cap, k->fanout) <= limit) return cap;
  uint64_t blocks[RD_ST_MAX_LEVELS];
  uint32_t h = rd_st_shape(cap, k->fanout, blocks);
  uint32_t lk = rd_st_log2(k->fanout);
  if (h >= 2) {
    uint64_t same = ((uint64_t)1 << (lk * (h - 1))) + 1;
    if (same <= cap && (double)rd_sumtree_memsize((uint32_t)same, k->fanout) <= limit)
      return (uint32_t)same;
  }
  uint32_t lo = k->batch, hi = cap; /* largest fitting capacity in [batch, cap] */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if ((double)rd_sumtree_memsize(mid, k->fanout) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

typedef struct {
  rd_table_t t;
  uint32_t batch;
  rd_sample_out_t out;
  uint64_t *keys, *pool_keys; /* sample output; update key batches */
  double *probs, *weights, *prio[2];
  uint32_t n_pool, next;
} table_ctx_t;

static void table_ctx_free(table_ctx_t *c) {
  if (c->t.tree.mem != NULL) rd_table_free(&c->t);
  free(c->keys);
  free(c->pool_keys);
  free(c->probs);
  free(c->weights);
  free(c->prio[0]);
  free(c->prio[1]);
  memset(c, 0, sizeof *c);
}

static int sample_call(void *p, rd_error_t *err) {
  table_ctx_t *c = p;
  return rd_table_sample(&c->t, c->batch, 0.4, 0, &c->out, err);
}

static int update_call(void *p, rd_error_t *err) {
  table_ctx_t *c = p;
  uint32_t j = c->next++;
  return rd_table_update(&c->t, c->batch, c->pool_keys + (size_t)(j % c->n_pool) * c->batch,
                         c->prio[j & 1], NULL, err);
}

/* Build and fill the measuring table; stop filling at fill_end (keeping at
 * least one batch). */
static int table_setup(table_ctx_t *c, const rd_profile_shape_t *s, double tree_limit,
                       double fill_end, rd_error_t *err) {
  memset(c, 0, sizeof *c);
  const rd_profile_key_t *k = &s->key;
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  tc.schema.n_fields = 1; /* a 1-byte row: sample and update never read rows */
  snprintf(tc.schema.fields[0].name, sizeof tc.schema.fields[0].name, "x");
  tc.schema.fields[0].dtype = RD_DTYPE_UINT8;
  tc.capacity = table_capacity(k, tree_limit);
  tc.fanout = k->fanout;
  /* The priority transform costs what its class costs (table.c: alpha 0,
   * 1/2 and 1 are special cases, anything else is a pow()); epsilon and
   * max_priority (the fixed-point scale) cost nothing, and the defaults
   * keep the synthetic priorities representable for any alpha. */
  tc.alpha = s->alpha == 0.0 || s->alpha == 0.5 || s->alpha == 1.0 ? s->alpha : 0.6;
  tc.seed = DATA_SEED;
  uint32_t chunk = tc.capacity < FILL_CHUNK ? tc.capacity : FILL_CHUNK;
  tc.max_batch = k->batch > chunk ? k->batch : chunk;
  int rc = rd_table_init(&c->t, &tc, err);
  if (rc) return rc;
  c->batch = k->batch;
  /* Update batches of sampled keys: enough of them (UPDATE_POOL_KEYS keys)
   * that the paths they update are not all in cache, as in the running
   * loop, where every update writes a freshly sampled batch's leaves (a
   * pool of 4 batches of 64 updated in 1.6 us; inside bench_loop's loop the
   * update took 3.9 us). 2^18 / 65536 = 4: at least 4 batches up to
   * 65536 items, then one. */
  c->n_pool = k->batch <= 65536 ? UPDATE_POOL_KEYS / k->batch : 1;
  size_t b = k->batch;
  uint8_t *row = calloc(chunk, 1);
  double *raw = malloc((size_t)chunk * sizeof *raw);
  c->keys = malloc(b * sizeof *c->keys);
  c->probs = malloc(b * sizeof *c->probs);
  c->weights = malloc(b * sizeof *c->weights);
  c->pool_keys = malloc(c->n_pool * b * sizeof *c->pool_keys);
  c->prio[0] = malloc(b * sizeof(double));
  c->prio[1] = malloc(b * sizeof(double));
  if (row == NULL || raw == NULL || c->keys == NULL || c->probs == NULL || c->weights == NULL ||
      c->pool_keys == NULL || c->prio[0] == NULL || c->prio[1] == NULL) {
    rc = rd_error_set(err, RD_ENOMEM, "out of memory for a measuring table of %u items",
                      tc.capacity);
    goto out;
  }
  /* Raw priorities (|TD error|-like) between 0.01 and 2, so the leaves
   * differ and descents take varied paths. */
  uint64_t seed = DATA_SEED;
  for (uint32_t i = 0; i < chunk; i++) raw[i] = 0.01 + 2.0 * (double)unif(&seed, 0, 1);
  for (size_t i = 0; i < b; i++) {
    c->prio[0][i] = 0.01 + 2.0 * (double)unif(&seed, 0, 1);
    c->prio[1][i] = 0.01 + 2.0 * (double)unif(&seed, 0, 1);
  }
  uint64_t filled = 0;
  while (filled < tc.capacity) {
    uint32_t n = tc.capacity - filled < chunk ? (uint32_t)(tc.capacity - filled) : chunk;
    rd_cbuf_t col = {row, n};
    if ((rc = rd_table_insert(&c->t, n, &col, raw, NULL, err)) != RD_OK) goto out;
    filled += n;
    if (filled >= k->batch && now_s() > fill_end) break;
  }
  c->out = (rd_sample_out_t){c->keys, c->probs, c->weights, NULL};
  for (uint32_t j = 0; j < c->n_pool; j++) {
    rd_sample_out_t o = {c->pool_keys + (size_t)j * b, c->probs, c->weights, NULL};
    if ((rc = rd_table_sample(&c->t, b, 0.4, 0, &o, err)) != RD_OK) goto out;
    if (j >= 3 && now_s() > fill_end) { /* the setup share is spent: fewer batches */
      c->n_pool = j + 1;
      break;
    }
  }
out:
  free(row);
  free(raw);
  if (rc) table_ctx_free(c);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The train-step                                                      */
/* ------------------------------------------------------------------ */

typedef struct {
  rd_learner_t l;
  bool live;
  rd_batch_t b[2];
  uint32_t n_b, next;
  float *mem, *td;
  int32_t *ai;
} train_ctx_t;

static void train_data_free(train_ctx_t *c) {
  if (c->live) rd_learner_free(&c->l);
  free(c->mem);
  free(c->td);
  free(c->ai);
  memset(c, 0, sizeof *c);
}

static int train_call(void *p, rd_error_t *err) {
  train_ctx_t *c = p;
  uint32_t j = c->next++;
  int rc = rd_learner_step(&c->l, &c->b[j % c->n_b], c->td, NULL, err);
  /* A non-finite step did the work and changed nothing: still a step. */
  return rc == RD_ERANGE ? RD_OK : rc;
}

/* Floats one synthetic batch needs, or 0 if it would exceed MAX_BATCH_BYTES. */
static size_t batch_floats(const rd_learner_config_t *lc, uint32_t batch) {
  size_t per_row = 2 * (size_t)lc->obs_dim + 3 + (lc->algo == RD_ALGO_DDPG ? lc->action_dim : 0);
  size_t n = per_row * batch;
  return n * sizeof(float) > MAX_BATCH_BYTES ? 0 : n;
}

/* Synthetic batches as bench/bench_learner.c makes them: observations in
 * [-1, 1), rewards in [-1, 1), IS weights in [0.2, 1), discount 0.99 with
 * every fifth row terminal, valid actions. */
static int train_data(train_ctx_t *c, const rd_learner_config_t *lc, uint32_t batch,
                      rd_error_t *err) {
  memset(c, 0, sizeof *c);
  size_t per = batch_floats(lc, batch);
  c->n_b = per * sizeof(float) * 2 <= (32u << 20) ? 2 : 1;
  size_t O = lc->obs_dim, A = lc->algo == RD_ALGO_DDPG ? lc->action_dim : 0;
  c->mem = malloc(per * c->n_b * sizeof(float));
  c->td = malloc((size_t)batch * sizeof(float));
  if (lc->algo == RD_ALGO_DQN) c->ai = malloc((size_t)batch * c->n_b * sizeof(int32_t));
  if (c->mem == NULL || c->td == NULL || (lc->algo == RD_ALGO_DQN && c->ai == NULL)) {
    train_data_free(c);
    return rd_error_set(err, RD_ENOMEM, "out of memory for train-step batches of %u rows", batch);
  }
  uint64_t seed = DATA_SEED ^ batch;
  float *p = c->mem;
  for (uint32_t k = 0; k < c->n_b; k++) {
    float *obs = p, *next = obs + batch * O, *rew = next + batch * O, *disc = rew + batch,
          *w = disc + batch, *af = w + batch;
    p = af + batch * A;
    for (size_t i = 0; i < batch * O; i++) {
      obs[i] = unif(&seed, -1, 1);
      next[i] = unif(&seed, -1, 1);
    }
    for (size_t i = 0; i < batch; i++) {
      rew[i] = unif(&seed, -1, 1);
      w[i] = unif(&seed, 0.2f, 1.0f);
      disc[i] = i % 5 == 4 ? 0.0f : 0.99f;
    }
    int32_t *ai = NULL;
    if (lc->algo == RD_ALGO_DQN) {
      ai = c->ai + (size_t)k * batch;
      for (size_t i = 0; i < batch; i++) ai[i] = (int32_t)(splitmix(&seed) % lc->num_actions);
    } else {
      for (size_t i = 0; i < batch * A; i++) af[i] = unif(&seed, lc->action_low, lc->action_high);
    }
    c->b[k] = (rd_batch_t){batch, obs, ai, A ? af : NULL, rew, disc, next, w};
  }
  return RD_OK;
}

/* A conservative estimate of one train-step of `batch` rows: about 10 B P
 * flops for DQN (online forward on s and s', target forward, backward),
 * 8 B P_actor + 14 B P_critic for DDPG, at TRAIN_FLOPS_PER_S. Only the
 * calibration step is guarded by it: real rates differ by 100x between
 * CPUs (this project's VM runs the Hopper step at about 190 GFLOP/s). */
static double train_estimate(const rd_learner_config_t *lc, uint32_t batch) {
  rd_nn_spec_t s;
  if (rd_learner_policy_spec(lc, &s, NULL) != RD_OK) return 0;
  double flops, pa = (double)rd_nn_spec_params(&s);
  if (lc->algo == RD_ALGO_DQN) {
    flops = 10.0 * batch * pa;
  } else {
    if (rd_learner_critic_spec(lc, &s, NULL) != RD_OK) return 0;
    flops = 8.0 * batch * pa + 14.0 * batch * (double)rd_nn_spec_params(&s);
  }
  return flops / TRAIN_FLOPS_PER_S;
}

/* Bytes a learner's first step touches for the first time: activation and
 * backward buffers for `batch` rows, estimated as rd_pipeline_memsize does
 * (every layer's units x 2 networks x 3 buffers per network). */
static double learner_buffer_bytes(const rd_learner_config_t *lc, uint32_t batch) {
  rd_nn_spec_t specs[2];
  int n = 0;
  if (rd_learner_policy_spec(lc, &specs[n], NULL) == RD_OK) n++;
  if (lc->algo == RD_ALGO_DDPG && rd_learner_critic_spec(lc, &specs[n], NULL) == RD_OK) n++;
  double units = 0;
  for (int i = 0; i < n; i++)
    for (uint32_t l = 0; l <= specs[i].n_layers; l++) units += specs[i].sizes[l];
  return (double)batch * units * 2 * 3 * sizeof(float);
}

/* Bytes of a new learner's parameters: online x4 (weights, gradients, two
 * Adam moments) and the target, as rd_pipeline_memsize counts them. */
static double learner_param_bytes(const rd_learner_config_t *lc) {
  rd_nn_spec_t s;
  double params = 0;
  if (rd_learner_policy_spec(lc, &s, NULL) == RD_OK) params += (double)rd_nn_spec_params(&s);
  if (lc->algo == RD_ALGO_DDPG && rd_learner_critic_spec(lc, &s, NULL) == RD_OK)
    params += (double)rd_nn_spec_params(&s);
  return params * 5 * sizeof(float);
}

/* ------------------------------------------------------------------ */
/* The pipeline's own costs: gather, handoff, pass                     */
/* ------------------------------------------------------------------ */

/* Columns as the table keeps them (one array per field), the batch's
 * column buffers, and a pool of random row indices read in windows of B
 * that move on every call (GATHER_POOL_MIN indices at least: batches do not
 * repeat within a cache's lifetime, as in the running loop). */
typedef struct {
  uint8_t *col[RD_PROFILE_MAX_COLS], *dst[RD_PROFILE_MAX_COLS];
  size_t fb[RD_PROFILE_MAX_COLS];
  uint32_t n_cols;
  uint32_t *idx, n_idx; /* the pool */
  uint64_t rows;        /* rows per column (a divisor, as the table's capacity) */
  uint32_t batch, next;
} gather_ctx_t;

static void gather_free(gather_ctx_t *g) {
  for (uint32_t c = 0; c < RD_PROFILE_MAX_COLS; c++) {
    free(g->col[c]);
    free(g->dst[c]);
  }
  free(g->idx);
  memset(g, 0, sizeof *g);
}

/* The gather's five columns are the learner's fields (rd_profile_shape_init's
 * order: obs, action, reward, next_obs, done or discount), as a learner
 * reads them: then the strict-loop profile trains on what it gathers. */
static bool learner_columns(const rd_profile_shape_t *s) {
  if (!s->has_learner || s->n_cols != 5) return false;
  const rd_learner_config_t *lc = &s->learner;
  const size_t obs = (size_t)lc->obs_dim * sizeof(float);
  const size_t act = lc->algo == RD_ALGO_DQN ? sizeof(int32_t) : lc->action_dim * sizeof(float);
  return s->col_bytes[0] == obs && s->col_bytes[1] == act && s->col_bytes[2] == sizeof(float) &&
         s->col_bytes[3] == obs && (s->col_bytes[4] == 1 || s->col_bytes[4] == sizeof(float));
}

/* Rows a learner accepts (a pattern, cheap to write), in the five learner
 * columns (learner_columns' order; fb[4] 1: done, else discount), rows
 * first .. first + n - 1: observations and rewards in [-0.5, 0.5), valid
 * actions, every fifth row terminal. */
static void fill_learner_rows(uint8_t *const col[5], const size_t fb[5], uint64_t first,
                              uint64_t n, const rd_learner_config_t *lc) {
  const uint32_t O = lc->obs_dim, A = lc->algo == RD_ALGO_DQN ? 1 : lc->action_dim;
  float *obs = (float *)col[0], *rew = (float *)col[2], *next = (float *)col[3];
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = first + i;
    for (uint32_t j = 0; j < O; j++) {
      obs[i * O + j] = (float)((r * 7 + j * 3) % 16) / 16.0f - 0.5f;
      next[i * O + j] = (float)((r * 5 + j * 11) % 16) / 16.0f - 0.5f;
    }
    rew[i] = (float)(r % 8) / 8.0f - 0.5f;
    if (lc->algo == RD_ALGO_DQN) {
      ((int32_t *)col[1])[i] = (int32_t)(r % lc->num_actions);
    } else {
      for (uint32_t j = 0; j < A; j++)
        ((float *)col[1])[i * A + j] =
            lc->action_low + (lc->action_high - lc->action_low) * (float)((r + j) % 8) / 8.0f;
    }
    if (fb[4] == 1)
      col[4][i] = r % 5 == 4;
    else
      ((float *)col[4])[i] = r % 5 == 4 ? 0.0f : 0.99f;
  }
}

int rd_profile_shape_trains_on_gather(const rd_profile_shape_t *s) {
  return s != NULL && learner_columns(s) && s->key.batch <= s->learner.max_batch;
}

static int gather_setup(gather_ctx_t *g, const rd_profile_shape_t *s, rd_error_t *err) {
  memset(g, 0, sizeof *g);
  g->batch = s->key.batch;
  uint64_t row = 0;
  if (s->n_cols == 0) { /* no learner fields known: the whole row as one */
    g->n_cols = 1;
    g->fb[0] = s->row_bytes > 0 ? s->row_bytes : 1;
  } else {
    g->n_cols = s->n_cols < RD_PROFILE_MAX_COLS ? s->n_cols : RD_PROFILE_MAX_COLS;
    for (uint32_t c = 0; c < g->n_cols; c++) g->fb[c] = s->col_bytes[c] > 0 ? s->col_bytes[c] : 1;
  }
  for (uint32_t c = 0; c < g->n_cols; c++) row += g->fb[c];
  uint64_t rows = s->key.capacity, fit = GATHER_MAX_BYTES / row;
  if (rows > fit) rows = fit;
  if (rows < 1) rows = 1;
  g->rows = rows;
  uint64_t n_idx = (uint64_t)g->batch * 4 > GATHER_POOL_MIN ? (uint64_t)g->batch * 4
                                                             : GATHER_POOL_MIN;
  g->n_idx = (uint32_t)n_idx;
  g->idx = malloc(n_idx * sizeof *g->idx);
  int ok = g->idx != NULL;
  for (uint32_t c = 0; ok && c < g->n_cols; c++) {
    g->col[c] = malloc(rows * g->fb[c]);
    g->dst[c] = malloc((size_t)g->batch * g->fb[c]);
    ok = g->col[c] != NULL && g->dst[c] != NULL;
    if (ok) memset(g->col[c], 0x3c, rows * g->fb[c]);
  }
  if (ok && learner_columns(s)) fill_learner_rows(g->col, g->fb, 0, rows, &s->learner);
  if (!ok) {
    gather_free(g);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the gather profile");
  }
  uint64_t seed = DATA_SEED ^ 0x6761746865ull;
  for (uint64_t i = 0; i < n_idx; i++) g->idx[i] = (uint32_t)(splitmix(&seed) % rows);
  return RD_OK;
}

/* rd_table_gather's copy loop (backends/cpu/table.c) on the next window:
 * row by row, each row's slot by one division (the table's key % capacity;
 * here index % rows), the rows GATHER_AHEAD on prefetched. */
#define GATHER_AHEAD 8
static int gather_call(void *p, rd_error_t *err) {
  (void)err;
  gather_ctx_t *g = p;
  uint32_t first = g->next;
  g->next = (g->next + g->batch) % (g->n_idx - g->batch + 1);
  const uint32_t *idx = g->idx + first;
  size_t ahead[GATHER_AHEAD];
  for (uint32_t i = 0; i < g->batch && i < GATHER_AHEAD; i++) {
    ahead[i] = idx[i] % g->rows;
    for (uint32_t c = 0; c < g->n_cols; c++) __builtin_prefetch(g->col[c] + ahead[i] * g->fb[c]);
  }
  for (uint32_t i = 0; i < g->batch; i++) {
    size_t slot = ahead[i % GATHER_AHEAD];
    if (i + GATHER_AHEAD < g->batch) {
      size_t next = idx[i + GATHER_AHEAD] % g->rows;
      ahead[i % GATHER_AHEAD] = next;
      for (uint32_t c = 0; c < g->n_cols; c++) __builtin_prefetch(g->col[c] + next * g->fb[c]);
    }
    for (uint32_t c = 0; c < g->n_cols; c++)
      memcpy(g->dst[c] + i * g->fb[c], g->col[c] + slot * g->fb[c], g->fb[c]);
  }
  return RD_OK;
}

/* Two threads joined by two bounded queues of batch slots under one mutex,
 * as daemon/learn/pipeline.c's sampler and learner: the producer fills a free
 * slot's batch (B rows), the consumer reads it and writes B |delta|, the
 * producer reads those before it fills the slot again. Each side signals
 * the other only when it may be asleep on an empty queue. The calling
 * thread runs one side per call (handoff: the producer, which waits for
 * each batch to come back; pass: the consumer, with PASS_SLOTS slots so the
 * producer keeps ahead); a helper thread runs the other side until stop. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv_prod, cv_cons;
  uint32_t n_slots, full_len, full_head, free_len, free_head;
  uint32_t wake_at; /* the consumer wakes a waiting producer at this many free slots */
  uint32_t full[PASS_SLOTS], free_q[PASS_SLOTS];
  int prod_waiting, cons_waiting, stop;
  /* Spinning before a wait, as the pipeline's threads (rd_spin.h): each
   * side's recent seconds per batch, and a counter per side bumped when
   * the other makes it work. The producer spins only in handoff (the
   * pipeline's sampler spins only below RD_PIPELINE_POLL_DEPTH). */
  _Atomic uint64_t ev_prod, ev_cons;
  double prod_s, cons_s;
  int prod_spins;
  float *data; /* n_slots x floats */
  float *td;   /* n_slots x batch */
  size_t floats;
  uint32_t batch;
  volatile float sink;
  float fill;
  call_fn work;   /* handoff: the consumer's train-step per batch, or NULL */
  void *work_ctx;
  call_fn pwork;  /* handoff: the producer's sample, gather and update per batch, or NULL */
  void *pwork_ctx;
  int work_rc;    /* the first failure of work */
  pthread_t th;
  bool started;
  bool pinned;       /* pass: both threads pinned (handoff_pin); caller_mask restores */
  cpu_set_t caller_mask;
} handoff_ctx_t;

static uint32_t hq_pop(uint32_t *q, uint32_t *head, uint32_t *len, uint32_t cap) {
  uint32_t v = q[*head];
  *head = (*head + 1) % cap;
  (*len)--;
  return v;
}

static void hq_push(uint32_t *q, uint32_t head, uint32_t *len, uint32_t cap, uint32_t v) {
  q[(head + *len) % cap] = v;
  (*len)++;
}

static void avg_in(double *avg, double x) { *avg = *avg > 0 ? 0.875 * *avg + 0.125 * x : x; }

/* Under h->mu: one wait for cv, staged as the pipeline's waits
 * (rd_spin_plan for the partner's expected time: a timed sleep, then a
 * spin, then blocking; *stage 0, 1, 2). The caller looks at its condition
 * again after each. */
static void hwait(handoff_ctx_t *h, pthread_cond_t *cv, _Atomic uint64_t *ev, double expected,
                  int *stage, int *waiting) {
  if (rd_spin_wait_stage(cv, &h->mu, ev, expected, stage, waiting)) return;
  *waiting = 1;
  pthread_cond_wait(cv, &h->mu);
  *waiting = 0;
}

/* Producer: take a free slot (reading the |delta| the consumer left), fill
 * it, queue it. Returns 0 when stopped. */
static int produce_one(handoff_ctx_t *h) {
  pthread_mutex_lock(&h->mu);
  int spun = h->prod_spins ? 0 : 2;
  while (!h->stop && h->free_len == 0)
    hwait(h, &h->cv_prod, &h->ev_prod, h->cons_s, &spun, &h->prod_waiting);
  if (h->stop) {
    pthread_mutex_unlock(&h->mu);
    return 0;
  }
  uint32_t si = hq_pop(h->free_q, &h->free_head, &h->free_len, h->n_slots);
  pthread_mutex_unlock(&h->mu);
  double t0 = now_s();
  float acc = 0, *td = h->td + (size_t)si * h->batch, *d = h->data + (size_t)si * h->floats;
  for (uint32_t i = 0; i < h->batch; i++) acc += td[i];
  h->fill += 1.0f;
  for (size_t i = 0; i < h->floats; i++) d[i] = h->fill;
  h->sink = acc;
  if (h->pwork != NULL) {
    int rc = h->pwork(h->pwork_ctx, NULL);
    if (rc != RD_OK && h->work_rc == RD_OK) h->work_rc = rc;
  }
  double t = now_s() - t0;
  pthread_mutex_lock(&h->mu);
  avg_in(&h->prod_s, t);
  hq_push(h->full, h->full_head, &h->full_len, h->n_slots, si);
  rd_spin_bump(&h->ev_cons);
  if (h->cons_waiting) pthread_cond_signal(&h->cv_cons);
  pthread_mutex_unlock(&h->mu);
  return 1;
}

/* Consumer: take a full slot, read its batch, write |delta|, free it. */
static int consume_one(handoff_ctx_t *h) {
  pthread_mutex_lock(&h->mu);
  int spun = 0;
  while (!h->stop && h->full_len == 0)
    hwait(h, &h->cv_cons, &h->ev_cons, h->prod_s, &spun, &h->cons_waiting);
  if (h->stop) {
    pthread_mutex_unlock(&h->mu);
    return 0;
  }
  uint32_t si = hq_pop(h->full, &h->full_head, &h->full_len, h->n_slots);
  pthread_mutex_unlock(&h->mu);
  double t0 = now_s();
  float acc = 0, *td = h->td + (size_t)si * h->batch;
  const float *d = h->data + (size_t)si * h->floats;
  for (size_t i = 0; i < h->floats; i++) acc += d[i];
  for (uint32_t i = 0; i < h->batch; i++) td[i] = acc * (float)i;
  if (h->work != NULL) {
    int rc = h->work(h->work_ctx, NULL);
    if (rc != RD_OK && h->work_rc == RD_OK) h->work_rc = rc;
  }
  double t = now_s() - t0;
  pthread_mutex_lock(&h->mu);
  avg_in(&h->cons_s, t);
  hq_push(h->free_q, h->free_head, &h->free_len, h->n_slots, si);
  rd_spin_bump(&h->ev_prod);
  if (h->prod_waiting && h->free_len >= h->wake_at) pthread_cond_signal(&h->cv_prod);
  pthread_mutex_unlock(&h->mu);
  return 1;
}

/* The sampler's part of one emulated strict-loop step (an unbound shape,
 * pipeline_step below has the bound one), on the measuring tables: the
 * last batch's priority update, a sample, a gather of rows. */
typedef struct {
  table_ctx_t *tab;
  gather_ctx_t *g;
} sampler_work_t;

static int sampler_work(void *p, rd_error_t *err) {
  sampler_work_t *w = p;
  int rc = update_call(w->tab, err);
  if (rc == RD_OK) rc = sample_call(w->tab, err);
  if (rc == RD_OK) rc = gather_call(w->g, err);
  return rc;
}

/* A step on the daemon's own pipeline (pipeline.c; D = 0 for handoff,
 * pass_depth for pass), for a shape whose learner fields are bound
 * (rd_profile_shape_trains_on_gather): a table of those five fields
 * filled with rows a learner accepts, and rd_pipeline_train requests of
 * `steps` steps, each awaited.
 * An emulation of the loop (two threads handing synthetic batches over,
 * as below for unbound shapes) ran the step about 10% faster than the
 * pipeline it copied (CartPole DDPG, batch 64: 25-27 us against 28-30 us
 * measured through TrainStep), so the pipeline is measured itself. */
typedef struct {
  rd_table_t t;
  pthread_mutex_t lock; /* the workload's table lock, as the registry's */
  rd_pipeline_t *p;
  uint32_t steps; /* per call */
  bool table_live, lock_live;
} pipe_ctx_t;

static void pipe_free(pipe_ctx_t *c) {
  if (c->p != NULL) rd_pipeline_destroy(c->p);
  if (c->table_live) rd_table_free(&c->t);
  if (c->lock_live) pthread_mutex_destroy(&c->lock);
  memset(c, 0, sizeof *c);
}

/* The five learner fields, named as rd_pipeline_bind_schema finds them,
 * with the shape's column sizes (learner_columns checked them). */
static void pipe_schema(const rd_profile_shape_t *s, rd_schema_t *sc) {
  const rd_learner_config_t *lc = &s->learner;
  const bool dqn = lc->algo == RD_ALGO_DQN, done = s->col_bytes[4] == 1;
  memset(sc, 0, sizeof *sc);
  sc->n_fields = 5;
  rd_field_t *f = sc->fields;
  f[0] = (rd_field_t){"obs", RD_DTYPE_FLOAT32, 1, {lc->obs_dim}};
  f[1] = dqn ? (rd_field_t){"action", RD_DTYPE_INT32, 0, {0}}
             : (rd_field_t){"action", RD_DTYPE_FLOAT32, 1, {lc->action_dim}};
  f[2] = (rd_field_t){"reward", RD_DTYPE_FLOAT32, 0, {0}};
  f[3] = (rd_field_t){"next_obs", RD_DTYPE_FLOAT32, 1, {lc->obs_dim}};
  f[4] = done ? (rd_field_t){"done", RD_DTYPE_BOOL, 0, {0}}
              : (rd_field_t){"discount", RD_DTYPE_FLOAT32, 0, {0}};
}

/* The table (the measuring table's capacity, rows at most GATHER_MAX_BYTES,
 * never below batch), filled until fill_end (at least one batch), and the
 * pipeline on it. */
static int pipe_setup(pipe_ctx_t *c, const rd_profile_shape_t *s,
                        const rd_learner_config_t *lc, uint32_t capacity, uint32_t depth,
                        double fill_end, rd_error_t *err) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  c->lock_live = true;
  const uint32_t B = s->key.batch;
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  pipe_schema(s, &tc.schema);
  size_t row = rd_schema_row_bytes(&tc.schema);
  if ((uint64_t)capacity * row > GATHER_MAX_BYTES) capacity = (uint32_t)(GATHER_MAX_BYTES / row);
  if (capacity < B) capacity = B;
  tc.capacity = capacity;
  tc.fanout = s->key.fanout;
  tc.alpha = s->alpha == 0.0 || s->alpha == 0.5 || s->alpha == 1.0 ? s->alpha : 0.6;
  tc.seed = DATA_SEED;
  uint32_t chunk = capacity < FILL_CHUNK ? capacity : FILL_CHUNK;
  tc.max_batch = B > chunk ? B : chunk;
  int rc = rd_table_init(&c->t, &tc, err);
  if (rc) {
    pipe_free(c);
    return rc;
  }
  c->table_live = true;
  uint8_t *col[5] = {NULL};
  size_t fb[5];
  rd_cbuf_t cols[5];
  double *raw = malloc((size_t)chunk * sizeof *raw);
  bool ok = raw != NULL;
  for (int f = 0; f < 5; f++) {
    fb[f] = rd_field_bytes(&tc.schema.fields[f]);
    col[f] = malloc((size_t)chunk * fb[f]);
    ok = ok && col[f] != NULL;
  }
  if (!ok) {
    rc = rd_error_set(err, RD_ENOMEM, "out of memory for the pipeline profile's rows");
    goto out;
  }
  uint64_t seed = DATA_SEED ^ 0x737472696374ull; /* "strict" */
  for (uint32_t i = 0; i < chunk; i++) raw[i] = 0.01 + 2.0 * (double)unif(&seed, 0, 1);
  for (uint64_t filled = 0; filled < capacity;) {
    uint32_t n = capacity - filled < chunk ? (uint32_t)(capacity - filled) : chunk;
    fill_learner_rows(col, fb, filled, n, lc);
    for (int f = 0; f < 5; f++) cols[f] = (rd_cbuf_t){col[f], (size_t)n * fb[f]};
    if ((rc = rd_table_insert(&c->t, n, cols, raw, NULL, err)) != RD_OK) goto out;
    filled += n;
    if (filled >= B && now_s() > fill_end) break;
  }
  rd_pipeline_config_t pc;
  memset(&pc, 0, sizeof pc);
  pc.learner = *lc;
  pc.batch = B;
  pc.depth = depth;
  pc.beta = 0.4;
  pc.min_size = B;
  pc.gamma = 0.99f;
  pc.learner_kind = RD_LEARNER_ON_CPU;
  rd_cores_for_threads(&s->learner_pin, &s->sampler_pin, lc->threads, &pc.learner_pin);
  pc.sampler_pin = s->sampler_pin;
  if ((rc = rd_pipeline_bind_schema(&pc, &tc.schema, err)) != RD_OK) goto out;
  rc = rd_pipeline_create(&c->p, &pc, &c->t, &c->lock, err);
out:
  free(raw);
  for (int f = 0; f < 5; f++) free(col[f]);
  if (rc) pipe_free(c);
  return rc;
}

/* One request of c->steps steps, awaited. Every step must train: a batch
 * the learner refuses is a failure of the profile, not a fast step. */
static int pipe_call(void *p, rd_error_t *err) {
  pipe_ctx_t *c = p;
  rd_train_result_t res;
  int rc = rd_pipeline_train_wait(c->p, c->steps, 0, &res, err);
  if (rc) return rc;
  if (res.status != RD_OK)
    return rd_error_set(err, res.status, "the pipeline profile's request: %s", res.message);
  if (res.steps_done != c->steps)
    return rd_error_set(err, RD_EINTERNAL, "the pipeline profile trained %u of %u steps "
                        "(%u batches refused)", res.steps_done, c->steps, res.skipped_steps);
  return RD_OK;
}

/* For a bound shape, the daemon's pipeline itself, into *tm:
 *   handoff (depth 0): the strict step less t_train and t_sampler (their
 *     isolated latencies);
 *   pass (depth PASS_DEPTH, papers/001 §VII's D = 50, or less for large
 *     batches: pass_depth): the relaxed step less t_train: what the
 *     learner's thread pays per step beyond its train-step while the
 *     sampler keeps batches ahead. The emulation below (a consumer
 *     reading synthetic batches) measured 1.4-2.3 us a batch for CartPole
 *     DDPG, batch 64, where the daemon's relaxed loop ran about 0.8 us
 *     above its train-step (2026-11-25), so D = 50 was predicted 7-30%
 *     slow in 9 of 9 runs. The key has no depth, so one pass serves every
 *     D > 0: the loop's rate at D = 1, 4, 8, 16, 200 stayed within 2% of
 *     D = 50's (bench_loop, CartPole DDPG, batch 64, 1 thread, after
 *     pipeline.c's polling rule of 2026-11-25). When the sampler's side is
 *     the slower (T_R + T_G above the learner's), the relaxed step is the
 *     sampler's and so is this pass: the prediction
 *     1/max(T_L + T_P, T_R + T_G) is then that step. */
static int pipeline_step(const rd_profile_shape_t *s, const rd_learner_config_t *lc,
                         uint32_t depth, double t_train, double t_sampler, uint32_t capacity,
                         double slice_end, double deadline, timing_t *tm, rd_error_t *err) {
  double now = now_s();
  pipe_ctx_t c;
  /* A quarter of the slice for the table; the rest for the requests. */
  int rc = pipe_setup(&c, s, lc, capacity, depth, now + 0.25 * (slice_end - now), err);
  if (rc) return rc;
  /* Steps per request: a repetition's length (REP_TARGET_S, or less in a
   * short slice) at the isolated parts' pace; a request's start (waking
   * the two threads, and at depth > 0 the sampler filling the queue) is
   * then a small part of it. */
  double est_step = depth == 0 ? t_train + t_sampler : fmax(t_train, t_sampler);
  double quota = slice_end - now_s();
  double target = quota / (RD_PROFILE_REPS + 2) < REP_TARGET_S ? quota / (RD_PROFILE_REPS + 2)
                                                                 : REP_TARGET_S;
  double m = target / est_step;
  c.steps = m < 1 ? 1 : m > RD_PIPELINE_MAX_STEPS ? RD_PIPELINE_MAX_STEPS : (uint32_t)m;
  /* A step inside the loop ran 1.15-1.3x its parts' isolated sum; the
   * first request also starts a fresh learner (its first step touches its
   * buffers: up to 10 steps). */
  double est_call = 1.5 * c.steps * est_step + 100e-6;
  double est_first = est_call + 10 * t_train + depth * t_sampler;
  const uint32_t steps = c.steps;
  rc = time_calls(pipe_call, &c, est_first, est_call, slice_end, deadline, tm, err);
  pipe_free(&c);
  if (rc == RD_OK && tm->reps > 0) {
    tm->latency_s = tm->latency_s / steps - t_train - (depth == 0 ? t_sampler : 0);
    if (!(tm->latency_s > RD_PROFILE_LATENCY_MIN_S)) tm->latency_s = RD_PROFILE_LATENCY_MIN_S;
  }
  return rc;
}

static void *producer_main(void *p) {
  while (produce_one(p)) {
  }
  return NULL;
}

static void *consumer_main(void *p) {
  while (consume_one(p)) {
  }
  return NULL;
}

/* handoff: the caller produces and waits for the batch's return. */
static int handoff_call(void *p, rd_error_t *err) {
  (void)err;
  handoff_ctx_t *h = p;
  produce_one(h);
  /* Wait until the consumer has freed it: the strict loop's round trip. */
  pthread_mutex_lock(&h->mu);
  int spun = 0;
  while (h->free_len == 0)
    hwait(h, &h->cv_prod, &h->ev_prod, h->cons_s, &spun, &h->prod_waiting);
  pthread_mutex_unlock(&h->mu);
  return RD_OK;
}

/* pass: the caller consumes while the helper produces ahead. */
static int pass_call(void *p, rd_error_t *err) {
  (void)err;
  consume_one(p);
  return RD_OK;
}

/* pass: the caller on the CPU it runs on, the helper on another of the
 * caller's CPUs (attr), when it may use two. In the relaxed loop the
 * learner's thread is always busy and the sampler's mostly, so they run
 * on two cores; here the producer has little to do, and unpinned the
 * scheduler often woke it on the consumer's CPU: pass then measured both
 * sides' work and the switches between them, 2.3-3.7 us against 0.9-1.3
 * us a batch (CartPole DDPG, batch 64; the daemon's relaxed loop ran
 * 1.7 us above its train-step). Returns 1 if attr carries a CPU. */
static int handoff_pin(handoff_ctx_t *h, const rd_profile_shape_t *s, pthread_attr_t *attr) {
  cpu_set_t mine, other;
  if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2)
    return 0;
  int here = sched_getcpu(), there = -1;
  if (here < 0 || !CPU_ISSET(here, &mine)) return 0;
  for (int c = 0; c < CPU_SETSIZE && there < 0; c++)
    if (c != here && CPU_ISSET(c, &mine)) there = c;
  /* A pinned workload: the learner's first CPU and the sampler's. */
  if (s->learner_pin.n > 0 && s->sampler_pin.n > 0 && s->learner_pin.cpu[0] < CPU_SETSIZE &&
      s->sampler_pin.cpu[0] < CPU_SETSIZE && s->learner_pin.cpu[0] != s->sampler_pin.cpu[0] &&
      CPU_ISSET(s->learner_pin.cpu[0], &mine) && CPU_ISSET(s->sampler_pin.cpu[0], &mine)) {
    here = s->learner_pin.cpu[0];
    there = s->sampler_pin.cpu[0];
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(here, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return 0;
  h->caller_mask = mine;
  h->pinned = true;
  CPU_ZERO(&other);
  CPU_SET(there, &other);
  return pthread_attr_setaffinity_np(attr, sizeof other, &other) == 0;
}

static void handoff_stop(handoff_ctx_t *h) {
  if (h->started) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    rd_spin_bump(&h->ev_prod);
    rd_spin_bump(&h->ev_cons);
    pthread_cond_broadcast(&h->cv_prod);
    pthread_cond_broadcast(&h->cv_cons);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    h->started = false;
  }
  if (h->pinned) pthread_setaffinity_np(pthread_self(), sizeof h->caller_mask, &h->caller_mask);
  h->pinned = false;
  pthread_cond_destroy(&h->cv_prod);
  pthread_cond_destroy(&h->cv_cons);
  pthread_mutex_destroy(&h->mu);
  free(h->data);
  free(h->td);
  h->data = h->td = NULL;
}

/* consumer_side: the helper thread consumes (handoff); else it produces (pass). */
static int handoff_start(handoff_ctx_t *h, const rd_profile_shape_t *s, uint32_t slots,
                         int helper_consumes, rd_error_t *err) {
  memset(h, 0, sizeof *h);
  h->batch = s->key.batch;
  uint32_t row = s->row_bytes > 0 ? s->row_bytes : 4;
  h->floats = ((size_t)h->batch * row + sizeof(float) - 1) / sizeof(float);
  while (slots > 1 && (double)slots * (h->floats + h->batch) * sizeof(float) > MAX_BATCH_BYTES)
    slots /= 2;
  h->n_slots = slots;
  /* As the pipeline: in the strict loop the learner wakes the sampler
   * after every step; with batches in flight only when half are used up. */
  h->wake_at = slots > 1 ? slots / 2 : 1;
  h->prod_spins = helper_consumes;
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_t ca; /* timed waits: rd_spin_deadline */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv_prod, &ca);
  pthread_cond_init(&h->cv_cons, &ca);
  pthread_condattr_destroy(&ca);
  h->data = calloc((size_t)slots * h->floats, sizeof(float));
  h->td = calloc((size_t)slots * h->batch, sizeof(float));
  if (h->data == NULL || h->td == NULL) {
    handoff_stop(h);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the hand-off profile");
  }
  for (uint32_t i = 0; i < slots; i++) h->free_q[i] = i;
  h->free_len = slots;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (!helper_consumes) handoff_pin(h, s, &attr);
  int prc = pthread_create(&h->th, &attr, helper_consumes ? consumer_main : producer_main, h);
  pthread_attr_destroy(&attr);
  if (prc != 0) {
    handoff_stop(h);
    return rd_error_set(err, RD_EINTERNAL, "cannot start the hand-off profile's thread");
  }
  h->started = true;
  return RD_OK;
}

/* Measure one of the pipeline primitives into *tm within [now, slice_end].
 * For handoff, tr (if not NULL) holds the train-step's batches and
 * t_train its warm latency at lc's thread count (profile.h: the helper
 * thread then trains on each batch, and t_train is taken off). */
/* Run fn(arg) where a pipeline thread of the workload will run (profile.h,
 * "Pinning"): on a new thread created on pin's CPUs, since an OpenMP team
 * keeps the mask its threads were created with and the calling thread's
 * team may be older. Unpinned: on the calling thread. If the kernel
 * refuses the CPUs (or no thread can start), on the calling thread,
 * logged: the figure is still the CPU's, only not that core's. */
typedef struct {
  call_fn fn;
  void *arg;
  rd_error_t *err;
  int rc;
} pinned_job_t;

static void *pinned_main(void *a) {
  pinned_job_t *j = a;
  j->rc = j->fn(j->arg, j->err);
  return NULL;
}

static int run_pinned(const rd_pin_t *pin, call_fn fn, void *arg, rd_error_t *err) {
  if (pin->n == 0) return fn(arg, err);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return fn(arg, err);
  rd_error_t perr;
  rd_error_clear(&perr);
  pinned_job_t j = {fn, arg, err, RD_OK};
  pthread_t th;
  int rc = rd_pin_attr(&attr, pin, &perr);
  if (rc == RD_OK && pthread_create(&th, &attr, pinned_main, &j) != 0)
    rc = rd_error_set(&perr, RD_EINTERNAL, "no thread could start on them");
  pthread_attr_destroy(&attr);
  if (rc == RD_OK) {
    pthread_join(th, NULL);
    return j.rc;
  }
  char cpus[64];
  rd_pin_format(pin, cpus, sizeof cpus);
  rd_log_warn("profile", "cannot measure on CPUs %s (%s); measuring unpinned", cpus, perr.msg);
  return fn(arg, err);
}

typedef struct {
  const rd_profile_shape_t *s;
  double est, slice_end, deadline;
  timing_t *tm;
} gather_job_t;

static int gather_job(void *arg, rd_error_t *err) {
  gather_job_t *j = arg;
  gather_ctx_t g;
  int rc = gather_setup(&g, j->s, err);
  if (rc) return rc;
  rc = time_calls(gather_call, &g, j->est, 0, j->slice_end, j->deadline, j->tm, err);
  gather_free(&g);
  return rc;
}

/* pass's pipeline depth for a shape: PASS_DEPTH, or less where its D + 2
 * batch slots (keys, probabilities, weights, |delta|, priorities,
 * discounts: 40 bytes an item, plus the learner's columns) would take
 * more than PASS_MAX_BYTES: a client picks batch and row size, and a
 * D = 0 workload should not make its profile allocate 52 batches. 0 if
 * even PASS_MIN_DEPTH does not fit (the emulation, bounded by
 * MAX_BATCH_BYTES, measures pass then). */
static uint32_t pass_depth(const rd_profile_shape_t *s) {
  uint64_t item = 40;
  for (uint32_t c = 0; c < s->n_cols; c++) item += s->col_bytes[c];
  uint64_t slots = PASS_MAX_BYTES / (item * s->key.batch);
  if (slots < PASS_MIN_DEPTH + 2) return 0;
  return slots - 2 < PASS_DEPTH ? (uint32_t)(slots - 2) : PASS_DEPTH;
}

static int measure_pipeline(rd_primitive_t prim, const rd_profile_shape_t *s, train_ctx_t *tr,
                            const rd_learner_config_t *lc, double t_train, table_ctx_t *tab,
                            double t_sampler, double slice_end, double deadline, timing_t *tm,
                            rd_error_t *err) {
  int rc;
  double est = 20e-6 + 2e-9 * (double)s->key.batch * (s->row_bytes > 0 ? s->row_bytes : 1);
  /* A client chooses batch and row size: one batch of rows is bounded as
   * the train-step's synthetic batches are. */
  if ((double)s->key.batch * (s->row_bytes > 0 ? s->row_bytes : 4) > MAX_BATCH_BYTES) {
    rd_log_warn("profile", "%s batch %u: a batch of %u-byte rows would exceed %u MiB; %s not "
                "measured", s->key.network, s->key.batch, s->row_bytes, MAX_BATCH_BYTES >> 20,
                rd_primitive_name(prim));
    tm->latency_s = -1; /* not measured, and not for lack of time */
    return RD_OK;
  }
  if (prim == RD_PRIM_GATHER) {
    /* On the sampler's CPU, whose thread gathers in the pipeline. */
    gather_job_t j = {s, est, slice_end, deadline, tm};
    return run_pinned(&s->sampler_pin, gather_job, &j, err);
  }
  int handoff = prim == RD_PRIM_HANDOFF;
  /* A bound shape whose train-step and sampler side were measured: the
   * daemon's pipeline itself, strict for handoff, relaxed for pass. */
  uint32_t depth = handoff ? 0 : pass_depth(s);
  if (tr != NULL && t_train > 0 && tab != NULL && t_sampler > 0 &&
      rd_profile_shape_trains_on_gather(s) && (handoff || depth > 0))
    return pipeline_step(s, lc, depth, t_train, t_sampler, tab->t.config.capacity, slice_end,
                         deadline, tm, err);
  /* Otherwise emulated. With the sampler's work too (its isolated time
   * known), handoff's round trip is a whole strict-loop step on the
   * measuring tables. */
  bool train = handoff && tr != NULL && t_train > 0;
  bool sampler = train && tab != NULL && t_sampler > 0;
  handoff_ctx_t h;
  gather_ctx_t g;
  sampler_work_t sw = {tab, &g};
  double est_first = est + 100e-6, est_call = 0;
  memset(&g, 0, sizeof g);
  if (sampler && (rc = gather_setup(&g, s, err)) != RD_OK) return rc;
  if (train) {
    /* A fresh learner: its first step touches its buffers (the warm-up). */
    if ((rc = rd_learner_init(&tr->l, lc, err)) != RD_OK) {
      gather_free(&g);
      return rc;
    }
    tr->live = true;
    est_call = est + 100e-6 + t_train + (sampler ? 2 * t_sampler : 0);
    est_first = est_call + 10 * t_train;
  }
  if ((rc = handoff_start(&h, s, handoff ? 1 : PASS_SLOTS, handoff, err)) != RD_OK) goto out;
  if (train) {
    h.work = train_call;
    h.work_ctx = tr;
  }
  if (sampler) {
    h.pwork = sampler_work;
    h.pwork_ctx = &sw;
  }
  rc = time_calls(handoff ? handoff_call : pass_call, &h, est_first, est_call, slice_end,
                  deadline, tm, err);
  handoff_stop(&h);
  if (rc == RD_OK && h.work_rc != RD_OK)
    rc = rd_error_set(err, h.work_rc, "the hand-off profile's train-step or sampling failed");
  if (rc == RD_OK && train && tm->reps > 0) {
    tm->latency_s -= t_train + (sampler ? t_sampler : 0);
    if (!(tm->latency_s > RD_PROFILE_LATENCY_MIN_S)) tm->latency_s = RD_PROFILE_LATENCY_MIN_S;
  }
out:
  gather_free(&g);
  if (train) {
    rd_learner_free(&tr->l);
    tr->live = false;
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* Measuring                                                           */
/* ------------------------------------------------------------------ */

/* One primitive at one thread count: rd_profile_measure_cpu's loop body,
 * run by run_pinned. */
typedef struct {
  const rd_profile_shape_t *shape;
  train_ctx_t *tr;
  table_ctx_t *tab;
  uint32_t th;
  rd_primitive_t prim;
  double *calib_est; /* train: the calibration estimate, in and out */
  double slice_end, deadline;
  timing_t tm;       /* out; reps 0: no time */
  bool warned;       /* out: "no time" was logged already */
} slice_t;

static int measure_slice(void *arg, rd_error_t *err) {
  slice_t *sl = arg;
  const rd_profile_shape_t *shape = sl->shape;
  const rd_profile_key_t *k = &shape->key;
  train_ctx_t *tr = sl->tr;
  uint32_t th = sl->th;
  double now = now_s(), slice_end = sl->slice_end, deadline = sl->deadline;
  uint32_t calib_rows = k->batch < CALIB_ROWS ? k->batch : CALIB_ROWS;
  timing_t tm = {0, 0};
  int rc = RD_OK;
  if (sl->prim != RD_PRIM_TRAIN) {
    double est = 10e-6 + CALL_NS_PER_ITEM * k->batch;
    rc = time_calls(sl->prim == RD_PRIM_SAMPLE ? sample_call : update_call, sl->tab, est, 0,
                    slice_end, deadline, &sl->tm, err);
    return rc;
  }
  /* The full step's estimate comes from a calibration step on the
   * batch's first CALIB_ROWS rows, scaled linearly (an overestimate:
   * larger products run at a higher rate), which is itself started only
   * if the FLOP estimate (or the last thread count's step, scaled down)
   * fits. Init and two calibration steps: the first touches the
   * parameters and a few rows' buffers for the first time. */
  double calib_bytes = learner_param_bytes(&shape->learner) +
                       learner_buffer_bytes(&shape->learner, calib_rows);
  double calib_guard = 2 * *sl->calib_est + COLD_SAFETY * calib_bytes / touch_bps();
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
    double c0 = now_s();
    rc = rd_learner_step(&tr->l, &cb, tr->td, NULL, err);
    calib = now_s() - c0;
  }
  /* A warm step: the calibration scaled linearly (an overestimate:
   * larger products run at a higher rate); the first full step also
   * touches the buffers for the full batch for the first time. */
  double warm_est = calib * k->batch / calib_rows;
  double first_est = warm_est + COLD_SAFETY * learner_buffer_bytes(&lc, k->batch) / touch_bps();
  if (rc == RD_OK || rc == RD_ERANGE)
    rc = time_calls(train_call, tr, first_est, warm_est, slice_end, deadline, &tm, err);
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
  double start = now_s();
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

  table_ctx_t tab;
  if ((rc = table_setup(&tab, shape, tree_limit, start + setup_s, err)) != RD_OK) return rc;
  uint64_t items = rd_table_size(&tab.t);
  double setup_done = now_s();

  /* The train-step's synthetic batches, if they are not too large to make
   * in the time left (generation and first touches). */
  train_ctx_t tr;
  memset(&tr, 0, sizeof tr);
  bool train = false;
  if (shape->has_learner) {
    size_t floats = batch_floats(&shape->learner, k->batch);
    double gen =
        2 * (floats * GEN_S_PER_FLOAT + COLD_SAFETY * floats * sizeof(float) / touch_bps());
    if (floats == 0)
      rd_log_warn("profile", "%s batch %u: a synthetic batch would exceed %u MiB; train-step not "
                  "measured", k->network, k->batch, MAX_BATCH_BYTES >> 20);
    else if (now_s() + gen > deadline)
      rd_log_warn("profile", "%s batch %u: no time left to make train-step batches", k->network,
                  k->batch);
    else
      train = true;
  }
  if (train && (rc = train_data(&tr, &shape->learner, k->batch, err)) != RD_OK) {
    table_ctx_free(&tab);
    return rc;
  }
  uint32_t calib_rows = k->batch < CALIB_ROWS ? k->batch : CALIB_ROWS;
  double calib_est = train ? train_estimate(&shape->learner, calib_rows) : 0;

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
      double now = now_s();
      slice_t sl = {shape, &tr, &tab, th, prim, &calib_est, now + (deadline - now) / (double)slices,
                    deadline, {0, 0}, false};
      rd_pin_t pin;
      if (prim == RD_PRIM_TRAIN)
        rd_cores_for_threads(&shape->learner_pin, &shape->sampler_pin, th, &pin);
      else
        rd_cores_for_threads(&shape->sampler_pin, &shape->learner_pin, th, &pin);
      if ((rc = run_pinned(&pin, measure_slice, &sl, err)) != RD_OK) break;
      timing_t tm = sl.tm;
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
    double now = now_s();
    double slice_end = now + (deadline - now) / (double)slices;
    timing_t tm = {0, 0};
    rd_learner_config_t lc = shape->learner;
    lc.threads = thread_counts[0];
    double t_sampler = rmm0_parts == 2 && t_gather > 0 ? t_rmm0 + t_gather : 0;
    if ((rc = measure_pipeline(prim, shape, train ? &tr : NULL, &lc, t_train0, &tab, t_sampler,
                               slice_end, deadline, &tm, err)) != RD_OK)
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
  train_data_free(&tr);
  table_ctx_free(&tab);
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
  double end = now_s();
  rd_log_info("profile", "%s: %s batch %u capacity %u K %u: %zu of %zu latencies in %.0f ms "
              "(budget %.0f ms; table of %llu items set up in %.0f ms)",
              cpu.fingerprint, k->network[0] ? k->network : "replay", k->batch, k->capacity,
              k->fanout, m, n * n_prims + n_pipe, (end - start) * 1e3, budget_s * 1e3,
              (unsigned long long)items, (setup_done - start) * 1e3);
  *n_out = m;
  return RD_OK;
}
