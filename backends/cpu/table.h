/* table.h - a prioritized replay table on the CPU.
 *
 * Data storage (fixed-size rows of a schema, stored row by row: a sample
 * reads one row's few cache lines, not one line per field) in ring order
 * with FIFO eviction, and an exact K-ary sum tree over the
 * priorities (sumtree.h). This is the "table" of papers/001 §II-A3 and of
 * Reverb: insert, prioritized sample and priority update, batched.
 *
 * Priorities. Insert and update take raw priorities, normally |TD error|,
 * and store p = (x + epsilon)^alpha (Schaul et al. 2016, proportional
 * variant). An insert without priorities gives each new item
 * max(1.0, every p this table has applied so far: inserted or updated, not
 * stale updates), so new experience is sampled at least once soon (capped
 * at max_priority). Ape-X actors send their own initial priorities.
 *
 * Keys. Every inserted item gets the key k = the number of items inserted
 * before it. Its slot is k mod capacity and its generation k / capacity, so
 * a key names one write of one slot. The live keys are exactly
 * [next_key - size, next_key): an update for an older key is stale (its slot
 * has been overwritten) and is skipped and counted, never applied; a key >=
 * next_key was never issued and fails the whole call.
 *
 * Sampling. Draw d of the table's stream picks the target
 * floor(u_d * total / 2^64) with u_d from Philox4x32-10 (rd_philox.h), or,
 * stratified, item i of a batch of B picks
 * floor((i * total + floor(u_d * total / 2^64)) / B), one draw per item,
 * so stratum i is [i*total/B, (i+1)*total/B). P(i) = (double)leaf_i /
 * (double)total, the distribution actually sampled.
 * Importance weights w_i = (N * P(i))^-beta with N the table size, divided
 * by the batch's largest weight (RD_SAMPLE_RAW_WEIGHTS skips that), so the
 * largest weight in a batch is 1. We normalise by the batch maximum, as
 * Acme/Reverb learners do, rather than the table's: the table maximum needs
 * a min-priority tree that every update would pay for, and the batch
 * maximum already bounds the step size, which is what the normalisation is
 * for (Schaul et al. §3.4).
 *
 * Thread safety: none inside; the caller serializes calls on one table.
 * Errors: every call validates the whole batch before it changes anything.
 */
#ifndef RD_TABLE_H
#define RD_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "rd_fixed.h"
#include "rd_schema.h"
#include "sumtree.h"

#define RD_TABLE_MAX_BATCH (1u << 24)

/* The replay module (papers/001's RMM): the sum tree over the priorities
 * that a table samples from and writes to. By default it is the table's own
 * CPU sum tree (sumtree.h, `tree` below). A backend that runs the sum tree
 * elsewhere passes its ops in the config (config.rmm); the table then keeps
 * its ring storage, keys, priority transform and sampling stream as they
 * are and hands the module every leaf write (insert, update), every descent
 * (sample) and every read (total, one leaf). The contract is the CPU
 * tree's, integer for integer:
 *  - leaves are the table's rd_fixed.h integers, each <= max_leaf (the CPU
 *    tree's bound for the table's capacity, so the total stays below 2^63);
 *  - a target t < total selects the smallest leaf i with
 *    leaf[0] + ... + leaf[i] > t;
 *  - update sets leaves in batch order (the later of two writes wins);
 *  - a call validates its batch before it changes anything.
 * A module that keeps it samples exactly what the CPU tree would from the
 * same stream: same keys, probabilities and weights (the FPGA replay
 * kernel's C-simulation does, backends/fpga/csim_rmm.h;
 * tests/test_fpga_csim.c checks it against this table's default).
 * Calls are serialized by the table's caller, as every table call is.
 * A module that runs on a device reports a device failure during set_range,
 * sample or update as RD_EINTERNAL (the table validated the batch first, so
 * nothing else can fail there), and keeps answering total and leaf from a
 * host copy afterwards, so rd_table_to_cpu can move its leaves to the CPU
 * tree. */
