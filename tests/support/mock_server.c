/* mock_server.c - see mock_server.h.
 *
 * One thread, one call at a time: it posts a catch-all request
 * (grpc_server_request_call), serves the call to completion, then posts the
 * next, so at most one op is ever outstanding on its queue and each wait
 * knows which tag comes next. Calls that arrive meanwhile wait in gRPC's
 * queue of unmatched calls.
 */
#include "mock_server.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
  grpc_server *server;
  grpc_completion_queue *cq;
  grpc_completion_queue *shutdown_cq;
  pthread_t thread;
  int port;
  pthread_mutex_t lock;
  /* script */
  int status;
  char details[256];
  uint8_t *reply;
  size_t reply_len;
  int scripted, no_message, delay_ms;
  int fail_at, fail_status;
  char fail_details[256];
  /* record */
  mock_seen_t seen;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static grpc_event wait_tag(void *tag) {
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(g.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return ev;
    if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag) return ev;
    fprintf(stderr, "mock: unexpected event (type %d)\n", (int)ev.type);
  }
}

static grpc_slice read_body(grpc_byte_buffer *bb) {
  grpc_byte_buffer_reader rd;
  if (bb == NULL || !grpc_byte_buffer_reader_init(&rd, bb)) return grpc_empty_slice();
  grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  return s;
}

/* The last batch of a call: metadata, message (if any), status, and the
 * client's close. */
static void finish(grpc_call *call, int status, const char *details, const uint8_t *msg,
                   size_t len, int send_msg) {
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  grpc_byte_buffer *bb = NULL;
  if (send_msg) {
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)msg, len);
    bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = bb;
    n++;
  }
  grpc_slice det = grpc_slice_from_copied_string(details);
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)status;
  ops[n].data.send_status_from_server.status_details = &det;
  n++;
  int cancelled = 0;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n].data.recv_close_on_server.cancelled = &cancelled;
  n++;
  static int tag;
  if (grpc_call_start_batch(call, ops, n, &tag, NULL) == GRPC_CALL_OK) wait_tag(&tag);
  grpc_slice_unref(det);
  if (bb) grpc_byte_buffer_destroy(bb);
}

