/* cores.c - which CPUs a workload's pipeline threads run on (cores.h). */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include "cores.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

size_t rd_cores_allowed(int *cpus, size_t cap) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  size_t n = 0;
  for (int c = 0; c < CPU_SETSIZE && c < RD_CORES_MAX && n < cap; c++)
    if (CPU_ISSET(c, &set)) cpus[n++] = c;
  return n;
}

static int cpu_ok(int c) {
  return c >= 0 && c < RD_CORES_MAX && c < CPU_SETSIZE;
}

int rd_pin_check(const rd_pin_t *pin, rd_error_t *err) {
  if (pin->n > RD_PIN_MAX)
    return rd_error_set(err, RD_EINVAL, "a pin of %u CPUs (at most %d)", pin->n, RD_PIN_MAX);
  for (uint32_t i = 0; i < pin->n; i++)
    if (!cpu_ok(pin->cpu[i]))
      return rd_error_set(err, RD_EINVAL, "CPU %d is out of range (0..%d)", pin->cpu[i],
                          RD_CORES_MAX - 1);
  return RD_OK;
}

int rd_cores_assign(const int *cpus, const uint32_t *load, size_t n, uint32_t learner_threads,
                    rd_pin_t *learner, rd_pin_t *sampler, rd_error_t *err) {
  memset(learner, 0, sizeof *learner);
  memset(sampler, 0, sizeof *sampler);
  if (n == 0) return rd_error_set(err, RD_EINVAL, "no CPUs to assign");
  if (learner_threads == 0) return rd_error_set(err, RD_EINVAL, "a learner of 0 threads");
  if (n > RD_CORES_MAX) n = RD_CORES_MAX;
  for (size_t i = 0; i < n; i++)
    if (!cpu_ok(cpus[i]))
      return rd_error_set(err, RD_EINVAL, "CPU %d is out of range (0..%d)", cpus[i],
                          RD_CORES_MAX - 1);
  /* More threads than CPUs (or than a pin holds): the team time-shares
   * every CPU anyway; pinning it would only stop the scheduler balancing. */
  if (learner_threads > n || learner_threads > RD_PIN_MAX) return RD_OK;
  /* Pick the least-loaded CPU, then the next: a selection, n at most
   * RD_CORES_MAX and picks at most RD_PIN_MAX + 1, without sorting a copy
   * (no allocation). Ties go to the lower position (the lower number:
   * rd_cores_allowed is ascending). */
  uint8_t taken[RD_CORES_MAX];
  memset(taken, 0, n);
  uint32_t want = learner_threads + (learner_threads < n ? 1 : 0);
  for (uint32_t k = 0; k < want; k++) {
    size_t best = n;
    for (size_t i = 0; i < n; i++) {
      if (taken[i]) continue;
      if (best == n || (load ? load[i] : 0) < (load ? load[best] : 0)) best = i;
    }
    taken[best] = 1;
    if (k < learner_threads) learner->cpu[learner->n++] = cpus[best];
    else sampler->cpu[sampler->n++] = cpus[best];
  }
  return RD_OK;
}

static int in_pin(const rd_pin_t *p, int c) {
  for (uint32_t i = 0; i < p->n; i++)
    if (p->cpu[i] == c) return 1;
  return 0;
}

void rd_cores_for_threads(const rd_pin_t *learner, const rd_pin_t *sampler, uint32_t threads,
                          rd_pin_t *out) {
  memset(out, 0, sizeof *out);
  if (learner->n == 0 || threads == 0 || threads > RD_PIN_MAX) return;
  rd_pin_t o;
  memset(&o, 0, sizeof o);
  for (uint32_t i = 0; i < learner->n && o.n < threads; i++)
    if (!in_pin(&o, learner->cpu[i])) o.cpu[o.n++] = learner->cpu[i];
  for (uint32_t i = 0; i < sampler->n && o.n < threads; i++)
    if (!in_pin(&o, sampler->cpu[i])) o.cpu[o.n++] = sampler->cpu[i];
  if (o.n < threads) {
    int cpus[RD_CORES_MAX];
    size_t n = rd_cores_allowed(cpus, RD_CORES_MAX);
    for (size_t i = 0; i < n && o.n < threads; i++)
      if (!in_pin(&o, cpus[i])) o.cpu[o.n++] = cpus[i];
  }
  if (o.n == threads) *out = o;
}

static int to_set(const rd_pin_t *pin, cpu_set_t *set, rd_error_t *err) {
  int rc = rd_pin_check(pin, err);
  if (rc) return rc;
  CPU_ZERO(set);
  for (uint32_t i = 0; i < pin->n; i++) CPU_SET(pin->cpu[i], set);
  return RD_OK;
}

int rd_pin_self(const rd_pin_t *pin, rd_error_t *err) {
  if (pin->n == 0) return RD_OK;
  cpu_set_t set;
  int rc = to_set(pin, &set, err);
  if (rc) return rc;
  int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (e != 0) {
    char s[64];
    rd_pin_format(pin, s, sizeof s);
    return rd_error_set(err, RD_EINTERNAL, "cannot pin a thread to CPUs %s: %s", s, strerror(e));
  }
  return RD_OK;
}

int rd_pin_attr(pthread_attr_t *attr, const rd_pin_t *pin, rd_error_t *err) {
  if (pin->n == 0) return RD_OK;
  cpu_set_t set;
  int rc = to_set(pin, &set, err);
  if (rc) return rc;
  int e = pthread_attr_setaffinity_np(attr, sizeof set, &set);
  if (e != 0) {
    char s[64];
    rd_pin_format(pin, s, sizeof s);
    return rd_error_set(err, RD_EINTERNAL, "cannot pin a thread to CPUs %s: %s", s, strerror(e));
  }
  return RD_OK;
}

void rd_pin_format(const rd_pin_t *pin, char *buf, size_t cap) {
  if (cap == 0) return;
  buf[0] = '\0';
  size_t len = 0;
  uint32_t n = pin->n < RD_PIN_MAX ? pin->n : RD_PIN_MAX;
  for (uint32_t i = 0; i < n && len < cap;) {
    uint32_t j = i; /* a run of consecutive numbers, in the pin's order */
    while (j + 1 < n && pin->cpu[j + 1] == pin->cpu[j] + 1) j++;
    int w = j == i ? snprintf(buf + len, cap - len, "%s%d", i ? "," : "", pin->cpu[i])
                   : snprintf(buf + len, cap - len, "%s%d-%d", i ? "," : "", pin->cpu[i],
                              pin->cpu[j]);
    if (w < 0) break;
    len += (size_t)w;
    i = j + 1;
  }
  if (len >= cap) buf[cap - 1] = '\0';
}
