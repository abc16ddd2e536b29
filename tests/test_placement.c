/* test_placement.c - what runs a mapping (the providers' bind; the FPGA's
 * in backends/fpga/provider_fpga.c):
 * the decision rd_fpga_provider_run over fake device entries (an XRT
 * board, XRT's no-op shim, the C-simulation FPGA, an assumed part), the
 * ops a mapping gets from it (rd_placement_bind), the fpga-xclbin
 * setting at start (rd_fpga_provider_setup_xrt) and what the device list says
 * then, a placement computed with a fake board listed, and the registry's
 * fall-back to the CPU tree when a placed replay module is busy.
 *
 * No FPGA board exists here: "boards" are rd_device_t entries this program
 * injects; nothing opens them. In an XRT build (RD_XRT_BUILT) the XRT ops
 * are the ones selected; without XRT, a configured xclbin is refused.
 *
 * Run as "plain" (XILINX_XRT unset: no XRT call anywhere) in every build,
 * and as "noop" in XRT builds without sanitizers (XRT 2.13 aborts under
 * ASan, tests/meson.build): XRT's no-op shim is listed and never used, and
 * two tables placed on one board's replay kernel (rmm_xrt.c, whose create
 * runs the whole host path in the shim) share it as the kernel allows: the
 * second runs on the CPU tree. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csim_rmm.h"
#include "devices.h"
#include "log.h"
#include "placement.h"
#include "provider.h"
#include "provider_fpga.h"
#include "rmm_gpu.h"
#include "registry.h"
#include "rdt_dse.h"
#include "rdt_pb.h"
#include "spec_pb.h"

#ifndef RD_FPGA_PARTS_DIR
#error "RD_FPGA_PARTS_DIR: the part files' directory"
#endif
#include "xrt_env.h"
#if RD_XRT_BUILT
#include "learner_backend_xrt.h"
#include "rmm_xrt.h"
#include "xclbin_gen.h"
#endif

#define BOARD_INDEX 5 /* the injected board's XRT index */
#define BOARD_MODEL "xilinx_u250_gen3x16_xdma_shell_4_1"

static const char *mode = "plain";
static char dir[64];
static char xclbin_path[128]; /* "xclbin2" magic (plain) or a real metadata xclbin (noop) */
static char junk_path[128];

static void assert_contains(const char *s, const char *want) {
  if (strstr(s, want) == NULL) fail_msg("\"%s\" lacks \"%s\"", s, want);
}

/* ------------------------------------------------------------------ */
/* Fixtures                                                             */
/* ------------------------------------------------------------------ */

static rd_device_t board_entry(uint32_t index, int xclbin) {
  rd_device_t d;
  memset(&d, 0, sizeof d);
  snprintf(d.kind, sizeof d.kind, "fpga");
  snprintf(d.backend, sizeof d.backend, "xrt");
  snprintf(d.isa, sizeof d.isa, "xrt");
  snprintf(d.model, sizeof d.model, BOARD_MODEL);
  snprintf(d.name, sizeof d.name, "%s, 64.0 GiB", BOARD_MODEL);
  d.index = index;
  d.memory_bytes = 64ull << 30;
  rd_fpga_provider_board_text(xclbin, &d);
  rd_device_fingerprint(&d);
  return d;
}

static rd_device_t noop_entry(const char *status) {
  rd_device_t d = board_entry(0, 1);
  snprintf(d.backend, sizeof d.backend, "xrt-noop");
  snprintf(d.model, sizeof d.model, "XRT no-op shim");
  snprintf(d.status, sizeof d.status, "%s", status);
  return d;
}

static rd_device_t csim_entry(uint32_t index) {
  rd_device_t d;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_fpga_provider_csim("u250", RD_FPGA_PARTS_DIR, index, &d, &err) != RD_OK)
    fail_msg("csim: %s", err.msg);
  return d;
}

/* A spec built on the stack: CartPole rows, optionally a DQN learner. */
typedef rdt_pb_spec_t spec_t;

static void make_spec(spec_t *s, uint32_t capacity, int with_learner) {
  rdt_pb_spec_init(s, "placement", capacity);
  rdt_pb_cartpole(s, with_learner ? 5 : 3);
  if (with_learner) rdt_pb_dqn(s, 2, 64, 32);
}

static rd_registry_t *make_registry(void) {
  rd_config_t c;
  rd_config_defaults(&c);
  rd_registry_t *r = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_create(&r, &c, NULL, &err) != RD_OK) fail_msg("registry: %s", err.msg);
  return r;
}

/* The table and pipeline configs of a workload. */
typedef struct {
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
} wl_cfg_t;

/* Those of a DQN workload of this capacity. */
static wl_cfg_t workload_configs(uint32_t capacity) {
  rd_registry_t *r = make_registry();
  spec_t s;
  make_spec(&s, capacity, 1);
  int has_learner = 0;
  rd_error_t err;
  rd_error_clear(&err);
  wl_cfg_t wc;
  if (rd_spec_pb_config(r, &s.spec, &wc.tc, &wc.pc, &has_learner, &err) != RD_OK)
    fail_msg("spec: %s", err.msg);
  assert_true(has_learner);
  rd_registry_destroy(r);
  return wc;
}

/* The fpga-xclbin setting: path ("" clears it) and a replay kernel build. */
static int setup_xrt(const char *path, uint32_t k, uint32_t n, uint32_t batch, rd_error_t *err) {
  rd_config_t c;
  rd_config_defaults(&c);
  snprintf(c.fpga_xclbin, sizeof c.fpga_xclbin, "%s", path);
  c.fpga_xclbin_shape.k = k;
  c.fpga_xclbin_shape.n = n;
  c.fpga_xclbin_shape.batch = batch;
  c.fpga_xclbin_shape.min_table = n;
  rd_error_clear(err);
  return rd_fpga_provider_setup_xrt(&c, err);
}

/* A placement of wc mapped (learner, rmm, storage) with device dev (NULL:
 * none) behind row, as rd_placement_compute leaves it before its last step. */
