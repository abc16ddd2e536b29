/* learner_backend_fpga.c - the "fpga" learner backend (learner_backend.h):
 * the FPGA learner kernel (backends/fpga/kernels/learner.h) run in
 * C-simulation in this process, the "C-sim device".
 *
 * The host side does what a host does for an FPGA learner: it checks the
 * config against the kernel's build limits, initialises the weights (with
 * the CPU learner's own init, so an FPGA learner starts from exactly the
 * weights rd_learner_init gives for the seed) and "DMAs" them into the
 * board's buffers (here: this instance's heap buffers), keeps the step
 * count, checks each batch (rd_learner_batch_validate, the same checks and
 * messages as every backend) and calls the kernel top lrn_train_step once
 * per step. The kernel keeps no static state, so instances need no lock.
 *
 * DP (pipelines): LRN_MAX_DP, or max_batch if smaller. DP changes only the
 * order of the gradient sums (learner.h's tolerance covers every DP).
 * config.threads is ignored: the C-simulation runs on the calling thread.
 *
 * Fault classification (learner_backend.h). init: an invalid config is
 * the caller's (fault 0, the CPU learner's message); a valid config beyond
 * the kernel's build limits is RD_EINVAL with RD_LEARNER_FAULT_UNSUPPORTED
 * (the pipeline falls back to the CPU, logging the limit); failing to
 * allocate the board's buffers is RD_ENOMEM with RD_LEARNER_FAULT_DEVICE.
 * step: a bad batch is the caller's (RD_EINVAL / RD_ETOOBIG, fault 0); a
 * non-finite loss or gradient norm is RD_ERANGE (fault 0, the CPU
 * learner's messages); a kernel that refuses a step the host checked is
 * RD_EINTERNAL with RD_LEARNER_FAULT_DEVICE. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/learner.h"
#include "learner_host.h"
#include "learner_backend.h"
#include "learner_backend_fpga.h"
#include "nn.h"

typedef struct {
  rd_learner_config_t config;
  lrn_config_t kc;
  uint32_t desc[LRN_D_WORDS];
  double hp[LRN_HP_COUNT];
  rd_nn_spec_t policy;  /* net 0: DQN's Q network, DDPG's actor */
  size_t n_params;      /* floats of params (all online networks) */
  size_t n_policy;      /* floats of the policy's block (params[0..n_policy)) */
  uint64_t steps;       /* successful steps */
  /* The board's buffers (host memory in C-simulation). */
  float *params, *target, *adam_m, *adam_v, *ws;
  float *ones; /* max_batch IS weights of 1, for a batch without weights */
  float *td;   /* max_batch |delta| when the caller passes no td_abs */
} fpga_learner_t;

/* The kernel's description of c, at this backend's DP (above). */
void rd_learner_fpga_kernel_config(const rd_learner_config_t *c, lrn_config_t *k) {
  rd_fpga_learner_config(c, c->max_batch < LRN_MAX_DP ? c->max_batch : LRN_MAX_DP, k);
}

int rd_learner_fpga_supports(const rd_learner_config_t *c, rd_error_t *err) {
  lrn_config_t k;
  rd_learner_fpga_kernel_config(c, &k);
  lrn_why_t why;
  if (lrn_config_check(&k, &why) == LRN_OK) return 1;
  char msg[RD_ERROR_MSG_MAX];
  lrn_why_format(&why, msg, sizeof msg);
  rd_error_set(err, RD_EINVAL, "the FPGA learner kernel cannot train this learner: %s", msg);
  return 0;
}

static float *alloc_floats(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) return NULL;
  return (float *)p;
}

static void fpga_free(fpga_learner_t *l) {
  free(l->params);
  free(l->target);
  free(l->adam_m);
  free(l->adam_v);
  free(l->ws);
  free(l->ones);
  free(l->td);
  free(l);
}

/* The initial weights of rd_learner_init for c's seed (the CPU learner's
 * init, at batch 1: the weights depend on the seed alone), copied into the
 * online and target buffers as a host copies weights to the board. */
