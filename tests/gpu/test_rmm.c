/* test_rmm.c - the GPU replay module and storage (rmm_gpu.h) on the
 * host: their logic (host leaves, checks, chunks, row layout, failures,
 * the ops of each ordinal) over device calls that run on the host
 * (rmm_check_host_dev: the CPU sum tree and a byte array), so every build
 * runs it, with or without CUDA or a GPU. Tables on the module must sample,
 * gather and keep priorities exactly as a CPU table does; a device call
 * that fails must be a fault the table can recover from on the CPU
 * (rmm_check.h). The real CUDA calls: a clean RD_EINVAL without a GPU (or
 * without CUDA), the same comparison on one when there is one;
 * tests/gpu/check_rmm.cu is the thorough device check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "rmm_check.h"
#include "rmm_gpu.h"
#include "rmm_gpu_dev.h"
#include "rd_tree_step.h"
#include "rdt_schema.h"
#include "sumtree.h"
#include "rdt_main.h"

#ifndef RD_GPU_BUILT
#error "meson passes RD_GPU_BUILT (1 in a build with the CUDA backend)"
#endif

static const rmm_case_t cases[] = {
    /* name, capacity, fanout, max_batch, batch, rounds, wide, seed */
    {"k16_c1000", 1000, 16, 4096, 96, 24, 0, 1},
    {"k2_c37", 37, 2, 512, 11, 30, 0, 2},           /* tiny, every round wraps */
    {"k64_c5000", 5000, 64, 8192, 700, 12, 0, 3},
    {"k4_c300_chunks", 300, 4, 4096, 400, 12, 0, 4}, /* updates of 1200: tree chunks of 1024 */
    {"k8_c200_wide", 200, 8, 256, 90, 8, 1, 5},     /* 64 KiB rows: storage chunk 63 */
    {"k32_c3000_bigupd", 3000, 32, 16384, 1500, 6, 0, 6}, /* updates of 4500 > chunk 3000 */
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void check_same(const rmm_case_t *c, const rd_rmm_ops_t *rmm,
                       const rd_storage_ops_t *st) {
  char msg[512];
  if (rmm_check_same(c, rmm, st, msg, sizeof msg) != 0)
    fail_msg("%s on %s/%s: %s", c->name, rmm ? rmm->name : "cpu", st ? st->name : "host", msg);
}

/* ---- the ops of each ordinal, sizes ---- */

static void test_ops_tables(void **state) {
  (void)state;
  assert_int_equal(rd_gpu_rmm_built(), RD_GPU_BUILT);
  assert_null(rd_gpu_rmm_ops(-1));
  assert_null(rd_gpu_rmm_ops(RD_GPU_RMM_MAX_DEVICES));
  assert_null(rd_gpu_storage_ops(-1));
  assert_null(rd_gpu_storage_ops(RD_GPU_RMM_MAX_DEVICES));
  for (int d = 0; d < RD_GPU_RMM_MAX_DEVICES; d++) {
    char name[16];
    snprintf(name, sizeof name, "gpu%d", d);
    const rd_rmm_ops_t *r = rd_gpu_rmm_ops(d);
    const rd_storage_ops_t *s = rd_gpu_storage_ops(d);
    assert_non_null(r);
    assert_non_null(s);
    assert_ptr_equal(r, rd_gpu_rmm_ops(d));
    assert_string_equal(r->name, name);
    assert_string_equal(s->name, name);
    assert_int_equal(rd_gpu_rmm_device(r), d);
    assert_int_equal(rd_gpu_storage_device(s), d);
    if (d > 0) assert_ptr_not_equal(r->create, rd_gpu_rmm_ops(0)->create);
  }
  rd_rmm_ops_t copy = *rd_gpu_rmm_ops(3);
  assert_int_equal(rd_gpu_rmm_device(&copy), -1);
  assert_int_equal(rd_gpu_rmm_device(NULL), -1);
  assert_int_equal(rd_gpu_storage_device(NULL), -1);
}

