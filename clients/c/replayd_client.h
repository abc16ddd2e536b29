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
 *   allocate for the caller are the list calls (rdc_list*) and
 *   rdc_server_info (variable-size answers) and rdc_policy_load (the network), each with its own free
 *   function. Internally a call allocates what gRPC needs and one buffer
 *   for the packed request.
 * - Every data call (insert, sample, update, train step, get weights) and
 *   delete carries the workload's token in the call metadata
 *   "x-replayd-token".
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
 *
 * Flow control: on a workload with a rate limiter, an insert or sample the
 * limiter holds back waits in the server until it may run, at most until
 * the call's deadline (RDC_DEADLINE_EXCEEDED then); rdc_sample_wait and
 * rdc_insert_batch_wait give one call its own deadline, 0 = fail at once.
 * A sampler (rdc_sampler_open) keeps a window of batches in flight on one
 * stream for a remote learner.
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
  RDC_EIO = -7,       /* a caller's file could not be read or written (streamed export/import) */
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
  /* TLS (a server started with --tls-cert). tls_ca_file: PEM file of the
   * CA certificates that may sign the server's certificate; NULL (default)
   * = plaintext. tls_cert_file and tls_key_file (both or neither; only
   * with tls_ca_file): this client's PEM certificate and key, for a server
   * that requires client certificates (--tls-client-ca). The server's
   * certificate must name the target's host (a DNS or IP subject
   * alternative name). A file that cannot be read is RDC_EINVAL naming it;
   * a server whose certificate the CAs did not sign, or that refuses this
   * client's, is RDC_ECONNECT. */
  const char *tls_ca_file;
  const char *tls_cert_file;
  const char *tls_key_file;
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

/* The token that the calls which take none (rdc_describe, rdc_list,
 * rdc_list_page, rdc_server_info) send: a tenant's token shows that
 * tenant's workloads, the server's admin token every tenant's; NULL or ""
 * sends none (the default tenant's view). The token is copied.
 * RDC_EINVAL for a client that is NULL or a token that is too long or
 * holds a character gRPC metadata cannot carry (nothing changes then).
 * Waits for a call that another thread has in flight on this client. */
int rdc_set_view_token(rdc_client_t *c, const char *token, rdc_error_t *err);

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

#define RDC_MAX_HIDDEN 15    /* hidden layers of a learner network (the server's limit) */
#define RDC_LEARNER_STR_MAX 16 /* algorithm / activation names, bytes with the NUL */

/* The hosted learner of a workload (the proto's LearnerSpec): the server
 * trains a network on the workload's rows and serves its weights. The row
 * schema must then have the fields the learner reads by name:
 *   obs       float32[obs_dim]
 *   action    DQN: int32 scalar in [0, num_actions); DDPG: float32[action_dim]
 *   reward    float32 scalar, the n-step return sum_{k<n} gamma^k r_k
 *   next_obs  float32, the shape of obs: the observation n steps later
 *   discount  float32 scalar, gamma^n, 0 if the episode ended within the n
 *             steps (or, for 1-step rows, "done" bool instead of discount)
 * Optional scalars are sent only when their has_* flag is set (otherwise
 * the server's default, in the comments); zero integers and empty strings
 * and lists also mean "default". A spec that comes back from the server is
 * normalised: the defaults that apply to its algorithm are filled in. */
typedef struct {
  char algorithm[RDC_LEARNER_STR_MAX];  /* "dqn" or "ddpg" */
  uint32_t n_hidden;                    /* hidden widths of the Q network / DDPG actor */
  uint32_t hidden[RDC_MAX_HIDDEN];
  uint32_t batch_size;                  /* items per gradient step (required) */
  uint32_t n_critic_hidden;             /* DDPG critic; 0 = as hidden */
  uint32_t critic_hidden[RDC_MAX_HIDDEN];
  char activation[RDC_LEARNER_STR_MAX]; /* hidden layers: "relu" ("" = default) or "tanh" */
  int has_lr;
  double lr;                /* Adam; default 1e-3 (DDPG actor 1e-4) */
  int has_critic_lr;
  double critic_lr;         /* DDPG critic; default 1e-3 */
  int has_gamma;
  double gamma;             /* used with a "done" field; default 0.99 */
  uint32_t target_update_period; /* hard target copy every N steps; 0 = Polyak (tau) */
  int has_tau;
  double tau;               /* Polyak rate; default 0.005 */
  uint32_t relaxation_depth; /* batches sampled ahead of the learner; 0 = strict */
  int has_grad_clip;
  double grad_clip;         /* global-norm clip; default 10; 0 = none */
  int has_huber_delta;
  double huber_delta;       /* DQN; default 1 */
  int has_double_dqn;
  int double_dqn;           /* DQN; default 1 */
  uint32_t num_actions;     /* DQN: discrete actions (>= 2) */
  int has_action_low;
  double action_low;        /* DDPG; default -1 */
  int has_action_high;
  double action_high;       /* DDPG; default 1 */
  /* > 0: continuous mode, the server trains by itself while data arrives,
   * keeping (steps * batch_size) / inserts near this ratio; 0: it trains
   * only on rdc_train_step calls. */
  double samples_per_insert;
  uint32_t min_size;        /* items before training starts; 0 = batch_size */
} rdc_learner_spec_t;

