/* profile_key.c - what a profile is keyed by (profile.h): primitive and
 * source names, this build, the thread counts measured, and a workload's
 * shape and its key. */
#include "profile.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "rd_build_info.h"

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

static const char *const prim_names[RD_PRIM_COUNT] = {"sample", "update", "train",
                                                      "gather", "handoff", "pass"};
static const char *const source_names[] = {"measured", "imported"};

const char *rd_primitive_name(rd_primitive_t p) {
  return (unsigned)p < RD_PRIM_COUNT ? prim_names[p] : "invalid";
}

int rd_primitive_parse(const char *s, rd_primitive_t *out, rd_error_t *err) {
  for (int i = 0; i < RD_PRIM_COUNT; i++)
    if (s != NULL && strcmp(s, prim_names[i]) == 0) {
      *out = (rd_primitive_t)i;
      return RD_OK;
    }
  return rd_error_set(err, RD_EINVAL, "primitive \"%.32s\" is not sample, update or train",
                      s ? s : "");
}

const char *rd_profile_source_name(rd_profile_source_t s) {
  return (unsigned)s < 2 ? source_names[s] : "invalid";
}

int rd_profile_source_parse(const char *s, rd_profile_source_t *out, rd_error_t *err) {
  for (int i = 0; i < 2; i++)
    if (s != NULL && strcmp(s, source_names[i]) == 0) {
      *out = (rd_profile_source_t)i;
      return RD_OK;
    }
  return rd_error_set(err, RD_EINVAL, "source \"%.32s\" is not measured or imported", s ? s : "");
}

const char *rd_profile_build(void) { return RD_BUILD_VERSION " " RD_BUILD_ID; }

size_t rd_profile_default_threads(uint32_t cores, uint32_t *out, size_t cap) {
  size_t n = 0;
  if (cores == 0) cores = 1;
  if (cores > RD_MLP_MAX_THREADS) cores = RD_MLP_MAX_THREADS;
  for (uint32_t t = 1; t < cores && n < cap; t *= 2) out[n++] = t;
  if (n < cap) out[n++] = cores;
  return n;
}

/* ------------------------------------------------------------------ */
/* Shapes and keys                                                     */
/* ------------------------------------------------------------------ */

