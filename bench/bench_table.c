/* bench_table.c - ns per row of the table's insert, gather by keys and
 * sample with its rows (backends/cpu/table.h); the gather against the
 * layout the table had before, one array per field, in the same run.
 *
 * Why a baseline of our own old layout: the table stores its rows row by
 * row so that a gathered row costs its one or two cache lines instead of
 * one line per field (docs/architecture.md, "The table"); this program
 * shows that claim on the machine at hand. baseline.columns.gather is that
 * layout's gather as the table made it: one array per field (huge-page
 * mappings from 2 MiB, as the table's), field by field with the field
 * size a constant and rows prefetched 64 keys ahead. It is given its
 * slots; rd_table_gather also checks its keys and computes their slots,
 * so the ratio leans, if anything, the baseline's way.
 * table.insert is the whole call (checks, priorities, the tree and the
 * rows), for the record: the old layout's insert cannot be timed apart
 * from the table.
 *
 * Rows: the CartPole schema (obs float32[4], action int32, reward float32,
 * next_obs float32[4], done bool: 41 bytes). The table and the columns are
 * filled to capacity with the same rows before timing. Inputs: insert
 * writes `batch` rows at the ring's cursor; gather reads `batch` random
 * live keys from a pool of at least 2^18 keys and 64 batches, so that the
 * rows it reads are not simply cache-resident (both layouts the same
 * keys); sample draws stratified targets (beta 0.4) and gathers the rows
 * it selects (ours only: the old layout's sample differed only in its
 * gather). Every unit is measured as one group: a warm-up sizes each
 * one's repetitions, then `reps` rounds run one repetition of each in
 * turn; a figure is its median repetition in ns per row. Before timing,
 * a gather of every layout must return the rows inserted under its keys.
 *
 * Output: an aligned table (default) or, with --json, one JSON object per
 * line and nothing else on stdout. Run with --help for the options.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hugemem.h"
#include "rd_error.h"
#include "rd_rng.h"
#include "rdt_schema.h"
#include "table.h"

#define NF 5
/* --batch's bound, the table's max_batch and every batch buffer's rows; also
 * --capacity's floor, since a sample takes at most the table's size. */
#define MAX_BATCH 4096u
#define ROW_BYTES 41 /* the sum of FB */
#define POOL_KEYS (1u << 18) /* keys in the gather pool: at least this many, 64 batches */
#define BASE_AHEAD 64 /* the old gather's prefetch distance */

static const size_t FB[NF] = {16, 4, 4, 16, 1};

typedef struct {
  bool json, quick;
  bench_list_t capacity, batch;
  bench_timing_t timing;
} opts_t;

static void usage(FILE *f) {
  fputs("usage: bench_table [--json] [--quick] [--capacity N] [--batch B] [--time-ms MS]\n"
        "\n"
        "Nanoseconds per row of the table's insert, gather by keys and sample with\n"
        "rows (CartPole rows of 41 bytes); the gather against one array per field\n"
        "(the table's layout before it stored rows row by row), in the same run.\n"
        "\n"
        "  --json         one JSON object per line on stdout, nothing else\n"
        "  --quick        capacity 2^20, batch 512, 20 ms per repetition, median of 3\n"
        "                 (default: capacities 2^17,2^20,2^24, batches 32,512,4096,\n"
        "                 100 ms per repetition, median of 5)\n"
        "  --capacity N   only this capacity (a number or 2^E; repeatable)\n"
        "  --batch B      only this batch size (repeatable)\n"
        "  --time-ms MS   minimum time of one repetition\n",
        f);
}

