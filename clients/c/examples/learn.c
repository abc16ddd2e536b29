/* learn.c - replayd-learn: Ape-X style actors for replayd's hosted learner.
 *
 *   replayd-learn register --env cartpole|pendulum [--algo dqn|ddpg] [HYPERPARAMETERS]
 *   replayd-learn actor    --id ID --token-file F --env E --actor-index i --num-actors N ...
 *   replayd-learn eval     --id ID --token-file F --env E [--episodes 100] [--json]
 *   replayd-learn train    --id ID --token-file F [--steps N] [--calls M]
 *
 * The daemon owns the replay table and the learner (DQN or DDPG, trained
 * in the server); this program is everything on the other side of the
 * wire (papers/003, Algorithm 1): actors that pull the policy's weights
 * every few hundred steps (GetWeights with the version they have), run the
 * network themselves (rdc_policy_forward), explore (per-actor epsilon or
 * Gaussian action noise), build n-step rows (nstep.h) and stream them
 * (Insert). `eval` plays greedy episodes with the latest weights; `train`
 * drives a workload registered without continuous mode (TrainStep).
 *
 * Rate. Continuous mode trains at samples_per_insert sampled items per
 * inserted row as long as the learner keeps up; actors on these tiny
 * environments produce rows far faster than any learner consumes them, so
 * an unthrottled actor would fill the table with stale-policy data. Each
 * actor therefore checks the learner's progress (DescribeWorkload) when it
 * pulls weights and waits while the rows inserted exceed what the learner
 * has consumed at that ratio by more than --max-lag rows (Reverb's
 * samples-per-insert rate limiter, kept on the client side because the
 * server never blocks an insert). A learner that makes no progress for
 * --stall-timeout seconds ends the actor with an error instead of a hang.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_args.h"
#include "json_writer.h"
#include "learn_task.h"
#include "nstep.h"
#include "replayctl_cli.h" /* rctl_read_token_file */
#include "replayd_client.h"

static const char *prog = "replayd-learn";

#define MAX_WEIGHTS_BYTES (64u << 20) /* the daemon's default message limit */
#define MAX_EVAL_EPISODES 100000u

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f) {
  fprintf(f,
      "usage: replayd-learn COMMAND [OPTIONS]\n"
      "\n"
      "Actors, evaluation and training control for replayd's hosted learner.\n"
      "\n"
      "Commands:\n"
      "  register  register a workload for --env (prints \"ID TOKEN\")\n"
      "  actor     play the environment with the served policy, stream n-step rows\n"
      "  eval      play greedy episodes with the latest weights, print the mean return\n"
      "  train     run TrainStep calls (workloads with --samples-per-insert 0)\n"
      "\n"
      "Common options:\n"
      "  --server HOST:PORT       server (default $REPLAYD_SERVER, else 127.0.0.1:50051)\n"
      "  --timeout S              connect timeout and per-call deadline (default 10)\n"
      "  --wait                   wait for the server instead of failing at once\n"
      "  --id ID                  the workload (actor, eval, train)\n"
      "  --token-file F           file holding its token (default: $REPLAYD_TOKEN)\n"
      "  --env cartpole|pendulum  the environment (register, actor, eval)\n"
      "  --seed S                 seed (register: the workload's; actor/eval: the environment's)\n"
      "\n"
      "register:\n"
      "  --algo dqn|ddpg          default: dqn for cartpole, ddpg for pendulum\n"
      "  --name NAME  --capacity N  --alpha A  --beta B  --max-batch N\n"
      "  --hidden W,W,...         hidden widths (Q network / DDPG actor)\n"
      "  --critic-hidden W,...    DDPG critic (default: --hidden)\n"
      "  --activation relu|tanh   --batch-size N  --lr X  --critic-lr X  --gamma X\n"
      "  --target-update-period N (hard copies; replaces --tau)  --tau X  --grad-clip X\n"
      "  --huber-delta X  --double-dqn 0|1  --num-actions K (dqn; pendulum default 5)\n"
      "  --samples-per-insert X   continuous training ratio (0 = only TrainStep)\n"
      "  --D N                    relaxation depth (alias --relaxation-depth)\n"
      "  --min-size N             items before training starts\n"
      "\n"
      "actor:\n"
      "  --actor-index i --num-actors N   this actor's place (Ape-X epsilon schedule)\n"
      "  --steps S                environment steps (default 0 = until SIGTERM/SIGINT)\n"
      "  --pull-every N           pull weights every N steps (default 400)\n"
      "  --n-step n               n-step rows (default 3)\n"
      "  --epsilon E              dqn: base epsilon, actor i uses E^(1+7i/(N-1)) (default 0.4)\n"
      "  --noise S                ddpg: Gaussian noise, std S * half the action range (default 0.1)\n"
      "  --initial-priorities     dqn: send |TD error| of the actor's Q network with the rows\n"
      "                           (default: none, the server gives new rows its max priority)\n"
      "  --batch B                rows per insert message (default 256)\n"
      "  --max-lag R              wait while inserted rows exceed the learner's consumption by\n"
      "                           more than R rows (default 5000; 0 = never wait)\n"
      "  --stall-timeout S        give up after S s without learner progress (default 60)\n"
      "  --log FILE               episode lines go here (default stdout)\n"
      "\n"
      "eval:\n"
      "  --episodes N             episodes (default 100)\n"
      "  --json                   one JSON line: mean/std/min/max return, weight version,\n"
      "                           env steps (the workload's inserts), train steps\n"
      "\n"
      "train:\n"
      "  --steps N                steps per TrainStep call (default 1000)\n"
      "  --calls M                calls (default 1)\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry '%s --help'.\n", prog);
  return 2;
}

