/* test_fpga_learner_units.c - the learner kernel's per-layer MAC units
 * (backends/fpga/kernels/learner.h, LRN_UNITS_N<net>_L<l>) against the
 * FPGA model's allocation for the same design (backends/fpga/model.h:
 * DSPs in proportion to each TU's multiply-adds, papers/001's pipeline
 * local optimization).
 *
 * meson compiles this program twice: once with the -D flags that
 * rd_fpga_learner_unit_defs wrote for Hopper DDPG (actor 11-256-256-3,
 * critic 14-256-256-1), batch 32, on the U200 part (a build of that plan:
 * every FW, BW and WA TU of the design has the model's units), and once
 * without (every layer the default LRN_UNITS). The first must agree TU by
 * TU and the flags must be what the model writes now (a model change that
 * moves the units fails here until the flags in tests/meson.build follow);
 * the second must differ, so the comparison can fail. That the kernel so
 * built computes what the CPU learner does is fpga_learner's suite run on
 * it (fpga_learner_planned, tests/meson.build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "learner.h"
#include "model.h"
#include "rdt_main.h"

#ifndef RD_UNITS_PLANNED
#define RD_UNITS_PLANNED 0 /* 1: built with the model's flags for this design */
#endif

static void hopper_ddpg(rd_fpga_workload_t *w) {
  rd_fpga_workload_default(w);
  w->algo = RD_FPGA_DDPG;
  w->batch = 32;
  static const uint32_t A[] = {11, 256, 256, 3}, C[] = {14, 256, 256, 1};
  for (int n = 0; n < 2; n++) {
    rd_nn_spec_t *s = &w->net[n];
    const uint32_t *sz = n ? C : A;
    memset(s, 0, sizeof *s);
    s->n_layers = 3;
    for (uint32_t l = 0; l <= 3; l++) s->sizes[l] = sz[l];
    s->act[0] = s->act[1] = RD_NN_RELU;
    s->act[2] = n ? RD_NN_IDENTITY : RD_NN_TANH;
  }
}

static void test_units_match_model(void **state) {
  (void)state;
  rd_fpga_part_t part;
  rd_error_t err;
  assert_int_equal(rd_fpga_part_find("u200", RD_FPGA_PARTS_DIR, &part, &err), RD_OK);
  rd_fpga_workload_t w;
  hopper_ddpg(&w);
  rd_fpga_learner_est_t e;
  int rc = rd_fpga_model_learner(&part, &w, &e, &err);
  if (rc != RD_OK) fail_msg("model: %s", err.msg);
  char defs[512];
  assert_int_equal(rd_fpga_learner_unit_defs(&e, defs, sizeof defs, &err), RD_OK);
  printf("model's flags for this design: %s\n", defs);

  uint32_t checked = 0, differ = 0;
  for (uint32_t i = 0; i < e.n_tus; i++) {
    const rd_fpga_tu_t *t = &e.tu[i];
    if (t->kind == RD_FPGA_TU_LOSS) continue;
    const uint32_t k = lrn_units(t->net, t->layer);
    printf("  %-8s net %u layer %u: model %llu units, kernel build %u\n", t->label, t->net,
           t->layer, (unsigned long long)t->units, k);
    if (k != t->units) differ++;
    checked++;
  }
  /* Every FW, BW and WA TU of both networks: 3 + 3 FW of the chain, the
   * targets' 3 + 3, the TD path's 3 FW and 2 BW, BW 3 + 2, WA 3 + 3. */
  assert_int_equal(checked, e.n_tus - 2);
#if RD_UNITS_PLANNED
  assert_int_equal(differ, 0);
#else
  assert_true(differ > 0); /* the default build is not this plan */
#endif
  /* Outside the table: 0. */
  assert_int_equal(lrn_units(2, 0), 0);
  assert_int_equal(lrn_units(0, LRN_UNIT_LAYERS), 0);
}

/* The flags' format, and their errors. */
static void test_unit_defs_format(void **state) {
  (void)state;
  rd_fpga_learner_est_t e;
  memset(&e, 0, sizeof e);
  e.n_tus = 4;
  e.tu[0] = (rd_fpga_tu_t){"FW0", RD_FPGA_TU_FW, 0, 0, 1, 1, 40, 5, 25, 8};
  e.tu[1] = (rd_fpga_tu_t){"LOSS", RD_FPGA_TU_LOSS, 0, 0, 1, 2, 2, 1, 5, 2};
  e.tu[2] = (rd_fpga_tu_t){"WA0", RD_FPGA_TU_WA, 0, 0, 1, 3, 40, 5, 25, 8};
  e.tu[3] = (rd_fpga_tu_t){"cFW1", RD_FPGA_TU_FW, 1, 1, 1, 4, 12, 3, 15, 4};
  char buf[128];
  rd_error_t err;
  assert_int_equal(rd_fpga_learner_unit_defs(&e, buf, sizeof buf, &err), RD_OK);
  assert_string_equal(buf, "-DLRN_UNITS_N0_L0=5 -DLRN_UNITS_N1_L1=3");
  assert_int_equal(rd_fpga_learner_unit_defs(&e, buf, 20, &err), RD_ETOOBIG);
  assert_string_equal(buf, "");
  e.tu[3].layer = LRN_UNIT_LAYERS;
  assert_int_equal(rd_fpga_learner_unit_defs(&e, buf, sizeof buf, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "cFW1"));
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_units_match_model),
         cmocka_unit_test(test_unit_defs_format))
