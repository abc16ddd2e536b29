/* test_table_snapshot.c - a table's snapshots and restore (table.h
 * "Snapshots and restore"): round trips of every dtype and shape through
 * tables that wrapped several times, copy-on-write while inserts, updates
 * and samples interleave with the slices (and from another thread), stale
 * keys and the sampling stream after a restore, the observer, and every
 * refusal.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdt_rmm.h"
#include "rdt_schema.h"
#include "rdt_th_group.h"
#include "table.h"
#include "rdt_main.h"

/* Every dtype, scalars and shapes of rank 1 and 2. */
enum { NF = 6 };
static void schema_all(rd_schema_t *s) {
  memset(s, 0, sizeof *s);
  static const struct {
    const char *name;
    rd_dtype_t dtype;
    uint32_t rank, d0, d1;
  } f[NF] = {{"obs", RD_DTYPE_FLOAT32, 1, 3, 0},   {"action", RD_DTYPE_INT32, 0, 0, 0},
             {"big", RD_DTYPE_INT64, 2, 2, 2},     {"img", RD_DTYPE_UINT8, 2, 5, 3},
             {"done", RD_DTYPE_BOOL, 0, 0, 0},     {"mask", RD_DTYPE_BOOL, 1, 4, 0}};
  for (int i = 0; i < NF; i++) {
    snprintf(s->fields[i].name, sizeof s->fields[i].name, "%s", f[i].name);
    s->fields[i].dtype = f[i].dtype;
    s->fields[i].rank = f[i].rank;
    s->fields[i].shape[0] = f[i].d0;
    s->fields[i].shape[1] = f[i].d1;
  }
  s->n_fields = NF;
}

static void config(rd_table_config_t *c, uint32_t capacity, uint64_t seed) {
  rd_table_config_default(c);
  schema_all(&c->schema);
  c->capacity = capacity;
  c->fanout = 4;
  c->alpha = 0.7;
  c->epsilon = 0.01;
  c->seed = seed;
  c->max_batch = 512;
}

static void init_ok(rd_table_t *t, const rd_table_config_t *c) {
  rd_error_t e;
  if (rd_table_init(t, c, &e) != RD_OK) fail_msg("init: %s", e.msg);
}

/* Rows whose every byte depends on the key (bools 0/1). */
typedef struct {
  uint8_t *col[NF];
  rd_cbuf_t cb[NF];
  double *prio;
} rows_t;

static void rows_make(rows_t *r, const rd_table_t *t, uint64_t k0, size_t n) {
  for (int f = 0; f < NF; f++) {
    size_t fb = t->field_bytes[f];
    r->col[f] = malloc(n * fb);
    for (size_t i = 0; i < n; i++)
      for (size_t b = 0; b < fb; b++) {
        uint64_t k = k0 + i;
        uint8_t v = (uint8_t)(k * 31 + b * 7 + (uint64_t)f * 13);
        if (t->config.schema.fields[f].dtype == RD_DTYPE_BOOL) v &= 1;
        r->col[f][i * fb + b] = v;
      }
    r->cb[f].data = r->col[f];
    r->cb[f].bytes = n * fb;
  }
  r->prio = malloc(n * sizeof *r->prio);
  for (size_t i = 0; i < n; i++) r->prio[i] = (double)((k0 + i) % 17) * 0.25;
}

static void rows_free(rows_t *r) {
  for (int f = 0; f < NF; f++) free(r->col[f]);
  free(r->prio);
}

static void insert_ok(rd_table_t *t, size_t n, int with_prio) {
  rows_t r;
  rows_make(&r, t, rd_table_next_key(t), n);
  rd_error_t e;
  if (rd_table_insert(t, n, r.cb, with_prio ? r.prio : NULL, NULL, &e) != RD_OK)
    fail_msg("insert: %s", e.msg);
  rows_free(&r);
}

static void update_some(rd_table_t *t, uint64_t salt) {
  uint64_t keys[8];
  double p[8];
  uint64_t lo = rd_table_next_key(t) - rd_table_size(t);
  for (int i = 0; i < 8; i++) {
    keys[i] = lo + (salt * 7 + (uint64_t)i * 11) % (rd_table_size(t) + 3); /* some stale */
    if (keys[i] >= rd_table_next_key(t)) keys[i] = rd_table_next_key(t) - 1;
    if (i == 5 && lo > 2) keys[i] = lo - 2; /* stale for sure */
    p[i] = (double)((salt + (uint64_t)i) % 9) + 0.5;
  }
  rd_error_t e;
  if (rd_table_update(t, 8, keys, p, NULL, &e) != RD_OK) fail_msg("update: %s", e.msg);
}

