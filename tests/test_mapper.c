/* test_mapper.c - papers/001 Algorithm 3 (daemon/dse/mapper.h) against the
 * mappings of the paper's Table V, the GPU-sharing prune, the storage
 * placement rule, the tie rules, absent devices and bad tables.
 *
 * The performance tables are made by hand, shaped like the paper's Fig.
 * 11-12 as its §VII-C/D describes them (the figures themselves are not in
 * the text): the FPGA learner wins for tiny nets and small batches, the
 * GPU learner for large ones; the FPGA RMM is fastest except where the
 * GPU's prefix sum scales better at huge batches; the CPU RMM is one
 * thread. Each case's comment shows the arithmetic that makes its mapping.
 * Times are in seconds; TP = B / T items/s; GPS in steps/s.
 *
 * Item sizes E (32-bit words per stored item, obs + action + reward +
 * next_obs + done): CartPole 4+1+1+4+1 = 11; Hopper 11+3+1+11+1 = 27;
 * Pong two 4x84x84 uint8 frame stacks (2 x 7056 words) + 3 = 14115.
 * N_actor = 16 (papers/001 §VII-A: 16 actors, one item each per step)
 * unless a case says otherwise. D = 50 (§VII-B).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mapper.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

enum { C = RD_DEV_CPU, G = RD_DEV_GPU, F = RD_DEV_FPGA };

/* A table with every device present and no entries. */
static rd_ptable_t table(uint32_t batch, uint32_t item_words, double n_actor) {
  rd_ptable_t t;
  memset(&t, 0, sizeof t);
  for (int d = 0; d < RD_DEV_COUNT; d++) t.dev[d].present = 1;
  t.batch = batch;
  t.item_words = item_words;
  t.n_actor = n_actor;
  t.depth = 50;
  return t;
}

/* Device d's learner and RMM times; 0 leaves that entry absent. */
static void set(rd_ptable_t *t, int d, double t_learner, double t_rmm) {
  t->dev[d].t_learner = t_learner;
  t->dev[d].src_learner = t_learner > 0 ? RD_PT_ASSUMED : RD_PT_NONE;
  t->dev[d].t_rmm = t_rmm;
  t->dev[d].src_rmm = t_rmm > 0 ? RD_PT_ASSUMED : RD_PT_NONE;
}

static rd_mapping_t map_ok(const rd_ptable_t *t) {
  rd_mapping_t m;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_map(t, &m, &err);
  if (rc != RD_OK) fail_msg("rd_map: %s: %s", rd_err_name(rc), err.msg);
  assert_true(strlen(m.explain) + 1 < sizeof m.explain); /* never cut */
  return m;
}

static void assert_code(const rd_mapping_t *m, const char *want) {
  char code[RD_MAPPING_CODE_MAX];
  assert_int_equal(rd_mapping_format(m, code, sizeof code), RD_OK);
  if (strcmp(code, want) != 0) fail_msg("mapping %s, want %s: %s", code, want, m->explain);
}

static void assert_near(double got, double want) {
  if (!(fabs(got - want) <= 1e-9 * fabs(want)))
    fail_msg("got %.17g, want %.17g", got, want);
}

static void assert_contains(const char *s, const char *part) {
  if (strstr(s, part) == NULL) fail_msg("\"%s\" lacks \"%s\"", s, part);
}

static void assert_fails(const rd_ptable_t *t, int code, const char *part) {
  rd_mapping_t m, before;
  memset(&m, 0xAB, sizeof m);
  before = m;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_map(t, &m, &err);
  if (rc != code) fail_msg("rd_map: %s, want %s (%s)", rd_err_name(rc), rd_err_name(code), part);
  assert_int_equal(err.code, code);
  assert_contains(err.msg, part);
  assert_memory_equal(&m, &before, sizeof m); /* a failing call changes nothing */
}

static void assert_einval(const rd_ptable_t *t, const char *part) {
  rd_mapping_t m, before;
  memset(&m, 0xAB, sizeof m);
  before = m;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_map(t, &m, &err);
  if (rc != RD_EINVAL) fail_msg("rd_map: %s, want RD_EINVAL (%s)", rd_err_name(rc), part);
  assert_int_equal(err.code, RD_EINVAL);
  assert_contains(err.msg, part);
  assert_memory_equal(&m, &before, sizeof m); /* a failing call changes nothing */
}

/* ------------------------------------------------------------------ */
/* Table V                                                              */
/* ------------------------------------------------------------------ */