/* A workload's description. Optional scalars are used only when their
 * has_* flag is set; otherwise the server applies its default. Specs that
 * come back from the server are normalised: every has_* flag set. */
/* A table's rate limiter (the proto's RateLimiterSpec, Reverb's rules):
 * with I items inserted, S sampled and N held, a sample of n runs when
 * N >= min_size_to_sample and I * samples_per_insert - S - n >= min_diff;
 * an insert of m when N + m <= min_size_to_sample or
 * (I + m) * samples_per_insert - S <= max_diff. Others wait in the server.
 * samples_per_insert 0: min_size_to_sample only. With a ratio, give
 * error_buffer (diffs = samples_per_insert * min_size_to_sample -/+ it) or
 * min_diff and/or max_diff (a missing one is unbounded). A spec that
 * comes back from the server has the diffs written out. */
typedef struct {
  uint32_t min_size_to_sample; /* 0 = 1 */
  double samples_per_insert;
  int has_min_diff;
  double min_diff;
  int has_max_diff;
  double max_diff;
  int has_error_buffer;
  double error_buffer;
} rdc_rate_limiter_t;

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
  int has_learner;           /* 1: the server hosts a learner for this workload */
  rdc_learner_spec_t learner;
  /* What survives a restart: "none", "checkpoint", "journal"; "" = the
   * server's default (--durability). */
  char durability[16];
  int has_checkpoint_interval;
  double checkpoint_interval_s; /* 0: no periodic checkpoints */
  /* 1: the table has this rate limiter. A learner with samples_per_insert
   * > 0 gets one anyway (min_size_to_sample = its min_size, min_diff 0, no
   * max_diff); with both, the two samples_per_insert must be equal. */
  int has_rate_limiter;
  rdc_rate_limiter_t rate_limiter;
} rdc_spec_t;

/* Zero the spec (no fields, every optional scalar unset, no learner). */
void rdc_spec_init(rdc_spec_t *spec);

typedef struct {
  uint64_t inserts;
  uint64_t samples;
  uint64_t updates;
  uint64_t stale_updates;
  uint64_t size;  /* live items */
  uint64_t bytes; /* memory held by rows and tree */
} rdc_counters_t;

/* State of a hosted learner (the proto's LearnerCounters). */
typedef struct {
  uint64_t steps;          /* gradient steps taken */
  uint64_t weight_version; /* bumps at every published weight set; 1 = initial weights */
  double loss;             /* loss of the last step */
  double steps_per_second; /* over the last TrainStep call or continuous window */
  uint64_t skipped_steps;  /* steps whose loss or gradients were not finite */
  uint64_t late_updates;   /* priority updates that landed after newer samples (D > 0) */
} rdc_learner_counters_t;

/* One device's row of the primitive-platform table (papers/001 §VI-A3). */
typedef struct {
  char device[8];           /* "cpu", "gpu", "fpga" */
  int present;
  double learner_s;         /* one train-step; 0 when the learner cannot run there */
  char learner_source[16];  /* "measured", "cached", "model", "assumed", "-" */
  double rmm_s;             /* sample + priority update of one batch; 0 when absent */
  char rmm_source[16];
  char fingerprint[64];
  char detail[256];         /* the FPGA model's parameters, or why a row is empty */
} rdc_platform_row_t;

#define RDC_EXPLAIN_MAX 1024

/* Where a workload's learner, replay management (RMM) and storage were
 * mapped (papers/001 Algorithm 3), with the table it was chosen from. */
#define RDC_PLACEMENT_HISTORY_MAX 16

/* One placement decision (issue 24's re-mapping): a first placement
 * beside the others, a live move, or a move the hysteresis refused. */
