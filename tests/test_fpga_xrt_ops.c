/* test_fpga_xrt_ops.c - the replay module over XRT (backends/fpga/rmm_xrt.c,
 * a table's rd_rmm_ops_t) and the learner backend over XRT
 * (backends/fpga/learner_backend_xrt.c), against XRT's no-op shim, with an xclbin
 * written from the kernels' argument lists (xclbin_gen.c). Built only with
 * XRT, not under sanitizers (tests/meson.build says why).
 *
 * No kernel executes in the shim, so what is checked is the host side:
 *  - every operation runs the whole XRT path (open, load, kernel, buffers,
 *    sync, arguments, start, wait), counted in requests and kernel runs;
 *  - after a call the input buffers hold exactly the host's data for the
 *    last request (and the previous request's items past it: the request
 *    splitting, item for item), and the status word the host's "unwritten"
 *    sentinel;
 *  - what the host keeps (the shadow's leaves and total; the learner's
 *    initial weights, descriptor and hyper-parameters on the device) is
 *    exact;
 *  - the error paths: bad calls change nothing and make no request; XRT's
 *    failures (no XILINX_XRT, a refused xclbin, a kernel missing from it)
 *    are clean errors, classified as device faults for the learner;
 *  - a sample and a learner step, which need a kernel's result, fail as
 *    such (RD_EINTERNAL; for the learner RD_LEARNER_FAULT_DEVICE).
 * The reading of a kernel's answer on a board (status, total) is checked
 * with words no kernel here can produce (test_rmm_status).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_xrt.h"
#include "kernels/learner.h"
#include "learner_backend.h"
#include "learner_backend_fpga.h"
#include "learner_backend_xrt.h"
#include "rd_tree_step.h"
#include "rmm_xrt.h"
#include "table.h"
#include "xclbin_gen.h"
#include "learner_rows.h"
#include "rdt_learner.h"
#include "rdt_schema.h"

#include "xrt_env.h"
#include "rdt_main.h"

static char dir[64];
static char both_path[128], rmm_only[128], lrn_only[128], garbage_path[128];

static int group_setup(void **state) {
  (void)state;
  if (xrt_env_noop_dir(dir, sizeof dir, "xrt_ops") != 0) return -1;
  snprintf(garbage_path, sizeof garbage_path, "%s", rdt_path(dir, "garbage.xclbin"));
  const rd_fpga_kernel_desc_t *both[2] = {&rd_fpga_rmm_kernel_desc, &rd_fpga_learner_kernel_desc};
  if (xrt_env_xclbin(both_path, sizeof both_path, dir, "both.xclbin", both, 2) != 0 ||
      xrt_env_xclbin(rmm_only, sizeof rmm_only, dir, "rmm.xclbin", both, 1) != 0)
    return -1;
  return xrt_env_xclbin(lrn_only, sizeof lrn_only, dir, "lrn.xclbin", both + 1, 1);
}

static int group_teardown(void **state) {
  (void)state;
  return rdt_rmtree(dir);
}

/* ------------------------------------------------------------------ */
/* The replay module                                                   */
/* ------------------------------------------------------------------ */

#define CAP 1000u
#define K 16u
#define BATCH 64u
/* The build's leaf bound: the CPU tree's for 100 leaves, so tables of 100
 * items and more fit and smaller ones do not. */
#define BUILD_LEAF_TABLE 100u

static void configure_rmm(const char *xclbin) {
  rd_fpga_xrt_rmm_params_t p;
  rd_fpga_xrt_rmm_params_default(&p);
  snprintf(p.xclbin, sizeof p.xclbin, "%s", xclbin);
  p.k = K;
  p.capacity = 4096;
  p.max_batch = BATCH;
  p.max_leaf = rd_st_max_leaf(BUILD_LEAF_TABLE);
  rd_error_t err;
  if (rd_fpga_xrt_rmm_configure(&p, &err) != RD_OK) fail_msg("configure: %s", err.msg);
}

static void *create_ok(void) {
  void *m = NULL;
  rd_error_t err;
  int rc = rd_fpga_xrt_rmm_ops.create(&m, CAP, K, rd_st_max_leaf(CAP), &err);
  if (rc != RD_OK) fail_msg("create: %s", err.msg);
  assert_non_null(m);
  return m;
}

static rd_fpga_xrt_rmm_stats_t stats_of(const void *m) {
  rd_fpga_xrt_rmm_stats_t s;
  rd_fpga_xrt_rmm_stats(m, &s);
  return s;
}

static const uint64_t *u64_bo(const void *m) {
  return rd_fpga_xrt_rmm_host(m)->map[RD_XRT_BO_U64_IN];
}
static const uint32_t *pos_bo(const void *m) {
  return rd_fpga_xrt_rmm_host(m)->map[RD_XRT_BO_POS_IN];
}
static const uint64_t *info_bo(const void *m) {
  return rd_fpga_xrt_rmm_host(m)->map[RD_XRT_BO_INFO_OUT];
}

/* The host's reference: every leaf and the sum, kept by the test. */
static uint64_t ref[CAP];
static uint64_t ref_total(void) {
  uint64_t s = 0;
  for (uint32_t i = 0; i < CAP; i++) s += ref[i];
  return s;
}

static void assert_leaves(const void *m) {
  for (uint32_t i = 0; i < CAP; i++)
    if (rd_fpga_xrt_rmm_ops.leaf(m, i) != ref[i])
      fail_msg("leaf %u: %llu, want %llu", i, (unsigned long long)rd_fpga_xrt_rmm_ops.leaf(m, i),
               (unsigned long long)ref[i]);
  assert_true(rd_fpga_xrt_rmm_ops.total(m) == ref_total());
}

