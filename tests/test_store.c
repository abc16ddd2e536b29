/* test_store.c - the SQLite state store (workloads, profiles and their
 * JSON-lines import/export, migrations) and the admin token file. */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profile_jsonl.h"
#include "secrets.h"
#include "store.h"
#include "rdt_dir.h"
#include "rdt_dse.h"
#include "rdt_th_group.h"
#include "rdt_unit.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* Modes are checked: a known umask. */
static int store_setup(void **state) {
  umask(022);
  return rdt_root_setup(state);
}

static unsigned mode_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (unsigned)(st.st_mode & 0777);
}

/* A new scratch directory (rdt_fresh), made. */
static const char *made_dir(const char *name) {
  const char *dir = rdt_fresh(name);
  assert_int_equal(mkdir(dir, 0700), 0);
  return dir;
}

static rd_store_t *open_ok(const char *dir) {
  rd_store_t *s = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_open(&s, dir, &err);
  if (rc) fail_msg("rd_store_open(%s): %s %s", dir, rd_err_name(rc), err.msg);
  assert_non_null(s);
  return s;
}

static rd_stored_workload_t make(const char *id, const char *token, int64_t created,
                                 const char *spec) {
  rd_stored_workload_t w;
  memset(&w, 0, sizeof w);
  snprintf(w.id, sizeof w.id, "%s", id);
  snprintf(w.token, sizeof w.token, "%s", token);
  w.created_unix = created;
  w.spec = (uint8_t *)(uintptr_t)spec;
  w.spec_len = spec ? strlen(spec) : 0;
  return w;
}

static void put_ok(rd_store_t *s, const char *id, const char *token, int64_t created,
                   const char *spec) {
  rd_stored_workload_t w = make(id, token, created, spec);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_put_workload(s, &w, &err);
  if (rc) fail_msg("put %s: %s", id, err.msg);
}

/* The stored ids in order, joined with ',', are want. */
static void assert_ids(rd_store_t *s, const char *want) {
  char out[512];
  size_t cap = sizeof out;
  rd_stored_workload_t *v;
  size_t n;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_list_workloads(s, &v, &n, &err);
  if (rc) fail_msg("list: %s", err.msg);
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    strncat(out, v[i].id, cap - strlen(out) - 1);
    if (i + 1 < n) strncat(out, ",", cap - strlen(out) - 1);
  }
  rd_store_free_workloads(v, n);
  assert_string_equal(out, want);
}

/* Run one SQL statement on a separate connection; returns the first
 * column of the first row as an int (or -1). */
static int side_sql_int(const char *db_path, const char *sql) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
  sqlite3_stmt *st;
  int v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

/* Runs an SQL script on a separate connection: a database as an older
 * replayd (or someone else) left it. */
static void side_sql_exec(const char *db_path, const char *sql) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
}

/* A new state directory `name` whose replayd.db (its path in db) the SQL
 * script made, as an older replayd left it. */
static const char *old_db(const char *name, const char *sql, char db[200]) {
  const char *dir = made_dir(name);
  snprintf(db, 200, "%s/replayd.db", dir);
  side_sql_exec(db, sql);
  return dir;
}

static void write_text(const char *path, const char *content, mode_t mode) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
  assert_int_equal(chmod(path, mode), 0);
}

/* ------------------------------------------------------------------ */
/* Store                                                               */
/* ------------------------------------------------------------------ */

static void test_open_creates_private_files(void **state) {
  (void)state;
  const char *top = rdt_fresh("open");
  char dir[192], db[256];
  snprintf(dir, sizeof dir, "%s/a/b", top);
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  rd_store_t *s = open_ok(dir);
  assert_int_equal(rd_store_schema_version(s), RD_STORE_SCHEMA_VERSION);
  /* Every directory it made is 0700 and the database 0600, whatever the umask. */
  assert_int_equal(mode_of(top), 0700);
  char mid[200];
  snprintf(mid, sizeof mid, "%s/a", top);
  assert_int_equal(mode_of(mid), 0700);
  assert_int_equal(mode_of(dir), 0700);
  assert_int_equal(mode_of(db), 0600);
  put_ok(s, "w1", "t1", 1, "spec");
  char wal[270];
  snprintf(wal, sizeof wal, "%s-wal", db);
  assert_int_equal(mode_of(wal), 0600); /* WAL mode, and the -wal file is private too */
  rd_store_close(s);
  assert_int_equal(side_sql_int(db, "PRAGMA user_version"), RD_STORE_SCHEMA_VERSION);
  assert_int_equal(side_sql_int(db, "SELECT count(*) FROM workloads"), 1);

  /* An existing directory keeps the mode its owner chose. */
  const char *own = rdt_fresh("own");
  assert_int_equal(mkdir(own, 0755), 0);
  s = open_ok(own);
  rd_store_close(s);
  assert_int_equal(mode_of(own), 0755);
  rd_store_close(NULL); /* allowed */
}

static void test_put_list_delete(void **state) {
  (void)state;
  rd_store_t *s = open_ok(rdt_fresh("pld"));
  assert_ids(s, "");

  /* Creation order, not id order. */
  put_ok(s, "zz", "tok-z", 100, "spec-z");
  put_ok(s, "aa", "tok-a", 200, NULL); /* an empty spec (all defaults) is a valid spec */
  put_ok(s, "mm", "tok-m", 300, "spec\x01m");
  assert_ids(s, "zz,aa,mm");

  rd_stored_workload_t *v;
  size_t n;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_list_workloads(s, &v, &n, &err), RD_OK);
  assert_int_equal(n, 3);
  assert_string_equal(v[0].token, "tok-z");
  assert_int_equal(v[0].created_unix, 100);
  assert_int_equal(v[0].spec_len, 6);
  assert_memory_equal(v[0].spec, "spec-z", 6);
  assert_int_equal(v[1].spec_len, 0);
  assert_non_null(v[1].spec);
  assert_int_equal(v[2].created_unix, 300);
  assert_memory_equal(v[2].spec, "spec\x01m", 6);
  rd_store_free_workloads(v, n);

  /* A duplicate id is refused and changes nothing. */
  rd_stored_workload_t dup = make("aa", "other", 5, "x");
  assert_int_equal(rd_store_put_workload(s, &dup, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "workload aa is already stored"));
  assert_ids(s, "zz,aa,mm");

  assert_int_equal(rd_store_delete_workload(s, "aa", &err), RD_OK);
  assert_ids(s, "zz,mm");
  assert_int_equal(rd_store_delete_workload(s, "aa", &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "aa"));
  assert_int_equal(rd_store_delete_workload(s, "", &err), RD_EINVAL);
  assert_int_equal(rd_store_delete_workload(s, NULL, &err), RD_EINVAL);

  /* After a delete, new workloads still come last. */
  put_ok(s, "bb", "tok-b", 400, "b");
  assert_ids(s, "zz,mm,bb");
  rd_store_close(s);
}

static void test_put_rejects_bad_input(void **state) {
  (void)state;
  rd_store_t *s = open_ok(rdt_fresh("bad"));
  rd_error_t err;
  rd_stored_workload_t w = make("", "tok", 1, "s");
  assert_int_equal(rd_store_put_workload(s, &w, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "id"));
  w = make("id", "", 1, "s");
  assert_int_equal(rd_store_put_workload(s, &w, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "token"));
  w = make("id", "tok", 1, "s");
  memset(w.id, 'x', sizeof w.id); /* not terminated */
  assert_int_equal(rd_store_put_workload(s, &w, &err), RD_EINVAL);
  w = make("id", "tok", 1, NULL);
  w.spec_len = 5; /* length without bytes */
  assert_int_equal(rd_store_put_workload(s, &w, &err), RD_EINVAL);
  assert_ids(s, "");
  rd_store_close(s);
}

