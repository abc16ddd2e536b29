/* durable.c - checkpoints, restore, the journal's place in a workload's
 * life, export and import (durable.h).
 *
 * Read top to bottom: the files (names, atomic writes, listing), the
 * sections (encoding the table's config and state, the meta section), a
 * checkpoint (snapshot, learner, write, prune), reading one back and
 * applying it, restore at start (checkpoints newest first, then the
 * journal), the workload's life (prepare, attach, forget, release), the
 * periodic thread, export and import.
 *
 * Locks: ck_mu (one checkpoint or export at a time per server; it holds a
 * copy of a table), then a workload's table lock (w->lock) for the cut and
 * each slice, then wd->mu (the Describe fields). ver_mu guards the weight
 * versions file, taken by the learner thread alone.
 */
#define _GNU_SOURCE
#include "durable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stdatomic.h>
#include <xxhash.h>

#include "ckpt_file.h"
#include "log.h"
#include "rd_bytes.h"
#include "rd_clock.h"
#include "registry.h"
#include "rd_cond.h"

#define SEC_META 1u
#define SEC_TABLE 2u
#define SEC_LEAVES 3u
#define SEC_COLUMN 4u
#define SEC_LEARNER 5u
#define SEC_LIMITER 6u /* the rate limiter's I and S at the cut (optional) */
#define KIND_CHECKPOINT 1u
#define KIND_EXPORT 2u
#define META_FIXED 80u

struct rd_durable {
  char dir[PATH_MAX];
  uint32_t keep;
  int zstd;
  rd_journal_config_t jcfg;
  _Atomic uint64_t journal_pending; /* every journal's bytes not yet written (jcfg's) */
  uint64_t max_import_bytes; /* raw bytes an import may make us allocate */
  pthread_mutex_t ck_mu;     /* one checkpoint or export at a time */
  uint64_t import_max_bytes; /* an import stream's file (--import-max-bytes) */
  atomic_int sinks;          /* import streams open (RD_IMPORT_SINKS_MAX) */
  atomic_int exports;        /* export files open (RD_EXPORT_FILES_MAX) */
  /* The periodic thread. */
  struct rd_registry *registry;
  uint32_t max_workloads;
  pthread_t thread;
  int started, stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

struct rd_wl_durable {
  rd_durable_t *d;
  char id[RD_WORKLOAD_ID_LEN + 1];
  char dir[PATH_MAX];
  rd_durability_t mode;
  double interval_s;
  rd_journal_t *journal; /* journal mode; set (atomically, under the table lock) before the
                            workload is published, or by a checkpoint where it could not be
                            opened before (wl_journal() reads it) */
  pthread_mutex_t mu;    /* the fields below */
  uint64_t next_gen;
  int has_last;
  rd_checkpoint_info_t last;
  uint64_t checkpoints;
  char last_error[RD_ERROR_MSG_MAX];
  char restored[RD_ERROR_MSG_MAX];
  char journal_error[RD_ERROR_MSG_MAX];
  int deleted;           /* under ck_mu too */
  double last_attempt;   /* periodic thread */
  uint64_t last_mark;    /* change counter at the last checkpoint */
  pthread_mutex_t ver_mu;
  uint64_t reserved;     /* weight versions made durable */
  uint64_t reserved_at_start;
};

static rd_journal_t *wl_journal(const rd_wl_durable_t *wd) {
  return __atomic_load_n(&wd->journal, __ATOMIC_ACQUIRE);
}

static int64_t now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

static int sys_error(rd_error_t *err, const char *what, const char *path, int e) {
  return rd_error_set(err, RD_ESTORE, "%s %s: %s", what, path, strerror(e));
}

static int fsync_dir(const char *dir, rd_error_t *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_error(err, "cannot open directory", dir, errno);
  int rc = fsync(fd) == 0 ? RD_OK : sys_error(err, "cannot sync directory", dir, errno);
  close(fd);
  return rc;
}

static int make_dir(const char *dir, rd_error_t *err) {
  if (mkdir(dir, 0700) == 0 || errno == EEXIST) return RD_OK;
  return sys_error(err, "cannot create directory", dir, errno);
}

/* Parse "<prefix><16 hex><suffix>" into *gen. */
static int parse_gen(const char *name, const char *prefix, const char *suffix, uint64_t *gen) {
  size_t lp = strlen(prefix), ls = strlen(suffix), ln = strlen(name);
  if (ln != lp + 16 + ls || strncmp(name, prefix, lp) != 0 || strcmp(name + lp + 16, suffix) != 0)
    return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < 16; i++) {
    char c = name[lp + i];
    int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (x < 0) return 0;
    v = v << 4 | (uint64_t)x;
  }
  *gen = v;
  return 1;
}

static void ckpt_path(char *buf, size_t cap, const char *dir, uint64_t gen, const char *suffix) {
  snprintf(buf, cap, "%s/ckpt-%016" PRIx64 ".rdc%s", dir, gen, suffix);
}

typedef struct {
  uint64_t *ckpt, *seg;
  size_t n_ckpt, n_seg;
  uint64_t max_gen; /* of every file seen, bad ones included */
} listing_t;

static void listing_free(listing_t *l) {
  free(l->ckpt);
  free(l->seg);
  memset(l, 0, sizeof *l);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int push_gen(uint64_t **v, size_t *n, uint64_t g) {
  uint64_t *nv = realloc(*v, (*n + 1) * sizeof **v);
  if (nv == NULL) return -1;
  nv[(*n)++] = g;
  *v = nv;
  return 0;
}

/* The workload directory's checkpoints and segments, ascending. Stale
 * temporary files are removed (no checkpoint is being written: ck_mu). */
static int list_dir(const char *dir, listing_t *l, rd_error_t *err) {
  memset(l, 0, sizeof *l);
  DIR *dp = opendir(dir);
  if (dp == NULL) {
    if (errno == ENOENT) return RD_OK;
    return sys_error(err, "cannot list", dir, errno);
  }
  struct dirent *e;
  int rc = RD_OK;
  while ((e = readdir(dp)) != NULL) {
    uint64_t g;
    if (parse_gen(e->d_name, "ckpt-", ".rdc", &g)) {
      if (push_gen(&l->ckpt, &l->n_ckpt, g)) rc = RD_ENOMEM;
    } else if (parse_gen(e->d_name, "journal-", ".log", &g)) {
      if (push_gen(&l->seg, &l->n_seg, g)) rc = RD_ENOMEM;
    } else if (parse_gen(e->d_name, "ckpt-", ".rdc.bad", &g)) {
      /* counted below */
    } else if (parse_gen(e->d_name, "ckpt-", ".rdc.tmp", &g)) {
      char p[PATH_MAX + 64];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    } else {
      continue;
    }
    if (g > l->max_gen) l->max_gen = g;
  }
  closedir(dp);
  if (rc) {
    listing_free(l);
    return rd_error_set(err, RD_ENOMEM, "out of memory listing %s", dir);
  }
  if (l->n_ckpt > 1) qsort(l->ckpt, l->n_ckpt, sizeof *l->ckpt, cmp_u64);
  if (l->n_seg > 1) qsort(l->seg, l->n_seg, sizeof *l->seg, cmp_u64);
  return RD_OK;
}

/* Write data to dir/name atomically: a temporary file, fsync, rename,
 * fsync of the directory. */
static int write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        rd_error_t *err) {
  char tmp[PATH_MAX + 64], path[PATH_MAX + 64];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error(err, "cannot create", tmp, errno);
  const uint8_t *p = data;
  size_t left = len;
  int e = 0;
  while (left > 0 && e == 0) {
    ssize_t k = write(fd, p, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) e = k < 0 ? errno : EIO;
    else { p += k; left -= (size_t)k; }
  }
  if (e == 0 && fsync(fd) != 0) e = errno;
  if (close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && rename(tmp, path) != 0) e = errno;
  if (e != 0) {
    unlink(tmp);
    return sys_error(err, "cannot write", path, e);
  }
  return fsync_dir(dir, err);
}

/* ------------------------------------------------------------------ */
/* Sections                                                            */
/* ------------------------------------------------------------------ */

static void put32(rd_bytes_t *b, uint32_t v) { uint8_t x[4]; rd_le_put32(x, v); rd_bytes_put(b, x, 4); }
static void put64(rd_bytes_t *b, uint64_t v) { uint8_t x[8]; rd_le_put64(x, v); rd_bytes_put(b, x, 8); }
static void putf64(rd_bytes_t *b, double v) { uint64_t u; memcpy(&u, &v, 8); put64(b, u); }

typedef struct {
  const uint8_t *p;
  size_t len, off;
  int bad;
} reader_t;

static const uint8_t *take(reader_t *r, size_t n) {
  if (r->bad || r->len - r->off < n) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *p = r->p + r->off;
  r->off += n;
  return p;
}
static uint32_t get32(reader_t *r) { const uint8_t *p = take(r, 4); return p ? rd_le_get32(p) : 0; }
static uint64_t get64(reader_t *r) { const uint8_t *p = take(r, 8); return p ? rd_le_get64(p) : 0; }
static double getf64(reader_t *r) { uint64_t u = get64(r); double v; memcpy(&v, &u, 8); return v; }

