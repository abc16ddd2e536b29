/* paging.h - pages of the list RPCs (ListWorkloads, ListProfiles; the
 * proto's "Paging" section) and the size bound of every listing reply.
 *
 * Keyset paging: a page token names the last item a page returned, and
 * the next page starts after that key in the listing's order (workloads by
 * id, profiles by their store key). The server keeps no state between
 * pages, and items added or deleted meanwhile never make a page skip or
 * repeat an item that existed throughout.
 *
 * Tokens are opaque to clients. Here they are a kind and version prefix
 * and the key: "w1." + the workload id; "p1." + the lowercase hex of a
 * packed Profile message holding only the key fields. A token is accepted
 * only in the exact form this file writes (so no two strings name one
 * position); anything else is RD_EINVAL.
 *
 * Size: a listing reply also stops before its packed size would exceed
 * the message limit less RD_REPLY_HEADROOM (rd_page_budget), counting each
 * item with rd_pb_field_bytes.
 */
#ifndef RD_PAGING_H
#define RD_PAGING_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "rd_error.h"
#include "registry.h"

#define RD_PAGE_WORKLOADS_DEFAULT 100u /* page_size 0; also ServerInfo's list */
#define RD_PAGE_WORKLOADS_MAX 1000u
#define RD_PAGE_PROFILES_DEFAULT 1000u
#define RD_PAGE_PROFILES_MAX 10000u

/* Longest token accepted or written, bytes without the NUL (a profile
 * key's packed fields are at most about 400 bytes, 800 in hex). */
#define RD_PAGE_TOKEN_MAX 1024

/* Bytes of every reply's limit left unused by a page: slack beyond the
 * exact packed sizes counted. */
#define RD_REPLY_HEADROOM 64u

/* The page size to serve: def for 0, max above max. */
uint32_t rd_page_size(uint32_t asked, uint32_t def, uint32_t max);

/* Bytes a page may pack into under a message limit. */
size_t rd_page_budget(uint32_t max_message_bytes);

/* Bytes a length-delimited field (string, bytes, sub-message) of len
 * bytes adds to a message: tag, length varint, payload. Field numbers
 * below 16 (one-byte tags), as every list field is. */
size_t rd_pb_field_bytes(size_t len);

/* A page being filled under a byte budget. */
typedef struct {
  size_t budget; /* rd_page_budget of the limit */
  size_t used;   /* bytes packed so far: the reply's other fields, then the items */
  size_t items;  /* items taken */
} rd_page_fill_t;

/* Take the next item, of item_bytes in the reply (rd_pb_field_bytes), if
 * it fits together with tail_bytes that a page ending at it adds (its
 * next_page_token field): RD_OK, counted. RD_ETOOBIG if it does not fit:
 * the page ends before it, and with f->items 0 the item alone exceeds the
 * limit. */
int rd_page_take(rd_page_fill_t *f, size_t item_bytes, size_t tail_bytes);

/* The token resuming after workload id: out holds RD_PAGE_TOKEN_MAX + 1. */
void rd_page_token_workload(const char *id, char *out);

/* The workload id a token resumes after (id holds RD_WORKLOAD_ID_LEN + 1).
 * tok "" is the first page: id "" and RD_OK. RD_EINVAL otherwise. */
int rd_page_token_parse_workload(const char *tok, char *id, rd_error_t *err);

/* The token resuming after profile p's key: out holds RD_PAGE_TOKEN_MAX + 1.
 * RD_EINVAL if the key cannot be written (a string too long, which a
 * stored profile never has). */
int rd_page_token_profile(const rd_profile_t *p, char *out, rd_error_t *err);

/* The profile key a token resumes after, in key's key fields (device_fp,
 * primitive, threads, shape, build; the rest zeroed); *has_key = 0 for
 * tok "" (the first page). RD_EINVAL otherwise. */
int rd_page_token_parse_profile(const char *tok, rd_profile_t *key, int *has_key,
                                rd_error_t *err);

#endif
