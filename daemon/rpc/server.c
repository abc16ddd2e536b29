/* server.c - gRPC core server: completion-queue threads and call states.
 *
 * Each of the N threads owns one completion queue and keeps, on it, one
 * request posted for every registered method plus one catch-all request
 * (grpc_server_request_call) so that a call to an unknown method is
 * answered UNIMPLEMENTED at once instead of hanging until its deadline.
 * When a request completes, the thread posts a fresh one for the same
 * method first, then serves the call, so the server never stops accepting.
 *
 * A call is a small state machine:
 *   unary:   NEW -> (handler) -> FINISHING -> freed
 *   train:   NEW -> (handler starts the request; no batch outstanding, no
 *            thread touches the call) -> (a pipeline thread) FINISHING -> freed
 *   stream:  NEW -> READING <-> (handler per message) -> FINISHING -> freed
 *   parked:  (handler: its wait queued, RD_REPLY_PARKED) -> the same request
 *            again when the wait is woken (a unary call, an Insert message)
 *   sample stream: NEW -> STREAM (one read and one write outstanding at
 *            most, wakes of its rate limiter) -> FINISHING -> freed
 *   unknown: NEW -> FINISHING (UNIMPLEMENTED) -> freed
 * One thread at a time moves a call on: its handler's, or its
 * completion-queue thread's when a batch completes. A tag is the call's
 * address with the kind of batch in its low bits (MAIN, CLOSE, WAKE, SEND,
 * RECV), and a call is freed when its references are gone: one for its
 * flow, one for each batch outstanding. A stream reads one message at a
 * time: the receive window bounds what a client can queue.
 *
 * Parked calls (docs/architecture.md, "Flow control"). A call that must
 * wait for a rate limiter gives core its wait (rd_call_info_t.wait); just
 * before core queues it (the wait's prepare), the server posts
 * RECV_CLOSE_ON_SERVER so that the client's cancel and the deadline (gRPC
 * cancels the call) come back as a CLOSE event, and keeps the request's
 * bytes. No thread waits. The wait's wake starts an empty batch (WAKE),
 * which gRPC completes on the call's own queue at once: that thread runs
 * the same request again, and the handler finds its grant (or the end:
 * NOT_FOUND on delete, UNAVAILABLE on drain). A CLOSE first takes the wait
 * out of its queue and frees the call. The same two primitives serve any
 * call that must wait for another thread (rd_call_resume, rd_call_reply).
 */
#include "server.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jobs.h"
#include "log.h"
#include "rd_clock.h"
#include "rpc_body.h"
#include "tls.h"
#include "sample_stream.h"
#include "durability.h"

#define RD_MAX_THREADS 64

/* The job queues behind rd_method_run's queued classes: placements one at
 * a time (two would measure each other), control-plane writes two at a
 * time; each bounded in waiting calls and, together, in request bytes. */
#define PLACEMENT_THREADS 1
#define PLACEMENT_WAITING 16
#define CONTROL_THREADS 2
#define CONTROL_WAITING 32
#define QUEUED_BYTES_FACTOR 2

/* Inserts (InsertBatch, and each message of an Insert stream) are decoded
 * and applied on --ingest-threads runners at this much lower a priority
 * (nice, per thread): the completion-queue threads only move bytes and
 * dispatch, so a flood of actors' inserts takes what CPU is left after
 * samples, updates and train-steps instead of queueing them behind itself.
 * CFS weight 110 against 1024: inserts still get about a tenth of a
 * contended CPU, never nothing. A stream has at most one message waiting,
 * so INGEST_WAITING bounds the queue by the streams; past it (or past the
 * queued-bytes budget) a message is applied on the completion-queue thread
 * as before, never refused. */
#define INGEST_NICE 10
#define INGEST_WAITING 8192

/* A parked call keeps its request's bytes to run it again: all of them
 * together at most this many --max-message-bytes (past it a call that
 * would wait is RESOURCE_EXHAUSTED), whatever the waiting-call bounds. */
#define PARKED_BYTES_FACTOR 4

typedef enum { ST_NEW, ST_READING, ST_STREAM, ST_FINISHING } call_state_t;

/* What a completed batch was (the tag's low bits; a call is 16-aligned). */
enum {
  TAG_MAIN = 0, /* the call's flow: the request, an Insert read, the finish */
  TAG_CLOSE,    /* RECV_CLOSE_ON_SERVER of a parked call: the client left */
  TAG_WAKE,     /* an empty batch: rd_call_resume */
  TAG_SEND,     /* a sample stream's batch written */
  TAG_RECV,     /* a sample stream's client message read */
  TAG_KINDS = 8
};

struct rd_server;

typedef struct call {
  struct rd_server *srv;
  bool active;                 /* counted in calls_active */
  struct worker *wk;
  int method;                  /* rd_method_t, or -1 for the catch-all */
  call_state_t state;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details;   /* catch-all only */
  grpc_byte_buffer *payload;   /* unary request / stream message */
  grpc_byte_buffer *reply;
  grpc_slice status_details;
  int cancelled;
  rd_insert_stream_t stream;
  /* References: the flow's (whoever moves the call on), and one per batch
   * outstanding beyond the flow's own (CLOSE, WAKE, SEND, RECV). */
  atomic_int refs;
  /* grpc_call_start_batch on one call needs its callers serialized: the
   * call's own thread and a waker (rd_call_resume). */
  pthread_mutex_t batch_mu;
  /* Waiting for a rate limiter (rd_call_info_t.wait). */
  rd_limiter_wait_t wait;
  rd_workload_t *wait_on;      /* a reference, from rd_call_wait_on */
  grpc_slice body;             /* the request being handled; kept while parked */
  bool has_body;
  size_t parked_bytes;         /* body's bytes counted in the server's parked_bytes */
  bool watching;               /* RECV_CLOSE_ON_SERVER posted (by the wait's prepare) */
  bool closed;                 /* ... and completed: the client is gone */
  /* A sample stream (sample_stream.h). */
  rd_sample_stream_t *sstream;
  rd_export_stream_t *xstream; /* an ExportStream's, once its file is written */
  rd_import_stream_t *istream; /* an ImportStream's, from its first message */
  bool md_sent;                /* initial metadata went with the first batch */
  bool send_pending;
  grpc_byte_buffer *sending;
  bool ended;                  /* its end is decided: no more reads, writes or batches */
  bool finish_deferred;        /* ... and its status goes once the write in flight is done */
  rd_reply_t end;
  struct call *s_prev, *s_next; /* in the server's list of open streams */
  bool listed;
} call_t;

