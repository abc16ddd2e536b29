/* spec_pb.h - the wire's WorkloadSpec <-> core's rd_workload_spec_t.
 *
 * Core takes a spec in C (workload_spec.h) and stores it as opaque bytes;
 * this file is the one place that knows both sides. Decoding reads a
 * WorkloadSpec into an rd_workload_spec_t (its learner section read by
 * learner_spec.h), resolves it with the server's limits, and packs the
 * normalised spec (every default written out, fields this build does not
 * know dropped) as the bytes core stores: the format of the workloads
 * table in SQLite, so state directories written before still restore.
 * Describe and List show that normalised spec back.
 */
#ifndef RD_SPEC_PB_H
#define RD_SPEC_PB_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "rd_error.h"
#include "registry.h"
#include "replayd.pb-c.h"
#include "workload_spec.h"

/* A decoded spec. spec points into pb (the caller's, or owned after a
 * restore's unpack), fields and stored, all released together. */
typedef struct {
  rd_workload_spec_t spec;
  rd_workload_config_t config; /* spec resolved with the server's limits */
  rd_field_spec_t *fields;
  rd_limiter_spec_t limiter; /* spec.rate_limiter points here when the spec has one */
  uint8_t *stored; /* the normalised spec, packed: spec.stored */
  size_t stored_len;
  Replayd__V1__WorkloadSpec *owned; /* unpacked here (restore), or NULL */
} rd_spec_pb_t;

/* Decode pb (borrowed: keep it until rd_spec_pb_release) and resolve it
 * with cfg. Errors as rd_workload_spec_resolve's (RD_EINVAL naming the
 * field, RD_ETOOBIG), RD_ENOMEM. *out needs no release on error. */
int rd_spec_pb_decode(const rd_config_t *cfg, const Replayd__V1__WorkloadSpec *pb,
                      rd_spec_pb_t *out, rd_error_t *err);
void rd_spec_pb_release(rd_spec_pb_t *s);

/* The stored spec of a workload, unpacked (free with
 * replayd__v1__workload_spec__free_unpacked), or NULL if out of memory. */
Replayd__V1__WorkloadSpec *rd_spec_pb_stored(const uint8_t *bytes, size_t len);

/* rd_registry_restore's decoder of stored specs; its arg is the server's
 * const rd_config_t *. */
rd_spec_decoder_t rd_spec_pb_decoder(const rd_config_t *cfg);

/* One step for callers that hold a wire spec (tests, tools): decode it with
 * the registry's configuration, then return its table and pipeline
 * configs, or register it (rd_registry_register). */
int rd_spec_pb_config(rd_registry_t *r, const Replayd__V1__WorkloadSpec *pb,
                      rd_table_config_t *tc, rd_pipeline_config_t *pc, int *has_learner,
                      rd_error_t *err);
int rd_spec_pb_register(rd_registry_t *r, const Replayd__V1__WorkloadSpec *pb,
                        const rd_placement_t *placement, rd_workload_t **out, rd_error_t *err);

#endif
