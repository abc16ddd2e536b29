/* cores.h - which CPUs a workload's pipeline threads run on.
 *
 * A hosted learner runs on two threads (pipeline.h): the learner's (with
 * its OpenMP team of learner-threads threads) and the sampler's (the sum
 * tree and the storage's gather). The daemon pins both, for two reasons:
 *
 *  - The prediction. A registration profiles the train-step once and
 *    predicts the workload's gradient steps per second from it
 *    (placement.h). The figure only holds on the cores it was measured on:
 *    the vCPUs of a VM can run the same step at clearly different speeds
 *    at the same moment, and an unpinned learner lands on either, so a
 *    prediction made once is bimodal (docs/benchmarks.md has the runs).
 *    Pinned, the profile measures each primitive on the CPU the thread
 *    that runs it will have (profile.h).
 *  - Sharing. Many workloads share the server: each new one's learner goes
 *    to the CPUs least used by the pipelines already pinned, so two OpenMP
 *    teams do not pile onto the same cores while others idle.
 *
 * The assignment (rd_cores_assign): the daemon's allowed CPUs (its own
 * affinity mask, so `taskset` or systemd's CPUAffinity= bound it), ordered
 * by load (the pinned threads of live workloads on each) and then by
 * number. The learner takes the first learner-threads of them; the
 * sampler the next, if the learner left one, and is unpinned otherwise
 * (where it must share the learner's cores, the scheduler places it
 * better than a fixed choice). A learner with more threads than CPUs is
 * not pinned at all.
 *
 * Registrations are placed one at a time (handlers.c) but registered
 * after, so two registering at once may be given the same CPUs: that only
 * shares cores, as without pinning.
 *
 * No allocation; the functions are thread-safe (they touch only their
 * arguments and the calling thread's affinity).
 */
#ifndef RD_CORES_H
#define RD_CORES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

#define RD_PIN_MAX 64 /* CPUs in one pin: the learner's team is at most 64 threads */
#define RD_CORES_MAX 1024 /* CPUs the daemon considers (CPU_SETSIZE) */
#define RD_PIN_TEXT_MAX 320 /* rd_pin_format of any pin: 64 numbers below 1024 */

/* A set of CPUs a thread runs on, in order of preference. n == 0 (what a
 * zeroed struct says): unpinned, any CPU the process may use. */
typedef struct {
  uint32_t n;
  int cpu[RD_PIN_MAX];
} rd_pin_t;

/* The CPUs this process may run on, ascending, into cpus (at most cap).
 * Returns how many; 0 if the mask cannot be read. */
size_t rd_cores_allowed(int *cpus, size_t cap);

/* The assignment above. cpus[0..n): the allowed CPUs; load[i]: the pinned
 * threads already on cpus[i] (NULL: none). RD_EINVAL for a CPU number out
 * of [0, RD_CORES_MAX), n == 0 or learner_threads == 0. */
int rd_cores_assign(const int *cpus, const uint32_t *load, size_t n, uint32_t learner_threads,
                    rd_pin_t *learner, rd_pin_t *sampler, rd_error_t *err);

/* The CPUs a learner of `threads` threads gets when measured for a
 * workload pinned as (learner, sampler): learner's CPUs, then sampler's,
 * then the other allowed CPUs ascending, the first `threads` of them. A
 * profile measures the train-step at several thread counts; this is where
 * each runs. Unpinned (n = 0) if learner is, or there are not enough. */
void rd_cores_for_threads(const rd_pin_t *learner, const rd_pin_t *sampler, uint32_t threads,
                          rd_pin_t *out);

/* RD_EINVAL if pin names a CPU out of [0, RD_CORES_MAX) or n > RD_PIN_MAX. */
int rd_pin_check(const rd_pin_t *pin, rd_error_t *err);

/* Pin the calling thread (no-op for an unpinned pin). RD_EINVAL as
 * rd_pin_check; RD_EINTERNAL with the system's reason if the kernel
 * refuses (a CPU gone offline, or outside a cgroup's set). */
int rd_pin_self(const rd_pin_t *pin, rd_error_t *err);

/* Put pin into a thread's attributes (no-op for an unpinned pin): the
 * thread starts on those CPUs, and so does the OpenMP team it forms (a
 * new thread inherits its creator's mask). Errors as rd_pin_self. */
int rd_pin_attr(pthread_attr_t *attr, const rd_pin_t *pin, rd_error_t *err);

/* "0", "2-3", "0,2,5", "" for unpinned, into buf (truncated to cap). */
void rd_pin_format(const rd_pin_t *pin, char *buf, size_t cap);

#endif
