/* rdt_check.h - the report of a self-checking program (the device checks
 * under tests/gpu, which run where cmocka may be missing).
 *
 * Contract: rdt_check prints "ok   <what>" or "FAIL <what>" on stdout,
 * flushed, and counts it; rdt_check_failed is the number of FAIL lines so
 * far, for the program's exit status. Not thread-safe: checks run on the
 * main thread.
 */
#ifndef RDT_CHECK_H
#define RDT_CHECK_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

void rdt_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int rdt_check_failed(void);
int rdt_check_passed(void);

#ifdef __cplusplus
}
#endif

#endif
