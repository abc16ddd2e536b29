/* test_fpga_model.c - the FPGA analytical performance model
 * (backends/fpga/model.h) against hand-computed cases: part files (the
 * shipped ones and every way one can be malformed), the sum tree's levels,
 * fixed-point widths, bank parallelism S and cycles, the learner's
 * proportional DSP allocation and DP/PI search, resource limits on every
 * shipped part, monotonicity in the batch, the errors, and where the model
 * lands against papers/001 Table VI; the update ports of the replicated
 * tree levels (registers, banked SRAM, or one port and a serial update).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fpga_part.h"
#include "model.h"
#include "rdt_main.h"

#ifndef RD_FPGA_PARTS_DIR
#error "meson passes RD_FPGA_PARTS_DIR, the source tree's backends/fpga/parts"
#endif

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

static void mlp(rd_nn_spec_t *s, uint32_t n_sizes, const uint32_t *sizes) {
  memset(s, 0, sizeof *s);
  s->n_layers = n_sizes - 1;
  for (uint32_t i = 0; i < n_sizes; i++) s->sizes[i] = sizes[i];
  for (uint32_t i = 0; i + 1 < n_sizes; i++) s->act[i] = RD_NN_RELU;
}

static void load_part(const char *name, rd_fpga_part_t *p) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_fpga_part_find(name, RD_FPGA_PARTS_DIR, p, &err);
  if (rc != RD_OK) fail_msg("rd_fpga_part_find(%s): %s: %s", name, rd_err_name(rc), err.msg);
}

/* A part built in code: slrs SLRs of dsp DSPs each, everything else
 * plentiful, so DSPs are the only limit a test meets. */
static void tiny_part(rd_fpga_part_t *p, uint32_t slrs, uint64_t dsp) {
  test_fpga_part(p, "tiny", slrs, dsp, 100000000, 100000000, 100000, 0, 100);
}

static void rmm_ok(const rd_fpga_part_t *p, const rd_fpga_workload_t *w, rd_fpga_rmm_est_t *e) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_fpga_model_rmm(p, w, e, &err);
  if (rc != RD_OK) fail_msg("rd_fpga_model_rmm: %s: %s", rd_err_name(rc), err.msg);
}

static void learner_ok(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                       rd_fpga_learner_est_t *e) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_fpga_model_learner(p, w, e, &err);
  if (rc != RD_OK) fail_msg("rd_fpga_model_learner: %s: %s", rd_err_name(rc), err.msg);
}

static const rd_fpga_tu_t *tu_by_label(const rd_fpga_learner_est_t *e, const char *label) {
  for (uint32_t i = 0; i < e->n_tus; i++)
    if (strcmp(e->tu[i].label, label) == 0) return &e->tu[i];
  fail_msg("no TU %s", label);
  return NULL;
}

static int res_within(const rd_fpga_res_t *u, const rd_fpga_res_t *a) {
  return u->dsp <= a->dsp && u->lut <= a->lut && u->ff <= a->ff && u->bram36 <= a->bram36 &&
         u->uram <= a->uram;
}

/* A scratch directory for part files, removed by rm_tmpdir. */
static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_fpga_model.XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
}

static void write_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void remove_file(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  unlink(path);
}

static void rm_tmpdir(const char **names, size_t n) {
  for (size_t i = 0; i < n; i++) remove_file(names[i]);
  rmdir(tmpdir);
}

/* A valid part file; variants below change one line. */
static const char *GOOD =
    "# a comment\n"
    "name = good\n"
    "slrs = 2   # trailing comment\n"
    "dsp = 200\n"
    "lut = 1000\n"
    "ff = 2000\n"
    "bram36 = 10\n"
    "uram = 4\n"
    "\n"
    "clock_mhz = 250\n";

/* ------------------------------------------------------------------ */
/* Part files                                                           */
/* ------------------------------------------------------------------ */

/* The shipped parts: DS962 totals split evenly over the SLRs. */
static void test_parts_shipped(void **state) {
  (void)state;
  rd_fpga_part_t parts[8];
  size_t n = 0;
  rd_error_t err;
  assert_int_equal(rd_fpga_parts_load(RD_FPGA_PARTS_DIR, parts, 8, &n, &err), RD_OK);
  assert_int_equal(n, 3); /* sorted by file name */
  assert_string_equal(parts[0].name, "u200");
  assert_string_equal(parts[1].name, "u250");
  assert_string_equal(parts[2].name, "u280");

  /* U200: 6840 DSP, 2160 BRAM36, 960 URAM, 1,182,240 LUT over 3 SLRs. */
  const rd_fpga_part_t *u200 = &parts[0];
  assert_int_equal(u200->slrs, 3);
  assert_int_equal(u200->per_slr.dsp, 2280);
  assert_int_equal(u200->per_slr.bram36, 720);
  assert_int_equal(u200->per_slr.uram, 320);
  assert_int_equal(u200->per_slr.lut, 394080);
  assert_int_equal(u200->per_slr.ff, 788160);
  assert_int_equal(u200->clock_mhz, 300);
  assert_int_equal(u200->usable_pct, 90);
  assert_int_equal(u200->dsp_alu_bits, 48);
  assert_int_equal(u200->hbm_gb, 0);
  assert_int_equal(u200->ddr_banks, 4);
  /* U250: 12288 DSP, 2688 BRAM36, 1280 URAM, 1,728K LUT over 4 SLRs. */
  const rd_fpga_part_t *u250 = &parts[1];
  assert_int_equal(u250->slrs, 4);
  assert_int_equal(u250->per_slr.dsp, 3072);
  assert_int_equal(u250->per_slr.bram36, 672);
  assert_int_equal(u250->per_slr.uram, 320);
  assert_int_equal(u250->per_slr.lut, 432000);
  /* U280: 9024 DSP, 2016 BRAM36, 960 URAM, 1,303,680 LUT over 3 SLRs; HBM. */
  const rd_fpga_part_t *u280 = &parts[2];
  assert_int_equal(u280->slrs, 3);
  assert_int_equal(u280->per_slr.dsp, 3008);
  assert_int_equal(u280->per_slr.bram36, 672);
  assert_int_equal(u280->per_slr.uram, 320);
  assert_int_equal(u280->per_slr.lut, 434560);
  assert_int_equal(u280->hbm_gb, 8);
  assert_int_equal(u280->hbm_channels, 32);
  for (size_t i = 0; i < n; i++) assert_int_equal(rd_fpga_part_validate(&parts[i], &err), RD_OK);

  /* One file, and find by name. */
  assert_int_equal(rd_fpga_parts_load(RD_FPGA_PARTS_DIR "/u250.part", parts, 8, &n, &err), RD_OK);
  assert_int_equal(n, 1);
  assert_string_equal(parts[0].name, "u250");
  rd_fpga_part_t p;
  assert_int_equal(rd_fpga_part_find("u280", RD_FPGA_PARTS_DIR, &p, &err), RD_OK);
  assert_int_equal(p.per_slr.dsp, 3008);

  /* The install location the daemon will search. */
  const char *def = rd_fpga_parts_default_dir();
  assert_string_equal(def, RD_FPGA_PARTS_DEFAULT_DIR);
  size_t dl = strlen(def), sl = strlen("replayd/fpga-parts");
  assert_true(dl > sl && strcmp(def + dl - sl, "replayd/fpga-parts") == 0);
}

