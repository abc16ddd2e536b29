/* test_learn_lib.c - the hosted-learning part of libreplayd-client
 * against the scripted gRPC server of the client tests
 * (tests/support/mock_server.c): the learner section of a spec
 * on the wire both ways (every optional scalar as its oneof), learner
 * counters, TrainStep and GetWeights, and replies that break the
 * contract. Each test checks what the client returned and what the server
 * decoded. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mock_server.h"
#include "rdt_cl_mock.h"
#include "rdt_client.h"
#include "replayd.pb-c.h"
#include "replayd_client.h"
#include "rdt_main.h"

static const char *TOKEN = "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface";

static void dqn_spec(rdc_spec_t *s) {
  rdt_client_spec(s, "cartpole-dqn", 1000);
  rdt_client_cartpole(s, 1);
  s->has_learner = 1;
  rdc_learner_spec_t *l = &s->learner;
  snprintf(l->algorithm, sizeof l->algorithm, "dqn");
  l->n_hidden = 2;
  l->hidden[0] = 64;
  l->hidden[1] = 32;
  l->batch_size = 128;
  l->has_lr = 1;
  l->lr = 5e-4;
  l->has_gamma = 1;
  l->gamma = 0.97;
  l->target_update_period = 250;
  l->relaxation_depth = 8;
  l->has_double_dqn = 1;
  l->double_dqn = 0; /* explicitly off: must travel as a set oneof */
  l->num_actions = 2;
  l->samples_per_insert = 8.5;
  l->min_size = 500;
}

/* rdc_register(s) against a server that answers workload "abc": the
 * WorkloadSpec the client sent (free it with _free_unpacked). */
static Replayd__V1__WorkloadSpec *register_sent(const rdc_spec_t *s) {
  Replayd__V1__Workload w = REPLAYD__V1__WORKLOAD__INIT;
  w.id = "abc";
  w.token = (char *)TOKEN;
  mock_reply_msg(&w.base);
  rdc_workload_t out;
  rdc_error_t e;
  assert_int_equal(rdc_register(mock_cli, s, &out, &e), RDC_OK);
  mock_seen_t seen;
  mock_seen(&seen);
  Replayd__V1__WorkloadSpec *req =
      replayd__v1__workload_spec__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(req);
  return req;
}

static void test_register_sends_learner(void **state) {
  (void)state;
  rdc_spec_t s;
  dqn_spec(&s);
  Replayd__V1__WorkloadSpec *req = register_sent(&s);
  const Replayd__V1__LearnerSpec *l = req->learner;
  assert_non_null(l);
  assert_string_equal(l->algorithm, "dqn");
  assert_int_equal(l->n_hidden, 2);
  assert_int_equal(l->hidden[0], 64);
  assert_int_equal(l->hidden[1], 32);
  assert_int_equal(l->n_critic_hidden, 0);
  assert_string_equal(l->activation, "");
  assert_int_equal(l->batch_size, 128);
  assert_int_equal(l->lr_opt_case, REPLAYD__V1__LEARNER_SPEC__LR_OPT_LR);
  assert_true(l->lr == 5e-4);
  assert_int_equal(l->gamma_opt_case, REPLAYD__V1__LEARNER_SPEC__GAMMA_OPT_GAMMA);
  assert_true(l->gamma == 0.97);
  assert_int_equal(l->target_update_period, 250);
  assert_int_equal(l->relaxation_depth, 8);
  assert_int_equal(l->double_dqn_opt_case, REPLAYD__V1__LEARNER_SPEC__DOUBLE_DQN_OPT_DOUBLE_DQN);
  assert_false(l->double_dqn);
  assert_int_equal(l->num_actions, 2);
  assert_true(l->samples_per_insert == 8.5);
  assert_int_equal(l->min_size, 500);
  /* Unset optional scalars stay absent: the server's defaults apply. */
  assert_int_equal(l->critic_lr_opt_case, REPLAYD__V1__LEARNER_SPEC__CRITIC_LR_OPT__NOT_SET);
  assert_int_equal(l->tau_opt_case, REPLAYD__V1__LEARNER_SPEC__TAU_OPT__NOT_SET);
  assert_int_equal(l->grad_clip_opt_case, REPLAYD__V1__LEARNER_SPEC__GRAD_CLIP_OPT__NOT_SET);
  assert_int_equal(l->huber_delta_opt_case, REPLAYD__V1__LEARNER_SPEC__HUBER_DELTA_OPT__NOT_SET);
  assert_int_equal(l->action_low_opt_case, REPLAYD__V1__LEARNER_SPEC__ACTION_LOW_OPT__NOT_SET);
  assert_int_equal(l->action_high_opt_case, REPLAYD__V1__LEARNER_SPEC__ACTION_HIGH_OPT__NOT_SET);
  replayd__v1__workload_spec__free_unpacked(req, NULL);

  /* Without has_learner nothing learner-ish goes out, whatever the struct holds. */
  s.has_learner = 0;
  req = register_sent(&s);
  assert_null(req->learner);
  replayd__v1__workload_spec__free_unpacked(req, NULL);
}

