/* csim_rmm.c - the replay kernel's C-simulation as a table's replay module
 * (csim_rmm.h). */
#include "csim_rmm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csim_rmm_shape.h"

/* The built shapes: meson defines RD_FPGA_CSIM_SHAPES(X) as one
 * X(K, N, MIN_TABLE) per compilation of csim_rmm_shape.c
 * (backends/fpga/meson.build), so this list and the built objects come
 * from one list. */
#ifndef RD_FPGA_CSIM_SHAPES
#error "RD_FPGA_CSIM_SHAPES(X) must come from meson (backends/fpga/meson.build)"
#endif
#define RD_CSIM_DECLARE(k, n, min) extern const rd_fpga_csim_shape_t rd_csim_k##k##_n##n##_shape;
RD_FPGA_CSIM_SHAPES(RD_CSIM_DECLARE)
#undef RD_CSIM_DECLARE
#define RD_CSIM_ENTRY(k, n, min) &rd_csim_k##k##_n##n##_shape,
static const rd_fpga_csim_shape_t *const shapes[] = {RD_FPGA_CSIM_SHAPES(RD_CSIM_ENTRY)};
#undef RD_CSIM_ENTRY
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* One module: the kernel's tree for the shape, and the table's view. */
typedef struct {
  const rd_fpga_csim_shape_t *shape;
  uint32_t capacity; /* the table's: leaves [capacity, N) stay zero */
  uint64_t max_leaf; /* the table's bound */
  rd_fpga_csim_rmm_stats_t stats;
  void *tree;        /* shape->tree_bytes */
} csim_t;

uint32_t rd_fpga_csim_rmm_max_capacity(void) {
  uint32_t m = 0;
  for (size_t i = 0; i < N_SHAPES; i++)
    if (shapes[i]->capacity > m) m = shapes[i]->capacity;
  return m;
}

/* The smallest built shape of fanout K that holds capacity leaves. */
static const rd_fpga_csim_shape_t *find_shape(uint32_t capacity, uint32_t fanout) {
  const rd_fpga_csim_shape_t *best = NULL;
  for (size_t i = 0; i < N_SHAPES; i++) {
    const rd_fpga_csim_shape_t *s = shapes[i];
    if (s->k != fanout || s->capacity < capacity || s->min_table > capacity) continue;
    if (best == NULL || s->capacity < best->capacity) best = s;
  }
  return best;
}

int rd_fpga_csim_rmm_fits(uint32_t capacity, uint32_t fanout, char *why, size_t len) {
  if (find_shape(capacity, fanout) != NULL) return 1;
  uint32_t max = rd_fpga_csim_rmm_max_capacity();
  if (capacity > max)
    snprintf(why, len, "capacity %u is above the C-simulation build's largest tree (%u leaves)",
             capacity, max);
  else if (capacity == 0)
    snprintf(why, len, "capacity 0");
  else
    snprintf(why, len, "fanout %u has no C-simulation build (K 2, 4, ..., 64)", fanout);
  return 0;
}

/* The built shape for a table, or NULL with RD_EINVAL saying why. */
static const rd_fpga_csim_shape_t *shape_for(uint32_t capacity, uint32_t fanout,
                                             rd_error_t *err) {
  const rd_fpga_csim_shape_t *s = find_shape(capacity, fanout);
  if (s == NULL) {
    char why[160];
    rd_fpga_csim_rmm_fits(capacity, fanout, why, sizeof why);
    rd_error_set(err, RD_EINVAL, "fpga C-simulation: %s", why);
  }
  return s;
}

int rd_fpga_csim_rmm_shape(uint32_t capacity, uint32_t fanout, rd_fpga_csim_shape_info_t *out,
                           rd_error_t *err) {
  const rd_fpga_csim_shape_t *s = shape_for(capacity, fanout, err);
  if (s == NULL) return RD_EINVAL;
  out->k = s->k;
  out->capacity = s->capacity;
  out->s = s->s;
  out->max_batch = s->max_batch;
  out->height = s->height;
  out->leaf_bits = s->leaf_bits;
  out->max_leaf = s->max_leaf;
  out->tree_bytes = s->tree_bytes;
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* rd_rmm_ops_t                                                        */
/* ------------------------------------------------------------------ */

static size_t csim_memsize(uint32_t capacity, uint32_t fanout) {
  const rd_fpga_csim_shape_t *s = find_shape(capacity, fanout);
  return s ? s->tree_bytes + sizeof(csim_t) : 0;
}

static int csim_create(void **out, uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                       rd_error_t *err) {
  *out = NULL;
  const rd_fpga_csim_shape_t *s = shape_for(capacity, fanout, err);
  if (s == NULL) return RD_EINVAL;
  if (max_leaf > s->max_leaf) /* cannot happen for a table's bound (min_table <= capacity) */
    return rd_error_set(err, RD_EINVAL, "fpga C-simulation: leaves up to %llu do not fit the "
                        "K=%u N=%u build (%u-bit leaves, at most %llu)",
                        (unsigned long long)max_leaf, s->k, s->capacity, s->leaf_bits,
                        (unsigned long long)s->max_leaf);
  csim_t *m = calloc(1, sizeof *m);
  void *tree = calloc(1, s->tree_bytes);
  if (m == NULL || tree == NULL) {
    free(m);
    free(tree);
    return rd_error_set(err, RD_ENOMEM, "fpga C-simulation: cannot allocate a %zu-byte tree",
                        s->tree_bytes);
  }
  m->shape = s;
  m->capacity = capacity;
  m->max_leaf = max_leaf;
  m->tree = tree;
  s->reset(tree); /* RMM_OP_RESET, as the host would issue after loading the kernel */
  m->stats.requests = 1;
  *out = m;
  return RD_OK;
}

static void csim_destroy(void *rmm) {
  csim_t *m = rmm;
  if (m == NULL) return;
  free(m->tree);
  free(m);
}

static uint64_t csim_total(const void *rmm) {
  const csim_t *m = rmm;
  return m->shape->total(m->tree);
}

static uint64_t csim_leaf(const void *rmm, uint32_t pos) {
  const csim_t *m = rmm;
  return m->shape->leaf(m->tree, pos);
}

/* Every value <= the table's bound and every position < its capacity
 * (the kernel checks against its own N and bound, which are wider). */
static int check_items(const csim_t *m, size_t n, const uint32_t *pos, uint32_t first,
                       const uint64_t *values, const char *op, rd_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    uint64_t p = pos ? pos[i] : (uint64_t)first + i;
    if (p >= m->capacity)
      return rd_error_set(err, RD_ERANGE, "fpga C-simulation: %s: position %llu at batch index "
                          "%zu is outside [0, %u)", op, (unsigned long long)p, i, m->capacity);
    if (values[i] > m->max_leaf)
      return rd_error_set(err, RD_ERANGE, "fpga C-simulation: %s: leaf %llu at batch index %zu "
                          "is above %llu", op, (unsigned long long)values[i], i,
                          (unsigned long long)m->max_leaf);
  }
  return RD_OK;
}

