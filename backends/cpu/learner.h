/* learner.h - the hosted learner's gradient step on the CPU: DQN and DDPG.
 *
 * One train-step (papers/001 §II-A2): given a sampled batch of transitions
 * and their importance weights, compute the targets, the loss, the
 * gradients and the weight update, and return |TD error| per item so the
 * caller can write the priorities back (|delta| + epsilon is applied by the
 * table). Transitions come as Ape-X actors build them (papers/003): the
 * reward is the n-step return R = sum_{k<n} gamma^k r_k and the discount is
 * the bootstrap factor gamma^n, or 0 if the episode terminated within the n
 * steps. So the target is  y = R + discount * Q_target(s', a').
 *
 * DQN (Mnih et al. 2015; double DQN, van Hasselt et al. 2016): Q network
 * obs -> hidden... -> num_actions, identity output; a' = argmax_a Q(s', a)
 * (double: chosen by the online network, valued by the target network;
 * plain: max of the target network), Huber loss weighted by the IS
 * weights, priorities |y - Q(s, a)|.
 *
 * DDPG (Lillicrap et al. 2016): actor obs -> hidden... -> action_dim with
 * tanh output, scaled to [action_low, action_high]; critic
 * [obs, action] -> critic_hidden... -> 1, identity output. Critic: IS-
 * weighted MSE to y = R + discount * Q'(s', mu'(s')); actor: ascend
 * Q(s, mu(s)) (mean over the batch, not IS-weighted, as in the papers'
 * DDPG with prioritized replay); both targets by Polyak tau (or hard copy
 * every target_period steps). Priorities |y - Q(s, a)| from the critic
 * before its update. Both gradients are taken at the parameters the step
 * starts from (the actor's through the critic before its Adam step, as
 * OpenAI Baselines' DDPG does), then both Adam steps are applied.
 *
 * Order inside one step (both algorithms): forward targets, forward online,
 * loss, backward, clip the global gradient norm (if grad_clip > 0; each
 * network separately), Adam, then the target update. A step whose loss or
 * gradient norm is not finite changes no weights and returns RD_ERANGE (the
 * caller counts it and goes on; the priorities it returns are then
 * unusable). Every check comes before the first weight moves.
 *
 * Determinism: for a seed, the same batches give bit-identical weights,
 * priorities and stats for any config.threads, on a given build and CPU
 * (nn.h: threads split outputs, never sums). threads > 1 pays only at
 * batches of a few hundred rows and more, and only if that many cores are
 * free: each large product forks an OpenMP team, which waits for a
 * descheduled thread (nn.h: slow teams, OMP_WAIT_POLICY).
 *
 * Shards (the data-parallel step). A batch of n >= 2 RD_LEARNER_SHARD_ROWS
 * rows is cut into rd_learner_shards(c, n) shards of consecutive rows, a
 * number that depends on the networks' widths and n only. Each shard runs
 * the forward passes and then the backward passes on its rows in views of
 * the networks (nn.h: own activations and gradients, the networks'
 * parameters); the loss, |delta|
 * and the actor loss are computed over the whole batch, exactly as for an
 * unsharded batch (DDPG between the passes; DQN, whose loss gradient of a
 * row depends on that row alone, after them: a DQN shard writes its rows'
 * gradient itself and goes on to its backward pass); the shards' weight
 * gradients are summed in shard order; then clipping, Adam and the
 * targets as usual. With
 * config.threads > 1 the shards run on a thread team (team.h), else one
 * after another: the same arithmetic either way, so the determinism above
 * holds. Why: splitting each product's outputs over threads sends every
 * layer's activations across cores (a cache line round trip each) and
 * synchronises once per product; a shard keeps its rows
 * on one core and the step synchronises twice for DQN and three times for
 * DDPG (once more with the update in blocks, below). Smaller batches keep
 * the unsharded step, whose products may still use OpenMP threads. The
 * shards of a step on net[] (not on replicas, below) read its large
 * layers' weights packed once for the step by one team job (nn.h:
 * prepacked weights), not packed again by every shard and pass; they are
 * turned off after the passes, before the update moves the weights.
 *
 * Replicas. With a team of T threads and at most RD_LEARNER_REPLICATE_MAX
 * trainable parameters, the learner keeps T copies of its networks
 * (parameters, targets, Adam state): copy 0 is net[], and shard k reads
 * copy k % T. A team step ends in one job of T tasks, each of which sums
 * the shards' gradients into its copy and runs the norms, the clip, Adam
 * and the targets on it, with the same arithmetic as the one-copy path, so
 * the copies stay bit-identical. Why: with one copy, the core that updates
 * the weights owns their cache lines and every other core fetches them
 * back at the next forward pass; on a small network that traffic and the
 * serial update cost more than the update itself (docs/benchmarks.md,
 * "Replicas"). Larger networks update one copy, split over the team in
 * one block per thread, and so does every network while the team has idle work
 * (rd_learner_set_idle): a pipeline's sampler then uses the cycles a
 * second copy's update would take. Steps off the replicas (alone,
 * unsharded, with idle work) move net[] only, and the copies are synced
 * from it before the next step on them. Code that writes
 * net[]'s parameters or Adam state directly, not through these calls, must
 * call rd_learner_params_changed before the next step.
 *
 * Thread tuning. So that threads > 1 never makes a learner slower than one
 * thread, a learner with config.threads > 1 times its steps both ways: a
 * trial of at least RD_LEARNER_TUNE_STEPS steps and RD_LEARNER_TUNE_TRIAL_S
 * with the team, then one on the calling thread alone, keeps the mode with
 * the shorter mean period from one step's start to the next (so the
 * caller's time between steps counts: in the pipeline, a team that starves
 * the sampler of a core loses once the batches sampled ahead run out;
 * a period above RD_LEARNER_TUNE_GAP times the trial's mean so far is a
 * pause in the work, not counted), and repeats the trials after
 * RD_LEARNER_TUNE_HOLD_S of steps in the chosen mode (or when the batch
 * size changes). Steps, not wall time: a learner that works in bursts (a
 * pipeline's train requests, with pauses between them) would otherwise
 * start every burst with trials, a tenth of a second on the losing mode
 * each time; the periods across a pause are not counted, by the same rule
 * as in a trial. A close call
 * (the other mode within RD_LEARNER_TUNE_CLOSE of the winner's period) is
 * held for RD_LEARNER_TUNE_RETRY_S only: the first trials run while a
 * pipeline is still filling and the caches are cold, and a mode chosen
 * on a few percent then would run for the whole hold. When the learner
 * alone wins by more than that, the team gets a second trial, and the
 * round decides on it: a pipeline's first team trial runs while its
 * sampler thread fills the batches ahead at full speed and takes a core
 * from the team, and losing it put the loop on one thread for the whole
 * hold (docs/benchmarks.md). Why tune at all: where
 * another process holds the cores a team can be slower than one thread
 * (docs/benchmarks.md). Results do not depend on the mode (above), so
 * switching changes speed only.
 * l->tune.threads says which mode runs now.
 *
 * Allocation: rd_learner_init allocates everything for batches up to
 * max_batch; no other call allocates. Not thread-safe: the caller
 * serializes calls on one learner.
 */
