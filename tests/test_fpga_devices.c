/* test_fpga_devices.c - FPGA devices (backends/fpga/provider_fpga.c, provider_fpga_xrt.c):
 * the C-simulation device of the `fpga-csim` setting, and, in a build with
 * XRT, board discovery through XRT in the situations this machine can
 * make: XILINX_XRT unset (no XRT call: XRT would abort the process),
 * XRT's no-op shim (XCL_EMULATION_MODE=noop: one device, listed as what it
 * is and never usable), no board (XRT opens none), and an emulation mode
 * that needs Vitis (refused). XRT's mode is fixed once the process first
 * opens a device, so meson runs this program once per mode (argv[1]:
 * "unset", "noop", "noboard", "sw_emu"); the C-simulation cases run in
 * every mode.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices.h"
#include "log.h"
#include "provider_fpga.h"

#ifndef RD_FPGA_PARTS_DIR
#error "RD_FPGA_PARTS_DIR: the part files' directory"
#endif
#include "xrt_env.h"

static const char *mode = "unset";
static char dir[64];

static void assert_fingerprint_form(const char *fp) {
  assert_int_equal(strncmp(fp, "fpga-", 5), 0);
  assert_int_equal(strlen(fp), 21);
  for (size_t i = 5; i < 21; i++) assert_non_null(strchr("0123456789abcdef", fp[i]));
}

/* ------------------------------------------------------------------ */
/* The C-simulation device                                              */
/* ------------------------------------------------------------------ */

static void test_csim_device(void **state) {
  (void)state;
  rd_device_t d;
  rd_error_t err;
  assert_int_equal(rd_fpga_provider_csim("u250", RD_FPGA_PARTS_DIR, 3, &d, &err), RD_OK);
  assert_string_equal(d.kind, "fpga");
  assert_string_equal(d.backend, "csim");
  assert_string_equal(d.isa, "csim");
  assert_string_equal(d.model, "u250");
  assert_int_equal(d.index, 3);
  assert_int_equal(d.cores, 4);
  assert_int_equal(d.memory_bytes, 0);
  assert_true(rd_device_usable(&d));
  assert_non_null(strstr(d.status, "C-simulation (no board)"));
  assert_non_null(strstr(d.name, "C-simulation (no board)"));
  assert_non_null(strstr(d.capabilities, "C-simulation"));
  assert_fingerprint_form(d.fingerprint);
  /* Stable, per part, and never a board's: the same model through XRT
   * (backend "xrt") has another fingerprint. */
  rd_device_t again, other, board;
  assert_int_equal(rd_fpga_provider_csim("u250", RD_FPGA_PARTS_DIR, 0, &again, &err), RD_OK);
  assert_string_equal(again.fingerprint, d.fingerprint);
  assert_int_equal(rd_fpga_provider_csim("u280", RD_FPGA_PARTS_DIR, 0, &other, &err), RD_OK);
  assert_string_not_equal(other.fingerprint, d.fingerprint);
  board = d;
  snprintf(board.backend, sizeof board.backend, "xrt");
  snprintf(board.isa, sizeof board.isa, "xrt");
  rd_device_fingerprint(&board);
  assert_string_not_equal(board.fingerprint, d.fingerprint);
}

