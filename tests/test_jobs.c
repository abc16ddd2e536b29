/* test_jobs.c - the bounded job queues (daemon/core/jobs.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "jobs.h"
#include "rdt_main.h"

typedef struct {
  atomic_int ran, cancelled, running, max_running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open; /* gate: jobs wait until it opens */
} gate_t;

static void gate_init(gate_t *g) {
  atomic_init(&g->ran, 0);
  atomic_init(&g->cancelled, 0);
  atomic_init(&g->running, 0);
  atomic_init(&g->max_running, 0);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->open = 0;
}

static void gate_open(gate_t *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void gated_job(void *arg, int cancelled) {
  gate_t *g = arg;
  if (cancelled) {
    atomic_fetch_add(&g->cancelled, 1);
    return;
  }
  int now = atomic_fetch_add(&g->running, 1) + 1;
  int m = atomic_load(&g->max_running);
  while (now > m && !atomic_compare_exchange_weak(&g->max_running, &m, now)) {
  }
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  atomic_fetch_sub(&g->running, 1);
  atomic_fetch_add(&g->ran, 1);
}

static void wait_running(gate_t *g, int n) {
  for (int i = 0; i < 5000 && atomic_load(&g->running) < n; i++) usleep(1000);
  assert_int_equal(atomic_load(&g->running), n);
}

static void test_bounds_and_threads(void **state) {
  (void)state;
  gate_t g;
  gate_init(&g);
  rd_jobs_t *q;
  rd_error_t err;
  assert_int_equal(rd_jobs_create(&q, "test", 2, 3, 0, &err), RD_OK);
  /* Two run at once (two threads), three wait, the sixth is refused. */
  for (int i = 0; i < 2; i++) assert_int_equal(rd_jobs_submit(q, gated_job, &g, &err), RD_OK);
  wait_running(&g, 2);
  for (int i = 0; i < 3; i++) assert_int_equal(rd_jobs_submit(q, gated_job, &g, &err), RD_OK);
  assert_int_equal(rd_jobs_pending(q), 5);
  assert_int_equal(rd_jobs_submit(q, gated_job, &g, &err), RD_EBUSY);
  assert_non_null(strstr(err.msg, "retry later"));
  gate_open(&g);
  for (int i = 0; i < 5000 && atomic_load(&g.ran) < 5; i++) usleep(1000);
  assert_int_equal(atomic_load(&g.ran), 5);
  assert_int_equal(atomic_load(&g.max_running), 2);
  /* A job counts itself ran just before its runner takes it off the queue. */
  for (int i = 0; i < 5000 && rd_jobs_pending(q) != 0; i++) usleep(1000);
  assert_int_equal(rd_jobs_pending(q), 0);
  rd_jobs_stop(q);
  assert_int_equal(atomic_load(&g.cancelled), 0);
}

typedef struct {
  rd_jobs_t *q;
  gate_t *g;
} stopper_t;

static void *stop_thread(void *arg) {
  stopper_t *s = arg;
  rd_jobs_stop(s->q);
  return NULL;
}

static void test_stop_cancels_waiting_and_waits_for_running(void **state) {
  (void)state;
  gate_t g;
  gate_init(&g);
  rd_jobs_t *q;
  assert_int_equal(rd_jobs_create(&q, "test", 1, 4, 0, NULL), RD_OK);
  assert_int_equal(rd_jobs_submit(q, gated_job, &g, NULL), RD_OK);
  wait_running(&g, 1);
  for (int i = 0; i < 4; i++) assert_int_equal(rd_jobs_submit(q, gated_job, &g, NULL), RD_OK);
  stopper_t s = {q, &g};
  pthread_t th;
  pthread_create(&th, NULL, stop_thread, &s);
  /* The waiting four are cancelled while the running one still runs. */
  for (int i = 0; i < 5000 && atomic_load(&g.cancelled) < 4; i++) usleep(1000);
  assert_int_equal(atomic_load(&g.cancelled), 4);
  assert_int_equal(atomic_load(&g.ran), 0);
  gate_open(&g);
  pthread_join(th, NULL);
  assert_int_equal(atomic_load(&g.ran), 1); /* every job ran or was cancelled, once */
}

static void test_bad_arguments(void **state) {
  (void)state;
  rd_jobs_t *q;
  rd_error_t err;
  assert_int_equal(rd_jobs_create(&q, "x", 0, 1, 0, &err), RD_EINVAL);
  assert_int_equal(rd_jobs_create(&q, "x", 1, 0, 0, &err), RD_EINVAL);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_bounds_and_threads),
         cmocka_unit_test(test_stop_cancels_waiting_and_waits_for_running),
         cmocka_unit_test(test_bad_arguments))
