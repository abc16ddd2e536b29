/* rdt_rmm.c - the CPU sum tree as a replay module (rdt_rmm.h). */
#include "rdt_rmm.h"

#include <stdlib.h>

#include "sumtree.h"

int rdt_host_rmm_fail_sample;

static size_t host_memsize(uint32_t capacity, uint32_t fanout) {
  return rd_sumtree_memsize(capacity, fanout);
}

static int host_create(void **rmm, uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                       rd_error_t *err) {
  (void)max_leaf;
  rd_sumtree_t *t = calloc(1, sizeof *t);
  if (t == NULL) return rd_error_set(err, RD_ENOMEM, "host-rmm: out of memory");
  int rc = rd_sumtree_init(t, capacity, fanout, err);
  if (rc)
    free(t);
  else
    *rmm = t;
  return rc;
}

static void host_destroy(void *rmm) {
  rd_sumtree_free(rmm);
  free(rmm);
}

static uint64_t host_total(const void *rmm) { return rd_sumtree_total(rmm); }
static uint64_t host_leaf(const void *rmm, uint32_t pos) { return rd_sumtree_get(rmm, pos); }

static int host_set_range(void *rmm, uint32_t first, size_t n, const uint64_t *leaves,
                          rd_error_t *err) {
  return rd_sumtree_set_range(rmm, first, n, leaves, err);
}

static int host_sample(void *rmm, size_t n, const uint64_t *targets, uint32_t *leaves,
                       rd_error_t *err) {
  if (rdt_host_rmm_fail_sample) return rd_error_set(err, RD_EINTERNAL, "host-rmm: device lost");
  return rd_sumtree_sample(rmm, n, targets, leaves, err);
}

static int host_update(void *rmm, size_t n, const uint32_t *pos, const uint64_t *values,
                       rd_error_t *err) {
  return rd_sumtree_update(rmm, n, pos, values, err);
}

const rd_rmm_ops_t rdt_host_rmm_ops = {
    .name = "host-rmm",
    .memsize = host_memsize,
    .create = host_create,
    .destroy = host_destroy,
    .total = host_total,
    .leaf = host_leaf,
    .set_range = host_set_range,
    .sample = host_sample,
    .update = host_update,
};
