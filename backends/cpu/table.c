/* table.c - prioritized replay table: ring storage + exact sum tree.
 *
 * Every public call first validates its whole batch, then applies it, so a
 * call that returns an error has changed nothing (no partial inserts, no
 * half-applied updates, no consumed random draws).
 *
 * The sum tree is reached only through the rmm_* helpers below: the
 * table's own CPU tree, inline, or the replay module of config.rmm
 * (table.h). The rows likewise through the rows_* helpers: the host
 * rows, or the storage module of config.storage. A module's failure
 * (RD_EINTERNAL) sets module_failed, and the table refuses its calls until
 * rd_table_to_cpu has moved it onto the CPU tree and host rows.
 */
#include "table.h"
#include "hugemem.h"
#include "philox_fill.h"
#include "vpow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rd_divide.h"
#include "rd_philox.h"
#include "rd_tree_step.h"

#define GATHER_AHEAD 32 /* rows prefetched ahead by gather_slots */
#define ROW_BLOCK 64    /* rows one pass over the fields copies (gather, insert) */

/* ------------------------------------------------------------------ */
/* The replay module: the CPU tree or config.rmm's                     */
/* ------------------------------------------------------------------ */

static inline uint64_t rmm_total(const rd_table_t *t) {
  return t->config.rmm ? t->config.rmm->total(t->rmm) : rd_sumtree_total(&t->tree);
}

static inline uint64_t rmm_leaf(const rd_table_t *t, uint32_t slot) {
  return t->config.rmm ? t->config.rmm->leaf(t->rmm, slot) : rd_sumtree_get(&t->tree, slot);
}

/* A module call that fails after the table's own checks is the module's
 * failure: remember it (the calls below refuse until rd_table_to_cpu). */
static int module_fault(rd_table_t *t, int rc) {
  if (rc) t->module_failed = 1;
  return rc;
}

static int rmm_set_range(rd_table_t *t, uint32_t first, size_t n, const uint64_t *leaves,
                         rd_error_t *err) {
  return t->config.rmm ? module_fault(t, t->config.rmm->set_range(t->rmm, first, n, leaves, err))
                       : rd_sumtree_set_range(&t->tree, first, n, leaves, err);
}

static int rmm_sample(rd_table_t *t, size_t n, const uint64_t *targets, uint32_t *slots,
                      rd_error_t *err) {
  return t->config.rmm ? module_fault(t, t->config.rmm->sample(t->rmm, n, targets, slots, err))
                       : rd_sumtree_sample(&t->tree, n, targets, slots, err);
}

static int rmm_update(rd_table_t *t, size_t n, const uint32_t *slots, const uint64_t *values,
                      rd_error_t *err) {
  return t->config.rmm ? module_fault(t, t->config.rmm->update(t->rmm, n, slots, values, err))
                       : rd_sumtree_update(&t->tree, n, slots, values, err);
}

/* The host rows: at least RD_HUGE_PAGE bytes are a huge-page mapping
 * (hugemem.h: a gather reads random rows), fewer come from malloc; the
 * size, fixed by the config, says which. */
static size_t host_rows_bytes(const rd_table_t *t) {
  /* Row bytes <= 64 MiB and capacity <= 2^28, so this cannot overflow. */
  return (size_t)t->config.capacity * t->row_bytes;
}

static uint8_t *host_rows_alloc(const rd_table_t *t) {
  const size_t bytes = host_rows_bytes(t);
  return bytes >= RD_HUGE_PAGE ? rd_huge_map(bytes) : calloc(bytes ? bytes : 1, 1);
}

static void host_rows_free(const rd_table_t *t, uint8_t *rows) {
  if (rows == NULL) return;
  const size_t bytes = host_rows_bytes(t);
  if (bytes >= RD_HUGE_PAGE)
    rd_huge_unmap(rows, bytes);
  else
    free(rows);
}

/* Field copies between the rows and a field's column (an insert's, a
 * sample's, a snapshot's). Each copies m values of fb bytes: copy_strided
 * from src + i * ss to dst + i * ds (rows to a column or back: one stride
 * is the row size, the other fb), copy_gather from row i's pointer plus
 * off. They are inlined per field size (ROW_COPY): a copy of a constant
 * size compiles to plain loads and stores, where a memcpy call per field
 * and row cost more than the copy. */
static inline __attribute__((always_inline)) void copy_strided(size_t m, uint8_t *dst, size_t ds,
                                                               const uint8_t *src, size_t ss,
                                                               size_t fb) {
  for (size_t i = 0; i < m; i++) memcpy(dst + i * ds, src + i * ss, fb);
}

static inline __attribute__((always_inline)) void copy_gather(size_t m, const uint8_t *const *row,
                                                              size_t off, uint8_t *dst, size_t fb) {
  for (size_t i = 0; i < m; i++) memcpy(dst + i * fb, row[i] + off, fb);
}

/* CALL with the field size as a constant where it is a common one. */
#define ROW_COPY(fb, CALL)                   \
  switch (fb) {                              \
  case 1: CALL(1); break;                    \
  case 4: CALL(4); break;                    \
  case 8: CALL(8); break;                    \
  case 12: CALL(12); break;                  \
  case 16: CALL(16); break;                  \
  case 32: CALL(32); break;                  \
  default: CALL(fb); break;                  \
  }

/* Rows [first, first + n) of `rows` (t's host rows, or rows of t's shape)
 * = rows [at, at + n) of columns cols, in blocks of ROW_BLOCK rows so that
 * a block's lines stay in the L1 while every field is written into them. */
static void host_rows_put(const rd_table_t *t, uint8_t *rows, uint32_t first, size_t n,
                          const rd_cbuf_t *cols, size_t at) {
  const size_t rb = t->row_bytes;
  for (size_t i0 = 0; i0 < n; i0 += ROW_BLOCK) {
    const size_t m = n - i0 < ROW_BLOCK ? n - i0 : ROW_BLOCK;
    uint8_t *base = rows + ((size_t)first + i0) * rb;
    for (uint32_t f = 0; f < t->config.schema.n_fields; f++) {
      const size_t fb = t->field_bytes[f];
      const uint8_t *src = (const uint8_t *)cols[f].data + (at + i0) * fb;
#define PUT(b) copy_strided(m, base + t->field_off[f], rb, src, b, b)
      ROW_COPY(fb, PUT)
#undef PUT
    }
  }
}

