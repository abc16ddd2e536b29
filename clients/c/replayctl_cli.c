/* replayctl_cli.c - see replayctl_cli.h. */
#include "replayctl_cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replayd_client.h"

static const char usage_text[] =
    "usage: replayctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Inspect and operate a replayd server.\n"
    "\n"
    "Commands:\n"
    "  status        version, uptime, workload count, devices\n"
    "  ls            workloads: id, name, size/capacity, counters\n"
    "  describe ID   one workload: its spec, schema and counters\n"
    "                with a learner, also its placement: the primitive-platform\n"
    "                table, the mapping, predicted and measured gradient steps/s\n"
    "  devices       the devices the server found and what each backend runs there\n"
    "  rm ID         delete a workload (needs its token or the admin token)\n"
    "  profiles      stored profiles (admin token); --clear forgets them all;\n"
    "  profiles import FILE | export\n"
    "                move profiles between servers as JSON lines (export: stdout)\n"
    "  plan SPEC     what the server would map a workload to, registering nothing\n"
    "                (admin token: it measures and stores profiles);\n"
    "                SPEC: cartpole_dqn | cartpole_ddpg | hopper_ddpg | dqn:4-64-64-2 |\n"
    "                ddpg:11-256-256-3, then ,batch=N ,capacity=N ,fanout=K ,depth=D\n"
    "                ,spi=R ,critic=H-H (e.g. hopper_ddpg,batch=256)\n"
    "  top           a live view, refreshed every second: workloads' rows, fill,\n"
    "                insert and sample rates, learner steps/s and loss, where each\n"
    "                runs, device states; q or Ctrl-C quits. --once: one frame after\n"
    "                one interval, for scripts (with --json: one JSON document)\n"
    "  checkpoint ID | --all\n"
    "                take a checkpoint now (the workload's token or the admin\n"
    "                token; --all: every workload, admin token)\n"
    "  export ID FILE\n"
    "                write the workload as a checkpoint file (token as checkpoint;\n"
    "                streamed: any size)\n"
    "  import FILE   register a new workload from an exported file (--name NAME;\n"
    "                streamed)\n"
    "  tenant ls | add NAME [QUOTA...] | set NAME QUOTA... | rm NAME\n"
    "                tenants and their quotas (admin token); add prints the tenant's\n"
    "                token once. QUOTA: max-memory=BYTES[K|M|G|T] max-workloads=N\n"
    "                weight=W insert-rate=ROWS/S sample-rate=ROWS/S\n"
    "                max-gpu-memory=BYTES[K|M|G|T] (0: no limit)\n"
    "\n"
    "Options:\n"
    "  --server HOST:PORT       server address (default $REPLAYD_SERVER, else " RCTL_DEFAULT_SERVER ")\n"
    "  --json                   print one JSON document instead of tables\n"
    "  --timeout S              connect timeout and per-call deadline, seconds (default 5)\n"
    "  --token T                rm, checkpoint, export: the workload's token; profiles,\n"
    "                           plan: the admin token; status, ls, describe, top: whose\n"
    "                           view (a tenant's token: its workloads; the admin token,\n"
    "                           the default when its file is readable: all)\n"
    "  --all                    checkpoint: every workload\n"
    "  --name NAME              import: the new workload's name\n"
    "  --clear                  profiles: forget every stored profile\n"
    "  --once                   top: print one frame and exit\n"
    "  --interval S             top: seconds between reads (default 1)\n"
    "  --assume gpu=FILE        plan: a GPU with these profiles (JSON lines, as\n"
    "                           'profiles export' writes them); repeatable with\n"
    "  --assume fpga=PART       plan: an FPGA part (u200, u250, u280) by its model\n"
    "  --tls-ca FILE            connect with TLS; FILE: PEM CA certificates that\n"
    "                           sign the server's certificate\n"
    "  --tls-cert FILE          with --tls-key: this client's PEM certificate and key, for a\n"
    "  --tls-key FILE           server that requires client certificates\n"
    "  --admin-token-file PATH  rm, profiles, plan, checkpoint, export, tenant (and the views\n"
    "                           above): file with the server's\n"
    "                           admin token (default\n"
    "                           admin.token in the daemon's state directory:\n"
    "                           $STATE_DIRECTORY, else $XDG_STATE_HOME/replayd,\n"
    "                           else ~/.local/state/replayd)\n"
    "  -h, --help               this text\n"
    "  --version                replayctl's version\n"
    "\n"
    "Exit status: 0 ok, 1 the server or the call failed, 2 usage error.\n";