static void test_part_find_errors(void **state) {
  (void)state;
  rd_fpga_part_t p;
  memset(&p, 0xAB, sizeof p);
  rd_fpga_part_t before = p;
  rd_error_t err;
  assert_int_equal(rd_fpga_part_find("u55c", RD_FPGA_PARTS_DIR, &p, &err), RD_ENOTFOUND);
  assert_non_null(strstr(err.msg, "u55c"));
  assert_non_null(strstr(err.msg, "known: u200, u250, u280"));
  assert_int_equal(rd_fpga_part_find("../u200", RD_FPGA_PARTS_DIR, &p, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_part_find("U200", RD_FPGA_PARTS_DIR, &p, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_part_find("", RD_FPGA_PARTS_DIR, &p, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_part_find("u200", "/nonexistent-dir", &p, &err), RD_ENOTFOUND);
  assert_memory_equal(&p, &before, sizeof p);

  size_t n = 7;
  rd_fpga_part_t parts[2];
  assert_int_equal(rd_fpga_parts_load("/nonexistent-dir", parts, 2, &n, &err), RD_EINVAL);
  assert_int_equal(rd_fpga_parts_load(RD_FPGA_PARTS_DIR, parts, 2, &n, &err), RD_ETOOBIG);
  assert_int_equal(rd_fpga_parts_load(RD_FPGA_PARTS_DIR, parts, 0, &n, &err), RD_ETOOBIG);
  assert_int_equal(n, 7);

  /* Parts built in code are checked too. */
  tiny_part(&p, 2, 100);
  assert_int_equal(rd_fpga_part_validate(&p, &err), RD_OK);
  p.slrs = 0;
  assert_int_equal(rd_fpga_part_validate(&p, &err), RD_EINVAL);
  tiny_part(&p, 2, 0);
  assert_int_equal(rd_fpga_part_validate(&p, &err), RD_EINVAL);
  tiny_part(&p, 2, 100);
  p.usable_pct = 0;
  assert_int_equal(rd_fpga_part_validate(&p, &err), RD_EINVAL);
  tiny_part(&p, 2, 100);
  p.per_slr.bram36 = 0;
  assert_int_equal(rd_fpga_part_validate(&p, &err), RD_EINVAL);
}

typedef struct {
  const char *text; /* the file */
  const char *msg;  /* a piece of the expected message */
} bad_part_t;

/* Each malformed file is RD_EINVAL naming the file, and the line where
 * there is one; the caller's array and count are untouched. */
static void test_parts_malformed(void **state) {
  (void)state;
  static const bad_part_t BAD[] = {
      {"name = bad\nslrs = 2\nbogus = 1\n", "bad.part:3: unknown key 'bogus'"},
      {"name = bad\nslrs 2\n", "bad.part:2: expected 'key = value'"},
      {"name = bad\nslrs = two\n", "bad.part:2: slrs = 'two' is not a whole number"},
      {"name = bad\nslrs = -2\n", "bad.part:2: slrs = '-2' is not a whole number"},
      {"name = bad\nslrs = 2x\n", "bad.part:2: slrs = '2x' is not a whole number"},
      {"name = bad\nslrs = 9\n", "bad.part:2: slrs = 9 is outside [1, 8]"},
      {"name = bad\nslrs = 2\nslrs = 3\n", "bad.part:3: key 'slrs' given twice"},
      {"name = bad\n = 2\n", "bad.part:2: missing key before '='"},
      {"name = bad\nslrs =\n", "bad.part:2: missing value after '='"},
      {"name = Bad!\n", "bad.part:1: name 'Bad!' must be lower-case"},
      {"name = bad\nslrs = 2\ndsp = 200\nlut = 1000\nff = 2000\nbram36 = 10\nuram = 4\n",
       "bad.part: missing key 'clock_mhz'"},
      {"name = bad\nslrs = 3\ndsp = 200\nlut = 1200\nff = 2400\nbram36 = 12\nuram = 3\n"
       "clock_mhz = 300\n",
       "bad.part: dsp = 200 does not divide evenly over 3 SLRs"},
      {"name = other\nslrs = 2\ndsp = 200\nlut = 1000\nff = 2000\nbram36 = 10\nuram = 4\n"
       "clock_mhz = 300\n",
       "bad.part: name 'other' does not match the file name"},
      {"name = bad\nslrs = 2\ndsp = 200\nlut = 1000\nff = 2000\nbram36 = 0\nuram = 0\n"
       "clock_mhz = 300\n",
       "bad.part: part bad: an SLR needs block RAM or UltraRAM"},
  };
  make_tmpdir();
  const char *names[] = {"bad.part", "good.part", "long.part"};
  rd_fpga_part_t parts[4];
  memset(parts, 0xAB, sizeof parts);
  rd_fpga_part_t before[4];
  memcpy(before, parts, sizeof parts);
  char path[256];
  snprintf(path, sizeof path, "%s/bad.part", tmpdir);
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    write_file("bad.part", BAD[i].text);
    size_t n = 99;
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_fpga_parts_load(path, parts, 4, &n, &err);
    if (rc != RD_EINVAL || strstr(err.msg, BAD[i].msg) == NULL)
      fail_msg("case %zu: got %s '%s', want RD_EINVAL '%s'", i, rd_err_name(rc), err.msg,
               BAD[i].msg);
    assert_int_equal(n, 99);
    assert_memory_equal(parts, before, sizeof parts);
  }

  /* A line longer than the reader's buffer. */
  char longline[700];
  memset(longline, 'x', sizeof longline);
  memcpy(longline, "device = ", 9);
  longline[sizeof longline - 2] = '\n';
  longline[sizeof longline - 1] = '\0';
  write_file("long.part", longline);
  snprintf(path, sizeof path, "%s/long.part", tmpdir);
  size_t n = 0;
  rd_error_t err;
  assert_int_equal(rd_fpga_parts_load(path, parts, 4, &n, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "long.part:1: line longer than"));
  remove_file("long.part");

  /* In a directory, one bad file fails the whole load (named), and the
   * good one is not half-delivered. */
  write_file("good.part", GOOD);
  assert_int_equal(rd_fpga_parts_load(tmpdir, parts, 4, &n, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "bad.part"));
  assert_memory_equal(parts, before, sizeof parts);
  remove_file("bad.part");
  assert_int_equal(rd_fpga_parts_load(tmpdir, parts, 4, &n, &err), RD_OK);
  assert_int_equal(n, 1);
  assert_string_equal(parts[0].name, "good");
  assert_int_equal(parts[0].per_slr.dsp, 100);
  assert_int_equal(parts[0].per_slr.uram, 2);
  assert_int_equal(parts[0].usable_pct, 100); /* defaults of optional keys */
  assert_int_equal(parts[0].dsp_alu_bits, 48);
  assert_int_equal(parts[0].clock_mhz, 250);

  /* A directory without part files. */
  remove_file("good.part");
  assert_int_equal(rd_fpga_parts_load(tmpdir, parts, 4, &n, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "no *.part files"));
  rm_tmpdir(names, 3);
}

/* ------------------------------------------------------------------ */
/* RMM: the sum tree                                                    */
/* ------------------------------------------------------------------ */

/* papers/001 §IV-C4: W_b = W_parent - log2 K from the root's width. */
static void test_rmm_widths(void **state) {
  (void)state;
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_fpga_rmm_est_t e;

  /* K = 16, N = 2^20 = 16^5: H = 5. Default leaf width: the CPU tree's
   * largest leaf for N is (2^63 - 1) / 2^20 = 2^43 - 1, 43 bits; each
   * level up adds log2 16 = 4 bits: 43, 47, 51, 55, 59 and the root 63,
   * the CPU tree's own 63-bit bound. */
  rd_fpga_workload_default(&w);
  rmm_ok(&u200, &w, &e);
  assert_int_equal(e.levels, 5);
  assert_int_equal(e.leaf_bits, 43);
  static const uint32_t W16[] = {63, 59, 55, 51, 47, 43};
  static const uint64_t N16[] = {1, 16, 256, 4096, 65536, 1048576};
  for (uint32_t h = 0; h <= 5; h++) {
    assert_int_equal(e.width[h], W16[h]);
    assert_int_equal(e.nodes[h], N16[h]);
  }

  /* K = 4, N = 1000, 16-bit leaves: 4^5 = 1024 >= 1000 > 4^4, H = 5; the
   * root bound is that of the full 1024-leaf tree, 16 + 5 * 2 = 26 bits:
   * 26, 24, 22, 20, 18, 16. Nodes per level: ceil(1000 / 4^(5-h)) =
   * 1, 4, 16, 63, 250, 1000. */
  w.fanout = 4;
  w.capacity = 1000;
  w.leaf_bits = 16;
  rmm_ok(&u200, &w, &e);
  static const uint32_t W4[] = {26, 24, 22, 20, 18, 16};
  static const uint64_t N4[] = {1, 4, 16, 63, 250, 1000};
  assert_int_equal(e.levels, 5);
  for (uint32_t h = 0; h <= 5; h++) {
    assert_int_equal(e.width[h], W4[h]);
    assert_int_equal(e.nodes[h], N4[h]);
  }

  /* K = 64, N = 2: one level; max leaf (2^63 - 1) / 2 has 62 bits, the
   * root 62 + 6 = 68 bits (wider than a DSP48: two DSPs per adder, but
   * only the leaf level has stages). */
  w.fanout = 64;
  w.capacity = 2;
  w.leaf_bits = 0;
  rmm_ok(&u200, &w, &e);
  assert_int_equal(e.levels, 1);
  assert_int_equal(e.width[1], 62);
  assert_int_equal(e.width[0], 68);
  assert_int_equal(e.sample_fill_cycles, 0);
  /* B = 32 > H = 1: S = pow2floor(32) = 32, but S <= N = 2. */
  assert_int_equal(e.s, 2);
  assert_string_equal(e.limit, "capacity");
  /* 2 pipelines x (sampler + updater) x ceil(62 / 48) = 2 DSPs = 8. */
  assert_int_equal(e.used.dsp, 8);
}

/* papers/001 §VI-A2: sampling B/S x K cycles, update B/S, plus the fill of
 * the H-stage pipeline (thesis 004 Eqs 4.2-4.3). */
static void test_rmm_cycles(void **state) {
  (void)state;
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_fpga_rmm_est_t e;

  /* B = 32, K = 16, N = 2^20 (H = 5): S = pow2floor(32 / 5 = 6) = 4, so
   * 8 items per pipeline: sample 8 x 16 = 128 + fill (5 - 1) x 16 = 64 =
   * 192 cycles; update 8 + 4 = 12. At 300 MHz: 640 ns and 40 ns. */
  rd_fpga_workload_default(&w);
  rmm_ok(&u200, &w, &e);
  assert_int_equal(e.s_batch, 4);
  assert_int_equal(e.s, 4);
  assert_string_equal(e.limit, "batch");
  assert_int_equal(e.sample_cycles, 192);
  assert_int_equal(e.sample_fill_cycles, 64);
  assert_int_equal(e.update_cycles, 12);
  assert_int_equal(e.update_fill_cycles, 4);
  assert_int_equal(e.clock_mhz, 300);
  assert_true(e.sample_s > 639e-9 && e.sample_s < 641e-9);
  assert_true(e.update_s > 39e-9 && e.update_s < 41e-9);
  /* Resources, by hand: per pipeline one sampler and one updater adder per
   * level, widths 59, 55, 51 need two DSP48s (> 48 bits), 47 and 43 one:
   * 2 x (2 + 2 + 2 + 1 + 1) = 16 DSPs, x 4 pipelines = 64. LUTs: 4 x 2 x 5
   * stages x 142 = 5680 logic, plus LUTRAM for the banks of <= 64 words:
   * level 2 (256 nodes, 64 per pipeline, 55 bits) 4 x 2 x 55 = 440, and
   * level 1 (16 words, 59 bits), replicated, with its update ports (it
   * takes 4 deltas a cycle). With one port per replica it would be 4 x 2 x
   * 59 = 472 LUTs of LUTRAM. Registers: 4 x 16 x 59 = 3776 FFs, LUTs (2 x
   * 4 - 1) x 16 x 59 = 6608 adders + 4 x 16 decoders (4 address bits, one
   * LUT each) + 4 lanes x 59 bits x ceil(15 / 3) = 1180 mux = 7852. Banked:
   * 4 x 4 = 16 sub-banks x 2 x 59 = 1888 LUTs of LUTRAM, and each lane's 3
   * adders, 4 x 3 x 59 = 708 LUTs and 708 FFs. Banked costs less of both:
   * 5680 + 440 + 1888 + 708 LUTs, 4 x 2 x 5 x 206 + 708 FFs. */
  assert_int_equal(e.used.dsp, 64);
  assert_int_equal(e.used.lut, 5680 + 440 + 1888 + 708);
  assert_int_equal(e.used.ff, 4 * 2 * 5 * RD_FPGA_RMM_FF_PER_STAGE + 708);
  assert_int_equal(e.port[1], RD_FPGA_PORT_BANKED);
  assert_int_equal(e.port[2], RD_FPGA_PORT_NONE);
  assert_int_equal(e.update_serial, 0);
  assert_null(e.port_limit);
  assert_int_equal(e.used_one_port.lut, 5680 + 440 + 472);
  assert_int_equal(e.used_one_port.ff, 4 * 2 * 5 * RD_FPGA_RMM_FF_PER_STAGE);
  assert_int_equal(e.used_one_port.dsp, 64);
  /* J = 1 (K^1 = 16 >= S = 4): level 1 is replicated (the root's choice
   * among its 16 children needs all of them in every pipeline; replicated
   * or split, its <= 64-word banks cost the same LUTRAM), levels 2..5 are
   * split: 16 / 4 = 4 level-1 nodes per pipeline, 64 words of level 2. */
  assert_int_equal(e.shared_levels, 1);
  assert_int_equal(e.bank_words[1], 16);
  assert_int_equal(e.bank_words[2], 64);
  assert_int_equal(e.bank_words[5], (1u << 20) / 4);
  /* The one SLR's usable share: 90% of 2280 DSPs. */
  assert_int_equal(e.avail.dsp, 2052);
  assert_int_equal(e.avail.bram36, 648);

  /* B <= H: one pipeline. B = 4: 4 x 16 + 64 = 128; update 4 + 4 = 8. */
  w.batch = 4;
  rmm_ok(&u200, &w, &e);
  assert_int_equal(e.s, 1);
  assert_int_equal(e.sample_cycles, 128);
  assert_int_equal(e.update_cycles, 8);

  /* A fixed design, S = 1, for B = 32: the paper's 32 x 16 = 512 cycles
   * of sampling plus the 64 of fill; update 32 + 4. */
  w.batch = 32;
  w.rmm_s = 1;
  rmm_ok(&u200, &w, &e);
  assert_int_equal(e.s, 1);
  assert_string_equal(e.limit, "fixed");
  assert_int_equal(e.sample_cycles - e.sample_fill_cycles, 32 * 16);
  assert_int_equal(e.sample_cycles, 576);
  assert_int_equal(e.update_cycles, 36);

  /* The workload's clock wins over the part's. */
  w.clock_mhz = 200;
  rmm_ok(&u200, &w, &e);
  assert_int_equal(e.clock_mhz, 200);
  assert_true(e.sample_s > 2.87e-6 && e.sample_s < 2.89e-6); /* 576 / 200 MHz */
}

/* S grows with B (B/H rule) until one SLR is full, never beyond. The
 * setting is papers/001's (K = 2, N = 2^20, U200) with 16-bit leaves,
 * the width its Table VI's 4.5 MB of tree SRAM implies (see
 * test_table_vi). H = 20: B = 32 -> S = pow2floor(1.6) = 1; B = 256 ->
 * pow2floor(12.8) = 8; B = 1024 -> 32; B = 2048 -> 64 wanted, but widths
 * 16..35 take one DSP48 per stage, 2 x 20 = 40 DSPs per pipeline, and 64 x
 * 40 = 2560 > 2052 (90% of 2280): S = 32, DSP-bound. */
static void test_rmm_s_growth(void **state) {
  (void)state;
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  w.fanout = 2;
  w.leaf_bits = 16;
  static const struct { uint32_t batch, s_batch, s; const char *limit; } CASES[] = {
      {1, 1, 1, "batch"},      {20, 1, 1, "batch"},     {32, 1, 1, "batch"},
      {40, 2, 2, "batch"},     {256, 8, 8, "batch"},    {1024, 32, 32, "batch"},
      {2048, 64, 32, "dsp"},   {16384, 512, 32, "dsp"}, {65536, 2048, 32, "dsp"},
  };
  rd_fpga_rmm_est_t e;
  uint32_t last_s = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    w.batch = CASES[i].batch;
    rmm_ok(&u200, &w, &e);
    assert_int_equal(e.levels, 20);
    assert_int_equal(e.s_batch, CASES[i].s_batch);
    assert_int_equal(e.s, CASES[i].s);
    assert_string_equal(e.limit, CASES[i].limit);
    assert_int_equal(e.used.dsp, 40 * e.s);
    assert_true(res_within(&e.used, &e.avail));
    assert_true(e.s >= last_s);
    last_s = e.s;
  }
  /* The subtrees' roots and the levels above them are in every pipeline:
   * S = 32 = 2^5, levels 1..5 are replicated (papers/001 §IV-C4, the first
   * log_K S levels). Their update ports are registers: level h has
   * w = 2^h words of W = 36 - h bits; per level 32 w W FFs and (2 x 32 -
   * 1) w W + 32 w + 32 W ceil((w - 1) / 3) LUTs (adders, decoders, read
   * muxes): 5594, 9784, 20056, 37888, 74432 = 147,754 LUTs and 32 x (70 +
   * 136 + 264 + 512 + 992) = 63,168 FFs. (Banked, level 1 alone would take
   * 1024 sub-banks x 2 x 35 LUTs of LUTRAM.) The rest: 181,760 LUTs of
   * stage logic and 10,560 of LUTRAM for the private levels 6..11 (2..64
   * words of 30..25 bits: 32 x 2 x 165); 263,680 FFs. 340,074 of the
   * 354,672 usable LUTs: S = 32 keeps its ports, just. */
  assert_int_equal(e.shared_levels, 5);
  for (uint32_t h = 1; h <= 5; h++) assert_int_equal(e.port[h], RD_FPGA_PORT_REGS);
  assert_int_equal(e.port[6], RD_FPGA_PORT_NONE);
  assert_int_equal(e.used.lut, 181760 + 10560 + 147754);
  assert_int_equal(e.used.ff, 263680 + 63168);
  assert_int_equal(e.used_one_port.lut, 181760 + 10560 + 10560); /* replicas in LUTRAM */
  assert_int_equal(e.update_serial, 0);
  assert_int_equal(e.update_cycles, 65536 / 32 + 19);

  /* The U250's and U280's SLRs have the DSPs for S = 64 (90% of 3072 is
   * 2764, of 3008 is 2707; 64 x 40 = 2560) but not the LUTs: 64 x 40
   * stages x 142 = 363,520 of logic plus 45,312 of LUTRAM for the banks
   * of <= 64 words (levels 1..6 replicated, 2..64 nodes of 35..30 bits;
   * levels 7..12 split, 2..64 nodes per pipeline of 29..24 bits; 2 LUTs
   * per bit and bank: 64 x 2 x (165 + 189)) = 408,832 > 388,800 (U250)
   * and 391,104 (U280). */
  static const char *BIGGER[] = {"u250", "u280"};
  for (size_t i = 0; i < 2; i++) {
    rd_fpga_part_t p;
    load_part(BIGGER[i], &p);
    w.batch = 2048;
    rmm_ok(&p, &w, &e);
    assert_int_equal(e.s_batch, 64);
    assert_int_equal(e.s, 32);
    assert_string_equal(e.limit, "lut");
    assert_true(res_within(&e.used, &e.avail));
  }
}

/* A one-SLR part with the given DSPs, LUTs, FFs and BRAM36, no URAM, all
 * of it usable. */
static void rmm_part(rd_fpga_part_t *p, uint64_t dsp, uint64_t lut, uint64_t ff, uint64_t bram36) {
  test_fpga_part(p, "ports", 1, dsp, lut, ff, bram36, 0, 100);
}

/* The tree of the update-port tests: K = 2, N = 16, 8-bit leaves, B = 64,
 * S = 4 fixed (H = 4, J = 2). */
static void small_tree(rd_fpga_workload_t *w) {
  rd_fpga_workload_default(w);
  w->fanout = 2;
  w->capacity = 16;
  w->leaf_bits = 8;
  w->batch = 64;
  w->rmm_s = 4;
}

/* The replicated levels take S deltas a cycle: registers or banked SRAM,
 * the cheaper that fits; one port per replica (B update cycles, not
 * ceil(B/S)) when neither does (model.h, "Update ports of the replicated
 * levels"). Every figure by hand. */
static void test_rmm_update_ports(void **state) {
  (void)state;
  rd_fpga_part_t p;
  rd_fpga_workload_t w;
  rd_fpga_rmm_est_t e;

  /* A small tree where registers fit. K = 2, N = 16, 8-bit leaves: H = 4,
   * widths 12 (root), 11, 10, 9, 8. S = 4 (fixed), B = 64: J = 2, levels 1
   * and 2 replicated (2 and 4 words); C = ceil(4 / 4) = 1, so levels 3 and
   * 4 have 2 and 4 words per bank. Stage logic: 32 DSPs, 4 x 8 x 142 =
   * 4544 LUTs, 4 x 8 x 206 = 6592 FFs; the private levels' LUTRAM 4 x 2 x
   * (9 + 8) = 136.
   * Level 1 (w 2, W 11): registers 4 x 2 x 11 = 88 FFs, 7 x 2 x 11 = 154
   * adders + 4 x 2 decoders + 4 x 11 x ceil(1/3) muxes = 206 LUTs; banked
   * 16 x 2 x 11 = 352 LUTRAM + 4 x 3 x 11 = 132 LUTs, 132 FFs.
   * Level 2 (w 4, W 10): registers 160 FFs, 280 + 16 + 40 = 336 LUTs;
   * banked 320 + 120 = 440 LUTs, 120 FFs.
   * Registers on both: 4544 + 136 + 206 + 336 = 5222 LUTs, 6592 + 88 + 160
   * = 6840 FFs; banked level 2 would save 40 FFs for 104 more LUTs, worth
   * it only where FFs are scarcer than LUTs, and here FFs are twice LUTs.
   * With one port per replica: LUTRAM 4 x 2 x 11 = 88 and 4 x 2 x 10 = 80,
   * 4848 LUTs, 6592 FFs. Update ceil(64 / 4) + 3 = 19 cycles, sample 16 x
   * 2 + 3 x 2 = 38. */
  small_tree(&w);
  rmm_part(&p, 10000, 100000, 200000, 100);
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.levels, 4);
  assert_int_equal(e.shared_levels, 2);
  assert_int_equal(e.bank_words[1], 2);
  assert_int_equal(e.bank_words[2], 4);
  assert_int_equal(e.bank_words[3], 2);
  assert_int_equal(e.bank_words[4], 4);
  assert_int_equal(e.port[0], RD_FPGA_PORT_NONE);
  assert_int_equal(e.port[1], RD_FPGA_PORT_REGS);
  assert_int_equal(e.port[2], RD_FPGA_PORT_REGS);
  assert_int_equal(e.port[3], RD_FPGA_PORT_NONE);
  assert_int_equal(e.port[4], RD_FPGA_PORT_NONE);
  assert_int_equal(e.update_serial, 0);
  assert_null(e.port_limit);
  assert_int_equal(e.update_cycles, 19);
  assert_int_equal(e.update_fill_cycles, 3);
  assert_int_equal(e.sample_cycles, 38);
  assert_int_equal(e.used.dsp, 32);
  assert_int_equal(e.used.lut, 5222);
  assert_int_equal(e.used.ff, 6840);
  assert_int_equal(e.used.bram36, 0);
  assert_int_equal(e.used_one_port.lut, 4848);
  assert_int_equal(e.used_one_port.ff, 6592);
  assert_string_equal(rd_fpga_port_name(e.port[1]), "registers");

  /* The same with 5000 LUTs: 4848 with one port fits, 5222 does not (nor
   * any mix of registers and banks). The fixed S keeps one port per
   * replica, and the batch crosses levels 1 and 2 one delta per cycle:
   * 64 + 3 = 67 update cycles; sampling is unchanged. */
  rmm_part(&p, 10000, 5000, 200000, 100);
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.s, 4);
  assert_string_equal(e.limit, "fixed");
  assert_int_equal(e.update_serial, 1);
  assert_non_null(e.port_limit);
  assert_string_equal(e.port_limit, "lut");
  assert_int_equal(e.port[1], RD_FPGA_PORT_ONE);
  assert_int_equal(e.port[2], RD_FPGA_PORT_ONE);
  assert_int_equal(e.port[3], RD_FPGA_PORT_NONE);
  assert_string_equal(rd_fpga_port_name(e.port[1]), "one port");
  assert_int_equal(e.update_cycles, 67);
  assert_int_equal(e.sample_cycles, 38);
  assert_int_equal(e.used.lut, 4848);
  assert_int_equal(e.used.ff, 6592);
  assert_memory_equal(&e.used, &e.used_one_port, sizeof e.used);

  /* S chosen, 11,000 LUTs: the batch asks for pow2floor(64 / 4) = 16.
   * S = 16 and 8 pipelines take 16 x 8 x 142 = 18,176 and 9088 LUTs of
   * stage logic. S = 8 (J = 3) fits with one port per replica (9088 + 8 x
   * 2 x (11 + 10 + 9 + 8) = 9696 LUTs) but not with ports: registers, the
   * cheaper on every level, take 434, 712 and 1360 LUTs for levels 1..3,
   * 9088 + 8 x 2 x 8 (level 4's LUTRAM) + 2506 = 11,722. S = 4 fits with
   * them. S = 8 serial would sample in 8 x 2 + 6 = 22 and update in 64 + 3
   * = 67 cycles, 89; S = 4 with ports in 38 + 19 = 57: S = 4, stopped by
   * the ports' LUTs. */
  w.rmm_s = 0;
  rmm_part(&p, 10000, 11000, 200000, 100);
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.s_batch, 16);
  assert_int_equal(e.s, 4);
  assert_string_equal(e.limit, "lut");
  assert_non_null(e.port_limit);
  assert_string_equal(e.port_limit, "lut");
  assert_int_equal(e.update_serial, 0);
  assert_int_equal(e.port[1], RD_FPGA_PORT_REGS);
  assert_int_equal(e.port[2], RD_FPGA_PORT_REGS);
  assert_int_equal(e.update_cycles, 19);
  assert_int_equal(e.used.lut, 5222);
  /* Ties go to the ports. 5000 LUTs: S = 4 fits only with one port (see
   * above), 38 + 67 = 105 cycles. S = 2 (J = 1; C = 1, private banks of 2,
   * 4, 8 words) with level 1 in registers: 2 x 2 x 11 = 44 FFs and 3 x 2 x
   * 11 + 2 x 2 + 2 x 11 = 92 LUTs (banked: 4 x 2 x 11 + 2 x 11 = 110 LUTs,
   * 22 FFs, dearer in LUTs, the scarce ones); 2272 + 2 x 2 x (10 + 9 + 8)
   * + 92 = 2472 LUTs, 3296 + 44 = 3340 FFs. It samples in 32 x 2 + 6 = 70
   * and updates in 32 + 3 = 35 cycles: 105 as well. */
  rmm_part(&p, 10000, 5000, 200000, 100);
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.s, 2);
  assert_string_equal(e.limit, "lut");
  assert_string_equal(e.port_limit, "lut");
  assert_int_equal(e.update_serial, 0);
  assert_int_equal(e.port[1], RD_FPGA_PORT_REGS);
  assert_int_equal(e.sample_cycles + e.update_cycles, 105);
  assert_int_equal(e.update_cycles, 35);
  assert_int_equal(e.used.lut, 2472);
  assert_int_equal(e.used.ff, 3340);

  /* Levels too large for registers. K = 64, N = 4096, 16-bit leaves: H =
   * 2, widths 22 and 16. 64 DSPs, 4 per pipeline: S <= 16. At S = 16,
   * J = 1: level 1 (64 words, 22 bits) is replicated; C = 4, so level 2
   * has 256 words per bank (one BRAM18 each, 16 = 8 BRAM36). One port per
   * replica: 16 x 4 x 142 = 9088 + 16 x 2 x 22 = 704 LUTRAM = 9792 LUTs,
   * 16 x 4 x 206 = 13,184 FFs. Registers: 16 x 64 x 22 = 22,528 FFs and 31
   * x 64 x 22 + 16 x 64 + 16 x 22 x 21 = 52,064 LUTs; banked: 256
   * sub-banks x 2 x 22 = 11,264 LUTRAM + 16 x 15 x 22 = 5280 LUTs: 25,632
   * LUTs, more than 20,000 either way. At S = 8 banked fits (4544 + 2816 +
   * 1232 = 8592 LUTs), registers do not (4544 + 25,328). B = 1024: S = 16
   * with a serial update samples in 64 x 64 + 64 = 4160 cycles and updates
   * in 1024 + 1, 5185 in all; S = 8 banked in 128 x 64 + 64 = 8256 and
   * 128 + 1, 8385: the serial design wins (with K = 64 sampling is the
   * cost). */
  rd_fpga_workload_default(&w);
  w.fanout = 64;
  w.capacity = 4096;
  w.leaf_bits = 16;
  w.batch = 1024;
  rmm_part(&p, 64, 20000, 200000, 100);
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.s, 16);
  assert_string_equal(e.limit, "dsp");
  assert_int_equal(e.shared_levels, 1);
  assert_int_equal(e.bank_words[1], 64);
  assert_int_equal(e.bank_words[2], 256);
  assert_int_equal(e.update_serial, 1);
  assert_non_null(e.port_limit);
  assert_string_equal(e.port_limit, "lut");
  assert_int_equal(e.port[1], RD_FPGA_PORT_ONE);
  assert_int_equal(e.sample_cycles, 4160);
  assert_int_equal(e.update_cycles, 1025);
  assert_int_equal(e.used.dsp, 64);
  assert_int_equal(e.used.lut, 9792);
  assert_int_equal(e.used.ff, 13184);
  assert_int_equal(e.used.bram36, 8);
  /* The banked design, S = 8 fixed: C = 8, 512-word level-2 banks (one
   * BRAM18 each: 4 BRAM36); 64 sub-banks of level 1 in LUTRAM. Update
   * 128 + 1 = 129 cycles. */
  w.rmm_s = 8;
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.port[1], RD_FPGA_PORT_BANKED);
  assert_string_equal(rd_fpga_port_name(e.port[1]), "banked");
  assert_int_equal(e.update_serial, 0);
  assert_null(e.port_limit);
  assert_int_equal(e.update_cycles, 129);
  assert_int_equal(e.sample_cycles, 8256);
  assert_int_equal(e.used.dsp, 32);
  assert_int_equal(e.used.lut, 4544 + 2816 + 1232);
  assert_int_equal(e.used.ff, 8 * 4 * RD_FPGA_RMM_FF_PER_STAGE + 1232);
  assert_int_equal(e.used.bram36, 4);
  assert_int_equal(e.used_one_port.lut, 4544 + 8 * 2 * 22);

  /* S = 1 replicates nothing. */
  w.rmm_s = 1;
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.shared_levels, 0);
  assert_int_equal(e.port[1], RD_FPGA_PORT_NONE);
  assert_int_equal(e.update_serial, 0);
  assert_memory_equal(&e.used, &e.used_one_port, sizeof e.used);
  assert_string_equal(rd_fpga_port_name((rd_fpga_port_t)9), "invalid");
}

