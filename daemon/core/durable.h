/* durable.h - what survives a restart: checkpoints, restore at start, the
 * write-ahead journal, export and import.
 *
 * Modes (a workload's spec, workload_spec.h rd_durability_t):
 *  - none: nothing is written; the workload comes back empty.
 *  - checkpoint (default): checkpoints on request (the Checkpoint RPC,
 *    `replayctl checkpoint`), every checkpoint_interval_s when the workload
 *    changed, and at shutdown (SIGTERM); a crash loses what came after the
 *    last one, and nothing before it.
 *  - journal: checkpoints, and every insert and priority update on disk
 *    (journal.h) before it is acknowledged; a crash loses no acknowledged
 *    call.
 *
 * Files, per workload, in <checkpoint-dir>/<id>/:
 *   ckpt-<gen>.rdc       checkpoint number gen (16 hex digits), ckpt_file.h
 *   journal-<gen>.log    the journal's records after checkpoint gen's cut
 *   weights.version      weight versions reserved (pipeline.h "Checkpoints")
 *   *.tmp, *.bad         a checkpoint being written; one that failed to verify
 *
 * A checkpoint's sections (ckpt_file.h; section type, aux):
 *   1 meta     u32 kind (1 checkpoint, 2 export), u32 durability, u64 gen,
 *              u64 cut lsn, i64 taken (unix ms), u64 learner flags, the
 *              workload id (32 bytes), u64 spec bytes, the stored spec
 *   2 table    the table's config (capacity, fanout, alpha, epsilon,
 *              max_priority, seed, fixed-point scale, the schema: per
 *              field its name, dtype and shape) and state (key counter,
 *              size, draws, max_p, the four stats)
 *   3 leaves   size u64 fixed-point leaves, the oldest item first
 *   4 column   (aux = field index) size rows of that field, oldest first
 *   5 learner  a hosted learner's state (pipeline_state.c)
 *
 * Taking one without stopping the workload: the cut is taken under the
 * table lock (table.h rd_table_snapshot_begin, and the journal's rotation
 * there), then the rows and leaves are copied in slices of at most
 * RD_DURABLE_SLICE_BYTES, each under the lock alone; between slices
 * inserts, samples, updates and train-steps go on, and the table's
 * copy-on-write keeps the cut intact (table.h "Snapshots"). The learner's
 * state is saved on its own thread between two steps. Then the file is
 * written outside every lock: a temporary file, fsync, rename, fsync of
 * the directory. So a checkpoint costs the workload only the slices' lock
 * holds, and memory for one copy of its table while it is written (one
 * checkpoint at a time per server). The learner's state is taken a little
 * after the table's cut: the priorities of the batches it trained on in
 * between may or may not be in the table, as with any relaxed pipeline.
 *
 * Restore (at start, before the server listens): the newest checkpoint
 * that reads and verifies whole (every checksum, the same spec: schema,
 * capacity, priority transform, seed, the learner's shapes) is loaded; one
 * that does not is logged with the reason, renamed *.bad, and the previous
 * one tried; then the journal's segments from that checkpoint on are
 * replayed in order (a torn last record is dropped and cut off). Nothing is
 * applied before everything was checked, so a table is never half
 * restored. With no usable checkpoint the workload comes back empty and
 * Describe says why.
 *
 * Faults: a checkpoint that cannot be written (disk full, read-only
 * directory, an I/O error) fails with RD_ESTORE saying why; the temporary
 * file is removed, the previous checkpoints stay, the workload keeps
 * serving. The journal's faults are journal.h's.
 *
 * Threads: calls may come from any thread; checkpoints (and exports) are
 * taken one at a time per server (they hold a copy of a table).
 */
#ifndef RD_DURABLE_H
#define RD_DURABLE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "journal.h"
#include "rd_error.h"
#include "workload.h"
#include "workload_spec.h"

#define RD_DURABLE_SLICE_BYTES (1u << 20) /* rows copied per lock hold */

struct rd_registry;
typedef struct rd_durable rd_durable_t;       /* the server's */
typedef struct rd_wl_durable rd_wl_durable_t; /* a workload's (workload.h w->durable) */

/* One checkpoint, as Describe shows it. */
typedef struct {
  uint64_t gen;
  int64_t taken_unix_ms;
  uint64_t bytes, items;
  double seconds;
  int learner_full;
  double hold_max_s; /* the longest the table lock was held for it: its pause on calls */
} rd_checkpoint_info_t;

typedef struct {
  rd_durability_t mode;
  double interval_s;
  int has_last;
  rd_checkpoint_info_t last;
  uint64_t checkpoints; /* taken since start */
  char last_error[RD_ERROR_MSG_MAX];
  char restored[RD_ERROR_MSG_MAX];
  int has_journal;
  rd_journal_stats_t journal;
} rd_durable_info_t;

/* The server's durability: checks cfg's durability settings, makes the
 * checkpoint directory. RD_EINVAL (a bad setting), RD_ESTORE. */
int rd_durable_create(rd_durable_t **out, const rd_config_t *cfg, rd_error_t *err);
/* Start the periodic checkpoints over r's workloads. */
int rd_durable_start(rd_durable_t *d, struct rd_registry *r, rd_error_t *err);
/* Stop the periodic thread (a checkpoint in progress finishes first). */
void rd_durable_stop(rd_durable_t *d);
void rd_durable_destroy(rd_durable_t *d);
const char *rd_durable_dir(const rd_durable_t *d);

/* ---- A workload's life (the registry's calls) ---- */

/* Before its workload is built: its state, and wc's hook that makes
 * weight versions durable. *out is NULL for durability none. */
int rd_durable_prepare(rd_durable_t *d, const char *id, rd_workload_config_t *wc,
                       rd_wl_durable_t **out, rd_error_t *err);
