/* replayctl_cli.c - see replayctl_cli.h. */
#include "replayctl_cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: replayctl [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Inspect and operate a replayd server.\n"
    "\n"
    "Commands:\n"
    "  status        version, uptime, workload count, devices\n"
    "  ls            workloads: id, name, size/capacity, counters\n"
    "  describe ID   one workload: its spec, schema and counters\n"
    "  devices       the devices the server found\n"
    "  rm ID         delete a workload (needs its token or the admin token)\n"
    "\n"
    "Options:\n"
    "  --server HOST:PORT       server address (default $REPLAYD_SERVER, else " RCTL_DEFAULT_SERVER ")\n"
    "  --json                   print one JSON document instead of tables\n"
    "  --timeout S              connect timeout and per-call deadline, seconds (default 5)\n"
    "  --token T                rm: the workload's token\n"
    "  --admin-token-file PATH  rm: file with the server's admin token (default\n"
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
  int n_args;
} commands[] = {
    {"status", RCTL_CMD_STATUS, 0}, {"ls", RCTL_CMD_LS, 0},       {"describe", RCTL_CMD_DESCRIBE, 1},
    {"devices", RCTL_CMD_DEVICES, 0}, {"rm", RCTL_CMD_RM, 1},
};

/* Options that take a value. */
static const char *const valued[] = {"--server", "--timeout", "--token", "--admin-token-file"};

int rctl_parse_args(int argc, char **argv, const char *env_server, rctl_opts_t *o, char *msg,
                    size_t cap) {
  memset(o, 0, sizeof *o);
  o->server = env_server != NULL && env_server[0] != '\0' ? env_server : RCTL_DEFAULT_SERVER;
  o->timeout_s = RCTL_DEFAULT_TIMEOUT_S;
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
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      o->help = 1;
      continue;
    }
    if (strcmp(a, "--version") == 0) {
      o->version = 1;
      continue;
    }
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
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
    } else if (strcmp(name, "--timeout") == 0) {
      char *end;
      errno = 0;
      double t = strtod(val, &end);
      if (end == val || *end != '\0' || errno != 0 || !isfinite(t) || t <= 0)
        return usage_error(msg, cap, "--timeout needs a number of seconds > 0, not \"%s\"", val);
      o->timeout_s = t;
    } else if (strcmp(name, "--token") == 0) {
      if (val[0] == '\0') return usage_error(msg, cap, "--token is empty");
      o->token = val;
    } else {
      if (val[0] == '\0') return usage_error(msg, cap, "--admin-token-file is empty");
      o->admin_token_file = val;
    }
  }
  if (o->help || o->version) return 0;
  if (n_operands == 0) return usage_error(msg, cap, "no command given");

  const char *cmd = operands[0];
  int want = -1;
  for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
    if (strcmp(cmd, commands[k].name) == 0) {
      o->cmd = commands[k].cmd;
      want = commands[k].n_args;
    }
  if (want < 0) return usage_error(msg, cap, "unknown command \"%s\"", cmd);
  if (n_total - 1 != want) {
    if (want == 0) return usage_error(msg, cap, "%s takes no arguments", cmd);
    return usage_error(msg, cap, "%s needs exactly one workload ID", cmd);
  }
  for (int k = 1; k < n_operands; k++) o->args[o->n_args++] = operands[k];
  if (o->cmd == RCTL_CMD_DESCRIBE || o->cmd == RCTL_CMD_RM)
    if (o->args[0][0] == '\0') return usage_error(msg, cap, "the workload ID is empty");
  if (o->cmd != RCTL_CMD_RM && (o->token != NULL || o->admin_token_file != NULL))
    return usage_error(msg, cap, "--token and --admin-token-file apply only to rm");
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
