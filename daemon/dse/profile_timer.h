/* profile_timer.h - how the CPU profiler times a primitive (profile.h,
 * "Timing" and "The bound"), and where it runs it ("Pinning").
 *
 * A primitive is a call_fn over its own context. rd_profile_time_calls
 * makes one warm-up call and then up to RD_PROFILE_REPS repetitions of k
 * calls, k sized so a repetition takes about REP_TARGET_S; nothing starts
 * that is estimated to end past its slice or the deadline, and the warm-up
 * is never reported. Internal to the profiler (daemon/dse/profile*.c). */
#ifndef RD_PROFILE_TIMER_H
#define RD_PROFILE_TIMER_H

#include <stdint.h>

#include "cores.h"
#include "rd_clock.h" /* rd_clock_now: the profiler's clock */
#include "rd_error.h"

/* One repetition: about this long, longer than a scheduler tick, so that
 * no figure rests on one tick (shorter repetitions let profiles of the
 * same shape move between registrations: docs/benchmarks.md). */
#define REP_TARGET_S 8e-3
#define MAX_CALLS_PER_REP 100000u

/* One call of a primitive on its context. */
typedef int (*rd_profile_call_fn)(void *ctx, rd_error_t *err);

typedef struct {
  double latency_s; /* median seconds per call */
  uint32_t reps;    /* 0: not measured (no time) */
} rd_profile_timing_t;

/* One warm-up call, then up to RD_PROFILE_REPS repetitions of k calls.
 * est_first is the warm-up's estimate: it starts only if that fits before
 * the deadline. est_call (0: the warm-up's time) is a warm call's estimate,
 * for a warm-up known to be slower than the calls after it (a learner's
 * first step touches its buffers for the first time). A repetition starts
 * only if it ends, at the slowest per-call time seen, by slice_end (the
 * first one: by the deadline). A primitive with no repetition gets
 * reps = 0. Errors: the first failing call's. */
int rd_profile_time_calls(rd_profile_call_fn fn, void *ctx, double est_first, double est_call,
                          double slice_end, double deadline, rd_profile_timing_t *out,
                          rd_error_t *err);

/* The repetitions alone, shared with the GPU profiler (which makes its own
 * warm-ups): up to RD_PROFILE_REPS repetitions of k calls, k = target_s /
 * slowest within [1, max_calls], slowest being a call's estimate. A
 * repetition starts only if it ends, at the slowest per-call time seen, by
 * first_end (the first one) or end (the others). first_sets: the first
 * repetition's per-call time replaces the estimate (else only a slower one
 * does). out as rd_profile_time_calls's; errors: the first failing call's. */
int rd_profile_reps(rd_profile_call_fn fn, void *ctx, double slowest, double target_s,
                    uint32_t max_calls, double first_end, double end, int first_sets,
                    rd_profile_timing_t *out, rd_error_t *err);

/* First touches of fresh memory (page faults), bytes per second, measured
 * once per process: the cost of a new learner's first step is mostly this. */
double rd_profile_touch_bps(void);

/* Run fn(arg) where a pipeline thread of the workload will run (profile.h,
 * "Pinning"): on a new thread created on pin's CPUs; unpinned (pin->n 0),
 * or if the kernel refuses the CPUs (logged), on the calling thread.
 * Returns fn's result. */
int rd_profile_run_pinned(const rd_pin_t *pin, rd_profile_call_fn fn, void *arg, rd_error_t *err);

#endif
