/* learner_bind.c - schema fields -> the hosted learner's inputs
 * (learner_bind.h). */
#include "learner_bind.h"

#include <string.h>

#include "nn.h"

static size_t field_elems(const rd_field_t *f) {
  size_t e = 1;
  for (uint32_t d = 0; d < f->rank; d++) e *= f->shape[d];
  return e;
}

static int want_field(const rd_schema_t *s, const char *name, rd_dtype_t dtype, int scalar,
                      int *idx, size_t *elems, rd_error_t *err) {
  int i = rd_schema_find(s, name);
  if (i < 0)
    return rd_error_set(err, RD_EINVAL, "learner: the schema has no field \"%s\" (%s%s)", name,
                        rd_dtype_name(dtype), scalar ? " scalar" : "");
  const rd_field_t *f = &s->fields[i];
  if (f->dtype != dtype || (scalar && f->rank != 0))
    return rd_error_set(err, RD_EINVAL, "learner: field \"%s\" is %s of rank %u; the learner "
                        "needs %s%s", name, rd_dtype_name(f->dtype), f->rank,
                        rd_dtype_name(dtype), scalar ? " scalar" : "");
  *idx = i;
  if (elems) *elems = field_elems(f);
  return RD_OK;
}

int rd_pipeline_bind_schema(rd_pipeline_config_t *c, const rd_schema_t *s, rd_error_t *err) {
  size_t obs = 0, next = 0, act = 0;
  int rc;
  if ((rc = want_field(s, "obs", RD_DTYPE_FLOAT32, 0, &c->f_obs, &obs, err))) return rc;
  if ((rc = want_field(s, "next_obs", RD_DTYPE_FLOAT32, 0, &c->f_next_obs, &next, err)))
    return rc;
  if (next != obs || s->fields[c->f_obs].rank != s->fields[c->f_next_obs].rank)
    return rd_error_set(err, RD_EINVAL, "learner: next_obs must have the shape of obs");
  if (obs > RD_NN_MAX_UNITS)
    return rd_error_set(err, RD_EINVAL, "learner: obs has %zu elements; at most %u", obs,
                        RD_NN_MAX_UNITS);
  if ((rc = want_field(s, "reward", RD_DTYPE_FLOAT32, 1, &c->f_reward, NULL, err))) return rc;
  if (c->learner.algo == RD_ALGO_DQN) {
    if ((rc = want_field(s, "action", RD_DTYPE_INT32, 1, &c->f_action, NULL, err))) return rc;
  } else {
    if ((rc = want_field(s, "action", RD_DTYPE_FLOAT32, 0, &c->f_action, &act, err))) return rc;
    if (act > RD_NN_MAX_UNITS)
      return rd_error_set(err, RD_EINVAL, "learner: action has %zu elements; at most %u", act,
                          RD_NN_MAX_UNITS);
    c->learner.action_dim = (uint32_t)act;
  }
  c->f_discount = rd_schema_find(s, "discount");
  c->f_done = rd_schema_find(s, "done");
  if (c->f_discount >= 0) {
    if ((rc = want_field(s, "discount", RD_DTYPE_FLOAT32, 1, &c->f_discount, NULL, err)))
      return rc;
    c->f_done = -1; /* discount wins: it already carries gamma^n */
  } else if (c->f_done >= 0) {
    if ((rc = want_field(s, "done", RD_DTYPE_BOOL, 1, &c->f_done, NULL, err))) return rc;
  } else {
    return rd_error_set(err, RD_EINVAL, "learner: the schema needs a \"discount\" field "
                        "(float32 scalar, gamma^n or 0) or a \"done\" field (bool scalar)");
  }
  c->learner.obs_dim = (uint32_t)obs;
  return RD_OK;
}

int rd_learner_bind_is_field(const rd_pipeline_config_t *c, int f) {
  return f == c->f_obs || f == c->f_action || f == c->f_reward || f == c->f_next_obs ||
         f == c->f_discount || f == c->f_done;
}

int rd_learner_bind_check(const rd_pipeline_config_t *c, uint32_t n_fields, rd_error_t *err) {
  const int fs[5] = {c->f_obs, c->f_action, c->f_reward, c->f_next_obs,
                     c->f_discount >= 0 ? c->f_discount : c->f_done};
  for (int i = 0; i < 5; i++)
    if (fs[i] < 0 || (uint32_t)fs[i] >= n_fields)
      return rd_error_set(err, RD_EINVAL, "learner fields are not bound to the schema");
  return RD_OK;
}

void rd_learner_bind_discount(const rd_pipeline_config_t *c, size_t n, const rd_buf_t *cols,
                              float *discount) {
  if (c->f_done < 0) return;
  const uint8_t *done = cols[c->f_done].data;
  for (size_t i = 0; i < n; i++) discount[i] = done[i] ? 0.0f : c->gamma;
}

void rd_learner_bind_batch(const rd_pipeline_config_t *c, size_t n, const rd_buf_t *cols,
                           const float *discount, const float *w, rd_batch_t *b) {
  memset(b, 0, sizeof *b);
  b->n = n;
  b->obs = cols[c->f_obs].data;
  b->next_obs = cols[c->f_next_obs].data;
  b->reward = cols[c->f_reward].data;
  b->discount = c->f_done >= 0 ? discount : cols[c->f_discount].data;
  if (c->learner.algo == RD_ALGO_DQN)
    b->action_i = cols[c->f_action].data;
  else
    b->action_f = cols[c->f_action].data;
  b->weights = w;
}

void rd_learner_bind_input_bytes(const rd_pipeline_config_t *c, size_t n, size_t bytes[6]) {
  const size_t obs = n * c->learner.obs_dim * sizeof(float);
  bytes[0] = obs;
  bytes[1] = obs;
  bytes[2] = n * sizeof(float);
  bytes[3] = c->learner.algo == RD_ALGO_DQN ? n * sizeof(int32_t)
                                            : n * c->learner.action_dim * sizeof(float);
  bytes[4] = n * sizeof(float);
  bytes[5] = n * sizeof(float);
}