/* A design a kernel build names (workload.rmm_ports_fixed; kernels/rmm.h
 * RMM_PORT_REGS, RMM_PORT_BANKED) is costed as given. The tree of
 * test_rmm_update_ports: K = 2, N = 16, 8-bit leaves, B = 64, S = 4, J = 2,
 * and its hand-computed figures. */
static void test_rmm_fixed_ports(void **state) {
  (void)state;
  rd_fpga_part_t p;
  rd_fpga_workload_t w;
  rd_fpga_rmm_est_t e;
  rd_error_t err;
  uint32_t regs, banked;
  small_tree(&w);
  rmm_part(&p, 10000, 100000, 200000, 100);

  /* Chosen: registers on both levels, masks 0x3 and 0. */
  rmm_ok(&p, &w, &e);
  rd_fpga_rmm_port_masks(&e, &regs, &banked);
  assert_int_equal(regs, 0x3);
  assert_int_equal(banked, 0);
  assert_int_equal(e.banks[1], 0);
  assert_int_equal(e.banks[2], 0);
  assert_int_equal(e.banks[3], 4);
  assert_int_equal(e.banks[4], 4);

  /* Level 1 in registers (206 LUTs, 88 FFs), level 2 banked (16 sub-banks
   * of 4 words: 320 LUTRAM + 120 adder LUTs, 120 FFs): 4544 + 136 + 206 +
   * 440 = 5326 LUTs, 6592 + 88 + 120 = 6800 FFs; 19 update cycles. */
  w.rmm_ports_fixed = 1;
  w.rmm_port_regs = 0x1;
  w.rmm_port_banked = 0x2;
  rmm_ok(&p, &w, &e);
  assert_string_equal(e.limit, "fixed");
  assert_int_equal(e.port[1], RD_FPGA_PORT_REGS);
  assert_int_equal(e.port[2], RD_FPGA_PORT_BANKED);
  assert_int_equal(e.port[3], RD_FPGA_PORT_NONE);
  assert_int_equal(e.banks[1], 0);
  assert_int_equal(e.banks[2], 16);
  assert_int_equal(e.banks[3], 4);
  assert_int_equal(e.update_serial, 0);
  assert_int_equal(e.update_cycles, 19);
  assert_int_equal(e.sample_cycles, 38);
  assert_int_equal(e.used.lut, 5326);
  assert_int_equal(e.used.ff, 6800);
  assert_int_equal(e.used_one_port.lut, 4848);
  rd_fpga_rmm_port_masks(&e, &regs, &banked);
  assert_int_equal(regs, 0x1);
  assert_int_equal(banked, 0x2);

  /* Both masks 0: one port per replica, the batch crosses levels 1 and 2
   * one delta per cycle, 64 + 3 = 67 cycles, though ports would fit. */
  w.rmm_port_regs = 0;
  w.rmm_port_banked = 0;
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.update_serial, 1);
  assert_null(e.port_limit);
  assert_int_equal(e.port[1], RD_FPGA_PORT_ONE);
  assert_int_equal(e.port[2], RD_FPGA_PORT_ONE);
  assert_int_equal(e.banks[1], 4);
  assert_int_equal(e.banks[2], 4);
  assert_int_equal(e.update_cycles, 67);
  assert_int_equal(e.used.lut, 4848);
  assert_memory_equal(&e.used, &e.used_one_port, sizeof e.used);
  rd_fpga_rmm_port_masks(&e, &regs, &banked);
  assert_int_equal(regs | banked, 0);

  /* 5000 LUTs: registers on both (5222) do not fit, and a fixed design is
   * not changed into one that does. */
  rmm_part(&p, 10000, 5000, 200000, 100);
  w.rmm_port_regs = 0x3;
  assert_int_equal(rd_fpga_model_rmm(&p, &w, &e, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "ports given"));
  assert_non_null(strstr(err.msg, "5222 LUTs, has 5000"));

  /* Masks that do not name each replicated level once. */
  static const uint32_t BAD[][2] = {{0x1, 0}, {0x4, 0x3}, {0x3, 0x1}, {0, 0x7}};
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    w.rmm_port_regs = BAD[i][0];
    w.rmm_port_banked = BAD[i][1];
    assert_int_equal(rd_fpga_workload_validate(&w, &err), RD_EINVAL);
    assert_non_null(strstr(err.msg, "levels are 1..2"));
    assert_int_equal(rd_fpga_model_rmm(&p, &w, &e, &err), RD_EINVAL);
  }
  /* Fixed ports need a fixed S; masks need rmm_ports_fixed. */
  w.rmm_port_regs = 0x3;
  w.rmm_port_banked = 0;
  w.rmm_s = 0;
  assert_int_equal(rd_fpga_workload_validate(&w, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "needs a fixed rmm_s"));
  w.rmm_s = 4;
  w.rmm_ports_fixed = 0;
  assert_int_equal(rd_fpga_workload_validate(&w, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "rmm_ports_fixed is 0"));
  /* S = 1 replicates nothing: only 0, 0 is valid, and it is not serial. */
  w.rmm_ports_fixed = 1;
  w.rmm_s = 1;
  assert_int_equal(rd_fpga_workload_validate(&w, &err), RD_EINVAL);
  w.rmm_port_regs = 0;
  rmm_ok(&p, &w, &e);
  assert_int_equal(e.shared_levels, 0);
  assert_int_equal(e.update_serial, 0);
  assert_int_equal(e.banks[1], 1);
}