static void run_on(rd_placement_t *o, rd_devkind_t l, rd_devkind_t rmm, rd_devkind_t st,
                   rd_devkind_t row, const rd_device_t *dev, const wl_cfg_t *wc) {
  memset(o, 0, sizeof *o);
  o->mapped = 1;
  o->mapping.learner = l;
  o->mapping.rmm = rmm;
  o->mapping.storage = st;
  rd_mapping_format(&o->mapping, o->code, sizeof o->code);
  o->learner_kind = RD_LEARNER_ON_CPU;
  if (dev != NULL) {
    o->device[row] = *dev;
    o->has_device[row] = 1;
  }
  if (dev != NULL && row == RD_DEV_FPGA) {
    o->fpga_device = dev->index;
    snprintf(o->fpga_part, sizeof o->fpga_part, "u250");
  }
  rd_placement_bind(o, &wc->tc, &wc->pc.learner);
}

/* The same with the FPGA row's device fpga. */
static void run(rd_placement_t *o, rd_devkind_t l, rd_devkind_t rmm, rd_devkind_t st,
                const rd_device_t *fpga, const wl_cfg_t *wc) {
  run_on(o, l, rmm, st, RD_DEV_FPGA, fpga, wc);
}

/* ------------------------------------------------------------------ */
/* The decision                                                         */
/* ------------------------------------------------------------------ */

static void test_fpga_run_decision(void **state) {
  (void)state;
  char why[RD_ERROR_MSG_MAX];
  rd_device_t board = board_entry(3, 1);

  /* A board with an xclbin, in an XRT build, where the part fits: XRT. */
  assert_int_equal(rd_fpga_provider_run(&board, 1, 1, 1, "", why, sizeof why), RD_FPGA_RUN_XRT);
  assert_string_equal(why, "");
  /* No xclbin: the CPU, saying which setting is missing. */
  assert_int_equal(rd_fpga_provider_run(&board, 1, 0, 1, "", why, sizeof why), RD_FPGA_RUN_CPU);
  assert_string_equal(why, "fpga3 is an XRT board but no xclbin is configured (the "
                           "fpga-xclbin setting)");
  /* A build without XRT cannot drive it, xclbin or not. */
  assert_int_equal(rd_fpga_provider_run(&board, 0, 1, 1, "", why, sizeof why), RD_FPGA_RUN_CPU);
  assert_string_equal(why, "fpga3 is an XRT board but replayd was built without XRT");
  /* Not fitting the kernel build: the caller's reason. */
  assert_int_equal(rd_fpga_provider_run(&board, 1, 1, 0, "capacity 9 is not 8", why, sizeof why),
                   RD_FPGA_RUN_CPU);
  assert_string_equal(why, "capacity 9 is not 8");
  assert_int_equal(rd_fpga_provider_run(&board, 1, 1, 0, NULL, why, sizeof why),
                   RD_FPGA_RUN_CPU);
  assert_contains(why, "does not fit");
  /* A board given up after a failure: its status is the reason. */
  rd_device_t broken = board;
  snprintf(broken.status, sizeof broken.status, "unusable: XRT run timed out");
  assert_int_equal(rd_fpga_provider_run(&broken, 1, 1, 1, "", why, sizeof why),
                   RD_FPGA_RUN_CPU);
  assert_string_equal(why, "fpga3 unusable: XRT run timed out");

  /* XRT's no-op shim never runs a workload: as listed (unusable), and even
   * with a status that claims otherwise. */
  rd_device_t shim = noop_entry("unusable: XRT no-op shim (no board)");
  rd_device_t forged = noop_entry("ok");
  for (int i = 0; i < 2; i++) {
    const rd_device_t *d = i ? &forged : &shim;
    for (int xclbin = 0; xclbin < 2; xclbin++) {
      assert_int_equal(rd_fpga_provider_run(d, 1, xclbin, 1, "", why, sizeof why),
                       RD_FPGA_RUN_CPU);
      assert_string_equal(why, "fpga0 is XRT's no-op shim: no kernel executes there");
    }
  }

  /* The C-simulation: as before, the xclbin setting changes nothing. */
  rd_device_t csim = csim_entry(1);
  for (int xclbin = 0; xclbin < 2; xclbin++) {
    assert_int_equal(rd_fpga_provider_run(&csim, 1, xclbin, 1, "", why, sizeof why),
                     RD_FPGA_RUN_CSIM);
    assert_int_equal(rd_fpga_provider_run(&csim, 0, xclbin, 1, "", why, sizeof why),
                     RD_FPGA_RUN_CSIM);
  }
  assert_int_equal(rd_fpga_provider_run(&csim, 1, 1, 0, "too big", why, sizeof why),
                   RD_FPGA_RUN_CPU);
  assert_string_equal(why, "too big");

  /* An assumed part (a plan) and a device of another kind run nothing. */
  assert_int_equal(rd_fpga_provider_run(NULL, 1, 1, 1, "", why, sizeof why), RD_FPGA_RUN_CPU);
  assert_contains(why, "an assumed FPGA runs nothing");
  rd_device_t cpu;
  rd_devices_cpu(&cpu);
  assert_int_equal(rd_fpga_provider_run(&cpu, 1, 1, 1, "", why, sizeof why), RD_FPGA_RUN_CPU);
  assert_string_equal(why, "cpu0 is not an FPGA");
  rd_device_t other = board;
  snprintf(other.backend, sizeof other.backend, "opencl");
  assert_int_equal(rd_fpga_provider_run(&other, 1, 1, 1, "", why, sizeof why), RD_FPGA_RUN_CPU);
  assert_string_equal(why, "fpga3's backend \"opencl\" runs no kernels");
}

/* An XRT board's entry says whether anything runs on it. */
static void test_board_text(void **state) {
  (void)state;
  rd_device_t d = board_entry(0, 0);
  assert_true(rd_device_usable(&d));
  assert_contains(d.status, "no xclbin configured (the fpga-xclbin setting), so nothing runs");
  assert_contains(d.status, "replayd has never run on a board");
  assert_string_equal(d.capabilities, "none (no xclbin: model only)");
  rd_fpga_provider_board_text(1, &d);
  assert_true(rd_device_usable(&d));
  assert_contains(d.status, "run the kernels of the fpga-xclbin setting");
  assert_contains(d.status, "replayd has never run on a board");
  assert_string_equal(d.capabilities, "rmm,learner: XRT (fpga-xclbin)");
}

/* ------------------------------------------------------------------ */
/* The fpga-xclbin setting                                              */
/* ------------------------------------------------------------------ */

static const rd_device_t *listed_board(rd_device_t *all, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(all[i].backend, "xrt") == 0 && all[i].index == BOARD_INDEX) return &all[i];
  return NULL;
}

