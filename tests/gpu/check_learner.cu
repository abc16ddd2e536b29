/* check_learner.cu - the GPU learner and storage against the CPU, on a
 * GPU machine (run by bench/gpu.sh; exit 77 when there is no usable GPU).
 *
 * 1. Per-element functions (rd_gpu_elem.h): a kernel applies each to the
 *    same random inputs as the host build does; results must be bit
 *    identical (Adam over 3 steps, Huber, MSE, Polyak, clip scale, bias +
 *    relu / identity, tanh (common/rd_tanh.h, the CPU's, never CUDA's tanhf),
 *    activation gradients, targets, action mapping, |TD|): the kernel and
 *    the host run one function (elem_case) on the same inputs.
 * 2. Learner, three shapes (bench/learner_shapes.h: cartpole_ddpg,
 *    cartpole_dqn, hopper_ddpg), batch 256, --steps steps (default 20; two
 *    of them with 100 rows, to cross the graph / stream paths), the same
 *    batches for rd_learner_step (CPU, 1 thread) and rd_gpu_learner_step;
 *    then the same for what the defaults leave out: plain DQN targets, hard
 *    target copies (every 4 steps: after a copy step each target must equal
 *    its network, bit for bit, on both), grad_clip 0, tanh hidden layers,
 *    batches of 1024 (the CPU learner's sharded step) and all of them at
 *    once at batch 1000. And a graph capture made to fail
 *    (rd_gpu_learner_fail_next_capture): every step still runs, on the
 *    stream, with the weights of a learner without graphs, bit for bit.
 *    Tolerances (cuBLAS sums products in another order than nn.c, and Adam
 *    turns small gradient differences into sign-sized steps for gradients
 *    near zero, so after many steps agreement is statistical, not per
 *    weight):
 *      - step 1 (same weights on both, only summation order differs):
 *        |TD| max abs diff <= 1e-4 * max(1, max |TD_cpu|), loss rel diff
 *        <= 1e-4, grad norm rel diff <= 1e-4;
 *      - after the last step, every network (online and target):
 *        ||w_gpu - w_cpu|| / ||w_cpu - w_init|| <= 2e-2 (the learned
 *        change agrees to 2%), and max |w_gpu - w_cpu| <= 2 lr steps (no
 *        weight off by more than Adam can move it);
 *      - last step's priorities: ||td_gpu - td_cpu|| / ||td_cpu|| <= 2e-2.
 *    Also: graphs on and off give the same weights (printed whether bit
 *    identical; must be within the tolerance above), graphs were used, the
 *    exported policy equals network 0, bad batches give the CPU's code and
 *    message, an overflowing batch gives the CPU's code and, if RD_ERANGE,
 *    leaves every GPU weight unchanged.
 * 3. Storage: scatter then gather of random rows for row widths 4, 7, 12,
 *    64, 88 and 256 bytes against a host copy, bit for bit; bad positions
 *    and repeats refused; device-pointer calls with a bad position report
 *    RD_ERANGE at sync.
 * Prints "ok ..." / "FAIL ..." lines; exit 0 only if every check passed.
 */
#include "learner_gpu.h"
#include "storage_gpu.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/learner_shapes.h"
#include "rd_gpu_elem.h"
#include "rd_rng.h"
#include "rdt_rand.h"
#include "rdt_check.h"

#include "check_device.h"

static float unit01(uint64_t *s) { return (float)rd_rng_unit(s); }