/* ------------------------------------------------------------------ */
/* Learner                                                              */
/* ------------------------------------------------------------------ */

/* The TUs of DQN and DDPG pipelines: n = 3L stages (papers/001 §IV-B3),
 * plus the passes beside the chain. */
static void test_learner_structure(void **state) {
  (void)state;
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_fpga_learner_est_t e;

  /* DQN 4-64-64-2, L = 3: FW0..2, LOSS, BW2, BW1, WA0..2 = 9 = 3L chain
   * stages; beside them the target's FW0..2 and double DQN's FW0..2. */
  rd_fpga_workload_default(&w);
  w.algo = RD_FPGA_DQN;
  static const uint32_t Q[] = {4, 64, 64, 2};
  mlp(&w.net[0], 4, Q);
  learner_ok(&u200, &w, &e);
  assert_int_equal(e.n, 9);
  assert_int_equal(e.n_tus, 15);
  static const char *CHAIN[] = {"FW0", "FW1", "FW2", "LOSS", "BW2", "BW1", "WA0", "WA1", "WA2"};
  for (uint32_t i = 0; i < 9; i++) {
    assert_string_equal(e.tu[i].label, CHAIN[i]);
    assert_int_equal(e.tu[i].chain, 1);
    assert_int_equal(e.tu[i].depth, i + 1);
  }
  assert_int_equal(tu_by_label(&e, "t:FW1")->chain, 0);
  assert_int_equal(tu_by_label(&e, "d:FW2")->macs, 128);
  assert_int_equal(tu_by_label(&e, "LOSS")->macs, 2); /* over the 2 Q values */
  assert_int_equal(e.slrs, 2);
  w.double_dqn = 0;
  learner_ok(&u200, &w, &e);
  assert_int_equal(e.n_tus, 12);

  /* DDPG, actor 4-8-8-1 and critic 5-8-8-1 (papers/001's CartPole):
   * L = 3 + 3, n = 18; TUs 4 La + 6 Lc = 30. The critic's BW goes down to
   * its input (dQ/da for the actor): cBW2, cBW1, cBW0, then aBW2, aBW1. */
  rd_fpga_workload_default(&w);
  w.algo = RD_FPGA_DDPG;
  static const uint32_t A[] = {4, 8, 8, 1}, C[] = {5, 8, 8, 1};
  mlp(&w.net[0], 4, A);
  mlp(&w.net[1], 4, C);
  learner_ok(&u200, &w, &e);
  assert_int_equal(e.n, 18);
  assert_int_equal(e.n_tus, 30);
  static const char *DCHAIN[] = {"aFW0", "aFW1", "aFW2", "cFW0", "cFW1", "cFW2",
                                 "LOSS", "cBW2", "cBW1", "cBW0", "aBW2", "aBW1",
                                 "aWA0", "aWA1", "aWA2", "cWA0", "cWA1", "cWA2"};
  for (uint32_t i = 0; i < 18; i++) {
    assert_string_equal(e.tu[i].label, DCHAIN[i]);
    assert_int_equal(e.tu[i].depth, i + 1);
  }
  assert_int_equal(tu_by_label(&e, "cBW0")->macs, 40); /* 5 x 8 */
  assert_int_equal(tu_by_label(&e, "c:LOSS")->chain, 0);
  assert_non_null(tu_by_label(&e, "t:aFW2"));
  assert_non_null(tu_by_label(&e, "t:cFW0"));
  assert_non_null(tu_by_label(&e, "c:BW1"));
}

