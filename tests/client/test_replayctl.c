/* test_replayctl.c - the replayctl program end to end against the
 * scripted mock server: output (tables and JSON), exit codes, error lines,
 * token sources for rm. argv[1] is the replayctl executable.
 */
#include <ctype.h>
#include <fcntl.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mock_server.h"
#include "rdt_cl_mock.h"
#include "rdt_pb.h"
#include "rdt_cl_main.h"
#include "rdt_daemon.h"
#include "rdt_dir.h"
#include "replayd.pb-c.h"


static const char *replayctl;

/* Run replayctl with args (NULL-terminated) and extra environment entries
 * ("K=V", or "K=" to remove K); it must run and exit. */
#define run(res, env_extra, ...) \
  assert_int_equal(rdt_run(res, env_extra, replayctl, __VA_ARGS__), 0)

/* The same, and it must exit 0 (else its stderr shows). */
static void run_ok(rdt_result_t *r, const char *const *env_extra, ...) {
  va_list ap;
  va_start(ap, env_extra);
  assert_int_equal(rdt_runv(r, env_extra, replayctl, ap), 0);
  va_end(ap);
  if (r->rc != 0) fail_msg("replayctl exited %d: %s", r->rc, r->err);
}

/* Each of the strings after out (NULL-terminated) is in out. */
static void has(const char *out, ...) {
  va_list ap;
  va_start(ap, out);
  for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
    if (strstr(out, want) == NULL) fail_msg("no \"%s\" in:\n%s", want, out);
  va_end(ap);
}

/* ------------------------------------------------------------------ */
/* A strict little JSON checker (RFC 8259 grammar), for --json output.  */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

static const char *value(const char *p, int depth);

static const char *string(const char *p) {
  if (*p++ != '"') return NULL;
  while (*p != '"') {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20) return NULL;
    if (c == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!isxdigit((unsigned char)p[i])) return NULL;
        p += 5;
        continue;
      }
      if (!strchr("\"\\/bfnrt", *p) || *p == '\0') return NULL;
    }
    p++;
  }
  return p + 1;
}

static const char *number(const char *p) {
  if (*p == '-') p++;
  if (*p == '0')
    p++;
  else if (isdigit((unsigned char)*p))
    while (isdigit((unsigned char)*p)) p++;
  else
    return NULL;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
  }
  return p;
}

static const char *value(const char *p, int depth) {
  if (depth > 64) return NULL;
  p = ws(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = string(ws(p));
        if (!p) return NULL;
        p = ws(p);
        if (*p++ != ':') return NULL;
      }
      p = value(p, depth + 1);
      if (!p) return NULL;
      p = ws(p);
      if (*p == ',') {
        p++;
        continue;
      }
      if (*p == close) return p + 1;
      return NULL;
    }
  }
  if (*p == '"') return string(p);
  if (strncmp(p, "true", 4) == 0) return p + 4;
  if (strncmp(p, "false", 5) == 0) return p + 5;
  if (strncmp(p, "null", 4) == 0) return p + 4;
  return number(p);
}

static void assert_json(const char *s) {
  const char *end = value(s, 0);
  if (end == NULL || *ws(end) != '\0') fail_msg("not one JSON document: %s", s);
}

/* ------------------------------------------------------------------ */

/* The replayctl programs talk to the mock that mock_group_setup starts. */
static const char *const server = mock_target;

static void script_info(void) {
  Replayd__V1__Device d[2], *dp[2];
  rdt_cl_two_devices(d, dp);
  Replayd__V1__Workload w, *wp[] = {&w, &w, &w};
  rdt_cl_workload(&w, "w1", NULL, NULL);
  Replayd__V1__ServerInfoResponse r;
  rdt_cl_server_info(&r, "0.1.0", 3723.5, dp, 2, wp, 3);
  mock_reply_msg(&r.base);
}

/* ListDevices (replayctl devices): the devices with what runs there. */
static void script_devices(void) {
  Replayd__V1__Device d[2], *dp[2];
  rdt_cl_two_devices(d, dp);
  d[0].capabilities = "sumtree,table,learner";
  d[0].cores = 16;
  d[0].memory_bytes = 64ull << 30;
  d[0].isa = "avx2";
  Replayd__V1__ListDevicesResponse r = REPLAYD__V1__LIST_DEVICES_RESPONSE__INIT;
  r.n_devices = 2;
  r.devices = dp;
  mock_reply_msg(&r.base);
}

