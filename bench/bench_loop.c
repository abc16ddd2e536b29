/* bench_loop.c - gradient steps per second of the whole hosted-learner loop
 * (daemon/learn/pipeline.h: sample, gather, train, priority update) as a fraction
 * of the learner's own.
 *
 * Issue 4 (papers/001 §V, §VII-A/B): the pipeline's sampler, storage and
 * learner units run on their own threads, and with relaxation depth D > 0
 * the sampler works up to D batches ahead, so sampling, gathering and
 * priority updates should hide behind the train step. Target: at D = 50
 * the loop reaches >= 95% of the learner-only GPS, per shape and batch.
 *
 * Setup, per shape (learner_shapes.h: the shapes of bench_learner) and batch
 * B: one table of capacity max(2^17, 8 B) with the learner's schema (obs,
 * action, reward, next_obs, discount; rd_pipeline_bind_schema), filled with
 * synthetic rows from Philox with a fixed seed (observations and rewards in
 * [-1, 1), actions in range, discount 0.99 with every fifth row terminal)
 * and random raw priorities in [0.05, 1). The learner config is
 * bench_learner's with T threads (default 2).
 *
 * What is timed.
 *   learner  rd_learner_step on a pool of 4 batches that were sampled and
 *            gathered from that table before timing (prioritized, beta 0.4,
 *            the table's IS weights): bench_learner's measurement on this
 *            table's rows. The same-run baseline, baseline.learner.gps.
 *   loop     a pipeline per depth D (default 0 and 50) on the same table and
 *            learner config (its own learner, same seed); one run of n steps
 *            is rd_pipeline_train(n) and a wait for its callback, so it
 *            includes sampling, gathering, training and every priority update
 *            of those n steps on the pipeline's threads, plus filling the
 *            pipeline at the request's start and draining it at its end.
 *            loop.gps; loop.gps_ratio = loop.gps / baseline.learner.gps.
 *   bound    with T > 1 learner threads, two more units: the learner at 1
 *            thread on the same pool (W_1), and the pipeline sampler's
 *            work per batch on one thread (S: rd_table_update of the last
 *            keys, rd_table_sample, rd_table_gather of the learner's
 *            fields; JSON loop.sampler_batch_us).
 *            loop.gps_ratio_bound = min(1, CPUs x W_T / (W_1 + S)):
 *            the most the ratio can be on this machine's online CPUs from
 *            work alone (ratio_bound says why).
 *
 * Method. Before timing, per point: one learner step succeeds with finite
 * |delta|; each pipeline runs a request of 2 steps that must report both
 * steps done (none skipped, status OK, finite loss and |delta|), raise
 * rd_pipeline_stats' step count by 2 and the table's update count by 2 B.
 * Every timed request is checked the same way (all steps done, none
 * skipped), and at the end of the point the pipeline's step count must equal
 * every step requested. One measurement of each kind: a warm-up that
 * doubles the number of steps until it has run for at least the warm-up
 * time and 2 steps (which sizes its repetitions), then `reps` repetitions of
 * about the minimum time each. The repetitions are interleaved (learner,
 * loop D = 0, loop D = 50, learner, ...), so that load on a shared machine
 * affects all of them alike; each result is its median repetition in
 * steps/s (CLOCK_MONOTONIC), the ratio is median loop / median learner.
 *
 * Threads. As bench_learner, the program re-executes itself with
 * OMP_WAIT_POLICY=passive unless it is set (learner.h, nn.h: why). The
 * pipeline's threads (sampler, learner) and the learner's OpenMP team share
 * the machine's cores; on a 2-core machine a 2-thread learner competes with
 * the sampler for them, which this benchmark measures as it is.
 *
 * Placement (--pin CPU). By default nothing is pinned and the scheduler
 * picks the core of each thread: the baseline runs on the main thread, the
 * loop's learner on the pipeline's thread, often on another core. The
 * daemon pins its pipelines (daemon/learn/cores.h): with as many learner
 * threads as CPUs that is the same (the learner's mask is every CPU and
 * the sampler is left unpinned), which is how this benchmark's figures are
 * taken (2 learner threads on 2 CPUs); with fewer, the daemon gives the
 * learner its own CPUs and the sampler the next one, which this default
 * does not. On a machine whose cores are not equally fast (this
 * project's 2-vCPU VMs: the same CartPole step measured 6 us on one vCPU
 * and 10 us on the other, and which one is slow changed over time) the
 * ratio then mixes the pipeline's cost with the cores' difference. --pin
 * runs both learners on one core: the main thread pins itself, and the
 * pipeline's learner thread pins itself from the pipeline's batch hook
 * before its first step (each creates its OpenMP team first, so that the
 * team's other threads, and the sampler thread, stay free to run anywhere).
 *
 * Output: an aligned table (default) or, with --json, one JSON object per
 * line and nothing else on stdout. Run with --help for the options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "learner.h"
#include "learner_shapes.h"
#include "pipeline.h"
#include "bench_util.h"
#include "rd_clock.h"
#include "rd_error.h"
#include "rd_philox.h"
#include "table.h"
#include "rdt_schema.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

#define TARGET_DEPTH 50
#define TARGET_RATIO 0.95
#define DEFAULT_THREADS 2
#define BETA 0.4

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  bool json, quick;
  bool shape_on[N_SHAPES];
  bench_list_t batch, threads, depth;
  bench_timing_t timing;
  int pin; /* CPU both learners run on; -1: none */
} opts_t;

