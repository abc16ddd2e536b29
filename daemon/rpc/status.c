/* status.c - replies, and RD_E* -> gRPC status. */
#include "status.h"

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <stdarg.h>
#include <stdio.h>

#include "rd_error.h"

grpc_status_code rd_grpc_status(int code) {
  switch (code) {
  case RD_OK: return GRPC_STATUS_OK;
  case RD_EINVAL:
  case RD_ERANGE: return GRPC_STATUS_INVALID_ARGUMENT;
  case RD_ETOOBIG:
  case RD_ENOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
  case RD_EEMPTY:
  case RD_ESTATE: return GRPC_STATUS_FAILED_PRECONDITION;
  case RD_ENOTFOUND: return GRPC_STATUS_NOT_FOUND;
  case RD_EBUSY: return GRPC_STATUS_ABORTED;
  case RD_ETIMEDOUT: return GRPC_STATUS_DEADLINE_EXCEEDED;
  case RD_ECANCELED: return GRPC_STATUS_UNAVAILABLE;
  default: return GRPC_STATUS_INTERNAL;
  }
}

static void vfail(rd_reply_t *r, grpc_status_code st, const char *fmt, va_list ap) {
  r->status = st;
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  if (r->reply != NULL) grpc_byte_buffer_destroy(r->reply);
  r->reply = NULL;
}

int rd_reply_error(rd_reply_t *r, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  /* A failure is never OK, whatever code a caller passes. */
  vfail(r, code == RD_OK ? GRPC_STATUS_INTERNAL : rd_grpc_status(code), fmt, ap);
  va_end(ap);
  return code;
}

int rd_reply_ok(rd_reply_t *r, int rc, const rd_error_t *err) {
  if (rc == RD_OK) return 1;
  rd_reply_error(r, rc, "%s", err->msg);
  return 0;
}

void rd_reply_status(rd_reply_t *r, grpc_status_code status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(r, status, fmt, ap);
  va_end(ap);
}

void rd_reply_buffer(rd_reply_t *r, grpc_byte_buffer *bb) {
  if (r->reply != NULL) grpc_byte_buffer_destroy(r->reply);
  r->reply = bb;
  r->status = GRPC_STATUS_OK;
  r->message[0] = '\0';
}

void rd_reply_pack(rd_reply_t *r, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  grpc_slice s = grpc_slice_malloc(len);
  protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  rd_reply_buffer(r, bb);
}
