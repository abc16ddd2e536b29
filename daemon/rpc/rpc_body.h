/* rpc_body.h - a request's bytes: whole, inflated, within the message limit.
 *
 * gRPC core inflates a compressed message whole and only then compares its
 * size with the receive limit, so a few hundred KiB of gzip could make the
 * daemon allocate gigabytes before refusing them. The server therefore
 * turns gRPC's own decompression off (GRPC_ARG_ENABLE_PER_MESSAGE_
 * DECOMPRESSION = 0) and inflates here with zlib, stopping as soon as the
 * output would pass the limit: a request never costs more memory than
 * max_bytes, compressed or not.
 */
#ifndef RD_RPC_BODY_H
#define RD_RPC_BODY_H

#include <grpc/grpc.h>
#include <stddef.h>

#include "rd_error.h"

/* The message in bb as one contiguous slice (an empty slice for a NULL bb),
 * to be released with grpc_slice_unref. A deflate or gzip message is
 * inflated. RD_ETOOBIG when the message (after inflating) exceeds
 * max_bytes, RD_EINVAL when it is not valid compressed data or uses an
 * algorithm the server does not know, RD_ENOMEM; *out is untouched then. */
int rd_rpc_body(grpc_byte_buffer *bb, size_t max_bytes, grpc_slice *out, rd_error_t *err);

#endif
