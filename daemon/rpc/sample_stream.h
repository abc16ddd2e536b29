/* sample_stream.h - SampleStream: a remote learner's batches on one
 * bidirectional stream (api/replayd.proto, "SampleStream").
 *
 * server.c moves the bytes: it reads the client's messages one at a time
 * and writes one batch at a time. This file is what the stream does. The
 * first message opens it: the token, the batch, the window; an open stream
 * holds one waiting slot of its workload (rate_limiter.h) for its life.
 * Each message may acknowledge batches and update priorities (applied in
 * order). rd_sample_stream_next samples the next batch while fewer than
 * `window` are unacknowledged, through the rate limiter: a held-back batch
 * waits in the limiter's queue, holding no thread, and its wake resumes
 * the call (rd_call_resume), whose thread then asks again. Each batch is
 * encoded as a Sample's reply (sample_reply.h).
 *
 * Threads: every call on one stream comes from its call's
 * completion-queue thread; the wake may come from any thread.
 */
#ifndef RD_SAMPLE_STREAM_H
#define RD_SAMPLE_STREAM_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "handlers.h"

#define RD_STREAM_WINDOW_DEFAULT 4
#define RD_STREAM_WINDOW_MAX 64
/* window x a batch's reply bytes, at most this many --max-message-bytes */
#define RD_STREAM_WINDOW_BYTES_FACTOR 2

typedef struct rd_sample_stream rd_sample_stream_t;

typedef enum {
  RD_STREAM_BATCH = 0, /* *bb holds the next batch */
  RD_STREAM_IDLE,      /* `window` batches are unacknowledged: wait for an ack */
  RD_STREAM_WAITING,   /* the rate limiter holds the batch back: rd_call_resume comes */
  RD_STREAM_END,       /* r holds the status to end the stream with */
} rd_stream_next_t;

/* The first message (body[0, len)): 1 with *out open, or 0 with r failed
 * (INVALID_ARGUMENT, the token's statuses, NOT_FOUND, RESOURCE_EXHAUSTED
 * past the waiting bounds, UNAVAILABLE when draining). */
int rd_sample_stream_open(rd_handler_ctx_t *ctx, const rd_call_info_t *ci, const uint8_t *body,
                          size_t len, rd_sample_stream_t **out, rd_reply_t *r);

/* A later message: 1, or 0 with r failed (the stream ends with it). */
int rd_sample_stream_message(rd_sample_stream_t *s, const uint8_t *body, size_t len,
                             rd_reply_t *r);

rd_stream_next_t rd_sample_stream_next(rd_sample_stream_t *s, grpc_byte_buffer **bb,
                                       rd_reply_t *r);

/* Its wait was woken (the call resumed): the next rd_sample_stream_next
 * runs the grant, or ends the stream with the wait's end. */
void rd_sample_stream_woken(rd_sample_stream_t *s);

/* Batches sent so far (logs, tests). */
uint64_t rd_sample_stream_sent(const rd_sample_stream_t *s);

/* The end: a queued wait leaves its queue, a grant not used goes back, the
 * slot and the workload are released. NULL is a no-op. */
void rd_sample_stream_free(rd_sample_stream_t *s);

#endif