static void test_register_ddpg_optional_values(void **state) {
  (void)state;
  rdc_spec_t s;
  dqn_spec(&s);
  rdc_learner_spec_t *l = &s.learner;
  memset(l, 0, sizeof *l);
  snprintf(l->algorithm, sizeof l->algorithm, "ddpg");
  snprintf(l->activation, sizeof l->activation, "tanh");
  l->n_hidden = 1;
  l->hidden[0] = 400;
  l->n_critic_hidden = 3;
  l->critic_hidden[0] = 400;
  l->critic_hidden[1] = 300;
  l->critic_hidden[2] = 7;
  l->batch_size = 64;
  l->has_critic_lr = 1;
  l->critic_lr = 2e-3;
  l->has_tau = 1;
  l->tau = 0.01;
  l->has_grad_clip = 1;
  l->grad_clip = 0; /* "none": a set zero, not the default */
  l->has_huber_delta = 1;
  l->huber_delta = 2;
  l->has_action_low = 1;
  l->action_low = -2;
  l->has_action_high = 1;
  l->action_high = 0; /* a set zero */
  Replayd__V1__WorkloadSpec *req = register_sent(&s);
  const Replayd__V1__LearnerSpec *r = req->learner;
  assert_string_equal(r->algorithm, "ddpg");
  assert_string_equal(r->activation, "tanh");
  assert_int_equal(r->n_critic_hidden, 3);
  assert_int_equal(r->critic_hidden[2], 7);
  assert_int_equal(r->critic_lr_opt_case, REPLAYD__V1__LEARNER_SPEC__CRITIC_LR_OPT_CRITIC_LR);
  assert_true(r->critic_lr == 2e-3);
  assert_int_equal(r->tau_opt_case, REPLAYD__V1__LEARNER_SPEC__TAU_OPT_TAU);
  assert_true(r->tau == 0.01);
  assert_int_equal(r->grad_clip_opt_case, REPLAYD__V1__LEARNER_SPEC__GRAD_CLIP_OPT_GRAD_CLIP);
  assert_true(r->grad_clip == 0);
  assert_int_equal(r->huber_delta_opt_case, REPLAYD__V1__LEARNER_SPEC__HUBER_DELTA_OPT_HUBER_DELTA);
  assert_int_equal(r->action_low_opt_case, REPLAYD__V1__LEARNER_SPEC__ACTION_LOW_OPT_ACTION_LOW);
  assert_true(r->action_low == -2);
  assert_int_equal(r->action_high_opt_case,
                   REPLAYD__V1__LEARNER_SPEC__ACTION_HIGH_OPT_ACTION_HIGH);
  assert_true(r->action_high == 0);
  assert_int_equal(r->lr_opt_case, REPLAYD__V1__LEARNER_SPEC__LR_OPT__NOT_SET);
  assert_int_equal(r->gamma_opt_case, REPLAYD__V1__LEARNER_SPEC__GAMMA_OPT__NOT_SET);
  assert_int_equal(r->double_dqn_opt_case, REPLAYD__V1__LEARNER_SPEC__DOUBLE_DQN_OPT__NOT_SET);
  replayd__v1__workload_spec__free_unpacked(req, NULL);
}

