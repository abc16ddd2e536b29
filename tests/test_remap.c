/* test_remap.c - Algorithm 3 over a set of workloads with shared devices
 * and hysteresis (daemon/dse/remap.h): the sharing arithmetic, a workload
 * that takes the best device once the one occupying it leaves, gains
 * within the threshold that move nothing, and no oscillation when two
 * workloads come and go again and again. Pure computation: no timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "remap.h"
#include "rdt_main.h"

/* A relaxed (D = 50) table: learner and RMM times per device, 0 = none. */
static rd_ptable_t table(double cpu_l, double cpu_r, double gpu_l, double gpu_r) {
  rd_ptable_t t;
  memset(&t, 0, sizeof t);
  t.batch = 64;
  t.item_words = 10;
  t.n_actor = 16;
  t.depth = 50;
  t.dev[RD_DEV_CPU] = (rd_pdevice_t){1, cpu_l, cpu_r, cpu_l > 0 ? RD_PT_ASSUMED : RD_PT_NONE,
                                     cpu_r > 0 ? RD_PT_ASSUMED : RD_PT_NONE};
  if (gpu_l > 0 || gpu_r > 0)
    t.dev[RD_DEV_GPU] = (rd_pdevice_t){1, gpu_l, gpu_r, gpu_l > 0 ? RD_PT_ASSUMED : RD_PT_NONE,
                                       gpu_r > 0 ? RD_PT_ASSUMED : RD_PT_NONE};
  return t;
}

static rd_remap_item_t item(rd_ptable_t t, uint32_t weight) {
  rd_remap_item_t it;
  memset(&it, 0, sizeof it);
  it.table = t;
  it.weight = weight;
  return it;
}

static void decide(rd_remap_item_t *it, size_t n, double threshold, rd_remap_result_t *out,
                   rd_remap_summary_t *sum) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_remap(it, n, threshold, out, sum, &err);
  if (rc != RD_OK) fail_msg("rd_remap: %s", err.msg);
}

/* Apply a decision: the items are placed where it says. */
static void apply(rd_remap_item_t *it, size_t n, const rd_remap_result_t *out) {
  for (size_t i = 0; i < n; i++) {
    it[i].placed = 1;
    it[i].learner = out[i].learner;
    it[i].rmm = out[i].rmm;
  }
}

/* Two workloads on one device split it by weight. */
static void test_sharing(void **state) {
  (void)state;
  /* Only the CPU: both must share it. Learner 1 ms, RMM 0.1 ms. */
  rd_remap_item_t it[2] = {item(table(1e-3, 1e-4, 0, 0), 3), item(table(1e-3, 1e-4, 0, 0), 1)};
  rd_remap_result_t out[2];
  rd_remap_summary_t sum;
  decide(it, 2, 0.1, out, &sum);
  /* Shares 3/4 and 1/4: 1 / (1 ms / 0.75) and 1 / (1 ms / 0.25). */
  assert_true(fabs(out[0].gps - 750) < 1e-6);
  assert_true(fabs(out[1].gps - 250) < 1e-6);
  assert_int_equal(sum.moves, 0);
  /* Alone it has the whole device. */
  decide(it, 1, 0.1, out, &sum);
  assert_true(fabs(out[0].gps - 1000) < 1e-6);
}

/* B registered while A occupies the GPU, so it went to the CPU; when A
 * leaves, the re-mapping moves B to the GPU, with the predicted gain. */
static void test_best_device_freed(void **state) {
  (void)state;
  rd_ptable_t t = table(4e-3, 1e-4, 1e-3, 1e-4); /* the GPU learner is 4x faster */
  rd_remap_item_t it[2] = {item(t, 1), item(t, 1)};
  rd_remap_result_t out[2];
  rd_remap_summary_t sum;
  decide(it, 1, 0.1, out, &sum); /* A alone */
  assert_int_equal(out[0].learner, RD_DEV_GPU);
  apply(it, 1, out);
  decide(it, 2, 0.1, out, &sum); /* B arrives */
  assert_int_equal(out[0].learner, RD_DEV_GPU);
  /* B's best response beside A: half the GPU (2 ms) beats the CPU (4 ms,
   * shared with A's RMM: 8 ms), so it shares the GPU. */
  apply(it, 2, out);
  rd_remap_item_t b = it[1];
  /* Make B's case the issue's: a CPU it has to itself is the better
   * choice while A holds the GPU (A's RMM on the GPU too). */
  b.table = table(1.5e-3, 1e-4, 1e-3, 1e-4);
  b.placed = 1;
  b.learner = RD_DEV_CPU;
  b.rmm = RD_DEV_CPU;
  rd_remap_item_t alone[1] = {b};
  decide(alone, 1, 0.1, out, &sum); /* A deleted: B alone */
  assert_int_equal(sum.adopted, 1);
  assert_int_equal(out[0].moved, 1);
  assert_int_equal(out[0].learner, RD_DEV_GPU);
  assert_true(sum.total_proposed > sum.total_before * 1.1);
  assert_true(fabs(out[0].gps_before - 1 / 1.5e-3) < 1e-6);
  assert_true(fabs(out[0].gps - 1000) < 1e-6);
}

/* A proposal within the threshold moves nothing; the same one at
 * threshold 0 is adopted. */
