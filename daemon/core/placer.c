/* placer.c - registration's placement, one at a time, pinned. */
#include "placer.h"

#include <pthread.h>
#include <string.h>

#include "cores.h"
#include "log.h"
#include "profile.h"

static pthread_mutex_t place_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *parts_dir(const rd_config_t *cfg) {
  return cfg->fpga_parts_dir[0] ? cfg->fpga_parts_dir : NULL;
}

/* The CPUs the pipeline's threads get (cores.h). Caller holds place_mu. */
static void assign_cpus(const rd_placer_t *p, rd_pipeline_config_t *pc) {
  static int cpus[RD_CORES_MAX]; /* under place_mu */
  static uint32_t load[RD_CORES_MAX];
  size_t n = rd_cores_allowed(cpus, RD_CORES_MAX);
  rd_error_t err;
  rd_error_clear(&err);
  if (n > 0) rd_registry_cpu_load(p->registry, cpus, n, load);
  uint32_t threads = p->config->learner_threads ? p->config->learner_threads : 1;
  if (n == 0 ||
      rd_cores_assign(cpus, load, n, threads, &pc->learner_pin, &pc->sampler_pin, &err) != RD_OK) {
    rd_log_warn("placement", "the pipeline's threads run unpinned: %s",
                n == 0 ? "this process's CPU mask cannot be read" : err.msg);
    memset(&pc->learner_pin, 0, sizeof pc->learner_pin);
    memset(&pc->sampler_pin, 0, sizeof pc->sampler_pin);
  }
}

int rd_place(const rd_placer_t *p, const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
             const rd_placement_assume_t *assume, rd_placement_t *out, rd_error_t *err) {
  pthread_mutex_lock(&place_mu);
  rd_pipeline_config_t pinned = *pc;
  assign_cpus(p, &pinned);
  int rc = rd_placement_compute(p->store, tc, &pinned, p->config->learner_threads,
                                RD_PROFILE_DEFAULT_BUDGET_S, parts_dir(p->config), assume, out,
                                err);
  pthread_mutex_unlock(&place_mu);
  return rc;
}

int rd_place_restored(void *arg, const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
                      rd_placement_t *out) {
  rd_placement_assume_t as = {NULL, 0, NULL, 0, 1};
  rd_error_t err;
  rd_error_clear(&err);
  return rd_place(arg, tc, pc, &as, out, &err);
}
