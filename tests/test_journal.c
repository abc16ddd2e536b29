/* test_journal.c - the write-ahead journal (daemon/core/journal.h): what a
 * table's observer appends reads back and replays to the same table; group
 * commit covers many records with one fdatasync; a torn or damaged record
 * ends the reading; segments rotate with consecutive lsns; a write that
 * fails (a full device) fails its waiters and refuses admits until a
 * checkpoint; callbacks from the committer with threads (TSan); direct
 * writes (O_DIRECT) that rewrite a segment's last partial block, across a
 * reopen at an unaligned end, read back as written through the page cache.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "rdt_schema.h"
#include "rdt_th_group.h"
#include "rdt_unit.h"
#include "table.h"
#include "rdt_main.h"

static char dir[PATH_MAX];

static void fresh_dir(const char *name) {
  snprintf(dir, sizeof dir, "%s", rdt_fresh(name));
  assert_int_equal(mkdir(dir, 0700), 0);
}

static void table(rd_table_t *t) {
  rd_table_config_t c;
  rd_table_config_default(&c);
  c.schema.n_fields = 2;
  rdt_field(&c.schema.fields[0], "x", RD_DTYPE_FLOAT32, 3);
  rdt_field(&c.schema.fields[1], "d", RD_DTYPE_BOOL, 0);
  c.capacity = 100;
  c.max_batch = 64;
  c.seed = 3;
  rd_error_t e;
  assert_int_equal(rd_table_init(t, &c, &e), RD_OK);
}

static void insert(rd_table_t *t, size_t n, int prio) {
  float x[64 * 3];
  uint8_t d[64];
  double p[64];
  for (size_t i = 0; i < n; i++) {
    for (int j = 0; j < 3; j++) x[i * 3 + j] = (float)(rd_table_next_key(t) + i) + 0.5f * (float)j;
    d[i] = (uint8_t)(i & 1);
    p[i] = (double)(i % 5) + 0.25;
  }
  rd_cbuf_t cols[2] = {{x, n * 12}, {d, n}};
  rd_error_t e;
  if (rd_table_insert(t, n, cols, prio ? p : NULL, NULL, &e) != RD_OK) fail_msg("%s", e.msg);
}

static void update(rd_table_t *t, uint64_t salt) {
  uint64_t k[4];
  double p[4];
  for (int i = 0; i < 4; i++) {
    k[i] = (salt * 13 + (uint64_t)i * 7) % rd_table_next_key(t);
    p[i] = (double)((salt + (uint64_t)i) % 7);
  }
  assert_int_equal(rd_table_update(t, 4, k, p, NULL, NULL), RD_OK);
}

static rd_journal_t *open_io(uint64_t gen, uint64_t next_lsn, uint32_t commit_us,
                             int buffered) {
  rd_journal_config_t c = {.commit_us = commit_us, .max_pending = 64u << 20,
                           .buffered = buffered};
  rd_journal_t *j = NULL;
  rd_error_t e;
  if (rd_journal_open(&j, dir, gen, next_lsn, &c, &e) != RD_OK) fail_msg("open: %s", e.msg);
  return j;
}

static rd_journal_t *open_j(uint64_t gen, uint64_t next_lsn, uint32_t commit_us) {
  return open_io(gen, next_lsn, commit_us, 0);
}

/* A fresh directory named name, a table a whose inserts and updates go to
 * a journal opened there: what every case starts from. */
static rd_journal_t *journaled(const char *name, rd_table_t *a, uint64_t gen, uint64_t next_lsn,
                               uint32_t commit_us) {
  fresh_dir(name);
  table(a);
  rd_journal_t *j = open_j(gen, next_lsn, commit_us);
  rd_table_observer_t o = rd_journal_observer(j);
  rd_table_set_observer(a, &o);
  return j;
}

