/* placement.c - profile, tabulate, map (placement.h). */
#include "placement.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "csim_rmm.h"
#include "devices.h"
#include "learner_backend.h"
#include "log.h"
#include "profile_cache.h"
#include "profile_gpu.h"

#ifndef RD_FPGA_XRT
#define RD_FPGA_XRT 0
#endif
#if RD_FPGA_XRT
#include "learner_backend_xrt.h"
#include "rmm_xrt.h"
#endif

#define DEFAULT_N_ACTOR 16.0 /* papers/001 §VII-A: 16 actors, one item each per step */

/* The fpga-xclbin setting as placements use it (rd_placement_setup_xrt). */
typedef struct {
  int configured;               /* an xclbin, in a build with XRT */
  uint32_t device;              /* the board the XRT replay module opens */
  rd_fpga_xclbin_shape_t shape; /* its replay kernel's build */
} xrt_setting_t;

static pthread_mutex_t xrt_mu = PTHREAD_MUTEX_INITIALIZER;
static xrt_setting_t xrt_setting;

static void xrt_get(xrt_setting_t *out) {
  pthread_mutex_lock(&xrt_mu);
  *out = xrt_setting;
  pthread_mutex_unlock(&xrt_mu);
}

static void xrt_set(const xrt_setting_t *x) {
  pthread_mutex_lock(&xrt_mu);
  xrt_setting = *x;
  pthread_mutex_unlock(&xrt_mu);
}

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
      /* The replay kernel's build parameters (kernels/rmm.h) beside S. */
      uint32_t regs, banked;
      rd_fpga_rmm_port_masks(&e.rmm, &regs, &banked);
      snprintf(o->detail[RD_DEV_FPGA], sizeof o->detail[RD_DEV_FPGA],
               "%s %s model: rmm S=%u (%s) ports regs 0x%x banked 0x%x%s, learner DP=%u "
               "PI=%u T_max=%llu cycles, %u MHz",
               how, p->name, e.rmm.s, e.rmm.limit, regs, banked,
               e.rmm.update_serial ? " (serial update)" : "", e.learner.dp, e.learner.pi,
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

rd_fpga_run_t rd_placement_fpga_run(const rd_device_t *d, int xrt, int xclbin, int fits,
                                    const char *fit_why, char *why, size_t len) {
  const char *fw = fit_why != NULL && fit_why[0] ? fit_why : "it does not fit the kernel build";
  if (len > 0) why[0] = '\0';
  if (d == NULL) {
    snprintf(why, len, "an assumed FPGA runs nothing (kernels run on this server's "
             "C-simulation FPGA, fpga-csim, or an XRT board with fpga-xclbin)");
    return RD_FPGA_RUN_CPU;
  }
  if (strcmp(d->kind, "fpga") != 0) {
    snprintf(why, len, "%.8s%u is not an FPGA", d->kind, d->index);
    return RD_FPGA_RUN_CPU;
  }
  /* Before the status: the shim completes every run without executing a
   * kernel, so nothing it "computes" may reach a workload, whatever its
   * entry says. */
  if (strcmp(d->backend, "xrt-noop") == 0) {
    snprintf(why, len, "fpga%u is XRT's no-op shim: no kernel executes there", d->index);
    return RD_FPGA_RUN_CPU;
  }
  if (!rd_device_usable(d)) {
    snprintf(why, len, "fpga%u %.200s", d->index, d->status);
    return RD_FPGA_RUN_CPU;
  }
  if (strcmp(d->backend, "csim") == 0) {
    if (fits) return RD_FPGA_RUN_CSIM;
    snprintf(why, len, "%s", fw);
    return RD_FPGA_RUN_CPU;
  }
  if (strcmp(d->backend, "xrt") == 0) {
    if (!xrt)
      snprintf(why, len, "fpga%u is an XRT board but replayd was built without XRT", d->index);
    else if (!xclbin)
      snprintf(why, len, "fpga%u is an XRT board but no xclbin is configured (the fpga-xclbin "
               "setting)", d->index);
    else if (!fits)
      snprintf(why, len, "%s", fw);
    else
      return RD_FPGA_RUN_XRT;
    return RD_FPGA_RUN_CPU;
  }
  snprintf(why, len, "fpga%u's backend \"%.16s\" runs no kernels", d->index, d->backend);
  return RD_FPGA_RUN_CPU;
}

/* Whether the replay module that would run on FPGA d holds table tc (the
 * C-simulation's built shapes; the xclbin's one tree, on the board the XRT
 * module was configured for); else 0 and why (len bytes). */
static int rmm_fits(const rd_device_t *d, const rd_table_config_t *tc, const xrt_setting_t *x,
                    char *why, size_t len) {
  if (strcmp(d->backend, "csim") == 0)
    return rd_fpga_csim_rmm_fits(tc->capacity, tc->fanout, why, len);
  if (strcmp(d->backend, "xrt") != 0 || !x->configured) return 0; /* fpga_run says why */
#if RD_FPGA_XRT
  if (d->index != x->device) {
    snprintf(why, len, "the XRT replay module runs on fpga%u (the first usable board at "
             "start), not fpga%u", x->device, d->index);
    return 0;
  }
  if (rd_fpga_xrt_rmm_ops.memsize(tc->capacity, tc->fanout) > 0) return 1;
  snprintf(why, len, "the xclbin's replay kernel (fpga-xclbin-shape: K %u, N %u, leaves <= "
           "%llu) cannot hold this table (fanout %u, %u items, leaves <= %llu)",
           x->shape.k, x->shape.n, (unsigned long long)rd_fpga_xclbin_max_leaf(&x->shape),
           tc->fanout, tc->capacity,
           (unsigned long long)(UINT64_C(0x7fffffffffffffff) / (tc->capacity ? tc->capacity : 1)));
#else
  (void)tc;
  (void)why;
  (void)len;
#endif
  return 0;
}

/* Append text to buf (cap bytes, NUL-terminated), cut at the end. */
static void append(char *buf, size_t cap, const char *text) {
  size_t n = strnlen(buf, cap);
  if (n + 1 >= cap) return;
  size_t len = strlen(text);
  if (len > cap - n - 1) len = cap - n - 1;
  memcpy(buf + n, text, len);
  buf[n + len] = '\0';
}

/* Append "; " (or nothing, first) and text to buf. */
static void add_why(char *buf, size_t cap, const char *text) {
  if (buf[0]) append(buf, cap, "; ");
  append(buf, cap, text);
}

/* o->note from o's code, running, FPGA and why. */
static void compose_note(rd_placement_t *o) {
  size_t n = (size_t)snprintf(o->note, sizeof o->note, "mapped %s; running %s", o->code,
                              o->running);
  if (o->fpga_csim && n < sizeof o->note)
    n += (size_t)snprintf(o->note + n, sizeof o->note - n,
                          " (FPGA: C-simulation of %s, no board; its storage is host memory)",
                          o->fpga_part);
  else if (o->fpga_xrt && n < sizeof o->note)
    n += (size_t)snprintf(o->note + n, sizeof o->note - n,
                          " (FPGA: XRT board fpga%u, %s model, fpga-xclbin kernels; replayd "
                          "has never run on a board)",
                          o->fpga_device, o->fpga_part);
  if (o->why[0]) {
    append(o->note, sizeof o->note, ": ");
    append(o->note, sizeof o->note, o->why);
  }
}

/* What runs of o's mapping (placement.h): the learner on a usable GPU
 * (gpu_index >= 0) with the GPU learner built; the learner and the replay
 * module on the FPGA row's device (fpga; NULL: assumed or none) where
 * rd_placement_fpga_run says a kernel runs them; the storage on the
 * C-simulation FPGA when mapped to it (its storage is the table's host
 * memory); everything else on the CPU. */
void rd_placement_run_mapping(rd_placement_t *o, int gpu_index, const rd_device_t *fpga,
                              const rd_table_config_t *tc, const rd_learner_config_t *lc) {
  const rd_mapping_t *m = &o->mapping;
  xrt_setting_t x;
  xrt_get(&x);
  /* Who runs each part mapped to the FPGA: a kernel build's limits (the
   * learner's layers, width, batch; the replay module's tree) keep a part
   * on the CPU, and the note says why. */
  rd_fpga_run_t lrun = RD_FPGA_RUN_CPU, rrun = RD_FPGA_RUN_CPU;
  char lwhy[RD_ERROR_MSG_MAX] = "", rwhy[RD_ERROR_MSG_MAX] = "";
  if (m->learner == RD_DEV_FPGA) {
    rd_error_t lerr;
    rd_error_clear(&lerr);
    int fits = rd_learner_fpga_supports(lc, &lerr); /* 1: the learner kernel takes it */
    lrun = rd_placement_fpga_run(fpga, RD_FPGA_XRT, x.configured, fits, lerr.msg, lwhy,
                                 sizeof lwhy);
  }
  if (m->rmm == RD_DEV_FPGA) {
    char fw[RD_ERROR_MSG_MAX] = "";
    int fits = fpga != NULL && rmm_fits(fpga, tc, &x, fw, sizeof fw);
    rrun = rd_placement_fpga_run(fpga, RD_FPGA_XRT, x.configured, fits, fw, rwhy, sizeof rwhy);
  }
  if (m->learner == RD_DEV_GPU && gpu_index >= 0 && rd_learner_gpu_built()) {
    o->learner_kind = RD_LEARNER_ON_GPU;
    o->learner_device = (uint32_t)gpu_index;
  } else if (lrun != RD_FPGA_RUN_CPU) {
    o->learner_kind = RD_LEARNER_ON_FPGA;
    o->learner_device = fpga->index;
#if RD_FPGA_XRT
    if (lrun == RD_FPGA_RUN_XRT) o->learner_ops = &rd_learner_ops_fpga_xrt;
#endif
  }
  if (rrun == RD_FPGA_RUN_CSIM) o->rmm_ops = &rd_fpga_csim_rmm_ops;
#if RD_FPGA_XRT
  if (rrun == RD_FPGA_RUN_XRT) o->rmm_ops = &rd_fpga_xrt_rmm_ops;
#endif
  const int csim = fpga != NULL && strcmp(fpga->backend, "csim") == 0;
  const char run[3] = {
      o->learner_kind == RD_LEARNER_ON_GPU ? 'G' : o->learner_kind == RD_LEARNER_ON_FPGA ? 'F'
                                                                                      : 'C',
      o->rmm_ops != NULL ? 'F' : 'C', m->storage == RD_DEV_FPGA && csim ? 'F' : 'C'};
  snprintf(o->running, sizeof o->running, "%c-%c-%c", run[0], run[1], run[2]);
  const int any_f = run[0] == 'F' || run[1] == 'F' || run[2] == 'F';
  o->fpga_csim = any_f && csim;
  o->fpga_xrt = any_f && !csim;
  o->why[0] = '\0';
  if (strcmp(o->code, o->running) != 0) {
    /* Why each device the mapping chose is not running its part. */
    const rd_devkind_t want[3] = {m->learner, m->rmm, m->storage};
    int gpu_missing = 0, fpga_missing[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
      gpu_missing |= want[i] == RD_DEV_GPU && run[i] != 'G';
      fpga_missing[i] = want[i] == RD_DEV_FPGA && run[i] != 'F';
    }
    char text[RD_ERROR_MSG_MAX + 64];
    if (gpu_missing && o->learner_kind == RD_LEARNER_ON_GPU) {
      add_why(o->why, sizeof o->why, "the GPU sum tree and storage are not used by the pipeline");
    } else if (gpu_missing) {
      snprintf(text, sizeof text, "GPU backend not available%s",
               m->learner != RD_DEV_GPU ? ""
               : !rd_learner_gpu_built() ? " (built without CUDA)"
               : gpu_index < 0 ? " (no usable GPU on this server)" : "");
      add_why(o->why, sizeof o->why, text);
    }
    /* The device runs nothing at all (assumed, no xclbin, the shim,
     * given up): one reason. Otherwise each part's own. */
    char dwhy[RD_ERROR_MSG_MAX];
    int device_runs = rd_placement_fpga_run(fpga, RD_FPGA_XRT, x.configured, 1, "", dwhy,
                                            sizeof dwhy) != RD_FPGA_RUN_CPU;
    if ((fpga_missing[0] || fpga_missing[1] || fpga_missing[2]) && !device_runs) {
      snprintf(text, sizeof text, "FPGA backend not available: %s", dwhy);
      add_why(o->why, sizeof o->why, text);
    } else {
      if (fpga_missing[0] && lwhy[0]) {
        snprintf(text, sizeof text, "the learner stays on the CPU: %s", lwhy);
        add_why(o->why, sizeof o->why, text);
      }
      if (fpga_missing[1] && rwhy[0]) {
        snprintf(text, sizeof text, "the replay module stays on the CPU: %s", rwhy);
        add_why(o->why, sizeof o->why, text);
      }
      if (fpga_missing[2])
        add_why(o->why, sizeof o->why, "the storage stays in host memory (the board's memory "
                "is not used)");
    }
  }
  compose_note(o);
}

void rd_placement_rmm_on_cpu(rd_placement_t *p, const char *why) {
  p->rmm_ops = NULL;
  if (strlen(p->running) == 5) p->running[2] = 'C';
  if (strchr(p->running, 'F') == NULL) p->fpga_csim = p->fpga_xrt = 0;
  char old[sizeof p->why];
  snprintf(old, sizeof old, "%s", p->why);
  snprintf(p->why, sizeof p->why, "the replay module stays on the CPU: %.250s", why);
  if (old[0]) add_why(p->why, sizeof p->why, old);
  compose_note(p);
}

/* Every time of the table (a reply's PlatformRow seconds) is a finite
 * number > 0, and the CPU pipeline's costs finite and >= 0: RD_EINVAL
 * naming the entry when it is the client's (an assumed GPU's profiles),
 * RD_EINTERNAL when it is this server's (a measurement, a stored profile,
 * the FPGA model of an operator's part file). Profiles hold latencies in
 * [RD_PROFILE_LATENCY_MIN_S, _MAX_S] and the model's inputs are bounded,
 * so this fails only where something upstream let a figure through. */
static int table_finite(const rd_ptable_t *t, rd_error_t *err) {
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    const rd_pdevice_t *p = &t->dev[d];
    if (!p->present) continue;
    const double v[2] = {p->t_learner, p->t_rmm};
    const rd_pt_source_t src[2] = {p->src_learner, p->src_rmm};
    for (int k = 0; k < 2; k++) {
      if (src[k] == RD_PT_NONE || (isfinite(v[k]) && v[k] > 0)) continue;
      return rd_error_set(err, src[k] == RD_PT_ASSUMED ? RD_EINVAL : RD_EINTERNAL,
                          "the %s %s time (%s) is %g s, not a finite number > 0",
                          rd_devkind_name((rd_devkind_t)d), k ? "rmm" : "learner",
                          rd_pt_source_name(src[k]), v[k]);
    }
  }
  const double extra[3] = {t->cpu_gather_s, t->cpu_handoff_s, t->cpu_pass_s};
  for (int i = 0; i < 3; i++)
    if (!(isfinite(extra[i]) && extra[i] >= 0))
      return rd_error_set(err, RD_EINTERNAL, "the cpu pipeline's %s cost is %g s",
                          i == 0 ? "gather" : i == 1 ? "handoff" : "pass", extra[i]);
  return RD_OK;
}

