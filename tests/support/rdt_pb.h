/* rdt_pb.h - WorkloadSpec messages (api/replayd.proto) built in place for
 * the daemon's unit tests that register through the protobuf path
 * (rd_spec_pb_register): the spec, its fields and a learner spec in one
 * struct, no allocation.
 *
 * Contract: rdt_pb_spec_init clears s and names it; rdt_pb_field appends a
 * field (its name and shape copied into s; at most RDT_PB_MAX_FIELDS,
 * rank at most 12); rdt_pb_cartpole appends the first n of obs float32[4],
 * action int32, reward float32, next_obs float32[4], done bool;
 * rdt_pb_dqn attaches a DQN learner of n_hidden layers of width units,
 * batch_size batch, two actions; rdt_pb_normalised sets the options a
 * server fills in when it normalises a spec (fanout 16, the given alpha,
 * epsilon 1e-6, beta 0.4, max_priority 2^20, max_batch 65536), for a
 * scripted server's reply. */
#ifndef RDT_PB_H
#define RDT_PB_H

#include <stddef.h>
#include <stdint.h>

#include "replayd.pb-c.h"

#define RDT_PB_MAX_FIELDS 40

typedef struct {
  Replayd__V1__WorkloadSpec spec;
  Replayd__V1__Field field[RDT_PB_MAX_FIELDS];
  Replayd__V1__Field *fp[RDT_PB_MAX_FIELDS];
  uint32_t shape[RDT_PB_MAX_FIELDS][12];
  char name[RDT_PB_MAX_FIELDS][80];
  Replayd__V1__LearnerSpec learner;
  uint32_t hidden[4];
} rdt_pb_spec_t;

void rdt_pb_spec_init(rdt_pb_spec_t *s, const char *name, uint32_t capacity);
void rdt_pb_field(rdt_pb_spec_t *s, const char *name, Replayd__V1__DType dtype, size_t rank,
                  const uint32_t *shape);
void rdt_pb_cartpole(rdt_pb_spec_t *s, size_t n);
void rdt_pb_dqn(rdt_pb_spec_t *s, uint32_t n_hidden, uint32_t width, uint32_t batch);
void rdt_pb_normalised(rdt_pb_spec_t *s, double alpha);

#endif