typedef struct worker {
  struct rd_server *srv;
  grpc_completion_queue *cq;
  pthread_t thread;
} worker_t;

struct rd_server {
  grpc_server *server;
  rd_jobs_t *jobs[RD_RUN_QUEUES]; /* the queues of rd_method_run's queued classes */
  const rd_config_t *cfg;
  rd_handler_ctx_t *ctx;
  void *methods[RD_M_COUNT];
  worker_t workers[RD_MAX_THREADS];
  uint32_t n_workers;
  atomic_bool shutting_down;
  /* Set before grpc_server_cancel_all_calls: from then on no call gets a
   * new batch but the ones that wind it down. A call whose batch completes
   * is freed instead, so nothing can reach a completion queue that stop is
   * about to shut down (which waits until every call is freed). */
  atomic_bool cancelling;
  atomic_uint_fast64_t calls_started;
  atomic_int calls_active; /* matched calls not yet freed */
  /* Request bytes held by unary calls waiting on a job queue: at most
   * QUEUED_BYTES_FACTOR messages' worth, whatever the queues' lengths. */
  atomic_size_t queued_bytes;
  atomic_size_t parked_bytes; /* request bytes parked calls keep (PARKED_BYTES_FACTOR) */
  grpc_completion_queue *shutdown_cq;
  /* Open sample streams: a drain ends them (UNAVAILABLE) at once. */
  pthread_mutex_t streams_mu;
  call_t *streams;
  bool draining; /* under streams_mu */
};

static void *tag_of(call_t *c, int kind) { return (void *)((uintptr_t)c | (uintptr_t)kind); }

/* ------------------------------------------------------------------ */
/* Posting requests                                                    */
/* ------------------------------------------------------------------ */

static int can_wait(int method) {
  return method == RD_M_SAMPLE || method == RD_M_INSERT_BATCH || method == RD_M_INSERT;
}

static int wait_prepare(rd_limiter_wait_t *w, rd_error_t *err);
static void wait_wake(rd_limiter_wait_t *w, int status);

static void post_request(worker_t *wk, int method) {
  rd_server_t *s = wk->srv;
  if (atomic_load(&s->shutting_down)) return;
  call_t *c = calloc(1, sizeof *c);
  if (c == NULL) {
    rd_log_error("server", "out of memory posting a request; method %d loses a slot", method);
    return;
  }
  c->srv = s;
  c->wk = wk;
  c->method = method;
  c->state = ST_NEW;
  atomic_init(&c->refs, 1);
  pthread_mutex_init(&c->batch_mu, NULL);
  c->wait.prepare = wait_prepare;
  c->wait.wake = wait_wake;
  c->wait.arg = c;
  grpc_metadata_array_init(&c->md);
  grpc_call_error e;
  const int streaming =
      method == RD_M_INSERT || method == RD_M_SAMPLE_STREAM || method == RD_M_IMPORT_STREAM;
  if (method >= 0) {
    e = grpc_server_request_registered_call(s->server, s->methods[method], &c->call, &c->deadline,
                                            &c->md, streaming ? NULL : &c->payload, wk->cq,
                                            wk->cq, tag_of(c, TAG_MAIN));
  } else {
    grpc_call_details_init(&c->details);
    e = grpc_server_request_call(s->server, &c->call, &c->details, &c->md, wk->cq, wk->cq,
                                 tag_of(c, TAG_MAIN));
  }
  if (e != GRPC_CALL_OK) {
    rd_log_error("server", "request for method %d failed: %d", method, (int)e);
    grpc_metadata_array_destroy(&c->md);
    if (method < 0) grpc_call_details_destroy(&c->details);
    pthread_mutex_destroy(&c->batch_mu);
    free(c);
  }
}

/* A parked call's body no longer counts against the parked bytes. */
static void body_unpark(call_t *c) {
  if (c->parked_bytes) atomic_fetch_sub(&c->srv->parked_bytes, c->parked_bytes);
  c->parked_bytes = 0;
}

static void body_drop(call_t *c) {
  body_unpark(c);
  if (c->has_body) grpc_slice_unref(c->body);
  c->has_body = false;
}

static void streams_unlist(call_t *c);

static void call_free(call_t *c) {
  rd_server_t *s = c->srv;
  if (c->listed) streams_unlist(c);
  rd_sample_stream_free(c->sstream);
  rd_export_stream_free(c->xstream);
  rd_import_stream_free(c->istream); /* its temporary file goes with it */
  if (c->wait_on) {
    rd_workload_wait_release(c->wait_on, &c->wait); /* never queued past its call */
    rd_workload_unref(c->wait_on);
  }
  body_drop(c);
  if (c->active) atomic_fetch_sub(&s->calls_active, 1);
  if (c->call) grpc_call_unref(c->call);
  grpc_metadata_array_destroy(&c->md);
  if (c->method < 0) grpc_call_details_destroy(&c->details);
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->reply) grpc_byte_buffer_destroy(c->reply);
  if (c->sending) grpc_byte_buffer_destroy(c->sending);
  if (c->state == ST_FINISHING) grpc_slice_unref(c->status_details);
  if (c->method == RD_M_INSERT) rd_insert_stream_release(&c->stream);
  /* A waker (rd_call_resume) may still be returning from its batch. */
  pthread_mutex_lock(&c->batch_mu);
  pthread_mutex_unlock(&c->batch_mu);
  pthread_mutex_destroy(&c->batch_mu);
  free(c);
}

/* Drop one reference: the flow's, or a batch's that completed. */
static void call_release(call_t *c) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) call_free(c);
}

/* Start a batch tagged kind. A batch other than the flow's own (MAIN)
 * takes a reference, which its completion gives back. 0 if gRPC refused. */