/* Replay into a table: what durable.c does at restore. */
static int replay(void *arg, const rd_journal_record_t *r, rd_error_t *err) {
  rd_table_t *t = arg;
  if (r->type == RD_JOURNAL_REC_INSERT) {
    rd_journal_insert_t in;
    int rc = rd_journal_decode_insert(r, &in, err);
    if (rc) return rc;
    assert_int_equal(in.first_key, rd_table_next_key(t));
    double p[64];
    if (in.priorities) memcpy(p, in.priorities, in.n * sizeof(double));
    return rd_table_insert(t, in.n, in.cols, in.priorities ? p : NULL, NULL, err);
  }
  rd_journal_update_t up;
  int rc = rd_journal_decode_update(r, &up, err);
  if (rc) return rc;
  uint64_t k[64];
  double p[64];
  memcpy(k, up.keys, up.n * 8);
  memcpy(p, up.priorities, up.n * 8);
  return rd_table_update(t, up.n, k, p, NULL, err);
}

static void assert_same_table(rd_table_t *a, rd_table_t *b) {
  rd_table_snapshot_t sa, sb;
  rd_error_t e;
  assert_int_equal(rd_table_snapshot_alloc(&sa, &a->config, a->config.capacity, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_alloc(&sb, &b->config, b->config.capacity, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(a, &sa, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_step(a, &sa, 1000, &e), 1);
  assert_int_equal(rd_table_snapshot_begin(b, &sb, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_step(b, &sb, 1000, &e), 1);
  assert_int_equal(sa.img.next_key, sb.img.next_key);
  assert_int_equal(sa.img.size, sb.img.size);
  assert_true(sa.img.max_p == sb.img.max_p);
  assert_memory_equal(sa.img.leaves, sb.img.leaves, sa.img.size * 8);
  assert_memory_equal(sa.img.cols[0], sb.img.cols[0], sa.img.size * 12);
  assert_memory_equal(sa.img.cols[1], sb.img.cols[1], sa.img.size);
  rd_table_snapshot_free(&sa);
  rd_table_snapshot_free(&sb);
}

static void read_seg(uint64_t gen, uint64_t first, rd_table_t *into, rd_journal_read_info_t *info) {
  char p[PATH_MAX + 40];
  rd_journal_path(p, sizeof p, dir, gen);
  rd_error_t e;
  assert_int_equal(rd_journal_read(p, first, replay, into, info, &e), RD_OK);
}

/* Segment 0, read from lsn 1 into a fresh table, has `records` records and
 * replays to the table a; a is freed. What the reading says. */
static rd_journal_read_info_t replays_to(rd_table_t *a, uint64_t records) {
  rd_table_t b;
  table(&b);
  rd_journal_read_info_t info;
  read_seg(0, 1, &b, &info);
  assert_int_equal(info.records, records);
  assert_same_table(a, &b);
  rd_table_free(a);
  rd_table_free(&b);
  return info;
}

/* A journal of len bytes (a copy of one, cut or damaged) written to path
 * and read from lsn 1 into a fresh table: what the reading says. */
static rd_journal_read_info_t read_bytes(const char *path, const uint8_t *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(bytes, 1, len, f), len);
  fclose(f);
  rd_table_t t;
  table(&t);
  rd_journal_read_info_t info;
  rd_error_t e;
  assert_int_equal(rd_journal_read(path, 1, replay, &t, &info, &e), RD_OK);
  rd_table_free(&t);
  return info;
}

static void test_replay_equals(void **state) {
  (void)state;
  rd_table_t a;
  rd_journal_t *j = journaled("replay", &a, 0, 1, 0);
  for (int i = 0; i < 30; i++) {
    insert(&a, 1 + (size_t)i % 17, i % 2);
    if (i % 3 == 0) update(&a, (uint64_t)i);
  }
  uint64_t last = rd_journal_last_lsn(j);
  assert_int_equal(last, 40);
  rd_error_t e;
  assert_int_equal(rd_journal_sync(j, last, &e), RD_OK);
  rd_journal_stats_t st;
  rd_journal_stats(j, &st);
  assert_int_equal(st.durable_lsn, last);
  rd_journal_close(j);
  assert_false(replays_to(&a, 40).torn);
}

/* One fdatasync for the records of a window. */
typedef struct {
  pthread_mutex_t mu;
  int calls, bad;
} count_t;

static void count_cb(void *arg, int rc, const rd_error_t *err) {
  (void)err;
  count_t *c = arg;
  pthread_mutex_lock(&c->mu);
  c->calls++;
  c->bad += rc != RD_OK;
  pthread_mutex_unlock(&c->mu);
}

static void test_group_commit(void **state) {
  (void)state;
  rd_table_t a;
  /* The longest window (1 s) and 40 records 1 ms apart: without a window
   * each would have a round of its own; with it one round covers them
   * (two if the loop, on a loaded machine, outlasts a window: 25 times its
   * nominal 40 ms). */
  rd_journal_t *j = journaled("group", &a, 0, 1, 1000000);
  count_t c = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
  rd_journal_waiter_t w[40];
  for (int i = 0; i < 40; i++) {
    usleep(1000);
    insert(&a, 3, 1);
    rd_error_t e;
    assert_int_equal(rd_journal_when_durable(j, rd_journal_last_lsn(j), &w[i], count_cb, &c, &e), 0);
  }
  rd_error_t e;
  assert_int_equal(rd_journal_sync(j, 40, &e), RD_OK);
  rd_journal_stats_t st;
  rd_journal_stats(j, &st);
  assert_true(st.commits <= 2); /* 40 records, one window (or two) */
  assert_int_equal(st.records, 40);
  rd_journal_close(j);
  assert_int_equal(c.calls, 40);
  assert_int_equal(c.bad, 0);
  rd_table_free(&a);
}

/* Cut the segment anywhere inside its last record: the records before it
 * read, the tail is reported torn. A damaged byte in the middle ends the
 * reading there. */
static void test_torn_and_damaged(void **state) {
  (void)state;
  rd_table_t a;
  rd_journal_t *j = journaled("torn", &a, 0, 1, 0);
  for (int i = 0; i < 10; i++) insert(&a, 5, 1);
  assert_int_equal(rd_journal_sync(j, 10, NULL), RD_OK);
  rd_journal_close(j);
  char p[PATH_MAX + 40];
  rd_journal_path(p, sizeof p, dir, 0);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  /* The writer keeps zeros ahead of its records: they end the reading
   * without a tear. */
  rd_journal_read_info_t zi;
  rd_table_t z;
  table(&z);
  assert_int_equal(rd_journal_read(p, 1, replay, &z, &zi, NULL), RD_OK);
  rd_table_free(&z);
  assert_int_equal(zi.records, 10);
  assert_true(zi.zero_tail);
  assert_false(zi.torn);
  assert_true(zi.valid_bytes < (uint64_t)sb.st_size);
  size_t rec = (size_t)zi.valid_bytes / 10;
  FILE *f = fopen(p, "rb");
  uint8_t *bytes = malloc((size_t)sb.st_size);
  assert_int_equal(fread(bytes, 1, (size_t)sb.st_size, f), (size_t)sb.st_size);
  fclose(f);
  sb.st_size = (off_t)zi.valid_bytes; /* the records alone from here on */
  /* A stray byte in the zeros is a tear, not an end. */
  bytes[zi.valid_bytes + 100] = 7;
  char q0[PATH_MAX + 40];
  snprintf(q0, sizeof q0, "%s/stray.log", dir);
  f = fopen(q0, "wb");
  fwrite(bytes, 1, zi.valid_bytes + 200, f);
  fclose(f);
  table(&z);
  assert_int_equal(rd_journal_read(q0, 1, replay, &z, &zi, NULL), RD_OK);
  rd_table_free(&z);
  assert_int_equal(zi.records, 10);
  assert_true(zi.torn);
  char q[PATH_MAX + 40];
  snprintf(q, sizeof q, "%s/cut.log", dir);
  for (size_t cut = 9 * rec; cut < (size_t)sb.st_size; cut++) {
    rd_journal_read_info_t info = read_bytes(q, bytes, cut);
    assert_int_equal(info.records, 9);
    assert_int_equal(info.valid_bytes, 9 * rec);
    assert_int_equal(info.torn, cut > 9 * rec);
  }
  /* A flipped byte in record 4 (header or payload). */
  for (size_t at = 4 * rec; at < 5 * rec; at += 7) {
    bytes[at] ^= 0x40;
    rd_journal_read_info_t info = read_bytes(q, bytes, (size_t)sb.st_size);
    assert_int_equal(info.records, 4);
    assert_true(info.torn);
    assert_true(info.why[0] != '\0');
    bytes[at] ^= 0x40;
  }
  /* A record missing in the middle (5 follows 3): the reading stops. */
  f = fopen(q, "wb");
  fwrite(bytes, 1, 3 * rec, f);
  fwrite(bytes + 4 * rec, 1, (size_t)sb.st_size - 4 * rec, f);
  fclose(f);
  {
    rd_table_t g;
    table(&g);
    rd_journal_read_info_t gi;
    assert_int_equal(rd_journal_read(q, 1, replay, &g, &gi, NULL), RD_OK);
    assert_int_equal(gi.records, 3);
    assert_true(gi.torn);
    rd_table_free(&g);
  }
  /* The wrong first lsn: nothing read. */
  rd_table_t b;
  table(&b);
  rd_journal_read_info_t info;
  assert_int_equal(rd_journal_read(p, 2, replay, &b, &info, NULL), RD_OK);
  assert_int_equal(info.records, 0);
  assert_non_null(strstr(info.why, "lsn"));
  rd_table_free(&b);
  free(bytes);
  rd_table_free(&a);
}

/* Rotation: records after the cut go to the new segment; lsns run on. */
static void test_rotation(void **state) {
  (void)state;
  rd_table_t a, b;
  rd_journal_t *j = journaled("rotate", &a, 0, 1, 0);
  table(&b);
  for (int i = 0; i < 5; i++) insert(&a, 4, 1);
  assert_int_equal(rd_journal_rotate(j, 3), 5);
  for (int i = 0; i < 4; i++) insert(&a, 2, 0);
  update(&a, 1);
  assert_int_equal(rd_journal_sync(j, 10, NULL), RD_OK);
  assert_int_equal(rd_journal_rotate(j, 9), 10); /* an empty segment 9 is made */
  assert_int_equal(rd_journal_sync(j, 10, NULL), RD_OK);
  rd_journal_close(j);
  rd_journal_read_info_t info;
  read_seg(0, 1, &b, &info);
  assert_int_equal(info.records, 5);
  read_seg(3, 6, &b, &info);
  assert_int_equal(info.records, 5);
  char p[PATH_MAX + 40];
  rd_journal_path(p, sizeof p, dir, 9);
  assert_int_equal(access(p, F_OK), 0);
  assert_same_table(&a, &b);
  rd_table_free(&a);
  rd_table_free(&b);
}

static int count_rec(void *arg, const rd_journal_record_t *r, rd_error_t *err) {
  (void)arg;
  (void)err;
  assert_int_equal(r->type, RD_JOURNAL_REC_INSERT);
  return RD_OK;
}

/* A device that is full: the waiter hears RD_ESTORE, admits refuse with
 * the reason until a checkpoint after the failure is durable. */
static void test_write_failure(void **state) {
  (void)state;
  fresh_dir("full");
  if (access("/dev/full", W_OK) != 0) skip();
  char p[PATH_MAX + 40];
  rd_journal_path(p, sizeof p, dir, 7);
  assert_int_equal(symlink("/dev/full", p), 0);
  rd_table_t a;
  table(&a);
  rd_journal_t *j = open_j(7, 100, 0);
  rd_table_observer_t o = rd_journal_observer(j);
  rd_table_set_observer(&a, &o);
  rd_error_t e;
  assert_int_equal(rd_journal_admit(j, 100, &e), RD_OK);
  insert(&a, 3, 1);
  assert_int_equal(rd_journal_last_lsn(j), 100);
  rd_error_clear(&e);
  assert_int_equal(rd_journal_sync(j, 100, &e), RD_ESTORE);
  assert_non_null(strstr(e.msg, "No space left"));
  assert_int_equal(rd_journal_admit(j, 100, &e), RD_ESTORE);
  assert_non_null(strstr(e.msg, "refused until a checkpoint"));
  rd_journal_waiter_t w;
  assert_true(rd_journal_when_durable(j, 100, &w, count_cb, NULL, &e) < 0);
  /* A checkpoint (gen 8) cuts after record 100, and is durable: records
   * from now on go to segment 8, which works. */
  assert_int_equal(rd_journal_rotate(j, 8), 100);
  rd_journal_checkpointed(j, 8, 100);
  assert_int_equal(rd_journal_admit(j, 100, &e), RD_OK);
  insert(&a, 2, 1);
  assert_int_equal(rd_journal_sync(j, 101, &e), RD_OK);
  rd_journal_stats_t st;
  rd_journal_stats(j, &st);
  assert_false(st.failed);
  rd_journal_close(j);
  rd_journal_read_info_t info;
  rd_journal_path(p, sizeof p, dir, 8);
  assert_int_equal(rd_journal_read(p, 101, count_rec, NULL, &info, &e), RD_OK);
  assert_int_equal(info.records, 1);
  assert_false(info.torn);
  rd_table_free(&a);
}

/* Whether the file system of dir states a direct-I/O alignment (the
 * journal then writes with O_DIRECT). */
static int fs_has_dio(void) {
#ifdef STATX_DIOALIGN
  char p[PATH_MAX + 8];
  snprintf(p, sizeof p, "%s/probe", dir);
  int fd = open(p, O_RDWR | O_CREAT, 0600); /* regular files state it, directories not */
  assert_true(fd >= 0);
  struct statx sx;
  int has = statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
            (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align > 0;
  close(fd);
  unlink(p);
  return has;
#else
  return 0;
#endif
}

static int any_rec(void *arg, const rd_journal_record_t *r, rd_error_t *err) {
  (void)arg;
  (void)r;
  (void)err;
  return RD_OK;
}

/* Rounds of odd sizes, each synced, a reopen at the records' unaligned end
 * (as a restore leaves it), more rounds: every record reads back, and the
 * table it replays to is the one written. Both ways of writing. */
static void direct_or_buffered(int buffered) {
  rd_table_t a;
  fresh_dir(buffered ? "buffered" : "direct");
  table(&a);
  const int expect_direct = !buffered && fs_has_dio();
  uint64_t lsn = 1;
  for (int open = 0; open < 3; open++) {
    rd_journal_t *j = open_io(0, lsn, 0, buffered);
    rd_table_observer_t o = rd_journal_observer(j);
    rd_table_set_observer(&a, &o);
    rd_error_t e;
    for (int i = 0; i < 25; i++) {
      insert(&a, 1 + (size_t)(i * 7 + open) % 23, i % 2);
      if (i % 4 == 1) update(&a, (uint64_t)i);
      if (i % 3 == 0) assert_int_equal(rd_journal_sync(j, rd_journal_last_lsn(j), &e), RD_OK);
    }
    assert_int_equal(rd_journal_sync(j, rd_journal_last_lsn(j), &e), RD_OK);
    rd_journal_stats_t st;
    rd_journal_stats(j, &st);
    assert_int_equal(st.direct, expect_direct);
    lsn = rd_journal_last_lsn(j) + 1;
    rd_table_set_observer(&a, NULL);
    rd_journal_close(j);
    /* What a restore does: the space kept ahead cut off at the records' end. */
    char p[PATH_MAX + 40];
    rd_journal_path(p, sizeof p, dir, 0);
    rd_journal_read_info_t info;
    assert_int_equal(rd_journal_read(p, 1, any_rec, NULL, &info, &e), RD_OK);
    assert_int_equal(info.last_lsn, lsn - 1);
    assert_false(info.torn);
    assert_int_equal(truncate(p, (off_t)info.valid_bytes), 0);
  }
  replays_to(&a, lsn - 1);
}

/* Journals that share a pending counter (the server's) bound their sum:
 * with records of one waiting out a long group-commit window, another is
 * refused; alone it would not be; once they are written, both admit. */
static void test_shared_pending(void **state) {
  (void)state;
  rd_table_t a;
  fresh_dir("shared");
  table(&a);
  _Atomic uint64_t shared = 0;
  rd_journal_config_t c = {.commit_us = 1000000, .max_pending = 4096, .shared_pending = &shared};
  rd_journal_t *ja = NULL, *jb = NULL, *jalone = NULL;
  rd_error_t e;
  char sub[PATH_MAX + 8];
  snprintf(sub, sizeof sub, "%s/b", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(rd_journal_open(&ja, dir, 0, 1, &c, &e), RD_OK);
  assert_int_equal(rd_journal_open(&jb, sub, 0, 1, &c, &e), RD_OK);
  rd_table_observer_t o = rd_journal_observer(ja);
  rd_table_set_observer(&a, &o);
  for (int i = 0; i < 6; i++) insert(&a, 64, 1); /* about 6 x 900 bytes, waiting */
  assert_true(atomic_load(&shared) > 4096);
  assert_int_equal(rd_journal_admit(jb, 100, &e), RD_ETOOBIG);
  if (strstr(e.msg, "all workloads") == NULL) fail_msg("%s", e.msg);
  /* The control: the same journal without the shared counter admits. */
  rd_journal_config_t alone = c;
  alone.shared_pending = NULL;
  snprintf(sub, sizeof sub, "%s/alone", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(rd_journal_open(&jalone, sub, 0, 1, &alone, &e), RD_OK);
  assert_int_equal(rd_journal_admit(jalone, 100, &e), RD_OK);
  assert_int_equal(rd_journal_sync(ja, rd_journal_last_lsn(ja), &e), RD_OK);
  assert_int_equal(atomic_load(&shared), 0);
  assert_int_equal(rd_journal_admit(jb, 100, &e), RD_OK);
  rd_table_set_observer(&a, NULL);
  rd_journal_close(ja);
  rd_journal_close(jb);
  rd_journal_close(jalone);
  rd_table_free(&a);
}

static void test_direct_io(void **state) {
  (void)state;
  direct_or_buffered(0);
  if (!fs_has_dio()) print_message("no direct-I/O alignment on %s: written buffered\n", dir);
}

static void test_buffered_io(void **state) {
  (void)state;
  direct_or_buffered(1);
}

/* Closing answers whoever still waits. */
static void test_close_answers(void **state) {
  (void)state;
  rd_table_t a;
  rd_journal_t *j = journaled("close", &a, 0, 1, 200000); /* still pending at close */
  insert(&a, 1, 1);
  count_t c = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
  rd_journal_waiter_t w;
  rd_error_t e;
  assert_int_equal(rd_journal_when_durable(j, 1, &w, count_cb, &c, &e), 0);
  rd_journal_close(j); /* commits what was appended first */
  assert_int_equal(c.calls, 1);
  assert_int_equal(c.bad, 0);
  rd_table_free(&a);
}

/* Threads append under a shared lock and wait for their records; one
 * fails when a wait does. */
typedef struct {
  rd_table_t *t;
  rd_journal_t *j;
  pthread_mutex_t mu;
} appenders_t;

static int appender(void *ctx, int unused) {
  (void)unused;
  appenders_t *ap = ctx;
  int bad = 0;
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock(&ap->mu);
    insert(ap->t, 2, i % 2);
    uint64_t lsn = rd_journal_last_lsn(ap->j);
    pthread_mutex_unlock(&ap->mu);
    if (rd_journal_sync(ap->j, lsn, NULL) != RD_OK) bad++;
  }
  return bad;
}

static void test_threads(void **state) {
  (void)state;
  rd_table_t a;
  rd_journal_t *j = journaled("threads", &a, 0, 1, 100);
  appenders_t ap = {&a, j, PTHREAD_MUTEX_INITIALIZER};
  assert_int_equal(rdt_th_run(4, appender, &ap), 0);
  rd_journal_stats_t st;
  rd_journal_stats(j, &st);
  assert_int_equal(st.records, 800);
  assert_true(st.commits < 800);
  rd_journal_close(j);
  replays_to(&a, 800);
}

RDT_MAIN(rdt_root_setup, rdt_root_teardown,
         cmocka_unit_test(test_replay_equals), cmocka_unit_test(test_group_commit),
         cmocka_unit_test(test_torn_and_damaged), cmocka_unit_test(test_rotation),
         cmocka_unit_test(test_write_failure), cmocka_unit_test(test_close_answers),
         cmocka_unit_test(test_threads), cmocka_unit_test(test_direct_io),
         cmocka_unit_test(test_shared_pending),
         cmocka_unit_test(test_buffered_io))
