/* rdt_daemon.h - a real replayd for a test or a bench, and other programs
 * run as a user would run them.
 *
 * Contract: rdt_daemon_start forks replayd with --listen (an ephemeral
 * loopback port unless opts say one) and --state-dir (a fresh directory
 * unless d->dir is already set: a restart), its stderr in d->log, and
 * returns once the log's "listening on" line names the port (d->target:
 * "127.0.0.1:PORT"), or -1 after timeout_s with the daemon killed.
 * rdt_daemon_spawn and rdt_daemon_wait are the two halves, for a test that
 * calls while the daemon starts. rdt_daemon_stop sends SIGTERM and
 * returns the exit code (-1: killed by a signal, or none running); the
 * state directory stays until rdt_daemon_remove. The daemon gets SIGTERM
 * if the thread that started it exits first (PR_SET_PDEATHSIG: a test or
 * bench killed mid-run leaves none behind), and its stdout is /dev/null.
 */
#ifndef RDT_DAEMON_H
#define RDT_DAEMON_H

#include <stdarg.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  pid_t pid;
  char dir[128];   /* the state directory */
  char log[160];   /* the daemon's stderr */
  char target[64]; /* "127.0.0.1:PORT" once it listens */
} rdt_daemon_t;

typedef struct {
  const char *listen;           /* NULL: "127.0.0.1:0" */
  const char *const *args;      /* more arguments, NULL-terminated; NULL: none */
  const char *tag;              /* the state directory's tag (rdt_tmpdir); NULL: "replayd" */
  int new_session;              /* setsid() in the child, as under systemd */
  int hide_gpus;                /* CUDA_VISIBLE_DEVICES="" in the child */
  double timeout_s;             /* 0: 30 s */
} rdt_daemon_opts_t;

int rdt_daemon_start(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *opts);
int rdt_daemon_spawn(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *opts);
int rdt_daemon_wait(rdt_daemon_t *d, const rdt_daemon_opts_t *opts);
int rdt_daemon_stop(rdt_daemon_t *d);
int rdt_daemon_remove(rdt_daemon_t *d);

/* A loopback TCP port that nothing listened on a moment ago. */
int rdt_free_port(void);

/* A program's exit code and output (each truncated to its buffer). */
typedef struct {
  int rc;
  char out[16384];
  char err[4096];
} rdt_result_t;

/* Runs prog with the NULL-terminated arguments after it, its environment
 * this process's with env_extra's entries ("K=V" sets K, "K=" removes
 * it; NULL: none), waits, and collects its exit code and output. 0, or -1
 * when it could not run or did not exit normally. */
int rdt_run(rdt_result_t *res, const char *const *env_extra, const char *prog, ...);
/* The same with the arguments in ap, for a test's own wrapper of rdt_run. */
int rdt_runv(rdt_result_t *res, const char *const *env_extra, const char *prog, va_list ap);

#ifdef __cplusplus
}
#endif

#endif
