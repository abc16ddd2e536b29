/* store_tenant.c - tenants and workload ownership in SQLite. */
#include "store_tenant.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static int fail(sqlite3 *db, const char *path, const char *what, rd_error_t *err) {
  return rd_error_set(err, RD_ESTORE, "%s: %s: %s", path, what, sqlite3_errmsg(db));
}

/* ---- put ---- */

static int put_tenant(sqlite3 *db, const char *path, void *arg, rd_error_t *err) {
  const rd_stored_tenant_t *t = arg;
  sqlite3_stmt *st = NULL;
  int rc = RD_OK;
  if (sqlite3_prepare_v2(db,
                         "INSERT OR REPLACE INTO tenants (name, token, created_unix, max_memory, "
                         "max_workloads, weight, insert_rate, sample_rate, max_gpu_memory) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_text(st, 2, t->token, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_int64(st, 3, t->created_unix) != SQLITE_OK ||
      /* SQLite integers are signed: a quota past 2^63 is stored as its bits. */
      sqlite3_bind_int64(st, 4, (sqlite3_int64)t->max_memory) != SQLITE_OK ||
      sqlite3_bind_int64(st, 5, t->max_workloads) != SQLITE_OK ||
      sqlite3_bind_int64(st, 6, t->weight) != SQLITE_OK ||
      sqlite3_bind_double(st, 7, t->insert_rate) != SQLITE_OK ||
      sqlite3_bind_double(st, 8, t->sample_rate) != SQLITE_OK ||
      sqlite3_bind_int64(st, 9, (sqlite3_int64)t->max_gpu_memory) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_DONE)
    rc = fail(db, path, "storing a tenant", err);
  sqlite3_finalize(st);
  return rc;
}

int rd_store_put_tenant(rd_store_t *s, const rd_stored_tenant_t *t, rd_error_t *err) {
  return rd_store_with_db(s, put_tenant, (void *)t, err);
}

/* ---- delete ---- */

typedef struct {
  const char *sql, *key, *what;
  int must_exist;
} delete_arg_t;

static int delete_row(sqlite3 *db, const char *path, void *arg, rd_error_t *err) {
  const delete_arg_t *a = arg;
  sqlite3_stmt *st = NULL;
  int rc = RD_OK;
  if (sqlite3_prepare_v2(db, a->sql, -1, &st, NULL) != SQLITE_OK ||
      sqlite3_bind_text(st, 1, a->key, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_DONE)
    rc = fail(db, path, a->what, err);
  else if (a->must_exist && sqlite3_changes(db) == 0)
    rc = rd_error_set(err, RD_ENOTFOUND, "no stored tenant is named %.64s", a->key);
  sqlite3_finalize(st);
  return rc;
}

int rd_store_delete_tenant(rd_store_t *s, const char *name, rd_error_t *err) {
  delete_arg_t a = {"DELETE FROM tenants WHERE name = ?", name, "deleting a tenant", 1};
  return rd_store_with_db(s, delete_row, &a, err);
}

int rd_store_delete_owner(rd_store_t *s, const char *workload_id, rd_error_t *err) {
  delete_arg_t a = {"DELETE FROM workload_tenants WHERE workload_id = ?", workload_id,
                    "forgetting a workload's tenant", 0};
  return rd_store_with_db(s, delete_row, &a, err);
}

/* ---- list ---- */

typedef struct {
  rd_stored_tenant_t *v;
  size_t n;
} list_arg_t;

static int copy_text(sqlite3_stmt *st, int col, char *out, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, col);
  int len = sqlite3_column_bytes(st, col);
  if (t == NULL || len < 0 || (size_t)len >= cap) return 0;
  memcpy(out, t, (size_t)len + 1);
  return 1;
}

static int list_tenants(sqlite3 *db, const char *path, void *arg, rd_error_t *err) {
  list_arg_t *a = arg;
  sqlite3_stmt *st = NULL;
  size_t cap = 0;
  int rc = RD_OK, step;
  if (sqlite3_prepare_v2(db,
                         "SELECT name, token, created_unix, max_memory, max_workloads, weight, "
                         "insert_rate, sample_rate, max_gpu_memory FROM tenants ORDER BY name",
                         -1, &st, NULL) != SQLITE_OK) {
    return fail(db, path, "listing tenants", err);
  }
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (a->n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      rd_stored_tenant_t *nv = realloc(a->v, ncap * sizeof *nv);
      if (nv == NULL) {
        rc = rd_error_set(err, RD_ENOMEM, "out of memory listing tenants");
        break;
      }
      a->v = nv;
      cap = ncap;
    }
    rd_stored_tenant_t *t = &a->v[a->n];
    memset(t, 0, sizeof *t);
    sqlite3_int64 mw = sqlite3_column_int64(st, 4), wt = sqlite3_column_int64(st, 5);
    if (!copy_text(st, 0, t->name, sizeof t->name) || !copy_text(st, 1, t->token, sizeof t->token) ||
        mw < 0 || mw > UINT32_MAX || wt < 0 || wt > UINT32_MAX) {
      rc = rd_error_set(err, RD_ESTORE, "%s: a stored tenant has a malformed row", path);
      break;
    }
    t->created_unix = sqlite3_column_int64(st, 2);
    t->max_memory = (uint64_t)sqlite3_column_int64(st, 3);
    t->max_workloads = (uint32_t)mw;
    t->weight = (uint32_t)wt;
    t->insert_rate = sqlite3_column_double(st, 6);
    t->sample_rate = sqlite3_column_double(st, 7);
    t->max_gpu_memory = (uint64_t)sqlite3_column_int64(st, 8);
    a->n++;
  }
  if (rc == RD_OK && step != SQLITE_DONE) rc = fail(db, path, "listing tenants", err);
  sqlite3_finalize(st);
  return rc;
}