static int call_start(call_t *c, const grpc_op *ops, size_t n, int kind, const char *what) {
  if (kind != TAG_MAIN) atomic_fetch_add(&c->refs, 1);
  pthread_mutex_lock(&c->batch_mu);
  grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag_of(c, kind), NULL);
  pthread_mutex_unlock(&c->batch_mu);
  if (e == GRPC_CALL_OK) return 1;
  rd_log_error("server", "%s failed: %d", what, (int)e);
  if (kind != TAG_MAIN) atomic_fetch_sub(&c->refs, 1);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Finishing a call                                                    */
/* ------------------------------------------------------------------ */

/* Send initial metadata, the reply (if OK), the status, and wait for the
 * client's close: the last batch of every call. Takes r->reply and the
 * flow's reference. */
static void finish(call_t *c, rd_reply_t *r) {
  if (atomic_load(&c->srv->cancelling)) { /* the client already got CANCELLED */
    if (r->reply != NULL) grpc_byte_buffer_destroy(r->reply);
    r->reply = NULL;
    call_release(c);
    return;
  }
  grpc_op ops[4];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!c->md_sent) {
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].data.send_initial_metadata.count = 0;
    n++;
  }
  if (r->status == GRPC_STATUS_OK && r->reply != NULL) {
    c->reply = r->reply;
    r->reply = NULL;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = c->reply;
    n++;
  } else if (r->reply != NULL) {
    grpc_byte_buffer_destroy(r->reply);
    r->reply = NULL;
  }
  c->status_details = grpc_slice_from_copied_string(r->message);
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.trailing_metadata_count = 0;
  ops[n].data.send_status_from_server.status = r->status;
  ops[n].data.send_status_from_server.status_details = &c->status_details;
  n++;
  if (!c->watching) { /* a parked call's watch receives the close already */
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
    n++;
  }
  c->state = ST_FINISHING;
  if (!call_start(c, ops, n, TAG_MAIN, "finishing a call")) call_release(c);
}

static void start_read(call_t *c) {
  if (atomic_load(&c->srv->cancelling)) {
    call_release(c);
    return;
  }
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &c->payload;
  c->state = ST_READING;
  if (!call_start(c, &op, 1, TAG_MAIN, "reading a stream")) call_release(c);
}

/* The request's bytes (rpc_body.h); on a bad or oversized body, r holds
 * the status to finish with and 0 is returned. */
static int read_body(call_t *c, grpc_byte_buffer *bb, grpc_slice *body, rd_reply_t *r) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_rpc_body(bb, c->srv->cfg->max_message_bytes, body, &err);
  if (rc == RD_OK) return 1;
  rd_reply_error(r, rc, "%s", err.msg);
  return 0;
}

/* read_body of a stream's message (c->payload), which is then dropped: the
 * stream's next read fills it again. */
static int take_message(call_t *c, grpc_slice *body, rd_reply_t *r) {
  int readable = read_body(c, c->payload, body, r);
  grpc_byte_buffer_destroy(c->payload);
  c->payload = NULL;
  return readable;
}

/* A call deadline as CLOCK_MONOTONIC seconds; 0 for none. */
static double deadline_mono(gpr_timespec deadline) {
  gpr_timespec now = gpr_now(deadline.clock_type);
  if (gpr_time_cmp(deadline, gpr_inf_future(deadline.clock_type)) == 0) return 0;
  double left = gpr_timespec_to_micros(gpr_time_sub(deadline, now)) * 1e-6;
  double t = rd_clock_now() + left;
  return t > 0 ? t : 1e-9; /* already past: still a deadline, not "none" */
}

/* What a handler is told of the call. */
static rd_call_info_t call_info(call_t *c) {
  rd_call_info_t ci = {&c->md, deadline_mono(c->deadline), c,
                       c->method == RD_M_INSERT ? &c->stream : NULL,
                       can_wait(c->method) ? &c->wait : NULL,
                       c->method == RD_M_EXPORT_STREAM ? &c->xstream : NULL};
  return ci;
}

/* A reply a handler promised for later (RD_REPLY_LATER: TrainStep), from
 * the thread that has it. No other thread touches the call meanwhile. */
void rd_call_reply(void *call, rd_reply_t *r) { finish((call_t *)call, r); }

/* ------------------------------------------------------------------ */
/* Parked calls                                                        */
/* ------------------------------------------------------------------ */

void rd_call_wait_on(void *call, rd_workload_t *w) {
  call_t *c = call;
  if (c->wait_on != NULL) return;
  atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
  c->wait_on = w;
}

void rd_call_resume(void *call) {
  call_t *c = call;
  /* The wake's reference keeps c alive until its completion. */
  if (!call_start(c, NULL, 0, TAG_WAKE, "resuming a parked call"))
    rd_log_error("server", "a parked call could not be resumed; it ends at its deadline");
}

/* core queues the call's wait (under the workload's lock, on the thread
 * handling the call): watch for the client's leaving while it waits, and
 * keep the request to run it again. */
static int wait_prepare(rd_limiter_wait_t *w, rd_error_t *err) {
  call_t *c = w->arg;
  rd_server_t *s = c->srv;
  if (!c->has_body)
    return rd_error_set(err, RD_EINTERNAL, "a call without its request cannot wait");
  size_t len = GRPC_SLICE_LENGTH(c->body) + 1; /* + 1: an empty request counts */
  size_t budget = (size_t)s->cfg->max_message_bytes * PARKED_BYTES_FACTOR;
  if (atomic_fetch_add(&s->parked_bytes, len) + len > budget) {
    atomic_fetch_sub(&s->parked_bytes, len);
    return rd_error_set(err, RD_ETOOBIG, "calls waiting for a rate limiter already hold %zu "
                        "bytes of requests; retry later", budget);
  }
  if (!c->watching) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    if (!call_start(c, &op, 1, TAG_CLOSE, "watching a parked call")) {
      atomic_fetch_sub(&s->parked_bytes, len);
      return rd_error_set(err, RD_EINTERNAL, "the call cannot wait (gRPC refused to watch it)");
    }
    c->watching = true;
  }
  c->parked_bytes = len;
  return RD_OK;
}

static void wait_wake(rd_limiter_wait_t *w, int status) {
  (void)status; /* the handler reads it when it runs again */
  rd_call_resume(w->arg);
}