/* Columns dst[f] (NULL: skipped) = host rows [slot, slot + n). */
static void host_rows_get(const rd_table_t *t, uint32_t slot, size_t n, uint8_t *const *dst) {
  const size_t rb = t->row_bytes;
  for (size_t i0 = 0; i0 < n; i0 += ROW_BLOCK) {
    const size_t m = n - i0 < ROW_BLOCK ? n - i0 : ROW_BLOCK;
    const uint8_t *base = t->host_rows + ((size_t)slot + i0) * rb;
    for (uint32_t f = 0; f < t->config.schema.n_fields; f++) {
      if (dst[f] == NULL) continue;
      const size_t fb = t->field_bytes[f];
      uint8_t *out = dst[f] + i0 * fb;
#define GET(b) copy_strided(m, out, b, base + t->field_off[f], rb, b)
      ROW_COPY(fb, GET)
#undef GET
    }
  }
}

/* Rows [first, first + n) = rows [at, at + n) of the insert's columns. */
static int rows_write(rd_table_t *t, uint32_t first, size_t n, const rd_cbuf_t *cols, size_t at,
                      rd_error_t *err) {
  const uint32_t nf = t->config.schema.n_fields;
  if (t->config.storage == NULL) {
    host_rows_put(t, t->host_rows, first, n, cols, at);
    return RD_OK;
  }
  const void *src[RD_SCHEMA_MAX_FIELDS];
  for (uint32_t f = 0; f < nf; f++) src[f] = (const uint8_t *)cols[f].data + at * t->field_bytes[f];
  return module_fault(t, t->config.storage->write(t->rows, first, n, src, err));
}

/* The rows of n slots into dst[f] (NULL: field skipped), from the
 * storage module. The host rows are read in place by the callers. */
static int rows_read(const rd_table_t *t, size_t n, const uint32_t *slots, const rd_buf_t *cols,
                     rd_error_t *err) {
  void *dst[RD_SCHEMA_MAX_FIELDS];
  for (uint32_t f = 0; f < t->config.schema.n_fields; f++) dst[f] = cols[f].data;
  return t->config.storage->read(t->rows, n, slots, dst, err);
}

static int refuse_after_fault(const rd_table_t *t, rd_error_t *err) {
  return rd_error_set(err, RD_EINTERNAL, "this table's %s failed earlier; it must move to the "
                      "CPU (rd_table_to_cpu) before it is used again",
                      t->config.rmm ? t->config.rmm->name : t->config.storage->name);
}

/* Snapshot copy-on-write (below): before an insert overwrites the slots
 * of keys [.., k_end) and before an update changes leaves. */
static void snap_before_overwrite(rd_table_t *t, uint64_t k_end);
static void snap_before_update(rd_table_t *t, size_t n, const uint64_t *keys);
static void snap_fail(rd_table_t *t, const char *why);

const char *rd_table_rmm_name(const rd_table_t *t) {
  return t->config.rmm ? t->config.rmm->name : "cpu";
}

size_t rd_table_tree_memsize(const rd_table_config_t *c) {
  return c->rmm ? c->rmm->memsize(c->capacity, c->fanout)
                : rd_sumtree_memsize(c->capacity, c->fanout);
}

const char *rd_table_storage_name(const rd_table_t *t) {
  return t->config.storage ? t->config.storage->name : "host";
}

/* Bytes per row of each field of c's schema; the field count. */
static uint32_t field_sizes(const rd_table_config_t *c, size_t *fb) {
  for (uint32_t f = 0; f < c->schema.n_fields; f++) fb[f] = rd_field_bytes(&c->schema.fields[f]);
  return c->schema.n_fields;
}

size_t rd_table_rows_memsize(const rd_table_config_t *c) {
  size_t fb[RD_SCHEMA_MAX_FIELDS];
  uint32_t nf = field_sizes(c, fb);
  if (c->storage) return c->storage->memsize(c->capacity, nf, fb);
  size_t bytes = 0;
  for (uint32_t f = 0; f < nf; f++) bytes += (size_t)c->capacity * fb[f];
  return bytes;
}

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

void rd_table_config_default(rd_table_config_t *c) {
  memset(c, 0, sizeof *c);
  c->capacity = 1u << 20;
  c->fanout = 16;
  c->alpha = 0.6;
  c->epsilon = 1e-6;
  c->max_priority = 1048576.0; /* 2^20 */
  c->seed = 0;
  c->max_batch = 65536;
  c->threads = 1;
}

static int validate_config(const rd_table_config_t *c, rd_error_t *err) {
  int rc = rd_schema_validate(&c->schema, err);
  if (rc) return rc;
  if (c->capacity == 0 || c->capacity > RD_SUMTREE_MAX_CAPACITY)
    return rd_error_set(err, RD_EINVAL, "capacity %u is outside [1, %u]", c->capacity,
                        RD_SUMTREE_MAX_CAPACITY);
  if (rd_sumtree_memsize(c->capacity, c->fanout) == 0)
    return rd_error_set(err, RD_EINVAL, "fanout %u is not a power of two in [%u, %u]",
                        c->fanout, RD_SUMTREE_MIN_FANOUT, RD_SUMTREE_MAX_FANOUT);
  if (!isfinite(c->alpha) || c->alpha < 0)
    return rd_error_set(err, RD_EINVAL, "alpha must be a finite number >= 0, not %g", c->alpha);
  if (!isfinite(c->epsilon) || c->epsilon < 0)
    return rd_error_set(err, RD_EINVAL, "epsilon must be a finite number >= 0, not %g",
                        c->epsilon);
  if (c->max_batch == 0 || c->max_batch > RD_TABLE_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "max_batch %u is outside [1, %u]", c->max_batch,
                        RD_TABLE_MAX_BATCH);
  return RD_OK;
}

