/* replayctl_tenant.c - see replayctl_tenant.h. */
#include "replayctl_tenant.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"

static int failed(const rdc_error_t *e) {
  if (e->code > 0)
    fprintf(stderr, "replayctl: %s: %s\n", rdc_strerror(e->code), e->msg);
  else
    fprintf(stderr, "replayctl: %s\n", e->msg[0] ? e->msg : rdc_strerror(e->code));
  return RCTL_EXIT_CALL;
}

static void json_tenant(jw_t *w, const rdc_tenant_t *t, const char *token) {
  jw_object_begin(w);
  jw_key(w, "name");
  jw_string(w, t->name);
  if (token != NULL) {
    jw_key(w, "token");
    jw_string(w, token);
  }
  jw_key(w, "max_memory_bytes");
  jw_u64(w, t->quota.max_memory_bytes);
  jw_key(w, "max_workloads");
  jw_u64(w, t->quota.max_workloads);
  jw_key(w, "weight");
  jw_u64(w, t->quota.weight);
  jw_key(w, "insert_rows_per_second");
  jw_double(w, t->quota.insert_rows_per_second);
  jw_key(w, "sample_rows_per_second");
  jw_double(w, t->quota.sample_rows_per_second);
  jw_key(w, "workloads");
  jw_u64(w, t->workloads);
  jw_key(w, "memory_bytes");
  jw_u64(w, t->memory_bytes);
  jw_key(w, "created_unix");
  jw_i64(w, t->created_unix);
  jw_key(w, "max_gpu_memory_bytes");
  jw_u64(w, t->quota.max_gpu_memory_bytes);
  jw_key(w, "gpu_memory_bytes");
  jw_u64(w, t->gpu_memory_bytes);
  jw_object_end(w);
}

/* "-" for no limit of its own. */
static void fmt_limit(char *buf, size_t cap, double v, int integer) {
  if (v == 0) snprintf(buf, cap, "-");
  else if (integer) snprintf(buf, cap, "%.0f", v);
  else snprintf(buf, cap, "%g", v);
}

static void text_tenants(const rdc_tenant_t *v, size_t n) {
  printf("%-20s %6s %8s %14s %14s %12s %12s %14s %14s\n", "NAME", "WEIGHT", "WORKLDS", "MEMORY",
         "MAX MEMORY", "INSERT/S", "SAMPLE/S", "GPU MEMORY", "MAX GPU MEM");
  for (size_t i = 0; i < n; i++) {
    const rdc_tenant_t *t = &v[i];
    char wl[32], mm[32], ir[32], sr[32], maxw[16], mg[32];
    fmt_limit(maxw, sizeof maxw, t->quota.max_workloads, 1);
    snprintf(wl, sizeof wl, "%" PRIu32 "/%s", t->workloads, maxw);
    fmt_limit(mm, sizeof mm, (double)t->quota.max_memory_bytes, 1);
    fmt_limit(ir, sizeof ir, t->quota.insert_rows_per_second, 0);
    fmt_limit(sr, sizeof sr, t->quota.sample_rows_per_second, 0);
    fmt_limit(mg, sizeof mg, (double)t->quota.max_gpu_memory_bytes, 1);
    printf("%-20s %6" PRIu32 " %8s %14" PRIu64 " %14s %12s %12s %14" PRIu64 " %14s\n", t->name,
           t->quota.weight, wl, t->memory_bytes, mm, ir, sr, t->gpu_memory_bytes, mg);
  }
}

int rctl_cmd_tenant(rdc_client_t *c, const rctl_opts_t *o, const char *admin_token) {
  const char *sub = o->args[0], *name = o->n_args > 1 ? o->args[1] : NULL;
  rdc_error_t e;
  jw_t w;
  if (strcmp(sub, "ls") == 0) {
    rdc_tenant_t *v;
    size_t n;
    if (rdc_tenant_list(c, admin_token, &v, &n, &e) != RDC_OK) return failed(&e);
    if (o->json) {
      jw_init(&w, stdout);
      jw_array_begin(&w);
      for (size_t i = 0; i < n; i++) json_tenant(&w, &v[i], NULL);
      jw_array_end(&w);
      jw_finish(&w);
    } else {
      text_tenants(v, n);
    }
    free(v);
    return RCTL_EXIT_OK;
  }
  if (strcmp(sub, "rm") == 0) {
    if (rdc_tenant_remove(c, admin_token, name, &e) != RDC_OK) return failed(&e);
    if (o->json) {
      jw_print_string(stdout, "removed", name);
    } else {
      printf("removed tenant %s\n", name);
    }
    return RCTL_EXIT_OK;
  }
  rdc_tenant_quota_t q;
  unsigned mask;
  char msg[256];
  if (rctl_parse_tenant_quota(o->args + 2, o->n_args - 2, &q, &mask, msg, sizeof msg) != 0) {
    fprintf(stderr, "replayctl: %s\n", msg); /* rctl_parse_args checked it already */
    return RCTL_EXIT_USAGE;
  }
  rdc_tenant_t t;
  char token[RDC_TOKEN_MAX] = "";
  int add = strcmp(sub, "add") == 0;
  int rc = add ? rdc_tenant_add(c, admin_token, name, &q, token, &t, &e)
               : rdc_tenant_set(c, admin_token, name, &q, mask, &t, &e);
  if (rc != RDC_OK) return failed(&e);
  if (o->json) {
    jw_init(&w, stdout);
    json_tenant(&w, &t, add ? token : NULL);
    jw_finish(&w);
  } else {
    text_tenants(&t, 1);
    if (add) printf("token %s\n(shown once: the tenant's clients send it as x-replayd-token)\n",
                    token);
  }
  return RCTL_EXIT_OK;
}
