/* bench_sustained.c - the CPU learner's step time over a long run, window
 * by window, where the benchmarks of bench_learner time a few hundred steps.
 *
 * Why: what a learner does to its own state over thousands of steps can
 * slow it down where a short run does not see it. One case, found this way:
 * Adam's first moment of a parameter whose gradient stays 0 (a dead ReLU
 * unit's) decayed into the denormals and stayed there (backends/cpu/nn.h),
 * and every later step paid the CPU's slow path on it.
 *
 * Method. CartPole DQN (learner_shapes.h: Q network 4-64-64-2, the
 * learner's defaults), one thread, batch 64, trained on batches drawn at
 * random from 100,000 distinct random rows (obs and next_obs uniform in
 * [-1, 1), rewards likewise, every tenth row terminal, IS weights 0.5): the
 * rows a replay table of that size would hold. The run is cut into windows
 * of 2,000 steps (--quick: 4 windows; default 10); each window's mean step
 * time (CLOCK_MONOTONIC, sampling included: a copy of 64 rows) is one
 * figure, and so is the number of Adam moments of the Q network that are
 * denormal at the end. The same-run baseline is the first window:
 * learner.sustained_ratio = the last window's time / the first's (1 = no
 * slowdown).
 *
 * Output: a table, or with --json one JSON object per line.
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "learner.h"
#include "learner_shapes.h"
#include "rd_clock.h"
#include "rd_error.h"

#define ROWS 100000u
#define BATCH 64u
#define WINDOW 2000u
#define OBS 4u

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_sustained [--json] [--quick] [--windows N]\n"
          "  CartPole DQN, batch 64, one thread: the step time of each window of %u steps\n"
          "  on %u distinct random rows, and the denormal Adam moments at the end.\n"
          "  --windows N    windows to run (1..100; default 10, --quick 4)\n",
          WINDOW, ROWS);
}

/* xorshift64: the rows and the batches' row choices, fixed seed. */
static uint64_t next(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static float unit(uint64_t *x) { return (float)((next(x) >> 40) * 0x1p-24) * 2 - 1; }

static size_t denormals(const float *v, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += v[i] != 0 && fabsf(v[i]) < FLT_MIN;
  return k;
}

int main(int argc, char **argv) {
  bool json = false, quick = false;
  uint32_t windows = 0;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_common_opt(argc, argv, &i, &json, &quick, NULL, usage)) continue;
    if ((v = bench_opt(argc, argv, &i, "--windows")) != NULL)
      windows = bench_parse_u32("--windows", v, 1, 100);
    else
      bench_unknown_opt(argv[i], usage);
  }
  if (windows == 0) windows = quick ? 4 : 10;
  const shape_t *s = NULL;
  for (size_t k = 0; k < N_SHAPES; k++)
    if (strcmp(shapes[k].name, "cartpole_dqn") == 0) s = &shapes[k];
  if (s == NULL) die("no cartpole_dqn shape");
  rd_learner_config_t c;
  make_config(s, BATCH, 1, &c);
  rd_learner_t l;
  rd_error_t err;
  if (rd_learner_init(&l, &c, &err) != RD_OK) die("learner: %s", err.msg);

  float *obs = xmalloc(ROWS * OBS * sizeof(float)), *nxt = xmalloc(ROWS * OBS * sizeof(float));
  float *rew = xmalloc(ROWS * sizeof(float)), *disc = xmalloc(ROWS * sizeof(float));
  int32_t *act = xmalloc(ROWS * sizeof(int32_t));
  uint64_t x = 88172645463325252ull;
  for (uint32_t i = 0; i < ROWS; i++) {
    for (uint32_t j = 0; j < OBS; j++) obs[i * OBS + j] = unit(&x);
    for (uint32_t j = 0; j < OBS; j++) nxt[i * OBS + j] = unit(&x);
    rew[i] = unit(&x);
    disc[i] = i % 10 == 9 ? 0.0f : 0.99f;
    act[i] = (int32_t)(next(&x) % s->actions);
  }
  float bo[BATCH * OBS], bn[BATCH * OBS], br[BATCH], bd[BATCH], bw[BATCH], td[BATCH];
  int32_t ba[BATCH];
  for (uint32_t i = 0; i < BATCH; i++) bw[i] = 0.5f;

  if (!json) bench_print_header("bench_sustained");
  double first = 0, last = 0;
  for (uint32_t w = 0; w < windows; w++) {
    const double t0 = rd_clock_now();
    for (uint32_t k = 0; k < WINDOW; k++) {
      for (uint32_t i = 0; i < BATCH; i++) {
        const uint32_t r = (uint32_t)((next(&x) >> 20) % ROWS);
        memcpy(bo + i * OBS, obs + (size_t)r * OBS, OBS * sizeof(float));
        memcpy(bn + i * OBS, nxt + (size_t)r * OBS, OBS * sizeof(float));
        br[i] = rew[r], bd[i] = disc[r], ba[i] = act[r];
      }
      rd_batch_t b = {BATCH, bo, ba, NULL, br, bd, bn, bw};
      rd_step_stats_t st;
      if (rd_learner_step(&l, &b, td, &st, &err) != RD_OK) die("step: %s", err.msg);
    }
    const double us = (rd_clock_now() - t0) / WINDOW * 1e6;
    if (w == 0) first = us;
    last = us;
    char params[128];
    snprintf(params, sizeof params,
             "\"shape\": \"cartpole_dqn\", \"batch\": %u, \"steps_from\": %u, \"steps\": %u",
             BATCH, w * WINDOW, WINDOW);
    bench_emit(json, "learner.sustained_step", params, us, "us/step");
  }
  const rd_mlp_t *q = &l.net[0];
  char params[64];
  snprintf(params, sizeof params, "\"shape\": \"cartpole_dqn\", \"steps\": %u", windows * WINDOW);
  bench_emit(json, "learner.denormal_moments", params,
             (double)(denormals(q->adam_m, q->n_params) + denormals(q->adam_v, q->n_params)),
             "moments");
  bench_emit(json, "learner.sustained_ratio", params, last / first, "last/first");
  rd_learner_free(&l);
  free(obs), free(nxt), free(rew), free(disc), free(act);
  return 0;
}