/* CartPole (137 MACs): F-F-F at every batch. */
static void test_table5_cartpole_fff(void **state) {
  (void)state;
  static const struct {
    uint32_t batch;
    double tl[3], tr[3]; /* cpu, gpu, fpga */
    double gps;
  } cases[] = {
      /* B=32. TP_L^F = 32/1e-5 = 3.2e6 is the best learner. RMM: F-F
       * gives 1/max(1e-5, 2e-6) = 1e5 GPS; F-G 1/8e-5 = 12500; F-C
       * 1/1.2e-4 = 8333, 12x less (Table V's 2nd best F-C-F, 12x). */
      {32, {2e-4, 6e-4, 1e-5}, {1.2e-4, 8e-5, 2e-6}, 1e5},
      /* B=256. F-F 1/3e-5 = 33333; F-G 1/1.1e-4 = 9091, 3.7x less
       * (Table V's F-G-F, 3.6x); F-C 1/6e-4 = 1667. */
      {256, {9e-4, 7e-4, 3e-5}, {6e-4, 1.1e-4, 1.2e-5}, 1e5 / 3},
      /* B=2048. The RMM hides behind the learner on the FPGA (1e-4) and
       * the GPU (1.5e-4 < 2e-4): F-F = F-G = 5000 GPS, a tie; F-F uses
       * {F, C} (the CPU hosts the actors), F-G {F, G, C}: F-F. */
      {2048, {5e-3, 1.2e-3, 2e-4}, {4e-3, 1.5e-4, 1e-4}, 5000},
      /* B=16384. The GPU's RMM is now the fastest (TP 1.8e7 vs the FPGA's
       * 1.1e7: line 5's argmax alone would say F-G), but both exceed the
       * learner's 16384/2e-3 = 8.2e6: F-F = F-G = 500 GPS, and fewer
       * devices decide, as §VII-D explains for B > 2048. */
      {16384, {4e-2, 3e-3, 2e-3}, {3e-2, 9e-4, 1.5e-3}, 500},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rd_ptable_t t = table(cases[i].batch, 11, 16);
    for (int d = 0; d < RD_DEV_COUNT; d++) set(&t, d, cases[i].tl[d], cases[i].tr[d]);
    rd_mapping_t m = map_ok(&t);
    assert_code(&m, "F-F-F");
    assert_near(m.gps, cases[i].gps);
    assert_int_equal(m.bottleneck, RD_BOTTLENECK_LEARNER);
    assert_int_equal(m.n_devices, 2);
    assert_false(m.gpu_rmm_pruned);
    /* Storage on F: only the actors' 16 x 11 = 176 words cross; on C the
     * learner's B x 11 and the RMM's B would. */
    assert_near(m.traffic_words, 176);
    assert_near(m.traffic_on[C], cases[i].batch * 11.0 + cases[i].batch);
    assert_true(m.traffic_on[G] < 0);
  }
}

/* Hopper (70K MACs): F-F-F at 32, G-C-G at 256 and 2048, G-F-G at 16384. */
static void test_table5_hopper(void **state) {
  (void)state;
  /* B=32: the FPGA learner is best (TP 3.2e5). Every RMM beats it (C
   * 1.6e6, G 5.3e5, F 6.4e6), so all give 1e4 GPS. Devices: F-F and F-C
   * use {F, C}, F-G three. Traffic: F-F stores on F and moves the actors'
   * 16 x 27 = 432 words; F-C's best is also F, with the RMM's 32 indices
   * on top: 464. So F-F-F, by traffic. */
  rd_ptable_t t = table(32, 27, 16);
  set(&t, C, 8e-4, 2e-5);
  set(&t, G, 5e-4, 6e-5);
  set(&t, F, 1e-4, 5e-6);
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "F-F-F");
  assert_near(m.gps, 1e4);
  assert_near(m.traffic_words, 432);

  /* B=256: the GPU learner is best (TP 256/9e-4 = 2.8e5). The FPGA's RMM
   * (6.4e6) >= 2.8e5 prunes the GPU's. C (5.1e5) and F both hide: 1111
   * GPS each; G-C uses {G, C}, G-F {G, F, C}: G-C. Storage: on G the
   * actors' 432 + the RMM's 256 = 688 words; on C the learner's 256 x 27
   * = 6912: G. */
  t = table(256, 27, 16);
  set(&t, C, 3e-3, 5e-4);
  set(&t, G, 9e-4, 1.5e-4);
  set(&t, F, 1.2e-3, 4e-5);
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.gps, 1 / 9e-4);
  assert_true(m.gpu_rmm_pruned);
  assert_int_equal(m.pruned_by, F); /* the fastest non-GPU RMM is named */
  assert_near(m.traffic_words, 688);
  assert_near(m.traffic_on[C], 6912);
  assert_int_equal(m.n_devices, 2);

  /* B=2048: G learner 2048/4e-3 = 5.1e5; C's RMM 2048/3e-3 = 6.8e5 still
   * hides: G-C-G again, 250 GPS. Storage G: 432 + 2048 = 2480 words vs
   * 2048 x 27 = 55296 on C. */
  t = table(2048, 27, 16);
  set(&t, C, 2.5e-2, 3e-3);
  set(&t, G, 4e-3, 6e-4);
  set(&t, F, 9e-3, 2.5e-4);
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.gps, 250);
  assert_near(m.traffic_words, 2480);

  /* B=16384: G learner 16384/2.5e-2 = 6.6e5; C's RMM 16384/4e-2 = 4.1e5
   * no longer hides (§VII-D). F's 8.2e6 prunes G (line 6 literally):
   * G-C gives 1/4e-2 = 25 GPS, G-F 1/2.5e-2 = 40: G-F. (Sharing the GPU
   * would give 1/(2.5e-2 + 1e-2) = 28.6, the paper's "about 30%" less.)
   * Storage: G 432 + 16384 = 16816; F 442368 + 432 = 442800; C 442368 +
   * 16384 = 458752: G. Three devices, as Table VII's G-F-G. */
  t = table(16384, 27, 16);
  set(&t, C, 2e-1, 4e-2);
  set(&t, G, 2.5e-2, 1e-2);
  set(&t, F, 8e-2, 2e-3);
  m = map_ok(&t);
  assert_code(&m, "G-F-G");
  assert_near(m.gps, 40);
  assert_true(m.gpu_rmm_pruned);
  assert_int_equal(m.pruned_by, F);
  assert_near(m.traffic_on[G], 16816);
  assert_near(m.traffic_on[F], 442800);
  assert_near(m.traffic_on[C], 458752);
  assert_int_equal(m.n_devices, 3);
  assert_int_equal(m.bottleneck, RD_BOTTLENECK_LEARNER);
}

