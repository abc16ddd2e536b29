/* secrets.h - random identifiers and tokens from the kernel's CSPRNG, and
 * the form tokens take at rest.
 *
 * A token is 256 random bits (64 hex digits), so a plain SHA-256 of it
 * (libcrypto) is as hard to invert as guessing the token: no salt or slow
 * hash is needed, unlike for passwords. The daemon keeps and stores only
 * token hashes: the database holds "sha256:" + 64 hex digits per workload,
 * memory the 32 raw bytes. A presented token is hashed and the two hashes
 * are compared in constant time (CRYPTO_memcmp), so the time taken depends
 * on the presented token's length only, never on how much of it matched.
 */
#ifndef RD_SECRETS_H
#define RD_SECRETS_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

#define RD_TOKEN_HASH_LEN 32 /* SHA-256 */
/* "sha256:" + 64 hex digits, the stored form; + NUL. */
#define RD_TOKEN_HASH_PREFIX "sha256:"
#define RD_TOKEN_HASH_TEXT_LEN (7 + 2 * RD_TOKEN_HASH_LEN)

/* Fill out with hex_len lowercase hex digits (hex_len even, <= 128) and a
 * NUL, from getrandom(). On failure returns fail_code with a message:
 * callers choose the code their own API documents. */
int rd_random_hex(char *out, size_t hex_len, int fail_code, rd_error_t *err);

/* out = SHA-256(token[0, len)). */
void rd_token_hash(const void *token, size_t len, uint8_t out[RD_TOKEN_HASH_LEN]);

/* 1 if SHA-256(token[0, len)) equals hash, in time independent of where
 * they differ; 0 for a NULL token. */
int rd_token_matches(const uint8_t hash[RD_TOKEN_HASH_LEN], const void *token, size_t len);

/* The stored form of a hash: out (RD_TOKEN_HASH_TEXT_LEN + 1 bytes)
 * receives "sha256:" and 64 lowercase hex digits. */
void rd_token_hash_format(const uint8_t hash[RD_TOKEN_HASH_LEN], char *out);

/* Read a stored form back: RD_OK, or RD_EINVAL if text is not exactly
 * "sha256:" and 64 lowercase hex digits (hash untouched). */
int rd_token_hash_parse(const char *text, uint8_t hash[RD_TOKEN_HASH_LEN]);

/* Overwrite n bytes of p in a way the compiler cannot drop (a secret
 * that is no longer needed). */
void rd_secret_wipe(void *p, size_t n);

#endif