typedef struct {
  int64_t unix_ms;
  int moved;                 /* 1: from -> to moved */
  char from[8], to[8];       /* running codes, "C-C-C"; from "" for the first placement */
  double gps_from, gps_to;   /* its predicted GPS under the set's sharing, before/after */
  double total_from, total_to; /* the set's predicted total GPS, kept/proposed */
  char reason[256];
} rdc_placement_event_t;

typedef struct {
  char mapping[8];          /* learner-RMM-storage, "G-C-G"; "" when not mapped */
  char learner_device[8], rmm_device[8], storage_device[8];
  size_t n_rows;
  rdc_platform_row_t rows[3];
  double predicted_gps;     /* gradient steps per second the mapping predicts */
  double measured_gps;      /* over the last training window; 0 before training */
  int profile_cache_hit;    /* the CPU's figures came from the profile store */
  double register_ms;       /* profiling and mapping time */
  char running[8];          /* what the server instantiated: "C-C-C" */
  char note[256];           /* e.g. "mapped G-C-G; running C-C-C: GPU backend not available" */
  char explain[RDC_EXPLAIN_MAX];
  char bottleneck[16];      /* "learner" or "rmm" */
  uint32_t batch;
  uint32_t profiles_measured;
  uint32_t learner_threads;
  /* The CPUs the pipeline's threads are pinned to: "0", "2-3"; "" when
   * unpinned (a plan: where a registration now would pin them). */
  char learner_cpus[320], sampler_cpus[320];
  /* Where a registered workload ran and why, oldest first (the server's
   * newest RDC_PLACEMENT_HISTORY_MAX; history_total counts every one). */
  size_t n_history;
  rdc_placement_event_t history[RDC_PLACEMENT_HISTORY_MAX];
  uint64_t history_total;
} rdc_placement_t;

/* One checkpoint (the server's checkpoint file ckpt-<generation>.rdc). */
typedef struct {
  uint64_t generation;
  int64_t taken_unix_ms;
  uint64_t bytes;
  double seconds;      /* taking and writing it; 0 for one restored at start */
  uint64_t items;
  int learner_full;    /* the learner's whole training state, else its policy only */
  double pause_ms;     /* the longest the table was locked for it */
} rdc_checkpoint_info_t;

/* What survives a restart, as DescribeWorkload reports it. */
typedef struct {
  char mode[16];              /* "none", "checkpoint", "journal" */
  double checkpoint_interval_s;
  int has_last;
  rdc_checkpoint_info_t last;
  uint64_t checkpoints;       /* taken since the server started */
  char last_error[256];       /* the last checkpoint's failure; "" after a success */
  char restored[256];         /* how the workload came back at the server's start */
  uint64_t journal_records, journal_commits;
  double journal_commit_ms_max;
  char journal_error[256];
} rdc_durability_t;
/* A rate limiter's state (the proto's RateLimiterState). */
typedef struct {
  rdc_rate_limiter_t config;   /* as the server applies it: diffs written out */
  uint64_t inserted, sampled;  /* I and S (the hosted learner's samples included) */
  double ratio;                /* S / I; 0 before the first insert */
  uint32_t blocked_inserts;    /* calls waiting now */
  uint32_t blocked_samples;    /* calls and sample streams waiting now */
  double insert_wait_s, sample_wait_s; /* time calls spent waiting, in all */
  uint64_t insert_waits, sample_waits; /* calls that had to wait */
} rdc_limiter_state_t;

typedef struct {
  char id[RDC_ID_MAX];
  char token[RDC_TOKEN_MAX]; /* filled by rdc_register only; keep it secret */
  rdc_spec_t spec;           /* normalised by the server */
  rdc_counters_t counters;
  int64_t created_unix;
  int has_learner_counters;  /* 1 when the server sent them (workloads with a learner) */
  rdc_learner_counters_t learner;
  int has_placement;         /* 1 when the server sent one (workloads with a learner) */
  rdc_placement_t placement;
  int has_durability;        /* 1 when the server sent it */
  rdc_durability_t durability;
  int has_rate_limiter;      /* 1 when the workload has a rate limiter */
  rdc_limiter_state_t rate_limiter;
  char tenant[64];           /* its owner ("default" without tenants) */
} rdc_workload_t;

/* Register a workload. out receives its id, its token (returned only here:
 * every data call and delete needs it) and the normalised spec. Errors:
 * RDC_EINVAL (n_fields or a rank out of range, a name not NUL-terminated,
 * with has_learner: a hidden list longer than RDC_MAX_HIDDEN or a learner
 * string not NUL-terminated),
 * RDC_INVALID_ARGUMENT (the server's validation, message names the field),
 * RDC_RESOURCE_EXHAUSTED (a server limit: memory, workload count). */