static void usage(FILE *f) {
  fputs(
      "usage: bench_loop [--json] [--quick] [--shape NAME] [--batch B] [--threads T]\n"
      "                  [--depth D] [--pin CPU] [--time-ms MS]\n"
      "\n"
      "Gradient steps per second of the hosted learner's whole loop (daemon/learn/pipeline.h:\n"
      "sample + gather + train + priority update) against the learner alone, on the\n"
      "shapes of papers/001 Table III. Target: loop >= 0.95 x learner-only at D = 50.\n"
      "\n"
      "  --json         one JSON object per line on stdout, nothing else: loop.gps_ratio\n"
      "                 (params shape, batch, D; and threads when not 2), loop.gps and\n"
      "                 baseline.learner.gps (steps/s)\n"
      "  --quick        batches 32,2048, 40 ms per repetition, median of 3\n"
      "                 (default: batches 32,256,2048,16384, 250 ms, median of 5)\n"
      "  --shape NAME   only this shape: cartpole_ddpg, cartpole_dqn or hopper_ddpg\n"
      "                 (repeatable)\n"
      "  --batch B      only this batch size (repeatable)\n"
      "  --threads T    learner threads (repeatable; default 2)\n"
      "  --depth D      relaxation depth of the pipeline (repeatable; default 0 and 50)\n"
      "  --pin CPU      run the baseline's and the loop's learner threads on this CPU\n"
      "                 (default: unpinned; see the source's header for how the daemon\n"
      "                 places them)\n"
      "  --time-ms MS   minimum time of one repetition\n",
      f);
}

static void parse_opts(opts_t *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->pin = -1;
  double time_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_common_opt(argc, argv, &i, &o->json, &o->quick, &time_ms, usage)) continue;
    /* --batch: the table's max_batch and the pipeline's limit. */
    if (learner_opt(argc, argv, &i, o->shape_on, &o->batch, 65536, &o->threads)) continue;
    if ((v = bench_opt(argc, argv, &i, "--depth")))
      bench_list_add(&o->depth, "--depth", bench_parse_u32("--depth", v, 0, RD_PIPELINE_MAX_DEPTH));
    else if ((v = bench_opt(argc, argv, &i, "--pin")))
      o->pin = (int)bench_parse_u32("--pin", v, 0, CPU_SETSIZE - 1);
    else
      bench_unknown_opt(argv[i], usage);
  }
  learner_opts_default(o->shape_on, &o->batch, o->quick);
  if (o->threads.n == 0) bench_list_add(&o->threads, "--threads", DEFAULT_THREADS);
  if (o->depth.n == 0) {
    bench_list_add(&o->depth, "--depth", 0);
    bench_list_add(&o->depth, "--depth", TARGET_DEPTH);
  }
  bench_timing_init(&o->timing, time_ms, o->quick, 0.040, 0.250, 0.020, 0.100);
}

/* ------------------------------------------------------------------ */
/* The table: the learner's schema, synthetic rows                     */
/* ------------------------------------------------------------------ */

enum { F_OBS, F_ACTION, F_REWARD, F_NEXT, F_DISCOUNT, NF };

#define FILL_CHUNK 8192u

typedef struct {
  rd_table_t table;
  pthread_mutex_t lock; /* the workload's lock, as the daemon has one */
} workload_t;

static uint32_t table_capacity(uint32_t batch) {
  uint64_t c = (uint64_t)batch * 8;
  return c > (1u << 17) ? (uint32_t)c : 1u << 17;
}

/* Fill the whole capacity; rows and priorities from Philox streams keyed by
 * SEED, the shape and the batch. */
