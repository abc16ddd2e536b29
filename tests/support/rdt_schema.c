/* rdt_schema.c - schema builders and a locked table (rdt_schema.h). */
#include "rdt_schema.h"

#include <stdio.h>
#include <string.h>

void rdt_field_shape(rd_field_t *f, const char *name, rd_dtype_t dtype, uint32_t rank,
                     const uint32_t *shape) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  f->dtype = dtype;
  f->rank = rank;
  for (uint32_t d = 0; d < rank; d++) f->shape[d] = shape[d];
}

void rdt_field(rd_field_t *f, const char *name, rd_dtype_t dtype, uint32_t dim) {
  rdt_field_shape(f, name, dtype, dim ? 1 : 0, &dim);
}

void rdt_cartpole_schema(rd_schema_t *s, uint32_t obs, int discount) {
  memset(s, 0, sizeof *s);
  rdt_field(&s->fields[RDT_OBS], "obs", RD_DTYPE_FLOAT32, obs);
  rdt_field(&s->fields[RDT_ACTION], "action", RD_DTYPE_INT32, 0);
  rdt_field(&s->fields[RDT_REWARD], "reward", RD_DTYPE_FLOAT32, 0);
  rdt_field(&s->fields[RDT_NEXT], "next_obs", RD_DTYPE_FLOAT32, obs);
  if (discount)
    rdt_field(&s->fields[RDT_LAST], "discount", RD_DTYPE_FLOAT32, 0);
  else
    rdt_field(&s->fields[RDT_LAST], "done", RD_DTYPE_BOOL, 0);
  s->n_fields = RDT_N_FIELDS;
}

void rdt_scalar_table_config(rd_table_config_t *c, const char *name, rd_dtype_t dtype,
                             uint32_t capacity) {
  rd_table_config_default(c);
  rdt_field(&c->schema.fields[0], name, dtype, 0);
  c->schema.n_fields = 1;
  c->capacity = capacity;
}

int rdt_table_init(rdt_table_t *t, uint32_t capacity, uint32_t obs, int discount, uint64_t seed,
                   rd_error_t *err) {
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  rdt_cartpole_schema(&tc.schema, obs, discount);
  tc.capacity = capacity;
  tc.seed = seed;
  int rc = rd_table_init(&t->table, &tc, err);
  if (rc == RD_OK) pthread_mutex_init(&t->lock, NULL);
  return rc;
}

void rdt_table_free(rdt_table_t *t) {
  rd_table_free(&t->table);
  pthread_mutex_destroy(&t->lock);
}
