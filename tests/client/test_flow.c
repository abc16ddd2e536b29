/* test_flow.c - libreplayd-client's flow control against a real
 * replayd: rdc_sample_wait and rdc_insert_batch_wait (a wait with its own
 * deadline, and fail-fast), rdc_set_rate_limiter, the rate limiter's state
 * in rdc_describe, the sampler (window, updates on the stream, a timeout
 * that leaves it open, the workload deleted under it), and a learning run
 * with replayd-remote-learner and replayd-actor that keeps the configured
 * ratio within the error buffer at every look.
 *
 *   test_client_flow PATH-TO-REPLAYD PATH-TO-REMOTE-LEARNER PATH-TO-ACTOR
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rd_clock.h"
#include "rdt_cl_main.h"
#include "rdt_client.h"
#include "replayd_client.h"

extern char **environ;

static const char *replayd_path, *learner_path, *actor_path;
static const char *const target = rdt_replayd.target;

static int group_setup(void **state) {
  (void)state;
  return rdt_client_group_start(replayd_path, &(rdt_daemon_opts_t){.tag = "client_flow"}, 20);
}

static void must(int rc, const rdc_error_t *e) {
  if (rc != RDC_OK) fail_msg("%s: %s", rdc_strerror(rc), e->msg);
}

/* Registers "flow": one field, tag int64 (row k holds 1000000 + k), with
 * the rate limiter rl. */
static void register_flow(const rdc_rate_limiter_t *rl, rdc_workload_t *w) {
  rdc_spec_t s;
  rdt_client_spec(&s, "flow", 10000);
  rdt_client_add_field(&s, "tag", RDC_DTYPE_INT64, 0);
  s.has_rate_limiter = 1;
  s.rate_limiter = *rl;
  rdc_error_t e;
  must(rdc_register(rdt_cli, &s, w, &e), &e);
}

static void insert(const rdc_workload_t *w, uint64_t first, uint32_t n) {
  int64_t tag[512];
  assert_true(n <= 512);
  for (uint32_t i = 0; i < n; i++) tag[i] = 1000000 + (int64_t)(first + i);
  rdc_column_t col = {tag, n * sizeof(int64_t)};
  rdc_error_t e;
  must(rdc_insert_batch(rdt_cli, w->id, w->token, n, &col, 1, NULL, NULL, &e), &e);
}

typedef struct {
  uint64_t keys[64];
  double p[64], wt[64];
  int64_t tag[64];
  rdc_buffer_t col;
  rdc_sample_t io;
} batch_t;

static void batch_init(batch_t *b) {
  memset(b, 0, sizeof *b);
  b->col = (rdc_buffer_t){b->tag, sizeof b->tag, 0};
  b->io = (rdc_sample_t){b->keys, b->p, b->wt, &b->col, 1, 0, 0};
}

/* A sampler of w: batches of 16, at most 4 of them ahead, beta 0.5. */
static rdc_sampler_t *open_sampler(const rdc_workload_t *w) {
  rdc_sampler_opts_t o;
  rdc_sampler_opts_init(&o);
  o.batch_size = 16;
  o.window = 4;
  o.beta = 0.5;
  rdc_sampler_t *sm = NULL;
  rdc_error_t e;
  must(rdc_sampler_open(rdt_cli, w->id, w->token, &o, &sm, &e), &e);
  return sm;
}