typedef struct rd_rmm_ops {
  const char *name; /* for logs, e.g. "fpga-csim" */
  /* Bytes create would hold for this shape; 0 if the module cannot hold it
   * (then create fails and says why). */
  size_t (*memsize)(uint32_t capacity, uint32_t fanout);
  /* A module of `capacity` zero leaves with fanout K that accepts leaves up
   * to max_leaf. RD_EINVAL (a shape it cannot hold, saying why), RD_ENOMEM. */
  int (*create)(void **rmm, uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                rd_error_t *err);
  void (*destroy)(void *rmm);
  uint64_t (*total)(const void *rmm);
  uint64_t (*leaf)(const void *rmm, uint32_t pos); /* pos < capacity */
  /* Leaves [first, first + n) = leaves (one ring range, no wrap). */
  int (*set_range)(void *rmm, uint32_t first, size_t n, const uint64_t *leaves, rd_error_t *err);
  /* leaves[i] = the leaf targets[i] selects; every target < total. */
  int (*sample)(void *rmm, size_t n, const uint64_t *targets, uint32_t *leaves, rd_error_t *err);
  /* Leaf pos[i] = values[i], in order. */
  int (*update)(void *rmm, size_t n, const uint32_t *pos, const uint64_t *values,
                rd_error_t *err);
} rd_rmm_ops_t;

/* The storage module: where the rows are. By default the table's own host
 * rows (`host_rows` below). A backend that keeps the rows elsewhere (a
 * GPU's memory) passes its ops in the config (config.storage); the table
 * then hands it every row write (an insert's ring range, no wrap: one call
 * per range) and every row read (the rows of a sample or a gather, by
 * slot) and keeps keys, ring order and every check itself. Contract: a read
 * returns, for each slot, the bytes of that slot's last write; a call
 * validates its batch before it changes anything. A device failure is
 * RD_EINTERNAL, as for the replay module. Calls are serialized by the
 * table's caller. */
typedef struct rd_storage_ops {
  const char *name; /* for logs, e.g. "gpu0" */
  /* Host bytes create would hold for this shape (what the daemon charges
   * to its memory limit; device memory is the backend's to report); 0 if
   * the module cannot hold the shape (then create fails and says why). */
  size_t (*memsize)(uint32_t capacity, uint32_t n_fields, const size_t *field_bytes);
  /* `capacity` zeroed rows of n_fields fields of field_bytes[f] bytes.
   * rmm_ops and rmm are the table's replay module (NULL: the CPU tree), so
   * that a storage on the same device can share its resources (one CUDA
   * stream per table); the table destroys the storage before the module.
   * RD_EINVAL (a shape it cannot hold, saying why), RD_ENOMEM. */
  int (*create)(void **st, uint32_t capacity, uint32_t n_fields, const size_t *field_bytes,
                const rd_rmm_ops_t *rmm_ops, void *rmm, rd_error_t *err);
  void (*destroy)(void *st);
  /* Rows [first, first + n) of field f = src[f] (n * field_bytes[f] bytes). */
  int (*write)(void *st, uint32_t first, size_t n, const void *const *src, rd_error_t *err);
  /* dst[f] + i * field_bytes[f] = field f of row slots[i], i < n, every
   * slot < capacity; a NULL dst[f] skips field f. */
  int (*read)(void *st, size_t n, const uint32_t *slots, void *const *dst, rd_error_t *err);
} rd_storage_ops_t;

typedef struct {
  rd_schema_t schema;
  uint32_t capacity;   /* items, 1..2^28 */
  uint32_t fanout;     /* sum-tree K, power of two in [2, 64]; default 16 */
  double alpha;        /* priority exponent >= 0; default 0.6 */
  double epsilon;      /* added to |delta| >= 0; default 1e-6 */
  double max_priority; /* largest p accepted after the transform; default 2^20 */
  uint64_t seed;       /* Philox key of the sampling stream */
  uint32_t max_batch;  /* largest insert/sample/update batch; default 65536 */
  uint32_t threads;    /* OpenMP threads per call; default 1 */
  const rd_rmm_ops_t *rmm; /* the replay module (above); NULL (default): the CPU sum tree */
  const rd_storage_ops_t *storage; /* the storage (above); NULL (default): host rows */
} rd_table_config_t;

typedef struct {
  uint64_t inserts;       /* items inserted */
  uint64_t samples;       /* items sampled */
  uint64_t updates;       /* priority updates applied */
  uint64_t stale_updates; /* updates skipped because the slot was overwritten */
} rd_table_stats_t;

typedef struct {
  const void *data;
  size_t bytes;
} rd_cbuf_t;

typedef struct {
  void *data;
  size_t bytes;
} rd_buf_t;

/* Where rd_table_sample writes a batch of n. keys, probabilities and
 * weights hold n entries each; cols, if not NULL, holds one buffer per
 * schema field of at least n * field bytes (the gathered rows). */
