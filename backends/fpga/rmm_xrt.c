/* rmm_xrt.c - the replay kernel over XRT as a table's replay module
 * (rmm_xrt.h). */
#include "rmm_xrt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rmm.h"
#include "rd_tree_step.h"

/* The daemon's parameters (rd_fpga_xrt_rmm_configure) and which devices'
 * kernels hold a module's tree: rmm_kernel has one tree per device. */
#define MAX_DEVICES 64
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rd_fpga_xrt_rmm_params_t params;
static int configured;
static uint64_t claimed; /* bit d: device d's rmm_kernel belongs to a module */

typedef struct {
  rd_fpga_xrt_rmm_t x;
  unsigned device;
  uint32_t capacity; /* the table's */
  uint64_t max_leaf; /* the table's bound */
  uint64_t total;    /* the shadow's sum */
  rd_fpga_xrt_rmm_stats_t stats;
  uint64_t *leaves;  /* the shadow: capacity leaves, as the host wrote them */
  uint64_t *undo;    /* max_batch: one update request's previous leaves */
} xrt_rmm_t;

void rd_fpga_xrt_rmm_params_default(rd_fpga_xrt_rmm_params_t *p) {
  memset(p, 0, sizeof *p);
  p->k = RMM_K;
  p->capacity = RMM_CAPACITY;
  p->max_batch = RMM_MAX_BATCH;
  p->max_leaf = RMM_MAX_LEAF;
}

int rd_fpga_xrt_rmm_configure(const rd_fpga_xrt_rmm_params_t *p, rd_error_t *err) {
  if (p == NULL) {
    pthread_mutex_lock(&lock);
    configured = 0;
    pthread_mutex_unlock(&lock);
    return RD_OK;
  }
  if (p->xclbin[0] == '\0' || memchr(p->xclbin, '\0', sizeof p->xclbin) == NULL)
    return rd_error_set(err, RD_EINVAL, "fpga xrt: the replay module needs an xclbin path");
  if (p->k < 2 || p->k > 64 || (p->k & (p->k - 1)) != 0)
    return rd_error_set(err, RD_EINVAL, "fpga xrt: fanout %u is not a power of two in [2, 64]",
                        p->k);
  if (p->capacity == 0 || p->max_leaf == 0)
    return rd_error_set(err, RD_EINVAL, "fpga xrt: the build's capacity and leaf bound must be "
                        "positive");
  if (p->max_batch == 0 || p->max_batch > (1u << 24))
    return rd_error_set(err, RD_EINVAL, "fpga xrt: max_batch %u outside [1, 2^24]",
                        p->max_batch);
  if (p->device >= MAX_DEVICES)
    return rd_error_set(err, RD_EINVAL, "fpga xrt: device index %u is above %d", p->device,
                        MAX_DEVICES - 1);
  pthread_mutex_lock(&lock);
  params = *p;
  configured = 1;
  pthread_mutex_unlock(&lock);
  return RD_OK;
}

/* Why a table of this shape cannot run on the configured build (why[0] is
 * 0 when it can). Called with the lock held. */
static void shape_why(uint32_t capacity, uint32_t fanout, uint64_t max_leaf, char *why,
                      size_t len) {
  why[0] = '\0';
  if (!configured)
    snprintf(why, len, "the XRT replay module is not configured (no xclbin)");
  else if (fanout != params.k)
    snprintf(why, len, "fanout %u, the kernel build's is %u", fanout, params.k);
  else if (capacity == 0 || capacity > params.capacity)
    snprintf(why, len, "capacity %u outside the kernel build's [1, %u]", capacity,
             params.capacity);
  else if (max_leaf > params.max_leaf)
    snprintf(why, len, "leaves up to %llu (a table of %u items) exceed the kernel build's "
             "bound %llu (RMM_MAX_LEAF)", (unsigned long long)max_leaf, capacity,
             (unsigned long long)params.max_leaf);
}

static size_t xrt_memsize(uint32_t capacity, uint32_t fanout) {
  char why[200];
  pthread_mutex_lock(&lock);
  shape_why(capacity, fanout, capacity ? rd_st_max_leaf(capacity) : 0, why, sizeof why);
  const size_t batch = params.max_batch;
  pthread_mutex_unlock(&lock);
  return why[0] ? 0 : sizeof(xrt_rmm_t) + ((size_t)capacity + batch) * sizeof(uint64_t);
}