static void stream_pump(call_t *c);
static void stream_end(call_t *c, rd_reply_t *r);

/* The handler's answer for a call, by the thread that ran it. PARKED: the
 * call waits; its body stays for the next run and nothing else here may
 * touch it (its wake may already be running on another thread). */
static void handled(call_t *c, rd_reply_when_t when, rd_reply_t *r) {
  /* PARKED, and LATER: the call was handed to another thread (a learner
   * finishing a TrainStep, the journal's syncer acknowledging an
   * insert), which may have finished and freed it already. Its body goes
   * with it (call_free drops it). */
  if (when == RD_REPLY_PARKED || when == RD_REPLY_LATER) return;
  body_drop(c);
  if (when == RD_REPLY_NOW) {
    finish(c, r);
  } else if (when == RD_REPLY_MORE) {
    start_read(c);
  } else if (when == RD_REPLY_STREAM) {
    /* An ExportStream: its chunks, one write at a time, all from the
     * call's completion-queue thread (its WAKE), as a sample stream's; a
     * job runner writing the first would race the thread that sees it sent. */
    c->state = ST_STREAM;
    if (!call_start(c, NULL, 0, TAG_WAKE, "starting an export stream")) stream_end(c, NULL);
  }
}

/* Run the call's request (c->body, taken) through its handler. */
static void run_body(call_t *c, grpc_slice body) {
  c->body = body;
  c->has_body = true;
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  rd_call_info_t ci = call_info(c);
  rd_reply_when_t when = rd_handle(c->srv->ctx, (rd_method_t)c->method, &ci,
                                   GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), &r);
  handled(c, when, &r);
}

/* A parked call's wake: its request again (the handler finds its grant, or
 * the end), unless the call is ending anyway. */
static void parked_wake(call_t *c) {
  if (c->closed || atomic_load(&c->srv->cancelling)) {
    /* The CLOSE took it out of its queue already, or the wait was woken
     * before the CLOSE came: give the grant back and end without a reply
     * nobody would read. */
    if (c->closed && !c->has_body) return; /* its CLOSE ended it */
    if (c->wait_on) rd_workload_wait_release(c->wait_on, &c->wait);
    body_drop(c);
    call_release(c);
    return;
  }
  if (!c->has_body) return; /* not parked (a stale wake) */
  body_unpark(c);
  grpc_slice body = c->body;
  c->has_body = false;
  run_body(c, body);
}

/* The client of a parked call left (cancelled, deadline, drain). */
static void parked_close(call_t *c) {
  c->closed = true;
  if (c->wait_on != NULL && rd_workload_wait_cancel(c->wait_on, &c->wait)) {
    body_drop(c); /* it was queued: no wake comes, the flow ends here */
    call_release(c);
  }
  /* Otherwise its wake is on its way (parked_wake ends it) or it runs. */
}

/* ------------------------------------------------------------------ */
/* Job queues                                                          */
/* ------------------------------------------------------------------ */

/* A call served on a job queue (rd_method_run): its body travels with it;
 * no thread touches the call until the job finishes it. */
typedef struct {
  call_t *call;
  grpc_slice body;
} queued_t;

static void run_queued(void *arg, int cancelled) {
  queued_t *q = arg;
  call_t *c = q->call;
  grpc_slice body = q->body;
  free(q);
  atomic_fetch_sub(&c->srv->queued_bytes, GRPC_SLICE_LENGTH(body));
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  double deadline = deadline_mono(c->deadline);
  if (cancelled) {
    rd_reply_error(&r, RD_ECANCELED, "the server is shutting down");
  } else if (deadline > 0 && rd_clock_now() >= deadline) {
    rd_reply_error(&r, RD_ETIMEDOUT, "the deadline passed while the call waited for a worker");
  } else {
    run_body(c, body);
    return;
  }
  grpc_slice_unref(body);
  finish(c, &r);
}

/* Hand the call to its queue; on refusal r holds the status and 0 is
 * returned (the body is released either way by whoever owns it). */
static int enqueue(call_t *c, rd_jobs_t *jobs, grpc_slice body, rd_reply_t *r) {
  rd_server_t *s = c->srv;
  size_t len = GRPC_SLICE_LENGTH(body);
  size_t budget = (size_t)s->cfg->max_message_bytes * QUEUED_BYTES_FACTOR;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = RD_OK;
  queued_t *q = NULL;
  if (atomic_fetch_add(&s->queued_bytes, len) + len > budget)
    rc = rd_error_set(&err, RD_ETOOBIG, "calls waiting for a worker already hold %zu bytes of "
                      "requests; retry later", budget);
  else if ((q = malloc(sizeof *q)) == NULL)
    rc = rd_error_set(&err, RD_ENOMEM, "out of memory queueing the call");
  if (rc == RD_OK) {
    q->call = c;
    q->body = body;
    rc = rd_jobs_submit(jobs, run_queued, q, &err);
  }
  if (rc == RD_OK) return 1;
  atomic_fetch_sub(&s->queued_bytes, len);
  free(q);
  /* A full queue is one of this server's limits, not a conflict to retry
   * at once (jobs.h says RD_EBUSY). */
  rd_reply_error(r, rc == RD_EBUSY ? RD_ETOOBIG : rc, "%s", err.msg);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Sample streams                                                      */
/* ------------------------------------------------------------------ */

static void streams_unlist(call_t *c) {
  rd_server_t *s = c->srv;
  pthread_mutex_lock(&s->streams_mu);
  if (c->s_prev) c->s_prev->s_next = c->s_next;
  else s->streams = c->s_next;
  if (c->s_next) c->s_next->s_prev = c->s_prev;
  c->listed = false;
  pthread_mutex_unlock(&s->streams_mu);
}

/* 0 once the server drains: a stream opened now would only be ended. */
static int streams_list(call_t *c) {
  rd_server_t *s = c->srv;
  pthread_mutex_lock(&s->streams_mu);
  int ok = !s->draining;
  if (ok) {
    c->s_prev = NULL;
    c->s_next = s->streams;
    if (s->streams) s->streams->s_prev = c;
    s->streams = c;
    c->listed = true;
  }
  pthread_mutex_unlock(&s->streams_mu);
  return ok;
}

static void stream_end(call_t *c, rd_reply_t *r);

/* Read the client's next message; a stream that cannot (the server winds
 * calls down) ends here, as its read would have failed. */
static void stream_read(call_t *c) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &c->payload;
  if (atomic_load(&c->srv->cancelling) ||
      !call_start(c, &op, 1, TAG_RECV, "reading a sample stream"))
    stream_end(c, NULL);
}

