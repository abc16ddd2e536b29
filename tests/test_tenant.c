/* test_tenant.c - tenants (daemon/core/tenant.h) without a server: names
 * and quotas refused with nothing changed, the token bucket's arithmetic
 * on a given clock (a batch may overdraw, the next waits for the debt, the
 * retry hint, refunds capped at the burst), admission by workload count
 * and memory, and the set kept in the store across a reopen, the default
 * tenant's quota included. Threads charge one bucket at once (TSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "rdt_dir.h"
#include "store.h"
#include "share.h"
#include "tenant.h"
#include "rdt_th_group.h"
#include "rdt_main.h"

static rd_tenants_t *open_mem(void) {
  rd_tenants_t *ts;
  rd_error_t e;
  assert_int_equal(rd_tenants_open(&ts, NULL, &e), RD_OK);
  return ts;
}

/* Tenant name added to ts with quota q (its token unused), and held. */
static rd_tenant_t *added(rd_tenants_t *ts, const char *name, const rd_tenant_quota_t *q) {
  char tok[RD_TENANT_TOKEN_LEN + 1];
  rd_error_t e;
  assert_int_equal(rd_tenants_add(ts, name, q, tok, &e), RD_OK);
  return rd_tenants_get(ts, name);
}

/* A fresh in-memory set whose default tenant has the mask's fields of q;
 * that tenant, held, in *t. */
static rd_tenants_t *with_default(const rd_tenant_quota_t *q, unsigned mask, rd_tenant_t **t) {
  rd_tenants_t *ts = open_mem();
  rd_error_t e;
  assert_int_equal(rd_tenants_set(ts, RD_TENANT_DEFAULT, q, mask, &e), RD_OK);
  *t = rd_tenants_default(ts);
  return ts;
}