static void test_waits(void **state) {
  (void)state;
  rdc_workload_t w;
  register_flow(&(rdc_rate_limiter_t){.min_size_to_sample = 50}, &w);
  rdc_error_t e;
  batch_t b;
  batch_init(&b);
  double t0 = rd_clock_now();
  assert_int_equal(rdc_sample_wait(rdt_cli, w.id, w.token, 8, NAN, 0, 0, &b.io, &e),
                   RDC_DEADLINE_EXCEEDED);
  assert_non_null(strstr(e.msg, "min_size_to_sample"));
  /* At once, not after the client's default deadline (30 s); the bound is
   * loose for a loaded machine. */
  assert_true(rd_clock_now() - t0 < 15);
  t0 = rd_clock_now();
  assert_int_equal(rdc_sample_wait(rdt_cli, w.id, w.token, 8, NAN, 0, 0.3, &b.io, &e),
                   RDC_DEADLINE_EXCEEDED);
  assert_true(rd_clock_now() - t0 >= 0.29);
  assert_int_equal(rdc_sample_wait(rdt_cli, w.id, w.token, 8, NAN, 0, -1, &b.io, &e), RDC_EINVAL);
  insert(&w, 0, 50);
  must(rdc_sample_wait(rdt_cli, w.id, w.token, 8, NAN, 0, 5, &b.io, &e), &e);
  assert_int_equal(b.io.count, 8);
  for (uint32_t i = 0; i < 8; i++) assert_int_equal(b.tag[i], 1000000 + (int64_t)b.keys[i]);
  rdc_workload_t d;
  must(rdc_describe(rdt_cli, w.id, &d, &e), &e);
  assert_true(d.has_rate_limiter && d.spec.has_rate_limiter);
  assert_int_equal(d.rate_limiter.config.min_size_to_sample, 50);
  assert_int_equal(d.rate_limiter.inserted, 50);
  assert_int_equal(d.rate_limiter.sampled, 8);
  assert_int_equal(d.rate_limiter.sample_waits, 1); /* the 0.3 s one */

  /* Inserts: a ratio of 1 within [0, 10] from 1 item on. */
  rdc_rate_limiter_t ratio = {.min_size_to_sample = 1, .samples_per_insert = 1,
                              .has_min_diff = 1, .min_diff = 0, .has_max_diff = 1,
                              .max_diff = 10};
  rdc_workload_t d2;
  must(rdc_set_rate_limiter(rdt_cli, w.id, w.token, &ratio, &d2, &e), &e);
  assert_true(d2.rate_limiter.config.max_diff == 10);
  int64_t tag[2] = {0, 0};
  rdc_column_t col = {tag, sizeof tag};
  /* I 50, S 8: 52 - 8 > 10, the insert is held back. */
  assert_int_equal(rdc_insert_batch_wait(rdt_cli, w.id, w.token, 2, &col, 1, NULL, NULL, 0, &e),
                   RDC_DEADLINE_EXCEEDED);
  assert_non_null(strstr(e.msg, "max_diff"));
  must(rdc_sample_wait(rdt_cli, w.id, w.token, 40, NAN, 0, 5, &b.io, &e), &e); /* 50 - 48 = 2 */
  must(rdc_insert_batch_wait(rdt_cli, w.id, w.token, 2, &col, 1, NULL, NULL, 0, &e), &e);
  /* None: everything runs. */
  must(rdc_set_rate_limiter(rdt_cli, w.id, w.token, NULL, &d2, &e), &e);
  assert_false(d2.has_rate_limiter);
  must(rdc_sample_wait(rdt_cli, w.id, w.token, 50, NAN, 0, 0, &b.io, &e), &e);
  /* The owner's call only. */
  assert_int_equal(rdc_set_rate_limiter(rdt_cli, w.id, "0", &ratio, NULL, &e),
                   RDC_PERMISSION_DENIED);
  must(rdc_delete(rdt_cli, w.id, w.token, &e), &e);
}

static void test_sampler(void **state) {
  (void)state;
  rdc_workload_t w;
  register_flow(&(rdc_rate_limiter_t){.min_size_to_sample = 100}, &w);
  rdc_error_t e;
  rdc_sampler_t *sm = open_sampler(&w);
  batch_t b;
  batch_init(&b);
  /* Below min size: the batch waits in the server; next times out and the
   * sampler stays open. */
  assert_int_equal(rdc_sampler_next(sm, 0.2, &b.io, &e), RDC_DEADLINE_EXCEEDED);
  for (uint64_t k = 0; k < 100; k += 50) insert(&w, k, 50);
  for (int i = 0; i < 20; i++) {
    must(rdc_sampler_next(sm, 5, &b.io, &e), &e);
    assert_int_equal(b.io.count, 16);
    for (uint32_t j = 0; j < 16; j++) {
      assert_int_equal(b.tag[j], 1000000 + (int64_t)b.keys[j]);
      b.p[j] = 1.0 + j; /* new priorities, sent on the stream */
    }
    must(rdc_sampler_update(sm, 16, b.keys, b.p, &e), &e);
  }
  assert_int_equal(rdc_sampler_taken(sm), 20);
  must(rdc_sampler_close(sm, &e), &e);
  rdc_workload_t d;
  must(rdc_describe(rdt_cli, w.id, &d, &e), &e);
  assert_int_equal(d.counters.updates, 20 * 16);
  /* At most the window ahead of what was taken. */
  assert_true(d.counters.samples >= 20 * 16 && d.counters.samples <= (20 + 4) * 16);
  assert_int_equal(d.rate_limiter.blocked_samples, 0);

  /* A bad update ends the stream with its status. */
  sm = open_sampler(&w);
  must(rdc_sampler_next(sm, 5, &b.io, &e), &e);
  double nan = NAN;
  must(rdc_sampler_update(sm, 1, b.keys, &nan, &e), &e);
  int rc = RDC_OK;
  for (int i = 0; i < 10 && rc == RDC_OK; i++) rc = rdc_sampler_next(sm, 5, &b.io, &e);
  assert_int_equal(rc, RDC_INVALID_ARGUMENT);
  assert_int_equal(rdc_sampler_close(sm, &e), RDC_INVALID_ARGUMENT);

  /* The workload deleted under an open sampler: its next batches end it. */
  sm = open_sampler(&w);
  must(rdc_sampler_next(sm, 5, &b.io, &e), &e);
  must(rdc_delete(rdt_cli, w.id, w.token, &e), &e);
  rc = RDC_OK;
  for (int i = 0; i < 10 && rc == RDC_OK; i++) rc = rdc_sampler_next(sm, 5, &b.io, &e);
  assert_int_equal(rc, RDC_NOT_FOUND);
  assert_int_equal(rdc_sampler_next(sm, 5, &b.io, &e), RDC_NOT_FOUND); /* and stays so */
  rdc_sampler_close(sm, NULL);
}

