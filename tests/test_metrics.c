/* test_metrics.c - the metrics endpoint's parts: the --metrics-listen
 * address rule, label escaping, the RPC histograms' buckets, the text a
 * registry renders (a deleted workload's series gone), and the HTTP server
 * (GET /metrics, 404, 405, its socket closed at stop); rendering while
 * other threads register, insert, delete and observe RPCs. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics.h"
#include "metrics_http.h"
#include "registry.h"
#include "rpc_stats.h"
#include "rdt_th_group.h"
#include "rdt_main.h"

static void test_listen_parse(void **state) {
  (void)state;
  static const struct {
    const char *in, *host, *port;
  } ok[] = {{"9464", "127.0.0.1", "9464"},     {":9464", "127.0.0.1", "9464"},
            {"0", "127.0.0.1", "0"},           {"0.0.0.0:9464", "0.0.0.0", "9464"},
            {"localhost:1", "localhost", "1"}, {"[::1]:9464", "::1", "9464"},
            {"[::]:65535", "::", "65535"}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char host[64] = "", port[8] = "";
    rd_error_t err;
    rd_error_clear(&err);
    if (rd_metrics_listen_parse(ok[i].in, host, sizeof host, port, sizeof port, &err) != RD_OK)
      fail_msg("%s: %s", ok[i].in, err.msg);
    assert_string_equal(host, ok[i].host);
    assert_string_equal(port, ok[i].port);
  }
  static const char *const bad[] = {"", ":", "x", "9464x", "65536", "127.0.0.1:", "h:-1",
                                    "::1:9464", "[::1:9464", "[]:1", "h:123456", "h: 1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char host[64] = "keep", port[8] = "keep";
    rd_error_t err;
    rd_error_clear(&err);
    assert_int_equal(rd_metrics_listen_parse(bad[i], host, sizeof host, port, sizeof port, &err),
                     RD_EINVAL);
    assert_string_equal(host, "keep");
    assert_string_equal(port, "keep");
    assert_true(strlen(err.msg) > 0);
  }
}

static char *render_to_string(void (*fn)(FILE *, void *), void *arg) {
  static char *buf; /* static: -Wdangling-pointer sees a local escape */
  static size_t len;
  buf = NULL;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fn(f, arg);
  fclose(f);
  return buf;
}

static void label_fn(FILE *f, void *arg) { rd_metrics_label(f, arg); }

static void test_label_escaping(void **state) {
  (void)state;
  char *s = render_to_string(label_fn, "a\"b\\c\nd é");
  assert_string_equal(s, "a\\\"b\\\\c\\nd é");
  free(s);
}

/* Before any other test enables the stats: off means nothing counted. */
static void test_rpc_stats(void **state) {
  (void)state;
  assert_false(rd_rpc_stats_enabled());
  rd_rpc_stats_observe(0, 1.0, 0);
  assert_int_equal(rd_rpc_stats_methods(), 0);
  static const char *const names[] = {"A", "B"};
  rd_rpc_stats_enable(names, 2);
  assert_true(rd_rpc_stats_enabled());
  /* A bucket holds what is <= its bound (Prometheus's le). */
  rd_rpc_stats_observe(0, 0.0001, 0);   /* bucket 0 */
  rd_rpc_stats_observe(0, 0.00010001, 0); /* bucket 1 */
  rd_rpc_stats_observe(0, 60, 5);       /* the last finite bucket */
  rd_rpc_stats_observe(0, 61, 16);      /* + Inf */
  rd_rpc_stats_observe(0, -1, 99);      /* a clock step back: 0 s, code UNKNOWN */
  rd_rpc_stats_observe(2, 1, 0);        /* no such method: ignored */
  rd_rpc_stats_observe(-1, 1, 0);
  rd_rpc_method_stats_t s;
  rd_rpc_stats_read(0, &s);
  assert_string_equal(s.name, "A");
  assert_int_equal(s.buckets[0], 2);
  assert_int_equal(s.buckets[1], 1);
  assert_int_equal(s.buckets[RD_RPC_STATS_BUCKETS - 1], 1);
  assert_int_equal(s.buckets[RD_RPC_STATS_BUCKETS], 1);
  assert_int_equal(s.count, 5);
  assert_true(s.sum_s > 121.0002 && s.sum_s < 121.0003);
  assert_int_equal(s.by_code[0], 2);
  assert_int_equal(s.by_code[5], 1);
  assert_int_equal(s.by_code[16], 1);
  assert_int_equal(s.by_code[2], 1);
  rd_rpc_stats_read(1, &s);
  assert_string_equal(s.name, "B");
  assert_int_equal(s.count, 0);
  rd_rpc_stats_read(2, &s);
  assert_null(s.name);
  for (size_t b = 1; b < RD_RPC_STATS_BUCKETS; b++)
    assert_true(rd_rpc_stats_bounds[b] > rd_rpc_stats_bounds[b - 1]);
}

/* ---- Rendering a registry ---- */