static void test_names_and_quotas(void **state) {
  (void)state;
  rd_tenants_t *ts = open_mem();
  char tok[RD_TENANT_TOKEN_LEN + 1];
  rd_tenant_quota_t q = {0};
  rd_error_t e;
  static const char *const bad[] = {"", "A", "-a", "a b", "a/b", "é",
                                    "0123456789012345678901234567890123456789012345678901234567890123"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(rd_tenants_add(ts, bad[i], &q, tok, &e), RD_EINVAL);
  assert_int_equal(rd_tenants_add(ts, RD_TENANT_DEFAULT, &q, tok, &e), RD_EINVAL);
  assert_non_null(strstr(e.msg, "already exists"));
  rd_tenant_quota_t w = {.weight = RD_TENANT_WEIGHT_MAX + 1};
  assert_int_equal(rd_tenants_add(ts, "a", &w, tok, &e), RD_EINVAL);
  rd_tenant_quota_t r = {.insert_rows_per_s = NAN};
  assert_int_equal(rd_tenants_add(ts, "a", &r, tok, &e), RD_EINVAL);
  r.insert_rows_per_s = 2 * RD_TENANT_RATE_MAX;
  assert_int_equal(rd_tenants_add(ts, "a", &r, tok, &e), RD_EINVAL);
  rd_tenant_info_t listed[2];
  assert_int_equal(rd_tenants_list(ts, listed, 2), 1);
  assert_int_equal(rd_tenants_add(ts, "a.b-c_9", &q, tok, &e), RD_OK);
  assert_int_equal(strlen(tok), RD_TENANT_TOKEN_LEN);
  rd_tenant_t *t = rd_tenants_by_token(ts, tok, strlen(tok));
  assert_non_null(t);
  assert_string_equal(t->name, "a.b-c_9");
  assert_int_equal(rd_tenant_weight(t), 1); /* 0 means 1 */
  rd_tenant_unref(t);
  assert_null(rd_tenants_by_token(ts, tok, strlen(tok) - 1));
  assert_null(rd_tenants_by_token(ts, "", 0));
  /* A refused set changes nothing. */
  rd_tenant_quota_t big = {.weight = 5000};
  assert_int_equal(rd_tenants_set(ts, "a.b-c_9", &big, RD_TQ_WEIGHT, &e), RD_EINVAL);
  assert_int_equal(rd_tenants_set(ts, "nobody", &q, RD_TQ_WEIGHT, &e), RD_ENOTFOUND);
  t = rd_tenants_get(ts, "a.b-c_9");
  assert_int_equal(rd_tenant_weight(t), 1);
  rd_tenant_unref(t);
  assert_int_equal(rd_tenants_remove(ts, RD_TENANT_DEFAULT, &e), RD_ESTATE);
  assert_int_equal(rd_tenants_remove(ts, "a.b-c_9", &e), RD_OK);
  assert_null(rd_tenants_by_token(ts, tok, strlen(tok)));
  rd_tenants_close(ts);
}

static void test_bucket(void **state) {
  (void)state;
  rd_tenant_quota_t q = {.insert_rows_per_s = 100};
  rd_tenant_t *t;
  rd_tenants_t *ts = with_default(&q, RD_TQ_INSERT_RATE, &t);
  rd_error_t e;
  /* The bucket starts full (one second: 100 rows) at the set's time;
   * times below are that clock's, in the future of it. */
  double t0 = t->insert_bucket.last + 10; /* 10 s later: still full, capped */
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 250, t0, &e), RD_OK); /* 100 - 250 */
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 1, t0, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "insert_rows_per_second"));
  assert_non_null(strstr(e.msg, "retry in 1500 ms"));
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 1, t0 + 1.4, &e), RD_ETOOBIG);
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 1, t0 + 1.5, &e), RD_OK);
  /* Samples have their own bucket: unlimited here. */
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_SAMPLE, 1 << 30, t0, &e), RD_OK);
  /* Rows given back never fill it past the burst. */
  rd_tenant_return_rows(t, RD_TENANT_INSERT, 1000000);
  assert_true(t->insert_bucket.tokens == 100);
  /* The clock going backwards (another thread's earlier reading) adds nothing. */
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 100, t0 + 1.5, &e), RD_OK);
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 1, t0 + 1.0, &e), RD_OK); /* 0 >= 0 */
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 1, t0 + 1.0, &e), RD_ETOOBIG);
  /* Lifting the quota lets everything through. */
  q.insert_rows_per_s = 0;
  assert_int_equal(rd_tenants_set(ts, RD_TENANT_DEFAULT, &q, RD_TQ_INSERT_RATE, &e), RD_OK);
  assert_int_equal(rd_tenant_take_rows(t, RD_TENANT_INSERT, 1 << 30, t0, &e), RD_OK);
  rd_tenant_unref(t);
  rd_tenants_close(ts);
}

