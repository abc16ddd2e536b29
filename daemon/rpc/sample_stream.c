/* sample_stream.c - SampleStream's messages and batches (sample_stream.h). */
#include "sample_stream.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "pb_check.h"
#include "rate_limiter.h"
#include "replayd.pb-c.h"
#include "sample_reply.h"
#include "tenant_rpc.h"

struct rd_sample_stream {
  void *call;           /* the server's, for rd_call_resume */
  rd_workload_t *w;     /* referenced */
  rd_sample_request_t q;
  uint32_t window;
  uint32_t unacked;     /* batches sampled and not acknowledged */
  uint64_t sent, messages;
  rd_limiter_wait_t wait; /* holds a waiting slot from open to free */
  int waiting;          /* wait is queued: nothing to do until its wake */
  int keys_le;          /* batches carry keys as keys_le (sample_reply.h) */
};

static void stream_wake(rd_limiter_wait_t *w, int status) {
  (void)status; /* rd_sample_stream_next reads it */
  rd_call_resume(((rd_sample_stream_t *)w->arg)->call);
}

/* One client message, checked and unpacked; NULL with r failed. */
static Replayd__V1__SampleStreamRequest *decode(const uint8_t *b, size_t n, uint64_t index,
                                                 rd_reply_t *r) {
  static const uint8_t empty[1];
  if (b == NULL) b = empty;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_pb_check(&replayd__v1__sample_stream_request__descriptor, b, n, &err) != RD_OK) {
    rd_reply_error(r, err.code, "stream message %llu: %s", (unsigned long long)index, err.msg);
    return NULL;
  }
  Replayd__V1__SampleStreamRequest *m = replayd__v1__sample_stream_request__unpack(NULL, n, b);
  if (m == NULL)
    rd_reply_error(r, RD_EINVAL, "stream message %llu is not a decodable "
                   "replayd.v1.SampleStreamRequest", (unsigned long long)index);
  return m;
}

/* A message's acknowledgements and priority updates, in that order. */
static int apply(rd_sample_stream_t *s, const Replayd__V1__SampleStreamRequest *m,
                 rd_reply_t *r) {
  if (m->workload_id[0] != '\0' && strcmp(m->workload_id, s->w->id) != 0) {
    rd_reply_error(r, RD_EINVAL, "one SampleStream serves one workload (%s, not %.64s)", s->w->id,
                   m->workload_id);
    return 0;
  }
  if (m->ack > s->unacked) {
    rd_reply_error(r, RD_EINVAL, "stream message %llu acknowledges %u batches; %u are "
                   "unacknowledged", (unsigned long long)s->messages, m->ack, s->unacked);
    return 0;
  }
  s->unacked -= m->ack;
  if (m->n_keys > 0 || m->n_priorities > 0) {
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_workload_update(s->w, m->n_keys, m->keys, m->n_priorities, m->priorities, NULL,
                                &err);
    if (rc) {
      rd_reply_error(r, rc, "stream message %llu: %s", (unsigned long long)s->messages, err.msg);
      return 0;
    }
  }
  s->messages++;
  return 1;
}

/* The batch and window a stream asks for, within the workload's limits. */
static int check_shape(rd_handler_ctx_t *ctx, const rd_workload_t *w,
                       const Replayd__V1__SampleStreamRequest *m, uint32_t *window,
                       rd_reply_t *r) {
  if (m->batch_size == 0 || m->batch_size > w->max_batch) {
    rd_reply_error(r, m->batch_size ? RD_ETOOBIG : RD_EINVAL, "batch_size %u is outside [1, "
                   "max_batch %u]", m->batch_size, w->max_batch);
    return 0;
  }
  *window = m->window ? m->window : RD_STREAM_WINDOW_DEFAULT;
  if (*window > RD_STREAM_WINDOW_MAX) {
    rd_reply_error(r, RD_EINVAL, "window %u is above %u", *window, RD_STREAM_WINDOW_MAX);
    return 0;
  }
  /* What the window may hold sampled at once: a batch's reply, as
   * rd_workload_sample bounds it, times the window. */
  uint64_t row = rd_schema_row_bytes(&w->table.config.schema);
  uint64_t batch_bytes = (uint64_t)m->batch_size * (3 * sizeof(double) + row);
  uint64_t budget = (uint64_t)ctx->config->max_message_bytes * RD_STREAM_WINDOW_BYTES_FACTOR;
  if (batch_bytes * *window > budget) {
    uint64_t fit = batch_bytes ? budget / batch_bytes : 0;
    rd_reply_error(r, RD_ETOOBIG, "a window of %u batches of %u rows holds %llu bytes, more "
                   "than %u x this server's --max-message-bytes; use a window of at most %llu",
                   *window, m->batch_size, (unsigned long long)(batch_bytes * *window),
                   RD_STREAM_WINDOW_BYTES_FACTOR, (unsigned long long)fit);
    return 0;
  }
  return 1;
}