/* The stream's end is decided: release what it holds now; its status goes
 * when no write is in flight (r NULL: the call is gone, no status). */
static void stream_end(call_t *c, rd_reply_t *r) {
  if (c->ended) return;
  c->ended = true;
  rd_sample_stream_free(c->sstream); /* its wait leaves the queue; a grant goes back */
  c->sstream = NULL;
  rd_export_stream_free(c->xstream);
  c->xstream = NULL;
  if (r == NULL) {
    call_release(c); /* the flow's */
  } else if (c->send_pending) {
    c->end = *r;
    c->finish_deferred = true;
  } else {
    finish(c, r);
  }
}

/* An ExportStream's next chunk, as a sample stream's next batch. */
static rd_stream_next_t export_next(call_t *c, grpc_byte_buffer **bb, rd_reply_t *r) {
  int k = rd_export_stream_next(c->xstream, bb, r);
  if (k > 0) return RD_STREAM_BATCH;
  if (k == 0) rd_reply_status(r, GRPC_STATUS_OK, "%s", "");
  return RD_STREAM_END;
}

/* An export stream has no read outstanding that its client's leaving
 * would fail, and a write held back by flow control may wait for ever:
 * watch for the close (CLOSE ends it), on its first WAKE. */
static void export_watch(call_t *c) {
  if (c->watching || c->ended) return;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &c->cancelled;
  if (call_start(c, &op, 1, TAG_CLOSE, "watching an export stream")) c->watching = true;
}

/* Write batches (a sample stream's while it has credit; an export's
 * chunks) one at a time. An export stream has no read outstanding: where
 * it stops it ends (the sample stream's read ends it). */
static void stream_pump(call_t *c) {
  while (!c->ended && !c->send_pending && (c->sstream != NULL || c->xstream != NULL)) {
    if (atomic_load(&c->srv->cancelling)) {
      if (c->xstream != NULL) stream_end(c, NULL);
      return;
    }
    grpc_byte_buffer *bb = NULL;
    rd_reply_t r;
    memset(&r, 0, sizeof r);
    switch (c->xstream != NULL ? export_next(c, &bb, &r)
                               : rd_sample_stream_next(c->sstream, &bb, &r)) {
    case RD_STREAM_BATCH: {
      grpc_op ops[2];
      size_t n = 0;
      memset(ops, 0, sizeof ops);
      if (!c->md_sent) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        n++;
      }
      ops[n].op = GRPC_OP_SEND_MESSAGE;
      ops[n].data.send_message.send_message = bb;
      n++;
      c->sending = bb;
      if (!call_start(c, ops, n, TAG_SEND, "writing a sample stream")) {
        c->sending = NULL;
        grpc_byte_buffer_destroy(bb);
        rd_reply_status(&r, GRPC_STATUS_INTERNAL, "the server could not write the stream");
        stream_end(c, &r);
        return;
      }
      c->md_sent = true;
      c->send_pending = true;
      return;
    }
    case RD_STREAM_END:
      stream_end(c, &r);
      return;
    default: /* no credit: an ack comes; held back: its wake comes */
      return;
    }
  }
}

/* A client message of the stream (RECV): the first opens it. */
static void stream_recv(call_t *c, bool ok) {
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  if (c->ended) {
    if (c->payload) grpc_byte_buffer_destroy(c->payload);
    c->payload = NULL;
    return;
  }
  if (!ok) { /* cancelled, deadline, drain, or the connection went */
    stream_end(c, NULL);
    return;
  }
  if (c->payload == NULL) { /* the client half-closed: it is done */
    if (c->sstream == NULL)
      rd_reply_error(&r, RD_EINVAL, "the SampleStream closed before its first message");
    stream_end(c, &r);
    return;
  }
  grpc_slice body;
  if (!take_message(c, &body, &r)) {
    stream_end(c, &r);
    return;
  }
  int good;
  if (c->sstream == NULL) {
    rd_call_info_t ci = call_info(c);
    good = rd_sample_stream_open(c->srv->ctx, &ci, GRPC_SLICE_START_PTR(body),
                                 GRPC_SLICE_LENGTH(body), &c->sstream, &r);
    if (good && !streams_list(c)) {
      rd_reply_error(&r, RD_ECANCELED, "the server is shutting down");
      good = 0;
    }
  } else {
    good = rd_sample_stream_message(c->sstream, GRPC_SLICE_START_PTR(body),
                                    GRPC_SLICE_LENGTH(body), &r);
  }
  grpc_slice_unref(body);
  if (!good) {
    stream_end(c, &r);
    return;
  }
  stream_read(c);
  stream_pump(c);
}

static void stream_sent(call_t *c, bool ok) {
  c->send_pending = false;
  if (c->sending) grpc_byte_buffer_destroy(c->sending);
  c->sending = NULL;
  if (c->finish_deferred) {
    c->finish_deferred = false;
    finish(c, &c->end);
  } else if (ok) {
    stream_pump(c);
  } else if (c->xstream != NULL) { /* the client left an export: no read to end it */
    stream_end(c, NULL);
  }
  /* !ok: the call is over; a sample stream's read fails too and ends it. */
}

/* ------------------------------------------------------------------ */
/* Serving events                                                      */
/* ------------------------------------------------------------------ */

static void stream_message(call_t *c);
static void stream_message_job(void *arg, int cancelled);
static void import_step_queue(call_t *c);