static void sample_some(rd_table_t *t, size_t n, unsigned flags, uint64_t *keys, double *pr,
                        double *w) {
  rd_sample_out_t out = {keys, pr, w, NULL};
  rd_error_t e;
  if (rd_table_sample(t, n, 0.5, flags, &out, &e) != RD_OK) fail_msg("sample: %s", e.msg);
}

/* A complete snapshot of t now, in one go. */
static void snapshot_now(rd_table_t *t, rd_table_snapshot_t *s) {
  rd_error_t e;
  assert_int_equal(rd_table_snapshot_alloc(s, &t->config, rd_table_size(t), &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(t, s, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_step(t, s, (size_t)-1 / 2, &e), 1);
  assert_false(s->active);
}

static void assert_images_equal(const rd_table_t *t, const rd_table_image_t *a,
                                const rd_table_image_t *b) {
  assert_int_equal(a->next_key, b->next_key);
  assert_int_equal(a->size, b->size);
  assert_int_equal(a->draws, b->draws);
  assert_true(a->max_p == b->max_p);
  assert_memory_equal(&a->stats, &b->stats, sizeof a->stats);
  assert_memory_equal(a->leaves, b->leaves, a->size * 8);
  for (int f = 0; f < NF; f++)
    assert_memory_equal(a->cols[f], b->cols[f], a->size * t->field_bytes[f]);
}

/* t's whole observable state equals the image: keys, rows, priorities. */
static void assert_table_is(rd_table_t *t, const rd_table_image_t *img) {
  assert_int_equal(rd_table_next_key(t), img->next_key);
  assert_int_equal(rd_table_size(t), img->size);
  assert_int_equal(t->draws, img->draws);
  assert_true(t->max_p == img->max_p);
  assert_memory_equal(&t->stats, &img->stats, sizeof t->stats);
  rd_table_snapshot_t s;
  snapshot_now(t, &s);
  s.img.stats = t->stats;
  assert_images_equal(t, &s.img, img);
  rd_table_snapshot_free(&s);
}

/* A table that wrapped several times, with updates and samples. */
static void fill(rd_table_t *t, uint64_t salt) {
  for (int i = 0; i < 40; i++) {
    size_t n = 3 + (size_t)(i * 7 + salt) % 29;
    insert_ok(t, n < t->config.capacity ? n : t->config.capacity, i % 3 != 0);
    if (i % 4 == 1) update_some(t, (uint64_t)i + salt);
    if (i % 5 == 2) {
      uint64_t k[16];
      double p[16], w[16];
      size_t n = rd_table_size(t) < 16 ? rd_table_size(t) : 16;
      sample_some(t, n, i % 2 ? RD_SAMPLE_STRATIFIED : 0, k, p, w);
    }
  }
}

/* A table of config(capacity, seed) filled by fill(t, salt). */
static void filled(rd_table_t *t, uint32_t capacity, uint64_t seed, uint64_t salt) {
  rd_table_config_t c;
  config(&c, capacity, seed);
  init_ok(t, &c);
  fill(t, salt);
}

/* Tables a and b of config(capacity, seed), a filled by fill(a, salt), b
 * empty. */
static void two_tables(rd_table_t *a, rd_table_t *b, uint32_t capacity, uint64_t seed,
                       uint64_t salt) {
  rd_table_config_t c;
  config(&c, capacity, seed);
  init_ok(b, &c);
  filled(a, capacity, seed, salt);
}

static void test_round_trip(void **state) {
  (void)state;
  for (uint32_t cap = 1; cap <= 300; cap = cap * 3 + 7) {
    rd_table_t a, b;
    two_tables(&a, &b, cap, 42 + cap, cap);
    assert_true(rd_table_next_key(&a) > 3 * cap); /* wrapped several times */
    rd_table_snapshot_t s;
    snapshot_now(&a, &s);
    rd_error_t e;
    assert_int_equal(rd_table_restore(&b, &s.img, &e), RD_OK);
    assert_table_is(&b, &s.img);
    /* Every live row and priority, key by key, through the public calls. */
    uint64_t lo = rd_table_next_key(&a) - rd_table_size(&a);
    for (uint64_t k = lo; k < rd_table_next_key(&a); k++) {
      double pa, pb;
      assert_int_equal(rd_table_get_priority(&a, k, &pa, NULL), RD_OK);
      assert_int_equal(rd_table_get_priority(&b, k, &pb, NULL), RD_OK);
      assert_true(pa == pb);
      uint8_t ra[256], rb[256];
      rd_buf_t ca[NF], cb[NF];
      size_t off = 0;
      for (int f = 0; f < NF; f++) {
        ca[f] = (rd_buf_t){ra + off, a.field_bytes[f]};
        cb[f] = (rd_buf_t){rb + off, a.field_bytes[f]};
        off += a.field_bytes[f];
      }
      assert_int_equal(rd_table_gather(&a, 1, &k, ca, NULL), RD_OK);
      assert_int_equal(rd_table_gather(&b, 1, &k, cb, NULL), RD_OK);
      assert_memory_equal(ra, rb, off);
    }
    /* Stale and never-issued keys behave as before. */
    if (lo > 0) {
      uint64_t stale = lo - 1;
      double p = 1.0;
      size_t n_stale = 0;
      assert_int_equal(rd_table_update(&b, 1, &stale, &p, &n_stale, NULL), RD_OK);
      assert_int_equal(n_stale, 1);
      assert_int_equal(b.stats.stale_updates, a.stats.stale_updates + 1);
      uint8_t row[256];
      rd_buf_t cb[NF];
      size_t off = 0;
      for (int f = 0; f < NF; f++) {
        cb[f] = (rd_buf_t){row + off, a.field_bytes[f]};
        off += a.field_bytes[f];
      }
      assert_int_equal(rd_table_gather(&b, 1, &stale, cb, NULL), RD_ERANGE);
    }
    uint64_t never = rd_table_next_key(&b);
    double p = 1.0;
    assert_int_equal(rd_table_update(&b, 1, &never, &p, NULL, NULL), RD_ENOTFOUND);
    rd_table_snapshot_free(&s);
    rd_table_free(&a);
    rd_table_free(&b);
  }
}

/* The same seed and the same draw counter: the restored table samples
 * exactly what the original samples next, and both go on alike. */
static void test_sampling_continues(void **state) {
  (void)state;
  rd_table_t a, b;
  two_tables(&a, &b, 257, 9, 5);
  rd_table_snapshot_t s;
  snapshot_now(&a, &s);
  assert_int_equal(rd_table_restore(&b, &s.img, NULL), RD_OK);
  for (int round = 0; round < 6; round++) {
    uint64_t ka[64], kb[64];
    double pa[64], pb[64], wa[64], wb[64];
    unsigned flags = round % 2 ? RD_SAMPLE_STRATIFIED : 0;
    sample_some(&a, 64, flags, ka, pa, wa);
    sample_some(&b, 64, flags, kb, pb, wb);
    assert_memory_equal(ka, kb, sizeof ka);
    assert_memory_equal(pa, pb, sizeof pa);
    assert_memory_equal(wa, wb, sizeof wa);
    update_some(&a, (uint64_t)round);
    update_some(&b, (uint64_t)round);
    insert_ok(&a, 11, round % 2);
    insert_ok(&b, 11, round % 2);
  }
  rd_table_snapshot_free(&s);
  rd_table_free(&a);
  rd_table_free(&b);
}

/* Copy-on-write: inserts (wrapping over the cursor and past the cut),
 * updates on both sides of the cursor, samples, in between slices of 3;
 * the finished snapshot is the state at begin. */
static void test_copy_on_write(void **state) {
  (void)state;
  rd_table_t t;
  filled(&t, 97, 3, 1);
  rd_table_snapshot_t ref, s;
  snapshot_now(&t, &ref);
  rd_error_t e;
  assert_int_equal(rd_table_snapshot_alloc(&s, &t.config, rd_table_size(&t), &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&t, &s, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&t, &s, &e), RD_EBUSY);
  int rc, steps = 0;
  while ((rc = rd_table_snapshot_step(&t, &s, 3, &e)) == 0) {
    steps++;
    insert_ok(&t, 1 + (size_t)steps % 13, steps % 2);
    update_some(&t, (uint64_t)steps * 3);
    if (steps % 3 == 0) {
      uint64_t k[8];
      double p[8], w[8];
      sample_some(&t, 8, 0, k, p, w);
    }
  }
  assert_int_equal(rc, 1);
  assert_true(steps > 5);
  /* The table was full: every insert overwrote items of the cut. */
  assert_true(rd_table_next_key(&t) > ref.img.next_key + 40);
  assert_images_equal(&t, &s.img, &ref.img);
  /* Detached: calls go on without copying. */
  assert_null(t.snap);
  insert_ok(&t, 7, 1);
  rd_table_snapshot_free(&s);
  rd_table_snapshot_free(&ref);
  rd_table_free(&t);
}

/* The same with a thread making calls under a lock while the main thread
 * copies slices (run under TSan by scripts/test): the worker calls on the
 * table ctx (an rdt_table_t) until stopped. */
static int worker(void *ctx, int unused) {
  (void)unused;
  rdt_table_t *lt = ctx;
  for (uint64_t i = 0; !rdt_th_stopping(); i++) {
    pthread_mutex_lock(&lt->lock);
    insert_ok(&lt->table, 1 + (size_t)(i % 9), (int)(i % 2));
    update_some(&lt->table, i);
    uint64_t k[4];
    double p[4], w[4];
    sample_some(&lt->table, 4, 0, k, p, w);
    pthread_mutex_unlock(&lt->lock);
  }
  return 0;
}

static void test_copy_on_write_threads(void **state) {
  (void)state;
  rd_table_config_t c;
  config(&c, 4096, 77);
  rdt_table_t lt = {.lock = PTHREAD_MUTEX_INITIALIZER};
  rd_table_t *t = &lt.table;
  init_ok(t, &c);
  for (int i = 0; i < 30; i++) insert_ok(t, 200, i % 2);
  rdt_th_group_t g = {0};
  assert_int_equal(rdt_th_start(&g, 1, worker, &lt), 0);
  for (int round = 0; round < 5; round++) {
    rd_table_snapshot_t ref, s;
    rd_error_t e;
    pthread_mutex_lock(&lt.lock);
    snapshot_now(t, &ref); /* the state at the cut, in the same hold */
    assert_int_equal(rd_table_snapshot_alloc(&s, &t->config, t->config.capacity, &e), RD_OK);
    assert_int_equal(rd_table_snapshot_begin(t, &s, &e), RD_OK);
    pthread_mutex_unlock(&lt.lock);
    int rc;
    do {
      pthread_mutex_lock(&lt.lock);
      rc = rd_table_snapshot_step(t, &s, 64, &e);
      pthread_mutex_unlock(&lt.lock);
    } while (rc == 0);
    assert_int_equal(rc, 1);
    pthread_mutex_lock(&lt.lock);
    assert_images_equal(t, &s.img, &ref.img);
    pthread_mutex_unlock(&lt.lock);
    rd_table_snapshot_free(&s);
    rd_table_snapshot_free(&ref);
  }
  assert_int_equal(rdt_th_stop(&g), 0);
  rd_table_free(t);
}

static void test_refusals(void **state) {
  (void)state;
  rd_table_t a, b;
  two_tables(&a, &b, 50, 1, 2);
  rd_error_t e;
  rd_table_snapshot_t s;
  /* Too small a buffer: ETOOBIG, nothing attached. */
  assert_int_equal(rd_table_snapshot_alloc(&s, &a.config, rd_table_size(&a) - 1, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&a, &s, &e), RD_ETOOBIG);
  assert_null(a.snap);
  rd_table_snapshot_free(&s);
  snapshot_now(&a, &s);
  /* Only into an empty table. */
  assert_int_equal(rd_table_restore(&a, &s.img, &e), RD_ESTATE);
  /* A leaf above the tree's bound, a bool that is not 0/1, sizes that do
   * not add up, a priority out of range: RD_EINVAL, b untouched. */
  uint64_t leaf = s.img.leaves[3];
  s.img.leaves[3] = b.max_leaf + 1;
  assert_int_equal(rd_table_restore(&b, &s.img, &e), RD_EINVAL);
  s.img.leaves[3] = leaf;
  uint8_t bit = s.img.cols[4][2];
  s.img.cols[4][2] = 2;
  assert_int_equal(rd_table_restore(&b, &s.img, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "done"));
  s.img.cols[4][2] = bit;
  uint64_t nk = s.img.next_key;
  s.img.next_key = s.img.size - 1;
  assert_int_equal(rd_table_restore(&b, &s.img, &e), RD_EINVAL);
  s.img.next_key = nk;
  double mp = s.img.max_p;
  s.img.max_p = b.config.max_priority * 2;
  assert_int_equal(rd_table_restore(&b, &s.img, &e), RD_EINVAL);
  s.img.max_p = mp;
  assert_int_equal(rd_table_next_key(&b), 0);
  assert_int_equal(rd_table_restore(&b, &s.img, &e), RD_OK);
  /* Cancel detaches; a step after it reports done without copying. */
  rd_table_snapshot_t s2;
  assert_int_equal(rd_table_snapshot_alloc(&s2, &b.config, rd_table_size(&b), &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&b, &s2, &e), RD_OK);
  rd_table_snapshot_cancel(&b, &s2);
  assert_null(b.snap);
  rd_table_snapshot_free(&s2);
  rd_table_snapshot_free(&s);
  rd_table_free(&a);
  rd_table_free(&b);
}

/* The observer sees every applied insert and update, in order, with the
 * call's arguments; replaying them onto a copy of the state before gives
 * the state after. */
typedef struct {
  rd_table_t *replica;
  int inserts, updates;
} obs_t;

static void on_insert(void *arg, uint64_t first_key, size_t n, uint32_t n_fields,
                      const rd_cbuf_t *cols, const double *prio) {
  obs_t *o = arg;
  assert_int_equal(n_fields, NF);
  assert_int_equal(first_key, rd_table_next_key(o->replica));
  assert_int_equal(rd_table_insert(o->replica, n, cols, prio, NULL, NULL), RD_OK);
  o->inserts++;
}

static void on_update(void *arg, size_t n, const uint64_t *keys, const double *prio) {
  obs_t *o = arg;
  assert_int_equal(rd_table_update(o->replica, n, keys, prio, NULL, NULL), RD_OK);
  o->updates++;
}

static void test_observer(void **state) {
  (void)state;
  rd_table_config_t c;
  config(&c, 64, 8);
  rd_table_t a, b;
  init_ok(&a, &c);
  init_ok(&b, &c);
  obs_t o = {&b, 0, 0};
  rd_table_observer_t ob = {on_insert, on_update, &o};
  rd_table_set_observer(&a, &ob);
  fill(&a, 4);
  /* A refused call is not observed. */
  double bad = -1;
  uint64_t k0 = rd_table_next_key(&a) - 1;
  assert_int_equal(rd_table_update(&a, 1, &k0, &bad, NULL, NULL), RD_EINVAL);
  assert_int_equal(o.inserts, 40);
  assert_true(o.updates >= 10);
  b.draws = a.draws; /* samples are not observed */
  b.stats.samples = a.stats.samples;
  rd_table_snapshot_t sa, sb;
  snapshot_now(&a, &sa);
  snapshot_now(&b, &sb);
  assert_images_equal(&a, &sa.img, &sb.img);
  rd_table_set_observer(&a, NULL);
  insert_ok(&a, 2, 1); /* not observed */
  assert_int_equal(o.inserts, 40);
  rd_table_free(&a);
  rd_table_free(&b);
  rd_table_snapshot_free(&sa);
  rd_table_snapshot_free(&sb);
}

/* ---- a table on a replay module and a storage module ----
 * Fakes over host memory (the CPU tree, rdt_rmm.h, and plain columns),
 * so that the snapshot and restore go through rmm->leaf, storage->read and
 * ->write and set_range, as they do for the GPU's and the FPGA's. */
typedef struct {
  uint32_t nf;
  size_t fb[RD_SCHEMA_MAX_FIELDS];
  uint8_t *col[RD_SCHEMA_MAX_FIELDS];
  int reads;
} fake_rows_t;
static size_t fake_st_memsize(uint32_t capacity, uint32_t nf, const size_t *fb) {
  size_t b = 0;
  for (uint32_t f = 0; f < nf; f++) b += capacity * fb[f];
  return b;
}
static int fake_st_create(void **st, uint32_t capacity, uint32_t nf, const size_t *fb,
                          const rd_rmm_ops_t *ro, void *rmm, rd_error_t *err) {
  (void)ro;
  (void)rmm;
  (void)err;
  fake_rows_t *r = calloc(1, sizeof *r);
  r->nf = nf;
  for (uint32_t f = 0; f < nf; f++) {
    r->fb[f] = fb[f];
    r->col[f] = calloc(capacity, fb[f]);
  }
  *st = r;
  return RD_OK;
}
static void fake_st_destroy(void *st) {
  fake_rows_t *r = st;
  for (uint32_t f = 0; f < r->nf; f++) free(r->col[f]);
  free(r);
}
static int fake_st_write(void *st, uint32_t first, size_t n, const void *const *src,
                         rd_error_t *err) {
  (void)err;
  fake_rows_t *r = st;
  for (uint32_t f = 0; f < r->nf; f++) memcpy(r->col[f] + first * r->fb[f], src[f], n * r->fb[f]);
  return RD_OK;
}
static int fake_st_read(void *st, size_t n, const uint32_t *slots, void *const *dst,
                        rd_error_t *err) {
  (void)err;
  fake_rows_t *r = st;
  r->reads++;
  for (uint32_t f = 0; f < r->nf; f++)
    if (dst[f] != NULL)
      for (size_t i = 0; i < n; i++)
        memcpy((uint8_t *)dst[f] + i * r->fb[f], r->col[f] + slots[i] * r->fb[f], r->fb[f]);
  return RD_OK;
}
static const rd_storage_ops_t fake_storage = {"fake-rows",    fake_st_memsize, fake_st_create,
                                              fake_st_destroy, fake_st_write,  fake_st_read};

/* A table on the modules and one on the CPU take the same calls: their
 * snapshots are equal (with copy-on-write in slices), and each restores
 * into the other kind. */
static void test_modules(void **state) {
  (void)state;
  rd_table_config_t cc, cm;
  config(&cc, 150, 12);
  config(&cm, 150, 12);
  cm.rmm = &rdt_host_rmm_ops;
  cm.storage = &fake_storage;
  cm.max_batch = 16; /* module reads in runs of at most max_batch */
  cc.max_batch = 64;
  rd_table_t c, m;
  init_ok(&c, &cc);
  init_ok(&m, &cm);
  for (int i = 0; i < 25; i++) {
    size_t n = 1 + (size_t)(i * 5) % 16;
    insert_ok(&c, n, i % 2);
    insert_ok(&m, n, i % 2);
  }
  rd_table_snapshot_t sc, sm;
  snapshot_now(&c, &sc);
  rd_error_t e;
  assert_int_equal(rd_table_snapshot_alloc(&sm, &m.config, rd_table_size(&m), &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&m, &sm, &e), RD_OK);
  int rc, k = 0;
  while ((rc = rd_table_snapshot_step(&m, &sm, 7, &e)) == 0) {
    insert_ok(&m, 5, k % 2);
    update_some(&m, (uint64_t)k++);
  }
  assert_int_equal(rc, 1);
  assert_true(((fake_rows_t *)m.rows)->reads > 0);
  sm.img.stats = sc.img.stats; /* the CPU table saw fewer calls since */
  assert_images_equal(&c, &sc.img, &sm.img);
  /* CPU image into a module table, and back. */
  rd_table_t m2, c2;
  init_ok(&m2, &cm);
  init_ok(&c2, &cc);
  assert_int_equal(rd_table_restore(&m2, &sc.img, &e), RD_OK);
  rd_table_snapshot_t s2;
  snapshot_now(&m2, &s2);
  assert_images_equal(&c, &s2.img, &sc.img);
  assert_int_equal(rd_table_restore(&c2, &s2.img, &e), RD_OK);
  uint64_t ka[16], kb[16];
  double pa[16], pb[16], wa[16], wb[16];
  sample_some(&c2, 16, 0, ka, pa, wa);
  sample_some(&m2, 16, 0, kb, pb, wb);
  assert_memory_equal(ka, kb, sizeof ka);
  rd_table_snapshot_free(&s2);
  rd_table_snapshot_free(&sc);
  rd_table_snapshot_free(&sm);
  rd_table_free(&c);
  rd_table_free(&m);
  rd_table_free(&c2);
  rd_table_free(&m2);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_round_trip),
         cmocka_unit_test(test_sampling_continues),
         cmocka_unit_test(test_copy_on_write),
         cmocka_unit_test(test_copy_on_write_threads),
         cmocka_unit_test(test_refusals),
         cmocka_unit_test(test_observer),
         cmocka_unit_test(test_modules))
