/* ex_schema.h - the examples' schema fields (the CartPole actor's and
 * replayd-learn's tasks): building one, and comparing a described
 * workload's field with the one a program wants. Header-only. */
#ifndef RDC_EX_SCHEMA_H
#define RDC_EX_SCHEMA_H

#include <stdio.h>
#include <string.h>

#include "replayd_client.h"

/* A field of dtype: a scalar when dim is 0, else a vector of dim. */
static inline void ex_field(rdc_field_t *f, const char *name, rdc_dtype_t dtype, uint32_t dim) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  f->dtype = dtype;
  f->rank = dim ? 1 : 0;
  f->shape[0] = dim;
}

/* 1 when a and b have the same name, dtype, rank and shape. */
static inline int ex_field_same(const rdc_field_t *a, const rdc_field_t *b) {
  int same = strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->rank == b->rank;
  for (uint32_t d = 0; same && d < a->rank && d < RDC_MAX_RANK; d++)
    same = a->shape[d] == b->shape[d];
  return same;
}

#endif