static void test_setup_xrt(void **state) {
  (void)state;
  rd_error_t err;
  rd_device_t all[RD_MAX_DEVICES];
  /* Empty: nothing configured, the board says so. */
  assert_int_equal(setup_xrt("", 16, 65536, 1024, &err), RD_OK);
  size_t n = rd_devices_get(all, RD_MAX_DEVICES);
  const rd_device_t *b = listed_board(all, n);
  assert_non_null(b);
  assert_contains(b->status, "no xclbin configured");

#if RD_XRT_BUILT
  /* A path that is not there, or not an xclbin: start-up errors naming
   * the setting; nothing is configured. */
  char missing[160];
  snprintf(missing, sizeof missing, "%s/none.xclbin", dir);
  assert_int_equal(setup_xrt(missing, 16, 65536, 1024, &err), RD_EINVAL);
  assert_contains(err.msg, "fpga-xclbin = ");
  assert_contains(err.msg, "cannot open: No such file");
  assert_int_equal(setup_xrt(junk_path, 16, 65536, 1024, &err), RD_EINVAL);
  assert_contains(err.msg, "not an xclbin");
  n = rd_devices_get(all, RD_MAX_DEVICES);
  assert_contains(listed_board(all, n)->status, "no xclbin configured");
  assert_null(rd_fpga_xrt_rmm_ops.memsize(65536, 16) ? "configured" : NULL);
  /* A shape the XRT module refuses is refused at start too. */
  assert_int_equal(setup_xrt(xclbin_path, 16, 65536, 0, &err), RD_EINVAL);
  assert_contains(err.msg, "fpga-xclbin");
  assert_contains(err.msg, "max_batch 0");

  /* An xclbin: both modules configured for the first usable board (the
   * injected one: no XRT board is opened here), the board's entry says
   * what runs on it. */
  assert_int_equal(setup_xrt(xclbin_path, 16, 65536, 1024, &err), RD_OK);
  n = rd_devices_get(all, RD_MAX_DEVICES);
  b = listed_board(all, n);
  assert_contains(b->status, "run the kernels of the fpga-xclbin setting");
  assert_string_equal(b->capabilities, "rmm,learner: XRT (fpga-xclbin)");
  /* The replay module now holds tables of the build's shape only: a table
   * of N = 65536 items at fanout 16 (the build's leaf bound is N's). */
  assert_true(rd_fpga_xrt_rmm_ops.memsize(65536, 16) > 0);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(65536, 8), 0);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(1000, 16), 0);
  /* Cleared again. */
  assert_int_equal(setup_xrt("", 16, 65536, 1024, &err), RD_OK);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(65536, 16), 0);
  n = rd_devices_get(all, RD_MAX_DEVICES);
  assert_contains(listed_board(all, n)->status, "no xclbin configured");
#else
  /* Without XRT, any xclbin is a start-up error, even a real one. */
  assert_int_equal(setup_xrt(xclbin_path, 16, 65536, 1024, &err), RD_EINVAL);
  assert_contains(err.msg, "fpga-xclbin = ");
  assert_contains(err.msg, "built without XRT");
  n = rd_devices_get(all, RD_MAX_DEVICES);
  assert_contains(listed_board(all, n)->status, "no xclbin configured");
#endif
}

/* ------------------------------------------------------------------ */
/* What a mapping runs                                                   */
/* ------------------------------------------------------------------ */

static void test_board_with_xclbin(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  rd_error_t err;
  int rc = setup_xrt(xclbin_path, 16, 65536, 1024, &err);
  rd_device_t board = board_entry(BOARD_INDEX, 1);
  rd_placement_t o;
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, &board, &wc);
#if RD_XRT_BUILT
  if (rc) fail_msg("setup: %s", err.msg);
  assert_string_equal(o.running, "F-F-C");
  assert_int_equal(o.learner_kind, RD_LEARNER_ON_FPGA);
  assert_int_equal(o.learner_device, BOARD_INDEX);
  assert_ptr_equal(o.learner_ops, &rd_learner_ops_fpga_xrt);
  assert_ptr_equal(o.rmm_ops, &rd_fpga_xrt_rmm_ops);
  assert_true(o.fpga_xrt);
  assert_false(o.fpga_csim);
  assert_string_equal(o.note, "mapped F-F-F; running F-F-C (FPGA: XRT board fpga5, u250 model, "
                              "fpga-xclbin kernels; replayd has never run on a board): the "
                              "storage stays in host memory (the board's memory is not used)");
  /* The pipeline and the table get exactly these (registry.c). */
  rd_placement_t only_rmm;
  run(&only_rmm, RD_DEV_CPU, RD_DEV_FPGA, RD_DEV_CPU, &board, &wc);
  assert_string_equal(only_rmm.running, "C-F-C");
  assert_null(only_rmm.learner_ops);
  assert_int_equal(only_rmm.learner_kind, RD_LEARNER_ON_CPU);
  assert_string_equal(only_rmm.note, "mapped C-F-C; running C-F-C (FPGA: XRT board fpga5, "
                                     "u250 model, fpga-xclbin kernels; replayd has never run on "
                                     "a board)");
  assert_int_equal(setup_xrt("", 16, 65536, 1024, &err), RD_OK);
#else
  assert_int_equal(rc, RD_EINVAL);
  assert_string_equal(o.running, "C-C-C");
  assert_null(o.rmm_ops);
  assert_null(o.learner_ops);
  assert_contains(o.note, "FPGA backend not available: fpga5 is an XRT board but replayd was "
                          "built without XRT");
#endif
}

static void test_board_without_xclbin(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  rd_error_t err;
  assert_int_equal(setup_xrt("", 16, 65536, 1024, &err), RD_OK);
  rd_device_t board = board_entry(BOARD_INDEX, 0);
  rd_placement_t o;
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, &board, &wc);
  assert_string_equal(o.running, "C-C-C");
  assert_int_equal(o.learner_kind, RD_LEARNER_ON_CPU);
  assert_null(o.learner_ops);
  assert_null(o.rmm_ops);
  assert_false(o.fpga_xrt);
  const char *want = RD_XRT_BUILT
                         ? "mapped F-F-F; running C-C-C: FPGA backend not available: fpga5 is an "
                           "XRT board but no xclbin is configured (the fpga-xclbin setting)"
                         : "mapped F-F-F; running C-C-C: FPGA backend not available: fpga5 is an "
                           "XRT board but replayd was built without XRT";
  assert_string_equal(o.note, want);
}

