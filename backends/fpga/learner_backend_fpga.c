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
  rd_learner_fpga_shape_t s;
  uint32_t desc[LRN_D_WORDS];
  double hp[LRN_HP_COUNT];
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

int rd_learner_fpga_shape(rd_learner_backend_t *b, const rd_learner_config_t *c,
                          rd_learner_fpga_shape_t *s, rd_error_t *err) {
  int rc = rd_learner_config_validate(c, err);
  if (rc) return rc; /* the caller's: fault 0 */
  if (!rd_learner_fpga_supports(c, err)) {
    b->fault = RD_LEARNER_FAULT_UNSUPPORTED;
    return RD_EINVAL;
  }
  s->config = *c;
  rd_learner_fpga_kernel_config(c, &s->kc);
  rd_learner_policy_spec(c, &s->policy, NULL);
  s->n_params = lrn_params_floats(&s->kc);
  s->n_policy = lrn_n_params(&s->kc.net[0]);
  return RD_OK;
}

static float *alloc_floats(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) return NULL;
  return (float *)p;
}

static void fpga_free(void *p) {
  fpga_learner_t *l = p;
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
  rd_learner_fpga_shape_t shape;
  int rc = rd_learner_fpga_shape(b, c, &shape, err);
  if (rc) return rc;
  fpga_learner_t *l = (fpga_learner_t *)calloc(1, sizeof *l);
  if (l == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the FPGA learner");
  l->s = shape;
  lrn_config_pack(&l->s.kc, l->desc, l->hp);
  const size_t B = c->max_batch, ws = lrn_ws_floats(&l->s.kc);
  int ok = (l->params = alloc_floats(l->s.n_params)) && (l->target = alloc_floats(l->s.n_params)) &&
           (l->adam_m = alloc_floats(l->s.n_params)) && (l->adam_v = alloc_floats(l->s.n_params)) &&
           (l->ws = alloc_floats(ws)) && (l->ones = alloc_floats(B)) && (l->td = alloc_floats(B));
  if (!ok) {
    const size_t np = l->s.n_params;
    fpga_free(l);
    b->fault = RD_LEARNER_FAULT_DEVICE;
    return rd_error_set(err, RD_ENOMEM,
                        "FPGA %u: cannot allocate the learner's board buffers (4 x %zu parameter "
                        "floats, %zu workspace floats)",
                        device, np, ws);
  }
  memset(l->adam_m, 0, l->s.n_params * sizeof(float));
  memset(l->adam_v, 0, l->s.n_params * sizeof(float));
  for (size_t i = 0; i < B; i++) l->ones[i] = 1.0f;
  rc = rd_learner_fpga_initial_weights(&l->s.config, l->params, l->target, l->s.n_params, err);
  return rd_learner_backend_adopt(b, l, rc, fpga_free);
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
  int rc = rd_learner_batch_validate(&l->s.config, batch, err);
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
  if (k == LRN_ERANGE) return rd_learner_fpga_range_error(&l->s.config, stats, err);
  l->steps++;
  return RD_OK;
}

static size_t fpga_policy_bytes(const rd_learner_backend_t *b) {
  const fpga_learner_t *l = (const fpga_learner_t *)b->impl;
  return rd_nn_flat_bytes(&l->s.policy);
}

/* The policy block is params[0..n_policy) in the flat layout: the same
 * writer as the CPU learner's rd_mlp_save. */
static int fpga_policy_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                            rd_error_t *err) {
  const fpga_learner_t *l = (const fpga_learner_t *)b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  return rd_nn_flat_write(&l->s.policy, l->params, buf, cap, written, err);
}

/* As the CPU backend's load: the policy network and its target; the
 * critic and the Adam moments stay. */
static int fpga_policy_load(rd_learner_backend_t *b, const void *buf, size_t len,
                            rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  int rc = rd_nn_flat_load(buf, len, &l->s.policy, l->params, l->s.n_policy, err);
  if (rc) return rc;
  memcpy(l->target, l->params, l->s.n_policy * sizeof(float));
  return RD_OK;
}

/* ---- training state (checkpoints) ----
 *
 * Saved in the CPU learner's format (learner.h rd_learner_state_*), so a
 * checkpoint is device-neutral: a CPU learner of the same config reads an
 * FPGA learner's state and the other way round (learner.h
 * rd_learner_state_*_arrays). The board's state is params, target, adam_m
 * and adam_v (the online networks' blocks in the CPU networks' flat order,
 * as rd_learner_fpga_initial_weights lays them out) and the step count,
 * which is also Adam's step (the kernel's bias correction) of every online
 * network; the workspace holds nothing across steps. A host reads these
 * buffers back from the board to save them and writes them to load (here:
 * this instance's heap). */

void rd_learner_fpga_state_arrays(const rd_learner_fpga_shape_t *s, float *params, float *target,
                                  float *adam_m, float *adam_v, uint64_t steps,
                                  rd_learner_state_arrays_t *a) {
  memset(a, 0, sizeof *a);
  const size_t at[2] = {0, s->n_policy};
  const int nets = s->config.algo == RD_ALGO_DDPG ? 4 : 2;
  for (int k = 0; k < nets; k += 2) {
    a->params[k] = params + at[k / 2];
    a->params[k + 1] = target + at[k / 2];
    a->adam_m[k] = adam_m + at[k / 2];
    a->adam_v[k] = adam_v + at[k / 2];
    a->adam_t[k] = steps;
  }
  a->steps = steps;
}

static void state_arrays(fpga_learner_t *l, rd_learner_state_arrays_t *a) {
  rd_learner_fpga_state_arrays(&l->s, l->params, l->target, l->adam_m, l->adam_v, l->steps, a);
}

static size_t fpga_state_bytes(const rd_learner_backend_t *b) {
  return rd_learner_state_bytes_for(&((const fpga_learner_t *)b->impl)->s.config);
}

static int fpga_state_save(rd_learner_backend_t *b, void *buf, size_t cap, size_t *written,
                           rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  rd_learner_state_arrays_t a;
  state_arrays(l, &a);
  return rd_learner_state_save_arrays(&l->s.config, &a, buf, cap, written, err);
}

/* Checked whole before a byte of the board's buffers changes: a bad
 * buffer leaves the learner as it was. */
static int fpga_state_load(rd_learner_backend_t *b, const void *buf, size_t len,
                           rd_error_t *err) {
  fpga_learner_t *l = (fpga_learner_t *)b->impl;
  b->fault = RD_LEARNER_FAULT_NONE;
  rd_learner_state_arrays_t a;
  state_arrays(l, &a);
  int rc = rd_learner_state_load_arrays(&l->s.config, buf, len, &a, err);
  if (rc == RD_OK) l->steps = a.steps;
  return rc;
}

static void fpga_destroy(rd_learner_backend_t *b) { rd_learner_backend_release(b, fpga_free); }

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