/* A new module on both_path whose leaves 0..n-1 are L[i] = first + i, as
 * ref has them (every other leaf 0). */
static void *module_with_leaves(uint64_t *L, uint32_t n, uint64_t first) {
  configure_rmm(both_path);
  memset(ref, 0, sizeof ref);
  void *m = create_ok();
  for (uint32_t i = 0; i < n; i++) L[i] = first + i;
  rd_error_t err;
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, 0, n, L, &err), RD_OK);
  for (uint32_t i = 0; i < n; i++) ref[i] = L[i];
  return m;
}

/* The whole path: create, insert, update, sample, total, check, destroy. */
static void test_rmm_ops_path(void **state) {
  (void)state;
  configure_rmm(both_path);
  memset(ref, 0, sizeof ref);
  rd_error_t err;
  /* memsize: the shadow (capacity + one batch of u64) and the struct. */
  size_t ms = rd_fpga_xrt_rmm_ops.memsize(CAP, K);
  assert_true(ms >= (CAP + BATCH) * sizeof(uint64_t) && ms < (CAP + BATCH) * 8 + 4096);
  void *m = create_ok();
  assert_string_equal(rd_fpga_xrt_rmm_ops.name, "fpga-xrt");
  const rd_fpga_xrt_rmm_t *h = rd_fpga_xrt_rmm_host(m);
  assert_int_equal(h->noop, 1);
  assert_int_equal(h->max_batch, BATCH);
  /* The create's reset went through XRT; no kernel wrote its status. */
  rd_fpga_xrt_rmm_stats_t s = stats_of(m);
  assert_int_equal(s.requests, 1);
  assert_int_equal(s.unverified, 1);
  assert_int_equal(s.broken, 0);
  assert_true(info_bo(m)[0] == RD_XRT_RMM_UNWRITTEN);
  assert_leaves(m);

  /* One device, one tree: a second module on it is refused. */
  void *m2 = (void *)1;
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m2, CAP, K, rd_st_max_leaf(CAP), &err), RD_EBUSY);
  assert_null(m2);
  assert_non_null(strstr(err.msg, "one tree per kernel"));

  /* Insert 150 leaves at 10: requests of 64, 64 and 22. */
  uint64_t L[150];
  for (uint32_t i = 0; i < 150; i++) L[i] = (uint64_t)i * 7919 + 1;
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, 10, 150, L, &err), RD_OK);
  for (uint32_t i = 0; i < 150; i++) ref[10 + i] = L[i];
  s = stats_of(m);
  assert_int_equal(s.requests, 1 + 3);
  assert_int_equal(s.inserted, 150);
  assert_int_equal(s.unverified, 4);
  /* The input buffer: the last request's 22 leaves, then the second's
   * items past them (64 + 22 .. 127). */
  assert_memory_equal(u64_bo(m), L + 128, 22 * sizeof(uint64_t));
  assert_memory_equal(u64_bo(m) + 22, L + 64 + 22, (64 - 22) * sizeof(uint64_t));
  assert_leaves(m);
  /* Over leaves already set: the total follows (old leaves out, new in). */
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, 100, 20, L + 3, &err), RD_OK);
  for (uint32_t i = 0; i < 20; i++) ref[100 + i] = L[3 + i];
  assert_int_equal(stats_of(m).requests, 5);
  assert_leaves(m);

  /* Update 100 positions, one written twice (the later wins): two
   * requests, 64 and 36. */
  uint32_t P[100];
  uint64_t V[100];
  for (uint32_t i = 0; i < 100; i++) {
    P[i] = (i * 37 + 3) % CAP;
    V[i] = (uint64_t)i * 131 + 5;
  }
  P[70] = P[5]; /* a leaf in both requests */
  V[70] = 999999;
  assert_int_equal(rd_fpga_xrt_rmm_ops.update(m, 100, P, V, &err), RD_OK);
  for (uint32_t i = 0; i < 100; i++) ref[P[i]] = V[i];
  assert_true(ref[P[5]] == 999999);
  s = stats_of(m);
  assert_int_equal(s.requests, 5 + 2);
  assert_int_equal(s.updated, 100);
  assert_memory_equal(pos_bo(m), P + 64, 36 * sizeof(uint32_t));
  assert_memory_equal(pos_bo(m) + 36, P + 36, 28 * sizeof(uint32_t));
  assert_memory_equal(u64_bo(m), V + 64, 36 * sizeof(uint64_t));
  assert_memory_equal(u64_bo(m) + 36, V + 36, 28 * sizeof(uint64_t));
  assert_leaves(m);

  /* A sample runs the XRT path, then fails: no kernel computed leaves. */
  const uint64_t total = ref_total();
  uint64_t T[10];
  uint32_t out[10];
  for (uint32_t i = 0; i < 10; i++) T[i] = total / 10 * i + 3;
  assert_int_equal(rd_fpga_xrt_rmm_ops.sample(m, 10, T, out, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "no-op shim"));
  s = stats_of(m);
  assert_int_equal(s.requests, 7 + 1);
  assert_int_equal(s.sampled, 0);
  assert_int_equal(s.broken, 0); /* a sample changes no leaf: still usable */
  assert_memory_equal(u64_bo(m), T, sizeof T);
  assert_true(info_bo(m)[0] == RD_XRT_RMM_UNWRITTEN);

  /* RMM_OP_TOTAL: answered by no kernel, so not verified. */
  int verified = 7;
  assert_int_equal(rd_fpga_xrt_rmm_check(m, &verified, &err), RD_OK);
  assert_int_equal(verified, 0);
  assert_int_equal(stats_of(m).requests, 9);
  assert_leaves(m);

  /* The module still takes writes after the failed sample. */
  uint64_t one = 42;
  uint32_t p0 = 0;
  assert_int_equal(rd_fpga_xrt_rmm_ops.update(m, 1, &p0, &one, &err), RD_OK);
  ref[0] = 42;
  assert_leaves(m);
  assert_int_equal(stats_of(m).requests, 10);

  rd_fpga_xrt_rmm_ops.destroy(m);
  /* The device is free again, and a new module starts from zero leaves. */
  m = create_ok();
  assert_true(rd_fpga_xrt_rmm_ops.total(m) == 0);
  assert_true(rd_fpga_xrt_rmm_ops.leaf(m, 10) == 0);
  uint32_t o;
  uint64_t t0 = 0;
  assert_int_equal(rd_fpga_xrt_rmm_ops.sample(m, 1, &t0, &o, &err), RD_EEMPTY);
  assert_int_equal(stats_of(m).requests, 1);
  rd_fpga_xrt_rmm_ops.destroy(m);
  rd_fpga_xrt_rmm_ops.destroy(NULL); /* harmless */
}

