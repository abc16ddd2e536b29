/* replayd_client.c - the C client of replayd over gRPC core.
 *
 * Every unary call is one batch of the six client ops on the client's pluck
 * completion queue, plucked by its tag: the call blocks the calling thread
 * and nothing else runs in the background. Request bodies are packed by
 * protobuf-c straight into one gRPC slice; replies are unpacked from one
 * contiguous slice and converted into the caller's structs, so no protobuf
 * or gRPC object outlives a call.
 *
 * A reply is never trusted: an undecodable body, counts that disagree with
 * each other or with the request, or values beyond this library's fixed
 * limits end the call with RDC_EPROTO / RDC_ETOOSMALL, never an abort.
 */
#include "replayd_client.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "client_error.h"
#include "rd_pem.h"
#include "replayd.pb-c.h"

#define RDC_TOKEN_KEY "x-replayd-token"
#define RDC_DEFAULT_MAX_RECEIVE (64 << 20)
#define RDC_DEFAULT_DEADLINE_S 30.0

typedef enum {
  M_REGISTER = 0,
  M_DESCRIBE,
  M_LIST,
  M_DELETE,
  M_INSERT,
  M_INSERT_BATCH,
  M_SAMPLE,
  M_UPDATE,
  M_SERVER_INFO,
  M_TRAIN_STEP,
  M_GET_WEIGHTS,
  M_LIST_DEVICES,
  M_PLAN,
  M_LIST_PROFILES,
  M_CLEAR_PROFILES,
  M_IMPORT_PROFILES,
  M_EXPORT_PROFILES,
  M_CHECKPOINT,
  M_EXPORT_WORKLOAD,
  M_IMPORT_WORKLOAD,
  M_SET_RATE_LIMITER,
  M_SAMPLE_STREAM,
  M_ADD_TENANT,
  M_SET_TENANT,
  M_LIST_TENANTS,
  M_REMOVE_TENANT,
  M_EXPORT_STREAM,
  M_IMPORT_STREAM,
  M_COUNT
} method_t;

static const char *const method_names[M_COUNT] = {
    "RegisterWorkload", "DescribeWorkload", "ListWorkloads",    "DeleteWorkload",
    "Insert",           "InsertBatch",      "Sample",           "UpdatePriorities",
    "ServerInfo",       "TrainStep",        "GetWeights",       "ListDevices",
    "Plan",             "ListProfiles",     "ClearProfiles",    "ImportProfiles",
    "ExportProfiles",   "Checkpoint",       "ExportWorkload",   "ImportWorkload",
    "SetRateLimiter",   "SampleStream",
    "AddTenant",        "SetTenant",        "ListTenants",      "RemoveTenant",
    "ExportStream",     "ImportStream",
};

struct rdc_client {
  grpc_channel *channel;
  grpc_completion_queue *cq; /* pluck queue of the unary calls */
  void *methods[M_COUNT];    /* grpc_channel_register_call handles */
  pthread_mutex_t lock;      /* one unary call at a time; guards deadline_s */
  double deadline_s;
  uint32_t md_flags;         /* GRPC_INITIAL_METADATA_WAIT_FOR_READY or 0 */
  char target[256];
  int tls; /* the channel is TLS: a failed connection may be a certificate */
  char view_token[RDC_TOKEN_MAX]; /* rdc_set_view_token's; guarded by lock */
};

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static const char *const status_names[] = {
    "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *rdc_strerror(int code) {
  if (code >= 0 && code <= RDC_UNAUTHENTICATED) return status_names[code];
  switch (code) {
  case RDC_EINVAL: return "RDC_EINVAL";
  case RDC_ENOMEM: return "RDC_ENOMEM";
  case RDC_ECONNECT: return "RDC_ECONNECT";
  case RDC_EPROTO: return "RDC_EPROTO";
  case RDC_ETOOSMALL: return "RDC_ETOOSMALL";
  case RDC_ECALL: return "RDC_ECALL";
  case RDC_EIO: return "RDC_EIO";
  default: return "RDC_EUNKNOWN";
  }
}

static int ok(rdc_error_t *err) {
  if (err != NULL) {
    err->code = RDC_OK;
    err->msg[0] = '\0';
  }
  return RDC_OK;
}

/* The error of a call that ended with a non-OK status: the server's status
 * details verbatim, or, when it sent none, what is known. */
static int status_error(rdc_error_t *err, const char *method, grpc_status_code status,
                        grpc_slice details) {
  size_t len = GRPC_SLICE_LENGTH(details);
  if (len == 0)
    return set_error(err, (int)status, "%s failed with status %s", method,
                     rdc_strerror((int)status));
  if (len > RDC_ERROR_MSG_MAX - 1) len = RDC_ERROR_MSG_MAX - 1;
  const char *p = (const char *)GRPC_SLICE_START_PTR(details);
  return set_error(err, (int)status, "%.*s", (int)len, p);
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static gpr_timespec deadline_after(double s) {
  /* Past about 30 years a deadline is "none"; this also keeps the
   * microsecond count far from int64 overflow. */
  if (!(s < 1e9)) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_micros((int64_t)(s * 1e6), GPR_TIMESPAN));
}

static grpc_byte_buffer *pack(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  grpc_slice s = grpc_slice_malloc(n);
  protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

/* Unpack a reply; NULL if bb is NULL or undecodable. */
static ProtobufCMessage *unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb) {
  if (bb == NULL) return NULL;
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) return NULL;
  grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  ProtobufCMessage *m =
      protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
  grpc_slice_unref(s);
  return m;
}

/* Metadata values must be printable ASCII; gRPC would refuse the whole
 * batch otherwise, with an error that does not say why. */
static int check_token(const char *token, rdc_error_t *err) {
  if (token == NULL) return RDC_OK;
  for (const char *p = token; *p; p++)
    if (*p < 0x20 || *p > 0x7e)
      return set_error(err, RDC_EINVAL,
                       "the token contains a character not allowed in gRPC metadata "
                       "(byte 0x%02x at offset %zu)",
                       (unsigned char)*p, (size_t)(p - token));
  return RDC_OK;
}

static int check_id(const char *id, rdc_error_t *err) {
  if (id == NULL || id[0] == '\0') return set_error(err, RDC_EINVAL, "no workload id given");
  return RDC_OK;
}

/* Copy a string from a reply into a fixed buffer; RDC_ETOOSMALL if it does
 * not fit (unless cut_ok: labels are cut instead). */
static int copy_str(char *dst, size_t cap, const char *src, int cut_ok, const char *what,
                    rdc_error_t *err) {
  if (src == NULL) src = "";
  size_t len = strlen(src);
  if (len >= cap) {
    if (!cut_ok)
      return set_error(err, RDC_ETOOSMALL, "the server sent a %s of %zu bytes; this client "
                       "holds at most %zu", what, len, cap - 1);
    len = cap - 1;
  }
  memcpy(dst, src, len);
  dst[len] = '\0';
  return RDC_OK;
}

/* ------------------------------------------------------------------ */
/* Connection                                                          */
/* ------------------------------------------------------------------ */

void rdc_connect_opts_init(rdc_connect_opts_t *opts) {
  opts->max_receive_bytes = RDC_DEFAULT_MAX_RECEIVE;
  opts->wait_for_ready = 0;
  opts->deadline_s = RDC_DEFAULT_DEADLINE_S;
  opts->tls_ca_file = NULL;
  opts->tls_cert_file = NULL;
  opts->tls_key_file = NULL;
}

/* A PEM file whole (rd_pem.h), or NULL with err set. */
#define RDC_PEM_MAX (1 << 20)
static char *read_pem(const char *what, const char *path, rdc_error_t *err) {
  char *buf;
  size_t len;
  rd_pem_status_t s = rd_pem_read(path, RDC_PEM_MAX, &buf, &len);
  if (s == RD_PEM_OPEN)
    set_error(err, RDC_EINVAL, "%s %s: %s", what, path, strerror(errno));
  else if (s != RD_PEM_OK)
    set_error(err, s == RD_PEM_NOMEM ? RDC_ENOMEM : RDC_EINVAL, "%s %s: %s", what, path,
              s == RD_PEM_NOMEM ? "out of memory"
                                : "not a PEM file (unreadable, over 1 MiB or binary)");
  return buf;
}

/* The channel's credentials: plaintext, or TLS from o's PEM files. */
static int channel_credentials(const rdc_connect_opts_t *o, grpc_channel_credentials **out,
                               rdc_error_t *err) {
  *out = NULL;
  if (o->tls_ca_file == NULL) {
    if (o->tls_cert_file != NULL || o->tls_key_file != NULL)
      return set_error(err, RDC_EINVAL, "a client certificate needs TLS: set tls_ca_file too");
    *out = grpc_insecure_credentials_create();
    return RDC_OK;
  }
  if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL))
    return set_error(err, RDC_EINVAL, "a client certificate needs both tls_cert_file and "
                     "tls_key_file");
  char *ca = read_pem("TLS CA file", o->tls_ca_file, err), *cert = NULL, *key = NULL;
  int rc = ca ? RDC_OK : err ? err->code : RDC_EINVAL;
  if (rc == RDC_OK && o->tls_cert_file != NULL &&
      ((cert = read_pem("TLS certificate", o->tls_cert_file, err)) == NULL ||
       (key = read_pem("TLS key", o->tls_key_file, err)) == NULL))
    rc = err ? err->code : RDC_EINVAL;
  if (rc == RDC_OK) {
    grpc_ssl_pem_key_cert_pair pair = {key, cert};
    *out = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
    if (*out == NULL) rc = set_error(err, RDC_EINVAL, "gRPC refused the TLS files");
  }
  if (key) memset(key, 0, strlen(key));
  free(ca);
  free(cert);
  free(key);
  return rc;
}

int rdc_connect(const char *target, double timeout_s, rdc_client_t **out, rdc_error_t *err) {
  return rdc_connect_ex(target, timeout_s, NULL, out, err);
}

static const char *state_name(grpc_connectivity_state s) {
  switch (s) {
  case GRPC_CHANNEL_IDLE: return "idle";
  case GRPC_CHANNEL_CONNECTING: return "connecting";
  case GRPC_CHANNEL_READY: return "ready";
  case GRPC_CHANNEL_TRANSIENT_FAILURE: return "connection failed";
  case GRPC_CHANNEL_SHUTDOWN: return "shut down";
  default: return "unknown";
  }
}

static void destroy_cq(grpc_completion_queue *cq) {
  /* A pluck queue may be destroyed only once every event is consumed; the
   * callers have plucked all their tags, so this returns at once. */
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
}

/* Wait for READY. gRPC only tells us the state, not why a connection
 * failed, so the message says what to check. */
static int wait_ready(rdc_client_t *c, double timeout_s, int wait_for_ready, rdc_error_t *err) {
  gpr_timespec deadline = deadline_after(timeout_s);
  const char *check = c->tls ? "is replayd running there with TLS, its certificate signed by "
                               "the CA file and naming this host, and this client's "
                               "certificate one it accepts?"
                             : "is replayd running and listening there?";
  grpc_connectivity_state st = grpc_channel_check_connectivity_state(c->channel, 1);
  while (st != GRPC_CHANNEL_READY) {
    if (st == GRPC_CHANNEL_SHUTDOWN ||
        (st == GRPC_CHANNEL_TRANSIENT_FAILURE && !wait_for_ready))
      return set_error(err, RDC_ECONNECT, "cannot connect to %s: %s (%s)", c->target,
                       state_name(st), check);
    int tag;
    grpc_channel_watch_connectivity_state(c->channel, st, deadline, c->cq, &tag);
    grpc_event ev =
        grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE || !ev.success)
      return set_error(err, RDC_ECONNECT, "cannot connect to %s within %g s (%s; %s)",
                       c->target, timeout_s, state_name(st), check);
    /* try_to_connect again: after a failure the channel may fall back to
     * idle and would otherwise wait for a call to reconnect. */
    st = grpc_channel_check_connectivity_state(c->channel, 1);
  }
  return RDC_OK;
}

int rdc_connect_ex(const char *target, double timeout_s, const rdc_connect_opts_t *opts,
                   rdc_client_t **out, rdc_error_t *err) {
  rdc_connect_opts_t o;
  if (opts != NULL)
    o = *opts;
  else
    rdc_connect_opts_init(&o);
  if (out == NULL) return set_error(err, RDC_EINVAL, "rdc_connect: out is NULL");
  *out = NULL;
  if (target == NULL || target[0] == '\0')
    return set_error(err, RDC_EINVAL, "no server address given (expected HOST:PORT)");
  if (strlen(target) >= sizeof(((rdc_client_t *)0)->target))
    return set_error(err, RDC_EINVAL, "server address longer than %zu bytes",
                     sizeof(((rdc_client_t *)0)->target) - 1);
  if (!(timeout_s > 0))
    return set_error(err, RDC_EINVAL, "connect timeout must be > 0 seconds, not %g", timeout_s);
  if (!(o.deadline_s > 0))
    return set_error(err, RDC_EINVAL, "call deadline must be > 0 seconds, not %g", o.deadline_s);
  if (o.max_receive_bytes <= 0)
    return set_error(err, RDC_EINVAL, "max_receive_bytes must be > 0, not %d",
                     o.max_receive_bytes);

  grpc_init(); /* before any credentials */
  grpc_channel_credentials *creds;
  int crc = channel_credentials(&o, &creds, err);
  if (crc != RDC_OK) {
    grpc_shutdown();
    return crc;
  }
  rdc_client_t *c = calloc(1, sizeof *c);
  if (c == NULL) {
    grpc_channel_credentials_release(creds);
    grpc_shutdown();
    return set_error(err, RDC_ENOMEM, "out of memory");
  }
  snprintf(c->target, sizeof c->target, "%s", target);
  c->tls = o.tls_ca_file != NULL;
  c->deadline_s = o.deadline_s;
  /* Wait-for-ready calls queue while the channel reconnects, and the
   * caller's pluck drives the reconnection; fail-fast calls return
   * UNAVAILABLE at once and leave reconnecting to gRPC's backup poller
   * (every 5 s), so after a daemon restart they recover only that late. */
  c->md_flags = o.wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
  pthread_mutex_init(&c->lock, NULL);

  /* Reconnect backoff: gRPC's default starts at 1 s and grows to 120 s;
   * a client of a daemon that restarts (or starts after its actors) should
   * try again within a few seconds. */
  grpc_arg args[3];
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = o.max_receive_bytes;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
  args[1].value.integer = 200;
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
  args[2].value.integer = 5000;
  grpc_channel_args chargs = {3, args};
  c->channel = grpc_channel_create(target, creds, &chargs);
  grpc_channel_credentials_release(creds);
  c->cq = grpc_completion_queue_create_for_pluck(NULL);
  for (int m = 0; m < M_COUNT; m++) {
    char path[64];
    snprintf(path, sizeof path, "/replayd.v1.Replay/%s", method_names[m]);
    c->methods[m] = grpc_channel_register_call(c->channel, path, NULL, NULL);
  }

  int rc = wait_ready(c, timeout_s, o.wait_for_ready, err);
  if (rc != RDC_OK) {
    rdc_close(c);
    return rc;
  }
  *out = c;
  return ok(err);
}

void rdc_close(rdc_client_t *c) {
  if (c == NULL) return;
  grpc_channel_destroy(c->channel);
  destroy_cq(c->cq);
  pthread_mutex_destroy(&c->lock);
  free(c);
  grpc_shutdown();
}

int rdc_set_view_token(rdc_client_t *c, const char *token, rdc_error_t *err) {
  if (c == NULL) return set_error(err, RDC_EINVAL, "no client (NULL)");
  if (token == NULL) token = "";
  if (strlen(token) >= RDC_TOKEN_MAX)
    return set_error(err, RDC_EINVAL, "the token is longer than %d bytes", RDC_TOKEN_MAX - 1);
  int rc = check_token(token, err);
  if (rc != RDC_OK) return rc;
  pthread_mutex_lock(&c->lock);
  snprintf(c->view_token, sizeof c->view_token, "%s", token);
  pthread_mutex_unlock(&c->lock);
  return ok(err);
}