static rd_registry_t *registry(void) {
  rd_config_t cfg;
  rd_config_defaults(&cfg);
  cfg.max_workloads = 8;
  rd_registry_t *r = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_create(&r, &cfg, NULL, &err) != RD_OK) fail_msg("registry: %s", err.msg);
  return r;
}

static rd_workload_t *add_workload(rd_registry_t *r, const char *name) {
  static const rd_field_spec_t fields[] = {{"x", RD_DTYPE_FLOAT32, 0, NULL}};
  rd_workload_spec_t s;
  memset(&s, 0, sizeof s);
  s.name = name;
  s.fields = fields;
  s.n_fields = 1;
  s.capacity = 64;
  static const uint8_t stored[1];
  s.stored = stored;
  s.stored_len = 0;
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_register(r, &s, NULL, &w, NULL, &err) != RD_OK) fail_msg("reg: %s", err.msg);
  return w;
}

static void fake_server(void *arg, rd_metrics_server_t *out) {
  (void)arg;
  memset(out, 0, sizeof *out);
  out->calls_started = 42;
  out->calls_active = 3;
  out->queue_name[0] = "placement";
  out->queue_jobs[0] = 1;
}

static void render_fn(FILE *f, void *arg) {
  assert_int_equal(rd_metrics_render(arg, f), RD_OK);
}

static void test_render(void **state) {
  (void)state;
  rd_registry_t *r = registry();
  rd_workload_t *a = add_workload(r, "alpha");
  rd_workload_t *b = add_workload(r, "beta");
  float x[10] = {0};
  rd_cbuf_t col = {x, sizeof x};
  rd_insert_batch_t ib = {10, &col, 1, NULL, 0};
  assert_int_equal(rd_workload_insert(a, &ib, NULL, NULL, NULL), RD_OK);
  rd_metrics_source_t src = {r, fake_server, NULL, 1234, "9.9.9"};
  char *t = render_to_string(render_fn, &src);
  char want[256];
  snprintf(want, sizeof want, "replayd_inserts_total{workload=\"%s\"} 10\n", a->id);
  assert_non_null(strstr(t, want));
  snprintf(want, sizeof want, "replayd_inserts_total{workload=\"%s\"} 0\n", b->id);
  assert_non_null(strstr(t, want));
  snprintf(want, sizeof want, "replayd_table_items{workload=\"%s\"} 10\n", a->id);
  assert_non_null(strstr(t, want));
  snprintf(want, sizeof want,
           "replayd_workload_info{workload=\"%s\",name=\"alpha\",tenant=\"default\","
           "learner=\"none\"} 1\n", a->id);
  assert_non_null(strstr(t, want));
  assert_non_null(strstr(t, "replayd_workloads 2\n"));
  assert_non_null(strstr(t, "replayd_build_info{version=\"9.9.9\"} 1\n"));
  assert_non_null(strstr(t, "replayd_start_time_seconds 1234\n"));
  assert_non_null(strstr(t, "replayd_server_calls_total 42\n"));
  assert_non_null(strstr(t, "replayd_server_calls_in_flight 3\n"));
  assert_non_null(strstr(t, "replayd_server_queued_jobs{queue=\"placement\"} 1\n"));
  assert_non_null(strstr(t, "replayd_device_workload_parts{kind=\"cpu\",part=\"replay\"} 2\n"));
  assert_non_null(strstr(t, "# TYPE replayd_inserts_total counter\n"));
  assert_non_null(strstr(t, "# TYPE replayd_rpc_duration_seconds histogram\n"));
  assert_non_null(strstr(t, "replayd_rpc_duration_seconds_bucket{method=\"A\",le=\"0.00025\"}"));
  assert_non_null(strstr(t, "replayd_rpc_duration_seconds_bucket{method=\"A\",le=\"+Inf\"} 5\n"));
  assert_null(strstr(t, "replayd_learner_")); /* no hosted learner: no learner series */
  /* Each family's HELP and TYPE once. */
  const char *first = strstr(t, "# HELP replayd_inserts_total");
  assert_non_null(first);
  assert_null(strstr(first + 1, "# HELP replayd_inserts_total"));
  free(t);

  /* Deleted: every series of a is gone, b's stay. */
  char a_id[RD_WORKLOAD_ID_LEN + 1];
  memcpy(a_id, a->id, sizeof a_id);
  assert_int_equal(rd_registry_delete(r, a_id, NULL), RD_OK);
  rd_workload_unref(a);
  t = render_to_string(render_fn, &src);
  assert_null(strstr(t, a_id));
  assert_non_null(strstr(t, b->id));
  assert_non_null(strstr(t, "replayd_workloads 1\n"));
  free(t);
  /* And with none left, no per-workload family at all. */
  assert_int_equal(rd_registry_delete(r, b->id, NULL), RD_OK);
  rd_workload_unref(b);
  t = render_to_string(render_fn, &src);
  assert_null(strstr(t, "replayd_inserts_total"));
  assert_non_null(strstr(t, "replayd_workloads 0\n"));
  free(t);
  rd_registry_destroy(r);
}

