/* config.c - the daemon's configuration: defaults, config file, flags.
 *
 * One table (`keys`) describes every setting: its name, what it accepts and
 * where it lives in rd_config_t. The file parser and the flag parser both
 * go through set_key(), so a key means the same in both places and has one
 * error message. Every entry point works on a copy and writes the result
 * back only when everything parsed, so an error changes nothing.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB UINT64_C(1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

/* A config file line longer than this is a mistake, not a setting. */
#define LINE_MAX_BYTES 4096

typedef enum {
  K_STRING, /* copied into a char array */
  K_LEVEL,  /* debug|info|warn|error */
  K_COUNT,  /* plain integer in [min, max] */
  K_BYTES,  /* integer with an optional K/M/G/T suffix (powers of 1024) */
  K_SHAPE,  /* K,N,BATCH[,MIN_TABLE]: a replay kernel build (rd_fpga_xclbin_shape_t) */
} kind_t;

typedef struct {
  const char *name; /* flag without "--", and file key */
  kind_t kind;
  size_t offset;    /* into rd_config_t */
  size_t size;      /* field size: array length for strings, 4 or 8 for numbers */
  uint64_t min, max;
  bool allow_empty; /* strings only */
  const char *help;
} cfg_key_t;

#define FIELD(f) offsetof(rd_config_t, f), sizeof(((rd_config_t *)0)->f)

/* Each help text is one string on one line, however long: the --help
 * printer wraps it, and a grep for what a user read in --help finds it. */
