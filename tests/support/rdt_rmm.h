/* rdt_rmm.h - the CPU sum tree behind a replay module's ops
 * (backends/cpu/table.h rd_rmm_ops_t), for the tests of a table on a
 * module: its calls go through the ops as a GPU's or an FPGA's would.
 *
 * Contract: rdt_host_rmm_ops is "host-rmm", the CPU tree's errors and
 * results; while rdt_host_rmm_fail_sample is set, a sample fails with
 * RD_EINTERNAL ("host-rmm: device lost") and changes nothing, as a lost
 * device's would. */
#ifndef RDT_RMM_H
#define RDT_RMM_H

#include "table.h"

extern const rd_rmm_ops_t rdt_host_rmm_ops;
extern int rdt_host_rmm_fail_sample;

#endif
