/* store.c - the daemon's durable state in SQLite (state_dir/replayd.db).
 *
 * The state directory belongs to one store at a time: open takes an
 * exclusive flock on state_dir/replayd.lock before it touches anything
 * else there, and holds it until close (see lock_state_dir). At open the
 * whole file is checked (PRAGMA quick_check, see check_database), so a
 * damaged database stops the start instead of failing reads later.
 *
 * One connection, opened in WAL mode so a reader (e.g. an operator's
 * sqlite3 shell) never blocks the daemon, with a busy timeout for the rare
 * moment someone else holds the write lock. Every public call takes the
 * store's mutex, so the connection and its prepared statements are used by
 * one thread at a time (the connection is opened SQLITE_OPEN_NOMUTEX: the
 * mutex here already serializes it).
 *
 * Migrations: migrations[v] takes the schema from version v to v + 1 and
 * runs in one transaction together with the new PRAGMA user_version, so a
 * crash mid-migration leaves the old version intact. A migration is SQL,
 * or C where SQL cannot say it (hashing the tokens: SQLite has no SHA-256).
 */
#define _GNU_SOURCE /* mkostemp */
#include "store.h"
#include "profile_jsonl.h"
#include "secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define DB_FILE "replayd.db"
#define TOKEN_FILE "admin.token"
#define LOCK_FILE "replayd.lock"
#define CHECK_PROBLEMS 3 /* quick_check stops after this many */
#define ADMIN_TOKEN_HEX 64
#define BUSY_TIMEOUT_MS 5000
#define RD_XSTR(x) #x
#define RD_STR(x) RD_XSTR(x)

struct rd_store {
  sqlite3 *db;
  int lock_fd; /* state_dir/LOCK_FILE, flock'd; -1 when not held */
  pthread_mutex_t mu;
  int version; /* set by rd_store_open, then only read */
  sqlite3_stmt *put, *del, *list;
  sqlite3_stmt *prof_put, *prof_get, *prof_list, *prof_clear;
  sqlite3_stmt *prof_page_first, *prof_page_after;
  char path[PATH_MAX];
};

static int migrate_hash_tokens(rd_store_t *s, rd_error_t *err);