int rd_table_init(rd_table_t *t, const rd_table_config_t *c, rd_error_t *err) {
  memset(t, 0, sizeof *t);
  int rc = validate_config(c, err);
  if (rc) return rc;
  rd_fixed_t fixed;
  rc = rd_fixed_init(&fixed, c->max_priority, c->capacity, err);
  if (rc) return rc;

  t->config = *c;
  t->fixed = fixed;
  t->max_leaf = rd_st_max_leaf(c->capacity);
  if (c->rmm != NULL) {
    rc = c->rmm->create(&t->rmm, c->capacity, c->fanout, t->max_leaf, err);
    if (rc) {
      memset(t, 0, sizeof *t);
      return rc;
    }
  } else {
    rc = rd_sumtree_init(&t->tree, c->capacity, c->fanout, err);
    if (rc) return rc;
    rd_sumtree_set_threads(&t->tree, c->threads);
  }
  field_sizes(c, t->field_bytes);
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    t->field_off[f] = t->row_bytes;
    t->row_bytes += t->field_bytes[f];
  }
  if (c->storage != NULL) {
    rc = c->storage->create(&t->rows, c->capacity, c->schema.n_fields, t->field_bytes, c->rmm,
                            t->rmm, err);
    if (rc) {
      t->rows = NULL;
      rd_table_free(t);
      return rc;
    }
  }
  if (c->storage == NULL && (t->host_rows = host_rows_alloc(t)) == NULL) {
    size_t want = host_rows_bytes(t);
    rd_table_free(t);
    return rd_error_set(err, RD_ENOMEM, "cannot allocate %zu bytes for the table's rows", want);
  }
  t->scratch_u64 = malloc((size_t)c->max_batch * sizeof(uint64_t));
  t->scratch_u32 = malloc((size_t)c->max_batch * sizeof(uint32_t));
  t->scratch_f64 = malloc((size_t)c->max_batch * sizeof(double));
  if (t->scratch_u64 == NULL || t->scratch_u32 == NULL || t->scratch_f64 == NULL) {
    rd_table_free(t);
    return rd_error_set(err, RD_ENOMEM, "cannot allocate scratch for %u items", c->max_batch);
  }
  t->max_p = 1.0 < c->max_priority ? 1.0 : c->max_priority;
  return RD_OK;
}

void rd_table_free(rd_table_t *t) {
  if (t->snap != NULL) snap_fail(t, "the table was freed");
  host_rows_free(t, t->host_rows);
  free(t->scratch_u64);
  free(t->scratch_u32);
  free(t->scratch_f64);
  if (t->tree.mem != NULL) rd_sumtree_free(&t->tree);
  /* The storage first: it may share the replay module's resources. */
  if (t->rows != NULL) t->config.storage->destroy(t->rows);
  if (t->rmm != NULL) t->config.rmm->destroy(t->rmm);
  memset(t, 0, sizeof *t);
}

/* Every field rd_table_init allocates or sets from config.rmm and
 * config.storage is moved here, next to init and free, so that a field
 * added there is moved too (workload_move.c once copied these itself and
 * missed a new scratch array). */
void rd_table_adopt(rd_table_t *t, rd_table_t *from) {
  rd_table_t old = *t;
  t->tree = from->tree;
  t->rmm = from->rmm;
  t->rows = from->rows;
  t->host_rows = from->host_rows;
  t->scratch_u64 = from->scratch_u64;
  t->scratch_u32 = from->scratch_u32;
  t->scratch_f64 = from->scratch_f64;
  t->config.rmm = from->config.rmm;
  t->config.storage = from->config.storage;
  old.snap = NULL; /* the caller's check: none in progress */
  rd_table_free(&old);
  memset(from, 0, sizeof *from);
}

size_t rd_table_memsize(const rd_table_t *t) {
  size_t bytes = t->config.rmm ? t->config.rmm->memsize(t->config.capacity, t->config.fanout)
                               : t->tree.mem_bytes;
  return bytes + rd_table_rows_memsize(&t->config);
}

/* p[i] = (raw[i] + epsilon)^alpha, the common exponents special-cased and
 * the rest by rd_vpow (vpow.h: why not pow()). p may be raw. */
static void transform(const rd_table_config_t *c, size_t n, const double *raw, double *p) {
  for (size_t i = 0; i < n; i++) p[i] = raw[i] + c->epsilon;
  if (c->alpha == 1.0) return;
  if (c->alpha == 0.5) {
    for (size_t i = 0; i < n; i++) p[i] = sqrt(p[i]);
  } else if (c->alpha == 0.0) {
    for (size_t i = 0; i < n; i++) p[i] = 1.0;
  } else {
    rd_vpow(n, p, c->alpha, p);
  }
}

/* Transform and convert n raw priorities into fixed-point leaves (out) and
 * transformed values (p), failing on the first bad one. *max_out receives
 * the largest transformed value. */
static int convert_priorities(const rd_table_t *t, size_t n, const double *raw, uint64_t *out,
                              double *p, double *max_out, rd_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    double x = raw[i];
    if (isnan(x) || isinf(x) || x < 0)
      return rd_error_set(err, RD_EINVAL,
                          "priority at batch index %zu is %g; priorities must be finite and >= 0",
                          i, x);
  }
  transform(&t->config, n, raw, p);
  double mx = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(p[i] <= t->fixed.max_priority))
      return rd_error_set(err, RD_ERANGE,
                          "priority at batch index %zu is %g after the transform, above this "
                          "table's max_priority %g",
                          i, p[i], t->fixed.max_priority);
    out[i] = rd_fixed_from_priority(&t->fixed, p[i]);
    if (out[i] > t->max_leaf) /* guaranteed by rd_fixed_init; checked anyway */
      return rd_error_set(err, RD_ERANGE, "priority at batch index %zu (%g) does not fit the tree",
                          i, p[i]);
    if (p[i] > mx) mx = p[i];
  }
  *max_out = mx;
  return RD_OK;
}

