/* cpu_isa.h - which kernel variant a CPU backend runs (the sum tree's, the
 * GEMM's, vpow's and philox_fill's): the best instruction set this CPU
 * has, unless an environment variable names one. A variant the CPU cannot run is ignored rather than
 * trapping. Every such kernel table lists its variants in the order of
 * RD_CPU_ISA_NAMES: generic, avx2, avx512 (the last two on x86-64 only).
 * Header-only. */
#ifndef RD_CPU_ISA_H
#define RD_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RD_CPU_ISA_NAMES {"generic", "avx2", "avx512"}

/* The variants this CPU runs: ok[0] always; ok[1] AVX2, with FMA when
 * need_fma and BMI2 when need_bmi2; ok[2] that and AVX-512 F, VL, BW, DQ. */
static inline void rd_cpu_isa_ok(bool ok[3], bool need_fma, bool need_bmi2) {
  ok[0] = true;
  ok[1] = ok[2] = false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  ok[1] = __builtin_cpu_supports("avx2") && (!need_fma || __builtin_cpu_supports("fma")) &&
          (!need_bmi2 || __builtin_cpu_supports("bmi2"));
  ok[2] = ok[1] && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#else
  (void)need_fma;
  (void)need_bmi2;
#endif
}

/* The name of variant i (< 3). */
static inline const char *rd_cpu_isa_name(size_t i) {
  static const char *const names[] = RD_CPU_ISA_NAMES;
  return names[i];
}

/* The index of the variant to run among the first n (need_fma, need_bmi2
 * as rd_cpu_isa_ok): the one the environment variable env names when this
 * CPU runs it, else the best it runs. */
static inline size_t rd_cpu_isa_pick(size_t n, bool need_fma, bool need_bmi2, const char *env) {
  bool ok[3];
  rd_cpu_isa_ok(ok, need_fma, need_bmi2);
  const char *force = getenv(env);
  if (force != NULL)
    for (size_t i = 0; i < n; i++)
      if (strcmp(force, rd_cpu_isa_name(i)) == 0 && ok[i]) return i;
  for (size_t i = n; i-- > 0;)
    if (ok[i]) return i;
  return 0;
}

/* The index of the variant named isa among the first n when this CPU runs
 * it (need_fma, need_bmi2 as rd_cpu_isa_ok), else -1: the tests' and
 * benches' "run this variant" calls. */
static inline int rd_cpu_isa_find(size_t n, const char *isa, bool need_fma, bool need_bmi2) {
  bool ok[3];
  rd_cpu_isa_ok(ok, need_fma, need_bmi2);
  for (size_t i = 0; i < n && i < 3; i++)
    if (strcmp(isa, rd_cpu_isa_name(i)) == 0 && ok[i]) return (int)i;
  return -1;
}

#endif
