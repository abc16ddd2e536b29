/* test_table.c - the CPU prioritized replay table against its contract
 * (backends/cpu/table.h): row storage, FIFO eviction, keys and staleness,
 * the priority transform and max-priority default, the exact Philox
 * sampling stream (checked against a naive O(N) reference), the sampling
 * distribution (chi-square), importance weights and every error path.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd_fixed.h"
#include "rd_philox.h"
#include "table.h"
#include "vpow.h"
#include "rd_rng.h"
#include "rdt_rmm.h"
#include "rdt_schema.h"
#include "rdt_main.h"

/* ------------------------------------------------------------------ */
/* Helpers: schema, config, rows                                        */
/* ------------------------------------------------------------------ */

/* CartPole-like rows: obs float32[4], action int32, reward float32,
 * next_obs float32[4], done bool. */
enum { F_OBS, F_ACTION, F_REWARD, F_NEXT, F_DONE, NF };
static const size_t field_size[NF] = {16, 4, 4, 16, 1};

static void cartpole_schema(rd_schema_t *s) { rdt_cartpole_schema(s, 4, 0); }

static void make_config(rd_table_config_t *c, uint32_t capacity, uint32_t fanout, double alpha,
                        double epsilon, uint64_t seed) {
  rd_table_config_default(c);
  cartpole_schema(&c->schema);
  c->capacity = capacity;
  c->fanout = fanout;
  c->alpha = alpha;
  c->epsilon = epsilon;
  c->seed = seed;
}

static void init_ok(rd_table_t *t, const rd_table_config_t *c) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_init(t, c, &err);
  if (rc != RD_OK) fail_msg("rd_table_init: %s: %s", rd_err_name(rc), err.msg);
}

/* A table of make_config's settings (the config is not needed again). */
static void make_table(rd_table_t *t, uint32_t capacity, uint32_t fanout, double alpha,
                       double epsilon, uint64_t seed) {
  rd_table_config_t c;
  make_config(&c, capacity, fanout, alpha, epsilon, seed);
  init_ok(t, &c);
}

/* The bytes of one row of key k, field by field. Every field depends on k,
 * so a row from another key (an evicted one, a neighbour) is detected. */
static void encode_row(uint64_t k, uint8_t *dst[NF]) {
  float obs[4], next[4];
  for (int j = 0; j < 4; j++) {
    obs[j] = (float)(k & 0xFFFFF) + 0.25f * (float)j;
    next[j] = -(float)(k & 0xFFFFF) - 0.25f * (float)j - 1.0f;
  }
  int32_t action = (int32_t)(k * 2654435761u) ^ 0x5a5a5a5a;
  float reward = (float)(k & 0xFFFF) * 0.5f + 0.125f;
  uint8_t done = (uint8_t)(k & 1);
  memcpy(dst[F_OBS], obs, sizeof obs);
  memcpy(dst[F_ACTION], &action, sizeof action);
  memcpy(dst[F_REWARD], &reward, sizeof reward);
  memcpy(dst[F_NEXT], next, sizeof next);
  memcpy(dst[F_DONE], &done, sizeof done);
}

/* n rows of keys first_key, first_key + 1, ... as insert columns. */
typedef struct {
  size_t n;
  uint8_t *mem[NF];
  rd_cbuf_t cols[NF];
} rows_t;

static void rows_make(rows_t *r, uint64_t first_key, size_t n) {
  r->n = n;
  for (int f = 0; f < NF; f++) {
    r->mem[f] = malloc(n * field_size[f] + 1);
    assert_non_null(r->mem[f]);
    r->cols[f].data = r->mem[f];
    r->cols[f].bytes = n * field_size[f];
  }
  for (size_t i = 0; i < n; i++) {
    uint8_t *dst[NF];
    for (int f = 0; f < NF; f++) dst[f] = r->mem[f] + i * field_size[f];
    encode_row(first_key + i, dst);
  }
}

static void rows_free(rows_t *r) {
  for (int f = 0; f < NF; f++) free(r->mem[f]);
}

/* Row i of gathered sample columns must be the row of key k. */
static void check_row(const rd_buf_t cols[NF], size_t i, uint64_t k) {
  uint8_t exp_mem[NF][16];
  uint8_t *exp[NF];
  for (int f = 0; f < NF; f++) exp[f] = exp_mem[f];
  encode_row(k, exp);
  for (int f = 0; f < NF; f++) {
    const uint8_t *got = (const uint8_t *)cols[f].data + i * field_size[f];
    if (memcmp(got, exp[f], field_size[f]) != 0)
      fail_msg("sample row %zu (key %llu): field %d does not hold that key's data", i,
               (unsigned long long)k, f);
  }
}

/* Insert n rows (keys next_key ..) and check the returned keys. */
static void insert_ok(rd_table_t *t, size_t n, const double *prio) {
  rows_t r;
  uint64_t first = rd_table_next_key(t);
  rows_make(&r, first, n);
  uint64_t *keys = malloc(n * sizeof *keys);
  assert_non_null(keys);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_insert(t, n, r.cols, prio, keys, &err);
  if (rc != RD_OK) fail_msg("rd_table_insert(n=%zu): %s: %s", n, rd_err_name(rc), err.msg);
  for (size_t i = 0; i < n; i++) assert_int_equal(keys[i], first + i);
  assert_int_equal(rd_table_next_key(t), first + n);
  free(keys);
  rows_free(&r);
}

/* Sample outputs with optional gathered columns. */
typedef struct {
  size_t n;
  uint64_t *keys;
  double *prob;
  double *w;
  rd_buf_t cols[NF];
  rd_sample_out_t out;
} sout_t;

static void sout_alloc(sout_t *s, size_t n, bool with_cols) {
  memset(s, 0, sizeof *s);
  s->n = n;
  s->keys = malloc(n * sizeof *s->keys);
  s->prob = malloc(n * sizeof *s->prob);
  s->w = malloc(n * sizeof *s->w);
  assert_true(s->keys && s->prob && s->w);
  for (int f = 0; f < NF; f++) {
    s->cols[f].bytes = n * field_size[f];
    s->cols[f].data = malloc(s->cols[f].bytes);
    assert_non_null(s->cols[f].data);
  }
  s->out.keys = s->keys;
  s->out.probabilities = s->prob;
  s->out.weights = s->w;
  s->out.cols = with_cols ? s->cols : NULL;
}

static void sout_free(sout_t *s) {
  free(s->keys);
  free(s->prob);
  free(s->w);
  for (int f = 0; f < NF; f++) free(s->cols[f].data);
}

static void sample_ok(rd_table_t *t, size_t n, double beta, unsigned flags, const sout_t *s) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_sample(t, n, beta, flags, &s->out, &err);
  if (rc != RD_OK) fail_msg("rd_table_sample(n=%zu): %s: %s", n, rd_err_name(rc), err.msg);
}

static void update_ok(rd_table_t *t, size_t n, const uint64_t *keys, const double *prio,
                      size_t expect_stale) {
  rd_error_t err;
  rd_error_clear(&err);
  size_t n_stale = 12345;
  int rc = rd_table_update(t, n, keys, prio, &n_stale, &err);
  if (rc != RD_OK) fail_msg("rd_table_update(n=%zu): %s: %s", n, rd_err_name(rc), err.msg);
  assert_int_equal(n_stale, expect_stale);
}

static double get_p(const rd_table_t *t, uint64_t key) {
  rd_error_t err;
  rd_error_clear(&err);
  double p = -1;
  int rc = rd_table_get_priority(t, key, &p, &err);
  if (rc != RD_OK)
    fail_msg("rd_table_get_priority(%llu): %s: %s", (unsigned long long)key, rd_err_name(rc),
             err.msg);
  return p;
}

/* The integer leaf of a live key, recovered from its stored priority
 * (exact: the stored priority is leaf / 2^F). */
static uint64_t get_leaf(const rd_table_t *t, uint64_t key) {
  double p = get_p(t, key);
  uint64_t leaf = rd_fixed_from_priority(&t->fixed, p);
  assert_true(rd_fixed_to_priority(&t->fixed, leaf) == p);
  return leaf;
}

static void assert_rel(double got, double exp, double tol, const char *what, size_t i) {
  double d = fabs(got - exp);
  if (!(d <= tol * fabs(exp)))
    fail_msg("%s[%zu] = %.17g, expected %.17g (relative error %.3g > %.3g)", what, i, got, exp,
             exp != 0 ? d / fabs(exp) : d, tol);
}

static void check_tree(const rd_table_t *t) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_sumtree_check(&t->tree, &err);
  if (rc != RD_OK) fail_msg("rd_sumtree_check: %s", err.msg);
}

static void check_err(int rc, const rd_error_t *err, int code, const char *what) {
  if (rc != code)
    fail_msg("%s: returned %s (%s), expected %s", what, rd_err_name(rc), err->msg,
             rd_err_name(code));
  assert_int_equal(err->code, code);
  if (strlen(err->msg) == 0) fail_msg("%s: %s with an empty message", what, rd_err_name(rc));
}

static uint64_t rng_below(uint64_t *s, uint64_t n) { return rd_splitmix64(s) % n; }

/* ------------------------------------------------------------------ */
/* 0. Defaults                                                          */
/* ------------------------------------------------------------------ */

static void test_config_defaults(void **state) {
  (void)state;
  rd_table_config_t c;
  memset(&c, 0x5a, sizeof c);
  rd_table_config_default(&c);
  assert_int_equal(c.schema.n_fields, 0);
  if (c.fanout != 16) fail_msg("default fanout %u; table.h documents 16", c.fanout);
  assert_true(c.alpha == 0.6);
  assert_true(c.epsilon == 1e-6);
  assert_true(c.max_priority == 1048576.0);
  assert_int_equal(c.max_batch, 65536);
  assert_int_equal(c.threads, 1);
  /* The defaults plus a schema and capacity make a working table. */
  cartpole_schema(&c.schema);
  c.capacity = 10;
  rd_table_t t;
  init_ok(&t, &c);
  assert_int_equal(rd_table_size(&t), 0);
  assert_int_equal(rd_table_next_key(&t), 0);
  rd_table_stats_t st = rd_table_stats(&t);
  assert_int_equal(st.inserts + st.samples + st.updates + st.stale_updates, 0);
  assert_true(rd_table_memsize(&t) >= 10 * (16 + 4 + 4 + 16 + 1));
  rd_table_free(&t);
}

/* ------------------------------------------------------------------ */
/* 1. Insert / sample round trip                                        */
/* ------------------------------------------------------------------ */

static void test_roundtrip_rows(void **state) {
  (void)state;
  rd_table_t t;
  make_table(&t, 64, 4, 0.6, 1e-6, 7);
  uint64_t rng = 1;
  sout_t s;
  sout_alloc(&s, 64, true);
  /* Batches of several sizes, with and without priorities; 150 items wrap
   * the 64 slots twice. After each insert, every sampled row is intact. */
  static const size_t sizes[] = {1, 7, 20, 3, 33, 64, 5, 17};
  for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
    size_t n = sizes[b];
    double prio[64];
    for (size_t i = 0; i < n; i++) prio[i] = 0.1 + 5 * rd_rng_unit(&rng);
    insert_ok(&t, n, (b & 1) ? prio : NULL);
    uint64_t size = rd_table_size(&t), nk = rd_table_next_key(&t);
    for (int rep = 0; rep < 4; rep++) {
      size_t m = (size_t)(1 + rng_below(&rng, size));
      /* Poison the output so stale bytes cannot pass for a gathered row. */
      for (int f = 0; f < NF; f++) memset(s.cols[f].data, 0xEE, s.cols[f].bytes);
      sample_ok(&t, m, 0.5, rep & 1 ? RD_SAMPLE_STRATIFIED : 0, &s);
      for (size_t i = 0; i < m; i++) {
        assert_true(s.keys[i] < nk && s.keys[i] >= nk - size);
        check_row(s.cols, i, s.keys[i]);
      }
    }
  }
  assert_int_equal(rd_table_next_key(&t), 150);
  assert_int_equal(rd_table_size(&t), 64);

  /* Output columns larger than needed are fine; NULL cols gathers nothing. */
  sout_t big;
  sout_alloc(&big, 64, true);
  for (int f = 0; f < NF; f++) big.cols[f].bytes += 13;
  sample_ok(&t, 10, 1.0, 0, &big);
  for (size_t i = 0; i < 10; i++) check_row(big.cols, i, big.keys[i]);
  sout_t nocols;
  sout_alloc(&nocols, 8, false);
  sample_ok(&t, 8, 1.0, 0, &nocols);
  for (size_t i = 0; i < 8; i++) assert_true(nocols.keys[i] >= 150 - 64 && nocols.keys[i] < 150);
  sout_free(&nocols);
  sout_free(&big);
  sout_free(&s);
  rd_table_free(&t);
}

