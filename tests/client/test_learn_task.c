/* test_learn_task.c - replayd-learn's task glue
 * (clients/c/examples/learn_task.c): schemas, default specs, reading a
 * described workload back, action selection from a policy, action mapping
 * onto the environments, Ape-X epsilons and initial priorities. Policies
 * are tiny hand-written RDNN buffers, so every expected action is known. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "learn_task.h"
#include "rdt_main.h"

/* An RDNN buffer of one layer in -> out with the given activation. */
static size_t flat1(uint8_t *buf, uint32_t in, uint32_t out, uint32_t act, const float *w,
                    const float *b) {
  uint32_t hdr[] = {0x4E4E4452u, 1, 1, in, out, act};
  memcpy(buf, hdr, sizeof hdr);
  size_t off = sizeof hdr;
  memcpy(buf + off, w, (size_t)in * out * 4);
  off += (size_t)in * out * 4;
  memcpy(buf + off, b, (size_t)out * 4);
  return off + (size_t)out * 4;
}

static void load(rdc_policy_t *p, uint32_t in, uint32_t out, uint32_t act, const float *w,
                 const float *b) {
  uint8_t buf[1024];
  size_t len = flat1(buf, in, out, act, w, b);
  rdc_error_t e;
  if (rdc_policy_load(p, buf, len, &e) != RDC_OK) fail_msg("load: %s", e.msg);
}

/* The CartPole DQN task and the policy Q(s) = (s0, s1) + (b0, 0). */
static void cartpole_dqn(lt_task_t *t, rdc_policy_t *p, float b0) {
  char msg[256];
  if (lt_task_init(t, LT_CARTPOLE, LT_DQN, 0, msg, sizeof msg) != 0) fail_msg("%s", msg);
  const float w[] = {1, 0, 0, 0, 0, 1, 0, 0}, b[] = {b0, 0};
  rdc_policy_init(p);
  load(p, 4, 2, RDC_ACT_IDENTITY, w, b);
}

static void test_parse_names(void **state) {
  (void)state;
  lt_env_t e;
  lt_algo_t a;
  assert_int_equal(lt_env_parse("cartpole", &e), 0);
  assert_int_equal(e, LT_CARTPOLE);
  assert_int_equal(lt_env_parse("pendulum", &e), 0);
  assert_int_equal(e, LT_PENDULUM);
  assert_int_equal(lt_env_parse("Pendulum-v1", &e), -1);
  assert_int_equal(lt_algo_parse("ddpg", &a), 0);
  assert_int_equal(a, LT_DDPG);
  assert_int_equal(lt_algo_parse("sac", &a), -1);
  assert_int_equal(lt_default_algo(LT_CARTPOLE), LT_DQN);
  assert_int_equal(lt_default_algo(LT_PENDULUM), LT_DDPG);
}

static void test_task_init(void **state) {
  (void)state;
  lt_task_t t;
  char msg[256];
  assert_int_equal(lt_task_init(&t, LT_CARTPOLE, LT_DQN, 0, msg, sizeof msg), 0);
  assert_int_equal(t.obs_dim, 4);
  assert_int_equal(t.num_actions, 2);
  assert_int_equal(lt_task_init(&t, LT_CARTPOLE, LT_DQN, 3, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "2 actions"));
  assert_int_equal(lt_task_init(&t, LT_PENDULUM, LT_DQN, 0, msg, sizeof msg), 0);
  assert_int_equal(t.obs_dim, 3);
  assert_int_equal(t.num_actions, LT_PENDULUM_DEFAULT_K);
  assert_int_equal(lt_task_init(&t, LT_PENDULUM, LT_DQN, 1, msg, sizeof msg), -1);
  assert_int_equal(lt_task_init(&t, LT_PENDULUM, LT_DDPG, 0, msg, sizeof msg), 0);
  assert_true(t.action_low == -2.0 && t.action_high == 2.0);
  assert_int_equal(lt_task_init(&t, LT_CARTPOLE, LT_DDPG, 0, msg, sizeof msg), 0);
  assert_true(t.action_low == -1.0 && t.action_high == 1.0);
  assert_int_equal(lt_task_init(&t, LT_CARTPOLE, LT_DDPG, 2, msg, sizeof msg), -1);
}