static void parse_opts(opts_t *o, int argc, char **argv) {
  double time_ms = 0;
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_common_opt(argc, argv, &i, &o->json, &o->quick, &time_ms, usage)) continue;
    if ((v = bench_opt(argc, argv, &i, "--capacity")))
      bench_list_add(&o->capacity, "--capacity",
                     bench_parse_u32("--capacity", v, MAX_BATCH, UINT64_C(1) << 26));
    else if ((v = bench_opt(argc, argv, &i, "--batch")))
      bench_list_add(&o->batch, "--batch", bench_parse_u32("--batch", v, 1, MAX_BATCH));
    else
      bench_unknown_opt(argv[i], usage);
  }
  static const uint32_t cap_full[] = {1u << 17, 1u << 20, 1u << 24}, cap_quick[] = {1u << 20};
  static const uint32_t bat_full[] = {32, 512, 4096}, bat_quick[] = {512};
  if (o->quick) {
    bench_list_default(&o->capacity, "--capacity", cap_quick, 1);
    bench_list_default(&o->batch, "--batch", bat_quick, 1);
  } else {
    bench_list_default(&o->capacity, "--capacity", cap_full, 3);
    bench_list_default(&o->batch, "--batch", bat_full, 3);
  }
  bench_timing_init(&o->timing, time_ms, o->quick, 0.020, 0.100, 0.010, 0.030);
}

/* ------------------------------------------------------------------ */
/* The old layout: one array per field                                 */
/* ------------------------------------------------------------------ */

typedef struct {
  uint32_t cap;
  uint8_t *col[NF];
} columns_t;

static void columns_init(columns_t *c, uint32_t cap) {
  c->cap = cap;
  for (int f = 0; f < NF; f++) {
    size_t bytes = (size_t)cap * FB[f];
    c->col[f] = bytes >= RD_HUGE_PAGE ? rd_huge_map(bytes) : xmalloc(bytes);
    if (c->col[f] == NULL) die("cannot map %zu bytes", bytes);
  }
}

static void columns_free(columns_t *c) {
  for (int f = 0; f < NF; f++) {
    size_t bytes = (size_t)c->cap * FB[f];
    if (bytes >= RD_HUGE_PAGE)
      rd_huge_unmap(c->col[f], bytes);
    else
      free(c->col[f]);
  }
}

static void columns_put(columns_t *c, uint32_t first, size_t n, const rd_cbuf_t *cols, size_t at) {
  for (int f = 0; f < NF; f++)
    memcpy(c->col[f] + (size_t)first * FB[f], (const uint8_t *)cols[f].data + at * FB[f],
           n * FB[f]);
}

static inline __attribute__((always_inline)) void columns_gather_one(size_t n,
                                                                     const uint32_t *slots,
                                                                     const uint8_t *col,
                                                                     uint8_t *dst, size_t fb) {
  for (size_t i = 0; i < n && i < BASE_AHEAD; i++) __builtin_prefetch(col + (size_t)slots[i] * fb);
  for (size_t i = 0; i < n; i++) {
    if (i + BASE_AHEAD < n) __builtin_prefetch(col + (size_t)slots[i + BASE_AHEAD] * fb);
    memcpy(dst + i * fb, col + (size_t)slots[i] * fb, fb);
  }
}

static void columns_gather(const columns_t *c, size_t n, const uint32_t *slots, rd_buf_t *out) {
  columns_gather_one(n, slots, c->col[0], out[0].data, 16);
  columns_gather_one(n, slots, c->col[1], out[1].data, 4);
  columns_gather_one(n, slots, c->col[2], out[2].data, 4);
  columns_gather_one(n, slots, c->col[3], out[3].data, 16);
  columns_gather_one(n, slots, c->col[4], out[4].data, 1);
}

/* ------------------------------------------------------------------ */
/* One capacity and batch                                              */
/* ------------------------------------------------------------------ */

typedef struct {
  uint32_t cap, batch;
  rd_table_t t;
  columns_t c;
  uint8_t *in_mem, *out_mem;
  rd_cbuf_t in[NF];
  rd_buf_t out[NF];
  uint32_t pool;   /* batches in the key pool */
  uint64_t *keys;  /* pool batches of live keys */
  uint32_t *slots; /* their slots */
  uint64_t skeys[MAX_BATCH];
  double prob[MAX_BATCH], w[MAX_BATCH];
} point_t;

static void fail(const char *what, const rd_error_t *err) { die("%s: %s", what, err->msg); }

/* Byte j of field f of the row of key k: a pattern of the key (done: 0 or 1). */
static uint8_t row_byte(uint64_t k, int f, size_t j) {
  return f == 4 ? (uint8_t)(k & 1) : (uint8_t)(k * 13 + (uint64_t)f * 7 + j);
}