static void on_new(call_t *c, bool ok) {
  rd_server_t *s = c->srv;
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  if (!ok) { /* the server is shutting down: the request never matched */
    call_release(c);
    return;
  }
  atomic_fetch_add(&s->calls_started, 1);
  atomic_fetch_add(&s->calls_active, 1);
  c->active = true;
  post_request(c->wk, c->method); /* keep one request per method posted */
  if (c->method < 0) {
    char *m = grpc_slice_to_c_string(c->details.method);
    rd_reply_status(&r, GRPC_STATUS_UNIMPLEMENTED, "method %s is not served by replayd", m);
    gpr_free(m);
    finish(c, &r);
  } else if (c->method == RD_M_INSERT || c->method == RD_M_IMPORT_STREAM) {
    start_read(c);
  } else if (c->method == RD_M_SAMPLE_STREAM) {
    c->state = ST_STREAM; /* the flow's reference stays until stream_end */
    stream_read(c);
  } else {
    grpc_slice body;
    if (!read_body(c, c->payload, &body, &r)) {
      finish(c, &r);
      return;
    }
    rd_run_t run = rd_method_run((rd_method_t)c->method);
    rd_jobs_t *queue = run >= RD_RUN_QUEUE_FIRST ? s->jobs[run - RD_RUN_QUEUE_FIRST] : NULL;
    if (queue != NULL && enqueue(c, queue, body, &r)) {
      /* the call waits, touched by no thread, until run_queued */
    } else if (queue != NULL && run != RD_RUN_INGEST) { /* refused: r says why */
      grpc_slice_unref(body);
      finish(c, &r);
    } else { /* inline, TrainStep's start, or an insert its full queue left here */
      run_body(c, body);
    }
  }
}

static void on_event(call_t *c, int kind, bool ok) {
  /* The batch that completed was started under batch_mu, after what the
   * starting thread (a job runner, a waker) wrote to c: taking the mutex
   * orders those writes before this thread's reads in a way ThreadSanitizer
   * sees too (gRPC orders a batch before its completion inside libgrpc,
   * which is not instrumented). Uncontended: one lock per event. */
  pthread_mutex_lock(&c->batch_mu);
  pthread_mutex_unlock(&c->batch_mu);
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  switch (kind) {
  case TAG_CLOSE:
    if (c->method == RD_M_EXPORT_STREAM) {
      if (!c->ended) stream_end(c, NULL); /* the client left before the last chunk */
    } else {
      parked_close(c);
    }
    call_release(c);
    return;
  case TAG_WAKE:
    if (c->method == RD_M_SAMPLE_STREAM) {
      if (c->sstream != NULL) rd_sample_stream_woken(c->sstream);
      stream_pump(c);
    } else if (c->method == RD_M_EXPORT_STREAM) {
      export_watch(c);
      stream_pump(c);
    } else {
      parked_wake(c);
    }
    call_release(c);
    return;
  case TAG_SEND:
    stream_sent(c, ok);
    call_release(c);
    return;
  case TAG_RECV:
    stream_recv(c, ok);
    call_release(c);
    return;
  default:
    break;
  }
  switch (c->state) {
  case ST_NEW:
    on_new(c, ok);
    return;
  case ST_READING: {
    if (!ok) { /* the call broke (cancelled, deadline): finish to clean up */
      rd_reply_status(&r, GRPC_STATUS_CANCELLED, "stream ended abnormally");
      finish(c, &r);
      return;
    }
    if (c->method == RD_M_IMPORT_STREAM) {
      import_step_queue(c);
      return;
    }
    if (c->payload == NULL) { /* the client half-closed */
      if (rd_handle_insert_end(&c->stream, c, &r) == RD_REPLY_NOW) finish(c, &r);
      return; /* else: finished once its journal record is on disk */
    }
    rd_jobs_t *ingest = c->srv->jobs[RD_RUN_INGEST - RD_RUN_QUEUE_FIRST];
    if (ingest == NULL || rd_jobs_submit(ingest, stream_message_job, c, NULL) != RD_OK)
      stream_message(c); /* no ingest threads, or their queue is full */
    return;
  }
  case ST_STREAM: /* a sample stream's batches come tagged RECV/SEND/WAKE */
    return;
  case ST_FINISHING:
    call_release(c);
    return;
  }
}

/* One message of an Insert stream (c->payload): applied, then the next one
 * is read, or the call finishes with the handler's status. */
static void stream_message(call_t *c) {
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  grpc_slice body;
  if (!take_message(c, &body, &r)) {
    finish(c, &r);
    return;
  }
  run_body(c, body);
}

static void stream_message_job(void *arg, int cancelled) {
  call_t *c = arg;
  if (!cancelled) {
    stream_message(c);
    return;
  }
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  rd_reply_error(&r, RD_ECANCELED, "the server is shutting down; %" PRIu64 " rows of this "
                 "stream were inserted", c->stream.inserted);
  finish(c, &r);
}

/* An ImportStream's message (c->payload) or, NULL, its end: written to
 * its temporary file, or checked and imported (durability.h). */
static void import_step(call_t *c) {
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  rd_call_info_t ci = call_info(c);
  rd_reply_when_t when;
  if (c->payload == NULL) {
    when = rd_import_stream_end(c->srv->ctx, &ci, c->istream, &r);
  } else {
    grpc_slice body;
    if (!take_message(c, &body, &r)) {
      finish(c, &r);
      return;
    }
    when = rd_import_stream_message(c->srv->ctx, &ci, &c->istream, GRPC_SLICE_START_PTR(body),
                                    GRPC_SLICE_LENGTH(body), &r);
    grpc_slice_unref(body);
  }
  if (when == RD_REPLY_MORE) {
    start_read(c);
    return;
  }
  rd_import_stream_free(c->istream); /* its temporary file goes now, not with the call */
  c->istream = NULL;
  finish(c, &r);
}

static void import_step_job(void *arg, int cancelled) {
  call_t *c = arg;
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  if (cancelled) { /* the queue stops: the server is shutting down */
    rd_reply_error(&r, RD_ECANCELED, "the server is shutting down; nothing was imported");
    finish(c, &r);
  } else {
    import_step(c);
  }
}

/* Messages are written on the control queue (disk writes), the end is
 * imported on the placement queue, as ImportWorkload (it may place a
 * learner); a message its full queue refuses is written here (one chunk),
 * an end it refuses is refused. */
