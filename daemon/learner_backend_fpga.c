/* learner_backend_fpga.c - the "fpga" learner backend (learner_backend.h).
 *
 * Not built yet: every init fails as a device fault, so a caller that asked
 * for it falls back to the CPU learner (pipeline.h, "Learner backends"). */
#include "learner_backend.h"

static int nofpga_init(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
                       rd_error_t *err) {
  (void)c;
  b->fault = 1;
  return rd_error_set(err, RD_EINVAL, "the FPGA learner backend is not built yet (FPGA %u not used)",
                      device);
}

static int nofpga_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
                       rd_step_stats_t *st, rd_error_t *err) {
  (void)batch;
  (void)td_abs;
  (void)st;
  b->fault = 1;
  return rd_error_set(err, RD_EINVAL, "the FPGA learner backend is not built yet");
}

static size_t nofpga_policy_bytes(const rd_learner_backend_t *b) {
  (void)b;
  return 0;
}

static int nofpga_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                              rd_error_t *err) {
  (void)buf;
  (void)cap;
  if (written) *written = 0;
  b->fault = 1;
  return rd_error_set(err, RD_EINVAL, "the FPGA learner backend is not built yet");
}

static void nofpga_destroy(rd_learner_backend_t *b) { b->impl = NULL; }

const rd_learner_ops_t rd_learner_ops_fpga = {
    .name = "fpga",
    .kind = RD_LEARNER_ON_FPGA,
    .init = nofpga_init,
    .step = nofpga_step,
    .policy_bytes = nofpga_policy_bytes,
    .policy_save = nofpga_policy_save,
    .policy_load = NULL,
    .destroy = nofpga_destroy,
};
