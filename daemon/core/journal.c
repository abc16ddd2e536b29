/* journal.c - the write-ahead journal (journal.h): appends under the table
 * lock into memory, one committer thread that writes and fdatasyncs them
 * in rounds, acknowledgements from that thread, segment rotation at
 * checkpoint cuts, and the reader a restore replays with.
 *
 * Locks: the table lock (appenders hold it), then mu. The committer takes
 * only mu, and never while it writes or syncs.
 */
#define _GNU_SOURCE
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "ckpt_file.h"
#include "log.h"
#include "rd_clock.h"
#include "rd_cond.h"

#define JR_MAGIC 0x524a4452u         /* "RDJR" */
#define ROUND_MAX_BYTES (4u << 20)   /* a round starts early once this much waits */
#define RECORD_MAX_BYTES (UINT64_C(1) << 32)
#define AHEAD_MAX (UINT64_C(8) << 20)   /* space allocated ahead of the records, at most */

/* A rotation inside a buffer: the records from off on go to segment gen;
 * the ones before it end at cut_lsn. */
typedef struct {
  size_t off;
  uint64_t gen, cut_lsn;
} rot_t;

typedef struct {
  uint8_t *data;
  size_t len, cap;
  rot_t *rots;
  size_t nrots, caprots;
  uint64_t last_lsn; /* of its last record; 0: none */
} jbuf_t;

struct rd_journal {
  char dir[PATH_MAX];
  rd_journal_config_t cfg;
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_sync, cv_synced;
  pthread_t thread, syncer;
  int stop, sync_stop;
  /* Written and not yet synced (the syncer's queue): records (q_lo, q_hi]
   * of segment q_seg on q_fd, the first written at q_t0. One segment at a
   * time: the committer drains the queue before it leaves a segment. */
  int q_has, syncing;
  uint64_t q_seg, q_lo, q_hi;
  int q_fd;
  double q_t0;
  jbuf_t active, writing;  /* appenders fill active; the committer writes `writing` */
  uint64_t gen_append;     /* segment appends go to */
  uint64_t gen_file;       /* segment fd is (committer) */
  int fd;
  uint64_t pos, alloc_end;     /* committer: where the next record goes; the zeroed end */
  int zeroed;                  /* extend writes zeros (RD_JOURNAL_ZEROED) */
  /* Direct I/O (journal.h; committer): fd has O_DIRECT, writes are staged
   * in `stage` (aligned to `align`) behind the segment's last `tail` bytes
   * since its last aligned offset, which stage[0, tail) holds. */
  int direct;
  uint32_t align;
  uint8_t *stage;
  size_t stage_cap, tail;
  /* Written under mu; read without it (rd_journal_last_lsn, by every
   * journaled insert and update under its workload's lock): one lock less
   * on that path. */
  _Atomic uint64_t last_lsn;
  uint64_t durable_lsn, failed_upto;
  uint64_t round_lsn;          /* the last record handed to the committer */
  uint64_t ahead_lo, ahead_hi; /* records (lo, hi] on disk beyond a failed gap */
  uint64_t pending;        /* bytes appended, not yet written */
  double first_append;     /* CLOCK_MONOTONIC of active's first record */
  int failed;
  uint64_t fail_gen;
  char why[RD_ERROR_MSG_MAX];
  rd_journal_waiter_t *waiters;
  rd_journal_stats_t st;
};

void rd_journal_path(char *buf, size_t cap, const char *dir, uint64_t gen) {
  snprintf(buf, cap, "%s/journal-%016llx.log", dir, (unsigned long long)gen);
}

static void jbuf_free(jbuf_t *b) {
  free(b->data);
  free(b->rots);
  memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------ */
/* Appending (table lock held)                                         */
/* ------------------------------------------------------------------ */

size_t rd_journal_insert_bytes(size_t n_rows, uint32_t n_fields, const size_t *field_bytes,
                               int has_priorities) {
  size_t b = RD_JOURNAL_HEADER_BYTES + 24 + 8 * (size_t)n_fields;
  for (uint32_t f = 0; f < n_fields; f++) b += n_rows * field_bytes[f];
  return b + (has_priorities ? n_rows * sizeof(double) : 0);
}

size_t rd_journal_update_bytes(size_t n) { return RD_JOURNAL_HEADER_BYTES + 8 + 16 * n; }

/* Under mu: the journal failed; records up to upto are lost. */
static void fail_locked(rd_journal_t *j, uint64_t gen, uint64_t upto, const char *why) {
  if (!j->failed)
    rd_log_error("journal", "%s: %s; inserts and updates are refused until a checkpoint "
                 "succeeds", j->dir, why);
  j->failed = 1;
  j->fail_gen = gen;
  if (upto > j->failed_upto) j->failed_upto = upto;
  snprintf(j->why, sizeof j->why, "%s", why);
}

/* Room for len more bytes in active, or 0 (out of memory: the journal fails). */
static uint8_t *reserve(rd_journal_t *j, size_t len) {
  jbuf_t *b = &j->active;
  if (b->cap - b->len < len) {
    size_t cap = b->cap ? b->cap : 65536;
    while (cap - b->len < len) cap *= 2;
    uint8_t *nd = realloc(b->data, cap);
    if (nd == NULL) return NULL;
    b->data = nd;
    b->cap = cap;
  }
  return b->data + b->len;
}

/* Under mu: header at p (payload already after it), hash, account. */
static void seal(rd_journal_t *j, uint8_t *p, uint32_t type, size_t payload) {
  uint64_t lsn = ++j->last_lsn;
  rd_le_put32(p, JR_MAGIC);
  rd_le_put32(p + 4, type);
  rd_le_put64(p + 8, lsn);
  rd_le_put64(p + 16, payload);
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, p, 24);
  XXH3_64bits_update(&st, p + RD_JOURNAL_HEADER_BYTES, payload);
  rd_le_put64(p + 24, XXH3_64bits_digest(&st));
  size_t rec = RD_JOURNAL_HEADER_BYTES + payload;
  if (j->active.len == 0 && j->active.nrots == 0) {
    j->first_append = rd_clock_now();
    pthread_cond_signal(&j->cv_work);
  }
  j->active.len += rec;
  j->active.last_lsn = lsn;
  j->pending += rec;
  if (j->cfg.shared_pending) atomic_fetch_add(j->cfg.shared_pending, rec);
  j->st.records++;
  j->st.bytes += rec;
}

