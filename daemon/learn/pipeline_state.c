/* pipeline_state.c - a hosted learner's checkpoint: save and load its
 * state on the learner thread (pipeline.h "Checkpoints").
 *
 * The saved bytes (inside a checkpoint's learner section, durable.h):
 *   u32 "RDPS", u32 version, u32 flags (1: a full training state follows
 *   the policy), u32 0, u64 weight version, steps, skipped steps, late
 *   updates, f64 loss, u64 0 and u64 0 (once continuous mode's count; the
 *   table's rate limiter keeps it now, durable.c),
 *   u64 policy bytes, u64 state bytes, then the policy (flat format) and
 *   the state (learner.h rd_learner_state_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner_unit.h"
#include "log.h"
#include "pipeline.h"
#include "pipeline_internal.h"
#include "sampler_unit.h"
#include "share.h"

#define PS_MAGIC 0x53504452u /* "RDPS" */
#define PS_VERSION 1u
#define PS_HEAD 88u
#define PS_FULL 1u

/* Run fn on the learner thread between steps, or here when no learner
 * thread runs (before the threads start, or once they are joined). */
static int on_learner(rd_pipeline_t *p, int (*fn)(rd_pipeline_t *, void *, rd_error_t *),
                      void *arg, rd_error_t *err) {
  pthread_mutex_lock(&p->call_mu);
  pthread_mutex_lock(&p->mu);
  int rc;
  if (p->started == 2) {
    p->lcall.fn = fn;
    p->lcall.arg = arg;
    p->lcall.err = err;
    p->lcall.done = 0;
    p->lcall.pending = 1;
    rd_pl_wake_learner(p);
    while (!p->lcall.done && p->started == 2) pthread_cond_wait(&p->cv_call, &p->mu);
  }
  if (p->started == 2 || p->lcall.done) {
    rc = p->lcall.rc;
    p->lcall.done = 0;
    pthread_mutex_unlock(&p->mu);
  } else { /* no learner thread (any more): nobody else touches the learner */
    p->lcall.pending = 0;
    pthread_mutex_unlock(&p->mu);
    rc = fn(p, arg, err);
  }
  pthread_mutex_unlock(&p->call_mu);
  return rc;
}

size_t rd_pipeline_state_bytes(rd_pipeline_t *p) {
  rd_nn_spec_t ps;
  size_t policy = rd_learner_policy_spec(&p->cfg.learner, &ps, NULL) == RD_OK
                      ? rd_nn_flat_bytes(&ps) : 0;
  /* The CPU learner's state: every network's state at most 3x its
   * parameters plus headers; DDPG has a critic too. A bound from the
   * config, whatever backend runs now. */
  size_t state = 0;
  rd_nn_spec_t cs;
  state += 3 * policy * 2 + 256;
  if (p->cfg.learner.algo == RD_ALGO_DDPG &&
      rd_learner_critic_spec(&p->cfg.learner, &cs, NULL) == RD_OK)
    state += 3 * rd_nn_flat_bytes(&cs) * 2 + 256;
  return PS_HEAD + policy + state;
}

typedef struct {
  void *buf;
  size_t cap, len;
  int full;
} save_t;

static int save_fn(rd_pipeline_t *p, void *arg, rd_error_t *err) {
  save_t *sv = arg;
  rd_learner_backend_t *b = &p->learner;
  if (b->impl == NULL)
    return rd_error_set(err, RD_ESTATE, "this workload has no learner to save: %s",
                        p->linfo.reason);
  uint8_t *o = sv->buf;
  size_t policy = b->ops->policy_bytes(b);
  if (sv->cap < PS_HEAD + policy)
    return rd_error_set(err, RD_ETOOBIG, "the learner's state needs more than %zu bytes", sv->cap);
  size_t w = 0, state = 0;
  int rc = b->ops->policy_save(b, o + PS_HEAD, policy, &w, err);
  if (rc) return rc;
  if (b->ops->state_save != NULL) {
    size_t need = b->ops->state_bytes(b);
    if (sv->cap - PS_HEAD - policy < need)
      return rd_error_set(err, RD_ETOOBIG, "the learner's state needs %zu bytes",
                          PS_HEAD + policy + need);
    rc = b->ops->state_save(b, o + PS_HEAD + policy, need, &state, err);
    if (rc) return rc;
  }
  pthread_mutex_lock(&p->mu);
  rd_pipeline_stats_t st = p->stats;
  pthread_mutex_unlock(&p->mu);
  /* Two words once held continuous mode's count; the table's rate limiter
   * keeps it now (the checkpoint's limiter section). */
  uint64_t ready = 0, ins = 0;
  uint32_t head[4] = {PS_MAGIC, PS_VERSION, state ? PS_FULL : 0, 0};
  memcpy(o, head, 16);
  uint64_t u[4] = {st.weight_version, st.steps, st.skipped_steps, st.late_updates};
  memcpy(o + 16, u, 32);
  memcpy(o + 48, &st.loss, 8);
  uint64_t v[4] = {ready, ins, policy, state};
  memcpy(o + 56, v, 32);
  sv->len = PS_HEAD + policy + state;
  sv->full = state != 0;
  return RD_OK;
}