/* A bad call is refused whole: no request, no leaf, no buffer changes. */
static void test_rmm_bad_calls(void **state) {
  (void)state;
  rd_error_t err;
  uint64_t L[200];
  void *m = module_with_leaves(L, 200, 1);
  const uint64_t requests = stats_of(m).requests;
  uint64_t u64_before[BATCH];
  uint32_t pos_before[BATCH];
  memcpy(u64_before, u64_bo(m), sizeof u64_before);
  memcpy(pos_before, pos_bo(m), sizeof pos_before);
#define UNCHANGED()                                                         \
  do {                                                                      \
    assert_int_equal(stats_of(m).requests, requests);                       \
    assert_memory_equal(u64_bo(m), u64_before, sizeof u64_before);          \
    assert_memory_equal(pos_bo(m), pos_before, sizeof pos_before);          \
    assert_leaves(m);                                                       \
  } while (0)

  /* An insert past the table's end (its last leaf would be 1000). */
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, CAP - 10, 11, L, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "outside [0, 1000)"));
  UNCHANGED();
  /* A leaf above the table's bound, in the third request's range. */
  uint64_t big[150];
  memcpy(big, L, sizeof big);
  big[140] = rd_st_max_leaf(CAP) + 1;
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, 300, 150, big, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "batch index 140"));
  UNCHANGED();
  /* An update whose position 1000 comes after 99 good ones (the second
   * request's): nothing of the first request is applied. */
  uint32_t P[100];
  uint64_t V[100];
  for (uint32_t i = 0; i < 100; i++) P[i] = i, V[i] = 77;
  P[99] = CAP;
  assert_int_equal(rd_fpga_xrt_rmm_ops.update(m, 100, P, V, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "position 1000 at batch index 99"));
  UNCHANGED();
  P[99] = 99;
  V[80] = rd_st_max_leaf(CAP) + 1;
  assert_int_equal(rd_fpga_xrt_rmm_ops.update(m, 100, P, V, &err), RD_ERANGE);
  UNCHANGED();
  /* A target equal to the total, after good ones. */
  const uint64_t total = ref_total();
  uint64_t T[70];
  uint32_t out[70];
  for (uint32_t i = 0; i < 70; i++) T[i] = i;
  T[69] = total;
  assert_int_equal(rd_fpga_xrt_rmm_ops.sample(m, 70, T, out, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "not below the total"));
  UNCHANGED();
  /* Empty calls are no requests. */
  assert_int_equal(rd_fpga_xrt_rmm_ops.update(m, 0, P, V, &err), RD_OK);
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, 5, 0, L, &err), RD_OK);
  assert_int_equal(rd_fpga_xrt_rmm_ops.sample(m, 0, T, out, &err), RD_OK);
  UNCHANGED();
#undef UNCHANGED
  rd_fpga_xrt_rmm_ops.destroy(m);
}

/* A device failure (simulated: the host path's run handle taken away, so
 * the next request fails as a failed XRT call would): the failing request
 * is undone in the shadow, and the module refuses every later call. */
static void test_rmm_device_failure(void **state) {
  (void)state;
  rd_error_t err;
  uint64_t L[40];
  void *m = module_with_leaves(L, 40, 1000);
  rd_fpga_xrt_rmm_t *h = (rd_fpga_xrt_rmm_t *)rd_fpga_xrt_rmm_host(m);
  void *run = h->run;
  h->run = NULL;
  uint32_t P[3] = {1, 2, 1};
  uint64_t V[3] = {5, 6, 7};
  assert_int_not_equal(rd_fpga_xrt_rmm_ops.update(m, 3, P, V, &err), RD_OK);
  assert_leaves(m); /* leaf 1 back to 1001, not 5 or 7 */
  assert_int_equal(stats_of(m).broken, 1);
  h->run = run;
  /* Broken: no later call reaches the device. */
  const uint64_t requests = stats_of(m).requests;
  assert_int_equal(rd_fpga_xrt_rmm_ops.update(m, 3, P, V, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "failed earlier"));
  assert_int_equal(rd_fpga_xrt_rmm_ops.set_range(m, 0, 3, V, &err), RD_EINTERNAL);
  uint64_t t = 1;
  uint32_t o;
  assert_int_equal(rd_fpga_xrt_rmm_ops.sample(m, 1, &t, &o, &err), RD_EINTERNAL);
  int verified;
  assert_int_equal(rd_fpga_xrt_rmm_check(m, &verified, &err), RD_EINTERNAL);
  assert_int_equal(stats_of(m).requests, requests);
  assert_leaves(m);
  rd_fpga_xrt_rmm_ops.destroy(m);
}

