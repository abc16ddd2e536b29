/* rmm_gpu.c - the GPU replay module and storage (rmm_gpu.h) over the
 * device calls of rmm_gpu_dev.h.
 *
 * Reading order: failures, the replay module (host leaves, checks, chunks),
 * the storage (row layout, chunks), then the per-device ops tables.
 */
#include "rmm_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd_tree_check.h"
#include "rd_tree_step.h"
#include "rmm_gpu_dev.h"

#define RMM_CHUNK_MIN 1024u
#define RMM_CHUNK_MAX 65536u
#define STORAGE_CHUNK_BYTES (4u << 20)
#define ALIGN 256u

static size_t align_up(size_t b) { return (b + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* ------------------------------------------------------------------ */
/* Failures                                                            */
/* ------------------------------------------------------------------ */

/* A device call failed: the module is broken from now on. The device's
 * message is kept (the first one in info->why). */
static int device_fault(rd_gpu_module_info_t *info, int device, const char *what, rd_error_t *err) {
  char msg[RD_ERROR_MSG_MAX];
  snprintf(msg, sizeof msg, "%s", err != NULL && err->msg[0] ? err->msg : "failed");
  if (!info->broken) {
    info->broken = 1;
    snprintf(info->why, sizeof info->why, "%s: %.200s", what, msg);
  }
  return rd_error_set(err, RD_EINTERNAL, "gpu%d %s: %s", device, what, msg);
}

/* A create that failed: the device's code (RD_EINVAL: no usable device;
 * RD_ENOMEM), its words after the module's name. */
static int prefixed(int rc, int device, const char *what, rd_error_t *err) {
  char msg[RD_ERROR_MSG_MAX];
  snprintf(msg, sizeof msg, "%s", err != NULL ? err->msg : "");
  return rd_error_set(err, rc, "gpu%d %s: %s", device, what, msg);
}

static int refuse_broken(const rd_gpu_module_info_t *info, int device, rd_error_t *err) {
  return rd_error_set(err, RD_EINTERNAL, "gpu%d: failed earlier (%s); the table must move to "
                      "the CPU", device, info->why);
}

/* ------------------------------------------------------------------ */
/* Replay module                                                       */
/* ------------------------------------------------------------------ */

typedef struct {
  const rd_gpu_dev_ops_t *dev;
  int device;
  uint32_t capacity, fanout, chunk;
  uint64_t max_leaf;
  uint64_t total; /* of leaf[] */
  uint64_t *leaf; /* host copy of every leaf */
  void *tree;
  rd_gpu_module_info_t info;
} gpu_rmm_t;

uint32_t rd_gpu_rmm_chunk(uint32_t capacity) {
  return capacity < RMM_CHUNK_MIN ? RMM_CHUNK_MIN
         : capacity > RMM_CHUNK_MAX ? RMM_CHUNK_MAX
                                    : capacity;
}

size_t rd_gpu_rmm_device_bytes(uint32_t capacity, uint32_t fanout) {
  uint64_t blocks[RD_ST_MAX_LEVELS];
  uint32_t height = rd_st_shape(capacity, fanout, blocks);
  if (height == 0) return 0;
  size_t levels = 0;
  for (uint32_t h = 0; h < height; h++) levels += align_up((size_t)blocks[h] * fanout * 8);
  /* sumtree_gpu.cu's scratch for its max_batch (staging 12, four u32 and
   * three u64 arrays, the flag) and CUB's sort and scan storage, which CUB
   * sizes at init: two u32 arrays of keys and values plus its tile state
   * (tests/gpu/check_rmm.cu checks the bound against a real tree). */
  const size_t nb = rd_gpu_rmm_chunk(capacity);
  size_t scratch = align_up(nb * 12) + 4 * align_up(nb * 4) + 3 * align_up(nb * 8) + ALIGN;
  size_t cub = 16 * nb + (1u << 20);
  return levels + scratch + cub;
}

/* The host leaves, the module's state and the tree's pinned staging. */
static size_t rmm_memsize(uint32_t capacity, uint32_t fanout) {
  if (rd_gpu_rmm_device_bytes(capacity, fanout) == 0) return 0;
  const size_t nb = rd_gpu_rmm_chunk(capacity);
  return (size_t)capacity * sizeof(uint64_t) + sizeof(gpu_rmm_t) + align_up(nb * 12) +
         align_up(nb * 4) + align_up(nb * 8) + 2 * ALIGN;
}

static void rmm_destroy(void *p) {
  gpu_rmm_t *m = p;
  if (m == NULL) return;
  if (m->tree != NULL) m->dev->tree_free(m->tree);
  free(m->leaf);
  free(m);
}

int rd_gpu_rmm_create_on(void **out, const rd_gpu_dev_ops_t *dev, int device, uint32_t capacity,
                         uint32_t fanout, uint64_t max_leaf, rd_error_t *err) {
  *out = NULL;
  if (rd_gpu_rmm_device_bytes(capacity, fanout) == 0)
    return rd_error_set(err, RD_EINVAL, "gpu%d: no sum tree of capacity %u and fanout %u "
                        "(capacity 1..%u, fanout a power of two in [%u, %u])", device, capacity,
                        fanout, RD_ST_MAX_CAPACITY, RD_ST_MIN_FANOUT, RD_ST_MAX_FANOUT);
  if (max_leaf == 0 || max_leaf > rd_st_max_leaf(capacity))
    return rd_error_set(err, RD_EINVAL, "gpu%d: leaves up to %llu do not fit a tree of %u "
                        "leaves (at most %llu)", device, (unsigned long long)max_leaf, capacity,
                        (unsigned long long)rd_st_max_leaf(capacity));
  gpu_rmm_t *m = calloc(1, sizeof *m);
  uint64_t *leaf = calloc(capacity, sizeof *leaf);
  if (m == NULL || leaf == NULL) {
    free(m);
    free(leaf);
    return rd_error_set(err, RD_ENOMEM, "gpu%d: cannot allocate the host copy of %u leaves",
                        device, capacity);
  }
  m->dev = dev;
  m->device = device;
  m->capacity = capacity;
  m->fanout = fanout;
  m->chunk = rd_gpu_rmm_chunk(capacity);
  m->max_leaf = max_leaf;
  m->leaf = leaf;
  int rc = dev->tree_init(&m->tree, device, capacity, fanout, m->chunk, err);
  if (rc) {
    m->tree = NULL;
    rmm_destroy(m);
    return prefixed(rc, device, "sum tree", err);
  }
  m->info.device_bytes = dev->tree_device_bytes(m->tree);
  *out = m;
  return RD_OK;
}

static uint64_t rmm_total(const void *p) { return ((const gpu_rmm_t *)p)->total; }

static uint64_t rmm_leaf(const void *p, uint32_t pos) {
  const gpu_rmm_t *m = p;
  return pos < m->capacity ? m->leaf[pos] : 0;
}

/* Host leaves after a device write that succeeded: in order, so the later
 * of two writes to a leaf wins, as on the device. */
static void host_write(gpu_rmm_t *m, size_t n, const uint32_t *pos, uint32_t first,
                       const uint64_t *values) {
  for (size_t i = 0; i < n; i++) {
    uint32_t p = pos ? pos[i] : first + (uint32_t)i;
    m->total = m->total - m->leaf[p] + values[i];
    m->leaf[p] = values[i];
  }
}

/* An insert (pos NULL: leaves first, first + 1, ...) or an update, after
 * the caller's range or position check: the values checked, then the
 * device's writes chunk after chunk, in order (a later chunk's value still
 * wins), then the host's leaves. */
static int tree_write(gpu_rmm_t *m, size_t n, const uint32_t *pos, uint32_t first,
                      const uint64_t *values, rd_error_t *err) {
  int rc = rd_tree_check_values(n, values, m->max_leaf, m->capacity, err);
  if (rc) return rc;
  for (size_t done = 0; done < n; done += m->chunk) {
    size_t c = n - done < m->chunk ? n - done : m->chunk;
    m->info.device_calls++;
    rc = pos != NULL
             ? m->dev->tree_update(m->tree, c, pos + done, values + done, err)
             : m->dev->tree_set_range(m->tree, first + (uint32_t)done, c, values + done, err);
    if (rc)
      return device_fault(&m->info, m->device, pos != NULL ? "sum tree update" : "sum tree insert",
                          err);
  }
  host_write(m, n, pos, first, values);
  return RD_OK;
}

static int rmm_set_range(void *p, uint32_t first, size_t n, const uint64_t *values,
                         rd_error_t *err) {
  gpu_rmm_t *m = p;
  if (m->info.broken) return refuse_broken(&m->info, m->device, err);
  int rc = rd_tree_check_range(first, n, m->capacity, err);
  return rc ? rc : tree_write(m, n, NULL, first, values, err);
}

static int rmm_update(void *p, size_t n, const uint32_t *pos, const uint64_t *values,
                      rd_error_t *err) {
  gpu_rmm_t *m = p;
  if (m->info.broken) return refuse_broken(&m->info, m->device, err);
  int rc = rd_tree_check_positions(n, pos, m->capacity, err);
  return rc ? rc : tree_write(m, n, pos, 0, values, err);
}

static int rmm_sample(void *p, size_t n, const uint64_t *targets, uint32_t *leaves,
                      rd_error_t *err) {
  gpu_rmm_t *m = p;
  if (m->info.broken) return refuse_broken(&m->info, m->device, err);
  if (n == 0) return RD_OK;
  int rc = rd_tree_check_targets(n, targets, m->total, err);
  if (rc) return rc;
  for (size_t done = 0; done < n; done += m->chunk) {
    size_t c = n - done < m->chunk ? n - done : m->chunk;
    m->info.device_calls++;
    rc = m->dev->tree_sample(m->tree, c, targets + done, leaves + done, err);
    if (rc) return device_fault(&m->info, m->device, "sum tree sample", err);
  }
  /* The device's tree must still be the host's: same total, and only
   * leaves a target can select (inside the table, non-zero). */
  uint64_t total = 0;
  m->info.device_calls++;
  rc = m->dev->tree_total(m->tree, &total, err);
  if (rc) return device_fault(&m->info, m->device, "sum tree total", err);
  if (total != m->total) {
    rd_error_set(err, RD_EINTERNAL, "the device's total %llu differs from the host's %llu",
                 (unsigned long long)total, (unsigned long long)m->total);
    return device_fault(&m->info, m->device, "sum tree check", err);
  }
  for (size_t i = 0; i < n; i++)
    if (leaves[i] >= m->capacity || m->leaf[leaves[i]] == 0) {
      rd_error_set(err, RD_EINTERNAL, "target %llu at batch index %zu selected leaf %u, %s",
                   (unsigned long long)targets[i], i, leaves[i],
                   leaves[i] >= m->capacity ? "outside the table" : "whose value is 0");
      return device_fault(&m->info, m->device, "sum tree check", err);
    }
  return RD_OK;
}

void rd_gpu_rmm_info(const void *rmm, rd_gpu_module_info_t *out) {
  *out = ((const gpu_rmm_t *)rmm)->info;
}

/* ------------------------------------------------------------------ */
/* Storage                                                             */
/* ------------------------------------------------------------------ */

/* On the device a row is every field of one item, in schema order. */
typedef struct {
  const rd_gpu_dev_ops_t *dev;
  int device;
  uint32_t capacity, n_fields, chunk;
  size_t row_bytes;
  size_t field_bytes[RD_SCHEMA_MAX_FIELDS], field_off[RD_SCHEMA_MAX_FIELDS];
  uint8_t *stage; /* chunk rows */
  uint32_t *pos;  /* chunk positions */
  void *rows;
  rd_gpu_module_info_t info;
} gpu_storage_t;

uint32_t rd_gpu_storage_chunk(uint32_t capacity, size_t row_bytes) {
  size_t c = row_bytes > 0 ? STORAGE_CHUNK_BYTES / row_bytes : 1;
  if (c > RMM_CHUNK_MAX) c = RMM_CHUNK_MAX;
  if (c > capacity) c = capacity;
  return c > 0 ? (uint32_t)c : 1u;
}

size_t rd_gpu_storage_device_bytes(uint32_t capacity, size_t row_bytes) {
  if (capacity == 0 || row_bytes == 0 || row_bytes > RD_GPU_STORAGE_MAX_ROW_BYTES) return 0;
  const size_t nb = rd_gpu_storage_chunk(capacity, row_bytes);
  /* storage_gpu.cu: the rows, a chunk of staging rows and positions, its flag. */
  return (size_t)capacity * row_bytes + nb * row_bytes + nb * 4 + 4;
}

static size_t row_bytes_of(uint32_t n_fields, const size_t *field_bytes) {
  size_t b = 0;
  for (uint32_t f = 0; f < n_fields; f++) b += field_bytes[f];
  return b;
}

/* The staging rows and positions, twice (here and pinned in storage_gpu),
 * the module and storage_gpu's repeat check (a bit per row). */
static size_t storage_memsize(uint32_t capacity, uint32_t n_fields, const size_t *field_bytes) {
  size_t rb = row_bytes_of(n_fields, field_bytes);
  if (rd_gpu_storage_device_bytes(capacity, rb) == 0) return 0;
  const size_t nb = rd_gpu_storage_chunk(capacity, rb);
  return 2 * nb * (rb + 4) + sizeof(gpu_storage_t) + ((size_t)capacity + 7) / 8;
}

static void storage_destroy(void *p) {
  gpu_storage_t *s = p;
  if (s == NULL) return;
  if (s->rows != NULL) s->dev->rows_free(s->rows);
  free(s->stage);
  free(s->pos);
  free(s);
}

int rd_gpu_storage_create_on(void **out, const rd_gpu_dev_ops_t *dev, int device,
                             uint32_t capacity, uint32_t n_fields, const size_t *field_bytes,
                             const rd_rmm_ops_t *rmm_ops, void *rmm, rd_error_t *err) {
  *out = NULL;
  const size_t rb = row_bytes_of(n_fields, field_bytes);
  if (n_fields == 0 || n_fields > RD_SCHEMA_MAX_FIELDS || capacity == 0)
    return rd_error_set(err, RD_EINVAL, "gpu%d storage: %u fields, capacity %u", device,
                        n_fields, capacity);
  if (rb == 0 || rb > RD_GPU_STORAGE_MAX_ROW_BYTES)
    return rd_error_set(err, RD_EINVAL, "gpu%d storage: rows of %zu bytes; the GPU storage "
                        "holds rows of 1 to %u bytes", device, rb, RD_GPU_STORAGE_MAX_ROW_BYTES);
  gpu_storage_t *s = calloc(1, sizeof *s);
  if (s == NULL) return rd_error_set(err, RD_ENOMEM, "gpu%d storage: out of memory", device);
  s->dev = dev;
  s->device = device;
  s->capacity = capacity;
  s->n_fields = n_fields;
  s->row_bytes = rb;
  s->chunk = rd_gpu_storage_chunk(capacity, rb);
  for (uint32_t f = 0, off = 0; f < n_fields; f++) {
    s->field_bytes[f] = field_bytes[f];
    s->field_off[f] = off;
    off += (uint32_t)field_bytes[f];
  }
  s->stage = malloc((size_t)s->chunk * rb);
  s->pos = malloc((size_t)s->chunk * sizeof *s->pos);
  if (s->stage == NULL || s->pos == NULL) {
    storage_destroy(s);
    return rd_error_set(err, RD_ENOMEM, "gpu%d storage: cannot allocate staging for %u rows",
                        device, s->chunk);
  }
  /* The table's tree on this device through these calls: share its stream. */
  void *tree = NULL;
  if (rmm_ops != NULL && rmm != NULL && rmm_ops->destroy == rmm_destroy) {
    const gpu_rmm_t *m = rmm;
    if (m->dev == dev && m->device == device) tree = m->tree;
  }
  int rc = dev->rows_init(&s->rows, device, tree, capacity, (uint32_t)rb, s->chunk, err);
  if (rc) {
    s->rows = NULL;
    storage_destroy(s);
    return prefixed(rc, device, "storage", err);
  }
  s->info.shares_stream = tree != NULL;
  s->info.device_bytes = dev->rows_device_bytes(s->rows);
  *out = s;
  return RD_OK;
}

static int storage_write(void *p, uint32_t first, size_t n, const void *const *src,
                         rd_error_t *err) {
  gpu_storage_t *s = p;
  if (s->info.broken) return refuse_broken(&s->info, s->device, err);
  int rc = rd_tree_check_range(first, n, s->capacity, err);
  if (rc) return rc;
  for (size_t done = 0; done < n; done += s->chunk) {
    size_t c = n - done < s->chunk ? n - done : s->chunk;
    for (uint32_t f = 0; f < s->n_fields; f++) {
      const size_t fb = s->field_bytes[f];
      const uint8_t *in = (const uint8_t *)src[f] + done * fb;
      uint8_t *o = s->stage + s->field_off[f];
      for (size_t i = 0; i < c; i++) memcpy(o + i * s->row_bytes, in + i * fb, fb);
    }
    for (size_t i = 0; i < c; i++) s->pos[i] = first + (uint32_t)(done + i);
    s->info.device_calls++;
    rc = s->dev->rows_scatter(s->rows, c, s->pos, s->stage, err);
    if (rc) return device_fault(&s->info, s->device, "storage write", err);
  }
  return RD_OK;
}

/* Reads keep trying the device after a failure: rd_table_to_cpu copies the
 * rows back through them. */
static int storage_read(void *p, size_t n, const uint32_t *slots, void *const *dst,
                        rd_error_t *err) {
  gpu_storage_t *s = p;
  int rc = rd_tree_check_positions(n, slots, s->capacity, err);
  if (rc) return rc;
  for (size_t done = 0; done < n; done += s->chunk) {
    size_t c = n - done < s->chunk ? n - done : s->chunk;
    s->info.device_calls++;
    rc = s->dev->rows_gather(s->rows, c, slots + done, s->stage, err);
    if (rc) return device_fault(&s->info, s->device, "storage read", err);
    for (uint32_t f = 0; f < s->n_fields; f++) {
      if (dst[f] == NULL) continue;
      const size_t fb = s->field_bytes[f];
      uint8_t *o = (uint8_t *)dst[f] + done * fb;
      const uint8_t *in = s->stage + s->field_off[f];
      for (size_t i = 0; i < c; i++) memcpy(o + i * fb, in + i * s->row_bytes, fb);
    }
  }
  return RD_OK;
}

void rd_gpu_storage_info(const void *st, rd_gpu_module_info_t *out) {
  *out = ((const gpu_storage_t *)st)->info;
}

/* ------------------------------------------------------------------ */
/* The ops of each device ordinal                                      */
/* ------------------------------------------------------------------ */

#define RD_GPU_DEVICES(X)                                                                     \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

#define RD_GPU_CREATE(d)                                                                      \
  static int rmm_create_##d(void **m, uint32_t cap, uint32_t k, uint64_t max_leaf,            \
                            rd_error_t *err) {                                                \
    return rd_gpu_rmm_create_on(m, &rd_gpu_dev_cuda, d, cap, k, max_leaf, err);               \
  }                                                                                           \
  static int storage_create_##d(void **s, uint32_t cap, uint32_t nf, const size_t *fb,        \
                                const rd_rmm_ops_t *rmm_ops, void *rmm, rd_error_t *err) {    \
    return rd_gpu_storage_create_on(s, &rd_gpu_dev_cuda, d, cap, nf, fb, rmm_ops, rmm, err);  \
  }