const char *rctl_usage(void) { return usage_text; }

__attribute__((format(printf, 3, 4))) static int usage_error(char *msg, size_t cap,
                                                             const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return RCTL_EXIT_USAGE;
}

static const struct {
  const char *name;
  rctl_cmd_t cmd;
  int n_args; /* -1: profiles, checked below */
} commands[] = {
    {"status", RCTL_CMD_STATUS, 0}, {"ls", RCTL_CMD_LS, 0},       {"describe", RCTL_CMD_DESCRIBE, 1},
    {"devices", RCTL_CMD_DEVICES, 0}, {"rm", RCTL_CMD_RM, 1},     {"profiles", RCTL_CMD_PROFILES, -1},
    {"plan", RCTL_CMD_PLAN, 1}, {"top", RCTL_CMD_TOP, 0},
    {"checkpoint", RCTL_CMD_CHECKPOINT, -2}, {"export", RCTL_CMD_EXPORT, 2},
    {"import", RCTL_CMD_IMPORT, 1},
    {"plan", RCTL_CMD_PLAN, 1}, {"tenant", RCTL_CMD_TENANT, -1},
};

/* Options that take a value. */
static const char *const valued[] = {"--server", "--timeout",  "--token",   "--admin-token-file",
                                     "--assume", "--tls-ca",   "--tls-cert", "--tls-key",
                                     "--interval", "--name"};

/* Options without a value: each sets one flag of rctl_opts_t. */
static const struct {
  const char *name;
  size_t offset;
} switches[] = {
    {"-h", offsetof(rctl_opts_t, help)},     {"--help", offsetof(rctl_opts_t, help)},
    {"--version", offsetof(rctl_opts_t, version)}, {"--json", offsetof(rctl_opts_t, json)},
    {"--clear", offsetof(rctl_opts_t, clear)}, {"--all", offsetof(rctl_opts_t, all)},
    {"--once", offsetof(rctl_opts_t, once)},
};

/* The flag option a sets, or NULL if a is not one. */
static int *switch_flag(rctl_opts_t *o, const char *a) {
  for (size_t k = 0; k < sizeof switches / sizeof switches[0]; k++)
    if (strcmp(a, switches[k].name) == 0) return (int *)((char *)o + switches[k].offset);
  return NULL;
}

