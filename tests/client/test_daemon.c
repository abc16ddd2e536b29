/* test_daemon.c - libreplayd-client against a real replayd.
 *
 *   test_client_daemon PATH-TO-REPLAYD
 *
 * Starts the daemon on a free loopback port with a fresh state directory
 * (flags from `replayd --help`: --listen, --state-dir), then runs the whole
 * client API through it: register, describe, list, insert (unary and
 * stream), sample with row contents checked against the keys, priority
 * updates with stale keys, the token rules, delete with the admin token,
 * and a daemon restart under a connected client. The daemon gets SIGTERM
 * at the end and must exit 0.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "replayd_client.h"
#include "rd_clock.h"
#include "rdt_cl_main.h"
#include "rdt_client.h"

static const char *replayd_path;
static char target[64];
static rdc_workload_t wl; /* registered by test_register */

#define CAP 1000u

/* The daemon on a fixed port, so that a restart comes back where the
 * connected clients look. */
static rdt_daemon_opts_t daemon_opts(void) {
  return (rdt_daemon_opts_t){.listen = target, .tag = "client_daemon"};
}

static int group_setup(void **state) {
  (void)state;
  snprintf(target, sizeof target, "127.0.0.1:%d", rdt_free_port());
  rdt_daemon_opts_t o = daemon_opts();
  return rdt_client_group_start(replayd_path, &o, 20);
}

/* Schema: tag int64, obs float32[3]. Row i carries tag
 * 1000000 + i and obs (i, -i, 0.5 i), so a sampled row can be checked
 * against its key (key k = insertion index k here). */
static void spec(rdc_spec_t *s) {
  rdt_client_spec(s, "client-test", CAP);
  rdt_client_add_field(s, "tag", RDC_DTYPE_INT64, 0);
  rdt_client_add_field(s, "obs", RDC_DTYPE_FLOAT32, 3);
  s->has_alpha = 1;
  s->alpha = 0.7;
  s->seed = 123;
}

static void make_rows(uint64_t first, uint32_t n, int64_t *tag, float *obs, rdc_column_t cols[2]) {
  for (uint32_t i = 0; i < n; i++) {
    uint64_t k = first + i;
    tag[i] = 1000000 + (int64_t)k;
    obs[3 * i] = (float)k;
    obs[3 * i + 1] = -(float)k;
    obs[3 * i + 2] = 0.5f * (float)k;
  }
  cols[0] = (rdc_column_t){tag, n * sizeof(int64_t)};
  cols[1] = (rdc_column_t){obs, n * 3 * sizeof(float)};
}

static void test_server_info(void **state) {
  (void)state;
  rdc_server_info_t *info;
  rdc_error_t e;
  assert_int_equal(rdc_server_info(rdt_cli, &info, &e), RDC_OK);
  assert_true(strlen(info->version) > 0);
  assert_true(info->uptime_s >= 0);
  assert_true(info->n_devices >= 1);
  assert_string_equal(info->devices[0].kind, "cpu");
  assert_int_equal(info->n_workloads, 0);
  rdc_server_info_free(info);
}

static void test_register(void **state) {
  (void)state;
  rdc_spec_t s;
  spec(&s);
  rdc_error_t e;
  assert_int_equal(rdc_register(rdt_cli, &s, &wl, &e), RDC_OK);
  assert_true(strlen(wl.id) > 0);
  assert_true(strlen(wl.token) > 0);
  /* Normalised: defaults filled in, ours kept. */
  assert_true(wl.spec.has_alpha && wl.spec.alpha == 0.7);
  assert_true(wl.spec.has_epsilon && wl.spec.has_beta && wl.spec.has_max_priority);
  assert_int_equal(wl.spec.capacity, CAP);
  assert_int_equal(wl.spec.n_fields, 2);
  assert_string_equal(wl.spec.fields[1].name, "obs");
  assert_int_equal(wl.spec.fields[1].shape[0], 3);

  /* The server's validation comes back as INVALID_ARGUMENT with words. */
  rdc_workload_t bad;
  s.fields[1].dtype = 0;
  assert_int_equal(rdc_register(rdt_cli, &s, &bad, &e), RDC_INVALID_ARGUMENT);
  assert_true(strlen(e.msg) > 0);
  spec(&s);
  s.capacity = 0;
  assert_int_equal(rdc_register(rdt_cli, &s, &bad, &e), RDC_INVALID_ARGUMENT);
}