/* rdc_set_view_token's token, copied into buf (RDC_TOKEN_MAX bytes). */
static const char *view_token(rdc_client_t *c, char *buf) {
  if (c == NULL) return NULL; /* unary's error */
  pthread_mutex_lock(&c->lock);
  memcpy(buf, c->view_token, RDC_TOKEN_MAX);
  pthread_mutex_unlock(&c->lock);
  return buf;
}

int rdc_set_deadline(rdc_client_t *c, double seconds) {
  if (c == NULL || !(seconds > 0)) return RDC_EINVAL;
  pthread_mutex_lock(&c->lock);
  c->deadline_s = seconds;
  pthread_mutex_unlock(&c->lock);
  return RDC_OK;
}

/* ------------------------------------------------------------------ */
/* The unary call                                                      */
/* ------------------------------------------------------------------ */

/* Run method m with request req; on success *resp is the decoded reply
 * (free with protobuf_c_message_free_unpacked). empty_ok: a reply without
 * a message counts as an empty message (DeleteWorkload's is empty, and a
 * server may send no body for it). */
static int unary_dl(rdc_client_t *c, method_t m, const char *token, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, int empty_ok, double deadline_s,
                    ProtobufCMessage **resp, rdc_error_t *err);

static int unary(rdc_client_t *c, method_t m, const char *token, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *resp_desc, int empty_ok,
                 ProtobufCMessage **resp, rdc_error_t *err) {
  return unary_dl(c, m, token, req, resp_desc, empty_ok, -1, resp, err);
}

/* unary, with its own deadline (seconds; < 0: the client's). */
static int unary_dl(rdc_client_t *c, method_t m, const char *token, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, int empty_ok, double deadline_s,
                    ProtobufCMessage **resp, rdc_error_t *err) {
  *resp = NULL;
  if (c == NULL) return set_error(err, RDC_EINVAL, "no client (NULL)");
  int rc = check_token(token, err);
  if (rc != RDC_OK) return rc;

  grpc_byte_buffer *send = pack(req);
  grpc_metadata md;
  memset(&md, 0, sizeof md);
  size_t n_md = 0;
  if (token != NULL && token[0] != '\0') {
    /* Static slices: the key is a literal and the token outlives the call
     * (the call is finished and unreferenced before we return). */
    md.key = grpc_slice_from_static_string(RDC_TOKEN_KEY);
    md.value = grpc_slice_from_static_buffer(token, strlen(token));
    n_md = 1;
  }
  grpc_metadata_array initial_md, trailing_md;
  grpc_metadata_array_init(&initial_md);
  grpc_metadata_array_init(&trailing_md);
  grpc_byte_buffer *recv = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  const char *error_string = NULL;

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].flags = c->md_flags;
  ops[0].data.send_initial_metadata.count = n_md;
  ops[0].data.send_initial_metadata.metadata = n_md ? &md : NULL;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  ops[5].data.recv_status_on_client.error_string = &error_string;

  pthread_mutex_lock(&c->lock);
  grpc_call *call = grpc_channel_create_registered_call(
      c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, c->methods[m],
      deadline_after(deadline_s >= 0 ? deadline_s : c->deadline_s), NULL);
  int tag;
  grpc_call_error ce = grpc_call_start_batch(call, ops, 6, &tag, NULL);
  if (ce != GRPC_CALL_OK) {
    rc = set_error(err, RDC_ECALL, "%s: gRPC refused to start the call (error %d)",
                   method_names[m], (int)ce);
  } else {
    grpc_event ev =
        grpc_completion_queue_pluck(c->cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE || !ev.success)
      rc = set_error(err, RDC_ECALL, "%s: the call failed inside gRPC", method_names[m]);
  }
  grpc_call_unref(call);
  pthread_mutex_unlock(&c->lock);

  if (rc == RDC_OK && ce == GRPC_CALL_OK) {
    if (status != GRPC_STATUS_OK) {
      rc = status_error(err, method_names[m], status, details);
    } else if (recv == NULL && !empty_ok) {
      rc = set_error(err, RDC_EPROTO, "%s: the server ended the call OK without a reply",
                     method_names[m]);
    } else {
      *resp = recv == NULL ? protobuf_c_message_unpack(resp_desc, NULL, 0, (const uint8_t *)"")
                           : unpack(resp_desc, recv);
      if (*resp == NULL)
        rc = set_error(err, RDC_EPROTO, "%s: the server's reply could not be decoded",
                       method_names[m]);
    }
  }
  if (error_string != NULL) gpr_free((void *)error_string);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&initial_md);
  grpc_metadata_array_destroy(&trailing_md);
  if (recv != NULL) grpc_byte_buffer_destroy(recv);
  grpc_byte_buffer_destroy(send);
  return rc == RDC_OK ? ok(err) : rc;
}

/* ------------------------------------------------------------------ */
/* Specs and workloads                                                 */
/* ------------------------------------------------------------------ */

static const char *const dtype_names[] = {"invalid", "float32", "int32", "int64", "uint8", "bool"};

const char *rdc_dtype_name(int dtype) {
  if (dtype < RDC_DTYPE_FLOAT32 || dtype > RDC_DTYPE_BOOL) return dtype_names[0];
  return dtype_names[dtype];
}

size_t rdc_dtype_size(int dtype) {
  switch (dtype) {
  case RDC_DTYPE_FLOAT32: return 4;
  case RDC_DTYPE_INT32: return 4;
  case RDC_DTYPE_INT64: return 8;
  case RDC_DTYPE_UINT8: return 1;
  case RDC_DTYPE_BOOL: return 1;
  default: return 0;
  }
}

size_t rdc_field_bytes(const rdc_field_t *f) {
  if (f->rank > RDC_MAX_RANK) return 0;
  size_t b = rdc_dtype_size((int)f->dtype);
  for (uint32_t d = 0; d < f->rank; d++) b *= f->shape[d];
  return b;
}

void rdc_spec_init(rdc_spec_t *spec) { memset(spec, 0, sizeof *spec); }

static void counters_from_pb(rdc_counters_t *out, const Replayd__V1__WorkloadCounters *c) {
  memset(out, 0, sizeof *out);
  if (c == NULL) return;
  out->inserts = c->inserts;
  out->samples = c->samples;
  out->updates = c->updates;
  out->stale_updates = c->stale_updates;
  out->size = c->size;
  out->bytes = c->bytes;
}

/* The proto's optional scalars: a oneof case and a value per field. The
 * macros keep the 11 of them in one place each way. */
#define LS_OPT_CASE(upper, lower) REPLAYD__V1__LEARNER_SPEC__##upper##_OPT_##upper
#define LS_GET(out, l, upper, lower)                                                           \
  do {                                                                                         \
    (out)->has_##lower = (l)->lower##_opt_case == LS_OPT_CASE(upper, lower);                   \
    (out)->lower = (out)->has_##lower ? (l)->lower : 0;                                        \
  } while (0)
#define LS_PUT(req, in, upper, lower)                                                          \
  do {                                                                                         \
    if ((in)->has_##lower) {                                                                   \
      (req)->lower##_opt_case = LS_OPT_CASE(upper, lower);                                     \
      (req)->lower = (in)->lower;                                                              \
    }                                                                                          \
  } while (0)

static int hidden_from_pb(uint32_t *n_out, uint32_t *out, size_t n, const uint32_t *v,
                          const char *what, rdc_error_t *err) {
  if (n > RDC_MAX_HIDDEN)
    return set_error(err, RDC_ETOOSMALL, "the server sent a learner.%s of %zu layers; this "
                     "client holds at most %d", what, n, RDC_MAX_HIDDEN);
  *n_out = (uint32_t)n;
  for (size_t i = 0; i < n; i++) out[i] = v[i];
  return RDC_OK;
}

static int learner_from_pb(rdc_learner_spec_t *o, const Replayd__V1__LearnerSpec *l,
                           rdc_error_t *err) {
  memset(o, 0, sizeof *o);
  int rc = copy_str(o->algorithm, sizeof o->algorithm, l->algorithm, 0, "learner.algorithm", err);
  if (rc == RDC_OK)
    rc = copy_str(o->activation, sizeof o->activation, l->activation, 0, "learner.activation",
                  err);
  if (rc == RDC_OK) rc = hidden_from_pb(&o->n_hidden, o->hidden, l->n_hidden, l->hidden, "hidden", err);
  if (rc == RDC_OK)
    rc = hidden_from_pb(&o->n_critic_hidden, o->critic_hidden, l->n_critic_hidden,
                        l->critic_hidden, "critic_hidden", err);
  if (rc != RDC_OK) return rc;
  o->batch_size = l->batch_size;
  LS_GET(o, l, LR, lr);
  LS_GET(o, l, CRITIC_LR, critic_lr);
  LS_GET(o, l, GAMMA, gamma);
  o->target_update_period = l->target_update_period;
  LS_GET(o, l, TAU, tau);
  o->relaxation_depth = l->relaxation_depth;
  LS_GET(o, l, GRAD_CLIP, grad_clip);
  LS_GET(o, l, HUBER_DELTA, huber_delta);
  o->has_double_dqn = l->double_dqn_opt_case == LS_OPT_CASE(DOUBLE_DQN, double_dqn);
  o->double_dqn = o->has_double_dqn && l->double_dqn;
  o->num_actions = l->num_actions;
  LS_GET(o, l, ACTION_LOW, action_low);
  LS_GET(o, l, ACTION_HIGH, action_high);
  o->samples_per_insert = l->samples_per_insert;
  o->min_size = l->min_size;
  return RDC_OK;
}

/* Fill req from the caller's learner section, borrowing its strings and
 * lists (they outlive the call). */
static int learner_to_pb(Replayd__V1__LearnerSpec *req, const rdc_learner_spec_t *l,
                         rdc_error_t *err) {
  if (memchr(l->algorithm, '\0', sizeof l->algorithm) == NULL ||
      memchr(l->activation, '\0', sizeof l->activation) == NULL)
    return set_error(err, RDC_EINVAL, "learner: algorithm or activation is not NUL-terminated "
                     "within %d bytes", RDC_LEARNER_STR_MAX);
  if (l->n_hidden > RDC_MAX_HIDDEN || l->n_critic_hidden > RDC_MAX_HIDDEN)
    return set_error(err, RDC_EINVAL, "learner: %u hidden / %u critic_hidden layers; at most %d",
                     l->n_hidden, l->n_critic_hidden, RDC_MAX_HIDDEN);
  replayd__v1__learner_spec__init(req);
  req->algorithm = (char *)l->algorithm;
  req->n_hidden = l->n_hidden;
  req->hidden = l->n_hidden ? (uint32_t *)l->hidden : NULL;
  req->batch_size = l->batch_size;
  req->n_critic_hidden = l->n_critic_hidden;
  req->critic_hidden = l->n_critic_hidden ? (uint32_t *)l->critic_hidden : NULL;
  req->activation = (char *)l->activation;
  LS_PUT(req, l, LR, lr);
  LS_PUT(req, l, CRITIC_LR, critic_lr);
  LS_PUT(req, l, GAMMA, gamma);
  req->target_update_period = l->target_update_period;
  LS_PUT(req, l, TAU, tau);
  req->relaxation_depth = l->relaxation_depth;
  LS_PUT(req, l, GRAD_CLIP, grad_clip);
  LS_PUT(req, l, HUBER_DELTA, huber_delta);
  if (l->has_double_dqn) {
    req->double_dqn_opt_case = LS_OPT_CASE(DOUBLE_DQN, double_dqn);
    req->double_dqn = l->double_dqn != 0;
  }
  req->num_actions = l->num_actions;
  LS_PUT(req, l, ACTION_LOW, action_low);
  LS_PUT(req, l, ACTION_HIGH, action_high);
  req->samples_per_insert = l->samples_per_insert;
  req->min_size = l->min_size;
  return RDC_OK;
}

#define RL_CASE(upper) REPLAYD__V1__RATE_LIMITER_SPEC__##upper##_OPT_##upper

static void limiter_from_pb(rdc_rate_limiter_t *o, const Replayd__V1__RateLimiterSpec *r) {
  memset(o, 0, sizeof *o);
  if (r == NULL) return;
  o->min_size_to_sample = r->min_size_to_sample;
  o->samples_per_insert = r->samples_per_insert;
  o->has_min_diff = r->min_diff_opt_case == RL_CASE(MIN_DIFF);
  o->min_diff = o->has_min_diff ? r->min_diff : 0;
  o->has_max_diff = r->max_diff_opt_case == RL_CASE(MAX_DIFF);
  o->max_diff = o->has_max_diff ? r->max_diff : 0;
  o->has_error_buffer = r->error_buffer_opt_case == RL_CASE(ERROR_BUFFER);
  o->error_buffer = o->has_error_buffer ? r->error_buffer : 0;
}

/* req borrows nothing: every value is a scalar. */
static void limiter_to_pb(Replayd__V1__RateLimiterSpec *req, const rdc_rate_limiter_t *l) {
  replayd__v1__rate_limiter_spec__init(req);
  req->min_size_to_sample = l->min_size_to_sample;
  req->samples_per_insert = l->samples_per_insert;
  if (l->has_min_diff) {
    req->min_diff_opt_case = RL_CASE(MIN_DIFF);
    req->min_diff = l->min_diff;
  }
  if (l->has_max_diff) {
    req->max_diff_opt_case = RL_CASE(MAX_DIFF);
    req->max_diff = l->max_diff;
  }
  if (l->has_error_buffer) {
    req->error_buffer_opt_case = RL_CASE(ERROR_BUFFER);
    req->error_buffer = l->error_buffer;
  }
}

static int spec_from_pb(rdc_spec_t *out, const Replayd__V1__WorkloadSpec *s, rdc_error_t *err) {
  rdc_spec_init(out);
  if (s == NULL) return RDC_OK;
  copy_str(out->name, sizeof out->name, s->name, 1, "name", err);
  if (s->n_fields > RDC_MAX_FIELDS)
    return set_error(err, RDC_ETOOSMALL, "the server sent a schema of %zu fields; this client "
                     "holds at most %d", s->n_fields, RDC_MAX_FIELDS);
  out->n_fields = (uint32_t)s->n_fields;
  for (size_t i = 0; i < s->n_fields; i++) {
    const Replayd__V1__Field *f = s->fields[i];
    rdc_field_t *o = &out->fields[i];
    int rc = copy_str(o->name, sizeof o->name, f->name, 0, "field name", err);
    if (rc != RDC_OK) return rc;
    if (f->n_shape > RDC_MAX_RANK)
      return set_error(err, RDC_ETOOSMALL, "the server sent field \"%s\" of rank %zu; this "
                       "client holds at most %d", o->name, f->n_shape, RDC_MAX_RANK);
    o->dtype = (rdc_dtype_t)f->dtype;
    o->rank = (uint32_t)f->n_shape;
    for (size_t d = 0; d < f->n_shape; d++) o->shape[d] = f->shape[d];
  }
  out->capacity = s->capacity;
  out->fanout = s->fanout;
  out->has_alpha = s->alpha_opt_case == REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
  out->alpha = out->has_alpha ? s->alpha : 0;
  out->has_epsilon = s->epsilon_opt_case == REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON;
  out->epsilon = out->has_epsilon ? s->epsilon : 0;
  out->has_beta = s->beta_opt_case == REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
  out->beta = out->has_beta ? s->beta : 0;
  out->has_max_priority =
      s->max_priority_opt_case == REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  out->max_priority = out->has_max_priority ? s->max_priority : 0;
  out->seed = s->seed;
  out->max_batch = s->max_batch;
  copy_str(out->durability, sizeof out->durability, s->durability, 1, "durability", NULL);
  out->has_checkpoint_interval =
      s->checkpoint_interval_opt_case ==
      REPLAYD__V1__WORKLOAD_SPEC__CHECKPOINT_INTERVAL_OPT_CHECKPOINT_INTERVAL_S;
  out->checkpoint_interval_s = out->has_checkpoint_interval ? s->checkpoint_interval_s : 0;
  if (s->rate_limiter != NULL) {
    out->has_rate_limiter = 1;
    limiter_from_pb(&out->rate_limiter, s->rate_limiter);
  }
  if (s->learner != NULL) {
    out->has_learner = 1;
    return learner_from_pb(&out->learner, s->learner, err);
  }
  return RDC_OK;
}