/* The table section: config (what must match to restore) and state. */
typedef struct {
  uint32_t capacity, fanout;
  double alpha, epsilon, max_priority, scale;
  uint64_t seed;
  rd_schema_t schema;
  rd_table_image_t img; /* scalars only */
} table_sec_t;

static void encode_table(rd_bytes_t *b, const rd_table_t *t, const rd_table_image_t *img) {
  const rd_table_config_t *c = &t->config;
  put32(b, c->capacity);
  put32(b, c->fanout);
  put32(b, c->schema.n_fields);
  put32(b, 0);
  putf64(b, c->alpha);
  putf64(b, c->epsilon);
  putf64(b, c->max_priority);
  putf64(b, t->fixed.scale);
  put64(b, c->seed);
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    const rd_field_t *fd = &c->schema.fields[f];
    put32(b, (uint32_t)fd->dtype);
    put32(b, fd->rank);
    for (uint32_t k = 0; k < RD_FIELD_MAX_RANK; k++) put32(b, fd->shape[k]);
    uint32_t nl = (uint32_t)strnlen(fd->name, RD_FIELD_NAME_MAX - 1);
    put32(b, nl);
    rd_bytes_put(b, fd->name, nl);
  }
  put64(b, img->next_key);
  put64(b, img->size);
  put64(b, img->draws);
  putf64(b, img->max_p);
  put64(b, img->stats.inserts);
  put64(b, img->stats.samples);
  put64(b, img->stats.updates);
  put64(b, img->stats.stale_updates);
}

static int decode_table(const uint8_t *p, size_t len, table_sec_t *s, rd_error_t *err) {
  memset(s, 0, sizeof *s);
  reader_t r = {p, len, 0, 0};
  s->capacity = get32(&r);
  s->fanout = get32(&r);
  s->schema.n_fields = get32(&r);
  (void)get32(&r);
  if (s->schema.n_fields == 0 || s->schema.n_fields > RD_SCHEMA_MAX_FIELDS)
    return rd_error_set(err, RD_EINVAL, "the table section has %u fields", s->schema.n_fields);
  s->alpha = getf64(&r);
  s->epsilon = getf64(&r);
  s->max_priority = getf64(&r);
  s->scale = getf64(&r);
  s->seed = get64(&r);
  for (uint32_t f = 0; f < s->schema.n_fields && !r.bad; f++) {
    rd_field_t *fd = &s->schema.fields[f];
    fd->dtype = (rd_dtype_t)get32(&r);
    fd->rank = get32(&r);
    for (uint32_t k = 0; k < RD_FIELD_MAX_RANK; k++) fd->shape[k] = get32(&r);
    uint32_t nl = get32(&r);
    const uint8_t *nm = nl < RD_FIELD_NAME_MAX ? take(&r, nl) : (r.bad = 1, NULL);
    if (nm) memcpy(fd->name, nm, nl);
  }
  s->img.next_key = get64(&r);
  s->img.size = get64(&r);
  s->img.draws = get64(&r);
  s->img.max_p = getf64(&r);
  s->img.stats.inserts = get64(&r);
  s->img.stats.samples = get64(&r);
  s->img.stats.updates = get64(&r);
  s->img.stats.stale_updates = get64(&r);
  if (r.bad || r.off != len)
    return rd_error_set(err, RD_EINVAL, "the table section is malformed");
  if (rd_schema_validate(&s->schema, NULL) != RD_OK || s->img.size > s->capacity)
    return rd_error_set(err, RD_EINVAL, "the table section's schema or size is invalid");
  return RD_OK;
}

/* The checkpoint was taken of a table with t's config? Else why not. */
static int same_table(const table_sec_t *s, const rd_table_t *t, rd_error_t *err) {
  const rd_table_config_t *c = &t->config;
  if (s->capacity != c->capacity)
    return rd_error_set(err, RD_EINVAL, "it is of a different spec: capacity %u, not %u",
                        s->capacity, c->capacity);
  if (s->fanout != c->fanout)
    return rd_error_set(err, RD_EINVAL, "it is of a different spec: fanout %u, not %u",
                        s->fanout, c->fanout);
  if (s->alpha != c->alpha || s->epsilon != c->epsilon || s->max_priority != c->max_priority ||
      s->scale != t->fixed.scale)
    return rd_error_set(err, RD_EINVAL, "it is of a different spec: its priority transform "
                        "(alpha %g, epsilon %g, max_priority %g) differs", s->alpha, s->epsilon,
                        s->max_priority);
  if (s->seed != c->seed)
    return rd_error_set(err, RD_EINVAL, "it is of a different spec: seed %" PRIu64 ", not %"
                        PRIu64, s->seed, c->seed);
  if (s->schema.n_fields != c->schema.n_fields)
    return rd_error_set(err, RD_EINVAL, "it is of a different spec: %u fields, not %u",
                        s->schema.n_fields, c->schema.n_fields);
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    const rd_field_t *a = &s->schema.fields[f], *b = &c->schema.fields[f];
    if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->rank != b->rank ||
        memcmp(a->shape, b->shape, a->rank * sizeof a->shape[0]) != 0)
      return rd_error_set(err, RD_EINVAL, "it is of a different spec: field %u is \"%s\" %s "
                          "rank %u, not \"%s\" %s rank %u", f, a->name, rd_dtype_name(a->dtype),
                          a->rank, b->name, rd_dtype_name(b->dtype), b->rank);
  }
  return RD_OK;
}

typedef struct {
  uint32_t kind;
  rd_durability_t durability;
  uint64_t gen, cut_lsn;
  int64_t taken_ms;
  uint64_t learner_flags; /* 1: a learner section; 2: it holds the full state */
  char id[RD_WORKLOAD_ID_LEN + 1];
  const uint8_t *spec;
  size_t spec_len;
} meta_t;

static void encode_meta(rd_bytes_t *b, const meta_t *m) {
  put32(b, m->kind);
  put32(b, (uint32_t)m->durability);
  put64(b, m->gen);
  put64(b, m->cut_lsn);
  put64(b, (uint64_t)m->taken_ms);
  put64(b, m->learner_flags);
  rd_bytes_put(b, m->id, RD_WORKLOAD_ID_LEN);
  put64(b, m->spec_len);
  rd_bytes_put(b, m->spec, m->spec_len);
}

static int decode_meta(const uint8_t *p, size_t len, meta_t *m, rd_error_t *err) {
  memset(m, 0, sizeof *m);
  reader_t r = {p, len, 0, 0};
  m->kind = get32(&r);
  m->durability = (rd_durability_t)get32(&r);
  m->gen = get64(&r);
  m->cut_lsn = get64(&r);
  m->taken_ms = (int64_t)get64(&r);
  m->learner_flags = get64(&r);
  const uint8_t *id = take(&r, RD_WORKLOAD_ID_LEN);
  if (id) memcpy(m->id, id, RD_WORKLOAD_ID_LEN);
  m->spec_len = (size_t)get64(&r);
  m->spec = take(&r, m->spec_len);
  if (r.bad || r.off != len || (m->kind != KIND_CHECKPOINT && m->kind != KIND_EXPORT))
    return rd_error_set(err, RD_EINVAL, "the meta section is malformed");
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Writing a checkpoint                                                */
/* ------------------------------------------------------------------ */

/* What a checkpoint or export holds, taken from a workload. */
typedef struct {
  rd_table_snapshot_t snap;
  int has_snap;
  uint8_t *learner;
  size_t learner_len;
  int learner_full;
  uint64_t cut_lsn;
  int64_t taken_ms;
  double hold_max_s; /* the longest table-lock hold of the copy: its pause on calls */
  int has_limiter;
  uint64_t limiter[2]; /* I, S at the cut */
} taken_t;

static void taken_free(taken_t *t) {
  if (t->has_snap) rd_table_snapshot_free(&t->snap);
  free(t->learner);
  memset(t, 0, sizeof *t);
}

/* Touch every page of the snapshot's buffers before the copy, so that a
 * slice holding the table lock copies and does not also take page faults. */
static void prefault(rd_table_snapshot_t *s, const rd_table_config_t *c) {
  size_t n = (size_t)s->rows_cap;
  volatile uint8_t *p = (volatile uint8_t *)s->img.leaves;
  for (size_t i = 0; i < n * 8; i += 4096) p[i] = 0;
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    p = s->img.cols[f];
    size_t b = n * rd_field_bytes(&c->schema.fields[f]);
    for (size_t i = 0; i < b; i += 4096) p[i] = 0;
  }
}

/* Between two slices: let the calls that waited for the lock have it. A
 * yield is not enough (the waiter is still waking up when this thread
 * takes the lock again, and a mutex is not fair): sleep as long as the
 * slice held it, so a checkpoint holds the table at most half the time. */
static void let_others_in(double held_s) {
  double s = held_s < 50e-6 ? 50e-6 : held_s > 2e-3 ? 2e-3 : held_s;
  struct timespec ts = {0, (long)(s * 1e9)};
  nanosleep(&ts, NULL);
}

/* The table's cut and its copy, in slices (durable.h); with a journal,
 * its rotation to segment gen at the cut. */