int rd_table_insert(rd_table_t *t, size_t n, const rd_cbuf_t *cols, const double *priorities,
                    uint64_t *keys, rd_error_t *err) {
  const rd_table_config_t *c = &t->config;
  if (t->module_failed) return refuse_after_fault(t, err);
  if (n == 0) return rd_error_set(err, RD_EINVAL, "insert of an empty batch");
  if (n > c->capacity)
    return rd_error_set(err, RD_ETOOBIG, "insert of %zu rows into a table of capacity %u", n,
                        c->capacity);
  if (n > c->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "insert of %zu rows exceeds max_batch %u", n,
                        c->max_batch);
  if (cols == NULL) return rd_error_set(err, RD_EINVAL, "insert without columns");
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    size_t want = n * t->field_bytes[f];
    if (cols[f].bytes != want || (want > 0 && cols[f].data == NULL))
      return rd_error_set(err, RD_EINVAL,
                          "field \"%s\" has %zu bytes for %zu rows; expected %zu (%zu per row)",
                          c->schema.fields[f].name, cols[f].bytes, n, want, t->field_bytes[f]);
  }
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    int rc = rd_field_check_column(&c->schema.fields[f], cols[f].data, n, err);
    if (rc) return rc;
  }
  uint64_t *leaves = t->scratch_u64;
  double batch_max = 0;
  if (priorities != NULL) {
    int rc = convert_priorities(t, n, priorities, leaves, t->scratch_f64, &batch_max, err);
    if (rc) return rc;
  } else {
    uint64_t v = rd_fixed_from_priority(&t->fixed, t->max_p);
    for (size_t i = 0; i < n; i++) leaves[i] = v;
  }

  /* A snapshot in progress keeps the items this insert overwrites. */
  if (t->snap != NULL && t->next_key + n > c->capacity)
    snap_before_overwrite(t, t->next_key + n - c->capacity);

  /* Apply: the ring range [cursor, cursor + n) may wrap once. */
  uint32_t cursor = (uint32_t)(t->next_key % c->capacity);
  size_t first = c->capacity - cursor < n ? c->capacity - cursor : n;
  /* Both ranges are in bounds and every value <= max_leaf, so only a
   * module's failure can stop this; the tree still goes first so rows never
   * change on an error of the CPU tree. */
  int rc = rmm_set_range(t, cursor, first, leaves, err);
  if (rc == RD_OK && n > first) rc = rmm_set_range(t, 0, n - first, leaves + first, err);
  if (rc == RD_OK) rc = rows_write(t, cursor, first, cols, 0, err);
  if (rc == RD_OK && n > first) rc = rows_write(t, 0, n - first, cols, first, err);
  if (rc) {
    if (t->module_failed) t->failed_insert = n;
    return rc;
  }

  if (keys != NULL)
    for (size_t i = 0; i < n; i++) keys[i] = t->next_key + i;
  const uint64_t first_key = t->next_key;
  t->next_key += n;
  t->size = t->size + n < c->capacity ? t->size + n : c->capacity;
  if (batch_max > t->max_p) t->max_p = batch_max;
  t->stats.inserts += n;
  if (t->observer.insert) t->observer.insert(t->observer.arg, first_key, n, c->schema.n_fields, cols,
                                            priorities);
  return RD_OK;
}

/* Keys and slots without a division per row. The live keys are at most
 * `capacity` consecutive integers ending at next_key - 1, so each lies in
 * the ring cycle of next_key - 1 (slot = key - base, base that cycle's
 * first key) or in the cycle before it (slot = key - base + capacity). One
 * division per call then replaces one per row and call: a 64-bit divide
 * cost about as much as the rest of a row's bookkeeping in the sampler's
 * update, sample and gather. Only for live keys (callers check first). */
typedef struct {
  uint64_t base, last; /* first key of last's ring cycle; the newest key */
  uint32_t cap;
} keymap_t;

static keymap_t keymap(const rd_table_t *t) {
  const uint64_t last = t->next_key - 1;
  keymap_t m = {last - last % t->config.capacity, last, t->config.capacity};
  return m;
}

static inline uint32_t slot_of_key(const keymap_t *m, uint64_t key) {
  return (uint32_t)(key - m->base + (key < m->base ? m->cap : 0));
}

static inline uint64_t key_of_slot(const keymap_t *m, uint32_t slot) {
  const uint64_t k = m->base + slot;
  return k > m->last ? k - m->cap : k;
}

static inline void prefetch_row(const uint8_t *row, size_t rb) {
  __builtin_prefetch(row);
  if (rb > 1) __builtin_prefetch(row + rb - 1); /* a row may straddle two lines */
}

/* The rows of `slots` from the host rows into cols (a field whose buffer
 * is NULL is skipped). Every row of a table larger than the cache is a
 * miss: rows are prefetched GATHER_AHEAD ahead, and copied ROW_BLOCK rows
 * at a time, field by field, so a block's lines are read from memory once
 * and then from the L1 (figures in docs/benchmarks.md). */
static void gather_slots(const rd_table_t *t, size_t n, const uint32_t *slots,
                         const rd_buf_t *cols) {
  const size_t rb = t->row_bytes;
  const uint8_t *rows = t->host_rows;
  for (size_t i = 0; i < n && i < GATHER_AHEAD; i++) prefetch_row(rows + (size_t)slots[i] * rb, rb);
  const uint8_t *row[ROW_BLOCK];
  for (size_t i0 = 0; i0 < n; i0 += ROW_BLOCK) {
    const size_t m = n - i0 < ROW_BLOCK ? n - i0 : ROW_BLOCK;
    for (size_t i = 0; i < m; i++) {
      row[i] = rows + (size_t)slots[i0 + i] * rb;
      if (i0 + i + GATHER_AHEAD < n) prefetch_row(rows + (size_t)slots[i0 + i + GATHER_AHEAD] * rb, rb);
    }
    for (uint32_t f = 0; f < t->config.schema.n_fields; f++) {
      if (cols[f].data == NULL) continue;
      const size_t fb = t->field_bytes[f];
      uint8_t *dst = (uint8_t *)cols[f].data + i0 * fb;
#define GATHER(b) copy_gather(m, row, t->field_off[f], dst, b)
      ROW_COPY(fb, GATHER)
#undef GATHER
    }
  }
}

