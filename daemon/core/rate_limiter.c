/* rate_limiter.c - Reverb's rate limiter over a table's counts, and FIFO
 * queues of the calls waiting on it (rate_limiter.h). */
#include "rate_limiter.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "rd_clock.h"

static const char *const kind_name[2] = {"insert", "sample"};

int rd_limiter_config_check(const rd_limiter_config_t *c, rd_error_t *err) {
  if (c->min_size_to_sample < 1)
    return rd_error_set(err, RD_EINVAL, "rate_limiter.min_size_to_sample must be >= 1");
  if (!isfinite(c->samples_per_insert) || !(c->samples_per_insert > 0) ||
      c->samples_per_insert > 1e6)
    return rd_error_set(err, RD_EINVAL, "rate_limiter.samples_per_insert must be in (0, 1e6], "
                        "not %g", c->samples_per_insert);
  if (isnan(c->min_diff) || isnan(c->max_diff) || c->min_diff == INFINITY ||
      c->max_diff == -INFINITY)
    return rd_error_set(err, RD_EINVAL, "rate_limiter.min_diff %g and max_diff %g must be "
                        "numbers (min_diff may be -inf, max_diff +inf)", c->min_diff, c->max_diff);
  if (c->min_diff > c->max_diff)
    return rd_error_set(err, RD_EINVAL, "rate_limiter.min_diff %g is above max_diff %g",
                        c->min_diff, c->max_diff);
  return RD_OK;
}

void rd_limiter_bounds_init(rd_limiter_bounds_t *b, uint32_t max_server,
                            uint32_t max_per_workload) {
  b->max_server = max_server;
  b->max_per_workload = max_per_workload;
  atomic_init(&b->waiting, 0);
  atomic_init(&b->closed, 0);
}

void rd_limiter_init(rd_limiter_t *l, const rd_limiter_config_t *cfg, uint32_t capacity,
                     rd_limiter_bounds_t *bounds) {
  memset(l, 0, sizeof *l);
  if (cfg != NULL) {
    l->on = 1;
    l->cfg = *cfg;
  }
  l->capacity = capacity;
  l->bounds = bounds;
}

/* ------------------------------------------------------------------ */
/* The predicates                                                      */
/* ------------------------------------------------------------------ */

/* I * spi - S: how far sampling trails the ratio. */
static double diff(const rd_limiter_t *l, uint64_t inserted) {
  return (double)inserted * l->cfg.samples_per_insert - (double)l->sampled;
}

int rd_limiter_can_insert(const rd_limiter_t *l, uint64_t held, uint64_t m) {
  if (!l->on) return 1;
  if (held + l->pending + m <= l->cfg.min_size_to_sample) return 1;
  return diff(l, l->inserted + l->pending + m) <= l->cfg.max_diff;
}

int rd_limiter_can_sample(const rd_limiter_t *l, uint64_t held, uint64_t n) {
  if (!l->on) return 1;
  if (held < l->cfg.min_size_to_sample) return 0;
  return diff(l, l->inserted) - (double)n >= l->cfg.min_diff;
}

static int can(const rd_limiter_t *l, rd_limit_kind_t k, uint64_t held, uint64_t n) {
  return k == RD_LIMIT_INSERT ? rd_limiter_can_insert(l, held, n)
                              : rd_limiter_can_sample(l, held, n);
}

/* Items a call of this kind has counted while it holds its go. */
static void count(rd_limiter_t *l, rd_limit_kind_t k, uint64_t n) {
  if (k == RD_LIMIT_INSERT) l->pending += n;
  else l->sampled += n;
}

static void uncount(rd_limiter_t *l, rd_limit_kind_t k, uint64_t n) {
  if (k == RD_LIMIT_INSERT) l->pending -= n < l->pending ? n : l->pending;
  else l->sampled -= n < l->sampled ? n : l->sampled;
}