/* Pong (18.8M MACs, E = 14115): G-C-G at 32 and 64, G-C-C at 256.
 *
 * Where the storage goes. With learner G and RMM C, storage on G moves
 * N_actor*E + B words, on C B*E. C wins iff N_actor >= B(E-1)/E, i.e.
 * (E >> 1) iff the actors insert about as many items per gradient step
 * as the learner samples. With the paper's literal N_actor = 16 that
 * never happens for B >= 17, so Table V's G-C-C at B = 256 needs
 * N_actor >= 256 x 14114/14115 = 255.98 items per step: one insert per
 * sampled item (samples_per_insert = 1), e.g. actors running free at 16
 * x 2200 items/s against the learner's 139 GPS (Table VII: 0.246 GPS/W x
 * 565.3 W). At B = 32 and 64 the cases keep N_actor = 16. */
static void test_table5_pong(void **state) {
  (void)state;
  /* B=32: G learner 32/3e-3 = 1.1e4 items/s; F's RMM 6.4e6 prunes G. C
   * (1.1e6) and F both hide: 333 GPS, G-C by devices. (G-G would give
   * 1/(3e-3 + 2e-3) = 200, Table V's G-G-G at 1.67x less.) Storage: G
   * 16 x 14115 + 32 = 225872 vs C 32 x 14115 = 451680: G. */
  rd_ptable_t t = table(32, 14115, 16);
  set(&t, C, 3e-1, 3e-5);
  set(&t, G, 3e-3, 2e-3);
  set(&t, F, 5e-3, 5e-6);
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.gps, 1 / 3e-3);
  assert_true(m.gpu_rmm_pruned);
  assert_near(m.traffic_words, 225872);
  assert_near(m.traffic_on[C], 451680);

  /* B=64: the same shape. Storage G 225840 + 64 = 225904 vs 903360. */
  t = table(64, 14115, 16);
  set(&t, C, 5e-1, 5e-5);
  set(&t, G, 4e-3, 2.16e-3);
  set(&t, F, 8e-3, 8e-6);
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.traffic_words, 225904);

  /* B=256, N_actor = 256: G-C as before (G-G: 1/(7.2e-3 + 6.7e-3), 1.93x
   * less). Storage: G 256 x 14115 + 256 = 3613696 vs C 256 x 14115 =
   * 3613440: C, by the RMM's 256 indices. */
  t = table(256, 14115, 256);
  set(&t, C, 1.5, 1.5e-4);
  set(&t, G, 7.2e-3, 6.7e-3);
  set(&t, F, 2e-2, 3e-5);
  m = map_ok(&t);
  assert_code(&m, "G-C-C");
  assert_near(m.gps, 1 / 7.2e-3);
  assert_near(m.traffic_words, 3613440);
  assert_near(m.traffic_on[G], 3613696);
  assert_int_equal(m.n_devices, 2);
  assert_contains(m.explain, "storage on cpu");

  /* The same table with the literal 16 actors: G 225840 + 256 = 226096
   * words vs 3613440 on C: back to G-C-G. */
  t.n_actor = 16;
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.traffic_words, 226096);
}

/* ------------------------------------------------------------------ */
/* The GPU-sharing prune                                                */
/* ------------------------------------------------------------------ */

/* No FPGA (as on most servers): the CPU's RMM triggers the prune, which
 * line 6 (FPGA only) would not; §VI-B's "non-GPU devices" does. */
static void test_prune_by_cpu(void **state) {
  (void)state;
  /* Hopper B=256 without an FPGA. The FPGA row holds figures that would
   * win everything: an absent device's entries are ignored. */
  rd_ptable_t t = table(256, 27, 16);
  set(&t, C, 3e-3, 5e-4);
  set(&t, G, 9e-4, 1.5e-4);
  set(&t, F, 1e-6, 1e-7);
  t.dev[F].present = 0;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_true(m.gpu_rmm_pruned);
  assert_int_equal(m.pruned_by, C); /* C's 5.1e5 >= G's learner 2.8e5 */
  assert_contains(m.explain, "rmm on cpu (5.12e+05 items/s, best after the prune); cpu's "
                             "5.12e+05 >= the learner's 2.84e+05, so gpu is pruned");
}

/* The prune decides where the tolerance alone would not. Learner G at
 * 1e-3 (TP 2.56e5); GPU RMM 1e-5, CPU RMM 5e-4 (TP 5.1e5 >= 2.56e5:
 * prune). Without it, G-G would give 1/(1e-3 + 1e-5) = 990 GPS, within 2%
 * of G-C's 1000, with the same two devices and less traffic (storage G:
 * 432 vs G-C's 432 + 256 = 688): G-G-G would win. With it: G-C-G. */
