/* test_devices.c - device discovery: this machine's CPU, a CPU read from a
 * fake /proc and /sys tree, fingerprints, and the GPU/FPGA probes of a
 * build without them. */
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
#include "provider.h"
#include "provider_cpu.h"
#include "provider_fpga.h"
#include "provider_gpu.h"
#include "rdt_unit.h"
#include "rdt_main.h"

static void assert_fingerprint_form(const char *fp, const char *kind) {
  size_t k = strlen(kind);
  assert_int_equal(strncmp(fp, kind, k), 0);
  assert_int_equal(fp[k], '-');
  assert_int_equal(strlen(fp), k + 17);
  for (size_t i = k + 1; i < k + 17; i++) assert_non_null(strchr("0123456789abcdef", fp[i]));
}

/* ------------------------------------------------------------------ */
/* This machine                                                        */
/* ------------------------------------------------------------------ */

static void test_this_cpu(void **state) {
  (void)state;
  rd_device_t d[RD_MAX_DEVICES];
  size_t n = rd_devices_get(d, RD_MAX_DEVICES);
  assert_true(n >= 1);
  assert_string_equal(d[0].kind, "cpu");
  assert_string_equal(d[0].status, "ok");
  assert_true(strlen(d[0].model) > 0);
  assert_true(d[0].cores >= 1);
  assert_int_equal(d[0].cores, (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
  assert_true(d[0].memory_bytes > (64ull << 20));
  assert_true(strcmp(d[0].isa, "avx512") == 0 || strcmp(d[0].isa, "avx2") == 0 ||
              strcmp(d[0].isa, "baseline") == 0);
  assert_string_equal(d[0].capabilities, "sumtree,table,learner");
  assert_fingerprint_form(d[0].fingerprint, "cpu");
  assert_non_null(strstr(d[0].name, d[0].model));
  /* Every other device is a GPU or an FPGA with its own fingerprint. */
  for (size_t i = 1; i < n; i++) {
    assert_true(strcmp(d[i].kind, "gpu") == 0 || strcmp(d[i].kind, "fpga") == 0);
    assert_fingerprint_form(d[i].fingerprint, d[i].kind);
  }
}

static void test_fingerprint_stable(void **state) {
  (void)state;
  rd_device_t a[RD_MAX_DEVICES], b[RD_MAX_DEVICES], cpu, probed;
  size_t na = rd_devices_get(a, RD_MAX_DEVICES);
  size_t nb = rd_devices_get(b, RD_MAX_DEVICES);
  assert_int_equal(na, nb);
  for (size_t i = 0; i < na; i++) assert_string_equal(a[i].fingerprint, b[i].fingerprint);
  rd_devices_cpu(&cpu);
  assert_string_equal(cpu.fingerprint, a[0].fingerprint);
  /* A second discovery (as after a restart) finds the same fingerprint. */
  rd_cpu_provider_probe(NULL, &probed);
  assert_string_equal(probed.fingerprint, cpu.fingerprint);
  /* A short buffer gets a prefix of the list. */
  assert_int_equal(rd_devices_get(b, 1), 1);
  assert_string_equal(b[0].fingerprint, cpu.fingerprint);
}

static void test_absent_kinds(void **state) {
  (void)state;
  rd_device_t d[RD_MAX_DEVICES];
  char why[160] = "";
  size_t n = rd_fpga_provider_discover(d, RD_MAX_DEVICES, why, sizeof why);
  /* Built without XRT, or with it and XILINX_XRT unset (as in this
   * suite): no board is looked for (test_fpga_devices covers XRT). */
  if (getenv("XILINX_XRT") == NULL) {
    assert_int_equal(n, 0);
    assert_true(strcmp(why, "built without XRT: no FPGA discovery") == 0 ||
                strstr(why, "XILINX_XRT is not set") != NULL);
  }
  why[0] = '\0';
  n = rd_gpu_provider_discover(d, RD_MAX_DEVICES, why, sizeof why);
  if (n == 0) {
    /* Built without CUDA, or with it but no driver or device here. */
    assert_true(strlen(why) > 0);
    assert_true(strstr(why, "CUDA") != NULL || strstr(why, "cuda") != NULL);
  } else {
    for (size_t i = 0; i < n; i++) {
      assert_string_equal(d[i].kind, "gpu");
      assert_true(d[i].cores > 0 && d[i].memory_bytes > 0);
      assert_int_equal(strncmp(d[i].isa, "sm_", 3), 0);
      assert_fingerprint_form(d[i].fingerprint, "gpu");
    }
  }
}

/* ------------------------------------------------------------------ */
/* A CPU read from a fake tree                                         */
/* ------------------------------------------------------------------ */

static void write_file(const char *dir, const char *rel, const char *content) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  /* mkdir -p of the file's directory. */
  for (char *sl = strchr(path + 1, '/'); sl != NULL; sl = strchr(sl + 1, '/')) {
    *sl = '\0';
    mkdir(path, 0700); /* EEXIST is fine; fopen below fails on anything else */
    *sl = '/';
  }
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

typedef struct {
  const char *model, *mhz, *online, *l2, *flags;
  unsigned long long mem_kb;
} fake_t;

static const fake_t base = {"Example CPU 9000", "2400.000", "0-3,6", "1024K",
                            "fpu avx2 fma bmi2 avx512f avx512vl avx512bw avx512dq sse2",
                            16ull << 20};

/* Write a fake machine under rdt_root/<name> and probe it. */
static void fake_probe(const char *name, const fake_t *f, rd_device_t *d) {
  char dir[256], text[1024];
  snprintf(dir, sizeof dir, "%s/%s", rdt_root, name);
  /* Two processors, as /proc/cpuinfo lists them; "model" (a number) must
   * not be taken for "model name". */
  snprintf(text, sizeof text,
           "processor\t: 0\nmodel\t\t: 17\nmodel name\t: %s\ncpu MHz\t\t: %s\nflags\t\t: %s\n\n"
           "processor\t: 1\nmodel\t\t: 17\nmodel name\t: %s\ncpu MHz\t\t: %s\nflags\t\t: %s\n",
           f->model, f->mhz, f->flags, f->model, f->mhz, f->flags);
  write_file(dir, "proc/cpuinfo", text);
  snprintf(text, sizeof text, "MemTotal:       %llu kB\nMemFree:        1234 kB\n", f->mem_kb);
  write_file(dir, "proc/meminfo", text);
  snprintf(text, sizeof text, "%s\n", f->online);
  write_file(dir, "sys/devices/system/cpu/online", text);
  const char *cache = "sys/devices/system/cpu/cpu0/cache";
  char rel[128];
  static const char *const idx[][3] = {
      {"1", "Data", "48K"}, {"1", "Instruction", "32K"}, {"2", "Unified", NULL},
      {"3", "Unified", "32M"}};
  for (int i = 0; i < 4; i++) {
    snprintf(rel, sizeof rel, "%s/index%d/level", cache, i);
    write_file(dir, rel, idx[i][0]);
    snprintf(rel, sizeof rel, "%s/index%d/type", cache, i);
    write_file(dir, rel, idx[i][1]);
    snprintf(rel, sizeof rel, "%s/index%d/size", cache, i);
    write_file(dir, rel, idx[i][2] ? idx[i][2] : f->l2);
  }
  rd_cpu_provider_probe(dir, d);
}

static void test_fake_cpu_fields(void **state) {
  (void)state;
  rd_device_t d;
  fake_probe("base", &base, &d);
  assert_string_equal(d.kind, "cpu");
  assert_string_equal(d.model, "Example CPU 9000");
  assert_int_equal(d.cores, 5); /* 0-3 and 6 */
  assert_int_equal(d.memory_bytes, 16ull << 30);
  assert_int_equal(d.l1d_bytes, 48u << 10); /* the data cache, not the instruction cache */
  assert_int_equal(d.l2_bytes, 1u << 20);
  assert_int_equal(d.l3_bytes, 32u << 20);
  assert_string_equal(d.isa, "avx512");
  assert_string_equal(d.capabilities, "sumtree,table,learner");
  assert_fingerprint_form(d.fingerprint, "cpu");

  fake_t f = base;
  f.flags = "fpu avx2 fma bmi2 sse2";
  fake_probe("avx2", &f, &d);
  assert_string_equal(d.isa, "avx2");
  f.flags = "fpu avx2 sse2"; /* no FMA: the kernels' AVX2 variants need it */
  fake_probe("noavx2", &f, &d);
  assert_string_equal(d.isa, "baseline");
}

static void test_fake_cpu_missing_files(void **state) {
  (void)state;
  char dir[256];
  snprintf(dir, sizeof dir, "%s/empty", rdt_root);
  assert_int_equal(mkdir(dir, 0700), 0);
  rd_device_t d;
  rd_cpu_provider_probe(dir, &d);
  assert_string_equal(d.kind, "cpu");
  assert_string_equal(d.model, "unknown CPU");
  assert_int_equal(d.cores, 0);
  assert_int_equal(d.memory_bytes, 0);
  assert_int_equal(d.l1d_bytes + d.l2_bytes + d.l3_bytes, 0);
  assert_string_equal(d.isa, "baseline");
  assert_fingerprint_form(d.fingerprint, "cpu");
}

static void test_fingerprint_inputs(void **state) {
  (void)state;
  rd_device_t a, b;
  fake_probe("fp_a", &base, &a);

  /* Not part of the performance: clock readings, memory within a GiB. */
  fake_t f = base;
  f.mhz = "3711.582";
  f.mem_kb = (16ull << 20) - 40000; /* 39 MiB less: reserved by another kernel */
  fake_probe("fp_same", &f, &b);
  assert_string_equal(a.fingerprint, b.fingerprint);

  /* Part of it: model, cores, caches, memory, ISA. */
  const char *name[] = {"fp_model", "fp_cores", "fp_l2", "fp_mem", "fp_isa"};
  for (int i = 0; i < 5; i++) {
    f = base;
    if (i == 0) f.model = "Example CPU 9001";
    if (i == 1) f.online = "0-3";
    if (i == 2) f.l2 = "2048K";
    if (i == 3) f.mem_kb = 32ull << 20;
    if (i == 4) f.flags = "fpu avx2 fma bmi2 sse2";
    fake_probe(name[i], &f, &b);
    if (strcmp(a.fingerprint, b.fingerprint) == 0)
      fail_msg("%s: fingerprint did not change", name[i]);
  }
}

static void test_fingerprint_gpu(void **state) {
  (void)state;
  rd_device_t a, b;
  memset(&a, 0, sizeof a);
  snprintf(a.kind, sizeof a.kind, "gpu");
  snprintf(a.model, sizeof a.model, "NVIDIA H100 80GB HBM3");
  a.cores = 132;
  a.memory_bytes = 85045379072ull;
  snprintf(a.isa, sizeof a.isa, "sm_90");
  b = a;
  b.index = 3; /* a second identical board shares the fingerprint */
  snprintf(b.status, sizeof b.status, "ok (driver 13.0)");
  rd_device_fingerprint(&a);
  rd_device_fingerprint(&b);
  assert_fingerprint_form(a.fingerprint, "gpu");
  assert_string_equal(a.fingerprint, b.fingerprint);
  b.cores = 114;
  rd_device_fingerprint(&b);
  assert_string_not_equal(a.fingerprint, b.fingerprint);
  b = a;
  snprintf(b.isa, sizeof b.isa, "sm_80");
  rd_device_fingerprint(&b);
  assert_string_not_equal(a.fingerprint, b.fingerprint);
}

/* The fingerprints' values: stored profiles are keyed by them, so a
 * daemon must compute the same ones as the build that stored them (the
 * FNV-1a of each kind's key, devices.h). */
static void test_fingerprint_values(void **state) {
  (void)state;
  static const struct {
    const char *kind, *model, *isa;
    uint32_t cores;
    uint64_t l1d, l2, memory;
    const char *fingerprint;
  } cases[] = {
      /* memory: 8 GiB to the nearest GiB */
      {"cpu", "Test CPU", "avx2", 4, 32768, 1048576, (8ull << 30) - (3ull << 20),
       "cpu-7894baa5eec28db3"},
      {"gpu", "NVIDIA H100", "sm_90", 132, 0, 0, 81559ull << 20, "gpu-0524c0b8a8aa624b"},
      {"fpga", "u250", "csim", 4, 0, 0, 0, "fpga-76e8a3aef4bbf853"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rd_device_t d;
    memset(&d, 0, sizeof d);
    snprintf(d.kind, sizeof d.kind, "%s", cases[i].kind);
    snprintf(d.model, sizeof d.model, "%s", cases[i].model);
    snprintf(d.isa, sizeof d.isa, "%s", cases[i].isa);
    d.cores = cases[i].cores;
    d.l1d_bytes = cases[i].l1d;
    d.l2_bytes = cases[i].l2;
    d.memory_bytes = cases[i].memory;
    rd_device_fingerprint(&d);
    assert_string_equal(d.fingerprint, cases[i].fingerprint);
  }
}

/* One provider per row of the mapper's table, in table order, found by
 * its device kind; the device list is theirs, the CPU's first. */
static void test_providers(void **state) {
  (void)state;
  const rd_device_provider_t *const *p = rd_providers();
  const char *kinds[RD_DEV_COUNT] = {"cpu", "gpu", "fpga"};
  for (int r = 0; r < RD_DEV_COUNT; r++) {
    assert_int_equal(p[r]->row, r);
    assert_string_equal(p[r]->kind, kinds[r]);
    assert_ptr_equal(rd_provider_for(kinds[r]), p[r]);
    assert_non_null(p[r]->discover);
    assert_non_null(p[r]->figures);
    assert_non_null(p[r]->can_run);
  }
  assert_null(rd_provider_for("tpu"));
  assert_null(rd_provider_for(NULL));
  /* The CPU and the GPU are measured through the profile cache; the FPGA
   * is a model. */
  assert_non_null(p[RD_DEV_CPU]->profiler);
  assert_non_null(p[RD_DEV_GPU]->profiler);
  assert_null(p[RD_DEV_FPGA]->profiler);
  rd_device_t d[RD_MAX_DEVICES];
  size_t n = rd_devices_get(d, RD_MAX_DEVICES);
  assert_true(n >= 1);
  assert_string_equal(d[0].kind, "cpu");
  for (size_t i = 1; i < n; i++) assert_non_null(rd_provider_for(d[i].kind));
  /* The CPU runs every part, with its own learner and the table's tree. */
  rd_dse_runner_t run;
  char why[RD_ERROR_MSG_MAX];
  for (int part = 0; part < RD_PART_COUNT; part++) {
    memset(&run, 0xff, sizeof run);
    assert_int_equal(p[RD_DEV_CPU]->can_run(&d[0], (rd_part_t)part, NULL, NULL, &run, why,
                                            sizeof why), 1);
    assert_int_equal(run.learner_kind, RD_LEARNER_ON_CPU);
    assert_null(run.learner_ops);
    assert_null(run.rmm_ops);
  }
}

RDT_MAIN(rdt_root_setup, rdt_root_teardown,
         cmocka_unit_test(test_fingerprint_values),
         cmocka_unit_test(test_providers),
         cmocka_unit_test(test_this_cpu),
         cmocka_unit_test(test_fingerprint_stable),
         cmocka_unit_test(test_absent_kinds),
         cmocka_unit_test(test_fake_cpu_fields),
         cmocka_unit_test(test_fake_cpu_missing_files),
         cmocka_unit_test(test_fingerprint_inputs),
         cmocka_unit_test(test_fingerprint_gpu))
