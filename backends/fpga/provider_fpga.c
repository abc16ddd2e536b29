/* provider_fpga.c - the FPGA's device provider (provider_fpga.h): the
 * part files, the C-simulation device, the fpga-xclbin setting, the FPGA
 * row from the model, and which kernel runs a part mapped to an FPGA.
 *
 * Boards are found through XRT only in a build with XRT: the XRT half
 * (provider_fpga_xrt.h) is provider_fpga_xrt.c then, the one file of the
 * provider that includes an XRT header, else provider_fpga_noxrt.c. The
 * C-simulation FPGA needs no XRT: it is this process running the kernels'
 * C code (kernels/, csim_rmm.h, learner_backend_fpga.c), modelled as a
 * part file's FPGA, added when the `fpga-csim` setting names a part. */
#include "provider_fpga.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "csim_rmm.h"
#include "log.h"
#include "provider.h"
#include "provider_fpga_xrt.h"
#include "rd_build_info.h"

/* What an XRT board runs, and how far that is verified; keep it true.
 * With an xclbin, the replay module and the learner mapped to the board
 * run through its kernels (rd_fpga_provider_run); nothing of replayd has
 * run on a board, so the status says so either way. */
void rd_fpga_provider_board_text(int xclbin, rd_device_t *d) {
  if (xclbin) {
    snprintf(d->capabilities, sizeof d->capabilities, "rmm,learner: XRT (fpga-xclbin)");
    snprintf(d->status, sizeof d->status,
             "ok (XRT board): the replay module and learner mapped here run the kernels of "
             "the fpga-xclbin setting; replayd has never run on a board");
  } else {
    snprintf(d->capabilities, sizeof d->capabilities, "none (no xclbin: model only)");
    snprintf(d->status, sizeof d->status,
             "ok (XRT board); no xclbin configured (the fpga-xclbin setting), so nothing runs "
             "on it; replayd has never run on a board");
  }
}

/* ---- Where the part files are ----
 *
 * Installed, the part files are in rd_fpga_parts_default_dir(). A replayd
 * run from its build directory (scripts/run, the README's commands, the
 * tests) has none there until `meson install`, so it also looks in the
 * source tree it was built from. "Run from its build directory" is decided
 * by where the executable is, not by a compile-time switch: the installed
 * binary is the same file, copied elsewhere. */

static struct {
  pthread_once_t once;
  const char *dirs[2];
  size_t n;
} search = {PTHREAD_ONCE_INIT, {NULL, NULL}, 0};

/* Whether this executable lives in the daemon's build directory. */
static bool run_from_build_dir(void) {
  char exe[PATH_MAX], build[PATH_MAX];
  if (realpath("/proc/self/exe", exe) == NULL || realpath(RD_DAEMON_BUILD_DIR, build) == NULL)
    return false;
  char *slash = strrchr(exe, '/');
  if (slash == NULL) return false;
  *slash = '\0';
  return strcmp(exe, build) == 0;
}

static void find_search_dirs(void) {
  search.dirs[search.n++] = rd_fpga_parts_default_dir();
  if (run_from_build_dir() && strcmp(RD_FPGA_PARTS_SRC_DIR, search.dirs[0]) != 0)
    search.dirs[search.n++] = RD_FPGA_PARTS_SRC_DIR;
}

size_t rd_fpga_provider_parts_dirs(const char *parts_dir, const char *dirs[2]) {
  if (parts_dir != NULL && parts_dir[0] != '\0') {
    dirs[0] = parts_dir;
    return 1;
  }
  pthread_once(&search.once, find_search_dirs);
  for (size_t i = 0; i < search.n; i++) dirs[i] = search.dirs[i];
  return search.n;
}

