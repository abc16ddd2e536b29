/* store.h - what must survive a restart, in SQLite (state_dir/replayd.db).
 *
 * Today: registered workload specs (id, the token's hash, created time,
 * the spec as serialized replayd.v1.WorkloadSpec bytes), and profiles: measured or
 * imported latencies of primitives (profile.h). Workload data (rows,
 * priorities) does not persist yet: a restart brings each workload back
 * empty. Schema changes are versioned migrations recorded in PRAGMA
 * user_version. One connection, serialized by an internal mutex.
 */
#ifndef RD_STORE_H
#define RD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile.h"
#include "rd_error.h"

/* The schema version this build migrates to (1: workloads, 2: profiles,
 * 3: workload tokens stored as their SHA-256, 4: tenants). */
#define RD_STORE_SCHEMA_VERSION 5

/* Failures of the state database or a state file (I/O, full disk,
 * corruption, permissions, a schema from a newer replayd) are RD_ESTORE
 * (rd_error.h): not the caller's input, so a server reports them as
 * INTERNAL. */

typedef struct rd_store rd_store_t;

typedef struct {
  char id[64];
  char token[128]; /* the token's stored form, "sha256:" + 64 hex digits
                      (secrets.h rd_token_hash_format): never the token */
  int64_t created_unix;
  uint8_t *spec;     /* serialized WorkloadSpec (malloc'd) */
  size_t spec_len;
} rd_stored_workload_t;

/* Open (creating the directory and file, mode 0700/0600), check and
 * migrate. First takes an exclusive flock on state_dir/replayd.lock (the
 * pid written in) for the store's life, so one store, in one process, owns
 * a state directory: RD_EBUSY "state directory X is in use by replayd pid
 * N" if another holds it, before the database is touched. The kernel
 * releases it on any exit; close releases it too. Then PRAGMA quick_check:
 * a damaged database is RD_ESTORE naming the file, what to do and the
 * first problems. */
int rd_store_open(rd_store_t **out, const char *state_dir, rd_error_t *err);
void rd_store_close(rd_store_t *s);
int rd_store_schema_version(rd_store_t *s);

/* Run fn on the store's connection under its mutex, for the tables that
 * other files keep (store_tenant.c). path: the database file, for messages. */
struct sqlite3;
typedef int (*rd_store_db_fn)(struct sqlite3 *db, const char *path, void *arg, rd_error_t *err);
int rd_store_with_db(rd_store_t *s, rd_store_db_fn fn, void *arg, rd_error_t *err);

int rd_store_put_workload(rd_store_t *s, const rd_stored_workload_t *w, rd_error_t *err);
int rd_store_delete_workload(rd_store_t *s, const char *id, rd_error_t *err);
/* Replace a stored workload's spec (its owner changed a setting, e.g. the
 * rate limiter). RD_ENOTFOUND if it is not stored. */
int rd_store_update_spec(rd_store_t *s, const char *id, const uint8_t *spec, size_t len,
                         rd_error_t *err);
/* All stored workloads in creation order; free with rd_store_free_workloads. */
int rd_store_list_workloads(rd_store_t *s, rd_stored_workload_t **out, size_t *n,
                            rd_error_t *err);
void rd_store_free_workloads(rd_stored_workload_t *w, size_t n);

/* ---- Profiles ----
 *
 * One row per (device fingerprint, primitive, threads, shape: batch,
 * capacity, fanout, algorithm, network; build): latency, reps, items,
 * source, measured_unix. A profile is reused only by the build that
 * measured it (profile.h: rd_profile_build), on a device of the same
 * fingerprint, for the same shape. Rows read back are validated
 * (rd_profile_validate); one that fails (edited by hand) is RD_ESTORE.
 * Lists are in key order (device, algorithm, network, batch, capacity,
 * fanout, build, primitive, threads), so exports are stable. */

/* Insert or replace (same key: the newer row wins). RD_EINVAL if p is
 * invalid. */
int rd_store_put_profile(rd_store_t *s, const rd_profile_t *p, rd_error_t *err);
/* Insert or replace n profiles in one transaction: all or none. */
int rd_store_put_profiles(rd_store_t *s, const rd_profile_t *p, size_t n, rd_error_t *err);
/* Every profile of device_fp for this shape and build (any primitive and
 * thread count); *out is NULL and *n 0 when there are none (a miss). Free
 * with rd_store_free_profiles. */
int rd_store_get_profiles(rd_store_t *s, const char *device_fp, const rd_profile_key_t *shape,
                          const char *build, rd_profile_t **out, size_t *n, rd_error_t *err);
/* Every stored profile. */
int rd_store_list_profiles(rd_store_t *s, rd_profile_t **out, size_t *n, rd_error_t *err);
/* A page of that list: up to max profiles (1..RD_STORE_PAGE_MAX) whose key
 * comes after after's key (its key fields: device_fp, primitive, threads,
 * shape, build; NULL = from the first), in list order. One indexed range
 * read: a listing that resumes after its last key (keyset paging) never
 * skips or repeats a row stored throughout, whatever is stored or cleared
 * between pages. *out is NULL and *n 0 past the end. */
#define RD_STORE_PAGE_MAX 100000u
int rd_store_list_profiles_after(rd_store_t *s, const rd_profile_t *after, size_t max,
                                 rd_profile_t **out, size_t *n, rd_error_t *err);
void rd_store_free_profiles(rd_profile_t *p);
/* Forget every profile; *removed (may be NULL) receives how many. */
int rd_store_clear_profiles(rd_store_t *s, size_t *removed, rd_error_t *err);

/* Write every profile to f as JSON lines (profile_jsonl.h), in list
 * order; *n (may be NULL) receives the count. f stays open (a file, or
 * open_memstream for a reply). RD_ESTORE if writing fails. */
int rd_store_export_profiles(rd_store_t *s, FILE *f, size_t *n, rd_error_t *err);
/* Read JSON lines from f (a file, or fmemopen over a request's bytes) and
 * store them with source "imported", in one transaction: every line is
 * validated, and on the first bad one (RD_EINVAL, "line N: ...") nothing is
 * imported. Blank lines are skipped. Rows with the key of a stored row
 * replace it. *n (may be NULL) receives the count imported. */
int rd_store_import_profiles(rd_store_t *s, FILE *f, size_t *n, rd_error_t *err);

/* The operator's admin token: read from state_dir/admin.token, created
 * (random, mode 0600) if absent. buf must hold 65 bytes. */
int rd_store_admin_token(const char *state_dir, char *buf, size_t len, rd_error_t *err);

#endif
