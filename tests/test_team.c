/* test_team.c - the learner's thread team (backends/cpu/team.h): every task
 * of every job runs exactly once, whoever claims it; jobs back to back and
 * after the workers fell asleep; solo runs; idle work; home tasks; bad sizes. Run under TSan in CI
 * (scripts/test TSAN_TESTS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "rd_clock.h"
#include "team.h"
#include "rdt_main.h"

#define MAX_TASKS 64

typedef struct {
  _Atomic uint32_t runs[MAX_TASKS];
  uint32_t job;           /* written by the caller before each run */
  _Atomic uint32_t wrong; /* tasks that saw another job's number */
  uint32_t seen_job[MAX_TASKS];
} count_t;

static void count_task(void *arg, uint32_t task) {
  count_t *c = arg;
  atomic_fetch_add(&c->runs[task], 1);
  c->seen_job[task] = c->job; /* plain write: one writer per task and job */
  /* A little work, so workers get a chance to claim some tasks. */
  volatile double x = 0;
  for (int i = 0; i < 2000; i++) x += i * 0.5;
}

static void check_once(count_t *c, uint32_t n) {
  for (uint32_t i = 0; i < MAX_TASKS; i++) {
    uint32_t want = i < n ? 1u : 0u;
    if (atomic_load(&c->runs[i]) != want)
      fail_msg("job %u task %u ran %u times", c->job, i, atomic_load(&c->runs[i]));
    if (i < n && c->seen_job[i] != c->job) fail_msg("task %u ran for another job", i);
    atomic_store(&c->runs[i], 0);
  }
}

/* Jobs j0 .. j1 - 1, job j of 1 + (j * step) % MAX_TASKS tasks, each
 * checked. */
static void run_jobs(rd_team_t *t, count_t *c, uint32_t j0, uint32_t j1, uint32_t step) {
  for (uint32_t j = j0; j < j1; j++) {
    uint32_t n = 1 + (j * step) % MAX_TASKS;
    c->job = j;
    rd_team_run(t, 0, n, count_task, c);
    check_once(c, n);
  }
}

static void test_every_task_once(void **state) {
  (void)state;
  for (uint32_t threads = 2; threads <= 4; threads++) {
    rd_team_t *t = NULL;
    assert_int_equal(rd_team_create(&t, threads, NULL), RD_OK);
    count_t c;
    memset(&c, 0, sizeof c);
    for (uint32_t j = 0; j < 3000; j += 1000) {
      run_jobs(t, &c, j, j + 1000, 7);
      /* let the workers fall asleep, then wake them */
      struct timespec ts = {0, 2 * (long)RD_TEAM_SPIN_US * 1000};
      nanosleep(&ts, NULL);
    }
    rd_team_destroy(t);
  }
}

static void test_solo_and_null(void **state) {
  (void)state;
  count_t c;
  memset(&c, 0, sizeof c);
  rd_team_run(NULL, 0, 9, count_task, &c); /* no team: the caller runs all */
  check_once(&c, 9);
  rd_team_t *t = NULL;
  assert_int_equal(rd_team_create(&t, 2, NULL), RD_OK);
  rd_team_run(t, 1, 17, count_task, &c); /* solo */
  check_once(&c, 17);
  rd_team_run(t, 0, 0, count_task, &c); /* nothing to do */
  check_once(&c, 0);
  rd_team_destroy(t);
  rd_team_destroy(NULL);
}

/* rd_team_set_idle: workers run the idle function between jobs (every
 * job's tasks still run once), again while it reports work, and never
 * after rd_team_set_idle(NULL) returned; it returns only once no worker is
 * inside the old function. */
typedef struct {
  _Atomic uint32_t calls, inside, after_close, budget;
  _Atomic int closed;
} idle_t;

static int idle_fn(void *arg) {
  idle_t *d = arg;
  atomic_fetch_add(&d->inside, 1);
  atomic_fetch_add(&d->calls, 1);
  if (atomic_load(&d->closed)) atomic_fetch_add(&d->after_close, 1);
  /* Linger, so that rd_team_set_idle(NULL) finds a worker inside. */
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
  uint32_t b = atomic_load(&d->budget);
  int did = b > 0 && atomic_compare_exchange_strong(&d->budget, &b, b - 1);
  atomic_fetch_sub(&d->inside, 1);
  return did;
}

