/* learner_host.h - the host side's description of a hosted learner for the
 * FPGA learner kernel (kernels/learner.h): the one mapping from the CPU
 * learner's config (backends/cpu/learner.h) to the kernel's lrn_config_t,
 * used by the daemon's "fpga" backend (backends/fpga/learner_backend_fpga.c) and
 * by the kernel's tests, so both drive the kernel with the same settings.
 * Not part of the kernel: a kernel build knows nothing of the CPU learner. */
#ifndef RD_FPGA_LEARNER_HOST_H
#define RD_FPGA_LEARNER_HOST_H

#include <stdint.h>

#include "kernels/learner.h"
#include "learner.h" /* backends/cpu: rd_learner_config_t */

/* k = c for the kernel with dp pipelines: algorithm, batch (max_batch),
 * double DQN, target rule, the networks' shapes (a spec deeper than the
 * build keeps its layer count, so lrn_config_check refuses it by that),
 * the learning rates, tau, clip, Huber delta, the action range and Adam's
 * betas and eps as the CPU learner uses them. c need not be valid:
 * lrn_config_check says what the kernel cannot take. */
void rd_fpga_learner_config(const rd_learner_config_t *c, uint32_t dp, lrn_config_t *k);

#endif