static void test_default_spec_round_trip(void **state) {
  (void)state;
  char msg[512];
  const lt_env_t envs[] = {LT_CARTPOLE, LT_PENDULUM};
  const lt_algo_t algos[] = {LT_DQN, LT_DDPG};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      lt_task_t t, back;
      assert_int_equal(lt_task_init(&t, envs[i], algos[j], 0, msg, sizeof msg), 0);
      rdc_spec_t s;
      lt_default_spec(&t, 77, &s);
      assert_int_equal(s.seed, 77);
      assert_int_equal(s.n_fields, LT_N_FIELDS);
      assert_string_equal(s.fields[LT_F_OBS].name, "obs");
      assert_int_equal(s.fields[LT_F_OBS].shape[0], t.obs_dim);
      assert_string_equal(s.fields[LT_F_NEXT_OBS].name, "next_obs");
      assert_string_equal(s.fields[LT_F_DISCOUNT].name, "discount");
      assert_int_equal(s.fields[LT_F_DISCOUNT].dtype, RDC_DTYPE_FLOAT32);
      assert_int_equal(s.fields[LT_F_DISCOUNT].rank, 0);
      if (algos[j] == LT_DQN) {
        assert_int_equal(s.fields[LT_F_ACTION].dtype, RDC_DTYPE_INT32);
        assert_int_equal(s.fields[LT_F_ACTION].rank, 0);
        assert_int_equal(s.learner.num_actions, t.num_actions);
        assert_false(s.learner.has_action_low);
      } else {
        assert_int_equal(s.fields[LT_F_ACTION].dtype, RDC_DTYPE_FLOAT32);
        assert_int_equal(s.fields[LT_F_ACTION].rank, 1);
        assert_int_equal(s.fields[LT_F_ACTION].shape[0], 1);
        assert_int_equal(s.learner.num_actions, 0);
        assert_true(s.learner.action_low == t.action_low && s.learner.action_high == t.action_high);
      }
      assert_true(s.has_learner);
      assert_string_equal(s.learner.algorithm, lt_algo_name(algos[j]));
      assert_true(s.learner.batch_size > 0 && s.learner.batch_size <= s.learner.min_size);
      assert_true(s.learner.min_size <= s.capacity);
      assert_true(s.learner.samples_per_insert > 0); /* continuous mode */
      assert_true(s.learner.n_hidden >= 1);
      /* What an actor reads back is the same task. */
      assert_int_equal(lt_task_from_spec(&back, envs[i], &s, msg, sizeof msg), 0);
      assert_int_equal(back.algo, t.algo);
      assert_int_equal(back.num_actions, t.num_actions);
      assert_true(back.action_low == t.action_low && back.action_high == t.action_high);
    }
}

static void test_task_from_spec_mismatches(void **state) {
  (void)state;
  char msg[512];
  lt_task_t t, back;
  lt_task_init(&t, LT_CARTPOLE, LT_DQN, 0, msg, sizeof msg);
  rdc_spec_t s;
  lt_default_spec(&t, 1, &s);
  /* A cartpole workload is not a pendulum one (obs shape). */
  assert_int_equal(lt_task_from_spec(&back, LT_PENDULUM, &s, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "obs"));
  rdc_spec_t s2 = s;
  s2.has_learner = 0;
  assert_int_equal(lt_task_from_spec(&back, LT_CARTPOLE, &s2, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "no learner"));
  s2 = s;
  snprintf(s2.learner.algorithm, sizeof s2.learner.algorithm, "sac");
  assert_int_equal(lt_task_from_spec(&back, LT_CARTPOLE, &s2, msg, sizeof msg), -1);
  s2 = s;
  s2.fields[LT_F_ACTION].dtype = RDC_DTYPE_FLOAT32; /* a ddpg action in a dqn workload */
  assert_int_equal(lt_task_from_spec(&back, LT_CARTPOLE, &s2, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "action"));
  s2 = s;
  s2.n_fields = 4;
  assert_int_equal(lt_task_from_spec(&back, LT_CARTPOLE, &s2, msg, sizeof msg), -1);
  s2 = s;
  s2.learner.num_actions = 3; /* cartpole has 2 */
  assert_int_equal(lt_task_from_spec(&back, LT_CARTPOLE, &s2, msg, sizeof msg), -1);
}