static uint32_t fb(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static uint64_t db(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}

/* ---- 1. per-element functions ---- */

#define EN 65536
struct elem_in {
  float a[EN], b[EN], c[EN], g[3][EN];
  rd_ge_adam_coef_t k[3];
};
struct elem_out {
  float p[EN], m[EN], v[EN];
  float huber_dy[EN], mse_dy[EN];
  double huber[EN], mse[EN];
  float polyak[EN], relu[EN], ident[EN], tanh_[EN], grad[3][EN];
  float target[EN], amap[EN], td[EN], clip[EN];
};

/* Element i of every case, the same code on the device and the host. The
 * tanh activation is rd_tanh (through rd_ge_bias_act), and its gradient and
 * the action mapping take that tanh, as the learner's kernels do: so every
 * result must be the same bits on both. */
__host__ __device__ static void elem_case(const elem_in *in, elem_out *o, int i) {
  float p = in->a[i], m = 0.0f, v = 0.0f;
  for (int t = 0; t < 3; t++) rd_ge_adam(&p, &m, &v, in->g[t][i], &in->k[t]);
  o->p[i] = p, o->m[i] = m, o->v[i] = v;
  o->huber[i] = rd_ge_huber(in->a[i], in->b[i], fabsf(in->c[i]), 1.0 / 4099.0, 0.75,
                            &o->huber_dy[i]);
  o->mse[i] = rd_ge_mse(in->a[i], in->b[i], fabsf(in->c[i]), 1.0 / 4099.0, &o->mse_dy[i]);
  o->polyak[i] = rd_ge_polyak(in->a[i], in->b[i], 0.005f, (float)(1.0 - 0.005));
  o->relu[i] = rd_ge_bias_act(in->a[i], in->b[i], 1);
  o->ident[i] = rd_ge_bias_act(in->a[i], in->b[i], 0);
  const float th = rd_ge_bias_act(in->a[i], 0.0f, 2);
  o->tanh_[i] = th;
  for (int act = 0; act < 3; act++)
    o->grad[act][i] = rd_ge_act_grad(act == 2 ? th : in->a[i], in->c[i], act);
  o->target[i] = rd_ge_target(in->a[i], fabsf(in->c[i]) > 1.0f ? 0.99f : fabsf(in->c[i]),
                              in->b[i]);
  o->amap[i] = rd_ge_action_from_tanh(th, -2.0f, 4.0f);
  o->td[i] = rd_ge_td_abs(in->a[i], in->b[i]);
  o->clip[i] = rd_ge_clip_scale(10.0, 10.0 + fabs((double)in->c[i]) * 1e3);
}

__global__ void k_elem(const elem_in *in, elem_out *o) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < EN; i += gridDim.x * blockDim.x)
    elem_case(in, o, i);
}

static void host_elem(const elem_in *in, elem_out *o) {
  for (int i = 0; i < EN; i++) elem_case(in, o, i);
}

static long ulp_dist(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return labs((long)ia - (long)ib);
}

static size_t diff_f(const float *a, const float *b, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += fb(a[i]) != fb(b[i]);
  return k;
}
static size_t diff_d(const double *a, const double *b, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += db(a[i]) != db(b[i]);
  return k;
}

