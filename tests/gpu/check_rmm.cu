/* check_rmm.cu - the GPU replay module and storage (rmm_gpu.h) on a
 * GPU: tables on them against CPU tables, call for call, bit for bit
 * (tests/gpu/rmm_check.h), with the sum tree, the rows or both on the
 * device; device failures (injected around the real CUDA calls, once and
 * sticky) recovered on the CPU with the rows copied back; the device
 * memory each reports against its planning estimate and against what
 * CUDA says was taken; one stream per table.
 *
 * A self-checking program (the GPU machine has no cmocka): one "ok" or
 * "FAIL" line per check, "PASSED" or "FAILED" last; exit 0, 1 if a check
 * failed, 77 if there is no usable GPU (nothing was checked). A meson test
 * (gpu_check_rmm); bench/gpu.sh runs it.
 *
 *   check_gpu_rmm [--quick]      (--quick: no 2^20-item tables)
 */
extern "C" {
#include "rmm_check.h"
}
#include "rd_tree_step.h"
#include "rd_clock.h"
#include "rdt_check.h"
#include "rdt_schema.h"

#include "check_device.h"

#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const rmm_case_t cases[] = {
    /* name, capacity, fanout, max_batch, batch, rounds, wide, seed */
    {"k16_c1000", 1000, 16, 4096, 96, 24, 0, 1},
    {"k2_c37", 37, 2, 512, 11, 30, 0, 2},
    {"k64_c5000", 5000, 64, 8192, 700, 12, 0, 3},
    {"k4_c300_chunks", 300, 4, 4096, 400, 12, 0, 4},
    {"k8_c200_wide", 200, 8, 256, 90, 8, 1, 5},
    {"k32_c3000_bigupd", 3000, 32, 16384, 1500, 6, 0, 6},
    {"k16_c70001", 70001, 16, 65536, 8192, 6, 0, 7},
};
static const rmm_case_t big = {"k16_c1048576", 1u << 20, 16, 65536, 32768, 4, 0, 8};

static void same(const rmm_case_t *c) {
  const struct {
    const char *what;
    const rd_rmm_ops_t *rmm;
    const rd_storage_ops_t *st;
  } place[] = {{"tree", rd_gpu_rmm_ops(0), NULL},
               {"rows", NULL, rd_gpu_storage_ops(0)},
               {"tree+rows", rd_gpu_rmm_ops(0), rd_gpu_storage_ops(0)}};
  for (size_t p = 0; p < 3; p++) {
    char msg[512];
    double t0 = rd_clock_now();
    int rc = rmm_check_same(c, place[p].rmm, place[p].st, msg, sizeof msg);
    rdt_check(rc == 0, "same as the CPU: %s, %s on gpu0 (%.2f s)%s%s", c->name, place[p].what,
           rd_clock_now() - t0, rc ? ": " : "", rc ? msg : "");
  }
}

static void faults(void) {
  rmm_check_fault_base(&rd_gpu_dev_cuda);
  const rd_rmm_ops_t *rmm;
  const rd_storage_ops_t *st;
  rmm_check_ops(&rmm_check_fault_dev, 0, &rmm, &st);
  const struct {
    int tree, rows;
    unsigned mask;
    uint64_t at;
    int sticky;
  } sc[] = {{1, 0, RMM_FAIL_TREE, 3, 0},  {1, 0, RMM_FAIL_TREE, 6, 1},
            {0, 1, RMM_FAIL_WRITE, 2, 0}, {0, 1, RMM_FAIL_READ, 3, 0},
            {1, 1, RMM_FAIL_WRITE, 1, 0}, {1, 1, RMM_FAIL_TREE | RMM_FAIL_READ, 5, 0},
            {1, 1, RMM_FAIL_READ, 1, 1}};
  const rmm_case_t *cs[] = {&cases[0], &cases[4]};
  for (size_t ci = 0; ci < 2; ci++)
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
      char msg[512];
      const char *op = "?";
      uint64_t lost = 0;
      int rc = rmm_check_fault(cs[ci], sc[i].tree ? rmm : NULL, sc[i].rows ? st : NULL,
                               sc[i].mask, sc[i].at, sc[i].sticky, &op, &lost, msg, sizeof msg);
      rdt_check(rc == 0, "fault: %s, tree %s rows %s, device call %llu of kind %u fails%s: the %s "
             "failed, %llu items dropped, the rest moved to the CPU%s%s", cs[ci]->name,
             sc[i].tree ? "gpu" : "cpu", sc[i].rows ? "gpu" : "host",
             (unsigned long long)sc[i].at, sc[i].mask, sc[i].sticky ? " (and every later one)" : "",
             op, (unsigned long long)lost, rc ? ": " : "", rc ? msg : "");
    }
}

/* Device memory: what a module says it holds, against the planning
 * estimate (an upper bound) and against what CUDA's free memory lost. */
