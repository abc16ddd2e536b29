/* provider_cpu.h - the CPU's device provider (daemon/dse/provider.h:
 * rd_provider_cpu): this machine's CPU, measured by the CPU profiler
 * through the profile cache, running whatever a mapping leaves on it (the
 * CPU learner, the table's own sum tree and ring). Compiled into the
 * daemon library (daemon/meson.build). */
#ifndef RD_PROVIDER_CPU_H
#define RD_PROVIDER_CPU_H

#include "devices.h"

/* Read the CPU from files under root: root + "/proc/cpuinfo",
 * "/proc/meminfo", "/sys/devices/system/cpu/online" and
 * "/sys/devices/system/cpu/cpu0/cache/index*". root NULL or "" is this
 * machine, where sysconf fills what the files lack (some VMs have no cache
 * directories in sysfs); another root (tests) uses the files only. Always
 * fills *out (unknown parts 0 or "unknown") and its fingerprint. */
void rd_cpu_provider_probe(const char *root, rd_device_t *out);

#endif