static void test_describe_and_list(void **state) {
  (void)state;
  rdc_workload_t d;
  rdc_error_t e;
  assert_int_equal(rdc_describe(rdt_cli, wl.id, &d, &e), RDC_OK);
  assert_string_equal(d.id, wl.id);
  assert_string_equal(d.token, ""); /* never again after register */
  assert_string_equal(d.spec.name, "client-test");
  assert_int_equal(d.counters.size, 0);
  assert_int_equal(rdc_describe(rdt_cli, "0000", &d, &e), RDC_NOT_FOUND);
  rdc_workload_t *items;
  size_t n;
  assert_int_equal(rdc_list(rdt_cli, &items, &n, &e), RDC_OK);
  assert_int_equal(n, 1);
  assert_string_equal(items[0].id, wl.id);
  rdc_list_free(items);
}

static void read_admin_token(char *tok, size_t cap) {
  char path[256];
  snprintf(path, sizeof path, "%s/admin.token", rdt_replayd.dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(tok, (int)cap, f));
  fclose(f);
  tok[strcspn(tok, "\r\n")] = '\0';
}

/* A listing read one page at a time: page fetches the page after token
 * (the next one's token into next), checks its items against the whole
 * listing from item seen on, and says how many it had. */
typedef size_t page_fn(const char *token, size_t seen, char *next, void *ctx);

/* Pages through a listing from its start: items items in pages pages. */
static void page_through(page_fn *page, void *ctx, size_t items, size_t pages) {
  char token[RDC_PAGE_TOKEN_MAX] = "", next[RDC_PAGE_TOKEN_MAX];
  size_t seen = 0, n_pages = 0;
  do {
    seen += page(token, seen, next, ctx);
    n_pages++;
    memcpy(token, next, sizeof token);
  } while (token[0] != '\0');
  assert_int_equal(seen, items);
  assert_int_equal(n_pages, pages);
}

/* Pages of 2 workloads, against all of them (rdc_list's). */
static size_t workload_page(const char *token, size_t seen, char *next, void *all) {
  rdc_workload_t *page;
  size_t n;
  rdc_error_t e;
  assert_int_equal(rdc_list_page(rdt_cli, 2, token, &page, &n, next, &e), RDC_OK);
  assert_true(n <= 2);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(page[i].id, ((const rdc_workload_t *)all)[seen + i].id);
  rdc_list_free(page);
  return n;
}

/* The admin token and all profiles (rdc_list_profiles's), for profile_page. */
typedef struct {
  const char *admin;
  const rdc_profile_t *all;
} profiles_t;

/* Pages of 5 profiles. */
static size_t profile_page(const char *token, size_t seen, char *next, void *ctx) {
  const profiles_t *p = ctx;
  rdc_profile_t *pp;
  size_t n;
  rdc_error_t e;
  assert_int_equal(rdc_list_profiles_page(rdt_cli, p->admin, 5, token, &pp, &n, next, &e),
                   RDC_OK);
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(pp[i].device, p->all[seen + i].device);
    assert_int_equal(pp[i].batch, p->all[seen + i].batch);
  }
  rdc_profiles_free(pp);
  return n;
}

/* Lists one page at a time (rdc_list_page, rdc_list_profiles_page) and
 * whole (rdc_list, rdc_list_profiles): the same items, in order, once. */
