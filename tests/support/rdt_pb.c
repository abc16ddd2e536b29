/* rdt_pb.c - WorkloadSpec messages for tests (rdt_pb.h). */
#include "rdt_pb.h"

#include <stdio.h>
#include <string.h>

void rdt_pb_spec_init(rdt_pb_spec_t *s, const char *name, uint32_t capacity) {
  memset(s, 0, sizeof *s);
  Replayd__V1__WorkloadSpec init = REPLAYD__V1__WORKLOAD_SPEC__INIT;
  s->spec = init;
  s->spec.name = (char *)name;
  s->spec.capacity = capacity;
}

void rdt_pb_field(rdt_pb_spec_t *s, const char *name, Replayd__V1__DType dtype, size_t rank,
                  const uint32_t *shape) {
  size_t i = s->spec.n_fields;
  Replayd__V1__Field init = REPLAYD__V1__FIELD__INIT;
  s->field[i] = init;
  snprintf(s->name[i], sizeof s->name[i], "%s", name);
  s->field[i].name = s->name[i];
  s->field[i].dtype = dtype;
  s->field[i].n_shape = rank;
  for (size_t d = 0; d < rank; d++) s->shape[i][d] = shape[d];
  s->field[i].shape = s->shape[i];
  s->fp[i] = &s->field[i];
  s->spec.fields = s->fp;
  s->spec.n_fields = i + 1;
}

static const uint32_t four[] = {4};

void rdt_pb_cartpole(rdt_pb_spec_t *s, size_t n) {
  static const char *names[] = {"obs", "action", "reward", "next_obs", "done"};
  static const Replayd__V1__DType dtypes[] = {
      REPLAYD__V1__DTYPE__FLOAT32, REPLAYD__V1__DTYPE__INT32, REPLAYD__V1__DTYPE__FLOAT32,
      REPLAYD__V1__DTYPE__FLOAT32, REPLAYD__V1__DTYPE__BOOL};
  for (size_t i = 0; i < n && i < 5; i++)
    rdt_pb_field(s, names[i], dtypes[i], i == 0 || i == 3 ? 1 : 0, four);
}

void rdt_pb_dqn(rdt_pb_spec_t *s, uint32_t n_hidden, uint32_t width, uint32_t batch) {
  Replayd__V1__LearnerSpec init = REPLAYD__V1__LEARNER_SPEC__INIT;
  s->learner = init;
  s->learner.algorithm = "dqn";
  for (uint32_t l = 0; l < n_hidden && l < 4; l++) s->hidden[l] = width;
  s->learner.n_hidden = n_hidden;
  s->learner.hidden = s->hidden;
  s->learner.batch_size = batch;
  s->learner.num_actions = 2;
  s->spec.learner = &s->learner;
}

void rdt_pb_normalised(rdt_pb_spec_t *s, double alpha) {
  Replayd__V1__WorkloadSpec *w = &s->spec;
  w->fanout = 16;
  w->alpha_opt_case = REPLAYD__V1__WORKLOAD_SPEC__ALPHA_OPT_ALPHA;
  w->alpha = alpha;
  w->epsilon_opt_case = REPLAYD__V1__WORKLOAD_SPEC__EPSILON_OPT_EPSILON;
  w->epsilon = 1e-6;
  w->beta_opt_case = REPLAYD__V1__WORKLOAD_SPEC__BETA_OPT_BETA;
  w->beta = 0.4;
  w->max_priority_opt_case = REPLAYD__V1__WORKLOAD_SPEC__MAX_PRIORITY_OPT_MAX_PRIORITY;
  w->max_priority = 1048576;
  w->max_batch = 65536;
}