int rd_sample_stream_open(rd_handler_ctx_t *ctx, const rd_call_info_t *ci, const uint8_t *body,
                          size_t len, rd_sample_stream_t **out, rd_reply_t *r) {
  *out = NULL;
  Replayd__V1__SampleStreamRequest *m = decode(body, len, 0, r);
  if (m == NULL) return 0;
  rd_sample_stream_t *s = NULL;
  uint32_t window = 0;
  rd_error_t err;
  rd_error_clear(&err);
  rd_workload_t *w = rd_auth_workload(ctx, ci->md, m->workload_id, 0, r);
  int ok = w != NULL && check_shape(ctx, w, m, &window, r);
  if (ok && (s = calloc(1, sizeof *s)) == NULL) {
    rd_reply_error(r, RD_ENOMEM, "out of memory opening the stream");
    ok = 0;
  }
  if (ok) {
    s->call = ci->call;
    s->w = w;
    w = NULL;
    s->q.batch = m->batch_size;
    s->q.has_beta = m->beta_opt_case == REPLAYD__V1__SAMPLE_STREAM_REQUEST__BETA_OPT_BETA;
    s->q.beta = m->beta;
    s->q.flags = m->stratified ? RD_SAMPLE_STRATIFIED : 0;
    s->window = window;
    s->keys_le = m->keys_fixed64;
    s->wait.wake = stream_wake;
    s->wait.arg = s;
    int rc = rd_workload_wait_hold(s->w, &s->wait, &err);
    if (rc) {
      rd_reply_error(r, rc, "%s", err.msg);
      ok = 0;
    }
  }
  if (ok) ok = apply(s, m, r);
  replayd__v1__sample_stream_request__free_unpacked(m, NULL);
  if (w) rd_workload_unref(w);
  if (!ok) {
    rd_sample_stream_free(s);
    return 0;
  }
  *out = s;
  return 1;
}

int rd_sample_stream_message(rd_sample_stream_t *s, const uint8_t *body, size_t len,
                             rd_reply_t *r) {
  Replayd__V1__SampleStreamRequest *m = decode(body, len, s->messages, r);
  if (m == NULL) return 0;
  int ok = apply(s, m, r);
  replayd__v1__sample_stream_request__free_unpacked(m, NULL);
  return ok;
}

rd_stream_next_t rd_sample_stream_next(rd_sample_stream_t *s, grpc_byte_buffer **bb,
                                       rd_reply_t *r) {
  if (s->waiting) return RD_STREAM_WAITING;
  /* (A batch queued with credit keeps it: acks only add credit.) */
  if (s->unacked >= s->window) return RD_STREAM_IDLE;
  /* Each batch is charged to the owner's sample rate (tenant.h): past it
   * the stream ends RESOURCE_EXHAUSTED, as a unary Sample is refused. */
  if (!rd_tenant_rpc_rows(s->w, RD_TENANT_SAMPLE, s->q.batch, r)) return RD_STREAM_END;
  rd_sample_reply_t reply;
  memset(&reply, 0, sizeof reply);
  uint64_t size = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_workload_sample_wait(s->w, &s->q, rd_sample_reply_alloc, &reply, &size, &s->wait,
                                   &err);
  if (rc != RD_OK) rd_tenant_rpc_rows_back(s->w, RD_TENANT_SAMPLE, s->q.batch);
  if (rc == RD_LIMIT_QUEUED) {
    rd_sample_reply_free(&reply);
    s->waiting = 1;
    return RD_STREAM_WAITING;
  }
  if (rc != RD_OK) {
    rd_sample_reply_free(&reply);
    rd_reply_error(r, rc, "%s", err.msg);
    return RD_STREAM_END;
  }
  *bb = rd_sample_reply_finish(&reply, size, s->keys_le);
  s->unacked++;
  s->sent++;
  return RD_STREAM_BATCH;
}

void rd_sample_stream_woken(rd_sample_stream_t *s) { s->waiting = 0; }

uint64_t rd_sample_stream_sent(const rd_sample_stream_t *s) { return s->sent; }

void rd_sample_stream_free(rd_sample_stream_t *s) {
  if (s == NULL) return;
  if (s->w != NULL) {
    rd_workload_wait_end(s->w, &s->wait);
    rd_workload_unref(s->w);
  }
  free(s);
}