/* ------------------------------------------------------------------ */
/* Options every command shares                                        */
/* ------------------------------------------------------------------ */

typedef struct {
  ex_conn_t conn; /* --server, --timeout, --wait */
  const char *id;
  const char *token_file;
  char token[RDC_TOKEN_MAX];
  int have_env;
  lt_env_t env;
  uint64_t seed;
  int have_seed;
} common_t;

static void common_init(common_t *co) {
  memset(co, 0, sizeof *co);
  ex_conn_init(&co->conn);
}

/* 1 if argv[*i] was a common option (consumed), 0 if not. Exits 2 on a
 * bad value. */
static int common_opt(int argc, char **argv, int *i, common_t *co) {
  const char *v;
  if (ex_conn_opt(&co->conn, 0, argc, argv, i, prog)) {
    return 1;
  } else if ((v = ex_opt(argc, argv, i, "--id", prog))) {
    co->id = v;
  } else if ((v = ex_opt(argc, argv, i, "--token-file", prog))) {
    co->token_file = v;
  } else if ((v = ex_opt(argc, argv, i, "--env", prog))) {
    if (lt_env_parse(v, &co->env) != 0)
      exit(usage_error("--env is cartpole or pendulum, not \"%s\"", v));
    co->have_env = 1;
  } else if ((v = ex_opt(argc, argv, i, "--seed", prog))) {
    co->seed = ex_u64(v, "--seed", 0, UINT64_MAX, prog);
    co->have_seed = 1;
  } else {
    return 0;
  }
  return 1;
}

/* --id and the token (file or $REPLAYD_TOKEN); 0 or exit status 2. */
static int need_workload(common_t *co) {
  if (co->id == NULL) return usage_error("%s needs --id ID", "this command");
  if (co->token_file != NULL) {
    char msg[512];
    if (rctl_read_token_file(co->token_file, co->token, sizeof co->token, msg, sizeof msg) != 0) {
      fprintf(stderr, "%s: %s\n", prog, msg);
      return 2;
    }
  } else if (ex_env("REPLAYD_TOKEN") != NULL) {
    if (strlen(ex_env("REPLAYD_TOKEN")) >= sizeof co->token)
      return usage_error("%s is too long", "$REPLAYD_TOKEN");
    snprintf(co->token, sizeof co->token, "%s", ex_env("REPLAYD_TOKEN"));
  } else {
    return usage_error("%s needs --token-file F (or $REPLAYD_TOKEN)", "this command");
  }
  return 0;
}

static int connect_client(const common_t *co, rdc_client_t **c) {
  rdc_error_t e;
  if (ex_connect(&co->conn, c, &e) != RDC_OK) return ex_fail(prog, "connect", &e);
  return 0;
}

/* Describe the workload and derive its task for co->env. The workload is
 * heap-allocated (~13 KiB); the caller frees it. */
static int load_task(rdc_client_t *c, const common_t *co, lt_task_t *task, rdc_workload_t **out) {
  rdc_workload_t *w = malloc(sizeof *w);
  if (w == NULL) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return 1;
  }
  rdc_error_t e;
  if (rdc_describe(c, co->id, w, &e) != RDC_OK) {
    free(w);
    return ex_fail(prog, "describe", &e);
  }
  char msg[512];
  if (lt_task_from_spec(task, co->env, &w->spec, msg, sizeof msg) != 0) {
    fprintf(stderr, "%s: workload %s does not fit --env %s: %s\n", prog, co->id,
            lt_env_name(co->env), msg);
    free(w);
    return 1;
  }
  *out = w;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Weights                                                             */
/* ------------------------------------------------------------------ */

typedef struct {
  uint8_t *buf;
  size_t cap;
  uint64_t version; /* of the weights in policy; 0 = none yet */
  rdc_policy_t policy;
} weights_t;

/* Fetch weights newer than w->version into w->policy (a failed load keeps
 * the previous ones). The buffer grows to what the server says it needs,
 * up to MAX_WEIGHTS_BYTES. */
