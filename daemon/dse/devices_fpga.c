/* devices_fpga.c - FPGAs: the C-simulation device and the XRT probe's
 * entry (devices.h).
 *
 * Boards are found through XRT only in a build with XRT (meson option
 * `xrt`, RD_FPGA_XRT=1): devices_xrt.c, the one daemon file that includes
 * an XRT header. The C-simulation FPGA needs no XRT: it is this process
 * running the kernels' C code (backends/fpga/kernels, csim_rmm.h), modelled
 * as a part file's FPGA, added when the `fpga-csim` setting names a part. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "devices.h"
#include "model.h"
#include "rd_build_info.h"

#ifndef RD_FPGA_XRT
#define RD_FPGA_XRT 0
#endif

#if RD_FPGA_XRT
size_t rd_devices_probe_xrt(rd_device_t *out, size_t max, char *why, size_t len);
#endif

size_t rd_devices_probe_fpgas(rd_device_t *out, size_t max, char *why, size_t len) {
#if RD_FPGA_XRT
  return rd_devices_probe_xrt(out, max, why, len);
#else
  (void)out;
  (void)max;
  snprintf(why, len, "built without XRT: no FPGA discovery");
  return 0;
#endif
}

/* What an XRT board runs, and how far that is verified; keep it true.
 * With an xclbin, placement runs the replay module and the learner mapped
 * to the board through its kernels (placement.h); nothing of replayd has
 * run on a board, so the status says so either way. */
void rd_devices_xrt_board_text(int xclbin, rd_device_t *d) {
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

size_t rd_devices_fpga_parts_dirs(const char *parts_dir, const char *dirs[2]) {
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

int rd_devices_fpga_part(const char *name, const char *parts_dir, rd_fpga_part_t *out,
                         rd_error_t *err) {
  const char *dirs[2];
  size_t n = rd_devices_fpga_parts_dirs(parts_dir, dirs);
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

int rd_devices_fpga_csim(const char *part, const char *parts_dir, uint32_t index,
                         rd_device_t *out, rd_error_t *err) {
  if (part == NULL || part[0] == '\0')
    return rd_error_set(err, RD_EINVAL, "fpga-csim: no part named");
  rd_fpga_part_t p;
  int rc = rd_devices_fpga_part(part, parts_dir, &p, err);
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