static void test_reopen_persists(void **state) {
  (void)state;
  const char *dir = rdt_fresh("reopen");
  rd_store_t *s = open_ok(dir);
  put_ok(s, "first", "t1", 1700000000, "one");
  put_ok(s, "second", "t2", -5, "two");
  put_ok(s, "third", "t3", 1700000002, "three");
  rd_error_t err;
  assert_int_equal(rd_store_delete_workload(s, "second", &err), RD_OK);
  rd_store_close(s);

  s = open_ok(dir);
  assert_int_equal(rd_store_schema_version(s), RD_STORE_SCHEMA_VERSION);
  rd_stored_workload_t *v;
  size_t n;
  assert_int_equal(rd_store_list_workloads(s, &v, &n, &err), RD_OK);
  assert_int_equal(n, 2);
  assert_string_equal(v[0].id, "first");
  assert_string_equal(v[0].token, "t1");
  assert_int_equal(v[0].created_unix, 1700000000);
  assert_memory_equal(v[0].spec, "one", 3);
  assert_string_equal(v[1].id, "third");
  assert_int_equal(v[1].spec_len, 5);
  rd_store_free_workloads(v, n);
  put_ok(s, "fourth", "t4", 4, "four");
  assert_ids(s, "first,third,fourth");
  rd_store_close(s);
}

static void test_migrates_version_zero(void **state) {
  (void)state;
  /* A database that exists but predates every migration (user_version 0)
   * is migrated in place; what else it holds is kept. */
  char db[200];
  const char *dir = old_db("v0", "CREATE TABLE notes(x); INSERT INTO notes VALUES (7);", db);
  rd_store_t *s = open_ok(dir);
  assert_int_equal(rd_store_schema_version(s), RD_STORE_SCHEMA_VERSION);
  put_ok(s, "w", "t", 1, "s");
  rd_store_close(s);
  assert_int_equal(side_sql_int(db, "PRAGMA user_version"), RD_STORE_SCHEMA_VERSION);
  assert_int_equal(side_sql_int(db, "SELECT x FROM notes"), 7);
}

static void test_refuses_newer_schema(void **state) {
  (void)state;
  const char *dir = rdt_fresh("v99");
  rd_store_t *s = open_ok(dir);
  put_ok(s, "keep", "t", 1, "s");
  rd_store_close(s);
  char db[200];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  side_sql_exec(db, "PRAGMA user_version = 99");

  rd_error_t err;
  rd_error_clear(&err);
  s = (rd_store_t *)&err; /* must be reset to NULL on failure */
  assert_int_equal(rd_store_open(&s, dir, &err), RD_ESTORE);
  assert_null(s);
  assert_non_null(strstr(err.msg, "schema version 99 is newer"));
  assert_non_null(strstr(err.msg, db));
  /* Nothing was changed. */
  assert_int_equal(side_sql_int(db, "PRAGMA user_version"), 99);
  assert_int_equal(side_sql_int(db, "SELECT count(*) FROM workloads"), 1);
}

static void test_corrupt_database(void **state) {
  (void)state;
  const char *dir = made_dir("corrupt");
  char db[200];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  char junk[4096];
  memset(junk, 'J', sizeof junk);
  junk[sizeof junk - 1] = '\0';
  write_text(db, junk, 0600);
  rd_store_t *s;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_open(&s, dir, &err), RD_ESTORE);
  assert_null(s);
  assert_non_null(strstr(err.msg, "not a database"));
  assert_non_null(strstr(err.msg, db));
}

static void test_unwritable_state_dir(void **state) {
  (void)state;
  rd_store_t *s;
  rd_error_t err;
  /* A path through a regular file: fails for every user, rdt_root included. */
  const char *file = rdt_fresh("plainfile");
  write_text(file, "x", 0600);
  char dir[200];
  snprintf(dir, sizeof dir, "%s/sub", file);
  rd_error_clear(&err);
  assert_int_equal(rd_store_open(&s, dir, &err), RD_ESTORE);
  assert_null(s);
  assert_non_null(strstr(err.msg, "cannot create directory"));
  assert_non_null(strstr(err.msg, "Not a directory"));
  /* The state dir itself is a file. */
  assert_int_equal(rd_store_open(&s, file, &err), RD_ESTORE);
  assert_non_null(strstr(err.msg, "is not a directory"));
  char token[65];
  assert_int_equal(rd_store_admin_token(dir, token, sizeof token, &err), RD_ESTORE);
  assert_int_equal(rd_store_open(&s, "", &err), RD_EINVAL);

  /* Permission bits do not stop rdt_root, so only check them for others. */
  if (geteuid() != 0) {
    const char *ro = rdt_fresh("readonly");
    assert_int_equal(mkdir(ro, 0500), 0);
    snprintf(dir, sizeof dir, "%s/state", ro);
    assert_int_equal(rd_store_open(&s, dir, &err), RD_ESTORE);
    assert_non_null(strstr(err.msg, "Permission denied"));
    assert_int_equal(rd_store_open(&s, ro, &err), RD_ESTORE);
    assert_non_null(strstr(err.msg, "Permission denied"));
  }
}

/* ------------------------------------------------------------------ */
/* The state directory's lock and the check at open                    */
/* ------------------------------------------------------------------ */

static void read_file(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t got = fread(out, 1, cap - 1, f);
  out[got] = '\0';
  fclose(f);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* A second open of a held directory is refused, naming the holder's pid;
 * the lock file is private and holds the pid while the store is open. */
static void test_lock_second_open_refused(void **state) {
  (void)state;
  const char *dir = rdt_fresh("lock");
  rd_store_t *a = open_ok(dir);
  char lock[200], content[64], want[300];
  snprintf(lock, sizeof lock, "%s/replayd.lock", dir);
  assert_int_equal(mode_of(lock), 0600);
  read_file(lock, content, sizeof content);
  char pid_line[32];
  snprintf(pid_line, sizeof pid_line, "%ld\n", (long)getpid());
  assert_string_equal(content, pid_line);

  rd_store_t *b = (rd_store_t *)&content; /* must be reset to NULL */
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_open(&b, dir, &err), RD_EBUSY);
  assert_null(b);
  snprintf(want, sizeof want, "state directory %s is in use by replayd pid %ld", dir,
           (long)getpid());
  if (strstr(err.msg, want) == NULL) fail_msg("\"%s\" lacks \"%s\"", err.msg, want);
  put_ok(a, "still", "mine", 1, "s"); /* the holder is unaffected */

  /* Closing releases it (and forgets the pid); the file stays. */
  rd_store_close(a);
  read_file(lock, content, sizeof content);
  assert_string_equal(content, "");
  b = open_ok(dir);
  assert_ids(b, "still");
  rd_store_close(b);
}

/* The lock is taken before the database is touched: with the directory
 * held, open creates no database file. */