int rd_table_sample(rd_table_t *t, size_t n, double beta, unsigned flags,
                    const rd_sample_out_t *out, rd_error_t *err) {
  const rd_table_config_t *c = &t->config;
  if (t->module_failed) return refuse_after_fault(t, err);
  if (n == 0) return rd_error_set(err, RD_EINVAL, "sample of an empty batch");
  if (!(beta >= 0 && beta <= 1))
    return rd_error_set(err, RD_EINVAL, "beta must be in [0, 1], not %g", beta);
  if (t->size == 0) return rd_error_set(err, RD_EEMPTY, "cannot sample: the table is empty");
  if (n > t->size)
    return rd_error_set(err, RD_ETOOBIG, "sample of %zu items from a table holding %llu", n,
                        (unsigned long long)t->size);
  if (n > c->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "sample of %zu items exceeds max_batch %u", n,
                        c->max_batch);
  uint64_t total = rmm_total(t);
  if (total == 0)
    return rd_error_set(err, RD_EEMPTY, "cannot sample: every priority in the table is zero");
  if (out == NULL || out->keys == NULL || out->probabilities == NULL || out->weights == NULL)
    return rd_error_set(err, RD_EINVAL, "sample needs key, probability and weight buffers");
  if (out->cols != NULL)
    for (uint32_t f = 0; f < c->schema.n_fields; f++)
      if (out->cols[f].bytes < n * t->field_bytes[f] || out->cols[f].data == NULL)
        return rd_error_set(err, RD_EINVAL, "output buffer of field \"%s\" holds %zu bytes; "
                            "%zu needed", c->schema.fields[f].name, out->cols[f].bytes,
                            n * t->field_bytes[f]);

  /* Targets from the table's Philox stream (contract in table.h). */
  uint64_t *targets = t->scratch_u64;
  uint32_t *slots = t->scratch_u32;
  const uint64_t d0 = t->draws;
  rd_philox_fill(c->seed, d0, n, targets); /* the draws, then each its target */
  if (flags & RD_SAMPLE_STRATIFIED) {
    /* floor((i total + r) / n) without a divide per item (rd_divide.h;
     * n <= RD_TABLE_MAX_BATCH < 2^32, total < 2^63). */
    const rd_strata_t strata = rd_strata(n, total);
    for (size_t i = 0; i < n; i++)
      targets[i] = rd_strata_target(&strata, i, rd_scale_u64(targets[i], total));
  } else {
    for (size_t i = 0; i < n; i++) targets[i] = rd_scale_u64(targets[i], total);
  }
  int rc = rmm_sample(t, n, targets, slots, err);
  if (rc) return rc; /* a module's failure: every target is < total */

  /* P(i) = leaf / total, w = (N P)^-beta (rd_vpow: vpow.h), then divided
   * by the batch max. */
  double dtotal = (double)total, N = (double)t->size, wmax = 0;
  const keymap_t km = keymap(t);
  for (size_t i = 0; i < n; i++) {
    /* Exactly (double)leaf / (double)total, the expression every backend uses. */
    double pr = (double)rmm_leaf(t, slots[i]) / dtotal;
    out->keys[i] = key_of_slot(&km, slots[i]);
    out->probabilities[i] = pr;
    out->weights[i] = beta == 0 ? 1.0 : N * pr;
  }
  if (beta != 0) rd_vpow(n, out->weights, -beta, out->weights);
  for (size_t i = 0; i < n; i++)
    if (out->weights[i] > wmax) wmax = out->weights[i];
  if (!(flags & RD_SAMPLE_RAW_WEIGHTS) && wmax > 0)
    for (size_t i = 0; i < n; i++) out->weights[i] /= wmax;

  if (out->cols != NULL && c->storage != NULL) {
    rc = module_fault(t, rows_read(t, n, slots, out->cols, err));
    if (rc) return rc;
  } else if (out->cols != NULL) {
    gather_slots(t, n, slots, out->cols);
  }
  t->draws = d0 + n;
  t->stats.samples += n;
  return RD_OK;
}

int rd_table_update(rd_table_t *t, size_t n, const uint64_t *keys, const double *priorities,
                    size_t *n_stale, rd_error_t *err) {
  if (t->module_failed) return refuse_after_fault(t, err);
  if (n > t->config.max_batch)
    return rd_error_set(err, RD_ETOOBIG, "update of %zu keys exceeds max_batch %u", n,
                        t->config.max_batch);
  for (size_t i = 0; i < n; i++)
    if (keys[i] >= t->next_key)
      return rd_error_set(err, RD_ENOTFOUND,
                          "key %llu at batch index %zu was never issued by this table "
                          "(next key is %llu)",
                          (unsigned long long)keys[i], i, (unsigned long long)t->next_key);
  uint64_t *values = t->scratch_u64;
  double batch_max = 0;
  double *p = t->scratch_f64;
  int rc = convert_priorities(t, n, priorities, values, p, &batch_max, err);
  if (rc) return rc;

  /* Compact the live keys in place (index live <= i). Only applied
   * priorities count toward the "largest seen" default of inserts. */
  uint32_t *slots = t->scratch_u32;
  const uint64_t oldest = t->next_key - t->size;
  const keymap_t km = keymap(t);
  size_t live = 0;
  batch_max = 0;
  for (size_t i = 0; i < n; i++) {
    if (keys[i] < oldest) continue;
    slots[live] = slot_of_key(&km, keys[i]);
    values[live] = values[i];
    if (p[i] > batch_max) batch_max = p[i];
    live++;
  }
  if (t->snap != NULL) snap_before_update(t, n, keys);
  rc = rmm_update(t, live, slots, values, err);
  if (rc) return rc; /* a module's failure: slots < capacity, values bounded */
  if (batch_max > t->max_p) t->max_p = batch_max;
  t->stats.updates += live;
  t->stats.stale_updates += n - live;
  if (n_stale != NULL) *n_stale = n - live;
  if (t->observer.update && n > 0) t->observer.update(t->observer.arg, n, keys, priorities);
  return RD_OK;
}

