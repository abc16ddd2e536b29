/* fuzz_fpga_part.c - an FPGA part file (--fpga-parts-dir, a Plan's
 * assumed part): the loader, then the model on what it accepted.
 *
 * The input is written as fuzz.part and loaded (rd_fpga_parts_load); a
 * part that loads is modelled with a replay module alone and with DQN and
 * DDPG learners (rd_fpga_model_estimate), whose figures must be finite.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_scratch.h"
#include "model.h"

static void mlp(rd_nn_spec_t *s, uint32_t n, const uint32_t *sizes, rd_nn_act_t last) {
  memset(s, 0, sizeof *s);
  s->n_layers = n - 1;
  for (uint32_t i = 0; i < n; i++) s->sizes[i] = sizes[i];
  for (uint32_t i = 0; i + 1 < n; i++) s->act[i] = i + 2 < n ? RD_NN_RELU : last;
}

static void model(const rd_fpga_part_t *p, const rd_fpga_workload_t *w) {
  rd_fpga_estimate_t e;
  if (rd_fpga_model_estimate(p, w, &e, NULL) != RD_OK) return;
  if (!isfinite(e.rmm.sample_s) || !isfinite(e.rmm.update_s)) __builtin_trap();
  if (e.has_learner && !isfinite(e.learner.step_s)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_scratch_file("fuzz.part");
  FILE *f = fopen(path, "w");
  if (f == NULL) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  rd_fpga_part_t part;
  size_t n = 0;
  if (rd_fpga_parts_load(path, &part, 1, &n, NULL) != RD_OK || n != 1) return 0;
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  model(&part, &w);
  static const uint32_t q[] = {4, 64, 64, 2}, actor[] = {11, 256, 256, 3},
                        critic[] = {14, 256, 256, 1};
  w.algo = RD_FPGA_DQN;
  mlp(&w.net[0], 4, q, RD_NN_IDENTITY);
  model(&part, &w);
  w.algo = RD_FPGA_DDPG;
  mlp(&w.net[0], 4, actor, RD_NN_TANH);
  mlp(&w.net[1], 4, critic, RD_NN_IDENTITY);
  model(&part, &w);
  return 0;
}
