/* store.h - what must survive a restart, in SQLite (state_dir/replayd.db).
 *
 * Today: registered workload specs (id, token, created time, the spec as
 * serialized replayd.v1.WorkloadSpec bytes). Their data (rows, priorities)
 * does not persist yet: a restart brings each workload back empty.
 * Schema changes are versioned migrations recorded in PRAGMA user_version.
 * One connection, serialized by an internal mutex.
 */
#ifndef RD_STORE_H
#define RD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

/* Failures of the state database or a state file (I/O, full disk,
 * corruption, permissions, a schema from a newer replayd) are RD_ESTORE
 * (rd_error.h): not the caller's input, so a server reports them as
 * INTERNAL. */

typedef struct rd_store rd_store_t;

typedef struct {
  char id[64];
  char token[128];
  int64_t created_unix;
  uint8_t *spec;     /* serialized WorkloadSpec (malloc'd) */
  size_t spec_len;
} rd_stored_workload_t;

/* Open (creating the directory and file, mode 0700/0600) and migrate. */
int rd_store_open(rd_store_t **out, const char *state_dir, rd_error_t *err);
void rd_store_close(rd_store_t *s);
int rd_store_schema_version(rd_store_t *s);

int rd_store_put_workload(rd_store_t *s, const rd_stored_workload_t *w, rd_error_t *err);
int rd_store_delete_workload(rd_store_t *s, const char *id, rd_error_t *err);
/* All stored workloads in creation order; free with rd_store_free_workloads. */
int rd_store_list_workloads(rd_store_t *s, rd_stored_workload_t **out, size_t *n,
                            rd_error_t *err);
void rd_store_free_workloads(rd_stored_workload_t *w, size_t n);

/* The operator's admin token: read from state_dir/admin.token, created
 * (random, mode 0600) if absent. buf must hold 65 bytes. */
int rd_store_admin_token(const char *state_dir, char *buf, size_t len, rd_error_t *err);

#endif
