/* workload_spec.h - what a client asks a workload to be, and what it becomes.
 *
 * rd_workload_spec_t is a workload's spec in C, as a client gave it:
 * optional values unset, the learner's section not yet read. The layer that
 * decoded it from the wire (rpc/spec_pb.h) fills it in; core never sees the
 * wire format. rd_workload_spec_resolve applies the defaults, the table's
 * rules and the server's limits and returns the configuration a workload is
 * built from (rd_workload_config_t). Every error names the spec field it is
 * about ("fields[1].name is empty", "capacity 0 is outside [1, N]").
 */
#ifndef RD_WORKLOAD_SPEC_H
#define RD_WORKLOAD_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pipeline.h"
#include "rate_limiter.h"
#include "rd_error.h"
#include "rd_schema.h"
#include "table.h"

#define RD_WORKLOAD_NAME_MAX 256 /* bytes of a spec's label, echoed to every lister */

/* What survives a restart (core/durable.h): nothing; checkpoints (periodic,
 * on request, at shutdown); or checkpoints and a write-ahead journal that
 * every insert and update is on before it is acknowledged. */
typedef enum {
  RD_DURABILITY_NONE = 0,
  RD_DURABILITY_CHECKPOINT = 1,
  RD_DURABILITY_JOURNAL = 2,
} rd_durability_t;

/* "none", "checkpoint", "journal" <-> the mode; -1 for another name. */
const char *rd_durability_name(rd_durability_t d);
int rd_durability_parse(const char *name);

/* A field as a client describes it; checked by rd_workload_spec_resolve
 * (name characters, duplicates, rank, dimensions, bytes per row).
 * RD_DTYPE_INVALID is a dtype the client left unspecified. */
typedef struct {
  const char *name;
  rd_dtype_t dtype;
  size_t rank;
  const uint32_t *shape;
} rd_field_spec_t;

/* Reads the hosted learner's section of a spec against the resolved table
 * (its batch, capacity, seed and schema binding depend on it):
 * learner_spec.h's rd_learner_spec_parse for the wire's LearnerSpec.
 * threads: the learner's OpenMP threads (--learner-threads). */
typedef int (*rd_learner_parse_fn)(const void *section, const rd_table_config_t *tc,
                                   double beta, uint32_t threads, rd_pipeline_config_t *out,
                                   rd_error_t *err);

/* The table's rate limiter as a client asks for it (rate_limiter.h has
 * what the values mean). samples_per_insert 0: no ratio, min_size only.
 * error_buffer instead of the diffs: Reverb's SampleToInsertRatio,
 * min_diff/max_diff = samples_per_insert * min_size_to_sample -/+ it. A
 * missing diff is unbounded. */
typedef struct {
  uint32_t min_size_to_sample; /* 0: 1 */
  double samples_per_insert;
  int has_min_diff, has_max_diff, has_error_buffer;
  double min_diff, max_diff, error_buffer;
} rd_limiter_spec_t;

/* Resolve s against a table of this capacity (RD_EINVAL naming the field). */
int rd_limiter_spec_resolve(const rd_limiter_spec_t *s, uint32_t capacity,
                            rd_limiter_config_t *out, rd_error_t *err);

typedef struct {
  const char *name;              /* a label: UTF-8 without control characters */
  const rd_field_spec_t *fields; /* the row's fields, in column order */
  size_t n_fields;
  uint32_t capacity;
  uint32_t fanout;    /* 0: the default (16) */
  uint32_t max_batch; /* 0: the server's --max-batch */
  uint64_t seed;
  /* Optional values: has_x = 0 takes the default. An explicit 0 is a value. */
  int has_alpha, has_epsilon, has_beta, has_max_priority;
  double alpha, epsilon, beta, max_priority;
  /* Durability: durability -1 takes the server's default (--durability);
   * has_checkpoint_interval 0 takes --checkpoint-interval-s. An explicit
   * interval 0 means no periodic checkpoints. */
  int durability;
  int has_checkpoint_interval;
  double checkpoint_interval_s;
  /* The hosted learner: NULL for a replay-only workload. */
  const void *learner;
  rd_learner_parse_fn learner_parse;
  /* The table's rate limiter: NULL for none, unless a continuous learner
   * needs one (its samples_per_insert, min_diff 0, no max_diff: the ratio
   * continuous mode always kept). With both, the ratios must agree. */
  const rd_limiter_spec_t *rate_limiter;
  /* The spec as the registry persists it and hands back at restore (the
   * decoding layer's normalised form: every default written out). Opaque
   * here; may be NULL when nothing is stored (resolving only). */
  const uint8_t *stored;
  size_t stored_len;
} rd_workload_spec_t;

/* A resolved spec: what a workload is built from. */
typedef struct {
  rd_table_config_t table;    /* defaults filled, within the server's limits */
  double beta;                /* a sample's default IS exponent */
  rd_durability_t durability;
  double checkpoint_interval_s; /* 0: no periodic checkpoints */
  int has_learner;
  rd_pipeline_config_t learner; /* when has_learner */
  int has_limiter;
  rd_limiter_config_t limiter;  /* when has_limiter */
} rd_workload_config_t;

/* Apply defaults, check spec against the table's rules and cfg's limits,
 * and fill *out. RD_EINVAL: a bad spec (the message names the field);
 * RD_ETOOBIG: a server limit (--max-capacity, --max-batch, weights larger
 * than --max-message-bytes). Pure: no lock, no allocation. */
int rd_workload_spec_resolve(const rd_config_t *cfg, const rd_workload_spec_t *spec,
                             rd_workload_config_t *out, rd_error_t *err);

/* Bytes a workload of this config holds (tree, rows, per-call scratch,
 * the hosted learner), as charged against --max-memory; the parts too. */
uint64_t rd_workload_config_charge(const rd_workload_config_t *wc, uint64_t *tree,
                                   uint64_t *rows, uint64_t *scratch, uint64_t *learner);

/* GPU memory a workload of this placed config takes, estimated from the
 * spec: the replay module's and the storage's device bytes where the
 * placement put them on a GPU (rmm_gpu.h), and the hosted learner's
 * buffers (rd_pipeline_memsize) where its learner is on a GPU. 0 for a
 * workload all on the CPU (or the FPGA). Charged against the tenant's
 * max_gpu_memory_bytes. */
uint64_t rd_workload_config_gpu_bytes(const rd_workload_config_t *wc);

#endif
