/* rdt_dse.c - devices and stored profiles for tests (rdt_dse.h). */
#include "rdt_dse.h"

#include <stdio.h>
#include <string.h>

void rdt_device(rd_device_t *d, const char *kind, uint32_t index) {
  memset(d, 0, sizeof *d);
  snprintf(d->kind, sizeof d->kind, "%s", kind);
  snprintf(d->status, sizeof d->status, "ok (injected by a test)");
  d->index = index;
}

rd_profile_t rdt_profile(const char *fp, rd_primitive_t prim, uint32_t threads, uint32_t batch,
                         const char *algorithm, const char *network, const char *build,
                         double latency_s) {
  rd_profile_t p;
  memset(&p, 0, sizeof p);
  snprintf(p.device_fp, sizeof p.device_fp, "%s", fp);
  p.primitive = prim;
  p.threads = threads;
  p.shape.batch = batch;
  p.shape.capacity = 100000;
  p.shape.fanout = 16;
  snprintf(p.shape.algorithm, sizeof p.shape.algorithm, "%s", algorithm);
  snprintf(p.shape.network, sizeof p.shape.network, "%s", network);
  snprintf(p.build, sizeof p.build, "%s", build);
  p.latency_s = latency_s;
  p.reps = 7;
  p.measured_unix = 1700000000;
  return p;
}
