/* test_learn_daemon.c - hosted learning end to end against a real
 * replayd: the client library's learner calls and the replayd-learn and
 * replayctl programs.
 *
 *   test_client_learn_daemon REPLAYD REPLAYD-LEARN REPLAYCTL
 *
 * Starts the daemon on a free loopback port with a fresh state directory,
 * then: registers learner workloads and reads the normalised learner
 * section and counters back; fetches the initial weights (version 1) and
 * runs them through rdc_policy_forward; inserts n-step rows and runs
 * TrainStep; checks the token and precondition errors; and drives the
 * programs (register, actor, eval, train, replayctl describe) as a user
 * would. It checks that training happens, not how well: learning curves
 * are clients/c/examples/learn.sh's job.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "learn_task.h"
#include "nstep.h"
#include "rdt_cl_main.h"
#include "rdt_client.h"
#include "replayd_client.h"

extern char **environ;

static const char *replayd_path, *learn_path, *replayctl_path;
#define TOKF_MAX (sizeof rdt_replayd.dir + 64) /* a token file's path in the state directory */
static const char *const target = rdt_replayd.target;

static int group_setup(void **state) {
  (void)state;
  return rdt_client_group_start(replayd_path, &(rdt_daemon_opts_t){.tag = "learn"}, 30);
}

/* ------------------------------------------------------------------ */
/* Programs                                                            */

/* Run a program with the NULL-terminated arguments; it must run and exit. */
#define run(res, ...) assert_int_equal(rdt_run(res, NULL, __VA_ARGS__), 0)

static void expect_rc(const rdt_result_t *r, int rc) {
  if (r->rc != rc) fail_msg("exit status %d, want %d; stderr: %s; stdout: %.500s", r->rc, rc, r->err, r->out);
}

/* "ID TOKEN\n" from register; writes the token to a file. */
static void parse_registration(const rdt_result_t *r, char *id, char *token_file) {
  char token[RDC_TOKEN_MAX];
  assert_int_equal(sscanf(r->out, "%64s %128s", id, token), 2);
  assert_int_equal(strlen(id), 32);
  assert_int_equal(strlen(token), 64);
  snprintf(token_file, TOKF_MAX, "%s/token-%s", rdt_replayd.dir, id);
  FILE *f = fopen(token_file, "w");
  assert_non_null(f);
  fprintf(f, "%s\n", token);
  fclose(f);
}

static uint64_t json_u64(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  if (p == NULL) fail_msg("no %s in %s", key, json);
  return strtoull(p + strlen(pat), NULL, 10);
}

/* ------------------------------------------------------------------ */
/* Library                                                             */

/* A CartPole DQN workload that trains only on TrainStep calls. */
static void register_cartpole(rdc_workload_t *w, uint32_t min_size) {
  lt_task_t t;
  char msg[128];
  assert_int_equal(lt_task_init(&t, LT_CARTPOLE, LT_DQN, 0, msg, sizeof msg), 0);
  rdc_spec_t s;
  lt_default_spec(&t, 5, &s);
  s.capacity = 10000;
  s.learner.samples_per_insert = 0;
  s.learner.min_size = min_size;
  rdc_error_t e;
  if (rdc_register(rdt_cli, &s, w, &e) != RDC_OK) fail_msg("register: %s", e.msg);
}