static void memory(uint32_t capacity, uint32_t fanout, size_t row_bytes) {
  rd_error_t err;
  size_t free0, free1, free2, total;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free0, &total);
  void *m = NULL, *s = NULL;
  int rc = rd_gpu_rmm_ops(0)->create(&m, capacity, fanout, rd_st_max_leaf(capacity), &err);
  cudaMemGetInfo(&free1, &total);
  const size_t fb[1] = {row_bytes};
  int rc2 = rc ? rc
               : rd_gpu_storage_ops(0)->create(&s, capacity, 1, fb, rd_gpu_rmm_ops(0), m, &err);
  cudaMemGetInfo(&free2, &total);
  if (rc || rc2) {
    rdt_check(false, "memory: create %u/%u: %s", capacity, fanout, err.msg);
    if (m) rd_gpu_rmm_ops(0)->destroy(m);
    return;
  }
  rd_gpu_module_info_t mi, si;
  rd_gpu_rmm_info(m, &mi);
  rd_gpu_storage_info(s, &si);
  const size_t est_t = rd_gpu_rmm_device_bytes(capacity, fanout);
  const size_t est_s = rd_gpu_storage_device_bytes(capacity, row_bytes);
  const double mib = 1.0 / (1 << 20);
  /* cudaMalloc rounds up to 2 MiB pages and the context may grow: allow
   * 8 MiB of slack per object either way. */
  const double slack = 8.0;
  const double took_t = (double)(free0 - free1) * mib, took_s = (double)(free1 - free2) * mib;
  rdt_check(mi.device_bytes <= est_t && took_t + slack >= mi.device_bytes * mib &&
             took_t <= est_t * mib + slack,
         "memory: tree of %u leaves, K=%u: reports %.1f MiB, estimate %.1f MiB, CUDA's free "
         "memory fell %.1f MiB", capacity, fanout, mi.device_bytes * mib, est_t * mib, took_t);
  rdt_check(si.device_bytes <= est_s && took_s + slack >= si.device_bytes * mib &&
             took_s <= est_s * mib + slack,
         "memory: %u rows of %zu bytes: reports %.1f MiB, estimate %.1f MiB, CUDA's free "
         "memory fell %.1f MiB", capacity, row_bytes, si.device_bytes * mib, est_s * mib, took_s);
  rdt_check(si.shares_stream, "one stream per table: the rows run on the tree's stream");
  rd_gpu_storage_ops(0)->destroy(s);
  rd_gpu_rmm_ops(0)->destroy(m);
}

/* No work of a table may go to the legacy default stream: a kernel held on
 * the legacy stream must not delay the table's calls. */
__global__ void k_spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

static void own_stream(void) {
  rd_table_config_t c;
  rdt_scalar_table_config(&c, "x", RD_DTYPE_FLOAT32, 4096);
  c.rmm = rd_gpu_rmm_ops(0);
  c.storage = rd_gpu_storage_ops(0);
  rd_table_t t;
  rd_error_t err;
  if (rd_table_init(&t, &c, &err)) {
    rdt_check(false, "own stream: %s", err.msg);
    return;
  }
  float x[64] = {0};
  rd_cbuf_t col = {x, sizeof x};
  /* A first insert loads the kernels (lazy module loading may wait for
   * the device), so that the timed one measures only the streams. */
  if (rd_table_insert(&t, 64, &col, NULL, NULL, &err)) {
    rdt_check(false, "own stream: first insert: %s", err.msg);
    rd_table_free(&t);
    return;
  }
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) != cudaSuccess || khz <= 0)
    khz = 2000000;
  /* ~0.5 s of spinning on the legacy stream (the clock rate is in kHz). */
  long long cycles = (long long)khz * 500;
  k_spin<<<1, 1>>>(cycles);
  double t0 = rd_clock_now();
  int rc = rd_table_insert(&t, 64, &col, NULL, NULL, &err);
  double dt = rd_clock_now() - t0;
  cudaDeviceSynchronize();
  rdt_check(rc == RD_OK && dt < 0.25,
         "own stream: an insert took %.3f s while the legacy stream was busy for ~0.5 s", dt);
  rd_table_free(&t);
}

int main(int argc, char **argv) {
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else {
      fprintf(stderr, "usage: check_gpu_rmm [--quick]\n");
      return 2;
    }
  }
  int skip = check_device_or_skip();
  if (skip) return skip;
  double t0 = rd_clock_now();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) same(&cases[i]);
  if (!quick) same(&big);
  faults();
  memory(1u << 20, 16, 41);
  if (!quick) memory(1u << 24, 32, 16);
  own_stream();
  printf("# %.1f s\n%s\n", rd_clock_now() - t0, rdt_check_failed() ? "FAILED" : "PASSED");
  return rdt_check_failed() ? 1 : 0;
}
