/* provider_cpu.c - the CPU's device provider (provider_cpu.h): discovery
 * from /proc and /sys, its fingerprint, its row of the primitive-platform
 * table through the profile cache, and the parts it runs. */
#include "provider_cpu.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile_cache.h"
#include "provider.h"

static FILE *open_under(const char *root, const char *path) {
  char p[512];
  snprintf(p, sizeof p, "%s%s", root, path);
  return fopen(p, "r");
}

/* The value of the first "key<spaces>: value" line of a /proc file
 * (the key must match up to its whitespace: "model" is not "model name"). */
static int proc_field(const char *root, const char *path, const char *key, char *out,
                      size_t len) {
  FILE *f = open_under(root, path);
  if (f == NULL) return -1;
  char line[4096]; /* a "flags" line is about 1.5 KB today */
  int found = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, kl) != 0 || (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':'))
      continue;
    char *colon = strchr(line, ':');
    if (colon == NULL) continue;
    colon++;
    while (*colon == ' ' || *colon == '\t') colon++;
    colon[strcspn(colon, "\n")] = '\0';
    snprintf(out, len, "%s", colon);
    found = 0;
    break;
  }
  fclose(f);
  return found;
}

/* First line of a small file, without its newline. */
static int read_line(const char *root, const char *path, char *out, size_t len) {
  FILE *f = open_under(root, path);
  if (f == NULL) return -1;
  int rc = fgets(out, (int)len, f) ? 0 : -1;
  fclose(f);
  if (rc == 0) out[strcspn(out, "\n")] = '\0';
  return rc;
}

/* "0-3,8,10-11" -> 7. 0 if malformed. */
static uint32_t count_cpu_list(const char *s) {
  uint32_t n = 0;
  while (*s) {
    char *end;
    unsigned long a = strtoul(s, &end, 10), b = a;
    if (end == s) return 0;
    s = end;
    if (*s == '-') {
      b = strtoul(s + 1, &end, 10);
      if (end == s + 1 || b < a) return 0;
      s = end;
    }
    n += (uint32_t)(b - a + 1);
    if (*s == ',') s++;
    else if (*s != '\0') return 0;
  }
  return n;
}

/* "48K", "1024K", "32M", "1G" or plain bytes -> bytes. 0 if malformed. */
static uint64_t parse_size(const char *s) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  switch (*end) {
    case 'K': return (uint64_t)v << 10;
    case 'M': return (uint64_t)v << 20;
    case 'G': return (uint64_t)v << 30;
    case '\0': return v;
    default: return 0;
  }
}

/* The caches of cpu0 from sysfs: L1 data (or unified), L2, L3. */
static void read_caches(const char *root, rd_device_t *d) {
  for (int i = 0; i < 16; i++) {
    char dir[128], path[192], level[16], type[32], size[32];
    snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu0/cache/index%d", i);
    snprintf(path, sizeof path, "%s/level", dir);
    if (read_line(root, path, level, sizeof level) != 0) continue; /* indices may skip */
    snprintf(path, sizeof path, "%s/type", dir);
    if (read_line(root, path, type, sizeof type) != 0) continue;
    snprintf(path, sizeof path, "%s/size", dir);
    if (read_line(root, path, size, sizeof size) != 0) continue;
    if (strcmp(type, "Instruction") == 0) continue;
    uint64_t bytes = parse_size(size);
    if (strcmp(level, "1") == 0) d->l1d_bytes = bytes;
    else if (strcmp(level, "2") == 0) d->l2_bytes = bytes;
    else if (strcmp(level, "3") == 0) d->l3_bytes = bytes;
  }
}

/* Whether the space-separated flag list holds word. */
static bool has_flag(const char *flags, const char *word) {
  size_t wl = strlen(word);
  for (const char *p = flags; (p = strstr(p, word)) != NULL; p += wl) {
    bool start = p == flags || p[-1] == ' ';
    bool end = p[wl] == ' ' || p[wl] == '\0';
    if (start && end) return true;
  }
  return false;
}

/* The widest ISA level the CPU kernels pick (sumtree.c, nn.c use the same
 * feature sets through __builtin_cpu_supports). */
