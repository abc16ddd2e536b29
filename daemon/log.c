/* log.c - one-line, thread-safe logs to stderr or a file.
 *
 * Each line is formatted into a stack buffer and written with one write()
 * while holding the mutex, so lines from different threads never
 * interleave, and O_APPEND keeps them whole even if another process (or
 * logrotate's copytruncate) touches the file. Reopening (SIGHUP after
 * rotation) opens the new file first and swaps descriptors only if that
 * worked, so a failed reopen keeps logging to the old file.
 *
 * Not async-signal-safe: a signal handler must not call these; the daemon
 * handles SIGHUP on its event loop and calls rd_log_reopen from there.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Longer messages are cut (and marked with "...") rather than split, so a
 * client-supplied string can never produce more than one line. */
#define LINE_BYTES 4096

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = STDERR_FILENO;       /* guarded by log_mu */
static char log_path[PATH_MAX];          /* guarded by log_mu; "" = stderr */
static atomic_int log_level = RD_LOG_INFO; /* read without the lock on every call */

static const char *const level_tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};

static int open_log_file(const char *path) {
  return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
}

int rd_log_open(const char *path, rd_log_level_t level, rd_error_t *err) {
  if (level < RD_LOG_DEBUG || level > RD_LOG_ERROR)
    return rd_error_set(err, RD_EINVAL, "log level %d is not one of debug, info, warn, error",
                        (int)level);
  int fd = STDERR_FILENO;
  if (path != NULL && path[0] != '\0') {
    if (strlen(path) >= sizeof log_path)
      return rd_error_set(err, RD_EINVAL, "log file path is longer than %zu bytes",
                          sizeof log_path - 1);
    fd = open_log_file(path);
    if (fd < 0)
      return rd_error_set(err, RD_EINVAL, "cannot open log file %s: %s", path, strerror(errno));
  }
  pthread_mutex_lock(&log_mu);
  int old = log_fd;
  log_fd = fd;
  snprintf(log_path, sizeof log_path, "%s", fd == STDERR_FILENO ? "" : path);
  atomic_store(&log_level, (int)level);
  pthread_mutex_unlock(&log_mu);
  if (old != STDERR_FILENO) close(old);
  return RD_OK;
}

int rd_log_reopen(void) {
  char path[PATH_MAX];
  pthread_mutex_lock(&log_mu);
  snprintf(path, sizeof path, "%s", log_path);
  pthread_mutex_unlock(&log_mu);
  if (path[0] == '\0') return RD_OK; /* stderr: nothing to reopen */

  int fd = open_log_file(path);
  if (fd < 0) {
    int e = errno;
    rd_log_error("log", "cannot reopen %s: %s; still writing to the old file", path, strerror(e));
    return RD_EINVAL;
  }
  pthread_mutex_lock(&log_mu);
  int old = log_fd;
  if (strcmp(path, log_path) != 0) { /* rd_log_open ran meanwhile: it wins */
    pthread_mutex_unlock(&log_mu);
    close(fd);
    return RD_OK;
  }
  log_fd = fd;
  pthread_mutex_unlock(&log_mu);
  if (old != STDERR_FILENO) close(old);
  return RD_OK;
}

void rd_log_close(void) {
  pthread_mutex_lock(&log_mu);
  int old = log_fd;
  log_fd = STDERR_FILENO;
  log_path[0] = '\0';
  pthread_mutex_unlock(&log_mu);
  if (old != STDERR_FILENO) close(old);
}

void rd_log(rd_log_level_t level, const char *component, const char *fmt, ...) {
  if ((int)level < atomic_load_explicit(&log_level, memory_order_relaxed)) return;
  if (level < RD_LOG_DEBUG || level > RD_LOG_ERROR) level = RD_LOG_ERROR;

  char line[LINE_BYTES];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
  n += (size_t)snprintf(line + n, sizeof line - n, ".%03dZ %s %s: ", (int)(ts.tv_nsec / 1000000),
                        level_tags[level], component ? component : "-");
  if (n >= sizeof line) n = sizeof line - 1;

  size_t head = n;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  if ((size_t)m >= sizeof line - n - 1) { /* truncated: leave room for "...\n" */
    n = sizeof line - 5;
    memcpy(line + n, "...", 3);
    n += 3;
  } else {
    n += (size_t)m;
  }
  /* Messages may quote client input (names, ids): a control character
   * there must not forge a second log line or a terminal escape. */
  for (size_t i = head; i < n; i++)
    if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) line[i] = '?';
  line[n++] = '\n';

  pthread_mutex_lock(&log_mu);
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(log_fd, line + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      break; /* nowhere to report a logging failure; drop the line */
    }
    off += (size_t)w;
  }
  pthread_mutex_unlock(&log_mu);
}