static void test_prune_beats_tie(void **state) {
  (void)state;
  rd_ptable_t t = table(256, 27, 16);
  set(&t, C, 5e-3, 5e-4);
  set(&t, G, 1e-3, 1e-5);
  t.dev[F].present = 0;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_true(m.gpu_rmm_pruned);
  assert_int_equal(m.pruned_by, C);
  assert_near(m.gps, 1000);

  /* The strict loop (D = 0) does not prune: nothing overlaps, so G-G's
   * 1/(1e-3 + 1e-5) = 990 beats G-C's 1/(1e-3 + 5e-4) = 667. */
  t.depth = 0;
  m = map_ok(&t);
  assert_code(&m, "G-G-G");
  assert_false(m.gpu_rmm_pruned);
  assert_true(m.shares_gpu);
  assert_near(m.gps, 1 / (1e-3 + 1e-5));
}

/* No non-GPU RMM keeps up with the learner, so the GPU's RMM stays and
 * wins despite the sharing penalty. B=1024, learner G 1e-3 (TP 1.02e6);
 * CPU RMM 4e-3 (2.6e5), FPGA RMM 2e-3 (5.1e5): both below, no prune. G-G
 * gives 1/(1e-3 + 1e-4) = 909 GPS; G-F 1/2e-3 = 500; G-C 250. Storage
 * on G moves the actors' 432 words, on C 1024 x 27 + 1024: G-G-G. */
static void test_no_prune_keeps_gpu_rmm(void **state) {
  (void)state;
  rd_ptable_t t = table(1024, 27, 16);
  set(&t, C, 2e-2, 4e-3);
  set(&t, G, 1e-3, 1e-4);
  set(&t, F, 5e-3, 2e-3);
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-G-G");
  assert_false(m.gpu_rmm_pruned);
  assert_true(m.shares_gpu);
  assert_near(m.gps, 1 / 1.1e-3);
  assert_near(m.traffic_words, 432);
  assert_int_equal(m.n_devices, 2);
  assert_contains(m.explain, "share the gpu");

  /* The same without an FPGA: G-G-G still (909 vs G-C's 250). */
  t.dev[F].present = 0;
  m = map_ok(&t);
  assert_code(&m, "G-G-G");
  assert_false(m.gpu_rmm_pruned);

  /* A GPU with no RMM entry: nothing to prune, G-F then (500 GPS). */
  t.dev[F].present = 1;
  set(&t, G, 1e-3, 0);
  m = map_ok(&t);
  assert_code(&m, "G-F-G");
  assert_false(m.gpu_rmm_pruned);
  assert_int_equal(m.bottleneck, RD_BOTTLENECK_RMM);
  assert_near(m.gps, 500);
}

/* ------------------------------------------------------------------ */
/* Ties                                                                 */
/* ------------------------------------------------------------------ */

/* Equal throughputs: fewer devices. */
static void test_tie_fewer_devices(void **state) {
  (void)state;
  /* The learner is as fast on the CPU as on the GPU (1e-3) and so is the
   * RMM (5e-4): C-C uses one device, anything with G two. C-C-C, and
   * nothing crosses a link. */
  rd_ptable_t t = table(256, 27, 16);
  set(&t, C, 1e-3, 5e-4);
  set(&t, G, 1e-3, 5e-4);
  t.dev[F].present = 0;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "C-C-C");
  assert_int_equal(m.n_devices, 1);
  assert_near(m.traffic_words, 0);
  assert_contains(m.explain, "gpu's 2.56e+05 ties within 2%, and its best mapping gives the "
                             "same GPS (within 2%) on 2 devices vs 1");

  /* RMM-bound within the tolerance: learner G 5e-4; RMM F 1e-3 (1000
   * GPS) vs C 1.015e-3 (985, 1.5% less): a tie, and G-C uses {G, C}
   * where G-F uses three: G-C. */
  t = table(256, 27, 16);
  set(&t, C, 1e-2, 1.015e-3);
  set(&t, G, 5e-4, 0);
  set(&t, F, 1e-2, 1e-3);
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_int_equal(m.bottleneck, RD_BOTTLENECK_RMM);
  assert_near(m.gps, 1 / 1.015e-3);
  assert_contains(m.explain, "fpga's faster rmm");

  /* Outside it: C at 1.03e-3 is 971 GPS, 2.9% less: G-F. */
  set(&t, C, 1e-2, 1.03e-3);
  m = map_ok(&t);
  assert_code(&m, "G-F-G");
  assert_near(m.gps, 1000);
}

/* Equal GPS and devices: less traffic. Learner G 1e-3; RMM C 1.5e-3
 * (RMM-bound: 667 GPS) or G 5e-4 (shared: 1/(1e-3 + 5e-4) = 667). Both
 * use {G, C}. B=256, E=100, N_actor=16: G-G stores on G and moves the
 * actors' 1600 words; G-C's best is also G, plus the RMM's 256: 1856.
 * G-G-G. No prune: C's TP 1.7e5 < the learner's 2.56e5. */
static void test_tie_less_traffic(void **state) {
  (void)state;
  rd_ptable_t t = table(256, 100, 16);
  set(&t, C, 1e-2, 1.5e-3);
  set(&t, G, 1e-3, 5e-4);
  t.dev[F].present = 0;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-G-G");
  assert_false(m.gpu_rmm_pruned);
  assert_near(m.traffic_words, 1600);
  assert_near(m.traffic_on[C], 25856); /* 256 x 100 + 256 */
  assert_contains(m.explain, "rmm on gpu (5.12e+05 items/s, best)");
}

/* ------------------------------------------------------------------ */
/* Storage placement                                                    */
/* ------------------------------------------------------------------ */