int rdc_register(rdc_client_t *c, const rdc_spec_t *spec, rdc_workload_t *out,
                 rdc_error_t *err);

/* rdc_register for the tenant whose token is tenant_token (NULL: the
 * default tenant); RDC_RESOURCE_EXHAUSTED also for the tenant's quota. */
int rdc_register_as(rdc_client_t *c, const char *tenant_token, const rdc_spec_t *spec,
                    rdc_workload_t *out, rdc_error_t *err);

/* One workload (no token). RDC_NOT_FOUND if there is none with this id. */
int rdc_describe(rdc_client_t *c, const char *id, rdc_workload_t *out, rdc_error_t *err);

/* All workloads (no tokens), in id order: *out is an array of *n items
 * (NULL when *n is 0), to be freed with rdc_list_free. The server answers
 * in pages (rdc_list_page); this fetches every page. A workload that stays
 * registered during the call is listed exactly once; one registered or
 * deleted meanwhile may or may not be. Errors also: RDC_EPROTO (a server
 * whose pages do not advance, or more than a million items). */
int rdc_list(rdc_client_t *c, rdc_workload_t **out, size_t *n, rdc_error_t *err);
void rdc_list_free(rdc_workload_t *items);

/* Paging (the proto's "Paging"): a page holds at most page_size items (0 =
 * the server's default; the server caps it, and ends a page early rather
 * than exceed its message limit) after page_token (NULL or "" = from the
 * first). next_token, RDC_PAGE_TOKEN_MAX bytes, receives the token of the
 * next page, or "" after the last. Tokens are opaque; one the server does
 * not recognise is RDC_INVALID_ARGUMENT. */
#define RDC_PAGE_TOKEN_MAX 1025 /* bytes with the NUL */

/* One page of workloads, in id order; *out as rdc_list's (rdc_list_free). */
int rdc_list_page(rdc_client_t *c, uint32_t page_size, const char *page_token,
                  rdc_workload_t **out, size_t *n, char *next_token, rdc_error_t *err);

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

/* rdc_sample, with its own deadline: waits at most timeout_s seconds for
 * the rate limiter (and the server), then RDC_DEADLINE_EXCEEDED; 0 = do not
 * wait: RDC_DEADLINE_EXCEEDED at once when the limiter holds it back;
 * INFINITY = no deadline. RDC_EINVAL for a negative or NaN timeout. */
int rdc_sample_wait(rdc_client_t *c, const char *id, const char *token, uint32_t batch_size,
                    double beta, int stratified, double timeout_s, rdc_sample_t *io,
                    rdc_error_t *err);

/* rdc_insert_batch with its own deadline, as rdc_sample_wait. */
int rdc_insert_batch_wait(rdc_client_t *c, const char *id, const char *token, uint32_t n,
                          const rdc_column_t *cols, size_t n_cols, const double *priorities,
                          uint64_t *keys, double timeout_s, rdc_error_t *err);

/* Set the priorities (raw |delta|, transformed as on insert) of n items.
 * Keys whose slot has been overwritten since they were sampled are skipped
 * and counted in *stale; *applied counts the rest. Either may be NULL. */
int rdc_update_priorities(rdc_client_t *c, const char *id, const char *token, size_t n,
                          const uint64_t *keys, const double *priorities, uint64_t *applied,
                          uint64_t *stale, rdc_error_t *err);

/* ------------------------------------------------------------------ */
/* Flow control: the rate limiter and the sampler                      */
/* ------------------------------------------------------------------ */

/* Change the workload's rate limiter (NULL: none): the owner's call (its
 * token); stored by the server across restarts; waiting calls the new
 * limits let through run at once. out (may be NULL) receives the workload
 * as rdc_describe does. Errors: RDC_INVALID_ARGUMENT (a bad limiter),
 * RDC_FAILED_PRECONDITION (none, for a continuously trained learner). */
int rdc_set_rate_limiter(rdc_client_t *c, const char *id, const char *token,
                         const rdc_rate_limiter_t *rl, rdc_workload_t *out, rdc_error_t *err);

/* A sampler: a remote learner's batches on one SampleStream. The server
 * keeps `window` batches sampled ahead (sent, or on their way), each
 * through the rate limiter; rdc_sampler_next takes the next one, usually
 * already here, and tells the server it may sample another. Priority
 * updates travel on the same stream. Not thread-safe: one thread uses a
 * sampler; its client must outlive it. */