/* Strings of a placement are for display: cut rather than fail. */
static void placement_from_pb(rdc_placement_t *o, const Replayd__V1__Placement *p) {
  memset(o, 0, sizeof *o);
  copy_str(o->mapping, sizeof o->mapping, p->mapping, 1, "", NULL);
  copy_str(o->learner_device, sizeof o->learner_device, p->learner_device, 1, "", NULL);
  copy_str(o->rmm_device, sizeof o->rmm_device, p->rmm_device, 1, "", NULL);
  copy_str(o->storage_device, sizeof o->storage_device, p->storage_device, 1, "", NULL);
  size_t n = p->n_table < 3 ? p->n_table : 3;
  o->n_rows = n;
  for (size_t i = 0; i < n; i++) {
    const Replayd__V1__PlatformRow *r = p->table[i];
    rdc_platform_row_t *d = &o->rows[i];
    copy_str(d->device, sizeof d->device, r->device, 1, "", NULL);
    d->present = r->present;
    d->learner_s = r->learner_seconds;
    copy_str(d->learner_source, sizeof d->learner_source, r->learner_source, 1, "", NULL);
    d->rmm_s = r->rmm_seconds;
    copy_str(d->rmm_source, sizeof d->rmm_source, r->rmm_source, 1, "", NULL);
    copy_str(d->fingerprint, sizeof d->fingerprint, r->fingerprint, 1, "", NULL);
    copy_str(d->detail, sizeof d->detail, r->detail, 1, "", NULL);
  }
  o->predicted_gps = p->predicted_gps;
  o->measured_gps = p->measured_gps;
  o->profile_cache_hit = p->profile_cache_hit;
  o->register_ms = p->register_ms;
  copy_str(o->running, sizeof o->running, p->running, 1, "", NULL);
  copy_str(o->note, sizeof o->note, p->note, 1, "", NULL);
  copy_str(o->explain, sizeof o->explain, p->explain, 1, "", NULL);
  copy_str(o->bottleneck, sizeof o->bottleneck, p->bottleneck, 1, "", NULL);
  o->batch = p->batch;
  o->profiles_measured = p->profiles_measured;
  o->learner_threads = p->learner_threads;
  copy_str(o->learner_cpus, sizeof o->learner_cpus, p->learner_cpus, 1, "", NULL);
  copy_str(o->sampler_cpus, sizeof o->sampler_cpus, p->sampler_cpus, 1, "", NULL);
  size_t nh = p->n_history < RDC_PLACEMENT_HISTORY_MAX ? p->n_history : RDC_PLACEMENT_HISTORY_MAX;
  for (size_t i = 0; i < nh; i++) {
    const Replayd__V1__PlacementEvent *e = p->history[i];
    rdc_placement_event_t *d = &o->history[i];
    d->unix_ms = e->unix_ms;
    d->moved = e->moved;
    copy_str(d->from, sizeof d->from, e->from, 1, "", NULL);
    copy_str(d->to, sizeof d->to, e->to, 1, "", NULL);
    d->gps_from = e->predicted_gps_from;
    d->gps_to = e->predicted_gps_to;
    d->total_from = e->predicted_total_from;
    d->total_to = e->predicted_total_to;
    copy_str(d->reason, sizeof d->reason, e->reason, 1, "", NULL);
  }
  o->n_history = nh;
  o->history_total = p->history_total;
}

static void checkpoint_from_pb(rdc_checkpoint_info_t *o, const Replayd__V1__CheckpointInfo *c) {
  o->generation = c->generation;
  o->taken_unix_ms = c->taken_unix_ms;
  o->bytes = c->bytes;
  o->seconds = c->seconds;
  o->items = c->items;
  o->learner_full = c->learner_full;
  o->pause_ms = c->pause_ms;
}

static int workload_from_pb(rdc_workload_t *out, const Replayd__V1__Workload *w,
                            rdc_error_t *err) {
  memset(out, 0, sizeof *out);
  int rc = copy_str(out->id, sizeof out->id, w->id, 0, "workload id", err);
  if (rc == RDC_OK) rc = copy_str(out->token, sizeof out->token, w->token, 0, "token", err);
  if (rc == RDC_OK) rc = spec_from_pb(&out->spec, w->spec, err);
  counters_from_pb(&out->counters, w->counters);
  out->created_unix = w->created_unix;
  if (rc == RDC_OK) rc = copy_str(out->tenant, sizeof out->tenant, w->tenant, 1, "", NULL);
  if (w->learner != NULL) {
    const Replayd__V1__LearnerCounters *l = w->learner;
    out->has_learner_counters = 1;
    out->learner.steps = l->steps;
    out->learner.weight_version = l->weight_version;
    out->learner.loss = l->loss;
    out->learner.steps_per_second = l->steps_per_second;
    out->learner.skipped_steps = l->skipped_steps;
    out->learner.late_updates = l->late_updates;
  }
  if (w->placement != NULL) {
    out->has_placement = 1;
    placement_from_pb(&out->placement, w->placement);
  }
  if (w->durability != NULL) {
    const Replayd__V1__Durability *d = w->durability;
    rdc_durability_t *o = &out->durability;
    out->has_durability = 1;
    copy_str(o->mode, sizeof o->mode, d->mode, 1, "", NULL);
    o->checkpoint_interval_s = d->checkpoint_interval_s;
    o->has_last = d->last != NULL;
    if (d->last != NULL) checkpoint_from_pb(&o->last, d->last);
    o->checkpoints = d->checkpoints;
    copy_str(o->last_error, sizeof o->last_error, d->last_error, 1, "", NULL);
    copy_str(o->restored, sizeof o->restored, d->restored, 1, "", NULL);
    o->journal_records = d->journal_records;
    o->journal_commits = d->journal_commits;
    o->journal_commit_ms_max = d->journal_commit_ms_max;
    copy_str(o->journal_error, sizeof o->journal_error, d->journal_error, 1, "", NULL);
  }
  if (w->rate_limiter != NULL) {
    const Replayd__V1__RateLimiterState *r = w->rate_limiter;
    rdc_limiter_state_t *o = &out->rate_limiter;
    out->has_rate_limiter = 1;
    limiter_from_pb(&o->config, r->spec);
    o->inserted = r->inserted;
    o->sampled = r->sampled;
    o->ratio = r->ratio;
    o->blocked_inserts = r->blocked_inserts;
    o->blocked_samples = r->blocked_samples;
    o->insert_wait_s = r->insert_wait_seconds;
    o->sample_wait_s = r->sample_wait_seconds;
    o->insert_waits = r->insert_waits;
    o->sample_waits = r->sample_waits;
  }
  return rc;
}

/* A WorkloadSpec message borrowing the caller's spec. */
typedef struct {
  Replayd__V1__WorkloadSpec req;
  Replayd__V1__Field fields[RDC_MAX_FIELDS];
  Replayd__V1__Field *fieldp[RDC_MAX_FIELDS];
  Replayd__V1__LearnerSpec learner;
  Replayd__V1__RateLimiterSpec rate_limiter;
} spec_pb_t;

static int spec_to_pb(const rdc_spec_t *spec, spec_pb_t *o, rdc_error_t *err) {
  if (spec->n_fields > RDC_MAX_FIELDS)
    return set_error(err, RDC_EINVAL, "a schema has at most %d fields, not %u", RDC_MAX_FIELDS,
                     spec->n_fields);
  if (memchr(spec->name, '\0', sizeof spec->name) == NULL)
    return set_error(err, RDC_EINVAL, "the workload name is not NUL-terminated");

  /* The request borrows the caller's strings and shapes: nothing is
   * allocated until the one packed slice. */
  Replayd__V1__Field *fields = o->fields;
  Replayd__V1__Field **fieldp = o->fieldp;
  for (uint32_t i = 0; i < spec->n_fields; i++) {
    const rdc_field_t *f = &spec->fields[i];
    if (memchr(f->name, '\0', sizeof f->name) == NULL)
      return set_error(err, RDC_EINVAL, "field %u: name is not NUL-terminated within %d bytes",
                       i, RDC_FIELD_NAME_MAX);
    if (f->rank > RDC_MAX_RANK)
      return set_error(err, RDC_EINVAL, "field \"%s\": rank %u exceeds %d", f->name, f->rank,
                       RDC_MAX_RANK);
    replayd__v1__field__init(&fields[i]);
    fields[i].name = (char *)f->name;
    fields[i].dtype = (Replayd__V1__DType)f->dtype;
    fields[i].n_shape = f->rank;
    fields[i].shape = f->rank ? (uint32_t *)f->shape : NULL;
    fieldp[i] = &fields[i];
  }
  Replayd__V1__WorkloadSpec *rq = &o->req;
  replayd__v1__workload_spec__init(rq);
  rq->name = (char *)spec->name;
  rq->n_fields = spec->n_fields;
  rq->fields = spec->n_fields ? fieldp : NULL;
  rq->capacity = spec->capacity;
  rq->fanout = spec->fanout;
  if (spec->has_alpha) {
    rq->alpha_opt_case = REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
    rq->alpha = spec->alpha;
  }
  if (spec->has_epsilon) {
    rq->epsilon_opt_case = REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON;
    rq->epsilon = spec->epsilon;
  }
  if (spec->has_beta) {
    rq->beta_opt_case = REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
    rq->beta = spec->beta;
  }
  if (spec->has_max_priority) {
    rq->max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
    rq->max_priority = spec->max_priority;
  }
  rq->seed = spec->seed;
  rq->max_batch = spec->max_batch;
  if (memchr(spec->durability, '\0', sizeof spec->durability) == NULL)
    return set_error(err, RDC_EINVAL, "the durability is not NUL-terminated");
  rq->durability = (char *)spec->durability;
  if (spec->has_checkpoint_interval) {
    rq->checkpoint_interval_opt_case =
        REPLAYD__V1__WORKLOAD_SPEC__CHECKPOINT_INTERVAL_OPT_CHECKPOINT_INTERVAL_S;
    rq->checkpoint_interval_s = spec->checkpoint_interval_s;
  }
  if (spec->has_rate_limiter) {
    limiter_to_pb(&o->rate_limiter, &spec->rate_limiter);
    rq->rate_limiter = &o->rate_limiter;
  }
  if (spec->has_learner) {
    int rc = learner_to_pb(&o->learner, &spec->learner, err);
    if (rc != RDC_OK) return rc;
    rq->learner = &o->learner;
  }
  return RDC_OK;
}

int rdc_register(rdc_client_t *c, const rdc_spec_t *spec, rdc_workload_t *out,
                 rdc_error_t *err) {
  return rdc_register_as(c, NULL, spec, out, err);
}