#ifndef RD_LEARNER_H
#define RD_LEARNER_H

#define RD_LEARNER_TUNE_STEPS 16
#define RD_LEARNER_SHARD_ROWS 128u
#define RD_LEARNER_BASE_SHARDS 8u /* shards of RD_LEARNER_SHARD_ROWS rows, at most */
#define RD_LEARNER_MAX_SHARDS 32u
#define RD_LEARNER_WIDE_UNITS 64u  /* a hidden layer this wide: shards of at most WIDE_ROWS */
#define RD_LEARNER_WIDE_ROWS 512u
#define RD_LEARNER_REPLICATE_MAX 32768u /* trainable parameters; replicas below (above) */
#define RD_LEARNER_TUNE_HOLD_S 2.0
#define RD_LEARNER_TUNE_CLOSE 0.10 /* within 10%: a close call */
#define RD_LEARNER_TUNE_RETRY_S 0.2
#define RD_LEARNER_TUNE_TRIAL_S 0.1
#define RD_LEARNER_TUNE_GAP 8.0 /* a period above 8x the trial's mean is a pause, not counted */

#include <stddef.h>
#include <stdint.h>

#include "nn.h"
#include "rd_error.h"
#include "rd_nn_spec.h"

typedef enum {
  RD_ALGO_DQN = 1,
  RD_ALGO_DDPG = 2,
} rd_algo_t;

