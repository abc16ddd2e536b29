/* rmm_check.h - tables on the GPU replay module and storage (rmm_gpu.h)
 * against a table on the CPU, shared by tests/gpu/test_rmm.c (cmocka,
 * any host: the module over host device calls) and check_rmm.cu (a
 * GPU: the module over CUDA). Plain C.
 *
 * rmm_check_same runs one workload on two tables of the same config, one
 * with the given modules and one with the CPU tree and host columns:
 * inserts that wrap the ring, samples (plain and stratified), updates with
 * stale keys and repeats, gathers, priorities; after each call the two must
 * agree bit for bit (keys, probabilities, weights, every row, every live
 * priority).
 *
 * rmm_check_fault does the same until an armed device call fails, then
 * checks the failure is a fault (RD_EINTERNAL, the table refusing until it
 * moves), moves the table to the CPU (rd_table_to_cpu) and checks what came
 * back against the CPU table: the items it says it dropped are the ones
 * the contract drops, everything else is equal, and once both tables'
 * slots are all rewritten they agree again call for call.
 */
#ifndef RD_TESTS_RMM_CHECK_H
#define RD_TESTS_RMM_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "rmm_gpu.h"
#include "rmm_gpu_dev.h"

typedef struct {
  const char *name;
  uint32_t capacity, fanout, max_batch;
  uint32_t batch;  /* rows per insert, items per sample */
  uint32_t rounds; /* insert/sample/update/gather rounds */
  int wide;        /* add a 64 KiB field: the storage splits its calls */
  uint64_t seed;
} rmm_case_t;

/* Device calls on the host: the CPU sum tree and a byte array. */
extern const rd_gpu_dev_ops_t rmm_check_host_dev;

/* Device calls that fail on demand: those of `base`; counting the calls
 * whose kind is in `mask` from 1 after rmm_check_arm, call fail_at fails
 * (RD_EINTERNAL, nothing done) and, if sticky, every later call of any kind
 * too (as after a CUDA error that poisons the context). fail_at 0: none. */
enum { RMM_FAIL_TREE = 1, RMM_FAIL_WRITE = 2, RMM_FAIL_READ = 4 };
extern const rd_gpu_dev_ops_t rmm_check_fault_dev;
void rmm_check_fault_base(const rd_gpu_dev_ops_t *base);
void rmm_check_arm(unsigned mask, uint64_t fail_at, int sticky);

/* Table ops of device `device` over `dev` (static storage: valid until
 * the next call). */
void rmm_check_ops(const rd_gpu_dev_ops_t *dev, int device, const rd_rmm_ops_t **rmm,
                   const rd_storage_ops_t **st);

/* 0, or -1 with what differed in msg. rmm or st may be NULL (the CPU's). */
int rmm_check_same(const rmm_case_t *c, const rd_rmm_ops_t *rmm, const rd_storage_ops_t *st,
                   char *msg, size_t len);

/* rmm and st made over rmm_check_fault_dev; the fault armed with (mask,
 * fail_at, sticky) once the table is full. *failed_op (may be NULL)
 * receives the call that failed ("insert", "sample", "update", "gather",
 * or "none"), *lost what rd_table_to_cpu dropped. 0, or -1 with msg. */
int rmm_check_fault(const rmm_case_t *c, const rd_rmm_ops_t *rmm, const rd_storage_ops_t *st,
                    unsigned mask, uint64_t fail_at, int sticky, const char **failed_op,
                    uint64_t *lost, char *msg, size_t len);

#endif
