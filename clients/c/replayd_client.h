/* replayd_client.h - C client library of replayd, the prioritized replay
 * daemon (library "replayd-client", pkg-config replayd-client, prefix rdc_).
 *
 * One header, no gRPC or protobuf types in it: a program that includes it
 * needs only the C library.
 *
 * Conventions (after libuv):
 * - Every call returns RDC_OK (0) or an error code: a positive gRPC status
 *   code as the server (or gRPC on its behalf) ended the call with, or a
 *   negative RDC_E* code for a failure on this side. rdc_strerror() names it.
 * - Calls that can fail take an optional rdc_error_t *err that receives the
 *   code and a sentence: for a server error, the status details the server
 *   sent ("no workload abc"), so a program can show them verbatim.
 * - Outputs go into caller-provided structs and buffers. The only calls that
 *   allocate for the caller are rdc_list and rdc_server_info (variable-size
 *   answers), each with its own free function. Internally a call allocates
 *   what gRPC needs and one buffer for the packed request.
 * - Every data call (insert, sample, update) and delete carries the
 *   workload's token in the call metadata "x-replayd-token".
 *
 * Threads: an rdc_client_t may be shared by threads; its unary calls are
 * serialized by a mutex (one call in flight per client). For parallel calls
 * open one client per thread: each has its own connection. An insert stream
 * has its own completion queue and may run on another thread than the
 * client's unary calls, but one stream must be used by one thread at a time.
 * A client must outlive its streams.
 *
 * Deadlines: every unary call gets rdc_set_deadline's deadline (default
 * 30 s). An insert stream has no overall deadline (actors stream for
 * hours); instead each write and the close wait at most that long for the
 * server, then cancel the stream with RDC_DEADLINE_EXCEEDED.
 */
#ifndef REPLAYD_CLIENT_H
#define REPLAYD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

enum {
  RDC_OK = 0,
  /* gRPC status codes, as the call ended (same numbers as grpc_status_code). */
  RDC_CANCELLED = 1,
  RDC_UNKNOWN = 2,
  RDC_INVALID_ARGUMENT = 3,
  RDC_DEADLINE_EXCEEDED = 4,
  RDC_NOT_FOUND = 5,
  RDC_ALREADY_EXISTS = 6,
  RDC_PERMISSION_DENIED = 7, /* wrong token */
  RDC_RESOURCE_EXHAUSTED = 8,
  RDC_FAILED_PRECONDITION = 9,
  RDC_ABORTED = 10,
  RDC_OUT_OF_RANGE = 11,
  RDC_UNIMPLEMENTED = 12,
  RDC_INTERNAL = 13,
  RDC_UNAVAILABLE = 14,      /* server unreachable or gone */
  RDC_DATA_LOSS = 15,
  RDC_UNAUTHENTICATED = 16,  /* no token */
  /* Local codes: nothing reached the server, or its reply was unusable. */
  RDC_EINVAL = -1,    /* bad argument to a client function; nothing was sent */
  RDC_ENOMEM = -2,    /* allocation failed */
  RDC_ECONNECT = -3,  /* rdc_connect: no connection within the timeout */
  RDC_EPROTO = -4,    /* reply undecodable or inconsistent with the request */
  RDC_ETOOSMALL = -5, /* reply larger than a caller buffer or a fixed limit
                         of this library (RDC_MAX_FIELDS, ...) */
  RDC_ECALL = -6,     /* gRPC refused to start or run the call */
};

#define RDC_ERROR_MSG_MAX 256

typedef struct {
  int code;                    /* as returned */
  char msg[RDC_ERROR_MSG_MAX]; /* NUL-terminated; "" on success */
} rdc_error_t;

/* Name of a code: "OK", "NOT_FOUND", ..., "RDC_EPROTO"; never NULL. */
const char *rdc_strerror(int code);

/* ------------------------------------------------------------------ */
/* Connection                                                          */
/* ------------------------------------------------------------------ */

typedef struct rdc_client rdc_client_t;

