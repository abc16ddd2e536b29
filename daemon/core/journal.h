/* journal.h - a workload's write-ahead journal: every insert and priority
 * update, on disk before it is acknowledged, with group commit.
 *
 * Appends come from the table's observer (table.h), under the table lock,
 * so the journal holds the table's calls in the order the table applied
 * them; replaying them onto the state before them gives the state after
 * them. An append only copies the record into memory. Two threads per
 * journal make it durable: the committer waits commit_us after the first
 * record of a round (the group-commit window), then writes every record
 * appended meanwhile; the syncer fdatasyncs what was written, one
 * fdatasync for every round written while the one before it ran. So the
 * next round is written while this one syncs. A call is acknowledged only
 * once its record is on disk: rd_journal_when_durable calls back from the
 * syncer after the fdatasync that covers it (or from the committer when
 * its write failed), so no other thread waits on the disk (the RPC layer
 * answers the call from that callback).
 *
 * Files. Segment g is `journal-<g as 16 hex digits>.log` in the
 * workload's directory. A checkpoint with generation g (durable.h) takes
 * its cut under the table lock and rotates the journal there: records up
 * to the cut go to the current segment, the ones after it to segment g.
 * So checkpoint g + segments g, g+1, ... is the workload's state, and
 * checkpoint g-1 + segments g-1, g, ... is the same state, which is what
 * lets a restore fall back to an older checkpoint without losing a record.
 *
 * Records (little-endian): a 32-byte header, u32 "RDJR", u32 type, u64
 * lsn (consecutive from 1 over all segments), u64 payload bytes, u64
 * XXH3-64 of the header's first 24 bytes and the payload; then the payload:
 *   insert: u64 first key, u32 rows, u32 fields, u32 has priorities, u32 0,
 *           u64 bytes per column (one per field), the columns, then one
 *           double per row if it has priorities;
 *   update: u32 keys, u32 0, the keys (u64), the priorities (double).
 * A torn last record (a crash inside a write) fails its checksum or is
 * short; a reader stops there (only a fuzz build,
 * FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, reads past a checksum mismatch,
 * so that a fuzzer reaches the decoders behind it). A segment is written in place into space
 * allocated ahead of its records (an fdatasync then does not commit a new
 * file size each time), which reads as zeros: a header of zeros followed by
 * zeros only is the end of its records, not a tear.
 *
 * Failures. A write or fdatasync that fails (disk full, I/O error, a
 * read-only directory) fails every record of that segment not yet on disk:
 * their waiters get RD_ESTORE, and rd_journal_admit refuses every insert
 * and update (RD_ESTORE, nothing applied) until a checkpoint taken after
 * the failure is durable (rd_journal_checkpointed): that checkpoint holds
 * what the journal lost, and the records after its cut go to a new
 * segment. Appends past max_pending bytes not yet on disk are refused the
 * same way (RD_ETOOBIG), so a slow disk bounds the memory clients can fill
 * (with config.shared_pending, the bytes of every journal together).
 *
 * Direct I/O. Where the file system states its direct-I/O alignment
 * (statx STATX_DIOALIGN) and space is allocated with fallocate, a segment
 * is written with O_DIRECT: the page cache's copy of every byte and its
 * writeback cost more CPU than the rest of a journaled insert
 * (docs/benchmarks.md). A round is staged in an aligned buffer behind the
 * segment's last partial block, which is written again with it (the same
 * bytes where records were already durable, zeros after the round's end,
 * which the next round overwrites). Elsewhere, or if the kernel refuses a
 * direct write (EINVAL), the segment is written through the page cache.
 */
#ifndef RD_JOURNAL_H
#define RD_JOURNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "table.h"

#define RD_JOURNAL_REC_INSERT 1u
#define RD_JOURNAL_REC_UPDATE 2u
#define RD_JOURNAL_HEADER_BYTES 32u

/* How a segment's space ahead of its records is made (journal.c, extend). */
typedef enum {
  RD_JOURNAL_FALLOCATE = 0, /* fallocate (the default; zeros written where it is missing) */
  RD_JOURNAL_ZEROED,        /* zeros written: measured slower (bench_durability) */
} rd_journal_prealloc_t;

typedef struct {
  uint32_t commit_us;   /* group-commit window, microseconds (0: commit at once) */
  uint64_t max_pending; /* bytes appended and not yet on disk before admits refuse */
  rd_journal_prealloc_t prealloc;
  int sync_inline;      /* 1: a round's write waits for its fdatasync (a bench's baseline) */
  int buffered;         /* 1: never O_DIRECT (a bench's baseline, tests) */
  /* Bytes not yet written of every journal that shares this counter (the
   * server's: durable.c), or NULL for this journal's own. max_pending
   * bounds that sum, so the memory clients can fill does not grow with
   * the number of journal-mode workloads. */
  _Atomic uint64_t *shared_pending;
} rd_journal_config_t;

typedef struct rd_journal rd_journal_t;

/* Open segment gen in dir for appending (created if absent; a restore has
 * cut off any torn tail before) with the next record numbered next_lsn,
 * and start the committer. RD_ESTORE (the file), RD_ENOMEM, RD_EINTERNAL
 * (the thread). */
int rd_journal_open(rd_journal_t **out, const char *dir, uint64_t gen, uint64_t next_lsn,
                    const rd_journal_config_t *cfg, rd_error_t *err);

