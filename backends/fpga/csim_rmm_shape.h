/* csim_rmm_shape.h - one built shape of the replay kernel (kernels/rmm.h)
 * for the daemon's C-simulation (csim_rmm.h). Internal to backends/fpga.
 *
 * The kernel's tree shape is a compile-time constant, as a hardware build's
 * is (rmm.h: "one build, one tree shape"), so meson compiles
 * csim_rmm_shape.c once per shape it lists (backends/fpga/meson.build,
 * rd_fpga_csim_shapes) with RD_CSIM_K, RD_CSIM_N and RD_CSIM_MIN_TABLE, and
 * each compilation defines one rd_fpga_csim_shape_t named
 * rd_csim_k<K>_n<N>_shape. The kernel's public names get the same prefix,
 * so every shape links into one program. The functions below wrap the
 * kernel's C functions, unchanged, and turn their status words into
 * rd_error.h codes with messages.
 */
#ifndef RD_FPGA_CSIM_RMM_SHAPE_H
#define RD_FPGA_CSIM_RMM_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

typedef struct {
  uint32_t k;          /* RMM_K */
  uint32_t capacity;   /* RMM_CAPACITY, the tree's leaves N */
  uint32_t min_table;  /* the smallest table this shape serves */
  uint32_t s;          /* RMM_S, bank parallelism */
  uint32_t max_batch;  /* RMM_MAX_BATCH, items per kernel request */
  uint32_t height;     /* RMM_H, levels below the root */
  uint32_t leaf_bits;  /* RMM_LEAF_BITS */
  uint64_t max_leaf;   /* RMM_MAX_LEAF: the CPU tree's bound for min_table leaves */
  size_t tree_bytes;   /* sizeof(rmm_tree_t): the on-chip state, memo included */
  /* The kernel's operations on one tree (rmm_tree_t, tree_bytes of zeroed
   * or reset memory). *cycles receives the request's structural cycle
   * count (rmm_stats_t). Errors as the kernel reports them: RD_ERANGE,
   * RD_EEMPTY, RD_ETOOBIG, RD_EINTERNAL (a corrupt tree). */
  void (*reset)(void *tree);
  int (*sample)(void *tree, uint32_t n, const uint64_t *targets, uint32_t *leaves,
                uint64_t *cycles, rd_error_t *err);
  int (*update)(void *tree, uint32_t n, const uint32_t *pos, const uint64_t *values,
                uint64_t *cycles, rd_error_t *err);
  int (*insert)(void *tree, uint32_t first, uint32_t n, const uint64_t *values,
                uint64_t *cycles, rd_error_t *err);
  uint64_t (*total)(const void *tree);
  uint64_t (*leaf)(const void *tree, uint32_t pos);
  /* rmm_check: 0, or -1 with the first inconsistency in msg. */
  int (*check)(const void *tree, char *msg, size_t cap);
} rd_fpga_csim_shape_t;

#endif
