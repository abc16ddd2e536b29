/* test_rate_limiter.c - a table's rate limiter (core/rate_limiter.h) and
 * the waits on it through the workload API (workload.h "Flow control"):
 * Reverb's rules by hand, the spec's resolution, a property test of random
 * interleavings against a reference model, the bounds on waiting calls,
 * and threads that insert and sample with waits, cancel them at their
 * deadlines and see them ended by a delete (run under TSan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rate_limiter.h"
#include "rdt_unit.h"
#include "registry.h"
#include "workload_spec.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* The rules, by hand                                                  */
/* ------------------------------------------------------------------ */

static int acquire(rd_limiter_t *l, rd_limit_kind_t k, uint64_t n, uint64_t held) {
  rd_error_t err;
  return rd_limiter_acquire(l, k, n, held, NULL, &err);
}

static void test_reverb_rules(void **state) {
  (void)state;
  /* SampleToInsertRatio(spi 2, min size 10, error buffer 6): diffs [14, 26]. */
  rd_limiter_config_t c = {10, 2, 14, 26};
  rd_limiter_t l;
  rd_limiter_init(&l, &c, 1000, NULL);
  /* Until min size, inserts run whatever the ratio; samples do not. */
  assert_true(rd_limiter_can_insert(&l, 0, 10));
  assert_false(rd_limiter_can_sample(&l, 9, 1));
  assert_int_equal(acquire(&l, RD_LIMIT_INSERT, 10, 0), RD_OK);
  rd_limiter_inserted(&l, 10, 1, 10);
  /* I 10: 20 - S - n >= 14 lets 6 through, not 7. */
  assert_true(rd_limiter_can_sample(&l, 10, 6));
  assert_false(rd_limiter_can_sample(&l, 10, 7));
  /* (10 + m) * 2 - 0 <= 26: m <= 3. */
  assert_true(rd_limiter_can_insert(&l, 10, 3));
  assert_false(rd_limiter_can_insert(&l, 10, 4));
  assert_int_equal(acquire(&l, RD_LIMIT_SAMPLE, 6, 10), RD_OK);
  assert_int_equal(l.sampled, 6);
  /* Now (10 + m) * 2 - 6 <= 26: m <= 6. */
  assert_true(rd_limiter_can_insert(&l, 10, 6));
  assert_false(rd_limiter_can_insert(&l, 10, 7));
  assert_int_equal(acquire(&l, RD_LIMIT_SAMPLE, 1, 10), RD_ETIMEDOUT);
  /* A pending insert counts for later inserts, not for samples. */
  assert_int_equal(acquire(&l, RD_LIMIT_INSERT, 6, 10), RD_OK);
  assert_false(rd_limiter_can_insert(&l, 10, 1));
  assert_false(rd_limiter_can_sample(&l, 10, 1));
  rd_limiter_inserted(&l, 6, 1, 16);
  assert_true(rd_limiter_can_sample(&l, 16, 12)); /* 32 - 6 - 12 = 14 */
  assert_false(rd_limiter_can_sample(&l, 16, 13));
  /* A failed insert is as if it never ran. */
  assert_int_equal(acquire(&l, RD_LIMIT_INSERT, 1, 16), RD_ETIMEDOUT);
  /* None: everything runs, the counts go on. */
  rd_limiter_configure(&l, NULL, 16);
  assert_int_equal(acquire(&l, RD_LIMIT_SAMPLE, 100, 16), RD_OK);
  assert_int_equal(l.sampled, 106);
  /* Min size only (Reverb's MinSize). */
  rd_limiter_config_t ms = {5, 1, -INFINITY, INFINITY};
  rd_limiter_init(&l, &ms, 1000, NULL);
  assert_false(rd_limiter_can_sample(&l, 4, 1));
  assert_true(rd_limiter_can_sample(&l, 5, 1000000));
  assert_true(rd_limiter_can_insert(&l, 1000, 1000000));
}