/* Commit what was appended, end every waiter (RD_OK if its record made it
 * to disk, else RD_ECANCELED or the failure), stop the committer, close. */
void rd_journal_close(rd_journal_t *j);

/* The table observer that appends every insert and update to j. */
rd_table_observer_t rd_journal_observer(rd_journal_t *j);

/* Before an insert or update whose record takes about `bytes`: RD_ESTORE
 * while the journal is failed (the message says why and since when),
 * RD_ETOOBIG while max_pending bytes wait for the disk. Call with the
 * table lock held, right before the table call. */
int rd_journal_admit(rd_journal_t *j, size_t bytes, rd_error_t *err);

/* Bytes the record of an insert / update of this size takes. */
size_t rd_journal_insert_bytes(size_t n_rows, uint32_t n_fields, const size_t *field_bytes,
                               int has_priorities);
size_t rd_journal_update_bytes(size_t n);

/* The lsn of the last record appended (0: none yet). Under the table lock,
 * right after a table call: that call's record, if it made one. */
uint64_t rd_journal_last_lsn(rd_journal_t *j);

/* At a checkpoint's cut, under the table lock: records from now on go to
 * segment gen (> every earlier one). Returns the lsn of the last record
 * before the cut. */
uint64_t rd_journal_rotate(rd_journal_t *j, uint64_t gen);

/* Checkpoint gen, taken at cut_lsn, is durable: records up to cut_lsn
 * need no journal any more, and a failure in an older segment is over
 * (admits resume). */
void rd_journal_checkpointed(rd_journal_t *j, uint64_t gen, uint64_t cut_lsn);

/* Acknowledging. A waiter lives in the caller's memory until its callback. */
typedef void (*rd_journal_cb)(void *arg, int rc, const rd_error_t *err);
typedef struct rd_journal_waiter {
  uint64_t lsn;
  rd_journal_cb cb;
  void *arg;
  struct rd_journal_waiter *next;
} rd_journal_waiter_t;

/* 1: record lsn is on disk now (cb is not called); 0: cb(arg, rc, err) will
 * run once, on the committer thread, when it is (RD_OK) or cannot be
 * (RD_ESTORE: the write failed; RD_ECANCELED: the journal closed first);
 * < 0: it cannot be (the error, in err). */
int rd_journal_when_durable(rd_journal_t *j, uint64_t lsn, rd_journal_waiter_t *w,
                            rd_journal_cb cb, void *arg, rd_error_t *err);

/* Block until record lsn is on disk: RD_OK, or the error it cannot be. For
 * tests, benchmarks and callers with a thread to block. */
int rd_journal_sync(rd_journal_t *j, uint64_t lsn, rd_error_t *err);

typedef struct {
  uint64_t records, bytes;     /* appended since open */
  uint64_t commits;            /* write + fdatasync rounds */
  uint64_t last_lsn, durable_lsn;
  double commit_s_last, commit_s_max; /* one round's write + fdatasync */
  uint64_t segment;            /* the segment appended to */
  int direct;                  /* the segment written is written with O_DIRECT */
  int failed;
  char why[RD_ERROR_MSG_MAX];  /* the failure, when failed */
} rd_journal_stats_t;
void rd_journal_stats(rd_journal_t *j, rd_journal_stats_t *out);

/* ---- Reading (restore) ---- */

typedef struct {
  uint32_t type;
  uint64_t lsn;
  const uint8_t *payload;
  size_t len;
} rd_journal_record_t;

/* A decoded insert record: columns point into the payload. */
typedef struct {
  uint64_t first_key;
  uint32_t n, n_fields;
  rd_cbuf_t cols[RD_SCHEMA_MAX_FIELDS];
  const double *priorities; /* NULL: none (may be unaligned: copy before use) */
} rd_journal_insert_t;
typedef struct {
  uint32_t n;
  const uint8_t *keys, *priorities; /* n u64 / n double, possibly unaligned */
} rd_journal_update_t;

int rd_journal_decode_insert(const rd_journal_record_t *r, rd_journal_insert_t *out,
                             rd_error_t *err);
int rd_journal_decode_update(const rd_journal_record_t *r, rd_journal_update_t *out,
                             rd_error_t *err);

/* Called for each good record, in order; an error stops the reading. */
typedef int (*rd_journal_read_fn)(void *arg, const rd_journal_record_t *r, rd_error_t *err);

typedef struct {
  uint64_t records;     /* good records read */
  uint64_t last_lsn;    /* of the last good record (0: none) */
  uint64_t valid_bytes; /* where the good records end */
  uint64_t file_bytes;
  int torn;             /* bytes after the last good record (a torn or damaged record) */
  int zero_tail;        /* the records end in zeros (space a writer kept ahead): not torn */
  char why[RD_ERROR_MSG_MAX]; /* what ended the reading early, when torn */
} rd_journal_read_info_t;

/* Read the segment at path: each good record whose lsn follows the one
 * before (the first must be first_lsn; 0: any) goes to fn. Reading stops
 * at the first record that is short, damaged or out of sequence (info
 * says where and why: that is not an error). Errors: fn's, RD_ESTORE (the
 * file cannot be read), RD_ENOMEM. */
int rd_journal_read(const char *path, uint64_t first_lsn, rd_journal_read_fn fn, void *arg,
                    rd_journal_read_info_t *info, rd_error_t *err);

/* "dir/journal-<gen>.log" into buf. */
void rd_journal_path(char *buf, size_t cap, const char *dir, uint64_t gen);

#endif