static void test_apex_epsilon(void **state) {
  (void)state;
  assert_true(lt_apex_epsilon(0.4, 0, 1) == 0.4);
  assert_true(fabs(lt_apex_epsilon(0.4, 0, 8) - 0.4) < 1e-15);
  assert_true(fabs(lt_apex_epsilon(0.4, 7, 8) - pow(0.4, 8)) < 1e-15);
  /* Actor 1 of 4: 0.4^(1 + 7/3). */
  assert_true(fabs(lt_apex_epsilon(0.4, 1, 4) - pow(0.4, 1.0 + 7.0 / 3.0)) < 1e-15);
  assert_true(lt_apex_epsilon(0.4, 1, 4) < lt_apex_epsilon(0.4, 0, 4));
}

static void test_dqn_act(void **state) {
  (void)state;
  char msg[256];
  lt_task_t t;
  rdc_policy_t p;
  cartpole_dqn(&t, &p, 0); /* Q(s) = (s0, s1): greedy picks the larger of s0, s1 */
  assert_int_equal(lt_check_policy(&t, &p, msg, sizeof msg), 0);
  cp_rng_t rng;
  cp_rng_seed(&rng, 5);
  int32_t a;
  const float o1[4] = {0.5f, 0.2f, 0, 0}, o2[4] = {-1, 3, 0, 0}, tie[4] = {1, 1, 0, 0};
  assert_int_equal(lt_act(&t, &p, o1, 0.0, 0.0, &rng, &a), 0);
  assert_int_equal(a, 0);
  lt_act(&t, &p, o2, 0.0, 0.0, &rng, &a);
  assert_int_equal(a, 1);
  lt_act(&t, &p, tie, 0.0, 0.0, &rng, &a);
  assert_int_equal(a, 0); /* ties: the lowest index */
  /* epsilon 0.25: about 1/8 of the actions flip to 1 (random half the time). */
  int ones = 0;
  const int n = 40000;
  for (int i = 0; i < n; i++) {
    lt_act(&t, &p, o1, 0.25, 0.0, &rng, &a);
    assert_true(a == 0 || a == 1);
    ones += a;
  }
  assert_true(fabs((double)ones / n - 0.125) < 0.01);
  /* No policy: uniform. */
  ones = 0;
  for (int i = 0; i < n; i++) {
    lt_act(&t, NULL, o1, 0.0, 0.0, &rng, &a);
    ones += a;
  }
  assert_true(fabs((double)ones / n - 0.5) < 0.02);
  /* A policy of the wrong shape is named. */
  lt_task_t tp;
  lt_task_init(&tp, LT_PENDULUM, LT_DQN, 0, msg, sizeof msg);
  assert_int_equal(lt_check_policy(&tp, &p, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "4 inputs to 2 outputs"));
  rdc_policy_free(&p);
  /* Unloaded policy: the forward pass fails, reported. */
  assert_int_equal(lt_act(&t, &p, o1, 0.0, 0.0, &rng, &a), -1);
}

