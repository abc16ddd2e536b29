/* handlers.h - the methods of replayd.v1.Replay: one table, one decode.
 *
 * server.c owns calls and completion queues; it hands each request's bytes
 * to rd_handle and sends back the reply it gets. Each method is one row of
 * a table (handlers.c): its path, where it runs (rd_method_run), who may
 * call it and its handler; its request type is replayd.proto's. rd_handle
 * does what every method shares: it checks the request's strings on the
 * wire (pb_check.h), unpacks it ("request is not a decodable
 * replayd.v1.X" otherwise), authorizes it as its row says (auth.h: the
 * admin token, or the named workload's), runs the handler and keeps the
 * reply within --max-message-bytes. A handler is a few lines: call core
 * (workload.h, registry.h), pack; core's errors become gRPC statuses in
 * one place (status.h).
 */
#ifndef RD_HANDLERS_H
#define RD_HANDLERS_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "registry.h"
#include "status.h"

typedef enum {
  RD_M_REGISTER = 0,
  RD_M_DESCRIBE,
  RD_M_LIST,
  RD_M_DELETE,
  RD_M_INSERT, /* client stream */
  RD_M_INSERT_BATCH,
  RD_M_SAMPLE,
  RD_M_UPDATE,
  RD_M_TRAIN_STEP,
  RD_M_GET_WEIGHTS,
  RD_M_SERVER_INFO,
  RD_M_LIST_DEVICES,
  RD_M_PLAN,
  RD_M_LIST_PROFILES,   /* admin */
  RD_M_CLEAR_PROFILES,  /* admin */
  RD_M_IMPORT_PROFILES, /* admin */
  RD_M_EXPORT_PROFILES, /* admin */
  RD_M_CHECKPOINT,      /* durability.h */
  RD_M_EXPORT_WORKLOAD,
  RD_M_IMPORT_WORKLOAD,
  RD_M_SET_RATE_LIMITER,
  RD_M_SAMPLE_STREAM,   /* bidirectional stream: sample_stream.h, not rd_handle */
  RD_M_ADD_TENANT,      /* admin (tenant_rpc.h) */
  RD_M_SET_TENANT,      /* admin */
  RD_M_LIST_TENANTS,    /* admin */
  RD_M_REMOVE_TENANT,   /* admin */
  RD_M_EXPORT_STREAM,   /* server stream: durability.h */
  RD_M_IMPORT_STREAM,   /* client stream: durability.h, not rd_handle */
  RD_M_COUNT
} rd_method_t;

/* "/replayd.v1.Replay/RegisterWorkload", ... */
const char *rd_method_path(rd_method_t m);

/* Where a method's handler runs. Only short calls run on the completion-
 * queue threads; whatever can take long goes to a bounded job queue
 * (jobs.h), so that no call can stall the others. */
typedef enum {
  RD_RUN_INLINE = 0, /* samples, updates, reads: on the completion-queue thread */
  RD_RUN_TRAIN,      /* TrainStep: the handler starts it, a pipeline thread answers */
  RD_RUN_PLACEMENT,  /* profiles and maps (Register, Plan): one at a time */
  RD_RUN_CONTROL,    /* control-plane writes that fsync or stop threads (Delete, profiles) */
  RD_RUN_INGEST,     /* inserts (and each Insert stream message): at a lower priority */
} rd_run_t;
#define RD_RUN_QUEUE_FIRST RD_RUN_PLACEMENT
#define RD_RUN_QUEUES 3
rd_run_t rd_method_run(rd_method_t m);

/* Bounds on what a client can make the server hold for the profile RPCs
 * (besides --max-message-bytes): an import's JSON lines, a plan's assumed
 * GPU profile lines. */
#define RD_IMPORT_MAX_BYTES (16u << 20)
#define RD_PLAN_GPU_MAX_BYTES (1u << 20)