static void test_threshold(void **state) {
  (void)state;
  /* CPU learner 1.05 ms, GPU 1 ms: the GPU is 5% better. */
  rd_remap_item_t it[1] = {item(table(1.05e-3, 1e-4, 1e-3, 1e-4), 1)};
  it[0].placed = 1;
  it[0].learner = RD_DEV_CPU;
  it[0].rmm = RD_DEV_CPU;
  rd_remap_result_t out[1];
  rd_remap_summary_t sum;
  decide(it, 1, 0.10, out, &sum);
  assert_int_equal(sum.adopted, 0);
  assert_int_equal(sum.moves, 0);
  assert_int_equal(out[0].learner, RD_DEV_CPU);
  assert_true(sum.total_proposed > sum.total_before);
  decide(it, 1, 0.0, out, &sum);
  assert_int_equal(sum.adopted, 1);
  assert_int_equal(out[0].learner, RD_DEV_GPU);
}

/* A long-lived workload and one that comes and goes 20 times: after the
 * first cycle every arrival gives the same mappings and every departure
 * the same, and deciding again on a decided state moves nobody. */
static void test_no_oscillation(void **state) {
  (void)state;
  rd_ptable_t ta = table(2e-3, 1e-4, 1e-3, 1e-4), tb = table(2.2e-3, 1e-4, 1e-3, 1e-4);
  rd_remap_item_t it[2] = {item(ta, 1), item(tb, 1)};
  rd_remap_result_t out[2];
  rd_remap_summary_t sum;
  decide(it, 1, 0.1, out, &sum);
  apply(it, 1, out);
  rd_devkind_t with_l[2] = {0}, with_r[2] = {0}, alone_l = 0, alone_r = 0;
  uint32_t moves = 0;
  for (int cycle = 0; cycle < 20; cycle++) {
    it[1] = item(tb, 1); /* B registers */
    decide(it, 2, 0.1, out, &sum);
    moves += sum.moves;
    apply(it, 2, out);
    rd_remap_summary_t again;
    rd_remap_result_t out2[2];
    decide(it, 2, 0.1, out2, &again); /* nothing changed: nothing moves */
    assert_int_equal(again.moves, 0);
    if (cycle == 0) {
      for (int i = 0; i < 2; i++) with_l[i] = it[i].learner, with_r[i] = it[i].rmm;
    } else {
      for (int i = 0; i < 2; i++) {
        assert_int_equal(it[i].learner, with_l[i]);
        assert_int_equal(it[i].rmm, with_r[i]);
      }
    }
    decide(it, 1, 0.1, out, &sum); /* B is deleted */
    moves += sum.moves;
    apply(it, 1, out);
    if (cycle == 0) {
      alone_l = it[0].learner;
      alone_r = it[0].rmm;
    } else {
      assert_int_equal(it[0].learner, alone_l);
      assert_int_equal(it[0].rmm, alone_r);
    }
  }
  /* At most a move each way per cycle, and none at all here: A keeps the
   * GPU, B fits beside it. */
  assert_true(moves <= 40);
  assert_int_equal(moves, 0);
}

/* A (CPU learner 1.2 ms, GPU 1 ms) and B (CPU 4 ms, GPU 1 ms), replay
 * modules only on the GPU. B's arrival makes A give B the GPU's learner
 * time (+34% in total); B's departure would bring A back (+19%). With a
 * threshold of 20% A moves once and stays; with none it moves at every
 * arrival and departure: the threshold is what keeps coming and going
 * from moving the long-lived workload each time. */
static uint32_t cycles(double threshold) {
  rd_ptable_t ta = table(1.2e-3, 0, 1e-3, 1e-5), tb = table(4e-3, 0, 1e-3, 1e-5);
  rd_remap_item_t it[2] = {item(ta, 1), item(tb, 1)};
  rd_remap_result_t out[2];
  rd_remap_summary_t sum;
  decide(it, 1, threshold, out, &sum);
  assert_int_equal(out[0].learner, RD_DEV_GPU);
  apply(it, 1, out);
  uint32_t moves = 0;
  for (int cycle = 0; cycle < 20; cycle++) {
    it[1] = item(tb, 1);
    decide(it, 2, threshold, out, &sum);
    moves += sum.moves;
    apply(it, 2, out);
    assert_int_equal(it[1].learner, RD_DEV_GPU); /* B: the GPU's learner, always */
    decide(it, 1, threshold, out, &sum);
    moves += sum.moves;
    apply(it, 1, out);
  }
  return moves;
}

static void test_hysteresis(void **state) {
  (void)state;
  assert_int_equal(cycles(0.2), 1);
  assert_int_equal(cycles(0.0), 40);
}

static void test_errors(void **state) {
  (void)state;
  rd_remap_item_t it[1] = {item(table(1e-3, 1e-4, 0, 0), 0)};
  rd_remap_result_t out[1];
  rd_error_t err;
  assert_int_equal(rd_remap(it, 1, 0.1, out, NULL, &err), RD_EINVAL); /* weight 0 */
  it[0].weight = 1;
  assert_int_equal(rd_remap(it, 1, -1, out, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_remap(it, 1, NAN, out, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_remap(it, RD_REMAP_MAX + 1, 0.1, out, NULL, &err), RD_EINVAL);
  it[0].placed = 1;
  it[0].learner = RD_DEV_GPU; /* absent */
  it[0].rmm = RD_DEV_CPU;
  assert_int_equal(rd_remap(it, 1, 0.1, out, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_remap(it, 0, 0.1, out, NULL, &err), RD_OK);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_sharing),   cmocka_unit_test(test_best_device_freed),
         cmocka_unit_test(test_threshold), cmocka_unit_test(test_no_oscillation),
         cmocka_unit_test(test_hysteresis),  cmocka_unit_test(test_errors))