typedef struct {
  /* Largest reply accepted, bytes (GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH).
   * Default 64 MiB, the daemon's default message limit: a sample reply
   * holds batch_size rows. */
  int max_receive_bytes;
  /* 0 (default): fail fast. rdc_connect gives up as soon as a connection
   * attempt fails (server down, connection refused), so a wrong address
   * fails at once; later calls made while the server is unreachable fail
   * at once with RDC_UNAVAILABLE (after a server restart the client may
   * need up to about 10 s to reconnect). 1: wait for the server. rdc_connect keeps
   * retrying until its timeout (programs started before the daemon), and
   * every call waits, up to its deadline, for the connection to come back
   * instead of failing (actors that should ride out a daemon restart). */
  int wait_for_ready;
  /* Initial per-call deadline, seconds (default 30; INFINITY = none). */
  double deadline_s;
} rdc_connect_opts_t;

/* Fill opts with the defaults above. */
void rdc_connect_opts_init(rdc_connect_opts_t *opts);

/* Open a channel to target ("host:port", or any gRPC target such as
 * "unix:/run/replayd.sock") and wait until it is connected, at most
 * timeout_s seconds. Errors: RDC_EINVAL (NULL/empty target, timeout <= 0),
 * RDC_ECONNECT with a message naming the target. */
int rdc_connect(const char *target, double timeout_s, rdc_client_t **out, rdc_error_t *err);
/* The same with options (opts NULL = defaults). */
int rdc_connect_ex(const char *target, double timeout_s, const rdc_connect_opts_t *opts,
                   rdc_client_t **out, rdc_error_t *err);

/* Close the channel and free the client (NULL is a no-op). Its streams must
 * be closed first. */
void rdc_close(rdc_client_t *c);

/* Deadline of each following call, seconds from its start (> 0; INFINITY
 * for none), and the longest wait of each stream write and close of
 * streams opened afterwards. RDC_EINVAL otherwise. Waits for a call that
 * another thread has in flight on this client. */
int rdc_set_deadline(rdc_client_t *c, double seconds);

/* ------------------------------------------------------------------ */
/* Workloads                                                           */
/* ------------------------------------------------------------------ */

#define RDC_MAX_FIELDS 32     /* fields per schema (the server's limit) */
#define RDC_FIELD_NAME_MAX 64 /* bytes with the NUL (the server's limit) */
#define RDC_MAX_RANK 8        /* dimensions per field (the server's limit) */
#define RDC_NAME_MAX 256      /* workload label, bytes with the NUL */
#define RDC_ID_MAX 65         /* workload id, bytes with the NUL */
#define RDC_TOKEN_MAX 129     /* token, bytes with the NUL */

/* Element types (the wire's DType numbers). */
typedef enum {
  RDC_DTYPE_FLOAT32 = 1,
  RDC_DTYPE_INT32 = 2,
  RDC_DTYPE_INT64 = 3,
  RDC_DTYPE_UINT8 = 4,
  RDC_DTYPE_BOOL = 5, /* one byte, 0 or 1 */
} rdc_dtype_t;

/* "float32", ..., "bool"; "invalid" otherwise. */
const char *rdc_dtype_name(int dtype);
/* Bytes of one element; 0 for an unknown dtype. */
size_t rdc_dtype_size(int dtype);

/* One field of the row schema. A row of this field is
 * dtype_size * shape[0] * ... * shape[rank-1] bytes (rank 0 = scalar). */
typedef struct {
  char name[RDC_FIELD_NAME_MAX]; /* [A-Za-z0-9_.-], unique in the schema */
  rdc_dtype_t dtype;
  uint32_t rank;
  uint32_t shape[RDC_MAX_RANK];
} rdc_field_t;

/* Bytes of one row of the field (0 if dtype or rank is invalid). */
size_t rdc_field_bytes(const rdc_field_t *f);

/* A workload's description. Optional scalars are used only when their
 * has_* flag is set; otherwise the server applies its default. Specs that
 * come back from the server are normalised: every has_* flag set. */