static void test_list_pages(void **state) {
  (void)state;
  char admin[RDC_TOKEN_MAX] = {0};
  read_admin_token(admin, sizeof admin);
  rdc_spec_t s;
  spec(&s);
  rdc_error_t e;
  rdc_workload_t extra[5];
  for (int i = 0; i < 5; i++) assert_int_equal(rdc_register(rdt_cli, &s, &extra[i], &e), RDC_OK);

  rdc_workload_t *all, *page;
  size_t n_all, n;
  assert_int_equal(rdc_list(rdt_cli, &all, &n_all, &e), RDC_OK);
  assert_int_equal(n_all, 6);
  for (size_t i = 1; i < n_all; i++) assert_true(strcmp(all[i - 1].id, all[i].id) < 0);
  page_through(workload_page, all, 6, 3);
  char next[RDC_PAGE_TOKEN_MAX];
  assert_int_equal(rdc_list_page(rdt_cli, 0, "not a token", &page, &n, next, &e),
                   RDC_INVALID_ARGUMENT);
  assert_non_null(strstr(e.msg, "page_token"));
  assert_int_equal(rdc_list_page(rdt_cli, 0, NULL, &page, &n, NULL, &e), RDC_EINVAL);
  rdc_list_free(all);
  for (int i = 0; i < 5; i++) assert_int_equal(rdc_delete(rdt_cli, extra[i].id, admin, &e), RDC_OK);

  /* Profiles: 12 imported, in pages of 5. */
  char jsonl[12 * 400] = "";
  for (int i = 0; i < 12; i++) {
    size_t len = strlen(jsonl);
    snprintf(jsonl + len, sizeof jsonl - len,
             "{\"device\":\"cpu-00000000000000%02x\",\"primitive\":\"sample\",\"threads\":1,"
             "\"batch\":%d,\"capacity\":1000,\"fanout\":16,\"algorithm\":\"none\","
             "\"network\":\"\",\"build\":\"client test\",\"latency_s\":1e-06,\"reps\":3,"
             "\"items\":1000,\"source\":\"measured\",\"measured_unix\":1700000000}\n",
             i % 3, 1 + i);
  }
  uint64_t imported = 0;
  assert_int_equal(rdc_import_profiles(rdt_cli, admin, jsonl, strlen(jsonl), &imported, &e),
                   RDC_OK);
  assert_int_equal(imported, 12);
  rdc_profile_t *pall, *pp;
  assert_int_equal(rdc_list_profiles(rdt_cli, admin, &pall, &n_all, &e), RDC_OK);
  assert_int_equal(n_all, 12);
  page_through(profile_page, &(profiles_t){admin, pall}, 12, 3);
  /* Key order: device first, then batch. */
  assert_string_equal(pall[0].device, "cpu-0000000000000000");
  assert_int_equal(pall[0].batch, 1);
  assert_int_equal(pall[1].batch, 4);
  rdc_profiles_free(pall);
  assert_int_equal(rdc_list_profiles_page(rdt_cli, NULL, 5, NULL, &pp, &n, next, &e),
                   RDC_UNAUTHENTICATED);
  assert_int_equal(rdc_clear_profiles(rdt_cli, admin, NULL, &e), RDC_OK);
}

static void test_tokens(void **state) {
  (void)state;
  rdc_error_t e;
  int64_t tag[1];
  float obs[3];
  rdc_column_t cols[2];
  make_rows(0, 1, tag, obs, cols);
  assert_int_equal(rdc_insert_batch(rdt_cli, wl.id, NULL, 1, cols, 2, NULL, NULL, &e),
                   RDC_UNAUTHENTICATED);
  assert_int_equal(rdc_insert_batch(rdt_cli, wl.id, "wrong", 1, cols, 2, NULL, NULL, &e),
                   RDC_PERMISSION_DENIED);
  uint64_t k[1];
  rdc_sample_t s = {.keys = k};
  assert_int_equal(rdc_sample(rdt_cli, wl.id, "wrong", 1, NAN, 0, &s, &e), RDC_PERMISSION_DENIED);
  assert_int_equal(rdc_delete(rdt_cli, wl.id, "wrong", &e), RDC_PERMISSION_DENIED);
  /* Empty table: sampling is refused, not an error of the client. */
  assert_int_equal(rdc_sample(rdt_cli, wl.id, wl.token, 1, NAN, 0, &s, &e),
                   RDC_FAILED_PRECONDITION);
}

