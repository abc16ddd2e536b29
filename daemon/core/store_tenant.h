/* store_tenant.h - tenants and workload ownership in the store (tenant.h).
 *
 * Two tables of store.c's migration 3: tenants (name, token, created time,
 * quota; migration 4 adds max_gpu_memory) and workload_tenants (workload id -> tenant name; the default
 * tenant's workloads have no row). Each call is one statement, or one
 * transaction, on the store's connection (rd_store_with_db). Failures are
 * RD_ESTORE naming the database; a row that does not fit the structs
 * (edited by hand) is RD_ESTORE too.
 */
#ifndef RD_STORE_TENANT_H
#define RD_STORE_TENANT_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "store.h"

typedef struct {
  char name[64];
  char token[128];
  int64_t created_unix;
  uint64_t max_memory;
  uint32_t max_workloads;
  uint32_t weight;
  double insert_rate, sample_rate;
  uint64_t max_gpu_memory; /* migration 4 */
} rd_stored_tenant_t;

/* Insert or replace (by name). */
int rd_store_put_tenant(rd_store_t *s, const rd_stored_tenant_t *t, rd_error_t *err);
/* Delete the tenant's row; RD_ENOTFOUND if there is none. */
int rd_store_delete_tenant(rd_store_t *s, const char *name, rd_error_t *err);
/* Every stored tenant in name order; free(*out). */
int rd_store_list_tenants(rd_store_t *s, rd_stored_tenant_t **out, size_t *n, rd_error_t *err);

int rd_store_put_owner(rd_store_t *s, const char *workload_id, const char *tenant,
                       rd_error_t *err);
/* Forget the row (none is not an error). */
int rd_store_delete_owner(rd_store_t *s, const char *workload_id, rd_error_t *err);
/* name (64 bytes) receives the owner, or "" when the workload has no row. */
int rd_store_get_owner(rd_store_t *s, const char *workload_id, char *name, rd_error_t *err);

#endif