static void test_lock_before_database(void **state) {
  (void)state;
  const char *dir = made_dir("lock-first");
  char lock[200];
  snprintf(lock, sizeof lock, "%s/replayd.lock", dir);
  const char *db = rdt_path(dir, "replayd.db"); /* used before the next rdt_path call */
  int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
  assert_int_equal(write(fd, "4242\n", 5), 5);
  rd_store_t *s;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_open(&s, dir, &err), RD_EBUSY);
  assert_non_null(strstr(err.msg, "in use by replayd pid 4242"));
  assert_false(exists(db));
  /* A holder that has not written its pid (yet) is still a holder. */
  assert_int_equal(ftruncate(fd, 0), 0);
  assert_int_equal(rd_store_open(&s, dir, &err), RD_EBUSY);
  assert_non_null(strstr(err.msg, "in use by another replayd"));
  assert_false(exists(db));
  close(fd);
  s = open_ok(dir);
  rd_store_close(s);
  assert_true(exists(db));

  /* Something other than a file in the lock's place. */
  const char *odd = made_dir("lock-dir");
  snprintf(lock, sizeof lock, "%s/replayd.lock", odd);
  assert_int_equal(mkdir(lock, 0700), 0);
  assert_int_equal(rd_store_open(&s, odd, &err), RD_ESTORE);
  assert_non_null(strstr(err.msg, lock));
}

/* Another process holds the directory: refused with its pid; once it is
 * killed (SIGKILL, no clean-up), the kernel has released the lock and the
 * stale file with its pid does not stop the next open. */