static void test_spec_resolve(void **state) {
  (void)state;
  rd_limiter_config_t c;
  rd_error_t err;
  rd_limiter_spec_t s = {0};
  assert_int_equal(rd_limiter_spec_resolve(&s, 100, &c, &err), RD_OK); /* min size 1 only */
  assert_int_equal(c.min_size_to_sample, 1);
  assert_true(c.min_diff == -INFINITY && c.max_diff == INFINITY);
  s = (rd_limiter_spec_t){.min_size_to_sample = 10, .samples_per_insert = 4,
                          .has_error_buffer = 1, .error_buffer = 8};
  assert_int_equal(rd_limiter_spec_resolve(&s, 100, &c, &err), RD_OK);
  assert_true(c.min_diff == 32 && c.max_diff == 48 && c.samples_per_insert == 4);
  s = (rd_limiter_spec_t){.samples_per_insert = 1, .has_max_diff = 1, .max_diff = 3};
  assert_int_equal(rd_limiter_spec_resolve(&s, 100, &c, &err), RD_OK);
  assert_true(c.min_diff == -INFINITY && c.max_diff == 3);
  struct {
    rd_limiter_spec_t s;
    const char *want;
  } bad[] = {
      {{.min_size_to_sample = 101}, "min_size_to_sample 101 is above the capacity 100"},
      {{.samples_per_insert = -1}, "samples_per_insert must be in [0, 1e6]"},
      {{.samples_per_insert = NAN}, "samples_per_insert must be in [0, 1e6]"},
      {{.samples_per_insert = 1}, "needs an error buffer"},
      {{.has_min_diff = 1, .min_diff = 1}, "min_diff is set but samples_per_insert is 0"},
      {{.samples_per_insert = 1, .has_error_buffer = 1, .error_buffer = 1, .has_max_diff = 1},
       "not both"},
      {{.samples_per_insert = 1, .has_error_buffer = 1, .error_buffer = -1}, "error_buffer"},
      {{.samples_per_insert = 1, .has_min_diff = 1, .min_diff = 5, .has_max_diff = 1,
        .max_diff = 4}, "min_diff 5 is above max_diff 4"},
      {{.samples_per_insert = 1, .has_min_diff = 1, .min_diff = NAN}, "must be numbers"},
      {{.samples_per_insert = 1, .has_min_diff = 1, .min_diff = INFINITY}, "must be numbers"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rd_error_clear(&err);
    int rc = rd_limiter_spec_resolve(&bad[i].s, 100, &c, &err);
    if (rc != RD_EINVAL || strstr(err.msg, bad[i].want) == NULL)
      fail_msg("case %zu: %s \"%s\", want \"%s\"", i, rd_err_name(rc), err.msg, bad[i].want);
  }
}

/* ------------------------------------------------------------------ */
/* Random interleavings against a reference model                      */
/* ------------------------------------------------------------------ */

#define MAX_CALLS 64

typedef enum { C_FREE, C_QUEUED, C_WOKEN, C_RUNNING } cstate_t;

typedef struct {
  rd_limiter_wait_t wait;
  cstate_t st;           /* the model's view */
  rd_limit_kind_t kind;
  uint64_t items;
  int woken_status;      /* what wake said (the limiter's) */
  int woken;             /* wake ran since the last check */
  int model_status;      /* what the model woke it with: a grant stays one after a close */
} mcall_t;

/* The model: the header's rules written out again, with its own queues
 * (arrays of call indices) and a fixed-point grant instead of one pass. */
typedef struct {
  int on;
  rd_limiter_config_t cfg;
  uint64_t I, pending, S, held;
  uint32_t cap;
  int q[2][MAX_CALLS], nq[2];
  int closed;
} model_t;

static mcall_t calls[MAX_CALLS];

static void wake_cb(rd_limiter_wait_t *w, int status) {
  mcall_t *c = w->arg;
  c->woken = 1;
  c->woken_status = status;
}

static int m_can(const model_t *m, rd_limit_kind_t k, uint64_t n) {
  if (!m->on) return 1;
  const double spi = m->cfg.samples_per_insert;
  if (k == RD_LIMIT_SAMPLE)
    return m->held >= m->cfg.min_size_to_sample &&
           (double)m->I * spi - (double)m->S - (double)n >= m->cfg.min_diff;
  return m->held + m->pending + n <= m->cfg.min_size_to_sample ||
         (double)(m->I + m->pending + n) * spi - (double)m->S <= m->cfg.max_diff;
}

static void m_count(model_t *m, rd_limit_kind_t k, uint64_t n) {
  if (k == RD_LIMIT_INSERT) m->pending += n;
  else m->S += n;
}

static void m_pop(model_t *m, rd_limit_kind_t k) {
  memmove(&m->q[k][0], &m->q[k][1], (size_t)(m->nq[k] - 1) * sizeof m->q[k][0]);
  m->nq[k]--;
}

/* Grants, as the model sees them: into granted[] (call indices). */
static void m_grant(model_t *m, int *granted, int *ng) {
  for (int changed = 1; changed;) {
    changed = 0;
    for (int k = 0; k < 2; k++) /* inserts first here: the limiter does samples first */
      while (m->nq[k] > 0 && m_can(m, (rd_limit_kind_t)k, calls[m->q[k][0]].items)) {
        int id = m->q[k][0];
        m_pop(m, (rd_limit_kind_t)k);
        m_count(m, (rd_limit_kind_t)k, calls[id].items);
        calls[id].st = C_WOKEN;
        calls[id].model_status = RD_OK;
        granted[(*ng)++] = id;
        changed = 1;
      }
  }
}

static void m_remove(model_t *m, int id) {
  rd_limit_kind_t k = calls[id].kind;
  for (int i = 0; i < m->nq[k]; i++)
    if (m->q[k][i] == id) {
      memmove(&m->q[k][i], &m->q[k][i + 1], (size_t)(m->nq[k] - i - 1) * sizeof(int));
      m->nq[k]--;
      return;
    }
  fail_msg("call %d is not queued in the model", id);
}

/* After each step: the wakes the limiter made are the grants the model
 * made (and only those), and the counts agree; no head that may run is
 * left queued. */
static void check(const rd_limiter_t *l, const model_t *m, const int *granted, int ng,
                  int step) {
  int want[MAX_CALLS] = {0};
  for (int i = 0; i < ng; i++) want[granted[i]] = 1;
  for (int id = 0; id < MAX_CALLS; id++) {
    if (calls[id].woken != want[id])
      fail_msg("step %d: call %d woken %d, model %d", step, id, calls[id].woken, want[id]);
    if (calls[id].woken && calls[id].woken_status != calls[id].model_status)
      fail_msg("step %d: call %d woken with %d", step, id, calls[id].woken_status);
    calls[id].woken = 0;
  }
  if (l->inserted != m->I || l->pending != m->pending || l->sampled != m->S)
    fail_msg("step %d: limiter I %llu pending %llu S %llu, model %llu %llu %llu", step,
             (unsigned long long)l->inserted, (unsigned long long)l->pending,
             (unsigned long long)l->sampled, (unsigned long long)m->I,
             (unsigned long long)m->pending, (unsigned long long)m->S);
  for (int k = 0; k < 2; k++) {
    if (l->queued[k] != (uint32_t)m->nq[k])
      fail_msg("step %d: %u queued of kind %d, model %d", step, l->queued[k], k, m->nq[k]);
    const rd_limiter_wait_t *w = l->head[k];
    for (int i = 0; i < m->nq[k]; i++, w = w->next)
      if (w != &calls[m->q[k][i]].wait) fail_msg("step %d: queue %d out of order at %d", step, k, i);
    if (!m->closed && m->nq[k] > 0 && m_can(m, (rd_limit_kind_t)k, calls[m->q[k][0]].items))
      fail_msg("step %d: a head of kind %d that may run is queued", step, k);
  }
}

static uint64_t rnd(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void random_config(uint64_t *s, rd_limiter_config_t *c, int *on) {
  *on = rnd(s) % 8 != 0;
  c->min_size_to_sample = 1 + (uint32_t)(rnd(s) % 40);
  c->samples_per_insert = (double)(1 + rnd(s) % 16) / 4; /* 0.25 .. 4 */
  double centre = c->samples_per_insert * c->min_size_to_sample;
  double buf = (double)(rnd(s) % 60);
  c->min_diff = rnd(s) % 6 == 0 ? -INFINITY : centre - buf;
  c->max_diff = rnd(s) % 6 == 0 ? INFINITY : centre + buf + (double)(rnd(s) % 10);
}

static void run_model(uint64_t seed, int steps) {
  uint64_t s = seed;
  model_t m;
  memset(&m, 0, sizeof m);
  memset(calls, 0, sizeof calls);
  m.cap = 20 + (uint32_t)(rnd(&s) % 200);
  random_config(&s, &m.cfg, &m.on);
  rd_limiter_t l;
  rd_limiter_init(&l, m.on ? &m.cfg : NULL, m.cap, NULL);
  for (int i = 0; i < MAX_CALLS; i++) {
    calls[i].wait.wake = wake_cb;
    calls[i].wait.arg = &calls[i];
  }
  rd_error_t err;
  for (int step = 0; step < steps; step++) {
    int granted[MAX_CALLS], ng = 0;
    uint64_t r = rnd(&s) % 100;
    int id = (int)(rnd(&s) % MAX_CALLS);
    mcall_t *c = &calls[id];
    if (r < 40 && c->st == C_FREE && !m.closed) { /* a call arrives */
      rd_limit_kind_t k = rnd(&s) % 2 ? RD_LIMIT_SAMPLE : RD_LIMIT_INSERT;
      uint64_t n = 1 + rnd(&s) % 12;
      int waits = rnd(&s) % 4 != 0;
      memset(&c->wait, 0, sizeof c->wait);
      c->wait.wake = wake_cb;
      c->wait.arg = c;
      c->kind = k;
      c->items = n;
      int rc = rd_limiter_acquire(&l, k, n, m.held, waits ? &c->wait : NULL, &err);
      int want;
      if (m.nq[k] == 0 && m_can(&m, k, n)) {
        want = RD_OK;
        m_count(&m, k, n);
        c->st = C_RUNNING;
        m_grant(&m, granted, &ng);
      } else if (!waits) {
        want = RD_ETIMEDOUT;
      } else {
        want = RD_LIMIT_QUEUED;
        m.q[k][m.nq[k]++] = id;
        c->st = C_QUEUED;
      }
      if (rc != want) fail_msg("step %d: acquire %d, model %d (%s)", step, rc, want, err.msg);
    } else if (r < 65 && c->st == C_RUNNING) { /* a running call ends, or fails */
      int ok = rnd(&s) % 8 != 0;
      if (c->kind == RD_LIMIT_INSERT) {
        m.pending -= c->items;
        if (ok) {
          m.I += c->items;
          m.held = m.held + c->items > m.cap ? m.cap : m.held + c->items;
        }
        rd_limiter_inserted(&l, c->items, ok, m.held);
      } else if (!ok) {
        m.S -= c->items;
        rd_limiter_unsample(&l, c->items, m.held);
      }
      if (c->kind == RD_LIMIT_INSERT || !ok) m_grant(&m, granted, &ng);
      c->st = C_FREE;
    } else if (r < 80 && c->st == C_WOKEN) { /* a woken call runs its grant */
      int rc = rd_limiter_acquire(&l, c->kind, c->items, m.held, &c->wait, &err);
      if (rc != c->model_status) fail_msg("step %d: grant used: %d", step, rc);
      c->st = rc == RD_OK ? C_RUNNING : C_FREE;
    } else if (r < 88 && c->st == C_QUEUED) { /* its caller leaves */
      assert_int_equal(rd_limiter_cancel(&l, &c->wait, m.held), 1);
      m_remove(&m, id);
      c->st = C_FREE;
      m_grant(&m, granted, &ng);
    } else if (r < 92 && c->st == C_WOKEN) { /* left after its grant (or its end) */
      assert_int_equal(rd_limiter_release(&l, &c->wait, m.held), 0);
      if (c->model_status == RD_OK && c->kind == RD_LIMIT_INSERT) m.pending -= c->items;
      else if (c->model_status == RD_OK) m.S -= c->items;
      c->st = C_FREE;
      m_grant(&m, granted, &ng);
    } else if (r < 95) { /* the owner changes the config */
      random_config(&s, &m.cfg, &m.on);
      rd_limiter_configure(&l, m.on ? &m.cfg : NULL, m.held);
      m_grant(&m, granted, &ng);
    } else if (r == 99 && rnd(&s) % 20 == 0 && !m.closed) { /* deleted */
      m.closed = RD_ENOTFOUND;
      rd_limiter_close(&l, RD_ENOTFOUND);
      for (int k = 0; k < 2; k++)
        while (m.nq[k] > 0) {
          calls[m.q[k][0]].st = C_WOKEN;
          calls[m.q[k][0]].model_status = RD_ENOTFOUND;
          granted[ng++] = m.q[k][0];
          m_pop(&m, (rd_limit_kind_t)k);
        }
    }
    check(&l, &m, granted, ng, step);
  }
}

static void test_model(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 300; seed++) run_model(seed, 3000);
}

/* ------------------------------------------------------------------ */
/* Bounds and closing                                                  */
/* ------------------------------------------------------------------ */

static void noop_wake(rd_limiter_wait_t *w, int status) {
  (void)w;
  (void)status;
}

static void test_bounds(void **state) {
  (void)state;
  rd_limiter_bounds_t b;
  rd_limiter_bounds_init(&b, 3, 2);
  rd_limiter_config_t c = {10, 1, -INFINITY, INFINITY};
  rd_limiter_t l1, l2;
  rd_limiter_init(&l1, &c, 100, &b);
  rd_limiter_init(&l2, &c, 100, &b);
  rd_limiter_wait_t w[6];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 6; i++) w[i].wake = noop_wake;
  rd_error_t err;
  /* A stream's slot, then a wait of its own takes no other. */
  assert_int_equal(rd_limiter_hold_slot(&l1, &w[0], &err), RD_OK);
  assert_int_equal(rd_limiter_acquire(&l1, RD_LIMIT_SAMPLE, 1, 0, &w[0], &err), RD_LIMIT_QUEUED);
  assert_int_equal(rd_limiter_acquire(&l1, RD_LIMIT_SAMPLE, 1, 0, &w[1], &err), RD_LIMIT_QUEUED);
  assert_int_equal(rd_limiter_acquire(&l1, RD_LIMIT_SAMPLE, 1, 0, &w[2], &err), RD_ETOOBIG);
  assert_non_null(strstr(err.msg, "--max-waiting-per-workload"));
  assert_int_equal(rd_limiter_acquire(&l2, RD_LIMIT_SAMPLE, 1, 0, &w[3], &err), RD_LIMIT_QUEUED);
  assert_int_equal(rd_limiter_acquire(&l2, RD_LIMIT_SAMPLE, 1, 0, &w[4], &err), RD_ETOOBIG);
  assert_non_null(strstr(err.msg, "--max-waiting-calls"));
  assert_int_equal(atomic_load(&b.waiting), 3);
  /* Leaving gives slots back; the stream's stays until it ends. */
  assert_int_equal(rd_limiter_cancel(&l1, &w[0], 0), 1);
  assert_int_equal(atomic_load(&b.waiting), 3);
  assert_int_equal(rd_limiter_cancel(&l1, &w[1], 0), 1);
  assert_int_equal(atomic_load(&b.waiting), 2);
  /* A cancelled wait never queues again. */
  assert_int_equal(rd_limiter_acquire(&l1, RD_LIMIT_SAMPLE, 1, 0, &w[1], &err), RD_ECANCELED);
  rd_limiter_drop_slot(&l1, &w[0]);
  assert_int_equal(atomic_load(&b.waiting), 1);
  /* A drain ends waits and refuses new ones. */
  atomic_store(&b.closed, RD_ECANCELED);
  assert_int_equal(rd_limiter_acquire(&l1, RD_LIMIT_SAMPLE, 1, 0, &w[5], &err), RD_ECANCELED);
  assert_int_equal(rd_limiter_hold_slot(&l1, &w[5], &err), RD_ECANCELED);
  rd_limiter_close(&l2, RD_ECANCELED);
  assert_int_equal(w[3].state, RD_WAIT_GRANTED);
  assert_int_equal(w[3].status, RD_ECANCELED);
  assert_int_equal(atomic_load(&b.waiting), 0);
  assert_int_equal(rd_limiter_acquire(&l2, RD_LIMIT_SAMPLE, 1, 0, &w[3], &err), RD_ECANCELED);
  assert_non_null(strstr(err.msg, "shutting down"));
  /* Calls that may run still do: a drain ends waits only. */
  assert_int_equal(rd_limiter_acquire(&l2, RD_LIMIT_INSERT, 5, 0, &w[4], &err), RD_OK);
}

