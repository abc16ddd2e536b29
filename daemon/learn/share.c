/* share.c - weighted fair shares of a device's time among hosted learners
 * (see share.h). One mutex and condition variable per pool; every share's
 * state is under its pool's mutex. The pool is small (the hosted learners
 * on one device), so a grant scans it.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "share.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rd_clock.h"
#include "rd_spin.h"
#include "rd_cond.h"

struct rd_share {
  rd_share_pool_t *pool;
  rd_share_t *next;
  const void *group;
  uint32_t group_weight;
  double vtime;      /* start-time fair queueing: seconds / effective weight */
  double charged;    /* seconds charged */
  double last_end;   /* rd_clock_now() when its last step ended */
  uint32_t waiting, running; /* its threads waiting for a turn, and in one */
  uint32_t running_units;    /* the units those in one hold */
  uint32_t width;             /* units of its widest burst: what a hand-over keeps free */
  double burst_s;            /* its bursts' mean seconds (moving): a hand-over's scale */
  bool out_of_work;          /* rd_share_idle since its last burst: holds nobody back */
  uint64_t ticket;   /* FIFO among equal virtual times */
};

struct rd_share_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint32_t capacity, used;
  rd_share_t *shares;
  uint64_t tickets;
  bool conserving;              /* rd_share_pool_set_conserving */
  double idle_s;                /* share.h RD_SHARE_IDLE_S */
  double handoff_s;             /* between two bursts for this long, unless idle */
  rd_share_pool_t *next_global; /* rd_share_pool_device's list */
  rd_learner_kind_t kind;
  uint32_t device;
  double (*clock)(void *arg);   /* rd_share_pool_set_clock; NULL: rd_clock_now */
  void *clock_arg;
};

static double pool_now(const rd_share_pool_t *p) {
  return p->clock != NULL ? p->clock(p->clock_arg) : rd_clock_now();
}

