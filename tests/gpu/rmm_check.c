/* rmm_check.c - see rmm_check.h. */
#include "rmm_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sumtree.h"
#include "rd_rng.h"
#include "rdt_rmm.h"
#include "rdt_schema.h"

/* ------------------------------------------------------------------ */
/* Device calls on the host                                            */
/* ------------------------------------------------------------------ */

typedef struct {
  uint32_t nrows, row_bytes;
  uint8_t *mem;
} host_rows_t;

/* The tree is tests/support's CPU replay module (rdt_rmm.h): an
 * rd_sumtree_t, whose leaf bound the tree keeps itself. */
static int h_tree_init(void **out, int device, uint32_t capacity, uint32_t fanout,
                       uint32_t max_batch, rd_error_t *err) {
  (void)device, (void)max_batch;
  return rdt_host_rmm_ops.create(out, capacity, fanout, 0, err);
}
static void h_tree_free(void *t) { rdt_host_rmm_ops.destroy(t); }
static int h_tree_set_range(void *t, uint32_t first, size_t n, const uint64_t *v,
                            rd_error_t *err) {
  return rd_sumtree_set_range(t, first, n, v, err);
}
static int h_tree_update(void *t, size_t n, const uint32_t *p, const uint64_t *v,
                         rd_error_t *err) {
  return rd_sumtree_update(t, n, p, v, err);
}
static int h_tree_sample(void *t, size_t n, const uint64_t *tg, uint32_t *lv, rd_error_t *err) {
  return rd_sumtree_sample(t, n, tg, lv, err);
}
static int h_tree_total(void *t, uint64_t *total, rd_error_t *err) {
  (void)err;
  *total = rd_sumtree_total(t);
  return RD_OK;
}
static size_t h_tree_bytes(const void *t) { return ((const rd_sumtree_t *)t)->mem_bytes; }

static int h_rows_init(void **out, int device, void *tree, uint32_t nrows, uint32_t row_bytes,
                       uint32_t max_batch, rd_error_t *err) {
  (void)device, (void)tree, (void)max_batch;
  host_rows_t *r = calloc(1, sizeof *r);
  uint8_t *mem = calloc(nrows, row_bytes);
  if (r == NULL || mem == NULL) {
    free(r);
    free(mem);
    return rd_error_set(err, RD_ENOMEM, "host rows");
  }
  r->nrows = nrows, r->row_bytes = row_bytes, r->mem = mem;
  *out = r;
  return RD_OK;
}
static void h_rows_free(void *p) {
  host_rows_t *r = p;
  free(r->mem);
  free(r);
}
static int h_rows_scatter(void *p, size_t n, const uint32_t *pos, const void *data,
                          rd_error_t *err) {
  host_rows_t *r = p;
  for (size_t i = 0; i < n; i++)
    if (pos[i] >= r->nrows) return rd_error_set(err, RD_ERANGE, "host rows: position %u", pos[i]);
  for (size_t i = 0; i < n; i++)
    memcpy(r->mem + (size_t)pos[i] * r->row_bytes, (const uint8_t *)data + i * r->row_bytes,
           r->row_bytes);
  return RD_OK;
}
static int h_rows_gather(void *p, size_t n, const uint32_t *pos, void *out, rd_error_t *err) {
  host_rows_t *r = p;
  for (size_t i = 0; i < n; i++)
    if (pos[i] >= r->nrows) return rd_error_set(err, RD_ERANGE, "host rows: position %u", pos[i]);
  for (size_t i = 0; i < n; i++)
    memcpy((uint8_t *)out + i * r->row_bytes, r->mem + (size_t)pos[i] * r->row_bytes,
           r->row_bytes);
  return RD_OK;
}
static size_t h_rows_bytes(const void *p) {
  const host_rows_t *r = p;
  return (size_t)r->nrows * r->row_bytes;
}

const rd_gpu_dev_ops_t rmm_check_host_dev = {
    .name = "host",
    .tree_init = h_tree_init,
    .tree_free = h_tree_free,
    .tree_set_range = h_tree_set_range,
    .tree_update = h_tree_update,
    .tree_sample = h_tree_sample,
    .tree_total = h_tree_total,
    .tree_device_bytes = h_tree_bytes,
    .rows_init = h_rows_init,
    .rows_free = h_rows_free,
    .rows_scatter = h_rows_scatter,
    .rows_gather = h_rows_gather,
    .rows_device_bytes = h_rows_bytes,
};