int rd_fpga_xrt_rmm_status(const uint64_t info[3], int noop, uint64_t want_total, const char *op,
                           int *verified, rd_error_t *err) {
  static const char *const names[] = {"RMM_OK", "RMM_ERANGE", "RMM_EEMPTY", "RMM_ETOOBIG",
                                       "RMM_EBADOP", "RMM_ECORRUPT"};
  *verified = 0;
  if (info[0] == RD_XRT_RMM_UNWRITTEN) {
    if (noop) return RD_OK; /* no kernel runs in the shim: nothing to check */
    return rd_error_set(err, RD_EINTERNAL, "fpga xrt: %s: the replay kernel completed without "
                        "writing its status", op);
  }
  if (info[0] != RMM_OK)
    return rd_error_set(err, RD_EINTERNAL, "fpga xrt: %s: the replay kernel answered %s to a "
                        "request the host had checked", op,
                        info[0] < sizeof names / sizeof names[0] ? names[info[0]] : "an unknown "
                                                                                   "status");
  if (info[1] != want_total)
    return rd_error_set(err, RD_EINTERNAL, "fpga xrt: %s: the replay kernel's total %llu is not "
                        "the host's %llu", op, (unsigned long long)info[1],
                        (unsigned long long)want_total);
  *verified = 1;
  return RD_OK;
}

/* One request; reads its status against the shadow's total after it. A
 * failure breaks the module. */
static int request(xrt_rmm_t *m, uint32_t op, uint32_t n, uint32_t first, const uint64_t *u64,
                   const uint32_t *pos, uint32_t *leaf_out, uint64_t want_total, const char *name,
                   rd_error_t *err) {
  uint64_t info[3];
  int rc = rd_fpga_xrt_rmm_call(&m->x, op, n, first, u64, pos, leaf_out, info, err);
  int verified = 0;
  if (rc == RD_OK) rc = rd_fpga_xrt_rmm_status(info, m->x.noop, want_total, name, &verified, err);
  if (rc) {
    m->stats.broken = 1;
    return rc;
  }
  m->stats.requests++;
  if (!verified) m->stats.unverified++;
  m->stats.cycles += verified ? info[2] : 0;
  return RD_OK;
}

static void xrt_destroy(void *rmm) {
  xrt_rmm_t *m = rmm;
  if (m == NULL) return;
  rd_fpga_xrt_rmm_close(&m->x);
  pthread_mutex_lock(&lock);
  claimed &= ~(UINT64_C(1) << m->device);
  pthread_mutex_unlock(&lock);
  free(m->leaves);
  free(m->undo);
  free(m);
}

static int xrt_create(void **out, uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                      rd_error_t *err) {
  *out = NULL;
  char why[200];
  rd_fpga_xrt_rmm_params_t p;
  pthread_mutex_lock(&lock);
  shape_why(capacity, fanout, max_leaf, why, sizeof why);
  p = params;
  const uint64_t bit = UINT64_C(1) << (p.device % MAX_DEVICES);
  const int busy = why[0] == '\0' && (claimed & bit) != 0;
  if (why[0] == '\0' && !busy) claimed |= bit;
  pthread_mutex_unlock(&lock);
  if (why[0]) return rd_error_set(err, RD_EINVAL, "fpga xrt: %s", why);
  if (busy)
    return rd_error_set(err, RD_EBUSY, "fpga xrt: device %u's replay kernel already holds "
                        "another table's tree (one tree per kernel)", p.device);
  xrt_rmm_t *m = calloc(1, sizeof *m);
  int rc;
  if (m == NULL || (m->leaves = calloc(capacity, sizeof *m->leaves)) == NULL ||
      (m->undo = calloc(p.max_batch, sizeof *m->undo)) == NULL) {
    if (m) free(m->leaves);
    free(m);
    rc = rd_error_set(err, RD_ENOMEM, "fpga xrt: cannot allocate the host's copy of %u leaves",
                      capacity);
    goto unclaim;
  }
  m->device = p.device;
  m->capacity = capacity;
  m->max_leaf = max_leaf;
  rc = rd_fpga_xrt_rmm_open(&m->x, p.device, p.xclbin, p.max_batch, err);
  if (rc == RD_OK) /* the kernel's tree may hold a previous module's leaves */
    rc = request(m, RMM_OP_RESET, 0, 0, NULL, NULL, NULL, 0, "reset", err);
  if (rc) {
    rd_fpga_xrt_rmm_close(&m->x);
    free(m->leaves);
    free(m->undo);
    free(m);
    goto unclaim;
  }
  *out = m;
  return RD_OK;
unclaim:
  pthread_mutex_lock(&lock);
  claimed &= ~bit;
  pthread_mutex_unlock(&lock);
  return rc;
}