/* ------------------------------------------------------------------ */
/* Queues                                                              */
/* ------------------------------------------------------------------ */

/* A waiting slot within the bounds, or RD_ETOOBIG. */
static int take_slot(rd_limiter_t *l, rd_error_t *err) {
  rd_limiter_bounds_t *b = l->bounds;
  if (b == NULL) {
    l->slots++;
    return RD_OK;
  }
  if (l->slots >= b->max_per_workload)
    return rd_error_set(err, RD_ETOOBIG, "this workload already has %u calls waiting "
                        "(--max-waiting-per-workload); retry later", l->slots);
  if (atomic_fetch_add(&b->waiting, 1) >= b->max_server) {
    atomic_fetch_sub(&b->waiting, 1);
    return rd_error_set(err, RD_ETOOBIG, "this server already has %u calls waiting "
                        "(--max-waiting-calls); retry later", b->max_server);
  }
  l->slots++;
  return RD_OK;
}

static void put_slot(rd_limiter_t *l) {
  l->slots--;
  if (l->bounds) atomic_fetch_sub(&l->bounds->waiting, 1);
}

static void push(rd_limiter_t *l, rd_limiter_wait_t *w) {
  rd_limit_kind_t k = w->kind;
  w->next = NULL;
  w->prev = l->tail[k];
  if (l->tail[k]) l->tail[k]->next = w;
  else l->head[k] = w;
  l->tail[k] = w;
  l->queued[k]++;
}

/* Take w out of its queue: its wait is over (accounted here). */
static void unlink_wait(rd_limiter_t *l, rd_limiter_wait_t *w) {
  rd_limit_kind_t k = w->kind;
  if (w->prev) w->prev->next = w->next;
  else l->head[k] = w->next;
  if (w->next) w->next->prev = w->prev;
  else l->tail[k] = w->prev;
  w->next = w->prev = NULL;
  l->queued[k]--;
  l->waited_s[k] += rd_clock_now() - w->since;
  if (!w->slot) put_slot(l);
}

/* w leaves its queue woken with status (RD_OK: a grant, counted). */
static void wake(rd_limiter_t *l, rd_limiter_wait_t *w, int status) {
  unlink_wait(l, w);
  if (status == RD_OK) count(l, w->kind, w->items);
  w->state = RD_WAIT_GRANTED;
  w->status = status;
  w->wake(w, status);
}

/* Grant each queue's heads while they may run: samples first (a granted
 * sample lowers the difference, which may let inserts through; a granted
 * insert is only pending and lets no sample through until it is done). */
static void grant(rd_limiter_t *l, uint64_t held) {
  l->held = held;
  while (l->head[RD_LIMIT_SAMPLE] &&
         rd_limiter_can_sample(l, held, l->head[RD_LIMIT_SAMPLE]->items))
    wake(l, l->head[RD_LIMIT_SAMPLE], RD_OK);
  while (l->head[RD_LIMIT_INSERT] &&
         rd_limiter_can_insert(l, held, l->head[RD_LIMIT_INSERT]->items))
    wake(l, l->head[RD_LIMIT_INSERT], RD_OK);
}

/* ------------------------------------------------------------------ */
/* Calls                                                               */
/* ------------------------------------------------------------------ */

static int closed_status(const rd_limiter_t *l) {
  if (l->closed) return l->closed;
  return l->bounds ? atomic_load(&l->bounds->closed) : 0;
}

static int end_error(int status, rd_limit_kind_t k, rd_error_t *err) {
  if (status == RD_ENOTFOUND)
    return rd_error_set(err, status, "the workload was deleted while the %s waited for its "
                        "rate limiter", kind_name[k]);
  if (status == RD_ECANCELED)
    return rd_error_set(err, status, "the server is shutting down; the %s no longer waits for "
                        "its rate limiter", kind_name[k]);
  return rd_error_set(err, status, "the %s's wait for the rate limiter ended", kind_name[k]);
}