static void test_csim_bad_parts(void **state) {
  (void)state;
  rd_device_t d;
  rd_error_t err;
  assert_int_equal(rd_fpga_provider_csim("u999", RD_FPGA_PARTS_DIR, 0, &d, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "u999"));
  assert_non_null(strstr(err.msg, "u250")); /* what there is */
  assert_int_equal(rd_fpga_provider_csim("../u250", RD_FPGA_PARTS_DIR, 0, &d, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_provider_csim("", RD_FPGA_PARTS_DIR, 0, &d, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_provider_csim("u250", "/nonexistent-parts", 0, &d, &err), RD_ENOTFOUND);
}

/* Where parts are looked up: the setting's directory alone when given;
 * otherwise the installed directory, and the source tree only for a
 * replayd run from its build directory, which this test program is not
 * (it stands for an installed daemon: the source tree is never read).
 * A miss names every directory searched and the flag. */
static void test_parts_search(void **state) {
  (void)state;
  const char *dirs[2] = {NULL, NULL};
  assert_int_equal(rd_fpga_provider_parts_dirs(RD_FPGA_PARTS_DIR, dirs), 1);
  assert_string_equal(dirs[0], RD_FPGA_PARTS_DIR);
  assert_int_equal(rd_fpga_provider_parts_dirs(NULL, dirs), 1);
  assert_string_equal(dirs[0], rd_fpga_parts_default_dir());
  assert_int_equal(rd_fpga_provider_parts_dirs("", dirs), 1);
  assert_string_equal(dirs[0], rd_fpga_parts_default_dir());

  rd_fpga_part_t p;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_fpga_provider_part("u280", RD_FPGA_PARTS_DIR, &p, &err), RD_OK);
  assert_string_equal(p.name, "u280");
  assert_int_equal(rd_fpga_provider_part("u999", RD_FPGA_PARTS_DIR, &p, &err), RD_ENOTFOUND);
  char want[300];
  snprintf(want, sizeof want, "no FPGA part 'u999' in %s (known: u200, u250, u280), the "
           "--fpga-parts-dir directory", RD_FPGA_PARTS_DIR);
  if (strcmp(err.msg, want) != 0) fail_msg("\"%s\" is not \"%s\"", err.msg, want);
  assert_int_equal(rd_fpga_provider_part("u250", "/nonexistent-parts", &p, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "/nonexistent-parts (no such directory)"));
  assert_non_null(strstr(err.msg, "--fpga-parts-dir"));
  assert_int_equal(rd_fpga_provider_part("u9/x", NULL, &p, &err), RD_EINVAL);

  /* No setting: the installed directory only, and the flag to name one. */
  assert_int_equal(rd_fpga_provider_part("u999", NULL, &p, &err), RD_ENOTFOUND);
  snprintf(want, sizeof want, "no FPGA part 'u999' in %s (", rd_fpga_parts_default_dir());
  assert_non_null(strstr(err.msg, want));
  assert_null(strstr(err.msg, RD_FPGA_PARTS_DIR));
  assert_non_null(strstr(err.msg, "; give the directory of part files with --fpga-parts-dir"));
}

/* Added once, after the FPGAs XRT found; a second one, or a bad part,
 * changes nothing. */
static void test_csim_added_once(void **state) {
  (void)state;
  rd_device_t before[RD_MAX_DEVICES], after[RD_MAX_DEVICES];
  size_t nb = rd_devices_get(before, RD_MAX_DEVICES);
  uint32_t fpgas = 0;
  for (size_t i = 0; i < nb; i++) fpgas += strcmp(before[i].kind, "fpga") == 0;
  rd_error_t err;
  assert_int_equal(rd_fpga_provider_add_csim("nosuch", RD_FPGA_PARTS_DIR, &err), RD_ENOTFOUND);
  assert_int_equal(rd_devices_get(after, RD_MAX_DEVICES), nb);
  assert_int_equal(rd_fpga_provider_add_csim("u200", RD_FPGA_PARTS_DIR, &err), RD_OK);
  size_t na = rd_devices_get(after, RD_MAX_DEVICES);
  assert_int_equal(na, nb + 1);
  const rd_device_t *c = &after[nb];
  assert_string_equal(c->backend, "csim");
  assert_string_equal(c->model, "u200");
  assert_int_equal(c->index, fpgas);
  assert_int_equal(rd_fpga_provider_add_csim("u250", RD_FPGA_PARTS_DIR, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "already listed"));
  assert_int_equal(rd_devices_get(after, RD_MAX_DEVICES), nb + 1);
  /* A failure marks it unusable like any device (placement leaves it out). */
  assert_int_equal(rd_devices_mark_unusable("fpga", c->index, "test"), 1);
  rd_devices_get(after, RD_MAX_DEVICES);
  assert_false(rd_device_usable(&after[nb]));
  assert_string_equal(after[nb].backend, "csim");
}

/* ------------------------------------------------------------------ */
/* XRT                                                                  */
/* ------------------------------------------------------------------ */

static void test_xrt_probe(void **state) {
  (void)state;
  rd_device_t d[RD_MAX_DEVICES];
  char why[200] = "";
  size_t n = rd_fpga_provider_discover(d, RD_MAX_DEVICES, why, sizeof why);
  if (!RD_XRT_BUILT) {
    assert_int_equal(n, 0);
    assert_string_equal(why, "built without XRT: no FPGA discovery");
    return;
  }
  if (strcmp(mode, "unset") == 0) {
    assert_int_equal(n, 0);
    assert_non_null(strstr(why, "XILINX_XRT is not set"));
  } else if (strcmp(mode, "sw_emu") == 0) {
    assert_int_equal(n, 0);
    assert_non_null(strstr(why, "XCL_EMULATION_MODE=sw_emu needs Vitis"));
  } else if (strcmp(mode, "noboard") == 0) {
    assert_int_equal(n, 0);
    assert_non_null(strstr(why, "XRT opens no FPGA board"));
  } else { /* noop: one device, listed as the shim, never usable */
    assert_int_equal(n, 1);
    assert_string_equal(d[0].kind, "fpga");
    assert_string_equal(d[0].backend, "xrt-noop");
    assert_string_equal(d[0].isa, "xrt-noop");
    assert_int_equal(d[0].index, 0);
    assert_false(rd_device_usable(&d[0]));
    assert_non_null(strstr(d[0].status, "no-op shim (no board)"));
    assert_non_null(strstr(d[0].name, "no board"));
    assert_fingerprint_form(d[0].fingerprint);
    rd_device_t csim;
    rd_error_t err;
    assert_int_equal(rd_fpga_provider_csim("u250", RD_FPGA_PARTS_DIR, 1, &csim, &err), RD_OK);
    assert_string_not_equal(csim.fingerprint, d[0].fingerprint);
    /* Probing again finds the same device (a restart's view). */
    rd_device_t again[RD_MAX_DEVICES];
    assert_int_equal(rd_fpga_provider_discover(again, RD_MAX_DEVICES, why, sizeof why), 1);
    assert_string_equal(again[0].fingerprint, d[0].fingerprint);
    /* Room for none: nothing is written past max. */
    assert_int_equal(rd_fpga_provider_discover(again, 0, why, sizeof why), 0);
  }
}

/* The daemon's list: discovery put what the probe found there. */
static void test_discovered_list(void **state) {
  (void)state;
  rd_device_t d[RD_MAX_DEVICES];
  size_t n = rd_devices_get(d, RD_MAX_DEVICES);
  size_t xrt = 0;
  for (size_t i = 0; i < n; i++) xrt += strncmp(d[i].backend, "xrt", 3) == 0;
  assert_int_equal(xrt, RD_XRT_BUILT && strcmp(mode, "noop") == 0 ? 1 : 0);
}

int main(int argc, char **argv) {
  if (argc > 1) mode = argv[1];
  if (strcmp(mode, "unset") != 0 && strcmp(mode, "noop") != 0 && strcmp(mode, "noboard") != 0 &&
      strcmp(mode, "sw_emu") != 0) {
    fprintf(stderr, "usage: %s [unset|noop|noboard|sw_emu]\n", argv[0]);
    return 2;
  }
  rd_log_open(NULL, RD_LOG_ERROR, NULL);
  unsetenv("XILINX_XRT");
  unsetenv("XCL_EMULATION_MODE");
  if (strcmp(mode, "unset") != 0) {
    if (rdt_tmpdir(dir, sizeof dir, "fpga_devices") != 0) return 1;
    const char *emu = strcmp(mode, "noop") == 0 || strcmp(mode, "sw_emu") == 0 ? mode : NULL;
    if (xrt_env_setup(dir, emu) != 0) return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_xrt_probe),
      cmocka_unit_test(test_discovered_list),
      cmocka_unit_test(test_csim_device),
      cmocka_unit_test(test_csim_bad_parts),
      cmocka_unit_test(test_parts_search),
      cmocka_unit_test(test_csim_added_once),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (dir[0]) rdt_rmtree(dir);
  rd_log_close();
  return rc;
}