static void test_sizes(void **state) {
  (void)state;
  const rd_rmm_ops_t *r = rd_gpu_rmm_ops(0);
  const rd_storage_ops_t *s = rd_gpu_storage_ops(0);
  assert_int_equal(rd_gpu_rmm_device_bytes(0, 16), 0);
  assert_int_equal(rd_gpu_rmm_device_bytes(100, 3), 0);
  assert_int_equal(rd_gpu_rmm_device_bytes((1u << 28) + 1, 16), 0);
  assert_int_equal(r->memsize(100, 3), 0);
  /* The host copy of the leaves is charged: 8 bytes a leaf at least. */
  assert_true(r->memsize(1u << 20, 16) >= (size_t)8 << 20);
  assert_true(r->memsize(1u << 20, 16) < (size_t)10 << 20);
  /* Device: at least the levels (the CPU tree's size, 256-aligned). */
  rd_sumtree_t t;
  rd_error_t err;
  assert_int_equal(rd_sumtree_init(&t, 100000, 16, &err), RD_OK);
  assert_true(rd_gpu_rmm_device_bytes(100000, 16) > t.mem_bytes);
  rd_sumtree_free(&t);
  assert_true(rd_gpu_rmm_device_bytes(1u << 24, 16) > rd_gpu_rmm_device_bytes(1u << 20, 16));
  /* Storage: the rows, a chunk of staging; none on the host but staging. */
  assert_int_equal(rd_gpu_storage_device_bytes(100, 0), 0);
  assert_int_equal(rd_gpu_storage_device_bytes(0, 8), 0);
  assert_int_equal(rd_gpu_storage_device_bytes(100, RD_GPU_STORAGE_MAX_ROW_BYTES + 1), 0);
  assert_true(rd_gpu_storage_device_bytes(1000, 41) >= 41000);
  const size_t fb[3] = {16, 4, 21};
  assert_true(s->memsize(1u << 20, 3, fb) < (size_t)41 << 20); /* rows stay on the device */
  assert_true(s->memsize(1u << 20, 3, fb) > 0);
  const size_t huge[2] = {RD_GPU_STORAGE_MAX_ROW_BYTES, 1};
  assert_int_equal(s->memsize(10, 2, huge), 0);
  /* Chunks: the tree's between 1024 and 65536, the storage's ~4 MiB. */
  assert_int_equal(rd_gpu_rmm_chunk(10), 1024);
  assert_int_equal(rd_gpu_rmm_chunk(5000), 5000);
  assert_int_equal(rd_gpu_rmm_chunk(1u << 24), 65536);
  assert_int_equal(rd_gpu_storage_chunk(1u << 20, 41), 65536);
  assert_int_equal(rd_gpu_storage_chunk(1u << 20, 65536 + 16), 63);
  assert_int_equal(rd_gpu_storage_chunk(10, 41), 10);
  assert_int_equal(rd_gpu_storage_chunk(1u << 20, RD_GPU_STORAGE_MAX_ROW_BYTES), 4);
  /* The table charges what the modules say. */
  rd_table_config_t c;
  rdt_scalar_table_config(&c, "x", RD_DTYPE_FLOAT32, 4096);
  size_t host_rows = rd_table_rows_memsize(&c);
  assert_int_equal(host_rows, 4096 * 4);
  c.rmm = r;
  c.storage = s;
  assert_int_equal(rd_table_tree_memsize(&c), r->memsize(4096, 16));
  const size_t one = 4;
  assert_int_equal(rd_table_rows_memsize(&c), s->memsize(4096, 1, &one));
}

/* ---- tables on the module match the CPU ---- */

