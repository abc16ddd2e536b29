/* devices.c - the device list: discovery through the providers
 * (provider.h), the fingerprints, and the statuses. */
#include "devices.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "provider.h"

static rd_device_t devices[RD_MAX_DEVICES];
static size_t n_devices;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Guards the list after discovery: statuses change (rd_devices_mark_unusable). */
static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;

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
  const rd_device_provider_t *p = rd_provider_for(d->kind);
  if (p != NULL && p->fingerprint_key != NULL) {
    p->fingerprint_key(d, key, sizeof key);
  } else {
    /* Name, compute units, memory in MiB, ISA (a GPU's compute capability,
     * an FPGA's backend). Identical boards share a fingerprint. */
    snprintf(key, sizeof key, "%s|%s|%u|%llu|%s", d->kind, d->model, d->cores,
             (unsigned long long)(d->memory_bytes >> 20), d->isa);
  }
  snprintf(d->fingerprint, sizeof d->fingerprint, "%.4s-%016llx", d->kind,
           (unsigned long long)fnv1a(key));
}

/* ------------------------------------------------------------------ */
/* Discovery                                                           */
/* ------------------------------------------------------------------ */

static void log_device(const rd_device_t *d) {
  if (d->l1d_bytes > 0) /* a CPU: its caches too */
    rd_log_info("devices", "%s%u: %s (%s; L1d %llu KiB, L2 %llu KiB, L3 %llu KiB; runs %s)",
                d->kind, d->index, d->name, d->fingerprint,
                (unsigned long long)(d->l1d_bytes >> 10), (unsigned long long)(d->l2_bytes >> 10),
                (unsigned long long)(d->l3_bytes >> 10), d->capabilities);
  else
    rd_log_info("devices", "%s%u: %s (%s; runs %s)", d->kind, d->index, d->name, d->fingerprint,
                d->capabilities);
}

/* Each provider's devices, in table order: the CPU first. */
static void discover(void) {
  const rd_device_provider_t *const *p = rd_providers();
  for (int r = 0; r < RD_DEV_COUNT; r++) {
    char why[160] = "";
    size_t n = p[r]->discover(devices + n_devices, RD_MAX_DEVICES - n_devices, why, sizeof why);
    if (n == 0) {
      char kind[8];
      size_t i = 0;
      for (; p[r]->kind[i] && i + 1 < sizeof kind; i++)
        kind[i] = (char)(p[r]->kind[i] - 'a' + 'A');
      kind[i] = '\0';
      rd_log_info("devices", "no %s: %s", kind, why);
    }
    for (size_t i = 0; i < n; i++) log_device(&devices[n_devices + i]);
    n_devices += n;
  }
}

void rd_devices_init(void) { pthread_once(&once, discover); }

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

int rd_devices_add(rd_device_make_fn make, void *ctx, rd_error_t *err) {
  rd_devices_init();
  rd_device_t d;
  pthread_mutex_lock(&list_mu);
  int rc = make(devices, n_devices, &d, ctx, err);
  if (rc == RD_OK && n_devices >= RD_MAX_DEVICES)
    rc = rd_error_set(err, RD_ETOOBIG, "the device list is full (%d devices)", RD_MAX_DEVICES);
  if (rc == RD_OK) devices[n_devices++] = d;
  pthread_mutex_unlock(&list_mu);
  if (rc == RD_OK) log_device(&d);
  return rc;
}

void rd_devices_update(void (*fn)(rd_device_t *d, void *ctx), void *ctx) {
  rd_devices_init();
  pthread_mutex_lock(&list_mu);
  for (size_t i = 0; i < n_devices; i++) fn(&devices[i], ctx);
  pthread_mutex_unlock(&list_mu);
}

void rd_devices_inject(const rd_device_t *d) {
  rd_devices_init();
  pthread_mutex_lock(&list_mu);
  if (n_devices < RD_MAX_DEVICES) devices[n_devices++] = *d;
  pthread_mutex_unlock(&list_mu);
}