int rd_store_list_tenants(rd_store_t *s, rd_stored_tenant_t **out, size_t *n, rd_error_t *err) {
  list_arg_t a = {NULL, 0};
  int rc = rd_store_with_db(s, list_tenants, &a, err);
  if (rc != RD_OK) {
    free(a.v);
    a.v = NULL;
    a.n = 0;
  }
  *out = a.v;
  *n = a.n;
  return rc;
}

/* ---- owners ---- */

typedef struct {
  const char *id;
  const char *tenant; /* put */
  char *out;          /* get: 64 bytes */
} owner_arg_t;

static int put_owner(sqlite3 *db, const char *path, void *arg, rd_error_t *err) {
  const owner_arg_t *a = arg;
  sqlite3_stmt *st = NULL;
  int rc = RD_OK;
  if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO workload_tenants (workload_id, tenant) "
                         "VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK ||
      sqlite3_bind_text(st, 1, a->id, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_bind_text(st, 2, a->tenant, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_DONE)
    rc = fail(db, path, "storing a workload's tenant", err);
  sqlite3_finalize(st);
  return rc;
}

int rd_store_put_owner(rd_store_t *s, const char *workload_id, const char *tenant,
                       rd_error_t *err) {
  owner_arg_t a = {workload_id, tenant, NULL};
  return rd_store_with_db(s, put_owner, &a, err);
}

static int get_owner(sqlite3 *db, const char *path, void *arg, rd_error_t *err) {
  owner_arg_t *a = arg;
  sqlite3_stmt *st = NULL;
  int rc = RD_OK, step = SQLITE_ERROR;
  a->out[0] = '\0';
  if (sqlite3_prepare_v2(db, "SELECT tenant FROM workload_tenants WHERE workload_id = ?", -1,
                         &st, NULL) != SQLITE_OK ||
      sqlite3_bind_text(st, 1, a->id, -1, SQLITE_STATIC) != SQLITE_OK ||
      ((step = sqlite3_step(st)) != SQLITE_ROW && step != SQLITE_DONE))
    rc = fail(db, path, "reading a workload's tenant", err);
  else if (step == SQLITE_ROW && !copy_text(st, 0, a->out, 64))
    rc = rd_error_set(err, RD_ESTORE, "%s: workload %.64s has a malformed tenant name", path,
                      a->id);
  sqlite3_finalize(st);
  return rc;
}

int rd_store_get_owner(rd_store_t *s, const char *workload_id, char *name, rd_error_t *err) {
  owner_arg_t a = {workload_id, NULL, name};
  return rd_store_with_db(s, get_owner, &a, err);
}