static int take_table(rd_workload_t *w, rd_journal_t *j, uint64_t gen, taken_t *tk,
                      rd_error_t *err) {
  const rd_table_config_t *c = &w->table.config;
  pthread_mutex_lock(&w->lock);
  uint64_t rows = rd_table_size(&w->table);
  pthread_mutex_unlock(&w->lock);
  for (int tries = 0;; tries++) {
    /* Room for what inserts may add before the cut. */
    uint64_t want = rows + (rows / 16 > 4096 ? rows / 16 : 4096);
    if (want > c->capacity || tries > 3) want = c->capacity;
    int rc = rd_table_snapshot_alloc(&tk->snap, c, want, err);
    if (rc) return rc;
    tk->has_snap = 1;
    prefault(&tk->snap, c);
    pthread_mutex_lock(&w->lock);
    double t0 = rd_clock_now();
    if (atomic_load(&w->deleted)) {
      pthread_mutex_unlock(&w->lock);
      return rd_error_set(err, RD_ENOTFOUND, "workload %s was deleted", w->id);
    }
    rc = rd_table_snapshot_begin(&w->table, &tk->snap, err);
    if (rc == RD_OK) {
      tk->cut_lsn = j != NULL ? rd_journal_rotate(j, gen) : 0;
      tk->taken_ms = now_unix_ms();
      tk->has_limiter = w->limiter.on;
      tk->limiter[0] = w->limiter.inserted;
      tk->limiter[1] = w->limiter.sampled;
    }
    rows = rd_table_size(&w->table);
    double held = rd_clock_now() - t0;
    pthread_mutex_unlock(&w->lock);
    if (held > tk->hold_max_s) tk->hold_max_s = held;
    if (rc == RD_OK) break;
    rd_table_snapshot_free(&tk->snap);
    tk->has_snap = 0;
    if (rc != RD_ETOOBIG) return rc;
  }
  size_t row = rd_schema_row_bytes(&c->schema) + 8;
  size_t slice = RD_DURABLE_SLICE_BYTES / row;
  if (slice == 0) slice = 1;
  for (;;) {
    pthread_mutex_lock(&w->lock);
    double t0 = rd_clock_now();
    int rc = rd_table_snapshot_step(&w->table, &tk->snap, slice, err);
    double held = rd_clock_now() - t0;
    pthread_mutex_unlock(&w->lock);
    if (held > tk->hold_max_s) tk->hold_max_s = held;
    if (rc == 1) return RD_OK;
    if (rc < 0) return rc;
    let_others_in(held);
  }
}

static int take_learner(rd_workload_t *w, taken_t *tk, rd_error_t *err) {
  if (w->pipeline == NULL) return RD_OK;
  size_t cap = rd_pipeline_state_bytes(w->pipeline);
  tk->learner = malloc(cap);
  if (tk->learner == NULL)
    return rd_error_set(err, RD_ENOMEM, "out of memory for the learner's state (%zu bytes)", cap);
  return rd_pipeline_state_save(w->pipeline, tk->learner, cap, &tk->learner_len,
                                &tk->learner_full, err);
}

/* The sections of tk into the writer. */
static int write_sections(rd_ckpt_writer_t *wr, rd_workload_t *w, const meta_t *m,
                          const taken_t *tk, rd_error_t *err) {
  rd_bytes_t b = {0};
  encode_meta(&b, m);
  if (b.oom) {
    free(b.p);
    return rd_error_set(err, RD_ENOMEM, "out of memory");
  }
  int rc = rd_ckpt_write_section(wr, SEC_META, 0, b.p, b.len, err);
  b.len = 0;
  if (rc == RD_OK) {
    encode_table(&b, &w->table, &tk->snap.img);
    rc = b.oom ? rd_error_set(err, RD_ENOMEM, "out of memory")
               : rd_ckpt_write_section(wr, SEC_TABLE, 0, b.p, b.len, err);
  }
  free(b.p);
  const uint64_t n = tk->snap.img.size;
  if (rc == RD_OK)
    rc = rd_ckpt_write_section(wr, SEC_LEAVES, 0, tk->snap.img.leaves, (size_t)n * 8, err);
  for (uint32_t f = 0; f < w->table.config.schema.n_fields && rc == RD_OK; f++)
    rc = rd_ckpt_write_section(wr, SEC_COLUMN, f, tk->snap.img.cols[f],
                               (size_t)n * w->table.field_bytes[f], err);
  if (rc == RD_OK && tk->learner_len > 0)
    rc = rd_ckpt_write_section(wr, SEC_LEARNER, 0, tk->learner, tk->learner_len, err);
  if (rc == RD_OK && tk->has_limiter) {
    uint8_t lim[16];
    rd_le_put64(lim, tk->limiter[0]);
    rd_le_put64(lim + 8, tk->limiter[1]);
    rc = rd_ckpt_write_section(wr, SEC_LIMITER, 0, lim, sizeof lim, err);
  }
  if (rc == RD_OK) rc = rd_ckpt_writer_finish(wr, err);
  return rc;
}

static void meta_of(meta_t *m, const rd_workload_t *w, uint32_t kind, uint64_t gen,
                    const taken_t *tk) {
  memset(m, 0, sizeof *m);
  m->kind = kind;
  m->durability = w->durable ? w->durable->mode : RD_DURABILITY_NONE;
  m->gen = gen;
  m->cut_lsn = tk->cut_lsn;
  m->taken_ms = tk->taken_ms;
  m->learner_flags = (tk->learner_len > 0 ? 1u : 0u) | (tk->learner_full ? 2u : 0u);
  memcpy(m->id, w->id, sizeof m->id);
  m->spec = w->spec;
  m->spec_len = w->spec_len;
}

/* Remove checkpoints, failed ones and journal segments older than the
 * oldest of the newest `keep` checkpoints (caller holds ck_mu). */
static void prune(rd_wl_durable_t *wd) {
  listing_t l;
  rd_error_t e;
  if (list_dir(wd->dir, &l, &e) != RD_OK) return;
  uint64_t oldest = l.n_ckpt > wd->d->keep ? l.ckpt[l.n_ckpt - wd->d->keep] : 0;
  listing_free(&l);
  if (oldest == 0) return;
  DIR *dp = opendir(wd->dir);
  if (dp == NULL) return;
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    uint64_t g;
    if ((parse_gen(de->d_name, "ckpt-", ".rdc", &g) ||
         parse_gen(de->d_name, "ckpt-", ".rdc.bad", &g) ||
         parse_gen(de->d_name, "journal-", ".log", &g)) && g < oldest) {
      char p[PATH_MAX + 300];
      snprintf(p, sizeof p, "%s/%s", wd->dir, de->d_name);
      unlink(p);
    }
  }
  closedir(dp);
}

/* A checkpoint change mark: moves with every call that changes state. */
static uint64_t change_mark(rd_workload_t *w) {
  rd_workload_counters_t c;
  rd_workload_counters(w, &c);
  uint64_t m = c.inserts + c.samples + c.updates + c.stale_updates;
  if (w->pipeline) {
    rd_pipeline_stats_t st;
    rd_pipeline_stats(w->pipeline, &st);
    m += st.steps + st.skipped_steps;
  }
  return m;
}

/* Open the journal at segment gen (journal mode, after a checkpoint
 * succeeded where it could not be opened before). */
static void reopen_journal(rd_durable_t *d, rd_workload_t *w, uint64_t gen, uint64_t next_lsn);

