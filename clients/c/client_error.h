/* client_error.h - how the client library's files fill an rdc_error_t
 * (replayd_client.c, rdc_policy.c): internal, header-only (no symbol: the
 * library exports rdc_* only). */
#ifndef RDC_CLIENT_ERROR_H
#define RDC_CLIENT_ERROR_H

#include <stdarg.h>
#include <stdio.h>

#include "replayd_client.h"

/* err (may be NULL) = code and the formatted message; returns code. */
__attribute__((format(printf, 3, 4))) static inline int set_error(rdc_error_t *err, int code,
                                                                  const char *fmt, ...) {
  if (err != NULL) {
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

#endif