static void test_register_bad_learner_is_local(void **state) {
  (void)state;
  rdc_spec_t s;
  rdc_workload_t out;
  rdc_error_t e;
  mock_seen_t before, after;
  mock_seen(&before);
  dqn_spec(&s);
  s.learner.n_hidden = RDC_MAX_HIDDEN + 1;
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_EINVAL);
  assert_non_null(strstr(e.msg, "hidden"));
  dqn_spec(&s);
  s.learner.n_critic_hidden = 100;
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_EINVAL);
  dqn_spec(&s);
  memset(s.learner.algorithm, 'x', sizeof s.learner.algorithm);
  assert_int_equal(rdc_register(mock_cli, &s, &out, &e), RDC_EINVAL);
  assert_non_null(strstr(e.msg, "NUL"));
  mock_seen(&after);
  assert_int_equal(before.calls, after.calls);
}

/* A normalised DDPG workload as a server describes it. */
static void describe_reply(int with_learner, uint32_t n_hidden, const char *algo) {
  static uint32_t hidden[32], critic[2] = {256, 256};
  for (int i = 0; i < 32; i++) hidden[i] = 64 + (uint32_t)i;
  static Replayd__V1__LearnerSpec ls;
  replayd__v1__learner_spec__init(&ls);
  ls.algorithm = (char *)algo;
  ls.n_hidden = n_hidden;
  ls.hidden = hidden;
  ls.n_critic_hidden = 2;
  ls.critic_hidden = critic;
  ls.batch_size = 256;
  ls.activation = "relu";
  ls.lr_opt_case = REPLAYD__V1__LEARNER_SPEC__LR_OPT_LR;
  ls.lr = 1e-4;
  ls.critic_lr_opt_case = REPLAYD__V1__LEARNER_SPEC__CRITIC_LR_OPT_CRITIC_LR;
  ls.critic_lr = 1e-3;
  ls.gamma_opt_case = REPLAYD__V1__LEARNER_SPEC__GAMMA_OPT_GAMMA;
  ls.gamma = 0.99;
  ls.tau_opt_case = REPLAYD__V1__LEARNER_SPEC__TAU_OPT_TAU;
  ls.tau = 0.005;
  ls.grad_clip_opt_case = REPLAYD__V1__LEARNER_SPEC__GRAD_CLIP_OPT_GRAD_CLIP;
  ls.grad_clip = 10;
  ls.action_low_opt_case = REPLAYD__V1__LEARNER_SPEC__ACTION_LOW_OPT_ACTION_LOW;
  ls.action_low = -2;
  ls.action_high_opt_case = REPLAYD__V1__LEARNER_SPEC__ACTION_HIGH_OPT_ACTION_HIGH;
  ls.action_high = 2;
  ls.relaxation_depth = 4;
  ls.samples_per_insert = 64;
  ls.min_size = 1000;
  static Replayd__V1__WorkloadSpec spec;
  replayd__v1__workload_spec__init(&spec);
  spec.name = "pendulum-ddpg";
  spec.capacity = 100000;
  spec.learner = with_learner ? &ls : NULL;
  static Replayd__V1__LearnerCounters lc;
  replayd__v1__learner_counters__init(&lc);
  lc.steps = 12345;
  lc.weight_version = 678;
  lc.loss = 0.25;
  lc.steps_per_second = 1500.5;
  lc.skipped_steps = 3;
  lc.late_updates = 9;
  static Replayd__V1__WorkloadCounters wc;
  replayd__v1__workload_counters__init(&wc);
  wc.inserts = 4242;
  Replayd__V1__Workload w = REPLAYD__V1__WORKLOAD__INIT;
  w.id = "w1";
  w.spec = &spec;
  w.counters = &wc;
  w.learner = with_learner ? &lc : NULL;
  mock_reply_msg(&w.base);
}