int rctl_parse_args(int argc, char **argv, const char *env_server, rctl_opts_t *o, char *msg,
                    size_t cap) {
  memset(o, 0, sizeof *o);
  o->server = env_server != NULL && env_server[0] != '\0' ? env_server : RCTL_DEFAULT_SERVER;
  o->timeout_s = RCTL_DEFAULT_TIMEOUT_S;
  o->interval_s = 1.0;
  int interval_given = 0;
  if (cap > 0) msg[0] = '\0';
  const char *operands[RCTL_MAX_ARGS + 1];
  int n_operands = 0, options_done = 0, n_total = 0;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (options_done || a[0] != '-' || a[1] == '\0') { /* "-" alone is an operand */
      if (n_operands <= RCTL_MAX_ARGS) operands[n_operands++] = a;
      n_total++;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      options_done = 1;
      continue;
    }
    int *flag = switch_flag(o, a);
    if (flag != NULL) {
      *flag = 1;
      continue;
    }
    /* --name value / --name=value */
    const char *eq = strchr(a, '=');
    size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
    const char *name = NULL;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
      if (strlen(valued[k]) == name_len && strncmp(a, valued[k], name_len) == 0) name = valued[k];
    if (name == NULL) {
      if (eq != NULL && name_len == 6 && strncmp(a, "--json", 6) == 0)
        return usage_error(msg, cap, "--json takes no value");
      return usage_error(msg, cap, "unknown option %.*s", (int)name_len, a);
    }
    const char *val;
    if (eq != NULL) {
      val = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error(msg, cap, "%s needs a value", name);
      val = argv[++i];
    }
    if (strcmp(name, "--server") == 0) {
      if (val[0] == '\0') return usage_error(msg, cap, "--server needs HOST:PORT");
      o->server = val;
    } else if (strcmp(name, "--interval") == 0) {
      char *end;
      errno = 0;
      double t = strtod(val, &end);
      if (end == val || *end != '\0' || errno != 0 || !isfinite(t) || t < 0.1 || t > 3600)
        return usage_error(msg, cap, "--interval needs seconds in [0.1, 3600], not \"%s\"", val);
      o->interval_s = t;
      interval_given = 1;
    } else if (strcmp(name, "--timeout") == 0) {
      char *end;
      errno = 0;
      double t = strtod(val, &end);
      if (end == val || *end != '\0' || errno != 0 || !isfinite(t) || t <= 0)
        return usage_error(msg, cap, "--timeout needs a number of seconds > 0, not \"%s\"", val);
      o->timeout_s = t;
    } else if (strcmp(name, "--assume") == 0) {
      char kind;
      const char *v;
      if (rctl_parse_assume(val, &kind, &v, msg, cap) != 0) return RCTL_EXIT_USAGE;
      if (o->n_assume == RCTL_MAX_ASSUME)
        return usage_error(msg, cap, "--assume is given more than %d times", RCTL_MAX_ASSUME);
      o->assume[o->n_assume++] = val;
    } else if (strcmp(name, "--name") == 0) {
      o->name = val;
    } else if (strcmp(name, "--token") == 0) {
      if (val[0] == '\0') return usage_error(msg, cap, "--token is empty");
      o->token = val;
    } else if (strncmp(name, "--tls-", 6) == 0) {
      if (val[0] == '\0') return usage_error(msg, cap, "%s needs a file", name);
      if (strcmp(name, "--tls-ca") == 0) o->tls_ca = val;
      else if (strcmp(name, "--tls-cert") == 0) o->tls_cert = val;
      else o->tls_key = val;
    } else {
      if (val[0] == '\0') return usage_error(msg, cap, "--admin-token-file is empty");
      o->admin_token_file = val;
    }
  }
  if (o->help || o->version) return 0;
  if ((o->tls_cert != NULL) != (o->tls_key != NULL))
    return usage_error(msg, cap, "--tls-cert and --tls-key go together");
  if (o->tls_cert != NULL && o->tls_ca == NULL)
    return usage_error(msg, cap, "--tls-cert needs --tls-ca (client certificates are sent "
                       "only over TLS)");
  if (n_operands == 0) return usage_error(msg, cap, "no command given");

  const char *cmd = operands[0];
  int want = -1;
  o->cmd = RCTL_CMD_NONE;
  for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
    if (strcmp(cmd, commands[k].name) == 0) {
      o->cmd = commands[k].cmd;
      want = commands[k].n_args;
    }
  if (want == -1 && o->cmd == 0) return usage_error(msg, cap, "unknown command \"%s\"", cmd);
  if (o->all && o->cmd != RCTL_CMD_CHECKPOINT)
    return usage_error(msg, cap, "--all applies only to checkpoint");
  if (o->name != NULL && o->cmd != RCTL_CMD_IMPORT)
    return usage_error(msg, cap, "--name applies only to import");
  if (o->cmd == RCTL_CMD_CHECKPOINT) want = o->all ? 0 : 1;
  if (o->cmd == RCTL_CMD_PROFILES) {
    int n = n_total - 1;
    const char *sub = n > 0 ? operands[1] : NULL;
    if (o->clear && n != 0) return usage_error(msg, cap, "profiles --clear takes no arguments");
    if (n > 0 && strcmp(sub, "import") != 0 && strcmp(sub, "export") != 0)
      return usage_error(msg, cap, "profiles takes --clear, import FILE or export, not \"%s\"",
                         sub);
    if (n > 0 && strcmp(sub, "import") == 0 && n != 2)
      return usage_error(msg, cap, "profiles import needs exactly one FILE");
    if (n > 0 && strcmp(sub, "export") == 0 && n != 1)
      return usage_error(msg, cap, "profiles export takes no arguments");
    if (n == 2 && operands[2][0] == '\0')
      return usage_error(msg, cap, "profiles import: the FILE name is empty");
    for (int k = 1; k < n_operands; k++) o->args[o->n_args++] = operands[k];
    if (o->n_assume > 0) return usage_error(msg, cap, "--assume applies only to plan");
    return 0;
  }
  if (o->cmd == RCTL_CMD_TENANT) {
    int n = n_total - 1;
    if (n_total > RCTL_MAX_ARGS + 1) return usage_error(msg, cap, "tenant: too many arguments");
    const char *sub = n > 0 ? operands[1] : "";
    int ls = strcmp(sub, "ls") == 0, add = strcmp(sub, "add") == 0;
    int set = strcmp(sub, "set") == 0, rm = strcmp(sub, "rm") == 0;
    if (!ls && !add && !set && !rm)
      return usage_error(msg, cap, "tenant takes ls, add NAME, set NAME or rm NAME");
    if (ls && n != 1) return usage_error(msg, cap, "tenant ls takes no arguments");
    if (!ls && (n < 2 || operands[2][0] == '\0'))
      return usage_error(msg, cap, "tenant %s needs a NAME", sub);
    if (rm && n != 2) return usage_error(msg, cap, "tenant rm takes only a NAME");
    if (set && n < 3) return usage_error(msg, cap, "tenant set needs at least one QUOTA");
    rdc_tenant_quota_t q;
    unsigned mask;
    if ((add || set) && rctl_parse_tenant_quota(operands + 3, n - 2, &q, &mask, msg, cap) != 0)
      return RCTL_EXIT_USAGE;
    if (o->clear || o->n_assume > 0)
      return usage_error(msg, cap, "--clear and --assume do not apply to tenant");
    for (int k = 1; k < n_operands; k++) o->args[o->n_args++] = operands[k];
    return 0;
  }
  if (o->clear) return usage_error(msg, cap, "--clear applies only to profiles");
  if ((o->once || interval_given) && o->cmd != RCTL_CMD_TOP)
    return usage_error(msg, cap, "--once and --interval apply only to top");
  if (o->n_assume > 0 && o->cmd != RCTL_CMD_PLAN)
    return usage_error(msg, cap, "--assume applies only to plan");
  if (n_total - 1 != want) {
    if (o->cmd == RCTL_CMD_PLAN) return usage_error(msg, cap, "plan needs exactly one SPEC");
    if (o->cmd == RCTL_CMD_EXPORT) return usage_error(msg, cap, "export needs an ID and a FILE");
    if (o->cmd == RCTL_CMD_IMPORT) return usage_error(msg, cap, "import needs exactly one FILE");
    if (o->cmd == RCTL_CMD_CHECKPOINT && o->all)
      return usage_error(msg, cap, "checkpoint --all takes no workload ID");
    if (want == 0) return usage_error(msg, cap, "%s takes no arguments", cmd);
    return usage_error(msg, cap, "%s needs exactly one workload ID", cmd);
  }
  for (int k = 1; k < n_operands; k++) o->args[o->n_args++] = operands[k];
  if (o->cmd == RCTL_CMD_DESCRIBE || o->cmd == RCTL_CMD_RM || o->cmd == RCTL_CMD_EXPORT ||
      (o->cmd == RCTL_CMD_CHECKPOINT && !o->all))
    if (o->args[0][0] == '\0') return usage_error(msg, cap, "the workload ID is empty");
  if ((o->cmd == RCTL_CMD_EXPORT && o->args[1][0] == '\0') ||
      (o->cmd == RCTL_CMD_IMPORT && o->args[0][0] == '\0'))
    return usage_error(msg, cap, "the FILE name is empty");
  if (o->cmd == RCTL_CMD_PLAN && o->args[0][0] == '\0')
    return usage_error(msg, cap, "the plan SPEC is empty");
  if ((o->cmd == RCTL_CMD_DEVICES || o->cmd == RCTL_CMD_IMPORT) &&
      (o->token != NULL || o->admin_token_file != NULL))
    return usage_error(msg, cap, "--token and --admin-token-file apply only to status, ls, "
                       "describe, top, rm, profiles, plan, checkpoint, export and tenant");
  return 0;
}