static void test_status(void **state) {
  (void)state;
  script_info();
  rdt_result_t r;
  run_ok(&r, NULL, "--server", server, "status", NULL);
  assert_string_equal(r.err, "");
  has(r.out, "version       0.1.0\n", "uptime        1h 02m 03s\n", "workloads     3\n",
      "devices       2\n", "  KIND  NAME                 FINGERPRINT  STATUS\n",
      "  gpu   Test GPU             gpu-def      no driver\n", NULL);
  assert_int_equal(rdt_cl_seen(NULL, "ServerInfo", NULL), 0);

  script_info();
  run_ok(&r, NULL, "status", "--json", "--server", server, NULL);
  assert_json(r.out);
  has(r.out, "\"version\":\"0.1.0\"", "\"uptime_seconds\":3723.5", "\"workloads\":3",
      "\"name\":\"Test CPU \\\"16 cores\\\"\"", NULL);
}

static void test_server_from_env(void **state) {
  (void)state;
  script_devices();
  char env[80];
  snprintf(env, sizeof env, "REPLAYD_SERVER=%s", server);
  const char *const extra[] = {env, NULL};
  rdt_result_t r;
  run_ok(&r, extra, "devices", NULL);
  has(r.out, "KIND  NAME", "cpu   Test CPU \"16 cores\"  cpu-abc      ",
      "64.0 GiB  avx2  sumtree,table,learner  ok\n", NULL);
  assert_int_equal(rdt_cl_seen(NULL, "ListDevices", NULL), 0);
  script_devices();
  run_ok(&r, extra, "devices", "--json", NULL);
  assert_json(r.out);
  has(r.out, "{\"devices\":[{\"kind\":\"cpu\"", "\"capabilities\":\"sumtree,table,learner\"",
      NULL);
}

static void script_list(void) {
  Replayd__V1__WorkloadCounters k1;
  rdt_cl_counters(&k1, 123456, 7, 89, 3, 1000);
  rdt_pb_spec_t s1, s2;
  rdt_pb_spec_init(&s1, "cartpole", 100000);
  rdt_pb_spec_init(&s2, "na\xc3\xafve\ttab", 5);
  Replayd__V1__Workload w1, w2, *wp[] = {&w1, &w2};
  rdt_cl_workload(&w1, "aaaa", &s1.spec, &k1);
  rdt_cl_workload(&w2, "bbbbbbbb", &s2.spec, NULL);
  rdt_cl_reply_list(wp, 2, NULL);
}

static void test_ls(void **state) {
  (void)state;
  script_list();
  rdt_result_t r;
  run_ok(&r, NULL, "--server", server, "ls", NULL);
  /* Columns as wide as their widest cell ("naive" with a diaeresis is one
   * column per character), numbers right-aligned, the tab shown as '?'. */
  const char *want =
      "ID        NAME       SIZE/CAPACITY  INSERTS  SAMPLES  UPDATES  STALE\n"
      "aaaa      cartpole     1000/100000   123456        7       89      3\n"
      "bbbbbbbb  na\xc3\xafve?tab            0/5        0        0        0      0\n";
  assert_string_equal(r.out, want);
  assert_int_equal(rdt_cl_seen(NULL, "ListWorkloads", NULL), 0);

  script_list();
  run_ok(&r, NULL, "--server", server, "--json", "ls", NULL);
  assert_json(r.out);
  /* alpha: not set by this (fake) server */
  has(r.out, "\"name\":\"na\xc3\xafve\\ttab\"", "\"inserts\":123456", "\"alpha\":null", NULL);

  rdt_cl_reply_list(NULL, 0, NULL);
  run(&r, NULL, "--server", server, "--json", "ls", NULL);
  assert_string_equal(r.out, "{\"workloads\":[]}\n");
}

