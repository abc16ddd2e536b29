/* test_fpga_csim.c - the FPGA replay kernel in C-simulation as a table's
 * replay module (backends/fpga/csim_rmm.h) against the table's default CPU
 * sum tree (backends/cpu/table.h).
 *
 * Two tables of one config and seed, one on each module, are driven through
 * the same inserts (with and without priorities, wrapping the ring,
 * evicting), samples (plain and stratified) and updates (stale keys,
 * duplicates, batches over the kernel's 1024-item request): every sample
 * must return the same keys, probabilities and weights (the same leaves
 * for the same targets, since both draw targets from the same stream and
 * total), and after every call the totals and every leaf must agree and
 * the kernel's own tree must be consistent (rmm_check). Shapes: every
 * fanout, capacities at each edge of the built tree sizes (1, 4096, 4097,
 * 65536, 65537), maximal priorities (the widest leaves a table makes).
 * Also: the module's operations directly against rd_sumtree at prefix
 * boundaries; what does not fit (a capacity over 2^20) fails clearly; bad
 * calls change nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csim_rmm.h"
#include "rd_tree_step.h"
#include "sumtree.h"
#include "table.h"
#include "rd_rng.h"
#include "rdt_schema.h"
#include "rdt_main.h"

/* One uint32 field "id": the row's number, to check gathers. */
static void config(rd_table_config_t *c, uint32_t capacity, uint32_t fanout, double max_p,
                   uint64_t seed, const rd_rmm_ops_t *rmm) {
  rdt_scalar_table_config(c, "id", RD_DTYPE_INT32, capacity);
  c->fanout = fanout;
  c->max_priority = max_p;
  c->alpha = 1.0; /* p = x + epsilon: priorities near max_priority are easy to make */
  c->epsilon = 0;
  c->seed = seed;
  c->max_batch = 4096;
  c->rmm = rmm;
}

typedef struct {
  rd_table_t cpu, fpga;
  uint32_t next_id;
} pair_t;

static void pair_init(pair_t *p, uint32_t capacity, uint32_t fanout, double max_p, uint64_t seed) {
  rd_table_config_t c;
  rd_error_t err;
  memset(p, 0, sizeof *p);
  config(&c, capacity, fanout, max_p, seed, NULL);
  if (rd_table_init(&p->cpu, &c, &err) != RD_OK) fail_msg("cpu table: %s", err.msg);
  config(&c, capacity, fanout, max_p, seed, &rd_fpga_csim_rmm_ops);
  if (rd_table_init(&p->fpga, &c, &err) != RD_OK) fail_msg("csim table: %s", err.msg);
  assert_string_equal(rd_table_rmm_name(&p->cpu), "cpu");
  assert_string_equal(rd_table_rmm_name(&p->fpga), "fpga-csim");
  assert_null(p->fpga.tree.mem); /* no CPU tree behind the C-simulated one */
}

static void pair_free(pair_t *p) {
  rd_table_free(&p->cpu);
  rd_table_free(&p->fpga);
}

/* Every leaf, the total, the counters and the kernel's own consistency. */
static void pair_agree(pair_t *p) {
  const uint32_t cap = p->cpu.config.capacity;
  assert_int_equal(rd_sumtree_total(&p->cpu.tree), p->fpga.config.rmm->total(p->fpga.rmm));
  for (uint32_t i = 0; i < cap; i++)
    if (rd_sumtree_get(&p->cpu.tree, i) != p->fpga.config.rmm->leaf(p->fpga.rmm, i))
      fail_msg("leaf %u: cpu %llu, csim %llu", i,
               (unsigned long long)rd_sumtree_get(&p->cpu.tree, i),
               (unsigned long long)p->fpga.config.rmm->leaf(p->fpga.rmm, i));
  assert_int_equal(rd_table_size(&p->cpu), rd_table_size(&p->fpga));
  assert_int_equal(rd_table_next_key(&p->cpu), rd_table_next_key(&p->fpga));
  rd_table_stats_t a = rd_table_stats(&p->cpu), b = rd_table_stats(&p->fpga);
  assert_memory_equal(&a, &b, sizeof a);
  rd_error_t err;
  if (rd_fpga_csim_rmm_check(p->fpga.rmm, &err) != RD_OK) fail_msg("%s", err.msg);
}

/* A raw priority: mostly small, sometimes the table's maximum, sometimes 0. */
static double priority(uint64_t *s, double max_p) {
  uint64_t r = rd_splitmix64(s);
  if ((r & 15) == 0) return max_p;
  if ((r & 15) == 1) return 0;
  return rd_rng_unit(s) * ((r & 16) ? max_p : 4.0 < max_p ? 4.0 : max_p);
}