int rd_table_gather(const rd_table_t *t, size_t n, const uint64_t *keys, const rd_buf_t *cols,
                    rd_error_t *err) {
  const rd_table_config_t *c = &t->config;
  if (t->module_failed) return refuse_after_fault(t, err);
  if (n > c->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "gather of %zu keys exceeds max_batch %u", n,
                        c->max_batch);
  if (n > 0 && (keys == NULL || cols == NULL))
    return rd_error_set(err, RD_EINVAL, "gather needs keys and column buffers");
  for (uint32_t f = 0; f < c->schema.n_fields && n > 0; f++) {
    if (cols[f].data == NULL && cols[f].bytes == 0) continue;
    if (cols[f].data == NULL || cols[f].bytes < n * t->field_bytes[f])
      return rd_error_set(err, RD_EINVAL, "output buffer of field \"%s\" holds %zu bytes; "
                          "%zu needed", c->schema.fields[f].name, cols[f].bytes,
                          n * t->field_bytes[f]);
  }
  const uint64_t oldest = t->next_key - t->size;
  for (size_t i = 0; i < n; i++) {
    if (keys[i] >= t->next_key)
      return rd_error_set(err, RD_ENOTFOUND, "key %llu at batch index %zu was never issued by "
                          "this table", (unsigned long long)keys[i], i);
    if (keys[i] < oldest)
      return rd_error_set(err, RD_ERANGE, "key %llu at batch index %zu is stale: its slot has "
                          "been overwritten", (unsigned long long)keys[i], i);
  }
  /* Each key's slot once. Gathers are serialized with every other call:
   * the scratch is free. */
  uint32_t *slots = t->scratch_u32;
  const keymap_t km = keymap(t);
  for (size_t i = 0; i < n; i++) slots[i] = slot_of_key(&km, keys[i]);
  if (c->storage != NULL) return n > 0 ? rows_read(t, n, slots, cols, err) : RD_OK;
  gather_slots(t, n, slots, cols);
  return RD_OK;
}