static uint64_t xrt_total(const void *rmm) { return ((const xrt_rmm_t *)rmm)->total; }

/* No kernel operation reads one leaf: the host's copy answers (it wrote
 * every leaf; rmm_xrt.h, "The host shadow"). */
static uint64_t xrt_leaf(const void *rmm, uint32_t pos) {
  const xrt_rmm_t *m = rmm;
  return pos < m->capacity ? m->leaves[pos] : 0;
}

static int check_usable(const xrt_rmm_t *m, rd_error_t *err) {
  if (m->stats.broken)
    return rd_error_set(err, RD_EINTERNAL, "fpga xrt: device %u's replay module failed earlier; "
                        "its tree is unknown", m->device);
  return RD_OK;
}

/* Every position < the table's capacity and every leaf <= its bound. */
static int check_items(const xrt_rmm_t *m, size_t n, const uint32_t *pos, uint32_t first,
                       const uint64_t *values, const char *op, rd_error_t *err) {
  if (pos == NULL && ((uint64_t)first + n > m->capacity))
    return rd_error_set(err, RD_ERANGE, "fpga xrt: %s: leaves [%u, %llu) are outside [0, %u)", op,
                        first, (unsigned long long)first + n, m->capacity);
  for (size_t i = 0; i < n; i++) {
    if (pos != NULL && pos[i] >= m->capacity)
      return rd_error_set(err, RD_ERANGE, "fpga xrt: %s: position %u at batch index %zu is "
                          "outside [0, %u)", op, pos[i], i, m->capacity);
    if (values[i] > m->max_leaf)
      return rd_error_set(err, RD_ERANGE, "fpga xrt: %s: leaf %llu at batch index %zu is above "
                          "%llu", op, (unsigned long long)values[i], i,
                          (unsigned long long)m->max_leaf);
  }
  return RD_OK;
}

static uint32_t chunk_of(const xrt_rmm_t *m, size_t left) {
  return (uint32_t)(left < m->x.max_batch ? left : m->x.max_batch);
}

static int xrt_set_range(void *rmm, uint32_t first, size_t n, const uint64_t *leaves,
                         rd_error_t *err) {
  xrt_rmm_t *m = rmm;
  int rc = check_usable(m, err);
  if (rc == RD_OK) rc = check_items(m, n, NULL, first, leaves, "insert", err);
  if (rc) return rc;
  /* The input buffer holds max_batch leaves: one request per chunk. */
  for (size_t at = 0; at < n;) {
    const uint32_t c = chunk_of(m, n - at), f = first + (uint32_t)at;
    uint64_t total = m->total;
    for (uint32_t i = 0; i < c; i++) total = total - m->leaves[f + i] + leaves[at + i];
    rc = request(m, RMM_OP_INSERT, c, f, leaves + at, NULL, NULL, total, "insert", err);
    if (rc) return rc;
    memcpy(m->leaves + f, leaves + at, (size_t)c * sizeof *leaves);
    m->total = total;
    m->stats.inserted += c;
    at += c;
  }
  return RD_OK;
}

