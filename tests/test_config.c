/* test_config.c - daemon configuration (defaults, config file, flags) and
 * the log it configures. */
#define _GNU_SOURCE /* strptime, timegm */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static char tmpdir[64];

static int setup_dir(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/rd_test_config.XXXXXX");
  return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown_dir(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Write content (len bytes, so it may hold NULs) to tmpdir/name. */
static const char *write_file_n(const char *name, const char *content, size_t len) {
  static char path[2][128];
  static int which;
  char *p = path[which++ & 1];
  snprintf(p, 128, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, len, f), len);
  fclose(f);
  return p;
}

static const char *write_file(const char *name, const char *content) {
  return write_file_n(name, content, strlen(content));
}

/* argv[0] "replayd", then ap's arguments up to its NULL; returns argc. */
static int make_argv(char *argv[32], va_list ap) {
  int argc = 0;
  argv[argc++] = "replayd";
  char *a;
  while ((a = va_arg(ap, char *)) != NULL) {
    assert_true(argc < 31);
    argv[argc++] = a;
  }
  argv[argc] = NULL;
  return argc;
}

/* Parse argv (NULL-terminated list after the program name). */
static int parse(rd_config_t *c, rd_error_t *err, int *help, int *version, ...) {
  char *argv[32];
  va_list ap;
  va_start(ap, version);
  int argc = make_argv(argv, ap);
  va_end(ap);
  rd_error_clear(err);
  return rd_config_parse_args(c, argc, argv, help, version, err);
}

#define PARSE(c, err, ...) parse(c, err, NULL, NULL, __VA_ARGS__, (char *)NULL)

/* A config at its defaults, a copy to show a failing call changed nothing,
 * and a cleared error. */
typedef struct {
  rd_config_t c, before;
  rd_error_t err;
} fresh_t;

static void fresh(fresh_t *f) {
  rd_config_defaults(&f->c);
  f->before = f->c;
  rd_error_clear(&f->err);
}

/* A flag error: RD_EINVAL, the message contains want, config unchanged. */
static void expect_flag_error(const char *want, ...) {
  char *argv[32];
  va_list ap;
  va_start(ap, want);
  int argc = make_argv(argv, ap);
  va_end(ap);
  fresh_t f;
  fresh(&f);
  int rc = rd_config_parse_args(&f.c, argc, argv, NULL, NULL, &f.err);
  if (rc != RD_EINVAL || strstr(f.err.msg, want) == NULL)
    fail_msg("argv[1]=%s: got %s \"%s\", want RD_EINVAL containing \"%s\"", argv[1],
             rd_err_name(rc), f.err.msg, want);
  assert_int_equal(f.err.code, RD_EINVAL);
  assert_memory_equal(&f.c, &f.before, sizeof f.c);
}

/* A file error: RD_EINVAL with "PATH:LINE: want", config unchanged. */
static void expect_file_error(const char *content, size_t len, unsigned line, const char *want) {
  const char *path = write_file_n("bad.conf", content, len);
  fresh_t f;
  fresh(&f);
  int rc = rd_config_load_file(&f.c, path, &f.err);
  char prefix[192];
  snprintf(prefix, sizeof prefix, "%s:%u: ", path, line);
  if (rc != RD_EINVAL || strncmp(f.err.msg, prefix, strlen(prefix)) != 0 ||
      strstr(f.err.msg, want) == NULL)
    fail_msg("file \"%.*s\": got %s \"%s\", want \"%s...%s\"", (int)len, content,
             rd_err_name(rc), f.err.msg, prefix, want);
  assert_memory_equal(&f.c, &f.before, sizeof f.c);
}

#define FILE_ERR(lit, line, want) expect_file_error(lit, sizeof(lit) - 1, line, want)

/* The settings the tests below set, as one row of expected values. */
typedef struct {
  const char *listen, *state_dir, *log_file;
  rd_log_level_t log_level;
  uint32_t threads, max_message_bytes, max_batch, max_capacity;
  uint64_t max_memory_bytes;
  uint32_t max_workloads;
} settings_t;

static void assert_settings(const rd_config_t *c, const settings_t *want) {
  assert_string_equal(c->listen, want->listen);
  assert_string_equal(c->state_dir, want->state_dir);
  assert_string_equal(c->log_file, want->log_file);
  assert_int_equal(c->log_level, want->log_level);
  assert_int_equal(c->threads, want->threads);
  assert_int_equal(c->max_message_bytes, want->max_message_bytes);
  assert_int_equal(c->max_batch, want->max_batch);
  assert_int_equal(c->max_capacity, want->max_capacity);
  assert_true(c->max_memory_bytes == want->max_memory_bytes);
  assert_int_equal(c->max_workloads, want->max_workloads);
}

/* ------------------------------------------------------------------ */
/* Defaults                                                            */
/* ------------------------------------------------------------------ */

static void clear_env(void) {
  unsetenv("STATE_DIRECTORY");
  unsetenv("XDG_STATE_HOME");
  unsetenv("HOME");
}

static void test_defaults(void **state) {
  (void)state;
  clear_env();
  setenv("HOME", "/home/ann", 1);
  rd_config_t c;
  rd_config_defaults(&c);
  assert_settings(&c, &(settings_t){"127.0.0.1:50051", "/home/ann/.local/state/replayd", "",
                                    RD_LOG_INFO, 2, 64u << 20, 65536, 1u << 24, 8ull << 30, 64});
  assert_string_equal(c.fpga_csim, ""); /* no C-simulation FPGA unless asked */
  assert_string_equal(c.fpga_xclbin, ""); /* no xclbin unless asked */
  /* rmm.h's default build, as kernels/build_xclbin.sh makes it. */
  assert_int_equal(c.fpga_xclbin_shape.k, 16);
  assert_int_equal(c.fpga_xclbin_shape.n, 65536);
  assert_int_equal(c.fpga_xclbin_shape.batch, 1024);
  assert_int_equal(c.fpga_xclbin_shape.min_table, 65536);
  assert_true(rd_fpga_xclbin_max_leaf(&c.fpga_xclbin_shape) == UINT64_C(140737488355327));
}

static void test_defaults_state_dir_env(void **state) {
  (void)state;
  /* A HOME too long for PATH_MAX is not truncated into another path. */
  static char longhome[PATH_MAX + 16];
  memset(longhome, 'h', sizeof longhome - 1);
  longhome[0] = '/';
  longhome[sizeof longhome - 1] = '\0';
  /* Each step sets what is not NULL ("" sets an empty variable) on top of
   * the steps before it. */
  const struct {
    const char *home, *xdg, *state_directory, *want;
  } steps[] = {
      {NULL, NULL, NULL, "./replayd-state"},
      {"/home/ann", "/xdg/state", NULL, "/xdg/state/replayd"},
      /* A relative XDG_STATE_HOME is invalid per the XDG spec: ignored. */
      {NULL, "relative/state", NULL, "/home/ann/.local/state/replayd"},
      /* systemd's StateDirectory= wins; with several, the first. */
      {NULL, NULL, "/var/lib/replayd:/var/lib/other", "/var/lib/replayd"},
      {NULL, NULL, "/var/lib/replayd", "/var/lib/replayd"},
      /* Empty variables count as unset. */
      {NULL, "", "", "/home/ann/.local/state/replayd"},
      {longhome, NULL, NULL, "./replayd-state"},
  };
  clear_env();
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    if (steps[i].home) setenv("HOME", steps[i].home, 1);
    if (steps[i].xdg) setenv("XDG_STATE_HOME", steps[i].xdg, 1);
    if (steps[i].state_directory) setenv("STATE_DIRECTORY", steps[i].state_directory, 1);
    rd_config_t c;
    rd_config_defaults(&c);
    assert_string_equal(c.state_dir, steps[i].want);
  }
  clear_env();
}