static void test_storage_rules(void **state) {
  (void)state;
  /* Learner G, RMM C (CPU's RMM prunes G's). B=32, E=2, N_actor=16:
   * storage on G moves 16 x 2 + 32 = 64 words, on C 32 x 2 = 64. A tie:
   * line 14's strict '<' keeps the first of [learner, actors, RMM]: G. */
  rd_ptable_t t = table(32, 2, 16);
  set(&t, C, 1e-2, 1e-4);
  set(&t, G, 1e-3, 5e-5);
  t.dev[F].present = 0;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.traffic_on[G], 64);
  assert_near(m.traffic_on[C], 64);
  assert_true(m.traffic_on[F] < 0);
  assert_contains(m.explain, "(a tie: the learner's device comes first");

  /* The threshold N_actor = B(E-1)/E = 16: just below, G (63 < 64);
   * just above, C (65 > 64). */
  t.n_actor = 15.5;
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.traffic_words, 63);
  t.n_actor = 16.5;
  m = map_ok(&t);
  assert_code(&m, "G-C-C");
  assert_near(m.traffic_words, 64);
  assert_near(m.traffic_on[G], 65);

  /* No actors (N_actor = 0): G moves only the 32 indices. */
  t.n_actor = 0;
  m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.traffic_words, 32);

  /* Learner C, RMM F: storage on C moves the B = 32 indices, on F the
   * learner's 32 x 2 and the actors' 16 x 2 = 96: C-F-C. */
  t = table(32, 2, 16);
  set(&t, C, 1e-3, 5e-3);
  set(&t, F, 0, 1e-4);
  t.dev[G].present = 0;
  m = map_ok(&t);
  assert_code(&m, "C-F-C");
  assert_near(m.traffic_words, 32);
  assert_near(m.traffic_on[F], 96);
  assert_int_equal(m.n_devices, 2);
}

/* ------------------------------------------------------------------ */
/* The strict loop                                                      */
/* ------------------------------------------------------------------ */

/* D = 0: GPS = 1/(T_L + T_R + traffic x 4 / link). Learner G 1e-3, RMM C
 * 5e-4 or G 6e-4; link 16 GB/s (PCIe 3 x16, §VII-A). G-C stores on G
 * (688 words = 2752 B, 1.72e-7 s): 1/(1.5e-3 + 1.72e-7) = 666.59 GPS.
 * G-G: 1/(1.6e-3 + 432 x 4 / 16e9) = 624.96: G-C-G. With the GPU's RMM
 * at 3e-4, G-G gives 769: G-G-G. */
static void test_strict_loop(void **state) {
  (void)state;
  rd_ptable_t t = table(256, 27, 16);
  set(&t, C, 1e-2, 5e-4);
  set(&t, G, 1e-3, 6e-4);
  t.dev[F].present = 0;
  t.depth = 0;
  t.link_bytes_per_s = 16e9;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "G-C-G");
  assert_near(m.transfer_s, 688 * 4 / 16e9);
  assert_near(m.gps, 1 / (1.5e-3 + 688 * 4 / 16e9));
  assert_contains(m.explain, "strict loop");

  set(&t, G, 1e-3, 3e-4);
  m = map_ok(&t);
  assert_code(&m, "G-G-G");
  assert_near(m.gps, 1 / (1.3e-3 + 432 * 4 / 16e9));

  /* Without a link figure the transfer term is 0. */
  t.link_bytes_per_s = 0;
  m = map_ok(&t);
  assert_near(m.transfer_s, 0);
  assert_near(m.gps, 1 / 1.3e-3);
}

/* ------------------------------------------------------------------ */
/* Absent devices and entries                                           */
/* ------------------------------------------------------------------ */

static void test_absent(void **state) {
  (void)state;
  /* Only the CPU: C-C-C whatever the absent rows hold (here NaN, which
   * would be an error on a present device). */
  rd_ptable_t t = table(64, 11, 16);
  set(&t, C, 2e-3, 1e-3);
  set(&t, G, 1e-6, 1e-7);
  set(&t, F, 1e-6, 1e-7);
  t.dev[G].t_learner = NAN;
  t.dev[G].present = 0;
  t.dev[F].present = 0;
  rd_mapping_t m = map_ok(&t);
  assert_code(&m, "C-C-C");
  assert_near(m.gps, 500);

  /* A GPU with a sum tree but no learner (this build's CUDA backend):
   * the learner stays on the CPU. C-C gives 1/3e-3 = 333 GPS, C-G
   * 1/2e-3 = 500: C-G, storage on C (64 indices vs 64 x 11 + 16 x 11 on
   * G). */
  t = table(64, 11, 16);
  set(&t, C, 2e-3, 3e-3);
  set(&t, G, 0, 1e-4);
  t.dev[F].present = 0;
  m = map_ok(&t);
  assert_code(&m, "C-G-C");
  assert_near(m.traffic_words, 64);
  assert_near(m.traffic_on[G], 64 * 11 + 16 * 11);

  /* ...and when the CPU's RMM hides too (1e-3 < 2e-3), one device: C-C-C. */
  set(&t, C, 2e-3, 1e-3);
  m = map_ok(&t);
  assert_code(&m, "C-C-C");

  /* A CPU that runs neither (both elsewhere) still hosts the actors. */
  t = table(64, 11, 16);
  set(&t, C, 0, 0);
  set(&t, F, 1e-4, 1e-5);
  t.dev[G].present = 0;
  m = map_ok(&t);
  assert_code(&m, "F-F-F");
  assert_int_equal(m.n_devices, 2);
}

