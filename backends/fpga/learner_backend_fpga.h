/* learner_backend_fpga.h - what the FPGA learner backends share (internal
 * to daemon/): the C-simulation one (learner_backend_fpga.c, which defines
 * these) and the XRT one (learner_backend_xrt.c). Both run the same kernel
 * top, lrn_train_step, with the same host-side rules: the kernel's config
 * for a learner config, the initial weights, and the kernel's stats read
 * back as the CPU learner reports them. */
#ifndef RD_LEARNER_BACKEND_FPGA_H
#define RD_LEARNER_BACKEND_FPGA_H

#include <stddef.h>

#include "kernels/learner.h"
#include "learner.h" /* backends/cpu: rd_learner_config_t, rd_step_stats_t */
#include "learner_backend.h"
#include "nn.h"
#include "rd_error.h"

/* The kernel's description of c at the FPGA backends' DP (min(LRN_MAX_DP,
 * max_batch)). */
void rd_learner_fpga_kernel_config(const rd_learner_config_t *c, lrn_config_t *k);

/* What both backends hold of a learner: its config, the kernel's
 * description of it, the policy network's layout and the blocks' sizes. */
typedef struct {
  rd_learner_config_t config;
  lrn_config_t kc;
  rd_nn_spec_t policy; /* net 0: DQN's Q network, DDPG's actor */
  size_t n_params;     /* floats of each parameter block (all online networks) */
  size_t n_policy;     /* floats of the policy's block (params[0..n_policy)) */
} rd_learner_fpga_shape_t;

/* A backend's init, before anything is held: c checked (an invalid config
 * is the caller's: fault stays 0), then against the kernel's build limits
 * (RD_EINVAL with fault RD_LEARNER_FAULT_UNSUPPORTED: the pipeline falls
 * back to the CPU, the device stays usable), then s filled. */
int rd_learner_fpga_shape(rd_learner_backend_t *b, const rd_learner_config_t *c,
                          rd_learner_fpga_shape_t *s, rd_error_t *err);

/* The initial online and target weights of rd_learner_init for c's seed,
 * in the kernel's flat layout (all networks concatenated), n_params floats
 * each. RD_EINTERNAL if the CPU learner's networks do not add up to
 * n_params (nothing is written then past n_params). */
int rd_learner_fpga_initial_weights(const rd_learner_config_t *c, float *params, float *target,
                                    size_t n_params, rd_error_t *err);

/* The kernel's four parameter blocks (params, target, adam_m, adam_v:
 * n_params floats each) and its step count as the device-neutral state
 * arrays (learner.h rd_learner_state_*_arrays): DQN's nets 0/1 and DDPG's
 * actor 0/1 are the block [0, n_policy), DDPG's critic 2/3 the rest; the
 * step count is every online network's Adam step (the kernel keeps one). */
void rd_learner_fpga_state_arrays(const rd_learner_fpga_shape_t *s, float *params, float *target,
                                  float *adam_m, float *adam_v, uint64_t steps,
                                  rd_learner_state_arrays_t *a);

/* RD_ERANGE with the CPU learner's message for a step the kernel found
 * non-finite (stats[LRN_ST_FAILED]). */
int rd_learner_fpga_range_error(const rd_learner_config_t *c, const double *stats,
                                rd_error_t *err);

/* st from the kernel's stats (LRN_ST_COUNT doubles). */
void rd_learner_fpga_step_stats(const double *stats, rd_step_stats_t *st);

#endif