/* XRT's no-op shim and an assumed part: never the XRT ops, xclbin or not. */
static void test_noop_and_assumed_never_xrt(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  rd_error_t err;
  int configured = setup_xrt(xclbin_path, 16, 65536, 1024, &err) == RD_OK;
  assert_int_equal(configured, RD_XRT_BUILT);
  rd_device_t shim = noop_entry("unusable: XRT no-op shim (no board)");
  rd_device_t forged = noop_entry("ok");
  const rd_device_t *devs[3] = {&shim, &forged, NULL};
  for (int i = 0; i < 3; i++) {
    rd_placement_t o;
    run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, devs[i], &wc);
    assert_string_equal(o.running, "C-C-C");
    assert_null(o.rmm_ops);
    assert_null(o.learner_ops);
    assert_int_equal(o.learner_kind, RD_LEARNER_ON_CPU);
    assert_contains(o.note, "mapped F-F-F; running C-C-C: FPGA backend not available: ");
    assert_contains(o.note, i < 2 ? "fpga0 is XRT's no-op shim: no kernel executes there"
                                  : "an assumed FPGA runs nothing");
  }
  assert_int_equal(setup_xrt("", 16, 65536, 1024, &err), RD_OK);
}

/* The C-simulation FPGA runs what it ran before, with or without an
 * xclbin configured. */
static void test_csim_unchanged(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  rd_device_t csim = csim_entry(2);
  rd_error_t err;
  for (int xclbin = 0; xclbin < 2; xclbin++) {
    setup_xrt(xclbin ? xclbin_path : "", 16, 65536, 1024, &err);
    rd_placement_t o;
    run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, &csim, &wc);
    assert_string_equal(o.running, "F-F-F");
    assert_int_equal(o.learner_kind, RD_LEARNER_ON_FPGA);
    assert_int_equal(o.learner_device, 2);
    assert_null(o.learner_ops); /* learner_kind's: the C-simulation backend */
    assert_ptr_equal(o.rmm_ops, &rd_fpga_csim_rmm_ops);
    assert_true(o.fpga_csim);
    assert_false(o.fpga_xrt);
    assert_string_equal(o.note, "mapped F-F-F; running F-F-F (FPGA: C-simulation of u250, no "
                                "board; its storage is host memory)");
  }
  setup_xrt("", 16, 65536, 1024, &err);
  /* Above the built trees (2^20): the replay module stays on the CPU. */
  wl_cfg_t big = wc;
  big.tc.capacity = (1u << 20) + 1;
  rd_placement_t o;
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, &csim, &big);
  assert_string_equal(o.running, "F-C-F");
  assert_null(o.rmm_ops);
  assert_contains(o.note, ": the replay module stays on the CPU: capacity 1048577");
}

/* A learner beyond the learner kernel's build limits stays on the CPU,
 * on the C-simulation and on a board alike, with the limit in the note. */
static void test_learner_not_fitting(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  wc.pc.learner.hidden[0] = 512; /* LRN_MAX_WIDTH is 256 */
  rd_error_t err;
  setup_xrt(xclbin_path, 16, 65536, 1024, &err);
  rd_device_t csim = csim_entry(2);
  rd_device_t board = board_entry(BOARD_INDEX, 1);
  rd_placement_t o;
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, &csim, &wc);
  assert_string_equal(o.running, "C-F-F");
  assert_int_equal(o.learner_kind, RD_LEARNER_ON_CPU);
  assert_contains(o.note, ": the learner stays on the CPU: the FPGA learner kernel cannot train "
                          "this learner");
  assert_contains(o.note, "256");
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_CPU, &board, &wc);
  assert_int_equal(o.learner_kind, RD_LEARNER_ON_CPU);
  assert_null(o.learner_ops);
#if RD_XRT_BUILT
  assert_string_equal(o.running, "C-F-C");
  assert_contains(o.note, ": the learner stays on the CPU: the FPGA learner kernel cannot train");
#else
  assert_string_equal(o.running, "C-C-C");
#endif
  setup_xrt("", 16, 65536, 1024, &err);
}

/* A table the xclbin's replay kernel cannot hold stays on the CPU tree,
 * with the build's and the table's shapes in the note; the learner still
 * goes to the board. */
static void test_shape_not_fitting(void **state) {
  (void)state;
#if RD_XRT_BUILT
  rd_error_t err;
  if (setup_xrt(xclbin_path, 16, 65536, 1024, &err) != RD_OK) fail_msg("%s", err.msg);
  rd_device_t board = board_entry(BOARD_INDEX, 1);
  static const struct {
    uint32_t capacity, fanout;
    const char *want;
  } cases[] = {
      /* Fewer items than N: the table's leaves may exceed the build's bound. */
      {1000, 16, "(fpga-xclbin-shape: K 16, N 65536, leaves <= 140737488355327) cannot hold "
                 "this table (fanout 16, 1000 items, leaves <= 9223372036854775)"},
      {65536, 8, "cannot hold this table (fanout 8, 65536 items, leaves <= 140737488355327)"},
      {70000, 16, "cannot hold this table (fanout 16, 70000 items"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    wl_cfg_t wc = workload_configs(cases[i].capacity);
    wc.tc.fanout = cases[i].fanout;
    rd_placement_t o;
    run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_CPU, &board, &wc);
    assert_string_equal(o.running, "F-C-C");
    assert_null(o.rmm_ops);
    assert_ptr_equal(o.learner_ops, &rd_learner_ops_fpga_xrt);
    assert_contains(o.note, ": the replay module stays on the CPU: the xclbin's replay kernel");
    assert_contains(o.note, cases[i].want);
  }
  /* A board other than the one the replay module was configured for (the
   * first usable one at start): its learner may run there, its RMM not. */
  wl_cfg_t wc = workload_configs(65536);
  rd_device_t second = board_entry(BOARD_INDEX + 1, 1);
  rd_placement_t o;
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_CPU, &second, &wc);
  assert_string_equal(o.running, "F-C-C");
  assert_int_equal(o.learner_device, BOARD_INDEX + 1);
  assert_contains(o.note, "the replay module stays on the CPU: the XRT replay module runs on "
                          "fpga5 (the first usable board at start), not fpga6");
  /* A build raised to serve smaller tables (MIN_TABLE): 1000 fits. */
  rd_config_t c;
  rd_config_defaults(&c);
  snprintf(c.fpga_xclbin, sizeof c.fpga_xclbin, "%s", xclbin_path);
  c.fpga_xclbin_shape.k = 16;
  c.fpga_xclbin_shape.n = 65536;
  c.fpga_xclbin_shape.batch = 1024;
  c.fpga_xclbin_shape.min_table = 1000;
  assert_int_equal(rd_fpga_provider_setup_xrt(&c, &err), RD_OK);
  wc = workload_configs(1000);
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_CPU, &board, &wc);
  assert_string_equal(o.running, "F-F-C");
  assert_ptr_equal(o.rmm_ops, &rd_fpga_xrt_rmm_ops);
  setup_xrt("", 16, 65536, 1024, &err);
