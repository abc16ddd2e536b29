/* spec_pb.c - WorkloadSpec (api/replayd.proto) <-> rd_workload_spec_t. */
#include "spec_pb.h"

#include <stdlib.h>
#include <string.h>

#include "learner_spec.h"
#include "pb_opt.h"

/* A wire dtype as core's; an unspecified one is RD_DTYPE_INVALID, which
 * rd_workload_spec_resolve names. Only numbers no dtype has fail here. */
static int map_dtype(Replayd__V1__DType d, size_t i, rd_dtype_t *out, rd_error_t *err) {
  switch (d) {
  case REPLAYD__V1__DTYPE__DTYPE_UNSPECIFIED: *out = RD_DTYPE_INVALID; return RD_OK;
  case REPLAYD__V1__DTYPE__FLOAT32: *out = RD_DTYPE_FLOAT32; return RD_OK;
  case REPLAYD__V1__DTYPE__INT32: *out = RD_DTYPE_INT32; return RD_OK;
  case REPLAYD__V1__DTYPE__INT64: *out = RD_DTYPE_INT64; return RD_OK;
  case REPLAYD__V1__DTYPE__UINT8: *out = RD_DTYPE_UINT8; return RD_OK;
  case REPLAYD__V1__DTYPE__BOOL: *out = RD_DTYPE_BOOL; return RD_OK;
  default:
    return rd_error_set(err, RD_EINVAL, "fields[%zu].dtype %d is not a known dtype", i, (int)d);
  }
}

static int parse_learner(const void *section, const rd_table_config_t *tc, double beta,
                         uint32_t threads, rd_pipeline_config_t *out, rd_error_t *err) {
  return rd_learner_spec_parse(section, tc, beta, threads, out, err);
}

