/* bench_gpu_table.c - a prioritized table's calls with its sum tree and rows
 * on the CPU or on a GPU (backends/gpu/rmm_gpu.h): what a workload's
 * insert, sample, update and gather cost per item through rd_table_* when
 * the placement puts the RMM and/or the storage on the GPU.
 *
 * Placements: cpu (CPU tree, host columns: the baseline, same run),
 * gpu-tree (GPU tree, host columns), gpu-rows (CPU tree, rows on the GPU),
 * gpu-both (both on the GPU, one stream). Rows of 41 bytes (CartPole:
 * obs f32[4], action i32, reward f32, next_obs f32[4], done bool) in a table
 * of 2^20 items filled before timing; batches 512, 8192 and 65536 (--quick:
 * 512 and 8192). One measurement: calls back to back until 0.2 s (at least
 * 3), ns per item; the median of 3. Every call goes through the host
 * (host pointers: copies in, kernels, copies out, wait), as the daemon's
 * do; priorities are converted and checked by the table as always.
 *
 *   bench_gpu_table [--json] [--json-file PATH] [--quick] [--device N]
 *
 * Table on stdout; --json prints JSON lines ({"name":"gpu.table.<op>",
 * "params":{"placement":...,"batch":...},"value":ns,"unit":"ns/item"})
 * instead; --json-file writes them to a file as well. Exit 77 without a
 * usable GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rmm_gpu.h"
#include "sumtree_gpu.h"
#include "table.h"
#include "rd_rng.h"
#include "rd_clock.h"

#define CAPACITY (1u << 20)
#define MAX_BATCH 65536u
#define REPS 3
#define NF 5

static const size_t fb[NF] = {16, 4, 4, 16, 1};

static void die(const char *what, const rd_error_t *err) {
  fprintf(stderr, "bench_gpu_table: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) die("out of memory", NULL);
  return p;
}

static void schema(rd_schema_t *s) {
  const char *name[NF] = {"obs", "action", "reward", "next_obs", "done"};
  const rd_dtype_t dt[NF] = {RD_DTYPE_FLOAT32, RD_DTYPE_INT32, RD_DTYPE_FLOAT32,
                             RD_DTYPE_FLOAT32, RD_DTYPE_BOOL};
  const uint32_t dim[NF] = {4, 0, 0, 4, 0};
  memset(s, 0, sizeof *s);
  for (int f = 0; f < NF; f++) {
    snprintf(s->fields[f].name, sizeof s->fields[f].name, "%s", name[f]);
    s->fields[f].dtype = dt[f];
    s->fields[f].rank = dim[f] ? 1 : 0;
    s->fields[f].shape[0] = dim[f];
  }
  s->n_fields = NF;
}

typedef struct {
  uint8_t *in[NF], *out[NF];
  rd_cbuf_t in_cols[NF];
  rd_buf_t out_cols[NF];
  double *prio, *prob, *w;
  uint64_t *keys;
} bufs_t;

static int g_json = 0;
static FILE *g_json_file = NULL;

static void emit(const char *op, const char *placement, uint32_t batch, double ns) {
  char line[256];
  snprintf(line, sizeof line,
           "{\"name\":\"gpu.table.%s\",\"params\":{\"placement\":\"%s\",\"batch\":%u,"
           "\"capacity\":%u,\"row_bytes\":41},\"value\":%.3f,\"unit\":\"ns/item\"}",
           op, placement, batch, CAPACITY, ns);
  if (g_json) printf("%s\n", line);
  if (g_json_file) fprintf(g_json_file, "%s\n", line);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ns per item of `op` on t at batch b: median of REPS runs of >= 0.2 s. */
static double measure(rd_table_t *t, bufs_t *B, int op, uint32_t b) {
  double r[REPS];
  rd_error_t err;
  rd_sample_out_t so = {B->keys, B->prob, B->w, B->out_cols};
  for (int rep = 0; rep < REPS; rep++) {
    uint64_t calls = 0;
    double t0 = rd_clock_now(), t1;
    do {
      int rc = 0;
      for (uint32_t f = 0; f < NF; f++) B->in_cols[f].bytes = b * fb[f];
      switch (op) {
      case 0: rc = rd_table_insert(t, b, B->in_cols, B->prio, NULL, &err); break;
      case 1: rc = rd_table_sample(t, b, 0.4, 0, &so, &err); break;
      case 2: rc = rd_table_update(t, b, B->keys, B->prio, NULL, &err); break;
      default: rc = rd_table_gather(t, b, B->keys, B->out_cols, &err); break;
      }
      if (rc) die("a table call", &err);
      calls++;
      t1 = rd_clock_now();
    } while (t1 - t0 < 0.2 || calls < 3);
    r[rep] = (t1 - t0) / (double)(calls * b) * 1e9;
  }
  qsort(r, REPS, sizeof r[0], cmp_d);
  return r[REPS / 2];
}