/* Insert n n-step rows of random CartPole play. */
static void insert_random_rows(const rdc_workload_t *w, size_t n) {
  lt_task_t t;
  char msg[128];
  lt_task_init(&t, LT_CARTPOLE, LT_DQN, 0, msg, sizeof msg);
  nstep_t ns;
  nstep_batch_t b;
  assert_int_equal(nstep_init(&ns, 3, 0.99, 4, 4), 0);
  assert_int_equal(nstep_batch_init(&b, n + 3, 4, 4), 0);
  lt_env_state_t env;
  lt_env_seed(&env, &t, 11);
  cp_rng_t rng;
  cp_rng_seed(&rng, 12);
  float obs[LT_MAX_OBS], next[LT_MAX_OBS], r;
  int term, trunc;
  lt_env_reset(&env, obs);
  while (b.count < n) {
    int32_t a;
    lt_act(&t, NULL, obs, 1.0, 0.0, &rng, &a);
    lt_env_step(&env, &a, next, &r, &term, &trunc);
    nstep_push(&ns, obs, &a, r, next, term, trunc, &b);
    if (term || trunc)
      lt_env_reset(&env, obs);
    else
      memcpy(obs, next, sizeof obs);
  }
  rdc_column_t cols[LT_N_FIELDS] = {
      {b.obs, n * 16}, {b.action, n * 4}, {b.reward, n * 4}, {b.next_obs, n * 16}, {b.discount, n * 4},
  };
  rdc_error_t e;
  int rc = rdc_insert_batch(rdt_cli, w->id, w->token, (uint32_t)n, cols, LT_N_FIELDS, NULL, NULL,
                            &e);
  /* Freed first: a failure leaks nothing. */
  nstep_batch_free(&b);
  nstep_free(&ns);
  if (rc != RDC_OK) fail_msg("insert: %s", e.msg);
}

static void test_register_normalised(void **state) {
  (void)state;
  rdc_workload_t w;
  register_cartpole(&w, 0);
  const rdc_learner_spec_t *l = &w.spec.learner;
  assert_true(w.spec.has_learner);
  assert_string_equal(l->algorithm, "dqn");
  assert_string_equal(l->activation, "relu");
  assert_int_equal(l->n_hidden, 2);
  assert_int_equal(l->hidden[0], 64);
  assert_int_equal(l->batch_size, 64);
  assert_int_equal(l->num_actions, 2);
  /* Defaults filled in by the server. */
  assert_true(l->has_lr && l->lr == 1e-3);
  assert_true(l->has_tau && l->tau == 0.01);
  assert_true(l->has_grad_clip && l->grad_clip == 10);
  assert_true(l->has_huber_delta && l->huber_delta == 1);
  assert_true(l->has_double_dqn && l->double_dqn == 1);
  assert_true(l->has_gamma);
  assert_int_equal(l->min_size, 64); /* 0 = batch_size */
  assert_true(l->samples_per_insert == 0);

  rdc_workload_t d;
  rdc_error_t e;
  assert_int_equal(rdc_describe(rdt_cli, w.id, &d, &e), RDC_OK);
  assert_true(d.spec.has_learner);
  assert_string_equal(d.spec.learner.algorithm, "dqn");
  assert_true(d.has_learner_counters);
  assert_int_equal(d.learner.steps, 0);
  assert_int_equal(d.learner.weight_version, 1); /* the initial weights */

  /* A plain replay workload has neither section, and no weights. */
  rdc_spec_t s = w.spec;
  s.has_learner = 0;
  rdc_workload_t plain;
  assert_int_equal(rdc_register(rdt_cli, &s, &plain, &e), RDC_OK);
  assert_false(plain.spec.has_learner);
  assert_int_equal(rdc_describe(rdt_cli, plain.id, &d, &e), RDC_OK);
  assert_false(d.spec.has_learner);
  assert_false(d.has_learner_counters);
  uint64_t v;
  size_t len;
  uint8_t buf[64];
  assert_int_equal(
      rdc_get_weights(rdt_cli, plain.id, plain.token, 0, &v, buf, sizeof buf, &len, &e),
      RDC_FAILED_PRECONDITION);
  rdc_train_result_t tr;
  assert_int_equal(rdc_train_step(rdt_cli, plain.id, plain.token, 1, &tr, &e),
                   RDC_FAILED_PRECONDITION);

  /* The server's validation names the learner field. */
  s = w.spec;
  s.learner.num_actions = 1;
  assert_int_equal(rdc_register(rdt_cli, &s, &d, &e), RDC_INVALID_ARGUMENT);
  assert_non_null(strstr(e.msg, "num_actions"));
}

