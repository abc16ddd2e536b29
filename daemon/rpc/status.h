/* status.h - what a call answers: a packed reply, or a gRPC status with a
 * message; and the one mapping from replayd's error codes to gRPC's.
 *
 * Core and the layers below say what went wrong with an RD_E* code
 * (rd_error.h); rd_grpc_status is the only place that turns one into a
 * gRPC status, so a code means the same to a client whichever call
 * returned it. rd_reply_status is for what only the RPC layer knows (a
 * missing or wrong token, an unknown method, a broken stream).
 */
#ifndef RD_STATUS_H
#define RD_STATUS_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "rd_error.h"

typedef struct {
  grpc_status_code status;
  char message[512];
  grpc_byte_buffer *reply; /* set when status == GRPC_STATUS_OK */
} rd_reply_t;

/* RD_EINVAL, RD_ERANGE: INVALID_ARGUMENT; RD_ETOOBIG, RD_ENOMEM:
 * RESOURCE_EXHAUSTED; RD_EEMPTY, RD_ESTATE: FAILED_PRECONDITION;
 * RD_ENOTFOUND: NOT_FOUND; RD_EBUSY: ABORTED (retry); RD_ETIMEDOUT:
 * DEADLINE_EXCEEDED; RD_ECANCELED: UNAVAILABLE (shutting down); RD_ESTORE,
 * RD_EINTERNAL and anything else: INTERNAL. */
grpc_status_code rd_grpc_status(int code);

/* r fails with rd_grpc_status(code) and the formatted message; returns
 * code. */
int rd_reply_error(rd_reply_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* rc and err from a call below rpc: 1 when it succeeded, or 0 with r
 * failed by err's message. */
int rd_reply_ok(rd_reply_t *r, int rc, const rd_error_t *err);

/* r fails with a status no RD_E* code stands for. */
void rd_reply_status(rd_reply_t *r, grpc_status_code status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* r answers OK with m packed. */
void rd_reply_pack(rd_reply_t *r, const ProtobufCMessage *m);

/* r answers OK with bb (taken). */
void rd_reply_buffer(rd_reply_t *r, grpc_byte_buffer *bb);

#endif
