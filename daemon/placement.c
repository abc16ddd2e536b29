/* placement.c - profile, tabulate, map (placement.h). */
#include "placement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "csim_rmm.h"
#include "devices.h"
#include "learner_backend.h"
#include "log.h"
#include "profile_cache.h"
#include "profile_gpu.h"

#define DEFAULT_N_ACTOR 16.0 /* papers/001 §VII-A: 16 actors, one item each per step */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int rd_placement_fpga_workload(const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
                               rd_fpga_workload_t *w, rd_error_t *err) {
  rd_fpga_workload_default(w);
  w->batch = pc->batch;
  w->capacity = tc->capacity < 2 ? 2 : tc->capacity;
  w->fanout = tc->fanout;
  const rd_learner_config_t *lc = &pc->learner;
  int rc = rd_learner_policy_spec(lc, &w->net[0], err);
  if (rc) return rc;
  if (lc->algo == RD_ALGO_DQN) {
    w->algo = RD_FPGA_DQN;
    w->double_dqn = lc->double_dqn;
  } else {
    w->algo = RD_FPGA_DDPG;
    if ((rc = rd_learner_critic_spec(lc, &w->net[1], err)) != RD_OK) return rc;
  }
  return rd_fpga_workload_validate(w, err);
}

/* The FPGA row from the model for part p. */
static void fpga_row(const rd_fpga_part_t *p, const rd_table_config_t *tc,
                     const rd_pipeline_config_t *pc, const char *how, rd_placement_t *o) {
  rd_pdevice_t *d = &o->table.dev[RD_DEV_FPGA];
  d->present = 1;
  snprintf(o->fingerprint[RD_DEV_FPGA], sizeof o->fingerprint[RD_DEV_FPGA], "fpga-%s", p->name);
  rd_fpga_workload_t w;
  rd_fpga_estimate_t e;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_placement_fpga_workload(tc, pc, &w, &err);
  if (rc == RD_OK) {
    /* The RMM and the learner separately: one that does not fit leaves
     * only its own entry empty. */
    rd_fpga_rmm_est_t r;
    if (rd_fpga_model_rmm(p, &w, &r, &err) == RD_OK) {
      d->t_rmm = r.sample_s + r.update_s;
      d->src_rmm = RD_PT_MODEL;
    }
    rd_error_t lerr;
    rd_error_clear(&lerr);
    if (rd_fpga_model_estimate(p, &w, &e, &lerr) == RD_OK && e.has_learner) {
      d->t_learner = e.learner.step_s;
      d->src_learner = RD_PT_MODEL;
      snprintf(o->detail[RD_DEV_FPGA], sizeof o->detail[RD_DEV_FPGA],
               "%s %s model: rmm S=%u (%s), learner DP=%u PI=%u T_max=%llu cycles, %u MHz",
               how, p->name, e.rmm.s, e.rmm.limit, e.learner.dp, e.learner.pi,
               (unsigned long long)e.learner.t_max, e.learner.clock_mhz);
      return;
    }
    if (err.msg[0] == '\0') err = lerr;
  }
  snprintf(o->detail[RD_DEV_FPGA], sizeof o->detail[RD_DEV_FPGA], "%s %s model: %.150s", how,
           p->name, err.msg[0] ? err.msg : "does not fit");
}

/* The fastest assumed row of primitive prim for shape k. */
static const rd_profile_t *best_row(const rd_profile_t *rows, size_t n, const rd_profile_key_t *k,
                                    rd_primitive_t prim) {
  const rd_profile_t *best = NULL;
  for (size_t i = 0; i < n; i++)
    if (rows[i].primitive == prim && rd_profile_key_equal(&rows[i].shape, k) &&
        (best == NULL || rows[i].latency_s < best->latency_s))
      best = &rows[i];
  return best;
}

/* A GPU row from profile rows (assumed or stored). 1 if it has anything. */
static int gpu_row(const rd_profile_t *rows, size_t n, const rd_profile_key_t *k,
                   rd_pt_source_t src, rd_placement_t *o) {
  const rd_profile_t *s = best_row(rows, n, k, RD_PRIM_SAMPLE);
  const rd_profile_t *u = best_row(rows, n, k, RD_PRIM_UPDATE);
  const rd_profile_t *t = best_row(rows, n, k, RD_PRIM_TRAIN);
  rd_pdevice_t *d = &o->table.dev[RD_DEV_GPU];
  if (s && u) {
    d->t_rmm = s->latency_s + u->latency_s;
    d->src_rmm = src;
  }
  if (t) {
    d->t_learner = t->latency_s;
    d->src_learner = src;
  }
  const rd_profile_t *any = t ? t : s ? s : u;
  if (any)
    snprintf(o->fingerprint[RD_DEV_GPU], sizeof o->fingerprint[RD_DEV_GPU], "%s",
             any->device_fp);
  return d->src_rmm != RD_PT_NONE || d->src_learner != RD_PT_NONE;
}

