/* secrets.h - random identifiers and tokens from the kernel's CSPRNG. */
#ifndef RD_SECRETS_H
#define RD_SECRETS_H

#include <stddef.h>

#include "rd_error.h"

/* Fill out with hex_len lowercase hex digits (hex_len even, <= 128) and a
 * NUL, from getrandom(). On failure returns fail_code with a message:
 * callers choose the code their own API documents. */
int rd_random_hex(char *out, size_t hex_len, int fail_code, rd_error_t *err);

#endif