static void test_describe_reads_learner(void **state) {
  (void)state;
  describe_reply(1, 2, "ddpg");
  rdc_workload_t out;
  rdc_error_t e;
  assert_int_equal(rdc_describe(mock_cli, "w1", &out, &e), RDC_OK);
  const rdc_learner_spec_t *l = &out.spec.learner;
  assert_true(out.spec.has_learner);
  assert_string_equal(l->algorithm, "ddpg");
  assert_string_equal(l->activation, "relu");
  assert_int_equal(l->n_hidden, 2);
  assert_int_equal(l->hidden[1], 65);
  assert_int_equal(l->n_critic_hidden, 2);
  assert_int_equal(l->critic_hidden[0], 256);
  assert_int_equal(l->batch_size, 256);
  assert_true(l->has_lr && l->lr == 1e-4);
  assert_true(l->has_critic_lr && l->critic_lr == 1e-3);
  assert_true(l->has_gamma && l->gamma == 0.99);
  assert_true(l->has_tau && l->tau == 0.005);
  assert_true(l->has_grad_clip && l->grad_clip == 10);
  assert_true(l->has_action_low && l->action_low == -2);
  assert_true(l->has_action_high && l->action_high == 2);
  assert_false(l->has_huber_delta); /* DDPG: not set by the server */
  assert_false(l->has_double_dqn);
  assert_int_equal(l->relaxation_depth, 4);
  assert_true(l->samples_per_insert == 64);
  assert_int_equal(l->min_size, 1000);
  assert_true(out.has_learner_counters);
  assert_int_equal(out.learner.steps, 12345);
  assert_int_equal(out.learner.weight_version, 678);
  assert_true(out.learner.loss == 0.25);
  assert_true(out.learner.steps_per_second == 1500.5);
  assert_int_equal(out.learner.skipped_steps, 3);
  assert_int_equal(out.learner.late_updates, 9);
  assert_int_equal(out.counters.inserts, 4242);

  /* A plain replay workload: neither section. */
  describe_reply(0, 0, "");
  assert_int_equal(rdc_describe(mock_cli, "w1", &out, &e), RDC_OK);
  assert_false(out.spec.has_learner);
  assert_false(out.has_learner_counters);
  assert_int_equal(out.learner.steps, 0);

}

static void test_list_and_info_read_learner(void **state) {
  (void)state;
  Replayd__V1__LearnerSpec ls = REPLAYD__V1__LEARNER_SPEC__INIT;
  ls.algorithm = "dqn";
  ls.num_actions = 2;
  Replayd__V1__WorkloadSpec spec = REPLAYD__V1__WORKLOAD_SPEC__INIT;
  spec.learner = &ls;
  Replayd__V1__LearnerCounters lc = REPLAYD__V1__LEARNER_COUNTERS__INIT;
  lc.weight_version = 5;
  Replayd__V1__Workload a, b, *ws[] = {&a, &b};
  rdt_cl_workload(&a, "a", &spec, NULL);
  a.learner = &lc;
  rdt_cl_workload(&b, "b", NULL, NULL);
  rdc_workload_t *items;
  assert_int_equal(rdt_cl_list(ws, 2, &items), 2);
  assert_true(items[0].spec.has_learner && items[0].has_learner_counters);
  assert_string_equal(items[0].spec.learner.algorithm, "dqn");
  assert_int_equal(items[0].spec.learner.num_actions, 2);
  assert_int_equal(items[0].learner.weight_version, 5);
  assert_false(items[1].spec.has_learner || items[1].has_learner_counters);
  rdc_list_free(items);

  Replayd__V1__ServerInfoResponse si;
  rdt_cl_server_info(&si, "0.1.0", 0, NULL, 0, ws, 2);
  rdc_server_info_t *info;
  assert_int_equal(rdt_cl_info(&si, &info), RDC_OK);
  assert_int_equal(info->n_workloads, 2);
  assert_int_equal(info->workloads[0].learner.weight_version, 5);
  assert_true(info->workloads[0].spec.has_learner);
  assert_false(info->workloads[1].has_learner_counters);
  rdc_server_info_free(info);
}