int rd_pipeline_state_save(rd_pipeline_t *p, void *buf, size_t cap, size_t *len, int *full,
                           rd_error_t *err) {
  save_t sv = {buf, cap, 0, 0};
  int rc = on_learner(p, save_fn, &sv, err);
  if (rc) return rc;
  *len = sv.len;
  if (full) *full = sv.full;
  return RD_OK;
}

/* A saved state, parsed. */
typedef struct {
  uint32_t flags;
  uint64_t version, steps, skipped, late, ready, inserted;
  double loss;
  const uint8_t *policy, *state;
  size_t policy_len, state_len;
} saved_t;

static int parse(const void *buf, size_t len, saved_t *s, rd_error_t *err) {
  const uint8_t *b = buf;
  uint32_t head[4];
  if (len < PS_HEAD) return rd_error_set(err, RD_EINVAL, "the saved learner is truncated");
  memcpy(head, b, 16);
  if (head[0] != PS_MAGIC) return rd_error_set(err, RD_EINVAL, "not a saved learner");
  if (head[1] != PS_VERSION)
    return rd_error_set(err, RD_EINVAL, "saved learner version %u; this build reads %u", head[1],
                        PS_VERSION);
  uint64_t u[4], v[4];
  memcpy(u, b + 16, 32);
  memcpy(&s->loss, b + 48, 8);
  memcpy(v, b + 56, 32);
  s->flags = head[2];
  s->version = u[0];
  s->steps = u[1];
  s->skipped = u[2];
  s->late = u[3];
  s->ready = v[0];
  s->inserted = v[1];
  if (v[2] > len - PS_HEAD || v[3] != len - PS_HEAD - v[2] || (v[3] == 0) != !(head[2] & PS_FULL))
    return rd_error_set(err, RD_EINVAL, "the saved learner's sizes do not add up");
  s->policy = b + PS_HEAD;
  s->policy_len = (size_t)v[2];
  s->state = s->policy + s->policy_len;
  s->state_len = (size_t)v[3];
  return RD_OK;
}

/* Check s against the learner that runs (learner thread). */
static int check(rd_pipeline_t *p, const saved_t *s, rd_error_t *err) {
  rd_nn_spec_t want;
  int rc = rd_learner_policy_spec(&p->cfg.learner, &want, err);
  if (rc) return rc;
  rd_error_t e;
  rd_error_clear(&e);
  rc = rd_nn_flat_load(s->policy, s->policy_len, &want, NULL, 0, &e);
  if (rc) return rd_error_set(err, RD_EINVAL, "the saved policy does not fit this learner: %s",
                              e.msg);
  if (s->state_len > 0 && p->learner.ops == &rd_learner_ops_cpu && p->learner.impl != NULL) {
    rc = rd_learner_state_check(p->learner.impl, s->state, s->state_len, err);
    if (rc) return rc;
  }
  return RD_OK;
}

typedef struct {
  const void *buf;
  size_t len;
  uint64_t floor;
  int check_only, policy_only;
} load_t;

static int load_fn(rd_pipeline_t *p, void *arg, rd_error_t *err) {
  load_t *ld = arg;
  saved_t s;
  memset(&s, 0, sizeof s);
  int rc = parse(ld->buf, ld->len, &s, err);
  if (rc == RD_OK) rc = check(p, &s, err);
  if (rc || ld->check_only) return rc;
  rd_learner_backend_t *b = &p->learner;
  if (b->impl == NULL)
    return rd_error_set(err, RD_ESTATE, "this workload has no learner to load into");
  ld->policy_only = 1;
  if (s.state_len > 0 && b->ops->state_load != NULL) {
    rc = b->ops->state_load(b, s.state, s.state_len, err);
    if (rc) return rc;
    ld->policy_only = 0;
  } else if (b->ops->policy_load != NULL) {
    rc = b->ops->policy_load(b, s.policy, s.policy_len, err);
    if (rc) return rc;
  } else {
    rd_log_warn("pipeline", "the %s learner cannot load saved weights: it starts again from "
                "its initial weights (the weight version continues)", b->ops->name);
  }
  if (ld->policy_only && s.state_len == 0 && b->ops->state_load != NULL)
    rd_log_info("pipeline", "the checkpoint holds the policy only (saved from a learner "
                "without state ops): the target networks and optimiser state start again");
  pthread_mutex_lock(&p->mu);
  p->stats.steps = s.steps;
  p->stats.skipped_steps = s.skipped;
  p->stats.late_updates = s.late;
  p->stats.loss = s.loss;
  p->window_steps = s.steps;
  pthread_mutex_unlock(&p->mu);
  uint64_t floor = s.version > ld->floor ? s.version : ld->floor;
  if (floor > rd_weights_buf_version(&p->weights)) rd_weights_buf_set_version(&p->weights, floor);
  rd_learner_unit_publish(p);
  return RD_OK;
}