/* ------------------------------------------------------------------ */
/* Config file                                                         */
/* ------------------------------------------------------------------ */

static void test_file_all_keys(void **state) {
  (void)state;
  const char *path = write_file("all.conf",
                                "# replayd test config\n"
                                "\n"
                                "listen = 0.0.0.0:6000\n"
                                "  state-dir=/srv/replayd   \n"
                                "\tlog-file = /var/log/replayd.log\t\n"
                                "log-level = debug\n"
                                "threads = 8   # inline comment\n"
                                "max-message-bytes = 16M\n"
                                "max_batch = 1024\n" /* '_' spelling accepted in files */
                                "max-capacity = 1000000\n"
                                "max-memory = 2G\n"
                                "max-workloads = 10\n"
                                "   # indented comment\n"
                                "fpga_csim = u250\n"
                                "fpga-xclbin = /opt/replayd/k.xclbin\n"
                                "fpga_xclbin_shape = 8,4096,256,1000\n"
                                "log-file = /var/log/replayd#2.log\n" /* '#' inside a value */
                                "threads = 9"); /* no final newline; later line wins */
  rd_config_t c;
  rd_config_defaults(&c);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_config_load_file(&c, path, &err);
  if (rc) fail_msg("%s", err.msg);
  assert_settings(&c, &(settings_t){"0.0.0.0:6000", "/srv/replayd", "/var/log/replayd#2.log",
                                    RD_LOG_DEBUG, 9, 16u << 20, 1024, 1000000, 2ull << 30, 10});
  assert_string_equal(c.fpga_csim, "u250");
  assert_string_equal(c.fpga_xclbin, "/opt/replayd/k.xclbin");
  assert_int_equal(c.fpga_xclbin_shape.k, 8);
  assert_int_equal(c.fpga_xclbin_shape.n, 4096);
  assert_int_equal(c.fpga_xclbin_shape.batch, 256);
  assert_int_equal(c.fpga_xclbin_shape.min_table, 1000);
  /* The build's leaf bound is the CPU tree's for its smallest table. */
  assert_true(rd_fpga_xclbin_max_leaf(&c.fpga_xclbin_shape) == UINT64_C(9223372036854775));

  /* An empty log-file means stderr again. */
  path = write_file("empty.conf", "log-file =\n");
  assert_int_equal(rd_config_load_file(&c, path, &err), RD_OK);
  assert_string_equal(c.log_file, "");
}