int rd_table_get_priority(const rd_table_t *t, uint64_t key, double *p, rd_error_t *err) {
  if (key >= t->next_key)
    return rd_error_set(err, RD_ENOTFOUND, "key %llu was never issued by this table",
                        (unsigned long long)key);
  if (key < t->next_key - t->size)
    return rd_error_set(err, RD_ERANGE, "key %llu is stale: its slot has been overwritten",
                        (unsigned long long)key);
  uint32_t slot = (uint32_t)(key % t->config.capacity);
  *p = rd_fixed_to_priority(&t->fixed, rmm_leaf(t, slot));
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Moving onto the CPU                                                 */
/* ------------------------------------------------------------------ */

/* Calls f(t, slot0, n, arg) for the slots of keys [k0, k0 + count) in
 * runs of at most max_batch contiguous slots (a run stops at the ring's
 * end). Stops at the first error. */
static int for_slot_runs(const rd_table_t *t, uint64_t k0, uint64_t count,
                         int (*f)(const rd_table_t *, uint32_t, size_t, void *, rd_error_t *),
                         void *arg, rd_error_t *err) {
  const uint32_t cap = t->config.capacity;
  for (uint64_t done = 0; done < count;) {
    uint32_t slot = (uint32_t)((k0 + done) % cap);
    uint64_t n = count - done;
    if (n > cap - slot) n = cap - slot;
    if (n > t->config.max_batch) n = t->config.max_batch;
    int rc = f(t, slot, (size_t)n, arg, err);
    if (rc) return rc;
    done += n;
  }
  return RD_OK;
}

/* Where copy_rows_back puts a run: host rows (to), through columns of
 * `chunk` rows (buf, one per field; at most ROWS_BACK_BYTES together, so
 * a table of large rows does not need a large buffer too). */
#define ROWS_BACK_BYTES ((size_t)4 << 20)
typedef struct {
  uint8_t *to;
  size_t chunk;
  uint8_t *buf[RD_SCHEMA_MAX_FIELDS];
} rows_back_t;

/* Read a run of rows from the storage into host rows. */
static int copy_rows_back(const rd_table_t *t, uint32_t slot, size_t n, void *arg,
                          rd_error_t *err) {
  rows_back_t *rb = arg;
  void *dst[RD_SCHEMA_MAX_FIELDS];
  rd_cbuf_t src[RD_SCHEMA_MAX_FIELDS];
  for (size_t done = 0; done < n; done += rb->chunk) {
    const size_t m = n - done < rb->chunk ? n - done : rb->chunk;
    for (uint32_t f = 0; f < t->config.schema.n_fields; f++) {
      dst[f] = rb->buf[f];
      src[f].data = rb->buf[f];
      src[f].bytes = m * t->field_bytes[f];
    }
    for (size_t i = 0; i < m; i++) t->scratch_u32[i] = slot + (uint32_t)(done + i);
    int rc = t->config.storage->read(t->rows, m, t->scratch_u32, dst, err);
    if (rc) return rc;
    host_rows_put(t, rb->to, slot + (uint32_t)done, m, src, 0);
  }
  return RD_OK;
}

/* Write a run of the current leaves into a CPU tree. */
static int copy_leaves_back(const rd_table_t *t, uint32_t slot, size_t n, void *arg,
                            rd_error_t *err) {
  rd_sumtree_t *tree = arg;
  for (size_t i = 0; i < n; i++) t->scratch_u64[i] = rmm_leaf(t, slot + (uint32_t)i);
  return rd_sumtree_set_range(tree, slot, n, t->scratch_u64, err);
}

int rd_table_to_cpu(rd_table_t *t, uint64_t *lost, rd_error_t *err) {
  const rd_table_config_t *c = &t->config;
  if (lost != NULL) *lost = 0;
  if (c->rmm == NULL && c->storage == NULL) return RD_OK;
  if (t->snap != NULL) snap_fail(t, "the table moved to the CPU during the snapshot");
  const uint32_t nf = c->schema.n_fields;
  uint64_t size = t->size;
  const char *why = "";
  /* The oldest items may share slots with the failed insert's rows. */
  if (t->failed_insert > 0 && size > c->capacity - t->failed_insert) {
    size = c->capacity - t->failed_insert;
    why = "their slots were being overwritten by the insert the module failed in";
  }

  rows_back_t back = {0};
  rd_sumtree_t tree;
  int rc = rd_sumtree_init(&tree, c->capacity, c->fanout, err);
  if (rc) return rc;
  if (c->storage != NULL) {
    back.to = host_rows_alloc(t);
    back.chunk = t->row_bytes > 0 ? ROWS_BACK_BYTES / t->row_bytes : c->max_batch;
    if (back.chunk > c->max_batch) back.chunk = c->max_batch;
    if (back.chunk == 0) back.chunk = 1;
    for (uint32_t f = 0; f < nf && back.to != NULL; f++)
      if ((back.buf[f] = malloc(back.chunk * t->field_bytes[f] + 1)) == NULL) {
        rc = rd_error_set(err, RD_ENOMEM, "cannot allocate %zu bytes for field \"%s\"",
                          back.chunk * t->field_bytes[f], c->schema.fields[f].name);
        goto fail;
      }
    if (back.to == NULL) {
      rc = rd_error_set(err, RD_ENOMEM, "cannot allocate %zu bytes for the table's rows",
                        host_rows_bytes(t));
      goto fail;
    }
  }
  rd_error_t rerr;
  rd_error_clear(&rerr);
  if (c->storage != NULL &&
      for_slot_runs(t, t->next_key - size, size, copy_rows_back, &back, &rerr) != RD_OK) {
    size = 0; /* what came back cannot be told from what did not */
    why = rerr.msg;
  }
  rc = for_slot_runs(t, t->next_key - size, size, copy_leaves_back, &tree, err);
  if (rc) goto fail;

  /* Swap: the storage before the module (it may share its resources). */
  const uint64_t dropped = t->size - size;
  if (t->rows != NULL) c->storage->destroy(t->rows);
  if (t->rmm != NULL) c->rmm->destroy(t->rmm);
  if (t->tree.mem != NULL) rd_sumtree_free(&t->tree);
  if (c->storage != NULL) t->host_rows = back.to;
  for (uint32_t f = 0; f < nf; f++) free(back.buf[f]);
  t->rows = NULL;
  t->rmm = NULL;
  t->config.rmm = NULL;
  t->config.storage = NULL;
  t->tree = tree;
  rd_sumtree_set_threads(&t->tree, c->threads);
  t->size = size;
  t->module_failed = 0;
  t->failed_insert = 0;
  if (lost != NULL) *lost = dropped;
  if (dropped > 0)
    rd_error_set(err, RD_OK, "%llu items dropped: %s", (unsigned long long)dropped, why);
  return RD_OK;

fail:
  for (uint32_t f = 0; f < nf; f++) free(back.buf[f]);
  host_rows_free(t, back.to);
  rd_sumtree_free(&tree);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Snapshots and restore                                               */
/* ------------------------------------------------------------------ */

static inline int bit_get(const uint64_t *b, uint64_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }
static inline void bit_set(uint64_t *b, uint64_t i) { b[i >> 6] |= UINT64_C(1) << (i & 63); }

int rd_table_snapshot_alloc(rd_table_snapshot_t *s, const rd_table_config_t *c, uint64_t rows,
                            rd_error_t *err) {
  memset(s, 0, sizeof *s);
  size_t n = rows ? (size_t)rows : 1;
  s->img.leaves = malloc(n * sizeof(uint64_t));
  s->leaf_saved = malloc(((n + 63) / 64) * sizeof(uint64_t));
  int ok = s->img.leaves != NULL && s->leaf_saved != NULL;
  for (uint32_t f = 0; f < c->schema.n_fields && ok; f++)
    ok = (s->img.cols[f] = malloc(n * rd_field_bytes(&c->schema.fields[f]))) != NULL;
  if (!ok) {
    rd_table_snapshot_free(s);
    return rd_error_set(err, RD_ENOMEM, "out of memory for a snapshot of %llu items",
                        (unsigned long long)rows);
  }
  s->rows_cap = rows;
  return RD_OK;
}

void rd_table_snapshot_free(rd_table_snapshot_t *s) {
  free(s->img.leaves);
  free(s->leaf_saved);
  for (uint32_t f = 0; f < RD_SCHEMA_MAX_FIELDS; f++) free(s->img.cols[f]);
  memset(s, 0, sizeof *s);
}

static void snap_detach(rd_table_t *t) {
  t->snap->active = 0;
  t->snap = NULL;
}

static void snap_fail(rd_table_t *t, const char *why) {
  rd_table_snapshot_t *s = t->snap;
  s->failed = 1;
  rd_error_set(&s->why, RD_EINTERNAL, "the snapshot failed: %s", why);
  snap_detach(t);
}

/* Copy the cut's keys [k0, k1) (all >= cursor, still in their slots) into
 * the snapshot: rows, and the leaves no update saved first. */
static int snap_copy(rd_table_t *t, uint64_t k0, uint64_t k1, rd_error_t *err) {
  rd_table_snapshot_t *s = t->snap;
  const rd_table_config_t *c = &t->config;
  const uint32_t cap = c->capacity, nf = c->schema.n_fields;
  for (uint64_t k = k0; k < k1;) {
    uint32_t slot = (uint32_t)(k % cap);
    uint64_t run = k1 - k;
    if (run > cap - slot) run = cap - slot;
    if (c->storage != NULL && run > c->max_batch) run = c->max_batch;
    const uint64_t idx = k - s->lo;
    if (c->storage == NULL) {
      uint8_t *dst[RD_SCHEMA_MAX_FIELDS];
      for (uint32_t f = 0; f < nf; f++) dst[f] = s->img.cols[f] + idx * t->field_bytes[f];
      host_rows_get(t, slot, (size_t)run, dst);
    } else {
      rd_buf_t dst[RD_SCHEMA_MAX_FIELDS];
      for (uint32_t f = 0; f < nf; f++) {
        dst[f].data = s->img.cols[f] + idx * t->field_bytes[f];
        dst[f].bytes = run * t->field_bytes[f];
      }
      for (uint64_t i = 0; i < run; i++) t->scratch_u32[i] = slot + (uint32_t)i;
      int rc = rows_read(t, run, t->scratch_u32, dst, err);
      if (rc) return rc;
    }
    for (uint64_t i = 0; i < run; i++)
      if (!bit_get(s->leaf_saved, idx + i)) s->img.leaves[idx + i] = rmm_leaf(t, slot + (uint32_t)i);
    k += run;
  }
  return RD_OK;
}

static void snap_before_overwrite(rd_table_t *t, uint64_t k_end) {
  rd_table_snapshot_t *s = t->snap;
  uint64_t hi = s->img.next_key;
  if (k_end > hi) k_end = hi;
  if (k_end <= s->cursor) return;
  rd_error_t e;
  rd_error_clear(&e);
  if (snap_copy(t, s->cursor, k_end, &e) != RD_OK) {
    snap_fail(t, e.msg);
    return;
  }
  s->cursor = k_end;
}

static void snap_before_update(rd_table_t *t, size_t n, const uint64_t *keys) {
  rd_table_snapshot_t *s = t->snap;
  const uint64_t hi = s->img.next_key;
  for (size_t i = 0; i < n; i++) {
    uint64_t k = keys[i];
    if (k < s->cursor || k >= hi) continue; /* copied already, or not in the cut */
    uint64_t idx = k - s->lo;
    if (bit_get(s->leaf_saved, idx)) continue;
    s->img.leaves[idx] = rmm_leaf(t, (uint32_t)(k % t->config.capacity));
    bit_set(s->leaf_saved, idx);
  }
}

int rd_table_snapshot_begin(rd_table_t *t, rd_table_snapshot_t *s, rd_error_t *err) {
  if (t->module_failed) return refuse_after_fault(t, err);
  if (t->snap != NULL) return rd_error_set(err, RD_EBUSY, "a snapshot of this table is running");
  if (t->size > s->rows_cap)
    return rd_error_set(err, RD_ETOOBIG, "the table holds %llu items; the snapshot has room "
                        "for %llu", (unsigned long long)t->size, (unsigned long long)s->rows_cap);
  s->img.next_key = t->next_key;
  s->img.size = t->size;
  s->img.draws = t->draws;
  s->img.max_p = t->max_p;
  s->img.stats = t->stats;
  s->lo = t->next_key - t->size;
  s->cursor = s->lo;
  memset(s->leaf_saved, 0, ((t->size + 63) / 64) * sizeof(uint64_t));
  s->failed = 0;
  rd_error_clear(&s->why);
  s->active = 1;
  t->snap = s;
  return RD_OK;
}

int rd_table_snapshot_step(rd_table_t *t, rd_table_snapshot_t *s, size_t max_rows,
                           rd_error_t *err) {
  if (!s->active || t->snap != s) {
    if (s->failed) {
      if (err) *err = s->why;
      return s->why.code ? s->why.code : RD_EINTERNAL;
    }
    return 1;
  }
  const uint64_t hi = s->img.next_key;
  uint64_t k1 = s->cursor + (max_rows ? max_rows : 1);
  if (k1 > hi) k1 = hi;
  rd_error_t e;
  rd_error_clear(&e);
  if (k1 > s->cursor && snap_copy(t, s->cursor, k1, &e) != RD_OK) {
    snap_fail(t, e.msg);
    if (err) *err = s->why;
    return RD_EINTERNAL;
  }
  s->cursor = k1;
  if (s->cursor < hi) return 0;
  snap_detach(t);
  return 1;
}

void rd_table_snapshot_cancel(rd_table_t *t, rd_table_snapshot_t *s) {
  if (t->snap == s) snap_detach(t);
}

int rd_table_restore_check(const rd_table_t *t, const rd_table_image_t *img, rd_error_t *err) {
  const rd_table_config_t *c = &t->config;
  if (t->next_key != 0 || t->size != 0)
    return rd_error_set(err, RD_ESTATE, "a restore needs an empty table; this one has issued "
                        "%llu keys", (unsigned long long)t->next_key);
  if (img->size > c->capacity || img->size > img->next_key)
    return rd_error_set(err, RD_EINVAL, "the image holds %llu items with key counter %llu; "
                        "the table's capacity is %u", (unsigned long long)img->size,
                        (unsigned long long)img->next_key, c->capacity);
  if (!(img->max_p >= 0 && img->max_p <= t->fixed.max_priority))
    return rd_error_set(err, RD_EINVAL, "the image's largest priority %g is outside [0, %g]",
                        img->max_p, t->fixed.max_priority);
  for (uint64_t i = 0; i < img->size; i++)
    if (img->leaves[i] > t->max_leaf)
      return rd_error_set(err, RD_EINVAL, "leaf %llu of the image (%llu) is above the tree's "
                          "bound %llu", (unsigned long long)i,
                          (unsigned long long)img->leaves[i], (unsigned long long)t->max_leaf);
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    int rc = rd_field_check_column(&c->schema.fields[f], img->cols[f], (size_t)img->size, err);
    if (rc) return rc;
  }
  return RD_OK;
}

int rd_table_restore(rd_table_t *t, const rd_table_image_t *img, rd_error_t *err) {
  int rc = rd_table_restore_check(t, img, err);
  if (rc) return rc;
  const rd_table_config_t *c = &t->config;
  const uint32_t cap = c->capacity;
  rd_cbuf_t cols[RD_SCHEMA_MAX_FIELDS];
  for (uint32_t f = 0; f < c->schema.n_fields; f++) {
    cols[f].data = img->cols[f];
    cols[f].bytes = (size_t)img->size * t->field_bytes[f];
  }
  const uint64_t lo = img->next_key - img->size;
  for (uint64_t k = lo; k < img->next_key;) {
    uint32_t slot = (uint32_t)(k % cap);
    uint64_t run = img->next_key - k;
    if (run > cap - slot) run = cap - slot;
    if ((c->rmm != NULL || c->storage != NULL) && run > c->max_batch) run = c->max_batch;
    rc = rmm_set_range(t, slot, (size_t)run, img->leaves + (k - lo), err);
    if (rc == RD_OK) rc = rows_write(t, slot, (size_t)run, cols, (size_t)(k - lo), err);
    if (rc) return rc;
    k += run;
  }
  t->next_key = img->next_key;
  t->size = img->size;
  t->draws = img->draws;
  t->max_p = img->max_p;
  t->stats = img->stats;
  return RD_OK;
}

void rd_table_set_observer(rd_table_t *t, const rd_table_observer_t *o) {
  if (o == NULL) memset(&t->observer, 0, sizeof t->observer);
  else t->observer = *o;
}
