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

#endif