#else
  skip();
#endif
}

/* What of a mapping runs on a present GPU (provider_gpu.c): the learner
 * where the GPU learner is built; the sum tree and storage only through a
 * GPU replay module (rmm_gpu.h), which this build refuses, saying why. */
static void test_gpu_bind(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(1000);
  rd_device_t gpu;
  rdt_device(&gpu, "gpu", 5);
  snprintf(gpu.model, sizeof gpu.model, "NVIDIA H100");
  gpu.memory_bytes = 80ull << 30;
  const int built = rd_learner_gpu_built();
  assert_int_equal(rd_gpu_rmm_built(), built);
  rd_placement_t o;
  run_on(&o, RD_DEV_GPU, RD_DEV_GPU, RD_DEV_GPU, RD_DEV_GPU, &gpu, &wc);
  assert_null(o.learner_ops);
  if (built) { /* the learner, the sum tree and the rows on gpu5 */
    assert_string_equal(o.running, "G-G-G");
    assert_int_equal(o.learner_kind, RD_LEARNER_ON_GPU);
    assert_int_equal(o.learner_device, 5);
    assert_ptr_equal(o.rmm_ops, rd_gpu_rmm_ops(5));
    assert_ptr_equal(o.storage_ops, rd_gpu_storage_ops(5));
    assert_string_equal(o.note, "mapped G-G-G; running G-G-G");
  } else {
    assert_string_equal(o.running, "C-C-C");
    assert_int_equal(o.learner_kind, RD_LEARNER_ON_CPU);
    assert_null(o.rmm_ops);
    assert_null(o.storage_ops);
    assert_string_equal(o.note, "mapped G-G-G; running C-C-C: GPU backend not available (built "
                                "without CUDA)");
  }
  /* No usable GPU in the row. */
  run_on(&o, RD_DEV_GPU, RD_DEV_CPU, RD_DEV_CPU, RD_DEV_GPU, NULL, &wc);
  assert_string_equal(o.running, "C-C-C");
  assert_string_equal(o.note, built ? "mapped G-C-C; running C-C-C: GPU backend not available "
                                      "(no usable GPU on this server)"
                                    : "mapped G-C-C; running C-C-C: GPU backend not available "
                                      "(built without CUDA)");
  /* The sum tree mapped there without the learner: it runs there alone. */
  run_on(&o, RD_DEV_CPU, RD_DEV_GPU, RD_DEV_CPU, RD_DEV_GPU, &gpu, &wc);
  assert_string_equal(o.running, built ? "C-G-C" : "C-C-C");
  assert_ptr_equal(o.rmm_ops, built ? rd_gpu_rmm_ops(5) : NULL);
  assert_null(o.storage_ops);
  if (!built)
    assert_string_equal(o.note, "mapped C-G-C; running C-C-C: GPU backend not available");
  /* The rows there, the sum tree on the CPU (G-C-G). */
  run_on(&o, RD_DEV_GPU, RD_DEV_CPU, RD_DEV_GPU, RD_DEV_GPU, &gpu, &wc);
  assert_string_equal(o.running, built ? "G-C-G" : "C-C-C");
  assert_null(o.rmm_ops);
  assert_ptr_equal(o.storage_ops, built ? rd_gpu_storage_ops(5) : NULL);

  /* Each part asked on its own (can_run), with why. */
  const rd_device_provider_t *p = rd_provider_for("gpu");
  rd_dse_runner_t r;
  char why[RD_ERROR_MSG_MAX];
  assert_int_equal(
      p->can_run(NULL, RD_PART_LEARNER, &wc.tc, &wc.pc.learner, &r, why, sizeof why), 0);
  assert_string_equal(why, "no usable GPU on this server");
  rd_device_t broken = gpu;
  snprintf(broken.status, sizeof broken.status, "unusable: cuBLAS failed");
  assert_int_equal(
      p->can_run(&broken, RD_PART_LEARNER, &wc.tc, &wc.pc.learner, &r, why, sizeof why), 0);
  assert_string_equal(why, "gpu5 unusable: cuBLAS failed");
  assert_int_equal(p->can_run(&gpu, RD_PART_LEARNER, &wc.tc, &wc.pc.learner, &r, why, sizeof why),
                   built);
  rd_device_t small = gpu; /* too little memory for the tree or the rows */
  small.memory_bytes = 4096;
  for (int part = RD_PART_RMM; part <= RD_PART_STORAGE; part++) {
    assert_int_equal(p->can_run(&gpu, (rd_part_t)part, &wc.tc, &wc.pc.learner, &r, why, sizeof why),
                     built);
    if (!built) assert_contains(why, "built without CUDA");
    assert_int_equal(
        p->can_run(&small, (rd_part_t)part, &wc.tc, &wc.pc.learner, &r, why, sizeof why), 0);
    assert_contains(why, built ? "cannot hold this table" : "built without CUDA");
  }
}

/* The registry's fall-back rewrites running and the note. */
static void test_rmm_on_cpu(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  rd_device_t csim = csim_entry(2);
  rd_placement_t o;
  run(&o, RD_DEV_FPGA, RD_DEV_FPGA, RD_DEV_FPGA, &csim, &wc);
  assert_string_equal(o.running, "F-F-F");
  rd_placement_rmm_on_cpu(&o, "the kernel is busy");
  assert_string_equal(o.running, "F-C-F");
  assert_null(o.rmm_ops);
  assert_true(o.fpga_csim); /* the learner and storage still are */
  assert_string_equal(o.note, "mapped F-F-F; running F-C-F (FPGA: C-simulation of u250, no "
                              "board; its storage is host memory): the replay module stays on "
                              "the CPU: the kernel is busy");
  /* Nothing left on the FPGA: no FPGA text; earlier reasons kept. */
  run(&o, RD_DEV_CPU, RD_DEV_FPGA, RD_DEV_GPU, &csim, &wc);
  assert_string_equal(o.running, "C-F-C");
  rd_placement_rmm_on_cpu(&o, "busy");
  assert_string_equal(o.running, "C-C-C");
  assert_false(o.fpga_csim);
  assert_string_equal(o.note, "mapped C-F-G; running C-C-C: the replay module stays on the CPU: "
                              "busy; GPU backend not available");
}

