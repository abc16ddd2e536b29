/* team.c - the learner's thread team (team.h says why it exists).
 *
 * Protocol. A job is published in one of two descriptor slots (job & 1),
 * then the 64-bit ticket is set to (job << 32 | 0), then gen is bumped to
 * wake sleepers. A thread claims task i of job j by a compare-and-swap of
 * the ticket from (j << 32 | i) to (j << 32 | i + 1), with i below the
 * job's n, and counts it in `done` when finished. A worker reads the
 * ticket first and then the descriptor of its job's slot; if the caller
 * has since moved on two jobs and reused the slot, the worker's CAS fails
 * because the ticket carries another job number, so a stale descriptor is
 * never run. The caller starts the next job only when done == n, so every
 * counted task belongs to the current job.
 *
 * Home tasks. Each of the first min(n, 32) tasks has a home thread: task
 * q is thread q % threads's (the caller is thread 0, worker i thread
 * i + 1). It is claimed by setting bit q of `home`, a word that carries
 * the job number as the ticket does, and the ticket starts after the
 * homes. A thread claims its own home tasks first, then tickets, then any
 * home task still unclaimed (a late or sleeping thread's). Why: the
 * learner's shards and replicas then run on the same thread step after
 * step, so their buffers stay in one core's cache; with tickets
 * alone the first thread to look took task 0, and the learner's shards
 * swapped cores in about a fifth of its steps.
 */
#define _GNU_SOURCE
#include "team.h"
#include "rd_clock.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

typedef struct {
  _Atomic(rd_team_fn) fn;
  _Atomic(void *) arg;
  _Atomic uint32_t n;
} job_t;

#define TEAM_HOMES 32u /* tasks with a home thread, at most: bits of `home` */

typedef struct {
  struct rd_team *t;
  uint32_t self; /* thread index: 0 is the caller */
} worker_arg_t;

struct rd_team {
  uint32_t threads;
  _Atomic uint64_t home;   /* job << 32 | bit r: home task r claimed (or absent) */
  _Atomic uint64_t ticket; /* job << 32 | next task */
  _Atomic uint32_t done;   /* tasks of the current job finished */
  _Atomic uint32_t gen;    /* futex word: bumped per job and at stop */
  _Atomic uint32_t sleepers;
  _Atomic int wake_pending; /* a wake was sent and no sleeper has returned since */
  _Atomic int stop;
  uint32_t job;            /* the caller's job counter */
  _Atomic(rd_team_idle_fn) idle_fn; /* rd_team_set_idle */
  _Atomic(void *) idle_arg;
  _Atomic uint32_t in_idle; /* workers between looking at idle_fn and leaving it */
  job_t slot[2];
  pthread_t th[RD_TEAM_MAX_THREADS];
  worker_arg_t warg[RD_TEAM_MAX_THREADS];
  uint32_t started;
};