int rd_pipeline_state_check(rd_pipeline_t *p, const void *buf, size_t len, rd_error_t *err) {
  load_t ld = {buf, len, 0, 1, 0};
  return on_learner(p, load_fn, &ld, err);
}

int rd_pipeline_state_load(rd_pipeline_t *p, const void *buf, size_t len, uint64_t version_floor,
                           int *policy_only, rd_error_t *err) {
  load_t ld = {buf, len, version_floor, 0, 0};
  int rc = on_learner(p, load_fn, &ld, err);
  if (rc == RD_OK && policy_only) *policy_only = ld.policy_only;
  return rc;
}

static int floor_fn(rd_pipeline_t *p, void *arg, rd_error_t *err) {
  (void)err;
  uint64_t floor = *(const uint64_t *)arg;
  if (floor > rd_weights_buf_version(&p->weights)) rd_weights_buf_set_version(&p->weights, floor);
  rd_learner_unit_publish(p);
  return RD_OK;
}

int rd_pipeline_version_floor(rd_pipeline_t *p, uint64_t floor, rd_error_t *err) {
  return on_learner(p, floor_fn, &floor, err);
}

/* ---- Moving the learner (rd_pipeline_move_learner) ---- */

typedef struct {
  const rd_learner_ops_t *ops;
  uint32_t device;
} move_t;

static int move_fn(rd_pipeline_t *p, void *arg, rd_error_t *err) {
  const move_t *mv = arg;
  rd_learner_backend_t *old = &p->learner;
  if (old->impl == NULL)
    return rd_error_set(err, RD_ESTATE, "this workload has no learner to move: %s",
                        p->linfo.reason);
  if (old->ops->state_save == NULL || mv->ops->state_load == NULL)
    return rd_error_set(err, RD_ESTATE, "the %s learner cannot move to %s%u without losing its "
                        "training state (%s has no state ops)", old->ops->name,
                        rd_learner_kind_name(mv->ops->kind), mv->device,
                        old->ops->state_save == NULL ? old->ops->name : mv->ops->name);
  const uint32_t dev = mv->ops->kind == RD_LEARNER_ON_CPU ? 0 : mv->device;
  rd_learner_backend_t nb;
  memset(&nb, 0, sizeof nb);
  int rc = rd_learner_backend_init(&nb, mv->ops, &p->cfg.learner, dev, err);
  if (rc) return rc;
  nb.device = dev;
  size_t cap = old->ops->state_bytes(old), len = 0;
  void *buf = malloc(cap ? cap : 1);
  if (buf == NULL) rc = rd_error_set(err, RD_ENOMEM, "out of memory moving the learner");
  if (rc == RD_OK) rc = old->ops->state_save(old, buf, cap, &len, err);
  if (rc == RD_OK) rc = mv->ops->state_load(&nb, buf, len, err);
  free(buf);
  /* Its device share moves with it (share.h): the new device's pool, or
   * the sampler's share when the sampler already runs there. */
  rd_share_t *ns = p->share;
  if (rc == RD_OK && p->share != NULL) {
    rd_share_pool_t *np = rd_share_pool_device(mv->ops->kind, dev);
    if (np == NULL) {
      rc = rd_error_set(err, RD_ENOMEM, "out of memory for the device share");
    } else if (np == rd_share_pool_of(p->sampler_share)) {
      ns = p->sampler_share;
    } else if (np != rd_share_pool_of(p->share)) {
      ns = rd_share_join(np, p->cfg.share_group, p->cfg.share_weight);
      if (ns == NULL) rc = rd_error_set(err, RD_ENOMEM, "out of memory for the device share");
      else rd_share_pool_set_conserving(np, p->cfg.share_conserving);
    }
  }
  if (rc) {
    rd_learner_backend_destroy(&nb);
    return rc;
  }
  rd_learner_backend_destroy(old);
  *old = nb;
  pthread_mutex_lock(&p->mu);
  /* The sampler reads p->share under p->mu; the learner's bursts run on
   * this thread, so no burst holds the old share now. */
  if (ns != p->share) {
    rd_share_t *was = p->share;
    p->share = ns;
    if (was != p->sampler_share) rd_share_leave(was);
  }
  p->linfo.requested = mv->ops->kind;
  p->linfo.kind = mv->ops->kind;
  p->linfo.device = dev;
  p->linfo.fell_back = 0;
  p->linfo.at_init = 0;
  p->linfo.reason[0] = '\0';
  snprintf(p->linfo.backend, sizeof p->linfo.backend, "%s", mv->ops->name);
  pthread_mutex_unlock(&p->mu);
  rd_sampler_unit_lend(p, 1);
  return RD_OK;
}

int rd_pipeline_move_learner(rd_pipeline_t *p, const rd_learner_ops_t *ops, uint32_t device,
                             rd_error_t *err) {
  if (ops == NULL) return rd_error_set(err, RD_EINVAL, "no learner backend to move to");
  move_t mv = {ops, device};
  return on_learner(p, move_fn, &mv, err);
}