static void test_insert_and_sample(void **state) {
  (void)state;
  rdc_error_t e;
  /* 100 rows unary, with keys back. */
  static int64_t tag[600];
  static float obs[1800];
  rdc_column_t cols[2];
  make_rows(0, 100, tag, obs, cols);
  uint64_t keys[100];
  assert_int_equal(rdc_insert_batch(rdt_cli, wl.id, wl.token, 100, cols, 2, NULL, keys, &e),
                   RDC_OK);
  for (int i = 0; i < 100; i++) assert_int_equal(keys[i], (uint64_t)i);
  /* 500 more over the stream, in batches of 100 with priorities. */
  rdc_insert_stream_t *st;
  assert_int_equal(rdc_insert_stream_open(rdt_cli, wl.id, wl.token, &st, &e), RDC_OK);
  double prio[100];
  for (int i = 0; i < 100; i++) prio[i] = 1.0 + i;
  for (uint64_t b = 0; b < 5; b++) {
    make_rows(100 + b * 100, 100, tag, obs, cols);
    assert_int_equal(rdc_insert_stream_write(st, 100, cols, 2, prio, &e), RDC_OK);
  }
  uint64_t inserted = 0, first = 0;
  assert_int_equal(rdc_insert_stream_close(st, &inserted, &first, &e), RDC_OK);
  assert_int_equal(inserted, 500);
  assert_int_equal(first, 100);

  /* Sample 256 and check each row against its key. */
  uint64_t sk[256];
  double sp[256], sw[256];
  static int64_t stag[256];
  static float sobs[768];
  rdc_buffer_t bufs[2] = {{stag, sizeof stag, 0}, {sobs, sizeof sobs, 0}};
  rdc_sample_t s = {.keys = sk, .probabilities = sp, .weights = sw, .columns = bufs,
                    .n_columns = 2};
  for (int strat = 0; strat < 2; strat++) {
    assert_int_equal(rdc_sample(rdt_cli, wl.id, wl.token, 256, strat ? 0.5 : NAN, strat, &s, &e),
                     RDC_OK);
    assert_int_equal(s.count, 256);
    assert_int_equal(s.table_size, 600);
    assert_int_equal(bufs[0].bytes, 256 * sizeof(int64_t));
    assert_int_equal(bufs[1].bytes, 256 * 3 * sizeof(float));
    double wmax = 0;
    for (int i = 0; i < 256; i++) {
      assert_true(sk[i] < 600);
      assert_int_equal(stag[i], 1000000 + (int64_t)sk[i]);
      assert_true(sobs[3 * i] == (float)sk[i]);
      assert_true(sobs[3 * i + 2] == 0.5f * (float)sk[i]);
      assert_true(sp[i] > 0 && sp[i] <= 1);
      assert_true(sw[i] > 0 && sw[i] <= 1);
      if (sw[i] > wmax) wmax = sw[i];
    }
    assert_true(fabs(wmax - 1) < 1e-9);
  }
  /* A buffer too small: a clear local error. */
  bufs[1].capacity = 100;
  assert_int_equal(rdc_sample(rdt_cli, wl.id, wl.token, 256, NAN, 0, &s, &e), RDC_ETOOSMALL);
}

static void test_update_and_stale(void **state) {
  (void)state;
  rdc_error_t e;
  uint64_t keys[3] = {0, 1, 2};
  double pr[3] = {5, 6, 7};
  uint64_t applied = 0, stale = 0;
  assert_int_equal(
      rdc_update_priorities(rdt_cli, wl.id, wl.token, 3, keys, pr, &applied, &stale, &e), RDC_OK);
  assert_int_equal(applied, 3);
  assert_int_equal(stale, 0);
  /* Fill past capacity: keys 0..199 are overwritten by 1000..1199. */
  static int64_t tag[600];
  static float obs[1800];
  rdc_column_t cols[2];
  make_rows(600, 600, tag, obs, cols);
  assert_int_equal(rdc_insert_batch(rdt_cli, wl.id, wl.token, 600, cols, 2, NULL, NULL, &e),
                   RDC_OK);
  uint64_t k2[3] = {0, 500, 1100};
  assert_int_equal(rdc_update_priorities(rdt_cli, wl.id, wl.token, 3, k2, pr, &applied, &stale, &e),
                   RDC_OK);
  assert_int_equal(applied, 2);
  assert_int_equal(stale, 1);
  /* A key never issued is an error of the call. */
  uint64_t k3[1] = {999999};
  int rc = rdc_update_priorities(rdt_cli, wl.id, wl.token, 1, k3, pr, &applied, &stale, &e);
  assert_true(rc == RDC_NOT_FOUND || rc == RDC_INVALID_ARGUMENT);
  rdc_workload_t d;
  assert_int_equal(rdc_describe(rdt_cli, wl.id, &d, &e), RDC_OK);
  assert_int_equal(d.counters.size, CAP);
  assert_int_equal(d.counters.inserts, 1200);
  assert_int_equal(d.counters.stale_updates, 1);
}