/* "DIR (known: a, b)", "DIR (no such directory)", ... appended to buf. */
static size_t describe_dir(char *buf, size_t cap, size_t used, const char *dir) {
  if (used >= cap) return used;
  struct stat st;
  if (stat(dir, &st) != 0)
    return used + (size_t)snprintf(buf + used, cap - used, "%s (%s)", dir,
                                   errno == ENOENT ? "no such directory" : strerror(errno));
  rd_fpga_part_t known[RD_FPGA_MAX_PARTS];
  size_t n = 0;
  if (rd_fpga_parts_load(dir, known, RD_FPGA_MAX_PARTS, &n, NULL) != RD_OK)
    return used + (size_t)snprintf(buf + used, cap - used, "%s (no part files that load)", dir);
  used += (size_t)snprintf(buf + used, cap - used, "%s (known:", dir);
  for (size_t i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s %s", i ? "," : "", known[i].name);
  if (used < cap) used += (size_t)snprintf(buf + used, cap - used, ")");
  return used;
}

int rd_fpga_provider_part(const char *name, const char *parts_dir, rd_fpga_part_t *out,
                          rd_error_t *err) {
  const char *dirs[2];
  size_t n = rd_fpga_provider_parts_dirs(parts_dir, dirs);
  for (size_t i = 0; i < n; i++) {
    rd_error_t e;
    rd_error_clear(&e);
    int rc = rd_fpga_part_find(name, dirs[i], out, &e);
    if (rc == RD_OK) return RD_OK;
    if (rc != RD_ENOTFOUND) return rd_error_set(err, rc, "%s", e.msg);
  }
  char where[RD_ERROR_MSG_MAX];
  size_t used = 0;
  where[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && used < sizeof where)
      used += (size_t)snprintf(where + used, sizeof where - used, " or ");
    used = describe_dir(where, sizeof where, used, dirs[i]);
  }
  if (parts_dir != NULL && parts_dir[0] != '\0')
    return rd_error_set(err, RD_ENOTFOUND, "no FPGA part '%s' in %s, the --fpga-parts-dir "
                        "directory", name, where);
  return rd_error_set(err, RD_ENOTFOUND, "no FPGA part '%s' in %s; give the directory of part "
                      "files with --fpga-parts-dir", name, where);
}

/* What a C-simulation runs and how far it is verified; keep it true. */
#define RD_CSIM_CAPABILITIES "rmm,storage(host memory),learner: C-simulation"

int rd_fpga_provider_csim(const char *part, const char *parts_dir, uint32_t index,
                          rd_device_t *out, rd_error_t *err) {
  if (part == NULL || part[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "fpga-csim: no part named");
  rd_fpga_part_t p;
  int rc = rd_fpga_provider_part(part, parts_dir, &p, err);
  if (rc) return rc;
  rd_device_t *d = out;
  memset(d, 0, sizeof *d);
  snprintf(d->kind, sizeof d->kind, "fpga");
  snprintf(d->backend, sizeof d->backend, "csim");
  snprintf(d->isa, sizeof d->isa, "csim");
  snprintf(d->model, sizeof d->model, "%s", p.name);
  d->index = index;
  d->cores = p.slrs;
  d->memory_bytes = 0; /* its storage is this host's memory */
  snprintf(d->capabilities, sizeof d->capabilities, "%s", RD_CSIM_CAPABILITIES);
  snprintf(d->name, sizeof d->name, "%.40s C-simulation (no board), %u SLRs, %u MHz",
           p.name, p.slrs, p.clock_mhz);
  snprintf(d->status, sizeof d->status,
           "ok: C-simulation (no board): the replay kernel's C code runs in the daemon; "
           "figures for %.40s (%.60s) are the model's, never measured on an FPGA",
           p.name, p.device);
  rd_device_fingerprint(d);
  return RD_OK;
}

/* Under the device list's lock (rd_devices_add): index after every FPGA
 * listed (XRT boards keep XRT's indices), one C-simulation at most. */
typedef struct {
  const char *part, *parts_dir;
} csim_args_t;

static int make_csim(const rd_device_t *list, size_t n, rd_device_t *out, void *ctx,
                     rd_error_t *err) {
  const csim_args_t *a = ctx;
  uint32_t fpgas = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(list[i].kind, "fpga") != 0) continue;
    if (list[i].index >= fpgas) fpgas = list[i].index + 1;
    if (strcmp(list[i].backend, "csim") == 0)
      return rd_error_set(err, RD_EINVAL, "fpga-csim: a C-simulation FPGA (%s) is already listed",
                          list[i].model);
  }
  return rd_fpga_provider_csim(a->part, a->parts_dir, fpgas, out, err);
}

int rd_fpga_provider_add_csim(const char *part, const char *parts_dir, rd_error_t *err) {
  csim_args_t a = {part, parts_dir};
  return rd_devices_add(make_csim, &a, err);
}

/* ------------------------------------------------------------------ */
/* The fpga-xclbin setting                                              */
/* ------------------------------------------------------------------ */

/* The setting as placements and boards' status text use it. */
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

int rd_fpga_provider_xclbin(void) {
  xrt_setting_t x;
  xrt_get(&x);
  return x.configured;
}

/* A usable XRT board's status and capabilities for the setting; a board
 * given up after a failure keeps saying why. */
static void board_text(rd_device_t *d, void *ctx) {
  if (strcmp(d->kind, "fpga") == 0 && strcmp(d->backend, "xrt") == 0 && rd_device_usable(d))
    rd_fpga_provider_board_text(*(const int *)ctx, d);
}

