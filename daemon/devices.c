/* devices.c - device discovery (the CPU; GPU and FPGA backends are not in
 * this build). */
#include "devices.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static rd_device_t devices[RD_MAX_DEVICES];
static size_t n_devices;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* The value of the first "key<spaces>: value" line of a /proc file. */
static int proc_field(const char *path, const char *key, char *out, size_t len) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[512];
  int found = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, kl) != 0) continue;
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

static void discover(void) {
  rd_device_t *d = &devices[0];
  char model[128] = "unknown CPU", mem[64] = "0 kB";
  proc_field("/proc/cpuinfo", "model name", model, sizeof model);
  proc_field("/proc/meminfo", "MemTotal", mem, sizeof mem);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned long long mem_kb = 0;
  sscanf(mem, "%llu", &mem_kb);
  snprintf(d->kind, sizeof d->kind, "cpu");
  snprintf(d->name, sizeof d->name, "%.100s, %ld cores, %.1f GiB", model, cores,
           (double)mem_kb / (1024.0 * 1024.0));
  char key[256];
  snprintf(key, sizeof key, "cpu|%s|%ld|%llu", model, cores, mem_kb);
  snprintf(d->fingerprint, sizeof d->fingerprint, "cpu-%016llx", (unsigned long long)fnv1a(key));
  snprintf(d->status, sizeof d->status, "ok");
  n_devices = 1;
  rd_log_info("devices", "cpu: %s (%s)", d->name, d->fingerprint);
  rd_log_info("devices", "no GPU backend in this build (CUDA support is not compiled in)");
  rd_log_info("devices", "no FPGA backend in this build (XRT support is not compiled in)");
}

void rd_devices_init(void) { pthread_once(&once, discover); }

size_t rd_devices_get(rd_device_t *out, size_t max) {
  rd_devices_init();
  size_t n = n_devices < max ? n_devices : max;
  memcpy(out, devices, n * sizeof *out);
  return n;
}