static void check_elem(void) {
  elem_in *in = (elem_in *)calloc(1, sizeof *in);
  elem_out *h = (elem_out *)calloc(1, sizeof *h), *d = (elem_out *)calloc(1, sizeof *d);
  uint64_t s = 99;
  for (int i = 0; i < EN; i++) {
    in->a[i] = rdt_wide_float(&s) * (i % 3 ? 1.0f : 1e4f);
    in->b[i] = i % 5 ? rdt_wide_float(&s) * 1e4f : in->a[i] + unit01(&s) - 0.5f;
    in->c[i] = rdt_wide_float(&s) * 4.0f;
    for (int t = 0; t < 3; t++) in->g[t][i] = rdt_wide_float(&s);
  }
  for (int t = 0; t < 3; t++)
    in->k[t] = rd_ge_adam_coef(t == 2 ? 0.5 : 1e-3, 0.9, 0.999, 1e-8, (uint64_t)t + 1);
  elem_in *din;
  elem_out *dout;
  if (cudaMalloc(&din, sizeof *din) != cudaSuccess || cudaMalloc(&dout, sizeof *dout) != cudaSuccess) {
    rdt_check(false, "elem: cudaMalloc");
    return;
  }
  cudaMemcpy(din, in, sizeof *in, cudaMemcpyHostToDevice);
  k_elem<<<64, 256>>>(din, dout);
  cudaError_t e = cudaMemcpy(d, dout, sizeof *d, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    rdt_check(false, "elem kernel: %s", cudaGetErrorString(e));
    return;
  }
  host_elem(in, h);
  rdt_check(diff_f(h->p, d->p, EN) + diff_f(h->m, d->m, EN) + diff_f(h->v, d->v, EN) == 0,
         "elem adam (3 steps): %zu / %d parameters differ", diff_f(h->p, d->p, EN), EN);
  rdt_check(diff_f(h->huber_dy, d->huber_dy, EN) + diff_d(h->huber, d->huber, EN) == 0,
         "elem huber: %zu grads, %zu terms differ", diff_f(h->huber_dy, d->huber_dy, EN),
         diff_d(h->huber, d->huber, EN));
  rdt_check(diff_f(h->mse_dy, d->mse_dy, EN) + diff_d(h->mse, d->mse, EN) == 0,
         "elem mse: %zu grads, %zu terms differ", diff_f(h->mse_dy, d->mse_dy, EN),
         diff_d(h->mse, d->mse, EN));
  rdt_check(diff_f(h->polyak, d->polyak, EN) == 0, "elem polyak: %zu differ",
         diff_f(h->polyak, d->polyak, EN));
  rdt_check(diff_f(h->relu, d->relu, EN) + diff_f(h->ident, d->ident, EN) == 0,
         "elem bias+relu / identity: %zu / %zu differ", diff_f(h->relu, d->relu, EN),
         diff_f(h->ident, d->ident, EN));
  size_t gd = diff_f(h->grad[0], d->grad[0], EN) + diff_f(h->grad[1], d->grad[1], EN) +
              diff_f(h->grad[2], d->grad[2], EN);
  rdt_check(gd == 0, "elem activation gradients: %zu differ", gd);
  rdt_check(diff_f(h->target, d->target, EN) + diff_f(h->amap, d->amap, EN) +
                 diff_f(h->td, d->td, EN) + diff_f(h->clip, d->clip, EN) ==
             0,
         "elem target / action map / |td| / clip scale: %zu %zu %zu %zu differ",
         diff_f(h->target, d->target, EN), diff_f(h->amap, d->amap, EN),
         diff_f(h->td, d->td, EN), diff_f(h->clip, d->clip, EN));
  long mx = 0;
  for (int i = 0; i < EN; i++) {
    long u = ulp_dist(h->tanh_[i], d->tanh_[i]);
    if (u > mx) mx = u;
  }
  rdt_check(diff_f(h->tanh_, d->tanh_, EN) == 0,
         "elem tanh (rd_tanh, the CPU's): device vs host: %zu / %d differ, max %ld ulp",
         diff_f(h->tanh_, d->tanh_, EN), EN, mx);
  cudaFree(din), cudaFree(dout);
  free(in), free(h), free(d);
}

/* ---- 2. learner ---- */

typedef struct {
  size_t n;
  float *obs, *next_obs, *act_f, *reward, *discount, *w;
  int32_t *act_i;
} hbatch_t;

static void make_batch(const shape_t *sh, size_t n, uint64_t stream, hbatch_t *b) {
  b->n = n;
  uint32_t O = sh->obs, D = sh->algo == RD_ALGO_DQN ? 1 : sh->actions;
  b->obs = (float *)malloc(n * O * 4);
  b->next_obs = (float *)malloc(n * O * 4);
  b->act_f = (float *)malloc(n * D * 4);
  b->act_i = (int32_t *)malloc(n * 4);
  b->reward = (float *)malloc(n * 4);
  b->discount = (float *)malloc(n * 4);
  b->w = (float *)malloc(n * 4);
  uint64_t d = 0;
  for (size_t i = 0; i < n * O; i++) b->obs[i] = unif(stream, d++, -1.0f, 1.0f);
  for (size_t i = 0; i < n * O; i++) b->next_obs[i] = unif(stream, d++, -1.0f, 1.0f);
  for (size_t i = 0; i < n * D; i++) b->act_f[i] = unif(stream, d++, -1.0f, 1.0f);
  for (size_t i = 0; i < n; i++) {
    b->act_i[i] = (int32_t)(rd_philox_u64(stream, d++) % (sh->algo == RD_ALGO_DQN ? sh->actions : 1));
    b->reward[i] = unif(stream, d++, -1.0f, 1.0f);
    b->discount[i] = unif(stream, d++, 0.0f, 1.0f) < 0.1f ? 0.0f : 0.99f;
    b->w[i] = unif(stream, d++, 0.1f, 1.0f);
  }
}
static void free_batch(hbatch_t *b) {
  free(b->obs), free(b->next_obs), free(b->act_f), free(b->act_i), free(b->reward);
  free(b->discount), free(b->w);
}
static rd_batch_t view(const hbatch_t *h) {
  rd_batch_t b;
  b.n = h->n, b.obs = h->obs, b.action_i = h->act_i, b.action_f = h->act_f;
  b.reward = h->reward, b.discount = h->discount, b.next_obs = h->next_obs, b.weights = h->w;
  return b;
}