typedef struct rdc_sampler rdc_sampler_t;

typedef struct {
  uint32_t batch_size; /* items per batch (required) */
  double beta;         /* IS exponent; NAN = the workload's */
  int stratified;
  uint32_t window;     /* batches in flight, 1..64; 0 = 4 */
} rdc_sampler_opts_t;

/* batch_size 0 (set it), beta NAN, not stratified, window 0 (4). */
void rdc_sampler_opts_init(rdc_sampler_opts_t *o);

/* Open the stream. The server checks the request (token, batch, window)
 * when it reads it: a refusal shows up as the error of the first
 * rdc_sampler_next. RDC_EINVAL for a bad argument here. */
int rdc_sampler_open(rdc_client_t *c, const char *id, const char *token,
                     const rdc_sampler_opts_t *o, rdc_sampler_t **out, rdc_error_t *err);

/* The next batch into io (as rdc_sample fills it), waiting at most
 * timeout_s (INFINITY: no limit): RDC_DEADLINE_EXCEEDED leaves the stream
 * usable (the batch comes later: a rate limiter may hold it back). The
 * stream's end is the server's status (RDC_NOT_FOUND: the workload was
 * deleted; RDC_UNAVAILABLE: the server stops); every later call returns it
 * too. The caller's buffers are reused from batch to batch. */
int rdc_sampler_next(rdc_sampler_t *s, double timeout_s, rdc_sample_t *io, rdc_error_t *err);

/* New priorities (raw |delta|) for n keys of batches taken: sent on the
 * stream (applied in order; an invalid one ends the stream with
 * RDC_INVALID_ARGUMENT at the next call). Waits only for the previous
 * message to leave. */
int rdc_sampler_update(rdc_sampler_t *s, size_t n, const uint64_t *keys,
                       const double *priorities, rdc_error_t *err);

/* Batches taken by rdc_sampler_next so far. */
uint64_t rdc_sampler_taken(const rdc_sampler_t *s);

/* Half-close, wait for the server's status (at most the client's deadline)
 * and free the sampler (always). Batches in flight are dropped. */
int rdc_sampler_close(rdc_sampler_t *s, rdc_error_t *err);

/* ------------------------------------------------------------------ */
/* Hosted learning: train steps and weights                            */
/* ------------------------------------------------------------------ */

/* What one rdc_train_step call did (the proto's TrainStepResponse). */
typedef struct {
  uint32_t steps_done;
  double loss_mean;        /* mean over the steps of the IS-weighted loss */
  double td_abs_mean;      /* mean |delta| over every sampled item */
  double td_abs_max;
  uint64_t weight_version; /* version after the last step */
  double steps_per_second; /* measured over this call */
  uint32_t skipped_steps;  /* non-finite loss or gradients: weights unchanged */
} rdc_train_result_t;

/* Run `steps` (1..65536) gradient steps of the workload's hosted learner
 * on the server: sample, train, write priorities back. The client's
 * deadline bounds the call; the server stops at a step boundary when it
 * runs out and answers RDC_DEADLINE_EXCEEDED (steps done stay done).
 * Errors: RDC_EINVAL (steps 0 or above 65536, out NULL), RDC_FAILED_PRECONDITION
 * (no learner, fewer than min_size items, or continuous mode), RDC_ABORTED
 * (another TrainStep is running on the workload), RDC_EPROTO (the reply
 * claims more steps than asked). out is zeroed first. */
int rdc_train_step(rdc_client_t *c, const char *id, const char *token, uint32_t steps,
                   rdc_train_result_t *out, rdc_error_t *err);

/* Fetch the policy weights (DQN: the Q network, DDPG: the actor) in the
 * flat "RDNN" format (rdc_policy_load reads it) if the server's version is
 * newer than have_version. *version receives the server's version (0: the
 * workload has no weights yet). *len receives the weights' size: 0 when the
 * server's version is not newer (buf untouched), else the bytes copied to
 * buf. If they do not fit in cap bytes the call returns RDC_ETOOSMALL with
 * the needed size in *len and the version in *version (grow buf and call
 * again). buf may be NULL when cap is 0. Errors also: RDC_EINVAL (NULL
 * version or len), RDC_FAILED_PRECONDITION (the workload has no learner),
 * RDC_EPROTO (a newer version without weights, or weights for a version
 * not newer than have_version). */