static void test_weights_and_train_step(void **state) {
  (void)state;
  rdc_workload_t w;
  register_cartpole(&w, 500);
  rdc_error_t e;
  /* Version 1, sized exactly as the RDNN format says for 4-64-64-2. */
  const size_t want = 12 + 4 * 4 + 4 * 3 + 4 * ((4 * 64 + 64) + (64 * 64 + 64) + (64 * 2 + 2));
  uint64_t v = 7;
  size_t len = 0;
  assert_int_equal(rdc_get_weights(rdt_cli, w.id, w.token, 0, &v, NULL, 0, &len, &e),
                   RDC_ETOOSMALL);
  assert_int_equal(len, want);
  assert_int_equal(v, 1);
  uint8_t *buf = malloc(want);
  assert_int_equal(rdc_get_weights(rdt_cli, w.id, w.token, 0, &v, buf, want, &len, &e), RDC_OK);
  assert_int_equal(v, 1);
  assert_int_equal(len, want);
  rdc_policy_t p;
  rdc_policy_init(&p);
  assert_int_equal(rdc_policy_load(&p, buf, len, &e), RDC_OK);
  assert_int_equal(rdc_policy_inputs(&p), 4);
  assert_int_equal(rdc_policy_outputs(&p), 2);
  const float x[4] = {0.01f, -0.2f, 0.03f, 0.1f};
  float q1[2], q2[2];
  assert_int_equal(rdc_policy_forward(&p, x, q1), RDC_OK);
  assert_true(isfinite(q1[0]) && isfinite(q1[1]));
  /* Nothing newer than what we have. */
  assert_int_equal(rdc_get_weights(rdt_cli, w.id, w.token, 1, &v, buf, want, &len, &e), RDC_OK);
  assert_int_equal(v, 1);
  assert_int_equal(len, 0);

  /* Below min_size: no training. */
  rdc_train_result_t tr;
  assert_int_equal(rdc_train_step(rdt_cli, w.id, w.token, 10, &tr, &e), RDC_FAILED_PRECONDITION);
  insert_random_rows(&w, 1000);
  assert_int_equal(rdc_train_step(rdt_cli, w.id, w.token, 100, &tr, &e), RDC_OK);
  assert_int_equal(tr.steps_done + tr.skipped_steps, 100);
  assert_true(tr.steps_done > 0);
  assert_true(tr.weight_version >= 2);
  assert_true(isfinite(tr.loss_mean) && tr.loss_mean >= 0);
  assert_true(tr.td_abs_max >= tr.td_abs_mean && tr.td_abs_mean > 0);
  assert_true(tr.steps_per_second > 0);

  rdc_workload_t d;
  assert_int_equal(rdc_describe(rdt_cli, w.id, &d, &e), RDC_OK);
  assert_int_equal(d.learner.steps, tr.steps_done);
  assert_int_equal(d.learner.weight_version, tr.weight_version);
  assert_true(d.counters.samples >= 64u * tr.steps_done);
  assert_true(d.counters.updates >= 64u * tr.steps_done);

  /* The newer weights load into the same block and answer differently. */
  float *block = p.params;
  assert_int_equal(rdc_get_weights(rdt_cli, w.id, w.token, 1, &v, buf, want, &len, &e), RDC_OK);
  assert_int_equal(v, tr.weight_version);
  assert_int_equal(len, want);
  assert_int_equal(rdc_policy_load(&p, buf, len, &e), RDC_OK);
  assert_ptr_equal(p.params, block);
  assert_int_equal(rdc_policy_forward(&p, x, q2), RDC_OK);
  assert_true(q1[0] != q2[0] || q1[1] != q2[1]);
  rdc_policy_free(&p);
  free(buf);

  /* Tokens: none, wrong; an unknown workload. */
  assert_int_equal(rdc_train_step(rdt_cli, w.id, NULL, 1, &tr, &e), RDC_UNAUTHENTICATED);
  char bad[RDC_TOKEN_MAX];
  snprintf(bad, sizeof bad, "%s", w.token);
  bad[0] = bad[0] == 'a' ? 'b' : 'a';
  assert_int_equal(rdc_train_step(rdt_cli, w.id, bad, 1, &tr, &e), RDC_PERMISSION_DENIED);
  uint8_t small[16];
  assert_int_equal(rdc_get_weights(rdt_cli, w.id, bad, 0, &v, small, sizeof small, &len, &e),
                   RDC_PERMISSION_DENIED);
  assert_int_equal(rdc_get_weights(rdt_cli, "0123456789abcdef0123456789abcdef", w.token, 0, &v,
                                   small, sizeof small, &len, &e),
                   RDC_NOT_FOUND);
}