static void workload_init(workload_t *w, const shape_t *s, uint32_t batch) {
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  rdt_field(&tc.schema.fields[F_OBS], "obs", RD_DTYPE_FLOAT32, s->obs);
  if (s->algo == RD_ALGO_DQN)
    rdt_field(&tc.schema.fields[F_ACTION], "action", RD_DTYPE_INT32, 0);
  else
    rdt_field(&tc.schema.fields[F_ACTION], "action", RD_DTYPE_FLOAT32, s->actions);
  rdt_field(&tc.schema.fields[F_REWARD], "reward", RD_DTYPE_FLOAT32, 0);
  rdt_field(&tc.schema.fields[F_NEXT], "next_obs", RD_DTYPE_FLOAT32, s->obs);
  rdt_field(&tc.schema.fields[F_DISCOUNT], "discount", RD_DTYPE_FLOAT32, 0);
  tc.schema.n_fields = NF;
  tc.capacity = table_capacity(batch);
  tc.max_batch = batch > FILL_CHUNK ? batch : FILL_CHUNK;
  tc.seed = SEED ^ 0x7461626c65; /* "table" */
  rd_error_t err;
  int rc = rd_table_init(&w->table, &tc, &err);
  if (rc) die("rd_table_init failed: %s: %s", rd_err_name(rc), err.msg);
  pthread_mutex_init(&w->lock, NULL);

  size_t O = s->obs, A = s->algo == RD_ALGO_DQN ? 1 : s->actions, n = FILL_CHUNK;
  float *obs = xmalloc(n * O * sizeof(float)), *next = xmalloc(n * O * sizeof(float));
  float *reward = xmalloc(n * sizeof(float)), *discount = xmalloc(n * sizeof(float));
  float *af = xmalloc(n * A * sizeof(float));
  int32_t *ai = xmalloc(n * sizeof(int32_t));
  double *prio = xmalloc(n * sizeof(double));
  uint64_t st = SEED ^ ((uint64_t)(s - shapes) << 32) ^ batch;
  for (uint64_t first = 0; first < tc.capacity; first += n) {
    size_t m = tc.capacity - first < n ? tc.capacity - first : n;
    for (size_t i = 0; i < m; i++) {
      uint64_t k = first + i;
      for (size_t j = 0; j < O; j++) {
        obs[i * O + j] = unif(st, 2 * (k * O + j), -1, 1);
        next[i * O + j] = unif(st, 2 * (k * O + j) + 1, -1, 1);
      }
      reward[i] = unif(st + 1, k, -1, 1);
      discount[i] = k % 5 == 4 ? 0.0f : 0.99f;
      prio[i] = unif(st + 2, k, 0.05f, 1.0f);
      if (s->algo == RD_ALGO_DQN)
        ai[i] = (int32_t)(rd_philox_u64(st + 3, k) % s->actions);
      else
        for (size_t j = 0; j < A; j++) af[i * A + j] = unif(st + 4, k * A + j, -1, 1);
    }
    rd_cbuf_t cols[NF] = {
        {obs, m * O * sizeof(float)},
        {s->algo == RD_ALGO_DQN ? (const void *)ai : (const void *)af,
         m * (s->algo == RD_ALGO_DQN ? sizeof(int32_t) : A * sizeof(float))},
        {reward, m * sizeof(float)},
        {next, m * O * sizeof(float)},
        {discount, m * sizeof(float)}};
    rc = rd_table_insert(&w->table, m, cols, prio, NULL, &err);
    if (rc) die("rd_table_insert failed: %s: %s", rd_err_name(rc), err.msg);
  }
  free(obs);
  free(next);
  free(reward);
  free(discount);
  free(af);
  free(ai);
  free(prio);
}

static void workload_free(workload_t *w) {
  rd_table_free(&w->table);
  pthread_mutex_destroy(&w->lock);
}

/* ------------------------------------------------------------------ */
/* Learner only: a pool of batches sampled and gathered before timing   */
/* ------------------------------------------------------------------ */

#define POOL 4

typedef struct {
  uint64_t *keys;
  double *prob, *w64;
  float *w, *td;
  rd_buf_t cols[NF];
  rd_batch_t b[POOL];
  bench_arena_t mem; /* the arrays above */
} pool_t;

static void pool_init(pool_t *p, workload_t *w, const shape_t *s, uint32_t batch) {
  memset(p, 0, sizeof *p);
  size_t n = (size_t)batch * POOL;
  p->keys = bench_arena_alloc(&p->mem, batch * sizeof *p->keys);
  p->prob = bench_arena_alloc(&p->mem, batch * sizeof *p->prob);
  p->w64 = bench_arena_alloc(&p->mem, batch * sizeof *p->w64);
  p->w = bench_arena_alloc(&p->mem, n * sizeof *p->w);
  p->td = bench_arena_alloc(&p->mem, batch * sizeof *p->td);
  for (int f = 0; f < NF; f++) {
    p->cols[f].bytes = n * rd_field_bytes(&w->table.config.schema.fields[f]);
    p->cols[f].data = bench_arena_alloc(&p->mem, p->cols[f].bytes);
  }
  size_t O = s->obs, A = s->algo == RD_ALGO_DQN ? 1 : s->actions;
  for (size_t k = 0; k < POOL; k++) {
    size_t r = k * batch;
    rd_buf_t cols[NF];
    for (int f = 0; f < NF; f++) {
      size_t fb = rd_field_bytes(&w->table.config.schema.fields[f]);
      cols[f] = (rd_buf_t){(uint8_t *)p->cols[f].data + r * fb, batch * fb};
    }
    rd_sample_out_t out = {p->keys, p->prob, p->w64, cols};
    rd_error_t err;
    int rc = rd_table_sample(&w->table, batch, BETA, 0, &out, &err);
    if (rc) die("rd_table_sample failed: %s: %s", rd_err_name(rc), err.msg);
    for (size_t i = 0; i < batch; i++) p->w[r + i] = (float)p->w64[i];
    const float *obs = p->cols[F_OBS].data, *next = p->cols[F_NEXT].data;
    p->b[k] = (rd_batch_t){
        .n = batch,
        .obs = obs + r * O,
        .action_i = s->algo == RD_ALGO_DQN ? (const int32_t *)p->cols[F_ACTION].data + r : NULL,
        .action_f = s->algo == RD_ALGO_DQN ? NULL : (const float *)p->cols[F_ACTION].data + r * A,
        .reward = (const float *)p->cols[F_REWARD].data + r,
        .discount = (const float *)p->cols[F_DISCOUNT].data + r,
        .next_obs = next + r * O,
        .weights = p->w + r};
  }
}