/* Why a call of this kind is held back. */
static int held_back(const rd_limiter_t *l, rd_limit_kind_t k, uint64_t n, uint64_t held,
                     int code, const char *then, rd_error_t *err) {
  const rd_limiter_config_t *c = &l->cfg;
  if (l->queued[k] > 0)
    return rd_error_set(err, code, "the rate limiter holds this %s back: %u earlier %ss wait "
                        "before it; %s", kind_name[k], l->queued[k], kind_name[k], then);
  if (k == RD_LIMIT_SAMPLE && held < c->min_size_to_sample)
    return rd_error_set(err, code, "the rate limiter holds this sample back: the table holds "
                        "%llu items, min_size_to_sample is %u; %s", (unsigned long long)held,
                        c->min_size_to_sample, then);
  return rd_error_set(err, code, "the rate limiter holds this %s of %llu back: %llu inserted x "
                      "samples_per_insert %g - %llu sampled must stay within [min_diff %g, "
                      "max_diff %g]; %s", kind_name[k], (unsigned long long)n,
                      (unsigned long long)(l->inserted + l->pending), c->samples_per_insert,
                      (unsigned long long)l->sampled, c->min_diff, c->max_diff, then);
}

int rd_limiter_acquire(rd_limiter_t *l, rd_limit_kind_t kind, uint64_t items, uint64_t held,
                       rd_limiter_wait_t *w, rd_error_t *err) {
  if (w != NULL && w->state == RD_WAIT_GRANTED) {
    w->state = RD_WAIT_IDLE;
    return w->status == RD_OK ? RD_OK : end_error(w->status, kind, err);
  }
  if (w != NULL && w->state == RD_WAIT_QUEUED)
    return rd_error_set(err, RD_EINVAL, "this call already waits for the rate limiter");
  if (l->queued[kind] == 0 && can(l, kind, held, items)) {
    count(l, kind, items);
    if (kind == RD_LIMIT_SAMPLE) grant(l, held); /* a lower difference may let inserts run */
    return RD_OK;
  }
  if (w == NULL)
    return held_back(l, kind, items, held, RD_ETIMEDOUT, "the call asked not to wait (fail_fast)",
                     err);
  if (w->cancelled)
    return rd_error_set(err, RD_ECANCELED, "the call was cancelled while it waited for the "
                        "rate limiter");
  int closed = closed_status(l);
  if (closed) return end_error(closed, kind, err);
  if (!w->slot) {
    rd_error_t why;
    if (take_slot(l, &why) != RD_OK)
      return held_back(l, kind, items, held, RD_ETOOBIG, why.msg, err);
  }
  if (w->prepare != NULL) {
    int rc = w->prepare(w, err);
    if (rc != RD_OK) {
      if (!w->slot) put_slot(l);
      return rc;
    }
  }
  w->kind = kind;
  w->items = items;
  w->since = rd_clock_now();
  w->state = RD_WAIT_QUEUED;
  w->status = RD_OK;
  push(l, w);
  l->waits[kind]++;
  return RD_LIMIT_QUEUED;
}

void rd_limiter_inserted(rd_limiter_t *l, uint64_t m, int ok, uint64_t held) {
  uncount(l, RD_LIMIT_INSERT, m);
  if (ok) l->inserted += m;
  grant(l, held);
}

void rd_limiter_unsample(rd_limiter_t *l, uint64_t n, uint64_t held) {
  uncount(l, RD_LIMIT_SAMPLE, n);
  grant(l, held);
}

int rd_limiter_cancel(rd_limiter_t *l, rd_limiter_wait_t *w, uint64_t held) {
  w->cancelled = 1;
  if (w->state != RD_WAIT_QUEUED) return 0;
  unlink_wait(l, w);
  w->state = RD_WAIT_IDLE;
  grant(l, held); /* a head that left may have held others up */
  return 1;
}