/* Pipeline local optimization (papers/001 §VI-A2): DSPs in proportion to
 * each TU's multiply-adds. DQN 4-64-64-2, fx16 (one DSP per MAC unit),
 * SGD, B = 32, a learner SLR of 215 DSPs.
 *
 * Per-sample multiply-adds: layer 0 4x64 = 256, layer 1 64x64 = 4096,
 * layer 2 64x2 = 128. TUs: FW0 256, FW1 4096, FW2 128, LOSS 2, BW2 128,
 * BW1 4096, WA0 256, WA1 4096, WA2 128, t:FW0..2, d:FW0..2. The smallest
 * GEMM TU has 128, so the paper's ratios are r = 2, 32, 1 per layer and
 * with f = 1 (T = 128 cycles per sample):
 *   chain 2+32+1+1(LOSS)+1+32+2+32+1 = 104, beside 35+35: 174 units,
 *   WU units = the chain FW's weight banks 2+32+1 = 35, DSPs 209 <= 215.
 * T = 127 would need ceil(256/127) = 3, ceil(4096/127) = 33, ceil(128/127)
 * = 2 units: 188 + 38 = 226 > 215, so DP = 1 stops at T = 128, DSP-bound.
 * Two pipelines fit first at T = 256 (2 x 90 + 18 = 198; T = 255 takes
 * 2 x 99 + 20 = 218): (16 + 8) x 256 + 514 = 6658 cycles, worse than one:
 *   T_max = 128 (LOSS: 2 cycles), T_pipeline = (32 + 9 - 1) x 128 = 5120,
 *   T_WU = ceil(320/35) + ceil(4160/35) + ceil(130/35) = 10 + 119 + 4 = 133
 *   (sizes with biases: 4x64+64, 64x64+64, 64x2+2; DP - 1 + U = 1),
 *   5253 cycles, 52.53 us at 100 MHz.
 * The same units serve every T up to 132 (ceil(4096/132) = 32, 4096/133
 * needs 31), so the search reports the largest, T = 132. */
