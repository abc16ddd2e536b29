/* provider.h - one device kind behind one interface: the dse layer's seam.
 *
 * A provider is all the daemon knows of one kind of device:
 *  - which devices of the kind this machine has (discover) and what
 *    identifies their performance (fingerprint_key; devices.h);
 *  - what a workload's primitives cost on one (figures): measured profiles
 *    through the one profile cache (profiler, profile_cache.h) or an
 *    analytical model (the FPGA's, backends/fpga/model.h);
 *  - whether a part of a workload can run on one, with which ops (the
 *    learner's, learner_backend.h; the replay module's, table.h
 *    rd_rmm_ops_t), and if not, why (can_run);
 *  - what of a mapping runs there and how the placement's note says it
 *    (bind, running).
 * Placement (placement.h) is: each provider's figures -> the mapper
 * (mapper.h) -> each provider's bind.
 *
 * The providers are backends/cpu/provider_cpu.c, backends/gpu/provider_gpu.c
 * and backends/fpga/provider_fpga.c, compiled into the daemon library. A
 * backend's device-specific half is a file meson picks: with CUDA
 * backends/gpu/provider_gpu_cuda.c, without it provider_gpu_nocuda.c; with
 * XRT backends/fpga/provider_fpga_xrt.c, without it provider_fpga_noxrt.c.
 * The stand-ins answer every call, refusing with "built without CUDA" /
 * "built without XRT", so nothing in daemon/ tests at compile time for a
 * backend.
 *
 * Calls are made by placement (serialised: one at a time) and, for
 * discover, once by devices.c; a provider keeps no per-workload state.
 */
#ifndef RD_PROVIDER_H
#define RD_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "learner_backend.h"
#include "mapper.h"
#include "placement.h"
#include "profile.h"
#include "profile_cache.h"
#include "rd_error.h"
#include "store.h"
#include "table.h"

/* The parts of a workload a mapping places (mapper.h rd_mapping_t). */
typedef enum { RD_PART_LEARNER = 0, RD_PART_RMM = 1, RD_PART_STORAGE = 2 } rd_part_t;
#define RD_PART_COUNT 3

/* A workload being placed, as every provider sees it (rd_placement_compute's
 * arguments). */
typedef struct {
  rd_store_t *store;                   /* profiles; NULL: measure, store nothing */
  const rd_profile_shape_t *shape;     /* the profile key and what measuring needs */
  const rd_table_config_t *tc;
  const rd_pipeline_config_t *pc;
  uint32_t learner_threads;            /* the CPU learner's */
  double budget_s;                     /* per measured device, setup included */
  const char *fpga_parts_dir;          /* NULL: the default search (provider_fpga.h) */
  const rd_placement_assume_t *assume; /* never NULL */
} rd_dse_workload_t;

/* What runs a part on a device, when can_run says it runs. */
typedef struct {
  /* RD_PART_LEARNER: the learner backend (learner_backend.h): its kind and
   * device ordinal for the pipeline, and its ops when not the kind's
   * default (rd_learner_ops_for), else NULL. */
  rd_learner_kind_t learner_kind;
  uint32_t learner_device;
  const rd_learner_ops_t *learner_ops;
  /* RD_PART_RMM: the table's replay module (table.h config.rmm; NULL: the
   * table's own CPU tree). RD_PART_STORAGE: the table's storage (table.h
   * config.storage; NULL: the table's own ring in host memory), or, for a
   * device whose replay module holds the rows itself, rmm_ops again. */
  const rd_rmm_ops_t *rmm_ops;
  const rd_storage_ops_t *storage_ops;
} rd_dse_runner_t;