static void make_rows(point_t *p, uint64_t k0, size_t n) {
  for (int f = 0; f < NF; f++) {
    uint8_t *d = (uint8_t *)p->in[f].data;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < FB[f]; j++) d[i * FB[f] + j] = row_byte(k0 + i, f, j);
  }
}

/* p->out holds the rows of the pool's first batch of keys, or dies. */
static void check_out(const point_t *p, const char *who) {
  for (size_t i = 0; i < p->batch; i++)
    for (int f = 0; f < NF; f++)
      for (size_t j = 0; j < FB[f]; j++)
        if (((const uint8_t *)p->out[f].data)[i * FB[f] + j] != row_byte(p->keys[i], f, j))
          die("%s returned the wrong bytes for key %llu, field %d", who,
              (unsigned long long)p->keys[i], f);
}

static void point_init(point_t *p, uint32_t cap, uint32_t batch) {
  memset(p, 0, sizeof *p);
  p->cap = cap;
  p->batch = batch;
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  rdt_cartpole_schema(&tc.schema, 4, 0);
  tc.capacity = cap;
  tc.max_batch = MAX_BATCH;
  rd_error_t err;
  if (rd_table_init(&p->t, &tc, &err) != RD_OK) fail("rd_table_init", &err);
  columns_init(&p->c, cap);
  p->in_mem = xmalloc(MAX_BATCH * ROW_BYTES);
  p->out_mem = xmalloc(MAX_BATCH * ROW_BYTES);
  size_t off = 0;
  for (int f = 0; f < NF; f++) {
    p->in[f].data = p->in_mem + off;
    p->out[f].data = p->out_mem + off;
    p->out[f].bytes = MAX_BATCH * FB[f];
    off += MAX_BATCH * FB[f];
  }
  /* Fill both to capacity with the same rows. */
  for (uint64_t k = 0; k < cap; k += MAX_BATCH) {
    size_t n = cap - k < MAX_BATCH ? cap - k : MAX_BATCH;
    make_rows(p, k, n);
    for (int f = 0; f < NF; f++) p->in[f].bytes = n * FB[f];
    if (rd_table_insert(&p->t, n, p->in, NULL, NULL, &err) != RD_OK) fail("insert", &err);
    columns_put(&p->c, (uint32_t)k, n, p->in, 0);
  }
  for (int f = 0; f < NF; f++) p->in[f].bytes = (size_t)batch * FB[f];
  /* Random live keys; after the fill, key k is in slot k. */
  p->pool = POOL_KEYS / batch > 64 ? POOL_KEYS / batch : 64;
  p->keys = xmalloc((size_t)p->pool * batch * sizeof *p->keys);
  p->slots = xmalloc((size_t)p->pool * batch * sizeof *p->slots);
  uint64_t s = 0x7461626c65ull ^ cap ^ ((uint64_t)batch << 32);
  for (size_t i = 0; i < (size_t)p->pool * batch; i++) {
    p->keys[i] = rd_splitmix64(&s) % cap;
    p->slots[i] = (uint32_t)p->keys[i];
  }
  /* Both layouts return the rows inserted under their keys. */
  if (rd_table_gather(&p->t, batch, p->keys, p->out, &err) != RD_OK) fail("gather", &err);
  check_out(p, "the table's gather");
  columns_gather(&p->c, batch, p->slots, p->out);
  check_out(p, "the columns' gather");
}

static void point_free(point_t *p) {
  rd_table_free(&p->t);
  columns_free(&p->c);
  free(p->in_mem);
  free(p->out_mem);
  free(p->keys);
  free(p->slots);
}

enum { U_INSERT, U_GATHER, U_BASE_GATHER, U_SAMPLE, N_UNITS };
static const char *const unit_name[N_UNITS] = {"table.insert", "table.gather",
                                               "baseline.columns.gather", "table.sample_rows"};

typedef struct {
  point_t *p;
  int unit;
} ctx_t;

