/* log.h - one-line logs: "2026-11-23T01:02:03.456Z LEVEL component: message".
 * Thread-safe; to stderr or a file that rd_log_reopen (SIGHUP) reopens. */
#ifndef RD_LOG_H
#define RD_LOG_H

#include "config.h"

/* path NULL or "" = stderr. Returns 0 or RD_EINVAL if the file can't open. */
int rd_log_open(const char *path, rd_log_level_t level, rd_error_t *err);
int rd_log_reopen(void);
void rd_log_close(void);
void rd_log(rd_log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define rd_log_debug(c, ...) rd_log(RD_LOG_DEBUG, c, __VA_ARGS__)
#define rd_log_info(c, ...) rd_log(RD_LOG_INFO, c, __VA_ARGS__)
#define rd_log_warn(c, ...) rd_log(RD_LOG_WARN, c, __VA_ARGS__)
#define rd_log_error(c, ...) rd_log(RD_LOG_ERROR, c, __VA_ARGS__)

#endif