static void append_insert(void *arg, uint64_t first_key, size_t n, uint32_t n_fields,
                          const rd_cbuf_t *cols, const double *priorities) {
  rd_journal_t *j = arg;
  size_t payload = 24 + 8 * (size_t)n_fields + (priorities ? n * sizeof(double) : 0);
  for (uint32_t f = 0; f < n_fields; f++) payload += cols[f].bytes;
  pthread_mutex_lock(&j->mu);
  uint8_t *p = reserve(j, RD_JOURNAL_HEADER_BYTES + payload);
  if (p == NULL) {
    fail_locked(j, j->gen_append, j->last_lsn + 1, "out of memory buffering a record");
    j->last_lsn++; /* the insert's record, lost */
    pthread_mutex_unlock(&j->mu);
    return;
  }
  uint8_t *q = p + RD_JOURNAL_HEADER_BYTES;
  rd_le_put64(q, first_key);
  rd_le_put32(q + 8, (uint32_t)n);
  rd_le_put32(q + 12, n_fields);
  rd_le_put32(q + 16, priorities != NULL);
  rd_le_put32(q + 20, 0);
  q += 24;
  for (uint32_t f = 0; f < n_fields; f++, q += 8) rd_le_put64(q, cols[f].bytes);
  for (uint32_t f = 0; f < n_fields; f++) {
    memcpy(q, cols[f].data, cols[f].bytes);
    q += cols[f].bytes;
  }
  if (priorities) memcpy(q, priorities, n * sizeof(double));
  seal(j, p, RD_JOURNAL_REC_INSERT, payload);
  pthread_mutex_unlock(&j->mu);
}

static void append_update(void *arg, size_t n, const uint64_t *keys, const double *priorities) {
  rd_journal_t *j = arg;
  size_t payload = 8 + 16 * n;
  pthread_mutex_lock(&j->mu);
  uint8_t *p = reserve(j, RD_JOURNAL_HEADER_BYTES + payload);
  if (p == NULL) {
    fail_locked(j, j->gen_append, j->last_lsn + 1, "out of memory buffering a record");
    j->last_lsn++;
    pthread_mutex_unlock(&j->mu);
    return;
  }
  uint8_t *q = p + RD_JOURNAL_HEADER_BYTES;
  rd_le_put32(q, (uint32_t)n);
  rd_le_put32(q + 4, 0);
  memcpy(q + 8, keys, n * 8);
  memcpy(q + 8 + n * 8, priorities, n * sizeof(double));
  seal(j, p, RD_JOURNAL_REC_UPDATE, payload);
  pthread_mutex_unlock(&j->mu);
}

rd_table_observer_t rd_journal_observer(rd_journal_t *j) {
  rd_table_observer_t o = {append_insert, append_update, j};
  return o;
}

int rd_journal_admit(rd_journal_t *j, size_t bytes, rd_error_t *err) {
  pthread_mutex_lock(&j->mu);
  int rc = RD_OK;
  if (j->failed)
    rc = rd_error_set(err, RD_ESTORE, "the write-ahead journal failed (%s): inserts and updates "
                      "are refused until a checkpoint succeeds", j->why);
  else {
    /* The server's sum where journals share one (journal.h): a record
     * larger than the bound still goes when nothing waits. */
    const uint64_t pend = j->cfg.shared_pending ? atomic_load(j->cfg.shared_pending) : j->pending;
    if (pend > 0 && pend + bytes > j->cfg.max_pending)
      rc = rd_error_set(err, RD_ETOOBIG, "%llu bytes of journal records%s are waiting for the "
                        "disk; retry later", (unsigned long long)pend,
                        j->cfg.shared_pending ? " (all workloads')" : "");
  }
  pthread_mutex_unlock(&j->mu);
  return rc;
}

uint64_t rd_journal_last_lsn(rd_journal_t *j) { return atomic_load(&j->last_lsn); }