int rd_learner_fpga_initial_weights(const rd_learner_config_t *config, float *params,
                                    float *target, size_t n_params, rd_error_t *err) {
  rd_learner_config_t c = *config;
  c.max_batch = 1;
  c.threads = 1;
  rd_learner_t cpu;
  int rc = rd_learner_init(&cpu, &c, err);
  if (rc) return rc;
  /* CPU nets: DQN q, q_target; DDPG actor, actor_target, critic, critic_target. */
  size_t off = 0;
  for (int k = 0; k < cpu.n_nets; k += 2) {
    const size_t np = rd_mlp_n_params(&cpu.net[k]);
    if (off + np <= n_params) {
      memcpy(params + off, cpu.net[k].params, np * sizeof(float));
      memcpy(target + off, cpu.net[k + 1].params, np * sizeof(float));
    }
    off += np;
  }
  rd_learner_free(&cpu);
  return off == n_params ? RD_OK
                         : rd_error_set(err, RD_EINTERNAL,
                                        "FPGA learner: %zu initial parameters for a kernel "
                                        "block of %zu", off, n_params);
}

static int fpga_init(rd_learner_backend_t *b, const rd_learner_config_t *c, uint32_t device,
                     rd_error_t *err) {
  int rc = rd_learner_config_validate(c, err);
  if (rc) return rc; /* the caller's: fault 0 */
  if (!rd_learner_fpga_supports(c, err)) {
    b->fault = RD_LEARNER_FAULT_UNSUPPORTED;
    return RD_EINVAL;
  }
  fpga_learner_t *l = (fpga_learner_t *)calloc(1, sizeof *l);
  if (l == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the FPGA learner");
  l->config = *c;
  rd_learner_fpga_kernel_config(c, &l->kc);
  lrn_config_pack(&l->kc, l->desc, l->hp);
  rd_learner_policy_spec(c, &l->policy, NULL);
  l->n_params = lrn_params_floats(&l->kc);
  l->n_policy = lrn_n_params(&l->kc.net[0]);
  const size_t B = c->max_batch, ws = lrn_ws_floats(&l->kc);
  int ok = (l->params = alloc_floats(l->n_params)) && (l->target = alloc_floats(l->n_params)) &&
           (l->adam_m = alloc_floats(l->n_params)) && (l->adam_v = alloc_floats(l->n_params)) &&
           (l->ws = alloc_floats(ws)) && (l->ones = alloc_floats(B)) && (l->td = alloc_floats(B));
  if (!ok) {
    const size_t np = l->n_params;
    fpga_free(l);
    b->fault = RD_LEARNER_FAULT_DEVICE;
    return rd_error_set(err, RD_ENOMEM,
                        "FPGA %u: cannot allocate the learner's board buffers (4 x %zu parameter "
                        "floats, %zu workspace floats)",
                        device, np, ws);
  }
  memset(l->adam_m, 0, l->n_params * sizeof(float));
  memset(l->adam_v, 0, l->n_params * sizeof(float));
  for (size_t i = 0; i < B; i++) l->ones[i] = 1.0f;
  rc = rd_learner_fpga_initial_weights(&l->config, l->params, l->target, l->n_params, err);
  if (rc) {
    fpga_free(l);
    return rc;
  }
  b->impl = l;
  return RD_OK;
}

/* RD_ERANGE with the CPU learner's message for what the kernel found. */
int rd_learner_fpga_range_error(const rd_learner_config_t *c, const double *stats,
                                rd_error_t *err) {
  const int dqn = c->algo == RD_ALGO_DQN;
  const int clip = c->grad_clip > 0;
  switch ((int)stats[LRN_ST_FAILED]) {
  case LRN_FAIL_LOSS:
    return rd_error_set(err, RD_ERANGE, "%s loss is %g; step skipped",
                        dqn ? "DQN" : "DDPG critic", stats[LRN_ST_LOSS]);
  case LRN_FAIL_ACTOR_LOSS:
    return rd_error_set(err, RD_ERANGE, "DDPG actor loss is %g; step skipped",
                        stats[LRN_ST_ACTOR_LOSS]);
  case LRN_FAIL_NORM:
  case LRN_FAIL_ACTOR_NORM: {
    const int actor = (int)stats[LRN_ST_FAILED] == LRN_FAIL_ACTOR_NORM;
    const char *who = dqn ? "Q network" : actor ? "actor" : "critic";
    if (clip)
      return rd_error_set(err, RD_ERANGE, "%s gradient norm is not finite; step skipped", who);
    return rd_error_set(err, RD_ERANGE, "%s gradient norm is %g; step skipped", who,
                        stats[actor ? LRN_ST_ACTOR_GRAD_NORM : LRN_ST_GRAD_NORM]);
  }
  default:
    return rd_error_set(err, RD_ERANGE, "the FPGA learner kernel found a non-finite value; "
                                        "step skipped");
  }
}

void rd_learner_fpga_step_stats(const double *stats, rd_step_stats_t *st) {
  memset(st, 0, sizeof *st);
  st->loss = stats[LRN_ST_LOSS];
  st->actor_loss = stats[LRN_ST_ACTOR_LOSS];
  st->td_abs_mean = stats[LRN_ST_TD_MEAN];
  st->td_abs_max = stats[LRN_ST_TD_MAX];
  st->grad_norm = stats[LRN_ST_GRAD_NORM];
}

static int fpga_step(rd_learner_backend_t *b, const rd_batch_t *batch, float *td_abs,
                     rd_step_stats_t *st, rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  int rc = rd_learner_batch_validate(&l->config, batch, err);
  if (rc) return rc;
  double stats[LRN_ST_COUNT];
  const int k = lrn_train_step(l->desc, l->hp, l->steps, (uint32_t)batch->n, l->params,
                               l->target, l->adam_m, l->adam_v, l->ws, batch->obs,
                               batch->action_i, batch->action_f, batch->reward, batch->discount,
                               batch->next_obs, batch->weights ? batch->weights : l->ones,
                               td_abs ? td_abs : l->td, stats);
  if (k == LRN_EINVAL) {
    b->fault = RD_LEARNER_FAULT_DEVICE;
    return rd_error_set(err, RD_EINTERNAL,
                        "the FPGA learner kernel refused a step of %zu rows that the host had "
                        "checked (LRN_EINVAL)",
                        batch->n);
  }
  if (st != NULL) rd_learner_fpga_step_stats(stats, st);
  if (k == LRN_ERANGE) return rd_learner_fpga_range_error(&l->config, stats, err);
  l->steps++;
  return RD_OK;
}

static size_t fpga_policy_bytes(const rd_learner_backend_t *b) {
  const fpga_learner_t *l = (const fpga_learner_t *)b->impl;
  return rd_nn_flat_bytes(&l->policy);
}

/* The policy block is params[0..n_policy) in the flat layout: the same
 * writer as the CPU learner's rd_mlp_save. */
static int fpga_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                            rd_error_t *err) {
  const fpga_learner_t *l = (const fpga_learner_t *)b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  return rd_nn_flat_write(&l->policy, l->params, buf, cap, written, err);
}