/* ------------------------------------------------------------------ */
/* Bad tables                                                           */
/* ------------------------------------------------------------------ */

static void test_bad_inputs(void **state) {
  (void)state;
  rd_ptable_t good = table(256, 27, 16);
  set(&good, C, 3e-3, 5e-4);
  set(&good, G, 9e-4, 1.5e-4);
  set(&good, F, 1.2e-3, 4e-5);
  map_ok(&good);

  const double bad_times[] = {NAN, INFINITY, -INFINITY, 0.0, -1e-3};
  for (size_t i = 0; i < sizeof bad_times / sizeof bad_times[0]; i++) {
    rd_ptable_t t = good;
    t.dev[G].t_learner = bad_times[i];
    assert_einval(&t, "gpu learner time");
    t = good;
    t.dev[F].t_rmm = bad_times[i];
    assert_einval(&t, "fpga rmm time");
    t = good;
    t.dev[C].t_rmm = bad_times[i];
    assert_einval(&t, "cpu rmm time");
  }
  rd_ptable_t t = good;
  t.dev[G].src_rmm = (rd_pt_source_t)9;
  assert_einval(&t, "gpu rmm: unknown source");
  t = good;
  t.batch = 0;
  assert_einval(&t, "batch 0");
  t = good;
  t.item_words = 0;
  assert_einval(&t, "item_words 0");
  t = good;
  t.n_actor = -1;
  assert_einval(&t, "n_actor");
  t.n_actor = NAN;
  assert_einval(&t, "n_actor");
  t = good;
  t.link_bytes_per_s = -5;
  assert_einval(&t, "link_bytes_per_s");
  t = good;
  t.dev[C].present = 0;
  assert_einval(&t, "cpu absent");

  /* An all-absent column. */
  t = good;
  for (int d = 0; d < RD_DEV_COUNT; d++) t.dev[d].src_learner = RD_PT_NONE;
  assert_einval(&t, "no present device has a learner time");
  t = good;
  for (int d = 0; d < RD_DEV_COUNT; d++) t.dev[d].src_rmm = RD_PT_NONE;
  assert_einval(&t, "no present device has an rmm time");
  /* Present entries only on absent devices count as none. */
  t = good;
  t.dev[C].src_learner = RD_PT_NONE;
  t.dev[G].present = 0;
  t.dev[F].present = 0;
  assert_einval(&t, "learner");

  /* NULLs. */
  rd_mapping_t m;
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_map(NULL, &m, &err), RD_EINVAL);
  assert_int_equal(rd_map(&good, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_ptable_validate(NULL, NULL), RD_EINVAL);
  assert_int_equal(rd_ptable_validate(&good, NULL), RD_OK);
}

/* Finite times whose figures are not finite: refused, never a mapping
 * with inf or 0 GPS. */
static void test_non_finite_predictions(void **state) {
  (void)state;
  rd_ptable_t good = table(256, 27, 16);
  set(&good, C, 3e-3, 5e-4);
  set(&good, G, 9e-4, 1.5e-4);
  set(&good, F, 1.2e-3, 4e-5);
  /* B / T overflows: the 5e-324 s. */
  rd_ptable_t t = good;
  t.dev[G].t_learner = 5e-324;
  assert_fails(&t, RD_ERANGE, "gpu learner: B / T = 256 / 4.94066e-324 s");
  t = good;
  t.dev[F].t_rmm = 5e-324;
  assert_fails(&t, RD_ERANGE, "fpga rmm: B / T");
  /* 1 / (T_L + T_R) with the sum overflowing: 0 GPS. */
  t = table(256, 27, 16);
  set(&t, C, 0, 0);
  set(&t, G, 1e308, 1e308);
  t.dev[F].present = 0;
  assert_fails(&t, RD_ERANGE, "learner gpu, rmm gpu: 0 GPS");
  t.depth = 0; /* the strict loop's sum */
  assert_fails(&t, RD_ERANGE, "learner gpu, rmm gpu: 0 GPS");
  /* The traffic of a huge N_actor. */
  t = good;
  t.n_actor = 1e307;
  assert_fails(&t, RD_ERANGE, "words/step of traffic is not a finite prediction");
  /* Large but finite figures map, every figure finite. */
  t = good;
  t.n_actor = 1e300;
  t.dev[G].t_learner = 1e-9;
  rd_mapping_t m = map_ok(&t);
  assert_true(isfinite(m.gps) && m.gps > 0 && isfinite(m.tp_learner) && isfinite(m.tp_rmm) &&
              isfinite(m.traffic_words) && isfinite(m.transfer_s));
}

/* ------------------------------------------------------------------ */
/* Names and text                                                       */
/* ------------------------------------------------------------------ */

