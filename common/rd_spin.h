/* rd_spin.h - a bounded spin before a thread blocks on a hand-off.
 *
 * Why: the strict training loop (depth D = 0, papers/001 §II-A) hands every
 * batch from the sampler thread to the learner thread and its priorities
 * back, so each gradient step is two sleeps and two wake-ups, and a futex
 * wake-up can cost more than a small step itself (bench_loop's figures in
 * docs/benchmarks.md). A thread that expects its partner back within a few tens of
 * microseconds therefore watches a counter for a while before it sleeps;
 * a partner that takes longer finds it asleep, as before.
 *
 * The rule (rd_spin_plan), shared by the pipeline (daemon/learn/pipeline.c) and
 * its profile (daemon/dse/profile.c, so that the model predicts the loop that
 * runs): a wait expected to take at most RD_SPIN_MAX_S is spun for at
 * most twice that plus RD_SPIN_SLACK_S. A longer one, up to
 * RD_SPIN_SLEEP_MAX_S, is slept (timed) until RD_SPIN_LEAD_S before its
 * expected end and then spun for up to twice the lead: a Hopper step of
 * 0.75 ms ran with 105-245 us of sleeping hand-offs a step, and a timed
 * sleep wakes on a timer rather than waiting for the partner's futex
 * wake. Waits that are longer still, or unknown, just block. After
 * RD_SPIN_EAGER_S of spinning a spinner yields between checks, so a
 * thread that needs the core (a learner team worker, a gRPC thread) gets
 * it. Not sooner: on this VM a sched_yield is a trip through the
 * hypervisor that leaves the spinner's caches and TLB cold (inside the
 * strict loop, CartPole's sample, gather and update took 5.4, 6.8 and
 * 5.1 us after yielding spins, 4.0, 3.8 and 3.5 us after pure ones).
 *
 * The counter is bumped by the partner under the lock that guards the
 * state, after the change; the spinner re-checks that state under the lock
 * whatever the spin returns, so a spin never loses a wake-up: it only
 * decides whether to sleep now or to look again first.
 */
#ifndef RD_SPIN_H
#define RD_SPIN_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "rd_clock.h"
#include "rd_cond.h"

#define RD_SPIN_MAX_S 100e-6
#define RD_SPIN_SLACK_S 5e-6
#define RD_SPIN_LEAD_S 100e-6
#define RD_SPIN_SLEEP_MAX_S 20e-3
#define RD_SPIN_EAGER_S 30e-6

/* Seconds to spin for a wait expected to take expected_s (<= 0: unknown,
 * do not spin). */
static inline double rd_spin_budget(double expected_s) {
  if (!(expected_s > 0) || expected_s > RD_SPIN_MAX_S) return 0;
  double b = 2 * expected_s + RD_SPIN_SLACK_S;
  return b < RD_SPIN_MAX_S ? b : RD_SPIN_MAX_S;
}

/* For a wait expected to take expected_s: seconds to sleep first (a timed
 * wait the partner can cut short; 0: none) and then to spin (0: none; the
 * caller then blocks). */
static inline void rd_spin_plan(double expected_s, double *sleep_s, double *spin_s) {
  *sleep_s = 0;
  *spin_s = rd_spin_budget(expected_s);
  if (expected_s > RD_SPIN_MAX_S && expected_s <= RD_SPIN_SLEEP_MAX_S) {
    *sleep_s = expected_s - RD_SPIN_LEAD_S;
    *spin_s = 2 * RD_SPIN_LEAD_S;
  }
}

/* Spins while *ev == seen, for at most budget_s. 1: it changed; 0: the
 * budget ran out (or was 0). */
static inline int rd_spin_until_changed(_Atomic uint64_t *ev, uint64_t seen, double budget_s) {
  if (!(budget_s > 0)) return 0;
  double t0 = rd_clock_now(), end = t0 + budget_s, eager_end = t0 + RD_SPIN_EAGER_S;
  int polite = 0;
  for (uint32_t i = 1;; i++) {
    if (atomic_load_explicit(ev, memory_order_acquire) != seen) return 1;
    if (polite) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else __builtin_ia32_pause();
#endif
    if ((i & 31) == 0) {
      double t = rd_clock_now();
      if (t > end) return 0;
      polite = t > eager_end;
    }
  }
}

/* The partner's side: under the lock, after changing the state. */
static inline void rd_spin_bump(_Atomic uint64_t *ev) {
  atomic_fetch_add_explicit(ev, 1, memory_order_release);
}

/* Wakes every waiter of one side, spinning (the counter moves) or asleep
 * on cv (broadcast): what a stop does. The caller holds cv's mutex. */
static inline void rd_spin_wake_all(_Atomic uint64_t *ev, pthread_cond_t *cv) {
  rd_spin_bump(ev);
  pthread_cond_broadcast(cv);
}

/* One stage of a wait by the rule above, under mu (cv on CLOCK_MONOTONIC):
 * at *stage 0 a timed sleep on cv if the plan has one, then at stage 1 a
 * spin on ev; each returns 1 and the caller looks at its condition again
 * (a signal or a bump may have ended it). At stage 2 it returns 0: the
 * caller blocks as it does (a cond_wait, a timed poll). The caller resets
 * *stage to 0 when it has worked. waiting (may be NULL) is set during the
 * timed sleep, for partners that signal only a waiting thread. */
static inline int rd_spin_wait_stage(pthread_cond_t *cv, pthread_mutex_t *mu,
                                     _Atomic uint64_t *ev, double expected_s, int *stage,
                                     int *waiting) {
  if (*stage >= 2) return 0;
  double sleep_s, spin_s;
  rd_spin_plan(expected_s, &sleep_s, &spin_s);
  if (*stage == 0 && sleep_s > 0) {
    *stage = 1;
    struct timespec ts = rd_cond_deadline(sleep_s);
    if (waiting) *waiting = 1;
    pthread_cond_timedwait(cv, mu, &ts);
    if (waiting) *waiting = 0;
    return 1;
  }
  *stage = 2;
  if (!(spin_s > 0)) return 0;
  uint64_t seen = atomic_load_explicit(ev, memory_order_relaxed);
  pthread_mutex_unlock(mu);
  rd_spin_until_changed(ev, seen, spin_s);
  pthread_mutex_lock(mu);
  return 1;
}

#endif