static void pool_free(pool_t *p) { bench_arena_free(&p->mem); }

/* ------------------------------------------------------------------ */
/* Placement (--pin)                                                   */
/* ------------------------------------------------------------------ */

static cpu_set_t all_cpus; /* the process's mask at start */

/* Start this thread's OpenMP team of `threads` (libgomp keeps one per
 * master thread; its threads inherit the master's CPU mask when created),
 * then pin this thread to cpu. */
static void pin_self(int cpu, uint32_t threads) {
#pragma omp parallel num_threads(threads)
  {
    __asm__ volatile("" ::: "memory");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc) die("--pin %d: %s", cpu, strerror(rc));
}

typedef struct {
  int cpu;
  uint32_t threads;
} pin_arg_t;

static __thread bool thread_pinned;

/* The pipeline's batch hook: runs on its learner thread before each step. */
static void pin_hook(void *arg, const uint64_t *keys, const rd_batch_t *b) {
  (void)keys, (void)b;
  if (thread_pinned) return;
  const pin_arg_t *pa = arg;
  pin_self(pa->cpu, pa->threads);
  thread_pinned = true;
}

/* ------------------------------------------------------------------ */
/* The loop: a pipeline, one TrainStep request at a time                */
/* ------------------------------------------------------------------ */

/* One measured unit: the learner alone (at the point's threads, or at 1
 * for the bound), the sampler's work alone (the bound), or a pipeline of
 * depth D. */
typedef struct {
  const shape_t *shape;
  uint32_t batch, depth;
  bool is_loop, is_sampler;
  /* learner only */
  rd_learner_t learner;
  const pool_t *pool;
  uint64_t it;
  /* sampler only: the pipeline sampler's work per batch, on one thread (on w) */
  uint64_t *keys;
  double *prob, *w64, *prio;
  rd_buf_t cols[NF];
  /* loop and sampler */
  workload_t *w;
  /* loop */
  rd_pipeline_t *p;
  uint64_t requested; /* steps requested so far */
  /* measurement */
  uint64_t steps_per_rep;
  double v[BENCH_MAX_REPS];
  double gps;
} unit_t;

static void learner_steps(unit_t *u, uint64_t n) {
  rd_learner_tune_pause(&u->learner); /* the loop's repetition ran since our last step */
  for (uint64_t i = 0; i < n; i++) {
    rd_error_t err;
    int rc = rd_learner_step(&u->learner, &u->pool->b[u->it++ % POOL], u->pool->td, NULL, &err);
    if (rc) die("rd_learner_step failed (%s, batch %u): %s: %s", u->shape->name, u->batch,
                rd_err_name(rc), err.msg);
  }
}

/* One TrainStep request of n steps, waited on; all of them must train. */
static void loop_request(unit_t *u, uint32_t n, rd_train_result_t *res) {
  rd_error_t err;
  int rc = rd_pipeline_train_wait(u->p, n, 0, res, &err);
  if (rc) die("rd_pipeline_train failed (%s, batch %u, D %u): %s: %s", u->shape->name, u->batch,
              u->depth, rd_err_name(rc), err.msg);
  u->requested += n;
  if (res->status != RD_OK || res->steps_done != n || res->skipped_steps != 0 ||
      !isfinite(res->loss_mean) || !isfinite(res->td_abs_mean))
    die("check FAILED (%s, batch %u, D %u): a request of %u steps ended with %s, %u done, %u "
        "skipped, loss %g, mean |delta| %g%s%s",
        u->shape->name, u->batch, u->depth, n, rd_err_name(res->status), res->steps_done,
        res->skipped_steps, res->loss_mean, res->td_abs_mean, res->message[0] ? ": " : "",
        res->message);
}