/* ------------------------------------------------------------------ */
/* A whole placement with a fake board listed                           */
/* ------------------------------------------------------------------ */

static void test_compute_with_board(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(65536);
  rd_error_t err;
  int configured = setup_xrt(xclbin_path, 16, 65536, 1024, &err) == RD_OK;
  rd_placement_t o;
  rd_error_clear(&err);
  int rc = rd_placement_compute(NULL, &wc.tc, &wc.pc, 1, 0.3, RD_FPGA_PARTS_DIR, NULL, &o, &err);
  if (rc) fail_msg("compute: %s", err.msg);
  /* The board's shell name models it as a u250 (board_part), so it has a
   * row, with the board's own fingerprint. */
  rd_device_t board = board_entry(BOARD_INDEX, configured);
  const rd_pdevice_t *f = &o.table.dev[RD_DEV_FPGA];
  assert_true(f->present);
  assert_int_equal(f->src_learner, RD_PT_MODEL);
  assert_contains(o.detail[RD_DEV_FPGA], "present u250 model");
  assert_string_equal(o.fingerprint[RD_DEV_FPGA], board.fingerprint);
  assert_int_equal(o.fpga_device, BOARD_INDEX);
  assert_string_equal(o.fpga_part, "u250");
  assert_true(o.mapped);
  /* What runs follows the mapping the profiles gave (the CPU's figures
   * are this machine's): each FPGA part on the board's kernels with an
   * xclbin, else on the CPU. */
  assert_int_equal(o.running[0] == 'F', configured && o.mapping.learner == RD_DEV_FPGA);
  assert_int_equal(o.running[2] == 'F', configured && o.mapping.rmm == RD_DEV_FPGA);
  assert_int_equal(o.running[4], 'C');
#if RD_XRT_BUILT
  assert_ptr_equal(o.rmm_ops, o.mapping.rmm == RD_DEV_FPGA ? &rd_fpga_xrt_rmm_ops : NULL);
  assert_ptr_equal(o.learner_ops,
                   o.mapping.learner == RD_DEV_FPGA ? &rd_learner_ops_fpga_xrt : NULL);
#else
  assert_null(o.rmm_ops);
  assert_null(o.learner_ops);
#endif
  print_message("      mapped %s: %s\n", o.code, o.note);
  setup_xrt("", 16, 65536, 1024, &err);
}

/* ------------------------------------------------------------------ */
/* Figures that are not finite numbers                                  */
/* ------------------------------------------------------------------ */

/* Assumed GPU profiles (a plan's) whose latencies are finite but extreme
 * (the JSON-lines parser refuses them first; rd_placement_compute does
 * not rely on that): refused as the client's (RD_EINVAL), never a
 * placement with an infinite time or prediction. */
static void test_assumed_figures_finite(void **state) {
  (void)state;
  wl_cfg_t wc = workload_configs(10000);
  rd_profile_shape_t shape;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_profile_shape_init(&shape, &wc.tc, &wc.pc, 0, &err) != RD_OK)
    fail_msg("shape: %s", err.msg);
  static const struct {
    double rmm_each, train;
    int code;
    const char *what;
  } cases[] = {
      {1e-4, 5e-324, RD_EINVAL, "the mapping cannot be predicted: gpu learner: B / T"},
      {5e-324, 1e-3, RD_EINVAL, "gpu rmm: B / T"},
      {1.7e308, 1e-3, RD_EINVAL, "the gpu rmm time (assumed) is inf s"},
      {1e-4, 1e-3, RD_OK, ""},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    rd_profile_t rows[3];
    const rd_primitive_t prim[3] = {RD_PRIM_SAMPLE, RD_PRIM_UPDATE, RD_PRIM_TRAIN};
    for (int i = 0; i < 3; i++) {
      memset(&rows[i], 0, sizeof rows[i]);
      snprintf(rows[i].device_fp, sizeof rows[i].device_fp, "gpu-0123456789abcdef");
      rows[i].primitive = prim[i];
      rows[i].threads = 1;
      rows[i].shape = shape.key;
      snprintf(rows[i].build, sizeof rows[i].build, "assumed");
      rows[i].latency_s = prim[i] == RD_PRIM_TRAIN ? cases[c].train : cases[c].rmm_each;
      rows[i].reps = 1;
    }
    rd_placement_assume_t as = {rows, 3, NULL, 1, 0};
    rd_placement_t o;
    rd_error_clear(&err);
    int rc = rd_placement_compute(NULL, &wc.tc, &wc.pc, 1, 0.3, RD_FPGA_PARTS_DIR, &as, &o, &err);
    if (rc != cases[c].code)
      fail_msg("case %zu: %s (%s), want %s", c, rd_err_name(rc), err.msg,
               rd_err_name(cases[c].code));
    if (rc != RD_OK) {
      assert_contains(err.msg, cases[c].what);
      continue;
    }
    assert_true(o.mapped);
    assert_true(isfinite(o.mapping.gps) && o.mapping.gps > 0);
    for (int d = 0; d < RD_DEV_COUNT; d++)
      assert_true(isfinite(o.table.dev[d].t_learner) && isfinite(o.table.dev[d].t_rmm));
  }
}

/* ------------------------------------------------------------------ */
/* The registry: a busy replay module falls back to the CPU tree        */
/* ------------------------------------------------------------------ */