/* Reading a kernel's answer on a board, with words no kernel here makes. */
static void test_rmm_status(void **state) {
  (void)state;
  rd_error_t err;
  int v = -1;
  const uint64_t ok[3] = {0, 42, 9};
  assert_int_equal(rd_fpga_xrt_rmm_status(ok, 0, 42, "update", &v, &err), RD_OK);
  assert_int_equal(v, 1);
  assert_int_equal(rd_fpga_xrt_rmm_status(ok, 0, 43, "update", &v, &err), RD_EINTERNAL);
  assert_int_equal(v, 0);
  assert_non_null(strstr(err.msg, "total 42 is not the host's 43"));
  const uint64_t range[3] = {1, 42, 0};
  assert_int_equal(rd_fpga_xrt_rmm_status(range, 0, 42, "sample", &v, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "RMM_ERANGE"));
  assert_non_null(strstr(err.msg, "sample"));
  const uint64_t corrupt[3] = {5, 42, 0};
  assert_int_equal(rd_fpga_xrt_rmm_status(corrupt, 1, 42, "sample", &v, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "RMM_ECORRUPT"));
  const uint64_t odd[3] = {99, 42, 0};
  assert_int_equal(rd_fpga_xrt_rmm_status(odd, 0, 42, "insert", &v, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "unknown status"));
  const uint64_t none[3] = {RD_XRT_RMM_UNWRITTEN, 0, 0};
  assert_int_equal(rd_fpga_xrt_rmm_status(none, 0, 42, "insert", &v, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "without writing its status"));
  v = -1;
  assert_int_equal(rd_fpga_xrt_rmm_status(none, 1, 42, "insert", &v, &err), RD_OK);
  assert_int_equal(v, 0);
}

/* Shapes the build cannot hold, configuration errors and XRT's failures:
 * clean errors, and the device stays free for the next module. */
static void test_rmm_errors(void **state) {
  (void)state;
  rd_error_t err;
  void *m = NULL;
  /* Not configured. */
  assert_int_equal(rd_fpga_xrt_rmm_configure(NULL, &err), RD_OK);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(CAP, K), 0);
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, CAP, K, rd_st_max_leaf(CAP), &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "not configured"));
  /* Bad parameters are refused, and the old ones (none) stay. */
  rd_fpga_xrt_rmm_params_t p;
  rd_fpga_xrt_rmm_params_default(&p);
  assert_int_equal(p.k, 16);
  assert_int_equal(p.capacity, 65536);
  assert_int_equal(p.max_batch, 1024);
  assert_true(p.max_leaf == rd_st_max_leaf(65536));
  assert_int_equal(rd_fpga_xrt_rmm_configure(&p, &err), RD_EINVAL); /* no xclbin */
  snprintf(p.xclbin, sizeof p.xclbin, "%s", both_path);
  p.k = 12;
  assert_int_equal(rd_fpga_xrt_rmm_configure(&p, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "fanout 12"));
  p.k = 16;
  p.max_batch = 0;
  assert_int_equal(rd_fpga_xrt_rmm_configure(&p, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(CAP, K), 0);

  /* Shapes the build does not hold. */
  configure_rmm(both_path);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(CAP, 8), 0);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(5000, K), 0);
  assert_int_equal(rd_fpga_xrt_rmm_ops.memsize(BUILD_LEAF_TABLE - 1, K), 0);
  assert_true(rd_fpga_xrt_rmm_ops.memsize(BUILD_LEAF_TABLE, K) > 0);
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, CAP, 8, rd_st_max_leaf(CAP), &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "fanout 8"));
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, 5000, K, rd_st_max_leaf(5000), &err),
                   RD_EINVAL);
  assert_non_null(strstr(err.msg, "capacity 5000"));
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, 50, K, rd_st_max_leaf(50), &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "RMM_MAX_LEAF"));
  assert_null(m);

  /* XRT's failures. */
  configure_rmm(lrn_only);
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, CAP, K, rd_st_max_leaf(CAP), &err),
                   RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "no kernel rmm_kernel"));
  configure_rmm(garbage_path);
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, CAP, K, rd_st_max_leaf(CAP), &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "refused"));
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing.xclbin", dir);
  configure_rmm(missing);
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, CAP, K, rd_st_max_leaf(CAP), &err),
                   RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "missing.xclbin"));
  configure_rmm(rmm_only);
  char *root = strdup(getenv("XILINX_XRT"));
  unsetenv("XILINX_XRT");
  assert_int_equal(rd_fpga_xrt_rmm_ops.create(&m, CAP, K, rd_st_max_leaf(CAP), &err),
                   RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "XILINX_XRT"));
  setenv("XILINX_XRT", root, 1);
  free(root);
  assert_null(m);
  /* None of the failures kept the device: a module opens on it now. */
  m = create_ok();
  rd_fpga_xrt_rmm_ops.destroy(m);
}

/* A table on the module: inserts go to the device and the shadow, and the
 * leaves are the CPU table's integers; a sample fails cleanly. */
