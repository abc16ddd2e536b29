/* test_fpga_xrt.c - the FPGA host path (backends/fpga/host_xrt.c) against
 * XRT's no-op shim, with an xclbin written from the kernels' argument lists
 * (backends/fpga/xclbin_gen.c). Built only with XRT (meson option xrt).
 *
 * XCL_EMULATION_MODE=noop runs every XRT call of the path (device open,
 * xclbin load, kernel open, buffer allocation, map and sync, arguments,
 * start, wait) without a device: no kernel executes, so the outputs stay
 * as the host left them (zero). What this checks is the host code and its
 * error paths, not the kernel (tests/test_fpga_rmm.c does that in
 * C-simulation). XRT loads its shims from $XILINX_XRT/lib, which Debian
 * does not provide: the test makes a folder whose lib links to the
 * multiarch directory (shared/stack-notes.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xclbin.h>

#include "host_xrt.h"
#include "kernels/learner.h"
#include "xclbin_gen.h"

#include "xrt_env.h"
#include "rdt_main.h"

static char dir[64];
static char rmm_path[128], other_path[128], garbage_path[128], both_path[128];

static const rd_fpga_karg_t VADD_ARGS[] = {
    {"a", 1, "float*", "M_AXI_GMEM0", 0},
    {"b", 1, "float*", "M_AXI_GMEM0", 0},
    {"n", 0, "uint", NULL, 0},
};
static const rd_fpga_kernel_desc_t VADD = {"vadd", 3, VADD_ARGS};

static int group_setup(void **state) {
  (void)state;
  if (xrt_env_noop_dir(dir, sizeof dir, "xrt_test") != 0) return -1;
  snprintf(garbage_path, sizeof garbage_path, "%s", rdt_path(dir, "garbage.xclbin"));
  snprintf(both_path, sizeof both_path, "%s", rdt_path(dir, "both.xclbin")); /* a test writes it */
  const rd_fpga_kernel_desc_t *rmm[1] = {&rd_fpga_rmm_kernel_desc};
  const rd_fpga_kernel_desc_t *vadd[1] = {&VADD};
  if (xrt_env_xclbin(rmm_path, sizeof rmm_path, dir, "rmm.xclbin", rmm, 1) != 0) return -1;
  return xrt_env_xclbin(other_path, sizeof other_path, dir, "vadd.xclbin", vadd, 1);
}

static int group_teardown(void **state) {
  (void)state;
  return rdt_rmtree(dir);
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)len + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  b[len] = 0;
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* The file XRT loads: header, the four sections, the rmm_kernel's
 * arguments at Vitis HLS's register offsets. */
static void test_xclbin_layout(void **state) {
  (void)state;
  size_t n;
  char *b = slurp(rmm_path, &n);
  const struct axlf *ax = (const struct axlf *)b;
  assert_memory_equal(ax->m_magic, "xclbin2", 8);
  assert_int_equal(ax->m_header.m_length, n);
  assert_int_equal(ax->m_header.m_numSections, 4);
  int seen[4] = {0};
  for (uint32_t s = 0; s < 4; s++) {
    const struct axlf_section_header *h = &ax->m_sections[s];
    assert_true(h->m_sectionOffset % 8 == 0 && h->m_sectionOffset + h->m_sectionSize <= n);
    const char *p = b + h->m_sectionOffset;
    switch (h->m_sectionKind) {
    case MEM_TOPOLOGY: {
      const struct mem_topology *m = (const void *)p;
      assert_int_equal(m->m_count, 1);
      assert_int_equal(m->m_mem_data[0].m_used, 1);
      seen[0] = 1;
      break;
    }
    case IP_LAYOUT: {
      const struct ip_layout *l = (const void *)p;
      assert_int_equal(l->m_count, 1);
      assert_string_equal((const char *)l->m_ip_data[0].m_name, "rmm_kernel:rmm_kernel_1");
      assert_int_equal(l->m_ip_data[0].m_type, IP_KERNEL);
      assert_int_equal((l->m_ip_data[0].properties & IP_CONTROL_MASK) >> IP_CONTROL_SHIFT,
                       AP_CTRL_HS);
      seen[1] = 1;
      break;
    }
    case CONNECTIVITY: {
      const struct connectivity *c = (const void *)p;
      assert_int_equal(c->m_count, 4); /* the four pointers */
      for (int i = 0; i < 4; i++) {
        assert_int_equal(c->m_connection[i].arg_index, 3 + i);
        assert_int_equal(c->m_connection[i].m_ip_layout_index, 0);
        assert_int_equal(c->m_connection[i].mem_data_index, 0);
      }
      seen[2] = 1;
      break;
    }
    case EMBEDDED_METADATA: {
      char *xml = strndup(p, h->m_sectionSize);
      assert_non_null(strstr(xml, "<kernel name=\"rmm_kernel\""));
      assert_non_null(strstr(xml, "<arg name=\"op\" addressQualifier=\"0\" id=\"0\" "
                                  "port=\"S_AXI_CONTROL\" size=\"0x4\" offset=\"0x10\""));
      assert_non_null(strstr(xml, "<arg name=\"first\" addressQualifier=\"0\" id=\"2\" "
                                  "port=\"S_AXI_CONTROL\" size=\"0x4\" offset=\"0x20\""));
      assert_non_null(strstr(xml, "<arg name=\"u64_in\" addressQualifier=\"1\" id=\"3\" "
                                  "port=\"M_AXI_GMEM0\" size=\"0x8\" offset=\"0x28\""));
      assert_non_null(strstr(xml, "<arg name=\"info_out\" addressQualifier=\"1\" id=\"6\" "
                                  "port=\"M_AXI_GMEM0\" size=\"0x8\" offset=\"0x4c\""));
      assert_non_null(strstr(xml, "<instance name=\"rmm_kernel_1\">"));
      free(xml);
      seen[3] = 1;
      break;
    }
    default:
      fail_msg("unexpected section kind %u", h->m_sectionKind);
    }
  }
  assert_true(seen[0] && seen[1] && seen[2] && seen[3]);
  /* The same kernels give the same bytes (the UUID is a content hash). */
  char again[160];
  snprintf(again, sizeof again, "%s/again.xclbin", dir);
  const rd_fpga_kernel_desc_t *rmm[1] = {&rd_fpga_rmm_kernel_desc};
  rd_error_t err;
  assert_int_equal(rd_fpga_xclbin_write(again, rmm, 1, &err), RD_OK);
  size_t n2;
  char *b2 = slurp(again, &n2);
  assert_int_equal(n, n2);
  assert_memory_equal(b, b2, n);
  free(b);
  free(b2);
}