static void import_step_queue(call_t *c) {
  rd_run_t run = c->payload != NULL ? RD_RUN_CONTROL : RD_RUN_PLACEMENT;
  rd_jobs_t *q = c->srv->jobs[run - RD_RUN_QUEUE_FIRST];
  rd_error_t err;
  rd_error_clear(&err);
  if (q != NULL && rd_jobs_submit(q, import_step_job, c, &err) == RD_OK) return;
  if (c->payload != NULL) {
    import_step(c);
    return;
  }
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  rd_reply_error(&r, RD_ETOOBIG, "the server is busy; retry the import later (%s)", err.msg);
  finish(c, &r);
}

static void *worker_main(void *arg) {
  worker_t *wk = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(wk->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    uintptr_t t = (uintptr_t)ev.tag;
    on_event((call_t *)(t & ~(uintptr_t)(TAG_KINDS - 1)), (int)(t & (TAG_KINDS - 1)),
             ev.success != 0);
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                      */
/* ------------------------------------------------------------------ */

/* An integer channel argument (gRPC's key strings live as long as the
 * program). */
static grpc_arg int_arg(const char *key, int value) {
  grpc_arg a;
  memset(&a, 0, sizeof a);
  a.type = GRPC_ARG_INTEGER;
  a.key = (char *)key;
  a.value.integer = value;
  return a;
}

int rd_server_start(rd_server_t **out, const rd_config_t *cfg, rd_handler_ctx_t *ctx, int *port,
                    rd_error_t *err) {
  /* Plaintext or TLS (tls.h), checked before anything is started. */
  grpc_server_credentials *creds = NULL;
  int rc = rd_tls_server_credentials(cfg, &creds, NULL, err);
  if (rc != RD_OK) return rc;
  rd_server_t *s = calloc(1, sizeof *s);
  if (s == NULL) {
    grpc_server_credentials_release(creds);
    return rd_error_set(err, RD_ENOMEM, "out of memory");
  }
  s->cfg = cfg;
  s->ctx = ctx;
  pthread_mutex_init(&s->streams_mu, NULL);
  s->n_workers = cfg->threads < 1 ? 1 : cfg->threads > RD_MAX_THREADS ? RD_MAX_THREADS : cfg->threads;

  grpc_arg args[] = {
      int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, (int)cfg->max_message_bytes),
      int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, (int)cfg->max_message_bytes),
      /* SO_REUSEPORT is on by default in gRPC: a second replayd on the same
       * port would start and silently split the clients (and their
       * workloads) between the two processes. A taken port must be an
       * error. */
      int_arg(GRPC_ARG_ALLOW_REUSEPORT, 0),
      /* gRPC would inflate a compressed message whole before checking its
       * size (rpc_body.h): we inflate, within the limit, ourselves. */
      int_arg(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0),
  };
  grpc_channel_args chargs = {sizeof args / sizeof args[0], args};
  rc = rd_jobs_create(&s->jobs[RD_RUN_PLACEMENT - RD_RUN_QUEUE_FIRST], "placement",
                      PLACEMENT_THREADS, PLACEMENT_WAITING, 0, err);
  if (rc == RD_OK)
    rc = rd_jobs_create(&s->jobs[RD_RUN_CONTROL - RD_RUN_QUEUE_FIRST], "control",
                        CONTROL_THREADS, CONTROL_WAITING, 0, err);
  if (rc == RD_OK && cfg->ingest_threads > 0)
    rc = rd_jobs_create(&s->jobs[RD_RUN_INGEST - RD_RUN_QUEUE_FIRST], "ingest",
                        cfg->ingest_threads, INGEST_WAITING, INGEST_NICE, err);
  if (rc != RD_OK) {
    for (int q = 0; q < RD_RUN_QUEUES; q++)
      if (s->jobs[q]) rd_jobs_stop(s->jobs[q]);
    grpc_server_credentials_release(creds);
    free(s);
    return rc;
  }
  s->server = grpc_server_create(&chargs, NULL);

  for (int m = 0; m < RD_M_COUNT; m++)
    s->methods[m] = grpc_server_register_method(
        s->server, rd_method_path((rd_method_t)m), NULL,
        m == RD_M_INSERT || m == RD_M_SAMPLE_STREAM || m == RD_M_IMPORT_STREAM
            ? GRPC_SRM_PAYLOAD_NONE
                                                    : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
        0);
  for (uint32_t i = 0; i < s->n_workers; i++) {
    s->workers[i].srv = s;
    s->workers[i].cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->workers[i].cq, NULL);
  }
  s->shutdown_cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s->server, s->shutdown_cq, NULL);

  int bound = grpc_server_add_http2_port(s->server, cfg->listen, creds);
  grpc_server_credentials_release(creds);
  if (bound == 0) {
    for (uint32_t i = 0; i < s->n_workers; i++) {
      grpc_completion_queue_shutdown(s->workers[i].cq);
      grpc_completion_queue_destroy(s->workers[i].cq);
    }
    grpc_completion_queue_shutdown(s->shutdown_cq);
    grpc_completion_queue_destroy(s->shutdown_cq);
    grpc_server_destroy(s->server);
    for (int q = 0; q < RD_RUN_QUEUES; q++)
      if (s->jobs[q]) rd_jobs_stop(s->jobs[q]);
    free(s);
    return rd_error_set(err, RD_EINVAL,
                        "cannot listen on %s (address in use, or not a host:port?)", cfg->listen);
  }
  *port = bound;
  grpc_server_start(s->server);

  for (uint32_t i = 0; i < s->n_workers; i++) {
    for (int m = 0; m < RD_M_COUNT; m++) post_request(&s->workers[i], m);
    post_request(&s->workers[i], -1);
  }
  for (uint32_t i = 0; i < s->n_workers; i++)
    if (pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]) != 0) {
      /* Degrade rather than fail: the queues of missing threads are
       * drained by stop. */
      rd_log_error("server", "could not start completion-queue thread %u", i);
      s->workers[i].thread = 0;
    }
  *out = s;
  return RD_OK;
}

/* Calls that would wait for the rest of the grace period end now: each
 * waiting for a rate limiter (woken: UNAVAILABLE) and each sample stream
 * (cancelled with UNAVAILABLE); none starts waiting from here on. */