static void test_same_as_cpu(void **state) {
  (void)state;
  const rd_rmm_ops_t *rmm;
  const rd_storage_ops_t *st;
  rmm_check_ops(&rmm_check_host_dev, 0, &rmm, &st);
  for (size_t i = 0; i < N_CASES; i++) {
    check_same(&cases[i], rmm, NULL);
    check_same(&cases[i], NULL, st);
    check_same(&cases[i], rmm, st);
  }
}

/* A storage shares its table's tree stream when both are this GPU's, on
 * the same device and device calls. */
typedef struct {
  void *tree_seen;   /* the tree the last rows were given */
  void *tree_freed;  /* the last tree freed */
  int rows_alive;
} share_t;
static share_t g_share;
static int spy_rows_init(void **out, int device, void *tree, uint32_t nrows, uint32_t row_bytes,
                         uint32_t max_batch, rd_error_t *err) {
  g_share.tree_seen = tree;
  int rc = rmm_check_host_dev.rows_init(out, device, tree, nrows, row_bytes, max_batch, err);
  g_share.rows_alive += rc == RD_OK;
  return rc;
}
static void spy_rows_free(void *rows) {
  g_share.rows_alive--;
  rmm_check_host_dev.rows_free(rows);
}
/* Rows that share a tree's stream go first: the tree must not be freed
 * while they live. */
static void spy_tree_free(void *tree) {
  if (g_share.rows_alive > 0 && tree == g_share.tree_seen)
    fail_msg("a tree freed before the rows on its stream");
  g_share.tree_freed = tree;
  rmm_check_host_dev.tree_free(tree);
}

static void table_config(rd_table_config_t *c, uint32_t capacity) {
  rd_table_config_default(c);
  c->schema.n_fields = 2;
  rdt_field(&c->schema.fields[0], "obs", RD_DTYPE_FLOAT32, 3);
  rdt_field(&c->schema.fields[1], "done", RD_DTYPE_BOOL, 0);
  c->capacity = capacity;
  c->max_batch = 256;
}

/* A table of c whose tree (rmm_name) is, or is not, on the spied device
 * calls, and whose rows share the tree's stream exactly then. */
static void init_sharing(rd_table_t *t, const rd_table_config_t *c, int shares,
                         const char *rmm_name) {
  rd_error_t err;
  assert_int_equal(rd_table_init(t, c, &err), RD_OK);
  assert_int_equal(g_share.tree_seen != NULL, shares);
  rd_gpu_module_info_t info;
  rd_gpu_storage_info(t->rows, &info);
  assert_int_equal(info.shares_stream != 0, shares);
  assert_string_equal(rd_table_rmm_name(t), rmm_name);
}