static void test_describe_learner_beyond_limits(void **state) {
  (void)state;
  rdc_workload_t out;
  rdc_error_t e;
  describe_reply(1, RDC_MAX_HIDDEN + 1, "ddpg");
  assert_int_equal(rdc_describe(mock_cli, "w1", &out, &e), RDC_ETOOSMALL);
  assert_non_null(strstr(e.msg, "hidden"));
  describe_reply(1, 1, "a-much-longer-algorithm-name");
  assert_int_equal(rdc_describe(mock_cli, "w1", &out, &e), RDC_ETOOSMALL);
  assert_non_null(strstr(e.msg, "algorithm"));
  describe_reply(1, RDC_MAX_HIDDEN, "dqn"); /* exactly the limit is fine */
  assert_int_equal(rdc_describe(mock_cli, "w1", &out, &e), RDC_OK);
  assert_int_equal(out.spec.learner.n_hidden, RDC_MAX_HIDDEN);
  assert_int_equal(out.spec.learner.hidden[RDC_MAX_HIDDEN - 1], 64 + RDC_MAX_HIDDEN - 1);
}

static void test_train_step(void **state) {
  (void)state;
  Replayd__V1__TrainStepResponse r = REPLAYD__V1__TRAIN_STEP_RESPONSE__INIT;
  r.steps_done = 100;
  r.loss_mean = 0.5;
  r.td_abs_mean = 0.25;
  r.td_abs_max = 4;
  r.weight_version = 17;
  r.steps_per_second = 2000;
  r.skipped_steps = 2;
  mock_reply_msg(&r.base);
  rdc_train_result_t out;
  rdc_error_t e;
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 100, &out, &e), RDC_OK);
  assert_int_equal(out.steps_done, 100);
  assert_true(out.loss_mean == 0.5 && out.td_abs_mean == 0.25 && out.td_abs_max == 4);
  assert_int_equal(out.weight_version, 17);
  assert_true(out.steps_per_second == 2000);
  assert_int_equal(out.skipped_steps, 2);
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "TrainStep", TOKEN), 0);
  Replayd__V1__TrainStepRequest *q =
      replayd__v1__train_step_request__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(q);
  assert_string_equal(q->workload_id, "w1");
  assert_int_equal(q->steps, 100);
  replayd__v1__train_step_request__free_unpacked(q, NULL);

  /* The server's refusals come through with their message. */
  mock_reply_status(9, "workload w1 has 10 items; training needs min_size 1000");
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 1, &out, &e), RDC_FAILED_PRECONDITION);
  assert_string_equal(e.msg, "workload w1 has 10 items; training needs min_size 1000");
  assert_int_equal(out.steps_done, 0);
  mock_reply_status(10, "a TrainStep is already running");
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 1, &out, &e), RDC_ABORTED);
  mock_reply_status(12, "");
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 1, &out, &e), RDC_UNIMPLEMENTED);
  assert_non_null(strstr(e.msg, "TrainStep"));

  /* More steps than asked, more skipped than done: a broken reply. */
  r.steps_done = 101;
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 100, &out, &e), RDC_EPROTO);
  assert_int_equal(out.steps_done, 0);
  r.steps_done = 1;
  r.skipped_steps = 2;
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 100, &out, &e), RDC_EPROTO);

  /* Local argument errors send nothing. */
  mock_seen_t before, after;
  mock_seen(&before);
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 0, &out, &e), RDC_EINVAL);
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 65537, &out, &e), RDC_EINVAL);
  assert_int_equal(rdc_train_step(mock_cli, "", TOKEN, 1, &out, &e), RDC_EINVAL);
  assert_int_equal(rdc_train_step(mock_cli, "w1", TOKEN, 1, NULL, &e), RDC_EINVAL);
  assert_int_equal(rdc_train_step(mock_cli, "w1", "bad\ntoken", 1, &out, &e), RDC_EINVAL);
  mock_seen(&after);
  assert_int_equal(before.calls, after.calls);
}

