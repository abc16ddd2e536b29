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

/* The referenced workload `id` if the call's token opens it (allow_admin:
 * or the admin token); otherwise NULL with r failed: INVALID_ARGUMENT (no
 * id), NOT_FOUND, UNAUTHENTICATED (no token), PERMISSION_DENIED. */
rd_workload_t *rd_auth_workload(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                                const char *id, int allow_admin, rd_reply_t *r);

/* 1 if the call carries the admin token; otherwise 0 with r failed
 * (UNAUTHENTICATED, PERMISSION_DENIED). what names the call. */
int rd_auth_admin(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const char *what,
                  rd_reply_t *r);

#endif