static void test_rmm_table(void **state) {
  (void)state;
  configure_rmm(both_path);
  rd_table_config_t c;
  rdt_scalar_table_config(&c, "id", RD_DTYPE_INT32, CAP);
  c.fanout = K;
  c.max_batch = 300;
  c.seed = 3;
  rd_table_t cpu, x;
  rd_error_t err;
  if (rd_table_init(&cpu, &c, &err) != RD_OK) fail_msg("cpu table: %s", err.msg);
  c.rmm = &rd_fpga_xrt_rmm_ops;
  if (rd_table_init(&x, &c, &err) != RD_OK) fail_msg("xrt table: %s", err.msg);
  assert_string_equal(rd_table_rmm_name(&x), "fpga-xrt");
  int32_t ids[300];
  double pr[300];
  for (int i = 0; i < 300; i++) ids[i] = i, pr[i] = 0.5 + (i % 17) * 0.25;
  rd_cbuf_t col = {ids, sizeof ids};
  assert_int_equal(rd_table_insert(&cpu, 300, &col, pr, NULL, &err), RD_OK);
  if (rd_table_insert(&x, 300, &col, pr, NULL, &err) != RD_OK) fail_msg("insert: %s", err.msg);
  /* 300 leaves in requests of 64: 5, after the create's reset. */
  assert_int_equal(stats_of(x.rmm).requests, 1 + 5);
  for (uint32_t i = 0; i < CAP; i++)
    assert_true(rd_fpga_xrt_rmm_ops.leaf(x.rmm, i) == rd_sumtree_get(&cpu.tree, i));
  assert_true(rd_fpga_xrt_rmm_ops.total(x.rmm) == rd_sumtree_total(&cpu.tree));
  uint64_t keys[4];
  double probs[4], w[4];
  rd_sample_out_t out = {keys, probs, w, NULL};
  assert_int_equal(rd_table_sample(&x, 4, 0.4, 0, &out, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "no-op shim"));
  rd_table_free(&x);
  rd_table_free(&cpu);
  /* The table's free destroyed the module: the device is free. */
  void *m = create_ok();
  rd_fpga_xrt_rmm_ops.destroy(m);
}

/* ------------------------------------------------------------------ */
/* The learner backend                                                 */
/* ------------------------------------------------------------------ */

#define OBS 4

static void dqn_cfg(rd_learner_config_t *c) {
  rdt_dqn_config(c, OBS, 3, 2, (const uint32_t[]){32, 16});
  c->max_batch = 32;
  c->seed = 5;
  c->target_period = 3;
}

static void ddpg_cfg(rd_learner_config_t *d) {
  rdt_ddpg_config(d, 3, 2, 1, (const uint32_t[]){16}, 1, (const uint32_t[]){24});
  d->max_batch = 16;
  d->seed = 11;
}



/* What init put on the device: descriptor, hyper-parameters, the initial
 * weights of rd_learner_init for the seed, zero moments. */
static void assert_device_init(const rd_fpga_xrt_learner_t *h, const rd_learner_config_t *c) {
  lrn_config_t kc;
  rd_learner_fpga_kernel_config(c, &kc);
  uint32_t desc[LRN_D_WORDS];
  double hp[LRN_HP_COUNT];
  lrn_config_pack(&kc, desc, hp);
  assert_memory_equal(h->map[RD_XRT_L_DESC], desc, sizeof desc);
  assert_memory_equal(h->map[RD_XRT_L_HP], hp, sizeof hp);
  assert_int_equal(h->n_params, lrn_params_floats(&kc));
  assert_int_equal(h->ws_floats, lrn_ws_floats(&kc));
  assert_int_equal(h->batch, c->max_batch);
  assert_int_equal(h->obs_dim, c->obs_dim);
  assert_int_equal(h->action_dim, c->algo == RD_ALGO_DDPG ? c->action_dim : 0);
  float *p = malloc(h->n_params * sizeof(float)), *t = malloc(h->n_params * sizeof(float));
  rd_error_t err;
  assert_int_equal(rd_learner_fpga_initial_weights(c, p, t, h->n_params, &err), RD_OK);
  assert_memory_equal(h->map[RD_XRT_L_PARAMS], p, h->n_params * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_TARGET], t, h->n_params * sizeof(float));
  const float *am = h->map[RD_XRT_L_ADAM_M], *av = h->map[RD_XRT_L_ADAM_V];
  for (size_t i = 0; i < h->n_params; i++)
    if (am[i] != 0.0f || av[i] != 0.0f) fail_msg("moment %zu is not zero", i);
  free(p);
  free(t);
}

/* After a step: the batch buffers hold the batch, the stats the host's
 * "unwritten" sentinel. */
static void assert_batch_on_device(const rd_fpga_xrt_learner_t *h, const rd_batch_t *b) {
  const size_t n = b->n, O = h->obs_dim;
  assert_memory_equal(h->map[RD_XRT_L_OBS], b->obs, n * O * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_NEXT_OBS], b->next_obs, n * O * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_REWARD], b->reward, n * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_DISCOUNT], b->discount, n * sizeof(float));
  if (h->action_dim)
    assert_memory_equal(h->map[RD_XRT_L_ACTION_F], b->action_f,
                        n * h->action_dim * sizeof(float));
  else
    assert_memory_equal(h->map[RD_XRT_L_ACTION_I], b->action_i, n * sizeof(int32_t));
  const float *w = h->map[RD_XRT_L_WEIGHTS];
  for (size_t i = 0; i < n; i++)
    if (w[i] != (b->weights ? b->weights[i] : 1.0f)) fail_msg("weight %zu is %g", i, w[i]);
  const double *st = h->map[RD_XRT_L_STATS];
  assert_true(st[LRN_ST_FAILED] == RD_XRT_LRN_UNWRITTEN);
}

/* b: the fpga-xrt learner backend for c, on both_path's xclbin; its host. */
static const rd_fpga_xrt_learner_t *xrt_learner(rd_learner_backend_t *b,
                                                const rd_learner_config_t *c) {
  rd_error_t err;
  assert_int_equal(rd_learner_fpga_xrt_configure(both_path, &err), RD_OK);
  backend_init_ok(b, &rd_learner_ops_fpga_xrt, c);
  return rd_learner_fpga_xrt_host(b);
}

