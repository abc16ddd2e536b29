/* bench_gemm.c - nn.c's own GEMM against OpenBLAS's sgemm on the learner's
 * shapes, in the same run.
 *
 * nn.c multiplies with its own packed GEMM instead of calling a BLAS
 * (nn.h says why). This program checks that claim on the machine at hand
 * (AVX2 or AVX-512): for every network of the learner shapes
 * (learner_shapes.h) and batch, the products one gradient step runs on
 * each layer (forward X W^T, weight gradient dZ^T X, input gradient dZ W),
 * once through rd_mlp_layer_gemm and once through cblas_sgemm with the
 * same row-major operands, interleaved point by point so both see the same
 * load. Threads: the network's team and OpenBLAS's own threads
 * (openblas_set_num_threads), at the same count.
 *
 * Figures: gemm.step_us (ours) and baseline.openblas.gemm.step_us, the
 * microseconds of one step's products summed over the shape's networks
 * (DQN: the Q network; DDPG: actor and critic), params shape, batch,
 * threads; the table also shows GFLOP/s and ours / OpenBLAS in speed.
 *
 * usage: bench_gemm [--json] [--quick] [--threads T]... [--batch B]...
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rd_clock.h"
#include "learner_shapes.h"
#include "nn.h"

#define MAX_LIST 8

typedef struct {
  bool json, quick;
  uint32_t threads[MAX_LIST], n_threads;
  uint32_t batch[MAX_LIST], n_batch;
  double min_s;
  int reps;
} opts_t;

/* One network of a shape: its layer sizes. */
typedef struct {
  uint32_t n_layers, sizes[4];
} net_t;

static uint32_t shape_nets(const shape_t *s, net_t *nets) {
  if (s->algo == RD_ALGO_DQN) {
    nets[0] = (net_t){3, {s->obs, s->hidden, s->hidden, s->actions}};
    return 1;
  }
  nets[0] = (net_t){3, {s->obs, s->hidden, s->hidden, s->actions}};
  nets[1] = (net_t){3, {s->obs + s->actions, s->critic_hidden, s->critic_hidden, 1}};
  return 2;
}

/* Operands of one network at batch n, and the network itself. */
typedef struct {
  net_t shape;
  rd_mlp_t mlp;
  float *x[3], *w[3], *dz[3], *c;
} operands_t;

static void operands_init(operands_t *o, const net_t *ns, uint32_t n, uint32_t threads) {
  o->shape = *ns;
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  c.spec.n_layers = ns->n_layers;
  for (uint32_t l = 0; l <= ns->n_layers; l++) c.spec.sizes[l] = ns->sizes[l];
  for (uint32_t l = 0; l < ns->n_layers; l++)
    c.spec.act[l] = l + 1 < ns->n_layers ? RD_NN_RELU : RD_NN_IDENTITY;
  c.max_batch = n;
  c.threads = threads;
  c.seed = SEED;
  rd_error_t err;
  if (rd_mlp_init(&o->mlp, &c, &err) != RD_OK) die("rd_mlp_init: %s", err.msg);
  size_t most = 0;
  for (uint32_t l = 0; l < ns->n_layers; l++) {
    size_t in = ns->sizes[l], out = ns->sizes[l + 1];
    o->x[l] = xmalloc(n * in * sizeof(float));
    o->w[l] = xmalloc(out * in * sizeof(float));
    o->dz[l] = xmalloc(n * out * sizeof(float));
    for (size_t i = 0; i < n * in; i++) o->x[l][i] = unif(SEED + l, i, -1, 1);
    for (size_t i = 0; i < out * in; i++) o->w[l][i] = unif(SEED + 10 + l, i, -0.1f, 0.1f);
    for (size_t i = 0; i < n * out; i++) o->dz[l][i] = unif(SEED + 20 + l, i, -1, 1);
    size_t m = n * in > n * out ? n * in : n * out;
    if (out * in > m) m = out * in;
    if (m > most) most = m;
  }
  o->c = xmalloc(most * sizeof(float));
}

