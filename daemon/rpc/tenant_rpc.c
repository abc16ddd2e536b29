/* tenant_rpc.c - the tenant RPCs and the data calls' row rates. */
#include "tenant_rpc.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "log.h"
#include "rd_clock.h"
#include "replayd.pb-c.h"

static void quota_from_pb(const Replayd__V1__TenantQuota *m, rd_tenant_quota_t *q) {
  memset(q, 0, sizeof *q);
  if (m == NULL) return;
  q->max_memory_bytes = m->max_memory_bytes;
  q->max_workloads = m->max_workloads;
  q->weight = m->weight;
  q->insert_rows_per_s = m->insert_rows_per_second;
  q->sample_rows_per_s = m->sample_rows_per_second;
  q->max_gpu_memory_bytes = m->max_gpu_memory_bytes;
}

static void quota_pb(const rd_tenant_quota_t *q, Replayd__V1__TenantQuota *m) {
  replayd__v1__tenant_quota__init(m);
  m->max_memory_bytes = q->max_memory_bytes;
  m->max_workloads = q->max_workloads;
  m->weight = q->weight;
  m->insert_rows_per_second = q->insert_rows_per_s;
  m->sample_rows_per_second = q->sample_rows_per_s;
  m->max_gpu_memory_bytes = q->max_gpu_memory_bytes;
}

/* m borrows info's name and qm. */
static void tenant_pb(rd_tenant_info_t *info, Replayd__V1__TenantQuota *qm,
                      Replayd__V1__Tenant *m) {
  replayd__v1__tenant__init(m);
  quota_pb(&info->quota, qm);
  m->name = info->name;
  m->quota = qm;
  m->workloads = info->workloads;
  m->memory_bytes = info->bytes;
  m->gpu_memory_bytes = info->gpu_bytes;
  m->created_unix = info->created_unix;
}

/* The tenant's message as it is now. */
static void reply_tenant(rd_handler_ctx_t *ctx, const char *name, char *token, rd_reply_t *r) {
  rd_tenant_t *t = rd_tenants_get(rd_registry_tenants(ctx->registry), name);
  if (t == NULL) { /* removed meanwhile */
    rd_reply_error(r, RD_ENOTFOUND, "no tenant is named \"%.64s\"", name);
    return;
  }
  rd_tenant_info_t info;
  rd_tenant_info(t, &info);
  rd_tenant_unref(t);
  Replayd__V1__TenantQuota qm;
  Replayd__V1__Tenant m;
  tenant_pb(&info, &qm, &m);
  if (token != NULL) m.token = token;
  rd_reply_pack(r, &m.base);
}

/* The end of a call that changes the tenant name: rc and err are the
 * change's. 0 with r failed by err, or 1 once the change is logged ("<done>
 * tenant \"name\"") and r is the caller's to fill. */
static int changed(int rc, const rd_error_t *err, const char *done, const char *name,
                   rd_reply_t *r) {
  if (!rd_reply_ok(r, rc, err)) return 0;
  rd_log_info("tenant", "%s tenant \"%s\"", done, name);
  return 1;
}

rd_reply_when_t rd_tenant_rpc_add(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                  const void *msg, rd_reply_t *r) {
  const Replayd__V1__AddTenantRequest *m = msg;
  if (!rd_auth_admin(ctx, ci->md, "AddTenant", r)) return RD_REPLY_NOW;
  rd_tenant_quota_t q;
  quota_from_pb(m->quota, &q);
  char token[RD_TENANT_TOKEN_LEN + 1];
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_tenants_add(rd_registry_tenants(ctx->registry), m->name, &q, token, &err);
  if (changed(rc, &err, "added", m->name, r)) reply_tenant(ctx, m->name, token, r);
  rd_secret_wipe(token, sizeof token);
  return RD_REPLY_NOW;
}

