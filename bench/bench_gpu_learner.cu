/* bench_gpu_learner.cu - GPU learner train-steps per second (GPS) for the
 * three learner shapes (bench/learner_shapes.h) at batch 32, 256, 2048 and
 * 16384, with CUDA graphs (the default) and without (every kernel launched
 * on the stream).
 *
 *   bench_gpu_learner [--json] [--json-file PATH] [--quick] [--min-time S]
 *                     [--batches 32,256,...]
 *
 * One step is a whole rd_gpu_learner_step: host-side batch checks and
 * packing, one host-to-device copy, the kernels, the copy back of |TD| and
 * the figures, and the wait for them (what a hosted learner pays per step
 * when the batch comes from host memory). 4 distinct batches are cycled;
 * 10 warm-up steps (which capture the graph) are not timed; then steps run
 * until --min-time seconds (default 0.5) and at least 20 steps.
 * Table on stdout; --json prints one JSON object per line instead
 * ({"name":"gpu.learner.gps","params":{"shape":...,"batch":...},
 * "value":...,"unit":"steps/s"}, and "gpu.learner.gps_nograph"); --json-file
 * writes the JSON lines to a file as well as printing the table.
 */
#include "learner_gpu.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "learner_shapes.h"
#include "rd_clock.h"
#include "rdt_learner.h"

/* Steps per second, or < 0 on error. */
static double run(const shape_t *sh, uint32_t batch, int graphs, double min_time, rdt_batch_t *hb,
                  uint64_t *launches) {
  rd_learner_config_t c;
  make_config(sh, batch, 1, &c);
  rd_gpu_learner_t l;
  rd_error_t err;
  if (rd_gpu_learner_init(&l, &c, 0, &err)) {
    fprintf(stderr, "%s batch %u: %s\n", sh->name, batch, err.msg);
    return -1;
  }
  rd_gpu_learner_set_graphs(&l, graphs);
  /* Same-size batches every step: the graph path replays from step 2. */
  for (int i = 0; i < 10; i++)
    if (rd_gpu_learner_step(&l, &hb[i % 4].b, NULL, NULL, &err) && err.code != RD_ERANGE) {
      fprintf(stderr, "%s batch %u: %s\n", sh->name, batch, err.msg);
      rd_gpu_learner_destroy(&l);
      return -1;
    }
  uint64_t steps = 0;
  double t0 = rd_clock_now(), t;
  do {
    for (int i = 0; i < 10; i++, steps++) rd_gpu_learner_step(&l, &hb[i % 4].b, NULL, NULL, &err);
    t = rd_clock_now() - t0;
  } while (t < min_time || steps < 20);
  *launches = l.graph_launches;
  rd_gpu_learner_destroy(&l);
  return (double)steps / t;
}

int main(int argc, char **argv) {
  bool json = false, quick = false;
  const char *json_file = NULL;
  double min_time = 0.5;
  uint32_t batches[16] = {32, 256, 2048, 16384};
  int nb = 4;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--json-file") == 0 && i + 1 < argc) json_file = argv[++i];
    else if (strcmp(a, "--quick") == 0) quick = true;
    else if (strcmp(a, "--min-time") == 0 && i + 1 < argc) min_time = atof(argv[++i]);
    else if (strcmp(a, "--batches") == 0 && i + 1 < argc) {
      nb = 0;
      for (char *p = argv[++i]; *p && nb < 16;) {
        batches[nb++] = (uint32_t)strtoul(p, &p, 10);
        if (*p == ',') p++;
      }
    } else {
      fprintf(stderr, "usage: bench_gpu_learner [--json] [--json-file PATH] [--quick] "
                      "[--min-time S] [--batches 32,256,...]\n");
      return 2;
    }
  }
  if (quick) min_time = 0.1;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    fprintf(stderr, "bench_gpu_learner: no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  FILE *jf = json_file ? fopen(json_file, "w") : NULL;
  if (!json)
    printf("# %s; one step = checks + pack + H2D + kernels + D2H + wait\n"
           "%-14s %7s %12s %10s %12s %10s\n",
           p.name, "shape", "batch", "GPS(graph)", "us/step", "GPS(stream)", "us/step");
  for (size_t s = 0; s < N_SHAPES; s++) {
    for (int k = 0; k < nb; k++) {
      const uint32_t B = batches[k];
      rd_learner_config_t c; /* the batches' config (the learner's threads do not matter) */
      make_config(&shapes[s], B, 1, &c);
      rdt_batch_t hb[4];
      for (int i = 0; i < 4; i++) rdt_batch_make(&hb[i], &c, B, 500 + (uint64_t)i);
      uint64_t l1 = 0, l2 = 0;
      double g = run(&shapes[s], B, 1, min_time, hb, &l1);
      double e = run(&shapes[s], B, 0, min_time, hb, &l2);
      for (int i = 0; i < 4; i++) rdt_batch_free(&hb[i]);
      if (g < 0 || e < 0) return 1;
      char line[2][256];
      snprintf(line[0], sizeof line[0],
               "{\"name\":\"gpu.learner.gps\",\"params\":{\"shape\":\"%s\",\"batch\":%u},"
               "\"value\":%.1f,\"unit\":\"steps/s\"}",
               shapes[s].name, B, g);
      snprintf(line[1], sizeof line[1],
               "{\"name\":\"gpu.learner.gps_nograph\",\"params\":{\"shape\":\"%s\",\"batch\":%u},"
               "\"value\":%.1f,\"unit\":\"steps/s\"}",
               shapes[s].name, B, e);
      if (json) printf("%s\n%s\n", line[0], line[1]);
      else
        printf("%-14s %7u %12.0f %10.1f %12.0f %10.1f\n", shapes[s].name, B, g, 1e6 / g, e,
               1e6 / e);
      if (jf) fprintf(jf, "%s\n%s\n", line[0], line[1]);
      fflush(stdout);
    }
  }
  if (jf) fclose(jf);
  return 0;
}