static void test_get_weights(void **state) {
  (void)state;
  uint8_t w[300];
  for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)(i * 7);
  Replayd__V1__GetWeightsResponse r = REPLAYD__V1__GET_WEIGHTS_RESPONSE__INIT;
  r.version = 3;
  r.weights.data = w;
  r.weights.len = sizeof w;
  mock_reply_msg(&r.base);
  uint8_t buf[512];
  memset(buf, 0xee, sizeof buf);
  uint64_t version = 99;
  size_t len = 99;
  rdc_error_t e;
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 2, &version, buf, sizeof buf, &len, &e),
                   RDC_OK);
  assert_int_equal(version, 3);
  assert_int_equal(len, sizeof w);
  assert_memory_equal(buf, w, sizeof w);
  assert_int_equal(buf[sizeof w], 0xee); /* nothing past the weights */
  mock_seen_t seen;
  assert_int_equal(rdt_cl_seen(&seen, "GetWeights", TOKEN), 0);
  Replayd__V1__GetWeightsRequest *q =
      replayd__v1__get_weights_request__unpack(NULL, seen.body_len, seen.body);
  assert_non_null(q);
  assert_string_equal(q->workload_id, "w1");
  assert_int_equal(q->have_version, 2);
  replayd__v1__get_weights_request__free_unpacked(q, NULL);

  /* Too small: the needed size and the version come back, buf untouched. */
  mock_reply_msg(&r.base);
  memset(buf, 0xee, sizeof buf);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, &version, buf, 100, &len, &e),
                   RDC_ETOOSMALL);
  assert_int_equal(len, sizeof w);
  assert_int_equal(version, 3);
  assert_int_equal(buf[0], 0xee);
  assert_non_null(strstr(e.msg, "300"));
  /* A version probe with no buffer at all. */
  mock_reply_msg(&r.base);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, &version, NULL, 0, &len, &e),
                   RDC_ETOOSMALL);
  assert_int_equal(len, sizeof w);

  /* Nothing newer: empty weights, the server's version, buf untouched. */
  Replayd__V1__GetWeightsResponse same = REPLAYD__V1__GET_WEIGHTS_RESPONSE__INIT;
  same.version = 3;
  mock_reply_msg(&same.base);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 3, &version, buf, sizeof buf, &len, &e),
                   RDC_OK);
  assert_int_equal(version, 3);
  assert_int_equal(len, 0);
  assert_int_equal(buf[0], 0xee);
  /* No weights at all yet (version 0). */
  same.version = 0;
  mock_reply_msg(&same.base);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, &version, buf, sizeof buf, &len, &e),
                   RDC_OK);
  assert_int_equal(version, 0);
  assert_int_equal(len, 0);

  /* Broken replies: a newer version without weights, weights that are not newer. */
  same.version = 4;
  mock_reply_msg(&same.base);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 3, &version, buf, sizeof buf, &len, &e),
                   RDC_EPROTO);
  assert_int_equal(len, 0);
  mock_reply_msg(&r.base); /* version 3 with weights */
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 3, &version, buf, sizeof buf, &len, &e),
                   RDC_EPROTO);
  assert_int_equal(version, 0);

  mock_reply_status(9, "workload w1 has no learner");
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, &version, buf, sizeof buf, &len, &e),
                   RDC_FAILED_PRECONDITION);
  assert_string_equal(e.msg, "workload w1 has no learner");

  mock_seen_t before, after;
  mock_seen(&before);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, NULL, buf, sizeof buf, &len, &e),
                   RDC_EINVAL);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, &version, buf, sizeof buf, NULL, &e),
                   RDC_EINVAL);
  assert_int_equal(rdc_get_weights(mock_cli, "w1", TOKEN, 0, &version, NULL, 10, &len, &e),
                   RDC_EINVAL);
  assert_int_equal(rdc_get_weights(mock_cli, NULL, TOKEN, 0, &version, buf, sizeof buf, &len, &e),
                   RDC_EINVAL);
  mock_seen(&after);
  assert_int_equal(before.calls, after.calls);
}

RDT_MAIN(mock_group_setup, mock_group_teardown,
         cmocka_unit_test_setup(test_register_sends_learner, mock_test_setup),
         cmocka_unit_test_setup(test_register_ddpg_optional_values, mock_test_setup),
         cmocka_unit_test_setup(test_register_bad_learner_is_local, mock_test_setup),
         cmocka_unit_test_setup(test_describe_reads_learner, mock_test_setup),
         cmocka_unit_test_setup(test_list_and_info_read_learner, mock_test_setup),
         cmocka_unit_test_setup(test_describe_learner_beyond_limits, mock_test_setup),
         cmocka_unit_test_setup(test_train_step, mock_test_setup),
         cmocka_unit_test_setup(test_get_weights, mock_test_setup))