typedef struct {
  char name[RDC_NAME_MAX];   /* a label for people (longer ones come back cut) */
  uint32_t n_fields;
  rdc_field_t fields[RDC_MAX_FIELDS];
  uint32_t capacity;         /* items */
  uint32_t fanout;           /* sum-tree K; 0 = server default (16) */
  int has_alpha;
  double alpha;              /* priority exponent, default 0.6 */
  int has_epsilon;
  double epsilon;            /* added to |delta|, default 1e-6 */
  int has_beta;
  double beta;               /* IS exponent used when a sample gives none, default 0.4 */
  int has_max_priority;
  double max_priority;       /* cap on raw priorities, default 2^20 */
  uint64_t seed;             /* sampling stream key */
  uint32_t max_batch;        /* rows per call; 0 = server default */
} rdc_spec_t;

/* Zero the spec (no fields, every optional scalar unset). */
void rdc_spec_init(rdc_spec_t *spec);

typedef struct {
  uint64_t inserts;
  uint64_t samples;
  uint64_t updates;
  uint64_t stale_updates;
  uint64_t size;  /* live items */
  uint64_t bytes; /* memory held by rows and tree */
} rdc_counters_t;

typedef struct {
  char id[RDC_ID_MAX];
  char token[RDC_TOKEN_MAX]; /* filled by rdc_register only; keep it secret */
  rdc_spec_t spec;           /* normalised by the server */
  rdc_counters_t counters;
  int64_t created_unix;
} rdc_workload_t;

/* Register a workload. out receives its id, its token (returned only here:
 * every data call and delete needs it) and the normalised spec. Errors:
 * RDC_EINVAL (n_fields or a rank out of range, a name not NUL-terminated),
 * RDC_INVALID_ARGUMENT (the server's validation, message names the field),
 * RDC_RESOURCE_EXHAUSTED (a server limit: memory, workload count). */
int rdc_register(rdc_client_t *c, const rdc_spec_t *spec, rdc_workload_t *out,
                 rdc_error_t *err);

/* One workload (no token). RDC_NOT_FOUND if there is none with this id. */
int rdc_describe(rdc_client_t *c, const char *id, rdc_workload_t *out, rdc_error_t *err);

/* All workloads (no tokens), in creation order: *out is an array of *n
 * items (NULL when *n is 0), to be freed with rdc_list_free. */
int rdc_list(rdc_client_t *c, rdc_workload_t **out, size_t *n, rdc_error_t *err);
void rdc_list_free(rdc_workload_t *items);

/* Delete a workload with its token or the server's admin token. */
int rdc_delete(rdc_client_t *c, const char *id, const char *token, rdc_error_t *err);

/* ------------------------------------------------------------------ */
/* Data: insert, sample, update                                        */
/* ------------------------------------------------------------------ */

/* One column of a batch of n rows: the packed little-endian values of one
 * field, n * rdc_field_bytes(field) bytes. Batches pass one column per
 * schema field, in schema order; the server checks every length. */
typedef struct {
  const void *data;
  size_t bytes;
} rdc_column_t;

/* Insert n rows in one call. priorities: NULL (the server gives new rows
 * the largest priority seen) or n raw |delta| values. keys: NULL or room
 * for n keys, the new rows' keys in row order (for later updates). The
 * batch is applied whole or not at all. */
int rdc_insert_batch(rdc_client_t *c, const char *id, const char *token, uint32_t n,
                     const rdc_column_t *cols, size_t n_cols, const double *priorities,
                     uint64_t *keys, rdc_error_t *err);

/* An insert stream: one long call carrying many batches (the Insert RPC),
 * the fast path for actors. */
typedef struct rdc_insert_stream rdc_insert_stream_t;

/* Start a stream for workload id. Nothing is checked by the server until
 * the first write arrives; a bad id or token shows up as the error of a
 * later write or of the close. */
int rdc_insert_stream_open(rdc_client_t *c, const char *id, const char *token,
                           rdc_insert_stream_t **out, rdc_error_t *err);