static int csim_set_range(void *rmm, uint32_t first, size_t n, const uint64_t *leaves,
                          rd_error_t *err) {
  csim_t *m = rmm;
  int rc = check_items(m, n, NULL, first, leaves, "insert", err);
  if (rc) return rc;
  uint64_t cycles = 0;
  /* RMM_OP_INSERT takes any n (an update of consecutive leaves). */
  rc = m->shape->insert(m->tree, first, (uint32_t)n, leaves, &cycles, err);
  if (rc) return rc;
  m->stats.requests++;
  m->stats.inserted += n;
  m->stats.cycles += cycles;
  return RD_OK;
}

static int csim_sample(void *rmm, size_t n, const uint64_t *targets, uint32_t *leaves,
                       rd_error_t *err) {
  csim_t *m = rmm;
  const uint64_t total = m->shape->total(m->tree);
  if (total == 0 && n > 0)
    return rd_error_set(err, RD_EEMPTY, "fpga C-simulation: sample: every leaf is zero");
  for (size_t i = 0; i < n; i++)
    if (targets[i] >= total)
      return rd_error_set(err, RD_ERANGE, "fpga C-simulation: sample: target %llu at batch "
                          "index %zu is not below the total %llu",
                          (unsigned long long)targets[i], i, (unsigned long long)total);
  for (size_t at = 0; at < n;) {
    uint32_t chunk = (uint32_t)(n - at < m->shape->max_batch ? n - at : m->shape->max_batch);
    uint64_t cycles = 0;
    int rc = m->shape->sample(m->tree, chunk, targets + at, leaves + at, &cycles, err);
    if (rc) return rc; /* RD_EINTERNAL only: the targets were checked */
    m->stats.requests++;
    m->stats.sampled += chunk;
    m->stats.cycles += cycles;
    at += chunk;
  }
  return RD_OK;
}

static int csim_update(void *rmm, size_t n, const uint32_t *pos, const uint64_t *values,
                       rd_error_t *err) {
  csim_t *m = rmm;
  int rc = check_items(m, n, pos, 0, values, "update", err);
  if (rc) return rc;
  /* In batch order, request after request: the later of two writes to a
   * leaf wins, as in one request. */
  for (size_t at = 0; at < n;) {
    uint32_t chunk = (uint32_t)(n - at < m->shape->max_batch ? n - at : m->shape->max_batch);
    uint64_t cycles = 0;
    rc = m->shape->update(m->tree, chunk, pos + at, values + at, &cycles, err);
    if (rc) return rc; /* unreachable: the batch was checked */
    m->stats.requests++;
    m->stats.updated += chunk;
    m->stats.cycles += cycles;
    at += chunk;
  }
  return RD_OK;
}

const rd_rmm_ops_t rd_fpga_csim_rmm_ops = {
    .name = "fpga-csim",
    .memsize = csim_memsize,
    .create = csim_create,
    .destroy = csim_destroy,
    .total = csim_total,
    .leaf = csim_leaf,
    .set_range = csim_set_range,
    .sample = csim_sample,
    .update = csim_update,
};

void rd_fpga_csim_rmm_stats(const void *rmm, rd_fpga_csim_rmm_stats_t *out) {
  const csim_t *m = rmm;
  *out = m->stats;
}

int rd_fpga_csim_rmm_check(const void *rmm, rd_error_t *err) {
  const csim_t *m = rmm;
  char msg[200];
  if (m->shape->check(m->tree, msg, sizeof msg) != 0)
    return rd_error_set(err, RD_EINTERNAL, "fpga C-simulation K=%u N=%u: %s", m->shape->k,
                        m->shape->capacity, msg);
  return RD_OK;
}
