/* cartpole_schema.h - the row schema the CartPole examples share:
 *
 *   obs       float32[4]   observation before the step
 *   action    int32        0 = push left, 1 = push right
 *   reward    float32
 *   next_obs  float32[4]   observation after the step
 *   done      bool         1 if the episode terminated (the pole fell or
 *                          the cart left the track); 0 on truncation at
 *                          500 steps, where a learner must bootstrap
 */
#ifndef RDC_CARTPOLE_SCHEMA_H
#define RDC_CARTPOLE_SCHEMA_H

#include <stdio.h>
#include <string.h>

#include "ex_schema.h"
#include "replayd_client.h"

enum { CP_F_OBS = 0, CP_F_ACTION, CP_F_REWARD, CP_F_NEXT_OBS, CP_F_DONE, CP_N_FIELDS };

static inline void cartpole_fields(rdc_field_t f[CP_N_FIELDS]) {
  ex_field(&f[CP_F_OBS], "obs", RDC_DTYPE_FLOAT32, 4);
  ex_field(&f[CP_F_ACTION], "action", RDC_DTYPE_INT32, 0);
  ex_field(&f[CP_F_REWARD], "reward", RDC_DTYPE_FLOAT32, 0);
  ex_field(&f[CP_F_NEXT_OBS], "next_obs", RDC_DTYPE_FLOAT32, 4);
  ex_field(&f[CP_F_DONE], "done", RDC_DTYPE_BOOL, 0);
}

/* 0 if the workload's schema is exactly the CartPole one; else -1 with the
 * first difference in msg. */
static inline int cartpole_check_schema(const rdc_spec_t *s, char *msg, size_t cap) {
  rdc_field_t want[CP_N_FIELDS];
  cartpole_fields(want);
  if (s->n_fields != CP_N_FIELDS) {
    snprintf(msg, cap, "the workload has %u fields, the CartPole schema %d", s->n_fields,
             CP_N_FIELDS);
    return -1;
  }
  for (int i = 0; i < CP_N_FIELDS; i++) {
    const rdc_field_t *a = &s->fields[i], *b = &want[i];
    if (!ex_field_same(a, b)) {
      snprintf(msg, cap, "field %d is \"%.63s\" %s of rank %u; the CartPole schema wants \"%.63s\" %s "
               "of rank %u", i, a->name, rdc_dtype_name((int)a->dtype), a->rank, b->name,
               rdc_dtype_name((int)b->dtype), b->rank);
      return -1;
    }
  }
  return 0;
}

#endif
