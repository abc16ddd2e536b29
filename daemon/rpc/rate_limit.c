/* rate_limit.c - SetRateLimiter (rate_limit.h). */
#include "rate_limit.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "messages.h"
#include "spec_pb.h"

/* A copy of rl that the spec's free_unpacked may free (protobuf-c's own
 * allocation, through the wire format); NULL for NULL or out of memory. */
static Replayd__V1__RateLimiterSpec *copy_spec(const Replayd__V1__RateLimiterSpec *rl, int *oom) {
  *oom = 0;
  if (rl == NULL) return NULL;
  size_t len = replayd__v1__rate_limiter_spec__get_packed_size(rl);
  uint8_t *buf = malloc(len ? len : 1);
  Replayd__V1__RateLimiterSpec *c = NULL;
  if (buf != NULL) {
    replayd__v1__rate_limiter_spec__pack(rl, buf);
    c = replayd__v1__rate_limiter_spec__unpack(NULL, len, buf);
  }
  free(buf);
  *oom = c == NULL;
  return c;
}

/* w's stored spec with rl as its rate limiter, decoded and resolved. */
static int respec(rd_handler_ctx_t *ctx, rd_workload_t *w, const Replayd__V1__RateLimiterSpec *rl,
                  Replayd__V1__WorkloadSpec **pb_out, rd_spec_pb_t *s, rd_error_t *err) {
  size_t len = 0;
  uint8_t *bytes = rd_workload_spec_copy(w, &len);
  Replayd__V1__WorkloadSpec *pb = bytes != NULL ? rd_spec_pb_stored(bytes, len) : NULL;
  free(bytes);
  int oom = 0;
  Replayd__V1__RateLimiterSpec *copy = pb != NULL ? copy_spec(rl, &oom) : NULL;
  if (pb == NULL || oom) {
    if (pb) replayd__v1__workload_spec__free_unpacked(pb, NULL);
    return rd_error_set(err, RD_ENOMEM, "out of memory reading workload %s's spec", w->id);
  }
  if (pb->rate_limiter) protobuf_c_message_free_unpacked(&pb->rate_limiter->base, NULL);
  pb->rate_limiter = copy;
  /* One ratio: a continuous learner samples at the limiter's. */
  if (pb->learner != NULL && pb->learner->samples_per_insert > 0 && copy != NULL &&
      copy->samples_per_insert > 0)
    pb->learner->samples_per_insert = copy->samples_per_insert;
  int rc = rd_spec_pb_decode(ctx->config, pb, s, err);
  if (rc) {
    replayd__v1__workload_spec__free_unpacked(pb, NULL);
    return rc;
  }
  *pb_out = pb;
  return RD_OK;
}

void rd_set_rate_limiter(rd_handler_ctx_t *ctx, rd_workload_t *w,
                         const Replayd__V1__RateLimiterSpec *rl, rd_reply_t *r) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc;
  if (rl == NULL && w->pipeline != NULL && rd_pipeline_continuous(w->pipeline)) {
    /* Resolving would give it the learner's limiter back: say no instead. */
    rc = rd_registry_set_limiter(ctx->registry, w, NULL, NULL, 0, &err);
  } else {
    Replayd__V1__WorkloadSpec *pb = NULL;
    rd_spec_pb_t s;
    rc = respec(ctx, w, rl, &pb, &s, &err);
    if (rc == RD_OK) {
      rc = rd_registry_set_limiter(ctx->registry, w, s.config.has_limiter ? &s.config.limiter
                                                                          : NULL,
                                   s.stored, s.stored_len, &err);
      rd_spec_pb_release(&s);
      replayd__v1__workload_spec__free_unpacked(pb, NULL);
    }
  }
  if (rc) {
    rd_reply_error(r, rc, "%s", err.msg);
    return;
  }
  rd_limiter_info_t li;
  rd_workload_limiter_info(w, &li);
  if (li.on)
    rd_log_info("flow", "workload %s: rate limiter min_size_to_sample %u, samples_per_insert %g, "
                "diffs [%g, %g]", w->id, li.cfg.min_size_to_sample, li.cfg.samples_per_insert,
                li.cfg.min_diff, li.cfg.max_diff);
  else
    rd_log_info("flow", "workload %s: no rate limiter", w->id);
  rd_reply_workload(r, w);
}