/* s->spec over pb's values (s->fields allocated). */
static int view(const Replayd__V1__WorkloadSpec *pb, rd_spec_pb_t *s, rd_error_t *err) {
  if (pb == NULL) return rd_error_set(err, RD_EINVAL, "no workload spec given");
  if (pb->base.descriptor != &replayd__v1__workload_spec__descriptor)
    return rd_error_set(err, RD_EINVAL, "the spec is not a replayd.v1.WorkloadSpec");
  s->fields = calloc(pb->n_fields ? pb->n_fields : 1, sizeof *s->fields);
  if (s->fields == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory reading the spec");
  for (size_t i = 0; i < pb->n_fields; i++) {
    const Replayd__V1__Field *f = pb->fields[i];
    if (f == NULL) return rd_error_set(err, RD_EINVAL, "fields[%zu] is missing", i);
    int rc = map_dtype(f->dtype, i, &s->fields[i].dtype, err);
    if (rc) return rc;
    s->fields[i].name = f->name;
    s->fields[i].rank = f->n_shape;
    s->fields[i].shape = f->shape;
  }
  rd_workload_spec_t *c = &s->spec;
  c->name = pb->name;
  c->fields = s->fields;
  c->n_fields = pb->n_fields;
  c->capacity = pb->capacity;
  c->fanout = pb->fanout;
  c->max_batch = pb->max_batch;
  c->seed = pb->seed;
  RD_PB_GET_OPT(c, pb, WORKLOAD_SPEC, ALPHA, alpha);
  RD_PB_GET_OPT(c, pb, WORKLOAD_SPEC, EPSILON, epsilon);
  RD_PB_GET_OPT(c, pb, WORKLOAD_SPEC, BETA, beta);
  RD_PB_GET_OPT(c, pb, WORKLOAD_SPEC, MAX_PRIORITY, max_priority);
  c->learner = pb->learner;
  c->learner_parse = pb->learner != NULL ? parse_learner : NULL;
  c->durability = -1;
  if (pb->durability != NULL && pb->durability[0] != '\0' &&
      (c->durability = rd_durability_parse(pb->durability)) < 0)
    return rd_error_set(err, RD_EINVAL, "durability \"%.40s\" is not none, checkpoint or journal",
                        pb->durability);
  c->has_checkpoint_interval = pb->checkpoint_interval_opt_case ==
                               REPLAYD__V1__WORKLOAD_SPEC__CHECKPOINT_INTERVAL_OPT_CHECKPOINT_INTERVAL_S;
  c->checkpoint_interval_s = pb->checkpoint_interval_s;
  const Replayd__V1__RateLimiterSpec *rl = pb->rate_limiter;
  if (rl != NULL) {
    rd_limiter_spec_t *l = &s->limiter;
    l->min_size_to_sample = rl->min_size_to_sample;
    l->samples_per_insert = rl->samples_per_insert;
    RD_PB_GET_OPT(l, rl, RATE_LIMITER_SPEC, MIN_DIFF, min_diff);
    RD_PB_GET_OPT(l, rl, RATE_LIMITER_SPEC, MAX_DIFF, max_diff);
    RD_PB_GET_OPT(l, rl, RATE_LIMITER_SPEC, ERROR_BUFFER, error_buffer);
    c->rate_limiter = l;
  }
  return RD_OK;
}

/* Drop what protobuf-c kept of fields this build does not know, so they
 * are neither stored nor echoed back as if honoured. */
static void drop_unknown_fields(ProtobufCMessage *m) {
  for (size_t i = 0; i < m->n_unknown_fields; i++) free(m->unknown_fields[i].data);
  free(m->unknown_fields);
  m->unknown_fields = NULL;
  m->n_unknown_fields = 0;
}

/* c with every default of wc written out (oneof cases set). */
static int fill_defaults(Replayd__V1__WorkloadSpec *c, const rd_workload_config_t *wc,
                         rd_error_t *err) {
  const rd_table_config_t *tc = &wc->table;
  drop_unknown_fields(&c->base);
  for (size_t i = 0; i < c->n_fields; i++) drop_unknown_fields(&c->fields[i]->base);
  c->capacity = tc->capacity;
  c->fanout = tc->fanout;
  RD_PB_SET_OPT(c, WORKLOAD_SPEC, ALPHA, alpha, tc->alpha);
  RD_PB_SET_OPT(c, WORKLOAD_SPEC, EPSILON, epsilon, tc->epsilon);
  RD_PB_SET_OPT(c, WORKLOAD_SPEC, BETA, beta, wc->beta);
  RD_PB_SET_OPT(c, WORKLOAD_SPEC, MAX_PRIORITY, max_priority, tc->max_priority);
  c->max_batch = tc->max_batch;
  c->seed = tc->seed;
  /* durability and checkpoint_interval_s stay as the client gave them:
   * unset, they follow the server's --durability and
   * --checkpoint-interval-s (Describe's durability says what applies), and
   * specs stored before them keep their bytes. */
  if (c->rate_limiter != NULL) { /* the diffs as resolved; error_buffer folded in */
    Replayd__V1__RateLimiterSpec *rl = c->rate_limiter;
    drop_unknown_fields(&rl->base);
    const double spi = rl->samples_per_insert;
    rl->min_size_to_sample = wc->limiter.min_size_to_sample;
    rl->error_buffer_opt_case = REPLAYD__V1__RATE_LIMITER_SPEC__ERROR_BUFFER_OPT__NOT_SET;
    rl->min_diff_opt_case = REPLAYD__V1__RATE_LIMITER_SPEC__MIN_DIFF_OPT__NOT_SET;
    rl->max_diff_opt_case = REPLAYD__V1__RATE_LIMITER_SPEC__MAX_DIFF_OPT__NOT_SET;
    if (spi > 0) {
      RD_PB_SET_OPT(rl, RATE_LIMITER_SPEC, MIN_DIFF, min_diff, wc->limiter.min_diff);
      RD_PB_SET_OPT(rl, RATE_LIMITER_SPEC, MAX_DIFF, max_diff, wc->limiter.max_diff);
    }
  }
  if (c->learner == NULL) return RD_OK;
  drop_unknown_fields(&c->learner->base);
  return rd_learner_spec_normalise(c->learner, &wc->learner, err);
}

/* The normalised spec, packed into *out (malloc'd). */
static int normalise(const Replayd__V1__WorkloadSpec *pb, const rd_workload_config_t *wc,
                     uint8_t **out, size_t *out_len, rd_error_t *err) {
  /* A deep copy through the wire format: the caller's message stays. */
  size_t len = replayd__v1__workload_spec__get_packed_size(pb);
  uint8_t *buf = malloc(len ? len : 1);
  if (buf == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory copying the spec");
  replayd__v1__workload_spec__pack(pb, buf);
  Replayd__V1__WorkloadSpec *c = replayd__v1__workload_spec__unpack(NULL, len, buf);
  free(buf);
  if (c == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory copying the spec");
  int rc = fill_defaults(c, wc, err);
  if (rc == RD_OK) {
    *out_len = replayd__v1__workload_spec__get_packed_size(c);
    *out = malloc(*out_len ? *out_len : 1);
    if (*out == NULL) rc = rd_error_set(err, RD_ENOMEM, "out of memory storing the spec");
    else replayd__v1__workload_spec__pack(c, *out);
  }
  replayd__v1__workload_spec__free_unpacked(c, NULL);
  return rc;
}

void rd_spec_pb_release(rd_spec_pb_t *s) {
  if (s == NULL) return;
  free(s->fields);
  free(s->stored);
  if (s->owned) replayd__v1__workload_spec__free_unpacked(s->owned, NULL);
  memset(s, 0, sizeof *s);
}

int rd_spec_pb_decode(const rd_config_t *cfg, const Replayd__V1__WorkloadSpec *pb,
                      rd_spec_pb_t *out, rd_error_t *err) {
  memset(out, 0, sizeof *out);
  int rc = view(pb, out, err);
  if (rc == RD_OK) rc = rd_workload_spec_resolve(cfg, &out->spec, &out->config, err);
  if (rc == RD_OK) rc = normalise(pb, &out->config, &out->stored, &out->stored_len, err);
  if (rc) {
    rd_spec_pb_release(out);
    return rc;
  }
  out->spec.stored = out->stored;
  out->spec.stored_len = out->stored_len;
  return RD_OK;
}

Replayd__V1__WorkloadSpec *rd_spec_pb_stored(const uint8_t *bytes, size_t len) {
  return replayd__v1__workload_spec__unpack(NULL, len, bytes);
}

/* ---- Restore ---- */

static int restore_decode(void *arg, const uint8_t *bytes, size_t len, rd_workload_spec_t *spec,
                          void **hold, rd_error_t *err) {
  rd_spec_pb_t *s = malloc(sizeof *s);
  if (s == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory reading its spec");
  Replayd__V1__WorkloadSpec *pb = replayd__v1__workload_spec__unpack(NULL, len, bytes);
  if (pb == NULL) {
    free(s);
    return rd_error_set(err, RD_EINVAL, "its spec does not decode");
  }
  /* Normalised anew: a default added since it was stored is written out. */
  int rc = rd_spec_pb_decode(arg, pb, s, err);
  if (rc) {
    replayd__v1__workload_spec__free_unpacked(pb, NULL);
    free(s);
    return rc;
  }
  s->owned = pb;
  *spec = s->spec;
  *hold = s;
  return RD_OK;
}

static void restore_release(void *hold) {
  rd_spec_pb_release(hold);
  free(hold);
}

rd_spec_decoder_t rd_spec_pb_decoder(const rd_config_t *cfg) {
  rd_spec_decoder_t d = {restore_decode, restore_release, (void *)cfg};
  return d;
}

/* ---- One step ---- */

int rd_spec_pb_config(rd_registry_t *r, const Replayd__V1__WorkloadSpec *pb,
                      rd_table_config_t *tc, rd_pipeline_config_t *pc, int *has_learner,
                      rd_error_t *err) {
  rd_spec_pb_t s;
  int rc = rd_spec_pb_decode(rd_registry_config(r), pb, &s, err);
  if (rc) return rc;
  *tc = s.config.table;
  *pc = s.config.learner;
  *has_learner = s.config.has_learner;
  rd_spec_pb_release(&s);
  return RD_OK;
}

int rd_spec_pb_register(rd_registry_t *r, const Replayd__V1__WorkloadSpec *pb,
                        const rd_placement_t *placement, rd_workload_t **out, rd_error_t *err) {
  if (out) *out = NULL;
  rd_spec_pb_t s;
  int rc = rd_spec_pb_decode(rd_registry_config(r), pb, &s, err);
  if (rc) return rc;
  rc = rd_registry_register(r, &s.spec, placement, out, NULL, err);
  rd_spec_pb_release(&s);
  return rc;
}