/* Measure (or find stored) GPU profiles for the GPU row (profile_gpu.h).
 * 1 if the row got figures, 0 if not, -1 on a device fault, which marks the
 * GPU unusable and takes it out of the table; why says what happened. */
static int gpu_measure(rd_store_t *store, const rd_profile_shape_t *shape, const rd_device_t *gpu,
                       double budget_s, rd_placement_t *o, char *why, size_t len) {
  rd_profile_t rows[3];
  size_t n = 0;
  int hit = 0, fault = 0;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_profile_gpu_cached(store, shape, gpu, budget_s, rows, 3, &n, &hit, &fault, &err) !=
      RD_OK) {
    rd_log_warn("profile", "gpu%u: %s", gpu->index, err.msg);
    if (fault) {
      rd_devices_mark_unusable("gpu", gpu->index, err.msg);
      o->table.dev[RD_DEV_GPU].present = 0;
    }
    snprintf(why, len, "GPU profile failed%s: %.200s", fault ? " (now unusable)" : "", err.msg);
    return fault ? -1 : 0;
  }
  return gpu_row(rows, n, &shape->key, hit ? RD_PT_CACHED : RD_PT_MEASURED, o);
}

/* What runs of o's mapping (placement.h): the learner on a usable GPU
 * (gpu_index >= 0) with the GPU learner built, or on the C-simulation FPGA
 * (csim); the replay module and the storage on the C-simulation FPGA when
 * mapped to it (its storage is the table's host memory); everything else
 * on the CPU. Sets learner_kind/device, rmm_ops, running and the note. */
static void run_mapping(rd_placement_t *o, int gpu_index, int csim,
                        const rd_learner_config_t *lc) {
  const rd_mapping_t *m = &o->mapping;
  /* The FPGA learner kernel has build limits (layers, width, batch): a
   * learner beyond them stays on the CPU, and the note says why. */
  char lwhy[RD_ERROR_MSG_MAX] = "";
  rd_error_t lerr;
  rd_error_clear(&lerr);
  if (m->learner == RD_DEV_FPGA && csim && rd_learner_fpga_supports(lc, &lerr) != RD_OK)
    snprintf(lwhy, sizeof lwhy, "%s", lerr.msg);
  if (m->learner == RD_DEV_GPU && gpu_index >= 0 && rd_learner_gpu_built()) {
    o->learner_kind = RD_LEARNER_ON_GPU;
    o->learner_device = (uint32_t)gpu_index;
  } else if (m->learner == RD_DEV_FPGA && csim && lwhy[0] == '\0') {
    o->learner_kind = RD_LEARNER_ON_FPGA;
    o->learner_device = o->fpga_device;
  }
  if (m->rmm == RD_DEV_FPGA && csim) o->rmm_ops = &rd_fpga_csim_rmm_ops;
  const char run[3] = {
      o->learner_kind == RD_LEARNER_ON_GPU ? 'G' : o->learner_kind == RD_LEARNER_ON_FPGA ? 'F'
                                                                                      : 'C',
      o->rmm_ops != NULL ? 'F' : 'C', m->storage == RD_DEV_FPGA && csim ? 'F' : 'C'};
  snprintf(o->running, sizeof o->running, "%c-%c-%c", run[0], run[1], run[2]);
  o->fpga_csim = run[0] == 'F' || run[1] == 'F' || run[2] == 'F';
  size_t n = (size_t)snprintf(o->note, sizeof o->note, "mapped %s; running %s", o->code,
                              o->running);
  if (o->fpga_csim && n < sizeof o->note)
    n += (size_t)snprintf(o->note + n, sizeof o->note - n,
                          " (FPGA: C-simulation of %s, no board; its storage is host memory)",
                          o->fpga_part);
  if (strcmp(o->code, o->running) == 0 || n >= sizeof o->note) return;
  /* Why each device the mapping chose is not running its part. */
  const rd_devkind_t want[3] = {m->learner, m->rmm, m->storage};
  int gpu_missing = 0, fpga_missing = 0;
  for (int i = 0; i < 3; i++) {
    gpu_missing |= want[i] == RD_DEV_GPU && run[i] != 'G';
    fpga_missing |= want[i] == RD_DEV_FPGA && run[i] != 'F';
  }
  const char *sep = ": ";
  if (gpu_missing && o->learner_kind == RD_LEARNER_ON_GPU) {
    n += (size_t)snprintf(o->note + n, sizeof o->note - n,
                          "%sthe GPU sum tree and storage are not used by the pipeline", sep);
    sep = "; ";
  } else if (gpu_missing && n < sizeof o->note) {
    n += (size_t)snprintf(o->note + n, sizeof o->note - n, "%sGPU backend not available%s", sep,
                          m->learner != RD_DEV_GPU ? ""
                          : !rd_learner_gpu_built() ? " (built without CUDA)"
                          : gpu_index < 0 ? " (no usable GPU on this server)" : "");
    sep = "; ";
  }
  if (fpga_missing && n < sizeof o->note && lwhy[0] != '\0')
    snprintf(o->note + n, sizeof o->note - n, "%sthe learner stays on the CPU: %.150s", sep,
             lwhy);
  else if (fpga_missing && n < sizeof o->note)
    snprintf(o->note + n, sizeof o->note - n, "%sFPGA backend not available%s", sep,
             csim ? "" : " (FPGA kernels run only in C-simulation: the fpga-csim setting)");
}

