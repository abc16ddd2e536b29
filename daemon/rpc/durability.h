/* durability.h - the RPCs of checkpoints, export and import, and the
 * journal's acknowledgements (core/durable.h, core/journal.h).
 *
 * Acknowledging in journal mode: an insert or priority update is applied
 * under the table lock, which appends its journal record; the handler packs
 * its reply and hands it to rd_ack_when_durable, which returns
 * RD_REPLY_LATER and lets the journal's syncer thread finish the call
 * (rd_call_reply) after the fdatasync that covers the record, or with the
 * journal's error (INTERNAL) if it cannot be written. No thread blocks on
 * the disk: not the completion-queue threads, not the ingest runners.
 */
#ifndef RD_DURABILITY_RPC_H
#define RD_DURABILITY_RPC_H

#include "handlers.h"
#include "replayd.pb-c.h"

/* r holds a call's reply (OK). If lsn > 0 and w has a journal whose
 * record lsn is not on disk yet: RD_REPLY_LATER (the reply is taken and
 * sent, or replaced by the journal's error, from the journal's thread).
 * Otherwise RD_REPLY_NOW with r as it was, or r replaced by the error
 * when the record can never be written. */
rd_reply_when_t rd_ack_when_durable(rd_workload_t *w, uint64_t lsn, void *call, rd_reply_t *r);

/* CheckpointRequest, ExportWorkloadRequest, ImportWorkloadRequest. */
rd_rpc_handler_t rd_handle_checkpoint, rd_handle_export, rd_handle_import;


/* ---- ExportStream and ImportStream (server.c runs the calls) ----
 * Chunks are at most RD_STREAM_CHUNK_MAX bytes (and the message limit);
 * the files go through core's temporary files (durable.h says why). */
#define RD_STREAM_CHUNK_DEFAULT (1u << 20)
#define RD_STREAM_CHUNK_MAX (4u << 20)

typedef struct rd_export_stream rd_export_stream_t;
/* Authorize, write the export file: RD_REPLY_STREAM with *out, or
 * RD_REPLY_NOW with the error in r. */
rd_reply_when_t rd_export_stream_open(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                      const Replayd__V1__ExportStreamRequest *m,
                                      rd_export_stream_t **out, rd_reply_t *r);
/* The next chunk: 1 with *bb, 0 when all were sent, -1 with r failed. */
int rd_export_stream_next(rd_export_stream_t *s, grpc_byte_buffer **bb, rd_reply_t *r);
void rd_export_stream_free(rd_export_stream_t *s);

typedef struct rd_import_stream rd_import_stream_t;
/* One client message (*st made by the first): RD_REPLY_MORE, or
 * RD_REPLY_NOW with the error in r (the call ends; nothing is created). */
rd_reply_when_t rd_import_stream_message(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                         rd_import_stream_t **st, const uint8_t *body,
                                         size_t len, rd_reply_t *r);
/* The client half-closed (st may be NULL): check size and checksum, then
 * import as ImportWorkload. Always RD_REPLY_NOW. */
rd_reply_when_t rd_import_stream_end(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                     rd_import_stream_t *st, rd_reply_t *r);
/* Removes its temporary file. */
void rd_import_stream_free(rd_import_stream_t *st);

#endif