static void drain_waits(rd_server_t *s) {
  if (s->ctx != NULL && s->ctx->registry != NULL) rd_registry_drain_waits(s->ctx->registry);
  pthread_mutex_lock(&s->streams_mu);
  s->draining = true;
  for (call_t *c = s->streams; c != NULL; c = c->s_next)
    grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNAVAILABLE,
                                 "the server is shutting down; the stream ends", NULL);
  pthread_mutex_unlock(&s->streams_mu);
}

/* Wait on shutdown_cq (only the shutdown notification is ever queued
 * there) until it fires, until no call is in flight (when stop_when_idle),
 * or until the deadline. Returns 1 once notified. */
static int wait_shutdown(rd_server_t *s, gpr_timespec deadline, int stop_when_idle) {
  for (;;) {
    gpr_timespec tick = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                     gpr_time_from_millis(50, GPR_TIMESPAN));
    if (gpr_time_cmp(tick, deadline) > 0) tick = deadline;
    grpc_event ev = grpc_completion_queue_next(s->shutdown_cq, tick, NULL);
    if (ev.type == GRPC_OP_COMPLETE) return 1;
    if (stop_when_idle && atomic_load(&s->calls_active) == 0) return 0;
    if (gpr_time_cmp(gpr_now(GPR_CLOCK_REALTIME), deadline) >= 0) return 0;
  }
}

/* Wait until every matched call has been freed, at most until deadline.
 * Returns 1 when none is left. */
static int wait_calls_freed(rd_server_t *s, gpr_timespec deadline) {
  while (atomic_load(&s->calls_active) > 0) {
    if (gpr_time_cmp(gpr_now(GPR_CLOCK_REALTIME), deadline) >= 0) return 0;
    gpr_sleep_until(gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                 gpr_time_from_millis(5, GPR_TIMESPAN)));
  }
  return 1;
}

/* Shutdown in bounded steps. gRPC's own notification also waits for every
 * client connection to close after its GOAWAY, which an idle client may
 * take seconds to do (or never do), so:
 *  1. stop accepting; wait until in-flight calls are done (up to grace_s);
 *  2. then stop giving calls new batches and cancel what is left: with no
 *     call in flight this only force-disconnects idle connections;
 *  3. stop the job queues: calls still waiting there end (UNAVAILABLE),
 *     running jobs finish;
 *  4. wait for the notification and for every call to be freed, at most a
 *     few more seconds;
 *  5. only then shut the completion queues down: a call still alive could
 *     otherwise start a batch on a queue that is shut down, which gRPC
 *     answers with an assertion failure and abort. */
int rd_server_stop(rd_server_t *s, double grace_s) {
  atomic_store(&s->shutting_down, true);
  static int shutdown_tag;
  grpc_server_shutdown_and_notify(s->server, s->shutdown_cq, &shutdown_tag);
  drain_waits(s);
  gpr_timespec grace = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                    gpr_time_from_millis((int64_t)(grace_s * 1000), GPR_TIMESPAN));
  int done = wait_shutdown(s, grace, 1);
  if (!done) {
    int left = atomic_load(&s->calls_active);
    if (left > 0)
      rd_log_warn("server", "%d calls still running after %.1f s: cancelling them", left, grace_s);
    atomic_store(&s->cancelling, true);
    grpc_server_cancel_all_calls(s->server);
  }
  for (int q = 0; q < RD_RUN_QUEUES; q++) {
    if (s->jobs[q]) rd_jobs_stop(s->jobs[q]);
    s->jobs[q] = NULL;
  }
  gpr_timespec last = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                   gpr_time_from_seconds(5, GPR_TIMESPAN));
  if (!done) done = wait_shutdown(s, last, 0);
  if (done) done = wait_calls_freed(s, last);
  if (!done) {
    /* Something still holds the server or a call (a TrainStep whose
     * learner never answered): leave it to the process exit rather than
     * hang or tear down under live threads. */
    rd_log_error("server", "gRPC did not finish shutting down (%d calls alive); abandoning the "
                 "server", atomic_load(&s->calls_active));
    return -1;
  }
  for (uint32_t i = 0; i < s->n_workers; i++) grpc_completion_queue_shutdown(s->workers[i].cq);
  for (uint32_t i = 0; i < s->n_workers; i++) {
    if (s->workers[i].thread) {
      pthread_join(s->workers[i].thread, NULL);
    } else { /* no thread ever served this queue: drain it here */
      for (;;) {
        grpc_event e = grpc_completion_queue_next(s->workers[i].cq,
                                                  gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (e.type == GRPC_QUEUE_SHUTDOWN) break;
        if (e.type != GRPC_OP_COMPLETE) continue;
        uintptr_t t = (uintptr_t)e.tag;
        on_event((call_t *)(t & ~(uintptr_t)(TAG_KINDS - 1)), (int)(t & (TAG_KINDS - 1)), false);
      }
    }
  }
  grpc_server_destroy(s->server);
  for (uint32_t i = 0; i < s->n_workers; i++) grpc_completion_queue_destroy(s->workers[i].cq);
  grpc_completion_queue_shutdown(s->shutdown_cq);
  grpc_completion_queue_destroy(s->shutdown_cq);
  pthread_mutex_destroy(&s->streams_mu);
  free(s);
  return 0;
}

void rd_server_metrics(void *arg, rd_metrics_server_t *out) {
  rd_server_t *s = arg;
  static const char *const names[RD_RUN_QUEUES] = {"placement", "control", "ingest"};
  _Static_assert(RD_RUN_QUEUES <= RD_METRICS_QUEUES, "metrics.h counts the job queues");
  memset(out, 0, sizeof *out);
  out->calls_started = atomic_load(&s->calls_started);
  int active = atomic_load(&s->calls_active);
  out->calls_active = active > 0 ? (uint64_t)active : 0;
  for (int q = 0; q < RD_RUN_QUEUES; q++)
    if (s->jobs[q] != NULL) {
      out->queue_name[q] = names[q];
      out->queue_jobs[q] = rd_jobs_pending(s->jobs[q]);
    }
}

uint64_t rd_server_calls_started(const rd_server_t *s) {
  return atomic_load(&((rd_server_t *)s)->calls_started);
}