int rdc_register_as(rdc_client_t *c, const char *tenant_token, const rdc_spec_t *spec,
                    rdc_workload_t *out, rdc_error_t *err) {
  if (spec == NULL || out == NULL) return set_error(err, RDC_EINVAL, "spec or out is NULL");
  spec_pb_t *sp = malloc(sizeof *sp);
  if (sp == NULL) return set_error(err, RDC_ENOMEM, "out of memory");
  int rc = spec_to_pb(spec, sp, err);
  if (rc != RDC_OK) {
    free(sp);
    return rc;
  }
  ProtobufCMessage *resp;
  rc = unary(c, M_REGISTER, tenant_token, &sp->req.base, &replayd__v1__workload__descriptor, 0,
             &resp, err);
  free(sp);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__Workload *w = (const Replayd__V1__Workload *)resp;
  rc = workload_from_pb(out, w, err);
  if (rc == RDC_OK && out->id[0] == '\0')
    rc = set_error(err, RDC_EPROTO, "RegisterWorkload: the reply has no workload id");
  if (rc == RDC_OK && out->token[0] == '\0')
    rc = set_error(err, RDC_EPROTO, "RegisterWorkload: the reply has no token");
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

int rdc_describe(rdc_client_t *c, const char *id, rdc_workload_t *out, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  if (out == NULL) return set_error(err, RDC_EINVAL, "out is NULL");
  Replayd__V1__WorkloadRef req = REPLAYD__V1__WORKLOAD_REF__INIT;
  req.id = (char *)id;
  ProtobufCMessage *resp;
  char tok[RDC_TOKEN_MAX];
  rc = unary(c, M_DESCRIBE, view_token(c, tok), &req.base, &replayd__v1__workload__descriptor, 0,
             &resp, err);
  if (rc != RDC_OK) return rc;
  rc = workload_from_pb(out, (const Replayd__V1__Workload *)resp, err);
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

/* ------------------------------------------------------------------ */
/* Paging                                                              */
/* ------------------------------------------------------------------ */

#define RDC_MAX_LIST 1000000 /* entries of a list (all its pages) this client accepts */
/* page_size of the calls that fetch every page: the server caps it. */
#define RDC_PAGE_LARGEST UINT32_MAX

/* Copy a reply's next_page_token into next (RDC_PAGE_TOKEN_MAX bytes). */
static int take_token(char *next, const char *tok, const char *method, rdc_error_t *err) {
  if (tok == NULL) tok = "";
  size_t len = strlen(tok);
  if (len >= RDC_PAGE_TOKEN_MAX)
    return set_error(err, RDC_ETOOSMALL, "%s: the server sent a page token of %zu bytes; this "
                     "client holds at most %d", method, len, RDC_PAGE_TOKEN_MAX - 1);
  memcpy(next, tok, len + 1);
  return RDC_OK;
}

/* Every page of a listing: fetch(page_token) gives a page's items (an
 * array of k of `size` bytes each, malloc'd) and the next token; they are
 * appended to *all. A page must advance: an empty page that is not the
 * last, or a token the server gave before, would repeat forever. */
typedef int (*page_fn)(void *ctx, const char *page_token, void **items, size_t *k, char *next,
                       rdc_error_t *err);

static int fetch_all(page_fn fetch, void *ctx, size_t size, const char *method, void **all,
                     size_t *n, rdc_error_t *err) {
  char token[RDC_PAGE_TOKEN_MAX] = "", next[RDC_PAGE_TOKEN_MAX];
  char *v = NULL;
  size_t len = 0;
  int rc;
  for (;;) {
    void *items;
    size_t k;
    rc = fetch(ctx, token, &items, &k, next, err);
    if (rc != RDC_OK) break;
    if (k > RDC_MAX_LIST - len) {
      free(items);
      rc = set_error(err, RDC_EPROTO, "%s: more than %d items", method, RDC_MAX_LIST);
      break;
    }
    if (k > 0) {
      char *nv = realloc(v, (len + k) * size);
      if (nv == NULL) {
        free(items);
        rc = set_error(err, RDC_ENOMEM, "out of memory");
        break;
      }
      v = nv;
      memcpy(v + len * size, items, k * size);
      len += k;
    }
    free(items);
    if (next[0] == '\0') break;
    if (k == 0 || strcmp(next, token) == 0) {
      rc = set_error(err, RDC_EPROTO, "%s: the server's pages do not advance (%s)", method,
                     k == 0 ? "an empty page that is not the last" : "the same page token again");
      break;
    }
    memcpy(token, next, sizeof token);
  }
  if (rc != RDC_OK) {
    free(v);
    return rc;
  }
  *all = v;
  *n = len;
  return RDC_OK;
}

/* ------------------------------------------------------------------ */

int rdc_list_page(rdc_client_t *c, uint32_t page_size, const char *page_token,
                  rdc_workload_t **out, size_t *n, char *next_token, rdc_error_t *err) {
  if (out == NULL || n == NULL || next_token == NULL)
    return set_error(err, RDC_EINVAL, "out, n or next_token is NULL");
  *out = NULL;
  *n = 0;
  next_token[0] = '\0';
  Replayd__V1__ListWorkloadsRequest req = REPLAYD__V1__LIST_WORKLOADS_REQUEST__INIT;
  req.page_size = page_size;
  req.page_token = (char *)(page_token ? page_token : "");
  ProtobufCMessage *resp;
  char tok[RDC_TOKEN_MAX];
  int rc = unary(c, M_LIST, view_token(c, tok), &req.base,
                 &replayd__v1__list_workloads_response__descriptor, 0, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ListWorkloadsResponse *r = (const Replayd__V1__ListWorkloadsResponse *)resp;
  rdc_workload_t *items = NULL;
  if (r->n_workloads > RDC_MAX_LIST) {
    rc = set_error(err, RDC_EPROTO, "ListWorkloads: %zu workloads", r->n_workloads);
  } else if (r->n_workloads > 0) {
    items = calloc(r->n_workloads, sizeof *items);
    if (items == NULL) rc = set_error(err, RDC_ENOMEM, "out of memory");
  }
  for (size_t i = 0; rc == RDC_OK && i < r->n_workloads; i++)
    rc = workload_from_pb(&items[i], r->workloads[i], err);
  if (rc == RDC_OK) rc = take_token(next_token, r->next_page_token, "ListWorkloads", err);
  if (rc == RDC_OK) {
    *out = items;
    *n = r->n_workloads;
  } else {
    free(items);
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

static int list_page_fn(void *ctx, const char *page_token, void **items, size_t *k, char *next,
                        rdc_error_t *err) {
  return rdc_list_page(ctx, RDC_PAGE_LARGEST, page_token, (rdc_workload_t **)items, k, next,
                       err);
}

int rdc_list(rdc_client_t *c, rdc_workload_t **out, size_t *n, rdc_error_t *err) {
  if (out == NULL || n == NULL) return set_error(err, RDC_EINVAL, "out or n is NULL");
  *out = NULL;
  *n = 0;
  if (c == NULL) return set_error(err, RDC_EINVAL, "no client (NULL)");
  void *all;
  int rc = fetch_all(list_page_fn, c, sizeof(rdc_workload_t), "ListWorkloads", &all, n, err);
  if (rc != RDC_OK) return rc;
  *out = all;
  return ok(err);
}

void rdc_list_free(rdc_workload_t *items) { free(items); }

int rdc_delete(rdc_client_t *c, const char *id, const char *token, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  Replayd__V1__WorkloadRef req = REPLAYD__V1__WORKLOAD_REF__INIT;
  req.id = (char *)id;
  ProtobufCMessage *resp;
  rc = unary(c, M_DELETE, token, &req.base, &replayd__v1__delete_workload_response__descriptor, 1,
             &resp, err);
  if (rc != RDC_OK) return rc;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

/* ------------------------------------------------------------------ */
/* Insert                                                              */
/* ------------------------------------------------------------------ */

/* Fill req (borrowing the caller's memory; bins has room for
 * RDC_MAX_FIELDS) after checking the arguments. */
static int insert_request(Replayd__V1__InsertRequest *req, Replayd__V1__RowBatch *rows,
                          ProtobufCBinaryData *bins, const char *id, uint32_t n,
                          const rdc_column_t *cols, size_t n_cols, const double *priorities,
                          rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  if (n_cols > RDC_MAX_FIELDS)
    return set_error(err, RDC_EINVAL, "%zu columns given; a schema has at most %d fields",
                     n_cols, RDC_MAX_FIELDS);
  if (n_cols > 0 && cols == NULL) return set_error(err, RDC_EINVAL, "cols is NULL");
  for (size_t i = 0; i < n_cols; i++) {
    if (cols[i].data == NULL && cols[i].bytes > 0)
      return set_error(err, RDC_EINVAL, "column %zu: data is NULL", i);
    bins[i].data = (uint8_t *)cols[i].data;
    bins[i].len = cols[i].bytes;
  }
  replayd__v1__row_batch__init(rows);
  rows->count = n;
  rows->n_columns = n_cols;
  rows->columns = n_cols ? bins : NULL;
  replayd__v1__insert_request__init(req);
  req->workload_id = (char *)id;
  req->rows = rows;
  if (priorities != NULL) {
    req->n_priorities = n;
    req->priorities = (double *)priorities;
  }
  return RDC_OK;
}

/* A call's own wait for the rate limiter: its deadline (< 0: the client's)
 * and whether it fails fast (timeout 0). */
static int wait_deadline(double timeout_s, double *deadline_s, int *fail_fast,
                         rdc_error_t *err) {
  if (!(timeout_s >= 0))
    return set_error(err, RDC_EINVAL, "timeout must be >= 0 seconds (0: do not wait), not %g",
                     timeout_s);
  *fail_fast = timeout_s == 0;
  *deadline_s = timeout_s == 0 ? -1 : timeout_s;
  return RDC_OK;
}

static int insert_batch(rdc_client_t *c, const char *id, const char *token, uint32_t n,
                        const rdc_column_t *cols, size_t n_cols, const double *priorities,
                        uint64_t *keys, double deadline_s, int fail_fast, rdc_error_t *err) {
  Replayd__V1__InsertRequest req;
  Replayd__V1__RowBatch rows;
  ProtobufCBinaryData bins[RDC_MAX_FIELDS];
  int rc = insert_request(&req, &rows, bins, id, n, cols, n_cols, priorities, err);
  if (rc != RDC_OK) return rc;
  req.fail_fast = fail_fast != 0;
  ProtobufCMessage *resp;
  rc = unary_dl(c, M_INSERT_BATCH, token, &req.base, &replayd__v1__insert_response__descriptor,
                0, deadline_s, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__InsertResponse *r = (const Replayd__V1__InsertResponse *)resp;
  if (keys != NULL && r->n_keys != n)
    rc = set_error(err, RDC_EPROTO, "InsertBatch: %u rows sent but %zu keys came back", n,
                   r->n_keys);
  else if (keys != NULL && n > 0)
    memcpy(keys, r->keys, n * sizeof *keys);
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

int rdc_insert_batch(rdc_client_t *c, const char *id, const char *token, uint32_t n,
                     const rdc_column_t *cols, size_t n_cols, const double *priorities,
                     uint64_t *keys, rdc_error_t *err) {
  return insert_batch(c, id, token, n, cols, n_cols, priorities, keys, -1, 0, err);
}

int rdc_insert_batch_wait(rdc_client_t *c, const char *id, const char *token, uint32_t n,
                          const rdc_column_t *cols, size_t n_cols, const double *priorities,
                          uint64_t *keys, double timeout_s, rdc_error_t *err) {
  double dl = -1;
  int ff = 0;
  int rc = wait_deadline(timeout_s, &dl, &ff, err);
  if (rc != RDC_OK) return rc;
  return insert_batch(c, id, token, n, cols, n_cols, priorities, keys, dl, ff, err);
}

/* A streaming call's state, shared by the insert stream and the sampler:
 * its own completion queue (each op plucked by its tag), the call (no call
 * deadline: a stream lives as long as its actor or learner), the token it
 * sends as initial metadata, what the end op receives, and the sticky
 * error. A send slot (tag_send) and an end op (tag_end) are in both. */
typedef struct {
  const char *method; /* for messages: "Insert", "SampleStream" */
  grpc_completion_queue *cq;
  grpc_call *call;
  double wait_s; /* longest wait for the server per send and at the close */
  char id[RDC_ID_MAX];
  char token[RDC_TOKEN_MAX];
  grpc_metadata md;
  int send_pending, end_pending;
  grpc_byte_buffer *sending, *recv;
  grpc_metadata_array initial_md, trailing_md;
  grpc_status_code status;
  grpc_slice details;
  const char *error_string;
  int half_closed; /* SEND_CLOSE_FROM_CLIENT started */
  int failed;      /* sticky: error holds the stream's error */
  rdc_error_t error;
  char tag_send, tag_end; /* their addresses are the tags */
} stream_call_t;

/* The arguments every stream takes, checked before anything is held. */
static int stream_call_check(const char *id, const char *token, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc == RDC_OK) rc = check_token(token, err);
  if (rc != RDC_OK) return rc;
  if (strlen(id) >= RDC_ID_MAX)
    return set_error(err, RDC_EINVAL, "workload id longer than %d bytes", RDC_ID_MAX - 1);
  if (token != NULL && strlen(token) >= RDC_TOKEN_MAX)
    return set_error(err, RDC_EINVAL, "token longer than %d bytes", RDC_TOKEN_MAX - 1);
  return RDC_OK;
}

/* Create the call (arguments checked by stream_call_check); returns the
 * client's initial-metadata flags for the first send. */
static uint32_t stream_call_init(stream_call_t *sc, rdc_client_t *c, int method,
                                 const char *method_name, const char *id, const char *token) {
  sc->method = method_name;
  snprintf(sc->id, sizeof sc->id, "%s", id);
  if (token != NULL) snprintf(sc->token, sizeof sc->token, "%s", token);
  pthread_mutex_lock(&c->lock);
  sc->wait_s = c->deadline_s;
  uint32_t flags = c->md_flags;
  pthread_mutex_unlock(&c->lock);
  grpc_metadata_array_init(&sc->initial_md);
  grpc_metadata_array_init(&sc->trailing_md);
  sc->details = grpc_empty_slice();
  sc->status = GRPC_STATUS_UNKNOWN;
  sc->cq = grpc_completion_queue_create_for_pluck(NULL);
  sc->call = grpc_channel_create_registered_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, sc->cq,
                                                 c->methods[method],
                                                 gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  return flags;
}

/* op: SEND_INITIAL_METADATA with the token, if there is one. */
static void stream_call_send_md(stream_call_t *sc, grpc_op *op, uint32_t flags) {
  op->op = GRPC_OP_SEND_INITIAL_METADATA;
  op->flags = flags;
  if (sc->token[0] != '\0') {
    sc->md.key = grpc_slice_from_static_string(RDC_TOKEN_KEY);
    sc->md.value = grpc_slice_from_static_buffer(sc->token, strlen(sc->token));
    op->data.send_initial_metadata.count = 1;
    op->data.send_initial_metadata.metadata = &sc->md;
  }
}

/* op: RECV_STATUS_ON_CLIENT into sc. */
static void stream_call_recv_status(stream_call_t *sc, grpc_op *op) {
  op->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  op->data.recv_status_on_client.trailing_metadata = &sc->trailing_md;
  op->data.recv_status_on_client.status = &sc->status;
  op->data.recv_status_on_client.status_details = &sc->details;
  op->data.recv_status_on_client.error_string = &sc->error_string;
}

/* Start ops on the call; *pending marks the tag in flight. A refusal fails
 * the stream. */
static int stream_call_start(stream_call_t *sc, grpc_op *ops, size_t n, void *tag, int *pending) {
  grpc_call_error ce = grpc_call_start_batch(sc->call, ops, n, tag, NULL);
  if (ce != GRPC_CALL_OK) {
    sc->failed = 1;
    return set_error(&sc->error, RDC_ECALL, "%s: gRPC refused a stream operation (error %d)",
                     sc->method, (int)ce);
  }
  *pending = 1;
  return RDC_OK;
}

/* The stream's sticky error, into err. */
static int stream_call_fail(const stream_call_t *sc, rdc_error_t *err) {
  if (err != NULL) *err = sc->error;
  return sc->error.code;
}

/* Release what the call holds (no op may be in flight). */
static void stream_call_release(stream_call_t *sc) {
  if (sc->sending != NULL) grpc_byte_buffer_destroy(sc->sending);
  if (sc->recv != NULL) grpc_byte_buffer_destroy(sc->recv);
  if (sc->error_string != NULL) gpr_free((void *)sc->error_string);
  grpc_slice_unref(sc->details);
  grpc_metadata_array_destroy(&sc->initial_md);
  grpc_metadata_array_destroy(&sc->trailing_md);
  grpc_call_unref(sc->call);
  destroy_cq(sc->cq);
}

/* The insert stream. Ops in flight on its call, each with its own tag:
 * - the send slot (tag_send): the initial metadata, then one message at a
 *   time, then the half-close. gRPC allows one send op of a kind at a time,
 *   and waiting for it before the next is our flow control.
 * - the end (tag_end): RECV_INITIAL_METADATA + RECV_MESSAGE +
 *   RECV_STATUS_ON_CLIENT, started at open; it completes when the call
 *   ends, so a stream the server ended early (bad token, bad batch) is
 *   noticed by peeking at it before each write, without waiting. */
struct rdc_insert_stream {
  stream_call_t sc;
};

/* The end op completed: record why the stream ended. */
static void stream_ended(rdc_insert_stream_t *s) {
  s->sc.end_pending = 0;
  if (s->sc.failed) return;
  if (s->sc.status == GRPC_STATUS_OK && s->sc.half_closed) return; /* the normal end */
  s->sc.failed = 1;
  if (s->sc.status != GRPC_STATUS_OK)
    status_error(&s->sc.error, "Insert", s->sc.status, s->sc.details);
  else
    set_error(&s->sc.error, RDC_EPROTO, "Insert: the server ended the stream before it was closed");
}

/* Cancel the call and wait for every op in flight (they complete promptly
 * once the call is cancelled). */
static void stream_drain(rdc_insert_stream_t *s, grpc_status_code why, const char *msg) {
  if (s->sc.send_pending || s->sc.end_pending)
    grpc_call_cancel_with_status(s->sc.call, why, msg, NULL);
  const gpr_timespec inf = gpr_inf_future(GPR_CLOCK_REALTIME);
  if (s->sc.send_pending) {
    grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_send, inf, NULL);
    s->sc.send_pending = 0;
  }
  if (s->sc.end_pending) {
    grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_end, inf, NULL);
    s->sc.end_pending = 0;
  }
}

static void stream_timeout(rdc_insert_stream_t *s, const char *what) {
  char msg[128];
  snprintf(msg, sizeof msg, "Insert: no answer from the server for %g s while %s", s->sc.wait_s,
           what);
  stream_drain(s, GRPC_STATUS_DEADLINE_EXCEEDED, msg);
  if (!s->sc.failed) {
    s->sc.failed = 1;
    set_error(&s->sc.error, RDC_DEADLINE_EXCEEDED, "%s", msg);
  }
}

/* Wait for the end op at most wait_s (or not at all with wait_s == 0). */
static void stream_wait_end(rdc_insert_stream_t *s, double wait_s, const char *what) {
  if (!s->sc.end_pending) return;
  gpr_timespec dl = wait_s > 0 ? deadline_after(wait_s) : gpr_inf_past(GPR_CLOCK_MONOTONIC);
  grpc_event ev = grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_end, dl, NULL);
  if (ev.type == GRPC_OP_COMPLETE)
    stream_ended(s);
  else if (wait_s > 0)
    stream_timeout(s, what);
}

/* Wait for the send slot to be free. */
static void stream_wait_send(rdc_insert_stream_t *s, const char *what) {
  if (!s->sc.send_pending) return;
  grpc_event ev =
      grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_send, deadline_after(s->sc.wait_s), NULL);
  if (ev.type != GRPC_OP_COMPLETE) {
    stream_timeout(s, what);
    return;
  }
  s->sc.send_pending = 0;
  if (s->sc.sending != NULL) {
    grpc_byte_buffer_destroy(s->sc.sending);
    s->sc.sending = NULL;
  }
  /* A send fails only when the call is over: the status tells why. */
  if (!ev.success) stream_wait_end(s, s->sc.wait_s, "waiting for the status of a failed send");
}

static int stream_start_send(rdc_insert_stream_t *s, grpc_op *op) {
  return stream_call_start(&s->sc, op, 1, &s->sc.tag_send, &s->sc.send_pending);
}

static void stream_free(rdc_insert_stream_t *s) {
  stream_call_release(&s->sc);
  free(s);
}

int rdc_insert_stream_open(rdc_client_t *c, const char *id, const char *token,
                           rdc_insert_stream_t **out, rdc_error_t *err) {
  if (c == NULL || out == NULL) return set_error(err, RDC_EINVAL, "client or out is NULL");
  *out = NULL;
  int rc = stream_call_check(id, token, err);
  if (rc != RDC_OK) return rc;

  rdc_insert_stream_t *s = calloc(1, sizeof *s);
  if (s == NULL) return set_error(err, RDC_ENOMEM, "out of memory");
  uint32_t flags = stream_call_init(&s->sc, c, M_INSERT, "Insert", id, token);

  grpc_op op;
  memset(&op, 0, sizeof op);
  stream_call_send_md(&s->sc, &op, flags);
  if (stream_start_send(s, &op) != RDC_OK) {
    rc = stream_call_fail(&s->sc, err);
    stream_free(s);
    return rc;
  }

  grpc_op end[3];
  memset(end, 0, sizeof end);
  end[0].op = GRPC_OP_RECV_INITIAL_METADATA;
  end[0].data.recv_initial_metadata.recv_initial_metadata = &s->sc.initial_md;
  end[1].op = GRPC_OP_RECV_MESSAGE;
  end[1].data.recv_message.recv_message = &s->sc.recv;
  stream_call_recv_status(&s->sc, &end[2]);
  grpc_call_error ce = grpc_call_start_batch(s->sc.call, end, 3, &s->sc.tag_end, NULL);
  if (ce != GRPC_CALL_OK) {
    stream_drain(s, GRPC_STATUS_CANCELLED, "client could not start the stream");
    stream_free(s);
    return set_error(err, RDC_ECALL, "Insert: gRPC refused to start the stream (error %d)",
                     (int)ce);
  }
  s->sc.end_pending = 1;
  *out = s;
  return ok(err);
}

int rdc_insert_stream_write(rdc_insert_stream_t *s, uint32_t n, const rdc_column_t *cols,
                            size_t n_cols, const double *priorities, rdc_error_t *err) {
  if (s == NULL) return set_error(err, RDC_EINVAL, "stream is NULL");
  if (s->sc.failed) return stream_call_fail(&s->sc, err);
  Replayd__V1__InsertRequest req;
  Replayd__V1__RowBatch rows;
  ProtobufCBinaryData bins[RDC_MAX_FIELDS];
  /* An argument error fails this write only, not the stream. */
  int rc = insert_request(&req, &rows, bins, s->sc.id, n, cols, n_cols, priorities, err);
  if (rc != RDC_OK) return rc;

  stream_wait_end(s, 0, NULL); /* did the server end the stream already? */
  if (!s->sc.failed) stream_wait_send(s, "sending the previous batch");
  if (s->sc.failed) return stream_call_fail(&s->sc, err);

  /* Pack after the wait: at most one packed message exists at a time. */
  s->sc.sending = pack(&req.base);
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_MESSAGE;
  op.data.send_message.send_message = s->sc.sending;
  if (stream_start_send(s, &op) != RDC_OK) return stream_call_fail(&s->sc, err);
  return ok(err);
}

int rdc_insert_stream_close(rdc_insert_stream_t *s, uint64_t *inserted, uint64_t *first_key,
                            rdc_error_t *err) {
  if (s == NULL) return set_error(err, RDC_EINVAL, "stream is NULL");
  if (!s->sc.failed) stream_wait_send(s, "sending the last batch");
  if (!s->sc.failed) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    s->sc.half_closed = 1;
    if (stream_start_send(s, &op) == RDC_OK) stream_wait_send(s, "closing the stream");
  }
  /* The answer: the final reply, or the status that says why not. */
  if (!s->sc.failed) stream_wait_end(s, s->sc.wait_s, "waiting for the stream's answer");
  if (!s->sc.failed) {
    Replayd__V1__InsertResponse *r = (Replayd__V1__InsertResponse *)unpack(
        &replayd__v1__insert_response__descriptor, s->sc.recv);
    if (r == NULL) {
      s->sc.failed = 1;
      set_error(&s->sc.error, RDC_EPROTO, "Insert: the server's reply could not be decoded");
    } else {
      if (inserted != NULL) *inserted = r->inserted;
      if (first_key != NULL) *first_key = r->first_key;
      protobuf_c_message_free_unpacked(&r->base, NULL);
    }
  }
  stream_drain(s, GRPC_STATUS_CANCELLED, "client closed the stream after an error");
  int rc = s->sc.failed ? stream_call_fail(&s->sc, err) : ok(err);
  stream_free(s);
  return rc;
}

void rdc_insert_stream_cancel(rdc_insert_stream_t *s) {
  if (s == NULL) return;
  stream_drain(s, GRPC_STATUS_CANCELLED, "client cancelled the stream");
  stream_free(s);
}

/* ------------------------------------------------------------------ */
/* Sample and update                                                   */
/* ------------------------------------------------------------------ */

/* A SampleResponse into io, checked against the batch asked for. */
static int sample_from_pb(const Replayd__V1__SampleResponse *r, uint32_t batch_size,
                          rdc_sample_t *io, const char *what, rdc_error_t *err) {
  int rc = RDC_OK;
  size_t k = r->n_keys;
  size_t rows_count = r->rows != NULL ? r->rows->count : 0;
  size_t n_cols = r->rows != NULL ? r->rows->n_columns : 0;
  if (k > batch_size)
    rc = set_error(err, RDC_EPROTO, "%s: asked for %u items, the reply has %zu", what,
                   batch_size, k);
  else if (r->n_probabilities != k || r->n_weights != k || rows_count != k)
    rc = set_error(err, RDC_EPROTO,
                   "%s: the reply is inconsistent: %zu keys, %zu probabilities, %zu "
                   "weights, %zu rows",
                   what, k, r->n_probabilities, r->n_weights, rows_count);
  else if (io->columns != NULL && io->n_columns != n_cols)
    rc = set_error(err, RDC_EINVAL,
                   "%s: the reply has %zu columns (one per schema field) but %zu buffers "
                   "were given",
                   what, n_cols, io->n_columns);
  for (size_t i = 0; rc == RDC_OK && io->columns != NULL && i < n_cols; i++)
    if (r->rows->columns[i].len > io->columns[i].capacity)
      rc = set_error(err, RDC_ETOOSMALL, "%s: column %zu needs %zu bytes, its buffer holds %zu",
                     what, i, r->rows->columns[i].len, io->columns[i].capacity);
  if (rc != RDC_OK) return rc;
  if (io->keys != NULL && k) memcpy(io->keys, r->keys, k * sizeof *io->keys);
  if (io->probabilities != NULL && k)
    memcpy(io->probabilities, r->probabilities, k * sizeof *io->probabilities);
  if (io->weights != NULL && k) memcpy(io->weights, r->weights, k * sizeof *io->weights);
  for (size_t i = 0; io->columns != NULL && i < n_cols; i++) {
    size_t len = r->rows->columns[i].len;
    if (len) memcpy(io->columns[i].data, r->rows->columns[i].data, len);
    io->columns[i].bytes = len;
  }
  io->count = (uint32_t)k;
  io->table_size = r->table_size;
  return RDC_OK;
}

static int check_sample_io(const rdc_sample_t *io, rdc_error_t *err) {
  if (io == NULL) return set_error(err, RDC_EINVAL, "io is NULL");
  if (io->n_columns > 0 && io->columns == NULL)
    return set_error(err, RDC_EINVAL, "n_columns is %zu but columns is NULL", io->n_columns);
  return RDC_OK;
}

static int sample(rdc_client_t *c, const char *id, const char *token, uint32_t batch_size,
                  double beta, int stratified, double deadline_s, int fail_fast,
                  rdc_sample_t *io, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc == RDC_OK) rc = check_sample_io(io, err);
  if (rc != RDC_OK) return rc;
  io->count = 0;
  io->table_size = 0;
  Replayd__V1__SampleRequest req = REPLAYD__V1__SAMPLE_REQUEST__INIT;
  req.workload_id = (char *)id;
  req.batch_size = batch_size;
  req.stratified = stratified != 0;
  req.fail_fast = fail_fast != 0;
  if (!isnan(beta)) {
    req.beta_opt_case = REPLAYD__V1__SAMPLE_REQUEST__BETA_OPT_BETA;
    req.beta = beta;
  }
  ProtobufCMessage *resp;
  rc = unary_dl(c, M_SAMPLE, token, &req.base, &replayd__v1__sample_response__descriptor, 0,
                deadline_s, &resp, err);
  if (rc != RDC_OK) return rc;
  rc = sample_from_pb((const Replayd__V1__SampleResponse *)resp, batch_size, io, "Sample", err);
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

int rdc_sample(rdc_client_t *c, const char *id, const char *token, uint32_t batch_size,
               double beta, int stratified, rdc_sample_t *io, rdc_error_t *err) {
  return sample(c, id, token, batch_size, beta, stratified, -1, 0, io, err);
}

int rdc_sample_wait(rdc_client_t *c, const char *id, const char *token, uint32_t batch_size,
                    double beta, int stratified, double timeout_s, rdc_sample_t *io,
                    rdc_error_t *err) {
  double dl = -1;
  int ff = 0;
  int rc = wait_deadline(timeout_s, &dl, &ff, err);
  if (rc != RDC_OK) return rc;
  return sample(c, id, token, batch_size, beta, stratified, dl, ff, io, err);
}

int rdc_update_priorities(rdc_client_t *c, const char *id, const char *token, size_t n,
                          const uint64_t *keys, const double *priorities, uint64_t *applied,
                          uint64_t *stale, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  if (n > 0 && (keys == NULL || priorities == NULL))
    return set_error(err, RDC_EINVAL, "keys or priorities is NULL");
  Replayd__V1__UpdatePrioritiesRequest req = REPLAYD__V1__UPDATE_PRIORITIES_REQUEST__INIT;
  req.workload_id = (char *)id;
  req.n_keys = n;
  req.keys = (uint64_t *)keys;
  req.n_priorities = n;
  req.priorities = (double *)priorities;
  ProtobufCMessage *resp;
  rc = unary(c, M_UPDATE, token, &req.base, &replayd__v1__update_priorities_response__descriptor,
             0, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__UpdatePrioritiesResponse *r =
      (const Replayd__V1__UpdatePrioritiesResponse *)resp;
  if (applied != NULL) *applied = r->applied;
  if (stale != NULL) *stale = r->stale;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

/* ------------------------------------------------------------------ */
/* Flow control: the rate limiter and the sampler                      */
/* ------------------------------------------------------------------ */

int rdc_set_rate_limiter(rdc_client_t *c, const char *id, const char *token,
                         const rdc_rate_limiter_t *rl, rdc_workload_t *out, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  Replayd__V1__SetRateLimiterRequest req = REPLAYD__V1__SET_RATE_LIMITER_REQUEST__INIT;
  Replayd__V1__RateLimiterSpec spec;
  req.workload_id = (char *)id;
  if (rl != NULL) {
    limiter_to_pb(&spec, rl);
    req.rate_limiter = &spec;
  }
  ProtobufCMessage *resp;
  rc = unary(c, M_SET_RATE_LIMITER, token, &req.base, &replayd__v1__workload__descriptor, 0,
             &resp, err);
  if (rc != RDC_OK) return rc;
  if (out != NULL) rc = workload_from_pb(out, (const Replayd__V1__Workload *)resp, err);
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

/* The sampler's stream. Ops in flight on its call, each with its own tag:
 * - the send slot (tag_send): the first message with the initial
 *   metadata, then one message at a time (acknowledgements, updates), then
 *   the half-close;
 * - the read slot (tag_recv): always one RECV_MESSAGE posted, so the next
 *   batch is received while the learner trains on this one (the first one
 *   also takes the initial metadata);
 * - the end (tag_end): RECV_STATUS_ON_CLIENT, posted at open.
 * Acknowledgements: each batch taken is owed to the server, which samples
 * one more per acknowledgement; they go out in groups of a quarter window
 * (at least one), or with an update, whenever the send slot is free, and
 * at once when the whole window is owed. */
struct rdc_sampler {
  stream_call_t sc;
  uint32_t batch, window, ack_every;
  uint32_t owed;         /* batches taken and not yet acknowledged */
  uint64_t taken;
  int recv_pending;
  int first_recv;        /* the read slot also takes the initial metadata */
  char tag_recv;
};

void rdc_sampler_opts_init(rdc_sampler_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->beta = NAN;
}

/* The stream ended (tag_end): record why, unless an error is recorded. */
static void sampler_ended(rdc_sampler_t *s) {
  s->sc.end_pending = 0;
  if (s->sc.failed) return;
  s->sc.failed = 1;
  if (s->sc.status != GRPC_STATUS_OK)
    status_error(&s->sc.error, "SampleStream", s->sc.status, s->sc.details);
  else if (s->sc.half_closed)
    set_error(&s->sc.error, RDC_EINVAL, "SampleStream: the sampler is closed");
  else
    set_error(&s->sc.error, RDC_EPROTO, "SampleStream: the server ended the stream");
}

/* Wait for the end at most wait_s (0: only look). */
static void sampler_wait_end(rdc_sampler_t *s, double wait_s) {
  if (!s->sc.end_pending) return;
  gpr_timespec dl = wait_s > 0 ? deadline_after(wait_s) : gpr_inf_past(GPR_CLOCK_MONOTONIC);
  grpc_event ev = grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_end, dl, NULL);
  if (ev.type == GRPC_OP_COMPLETE) sampler_ended(s);
}

static void sampler_cancel(rdc_sampler_t *s, const char *why) {
  if (s->sc.send_pending || s->recv_pending || s->sc.end_pending)
    grpc_call_cancel_with_status(s->sc.call, GRPC_STATUS_CANCELLED, why, NULL);
  const gpr_timespec inf = gpr_inf_future(GPR_CLOCK_REALTIME);
  if (s->sc.send_pending) grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_send, inf, NULL);
  if (s->recv_pending) grpc_completion_queue_pluck(s->sc.cq, &s->tag_recv, inf, NULL);
  if (s->sc.end_pending) grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_end, inf, NULL);
  s->sc.send_pending = s->recv_pending = s->sc.end_pending = 0;
  if (!s->sc.failed) {
    s->sc.failed = 1;
    set_error(&s->sc.error, RDC_CANCELLED, "SampleStream: %s", why);
  }
}

/* The send slot, free: wait_s > 0 waits that long (then the stream is
 * cancelled: the server stopped reading), 0 only looks. 1 when free. */
static int sampler_send_slot(rdc_sampler_t *s, double wait_s) {
  if (!s->sc.send_pending) return 1;
  gpr_timespec dl = wait_s > 0 ? deadline_after(wait_s) : gpr_inf_past(GPR_CLOCK_MONOTONIC);
  grpc_event ev = grpc_completion_queue_pluck(s->sc.cq, &s->sc.tag_send, dl, NULL);
  if (ev.type != GRPC_OP_COMPLETE) {
    if (wait_s > 0) {
      sampler_cancel(s, "no answer from the server while sending");
      set_error(&s->sc.error, RDC_DEADLINE_EXCEEDED, "SampleStream: the server took no message "
                "for %g s", wait_s);
    }
    return 0;
  }
  s->sc.send_pending = 0;
  if (s->sc.sending) grpc_byte_buffer_destroy(s->sc.sending);
  s->sc.sending = NULL;
  if (!ev.success) sampler_wait_end(s, s->sc.wait_s); /* the call is over: its status says why */
  return !s->sc.failed;
}

/* Send m (acknowledging what is owed) on the free send slot. */
static int sampler_send(rdc_sampler_t *s, Replayd__V1__SampleStreamRequest *m, int with_md,
                        uint32_t flags) {
  m->ack = s->owed;
  s->owed = 0;
  s->sc.sending = pack(&m->base);
  grpc_op ops[2];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (with_md) stream_call_send_md(&s->sc, &ops[n++], flags);
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n].data.send_message.send_message = s->sc.sending;
  n++;
  return stream_call_start(&s->sc, ops, n, &s->sc.tag_send, &s->sc.send_pending);
}

static int sampler_read(rdc_sampler_t *s) {
  grpc_op ops[2];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (s->first_recv) {
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n].data.recv_initial_metadata.recv_initial_metadata = &s->sc.initial_md;
    n++;
    s->first_recv = 0;
  }
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n].data.recv_message.recv_message = &s->sc.recv;
  n++;
  return stream_call_start(&s->sc, ops, n, &s->tag_recv, &s->recv_pending);
}