static void test_ddpg_act(void **state) {
  (void)state;
  char msg[256];
  lt_task_t t;
  lt_task_init(&t, LT_PENDULUM, LT_DDPG, 0, msg, sizeof msg);
  /* y = s2 (the angular velocity) through an identity output, so y is
   * chosen by the observation; action = -2 + (y + 1) / 2 * 4 = 2 y. */
  const float w[] = {0, 0, 1}, b[] = {0};
  rdc_policy_t p;
  rdc_policy_init(&p);
  load(&p, 3, 1, RDC_ACT_IDENTITY, w, b);
  cp_rng_t rng;
  cp_rng_seed(&rng, 9);
  float a;
  const float o[3] = {1, 0, 0.5f}, big[3] = {1, 0, 5}, low[3] = {1, 0, -1};
  assert_int_equal(lt_act(&t, &p, o, 0.0, 0.0, &rng, &a), 0);
  assert_true(a == 1.0f);
  lt_act(&t, &p, big, 0.0, 0.0, &rng, &a);
  assert_true(a == 2.0f); /* clipped to the range */
  lt_act(&t, &p, low, 0.0, 0.0, &rng, &a);
  assert_true(a == -2.0f);
  /* Noise 0.1: std 0.1 * half the range = 0.2 around 1.0; epsilon is ignored. */
  double sum = 0, sum2 = 0;
  const int n = 50000;
  for (int i = 0; i < n; i++) {
    lt_act(&t, &p, o, 1.0, 0.1, &rng, &a);
    assert_true(a >= -2.0f && a <= 2.0f);
    sum += a;
    sum2 += (double)a * a;
  }
  double mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
  assert_true(fabs(mean - 1.0) < 0.01);
  assert_true(fabs(sd - 0.2) < 0.01);
  /* No policy: uniform over [-2, 2]. */
  sum = 0;
  for (int i = 0; i < n; i++) {
    lt_act(&t, NULL, o, 0.0, 0.0, &rng, &a);
    assert_true(a >= -2.0f && a <= 2.0f);
    sum += a;
  }
  assert_true(fabs(sum / n) < 0.05);
  rdc_policy_free(&p);
}

/* A task's environment and, beside it, the example's own of that kind
 * (the reference), both seeded alike and reset; what each step gave. */
typedef struct {
  lt_env_state_t e;
  cartpole_t cp;
  pendulum_t pd;
  float o[LT_MAX_OBS], oref[LT_MAX_OBS], r, rref;
  int term, trunc;
} twin_t;

static void twin_start(twin_t *w, const lt_task_t *t, uint64_t seed) {
  lt_env_seed(&w->e, t, seed);
  lt_env_reset(&w->e, w->o);
  if (t->env == LT_PENDULUM) {
    pendulum_seed(&w->pd, seed);
    pendulum_reset(&w->pd, w->oref);
  } else {
    cartpole_seed(&w->cp, seed);
    cartpole_reset(&w->cp, w->oref);
  }
}