typedef struct {
  uint64_t *keys;
  double *probabilities;
  double *weights;
  rd_buf_t *cols;
} rd_sample_out_t;

enum {
  RD_SAMPLE_STRATIFIED = 1u << 0, /* one target per equal stratum of the total */
  RD_SAMPLE_RAW_WEIGHTS = 1u << 1 /* do not divide weights by the batch maximum */
};

/* The table's own state at one instant: what a checkpoint keeps and a
 * restore puts back (below). Arrays hold `size` items in ring order, the
 * oldest (key next_key - size) first. */
typedef struct {
  uint64_t next_key, size, draws; /* the key counter, items held, Philox draws consumed */
  double max_p;                   /* the largest transformed priority seen */
  rd_table_stats_t stats;
  uint64_t *leaves;                    /* size fixed-point leaves (rd_fixed.h) */
  uint8_t *cols[RD_SCHEMA_MAX_FIELDS]; /* size * field bytes per schema field */
} rd_table_image_t;

/* A snapshot in progress (rd_table_snapshot_begin). Its buffers are the
 * caller's (rd_table_snapshot_alloc); the rest is the table's, changed only
 * under the caller's lock. */
typedef struct rd_table_snapshot {
  rd_table_image_t img;  /* the cut's scalars at begin; arrays filled as it goes */
  uint64_t rows_cap;     /* items the buffers hold */
  uint64_t lo, cursor;   /* keys [lo, cursor) are copied; img.next_key ends the cut */
  uint64_t *leaf_saved;  /* one bit per item: its leaf was saved before an update */
  int active;            /* attached to a table */
  int failed;            /* ended without completing: why says why */
  rd_error_t why;
} rd_table_snapshot_t;

/* Called, under the caller's lock, after every insert and update that
 * changed the table, with the call's own arguments: what a write-ahead
 * journal records (daemon/core/journal.h). Replaying the calls in this
 * order onto the state before them gives the state after them. */
typedef struct {
  void (*insert)(void *arg, uint64_t first_key, size_t n, uint32_t n_fields,
                 const rd_cbuf_t *cols, const double *priorities);
  void (*update)(void *arg, size_t n, const uint64_t *keys, const double *priorities);
  void *arg;
} rd_table_observer_t;

typedef struct {
  rd_table_config_t config;
  rd_fixed_t fixed;
  uint64_t max_leaf;     /* largest leaf integer: the CPU tree's bound for capacity */
  rd_sumtree_t tree;     /* the CPU sum tree, when config.rmm is NULL */
  void *rmm;             /* config.rmm's module otherwise */
  void *rows;            /* config.storage's module, when set */
  /* capacity rows of row_bytes, field f at field_off[f] within a row;
   * NULL with config.storage */
  uint8_t *host_rows;
  size_t row_bytes;
  size_t field_off[RD_SCHEMA_MAX_FIELDS];
  size_t field_bytes[RD_SCHEMA_MAX_FIELDS];
  uint64_t next_key;  /* key of the next insert */
  uint64_t size;      /* live items, <= capacity */
  uint64_t draws;     /* Philox draws consumed */
  double max_p;       /* largest transformed priority seen */
  /* A module's call failed (RD_EINTERNAL): insert, sample, update and
   * gather refuse until rd_table_to_cpu. failed_insert: the rows of the
   * insert it failed in, if it was one. */
  int module_failed;
  uint64_t failed_insert;
  rd_table_stats_t stats;
  /* Scratch for one batch (max_batch entries each), allocated at init so no
   * call allocates. */
  uint64_t *scratch_u64;
  uint32_t *scratch_u32;
  double *scratch_f64;
  rd_table_snapshot_t *snap;     /* the snapshot in progress, or NULL */
  rd_table_observer_t observer;  /* zeroed: none */
} rd_table_t;

/* Fill c with the defaults above and an empty schema. */
void rd_table_config_default(rd_table_config_t *c);

/* Validate c and allocate the table. RD_EINVAL for a bad config, RD_ERANGE
 * for an unrepresentable max_priority, RD_ENOMEM. */
int rd_table_init(rd_table_t *t, const rd_table_config_t *c, rd_error_t *err);
void rd_table_free(rd_table_t *t);