static void test_names(void **state) {
  (void)state;
  assert_string_equal(rd_devkind_name(RD_DEV_CPU), "cpu");
  assert_string_equal(rd_devkind_name(RD_DEV_GPU), "gpu");
  assert_string_equal(rd_devkind_name(RD_DEV_FPGA), "fpga");
  assert_string_equal(rd_devkind_name((rd_devkind_t)7), "invalid");
  assert_int_equal(rd_devkind_letter(RD_DEV_CPU), 'C');
  assert_int_equal(rd_devkind_letter(RD_DEV_GPU), 'G');
  assert_int_equal(rd_devkind_letter(RD_DEV_FPGA), 'F');
  assert_int_equal(rd_devkind_letter((rd_devkind_t)-1), '?');
  rd_devkind_t d;
  assert_int_equal(rd_devkind_parse("FPGA", &d, NULL), RD_OK);
  assert_int_equal(d, RD_DEV_FPGA);
  assert_int_equal(rd_devkind_parse("g", &d, NULL), RD_OK);
  assert_int_equal(d, RD_DEV_GPU);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_devkind_parse("tpu", &d, &err), RD_EINVAL);
  assert_contains(err.msg, "tpu");
  assert_int_equal(d, RD_DEV_GPU); /* unchanged */
  assert_string_equal(rd_pt_source_name(RD_PT_NONE), "-");
  assert_string_equal(rd_pt_source_name(RD_PT_MEASURED), "measured");
  assert_string_equal(rd_pt_source_name(RD_PT_CACHED), "cached");
  assert_string_equal(rd_pt_source_name(RD_PT_MODEL), "model");
  assert_string_equal(rd_pt_source_name(RD_PT_ASSUMED), "assumed");
  assert_string_equal(rd_pt_source_name((rd_pt_source_t)9), "invalid");
  assert_string_equal(rd_bottleneck_name(RD_BOTTLENECK_LEARNER), "learner");
  assert_string_equal(rd_bottleneck_name(RD_BOTTLENECK_RMM), "rmm");
}

static void test_format(void **state) {
  (void)state;
  rd_mapping_t m;
  memset(&m, 0, sizeof m);
  m.learner = RD_DEV_GPU;
  m.rmm = RD_DEV_FPGA;
  m.storage = RD_DEV_CPU;
  char buf[RD_MAPPING_CODE_MAX];
  assert_int_equal(rd_mapping_format(&m, buf, sizeof buf), RD_OK);
  assert_string_equal(buf, "G-F-C");
  assert_int_equal(rd_mapping_format(&m, buf, 5), RD_ETOOBIG);
  assert_string_equal(buf, "");
  m.rmm = (rd_devkind_t)5;
  assert_int_equal(rd_mapping_format(&m, buf, sizeof buf), RD_EINVAL);
  assert_string_equal(buf, "");

  /* The table as text. */
  rd_ptable_t t = table(256, 27, 16);
  set(&t, C, 3e-3, 5e-4);
  t.dev[C].src_learner = RD_PT_MEASURED;
  t.dev[C].src_rmm = RD_PT_CACHED;
  t.dev[G].present = 0;
  set(&t, F, 0, 4e-5);
  t.dev[F].src_rmm = RD_PT_MODEL;
  char text[1024];
  size_t len = 0;
  assert_int_equal(rd_ptable_format(&t, text, sizeof text, &len), RD_OK);
  assert_int_equal(len, strlen(text));
  print_message("%s", text);
  assert_contains(text, "device  learner s   items/s   from      rmm s       items/s   from\n");
  assert_contains(text, "cpu     3.000e-03   8.53e+04  measured  5.000e-04   5.12e+05  cached\n");
  assert_contains(text, "gpu     (absent)\n");
  assert_contains(text, "fpga    -           -         -         4.000e-05   6.4e+06   model\n");
  assert_contains(text, "B=256 E=27 words N_actor=16 items/step D=50 link=off\n");

  /* Too small: RD_ETOOBIG, the needed length, a truncated text. */
  char small[40];
  size_t need = 0;
  assert_int_equal(rd_ptable_format(&t, small, sizeof small, &need), RD_ETOOBIG);
  assert_int_equal(need, len);
  assert_int_equal(strlen(small), sizeof small - 1);
  char *exact = test_malloc(need + 1);
  assert_int_equal(rd_ptable_format(&t, exact, need + 1, NULL), RD_OK);
  assert_string_equal(exact, text);
  test_free(exact);
  assert_int_equal(rd_ptable_format(&t, text, 0, NULL), RD_EINVAL);
}

/* The explanation of Hopper B=256 says every step's reason. */
static void test_explain(void **state) {
  (void)state;
  rd_ptable_t t = table(256, 27, 16);
  set(&t, C, 3e-3, 5e-4);
  set(&t, G, 9e-4, 1.5e-4);
  set(&t, F, 1.2e-3, 4e-5);
  rd_mapping_t m = map_ok(&t);
  print_message("%s\n", m.explain);
  assert_contains(m.explain, "learner on gpu (2.84e+05 items/s, best)");
  assert_contains(m.explain, "rmm on cpu (5.12e+05 items/s); fpga's 6.4e+06 >= the learner's "
                             "2.84e+05, so gpu is pruned");
  assert_contains(m.explain, "fpga's faster rmm (6.4e+06) gives the same GPS (within 2%) on 3 "
                             "devices vs 2");
  assert_contains(m.explain, "storage on gpu: 688 words/step (2.69 KiB) vs 6912 (27 KiB) on cpu");
  assert_contains(m.explain, "1111 GPS predicted, learner-bound (relaxed pipeline, D=50");
  assert_true(strlen(m.explain) < RD_MAPPING_EXPLAIN_MAX);

  /* Hopper B=16384's: G-F-G, and why not C. */
  t = table(16384, 27, 16);
  set(&t, C, 2e-1, 4e-2);
  set(&t, G, 2.5e-2, 1e-2);
  set(&t, F, 8e-2, 2e-3);
  m = map_ok(&t);
  print_message("%s\n", m.explain);
  assert_contains(m.explain, "rmm on fpga (8.19e+06 items/s, best); fpga's 8.19e+06 >= the "
                             "learner's 6.55e+05, so gpu is pruned");

  /* Every learner ties (C 1.01e-3, G 1e-3, F 1.015e-3: 990, 1000 and 985
   * GPS at best), and every RMM hides behind them: C-C-C on one device. */
  t = table(32, 2, 16);
  set(&t, C, 1.01e-3, 1e-4);
  set(&t, G, 1e-3, 5e-5);
  set(&t, F, 1.015e-3, 2e-5);
  m = map_ok(&t);
  print_message("%s\n", m.explain);
  assert_code(&m, "C-C-C");
  assert_near(m.gps, 1 / 1.01e-3);
  assert_contains(m.explain, "learner on cpu (3.17e+04 items/s; gpu's 3.2e+04 ties within 2%, "
                             "and its best mapping gives the same GPS (within 2%) on 2 devices "
                             "vs 1)");
  assert_contains(m.explain, "fpga's faster rmm (1.6e+06) gives the same GPS (within 2%) on 2 "
                             "devices vs 1");
}