static void operands_free(operands_t *o) {
  for (uint32_t l = 0; l < o->shape.n_layers; l++) {
    free(o->x[l]);
    free(o->w[l]);
    free(o->dz[l]);
  }
  free(o->c);
  rd_mlp_free(&o->mlp);
}

/* One step's products of every network, ours or OpenBLAS's. */
static void step(operands_t *ops, uint32_t n_nets, uint32_t n, bool blas) {
  for (uint32_t k = 0; k < n_nets; k++) {
    operands_t *o = &ops[k];
    for (uint32_t l = 0; l < o->shape.n_layers; l++) {
      int in = (int)o->shape.sizes[l], out = (int)o->shape.sizes[l + 1], b = (int)n;
      if (blas) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, in, 1.0f, o->x[l], in,
                    o->w[l], in, 0.0f, o->c, out);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1.0f, o->dz[l], out,
                    o->x[l], in, 0.0f, o->c, in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1.0f, o->dz[l], out,
                    o->w[l], in, 0.0f, o->c, in);
      } else {
        rd_mlp_layer_gemm(&o->mlp, l, RD_MLP_GEMM_FORWARD, n, o->x[l], o->w[l], o->c, NULL);
        rd_mlp_layer_gemm(&o->mlp, l, RD_MLP_GEMM_GRAD_W, n, o->dz[l], o->x[l], o->c, NULL);
        rd_mlp_layer_gemm(&o->mlp, l, RD_MLP_GEMM_GRAD_X, n, o->dz[l], o->w[l], o->c, NULL);
      }
    }
  }
}

static double flops(const operands_t *ops, uint32_t n_nets, uint32_t n) {
  double f = 0;
  for (uint32_t k = 0; k < n_nets; k++)
    for (uint32_t l = 0; l < ops[k].shape.n_layers; l++)
      f += 3.0 * 2.0 * n * ops[k].shape.sizes[l] * ops[k].shape.sizes[l + 1];
  return f;
}

/* Median seconds per step over reps repetitions of about min_s each. */
static double time_steps(operands_t *ops, uint32_t n_nets, uint32_t n, bool blas,
                         const opts_t *o) {
  double t0 = rd_clock_now();
  uint64_t k = 0;
  do {
    step(ops, n_nets, n, blas);
    k++;
  } while (rd_clock_now() - t0 < o->min_s / 4 || k < 2);
  double per = (rd_clock_now() - t0) / (double)k;
  uint64_t steps = (uint64_t)(o->min_s / per) + 1;
  double runs[16];
  for (int r = 0; r < o->reps; r++) {
    t0 = rd_clock_now();
    for (uint64_t i = 0; i < steps; i++) step(ops, n_nets, n, blas);
    runs[r] = (rd_clock_now() - t0) / (double)steps;
  }
  qsort(runs, (size_t)o->reps, sizeof *runs, cmp_double);
  return runs[o->reps / 2];
}

static void parse(opts_t *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      o->json = true;
    } else if (strcmp(argv[i], "--quick") == 0) {
      o->quick = true;
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc && o->n_threads < MAX_LIST) {
      o->threads[o->n_threads++] = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc && o->n_batch < MAX_LIST) {
      o->batch[o->n_batch++] = (uint32_t)atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: bench_gemm [--json] [--quick] [--threads T]... [--batch B]...\n");
      exit(2);
    }
  }
  if (o->n_threads == 0) {
    o->threads[o->n_threads++] = 1;
    o->threads[o->n_threads++] = 2;
  }
  if (o->n_batch == 0) {
    const uint32_t full[] = {32, 256, 2048, 16384}, quick[] = {32, 2048};
    const uint32_t *src = o->quick ? quick : full;
    o->n_batch = o->quick ? 2 : 4;
    memcpy(o->batch, src, o->n_batch * sizeof *src);
  }
  for (uint32_t i = 0; i < o->n_threads; i++)
    if (o->threads[i] < 1 || o->threads[i] > 64) die("--threads is 1..64");
  for (uint32_t i = 0; i < o->n_batch; i++)
    if (o->batch[i] < 1 || o->batch[i] > (1u << 20)) die("--batch is 1..2^20");
  o->min_s = o->quick ? 0.02 : 0.1;
  o->reps = o->quick ? 3 : 7;
}

