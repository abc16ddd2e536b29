/* auth.h - who may call what: the token in metadata "x-replayd-token".
 *
 * Every data call and DeleteWorkload carries its workload's 64-hex-digit
 * token; the admin calls (profiles, Plan) and DeleteWorkload accept the
 * server's admin token (admin.token in the state directory). The server
 * holds only the tokens' SHA-256 hashes and compares a presented token's
 * hash with them in constant time (secrets.h).
 */
#ifndef RD_AUTH_H
#define RD_AUTH_H

#include <grpc/grpc.h>

#include "handlers.h"

#define RD_TOKEN_KEY "x-replayd-token"

/* The referenced workload `id` if the call's token opens it: its own
 * token, its owner tenant's token (tenant.h), or (allow_admin) the admin
 * token; otherwise NULL with r failed: INVALID_ARGUMENT (no id), NOT_FOUND
 * (none, or another tenant's: tenants do not see each other's),
 * UNAUTHENTICATED (no token), PERMISSION_DENIED. */
rd_workload_t *rd_auth_workload(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                                const char *id, int allow_admin, rd_reply_t *r);

/* Who calls, for the calls that need no token (Register, Describe, List,
 * ServerInfo): the admin (admin = 1; tenant is the default tenant), a
 * tenant by its token, or anyone else, who is the default tenant (no
 * token, or a token that is no tenant's: a workload's, say). tenant is
 * referenced: rd_caller_release. */
typedef struct {
  int admin;
  rd_tenant_t *tenant;
} rd_caller_t;
void rd_auth_caller(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md, rd_caller_t *out);
void rd_caller_release(rd_caller_t *c);

/* 1 if the caller may see w: the admin, w's owner, or w's own token. */
int rd_auth_sees(const rd_caller_t *c, const grpc_metadata_array *md, const rd_workload_t *w);

/* 1 if the call carries the admin token; otherwise 0 with r failed
 * (UNAUTHENTICATED, PERMISSION_DENIED). what names the call. */
int rd_auth_admin(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const char *what,
                  rd_reply_t *r);

#endif