/* ------------------------------------------------------------------ */
/* Programs                                                            */

static double json_double(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  if (p == NULL) fail_msg("no %s in %s", key, json);
  return strtod(p + strlen(pat), NULL);
}

/* What `replayd-learn eval --episodes N` (default seed) must report for
 * workload id's current weights, computed here with the client library
 * and the task code: the weights' version in *version, the mean return. */
static double eval_here(const char *id, const char *token_file, lt_env_t env, uint32_t episodes,
                        uint64_t *version) {
  char token[RDC_TOKEN_MAX];
  FILE *f = fopen(token_file, "r");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%128s", token), 1);
  fclose(f);
  rdc_workload_t w;
  rdc_error_t e;
  assert_int_equal(rdc_describe(rdt_cli, id, &w, &e), RDC_OK);
  lt_task_t t;
  char msg[256];
  if (lt_task_from_spec(&t, env, &w.spec, msg, sizeof msg) != 0) fail_msg("task: %s", msg);
  size_t len = 0;
  assert_int_equal(rdc_get_weights(rdt_cli, id, token, 0, version, NULL, 0, &len, &e),
                   RDC_ETOOSMALL);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  assert_int_equal(rdc_get_weights(rdt_cli, id, token, 0, version, buf, len, &len, &e), RDC_OK);
  rdc_policy_t p;
  rdc_policy_init(&p);
  assert_int_equal(rdc_policy_load(&p, buf, len, &e), RDC_OK);
  lt_env_state_t st;
  lt_env_seed(&st, &t, 12345); /* eval's default seed */
  cp_rng_t rng;
  cp_rng_seed(&rng, 1);
  double sum = 0;
  for (uint32_t ep = 0; ep < episodes; ep++) {
    float obs[LT_MAX_OBS], r;
    int term = 0, trunc = 0;
    lt_env_reset(&st, obs);
    while (!term && !trunc) {
      uint8_t action[4];
      assert_int_equal(lt_act(&t, &p, obs, 0.0, 0.0, &rng, action), 0);
      lt_env_step(&st, action, obs, &r, &term, &trunc);
    }
    sum += st.ret;
  }
  rdc_policy_free(&p);
  free(buf);
  return sum / episodes;
}

/* The worst Pendulum-v1 return of a 200-step episode: every step costs at
 * most pi^2 + 0.1 * 8^2 + 0.001 * 2^2 (angle, speed, torque at their limits). */
#define PENDULUM_WORST_RETURN (-200.0 * (M_PI * M_PI + 6.4 + 0.004))