static int busy_creates;
static size_t fake_memsize(uint32_t capacity, uint32_t fanout) {
  (void)fanout;
  return (size_t)capacity * 8;
}
static int busy_create(void **rmm, uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                       rd_error_t *err) {
  (void)rmm;
  (void)capacity;
  (void)fanout;
  (void)max_leaf;
  busy_creates++;
  return rd_error_set(err, RD_EBUSY, "fake: the board's kernel holds another table's tree");
}
static int broken_create(void **rmm, uint32_t capacity, uint32_t fanout, uint64_t max_leaf,
                         rd_error_t *err) {
  (void)rmm;
  (void)capacity;
  (void)fanout;
  (void)max_leaf;
  return rd_error_set(err, RD_EINTERNAL, "fake: the board is gone");
}
static const rd_rmm_ops_t busy_ops = {"fake-busy", fake_memsize, busy_create, NULL, NULL, NULL,
                                      NULL, NULL, NULL};
static const rd_rmm_ops_t broken_ops = {"fake-broken", fake_memsize, broken_create, NULL, NULL,
                                        NULL, NULL, NULL, NULL};

static void test_registry_busy_falls_back(void **state) {
  (void)state;
  rd_registry_t *r = make_registry();
  spec_t s;
  make_spec(&s, 1024, 0);
  wl_cfg_t wc = workload_configs(1024);
  rd_device_t csim = csim_entry(2);
  rd_placement_t pl;
  run(&pl, RD_DEV_CPU, RD_DEV_FPGA, RD_DEV_CPU, &csim, &wc);
  assert_string_equal(pl.running, "C-F-C");
  pl.rmm_ops = &busy_ops;
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  busy_creates = 0;
  int rc = rd_spec_pb_register(r, &s.spec, &pl, &w, &err);
  if (rc) fail_msg("register: %s", err.msg);
  assert_int_equal(busy_creates, 1);
  assert_string_equal(rd_table_rmm_name(&w->table), "cpu");
  assert_non_null(w->placement);
  assert_null(w->placement->rmm_ops);
  assert_string_equal(w->placement->running, "C-C-C");
  assert_string_equal(w->placement->note, "mapped C-F-C; running C-C-C: the replay module stays "
                                          "on the CPU: fake: the board's kernel holds another "
                                          "table's tree");
  /* It works as any table: the CPU tree holds the inserted leaves. */
  float obs[4] = {1, 2, 3, 4};
  int32_t act = 1;
  float rew = 0.5f;
  rd_cbuf_t cols[3] = {{obs, sizeof obs}, {&act, sizeof act}, {&rew, sizeof rew}};
  pthread_mutex_lock(&w->lock);
  rc = rd_table_insert(&w->table, 1, cols, NULL, NULL, &err);
  pthread_mutex_unlock(&w->lock);
  if (rc) fail_msg("insert: %s", err.msg);
  assert_true(rd_sumtree_total(&w->table.tree) > 0);
  /* The charge is the CPU tree's. */
  assert_true(w->charge >= rd_table_memsize(&w->table));
  rd_workload_unref(w);

  /* Any other failure of the module (a board or GPU gone) falls back the
   * same way, as a failing learner does: the workload is served on the CPU
   * and the note says why. */
  run(&pl, RD_DEV_CPU, RD_DEV_FPGA, RD_DEV_CPU, &csim, &wc);
  pl.rmm_ops = &broken_ops;
  rd_error_clear(&err);
  w = NULL;
  assert_int_equal(rd_spec_pb_register(r, &s.spec, &pl, &w, &err), RD_OK);
  assert_string_equal(rd_table_rmm_name(&w->table), "cpu");
  assert_string_equal(w->placement->note, "mapped C-F-C; running C-C-C: the replay module stays "
                                          "on the CPU: fake: the board is gone");
  rd_workload_unref(w);
  assert_int_equal(rd_registry_count(r), 2);
  rd_registry_destroy(r);
}

/* The placement's pins (cores.h) reach the registered pipeline, and the
 * registry counts them as the CPUs' load for the next assignment. */
static void test_registry_pins(void **state) {
  (void)state;
  int cpus[RD_CORES_MAX];
  size_t n = rd_cores_allowed(cpus, RD_CORES_MAX);
  assert_true(n >= 1);
  rd_registry_t *r = make_registry();
  spec_t s;
  make_spec(&s, 1024, 1);
  wl_cfg_t wc = workload_configs(1024);
  rd_placement_t pl;
  run(&pl, RD_DEV_CPU, RD_DEV_CPU, RD_DEV_CPU, NULL, &wc);
  pl.learner_pin.n = 1;
  pl.learner_pin.cpu[0] = cpus[n - 1];
  pl.sampler_pin.n = 1;
  pl.sampler_pin.cpu[0] = cpus[0];
  rd_workload_t *w = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_spec_pb_register(r, &s.spec, &pl, &w, &err)) fail_msg("register: %s", err.msg);
  assert_non_null(w->pipeline);
  rd_pipeline_cpus_t c;
  rd_pipeline_cpus(w->pipeline, &c);
  assert_int_equal(c.learner_pin.n, 1);
  assert_int_equal(c.learner_pin.cpu[0], cpus[n - 1]);
  assert_int_equal(c.sampler_pin.n, 1);
  assert_int_equal(c.sampler_pin.cpu[0], cpus[0]);
  uint32_t load[RD_CORES_MAX];
  rd_registry_cpu_load(r, cpus, n, load);
  if (n == 1) {
    assert_int_equal(load[0], 2);
  } else {
    assert_int_equal(load[0], 1);
    assert_int_equal(load[n - 1], 1);
    for (size_t i = 1; i + 1 < n; i++) assert_int_equal(load[i], 0);
  }
  /* Deleted: its CPUs are free again. */
  assert_int_equal(rd_registry_delete(r, w->id, &err), RD_OK);
  rd_workload_unref(w);
  rd_registry_cpu_load(r, cpus, n, load);
  for (size_t i = 0; i < n; i++) assert_int_equal(load[i], 0);
  rd_registry_destroy(r);
}

/* ------------------------------------------------------------------ */
/* XRT's no-op shim (mode "noop", XRT builds)                            */
/* ------------------------------------------------------------------ */

#if RD_XRT_BUILT
/* The shim is listed, stays unusable with an xclbin configured, and a
 * whole placement never puts anything on it. */
