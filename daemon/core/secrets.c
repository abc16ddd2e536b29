/* secrets.c - random identifiers and tokens; token hashes (secrets.h). */
#include "secrets.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

static const char hex_digits[] = "0123456789abcdef";

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
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hex_digits[raw[i] >> 4];
    out[2 * i + 1] = hex_digits[raw[i] & 15];
  }
  out[hex_len] = '\0';
  rd_secret_wipe(raw, sizeof raw);
  return RD_OK;
}

void rd_token_hash(const void *token, size_t len, uint8_t out[RD_TOKEN_HASH_LEN]) {
  static const unsigned char empty[1];
  SHA256(token != NULL ? token : empty, token != NULL ? len : 0, out);
}

int rd_token_matches(const uint8_t hash[RD_TOKEN_HASH_LEN], const void *token, size_t len) {
  if (token == NULL) return 0;
  uint8_t h[RD_TOKEN_HASH_LEN];
  rd_token_hash(token, len, h);
  return CRYPTO_memcmp(h, hash, RD_TOKEN_HASH_LEN) == 0;
}

void rd_token_hash_format(const uint8_t hash[RD_TOKEN_HASH_LEN], char *out) {
  memcpy(out, RD_TOKEN_HASH_PREFIX, 7);
  for (size_t i = 0; i < RD_TOKEN_HASH_LEN; i++) {
    out[7 + 2 * i] = hex_digits[hash[i] >> 4];
    out[7 + 2 * i + 1] = hex_digits[hash[i] & 15];
  }
  out[RD_TOKEN_HASH_TEXT_LEN] = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int rd_token_hash_parse(const char *text, uint8_t hash[RD_TOKEN_HASH_LEN]) {
  if (text == NULL || strnlen(text, RD_TOKEN_HASH_TEXT_LEN + 1) != RD_TOKEN_HASH_TEXT_LEN ||
      memcmp(text, RD_TOKEN_HASH_PREFIX, 7) != 0)
    return RD_EINVAL;
  uint8_t h[RD_TOKEN_HASH_LEN];
  for (size_t i = 0; i < RD_TOKEN_HASH_LEN; i++) {
    int hi = hex_value(text[7 + 2 * i]), lo = hex_value(text[7 + 2 * i + 1]);
    if (hi < 0 || lo < 0) return RD_EINVAL;
    h[i] = (uint8_t)(hi << 4 | lo);
  }
  memcpy(hash, h, sizeof h);
  return RD_OK;
}

void rd_secret_wipe(void *p, size_t n) { OPENSSL_cleanse(p, n); }