#define RD_LEARNER_MAX_HIDDEN (RD_NN_MAX_LAYERS - 1)

typedef struct {
  rd_algo_t algo;
  uint32_t obs_dim;        /* 1..RD_NN_MAX_UNITS */
  uint32_t num_actions;    /* DQN: 2..RD_NN_MAX_UNITS (actions are int32 in [0, n)) */
  uint32_t action_dim;     /* DDPG: 1..RD_NN_MAX_UNITS */
  uint32_t n_hidden;       /* DQN's Q network, DDPG's actor: 0..RD_LEARNER_MAX_HIDDEN */
  uint32_t hidden[RD_LEARNER_MAX_HIDDEN];
  uint32_t n_critic_hidden; /* DDPG's critic */
  uint32_t critic_hidden[RD_LEARNER_MAX_HIDDEN];
  rd_nn_act_t hidden_act;  /* RD_NN_RELU (default) or RD_NN_TANH */
  double lr;               /* DQN, DDPG actor: Adam learning rate > 0 */
  double critic_lr;        /* DDPG critic */
  uint32_t target_period;  /* > 0: hard copy every this many steps; 0: Polyak with tau */
  double tau;              /* (0, 1] */
  double grad_clip;        /* global-norm clip per network; 0 = none */
  double huber_delta;      /* DQN Huber threshold > 0 */
  int double_dqn;          /* DQN: 1 double-DQN targets (default), 0 plain max */
  float action_low, action_high; /* DDPG: action range, low < high */
  uint32_t max_batch;      /* largest batch, 1..RD_MLP_MAX_BATCH */
  uint64_t seed;           /* weight initialisation */
  uint32_t threads;        /* OpenMP threads for large products and loops, 0..RD_MLP_MAX_THREADS */
} rd_learner_config_t;

/* One batch of n transitions, row-major. Pointers are borrowed. */
typedef struct {
  size_t n;
  const float *obs;        /* n x obs_dim */
  const int32_t *action_i; /* DQN: n actions in [0, num_actions) */
  const float *action_f;   /* DDPG: n x action_dim, in [action_low, action_high] */
  const float *reward;     /* n: the n-step return */
  const float *discount;   /* n: bootstrap factor (gamma^n, or 0 at termination) */
  const float *next_obs;   /* n x obs_dim */
  const float *weights;    /* n IS weights >= 0, or NULL for all 1 */
} rd_batch_t;

typedef struct {
  double loss;        /* DQN: Huber loss; DDPG: critic loss (both IS-weighted) */
  double actor_loss;  /* DDPG: -mean Q(s, mu(s)); DQN: 0 */
  double td_abs_mean; /* mean |delta| over the batch */
  double td_abs_max;
  double grad_norm;   /* before clipping (DDPG: the critic's) */
} rd_step_stats_t;

