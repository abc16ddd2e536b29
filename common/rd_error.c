/* rd_error.c - error names and message formatting. */
#include "rd_error.h"

#include <stdarg.h>
#include <stdio.h>

const char *rd_err_name(int code) {
  switch (code) {
  case RD_OK: return "RD_OK";
  case RD_EINVAL: return "RD_EINVAL";
  case RD_ERANGE: return "RD_ERANGE";
  case RD_ENOMEM: return "RD_ENOMEM";
  case RD_EEMPTY: return "RD_EEMPTY";
  case RD_ETOOBIG: return "RD_ETOOBIG";
  case RD_ENOTFOUND: return "RD_ENOTFOUND";
  case RD_ESTORE: return "RD_ESTORE";
  case RD_EBUSY: return "RD_EBUSY";
  case RD_ETIMEDOUT: return "RD_ETIMEDOUT";
  case RD_ECANCELED: return "RD_ECANCELED";
  case RD_EINTERNAL: return "RD_EINTERNAL";
  case RD_ESTATE: return "RD_ESTATE";
  default: return "RD_EUNKNOWN";
  }
}

int rd_error_set(rd_error_t *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

void rd_error_clear(rd_error_t *err) {
  if (err != NULL) {
    err->code = RD_OK;
    err->msg[0] = '\0';
  }
}