int main(int argc, char **argv) {
  int quick = 0, device = 0;
  const char *json_file = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) g_json = 1;
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--json-file") == 0 && i + 1 < argc) json_file = argv[++i];
    else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_gpu_table [--json] [--json-file PATH] [--quick] "
                      "[--device N]\n");
      return 2;
    }
  }
  rd_error_t err;
  int count = 0;
  char name[128] = "?";
  if (rd_gpu_device_count(&count, &err) != RD_OK || device < 0 || device >= count ||
      rd_gpu_device_name(device, name, sizeof name, &err) != RD_OK) {
    printf("SKIP no usable CUDA device %d: %s\n", device, err.msg);
    return 77;
  }
  if (json_file && (g_json_file = fopen(json_file, "w")) == NULL) die("cannot write", NULL);

  bufs_t B;
  uint64_t s = 42;
  for (int f = 0; f < NF; f++) {
    B.in[f] = xmalloc(MAX_BATCH * fb[f]);
    B.out[f] = xmalloc(MAX_BATCH * fb[f]);
    for (size_t k = 0; k < MAX_BATCH * fb[f]; k++)
      B.in[f][k] = f == NF - 1 ? (uint8_t)(k & 1) : (uint8_t)rd_splitmix64(&s);
    B.in_cols[f] = (rd_cbuf_t){B.in[f], MAX_BATCH * fb[f]};
    B.out_cols[f] = (rd_buf_t){B.out[f], MAX_BATCH * fb[f]};
  }
  B.prio = xmalloc(MAX_BATCH * sizeof(double));
  B.prob = xmalloc(MAX_BATCH * sizeof(double));
  B.w = xmalloc(MAX_BATCH * sizeof(double));
  B.keys = xmalloc(MAX_BATCH * sizeof(uint64_t));
  for (uint32_t i = 0; i < MAX_BATCH; i++) B.prio[i] = (double)(rd_splitmix64(&s) >> 40) * 0x1p-20;

  const struct {
    const char *name;
    const rd_rmm_ops_t *rmm;
    const rd_storage_ops_t *st;
  } place[] = {{"cpu", NULL, NULL},
               {"gpu-tree", rd_gpu_rmm_ops(device), NULL},
               {"gpu-rows", NULL, rd_gpu_storage_ops(device)},
               {"gpu-both", rd_gpu_rmm_ops(device), rd_gpu_storage_ops(device)}};
  const uint32_t batches[] = {512, 8192, 65536};
  const int nb = quick ? 2 : 3;
  const char *ops[4] = {"insert", "sample", "update", "gather"};
  double res[4][3][4];

  for (int p = 0; p < 4; p++) {
    rd_table_config_t c;
    rd_table_config_default(&c);
    schema(&c.schema);
    c.capacity = CAPACITY;
    c.max_batch = MAX_BATCH;
    c.rmm = place[p].rmm;
    c.storage = place[p].st;
    rd_table_t t;
    if (rd_table_init(&t, &c, &err)) die(place[p].name, &err);
    for (uint32_t f = 0; f < NF; f++) B.in_cols[f].bytes = MAX_BATCH * fb[f];
    for (uint32_t done = 0; done < CAPACITY; done += MAX_BATCH)
      if (rd_table_insert(&t, MAX_BATCH, B.in_cols, B.prio, NULL, &err)) die("fill", &err);
    for (int bi = 0; bi < nb; bi++)
      for (int op = 0; op < 4; op++) { /* update and gather take the last sample's keys */
        res[p][bi][op] = measure(&t, &B, op, batches[bi]);
        emit(ops[op], place[p].name, batches[bi], res[p][bi][op]);
      }
    rd_table_free(&t);
  }
  if (!g_json) {
    printf("# %s (device %d); rd_table_* with the tree / rows on the CPU or the GPU; table of "
           "%u items, rows of 41 bytes; ns/item, median of %d; host pointers throughout\n",
           name, device, CAPACITY, REPS);
    printf("%-8s %6s %10s %10s %10s %10s\n", "op", "batch", "cpu", "gpu-tree", "gpu-rows",
           "gpu-both");
    for (int op = 0; op < 4; op++)
      for (int bi = 0; bi < nb; bi++)
        printf("%-8s %6u %10.2f %10.2f %10.2f %10.2f\n", ops[op], batches[bi], res[0][bi][op],
               res[1][bi][op], res[2][bi][op], res[3][bi][op]);
  }
  if (g_json_file) fclose(g_json_file);
  for (int f = 0; f < NF; f++) free(B.in[f]), free(B.out[f]);
  free(B.prio), free(B.prob), free(B.w), free(B.keys);
  return 0;
}