/* ------------------------------------------------------------------ */
/* 2. The sampling distribution: chi-square goodness of fit             */
/* ------------------------------------------------------------------ */

/* Upper 0.001 quantile of chi-square with df degrees of freedom, by the
 * Wilson-Hilferty approximation: df * (1 - 2/(9df) + z sqrt(2/(9df)))^3
 * with z = 3.0902 = Phi^-1(0.999). A correct sampler exceeds it with
 * probability ~0.001 per check over random seeds (the seeds here are fixed,
 * so the test is deterministic; the rate is what a reseeded run would see).
 * With stratified sampling the counts vary less than multinomial ones, so
 * there the rate is lower still. */
static double chi2_crit(double df) {
  const double z = 3.0902;
  double h = 2.0 / (9.0 * df);
  double c = 1.0 - h + z * sqrt(h);
  return df * c * c * c;
}

/* Pearson's statistic over cells merged in index order until each has an
 * expected count >= 20 (a short tail is merged into the last full cell). */
static double chi2_stat(size_t m, const double *expected, const uint64_t *observed, int *df) {
  double stat = 0, e = 0, o = 0, last_e = 0, last_o = 0;
  int cells = 0;
  bool have_last = false;
  for (size_t i = 0; i < m; i++) {
    e += expected[i];
    o += (double)observed[i];
    if (e >= 20) {
      if (have_last) {
        stat += (last_o - last_e) * (last_o - last_e) / last_e;
        cells++;
      }
      last_e = e;
      last_o = o;
      have_last = true;
      e = o = 0;
    }
  }
  assert_true(have_last);
  last_e += e;
  last_o += o;
  stat += (last_o - last_e) * (last_o - last_e) / last_e;
  cells++;
  *df = cells - 1;
  return stat;
}

static void chi2_case(const char *name, const double *raw, size_t n_items, uint32_t fanout,
                      unsigned flags, uint64_t seed) {
  rd_table_config_t c;
  /* alpha = 1, epsilon = 0: the stored priority is the raw one. */
  make_config(&c, (uint32_t)n_items, fanout, 1.0, 0.0, seed);
  rd_table_t t;
  init_ok(&t, &c);
  insert_ok(&t, n_items, raw);

  /* Expected P(i) = leaf_i / total from the stored priorities. */
  uint64_t *leaf = calloc(n_items, sizeof *leaf);
  double *P = calloc(n_items, sizeof *P), *expected = calloc(n_items, sizeof *expected);
  uint64_t *count = calloc(n_items, sizeof *count);
  assert_true(leaf && P && expected && count);
  uint64_t total = 0;
  for (size_t i = 0; i < n_items; i++) {
    leaf[i] = get_leaf(&t, i);
    total += leaf[i];
    /* alpha 1, epsilon 0: the stored priority is raw[i] rounded to 2^-F. */
    assert_int_equal(leaf[i], rd_fixed_from_priority(&t.fixed, raw[i]));
  }
  assert_int_equal(total, rd_sumtree_total(&t.tree));
  for (size_t i = 0; i < n_items; i++) P[i] = (double)leaf[i] / (double)total;

  /* About 200,000 samples in batches no larger than the table; stratified
   * batches are smaller than the table so strata do not align with items. */
  const size_t B = (flags & RD_SAMPLE_STRATIFIED) ? n_items * 4 / 5 : n_items;
  const size_t batches = (200000 + B - 1) / B;
  sout_t s;
  sout_alloc(&s, B, false);
  for (size_t b = 0; b < batches; b++) {
    sample_ok(&t, B, 0.4, flags, &s);
    for (size_t i = 0; i < B; i++) {
      assert_true(s.keys[i] < n_items);
      count[s.keys[i]]++;
      assert_rel(s.prob[i], P[s.keys[i]], 1e-12, "probability", i);
    }
  }
  for (size_t i = 0; i < n_items; i++) expected[i] = (double)(B * batches) * P[i];
  int df;
  double stat = chi2_stat(n_items, expected, count, &df);
  double crit = chi2_crit(df);
  print_message("  chi2 %-28s flags=%u: stat %.1f, df %d, critical(0.001) %.1f\n", name, flags,
                stat, df, crit);
  assert_true(df >= 10);
  if (!(stat < crit)) fail_msg("%s: chi-square %.1f >= %.1f (df %d)", name, stat, crit, df);

  /* The check has power: the same counts against a distribution that
   * differs from P (a 20% tilt between the two halves, renormalised) are
   * rejected, so a sampler off by that much would fail above. */
  double tilt_sum = 0;
  for (size_t i = 0; i < n_items; i++) tilt_sum += P[i] * (i < n_items / 2 ? 1.2 : 0.8);
  for (size_t i = 0; i < n_items; i++)
    expected[i] = (double)(B * batches) * P[i] * (i < n_items / 2 ? 1.2 : 0.8) / tilt_sum;
  int df2;
  double stat2 = chi2_stat(n_items, expected, count, &df2);
  assert_true(stat2 > chi2_crit(df2));

  sout_free(&s);
  free(leaf);
  free(P);
  free(expected);
  free(count);
  rd_table_free(&t);
}

static void test_chi2_uniform(void **state) {
  (void)state;
  const size_t n = 250;
  double raw[250];
  for (size_t i = 0; i < n; i++) raw[i] = 1.0;
  chi2_case("uniform iid", raw, n, 16, 0, 11);
  chi2_case("uniform stratified", raw, n, 4, RD_SAMPLE_STRATIFIED, 12);
}

static void test_chi2_skewed(void **state) {
  (void)state;
  const size_t n = 300;
  double quad[300], geo[300];
  for (size_t i = 0; i < n; i++) {
    quad[i] = (double)((i + 1) * (i + 1)); /* P(i) ~ i^2 */
    geo[i] = pow(0.985, (double)i);        /* P(i) ~ 0.985^i, ratio ~90 */
  }
  chi2_case("quadratic iid", quad, n, 16, 0, 21);
  chi2_case("quadratic stratified", quad, n, 8, RD_SAMPLE_STRATIFIED, 22);
  chi2_case("geometric iid", geo, n, 2, 0, 23);
  chi2_case("geometric stratified", geo, n, 64, RD_SAMPLE_STRATIFIED, 24);
}

/* ------------------------------------------------------------------ */
/* 3. Property test against a naive reference                           */
/* ------------------------------------------------------------------ */

/* The reference: its own per-slot keys and integer leaves, computed with
 * the same transform and rd_fixed_from_priority, its own max_p, next_key,
 * size, draw counter and stats. Sampling is a linear prefix scan. */
typedef struct {
  uint32_t cap;
  double alpha, eps;
  uint64_t seed;
  rd_fixed_t fixed;
  uint64_t *key, *leaf; /* per slot */
  uint64_t *prefix;     /* scratch: inclusive prefix sums per slot */
  double max_p;
  uint64_t next_key, size, draws;
  rd_table_stats_t stats;
} ref_t;

static void ref_init(ref_t *r, const rd_table_t *t) {
  memset(r, 0, sizeof *r);
  r->cap = t->config.capacity;
  r->alpha = t->config.alpha;
  r->eps = t->config.epsilon;
  r->seed = t->config.seed;
  r->fixed = t->fixed;
  r->key = calloc(r->cap, sizeof *r->key);
  r->leaf = calloc(r->cap, sizeof *r->leaf);
  r->prefix = calloc(r->cap, sizeof *r->prefix);
  assert_true(r->key && r->leaf && r->prefix);
  r->max_p = 1.0;
}

static void ref_free(ref_t *r) {
  free(r->key);
  free(r->leaf);
  free(r->prefix);
}

/* The table's transform: x + eps, the special exponents, else rd_vpow
 * (within 1 ulp of pow: test_vpow). */
static double ref_transform(const ref_t *r, double x) {
  double b = x + r->eps;
  if (r->alpha == 1.0) return b;
  if (r->alpha == 0.5) return sqrt(b);
  if (r->alpha == 0.0) return 1.0;
  return rd_vpow1(b, r->alpha);
}

static void ref_insert(ref_t *r, size_t n, const double *raw) {
  uint64_t dflt = rd_fixed_from_priority(&r->fixed, r->max_p);
  double batch_max = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t slot = (uint32_t)(r->next_key % r->cap);
    r->key[slot] = r->next_key;
    if (raw) {
      double p = ref_transform(r, raw[i]);
      r->leaf[slot] = rd_fixed_from_priority(&r->fixed, p);
      if (p > batch_max) batch_max = p;
    } else {
      r->leaf[slot] = dflt;
    }
    r->next_key++;
    if (r->size < r->cap) r->size++;
  }
  if (batch_max > r->max_p) r->max_p = batch_max;
  r->stats.inserts += n;
}

static bool ref_live(const ref_t *r, uint64_t k) {
  return k < r->next_key && k >= r->next_key - r->size;
}

/* table.h: a stale update "is skipped and counted, never applied". We read
 * that as: its priority has no effect at all, so it does not raise the
 * max-priority default either. Flip this to model the other reading. */
static const bool stale_updates_raise_max = false;

static size_t ref_update(ref_t *r, size_t n, const uint64_t *keys, const double *raw) {
  size_t stale = 0;
  for (size_t i = 0; i < n; i++) {
    if (!ref_live(r, keys[i])) {
      stale++;
      if (stale_updates_raise_max && ref_transform(r, raw[i]) > r->max_p)
        r->max_p = ref_transform(r, raw[i]);
      continue;
    }
    double p = ref_transform(r, raw[i]);
    r->leaf[keys[i] % r->cap] = rd_fixed_from_priority(&r->fixed, p);
    if (p > r->max_p) r->max_p = p;
    r->stats.updates++;
  }
  r->stats.stale_updates += stale;
  return stale;
}

static uint64_t ref_total(ref_t *r) {
  uint64_t run = 0;
  for (uint32_t s = 0; s < r->cap; s++) r->prefix[s] = run += r->leaf[s];
  return run;
}

/* Smallest slot with prefix > target (prefix must be fresh). */
static uint32_t ref_find(const ref_t *r, uint64_t target) {
  uint32_t lo = 0, hi = r->cap - 1;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (r->prefix[mid] > target)
      hi = mid;
    else
      lo = mid + 1;
  }
  assert_true(r->prefix[lo] > target && (lo == 0 || r->prefix[lo - 1] <= target));
  return lo;
}

/* Compare everything observable with the reference. */
static void ref_check_all(ref_t *r, const rd_table_t *t) {
  assert_int_equal(rd_table_size(t), r->size);
  assert_int_equal(rd_table_next_key(t), r->next_key);
  assert_int_equal(t->draws, r->draws);
  check_tree(t);
  assert_int_equal(rd_sumtree_total(&t->tree), ref_total(r));
  for (uint64_t k = r->next_key - r->size; k < r->next_key; k++) {
    double p = get_p(t, k);
    double exp = rd_fixed_to_priority(&r->fixed, r->leaf[k % r->cap]);
    if (p != exp)
      fail_msg("key %llu: stored priority %.17g, reference %.17g", (unsigned long long)k, p,
               exp);
  }
  rd_table_stats_t st = rd_table_stats(t);
  assert_int_equal(st.inserts, r->stats.inserts);
  assert_int_equal(st.samples, r->stats.samples);
  assert_int_equal(st.updates, r->stats.updates);
  assert_int_equal(st.stale_updates, r->stats.stale_updates);
}

/* A raw priority drawn from a mix that includes 0, tiny values (leaf 0 or
 * the minimum leaf 1) and a spread of ordinary ones. */
static double gen_raw(uint64_t *rng) {
  double u = rd_rng_unit(rng);
  if (u < 0.08) return 0.0;
  if (u < 0.12) return 1e-13 * (1 + rd_rng_unit(rng));
  if (u < 0.16) return 1.0;
  if (u < 0.80) return 4.0 * rd_rng_unit(rng);
  return 100.0 * rd_rng_unit(rng);
}