static int checkpoint_locked(rd_durable_t *d, rd_workload_t *w, rd_checkpoint_info_t *info,
                             rd_error_t *err) {
  rd_wl_durable_t *wd = w->durable;
  double t0 = rd_clock_now();
  uint64_t mark = change_mark(w);
  pthread_mutex_lock(&wd->mu);
  uint64_t gen = wd->next_gen++;
  pthread_mutex_unlock(&wd->mu);
  rd_journal_t *j = wl_journal(wd);
  taken_t tk;
  memset(&tk, 0, sizeof tk);
  int rc = take_table(w, j, gen, &tk, err);
  if (rc == RD_OK) rc = take_learner(w, &tk, err);
  char tmp[PATH_MAX + 64], path[PATH_MAX + 64];
  ckpt_path(tmp, sizeof tmp, wd->dir, gen, ".tmp");
  ckpt_path(path, sizeof path, wd->dir, gen, "");
  uint64_t bytes = 0;
  if (rc == RD_OK) rc = make_dir(wd->dir, err);
  if (rc == RD_OK) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      rc = sys_error(err, "cannot create", tmp, errno);
    } else {
      rd_ckpt_writer_t wr;
      meta_t m;
      meta_of(&m, w, KIND_CHECKPOINT, gen, &tk);
      rc = rd_ckpt_writer_init(&wr, fd, d->zstd, err);
      if (rc == RD_OK) rc = write_sections(&wr, w, &m, &tk, err);
      bytes = wr.bytes;
      rd_ckpt_writer_free(&wr);
      if (rc == RD_OK && fsync(fd) != 0) rc = sys_error(err, "cannot sync", tmp, errno);
      if (close(fd) != 0 && rc == RD_OK) rc = sys_error(err, "cannot close", tmp, errno);
      if (rc == RD_OK && rename(tmp, path) != 0) rc = sys_error(err, "cannot rename", tmp, errno);
      if (rc == RD_OK) rc = fsync_dir(wd->dir, err);
      if (rc != RD_OK) unlink(tmp);
    }
  }
  double dt = rd_clock_now() - t0;
  uint64_t items = tk.has_snap ? tk.snap.img.size : 0;
  int full = tk.learner_full;
  double hold = tk.hold_max_s;
  uint64_t cut = tk.cut_lsn;
  int64_t taken = tk.taken_ms;
  taken_free(&tk);
  pthread_mutex_lock(&wd->mu);
  if (rc == RD_OK) {
    wd->has_last = 1;
    wd->last = (rd_checkpoint_info_t){gen, taken, bytes, items, dt, full, hold};
    wd->checkpoints++;
    wd->last_error[0] = '\0';
    wd->last_mark = mark;
    if (info) *info = wd->last;
  } else {
    snprintf(wd->last_error, sizeof wd->last_error, "%s", err ? err->msg : rd_err_name(rc));
  }
  pthread_mutex_unlock(&wd->mu);
  if (rc != RD_OK) {
    rd_log_error("durable", "workload %s: checkpoint %" PRIu64 " failed: %s; the previous "
                 "checkpoints stay", w->id, gen, err ? err->msg : rd_err_name(rc));
    return rc;
  }
  if (j != NULL) rd_journal_checkpointed(j, gen, cut);
  else if (wd->mode == RD_DURABILITY_JOURNAL) reopen_journal(d, w, gen, cut + 1);
  prune(wd);
  rd_log_info("durable", "workload %s: checkpoint %" PRIu64 ": %" PRIu64 " items, %" PRIu64
              " bytes in %.3f s (the table lock held at most %.3f ms at a time)", w->id, gen,
              items, bytes, dt, hold * 1e3);
  return RD_OK;
}

int rd_durable_checkpoint(rd_durable_t *d, rd_workload_t *w, rd_checkpoint_info_t *info,
                          rd_error_t *err) {
  rd_wl_durable_t *wd = w->durable;
  if (wd == NULL || wd->mode == RD_DURABILITY_NONE)
    return rd_error_set(err, RD_ESTATE, "workload %s has durability none: it is never "
                        "checkpointed", w->id);
  pthread_mutex_lock(&d->ck_mu);
  int rc;
  if (wd->deleted || atomic_load(&w->deleted)) {
    rc = rd_error_set(err, RD_ENOTFOUND, "workload %s was deleted", w->id);
  } else {
    rc = checkpoint_locked(d, w, info, err);
  }
  pthread_mutex_unlock(&d->ck_mu);
  return rc;
}

void rd_durable_checkpoint_all(rd_durable_t *d, struct rd_registry *r, size_t *done,
                               size_t *failed) {
  *done = *failed = 0;
  size_t n = rd_registry_count(r) + 16;
  rd_workload_t **ws = malloc(n * sizeof *ws);
  if (ws == NULL) {
    rd_log_error("durable", "out of memory listing the workloads to checkpoint");
    return;
  }
  n = rd_registry_list(r, ws, n);
  for (size_t i = 0; i < n; i++) {
    rd_workload_t *w = ws[i];
    if (w->durable != NULL && w->durable->mode != RD_DURABILITY_NONE) {
      rd_error_t e;
      rd_error_clear(&e);
      if (rd_durable_checkpoint(d, w, NULL, &e) == RD_OK) (*done)++;
      else (*failed)++;
    }
    rd_workload_unref(w);
  }
  free(ws);
}

/* ------------------------------------------------------------------ */
/* Reading a checkpoint                                                */
/* ------------------------------------------------------------------ */

typedef struct {
  meta_t meta;
  uint8_t *meta_raw;
  table_sec_t table;
  rd_table_image_t img; /* arrays owned */
  uint8_t *learner;
  size_t learner_len;
  int has_limiter;
  uint64_t limiter[2]; /* I, S at the cut */
} loaded_t;

static void loaded_free(loaded_t *l) {
  free(l->meta_raw);
  free(l->img.leaves);
  for (uint32_t f = 0; f < RD_SCHEMA_MAX_FIELDS; f++) free(l->img.cols[f]);
  free(l->learner);
  memset(l, 0, sizeof *l);
}

/* A section into fresh memory of exactly its raw size. */
static int read_alloc(const rd_ckpt_reader_t *r, const rd_ckpt_section_t *s, uint8_t **out,
                      rd_error_t *err) {
  *out = malloc(s->raw_len ? (size_t)s->raw_len : 1);
  if (*out == NULL)
    return rd_error_set(err, RD_ENOMEM, "out of memory reading %llu bytes",
                        (unsigned long long)s->raw_len);
  return rd_ckpt_read_section(r, s, *out, err);
}

/* Read and verify every section of the file on fd into l. max_raw bounds
 * what the file may make us allocate (an import's is a client's). */
static int load_fd(int fd, uint64_t max_raw, loaded_t *l, rd_error_t *err) {
  memset(l, 0, sizeof *l);
  rd_ckpt_reader_t r;
  int rc = rd_ckpt_reader_open(&r, fd, err);
  if (rc) return rc;
  /* Summed without wrapping: each raw size is the file's word, and two
   * near 2^63 must not add up to a small total that passes the bound. */
  uint64_t raw = 0;
  for (uint32_t i = 0; i < r.n && raw <= max_raw; i++)
    raw = r.sec[i].raw_len > max_raw - raw ? UINT64_MAX : raw + r.sec[i].raw_len;
  const rd_ckpt_section_t *sm = rd_ckpt_find(&r, SEC_META, UINT32_MAX);
  const rd_ckpt_section_t *st = rd_ckpt_find(&r, SEC_TABLE, UINT32_MAX);
  const rd_ckpt_section_t *sl = rd_ckpt_find(&r, SEC_LEAVES, UINT32_MAX);
  const rd_ckpt_section_t *sx = rd_ckpt_find(&r, SEC_LEARNER, UINT32_MAX);
  if (raw > max_raw) {
    rc = rd_error_set(err, RD_ETOOBIG, "the file holds more bytes of data than this server "
                      "accepts (%llu)", (unsigned long long)max_raw);
  } else if (sm == NULL || st == NULL || sl == NULL) {
    rc = rd_error_set(err, RD_EINVAL, "the file lacks its %s section",
                      sm == NULL ? "meta" : st == NULL ? "table" : "leaves");
  }
  uint8_t *tb = NULL;
  if (rc == RD_OK) rc = read_alloc(&r, sm, &l->meta_raw, err);
  if (rc == RD_OK) rc = decode_meta(l->meta_raw, (size_t)sm->raw_len, &l->meta, err);
  if (rc == RD_OK) rc = read_alloc(&r, st, &tb, err);
  if (rc == RD_OK) rc = decode_table(tb, (size_t)st->raw_len, &l->table, err);
  free(tb);
  const uint64_t n = l->table.img.size;
  if (rc == RD_OK && sl->raw_len != n * 8)
    rc = rd_error_set(err, RD_EINVAL, "the leaves section has %llu bytes for %llu items",
                      (unsigned long long)sl->raw_len, (unsigned long long)n);
  if (rc == RD_OK) rc = read_alloc(&r, sl, (uint8_t **)&l->img.leaves, err);
  for (uint32_t f = 0; f < l->table.schema.n_fields && rc == RD_OK; f++) {
    const rd_ckpt_section_t *sc = rd_ckpt_find(&r, SEC_COLUMN, f);
    size_t fb = rd_field_bytes(&l->table.schema.fields[f]);
    if (sc == NULL)
      rc = rd_error_set(err, RD_EINVAL, "the file lacks the column of field %u", f);
    else if (sc->raw_len != n * fb)
      rc = rd_error_set(err, RD_EINVAL, "the column of field %u has %llu bytes for %llu items",
                        f, (unsigned long long)sc->raw_len, (unsigned long long)n);
    else
      rc = read_alloc(&r, sc, &l->img.cols[f], err);
  }
  if (rc == RD_OK && sx != NULL) {
    rc = read_alloc(&r, sx, &l->learner, err);
    l->learner_len = (size_t)sx->raw_len;
  }
  const rd_ckpt_section_t *sr = rd_ckpt_find(&r, SEC_LIMITER, UINT32_MAX);
  if (rc == RD_OK && sr != NULL) {
    uint8_t lim[16];
    if (sr->raw_len != sizeof lim)
      rc = rd_error_set(err, RD_EINVAL, "the rate limiter section has %llu bytes, not 16",
                        (unsigned long long)sr->raw_len);
    else if ((rc = rd_ckpt_read_section(&r, sr, lim, err)) == RD_OK) {
      l->has_limiter = 1;
      l->limiter[0] = rd_le_get64(lim);
      l->limiter[1] = rd_le_get64(lim + 8);
    }
  }
  rd_ckpt_reader_close(&r);
  if (rc) {
    loaded_free(l);
    return rc;
  }
  rd_table_image_t img = l->table.img;
  img.leaves = l->img.leaves;
  memcpy(img.cols, l->img.cols, sizeof img.cols);
  l->img = img;
  return RD_OK;
}