static void test_describe(void **state) {
  (void)state;
  static const uint32_t frames[] = {84, 84, 4};
  rdt_pb_spec_t s;
  rdt_pb_spec_init(&s, "atari", 1000000);
  rdt_pb_field(&s, "frames", REPLAYD__V1__DTYPE__UINT8, 3, frames);
  rdt_pb_field(&s, "done", REPLAYD__V1__DTYPE__BOOL, 0, NULL);
  rdt_pb_normalised(&s, 0.6);
  s.spec.seed = 7;
  Replayd__V1__WorkloadCounters k = REPLAYD__V1__WORKLOAD_COUNTERS__INIT;
  k.size = 10;
  k.bytes = 3 << 20;
  Replayd__V1__Workload w;
  rdt_cl_workload(&w, "abc", &s.spec, &k);
  w.created_unix = 1700000000;
  mock_reply_msg(&w.base);
  rdt_result_t r;
  run_ok(&r, NULL, "--server", server, "describe", "abc", NULL);
  has(r.out, "id            abc\n", "created       2023-11-14 22:13:20 UTC\n",
      "alpha         0.6\n", "epsilon       1e-06\n", "max priority  1048576\n",
      "  FIELD   DTYPE  SHAPE      BYTES/ROW\n", "  frames  uint8  [84,84,4]      28224\n",
      "  done    bool   []                 1\n", "  28225 bytes per row\n",
      "  memory      3.0 MiB\n", NULL);
  assert_int_equal(rdt_cl_seen(NULL, "DescribeWorkload", NULL), 0);

  mock_reply_msg(&w.base);
  run_ok(&r, NULL, "--server", server, "describe", "abc", "--json", NULL);
  assert_json(r.out);
  has(r.out, "\"shape\":[84,84,4]", "\"alpha\":0.6,", "\"max_priority\":1048576,", NULL);
}

static void test_call_errors_exit_1(void **state) {
  (void)state;
  mock_reply_status(5, "no workload abc");
  rdt_result_t r;
  run(&r, NULL, "--server", server, "describe", "abc", NULL);
  assert_int_equal(r.rc, 1);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "replayctl: NOT_FOUND: no workload abc\n");

  /* --json changes nothing about errors: stderr text, exit 1. */
  mock_reply_status(5, "no workload abc");
  run(&r, NULL, "--server", server, "--json", "rm", "abc", "--token", "t", NULL);
  assert_int_equal(r.rc, 1);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "replayctl: NOT_FOUND: no workload abc\n");

  /* Nothing listening. */
  run(&r, NULL, "--server", "127.0.0.1:1", "status", NULL);
  assert_int_equal(r.rc, 1);
  assert_non_null(strstr(r.err, "replayctl: cannot connect to 127.0.0.1:1"));
}

static void test_usage_errors_exit_2(void **state) {
  (void)state;
  rdt_result_t r;
  run(&r, NULL, NULL);
  assert_int_equal(r.rc, 2);
  assert_non_null(strstr(r.err, "replayctl: no command given\nTry 'replayctl --help'.\n"));
  run(&r, NULL, "frob", NULL);
  assert_int_equal(r.rc, 2);
  run(&r, NULL, "ls", "--timeout", "x", NULL);
  assert_int_equal(r.rc, 2);
  run_ok(&r, NULL, "--help", NULL);
  assert_non_null(strstr(r.out, "usage: replayctl"));
  run_ok(&r, NULL, "--version", NULL);
  assert_non_null(strstr(r.out, "replayctl "));
}

/* A file holding text (the token files, an import's input). */
static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static void test_rm_token_sources(void **state) {
  (void)state;
  Replayd__V1__DeleteWorkloadResponse del = REPLAYD__V1__DELETE_WORKLOAD_RESPONSE__INIT;
  rdt_result_t r;
  mock_seen_t seen;

  /* --token */
  mock_reply_msg(&del.base);
  run_ok(&r, NULL, "--server", server, "rm", "w1", "--token", "tok-1", NULL);
  assert_string_equal(r.out, "deleted workload w1\n");
  assert_int_equal(rdt_cl_seen(&seen, "DeleteWorkload", "tok-1"), 0);

  /* The default admin token file under $STATE_DIRECTORY. */
  char dir[] = "/tmp/rdc_rctl_state_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/admin.token", dir);
  write_file(path, "admin-secret\n");
  char env[300];
  snprintf(env, sizeof env, "STATE_DIRECTORY=%s", dir);
  const char *const extra[] = {env, NULL};
  mock_reply_msg(&del.base);
  run_ok(&r, extra, "--server", server, "rm", "w2", "--json", NULL);
  assert_string_equal(r.out, "{\"deleted\":\"w2\"}\n");
  assert_int_equal(rdt_cl_seen(&seen, "DeleteWorkload", "admin-secret"), 0);

  /* $XDG_STATE_HOME/replayd when STATE_DIRECTORY is unset. */
  char xdg[] = "/tmp/rdc_rctl_xdg_XXXXXX";
  assert_non_null(mkdtemp(xdg));
  char sub[300], path2[320];
  snprintf(sub, sizeof sub, "%s/replayd", xdg);
  mkdir(sub, 0700);
  snprintf(path2, sizeof path2, "%s/admin.token", sub);
  write_file(path2, "xdg-secret");
  char env2[300];
  snprintf(env2, sizeof env2, "XDG_STATE_HOME=%s", xdg);
  const char *const extra2[] = {"STATE_DIRECTORY=", env2, NULL};
  mock_reply_msg(&del.base);
  run_ok(&r, extra2, "--server", server, "rm", "w3", NULL);
  assert_int_equal(rdt_cl_seen(&seen, "DeleteWorkload", "xdg-secret"), 0);

  /* --admin-token-file */
  mock_reply_msg(&del.base);
  run_ok(&r, NULL, "--server", server, "rm", "w4", "--admin-token-file", path, NULL);
  assert_int_equal(rdt_cl_seen(&seen, "DeleteWorkload", "admin-secret"), 0);

  /* No token anywhere: a usage error, and nothing is sent. */
  int calls = seen.calls;
  const char *const none[] = {"STATE_DIRECTORY=/nonexistent-rdc", NULL};
  run(&r, none, "--server", server, "rm", "w5", NULL);
  assert_int_equal(r.rc, 2);
  assert_non_null(strstr(r.err, "/nonexistent-rdc/admin.token"));
  assert_non_null(strstr(r.err, "--token"));
  mock_seen(&seen);
  assert_int_equal(seen.calls, calls);

  /* A wrong token: the server's refusal. */
  mock_reply_status(7, "wrong token for workload w6");
  run(&r, NULL, "--server", server, "rm", "w6", "--token", "nope", NULL);
  assert_int_equal(r.rc, 1);
  assert_string_equal(r.err, "replayctl: PERMISSION_DENIED: wrong token for workload w6\n");

  unlink(path);
  unlink(path2);
  rmdir(sub);
  rmdir(xdg);
  rmdir(dir);
}