static void prop_sample(rd_table_t *t, ref_t *r, uint64_t *rng, sout_t *s) {
  size_t maxn = r->size < 64 ? (size_t)r->size : 64;
  if (rng_below(rng, 20) == 0) maxn = r->size < 600 ? (size_t)r->size : 600;
  size_t n = (size_t)(1 + rng_below(rng, maxn));
  unsigned flags = (unsigned)rng_below(rng, 4);
  double beta;
  switch (rng_below(rng, 4)) {
  case 0: beta = 0.0; break;
  case 1: beta = 1.0; break;
  default: beta = rd_rng_unit(rng);
  }
  bool with_cols = rng_below(rng, 2) == 0;
  s->out.cols = with_cols ? s->cols : NULL;
  uint64_t total = ref_total(r);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_sample(t, n, beta, flags, &s->out, &err);
  if (total == 0) {
    check_err(rc, &err, RD_EEMPTY, "sample with every priority zero");
    assert_int_equal(t->draws, r->draws);
    return;
  }
  if (rc != RD_OK) fail_msg("sample n=%zu: %s: %s", n, rd_err_name(rc), err.msg);
  double wmax = 0;
  double *wexp = malloc(n * sizeof *wexp);
  assert_non_null(wexp);
  for (size_t i = 0; i < n; i++) {
    uint64_t u = rd_philox_u64(r->seed, r->draws + i);
    uint64_t target;
    if (flags & RD_SAMPLE_STRATIFIED)
      target = (uint64_t)(((unsigned __int128)i * total + rd_scale_u64(u, total)) / n);
    else
      target = rd_scale_u64(u, total);
    uint32_t slot = ref_find(r, target);
    uint64_t k = r->key[slot];
    if (s->keys[i] != k)
      fail_msg("sample %zu of %zu (draw %llu, flags %u): key %llu, reference %llu", i, n,
               (unsigned long long)(r->draws + i), flags, (unsigned long long)s->keys[i],
               (unsigned long long)k);
    double P = (double)r->leaf[slot] / (double)total;
    assert_rel(s->prob[i], P, 1e-12, "probability", i);
    wexp[i] = pow((double)r->size * P, -beta);
    if (wexp[i] > wmax) wmax = wexp[i];
    if (with_cols) check_row(s->cols, i, k);
  }
  for (size_t i = 0; i < n; i++)
    assert_rel(s->w[i], (flags & RD_SAMPLE_RAW_WEIGHTS) ? wexp[i] : wexp[i] / wmax, 1e-12,
               "weight", i);
  free(wexp);
  r->draws += n;
  r->stats.samples += n;
  assert_int_equal(t->draws, r->draws);
}

static void prop_insert(rd_table_t *t, ref_t *r, uint64_t *rng) {
  size_t n;
  uint64_t u = rng_below(rng, 100);
  if (u < 90)
    n = (size_t)(1 + rng_below(rng, 64));
  else if (u < 99)
    n = (size_t)(65 + rng_below(rng, 300));
  else
    n = r->cap;
  if (n > r->cap) n = r->cap;
  double *raw = NULL;
  if (rng_below(rng, 2)) {
    raw = malloc(n * sizeof *raw);
    assert_non_null(raw);
    for (size_t i = 0; i < n; i++) raw[i] = gen_raw(rng);
  }
  uint64_t first = r->next_key;
  double dflt = rd_fixed_to_priority(&r->fixed, rd_fixed_from_priority(&r->fixed, r->max_p));
  insert_ok(t, n, raw);
  ref_insert(r, n, raw);
  if (raw == NULL) {
    /* Say plainly when the max-priority default is what diverged. */
    double got = get_p(t, first);
    if (got != dflt)
      fail_msg("insert without priorities: key %llu got %.17g, reference max-priority "
               "default %.17g",
               (unsigned long long)first, got, dflt);
  }
  free(raw);
}

static void prop_update(rd_table_t *t, ref_t *r, uint64_t *rng) {
  if (r->next_key == 0) return;
  size_t n = (size_t)(1 + rng_below(rng, 64));
  if (rng_below(rng, 50) == 0) n = (size_t)(1024 + rng_below(rng, 1000)); /* threaded path */
  uint64_t *keys = malloc(n * sizeof *keys);
  double *raw = malloc(n * sizeof *raw);
  assert_true(keys && raw);
  uint64_t first_live = r->next_key - r->size;
  for (size_t i = 0; i < n; i++) {
    uint64_t c = rng_below(rng, 10);
    if (c < 2 && first_live > 0)
      keys[i] = rng_below(rng, first_live); /* stale */
    else if (c < 3 && i > 0)
      keys[i] = keys[rng_below(rng, i)]; /* duplicate inside the batch */
    else
      keys[i] = first_live + rng_below(rng, r->size); /* live */
    raw[i] = gen_raw(rng);
  }
  size_t stale = ref_update(r, n, keys, raw);
  update_ok(t, n, keys, raw, stale);
  free(keys);
  free(raw);
}

/* A call that must fail and change nothing; the reference does nothing and
 * the next checks show whether the table really did nothing. */
static void prop_bad_call(rd_table_t *t, ref_t *r, uint64_t *rng) {
  rd_error_t err;
  rd_error_clear(&err);
  double raw[4] = {1, 2, 3, 4};
  switch (rng_below(rng, 3)) {
  case 0: {
    size_t n = r->cap < 4 ? r->cap : 4;
    rows_t rows;
    rows_make(&rows, r->next_key, n);
    raw[n - 1] = NAN;
    check_err(rd_table_insert(t, n, rows.cols, raw, NULL, &err), &err, RD_EINVAL,
              "insert NaN (property)");
    rows_free(&rows);
    break;
  }
  case 1: {
    if (r->size == 0) return;
    uint64_t keys[4] = {r->next_key - 1, r->next_key - r->size, r->next_key - 1, r->next_key};
    check_err(rd_table_update(t, 4, keys, raw, NULL, &err), &err, RD_ENOTFOUND,
              "update unissued key (property)");
    break;
  }
  default: {
    if (r->size == 0) return;
    uint64_t keys[4] = {r->next_key - 1, r->next_key - r->size, r->next_key - 1,
                        r->next_key - 1};
    raw[3] = -0.5;
    check_err(rd_table_update(t, 4, keys, raw, NULL, &err), &err, RD_EINVAL,
              "update negative (property)");
    break;
  }
  }
}

static void property_run(uint32_t fanout, uint32_t capacity, double alpha, double eps,
                         uint32_t threads, uint64_t seed, int ops) {
  rd_table_config_t c;
  make_config(&c, capacity, fanout, alpha, eps, seed);
  c.threads = threads;
  rd_table_t t;
  init_ok(&t, &c);
  ref_t r;
  ref_init(&r, &t);
  uint64_t rng = seed * 0x100000001B3ull + fanout;
  sout_t s;
  sout_alloc(&s, 600, true);

  /* First a sample of the empty table (an error), then an insert whose
   * largest transformed priority is above 1, so the max-priority default is
   * the same whether or not the initial 1.0 counts as "seen". */
  rd_error_t err;
  rd_error_clear(&err);
  check_err(rd_table_sample(&t, 1, 0.5, 0, &s.out, &err), &err, RD_EEMPTY, "empty sample");
  double first[3] = {50.0, 0.5, 2.0};
  size_t n_first = capacity < 3 ? capacity : 3;
  insert_ok(&t, n_first, first);
  ref_insert(&r, n_first, first);

  for (int op = 0; op < ops; op++) {
    uint64_t u = rng_below(&rng, 100);
    if (u < 35)
      prop_insert(&t, &r, &rng);
    else if (u < 63)
      prop_update(&t, &r, &rng);
    else if (u < 97)
      prop_sample(&t, &r, &rng, &s);
    else
      prop_bad_call(&t, &r, &rng);
    if (op % 997 == 0) ref_check_all(&r, &t);
  }
  ref_check_all(&r, &t);
  /* The run really wrapped the ring many times and did every kind of op. */
  assert_true(r.next_key > 50ull * capacity);
  assert_true(r.stats.stale_updates > 100 && r.stats.updates > 1000 && r.stats.samples > 1000);
  print_message("  K=%2u: %llu inserts, %llu samples, %llu updates, %llu stale\n", fanout,
                (unsigned long long)r.stats.inserts, (unsigned long long)r.stats.samples,
                (unsigned long long)r.stats.updates, (unsigned long long)r.stats.stale_updates);
  sout_free(&s);
  ref_free(&r);
  rd_table_free(&t);
}

static void test_property_vs_reference(void **state) {
  (void)state;
  /* Capacity 1000 is not a power of any fanout. Parameters vary so that
   * zero leaves (epsilon 0), minimum leaves and OpenMP paths all occur. */
  property_run(2, 1000, 0.6, 1e-6, 1, 101, 20000);
  property_run(4, 1000, 1.0, 0.0, 1, 102, 20000);
  property_run(8, 1000, 0.7, 0.0, 1, 103, 20000);
  property_run(16, 1000, 0.6, 1e-6, 4, 104, 20000);
  property_run(32, 1000, 1.0, 1e-3, 1, 105, 20000);
  property_run(64, 1000, 0.5, 0.0, 2, 106, 20000);
  property_run(16, 1, 0.6, 1e-6, 1, 107, 3000); /* a single slot */
}

/* ------------------------------------------------------------------ */
/* 4. Importance-sampling weights                                       */
/* ------------------------------------------------------------------ */

static void test_is_weights(void **state) {
  (void)state;
  rd_table_config_t c;
  /* capacity 100 but only 60 items: N must be the size, not the capacity. */
  make_config(&c, 100, 4, 1.0, 0.0, 99);
  rd_table_t a, b;
  init_ok(&a, &c);
  init_ok(&b, &c);
  double raw[60];
  for (int i = 0; i < 60; i++) raw[i] = 0.25 * (i + 1) * (i % 3 + 1);
  insert_ok(&a, 60, raw);
  insert_ok(&b, 60, raw);
  uint64_t total = 0, leaf[60];
  for (int i = 0; i < 60; i++) total += leaf[i] = get_leaf(&a, (uint64_t)i);
  const double N = 60;

  static const double betas[] = {0.0, 0.4, 0.7, 1.0};
  sout_t sa, sb;
  sout_alloc(&sa, 50, false);
  sout_alloc(&sb, 50, false);
  for (size_t bi = 0; bi < 4; bi++) {
    for (unsigned strat = 0; strat <= RD_SAMPLE_STRATIFIED; strat += RD_SAMPLE_STRATIFIED) {
      double beta = betas[bi];
      /* Same seed, same draws: a normalised and a raw batch of the same keys. */
      sample_ok(&a, 50, beta, strat, &sa);
      sample_ok(&b, 50, beta, strat | RD_SAMPLE_RAW_WEIGHTS, &sb);
      double wmax = 0, raw_w[50];
      for (size_t i = 0; i < 50; i++) {
        assert_int_equal(sa.keys[i], sb.keys[i]);
        double P = (double)leaf[sa.keys[i]] / (double)total;
        assert_rel(sa.prob[i], P, 1e-12, "probability", i);
        raw_w[i] = pow(N * P, -beta);
        if (raw_w[i] > wmax) wmax = raw_w[i];
      }
      double got_max = 0;
      for (size_t i = 0; i < 50; i++) {
        assert_rel(sb.w[i], raw_w[i], 1e-12, "raw weight", i);
        assert_rel(sa.w[i], raw_w[i] / wmax, 1e-12, "weight", i);
        assert_true(sa.w[i] <= 1.0);
        if (sa.w[i] > got_max) got_max = sa.w[i];
        if (beta == 0) {
          assert_true(sa.w[i] == 1.0);
          assert_true(sb.w[i] == 1.0);
        }
      }
      assert_true(got_max == 1.0); /* exactly */
      if (beta > 0) {
        /* The raw weights are not all 1: the flag matters. */
        bool differs = false;
        for (size_t i = 0; i < 50; i++) differs |= fabs(sb.w[i] - sa.w[i]) > 1e-6;
        assert_true(differs);
      }
    }
  }
  sout_free(&sa);
  sout_free(&sb);
  rd_table_free(&a);
  rd_table_free(&b);
}

/* ------------------------------------------------------------------ */
/* 5. FIFO eviction                                                     */
/* ------------------------------------------------------------------ */

static void check_live_12_to_20(rd_table_t *t) {
  assert_int_equal(rd_table_size(t), 8);
  assert_int_equal(rd_table_next_key(t), 20);
  bool seen[8] = {false};
  sout_t s;
  sout_alloc(&s, 8, true);
  for (int rep = 0; rep < 200; rep++) {
    for (int f = 0; f < NF; f++) memset(s.cols[f].data, 0, s.cols[f].bytes);
    sample_ok(t, 8, 0.5, rep & 1 ? RD_SAMPLE_STRATIFIED : 0, &s);
    for (size_t i = 0; i < 8; i++) {
      if (s.keys[i] < 12 || s.keys[i] >= 20)
        fail_msg("sampled key %llu outside [12, 20)", (unsigned long long)s.keys[i]);
      seen[s.keys[i] - 12] = true;
      check_row(s.cols, i, s.keys[i]);
    }
  }
  for (int k = 0; k < 8; k++)
    if (!seen[k]) fail_msg("live key %d never sampled in 1600 draws", 12 + k);
  for (uint64_t k = 0; k < 12; k++) {
    rd_error_t err;
    rd_error_clear(&err);
    double p;
    check_err(rd_table_get_priority(t, k, &p, &err), &err, RD_ERANGE, "evicted key priority");
  }
  sout_free(&s);
}