static const cfg_key_t keys[] = {
    {"listen", K_STRING, FIELD(listen), 0, 0, false, "address to serve on, host:port"},
    {"state-dir", K_STRING, FIELD(state_dir), 0, 0, false,
     "directory of the state database and admin token; defaults to $STATE_DIRECTORY, $XDG_STATE_HOME/replayd or $HOME/.local/state/replayd"},
    {"log-file", K_STRING, FIELD(log_file), 0, 0, true,
     "log to this file (reopened on SIGHUP); empty = stderr"},
    {"log-level", K_LEVEL, FIELD(log_level), 0, 0, false, "debug, info, warn or error"},
    {"threads", K_COUNT, FIELD(threads), 1, 64, false, "completion-queue threads"},
    {"ingest-threads", K_COUNT, FIELD(ingest_threads), 0, 64, false,
     "threads that apply inserts, at a lower priority than every other call; 0 = the completion-queue threads do"},
    {"shutdown-grace-ms", K_COUNT, FIELD(shutdown_grace_ms), 0, 600000, false,
     "on SIGTERM, how long calls in flight may finish before the rest are cancelled (milliseconds)"},
    {"max-message-bytes", K_BYTES, FIELD(max_message_bytes), 4 * KIB, GIB, false,
     "largest gRPC message, either way"},
    {"max-batch", K_COUNT, FIELD(max_batch), 1, UINT64_C(1) << 24, false,
     "rows per insert/sample/update call"},
    {"max-capacity", K_COUNT, FIELD(max_capacity), 1, UINT64_C(1) << 28, false,
     "items per workload"},
    {"max-memory", K_BYTES, FIELD(max_memory_bytes), MIB, UINT64_C(1) << 60, false,
     "rows + trees of all workloads together"},
    {"max-workloads", K_COUNT, FIELD(max_workloads), 1, 4096, false, "workloads held at once"},
    {"learner-threads", K_COUNT, FIELD(learner_threads), 1, 256, false,
     "threads of each hosted learner's train-step"},
    {"max-waiting-calls", K_COUNT, FIELD(max_waiting_calls), 0, 1u << 20, false,
     "calls waiting for a rate limiter (and sample streams), all workloads together; past it RESOURCE_EXHAUSTED"},
    {"max-waiting-per-workload", K_COUNT, FIELD(max_waiting_per_workload), 0, 1u << 20, false,
     "calls waiting for one workload's rate limiter (and its sample streams)"},
    {"learner-shares", K_COUNT, FIELD(learner_shares), 0, 2, false,
     "1: hosted learners sharing a device take turns by their tenants' weights (share.h); 2: the same, work-conserving (time a learner cannot use goes to the others); 0: as the OS schedules them"},
    {"remap", K_COUNT, FIELD(remap), 0, 1, false,
     "1: every registration and deletion re-maps the hosted learners together (Algorithm 3 over the live set) and moves them live when it pays; 0: never"},
    {"remap-threshold-pct", K_COUNT, FIELD(remap_threshold_pct), 0, 100000, false,
     "hysteresis of the re-mapping: placed workloads move only if the set's predicted GPS gains more than this percent"},
    {"fpga-parts-dir", K_STRING, FIELD(fpga_parts_dir), 0, 0, true,
     "FPGA part files (*.part) for the mapper's FPGA model; empty = the installed ones (run from the build tree: then the source tree's)"},
    {"fpga-csim", K_STRING, FIELD(fpga_csim), 0, 0, true,
     "list one FPGA run as C-simulation (no board: the kernels' C code in this process), modelled as this part of --fpga-parts-dir (e.g. u250); empty = none"},
    {"fpga-xclbin", K_STRING, FIELD(fpga_xclbin), 0, 0, true,
     "an xclbin (rmm_kernel, lrn_train_step) for XRT FPGA boards: the replay module and learner mapped to a board run its kernels (never run on a board yet); needs an XRT build; empty = none"},
    {"fpga-xclbin-shape", K_SHAPE, FIELD(fpga_xclbin_shape), 0, 0, false,
     "the xclbin's replay kernel build, K,N,BATCH[,MIN]: RMM_K, RMM_CAPACITY, RMM_MAX_BATCH and the smallest table it serves (RMM_MAX_LEAF = (2^63-1)/MIN; MIN defaults to N, as build_xclbin.sh builds it: then only tables of exactly N items fit)"},
    {"durability", K_STRING, FIELD(durability), 0, 0, false,
     "a workload's durability when its spec does not say: none, checkpoint or journal (every insert and update on disk before it is acknowledged)"},
    {"checkpoint-dir", K_STRING, FIELD(checkpoint_dir), 0, 0, true,
     "where checkpoints and journals go; empty = <state-dir>/checkpoints"},
    {"checkpoint-interval-s", K_COUNT, FIELD(checkpoint_interval_s), 0, 100000000, false,
     "a workload's checkpoint period when its spec does not say (seconds; 0 = only on request and at shutdown)"},
    {"checkpoint-keep", K_COUNT, FIELD(checkpoint_keep), 1, 1000, false,
     "checkpoints kept per workload (a restore falls back to older ones)"},
    {"checkpoint-zstd", K_COUNT, FIELD(checkpoint_zstd), 0, 19, false,
     "zstd level of checkpoints and exports; 0 = uncompressed"},
    {"import-max-bytes", K_BYTES, FIELD(import_max_bytes), 4 * KIB, UINT64_C(1) << 40, false,
     "largest file an ImportStream may send (held in a temporary file of the checkpoint directory until it is checked)"},
    {"journal-commit-us", K_COUNT, FIELD(journal_commit_us), 0, 1000000, false,
     "group-commit window of the write-ahead journal: one fdatasync covers the records of this many microseconds"},
    {"journal-direct", K_COUNT, FIELD(journal_direct), 0, 1, false,
     "1: write the journal with O_DIRECT where the file system states its alignment (less CPU per byte); 0: through the page cache"},
    {"journal-max-pending", K_BYTES, FIELD(journal_max_pending), MIB, UINT64_C(1) << 40, false,
     "journal bytes waiting for the disk, every workload's together, before inserts are refused"},
    {"metrics-listen", K_STRING, FIELD(metrics_listen), 0, 0, true,
     "serve Prometheus metrics over HTTP at /metrics: PORT or :PORT (loopback: 127.0.0.1:PORT) or HOST:PORT; empty = no metrics endpoint"},
    {"tls-cert", K_STRING, FIELD(tls_cert), 0, 0, true,
     "PEM certificate (chain): serve gRPC over TLS (needs --tls-key); empty = plaintext"},
    {"tls-key", K_STRING, FIELD(tls_key), 0, 0, true, "PEM private key of --tls-cert"},
    {"tls-client-ca", K_STRING, FIELD(tls_client_ca), 0, 0, true,
     "PEM CA certificates: every client must present a certificate one of them signed (needs --tls-cert); empty = clients need none"},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* rmm.h's default build, which kernels/build_xclbin.sh makes by default. */
#define XCLBIN_DEFAULT_K 16
#define XCLBIN_DEFAULT_N 65536
#define XCLBIN_DEFAULT_BATCH 1024
/* rmm.h: N in [2, 2^30]; rmm_xrt.h: at most 2^24 items per request. */
#define XCLBIN_MAX_N (UINT32_C(1) << 30)
#define XCLBIN_MAX_BATCH (UINT32_C(1) << 24)

uint64_t rd_fpga_xclbin_max_leaf(const rd_fpga_xclbin_shape_t *s) {
  return s->min_table ? UINT64_C(0x7fffffffffffffff) / s->min_table : 0;
}

/* ------------------------------------------------------------------ */
/* Defaults                                                            */
/* ------------------------------------------------------------------ */

/* Copy s into dst only if it fits whole: a truncated path would silently
 * name some other directory. */
static bool set_path(char *dst, size_t cap, const char *fmt, const char *a, const char *b) {
  int n = snprintf(dst, cap, fmt, a, b);
  return n > 0 && (size_t)n < cap;
}

static const char *env_nonempty(const char *name) {
  const char *v = getenv(name);
  return (v != NULL && v[0] != '\0') ? v : NULL;
}

void rd_config_defaults(rd_config_t *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->listen, sizeof c->listen, "%s", "127.0.0.1:50051");
  c->log_level = RD_LOG_INFO;
  c->threads = 2;
  c->ingest_threads = 2;
  c->learner_shares = 1;
  c->remap = 1;
  c->remap_threshold_pct = 10;
  c->shutdown_grace_ms = 10000;
  c->max_message_bytes = 64u << 20;
  c->max_batch = 65536;
  c->max_capacity = 1u << 24;
  c->max_memory_bytes = 8 * GIB;
  c->max_workloads = 64;
  c->learner_threads = 1;
  snprintf(c->durability, sizeof c->durability, "%s", "checkpoint");
  c->checkpoint_interval_s = 600;
  c->checkpoint_keep = 2;
  c->journal_commit_us = 200;
  c->journal_direct = 1;
  c->journal_max_pending = 256 * MIB;
  c->import_max_bytes = 16 * GIB;
  c->max_waiting_calls = 4096;
  c->max_waiting_per_workload = 1024;
  c->fpga_xclbin_shape.k = XCLBIN_DEFAULT_K;
  c->fpga_xclbin_shape.n = XCLBIN_DEFAULT_N;
  c->fpga_xclbin_shape.batch = XCLBIN_DEFAULT_BATCH;
  c->fpga_xclbin_shape.min_table = XCLBIN_DEFAULT_N;

  /* systemd's StateDirectory= sets $STATE_DIRECTORY; with several
   * directories it is a ':'-separated list and the first one is ours. */
  const char *v;
  if ((v = env_nonempty("STATE_DIRECTORY")) != NULL) {
    size_t len = strcspn(v, ":");
    if (len > 0 && len < sizeof c->state_dir) {
      memcpy(c->state_dir, v, len);
      c->state_dir[len] = '\0';
      return;
    }
  }
  /* The XDG base-directory spec says a relative $XDG_STATE_HOME is invalid
   * and must be ignored. */
  if ((v = env_nonempty("XDG_STATE_HOME")) != NULL && v[0] == '/' &&
      set_path(c->state_dir, sizeof c->state_dir, "%s/%s", v, "replayd"))
    return;
  if ((v = env_nonempty("HOME")) != NULL &&
      set_path(c->state_dir, sizeof c->state_dir, "%s/%s", v, ".local/state/replayd"))
    return;
  snprintf(c->state_dir, sizeof c->state_dir, "%s", "./replayd-state");
}

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/* Look a key up; '_' and '-' are the same so "max_batch" works in a file. */
static const cfg_key_t *find_key(const char *name, size_t len) {
  for (size_t k = 0; k < N_KEYS; k++) {
    const char *kn = keys[k].name;
    if (strlen(kn) != len) continue;
    size_t i = 0;
    for (; i < len; i++) {
      char a = name[i] == '_' ? '-' : name[i];
      if (a != kn[i]) break;
    }
    if (i == len) return &keys[k];
  }
  return NULL;
}