static void sampler_free(rdc_sampler_t *s) {
  stream_call_release(&s->sc);
  free(s);
}

int rdc_sampler_open(rdc_client_t *c, const char *id, const char *token,
                     const rdc_sampler_opts_t *o, rdc_sampler_t **out, rdc_error_t *err) {
  if (c == NULL || out == NULL || o == NULL)
    return set_error(err, RDC_EINVAL, "client, opts or out is NULL");
  *out = NULL;
  int rc = stream_call_check(id, token, err);
  if (rc != RDC_OK) return rc;
  if (o->batch_size == 0) return set_error(err, RDC_EINVAL, "batch_size must be >= 1");
  if (o->window > 64) return set_error(err, RDC_EINVAL, "window %u is above 64", o->window);

  rdc_sampler_t *s = calloc(1, sizeof *s);
  if (s == NULL) return set_error(err, RDC_ENOMEM, "out of memory");
  s->batch = o->batch_size;
  s->window = o->window ? o->window : 4;
  s->ack_every = s->window / 4 ? s->window / 4 : 1;
  s->first_recv = 1;
  /* No call deadline: a learner samples for hours (each next has its own). */
  uint32_t flags = stream_call_init(&s->sc, c, M_SAMPLE_STREAM, "SampleStream", id, token);
  Replayd__V1__SampleStreamRequest first = REPLAYD__V1__SAMPLE_STREAM_REQUEST__INIT;
  first.workload_id = (char *)s->sc.id;
  first.batch_size = o->batch_size;
  first.stratified = o->stratified != 0;
  first.window = s->window;
  if (!isnan(o->beta)) {
    first.beta_opt_case = REPLAYD__V1__SAMPLE_STREAM_REQUEST__BETA_OPT_BETA;
    first.beta = o->beta;
  }
  grpc_op end;
  memset(&end, 0, sizeof end);
  stream_call_recv_status(&s->sc, &end);
  rc = sampler_send(s, &first, 1, flags);
  if (rc == RDC_OK) rc = sampler_read(s);
  if (rc == RDC_OK) rc = stream_call_start(&s->sc, &end, 1, &s->sc.tag_end, &s->sc.end_pending);
  if (rc != RDC_OK) {
    rc = stream_call_fail(&s->sc, err);
    sampler_cancel(s, "the client could not start the stream");
    sampler_free(s);
    return rc;
  }
  *out = s;
  return ok(err);
}

