/* test_cli.c - replayctl's pieces that need no server: the JSON
 * writer and escaper, argument parsing, the state-directory rule and the
 * admin token file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "json_writer.h"
#include "replayctl_cli.h"
#include "replayd_client.h"
#include "rdt_main.h"

static void esc(const char *in, const char *want) {
  char buf[256];
  size_t n = jw_escape(buf, sizeof buf, in);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
}

static void test_escape(void **state) {
  (void)state;
  esc("plain", "plain");
  esc("", "");
  esc("a\"b", "a\\\"b");
  esc("back\\slash", "back\\\\slash");
  esc("tab\there\nnl\rcr", "tab\\there\\nnl\\rcr");
  esc("\b\f", "\\b\\f");
  esc("\x01\x1f", "\\u0001\\u001f");
  esc("/", "/");
  esc("\x7f", "\x7f"); /* DEL is legal in JSON strings */
  /* Valid UTF-8 passes through. */
  esc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  /* Invalid UTF-8 becomes U+FFFD per bad byte: lone continuation, truncated
   * sequence, overlong, surrogate, beyond U+10FFFF. */
  esc("a\x80z", "a\xef\xbf\xbdz");
  esc("a\xc3", "a\xef\xbf\xbd");
  esc("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd");
  esc("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  esc("\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

static void test_escape_truncates_like_snprintf(void **state) {
  (void)state;
  char buf[5];
  size_t n = jw_escape(buf, sizeof buf, "a\"bcdef");
  assert_int_equal(n, 8);
  assert_string_equal(buf, "a\\\"b");
  assert_int_equal(jw_escape(NULL, 0, "xyz"), 3);
}

/* Write a document into a string. */
static char *doc(void (*build)(jw_t *)) {
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  jw_t w;
  jw_init(&w, f);
  build(&w);
  fclose(f);
  return out;
}

static void build_nested(jw_t *w) {
  jw_object_begin(w);
  jw_key(w, "name");
  jw_string(w, "x\"y");
  jw_key(w, "n");
  jw_u64(w, 18446744073709551615ull);
  jw_key(w, "neg");
  jw_i64(w, -5);
  jw_key(w, "list");
  jw_array_begin(w);
  jw_u64(w, 1);
  jw_double(w, 0.6);
  jw_double(w, NAN);
  jw_double(w, INFINITY);
  jw_bool(w, 1);
  jw_null(w);
  jw_string(w, NULL);
  jw_array_begin(w);
  jw_array_end(w);
  jw_object_begin(w);
  jw_object_end(w);
  jw_array_end(w);
  jw_key(w, "d");
  jw_double(w, 0.1 + 0.2);
  jw_key(w, "e");
  jw_double(w, 1e-6);
  jw_object_end(w);
  jw_finish(w);
}

static void test_writer(void **state) {
  (void)state;
  char *s = doc(build_nested);
  assert_string_equal(s, "{\"name\":\"x\\\"y\",\"n\":18446744073709551615,\"neg\":-5,"
                         "\"list\":[1,0.6,null,null,true,null,null,[],{}],"
                         "\"d\":0.30000000000000004,\"e\":1e-06}\n");
  free(s);
}

static void build_long(jw_t *w) {
  /* Longer than the writer's stack buffer, with escapes and multibyte
   * characters across its chunk boundaries. */
  char s[3000];
  size_t n = 0;
  while (n + 4 < sizeof s) {
    s[n++] = 'a';
    s[n++] = '\n';
    s[n++] = '\xc3';
    s[n++] = '\xa9';
  }
  s[n] = '\0';
  jw_array_begin(w);
  jw_string(w, s);
  jw_array_end(w);
}

static void test_writer_long_string(void **state) {
  (void)state;
  char *s = doc(build_long);
  size_t len = strlen(s);
  assert_true(len > 3000);
  assert_int_equal(s[0], '[');
  assert_int_equal(s[1], '"');
  assert_int_equal(s[len - 1], ']');
  /* Every unit came out whole: "a\n\xc3\xa9" -> a \ n \xc3 \xa9 */
  for (size_t i = 2; i + 2 < len; i += 5) {
    assert_int_equal(s[i], 'a');
    assert_int_equal(s[i + 1], '\\');
    assert_int_equal(s[i + 2], 'n');
    assert_int_equal((unsigned char)s[i + 3], 0xc3);
    assert_int_equal((unsigned char)s[i + 4], 0xa9);
    if (s[i + 5] == '"') break;
  }
  free(s);
}

/* ------------------------------------------------------------------ */

/* rctl_parse_args on "replayctl" and the arguments in ap (NULL-terminated). */
static int vparse(rctl_opts_t *o, char *msg, size_t cap, const char *env, va_list ap) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = "replayctl";
  for (char *a; (a = va_arg(ap, char *)) != NULL;) argv[argc++] = a;
  argv[argc] = NULL;
  return rctl_parse_args(argc, argv, env, o, msg, cap);
}