static void pair_insert(pair_t *p, size_t n, int with_priorities, uint64_t *s) {
  int32_t *ids = malloc(n * sizeof *ids);
  double *pr = malloc(n * sizeof *pr);
  uint64_t *k1 = malloc(n * sizeof *k1), *k2 = malloc(n * sizeof *k2);
  for (size_t i = 0; i < n; i++) {
    ids[i] = (int32_t)p->next_id++;
    pr[i] = priority(s, p->cpu.config.max_priority);
  }
  rd_cbuf_t col = {ids, n * sizeof *ids};
  rd_error_t e1, e2;
  int r1 = rd_table_insert(&p->cpu, n, &col, with_priorities ? pr : NULL, k1, &e1);
  int r2 = rd_table_insert(&p->fpga, n, &col, with_priorities ? pr : NULL, k2, &e2);
  assert_int_equal(r1, r2);
  if (r1 == RD_OK) assert_memory_equal(k1, k2, n * sizeof *k1);
  free(ids);
  free(pr);
  free(k1);
  free(k2);
}

/* Sample n from both; returns the keys (caller frees). */
static uint64_t *pair_sample(pair_t *p, size_t n, unsigned flags, double beta) {
  uint64_t *k[2];
  double *pr[2], *w[2];
  int32_t *ids[2];
  rd_table_t *t[2] = {&p->cpu, &p->fpga};
  for (int j = 0; j < 2; j++) {
    k[j] = malloc(n * sizeof(uint64_t));
    pr[j] = malloc(n * sizeof(double));
    w[j] = malloc(n * sizeof(double));
    ids[j] = malloc(n * sizeof(int32_t));
    rd_buf_t col = {ids[j], n * sizeof(int32_t)};
    rd_sample_out_t out = {k[j], pr[j], w[j], &col};
    rd_error_t err;
    if (rd_table_sample(t[j], n, beta, flags, &out, &err) != RD_OK)
      fail_msg("sample %d of %zu: %s", j, n, err.msg);
  }
  /* Bit for bit: the same leaves for the same targets. */
  assert_memory_equal(k[0], k[1], n * sizeof(uint64_t));
  assert_memory_equal(pr[0], pr[1], n * sizeof(double));
  assert_memory_equal(w[0], w[1], n * sizeof(double));
  assert_memory_equal(ids[0], ids[1], n * sizeof(int32_t));
  for (size_t i = 0; i < n; i++) assert_true(pr[0][i] > 0); /* zero leaves never sampled */
  free(k[1]);
  for (int j = 0; j < 2; j++) {
    free(pr[j]);
    free(w[j]);
    free(ids[j]);
  }
  return k[0];
}

static void pair_update(pair_t *p, size_t n, const uint64_t *keys, uint64_t *s) {
  double *pr = malloc(n * sizeof *pr);
  for (size_t i = 0; i < n; i++) pr[i] = priority(s, p->cpu.config.max_priority);
  size_t st1 = 0, st2 = 0;
  rd_error_t e1, e2;
  int r1 = rd_table_update(&p->cpu, n, keys, pr, &st1, &e1);
  int r2 = rd_table_update(&p->fpga, n, keys, pr, &st2, &e2);
  assert_int_equal(r1, r2);
  assert_int_equal(st1, st2);
  free(pr);
}

