/* rdt_schema.h - schema builders for tests and benches that make tables
 * in process (backends/cpu/table.h), and the table-plus-lock a pipeline
 * expects of a workload.
 *
 * Contract: the builders overwrite what they are given and allocate
 * nothing; rdt_table_init fails the way rd_table_init does (its error in
 * err, nothing to free).
 */
#ifndef RDT_SCHEMA_H
#define RDT_SCHEMA_H

#include <pthread.h>
#include <stdint.h>

#include "rd_error.h"
#include "rd_schema.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A field of dtype: a scalar when dim is 0, else a vector of dim. */
void rdt_field(rd_field_t *f, const char *name, rd_dtype_t dtype, uint32_t dim);

/* A field of dtype and any rank (shape has rank entries). */
void rdt_field_shape(rd_field_t *f, const char *name, rd_dtype_t dtype, uint32_t rank,
                     const uint32_t *shape);

/* The CartPole-like columns, in this order: obs float32[obs], action int32,
 * reward float32, next_obs float32[obs], then "discount" float32 (a hosted
 * learner's) when discount, else "done" bool. */
enum { RDT_OBS, RDT_ACTION, RDT_REWARD, RDT_NEXT, RDT_LAST, RDT_N_FIELDS };
void rdt_cartpole_schema(rd_schema_t *s, uint32_t obs, int discount);

/* The table defaults (rd_table_config_default) with one scalar field of
 * dtype and the given capacity: the smallest table a module test needs. */
void rdt_scalar_table_config(rd_table_config_t *c, const char *name, rd_dtype_t dtype,
                             uint32_t capacity);

/* A table and the lock that guards it, as the daemon keeps a workload's. */
typedef struct {
  rd_table_t table;
  pthread_mutex_t lock;
} rdt_table_t;

/* A table of rdt_cartpole_schema(obs, discount) rows with the default
 * settings, capacity and seed. */
int rdt_table_init(rdt_table_t *t, uint32_t capacity, uint32_t obs, int discount, uint64_t seed,
                   rd_error_t *err);
void rdt_table_free(rdt_table_t *t);

#ifdef __cplusplus
}
#endif

#endif