static void test_file_errors(void **state) {
  (void)state;
  FILE_ERR("threads = 4\n\nbogus = 1\n", 3, "unknown key 'bogus'");
  FILE_ERR("# c\nthreads = 0\n", 2, "bad value '0' for threads: expected an integer in [1, 64]");
  FILE_ERR("threads = 65\n", 1, "[1, 64]");
  FILE_ERR("threads = 4x\n", 1, "bad value '4x' for threads");
  FILE_ERR("threads\n", 1, "expected 'key = value'");
  FILE_ERR(" = 4\n", 1, "missing key");
  FILE_ERR("listen = 1.2.3.4:5\nconfig = other.conf\n", 2, "'config' cannot be set");
  FILE_ERR("log-level = loud\n", 1, "expected one of debug, info, warn, error");
  FILE_ERR("listen = nocolon\n", 1, "expected host:port");
  FILE_ERR("state-dir =\n", 1, "bad value '' for state-dir");
  FILE_ERR("max-memory = 1K\n", 1, "bytes in [1M, 1048576T]");
  FILE_ERR("threads = 4\nmax-batch = 1\0 2\n", 2, "NUL byte");
  FILE_ERR("threads\t= 3 3\n", 1, "bad value '3 3'");
  FILE_ERR("fpga-csim = u250\nfpga-xclbin-shape = 16\n", 2,
           "bad value '16' for fpga-xclbin-shape: expected K,N,BATCH[,MIN_TABLE]");

  static char longline[5000];
  memset(longline, ' ', sizeof longline);
  memcpy(longline, "threads = 4\n", 12);
  longline[sizeof longline - 1] = '\n';
  expect_file_error(longline, sizeof longline, 2, "line longer than 4096 bytes");
  /* A line of exactly 4096 bytes with its newline is one. */
  memset(longline, ' ', 4096);
  memcpy(longline, "threads = 4", 11);
  longline[4095] = '\n';
  const char *ok = write_file_n("edge.conf", longline, 4096);
  rd_config_t c;
  rd_config_defaults(&c);
  assert_int_equal(rd_config_load_file(&c, ok, NULL), RD_OK);
  assert_int_equal(c.threads, 4);

  /* A file with no newline is refused at 4 KiB, not read whole (found by
   * fuzz_config: --config /dev/zero took all memory). */
  rd_config_t before = c;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_config_load_file(&c, "/dev/zero", &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "/dev/zero:1: line longer than 4096 bytes"));
  assert_memory_equal(&c, &before, sizeof c);
  char *argv[] = {"replayd", "--config=/dev/zero", NULL};
  assert_int_equal(rd_config_parse_args(&c, 2, argv, NULL, NULL, &err), RD_EINVAL);
  assert_memory_equal(&c, &before, sizeof c);
}

static void test_file_missing(void **state) {
  (void)state;
  fresh_t f;
  fresh(&f);
  char path[128];
  snprintf(path, sizeof path, "%s/does-not-exist.conf", tmpdir);
  assert_int_equal(rd_config_load_file(&f.c, path, &f.err), RD_EINVAL);
  assert_non_null(strstr(f.err.msg, path));
  assert_non_null(strstr(f.err.msg, "No such file"));
  assert_int_equal(rd_config_load_file(&f.c, "", &f.err), RD_EINVAL);
  assert_memory_equal(&f.c, &f.before, sizeof f.c);
}

/* ------------------------------------------------------------------ */
/* Flags                                                               */
/* ------------------------------------------------------------------ */

/* fpga-xclbin names a file (checked at start, provider_fpga.c, where a build
 * without XRT refuses it); fpga-xclbin-shape is the replay kernel build
 * inside it, K,N,BATCH[,MIN_TABLE], each bound the kernel's. */
