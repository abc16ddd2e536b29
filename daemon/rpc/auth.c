/* auth.c - workload and admin tokens. */
#include "auth.h"

#include "secrets.h"

#include <grpc/slice.h>
#include <string.h>

static int find_token(const grpc_metadata_array *md, const char **tok, size_t *len) {
  for (size_t i = 0; i < md->count; i++)
    if (grpc_slice_str_cmp(md->metadata[i].key, RD_TOKEN_KEY) == 0) {
      *tok = (const char *)GRPC_SLICE_START_PTR(md->metadata[i].value);
      *len = GRPC_SLICE_LENGTH(md->metadata[i].value);
      return 1;
    }
  return 0;
}

static int admin_token_ok(const rd_handler_ctx_t *ctx, const char *tok, size_t len) {
  return ctx->has_admin_token && rd_token_matches(ctx->admin_token_hash, tok, len);
}

rd_workload_t *rd_auth_workload(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                                const char *id, int allow_admin, rd_reply_t *r) {
  if (id == NULL || id[0] == '\0') {
    rd_reply_error(r, RD_EINVAL, "workload_id is required");
    return NULL;
  }
  rd_workload_t *w = rd_registry_get(ctx->registry, id);
  if (w == NULL) {
    rd_reply_error(r, RD_ENOTFOUND, "no workload with id \"%.64s\"", id);
    return NULL;
  }
  const char *tok;
  size_t len;
  if (!find_token(md, &tok, &len)) {
    rd_reply_status(r, GRPC_STATUS_UNAUTHENTICATED,
                    "this call needs the workload's token in metadata \"" RD_TOKEN_KEY "\"");
    rd_workload_unref(w);
    return NULL;
  }
  if (rd_workload_token_ok(w, tok, len)) return w;
  /* A tenant's token opens its own workloads; to another tenant a workload
   * it does not own does not exist. */
  rd_tenant_t *t = rd_tenants_by_token(rd_registry_tenants(ctx->registry), tok, len);
  if (t != NULL) {
    int own = t == w->tenant;
    rd_tenant_unref(t);
    if (own) return w;
    rd_reply_error(r, RD_ENOTFOUND, "no workload with id \"%.64s\"", id);
    rd_workload_unref(w);
    return NULL;
  }
  if (!(allow_admin && admin_token_ok(ctx, tok, len))) {
    rd_reply_status(r, GRPC_STATUS_PERMISSION_DENIED, "the token does not open workload %s",
                    w->id);
    rd_workload_unref(w);
    return NULL;
  }
  return w;
}

int rd_auth_admin(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const char *what,
                  rd_reply_t *r) {
  const char *tok;
  size_t len;
  if (!find_token(md, &tok, &len)) {
    rd_reply_status(r, GRPC_STATUS_UNAUTHENTICATED,
                    "%s needs the server's admin token in metadata \"" RD_TOKEN_KEY "\" (the "
                    "file admin.token in its state directory)", what);
    return 0;
  }
  if (!admin_token_ok(ctx, tok, len)) {
    rd_reply_status(r, GRPC_STATUS_PERMISSION_DENIED, "%s needs the server's admin token; this "
                    "token is not it", what);
    return 0;
  }
  return 1;
}

void rd_auth_caller(const rd_handler_ctx_t *ctx, const grpc_metadata_array *md, rd_caller_t *out) {
  rd_tenants_t *ts = rd_registry_tenants(ctx->registry);
  const char *tok;
  size_t len;
  out->admin = 0;
  out->tenant = NULL;
  if (find_token(md, &tok, &len)) {
    out->admin = admin_token_ok(ctx, tok, len);
    if (!out->admin) out->tenant = rd_tenants_by_token(ts, tok, len);
  }
  if (out->tenant == NULL) out->tenant = rd_tenants_default(ts);
}

void rd_caller_release(rd_caller_t *c) {
  rd_tenant_unref(c->tenant);
  c->tenant = NULL;
}

int rd_auth_sees(const rd_caller_t *c, const grpc_metadata_array *md, const rd_workload_t *w) {
  if (c->admin || c->tenant == w->tenant) return 1;
  const char *tok;
  size_t len;
  return find_token(md, &tok, &len) && rd_workload_token_ok(w, tok, len);
}