/* ------------------------------------------------------------------ */
/* Threads through the workload API (TSan)                             */
/* ------------------------------------------------------------------ */

/* A waiter as the server's parked call, reduced to a condition variable:
 * the wake (under the workload's lock) only signals. */
typedef struct {
  rd_limiter_wait_t wait;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int woken;
} waiter_t;

static void waiter_wake(rd_limiter_wait_t *w, int status) {
  (void)status;
  waiter_t *t = w->arg;
  pthread_mutex_lock(&t->mu);
  t->woken = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void waiter_init(waiter_t *t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->wait.wake = waiter_wake;
  t->wait.arg = t;
}

/* Wait for the wake at most ms; 1 if it came. */
static int waiter_wait(waiter_t *t, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)ms * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  pthread_mutex_lock(&t->mu);
  while (!t->woken)
    if (ms < 0 ? pthread_cond_wait(&t->cv, &t->mu) != 0
               : pthread_cond_timedwait(&t->cv, &t->mu, &ts) != 0)
      break;
  int got = t->woken;
  t->woken = 0;
  pthread_mutex_unlock(&t->mu);
  return got;
}

typedef struct {
  rd_workload_t *w;
  int sampler;
  uint32_t items; /* per call: 4, or more than the limiter ever lets through */
  int calls, done, timeouts, ended;
  int end_status;
  atomic_int *bad;
} worker_t;