static void test_fpga_xclbin_keys(void **state) {
  (void)state;
  rd_config_t c;
  rd_config_defaults(&c);
  rd_error_t err;
  int rc = PARSE(&c, &err, "--fpga-xclbin=/srv/fpga/replayd.xclbin", "--fpga-xclbin-shape",
                 "32,1048576,512");
  if (rc) fail_msg("%s", err.msg);
  assert_string_equal(c.fpga_xclbin, "/srv/fpga/replayd.xclbin");
  assert_int_equal(c.fpga_xclbin_shape.k, 32);
  assert_int_equal(c.fpga_xclbin_shape.n, 1048576);
  assert_int_equal(c.fpga_xclbin_shape.batch, 512);
  assert_int_equal(c.fpga_xclbin_shape.min_table, 1048576); /* N: rmm.h's default bound */
  assert_true(rd_fpga_xclbin_max_leaf(&c.fpga_xclbin_shape) ==
              UINT64_C(0x7fffffffffffffff) / 1048576);
  /* The bounds themselves are accepted. */
  rc = PARSE(&c, &err, "--fpga-xclbin-shape", "2,2,1,1");
  if (rc) fail_msg("%s", err.msg);
  assert_int_equal(c.fpga_xclbin_shape.k, 2);
  assert_int_equal(c.fpga_xclbin_shape.min_table, 1);
  rc = PARSE(&c, &err, "--fpga-xclbin-shape", "64,1073741824,16777216,1073741824");
  if (rc) fail_msg("%s", err.msg);
  assert_int_equal(c.fpga_xclbin_shape.n, 1u << 30);
  assert_int_equal(c.fpga_xclbin_shape.batch, 1u << 24);
  /* Empty: no xclbin again. */
  assert_int_equal(PARSE(&c, &err, "--fpga-xclbin="), RD_OK);
  assert_string_equal(c.fpga_xclbin, "");

  /* Each bad value names the key, the form and what is wrong; nothing
   * changes. */
  expect_flag_error("--fpga-xclbin-shape: bad value '3,4096,256' for fpga-xclbin-shape: "
                    "expected K,N,BATCH[,MIN_TABLE] (the replay kernel's build): K 3 is not a "
                    "power of two in [2, 64]", "--fpga-xclbin-shape", "3,4096,256", NULL);
  expect_flag_error("K 128 is not a power of two", "--fpga-xclbin-shape", "128,4096,256", NULL);
  expect_flag_error("K 0 is not", "--fpga-xclbin-shape", "0,4096,256", NULL);
  expect_flag_error("N 1 is outside [2, 1073741824]", "--fpga-xclbin-shape", "16,1,256", NULL);
  expect_flag_error("N 1073741825 is outside", "--fpga-xclbin-shape", "16,1073741825,256",
                    NULL);
  expect_flag_error("BATCH 0 is outside [1, 16777216]", "--fpga-xclbin-shape", "16,4096,0",
                    NULL);
  expect_flag_error("BATCH 16777217 is outside", "--fpga-xclbin-shape", "16,4096,16777217",
                    NULL);
  expect_flag_error("MIN_TABLE 4097 is outside [1, N = 4096]", "--fpga-xclbin-shape",
                    "16,4096,256,4097", NULL);
  expect_flag_error("MIN_TABLE 0 is outside", "--fpga-xclbin-shape", "16,4096,256,0", NULL);
  static const char *const malformed[] = {"16,4096",   "16,4096,256,1,2", "16,,256",
                                          "a,b,c",     " 16,4096,256",    "16,4096,256,",
                                          "16;4096;256", "",              "-16,4096,256",
                                          "16,4096,99999999999999999999"};
  for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
    char flag[80];
    snprintf(flag, sizeof flag, "--fpga-xclbin-shape=%s", malformed[i]);
    expect_flag_error("expected 3 or 4 comma-separated integers", flag, NULL);
  }
  expect_flag_error("control characters", "--fpga-xclbin", "/tmp/a\nb.xclbin", NULL);
}

static void test_flags_both_forms(void **state) {
  (void)state;
  rd_config_t c;
  rd_config_defaults(&c);
  rd_error_t err;
  int rc = PARSE(&c, &err, "--listen", "[::1]:7000", "--state-dir=/tmp/sd", "--log-file",
                 "/tmp/l.log", "--log-level=warn", "--threads", "64", "--max-message-bytes=4K",
                 "--max-batch", "16777216", "--max-capacity=268435456", "--max-memory", "1T",
                 "--max-workloads=4096");
  if (rc) fail_msg("%s", err.msg);
  assert_settings(&c, &(settings_t){"[::1]:7000", "/tmp/sd", "/tmp/l.log", RD_LOG_WARN, 64, 4096,
                                    1u << 24, 1u << 28, 1ull << 40, 4096});

  /* Later flags win; "--key=" gives an empty value where one is allowed. */
  rc = PARSE(&c, &err, "--threads=3", "--threads", "4", "--log-file=", "--log-level", "error");
  assert_int_equal(rc, RD_OK);
  assert_int_equal(c.threads, 4);
  assert_string_equal(c.log_file, "");
  assert_int_equal(c.log_level, RD_LOG_ERROR);

  /* fpga-csim names a part (checked against the part files at start,
   * main.c); too long a name is refused here. */
  rc = PARSE(&c, &err, "--fpga-csim", "u280");
  assert_int_equal(rc, RD_OK);
  assert_string_equal(c.fpga_csim, "u280");
  char long_part[80];
  memset(long_part, 'u', sizeof long_part - 1);
  long_part[sizeof long_part - 1] = '\0';
  rc = PARSE(&c, &err, "--fpga-csim", long_part);
  assert_int_equal(rc, RD_EINVAL);
  assert_non_null(strstr(err.msg, "fpga-csim"));
  assert_string_equal(c.fpga_csim, "u280");

  /* No flags: nothing changes. */
  rd_config_t before = c;
  assert_int_equal(parse(&c, &err, NULL, NULL, (char *)NULL), RD_OK);
  assert_memory_equal(&c, &before, sizeof c);
}