static void test_stream_rejection(void **state) {
  (void)state;
  rdc_error_t e;
  rdc_insert_stream_t *st;
  /* Wrong column sizes: the server ends the stream with INVALID_ARGUMENT,
   * which surfaces at a later write or at close, with the server's words. */
  assert_int_equal(rdc_insert_stream_open(rdt_cli, wl.id, wl.token, &st, &e), RDC_OK);
  int64_t tag[4] = {0};
  float obs[3] = {0};
  rdc_column_t cols[2] = {{tag, sizeof tag}, {obs, sizeof obs}}; /* 4 tags, 1 obs */
  int rc = rdc_insert_stream_write(st, 4, cols, 2, NULL, &e);
  for (int i = 0; i < 100 && rc == RDC_OK; i++) {
    usleep(2000);
    rc = rdc_insert_stream_write(st, 4, cols, 2, NULL, &e);
  }
  if (rc == RDC_OK) rc = rdc_insert_stream_close(st, NULL, NULL, &e);
  else rdc_insert_stream_close(st, NULL, NULL, NULL);
  assert_int_equal(rc, RDC_INVALID_ARGUMENT);
  assert_true(strlen(e.msg) > 0);

  /* A wrong token on a stream. */
  assert_int_equal(rdc_insert_stream_open(rdt_cli, wl.id, "nope", &st, &e), RDC_OK);
  make_rows(0, 1, tag, obs, cols);
  rc = rdc_insert_stream_write(st, 1, cols, 2, NULL, &e);
  if (rc == RDC_OK) rc = rdc_insert_stream_close(st, NULL, NULL, &e);
  else rdc_insert_stream_close(st, NULL, NULL, NULL);
  assert_int_equal(rc, RDC_PERMISSION_DENIED);
}

static void test_delete_with_admin_token(void **state) {
  (void)state;
  char tok[RDC_TOKEN_MAX] = {0};
  read_admin_token(tok, sizeof tok);
  rdc_error_t e;
  assert_int_equal(rdc_delete(rdt_cli, wl.id, tok, &e), RDC_OK);
  rdc_workload_t d;
  assert_int_equal(rdc_describe(rdt_cli, wl.id, &d, &e), RDC_NOT_FOUND);
  assert_int_equal(rdc_delete(rdt_cli, wl.id, tok, &e), RDC_NOT_FOUND);
}

/* The daemon restarts under a connected client: a fail-fast client gets
 * UNAVAILABLE while it is down; a wait-for-ready client's call rides out
 * the restart within its deadline. */
static void test_daemon_restart(void **state) {
  (void)state;
  rdc_connect_opts_t o;
  rdc_connect_opts_init(&o);
  o.wait_for_ready = 1;
  o.deadline_s = 20;
  rdc_client_t *patient, *hasty;
  rdc_error_t e;
  assert_int_equal(rdc_connect_ex(target, 5, &o, &patient, &e), RDC_OK);
  assert_int_equal(rdc_connect(target, 5, &hasty, &e), RDC_OK);

  assert_int_equal(rdt_daemon_stop(&rdt_replayd), 0);
  rdc_server_info_t *info;
  double t0 = rd_clock_now();
  int rc = rdc_server_info(hasty, &info, &e);
  assert_true(rc == RDC_UNAVAILABLE || rc == RDC_CANCELLED);
  assert_true(rd_clock_now() - t0 < 2.0);

  rdt_daemon_opts_t opts = daemon_opts();
  assert_int_equal(rdt_daemon_spawn(&rdt_replayd, replayd_path, &opts), 0);
  t0 = rd_clock_now();
  assert_int_equal(rdc_server_info(patient, &info, &e), RDC_OK);
  rdc_server_info_free(info);
  assert_true(rd_clock_now() - t0 < 10.0); /* reconnect backoff, not the 20 s deadline */
  rdc_close(hasty);
  rdc_close(patient);
  assert_int_equal(rdt_daemon_wait(&rdt_replayd, &opts), 0);
}

/* The group's teardown checks the clean shutdown on SIGTERM. */
RDT_CL_MAIN("REPLAYD", (&replayd_path), group_setup, rdt_client_group_teardown,
            cmocka_unit_test(test_server_info),
            cmocka_unit_test(test_register),
            cmocka_unit_test(test_describe_and_list),
            cmocka_unit_test(test_list_pages),
            cmocka_unit_test(test_tokens),
            cmocka_unit_test(test_insert_and_sample),
            cmocka_unit_test(test_update_and_stale),
            cmocka_unit_test(test_stream_rejection),
            cmocka_unit_test(test_delete_with_admin_token),
            cmocka_unit_test(test_daemon_restart))