static bool power_of_two(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Append "a-b-c" (the spec's sizes) to buf at *pos. */
static void append_sizes(char *buf, size_t cap, size_t *pos, const rd_nn_spec_t *s) {
  for (uint32_t l = 0; l <= s->n_layers && *pos < cap; l++) {
    int w = snprintf(buf + *pos, cap - *pos, l ? "-%u" : "%u", s->sizes[l]);
    *pos = w < 0 ? cap : *pos + (size_t)w;
  }
}

int rd_profile_shape_init(rd_profile_shape_t *out, const rd_table_config_t *tc,
                          const rd_pipeline_config_t *pc, uint32_t batch, rd_error_t *err) {
  rd_profile_shape_t s;
  memset(&s, 0, sizeof s);
  if (tc == NULL) return rd_error_set(err, RD_EINVAL, "a profile shape needs a table config");
  if (batch == 0 && pc != NULL) batch = pc->batch;
  s.key.batch = batch;
  s.key.capacity = tc->capacity;
  s.key.fanout = tc->fanout;
  s.row_bytes = (uint32_t)rd_schema_row_bytes(&tc->schema);
  s.alpha = tc->alpha;
  if (pc == NULL) {
    snprintf(s.key.algorithm, sizeof s.key.algorithm, "none");
  } else {
    s.has_learner = 1;
    s.learner = pc->learner;
    s.learner_pin = pc->learner_pin;
    s.sampler_pin = pc->sampler_pin;
    /* The fields the storage unit gathers (pipeline.c's gather), once the
     * config is bound to the schema (obs and next_obs are two fields);
     * unbound, gather takes the row as one column. */
    const int fields[] = {pc->f_obs, pc->f_action, pc->f_reward, pc->f_next_obs,
                          pc->f_done >= 0 ? pc->f_done : pc->f_discount};
    for (size_t i = 0; pc->f_obs != pc->f_next_obs && i < sizeof fields / sizeof fields[0]; i++)
      if (fields[i] >= 0 && (uint32_t)fields[i] < tc->schema.n_fields)
        s.col_bytes[s.n_cols++] = (uint32_t)rd_field_bytes(&tc->schema.fields[fields[i]]);
    s.learner.threads = 1; /* set per measured thread count */
    if (s.learner.max_batch < batch) s.learner.max_batch = batch;
    int rc = rd_learner_config_validate(&s.learner, err);
    if (rc) return rc;
    rd_nn_spec_t policy, critic;
    rd_learner_policy_spec(&s.learner, &policy, NULL);
    bool dqn = s.learner.algo == RD_ALGO_DQN;
    snprintf(s.key.algorithm, sizeof s.key.algorithm, "%s", dqn ? "dqn" : "ddpg");
    size_t pos = (size_t)snprintf(s.key.network, sizeof s.key.network, "%s:", s.key.algorithm);
    append_sizes(s.key.network, sizeof s.key.network, &pos, &policy);
    if (!dqn) {
      rd_learner_critic_spec(&s.learner, &critic, NULL);
      if (pos < sizeof s.key.network) s.key.network[pos++] = '/';
      s.key.network[pos < sizeof s.key.network ? pos : sizeof s.key.network - 1] = '\0';
      append_sizes(s.key.network, sizeof s.key.network, &pos, &critic);
    }
    if (pos >= sizeof s.key.network)
      return rd_error_set(err, RD_EINVAL,
                          "the network has too many layers to name in a profile (%zu characters)",
                          sizeof s.key.network - 1);
  }
  int rc = rd_profile_key_validate(&s.key, err);
  if (rc) return rc;
  *out = s;
  return RD_OK;
}

/* "a-b-c" of 2..RD_NN_MAX_LAYERS+1 positive sizes; *end is where it stops. */
static bool valid_sizes(const char *p, const char **end) {
  int n = 0;
  for (;;) {
    if (*p < '1' || *p > '9') return false;
    unsigned long v = 0;
    while (*p >= '0' && *p <= '9' && v <= RD_NN_MAX_UNITS) v = v * 10 + (unsigned long)(*p++ - '0');
    if (v > RD_NN_MAX_UNITS) return false;
    n++;
    if (*p != '-') break;
    p++;
  }
  *end = p;
  return n >= 2 && n <= RD_NN_MAX_LAYERS + 1;
}

int rd_profile_key_validate(const rd_profile_key_t *k, rd_error_t *err) {
  if (k->batch == 0 || k->batch > RD_TABLE_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "profile batch %u is outside [1, %u]", k->batch,
                        RD_TABLE_MAX_BATCH);
  if (k->capacity == 0 || k->capacity > RD_SUMTREE_MAX_CAPACITY)
    return rd_error_set(err, RD_EINVAL, "profile capacity %u is outside [1, %u]", k->capacity,
                        RD_SUMTREE_MAX_CAPACITY);
  if (k->batch > k->capacity)
    return rd_error_set(err, RD_EINVAL, "profile batch %u is above the capacity %u", k->batch,
                        k->capacity);
  if (!power_of_two(k->fanout) || k->fanout < RD_SUMTREE_MIN_FANOUT ||
      k->fanout > RD_SUMTREE_MAX_FANOUT)
    return rd_error_set(err, RD_EINVAL, "profile fanout %u is not a power of two in [%u, %u]",
                        k->fanout, RD_SUMTREE_MIN_FANOUT, RD_SUMTREE_MAX_FANOUT);
  size_t al = strnlen(k->algorithm, sizeof k->algorithm);
  size_t nl = strnlen(k->network, sizeof k->network);
  if (al == sizeof k->algorithm || nl == sizeof k->network)
    return rd_error_set(err, RD_EINVAL, "profile algorithm or network is not terminated");
  bool dqn = strcmp(k->algorithm, "dqn") == 0, ddpg = strcmp(k->algorithm, "ddpg") == 0;
  if (strcmp(k->algorithm, "none") == 0) {
    if (nl != 0)
      return rd_error_set(err, RD_EINVAL,
                          "profile algorithm \"none\" has no network, not \"%.40s\"", k->network);
    return RD_OK;
  }
  if (!dqn && !ddpg)
    return rd_error_set(err, RD_EINVAL, "profile algorithm \"%.8s\" is not dqn, ddpg or none",
                        k->algorithm);
  /* dqn:SIZES or ddpg:SIZES/SIZES */
  const char *p = k->network;
  bool ok = strncmp(p, k->algorithm, al) == 0 && p[al] == ':';
  if (ok) ok = valid_sizes(p + al + 1, &p);
  if (ok && ddpg) ok = *p == '/' && valid_sizes(p + 1, &p);
  if (!ok || *p != '\0')
    return rd_error_set(err, RD_EINVAL,
                        "profile network \"%.60s\" is not \"%s:%s\" with layer sizes 1..%u",
                        k->network, k->algorithm, dqn ? "A-B-..." : "A-B-.../C-D-...",
                        RD_NN_MAX_UNITS);
  return RD_OK;
}

int rd_profile_key_equal(const rd_profile_key_t *a, const rd_profile_key_t *b) {
  return a->batch == b->batch && a->capacity == b->capacity && a->fanout == b->fanout &&
         strncmp(a->algorithm, b->algorithm, sizeof a->algorithm) == 0 &&
         strncmp(a->network, b->network, sizeof a->network) == 0;
}