/* tenant_rpc.h - the tenant RPCs (AddTenant, SetTenant, ListTenants,
 * RemoveTenant: the admin's) and the per-tenant row rates of the data
 * calls. core/tenant.h has the rules; this file only converts and
 * replies. The method table's rows are in handlers.c.
 */
#ifndef RD_TENANT_RPC_H
#define RD_TENANT_RPC_H

#include "handlers.h"
#include "replayd.pb-c.h"
#include "tenant.h"

/* The methods' handlers: the admin's, so rd_handle has checked the admin
 * token before it calls them (handlers.c). Each answers r now. */
rd_reply_when_t rd_tenant_rpc_add(rd_handler_ctx_t *ctx, const Replayd__V1__AddTenantRequest *m,
                                  rd_reply_t *r);
rd_reply_when_t rd_tenant_rpc_set(rd_handler_ctx_t *ctx, const Replayd__V1__SetTenantRequest *m,
                                  rd_reply_t *r);
rd_reply_when_t rd_tenant_rpc_list(rd_handler_ctx_t *ctx, rd_reply_t *r);
rd_reply_when_t rd_tenant_rpc_remove(rd_handler_ctx_t *ctx,
                                     const Replayd__V1__RemoveTenantRequest *m, rd_reply_t *r);

/* Charge rows of a remote insert or sample to w's owner's bucket: 1, or 0
 * with r failed (RESOURCE_EXHAUSTED naming the quota; nothing was done). */
int rd_tenant_rpc_rows(const rd_workload_t *w, rd_tenant_rate_t kind, uint64_t rows,
                       rd_reply_t *r);
/* The call failed after all: give the rows back. */
void rd_tenant_rpc_rows_back(const rd_workload_t *w, rd_tenant_rate_t kind, uint64_t rows);

#endif
