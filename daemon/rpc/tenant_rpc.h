/* tenant_rpc.h - the tenant RPCs (AddTenant, SetTenant, ListTenants,
 * RemoveTenant: the admin's) and the per-tenant row rates of the data
 * calls. core/tenant.h has the rules; this file only authorizes, converts
 * and replies. The method table's rows are in handlers.c.
 */
#ifndef RD_TENANT_RPC_H
#define RD_TENANT_RPC_H

#include "handlers.h"
#include "tenant.h"

/* AddTenantRequest, SetTenantRequest, ListTenantsRequest, RemoveTenantRequest. */
rd_rpc_handler_t rd_tenant_rpc_add, rd_tenant_rpc_set, rd_tenant_rpc_list, rd_tenant_rpc_remove;

/* Charge rows of a remote insert or sample to w's owner's bucket: 1, or 0
 * with r failed (RESOURCE_EXHAUSTED naming the quota; nothing was done). */
int rd_tenant_rpc_rows(const rd_workload_t *w, rd_tenant_rate_t kind, uint64_t rows,
                       rd_reply_t *r);
/* The call failed after all: give the rows back. */
void rd_tenant_rpc_rows_back(const rd_workload_t *w, rd_tenant_rate_t kind, uint64_t rows);

#endif