static void test_fifo_eviction(void **state) {
  (void)state;
  rd_table_config_t c;
  make_config(&c, 8, 2, 1.0, 0.0, 5);
  /* One item per batch, default priorities (all 1.0: uniform). */
  rd_table_t t;
  init_ok(&t, &c);
  for (int i = 0; i < 20; i++) {
    insert_ok(&t, 1, NULL);
    assert_int_equal(rd_table_size(&t), i < 8 ? i + 1 : 8);
  }
  check_live_12_to_20(&t);
  rd_table_free(&t);

  /* Batches 5, 8, 7: the second and third wrap around the ring. With
   * priorities, so the leaves must land on the right slots too. */
  init_ok(&t, &c);
  static const size_t sizes[] = {5, 8, 7};
  uint64_t k0 = 0;
  for (int b = 0; b < 3; b++) {
    double prio[8];
    for (size_t i = 0; i < sizes[b]; i++) prio[i] = 1.0 + (double)((k0 + i) % 3);
    insert_ok(&t, sizes[b], prio);
    k0 += sizes[b];
    for (uint64_t k = k0 > 8 ? k0 - 8 : 0; k < k0; k++)
      assert_true(get_p(&t, k) == 1.0 + (double)(k % 3));
    check_tree(&t);
  }
  check_live_12_to_20(&t);
  rd_table_free(&t);

  /* And one batch of 8 = capacity into a half-full table. */
  init_ok(&t, &c);
  insert_ok(&t, 4, NULL);
  insert_ok(&t, 8, NULL);
  insert_ok(&t, 8, NULL);
  check_live_12_to_20(&t);
  rd_table_free(&t);
}

/* ------------------------------------------------------------------ */
/* 6. Stale keys                                                        */
/* ------------------------------------------------------------------ */

static void test_stale_keys(void **state) {
  (void)state;
  rd_table_t t;
  make_table(&t, 16, 4, 1.0, 0.0, 3);
  double prio[16];
  for (int i = 0; i < 16; i++) prio[i] = 1.0 + i;
  insert_ok(&t, 16, prio); /* keys 0..15 */
  uint64_t old[16];
  for (int i = 0; i < 16; i++) old[i] = (uint64_t)i;
  for (int i = 0; i < 16; i++) prio[i] = 0.5 * (i % 4 + 1);
  insert_ok(&t, 16, prio); /* keys 16..31 overwrite every slot */

  double before[16];
  for (int i = 0; i < 16; i++) before[i] = get_p(&t, 16 + (uint64_t)i);
  uint64_t total = rd_sumtree_total(&t.tree);
  rd_table_stats_t st0 = rd_table_stats(&t);

  /* All stale: a large priority would change a slot if applied. */
  double big[16];
  for (int i = 0; i < 16; i++) big[i] = 1000.0 + i;
  update_ok(&t, 16, old, big, 16);
  for (int i = 0; i < 16; i++) assert_true(get_p(&t, 16 + (uint64_t)i) == before[i]);
  assert_int_equal(rd_sumtree_total(&t.tree), total);
  rd_table_stats_t st1 = rd_table_stats(&t);
  assert_int_equal(st1.stale_updates, st0.stale_updates + 16);
  assert_int_equal(st1.updates, st0.updates);
  /* n_stale may be NULL. */
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_table_update(&t, 2, old, big, NULL, &err), RD_OK);
  assert_int_equal(rd_table_stats(&t).stale_updates, st0.stale_updates + 18);

  /* Mixed: stale keys 3 and 5 skipped; live 20, 25 and 20 again applied in
   * order (the later value wins). */
  uint64_t mk[5] = {3, 20, 5, 25, 20};
  double mp[5] = {900, 7.0, 901, 9.0, 11.0};
  update_ok(&t, 5, mk, mp, 2);
  for (int i = 0; i < 16; i++) {
    uint64_t k = 16 + (uint64_t)i;
    double exp = k == 20 ? 11.0 : k == 25 ? 9.0 : before[i];
    assert_true(get_p(&t, k) == exp);
  }
  uint64_t sum = 0;
  for (uint64_t k = 16; k < 32; k++) sum += get_leaf(&t, k);
  assert_int_equal(rd_sumtree_total(&t.tree), sum);
  rd_table_stats_t st2 = rd_table_stats(&t);
  assert_int_equal(st2.stale_updates, st0.stale_updates + 20);
  assert_int_equal(st2.updates, st0.updates + 3);
  check_tree(&t);

  /* Skipped updates were never applied, so their large priorities did not
   * raise the max-priority default: the next default is 16 (the largest
   * priority inserted or applied), not 1000+. */
  insert_ok(&t, 1, NULL);
  double dflt = get_p(&t, 32);
  if (dflt != 16.0)
    fail_msg("after stale updates with priorities 1000+, the max-priority default is %g, "
             "not 16: a skipped (stale) update raised it",
             dflt);
  rd_table_free(&t);
}

/* ------------------------------------------------------------------ */
/* 7. Seed reproducibility                                              */
/* ------------------------------------------------------------------ */

static void test_seed_reproducibility(void **state) {
  (void)state;
  rd_table_config_t c;
  make_config(&c, 500, 16, 0.6, 1e-6, 0x1234567890abcdefull);
  rd_table_t a, b, d;
  init_ok(&a, &c);
  init_ok(&b, &c);
  c.seed ^= 1;
  init_ok(&d, &c);
  uint64_t rng = 77;
  double raw[400];
  for (int i = 0; i < 400; i++) raw[i] = gen_raw(&rng);
  insert_ok(&a, 400, raw);
  insert_ok(&b, 400, raw);
  insert_ok(&d, 400, raw);
  sout_t sa, sb, sd;
  sout_alloc(&sa, 64, true);
  sout_alloc(&sb, 64, true);
  sout_alloc(&sd, 64, true);
  size_t differ = 0;
  for (int rep = 0; rep < 6; rep++) {
    unsigned flags = (unsigned)rep % 4;
    sample_ok(&a, 64, 0.5, flags, &sa);
    sample_ok(&b, 64, 0.5, flags, &sb);
    sample_ok(&d, 64, 0.5, flags, &sd);
    assert_memory_equal(sa.keys, sb.keys, 64 * sizeof(uint64_t));
    assert_memory_equal(sa.prob, sb.prob, 64 * sizeof(double));
    assert_memory_equal(sa.w, sb.w, 64 * sizeof(double));
    for (int f = 0; f < NF; f++) assert_memory_equal(sa.cols[f].data, sb.cols[f].data, 64 * field_size[f]);
    for (size_t i = 0; i < 64; i++) differ += sa.keys[i] != sd.keys[i];
  }
  /* 384 draws over 400 items: a different seed must give a different
   * sequence (nearly every position differs). */
  assert_true(differ > 200);

  /* One stream per table: i.i.d. batches of 40 and 24 continue where the
   * last call stopped, giving the same keys as one batch of 64. */
  sample_ok(&a, 40, 0.5, 0, &sa);
  sample_ok(&a, 24, 0.5, 0, &sd);
  memcpy(sa.keys + 40, sd.keys, 24 * sizeof(uint64_t));
  sample_ok(&b, 64, 0.5, 0, &sb);
  assert_memory_equal(sa.keys, sb.keys, 64 * sizeof(uint64_t));
  sout_free(&sa);
  sout_free(&sb);
  sout_free(&sd);
  rd_table_free(&a);
  rd_table_free(&b);
  rd_table_free(&d);
}

/* ------------------------------------------------------------------ */
/* 8. Max-priority default                                              */
/* ------------------------------------------------------------------ */

static void test_max_priority_default(void **state) {
  (void)state;
  rd_table_t t;
  make_table(&t, 32, 4, 0.5, 0.0, 8);
  insert_ok(&t, 4, NULL); /* keys 0..3 */
  for (uint64_t k = 0; k < 4; k++) assert_true(get_p(&t, k) == 1.0);

  uint64_t k1 = 1;
  double x = 9.0; /* p = 9^0.5 = 3 */
  update_ok(&t, 1, &k1, &x, 0);
  assert_true(get_p(&t, 1) == 3.0);
  insert_ok(&t, 3, NULL); /* keys 4..6 get 3 */
  for (uint64_t k = 4; k < 7; k++) assert_true(get_p(&t, k) == 3.0);

  /* An explicit insert priority raises it too: 16 -> 4. */
  double x16[2] = {16.0, 0.25};
  insert_ok(&t, 2, x16); /* keys 7, 8 */
  assert_true(get_p(&t, 7) == 4.0);
  assert_true(get_p(&t, 8) == 0.5);
  insert_ok(&t, 1, NULL); /* key 9 */
  assert_true(get_p(&t, 9) == 4.0);

  /* Lowering priorities never lowers the default. */
  uint64_t ks[2] = {7, 1};
  double lows[2] = {0.01, 0.04};
  update_ok(&t, 2, ks, lows, 0);
  insert_ok(&t, 1, NULL); /* key 10 */
  assert_true(get_p(&t, 10) == 4.0);

  /* A value that is not a dyadic fraction: the default is the transformed
   * value, rounded to fixed point like any other. */
  uint64_t k2 = 2;
  double x2 = 17.5;
  update_ok(&t, 1, &k2, &x2, 0);
  double p2 = rd_fixed_to_priority(&t.fixed, rd_fixed_from_priority(&t.fixed, sqrt(17.5)));
  assert_true(get_p(&t, 2) == p2);
  insert_ok(&t, 2, NULL); /* keys 11, 12 */
  assert_true(get_p(&t, 11) == p2);
  assert_true(get_p(&t, 12) == p2);

  /* The default is the max ever seen, even after its item is evicted:
   * overwrite all 32 slots with explicit small priorities. */
  double small[32];
  for (int i = 0; i < 32; i++) small[i] = 0.01;
  insert_ok(&t, 32, small);
  insert_ok(&t, 1, NULL);
  assert_true(get_p(&t, rd_table_next_key(&t) - 1) == p2);
  rd_table_free(&t);
}

/* ------------------------------------------------------------------ */
/* 9. Priority transform                                                */
/* ------------------------------------------------------------------ */

static void transform_case(double alpha, double eps) {
  static const double xs[] = {0.0, 1e-6, 1e-3, 0.1, 0.5, 1.0, 2.5, 7.0, 100.0, 12345.0};
  const size_t n = sizeof xs / sizeof xs[0];
  rd_table_t t;
  make_table(&t, 64, 8, alpha, eps, 9);
  insert_ok(&t, n, xs);
  /* Update other keys with the same values: the same transform applies. */
  insert_ok(&t, n, NULL);
  uint64_t keys[16];
  for (size_t i = 0; i < n; i++) keys[i] = n + i;
  update_ok(&t, n, keys, xs, 0);
  for (size_t i = 0; i < n; i++) {
    double want = pow(xs[i] + eps, alpha);
    /* What the table computes (ref_transform: rd_vpow, within 1 ulp of
     * pow), then fixed-point rounded. */
    ref_t rr = {.eps = eps, .alpha = alpha};
    double mine = ref_transform(&rr, xs[i]);
    assert_true(fabs(mine - want) <= 2 * DBL_EPSILON * want);
    double exact = rd_fixed_to_priority(&t.fixed, rd_fixed_from_priority(&t.fixed, mine));
    for (int pass = 0; pass < 2; pass++) {
      double got = get_p(&t, i + (pass ? n : 0));
      /* Fixed-point rounding is at most half a unit of 2^-F. */
      if (!(fabs(got - want) <= 0.5 / t.fixed.scale + 2 * DBL_EPSILON * want + 1e-300))
        fail_msg("alpha %g eps %g x %g: stored %.17g, (x+eps)^alpha = %.17g", alpha, eps, xs[i],
                 got, want);
      /* Relative 1e-9 wherever the rounding step 2^-F allows it. */
      if (want * t.fixed.scale >= 1e9) assert_rel(got, want, 1e-9, "transformed priority", i);
      assert_true(got == exact);
      if (alpha == 0) assert_true(got == 1.0);
    }
  }
  rd_table_free(&t);
}