/* A workload's life on both tables. */
static void run_pair(uint32_t capacity, uint32_t fanout, double max_p, uint64_t seed) {
  pair_t p;
  pair_init(&p, capacity, fanout, max_p, seed);
  uint64_t s = seed * 7919 + capacity;
  pair_agree(&p);
  /* Fill past the ring once, in uneven batches, with and without
   * priorities (the table's "largest seen" default). */
  uint64_t inserted = 0;
  for (int round = 0; inserted < (uint64_t)capacity + capacity / 2 + 3; round++) {
    size_t n = 1 + (size_t)(rd_splitmix64(&s) % (capacity < 3000 ? capacity : 3000));
    pair_insert(&p, n, round % 3 != 2, &s);
    inserted += n;
    pair_agree(&p);
    if (rd_sumtree_total(&p.cpu.tree) == 0) continue;
    size_t m = 1 + (size_t)(rd_splitmix64(&s) % 2500); /* over the kernel's 1024 sometimes */
    if (m > rd_table_size(&p.cpu)) m = (size_t)rd_table_size(&p.cpu);
    uint64_t *keys = pair_sample(&p, m, round & 1 ? RD_SAMPLE_STRATIFIED : 0, 0.4);
    /* Priority updates for the sampled keys, some twice, some stale. */
    if (m > 2) keys[m - 1] = keys[0];
    if (rd_table_next_key(&p.cpu) > capacity && m > 3) keys[1] = 0;
    pair_update(&p, m, keys, &s);
    free(keys);
    pair_agree(&p);
  }
  /* Every priority zeroed but one: a single positive leaf is all it samples. */
  uint64_t live = rd_table_size(&p.cpu), next = rd_table_next_key(&p.cpu);
  uint64_t *keys = malloc(live * sizeof *keys);
  double *zero = calloc(live, sizeof *zero);
  for (uint64_t i = 0; i < live; i++) keys[i] = next - live + i;
  zero[live / 2] = max_p;
  size_t stale;
  rd_error_t err;
  for (int j = 0; j < 2; j++) {
    rd_table_t *t = j ? &p.fpga : &p.cpu;
    for (uint64_t at = 0; at < live; at += 4096) {
      size_t n = live - at < 4096 ? (size_t)(live - at) : 4096;
      assert_int_equal(rd_table_update(t, n, keys + at, zero + at, &stale, &err), RD_OK);
    }
  }
  pair_agree(&p);
  uint64_t *got = pair_sample(&p, live < 50 ? (size_t)live : 50, 0, 1.0);
  for (size_t i = 0; i < (live < 50 ? live : 50); i++) assert_int_equal(got[i], keys[live / 2]);
  free(got);
  free(keys);
  free(zero);
  rd_fpga_csim_rmm_stats_t st;
  rd_fpga_csim_rmm_stats(p.fpga.rmm, &st);
  assert_true(st.requests > 1 && st.sampled > 0 && st.updated > 0 && st.inserted > 0);
  assert_true(st.cycles > 0);
  pair_free(&p);
}

static void test_fanouts(void **state) {
  (void)state;
  for (uint32_t k = 2; k <= 64; k *= 2) run_pair(3000, k, 1048576.0, k);
}

/* Capacities at each edge of the built tree sizes, with maximal leaves. */
static void test_size_edges(void **state) {
  (void)state;
  static const uint32_t caps[] = {1, 2, 4096, 4097, 65536, 65537};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    rd_fpga_csim_shape_info_t sh;
    rd_error_t err;
    assert_int_equal(rd_fpga_csim_rmm_shape(caps[i], 16, &sh, &err), RD_OK);
    assert_true(sh.capacity >= caps[i]);
    assert_true(sh.max_leaf >= rd_st_max_leaf(caps[i])); /* holds the table's integers */
    assert_int_equal(sh.k, 16);
    assert_int_equal(sh.max_batch, 1024);
    /* 2^20 as the largest priority: leaves near the table's bound. */
    run_pair(caps[i], caps[i] > 4097 ? 16 : 4, 1048576.0, 100 + i);
  }
  rd_fpga_csim_shape_info_t a, b;
  rd_error_t err;
  assert_int_equal(rd_fpga_csim_rmm_shape(4096, 8, &a, &err), RD_OK);
  assert_int_equal(rd_fpga_csim_rmm_shape(4097, 8, &b, &err), RD_OK);
  assert_int_equal(a.capacity, 4096);
  assert_int_equal(b.capacity, 65536);
  assert_int_equal(a.leaf_bits, 63);
  assert_true(b.leaf_bits < 63);
}

