/* paging.c - page sizes, page tokens and reply size accounting (paging.h). */
#include "paging.h"

#include <stdlib.h>
#include <string.h>

#include "messages.h"
#include "pb_wire.h"
#include "replayd.pb-c.h"

#define WORKLOAD_PREFIX "w1."
#define PROFILE_PREFIX "p1."
#define PREFIX_LEN 3

uint32_t rd_page_size(uint32_t asked, uint32_t def, uint32_t max) {
  if (asked == 0) return def;
  return asked > max ? max : asked;
}

size_t rd_page_budget(uint32_t max_message_bytes) {
  return max_message_bytes > RD_REPLY_HEADROOM ? max_message_bytes - RD_REPLY_HEADROOM : 0;
}

size_t rd_pb_field_bytes(size_t len) { return rd_pb_len_field_bytes(len); }

int rd_page_take(rd_page_fill_t *f, size_t item_bytes, size_t tail_bytes) {
  if (f->used > f->budget || item_bytes > f->budget - f->used ||
      tail_bytes > f->budget - f->used - item_bytes)
    return RD_ETOOBIG;
  f->used += item_bytes;
  f->items++;
  return RD_OK;
}

/* ---- Workloads ---- */

static int is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

void rd_page_token_workload(const char *id, char *out) {
  size_t n = strnlen(id, RD_WORKLOAD_ID_LEN);
  memcpy(out, WORKLOAD_PREFIX, PREFIX_LEN);
  memcpy(out + PREFIX_LEN, id, n);
  out[PREFIX_LEN + n] = '\0';
}

int rd_page_token_parse_workload(const char *tok, char *id, rd_error_t *err) {
  id[0] = '\0';
  if (tok == NULL || tok[0] == '\0') return RD_OK;
  size_t len = strnlen(tok, RD_PAGE_TOKEN_MAX + 1);
  int ok = len == PREFIX_LEN + RD_WORKLOAD_ID_LEN && memcmp(tok, WORKLOAD_PREFIX, PREFIX_LEN) == 0;
  for (size_t i = PREFIX_LEN; ok && i < len; i++) ok = is_lower_hex(tok[i]);
  if (!ok)
    return rd_error_set(err, RD_EINVAL, "page_token is not a ListWorkloads page token (pass "
                        "next_page_token from the previous reply unchanged, or \"\" to start)");
  memcpy(id, tok + PREFIX_LEN, RD_WORKLOAD_ID_LEN);
  id[RD_WORKLOAD_ID_LEN] = '\0';
  return RD_OK;
}

/* ---- Profiles ---- */

static const char hexdig[] = "0123456789abcdef";

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* The key fields of p as a Profile message (borrowing p's strings): the
 * whole message less what is measured. */
static void key_msg(const rd_profile_t *p, Replayd__V1__Profile *m) {
  rd_profile_msg(m, p);
  m->latency_s = 0;
  m->reps = 0;
  m->items = 0;
  m->source = (char *)protobuf_c_empty_string;
  m->measured_unix = 0;
}

int rd_page_token_profile(const rd_profile_t *p, char *out, rd_error_t *err) {
  Replayd__V1__Profile m;
  key_msg(p, &m);
  size_t n = replayd__v1__profile__get_packed_size(&m);
  if (PREFIX_LEN + 2 * n > RD_PAGE_TOKEN_MAX)
    return rd_error_set(err, RD_EINVAL, "a profile key of %zu bytes is too long for a page "
                        "token", n);
  uint8_t buf[RD_PAGE_TOKEN_MAX / 2];
  replayd__v1__profile__pack(&m, buf);
  memcpy(out, PROFILE_PREFIX, PREFIX_LEN);
  char *o = out + PREFIX_LEN;
  for (size_t i = 0; i < n; i++) {
    *o++ = hexdig[buf[i] >> 4];
    *o++ = hexdig[buf[i] & 15];
  }
  *o = '\0';
  return RD_OK;
}

/* Copy a token's string into dst if it fits. */
static int take(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) return 0;
  memcpy(dst, src, n + 1);
  return 1;
}

int rd_page_token_parse_profile(const char *tok, rd_profile_t *key, int *has_key,
                                rd_error_t *err) {
  memset(key, 0, sizeof *key);
  *has_key = 0;
  if (tok == NULL || tok[0] == '\0') return RD_OK;
  size_t len = strnlen(tok, RD_PAGE_TOKEN_MAX + 1);
  uint8_t buf[RD_PAGE_TOKEN_MAX / 2];
  size_t n = (len - PREFIX_LEN) / 2;
  int ok = len > PREFIX_LEN && len <= RD_PAGE_TOKEN_MAX && (len - PREFIX_LEN) % 2 == 0 &&
           memcmp(tok, PROFILE_PREFIX, PREFIX_LEN) == 0;
  for (size_t i = 0; ok && i < n; i++) {
    int hi = hex_val(tok[PREFIX_LEN + 2 * i]), lo = hex_val(tok[PREFIX_LEN + 2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    if (ok) buf[i] = (uint8_t)(hi << 4 | lo);
  }
  Replayd__V1__Profile *m = ok ? replayd__v1__profile__unpack(NULL, n, buf) : NULL;
  ok = m != NULL;
  if (ok) {
    rd_error_t why;
    rd_error_clear(&why);
    ok = take(key->device_fp, sizeof key->device_fp, m->device) &&
         take(key->shape.algorithm, sizeof key->shape.algorithm, m->algorithm) &&
         take(key->shape.network, sizeof key->shape.network, m->network) &&
         take(key->build, sizeof key->build, m->build) &&
         rd_primitive_parse(m->primitive, &key->primitive, &why) == RD_OK;
    key->threads = m->threads;
    key->shape.batch = m->batch;
    key->shape.capacity = m->capacity;
    key->shape.fanout = m->fanout;
    replayd__v1__profile__free_unpacked(m, NULL);
  }
  /* Only the exact form rd_page_token_profile writes: this also refuses
   * other fields, embedded NULs and non-canonical encodings. */
  if (ok) {
    char again[RD_PAGE_TOKEN_MAX + 1];
    rd_error_t why;
    rd_error_clear(&why);
    ok = rd_page_token_profile(key, again, &why) == RD_OK && strcmp(again, tok) == 0;
  }
  if (!ok) {
    memset(key, 0, sizeof *key);
    return rd_error_set(err, RD_EINVAL, "page_token is not a ListProfiles page token (pass "
                        "next_page_token from the previous reply unchanged, or \"\" to start)");
  }
  *has_key = 1;
  return RD_OK;
}