static int pull_weights(rdc_client_t *c, const common_t *co, const lt_task_t *task,
                        weights_t *w) {
  rdc_error_t e;
  /* The version may move between a too-small answer and the retry, and
   * with it the size: a few tries. */
  for (int attempt = 0; attempt < 4; attempt++) {
    uint64_t version;
    size_t len;
    int rc = rdc_get_weights(c, co->id, co->token, w->version, &version, w->buf, w->cap, &len, &e);
    if (rc == RDC_ETOOSMALL) {
      if (len > MAX_WEIGHTS_BYTES) {
        fprintf(stderr, "%s: the weights are %zu bytes; this program takes at most %u\n", prog,
                len, MAX_WEIGHTS_BYTES);
        return 1;
      }
      uint8_t *nb = realloc(w->buf, len);
      if (nb == NULL) {
        fprintf(stderr, "%s: out of memory for %zu bytes of weights\n", prog, len);
        return 1;
      }
      w->buf = nb;
      w->cap = len;
      continue;
    }
    if (rc != RDC_OK) return ex_fail(prog, "get weights", &e);
    if (len == 0) return 0; /* nothing newer */
    if (rdc_policy_load(&w->policy, w->buf, len, &e) != RDC_OK)
      return ex_fail(prog, "load the served weights", &e);
    char msg[256];
    if (lt_check_policy(task, &w->policy, msg, sizeof msg) != 0) {
      fprintf(stderr, "%s: %s\n", prog, msg);
      return 1;
    }
    w->version = version;
    return 0;
  }
  fprintf(stderr, "%s: the weights kept changing size while being fetched\n", prog);
  return 1;
}

static void weights_free(weights_t *w) {
  free(w->buf);
  rdc_policy_free(&w->policy);
}

/* ------------------------------------------------------------------ */
/* register                                                            */
/* ------------------------------------------------------------------ */

/* "64,64" -> widths; exits 2 on a bad list. */
static void parse_widths(const char *v, const char *name, uint32_t *n, uint32_t *out) {
  *n = 0;
  const char *p = v;
  if (*p == '\0') return; /* "" = no hidden layers */
  for (;;) {
    char *end;
    errno = 0;
    unsigned long x = strtoul(p, &end, 10);
    if (end == p || errno != 0 || x == 0 || x > 65536 || p[0] == '-' ||
        (*end != ',' && *end != '\0') || *n >= RDC_MAX_HIDDEN) {
      fprintf(stderr, "%s: %s needs up to %d widths in [1, 65536] separated by commas, not "
              "\"%s\"\n", prog, name, RDC_MAX_HIDDEN, v);
      exit(2);
    }
    out[(*n)++] = (uint32_t)x;
    if (*end == '\0') break;
    p = end + 1;
  }
}

/* A flag that sets an optional number: *has = 1 and *val, in [lo, hi]. */
typedef struct {
  const char *flag;
  int *has;
  double *val;
  double lo, hi;
} num_flag_t;

/* 1 if argv[*i] is one of flags[0..n) (its value set), else 0. Exits 2 on
 * a bad value. */
static int num_flag_opt(int argc, char **argv, int *i, const num_flag_t *flags, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const char *v = ex_opt(argc, argv, i, flags[k].flag, prog);
    if (v == NULL) continue;
    *flags[k].has = 1;
    *flags[k].val = ex_double(v, flags[k].flag, flags[k].lo, flags[k].hi, prog);
    return 1;
  }
  return 0;
}