static void test_programs_end_to_end(void **state) {
  (void)state;
  rdt_result_t r;
  char id[RDC_ID_MAX], tokf[TOKF_MAX];
  /* Pendulum with DDPG, continuous training, a small warm-up. */
  run(&r, learn_path, "register", "--server", target, "--env", "pendulum", "--seed", "3",
      "--min-size", "500", "--capacity", "20000", NULL);
  expect_rc(&r, 0);
  parse_registration(&r, id, tokf);

  /* eval on the initial weights (nothing trains without rows): exactly the
   * mean return computed here from the same weights and start states. */
  run(&r, learn_path, "eval", "--server", target, "--id", id, "--token-file", tokf, "--env",
      "pendulum", "--episodes", "3", "--json", NULL);
  expect_rc(&r, 0);
  uint64_t v0;
  const double mean0 = json_double(r.out, "mean_return"), here0 = eval_here(id, tokf, LT_PENDULUM,
                                                                            3, &v0);
  assert_int_equal(v0, 1);
  assert_int_equal(json_u64(r.out, "weight_version"), 1);
  if (fabs(mean0 - here0) > 1e-9 * fabs(here0))
    fail_msg("eval reports mean return %.17g, the weights give %.17g", mean0, here0);

  run(&r, learn_path, "actor", "--server", target, "--id", id, "--token-file", tokf, "--env",
      "pendulum", "--actor-index", "1", "--num-actors", "2", "--steps", "3000",
      "--pull-every", "200", NULL);
  expect_rc(&r, 0);
  assert_non_null(strstr(r.out, "# actor 1/2 pendulum ddpg"));
  assert_non_null(strstr(r.out, "episode 15 return"));         /* 200-step episodes */
  assert_non_null(strstr(r.out, "length 200"));
  assert_non_null(strstr(r.out, "3000 rows inserted"));          /* truncations flush */

  /* Continuous mode trains while the rows come in (steps * 128 <= 128 *
   * rows), on its own threads: on a loaded machine its first step may come
   * after the actor's last row, so the eval is repeated until it has one. */
  uint64_t steps = 0;
  for (int i = 0; i < 300 && steps == 0; i++) {
    if (i > 0) usleep(100 * 1000);
    run(&r, learn_path, "eval", "--server", target, "--id", id, "--token-file", tokf, "--env",
        "pendulum", "--episodes", "3", "--json", NULL);
    expect_rc(&r, 0);
    steps = json_u64(r.out, "train_steps");
  }
  assert_non_null(strstr(r.out, "\"env\":\"pendulum\",\"algo\":\"ddpg\",\"episodes\":3,"));
  assert_int_equal(json_u64(r.out, "env_steps"), 3000);
  if (!(steps > 0 && steps <= 3000))
    fail_msg("the continuous learner made %llu steps on 3000 rows", (unsigned long long)steps);
  assert_true(json_u64(r.out, "weight_version") >= 2);
  /* A summary of 3 Pendulum returns of trained weights: each within what
   * the environment can give, the mean between min and max, the standard
   * deviation at most half the range; and not the initial weights' mean. */
  double mean = json_double(r.out, "mean_return"), sd = json_double(r.out, "std_return");
  double lo = json_double(r.out, "min_return"), hi = json_double(r.out, "max_return");
  if (!(lo >= PENDULUM_WORST_RETURN && lo <= mean && mean <= hi && hi <= 0 && sd >= 0 &&
        sd <= (hi - lo) / 2 + 1e-9 && mean != mean0))
    fail_msg("eval after training: %s (initial weights' mean %.17g)", r.out, mean0);
  run(&r, learn_path, "eval", "--server", target, "--id", id, "--token-file", tokf, "--env",
      "pendulum", "--episodes", "2", NULL);
  expect_rc(&r, 0);
  assert_non_null(strstr(r.out, "mean return "));

  /* replayctl shows the learner section and counters. */
  run(&r, replayctl_path, "--server", target, "describe", id, NULL);
  expect_rc(&r, 0);
  assert_non_null(strstr(r.out, "\nlearner\n  algorithm   ddpg\n"));
  assert_non_null(strstr(r.out, "  actor       [128,128] relu\n"));
  assert_non_null(strstr(r.out, "  actions     [-2, 2]\n"));
  assert_non_null(strstr(r.out, "  training    continuous, 128 samples per insert\n"));
  assert_non_null(strstr(r.out, "\nlearner counters\n  steps       "));
  run(&r, replayctl_path, "--server", target, "--json", "describe", id, NULL);
  expect_rc(&r, 0);
  assert_non_null(strstr(r.out, "\"learner\":{\"algorithm\":\"ddpg\",\"hidden\":[128,128],"));
  assert_non_null(strstr(r.out, "\"learner_counters\":{\"steps\":"));

  /* A DQN actor with initial priorities, into a TrainStep-mode workload;
   * then the train command. */
  run(&r, learn_path, "register", "--server", target, "--env", "cartpole", "--algo", "dqn",
      "--samples-per-insert", "0", "--min-size", "200", "--hidden", "32", "--batch-size", "32",
      NULL);
  expect_rc(&r, 0);
  char id2[RDC_ID_MAX], tokf2[TOKF_MAX];
  parse_registration(&r, id2, tokf2);
  run(&r, learn_path, "actor", "--server", target, "--id", id2, "--token-file", tokf2, "--env",
      "cartpole", "--steps", "1500", "--n-step", "1", "--initial-priorities", NULL);
  expect_rc(&r, 0);
  run(&r, learn_path, "train", "--server", target, "--id", id2, "--token-file", tokf2,
      "--steps", "50", "--calls", "2", NULL);
  expect_rc(&r, 0);
  assert_non_null(strstr(r.out, "steps 50 (skipped 0)"));
  assert_non_null(strstr(r.out, "version 101"));
  run(&r, replayctl_path, "--server", target, "describe", id2, NULL);
  assert_non_null(strstr(r.out, "  hidden      [32] relu\n"));
  assert_non_null(strstr(r.out, "  training    on TrainStep calls\n"));
  assert_non_null(strstr(r.out, "  steps       100\n"));
}