static void test_learner_proportional(void **state) {
  (void)state;
  rd_fpga_part_t p;
  tiny_part(&p, 2, 215);
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  w.algo = RD_FPGA_DQN;
  w.precision = RD_FPGA_FX16;
  w.optimizer = RD_FPGA_SGD;
  static const uint32_t Q[] = {4, 64, 64, 2};
  mlp(&w.net[0], 4, Q);
  rd_fpga_learner_est_t e;
  learner_ok(&p, &w, &e);

  assert_int_equal(e.dp, 1);
  assert_int_equal(e.pi, 32);
  assert_int_equal(e.f, 1);
  assert_int_equal(e.t_target, 132);
  static const struct { const char *label; uint64_t units; } U[] = {
      {"FW0", 2},   {"FW1", 32},  {"FW2", 1},   {"LOSS", 1},  {"BW2", 1},
      {"BW1", 32},  {"WA0", 2},   {"WA1", 32},  {"WA2", 1},   {"t:FW0", 2},
      {"t:FW1", 32}, {"t:FW2", 1}, {"d:FW0", 2}, {"d:FW1", 32}, {"d:FW2", 1},
  };
  for (size_t i = 0; i < sizeof U / sizeof U[0]; i++) {
    const rd_fpga_tu_t *tu = tu_by_label(&e, U[i].label);
    assert_int_equal(tu->units, U[i].units);
    assert_int_equal(tu->dsp, U[i].units); /* fx16: one DSP48 per multiply-add */
    /* r_i = macs_i / 128 exactly, so every GEMM stage takes 128 cycles. */
    if (tu->kind != RD_FPGA_TU_LOSS) assert_int_equal(tu->cycles, 128);
  }
  assert_int_equal(tu_by_label(&e, "LOSS")->cycles, 2);
  assert_int_equal(e.pipeline_units, 174);
  assert_int_equal(e.wu_units, 35);
  assert_int_equal(e.used.dsp, 209);
  /* LUTs: 143 per DSP, plus LUTRAM for the three banks of <= 64 words:
   * FW0's kept inputs (4 values x (n - depth + 2) = 40 words) and the
   * 8-word input FIFOs of t:FW0 and d:FW0, 16 bits each, 2 LUTs per bit:
   * 3 x 32 = 96. */
  assert_int_equal(e.used.lut, 209 * RD_FPGA_LEARNER_LUT_PER_DSP + 96);
  assert_int_equal(e.avail.dsp, 215); /* learner_slrs 0: the one SLR the RMM leaves */
  assert_string_equal(e.limit, "dsp");
  assert_int_equal(e.t_max, 128);
  assert_int_equal(e.t_pipeline, 5120);
  assert_int_equal(e.t_wu, 133);
  assert_int_equal(e.cycles, 5253);
  assert_true(e.step_s > 52.52e-6 && e.step_s < 52.54e-6);

  /* Adam with a Polyak target: U = 6 multiply-adds per weight, so
   * T_WU = ceil(6*320/35) + ceil(6*4160/35) + ceil(6*130/35) =
   * 55 + 714 + 23 = 792, and m and v in SRAM. The units stay. */
  w.optimizer = RD_FPGA_ADAM;
  rd_fpga_learner_est_t a;
  learner_ok(&p, &w, &a);
  assert_int_equal(a.dp, 1);
  assert_int_equal(a.t_max, 128);
  assert_int_equal(a.t_wu, 792);
  assert_true(a.used.bram36 + a.used.uram > e.used.bram36 + e.used.uram ||
              a.used.lut > e.used.lut);
}

/* Global optimization: the DP/PI search (papers/001 §VI-A2). DQN with one
 * 2 -> 2 layer (L = 1, no double DQN), fx16, SGD, 40 DSPs.
 * TUs: FW0 (4 MACs), LOSS (2), WA0 (4), t:FW0 (4); n = 3L = 3; one tensor
 * of 2x2 + 2 = 6 weights; WU units = FW0's.
 *   T = 1: units 4 + 2 + 4 + 4 = 14, WU 4;  T = 2 (or 3): 2+1+2+2 = 7, WU 2,
 *   T_max 2;  T = 4: 1+1+1+1 = 4, WU 1, T_max 4 (LOSS 2).
 * DSPs = DP x units + WU must stay <= 40:
 *   DP  T  DSPs  PI  T_pipeline          T_WU = ceil(DP x 6 / WU)  total
 *   1   1  18    64  (64+2) x 1 = 66     ceil(6/4)   = 2           68
 *   2   1  32    32  (32+2) x 1 = 34     ceil(12/4)  = 3           37  <- best
 *   3   2  23    22  (22+2) x 2 = 48     ceil(18/2)  = 9           57
 *   4   2  30    16  (16+2) x 2 = 36     ceil(24/2)  = 12          48
 *   5   2  37    13  (13+2) x 2 = 30     ceil(30/2)  = 15          45
 *   6   4  25    11  (11+2) x 4 = 52     ceil(36/1)  = 36          88
 *   ... DP = 10 needs 4 x 10 + 1 = 41 even at T = 4: the search stops.
 * f = ceil(4 / 1) = 4 MAC units for the smallest GEMM TU. */
static void test_learner_dp_search(void **state) {
  (void)state;
  rd_fpga_part_t p;
  tiny_part(&p, 2, 40);
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  w.algo = RD_FPGA_DQN;
  w.double_dqn = 0;
  w.precision = RD_FPGA_FX16;
  w.optimizer = RD_FPGA_SGD;
  w.batch = 64;
  static const uint32_t Q[] = {2, 2};
  mlp(&w.net[0], 2, Q);
  rd_fpga_learner_est_t e;
  learner_ok(&p, &w, &e);
  assert_int_equal(e.n, 3);
  assert_int_equal(e.n_tus, 4);
  assert_int_equal(e.dp, 2);
  assert_int_equal(e.pi, 32);
  assert_int_equal(e.t_target, 1);
  assert_int_equal(e.f, 4);
  assert_int_equal(e.t_max, 1);
  assert_int_equal(e.t_pipeline, 34);
  assert_int_equal(e.t_wu, 3);
  assert_int_equal(e.cycles, 37);
  assert_int_equal(e.pipeline_units, 14);
  assert_int_equal(e.wu_units, 4);
  assert_int_equal(e.used.dsp, 32);
  assert_string_equal(e.limit, "stage"); /* every stage already takes one cycle */

  /* B = 2: DP = 1 gives (2 + 2) + 2 = 6, DP = 2 (1 + 2) + 3 = 6: a tie
   * goes to fewer pipelines. */
  w.batch = 2;
  learner_ok(&p, &w, &e);
  assert_int_equal(e.dp, 1);
  assert_int_equal(e.cycles, 6);
  /* B = 1: DP cannot exceed B. */
  w.batch = 1;
  learner_ok(&p, &w, &e);
  assert_int_equal(e.dp, 1);
  assert_int_equal(e.pi, 1);
  assert_int_equal(e.cycles, 3 + 2);

  /* 17 DSPs: T = 1 (18) no longer fits one pipeline; T = 2 does (9):
   * (64 + 2) x 2 + ceil(6/2) = 135; DP = 2 at T = 2 (16): 34 x 2 + 6 = 74;
   * DP = 3 at T = 4 (13): (22 + 2) x 4 + 18 = 114; DP = 4 at T = 4 (17):
   * (16 + 2) x 4 + 24 = 96. Best DP = 2, limited by DSPs. */
  tiny_part(&p, 2, 17);
  w.batch = 64;
  learner_ok(&p, &w, &e);
  assert_int_equal(e.dp, 2);
  assert_int_equal(e.t_max, 2);
  assert_int_equal(e.cycles, 74);
  assert_string_equal(e.limit, "dsp");
}

/* Every shipped part, a range of workloads: whatever the search picks
 * stays within the SLRs it was given, and the RMM within its one SLR. */