static void test_xclbin_errors(void **state) {
  (void)state;
  rd_error_t err;
  const rd_fpga_kernel_desc_t *rmm[1] = {&rd_fpga_rmm_kernel_desc};
  assert_int_equal(rd_fpga_xclbin_write(rmm_path, rmm, 0, &err), RD_EINVAL);
  static const rd_fpga_karg_t BAD_ARGS[] = {{"bad name", 0, "uint", NULL, 0}};
  const rd_fpga_kernel_desc_t bad = {"k", 1, BAD_ARGS};
  const rd_fpga_kernel_desc_t *badk[1] = {&bad};
  assert_int_equal(rd_fpga_xclbin_write("/tmp/unused.xclbin", badk, 1, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "argument 0"));
  assert_int_equal(rd_fpga_xclbin_write("/nonexistent-dir/x.xclbin", rmm, 1, &err), RD_ESTORE);
}

/* The learner top's description is lrn_train_step's signature: the
 * assignment below fails to compile if the kernel's parameters change in
 * number or type, and the names and order are checked against it here; the
 * 64-bit scalar step takes a pointer's 12 bytes of registers. Both kernels
 * in one xclbin load in the no-op shim, and the replay kernel opens there. */
static void test_learner_kernel_xclbin(void **state) {
  (void)state;
  int (*top)(const uint32_t *, const double *, uint64_t, uint32_t, float *, float *, float *,
             float *, float *, const float *, const int32_t *, const float *, const float *,
             const float *, const float *, const float *, float *, double *) = lrn_train_step;
  assert_non_null(top);
  static const char *const want[] = {"desc", "hp", "step", "n", "params", "target", "adam_m",
                                     "adam_v", "ws", "obs", "action_i", "action_f", "reward",
                                     "discount", "next_obs", "weights", "td_abs", "stats"};
  const rd_fpga_kernel_desc_t *k = &rd_fpga_learner_kernel_desc;
  assert_string_equal(k->name, "lrn_train_step");
  assert_int_equal(k->n_args, sizeof want / sizeof want[0]);
  for (uint32_t i = 0; i < k->n_args; i++) {
    assert_string_equal(k->args[i].name, want[i]);
    assert_int_equal(k->args[i].pointer, i != 2 && i != 3); /* step and n are scalars */
  }
  assert_int_equal(rd_fpga_karg_offset(k, 2), 0x28); /* desc 0x10, hp 0x1c, step */
  assert_int_equal(rd_fpga_karg_offset(k, 3), 0x34); /* after the 64-bit step */
  assert_int_equal(rd_fpga_karg_offset(k, 4), 0x3c);
  const rd_fpga_kernel_desc_t *both[2] = {&rd_fpga_rmm_kernel_desc, k};
  rd_error_t err;
  assert_int_equal(rd_fpga_xclbin_write(both_path, both, 2, &err), RD_OK);
  size_t n;
  char *b = slurp(both_path, &n);
  const struct axlf *ax = (const struct axlf *)b;
  int found = 0;
  for (uint32_t sct = 0; sct < ax->m_header.m_numSections; sct++) {
    const struct axlf_section_header *h = &ax->m_sections[sct];
    if (h->m_sectionKind == IP_LAYOUT) {
      const struct ip_layout *l = (const void *)(b + h->m_sectionOffset);
      assert_int_equal(l->m_count, 2);
      assert_string_equal((const char *)l->m_ip_data[1].m_name, "lrn_train_step:lrn_train_step_1");
      found |= 1;
    } else if (h->m_sectionKind == EMBEDDED_METADATA) {
      char *xml = strndup(b + h->m_sectionOffset, h->m_sectionSize);
      assert_non_null(strstr(xml, "<arg name=\"step\" addressQualifier=\"0\" id=\"2\" "
                                  "port=\"S_AXI_CONTROL\" size=\"0x8\" offset=\"0x28\""));
      assert_non_null(strstr(xml, "<arg name=\"stats\" addressQualifier=\"1\" id=\"17\" "
                                  "port=\"M_AXI_GMEM0\" size=\"0x8\""));
      assert_non_null(strstr(xml, "<port name=\"M_AXI_GMEM4\" mode=\"master\""));
      free(xml);
      found |= 2;
    }
  }
  assert_int_equal(found, 3);
  free(b);
  rd_fpga_xrt_rmm_t x;
  int rc = rd_fpga_xrt_rmm_open(&x, 0, both_path, 64, &err);
  if (rc != RD_OK) fail_msg("open the two-kernel xclbin: %s", err.msg);
  rd_fpga_xrt_rmm_close(&x);
}