/* A live move of t's storage (daemon/core/workload_move.c): t takes from's
 * sum tree or replay module, rows and scratch, and from's
 * config.rmm and config.storage; t's old ones are freed and from is left
 * empty (rd_table_free on it is safe). from must be a table initialised
 * with t's config but for those two and restored from t's image, and no
 * snapshot of t may be in progress. Only the moved fields are written, so
 * the schema and limits that calls read before taking the table lock see
 * no write; the counters, draws and observer stay t's. Under the lock. */
void rd_table_adopt(rd_table_t *t, rd_table_t *from);

/* Insert n rows. cols has one buffer per schema field, in schema order, of
 * exactly n * field bytes. priorities (raw, e.g. |delta|) may be NULL. keys,
 * if not NULL, receives the n new keys. Oldest items are evicted first.
 * Errors: RD_EINVAL (n == 0, wrong column size, a bool byte other than 0 or 1
 * (rd_field_check_column), NaN/inf/negative priority),
 * RD_ERANGE (priority above max_priority after the transform), RD_ETOOBIG
 * (n > capacity or > max_batch). */
int rd_table_insert(rd_table_t *t, size_t n, const rd_cbuf_t *cols, const double *priorities,
                    uint64_t *keys, rd_error_t *err);

/* Sample n items with probability proportional to priority (with
 * replacement). beta in [0, 1]. Errors: RD_EEMPTY (empty table or all
 * priorities zero), RD_ETOOBIG (n > size or > max_batch), RD_EINVAL (n == 0,
 * bad beta, output column too small). */
int rd_table_sample(rd_table_t *t, size_t n, double beta, unsigned flags,
                    const rd_sample_out_t *out, rd_error_t *err);

/* Set the priorities of n keys (raw values, transformed as on insert), in
 * order. Stale keys are skipped; *n_stale (may be NULL) receives their count.
 * Errors: RD_ENOTFOUND (a key never issued), RD_EINVAL (NaN/inf/negative),
 * RD_ERANGE, RD_ETOOBIG (n > max_batch). */
int rd_table_update(rd_table_t *t, size_t n, const uint64_t *keys, const double *priorities,
                    size_t *n_stale, rd_error_t *err);

/* Copy the rows of n live keys into cols (one buffer per schema field, in
 * schema order, of at least n * field bytes; a buffer with data NULL and
 * bytes 0 skips its field). The storage unit of a hosted learner gathers a
 * sampled batch with this (papers/001 §V-B). Changes nothing in the table.
 * Errors: RD_ENOTFOUND (a key never issued), RD_ERANGE (a stale key: its
 * slot has been overwritten), RD_EINVAL (buffer too small), RD_ETOOBIG
 * (n > max_batch). Nothing is written on error. */
int rd_table_gather(const rd_table_t *t, size_t n, const uint64_t *keys, const rd_buf_t *cols,
                    rd_error_t *err);

/* Transformed priority currently stored for a live key (as the tree holds
 * it, i.e. after fixed-point rounding). RD_ENOTFOUND / stale: RD_ERANGE. */
int rd_table_get_priority(const rd_table_t *t, uint64_t key, double *p, rd_error_t *err);

static inline uint64_t rd_table_size(const rd_table_t *t) { return t->size; }
static inline uint64_t rd_table_next_key(const rd_table_t *t) { return t->next_key; }
static inline rd_table_stats_t rd_table_stats(const rd_table_t *t) { return t->stats; }
/* Bytes held by rows and tree. */
size_t rd_table_memsize(const rd_table_t *t);
/* Bytes the sum tree (or config.rmm's module) of a table of config c
 * holds; 0 if that shape is invalid or the module cannot hold it. */
size_t rd_table_tree_memsize(const rd_table_config_t *c);
/* The replay module's name: "cpu" for the CPU sum tree. */
const char *rd_table_rmm_name(const rd_table_t *t);
/* Bytes the rows of a table of config c hold in host memory: the host
 * rows, or config.storage's memsize (0 if it cannot hold them). */
size_t rd_table_rows_memsize(const rd_table_config_t *c);
/* The storage's name: "host" for the table's own rows. */
const char *rd_table_storage_name(const rd_table_t *t);