/* ------------------------------------------------------------------ */
/* Device calls that fail on demand                                    */
/* ------------------------------------------------------------------ */

static struct {
  const rd_gpu_dev_ops_t *base;
  unsigned mask;
  uint64_t fail_at, count;
  int sticky, poisoned;
} F;

void rmm_check_fault_base(const rd_gpu_dev_ops_t *base) { F.base = base; }

void rmm_check_arm(unsigned mask, uint64_t fail_at, int sticky) {
  F.mask = mask, F.fail_at = fail_at, F.sticky = sticky, F.count = 0, F.poisoned = 0;
}

/* 1 if this call (of kind `kind`) must fail. */
static int fails(unsigned kind, rd_error_t *err) {
  if (F.poisoned) return rd_error_set(err, RD_EINTERNAL, "injected: the device is gone"), 1;
  if (F.fail_at == 0 || !(F.mask & kind)) return 0;
  if (++F.count != F.fail_at) return 0;
  if (F.sticky) F.poisoned = 1;
  rd_error_set(err, RD_EINTERNAL, "injected failure of device call %llu",
               (unsigned long long)F.fail_at);
  return 1;
}

static int f_tree_init(void **out, int device, uint32_t capacity, uint32_t fanout,
                       uint32_t max_batch, rd_error_t *err) {
  return F.base->tree_init(out, device, capacity, fanout, max_batch, err);
}
static void f_tree_free(void *t) { F.base->tree_free(t); }
static int f_tree_set_range(void *t, uint32_t first, size_t n, const uint64_t *v,
                            rd_error_t *err) {
  return fails(RMM_FAIL_TREE, err) ? RD_EINTERNAL : F.base->tree_set_range(t, first, n, v, err);
}
static int f_tree_update(void *t, size_t n, const uint32_t *p, const uint64_t *v,
                         rd_error_t *err) {
  return fails(RMM_FAIL_TREE, err) ? RD_EINTERNAL : F.base->tree_update(t, n, p, v, err);
}
static int f_tree_sample(void *t, size_t n, const uint64_t *tg, uint32_t *lv, rd_error_t *err) {
  return fails(RMM_FAIL_TREE, err) ? RD_EINTERNAL : F.base->tree_sample(t, n, tg, lv, err);
}
static int f_tree_total(void *t, uint64_t *total, rd_error_t *err) {
  return fails(RMM_FAIL_TREE, err) ? RD_EINTERNAL : F.base->tree_total(t, total, err);
}
static size_t f_tree_bytes(const void *t) { return F.base->tree_device_bytes(t); }
static int f_rows_init(void **out, int device, void *tree, uint32_t nrows, uint32_t row_bytes,
                       uint32_t max_batch, rd_error_t *err) {
  return F.base->rows_init(out, device, tree, nrows, row_bytes, max_batch, err);
}
static void f_rows_free(void *r) { F.base->rows_free(r); }
static int f_rows_scatter(void *r, size_t n, const uint32_t *pos, const void *data,
                          rd_error_t *err) {
  return fails(RMM_FAIL_WRITE, err) ? RD_EINTERNAL : F.base->rows_scatter(r, n, pos, data, err);
}
static int f_rows_gather(void *r, size_t n, const uint32_t *pos, void *out, rd_error_t *err) {
  return fails(RMM_FAIL_READ, err) ? RD_EINTERNAL : F.base->rows_gather(r, n, pos, out, err);
}
static size_t f_rows_bytes(const void *r) { return F.base->rows_device_bytes(r); }

const rd_gpu_dev_ops_t rmm_check_fault_dev = {
    .name = "fault",
    .tree_init = f_tree_init,
    .tree_free = f_tree_free,
    .tree_set_range = f_tree_set_range,
    .tree_update = f_tree_update,
    .tree_sample = f_tree_sample,
    .tree_total = f_tree_total,
    .tree_device_bytes = f_tree_bytes,
    .rows_init = f_rows_init,
    .rows_free = f_rows_free,
    .rows_scatter = f_rows_scatter,
    .rows_gather = f_rows_gather,
    .rows_device_bytes = f_rows_bytes,
};

