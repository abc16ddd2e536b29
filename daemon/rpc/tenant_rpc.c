/* tenant_rpc.c - the tenant RPCs and the data calls' row rates. */
#include "tenant_rpc.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rd_clock.h"
#include "replayd.pb-c.h"

/* The quota's fields, one list for every copy between rd_tenant_quota_t
 * and the messages (AddTenant's and the replies' TenantQuota, SetTenant's
 * optional fields): where rd_tenant_quota_t keeps each, the name its
 * message descriptors give it (the same name and type in both messages,
 * and that type rd_tenant_quota_t's) and its bit in rd_tenants_set's mask. */
#define QUOTA_FIELD(field, pb, bit) \
  {offsetof(rd_tenant_quota_t, field), sizeof(((rd_tenant_quota_t *)0)->field), pb, bit}
static const struct {
  size_t at, size; /* in rd_tenant_quota_t */
  const char *pb;
  unsigned bit;
} quota_fields[] = {
    QUOTA_FIELD(max_memory_bytes, "max_memory_bytes", RD_TQ_MEMORY),
    QUOTA_FIELD(max_workloads, "max_workloads", RD_TQ_WORKLOADS),
    QUOTA_FIELD(weight, "weight", RD_TQ_WEIGHT),
    QUOTA_FIELD(insert_rows_per_s, "insert_rows_per_second", RD_TQ_INSERT_RATE),
    QUOTA_FIELD(sample_rows_per_s, "sample_rows_per_second", RD_TQ_SAMPLE_RATE),
    QUOTA_FIELD(max_gpu_memory_bytes, "max_gpu_memory_bytes", RD_TQ_GPU_MEMORY),
};
#define N_QUOTA_FIELDS (sizeof quota_fields / sizeof quota_fields[0])

/* Where message m keeps quota field i, or NULL where m leaves it out
 * (SetTenantRequest's are each a oneof of one: set or not). */
static void *pb_quota_field(const ProtobufCMessage *m, size_t i) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, quota_fields[i].pb);
  char *p = (char *)m;
  /* uint32, or uint64 and double: as wide as rd_tenant_quota_t's field */
  assert(f != NULL && (f->type == PROTOBUF_C_TYPE_UINT32 ? 4 : 8) == quota_fields[i].size);
  if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(uint32_t *)(p + f->quantifier_offset) != f->id)
    return NULL;
  return p + f->offset;
}

/* q as m sets it (all 0 for no m, or where m leaves a field out), and the
 * mask of the fields m sets. */
static unsigned quota_from_pb(const ProtobufCMessage *m, rd_tenant_quota_t *q) {
  unsigned mask = 0;
  memset(q, 0, sizeof *q);
  for (size_t i = 0; m != NULL && i < N_QUOTA_FIELDS; i++) {
    const void *v = pb_quota_field(m, i);
    if (v == NULL) continue;
    memcpy((char *)q + quota_fields[i].at, v, quota_fields[i].size);
    mask |= quota_fields[i].bit;
  }
  return mask;
}

static void quota_pb(const rd_tenant_quota_t *q, Replayd__V1__TenantQuota *m) {
  replayd__v1__tenant_quota__init(m);
  for (size_t i = 0; i < N_QUOTA_FIELDS; i++)
    memcpy(pb_quota_field(&m->base, i), (const char *)q + quota_fields[i].at,
           quota_fields[i].size);
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

rd_reply_when_t rd_tenant_rpc_add(rd_handler_ctx_t *ctx, const Replayd__V1__AddTenantRequest *m,
                                  rd_reply_t *r) {
  rd_tenant_quota_t q;
  quota_from_pb(m->quota != NULL ? &m->quota->base : NULL, &q);
  char token[RD_TENANT_TOKEN_LEN + 1];
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_tenants_add(rd_registry_tenants(ctx->registry), m->name, &q, token, &err);
  if (changed(rc, &err, "added", m->name, r)) reply_tenant(ctx, m->name, token, r);
  rd_secret_wipe(token, sizeof token);
  return RD_REPLY_NOW;
}

/* Only the fields the request sets change. */
rd_reply_when_t rd_tenant_rpc_set(rd_handler_ctx_t *ctx, const Replayd__V1__SetTenantRequest *m,
                                  rd_reply_t *r) {
  rd_tenant_quota_t q;
  unsigned mask = quota_from_pb(&m->base, &q);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_tenants_set(rd_registry_tenants(ctx->registry), m->name, &q, mask, &err);
  if (changed(rc, &err, "set the quota of", m->name, r)) reply_tenant(ctx, m->name, NULL, r);
  return RD_REPLY_NOW;
}

rd_reply_when_t rd_tenant_rpc_list(rd_handler_ctx_t *ctx, rd_reply_t *r) {
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

rd_reply_when_t rd_tenant_rpc_remove(rd_handler_ctx_t *ctx,
                                     const Replayd__V1__RemoveTenantRequest *m, rd_reply_t *r) {
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