/* The whole path through the no-op shim. */
static void test_host_path_noop(void **state) {
  (void)state;
  rd_error_t err;
  rd_fpga_xrt_rmm_t x;
  int rc = rd_fpga_xrt_rmm_open(&x, 0, rmm_path, 64, &err);
  if (rc != RD_OK) fail_msg("open: %s", err.msg);
  uint64_t in[64], info[3] = {7, 7, 7};
  uint32_t pos[64], leaves[64];
  for (int i = 0; i < 64; i++) in[i] = (uint64_t)i * 3, pos[i] = (uint32_t)i, leaves[i] = 99;
  static const uint32_t OPS[] = {0, 4, 1, 2, 3, 5};
  assert_int_equal(x.noop, 1);
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
    rc = rd_fpga_xrt_rmm_call(&x, OPS[i], 64, 0, in, pos, leaves, info, &err);
    if (rc != RD_OK) fail_msg("op %u: %s", OPS[i], err.msg);
    /* noop: no kernel ran; the buffers came back as the host left them,
     * the status word still the host's "unwritten" sentinel. */
    assert_true(info[0] == RD_XRT_RMM_UNWRITTEN);
    assert_int_equal(info[1], 0);
    assert_int_equal(info[2], 0);
  }
  assert_int_equal(leaves[0], 0);
  /* More than the buffers hold: refused before XRT is asked. */
  assert_int_equal(rd_fpga_xrt_rmm_call(&x, 1, 65, 0, in, NULL, leaves, info, &err), RD_ETOOBIG);
  rd_fpga_xrt_rmm_close(&x);
  assert_null(x.device);
  rd_fpga_xrt_rmm_close(&x); /* twice is harmless */
  assert_int_equal(rd_fpga_xrt_rmm_call(&x, 1, 1, 0, in, NULL, leaves, info, &err), RD_EINVAL);
  /* It opens again after a close. */
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, rmm_path, 8, &err), RD_OK);
  rd_fpga_xrt_rmm_close(&x);
}

static void test_host_errors(void **state) {
  (void)state;
  rd_error_t err;
  rd_fpga_xrt_rmm_t x;
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing.xclbin", dir);
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, missing, 8, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "missing.xclbin"));
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, garbage_path, 8, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "refused"));
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, other_path, 8, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "no kernel rmm_kernel"));
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, rmm_path, 0, &err), RD_EINVAL);
  assert_null(x.device);
  /* Without XILINX_XRT, XRT would abort the process: refused instead. */
  char *root = strdup(getenv("XILINX_XRT"));
  unsetenv("XILINX_XRT");
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, rmm_path, 8, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "XILINX_XRT"));
  setenv("XILINX_XRT", root, 1);
  free(root);
  /* An emulation mode that needs Vitis (it would hang): refused before any
   * XRT call. */
  setenv("XCL_EMULATION_MODE", "sw_emu", 1);
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, rmm_path, 8, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "sw_emu"));
  assert_null(x.device);
  setenv("XCL_EMULATION_MODE", "noop", 1);
  /* After all that, the path still works. */
  assert_int_equal(rd_fpga_xrt_rmm_open(&x, 0, rmm_path, 8, &err), RD_OK);
  rd_fpga_xrt_rmm_close(&x);
}

RDT_MAIN(group_setup, group_teardown,
         cmocka_unit_test(test_xclbin_layout),
         cmocka_unit_test(test_xclbin_errors),
         cmocka_unit_test(test_learner_kernel_xclbin),
         cmocka_unit_test(test_host_path_noop),
         cmocka_unit_test(test_host_errors))