/* A new registration, before it is stored and published: its directory,
 * and in journal mode its journal (segment 0). RD_ESTORE. */
int rd_durable_attach(rd_durable_t *d, rd_workload_t *w, rd_error_t *err);
/* At start, before it is published: restore w from its files (above).
 * Never fails: what could not be restored is logged and said by Describe. */
void rd_durable_restore(rd_durable_t *d, rd_workload_t *w);
/* Deleted: remove its files. */
void rd_durable_forget(rd_durable_t *d, rd_workload_t *w);
/* Freed (rd_workload_free): close the journal, free the state. */
void rd_durable_release(rd_wl_durable_t *wd);

/* ---- Calls ---- */

/* Take a checkpoint of w now. RD_ESTATE (durability none), RD_ENOTFOUND
 * (deleted), RD_ESTORE (could not be written: the previous ones stay),
 * RD_ENOMEM. */
int rd_durable_checkpoint(rd_durable_t *d, rd_workload_t *w, rd_checkpoint_info_t *info,
                          rd_error_t *err);
/* Every workload whose durability is not none (shutdown, `--all`): the
 * number checkpointed and failed; failures are logged. */
void rd_durable_checkpoint_all(rd_durable_t *d, struct rd_registry *r, size_t *done,
                               size_t *failed);

/* The workload's journal, or NULL (not journal mode, or not open). */
rd_journal_t *rd_durable_journal(const rd_workload_t *w);
/* In journal mode, before an insert or update of about `bytes` (table
 * lock held): journal.h rd_journal_admit, or RD_ESTORE when the journal
 * could not be opened. RD_OK in other modes. */
int rd_durable_admit(const rd_workload_t *w, size_t bytes, rd_error_t *err);

void rd_durable_info(const rd_workload_t *w, rd_durable_info_t *out);

/* ---- Export and import (the checkpoint format, kind export) ---- */

/* w as one checkpoint file in memory (*out malloc'd), at most max_bytes.
 * RD_ETOOBIG (larger), RD_ENOMEM, RD_EINTERNAL. */
int rd_durable_export(rd_durable_t *d, rd_workload_t *w, uint64_t max_bytes, uint8_t **out,
                      size_t *len, uint64_t *items, rd_error_t *err);

/* A checked file, ready to become a workload. */
typedef struct rd_import rd_import_t;
/* Read and verify a file from memory: every checksum and section. The
 * stored spec it carries is then *spec / *spec_len (inside imp).
 * RD_EINVAL (what is wrong), RD_ENOMEM. */
int rd_import_read(rd_durable_t *d, const uint8_t *data, size_t len, rd_import_t **out,
                   const uint8_t **spec, size_t *spec_len, rd_error_t *err);
/* Put the file's table and learner into w (new, empty, built from that
 * spec), then checkpoint it unless its durability is none. RD_EINVAL (not
 * the same spec), or the checkpoint's errors (the data is in w then). */
int rd_import_apply(rd_durable_t *d, rd_import_t *imp, rd_workload_t *w, rd_error_t *err);
void rd_import_free(rd_import_t *imp);

/* ---- Streamed export and import (any size, bounded memory) ----
 *
 * Both go through an unlinked temporary file in the checkpoint directory
 * ("." names: a restore never lists them), which disappears with its fd
 * however the stream ends, a crash included. Why a file and not slices
 * sent straight from the table: a gRPC stream goes at the client's pace,
 * and a table copy held (or a cut kept open) for as long as a slow client
 * takes would pin memory and the table's copy-on-write; written out, the
 * cut costs what a checkpoint costs and the stream costs one chunk. */

/* w's export file (rd_durable_export's bytes) in a temporary file: fd,
 * its size, items and XXH3-64; rd_export_file_close gives it back. Each
 * holds a copy of a table on disk for as long as its client takes, so at
 * most RD_EXPORT_FILES_MAX are open at once per server: RD_ETOOBIG past
 * that (retry later). RD_ESTORE (the directory cannot take it),
 * RD_ENOTFOUND (deleted), RD_ENOMEM. */
#define RD_EXPORT_FILES_MAX 4
typedef struct {
  int fd;
  uint64_t bytes, items, xxh3;
  rd_durable_t *d; /* whose count it is in */
} rd_export_file_t;
int rd_durable_export_file(rd_durable_t *d, rd_workload_t *w, rd_export_file_t *out,
                           rd_error_t *err);
/* Close f's file and give its place back (f zeroed or closed: nothing). */
void rd_export_file_close(rd_export_file_t *f);

/* An import stream's file, received into a temporary file: at most
 * --import-max-bytes, at most RD_IMPORT_SINKS_MAX open at once per server. */
#define RD_IMPORT_SINKS_MAX 4
typedef struct rd_import_sink rd_import_sink_t;
/* RD_ETOOBIG (too many open), RD_ESTORE, RD_ENOMEM. */
int rd_import_sink_open(rd_durable_t *d, rd_import_sink_t **out, rd_error_t *err);
/* Append len bytes. RD_ETOOBIG (past the limit: nothing written), RD_ESTORE. */
int rd_import_sink_write(rd_import_sink_t *s, const void *data, size_t len, rd_error_t *err);
uint64_t rd_import_sink_bytes(const rd_import_sink_t *s);
/* The stream is whole: its size and XXH3-64 must be total_bytes and xxh3
 * (RD_EINVAL otherwise), then the file is read as rd_import_read's. */
int rd_import_sink_finish(rd_import_sink_t *s, uint64_t total_bytes, uint64_t xxh3,
                          rd_import_t **out, const uint8_t **spec, size_t *spec_len,
                          rd_error_t *err);
/* Closes (and so removes) the temporary file. */
void rd_import_sink_free(rd_import_sink_t *s);

#endif
