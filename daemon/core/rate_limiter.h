/* rate_limiter.h - a table's rate limiter and the calls waiting on it.
 *
 * What Reverb's RateLimiter decides, with I items inserted, S sampled and
 * N held (the table's size):
 *   a sample of n items may run when N >= min_size_to_sample and
 *     I * samples_per_insert - S - n >= min_diff;
 *   an insert of m rows may run when N + m <= min_size_to_sample or
 *     (I + m) * samples_per_insert - S <= max_diff.
 * With min_diff = -inf and max_diff = +inf only min_size_to_sample gates
 * (Reverb's MinSize). Without a config ("none") every call runs; the
 * counts are kept either way.
 *
 * Waiting. A call that may not run yet is queued: a rd_limiter_wait_t in
 * the caller's memory, one FIFO per kind, and no thread waits for it. A
 * newcomer runs at once only when nobody of its kind is queued (no
 * overtaking). Whenever the counts or the config change, the queues are
 * granted in order, each head while it may run: a grant counts its items
 * at once (a granted insert as pending, which later inserts count; a
 * granted sample in S) and calls wait->wake(wait, RD_OK), still under the
 * owner's lock: wake must only schedule the call (never call back into its
 * workload). The woken call then runs its grant; a granted call that fails
 * or is dropped gives it back (rd_limiter_release), as if it never ran.
 * Closing the limiter (its workload deleted, the server draining) wakes
 * every queued call with that status and refuses later waits.
 *
 * Bounds: at most rd_limiter_bounds_t's max_per_workload waiting calls per
 * limiter and max_server over every limiter sharing the bounds; past them
 * a wait is RD_ETOOBIG. A waiting call holds a slot while queued; a long
 * call that waits again and again (a sample stream) holds one for its
 * whole life (rd_limiter_hold_slot) and its waits take no other.
 *
 * Threads: the owner's lock (the workload's mutex) guards everything but
 * the shared bounds, which are atomic.
 */
#ifndef RD_RATE_LIMITER_H
#define RD_RATE_LIMITER_H

#include <stdatomic.h>
#include <stdint.h>

#include "rd_error.h"

/* A wait was queued: the call returns later through wake. Not an error. */
#define RD_LIMIT_QUEUED 1

typedef struct {
  uint32_t min_size_to_sample; /* >= 1 */
  double samples_per_insert;   /* > 0 */
  double min_diff, max_diff;   /* min_diff <= max_diff; -inf / +inf allowed */
} rd_limiter_config_t;

/* Check c (messages name "rate_limiter.FIELD"). RD_EINVAL. */
int rd_limiter_config_check(const rd_limiter_config_t *c, rd_error_t *err);

typedef enum { RD_LIMIT_INSERT = 0, RD_LIMIT_SAMPLE = 1 } rd_limit_kind_t;

typedef enum {
  RD_WAIT_IDLE = 0, /* not queued, holds no grant */
  RD_WAIT_QUEUED,   /* in a queue */
  RD_WAIT_GRANTED,  /* woken: holds a grant (status RD_OK) or an end (status < 0) */
} rd_wait_state_t;

typedef struct rd_limiter_wait rd_limiter_wait_t;

struct rd_limiter_wait {
  /* The caller's, set before a wait. */
  void (*wake)(rd_limiter_wait_t *w, int status); /* under the owner's lock: schedule only */
  /* Called under the owner's lock just before the wait is queued: 0 to
   * queue it, or an error (the call cannot wait: the server drains) that
   * the wait then returns. NULL: always queue. */
  int (*prepare)(rd_limiter_wait_t *w, rd_error_t *err);
  void *arg;
  /* The limiter's. */
  rd_limiter_wait_t *next, *prev;
  rd_limit_kind_t kind;
  uint64_t items;
  double since;      /* CLOCK_MONOTONIC seconds it was queued */
  rd_wait_state_t state;
  int status;        /* with RD_WAIT_GRANTED: RD_OK, or the end (RD_ENOTFOUND, RD_ECANCELED) */
  int cancelled;     /* sticky: the caller is gone; no later wait queues */
  int slot;          /* holds a waiting slot for its life (rd_limiter_hold_slot) */
};

/* Shared by the limiters of one server (the registry's). */
typedef struct {
  uint32_t max_server, max_per_workload; /* queued calls */
  atomic_uint waiting;                  /* queued now, over all limiters */
  atomic_int closed;                    /* 0, or the status every wait now ends with */
} rd_limiter_bounds_t;

void rd_limiter_bounds_init(rd_limiter_bounds_t *b, uint32_t max_server,
                            uint32_t max_per_workload);