int rd_placement_compute(rd_store_t *store, const rd_table_config_t *tc,
                         const rd_pipeline_config_t *pc, uint32_t learner_threads,
                         double budget_s, const char *fpga_parts_dir,
                         const rd_placement_assume_t *assume, rd_placement_t *out,
                         rd_error_t *err) {
  double t0 = now_s();
  static const rd_placement_assume_t none = {NULL, 0, NULL, 0, 0};
  if (assume == NULL) assume = &none;
  if (learner_threads == 0) learner_threads = 1;
  rd_placement_t o;
  memset(&o, 0, sizeof o);
  o.learner_threads = learner_threads;

  rd_profile_shape_t shape;
  int rc = rd_profile_shape_init(&shape, tc, pc, 0, err);
  if (rc) return rc;

  /* Assumed GPU rows must cover this shape: checked before anything is
   * measured, so a bad plan costs nothing. */
  if (assume->gpu_rows != NULL && assume->n_gpu_rows > 0) {
    rd_placement_t probe;
    memset(&probe, 0, sizeof probe);
    if (!gpu_row(assume->gpu_rows, assume->n_gpu_rows, &shape.key, RD_PT_ASSUMED, &probe))
      return rd_error_set(err, RD_EINVAL,
                          "the assumed GPU profiles have no row for this workload's shape "
                          "(%s batch %u capacity %u fanout %u)",
                          shape.key.network, shape.key.batch, shape.key.capacity,
                          shape.key.fanout);
  }

  /* CPU: through the profile cache. */
  rd_device_t cpu;
  rd_devices_cpu(&cpu);
  uint32_t threads[RD_PROFILE_MAX_THREAD_COUNTS];
  size_t nt = rd_profile_default_threads(cpu.cores, threads, RD_PROFILE_MAX_THREAD_COUNTS - 1);
  int have_lt = 0;
  for (size_t i = 0; i < nt; i++) have_lt |= threads[i] == learner_threads;
  if (!have_lt && learner_threads <= RD_MLP_MAX_THREADS) threads[nt++] = learner_threads;
  rd_profile_t prof[RD_PROFILE_MAX_THREAD_COUNTS * RD_PRIM_COUNT];
  size_t np = 0;
  int hit = 0;
  if (assume->cache_only) {
    /* Only what the store holds (a restart): never measure. */
    rd_profile_t *rows = NULL;
    size_t nr = 0;
    if (store == NULL ||
        rd_store_get_profiles(store, cpu.fingerprint, &shape.key, rd_profile_build(), &rows, &nr,
                              err) != RD_OK)
      return rd_error_set(err, RD_ENOTFOUND, "the profile store cannot be read");
    rd_store_free_profiles(rows);
    if (nr == 0)
      return rd_error_set(err, RD_ENOTFOUND, "no stored profiles for this shape");
  }
  rc = rd_profile_cpu_cached(store, &shape, threads, nt, budget_s, prof,
                             sizeof prof / sizeof prof[0], &np, &hit, err);
  if (rc) return rc;
  o.cache_hit = hit;
  o.profiles_measured = hit ? 0 : (uint32_t)np;
  rd_pt_source_t cpu_src = hit ? RD_PT_CACHED : RD_PT_MEASURED;
  rd_pdevice_t *c = &o.table.dev[RD_DEV_CPU];
  c->present = 1;
  double ts = 0, tu = 0, tt = 0;
  for (size_t i = 0; i < np; i++) {
    if (prof[i].threads == 1 && prof[i].primitive == RD_PRIM_SAMPLE) ts = prof[i].latency_s;
    if (prof[i].threads == 1 && prof[i].primitive == RD_PRIM_UPDATE) tu = prof[i].latency_s;
    if (prof[i].threads == learner_threads && prof[i].primitive == RD_PRIM_TRAIN)
      tt = prof[i].latency_s;
    /* The pipeline's own costs (mapper.h "Pipeline costs"). */
    if (prof[i].primitive == RD_PRIM_GATHER) o.table.cpu_gather_s = prof[i].latency_s;
    if (prof[i].primitive == RD_PRIM_HANDOFF) o.table.cpu_handoff_s = prof[i].latency_s;
    if (prof[i].primitive == RD_PRIM_PASS) o.table.cpu_pass_s = prof[i].latency_s;
  }
  if (ts > 0 && tu > 0) {
    c->t_rmm = ts + tu;
    c->src_rmm = cpu_src;
  }
  if (tt > 0) {
    c->t_learner = tt;
    c->src_learner = cpu_src;
  }
  snprintf(o.fingerprint[RD_DEV_CPU], sizeof o.fingerprint[RD_DEV_CPU], "%s", cpu.fingerprint);
  snprintf(o.detail[RD_DEV_CPU], sizeof o.detail[RD_DEV_CPU],
           "%s; %zu profiles %s; rmm at 1 thread, learner at %u", cpu.model, np,
           hit ? "from the store" : "measured", learner_threads);

  /* GPU and FPGA: assumed, or this server's own. */
  rd_device_t devs[RD_MAX_DEVICES];
  size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
  int gpu_index = -1; /* the present, usable GPU of the GPU row */
  if (assume->gpu_rows != NULL && assume->n_gpu_rows > 0) {
    o.table.dev[RD_DEV_GPU].present = 1;
    gpu_row(assume->gpu_rows, assume->n_gpu_rows, &shape.key, RD_PT_ASSUMED, &o);
    snprintf(o.detail[RD_DEV_GPU], sizeof o.detail[RD_DEV_GPU],
             "assumed: the fastest given profile of each primitive");
  } else if (!assume->ignore_present) {
    for (size_t i = 0; i < nd; i++) {
      if (strcmp(devs[i].kind, "gpu") != 0) continue;
      if (!rd_device_usable(&devs[i])) { /* given up after a failure: not a candidate */
        snprintf(o.detail[RD_DEV_GPU], sizeof o.detail[RD_DEV_GPU], "gpu%u %.180s",
                 devs[i].index, devs[i].status);
        continue;
      }
      o.table.dev[RD_DEV_GPU].present = 1;
      gpu_index = (int)devs[i].index;
      snprintf(o.fingerprint[RD_DEV_GPU], sizeof o.fingerprint[RD_DEV_GPU], "%s",
               devs[i].fingerprint);
      rd_profile_t *rows = NULL;
      size_t nr = 0;
      rd_error_t serr;
      rd_error_clear(&serr);
      int got = 0;
      if (store != NULL &&
          rd_store_get_profiles(store, devs[i].fingerprint, &shape.key, rd_profile_build(), &rows,
                                &nr, &serr) == RD_OK) {
        got = gpu_row(rows, nr, &shape.key, RD_PT_CACHED, &o);
        rd_store_free_profiles(rows);
      }
      const char *how = got ? "profiles from the store" : NULL;
      char gerr[RD_ERROR_MSG_MAX + 64] = "";
      if (!got && !assume->cache_only && rd_profile_gpu_built()) {
        int m = gpu_measure(store, &shape, &devs[i], budget_s, &o, gerr, sizeof gerr);
        if (m > 0) how = "measured on this GPU (or stored by this build)";
        if (m < 0) gpu_index = -1;
      }
      snprintf(o.detail[RD_DEV_GPU], sizeof o.detail[RD_DEV_GPU], "%.199s",
               how ? how
               : gerr[0] ? gerr
               : rd_profile_gpu_built()
                   ? "no stored profiles for this shape (restore: never measured at start)"
                   : "no GPU profiler in this build and no stored profiles for this shape "
                     "(import them: replayctl profiles import)");
      break; /* one GPU row: the first usable GPU */
    }
  }
  /* The FPGA row: an assumed part, or this server's FPGA with a part file
   * (by its model: a C-simulation's is its part's name), the usable
   * C-simulation first, since it is the only FPGA anything runs on. */
  const rd_device_t *fpga = NULL; /* the present FPGA of the FPGA row */
  if (assume->fpga != NULL) {
    fpga_row(assume->fpga, tc, pc, "assumed", &o);
  } else if (!assume->ignore_present) {
    for (int pass = 0; pass < 2 && fpga == NULL; pass++)
      for (size_t i = 0; i < nd && fpga == NULL; i++) {
        const rd_device_t *d = &devs[i];
        if (strcmp(d->kind, "fpga") != 0 || (strcmp(d->backend, "csim") == 0) != (pass == 0))
          continue;
        rd_fpga_part_t part;
        rd_error_t perr;
        rd_error_clear(&perr);
        if (!rd_device_usable(d)) /* given up after a failure, or XRT's no-op shim */
          snprintf(o.detail[RD_DEV_FPGA], sizeof o.detail[RD_DEV_FPGA], "fpga%u %.180s",
                   d->index, d->status);
        else if (rd_fpga_part_find(d->model, fpga_parts_dir, &part, &perr) != RD_OK)
          snprintf(o.detail[RD_DEV_FPGA], sizeof o.detail[RD_DEV_FPGA],
                   "fpga%u (%.40s): no model figures: %.130s", d->index, d->model, perr.msg);
        else
          fpga = d;
        if (fpga == NULL) continue;
        int csim = strcmp(d->backend, "csim") == 0;
        fpga_row(&part, tc, pc, csim ? "C-simulated" : "present", &o);
        snprintf(o.fingerprint[RD_DEV_FPGA], sizeof o.fingerprint[RD_DEV_FPGA], "%s",
                 d->fingerprint);
        char why[160];
        if (csim && o.table.dev[RD_DEV_FPGA].src_rmm != RD_PT_NONE &&
            !rd_fpga_csim_rmm_fits(tc->capacity, tc->fanout, why, sizeof why)) {
          /* The model would fit it on a board; the built kernels do not. */
          o.table.dev[RD_DEV_FPGA].src_rmm = RD_PT_NONE;
          o.table.dev[RD_DEV_FPGA].t_rmm = 0;
          size_t at = strlen(o.detail[RD_DEV_FPGA]);
          snprintf(o.detail[RD_DEV_FPGA] + at, sizeof o.detail[RD_DEV_FPGA] - at,
                   "; no rmm: %s", why);
        }
      }
  }
  const int csim = fpga != NULL && strcmp(fpga->backend, "csim") == 0;
  if (csim) {
    o.fpga_device = fpga->index;
    snprintf(o.fpga_part, sizeof o.fpga_part, "%.*s", (int)(sizeof o.fpga_part - 1),
             fpga->model);
  }

  /* The table's workload figures (placement.h). */
  o.table.batch = pc->batch;
  uint64_t row = rd_schema_row_bytes(&tc->schema);
  o.table.item_words = (uint32_t)((row + RD_MAPPER_WORD_BYTES - 1) / RD_MAPPER_WORD_BYTES);
  if (o.table.item_words == 0) o.table.item_words = 1;
  o.table.n_actor =
      pc->samples_per_insert > 0 ? (double)pc->batch / pc->samples_per_insert : DEFAULT_N_ACTOR;
  o.table.depth = pc->depth;
  o.table.link_bytes_per_s = 0;
  o.table.cpu_cores = cpu.cores;
  o.table.cpu_learner_threads = learner_threads;

  snprintf(o.running, sizeof o.running, "C-C-C");
  o.learner_kind = RD_LEARNER_ON_CPU;
  rd_error_t merr;
  rd_error_clear(&merr);
  if (rd_map(&o.table, &o.mapping, &merr) == RD_OK) {
    o.mapped = 1;
    rd_mapping_format(&o.mapping, o.code, sizeof o.code);
    run_mapping(&o, gpu_index, csim, &pc->learner);
  } else {
    snprintf(o.note, sizeof o.note, "not mapped (%.120s); running %s", merr.msg, o.running);
  }
  o.register_ms = (now_s() - t0) * 1e3;
  *out = o;
  return RD_OK;
}
