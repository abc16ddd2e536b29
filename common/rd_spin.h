/* rd_spin.h - a bounded spin before a thread blocks on a hand-off.
 *
 * Why: the strict training loop (depth D = 0, papers/001 §II-A) hands every
 * batch from the sampler thread to the learner thread and its priorities
 * back, so each gradient step is two sleeps and two wake-ups. On this
 * project's VMs one futex wake-up costs 10-15 us (bench_loop, CartPole DDPG
 * at batch 64: a 11 us step ran at 44 us a step in the loop), more than the
 * step itself. A thread that expects its partner back within a few tens of
 * microseconds therefore watches a counter for a while before it sleeps;
 * a partner that takes longer finds it asleep, as before.
 *
 * The rule, shared by the pipeline (daemon/pipeline.c) and its profile
 * (daemon/profile.c, so that the model predicts the loop that runs): spin
 * only if the expected wait is at most RD_SPIN_MAX_S, and then for at most
 * twice the expected wait plus RD_SPIN_SLACK_S. After the first
 * RD_SPIN_EAGER iterations the spinner yields between checks, so a thread
 * that needs the core (a learner team worker, a gRPC thread) gets it.
 *
 * The counter is bumped by the partner under the lock that guards the
 * state, after the change; the spinner re-checks that state under the lock
 * whatever the spin returns, so a spin never loses a wake-up: it only
 * decides whether to sleep now or to look again first.
 */
#ifndef RD_SPIN_H
#define RD_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define RD_SPIN_MAX_S 100e-6
#define RD_SPIN_SLACK_S 5e-6
#define RD_SPIN_EAGER 256u

/* Seconds to spin for a wait expected to take expected_s (<= 0: unknown,
 * do not spin). */
static inline double rd_spin_budget(double expected_s) {
  if (!(expected_s > 0) || expected_s > RD_SPIN_MAX_S) return 0;
  double b = 2 * expected_s + RD_SPIN_SLACK_S;
  return b < RD_SPIN_MAX_S ? b : RD_SPIN_MAX_S;
}

static inline double rd_spin_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spins while *ev == seen, for at most budget_s. 1: it changed; 0: the
 * budget ran out (or was 0). */
static inline int rd_spin_until_changed(_Atomic uint64_t *ev, uint64_t seen, double budget_s) {
  if (!(budget_s > 0)) return 0;
  double end = rd_spin_now() + budget_s;
  for (uint32_t i = 1;; i++) {
    if (atomic_load_explicit(ev, memory_order_acquire) != seen) return 1;
    if (i >= RD_SPIN_EAGER) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else __builtin_ia32_pause();
#endif
    if ((i & 31) == 0 && rd_spin_now() > end) return 0;
  }
}

/* The partner's side: under the lock, after changing the state. */
static inline void rd_spin_bump(_Atomic uint64_t *ev) {
  atomic_fetch_add_explicit(ev, 1, memory_order_release);
}

#endif