static const struct {
  const char *sql;                             /* or */
  int (*run)(rd_store_t *s, rd_error_t *err); /* inside the migration's transaction */
} migrations[] = {
    /* 0 -> 1: registered workloads. seq orders them by creation (ids are
     * random, so they cannot). */
    {"CREATE TABLE workloads ("
    "  id TEXT PRIMARY KEY,"
    "  token TEXT NOT NULL,"
    "  created_unix INTEGER NOT NULL,"
    "  spec BLOB NOT NULL,"
    "  seq INTEGER NOT NULL UNIQUE"
    ");", NULL},
    /* 1 -> 2: profiles (profile.h), keyed by everything that makes a
     * latency reusable. WITHOUT ROWID: the key is the table's order, so
     * get-for-shape and the ordered list are index walks. */
    {"CREATE TABLE profiles ("
    "  device_fp TEXT NOT NULL,"
    "  primitive TEXT NOT NULL,"
    "  threads INTEGER NOT NULL,"
    "  batch INTEGER NOT NULL,"
    "  capacity INTEGER NOT NULL,"
    "  fanout INTEGER NOT NULL,"
    "  algorithm TEXT NOT NULL,"
    "  network TEXT NOT NULL,"
    "  build TEXT NOT NULL,"
    "  latency_s REAL NOT NULL,"
    "  reps INTEGER NOT NULL,"
    "  items INTEGER NOT NULL,"
    "  source TEXT NOT NULL,"
    "  measured_unix INTEGER NOT NULL,"
    "  PRIMARY KEY (device_fp, algorithm, network, batch, capacity, fanout, build, primitive,"
    "               threads)"
    ") WITHOUT ROWID;", NULL},
    /* 2 -> 3: workload tokens at rest as their SHA-256 ("sha256:" + hex,
     * secrets.h) instead of in clear, so a copy of the database opens no
     * workload; the tokens clients hold keep working. */
    {NULL, migrate_hash_tokens},
    /* 3 -> 4: tenants (tenant.h) and which tenant owns a workload; a
     * workload without a row belongs to the default tenant, so state
     * written before tenants restores unchanged. store_tenant.c. Tenant
     * tokens are stored as their hash, as workload tokens. */
    {"CREATE TABLE tenants ("
     "  name TEXT PRIMARY KEY,"
     "  token TEXT NOT NULL,"
     "  created_unix INTEGER NOT NULL,"
     "  max_memory INTEGER NOT NULL,"
     "  max_workloads INTEGER NOT NULL,"
     "  weight INTEGER NOT NULL,"
     "  insert_rate REAL NOT NULL,"
     "  sample_rate REAL NOT NULL"
     ");"
     "CREATE TABLE workload_tenants ("
     "  workload_id TEXT PRIMARY KEY,"
     "  tenant TEXT NOT NULL"
     ");", NULL},
    /* 4 -> 5: a tenant's GPU-memory quota (tenant.h); 0, no own limit,
     * for the tenants stored before. */
    {"ALTER TABLE tenants ADD COLUMN max_gpu_memory INTEGER NOT NULL DEFAULT 0;", NULL},
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(SCHEMA_VERSION == RD_STORE_SCHEMA_VERSION,
               "store.h's RD_STORE_SCHEMA_VERSION must count the migrations");

#define PROFILE_COLUMNS                                                                      \
  "device_fp, primitive, threads, batch, capacity, fanout, algorithm, network, build, "     \
  "latency_s, reps, items, source, measured_unix"
#define PROFILE_KEY "device_fp, algorithm, network, batch, capacity, fanout, build, primitive, threads"
#define PROFILE_ORDER " ORDER BY " PROFILE_KEY

/* ------------------------------------------------------------------ */
/* Files and directories                                               */
/* ------------------------------------------------------------------ */

/* mkdir -p with mode 0700 for every directory it creates. Existing
 * directories are left as they are (their owner chose their mode). */
static int mkdir_p(const char *dir, rd_error_t *err) {
  char p[PATH_MAX];
  size_t len = strlen(dir);
  if (len == 0) return rd_error_set(err, RD_EINVAL, "state directory path is empty");
  if (len >= sizeof p)
    return rd_error_set(err, RD_EINVAL, "state directory path is longer than %zu bytes",
                        sizeof p - 1);
  memcpy(p, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char saved = p[i];
    p[i] = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
      return rd_error_set(err, RD_ESTORE, "cannot create directory %s: %s", p, strerror(errno));
    p[i] = saved;
  }
  struct stat st;
  if (stat(dir, &st) != 0)
    return rd_error_set(err, RD_ESTORE, "cannot use state directory %s: %s", dir,
                        strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return rd_error_set(err, RD_ESTORE, "state directory %s is not a directory", dir);
  return RD_OK;
}

static int join_path(char *out, size_t cap, const char *dir, const char *file, rd_error_t *err) {
  int n = snprintf(out, cap, "%s/%s", dir, file);
  if (n < 0 || (size_t)n >= cap)
    return rd_error_set(err, RD_EINVAL, "path %s/%s is too long", dir, file);
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* The state directory's lock                                          */
/* ------------------------------------------------------------------ */

/* The pid written in a held lock file, or 0 if it cannot be read. The
 * holder writes it just after taking the lock, so an empty file may only
 * mean we looked in between: look again for a moment. */
static long holder_pid(int fd) {
  for (int tries = 0; tries < 50; tries++) {
    char buf[24];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      char *end;
      errno = 0;
      long pid = strtol(buf, &end, 10);
      if (errno == 0 && end != buf && *end == '\n' && pid > 0) return pid;
    }
    usleep(2000);
  }
  return 0;
}

/* Take state_dir/LOCK_FILE with flock(LOCK_EX | LOCK_NB) for the store's
 * life and write this process's pid into it, so a second daemon on the
 * same directory stops at start (RD_EBUSY, naming the holder's pid)
 * instead of sharing the database and the token with the first.
 *
 * The kernel drops a flock when the last descriptor of its open file
 * goes: on close and on any exit, kill -9 included. So the file left
 * behind by a dead daemon is not a lock and is never removed (unlinking a
 * flock'd file lets a third process lock a new file of the same name while
 * the second still holds the old one). O_CLOEXEC: a program the daemon
 * starts must not keep the directory locked after the daemon is gone. */
static int lock_state_dir(rd_store_t *s, const char *state_dir, rd_error_t *err) {
  char path[PATH_MAX];
  int rc = join_path(path, sizeof path, state_dir, LOCK_FILE, err);
  if (rc) return rc;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return rd_error_set(err, RD_ESTORE, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return rd_error_set(err, RD_ESTORE, "%s is not a regular file", path);
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      long pid = holder_pid(fd);
      close(fd);
      if (pid > 0)
        return rd_error_set(err, RD_EBUSY,
                            "state directory %s is in use by replayd pid %ld; stop it, or "
                            "give this one another --state-dir",
                            state_dir, pid);
      return rd_error_set(err, RD_EBUSY,
                          "state directory %s is in use by another replayd (it holds %s); "
                          "stop it, or give this one another --state-dir",
                          state_dir, path);
    }
    close(fd);
    return rd_error_set(err, RD_ESTORE, "cannot lock %s: %s", path, strerror(e));
  }
  char line[24];
  int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
    int e = errno;
    close(fd);
    return rd_error_set(err, RD_ESTORE, "cannot write %s: %s", path, strerror(e));
  }
  s->lock_fd = fd;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Open, migrate, close                                                */
/* ------------------------------------------------------------------ */

static int db_error(rd_store_t *s, rd_error_t *err, const char *what) {
  return rd_error_set(err, RD_ESTORE, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int exec_sql(rd_store_t *s, const char *sql, const char *what, rd_error_t *err) {
  if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) return db_error(s, err, what);
  return RD_OK;
}

static int read_user_version(rd_store_t *s, int *v, rd_error_t *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
    return db_error(s, err, "reading the schema version");
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return db_error(s, err, "reading the schema version");
  return RD_OK;
}

/* Stop on a damaged database (malformed pages under an intact header):
 * SQLite opens such a file and fails only the reads that reach a bad
 * page, so without this the daemon would start, restore nothing and
 * answer every registration with an error.
 *
 * quick_check rather than integrity_check: both read every page and check
 * each b-tree's structure, cells, free list and NOT NULL, which is what a
 * torn or overwritten page breaks; integrity_check also cross-checks each
 * index against its table (O(N log N) instead of O(N)), and the only
 * indexes here are the small workloads table's (profiles is WITHOUT ROWID,
 * its key is the table). The cost is a read of the whole file at start
 * (docs/benchmarks.md has figures). */
/* Append each line of text to buf ("; " between), leaving out SQLite's
 * "*** in database main ***" heading. */
static void add_problems(char *buf, size_t cap, size_t *used, const char *text) {
  while (*text != '\0' && *used < cap) {
    size_t len = strcspn(text, "\n");
    if (strncmp(text, "*** in database", 15) != 0 && len > 0)
      *used += (size_t)snprintf(buf + *used, cap - *used, "%s%.*s", *used ? "; " : "",
                                (int)len, text);
    text += len;
    if (*text == '\n') text++;
  }
}

static int check_database(rd_store_t *s, rd_error_t *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "PRAGMA quick_check(" RD_STR(CHECK_PROBLEMS) ")", -1, &st,
                         NULL) != SQLITE_OK)
    return db_error(s, err, "checking the database");
  char problems[RD_ERROR_MSG_MAX] = "";
  size_t used = 0;
  bool ok = false;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *row = (const char *)sqlite3_column_text(st, 0);
    if (row != NULL && strcmp(row, "ok") == 0) ok = true;
    else if (row != NULL) add_problems(problems, sizeof problems, &used, row);
  }
  /* A page bad enough can also end the check itself with an error. */
  if (step != SQLITE_DONE) add_problems(problems, sizeof problems, &used, sqlite3_errmsg(s->db));
  sqlite3_finalize(st);
  if (ok && used == 0) return RD_OK;
  /* What to do first: a long path truncates the detail, not the advice. */
  return rd_error_set(err, RD_ESTORE,
                      "%s is damaged: move it and its -wal and -shm files aside to start empty "
                      "(its workloads are lost), or restore a backup; quick_check: %s",
                      s->path, used ? problems : "no result");
}