/* Acknowledge what is owed if the send slot is free (or, the whole window
 * owed, once it is). */
static void sampler_ack(rdc_sampler_t *s) {
  if (s->owed < s->ack_every) return;
  if (!sampler_send_slot(s, s->owed >= s->window ? s->sc.wait_s : 0)) return;
  Replayd__V1__SampleStreamRequest m = REPLAYD__V1__SAMPLE_STREAM_REQUEST__INIT;
  sampler_send(s, &m, 0, 0);
}

int rdc_sampler_next(rdc_sampler_t *s, double timeout_s, rdc_sample_t *io, rdc_error_t *err) {
  if (s == NULL) return set_error(err, RDC_EINVAL, "sampler is NULL");
  int rc = check_sample_io(io, err);
  if (rc != RDC_OK) return rc;
  if (!(timeout_s >= 0)) return set_error(err, RDC_EINVAL, "timeout must be >= 0, not %g",
                                          timeout_s);
  io->count = 0;
  io->table_size = 0;
  if (s->sc.failed) return stream_call_fail(&s->sc, err);
  sampler_ack(s);
  if (s->sc.failed) return stream_call_fail(&s->sc, err);
  gpr_timespec dl = timeout_s == 0 ? gpr_inf_past(GPR_CLOCK_MONOTONIC) : deadline_after(timeout_s);
  grpc_event ev = grpc_completion_queue_pluck(s->sc.cq, &s->tag_recv, dl, NULL);
  if (ev.type != GRPC_OP_COMPLETE)
    return set_error(err, RDC_DEADLINE_EXCEEDED, "SampleStream: no batch within %g s (the rate "
                     "limiter may hold it back); the sampler is still open", timeout_s);
  s->recv_pending = 0;
  grpc_byte_buffer *bb = s->sc.recv;
  s->sc.recv = NULL;
  if (!ev.success || bb == NULL) { /* the stream is over: its status says why */
    if (bb) grpc_byte_buffer_destroy(bb);
    sampler_wait_end(s, s->sc.wait_s);
    if (!s->sc.failed) {
      s->sc.failed = 1;
      set_error(&s->sc.error, RDC_EPROTO, "SampleStream: the stream ended without a status");
    }
    return stream_call_fail(&s->sc, err);
  }
  rc = sampler_read(s); /* the next one comes while this one is used */
  Replayd__V1__SampleResponse *r =
      (Replayd__V1__SampleResponse *)unpack(&replayd__v1__sample_response__descriptor, bb);
  grpc_byte_buffer_destroy(bb);
  if (r == NULL) {
    s->sc.failed = 1;
    set_error(&s->sc.error, RDC_EPROTO, "SampleStream: a batch could not be decoded");
    return stream_call_fail(&s->sc, err);
  }
  if (rc == RDC_OK) rc = sample_from_pb(r, s->batch, io, "SampleStream", err);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  if (rc != RDC_OK) return rc == RDC_ECALL ? stream_call_fail(&s->sc, err) : rc;
  s->owed++;
  s->taken++;
  sampler_ack(s);
  if (s->sc.failed) return stream_call_fail(&s->sc, err);
  return ok(err);
}

int rdc_sampler_update(rdc_sampler_t *s, size_t n, const uint64_t *keys,
                       const double *priorities, rdc_error_t *err) {
  if (s == NULL) return set_error(err, RDC_EINVAL, "sampler is NULL");
  if (n > 0 && (keys == NULL || priorities == NULL))
    return set_error(err, RDC_EINVAL, "keys or priorities is NULL");
  if (s->sc.failed) return stream_call_fail(&s->sc, err);
  sampler_wait_end(s, 0); /* did the server end the stream already? */
  if (!s->sc.failed) sampler_send_slot(s, s->sc.wait_s);
  if (s->sc.failed) return stream_call_fail(&s->sc, err);
  Replayd__V1__SampleStreamRequest m = REPLAYD__V1__SAMPLE_STREAM_REQUEST__INIT;
  m.n_keys = n;
  m.keys = (uint64_t *)keys;
  m.n_priorities = n;
  m.priorities = (double *)priorities;
  if (sampler_send(s, &m, 0, 0) != RDC_OK) return stream_call_fail(&s->sc, err);
  return ok(err);
}

uint64_t rdc_sampler_taken(const rdc_sampler_t *s) { return s ? s->taken : 0; }

int rdc_sampler_close(rdc_sampler_t *s, rdc_error_t *err) {
  if (s == NULL) return set_error(err, RDC_EINVAL, "sampler is NULL");
  int was_failed = s->sc.failed;
  if (!s->sc.failed && sampler_send_slot(s, s->sc.wait_s)) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (stream_call_start(&s->sc, &op, 1, &s->sc.tag_send, &s->sc.send_pending) == RDC_OK) {
      s->sc.half_closed = 1;
      sampler_send_slot(s, s->sc.wait_s);
    }
  }
  /* The server answers a half-close with its status; batches still on
   * their way are read and dropped meanwhile. */
  double until = s->sc.wait_s;
  while (s->sc.end_pending && !was_failed) {
    if (s->recv_pending) {
      grpc_event ev = grpc_completion_queue_pluck(s->sc.cq, &s->tag_recv, deadline_after(until),
                                                  NULL);
      if (ev.type != GRPC_OP_COMPLETE) break;
      s->recv_pending = 0;
      int more = ev.success && s->sc.recv != NULL;
      if (s->sc.recv) grpc_byte_buffer_destroy(s->sc.recv);
      s->sc.recv = NULL;
      if (more && sampler_read(s) == RDC_OK) continue;
    }
    sampler_wait_end(s, until);
    break;
  }
  int rc = RDC_OK;
  if (!was_failed && !s->sc.end_pending && s->sc.status == GRPC_STATUS_OK) {
    rc = ok(err);
  } else if (!was_failed && !s->sc.end_pending) {
    rc = status_error(err, "SampleStream", s->sc.status, s->sc.details);
  } else if (!was_failed) {
    rc = set_error(err, RDC_DEADLINE_EXCEEDED, "SampleStream: no status within %g s of the "
                   "close", until);
  } else {
    rc = stream_call_fail(&s->sc, err);
  }
  sampler_cancel(s, "the client closed the sampler");
  sampler_free(s);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Hosted learning                                                     */
/* ------------------------------------------------------------------ */

#define RDC_MAX_TRAIN_STEPS 65536u /* per TrainStep request (the proto's bound) */

