/* csim_rmm.h - the FPGA replay module in C-simulation, as a table's replay
 * module (backends/cpu/table.h, rd_rmm_ops_t).
 *
 * WHAT RUNS: the replay kernel's own C code (kernels/rmm.c, the code HLS
 * would synthesise) in the daemon's process, on the CPU. No board, no XRT,
 * no RTL: this is C-simulation. Timings of a workload on it are CPU
 * timings of that code, not FPGA figures; the kernel's structural cycle
 * counts are kept (rd_fpga_csim_rmm_stats) but are not measurements.
 *
 * Shapes. The kernel's tree shape is compile-time (rmm.h), so the daemon
 * carries one build per fanout K in {2, 4, ..., 64} and tree size N in
 * {2^12, 2^16, 2^20} (S = 1: C-simulation picks the same leaves at every
 * S). A table of capacity c and fanout K runs on the smallest built N >= c
 * with that K, in leaves [0, c); the rest stay zero and are never sampled.
 * Each build accepts leaves up to the CPU tree's bound for the smallest
 * table it serves (csim_rmm_shape.c), so a table's rd_fixed.h integers are
 * the same as on the CPU and the module samples exactly what the CPU tree
 * would. A table above 2^20 items does not fit: create fails saying so, and
 * rd_fpga_csim_rmm_fits tells the mapper beforehand.
 *
 * Requests. Samples and updates of more than the kernel's batch (1024
 * items: its memo and FIFO depth) are split into several kernel requests,
 * as a host would split them; a whole call is validated first, so a bad
 * call changes nothing. Updates go by position (RMM_OP_UPDATE); the memo
 * path (RMM_OP_UPDATE_SAMPLED) is not used, because the pipeline samples up
 * to D batches ahead and the memo holds only the last sample.
 */
#ifndef RD_FPGA_CSIM_RMM_H
#define RD_FPGA_CSIM_RMM_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "table.h"

/* The module for table configs (config.rmm = &rd_fpga_csim_rmm_ops). */
extern const rd_rmm_ops_t rd_fpga_csim_rmm_ops;

/* The largest table the built shapes hold (2^20 items). */
uint32_t rd_fpga_csim_rmm_max_capacity(void);

/* 1 if a table of this capacity and fanout has a built shape; else 0 with
 * why (len bytes), e.g. "capacity 2000000 is above the C-simulation
 * build's largest tree (1048576 leaves)". */
int rd_fpga_csim_rmm_fits(uint32_t capacity, uint32_t fanout, char *why, size_t len);

/* The built shape a table of this capacity and fanout runs on. */
typedef struct {
  uint32_t k, capacity, s, max_batch, height, leaf_bits;
  uint64_t max_leaf;
  size_t tree_bytes;
} rd_fpga_csim_shape_info_t;
int rd_fpga_csim_rmm_shape(uint32_t capacity, uint32_t fanout, rd_fpga_csim_shape_info_t *out,
                           rd_error_t *err);

/* What one module ran: kernel requests and their structural cycles
 * (kernels/rmm.h: from the batch's real loads; not an RTL simulation). */
typedef struct {
  uint64_t requests;
  uint64_t sampled, updated, inserted; /* items */
  uint64_t cycles;
} rd_fpga_csim_rmm_stats_t;
void rd_fpga_csim_rmm_stats(const void *rmm, rd_fpga_csim_rmm_stats_t *out);

/* The kernel's own consistency check (rmm_check) of a module's tree: RD_OK,
 * or RD_EINTERNAL with the first inconsistency. */
int rd_fpga_csim_rmm_check(const void *rmm, rd_error_t *err);

#endif