static void loop_steps(unit_t *u, uint64_t n) {
  while (n > 0) {
    uint32_t k = n > RD_PIPELINE_MAX_STEPS ? RD_PIPELINE_MAX_STEPS : (uint32_t)n;
    rd_train_result_t res;
    loop_request(u, k, &res);
    n -= k;
  }
}

/* What the pipeline's sampler thread does per batch (sampler_unit.c): write
 * the last batch's priorities, sample, gather the learner's fields. */
static void sampler_steps(unit_t *u, uint64_t n) {
  workload_t *w = u->w;
  for (uint64_t i = 0; i < n; i++) {
    rd_error_t err;
    pthread_mutex_lock(&w->lock);
    int rc = rd_table_update(&w->table, u->batch, u->keys, u->prio, NULL, &err);
    rd_sample_out_t out = {u->keys, u->prob, u->w64, NULL};
    if (rc == RD_OK) rc = rd_table_sample(&w->table, u->batch, BETA, 0, &out, &err);
    if (rc == RD_OK) rc = rd_table_gather(&w->table, u->batch, u->keys, u->cols, &err);
    pthread_mutex_unlock(&w->lock);
    if (rc) die("the sampler's work failed (%s, batch %u): %s: %s", u->shape->name, u->batch,
                rd_err_name(rc), err.msg);
  }
}

static void sampler_init(unit_t *u, workload_t *w, const shape_t *s, uint32_t batch) {
  memset(u, 0, sizeof *u);
  u->shape = s;
  u->batch = batch;
  u->is_sampler = true;
  u->w = w;
  u->keys = xmalloc(batch * sizeof *u->keys);
  u->prob = xmalloc(batch * sizeof *u->prob);
  u->w64 = xmalloc(batch * sizeof *u->w64);
  u->prio = xmalloc(batch * sizeof *u->prio);
  for (int f = 0; f < NF; f++) {
    u->cols[f].bytes = (size_t)batch * rd_field_bytes(&w->table.config.schema.fields[f]);
    u->cols[f].data = xmalloc(u->cols[f].bytes);
  }
  /* |delta|-like priorities, and a first batch of keys to write them to. */
  for (uint32_t i = 0; i < batch; i++) u->prio[i] = 0.05 + 0.9 * (double)((i * 37u) % 101u) / 101.0;
  rd_sample_out_t out = {u->keys, u->prob, u->w64, NULL};
  rd_error_t err;
  pthread_mutex_lock(&w->lock);
  int rc = rd_table_sample(&w->table, batch, BETA, 0, &out, &err);
  pthread_mutex_unlock(&w->lock);
  if (rc) die("rd_table_sample failed: %s: %s", rd_err_name(rc), err.msg);
}

static void sampler_free(unit_t *u) {
  free(u->keys);
  free(u->prob);
  free(u->w64);
  free(u->prio);
  for (int f = 0; f < NF; f++) free(u->cols[f].data);
}

static void unit_steps(unit_t *u, uint64_t n) {
  if (u->is_loop)
    loop_steps(u, n);
  else if (u->is_sampler)
    sampler_steps(u, n);
  else
    learner_steps(u, n);
}

static void unit_run(void *ctx, uint64_t n) { unit_steps(ctx, n); }

/* Warm-up, which sizes a repetition. */
static void unit_warm(unit_t *u, const opts_t *o) {
  u->steps_per_rep = bench_warm_up(unit_run, u, &o->timing);
}

static void unit_rep(unit_t *u, int r, const opts_t *o) {
  u->v[r] = 1.0 / bench_rep_seconds(unit_run, u, u->steps_per_rep, &o->timing);
}

static void unit_median(unit_t *u, int reps) {
  double v[BENCH_MAX_REPS];
  memcpy(v, u->v, (size_t)reps * sizeof v[0]);
  u->gps = bench_median(v, reps);
}

static void learner_or_die(rd_learner_t *l, const rd_learner_config_t *c) {
  rd_error_t err;
  int rc = rd_learner_init(l, c, &err);
  if (rc) die("rd_learner_init failed: %s: %s", rd_err_name(rc), err.msg);
}

/* Before timing: a step succeeds with finite |delta|. */
static void check_learner(unit_t *u) {
  rd_error_t err;
  const pool_t *p = u->pool;
  int rc = rd_learner_step(&u->learner, &p->b[0], p->td, NULL, &err);
  if (rc) die("check FAILED (%s, batch %u): rd_learner_step: %s: %s", u->shape->name, u->batch,
              rd_err_name(rc), err.msg);
  for (uint32_t i = 0; i < u->batch; i++)
    if (!(p->td[i] >= 0 && p->td[i] < 1e30f))
      die("check FAILED (%s, batch %u): |delta|[%u] = %g", u->shape->name, u->batch, i,
          (double)p->td[i]);
}