static void futex_wait(_Atomic uint32_t *w, uint32_t val) {
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w) {
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Claim home task q of job `job`: 0 if it is taken or the job is over. */
static int claim_home(rd_team_t *t, uint32_t job, uint32_t q) {
  uint64_t h = atomic_load_explicit(&t->home, memory_order_acquire);
  const uint64_t bit = (uint64_t)1 << q;
  while ((uint32_t)(h >> 32) == job && !(h & bit))
    if (atomic_compare_exchange_weak_explicit(&t->home, &h, h | bit, memory_order_acq_rel,
                                              memory_order_acquire))
      return 1;
  return 0;
}

/* Run a claimed task and count it. */
static void run_task(rd_team_t *t, rd_team_fn fn, void *arg, uint32_t q) {
  fn(arg, q);
  atomic_fetch_add_explicit(&t->done, 1, memory_order_release);
}

/* Claim and run tasks of the job the ticket names now, until none is
 * left: thread self's home task, tickets, then others' home tasks. */
static void work(rd_team_t *t, uint32_t self) {
  uint64_t tk = atomic_load_explicit(&t->ticket, memory_order_acquire);
  const uint32_t job = (uint32_t)(tk >> 32);
  const job_t *j = &t->slot[job & 1];
  rd_team_fn fn = atomic_load_explicit(&j->fn, memory_order_relaxed);
  void *arg = atomic_load_explicit(&j->arg, memory_order_relaxed);
  uint32_t n = atomic_load_explicit(&j->n, memory_order_relaxed);
  const uint32_t homes = n < TEAM_HOMES ? n : TEAM_HOMES;
  for (uint32_t q = self; q < homes; q += t->threads)
    if (claim_home(t, job, q)) run_task(t, fn, arg, q);
  /* A failed CAS reloads tk: stop as soon as it names another job, whose
   * descriptor we have not read. */
  while ((uint32_t)(tk >> 32) == job && (uint32_t)tk < n) {
    if (!atomic_compare_exchange_weak_explicit(&t->ticket, &tk, tk + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    run_task(t, fn, arg, (uint32_t)tk);
    tk = atomic_load_explicit(&t->ticket, memory_order_acquire);
  }
  for (uint32_t q = 0; q < homes; q++)
    if (claim_home(t, job, q)) run_task(t, fn, arg, q);
}

/* One offer of idle work; 1 if it did some. in_idle is raised before
 * idle_fn is read (both sequentially consistent), so rd_team_set_idle,
 * which stores idle_fn before it reads in_idle, either waits for this call
 * or this call sees the new idle_fn. */
static int idle_once(rd_team_t *t) {
  atomic_fetch_add_explicit(&t->in_idle, 1, memory_order_seq_cst);
  rd_team_idle_fn fn = atomic_load_explicit(&t->idle_fn, memory_order_seq_cst);
  int did = fn != NULL && fn(atomic_load_explicit(&t->idle_arg, memory_order_acquire));
  atomic_fetch_sub_explicit(&t->in_idle, 1, memory_order_release);
  return did;
}

static void *worker_main(void *p) {
  const worker_arg_t *wa = p;
  rd_team_t *t = wa->t;
  /* gen's value at create, not now: a worker that starts after the first
   * job was published still joins it. */
  uint32_t seen = 0;
  for (;;) {
    /* Spin for a while for the next job, then sleep on gen. */
    uint64_t until = rd_clock_now_ns() + (uint64_t)RD_TEAM_SPIN_US * 1000u;
    uint32_t g;
    for (uint32_t k = 1;; k++) {
      g = atomic_load_explicit(&t->gen, memory_order_acquire);
      if (g != seen || atomic_load_explicit(&t->stop, memory_order_relaxed)) break;
      /* Past the first few microseconds, spin politely: a yield lets a
       * runnable thread of the process (the pipeline's sampler) have this
       * core while the learner's own thread runs the serial parts of a
       * step; pure spinning starved it (bench_loop, CartPole at 2048:
       * 0.53 of the learner's rate with it). */
      if (k < 1024) cpu_relax();
      else sched_yield();
      if ((k >= 1024 || (k & 255) == 0) && rd_clock_now_ns() >= until) {
        atomic_fetch_add_explicit(&t->sleepers, 1, memory_order_seq_cst);
        futex_wait(&t->gen, seen);
        atomic_fetch_sub_explicit(&t->sleepers, 1, memory_order_seq_cst);
        atomic_store_explicit(&t->wake_pending, 0, memory_order_relaxed);
        until = rd_clock_now_ns() + (uint64_t)RD_TEAM_SPIN_US * 1000u;
      }
    }
    if (atomic_load_explicit(&t->stop, memory_order_relaxed)) break;
    seen = g;
    work(t, wa->self);
    while (atomic_load_explicit(&t->gen, memory_order_acquire) == seen &&
           !atomic_load_explicit(&t->stop, memory_order_relaxed) && idle_once(t)) {
    }
  }
  return NULL;
}

int rd_team_create(rd_team_t **out, uint32_t threads, rd_error_t *err) {
  *out = NULL;
  if (threads < 2 || threads > RD_TEAM_MAX_THREADS)
    return rd_error_set(err, RD_EINVAL, "a team has 2..%u threads, not %u", RD_TEAM_MAX_THREADS,
                        threads);
  rd_team_t *t = calloc(1, sizeof *t);
  if (t == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for a thread team");
  t->threads = threads;
  /* An empty job 0 in slot 0, so a worker that looks before the first job
   * finds nothing to claim. */
  atomic_init(&t->ticket, 0);
  atomic_init(&t->home, ~(uint64_t)0 >> 32); /* job 0: every home taken */
  atomic_init(&t->slot[0].n, 0);
  atomic_init(&t->slot[1].n, 0);
  for (uint32_t i = 0; i + 1 < threads; i++) {
    t->warg[i].t = t;
    t->warg[i].self = i + 1;
    if (pthread_create(&t->th[i], NULL, worker_main, &t->warg[i]) != 0) {
      rd_team_destroy(t);
      return rd_error_set(err, RD_EINTERNAL, "cannot start a learner team thread");
    }
    t->started++;
  }
  *out = t;
  return RD_OK;
}

void rd_team_destroy(rd_team_t *t) {
  if (t == NULL) return;
  atomic_store_explicit(&t->stop, 1, memory_order_seq_cst);
  atomic_fetch_add_explicit(&t->gen, 1, memory_order_seq_cst);
  futex_wake_all(&t->gen);
  for (uint32_t i = 0; i < t->started; i++) pthread_join(t->th[i], NULL);
  free(t);
}

void rd_team_run(rd_team_t *t, int solo, uint32_t n, rd_team_fn fn, void *arg) {
  if (n == 0) return;
  if (t == NULL || solo || n == 1) {
    for (uint32_t i = 0; i < n; i++) fn(arg, i);
    return;
  }
  uint32_t job = ++t->job;
  job_t *j = &t->slot[job & 1];
  atomic_store_explicit(&j->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&j->arg, arg, memory_order_relaxed);
  atomic_store_explicit(&j->n, n, memory_order_relaxed);
  atomic_store_explicit(&t->done, 0, memory_order_relaxed);
  /* Homes past n are set as taken; the tickets start after the homes. */
  const uint32_t homes = n < TEAM_HOMES ? n : TEAM_HOMES;
  const uint64_t absent = ~(uint64_t)0 >> 32 << homes & 0xffffffffu;
  atomic_store_explicit(&t->home, (uint64_t)job << 32 | absent, memory_order_relaxed);
  /* release: a worker that acquires the new ticket sees the descriptor and
   * the homes. */
  atomic_store_explicit(&t->ticket, (uint64_t)job << 32 | homes, memory_order_release);
  atomic_fetch_add_explicit(&t->gen, 1, memory_order_seq_cst);
  /* One wake per sleep: on this project's VMs a futex wake costs the waker
   * about 30 us and the sleeper may take a scheduler tick (4 ms) to run;
   * waking it again for every job of every step while it is on its way
   * cost more than the step (measured: 250 us against 95 us alone). The
   * jobs meanwhile run on the caller (tasks are claimed, not assigned). */
  if (atomic_load_explicit(&t->sleepers, memory_order_seq_cst) > 0 &&
      !atomic_exchange_explicit(&t->wake_pending, 1, memory_order_relaxed))
    futex_wake_all(&t->gen);
  work(t, 0);
  /* Wait for tasks the workers started: short (one task at most each). */
  while (atomic_load_explicit(&t->done, memory_order_acquire) < n) cpu_relax();
}

void rd_team_set_idle(rd_team_t *t, rd_team_idle_fn fn, void *arg) {
  if (t == NULL) return;
  atomic_store_explicit(&t->idle_fn, NULL, memory_order_seq_cst);
  while (atomic_load_explicit(&t->in_idle, memory_order_seq_cst) > 0) sched_yield();
  atomic_store_explicit(&t->idle_arg, arg, memory_order_release);
  atomic_store_explicit(&t->idle_fn, fn, memory_order_seq_cst);
}