typedef struct rd_device_provider {
  const char *kind; /* rd_device_t.kind: "cpu", "gpu", "fpga" */
  rd_devkind_t row; /* its row of the primitive-platform table; its letter
                       in a running code is rd_devkind_letter(row) */

  /* The devices of this kind, found once at start (devices.c): up to max
   * into out; 0 and why (len bytes) when none, for the log. */
  size_t (*discover)(rd_device_t *out, size_t max, char *why, size_t len);
  /* What sets d's performance, as text for its fingerprint (devices.h).
   * NULL: kind, model, compute units, memory in MiB and ISA. */
  void (*fingerprint_key)(const rd_device_t *d, char *key, size_t len);

  /* How the kind measures, for the profile cache; NULL: its figures are a
   * model's. */
  const rd_profiler_t *profiler;
  /* Before anything is measured for w (optional): RD_EINVAL when w asks of
   * this kind what it cannot answer, so a bad plan costs nothing. */
  int (*check)(const rd_dse_workload_t *w, rd_error_t *err);
  /* The kind's row of o's table for w (devs[0..nd): the device list):
   * o->table.dev[row], o->fingerprint[row], o->detail[row], and the device
   * of this server behind it (o->device[row], o->has_device[row]; none
   * for an assumed device). A row without figures is not an error (the
   * detail says why); an error stops the placement. */
  int (*figures)(const rd_dse_workload_t *w, const rd_device_t *devs, size_t nd,
                 rd_placement_t *o, rd_error_t *err);

  /* Whether part can run on device d (NULL: an assumed device, which runs
   * nothing) for table tc and learner lc: 1 and *run when it can; 0 and
   * why (len bytes) when it cannot. */
  int (*can_run)(const rd_device_t *d, rd_part_t part, const rd_table_config_t *tc,
                 const rd_learner_config_t *lc, rd_dse_runner_t *run, char *why, size_t len);
  /* The parts o->mapping put on this row: for each that runs on
   * o->device[row] (can_run), run[part] = the kind's letter and o's
   * learner_kind/learner_device/learner_ops or rmm_ops are set; for the
   * others o->why (the note's tail) gets why, in the kind's words. NULL:
   * the kind runs whatever is mapped to it (the CPU). */
  void (*bind)(rd_placement_t *o, const rd_table_config_t *tc, const rd_learner_config_t *lc,
               char run[RD_PART_COUNT]);
  /* o->running was set or changed: bring the kind's own fields of o up to
   * date and, when a part runs on it, write the note's gloss for it into
   * text (len bytes; "" for none). NULL: none. */
  void (*running)(rd_placement_t *o, char *text, size_t len);
} rd_device_provider_t;

/* The providers, the CPU's first (rd_providers()[i]->row == i). */
extern const rd_device_provider_t rd_provider_cpu;  /* backends/cpu/provider_cpu.c */
extern const rd_device_provider_t rd_provider_gpu;  /* backends/gpu/provider_gpu.c */
extern const rd_device_provider_t rd_provider_fpga; /* backends/fpga/provider_fpga.c */
const rd_device_provider_t *const *rd_providers(void); /* RD_DEV_COUNT of them */

/* The provider of a device kind ("cpu", ...), or NULL. */
const rd_device_provider_t *rd_provider_for(const char *kind);

/* The common half of a bind: for each part o->mapping put on p's row, ask
 * p->can_run on o->device[row] (none: NULL); where it runs, set
 * run[part] to the row's letter and o's learner or replay module from its
 * runner; where not, runs[part] = 0 and why[part] says why. Parts mapped
 * elsewhere get runs 0 and an empty why. Returns how many parts mapped to
 * the row do not run there. */
int rd_provider_bind_parts(const rd_device_provider_t *p, rd_placement_t *o,
                           const rd_table_config_t *tc, const rd_learner_config_t *lc,
                           char run[RD_PART_COUNT], int runs[RD_PART_COUNT],
                           char why[RD_PART_COUNT][RD_ERROR_MSG_MAX]);

/* Append text to buf (cap bytes, NUL-terminated), cut at the end. */
void rd_provider_append(char *buf, size_t cap, const char *text);
/* Append "; " (unless why is empty) and text to why (cap bytes), cut at
 * the end: how binds add to a placement's note. */
void rd_provider_add_why(char *why, size_t cap, const char *text);

#endif