static void test_learner_dqn_path(void **state) {
  (void)state;
  rd_error_t err;
  rd_learner_config_t c;
  dqn_cfg(&c);
  rd_learner_backend_t b, cpu;
  const rd_fpga_xrt_learner_t *h = xrt_learner(&b, &c);
  backend_init_ok(&cpu, &rd_learner_ops_cpu, &c);
  assert_string_equal(b.ops->name, "fpga-xrt");
  assert_int_equal(b.ops->kind, RD_LEARNER_ON_FPGA);
  assert_non_null(h);
  assert_null(rd_learner_fpga_xrt_host(&cpu));
  assert_int_equal(h->noop, 1);
  assert_int_equal(h->runs, 0);
  assert_device_init(h, &c);
  /* The policy read back from the device is the CPU learner's, byte for
   * byte (the weights came from rd_learner_init for the seed). */
  static uint8_t bx[1 << 16], bc[1 << 16];
  size_t lx = backend_save(&b, bx, sizeof bx), lc = backend_save(&cpu, bc, sizeof bc);
  assert_int_equal(lx, lc);
  assert_memory_equal(bx, bc, lx);

  /* A step: the whole path, then no result (no kernel ran). */
  rows_t r;
  rows(&r, &c, 19, 1);
  float td[64];
  rd_step_stats_t st;
  assert_int_equal(b.ops->step(&b, &r.b, td, &st, &err), RD_EINTERNAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_DEVICE);
  assert_non_null(strstr(err.msg, "no-op shim"));
  assert_int_equal(h->runs, 1);
  assert_batch_on_device(h, &r.b);
  /* Without IS weights the device gets ones. */
  rows(&r, &c, 32, 2);
  r.b.weights = NULL;
  assert_int_equal(b.ops->step(&b, &r.b, NULL, NULL, &err), RD_EINTERNAL);
  assert_int_equal(h->runs, 2);
  assert_batch_on_device(h, &r.b);
  /* The caller's errors: no run, fault 0. */
  rows(&r, &c, 33, 3);
  assert_int_not_equal(b.ops->step(&b, &r.b, td, &st, &err), RD_OK);
  assert_int_equal(b.fault, 0);
  rows(&r, &c, 8, 4);
  r.ai[5] = 3; /* num_actions 3 */
  assert_int_equal(b.ops->step(&b, &r.b, td, &st, &err), RD_EINVAL);
  assert_int_equal(b.fault, 0);
  assert_int_equal(h->runs, 2);

  /* policy_load: another seed's policy on the device, params and target;
   * saving it reads it back. A different network is refused. */
  rd_learner_backend_t other;
  rd_learner_config_t c2 = c;
  c2.seed = 99;
  backend_init_ok(&other, &rd_learner_ops_cpu, &c2);
  static uint8_t bo[1 << 16];
  size_t lo = backend_save(&other, bo, sizeof bo);
  assert_memory_not_equal(bo, bx, lo);
  assert_int_equal(b.ops->policy_load(&b, bo, lo, &err), RD_OK);
  size_t l2 = backend_save(&b, bx, sizeof bx);
  assert_int_equal(l2, lo);
  assert_memory_equal(bx, bo, lo);
  assert_memory_equal(h->map[RD_XRT_L_PARAMS], h->map[RD_XRT_L_TARGET],
                      h->n_params * sizeof(float));
  rd_learner_config_t c3 = c;
  c3.hidden[1] = 8;
  rd_learner_backend_t wrong;
  backend_init_ok(&wrong, &rd_learner_ops_cpu, &c3);
  size_t lw = backend_save(&wrong, bc, sizeof bc);
  assert_int_equal(b.ops->policy_load(&b, bc, lw, &err), RD_EINVAL);
  assert_int_equal(b.fault, 0);
  assert_int_equal(backend_save(&b, bx, sizeof bx), lo);
  assert_memory_equal(bx, bo, lo); /* unchanged */
  /* A buffer too small: refused before the device is asked. */
  size_t wn = 0;
  assert_int_equal(b.ops->policy_save(&b, bx, 16, &wn, &err), RD_ETOOBIG);
  rd_learner_backend_destroy(&wrong);
  rd_learner_backend_destroy(&other);
  rd_learner_backend_destroy(&cpu);
  rd_learner_backend_destroy(&b);
  assert_null(b.impl);
}

/* DDPG: actor and critic on the device; a policy load changes the actor's
 * block only. */
static void test_learner_ddpg_path(void **state) {
  (void)state;
  rd_error_t err;
  rd_learner_config_t d;
  ddpg_cfg(&d);
  rd_learner_backend_t b;
  const rd_fpga_xrt_learner_t *h = xrt_learner(&b, &d);
  assert_device_init(h, &d);
  rows_t r;
  rows(&r, &d, 16, 7);
  assert_int_equal(b.ops->step(&b, &r.b, NULL, NULL, &err), RD_EINTERNAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_DEVICE);
  assert_batch_on_device(h, &r.b);
  lrn_config_t kc;
  rd_learner_fpga_kernel_config(&d, &kc);
  const size_t na = lrn_n_params(&kc.net[0]);
  assert_true(na < h->n_params);
  float *critic = malloc((h->n_params - na) * sizeof(float));
  memcpy(critic, (const float *)h->map[RD_XRT_L_PARAMS] + na, (h->n_params - na) * sizeof(float));
  rd_learner_backend_t other;
  rd_learner_config_t d2 = d;
  d2.seed = 12;
  backend_init_ok(&other, &rd_learner_ops_cpu, &d2);
  static uint8_t bo[1 << 16], bx[1 << 16];
  size_t lo = backend_save(&other, bo, sizeof bo);
  assert_int_equal(b.ops->policy_load(&b, bo, lo, &err), RD_OK);
  assert_int_equal(backend_save(&b, bx, sizeof bx), lo);
  assert_memory_equal(bx, bo, lo);
  assert_memory_equal((const float *)h->map[RD_XRT_L_PARAMS] + na, critic,
                      (h->n_params - na) * sizeof(float));
  free(critic);
  rd_learner_backend_destroy(&other);
  rd_learner_backend_destroy(&b);
}