void rd_share_pool_set_conserving(rd_share_pool_t *p, bool conserving) {
  pthread_mutex_lock(&p->mu);
  p->conserving = conserving;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void rd_share_pool_set_clock(rd_share_pool_t *p, double (*now)(void *arg), void *arg) {
  pthread_mutex_lock(&p->mu);
  p->clock = now;
  p->clock_arg = arg;
  pthread_mutex_unlock(&p->mu);
}

rd_share_pool_t *rd_share_pool_create(uint32_t capacity, double idle_s, double handoff_s) {
  rd_share_pool_t *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->idle_s = idle_s;
  p->handoff_s = handoff_s;
  pthread_mutex_init(&p->mu, NULL);
  rd_cond_init_monotonic(&p->cv);
  p->capacity = capacity ? capacity : 1;
  return p;
}

void rd_share_pool_destroy(rd_share_pool_t *p) {
  if (p == NULL) return;
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static rd_share_pool_t *pools;

static uint32_t cpu_capacity(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? (uint32_t)n : 1;
}

rd_share_pool_t *rd_share_pool_device(rd_learner_kind_t kind, uint32_t device) {
  pthread_mutex_lock(&pools_mu);
  rd_share_pool_t *p = pools;
  while (p != NULL && !(p->kind == kind && p->device == device)) p = p->next_global;
  if (p == NULL && (p = rd_share_pool_create(kind == RD_LEARNER_ON_CPU ? cpu_capacity() : 1,
                                             RD_SHARE_IDLE_S, RD_SHARE_IDLE_S))) {
    p->kind = kind;
    p->device = device;
    p->next_global = pools;
    pools = p;
  }
  pthread_mutex_unlock(&pools_mu);
  return p;
}

/* ---- Under the pool's mutex ---- */

static bool busy(const rd_share_t *s, double now) {
  return s->waiting || s->running || now - s->last_end < s->pool->idle_s;
}

/* Strict: busy and between two of its bursts (or in one): it will ask
 * again within handoff_s unless it said it is out of work. */
static bool handing_over(const rd_share_t *s, double now) {
  return s->waiting || s->running || (!s->out_of_work && now - s->last_end < s->pool->handoff_s);
}

static double gap_end(const rd_share_t *s) {
  double gap = RD_SHARE_GAP_FRACTION * s->burst_s;
  return s->last_end + (gap < s->pool->handoff_s ? gap : s->pool->handoff_s);
}

/* Work-conserving: between two of its bursts (asking for nothing, holding
 * nothing), it will ask again within a hand-over, a gap short beside its
 * bursts (RD_SHARE_GAP_FRACTION of one, handoff_s at most). A pipeline
 * whose gaps are longer cannot use a unit the whole time; the rest of it
 * is not kept. */
static bool in_gap(const rd_share_t *s, double now) {
  return !s->waiting && !s->running && !s->out_of_work && now < gap_end(s);
}

/* When the first gap now kept ends (INFINITY: none): a waiter's deadline,
 * since nothing signals it. */
static double next_gap_end(const rd_share_pool_t *p, double now) {
  double m = INFINITY;
  if (!p->conserving) return m;
  for (const rd_share_t *o = p->shares; o != NULL; o = o->next)
    if (in_gap(o, now) && gap_end(o) < m) m = gap_end(o);
  return m;
}

/* The share's weight now: its group's, split among the group's busy shares. */
static double effective_weight(const rd_share_pool_t *p, const rd_share_t *s, double now) {
  uint32_t k = 0;
  for (const rd_share_t *o = p->shares; o != NULL; o = o->next)
    if (o->group == s->group && (o == s || busy(o, now))) k++;
  return (double)s->group_weight / (double)(k ? k : 1);
}

/* The smallest virtual time of the busy shares other than s (or s's own). */
static double min_busy_vtime(const rd_share_pool_t *p, const rd_share_t *s, double now) {
  double m = INFINITY;
  for (const rd_share_t *o = p->shares; o != NULL; o = o->next)
    if (o != s && busy(o, now) && o->vtime < m) m = o->vtime;
  return m;
}

static bool before(const rd_share_t *a, const rd_share_t *b) {
  return a->vtime < b->vtime || (a->vtime == b->vtime && a->ticket < b->ticket);
}

/* s may start: no waiting share is before it, its units fit beside the
 * other shares' running units, and it is not too far ahead of a share
 * behind it (more than a quantum), by the pool's policy (share.h):
 * strict, it waits while that share is busy at all (running, waiting, or
 * within handoff_s of its last burst and not out of work); work-conserving,
 * that share's width is kept free for it, only while it is in a short gap
 * between two bursts. Either way the rule is what makes weights hold for
 * pipelines, whose threads hand work to each other so that between two
 * bursts a pipeline asks for nothing for a moment: a rule that looked only
 * at waiting shares would give its units to the others in every such gap
 * (work-conserving, and blind to weights). */
static bool my_turn(const rd_share_pool_t *p, const rd_share_t *s, uint32_t units, double now) {
  /* Only other shares' turns take capacity from s: a pipeline's own
   * threads never wait for each other, and alone it has the device. */
  uint32_t taken = p->used - s->running_units;
  for (const rd_share_t *o = p->shares; o != NULL; o = o->next) {
    if (o == s) continue;
    if (o->waiting && before(o, s)) return false;
    if (!(s->vtime > o->vtime + RD_SHARE_QUANTUM_S)) continue;
    if (!p->conserving && handing_over(o, now)) return false;
    if (p->conserving && in_gap(o, now)) taken += o->width;
  }
  return taken == 0 || taken + units <= p->capacity;
}

/* Under the pool's mutex: no share is owed more than RD_SHARE_LAG_S of
 * virtual time behind the busy others. Credit beyond that is time it did
 * not use while it could have (its units went to the others): it passes
 * on, and a share that could not use its part for a long time does not
 * hold the others back for as long once it can. */
static void bound_lag(const rd_share_pool_t *p, rd_share_t *s, double now) {
  double m = min_busy_vtime(p, s, now);
  if (isfinite(m) && s->vtime < m - RD_SHARE_LAG_S) s->vtime = m - RD_SHARE_LAG_S;
}

/* ---- API ---- */

rd_share_t *rd_share_join(rd_share_pool_t *p, const void *group, uint32_t group_weight) {
  rd_share_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->pool = p;
  s->group = group != NULL ? group : (const void *)s;
  s->group_weight = group_weight ? group_weight : 1;
  s->last_end = -INFINITY;
  pthread_mutex_lock(&p->mu);
  double m = min_busy_vtime(p, s, pool_now(p));
  s->vtime = isfinite(m) ? m : 0;
  s->next = p->shares;
  p->shares = s;
  pthread_mutex_unlock(&p->mu);
  return s;
}

void rd_share_leave(rd_share_t *s) {
  if (s == NULL) return;
  rd_share_pool_t *p = s->pool;
  pthread_mutex_lock(&p->mu);
  for (rd_share_t **at = &p->shares; *at != NULL; at = &(*at)->next)
    if (*at == s) {
      *at = s->next;
      break;
    }
  p->used -= s->running_units;
  pthread_cond_broadcast(&p->cv); /* someone may have waited behind it */
  pthread_mutex_unlock(&p->mu);
  free(s);
}

void rd_share_set_group_weight(rd_share_pool_t *p, const void *group, uint32_t weight) {
  pthread_mutex_lock(&p->mu);
  for (rd_share_t *s = p->shares; s != NULL; s = s->next)
    if (s->group == group) s->group_weight = weight ? weight : 1;
  pthread_mutex_unlock(&p->mu);
}

void rd_share_set_group_weight_all(const void *group, uint32_t weight) {
  pthread_mutex_lock(&pools_mu);
  for (rd_share_pool_t *p = pools; p != NULL; p = p->next_global)
    rd_share_set_group_weight(p, group, weight);
  pthread_mutex_unlock(&pools_mu);
}

static uint32_t clamp_units(const rd_share_pool_t *p, uint32_t units) {
  return units == 0 ? 1 : units > p->capacity ? p->capacity : units;
}

/* Under the pool's mutex: one ask of s (a thread entering rd_share_begin). */
static void ask_locked(rd_share_t *s, uint32_t units) {
  rd_share_pool_t *p = s->pool;
  double now = pool_now(p);
  if (!busy(s, now)) { /* back from idle: no credit for the time asleep */
    double m = min_busy_vtime(p, s, now);
    if (isfinite(m) && m > s->vtime) s->vtime = m;
  }
  s->out_of_work = false;
  if (units > s->width) s->width = units;
  s->waiting++;
  if (s->waiting == 1) s->ticket = p->tickets++;
}

/* Under the pool's mutex: start one ask of s if the rule allows now. */
static bool try_start_locked(rd_share_t *s, uint32_t units) {
  rd_share_pool_t *p = s->pool;
  if (!my_turn(p, s, units, pool_now(p))) return false;
  s->waiting--;
  s->running++;
  s->running_units += units;
  p->used += units;
  return true;
}

double rd_share_pool_next_change(rd_share_pool_t *p) {
  pthread_mutex_lock(&p->mu);
  double t = next_gap_end(p, pool_now(p));
  pthread_mutex_unlock(&p->mu);
  return t;
}

void rd_share_ask(rd_share_t *s, uint32_t units) {
  pthread_mutex_lock(&s->pool->mu);
  ask_locked(s, clamp_units(s->pool, units));
  pthread_mutex_unlock(&s->pool->mu);
}

bool rd_share_try_start(rd_share_t *s, uint32_t units) {
  pthread_mutex_lock(&s->pool->mu);
  bool ok = try_start_locked(s, clamp_units(s->pool, units));
  pthread_mutex_unlock(&s->pool->mu);
  return ok;
}

void rd_share_begin(rd_share_t *s, uint32_t units) {
  rd_share_pool_t *p = s->pool;
  units = clamp_units(p, units);
  pthread_mutex_lock(&p->mu);
  ask_locked(s, units);
  /* Timed: a kept gap ends when it passes, and a share goes idle, which no
   * call signals (a 2 ms poll at most). */
  while (!try_start_locked(s, units)) {
    double now = pool_now(p), wait = next_gap_end(p, now) - now;
    if (!(wait < 2e-3)) wait = 2e-3;
    struct timespec ts = rd_cond_deadline(wait > 0 ? wait : 0);
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
  }
  pthread_mutex_unlock(&p->mu);
}

void rd_share_end(rd_share_t *s, uint32_t units, double seconds) {
  rd_share_pool_t *p = s->pool;
  units = clamp_units(p, units);
  pthread_mutex_lock(&p->mu);
  double now = pool_now(p);
  if (!(seconds >= 0)) seconds = 0;
  s->vtime += seconds / effective_weight(p, s, now);
  bound_lag(p, s, now);
  s->burst_s = s->burst_s > 0 ? s->burst_s + (seconds - s->burst_s) / 8 : seconds;
  s->charged += seconds;
  s->running--;
  s->running_units -= units;
  s->last_end = now;
  p->used -= units;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

rd_share_t *rd_share_pick(rd_share_pool_t *p) {
  pthread_mutex_lock(&p->mu);
  rd_share_t *best = NULL;
  /* The list is newest first: ">=" keeps the earliest joined among equals. */
  for (rd_share_t *s = p->shares; s != NULL; s = s->next)
    if (best == NULL || best->vtime >= s->vtime) best = s;
  pthread_mutex_unlock(&p->mu);
  return best;
}

void rd_share_idle(rd_share_t *s) {
  rd_share_pool_t *p = s->pool;
  pthread_mutex_lock(&p->mu);
  /* It holds nobody back; it stays busy for idle_s (a request that
   * follows soon keeps its place in virtual time: no credit is lost for
   * the round trip between two TrainStep calls). */
  s->out_of_work = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

rd_share_pool_t *rd_share_pool_of(const rd_share_t *s) { return s->pool; }

double rd_share_charged(const rd_share_t *s) {
  pthread_mutex_lock(&s->pool->mu);
  double c = s->charged;
  pthread_mutex_unlock(&s->pool->mu);
  return c;
}

double rd_share_vtime(const rd_share_t *s) {
  pthread_mutex_lock(&s->pool->mu);
  double v = s->vtime;
  pthread_mutex_unlock(&s->pool->mu);
  return v;
}