int rctl_state_dir(const char *state_directory, const char *xdg_state_home, const char *home,
                   char *out, size_t cap) {
  /* The daemon's rule (daemon/config.c), step by step, so both find the
   * same admin.token. */
  int n = -1;
  if (state_directory != NULL && state_directory[0] != '\0' &&
      state_directory[0] != ':') {
    /* systemd joins several StateDirectory= entries with ':'. */
    size_t len = strcspn(state_directory, ":");
    n = snprintf(out, cap, "%.*s", (int)len, state_directory);
  } else if (xdg_state_home != NULL && xdg_state_home[0] == '/') {
    /* A relative $XDG_STATE_HOME is invalid (XDG base-directory spec). */
    n = snprintf(out, cap, "%s/replayd", xdg_state_home);
  } else if (home != NULL && home[0] != '\0') {
    n = snprintf(out, cap, "%s/.local/state/replayd", home);
  } else {
    n = snprintf(out, cap, "./replayd-state");
  }
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int rctl_read_token_file(const char *path, char *token, size_t cap, char *msg, size_t msg_cap) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(msg, msg_cap, "cannot read the token file %s: %s", path, strerror(errno));
    return -1;
  }
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  int read_err = ferror(f);
  fclose(f);
  if (read_err) {
    snprintf(msg, msg_cap, "cannot read the token file %s", path);
    return -1;
  }
  buf[n] = '\0';
  char *p = buf;
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
  size_t len = strcspn(p, "\r\n");
  while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
  if (len == 0) {
    snprintf(msg, msg_cap, "the token file %s is empty", path);
    return -1;
  }
  if (len >= cap) {
    snprintf(msg, msg_cap, "the token in %s is longer than %zu characters", path, cap - 1);
    return -1;
  }
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)p[i] < 0x21 || (unsigned char)p[i] > 0x7e) {
      snprintf(msg, msg_cap, "the token in %s contains a character that is not printable ASCII",
               path);
      return -1;
    }
  memcpy(token, p, len);
  token[len] = '\0';
  return 0;
}