/* The whole training state through the device's buffers: a CPU learner's
 * state after some steps (Adam moments not zero) loaded on the device and
 * saved back is the same bytes, the blocks laid out as the C-sim
 * learner's; a cut state, or one of another shape, changes nothing on
 * the device; a buffer too small is refused before the device is asked. */
static void state_round_trip(const rd_learner_config_t *c) {
  rd_error_t err;
  rd_learner_backend_t b, cpu, sim;
  const rd_fpga_xrt_learner_t *h = xrt_learner(&b, c);
  backend_init_ok(&cpu, &rd_learner_ops_cpu, c);
  backend_init_ok(&sim, &rd_learner_ops_fpga, c);
  assert_non_null(b.ops->state_save);
  rows_t r;
  for (uint32_t i = 0; i < 3; i++) {
    rows(&r, c, 16, 40 + i);
    assert_int_equal(cpu.ops->step(&cpu, &r.b, NULL, NULL, &err), RD_OK);
  }
  const size_t n = cpu.ops->state_bytes(&cpu);
  assert_int_equal(b.ops->state_bytes(&b), n);
  uint8_t *sc = malloc(n), *sx = malloc(n), *ss = malloc(n);
  size_t w = 0;
  assert_int_equal(cpu.ops->state_save(&cpu, sc, n, &w, &err), RD_OK);
  assert_int_equal(w, n);
  assert_int_equal(b.ops->state_load(&b, sc, n, &err), RD_OK);
  assert_int_equal(b.fault, 0);
  assert_int_equal(b.ops->state_save(&b, sx, n, &w, &err), RD_OK);
  assert_int_equal(w, n);
  assert_memory_equal(sx, sc, n);
  /* The device's blocks are where the C-sim learner keeps them. */
  assert_int_equal(sim.ops->state_load(&sim, sc, n, &err), RD_OK);
  rd_learner_state_arrays_t a;
  rd_learner_fpga_shape_t shape;
  assert_int_equal(rd_learner_fpga_shape(&b, c, &shape, &err), RD_OK);
  float *blk = malloc(4 * h->n_params * sizeof(float));
  const size_t np = h->n_params;
  rd_learner_fpga_state_arrays(&shape, blk, blk + np, blk + 2 * np, blk + 3 * np, 0, &a);
  assert_int_equal(rd_learner_state_load_arrays(c, sc, n, &a, &err), RD_OK);
  assert_int_equal(a.steps, 3);
  assert_memory_equal(h->map[RD_XRT_L_PARAMS], blk, np * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_TARGET], blk + np, np * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_ADAM_M], blk + 2 * np, np * sizeof(float));
  assert_memory_equal(h->map[RD_XRT_L_ADAM_V], blk + 3 * np, np * sizeof(float));
  assert_int_equal(sim.ops->state_save(&sim, ss, n, &w, &err), RD_OK);
  assert_memory_equal(ss, sc, n);
  /* Refused, nothing changed: another seed's state cut short, another
   * shape, a short buffer. */
  rd_learner_config_t c1 = *c;
  c1.seed += 1;
  rd_learner_backend_t seed2;
  backend_init_ok(&seed2, &rd_learner_ops_cpu, &c1);
  assert_int_equal(seed2.ops->state_save(&seed2, ss, n, &w, &err), RD_OK);
  assert_memory_not_equal(ss, sc, n);
  assert_int_equal(b.ops->state_load(&b, ss, n - 1, &err), RD_EINVAL);
  rd_learner_backend_destroy(&seed2);
  assert_int_equal(b.fault, 0);
  rd_learner_config_t c2 = *c;
  c2.hidden[0] += 4;
  rd_learner_backend_t other;
  backend_init_ok(&other, &rd_learner_ops_cpu, &c2);
  size_t n2 = other.ops->state_bytes(&other);
  uint8_t *so = malloc(n2);
  assert_int_equal(other.ops->state_save(&other, so, n2, &w, &err), RD_OK);
  assert_int_equal(b.ops->state_load(&b, so, n2, &err), RD_EINVAL);
  assert_int_equal(b.ops->state_save(&b, sx, 16, &w, &err), RD_ETOOBIG);
  assert_int_equal(b.ops->state_save(&b, sx, n, &w, &err), RD_OK);
  assert_memory_equal(sx, sc, n);
  free(so);
  free(blk);
  free(sc);
  free(sx);
  free(ss);
  rd_learner_backend_destroy(&other);
  rd_learner_backend_destroy(&sim);
  rd_learner_backend_destroy(&cpu);
  rd_learner_backend_destroy(&b);
}

static void test_learner_state(void **state) {
  (void)state;
  rd_learner_config_t c;
  dqn_cfg(&c);
  state_round_trip(&c);
  ddpg_cfg(&c);
  state_round_trip(&c);
}

/* init's failures: the caller's (fault 0), the build's limits
 * (UNSUPPORTED), and the device's (DEVICE) - never an abort. */