static uint64_t table_updates(workload_t *w) {
  pthread_mutex_lock(&w->lock);
  uint64_t n = rd_table_stats(&w->table).updates;
  pthread_mutex_unlock(&w->lock);
  return n;
}

/* Before timing: 2 steps through the whole loop, seen by the pipeline's
 * counters and by the table's priority updates. */
static void check_loop(unit_t *u) {
  rd_pipeline_stats_t before, after;
  rd_pipeline_stats(u->p, &before);
  uint64_t up0 = table_updates(u->w);
  rd_train_result_t res;
  loop_request(u, 2, &res);
  rd_pipeline_stats(u->p, &after);
  uint64_t up1 = table_updates(u->w);
  if (after.steps - before.steps != 2 || after.skipped_steps != before.skipped_steps)
    die("check FAILED (%s, batch %u, D %u): the pipeline counted %" PRIu64 " steps (%" PRIu64
        " skipped) for a request of 2",
        u->shape->name, u->batch, u->depth, after.steps - before.steps,
        after.skipped_steps - before.skipped_steps);
  if (up1 - up0 != 2 * (uint64_t)u->batch)
    die("check FAILED (%s, batch %u, D %u): %" PRIu64 " priority updates for 2 steps of %u",
        u->shape->name, u->batch, u->depth, up1 - up0, u->batch);
}

static void loop_init(unit_t *u, workload_t *w, const shape_t *s, uint32_t batch,
                      uint32_t threads, uint32_t depth, pin_arg_t *pin) {
  memset(u, 0, sizeof *u);
  u->shape = s;
  u->batch = batch;
  u->depth = depth;
  u->is_loop = true;
  u->w = w;
  rd_pipeline_config_t c;
  memset(&c, 0, sizeof c);
  make_config(s, batch, threads, &c.learner);
  c.batch = batch;
  c.depth = depth;
  c.beta = BETA;
  c.min_size = batch;
  c.gamma = 0.99f;
  if (pin->cpu >= 0) {
    c.batch_hook = pin_hook;
    c.hook_arg = pin;
  }
  rd_error_t err;
  int rc = rd_pipeline_bind_schema(&c, &w->table.config.schema, &err);
  if (rc) die("rd_pipeline_bind_schema failed: %s: %s", rd_err_name(rc), err.msg);
  /* The pipeline's threads inherit this thread's mask: unpin meanwhile. */
  if (pin->cpu >= 0) pthread_setaffinity_np(pthread_self(), sizeof all_cpus, &all_cpus);
  rc = rd_pipeline_create(&u->p, &c, &w->table, &w->lock, &err);
  if (pin->cpu >= 0) pin_self(pin->cpu, threads);
  if (rc) die("rd_pipeline_create failed (%s, batch %u, D %u): %s: %s", s->name, batch, depth,
              rd_err_name(rc), err.msg);
}

static void loop_free(unit_t *u) {
  rd_pipeline_stats_t st;
  rd_pipeline_stats(u->p, &st);
  if (st.steps != u->requested || st.skipped_steps != 0)
    die("check FAILED (%s, batch %u, D %u): %" PRIu64 " steps requested, the pipeline counted "
        "%" PRIu64 " (%" PRIu64 " skipped)",
        u->shape->name, u->batch, u->depth, u->requested, st.steps, st.skipped_steps);
  rd_pipeline_destroy(u->p);
}

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  const shape_t *shape;
  uint32_t batch, threads, depth;
  double learner_gps, loop_gps;
  double learner1_gps, sampler_bps; /* the bound's inputs (0: not measured) */
} result_t;

/* The most the loop's ratio can be on `cores` cores, from work alone: the
 * loop runs the learner's work (at least its one-thread time W1: more
 * threads share it, they do not shrink it) and the sampler's (S a batch)
 * on those cores, and never faster than the learner alone (WT), so a step
 * takes at least max(WT, (W1 + S) / cores) and the ratio is at most
 * min(1, cores WT / (W1 + S)). 0 if not measured. */
static double ratio_bound(const result_t *r, long cores) {
  if (!(r->learner1_gps > 0 && r->sampler_bps > 0) || cores < 1) return 0;
  double wt = 1 / r->learner_gps, w1 = 1 / r->learner1_gps, sb = 1 / r->sampler_bps;
  double b = (double)cores * wt / (w1 + sb);
  return b < 1 ? b : 1;
}

static result_t *results;
static size_t n_results, cap_results;

static void add_result(const result_t *r) {
  if (n_results == cap_results) {
    cap_results = cap_results ? 2 * cap_results : 64;
    result_t *n = realloc(results, cap_results * sizeof *results);
    if (n == NULL) die("out of memory");
    results = n;
  }
  results[n_results++] = *r;
}

