/* learner_shapes.h - the network shapes the learner benchmarks time
 * (bench_learner.c, bench_loop.c), and the learner config they use.
 *
 * Shapes (papers/001 Table III; bench/pytorch_learner.py has the same):
 *   cartpole_ddpg  actor 4-8-8-1 (tanh out), critic 5-8-8-1
 *   cartpole_dqn   Q network 4-64-64-2, double DQN
 *   hopper_ddpg    actor 11-256-256-3 (tanh out), critic 14-256-256-1
 * relu hidden layers and the learner's defaults otherwise (learner.h: Adam
 * lr 1e-3, grad-norm clip 10, Polyak tau 0.005, action range [-1, 1]).
 *
 * Header-only (static definitions): each benchmark is one translation unit.
 */
#ifndef RD_BENCH_LEARNER_SHAPES_H
#define RD_BENCH_LEARNER_SHAPES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "bench_util.h"

#include "learner.h"
#include "rd_philox.h"

#define SEED UINT64_C(0x7265706c61796400) /* "replayd" */

typedef struct {
  const char *name;
  rd_algo_t algo;
  uint32_t obs, actions, hidden, critic_hidden; /* actions: DQN's count, DDPG's dimension */
} shape_t;

static const shape_t shapes[] = {
    {"cartpole_ddpg", RD_ALGO_DDPG, 4, 1, 8, 8},
    {"cartpole_dqn", RD_ALGO_DQN, 4, 2, 64, 0},
    {"hopper_ddpg", RD_ALGO_DDPG, 11, 3, 256, 256},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* The learner config of shape s for batches up to `batch`, seed SEED. */
static inline void make_config(const shape_t *s, uint32_t batch, uint32_t threads,
                               rd_learner_config_t *c) {
  rd_learner_config_default(c);
  c->algo = s->algo;
  c->obs_dim = s->obs;
  c->n_hidden = 2;
  c->hidden[0] = c->hidden[1] = s->hidden;
  if (s->algo == RD_ALGO_DQN) {
    c->num_actions = s->actions;
  } else {
    c->action_dim = s->actions;
    c->n_critic_hidden = 2;
    c->critic_hidden[0] = c->critic_hidden[1] = s->critic_hidden;
  }
  c->max_batch = batch;
  c->threads = threads;
  c->seed = SEED;
}

/* Uniform in [lo, hi) from draw d of Philox stream s. */
static inline float unif(uint64_t s, uint64_t d, float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rd_philox_u64(s, d) >> 40) * 0x1p-24);
}

/* --shape NAME: turns shape NAME on in shape_on[N_SHAPES]; dies on a name
 * that is not a shape. */
static inline void shape_opt(const char *name, bool *shape_on) {
  size_t k = 0;
  while (k < N_SHAPES && strcmp(name, shapes[k].name) != 0) k++;
  if (k == N_SHAPES) die("--shape: unknown shape '%s'", name);
  shape_on[k] = true;
}

/* The options both learner benchmarks take: --shape NAME, --batch B (1 to
 * max_batch) and --threads T, each repeatable. 1 when argv[*i] is one of
 * them (its value consumed), else 0. */
static inline int learner_opt(int argc, char **argv, int *i, bool *shape_on, bench_list_t *batch,
                              uint32_t max_batch, bench_list_t *threads) {
  const char *v;
  if ((v = bench_opt(argc, argv, i, "--shape")))
    shape_opt(v, shape_on);
  else if ((v = bench_opt(argc, argv, i, "--batch")))
    bench_list_add(batch, "--batch", bench_parse_u32("--batch", v, 1, max_batch));
  else if ((v = bench_opt(argc, argv, i, "--threads")))
    bench_list_add(threads, "--threads", bench_parse_u32("--threads", v, 1, RD_MLP_MAX_THREADS));
  else
    return 0;
  return 1;
}

/* The defaults of the learner benchmarks' options: every shape when no
 * --shape was given; batches 32, 256, 2048, 16384 (--quick: 32, 2048) when
 * no --batch was. */
static inline void learner_opts_default(bool *shape_on, bench_list_t *batch, bool quick) {
  bool any = false;
  for (size_t k = 0; k < N_SHAPES; k++) any = any || shape_on[k];
  if (!any)
    for (size_t k = 0; k < N_SHAPES; k++) shape_on[k] = true;
  static const uint32_t full[] = {32, 256, 2048, 16384}, brief[] = {32, 2048};
  if (quick)
    bench_list_default(batch, "--batch", brief, sizeof brief / sizeof brief[0]);
  else
    bench_list_default(batch, "--batch", full, sizeof full / sizeof full[0]);
}

#endif