/* The part file for FPGA d: its model's name, or for an XRT board the
 * "u<digits>" token of an Alveo shell name ("xilinx_u250_gen3x16_xdma_
 * shell_4_1" is u250: XRT names a board by its shell). RD_OK or the exact
 * name's error. */
static int board_part(const rd_device_t *d, const char *dir, rd_fpga_part_t *part,
                      rd_error_t *err) {
  int rc = rd_devices_fpga_part(d->model, dir, part, err);
  if (rc == RD_OK || strcmp(d->backend, "xrt") != 0) return rc;
  for (const char *p = d->model; *p;) {
    size_t len = strcspn(p, "_-. ");
    if (len > 1 && len < RD_FPGA_NAME_MAX && p[0] == 'u' && strspn(p + 1, "0123456789") == len - 1) {
      char tok[RD_FPGA_NAME_MAX];
      memcpy(tok, p, len);
      tok[len] = '\0';
      rd_error_t terr;
      rd_error_clear(&terr);
      if (rd_devices_fpga_part(tok, dir, part, &terr) == RD_OK) return RD_OK;
    }
    p += len;
    if (*p) p++;
  }
  return rc;
}

int rd_placement_setup_xrt(const rd_config_t *c, rd_error_t *err) {
  const char *path = c->fpga_xclbin;
  xrt_setting_t none;
  memset(&none, 0, sizeof none);
  if (path[0] == '\0') {
#if RD_FPGA_XRT
    rd_fpga_xrt_rmm_configure(NULL, NULL);
    rd_learner_fpga_xrt_configure(NULL, NULL);
#endif
    xrt_set(&none);
    rd_devices_set_fpga_xclbin(0);
    return RD_OK;
  }
#if !RD_FPGA_XRT
  return rd_error_set(err, RD_EINVAL, "fpga-xclbin = %.100s: replayd was built without XRT "
                      "(meson option xrt), so no FPGA board can run an xclbin; build with "
                      "libxrt-dev and -Dxrt=enabled, or leave fpga-xclbin empty", path);
#else
  /* A wrong path is a start-up error, not a device fault at the first
   * registration that maps to the board. */
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return rd_error_set(err, RD_EINVAL, "fpga-xclbin = %.100s: cannot open: %s", path,
                        strerror(errno));
  char magic[8];
  size_t got = fread(magic, 1, sizeof magic, f);
  fclose(f);
  if (got != sizeof magic || memcmp(magic, "xclbin2", 8) != 0)
    return rd_error_set(err, RD_EINVAL, "fpga-xclbin = %.100s: not an xclbin (its first bytes "
                        "are not \"xclbin2\")", path);
  /* The replay kernel holds one tree per board and the module is set up
   * for one board: the first usable one (placement tries boards in list
   * order too). No board: configured all the same, never selected. */
  rd_device_t devs[RD_MAX_DEVICES];
  size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
  const rd_device_t *board = NULL;
  for (size_t i = 0; i < nd && board == NULL; i++)
    if (strcmp(devs[i].kind, "fpga") == 0 && strcmp(devs[i].backend, "xrt") == 0 &&
        rd_device_usable(&devs[i]))
      board = &devs[i];
  rd_fpga_xrt_rmm_params_t p;
  rd_fpga_xrt_rmm_params_default(&p);
  if (strlen(path) >= sizeof p.xclbin)
    return rd_error_set(err, RD_EINVAL, "fpga-xclbin: the path is longer than %zu bytes",
                        sizeof p.xclbin - 1);
  snprintf(p.xclbin, sizeof p.xclbin, "%s", path);
  p.device = board != NULL ? board->index : 0;
  p.k = c->fpga_xclbin_shape.k;
  p.capacity = c->fpga_xclbin_shape.n;
  p.max_batch = c->fpga_xclbin_shape.batch;
  p.max_leaf = rd_fpga_xclbin_max_leaf(&c->fpga_xclbin_shape);
  rd_error_t e;
  rd_error_clear(&e);
  int rc = rd_fpga_xrt_rmm_configure(&p, &e);
  if (rc == RD_OK && (rc = rd_learner_fpga_xrt_configure(path, &e)) != RD_OK)
    rd_fpga_xrt_rmm_configure(NULL, NULL);
  if (rc) return rd_error_set(err, rc, "fpga-xclbin-shape/fpga-xclbin: %s", e.msg);
  xrt_setting_t x = {1, p.device, c->fpga_xclbin_shape};
  xrt_set(&x);
  rd_devices_set_fpga_xclbin(1);
  if (board != NULL)
    rd_log_info("placement", "fpga-xclbin %.200s: the replay kernel (fanout %u, %u leaves, "
                "batch %u, leaves up to %llu) and the learner kernel run on fpga%u (%s) where "
                "workloads are mapped to it; replayd has never run on a board", path, p.k,
                p.capacity, p.max_batch, (unsigned long long)p.max_leaf, board->index,
                board->model);
  else
    rd_log_warn("placement", "fpga-xclbin %.200s: no usable XRT board is listed, so nothing "
                "runs on an FPGA board", path);
  return RD_OK;
#endif
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
  if (pc != NULL) {
    o.learner_pin = pc->learner_pin;
    o.sampler_pin = pc->sampler_pin;
  }

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
   * (by its model: a C-simulation's is its part's name; board_part), the
   * usable C-simulation first, since without an xclbin it is the only FPGA
   * anything runs on; with an xclbin configured, a board first (the
   * operator deployed one for it). */
  const rd_device_t *fpga = NULL; /* the present FPGA of the FPGA row */
  rd_fpga_part_t fpga_part;
  memset(&fpga_part, 0, sizeof fpga_part);
  xrt_setting_t xs;
  xrt_get(&xs);
  if (assume->fpga != NULL) {
    fpga_row(assume->fpga, tc, pc, "assumed", &o);
  } else if (!assume->ignore_present) {
    for (int pass = 0; pass < 2 && fpga == NULL; pass++)
      for (size_t i = 0; i < nd && fpga == NULL; i++) {
        const rd_device_t *d = &devs[i];
        const int want_csim = (pass == 0) != (xs.configured != 0);
        if (strcmp(d->kind, "fpga") != 0 || (strcmp(d->backend, "csim") == 0) != want_csim)
          continue;
        rd_fpga_part_t part;
        rd_error_t perr;
        rd_error_clear(&perr);
        if (!rd_device_usable(d)) /* given up after a failure, or XRT's no-op shim */
          snprintf(o.detail[RD_DEV_FPGA], sizeof o.detail[RD_DEV_FPGA], "fpga%u %.180s",
                   d->index, d->status);
        else if (board_part(d, fpga_parts_dir, &part, &perr) != RD_OK)
          snprintf(o.detail[RD_DEV_FPGA], sizeof o.detail[RD_DEV_FPGA],
                   "fpga%u (%.40s): no model figures: %.130s", d->index, d->model, perr.msg);
        else
          fpga = d;
        if (fpga == NULL) continue;
        fpga_part = part;
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
  if (fpga != NULL) {
    o.fpga_device = fpga->index;
    snprintf(o.fpga_part, sizeof o.fpga_part, "%.*s", (int)(sizeof o.fpga_part - 1),
             fpga_part.name);
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

  if ((rc = table_finite(&o.table, err)) != RD_OK) return rc;

  snprintf(o.running, sizeof o.running, "C-C-C");
  o.learner_kind = RD_LEARNER_ON_CPU;
  rd_error_t merr;
  rd_error_clear(&merr);
  rc = rd_map(&o.table, &o.mapping, &merr);
  if (rc == RD_OK) {
    o.mapped = 1;
    rd_mapping_format(&o.mapping, o.code, sizeof o.code);
    rd_placement_run_mapping(&o, gpu_index, fpga, tc, &pc->learner);
  } else if (rc == RD_ERANGE) {
    /* Finite times whose prediction is not (mapper.h): every time is
     * bounded, so the workload's own figures put it out of range. */
    return rd_error_set(err, RD_EINVAL, "the mapping cannot be predicted: %.200s", merr.msg);
  } else {
    snprintf(o.note, sizeof o.note, "not mapped (%.120s); running %s", merr.msg, o.running);
  }
  o.register_ms = (now_s() - t0) * 1e3;
  *out = o;
  return RD_OK;
}
