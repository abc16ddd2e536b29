/* handlers.h - what each RPC does, independent of the call machinery.
 *
 * server.c owns calls and completion queues; it hands each decoded request
 * (raw bytes + request metadata) to a handler here and sends back what the
 * handler produced: a packed reply or a status with a message. Handlers
 * run on completion-queue threads and must be short: they take the
 * workload's lock only around the table call.
 */
#ifndef RD_HANDLERS_H
#define RD_HANDLERS_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "registry.h"

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

typedef struct {
  rd_registry_t *registry;
  rd_store_t *store;        /* profiles; NULL: nothing is stored (tests) */
  const rd_config_t *config;
  char admin_token[RD_WORKLOAD_TOKEN_LEN + 1];
  double start_time; /* CLOCK_MONOTONIC seconds */
  int64_t start_unix;
} rd_handler_ctx_t;

typedef struct {
  grpc_status_code status;
  char message[512];
  grpc_byte_buffer *reply; /* set when status == GRPC_STATUS_OK */
} rd_reply_t;

/* rd_registry_set_restore_placer's hook (arg: the handler context): a
 * restored workload's placement from stored profiles only, never measured. */
int rd_handler_restore_placer(void *arg, const rd_table_config_t *tc,
                              const rd_pipeline_config_t *pc, rd_placement_t *out);

/* A unary call: body is the request message. */
void rd_handle_unary(rd_handler_ctx_t *ctx, rd_method_t m, const grpc_metadata_array *md,
                     const uint8_t *body, size_t len, rd_reply_t *out);

/* TrainStep is asynchronous: training takes as long as it takes, and a
 * completion-queue thread must not wait for it. Returns 1 when the reply
 * will come later, through done(call, reply) on another thread (a pipeline
 * thread, or the thread that stops the workload); 0 when out holds the
 * reply now (an error). deadline_mono: CLOCK_MONOTONIC seconds, <= 0 for
 * none. */
typedef void (*rd_async_done_fn)(void *call, rd_reply_t *reply);
int rd_handle_train_step(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                         const uint8_t *body, size_t len, double deadline_mono,
                         rd_async_done_fn done, void *call, rd_reply_t *out);

/* The Insert client stream: one state per call. Each message is applied as
 * it arrives (each message is a batch, validated whole); the first error
 * ends the call with that status and rows of earlier messages stay. */
typedef struct {
  rd_workload_t *workload; /* referenced after the first message */
  uint64_t inserted;
  uint64_t first_key;
  uint64_t messages;
} rd_insert_stream_t;

/* Returns 0 to keep reading, or non-zero with out->status set to end. */
int rd_handle_insert_message(rd_handler_ctx_t *ctx, rd_insert_stream_t *st,
                             const grpc_metadata_array *md, const uint8_t *body, size_t len,
                             rd_reply_t *out);
/* Half-close: the final reply. */
void rd_handle_insert_end(rd_handler_ctx_t *ctx, rd_insert_stream_t *st, rd_reply_t *out);
void rd_insert_stream_release(rd_insert_stream_t *st);

#endif