static void test_resource_limits(void **state) {
  (void)state;
  rd_fpga_part_t parts[8];
  size_t n;
  rd_error_t err;
  assert_int_equal(rd_fpga_parts_load(RD_FPGA_PARTS_DIR, parts, 8, &n, &err), RD_OK);
  static const uint32_t Q[] = {4, 64, 64, 2}, QB[] = {128, 512, 512, 18};
  static const uint32_t A[] = {11, 256, 256, 3}, C[] = {14, 256, 256, 1};
  static const uint32_t batches[] = {1, 7, 32, 256, 2048, 16384};
  static const uint32_t fanouts[] = {2, 4, 16, 64};
  for (size_t pi = 0; pi < n; pi++) {
    const rd_fpga_part_t *p = &parts[pi];
    for (int net = 0; net < 3; net++)
      for (int prec = 0; prec <= 2; prec++)
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
          rd_fpga_workload_t w;
          rd_fpga_workload_default(&w);
          w.batch = batches[bi];
          w.fanout = fanouts[(bi + (size_t)net) % 4];
          w.capacity = 100000 + 777 * (uint32_t)bi;
          w.precision = (rd_fpga_precision_t)prec;
          w.optimizer = prec == 1 ? RD_FPGA_SGD : RD_FPGA_ADAM;
          if (net == 0) {
            w.algo = RD_FPGA_DQN;
            mlp(&w.net[0], 4, Q);
          } else if (net == 1) {
            w.algo = RD_FPGA_DQN;
            mlp(&w.net[0], 4, QB);
          } else {
            w.algo = RD_FPGA_DDPG;
            mlp(&w.net[0], 4, A);
            mlp(&w.net[1], 4, C);
          }
          rd_fpga_estimate_t e;
          int rc = rd_fpga_model_estimate(p, &w, &e, &err);
          if (rc != RD_OK) fail_msg("%s: %s", p->name, err.msg);
          assert_true(e.has_learner);
          /* The RMM's SLR: usable_pct of one SLR. */
          assert_int_equal(e.rmm.avail.dsp, p->per_slr.dsp * p->usable_pct / 100);
          assert_true(res_within(&e.rmm.used, &e.rmm.avail));
          /* The learner's: the other slrs - 1. */
          assert_int_equal(e.learner.slrs, p->slrs - 1);
          assert_int_equal(e.learner.avail.dsp,
                           p->per_slr.dsp * (p->slrs - 1) * p->usable_pct / 100);
          assert_true(res_within(&e.learner.used, &e.learner.avail));
          /* The books add up. */
          uint64_t dsp = 0;
          for (uint32_t i = 0; i < e.learner.n_tus; i++) dsp += e.learner.tu[i].dsp;
          assert_int_equal(e.learner.used.dsp, e.learner.dp * dsp + e.learner.wu_dsp);
          assert_int_equal(e.learner.pi, (w.batch + e.learner.dp - 1) / e.learner.dp);
          assert_int_equal(e.learner.cycles, e.learner.t_pipeline + e.learner.t_wu);
          assert_int_equal(e.learner.t_pipeline,
                           ((uint64_t)e.learner.pi + e.learner.n - 1) * e.learner.t_max);
          assert_true(e.rmm.s >= 1 && e.rmm.s <= e.rmm.s_batch);
        }
  }
}

/* A part file is operator input: at the ends of every range the loader
 * accepts (one DSP at 1 MHz and 1% usable; 2^32 of everything at 2 GHz)
 * the model either refuses the workload or gives finite times > 0, which
 * the mapper's table then holds (placement.c checks them again). */
static void test_extreme_parts_finite(void **state) {
  (void)state;
  make_tmpdir();
  const char *names[] = {"least.part", "most.part"};
  write_file(names[0], "name = least\nslrs = 2\ndsp = 2\nlut = 2\nff = 2\nbram36 = 2\n"
                       "uram = 0\nclock_mhz = 1\nusable_pct = 1\ndsp_alu_bits = 8\n");
  write_file(names[1], "name = most\nslrs = 8\ndsp = 4294967296\nlut = 4294967296\n"
                       "ff = 4294967296\nbram36 = 4294967296\nuram = 4294967296\n"
                       "clock_mhz = 2000\nusable_pct = 100\ndsp_alu_bits = 128\n");
  rd_fpga_part_t parts[2];
  size_t n = 0;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_fpga_parts_load(tmpdir, parts, 2, &n, &err) != RD_OK) fail_msg("load: %s", err.msg);
  assert_int_equal(n, 2);
  static const uint32_t Q[] = {4, 64, 64, 2}, QB[] = {512, 1024, 1024, 18};
  static const uint32_t A[] = {11, 256, 256, 3}, C[] = {14, 256, 256, 1};
  static const uint32_t batches[] = {1, 256, 65536};
  size_t ok = 0;
  for (size_t pi = 0; pi < n; pi++)
    for (int net = 0; net < 3; net++)
      for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        rd_fpga_workload_t w;
        rd_fpga_workload_default(&w);
        w.batch = batches[bi];
        w.capacity = 1u << 28;
        w.fanout = bi == 0 ? 2 : 64;
        w.algo = net < 2 ? RD_FPGA_DQN : RD_FPGA_DDPG;
        mlp(&w.net[0], 4, net == 0 ? Q : net == 1 ? QB : A);
        if (net == 2) mlp(&w.net[1], 4, C);
        rd_fpga_rmm_est_t r;
        rd_error_clear(&err);
        if (rd_fpga_model_rmm(&parts[pi], &w, &r, &err) == RD_OK) {
          double t = r.sample_s + r.update_s;
          if (!(isfinite(t) && t > 0)) fail_msg("%s rmm: %g s", parts[pi].name, t);
          ok++;
        }
        rd_fpga_estimate_t e;
        rd_error_clear(&err);
        if (rd_fpga_model_estimate(&parts[pi], &w, &e, &err) == RD_OK && e.has_learner) {
          if (!(isfinite(e.learner.step_s) && e.learner.step_s > 0))
            fail_msg("%s learner: %g s", parts[pi].name, e.learner.step_s);
          ok++;
        }
      }
  assert_true(ok > 0); /* the large part fits some of them */
  rm_tmpdir(names, 2);
}

/* A larger batch never lowers the learner's latency (more samples through
 * the same or a smaller design), nor a fixed RMM design's. The RMM with S
 * chosen by the batch is a sawtooth: where S doubles, a bigger design
 * takes over and the latency drops; that is checked too. */
static void test_monotonic_in_batch(void **state) {
  (void)state;
  rd_fpga_part_t parts[8];
  size_t n;
  rd_error_t err;
  assert_int_equal(rd_fpga_parts_load(RD_FPGA_PARTS_DIR, parts, 8, &n, &err), RD_OK);
  static const uint32_t A[] = {4, 8, 8, 1}, C[] = {5, 8, 8, 1}, Q[] = {4, 64, 64, 2};
  for (size_t pi = 0; pi < n; pi++) {
    for (int algo = 0; algo < 2; algo++) {
      rd_fpga_workload_t w;
      rd_fpga_workload_default(&w);
      if (algo == 0) {
        w.algo = RD_FPGA_DQN;
        mlp(&w.net[0], 4, Q);
      } else {
        w.algo = RD_FPGA_DDPG;
        mlp(&w.net[0], 4, A);
        mlp(&w.net[1], 4, C);
      }
      uint64_t last = 0;
      for (uint32_t b = 1; b <= 4096; b = b < 64 ? b + 1 : b + b / 3) {
        w.batch = b;
        rd_fpga_learner_est_t e;
        learner_ok(&parts[pi], &w, &e);
        if (e.cycles < last) fail_msg("%s algo %d: B=%u takes %" PRIu64 " < %" PRIu64,
                                      parts[pi].name, algo, b, e.cycles, last);
        last = e.cycles;
      }
    }
    /* A fixed RMM design: S = 8, K = 16. */
    rd_fpga_workload_t w;
    rd_fpga_workload_default(&w);
    w.rmm_s = 8;
    uint64_t last_s = 0, last_u = 0;
    for (uint32_t b = 1; b <= 20000; b += 1 + b / 7) {
      w.batch = b;
      rd_fpga_rmm_est_t r;
      rmm_ok(&parts[pi], &w, &r);
      assert_true(r.sample_cycles >= last_s);
      assert_true(r.update_cycles >= last_u);
      last_s = r.sample_cycles;
      last_u = r.update_cycles;
    }
    /* A bigger tree never samples faster with the same S. */
    last_s = 0;
    for (uint32_t cap = 8; cap <= (1u << 20); cap *= 3) {
      w.capacity = cap;
      w.batch = 256;
      rd_fpga_rmm_est_t r;
      rmm_ok(&parts[pi], &w, &r);
      assert_true(r.sample_cycles >= last_s);
      last_s = r.sample_cycles;
    }
  }
  /* The sawtooth of the chosen S: K = 16, N = 2^20, H = 5 on the U200.
   * B = 19: S = pow2floor(3) = 2, 10 x 16 + 64 = 224 cycles; B = 20:
   * S = 4, 5 x 16 + 64 = 144. */
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  rd_fpga_rmm_est_t r;
  w.batch = 19;
  rmm_ok(&u200, &w, &r);
  assert_int_equal(r.s, 2);
  assert_int_equal(r.sample_cycles, 224);
  w.batch = 20;
  rmm_ok(&u200, &w, &r);
  assert_int_equal(r.s, 4);
  assert_int_equal(r.sample_cycles, 144);
}

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

static void expect_workload_error(const rd_fpga_workload_t *w, const char *msg) {
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_fpga_workload_validate(w, &err), RD_EINVAL);
  if (strstr(err.msg, msg) == NULL) fail_msg("'%s' does not say '%s'", err.msg, msg);
  rd_fpga_estimate_t e;
  memset(&e, 0xAB, sizeof e);
  rd_fpga_estimate_t before = e;
  assert_int_equal(rd_fpga_model_estimate(&u200, w, &e, &err), RD_EINVAL);
  assert_memory_equal(&e, &before, sizeof e);
}