/* The same for the tests of what parses; its message shows when it fails. */
static int parse(rctl_opts_t *o, const char *env, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, env);
  int rc = vparse(o, msg, sizeof msg, env, ap);
  va_end(ap);
  if (rc != 0) print_message("replayctl: %s\n", msg);
  return rc;
}

static void test_args_ok(void **state) {
  (void)state;
  rctl_opts_t o;
  assert_int_equal(parse(&o, NULL, "status", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_STATUS);
  assert_string_equal(o.server, "127.0.0.1:50051");
  assert_false(o.json);
  assert_true(o.timeout_s == 5.0);

  assert_int_equal(parse(&o, "envhost:1", "ls", NULL), 0);
  assert_string_equal(o.server, "envhost:1");
  assert_int_equal(parse(&o, "envhost:1", "--server", "h:2", "ls", NULL), 0);
  assert_string_equal(o.server, "h:2");
  assert_int_equal(parse(&o, "", "ls", NULL), 0); /* empty env = unset */
  assert_string_equal(o.server, "127.0.0.1:50051");

  /* Options after the command, --opt=value form. */
  assert_int_equal(parse(&o, NULL, "describe", "abc", "--json", "--timeout=2.5",
                         "--server=x:9", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_DESCRIBE);
  assert_int_equal(o.n_args, 1);
  assert_string_equal(o.args[0], "abc");
  assert_true(o.json);
  assert_true(o.timeout_s == 2.5);
  assert_string_equal(o.server, "x:9");

  assert_int_equal(parse(&o, NULL, "rm", "abc", "--token", "T0k", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_RM);
  assert_string_equal(o.token, "T0k");
  assert_int_equal(parse(&o, NULL, "--admin-token-file", "/x/y", "rm", "abc", NULL), 0);
  assert_string_equal(o.admin_token_file, "/x/y");
  assert_null(o.token);

  /* "--" lets an ID start with a dash. */
  assert_int_equal(parse(&o, NULL, "describe", "--", "-odd-id", NULL), 0);
  assert_string_equal(o.args[0], "-odd-id");

  assert_int_equal(parse(&o, NULL, "devices", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_DEVICES);
  assert_int_equal(parse(&o, NULL, "--help", NULL), 0);
  assert_true(o.help);
  assert_int_equal(parse(&o, NULL, "bogus", "--version", NULL), 0);
  assert_true(o.version);
}

static void usage_err(const char *want, ...) {
  rctl_opts_t o;
  char msg[256];
  va_list ap;
  va_start(ap, want);
  int rc = vparse(&o, msg, sizeof msg, NULL, ap);
  va_end(ap);
  assert_int_equal(rc, RCTL_EXIT_USAGE);
  if (strstr(msg, want) == NULL) fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

static void test_args_usage_errors(void **state) {
  (void)state;
  usage_err("no command", NULL);
  usage_err("unknown command \"frob\"", "frob", NULL);
  usage_err("unknown option --frob", "--frob", "ls", NULL);
  usage_err("unknown option -x", "-x", "ls", NULL);
  usage_err("takes no arguments", "ls", "extra", NULL);
  usage_err("exactly one workload ID", "describe", NULL);
  usage_err("exactly one workload ID", "rm", "a", "b", NULL);
  usage_err("the workload ID is empty", "describe", "", NULL);
  usage_err("--server needs a value", "ls", "--server", NULL);
  usage_err("--server needs HOST:PORT", "ls", "--server=", NULL);
  usage_err("--timeout needs", "ls", "--timeout", "0", NULL);
  usage_err("--timeout needs", "ls", "--timeout", "-1", NULL);
  usage_err("--timeout needs", "ls", "--timeout", "abc", NULL);
  usage_err("--timeout needs", "ls", "--timeout", "5s", NULL);
  usage_err("--timeout needs", "ls", "--timeout", "inf", NULL);
  usage_err("--timeout needs", "ls", "--timeout", "nan", NULL);
  usage_err("--json takes no value", "ls", "--json=1", NULL);
  usage_err("apply only to status", "devices", "--token", "t", NULL);
  usage_err("apply only to status", "import", "x", "--admin-token-file", "f", NULL);
  usage_err("--token is empty", "rm", "x", "--token", "", NULL);
}

static void test_args_profiles_and_plan(void **state) {
  (void)state;
  rctl_opts_t o;
  assert_int_equal(parse(&o, NULL, "profiles", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_PROFILES);
  assert_int_equal(o.n_args, 0);
  assert_int_equal(parse(&o, NULL, "profiles", "--clear", "--token", "A", NULL), 0);
  assert_true(o.clear);
  assert_string_equal(o.token, "A");
  assert_int_equal(parse(&o, NULL, "profiles", "import", "f.jsonl", NULL), 0);
  assert_int_equal(o.n_args, 2);
  assert_string_equal(o.args[1], "f.jsonl");
  assert_int_equal(parse(&o, NULL, "profiles", "export", "--admin-token-file", "/t", NULL),
                   0);
  assert_string_equal(o.args[0], "export");
  assert_int_equal(parse(&o, NULL, "plan", "hopper_ddpg,batch=256", "--assume", "fpga=u200",
                         "--assume=gpu=/x.jsonl", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_PLAN);
  assert_int_equal(o.n_assume, 2);
  assert_string_equal(o.assume[1], "gpu=/x.jsonl");
  usage_err("--clear takes no arguments", "profiles", "--clear", "export", NULL);
  usage_err("import FILE or export", "profiles", "frob", NULL);
  usage_err("exactly one FILE", "profiles", "import", NULL);
  usage_err("export takes no arguments", "profiles", "export", "x", NULL);
  usage_err("--clear applies only to profiles", "ls", "--clear", NULL);
  usage_err("--assume applies only to plan", "ls", "--assume", "fpga=u200", NULL);
  usage_err("gpu=FILE or fpga=PART", "plan", "x", "--assume", "tpu=1", NULL);
  usage_err("gpu=FILE or fpga=PART", "plan", "x", "--assume", "fpga=", NULL);
  usage_err("plan needs exactly one SPEC", "plan", NULL);
  usage_err("the plan SPEC is empty", "plan", "", NULL);
}

static void test_args_top_and_tls(void **state) {
  (void)state;
  rctl_opts_t o;
  assert_int_equal(parse(&o, NULL, "top", NULL), 0);
  assert_int_equal(o.cmd, RCTL_CMD_TOP);
  assert_false(o.once);
  assert_true(o.interval_s == 1.0);
  assert_int_equal(parse(&o, NULL, "--json", "top", "--once", "--interval=0.25", NULL), 0);
  assert_true(o.once);
  assert_true(o.interval_s == 0.25);
  usage_err("--once and --interval apply only to top", "ls", "--once", NULL);
  usage_err("--once and --interval apply only to top", "status", "--interval", "2", NULL);
  usage_err("--interval needs seconds in [0.1, 3600]", "top", "--interval", "0.05", NULL);
  usage_err("--interval needs seconds in [0.1, 3600]", "top", "--interval", "3601", NULL);
  usage_err("--interval needs seconds in [0.1, 3600]", "top", "--interval", "nan", NULL);
  usage_err("top takes no arguments", "top", "x", NULL);

  assert_int_equal(parse(&o, NULL, "ls", NULL), 0);
  assert_null(o.tls_ca);
  assert_int_equal(parse(&o, NULL, "--tls-ca", "/ca.pem", "ls", NULL), 0);
  assert_string_equal(o.tls_ca, "/ca.pem");
  assert_null(o.tls_cert);
  assert_int_equal(parse(&o, NULL, "top", "--tls-ca=/ca", "--tls-cert", "/c.pem",
                         "--tls-key", "/c.key", NULL), 0);
  assert_string_equal(o.tls_cert, "/c.pem");
  assert_string_equal(o.tls_key, "/c.key");
  usage_err("--tls-cert and --tls-key go together", "--tls-ca", "a", "--tls-cert", "c", "ls",
            NULL);
  usage_err("--tls-cert and --tls-key go together", "--tls-ca", "a", "--tls-key", "k", "ls",
            NULL);
  usage_err("--tls-cert needs --tls-ca", "--tls-cert", "c", "--tls-key", "k", "ls", NULL);
  usage_err("--tls-ca needs a file", "--tls-ca=", "ls", NULL);
}

static void test_plan_spec(void **state) {
  (void)state;
  rdc_spec_t s;
  char msg[256];
  assert_int_equal(rctl_parse_plan_spec("hopper_ddpg,batch=256,depth=50", &s, msg, sizeof msg), 0);
  assert_string_equal(s.learner.algorithm, "ddpg");
  assert_int_equal(s.learner.batch_size, 256);
  assert_int_equal(s.learner.relaxation_depth, 50);
  assert_int_equal(s.learner.n_hidden, 2);
  assert_int_equal(s.learner.hidden[1], 256);
  assert_int_equal(s.learner.n_critic_hidden, 2);
  assert_int_equal(s.n_fields, 5);
  assert_int_equal(s.fields[0].shape[0], 11);
  assert_int_equal(s.fields[1].shape[0], 3);
  assert_int_equal(s.capacity, 100000);
  assert_int_equal(rctl_parse_plan_spec("dqn:8-32-4,capacity=500,fanout=4,spi=0.5", &s, msg,
                                        sizeof msg), 0);
  assert_int_equal(s.learner.num_actions, 4);
  assert_int_equal(s.learner.n_hidden, 1);
  assert_int_equal(s.fanout, 4);
  assert_true(s.learner.samples_per_insert == 0.5);
  assert_int_equal(rctl_parse_plan_spec("ddpg:3-16-16-1,critic=32", &s, msg, sizeof msg), 0);
  assert_int_equal(s.learner.n_critic_hidden, 1);
  assert_int_equal(s.learner.critic_hidden[0], 32);
  assert_int_equal(rctl_parse_plan_spec("bogus", &s, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "cartpole_dqn"));
  assert_int_equal(rctl_parse_plan_spec("dqn:4", &s, msg, sizeof msg), -1);
  assert_int_equal(rctl_parse_plan_spec("dqn:4-0-2", &s, msg, sizeof msg), -1);
  assert_int_equal(rctl_parse_plan_spec("dqn:4-2,batch=x", &s, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "batch"));
  assert_int_equal(rctl_parse_plan_spec("dqn:4-2,frob=1", &s, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "unknown key"));
  assert_int_equal(rctl_parse_plan_spec("dqn:4-2,batch", &s, msg, sizeof msg), -1);
}

static void test_state_dir(void **state) {
  (void)state;
  char d[256];
  assert_int_equal(rctl_state_dir("/var/lib/replayd", "/x", "/home/u", d, sizeof d), 0);
  assert_string_equal(d, "/var/lib/replayd");
  assert_int_equal(rctl_state_dir("/var/lib/replayd:/var/lib/other", NULL, NULL, d, sizeof d), 0);
  assert_string_equal(d, "/var/lib/replayd");
  assert_int_equal(rctl_state_dir("", "/xdg", "/home/u", d, sizeof d), 0);
  assert_string_equal(d, "/xdg/replayd");
  assert_int_equal(rctl_state_dir(NULL, NULL, "/home/u", d, sizeof d), 0);
  assert_string_equal(d, "/home/u/.local/state/replayd");
  /* A relative $XDG_STATE_HOME is ignored, as the daemon ignores it. */
  assert_int_equal(rctl_state_dir(NULL, "rel/xdg", "/home/u", d, sizeof d), 0);
  assert_string_equal(d, "/home/u/.local/state/replayd");
  assert_int_equal(rctl_state_dir(":/second", "/xdg", NULL, d, sizeof d), 0);
  assert_string_equal(d, "/xdg/replayd");
  assert_int_equal(rctl_state_dir(NULL, "", "", d, sizeof d), 0);
  assert_string_equal(d, "./replayd-state");
  char small[8];
  assert_int_equal(rctl_state_dir(NULL, NULL, "/home/user", small, sizeof small), -1);
}

static void write_file(const char *path, const char *content) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

static void test_token_file(void **state) {
  (void)state;
  char dir[] = "/tmp/rdc_cli_test_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[512], tok[129], msg[512];
  snprintf(path, sizeof path, "%s/admin.token", dir);

  write_file(path, "abcdef0123\n");
  assert_int_equal(rctl_read_token_file(path, tok, sizeof tok, msg, sizeof msg), 0);
  assert_string_equal(tok, "abcdef0123");
  write_file(path, "  \n abc \r\nsecond line\n");
  assert_int_equal(rctl_read_token_file(path, tok, sizeof tok, msg, sizeof msg), 0);
  assert_string_equal(tok, "abc");
  write_file(path, "\n \n");
  assert_int_equal(rctl_read_token_file(path, tok, sizeof tok, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "empty"));
  write_file(path, "ab cd\n");
  assert_int_equal(rctl_read_token_file(path, tok, sizeof tok, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "printable"));
  char small[4];
  write_file(path, "abcdef");
  assert_int_equal(rctl_read_token_file(path, small, sizeof small, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "longer"));
  unlink(path);
  assert_int_equal(rctl_read_token_file(path, tok, sizeof tok, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "No such file"));
  assert_non_null(strstr(msg, path));
  rmdir(dir);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_escape),
         cmocka_unit_test(test_escape_truncates_like_snprintf),
         cmocka_unit_test(test_writer),
         cmocka_unit_test(test_writer_long_string),
         cmocka_unit_test(test_args_ok),
         cmocka_unit_test(test_args_usage_errors),
         cmocka_unit_test(test_args_profiles_and_plan),
         cmocka_unit_test(test_args_top_and_tls),
         cmocka_unit_test(test_plan_spec),
         cmocka_unit_test(test_state_dir),
         cmocka_unit_test(test_token_file))