static void test_precedence(void **state) {
  (void)state;
  const char *file = write_file("p.conf", "threads = 3\nlisten = 10.0.0.1:1\nmax-batch = 7\n");
  char cfg_eq[160];
  snprintf(cfg_eq, sizeof cfg_eq, "--config=%s", file);
  rd_config_t c;
  rd_error_t err;

  /* File over defaults. */
  rd_config_defaults(&c);
  assert_int_equal(PARSE(&c, &err, "--config", file), RD_OK);
  assert_int_equal(c.threads, 3);
  assert_string_equal(c.listen, "10.0.0.1:1");
  assert_int_equal(c.max_workloads, 64); /* untouched default */

  /* Flags over the file, whether --config comes before or after them. */
  rd_config_defaults(&c);
  assert_int_equal(PARSE(&c, &err, "--threads", "5", cfg_eq, "--max-batch=9"), RD_OK);
  assert_int_equal(c.threads, 5);
  assert_int_equal(c.max_batch, 9);
  assert_string_equal(c.listen, "10.0.0.1:1");

  rd_config_defaults(&c);
  assert_int_equal(PARSE(&c, &err, "--config", file, "--threads", "6"), RD_OK);
  assert_int_equal(c.threads, 6);
  assert_int_equal(c.max_batch, 7);

  /* Two files: in order, the later wins, and flags beat both. */
  const char *file2 = write_file("q.conf", "threads = 12\nmax-workloads = 2\n");
  rd_config_defaults(&c);
  assert_int_equal(PARSE(&c, &err, "--max-workloads", "5", "--config", file, "--config", file2),
                   RD_OK);
  assert_int_equal(c.threads, 12);
  assert_int_equal(c.max_workloads, 5);
  assert_int_equal(c.max_batch, 7);

  /* A bad file fails the whole parse and changes nothing. */
  const char *bad = write_file("bad2.conf", "threads = 2\nthreads = many\n");
  rd_config_defaults(&c);
  rd_config_t before = c;
  assert_int_equal(PARSE(&c, &err, "--threads", "9", "--config", bad), RD_EINVAL);
  assert_non_null(strstr(err.msg, ":2: bad value 'many' for threads"));
  assert_memory_equal(&c, &before, sizeof c);
}

static void test_flag_errors(void **state) {
  (void)state;
  expect_flag_error("unknown flag '--bogus'", "--bogus", "1", NULL);
  expect_flag_error("unknown flag '--max_batch'", "--max_batch", "1", NULL);
  expect_flag_error("unexpected argument 'stray'", "--threads", "2", "stray", NULL);
  expect_flag_error("unexpected argument '-t'", "-t", "2", NULL);
  expect_flag_error("unexpected argument '--'", "--", NULL);
  expect_flag_error("--threads needs a value", "--threads", NULL);
  expect_flag_error("--log-file needs a value, not the flag '--threads'", "--log-file",
                    "--threads", "2", NULL);
  expect_flag_error("--threads: bad value '0' for threads: expected an integer in [1, 64]",
                    "--threads", "0", NULL);
  expect_flag_error("[1, 64]", "--threads=65", NULL);
  expect_flag_error("--log-level: bad value 'verbose'", "--log-level", "verbose", NULL);
  expect_flag_error("[1, 16777216]", "--max-batch", "16777217", NULL);
  expect_flag_error("[1, 268435456]", "--max-capacity", "0", NULL);
  expect_flag_error("[1, 4096]", "--max-workloads", "4097", NULL);
  expect_flag_error("expected host:port", "--listen", "localhost", NULL);
  expect_flag_error("bad value '' for listen", "--listen=", NULL);
  expect_flag_error("control characters", "--state-dir", "/tmp/a\nb", NULL);
  expect_flag_error("--config needs a file path", "--config=", NULL);
  expect_flag_error("--config needs a value", "--config", NULL);
  /* An error anywhere means no flag is applied, even earlier good ones. */
  expect_flag_error("unknown flag", "--threads", "8", "--listen", "1.2.3.4:5", "--nope", NULL);

  /* A string too long for its field is refused, not truncated. */
  static char longpath[PATH_MAX + 32];
  memset(longpath, 'p', sizeof longpath - 1);
  longpath[0] = '/';
  longpath[sizeof longpath - 1] = '\0';
  expect_flag_error("for state-dir", "--state-dir", longpath, NULL);
}