/* As the CPU backend's load: the policy network and its target; the
 * critic and the Adam moments stay. */
static int fpga_policy_load(rd_learner_backend_t *b, const void *buf, size_t len,
                            rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  int rc = rd_nn_flat_load(buf, len, &l->policy, l->params, l->n_policy, err);
  if (rc) return rc;
  memcpy(l->target, l->params, l->n_policy * sizeof(float));
  return RD_OK;
}

/* The whole training state in the CPU learner's format (learner.h
 * rd_learner_state_*), so a learner moves between devices through one
 * device-neutral state: a CPU learner of the same config (batch 1, one
 * thread: its state does not depend on either) is the carrier. The board's
 * blocks are the CPU online networks' flat parameters end to end (net 0,
 * then DDPG's critic), targets and Adam moments alike; the kernel's Adam
 * step is steps + 1, so every trainable network's adam_t is steps. */
static int carrier_init(const fpga_learner_t *l, rd_learner_t *cpu, rd_error_t *err) {
  rd_learner_config_t c = l->config;
  c.max_batch = 1;
  c.threads = 1;
  return rd_learner_init(cpu, &c, err);
}

/* dir 0: board -> carrier; 1: carrier -> board. */
static void carrier_copy(fpga_learner_t *l, rd_learner_t *cpu, int dir) {
  size_t off = 0;
  for (int k = 0; k < cpu->n_nets; k += 2) {
    rd_mlp_t *on = &cpu->net[k], *tg = &cpu->net[k + 1];
    const size_t np = rd_mlp_n_params(on), bytes = np * sizeof(float);
    if (dir == 0) {
      memcpy(on->params, l->params + off, bytes);
      memcpy(tg->params, l->target + off, bytes);
      memcpy(on->adam_m, l->adam_m + off, bytes);
      memcpy(on->adam_v, l->adam_v + off, bytes);
      on->adam_t = l->steps;
    } else {
      memcpy(l->params + off, on->params, bytes);
      memcpy(l->target + off, tg->params, bytes);
      memcpy(l->adam_m + off, on->adam_m, bytes);
      memcpy(l->adam_v + off, on->adam_v, bytes);
    }
    off += np;
  }
  if (dir == 0) cpu->steps = l->steps;
  else l->steps = cpu->steps;
}

