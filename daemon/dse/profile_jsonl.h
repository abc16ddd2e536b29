/* profile_jsonl.h - one profile as one line of JSON, the format profiles
 * travel between machines in (rd_store_export_profiles / import).
 *
 * A line is one flat object with exactly these members, written in this
 * order (so exports diff well) and accepted in any order:
 *
 *   {"device":"cpu-0123456789abcdef","primitive":"sample","threads":1,
 *    "batch":32,"capacity":100000,"fanout":16,"algorithm":"dqn",
 *    "network":"dqn:4-64-64-2","build":"0.1.0 ...","latency_s":1.25e-06,
 *    "reps":7,"items":100000,"source":"measured","measured_unix":1700000000}
 *
 * Written here rather than with a JSON library: the objects are flat and
 * fixed, the parser is strict (RFC 8259 strings and numbers, no unknown,
 * missing or repeated member, integers where integers belong) and small
 * enough to read, and the daemon gains no dependency. latency_s is written
 * with 17 significant digits, so it reads back bit for bit.
 */
#ifndef RD_PROFILE_JSONL_H
#define RD_PROFILE_JSONL_H

#include <stddef.h>

#include "profile.h"
#include "rd_error.h"

#define RD_PROFILE_JSONL_MAX 2048 /* longest line accepted, without its newline */

/* Write p (which must pass rd_profile_validate) as one line ending in '\n'
 * into buf; *len (may be NULL) receives its length without the NUL.
 * RD_ETOOBIG if cap is too small, RD_EINVAL if p is invalid. */
int rd_profile_jsonl_format(const rd_profile_t *p, char *buf, size_t cap, size_t *len,
                            rd_error_t *err);

/* Parse one line (len bytes, an optional trailing "\n" or "\r\n") into
 * *out and validate it (rd_profile_validate). RD_EINVAL names the member
 * or the position that is wrong; *out is unchanged then. */
int rd_profile_jsonl_parse(const char *line, size_t len, rd_profile_t *out, rd_error_t *err);

/* Check every field of a profile: the key (rd_profile_key_validate), a
 * fingerprint "kind-" + 16 hex digits, primitive, threads, a build of
 * printable ASCII, latency in [RD_PROFILE_LATENCY_MIN_S, RD_PROFILE_LATENCY_MAX_S]
 * (profile.h), reps >= 1, source. RD_EINVAL. */
int rd_profile_validate(const rd_profile_t *p, rd_error_t *err);

#endif