int rctl_parse_assume(const char *s, char *kind, const char **value, char *msg, size_t cap) {
  if (strncmp(s, "gpu=", 4) == 0 && s[4] != '\0') {
    *kind = 'g';
    *value = s + 4;
    return 0;
  }
  if (strncmp(s, "fpga=", 5) == 0 && s[5] != '\0') {
    *kind = 'f';
    *value = s + 5;
    return 0;
  }
  snprintf(msg, cap, "--assume needs gpu=FILE or fpga=PART, not \"%.64s\"", s);
  return -1;
}

/* "4-64-64-2" into v (at least 2 sizes, each 1..65536). */
static int parse_sizes(const char *s, size_t len, uint32_t *v, uint32_t max, uint32_t *n) {
  *n = 0;
  size_t i = 0;
  while (i < len) {
    if (s[i] < '0' || s[i] > '9' || *n == max) return -1;
    unsigned long x = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      x = x * 10 + (unsigned long)(s[i++] - '0');
      if (x > 65536) return -1;
    }
    if (x == 0) return -1;
    v[(*n)++] = (uint32_t)x;
    if (i < len) {
      if (s[i] != '-' || i + 1 == len) return -1;
      i++;
    }
  }
  return *n >= 2 ? 0 : -1;
}

static int parse_u32(const char *s, size_t len, uint32_t *out) {
  if (len == 0 || len > 10) return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    x = x * 10 + (uint64_t)(s[i] - '0');
  }
  if (x > UINT32_MAX) return -1;
  *out = (uint32_t)x;
  return 0;
}

static void add_field(rdc_spec_t *sp, const char *name, rdc_dtype_t dt, uint32_t dim) {
  rdc_field_t *f = &sp->fields[sp->n_fields++];
  snprintf(f->name, sizeof f->name, "%s", name);
  f->dtype = dt;
  f->rank = dim ? 1 : 0;
  f->shape[0] = dim;
}

