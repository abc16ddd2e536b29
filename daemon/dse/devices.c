/* devices.c - device discovery: the CPU here, GPUs and FPGAs through their
 * probes (devices_cuda.c or devices_nocuda.c, devices_fpga.c), the list
 * and the fingerprints. */
#include "devices.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static rd_device_t devices[RD_MAX_DEVICES];
static size_t n_devices;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Guards the list after discovery: statuses change (rd_devices_mark_unusable). */
static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
/* The fpga-xclbin setting, as XRT boards' status text says it (under list_mu). */
static int fpga_xclbin;

/* For devices_xrt.c's discovery (which runs before the list is published). */
int rd_devices_fpga_xclbin(void);
int rd_devices_fpga_xclbin(void) {
  pthread_mutex_lock(&list_mu);
  int v = fpga_xclbin;
  pthread_mutex_unlock(&list_mu);
  return v;
}

/* ------------------------------------------------------------------ */
/* Fingerprints                                                        */
/* ------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

void rd_device_fingerprint(rd_device_t *d) {
  char key[512];
  if (strcmp(d->kind, "cpu") == 0) {
    /* Memory to the nearest GiB: MemTotal moves by a few MiB between
     * kernels and boots (reserved memory), which changes no profile. */
    unsigned long long gib = (d->memory_bytes + (1ull << 29)) >> 30;
    snprintf(key, sizeof key, "cpu|%s|%u|%llu|%llu|%llu|%llu|%s", d->model, d->cores,
             (unsigned long long)d->l1d_bytes, (unsigned long long)d->l2_bytes,
             (unsigned long long)d->l3_bytes, gib, d->isa);
  } else {
    /* GPU and FPGA: name, compute units, memory in MiB, ISA (the compute
     * capability). Identical boards share a fingerprint. */
    snprintf(key, sizeof key, "%s|%s|%u|%llu|%s", d->kind, d->model, d->cores,
             (unsigned long long)(d->memory_bytes >> 20), d->isa);
  }
  snprintf(d->fingerprint, sizeof d->fingerprint, "%.4s-%016llx", d->kind,
           (unsigned long long)fnv1a(key));
}

/* ------------------------------------------------------------------ */
/* The CPU                                                             */
/* ------------------------------------------------------------------ */

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

void rd_devices_probe_cpu(const char *root, rd_device_t *d) {
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

/* ------------------------------------------------------------------ */
/* Discovery                                                           */
/* ------------------------------------------------------------------ */

static void log_device(const rd_device_t *d) {
  rd_log_info("devices", "%s%u: %s (%s; runs %s)", d->kind, d->index, d->name, d->fingerprint,
              d->capabilities);
}

static void discover(void) {
  rd_device_t *cpu = &devices[0];
  rd_devices_probe_cpu(NULL, cpu);
  n_devices = 1;
  rd_log_info("devices", "cpu0: %s (%s; L1d %llu KiB, L2 %llu KiB, L3 %llu KiB; runs %s)",
              cpu->name, cpu->fingerprint, (unsigned long long)(cpu->l1d_bytes >> 10),
              (unsigned long long)(cpu->l2_bytes >> 10),
              (unsigned long long)(cpu->l3_bytes >> 10), cpu->capabilities);

  char why[160] = "";
  size_t room = RD_MAX_DEVICES - n_devices;
  size_t n = rd_devices_probe_gpus(devices + n_devices, room, why, sizeof why);
  if (n == 0) rd_log_info("devices", "no GPU: %s", why);
  for (size_t i = 0; i < n; i++) log_device(&devices[n_devices + i]);
  n_devices += n;

  why[0] = '\0';
  room = RD_MAX_DEVICES - n_devices;
  n = rd_devices_probe_fpgas(devices + n_devices, room, why, sizeof why);
  if (n == 0) rd_log_info("devices", "no FPGA: %s", why);
  for (size_t i = 0; i < n; i++) log_device(&devices[n_devices + i]);
  n_devices += n;
}

void rd_devices_init(void) { pthread_once(&once, discover); }

void rd_devices_set_fpga_xclbin(int configured) {
  pthread_mutex_lock(&list_mu);
  fpga_xclbin = configured != 0;
  pthread_mutex_unlock(&list_mu);
  rd_devices_init();
  pthread_mutex_lock(&list_mu);
  for (size_t i = 0; i < n_devices; i++) {
    rd_device_t *d = &devices[i];
    /* A board given up after a failure keeps saying why. */
    if (strcmp(d->kind, "fpga") == 0 && strcmp(d->backend, "xrt") == 0 && rd_device_usable(d))
      rd_devices_xrt_board_text(configured, d);
  }
  pthread_mutex_unlock(&list_mu);
}

size_t rd_devices_get(rd_device_t *out, size_t max) {
  rd_devices_init();
  pthread_mutex_lock(&list_mu);
  size_t n = n_devices < max ? n_devices : max;
  memcpy(out, devices, n * sizeof *out);
  pthread_mutex_unlock(&list_mu);
  return n;
}

void rd_devices_cpu(rd_device_t *out) {
  rd_devices_init();
  pthread_mutex_lock(&list_mu);
  *out = devices[0];
  pthread_mutex_unlock(&list_mu);
}

int rd_device_usable(const rd_device_t *d) { return strncmp(d->status, "ok", 2) == 0; }

int rd_devices_mark_unusable(const char *kind, uint32_t index, const char *why) {
  rd_devices_init();
  int found = 0, logged = 0;
  char status[sizeof devices[0].status];
  pthread_mutex_lock(&list_mu);
  for (size_t i = 0; i < n_devices; i++) {
    rd_device_t *d = &devices[i];
    if (strcmp(d->kind, kind) != 0 || d->index != index) continue;
    found = 1;
    if (rd_device_usable(d)) {
      snprintf(d->status, sizeof d->status, "unusable: %.200s", why);
      memcpy(status, d->status, sizeof status);
      logged = 1;
    }
    break;
  }
  pthread_mutex_unlock(&list_mu);
  if (logged) rd_log_error("devices", "%s%u marked %s", kind, index, status);
  return found;
}

int rd_devices_add_fpga_csim(const char *part, const char *parts_dir, rd_error_t *err) {
  rd_devices_init();
  rd_device_t d;
  pthread_mutex_lock(&list_mu);
  uint32_t fpgas = 0; /* above every FPGA listed: XRT boards keep XRT's indices */
  int rc = RD_OK;
  for (size_t i = 0; i < n_devices; i++) {
    if (strcmp(devices[i].kind, "fpga") != 0) continue;
    if (devices[i].index >= fpgas) fpgas = devices[i].index + 1;
    if (strcmp(devices[i].backend, "csim") == 0)
      rc = rd_error_set(err, RD_EINVAL, "fpga-csim: a C-simulation FPGA (%s) is already listed",
                        devices[i].model);
  }
  if (rc == RD_OK && n_devices >= RD_MAX_DEVICES)
    rc = rd_error_set(err, RD_ETOOBIG, "fpga-csim: the device list is full (%d devices)",
                      RD_MAX_DEVICES);
  if (rc == RD_OK) rc = rd_devices_fpga_csim(part, parts_dir, fpgas, &d, err);
  if (rc == RD_OK) devices[n_devices++] = d;
  pthread_mutex_unlock(&list_mu);
  if (rc == RD_OK) log_device(&d);
  return rc;
}

void rd_devices_inject(const rd_device_t *d) {
  rd_devices_init();
  pthread_mutex_lock(&list_mu);
  if (n_devices < RD_MAX_DEVICES) devices[n_devices++] = *d;
  pthread_mutex_unlock(&list_mu);
}