/* ------------------------------------------------------------------ */
/* Table ops over given device calls                                   */
/* ------------------------------------------------------------------ */

static const rd_gpu_dev_ops_t *g_dev;
static int g_device;
static rd_rmm_ops_t g_rmm;
static rd_storage_ops_t g_st;

static int g_rmm_create(void **m, uint32_t cap, uint32_t k, uint64_t max_leaf, rd_error_t *err) {
  return rd_gpu_rmm_create_on(m, g_dev, g_device, cap, k, max_leaf, err);
}
static int g_st_create(void **s, uint32_t cap, uint32_t nf, const size_t *fb,
                       const rd_rmm_ops_t *rmm_ops, void *rmm, rd_error_t *err) {
  return rd_gpu_storage_create_on(s, g_dev, g_device, cap, nf, fb, rmm_ops, rmm, err);
}

void rmm_check_ops(const rd_gpu_dev_ops_t *dev, int device, const rd_rmm_ops_t **rmm,
                   const rd_storage_ops_t **st) {
  g_dev = dev;
  g_device = device;
  g_rmm = *rd_gpu_rmm_ops(device);
  g_rmm.create = g_rmm_create;
  g_st = *rd_gpu_storage_ops(device);
  g_st.create = g_st_create;
  *rmm = &g_rmm;
  *st = &g_st;
}

/* ------------------------------------------------------------------ */
/* Two tables, one workload                                            */
/* ------------------------------------------------------------------ */

#define MAXF 5
enum { F_OBS, F_ACTION, F_REWARD, F_DONE, F_FRAME };

typedef struct {
  const rmm_case_t *c;
  rd_table_t a, r; /* a: on the modules; r: the CPU's */
  int a_ok, r_ok;
  uint32_t nf;
  size_t fb[MAXF];
  uint8_t *in[MAXF];
  rd_cbuf_t in_cols[MAXF];
  double *prio;
  uint64_t *keys[2], *ukeys;
  double *prob[2], *w[2], *uprio;
  uint8_t *out[2][MAXF];
  rd_buf_t out_cols[2][MAXF];
  size_t last_insert;    /* rows of the last insert tried */
  uint64_t last_keys[2]; /* sample keys to update */
  size_t n_last;
  uint64_t rng;
  char *msg;
  size_t len;
} work_t;