static void test_priority_transform(void **state) {
  (void)state;
  transform_case(0.6, 1e-6);
  transform_case(0.5, 0.01);
  transform_case(1.0, 0.0);
  transform_case(0.0, 1e-6);
  transform_case(0.0, 0.0); /* 0^0 = 1 by the C pow convention */

  /* max_priority bounds the transformed value, not the raw one. */
  rd_table_config_t c;
  make_config(&c, 10, 4, 0.5, 0.0, 9);
  c.max_priority = 4.0;
  rd_table_t t;
  init_ok(&t, &c);
  double ok[3] = {9.0, 16.0, 15.99}; /* p = 3, 4 (== max), 3.9987 */
  insert_ok(&t, 3, ok);
  assert_true(get_p(&t, 0) == 3.0);
  assert_true(get_p(&t, 1) == 4.0);
  rd_error_t err;
  rd_error_clear(&err);
  rows_t rows;
  rows_make(&rows, 3, 1);
  double over = 16.001;
  check_err(rd_table_insert(&t, 1, rows.cols, &over, NULL, &err), &err, RD_ERANGE,
            "transformed priority above max_priority");
  rows_free(&rows);
  rd_table_free(&t);
}

/* A priority equal to max_priority is accepted ("largest p accepted after
 * the transform"), for every item of a full table at once, whatever the
 * capacity: the fixed-point scale must leave room for capacity * leaf(max)
 * in the tree. Powers of two are the risky shapes: there
 * (2^63 - 1) / capacity is not representable as a double and rounds up. */
static void test_max_priority_boundary(void **state) {
  (void)state;
  static const struct {
    uint32_t capacity;
    double max_priority;
  } cases[] = {{16, 4.0}, {8, 1048576.0}, {512, 1048576.0}, {1, 1048576.0},
               {1024, 1048576.0}, {1000, 1048576.0}, {100, 3.0}, {64, 0.5}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    uint32_t cap = cases[ci].capacity;
    double mp = cases[ci].max_priority;
    rd_table_config_t c;
    make_config(&c, cap, 4, 1.0, 0.0, 6);
    c.max_priority = mp;
    rd_table_t t;
    init_ok(&t, &c);
    double *prio = malloc(cap * sizeof *prio);
    assert_non_null(prio);
    for (uint32_t i = 0; i < cap; i++) prio[i] = mp;
    rows_t rows;
    rows_make(&rows, 0, cap);
    uint8_t *before = malloc(cap * t.row_bytes);
    assert_non_null(before);
    memcpy(before, t.host_rows, cap * t.row_bytes);
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_table_insert(&t, cap, rows.cols, prio, NULL, &err);
    if (rc != RD_OK) {
      bool rows_changed = memcmp(before, t.host_rows, cap * t.row_bytes) != 0;
      fail_msg("capacity %u, max_priority %g (F = %d): insert of priority == max_priority "
               "failed with %s (%s)%s",
               cap, mp, t.fixed.frac_bits, rd_err_name(rc), err.msg,
               rows_changed ? "; and the failed call overwrote rows" : "");
    }
    /* Every leaf is leaf(max) and the total did not overflow. */
    uint64_t lmax = rd_fixed_from_priority(&t.fixed, mp);
    for (uint64_t k = 0; k < cap; k++) assert_true(get_p(&t, k) == mp);
    assert_true(lmax <= (UINT64_MAX >> 1) / cap);
    assert_int_equal(rd_sumtree_total(&t.tree), (uint64_t)cap * lmax);
    check_tree(&t);
    /* Update to max_priority works too, and sampling sees P = 1/cap. */
    uint64_t k0 = 0;
    update_ok(&t, 1, &k0, &mp, 0);
    sout_t o;
    sout_alloc(&o, 1, false);
    sample_ok(&t, 1, 1.0, 0, &o);
    assert_rel(o.prob[0], 1.0 / cap, 1e-12, "probability", 0);
    sout_free(&o);
    free(before);
    rows_free(&rows);
    free(prio);
    rd_table_free(&t);
  }
}

/* ------------------------------------------------------------------ */
/* 10. Error paths change nothing                                       */
/* ------------------------------------------------------------------ */

typedef struct {
  uint64_t size, next_key, draws, total;
  double max_p;
  rd_table_stats_t stats;
  uint64_t *leaves;
  uint8_t *rows; /* the host rows */
} snap_t;

static void snap_take(snap_t *s, const rd_table_t *t) {
  s->size = rd_table_size(t);
  s->next_key = rd_table_next_key(t);
  s->draws = t->draws;
  s->total = rd_sumtree_total(&t->tree);
  s->max_p = t->max_p;
  s->stats = rd_table_stats(t);
  uint32_t cap = t->config.capacity;
  s->leaves = malloc(cap * sizeof *s->leaves);
  assert_non_null(s->leaves);
  for (uint32_t i = 0; i < cap; i++) s->leaves[i] = rd_sumtree_get(&t->tree, i);
  s->rows = malloc(cap * t->row_bytes);
  assert_non_null(s->rows);
  memcpy(s->rows, t->host_rows, cap * t->row_bytes);
}

static void snap_same(const snap_t *s, const rd_table_t *t, const char *what) {
  rd_table_stats_t st = rd_table_stats(t);
  uint32_t cap = t->config.capacity;
  if (s->size != rd_table_size(t) || s->next_key != rd_table_next_key(t) ||
      s->draws != t->draws || s->total != rd_sumtree_total(&t->tree) ||
      memcmp(&s->stats, &st, sizeof st) != 0 || s->max_p != t->max_p)
    fail_msg("%s: the failed call changed the table's counters or total", what);
  for (uint32_t i = 0; i < cap; i++)
    if (s->leaves[i] != rd_sumtree_get(&t->tree, i))
      fail_msg("%s: the failed call changed the priority of slot %u", what, i);
  if (memcmp(s->rows, t->host_rows, cap * t->row_bytes) != 0)
    fail_msg("%s: the failed call wrote rows", what);
  check_tree(t);
}

static void snap_free(snap_t *s) {
  free(s->leaves);
  free(s->rows);
}

/* Insert of n rows that must fail with code; nothing may change, and the
 * keys output is not written. */
static void bad_insert(rd_table_t *t, size_t n, const rd_cbuf_t *cols, const double *prio,
                       int code, const char *what) {
  snap_t s;
  snap_take(&s, t);
  uint64_t keys[64];
  memset(keys, 0xA5, sizeof keys);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_insert(t, n, cols, prio, n <= 64 ? keys : NULL, &err);
  check_err(rc, &err, code, what);
  snap_same(&s, t, what);
  for (size_t i = 0; i < 64; i++)
    if (keys[i] != 0xA5A5A5A5A5A5A5A5ull) fail_msg("%s: keys output written", what);
  snap_free(&s);
}

static void bad_update(rd_table_t *t, size_t n, const uint64_t *keys, const double *prio,
                       int code, const char *what) {
  snap_t s;
  snap_take(&s, t);
  rd_error_t err;
  rd_error_clear(&err);
  size_t n_stale = 0;
  int rc = rd_table_update(t, n, keys, prio, &n_stale, &err);
  check_err(rc, &err, code, what);
  snap_same(&s, t, what);
  snap_free(&s);
}

/* Sample that must fail; the output buffers keep their poison. */
static void bad_sample(rd_table_t *t, size_t n, double beta, unsigned flags, sout_t *o, int code,
                       const char *what) {
  memset(o->keys, 0xA5, o->n * sizeof *o->keys);
  memset(o->prob, 0xA5, o->n * sizeof *o->prob);
  memset(o->w, 0xA5, o->n * sizeof *o->w);
  for (int f = 0; f < NF; f++) memset(o->cols[f].data, 0xA5, o->n * field_size[f]);
  snap_t s;
  snap_take(&s, t);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_sample(t, n, beta, flags, &o->out, &err);
  check_err(rc, &err, code, what);
  snap_same(&s, t, what);
  const uint8_t *bufs[3 + NF] = {(const uint8_t *)o->keys, (const uint8_t *)o->prob,
                                 (const uint8_t *)o->w};
  size_t lens[3 + NF] = {o->n * 8, o->n * 8, o->n * 8};
  for (int f = 0; f < NF; f++) {
    bufs[3 + f] = o->cols[f].data;
    lens[3 + f] = o->n * field_size[f];
  }
  for (int b = 0; b < 3 + NF; b++)
    for (size_t i = 0; i < lens[b]; i++)
      if (bufs[b][i] != 0xA5) fail_msg("%s: output buffer %d written at byte %zu", what, b, i);
  snap_free(&s);
}