/* Put l into w (empty): everything checked first, so a failure changes
 * nothing. version_floor: weight versions reserved before. */
static int apply_loaded(rd_workload_t *w, loaded_t *l, uint64_t version_floor, int *policy_only,
                        rd_error_t *err) {
  int rc = same_table(&l->table, &w->table, err);
  if (rc) return rc;
  if (w->pipeline == NULL && l->learner != NULL)
    return rd_error_set(err, RD_EINVAL, "it is of a different spec: it has a learner, the "
                        "workload has none");
  if (w->pipeline != NULL && l->learner != NULL &&
      (rc = rd_pipeline_state_check(w->pipeline, l->learner, l->learner_len, err)) != RD_OK)
    return rc;
  pthread_mutex_lock(&w->lock);
  rc = rd_table_restore_check(&w->table, &l->img, err);
  pthread_mutex_unlock(&w->lock);
  if (rc) return rc;
  if (w->pipeline != NULL && l->learner != NULL &&
      (rc = rd_pipeline_state_load(w->pipeline, l->learner, l->learner_len, version_floor,
                                   policy_only, err)) != RD_OK)
    return rc;
  pthread_mutex_lock(&w->lock);
  rc = rd_table_restore(&w->table, &l->img, err);
  /* The limiter's counts go on from the cut, so the ratio it keeps does
   * not start again (a limiter added since has none to restore). */
  if (rc == RD_OK && l->has_limiter && w->limiter.on)
    rd_limiter_set_counts(&w->limiter, l->limiter[0], l->limiter[1]);
  pthread_mutex_unlock(&w->lock);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Restore at start                                                    */
/* ------------------------------------------------------------------ */

typedef struct {
  rd_workload_t *w;
  uint64_t records;
  double *prio;  /* aligned copies */
  uint64_t *keys;
  size_t cap;
} replay_t;

static int replay_grow(replay_t *rp, size_t n, rd_error_t *err) {
  if (n <= rp->cap) return RD_OK;
  double *p = realloc(rp->prio, n * sizeof *p);
  if (p) rp->prio = p;
  uint64_t *k = p ? realloc(rp->keys, n * sizeof *k) : NULL;
  if (k) rp->keys = k;
  if (p == NULL || k == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory replaying");
  rp->cap = n;
  return RD_OK;
}

static int replay_record(void *arg, const rd_journal_record_t *r, rd_error_t *err) {
  replay_t *rp = arg;
  rd_workload_t *w = rp->w;
  rd_table_t *t = &w->table;
  int rc;
  if (r->type == RD_JOURNAL_REC_INSERT) {
    rd_journal_insert_t in;
    if ((rc = rd_journal_decode_insert(r, &in, err)) != RD_OK) return rc;
    if (in.n_fields != t->config.schema.n_fields)
      return rd_error_set(err, RD_EINVAL, "record %" PRIu64 " has %u columns", r->lsn, in.n_fields);
    /* Only priorities need a copy (aligned), and then the record holds
     * n of them: a row count the columns do not back is the table's to
     * refuse, never an allocation. */
    if (in.priorities && in.n > 0) {
      if ((rc = replay_grow(rp, in.n, err)) != RD_OK) return rc;
      memcpy(rp->prio, in.priorities, in.n * sizeof(double));
    }
    pthread_mutex_lock(&w->lock);
    if (in.first_key != rd_table_next_key(t)) {
      rc = rd_error_set(err, RD_EINVAL, "record %" PRIu64 " inserts at key %" PRIu64 " but the "
                        "table is at key %" PRIu64, r->lsn, in.first_key, rd_table_next_key(t));
    } else {
      rc = rd_table_insert(t, in.n, in.cols, in.priorities ? rp->prio : NULL, NULL, err);
      if (rc == RD_OK && w->pipeline) rd_pipeline_after_insert(w->pipeline, in.n);
    }
    pthread_mutex_unlock(&w->lock);
  } else if (r->type == RD_JOURNAL_REC_UPDATE) {
    rd_journal_update_t up;
    if ((rc = rd_journal_decode_update(r, &up, err)) != RD_OK) return rc;
    if (up.n > 0) { /* an empty record has nothing to copy (and no buffer yet) */
      if ((rc = replay_grow(rp, up.n, err)) != RD_OK) return rc;
      memcpy(rp->keys, up.keys, up.n * sizeof(uint64_t));
      memcpy(rp->prio, up.priorities, up.n * sizeof(double));
    }
    pthread_mutex_lock(&w->lock);
    rc = rd_table_update(t, up.n, rp->keys, rp->prio, NULL, err);
    pthread_mutex_unlock(&w->lock);
  } else {
    return rd_error_set(err, RD_EINVAL, "record %" PRIu64 " has unknown type %u", r->lsn, r->type);
  }
  if (rc == RD_OK) rp->records++;
  return rc;
}

/* Replay the segments from gen `from` on, continuing after lsn `after`.
 * *last: the last lsn applied; *clean: every segment read to its end; *tail
 * set when only the last segment's end was torn (then it was cut off). */
static void replay_journal(rd_workload_t *w, const listing_t *l, uint64_t from, uint64_t after,
                           uint64_t *records, uint64_t *last, int *clean) {
  rd_wl_durable_t *wd = w->durable;
  replay_t rp = {w, 0, NULL, NULL, 0};
  uint64_t expect = after + 1;
  *clean = 1;
  for (size_t i = 0; i < l->n_seg; i++) {
    if (l->seg[i] < from) continue;
    char path[PATH_MAX + 64];
    rd_journal_path(path, sizeof path, wd->dir, l->seg[i]);
    rd_journal_read_info_t info;
    rd_error_t e;
    rd_error_clear(&e);
    int rc = rd_journal_read(path, expect, replay_record, &rp, &info, &e);
    if (info.records > 0) expect = info.last_lsn + 1;
    if (rc != RD_OK) {
      rd_log_error("durable", "workload %s: replaying %s stopped: %s; later records are not "
                   "applied", w->id, path, e.msg);
      *clean = 0;
      break;
    }
    const int is_last = i + 1 == l->n_seg;
    if (info.torn) {
      rd_log_warn("durable", "workload %s: %s ends in a torn or damaged record (%s): %llu bytes "
                  "dropped%s", w->id, path, info.why,
                  (unsigned long long)(info.file_bytes - info.valid_bytes),
                  is_last ? "" : "; later segments are not applied");
      if (!is_last) {
        *clean = 0;
        break;
      }
    }
    if (is_last && info.valid_bytes < info.file_bytes) {
      /* A torn tail was never acknowledged (its record was not whole on
       * disk), and zeros are space kept ahead: cut both off, so that the
       * journal's writes follow the last good record. */
      int fd = open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ftruncate(fd, (off_t)info.valid_bytes) != 0 || fsync(fd) != 0) *clean = 0;
      if (fd >= 0) close(fd);
    }
  }
  free(rp.prio);
  free(rp.keys);
  *records = rp.records;
  *last = expect - 1;
}

/* Try checkpoint gen. RD_OK: applied; else why not (and nothing applied). */
static int try_checkpoint(rd_workload_t *w, uint64_t gen, loaded_t *l, rd_error_t *err) {
  rd_wl_durable_t *wd = w->durable;
  char path[PATH_MAX + 64];
  ckpt_path(path, sizeof path, wd->dir, gen, "");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_error(err, "cannot open", path, errno);
  int rc = load_fd(fd, UINT64_MAX, l, err);
  close(fd);
  if (rc) return rc;
  if (l->meta.kind != KIND_CHECKPOINT) {
    rc = rd_error_set(err, RD_EINVAL, "it is an export, not a checkpoint");
  } else if (strcmp(l->meta.id, w->id) != 0) {
    rc = rd_error_set(err, RD_EINVAL, "it belongs to workload %.32s", l->meta.id);
  } else {
    int policy_only = 0;
    rc = apply_loaded(w, l, wd->reserved_at_start, &policy_only, err);
  }
  if (rc) loaded_free(l);
  return rc;
}

void rd_durable_restore(rd_durable_t *d, rd_workload_t *w) {
  rd_wl_durable_t *wd = w->durable;
  if (wd == NULL) return; /* durability none: it comes back empty, as it says */
  double t0 = rd_clock_now();
  listing_t l;
  rd_error_t e;
  rd_error_clear(&e);
  if (list_dir(wd->dir, &l, &e) != RD_OK) {
    snprintf(wd->restored, sizeof wd->restored, "empty: %.200s", e.msg);
    rd_log_error("durable", "workload %s comes back empty: %s", w->id, e.msg);
    return;
  }
  char why[RD_ERROR_MSG_MAX] = "";
  int loaded = 0, irregular = 0;
  loaded_t ld;
  memset(&ld, 0, sizeof ld);
  uint64_t gen = 0, cut = 0;
  for (size_t i = l.n_ckpt; i-- > 0 && !loaded;) {
    rd_error_clear(&e);
    if (try_checkpoint(w, l.ckpt[i], &ld, &e) == RD_OK) {
      loaded = 1;
      gen = l.ckpt[i];
      cut = ld.meta.cut_lsn;
      break;
    }
    irregular = 1;
    char path[PATH_MAX + 64], bad[PATH_MAX + 64];
    ckpt_path(path, sizeof path, wd->dir, l.ckpt[i], "");
    ckpt_path(bad, sizeof bad, wd->dir, l.ckpt[i], ".bad");
    rd_log_warn("durable", "workload %s: checkpoint %s cannot be used: %s; %s", w->id, path,
                e.msg, i > 0 ? "trying the previous one" : "no older checkpoint");
    rename(path, bad);
    size_t used = strlen(why);
    snprintf(why + used, sizeof why - used, "%s%" PRIu64 ": %.80s", used ? "; " : "",
             l.ckpt[i], e.msg);
  }
  /* The journal continues the checkpoint; without one, only segment 0
   * (the journal since registration) continues the empty table. */
  uint64_t records = 0, last = cut;
  int clean = 1;
  int replayable = loaded || (l.n_seg > 0 && l.seg[0] == 0);
  if (replayable && l.n_seg > 0) replay_journal(w, &l, gen, cut, &records, &last, &clean);
  if (!clean || (!replayable && l.n_seg > 0)) irregular = 1;
  if (loaded)
    snprintf(wd->restored, sizeof wd->restored, "checkpoint %" PRIu64 " (%" PRIu64 " items) + %"
             PRIu64 " journal records", gen, ld.img.size, records);
  else if (records > 0)
    snprintf(wd->restored, sizeof wd->restored, "the journal: %" PRIu64 " records%s%.150s",
             records, why[0] ? "; unusable checkpoints: " : "", why);
  else if (why[0])
    snprintf(wd->restored, sizeof wd->restored, "empty: no checkpoint could be used (%.200s)",
             why);
  else
    snprintf(wd->restored, sizeof wd->restored, "empty: no checkpoint yet");
  int learner_loaded = loaded && ld.learner != NULL;
  if (loaded) { /* Describe's last checkpoint: the one restored (its duration is not kept) */
    char path[PATH_MAX + 64];
    struct stat sb;
    ckpt_path(path, sizeof path, wd->dir, gen, "");
    wd->has_last = 1;
    wd->last = (rd_checkpoint_info_t){gen, ld.meta.taken_ms,
                                      stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0,
                                      ld.img.size, 0.0, (ld.meta.learner_flags & 2) != 0, 0.0};
  }
  loaded_free(&ld);
  if (!learner_loaded && w->pipeline != NULL && wd->reserved_at_start > 0) {
    /* Weights from the start again, but never an older version number. */
    rd_error_clear(&e);
    if (rd_pipeline_version_floor(w->pipeline, wd->reserved_at_start, &e) != RD_OK)
      rd_log_error("durable", "workload %s: weight versions cannot continue: %s", w->id, e.msg);
  }
  wd->next_gen = (l.max_gen > gen ? l.max_gen : gen) + 1;
  uint64_t seg = gen;
  for (size_t i = 0; i < l.n_seg; i++)
    if (l.seg[i] >= gen && replayable) seg = l.seg[i];
  listing_free(&l);
  rd_log_info("durable", "workload %s restored in %.3f s: %s", w->id, rd_clock_now() - t0,
              wd->restored);
  wd->last_attempt = rd_clock_now();
  wd->last_mark = change_mark(w);
  if (wd->mode == RD_DURABILITY_JOURNAL) {
    if (!replayable) seg = wd->next_gen++; /* a fresh segment: the old ones do not apply */
    reopen_journal(d, w, seg, last + 1);
  }
  if (irregular && wd->mode != RD_DURABILITY_NONE) {
    /* Anchor what was restored in a checkpoint of its own, so the next
     * restore does not depend on the files that failed. */
    rd_error_clear(&e);
    if (rd_durable_checkpoint(d, w, NULL, &e) != RD_OK && wl_journal(wd) != NULL)
      rd_log_error("durable", "workload %s: the restored state could not be checkpointed (%s)",
                   w->id, e.msg);
  }
}

/* ------------------------------------------------------------------ */
/* A workload's life                                                   */
/* ------------------------------------------------------------------ */

static void reopen_journal(rd_durable_t *d, rd_workload_t *w, uint64_t gen, uint64_t next_lsn) {
  rd_wl_durable_t *wd = w->durable;
  rd_journal_t *j = NULL;
  rd_error_t e;
  rd_error_clear(&e);
  int rc = make_dir(wd->dir, &e);
  if (rc == RD_OK) rc = rd_journal_open(&j, wd->dir, gen, next_lsn, &d->jcfg, &e);
  pthread_mutex_lock(&wd->mu);
  snprintf(wd->journal_error, sizeof wd->journal_error, "%s", rc ? e.msg : "");
  pthread_mutex_unlock(&wd->mu);
  if (rc) {
    rd_log_error("durable", "workload %s: its journal cannot be opened (%s): inserts and "
                 "updates are refused until a checkpoint succeeds", w->id, e.msg);
    return;
  }
  rd_table_observer_t o = rd_journal_observer(j);
  pthread_mutex_lock(&w->lock);
  rd_table_set_observer(&w->table, &o);
  __atomic_store_n(&wd->journal, j, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&w->lock);
}

/* The learner's hook (pipeline.h reserve_versions): learner thread. */
static int reserve_versions(void *arg, uint64_t upto, rd_error_t *err) {
  rd_wl_durable_t *wd = arg;
  pthread_mutex_lock(&wd->ver_mu);
  int rc = RD_OK;
  if (upto > wd->reserved) {
    char text[32];
    int n = snprintf(text, sizeof text, "%" PRIu64 "\n", upto);
    rc = make_dir(wd->dir, err);
    if (rc == RD_OK) rc = write_atomic(wd->dir, "weights.version", text, (size_t)n, err);
    if (rc == RD_OK) wd->reserved = upto;
  }
  pthread_mutex_unlock(&wd->ver_mu);
  return rc;
}

static uint64_t read_reserved(const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/weights.version", dir);
  FILE *f = fopen(path, "re");
  if (f == NULL) return 0;
  unsigned long long v = 0;
  if (fscanf(f, "%llu", &v) != 1) v = 0;
  fclose(f);
  return v;
}

int rd_durable_prepare(rd_durable_t *d, const char *id, rd_workload_config_t *wc,
                       rd_wl_durable_t **out, rd_error_t *err) {
  *out = NULL;
  if (d == NULL || wc->durability == RD_DURABILITY_NONE) return RD_OK;
  rd_wl_durable_t *wd = calloc(1, sizeof *wd);
  if (wd == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory");
  wd->d = d;
  snprintf(wd->id, sizeof wd->id, "%s", id);
  if (snprintf(wd->dir, sizeof wd->dir, "%s/%s", d->dir, id) >= (int)sizeof wd->dir) {
    free(wd);
    return rd_error_set(err, RD_EINVAL, "the checkpoint directory path is too long");
  }
  wd->mode = wc->durability;
  wd->interval_s = wc->checkpoint_interval_s;
  wd->next_gen = 1;
  pthread_mutex_init(&wd->mu, NULL);
  pthread_mutex_init(&wd->ver_mu, NULL);
  wd->reserved = wd->reserved_at_start = read_reserved(wd->dir);
  wd->last_attempt = rd_clock_now();
  if (wc->has_learner) {
    wc->learner.reserve_versions = reserve_versions;
    wc->learner.reserve_arg = wd;
  }
  *out = wd;
  return RD_OK;
}

int rd_durable_attach(rd_durable_t *d, rd_workload_t *w, rd_error_t *err) {
  rd_wl_durable_t *wd = w->durable;
  if (wd == NULL) return RD_OK;
  int rc = make_dir(wd->dir, err);
  if (rc) return rc;
  snprintf(wd->restored, sizeof wd->restored, "registered since the server started");
  if (wd->mode != RD_DURABILITY_JOURNAL) return RD_OK;
  rd_journal_t *j = NULL;
  rc = rd_journal_open(&j, wd->dir, 0, 1, &d->jcfg, err);
  if (rc) return rc;
  rd_table_observer_t o = rd_journal_observer(j);
  pthread_mutex_lock(&w->lock);
  rd_table_set_observer(&w->table, &o);
  __atomic_store_n(&wd->journal, j, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&w->lock);
  return RD_OK;
}

void rd_durable_forget(rd_durable_t *d, rd_workload_t *w) {
  if (d == NULL) return;
  rd_wl_durable_t *wd = w->durable;
  pthread_mutex_lock(&d->ck_mu); /* no checkpoint of it runs from now on */
  if (wd != NULL) wd->deleted = 1;
  pthread_mutex_unlock(&d->ck_mu);
  /* By id: files of an earlier mode (durability none now) go too. */
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/%s", d->dir, w->id) >= (int)sizeof dir) return;
  DIR *dp = opendir(dir);
  if (dp != NULL) {
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
      uint64_t g;
      if (parse_gen(e->d_name, "ckpt-", ".rdc", &g) ||
          parse_gen(e->d_name, "ckpt-", ".rdc.bad", &g) ||
          parse_gen(e->d_name, "ckpt-", ".rdc.tmp", &g) ||
          parse_gen(e->d_name, "journal-", ".log", &g) ||
          strcmp(e->d_name, "weights.version") == 0 ||
          strcmp(e->d_name, "weights.version.tmp") == 0) {
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
      }
    }
    closedir(dp);
  }
  if (rmdir(dir) != 0 && errno != ENOENT)
    rd_log_warn("durable", "workload %s: cannot remove %s: %s", w->id, dir, strerror(errno));
}

void rd_durable_release(rd_wl_durable_t *wd) {
  if (wd == NULL) return;
  rd_journal_close(wd->journal);
  pthread_mutex_destroy(&wd->mu);
  pthread_mutex_destroy(&wd->ver_mu);
  free(wd);
}

rd_journal_t *rd_durable_journal(const rd_workload_t *w) {
  return w->durable ? wl_journal(w->durable) : NULL;
}

int rd_durable_admit(const rd_workload_t *w, size_t bytes, rd_error_t *err) {
  const rd_wl_durable_t *wd = w->durable;
  if (wd == NULL || wd->mode != RD_DURABILITY_JOURNAL) return RD_OK;
  rd_journal_t *j = wl_journal(wd);
  if (j == NULL)
    return rd_error_set(err, RD_ESTORE, "workload %s's journal could not be opened: inserts and "
                        "updates are refused until a checkpoint succeeds", w->id);
  return rd_journal_admit(j, bytes, err);
}

void rd_durable_info(const rd_workload_t *w, rd_durable_info_t *out) {
  memset(out, 0, sizeof *out);
  rd_wl_durable_t *wd = w->durable;
  if (wd == NULL) {
    out->mode = RD_DURABILITY_NONE;
    snprintf(out->restored, sizeof out->restored, "%s", "empty at every start (durability none)");
    return;
  }
  pthread_mutex_lock(&wd->mu);
  out->mode = wd->mode;
  out->interval_s = wd->interval_s;
  out->has_last = wd->has_last;
  out->last = wd->last;
  out->checkpoints = wd->checkpoints;
  snprintf(out->last_error, sizeof out->last_error, "%s", wd->last_error);
  snprintf(out->restored, sizeof out->restored, "%s", wd->restored);
  pthread_mutex_unlock(&wd->mu);
  rd_journal_t *j = wl_journal(wd);
  if (j != NULL) {
    out->has_journal = 1;
    rd_journal_stats(j, &out->journal);
  } else if (wd->mode == RD_DURABILITY_JOURNAL) {
    out->journal.failed = 1;
    pthread_mutex_lock(&wd->mu);
    snprintf(out->journal.why, sizeof out->journal.why, "%s", wd->journal_error);
    pthread_mutex_unlock(&wd->mu);
  }
}

/* ------------------------------------------------------------------ */
/* The server's durability, and the periodic thread                    */
/* ------------------------------------------------------------------ */

int rd_durable_create(rd_durable_t **out, const rd_config_t *cfg, rd_error_t *err) {
  *out = NULL;
  if (rd_durability_parse(cfg->durability) < 0)
    return rd_error_set(err, RD_EINVAL, "durability \"%s\" is not none, checkpoint or journal",
                        cfg->durability);
  rd_durable_t *d = calloc(1, sizeof *d);
  if (d == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory");
  int n = cfg->checkpoint_dir[0]
              ? snprintf(d->dir, sizeof d->dir, "%s", cfg->checkpoint_dir)
              : snprintf(d->dir, sizeof d->dir, "%s/checkpoints", cfg->state_dir);
  if (n >= (int)sizeof d->dir - RD_WORKLOAD_ID_LEN - 40) {
    free(d);
    return rd_error_set(err, RD_EINVAL, "the checkpoint directory path is too long");
  }
  d->keep = cfg->checkpoint_keep ? cfg->checkpoint_keep : 2;
  d->zstd = (int)cfg->checkpoint_zstd;
  d->jcfg.commit_us = cfg->journal_commit_us;
  d->jcfg.max_pending = cfg->journal_max_pending;
  d->jcfg.buffered = !cfg->journal_direct;
  d->jcfg.shared_pending = &d->journal_pending;
  d->max_import_bytes = cfg->max_memory_bytes;
  d->import_max_bytes = cfg->import_max_bytes;
  d->max_workloads = cfg->max_workloads;
  int rc = make_dir(d->dir, err);
  if (rc) {
    free(d);
    return rc;
  }
  pthread_mutex_init(&d->ck_mu, NULL);
  pthread_mutex_init(&d->mu, NULL);
  rd_cond_init_monotonic(&d->cv);
  *out = d;
  return RD_OK;
}

const char *rd_durable_dir(const rd_durable_t *d) { return d->dir; }

/* Once a second: every workload whose period has passed and that changed
 * since its last checkpoint. */
static void *periodic_main(void *arg) {
  rd_durable_t *d = arg;
  rd_workload_t **ws = calloc(d->max_workloads, sizeof *ws);
  pthread_mutex_lock(&d->mu);
  while (!d->stop && ws != NULL) {
    struct timespec ts = rd_cond_deadline(1.0);
    pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    if (d->stop) break;
    pthread_mutex_unlock(&d->mu);
    size_t n = rd_registry_list(d->registry, ws, d->max_workloads);
    for (size_t i = 0; i < n; i++) {
      rd_workload_t *w = ws[i];
      rd_wl_durable_t *wd = w->durable;
      double now = rd_clock_now();
      if (wd != NULL && wd->interval_s > 0 && now - wd->last_attempt >= wd->interval_s &&
          !d->stop) {
        wd->last_attempt = now;
        pthread_mutex_lock(&wd->mu);
        uint64_t mark = wd->last_mark;
        pthread_mutex_unlock(&wd->mu);
        if (change_mark(w) != mark) {
          rd_error_t e;
          rd_error_clear(&e);
          (void)rd_durable_checkpoint(d, w, NULL, &e); /* logged there */
        }
      }
      rd_workload_unref(w);
    }
    pthread_mutex_lock(&d->mu);
  }
  pthread_mutex_unlock(&d->mu);
  free(ws);
  return NULL;
}

int rd_durable_start(rd_durable_t *d, struct rd_registry *r, rd_error_t *err) {
  d->registry = r;
  if (pthread_create(&d->thread, NULL, periodic_main, d) != 0)
    return rd_error_set(err, RD_EINTERNAL, "cannot start the checkpoint thread");
  d->started = 1;
  return RD_OK;
}

void rd_durable_stop(rd_durable_t *d) {
  if (d == NULL || !d->started) return;
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  d->started = 0;
}

void rd_durable_destroy(rd_durable_t *d) {
  if (d == NULL) return;
  rd_durable_stop(d);
  pthread_cond_destroy(&d->cv);
  pthread_mutex_destroy(&d->mu);
  pthread_mutex_destroy(&d->ck_mu);
  free(d);
}

/* ------------------------------------------------------------------ */
/* Export and import                                                   */
/* ------------------------------------------------------------------ */

/* w's export file into fd (from its offset 0): *bytes its size. One at a
 * time per server, as checkpoints (ck_mu): it holds a copy of the table. */
static int export_to_fd(rd_durable_t *d, rd_workload_t *w, int fd, uint64_t *bytes,
                        uint64_t *items, rd_error_t *err) {
  taken_t tk;
  memset(&tk, 0, sizeof tk);
  pthread_mutex_lock(&d->ck_mu);
  int rc = take_table(w, NULL, 0, &tk, err);
  if (rc == RD_OK) rc = take_learner(w, &tk, err);
  *bytes = 0;
  if (rc == RD_OK) {
    rd_ckpt_writer_t wr;
    meta_t m;
    meta_of(&m, w, KIND_EXPORT, 0, &tk);
    rc = rd_ckpt_writer_init(&wr, fd, d->zstd, err);
    if (rc == RD_OK) rc = write_sections(&wr, w, &m, &tk, err);
    *bytes = wr.bytes;
    rd_ckpt_writer_free(&wr);
  }
  if (items) *items = tk.has_snap ? tk.snap.img.size : 0;
  taken_free(&tk);
  pthread_mutex_unlock(&d->ck_mu);
  return rc;
}

int rd_durable_export(rd_durable_t *d, rd_workload_t *w, uint64_t max_bytes, uint8_t **out,
                      size_t *len, uint64_t *items, rd_error_t *err) {
  *out = NULL;
  *len = 0;
  int rc = RD_OK;
  int fd = memfd_create("replayd-export", MFD_CLOEXEC);
  if (fd < 0) rc = rd_error_set(err, RD_EINTERNAL, "memfd_create: %s", strerror(errno));
  uint64_t bytes = 0;
  if (rc == RD_OK) {
    rc = export_to_fd(d, w, fd, &bytes, items, err);
    if (rc == RD_ESTORE) rc = rd_error_set(err, RD_ENOMEM, "%s", "out of memory for the export");
  }
  if (rc == RD_OK && bytes > max_bytes)
    rc = rd_error_set(err, RD_ETOOBIG, "the export of workload %s is %" PRIu64 " bytes, more than "
                      "the %" PRIu64 " a reply may carry (--max-message-bytes; --checkpoint-zstd "
                      "makes it smaller, ExportStream has no such bound)", w->id, bytes,
                      max_bytes);
  if (rc == RD_OK && (*out = malloc(bytes ? bytes : 1)) == NULL)
    rc = rd_error_set(err, RD_ENOMEM, "out of memory for a %" PRIu64 "-byte export", bytes);
  if (rc == RD_OK) {
    size_t got = 0;
    while (got < bytes) {
      ssize_t k = pread(fd, *out + got, bytes - got, (off_t)got);
      if (k <= 0) break;
      got += (size_t)k;
    }
    if (got != bytes) rc = rd_error_set(err, RD_EINTERNAL, "reading the export back failed");
    else *len = bytes;
  }
  if (fd >= 0) close(fd);
  if (rc != RD_OK) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

/* An unlinked temporary file in the checkpoint directory: it holds a
 * stream's file and goes with its fd, whatever ends the stream (a crash
 * included). */
static int temp_file(rd_durable_t *d, const char *what, int *fd, rd_error_t *err) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/.%s-XXXXXX", d->dir, what);
  *fd = mkostemp(path, O_CLOEXEC);
  if (*fd < 0) return sys_error(err, "creating a temporary file in", d->dir, errno);
  unlink(path);
  return RD_OK;
}

/* XXH3-64 of fd's first bytes bytes, read in slices. */
static int hash_fd(int fd, uint64_t bytes, uint64_t *out, rd_error_t *err) {
  enum { SLICE = 1 << 20 };
  uint8_t *buf = malloc(SLICE);
  XXH3_state_t *st = XXH3_createState();
  int rc = RD_OK;
  if (buf == NULL || st == NULL) rc = rd_error_set(err, RD_ENOMEM, "out of memory");
  if (rc == RD_OK) XXH3_64bits_reset(st);
  for (uint64_t off = 0; rc == RD_OK && off < bytes;) {
    size_t want = bytes - off < SLICE ? (size_t)(bytes - off) : SLICE;
    ssize_t k = pread(fd, buf, want, (off_t)off);
    if (k <= 0) rc = rd_error_set(err, RD_ESTORE, "reading a stream's file back: %s",
                                  k < 0 ? strerror(errno) : "it is shorter than written");
    else XXH3_64bits_update(st, buf, (size_t)k), off += (uint64_t)k;
  }
  if (rc == RD_OK) *out = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  free(buf);
  return rc;
}

int rd_durable_export_file(rd_durable_t *d, rd_workload_t *w, rd_export_file_t *out,
                           rd_error_t *err) {
  memset(out, 0, sizeof *out);
  out->fd = -1;
  if (atomic_fetch_add(&d->exports, 1) >= RD_EXPORT_FILES_MAX) {
    atomic_fetch_sub(&d->exports, 1);
    return rd_error_set(err, RD_ETOOBIG, "%d export streams are open already; retry later",
                        RD_EXPORT_FILES_MAX);
  }
  int fd = -1;
  int rc = temp_file(d, "export", &fd, err);
  if (rc == RD_OK) rc = export_to_fd(d, w, fd, &out->bytes, &out->items, err);
  if (rc == RD_OK) rc = hash_fd(fd, out->bytes, &out->xxh3, err);
  if (rc != RD_OK) {
    if (fd >= 0) close(fd);
    atomic_fetch_sub(&d->exports, 1);
    return rc;
  }
  out->fd = fd;
  out->d = d;
  return RD_OK;
}

void rd_export_file_close(rd_export_file_t *f) {
  if (f->d == NULL) return;
  close(f->fd);
  atomic_fetch_sub(&f->d->exports, 1);
  f->fd = -1;
  f->d = NULL;
}

struct rd_import {
  loaded_t l;
};

/* A checked file on fd (closed here), as rd_import_read. */
static int import_fd(rd_durable_t *d, int fd, rd_import_t **out, const uint8_t **spec,
                     size_t *spec_len, rd_error_t *err) {
  rd_import_t *imp = calloc(1, sizeof *imp);
  uint64_t max = d != NULL ? d->max_import_bytes : UINT64_C(8) << 30;
  int rc = imp ? load_fd(fd, max, &imp->l, err)
               : rd_error_set(err, RD_ENOMEM, "out of memory");
  close(fd);
  if (rc) {
    free(imp);
    if (rc == RD_ESTORE) rc = RD_EINVAL;
    if (err) err->code = rc;
    return rc;
  }
  *spec = imp->l.meta.spec;
  *spec_len = imp->l.meta.spec_len;
  *out = imp;
  return RD_OK;
}

int rd_import_read(rd_durable_t *d, const uint8_t *data, size_t len, rd_import_t **out,
                   const uint8_t **spec, size_t *spec_len, rd_error_t *err) {
  *out = NULL;
  int fd = memfd_create("replayd-import", MFD_CLOEXEC);
  if (fd < 0) return rd_error_set(err, RD_EINTERNAL, "memfd_create: %s", strerror(errno));
  size_t done = 0;
  while (done < len) {
    ssize_t k = write(fd, data + done, len - done);
    if (k <= 0) {
      close(fd);
      return rd_error_set(err, RD_ENOMEM, "out of memory holding the import");
    }
    done += (size_t)k;
  }
  return import_fd(d, fd, out, spec, spec_len, err);
}

struct rd_import_sink {
  rd_durable_t *d;
  int fd;
  uint64_t bytes, max;
  XXH3_state_t *hash;
};

int rd_import_sink_open(rd_durable_t *d, rd_import_sink_t **out, rd_error_t *err) {
  *out = NULL;
  if (atomic_fetch_add(&d->sinks, 1) >= RD_IMPORT_SINKS_MAX) {
    atomic_fetch_sub(&d->sinks, 1);
    return rd_error_set(err, RD_ETOOBIG, "%d import streams are open already; retry later",
                        RD_IMPORT_SINKS_MAX);
  }
  rd_import_sink_t *s = calloc(1, sizeof *s);
  int rc = RD_OK;
  if (s == NULL || (s->hash = XXH3_createState()) == NULL)
    rc = rd_error_set(err, RD_ENOMEM, "out of memory");
  if (rc == RD_OK) rc = temp_file(d, "import", &s->fd, err);
  if (rc != RD_OK) {
    if (s) XXH3_freeState(s->hash);
    free(s);
    atomic_fetch_sub(&d->sinks, 1);
    return rc;
  }
  XXH3_64bits_reset(s->hash);
  s->d = d;
  s->max = d->import_max_bytes;
  *out = s;
  return RD_OK;
}

int rd_import_sink_write(rd_import_sink_t *s, const void *data, size_t len, rd_error_t *err) {
  if (len > s->max - s->bytes)
    return rd_error_set(err, RD_ETOOBIG, "the import is more than %" PRIu64 " bytes "
                        "(--import-max-bytes)", s->max);
  const uint8_t *p = data;
  for (size_t done = 0; done < len;) {
    ssize_t k = pwrite(s->fd, p + done, len - done, (off_t)(s->bytes + done));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return sys_error(err, "writing an import's temporary file in", s->d->dir,
                                 k < 0 ? errno : ENOSPC);
    done += (size_t)k;
  }
  XXH3_64bits_update(s->hash, data, len);
  s->bytes += len;
  return RD_OK;
}

int rd_import_sink_finish(rd_import_sink_t *s, uint64_t total_bytes, uint64_t xxh3,
                          rd_import_t **out, const uint8_t **spec, size_t *spec_len,
                          rd_error_t *err) {
  *out = NULL;
  if (s->bytes != total_bytes)
    return rd_error_set(err, RD_EINVAL, "the stream carried %" PRIu64 " bytes, its end says %"
                        PRIu64, s->bytes, total_bytes);
  uint64_t h = XXH3_64bits_digest(s->hash);
  if (h != xxh3)
    return rd_error_set(err, RD_EINVAL, "checksum mismatch: the stream's XXH3-64 is %016" PRIx64
                        ", its end says %016" PRIx64, h, xxh3);
  int fd = s->fd;
  s->fd = -1; /* import_fd closes it */
  return import_fd(s->d, fd, out, spec, spec_len, err);
}

uint64_t rd_import_sink_bytes(const rd_import_sink_t *s) { return s->bytes; }

void rd_import_sink_free(rd_import_sink_t *s) {
  if (s == NULL) return;
  if (s->fd >= 0) close(s->fd);
  XXH3_freeState(s->hash);
  atomic_fetch_sub(&s->d->sinks, 1);
  free(s);
}

int rd_import_apply(rd_durable_t *d, rd_import_t *imp, rd_workload_t *w, rd_error_t *err) {
  uint64_t floor = w->durable ? w->durable->reserved_at_start : 0;
  int rc = apply_loaded(w, &imp->l, floor, NULL, err);
  if (rc) return rc;
  if (d != NULL && w->durable != NULL && w->durable->mode != RD_DURABILITY_NONE)
    rc = rd_durable_checkpoint(d, w, NULL, err);
  return rc;
}

void rd_import_free(rd_import_t *imp) {
  if (imp == NULL) return;
  loaded_free(&imp->l);
  free(imp);
}