static void test_admission(void **state) {
  (void)state;
  rd_tenants_t *ts = open_mem();
  rd_tenant_quota_t q = {.max_memory_bytes = 1000, .max_workloads = 2};
  rd_tenant_t *t = added(ts, "a", &q);
  rd_error_t e;
  assert_int_equal(rd_tenant_admit(t, 1001, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "max_memory_bytes"));
  assert_int_equal(rd_tenant_admit(t, 600, &e), RD_OK);
  rd_tenant_charge(t, +1, 600);
  assert_int_equal(rd_tenant_admit(t, 401, &e), RD_ETOOBIG);
  assert_int_equal(rd_tenant_admit(t, 400, &e), RD_OK);
  rd_tenant_charge(t, +1, 400);
  assert_int_equal(rd_tenant_admit(t, 0, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "max_workloads"));
  assert_int_equal(rd_tenants_remove(ts, "a", &e), RD_ESTATE);
  /* GPU memory: no own limit admits any; a limit counts what is charged. */
  assert_int_equal(rd_tenant_admit_gpu(t, 1ull << 40, &e), RD_OK);
  rd_tenant_quota_t g = {.max_gpu_memory_bytes = 500};
  assert_int_equal(rd_tenants_set(ts, "a", &g, RD_TQ_GPU_MEMORY, &e), RD_OK);
  assert_int_equal(rd_tenant_admit_gpu(t, 501, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "max_gpu_memory_bytes 500"));
  assert_int_equal(rd_tenant_admit_gpu(t, 0, &e), RD_OK); /* nothing on a GPU */
  rd_tenant_charge_gpu(t, +1, 300);
  assert_int_equal(rd_tenant_admit_gpu(t, 201, &e), RD_ETOOBIG);
  assert_int_equal(rd_tenant_admit_gpu(t, 200, &e), RD_OK);
  rd_tenant_charge_gpu(t, -1, 300);
  assert_int_equal(rd_tenant_admit_gpu(t, 500, &e), RD_OK);
  rd_tenant_charge(t, -1, 600);
  rd_tenant_charge(t, -1, 400);
  rd_tenant_info_t info;
  rd_tenant_info(t, &info);
  assert_int_equal(info.workloads, 0);
  assert_int_equal(info.bytes, 0);
  assert_int_equal(rd_tenants_remove(ts, "a", &e), RD_OK);
  /* A removed tenant admits nothing, though a caller still holds it. */
  assert_int_equal(rd_tenant_admit(t, 1, &e), RD_ENOTFOUND);
  rd_tenant_unref(t);
  rd_tenants_close(ts);
}

static void test_persists(void **state) {
  (void)state;
  char dir[256];
  assert_int_equal(rdt_tmpdir(dir, sizeof dir, "tenant"), 0);
  rd_store_t *st;
  rd_error_t e;
  assert_int_equal(rd_store_open(&st, dir, &e), RD_OK);
  rd_tenants_t *ts;
  assert_int_equal(rd_tenants_open(&ts, st, &e), RD_OK);
  char tok[RD_TENANT_TOKEN_LEN + 1];
  rd_tenant_quota_t q = {1 << 20, 3, 7, 10.5, 20.25, 5ull << 30};
  assert_int_equal(rd_tenants_add(ts, "b", &q, tok, &e), RD_OK);
  rd_tenant_quota_t d = {.max_workloads = 9};
  assert_int_equal(rd_tenants_set(ts, RD_TENANT_DEFAULT, &d, RD_TQ_WORKLOADS, &e), RD_OK);
  assert_int_equal(rd_tenants_put_owner(ts, "w1", "b", &e), RD_OK);
  assert_int_equal(rd_tenants_put_owner(ts, "w2", RD_TENANT_DEFAULT, &e), RD_OK); /* no row */
  rd_tenants_close(ts);
  /* The store holds the token's hash, never the token. */
  sqlite3 *db;
  char path[300];
  snprintf(path, sizeof path, "%s/replayd.db", dir);
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *q1;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT token FROM tenants WHERE name = 'b'", -1, &q1,
                                      NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(q1), SQLITE_ROW);
  const char *stored = (const char *)sqlite3_column_text(q1, 0);
  assert_int_equal(strncmp(stored, RD_TOKEN_HASH_PREFIX, strlen(RD_TOKEN_HASH_PREFIX)), 0);
  assert_null(strstr(stored, tok));
  sqlite3_finalize(q1);
  sqlite3_close(db);
  assert_int_equal(rd_tenants_open(&ts, st, &e), RD_OK);
  rd_tenant_t *b = rd_tenants_by_token(ts, tok, strlen(tok));
  assert_non_null(b);
  rd_tenant_info_t info;
  rd_tenant_info(b, &info);
  assert_string_equal(info.name, "b");
  assert_true(info.quota.max_memory_bytes == 1 << 20 && info.quota.max_workloads == 3 &&
              info.quota.weight == 7 && info.quota.insert_rows_per_s == 10.5 &&
              info.quota.sample_rows_per_s == 20.25 &&
              info.quota.max_gpu_memory_bytes == 5ull << 30);
  rd_tenant_t *o = rd_tenants_owner(ts, "w1");
  assert_true(o == b);
  rd_tenant_unref(o);
  o = rd_tenants_owner(ts, "w2");
  assert_string_equal(o->name, RD_TENANT_DEFAULT);
  rd_tenant_info(o, &info);
  assert_int_equal(info.quota.max_workloads, 9);
  rd_tenant_unref(o);
  rd_tenant_unref(b);
  /* Removed: its workloads' rows would name a tenant that is gone; they
   * go to the default tenant (logged). */
  assert_int_equal(rd_tenants_remove(ts, "b", &e), RD_OK);
  o = rd_tenants_owner(ts, "w1");
  assert_string_equal(o->name, RD_TENANT_DEFAULT);
  rd_tenant_unref(o);
  assert_int_equal(rd_tenants_delete_owner(ts, "w1", &e), RD_OK);
  rd_tenants_close(ts);
  rd_store_close(st);
  rdt_rmtree(dir);
}