static double rel_l2(const float *a, const float *b, const float *base, size_t n, double *maxabs) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    double c = base ? (double)b[i] - base[i] : (double)b[i];
    den += c * c;
    if (fabs(d) > mx) mx = fabs(d);
  }
  if (maxabs) *maxabs = mx;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* A learner config beside the shapes' defaults (double DQN, Polyak
 * targets, clip 10, relu, batch 256). */
typedef struct {
  const char *name;   /* "" for the defaults */
  int plain_dqn;      /* DQN targets from the target network's max */
  uint32_t period;    /* > 0: hard target copies every `period` steps */
  int no_clip;        /* grad_clip 0 */
  int tanh_hidden;    /* tanh hidden layers */
  uint32_t batch;     /* > 256: the CPU learner's sharded step */
} variant_t;

static void check_learner(const shape_t *shape, int steps, const variant_t *v) {
  const uint32_t B = v->batch;
  rd_learner_config_t c;
  make_config(shape, B, 1, &c);
  if (v->plain_dqn) c.double_dqn = 0;
  c.target_period = v->period;
  if (v->no_clip) c.grad_clip = 0;
  if (v->tanh_hidden) c.hidden_act = RD_NN_TANH;
  char label[96];
  snprintf(label, sizeof label, "%s%s%s", shape->name, v->name[0] ? "/" : "", v->name);
  struct {
    const char *name;
  } named = {label}, *sh = &named;
  rd_error_t err;
  rd_learner_t cpu;
  rd_gpu_learner_t gpu, gpu2;
  if (rd_learner_init(&cpu, &c, &err)) {
    rdt_check(false, "%s: CPU init: %s", sh->name, err.msg);
    return;
  }
  if (rd_gpu_learner_init(&gpu, &c, 0, &err)) {
    rdt_check(false, "%s: GPU init: %s", sh->name, err.msg);
    rd_learner_free(&cpu);
    return;
  }
  if (rd_gpu_learner_init(&gpu2, &c, 0, &err)) {
    rdt_check(false, "%s: GPU init: %s", sh->name, err.msg);
    return;
  }
  rd_gpu_learner_set_graphs(&gpu2, 0);
  const int nets = cpu.n_nets;
  float *w0[4], *wg[4], *wg2[4];
  for (int k = 0; k < nets; k++) {
    size_t P = cpu.net[k].n_params;
    w0[k] = (float *)malloc(P * 4), wg[k] = (float *)malloc(P * 4), wg2[k] = (float *)malloc(P * 4);
    memcpy(w0[k], cpu.net[k].params, P * 4);
    rd_gpu_learner_get_params(&gpu, k, wg[k], P, NULL, &err);
    rdt_check(memcmp(wg[k], w0[k], P * 4) == 0, "%s: net %d initial weights equal the CPU's (%zu)",
           sh->name, k, P);
  }
  float *td_c = (float *)malloc(B * 4), *td_g = (float *)malloc(B * 4),
        *td_g2 = (float *)malloc(B * 4);
  bool all_ok = true;
  for (int t = 1; t <= steps; t++) {
    size_t n = (t == 5 || t == 6) ? 100 : B;
    hbatch_t hb;
    make_batch(shape, n, 1000 + (uint64_t)t, &hb);
    rd_batch_t b = view(&hb);
    rd_step_stats_t sc, sg, sg2;
    int rc = rd_learner_step(&cpu, &b, td_c, &sc, &err);
    int rg = rd_gpu_learner_step(&gpu, &b, td_g, &sg, &err);
    int rg2 = rd_gpu_learner_step(&gpu2, &b, td_g2, &sg2, &err);
    if (rc || rg || rg2) {
      rdt_check(false, "%s step %d: rc cpu %d gpu %d gpu(no graph) %d: %s", sh->name, t, rc, rg, rg2,
             err.msg);
      all_ok = false;
      free_batch(&hb);
      break;
    }
    double tmax = 1.0, dmax = 0.0;
    for (size_t i = 0; i < n; i++) {
      tmax = fmax(tmax, td_c[i]);
      dmax = fmax(dmax, fabs((double)td_c[i] - td_g[i]));
    }
    double lrel = fabs(sc.loss - sg.loss) / fmax(1e-30, fabs(sc.loss));
    double nrel = fabs(sc.grad_norm - sg.grad_norm) / fmax(1e-30, fabs(sc.grad_norm));
    if (t == 1) {
      rdt_check(dmax <= 1e-4 * tmax && lrel <= 1e-4 && nrel <= 1e-4,
             "%s step 1: |TD| max diff %.3g (max |TD| %.3g), loss rel %.3g, grad norm rel %.3g",
             sh->name, dmax, tmax, lrel, nrel);
    }
    if (t == steps) {
      double tdrel = rel_l2(td_g, td_c, NULL, n, NULL);
      rdt_check(tdrel <= 2e-2, "%s step %d: priorities rel L2 diff %.3g, loss %.6g vs %.6g",
             sh->name, t, tdrel, sg.loss, sc.loss);
    }
    free_batch(&hb);
  }
  if (all_ok) {
    bool same_paths = true;
    for (int k = 0; k < nets; k++) {
      size_t P = cpu.net[k].n_params;
      rd_gpu_learner_get_params(&gpu, k, wg[k], P, NULL, &err);
      rd_gpu_learner_get_params(&gpu2, k, wg2[k], P, NULL, &err);
      double mx, mx2;
      double rel = rel_l2(wg[k], cpu.net[k].params, w0[k], P, &mx);
      double rel2 = rel_l2(wg2[k], wg[k], NULL, P, &mx2);
      const double lr = k >= 2 ? c.critic_lr : c.lr;
      rdt_check(rel <= 2e-2 && mx <= 2.0 * lr * steps,
             "%s after %d steps: net %d weights rel L2 diff %.3g of the change, max |diff| %.3g "
             "(bound %.3g)",
             sh->name, steps, k, rel, mx, 2.0 * lr * steps);
      if (memcmp(wg[k], wg2[k], P * 4) != 0) same_paths = false;
      rdt_check(rel_l2(wg2[k], cpu.net[k].params, w0[k], P, NULL) <= 2e-2,
             "%s: net %d graph vs stream path: %s (max |diff| %.3g)", sh->name, k,
             memcmp(wg[k], wg2[k], P * 4) == 0 ? "bit-identical" : "differ", mx2);
    }
    /* Hard copies: after a copy step every target equals its network. */
    if (c.target_period > 0 && steps % c.target_period == 0)
      for (int k = 0; k + 1 < nets; k += 2) {
        size_t P = cpu.net[k].n_params;
        rdt_check(memcmp(wg[k], wg[k + 1], P * 4) == 0 &&
                   memcmp(cpu.net[k].params, cpu.net[k + 1].params, P * 4) == 0,
               "%s: after step %d (a copy step) target %d equals network %d, GPU and CPU",
               sh->name, steps, k + 1, k);
      }
    rdt_check(gpu.graph_launches > 0 && gpu2.graph_launches == 0,
           "%s: graphs: %llu captures, %llu replays of %d steps (%s on the stream path)",
           sh->name, (unsigned long long)gpu.graph_captures,
           (unsigned long long)gpu.graph_launches, steps, same_paths ? "identical" : "not identical");
    /* The exported policy is network 0. */
    size_t pb = rd_gpu_learner_policy_bytes(&gpu), wr = 0;
    void *buf = malloc(pb);
    int rc = rd_gpu_learner_policy_weights(&gpu, buf, pb, &wr, &err);
    rd_nn_spec_t ps;
    float *pp = (float *)malloc(cpu.net[0].n_params * 4);
    int rc2 = rc ? rc : rd_nn_flat_parse(buf, wr, &ps, pp, cpu.net[0].n_params, &err);
    rdt_check(rc == 0 && rc2 == 0 && wr == rd_learner_policy_bytes(&cpu) &&
               memcmp(pp, wg[0], cpu.net[0].n_params * 4) == 0,
           "%s: policy weights export (%zu bytes)", sh->name, wr);
    free(buf), free(pp);
  }

  /* Bad batches: the CPU's code and message. */
  {
    hbatch_t hb;
    make_batch(shape, 8, 77, &hb);
    hb.obs[5] = NAN;
    rd_batch_t b = view(&hb);
    rd_error_t ec, eg;
    int rc = rd_learner_step(&cpu, &b, NULL, NULL, &ec);
    int rg = rd_gpu_learner_step(&gpu, &b, NULL, NULL, &eg);
    rdt_check(rc == RD_EINVAL && rg == rc && strcmp(ec.msg, eg.msg) == 0,
           "%s: NaN input: %s / %s", sh->name, ec.msg, eg.msg);
    b.n = B + 1;
    rg = rd_gpu_learner_step(&gpu, &b, NULL, NULL, &eg);
    rdt_check(rg == RD_ETOOBIG, "%s: n > max_batch: %s", sh->name, eg.msg);
    free_batch(&hb);
  }
  /* An overflowing batch: the CPU's code; RD_ERANGE leaves weights alone. */
  {
    hbatch_t hb;
    make_batch(shape, B, 78, &hb);
    for (size_t i = 0; i < B; i++) hb.reward[i] = 3e38f, hb.discount[i] = 1.0f;
    rd_batch_t b = view(&hb);
    rd_error_t ec, eg;
    uint64_t steps0 = gpu.steps;
    int rc = rd_learner_step(&cpu, &b, NULL, NULL, &ec);
    int rg = rd_gpu_learner_step(&gpu, &b, NULL, NULL, &eg);
    bool unchanged = true;
    if (rg == RD_ERANGE)
      for (int k = 0; k < nets; k++) {
        size_t P = cpu.net[k].n_params;
        float *now = (float *)malloc(P * 4);
        rd_gpu_learner_get_params(&gpu, k, now, P, NULL, &err);
        if (memcmp(now, wg[k], P * 4) != 0) unchanged = false;
        free(now);
      }
    rdt_check(rc == rg && (rg != RD_ERANGE || (unchanged && gpu.steps == steps0)),
           "%s: overflowing batch: CPU %s (%s), GPU %s (%s)%s", sh->name, rd_err_name(rc),
           rc ? ec.msg : "", rd_err_name(rg), rg ? eg.msg : "",
           rg == RD_ERANGE ? (unchanged ? ", GPU weights unchanged" : ", GPU WEIGHTS MOVED") : "");
    free_batch(&hb);
  }
  for (int k = 0; k < nets; k++) free(w0[k]), free(wg[k]), free(wg2[k]);
  free(td_c), free(td_g), free(td_g2);
  rd_gpu_learner_destroy(&gpu);
  rd_gpu_learner_destroy(&gpu2);
  rd_learner_free(&cpu);
}