static void test_one_stream_per_table(void **state) {
  (void)state;
  rd_gpu_dev_ops_t spy = rmm_check_host_dev, other = rmm_check_host_dev;
  spy.rows_init = spy_rows_init;
  spy.rows_free = spy_rows_free;
  spy.tree_free = spy_tree_free;
  other.rows_init = spy_rows_init;
  other.rows_free = spy_rows_free;
  const rd_rmm_ops_t *rmm;
  const rd_storage_ops_t *st;
  rd_table_config_t c;
  table_config(&c, 500);
  rd_table_t t;
  rd_error_t err;

  /* Through a table: both on the GPU, then the rows alone. */
  rmm_check_ops(&spy, 0, &rmm, &st);
  c.rmm = rmm;
  c.storage = st;
  init_sharing(&t, &c, 1, "gpu0");
  assert_string_equal(rd_table_storage_name(&t), "gpu0");
  rd_table_free(&t);
  assert_ptr_equal(g_share.tree_freed, g_share.tree_seen);
  assert_int_equal(g_share.rows_alive, 0);
  /* And when a failure moves the table to the CPU. */
  assert_int_equal(rd_table_init(&t, &c, &err), RD_OK);
  t.module_failed = 1;
  assert_int_equal(rd_table_to_cpu(&t, NULL, &err), RD_OK);
  assert_int_equal(g_share.rows_alive, 0);
  rd_table_free(&t);
  c.rmm = NULL;
  init_sharing(&t, &c, 0, "cpu");
  rd_table_free(&t);

  /* Directly: only a tree of the same device calls and device is shared. */
  void *m, *s;
  const size_t fb[2] = {12, 1};
  const rd_storage_ops_t *sops = rd_gpu_storage_ops(0);
  assert_int_equal(rd_gpu_rmm_create_on(&m, &other, 0, 500, 16, rd_st_max_leaf(500), &err),
                   RD_OK);
  g_share.tree_seen = (void *)&g_share;
  assert_int_equal(rd_gpu_storage_create_on(&s, &spy, 0, 500, 2, fb, rd_gpu_rmm_ops(0), m, &err),
                   RD_OK);
  assert_null(g_share.tree_seen); /* other device calls */
  sops->destroy(s);
  g_share.tree_seen = (void *)&g_share;
  assert_int_equal(rd_gpu_storage_create_on(&s, &other, 1, 500, 2, fb, rd_gpu_rmm_ops(0), m, &err),
                   RD_OK);
  assert_null(g_share.tree_seen); /* another device */
  sops->destroy(s);
  g_share.tree_seen = (void *)&g_share;
  assert_int_equal(rd_gpu_storage_create_on(&s, &other, 0, 500, 2, fb, NULL, NULL, &err), RD_OK);
  assert_null(g_share.tree_seen); /* no module */
  sops->destroy(s);
  assert_int_equal(rd_gpu_storage_create_on(&s, &other, 0, 500, 2, fb, rd_gpu_rmm_ops(0), m, &err),
                   RD_OK);
  assert_non_null(g_share.tree_seen);
  sops->destroy(s);
  rd_gpu_rmm_ops(0)->destroy(m);
}

/* ---- bad batches: the contract's errors, nothing changed, not broken ---- */