/* Scrapes while other threads register, insert, delete and observe RPCs:
 * every render sees whole workloads (a reference each), and the counters
 * only grow. Run under TSan too (scripts/test's TSAN_TESTS). */
/* Registers, fills and deletes workloads of registry r until stopped. */
static int churn(void *r, int i) {
  (void)i;
  float x[8] = {0};
  rd_cbuf_t col = {x, sizeof x};
  rd_insert_batch_t ib = {8, &col, 1, NULL, 0};
  while (!rdt_th_stopping()) {
    rd_workload_t *w = add_workload(r, "churn");
    for (int k = 0; k < 20; k++) rd_workload_insert(w, &ib, NULL, NULL, NULL);
    char id[RD_WORKLOAD_ID_LEN + 1];
    memcpy(id, w->id, sizeof id);
    rd_registry_delete(r, id, NULL);
    rd_workload_unref(w);
  }
  return 0;
}

static int observer(void *ctx, int unused) {
  (void)ctx;
  (void)unused;
  for (int i = 0; !rdt_th_stopping(); i++) rd_rpc_stats_observe(i & 1, 1e-4 * (i % 7), 0);
  return 0;
}

static void test_render_concurrent(void **state) {
  (void)state;
  rd_registry_t *r = registry();
  rd_workload_t *keep = add_workload(r, "keep");
  char want[128];
  snprintf(want, sizeof want, "replayd_inserts_total{workload=\"%s\"} 0\n", keep->id);
  rdt_th_group_t g = {0};
  assert_int_equal(rdt_th_start(&g, 2, churn, r), 0);
  assert_int_equal(rdt_th_start(&g, 1, observer, NULL), 0);
  rd_metrics_source_t src = {r, NULL, NULL, 0, "x"};
  uint64_t last = 0;
  for (int i = 0; i < 200; i++) {
    char *text = render_to_string(render_fn, &src);
    assert_non_null(strstr(text, want)); /* the kept workload, every scrape */
    assert_non_null(strstr(text, "replayd_workloads "));
    free(text);
    rd_rpc_method_stats_t s;
    rd_rpc_stats_read(0, &s);
    assert_true(s.count >= last);
    last = s.count;
  }
  assert_int_equal(rdt_th_stop(&g), 0);
  rd_workload_unref(keep);
  rd_registry_destroy(r);
}

/* ---- The HTTP server ---- */

static int render_hello(void *arg, FILE *f) {
  atomic_fetch_add((atomic_int *)arg, 1);
  fputs("hello 1\n", f);
  return RD_OK;
}

/* A request over a plain socket; the whole response. */
static void http(int port, const char *request, char *out, size_t cap) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(write(fd, request, strlen(request)), (ssize_t)strlen(request));
  size_t got = 0;
  ssize_t n;
  while (got + 1 < cap && (n = read(fd, out + got, cap - 1 - got)) > 0) got += (size_t)n;
  out[got] = '\0';
  close(fd);
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (readdir(d) != NULL) n++;
  closedir(d);
  return n;
}

static void test_http(void **state) {
  (void)state;
  int fds = count_fds();
  atomic_int calls = 0;
  rd_metrics_http_t *h = NULL;
  char bound[64];
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_metrics_http_start("0", render_hello, &calls, &h, bound, sizeof bound, &err) != RD_OK)
    fail_msg("start: %s", err.msg);
  assert_int_equal(strncmp(bound, "127.0.0.1:", 10), 0);
  int port = atoi(bound + 10);
  assert_true(port > 0);
  static char resp[8192];
  http(port, "GET /metrics HTTP/1.0\r\n\r\n", resp, sizeof resp);
  assert_non_null(strstr(resp, " 200 OK\r\n"));
  assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
  assert_non_null(strstr(resp, "\r\n\r\nhello 1\n"));
  assert_int_equal(atomic_load(&calls), 1);
  http(port, "GET /other HTTP/1.0\r\n\r\n", resp, sizeof resp);
  assert_non_null(strstr(resp, " 404 "));
  http(port, "DELETE /metrics HTTP/1.0\r\n\r\n", resp, sizeof resp);
  assert_non_null(strstr(resp, " 405 "));
  assert_int_equal(atomic_load(&calls), 1); /* neither rendered */
  /* The same port again while it serves: refused, naming it. */
  char again[32];
  snprintf(again, sizeof again, "127.0.0.1:%d", port);
  rd_metrics_http_t *h2 = NULL;
  assert_int_equal(rd_metrics_http_start(again, render_hello, &calls, &h2, NULL, 0, &err),
                   RD_EINVAL);
  assert_non_null(strstr(err.msg, "cannot listen for metrics"));
  rd_metrics_http_stop(h);
  assert_int_equal(count_fds(), fds); /* its socket is closed */
  rd_metrics_http_stop(NULL);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_listen_parse), cmocka_unit_test(test_label_escaping),
         cmocka_unit_test(test_rpc_stats),    cmocka_unit_test(test_render),
         cmocka_unit_test(test_render_concurrent), cmocka_unit_test(test_http))