static void test_errors_insert_update(void **state) {
  (void)state;
  rd_table_config_t c;
  make_config(&c, 32, 4, 0.6, 1e-6, 4);
  c.max_batch = 16;
  rd_table_t t;
  init_ok(&t, &c);
  uint64_t rng = 5;
  for (int b = 0; b < 3; b++) {
    double p[8];
    for (int i = 0; i < 8; i++) p[i] = gen_raw(&rng);
    insert_ok(&t, 8, p);
  }
  insert_ok(&t, 12, NULL); /* 36 items: wrapped, size 32 */
  sout_t so;
  sout_alloc(&so, 16, true);
  sample_ok(&t, 16, 0.5, 0, &so); /* draws > 0 */
  uint64_t live[3] = {10, 20, 35};
  double lp[3] = {3, 0.2, 1.5};
  update_ok(&t, 3, live, lp, 0);

  rows_t r4;
  rows_make(&r4, rd_table_next_key(&t), 4);
  static const struct {
    double v;
    int code;
    const char *name;
  } bad[] = {{NAN, RD_EINVAL, "NaN"},
             {-NAN, RD_EINVAL, "-NaN"},
             {INFINITY, RD_EINVAL, "+inf"},
             {-INFINITY, RD_EINVAL, "-inf"},
             {-1.0, RD_EINVAL, "negative"},
             {-1e-300, RD_EINVAL, "tiny negative"},
             {1e11, RD_ERANGE, "above max_priority after transform"},
             {DBL_MAX, RD_ERANGE, "DBL_MAX"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char what[128];
    double p[4] = {1.0, 2.0, 0.5, bad[i].v};
    snprintf(what, sizeof what, "insert with a %s priority last", bad[i].name);
    bad_insert(&t, 4, r4.cols, p, bad[i].code, what);
    p[3] = 1.0;
    p[0] = bad[i].v;
    snprintf(what, sizeof what, "insert with a %s priority first", bad[i].name);
    bad_insert(&t, 4, r4.cols, p, bad[i].code, what);

    uint64_t keys[4] = {30, 31, 30, 34};
    double q[4] = {5.0, 6.0, 7.0, bad[i].v};
    snprintf(what, sizeof what, "update with a %s priority last", bad[i].name);
    bad_update(&t, 4, keys, q, bad[i].code, what);
  }

  /* A bool byte other than 0 or 1, in the first, a middle or the last row:
   * refused before anything changes. */
  for (size_t row = 0; row < 4; row += 1) {
    static const uint8_t bad_bool[] = {2, 0xFF};
    for (size_t b = 0; b < 2; b++) {
      uint8_t *done = r4.mem[F_DONE];
      uint8_t keep = done[row];
      done[row] = bad_bool[b];
      char what[128];
      snprintf(what, sizeof what, "insert with done = 0x%02x in row %zu", bad_bool[b], row);
      bad_insert(&t, 4, r4.cols, NULL, RD_EINVAL, what);
      rd_error_t err;
      rd_error_clear(&err);
      rd_table_insert(&t, 4, r4.cols, NULL, NULL, &err);
      char want[64];
      snprintf(want, sizeof want, "\"done\" (bool): row %zu", row);
      if (strstr(err.msg, want) == NULL) fail_msg("%s: \"%s\" lacks \"%s\"", what, err.msg, want);
      done[row] = keep;
    }
  }

  /* Keys never issued: next_key, far beyond, and the largest key. */
  uint64_t nk = rd_table_next_key(&t);
  const uint64_t unissued[] = {nk, nk + 1, nk + 1000, UINT64_MAX};
  for (size_t i = 0; i < 4; i++) {
    uint64_t keys[4] = {nk - 1, nk - 2, 2 /* stale */, unissued[i]};
    double q[4] = {5.0, 6.0, 7.0, 8.0};
    bad_update(&t, 4, keys, q, RD_ENOTFOUND, "update of a key never issued, last");
  }

  /* Update batch above max_batch (16), of valid live keys. */
  uint64_t k17[17];
  double p17[17];
  for (int i = 0; i < 17; i++) {
    k17[i] = nk - 1 - (uint64_t)i;
    p17[i] = 1.0;
  }
  bad_update(&t, 17, k17, p17, RD_ETOOBIG, "update batch above max_batch");

  /* Insert batch above max_batch (17 > 16, below capacity 32). */
  rows_t r17;
  rows_make(&r17, nk, 17);
  bad_insert(&t, 17, r17.cols, NULL, RD_ETOOBIG, "insert batch above max_batch");
  bad_insert(&t, 17, r17.cols, p17, RD_ETOOBIG, "insert batch above max_batch, priorities");
  rows_free(&r17);

  /* n == 0. */
  bad_insert(&t, 0, r4.cols, NULL, RD_EINVAL, "insert n == 0");

  /* A column of the wrong byte size, each field, one short and one long. */
  for (int f = 0; f < NF; f++) {
    rd_cbuf_t cols[NF];
    memcpy(cols, r4.cols, sizeof cols);
    cols[f].bytes = 4 * field_size[f] - 1;
    bad_insert(&t, 4, cols, NULL, RD_EINVAL, "insert column one byte short");
    cols[f].bytes = 4 * field_size[f] + 1;
    bad_insert(&t, 4, cols, NULL, RD_EINVAL, "insert column one byte long");
    cols[f].bytes = 3 * field_size[f];
    bad_insert(&t, 4, cols, NULL, RD_EINVAL, "insert column of 3 rows for 4");
  }
  rows_free(&r4);

  /* Insert batch above capacity (max_batch above it). */
  rd_table_config_t c2;
  make_config(&c2, 8, 2, 0.6, 1e-6, 4);
  rd_table_t t2;
  init_ok(&t2, &c2);
  insert_ok(&t2, 3, NULL);
  rows_t r9;
  rows_make(&r9, 3, 9);
  bad_insert(&t2, 9, r9.cols, NULL, RD_ETOOBIG, "insert batch above capacity");
  rows_free(&r9);
  rd_table_free(&t2);

  /* The table still works and nothing above leaked into it. */
  check_tree(&t);
  sample_ok(&t, 16, 0.5, RD_SAMPLE_STRATIFIED, &so);
  for (size_t i = 0; i < 16; i++) check_row(so.cols, i, so.keys[i]);
  sout_free(&so);
  rd_table_free(&t);
}

static void test_errors_sample(void **state) {
  (void)state;
  rd_table_config_t c;
  make_config(&c, 32, 4, 0.6, 1e-6, 4);
  c.max_batch = 16;
  rd_table_t t;
  init_ok(&t, &c);
  sout_t o;
  sout_alloc(&o, 20, true);

  bad_sample(&t, 1, 0.5, 0, &o, RD_EEMPTY, "sample of an empty table");
  bad_sample(&t, 4, 0.5, RD_SAMPLE_STRATIFIED, &o, RD_EEMPTY, "stratified sample, empty table");

  insert_ok(&t, 5, NULL);
  bad_sample(&t, 6, 0.5, 0, &o, RD_ETOOBIG, "sample above size");
  insert_ok(&t, 16, NULL);
  insert_ok(&t, 16, NULL); /* size 32 */
  sample_ok(&t, 16, 0.5, 0, &o);
  bad_sample(&t, 17, 0.5, 0, &o, RD_ETOOBIG, "sample above max_batch");
  bad_sample(&t, 0, 0.5, 0, &o, RD_EINVAL, "sample n == 0");
  static const double betas[] = {NAN, -0.0001, -1.0, 1.0001, 2.0, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof betas / sizeof betas[0]; i++)
    bad_sample(&t, 4, betas[i], 0, &o, RD_EINVAL, "bad beta");
  /* An output column too small for n rows. */
  for (int f = 0; f < NF; f++) {
    size_t keep = o.cols[f].bytes;
    o.cols[f].bytes = 8 * field_size[f] - 1;
    bad_sample(&t, 8, 0.5, 0, &o, RD_EINVAL, "output column too small");
    o.cols[f].bytes = keep;
  }
  /* Beta at the ends of [0, 1] is fine. */
  sample_ok(&t, 4, 0.0, 0, &o);
  sample_ok(&t, 4, 1.0, 0, &o);
  rd_table_free(&t);

  /* Every priority zero: epsilon 0 and raw 0 (then also after an update
   * zeroes the last positive one). */
  make_config(&c, 16, 4, 0.6, 0.0, 4);
  init_ok(&t, &c);
  double zeros[6] = {0};
  insert_ok(&t, 6, zeros);
  assert_int_equal(rd_sumtree_total(&t.tree), 0);
  bad_sample(&t, 1, 0.5, 0, &o, RD_EEMPTY, "sample with every priority zero");
  bad_sample(&t, 3, 0.5, RD_SAMPLE_STRATIFIED, &o, RD_EEMPTY, "stratified, every priority zero");
  double one = 1.0;
  insert_ok(&t, 1, &one);
  sample_ok(&t, 5, 0.5, 0, &o);
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(o.keys[i], 6);
    assert_true(o.prob[i] == 1.0);
  }
  uint64_t k6 = 6;
  double zero = 0.0;
  update_ok(&t, 1, &k6, &zero, 0);
  bad_sample(&t, 2, 0.5, 0, &o, RD_EEMPTY, "sample after the last positive priority is zeroed");
  sout_free(&o);
  rd_table_free(&t);
}

static void expect_init_fail(const rd_table_config_t *c, int code1, int code2,
                             const char *what) {
  rd_table_t t;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_table_init(&t, c, &err);
  if (rc != code1 && rc != code2) {
    if (rc == RD_OK) rd_table_free(&t);
    fail_msg("rd_table_init with %s: returned %s, expected %s", what, rd_err_name(rc),
             rd_err_name(code1));
  }
  assert_int_equal(err.code, rc);
  if (strlen(err.msg) == 0) fail_msg("rd_table_init with %s: empty message", what);
}