int rdc_get_weights(rdc_client_t *c, const char *id, const char *token, uint64_t have_version,
                    uint64_t *version, void *buf, size_t cap, size_t *len, rdc_error_t *err);

/* ------------------------------------------------------------------ */
/* Policy forward pass (for actors)                                    */
/* ------------------------------------------------------------------ */

#define RDC_POLICY_MAX_LAYERS 16        /* as the RDNN format */
#define RDC_POLICY_MAX_UNITS 65536u     /* per layer */
#define RDC_POLICY_MAX_PARAMS (1u << 26) /* floats over all layers (256 MiB) */

typedef enum {
  RDC_ACT_IDENTITY = 0,
  RDC_ACT_RELU = 1,
  RDC_ACT_TANH = 2,
} rdc_act_t;

/* A multilayer perceptron loaded from the flat "RDNN" weight format
 * (common/rd_nn_spec.h; GetWeights serves it): layer l computes
 * a_{l+1} = act[l](W_l a_l + b_l), W_l [sizes[l+1] x sizes[l]] row-major.
 * The forward pass is plain C loops (no BLAS: actor networks are small)
 * accumulating in double, one observation at a time.
 *
 * Allocation: a load allocates one block (parameters plus two activation
 * vectors of the widest layer), freed by rdc_policy_free. A load into a
 * policy of the same shape reuses the block, so an actor that pulls new
 * weights every few hundred steps does not allocate. The fields are
 * read-only for callers. Not thread-safe: the forward pass writes the
 * scratch vectors, so give each thread its own policy. */
typedef struct {
  uint32_t n_layers;                      /* 0 until loaded */
  uint32_t sizes[RDC_POLICY_MAX_LAYERS + 1]; /* sizes[0] inputs ... sizes[n_layers] outputs */
  rdc_act_t act[RDC_POLICY_MAX_LAYERS];
  size_t n_params;
  float *params;    /* per layer: W_l, then b_l (the format's layout) */
  float *scratch;   /* 2 x max width */
  size_t capacity;  /* floats in the block (params + scratch) */
} rdc_policy_t;

/* Zero p (unloaded). A zeroed struct ({0}) is the same. */
void rdc_policy_init(rdc_policy_t *p);

/* Parse and validate len bytes of the flat format (exactly: trailing bytes
 * are an error) into p, replacing what p held. Errors (p unchanged):
 * RDC_EINVAL with a message for every malformed buffer (short or
 * truncated, bad magic or version, layer count, sizes, activation codes,
 * parameter count, trailing bytes, a non-finite weight: the message names
 * the layer), RDC_ENOMEM. */
int rdc_policy_load(rdc_policy_t *p, const void *buf, size_t len, rdc_error_t *err);

/* y[0..outputs) = net(x[0..inputs)) for one observation. x and y may not
 * overlap the policy. RDC_EINVAL if p is not loaded (y untouched). */
int rdc_policy_forward(rdc_policy_t *p, const float *x, float *y);

/* Inputs and outputs of a loaded policy (0 if not loaded). */
uint32_t rdc_policy_inputs(const rdc_policy_t *p);
uint32_t rdc_policy_outputs(const rdc_policy_t *p);

/* Free the block and zero p (NULL or unloaded: no-op). */
void rdc_policy_free(rdc_policy_t *p);

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

typedef struct {
  char kind[16];   /* "cpu", "gpu", "fpga" */
  char name[128];
  char fingerprint[128];
  char status[256]; /* "ok", or why the device is unusable */
  char capabilities[64]; /* what the server's backends run there, e.g. "sumtree,table,learner" */
  char model[128];
  uint32_t cores;  /* CPU: logical CPUs; GPU: multiprocessors */
  uint64_t memory_bytes;
  char isa[16];
} rdc_device_t;

typedef struct {
  char version[64];
  double uptime_s;
  size_t n_devices;
  rdc_device_t *devices;
  size_t n_workloads;
  rdc_workload_t *workloads; /* no tokens */
  size_t workload_count;     /* workloads the server holds (>= n_workloads) */
  int workloads_truncated;   /* 1: workloads lists only the first (rdc_list has all) */
  int devices_truncated;     /* 1: not every device fit the server's message limit */
} rdc_server_info_t;

/* Version, uptime, devices, how many workloads there are and the first of
 * them (by id; as many as the server's default page and its message limit
 * allow) with their counters. *out is one allocation, freed with
 * rdc_server_info_free. */
int rdc_server_info(rdc_client_t *c, rdc_server_info_t **out, rdc_error_t *err);
void rdc_server_info_free(rdc_server_info_t *info);