static void test_noop_listed_never_used(void **state) {
  (void)state;
  rd_error_t err;
  if (setup_xrt(xclbin_path, 16, 1024, 64, &err) != RD_OK) fail_msg("%s", err.msg);
  rd_device_t all[RD_MAX_DEVICES];
  size_t n = rd_devices_get(all, RD_MAX_DEVICES);
  const rd_device_t *shim = NULL;
  for (size_t i = 0; i < n; i++)
    if (strcmp(all[i].backend, "xrt-noop") == 0) shim = &all[i];
  assert_non_null(shim);
  assert_false(rd_device_usable(shim));
  assert_contains(shim->status, "no-op shim (no board)");
  wl_cfg_t wc = workload_configs(1024);
  rd_placement_t o;
  int rc = rd_placement_compute(NULL, &wc.tc, &wc.pc, 1, 0.3, RD_FPGA_PARTS_DIR, NULL, &o, &err);
  if (rc) fail_msg("compute: %s", err.msg);
  assert_false(o.table.dev[RD_DEV_FPGA].present);
  assert_contains(o.detail[RD_DEV_FPGA], "no-op shim");
  assert_null(strchr(o.running, 'F'));
  assert_null(o.rmm_ops);
  assert_null(o.learner_ops);
  setup_xrt("", 16, 1024, 64, &err);
}

/* Two tables placed on one board's replay kernel: the first holds it (its
 * create runs the whole XRT path in the shim), the second falls back to
 * the CPU tree with rmm_xrt.c's RD_EBUSY in its note; once the first is
 * deleted, the kernel is free again. */
static void test_noop_second_table_busy(void **state) {
  (void)state;
  rd_error_t err;
  if (setup_xrt(xclbin_path, 16, 1024, 64, &err) != RD_OK) fail_msg("%s", err.msg);
  rd_registry_t *r = make_registry();
  spec_t s;
  make_spec(&s, 1024, 0);
  wl_cfg_t wc = workload_configs(1024);
  rd_device_t board = board_entry(0, 1); /* the module's device: no usable board, so 0 */
  rd_placement_t pl;
  run(&pl, RD_DEV_CPU, RD_DEV_FPGA, RD_DEV_CPU, &board, &wc);
  assert_string_equal(pl.running, "C-F-C");
  assert_ptr_equal(pl.rmm_ops, &rd_fpga_xrt_rmm_ops);
  rd_workload_t *a = NULL, *b = NULL, *c = NULL;
  rd_error_clear(&err);
  if (rd_spec_pb_register(r, &s.spec, &pl, &a, &err)) fail_msg("a: %s", err.msg);
  assert_string_equal(rd_table_rmm_name(&a->table), "fpga-xrt");
  assert_string_equal(a->placement->running, "C-F-C");
  if (rd_spec_pb_register(r, &s.spec, &pl, &b, &err)) fail_msg("b: %s", err.msg);
  assert_string_equal(rd_table_rmm_name(&b->table), "cpu");
  assert_string_equal(b->placement->running, "C-C-C");
  assert_contains(b->placement->note, "mapped C-F-C; running C-C-C: the replay module stays on "
                                      "the CPU: fpga xrt: device 0's replay kernel already holds "
                                      "another table's tree");
  /* Deleting the holder frees the kernel (the last reference destroys its
   * table). */
  char id[RD_WORKLOAD_ID_LEN + 1];
  snprintf(id, sizeof id, "%s", a->id);
  rd_workload_unref(a);
  assert_int_equal(rd_registry_delete(r, id, &err), RD_OK);
  if (rd_spec_pb_register(r, &s.spec, &pl, &c, &err)) fail_msg("c: %s", err.msg);
  assert_string_equal(rd_table_rmm_name(&c->table), "fpga-xrt");
  rd_workload_unref(b);
  rd_workload_unref(c);
  rd_registry_destroy(r);
  setup_xrt("", 16, 1024, 64, &err);
}
#endif

/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc > 1) mode = argv[1];
  const int noop = strcmp(mode, "noop") == 0;
  if (!noop && strcmp(mode, "plain") != 0) {
    fprintf(stderr, "usage: %s [plain|noop]\n", argv[0]);
    return 2;
  }
  rd_log_open(NULL, RD_LOG_ERROR, NULL);
  unsetenv("XILINX_XRT");
  unsetenv("XCL_EMULATION_MODE");
  if (rdt_tmpdir(dir, sizeof dir, "placement") != 0) return 1;
  snprintf(xclbin_path, sizeof xclbin_path, "%s/k.xclbin", dir);
  snprintf(junk_path, sizeof junk_path, "%s/junk.xclbin", dir);
  FILE *f = fopen(junk_path, "wb");
  if (!f) return 1;
  fputs("not an xclbin at all", f);
  fclose(f);
  int rc;
  if (!noop) {
    /* Only the magic: nothing opens it here. */
    f = fopen(xclbin_path, "wb");
    if (!f) return 1;
    fwrite("xclbin2\0", 1, 8, f);
    fclose(f);
    rd_device_t board = board_entry(BOARD_INDEX, 0);
    rd_devices_inject(&board);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fpga_run_decision),
        cmocka_unit_test(test_board_text),
        cmocka_unit_test(test_setup_xrt),
        cmocka_unit_test(test_board_with_xclbin),
        cmocka_unit_test(test_board_without_xclbin),
        cmocka_unit_test(test_noop_and_assumed_never_xrt),
        cmocka_unit_test(test_csim_unchanged),
        cmocka_unit_test(test_learner_not_fitting),
        cmocka_unit_test(test_shape_not_fitting),
        cmocka_unit_test(test_rmm_on_cpu),
        cmocka_unit_test(test_gpu_bind),
        cmocka_unit_test(test_compute_with_board),
        cmocka_unit_test(test_assumed_figures_finite),
        cmocka_unit_test(test_registry_busy_falls_back),
        cmocka_unit_test(test_registry_pins),
    };
    rc = cmocka_run_group_tests(tests, NULL, NULL);
  } else {
#if RD_XRT_BUILT
    if (xrt_env_setup(dir, "noop") != 0) return 1;
    const rd_fpga_kernel_desc_t *both[2] = {&rd_fpga_rmm_kernel_desc,
                                            &rd_fpga_learner_kernel_desc};
    rd_error_t err;
    if (rd_fpga_xclbin_write(xclbin_path, both, 2, &err) != RD_OK) {
      fprintf(stderr, "xclbin: %s\n", err.msg);
      return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_noop_listed_never_used),
        cmocka_unit_test(test_noop_second_table_busy),
    };
    rc = cmocka_run_group_tests(tests, NULL, NULL);
#else
    fprintf(stderr, "noop mode needs an XRT build\n");
    rc = 2;
#endif
  }
  rdt_rmtree(dir);
  rd_log_close();
  return rc;
}
