/* devices.h - the devices this daemon found at start.
 *
 * Today only the CPU: this build has no GPU or FPGA backend, and says so
 * once in the log. Each device has a stable fingerprint (a hash of what
 * identifies its performance: model, cores, memory) that later keys its
 * profiles. */
#ifndef RD_DEVICES_H
#define RD_DEVICES_H

#include <stddef.h>

#define RD_MAX_DEVICES 16

typedef struct {
  char kind[8];         /* "cpu", "gpu", "fpga" */
  char name[160];
  char fingerprint[24]; /* "cpu-" + 16 hex digits */
  char status[96];
} rd_device_t;

/* Discover once (thread-safe, idempotent) and log absences. */
void rd_devices_init(void);
/* Copy up to max devices into out; returns the count. */
size_t rd_devices_get(rd_device_t *out, size_t max);

#endif