/* Queue one batch of n rows (same arguments as rdc_insert_batch). The rows
 * are copied into the message, so the caller may reuse its buffers on
 * return. At most one message is in flight: a write first waits for the
 * previous one to leave (flow control: a slow server slows the writer, no
 * queue grows), then starts sending this one and returns. If the server
 * has ended the stream (it rejected a batch: bad token, wrong column
 * size, ...), the write returns the server's status and message; rows of
 * batches written before the rejected one stay inserted. After an error
 * every further write returns the same error; call close (or cancel). */
int rdc_insert_stream_write(rdc_insert_stream_t *s, uint32_t n, const rdc_column_t *cols,
                            size_t n_cols, const double *priorities, rdc_error_t *err);

/* Half-close, wait for the server's answer and free the stream (always,
 * even on error). inserted: rows the server inserted on this stream;
 * first_key: key of its first row (keys of a stream are consecutive when
 * no other writer inserts into the workload meanwhile). Either may be NULL. */
int rdc_insert_stream_close(rdc_insert_stream_t *s, uint64_t *inserted, uint64_t *first_key,
                            rdc_error_t *err);

/* Abandon a stream: cancel the call and free it (NULL is a no-op). Rows of
 * batches the server already applied stay inserted. */
void rdc_insert_stream_cancel(rdc_insert_stream_t *s);

/* A caller buffer that receives one column. */
typedef struct {
  void *data;
  size_t capacity; /* bytes data can hold */
  size_t bytes;    /* out: bytes written */
} rdc_buffer_t;

/* Arguments and results of rdc_sample. Set the buffers you want, leave the
 * others NULL; keys, probabilities and weights must each hold batch_size
 * values. */
typedef struct {
  uint64_t *keys;          /* item keys, for rdc_update_priorities */
  double *probabilities;   /* P(i) of each sampled item */
  double *weights;         /* IS weights (N P(i))^-beta / max over the batch */
  rdc_buffer_t *columns;   /* NULL, or one buffer per schema field */
  size_t n_columns;
  uint32_t count;          /* out: rows sampled (batch_size) */
  uint64_t table_size;     /* out: live items when sampled */
} rdc_sample_t;

/* Sample batch_size items with probability proportional to priority.
 * beta: IS exponent, or NAN for the workload's default. stratified: one
 * draw per equal slice of the total priority (lower variance) instead of
 * independent draws. If columns is set, n_columns must equal the reply's
 * column count (RDC_EINVAL otherwise) and each buffer must hold its column
 * (RDC_ETOOSMALL, naming the column and the bytes needed, otherwise). */
int rdc_sample(rdc_client_t *c, const char *id, const char *token, uint32_t batch_size,
               double beta, int stratified, rdc_sample_t *io, rdc_error_t *err);

/* Set the priorities (raw |delta|, transformed as on insert) of n items.
 * Keys whose slot has been overwritten since they were sampled are skipped
 * and counted in *stale; *applied counts the rest. Either may be NULL. */
int rdc_update_priorities(rdc_client_t *c, const char *id, const char *token, size_t n,
                          const uint64_t *keys, const double *priorities, uint64_t *applied,
                          uint64_t *stale, rdc_error_t *err);

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

typedef struct {
  char kind[16];   /* "cpu", "gpu", "fpga" */
  char name[128];
  char fingerprint[128];
  char status[256]; /* "ok", or why the device is unusable */
} rdc_device_t;

typedef struct {
  char version[64];
  double uptime_s;
  size_t n_devices;
  rdc_device_t *devices;
  size_t n_workloads;
  rdc_workload_t *workloads; /* no tokens */
} rdc_server_info_t;

/* Version, uptime, devices and every workload with its counters. *out is
 * one allocation, freed with rdc_server_info_free. */
int rdc_server_info(rdc_client_t *c, rdc_server_info_t **out, rdc_error_t *err);
void rdc_server_info_free(rdc_server_info_t *info);

#ifdef __cplusplus
}
#endif

#endif