static void test_bad_batches(void **state) {
  (void)state;
  rd_error_t err;
  void *m, *s;
  const rd_rmm_ops_t *ops = rd_gpu_rmm_ops(0);
  const rd_storage_ops_t *sops = rd_gpu_storage_ops(0);
  const uint64_t ml = rd_st_max_leaf(100);
  assert_int_equal(rd_gpu_rmm_create_on(&m, &rmm_check_host_dev, 0, 100, 3, ml, &err), RD_EINVAL);
  assert_null(m);
  assert_non_null(strstr(err.msg, "fanout"));
  assert_int_equal(rd_gpu_rmm_create_on(&m, &rmm_check_host_dev, 0, 100, 8, ml + 1, &err),
                   RD_EINVAL);
  assert_int_equal(rd_gpu_rmm_create_on(&m, &rmm_check_host_dev, 0, 100, 8, ml, &err), RD_OK);
  uint64_t v[3] = {5, 7, ml + 1};
  uint32_t p[3] = {1, 99, 100};
  uint32_t leaves[3];
  assert_int_equal(ops->sample(m, 1, v, leaves, &err), RD_EEMPTY);
  assert_int_equal(ops->set_range(m, 98, 3, v, &err), RD_ERANGE);
  assert_int_equal(ops->set_range(m, 0, 3, v, &err), RD_ERANGE); /* v[2] > max leaf */
  assert_int_equal(ops->update(m, 3, p, v, &err), RD_ERANGE);
  assert_int_equal(ops->total(m), 0);
  assert_int_equal(ops->set_range(m, 98, 2, v, &err), RD_OK);
  assert_int_equal(ops->update(m, 2, p, v, &err), RD_OK); /* leaf 1 = 5, leaf 99 = 7 */
  assert_int_equal(ops->total(m), 5 + 5 + 7);
  assert_int_equal(ops->leaf(m, 98), 5);
  assert_int_equal(ops->leaf(m, 99), 7);
  assert_int_equal(ops->leaf(m, 1000), 0);
  uint64_t tg[2] = {0, 17};
  assert_int_equal(ops->sample(m, 2, tg, leaves, &err), RD_ERANGE);
  tg[1] = 16;
  assert_int_equal(ops->sample(m, 2, tg, leaves, &err), RD_OK);
  assert_int_equal(leaves[0], 1);
  assert_int_equal(leaves[1], 99);
  rd_gpu_module_info_t info;
  rd_gpu_rmm_info(m, &info);
  assert_false(info.broken);
  assert_true(info.device_calls > 0);
  assert_true(info.device_bytes > 0);

  const size_t fb[2] = {3, 5};
  const size_t big[2] = {RD_GPU_STORAGE_MAX_ROW_BYTES, 1};
  assert_int_equal(rd_gpu_storage_create_on(&s, &rmm_check_host_dev, 0, 10, 2, big, NULL, NULL,
                                            &err), RD_EINVAL);
  assert_null(s);
  assert_non_null(strstr(err.msg, "rows of"));
  assert_int_equal(rd_gpu_storage_create_on(&s, &rmm_check_host_dev, 0, 10, 0, fb, NULL, NULL,
                                            &err), RD_EINVAL);
  assert_int_equal(rd_gpu_storage_create_on(&s, &rmm_check_host_dev, 0, 10, 2, fb, ops, m, &err),
                   RD_OK);
  uint8_t a[6] = {1, 2, 3, 4, 5, 6}, b[10] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  const void *src[2] = {a, b};
  assert_int_equal(sops->write(s, 9, 2, src, &err), RD_ERANGE);
  assert_int_equal(sops->write(s, 8, 2, src, &err), RD_OK);
  uint8_t oa[6], ob[10];
  void *dst[2] = {oa, NULL};
  uint32_t slots[2] = {9, 10};
  assert_int_equal(sops->read(s, 2, slots, dst, &err), RD_ERANGE);
  slots[1] = 8;
  assert_int_equal(sops->read(s, 2, slots, dst, &err), RD_OK);
  assert_memory_equal(oa, a + 3, 3);
  assert_memory_equal(oa + 3, a, 3);
  dst[0] = NULL, dst[1] = ob;
  assert_int_equal(sops->read(s, 2, slots, dst, &err), RD_OK);
  assert_memory_equal(ob, b + 5, 5);
  assert_memory_equal(ob + 5, b, 5);
  rd_gpu_storage_info(s, &info);
  assert_false(info.broken);
  sops->destroy(s);
  ops->destroy(m);
}

/* ---- a device that fails or lies ---- */

static void test_faults_recover_on_cpu(void **state) {
  (void)state;
  rmm_check_fault_base(&rmm_check_host_dev);
  const rd_rmm_ops_t *rmm;
  const rd_storage_ops_t *st;
  rmm_check_ops(&rmm_check_fault_dev, 0, &rmm, &st);
  const rmm_case_t *cs[] = {&cases[0], &cases[1], &cases[4]};
  struct {
    int tree_on, rows_on;
    unsigned mask;
  } where[] = {{1, 0, RMM_FAIL_TREE},
               {0, 1, RMM_FAIL_WRITE},
               {0, 1, RMM_FAIL_READ},
               {1, 1, RMM_FAIL_TREE | RMM_FAIL_WRITE | RMM_FAIL_READ}};
  char msg[512];
  int seen_insert = 0, seen_sample = 0, seen_update = 0, seen_gather = 0, seen_all_lost = 0;
  for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
    for (size_t wi = 0; wi < sizeof where / sizeof where[0]; wi++)
      for (uint64_t at = 1; at <= 7; at += 2)
        for (int sticky = 0; sticky <= 1; sticky++) {
          const char *op;
          uint64_t lost;
          int rc = rmm_check_fault(cs[ci], where[wi].tree_on ? rmm : NULL,
                                   where[wi].rows_on ? st : NULL, where[wi].mask, at, sticky, &op,
                                   &lost, msg, sizeof msg);
          if (rc)
            fail_msg("%s, tree %d rows %d mask %u, call %llu%s: %s", cs[ci]->name,
                     where[wi].tree_on, where[wi].rows_on, where[wi].mask,
                     (unsigned long long)at, sticky ? " (sticky)" : "", msg);
          seen_insert |= strcmp(op, "insert") == 0;
          seen_sample |= strcmp(op, "sample") == 0;
          seen_update |= strcmp(op, "update") == 0;
          seen_gather |= strcmp(op, "gather") == 0;
          seen_all_lost |= lost == cs[ci]->capacity;
        }
  /* The scenarios reached every kind of call and the worst case. */
  assert_true(seen_insert && seen_sample && seen_update && seen_gather && seen_all_lost);
}