static void test_errors_config(void **state) {
  (void)state;
  rd_table_config_t good, c;
  make_config(&good, 100, 16, 0.6, 1e-6, 1);
  rd_table_t t;
  init_ok(&t, &good); /* the base is valid */
  rd_table_free(&t);

#define BAD_CFG(field, value, code1, code2)                                                  \
  do {                                                                                       \
    c = good;                                                                                \
    c.field = value;                                                                         \
    expect_init_fail(&c, code1, code2, #field " = " #value);                                 \
  } while (0)
  BAD_CFG(capacity, 0, RD_EINVAL, RD_EINVAL);
  BAD_CFG(capacity, (1u << 28) + 1, RD_EINVAL, RD_EINVAL);
  BAD_CFG(capacity, UINT32_MAX, RD_EINVAL, RD_EINVAL);
  BAD_CFG(fanout, 0, RD_EINVAL, RD_EINVAL);
  BAD_CFG(fanout, 1, RD_EINVAL, RD_EINVAL);
  BAD_CFG(fanout, 3, RD_EINVAL, RD_EINVAL);
  BAD_CFG(fanout, 24, RD_EINVAL, RD_EINVAL);
  BAD_CFG(fanout, 128, RD_EINVAL, RD_EINVAL);
  BAD_CFG(alpha, NAN, RD_EINVAL, RD_EINVAL);
  BAD_CFG(alpha, -0.1, RD_EINVAL, RD_EINVAL);
  BAD_CFG(alpha, -INFINITY, RD_EINVAL, RD_EINVAL);
  BAD_CFG(epsilon, -1e-9, RD_EINVAL, RD_EINVAL);
  BAD_CFG(epsilon, NAN, RD_EINVAL, RD_EINVAL);
  /* table.h: RD_EINVAL for a bad config, RD_ERANGE for an unrepresentable
   * max_priority; rd_fixed.h reports a non-positive or non-finite one as
   * RD_ERANGE, so either code is accepted for those. */
  BAD_CFG(max_priority, 0.0, RD_ERANGE, RD_EINVAL);
  BAD_CFG(max_priority, -1.0, RD_ERANGE, RD_EINVAL);
  BAD_CFG(max_priority, NAN, RD_ERANGE, RD_EINVAL);
  BAD_CFG(max_priority, INFINITY, RD_ERANGE, RD_EINVAL);
  BAD_CFG(max_priority, 1e300, RD_ERANGE, RD_ERANGE); /* no fraction bits left */
  BAD_CFG(max_batch, 0, RD_EINVAL, RD_EINVAL);
  BAD_CFG(max_batch, RD_TABLE_MAX_BATCH + 1, RD_EINVAL, RD_EINVAL);
  BAD_CFG(schema.n_fields, 0, RD_EINVAL, RD_EINVAL);
  BAD_CFG(schema.n_fields, RD_SCHEMA_MAX_FIELDS + 1, RD_EINVAL, RD_EINVAL);
  BAD_CFG(schema.fields[1].dtype, RD_DTYPE_INVALID, RD_EINVAL, RD_EINVAL);
  BAD_CFG(schema.fields[2].name[0], '\0', RD_EINVAL, RD_EINVAL);
  BAD_CFG(schema.fields[3].shape[0], 0, RD_EINVAL, RD_EINVAL);
#undef BAD_CFG
  c = good;
  snprintf(c.schema.fields[4].name, sizeof c.schema.fields[4].name, "obs");
  expect_init_fail(&c, RD_EINVAL, RD_EINVAL, "a duplicate field name");

  /* The edges of the valid ranges do work. */
  static const uint32_t fanouts[] = {2, 64};
  for (int i = 0; i < 2; i++) {
    c = good;
    c.fanout = fanouts[i];
    c.alpha = 0.0;
    c.epsilon = 0.0;
    c.max_batch = 1;
    c.capacity = 1;
    init_ok(&t, &c);
    insert_ok(&t, 1, NULL);
    rd_table_free(&t);
  }
}

static void test_get_priority_errors(void **state) {
  (void)state;
  rd_table_t t;
  make_table(&t, 8, 2, 1.0, 0.0, 2);
  rd_error_t err;
  double p = 42.0;
  rd_error_clear(&err);
  check_err(rd_table_get_priority(&t, 0, &p, &err), &err, RD_ENOTFOUND, "key 0 of empty table");
  insert_ok(&t, 8, NULL);
  insert_ok(&t, 3, NULL); /* keys 0..2 stale, 3..10 live */
  for (uint64_t k = 0; k < 3; k++) {
    rd_error_clear(&err);
    check_err(rd_table_get_priority(&t, k, &p, &err), &err, RD_ERANGE, "stale key");
  }
  for (uint64_t k = 3; k < 11; k++) assert_true(get_p(&t, k) == 1.0);
  const uint64_t unissued[] = {11, 12, 1000, UINT64_MAX};
  for (int i = 0; i < 4; i++) {
    rd_error_clear(&err);
    check_err(rd_table_get_priority(&t, unissued[i], &p, &err), &err, RD_ENOTFOUND,
              "unissued key");
  }
  rd_table_free(&t);
}

/* Gather: the rows of live keys, fields skippable, stale and unissued keys
 * refused with nothing written. */
static void test_gather(void **state) {
  (void)state;
  rd_table_t t;
  make_table(&t, 8, 4, 0.6, 1e-6, 7);
  insert_ok(&t, 8, NULL);
  insert_ok(&t, 3, NULL); /* keys 3..10 live; 0..2 overwritten */
  sout_t s;
  sout_alloc(&s, 4, true);
  uint64_t keys[4] = {10, 3, 7, 3};
  rd_error_t err;
  rd_error_clear(&err);
  assert_int_equal(rd_table_gather(&t, 4, keys, s.cols, &err), RD_OK);
  for (size_t i = 0; i < 4; i++) check_row(s.cols, i, keys[i]);

  /* More keys than the rows it prefetches ahead (table.c GATHER_AHEAD),
   * live keys in any order and repeated, slots wrapping the ring. */
  sout_t many;
  sout_alloc(&many, 37, true);
  uint64_t mk[37];
  for (size_t i = 0; i < 37; i++) mk[i] = 3 + (i * 5 + i / 8) % 8;
  assert_int_equal(rd_table_gather(&t, 37, mk, many.cols, &err), RD_OK);
  for (size_t i = 0; i < 37; i++) check_row(many.cols, i, mk[i]);
  sout_free(&many);

  /* A skipped field is left untouched. */
  memset(s.cols[F_OBS].data, 0xAB, s.cols[F_OBS].bytes);
  rd_buf_t partial[NF];
  memcpy(partial, s.cols, sizeof partial);
  partial[F_OBS].data = NULL;
  partial[F_OBS].bytes = 0;
  uint64_t k2[2] = {5, 6};
  assert_int_equal(rd_table_gather(&t, 2, k2, partial, &err), RD_OK);
  assert_int_equal(((uint8_t *)s.cols[F_OBS].data)[0], 0xAB);
  float r5;
  memcpy(&r5, s.cols[F_REWARD].data, 4);
  assert_true(r5 == (float)5 * 0.5f + 0.125f);

  /* Errors write nothing. */
  memset(s.cols[F_ACTION].data, 0xCD, s.cols[F_ACTION].bytes);
  uint64_t stale[2] = {4, 2};
  assert_int_equal(rd_table_gather(&t, 2, stale, s.cols, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "stale"));
  uint64_t unissued[2] = {4, 11};
  assert_int_equal(rd_table_gather(&t, 2, unissued, s.cols, &err), RD_ENOTFOUND);
  rd_buf_t small[NF];
  memcpy(small, s.cols, sizeof small);
  small[F_NEXT].bytes = 16;
  assert_int_equal(rd_table_gather(&t, 2, k2, small, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "next_obs"));
  for (size_t b = 0; b < s.cols[F_ACTION].bytes; b++)
    assert_int_equal(((uint8_t *)s.cols[F_ACTION].data)[b], 0xCD);
  sout_free(&s);
  rd_table_free(&t);
}


/* ------------------------------------------------------------------ */
/* The storage seam and the way back to the CPU (table.h)              */
/* ------------------------------------------------------------------ */

/* A storage module in host memory, row-major like the table's own rows,
 * whose calls fail on demand: writes (fail_write > 0: the n-th
 * write from now) or reads (fail_read: every read while set). */
typedef struct {
  uint32_t cap, nf;
  size_t fb[NF], row;
  uint8_t *mem;
} hstore_t;
static struct {
  int created, destroyed, fail_write, fail_read;
  const rd_rmm_ops_t *rmm_ops_seen;
} HS;

static size_t hs_memsize(uint32_t cap, uint32_t nf, const size_t *fb) {
  size_t b = 0;
  for (uint32_t f = 0; f < nf; f++) b += fb[f];
  return (size_t)cap * b + 1; /* + 1: tell it from the host columns */
}
static int hs_create(void **out, uint32_t cap, uint32_t nf, const size_t *fb,
                     const rd_rmm_ops_t *rmm_ops, void *rmm, rd_error_t *err) {
  (void)rmm;
  HS.rmm_ops_seen = rmm_ops;
  if (cap == 13) return rd_error_set(err, RD_EINVAL, "hstore: no table of 13");
  hstore_t *h = calloc(1, sizeof *h);
  h->cap = cap, h->nf = nf;
  for (uint32_t f = 0; f < nf; f++) h->fb[f] = fb[f], h->row += fb[f];
  h->mem = calloc(cap, h->row);
  HS.created++;
  *out = h;
  return RD_OK;
}
static void hs_destroy(void *p) {
  hstore_t *h = p;
  free(h->mem);
  free(h);
  HS.destroyed++;
}
static int hs_write(void *p, uint32_t first, size_t n, const void *const *src, rd_error_t *err) {
  hstore_t *h = p;
  if (HS.fail_write > 0 && --HS.fail_write == 0)
    return rd_error_set(err, RD_EINTERNAL, "hstore: device lost");
  assert_true(first + n <= h->cap);
  for (size_t i = 0; i < n; i++)
    for (uint32_t f = 0, off = 0; f < h->nf; off += (uint32_t)h->fb[f], f++)
      memcpy(h->mem + (first + i) * h->row + off, (const uint8_t *)src[f] + i * h->fb[f],
             h->fb[f]);
  return RD_OK;
}
static int hs_read(void *p, size_t n, const uint32_t *slots, void *const *dst, rd_error_t *err) {
  hstore_t *h = p;
  if (HS.fail_read) return rd_error_set(err, RD_EINTERNAL, "hstore: device lost");
  for (size_t i = 0; i < n; i++)
    for (uint32_t f = 0, off = 0; f < h->nf; off += (uint32_t)h->fb[f], f++)
      if (dst[f] != NULL)
        memcpy((uint8_t *)dst[f] + i * h->fb[f], h->mem + (size_t)slots[i] * h->row + off,
               h->fb[f]);
  return RD_OK;
}
static const rd_storage_ops_t hstore_ops = {"hstore", hs_memsize, hs_create, hs_destroy,
                                            hs_write, hs_read};

/* Rows, keys, probabilities and weights of one sample of each table. */
static void same_sample(rd_table_t *a, rd_table_t *b, size_t n) {
  sout_t sa, sb;
  sout_alloc(&sa, n, true);
  sout_alloc(&sb, n, true);
  sample_ok(a, n, 0.5, 0, &sa);
  sample_ok(b, n, 0.5, 0, &sb);
  assert_memory_equal(sa.keys, sb.keys, n * sizeof *sa.keys);
  assert_memory_equal(sa.prob, sb.prob, n * sizeof *sa.prob);
  assert_memory_equal(sa.w, sb.w, n * sizeof *sa.w);
  for (size_t i = 0; i < n; i++) check_row(sa.cols, i, sa.keys[i]);
  sout_free(&sa);
  sout_free(&sb);
}

static void test_storage_module(void **state) {
  (void)state;
  rd_table_config_t c, cs;
  make_config(&c, 50, 4, 0.6, 1e-6, 21);
  cs = c;
  cs.storage = &hstore_ops;
  cs.rmm = &rdt_host_rmm_ops;
  rd_table_t t, ts;
  init_ok(&t, &c);
  memset(&HS, 0, sizeof HS);
  init_ok(&ts, &cs);
  assert_ptr_equal(HS.rmm_ops_seen, &rdt_host_rmm_ops); /* told about the table's module */
  assert_null(ts.host_rows);                     /* no host rows */
  assert_string_equal(rd_table_storage_name(&ts), "hstore");
  assert_string_equal(rd_table_storage_name(&t), "host");
  assert_int_equal(rd_table_rows_memsize(&cs), 50 * 41 + 1);
  assert_int_equal(rd_table_rows_memsize(&c), 50 * 41);
  assert_int_equal(rd_table_memsize(&ts), rd_sumtree_memsize(50, 4) + 50 * 41 + 1);
  uint64_t seed = 5;
  for (int round = 0; round < 12; round++) {
    size_t n = 1 + rng_below(&seed, 30); /* wraps the ring of 50 */
    double prio[30];
    for (size_t i = 0; i < n; i++) prio[i] = rd_rng_unit(&seed) * 3;
    insert_ok(&t, n, round % 2 ? prio : NULL);
    insert_ok(&ts, n, round % 2 ? prio : NULL);
    same_sample(&t, &ts, 7);
  }
  sout_t g;
  sout_alloc(&g, 5, true);
  uint64_t keys[5] = {t.next_key - 1, t.next_key - 50, t.next_key - 3, t.next_key - 1, 100};
  rd_error_t err;
  rd_buf_t partial[NF];
  memcpy(partial, g.cols, sizeof partial);
  partial[F_REWARD].data = NULL, partial[F_REWARD].bytes = 0;
  memset(g.cols[F_REWARD].data, 0xEE, g.cols[F_REWARD].bytes);
  assert_int_equal(rd_table_gather(&ts, 4, keys, partial, &err), RD_OK);
  for (size_t i = 0; i < 4; i++) {
    uint8_t exp_mem[NF][16], *exp[NF];
    for (int f = 0; f < NF; f++) exp[f] = exp_mem[f];
    encode_row(keys[i], exp);
    assert_memory_equal((uint8_t *)g.cols[F_OBS].data + i * 16, exp[F_OBS], 16);
    assert_memory_equal((uint8_t *)g.cols[F_DONE].data + i, exp[F_DONE], 1);
  }
  assert_int_equal(((uint8_t *)g.cols[F_REWARD].data)[0], 0xEE); /* skipped */
  sout_free(&g);
  /* A create that fails: RD_EINVAL, nothing held. */
  cs.capacity = 13;
  rd_table_t bad;
  assert_int_equal(rd_table_init(&bad, &cs, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "13"));
  assert_null(bad.rmm);
  rd_table_free(&t);
  rd_table_free(&ts);
  assert_int_equal(HS.created, HS.destroyed);
}

/* The table under test against a CPU table that made the same calls but
 * the failed one. */
static void same_live(rd_table_t *moved, rd_table_t *ref) {
  assert_int_equal(moved->next_key, ref->next_key);
  for (uint64_t k = moved->next_key - moved->size; k < moved->next_key; k++)
    assert_true(get_p(moved, k) == get_p(ref, k));
  for (uint64_t k = ref->next_key - ref->size; k < moved->next_key - moved->size; k++) {
    double p;
    rd_error_t err;
    assert_int_equal(rd_table_get_priority(moved, k, &p, &err), RD_ERANGE); /* dropped: stale */
  }
}

/* Host rows of at least 2 MiB are a huge-page mapping (table.c
 * host_rows_alloc, hugemem.h), fewer come from malloc (the small tables of
 * the other tests): at 2^17 rows of 41 bytes they are a mapping on a 2 MiB
 * boundary. Rows written across the ring's wrap come back intact, and a
 * table moved onto the CPU (rd_table_to_cpu allocates its rows too) serves
 * its rows from them. ASan and the free below check the size the rows are
 * released with. */
static void test_large_rows(void **state) {
  (void)state;
  const uint32_t cap = 1u << 17;
  rd_table_config_t c, cs;
  make_config(&c, cap, 16, 0.6, 1e-6, 31);
  rd_table_t t;
  init_ok(&t, &c);
  assert_int_equal((uintptr_t)t.host_rows % (2u << 20), 0);
  for (uint32_t done = 0; done < cap + 5000; done += 40000)
    insert_ok(&t, cap + 5000 - done < 40000 ? cap + 5000 - done : 40000, NULL);
  assert_int_equal(rd_table_size(&t), cap);
  sout_t s;
  sout_alloc(&s, 2048, true);
  for (int rep = 0; rep < 4; rep++) {
    for (int f = 0; f < NF; f++) memset(s.cols[f].data, 0xEE, s.cols[f].bytes);
    sample_ok(&t, 2048, 0.5, RD_SAMPLE_STRATIFIED, &s);
    for (size_t i = 0; i < 2048; i++) {
      assert_true(s.keys[i] >= 5000);
      check_row(s.cols, i, s.keys[i]);
    }
  }
  rd_table_free(&t);

  /* Rows on a storage module, moved onto host columns. */
  cs = c;
  cs.storage = &hstore_ops;
  memset(&HS, 0, sizeof HS);
  init_ok(&t, &cs);
  insert_ok(&t, 30000, NULL);
  uint64_t lost = 99;
  rd_error_t err;
  assert_int_equal(rd_table_to_cpu(&t, &lost, &err), RD_OK);
  assert_int_equal(lost, 0);
  assert_null(t.config.storage);
  assert_int_equal((uintptr_t)t.host_rows % (2u << 20), 0);
  sample_ok(&t, 2048, 0.5, 0, &s);
  for (size_t i = 0; i < 2048; i++) check_row(s.cols, i, s.keys[i]);
  insert_ok(&t, 40000, NULL);
  sample_ok(&t, 2048, 0.5, 0, &s);
  for (size_t i = 0; i < 2048; i++) check_row(s.cols, i, s.keys[i]);
  sout_free(&s);
  rd_table_free(&t);
}

/* Fields of every size the copies know and sizes they do not (3, 20, 100
 * bytes: table.c ROW_COPY's default), rows of 144 bytes that straddle
 * cache lines: every row written across the ring's wrap comes back, by
 * sample and by gather, with each field's own bytes; a gather into some
 * fields only leaves the others' buffers alone. */
static void test_odd_rows(void **state) {
  (void)state;
  enum { NFO = 6, CAP = 37 };
  static const size_t fsz[NFO] = {3, 20, 8, 1, 100, 12};
  rd_table_config_t c;
  rd_table_config_default(&c);
  rdt_field(&c.schema.fields[0], "a", RD_DTYPE_UINT8, 3);
  rdt_field(&c.schema.fields[1], "b", RD_DTYPE_FLOAT32, 5);
  rdt_field(&c.schema.fields[2], "c", RD_DTYPE_INT64, 0);
  rdt_field(&c.schema.fields[3], "d", RD_DTYPE_BOOL, 0);
  rdt_field(&c.schema.fields[4], "e", RD_DTYPE_UINT8, 100);
  rdt_field(&c.schema.fields[5], "f", RD_DTYPE_INT32, 3);
  c.schema.n_fields = NFO;
  c.capacity = CAP;
  c.max_batch = 64;
  rd_table_t t;
  init_ok(&t, &c);
  assert_int_equal(t.row_bytes, 144);
  /* Byte j of field f of the row of key k: a pattern no other key, field
   * or byte shares (bool: k's parity). Floats are never NaN from it. */
#define ODD_BYTE(k, f, j) ((f) == 3 ? (uint8_t)((k) & 1) : (uint8_t)((k) * 7 + (f) * 31 + (j) + 1))
  uint8_t *in[NFO], *out[NFO];
  for (int f = 0; f < NFO; f++) {
    in[f] = malloc(64 * fsz[f]);
    out[f] = malloc(64 * fsz[f]);
    assert_true(in[f] != NULL && out[f] != NULL);
  }
  for (uint32_t k0 = 0; k0 < 3 * CAP;) {
    size_t n = 1 + (k0 * 13) % 29; /* batches that wrap the ring of 37 */
    rd_cbuf_t cols[NFO];
    for (int f = 0; f < NFO; f++) {
      for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < fsz[f]; j++) in[f][i * fsz[f] + j] = ODD_BYTE(k0 + i, f, j);
      cols[f].data = in[f];
      cols[f].bytes = n * fsz[f];
    }
    rd_error_t err;
    if (rd_table_insert(&t, n, cols, NULL, NULL, &err) != RD_OK) fail_msg("insert: %s", err.msg);
    k0 += (uint32_t)n;
    /* Gather every live key, newest first, into fields 1, 3 and 4 only. */
    uint64_t keys[CAP];
    const size_t live = rd_table_size(&t);
    for (size_t i = 0; i < live; i++) keys[i] = k0 - 1 - i;
    rd_buf_t g[NFO];
    for (int f = 0; f < NFO; f++) {
      memset(out[f], 0xEE, 64 * fsz[f]);
      g[f].data = f == 1 || f == 3 || f == 4 ? out[f] : NULL;
      g[f].bytes = g[f].data ? 64 * fsz[f] : 0;
    }
    if (rd_table_gather(&t, live, keys, g, &err) != RD_OK) fail_msg("gather: %s", err.msg);
    for (int f = 0; f < NFO; f++)
      for (size_t i = 0; i < live; i++)
        for (size_t j = 0; j < fsz[f]; j++) {
          uint8_t want = g[f].data ? ODD_BYTE(keys[i], f, j) : 0xEE;
          if (out[f][i * fsz[f] + j] != want)
            fail_msg("gather after key %u: key %llu field %d byte %zu is %u, not %u", k0,
                     (unsigned long long)keys[i], f, j, out[f][i * fsz[f] + j], want);
        }
    /* A sample's rows, every field. */
    uint64_t skeys[CAP];
    double probs[CAP], w[CAP];
    rd_buf_t sc[NFO];
    for (int f = 0; f < NFO; f++) {
      sc[f].data = out[f];
      sc[f].bytes = 64 * fsz[f];
    }
    rd_sample_out_t so = {.keys = skeys, .probabilities = probs, .weights = w, .cols = sc};
    if (rd_table_sample(&t, live, 0.4, 0, &so, &err) != RD_OK) fail_msg("sample: %s", err.msg);
    for (int f = 0; f < NFO; f++)
      for (size_t i = 0; i < live; i++)
        for (size_t j = 0; j < fsz[f]; j++)
          if (out[f][i * fsz[f] + j] != ODD_BYTE(skeys[i], f, j))
            fail_msg("sample: key %llu field %d byte %zu is %u", (unsigned long long)skeys[i],
                     f, j, out[f][i * fsz[f] + j]);
  }
#undef ODD_BYTE
  for (int f = 0; f < NFO; f++) {
    free(in[f]);
    free(out[f]);
  }
  rd_table_free(&t);
}