static void test_workload_errors(void **state) {
  (void)state;
  rd_fpga_workload_t w;
  static const uint32_t A[] = {4, 8, 1}, C[] = {5, 8, 1};
  rd_fpga_workload_default(&w);
  assert_int_equal(rd_fpga_workload_validate(&w, NULL), RD_OK);
  w.batch = 0;
  expect_workload_error(&w, "batch 0");
  w.batch = RD_FPGA_MAX_BATCH + 1;
  expect_workload_error(&w, "batch");
  rd_fpga_workload_default(&w);
  w.capacity = 1;
  expect_workload_error(&w, "capacity 1");
  rd_fpga_workload_default(&w);
  w.fanout = 3;
  expect_workload_error(&w, "fanout 3");
  w.fanout = 128;
  expect_workload_error(&w, "fanout 128");
  rd_fpga_workload_default(&w);
  w.rmm_s = 6;
  expect_workload_error(&w, "rmm_s 6");
  w.rmm_s = 4;
  w.capacity = 2;
  expect_workload_error(&w, "rmm_s 4");
  rd_fpga_workload_default(&w);
  w.leaf_bits = 65;
  expect_workload_error(&w, "leaf_bits");
  rd_fpga_workload_default(&w);
  w.precision = (rd_fpga_precision_t)7;
  expect_workload_error(&w, "precision");
  rd_fpga_workload_default(&w);
  w.algo = (rd_fpga_algo_t)9;
  expect_workload_error(&w, "algo 9");
  rd_fpga_workload_default(&w);
  w.algo = RD_FPGA_DQN; /* no network set */
  expect_workload_error(&w, "DQN network");
  w.algo = RD_FPGA_DDPG;
  mlp(&w.net[0], 3, A);
  mlp(&w.net[1], 3, A); /* critic input 4, not 4 + 1 */
  expect_workload_error(&w, "critic input 4 is not obs + action = 5");
  static const uint32_t C2[] = {5, 8, 2};
  mlp(&w.net[1], 3, C2);
  expect_workload_error(&w, "critic output 2");
  mlp(&w.net[1], 3, C);
  assert_int_equal(rd_fpga_workload_validate(&w, NULL), RD_OK);
}

static void test_fit_errors(void **state) {
  (void)state;
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_error_t err;
  rd_fpga_estimate_t e;
  memset(&e, 0xAB, sizeof e);
  rd_fpga_estimate_t before = e;

  /* A tree beyond one SLR: 2^30 leaves at K = 2 need ~2^31 nodes. */
  rd_fpga_workload_default(&w);
  w.capacity = RD_FPGA_MAX_CAPACITY;
  w.fanout = 2;
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "does not fit one SLR of u200 with S=1"));
  assert_non_null(strstr(err.msg, "on-chip SRAM"));
  assert_memory_equal(&e, &before, sizeof e);
  /* The exact (CPU-compatible) 1M-leaf binary tree does not fit a U200 SLR
   * either: 43- to 62-bit nodes, ~89 Mb, one word per 72-bit URAM row. */
  w.capacity = 1u << 20;
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_ERANGE);
  /* A fixed S that does not fit is an error, not a smaller S. */
  rd_fpga_workload_default(&w);
  w.rmm_s = 4096;
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "S=4096"));
  assert_non_null(strstr(err.msg, "DSPs"));
  assert_memory_equal(&e, &before, sizeof e);

  /* A learner whose weights exceed on-chip SRAM even at DP = 1, f = 1:
   * 4096-wide layers, 2 x 16.8M weights, each held by several TUs. */
  rd_fpga_workload_default(&w);
  w.algo = RD_FPGA_DQN;
  static const uint32_t BIG[] = {4096, 4096, 4096, 2};
  mlp(&w.net[0], 4, BIG);
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "DP=1, f=1"));
  assert_non_null(strstr(err.msg, "on-chip SRAM"));
  assert_memory_equal(&e, &before, sizeof e);
  rd_fpga_learner_est_t le;
  memset(&le, 0xAB, sizeof le);
  rd_fpga_learner_est_t le_before = le;
  assert_int_equal(rd_fpga_model_learner(&u200, &w, &le, &err), RD_ERANGE);
  assert_memory_equal(&le, &le_before, sizeof le);

  /* Too few DSPs for one MAC unit per TU: 15 TUs + 3 WU units > 17. */
  rd_fpga_part_t p;
  tiny_part(&p, 2, 17);
  static const uint32_t Q[] = {4, 64, 64, 2};
  mlp(&w.net[0], 4, Q);
  w.precision = RD_FPGA_FX16;
  assert_int_equal(rd_fpga_model_learner(&p, &w, &le, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "18 DSPs, has 17"));

  /* SLR bookkeeping. */
  tiny_part(&p, 1, 1000);
  assert_int_equal(rd_fpga_model_learner(&p, &w, &le, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "one SLR"));
  w.learner_slrs = 1; /* the learner alone, the RMM elsewhere */
  assert_int_equal(rd_fpga_model_learner(&p, &w, &le, &err), RD_OK);
  assert_int_equal(le.avail.dsp, 1000);
  assert_int_equal(rd_fpga_model_estimate(&p, &w, &e, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "leaves no SLR"));
  w.learner_slrs = 3;
  assert_int_equal(rd_fpga_model_learner(&u200, &w, &le, &err), RD_OK);
  assert_int_equal(le.slrs, 3);
  w.learner_slrs = 4;
  assert_int_equal(rd_fpga_model_learner(&u200, &w, &le, &err), RD_EINVAL);

  /* No learner: the estimate has the RMM only; the learner call refuses. */
  rd_fpga_workload_default(&w);
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_OK);
  assert_int_equal(e.has_learner, 0);
  assert_int_equal(e.rmm.s, 4);
  assert_int_equal(rd_fpga_model_learner(&u200, &w, &le, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "no learner"));

  /* A bad part. */
  tiny_part(&p, 2, 100);
  p.clock_mhz = 0;
  assert_int_equal(rd_fpga_model_estimate(&p, &w, &e, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "clock_mhz"));
}

/* ------------------------------------------------------------------ */
/* papers/001 Table VI                                                  */
/* ------------------------------------------------------------------ */

/* Where the model lands against Table VI ("design parameters and
 * resource allocation from FPGA architecture exploration", U200, K = 2,
 * RMM in 1 SLR and the learner in 2; PI = B/2, DP = 2, S = 1..32).
 *
 * RMM. The paper's tree SRAM (4.5 MB for 2^20 leaves, ~2M nodes) is ~17
 * bits per node, so its leaves were ~16 bits wide; with leaf_bits = 16 the
 * model reproduces S = 1 at B = 32, S = 32 from B = 1024 with DSPs the
 * bound, and exactly the paper's 1280 DSPs (32 pipelines x 2 adders x 20
 * levels; the per-stage LUT and FF constants come from the same row, so
 * 181,760 LUTs of logic against the paper's 181K is by construction) and
 * ~5.5 MB of SRAM (208 BRAM36 + 128 URAM) against 4.5 MB: we replicate the
 * top levels per pipeline and round banks to blocks. With the default
 * CPU-exact widths (43-bit leaves, 63-bit root) that tree does not fit one
 * U200 SLR at all (test_fit_errors): exactness costs ~2.5x the SRAM.
 *
 * Learner (DDPG, Hopper: actor 11-256-256-3, critic 14-256-256-1). The
 * paper used DP = 2. The model picks DP = 1 at B = 32 and 256 and DP = 2
 * at B = 1024 (fp32, Adam), DSP-bound at ~4050 of 4104 usable DSPs where
 * the paper's design stopped at 2557 DSPs, bound by LUTs (282 LUTs per DSP
 * against our 143, which we calibrated on its DSP-bound DQN learner). Its
 * SRAM at DP = 2, 1296 BRAM36 + ~200 URAM = ~13 MB, is close to the
 * paper's 12.3 MB. For CartPole (hidden 8) every stage reaches one or a few
 * cycles per sample, and the model then adds pipelines (DP up to 6-7 at
 * large B) where the paper kept 2. */
static void test_table_vi(void **state) {
  (void)state;
  rd_fpga_part_t u200;
  load_part("u200", &u200);
  rd_fpga_workload_t w;
  rd_fpga_workload_default(&w);
  w.capacity = 1u << 20;
  w.fanout = 2;
  w.leaf_bits = 16;
  w.algo = RD_FPGA_DDPG;
  static const uint32_t A[] = {11, 256, 256, 3}, C[] = {14, 256, 256, 1};
  mlp(&w.net[0], 4, A);
  mlp(&w.net[1], 4, C);
  rd_fpga_estimate_t e;
  rd_error_t err;

  w.batch = 32;
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_OK);
  assert_int_equal(e.rmm.s, 1);
  assert_int_equal(e.learner.slrs, 2);

  w.batch = 1024;
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_OK);
  assert_int_equal(e.rmm.s, 32);
  assert_int_equal(e.rmm.used.dsp, 1280);
  assert_true(e.rmm.used.lut >= 32 * 40 * RD_FPGA_RMM_LUT_PER_STAGE);
  double rmm_mb = (e.rmm.used.bram36 * 36864.0 + e.rmm.used.uram * 294912.0) / 8 / 1e6;
  assert_true(rmm_mb > 4.0 && rmm_mb < 7.0);
  assert_int_equal(e.learner.dp, 2);
  assert_int_equal(e.learner.pi, 512);
  double learner_mb =
      (e.learner.used.bram36 * 36864.0 + e.learner.used.uram * 294912.0) / 8 / 1e6;
  assert_true(learner_mb > 9.0 && learner_mb < 16.0);
  assert_true(e.learner.used.dsp > 2557);

  w.batch = 16384;
  assert_int_equal(rd_fpga_model_estimate(&u200, &w, &e, &err), RD_OK);
  assert_int_equal(e.rmm.s, 32);
  assert_string_equal(e.rmm.limit, "dsp");
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_parts_shipped),
         cmocka_unit_test(test_part_find_errors),
         cmocka_unit_test(test_parts_malformed),
         cmocka_unit_test(test_rmm_widths),
         cmocka_unit_test(test_rmm_cycles),
         cmocka_unit_test(test_rmm_s_growth),
         cmocka_unit_test(test_rmm_update_ports),
         cmocka_unit_test(test_rmm_fixed_ports),
         cmocka_unit_test(test_learner_structure),
         cmocka_unit_test(test_learner_proportional),
         cmocka_unit_test(test_learner_dp_search),
         cmocka_unit_test(test_resource_limits),
         cmocka_unit_test(test_extreme_parts_finite),
         cmocka_unit_test(test_monotonic_in_batch),
         cmocka_unit_test(test_workload_errors),
         cmocka_unit_test(test_fit_errors),
         cmocka_unit_test(test_table_vi))