static size_t fpga_state_bytes(const rd_learner_backend_t *b) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  rd_learner_t cpu;
  rd_error_t err;
  if (carrier_init(l, &cpu, &err) != RD_OK) return 0;
  size_t n = rd_learner_state_bytes(&cpu);
  rd_learner_free(&cpu);
  return n;
}

static int fpga_state_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                           rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  rd_learner_t cpu;
  int rc = carrier_init(l, &cpu, err);
  if (rc) return rc;
  carrier_copy(l, &cpu, 0);
  rc = rd_learner_state_save(&cpu, buf, cap, written, err);
  rd_learner_free(&cpu);
  return rc;
}

/* Refuses (RD_EINVAL, nothing changed) a state the kernel's single step
 * count cannot hold: a trainable network whose Adam count is not the
 * learner's steps. */
static int fpga_state_load(rd_learner_backend_t *b, const void *buf, size_t len,
                           rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  rd_learner_t cpu;
  int rc = carrier_init(l, &cpu, err);
  if (rc) return rc;
  rc = rd_learner_state_load(&cpu, buf, len, err);
  for (int k = 0; rc == RD_OK && k < cpu.n_nets; k += 2)
    if (cpu.net[k].adam_t != cpu.steps)
      rc = rd_error_set(err, RD_EINVAL, "the saved learner's network %d took %llu Adam steps in "
                        "%llu learner steps; the FPGA learner keeps one count", k,
                        (unsigned long long)cpu.net[k].adam_t, (unsigned long long)cpu.steps);
  if (rc == RD_OK) carrier_copy(l, &cpu, 1);
  rd_learner_free(&cpu);
  return rc;
}

static void fpga_destroy(rd_learner_backend_t *b) {
  if (b->impl == NULL) return;
  fpga_free((fpga_learner_t *)b->impl);
  b->impl = NULL;
}

const rd_learner_ops_t rd_learner_ops_fpga = {
    .name = "fpga",
    .kind = RD_LEARNER_ON_FPGA,
    .init = fpga_init,
    .step = fpga_step,
    .policy_bytes = fpga_policy_bytes,
    .policy_save = fpga_policy_save,
    .policy_load = fpga_policy_load,
    .destroy = fpga_destroy,
    .state_bytes = fpga_state_bytes,
    .state_save = fpga_state_save,
    .state_load = fpga_state_load,
};