int main(int argc, char **argv) {
  opts_t o;
  parse(&o, argc, argv);
  bench_machine_t m;
  bench_machine(&m);
  const char *blas = openblas_get_config(), *core = openblas_get_corename();
  operands_t probe;
  net_t pn = {1, {4, 4}};
  operands_init(&probe, &pn, 1, 1);
  char isa[16];
  snprintf(isa, sizeof isa, "%s", rd_mlp_isa(&probe.mlp));
  operands_free(&probe);
  FILE *info = o.json ? stderr : stdout;
  fprintf(info, "# bench_gemm: %s, %s (load %s); ours: GEMM %s; baseline: %s, core %s\n", m.date,
          m.cpu, m.load, isa, blas, core);
  if (!o.json)
    printf("%-14s %6s %7s %12s %10s %14s %10s %8s\n", "shape", "batch", "threads", "ours us",
           "GFLOP/s", "openblas us", "GFLOP/s", "speed");
  for (size_t s = 0; s < N_SHAPES; s++) {
    net_t nets[2];
    uint32_t n_nets = shape_nets(&shapes[s], nets);
    for (uint32_t b = 0; b < o.n_batch; b++) {
      for (uint32_t t = 0; t < o.n_threads; t++) {
        uint32_t n = o.batch[b], th = o.threads[t];
        operands_t ops[2];
        for (uint32_t k = 0; k < n_nets; k++) operands_init(&ops[k], &nets[k], n, th);
        openblas_set_num_threads((int)th);
        /* Interleaved, twice each way: both sides see the same machine. */
        double ours = time_steps(ops, n_nets, n, false, &o);
        double theirs = time_steps(ops, n_nets, n, true, &o);
        double ours2 = time_steps(ops, n_nets, n, false, &o);
        double theirs2 = time_steps(ops, n_nets, n, true, &o);
        ours = ours < ours2 ? ours : ours2;
        theirs = theirs < theirs2 ? theirs : theirs2;
        double f = flops(ops, n_nets, n);
        if (o.json) {
          printf("{\"name\": \"gemm.step_us\", \"params\": {\"shape\": \"%s\", \"batch\": %u, "
                 "\"threads\": %u, \"isa\": \"%s\"}, \"value\": %.3f, \"unit\": \"us\"}\n",
                 shapes[s].name, n, th, isa, ours * 1e6);
          printf("{\"name\": \"baseline.openblas.gemm.step_us\", \"params\": {\"shape\": \"%s\", "
                 "\"batch\": %u, \"threads\": %u, \"blas\": \"%s\", \"blas_core\": \"%s\"}, "
                 "\"value\": %.3f, \"unit\": \"us\"}\n",
                 shapes[s].name, n, th, blas, core, theirs * 1e6);
        } else {
          printf("%-14s %6u %7u %12.2f %10.2f %14.2f %10.2f %7.2fx\n", shapes[s].name, n, th,
                 ours * 1e6, f / ours * 1e-9, theirs * 1e6, f / theirs * 1e-9, theirs / ours);
        }
        fflush(stdout);
        for (uint32_t k = 0; k < n_nets; k++) operands_free(&ops[k]);
      }
    }
  }
  load_average(m.load, sizeof m.load);
  fprintf(info, "# speed = OpenBLAS time / our time (above 1: ours is faster); load at the end "
                "%s\n", m.load);
  return 0;
}