/* A graph that cannot be captured is not a fault: the step runs on the
 * stream, graphs stay off, and the weights are those of a learner that
 * never used graphs, bit for bit. */
static void check_capture_failure(const shape_t *shape) {
  rd_learner_config_t c;
  make_config(shape, 64, 1, &c);
  rd_gpu_learner_t a, b;
  rd_error_t err;
  if (rd_gpu_learner_init(&a, &c, 0, &err) || rd_gpu_learner_init(&b, &c, 0, &err)) {
    rdt_check(false, "%s: capture failure: GPU init: %s", shape->name, err.msg);
    return;
  }
  rd_gpu_learner_set_graphs(&b, 0);
  rd_gpu_learner_fail_next_capture(&a);
  bool ok = true;
  for (int t = 1; t <= 5 && ok; t++) {
    hbatch_t hb;
    make_batch(shape, 64, 500 + (uint64_t)t, &hb);
    rd_batch_t bt = view(&hb);
    int ra = rd_gpu_learner_step(&a, &bt, NULL, NULL, &err);
    int rb = ra ? ra : rd_gpu_learner_step(&b, &bt, NULL, NULL, &err);
    if (ra || rb) {
      rdt_check(false, "%s: capture failure: step %d: %s", shape->name, t, err.msg);
      ok = false;
    }
    free_batch(&hb);
  }
  if (ok) {
    size_t P = rd_nn_spec_params(&a.spec[0]);
    float *wa = (float *)malloc(P * 4), *wb = (float *)malloc(P * 4);
    rd_gpu_learner_get_params(&a, 0, wa, P, NULL, &err);
    rd_gpu_learner_get_params(&b, 0, wb, P, NULL, &err);
    rdt_check(a.graph_failures == 1 && a.graph_captures == 0 && a.graph_launches == 0 &&
               a.steps == 5 && memcmp(wa, wb, P * 4) == 0,
           "%s: a failed graph capture: 5 steps ran (%llu failure: %s), no graph, weights as "
           "without graphs: %s", shape->name, (unsigned long long)a.graph_failures,
           a.graph_error, memcmp(wa, wb, P * 4) == 0 ? "identical" : "DIFFERENT");
    free(wa), free(wb);
  }
  rd_gpu_learner_destroy(&a);
  rd_gpu_learner_destroy(&b);
}

