/* test_cores.c - which CPUs a workload's pipeline threads run on
 * (daemon/learn/cores.h): the assignment rule by hand-made loads, the CPUs a
 * profile measures each thread count on, the pin's text, and pinning the
 * calling thread for real. */
#define _GNU_SOURCE /* sched_getcpu, pthread_getaffinity_np */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "cores.h"
#include "rdt_main.h"

static rd_pin_t pin_of(uint32_t n, const int *cpus) {
  rd_pin_t p;
  memset(&p, 0, sizeof p);
  p.n = n;
  for (uint32_t i = 0; i < n; i++) p.cpu[i] = cpus[i];
  return p;
}

static void assert_pin(const rd_pin_t *p, const char *want) {
  char got[RD_PIN_TEXT_MAX];
  rd_pin_format(p, got, sizeof got);
  assert_string_equal(got, want);
}

/* rd_cores_assign(cpus, load, n, threads) succeeds with the learner on
 * want_l and the sampler on want_s (NULL: not pinned). */
static void assert_assign(const int *cpus, const uint32_t *load, uint32_t n, uint32_t threads,
                          const char *want_l, const char *want_s) {
  rd_pin_t l, s;
  rd_error_t err;
  assert_int_equal(rd_cores_assign(cpus, load, n, threads, &l, &s, &err), RD_OK);
  if (want_l != NULL)
    assert_pin(&l, want_l);
  else
    assert_int_equal(l.n, 0);
  if (want_s != NULL)
    assert_pin(&s, want_s);
  else
    assert_int_equal(s.n, 0);
}

static void test_assign(void **state) {
  (void)state;
  const int cpus[4] = {0, 1, 2, 3};
  /* An idle machine: the lowest CPUs, the sampler next to the learner. */
  assert_assign(cpus, NULL, 4, 1, "0", "1");
  assert_assign(cpus, NULL, 4, 2, "0-1", "2");
  /* The least loaded first, ties to the lower number. */
  const uint32_t load[4] = {1, 1, 0, 2};
  assert_assign(cpus, load, 4, 1, "2", "0");
  assert_assign(cpus, load, 4, 2, "2,0", "1");
  /* The learner takes every CPU: the sampler is not pinned. */
  assert_assign(cpus, load, 4, 4, "2,0-1,3", NULL);
  /* More threads than CPUs: nothing is pinned. */
  assert_assign(cpus, NULL, 4, 5, NULL, NULL);
  /* A machine of one CPU. */
  assert_assign(cpus + 3, NULL, 1, 1, "3", NULL);
  /* Sparse CPU numbers (a cgroup's set) keep their numbers. */
  const int sparse[3] = {4, 9, 130};
  const uint32_t sl[3] = {3, 0, 0};
  assert_assign(sparse, sl, 3, 1, "9", "130");
}