static void test_learner_errors(void **state) {
  (void)state;
  rd_error_t err;
  rd_learner_config_t c;
  rd_learner_backend_t b;
  dqn_cfg(&c);
  assert_int_equal(rd_learner_fpga_xrt_configure(NULL, &err), RD_OK);
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga_xrt, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_DEVICE);
  assert_non_null(strstr(err.msg, "no xclbin"));
  assert_int_equal(rd_learner_fpga_xrt_configure(rmm_only, &err), RD_OK);
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga_xrt, &c, 0, &err),
                   RD_ENOTFOUND);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_DEVICE);
  assert_non_null(strstr(err.msg, "no kernel lrn_train_step"));
  assert_null(b.impl);
  assert_int_equal(rd_learner_fpga_xrt_configure(garbage_path, &err), RD_OK);
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga_xrt, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_DEVICE);
  assert_non_null(strstr(err.msg, "refused"));
  assert_int_equal(rd_learner_fpga_xrt_configure(lrn_only, &err), RD_OK);
  char *root = strdup(getenv("XILINX_XRT"));
  unsetenv("XILINX_XRT");
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga_xrt, &c, 0, &err),
                   RD_ENOTFOUND);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_DEVICE);
  assert_non_null(strstr(err.msg, "XILINX_XRT"));
  setenv("XILINX_XRT", root, 1);
  free(root);
  /* Beyond the kernel build: UNSUPPORTED, before any XRT call. */
  c.hidden[1] = 2 * LRN_MAX_WIDTH;
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga_xrt, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, RD_LEARNER_FAULT_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "LRN_MAX_WIDTH"));
  /* Invalid for every learner: the caller's. */
  dqn_cfg(&c);
  c.obs_dim = 0;
  assert_int_equal(rd_learner_backend_init(&b, &rd_learner_ops_fpga_xrt, &c, 0, &err), RD_EINVAL);
  assert_int_equal(b.fault, 0);
  /* The xclbin with only the learner kernel works. */
  dqn_cfg(&c);
  backend_init_ok(&b, &rd_learner_ops_fpga_xrt, &c);
  rd_learner_backend_destroy(&b);
}

/* The host path's own checks (host_xrt.h), below the backend. */
static void test_learner_host_errors(void **state) {
  (void)state;
  rd_error_t err;
  rd_learner_config_t c;
  dqn_cfg(&c);
  lrn_config_t kc;
  rd_learner_fpga_kernel_config(&c, &kc);
  rd_fpga_xrt_learner_t x;
  lrn_config_t bad = kc;
  bad.batch = LRN_MAX_BATCH + 1;
  assert_int_equal(rd_fpga_xrt_learner_open(&x, 0, both_path, &bad, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "LRN_MAX_BATCH"));
  assert_null(x.device);
  if (rd_fpga_xrt_learner_open(&x, 0, both_path, &kc, &err) != RD_OK) fail_msg("%s", err.msg);
  float f[4] = {1, 2, 3, 4}, g[4] = {0};
  assert_int_equal(rd_fpga_xrt_learner_write(&x, RD_XRT_L_OBS, f, 0, 4, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_xrt_learner_write(&x, RD_XRT_L_ADAM_V, f, x.n_params - 3, 4, &err),
                   RD_EINVAL);
  assert_int_equal(rd_fpga_xrt_learner_write(&x, RD_XRT_L_ADAM_V, f, x.n_params - 4, 4, &err),
                   RD_OK);
  assert_memory_equal((const float *)x.map[RD_XRT_L_ADAM_V] + x.n_params - 4, f, sizeof f);
  assert_int_equal(rd_fpga_xrt_learner_read(&x, RD_XRT_L_ADAM_V, g, x.n_params - 4, 4, &err),
                   RD_OK);
  assert_memory_equal(g, f, sizeof f);
  rows_t r;
  rows(&r, &c, 32, 1);
  double st[LRN_ST_COUNT];
  assert_int_equal(rd_fpga_xrt_learner_step(&x, 0, 0, r.obs, r.ai, NULL, r.rew, r.disc, r.next,
                                            NULL, NULL, st, &err),
                   RD_EINVAL);
  assert_int_equal(rd_fpga_xrt_learner_step(&x, 0, 33, r.obs, r.ai, NULL, r.rew, r.disc, r.next,
                                            NULL, NULL, st, &err),
                   RD_ETOOBIG);
  assert_int_equal(rd_fpga_xrt_learner_step(&x, 0, 4, r.obs, NULL, NULL, r.rew, r.disc, r.next,
                                            NULL, NULL, st, &err),
                   RD_EINVAL); /* DQN without actions */
  assert_int_equal(x.runs, 0);
  assert_int_equal(rd_fpga_xrt_learner_step(&x, 123456789012ull, 32, r.obs, r.ai, NULL, r.rew,
                                            r.disc, r.next, r.w, NULL, st, &err),
                   RD_EINTERNAL);
  assert_int_equal(x.runs, 1);
  assert_true(st[LRN_ST_FAILED] == RD_XRT_LRN_UNWRITTEN);
  rd_fpga_xrt_learner_close(&x);
  assert_null(x.run);
  rd_fpga_xrt_learner_close(&x); /* twice is harmless */
  assert_int_equal(rd_fpga_xrt_learner_write(&x, RD_XRT_L_PARAMS, f, 0, 1, &err), RD_EINVAL);
}

RDT_MAIN(group_setup, group_teardown,
         cmocka_unit_test(test_rmm_ops_path),   cmocka_unit_test(test_rmm_bad_calls),
         cmocka_unit_test(test_rmm_device_failure),
         cmocka_unit_test(test_rmm_status),     cmocka_unit_test(test_rmm_errors),
         cmocka_unit_test(test_rmm_table),      cmocka_unit_test(test_learner_dqn_path),
         cmocka_unit_test(test_learner_ddpg_path), cmocka_unit_test(test_learner_state),
         cmocka_unit_test(test_learner_errors),
         cmocka_unit_test(test_learner_host_errors))