static const char *isa_from_flags(const char *flags) {
  bool avx2 = has_flag(flags, "avx2") && has_flag(flags, "fma") && has_flag(flags, "bmi2");
  bool avx512 = avx2 && has_flag(flags, "avx512f") && has_flag(flags, "avx512vl") &&
                has_flag(flags, "avx512bw") && has_flag(flags, "avx512dq");
  return avx512 ? "avx512" : avx2 ? "avx2" : "baseline";
}

static const char *isa_from_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi2");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return avx512 ? "avx512" : avx2 ? "avx2" : "baseline";
#else
  return "baseline";
#endif
}

static uint64_t sysconf_bytes(int name) {
  long v = sysconf(name);
  return v > 0 ? (uint64_t)v : 0;
}

void rd_cpu_provider_probe(const char *root, rd_device_t *d) {
  bool here = root == NULL || root[0] == '\0';
  if (here) root = "";
  memset(d, 0, sizeof *d);
  snprintf(d->kind, sizeof d->kind, "cpu");

  /* x86 says "model name"; many ARM kernels only "Hardware" or nothing. */
  if (proc_field(root, "/proc/cpuinfo", "model name", d->model, sizeof d->model) != 0 &&
      proc_field(root, "/proc/cpuinfo", "Hardware", d->model, sizeof d->model) != 0)
    snprintf(d->model, sizeof d->model, "unknown CPU");

  char buf[4096];
  if (read_line(root, "/sys/devices/system/cpu/online", buf, sizeof buf) == 0)
    d->cores = count_cpu_list(buf);
  if (d->cores == 0 && here) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    d->cores = n > 0 ? (uint32_t)n : 0;
  }

  unsigned long long mem_kb = 0;
  if (proc_field(root, "/proc/meminfo", "MemTotal", buf, sizeof buf) == 0)
    sscanf(buf, "%llu", &mem_kb);
  d->memory_bytes = (uint64_t)mem_kb * 1024;

  read_caches(root, d);
#ifdef _SC_LEVEL1_DCACHE_SIZE
  /* Some VMs have no cache directories in sysfs; glibc asks CPUID. */
  if (here && d->l1d_bytes == 0) d->l1d_bytes = sysconf_bytes(_SC_LEVEL1_DCACHE_SIZE);
  if (here && d->l2_bytes == 0) d->l2_bytes = sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
  if (here && d->l3_bytes == 0) d->l3_bytes = sysconf_bytes(_SC_LEVEL3_CACHE_SIZE);
#else
  (void)sysconf_bytes;
#endif

  if (proc_field(root, "/proc/cpuinfo", "flags", buf, sizeof buf) == 0)
    snprintf(d->isa, sizeof d->isa, "%s", isa_from_flags(buf));
  else
    snprintf(d->isa, sizeof d->isa, "%s", here ? isa_from_cpu() : "baseline");

  snprintf(d->backend, sizeof d->backend, "cpu");
  snprintf(d->capabilities, sizeof d->capabilities, "sumtree,table,learner");
  snprintf(d->status, sizeof d->status, "ok");
  snprintf(d->name, sizeof d->name, "%.100s, %u cores, %.1f GiB, %s", d->model, d->cores,
           (double)d->memory_bytes / (double)(1ull << 30), d->isa);
  rd_device_fingerprint(d);
}

static size_t discover(rd_device_t *out, size_t max, char *why, size_t len) {
  if (max == 0) {
    snprintf(why, len, "no room in the device list");
    return 0;
  }
  rd_cpu_provider_probe(NULL, out);
  return 1;
}

static void fingerprint_key(const rd_device_t *d, char *key, size_t len) {
  /* Memory to the nearest GiB: MemTotal moves by a few MiB between
   * kernels and boots (reserved memory), which changes no profile. */
  unsigned long long gib = (d->memory_bytes + (1ull << 29)) >> 30;
  snprintf(key, len, "cpu|%s|%u|%llu|%llu|%llu|%llu|%s", d->model, d->cores,
           (unsigned long long)d->l1d_bytes, (unsigned long long)d->l2_bytes,
           (unsigned long long)d->l3_bytes, gib, d->isa);
}

/* The CPU's row (placement.h): its profiles at the default thread counts
 * and the learner's own, through the profile cache; T_rmm = sample +
 * update at 1 thread, T_learner = train at the learner's thread count;
 * and the pipeline's own costs (mapper.h "Pipeline costs"). */