static int cmd_register(int argc, char **argv) {
  common_t co;
  common_init(&co);
  const char *algo_s = NULL, *name = NULL;
  /* Flags are applied over the task's defaults, so they are collected
   * first: `over` holds the flags given, has_* style. (~4 KiB each: the
   * stack is the simplest owner.) */
  rdc_spec_t spec_s, over_s;
  rdc_workload_t w_s;
  rdc_spec_t *spec = &spec_s, *over = &over_s;
  rdc_workload_t *w = &w_s;
  rdc_spec_init(over);
  rdc_learner_spec_t *o = &over->learner;
  int set_hidden = 0, set_critic = 0, set_batch = 0, set_tup = 0, set_nact = 0, set_spi = 0,
      set_d = 0, set_min = 0, set_cap = 0, set_maxb = 0, set_act = 0;
  const num_flag_t nums[] = {
      {"--alpha", &over->has_alpha, &over->alpha, 0, 100},
      {"--beta", &over->has_beta, &over->beta, 0, 1},
      {"--lr", &o->has_lr, &o->lr, 0, 1},
      {"--critic-lr", &o->has_critic_lr, &o->critic_lr, 0, 1},
      {"--gamma", &o->has_gamma, &o->gamma, 0, 1},
      {"--tau", &o->has_tau, &o->tau, 0, 1},
      {"--grad-clip", &o->has_grad_clip, &o->grad_clip, 0, 1e12},
      {"--huber-delta", &o->has_huber_delta, &o->huber_delta, 0, 1e12},
  };
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (common_opt(argc, argv, &i, &co)) continue;
    if (num_flag_opt(argc, argv, &i, nums, sizeof nums / sizeof nums[0])) continue;
    if ((v = ex_opt(argc, argv, &i, "--algo", prog))) algo_s = v;
    else if ((v = ex_opt(argc, argv, &i, "--name", prog))) name = v;
    else if ((v = ex_opt(argc, argv, &i, "--capacity", prog)))
      set_cap = 1, over->capacity = (uint32_t)ex_u64(v, "--capacity", 1, UINT32_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--max-batch", prog)))
      set_maxb = 1, over->max_batch = (uint32_t)ex_u64(v, "--max-batch", 1, UINT32_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--hidden", prog)))
      set_hidden = 1, parse_widths(v, "--hidden", &o->n_hidden, o->hidden);
    else if ((v = ex_opt(argc, argv, &i, "--critic-hidden", prog)))
      set_critic = 1, parse_widths(v, "--critic-hidden", &o->n_critic_hidden, o->critic_hidden);
    else if ((v = ex_opt(argc, argv, &i, "--activation", prog))) {
      if (strcmp(v, "relu") != 0 && strcmp(v, "tanh") != 0)
        return usage_error("--activation is relu or tanh, not \"%s\"", v);
      set_act = 1;
      snprintf(o->activation, sizeof o->activation, "%s", v);
    } else if ((v = ex_opt(argc, argv, &i, "--batch-size", prog)))
      set_batch = 1, o->batch_size = (uint32_t)ex_u64(v, "--batch-size", 1, UINT32_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--target-update-period", prog)))
      set_tup = 1, o->target_update_period =
                       (uint32_t)ex_u64(v, "--target-update-period", 0, UINT32_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--double-dqn", prog)))
      o->has_double_dqn = 1, o->double_dqn = (int)ex_u64(v, "--double-dqn", 0, 1, prog);
    else if ((v = ex_opt(argc, argv, &i, "--num-actions", prog)))
      set_nact = 1, o->num_actions = (uint32_t)ex_u64(v, "--num-actions", 2, LT_MAX_ACTIONS, prog);
    else if ((v = ex_opt(argc, argv, &i, "--samples-per-insert", prog)))
      set_spi = 1, o->samples_per_insert = ex_double(v, "--samples-per-insert", 0, 1e6, prog);
    else if ((v = ex_opt(argc, argv, &i, "--D", prog)) ||
             (v = ex_opt(argc, argv, &i, "--relaxation-depth", prog)))
      set_d = 1, o->relaxation_depth = (uint32_t)ex_u64(v, "--D", 0, UINT32_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--min-size", prog)))
      set_min = 1, o->min_size = (uint32_t)ex_u64(v, "--min-size", 0, UINT32_MAX, prog);
    else
      return usage_error("unknown register argument %s", argv[i]);
  }
  if (!co.have_env) return usage_error("%s needs --env cartpole|pendulum", "register");
  lt_algo_t algo = lt_default_algo(co.env);
  if (algo_s != NULL && lt_algo_parse(algo_s, &algo) != 0)
    return usage_error("--algo is dqn or ddpg, not \"%s\"", algo_s);
  lt_task_t task;
  char msg[256];
  if (lt_task_init(&task, co.env, algo, algo == LT_DQN ? o->num_actions : 0, msg, sizeof msg) !=
      0) {
    fprintf(stderr, "%s: %s\n", prog, msg);
    return 2;
  }
  if (algo == LT_DDPG && set_nact) return usage_error("%s is for dqn", "--num-actions");

  lt_default_spec(&task, co.have_seed ? co.seed : 1, spec);
  rdc_learner_spec_t *l = &spec->learner;
  if (name != NULL) {
    if (strlen(name) >= sizeof spec->name) return usage_error("--name \"%s\" is too long", name);
    snprintf(spec->name, sizeof spec->name, "%s", name);
  }
  if (set_cap) spec->capacity = over->capacity;
  if (set_maxb) spec->max_batch = over->max_batch;
  if (over->has_alpha) spec->alpha = over->alpha;
  if (over->has_beta) spec->beta = over->beta;
  if (set_hidden) {
    l->n_hidden = o->n_hidden;
    memcpy(l->hidden, o->hidden, sizeof l->hidden);
  }
  if (set_critic) {
    l->n_critic_hidden = o->n_critic_hidden;
    memcpy(l->critic_hidden, o->critic_hidden, sizeof l->critic_hidden);
  }
  if (set_act) memcpy(l->activation, o->activation, sizeof l->activation);
  if (set_batch) l->batch_size = o->batch_size;
#define OVERRIDE(x)                                                                            \
  do {                                                                                         \
    if (o->has_##x) l->has_##x = 1, l->x = o->x;                                              \
  } while (0)
  OVERRIDE(lr);
  OVERRIDE(critic_lr);
  OVERRIDE(gamma);
  OVERRIDE(tau);
  OVERRIDE(grad_clip);
  OVERRIDE(huber_delta);
  OVERRIDE(double_dqn);
#undef OVERRIDE
  if (set_tup) {
    l->target_update_period = o->target_update_period;
    /* Hard copies replace Polyak averaging; the server refuses both. */
    if (l->target_update_period > 0 && !o->has_tau) l->has_tau = 0;
  }
  if (set_spi) l->samples_per_insert = o->samples_per_insert;
  if (set_d) l->relaxation_depth = o->relaxation_depth;
  if (set_min) l->min_size = o->min_size;
  /* The table must hold what the learner waits for. */
  if (l->min_size > spec->capacity) l->min_size = spec->capacity;

  rdc_client_t *c;
  if (connect_client(&co, &c) != 0) return 1;
  rdc_error_t e;
  int rc = 0;
  if (rdc_register(c, spec, w, &e) != RDC_OK)
    rc = ex_fail(prog, "register", &e);
  else
    printf("%s %s\n", w->id, w->token);
  rdc_close(c);
  if (fflush(stdout) != 0) {
    fprintf(stderr, "%s: cannot write the output\n", prog);
    return 1;
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* actor                                                               */
/* ------------------------------------------------------------------ */

typedef struct {
  uint64_t index, n_actors, steps, pull_every, n_step, batch, max_lag;
  double epsilon, noise, stall_timeout;
  int initial_priorities;
  const char *log_path;
} actor_opts_t;

/* Everything an actor holds; actor_free releases whatever was set up. */
typedef struct {
  const common_t *co;
  const actor_opts_t *o;
  rdc_client_t *c;
  rdc_workload_t *wl;   /* the description; reused as scratch by the rate limit */
  lt_task_t task;
  weights_t w;
  rdc_insert_stream_t *st;
  nstep_t ns;
  nstep_batch_t batch;
  double *prio;         /* batch.cap priorities */
  FILE *log;
  /* rate limit (file comment) */
  double spi, batch_size, min_size;
  uint64_t waits;       /* times the actor waited for the learner */
  double waited_s;
} actor_t;

static void actor_free(actor_t *a) {
  if (a->st != NULL) rdc_insert_stream_cancel(a->st);
  nstep_free(&a->ns);
  nstep_batch_free(&a->batch);
  free(a->prio);
  weights_free(&a->w);
  free(a->wl);
  if (a->c != NULL) rdc_close(a->c);
  if (a->log != NULL && a->log != stdout) fclose(a->log);
}

static int actor_flush(actor_t *a) {
  nstep_batch_t *b = &a->batch;
  if (b->count == 0) return 0;
  const size_t n = b->count, d = b->obs_dim;
  const double *prio = NULL;
  if (a->o->initial_priorities && a->w.version > 0 &&
      lt_dqn_priorities(&a->task, &a->w.policy, n, b->obs, (const int32_t *)b->action,
                        b->reward, b->next_obs, b->discount, a->prio) == 0)
    prio = a->prio;
  rdc_column_t cols[LT_N_FIELDS] = {
      [LT_F_OBS] = {b->obs, n * d * sizeof(float)},
      [LT_F_ACTION] = {b->action, n * b->action_bytes},
      [LT_F_REWARD] = {b->reward, n * sizeof(float)},
      [LT_F_NEXT_OBS] = {b->next_obs, n * d * sizeof(float)},
      [LT_F_DISCOUNT] = {b->discount, n * sizeof(float)},
  };
  rdc_error_t e;
  if (rdc_insert_stream_write(a->st, (uint32_t)n, cols, LT_N_FIELDS, prio, &e) != RDC_OK)
    return ex_fail(prog, "insert", &e);
  b->count = 0;
  return 0;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Wait while the rows inserted run ahead of the learner (file comment). */
static int actor_throttle(actor_t *a) {
  if (a->spi <= 0 || a->o->max_lag == 0) return 0;
  double t0 = rd_clock_now(), t_progress = t0;
  uint64_t last_steps = UINT64_MAX;
  int waited = 0;
  while (!stop_requested) {
    rdc_error_t e;
    if (rdc_describe(a->c, a->co->id, a->wl, &e) != RDC_OK)
      return ex_fail(prog, "describe", &e);
    if (!a->wl->has_learner_counters) break; /* a server without the counters: no limit */
    double consumed = (double)a->wl->learner.steps * a->batch_size / a->spi;
    double lag = (double)a->wl->counters.inserts - a->min_size - consumed;
    if (lag <= (double)a->o->max_lag) break;
    double now = rd_clock_now();
    if (a->wl->learner.steps != last_steps) {
      last_steps = a->wl->learner.steps;
      t_progress = now;
    } else if (now - t_progress > a->o->stall_timeout) {
      fprintf(stderr, "%s: the learner took no step for %.0f s (%" PRIu64 " steps, %" PRIu64
              " rows inserted, %.0f rows ahead of it); is the workload in continuous mode and "
              "the server training?\n", prog, now - t_progress, a->wl->learner.steps,
              a->wl->counters.inserts, lag);
      return 1;
    }
    waited = 1;
    sleep_s(0.005);
  }
  if (waited) {
    a->waits++;
    a->waited_s += rd_clock_now() - t0;
  }
  return 0;
}

/* Connect, read the workload, allocate. 0 or an exit status. */
static int actor_setup(actor_t *a) {
  const actor_opts_t *o = a->o;
  a->log = stdout;
  if (o->log_path != NULL && (a->log = fopen(o->log_path, "a")) == NULL) {
    fprintf(stderr, "%s: cannot open the log %s: %s\n", prog, o->log_path, strerror(errno));
    return 1;
  }
  if (connect_client(a->co, &a->c) != 0) return 1;
  if (load_task(a->c, a->co, &a->task, &a->wl) != 0) return 1;
  if (o->initial_priorities && a->task.algo != LT_DQN) {
    fprintf(stderr, "%s: --initial-priorities needs dqn: a ddpg actor has no critic to compute "
            "|TD error| with (its rows get the server's max priority)\n", prog);
    return 2;
  }
  const rdc_learner_spec_t *ls = &a->wl->spec.learner;
  a->spi = ls->samples_per_insert;
  a->batch_size = ls->batch_size;
  a->min_size = ls->min_size ? ls->min_size : ls->batch_size;
  /* The rows carry gamma^m themselves, so the actor uses the learner's gamma. */
  double gamma = ls->has_gamma ? ls->gamma : 0.99;
  const uint32_t ab = lt_action_bytes(&a->task);
  a->prio = malloc(o->batch * sizeof *a->prio);
  if (a->prio == NULL ||
      nstep_init(&a->ns, (uint32_t)o->n_step, gamma, a->task.obs_dim, ab) != 0 ||
      nstep_batch_init(&a->batch, o->batch, a->task.obs_dim, ab) != 0) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return 1;
  }
  if (pull_weights(a->c, a->co, &a->task, &a->w) != 0) return 1;
  rdc_error_t e;
  if (rdc_insert_stream_open(a->c, a->co->id, a->co->token, &a->st, &e) != RDC_OK)
    return ex_fail(prog, "open the insert stream", &e);
  return 0;
}

/* The actor's loop (papers/003, Algorithm 1): act, step, build rows,
 * send them B at a time, pull weights and respect the rate limit every
 * pull_every steps; until the step budget or a signal. */
static int actor_play(actor_t *a) {
  const actor_opts_t *o = a->o;
  const common_t *co = a->co;
  const lt_task_t *task = &a->task;
  double eps = lt_apex_epsilon(o->epsilon, (uint32_t)o->index, (uint32_t)o->n_actors);
  /* Distinct, reproducible streams per actor. */
  uint64_t seed = (co->have_seed ? co->seed : 1) + 0x9e3779b97f4a7c15ull * (o->index + 1);
  lt_env_state_t env;
  lt_env_seed(&env, task, seed);
  cp_rng_t rng;
  cp_rng_seed(&rng, seed ^ 0x5eed5eed5eed5eedull);
  float obs[LT_MAX_OBS], next[LT_MAX_OBS];
  lt_env_reset(&env, obs);
  uint64_t t = 0, episodes = 0;
  double returns[100]; /* the last 100 episodes, for the summary */
  double t0 = rd_clock_now();
  int rc = 0;
  fprintf(a->log, "# actor %" PRIu64 "/%" PRIu64 " %s %s epsilon %.4g noise %.3g n-step %" PRIu64
          " workload %s\n", o->index, o->n_actors, lt_env_name(task->env),
          lt_algo_name(task->algo), task->algo == LT_DQN ? eps : 0.0,
          task->algo == LT_DDPG ? o->noise : 0.0, o->n_step, co->id);
  fflush(a->log);
  while (!stop_requested && (o->steps == 0 || t < o->steps)) {
    uint8_t action[4];
    if (lt_act(task, a->w.version > 0 ? &a->w.policy : NULL, obs, eps, o->noise, &rng,
               action) != 0) {
      fprintf(stderr, "%s: the policy's forward pass failed\n", prog);
      rc = 1;
      break;
    }
    float r;
    int term, trunc;
    lt_env_step(&env, action, next, &r, &term, &trunc);
    if (!nstep_batch_fits(&a->ns, &a->batch) && (rc = actor_flush(a)) != 0) break;
    nstep_push(&a->ns, obs, action, r, next, term, trunc, &a->batch);
    t++;
    if (term || trunc) {
      returns[episodes % 100] = env.ret;
      episodes++;
      fprintf(a->log, "episode %" PRIu64 " return %.2f length %u steps %" PRIu64
              " version %" PRIu64 "\n", episodes, env.ret, env.length, t, a->w.version);
      fflush(a->log);
      lt_env_reset(&env, obs);
    } else {
      memcpy(obs, next, sizeof obs);
    }
    if (t % o->pull_every == 0) {
      if ((rc = pull_weights(a->c, co, task, &a->w)) != 0) break;
      if ((rc = actor_throttle(a)) != 0) break;
    }
  }
  /* Rows of a cut-off episode's last steps stay unsent (their windows are
   * not complete); everything emitted goes out. */
  if (rc == 0) rc = actor_flush(a);
  uint64_t inserted = 0;
  if (rc == 0) {
    rdc_error_t e;
    rdc_insert_stream_t *st = a->st;
    a->st = NULL; /* closed (and freed) here, whatever the outcome */
    if (rdc_insert_stream_close(st, &inserted, NULL, &e) != RDC_OK)
      rc = ex_fail(prog, "insert", &e);
  }
  size_t k = episodes < 100 ? (size_t)episodes : 100;
  double recent = 0;
  for (size_t j = 0; j < k; j++) recent += returns[j];
  if (k > 0) recent /= (double)k;
  fprintf(a->log, "# actor %" PRIu64 " done: %" PRIu64 " steps in %.1f s, %" PRIu64
          " rows inserted, %" PRIu64 " episodes, mean return of the last %zu %.2f, weights "
          "version %" PRIu64 ", waited for the learner %" PRIu64 " times (%.1f s)\n", o->index,
          t, rd_clock_now() - t0, inserted, episodes, k, recent, a->w.version, a->waits, a->waited_s);
  fflush(a->log);
  return rc;
}

static int cmd_actor(int argc, char **argv) {
  common_t co;
  common_init(&co);
  actor_opts_t o = {.n_actors = 1, .pull_every = 400, .n_step = 3, .batch = 256,
                    .max_lag = 5000, .epsilon = 0.4, .noise = 0.1, .stall_timeout = 60};
  int have_index = 0, have_n = 0;
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (common_opt(argc, argv, &i, &co)) continue;
    if ((v = ex_opt(argc, argv, &i, "--actor-index", prog)))
      have_index = 1, o.index = ex_u64(v, "--actor-index", 0, 1u << 20, prog);
    else if ((v = ex_opt(argc, argv, &i, "--num-actors", prog)))
      have_n = 1, o.n_actors = ex_u64(v, "--num-actors", 1, 1u << 20, prog);
    else if ((v = ex_opt(argc, argv, &i, "--steps", prog)))
      o.steps = ex_u64(v, "--steps", 0, UINT64_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--pull-every", prog)))
      o.pull_every = ex_u64(v, "--pull-every", 1, UINT32_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--n-step", prog)))
      o.n_step = ex_u64(v, "--n-step", 1, NSTEP_MAX_N, prog);
    else if ((v = ex_opt(argc, argv, &i, "--epsilon", prog)))
      o.epsilon = ex_double(v, "--epsilon", 0, 1, prog);
    else if ((v = ex_opt(argc, argv, &i, "--noise", prog)))
      o.noise = ex_double(v, "--noise", 0, 100, prog);
    else if (strcmp(argv[i], "--initial-priorities") == 0)
      o.initial_priorities = 1;
    else if ((v = ex_opt(argc, argv, &i, "--batch", prog)))
      o.batch = ex_u64(v, "--batch", 1, 1u << 16, prog);
    else if ((v = ex_opt(argc, argv, &i, "--max-lag", prog)))
      o.max_lag = ex_u64(v, "--max-lag", 0, UINT64_MAX, prog);
    else if ((v = ex_opt(argc, argv, &i, "--stall-timeout", prog)))
      o.stall_timeout = ex_double(v, "--stall-timeout", 0.1, 1e9, prog);
    else if ((v = ex_opt(argc, argv, &i, "--log", prog)))
      o.log_path = v;
    else
      return usage_error("unknown actor argument %s", argv[i]);
  }
  int rc = need_workload(&co);
  if (rc) return rc;
  if (!co.have_env) return usage_error("%s needs --env cartpole|pendulum", "actor");
  if (have_index != have_n)
    return usage_error("%s: give both --actor-index and --num-actors", "actor");
  if (o.index >= o.n_actors)
    return usage_error("%s: --actor-index must be below --num-actors", "actor");
  if (o.batch < o.n_step) return usage_error("%s: --batch must be at least --n-step", "actor");

  /* SIGTERM/SIGINT end the loop; the rows built so far are still sent. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  actor_t a;
  memset(&a, 0, sizeof a);
  a.co = &co;
  a.o = &o;
  rc = actor_setup(&a);
  if (rc == 0) rc = actor_play(&a);
  actor_free(&a);
  return rc;
}

/* ------------------------------------------------------------------ */
/* eval                                                                */
/* ------------------------------------------------------------------ */

static int cmd_eval(int argc, char **argv) {
  common_t co;
  common_init(&co);
  uint64_t episodes = 100;
  int json = 0;
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (common_opt(argc, argv, &i, &co)) continue;
    if ((v = ex_opt(argc, argv, &i, "--episodes", prog)))
      episodes = ex_u64(v, "--episodes", 1, MAX_EVAL_EPISODES, prog);
    else if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else
      return usage_error("unknown eval argument %s", argv[i]);
  }
  int rc = need_workload(&co);
  if (rc) return rc;
  if (!co.have_env) return usage_error("%s needs --env cartpole|pendulum", "eval");
  rdc_client_t *c;
  if (connect_client(&co, &c) != 0) return 1;
  lt_task_t task;
  rdc_workload_t *wl;
  if (load_task(c, &co, &task, &wl) != 0) {
    rdc_close(c);
    return 1;
  }
  weights_t w;
  memset(&w, 0, sizeof w);
  rdc_error_t e;
  rc = pull_weights(c, &co, &task, &w);
  /* The counters as of these weights (they move on while we play). */
  if (rc == 0 && rdc_describe(c, co.id, wl, &e) != RDC_OK) rc = ex_fail(prog, "describe", &e);
  if (rc == 0 && w.version == 0) {
    fprintf(stderr, "%s: workload %s has no weights yet (version 0)\n", prog, co.id);
    rc = 1;
  }
  if (rc != 0) {
    weights_free(&w);
    free(wl);
    rdc_close(c);
    return rc;
  }
  /* A fixed seed: successive evaluations play the same start states. */
  lt_env_state_t env;
  lt_env_seed(&env, &task, co.have_seed ? co.seed : 12345);
  cp_rng_t rng;
  cp_rng_seed(&rng, 1);
  double sum = 0, sum2 = 0, lo = INFINITY, hi = -INFINITY;
  for (uint64_t ep = 0; ep < episodes; ep++) {
    float obs[LT_MAX_OBS];
    lt_env_reset(&env, obs);
    for (;;) {
      uint8_t action[4];
      lt_act(&task, &w.policy, obs, 0.0, 0.0, &rng, action);
      float r;
      int term, trunc;
      lt_env_step(&env, action, obs, &r, &term, &trunc);
      if (term || trunc) break;
    }
    sum += env.ret;
    sum2 += env.ret * env.ret;
    if (env.ret < lo) lo = env.ret;
    if (env.ret > hi) hi = env.ret;
  }
  double n = (double)episodes, mean = sum / n;
  double var = sum2 / n - mean * mean;
  double sd = var > 0 ? sqrt(var) : 0;
  uint64_t train_steps = wl->has_learner_counters ? wl->learner.steps : 0;
  if (json) {
    jw_t j;
    jw_init(&j, stdout);
    jw_object_begin(&j);
    jw_key(&j, "workload");
    jw_string(&j, co.id);
    jw_key(&j, "env");
    jw_string(&j, lt_env_name(task.env));
    jw_key(&j, "algo");
    jw_string(&j, lt_algo_name(task.algo));
    jw_key(&j, "episodes");
    jw_u64(&j, episodes);
    jw_key(&j, "mean_return");
    jw_double(&j, mean);
    jw_key(&j, "std_return");
    jw_double(&j, sd);
    jw_key(&j, "min_return");
    jw_double(&j, lo);
    jw_key(&j, "max_return");
    jw_double(&j, hi);
    jw_key(&j, "weight_version");
    jw_u64(&j, w.version);
    jw_key(&j, "env_steps");
    jw_u64(&j, wl->counters.inserts);
    jw_key(&j, "train_steps");
    jw_u64(&j, train_steps);
    jw_object_end(&j);
    jw_finish(&j);
  } else {
    printf("mean return %.2f over %" PRIu64 " episodes (std %.2f, min %.2f, max %.2f); weights "
           "version %" PRIu64 ", %" PRIu64 " env steps, %" PRIu64 " train steps\n",
           mean, episodes, sd, lo, hi, w.version, wl->counters.inserts, train_steps);
  }
  weights_free(&w);
  free(wl);
  rdc_close(c);
  if (fflush(stdout) != 0) {
    fprintf(stderr, "%s: cannot write the output\n", prog);
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* train                                                               */
/* ------------------------------------------------------------------ */

static int cmd_train(int argc, char **argv) {
  common_t co;
  common_init(&co);
  uint64_t steps = 1000, calls = 1;
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (common_opt(argc, argv, &i, &co)) continue;
    if ((v = ex_opt(argc, argv, &i, "--steps", prog)))
      steps = ex_u64(v, "--steps", 1, 65536, prog);
    else if ((v = ex_opt(argc, argv, &i, "--calls", prog)))
      calls = ex_u64(v, "--calls", 1, UINT32_MAX, prog);
    else
      return usage_error("unknown train argument %s", argv[i]);
  }
  int rc = need_workload(&co);
  if (rc) return rc;
  rdc_client_t *c;
  if (connect_client(&co, &c) != 0) return 1;
  for (uint64_t k = 0; k < calls && rc == 0; k++) {
    rdc_train_result_t r;
    rdc_error_t e;
    if (rdc_train_step(c, co.id, co.token, (uint32_t)steps, &r, &e) != RDC_OK) {
      rc = ex_fail(prog, "train step", &e);
      break;
    }
    printf("steps %u (skipped %u) loss %.6g |td| mean %.6g max %.6g version %" PRIu64
           " %.0f steps/s\n", r.steps_done, r.skipped_steps, r.loss_mean, r.td_abs_mean,
           r.td_abs_max, r.weight_version, r.steps_per_second);
  }
  rdc_close(c);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    }
  if (strcmp(cmd, "register") == 0) return cmd_register(argc, argv);
  if (strcmp(cmd, "actor") == 0) return cmd_actor(argc, argv);
  if (strcmp(cmd, "eval") == 0) return cmd_eval(argc, argv);
  if (strcmp(cmd, "train") == 0) return cmd_train(argc, argv);
  return usage_error("unknown command \"%s\" (register, actor, eval, train)", cmd);
}