static void test_byte_suffixes(void **state) {
  (void)state;
  static const struct {
    const char *v;
    uint32_t want;
  } ok[] = {{"4096", 4096},     {"4K", 4096},         {"4k", 4096},
            {"64M", 64u << 20}, {"1G", 1u << 30},     {"1048576", 1u << 20},
            {"1023M", 1023u << 20}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    rd_config_t c;
    rd_config_defaults(&c);
    rd_error_t err;
    char flag[64];
    snprintf(flag, sizeof flag, "--max-message-bytes=%s", ok[i].v);
    int rc = PARSE(&c, &err, flag);
    if (rc) fail_msg("%s: %s", flag, err.msg);
    assert_int_equal(c.max_message_bytes, ok[i].want);
  }
  rd_config_t c;
  rd_config_defaults(&c);
  rd_error_t err;
  assert_int_equal(PARSE(&c, &err, "--max-memory", "16T"), RD_OK);
  assert_true(c.max_memory_bytes == (16ull << 40));
  assert_int_equal(PARSE(&c, &err, "--max-memory", "3221225472"), RD_OK);
  assert_true(c.max_memory_bytes == (3ull << 30));
  assert_int_equal(PARSE(&c, &err, "--max-memory", "1M"), RD_OK);
  assert_true(c.max_memory_bytes == (1ull << 20));

  expect_flag_error("bytes in [4K, 1G], suffix K/M/G/T allowed", "--max-message-bytes", "3K", NULL);
  expect_flag_error("[4K, 1G]", "--max-message-bytes", "2G", NULL);
  expect_flag_error("[4K, 1G]", "--max-message-bytes", "1025M", NULL);
  expect_flag_error("bad value '4KB'", "--max-message-bytes", "4KB", NULL);
  expect_flag_error("bad value 'K'", "--max-message-bytes", "K", NULL);
  expect_flag_error("bad value '1.5G'", "--max-memory", "1.5G", NULL);
  expect_flag_error("bad value '1M'", "--max-batch", "1M", NULL); /* counts take no suffix */
  expect_flag_error("[1M, 1048576T]", "--max-memory", "1048577T", NULL);
}

static void test_number_strictness(void **state) {
  (void)state;
  /* Overflow of uint64 itself, of the suffix multiplication, and of the
   * 32-bit field, each a clear error rather than a wrapped value. */
  expect_flag_error("bad value '99999999999999999999'", "--threads", "99999999999999999999", NULL);
  expect_flag_error("bad value '18446744073709551616'", "--max-memory", "18446744073709551616", NULL);
  expect_flag_error("bad value '17179869184G'", "--max-memory", "17179869184G", NULL);
  expect_flag_error("bad value '4294967297'", "--max-batch", "4294967297", NULL);
  /* Values that would wrap into the accepted range: 2^64 + 1, 2^64 + 2^30. */
  expect_flag_error("bad value '18446744073709551617'", "--threads", "18446744073709551617", NULL);
  expect_flag_error("bad value '18446744074783293440'", "--max-memory", "18446744074783293440", NULL);
  expect_flag_error("bad value '16777216T'", "--max-memory", "16777216T", NULL); /* 2^64 */
  expect_flag_error("bad value '-1'", "--threads=-1", NULL);
  expect_flag_error("bad value '+1'", "--threads=+1", NULL);
  expect_flag_error("bad value ' 1'", "--threads", " 1", NULL);
  expect_flag_error("bad value '1 '", "--threads", "1 ", NULL);
  expect_flag_error("bad value '0x10'", "--threads", "0x10", NULL);
  expect_flag_error("bad value ''", "--threads=", NULL);
  expect_flag_error("bad value '4abc'", "--max-workloads", "4abc", NULL);
  /* Leading zeros are still decimal. */
  rd_config_t c;
  rd_config_defaults(&c);
  rd_error_t err;
  assert_int_equal(PARSE(&c, &err, "--threads", "010"), RD_OK);
  assert_int_equal(c.threads, 10);
}

static void test_help_version(void **state) {
  (void)state;
  fresh_t f;
  fresh(&f);
  int help = -1, version = -1;
  /* --help wins over anything else, even a bad flag or missing file. */
  assert_int_equal(parse(&f.c, &f.err, &help, &version, "--bogus", "--config", "/nonexistent",
                         "--help", (char *)NULL),
                   RD_OK);
  assert_int_equal(help, 1);
  assert_int_equal(version, 0);
  assert_memory_equal(&f.c, &f.before, sizeof f.c);
  assert_int_equal(parse(&f.c, &f.err, &help, &version, "-h", (char *)NULL), RD_OK);
  assert_int_equal(help, 1);
  assert_int_equal(parse(&f.c, &f.err, &help, &version, "--version", (char *)NULL), RD_OK);
  assert_int_equal(help, 0);
  assert_int_equal(version, 1);
  assert_int_equal(parse(&f.c, &f.err, &help, &version, "--threads", "3", (char *)NULL), RD_OK);
  assert_int_equal(help, 0);
  assert_int_equal(version, 0);
}

