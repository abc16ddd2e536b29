/* rdt_check.c - a self-checking program's report (rdt_check.h). */
#include "rdt_check.h"

#include <stdarg.h>
#include <stdio.h>

static int n_passed, n_failed;

void rdt_check(bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "ok  " : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  if (ok)
    n_passed++;
  else
    n_failed++;
}

int rdt_check_failed(void) { return n_failed; }
int rdt_check_passed(void) { return n_passed; }