/* Move a table off its replay module and storage onto the CPU sum tree and
 * host rows, e.g. after a call returned RD_EINTERNAL because a device
 * failed (until then insert, sample, update and gather refuse with
 * RD_EINTERNAL). The leaves come from the module's leaf() (which keeps answering
 * after a failure), the rows from the storage's read(). Keys, the sampling
 * stream and the priority bound carry on unchanged. What cannot come back
 * is dropped the way the ring drops old items, so every key stays valid or
 * becomes stale, never wrong:
 *  - if the storage cannot read its rows back, every item (the table is
 *    empty afterwards; keys continue from next_key);
 *  - after a failed insert of n rows, the oldest items whose slots that
 *    insert may have half written (size becomes at most capacity - n).
 * *lost (may be NULL) receives the number of items dropped, and err says
 * why when it is not 0. A table already on the CPU is left as it is.
 * RD_ENOMEM (nothing changed). */
int rd_table_to_cpu(rd_table_t *t, uint64_t *lost, rd_error_t *err);

/* ---- Snapshots and restore (checkpoints: daemon/core/durable.h) ----
 *
 * A snapshot is the table's state at one instant (the cut, at begin) taken
 * while calls go on: the caller copies it in bounded slices
 * (rd_table_snapshot_step), taking its lock for each slice only, and the
 * table keeps the cut intact meanwhile by copy-on-write:
 *  - an insert first copies the rows and leaves of the cut's items it is
 *    about to overwrite (the oldest ones, so the cursor just moves on:
 *    at most the insert's own size, so an insert costs at most twice as
 *    much while a snapshot runs);
 *  - an update first saves the leaves of the cut's items it changes that
 *    the cursor has not reached (one bit per item marks them).
 * Samples and gathers change no row or leaf (only the draw counter and
 * the stats, whose cut values begin took). So a finished snapshot holds
 * exactly the state at begin, whatever ran in between; what one slice
 * holds the lock for is bounded by max_rows. One snapshot per table at a
 * time. Rows and leaves are read through the storage and replay module
 * (a device's leaf() answers from its host copy), so a snapshot works for
 * every backend; rd_table_to_cpu during a snapshot fails it. */

/* Buffers for a snapshot of up to `rows` items of a table of config c.
 * RD_ENOMEM. Free with rd_table_snapshot_free (safe on a failed alloc). */
int rd_table_snapshot_alloc(rd_table_snapshot_t *s, const rd_table_config_t *c, uint64_t rows,
                            rd_error_t *err);
void rd_table_snapshot_free(rd_table_snapshot_t *s);

/* Take the cut (caller holds its lock). RD_ETOOBIG if the table holds more
 * items than s->rows_cap (allocate for rd_table_size and try again),
 * RD_EBUSY if a snapshot is in progress, RD_EINTERNAL after a module
 * failure (as every call). */
int rd_table_snapshot_begin(rd_table_t *t, rd_table_snapshot_t *s, rd_error_t *err);

/* Copy up to max_rows more items (caller holds its lock). Returns 1 when
 * the snapshot is complete (and detached), 0 when there is more to copy,
 * or an error (the snapshot failed and is detached: s->why): RD_EINTERNAL
 * (the storage could not be read, or the table moved to the CPU). */
int rd_table_snapshot_step(rd_table_t *t, rd_table_snapshot_t *s, size_t max_rows,
                           rd_error_t *err);

/* Detach an unfinished snapshot (caller holds its lock). */
void rd_table_snapshot_cancel(rd_table_t *t, rd_table_snapshot_t *s);

/* Check that img can be restored into t: t is empty and unused (next_key
 * 0), size <= capacity and <= next_key, every leaf <= the tree's bound,
 * max_p finite in [0, max_priority], bool columns 0 or 1. The caller
 * checks that img came from a table of the same config (capacity, schema,
 * fanout, priority transform, seed). Changes nothing. RD_EINVAL naming
 * what is wrong, RD_ESTATE (t not empty). */
int rd_table_restore_check(const rd_table_t *t, const rd_table_image_t *img, rd_error_t *err);

/* Put img into t (after rd_table_restore_check): rows and leaves in their
 * slots (key mod capacity), key counter, size, draw counter, max_p and
 * stats, so that t samples, updates and inserts exactly as the table img
 * was taken from. The observer is not called. Errors: those of
 * rd_table_restore_check (nothing changed), RD_EINTERNAL (a module failed
 * while writing: the table refuses calls until rd_table_to_cpu, table.h). */
int rd_table_restore(rd_table_t *t, const rd_table_image_t *img, rd_error_t *err);

/* Set (o != NULL) or clear the observer. Caller holds its lock. */
void rd_table_set_observer(rd_table_t *t, const rd_table_observer_t *o);

#endif