static void test_env_action_mapping(void **state) {
  (void)state;
  char msg[256];
  /* DQN on Pendulum: K = 5 torques -2, -1, 0, 1, 2. */
  lt_task_t t;
  lt_task_init(&t, LT_PENDULUM, LT_DQN, 5, msg, sizeof msg);
  for (int32_t k = 0; k < 5; k++) {
    twin_t w;
    twin_start(&w, &t, 3);
    const float *o = w.o, *oref = w.oref;
    assert_true(o[0] == oref[0] && o[2] == oref[2]);
    assert_int_equal(lt_env_step(&w.e, &k, w.o, &w.r, &w.term, &w.trunc), 0);
    pendulum_step(&w.pd, -2.0 + k, w.oref, &w.rref, &w.term, &w.trunc);
    assert_true(o[0] == oref[0] && o[1] == oref[1] && o[2] == oref[2] && w.r == w.rref);
    assert_true(w.e.ret == w.rref && w.e.length == 1);
  }
  /* DDPG on CartPole: > 0 pushes right (1), else left (0). */
  lt_task_init(&t, LT_CARTPOLE, LT_DDPG, 0, msg, sizeof msg);
  const float us[] = {0.3f, -0.3f, 0.0f};
  const int push[] = {1, 0, 0};
  for (int i = 0; i < 3; i++) {
    twin_t w;
    twin_start(&w, &t, 4);
    lt_env_step(&w.e, &us[i], w.o, &w.r, &w.term, &w.trunc);
    cartpole_step(&w.cp, push[i], w.oref, &w.rref, &w.term, &w.trunc);
    assert_true(memcmp(w.o, w.oref, 4 * sizeof(float)) == 0);
  }
  /* Episode bookkeeping: CartPole returns count steps. */
  lt_task_init(&t, LT_CARTPOLE, LT_DQN, 0, msg, sizeof msg);
  lt_env_state_t e;
  lt_env_seed(&e, &t, 1);
  float o[4], r;
  int term = 0, trunc = 0;
  lt_env_reset(&e, o);
  int32_t right = 1;
  while (!term && !trunc) lt_env_step(&e, &right, o, &r, &term, &trunc);
  assert_true(term);
  assert_true(e.ret == (double)e.length && e.length > 5 && e.length < 100);
  assert_int_equal(lt_env_step(&e, &right, o, &r, &term, &trunc), -1);
}

static void test_dqn_priorities(void **state) {
  (void)state;
  char msg[256];
  lt_task_t t;
  rdc_policy_t p;
  cartpole_dqn(&t, &p, 0.5f); /* Q(s) = (s0, s1) + (0.5, 0) */
  const float obs[8] = {1, 2, 0, 0, /* Q = (1.5, 2) */ 0, 0, 0, 0 /* Q = (0.5, 0) */};
  const float next[8] = {3, 1, 0, 0, /* max Q' = 3.5 */ 0, -4, 0, 0 /* max = 0.5 */};
  const int32_t act[2] = {1, 0};
  const float rew[2] = {1, -1}, disc[2] = {0.5f, 0};
  double pr[2];
  assert_int_equal(lt_dqn_priorities(&t, &p, 2, obs, act, rew, next, disc, pr), 0);
  /* |1 + 0.5 * 3.5 - 2| = 0.75; |-1 + 0 - 0.5| = 1.5 */
  assert_true(fabs(pr[0] - 0.75) < 1e-12);
  assert_true(fabs(pr[1] - 1.5) < 1e-12);
  /* Huge values are capped below the server's max priority. */
  const float rew_big[2] = {1e9f, 0};
  assert_int_equal(lt_dqn_priorities(&t, &p, 2, obs, act, rew_big, next, disc, pr), 0);
  assert_true(pr[0] == LT_MAX_PRIORITY);
  /* Out-of-range action, no policy, DDPG: no priorities. */
  const int32_t bad[2] = {2, 0};
  assert_int_equal(lt_dqn_priorities(&t, &p, 2, obs, bad, rew, next, disc, pr), -1);
  assert_int_equal(lt_dqn_priorities(&t, NULL, 2, obs, act, rew, next, disc, pr), -1);
  lt_task_t td;
  lt_task_init(&td, LT_CARTPOLE, LT_DDPG, 0, msg, sizeof msg);
  assert_int_equal(lt_dqn_priorities(&td, &p, 2, obs, act, rew, next, disc, pr), -1);
  rdc_policy_free(&p);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_parse_names),
         cmocka_unit_test(test_task_init),
         cmocka_unit_test(test_default_spec_round_trip),
         cmocka_unit_test(test_task_from_spec_mismatches),
         cmocka_unit_test(test_apex_epsilon),
         cmocka_unit_test(test_dqn_act),
         cmocka_unit_test(test_ddpg_act),
         cmocka_unit_test(test_env_action_mapping),
         cmocka_unit_test(test_dqn_priorities))