/* rd_table_to_cpu reads a module's rows back through buffers of at most
 * 4 MiB (table.c ROWS_BACK_BYTES): with rows of 300 kB a run of the ring
 * takes several reads, and every live row comes back whole. */
static void test_to_cpu_large_rows(void **state) {
  (void)state;
  enum { BIG = 300000, CAP = 37 };
  rd_table_config_t c;
  rd_table_config_default(&c);
  rdt_field(&c.schema.fields[0], "frame", RD_DTYPE_UINT8, BIG);
  rdt_field(&c.schema.fields[1], "k", RD_DTYPE_INT64, 0);
  c.schema.n_fields = 2;
  c.capacity = CAP;
  c.max_batch = 64;
  c.storage = &hstore_ops;
  memset(&HS, 0, sizeof HS);
  rd_table_t t;
  init_ok(&t, &c);
  uint8_t *frame = malloc((size_t)CAP * BIG);
  int64_t kv[CAP];
  assert_non_null(frame);
  for (uint64_t k0 = 0; k0 < 50;) { /* 50 rows: the ring wraps, 37 live */
    size_t n = k0 == 0 ? 30 : 20;
    for (size_t i = 0; i < n; i++) {
      memset(frame + i * BIG, (int)((k0 + i) * 5 + 1), BIG);
      frame[i * BIG + (k0 + i) % BIG] = 0; /* a mark that moves with the key */
      kv[i] = (int64_t)(k0 + i);
    }
    rd_cbuf_t cols[2] = {{frame, n * BIG}, {kv, n * sizeof(int64_t)}};
    rd_error_t err;
    if (rd_table_insert(&t, n, cols, NULL, NULL, &err) != RD_OK) fail_msg("insert: %s", err.msg);
    k0 += n;
  }
  uint64_t lost = 99;
  rd_error_t err;
  assert_int_equal(rd_table_to_cpu(&t, &lost, &err), RD_OK);
  assert_int_equal(lost, 0);
  assert_null(t.config.storage);
  assert_int_equal(rd_table_size(&t), CAP);
  uint64_t keys[CAP];
  for (uint64_t i = 0; i < CAP; i++) keys[i] = 50 - CAP + i;
  rd_buf_t out[2] = {{frame, (size_t)CAP * BIG}, {kv, sizeof kv}};
  if (rd_table_gather(&t, CAP, keys, out, &err) != RD_OK) fail_msg("gather: %s", err.msg);
  for (size_t i = 0; i < CAP; i++) {
    assert_int_equal(kv[i], (int64_t)keys[i]);
    const uint8_t *f = frame + i * BIG;
    for (size_t j = 0; j < BIG; j++) {
      uint8_t want = j == keys[i] % BIG ? 0 : (uint8_t)(keys[i] * 5 + 1);
      if (f[j] != want) fail_msg("key %llu byte %zu: %u, not %u", (unsigned long long)keys[i], j,
                                 f[j], want);
    }
  }
  free(frame);
  rd_table_free(&t);
}

static void test_to_cpu(void **state) {
  (void)state;
  rd_table_config_t c, cs;
  make_config(&c, 40, 4, 0.6, 1e-6, 22);
  rd_table_t t, ref;
  rd_error_t err;
  uint64_t lost = 99;
  /* Already on the CPU: nothing to do. */
  init_ok(&t, &c);
  insert_ok(&t, 10, NULL);
  assert_int_equal(rd_table_to_cpu(&t, &lost, &err), RD_OK);
  assert_int_equal(lost, 0);
  assert_int_equal(t.size, 10);
  rd_table_free(&t);

  /* A failed insert (rows on the module): RD_EINTERNAL, the table refuses
   * until it moves; the move drops the oldest items the insert overlapped. */
  cs = c;
  cs.storage = &hstore_ops;
  memset(&HS, 0, sizeof HS);
  init_ok(&t, &cs);
  init_ok(&ref, &c);
  for (int i = 0; i < 3; i++) insert_ok(&t, 23, NULL), insert_ok(&ref, 23, NULL); /* next slot 29 */
  HS.fail_write = 2; /* the insert's second range (it wraps) */
  rows_t r;
  rows_make(&r, t.next_key, 12);
  assert_int_equal(rd_table_insert(&t, 12, r.cols, NULL, NULL, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "device lost"));
  assert_int_equal(t.failed_insert, 12);
  sout_t s;
  sout_alloc(&s, 3, true);
  assert_int_equal(rd_table_sample(&t, 3, 0.5, 0, &s.out, &err), RD_EINTERNAL);
  assert_non_null(strstr(err.msg, "rd_table_to_cpu"));
  uint64_t k1 = t.next_key - 1;
  assert_int_equal(rd_table_gather(&t, 1, &k1, s.cols, &err), RD_EINTERNAL);
  double one = 1.0;
  assert_int_equal(rd_table_update(&t, 1, &k1, &one, NULL, &err), RD_EINTERNAL);
  assert_int_equal(rd_table_insert(&t, 12, r.cols, NULL, NULL, &err), RD_EINTERNAL);
  assert_int_equal(rd_table_to_cpu(&t, &lost, &err), RD_OK);
  assert_int_equal(lost, 12);
  assert_non_null(strstr(err.msg, "12 items dropped"));
  assert_int_equal(t.size, 28);
  assert_null(t.config.storage);
  assert_int_equal(HS.destroyed, 1);
  same_live(&t, &ref);
  /* Only live items are drawn, with their rows (the reference samples
   * too, so the two streams stay together). */
  sout_t sl;
  sout_alloc(&sl, 20, true);
  sample_ok(&t, 20, 0.5, 0, &sl);
  for (size_t i = 0; i < 20; i++)
    check_row(sl.cols, i, sl.keys[i]), assert_true(sl.keys[i] >= t.next_key - t.size);
  sample_ok(&ref, 20, 0.5, 0, &sl);
  sout_free(&sl);
  check_tree(&t);
  /* Going on: both tables take the same insert, then all 40 slots again. */
  assert_int_equal(rd_table_insert(&t, 12, r.cols, NULL, NULL, &err), RD_OK);
  assert_int_equal(rd_table_insert(&ref, 12, r.cols, NULL, NULL, &err), RD_OK);
  rows_free(&r);
  for (int i = 0; i < 4; i++) insert_ok(&t, 10, NULL), insert_ok(&ref, 10, NULL);
  same_sample(&t, &ref, 20);
  rd_table_free(&t);
  rd_table_free(&ref);

  /* Rows that cannot be read back: every item dropped, keys go on. */
  memset(&HS, 0, sizeof HS);
  init_ok(&t, &cs);
  insert_ok(&t, 30, NULL);
  HS.fail_read = 1;
  assert_int_equal(rd_table_sample(&t, 3, 0.5, 0, &s.out, &err), RD_EINTERNAL);
  assert_int_equal(rd_table_to_cpu(&t, &lost, &err), RD_OK);
  assert_int_equal(lost, 30);
  assert_non_null(strstr(err.msg, "device lost"));
  assert_int_equal(t.size, 0);
  assert_int_equal(rd_table_sample(&t, 1, 0.5, 0, &s.out, &err), RD_EEMPTY);
  insert_ok(&t, 5, NULL); /* keys 30..34 */
  uint64_t old = 29;
  size_t stale = 0;
  assert_int_equal(rd_table_update(&t, 1, &old, &one, &stale, &err), RD_OK);
  assert_int_equal(stale, 1);
  sample_ok(&t, 3, 0.5, 0, &s);
  for (size_t i = 0; i < 3; i++) check_row(s.cols, i, s.keys[i]), assert_true(s.keys[i] >= 30);
  rd_table_free(&t);

  /* A failed sample on the replay module: nothing dropped. */
  cs.storage = NULL;
  cs.rmm = &rdt_host_rmm_ops;
  init_ok(&t, &cs);
  init_ok(&ref, &c);
  insert_ok(&t, 25, NULL), insert_ok(&ref, 25, NULL);
  rdt_host_rmm_fail_sample = 1;
  assert_int_equal(rd_table_sample(&t, 3, 0.5, 0, &s.out, &err), RD_EINTERNAL);
  rdt_host_rmm_fail_sample = 0;
  assert_int_equal(rd_table_sample(&t, 3, 0.5, 0, &s.out, &err), RD_EINTERNAL); /* refused */
  assert_int_equal(rd_table_to_cpu(&t, &lost, &err), RD_OK);
  assert_int_equal(lost, 0);
  assert_null(t.config.rmm);
  assert_string_equal(rd_table_rmm_name(&t), "cpu");
  same_live(&t, &ref);
  same_sample(&t, &ref, 10); /* the failed sample consumed no draws */
  check_tree(&t);
  sout_free(&s);
  rd_table_free(&t);
  rd_table_free(&ref);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_config_defaults),
         cmocka_unit_test(test_roundtrip_rows),
         cmocka_unit_test(test_chi2_uniform),
         cmocka_unit_test(test_chi2_skewed),
         cmocka_unit_test(test_property_vs_reference),
         cmocka_unit_test(test_is_weights),
         cmocka_unit_test(test_fifo_eviction),
         cmocka_unit_test(test_stale_keys),
         cmocka_unit_test(test_seed_reproducibility),
         cmocka_unit_test(test_max_priority_default),
         cmocka_unit_test(test_priority_transform),
         cmocka_unit_test(test_max_priority_boundary),
         cmocka_unit_test(test_errors_insert_update),
         cmocka_unit_test(test_errors_sample),
         cmocka_unit_test(test_errors_config),
         cmocka_unit_test(test_get_priority_errors),
         cmocka_unit_test(test_gather),
         cmocka_unit_test(test_storage_module),
         cmocka_unit_test(test_to_cpu),
         cmocka_unit_test(test_large_rows),
         cmocka_unit_test(test_odd_rows),
         cmocka_unit_test(test_to_cpu_large_rows))