int rd_limiter_release(rd_limiter_t *l, rd_limiter_wait_t *w, uint64_t held) {
  if (w->state == RD_WAIT_QUEUED) {
    unlink_wait(l, w);
    w->state = RD_WAIT_IDLE;
    grant(l, held);
    return 1;
  }
  if (w->state == RD_WAIT_GRANTED) {
    w->state = RD_WAIT_IDLE;
    if (w->status == RD_OK) {
      uncount(l, w->kind, w->items);
      grant(l, held);
    }
  }
  return 0;
}

void rd_limiter_count_samples(rd_limiter_t *l, uint64_t n, uint64_t held) {
  l->sampled += n;
  grant(l, held);
}

uint32_t rd_limiter_take_batches(rd_limiter_t *l, uint32_t batch, uint32_t want, uint64_t held) {
  if (want == 0 || batch == 0) return 0;
  uint32_t k = want;
  if (l->on) {
    if (l->queued[RD_LIMIT_SAMPLE] > 0 || held < l->cfg.min_size_to_sample) return 0;
    double room = diff(l, l->inserted) - l->cfg.min_diff; /* items that may be sampled */
    if (!(room >= (double)batch)) return 0;
    if (room < (double)batch * want) k = (uint32_t)(room / batch);
    /* The division's rounding must not grant one more than the rule. */
    while (k > 0 && !rd_limiter_can_sample(l, held, (uint64_t)k * batch)) k--;
  }
  if (k > 0) {
    l->sampled += (uint64_t)k * batch;
    grant(l, held);
  }
  return k;
}

int rd_limiter_hold_slot(rd_limiter_t *l, rd_limiter_wait_t *w, rd_error_t *err) {
  if (w->slot) return RD_OK;
  int closed = closed_status(l);
  if (closed) return end_error(closed, RD_LIMIT_SAMPLE, err);
  int rc = take_slot(l, err);
  if (rc == RD_OK) w->slot = 1;
  return rc;
}

void rd_limiter_drop_slot(rd_limiter_t *l, rd_limiter_wait_t *w) {
  if (!w->slot) return;
  w->slot = 0;
  /* A queued wait then holds the slot it would have taken. */
  if (w->state != RD_WAIT_QUEUED) put_slot(l);
}

void rd_limiter_configure(rd_limiter_t *l, const rd_limiter_config_t *cfg, uint64_t held) {
  l->on = cfg != NULL;
  if (cfg) l->cfg = *cfg;
  grant(l, held);
}

void rd_limiter_close(rd_limiter_t *l, int status) {
  l->closed = status;
  for (int k = 0; k < 2; k++)
    while (l->head[k]) wake(l, l->head[k], status);
}

void rd_limiter_poke(rd_limiter_t *l, uint64_t held) { grant(l, held); }

void rd_limiter_info(const rd_limiter_t *l, rd_limiter_info_t *out) {
  memset(out, 0, sizeof *out);
  out->on = l->on;
  out->cfg = l->cfg;
  out->inserted = l->inserted;
  out->sampled = l->sampled;
  out->queued_inserts = l->queued[RD_LIMIT_INSERT];
  out->queued_samples = l->queued[RD_LIMIT_SAMPLE];
  out->insert_waits = l->waits[RD_LIMIT_INSERT];
  out->sample_waits = l->waits[RD_LIMIT_SAMPLE];
  double now = rd_clock_now(), waited[2] = {l->waited_s[0], l->waited_s[1]};
  for (int k = 0; k < 2; k++)
    for (const rd_limiter_wait_t *w = l->head[k]; w; w = w->next) waited[k] += now - w->since;
  out->insert_wait_s = waited[RD_LIMIT_INSERT];
  out->sample_wait_s = waited[RD_LIMIT_SAMPLE];
}

void rd_limiter_set_counts(rd_limiter_t *l, uint64_t inserted, uint64_t sampled) {
  l->inserted = inserted;
  l->sampled = sampled;
}