static void test_assign_errors(void **state) {
  (void)state;
  const int cpus[2] = {0, 1}, bad[2] = {0, RD_CORES_MAX};
  rd_pin_t l, s;
  rd_error_t err;
  l.n = s.n = 7;
  assert_int_equal(rd_cores_assign(cpus, NULL, 0, 1, &l, &s, &err), RD_EINVAL);
  assert_int_equal(l.n + s.n, 0); /* cleared: a failed assignment pins nothing */
  assert_int_equal(rd_cores_assign(cpus, NULL, 2, 0, &l, &s, &err), RD_EINVAL);
  assert_int_equal(rd_cores_assign(bad, NULL, 2, 1, &l, &s, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "out of range"));
  rd_pin_t p = pin_of(2, bad);
  assert_int_equal(rd_pin_check(&p, &err), RD_EINVAL);
  p = pin_of(1, (const int[]){-3});
  assert_int_equal(rd_pin_check(&p, &err), RD_EINVAL);
  p.n = RD_PIN_MAX + 1;
  assert_int_equal(rd_pin_check(&p, &err), RD_EINVAL);
  assert_int_equal(rd_pin_self(&p, &err), RD_EINVAL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  assert_int_equal(rd_pin_attr(&attr, &p, &err), RD_EINVAL);
  pthread_attr_destroy(&attr);
}

/* Thread counts beyond the learner's pin: the sampler's CPU, then the
 * process's other CPUs, ascending. */
static void test_for_threads(void **state) {
  (void)state;
  int cpus[RD_CORES_MAX];
  size_t n = rd_cores_allowed(cpus, RD_CORES_MAX);
  assert_true(n >= 1);
  rd_pin_t l = pin_of(1, &cpus[n - 1]), s, out;
  memset(&s, 0, sizeof s);
  rd_cores_for_threads(&l, &s, 1, &out);
  assert_int_equal(out.n, 1);
  assert_int_equal(out.cpu[0], cpus[n - 1]);
  rd_cores_for_threads(&l, &s, (uint32_t)n, &out); /* every allowed CPU, the pin's first */
  assert_int_equal(out.n, n);
  assert_int_equal(out.cpu[0], cpus[n - 1]);
  for (size_t i = 1; i < n; i++) assert_int_equal(out.cpu[i], cpus[i - 1]);
  rd_cores_for_threads(&l, &s, (uint32_t)n + 1, &out); /* more than there are */
  assert_int_equal(out.n, 0);
  /* The sampler's CPU comes right after the learner's. */
  const int a[1] = {5}, b[1] = {7};
  l = pin_of(1, a);
  s = pin_of(1, b);
  rd_cores_for_threads(&l, &s, 2, &out);
  assert_pin(&out, "5,7");
  /* An unpinned learner stays unpinned. */
  memset(&l, 0, sizeof l);
  rd_cores_for_threads(&l, &s, 1, &out);
  assert_int_equal(out.n, 0);
}

static void test_format(void **state) {
  (void)state;
  rd_pin_t p;
  memset(&p, 0, sizeof p);
  assert_pin(&p, "");
  p = pin_of(3, (const int[]){0, 2, 5});
  assert_pin(&p, "0,2,5");
  p = pin_of(4, (const int[]){2, 3, 7, 8});
  assert_pin(&p, "2-3,7-8");
  char small[4];
  p = pin_of(3, (const int[]){100, 200, 300});
  rd_pin_format(&p, small, sizeof small); /* truncated, terminated */
  assert_string_equal(small, "100");
  /* The longest pin fits the text buffer. */
  p.n = RD_PIN_MAX;
  for (int i = 0; i < RD_PIN_MAX; i++) p.cpu[i] = RD_CORES_MAX - 1 - 2 * i;
  char big[RD_PIN_TEXT_MAX];
  rd_pin_format(&p, big, sizeof big);
  assert_true(strlen(big) < sizeof big - 1);
  assert_int_equal(big[strlen(big) - 1], '7'); /* 1023 - 126 = 897: the last, whole */
}

/* Pinning the calling thread, for real, and what the kernel refuses. */
static void *pin_main(void *arg) {
  int *cpu = arg;
  rd_pin_t p = pin_of(1, cpu);
  rd_error_t err;
  if (rd_pin_self(&p, &err) != RD_OK) return (void *)1;
  cpu_set_t set;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return (void *)2;
  if (CPU_COUNT(&set) != 1 || !CPU_ISSET(*cpu, &set)) return (void *)3;
  if (sched_getcpu() != *cpu) return (void *)4;
  return NULL;
}

static void test_pin_self(void **state) {
  (void)state;
  int cpus[RD_CORES_MAX];
  size_t n = rd_cores_allowed(cpus, RD_CORES_MAX);
  for (size_t i = 0; i < n && i < 4; i++) {
    pthread_t th;
    void *ret;
    assert_int_equal(pthread_create(&th, NULL, pin_main, &cpus[i]), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_null(ret);
  }
  /* A thread created with a pinned attribute starts there. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  rd_pin_t p = pin_of(1, &cpus[n - 1]);
  rd_error_t err;
  assert_int_equal(rd_pin_attr(&attr, &p, &err), RD_OK);
  pthread_t th;
  void *ret;
  assert_int_equal(pthread_create(&th, &attr, pin_main, &cpus[n - 1]), 0);
  assert_int_equal(pthread_join(th, &ret), 0);
  assert_null(ret);
  pthread_attr_destroy(&attr);
  /* A CPU this machine lacks: refused with the reason, the mask kept. */
  int absent = RD_CORES_MAX - 1;
  if (absent != cpus[n - 1]) {
    cpu_set_t before, after;
    pthread_getaffinity_np(pthread_self(), sizeof before, &before);
    p = pin_of(1, &absent);
    assert_int_equal(rd_pin_self(&p, &err), RD_EINTERNAL);
    assert_non_null(strstr(err.msg, "cannot pin a thread to CPUs 1023"));
    pthread_getaffinity_np(pthread_self(), sizeof after, &after);
    assert_true(CPU_EQUAL(&before, &after));
  }
  /* Unpinned: nothing to do. */
  memset(&p, 0, sizeof p);
  assert_int_equal(rd_pin_self(&p, &err), RD_OK);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_assign),      cmocka_unit_test(test_assign_errors),
         cmocka_unit_test(test_for_threads), cmocka_unit_test(test_format),
         cmocka_unit_test(test_pin_self))
