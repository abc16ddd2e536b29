/* csim_rmm_shape.c - one shape of the replay kernel, compiled for the
 * daemon's C-simulation (csim_rmm_shape.h says why and how). meson passes
 * RD_CSIM_K, RD_CSIM_N, RD_CSIM_MIN_TABLE and RD_CSIM_MAX_BATCH.
 *
 * The shape: K = RD_CSIM_K, N = RD_CSIM_N leaves, S = 1 (C-simulation picks
 * the same leaves at every S, tests/test_fpga_rmm.c; S changes only the
 * cycle counts and the banks), and a leaf bound raised to the CPU tree's for
 * the smallest table it serves (rmm.h, RMM_MIN_TABLE): a table of c <= N
 * items holds leaves up to (2^63 - 1) / c, which this tree must accept,
 * and keeps its own total below 2^63, so no node's true value ever needs
 * more than 63 bits. */
#if !defined(RD_CSIM_K) || !defined(RD_CSIM_N) || !defined(RD_CSIM_MIN_TABLE) || \
    !defined(RD_CSIM_MAX_BATCH)
#error "compile with RD_CSIM_K, RD_CSIM_N, RD_CSIM_MIN_TABLE and RD_CSIM_MAX_BATCH"
#endif

#include <stdio.h>

#include "csim_rmm_shape.h"

#define RMM_K RD_CSIM_K
#define RMM_CAPACITY RD_CSIM_N
#define RMM_S 1
#define RMM_MAX_BATCH RD_CSIM_MAX_BATCH
#define RMM_MIN_TABLE RD_CSIM_MIN_TABLE /* RMM_MAX_LEAF: the CPU tree's bound for it */
#define RMM_NO_KERNEL_TOP 1

/* rd_csim_k<K>_n<N>_<name>: the kernel's public names, per shape. */
#define RD_CSIM_PASTE(a, k, b, n, c) a##k##b##n##_##c
#define RD_CSIM_XPASTE(a, k, b, n, c) RD_CSIM_PASTE(a, k, b, n, c)
#define RD_CSIM_ID(name) RD_CSIM_XPASTE(rd_csim_k, RD_CSIM_K, _n, RD_CSIM_N, name)
#define rmm_reset RD_CSIM_ID(reset)
#define rmm_sample RD_CSIM_ID(sample)
#define rmm_update RD_CSIM_ID(update)
#define rmm_update_sampled RD_CSIM_ID(update_sampled)
#define rmm_insert RD_CSIM_ID(insert)
#define rmm_total RD_CSIM_ID(total)
#define rmm_leaf RD_CSIM_ID(leaf)
#define rmm_check RD_CSIM_ID(check)

#include "rmm.c"

_Static_assert(RD_CSIM_MIN_TABLE >= 1 && RD_CSIM_MIN_TABLE <= RD_CSIM_N,
               "RD_CSIM_MIN_TABLE outside [1, RD_CSIM_N]");

/* The kernel's status word as an rd_error.h code. */
static int status(int rc, const char *op, rd_error_t *err) {
  switch (rc) {
  case RMM_OK: return RD_OK;
  case RMM_ERANGE:
    return rd_error_set(err, RD_ERANGE, "fpga C-simulation: %s: a target, position or leaf "
                        "is out of range", op);
  case RMM_EEMPTY:
    return rd_error_set(err, RD_EEMPTY, "fpga C-simulation: %s: every leaf is zero", op);
  case RMM_ETOOBIG:
    return rd_error_set(err, RD_ETOOBIG, "fpga C-simulation: %s: more than %u items in one "
                        "request", op, (unsigned)RMM_MAX_BATCH);
  case RMM_ECORRUPT:
    return rd_error_set(err, RD_EINTERNAL, "fpga C-simulation: %s: the tree is inconsistent",
                        op);
  default:
    return rd_error_set(err, RD_EINTERNAL, "fpga C-simulation: %s: kernel status %d", op, rc);
  }
}

static void shape_reset(void *tree) { rmm_reset(tree); }

static int shape_sample(void *tree, uint32_t n, const uint64_t *targets, uint32_t *leaves,
                        uint64_t *cycles, rd_error_t *err) {
  rmm_stats_t st = {0, 0, 0};
  int rc = status(rmm_sample(tree, n, targets, leaves, &st), "sample", err);
  *cycles = st.cycles;
  return rc;
}

static int shape_update(void *tree, uint32_t n, const uint32_t *pos, const uint64_t *values,
                        uint64_t *cycles, rd_error_t *err) {
  rmm_stats_t st = {0, 0, 0};
  int rc = status(rmm_update(tree, n, pos, values, &st), "update", err);
  *cycles = st.cycles;
  return rc;
}

static int shape_insert(void *tree, uint32_t first, uint32_t n, const uint64_t *values,
                        uint64_t *cycles, rd_error_t *err) {
  rmm_stats_t st = {0, 0, 0};
  int rc = status(rmm_insert(tree, first, n, values, &st), "insert", err);
  *cycles = st.cycles;
  return rc;
}

static uint64_t shape_total(const void *tree) { return rmm_total(tree); }
static uint64_t shape_leaf(const void *tree, uint32_t pos) { return rmm_leaf(tree, pos); }
static int shape_check(const void *tree, char *msg, size_t cap) { return rmm_check(tree, msg, cap); }

const rd_fpga_csim_shape_t RD_CSIM_ID(shape) = {
    .k = RMM_K,
    .capacity = RMM_CAPACITY,
    .min_table = RD_CSIM_MIN_TABLE,
    .s = RMM_S,
    .max_batch = RMM_MAX_BATCH,
    .height = RMM_H,
    .leaf_bits = RMM_LEAF_BITS,
    .max_leaf = RMM_MAX_LEAF,
    .tree_bytes = sizeof(rmm_tree_t),
    .reset = shape_reset,
    .sample = shape_sample,
    .update = shape_update,
    .insert = shape_insert,
    .total = shape_total,
    .leaf = shape_leaf,
    .check = shape_check,
};