/* ---- 3. storage ---- */

static void check_storage(void) {
  const uint32_t widths[] = {4, 7, 12, 64, 88, 256};
  const uint32_t R = 100000, MB = 8192;
  rd_error_t err;
  for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
    const uint32_t W = widths[wi];
    rd_gpu_storage_t s;
    if (rd_gpu_storage_init(&s, R, W, MB, 0, &err)) {
      rdt_check(false, "storage init %u: %s", W, err.msg);
      continue;
    }
    unsigned char *host = (unsigned char *)calloc((size_t)R, W);
    unsigned char *buf = (unsigned char *)malloc((size_t)MB * W);
    unsigned char *got = (unsigned char *)malloc((size_t)MB * W);
    uint32_t *pos = (uint32_t *)malloc(MB * 4);
    uint64_t r = W;
    bool ok = true;
    /* Scatter every row once (a shuffled ring), then some rows again. */
    uint32_t *perm = (uint32_t *)malloc(R * 4);
    for (uint32_t i = 0; i < R; i++) perm[i] = i;
    for (uint32_t i = R - 1; i > 0; i--) {
      uint32_t j = (uint32_t)(rd_splitmix64(&r) % (i + 1)), t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    for (uint32_t off = 0; off < R + 3 * MB && ok; off += MB) {
      uint32_t n = MB;
      for (uint32_t i = 0; i < n; i++) pos[i] = perm[(off + i) % R];
      if (off + MB > R && off < R) n = R - off; /* no repeats within one call */
      for (size_t k = 0; k < (size_t)n * W; k++) buf[k] = (unsigned char)rd_splitmix64(&r);
      for (uint32_t i = 0; i < n; i++) memcpy(host + (size_t)pos[i] * W, buf + (size_t)i * W, W);
      if (rd_gpu_storage_scatter(&s, n, pos, buf, &err)) {
        rdt_check(false, "storage %u scatter: %s", W, err.msg);
        ok = false;
      }
    }
    size_t bad = 0;
    for (int round = 0; round < 8 && ok; round++) {
      uint32_t n = round == 0 ? 1 : round == 1 ? 33 : MB;
      for (uint32_t i = 0; i < n; i++) pos[i] = (uint32_t)(rd_splitmix64(&r) % R);
      if (rd_gpu_storage_gather(&s, n, pos, got, &err)) {
        rdt_check(false, "storage %u gather: %s", W, err.msg);
        ok = false;
        break;
      }
      for (uint32_t i = 0; i < n; i++)
        bad += memcmp(got + (size_t)i * W, host + (size_t)pos[i] * W, W) != 0;
    }
    if (ok) rdt_check(bad == 0, "storage rows of %u bytes: gather vs host, %zu rows differ", W, bad);
    /* Errors. */
    pos[0] = 1, pos[1] = R;
    int rc = rd_gpu_storage_gather(&s, 2, pos, got, &err);
    rdt_check(rc == RD_ERANGE, "storage %u: host gather of position %u: %s", W, R, err.msg);
    pos[1] = 1;
    rc = rd_gpu_storage_scatter(&s, 2, pos, buf, &err);
    rdt_check(rc == RD_EINVAL, "storage %u: repeated position: %s", W, err.msg);
    uint32_t *dpos;
    void *dout;
    cudaMalloc(&dpos, 8), cudaMalloc(&dout, 2 * W);
    pos[0] = 3, pos[1] = R + 5;
    cudaMemcpy(dpos, pos, 8, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize(); /* the storage's stream does not wait for the legacy one */
    rc = rd_gpu_storage_gather_dev(&s, 2, dpos, dout, &err);
    if (rc == 0) rc = rd_gpu_storage_sync(&s, &err);
    rdt_check(rc == RD_ERANGE, "storage %u: device gather of a bad position: %s", W, err.msg);
    rc = rd_gpu_storage_sync(&s, &err);
    rdt_check(rc == RD_OK, "storage %u: flag cleared after the report", W);
    cudaFree(dpos), cudaFree(dout);
    free(host), free(buf), free(got), free(pos), free(perm);
    rd_gpu_storage_free(&s);
  }
}

int main(int argc, char **argv) {
  int steps = 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: check_gpu_learner [--steps N]\n");
      return 2;
    }
  }
  if (steps < 7) steps = 7;
  int skip = check_device_or_skip();
  if (skip) return skip;
  check_elem();
  const variant_t defaults = {"", 0, 0, 0, 0, 256};
  for (size_t k = 0; k < N_SHAPES; k++) check_learner(&shapes[k], steps, &defaults);
  /* What the defaults leave out: shapes[0] cartpole_ddpg, [1] cartpole_dqn,
   * [2] hopper_ddpg. */
  const variant_t plain = {"plain_dqn", 1, 0, 0, 0, 256};
  const variant_t copies = {"hard_copy_every_4", 0, 4, 0, 0, 256};
  const variant_t no_clip = {"grad_clip_0", 0, 0, 1, 0, 256};
  const variant_t tanh_h = {"tanh_hidden", 0, 0, 0, 1, 256};
  const variant_t big = {"batch_1024", 0, 0, 0, 0, 1024};
  const variant_t mixed = {"plain_tanh_copy5_noclip_batch_1000", 1, 5, 1, 1, 1000};
  check_learner(&shapes[1], steps, &plain);
  check_learner(&shapes[1], steps, &copies);
  check_learner(&shapes[0], steps, &copies);
  check_learner(&shapes[0], steps, &no_clip);
  check_learner(&shapes[1], steps, &no_clip);
  check_learner(&shapes[0], steps, &tanh_h);
  check_learner(&shapes[1], steps, &tanh_h);
  check_learner(&shapes[1], steps, &big);
  check_learner(&shapes[2], steps, &big);
  check_learner(&shapes[1], steps, &mixed);
  check_capture_failure(&shapes[0]);
  check_capture_failure(&shapes[1]);
  check_storage();
  printf("%s\n", rdt_check_failed() ? "FAILED" : "PASSED");
  return rdt_check_failed() ? 1 : 0;
}
