/* rdt_daemon.c - a real replayd and other programs for tests (rdt_daemon.h). */
#include "rdt_daemon.h"

#include <arpa/inet.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdt_dir.h"

extern char **environ;

#define LISTENING "listening on 127.0.0.1:"

int rdt_daemon_spawn(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *o) {
  static const rdt_daemon_opts_t none = {0};
  if (o == NULL) o = &none;
  if (d->dir[0] == '\0' && rdt_tmpdir(d->dir, sizeof d->dir, o->tag ? o->tag : "replayd") != 0)
    return -1;
  snprintf(d->log, sizeof d->log, "%s/replayd.log", d->dir);
  d->target[0] = '\0';
  const char *args[64] = {replayd, "--listen", o->listen ? o->listen : "127.0.0.1:0",
                          "--state-dir", d->dir};
  int n = 5;
  for (const char *const *a = o->args; a && *a && n < 63; a++) args[n++] = *a;
  args[n] = NULL;
  fflush(NULL);
  const pid_t parent = getpid();
  d->pid = fork();
  if (d->pid < 0) return -1;
  if (d->pid == 0) {
    /* Dies with the test or bench that started it (killed mid-run too),
     * unless that one is already gone. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
    if (o->new_session) setsid();
    if (freopen("/dev/null", "w", stdout) == NULL) _exit(127); /* never hold the caller's */
    if (o->hide_gpus) setenv("CUDA_VISIBLE_DEVICES", "", 1);
    if (freopen(d->log, "w", stderr) == NULL) _exit(127);
    execv(replayd, (char *const *)args);
    _exit(127);
  }
  return 0;
}

/* The port of the log's "listening on" line, or 0. */
static int listening_port(const char *log) {
  FILE *f = fopen(log, "r");
  if (f == NULL) return 0;
  char line[1024];
  int port = 0;
  while (port == 0 && fgets(line, sizeof line, f)) {
    const char *p = strstr(line, LISTENING);
    if (p) port = atoi(p + strlen(LISTENING));
  }
  fclose(f);
  return port;
}

int rdt_daemon_wait(rdt_daemon_t *d, const rdt_daemon_opts_t *o) {
  double timeout = o && o->timeout_s > 0 ? o->timeout_s : 30;
  for (int i = 0; i < (int)(timeout / 0.02); i++) {
    usleep(20000);
    int port = listening_port(d->log);
    if (port > 0) {
      snprintf(d->target, sizeof d->target, "127.0.0.1:%d", port);
      return 0;
    }
    if (waitpid(d->pid, NULL, WNOHANG) == d->pid) break; /* it exited */
  }
  fprintf(stderr, "replayd did not start (see %s)\n", d->log);
  kill(d->pid, SIGKILL);
  waitpid(d->pid, NULL, 0);
  d->pid = 0;
  return -1;
}

int rdt_daemon_start(rdt_daemon_t *d, const char *replayd, const rdt_daemon_opts_t *o) {
  if (rdt_daemon_spawn(d, replayd, o) != 0) return -1;
  return rdt_daemon_wait(d, o);
}

int rdt_daemon_stop(rdt_daemon_t *d) {
  if (d->pid <= 0) return -1;
  kill(d->pid, SIGTERM);
  int st = 0;
  pid_t w = waitpid(d->pid, &st, 0);
  d->pid = 0;
  return w > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int rdt_daemon_remove(rdt_daemon_t *d) {
  int rc = d->dir[0] ? rdt_rmtree(d->dir) : 0;
  d->dir[0] = '\0';
  return rc;
}

int rdt_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
           getsockname(fd, (struct sockaddr *)&a, &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

static void slurp(int fd, char *buf, size_t cap) {
  size_t n = 0;
  ssize_t r;
  lseek(fd, 0, SEEK_SET);
  while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0) n += (size_t)r;
  buf[n] = '\0';
}

/* environ with env_extra applied, into envp (cap entries). */
static void make_env(char **envp, int cap, const char *const *env_extra) {
  int ne = 0;
  for (char **e = environ; *e && ne < cap - 64; e++) {
    int overridden = 0;
    for (const char *const *x = env_extra; x && *x; x++) {
      size_t k = strcspn(*x, "=");
      if (strncmp(*e, *x, k + 1) == 0) overridden = 1;
    }
    if (!overridden) envp[ne++] = *e;
  }
  for (const char *const *x = env_extra; x && *x && ne < cap - 1; x++)
    if ((*x)[strlen(*x) - 1] != '=') envp[ne++] = (char *)*x;
  envp[ne] = NULL;
}

int rdt_run(rdt_result_t *res, const char *const *env_extra, const char *prog, ...) {
  va_list ap;
  va_start(ap, prog);
  int rc = rdt_runv(res, env_extra, prog, ap);
  va_end(ap);
  return rc;
}

int rdt_runv(rdt_result_t *res, const char *const *env_extra, const char *prog, va_list ap) {
  char *argv[64];
  int argc = 0;
  argv[argc++] = (char *)prog;
  for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 63;) argv[argc++] = a;
  argv[argc] = NULL;
  char *envp[512];
  make_env(envp, 512, env_extra);
  /* Output goes to files: the child may write while we do not read. */
  char out_path[] = "/tmp/rdt_out_XXXXXX", err_path[] = "/tmp/rdt_err_XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path), rc = -1;
  if (out_fd >= 0 && err_fd >= 0) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    pid_t pid;
    int st;
    if (posix_spawn(&pid, prog, &fa, NULL, argv, envp) == 0 && waitpid(pid, &st, 0) == pid &&
        WIFEXITED(st)) {
      res->rc = WEXITSTATUS(st);
      slurp(out_fd, res->out, sizeof res->out);
      slurp(err_fd, res->err, sizeof res->err);
      rc = 0;
    }
    posix_spawn_file_actions_destroy(&fa);
  }
  if (out_fd >= 0) close(out_fd), unlink(out_path);
  if (err_fd >= 0) close(err_fd), unlink(err_path);
  return rc;
}