/* The setting, and the boards' status text (listed ones rewritten, later
 * discovery reads it). */
static void xrt_set(const xrt_setting_t *x) {
  pthread_mutex_lock(&xrt_mu);
  xrt_setting = *x;
  pthread_mutex_unlock(&xrt_mu);
  int configured = x->configured;
  rd_devices_update(board_text, &configured);
}

int rd_fpga_provider_setup_xrt(const rd_config_t *c, rd_error_t *err) {
  const char *path = c->fpga_xclbin;
  xrt_setting_t none;
  memset(&none, 0, sizeof none);
  if (path[0] == '\0') {
    rd_fpga_provider_xrt_configure(NULL, 0, NULL, NULL);
    xrt_set(&none);
    return RD_OK;
  }
  if (!rd_fpga_provider_xrt_built())
    return rd_error_set(err, RD_EINVAL, "fpga-xclbin = %.100s: replayd was built without XRT "
                        "(meson option xrt), so no FPGA board can run an xclbin; build with "
                        "libxrt-dev and -Dxrt=enabled, or leave fpga-xclbin empty", path);
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
  const uint32_t device = board != NULL ? board->index : 0;
  int rc = rd_fpga_provider_xrt_configure(path, device, &c->fpga_xclbin_shape, err);
  if (rc) return rc;
  xrt_setting_t x = {1, device, c->fpga_xclbin_shape};
  xrt_set(&x);
  const rd_fpga_xclbin_shape_t *sh = &c->fpga_xclbin_shape;
  if (board != NULL)
    rd_log_info("placement", "fpga-xclbin %.200s: the replay kernel (fanout %u, %u leaves, "
                "batch %u, leaves up to %llu) and the learner kernel run on fpga%u (%s) where "
                "workloads are mapped to it; replayd has never run on a board", path, sh->k,
                sh->n, sh->batch, (unsigned long long)rd_fpga_xclbin_max_leaf(sh),
                board->index, board->model);
  else
    rd_log_warn("placement", "fpga-xclbin %.200s: no usable XRT board is listed, so nothing "
                "runs on an FPGA board", path);
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Figures: the model                                                   */
/* ------------------------------------------------------------------ */

int rd_fpga_provider_workload(const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
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
  int rc = rd_fpga_provider_workload(tc, pc, &w, &err);
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

/* The part file for FPGA d: its model's name, or for an XRT board the
 * "u<digits>" token of an Alveo shell name ("xilinx_u250_gen3x16_xdma_
 * shell_4_1" is u250: XRT names a board by its shell). RD_OK or the exact
 * name's error. */
static int board_part(const rd_device_t *d, const char *dir, rd_fpga_part_t *part,
                      rd_error_t *err) {
  int rc = rd_fpga_provider_part(d->model, dir, part, err);
  if (rc == RD_OK || strcmp(d->backend, "xrt") != 0) return rc;
  for (const char *p = d->model; *p;) {
    size_t len = strcspn(p, "_-. ");
    if (len > 1 && len < RD_FPGA_NAME_MAX && p[0] == 'u' && strspn(p + 1, "0123456789") == len - 1) {
      char tok[RD_FPGA_NAME_MAX];
      memcpy(tok, p, len);
      tok[len] = '\0';
      rd_error_t terr;
      rd_error_clear(&terr);
      if (rd_fpga_provider_part(tok, dir, part, &terr) == RD_OK) return RD_OK;
    }
    p += len;
    if (*p) p++;
  }
  return rc;
}

/* The FPGA row: an assumed part, or this server's FPGA with a part file
 * (by its model: a C-simulation's is its part's name; board_part), the
 * usable C-simulation first, since without an xclbin it is the only FPGA
 * anything runs on; with an xclbin configured, a board first (the
 * operator deployed one for it). */
static int figures(const rd_dse_workload_t *w, const rd_device_t *devs, size_t nd,
                   rd_placement_t *o, rd_error_t *err) {
  (void)err;
  const rd_table_config_t *tc = w->tc;
  if (w->assume->fpga != NULL) {
    fpga_row(w->assume->fpga, tc, w->pc, "assumed", o);
    return RD_OK;
  }
  if (w->assume->ignore_present) return RD_OK;
  const rd_device_t *fpga = NULL; /* the present FPGA of the FPGA row */
  rd_fpga_part_t fpga_part;
  memset(&fpga_part, 0, sizeof fpga_part);
  const int xclbin = rd_fpga_provider_xclbin();
  for (int pass = 0; pass < 2 && fpga == NULL; pass++)
    for (size_t i = 0; i < nd && fpga == NULL; i++) {
      const rd_device_t *d = &devs[i];
      const int want_csim = (pass == 0) != (xclbin != 0);
      if (strcmp(d->kind, "fpga") != 0 || (strcmp(d->backend, "csim") == 0) != want_csim)
        continue;
      rd_fpga_part_t part;
      rd_error_t perr;
      rd_error_clear(&perr);
      if (!rd_device_usable(d)) /* given up after a failure, or XRT's no-op shim */
        snprintf(o->detail[RD_DEV_FPGA], sizeof o->detail[RD_DEV_FPGA], "fpga%u %.180s",
                 d->index, d->status);
      else if (board_part(d, w->fpga_parts_dir, &part, &perr) != RD_OK)
        snprintf(o->detail[RD_DEV_FPGA], sizeof o->detail[RD_DEV_FPGA],
                 "fpga%u (%.40s): no model figures: %.130s", d->index, d->model, perr.msg);
      else
        fpga = d;
      if (fpga == NULL) continue;
      fpga_part = part;
      int csim = strcmp(d->backend, "csim") == 0;
      fpga_row(&part, tc, w->pc, csim ? "C-simulated" : "present", o);
      snprintf(o->fingerprint[RD_DEV_FPGA], sizeof o->fingerprint[RD_DEV_FPGA], "%s",
               d->fingerprint);
      char why[160];
      if (csim && o->table.dev[RD_DEV_FPGA].src_rmm != RD_PT_NONE &&
          !rd_fpga_csim_rmm_fits(tc->capacity, tc->fanout, why, sizeof why)) {
        /* The model would fit it on a board; the built kernels do not. */
        o->table.dev[RD_DEV_FPGA].src_rmm = RD_PT_NONE;
        o->table.dev[RD_DEV_FPGA].t_rmm = 0;
        size_t at = strlen(o->detail[RD_DEV_FPGA]);
        snprintf(o->detail[RD_DEV_FPGA] + at, sizeof o->detail[RD_DEV_FPGA] - at,
                 "; no rmm: %s", why);
      }
    }
  if (fpga != NULL) {
    o->device[RD_DEV_FPGA] = *fpga;
    o->has_device[RD_DEV_FPGA] = 1;
    o->fpga_device = fpga->index;
    snprintf(o->fpga_part, sizeof o->fpga_part, "%.*s", (int)(sizeof o->fpga_part - 1),
             fpga_part.name);
  }
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* What runs here                                                       */
/* ------------------------------------------------------------------ */

rd_fpga_run_t rd_fpga_provider_run(const rd_device_t *d, int xrt, int xclbin, int fits,
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
  if (d->index != x->device) {
    snprintf(why, len, "the XRT replay module runs on fpga%u (the first usable board at "
             "start), not fpga%u", x->device, d->index);
    return 0;
  }
  if (rd_fpga_provider_xrt_rmm_memsize(tc->capacity, tc->fanout) > 0) return 1;
  snprintf(why, len, "the xclbin's replay kernel (fpga-xclbin-shape: K %u, N %u, leaves <= "
           "%llu) cannot hold this table (fanout %u, %u items, leaves <= %llu)",
           x->shape.k, x->shape.n, (unsigned long long)rd_fpga_xclbin_max_leaf(&x->shape),
           tc->fanout, tc->capacity,
           (unsigned long long)(UINT64_C(0x7fffffffffffffff) / (tc->capacity ? tc->capacity : 1)));
  return 0;
}

/* Who runs part on FPGA d (NULL: assumed): a kernel build's limits (the
 * learner's layers, width, batch; the replay module's tree) keep a part
 * on the CPU, and why says so. The storage is the table's host memory
 * whatever runs: it "runs" on the C-simulation FPGA, whose storage that
 * is, and not on a board (its memory is not used). */
static int can_run(const rd_device_t *d, rd_part_t part, const rd_table_config_t *tc,
                   const rd_learner_config_t *lc, rd_dse_runner_t *run, char *why, size_t len) {
  xrt_setting_t x;
  xrt_get(&x);
  const int xrt = rd_fpga_provider_xrt_built();
  memset(run, 0, sizeof *run);
  if (part == RD_PART_STORAGE) {
    if (d != NULL && strcmp(d->backend, "csim") == 0) return 1;
    snprintf(why, len, "the storage stays in host memory (the board's memory is not used)");
    return 0;
  }
  rd_fpga_run_t how;
  if (part == RD_PART_LEARNER) {
    rd_error_t lerr;
    rd_error_clear(&lerr);
    int fits = rd_learner_fpga_supports(lc, &lerr); /* 1: the learner kernel takes it */
    how = rd_fpga_provider_run(d, xrt, x.configured, fits, lerr.msg, why, len);
    if (how == RD_FPGA_RUN_CPU) return 0;
    run->learner_kind = RD_LEARNER_ON_FPGA;
    run->learner_device = d->index;
    if (how == RD_FPGA_RUN_XRT) run->learner_ops = rd_fpga_provider_xrt_learner_ops();
    return 1;
  }
  char fw[RD_ERROR_MSG_MAX] = "";
  int fits = d != NULL && rmm_fits(d, tc, &x, fw, sizeof fw);
  how = rd_fpga_provider_run(d, xrt, x.configured, fits, fw, why, len);
  if (how == RD_FPGA_RUN_CPU) return 0;
  run->rmm_ops = how == RD_FPGA_RUN_CSIM ? &rd_fpga_csim_rmm_ops : rd_fpga_provider_xrt_rmm_ops();
  return 1;
}

/* The parts mapped to the FPGA row's device that run there, and why the
 * others do not: one reason when the device runs nothing at all (assumed,
 * no xclbin, the shim, given up), otherwise each part's own. */
static void bind(rd_placement_t *o, const rd_table_config_t *tc, const rd_learner_config_t *lc,
                 char run[RD_PART_COUNT]) {
  const rd_device_t *d = o->has_device[RD_DEV_FPGA] ? &o->device[RD_DEV_FPGA] : NULL;
  char why[RD_PART_COUNT][RD_ERROR_MSG_MAX];
  int runs[RD_PART_COUNT];
  const int any_missing = rd_provider_bind_parts(&rd_provider_fpga, o, tc, lc, run, runs, why);
  const int any_f = run[0] == 'F' || run[1] == 'F' || run[2] == 'F';
  const int csim = d != NULL && strcmp(d->backend, "csim") == 0;
  o->fpga_csim = any_f && csim;
  o->fpga_xrt = any_f && !csim;
  if (!any_missing) return;
  xrt_setting_t x;
  xrt_get(&x);
  char dwhy[RD_ERROR_MSG_MAX], text[RD_ERROR_MSG_MAX + 64];
  if (rd_fpga_provider_run(d, rd_fpga_provider_xrt_built(), x.configured, 1, "", dwhy,
                           sizeof dwhy) == RD_FPGA_RUN_CPU) {
    snprintf(text, sizeof text, "FPGA backend not available: %s", dwhy);
    rd_provider_add_why(o->why, sizeof o->why, text);
    return;
  }
  const rd_mapping_t *m = &o->mapping;
  const int missing[RD_PART_COUNT] = {m->learner == RD_DEV_FPGA && !runs[0],
                                      m->rmm == RD_DEV_FPGA && !runs[1],
                                      m->storage == RD_DEV_FPGA && !runs[2]};
  if (missing[RD_PART_LEARNER] && why[RD_PART_LEARNER][0]) {
    snprintf(text, sizeof text, "the learner stays on the CPU: %s", why[RD_PART_LEARNER]);
    rd_provider_add_why(o->why, sizeof o->why, text);
  }
  if (missing[RD_PART_RMM] && why[RD_PART_RMM][0]) {
    snprintf(text, sizeof text, "the replay module stays on the CPU: %s", why[RD_PART_RMM]);
    rd_provider_add_why(o->why, sizeof o->why, text);
  }
  if (missing[RD_PART_STORAGE]) rd_provider_add_why(o->why, sizeof o->why, why[RD_PART_STORAGE]);
}

/* The note's gloss while an F runs: C-simulation or board; nothing (and
 * neither flag) once no F is left. */
static void running(rd_placement_t *o, char *text, size_t len) {
  if (len > 0) text[0] = '\0';
  if (strchr(o->running, 'F') == NULL) o->fpga_csim = o->fpga_xrt = 0;
  if (o->fpga_csim)
    snprintf(text, len, "FPGA: C-simulation of %s, no board; its storage is host memory",
             o->fpga_part);
  else if (o->fpga_xrt)
    snprintf(text, len, "FPGA: XRT board fpga%u, %s model, fpga-xclbin kernels; replayd has "
             "never run on a board", o->fpga_device, o->fpga_part);
}

const rd_device_provider_t rd_provider_fpga = {
    .kind = "fpga",
    .row = RD_DEV_FPGA,
    .discover = rd_fpga_provider_discover,
    .fingerprint_key = NULL,
    .profiler = NULL,
    .check = NULL,
    .figures = figures,
    .can_run = can_run,
    .bind = bind,
    .running = running,
};
