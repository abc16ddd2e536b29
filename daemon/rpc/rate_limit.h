/* rate_limit.h - SetRateLimiter: an owner changes a workload's rate
 * limiter (api/replayd.proto, "Flow control").
 *
 * The workload's stored spec gets the new RateLimiterSpec (and, when its
 * hosted learner trains continuously, the same samples_per_insert: one
 * ratio), is decoded and resolved as a registration's would be
 * (spec_pb.h), then stored and applied by the registry
 * (rd_registry_set_limiter): a restart keeps it, and waiting calls the
 * new limits let through run at once.
 */
#ifndef RD_RATE_LIMIT_H
#define RD_RATE_LIMIT_H

#include "handlers.h"
#include "replayd.pb-c.h"

/* rl NULL: none. r answers the Workload as Describe does, or the error:
 * INVALID_ARGUMENT (a bad limiter, naming the field), FAILED_PRECONDITION
 * (no limiter for a continuous learner), NOT_FOUND, INTERNAL (the store). */
void rd_set_rate_limiter(rd_handler_ctx_t *ctx, rd_workload_t *w,
                         const Replayd__V1__RateLimiterSpec *rl, rd_reply_t *r);

#endif