/* Samples land in scratch: the keys, probabilities and weights only. */
static int sample_into(void *arg, const rd_table_t *table, uint32_t n, rd_sample_out_t *out,
                       rd_error_t *err) {
  (void)table;
  (void)err;
  assert_true(n <= 256);
  *out = *(rd_sample_out_t *)arg;
  return RD_OK;
}

static int one_call(worker_t *k, waiter_t *t, rd_error_t *err) {
  float obs[16] = {0};
  int32_t act[4] = {0};
  rd_cbuf_t cols[2] = {{obs, sizeof obs}, {act, sizeof act}};
  rd_insert_batch_t b = {4, cols, 2, NULL, 0};
  if (!k->sampler) return rd_workload_insert_wait(k->w, &b, &t->wait, NULL, NULL, NULL, err);
  uint64_t keys[256];
  double p[256], wt[256];
  rd_sample_out_t out = {keys, p, wt, NULL};
  rd_sample_request_t q = {k->items, 0, 0, 0};
  return rd_workload_sample_wait(k->w, &q, sample_into, &out, NULL, &t->wait, err);
}

static void *worker_main(void *arg) {
  worker_t *k = arg;
  waiter_t t;
  waiter_init(&t);
  for (int i = 0; i < k->calls; i++) {
    rd_error_t err;
    int rc = one_call(k, &t, &err);
    while (rc == RD_LIMIT_QUEUED) {
      /* A deadline of a few ms: then the call leaves, unless it was
       * granted meanwhile (then its wake comes for sure). */
      if (!waiter_wait(&t, i % 3 == 0 ? 0 : 2)) { /* some deadlines pass at once */
        if (rd_workload_wait_cancel(k->w, &t.wait)) {
          k->timeouts++;
          t.wait.cancelled = 0; /* the next call is a new one */
          rc = one_call(k, &t, &err);
          continue;
        }
        waiter_wait(&t, -1); /* woken meanwhile: granted (or ended), its wake is certain */
      }
      t.wait.cancelled = 0;
      rc = one_call(k, &t, &err);
    }
    if (rc == RD_OK) {
      k->done++;
      rd_limiter_info_t li;
      rd_workload_limiter_info(k->w, &li);
      double d = (double)li.inserted * li.cfg.samples_per_insert - (double)li.sampled;
      if (li.inserted >= li.cfg.min_size_to_sample && (d < li.cfg.min_diff || d > li.cfg.max_diff))
        atomic_fetch_add(k->bad, 1);
    } else {
      k->ended++;
      k->end_status = rc;
      break;
    }
  }
  pthread_cond_destroy(&t.cv);
  pthread_mutex_destroy(&t.mu);
  return NULL;
}