uint64_t rd_journal_rotate(rd_journal_t *j, uint64_t gen) {
  pthread_mutex_lock(&j->mu);
  jbuf_t *b = &j->active;
  uint64_t cut = j->last_lsn;
  if (b->nrots == b->caprots) {
    size_t cap = b->caprots ? 2 * b->caprots : 4;
    rot_t *nr = realloc(b->rots, cap * sizeof *nr);
    if (nr == NULL) { /* the records after the cut cannot be placed: fail them */
      fail_locked(j, gen, UINT64_MAX, "out of memory rotating the journal");
      j->gen_append = gen;
      pthread_mutex_unlock(&j->mu);
      return cut;
    }
    b->rots = nr;
    b->caprots = cap;
  }
  b->rots[b->nrots++] = (rot_t){b->len, gen, cut};
  j->gen_append = gen;
  if (b->len == 0 && b->nrots == 1) j->first_append = rd_clock_now();
  pthread_cond_signal(&j->cv_work);
  pthread_mutex_unlock(&j->mu);
  return cut;
}

/* ------------------------------------------------------------------ */
/* Acknowledging                                                       */
/* ------------------------------------------------------------------ */

/* Under mu: take the waiters that are done (durable, or failed) off the
 * list into *ok / *bad. */
static void take_done(rd_journal_t *j, rd_journal_waiter_t **ok, rd_journal_waiter_t **bad) {
  rd_journal_waiter_t **pp = &j->waiters;
  while (*pp != NULL) {
    rd_journal_waiter_t *w = *pp;
    if (w->lsn <= j->durable_lsn) {
      *pp = w->next;
      w->next = *ok;
      *ok = w;
    } else if (w->lsn <= j->failed_upto) {
      *pp = w->next;
      w->next = *bad;
      *bad = w;
    } else {
      pp = &w->next;
    }
  }
}

static void call_waiters(rd_journal_waiter_t *ok, rd_journal_waiter_t *bad, int bad_rc,
                         const char *why) {
  rd_error_t e;
  rd_error_clear(&e);
  while (ok != NULL) {
    rd_journal_waiter_t *n = ok->next;
    ok->cb(ok->arg, RD_OK, &e);
    ok = n;
  }
  if (bad == NULL) return;
  rd_error_set(&e, bad_rc, "%s", why);
  while (bad != NULL) {
    rd_journal_waiter_t *n = bad->next;
    bad->cb(bad->arg, bad_rc, &e);
    bad = n;
  }
}

int rd_journal_when_durable(rd_journal_t *j, uint64_t lsn, rd_journal_waiter_t *w,
                            rd_journal_cb cb, void *arg, rd_error_t *err) {
  pthread_mutex_lock(&j->mu);
  int rc = 0;
  if (lsn <= j->durable_lsn) {
    rc = 1;
  } else if (lsn <= j->failed_upto || lsn > j->last_lsn) {
    rc = rd_error_set(err, RD_ESTORE, "the write-ahead journal lost this call's record (%s)",
                      j->failed ? j->why : "never appended");
  } else if (j->stop) {
    rc = rd_error_set(err, RD_ECANCELED, "the journal is closing");
  } else {
    w->lsn = lsn;
    w->cb = cb;
    w->arg = arg;
    w->next = j->waiters;
    j->waiters = w;
  }
  pthread_mutex_unlock(&j->mu);
  return rc;
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
  rd_error_t err;
} sync_t;

static void sync_cb(void *arg, int rc, const rd_error_t *err) {
  sync_t *s = arg;
  pthread_mutex_lock(&s->mu);
  s->rc = rc;
  if (err) s->err = *err;
  s->done = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

int rd_journal_sync(rd_journal_t *j, uint64_t lsn, rd_error_t *err) {
  sync_t s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  rd_journal_waiter_t w;
  int rc = rd_journal_when_durable(j, lsn, &w, sync_cb, &s, err);
  if (rc == 0) {
    pthread_mutex_lock(&s.mu);
    while (!s.done) pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    rc = s.rc;
    if (rc && err) *err = s.err;
  } else if (rc == 1) {
    rc = RD_OK;
  }
  pthread_cond_destroy(&s.cv);
  pthread_mutex_destroy(&s.mu);
  return rc;
}

void rd_journal_checkpointed(rd_journal_t *j, uint64_t gen, uint64_t cut_lsn) {
  rd_journal_waiter_t *ok = NULL, *bad = NULL;
  pthread_mutex_lock(&j->mu);
  if (j->failed && gen > j->fail_gen) {
    rd_log_info("journal", "%s: checkpoint %llu holds what the journal lost; inserts and "
                "updates are accepted again", j->dir, (unsigned long long)gen);
    j->failed = 0;
    j->why[0] = '\0';
  }
  if (cut_lsn > j->durable_lsn) j->durable_lsn = cut_lsn;
  if (j->ahead_hi > 0 && j->ahead_lo <= j->durable_lsn) { /* the gap is covered now */
    if (j->ahead_hi > j->durable_lsn) j->durable_lsn = j->ahead_hi;
    j->ahead_lo = j->ahead_hi = 0;
  }
  take_done(j, &ok, &bad);
  pthread_mutex_unlock(&j->mu);
  call_waiters(ok, bad, RD_ESTORE, "the write-ahead journal failed");
}

void rd_journal_stats(rd_journal_t *j, rd_journal_stats_t *out) {
  pthread_mutex_lock(&j->mu);
  *out = j->st;
  out->last_lsn = j->last_lsn;
  out->durable_lsn = j->durable_lsn;
  out->segment = j->gen_append;
  out->failed = j->failed;
  snprintf(out->why, sizeof out->why, "%s", j->why);
  pthread_mutex_unlock(&j->mu);
}

/* ------------------------------------------------------------------ */
/* The committer                                                       */
/* ------------------------------------------------------------------ */

static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off, int *e) {
  while (len > 0) {
    ssize_t k = pwrite(fd, p, len, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      *e = k < 0 ? errno : EIO;
      return -1;
    }
    p += k;
    len -= (size_t)k;
    off += (uint64_t)k;
  }
  return 0;
}