struct rd_durable;
typedef struct {
  rd_registry_t *registry;
  rd_store_t *store;        /* profiles; NULL: nothing is stored (tests) */
  struct rd_durable *durable; /* checkpoints (durable.h); NULL: none (tests) */
  const rd_config_t *config;
  /* SHA-256 of the admin token (secrets.h): the token itself stays in its
   * file, for replayctl. has_admin_token 0: no call is an admin's. */
  uint8_t admin_token_hash[RD_TOKEN_HASH_LEN];
  int has_admin_token;
  double start_time; /* CLOCK_MONOTONIC seconds */
  int64_t start_unix;
} rd_handler_ctx_t;

/* The Insert client stream: one state per call. Each message is applied as
 * it arrives (each message is a batch, validated whole); the first error
 * ends the call with that status and rows of earlier messages stay. */
typedef struct {
  rd_workload_t *workload; /* referenced after the first message */
  uint64_t inserted;
  uint64_t first_key;
  uint64_t messages;
  uint64_t lsn; /* journal mode: the last message's record (the end waits for it) */
} rd_insert_stream_t;

/* What the server knows of a call when it hands over a request. */
typedef struct {
  const grpc_metadata_array *md;
  double deadline;            /* CLOCK_MONOTONIC seconds; 0 for none */
  void *call;                 /* the server's, for rd_call_reply */
  rd_insert_stream_t *stream; /* the Insert stream's state; NULL for a unary call */
  /* The call's wait for a rate limiter (Sample, InsertBatch, Insert
   * messages; NULL for the rest): pass it to core's *_wait calls after
   * rd_call_wait_on; when core queues it, return RD_REPLY_PARKED. */
  rd_limiter_wait_t *wait;
  /* ExportStream's (NULL for the rest): where its handler puts the stream
   * it answers RD_REPLY_STREAM for. */
  struct rd_export_stream **export_stream;
} rd_call_info_t;

typedef enum {
  RD_REPLY_NOW = 0, /* out holds the reply or the error: finish the call */
  RD_REPLY_LATER,   /* another thread will pass it to rd_call_reply (TrainStep) */
  RD_REPLY_MORE,    /* a stream's message was taken: read the next one */
  RD_REPLY_PARKED,  /* ci->wait was queued: the server runs the same request again when it
                       is woken (the handler then finds its wait granted) */
  RD_REPLY_STREAM,  /* *ci->export_stream was set: send its chunks, then OK */
} rd_reply_when_t;

/* Serve one request (a stream's message for RD_M_INSERT) of method m:
 * body[0, len) are its bytes (NULL: empty). out must start zeroed. */
rd_reply_when_t rd_handle(rd_handler_ctx_t *ctx, rd_method_t m, const rd_call_info_t *ci,
                          const uint8_t *body, size_t len, rd_reply_t *out);

/* A method's handler kept outside handlers.c (durability.h, tenant_rpc.h):
 * msg is the method's request, unpacked; its row in handlers.c's table
 * calls it. */
typedef rd_reply_when_t rd_rpc_handler_t(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                         const void *msg, rd_reply_t *r);

/* The Insert stream's end (the client half-closed): its reply, now, or
 * (journal mode) RD_REPLY_LATER once its last record is on disk, passed to
 * rd_call_reply(call, ...). */
rd_reply_when_t rd_handle_insert_end(const rd_insert_stream_t *st, void *call, rd_reply_t *out);
void rd_insert_stream_release(rd_insert_stream_t *st);

/* The server's (server.c): finish the call a handler answered
 * RD_REPLY_LATER for, from any thread; takes r->reply. */
void rd_call_reply(void *call, rd_reply_t *r);

/* r answers w as DescribeWorkload does (the Workload, without its token),
 * or RESOURCE_EXHAUSTED when it cannot be built. */
void rd_reply_workload(rd_reply_t *r, rd_workload_t *w);

/* The server's: the call's wait (ci->wait) will be on w's rate limiter;
 * the call holds a reference to w until it is freed (once per call: one
 * call waits on one workload). Before passing ci->wait to core. */
void rd_call_wait_on(void *call, rd_workload_t *w);

/* The server's: run a parked call on its completion-queue thread (a wait's
 * wake; a sample stream's wait). Any thread, any lock held: it only
 * starts an empty gRPC batch. */
void rd_call_resume(void *call);

#endif