static int xrt_sample(void *rmm, size_t n, const uint64_t *targets, uint32_t *leaves,
                      rd_error_t *err) {
  xrt_rmm_t *m = rmm;
  int rc = check_usable(m, err);
  if (rc) return rc;
  if (m->total == 0 && n > 0)
    return rd_error_set(err, RD_EEMPTY, "fpga xrt: sample: every leaf is zero");
  for (size_t i = 0; i < n; i++)
    if (targets[i] >= m->total)
      return rd_error_set(err, RD_ERANGE, "fpga xrt: sample: target %llu at batch index %zu is "
                          "not below the total %llu", (unsigned long long)targets[i], i,
                          (unsigned long long)m->total);
  for (size_t at = 0; at < n;) {
    const uint32_t c = chunk_of(m, n - at);
    const uint64_t before = m->stats.unverified;
    rc = request(m, RMM_OP_SAMPLE, c, 0, targets + at, NULL, leaves + at, m->total, "sample",
                 err);
    if (rc) return rc;
    if (m->stats.unverified != before) {
      /* Inserts and updates need nothing back (the shadow holds their
       * result), a sample does: without a kernel there is none. The tree
       * is as it was (a sample changes no leaf), so the module stays
       * usable. */
      return rd_error_set(err, RD_EINTERNAL, "fpga xrt: sample: no kernel computed the leaves: "
                          "XRT's no-op shim (XCL_EMULATION_MODE=noop) executes none");
    }
    /* A descent of a target below the total ends on a non-zero leaf
     * inside the table. */
    for (uint32_t i = 0; i < c; i++) {
      const uint32_t leaf = leaves[at + i];
      if (leaf >= m->capacity || m->leaves[leaf] == 0) {
        m->stats.broken = 1;
        return rd_error_set(err, RD_EINTERNAL, "fpga xrt: sample: the replay kernel returned "
                            "leaf %u for target %llu (a zero leaf or outside [0, %u))", leaf,
                            (unsigned long long)targets[at + i], m->capacity);
      }
    }
    m->stats.sampled += c;
    at += c;
  }
  return RD_OK;
}

static int xrt_update(void *rmm, size_t n, const uint32_t *pos, const uint64_t *values,
                      rd_error_t *err) {
  xrt_rmm_t *m = rmm;
  int rc = check_usable(m, err);
  if (rc == RD_OK) rc = check_items(m, n, pos, 0, values, "update", err);
  if (rc) return rc;
  /* In batch order, request after request: the later of two writes to a
   * leaf wins, on the device and in the shadow. */
  for (size_t at = 0; at < n;) {
    const uint32_t c = chunk_of(m, n - at);
    /* The total after the request, with a leaf written twice in the chunk
     * counted once: apply the chunk to the shadow in order, and undo it
     * (in reverse) if the device fails the request. */
    const uint64_t before = m->total;
    for (uint32_t i = 0; i < c; i++) {
      const uint32_t p = pos[at + i];
      m->undo[i] = m->leaves[p];
      m->total = m->total - m->leaves[p] + values[at + i];
      m->leaves[p] = values[at + i];
    }
    rc = request(m, RMM_OP_UPDATE, c, 0, values + at, pos + at, NULL, m->total, "update", err);
    if (rc) {
      for (uint32_t i = c; i-- > 0;) m->leaves[pos[at + i]] = m->undo[i];
      m->total = before;
      return rc;
    }
    m->stats.updated += c;
    at += c;
  }
  return RD_OK;
}

const rd_rmm_ops_t rd_fpga_xrt_rmm_ops = {
    .name = "fpga-xrt",
    .memsize = xrt_memsize,
    .create = xrt_create,
    .destroy = xrt_destroy,
    .total = xrt_total,
    .leaf = xrt_leaf,
    .set_range = xrt_set_range,
    .sample = xrt_sample,
    .update = xrt_update,
};

void rd_fpga_xrt_rmm_stats(const void *rmm, rd_fpga_xrt_rmm_stats_t *out) {
  *out = ((const xrt_rmm_t *)rmm)->stats;
}

const rd_fpga_xrt_rmm_t *rd_fpga_xrt_rmm_host(const void *rmm) {
  return &((const xrt_rmm_t *)rmm)->x;
}

int rd_fpga_xrt_rmm_check(void *rmm, int *verified, rd_error_t *err) {
  xrt_rmm_t *m = rmm;
  *verified = 0;
  int rc = check_usable(m, err);
  if (rc) return rc;
  const uint64_t before = m->stats.unverified;
  rc = request(m, RMM_OP_TOTAL, 0, 0, NULL, NULL, NULL, m->total, "total", err);
  if (rc) return rc;
  *verified = m->stats.unverified == before;
  return RD_OK;
}