/* replayd-actor (20000 CartPole steps) and replayd-remote-learner (its
 * stream) on one workload whose rate limiter keeps 4 samples per insert
 * within an error buffer of 512 from 1000 items: looked at every 2 ms, the
 * difference I * 4 - S never leaves [min_diff, max_diff]; at the end the
 * learner has sampled what the limiter allows for the 20000 inserts. */
static void test_remote_learner_keeps_the_ratio(void **state) {
  (void)state;
  rdc_spec_t s;
  rdt_client_spec(&s, "cartpole", 100000);
  rdt_client_cartpole(&s, 5);
  s.has_rate_limiter = 1;
  s.rate_limiter = (rdc_rate_limiter_t){.min_size_to_sample = 1000, .samples_per_insert = 4,
                                        .has_error_buffer = 1, .error_buffer = 512};
  rdc_workload_t w;
  rdc_error_t e;
  must(rdc_register(rdt_cli, &s, &w, &e), &e);
  const double min_diff = 4000 - 512, max_diff = 4000 + 512;
  /* The learner takes what the limiter allows for 20000 inserts. */
  const uint32_t batch = 64;
  const uint64_t iterations = (uint64_t)((20000 * 4 - min_diff) / batch);
  char iters[32];
  snprintf(iters, sizeof iters, "%llu", (unsigned long long)iterations);
  char *largv[] = {(char *)learner_path, "--server", (char *)target, "--workload", w.id, "--token",
                   w.token, "--batch", "64", "--window", "8", "--iterations", iters,
                   "--timeout", "60", NULL};
  char *aargv[] = {(char *)actor_path, "--server", (char *)target, "--workload", w.id, "--token",
                   w.token, "--steps", "20000", "--batch", "64", "--timeout", "60", NULL};
  pid_t lp, ap;
  assert_int_equal(posix_spawn(&lp, learner_path, NULL, NULL, largv, environ), 0);
  assert_int_equal(posix_spawn(&ap, actor_path, NULL, NULL, aargv, environ), 0);
  int looks = 0, done = 0, lst = 0, ast = 0;
  double t0 = rd_clock_now();
  while (done < 2 && rd_clock_now() - t0 < 120) {
    rdc_workload_t d;
    must(rdc_describe(rdt_cli, w.id, &d, &e), &e);
    const rdc_limiter_state_t *l = &d.rate_limiter;
    double diff = (double)l->inserted * 4 - (double)l->sampled;
    if (diff > max_diff || (l->sampled > 0 && diff < min_diff))
      fail_msg("I %llu, S %llu: I x 4 - S = %g is outside [%g, %g]",
               (unsigned long long)l->inserted, (unsigned long long)l->sampled, diff, min_diff,
               max_diff);
    looks++;
    if (lp > 0 && waitpid(lp, &lst, WNOHANG) == lp) lp = 0, done++;
    if (ap > 0 && waitpid(ap, &ast, WNOHANG) == ap) ap = 0, done++;
    usleep(2000);
  }
  if (lp > 0) kill(lp, SIGKILL), waitpid(lp, &lst, 0);
  if (ap > 0) kill(ap, SIGKILL), waitpid(ap, &ast, 0);
  assert_true(WIFEXITED(lst) && WEXITSTATUS(lst) == 0);
  assert_true(WIFEXITED(ast) && WEXITSTATUS(ast) == 0);
  rdc_workload_t d;
  must(rdc_describe(rdt_cli, w.id, &d, &e), &e);
  print_message("%d looks; I %llu, S %llu, ratio %.4f; waited %.2f s (inserts), %.2f s "
                "(samples)\n", looks, (unsigned long long)d.rate_limiter.inserted,
                (unsigned long long)d.rate_limiter.sampled, d.rate_limiter.ratio,
                d.rate_limiter.insert_wait_s, d.rate_limiter.sample_wait_s);
  assert_int_equal(d.rate_limiter.inserted, 20000);
  /* The learner's batches, and the window it had sampled ahead. */
  assert_true(d.rate_limiter.sampled >= iterations * batch);
  assert_true(d.rate_limiter.sampled <= iterations * batch + 8 * batch);
  assert_true(fabs(d.rate_limiter.ratio - 4) / 4 < 0.05);
  must(rdc_delete(rdt_cli, w.id, w.token, &e), &e);
}

RDT_CL_MAIN("REPLAYD REMOTE-LEARNER ACTOR", (&replayd_path, &learner_path, &actor_path),
            group_setup, rdt_client_group_teardown,
            cmocka_unit_test(test_waits),
            cmocka_unit_test(test_sampler),
            cmocka_unit_test(test_remote_learner_keeps_the_ratio))