static void test_idle_work(void **state) {
  (void)state;
  for (uint32_t threads = 2; threads <= 3; threads++) {
    rd_team_t *t = NULL;
    assert_int_equal(rd_team_create(&t, threads, NULL), RD_OK);
    idle_t d;
    memset(&d, 0, sizeof d);
    atomic_store(&d.budget, 50); /* 50 calls that "did work", then none */
    rd_team_set_idle(t, idle_fn, &d);
    count_t c;
    memset(&c, 0, sizeof c);
    run_jobs(t, &c, 0, 400, 5);
    assert_true(atomic_load(&d.calls) > 0);
    rd_team_set_idle(t, NULL, NULL);
    assert_int_equal(atomic_load(&d.inside), 0);
    atomic_store(&d.closed, 1);
    run_jobs(t, &c, 400, 800, 5);
    assert_int_equal(atomic_load(&d.after_close), 0);
    rd_team_destroy(t);
  }
  rd_team_set_idle(NULL, idle_fn, NULL); /* no team: nothing */
}

/* Home tasks (team.c): task q of a job runs on thread q % threads (the
 * caller is thread 0) when every thread is there to claim it. The tasks
 * here meet in rounds of `threads`: a task of round g waits until every
 * task of rounds 0..g has started, so a thread that is inside one cannot
 * take another, and no thread is free to take someone else's task while
 * its owner is slow; the caller leaves each round last. With tickets
 * alone, the workers took the caller's tasks of the next round. */
typedef struct {
  uint32_t threads;
  _Atomic uint32_t started, timed_out;
  pthread_t ran[MAX_TASKS];
} meet_t;

static void meet_task(void *arg, uint32_t task) {
  meet_t *m = arg;
  atomic_fetch_add(&m->started, 1);
  const uint32_t need = (task / m->threads + 1) * m->threads;
  double t0 = rd_clock_now();
  while (atomic_load(&m->started) < need)
    if (rd_clock_now() - t0 > 10.0) {
      atomic_store(&m->timed_out, 1);
      break;
    }
  m->ran[task] = pthread_self();
  if (task % m->threads == 0) { /* the caller's task: leave late */
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static void test_home_tasks(void **state) {
  (void)state;
  for (uint32_t threads = 2; threads <= 3; threads++) {
    rd_team_t *t = NULL;
    assert_int_equal(rd_team_create(&t, threads, NULL), RD_OK);
    pthread_t home[MAX_TASKS];
    for (int j = 0; j < 300; j++) {
      meet_t m;
      memset(&m, 0, sizeof m);
      m.threads = threads;
      const uint32_t n = threads * (1 + (uint32_t)j % 3);
      rd_team_run(t, 0, n, meet_task, &m);
      if (atomic_load(&m.timed_out))
        fail_msg("%u threads, job %d: a task waited 10 s for the others", threads, j);
      if (j == 0)
        for (uint32_t r = 0; r < threads; r++) home[r] = m.ran[r];
      assert_true(pthread_equal(home[0], pthread_self()));
      for (uint32_t q = 0; q < n; q++)
        if (!pthread_equal(m.ran[q], home[q % threads]))
          fail_msg("%u threads, job %d: task %u ran off its home thread", threads, j, q);
      if (j % 100 == 99) { /* and after the workers fell asleep */
        struct timespec ts = {0, 2 * (long)RD_TEAM_SPIN_US * 1000};
        nanosleep(&ts, NULL);
      }
    }
    rd_team_destroy(t);
  }
}

static void test_bad_sizes(void **state) {
  (void)state;
  rd_team_t *t = (rd_team_t *)&t;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_team_create(&t, 1, &err), RD_EINVAL);
  assert_null(t);
  assert_non_null(strstr(err.msg, "2.."));
  assert_int_equal(rd_team_create(&t, RD_TEAM_MAX_THREADS + 1, &err), RD_EINVAL);
  assert_null(t);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_every_task_once),
         cmocka_unit_test(test_solo_and_null),
         cmocka_unit_test(test_idle_work),
         cmocka_unit_test(test_home_tasks),
         cmocka_unit_test(test_bad_sizes))