static int figures(const rd_dse_workload_t *w, const rd_device_t *devs, size_t nd,
                   rd_placement_t *o, rd_error_t *err) {
  (void)nd;
  const rd_device_t *cpu = &devs[0];
  const uint32_t lt = w->learner_threads;
  uint32_t threads[RD_PROFILE_MAX_THREAD_COUNTS];
  size_t nt = rd_profile_default_threads(cpu->cores, threads, RD_PROFILE_MAX_THREAD_COUNTS - 1);
  int have_lt = 0;
  for (size_t i = 0; i < nt; i++) have_lt |= threads[i] == lt;
  if (!have_lt && lt <= RD_MLP_MAX_THREADS) threads[nt++] = lt;
  rd_profile_t prof[RD_PROFILE_MAX_THREAD_COUNTS * RD_PRIM_COUNT];
  size_t np = 0;
  int hit = 0;
  /* A restart (cache_only) takes only what the store holds: never measure. */
  rd_profile_request_t q = {w->store, cpu, w->shape, threads, nt, w->budget_s,
                            w->assume->cache_only};
  int rc = rd_profile_cached(&rd_profiler_cpu, &q, prof, sizeof prof / sizeof prof[0], &np, &hit,
                             NULL, err);
  if (rc) return rc;
  o->cache_hit = hit;
  o->profiles_measured = hit ? 0 : (uint32_t)np;
  rd_pt_source_t src = hit ? RD_PT_CACHED : RD_PT_MEASURED;
  rd_pdevice_t *c = &o->table.dev[RD_DEV_CPU];
  c->present = 1;
  double ts = 0, tu = 0, tt = 0;
  for (size_t i = 0; i < np; i++) {
    if (prof[i].threads == 1 && prof[i].primitive == RD_PRIM_SAMPLE) ts = prof[i].latency_s;
    if (prof[i].threads == 1 && prof[i].primitive == RD_PRIM_UPDATE) tu = prof[i].latency_s;
    if (prof[i].threads == lt && prof[i].primitive == RD_PRIM_TRAIN) tt = prof[i].latency_s;
    if (prof[i].primitive == RD_PRIM_GATHER) o->table.cpu_gather_s = prof[i].latency_s;
    if (prof[i].primitive == RD_PRIM_HANDOFF) o->table.cpu_handoff_s = prof[i].latency_s;
    if (prof[i].primitive == RD_PRIM_PASS) o->table.cpu_pass_s = prof[i].latency_s;
  }
  if (ts > 0 && tu > 0) {
    c->t_rmm = ts + tu;
    c->src_rmm = src;
  }
  if (tt > 0) {
    c->t_learner = tt;
    c->src_learner = src;
  }
  o->device[RD_DEV_CPU] = *cpu;
  o->has_device[RD_DEV_CPU] = 1;
  snprintf(o->fingerprint[RD_DEV_CPU], sizeof o->fingerprint[RD_DEV_CPU], "%s", cpu->fingerprint);
  snprintf(o->detail[RD_DEV_CPU], sizeof o->detail[RD_DEV_CPU],
           "%s; %zu profiles %s; rmm at 1 thread, learner at %u", cpu->model, np,
           hit ? "from the store" : "measured", lt);
  return RD_OK;
}

/* Everything runs on the CPU: the CPU learner, the table's own sum tree
 * and ring. */
static int can_run(const rd_device_t *d, rd_part_t part, const rd_table_config_t *tc,
                   const rd_learner_config_t *lc, rd_dse_runner_t *run, char *why, size_t len) {
  (void)part;
  (void)tc;
  (void)lc;
  if (d == NULL || strcmp(d->kind, "cpu") != 0) {
    snprintf(why, len, "not this server's CPU");
    return 0;
  }
  memset(run, 0, sizeof *run);
  run->learner_kind = RD_LEARNER_ON_CPU;
  return 1;
}

const rd_device_provider_t rd_provider_cpu = {
    .kind = "cpu",
    .row = RD_DEV_CPU,
    .discover = discover,
    .fingerprint_key = fingerprint_key,
    .profiler = &rd_profiler_cpu,
    .check = NULL,
    .figures = figures,
    .can_run = can_run,
    .bind = NULL,
    .running = NULL,
};