static void test_usage(void **state) {
  (void)state;
  const char *u = rd_config_usage();
  assert_non_null(u);
  assert_ptr_equal(u, rd_config_usage()); /* built once */
  static const char *const want[] = {
      "--config PATH", "--listen ADDR", "--state-dir PATH", "--log-file PATH",
      "--log-level LEVEL", "--threads N", "--max-message-bytes BYTES", "--max-batch N",
      "--max-capacity N", "--max-memory BYTES", "--max-workloads N", "--fpga-csim PART",
      "C-simulation (no board", "--fpga-xclbin PATH", "needs an XRT build",
      "--fpga-xclbin-shape K,N,B", "RMM_MAX_LEAF = (2^63-1)/MIN", "--help", "--version",
      /* defaults */
      "default \"127.0.0.1:50051\"", "default \"\"", "default info", "default 2)",
      "default 64M", "default 65536", "default 16777216", "default 8G", "default 64)",
      "default 16,65536,1024)",
      /* ranges */
      "[1, 64]", "[4K, 1G]", "[1, 4096]"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strstr(u, want[i]) == NULL) fail_msg("usage lacks \"%s\":\n%s", want[i], u);
}


/* ------------------------------------------------------------------ */
/* Logging                                                             */
/* ------------------------------------------------------------------ */

/* Read a whole (small) file into a static buffer. */
static const char *slurp(const char *path) {
  static char buf[1 << 20];
  FILE *f = fopen(path, "r");
  if (f == NULL) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static size_t count_lines(const char *text) {
  size_t n = 0;
  for (; *text; text++) n += *text == '\n';
  return n;
}

/* Every line of text matches the documented format. */
static void check_format(const char *text) {
  regex_t re;
  assert_int_equal(regcomp(&re,
                           "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                           "(DEBUG|INFO|WARN|ERROR) [a-z]+: [^\n]*$",
                           REG_EXTENDED | REG_NOSUB),
                   0);
  char line[8192];
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    assert_non_null(nl); /* every line is terminated */
    size_t len = (size_t)(nl - p);
    assert_true(len < sizeof line);
    memcpy(line, p, len);
    line[len] = '\0';
    if (regexec(&re, line, 0, NULL, 0) != 0) fail_msg("bad log line: \"%s\"", line);
    p = nl + 1;
  }
  regfree(&re);
}

static void test_log_format_and_levels(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/levels.log", tmpdir);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_log_open(path, RD_LOG_WARN, &err), RD_OK);
  time_t before = time(NULL);
  rd_log_debug("test", "hidden %d", 1);
  rd_log_info("test", "hidden %d", 2);
  rd_log_warn("test", "shown %d", 3);
  rd_log_error("test", "shown %s", "four");
  rd_log_close();
  const char *text = slurp(path);
  assert_non_null(text);
  check_format(text);
  assert_int_equal(count_lines(text), 2);
  assert_null(strstr(text, "hidden"));
  assert_non_null(strstr(text, "Z WARN test: shown 3\n"));
  assert_non_null(strstr(text, "Z ERROR test: shown four\n"));
  /* The timestamp is UTC and now. */
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  assert_non_null(strptime(text, "%Y-%m-%dT%H:%M:%S", &tm));
  time_t t = timegm(&tm);
  assert_true(t >= before - 1 && t <= time(NULL) + 1);

  /* Debug level shows everything. */
  assert_int_equal(rd_log_open(path, RD_LOG_DEBUG, &err), RD_OK);
  rd_log_debug("test", "now visible");
  rd_log_close();
  text = slurp(path);
  assert_non_null(strstr(text, "Z DEBUG test: now visible\n"));
  assert_int_equal(count_lines(text), 3); /* appended, not truncated */
}

static void test_log_one_line_per_call(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/sanitize.log", tmpdir);
  assert_int_equal(rd_log_open(path, RD_LOG_INFO, NULL), RD_OK);
  /* Client text with a newline must not forge a second line. */
  rd_log_info("test", "name \"%s\"", "evil\n2026-01-01T00:00:00.000Z ERROR fake: x\x1b[31m");
  static char big[10000];
  memset(big, 'b', sizeof big - 1);
  rd_log_info("test", "%s", big);
  rd_log_close();
  const char *text = slurp(path);
  check_format(text);
  assert_int_equal(count_lines(text), 2);
  assert_non_null(strstr(text, "name \"evil?2026-01-01T00:00:00.000Z ERROR fake: x?[31m\"\n"));
  const char *second = strchr(text, '\n') + 1;
  size_t len = strlen(second);
  assert_true(len <= 4096);
  assert_memory_equal(second + len - 4, "...\n", 4);
}