int rdc_train_step(rdc_client_t *c, const char *id, const char *token, uint32_t steps,
                   rdc_train_result_t *out, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  if (out == NULL) return set_error(err, RDC_EINVAL, "out is NULL");
  memset(out, 0, sizeof *out);
  if (steps == 0 || steps > RDC_MAX_TRAIN_STEPS)
    return set_error(err, RDC_EINVAL, "TrainStep: steps must be in [1, %u], not %u",
                     RDC_MAX_TRAIN_STEPS, steps);
  Replayd__V1__TrainStepRequest req = REPLAYD__V1__TRAIN_STEP_REQUEST__INIT;
  req.workload_id = (char *)id;
  req.steps = steps;
  ProtobufCMessage *resp;
  rc = unary(c, M_TRAIN_STEP, token, &req.base, &replayd__v1__train_step_response__descriptor, 0,
             &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__TrainStepResponse *r = (const Replayd__V1__TrainStepResponse *)resp;
  if (r->steps_done > steps || r->skipped_steps > r->steps_done) {
    rc = set_error(err, RDC_EPROTO, "TrainStep: asked for %u steps, the reply says %u done "
                   "(%u skipped)", steps, r->steps_done, r->skipped_steps);
  } else {
    out->steps_done = r->steps_done;
    out->loss_mean = r->loss_mean;
    out->td_abs_mean = r->td_abs_mean;
    out->td_abs_max = r->td_abs_max;
    out->weight_version = r->weight_version;
    out->steps_per_second = r->steps_per_second;
    out->skipped_steps = r->skipped_steps;
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

int rdc_get_weights(rdc_client_t *c, const char *id, const char *token, uint64_t have_version,
                    uint64_t *version, void *buf, size_t cap, size_t *len, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  if (version == NULL || len == NULL) return set_error(err, RDC_EINVAL, "version or len is NULL");
  if (buf == NULL && cap > 0) return set_error(err, RDC_EINVAL, "buf is NULL but cap is %zu", cap);
  *version = 0;
  *len = 0;
  Replayd__V1__GetWeightsRequest req = REPLAYD__V1__GET_WEIGHTS_REQUEST__INIT;
  req.workload_id = (char *)id;
  req.have_version = have_version;
  ProtobufCMessage *resp;
  rc = unary(c, M_GET_WEIGHTS, token, &req.base, &replayd__v1__get_weights_response__descriptor,
             0, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__GetWeightsResponse *r = (const Replayd__V1__GetWeightsResponse *)resp;
  size_t n = r->weights.len;
  /* The contract: weights exactly when the version is newer. Anything else
   * would leave an actor with a version it has no weights for. */
  if (r->version > have_version && n == 0)
    rc = set_error(err, RDC_EPROTO, "GetWeights: version %llu is newer than %llu but came "
                   "without weights", (unsigned long long)r->version,
                   (unsigned long long)have_version);
  else if (r->version <= have_version && n > 0)
    rc = set_error(err, RDC_EPROTO, "GetWeights: %zu bytes of weights for version %llu, which "
                   "is not newer than %llu", n, (unsigned long long)r->version,
                   (unsigned long long)have_version);
  else if (n > cap) {
    *version = r->version;
    *len = n;
    rc = set_error(err, RDC_ETOOSMALL, "GetWeights: the weights of version %llu are %zu bytes; "
                   "the buffer holds %zu", (unsigned long long)r->version, n, cap);
  } else {
    if (n > 0) memcpy(buf, r->weights.data, n);
    *version = r->version;
    *len = n;
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

/* ------------------------------------------------------------------ */
/* Server info                                                         */
/* ------------------------------------------------------------------ */

static void device_extra_from_pb(rdc_device_t *o, const Replayd__V1__Device *d) {
  copy_str(o->capabilities, sizeof o->capabilities, d->capabilities, 1, "", NULL);
  copy_str(o->model, sizeof o->model, d->model, 1, "", NULL);
  o->cores = d->cores;
  o->memory_bytes = d->memory_bytes;
  copy_str(o->isa, sizeof o->isa, d->isa, 1, "", NULL);
}

int rdc_server_info(rdc_client_t *c, rdc_server_info_t **out, rdc_error_t *err) {
  if (out == NULL) return set_error(err, RDC_EINVAL, "out is NULL");
  *out = NULL;
  Replayd__V1__ServerInfoRequest req = REPLAYD__V1__SERVER_INFO_REQUEST__INIT;
  ProtobufCMessage *resp;
  char tok[RDC_TOKEN_MAX];
  int rc = unary(c, M_SERVER_INFO, view_token(c, tok), &req.base,
                 &replayd__v1__server_info_response__descriptor, 0, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ServerInfoResponse *r = (const Replayd__V1__ServerInfoResponse *)resp;
  /* One block: the struct, then the devices, then the workloads (whose
   * alignment, 8, the device array's size keeps: rdc_device_t is a
   * multiple of 8 bytes). */
  _Static_assert(sizeof(rdc_device_t) % _Alignof(rdc_workload_t) == 0, "layout");
  _Static_assert(sizeof(rdc_server_info_t) % _Alignof(rdc_device_t) == 0, "layout");
  size_t bytes = sizeof(rdc_server_info_t);
  if (r->n_devices > SIZE_MAX / 2 / sizeof(rdc_device_t) ||
      r->n_workloads > SIZE_MAX / 2 / sizeof(rdc_workload_t)) {
    protobuf_c_message_free_unpacked(resp, NULL);
    return set_error(err, RDC_EPROTO, "ServerInfo: absurd counts in the reply");
  }
  bytes += r->n_devices * sizeof(rdc_device_t) + r->n_workloads * sizeof(rdc_workload_t);
  rdc_server_info_t *info = calloc(1, bytes);
  if (info == NULL) {
    protobuf_c_message_free_unpacked(resp, NULL);
    return set_error(err, RDC_ENOMEM, "out of memory");
  }
  info->devices = r->n_devices ? (rdc_device_t *)(info + 1) : NULL;
  info->workloads = r->n_workloads
                        ? (rdc_workload_t *)((char *)(info + 1) + r->n_devices * sizeof(rdc_device_t))
                        : NULL;
  info->n_devices = r->n_devices;
  info->n_workloads = r->n_workloads;
  /* A server before paging sends no count: it listed every workload. */
  info->workload_count = r->workload_count > r->n_workloads ? r->workload_count : r->n_workloads;
  info->workloads_truncated = r->workloads_truncated;
  info->devices_truncated = r->devices_truncated;
  copy_str(info->version, sizeof info->version, r->version, 1, "version", err);
  info->uptime_s = r->uptime_seconds;
  for (size_t i = 0; i < r->n_devices; i++) {
    const Replayd__V1__Device *d = r->devices[i];
    rdc_device_t *o = &info->devices[i];
    copy_str(o->kind, sizeof o->kind, d->kind, 1, "", err);
    copy_str(o->name, sizeof o->name, d->name, 1, "", err);
    copy_str(o->fingerprint, sizeof o->fingerprint, d->fingerprint, 1, "", err);
    copy_str(o->status, sizeof o->status, d->status, 1, "", err);
    device_extra_from_pb(o, d);
  }
  for (size_t i = 0; rc == RDC_OK && i < r->n_workloads; i++)
    rc = workload_from_pb(&info->workloads[i], r->workloads[i], err);
  protobuf_c_message_free_unpacked(resp, NULL);
  if (rc != RDC_OK) {
    free(info);
    return rc;
  }
  *out = info;
  return ok(err);
}

void rdc_server_info_free(rdc_server_info_t *info) { free(info); }

/* ------------------------------------------------------------------ */
/* Devices, plans and profiles                                         */
/* ------------------------------------------------------------------ */

int rdc_list_devices(rdc_client_t *c, rdc_device_t **out, size_t *n, rdc_error_t *err) {
  if (out == NULL || n == NULL) return set_error(err, RDC_EINVAL, "out or n is NULL");
  *out = NULL;
  *n = 0;
  Replayd__V1__ListDevicesRequest req = REPLAYD__V1__LIST_DEVICES_REQUEST__INIT;
  ProtobufCMessage *resp;
  int rc = unary(c, M_LIST_DEVICES, NULL, &req.base,
                 &replayd__v1__list_devices_response__descriptor, 0, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ListDevicesResponse *r = (const Replayd__V1__ListDevicesResponse *)resp;
  rdc_device_t *d = NULL;
  if (r->n_devices > RDC_MAX_LIST) {
    rc = set_error(err, RDC_EPROTO, "ListDevices: %zu devices", r->n_devices);
  } else if (r->n_devices > 0) {
    d = calloc(r->n_devices, sizeof *d);
    if (d == NULL) rc = set_error(err, RDC_ENOMEM, "out of memory");
  }
  for (size_t i = 0; rc == RDC_OK && i < r->n_devices; i++) {
    const Replayd__V1__Device *m = r->devices[i];
    copy_str(d[i].kind, sizeof d[i].kind, m->kind, 1, "", NULL);
    copy_str(d[i].name, sizeof d[i].name, m->name, 1, "", NULL);
    copy_str(d[i].fingerprint, sizeof d[i].fingerprint, m->fingerprint, 1, "", NULL);
    copy_str(d[i].status, sizeof d[i].status, m->status, 1, "", NULL);
    device_extra_from_pb(&d[i], m);
  }
  if (rc == RDC_OK) {
    *out = d;
    *n = r->n_devices;
  } else {
    free(d);
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

void rdc_devices_free(rdc_device_t *devices) { free(devices); }

int rdc_plan(rdc_client_t *c, const char *admin_token, const rdc_spec_t *spec,
             const void *gpu_profiles, size_t len, const char *fpga_part, int ignore_present,
             rdc_placement_t *out, rdc_error_t *err) {
  if (spec == NULL || out == NULL) return set_error(err, RDC_EINVAL, "spec or out is NULL");
  if (len > 0 && gpu_profiles == NULL)
    return set_error(err, RDC_EINVAL, "gpu_profiles is NULL with len %zu", len);
  spec_pb_t *sp = malloc(sizeof *sp);
  if (sp == NULL) return set_error(err, RDC_ENOMEM, "out of memory");
  int rc = spec_to_pb(spec, sp, err);
  if (rc != RDC_OK) {
    free(sp);
    return rc;
  }
  Replayd__V1__PlanRequest req = REPLAYD__V1__PLAN_REQUEST__INIT;
  req.spec = &sp->req;
  req.gpu_profiles.data = (uint8_t *)gpu_profiles;
  req.gpu_profiles.len = len;
  req.fpga_part = (char *)(fpga_part ? fpga_part : "");
  req.ignore_present = ignore_present != 0;
  ProtobufCMessage *resp;
  rc = unary(c, M_PLAN, admin_token, &req.base, &replayd__v1__plan_response__descriptor, 0, &resp,
             err);
  free(sp);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__PlanResponse *r = (const Replayd__V1__PlanResponse *)resp;
  if (r->placement == NULL) {
    rc = set_error(err, RDC_EPROTO, "Plan: the reply has no placement");
  } else {
    placement_from_pb(out, r->placement);
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

int rdc_list_profiles_page(rdc_client_t *c, const char *admin_token, uint32_t page_size,
                           const char *page_token, rdc_profile_t **out, size_t *n,
                           char *next_token, rdc_error_t *err) {
  if (out == NULL || n == NULL || next_token == NULL)
    return set_error(err, RDC_EINVAL, "out, n or next_token is NULL");
  *out = NULL;
  *n = 0;
  next_token[0] = '\0';
  Replayd__V1__ListProfilesRequest req = REPLAYD__V1__LIST_PROFILES_REQUEST__INIT;
  req.page_size = page_size;
  req.page_token = (char *)(page_token ? page_token : "");
  ProtobufCMessage *resp;
  int rc = unary(c, M_LIST_PROFILES, admin_token, &req.base,
                 &replayd__v1__list_profiles_response__descriptor, 0, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ListProfilesResponse *r = (const Replayd__V1__ListProfilesResponse *)resp;
  rdc_profile_t *p = NULL;
  if (r->n_profiles > RDC_MAX_LIST) {
    rc = set_error(err, RDC_EPROTO, "ListProfiles: %zu profiles", r->n_profiles);
  } else if (r->n_profiles > 0) {
    p = calloc(r->n_profiles, sizeof *p);
    if (p == NULL) rc = set_error(err, RDC_ENOMEM, "out of memory");
  }
  for (size_t i = 0; rc == RDC_OK && i < r->n_profiles; i++) {
    const Replayd__V1__Profile *m = r->profiles[i];
    rdc_profile_t *o = &p[i];
    copy_str(o->device, sizeof o->device, m->device, 1, "", NULL);
    copy_str(o->primitive, sizeof o->primitive, m->primitive, 1, "", NULL);
    o->threads = m->threads;
    o->batch = m->batch;
    o->capacity = m->capacity;
    o->fanout = m->fanout;
    copy_str(o->algorithm, sizeof o->algorithm, m->algorithm, 1, "", NULL);
    copy_str(o->network, sizeof o->network, m->network, 1, "", NULL);
    copy_str(o->build, sizeof o->build, m->build, 1, "", NULL);
    o->latency_s = m->latency_s;
    o->reps = m->reps;
    o->items = m->items;
    copy_str(o->source, sizeof o->source, m->source, 1, "", NULL);
    o->measured_unix = m->measured_unix;
  }
  if (rc == RDC_OK) rc = take_token(next_token, r->next_page_token, "ListProfiles", err);
  if (rc == RDC_OK) {
    *out = p;
    *n = r->n_profiles;
  } else {
    free(p);
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

typedef struct {
  rdc_client_t *c;
  const char *admin_token;
} profiles_ctx_t;

static int profiles_page_fn(void *ctx, const char *page_token, void **items, size_t *k,
                            char *next, rdc_error_t *err) {
  profiles_ctx_t *p = ctx;
  return rdc_list_profiles_page(p->c, p->admin_token, RDC_PAGE_LARGEST, page_token,
                                (rdc_profile_t **)items, k, next, err);
}

int rdc_list_profiles(rdc_client_t *c, const char *admin_token, rdc_profile_t **out, size_t *n,
                      rdc_error_t *err) {
  if (out == NULL || n == NULL) return set_error(err, RDC_EINVAL, "out or n is NULL");
  *out = NULL;
  *n = 0;
  if (c == NULL) return set_error(err, RDC_EINVAL, "no client (NULL)");
  profiles_ctx_t ctx = {c, admin_token};
  void *all;
  int rc = fetch_all(profiles_page_fn, &ctx, sizeof(rdc_profile_t), "ListProfiles", &all, n,
                     err);
  if (rc != RDC_OK) return rc;
  *out = all;
  return ok(err);
}

void rdc_profiles_free(rdc_profile_t *profiles) { free(profiles); }

int rdc_clear_profiles(rdc_client_t *c, const char *admin_token, uint64_t *removed,
                       rdc_error_t *err) {
  Replayd__V1__ClearProfilesRequest req = REPLAYD__V1__CLEAR_PROFILES_REQUEST__INIT;
  ProtobufCMessage *resp;
  int rc = unary(c, M_CLEAR_PROFILES, admin_token, &req.base,
                 &replayd__v1__clear_profiles_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  if (removed) *removed = ((const Replayd__V1__ClearProfilesResponse *)resp)->removed;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

int rdc_export_profiles(rdc_client_t *c, const char *admin_token, char **out, size_t *len,
                        uint64_t *count, rdc_error_t *err) {
  if (out == NULL || len == NULL) return set_error(err, RDC_EINVAL, "out or len is NULL");
  *out = NULL;
  *len = 0;
  Replayd__V1__ExportProfilesRequest req = REPLAYD__V1__EXPORT_PROFILES_REQUEST__INIT;
  ProtobufCMessage *resp;
  int rc = unary(c, M_EXPORT_PROFILES, admin_token, &req.base,
                 &replayd__v1__export_profiles_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ExportProfilesResponse *r = (const Replayd__V1__ExportProfilesResponse *)resp;
  char *buf = malloc(r->jsonl.len + 1);
  if (buf == NULL) {
    protobuf_c_message_free_unpacked(resp, NULL);
    return set_error(err, RDC_ENOMEM, "out of memory");
  }
  if (r->jsonl.len) memcpy(buf, r->jsonl.data, r->jsonl.len);
  buf[r->jsonl.len] = '\0';
  *out = buf;
  *len = r->jsonl.len;
  if (count) *count = r->count;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

int rdc_import_profiles(rdc_client_t *c, const char *admin_token, const void *jsonl, size_t len,
                        uint64_t *imported, rdc_error_t *err) {
  if (len > 0 && jsonl == NULL) return set_error(err, RDC_EINVAL, "jsonl is NULL");
  Replayd__V1__ImportProfilesRequest req = REPLAYD__V1__IMPORT_PROFILES_REQUEST__INIT;
  req.jsonl.data = (uint8_t *)jsonl;
  req.jsonl.len = len;
  ProtobufCMessage *resp;
  int rc = unary(c, M_IMPORT_PROFILES, admin_token, &req.base,
                 &replayd__v1__import_profiles_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  if (imported) *imported = ((const Replayd__V1__ImportProfilesResponse *)resp)->imported;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

/* ------------------------------------------------------------------ */
/* Durability                                                          */
/* ------------------------------------------------------------------ */

int rdc_checkpoint(rdc_client_t *c, const char *id, const char *token,
                   rdc_checkpoint_info_t *out, rdc_error_t *err) {
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  Replayd__V1__CheckpointRequest req = REPLAYD__V1__CHECKPOINT_REQUEST__INIT;
  req.workload_id = (char *)id;
  ProtobufCMessage *resp;
  rc = unary(c, M_CHECKPOINT, token, &req.base, &replayd__v1__checkpoint_response__descriptor, 1,
             &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__CheckpointResponse *r = (const Replayd__V1__CheckpointResponse *)resp;
  if (out != NULL) {
    memset(out, 0, sizeof *out);
    if (r->n_checkpoints > 0) checkpoint_from_pb(out, r->checkpoints[0]);
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

int rdc_checkpoint_all(rdc_client_t *c, const char *admin_token, rdc_checkpoint_result_t **out,
                       size_t *n, rdc_error_t *err) {
  if (out == NULL || n == NULL) return set_error(err, RDC_EINVAL, "out or n is NULL");
  *out = NULL;
  *n = 0;
  Replayd__V1__CheckpointRequest req = REPLAYD__V1__CHECKPOINT_REQUEST__INIT;
  req.all = 1;
  ProtobufCMessage *resp;
  int rc = unary(c, M_CHECKPOINT, admin_token, &req.base,
                 &replayd__v1__checkpoint_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__CheckpointResponse *r = (const Replayd__V1__CheckpointResponse *)resp;
  size_t k = r->n_workload_ids < r->n_checkpoints ? r->n_workload_ids : r->n_checkpoints;
  rdc_checkpoint_result_t *v = calloc(k ? k : 1, sizeof *v);
  if (v == NULL) {
    protobuf_c_message_free_unpacked(resp, NULL);
    return set_error(err, RDC_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < k; i++) {
    copy_str(v[i].id, sizeof v[i].id, r->workload_ids[i], 1, "", NULL);
    checkpoint_from_pb(&v[i].info, r->checkpoints[i]);
  }
  protobuf_c_message_free_unpacked(resp, NULL);
  *out = v;
  *n = k;
  return ok(err);
}

int rdc_export_workload(rdc_client_t *c, const char *id, const char *token, void **data,
                        size_t *len, uint64_t *items, rdc_error_t *err) {
  if (data == NULL || len == NULL) return set_error(err, RDC_EINVAL, "data or len is NULL");
  *data = NULL;
  *len = 0;
  int rc = check_id(id, err);
  if (rc != RDC_OK) return rc;
  Replayd__V1__ExportWorkloadRequest req = REPLAYD__V1__EXPORT_WORKLOAD_REQUEST__INIT;
  req.workload_id = (char *)id;
  ProtobufCMessage *resp;
  rc = unary(c, M_EXPORT_WORKLOAD, token, &req.base,
             &replayd__v1__export_workload_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ExportWorkloadResponse *r = (const Replayd__V1__ExportWorkloadResponse *)resp;
  void *buf = malloc(r->data.len ? r->data.len : 1);
  if (buf == NULL) {
    protobuf_c_message_free_unpacked(resp, NULL);
    return set_error(err, RDC_ENOMEM, "out of memory for %zu bytes", r->data.len);
  }
  if (r->data.len) memcpy(buf, r->data.data, r->data.len);
  *data = buf;
  *len = r->data.len;
  if (items) *items = r->items;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

int rdc_import_workload(rdc_client_t *c, const void *data, size_t len, const char *name,
                        rdc_workload_t *out, rdc_error_t *err) {
  if (out == NULL || (data == NULL && len > 0))
    return set_error(err, RDC_EINVAL, "data or out is NULL");
  Replayd__V1__ImportWorkloadRequest req = REPLAYD__V1__IMPORT_WORKLOAD_REQUEST__INIT;
  req.data.data = (uint8_t *)data;
  req.data.len = len;
  req.name = (char *)(name ? name : "");
  ProtobufCMessage *resp;
  int rc = unary(c, M_IMPORT_WORKLOAD, NULL, &req.base, &replayd__v1__workload__descriptor, 0,
                 &resp, err);
  if (rc != RDC_OK) return rc;
  rc = workload_from_pb(out, (const Replayd__V1__Workload *)resp, err);
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

/* ---- Streamed export and import ---- */

/* Wait for the op tagged tag: 1 if it succeeded, 0 if it failed, -1 if
 * the server did not answer within sc->wait_s (the call is cancelled). */
static int stream_call_wait(stream_call_t *sc, void *tag) {
  gpr_timespec by = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                 gpr_time_from_millis((int64_t)(sc->wait_s * 1000), GPR_TIMESPAN));
  grpc_event ev = grpc_completion_queue_pluck(sc->cq, tag, by, NULL);
  if (ev.type == GRPC_OP_COMPLETE) return ev.success ? 1 : 0;
  grpc_call_cancel(sc->call, NULL);
  grpc_completion_queue_pluck(sc->cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  return -1;
}

/* The call's status (its RECV_STATUS_ON_CLIENT, tagged tag_end, started):
 * RDC_OK, or its error into sc->error. */
static int stream_call_status(stream_call_t *sc) {
  int got = stream_call_wait(sc, &sc->tag_end);
  sc->end_pending = 0;
  if (got < 0)
    return set_error(&sc->error, RDC_DEADLINE_EXCEEDED, "%s: no answer from the server in %.0f s",
                     sc->method, sc->wait_s);
  if (sc->status != GRPC_STATUS_OK)
    return status_error(&sc->error, sc->method, sc->status, sc->details);
  return RDC_OK;
}

int rdc_export_stream(rdc_client_t *c, const char *id, const char *token, int fd,
                      uint64_t *bytes, uint64_t *items, rdc_error_t *err) {
  if (c == NULL) return set_error(err, RDC_EINVAL, "no client (NULL)");
  if (fd < 0) return set_error(err, RDC_EINVAL, "no file descriptor to write to");
  int rc = stream_call_check(id, token, err);
  if (rc != RDC_OK) return rc;
  stream_call_t sc;
  memset(&sc, 0, sizeof sc);
  uint32_t flags = stream_call_init(&sc, c, M_EXPORT_STREAM, "ExportStream", id, token);
  Replayd__V1__ExportStreamRequest req = REPLAYD__V1__EXPORT_STREAM_REQUEST__INIT;
  req.workload_id = sc.id;
  req.chunk_bytes = RDC_STREAM_CHUNK_BYTES;
  sc.sending = pack(&req.base);
  XXH3_state_t *h = XXH3_createState();
  if (sc.sending == NULL || h == NULL) {
    rc = set_error(&sc.error, RDC_ENOMEM, "out of memory");
    goto out;
  }
  XXH3_64bits_reset(h);
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  stream_call_send_md(&sc, &ops[0], flags);
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = sc.sending;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &sc.initial_md;
  if ((rc = stream_call_start(&sc, ops, 4, &sc.tag_send, &sc.send_pending)) != RDC_OK) goto out;
  /* The status op goes in at once: a call the server ends early ends it. */
  memset(ops, 0, sizeof ops);
  stream_call_recv_status(&sc, &ops[0]);
  if ((rc = stream_call_start(&sc, ops, 1, &sc.tag_end, &sc.end_pending)) != RDC_OK) goto out;
  int sent = stream_call_wait(&sc, &sc.tag_send);
  sc.send_pending = 0;
  uint64_t got = 0, total = 0, digest = 0;
  int have = 0;
  while (sent > 0) { /* one chunk in memory at a time */
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_MESSAGE;
    ops[0].data.recv_message.recv_message = &sc.recv;
    char tag_recv;
    int pending = 0;
    if ((rc = stream_call_start(&sc, ops, 1, &tag_recv, &pending)) != RDC_OK) break;
    int r = stream_call_wait(&sc, &tag_recv);
    if (r <= 0 || sc.recv == NULL) break; /* the end (or a failure): the status says */
    Replayd__V1__ExportChunk *m =
        (Replayd__V1__ExportChunk *)unpack(&replayd__v1__export_chunk__descriptor, sc.recv);
    grpc_byte_buffer_destroy(sc.recv);
    sc.recv = NULL;
    if (m == NULL || m->offset != got || (have && (m->total_bytes != total || m->xxh3 != digest))) {
      rc = set_error(&sc.error, RDC_EPROTO, "ExportStream: chunk at byte %" PRIu64 " is not the "
                     "next one or does not decode", got);
    } else {
      total = m->total_bytes;
      digest = m->xxh3;
      if (items) *items = m->items;
      have = 1;
      for (size_t w = 0; w < m->data.len && rc == RDC_OK;) {
        ssize_t k = write(fd, m->data.data + w, m->data.len - w);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) rc = set_error(&sc.error, RDC_EIO, "ExportStream: writing the file: %s",
                                   k < 0 ? strerror(errno) : "short write");
        else w += (size_t)k;
      }
      XXH3_64bits_update(h, m->data.data, m->data.len);
      got += m->data.len;
    }
    if (m) protobuf_c_message_free_unpacked(&m->base, NULL);
    if (rc != RDC_OK) break;
  }
  if (rc != RDC_OK) grpc_call_cancel(sc.call, NULL); /* the status comes at once */
  int st = stream_call_status(&sc);
  if (rc == RDC_OK) rc = st;
  if (rc == RDC_OK && (!have || got != total))
    rc = set_error(&sc.error, RDC_EPROTO, "ExportStream: %" PRIu64 " bytes came of %" PRIu64,
                   got, total);
  if (rc == RDC_OK && XXH3_64bits_digest(h) != digest)
    rc = set_error(&sc.error, RDC_EPROTO, "ExportStream: checksum mismatch: the file is damaged");
  if (rc == RDC_OK && bytes) *bytes = got;
out:
  XXH3_freeState(h);
  if (sc.end_pending) { /* a failure before the status was read */
    grpc_call_cancel(sc.call, NULL);
    grpc_completion_queue_pluck(sc.cq, &sc.tag_end, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  }
  stream_call_release(&sc);
  if (rc != RDC_OK) return stream_call_fail(&sc, err);
  return ok(err);
}

/* The most data an ImportStream message to this server may carry: its
 * --max-message-bytes (ServerInfo) less room for the message's other
 * fields, at most RDC_STREAM_CHUNK_BYTES. */
static int import_chunk_bytes(rdc_client_t *c, size_t *out, rdc_error_t *err) {
  Replayd__V1__ServerInfoRequest req = REPLAYD__V1__SERVER_INFO_REQUEST__INIT;
  ProtobufCMessage *resp;
  int rc = unary(c, M_SERVER_INFO, NULL, &req.base, &replayd__v1__server_info_response__descriptor,
                 0, &resp, err);
  if (rc != RDC_OK) return rc;
  uint32_t max = ((const Replayd__V1__ServerInfoResponse *)resp)->max_message_bytes;
  protobuf_c_message_free_unpacked(resp, NULL);
  *out = RDC_STREAM_CHUNK_BYTES;
  if (max > 0 && max < RDC_STREAM_CHUNK_BYTES + 1024) /* 0: an older server, 64 MiB */
    *out = max > 2048 ? max - 1024 : 1024;
  return RDC_OK;
}

int rdc_import_stream(rdc_client_t *c, int fd, const char *name, rdc_workload_t *out,
                      rdc_error_t *err) {
  if (c == NULL || out == NULL) return set_error(err, RDC_EINVAL, "no client or out (NULL)");
  if (fd < 0) return set_error(err, RDC_EINVAL, "no file descriptor to read from");
  if (name != NULL && strlen(name) > 4096)
    return set_error(err, RDC_EINVAL, "name longer than 4096 bytes");
  size_t chunk;
  int crc = import_chunk_bytes(c, &chunk, err);
  if (crc != RDC_OK) return crc;
  stream_call_t sc;
  memset(&sc, 0, sizeof sc);
  uint32_t flags = stream_call_init(&sc, c, M_IMPORT_STREAM, "ImportStream", "", NULL);
  uint8_t *buf = malloc(chunk);
  XXH3_state_t *h = XXH3_createState();
  int rc = RDC_OK;
  if (buf == NULL || h == NULL) {
    rc = set_error(&sc.error, RDC_ENOMEM, "out of memory");
    goto out;
  }
  XXH3_64bits_reset(h);
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[0].data.recv_initial_metadata.recv_initial_metadata = &sc.initial_md;
  ops[1].op = GRPC_OP_RECV_MESSAGE;
  ops[1].data.recv_message.recv_message = &sc.recv;
  stream_call_recv_status(&sc, &ops[2]);
  if ((rc = stream_call_start(&sc, ops, 3, &sc.tag_end, &sc.end_pending)) != RDC_OK) goto out;
  uint64_t total = 0;
  int first = 1, done = 0;
  while (!done) { /* one chunk in memory at a time; a failed send: the status says why */
    size_t n = 0;
    while (n < chunk) {
      ssize_t k = read(fd, buf + n, chunk - n);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        rc = set_error(&sc.error, RDC_EIO, "ImportStream: reading the file: %s", strerror(errno));
        break;
      }
      if (k == 0) {
        done = 1;
        break;
      }
      n += (size_t)k;
    }
    if (rc != RDC_OK) break;
    XXH3_64bits_update(h, buf, n);
    total += n;
    Replayd__V1__ImportChunk m = REPLAYD__V1__IMPORT_CHUNK__INIT;
    m.data.data = buf;
    m.data.len = n;
    if (first && name != NULL) m.name = (char *)name;
    if (done) {
      m.end = 1;
      m.total_bytes = total;
      m.xxh3 = XXH3_64bits_digest(h);
    }
    sc.sending = pack(&m.base);
    if (sc.sending == NULL) {
      rc = set_error(&sc.error, RDC_ENOMEM, "out of memory");
      break;
    }
    size_t k = 0;
    memset(ops, 0, sizeof ops);
    if (first) stream_call_send_md(&sc, &ops[k++], flags);
    ops[k].op = GRPC_OP_SEND_MESSAGE;
    ops[k++].data.send_message.send_message = sc.sending;
    if (done) ops[k++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    first = 0;
    if ((rc = stream_call_start(&sc, ops, k, &sc.tag_send, &sc.send_pending)) != RDC_OK) break;
    int r = stream_call_wait(&sc, &sc.tag_send);
    sc.send_pending = 0;
    grpc_byte_buffer_destroy(sc.sending);
    sc.sending = NULL;
    if (r <= 0) break; /* the server ended the call (or the wait ran out): its status */
  }
  if (rc != RDC_OK) grpc_call_cancel(sc.call, NULL); /* the server creates nothing */
  int st = stream_call_status(&sc);
  if (rc == RDC_OK) rc = st;
  if (rc == RDC_OK && sc.recv == NULL)
    rc = set_error(&sc.error, RDC_EPROTO, "ImportStream: the server ended OK without a reply");
  if (rc == RDC_OK) {
    ProtobufCMessage *resp = unpack(&replayd__v1__workload__descriptor, sc.recv);
    if (resp == NULL) {
      rc = set_error(&sc.error, RDC_EPROTO, "ImportStream: the reply does not decode");
    } else {
      rc = workload_from_pb(out, (const Replayd__V1__Workload *)resp, &sc.error);
      protobuf_c_message_free_unpacked(resp, NULL);
    }
  }
out:
  free(buf);
  XXH3_freeState(h);
  if (sc.end_pending) {
    grpc_call_cancel(sc.call, NULL);
    grpc_completion_queue_pluck(sc.cq, &sc.tag_end, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  }
  stream_call_release(&sc);
  if (rc != RDC_OK) return stream_call_fail(&sc, err);
  return ok(err);
}

/* ------------------------------------------------------------------ */
/* Tenants                                                             */
/* ------------------------------------------------------------------ */

static void tenant_from_pb(rdc_tenant_t *out, const Replayd__V1__Tenant *t) {
  memset(out, 0, sizeof *out);
  copy_str(out->name, sizeof out->name, t->name, 1, "", NULL);
  if (t->quota != NULL) {
    out->quota.max_memory_bytes = t->quota->max_memory_bytes;
    out->quota.max_workloads = t->quota->max_workloads;
    out->quota.weight = t->quota->weight;
    out->quota.insert_rows_per_second = t->quota->insert_rows_per_second;
    out->quota.sample_rows_per_second = t->quota->sample_rows_per_second;
    out->quota.max_gpu_memory_bytes = t->quota->max_gpu_memory_bytes;
  }
  out->workloads = t->workloads;
  out->memory_bytes = t->memory_bytes;
  out->gpu_memory_bytes = t->gpu_memory_bytes;
  out->created_unix = t->created_unix;
}

int rdc_tenant_add(rdc_client_t *c, const char *admin_token, const char *name,
                   const rdc_tenant_quota_t *q, char *token, rdc_tenant_t *out, rdc_error_t *err) {
  if (name == NULL || token == NULL) return set_error(err, RDC_EINVAL, "name or token is NULL");
  Replayd__V1__AddTenantRequest req = REPLAYD__V1__ADD_TENANT_REQUEST__INIT;
  Replayd__V1__TenantQuota qm = REPLAYD__V1__TENANT_QUOTA__INIT;
  if (q != NULL) {
    qm.max_memory_bytes = q->max_memory_bytes;
    qm.max_workloads = q->max_workloads;
    qm.weight = q->weight;
    qm.insert_rows_per_second = q->insert_rows_per_second;
    qm.sample_rows_per_second = q->sample_rows_per_second;
    qm.max_gpu_memory_bytes = q->max_gpu_memory_bytes;
  }
  req.name = (char *)name;
  req.quota = &qm;
  ProtobufCMessage *resp;
  int rc = unary(c, M_ADD_TENANT, admin_token, &req.base, &replayd__v1__tenant__descriptor, 0,
                 &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__Tenant *t = (const Replayd__V1__Tenant *)resp;
  rc = copy_str(token, RDC_TOKEN_MAX, t->token, 0, "tenant token", err);
  if (rc == RDC_OK && out != NULL) tenant_from_pb(out, t);
  protobuf_c_message_free_unpacked(resp, NULL);
  return rc == RDC_OK ? ok(err) : rc;
}

int rdc_tenant_set(rdc_client_t *c, const char *admin_token, const char *name,
                   const rdc_tenant_quota_t *q, unsigned mask, rdc_tenant_t *out,
                   rdc_error_t *err) {
  if (name == NULL || q == NULL) return set_error(err, RDC_EINVAL, "name or quota is NULL");
  Replayd__V1__SetTenantRequest req = REPLAYD__V1__SET_TENANT_REQUEST__INIT;
  req.name = (char *)name;
  if (mask & RDC_TQ_MEMORY) {
    req.max_memory_opt_case = REPLAYD__V1__SET_TENANT_REQUEST__MAX_MEMORY_OPT_MAX_MEMORY_BYTES;
    req.max_memory_bytes = q->max_memory_bytes;
  }
  if (mask & RDC_TQ_WORKLOADS) {
    req.max_workloads_opt_case = REPLAYD__V1__SET_TENANT_REQUEST__MAX_WORKLOADS_OPT_MAX_WORKLOADS;
    req.max_workloads = q->max_workloads;
  }
  if (mask & RDC_TQ_WEIGHT) {
    req.weight_opt_case = REPLAYD__V1__SET_TENANT_REQUEST__WEIGHT_OPT_WEIGHT;
    req.weight = q->weight;
  }
  if (mask & RDC_TQ_INSERT_RATE) {
    req.insert_rate_opt_case =
        REPLAYD__V1__SET_TENANT_REQUEST__INSERT_RATE_OPT_INSERT_ROWS_PER_SECOND;
    req.insert_rows_per_second = q->insert_rows_per_second;
  }
  if (mask & RDC_TQ_SAMPLE_RATE) {
    req.sample_rate_opt_case =
        REPLAYD__V1__SET_TENANT_REQUEST__SAMPLE_RATE_OPT_SAMPLE_ROWS_PER_SECOND;
    req.sample_rows_per_second = q->sample_rows_per_second;
  }
  if (mask & RDC_TQ_GPU_MEMORY) {
    req.max_gpu_memory_opt_case =
        REPLAYD__V1__SET_TENANT_REQUEST__MAX_GPU_MEMORY_OPT_MAX_GPU_MEMORY_BYTES;
    req.max_gpu_memory_bytes = q->max_gpu_memory_bytes;
  }
  ProtobufCMessage *resp;
  int rc = unary(c, M_SET_TENANT, admin_token, &req.base, &replayd__v1__tenant__descriptor, 0,
                 &resp, err);
  if (rc != RDC_OK) return rc;
  if (out != NULL) tenant_from_pb(out, (const Replayd__V1__Tenant *)resp);
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

int rdc_tenant_list(rdc_client_t *c, const char *admin_token, rdc_tenant_t **out, size_t *n,
                    rdc_error_t *err) {
  if (out == NULL || n == NULL) return set_error(err, RDC_EINVAL, "out or n is NULL");
  *out = NULL;
  *n = 0;
  Replayd__V1__ListTenantsRequest req = REPLAYD__V1__LIST_TENANTS_REQUEST__INIT;
  ProtobufCMessage *resp;
  int rc = unary(c, M_LIST_TENANTS, admin_token, &req.base,
                 &replayd__v1__list_tenants_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  const Replayd__V1__ListTenantsResponse *r = (const Replayd__V1__ListTenantsResponse *)resp;
  rdc_tenant_t *v = calloc(r->n_tenants ? r->n_tenants : 1, sizeof *v);
  if (v == NULL) {
    protobuf_c_message_free_unpacked(resp, NULL);
    return set_error(err, RDC_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < r->n_tenants; i++) tenant_from_pb(&v[i], r->tenants[i]);
  *out = v;
  *n = r->n_tenants;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}

int rdc_tenant_remove(rdc_client_t *c, const char *admin_token, const char *name,
                      rdc_error_t *err) {
  if (name == NULL) return set_error(err, RDC_EINVAL, "name is NULL");
  Replayd__V1__RemoveTenantRequest req = REPLAYD__V1__REMOVE_TENANT_REQUEST__INIT;
  req.name = (char *)name;
  ProtobufCMessage *resp;
  int rc = unary(c, M_REMOVE_TENANT, admin_token, &req.base,
                 &replayd__v1__remove_tenant_response__descriptor, 1, &resp, err);
  if (rc != RDC_OK) return rc;
  protobuf_c_message_free_unpacked(resp, NULL);
  return ok(err);
}
