/* learner_backend_cpu.c - the CPU learner (backends/cpu/learner.h) behind
 * the daemon's learner ops (daemon/learn/learner_backend.h): the device
 * provider's learner half, as learner_backend_gpu.c and _fpga.c are for
 * theirs. */
#include "learner_backend.h"

#include <stdlib.h>

#include "nn.h"

static int cpu_init(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
                    rd_error_t *err) {
  (void)device;
  rd_learner_t *l = calloc(1, sizeof *l);
  if (l == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the learner");
  return rd_learner_backend_adopt(b, l, rd_learner_init(l, c, err), free);
}

static int cpu_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
                    rd_step_stats_t *st, rd_error_t *err) {
  return rd_learner_step(b->impl, batch, td_abs, st, err);
}

static void cpu_pause(rd_learner_backend_t *b) { rd_learner_tune_pause(b->impl); }

static void cpu_set_idle(rd_learner_backend_t *b, int (*fn)(void *arg), void *arg) {
  rd_learner_set_idle(b->impl, fn, arg);
}

static size_t cpu_policy_bytes(const rd_learner_backend_t *b) {
  return rd_learner_policy_bytes(b->impl);
}

static int cpu_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                           rd_error_t *err) {
  return rd_learner_policy_save(b->impl, buf, cap, written, err);
}

/* net[0] is the policy (DQN's Q network, DDPG's actor), net[1] its target. */
static int cpu_policy_load(rd_learner_backend_t *b, const void *buf, size_t len,
                           rd_error_t *err) {
  rd_learner_t *l = b->impl;
  int rc = rd_mlp_load(&l->net[0], buf, len, err);
  if (rc == RD_OK) rc = rd_mlp_copy_params(&l->net[1], &l->net[0], err);
  rd_learner_params_changed(l);
  return rc;
}

static size_t cpu_state_bytes(const rd_learner_backend_t *b) {
  return rd_learner_state_bytes(b->impl);
}

static int cpu_state_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                          rd_error_t *err) {
  return rd_learner_state_save(b->impl, buf, cap, written, err);
}

static int cpu_state_load(rd_learner_backend_t *b, const void *buf, size_t len,
                          rd_error_t *err) {
  return rd_learner_state_load(b->impl, buf, len, err);
}

static void cpu_free(void *l) {
  rd_learner_free(l);
  free(l);
}

static void cpu_destroy(rd_learner_backend_t *b) { rd_learner_backend_release(b, cpu_free); }

const rd_learner_ops_t rd_learner_ops_cpu = {
    .name = "cpu",
    .kind = RD_LEARNER_ON_CPU,
    .init = cpu_init,
    .step = cpu_step,
    .policy_bytes = cpu_policy_bytes,
    .policy_save = cpu_policy_save,
    .policy_load = cpu_policy_load,
    .destroy = cpu_destroy,
    .pause = cpu_pause,
    .set_idle = cpu_set_idle,
    .state_bytes = cpu_state_bytes,
    .state_save = cpu_state_save,
    .state_load = cpu_state_load,
};
