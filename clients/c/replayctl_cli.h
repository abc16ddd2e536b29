/* replayctl_cli.h - replayctl's command line: arguments, defaults and the
 * admin token file, kept apart from the commands so they can be tested
 * without a server. Internal to replayctl. */
#ifndef RDC_REPLAYCTL_CLI_H
#define RDC_REPLAYCTL_CLI_H

#include <stddef.h>

#define RCTL_DEFAULT_SERVER "127.0.0.1:50051"
#define RCTL_DEFAULT_TIMEOUT_S 5.0
#define RCTL_MAX_ARGS 8
#define RCTL_MAX_ASSUME 4

/* Exit codes. */
enum { RCTL_EXIT_OK = 0, RCTL_EXIT_CALL = 1, RCTL_EXIT_USAGE = 2 };

typedef enum {
  RCTL_CMD_NONE = 0,
  RCTL_CMD_STATUS,
  RCTL_CMD_LS,
  RCTL_CMD_DESCRIBE,
  RCTL_CMD_DEVICES,
  RCTL_CMD_RM,
  RCTL_CMD_PROFILES, /* [--clear | import FILE | export] */
  RCTL_CMD_PLAN,     /* SPEC [--assume gpu=FILE|fpga=PART ...] */
  RCTL_CMD_CHECKPOINT, /* ID | --all */
  RCTL_CMD_EXPORT,     /* ID FILE */
  RCTL_CMD_IMPORT,     /* FILE [--name NAME] */
  RCTL_CMD_TOP,      /* [--once] [--interval S] */
  RCTL_CMD_TENANT,   /* add NAME [KEY=VALUE...] | set NAME KEY=VALUE... | ls | rm NAME */
} rctl_cmd_t;

typedef struct {
  const char *server;           /* --server, else $REPLAYD_SERVER, else the default */
  int json;                     /* --json */
  double timeout_s;             /* --timeout: connect and per-call deadline */
  const char *token;            /* rm --token */
  const char *admin_token_file; /* rm, profiles: --admin-token-file; NULL = default path */
  int clear;                    /* profiles --clear */
  int all;                      /* checkpoint --all */
  const char *name;             /* import --name */
  const char *assume[RCTL_MAX_ASSUME]; /* plan --assume KIND=VALUE, in order */
  int n_assume;
  const char *tls_ca;           /* --tls-ca: TLS, the server's certificate signed by these CAs */
  const char *tls_cert, *tls_key; /* --tls-cert / --tls-key: this client's certificate */
  int once;                     /* top --once */
  double interval_s;            /* top --interval; default 1 */
  int help, version;            /* --help / --version */
  rctl_cmd_t cmd;
  const char *args[RCTL_MAX_ARGS]; /* the command's operands */
  int n_args;
} rctl_opts_t;

/* Parse argv (options may come before or after the command; "--opt value"
 * or "--opt=value"; "--" ends options). env_server is $REPLAYD_SERVER (may
 * be NULL). Returns 0, or RCTL_EXIT_USAGE with a message in msg. */
int rctl_parse_args(int argc, char **argv, const char *env_server, rctl_opts_t *o, char *msg,
                    size_t cap);

/* A plan's workload, written on the command line:
 *
 *   SHAPE[,key=value...]
 *
 * SHAPE is a benchmark shape (cartpole_dqn: 4-64-64-2 double DQN;
 * cartpole_ddpg: actor 4-8-8-1, critic hidden 8-8; hopper_ddpg: actor
 * 11-256-256-3, critic hidden 256-256; papers/001 Table III) or
 * ALGO:OBS-H1-...-OUT with ALGO dqn (OUT = actions) or ddpg (OUT = action
 * dimension; the critic's hidden layers are the actor's unless
 * critic=H1-H2 is given). Keys: batch (default 64), capacity (100000),
 * fanout (16), depth (the learner's D, 0), spi (samples per insert, 0),
 * critic. The schema is the learner's: obs, action, reward, next_obs,
 * discount. Returns 0, or -1 with a message. */
int rctl_parse_plan_spec(const char *text, void *spec /* rdc_spec_t */, char *msg, size_t cap);

/* A plan's --assume value: "gpu=FILE" (*kind 'g') or "fpga=PART" ('f');
 * *value points into s. Returns 0, or -1 with a message. */
int rctl_parse_assume(const char *s, char *kind, const char **value, char *msg, size_t cap);

/* The daemon's state directory rule (daemon/config.c): $STATE_DIRECTORY
 * (the first entry if systemd lists several, colon-separated), else
 * $XDG_STATE_HOME/replayd if that is absolute, else
 * $HOME/.local/state/replayd, else ./replayd-state. The environment is
 * passed in (any may be NULL or empty). Returns 0, or -1 if the path does
 * not fit in cap. */
int rctl_state_dir(const char *state_directory, const char *xdg_state_home, const char *home,
                   char *out, size_t cap);

/* Read a token file: its first line without surrounding whitespace.
 * Returns 0, or -1 with a message in msg (unreadable, empty, too long, or
 * not printable ASCII). */
int rctl_read_token_file(const char *path, char *token, size_t cap, char *msg, size_t msg_cap);

/* A tenant command's quota operands, KEY=VALUE with KEY one of
 * max-memory (bytes, with an optional K, M, G or T suffix: powers of
 * 1024), max-workloads, weight, insert-rate, sample-rate (rows/s; 0 = no
 * limit). q is a rdc_tenant_quota_t; *mask receives the RDC_TQ_* bits
 * given. Returns 0, or -1 with a message (unknown key, bad number, a key
 * given twice). */
int rctl_parse_tenant_quota(const char *const *args, int n, void *q, unsigned *mask, char *msg,
                            size_t cap);

/* The --help text. */
const char *rctl_usage(void);

#endif