static int failf(work_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failf(work_t *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = snprintf(w->msg, w->len, "%s: ", w->c->name);
  if (k >= 0 && (size_t)k < w->len) vsnprintf(w->msg + k, w->len - (size_t)k, fmt, ap);
  va_end(ap);
  return -1;
}

static void make_config(const rmm_case_t *c, rd_table_config_t *tc) {
  rd_table_config_default(tc);
  rd_schema_t *s = &tc->schema;
  rdt_field(&s->fields[F_OBS], "obs", RD_DTYPE_FLOAT32, 4);
  rdt_field(&s->fields[F_ACTION], "action", RD_DTYPE_INT32, 0);
  rdt_field(&s->fields[F_REWARD], "reward", RD_DTYPE_FLOAT32, 0);
  rdt_field(&s->fields[F_DONE], "done", RD_DTYPE_BOOL, 0);
  s->n_fields = 4;
  if (c->wide) rdt_field(&s->fields[s->n_fields++], "frame", RD_DTYPE_UINT8, 65536);
  tc->capacity = c->capacity;
  tc->fanout = c->fanout;
  tc->max_batch = c->max_batch;
  tc->seed = c->seed;
}

static void work_free(work_t *w) {
  if (w->a_ok) rd_table_free(&w->a);
  if (w->r_ok) rd_table_free(&w->r);
  for (uint32_t f = 0; f < MAXF; f++) {
    free(w->in[f]);
    free(w->out[0][f]);
    free(w->out[1][f]);
  }
  free(w->prio), free(w->keys[0]), free(w->keys[1]), free(w->ukeys);
  free(w->prob[0]), free(w->prob[1]), free(w->w[0]), free(w->w[1]), free(w->uprio);
}

static int work_init(work_t *w, const rmm_case_t *c, const rd_rmm_ops_t *rmm,
                     const rd_storage_ops_t *st, char *msg, size_t len) {
  memset(w, 0, sizeof *w);
  w->c = c, w->msg = msg, w->len = len, w->rng = c->seed ^ 0x5eed;
  rd_table_config_t tc;
  make_config(c, &tc);
  rd_error_t err;
  if (rd_table_init(&w->r, &tc, &err)) return failf(w, "CPU table: %s", err.msg);
  w->r_ok = 1;
  tc.rmm = rmm, tc.storage = st;
  if (rd_table_init(&w->a, &tc, &err)) return failf(w, "table on %s/%s: %s",
                                                    rmm ? rmm->name : "cpu",
                                                    st ? st->name : "host", err.msg);
  w->a_ok = 1;
  w->nf = tc.schema.n_fields;
  const size_t B = c->max_batch;
  for (uint32_t f = 0; f < w->nf; f++) {
    w->fb[f] = rd_field_bytes(&tc.schema.fields[f]);
    w->in[f] = malloc(B * w->fb[f]);
    w->out[0][f] = malloc(B * w->fb[f]);
    w->out[1][f] = malloc(B * w->fb[f]);
    if (!w->in[f] || !w->out[0][f] || !w->out[1][f]) return failf(w, "out of memory");
    w->out_cols[0][f] = (rd_buf_t){w->out[0][f], B * w->fb[f]};
    w->out_cols[1][f] = (rd_buf_t){w->out[1][f], B * w->fb[f]};
  }
  w->prio = malloc(B * sizeof(double)), w->uprio = malloc(B * sizeof(double));
  w->keys[0] = malloc(B * 8), w->keys[1] = malloc(B * 8), w->ukeys = malloc(B * 8);
  w->prob[0] = malloc(B * 8), w->prob[1] = malloc(B * 8);
  w->w[0] = malloc(B * 8), w->w[1] = malloc(B * 8);
  if (!w->prio || !w->uprio || !w->keys[0] || !w->keys[1] || !w->ukeys || !w->prob[0] ||
      !w->prob[1] || !w->w[0] || !w->w[1])
    return failf(w, "out of memory");
  return 0;
}

/* Row bytes of key k, field f: every byte depends on k. */
static void fill_row(uint64_t k, uint32_t f, size_t fb, uint8_t *dst) {
  if (f == F_DONE) {
    dst[0] = (uint8_t)(k & 1);
    return;
  }
  uint64_t s = k * 977 + f;
  for (size_t j = 0; j < fb; j += 8) {
    uint64_t v = rd_splitmix64(&s);
    memcpy(dst + j, &v, fb - j < 8 ? fb - j : 8);
  }
}

/* What a call did on the table under test, in `a_first` mode: only the
 * table under test runs, and the CPU table follows if it succeeded. */
typedef enum { BOTH, A_FIRST } mode_t_;

static int do_insert(work_t *w, size_t n, int with_prio, mode_t_ mode, int *a_rc) {
  const uint64_t k0 = w->r.next_key;
  w->last_insert = n;
  for (uint32_t f = 0; f < w->nf; f++) {
    for (size_t i = 0; i < n; i++) fill_row(k0 + i, f, w->fb[f], w->in[f] + i * w->fb[f]);
    w->in_cols[f] = (rd_cbuf_t){w->in[f], n * w->fb[f]};
  }
  for (size_t i = 0; i < n; i++) w->prio[i] = (double)(rd_splitmix64(&w->rng) >> 44) * 0x1p-12;
  rd_error_t ea, er;
  uint64_t *ka = w->keys[0], *kr = w->keys[1];
  int ra = rd_table_insert(&w->a, n, w->in_cols, with_prio ? w->prio : NULL, ka, &ea);
  *a_rc = ra;
  if (mode == A_FIRST && ra != RD_OK) return 0;
  int rr = rd_table_insert(&w->r, n, w->in_cols, with_prio ? w->prio : NULL, kr, &er);
  if (ra != rr) return failf(w, "insert of %zu: %s (%s) vs CPU %s", n, rd_err_name(ra), ea.msg,
                             rd_err_name(rr));
  if (ra == RD_OK && memcmp(ka, kr, n * 8) != 0) return failf(w, "insert keys differ");
  return 0;
}

static int do_sample(work_t *w, size_t n, double beta, unsigned flags, mode_t_ mode, int *a_rc) {
  rd_sample_out_t oa = {w->keys[0], w->prob[0], w->w[0], w->out_cols[0]};
  rd_sample_out_t orr = {w->keys[1], w->prob[1], w->w[1], w->out_cols[1]};
  rd_error_t ea, er;
  int ra = rd_table_sample(&w->a, n, beta, flags, &oa, &ea);
  *a_rc = ra;
  if (mode == A_FIRST && ra != RD_OK) return 0;
  int rr = rd_table_sample(&w->r, n, beta, flags, &orr, &er);
  if (ra != rr) return failf(w, "sample of %zu: %s (%s) vs CPU %s (%s)", n, rd_err_name(ra),
                             ea.msg, rd_err_name(rr), er.msg);
  if (ra != RD_OK) return 0;
  if (memcmp(w->keys[0], w->keys[1], n * 8) != 0) return failf(w, "sampled keys differ");
  if (memcmp(w->prob[0], w->prob[1], n * 8) != 0) return failf(w, "probabilities differ");
  if (memcmp(w->w[0], w->w[1], n * 8) != 0) return failf(w, "weights differ");
  for (uint32_t f = 0; f < w->nf; f++)
    if (memcmp(w->out[0][f], w->out[1][f], n * w->fb[f]) != 0)
      return failf(w, "sampled rows of field %u differ", f);
  w->last_keys[0] = w->keys[0][0];
  w->last_keys[1] = w->keys[0][n - 1];
  w->n_last = 2;
  return 0;
}

/* Live keys, the last sample's twice (repeats), and stale keys. */
static int do_update(work_t *w, size_t n, mode_t_ mode, int *a_rc) {
  const uint64_t size = w->r.size, next = w->r.next_key;
  for (size_t i = 0; i < n; i++) {
    uint64_t u = rd_splitmix64(&w->rng);
    if (i < 2 * w->n_last) w->ukeys[i] = w->last_keys[i % w->n_last];
    else if (u % 7 == 0 && next > size) w->ukeys[i] = (next - size - 1) - (u >> 40) % (next - size);
    else w->ukeys[i] = next - 1 - (u >> 20) % size;
    w->uprio[i] = (double)(rd_splitmix64(&w->rng) >> 40) * 0x1p-16;
  }
  rd_error_t ea, er;
  size_t sa = 0, sr = 0;
  int ra = rd_table_update(&w->a, n, w->ukeys, w->uprio, &sa, &ea);
  *a_rc = ra;
  if (mode == A_FIRST && ra != RD_OK) return 0;
  int rr = rd_table_update(&w->r, n, w->ukeys, w->uprio, &sr, &er);
  if (ra != rr || sa != sr)
    return failf(w, "update of %zu: %s (%s), %zu stale vs CPU %s, %zu stale", n, rd_err_name(ra),
                 ea.msg, sa, rd_err_name(rr), sr);
  return 0;
}

static int do_gather(work_t *w, size_t n, mode_t_ mode, int *a_rc) {
  const uint64_t size = w->r.size, next = w->r.next_key;
  for (size_t i = 0; i < n; i++) w->ukeys[i] = next - 1 - rd_splitmix64(&w->rng) % size;
  rd_error_t ea, er;
  int ra = rd_table_gather(&w->a, n, w->ukeys, w->out_cols[0], &ea);
  *a_rc = ra;
  if (mode == A_FIRST && ra != RD_OK) return 0;
  int rr = rd_table_gather(&w->r, n, w->ukeys, w->out_cols[1], &er);
  if (ra != rr) return failf(w, "gather: %s (%s) vs CPU %s", rd_err_name(ra), ea.msg,
                             rd_err_name(rr));
  for (uint32_t f = 0; f < w->nf && ra == RD_OK; f++)
    if (memcmp(w->out[0][f], w->out[1][f], n * w->fb[f]) != 0)
      return failf(w, "gathered rows of field %u differ", f);
  return 0;
}

/* Every live key of a: the same priority and row as in r. */
static int same_items(work_t *w) {
  if (w->a.next_key != w->r.next_key) return failf(w, "next keys differ");
  rd_error_t err;
  const uint64_t first = w->a.next_key - w->a.size;
  for (uint64_t k = first; k < w->a.next_key;) {
    size_t n = 0;
    for (; n < w->c->max_batch && k + n < w->a.next_key; n++) {
      w->ukeys[n] = k + n;
      double pa, pr;
      if (rd_table_get_priority(&w->a, k + n, &pa, &err) ||
          rd_table_get_priority(&w->r, k + n, &pr, &err) || pa != pr)
        return failf(w, "priority of key %llu differs", (unsigned long long)(k + n));
    }
    if (rd_table_gather(&w->a, n, w->ukeys, w->out_cols[0], &err) ||
        rd_table_gather(&w->r, n, w->ukeys, w->out_cols[1], &err))
      return failf(w, "gather of live keys: %s", err.msg);
    for (uint32_t f = 0; f < w->nf; f++)
      if (memcmp(w->out[0][f], w->out[1][f], n * w->fb[f]) != 0)
        return failf(w, "rows of field %u of keys %llu.. differ", f, (unsigned long long)k);
    k += n;
  }
  return 0;
}

/* A sample of the table under test draws live keys only (the slots of
 * dropped items hold zero leaves). */
static int samples_live(work_t *w) {
  if (w->a.size == 0) return 0;
  size_t n = w->c->batch < w->a.size ? w->c->batch : w->a.size;
  rd_sample_out_t o = {w->keys[0], w->prob[0], w->w[0], NULL};
  rd_error_t err;
  const uint64_t save = w->a.draws;
  if (rd_table_sample(&w->a, n, 0.4, 0, &o, &err)) return failf(w, "sample: %s", err.msg);
  w->a.draws = save; /* keep the two tables' streams together */
  for (size_t i = 0; i < n; i++)
    if (w->keys[0][i] < w->a.next_key - w->a.size)
      return failf(w, "sampled key %llu, which was dropped", (unsigned long long)w->keys[0][i]);
  return 0;
}

/* One round: insert (with and without priorities), sample plain and
 * stratified, update, gather. In A_FIRST mode stops at the first call of
 * the table under test that fails; *failed names it. */
static int round_(work_t *w, uint32_t r, mode_t_ mode, const char **failed) {
  const rmm_case_t *c = w->c;
  uint32_t b = c->batch, cap = c->capacity;
  size_t n_in = (r % 3 == 0 ? b + b / 3 + 1 : b) % cap + 1;
  int rc = 0, ra = RD_OK;
  *failed = NULL;
#define STEP(call, name)                                                                      \
  do {                                                                                       \
    if ((rc = (call)) != 0) return rc;                                                       \
    if (ra != RD_OK && mode == A_FIRST) {                                                    \
      *failed = name;                                                                        \
      return 0;                                                                              \
    }                                                                                        \
  } while (0)
  STEP(do_insert(w, n_in < c->max_batch ? n_in : c->max_batch, r % 2, mode, &ra), "insert");
  size_t ns = b < w->r.size ? b : w->r.size;
  STEP(do_sample(w, ns, 0.4, 0, mode, &ra), "sample");
  STEP(do_sample(w, ns, 1.0, RD_SAMPLE_STRATIFIED, mode, &ra), "sample");
  size_t nu = (size_t)b * (r % 2 ? 3 : 1);
  STEP(do_update(w, nu < c->max_batch ? nu : c->max_batch, mode, &ra), "update");
  STEP(do_gather(w, ns, mode, &ra), "gather");
#undef STEP
  return 0;
}

int rmm_check_same(const rmm_case_t *c, const rd_rmm_ops_t *rmm, const rd_storage_ops_t *st,
                   char *msg, size_t len) {
  work_t w;
  int rc = work_init(&w, c, rmm, st, msg, len);
  const char *failed;
  for (uint32_t r = 0; r < c->rounds && rc == 0; r++) {
    rc = round_(&w, r, BOTH, &failed);
    if (rc == 0 && (r % 8 == 7 || r + 1 == c->rounds)) rc = same_items(&w);
  }
  if (rc == 0 && rmm != NULL && w.a.rmm != NULL) {
    rd_gpu_module_info_t info;
    rd_gpu_rmm_info(w.a.rmm, &info);
    if (info.broken) rc = failf(&w, "module broken: %s", info.why);
  }
  work_free(&w);
  return rc;
}

int rmm_check_fault(const rmm_case_t *c, const rd_rmm_ops_t *rmm, const rd_storage_ops_t *st,
                    unsigned mask, uint64_t fail_at, int sticky, const char **failed_op,
                    uint64_t *lost_out, char *msg, size_t len) {
  work_t w;
  const char *failed = NULL;
  uint64_t lost = 0;
  rmm_check_arm(0, 0, 0);
  int rc = work_init(&w, c, rmm, st, msg, len);
  /* Fill the ring once over, then arm. */
  for (uint32_t k = 0; rc == 0 && w.r.next_key < (uint64_t)c->capacity + c->capacity / 2; k++) {
    int ra;
    size_t n = c->batch < c->max_batch ? c->batch : c->max_batch;
    rc = do_insert(&w, n, k % 2, BOTH, &ra);
  }
  if (rc == 0) rmm_check_arm(mask, fail_at, sticky);
  for (uint32_t r = 0; rc == 0 && failed == NULL && r < c->rounds; r++)
    rc = round_(&w, r, A_FIRST, &failed);
  if (failed_op) *failed_op = failed ? failed : "none";
  if (rc == 0 && failed != NULL) {
    /* A fault; after a failed write or sample the table refuses until it
     * moves (a failed gather changed nothing, and moving is the caller's
     * choice; after a sticky fault every call fails anyway). */
    rd_error_t err;
    int ra;
    if (strcmp(failed, "gather") != 0 &&
        (do_sample(&w, 1, 0.4, 0, A_FIRST, &ra) || ra != RD_EINTERNAL))
      rc = failf(&w, "after the %s failed, a sample gave %s, not RD_EINTERNAL", failed,
                 rd_err_name(ra));
    const uint64_t size0 = w.a.size, failed_insert = w.a.failed_insert;
    const int rows_on_device = w.a.config.storage != NULL;
    if (rc == 0 && strcmp(failed, "insert") == 0 && failed_insert != w.last_insert)
      rc = failf(&w, "the table recorded a failed insert of %llu rows, not %zu",
                 (unsigned long long)failed_insert, w.last_insert);
    if (rc == 0 && rd_table_to_cpu(&w.a, &lost, &err) != RD_OK)
      rc = failf(&w, "rd_table_to_cpu: %s", err.msg);
    rmm_check_arm(0, 0, 0); /* the CPU's from here: nothing to fail */
    if (rc == 0 && (w.a.config.rmm || w.a.config.storage || w.a.rmm || w.a.rows))
      rc = failf(&w, "the table did not move to the CPU");
    /* What the contract drops: everything when the rows cannot be read
     * back; after a failed insert of n rows, the oldest items it may have
     * half written (all but capacity - n). */
    uint64_t want = 0;
    if (rows_on_device && sticky) want = size0;
    else if (failed_insert > 0 && size0 > c->capacity - failed_insert)
      want = size0 - (c->capacity - failed_insert);
    if (rc == 0 && lost != want)
      rc = failf(&w, "after a failed %s, %llu items dropped, %llu expected (%s)", failed,
                 (unsigned long long)lost, (unsigned long long)want, err.msg);
    if (rc == 0 && w.a.size + lost != w.r.size)
      rc = failf(&w, "%llu items left and %llu dropped; the CPU table holds %llu",
                 (unsigned long long)w.a.size, (unsigned long long)lost,
                 (unsigned long long)w.r.size);
    if (rc == 0) rc = same_items(&w);
    if (rc == 0) rc = samples_live(&w);
    /* Rewrite every slot on both: then they agree call for call again. */
    for (uint64_t done = 0; rc == 0 && done < c->capacity;) {
      size_t n = c->capacity - done < c->max_batch ? c->capacity - done : c->max_batch;
      rc = do_insert(&w, n, 1, BOTH, &ra);
      done += n;
    }
    for (uint32_t r = 0; rc == 0 && r < 3; r++) rc = round_(&w, r, BOTH, &failed);
    if (rc == 0) rc = same_items(&w);
  } else if (rc == 0 && fail_at != 0) {
    rc = failf(&w, "the armed failure (call %llu) never happened", (unsigned long long)fail_at);
  }
  rmm_check_arm(0, 0, 0);
  if (lost_out) *lost_out = lost;
  work_free(&w);
  return rc;
}