/* mapper.h "CPU sharing": learner and RMM both on the CPU time-share the
 * cores only when the learner's threads leave none for the RMM. */
static void test_cpu_sharing(void **state) {
  (void)state;
  rd_ptable_t t = table(64, 11, 16);
  t.dev[G].present = 0;
  t.dev[F].present = 0;
  set(&t, C, 1e-3, 0.5e-3);
  rd_mapping_t m = map_ok(&t); /* rule off (cpu_cores 0): 1/max */
  assert_true(fabs(m.gps - 1000.0) < 1e-6);
  t.cpu_cores = 2;
  t.cpu_learner_threads = 1; /* a core is free for the RMM */
  m = map_ok(&t);
  assert_true(fabs(m.gps - 1000.0) < 1e-6);
  t.cpu_learner_threads = 2; /* (2 * 1 + 0.5) / 2 = 1.25 ms per step */
  m = map_ok(&t);
  assert_true(fabs(m.gps - 800.0) < 1e-6);
  assert_non_null(strstr(m.explain, "share the cpu"));
  t.cpu_cores = 1;
  t.cpu_learner_threads = 1; /* one core: 1/(T_L + T_R), the GPU-sharing form */
  m = map_ok(&t);
  assert_true(fabs(m.gps - 1.0 / 1.5e-3) < 1e-6);
  t.depth = 0; /* the strict loop already sums them */
  m = map_ok(&t);
  assert_true(fabs(m.gps - 1.0 / 1.5e-3) < 1e-6);
}

/* mapper.h "Pipeline costs": counted for the all-CPU pipeline only. */
static void test_pipeline_costs(void **state) {
  (void)state;
  rd_ptable_t t = table(64, 11, 16);
  t.dev[F].present = 0;
  set(&t, C, 1e-3, 0.5e-3);
  set(&t, G, 10e-3, 10e-3); /* slower everywhere: the mapping stays C-C-C */
  t.cpu_gather_s = 0.1e-3;
  t.cpu_handoff_s = 0.2e-3;
  t.cpu_pass_s = 0.05e-3;
  rd_mapping_t m = map_ok(&t); /* D = 16: 1 / max(1 + 0.05, 0.5 + 0.1) ms */
  assert_int_equal(m.learner, C);
  assert_int_equal(m.storage, C);
  assert_true(fabs(m.gps - 1.0 / 1.05e-3) < 1e-6);
  t.cpu_gather_s = 0.7e-3; /* now the sampler's side is the slower one */
  m = map_ok(&t);
  assert_true(fabs(m.gps - 1.0 / 1.2e-3) < 1e-6);
  t.depth = 0; /* strict: everything adds up */
  m = map_ok(&t);
  assert_true(fabs(m.gps - 1.0 / (1e-3 + 0.5e-3 + 0.7e-3 + 0.2e-3)) < 1e-6);
  /* A mapping that is not all-CPU keeps the paper's formula. */
  set(&t, G, 0.1e-3, 10e-3);
  t.depth = 16;
  t.n_actor = 0; /* storage follows the learner to the GPU */
  m = map_ok(&t);
  assert_int_equal(m.learner, G);
  assert_true(fabs(m.gps - 1.0 / 0.5e-3) < 1e-6);
  /* Bad values are refused. */
  t.cpu_pass_s = -1;
  rd_error_t err;
  assert_int_equal(rd_map(&t, &m, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "cpu_pass_s"));
  t.cpu_pass_s = NAN;
  assert_int_equal(rd_map(&t, &m, &err), RD_EINVAL);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_pipeline_costs),
         cmocka_unit_test(test_table5_cartpole_fff),
         cmocka_unit_test(test_table5_hopper),
         cmocka_unit_test(test_table5_pong),
         cmocka_unit_test(test_prune_by_cpu),
         cmocka_unit_test(test_prune_beats_tie),
         cmocka_unit_test(test_no_prune_keeps_gpu_rmm),
         cmocka_unit_test(test_tie_fewer_devices),
         cmocka_unit_test(test_tie_less_traffic),
         cmocka_unit_test(test_storage_rules),
         cmocka_unit_test(test_strict_loop),
         cmocka_unit_test(test_absent),
         cmocka_unit_test(test_bad_inputs),
         cmocka_unit_test(test_non_finite_predictions),
         cmocka_unit_test(test_names),
         cmocka_unit_test(test_format),
         cmocka_unit_test(test_explain),
         cmocka_unit_test(test_cpu_sharing))