static void finish_scripted(grpc_call *call) {
  pthread_mutex_lock(&g.lock);
  int status = g.scripted ? g.status : GRPC_STATUS_UNIMPLEMENTED;
  char details[256];
  snprintf(details, sizeof details, "%s", g.scripted ? g.details : "mock: no reply scripted");
  size_t len = g.reply_len;
  uint8_t *msg = len ? malloc(len) : NULL;
  if (len) memcpy(msg, g.reply, len);
  int send_msg = status == GRPC_STATUS_OK && !g.no_message;
  int delay = g.delay_ms;
  pthread_mutex_unlock(&g.lock);
  if (delay > 0) {
    struct timespec ts = {delay / 1000, (long)(delay % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  finish(call, status, details, msg, len, send_msg);
  free(msg);
}

/* One RECV_MESSAGE on call, waited for: -1 if it could not start, else 0
 * with *ok its success and *bb the message (NULL: the client half-closed).
 * The server thread has one batch in flight at a time. */
static int recv_message(grpc_call *call, grpc_byte_buffer **bb, int *ok) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = bb;
  *bb = NULL;
  static int tag;
  if (grpc_call_start_batch(call, &op, 1, &tag, NULL) != GRPC_CALL_OK) return -1;
  *ok = wait_tag(&tag).success;
  return 0;
}

static void serve_stream(grpc_call *call) {
  uint32_t rows = 0;
  for (int k = 1;; k++) {
    grpc_byte_buffer *bb;
    int ok;
    if (recv_message(call, &bb, &ok) != 0) return;
    if (!ok) {
      finish(call, GRPC_STATUS_CANCELLED, "broken", NULL, 0, 0);
      return;
    }
    if (bb == NULL) { /* half-close */
      pthread_mutex_lock(&g.lock);
      g.seen.stream_half_closed = 1;
      int scripted = g.scripted;
      pthread_mutex_unlock(&g.lock);
      if (scripted) {
        finish_scripted(call);
      } else {
        Replayd__V1__InsertResponse r = REPLAYD__V1__INSERT_RESPONSE__INIT;
        r.inserted = rows;
        r.first_key = 1000;
        uint8_t buf[64];
        size_t len = replayd__v1__insert_response__pack(&r, buf);
        finish(call, GRPC_STATUS_OK, "", buf, len, 1);
      }
      return;
    }
    grpc_slice s = read_body(bb);
    grpc_byte_buffer_destroy(bb);
    Replayd__V1__InsertRequest *req =
        replayd__v1__insert_request__unpack(NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    pthread_mutex_lock(&g.lock);
    int i = g.seen.stream_msgs++;
    if (i < MOCK_MAX_STREAM_MSGS) {
      g.seen.stream_rows[i] = req && req->rows ? req->rows->count : 0;
      snprintf(g.seen.stream_ids[i], sizeof g.seen.stream_ids[i], "%s",
               req ? req->workload_id : "(undecodable)");
    }
    if (req && req->rows) rows += req->rows->count;
    int fail = g.fail_at == k;
    int fail_status = g.fail_status;
    char fail_details[256];
    snprintf(fail_details, sizeof fail_details, "%s", g.fail_details);
    pthread_mutex_unlock(&g.lock);
    if (req) replayd__v1__insert_request__free_unpacked(req, NULL);
    if (fail) {
      finish(call, fail_status, fail_details, NULL, 0, 0);
      return;
    }
  }
}

static void serve_unary(grpc_call *call) {
  grpc_byte_buffer *bb;
  int ok;
  if (recv_message(call, &bb, &ok) != 0) return;
  grpc_slice s = read_body(bb);
  if (bb) grpc_byte_buffer_destroy(bb);
  pthread_mutex_lock(&g.lock);
  free(g.seen.body);
  g.seen.body_len = GRPC_SLICE_LENGTH(s);
  g.seen.body = malloc(g.seen.body_len + 1);
  memcpy(g.seen.body, GRPC_SLICE_START_PTR(s), g.seen.body_len);
  pthread_mutex_unlock(&g.lock);
  grpc_slice_unref(s);
  if (!ok) {
    finish(call, GRPC_STATUS_CANCELLED, "broken", NULL, 0, 0);
    return;
  }
  finish_scripted(call);
}

static void *server_main(void *arg) {
  (void)arg;
  for (;;) {
    grpc_call *call = NULL;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_call_details_init(&details);
    grpc_metadata_array_init(&md);
    static int tag_new;
    if (grpc_server_request_call(g.server, &call, &details, &md, g.cq, g.cq, &tag_new) !=
        GRPC_CALL_OK)
      break;
    grpc_event ev = wait_tag(&tag_new);
    if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
      grpc_call_details_destroy(&details);
      grpc_metadata_array_destroy(&md);
      break; /* shutting down */
    }
    char *method = grpc_slice_to_c_string(details.method);
    pthread_mutex_lock(&g.lock);
    g.seen.calls++;
    snprintf(g.seen.method, sizeof g.seen.method, "%s", method);
    g.seen.had_token = 0;
    g.seen.token[0] = '\0';
    for (size_t i = 0; i < md.count; i++)
      if (grpc_slice_str_cmp(md.metadata[i].key, "x-replayd-token") == 0) {
        g.seen.had_token = 1;
        snprintf(g.seen.token, sizeof g.seen.token, "%.*s",
                 (int)GRPC_SLICE_LENGTH(md.metadata[i].value),
                 (const char *)GRPC_SLICE_START_PTR(md.metadata[i].value));
      }
    pthread_mutex_unlock(&g.lock);
    int is_stream = strcmp(method, "/replayd.v1.Replay/Insert") == 0;
    gpr_free(method);
    if (is_stream)
      serve_stream(call);
    else
      serve_unary(call);
    grpc_call_unref(call);
    grpc_call_details_destroy(&details);
    grpc_metadata_array_destroy(&md);
  }
  return NULL;
}

int mock_start(void) {
  grpc_init();
  g.server = grpc_server_create(NULL, NULL);
  g.cq = grpc_completion_queue_create_for_next(NULL);
  g.shutdown_cq = grpc_completion_queue_create_for_pluck(NULL);
  grpc_server_register_completion_queue(g.server, g.cq, NULL);
  grpc_server_register_completion_queue(g.server, g.shutdown_cq, NULL);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  g.port = grpc_server_add_http2_port(g.server, "127.0.0.1:0", creds);
  grpc_server_credentials_release(creds);
  if (g.port <= 0) {
    fprintf(stderr, "mock: cannot bind a loopback port\n");
    abort();
  }
  grpc_server_start(g.server);
  pthread_create(&g.thread, NULL, server_main, NULL);
  return g.port;
}

void mock_stop(void) {
  static int tag;
  grpc_server_shutdown_and_notify(g.server, g.shutdown_cq, &tag);
  grpc_server_cancel_all_calls(g.server);
  grpc_completion_queue_pluck(g.shutdown_cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  pthread_join(g.thread, NULL);
  grpc_server_destroy(g.server);
  grpc_completion_queue_shutdown(g.cq);
  while (grpc_completion_queue_next(g.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(g.cq);
  grpc_completion_queue_shutdown(g.shutdown_cq);
  grpc_completion_queue_destroy(g.shutdown_cq);
  mock_reset();
  grpc_shutdown();
}

static void set_reply_locked(const void *bytes, size_t len) {
  free(g.reply);
  g.reply = len ? malloc(len) : NULL;
  if (len) memcpy(g.reply, bytes, len);
  g.reply_len = len;
  g.scripted = 1;
  g.no_message = 0;
  g.status = 0;
  g.details[0] = '\0';
}

void mock_reply_bytes(const void *bytes, size_t len) {
  pthread_mutex_lock(&g.lock);
  set_reply_locked(bytes, len);
  pthread_mutex_unlock(&g.lock);
}

void mock_reply_msg(const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len + 1);
  protobuf_c_message_pack(m, buf);
  mock_reply_bytes(buf, len);
  free(buf);
}

void mock_reply_no_message(void) {
  pthread_mutex_lock(&g.lock);
  set_reply_locked(NULL, 0);
  g.no_message = 1;
  pthread_mutex_unlock(&g.lock);
}

void mock_reply_status(int status, const char *details) {
  pthread_mutex_lock(&g.lock);
  set_reply_locked(NULL, 0);
  g.status = status;
  snprintf(g.details, sizeof g.details, "%s", details);
  pthread_mutex_unlock(&g.lock);
}

void mock_set_delay_ms(int ms) {
  pthread_mutex_lock(&g.lock);
  g.delay_ms = ms;
  pthread_mutex_unlock(&g.lock);
}

void mock_stream_fail_at(int k, int status, const char *details) {
  pthread_mutex_lock(&g.lock);
  g.fail_at = k;
  g.fail_status = status;
  snprintf(g.fail_details, sizeof g.fail_details, "%s", details);
  pthread_mutex_unlock(&g.lock);
}

void mock_seen(mock_seen_t *out) {
  pthread_mutex_lock(&g.lock);
  *out = g.seen;
  pthread_mutex_unlock(&g.lock);
}

void mock_reset(void) {
  pthread_mutex_lock(&g.lock);
  free(g.seen.body);
  free(g.reply);
  g.reply = NULL;
  g.reply_len = 0;
  int calls = g.seen.calls;
  memset(&g.seen, 0, sizeof g.seen);
  g.seen.calls = calls;
  g.status = 0;
  g.details[0] = '\0';
  g.scripted = g.no_message = g.delay_ms = 0;
  g.fail_at = g.fail_status = 0;
  g.fail_details[0] = '\0';
  pthread_mutex_unlock(&g.lock);
}

rdc_client_t *mock_cli;
char mock_target[64];

int mock_group_setup(void **state) {
  (void)state;
  snprintf(mock_target, sizeof mock_target, "127.0.0.1:%d", mock_start());
  rdc_error_t e;
  if (rdc_connect(mock_target, 5.0, &mock_cli, &e) != RDC_OK) {
    fprintf(stderr, "connect: %s\n", e.msg);
    return -1;
  }
  return 0;
}

int mock_group_teardown(void **state) {
  (void)state;
  rdc_close(mock_cli);
  mock_stop();
  return 0;
}

int mock_test_setup(void **state) {
  (void)state;
  mock_reset();
  rdc_set_deadline(mock_cli, 10);
  return 0;
}