static void run_point(const shape_t *s, uint32_t batch, uint32_t threads, const opts_t *o,
                      bool progress) {
  workload_t w;
  workload_init(&w, s, batch);
  pool_t pool;
  pool_init(&pool, &w, s, batch);

  /* With more than one learner thread: the 1-thread learner and the
   * sampler's work too, for the bound (ratio_bound). */
  const bool bound = threads > 1;
  size_t n_units = 1 + o->depth.n + (bound ? 2 : 0);
  unit_t *units = xmalloc(n_units * sizeof *units);
  unit_t *lu = &units[0];
  memset(lu, 0, sizeof *lu);
  lu->shape = s;
  lu->batch = batch;
  lu->pool = &pool;
  rd_learner_config_t c;
  make_config(s, batch, threads, &c);
  learner_or_die(&lu->learner, &c);
  check_learner(lu);
  pin_arg_t pin = {o->pin, threads};
  for (size_t d = 0; d < o->depth.n; d++) {
    loop_init(&units[1 + d], &w, s, batch, threads, o->depth.v[d], &pin);
    check_loop(&units[1 + d]);
  }
  unit_t *l1 = bound ? &units[1 + o->depth.n] : NULL, *su = bound ? l1 + 1 : NULL;
  if (bound) {
    memset(l1, 0, sizeof *l1);
    l1->shape = s;
    l1->batch = batch;
    l1->pool = &pool;
    rd_learner_config_t c1;
    make_config(s, batch, 1, &c1);
    learner_or_die(&l1->learner, &c1);
    check_learner(l1);
    sampler_init(su, &w, s, batch);
  }

  for (size_t k = 0; k < n_units; k++) unit_warm(&units[k], o);
  for (int r = 0; r < o->timing.reps; r++)
    for (size_t k = 0; k < n_units; k++) {
      unit_rep(&units[k], r, o);
      if (progress) {
        fprintf(stderr, "\r\033[K  %-14s batch %-6u threads %u: rep %d/%d, %s: %10.1f steps/s",
                s->name, batch, threads, r + 1, o->timing.reps,
                k == 0 ? "learner" : units[k].is_loop ? "loop" : units[k].is_sampler ? "sampler"
                                                                                     : "learner-1",
                units[k].v[r]);
        fflush(stderr);
      }
    }
  for (size_t k = 0; k < n_units; k++) unit_median(&units[k], o->timing.reps);

  for (size_t d = 0; d < o->depth.n; d++) {
    result_t r = {s, batch, threads, o->depth.v[d], lu->gps, units[1 + d].gps,
                  bound ? l1->gps : 0, bound ? su->gps : 0};
    add_result(&r);
    loop_free(&units[1 + d]);
  }
  if (bound) {
    rd_learner_free(&l1->learner);
    sampler_free(su);
  }
  rd_learner_free(&lu->learner);
  free(units);
  pool_free(&pool);
  workload_free(&w);
}

/* ------------------------------------------------------------------ */
/* Report                                                              */
/* ------------------------------------------------------------------ */

static void print_json(void) {
  for (size_t i = 0; i < n_results; i++) {
    const result_t *r = &results[i];
    /* The learner-only baseline once per shape, batch and threads. */
    if (i == 0 || results[i - 1].shape != r->shape || results[i - 1].batch != r->batch ||
        results[i - 1].threads != r->threads)
      printf("{\"name\": \"baseline.learner.gps\", \"params\": {\"shape\": \"%s\", \"batch\": %u, "
             "\"threads\": %u}, \"value\": %.2f, \"unit\": \"steps/s\"}\n",
             r->shape->name, r->batch, r->threads, r->learner_gps);
    printf("{\"name\": \"loop.gps\", \"params\": {\"shape\": \"%s\", \"batch\": %u, \"D\": %u, "
           "\"threads\": %u}, \"value\": %.2f, \"unit\": \"steps/s\"}\n",
           r->shape->name, r->batch, r->depth, r->threads, r->loop_gps);
    char thr[32] = "";
    if (r->threads != DEFAULT_THREADS) snprintf(thr, sizeof thr, ", \"threads\": %u", r->threads);
    printf("{\"name\": \"loop.gps_ratio\", \"params\": {\"shape\": \"%s\", \"batch\": %u, "
           "\"D\": %u%s}, \"value\": %.4f, \"unit\": \"fraction\"}\n",
           r->shape->name, r->batch, r->depth, thr, r->loop_gps / r->learner_gps);
    double b = ratio_bound(r, sysconf(_SC_NPROCESSORS_ONLN));
    if (b > 0)
      printf("{\"name\": \"loop.gps_ratio_bound\", \"params\": {\"shape\": \"%s\", "
             "\"batch\": %u, \"D\": %u%s, \"cpus\": %ld}, \"value\": %.4f, \"unit\": "
             "\"fraction\"}\n",
             r->shape->name, r->batch, r->depth, thr, sysconf(_SC_NPROCESSORS_ONLN), b);
    /* S, the bound's sampler work per batch, once per shape and batch. */
    if (r->sampler_bps > 0 && (i == 0 || results[i - 1].shape != r->shape ||
                               results[i - 1].batch != r->batch))
      printf("{\"name\": \"loop.sampler_batch_us\", \"params\": {\"shape\": \"%s\", "
             "\"batch\": %u}, \"value\": %.2f, \"unit\": \"us\"}\n",
             r->shape->name, r->batch, 1e6 / r->sampler_bps);
  }
}