typedef struct {
  int on;                  /* a config is set */
  rd_limiter_config_t cfg;
  uint64_t inserted;       /* I: rows inserted */
  uint64_t pending;        /* rows of granted inserts not yet done */
  uint64_t sampled;        /* S: items sampled, granted ones included */
  uint32_t capacity;       /* the table's: what N can reach */
  uint64_t held;           /* N as last told */
  rd_limiter_wait_t *head[2], *tail[2];
  uint32_t queued[2];
  uint32_t slots;          /* waiting slots held: queued calls without one of their own, and
                              long calls */
  uint64_t waits[2];       /* calls that ever waited */
  double waited_s[2];      /* their time spent queued, once their wait ended */
  int closed;              /* 0, or the status every wait now ends with */
  rd_limiter_bounds_t *bounds; /* NULL: unbounded */
} rd_limiter_t;

/* cfg NULL: none. capacity: the table's. */
void rd_limiter_init(rd_limiter_t *l, const rd_limiter_config_t *cfg, uint32_t capacity,
                     rd_limiter_bounds_t *bounds);

/* May an insert of m rows / a sample of n items run now, N = held items?
 * (The predicates above, ignoring the queues.) */
int rd_limiter_can_insert(const rd_limiter_t *l, uint64_t held, uint64_t m);
int rd_limiter_can_sample(const rd_limiter_t *l, uint64_t held, uint64_t n);

/* Before an insert of m rows or a sample of n items, N = held. w NULL:
 * do not wait. Returns:
 *   RD_OK            run now (also when w held a grant: it is consumed and
 *                    w is IDLE again): a sample is counted already (a
 *                    sample that then fails: rd_limiter_unsample); an
 *                    insert is pending until rd_limiter_inserted;
 *   RD_LIMIT_QUEUED  w queued; wake comes later;
 *   RD_ETIMEDOUT     held back, and w is NULL (fail fast);
 *   RD_ETOOBIG       held back, and too many calls wait;
 *   an end status    w was woken with it (RD_ENOTFOUND, RD_ECANCELED), w
 *                    was cancelled (RD_ECANCELED), the limiter is closed, or
 *                    prepare refused.
 * err says why on errors. */
int rd_limiter_acquire(rd_limiter_t *l, rd_limit_kind_t kind, uint64_t items, uint64_t held,
                       rd_limiter_wait_t *w, rd_error_t *err);

/* An insert of m rows that acquire let run is done (ok: counted in I) or
 * failed (!ok: as if it never ran), N = held now. Grants what may run. */
void rd_limiter_inserted(rd_limiter_t *l, uint64_t m, int ok, uint64_t held);

/* A sample of n items counted by acquire did not run: uncount it. */
void rd_limiter_unsample(rd_limiter_t *l, uint64_t n, uint64_t held);

/* The caller of w is gone: no later wait of w queues (RD_ECANCELED). If w
 * is queued it leaves the queue and 1 is returned (it will not be woken);
 * otherwise 0 (a grant it holds stays, for rd_limiter_release). */
int rd_limiter_cancel(rd_limiter_t *l, rd_limiter_wait_t *w, uint64_t held);

/* Drop w: dequeue it, or give back a grant it holds and has not used (as
 * if never granted). Returns 1 if w was queued, else 0. */
int rd_limiter_release(rd_limiter_t *l, rd_limiter_wait_t *w, uint64_t held);

/* Counted without a gate: a hosted learner's TrainStep batches. */
void rd_limiter_count_samples(rd_limiter_t *l, uint64_t n, uint64_t held);

/* A hosted learner's sampler: how many batches of `batch` items (at most
 * want) it may sample now, counted; 0 while samples are queued. */
uint32_t rd_limiter_take_batches(rd_limiter_t *l, uint32_t batch, uint32_t want, uint64_t held);

/* w (not queued) holds a waiting slot from now until rd_limiter_drop_slot:
 * RD_ETOOBIG past the bounds, or the end status of a closed limiter. */
int rd_limiter_hold_slot(rd_limiter_t *l, rd_limiter_wait_t *w, rd_error_t *err);
void rd_limiter_drop_slot(rd_limiter_t *l, rd_limiter_wait_t *w);

/* Replace the config (NULL: none); counts stay; grants what may run now. */
void rd_limiter_configure(rd_limiter_t *l, const rd_limiter_config_t *cfg, uint64_t held);

/* A restored table's counts (a checkpoint's cut, durable.h); nothing may
 * wait yet. */
void rd_limiter_set_counts(rd_limiter_t *l, uint64_t inserted, uint64_t sampled);

/* Wake every queued call with status (< 0) and refuse later waits with it. */
void rd_limiter_close(rd_limiter_t *l, int status);

/* Grant what may run (after N changed on its own, e.g. a table moved). */
void rd_limiter_poke(rd_limiter_t *l, uint64_t held);

typedef struct {
  int on;
  rd_limiter_config_t cfg;
  uint64_t inserted, sampled;
  uint32_t queued_inserts, queued_samples;
  uint64_t insert_waits, sample_waits;
  double insert_wait_s, sample_wait_s; /* ended waits, plus the queued ones so far */
} rd_limiter_info_t;

void rd_limiter_info(const rd_limiter_t *l, rd_limiter_info_t *out);

#endif