/* Strict unsigned decimal: digits only, no sign, no spaces, no overflow. */
static bool parse_u64(const char *s, size_t len, uint64_t *out) {
  if (len == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool parse_bytes(const char *s, uint64_t *out) {
  size_t len = strlen(s);
  uint64_t mult = 1;
  if (len > 0) {
    switch (s[len - 1]) {
    case 'K': case 'k': mult = KIB; break;
    case 'M': case 'm': mult = MIB; break;
    case 'G': case 'g': mult = GIB; break;
    case 'T': case 't': mult = TIB; break;
    default: break;
    }
    if (mult != 1) len--;
  }
  uint64_t v;
  if (!parse_u64(s, len, &v)) return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

/* "67108864 (64M)" style rendering of a byte bound for messages and help. */
static void fmt_bytes(char *buf, size_t cap, uint64_t v) {
  static const struct { uint64_t m; char s; } units[] = {{TIB, 'T'}, {GIB, 'G'}, {MIB, 'M'}, {KIB, 'K'}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (v >= units[i].m && v % units[i].m == 0) {
      snprintf(buf, cap, "%llu%c", (unsigned long long)(v / units[i].m), units[i].s);
      return;
    }
  snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* What a key accepts, for error messages and --help. */
static void describe_range(const cfg_key_t *k, char *buf, size_t cap) {
  char lo[24], hi[24];
  switch (k->kind) {
  case K_STRING:
    snprintf(buf, cap, "%s of at most %zu bytes", k->allow_empty ? "a string" : "a non-empty string",
             k->size - 1);
    break;
  case K_LEVEL: snprintf(buf, cap, "one of debug, info, warn, error"); break;
  case K_COUNT:
    snprintf(buf, cap, "an integer in [%llu, %llu]", (unsigned long long)k->min,
             (unsigned long long)k->max);
    break;
  case K_BYTES:
    fmt_bytes(lo, sizeof lo, k->min);
    fmt_bytes(hi, sizeof hi, k->max);
    snprintf(buf, cap, "bytes in [%s, %s], suffix K/M/G/T allowed", lo, hi);
    break;
  case K_SHAPE: snprintf(buf, cap, "K,N,BATCH[,MIN_TABLE]"); break;
  }
}

/* "K,N,BATCH[,MIN_TABLE]" -> *out (MIN_TABLE defaults to N). On error
 * writes what is wrong to why and leaves *out alone. The bounds are the
 * kernel's (rmm.h) and the XRT module's (rmm_xrt.h), so a shape accepted
 * here is one rd_fpga_xrt_rmm_configure accepts. */
static bool parse_shape(const char *s, rd_fpga_xclbin_shape_t *out, char *why, size_t cap) {
  uint64_t v[4];
  size_t n = 0;
  const char *p = s;
  for (;;) {
    size_t len = strcspn(p, ",");
    if (n == 4 || !parse_u64(p, len, &v[n])) {
      snprintf(why, cap, "expected 3 or 4 comma-separated integers");
      return false;
    }
    n++;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  if (n < 3) {
    snprintf(why, cap, "expected 3 or 4 comma-separated integers");
    return false;
  }
  if (n == 3) v[3] = v[1];
  if (v[0] < 2 || v[0] > 64 || (v[0] & (v[0] - 1)) != 0)
    snprintf(why, cap, "K %llu is not a power of two in [2, 64]", (unsigned long long)v[0]);
  else if (v[1] < 2 || v[1] > XCLBIN_MAX_N)
    snprintf(why, cap, "N %llu is outside [2, %u]", (unsigned long long)v[1], XCLBIN_MAX_N);
  else if (v[2] < 1 || v[2] > XCLBIN_MAX_BATCH)
    snprintf(why, cap, "BATCH %llu is outside [1, %u]", (unsigned long long)v[2],
             XCLBIN_MAX_BATCH);
  else if (v[3] < 1 || v[3] > v[1])
    snprintf(why, cap, "MIN_TABLE %llu is outside [1, N = %llu]", (unsigned long long)v[3],
             (unsigned long long)v[1]);
  else {
    out->k = (uint32_t)v[0];
    out->n = (uint32_t)v[1];
    out->batch = (uint32_t)v[2];
    out->min_table = (uint32_t)v[3];
    return true;
  }
  return false;
}

/* Set one key from its text. On error writes a message (without the
 * "where" prefix) to msg and changes nothing. */
static int set_key(rd_config_t *c, const cfg_key_t *k, const char *value, char *msg, size_t cap) {
  char *field = (char *)c + k->offset;
  char range[128];
  describe_range(k, range, sizeof range);
  /* Client-visible text is bounded: show at most 40 bytes of a bad value. */
  switch (k->kind) {
  case K_STRING: {
    size_t len = strlen(value);
    bool bad = (len == 0 && !k->allow_empty) || len >= k->size;
    for (size_t i = 0; !bad && i < len; i++)
      if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f) bad = true;
    if (!bad && strcmp(k->name, "listen") == 0 && strchr(value, ':') == NULL) {
      snprintf(msg, cap, "bad value '%.40s' for %s: expected host:port (or unix:PATH)", value,
               k->name);
      return RD_EINVAL;
    }
    if (bad) {
      snprintf(msg, cap, "bad value '%.40s%s' for %s: expected %s without control characters",
               value, len > 40 ? "..." : "", k->name, range);
      return RD_EINVAL;
    }
    memcpy(field, value, len + 1);
    return RD_OK;
  }
  case K_LEVEL:
    for (int l = RD_LOG_DEBUG; l <= RD_LOG_ERROR; l++)
      if (strcmp(value, level_names[l]) == 0) {
        *(rd_log_level_t *)(void *)field = (rd_log_level_t)l;
        return RD_OK;
      }
    snprintf(msg, cap, "bad value '%.40s' for %s: expected %s", value, k->name, range);
    return RD_EINVAL;
  case K_COUNT:
  case K_BYTES: {
    uint64_t v;
    bool ok = k->kind == K_COUNT ? parse_u64(value, strlen(value), &v) : parse_bytes(value, &v);
    if (!ok || v < k->min || v > k->max) {
      snprintf(msg, cap, "bad value '%.40s' for %s: expected %s", value, k->name, range);
      return RD_EINVAL;
    }
    if (k->size == sizeof(uint32_t))
      *(uint32_t *)(void *)field = (uint32_t)v; /* max <= 2^30 for every 32-bit key */
    else
      *(uint64_t *)(void *)field = v;
    return RD_OK;
  }
  case K_SHAPE: {
    char why[64];
    if (!parse_shape(value, (rd_fpga_xclbin_shape_t *)(void *)field, why, sizeof why)) {
      snprintf(msg, cap, "bad value '%.40s' for %s: expected K,N,BATCH[,MIN_TABLE] (the "
               "replay kernel's build): %s", value, k->name, why);
      return RD_EINVAL;
    }
    return RD_OK;
  }
  }
  snprintf(msg, cap, "internal: key %s has no kind", k->name);
  return RD_EINVAL;
}

/* ------------------------------------------------------------------ */
/* Config file                                                         */
/* ------------------------------------------------------------------ */

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; }

/* Parse one line in place. Returns RD_OK (also for blank/comment lines). */
static int apply_line(rd_config_t *c, char *line, char *msg, size_t cap) {
  /* A '#' at the start or after whitespace begins a comment, so
   * "threads = 4  # more" works while "a#b" stays a value. */
  for (char *p = line; *p; p++)
    if (*p == '#' && (p == line || is_space(p[-1]))) {
      *p = '\0';
      break;
    }
  char *s = line;
  while (is_space(*s)) s++;
  char *end = s + strlen(s);
  while (end > s && is_space(end[-1])) *--end = '\0';
  if (*s == '\0') return RD_OK;

  char *eq = strchr(s, '=');
  if (eq == NULL) {
    snprintf(msg, cap, "expected 'key = value', got '%.40s'", s);
    return RD_EINVAL;
  }
  char *kend = eq;
  while (kend > s && is_space(kend[-1])) kend--;
  char *value = eq + 1;
  while (is_space(*value)) value++;
  size_t klen = (size_t)(kend - s);
  if (klen == 0) {
    snprintf(msg, cap, "missing key before '='");
    return RD_EINVAL;
  }
  if (klen == 6 && strncmp(s, "config", 6) == 0) {
    snprintf(msg, cap, "'config' cannot be set inside a config file");
    return RD_EINVAL;
  }
  const cfg_key_t *k = find_key(s, klen);
  if (k == NULL) {
    snprintf(msg, cap, "unknown key '%.*s'", (int)(klen > 40 ? 40 : klen), s);
    return RD_EINVAL;
  }
  return set_key(c, k, value, msg, cap);
}

/* The next line of f into buf (cap >= LINE_MAX_BYTES + 2 bytes), its
 * newline included, NUL-terminated; returns its length, 0 at the end of
 * the file, -1 for a line longer than LINE_MAX_BYTES (nothing more is
 * read: a file with no newline, /dev/zero, costs no more than this). */
static long read_line(FILE *f, char *buf, size_t cap) {
  size_t n = 0;
  int ch;
  while ((ch = getc(f)) != EOF) {
    if (n == LINE_MAX_BYTES || n + 2 > cap) return -1;
    buf[n++] = (char)ch;
    if (ch == '\n') break;
  }
  buf[n] = '\0';
  return (long)n;
}

int rd_config_load_file(rd_config_t *c, const char *path, rd_error_t *err) {
  if (path == NULL || path[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "config file path is empty");
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return rd_error_set(err, RD_EINVAL, "%s: cannot open config file: %s", path, strerror(errno));

  rd_config_t tmp = *c;
  char *line = malloc(LINE_MAX_BYTES + 2);
  char msg[RD_ERROR_MSG_MAX];
  unsigned lineno = 0;
  int rc = RD_OK;
  long len;
  if (line == NULL) {
    fclose(f);
    return rd_error_set(err, RD_ENOMEM, "%s: out of memory reading it", path);
  }
  errno = 0;
  while ((len = read_line(f, line, LINE_MAX_BYTES + 2)) != 0) {
    lineno++;
    if (len < 0) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: line longer than %d bytes", path, lineno,
                        LINE_MAX_BYTES);
      goto out;
    }
    if (memchr(line, '\0', (size_t)len) != NULL) {
      rc = rd_error_set(err, RD_EINVAL, "%s:%u: line contains a NUL byte", path, lineno);
      goto out;
    }
    if ((rc = apply_line(&tmp, line, msg, sizeof msg)) != RD_OK) {
      rd_error_set(err, rc, "%s:%u: %s", path, lineno, msg);
      goto out;
    }
  }
  if (ferror(f)) {
    rc = rd_error_set(err, RD_EINVAL, "%s: read error after line %u: %s", path, lineno,
                      strerror(errno));
    goto out;
  }
  *c = tmp;
out:
  free(line);
  fclose(f);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Flags                                                               */
/* ------------------------------------------------------------------ */

typedef struct {
  const cfg_key_t *key; /* NULL for --config */
  const char *value;
} flag_t;

/* Read the flag at argv[*i] (and its value, advancing *i past it). Both
 * passes of rd_config_parse_args tokenize with this, so they agree. */
static int next_flag(int argc, char **argv, int *i, flag_t *out, rd_error_t *err) {
  const char *a = argv[*i];
  if (strncmp(a, "--", 2) != 0 || a[2] == '\0')
    return rd_error_set(err, RD_EINVAL, "unexpected argument '%.60s' (see --help)", a);
  const char *name = a + 2;
  const char *eq = strchr(name, '=');
  size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
  out->key = NULL;
  /* Flags have one spelling, with '-'; the '_' leniency is for files. */
  if (!(nlen == 6 && strncmp(name, "config", 6) == 0)) {
    out->key = memchr(name, '_', nlen) ? NULL : find_key(name, nlen);
    if (out->key == NULL)
      return rd_error_set(err, RD_EINVAL, "unknown flag '--%.*s' (see --help)",
                          (int)(nlen > 40 ? 40 : nlen), name);
  }
  if (eq != NULL) {
    out->value = eq + 1;
    return RD_OK;
  }
  if (*i + 1 >= argc)
    return rd_error_set(err, RD_EINVAL, "--%.*s needs a value", (int)nlen, name);
  const char *next = argv[*i + 1];
  /* "--log-file --threads 4" is far more likely a forgotten value than a
   * file named "--threads"; "--log-file=--threads" still says the latter. */
  if (strncmp(next, "--", 2) == 0)
    return rd_error_set(err, RD_EINVAL,
                        "--%.*s needs a value, not the flag '%.40s' (write --%.*s=VALUE to "
                        "pass a value that starts with --)",
                        (int)nlen, name, next, (int)nlen, name);
  out->value = next;
  ++*i;
  return RD_OK;
}

int rd_config_parse_args(rd_config_t *c, int argc, char **argv, int *show_help,
                         int *show_version, rd_error_t *err) {
  if (show_help) *show_help = 0;
  if (show_version) *show_version = 0;

  /* --help and --version win over everything, even a broken config file. */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      if (show_help) *show_help = 1;
      return RD_OK;
    }
    if (strcmp(argv[i], "--version") == 0) {
      if (show_version) *show_version = 1;
      return RD_OK;
    }
  }

  rd_config_t tmp = *c;
  flag_t fl;
  /* Pass 1: check every flag's syntax, and apply the --config files in
   * order, so a file never overrides a flag wherever the two appear. */
  for (int i = 1; i < argc; i++) {
    int rc = next_flag(argc, argv, &i, &fl, err);
    if (rc) return rc;
    if (fl.key != NULL) continue;
    if (fl.value[0] == '\0') return rd_error_set(err, RD_EINVAL, "--config needs a file path");
    if ((rc = rd_config_load_file(&tmp, fl.value, err)) != RD_OK) return rc;
  }
  /* Pass 2: every other flag, left to right; a later one wins. */
  char msg[RD_ERROR_MSG_MAX];
  for (int i = 1; i < argc; i++) {
    int rc = next_flag(argc, argv, &i, &fl, err);
    if (rc) return rc; /* unreachable: pass 1 accepted the same argv */
    if (fl.key == NULL) continue;
    if ((rc = set_key(&tmp, fl.key, fl.value, msg, sizeof msg)) != RD_OK)
      return rd_error_set(err, rc, "--%s: %s", fl.key->name, msg);
  }
  *c = tmp;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Usage                                                               */
/* ------------------------------------------------------------------ */

static char usage_buf[16384]; /* PATH_MAX-long defaults fit */
static pthread_once_t usage_once = PTHREAD_ONCE_INIT;

/* The help texts hold only words: the printer lays them out, a flag in the
 * first column and its text wrapped in the second, so that every line fits
 * an 80-column terminal. */
#define USAGE_FLAG_WIDTH 26 /* a longer flag puts its text on the next line */
#define USAGE_TEXT_COL (2 + USAGE_FLAG_WIDTH + 1)
#define USAGE_LINE_MAX 79

typedef struct {
  char *buf;
  size_t cap, n; /* n may pass cap once the text no longer fits: nothing more is written */
} usage_out_t;

static void usage_put(usage_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void usage_put(usage_out_t *o, const char *fmt, ...) {
  if (o->n >= o->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(o->buf + o->n, o->cap - o->n, fmt, ap);
  va_end(ap);
  if (w > 0) o->n += (size_t)w;
}

/* Whether text may break at the space p[i]: not beside a lone "=", so that
 * "empty = none" or "MAX = (2^63-1)/MIN" read as one piece. */
static bool usage_can_break(const char *p, size_t i) {
  if (p[i] != ' ') return false;
  bool eq_before = i >= 1 && p[i - 1] == '=' && (i == 1 || p[i - 2] == ' ');
  bool eq_after = p[i + 1] == '=' && (p[i + 2] == ' ' || p[i + 2] == '\0');
  return !eq_before && !eq_after;
}

/* Text from the current column (USAGE_TEXT_COL) on, broken at spaces into
 * lines of at most USAGE_LINE_MAX; a word longer than a whole line (a long
 * default path) stands alone on its line rather than being cut. */
static void usage_put_text(usage_out_t *o, const char *text) {
  const size_t width = USAGE_LINE_MAX - USAGE_TEXT_COL;
  bool first = true;
  for (const char *p = text + strspn(text, " "); *p != '\0'; first = false) {
    size_t len = strlen(p), take = len;
    if (len > width) {
      for (take = width; take > 0 && !usage_can_break(p, take); take--) {}
      if (take == 0) take = strcspn(p, " ");
    }
    usage_put(o, "%*s%.*s\n", first ? 0 : USAGE_TEXT_COL, "", (int)take, p);
    p += take;
    p += strspn(p, " ");
  }
}

/* One option: flag, what it does, and (when there is one) what it accepts
 * and its default on a line of their own. */
static void usage_put_option(usage_out_t *o, const char *flag, const char *help,
                             const char *accepts) {
  if (strlen(flag) <= USAGE_FLAG_WIDTH)
    usage_put(o, "  %-*s ", USAGE_FLAG_WIDTH, flag);
  else
    usage_put(o, "  %s\n%*s", flag, USAGE_TEXT_COL, "");
  usage_put_text(o, help);
  if (accepts != NULL) {
    usage_put(o, "%*s", USAGE_TEXT_COL, "");
    usage_put_text(o, accepts);
  }
}

static void build_usage(void) {
  rd_config_t d;
  rd_config_defaults(&d);
  usage_out_t o = {usage_buf, sizeof usage_buf, 0};
  usage_put(&o, "Usage: replayd [--config PATH] [--KEY VALUE | --KEY=VALUE]...\n"
                "Serve prioritized experience replay over gRPC.\n\n");
  usage_put_option(&o, "--config PATH",
                   "read \"key = value\" lines first (flags override them)", NULL);
  for (size_t k = 0; k < N_KEYS; k++) {
    const cfg_key_t *key = &keys[k];
    const char *field = (const char *)&d + key->offset;
    char def[PATH_MAX + 8], range[128], flag[40], accepts[sizeof def + sizeof range + 16];
    switch (key->kind) {
    case K_STRING: snprintf(def, sizeof def, "\"%s\"", field); break;
    case K_LEVEL:
      snprintf(def, sizeof def, "%s", level_names[*(const rd_log_level_t *)(const void *)field]);
      break;
    case K_COUNT:
      snprintf(def, sizeof def, "%u", *(const uint32_t *)(const void *)field);
      break;
    case K_BYTES:
      fmt_bytes(def, sizeof def,
                key->size == 4 ? *(const uint32_t *)(const void *)field
                               : *(const uint64_t *)(const void *)field);
      break;
    case K_SHAPE: {
      const rd_fpga_xclbin_shape_t *sh = (const void *)field;
      int w = snprintf(def, sizeof def, "%u,%u,%u", sh->k, sh->n, sh->batch);
      if (sh->min_table != sh->n && w > 0 && (size_t)w < sizeof def)
        snprintf(def + w, sizeof def - (size_t)w, ",%u", sh->min_table);
      break;
    }
    }
    if (key->kind == K_COUNT || key->kind == K_BYTES)
      describe_range(key, range, sizeof range);
    else
      range[0] = '\0'; /* the help text says what they accept */
    snprintf(flag, sizeof flag, "--%s %s", key->name,
             key->kind == K_STRING ? (strcmp(key->name, "listen") == 0           ? "ADDR"
                                      : strcmp(key->name, "metrics-listen") == 0 ? "ADDR"
                                      : strcmp(key->name, "fpga-csim") == 0      ? "PART"
                                                                                 : "PATH")
             : key->kind == K_LEVEL ? "LEVEL" : key->kind == K_BYTES ? "BYTES"
             : key->kind == K_SHAPE ? "K,N,B" : "N");
    snprintf(accepts, sizeof accepts, "(%s%sdefault %s)", range, range[0] ? "; " : "", def);
    usage_put_option(&o, flag, key->help, accepts);
  }
  usage_put_option(&o, "--help", "show this text", NULL);
  usage_put_option(&o, "--version", "show the version", NULL);
  usage_put(&o,
            "\nThe config file takes the same keys without \"--\" (\"threads = 4\"; '_' may\n"
            "replace '-'); '#' starts a comment. Precedence: defaults < config file < flags.\n");
}

const char *rd_config_usage(void) {
  pthread_once(&usage_once, build_usage);
  return usage_buf;
}