rd_reply_when_t rd_tenant_rpc_set(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                  const void *msg, rd_reply_t *r) {
  const Replayd__V1__SetTenantRequest *m = msg;
  if (!rd_auth_admin(ctx, ci->md, "SetTenant", r)) return RD_REPLY_NOW;
  rd_tenant_quota_t q;
  memset(&q, 0, sizeof q);
  unsigned mask = 0;
  if (m->max_memory_opt_case == REPLAYD__V1__SET_TENANT_REQUEST__MAX_MEMORY_OPT_MAX_MEMORY_BYTES) {
    q.max_memory_bytes = m->max_memory_bytes;
    mask |= RD_TQ_MEMORY;
  }
  if (m->max_workloads_opt_case ==
      REPLAYD__V1__SET_TENANT_REQUEST__MAX_WORKLOADS_OPT_MAX_WORKLOADS) {
    q.max_workloads = m->max_workloads;
    mask |= RD_TQ_WORKLOADS;
  }
  if (m->weight_opt_case == REPLAYD__V1__SET_TENANT_REQUEST__WEIGHT_OPT_WEIGHT) {
    q.weight = m->weight;
    mask |= RD_TQ_WEIGHT;
  }
  if (m->insert_rate_opt_case ==
      REPLAYD__V1__SET_TENANT_REQUEST__INSERT_RATE_OPT_INSERT_ROWS_PER_SECOND) {
    q.insert_rows_per_s = m->insert_rows_per_second;
    mask |= RD_TQ_INSERT_RATE;
  }
  if (m->sample_rate_opt_case ==
      REPLAYD__V1__SET_TENANT_REQUEST__SAMPLE_RATE_OPT_SAMPLE_ROWS_PER_SECOND) {
    q.sample_rows_per_s = m->sample_rows_per_second;
    mask |= RD_TQ_SAMPLE_RATE;
  }
  if (m->max_gpu_memory_opt_case ==
      REPLAYD__V1__SET_TENANT_REQUEST__MAX_GPU_MEMORY_OPT_MAX_GPU_MEMORY_BYTES) {
    q.max_gpu_memory_bytes = m->max_gpu_memory_bytes;
    mask |= RD_TQ_GPU_MEMORY;
  }
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_tenants_set(rd_registry_tenants(ctx->registry), m->name, &q, mask, &err);
  if (changed(rc, &err, "set the quota of", m->name, r)) reply_tenant(ctx, m->name, NULL, r);
  return RD_REPLY_NOW;
}

rd_reply_when_t rd_tenant_rpc_list(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                   const void *msg, rd_reply_t *r) {
  (void)msg;
  if (!rd_auth_admin(ctx, ci->md, "ListTenants", r)) return RD_REPLY_NOW;
  /* At most RD_TENANTS_MAX small messages: one allocation, well within
   * any message limit. */
  struct item {
    rd_tenant_info_t info;
    Replayd__V1__TenantQuota qm;
    Replayd__V1__Tenant tm;
  } *items = malloc(RD_TENANTS_MAX * sizeof *items);
  Replayd__V1__Tenant **tp = malloc(RD_TENANTS_MAX * sizeof *tp);
  rd_tenant_info_t *info = malloc(RD_TENANTS_MAX * sizeof *info);
  if (items == NULL || tp == NULL || info == NULL) {
    rd_reply_error(r, RD_ENOMEM, "out of memory listing tenants");
  } else {
    size_t n = rd_tenants_list(rd_registry_tenants(ctx->registry), info, RD_TENANTS_MAX);
    for (size_t i = 0; i < n; i++) {
      items[i].info = info[i];
      tenant_pb(&items[i].info, &items[i].qm, &items[i].tm);
      tp[i] = &items[i].tm;
    }
    Replayd__V1__ListTenantsResponse m = REPLAYD__V1__LIST_TENANTS_RESPONSE__INIT;
    m.n_tenants = n;
    m.tenants = tp;
    rd_reply_pack(r, &m.base);
  }
  free(items);
  free(tp);
  free(info);
  return RD_REPLY_NOW;
}

rd_reply_when_t rd_tenant_rpc_remove(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                     const void *msg, rd_reply_t *r) {
  const Replayd__V1__RemoveTenantRequest *m = msg;
  if (!rd_auth_admin(ctx, ci->md, "RemoveTenant", r)) return RD_REPLY_NOW;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_registry_remove_tenant(ctx->registry, m->name, &err);
  if (changed(rc, &err, "removed", m->name, r)) {
    Replayd__V1__RemoveTenantResponse reply = REPLAYD__V1__REMOVE_TENANT_RESPONSE__INIT;
    rd_reply_pack(r, &reply.base);
  }
  return RD_REPLY_NOW;
}

int rd_tenant_rpc_rows(const rd_workload_t *w, rd_tenant_rate_t kind, uint64_t rows,
                       rd_reply_t *r) {
  if (w->tenant == NULL) return 1;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_tenant_take_rows(w->tenant, kind, rows, rd_clock_now(), &err) == RD_OK) return 1;
  rd_reply_error(r, err.code, "%s", err.msg);
  return 0;
}

void rd_tenant_rpc_rows_back(const rd_workload_t *w, rd_tenant_rate_t kind, uint64_t rows) {
  if (w->tenant != NULL) rd_tenant_return_rows(w->tenant, kind, rows);
}