static void print_table(void) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("%-14s %6s %7s %4s %12s %12s %10s %7s %7s %8s  %s\n", "shape", "batch", "threads", "D",
         "learner/s", "loop/s", "loop ms", "ratio", "bound", "of bound", "target");
  int met = 0, missed = 0, met_b = 0, missed_b = 0;
  for (size_t i = 0; i < n_results; i++) {
    const result_t *r = &results[i];
    if (i > 0 && (results[i - 1].shape != r->shape || results[i - 1].batch != r->batch ||
                  results[i - 1].threads != r->threads))
      putchar('\n');
    double ratio = r->loop_gps / r->learner_gps;
    char tgt[32] = "-";
    if (r->depth == TARGET_DEPTH) {
      bool ok = ratio >= TARGET_RATIO;
      snprintf(tgt, sizeof tgt, ">=%.2f %s", TARGET_RATIO, ok ? "met" : "MISSED");
      ok ? met++ : missed++;
    }
    char bnd[16] = "-", of[16] = "-";
    const double b = ratio_bound(r, cores);
    if (b > 0) {
      snprintf(bnd, sizeof bnd, "%.3f", b);
      snprintf(of, sizeof of, "%.3f", ratio / b);
      if (r->depth == TARGET_DEPTH) ratio / b >= TARGET_RATIO ? met_b++ : missed_b++;
    }
    printf("%-14s %6u %7u %4u %12.1f %12.1f %10.3f %7.3f %7s %8s  %s\n", r->shape->name,
           r->batch, r->threads, r->depth, r->learner_gps, r->loop_gps, 1e3 / r->loop_gps, ratio,
           bnd, of, tgt);
  }
  printf("\n# ratio = loop steps/s (sample + gather + train + update, pipeline of depth D) /"
         "\n#         learner-only steps/s, same shape, batch, threads and table, same run"
         "\n# bound = the most the ratio can be on these %ld CPUs from work alone (threads > 1):"
         "\n#         min(1, CPUs x W_T / (W_1 + S)), W_T and W_1 the learner's step at the"
         "\n#         point's threads and at 1, S the sampler's update + sample + gather of a"
         "\n#         batch on one thread, all measured in this run"
         "\n# of bound = ratio / bound\n", cores);
  if (met + missed > 0)
    printf("# target (D = %d, ratio >= %.2f): %d met, %d missed\n", TARGET_DEPTH, TARGET_RATIO,
           met, missed);
  if (met_b + missed_b > 0)
    printf("# relative to the bound (D = %d, ratio / bound >= %.2f): %d met, %d missed\n",
           TARGET_DEPTH, TARGET_RATIO, met_b, missed_b);
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(&o, argc, argv);
  bench_omp_passive(argv);
  bool progress = isatty(STDERR_FILENO) && !o.json;
  if (o.pin >= 0) {
    if (pthread_getaffinity_np(pthread_self(), sizeof all_cpus, &all_cpus) != 0)
      die("--pin: cannot read the CPU mask");
    if (!CPU_ISSET(o.pin, &all_cpus)) die("--pin: CPU %d is not available to this process", o.pin);
    uint32_t tmax = 1;
    for (size_t t = 0; t < o.threads.n; t++)
      if (o.threads.v[t] > tmax) tmax = o.threads.v[t];
    pin_self(o.pin, tmax);
  }
  FILE *info = o.json ? stderr : stdout;

  char pinned[64] = "learners unpinned";
  if (o.pin >= 0) snprintf(pinned, sizeof pinned, "learners pinned to CPU %d", o.pin);
  bench_machine_t m;
  bench_machine(&m);
  fprintf(info, "# bench_loop: %s, %s, %ld CPUs (load %s), OMP_WAIT_POLICY=%s, %.0f ms per "
                "repetition, median of %d, table capacity max(2^17, 8 x batch), %s\n",
          m.date, m.cpu, m.cpus, m.load,
          getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "unset",
          o.timing.min_s * 1e3, o.timing.reps, pinned);
  fflush(info);

  for (size_t k = 0; k < N_SHAPES; k++) {
    if (!o.shape_on[k]) continue;
    for (size_t b = 0; b < o.batch.n; b++)
      for (size_t t = 0; t < o.threads.n; t++)
        run_point(&shapes[k], o.batch.v[b], o.threads.v[t], &o, progress);
  }
  bench_end(info, progress);
  bench_report(o.json, print_json, print_table);
  free(results);
  return 0;
}