/* The devices the server found, with what each backend runs there: *out
 * is an array of *n (NULL when 0), freed with rdc_devices_free. */
int rdc_list_devices(rdc_client_t *c, rdc_device_t **out, size_t *n, rdc_error_t *err);
void rdc_devices_free(rdc_device_t *devices);

/* ------------------------------------------------------------------ */
/* Plans and profiles                                                  */
/* ------------------------------------------------------------------ */

/* What the server would map spec (which needs a learner) to, registering
 * nothing. gpu_profiles: NULL, or len bytes of JSON lines (as
 * rdc_export_profiles writes them) of an assumed GPU with rows for the
 * spec's shape; fpga_part: NULL or "" for none, else an assumed FPGA part
 * ("u200", "u250", "u280"); ignore_present: leave out the server's own
 * GPUs and FPGAs. The CPU's figures are the server's (measured within its
 * profiling bound, or from its profile store, where they are kept): so a
 * plan needs the server's admin token, as the profile calls do. Errors:
 * RDC_UNAUTHENTICATED / RDC_PERMISSION_DENIED (no or another token),
 * RDC_INVALID_ARGUMENT (a bad spec, unknown part, malformed profile line,
 * no row for the shape), RDC_RESOURCE_EXHAUSTED (gpu_profiles too long, or
 * too many plans and registrations waiting). */
int rdc_plan(rdc_client_t *c, const char *admin_token, const rdc_spec_t *spec,
             const void *gpu_profiles, size_t len, const char *fpga_part, int ignore_present,
             rdc_placement_t *out, rdc_error_t *err);

/* One stored profile (the proto's Profile). */
typedef struct {
  char device[32];      /* fingerprint */
  char primitive[16];   /* "sample", "update", "train" */
  uint32_t threads;
  uint32_t batch, capacity, fanout;
  char algorithm[16];
  char network[192];
  char build[192];
  double latency_s;
  uint32_t reps;
  uint64_t items;
  char source[16];      /* "measured", "imported" */
  int64_t measured_unix;
} rdc_profile_t;

/* The profile calls need the server's admin token (its state directory's
 * admin.token): RDC_UNAUTHENTICATED without one, RDC_PERMISSION_DENIED
 * for another. */

/* Every stored profile, in key order (device, algorithm, network, batch,
 * capacity, fanout, build, primitive, threads): *out an array of *n (NULL
 * when 0), freed with rdc_profiles_free. Fetches every page, as rdc_list. */
int rdc_list_profiles(rdc_client_t *c, const char *admin_token, rdc_profile_t **out, size_t *n,
                      rdc_error_t *err);
void rdc_profiles_free(rdc_profile_t *profiles);

/* One page of them (paging: as rdc_list_page); *out freed with
 * rdc_profiles_free. */
int rdc_list_profiles_page(rdc_client_t *c, const char *admin_token, uint32_t page_size,
                           const char *page_token, rdc_profile_t **out, size_t *n,
                           char *next_token, rdc_error_t *err);

/* Forget every profile; *removed (may be NULL) gets how many. */
int rdc_clear_profiles(rdc_client_t *c, const char *admin_token, uint64_t *removed,
                       rdc_error_t *err);

/* Every profile as JSON lines: *out (malloc'd, NUL-terminated, freed with
 * free) of *len bytes; *count (may be NULL) profiles. */
int rdc_export_profiles(rdc_client_t *c, const char *admin_token, char **out, size_t *len,
                        uint64_t *count, rdc_error_t *err);

/* Import JSON lines (len bytes): all or nothing; the first bad line is
 * RDC_INVALID_ARGUMENT naming it. *imported (may be NULL) gets the count. */
int rdc_import_profiles(rdc_client_t *c, const char *admin_token, const void *jsonl, size_t len,
                        uint64_t *imported, rdc_error_t *err);

/* ------------------------------------------------------------------ */
/* Tenants (the admin's; api/replayd.proto "Tenants")                 */
/* ------------------------------------------------------------------ */

#define RDC_TENANT_NAME_MAX 64 /* 63 characters and the NUL */

/* What a tenant may take; 0 = no limit of its own (weight 0 = 1). */
typedef struct {
  uint64_t max_memory_bytes;
  uint32_t max_workloads;
  uint32_t weight;
  double insert_rows_per_second;
  double sample_rows_per_second;
  uint64_t max_gpu_memory_bytes; /* of its workloads placed on a GPU (from the spec) */
} rdc_tenant_quota_t;