static void test_log_reopen(void **state) {
  (void)state;
  char path[128], rotated[140], sub[128], inner[160];
  snprintf(path, sizeof path, "%s/rot.log", tmpdir);
  snprintf(rotated, sizeof rotated, "%s.1", path);
  assert_int_equal(rd_log_open(path, RD_LOG_INFO, NULL), RD_OK);
  rd_log_info("test", "before rotation");
  assert_int_equal(rename(path, rotated), 0);
  rd_log_info("test", "still to the old file");
  assert_int_equal(rd_log_reopen(), RD_OK);
  rd_log_info("test", "after rotation");
  const char *text = slurp(rotated);
  assert_non_null(strstr(text, "before rotation"));
  assert_non_null(strstr(text, "still to the old file"));
  assert_null(strstr(text, "after rotation"));
  text = slurp(path);
  assert_non_null(text);
  assert_int_equal(count_lines(text), 1);
  assert_non_null(strstr(text, "after rotation"));

  /* A reopen that fails keeps the old file and says why in it. */
  snprintf(sub, sizeof sub, "%s/logdir", tmpdir);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(inner, sizeof inner, "%s/x.log", sub);
  assert_int_equal(rd_log_open(inner, RD_LOG_INFO, NULL), RD_OK);
  char moved[140];
  snprintf(moved, sizeof moved, "%s/moved.log", tmpdir);
  assert_int_equal(rename(inner, moved), 0);
  assert_int_equal(rmdir(sub), 0);
  assert_int_equal(rd_log_reopen(), RD_EINVAL);
  rd_log_info("test", "kept going");
  rd_log_close();
  text = slurp(moved);
  assert_non_null(strstr(text, "ERROR log: cannot reopen"));
  assert_non_null(strstr(text, "kept going"));

  /* stderr has nothing to reopen. */
  assert_int_equal(rd_log_open(NULL, RD_LOG_INFO, NULL), RD_OK);
  assert_int_equal(rd_log_reopen(), RD_OK);
  assert_int_equal(rd_log_open("", RD_LOG_INFO, NULL), RD_OK);
}

static void test_log_open_errors(void **state) {
  (void)state;
  char path[128], bad[160];
  snprintf(path, sizeof path, "%s/keep.log", tmpdir);
  snprintf(bad, sizeof bad, "%s/no/such/dir.log", tmpdir);
  assert_int_equal(rd_log_open(path, RD_LOG_INFO, NULL), RD_OK);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_log_open(bad, RD_LOG_DEBUG, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, bad));
  assert_non_null(strstr(err.msg, "No such file"));
  assert_int_equal(rd_log_open(path, (rd_log_level_t)7, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "log level 7"));
  /* Both failures left the old file and level in place. */
  rd_log_debug("test", "filtered");
  rd_log_info("test", "still here");
  rd_log_close();
  const char *text = slurp(path);
  assert_null(strstr(text, "filtered"));
  assert_non_null(strstr(text, "still here"));
}

static void *log_lines(void *p) {
  long id = (long)(intptr_t)p;
  char pad[300];
  memset(pad, 'a' + (int)id, sizeof pad - 1);
  pad[sizeof pad - 1] = '\0';
  for (int i = 0; i < 500; i++) rd_log_info("thread", "%ld %d %s", id, i, pad);
  return NULL;
}

static void test_log_threads_do_not_interleave(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/threads.log", tmpdir);
  assert_int_equal(rd_log_open(path, RD_LOG_INFO, NULL), RD_OK);
  pthread_t th[4];
  for (long i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&th[i], NULL, log_lines, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  rd_log_close();
  const char *text = slurp(path);
  assert_int_equal(count_lines(text), 2000);
  check_format(text);
  /* Each line carries exactly its own thread's padding. */
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    const char *msg = strstr(p, "thread: ");
    assert_true(msg != NULL && msg < nl);
    char c = (char)('a' + (msg[8] - '0'));
    const char *pad = nl - 299;
    for (int i = 0; i < 299; i++) assert_int_equal(pad[i], c);
    p = nl + 1;
  }
}

RDT_MAIN(setup_dir, teardown_dir,
         cmocka_unit_test(test_defaults),
         cmocka_unit_test(test_defaults_state_dir_env),
         cmocka_unit_test(test_file_all_keys),
         cmocka_unit_test(test_file_errors),
         cmocka_unit_test(test_file_missing),
         cmocka_unit_test(test_flags_both_forms),
         cmocka_unit_test(test_fpga_xclbin_keys),
         cmocka_unit_test(test_precedence),
         cmocka_unit_test(test_flag_errors),
         cmocka_unit_test(test_byte_suffixes),
         cmocka_unit_test(test_number_strictness),
         cmocka_unit_test(test_help_version),
         cmocka_unit_test(test_usage),
         cmocka_unit_test(test_log_format_and_levels),
         cmocka_unit_test(test_log_one_line_per_call),
         cmocka_unit_test(test_log_reopen),
         cmocka_unit_test(test_log_open_errors),
         cmocka_unit_test(test_log_threads_do_not_interleave))