RD_GPU_DEVICES(RD_GPU_CREATE)
#undef RD_GPU_CREATE

#define RD_GPU_RMM_OPS(d)                                                                     \
  {.name = "gpu" #d,                                                                         \
   .memsize = rmm_memsize,                                                                   \
   .create = rmm_create_##d,                                                                 \
   .destroy = rmm_destroy,                                                                   \
   .total = rmm_total,                                                                       \
   .leaf = rmm_leaf,                                                                         \
   .set_range = rmm_set_range,                                                               \
   .sample = rmm_sample,                                                                     \
   .update = rmm_update},
static const rd_rmm_ops_t rmm_ops[RD_GPU_RMM_MAX_DEVICES] = {RD_GPU_DEVICES(RD_GPU_RMM_OPS)};
#undef RD_GPU_RMM_OPS

#define RD_GPU_STORAGE_OPS(d)                                                                 \
  {.name = "gpu" #d,                                                                         \
   .memsize = storage_memsize,                                                               \
   .create = storage_create_##d,                                                             \
   .destroy = storage_destroy,                                                               \
   .write = storage_write,                                                                   \
   .read = storage_read},
static const rd_storage_ops_t storage_ops[RD_GPU_RMM_MAX_DEVICES] = {
    RD_GPU_DEVICES(RD_GPU_STORAGE_OPS)};
#undef RD_GPU_STORAGE_OPS

const rd_rmm_ops_t *rd_gpu_rmm_ops(int device) {
  return device >= 0 && device < RD_GPU_RMM_MAX_DEVICES ? &rmm_ops[device] : NULL;
}

const rd_storage_ops_t *rd_gpu_storage_ops(int device) {
  return device >= 0 && device < RD_GPU_RMM_MAX_DEVICES ? &storage_ops[device] : NULL;
}

int rd_gpu_rmm_device(const rd_rmm_ops_t *ops) {
  for (int d = 0; d < RD_GPU_RMM_MAX_DEVICES; d++)
    if (ops == &rmm_ops[d]) return d;
  return -1;
}

int rd_gpu_storage_device(const rd_storage_ops_t *ops) {
  for (int d = 0; d < RD_GPU_RMM_MAX_DEVICES; d++)
    if (ops == &storage_ops[d]) return d;
  return -1;
}