typedef struct rd_learner {
  rd_learner_config_t config;
  uint64_t steps;     /* successful steps */
  /* DQN: q, q_target. DDPG: actor, actor_target, critic, critic_target. */
  rd_mlp_t net[4];
  int n_nets;
  void *scratch;      /* implementation-private buffers for max_batch */
  struct {            /* thread tuning (above); unused at config.threads <= 1 */
    uint32_t threads; /* the networks' thread count now: config.threads or 1 */
    uint32_t phase;   /* 0: trial with the team, 1: trial alone, 2: holding */
    uint32_t second;  /* 1: the round's team trial now running is its second */
    uint32_t count;   /* steps in this phase */
    size_t batch;     /* the batch size the trial measured */
    double t_team, t_alone; /* the trials' mean period, seconds */
    double sum, trial_start; /* the running trial's periods and start */
    double hold, held; /* the hold's length, and its steps' periods so far (s) */
    double prev_t0;   /* the last step's start */
    int prev_mode;    /* the last step was a trial's: 1 team, 2 alone; 3 held; else 0 */
  } tune;
} rd_learner_t;

/* Defaults: DQN, relu, lr 1e-3, critic_lr 1e-3, target_period 0, tau 0.005,
 * grad_clip 10, huber_delta 1, double_dqn 1, action range [-1, 1],
 * max_batch 256, seed 0, threads 1; dims and hidden sizes 0 (must be set). */
void rd_learner_config_default(rd_learner_config_t *c);

/* RD_EINVAL with a message naming the bad setting. */
int rd_learner_config_validate(const rd_learner_config_t *c, rd_error_t *err);

/* The checks rd_learner_step makes of a batch for a learner of config c
 * (every backend's learner makes the same ones, with the same messages):
 * RD_EINVAL naming the bad field and row (missing array, non-finite value,
 * discount outside [0, 1], negative IS weight, action out of range), or
 * RD_ETOOBIG above max_batch. */
int rd_learner_batch_validate(const rd_learner_config_t *c, const rd_batch_t *b, rd_error_t *err);

/* Validate, allocate, initialise online networks from seed (distinct
 * streams per network: the Q network or actor from Philox draw 2^63 - 1 of
 * the seed, the critic from draw 2^63 - 2, as rd_mlp_init's seed) and copy
 * them into the targets. RD_EINVAL, RD_ENOMEM; l is zeroed on failure (and
 * rd_learner_free on it is safe). */
int rd_learner_init(rd_learner_t *l, const rd_learner_config_t *c, rd_error_t *err);
void rd_learner_free(rd_learner_t *l);

/* The caller had no work for the learner since its last step (an idle
 * pipeline, a pause between requests or benchmark repetitions): the time
 * until the next step is nobody's speed, so the thread tuning (above) does
 * not count it. Cheap; learner thread only. */
void rd_learner_tune_pause(rd_learner_t *l);

/* Offer the idle time of the learner's team workers to fn(arg) (team.h
 * rd_team_set_idle; NULL: none). A learner without a team (one thread, or
 * a max_batch of one shard) has no workers: nothing happens. Returns when
 * no worker runs the previous fn any more. */
void rd_learner_set_idle(rd_learner_t *l, int (*fn)(void *arg), void *arg);

/* One gradient step on b. td_abs (n floats, may be NULL) receives |delta|;
 * st (may be NULL) the step's figures.
 * Errors: RD_EINVAL (n == 0, a missing array, an action out of range, a
 * NaN/inf input, a discount outside [0, 1], a negative weight: nothing
 * changes, td_abs and st included; the message names the array, row and
 * column), RD_ETOOBIG (n > max_batch), RD_ERANGE (non-finite loss or
 * gradients: no weight, Adam moment or step count changed; td_abs and st
 * hold what was computed). */
int rd_learner_step(rd_learner_t *l, const rd_batch_t *b, float *td_abs, rd_step_stats_t *st,
                    rd_error_t *err);

/* The policy network actors run: DQN's online Q network (greedy action =
 * argmax), DDPG's online actor (tanh output in [-1, 1]; the actor maps it
 * to [action_low, action_high] as low + (y + 1) / 2 * (high - low)). */