/* SetTenant's weight reaches its workloads' device shares at once
 * (rd_share_set_group_weight_all): driven through the CPU's pool with
 * simulated steps, the tenant's share goes from 1:1 to 3:1. */
static void test_weight_reaches_shares(void **state) {
  (void)state;
  rd_tenants_t *ts = open_mem();
  rd_tenant_quota_t q = {0};
  rd_tenant_t *t = added(ts, "w", &q);
  rd_error_t e;
  static int other;
  rd_share_pool_t *cpu = rd_share_pool_device(RD_LEARNER_ON_CPU, 0);
  rd_share_t *a = rd_share_join(cpu, t, rd_tenant_weight(t)), *b = rd_share_join(cpu, &other, 1);
  for (int phase = 0; phase < 2; phase++) {
    double a0 = rd_share_charged(a), b0 = rd_share_charged(b);
    for (int i = 0; i < 4000; i++) {
      rd_share_t *s = rd_share_pick(cpu);
      rd_share_begin(s, 1);
      rd_share_end(s, 1, 1e-3);
    }
    double da = rd_share_charged(a) - a0, db = rd_share_charged(b) - b0;
    assert_true(fabs(da / (da + db) - (phase == 0 ? 0.5 : 0.75)) < 0.02);
    q.weight = 3;
    assert_int_equal(rd_tenants_set(ts, "w", &q, RD_TQ_WEIGHT, &e), RD_OK);
  }
  rd_share_leave(a);
  rd_share_leave(b);
  rd_tenant_unref(t);
  rd_tenants_close(ts);
}

static int charge(void *t, int unused) {
  (void)unused;
  rd_error_t e;
  for (int i = 0; i < 20000; i++) {
    if (rd_tenant_take_rows(t, RD_TENANT_SAMPLE, 3, 1.0 + i * 1e-6, &e) != RD_OK)
      rd_tenant_return_rows(t, RD_TENANT_SAMPLE, 0);
    rd_tenant_charge(t, +1, 5);
    rd_tenant_charge(t, -1, 5);
  }
  return 0;
}

static void test_threads(void **state) {
  (void)state;
  rd_tenant_quota_t q = {.sample_rows_per_s = 1000};
  rd_tenant_t *t;
  rd_tenants_t *ts = with_default(&q, RD_TQ_SAMPLE_RATE, &t);
  assert_int_equal(rdt_th_run(4, charge, t), 0);
  rd_tenant_info_t info;
  rd_tenant_info(t, &info);
  assert_int_equal(info.workloads, 0);
  assert_int_equal(info.bytes, 0);
  rd_tenant_unref(t);
  rd_tenants_close(ts);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_names_and_quotas), cmocka_unit_test(test_bucket),
         cmocka_unit_test(test_admission),        cmocka_unit_test(test_persists),
         cmocka_unit_test(test_threads),          cmocka_unit_test(test_weight_reaches_shares))
