/* profile_timer.c - timing a primitive, and running it on the workload's
 * CPUs (profile_timer.h). */
#include "profile_timer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "profile.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int rd_profile_time_calls(rd_profile_call_fn fn, void *ctx, double est_first, double est_call,
                          double slice_end, double deadline, rd_profile_timing_t *out,
                          rd_error_t *err) {
  out->reps = 0;
  double t0 = rd_clock_now();
  if (t0 + est_first > deadline) return RD_OK;
  int rc = fn(ctx, err);
  if (rc) return rc;
  double warm = rd_clock_now() - t0;
  double slowest = est_call > 0 && est_call < warm ? est_call : warm;
  if (slowest < 1e-9) slowest = 1e-9;
  double quota = slice_end - (t0 + warm);
  double target = quota / RD_PROFILE_REPS < REP_TARGET_S ? quota / RD_PROFILE_REPS : REP_TARGET_S;
  return rd_profile_reps(fn, ctx, slowest, target, MAX_CALLS_PER_REP, deadline,
                         slice_end < deadline ? slice_end : deadline, 0, out, err);
}

int rd_profile_reps(rd_profile_call_fn fn, void *ctx, double slowest, double target_s,
                    uint32_t max_calls, double first_end, double end, int first_sets,
                    rd_profile_timing_t *out, rd_error_t *err) {
  out->reps = 0;
  double kf = target_s / slowest;
  uint32_t k = kf < 1 ? 1 : kf > max_calls ? max_calls : (uint32_t)kf;
  double per_call[RD_PROFILE_REPS];
  uint32_t reps = 0;
  while (reps < RD_PROFILE_REPS) {
    double start = rd_clock_now();
    if (start + k * slowest > (reps == 0 ? first_end : end)) break;
    for (uint32_t i = 0; i < k; i++) {
      int rc = fn(ctx, err);
      if (rc != RD_OK) return rc;
    }
    double t = (rd_clock_now() - start) / k;
    per_call[reps++] = t;
    if ((first_sets && reps == 1) || t > slowest) slowest = t;
  }
  if (reps == 0) return RD_OK;
  qsort(per_call, reps, sizeof per_call[0], cmp_double);
  out->latency_s =
      reps % 2 ? per_call[reps / 2] : 0.5 * (per_call[reps / 2 - 1] + per_call[reps / 2]);
  if (!(out->latency_s > 0)) out->latency_s = RD_PROFILE_LATENCY_MIN_S; /* a coarse clock */
  out->reps = reps;
  return RD_OK;
}

/* First touches of fresh memory (page faults), bytes per second, measured
 * once per process on an 8 MiB anonymous mapping: the cost of a new
 * learner's first step is mostly this (5-10x a warm step on this
 * project's VMs, about 0.7 GB/s here), and varies 10x between machines. */
static double touch_rate;
static pthread_once_t touch_once = PTHREAD_ONCE_INIT;

static void measure_touch(void) {
  const size_t bytes = 8u << 20;
  touch_rate = 0.5e9; /* if the mapping fails: a slow machine's rate */
  void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  double t0 = rd_clock_now();
  memset(m, 1, bytes);
  double t = rd_clock_now() - t0;
  munmap(m, bytes);
  if (t > 0) touch_rate = (double)bytes / t;
  if (touch_rate < 0.05e9) touch_rate = 0.05e9;
  if (touch_rate > 50e9) touch_rate = 50e9;
}

double rd_profile_touch_bps(void) {
  pthread_once(&touch_once, measure_touch);
  return touch_rate;
}

/* Run fn(arg) where a pipeline thread of the workload will run (profile.h,
 * "Pinning"): on a new thread created on pin's CPUs, since an OpenMP team
 * keeps the mask its threads were created with and the calling thread's
 * team may be older. Unpinned: on the calling thread. If the kernel
 * refuses the CPUs (or no thread can start), on the calling thread,
 * logged: the figure is still the CPU's, only not that core's. */
typedef struct {
  rd_profile_call_fn fn;
  void *arg;
  rd_error_t *err;
  int rc;
} pinned_job_t;

static void *pinned_main(void *a) {
  pinned_job_t *j = a;
  j->rc = j->fn(j->arg, j->err);
  return NULL;
}

int rd_profile_run_pinned(const rd_pin_t *pin, rd_profile_call_fn fn, void *arg,
                          rd_error_t *err) {
  if (pin->n == 0) return fn(arg, err);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return fn(arg, err);
  rd_error_t perr;
  rd_error_clear(&perr);
  pinned_job_t j = {fn, arg, err, RD_OK};
  pthread_t th;
  int rc = rd_pin_attr(&attr, pin, &perr);
  if (rc == RD_OK && pthread_create(&th, &attr, pinned_main, &j) != 0)
    rc = rd_error_set(&perr, RD_EINTERNAL, "no thread could start on them");
  pthread_attr_destroy(&attr);
  if (rc == RD_OK) {
    pthread_join(th, NULL);
    return j.rc;
  }
  char cpus[64];
  rd_pin_format(pin, cpus, sizeof cpus);
  rd_log_warn("profile", "cannot measure on CPUs %s (%s); measuring unpinned", cpus, perr.msg);
  return fn(arg, err);
}