static void run(void *arg, uint64_t n) {
  ctx_t *c = arg;
  point_t *p = c->p;
  rd_error_t err;
  const uint32_t B = p->batch;
  for (uint64_t it = 0; it < n; it++) {
    const size_t pk = (size_t)(it % p->pool) * B;
    switch (c->unit) {
    case U_INSERT:
      if (rd_table_insert(&p->t, B, p->in, NULL, NULL, &err) != RD_OK) fail("insert", &err);
      break;
    case U_GATHER: {
      /* Keys of the newest `cap` rows: the pool's offsets from the oldest. */
      const uint64_t oldest = rd_table_next_key(&p->t) - p->cap;
      uint64_t k[MAX_BATCH];
      for (uint32_t i = 0; i < B; i++) k[i] = oldest + p->keys[pk + i];
      if (rd_table_gather(&p->t, B, k, p->out, &err) != RD_OK) fail("gather", &err);
      break;
    }
    case U_BASE_GATHER: /* the slots computed beforehand: the baseline's copies alone */
      columns_gather(&p->c, B, p->slots + pk, p->out);
      break;
    case U_SAMPLE: {
      rd_sample_out_t so = {p->skeys, p->prob, p->w, p->out};
      if (rd_table_sample(&p->t, B, 0.4, RD_SAMPLE_STRATIFIED, &so, &err) != RD_OK)
        fail("sample", &err);
      break;
    }
    }
  }
}

typedef struct {
  uint32_t cap, batch;
  double ns[N_UNITS];
} result_t;

static result_t results[64];
static size_t n_results;

static void measure(const opts_t *o, uint32_t cap, uint32_t batch) {
  point_t *p = xmalloc(sizeof *p);
  point_init(p, cap, batch);
  ctx_t ctx[N_UNITS];
  uint64_t n[N_UNITS];
  double v[N_UNITS][BENCH_MAX_REPS];
  for (int u = 0; u < N_UNITS; u++) {
    ctx[u].p = p;
    ctx[u].unit = u;
    n[u] = bench_warm_up(run, &ctx[u], &o->timing);
  }
  for (int r = 0; r < o->timing.reps; r++)
    for (int u = 0; u < N_UNITS; u++)
      v[u][r] = bench_rep_seconds(run, &ctx[u], n[u], &o->timing) / batch * 1e9;
  result_t *res = &results[n_results++];
  res->cap = cap;
  res->batch = batch;
  for (int u = 0; u < N_UNITS; u++) res->ns[u] = bench_median(v[u], o->timing.reps);
  point_free(p);
  free(p);
}

static const opts_t *g_opts;

static void as_json(void) {
  for (size_t i = 0; i < n_results; i++)
    for (int u = 0; u < N_UNITS; u++) {
      char params[96];
      snprintf(params, sizeof params, "\"capacity\": %u, \"batch\": %u", results[i].cap,
               results[i].batch);
      bench_emit(true, unit_name[u], params, results[i].ns[u], "ns/row");
    }
}

static void as_table(void) {
  printf("%10s %6s | %8s | %8s %8s %6s | %11s\n", "capacity", "batch", "insert", "gather",
         "columns", "ratio", "sample+rows");
  for (size_t i = 0; i < n_results; i++) {
    const double *ns = results[i].ns;
    printf("%10u %6u | %8.2f | %8.2f %8.2f %6.2f | %11.2f\n", results[i].cap, results[i].batch,
           ns[U_INSERT], ns[U_GATHER], ns[U_BASE_GATHER], ns[U_GATHER] / ns[U_BASE_GATHER],
           ns[U_SAMPLE]);
  }
  printf("\n# ns per row, median of %d; columns = the gather from one array per field (the\n"
         "# table's layout before rows), in the same run; ratio = ours / columns (below 1:\n"
         "# ours faster); insert and sample+rows are whole table calls\n",
         g_opts->timing.reps);
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(&o, argc, argv);
  g_opts = &o;
  if (!o.json) bench_print_header("bench_table");
  for (size_t c = 0; c < o.capacity.n; c++)
    for (size_t b = 0; b < o.batch.n; b++) {
      if (n_results == sizeof results / sizeof results[0]) die("too many points");
      if (o.batch.v[b] > o.capacity.v[c]) continue;
      measure(&o, o.capacity.v[c], o.batch.v[b]);
    }
  bench_report(o.json, as_json, as_table);
  return 0;
}