typedef struct {
  rd_workload_t *w;
  atomic_int stop;
  int cancelled;
} impatient_t;

static void *impatient_main(void *arg) {
  impatient_t *im = arg;
  worker_t k = {.w = im->w, .sampler = 1, .items = 200};
  waiter_t t;
  waiter_init(&t);
  do { /* at least once, however late this thread starts */
    rd_error_t err;
    int rc = one_call(&k, &t, &err);
    assert_int_equal(rc, RD_LIMIT_QUEUED);
    waiter_wait(&t, 1);
    assert_int_equal(rd_workload_wait_cancel(im->w, &t.wait), 1); /* never granted */
    t.wait.cancelled = 0;
    im->cancelled++;
  } while (!atomic_load(&im->stop));
  pthread_cond_destroy(&t.cv);
  pthread_mutex_destroy(&t.mu);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  rd_config_t cfg;
  rd_config_defaults(&cfg);
  rd_registry_t *r = NULL;
  rd_error_t err;
  assert_int_equal(rd_registry_create(&r, &cfg, NULL, &err), RD_OK);
  /* samples_per_insert 1 within [-8, 8] from 4 items on. */
  rd_limiter_spec_t ls = {.min_size_to_sample = 4, .samples_per_insert = 1, .has_min_diff = 1,
                          .min_diff = -8, .has_max_diff = 1, .max_diff = 8};
  rd_workload_spec_t spec = {.name = "t", .fields = rdt_cartpole_field_specs, .n_fields = 2,
                             .capacity = 1024, .rate_limiter = &ls};
  rd_workload_t *w = NULL;
  assert_int_equal(rd_registry_register(r, &spec, NULL, &w, NULL, &err), RD_OK);
  atomic_int bad = 0;
  worker_t k[4];
  pthread_t th[4], ith;
  for (int i = 0; i < 4; i++) {
    k[i] = (worker_t){.w = w, .sampler = i >= 2, .items = 4, .calls = 300, .bad = &bad};
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &k[i]), 0);
  }
  /* And a sampler of 200 at a time, more than the buffer ever allows: it
   * holds the samplers behind it (first come, first served) until its
   * deadline takes it out of the queue. */
  impatient_t im = {.w = w};
  assert_int_equal(pthread_create(&ith, NULL, impatient_main, &im), 0);
  int timeouts = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    if (k[i].done != 300) fail_msg("worker %d did %d of 300 (%d ended)", i, k[i].done, k[i].ended);
    timeouts += k[i].timeouts;
  }
  atomic_store(&im.stop, 1);
  pthread_join(ith, NULL);
  assert_true(im.cancelled > 0);
  assert_int_equal(atomic_load(&bad), 0); /* the ratio held at every look */
  rd_limiter_info_t li;
  rd_workload_limiter_info(w, &li);
  assert_int_equal(li.inserted, 2400);
  assert_int_equal(li.sampled, 2400);
  assert_int_equal(li.queued_inserts + li.queued_samples, 0);
  print_message("%d waits left at their deadline; %llu + %llu calls waited\n", timeouts,
                (unsigned long long)li.insert_waits, (unsigned long long)li.sample_waits);

  /* A sampler the limiter holds back for good, then the workload goes. */
  rd_limiter_config_t tight = {4, 1, 0, 8};
  assert_int_equal(rd_workload_set_limiter(w, &tight, NULL, 0, &err), RD_OK);
  worker_t last = {.w = w, .sampler = 1, .items = 4, .calls = 1, .bad = &bad};
  pthread_t lt;
  assert_int_equal(pthread_create(&lt, NULL, worker_main, &last), 0);
  for (int ms = 0;; ms++) { /* until it waits in the limiter: the delete must end a wait */
    rd_workload_limiter_info(w, &li);
    if (li.queued_samples == 1) break;
    if (ms > 120000) fail_msg("the last sampler never waited in the limiter");
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  char id[RD_WORKLOAD_ID_LEN + 1];
  memcpy(id, w->id, sizeof id);
  assert_int_equal(rd_registry_delete(r, id, &err), RD_OK);
  pthread_join(lt, NULL);
  assert_int_equal(last.ended, 1);
  assert_int_equal(last.end_status, RD_ENOTFOUND);
  pthread_mutex_lock(&w->lock);
  assert_int_equal(w->limiter.slots, 0);
  assert_null(w->limiter.head[0]);
  assert_null(w->limiter.head[1]);
  pthread_mutex_unlock(&w->lock);
  rd_workload_unref(w);
  rd_registry_destroy(r);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_reverb_rules),
         cmocka_unit_test(test_spec_resolve),
         cmocka_unit_test(test_model),
         cmocka_unit_test(test_bounds),
         cmocka_unit_test(test_threads))
