/* xrt_env.h - XRT as the tests run it here (shared/stack-notes.md): XRT
 * loads its shims from $XILINX_XRT/lib, which Debian does not provide, so
 * a test makes DIR/xrt whose lib links to the multiarch directory and
 * points XILINX_XRT at it; and a file XRT must refuse. Header-only, for
 * the tests that call XRT (they link tests/support for rdt_dir.h). */
#ifndef RD_TEST_XRT_ENV_H
#define RD_TEST_XRT_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdt_dir.h"
#include "xclbin_gen.h"

/* Whether the build has XRT's host path (meson passes it; 0 when not). */
#ifndef RD_XRT_BUILT
#define RD_XRT_BUILT 0
#endif

#ifndef RD_XRT_LIBDIR
#define RD_XRT_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif

/* XILINX_XRT = dir/xrt (made, with lib -> RD_XRT_LIBDIR), and
 * XCL_EMULATION_MODE = mode (NULL: unset). 0, or -1 if the folder or the
 * link cannot be made. */
static inline int xrt_env_setup(const char *dir, const char *mode) {
  char root[256], lib[272];
  snprintf(root, sizeof root, "%s/xrt", dir);
  snprintf(lib, sizeof lib, "%s/lib", root);
  if (mkdir(root, 0700) != 0 || symlink(RD_XRT_LIBDIR, lib) != 0) return -1;
  setenv("XILINX_XRT", root, 1);
  if (mode != NULL)
    setenv("XCL_EMULATION_MODE", mode, 1);
  else
    unsetenv("XCL_EMULATION_MODE");
  return 0;
}

/* A 4 KiB file that is no xclbin (no "xclbin2" magic), for the refusals.
 * 0, or -1 if it cannot be written. */
static inline int xrt_env_garbage_file(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  for (int i = 0; i < 4096; i++) fputc((i * 7919) & 0xff, f);
  return fclose(f) == 0 ? 0 : -1;
}

/* DIR/name written as an xclbin of the n kernels, its path into path (cap
 * bytes). 0, or -1 if the path does not fit or the file cannot be written. */
static inline int xrt_env_xclbin(char *path, size_t cap, const char *dir, const char *name,
                                 const rd_fpga_kernel_desc_t *const *kernels, size_t n) {
  if ((size_t)snprintf(path, cap, "%s", rdt_path(dir, name)) >= cap) return -1;
  rd_error_t err;
  return rd_fpga_xclbin_write(path, kernels, n, &err) == RD_OK ? 0 : -1;
}

/* A scratch directory for a test of XRT's no-op shim: a new directory
 * (rdt_tmpdir(tag), its path in dir), XRT set up in it (xrt_env_setup,
 * mode noop) and DIR/garbage.xclbin (xrt_env_garbage_file). 0, or -1.
 * rdt_rmtree(dir) removes it all. */
static inline int xrt_env_noop_dir(char *dir, size_t len, const char *tag) {
  if (rdt_tmpdir(dir, len, tag) != 0 || xrt_env_setup(dir, "noop") != 0) return -1;
  return xrt_env_garbage_file(rdt_path(dir, "garbage.xclbin"));
}

#endif