static void test_lock_released_on_kill(void **state) {
  (void)state;
  const char *dir = rdt_fresh("lock-kill");
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    rd_store_t *s = NULL;
    char ok = rd_store_open(&s, dir, NULL) == RD_OK ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    alarm(60); /* never outlives a failed test */
    for (;;) pause();
  }
  char ok = 0;
  ssize_t got = read(ready[0], &ok, 1);
  rd_store_t *s = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_open(&s, dir, &err);
  /* The child goes before any assertion can end the test. */
  assert_int_equal(kill(child, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(got, 1);
  assert_int_equal(ok, 'y');
  rd_store_close(s);
  assert_int_equal(rc, RD_EBUSY);
  char want[64];
  snprintf(want, sizeof want, "in use by replayd pid %ld;", (long)child);
  if (strstr(err.msg, want) == NULL) fail_msg("\"%s\" lacks \"%s\"", err.msg, want);
  close(ready[0]);
  close(ready[1]);
  s = open_ok(dir);
  rd_store_close(s);
}

/* A program started while the store is open does not inherit the lock
 * (O_CLOEXEC): once the store is closed, the directory opens again even
 * though that program still runs. */
static void test_lock_not_inherited(void **state) {
  (void)state;
  const char *dir = rdt_fresh("lock-exec");
  rd_store_t *s = open_ok(dir);
  pid_t child;
  char *argv[] = {"sleep", "30", NULL};
  extern char **environ;
  assert_int_equal(posix_spawn(&child, "/bin/sleep", NULL, NULL, argv, environ), 0);
  rd_store_close(s);
  rd_store_t *again = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_open(&again, dir, &err);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  if (rc) fail_msg("reopen while a spawned program runs: %s", err.msg);
  rd_store_close(again);
}

/* Overwrite every page after the first of dir/replayd.db with garbage:
 * the 100-byte header and the schema (page 1) stay intact, so SQLite opens
 * the file and only reads that reach the b-trees fail. */
static void damage_pages(const char *db) {
  FILE *f = fopen(db, "r+b");
  assert_non_null(f);
  unsigned char hdr[100];
  assert_int_equal(fread(hdr, 1, sizeof hdr, f), sizeof hdr);
  long page = (hdr[16] << 8) | hdr[17];
  if (page == 1) page = 65536;
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  assert_true(size >= 2 * page);
  assert_int_equal(fseek(f, page, SEEK_SET), 0);
  for (long off = page; off < size; off++) fputc((int)((off * 37 + 11) & 0xff), f);
  assert_int_equal(fclose(f), 0);
}

static void test_damaged_database_refused(void **state) {
  (void)state;
  const char *dir = rdt_fresh("damaged");
  rd_store_t *s = open_ok(dir);
  put_ok(s, "w1", "t1", 1, "spec one");
  put_ok(s, "w2", "t2", 2, "spec two");
  rd_store_close(s); /* checkpoints the WAL into the file */
  char db[200], wal[210];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  snprintf(wal, sizeof wal, "%s-wal", db);
  assert_false(exists(wal));
  damage_pages(db);
  /* The header still reads: the schema version is there. */
  assert_int_equal(side_sql_int(db, "PRAGMA user_version"), RD_STORE_SCHEMA_VERSION);

  struct stat before, after;
  assert_int_equal(stat(db, &before), 0);
  rd_error_t err;
  rd_error_clear(&err);
  s = (rd_store_t *)&err;
  assert_int_equal(rd_store_open(&s, dir, &err), RD_ESTORE);
  assert_null(s);
  assert_non_null(strstr(err.msg, db));
  assert_non_null(strstr(err.msg, "is damaged: move it and its -wal and -shm files aside"));
  assert_non_null(strstr(err.msg, "quick_check: Page ")); /* the first problem */
  assert_null(strstr(err.msg, "*** in database")); /* the problems, not SQLite's heading */
  assert_null(strchr(err.msg, '\n'));
  /* Left as it was, for the operator. */
  assert_int_equal(stat(db, &after), 0);
  assert_int_equal(after.st_size, before.st_size);
  assert_int_equal(after.st_mtime, before.st_mtime);
  /* The refused open let go of the directory. */
  char lock[200], content[32];
  snprintf(lock, sizeof lock, "%s/replayd.lock", dir);
  int fd = open(lock, O_RDWR | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
  close(fd);
  read_file(lock, content, sizeof content);
  assert_string_equal(content, "");
}

/* Thread base of store s puts 25 workloads, t<base>-0 to -24. */
static int put_many(void *s, int base) {
  for (int i = 0; i < 25; i++) {
    char id[32];
    snprintf(id, sizeof id, "t%d-%d", base, i);
    rd_stored_workload_t w = make(id, "tok", i, "spec");
    if (rd_store_put_workload(s, &w, NULL) != RD_OK) return 1;
  }
  return 0;
}

static void test_concurrent_puts(void **state) {
  (void)state;
  rd_store_t *s = open_ok(rdt_fresh("threads"));
  assert_int_equal(rdt_th_run(4, put_many, s), 0);
  rd_stored_workload_t *v;
  size_t n;
  rd_error_t err;
  assert_int_equal(rd_store_list_workloads(s, &v, &n, &err), RD_OK);
  assert_int_equal(n, 100);
  rd_store_free_workloads(v, n);
  rd_store_close(s);
}

/* ------------------------------------------------------------------ */
/* Admin token                                                         */
/* ------------------------------------------------------------------ */

static int is_token(const char *t) {
  if (strlen(t) != 64) return 0;
  for (int i = 0; i < 64; i++)
    if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f'))) return 0;
  return 1;
}

static void test_admin_token_create_and_reuse(void **state) {
  (void)state;
  const char *dir = rdt_fresh("tok");
  char a[65], b[65], c[65];
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_admin_token(dir, a, sizeof a, &err);
  if (rc) fail_msg("%s", err.msg);
  assert_true(is_token(a));
  char path[200];
  snprintf(path, sizeof path, "%s/admin.token", dir);
  assert_int_equal(mode_of(path), 0600);
  assert_int_equal(mode_of(dir), 0700);
  FILE *f = fopen(path, "r");
  char content[80] = {0};
  assert_non_null(f);
  assert_int_equal(fread(content, 1, sizeof content - 1, f), 65);
  fclose(f);
  assert_memory_equal(content, a, 64);
  assert_int_equal(content[64], '\n');

  assert_int_equal(rd_store_admin_token(dir, b, sizeof b, &err), RD_OK);
  assert_string_equal(a, b); /* reused, not regenerated */
  assert_int_equal(rd_store_admin_token(rdt_fresh("tok2"), c, sizeof c, &err), RD_OK);
  assert_string_not_equal(a, c); /* random per state directory */

  /* A token written by an operator without the newline is fine too. */
  const char *own = made_dir("tok3");
  snprintf(path, sizeof path, "%s/admin.token", own);
  write_text(path, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 0600);
  assert_int_equal(rd_store_admin_token(own, c, sizeof c, &err), RD_OK);
  assert_string_equal(c, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");

  /* A buffer that cannot hold 64 digits + NUL is refused. */
  assert_int_equal(rd_store_admin_token(dir, c, 64, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "65 bytes"));
}

static void test_admin_token_bad_content(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "short\n",
      "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n", /* uppercase */
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0\n", /* 65 digits */
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n\n",
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\n",
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef junk",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[32], path[200], tok[65];
    snprintf(name, sizeof name, "badtok%zu", i);
    const char *dir = rdt_fresh(name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/admin.token", dir);
    write_text(path, bad[i], 0600);
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_store_admin_token(dir, tok, sizeof tok, &err);
    if (rc != RD_ESTORE || strstr(err.msg, "does not hold a token") == NULL)
      fail_msg("content %zu: %s %s", i, rd_err_name(rc), err.msg);
    assert_non_null(strstr(err.msg, path));
    /* The bad file is left for the operator, not replaced. */
    FILE *f = fopen(path, "r");
    char back[128] = {0};
    assert_non_null(f);
    size_t got = fread(back, 1, sizeof back - 1, f);
    fclose(f);
    assert_int_equal(got, strlen(bad[i]));
    assert_string_equal(back, bad[i]);
  }
}

static void test_admin_token_permissions(void **state) {
  (void)state;
  const char *good = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";
  const char *dir = made_dir("perm");
  char path[200], tok[65];
  snprintf(path, sizeof path, "%s/admin.token", dir);
  write_text(path, good, 0644);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_store_admin_token(dir, tok, sizeof tok, &err), RD_ESTORE);
  assert_non_null(strstr(err.msg, "mode 644"));
  assert_non_null(strstr(err.msg, "chmod 600"));
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(rd_store_admin_token(dir, tok, sizeof tok, &err), RD_OK);

  /* A symlink is not followed (someone could point it at another secret). */
  const char *dir2 = made_dir("perm-link");
  char link_path[200];
  snprintf(link_path, sizeof link_path, "%s/admin.token", dir2);
  assert_int_equal(symlink(path, link_path), 0);
  assert_int_equal(rd_store_admin_token(dir2, tok, sizeof tok, &err), RD_ESTORE);
  assert_non_null(strstr(err.msg, link_path));

  /* A directory in its place. */
  const char *dir3 = made_dir("perm-dir");
  snprintf(path, sizeof path, "%s/admin.token", dir3);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(rd_store_admin_token(dir3, tok, sizeof tok, &err), RD_ESTORE);
  assert_non_null(strstr(err.msg, "not a regular file"));
}

enum { TOKEN_RACERS = 8 };

/* What each creator of a token in dir got. */
typedef struct {
  const char *dir;
  char tok[TOKEN_RACERS][65];
  int rc[TOKEN_RACERS];
} tok_race_t;

static int get_token(void *ctx, int i) {
  tok_race_t *r = ctx;
  r->rc[i] = rd_store_admin_token(r->dir, r->tok[i], sizeof r->tok[i], NULL);
  return 0;
}

static void test_admin_token_race(void **state) {
  (void)state;
  /* Several creators at once: exactly one token wins, everyone sees it,
   * and no temporary file is left behind. */
  for (int round = 0; round < 5; round++) {
    char name[32];
    snprintf(name, sizeof name, "race%d", round);
    const char *dir = rdt_fresh(name);
    tok_race_t race = {.dir = dir};
    for (int i = 0; i < TOKEN_RACERS; i++) race.rc[i] = -100;
    assert_int_equal(rdt_th_run(TOKEN_RACERS, get_token, &race), 0);
    for (int i = 0; i < TOKEN_RACERS; i++) {
      assert_int_equal(race.rc[i], RD_OK);
      assert_string_equal(race.tok[i], race.tok[0]);
    }
    DIR *d = opendir(dir);
    assert_non_null(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.') {
        assert_string_equal(e->d_name, "admin.token");
        files++;
      }
    closedir(d);
    assert_int_equal(files, 1);
  }
}

/* ------------------------------------------------------------------ */
/* Profiles                                                            */
/* ------------------------------------------------------------------ */

static rd_profile_t make_profile(const char *fp, rd_primitive_t prim, uint32_t threads,
                                 uint32_t batch, const char *algo, const char *net,
                                 double latency) {
  rd_profile_t p = rdt_profile(fp, prim, threads, batch, algo, net,
                               "0.1.0 abc1234 gcc-12.2.0 release", latency);
  p.items = prim == RD_PRIM_TRAIN ? 0 : 100000;
  p.source = RD_PROFILE_MEASURED;
  return p;
}

#define FP_A "cpu-00112233445566aa"
#define FP_B "gpu-00112233445566bb"

/* Nine profiles: two devices, two shapes, three primitives, two thread counts. */
static size_t sample_profiles(rd_profile_t *p) {
  size_t n = 0;
  for (uint32_t t = 1; t <= 2; t++)
    for (int prim = 0; prim < RD_PRIM_GATHER; prim++)
      p[n++] = make_profile(FP_A, (rd_primitive_t)prim, t, 32, "dqn", "dqn:4-64-64-2",
                            1e-6 * (1 + prim) / t);
  p[n++] = make_profile(FP_A, RD_PRIM_SAMPLE, 1, 256, "dqn", "dqn:4-64-64-2", 1.25e-5);
  p[n++] = make_profile(FP_B, RD_PRIM_SAMPLE, 1, 32, "dqn", "dqn:4-64-64-2", 3.5e-6);
  p[n++] = make_profile(FP_A, RD_PRIM_UPDATE, 1, 64, "none", "", 0.1 / 3);
  return n;
}

static int cmp_profile(const rd_profile_t *a, const rd_profile_t *b) {
  return strcmp(a->device_fp, b->device_fp) || a->primitive != b->primitive ||
         a->threads != b->threads || !rd_profile_key_equal(&a->shape, &b->shape) ||
         strcmp(a->build, b->build) || a->latency_s != b->latency_s || a->reps != b->reps ||
         a->items != b->items || a->source != b->source || a->measured_unix != b->measured_unix;
}

/* Whether set holds a profile equal to p (ignoring source if any_source). */
static int holds(const rd_profile_t *set, size_t n, const rd_profile_t *p, int any_source) {
  for (size_t i = 0; i < n; i++) {
    rd_profile_t q = set[i];
    if (any_source) q.source = p->source;
    if (cmp_profile(&q, p) == 0) return 1;
  }
  return 0;
}

static size_t count_profiles(rd_store_t *s) {
  rd_profile_t *v;
  size_t n;
  rd_error_t err;
  if (rd_store_list_profiles(s, &v, &n, &err) != RD_OK) fail_msg("list profiles: %s", err.msg);
  rd_store_free_profiles(v);
  return n;
}

static void put_profiles_ok(rd_store_t *s, const rd_profile_t *p, size_t n) {
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_store_put_profiles(s, p, n, &err) != RD_OK) fail_msg("put profiles: %s", err.msg);
}

static void test_migrates_version_one(void **state) {
  (void)state;
  /* A database made by the previous migration set (version 1: workloads
   * only), with a workload in it, gains the profiles table and keeps the
   * workload. */
  char db[200];
  const char *dir = old_db("v1",
                           "CREATE TABLE workloads ("
                           "  id TEXT PRIMARY KEY,"
                           "  token TEXT NOT NULL,"
                           "  created_unix INTEGER NOT NULL,"
                           "  spec BLOB NOT NULL,"
                           "  seq INTEGER NOT NULL UNIQUE"
                           ");"
                           "INSERT INTO workloads VALUES ('old', 'tok', 42, x'0102', 1);"
                           "PRAGMA user_version = 1;",
                           db);

  rd_store_t *s = open_ok(dir);
  assert_int_equal(rd_store_schema_version(s), RD_STORE_SCHEMA_VERSION);
  assert_ids(s, "old");
  assert_int_equal(count_profiles(s), 0);
  rd_profile_t p = make_profile(FP_A, RD_PRIM_TRAIN, 1, 32, "dqn", "dqn:4-64-64-2", 1.5e-5);
  put_profiles_ok(s, &p, 1);
  put_ok(s, "new", "t", 43, "s");
  assert_ids(s, "old,new");
  rd_store_close(s);
  assert_int_equal(side_sql_int(db, "PRAGMA user_version"), RD_STORE_SCHEMA_VERSION);
  assert_int_equal(side_sql_int(db, "SELECT count(*) FROM profiles"), 1);
}

/* The stored token of workload `id`, read on a side connection. */
static void side_token(const char *db_path, const char *id, char *out, size_t cap) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT token FROM workloads WHERE id = ?1", -1, &st,
                                      NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void test_migrates_clear_tokens_to_hashes(void **state) {
  (void)state;
  /* A version-2 database, as every replayd before token hashing wrote it:
   * tokens in clear. Opening it stores each token's SHA-256 instead, in
   * the form the registry reads back (secrets.h), and changes nothing
   * else; a second open (already version 3) changes nothing. */
  const char *tok_a = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  const char *tok_b = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
  char sql[2048];
  snprintf(sql, sizeof sql,
           "CREATE TABLE workloads (id TEXT PRIMARY KEY, token TEXT NOT NULL,"
           "  created_unix INTEGER NOT NULL, spec BLOB NOT NULL, seq INTEGER NOT NULL UNIQUE);"
           "CREATE TABLE profiles (device_fp TEXT NOT NULL, primitive TEXT NOT NULL,"
           "  threads INTEGER NOT NULL, batch INTEGER NOT NULL, capacity INTEGER NOT NULL,"
           "  fanout INTEGER NOT NULL, algorithm TEXT NOT NULL, network TEXT NOT NULL,"
           "  build TEXT NOT NULL, latency_s REAL NOT NULL, reps INTEGER NOT NULL,"
           "  items INTEGER NOT NULL, source TEXT NOT NULL, measured_unix INTEGER NOT NULL,"
           "  PRIMARY KEY (device_fp, algorithm, network, batch, capacity, fanout, build,"
           "  primitive, threads)) WITHOUT ROWID;"
           "INSERT INTO workloads VALUES ('a', '%s', 42, x'0102', 1);"
           "INSERT INTO workloads VALUES ('b', '%s', 43, x'', 2);"
           "INSERT INTO workloads VALUES ('c', 'short', 44, zeroblob(600), 3);"
           "PRAGMA user_version = 2;",
           tok_a, tok_b);
  char db[200];
  const char *dir = old_db("v2", sql, db);

  for (int pass = 0; pass < 2; pass++) {
    rd_store_t *s = open_ok(dir);
    assert_int_equal(rd_store_schema_version(s), RD_STORE_SCHEMA_VERSION);
    rd_stored_workload_t *v;
    size_t n;
    assert_int_equal(rd_store_list_workloads(s, &v, &n, NULL), RD_OK);
    assert_int_equal(n, 3);
    const char *toks[2] = {tok_a, tok_b};
    for (size_t i = 0; i < 2; i++) {
      uint8_t want[RD_TOKEN_HASH_LEN], got[RD_TOKEN_HASH_LEN];
      rd_token_hash(toks[i], 64, want);
      assert_int_equal(rd_token_hash_parse(v[i].token, got), RD_OK);
      assert_memory_equal(got, want, sizeof want);
      assert_true(rd_token_matches(got, toks[i], 64));
      assert_null(strstr(v[i].token, toks[i]));
    }
    assert_string_equal(v[0].id, "a");
    assert_int_equal(v[0].created_unix, 42);
    assert_int_equal(v[0].spec_len, 2);
    assert_memory_equal(v[0].spec, "\x01\x02", 2);
    assert_int_equal(v[1].spec_len, 0);
    rd_store_free_workloads(v, n);
    rd_store_close(s);
  }
  /* Nothing in the file holds a token any more (the WAL is checkpointed at
   * close). */
  char tok[128];
  side_token(db, "a", tok, sizeof tok);
  assert_int_equal(strncmp(tok, "sha256:", 7), 0);
  FILE *f = fopen(db, "rb");
  assert_non_null(f);
  static char bytes[1 << 16];
  size_t got = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  assert_null(memmem(bytes, got, tok_a, 64));
  assert_null(memmem(bytes, got, tok_b, 64));
}

static void test_token_hash_forms(void **state) {
  (void)state;
  uint8_t h[RD_TOKEN_HASH_LEN], back[RD_TOKEN_HASH_LEN];
  /* SHA-256("abc"), FIPS 180-2's first example. */
  rd_token_hash("abc", 3, h);
  char text[RD_TOKEN_HASH_TEXT_LEN + 1];
  rd_token_hash_format(h, text);
  assert_string_equal(text, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f2"
                            "0015ad");
  assert_int_equal(rd_token_hash_parse(text, back), RD_OK);
  assert_memory_equal(back, h, sizeof h);
  assert_true(rd_token_matches(h, "abc", 3));
  assert_false(rd_token_matches(h, "abd", 3));
  assert_false(rd_token_matches(h, "ab", 2));
  assert_false(rd_token_matches(h, "abcd", 4));
  assert_false(rd_token_matches(h, NULL, 0));
  /* Every byte of the hash counts: one bit off anywhere is a mismatch. */
  for (size_t i = 0; i < sizeof h; i++) {
    h[i] ^= 0x80;
    assert_false(rd_token_matches(h, "abc", 3));
    h[i] ^= 0x80;
  }
  assert_true(rd_token_matches(h, "abc", 3));
  /* Only the exact stored form parses, and a refusal leaves back alone. */
  memset(back, 7, sizeof back);
  const char *bad[] = {"", "sha256:", "sha1:ba7816bf", text + 7, "SHA256:ba7816bf8f01cfea414140de5"
                       "dae2223b00361a396177a9cb410ff61f20015ad",
                       "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
                       "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a",
                       "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015add",
                       "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ag"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(rd_token_hash_parse(bad[i], back), RD_EINVAL);
    for (size_t k = 0; k < sizeof back; k++) assert_int_equal(back[k], 7);
  }
  assert_int_equal(rd_token_hash_parse(NULL, back), RD_EINVAL);
}

static void test_profiles_put_get_list_clear(void **state) {
  (void)state;
  rd_store_t *s = open_ok(rdt_fresh("prof"));
  rd_profile_t p[16];
  size_t n = sample_profiles(p);
  put_profiles_ok(s, p, n);

  /* Get: device + shape + build, every primitive and thread count. */
  rd_profile_t *v;
  size_t k;
  rd_error_t err;
  assert_int_equal(rd_store_get_profiles(s, FP_A, &p[0].shape, p[0].build, &v, &k, &err), RD_OK);
  assert_int_equal(k, 6);
  for (size_t i = 0; i < 6; i++) assert_true(holds(v, k, &p[i], 0));
  rd_store_free_profiles(v);
  /* Another device, shape or build: a miss. */
  assert_int_equal(rd_store_get_profiles(s, FP_B, &p[6].shape, p[0].build, &v, &k, &err), RD_OK);
  assert_int_equal(k, 0); /* FP_B has batch 32 only */
  assert_int_equal(rd_store_get_profiles(s, FP_B, &p[0].shape, p[0].build, &v, &k, &err), RD_OK);
  assert_int_equal(k, 1);
  rd_store_free_profiles(v);
  assert_int_equal(rd_store_get_profiles(s, FP_A, &p[0].shape, "0.2.0 other", &v, &k, &err), RD_OK);
  assert_int_equal(k, 0);
  assert_null(v);
  rd_profile_key_t other = p[0].shape;
  other.capacity = 100001;
  assert_int_equal(rd_store_get_profiles(s, FP_A, &other, p[0].build, &v, &k, &err), RD_OK);
  assert_int_equal(k, 0);
  assert_int_equal(rd_store_get_profiles(s, FP_A, &p[8].shape, p[8].build, &v, &k, &err), RD_OK);
  assert_int_equal(k, 1); /* replay only: algorithm "none" */
  assert_int_equal(v[0].primitive, RD_PRIM_UPDATE);
  rd_store_free_profiles(v);

  /* List: everything, in key order. */
  assert_int_equal(rd_store_list_profiles(s, &v, &k, &err), RD_OK);
  assert_int_equal(k, n);
  for (size_t i = 0; i < n; i++) assert_true(holds(v, k, &p[i], 0));
  assert_string_equal(v[k - 1].device_fp, FP_B);
  rd_store_free_profiles(v);

  /* Upsert: the same key again replaces the row. */
  rd_profile_t again = p[0];
  again.latency_s = 9e-6;
  again.reps = 3;
  put_profiles_ok(s, &again, 1);
  assert_int_equal(count_profiles(s), n);
  assert_int_equal(rd_store_get_profiles(s, FP_A, &p[0].shape, p[0].build, &v, &k, &err), RD_OK);
  assert_true(holds(v, k, &again, 0));
  assert_false(holds(v, k, &p[0], 0));
  rd_store_free_profiles(v);

  size_t removed = 0;
  assert_int_equal(rd_store_clear_profiles(s, &removed, &err), RD_OK);
  assert_int_equal(removed, n);
  assert_int_equal(count_profiles(s), 0);
  assert_int_equal(rd_store_clear_profiles(s, &removed, &err), RD_OK);
  assert_int_equal(removed, 0);
  rd_store_close(s);
}

static void test_profiles_put_rejects_bad(void **state) {
  (void)state;
  rd_store_t *s = open_ok(rdt_fresh("profbad"));
  rd_profile_t good = make_profile(FP_A, RD_PRIM_SAMPLE, 1, 32, "dqn", "dqn:4-64-64-2", 1e-6);
  rd_profile_t bad[13];
  for (int i = 0; i < 13; i++) bad[i] = good;
  snprintf(bad[0].device_fp, sizeof bad[0].device_fp, "cpu-xyz");
  bad[1].latency_s = NAN;
  bad[2].latency_s = 0;
  bad[3].reps = 0;
  bad[4].build[0] = '\0';
  bad[5].shape.fanout = 3;
  snprintf(bad[6].shape.network, sizeof bad[6].shape.network, "dqn:4");
  bad[7].primitive = (rd_primitive_t)9;
  /* Latencies outside [RD_PROFILE_LATENCY_MIN_S, _MAX_S] (profile.h). */
  bad[8].latency_s = 5e-324;
  bad[9].latency_s = 0.99e-9;
  bad[10].latency_s = 3600.5;
  bad[11].latency_s = 1.7e308;
  bad[12].latency_s = INFINITY;
  rd_error_t err;
  for (int i = 0; i < 13; i++) {
    rd_profile_t two[2] = {good, bad[i]};
    /* One bad profile in a batch stores none of it. */
    if (rd_store_put_profiles(s, two, 2, &err) != RD_EINVAL) fail_msg("bad profile %d accepted", i);
    if (i >= 8 && strstr(err.msg, "latency_s") == NULL) fail_msg("bad profile %d: %s", i, err.msg);
  }
  assert_int_equal(count_profiles(s), 0);
  /* The bounds themselves are latencies. */
  rd_profile_t edges[2] = {good, good};
  edges[0].latency_s = RD_PROFILE_LATENCY_MIN_S;
  edges[1].latency_s = RD_PROFILE_LATENCY_MAX_S;
  edges[1].threads = 2;
  put_profiles_ok(s, edges, 2);
  assert_int_equal(count_profiles(s), 2);
  rd_profile_t *v;
  size_t k;
  assert_int_equal(rd_store_get_profiles(s, NULL, &good.shape, good.build, &v, &k, &err),
                   RD_EINVAL);
  rd_store_close(s);
}

static void test_profiles_survive_restart(void **state) {
  (void)state;
  const char *dir = rdt_fresh("profre");
  rd_store_t *s = open_ok(dir);
  rd_profile_t p[16];
  size_t n = sample_profiles(p);
  put_profiles_ok(s, p, n);
  rd_store_close(s);
  s = open_ok(dir);
  rd_profile_t *v;
  size_t k;
  rd_error_t err;
  assert_int_equal(rd_store_list_profiles(s, &v, &k, &err), RD_OK);
  assert_int_equal(k, n);
  for (size_t i = 0; i < n; i++) assert_true(holds(v, k, &p[i], 0));
  rd_store_free_profiles(v);
  rd_store_close(s);
}

/* A stored latency outside the bounds (written behind the store's back,
 * or imported by a build without them) is refused where it is read, as
 * every malformed stored profile: no figure outside them reaches a
 * mapping. */
static void test_profiles_read_rejects_bad_latency(void **state) {
  (void)state;
  const char *dir = rdt_fresh("proflat");
  rd_store_t *s = open_ok(dir);
  rd_profile_t p = make_profile(FP_A, RD_PRIM_TRAIN, 1, 32, "dqn", "dqn:4-64-64-2", 1.5e-5);
  put_profiles_ok(s, &p, 1);
  rd_store_close(s);
  char db[200];
  snprintf(db, sizeof db, "%s/replayd.db", dir);
  static const char *const updates[] = {"UPDATE profiles SET latency_s = 5e-324",
                                        "UPDATE profiles SET latency_s = 1.7e308",
                                        "UPDATE profiles SET latency_s = -1"};
  for (size_t i = 0; i < sizeof updates / sizeof updates[0]; i++) {
    side_sql_int(db, updates[i]);
    s = open_ok(dir);
    rd_profile_t *v = NULL;
    size_t k = 0;
    rd_error_t err;
    rd_error_clear(&err);
    assert_int_equal(rd_store_list_profiles(s, &v, &k, &err), RD_ESTORE);
    if (strstr(err.msg, "latency_s") == NULL) fail_msg("%s: %s", updates[i], err.msg);
    assert_null(v);
    rd_error_clear(&err);
    assert_int_equal(rd_store_get_profiles(s, FP_A, &p.shape, p.build, &v, &k, &err), RD_ESTORE);
    rd_store_close(s);
  }
}

/* Export s into a malloc'd string. (noinline: GCC 12 takes the result of
 * open_memstream's buffer for a pointer to the local and warns.) */
__attribute__((noinline)) static char *export_text(rd_store_t *s, size_t *n) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_store_export_profiles(s, f, n, &err) != RD_OK) fail_msg("export: %s", err.msg);
  fclose(f);
  return buf;
}