/* Zeros over [from, to); *done: how far it got. */
static int zero_fill(int fd, uint64_t from, uint64_t to, uint64_t *done, int *e) {
  static const uint8_t zeros[65536];
  *done = from;
  while (*done < to) {
    size_t n = to - *done < sizeof zeros ? (size_t)(to - *done) : sizeof zeros;
    if (pwrite_all(fd, zeros, n, *done, e) != 0) return -1;
    *done += n;
  }
  return 0;
}

/* The file extended to `to` with blocks that read as zeros: fallocate, or
 * zeros written where the file system has no fallocate or the config asks
 * for them (RD_JOURNAL_ZEROED: written blocks, whose later fdatasyncs
 * convert no extent, but every byte written twice; bench_durability's
 * durability.journal_rows_s measures both, and zeros lose). */
static int leave_direct(rd_journal_t *j, int *e);

static int extend(rd_journal_t *j, uint64_t from, uint64_t to, uint64_t *done, int *e) {
  *done = from;
  if (j->zeroed) return zero_fill(j->fd, from, to, done, e);
  if (fallocate(j->fd, 0, (off_t)from, (off_t)(to - from)) == 0) {
    *done = to;
    return 0;
  }
  if (errno != EOPNOTSUPP && errno != ENOSYS && errno != ENODEV) { /* ENODEV: not a file */
    *e = errno;
    return -1;
  }
  if (j->direct && leave_direct(j, e) != 0) return -1; /* zeros are written unaligned */
  return zero_fill(j->fd, from, to, done, e);
}

/* Room for len bytes at pos inside the file's size: an fdatasync of a
 * write there does not also commit a new file size, as an append's does
 * (docs/benchmarks.md: the journal's rounds measured with appends, zeroed
 * and allocated space). The allocated end runs ahead of pos by half the
 * segment so far (64 KiB to AHEAD_MAX); on a full disk, by what this write
 * needs. The space reads as zeros, which readers take as the end of the
 * records (rd_journal_read). */
static int ensure_space(rd_journal_t *j, size_t len, int *e) {
  uint64_t need = j->pos + len;
  if (need <= j->alloc_end) return 0;
  uint64_t ahead = j->alloc_end / 2;
  if (ahead < (64u << 10)) ahead = 64u << 10;
  if (ahead > AHEAD_MAX) ahead = AHEAD_MAX;
  uint64_t target = (need + ahead + 4095) & ~UINT64_C(4095), done = j->alloc_end;
  if (extend(j, j->alloc_end, target, &done, e) != 0) {
    if (*e != ENOSPC && *e != EDQUOT) return -1;
    target = (need + 4095) & ~UINT64_C(4095); /* just this write, if it fits */
    if (done < target && extend(j, done, target, &done, e) != 0) return -1;
  }
  j->alloc_end = done;
  return 0;
}

/* Open segment gen for appending; the directory entry made durable. */
static int open_segment(const char *dir, uint64_t gen, int truncate, int *e) {
  char path[PATH_MAX + 40];
  rd_journal_path(path, sizeof path, dir, gen);
  /* Read and write: a direct write starts at the last partial block,
   * which direct_setup reads back. */
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0600);
  if (fd < 0) {
    *e = errno;
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) {
    *e = errno;
    if (dfd >= 0) close(dfd);
    close(fd);
    return -1;
  }
  close(dfd);
  return fd;
}

/* ---- Direct I/O (journal.h) ---- */

/* stage holds at least cap bytes, aligned; keeps its first `tail` bytes. */
static int stage_reserve(rd_journal_t *j, size_t cap, int *e) {
  if (cap <= j->stage_cap) return 0;
  size_t n = j->stage_cap ? j->stage_cap : 1u << 20;
  while (n < cap) n *= 2;
  void *p = NULL;
  if (posix_memalign(&p, j->align, n) != 0) {
    *e = ENOMEM;
    return -1;
  }
  if (j->tail) memcpy(p, j->stage, j->tail);
  free(j->stage);
  j->stage = p;
  j->stage_cap = n;
  return 0;
}

/* Segment fd was just opened with its records ending at pos: written with
 * O_DIRECT from now on where the file system states its alignment (else
 * through the page cache, as before). */
