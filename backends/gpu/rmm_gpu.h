/* rmm_gpu.h - the GPU replay module, as the GPU provider (provider_gpu.c)
 * plugs it into a table: where the CUDA sum tree (and the rows, where the
 * module holds them) become a table's replay module (backends/cpu/table.h
 * rd_rmm_ops_t, config.rmm) for workloads whose mapping puts the RMM, or
 * the RMM and the storage, on a GPU.
 *
 * Who provides it: the GPU backend (backends/gpu, CUDA builds). A build
 * without CUDA links provider_gpu_nocuda.c, where rd_gpu_rmm_get refuses
 * with "built without CUDA: ..." and rd_gpu_rmm_memsize is 0.
 *
 * What the provider relies on:
 *  - ops keeps the replay-module contract of table.h integer for integer
 *    (same leaf bound, descent rule, batch order, validate first), so a
 *    table samples on the GPU exactly what the CPU tree would;
 *  - ops->memsize(capacity, fanout) is what the registry charges against
 *    --max-memory for the table's tree (rd_table_tree_memsize), device
 *    memory included;
 *  - a failing create leaves nothing held: the registry then gives the
 *    table the CPU tree (placement.h rd_placement_rmm_on_cpu); a device
 *    fault during a call is reported as an error the table passes on.
 * Thread safety: as every replay module, calls on one module are
 * serialised by the table's caller; modules of different tables are
 * independent (one CUDA stream each). */
#ifndef RD_RMM_GPU_H
#define RD_RMM_GPU_H

#include <stdint.h>

#include "rd_error.h"
#include "table.h"

/* The replay module of one GPU. */
typedef struct {
  const rd_rmm_ops_t *ops; /* a table's replay module on that GPU (table.h config.rmm) */
  int holds_rows;          /* 1: it keeps the table's rows in device memory too (the storage) */
} rd_gpu_rmm_t;

/* The replay module for CUDA device `device`: RD_OK and *out, or an error
 * that says why this build or device has none (RD_EINVAL "built without
 * CUDA: ..."). *out is zeroed on error. */
int rd_gpu_rmm_get(uint32_t device, rd_gpu_rmm_t *out, rd_error_t *err);

/* Bytes of GPU memory a table of config tc takes with the module: its tree
 * and, when the module holds them, its rows. 0 when the module cannot
 * hold such a table (or the build has none). */
uint64_t rd_gpu_rmm_memsize(const rd_table_config_t *tc);

#endif
