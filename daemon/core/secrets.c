/* secrets.c - random identifiers and tokens. */
#include "secrets.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

int rd_random_hex(char *out, size_t hex_len, int fail_code, rd_error_t *err) {
  unsigned char raw[64];
  if (hex_len % 2 != 0 || hex_len > 2 * sizeof raw)
    return rd_error_set(err, RD_EINVAL, "a random hex string of %zu digits is not supported",
                        hex_len);
  size_t n = hex_len / 2, got = 0;
  while (got < n) {
    ssize_t r = getrandom(raw + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return rd_error_set(err, fail_code, "getrandom failed: %s", strerror(errno));
    got += (size_t)r;
  }
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[raw[i] >> 4];
    out[2 * i + 1] = digits[raw[i] & 15];
  }
  out[hex_len] = '\0';
  return RD_OK;
}