/* rdc_tenant_set changes only the fields named by its mask. */
enum {
  RDC_TQ_MEMORY = 1u << 0,
  RDC_TQ_WORKLOADS = 1u << 1,
  RDC_TQ_WEIGHT = 1u << 2,
  RDC_TQ_INSERT_RATE = 1u << 3,
  RDC_TQ_SAMPLE_RATE = 1u << 4,
  RDC_TQ_GPU_MEMORY = 1u << 5,
};

typedef struct {
  char name[RDC_TENANT_NAME_MAX];
  rdc_tenant_quota_t quota;
  uint32_t workloads;    /* owned now */
  uint64_t memory_bytes; /* charged now */
  int64_t created_unix;
  uint64_t gpu_memory_bytes; /* GPU memory charged now */
} rdc_tenant_t;

/* Add tenant name with quota q (NULL: none); token (RDC_TOKEN_MAX bytes)
 * receives its token, shown only here; out (may be NULL) the tenant.
 * RDC_INVALID_ARGUMENT (name, quota, exists), RDC_RESOURCE_EXHAUSTED. */
int rdc_tenant_add(rdc_client_t *c, const char *admin_token, const char *name,
                   const rdc_tenant_quota_t *q, char *token, rdc_tenant_t *out, rdc_error_t *err);
/* Change the fields of mask (RDC_TQ_*); out (may be NULL) the result. */
int rdc_tenant_set(rdc_client_t *c, const char *admin_token, const char *name,
                   const rdc_tenant_quota_t *q, unsigned mask, rdc_tenant_t *out,
                   rdc_error_t *err);
/* Every tenant in name order: *out (free with free) of *n. */
int rdc_tenant_list(rdc_client_t *c, const char *admin_token, rdc_tenant_t **out, size_t *n,
                    rdc_error_t *err);
/* RDC_FAILED_PRECONDITION for "default" or one that owns workloads. */
int rdc_tenant_remove(rdc_client_t *c, const char *admin_token, const char *name,
                      rdc_error_t *err);

#ifdef __cplusplus
}
#endif

/* ---- Durability: checkpoints, export, import ---- */

/* Take a checkpoint of workload id now (its token or the admin token).
 * *out (may be NULL) receives it. FAILED_PRECONDITION for durability
 * "none"; INTERNAL with the reason when it cannot be written (the previous
 * checkpoints stay). */
int rdc_checkpoint(rdc_client_t *c, const char *id, const char *token,
                   rdc_checkpoint_info_t *out, rdc_error_t *err);

typedef struct {
  char id[RDC_ID_MAX];
  rdc_checkpoint_info_t info;
} rdc_checkpoint_result_t;

/* Every workload whose durability is not "none" (the admin token). *out
 * (free with free()) receives *n results. */
int rdc_checkpoint_all(rdc_client_t *c, const char *admin_token, rdc_checkpoint_result_t **out,
                       size_t *n, rdc_error_t *err);

/* The workload as one checkpoint file (the server's format): *data (free
 * with free()) of *len bytes; *items (may be NULL) its table items.
 * RESOURCE_EXHAUSTED when it exceeds the server's message limit. */
int rdc_export_workload(rdc_client_t *c, const char *id, const char *token, void **data,
                        size_t *len, uint64_t *items, rdc_error_t *err);

/* A new workload from an exported file (name: "" keeps the file's). *out
 * receives it with its token, as rdc_register's. */
int rdc_import_workload(rdc_client_t *c, const void *data, size_t len, const char *name,
                        rdc_workload_t *out, rdc_error_t *err);

/* Streamed, for a table of any size in bounded memory (one chunk of
 * RDC_STREAM_CHUNK_BYTES at a time). rdc_export_stream writes the export
 * file to fd (from its current offset), checking every chunk's order and
 * the whole file's XXH3-64; *bytes and *items (may be NULL) get its size
 * and items. On error fd holds a partial file: the caller removes it.
 * rdc_import_stream sends the file read from fd to its end, with its size
 * and XXH3-64, and receives the new workload as rdc_import_workload; the
 * server checks both before it creates anything. Each wait for the server
 * (a chunk, the reply) is bounded by the client's deadline. */
#define RDC_STREAM_CHUNK_BYTES (1u << 20)
int rdc_export_stream(rdc_client_t *c, const char *id, const char *token, int fd,
                      uint64_t *bytes, uint64_t *items, rdc_error_t *err);
int rdc_import_stream(rdc_client_t *c, int fd, const char *name, rdc_workload_t *out,
                      rdc_error_t *err);

#endif