/* SQL function token_hash(T): T's stored form (secrets.h); T as it is if
 * it is one already. */
static void sql_token_hash(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const unsigned char *t = sqlite3_value_text(argv[0]);
  int n = sqlite3_value_bytes(argv[0]);
  if (t == NULL) {
    sqlite3_result_error(ctx, "a stored workload has no token", -1);
    return;
  }
  uint8_t h[RD_TOKEN_HASH_LEN];
  if (rd_token_hash_parse((const char *)t, h) == RD_OK) {
    sqlite3_result_value(ctx, argv[0]);
    return;
  }
  char text[RD_TOKEN_HASH_TEXT_LEN + 1];
  rd_token_hash(t, (size_t)n, h);
  rd_token_hash_format(h, text);
  sqlite3_result_text(ctx, text, RD_TOKEN_HASH_TEXT_LEN, SQLITE_TRANSIENT);
}

/* Migration 2 -> 3: every token column becomes its hash, in the
 * migration's transaction (all rows or none). */
static int migrate_hash_tokens(rd_store_t *s, rd_error_t *err) {
  if (sqlite3_create_function(s->db, "rd_token_hash", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                              NULL, sql_token_hash, NULL, NULL) != SQLITE_OK)
    return db_error(s, err, "defining the token hash for the migration");
  int rc = exec_sql(s, "UPDATE workloads SET token = rd_token_hash(token)",
                    "hashing the stored workload tokens", err);
  sqlite3_create_function(s->db, "rd_token_hash", 1, SQLITE_UTF8, NULL, NULL, NULL, NULL);
  return rc;
}