/* What a command that changed something answers with --json: one member. */
static void test_change_answers_json(void **state) {
  (void)state;
  rdt_result_t r;
  Replayd__V1__ClearProfilesResponse cleared = REPLAYD__V1__CLEAR_PROFILES_RESPONSE__INIT;
  cleared.removed = 3;
  mock_reply_msg(&cleared.base);
  run_ok(&r, NULL, "--server", server, "--json", "profiles", "--clear", "--token", "t", NULL);
  assert_string_equal(r.out, "{\"removed\":3}\n");

  char dir[128];
  assert_int_equal(rdt_tmpdir(dir, sizeof dir, "rctl_import"), 0);
  const char *path = rdt_path(dir, "profiles.jsonl");
  write_file(path, "{}\n");
  Replayd__V1__ImportProfilesResponse imported = REPLAYD__V1__IMPORT_PROFILES_RESPONSE__INIT;
  imported.imported = 2;
  mock_reply_msg(&imported.base);
  run_ok(&r, NULL, "--server", server, "--json", "profiles", "import", path, "--token", "t", NULL);
  assert_string_equal(r.out, "{\"imported\":2}\n");
  assert_int_equal(rdt_rmtree(dir), 0);

  Replayd__V1__RemoveTenantResponse removed = REPLAYD__V1__REMOVE_TENANT_RESPONSE__INIT;
  mock_reply_msg(&removed.base);
  run_ok(&r, NULL, "--server", server, "--json", "tenant", "rm", "team-a", "--token", "t", NULL);
  assert_string_equal(r.out, "{\"removed\":\"team-a\"}\n");
}

static void test_undecodable_reply(void **state) {
  (void)state;
  static const uint8_t garbage[] = {0xff, 0xff, 0xff};
  mock_reply_bytes(garbage, sizeof garbage);
  rdt_result_t r;
  run(&r, NULL, "--server", server, "ls", NULL);
  assert_int_equal(r.rc, 1);
  assert_non_null(strstr(r.err, "could not be decoded"));
}

RDT_CL_MAIN("REPLAYCTL", (&replayctl), mock_group_setup, mock_group_teardown,
            cmocka_unit_test_setup(test_status, mock_test_setup),
            cmocka_unit_test_setup(test_server_from_env, mock_test_setup),
            cmocka_unit_test_setup(test_ls, mock_test_setup),
            cmocka_unit_test_setup(test_describe, mock_test_setup),
            cmocka_unit_test_setup(test_call_errors_exit_1, mock_test_setup),
            cmocka_unit_test_setup(test_usage_errors_exit_2, mock_test_setup),
            cmocka_unit_test_setup(test_rm_token_sources, mock_test_setup),
            cmocka_unit_test_setup(test_change_answers_json, mock_test_setup),
            cmocka_unit_test_setup(test_undecodable_reply, mock_test_setup))
