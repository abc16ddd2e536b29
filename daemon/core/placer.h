/* placer.h - where a hosted learner's workload runs: registration's
 * design-space exploration (placement.h), one at a time, on the CPUs its
 * threads will be pinned to.
 *
 * Two placements at once would each measure the other (the CPU's cores
 * are what is measured), so rd_place runs one at a time. The pipeline's
 * threads get the daemon's CPUs least used by the live workloads' pins
 * (cores.h, rd_registry_cpu_load); unpinned if the mask cannot be read.
 */
#ifndef RD_PLACER_H
#define RD_PLACER_H

#include "config.h"
#include "placement.h"
#include "rd_error.h"
#include "registry.h"
#include "store.h"

typedef struct {
  rd_registry_t *registry;  /* whose pins count as load */
  rd_store_t *store;        /* profiles; NULL: measure, store nothing */
  const rd_config_t *config;
} rd_placer_t;

/* Profile (within RD_PROFILE_DEFAULT_BUDGET_S) and map a workload of tc
 * and pc; assume (may be NULL) as placement.h says. Errors as
 * rd_placement_compute's. */
int rd_place(const rd_placer_t *p, const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
             const rd_placement_assume_t *assume, rd_placement_t *out, rd_error_t *err);

/* rd_registry_set_restore_placer's hook (arg: an rd_placer_t): a restored
 * workload's placement from stored profiles only, never measured. */
int rd_place_restored(void *arg, const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
                      rd_placement_t *out);

#endif