static int lie_total(void *t, uint64_t *total, rd_error_t *err) {
  int rc = rmm_check_host_dev.tree_total(t, total, err);
  *total += 1;
  return rc;
}
static int lie_sample(void *t, size_t n, const uint64_t *tg, uint32_t *lv, rd_error_t *err) {
  int rc = rmm_check_host_dev.tree_sample(t, n, tg, lv, err);
  lv[n - 1] = 3; /* a leaf never written */
  return rc;
}

static void test_lying_device_is_a_fault(void **state) {
  (void)state;
  rd_error_t err;
  const rd_rmm_ops_t *ops = rd_gpu_rmm_ops(0);
  for (int which = 0; which < 2; which++) {
    rd_gpu_dev_ops_t liar = rmm_check_host_dev;
    if (which == 0) liar.tree_total = lie_total;
    else liar.tree_sample = lie_sample;
    void *m;
    assert_int_equal(rd_gpu_rmm_create_on(&m, &liar, 2, 100, 4, rd_st_max_leaf(100), &err), RD_OK);
    const uint64_t v[2] = {10, 20};
    assert_int_equal(ops->set_range(m, 50, 2, v, &err), RD_OK);
    const uint64_t tg[2] = {0, 29};
    uint32_t lv[2];
    assert_int_equal(ops->sample(m, 2, tg, lv, &err), RD_EINTERNAL);
    assert_non_null(strstr(err.msg, "gpu2"));
    assert_non_null(strstr(err.msg, which == 0 ? "total" : "whose value is 0"));
    rd_gpu_module_info_t info;
    rd_gpu_rmm_info(m, &info);
    assert_true(info.broken);
    /* Broken: writes and samples refuse; the host leaves still answer. */
    assert_int_equal(ops->set_range(m, 0, 1, v, &err), RD_EINTERNAL);
    assert_non_null(strstr(err.msg, "failed earlier"));
    assert_int_equal(ops->sample(m, 1, tg, lv, &err), RD_EINTERNAL);
    assert_int_equal(ops->total(m), 30);
    assert_int_equal(ops->leaf(m, 51), 20);
    ops->destroy(m);
  }
}

/* ---- the real device calls ---- */

static void test_cuda_calls(void **state) {
  (void)state;
  rd_table_config_t c;
  table_config(&c, 1000);
  c.rmm = rd_gpu_rmm_ops(0);
  rd_table_t t;
  rd_error_t err;
  int rc = rd_table_init(&t, &c, &err);
  if (rc == RD_OK) {
    /* A CUDA build on a machine with a GPU: the real thing, briefly. */
    rd_table_free(&t);
    const rmm_case_t small = {"cuda_k16_c1000", 1000, 16, 4096, 96, 6, 0, 11};
    check_same(&small, rd_gpu_rmm_ops(0), rd_gpu_storage_ops(0));
    return;
  }
  assert_int_equal(rc, RD_EINVAL);
  assert_non_null(strstr(err.msg, RD_GPU_BUILT ? "no usable CUDA device" : "built without CUDA"));
  assert_null(t.rmm); /* nothing held */
  assert_null(t.scratch_u64);
  c.rmm = NULL;
  c.storage = rd_gpu_storage_ops(1);
  assert_int_equal(rd_table_init(&t, &c, &err), RD_EINVAL);
  assert_non_null(strstr(err.msg, "gpu1"));
  assert_null(t.rows);
}

