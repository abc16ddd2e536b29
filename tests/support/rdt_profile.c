/* rdt_profile.c - stored-profile rows for tests (rdt_profile.h). */
#include "rdt_profile.h"

#include <stdio.h>
#include <string.h>

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