const rd_mlp_t *rd_learner_policy(const rd_learner_t *l);

/* Shards of a step of n rows (above): 1 below 2 RD_LEARNER_SHARD_ROWS,
 * else n / RD_LEARNER_SHARD_ROWS up to RD_LEARNER_BASE_SHARDS; past that
 * many shards of RD_LEARNER_WIDE_ROWS, networks with a hidden layer of at least
 * RD_LEARNER_WIDE_UNITS get shards of at most RD_LEARNER_WIDE_ROWS rows,
 * up to RD_LEARNER_MAX_SHARDS: a shard's activations then stay within a
 * core's L2 through its passes. Narrow networks' activations fit anyway,
 * and more shards only add to the gradients' reduction (measured in
 * docs/benchmarks.md). */
uint32_t rd_learner_shards(const rd_learner_config_t *c, size_t n);

/* Bytes of the policy in the flat format (rd_nn_spec.h), and the writer. */
size_t rd_learner_policy_bytes(const rd_learner_t *l);
int rd_learner_policy_save(const rd_learner_t *l, void *buf, size_t cap, size_t *written,
                           rd_error_t *err);

/* The learner's whole training state, for checkpoints: every network's
 * parameters (online and target), Adam moments and step counts, and the
 * learner's step count (nn.h rd_mlp_state_*). Loading it into a learner of
 * the same algorithm and shapes and giving it the same batches gives
 * bit-identical weights, priorities and stats to never having saved (on
 * the same build and CPU); hyper-parameters are the config's, not saved.
 * Check and load refuse another algorithm, shape or a damaged buffer
 * (RD_EINVAL naming it) and load then changes nothing. */
size_t rd_learner_state_bytes(const rd_learner_t *l);
int rd_learner_state_save(const rd_learner_t *l, void *buf, size_t cap, size_t *written,
                          rd_error_t *err);
int rd_learner_state_check(const rd_learner_t *l, const void *buf, size_t len, rd_error_t *err);
int rd_learner_state_load(rd_learner_t *l, const void *buf, size_t len, rd_error_t *err);

/* net[] was written directly (above: Replicas): the copies are synced from
 * it before the next team step. */
void rd_learner_params_changed(rd_learner_t *l);

/* The same format for a learner whose state lives elsewhere (a device's
 * buffers), as host arrays per network (the index of net[]: 0 Q / actor,
 * 1 its target, 2 critic, 3 critic target): params[k] (that network's
 * parameter count, rd_nn_spec_params of its spec), and for the online
 * networks (even k) adam_m[k], adam_v[k] and adam_t[k]; steps. So every
 * backend's checkpoint loads on every other of the same config. A CPU
 * learner of config c at batch 1 carries the bytes (config c as
 * rd_learner_init takes it). load_arrays checks the buffer whole before it
 * writes an array: a bad one changes nothing. */
typedef struct {
  float *params[4], *adam_m[4], *adam_v[4];
  uint64_t adam_t[4];
  uint64_t steps;
} rd_learner_state_arrays_t;
size_t rd_learner_state_bytes_for(const rd_learner_config_t *c);
int rd_learner_state_save_arrays(const rd_learner_config_t *c, const rd_learner_state_arrays_t *a,
                                 void *buf, size_t cap, size_t *written, rd_error_t *err);
int rd_learner_state_load_arrays(const rd_learner_config_t *c, const void *buf, size_t len,
                                 rd_learner_state_arrays_t *a, rd_error_t *err);

/* The network shapes a config implies (for the mapper, benchmarks and the
 * FPGA model): the policy and, for DDPG, the critic. */
int rd_learner_policy_spec(const rd_learner_config_t *c, rd_nn_spec_t *out, rd_error_t *err);
int rd_learner_critic_spec(const rd_learner_config_t *c, rd_nn_spec_t *out, rd_error_t *err);

#endif