/* ---- snapshots (checkpoints) of a table on the module ---- */

static void insert_rows(rd_table_t *t, size_t n, uint64_t salt) {
  float obs[200 * 3];
  uint8_t done[200];
  double p[200];
  for (size_t i = 0; i < n; i++) {
    for (int j = 0; j < 3; j++) obs[i * 3 + j] = (float)(salt * 1000 + i) + (float)j;
    done[i] = (uint8_t)(i & 1);
    p[i] = (double)((salt + i) % 7) + 0.5;
  }
  rd_cbuf_t cols[2] = {{obs, n * 12}, {done, n}};
  rd_error_t err;
  if (rd_table_insert(t, n, cols, p, NULL, &err) != RD_OK) fail_msg("insert: %s", err.msg);
}

/* A table on the GPU module and storage snapshots through their host
 * leaves and chunked reads, with inserts overwriting the cut between
 * slices, and the image restores into a CPU table that then samples what
 * a CPU table that took the same calls samples. */
static void test_snapshot_restore(void **state) {
  (void)state;
  const rd_rmm_ops_t *rmm;
  const rd_storage_ops_t *st;
  rmm_check_ops(&rmm_check_host_dev, 0, &rmm, &st);
  rd_table_config_t cg, cc;
  table_config(&cg, 700);
  table_config(&cc, 700);
  cg.rmm = rmm;
  cg.storage = st;
  rd_table_t g, c, r;
  rd_error_t err;
  assert_int_equal(rd_table_init(&g, &cg, &err), RD_OK);
  assert_int_equal(rd_table_init(&c, &cc, &err), RD_OK);
  assert_int_equal(rd_table_init(&r, &cc, &err), RD_OK);
  for (uint64_t i = 0; i < 12; i++) {
    insert_rows(&g, 150, i);
    insert_rows(&c, 150, i);
  }
  rd_table_snapshot_t s;
  assert_int_equal(rd_table_snapshot_alloc(&s, &cg, 700, &err), RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&g, &s, &err), RD_OK);
  int rc;
  uint64_t k = 100;
  while ((rc = rd_table_snapshot_step(&g, &s, 64, &err)) == 0) insert_rows(&g, 37, k++);
  assert_int_equal(rc, 1);
  assert_int_equal(rd_table_restore(&r, &s.img, &err), RD_OK);
  uint64_t ka[128], kb[128];
  double pa[128], pb[128], wa[128], wb[128];
  rd_sample_out_t oa = {ka, pa, wa, NULL}, ob = {kb, pb, wb, NULL};
  assert_int_equal(rd_table_sample(&c, 128, 0.4, 0, &oa, &err), RD_OK);
  assert_int_equal(rd_table_sample(&r, 128, 0.4, 0, &ob, &err), RD_OK);
  assert_memory_equal(ka, kb, sizeof ka);
  assert_memory_equal(pa, pb, sizeof pa);
  assert_memory_equal(wa, wb, sizeof wa);
  rd_table_snapshot_free(&s);
  rd_table_free(&g);
  rd_table_free(&c);
  rd_table_free(&r);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_ops_tables),
         cmocka_unit_test(test_sizes),
         cmocka_unit_test(test_same_as_cpu),
         cmocka_unit_test(test_one_stream_per_table),
         cmocka_unit_test(test_bad_batches),
         cmocka_unit_test(test_faults_recover_on_cpu),
         cmocka_unit_test(test_lying_device_is_a_fault),
         cmocka_unit_test(test_cuda_calls),
         cmocka_unit_test(test_snapshot_restore))