static void test_program_errors(void **state) {
  (void)state;
  rdt_result_t r;
  run(&r, learn_path, "register", "--server", target, NULL);
  expect_rc(&r, 2);
  assert_non_null(strstr(r.err, "--env"));
  run(&r, learn_path, "register", "--server", target, "--env", "cartpole", "--num-actions", "3",
      NULL);
  expect_rc(&r, 2);
  run(&r, learn_path, "frobnicate", NULL);
  expect_rc(&r, 2);
  run(&r, learn_path, "--help", NULL);
  expect_rc(&r, 0);
  assert_non_null(strstr(r.out, "usage: replayd-learn COMMAND"));

  run(&r, learn_path, "register", "--server", target, "--env", "pendulum", NULL);
  expect_rc(&r, 0);
  char id[RDC_ID_MAX], tokf[TOKF_MAX];
  parse_registration(&r, id, tokf);
  /* The wrong environment for the workload. */
  run(&r, learn_path, "actor", "--server", target, "--id", id, "--token-file", tokf, "--env",
      "cartpole", "--steps", "10", NULL);
  expect_rc(&r, 1);
  assert_non_null(strstr(r.err, "does not fit --env cartpole"));
  /* DDPG actors cannot compute initial priorities. */
  run(&r, learn_path, "actor", "--server", target, "--id", id, "--token-file", tokf, "--env",
      "pendulum", "--steps", "10", "--initial-priorities", NULL);
  expect_rc(&r, 2);
  /* A wrong token. */
  char badf[TOKF_MAX];
  snprintf(badf, sizeof badf, "%s/bad-token", rdt_replayd.dir);
  FILE *f = fopen(badf, "w");
  fprintf(f, "%064d\n", 0);
  fclose(f);
  run(&r, learn_path, "eval", "--server", target, "--id", id, "--token-file", badf, "--env",
      "pendulum", NULL);
  expect_rc(&r, 1);
  assert_non_null(strstr(r.err, "PERMISSION_DENIED"));
  run(&r, learn_path, "eval", "--server", target, "--id", id, "--token-file", "/nonexistent",
      "--env", "pendulum", NULL);
  expect_rc(&r, 2);
  assert_non_null(strstr(r.err, "/nonexistent"));
  /* Nothing listening. */
  run(&r, learn_path, "eval", "--server", "127.0.0.1:1", "--id", id, "--token-file", tokf,
      "--env", "pendulum", "--timeout", "2", NULL);
  expect_rc(&r, 1);
  assert_non_null(strstr(r.err, "cannot connect"));
  /* TrainStep is refused in continuous mode. */
  run(&r, learn_path, "train", "--server", target, "--id", id, "--token-file", tokf, NULL);
  expect_rc(&r, 1);
  assert_non_null(strstr(r.err, "FAILED_PRECONDITION"));
}

RDT_CL_MAIN("REPLAYD REPLAYD-LEARN REPLAYCTL", (&replayd_path, &learn_path, &replayctl_path),
            group_setup, rdt_client_group_teardown,
            cmocka_unit_test(test_register_normalised),
            cmocka_unit_test(test_weights_and_train_step),
            cmocka_unit_test(test_programs_end_to_end),
            cmocka_unit_test(test_program_errors))