static int import_text(rd_store_t *s, const char *text, size_t *n, rd_error_t *err) {
  FILE *f = fmemopen((void *)(uintptr_t)text, strlen(text), "r");
  assert_non_null(f);
  int rc = rd_store_import_profiles(s, f, n, err);
  fclose(f);
  return rc;
}

static void test_profiles_export_import(void **state) {
  (void)state;
  rd_store_t *a = open_ok(rdt_fresh("exp_a"));
  rd_profile_t p[16];
  size_t n = sample_profiles(p);
  p[1].source = RD_PROFILE_IMPORTED; /* exported as it is, imported as imported */
  snprintf(p[2].build, sizeof p[2].build, "0.1.0 \"quoted\" \\ build");
  put_profiles_ok(a, p, n);

  /* Through a file: one JSON object per line. */
  char path[200];
  snprintf(path, sizeof path, "%s/profiles.jsonl", rdt_fresh("exp_file"));
  assert_int_equal(mkdir(rdt_fresh("exp_file"), 0700), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  size_t written = 0;
  rd_error_t err;
  assert_int_equal(rd_store_export_profiles(a, f, &written, &err), RD_OK);
  fclose(f);
  assert_int_equal(written, n);

  rd_store_t *b = open_ok(rdt_fresh("exp_b"));
  f = fopen(path, "r");
  assert_non_null(f);
  size_t imported = 0;
  assert_int_equal(rd_store_import_profiles(b, f, &imported, &err), RD_OK);
  fclose(f);
  assert_int_equal(imported, n);

  /* Every field survives, latency bit for bit; the source is "imported". */
  rd_profile_t *v;
  size_t k;
  assert_int_equal(rd_store_list_profiles(b, &v, &k, &err), RD_OK);
  assert_int_equal(k, n);
  for (size_t i = 0; i < n; i++) {
    rd_profile_t want = p[i];
    want.source = RD_PROFILE_IMPORTED;
    assert_true(holds(v, k, &want, 0));
  }
  rd_store_free_profiles(v);
  /* The importing machine finds them as it would its own measurements. */
  assert_int_equal(rd_store_get_profiles(b, FP_B, &p[7].shape, p[7].build, &v, &k, &err), RD_OK);
  assert_int_equal(k, 1);
  rd_store_free_profiles(v);

  /* Exports are stable: b's export is a's with every source "imported". */
  size_t na, nb;
  char *ea = export_text(a, &na), *eb = export_text(b, &nb);
  assert_int_equal(na, nb);
  for (char *q; (q = strstr(ea, "\"measured\"")) != NULL;) memcpy(q, "\"imported\"", 10);
  assert_string_equal(ea, eb);
  free(ea);
  free(eb);

  /* Blank lines and CRLF are fine; importing again replaces, not adds. */
  char *text = export_text(a, &na);
  size_t tl = strlen(text);
  char *crlf = malloc(2 * tl + 8);
  size_t j = 0;
  crlf[j++] = '\n';
  for (size_t i = 0; i < tl; i++) {
    if (text[i] == '\n') crlf[j++] = '\r';
    crlf[j++] = text[i];
  }
  memcpy(crlf + j, "  \n", 4);
  assert_int_equal(import_text(b, crlf, &imported, &err), RD_OK);
  assert_int_equal(imported, n);
  assert_int_equal(count_profiles(b), n);
  free(crlf);
  free(text);

  /* An empty file imports nothing, successfully. */
  assert_int_equal(import_text(b, "", &imported, &err), RD_OK);
  assert_int_equal(imported, 0);
  rd_store_close(a);
  rd_store_close(b);
}

static void test_profiles_import_malformed(void **state) {
  (void)state;
  rd_store_t *s = open_ok(rdt_fresh("imp_bad"));
  rd_profile_t keep = make_profile(FP_A, RD_PRIM_TRAIN, 2, 32, "dqn", "dqn:4-64-64-2", 2e-5);
  put_profiles_ok(s, &keep, 1);

  rd_profile_t p = make_profile(FP_B, RD_PRIM_SAMPLE, 1, 32, "dqn", "dqn:4-64-64-2", 1e-6);
  char good[RD_PROFILE_JSONL_MAX];
  rd_error_t err;
  assert_int_equal(rd_profile_jsonl_format(&p, good, sizeof good, NULL, &err), RD_OK);
  good[strlen(good) - 1] = '\0'; /* without its newline, to splice below */

  /* Each bad line comes third, after two good ones (which must not stay). */
  static char longline[RD_PROFILE_JSONL_MAX + 64];
  memset(longline, ' ', sizeof longline - 1);
  longline[sizeof longline - 1] = '\0';
  const struct {
    const char *line, *msg;
  } bad[] = {
      {"not json", "expected '{'"},
      {"{}", "empty object"},
      {"{\"device\":\"cpu-00112233445566aa\"}", "is missing"},
      {"{\"device\":\"cpu-00112233445566aa\",\"device\":\"x\"}", "given twice"},
      {"{\"colour\":1}", "unknown member \"colour\""},
      {"{\"device\":\"cpu-00112233445566aa\"", "expected ',' or '}'"},
      {"[1,2]", "expected '{'"},
      {"{\"device\":\"caf\\u00e9\"}", "non-ASCII"},
      {"{\"threads\":1.5}", "expected an integer"},
      {"{\"threads\":-1}", "non-negative"},
      {"{\"threads\":4294967296}", "out of range"},
      {"{\"latency_s\":1e999}", "out of range"},
      {"{\"latency_s\":.5}", "expected a number"},
      {"{\"latency_s\":01}", "expected ',' or '}'"},
      {"{\"build\":\"a\tb\"}", "control character"},
      {longline, "longer than"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[3 * RD_PROFILE_JSONL_MAX + 256];
    snprintf(text, sizeof text, "%s\n%s\n%s\n", good, good, bad[i].line);
    rd_error_clear(&err);
    size_t n = 77;
    int rc = import_text(s, text, &n, &err);
    if (rc != RD_EINVAL) fail_msg("bad line %zu (%s) accepted", i, bad[i].line);
    assert_int_equal(n, 77); /* untouched on error */
    if (strstr(err.msg, "line 3: ") != err.msg || strstr(err.msg, bad[i].msg) == NULL)
      fail_msg("bad line %zu: message \"%s\" lacks \"line 3: ... %s\"", i, err.msg, bad[i].msg);
  }

  /* Well-formed JSON whose values are wrong: named, and nothing stays. */
  const char *fields[][2] = {
      {"\"device\":\"gpu-00112233445566bb\"", "\"device\":\"laptop\""},
      {"\"primitive\":\"sample\"", "\"primitive\":\"scatter\""},
      {"\"fanout\":16", "\"fanout\":24"},
      {"\"network\":\"dqn:4-64-64-2\"", "\"network\":\"dqn:4\""},
      {"\"latency_s\":9.9999999999999995e-07", "\"latency_s\":-1"},
      {"\"latency_s\":9.9999999999999995e-07", "\"latency_s\":5e-324"},
      {"\"latency_s\":9.9999999999999995e-07", "\"latency_s\":1.7e308"},
      {"\"latency_s\":9.9999999999999995e-07", "\"latency_s\":3601"},
      {"\"reps\":7", "\"reps\":0"},
      {"\"source\":\"measured\"", "\"source\":\"guessed\""},
      {"\"batch\":32", "\"batch\":200000"},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    char line[RD_PROFILE_JSONL_MAX], text[3 * RD_PROFILE_JSONL_MAX];
    char *at = strstr(good, fields[i][0]);
    if (at == NULL) fail_msg("%s not in %s", fields[i][0], good);
    snprintf(line, sizeof line, "%.*s%s%s", (int)(at - good), good, fields[i][1],
             at + strlen(fields[i][0]));
    snprintf(text, sizeof text, "%s\n%s\n", good, line);
    rd_error_clear(&err);
    if (import_text(s, text, NULL, &err) != RD_EINVAL) fail_msg("accepted %s", line);
    if (strstr(err.msg, "line 2: ") != err.msg) fail_msg("message: %s", err.msg);
  }

  /* A NUL byte inside a line. */
  {
    char text[2 * RD_PROFILE_JSONL_MAX];
    size_t gl = strlen(good);
    memcpy(text, good, gl);
    text[gl] = '\0';
    memcpy(text + gl + 1, "junk\n", 5);
    FILE *f = fmemopen(text, gl + 6, "r");
    assert_non_null(f);
    assert_int_equal(rd_store_import_profiles(s, f, NULL, &err), RD_EINVAL);
    fclose(f);
    assert_non_null(strstr(err.msg, "NUL"));
  }

  /* Only the profile from before is there. */
  rd_profile_t *v;
  size_t k;
  assert_int_equal(rd_store_list_profiles(s, &v, &k, &err), RD_OK);
  assert_int_equal(k, 1);
  assert_int_equal(cmp_profile(&v[0], &keep), 0);
  rd_store_free_profiles(v);
  rd_store_close(s);
}

static void test_profile_jsonl_codec(void **state) {
  (void)state;
  rd_profile_t p = make_profile(FP_A, RD_PRIM_UPDATE, 4, 256, "ddpg",
                                "ddpg:11-256-256-3/14-256-256-1", 1.0 / 3.0);
  p.items = 1048577;
  char line[RD_PROFILE_JSONL_MAX];
  size_t len;
  rd_error_t err;
  assert_int_equal(rd_profile_jsonl_format(&p, line, sizeof line, &len, &err), RD_OK);
  assert_int_equal(len, strlen(line));
  assert_string_equal(
      line,
      "{\"device\":\"cpu-00112233445566aa\",\"primitive\":\"update\",\"threads\":4,\"batch\":256,"
      "\"capacity\":100000,\"fanout\":16,\"algorithm\":\"ddpg\","
      "\"network\":\"ddpg:11-256-256-3/14-256-256-1\","
      "\"build\":\"0.1.0 abc1234 gcc-12.2.0 release\",\"latency_s\":0.33333333333333331,"
      "\"reps\":7,\"items\":1048577,\"source\":\"measured\",\"measured_unix\":1700000000}\n");
  rd_profile_t q;
  assert_int_equal(rd_profile_jsonl_parse(line, len, &q, &err), RD_OK);
  assert_int_equal(cmp_profile(&p, &q), 0);

  /* Members in another order, whitespace, escapes: the same profile. */
  const char *other =
      " { \"measured_unix\" : 1700000000 , \"source\":\"measured\",\"items\":1048577,"
      "\"reps\":7,\"latency_s\":3.3333333333333331E-1,\"build\":\"0.1.0 abc1234 gcc-12.2.0 "
      "release\",\"network\":\"ddpg:11-256-256-3\\/14-256-256-1\",\"algorithm\":\"dd\\u0070g\","
      "\"fanout\":16,\"capacity\":100000,\"batch\":256,\"threads\":4,\"primitive\":\"update\","
      "\"device\":\"cpu-00112233445566aa\"}\t";
  memset(&q, 0, sizeof q);
  if (rd_profile_jsonl_parse(other, strlen(other), &q, &err) != RD_OK) fail_msg("%s", err.msg);
  assert_int_equal(cmp_profile(&p, &q), 0);

  /* Too small a buffer, an invalid profile. */
  assert_int_equal(rd_profile_jsonl_format(&p, line, 40, &len, &err), RD_ETOOBIG);
  p.reps = 0;
  assert_int_equal(rd_profile_jsonl_format(&p, line, sizeof line, &len, &err), RD_EINVAL);
}

RDT_MAIN(store_setup, rdt_root_teardown,
         cmocka_unit_test(test_open_creates_private_files),
         cmocka_unit_test(test_put_list_delete),
         cmocka_unit_test(test_put_rejects_bad_input),
         cmocka_unit_test(test_reopen_persists),
         cmocka_unit_test(test_migrates_version_zero),
         cmocka_unit_test(test_refuses_newer_schema),
         cmocka_unit_test(test_corrupt_database),
         cmocka_unit_test(test_unwritable_state_dir),
         cmocka_unit_test(test_concurrent_puts),
         cmocka_unit_test(test_lock_second_open_refused),
         cmocka_unit_test(test_lock_before_database),
         cmocka_unit_test(test_lock_released_on_kill),
         cmocka_unit_test(test_lock_not_inherited),
         cmocka_unit_test(test_damaged_database_refused),
         cmocka_unit_test(test_admin_token_create_and_reuse),
         cmocka_unit_test(test_admin_token_bad_content),
         cmocka_unit_test(test_admin_token_permissions),
         cmocka_unit_test(test_admin_token_race),
         cmocka_unit_test(test_migrates_version_one),
         cmocka_unit_test(test_migrates_clear_tokens_to_hashes),
         cmocka_unit_test(test_token_hash_forms),
         cmocka_unit_test(test_profiles_put_get_list_clear),
         cmocka_unit_test(test_profiles_put_rejects_bad),
         cmocka_unit_test(test_profiles_survive_restart),
         cmocka_unit_test(test_profiles_read_rejects_bad_latency),
         cmocka_unit_test(test_profiles_export_import),
         cmocka_unit_test(test_profiles_import_malformed),
         cmocka_unit_test(test_profile_jsonl_codec))