int rctl_parse_plan_spec(const char *text, void *spec_out, char *msg, size_t cap) {
  rdc_spec_t *sp = spec_out;
  memset(sp, 0, sizeof *sp);
  rdc_learner_spec_t *l = &sp->learner;
  const char *comma = strchr(text, ',');
  size_t head = comma ? (size_t)(comma - text) : strlen(text);
  uint32_t sizes[RDC_MAX_HIDDEN + 2], n = 0, critic[RDC_MAX_HIDDEN], nc = 0;
  int ddpg = 0, have_critic = 0;
  static const struct {
    const char *name, *sizes, *critic;
    int ddpg;
  } named[] = {
      {"cartpole_dqn", "4-64-64-2", NULL, 0},
      {"cartpole_ddpg", "4-8-8-1", "8-8", 1},
      {"hopper_ddpg", "11-256-256-3", "256-256", 1},
  };
  const char *sz = NULL;
  size_t sz_len = 0;
  for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
    if (strlen(named[k].name) == head && strncmp(text, named[k].name, head) == 0) {
      sz = named[k].sizes;
      sz_len = strlen(sz);
      ddpg = named[k].ddpg;
      snprintf(sp->name, sizeof sp->name, "%s", named[k].name);
      if (named[k].critic &&
          parse_sizes(named[k].critic, strlen(named[k].critic), critic, RDC_MAX_HIDDEN, &nc) == 0)
        have_critic = 1;
    }
  if (sz == NULL) {
    if (head > 4 && strncmp(text, "dqn:", 4) == 0) {
      sz = text + 4;
      sz_len = head - 4;
    } else if (head > 5 && strncmp(text, "ddpg:", 5) == 0) {
      sz = text + 5;
      sz_len = head - 5;
      ddpg = 1;
    } else {
      snprintf(msg, cap, "SPEC \"%.*s\" is not cartpole_dqn, cartpole_ddpg, hopper_ddpg, "
               "dqn:OBS-H-...-ACTIONS or ddpg:OBS-H-...-ACTION_DIM", (int)(head > 64 ? 64 : head),
               text);
      return -1;
    }
    snprintf(sp->name, sizeof sp->name, "plan");
  }
  if (parse_sizes(sz, sz_len, sizes, RDC_MAX_HIDDEN + 2, &n) != 0) {
    snprintf(msg, cap, "SPEC: layer sizes \"%.*s\" are not OBS-H-...-OUT (2 to %d numbers in "
             "1..65536)", (int)(sz_len > 64 ? 64 : sz_len), sz, RDC_MAX_HIDDEN + 2);
    return -1;
  }
  uint32_t batch = 64, capacity = 100000, fanout = 16, depth = 0;
  double spi = 0;
  const char *p = comma;
  while (p != NULL && *p == ',') {
    p++;
    const char *next = strchr(p, ',');
    size_t len = next ? (size_t)(next - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    if (eq == NULL) {
      snprintf(msg, cap, "SPEC: \"%.*s\" is not key=value", (int)(len > 64 ? 64 : len), p);
      return -1;
    }
    size_t kl = (size_t)(eq - p), vl = len - kl - 1;
    const char *v = eq + 1;
    int bad = 0;
    if (kl == 5 && strncmp(p, "batch", 5) == 0) bad = parse_u32(v, vl, &batch);
    else if (kl == 8 && strncmp(p, "capacity", 8) == 0) bad = parse_u32(v, vl, &capacity);
    else if (kl == 6 && strncmp(p, "fanout", 6) == 0) bad = parse_u32(v, vl, &fanout);
    else if (kl == 5 && strncmp(p, "depth", 5) == 0) bad = parse_u32(v, vl, &depth);
    else if (kl == 3 && strncmp(p, "spi", 3) == 0) {
      char tmp[32];
      char *end;
      if (vl == 0 || vl >= sizeof tmp) {
        bad = 1;
      } else {
        memcpy(tmp, v, vl);
        tmp[vl] = '\0';
        spi = strtod(tmp, &end);
        bad = *end != '\0' || !(spi >= 0) || !isfinite(spi);
      }
    } else if (kl == 6 && strncmp(p, "critic", 6) == 0) {
      /* Hidden sizes only: "256-256" (one size is allowed here). */
      char tmp[256];
      if (vl + 3 >= sizeof tmp) {
        bad = 1;
      } else {
        snprintf(tmp, sizeof tmp, "1-%.*s", (int)vl, v);
        uint32_t all[RDC_MAX_HIDDEN + 1], na = 0;
        bad = parse_sizes(tmp, strlen(tmp), all, RDC_MAX_HIDDEN + 1, &na) != 0;
        if (!bad) {
          nc = na - 1;
          memcpy(critic, all + 1, nc * sizeof *critic);
          have_critic = 1;
        }
      }
    } else {
      snprintf(msg, cap, "SPEC: unknown key \"%.*s\" (batch, capacity, fanout, depth, spi, "
               "critic)", (int)(kl > 32 ? 32 : kl), p);
      return -1;
    }
    if (bad) {
      snprintf(msg, cap, "SPEC: bad value for %.*s: \"%.*s\"", (int)kl, p,
               (int)(vl > 32 ? 32 : vl), v);
      return -1;
    }
    p = next;
  }
  uint32_t obs = sizes[0], out = sizes[n - 1];
  sp->capacity = capacity;
  sp->fanout = fanout;
  sp->seed = 1;
  sp->has_learner = 1;
  snprintf(l->algorithm, sizeof l->algorithm, "%s", ddpg ? "ddpg" : "dqn");
  l->n_hidden = n - 2;
  for (uint32_t i = 0; i + 2 < n + 0 && i < RDC_MAX_HIDDEN; i++) l->hidden[i] = sizes[i + 1];
  l->batch_size = batch;
  l->relaxation_depth = depth;
  l->samples_per_insert = spi;
  add_field(sp, "obs", RDC_DTYPE_FLOAT32, obs);
  if (ddpg) {
    l->n_critic_hidden = have_critic ? nc : 0;
    for (uint32_t i = 0; i < l->n_critic_hidden; i++) l->critic_hidden[i] = critic[i];
    add_field(sp, "action", RDC_DTYPE_FLOAT32, out);
  } else {
    l->num_actions = out;
    add_field(sp, "action", RDC_DTYPE_INT32, 0);
  }
  add_field(sp, "reward", RDC_DTYPE_FLOAT32, 0);
  add_field(sp, "next_obs", RDC_DTYPE_FLOAT32, obs);
  add_field(sp, "discount", RDC_DTYPE_FLOAT32, 0);
  return 0;
}

int rctl_parse_tenant_quota(const char *const *args, int n, void *qv, unsigned *mask, char *msg,
                            size_t cap) {
  rdc_tenant_quota_t *q = qv;
  memset(q, 0, sizeof *q);
  *mask = 0;
  static const struct {
    const char *key;
    unsigned bit;
  } keys[] = {{"max-memory", RDC_TQ_MEMORY},
              {"max-workloads", RDC_TQ_WORKLOADS},
              {"weight", RDC_TQ_WEIGHT},
              {"insert-rate", RDC_TQ_INSERT_RATE},
              {"sample-rate", RDC_TQ_SAMPLE_RATE},
              {"max-gpu-memory", RDC_TQ_GPU_MEMORY}};
  for (int i = 0; i < n; i++) {
    const char *a = args[i], *eq = strchr(a, '=');
    unsigned bit = 0;
    for (size_t k = 0; eq != NULL && k < sizeof keys / sizeof keys[0]; k++)
      if (strlen(keys[k].key) == (size_t)(eq - a) && strncmp(a, keys[k].key, (size_t)(eq - a)) == 0)
        bit = keys[k].bit;
    if (bit == 0) {
      usage_error(msg, cap, "tenant quota \"%s\": use max-memory=, max-workloads=, weight=, "
                  "insert-rate=, sample-rate= or max-gpu-memory=", a);
      return -1;
    }
    if (*mask & bit) {
      usage_error(msg, cap, "tenant quota %.*s is given twice", (int)(eq - a), a);
      return -1;
    }
    const char *v = eq + 1;
    char *end;
    errno = 0;
    if (bit == RDC_TQ_INSERT_RATE || bit == RDC_TQ_SAMPLE_RATE) {
      double d = strtod(v, &end);
      if (end == v || *end != '\0' || errno != 0 || !isfinite(d) || d < 0) {
        usage_error(msg, cap, "tenant quota %s: a rate in rows/s >= 0", a);
        return -1;
      }
      if (bit == RDC_TQ_INSERT_RATE) q->insert_rows_per_second = d;
      else q->sample_rows_per_second = d;
    } else {
      const int bytes = bit == RDC_TQ_MEMORY || bit == RDC_TQ_GPU_MEMORY;
      unsigned long long u = v[0] == '-' ? (errno = ERANGE, 0) : strtoull(v, &end, 10);
      unsigned shift = 0;
      if (errno == 0 && end != v && bytes && *end != '\0' && end[1] == '\0') {
        const char *units = "KMGT", *u_at = strchr(units, *end);
        if (u_at != NULL) {
          shift = 10 * (unsigned)(u_at - units + 1);
          end++;
        }
      }
      if (errno != 0 || end == v || *end != '\0' || (shift && u > (~0ull >> shift)) ||
          (!bytes && u > 0xffffffffull)) {
        usage_error(msg, cap, "tenant quota %s: a whole number%s", a,
                    bytes ? " of bytes (suffix K, M, G or T)" : "");
        return -1;
      }
      u <<= shift;
      if (bit == RDC_TQ_MEMORY) q->max_memory_bytes = u;
      else if (bit == RDC_TQ_GPU_MEMORY) q->max_gpu_memory_bytes = u;
      else if (bit == RDC_TQ_WORKLOADS) q->max_workloads = (uint32_t)u;
      else q->weight = (uint32_t)u;
    }
    *mask |= bit;
  }
  return 0;
}
