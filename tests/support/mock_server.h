/* mock_server.h - a scripted gRPC server for the client tests.
 *
 * It serves any method of any service on 127.0.0.1:<ephemeral port>, one
 * call at a time, on its own thread. Before a call the test sets the reply
 * (mock_set_reply...); after it, the test reads what the server received:
 * method, the x-replayd-token metadata, the request body (unary) or the
 * decoded stream messages (Insert). Replies are raw bytes, so a test can
 * also send garbage to check that the client copes.
 */
#ifndef RDT_MOCK_SERVER_H
#define RDT_MOCK_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "replayd.pb-c.h"
#include "replayd_client.h"

#define MOCK_MAX_STREAM_MSGS 256

typedef struct {
  /* What the server received in the last call. */
  char method[128];
  int had_token;
  char token[256];
  uint8_t *body; /* unary request (malloc'd copy) */
  size_t body_len;
  int calls;     /* calls served since start */
  /* Insert stream: messages received and their decoded row counts. */
  int stream_msgs;
  uint32_t stream_rows[MOCK_MAX_STREAM_MSGS];
  char stream_ids[MOCK_MAX_STREAM_MSGS][40];
  int stream_half_closed; /* the client half-closed the stream */
} mock_seen_t;

/* Start the server; returns its port. */
int mock_start(void);
void mock_stop(void);

/* The next call's answer. status 0 = OK with the given message (or bytes). */
void mock_reply_msg(const ProtobufCMessage *m);
void mock_reply_bytes(const void *bytes, size_t len);
void mock_reply_no_message(void);       /* status OK, no message */
void mock_reply_status(int status, const char *details);
void mock_set_delay_ms(int ms);         /* before answering (unary) */
/* Insert stream: end the call with status after receiving message k
 * (1-based; 0 = never), without waiting for the half-close. */
void mock_stream_fail_at(int k, int status, const char *details);
/* Insert stream: the reply after the half-close is the scripted one when
 * set, else InsertResponse{inserted = rows received, first_key = 1000}. */

/* A snapshot of what was received (the body pointer is borrowed until the
 * next call). */
void mock_seen(mock_seen_t *out);
/* Forget what was received and every scripted reply. */
void mock_reset(void);

/* cmocka set-ups of the client tests: per group, the server started and
 * mock_cli connected to it at mock_target (then closed and stopped); per
 * test, mock_reset and mock_cli's deadline back to 10 s. */
extern rdc_client_t *mock_cli;
extern char mock_target[64];
int mock_group_setup(void **state);
int mock_group_teardown(void **state);
int mock_test_setup(void **state);

#endif