static int migrate(rd_store_t *s, rd_error_t *err) {
  /* BEGIN IMMEDIATE takes the write lock before reading the version, so two
   * processes opening one new database cannot both run migration 0. */
  int rc = exec_sql(s, "BEGIN IMMEDIATE", "starting the migration", err);
  if (rc) return rc;
  int v = 0;
  if ((rc = read_user_version(s, &v, err)) != RD_OK) goto rollback;
  if (v > SCHEMA_VERSION) {
    rc = rd_error_set(err, RD_ESTORE,
                      "%s: schema version %d is newer than this replayd understands (%d); "
                      "use a newer replayd or another --state-dir",
                      s->path, v, SCHEMA_VERSION);
    goto rollback;
  }
  for (; v < SCHEMA_VERSION; v++) {
    char what[64], pragma[64];
    snprintf(what, sizeof what, "migrating the schema to version %d", v + 1);
    rc = migrations[v].sql != NULL ? exec_sql(s, migrations[v].sql, what, err)
                                   : migrations[v].run(s, err);
    if (rc != RD_OK) goto rollback;
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
    if ((rc = exec_sql(s, pragma, what, err)) != RD_OK) goto rollback;
  }
  if ((rc = exec_sql(s, "COMMIT", "committing the migration", err)) != RD_OK) goto rollback;
  s->version = v;
  return RD_OK;
rollback:
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static int prepare(rd_store_t *s, sqlite3_stmt **st, const char *sql, rd_error_t *err) {
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
    return db_error(s, err, "preparing a statement");
  return RD_OK;
}

void rd_store_close(rd_store_t *s) {
  if (s == NULL) return;
  sqlite3_finalize(s->put);
  sqlite3_finalize(s->del);
  sqlite3_finalize(s->list);
  sqlite3_finalize(s->prof_put);
  sqlite3_finalize(s->prof_get);
  sqlite3_finalize(s->prof_list);
  sqlite3_finalize(s->prof_clear);
  sqlite3_finalize(s->prof_page_first);
  sqlite3_finalize(s->prof_page_after);
  sqlite3_close(s->db); /* every statement is finalized, so this closes */
  if (s->lock_fd >= 0) {
    /* Empty the pid first: a daemon that fails to take the lock later
     * must not name this process. Closing releases the lock. */
    int unused = ftruncate(s->lock_fd, 0); /* the lock goes with close either way */
    (void)unused;
    close(s->lock_fd);
  }
  pthread_mutex_destroy(&s->mu);
  free(s);
}

int rd_store_open(rd_store_t **out, const char *state_dir, rd_error_t *err) {
  *out = NULL;
  if (state_dir == NULL) return rd_error_set(err, RD_EINVAL, "no state directory given");
  int rc = mkdir_p(state_dir, err);
  if (rc) return rc;

  rd_store_t *s = calloc(1, sizeof *s);
  if (s == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory opening the store");
  s->lock_fd = -1;
  if ((rc = join_path(s->path, sizeof s->path, state_dir, DB_FILE, err)) != RD_OK) {
    free(s);
    return rc;
  }
  pthread_mutex_init(&s->mu, NULL);
  /* Before the database or anything else in the directory is touched. */
  if ((rc = lock_state_dir(s, state_dir, err)) != RD_OK) goto fail;

  /* Create the file ourselves so it is 0600 from its first byte; SQLite
   * gives its -wal and -shm files the database file's mode. */
  int fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    rc = rd_error_set(err, RD_ESTORE, "cannot open %s: %s", s->path, strerror(errno));
    goto fail;
  }
  close(fd);

  if (sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
      SQLITE_OK) {
    rc = s->db ? db_error(s, err, "opening the database")
               : rd_error_set(err, RD_ENOMEM, "out of memory opening %s", s->path);
    goto fail;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
  /* WAL: readers and the writer do not block each other. synchronous=FULL:
   * a registration is rare and its reply promises the workload exists, so
   * it must survive a power cut. */
  if ((rc = exec_sql(s, "PRAGMA journal_mode = WAL", "switching to WAL mode", err)) ||
      (rc = exec_sql(s, "PRAGMA synchronous = FULL", "setting synchronous mode", err)) ||
      /* What is deleted or overwritten (a clear token the migration to
       * hashes replaced) is zeroed in the file, not left in free space. */
      (rc = exec_sql(s, "PRAGMA secure_delete = ON", "setting secure delete", err)) ||
      (rc = check_database(s, err)) || (rc = migrate(s, err)) ||
      (rc = prepare(s, &s->put,
                    "INSERT INTO workloads (id, token, created_unix, spec, seq) VALUES "
                    "(?1, ?2, ?3, ?4, (SELECT COALESCE(MAX(seq), 0) + 1 FROM workloads))",
                    err)) ||
      (rc = prepare(s, &s->del, "DELETE FROM workloads WHERE id = ?1", err)) ||
      (rc = prepare(s, &s->list,
                    "SELECT id, token, created_unix, spec FROM workloads ORDER BY seq", err)) ||
      (rc = prepare(s, &s->prof_put,
                    "INSERT OR REPLACE INTO profiles (" PROFILE_COLUMNS ") VALUES "
                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                    err)) ||
      (rc = prepare(s, &s->prof_get,
                    "SELECT " PROFILE_COLUMNS " FROM profiles WHERE device_fp = ?1 AND "
                    "algorithm = ?2 AND network = ?3 AND batch = ?4 AND capacity = ?5 AND "
                    "fanout = ?6 AND build = ?7" PROFILE_ORDER,
                    err)) ||
      (rc = prepare(s, &s->prof_list, "SELECT " PROFILE_COLUMNS " FROM profiles" PROFILE_ORDER,
                    err)) ||
      (rc = prepare(s, &s->prof_clear, "DELETE FROM profiles", err)) ||
      /* Pages: a row-value comparison on the primary key (the list's order)
       * is a range of the table's own b-tree. */
      (rc = prepare(s, &s->prof_page_first,
                    "SELECT " PROFILE_COLUMNS " FROM profiles" PROFILE_ORDER " LIMIT ?1", err)) ||
      (rc = prepare(s, &s->prof_page_after,
                    "SELECT " PROFILE_COLUMNS " FROM profiles WHERE (" PROFILE_KEY ") > "
                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)" PROFILE_ORDER " LIMIT ?10",
                    err)))
    goto fail;
  *out = s;
  return RD_OK;
fail:
  rd_store_close(s);
  return rc;
}

int rd_store_with_db(rd_store_t *s, rd_store_db_fn fn, void *arg, rd_error_t *err) {
  pthread_mutex_lock(&s->mu);
  int rc = fn(s->db, s->path, arg, err);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* No lock: rd_store_open's migration sets it before s is handed out. */
int rd_store_schema_version(rd_store_t *s) { return s->version; }

/* ------------------------------------------------------------------ */
/* Workloads                                                           */
/* ------------------------------------------------------------------ */

static bool bounded_nonempty(const char *s, size_t cap) {
  if (s == NULL) return false;
  size_t n = strnlen(s, cap);
  return n > 0 && n < cap;
}

int rd_store_put_workload(rd_store_t *s, const rd_stored_workload_t *w, rd_error_t *err) {
  if (!bounded_nonempty(w->id, sizeof w->id))
    return rd_error_set(err, RD_EINVAL, "a stored workload needs an id of 1 to %zu characters",
                        sizeof w->id - 1);
  if (!bounded_nonempty(w->token, sizeof w->token))
    return rd_error_set(err, RD_EINVAL, "a stored workload needs a token of 1 to %zu characters",
                        sizeof w->token - 1);
  if (w->spec == NULL && w->spec_len > 0)
    return rd_error_set(err, RD_EINVAL, "stored workload %s has no spec bytes", w->id);
  if (w->spec_len > INT_MAX)
    return rd_error_set(err, RD_EINVAL, "stored workload %s has a spec of %zu bytes", w->id,
                        w->spec_len);

  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = s->put;
  int rc = RD_OK;
  /* A zero-length spec (every field default) must bind as an empty blob,
   * not NULL, which bind_blob makes of a NULL pointer. */
  if (sqlite3_bind_text(st, 1, w->id, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_text(st, 2, w->token, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_int64(st, 3, w->created_unix) != SQLITE_OK ||
      (w->spec_len ? sqlite3_bind_blob(st, 4, w->spec, (int)w->spec_len, SQLITE_STATIC)
                   : sqlite3_bind_zeroblob(st, 4, 0)) != SQLITE_OK) {
    rc = db_error(s, err, "binding a workload");
  } else {
    int step = sqlite3_step(st);
    if (step == SQLITE_CONSTRAINT_PRIMARYKEY)
      rc = rd_error_set(err, RD_EINVAL, "workload %s is already stored", w->id);
    else if (step != SQLITE_DONE)
      rc = db_error(s, err, "storing a workload");
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int rd_store_delete_workload(rd_store_t *s, const char *id, rd_error_t *err) {
  if (id == NULL || id[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "no workload id given");
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = s->del;
  int rc = RD_OK;
  if (sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC) != SQLITE_OK) {
    rc = db_error(s, err, "binding a workload id");
  } else if (sqlite3_step(st) != SQLITE_DONE) {
    rc = db_error(s, err, "deleting a workload");
  } else if (sqlite3_changes(s->db) == 0) {
    rc = rd_error_set(err, RD_ENOTFOUND, "no stored workload has id %.64s", id);
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int rd_store_update_spec(rd_store_t *s, const char *id, const uint8_t *spec, size_t len,
                         rd_error_t *err) {
  if (id == NULL || id[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "no workload id given");
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = NULL; /* rare (an owner's change): prepared per call */
  int rc = RD_OK;
  if (sqlite3_prepare_v2(s->db, "UPDATE workloads SET spec = ?2 WHERE id = ?1", -1, &st,
                         NULL) != SQLITE_OK)
    rc = db_error(s, err, "preparing a spec update");
  else if (sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC) != SQLITE_OK ||
           sqlite3_bind_blob(st, 2, spec, (int)len, SQLITE_STATIC) != SQLITE_OK)
    rc = db_error(s, err, "binding a spec update");
  else if (sqlite3_step(st) != SQLITE_DONE)
    rc = db_error(s, err, "updating a workload's spec");
  else if (sqlite3_changes(s->db) == 0)
    rc = rd_error_set(err, RD_ENOTFOUND, "no stored workload has id %.64s", id);
  sqlite3_finalize(st);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void rd_store_free_workloads(rd_stored_workload_t *w, size_t n) {
  if (w == NULL) return;
  for (size_t i = 0; i < n; i++) free(w[i].spec);
  free(w);
}

/* Copy one result row; RD_ESTORE if it does not fit the struct (the file
 * was edited by hand, or by a future version). */
static int read_row(rd_store_t *s, sqlite3_stmt *st, void *row, rd_error_t *err) {
  rd_stored_workload_t *w = row;
  memset(w, 0, sizeof *w);
  const unsigned char *id = sqlite3_column_text(st, 0);
  int id_len = sqlite3_column_bytes(st, 0);
  const unsigned char *token = sqlite3_column_text(st, 1);
  int token_len = sqlite3_column_bytes(st, 1);
  if (id == NULL || id_len <= 0 || (size_t)id_len >= sizeof w->id || token == NULL ||
      token_len <= 0 || (size_t)token_len >= sizeof w->token)
    return rd_error_set(err, RD_ESTORE, "%s: a stored workload has a malformed id or token",
                        s->path);
  memcpy(w->id, id, (size_t)id_len + 1);
  memcpy(w->token, token, (size_t)token_len + 1);
  w->created_unix = sqlite3_column_int64(st, 2);
  const void *spec = sqlite3_column_blob(st, 3);
  int spec_len = sqlite3_column_bytes(st, 3);
  /* malloc(0) may return NULL; keep one byte so spec is never NULL. */
  w->spec = malloc(spec_len > 0 ? (size_t)spec_len : 1);
  if (w->spec == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory reading workload specs");
  if (spec_len > 0) memcpy(w->spec, spec, (size_t)spec_len);
  w->spec_len = (size_t)spec_len;
  return RD_OK;
}

/* Reads the row a SELECT stands on into row, or fails holding nothing. */
typedef int (*read_row_fn)(rd_store_t *s, sqlite3_stmt *st, void *row, rd_error_t *err);

/* Steps a SELECT to its end into a malloc'd array of elem-sized rows (it
 * doubles from 16 as needed), each read by read_one: RD_OK, or an RD_E*
 * code with err set (what: the call, for the message). Either way *out
 * holds the *n rows read whole, for the caller to keep or free. */
static int collect_rows(rd_store_t *s, sqlite3_stmt *st, size_t elem, read_row_fn read_one,
                        const char *what, void **out, size_t *n, rd_error_t *err) {
  char *v = NULL;
  size_t len = 0, cap = 0;
  int rc;
  for (;;) {
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
      rc = RD_OK;
      break;
    }
    if (step != SQLITE_ROW) {
      rc = db_error(s, err, what);
      break;
    }
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      char *nv = realloc(v, ncap * elem);
      if (nv == NULL) {
        rc = rd_error_set(err, RD_ENOMEM, "out of memory %s", what);
        break;
      }
      v = nv;
      cap = ncap;
    }
    if ((rc = read_one(s, st, v + len * elem, err)) != RD_OK) break;
    len++;
  }
  *out = v;
  *n = len;
  return rc;
}

int rd_store_list_workloads(rd_store_t *s, rd_stored_workload_t **out, size_t *n,
                            rd_error_t *err) {
  *out = NULL;
  *n = 0;
  void *v;
  size_t len;
  pthread_mutex_lock(&s->mu);
  int rc = collect_rows(s, s->list, sizeof(rd_stored_workload_t), read_row, "listing workloads",
                        &v, &len, err);
  sqlite3_reset(s->list);
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    rd_store_free_workloads(v, len);
    return rc;
  }
  *out = v;
  *n = len;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Profiles                                                            */
/* ------------------------------------------------------------------ */

static int bind_profile(sqlite3_stmt *st, const rd_profile_t *p) {
  int ok = SQLITE_OK;
  ok |= sqlite3_bind_text(st, 1, p->device_fp, -1, SQLITE_STATIC);
  ok |= sqlite3_bind_text(st, 2, rd_primitive_name(p->primitive), -1, SQLITE_STATIC);
  ok |= sqlite3_bind_int64(st, 3, p->threads);
  ok |= sqlite3_bind_int64(st, 4, p->shape.batch);
  ok |= sqlite3_bind_int64(st, 5, p->shape.capacity);
  ok |= sqlite3_bind_int64(st, 6, p->shape.fanout);
  ok |= sqlite3_bind_text(st, 7, p->shape.algorithm, -1, SQLITE_STATIC);
  ok |= sqlite3_bind_text(st, 8, p->shape.network, -1, SQLITE_STATIC);
  ok |= sqlite3_bind_text(st, 9, p->build, -1, SQLITE_STATIC);
  ok |= sqlite3_bind_double(st, 10, p->latency_s);
  ok |= sqlite3_bind_int64(st, 11, p->reps);
  ok |= sqlite3_bind_int64(st, 12, (sqlite3_int64)p->items);
  ok |= sqlite3_bind_text(st, 13, rd_profile_source_name(p->source), -1, SQLITE_STATIC);
  ok |= sqlite3_bind_int64(st, 14, p->measured_unix);
  return ok;
}

/* Upsert one validated profile; the caller holds the mutex. */
static int put_profile_locked(rd_store_t *s, const rd_profile_t *p, rd_error_t *err) {
  sqlite3_stmt *st = s->prof_put;
  int rc = RD_OK;
  if (bind_profile(st, p) != SQLITE_OK) rc = db_error(s, err, "binding a profile");
  else if (sqlite3_step(st) != SQLITE_DONE) rc = db_error(s, err, "storing a profile");
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc;
}

static int put_profiles_locked(rd_store_t *s, const rd_profile_t *p, size_t n, rd_error_t *err) {
  int rc = exec_sql(s, "BEGIN IMMEDIATE", "starting to store profiles", err);
  if (rc) return rc;
  for (size_t i = 0; i < n && rc == RD_OK; i++) rc = put_profile_locked(s, &p[i], err);
  if (rc == RD_OK) rc = exec_sql(s, "COMMIT", "committing profiles", err);
  if (rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

int rd_store_put_profiles(rd_store_t *s, const rd_profile_t *p, size_t n, rd_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    int rc = rd_profile_validate(&p[i], err);
    if (rc) return rc;
  }
  if (n == 0) return RD_OK;
  pthread_mutex_lock(&s->mu);
  int rc = put_profiles_locked(s, p, n, err);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int rd_store_put_profile(rd_store_t *s, const rd_profile_t *p, rd_error_t *err) {
  return rd_store_put_profiles(s, p, 1, err);
}

/* Copy a text column into a fixed field; false if NULL or too long. */
static bool column_text(sqlite3_stmt *st, int col, char *out, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, col);
  int len = sqlite3_column_bytes(st, col);
  if (t == NULL || len < 0 || (size_t)len >= cap) return false;
  memcpy(out, t, (size_t)len + 1);
  return true;
}

static bool column_u32(sqlite3_stmt *st, int col, uint32_t *out) {
  sqlite3_int64 v = sqlite3_column_int64(st, col);
  if (sqlite3_column_type(st, col) != SQLITE_INTEGER || v < 0 || v > UINT32_MAX) return false;
  *out = (uint32_t)v;
  return true;
}

/* One result row of PROFILE_COLUMNS, validated. */
static int read_profile(rd_store_t *s, sqlite3_stmt *st, rd_profile_t *p, rd_error_t *err) {
  memset(p, 0, sizeof *p);
  char prim[16], src[16];
  rd_error_t why;
  rd_error_clear(&why);
  bool ok = column_text(st, 0, p->device_fp, sizeof p->device_fp) &&
            column_text(st, 1, prim, sizeof prim) && column_u32(st, 2, &p->threads) &&
            column_u32(st, 3, &p->shape.batch) && column_u32(st, 4, &p->shape.capacity) &&
            column_u32(st, 5, &p->shape.fanout) &&
            column_text(st, 6, p->shape.algorithm, sizeof p->shape.algorithm) &&
            column_text(st, 7, p->shape.network, sizeof p->shape.network) &&
            column_text(st, 8, p->build, sizeof p->build) && column_u32(st, 10, &p->reps) &&
            column_text(st, 12, src, sizeof src) && sqlite3_column_int64(st, 11) >= 0;
  if (ok) {
    p->latency_s = sqlite3_column_double(st, 9);
    p->items = (uint64_t)sqlite3_column_int64(st, 11);
    p->measured_unix = sqlite3_column_int64(st, 13);
    ok = rd_primitive_parse(prim, &p->primitive, &why) == RD_OK &&
         rd_profile_source_parse(src, &p->source, &why) == RD_OK &&
         rd_profile_validate(p, &why) == RD_OK;
  }
  if (!ok)
    return rd_error_set(err, RD_ESTORE, "%s: a stored profile is malformed%s%.120s", s->path,
                        why.msg[0] ? ": " : "", why.msg);
  return RD_OK;
}

static int read_profile_row(rd_store_t *s, sqlite3_stmt *st, void *row, rd_error_t *err) {
  return read_profile(s, st, row, err);
}

/* A bind of st's parameters failed: the error, st reset for the next call. */
static int bind_failed(rd_store_t *s, sqlite3_stmt *st, const char *what, rd_error_t *err) {
  int rc = db_error(s, err, what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc;
}

/* Run a prepared SELECT of PROFILE_COLUMNS into a malloc'd array; the
 * caller holds the mutex and has bound the parameters. */
static int collect_profiles(rd_store_t *s, sqlite3_stmt *st, rd_profile_t **out, size_t *n,
                            rd_error_t *err) {
  void *v;
  size_t len;
  int rc = collect_rows(s, st, sizeof(rd_profile_t), read_profile_row, "reading profiles", &v,
                        &len, err);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc || len == 0) {
    free(v);
    v = NULL;
    len = 0;
  }
  *out = v;
  *n = len;
  return rc;
}

int rd_store_get_profiles(rd_store_t *s, const char *device_fp, const rd_profile_key_t *shape,
                          const char *build, rd_profile_t **out, size_t *n, rd_error_t *err) {
  *out = NULL;
  *n = 0;
  if (device_fp == NULL || shape == NULL || build == NULL)
    return rd_error_set(err, RD_EINVAL, "a profile lookup needs a device, a shape and a build");
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = s->prof_get;
  int rc;
  if (sqlite3_bind_text(st, 1, device_fp, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_text(st, 2, shape->algorithm, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_text(st, 3, shape->network, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_int64(st, 4, shape->batch) != SQLITE_OK ||
      sqlite3_bind_int64(st, 5, shape->capacity) != SQLITE_OK ||
      sqlite3_bind_int64(st, 6, shape->fanout) != SQLITE_OK ||
      sqlite3_bind_text(st, 7, build, -1, SQLITE_STATIC) != SQLITE_OK)
    rc = bind_failed(s, st, "binding a profile lookup", err);
  else
    rc = collect_profiles(s, st, out, n, err);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int rd_store_list_profiles(rd_store_t *s, rd_profile_t **out, size_t *n, rd_error_t *err) {
  pthread_mutex_lock(&s->mu);
  int rc = collect_profiles(s, s->prof_list, out, n, err);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int rd_store_list_profiles_after(rd_store_t *s, const rd_profile_t *after, size_t max,
                                 rd_profile_t **out, size_t *n, rd_error_t *err) {
  *out = NULL;
  *n = 0;
  if (max == 0 || max > RD_STORE_PAGE_MAX)
    return rd_error_set(err, RD_EINVAL, "a page of %zu profiles is outside [1, %u]", max,
                        RD_STORE_PAGE_MAX);
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = after ? s->prof_page_after : s->prof_page_first;
  int bad;
  if (after == NULL) {
    bad = sqlite3_bind_int64(st, 1, (sqlite3_int64)max) != SQLITE_OK;
  } else {
    const rd_profile_key_t *k = &after->shape;
    bad = sqlite3_bind_text(st, 1, after->device_fp, -1, SQLITE_STATIC) != SQLITE_OK ||
          sqlite3_bind_text(st, 2, k->algorithm, -1, SQLITE_STATIC) != SQLITE_OK ||
          sqlite3_bind_text(st, 3, k->network, -1, SQLITE_STATIC) != SQLITE_OK ||
          sqlite3_bind_int64(st, 4, k->batch) != SQLITE_OK ||
          sqlite3_bind_int64(st, 5, k->capacity) != SQLITE_OK ||
          sqlite3_bind_int64(st, 6, k->fanout) != SQLITE_OK ||
          sqlite3_bind_text(st, 7, after->build, -1, SQLITE_STATIC) != SQLITE_OK ||
          sqlite3_bind_text(st, 8, rd_primitive_name(after->primitive), -1, SQLITE_STATIC) !=
              SQLITE_OK ||
          sqlite3_bind_int64(st, 9, after->threads) != SQLITE_OK ||
          sqlite3_bind_int64(st, 10, (sqlite3_int64)max) != SQLITE_OK;
  }
  int rc = bad ? bind_failed(s, st, "binding a profile page", err)
               : collect_profiles(s, st, out, n, err);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void rd_store_free_profiles(rd_profile_t *p) { free(p); }

int rd_store_clear_profiles(rd_store_t *s, size_t *removed, rd_error_t *err) {
  pthread_mutex_lock(&s->mu);
  int rc = RD_OK;
  if (sqlite3_step(s->prof_clear) != SQLITE_DONE) rc = db_error(s, err, "clearing profiles");
  else if (removed) *removed = (size_t)sqlite3_changes(s->db);
  sqlite3_reset(s->prof_clear);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int rd_store_export_profiles(rd_store_t *s, FILE *f, size_t *n, rd_error_t *err) {
  if (f == NULL) return rd_error_set(err, RD_EINVAL, "no file to export profiles to");
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = s->prof_list;
  size_t count = 0;
  int rc = RD_OK;
  char line[RD_PROFILE_JSONL_MAX];
  for (;;) {
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) break;
    if (step != SQLITE_ROW) {
      rc = db_error(s, err, "reading profiles");
      break;
    }
    rd_profile_t p;
    size_t len;
    if ((rc = read_profile(s, st, &p, err)) != RD_OK ||
        (rc = rd_profile_jsonl_format(&p, line, sizeof line, &len, err)) != RD_OK)
      break;
    if (fwrite(line, 1, len, f) != len) {
      rc = rd_error_set(err, RD_ESTORE, "cannot write profiles: %s", strerror(errno));
      break;
    }
    count++;
  }
  sqlite3_reset(st);
  pthread_mutex_unlock(&s->mu);
  if (rc == RD_OK && fflush(f) != 0)
    rc = rd_error_set(err, RD_ESTORE, "cannot write profiles: %s", strerror(errno));
  if (rc == RD_OK && n) *n = count;
  return rc;
}

/* Read one line of at most cap - 1 bytes into buf (newline dropped).
 * Returns its length, -1 at end of input, -2 if too long, -3 if it holds a
 * NUL byte, -4 on a read error. */
static long read_line(FILE *f, char *buf, size_t cap) {
  size_t n = 0;
  int ch;
  bool any = false, nul = false;
  while ((ch = getc(f)) != EOF) {
    any = true;
    if (ch == '\n') break;
    if (ch == '\0') nul = true;
    if (n + 1 >= cap) {
      while ((ch = getc(f)) != EOF && ch != '\n') {
      }
      return -2;
    }
    buf[n++] = (char)ch;
  }
  if (ferror(f)) return -4;
  if (!any) return -1;
  buf[n] = '\0';
  return nul ? -3 : (long)n;
}

int rd_store_import_profiles(rd_store_t *s, FILE *f, size_t *n, rd_error_t *err) {
  if (f == NULL) return rd_error_set(err, RD_EINVAL, "no file to import profiles from");
  pthread_mutex_lock(&s->mu);
  int rc = exec_sql(s, "BEGIN IMMEDIATE", "starting a profile import", err);
  size_t count = 0;
  char line[RD_PROFILE_JSONL_MAX + 1];
  for (size_t lineno = 1; rc == RD_OK; lineno++) {
    long len = read_line(f, line, sizeof line);
    if (len == -1) break;
    if (len == -4) {
      rc = rd_error_set(err, RD_ESTORE, "cannot read profiles at line %zu: %s", lineno,
                        strerror(errno));
      break;
    }
    if (len == -2 || len == -3) {
      rc = rd_error_set(err, RD_EINVAL, "line %zu: %s", lineno,
                        len == -2 ? "longer than " RD_STR(RD_PROFILE_JSONL_MAX) " bytes"
                                  : "holds a NUL byte");
      break;
    }
    size_t blank = 0;
    while (blank < (size_t)len && strchr(" \t\r", line[blank]) != NULL) blank++;
    if (blank == (size_t)len) continue;
    rd_profile_t p;
    rd_error_t why;
    rd_error_clear(&why);
    if (rd_profile_jsonl_parse(line, (size_t)len, &p, &why) != RD_OK) {
      rc = rd_error_set(err, RD_EINVAL, "line %zu: %.200s", lineno, why.msg);
      break;
    }
    p.source = RD_PROFILE_IMPORTED;
    if ((rc = put_profile_locked(s, &p, err)) == RD_OK) count++;
  }
  if (rc == RD_OK) rc = exec_sql(s, "COMMIT", "committing a profile import", err);
  if (rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  pthread_mutex_unlock(&s->mu);
  if (rc == RD_OK && n) *n = count;
  return rc;
}

/* ------------------------------------------------------------------ */
/* Admin token                                                         */
/* ------------------------------------------------------------------ */

static bool is_lower_hex(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); }

/* Read and check an existing token file. RD_ENOTFOUND if it does not exist. */
static int read_token(const char *path, char *buf, rd_error_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return RD_ENOTFOUND;
    return rd_error_set(err, RD_ESTORE, "cannot open %s: %s", path, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return rd_error_set(err, RD_ESTORE, "%s is not a regular file", path);
  }
  /* The token lets its holder delete any workload: refuse one that others
   * could read, rather than keep using a leaked secret. */
  if (st.st_mode & 077) {
    close(fd);
    return rd_error_set(err, RD_ESTORE,
                        "%s has mode %03o; it must be readable by its owner only (chmod 600)",
                        path, (unsigned)(st.st_mode & 0777));
  }
  char tmp[ADMIN_TOKEN_HEX + 2];
  size_t got = 0;
  while (got < sizeof tmp) {
    ssize_t r = read(fd, tmp + got, sizeof tmp - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      return rd_error_set(err, RD_ESTORE, "cannot read %s: %s", path, strerror(e));
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  close(fd);
  /* Exactly 64 lowercase hex digits, optionally followed by one newline. */
  bool ok = got == ADMIN_TOKEN_HEX || (got == ADMIN_TOKEN_HEX + 1 && tmp[ADMIN_TOKEN_HEX] == '\n');
  for (size_t i = 0; ok && i < ADMIN_TOKEN_HEX; i++) ok = is_lower_hex(tmp[i]);
  if (!ok)
    return rd_error_set(err, RD_ESTORE,
                        "%s does not hold a token (64 lowercase hex digits and a newline); "
                        "fix it or delete it to have a new one made",
                        path);
  memcpy(buf, tmp, ADMIN_TOKEN_HEX);
  buf[ADMIN_TOKEN_HEX] = '\0';
  return RD_OK;
}

static int random_hex(char *out, size_t hex_len, rd_error_t *err) {
  return rd_random_hex(out, hex_len, RD_ESTORE, err);
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Write a new token to a private temporary file, then link() it into
 * place: link fails with EEXIST if another process won the race, and a
 * reader never sees a half-written file (O_EXCL on the final name would
 * expose one between create and write). */
static int create_token(const char *dir, const char *path, rd_error_t *err) {
  char tmp[PATH_MAX], token[ADMIN_TOKEN_HEX + 2];
  int rc = join_path(tmp, sizeof tmp, dir, TOKEN_FILE ".XXXXXX", err);
  if (rc) return rc;
  if ((rc = random_hex(token, ADMIN_TOKEN_HEX, err)) != RD_OK) return rc;
  token[ADMIN_TOKEN_HEX] = '\n';
  int fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL, mode 0600 */
  if (fd < 0)
    return rd_error_set(err, RD_ESTORE, "cannot create a file in %s: %s", dir, strerror(errno));
  if (fchmod(fd, 0600) != 0 || write_all(fd, token, ADMIN_TOKEN_HEX + 1) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return rd_error_set(err, RD_ESTORE, "cannot write %s: %s", tmp, strerror(e));
  }
  close(fd);
  int lrc = link(tmp, path);
  int e = errno;
  unlink(tmp);
  if (lrc != 0 && e != EEXIST)
    return rd_error_set(err, RD_ESTORE, "cannot create %s: %s", path, strerror(e));
  /* Make the new name durable. */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return RD_OK; /* created, or someone else's is there: the caller reads it */
}

int rd_store_admin_token(const char *state_dir, char *buf, size_t len, rd_error_t *err) {
  if (buf == NULL || len < ADMIN_TOKEN_HEX + 1)
    return rd_error_set(err, RD_EINVAL, "the admin token needs a buffer of %d bytes",
                        ADMIN_TOKEN_HEX + 1);
  if (state_dir == NULL) return rd_error_set(err, RD_EINVAL, "no state directory given");
  int rc = mkdir_p(state_dir, err);
  if (rc) return rc;
  char path[PATH_MAX];
  if ((rc = join_path(path, sizeof path, state_dir, TOKEN_FILE, err)) != RD_OK) return rc;

  rc = read_token(path, buf, err);
  if (rc != RD_ENOTFOUND) return rc;
  if ((rc = create_token(state_dir, path, err)) != RD_OK) return rc;
  rc = read_token(path, buf, err);
  if (rc == RD_ENOTFOUND) /* deleted again between link and read */
    return rd_error_set(err, RD_ESTORE, "%s disappeared while it was being created", path);
  return rc;
}