/* The module's operations against rd_sumtree: prefix-boundary targets. */
static void test_boundaries(void **state) {
  (void)state;
  const uint32_t cap = 777, k = 8;
  rd_sumtree_t tree;
  rd_error_t err;
  assert_int_equal(rd_sumtree_init(&tree, cap, k, &err), RD_OK);
  void *m;
  const rd_rmm_ops_t *ops = &rd_fpga_csim_rmm_ops;
  assert_int_equal(ops->create(&m, cap, k, rd_st_max_leaf(cap), &err), RD_OK);
  uint64_t s = 5, *v = malloc(cap * sizeof *v);
  for (uint32_t i = 0; i < cap; i++) v[i] = (i % 5 == 0) ? 0 : rd_splitmix64(&s) % 1000000;
  v[cap - 1] = rd_st_max_leaf(cap);
  assert_int_equal(rd_sumtree_set_range(&tree, 0, cap, v, &err), RD_OK);
  assert_int_equal(ops->set_range(m, 0, cap, v, &err), RD_OK);
  assert_int_equal(ops->total(m), rd_sumtree_total(&tree));
  /* Targets at every prefix sum, one below it, and random ones. */
  uint64_t *t = malloc(3 * cap * sizeof *t), acc = 0;
  size_t n = 0;
  for (uint32_t i = 0; i < cap; i++) {
    acc += v[i];
    if (acc < rd_sumtree_total(&tree)) t[n++] = acc;
    if (acc > 0) t[n++] = acc - 1;
    t[n++] = rd_splitmix64(&s) % rd_sumtree_total(&tree);
  }
  uint32_t *l1 = malloc(n * sizeof *l1), *l2 = malloc(n * sizeof *l2);
  assert_int_equal(rd_sumtree_sample(&tree, n, t, l1, &err), RD_OK);
  assert_int_equal(ops->sample(m, n, t, l2, &err), RD_OK); /* > 1024: several requests */
  assert_memory_equal(l1, l2, n * sizeof *l1);
  /* Bad calls change nothing. */
  uint64_t total = ops->total(m);
  uint32_t pos[2] = {3, cap};
  uint64_t val[2] = {9, 9};
  assert_int_equal(ops->update(m, 2, pos, val, &err), RD_ERANGE);
  assert_non_null(strstr(err.msg, "outside"));
  pos[1] = 4;
  val[1] = rd_st_max_leaf(cap) + 1;
  assert_int_equal(ops->update(m, 2, pos, val, &err), RD_ERANGE);
  assert_int_equal(ops->set_range(m, cap - 1, 2, val, &err), RD_ERANGE);
  uint64_t bad = total;
  assert_int_equal(ops->sample(m, 1, &bad, l2, &err), RD_ERANGE);
  assert_int_equal(ops->total(m), total);
  assert_int_equal(ops->leaf(m, 3), v[3]);
  assert_int_equal(rd_fpga_csim_rmm_check(m, &err), RD_OK);
  ops->destroy(m);
  rd_sumtree_free(&tree);
  free(v);
  free(t);
  free(l1);
  free(l2);
}

/* What does not fit fails at init, clearly, and holds nothing. */
static void test_does_not_fit(void **state) {
  (void)state;
  uint32_t max = rd_fpga_csim_rmm_max_capacity();
  assert_int_equal(max, 1u << 20);
  char why[160];
  assert_int_equal(rd_fpga_csim_rmm_fits(max, 64, why, sizeof why), 1);
  assert_int_equal(rd_fpga_csim_rmm_fits(max + 1, 16, why, sizeof why), 0);
  assert_non_null(strstr(why, "above the C-simulation build's largest tree"));
  assert_int_equal(rd_fpga_csim_rmm_fits(1000, 3, why, sizeof why), 0);
  assert_non_null(strstr(why, "fanout 3"));
  rd_table_config_t c;
  config(&c, max + 1, 16, 1048576.0, 1, &rd_fpga_csim_rmm_ops);
  assert_int_equal(rd_table_tree_memsize(&c), 0);
  rd_table_t t;
  rd_error_t err;
  assert_int_equal(rd_table_init(&t, &c, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "C-simulation"));
  assert_non_null(strstr(err.msg, "1048577"));
  assert_null(t.rmm);
  rd_table_free(&t); /* safe after a failed init */
  /* A fitting one reports the kernel's tree as its tree's memory. */
  config(&c, 5000, 16, 1048576.0, 1, &rd_fpga_csim_rmm_ops);
  size_t tree = rd_table_tree_memsize(&c);
  rd_fpga_csim_shape_info_t sh;
  assert_int_equal(rd_fpga_csim_rmm_shape(5000, 16, &sh, &err), RD_OK);
  assert_true(tree >= sh.tree_bytes);
  assert_int_equal(rd_table_init(&t, &c, &err), RD_OK);
  assert_int_equal(rd_table_memsize(&t), tree + 5000 * 4);
  rd_table_free(&t);
}

/* A table call that fails on the C-simulated module changes nothing, as on
 * the CPU. */
static void test_bad_calls(void **state) {
  (void)state;
  pair_t p;
  pair_init(&p, 100, 16, 1048576.0, 9);
  uint64_t s = 1;
  pair_insert(&p, 60, 1, &s);
  uint64_t keys[2] = {3, 1000};
  double pr[2] = {1.0, 1.0};
  rd_error_t err;
  assert_int_equal(rd_table_update(&p.fpga, 2, keys, pr, NULL, &err), RD_ENOTFOUND);
  keys[1] = 4;
  pr[1] = NAN;
  assert_int_equal(rd_table_update(&p.fpga, 2, keys, pr, NULL, &err), RD_EINVAL);
  pr[1] = 2e6;
  assert_int_equal(rd_table_update(&p.fpga, 2, keys, pr, NULL, &err), RD_ERANGE);
  pair_agree(&p);
  free(pair_sample(&p, 60, 0, 0.5));
  pair_free(&p);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_fanouts),
         cmocka_unit_test(test_size_edges),
         cmocka_unit_test(test_boundaries),
         cmocka_unit_test(test_does_not_fit),
         cmocka_unit_test(test_bad_calls))