static void direct_setup(rd_journal_t *j) {
  j->direct = 0;
  j->tail = 0;
#ifdef STATX_DIOALIGN
  if (j->cfg.buffered || j->zeroed) return;
  struct statx sx;
  if (statx(j->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 ||
      !(sx.stx_mask & STATX_DIOALIGN) || sx.stx_dio_offset_align == 0)
    return;
  uint32_t align = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align
                                                                   : sx.stx_dio_mem_align;
  if (align > 65536 || (align & (align - 1)) != 0) return;
  if (align < sizeof(void *)) align = sizeof(void *); /* posix_memalign's least */
  if (j->stage != NULL && j->align != align) {
    free(j->stage);
    j->stage = NULL;
    j->stage_cap = 0;
  }
  j->align = align;
  int e = 0;
  size_t tail = (size_t)(j->pos % align);
  if (stage_reserve(j, tail, &e) != 0) return;
  /* The partial block the first write rewrites: read back through the
   * page cache, before O_DIRECT is set. */
  if (tail > 0 && pread(j->fd, j->stage, tail, (off_t)(j->pos - tail)) != (ssize_t)tail) return;
  int fl = fcntl(j->fd, F_GETFL);
  if (fl < 0 || fcntl(j->fd, F_SETFL, fl | O_DIRECT) != 0) return;
  j->tail = tail;
  j->direct = 1;
#endif
}

/* Back to the page cache for this segment (a direct write refused). */
static int leave_direct(rd_journal_t *j, int *e) {
  int fl = fcntl(j->fd, F_GETFL);
  if (fl < 0 || fcntl(j->fd, F_SETFL, fl & ~O_DIRECT) != 0) {
    *e = errno;
    return -1;
  }
  rd_log_info("journal", "%s: a direct write was refused; writing through the page cache",
              j->dir);
  j->direct = 0;
  j->tail = 0;
  return 0;
}

/* len bytes at pos, written directly: staged behind the tail, padded with
 * zeros to the alignment, from the tail's aligned offset. The new tail is
 * kept at the stage's start for the next write. */
static int write_direct(rd_journal_t *j, const uint8_t *p, size_t len, int *e) {
  const size_t A = j->align, total = j->tail + len, padded = (total + A - 1) / A * A;
  if (stage_reserve(j, padded, e) != 0) return -1;
  memcpy(j->stage + j->tail, p, len);
  memset(j->stage + total, 0, padded - total);
  if (pwrite_all(j->fd, j->stage, padded, j->pos - j->tail, e) != 0) return -1;
  size_t keep = total % A;
  memmove(j->stage, j->stage + (total - keep), keep);
  j->tail = keep;
  return 0;
}

/* One piece of a round: bytes [a, b) of buf for segment gen, written (the
 * syncer makes it durable). 0, or -1 with *e set (0: the segment failed
 * before, its records cannot follow a torn one and are dropped). No lock
 * held; the syncer's queue is empty if the segment's file changes. */
static int write_piece(rd_journal_t *j, const jbuf_t *buf, size_t a, size_t b, uint64_t gen,
                       int torn, int *e) {
  *e = 0;
  if (torn) return -1;
  if (j->fd < 0 || j->gen_file != gen) {
    if (j->fd >= 0) close(j->fd);
    j->fd = open_segment(j->dir, gen, 1, e);
    j->gen_file = gen;
    j->pos = j->alloc_end = 0;
    if (j->fd < 0) return -1;
    direct_setup(j);
  }
  /* Room for the padding of a direct write too (at most align - 1 bytes). */
  if (ensure_space(j, b - a + (j->direct ? j->align : 0), e) != 0) return -1;
  if (j->direct) {
    int rc = write_direct(j, buf->data + a, b - a, e);
    if (rc != 0 && *e == EINVAL && leave_direct(j, e) == 0) /* refused: buffered from now on */
      rc = pwrite_all(j->fd, buf->data + a, b - a, j->pos, e);
    if (rc != 0) return -1;
  } else if (pwrite_all(j->fd, buf->data + a, b - a, j->pos, e) != 0) {
    return -1;
  }
  j->pos += b - a;
  return 0;
}

/* Under mu: until the syncer has synced everything queued (before the
 * committer closes or replaces the file it syncs). */
static void drain_syncs(rd_journal_t *j) {
  while (j->q_has || j->syncing) pthread_cond_wait(&j->cv_synced, &j->mu);
}

/* Under mu: records (lo, hi] are on disk. durable_lsn only moves over
 * records that all are: after a failure, pieces written beyond the gap
 * wait in `ahead` until a checkpoint covers the gap. */
static void piece_done(rd_journal_t *j, uint64_t lo, uint64_t hi) {
  if (j->durable_lsn >= lo) {
    if (hi > j->durable_lsn) j->durable_lsn = hi;
  } else if (j->ahead_hi == lo && j->ahead_hi > 0) {
    j->ahead_hi = hi;
  } else {
    j->ahead_lo = lo;
    j->ahead_hi = hi;
  }
}

/* Write the taken buffer, its pieces between rotations in order. Under mu
 * on entry and exit; released while writing and syncing. */
static void commit_round(rd_journal_t *j) {
  jbuf_t *w = &j->writing;
  size_t a = 0;
  uint64_t seg = j->gen_file;
  for (size_t r = 0; r <= w->nrots; r++) {
    const int last = r == w->nrots;
    size_t b = last ? w->len : w->rots[r].off;
    uint64_t lo = j->round_lsn;
    uint64_t hi = last ? (w->last_lsn > lo ? w->last_lsn : lo) : w->rots[r].cut_lsn;
    if (b > a) {
      int torn = j->failed && seg == j->fail_gen, e = 0;
      if (j->fd < 0 || j->gen_file != seg) drain_syncs(j);
      pthread_mutex_unlock(&j->mu);
      double t0 = rd_clock_now();
      int rc = write_piece(j, w, a, b, seg, torn, &e);
      pthread_mutex_lock(&j->mu);
      j->st.direct = j->direct;
      if (rc == 0) {
        /* To the syncer: one fdatasync covers every piece queued meanwhile. */
        if (!j->q_has) {
          j->q_has = 1;
          j->q_seg = seg;
          j->q_lo = lo;
          j->q_fd = j->fd;
          j->q_t0 = t0;
        }
        j->q_hi = hi;
        pthread_cond_signal(&j->cv_sync);
        if (j->cfg.sync_inline) drain_syncs(j);
      } else if (e != 0) {
        char why[RD_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "writing journal segment %llu: %s", (unsigned long long)seg,
                 strerror(e));
        fail_locked(j, seg, hi, why);
      } else if (j->failed && hi > j->failed_upto) {
        j->failed_upto = hi; /* dropped behind a torn segment */
      }
      j->pending -= b - a;
      if (j->cfg.shared_pending) atomic_fetch_sub(j->cfg.shared_pending, b - a);
    }
    if (hi > j->round_lsn) j->round_lsn = hi;
    a = b;
    if (!last) {
      /* The new segment exists from the cut on, records or not: the
       * cut's checkpoint names it, and a failure to create it must show. */
      seg = w->rots[r].gen;
      drain_syncs(j);
      pthread_mutex_unlock(&j->mu);
      int e = 0;
      if (j->fd >= 0) close(j->fd);
      j->fd = open_segment(j->dir, seg, 1, &e);
      j->gen_file = seg;
      j->pos = j->alloc_end = 0;
      if (j->fd >= 0) direct_setup(j);
      pthread_mutex_lock(&j->mu);
      if (j->fd < 0) {
        char why[RD_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "creating journal segment %llu: %s", (unsigned long long)seg,
                 strerror(e));
        fail_locked(j, seg, j->round_lsn, why);
      }
    }
  }
  w->len = 0;
  w->nrots = 0;
  w->last_lsn = 0;
}

/* Under mu (released while the callbacks run): answer the waiters that are
 * done, durable or failed. */
static void answer_done(rd_journal_t *j) {
  rd_journal_waiter_t *ok = NULL, *bad = NULL;
  take_done(j, &ok, &bad);
  char why[RD_ERROR_MSG_MAX];
  snprintf(why, sizeof why, "the write-ahead journal failed: %.200s", j->why);
  pthread_mutex_unlock(&j->mu);
  call_waiters(ok, bad, RD_ESTORE, why);
  pthread_mutex_lock(&j->mu);
}

/* The syncer: fdatasyncs what the committer wrote, so that the next round
 * is written while this one syncs; then acknowledges. A failed fdatasync
 * fails its records and every later one of that segment: Linux reports a
 * writeback error to one fdatasync only, so a later one that succeeds
 * proves nothing about the pages before it. */
static void *syncer_main(void *arg) {
  rd_journal_t *j = arg;
  uint64_t torn_seg = UINT64_MAX; /* a segment whose fdatasync failed */
  pthread_mutex_lock(&j->mu);
  for (;;) {
    while (!j->q_has && !j->sync_stop) pthread_cond_wait(&j->cv_sync, &j->mu);
    if (!j->q_has) break; /* stopping, nothing left */
    uint64_t seg = j->q_seg, lo = j->q_lo, hi = j->q_hi;
    int fd = j->q_fd;
    double t0 = j->q_t0;
    j->q_has = 0;
    j->syncing = 1;
    pthread_cond_broadcast(&j->cv_synced); /* the committer may write the next round */
    pthread_mutex_unlock(&j->mu);
    int e = seg == torn_seg ? EIO : fdatasync(fd) != 0 ? errno : 0;
    double dt = rd_clock_now() - t0;
    pthread_mutex_lock(&j->mu);
    j->syncing = 0;
    if (e == 0) {
      j->st.commits++;
      j->st.commit_s_last = dt;
      if (dt > j->st.commit_s_max) j->st.commit_s_max = dt;
      piece_done(j, lo, hi);
    } else {
      char why[RD_ERROR_MSG_MAX];
      snprintf(why, sizeof why, "syncing journal segment %llu: %s", (unsigned long long)seg,
               strerror(e));
      if (seg != torn_seg) fail_locked(j, seg, hi, why);
      else if (hi > j->failed_upto) j->failed_upto = hi;
      torn_seg = seg;
    }
    pthread_cond_broadcast(&j->cv_synced);
    answer_done(j);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

static void *committer_main(void *arg) {
  rd_journal_t *j = arg;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    while (!j->stop && j->active.len == 0 && j->active.nrots == 0)
      pthread_cond_wait(&j->cv_work, &j->mu);
    if (j->active.len == 0 && j->active.nrots == 0) break; /* stopping, nothing left */
    if (j->cfg.commit_us > 0 && !j->stop) {
      /* The group-commit window: gather what arrives in it. */
      double until = j->first_append + j->cfg.commit_us * 1e-6;
      while (!j->stop && j->active.len < ROUND_MAX_BYTES) {
        double left = until - rd_clock_now();
        if (left <= 0) break;
        struct timespec ts = rd_cond_deadline(left);
        pthread_cond_timedwait(&j->cv_work, &j->mu, &ts);
      }
    }
    /* One round written ahead of the fdatasync in progress at most: the
     * records arriving meanwhile make the next round, so there is about
     * one write per fdatasync, as with one thread, but they overlap. */
    while (j->q_has && !j->stop) pthread_cond_wait(&j->cv_synced, &j->mu);
    jbuf_t tmp = j->writing;
    j->writing = j->active;
    j->active = tmp;
    commit_round(j);
    answer_done(j);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Open and close                                                      */
/* ------------------------------------------------------------------ */

int rd_journal_open(rd_journal_t **out, const char *dir, uint64_t gen, uint64_t next_lsn,
                    const rd_journal_config_t *cfg, rd_error_t *err) {
  *out = NULL;
  rd_journal_t *j = calloc(1, sizeof *j);
  if (j == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for a journal");
  if (snprintf(j->dir, sizeof j->dir, "%s", dir) >= (int)sizeof j->dir) {
    free(j);
    return rd_error_set(err, RD_EINVAL, "the journal's directory path is too long");
  }
  j->cfg = *cfg;
  j->gen_append = j->gen_file = gen;
  j->last_lsn = j->durable_lsn = j->round_lsn = next_lsn ? next_lsn - 1 : 0;
  int e = 0;
  j->fd = open_segment(dir, gen, 0, &e);
  off_t end = j->fd >= 0 ? lseek(j->fd, 0, SEEK_END) : -1;
  if (j->fd >= 0 && end < 0) {
    e = errno;
    close(j->fd);
    j->fd = -1;
  }
  j->pos = j->alloc_end = end > 0 ? (uint64_t)end : 0; /* a restore cut its end to the records */
  if (j->fd < 0) {
    free(j);
    char path[PATH_MAX + 40];
    rd_journal_path(path, sizeof path, dir, gen);
    return rd_error_set(err, RD_ESTORE, "cannot open the journal %s: %s", path, strerror(e));
  }
  j->zeroed = cfg->prealloc == RD_JOURNAL_ZEROED;
  direct_setup(j);
  j->st.direct = j->direct;
  pthread_mutex_init(&j->mu, NULL);
  rd_cond_init_monotonic(&j->cv_work);
  pthread_cond_init(&j->cv_sync, NULL);
  pthread_cond_init(&j->cv_synced, NULL);
  int started = pthread_create(&j->syncer, NULL, syncer_main, j) == 0;
  if (!started || pthread_create(&j->thread, NULL, committer_main, j) != 0) {
    if (started) {
      pthread_mutex_lock(&j->mu);
      j->sync_stop = 1;
      pthread_cond_signal(&j->cv_sync);
      pthread_mutex_unlock(&j->mu);
      pthread_join(j->syncer, NULL);
    }
    close(j->fd);
    pthread_cond_destroy(&j->cv_work);
    pthread_cond_destroy(&j->cv_sync);
    pthread_cond_destroy(&j->cv_synced);
    pthread_mutex_destroy(&j->mu);
    free(j->stage);
    free(j);
    return rd_error_set(err, RD_EINTERNAL, "cannot start the journal's threads");
  }
  *out = j;
  return RD_OK;
}

void rd_journal_close(rd_journal_t *j) {
  if (j == NULL) return;
  pthread_mutex_lock(&j->mu);
  j->stop = 1;
  pthread_cond_signal(&j->cv_work);
  pthread_mutex_unlock(&j->mu);
  pthread_join(j->thread, NULL);
  pthread_mutex_lock(&j->mu);
  j->sync_stop = 1; /* after what the committer wrote is synced */
  pthread_cond_signal(&j->cv_sync);
  pthread_mutex_unlock(&j->mu);
  pthread_join(j->syncer, NULL);
  /* Whatever still waits was never made durable. */
  rd_journal_waiter_t *ok = NULL, *bad = NULL;
  pthread_mutex_lock(&j->mu);
  take_done(j, &ok, &bad);
  rd_journal_waiter_t *rest = j->waiters;
  j->waiters = NULL;
  pthread_mutex_unlock(&j->mu);
  call_waiters(ok, bad, RD_ESTORE, "the write-ahead journal failed");
  call_waiters(NULL, rest, RD_ECANCELED, "the journal closed before this call's record was "
               "written");
  if (j->fd >= 0) close(j->fd);
  jbuf_free(&j->active);
  jbuf_free(&j->writing);
  free(j->stage);
  pthread_cond_destroy(&j->cv_work);
  pthread_cond_destroy(&j->cv_sync);
  pthread_cond_destroy(&j->cv_synced);
  pthread_mutex_destroy(&j->mu);
  free(j);
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

int rd_journal_decode_insert(const rd_journal_record_t *r, rd_journal_insert_t *o,
                             rd_error_t *err) {
  memset(o, 0, sizeof *o);
  const uint8_t *p = r->payload;
  if (r->type != RD_JOURNAL_REC_INSERT || r->len < 24)
    return rd_error_set(err, RD_EINVAL, "record %llu is not an insert", (unsigned long long)r->lsn);
  o->first_key = rd_le_get64(p);
  o->n = rd_le_get32(p + 8);
  o->n_fields = rd_le_get32(p + 12);
  uint32_t has_p = rd_le_get32(p + 16);
  if (o->n == 0 || o->n_fields == 0 || o->n_fields > RD_SCHEMA_MAX_FIELDS || has_p > 1 ||
      r->len < 24 + 8 * (size_t)o->n_fields)
    return rd_error_set(err, RD_EINVAL, "insert record %llu is malformed",
                        (unsigned long long)r->lsn);
  size_t off = 24 + 8 * (size_t)o->n_fields;
  for (uint32_t f = 0; f < o->n_fields; f++) {
    uint64_t b = rd_le_get64(p + 24 + 8 * f);
    if (b > r->len - off)
      return rd_error_set(err, RD_EINVAL, "insert record %llu is malformed",
                          (unsigned long long)r->lsn);
    o->cols[f].data = p + off;
    o->cols[f].bytes = (size_t)b;
    off += (size_t)b;
  }
  size_t pb = has_p ? (size_t)o->n * sizeof(double) : 0;
  if (r->len - off != pb)
    return rd_error_set(err, RD_EINVAL, "insert record %llu is malformed",
                        (unsigned long long)r->lsn);
  o->priorities = has_p ? (const double *)(p + off) : NULL;
  return RD_OK;
}

int rd_journal_decode_update(const rd_journal_record_t *r, rd_journal_update_t *o,
                             rd_error_t *err) {
  if (r->type != RD_JOURNAL_REC_UPDATE || r->len < 8)
    return rd_error_set(err, RD_EINVAL, "record %llu is not an update", (unsigned long long)r->lsn);
  o->n = rd_le_get32(r->payload);
  if (r->len != 8 + 16 * (size_t)o->n)
    return rd_error_set(err, RD_EINVAL, "update record %llu is malformed",
                        (unsigned long long)r->lsn);
  o->keys = r->payload + 8;
  o->priorities = r->payload + 8 + 8 * (size_t)o->n;
  return RD_OK;
}

int rd_journal_read(const char *path, uint64_t first_lsn, rd_journal_read_fn fn, void *arg,
                    rd_journal_read_info_t *info, rd_error_t *err) {
  memset(info, 0, sizeof *info);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return rd_error_set(err, RD_ESTORE, "cannot open %s: %s", path, strerror(errno));
  off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0 || lseek(fd, 0, SEEK_SET) != 0) {
    int e = errno;
    close(fd);
    return rd_error_set(err, RD_ESTORE, "cannot read %s: %s", path, strerror(e));
  }
  info->file_bytes = (uint64_t)end;
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) {
    close(fd);
    return rd_error_set(err, RD_ENOMEM, "out of memory reading %s", path);
  }
  uint8_t *buf = NULL;
  size_t cap = 0;
  int rc = RD_OK;
  uint64_t off = 0, want = first_lsn;
  for (;;) {
    uint8_t h[RD_JOURNAL_HEADER_BYTES];
    size_t got = fread(h, 1, sizeof h, f);
    if (got == 0 && off == info->file_bytes) break; /* the end */
    if (got < sizeof h) {
      snprintf(info->why, sizeof info->why, "a record header at byte %llu is cut short",
               (unsigned long long)off);
      break;
    }
    static const uint8_t zero_header[RD_JOURNAL_HEADER_BYTES];
    if (memcmp(h, zero_header, sizeof h) == 0) {
      /* The zeroed space a writer keeps ahead: the end, if zeros follow. */
      uint8_t z[4096];
      size_t k;
      int clean = 1;
      while (clean && (k = fread(z, 1, sizeof z, f)) > 0)
        for (size_t i = 0; i < k; i++) clean &= z[i] == 0;
      if (clean) {
        info->zero_tail = 1;
        break;
      }
      snprintf(info->why, sizeof info->why, "bytes follow the zeroed end at byte %llu",
               (unsigned long long)off);
      break;
    }
    uint64_t lsn = rd_le_get64(h + 8), len = rd_le_get64(h + 16);
    if (rd_le_get32(h) != JR_MAGIC || len > RECORD_MAX_BYTES ||
        len > info->file_bytes - off - sizeof h) {
      snprintf(info->why, sizeof info->why, "the record at byte %llu is %s",
               (unsigned long long)off, rd_le_get32(h) != JR_MAGIC ? "not a record" : "cut short");
      break;
    }
    if (len > cap) {
      void *nb = realloc(buf, (size_t)len);
      if (nb == NULL) {
        rc = rd_error_set(err, RD_ENOMEM, "out of memory reading a %llu-byte journal record",
                          (unsigned long long)len);
        break;
      }
      buf = nb;
      cap = (size_t)len;
    }
    if (fread(buf, 1, (size_t)len, f) != len) {
      snprintf(info->why, sizeof info->why, "the record at byte %llu is cut short",
               (unsigned long long)off);
      break;
    }
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, h, 24);
    XXH3_64bits_update(&st, buf, (size_t)len);
    if (rd_sum_differs(rd_le_get64(h + 24), XXH3_64bits_digest(&st))) {
      snprintf(info->why, sizeof info->why, "the record at byte %llu (lsn %llu) fails its "
               "checksum", (unsigned long long)off, (unsigned long long)lsn);
      break;
    }
    if (want != 0 && lsn != want) {
      snprintf(info->why, sizeof info->why, "the record at byte %llu has lsn %llu where %llu "
               "was due", (unsigned long long)off, (unsigned long long)lsn,
               (unsigned long long)want);
      break;
    }
    rd_journal_record_t rec = {rd_le_get32(h + 4), lsn, buf, (size_t)len};
    if ((rc = fn(arg, &rec, err)) != RD_OK) break;
    off += sizeof h + len;
    want = lsn + 1;
    info->records++;
    info->last_lsn = lsn;
    info->valid_bytes = off;
  }
  info->torn = rc == RD_OK && info->valid_bytes < info->file_bytes && !info->zero_tail;
  free(buf);
  fclose(f);
  return rc;
}
