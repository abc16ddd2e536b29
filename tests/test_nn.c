/* test_nn.c - the CPU MLP: init contract, forward against a double
 * reference, finite-difference gradient checks of every activation, both
 * losses and the input gradient, Adam by hand, clipping, target updates,
 * determinism, a regression task, save/load and argument errors.
 *
 * Gradient checks. The network computes in float; the check perturbs one
 * parameter (or input) by +-h, evaluates the library's loss (accumulated in
 * double) and divides by the difference of the two perturbed floats as
 * actually stored, so only float rounding of the forward pass and the
 * O(h^2) truncation remain. With h = 5e-3 both are about 1e-5 relative for
 * these sizes, so an analytic gradient passes when
 *     |analytic - numeric| <= GC_RTOL * max(|analytic|, |numeric|) + GC_ATOL
 * with GC_RTOL = 2e-3 and GC_ATOL = 2e-5 (gradients here are 1e-3..1; the
 * worst coordinate measured uses about an eighth of that). A missing
 * factor, a transpose or a wrong derivative is off by O(1), and
 * test_gradcheck_catches_errors shows the harness flags a 1% error in one
 * entry. ReLU: a perturbation that flips any unit's sign (a kink inside
 * [-h, h]) makes the loss non-differentiable there, so that coordinate is
 * skipped; at most 5% may be.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "rd_philox.h"
#include "rdt_learner.h"
#include "rdt_main.h"

#define GC_H 5e-3f
#define GC_RTOL 2e-3
#define GC_ATOL 2e-5

/* Uniform in [lo, hi) from draw d of a test stream. */
static void make_net(rd_mlp_t *m, const rd_nn_spec_t *s, uint32_t max_batch, uint64_t seed,
                     uint32_t threads, int inference_only) {
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  c.spec = *s;
  c.max_batch = max_batch;
  c.seed = seed;
  c.threads = threads;
  c.inference_only = inference_only;
  rd_error_t err;
  int rc = rd_mlp_init(m, &c, &err);
  if (rc != RD_OK) fail_msg("rd_mlp_init: %s", err.msg);
}

/* Two networks of spec s, other weights (seeds 1 and 2): net, and copy
 * for its weights only (a target, or a copy loaded from a save), which
 * needs no gradients. */
static void make_net_and_copy(rd_mlp_t *net, rd_mlp_t *copy, const rd_nn_spec_t *s,
                              uint32_t max_batch) {
  make_net(net, s, max_batch, 1, 1, 0);
  make_net(copy, s, max_batch, 2, 1, 1);
}

/* ---- init ---- */

static void test_init_contract(void **state) {
  (void)state;
  const uint32_t sz[] = {3, 5, 4, 2};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_TANH, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(3, sz, act);
  rd_mlp_t a, b, c;
  make_net(&a, &s, 8, 1234, 1, 0);
  make_net(&b, &s, 8, 1234, 1, 1);
  make_net(&c, &s, 8, 1235, 1, 0);
  assert_int_equal(rd_mlp_n_params(&a), 5 * 4 + 4 * 6 + 2 * 5);
  /* A GEMM variant was picked. */
  const char *isa = rd_mlp_isa(&a);
  assert_true(strcmp(isa, "generic") == 0 || strcmp(isa, "avx2") == 0 ||
              strcmp(isa, "avx512") == 0);
  const float *p = rd_mlp_params(&a);
  size_t g = 0;
  for (uint32_t l = 0; l < 3; l++) {
    double in = sz[l], out = sz[l + 1];
    double limit = act[l] == RD_NN_RELU ? sqrt(6.0 / in) : sqrt(6.0 / (in + out));
    for (size_t k = 0; k < sz[l] * sz[l + 1]; k++, g++) {
      double u = (double)(rd_philox_u64(1234, RD_MLP_INIT_DRAW0 + g) >> 40) / 16777216.0;
      float want = (float)((2.0 * u - 1.0) * limit);
      assert_true(p[g] == want);
      assert_true(fabsf(p[g]) <= (float)limit);
    }
    for (size_t k = 0; k < sz[l + 1]; k++, g++) assert_true(p[g] == 0.0f);
  }
  assert_int_equal(g, rd_mlp_n_params(&a));
  /* The seed reproduces the weights; inference-only changes nothing in them. */
  assert_memory_equal(a.params, b.params, a.n_params * sizeof(float));
  assert_memory_not_equal(a.params, c.params, a.n_params * sizeof(float));
  assert_null(rd_mlp_grads(&b));
  rd_mlp_free(&a);
  rd_mlp_free(&b);
  rd_mlp_free(&c);
}

/* ---- forward against a double-precision reference ---- */

static void ref_forward(const rd_nn_spec_t *s, const float *p, size_t n, const float *x,
                        double *y) {
  double a[64], z[64];
  for (size_t i = 0; i < n; i++) {
    for (uint32_t k = 0; k < s->sizes[0]; k++) a[k] = x[i * s->sizes[0] + k];
    size_t off = 0;
    for (uint32_t l = 0; l < s->n_layers; l++) {
      uint32_t in = s->sizes[l], out = s->sizes[l + 1];
      for (uint32_t o = 0; o < out; o++) {
        double acc = p[off + (size_t)out * in + o];
        for (uint32_t k = 0; k < in; k++) acc += (double)p[off + (size_t)o * in + k] * a[k];
        z[o] = s->act[l] == RD_NN_RELU ? (acc > 0 ? acc : 0)
               : s->act[l] == RD_NN_TANH ? tanh(acc)
                                         : acc;
      }
      memcpy(a, z, out * sizeof(double));
      off += (size_t)out * (in + 1);
    }
    for (uint32_t o = 0; o < s->sizes[s->n_layers]; o++) y[i * s->sizes[s->n_layers] + o] = a[o];
  }
}

static void test_forward_matches_reference(void **state) {
  (void)state;
  const uint32_t sz[] = {6, 9, 7, 5, 3};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_TANH, RD_NN_IDENTITY, RD_NN_TANH};
  rd_nn_spec_t s = rdt_nn_spec(4, sz, act);
  rd_mlp_t m;
  make_net(&m, &s, 17, 7, 1, 0);
  rdt_fill(m.params, m.n_params, 99, -0.8f, 0.8f); /* nonzero biases too */
  float x[17 * 6], y[17 * 3];
  double ref[17 * 3];
  rdt_fill(x, 17 * 6, 5, -2.0f, 2.0f);
  for (size_t n = 1; n <= 17; n += 16) {
    assert_int_equal(rd_mlp_forward(&m, n, x, y, NULL), RD_OK);
    ref_forward(&s, m.params, n, x, ref);
    for (size_t i = 0; i < n * 3; i++) {
      assert_true(fabs(y[i] - ref[i]) <= 1e-5 * (1 + fabs(ref[i])));
      assert_true(y[i] == rd_mlp_output(&m)[i]);
    }
  }
  /* Hidden activations are exposed per layer: layer 0 is relu, >= 0. */
  for (size_t i = 0; i < 17 * 9; i++) assert_true(rd_mlp_activation(&m, 0)[i] >= 0.0f);
  rd_error_t err;
  assert_int_equal(rd_mlp_forward(&m, 0, x, y, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_forward(&m, 18, x, y, &err), RD_ETOOBIG);
  rd_mlp_free(&m);
}

/* ---- the GEMM at block edges, every instruction set, any thread count ---- */

/* Outputs y (n x out) and the gradients of L = sum_i dy_i . y_i by
 * backpropagation in double, one sample at a time (any widths, unlike
 * ref_forward): grad (n_params) accumulates, dx is n x in. */
static void ref_backward(const rd_nn_spec_t *s, const float *p, size_t n, const float *x,
                         const float *dy, double *y, double *grad, double *dx) {
  uint32_t L = s->n_layers, wmax = 0;
  for (uint32_t l = 0; l <= L; l++) wmax = s->sizes[l] > wmax ? s->sizes[l] : wmax;
  double *a = calloc((size_t)(L + 1) * wmax, sizeof *a), *da = calloc(wmax, sizeof *da),
         *dz = calloc(wmax, sizeof *dz);
  size_t np = rd_nn_spec_params(s);
  memset(grad, 0, np * sizeof *grad);
  for (size_t i = 0; i < n; i++) {
    for (uint32_t k = 0; k < s->sizes[0]; k++) a[k] = x[i * s->sizes[0] + k];
    for (uint32_t l = 0; l < L; l++) {
      uint32_t in = s->sizes[l], out = s->sizes[l + 1];
      size_t off = rd_nn_spec_offset(s, l);
      for (uint32_t o = 0; o < out; o++) {
        double acc = p[off + (size_t)out * in + o];
        for (uint32_t k = 0; k < in; k++)
          acc += (double)p[off + (size_t)o * in + k] * a[l * wmax + k];
        a[(l + 1) * wmax + o] = s->act[l] == RD_NN_RELU ? (acc > 0 ? acc : 0)
                                : s->act[l] == RD_NN_TANH ? tanh(acc) : acc;
      }
    }
    for (uint32_t o = 0; o < s->sizes[L]; o++) {
      y[i * s->sizes[L] + o] = a[L * wmax + o];
      da[o] = dy[i * s->sizes[L] + o];
    }
    for (uint32_t l = L; l-- > 0;) {
      uint32_t in = s->sizes[l], out = s->sizes[l + 1];
      size_t off = rd_nn_spec_offset(s, l);
      for (uint32_t o = 0; o < out; o++) {
        double y = a[(l + 1) * wmax + o];
        dz[o] = s->act[l] == RD_NN_RELU ? (y > 0 ? da[o] : 0)
                : s->act[l] == RD_NN_TANH ? da[o] * (1 - y * y) : da[o];
        for (uint32_t k = 0; k < in; k++) grad[off + (size_t)o * in + k] += dz[o] * a[l * wmax + k];
        grad[off + (size_t)out * in + o] += dz[o];
      }
      for (uint32_t k = 0; k < in; k++) {
        double acc = 0;
        for (uint32_t o = 0; o < out; o++) acc += (double)p[off + (size_t)o * in + k] * dz[o];
        da[k] = acc;
      }
    }
    for (uint32_t k = 0; k < s->sizes[0]; k++) dx[i * s->sizes[0] + k] = da[k];
  }
  free(a);
  free(da);
  free(dz);
}

/* |got - want| <= tol * (largest |want| of the array): float sums of a few
 * hundred terms against double. */
static void expect_close(const char *what, const char *isa, const float *got, const double *want,
                         size_t n, double tol) {
  double scale = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  assert_true(scale > 0);
  for (size_t i = 0; i < n; i++)
    if (fabs(got[i] - want[i]) > tol * scale)
      fail_msg("%s (%s)[%zu]: %.8g, reference %.8g (scale %.3g)", what, isa, i, got[i], want[i],
               scale);
}

typedef struct {
  float *y, *grads, *dx;
} gemm_run_t;

static gemm_run_t gemm_run(const rd_nn_spec_t *s, size_t n, uint32_t threads, const float *x,
                           const float *dy, const float *params, const char *isa) {
  rd_mlp_t m;
  make_net(&m, s, (uint32_t)n, 5, threads, 0);
  if (isa != NULL) assert_string_equal(rd_mlp_isa(&m), isa);
  memcpy(m.params, params, m.n_params * sizeof(float));
  size_t out = s->sizes[s->n_layers], in = s->sizes[0];
  gemm_run_t r = {malloc(n * out * sizeof(float)), malloc(m.n_params * sizeof(float)),
                  malloc(n * in * sizeof(float))};
  assert_int_equal(rd_mlp_forward(&m, n, x, r.y, NULL), RD_OK);
  /* backward_input: the same dx as backward, gradients untouched. */
  for (size_t k = 0; k < m.n_params; k++) m.grads[k] = 7.0f;
  assert_int_equal(rd_mlp_backward_input(&m, dy, r.dx, NULL), RD_OK);
  for (size_t k = 0; k < m.n_params; k++) assert_true(m.grads[k] == 7.0f);
  float *dx2 = malloc(n * in * sizeof(float));
  assert_int_equal(rd_mlp_backward(&m, dy, dx2, NULL), RD_OK);
  assert_memory_equal(dx2, r.dx, n * in * sizeof(float));
  memcpy(r.grads, m.grads, m.n_params * sizeof(float));
  free(dx2);
  rd_mlp_free(&m);
  return r;
}

static void gemm_case(const rd_nn_spec_t *s, size_t n) {
  size_t in = s->sizes[0], out = s->sizes[s->n_layers], np = rd_nn_spec_params(s);
  float *x = malloc(n * in * sizeof *x), *dy = malloc(n * out * sizeof *dy);
  float *params = malloc(np * sizeof *params);
  rdt_fill(x, n * in, 61, -1.0f, 1.0f);
  rdt_fill(dy, n * out, 62, -1.0f, 1.0f);
  {
    rd_mlp_t m;
    make_net(&m, s, 1, 99, 1, 1);
    memcpy(params, m.params, np * sizeof *params);
    for (uint32_t l = 0; l < s->n_layers; l++) /* nonzero biases */
      for (uint32_t o = 0; o < s->sizes[l + 1]; o++)
        params[m.b_off[l] + o] = rdt_unif(63, m.b_off[l] + o, -0.2f, 0.2f);
    rd_mlp_free(&m);
  }
  double *yref = malloc(n * out * sizeof *yref), *gref = malloc(np * sizeof *gref);
  double *dxref = malloc(n * in * sizeof *dxref);
  ref_backward(s, params, n, x, dy, yref, gref, dxref);
  static const char *const isas[] = {"generic", "avx2", "avx512"};
  __builtin_cpu_init();
  const int have[] = {1, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")};
  for (int v = 0; v < 3; v++) {
    if (!have[v]) continue;
    setenv("RD_NN_ISA", isas[v], 1);
    gemm_run_t a = gemm_run(s, n, 1, x, dy, params, isas[v]);
    expect_close("forward", isas[v], a.y, yref, n * out, 1e-5);
    expect_close("gradients", isas[v], a.grads, gref, np, 1e-5);
    expect_close("dx", isas[v], a.dx, dxref, n * in, 1e-5);
    /* Threads split products by rows or columns only: the same bits. */
    for (uint32_t t = 2; t <= 5; t += 3) {
      gemm_run_t b = gemm_run(s, n, t, x, dy, params, isas[v]);
      assert_memory_equal(a.y, b.y, n * out * sizeof(float));
      assert_memory_equal(a.grads, b.grads, np * sizeof(float));
      assert_memory_equal(a.dx, b.dx, n * in * sizeof(float));
      free(b.y), free(b.grads), free(b.dx);
    }
    free(a.y), free(a.grads), free(a.dx);
  }
  unsetenv("RD_NN_ISA");
  free(x), free(dy), free(params), free(yref), free(gref), free(dxref);
}

static void test_gemm_block_edges(void **state) {
  (void)state;
  /* 300 inputs and a batch of 300 cross the inner block (KC = 256) in the
   * forward and weight-gradient products, the batch crosses the row block
   * (MC = 144), 260 outputs cross the column block (NC = 256); 37, 5 and 1
   * leave partial register tiles everywhere; 11 -> 64 takes the transposed
   * weight gradient; outputs of at most 16 units take the narrow kernel, of
 * at most 4 the dot-product kernel; batches of 12 q + 4 and 12 q + 8 end
 * in the smaller row kernels. */
  static const struct {
    rd_nn_spec_t spec; /* layers, sizes, activations */
    uint32_t batch[3]; /* 0 ends */
  } cases[] = {
      {{3, {300, 260, 37, 5}, {RD_NN_RELU, RD_NN_TANH, RD_NN_IDENTITY}}, {300}},
      /* 3001: large enough for the threaded paths of every product. */
      {{2, {11, 64, 1}, {RD_NN_RELU, RD_NN_IDENTITY}}, {7, 1, 3001}},
      {{1, {1, 1}, {RD_NN_TANH}}, {3}},
      /* 3 outputs from 37 units: the dot-product kernel with a partial vector. */
      {{2, {5, 37, 3}, {RD_NN_RELU, RD_NN_IDENTITY}}, {9, 3001}},
      /* A relu layer of 3 units: the dot-product kernel's relu. */
      {{2, {6, 3, 2}, {RD_NN_RELU, RD_NN_IDENTITY}}, {50}},
      /* Last row tiles of 8 and 4 rows (12-row kernel) or 2 and 4 (6-row),
       * read in place: batches 20, 128, 256 and the 64-unit layers' dW. */
      {{3, {20, 64, 64, 2}, {RD_NN_RELU, RD_NN_RELU, RD_NN_IDENTITY}}, {20, 128, 256}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (size_t b = 0; b < 3 && cases[i].batch[b]; b++)
      gemm_case(&cases[i].spec, cases[i].batch[b]);
}

/* c (rows x cols, row-major) against the double reference sum over k <
 * inner of a[r ar + k ak] b[q bq + k bk], within 1e-4 relative. */
static void expect_product(const float *c, size_t rows, size_t cols, size_t inner,
                           const float *a, size_t ar, size_t ak, const float *b, size_t bq,
                           size_t bk) {
  for (size_t r = 0; r < rows; r++)
    for (size_t q = 0; q < cols; q++) {
      double ref = 0;
      for (size_t k = 0; k < inner; k++) ref += (double)a[r * ar + k * ak] * b[q * bq + k * bk];
      assert_true(fabs(c[r * cols + q] - ref) <= 1e-4 * (1 + fabs(ref)));
    }
}

/* rd_mlp_layer_gemm's three products against a double reference, on shapes
 * that take the packed, narrow and transposed paths. The caller's buffers
 * are exactly as large as the products: 302 rows end in a row tile of 2 on
 * every kernel (302 = 2 x 144 + 14), which is packed, not read in place by
 * a larger kernel (ASan sees a read past x or dz). */
static void test_layer_gemm_products(void **state) {
  (void)state;
  const uint32_t sz[] = {11, 256, 3};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(2, sz, act);
  const size_t max_n = 302;
  rd_mlp_t m;
  make_net(&m, &s, (uint32_t)max_n, 5, 1, 0);
  for (size_t n = 300; n <= max_n; n += 2)
  for (uint32_t l = 0; l < 2; l++) {
    size_t in = sz[l], out = sz[l + 1];
    float *x = malloc(n * in * sizeof *x), *w = malloc(out * in * sizeof *w);
    float *dz = malloc(n * out * sizeof *dz), *c = malloc((n + out) * (in + out) * sizeof *c);
    rdt_fill(x, n * in, 10 + l, -1, 1);
    rdt_fill(w, out * in, 20 + l, -1, 1);
    rdt_fill(dz, n * out, 30 + l, -1, 1);
    /* forward: c[i][j] = sum_p x[i][p] w[j][p] */
    assert_int_equal(rd_mlp_layer_gemm(&m, l, RD_MLP_GEMM_FORWARD, n, x, w, c, NULL), RD_OK);
    expect_product(c, n, out, in, x, in, 1, w, in, 1);
    /* grad W: c[j][p] = sum_i dz[i][j] x[i][p] */
    assert_int_equal(rd_mlp_layer_gemm(&m, l, RD_MLP_GEMM_GRAD_W, n, dz, x, c, NULL), RD_OK);
    expect_product(c, out, in, n, dz, 1, out, x, 1, in);
    /* grad X: c[i][p] = sum_j dz[i][j] w[j][p] */
    assert_int_equal(rd_mlp_layer_gemm(&m, l, RD_MLP_GEMM_GRAD_X, n, dz, w, c, NULL), RD_OK);
    expect_product(c, n, in, out, dz, out, 1, w, 1, in);
    free(x), free(w), free(dz), free(c);
  }
  rd_error_t err;
  float one = 1;
  assert_int_equal(rd_mlp_layer_gemm(&m, 2, RD_MLP_GEMM_FORWARD, 1, &one, &one, &one, &err),
                   RD_EINVAL);
  assert_int_equal(
      rd_mlp_layer_gemm(&m, 0, RD_MLP_GEMM_FORWARD, max_n + 1, &one, &one, &one, &err),
      RD_ETOOBIG);
  rd_mlp_free(&m);
}

/* The dot-product kernels (output layers of at most 4 units; AVX-512 and
 * AVX2) in their documented order, bit for bit: lane l of L (16 or 8)
 * sums x[p] w[p] for p = l mod L by fused multiply-adds in p order (lanes
 * past the inner dimension add 0 x 0), then the lanes are added as
 * _mm512_reduce_add_ps does (upper 8 onto lower, for L = 16; upper 4 onto
 * lower, lanes 2, 3 onto 0, 1, lane 1 onto 0), then the bias, then relu.
 * Guards the kernels' shared-shuffle reductions, which must give the bits
 * of one reduction per element. */
static float dot_ref(const float *x, const float *w, size_t k, size_t L) {
  float lane[16] = {0}, t4[4];
  for (size_t p0 = 0; p0 < k; p0 += L)
    for (size_t l = 0; l < L; l++)
      lane[l] = p0 + l < k ? fmaf(x[p0 + l], w[p0 + l], lane[l]) : fmaf(0.0f, 0.0f, lane[l]);
  if (L == 16)
    for (int i = 0; i < 8; i++) lane[i] = lane[i + 8] + lane[i];
  for (int i = 0; i < 4; i++) t4[i] = lane[i + 4] + lane[i];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

static void test_dot_kernel_order(void **state) {
  (void)state;
  static const char *const isas[] = {"avx512", "avx2"};
  static const uint32_t ins[] = {1, 5, 8, 9, 16, 17, 64, 100}, outs[] = {1, 2, 3, 4};
  static const size_t rows[] = {1, 2, 3, 4, 5, 130};
  int ran = 0;
  for (size_t v = 0; v < 2; v++) {
    const size_t L = v == 0 ? 16 : 8;
    setenv("RD_NN_ISA", isas[v], 1);
    for (size_t ii = 0; ii < 8; ii++)
      for (size_t oi = 0; oi < 4; oi++)
        for (int relu = 0; relu < 2; relu++) {
          const uint32_t sz[] = {ins[ii], outs[oi]};
          const rd_nn_act_t act[] = {relu ? RD_NN_RELU : RD_NN_IDENTITY};
          rd_nn_spec_t s = rdt_nn_spec(1, sz, act);
          rd_mlp_t m;
          make_net(&m, &s, 130, 7 + ii * 8 + oi, 1, 1);
          if (strcmp(rd_mlp_isa(&m), isas[v]) != 0) { /* this CPU lacks the variant */
            rd_mlp_free(&m);
            continue;
          }
          ran++;
          rdt_fill(m.params, m.n_params, 40 + ii, -1.0f, 1.0f);
          const float *w = m.params + m.w_off[0], *b = m.params + m.b_off[0];
          for (size_t ri = 0; ri < 6; ri++) {
            const size_t n = rows[ri], in = ins[ii], out = outs[oi];
            float *x = malloc(n * in * sizeof *x), *y = malloc(n * out * sizeof *y);
            rdt_fill(x, n * in, 50 + ri, -2.0f, 2.0f);
            assert_int_equal(rd_mlp_forward(&m, n, x, y, NULL), RD_OK);
            for (size_t i = 0; i < n; i++)
              for (size_t j = 0; j < out; j++) {
                float e = dot_ref(x + i * in, w + j * in, in, L) + b[j];
                if (relu) e = e > 0.0f ? e : 0.0f;
                assert_memory_equal(&y[i * out + j], &e, sizeof e);
              }
            free(x), free(y);
          }
          rd_mlp_free(&m);
        }
  }
  unsetenv("RD_NN_ISA");
  if (ran == 0) skip(); /* no AVX2 either: the generic variant has no dot kernel */
}

/* ---- losses ---- */

static void test_loss_values_by_hand(void **state) {
  (void)state;
  const float y[] = {1.0f, 3.0f}, t[] = {0.0f, 0.0f}, w[] = {1.0f, 0.5f};
  float dy[2];
  double loss;
  /* MSE: (1*1 + 0.5*9) / 2 = 2.75; dy = 2 w e / 2 = {1, 1.5}. */
  assert_int_equal(rd_nn_mse(2, 1, y, t, w, dy, &loss, NULL), RD_OK);
  assert_true(fabs(loss - 2.75) < 1e-12);
  assert_true(dy[0] == 1.0f && dy[1] == 1.5f);
  /* Huber delta 1: e=1 is quadratic (0.5), e=3 linear (1*(3-0.5) = 2.5);
   * (1*0.5 + 0.5*2.5) / 2 = 0.875; dy = w g / 2 = {0.5, 0.25}. */
  assert_int_equal(rd_nn_huber(2, 1, y, t, w, 1.0, dy, &loss, NULL), RD_OK);
  assert_true(fabs(loss - 0.875) < 1e-12);
  assert_true(dy[0] == 0.5f && dy[1] == 0.25f);
  /* No weights = weights of 1; dim averages too: 2 samples x 1 = 2 elements. */
  assert_int_equal(rd_nn_huber(1, 2, y, t, NULL, 2.0, dy, &loss, NULL), RD_OK);
  assert_true(fabs(loss - (0.5 + 2.0 * (3 - 1.0)) / 2) < 1e-12);
  assert_true(dy[0] == 0.5f && dy[1] == 1.0f);
}

static void test_loss_errors(void **state) {
  (void)state;
  const float y[] = {1.0f, 3.0f}, t[] = {0.0f, 0.0f};
  float dy[2] = {7, 7}, w[] = {1.0f, -0.5f};
  double loss = 7;
  rd_error_t err;
  assert_int_equal(rd_nn_mse(0, 1, y, t, NULL, dy, &loss, &err), RD_EINVAL);
  assert_int_equal(rd_nn_mse(2, 0, y, t, NULL, dy, &loss, &err), RD_EINVAL);
  assert_int_equal(rd_nn_mse(2, 1, y, t, w, dy, &loss, &err), RD_EINVAL);
  w[1] = NAN;
  assert_int_equal(rd_nn_huber(2, 1, y, t, w, 1.0, dy, &loss, &err), RD_EINVAL);
  assert_true(strlen(err.msg) > 0);
  assert_int_equal(rd_nn_huber(2, 1, y, t, NULL, 0.0, dy, &loss, &err), RD_EINVAL);
  assert_int_equal(rd_nn_huber(2, 1, y, t, NULL, -1.0, dy, &loss, &err), RD_EINVAL);
  assert_int_equal(rd_nn_huber(2, 1, y, t, NULL, NAN, dy, &loss, &err), RD_EINVAL);
  assert_int_equal(rd_nn_huber(2, 1, y, t, NULL, INFINITY, dy, &loss, &err), RD_EINVAL);
  assert_true(dy[0] == 7 && dy[1] == 7 && loss == 7);
}

/* Loss gradients straight against central differences in y, with
 * non-uniform weights; Huber with residuals on both sides of delta. */
static void check_loss_fd(int huber) {
  enum { N = 6, D = 3 };
  float y[N * D], t[N * D], w[N], dy[N * D], scratch[N * D];
  rdt_fill(y, N * D, 11, -2.0f, 2.0f);
  rdt_fill(t, N * D, 12, -2.0f, 2.0f);
  for (int i = 0; i < N; i++) w[i] = 0.2f + 0.15f * (float)i;
  const double delta = 0.75;
  int quad = 0, lin = 0;
  for (int k = 0; k < N * D; k++) {
    double e = fabs((double)y[k] - t[k]);
    /* Keep residuals off the seam by more than h so each FD stays in one piece. */
    if (fabs(e - delta) < 2 * GC_H) y[k] += 0.1f;
    if (fabs((double)y[k] - t[k]) <= delta) quad++;
    else lin++;
  }
  if (huber) assert_true(quad > 2 && lin > 2);
  double l0;
  if (huber)
    assert_int_equal(rd_nn_huber(N, D, y, t, w, delta, dy, &l0, NULL), RD_OK);
  else
    assert_int_equal(rd_nn_mse(N, D, y, t, w, dy, &l0, NULL), RD_OK);
  for (int k = 0; k < N * D; k++) {
    float orig = y[k], yp = orig + GC_H, ym = orig - GC_H;
    double lp, lm;
    y[k] = yp;
    if (huber) rd_nn_huber(N, D, y, t, w, delta, scratch, &lp, NULL);
    else rd_nn_mse(N, D, y, t, w, scratch, &lp, NULL);
    y[k] = ym;
    if (huber) rd_nn_huber(N, D, y, t, w, delta, scratch, &lm, NULL);
    else rd_nn_mse(N, D, y, t, w, scratch, &lm, NULL);
    y[k] = orig;
    double num = (lp - lm) / ((double)yp - ym), a = dy[k];
    if (fabs(a - num) > 1e-4 * fmax(fabs(a), fabs(num)) + 1e-7)
      fail_msg("%s dL/dy[%d]: analytic %.8g numeric %.8g", huber ? "huber" : "mse", k, a, num);
  }
}

static void test_loss_gradients_fd(void **state) {
  (void)state;
  check_loss_fd(0);
  check_loss_fd(1);
}

/* ---- gradient checks through the network ---- */

typedef struct {
  const char *name;
  rd_nn_spec_t spec;
  int huber;
  double delta;
  float target_scale;
} gc_case_t;

typedef struct {
  size_t checked, skipped, significant, failed;
  double worst; /* largest |a - n| / (GC_RTOL max(|a|,|n|) + GC_ATOL); < 1 passes */
} gc_result_t;

enum { GC_N = 5 };

static double gc_loss(rd_mlp_t *m, const gc_case_t *c, const float *x, const float *t,
                      const float *w, float *dy) {
  rd_error_t err;
  if (rd_mlp_forward(m, GC_N, x, NULL, &err)) fail_msg("forward: %s", err.msg);
  size_t out = c->spec.sizes[c->spec.n_layers];
  double loss;
  int rc = c->huber ? rd_nn_huber(GC_N, out, rd_mlp_output(m), t, w, c->delta, dy, &loss, &err)
                    : rd_nn_mse(GC_N, out, rd_mlp_output(m), t, w, dy, &loss, &err);
  if (rc) fail_msg("loss: %s", err.msg);
  return loss;
}

/* Signs of every relu unit of the last forward, as bytes. */
static size_t relu_pattern(const rd_mlp_t *m, uint8_t *pat) {
  size_t k = 0;
  for (uint32_t l = 0; l < m->spec.n_layers; l++) {
    if (m->spec.act[l] != RD_NN_RELU) continue;
    const float *a = rd_mlp_activation(m, l);
    for (size_t i = 0; i < (size_t)GC_N * m->spec.sizes[l + 1]; i++) pat[k++] = a[i] > 0.0f;
  }
  return k;
}

static void gc_compare(gc_result_t *r, double a, double num, const char *what, size_t k,
                       const char *name, int verbose) {
  double bound = GC_RTOL * fmax(fabs(a), fabs(num)) + GC_ATOL;
  double ratio = fabs(a - num) / bound;
  r->checked++;
  if (fmax(fabs(a), fabs(num)) > 10 * GC_ATOL) r->significant++;
  if (ratio > r->worst) r->worst = ratio;
  if (ratio > 1) {
    r->failed++;
    if (verbose)
      print_message("%s: %s[%zu] analytic %.7g numeric %.7g\n", name, what, k, a, num);
  }
}

/* One finite-difference check of `pert` (parameters or inputs) of length n,
 * whose analytic gradient is `ana`. */
static void gc_coords(rd_mlp_t *m, const gc_case_t *c, float *pert, size_t n, const float *ana,
                      const float *x, const float *t, const float *w, float *dy,
                      const uint8_t *base, uint8_t *pat, const char *what, gc_result_t *r,
                      int verbose) {
  for (size_t k = 0; k < n; k++) {
    float orig = pert[k], vp = orig + GC_H, vm = orig - GC_H;
    pert[k] = vp;
    double lp = gc_loss(m, c, x, t, w, dy);
    size_t np = relu_pattern(m, pat);
    int flip = memcmp(pat, base, np) != 0;
    pert[k] = vm;
    double lm = gc_loss(m, c, x, t, w, dy);
    relu_pattern(m, pat);
    flip |= memcmp(pat, base, np) != 0;
    pert[k] = orig;
    if (flip) {
      r->skipped++;
      continue;
    }
    gc_compare(r, ana[k], (lp - lm) / ((double)vp - vm), what, k, c->name, verbose);
  }
}

/* corrupt: factor applied to the largest analytic parameter gradient
 * (1 = none), to show the harness notices. */
static gc_result_t grad_check(const gc_case_t *c, float corrupt, int verbose) {
  const rd_nn_spec_t *s = &c->spec;
  size_t in = s->sizes[0], out = s->sizes[s->n_layers];
  rd_mlp_t m;
  make_net(&m, s, GC_N, 4242, 1, 0);
  /* Nonzero biases, so bias gradients are not all at a symmetric point. */
  for (uint32_t l = 0; l < s->n_layers; l++)
    for (uint32_t o = 0; o < s->sizes[l + 1]; o++)
      m.params[m.b_off[l] + o] = rdt_unif(77, m.b_off[l] + o, -0.3f, 0.3f);
  float *x = malloc(GC_N * in * sizeof *x), *t = malloc(GC_N * out * sizeof *t);
  float *dy = malloc(GC_N * out * sizeof *dy), *dx = malloc(GC_N * in * sizeof *dx);
  float *gp = malloc(m.n_params * sizeof *gp);
  float w[GC_N];
  rdt_fill(x, GC_N * in, 31, -1.0f, 1.0f);
  rdt_fill(t, GC_N * out, 32, -c->target_scale, c->target_scale);
  for (int i = 0; i < GC_N; i++) w[i] = 0.3f + 0.35f * (float)i; /* 0.3 .. 1.7 */

  gc_loss(&m, c, x, t, w, dy);
  if (c->huber) { /* both Huber regions must be exercised */
    int quad = 0, lin = 0;
    for (size_t k = 0; k < GC_N * out; k++)
      if (fabs((double)rd_mlp_output(&m)[k] - t[k]) <= c->delta) quad++;
      else lin++;
    if (!(quad > 0 && lin > 0)) fail_msg("%s: Huber regions %d / %d", c->name, quad, lin);
  }
  size_t units = 0;
  for (uint32_t l = 0; l < s->n_layers; l++) units += (size_t)GC_N * s->sizes[l + 1];
  uint8_t *base = malloc(units + 1), *pat = malloc(units + 1);
  relu_pattern(&m, base);
  assert_int_equal(rd_mlp_backward(&m, dy, dx, NULL), RD_OK);
  memcpy(gp, m.grads, m.n_params * sizeof *gp);
  size_t big = 0;
  for (size_t k = 1; k < m.n_params; k++)
    if (fabsf(gp[k]) > fabsf(gp[big])) big = k;
  gp[big] *= corrupt;

  gc_result_t r = {0};
  gc_coords(&m, c, m.params, m.n_params, gp, x, t, w, dy, base, pat, "theta", &r, verbose);
  gc_coords(&m, c, x, GC_N * in, dx, x, t, w, dy, base, pat, "x", &r, verbose);
  free(x);
  free(t);
  free(dy);
  free(dx);
  free(gp);
  free(base);
  free(pat);
  rd_mlp_free(&m);
  return r;
}

static void expect_grad_ok(const gc_case_t *c) {
  gc_result_t r = grad_check(c, 1.0f, 1);
  if (r.failed || r.skipped * 20 > r.checked + r.skipped || r.significant * 2 < r.checked)
    fail_msg("%s: %zu checked, %zu failed, %zu skipped at kinks, %zu significant, worst %.3g",
             c->name, r.checked, r.failed, r.skipped, r.significant, r.worst);
  print_message("%s: %zu coordinates, %zu skipped at kinks, worst error %.3g of tolerance\n",
                c->name, r.checked, r.skipped, r.worst);
}

/* The gradient checks, each a cmocka test of its own (GRADCHECK_TEST). */
static gc_case_t gc_cases[] = {
    {"identity/mse", {2, {3, 4, 2}, {RD_NN_IDENTITY, RD_NN_IDENTITY}}, 0, 0, 1.0f},
    {"tanh/mse", {3, {3, 5, 4, 2}, {RD_NN_TANH, RD_NN_TANH, RD_NN_IDENTITY}}, 0, 0, 1.0f},
    {"relu/mse", {3, {4, 6, 5, 2}, {RD_NN_RELU, RD_NN_RELU, RD_NN_IDENTITY}}, 0, 0, 1.0f},
    /* A tanh output layer (DDPG's bounded actor) under Huber. */
    {"tanh-out/huber", {2, {3, 6, 3}, {RD_NN_TANH, RD_NN_TANH}}, 1, 0.4, 1.2f},
    {"mixed/huber", {4, {4, 7, 5, 6, 2}, {RD_NN_RELU, RD_NN_TANH, RD_NN_RELU, RD_NN_IDENTITY}},
     1, 0.5, 2.0f},
};

/* state: the gc_case_t to check. */
static void test_gradcheck(void **state) { expect_grad_ok(*state); }

/* The cmocka test test_gradcheck_<name> of gc_cases[i]. */
#define GRADCHECK_TEST(name, i) {"test_gradcheck_" #name, test_gradcheck, NULL, NULL, &gc_cases[i]}

/* Shard views (rd_mlp_init_view) compute with the owner's weights and keep
 * their own gradients; they refuse updates and outlive nothing. */
static void test_views(void **state) {
  (void)state;
  const uint32_t sz[] = {5, 32, 32, 3};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_TANH, RD_NN_IDENTITY};
  rd_nn_spec_t sp = rdt_nn_spec(3, sz, act);
  enum { N = 40 };
  rd_mlp_t m, v;
  make_net(&m, &sp, N, 7, 1, 0);
  rd_error_t err;
  assert_int_equal(rd_mlp_init_view(&v, &m, N, 1, &err), RD_OK);
  assert_ptr_equal(v.params, m.params);
  float x[N * 5], dy[N * 3], ym[N * 3], yv[N * 3];
  uint64_t st = 99;
  for (size_t i = 0; i < N * 5; i++) x[i] = (float)((st = st * 6364136223846793005u + 1) >> 40) * 0x1p-24f - 0.5f;
  for (size_t i = 0; i < N * 3; i++) dy[i] = 0.01f * (float)(i % 7) - 0.03f;
  /* The owner on x alone. */
  assert_int_equal(rd_mlp_forward(&m, N, x, ym, &err), RD_OK);
  assert_int_equal(rd_mlp_backward(&m, dy, NULL, &err), RD_OK);
  /* The view on the same rows: the same outputs and gradients, bit for bit. */
  assert_int_equal(rd_mlp_forward(&v, N, x, yv, &err), RD_OK);
  assert_int_equal(rd_mlp_forward(&v, N + 1, x, yv, &err), RD_ETOOBIG);
  assert_int_equal(rd_mlp_forward(&v, N, x, yv, &err), RD_OK);
  assert_int_equal(rd_mlp_backward(&v, dy, NULL, &err), RD_OK);
  double worst = 0, big = 0;
  for (size_t i = 0; i < N * 3; i++) worst = fmax(worst, fabs((double)ym[i] - yv[i]));
  assert_true(worst == 0);
  worst = 0;
  for (size_t i = 0; i < m.n_params; i++) {
    worst = fmax(worst, fabs((double)m.grads[i] - v.grads[i]));
    big = fmax(big, fabs((double)m.grads[i]));
  }
  assert_true(big > 0 && worst == 0);
  assert_ptr_not_equal(v.grads, m.grads);
  /* Views never write the owner's weights. */
  rd_adam_config_t a;
  rd_adam_config_default(&a);
  assert_int_equal(rd_mlp_adam_step(&v, &a, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_clip_grad_norm(&v, 1.0, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_polyak(&v, &m, 0.5, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_copy_params(&v, &m, &err), RD_EINVAL);
  rd_mlp_t w;
  assert_int_equal(rd_mlp_init_view(&w, &v, N, 0, &err), RD_EINVAL); /* no view of a view */
  rd_mlp_free(&v);
  assert_non_null(m.params); /* the owner's weights survive the view */
  assert_int_equal(rd_mlp_forward(&m, N, x, ym, &err), RD_OK);
  rd_mlp_free(&m);
}

/* Prepacked weights (rd_mlp_prepack_*): forward and backward on the owner
 * and on a view give the same bits with and without them, on layers of
 * several K and N blocks with partial panels; while on, they are what the
 * products read (a weight written meanwhile is not seen: the contract is
 * to turn them off first); a view reading other params ignores them. */
static void test_prepacked_weights(void **state) {
  (void)state;
  const uint32_t sz[] = {37, 600, 300, 20, 3};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_TANH, RD_NN_RELU, RD_NN_IDENTITY};
  rd_nn_spec_t sp = rdt_nn_spec(4, sz, act);
  enum { N = 50 };
  rd_mlp_t m, v, t;
  make_net(&m, &sp, N, 11, 1, 0);
  make_net(&t, &sp, N, 12, 1, 1);
  rd_error_t err;
  assert_int_equal(rd_mlp_init_view(&v, &m, N, 1, &err), RD_OK);
  assert_int_equal(rd_mlp_prepack_init(&v, &err), RD_EINVAL);
  static float x[N * 37], dy[N * 3], y[3][N * 3], dx[3][N * 37], g[3][37 * 600];
  uint64_t st = 5;
  for (size_t i = 0; i < N * 37; i++) x[i] = (float)((st = st * 6364136223846793005u + 1) >> 40) * 0x1p-24f - 0.5f;
  for (size_t i = 0; i < N * 3; i++) dy[i] = 0.01f * (float)(i % 7) - 0.03f;
  /* run k: the view's outputs, input gradient and the first layer's dW */
  size_t nw = (size_t)37 * 600;
#define RUN(k, net)                                                          \
  do {                                                                       \
    assert_int_equal(rd_mlp_forward(net, N, x, y[k], &err), RD_OK);          \
    assert_int_equal(rd_mlp_backward(net, dy, dx[k], &err), RD_OK);          \
    memcpy(g[k], (net)->grads + (net)->w_off[0], nw * sizeof(float));        \
  } while (0)
  RUN(0, &v);
  assert_int_equal(rd_mlp_prepack_init(&m, &err), RD_OK);
  assert_int_equal(rd_mlp_prepack_init(&t, &err), RD_OK);
  assert_int_equal(rd_mlp_prepack_parts(&m), 8);
  /* Packed: the two wide layers' W^T and the 600 x 300 layer's W; not the
   * others (read in place, narrow, dot, or small), nor an inference-only
   * network's backward. */
  for (uint32_t q = 0; q < 8; q++) {
    assert_true((rd_mlp_prepack_floats(&m, q) > 0) == (q == 0 || q == 2 || q == 3));
    assert_true((rd_mlp_prepack_floats(&t, q) > 0) == (q == 0 || q == 2));
    rd_mlp_prepack_part(&m, q);
    rd_mlp_prepack_part(&t, q);
  }
  rd_mlp_prepack_use(&m, 1);
  rd_mlp_prepack_use(&t, 1);
  RUN(1, &v);
  assert_memory_equal(y[0], y[1], sizeof y[0]);
  assert_memory_equal(dx[0], dx[1], sizeof dx[0]);
  assert_memory_equal(g[0], g[1], nw * sizeof(float));
  RUN(2, &m); /* the owner too */
  assert_memory_equal(y[0], y[2], sizeof y[0]);
  assert_memory_equal(dx[0], dx[2], sizeof dx[0]);
  float yt[2][N * 3];
  rd_mlp_prepack_use(&t, 0);
  assert_int_equal(rd_mlp_forward(&t, N, x, yt[0], &err), RD_OK);
  rd_mlp_prepack_use(&t, 1);
  assert_int_equal(rd_mlp_forward(&t, N, x, yt[1], &err), RD_OK);
  assert_memory_equal(yt[0], yt[1], sizeof yt[0]);
  /* While on, the products read the packed copy: a weight of the middle
   * layer written now is not seen until they are off. */
  m.params[m.w_off[1] + 17] += 0.5f;
  RUN(1, &v);
  assert_memory_equal(y[0], y[1], sizeof y[0]);
  rd_mlp_prepack_use(&m, 0);
  RUN(1, &v);
  assert_memory_not_equal(y[0], y[1], sizeof y[0]);
  /* A view reading other params (a replica's) does not use m's: here a
   * copy of m's new weights, while m's packs still predate the write. */
  rd_mlp_prepack_use(&m, 1);
  float *copy = malloc(m.n_params * sizeof(float));
  assert_non_null(copy);
  memcpy(copy, m.params, m.n_params * sizeof(float));
  v.params = copy;
  RUN(2, &v);
  assert_memory_equal(y[1], y[2], sizeof y[0]);
  v.params = m.params;
  free(copy);
  /* A network of two threads splits large products over them, by rows or
   * by columns: the same bits with its weights prepacked. */
  rd_mlp_t m2;
  make_net(&m2, &sp, N, 11, 2, 0);
  assert_int_equal(rd_mlp_prepack_init(&m2, &err), RD_OK);
  for (uint32_t q = 0; q < 8; q++) rd_mlp_prepack_part(&m2, q);
  rd_mlp_prepack_use(&m2, 1);
  RUN(2, &m2);
  assert_memory_equal(y[0], y[2], sizeof y[0]);
  assert_memory_equal(dx[0], dx[2], sizeof dx[0]);
  assert_memory_equal(g[0], g[2], nw * sizeof(float));
  rd_mlp_free(&m2);
#undef RUN
  rd_mlp_free(&v);
  rd_mlp_free(&m);
  rd_mlp_free(&t);
}

/* rd_nn_tanh against double tanh over every 97th positive float and its
 * negation: within 3 ulp, odd, and the special values. */
static void test_tanh_accuracy(void **state) {
  (void)state;
  double worst = 0;
  float worst_x = 0;
  for (uint32_t u = 0; u < 0x7f800000u; u += 97) {
    float x;
    memcpy(&x, &u, sizeof x);
    float v = rd_nn_tanh(x);
    float r = (float)tanh((double)x);
    double ulp = (double)nextafterf(fabsf(r), INFINITY) - fabsf(r);
    double e = fabs((double)v - tanh((double)x)) / ulp;
    if (e > worst) worst = e, worst_x = x;
    if (rd_nn_tanh(-x) != -v) fail_msg("tanh(-%a) != -tanh(%a)", x, x);
  }
  printf("rd_nn_tanh: worst %.2f ulp at %g\n", worst, worst_x);
  assert_true(worst <= 3.0);
  assert_true(rd_nn_tanh(INFINITY) == 1.0f && rd_nn_tanh(-INFINITY) == -1.0f);
  assert_true(isnan(rd_nn_tanh(NAN)));
  assert_true(signbit(rd_nn_tanh(-0.0f)) && rd_nn_tanh(-0.0f) == 0.0f);
  assert_true(rd_nn_tanh(20.0f) == 1.0f && rd_nn_tanh(1e-30f) == 1e-30f);
}

static void test_gradcheck_catches_errors(void **state) {
  (void)state;
  gc_case_t c = gc_cases[1]; /* tanh/mse */
  c.name = "tanh/mse corrupted";
  gc_result_t r = grad_check(&c, 1.01f, 0);
  assert_int_equal(r.failed, 1);
}

/* ---- optimizer ---- */

/* 1 -> 1 identity: parameter 0 the weight, 1 the bias; a batch of 1. */
static void make_tiny_net(rd_mlp_t *m) {
  const rd_nn_spec_t s = {1, {1, 1}, {RD_NN_IDENTITY}};
  make_net(m, &s, 1, 0, 1, 0);
}

static void test_adam_two_steps_by_hand(void **state) {
  (void)state;
  rd_mlp_t m;
  make_tiny_net(&m);
  rd_adam_config_t c;
  rd_adam_config_default(&c);
  c.lr = 0.1;
  float *p = rd_mlp_params(&m), *g = rd_mlp_grads(&m);
  p[0] = 1.0f;
  p[1] = -0.5f;
  /* Step 1, g = (0.5, -2): m = 0.1 g, v = 0.001 g^2, m^ = g, v^ = g^2, so
   * the step is lr * sign(g) * |g| / (|g| + eps) = 0.1 * sign(g) - ~2e-9:
   * theta = (0.900000002, -0.4000000005). */
  g[0] = 0.5f;
  g[1] = -2.0f;
  assert_int_equal(rd_mlp_adam_step(&m, &c, NULL), RD_OK);
  assert_true(fabs(p[0] - 0.900000002) < 1e-7);
  assert_true(fabs(p[1] - -0.4000000005) < 1e-7);
  /* Step 2, g = (-1, 0):
   *   m = 0.9*0.05 + 0.1*(-1) = -0.055, v = 0.999*0.00025 + 0.001*1 = 0.00124975
   *   m^ = -0.055/0.19 = -0.28947368, v^ = 0.00124975/0.001999 = 0.62518759
   *   theta0 = 0.900000002 + 0.1*0.28947368/0.79068804 = 0.93661035
   *   m = 0.9*(-0.2) = -0.18, v = 0.999*0.004 = 0.003996
   *   m^ = -0.94736842, v^ = 1.99899950, sqrt = 1.41385979
   *   theta1 = -0.4000000005 + 0.1*0.94736842/1.41385979 = -0.33299418 */
  g[0] = -1.0f;
  g[1] = 0.0f;
  assert_int_equal(rd_mlp_adam_step(&m, &c, NULL), RD_OK);
  assert_true(fabs(p[0] - 0.9366103542) < 2e-7);
  assert_true(fabs(p[1] - -0.3329941756) < 2e-7);
  assert_int_equal(m.adam_t, 2);

  /* Bad hyperparameters change nothing (not even the step count). */
  float before[2] = {p[0], p[1]};
  rd_error_t err;
  rd_adam_config_t bad = c;
  bad.lr = 0;
  assert_int_equal(rd_mlp_adam_step(&m, &bad, &err), RD_EINVAL);
  bad = c;
  bad.beta1 = 1.0;
  assert_int_equal(rd_mlp_adam_step(&m, &bad, &err), RD_EINVAL);
  bad = c;
  bad.beta2 = NAN;
  assert_int_equal(rd_mlp_adam_step(&m, &bad, &err), RD_EINVAL);
  bad = c;
  bad.eps = 0;
  assert_int_equal(rd_mlp_adam_step(&m, &bad, &err), RD_EINVAL);
  assert_true(p[0] == before[0] && p[1] == before[1]);
  assert_int_equal(m.adam_t, 2);
  rd_mlp_free(&m);
}

/* A parameter whose gradient stays 0 (a dead ReLU unit's): its moments
 * decay, and once below FLT_MIN they are 0, never a denormal (nn.h: 0.9 m
 * of the smallest denormal rounds back to it, and a denormal moment costs
 * the CPU's slow path on every later step). Above FLT_MIN, m decays
 * exactly as Adam's formula says. 49 parameters: whole vectors and a
 * partial one in every kernel. */
static void test_adam_no_denormal_moments(void **state) {
  (void)state;
  const rd_nn_spec_t s = {2, {4, 8, 1}, {RD_NN_RELU, RD_NN_IDENTITY}};
  rd_mlp_t m;
  make_net(&m, &s, 1, 3, 1, 0);
  const size_t n = m.n_params;
  float *g = rd_mlp_grads(&m);
  rd_adam_config_t c;
  rd_adam_config_default(&c);
  for (size_t i = 0; i < n; i++) g[i] = i % 2 ? 1e-3f : -2e-3f;
  assert_int_equal(rd_mlp_adam_step(&m, &c, NULL), RD_OK);
  memset(g, 0, n * sizeof *g);
  int flushed = 0;
  for (int k = 0; k < 1500; k++) {
    const float mi = 0.9f * m.adam_m[n - 1]; /* the partial vector's last lane */
    assert_int_equal(rd_mlp_adam_step(&m, &c, NULL), RD_OK);
    for (size_t i = 0; i < n; i++) {
      assert_false(m.adam_m[i] != 0 && fabsf(m.adam_m[i]) < FLT_MIN);
      assert_false(m.adam_v[i] != 0 && fabsf(m.adam_v[i]) < FLT_MIN);
    }
    if (fabsf(mi) >= FLT_MIN)
      assert_true(m.adam_m[n - 1] == mi);
    else
      flushed |= mi != 0;
  }
  assert_true(flushed); /* m passed below FLT_MIN within the 1500 steps */
  for (size_t i = 0; i < n; i++) assert_true(m.adam_m[i] == 0);
  rd_mlp_free(&m);
}

static void test_clip_grad_norm(void **state) {
  (void)state;
  rd_mlp_t m;
  make_tiny_net(&m);
  float *g = rd_mlp_grads(&m);
  g[0] = 3.0f;
  g[1] = -4.0f;
  double norm = 0;
  assert_true(rd_mlp_grad_norm(&m) == 5.0);
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 10.0, &norm, NULL), RD_OK); /* below: untouched */
  assert_true(norm == 5.0 && g[0] == 3.0f && g[1] == -4.0f);
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 5.0, &norm, NULL), RD_OK); /* equal: untouched */
  assert_true(g[0] == 3.0f);
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 1.0, &norm, NULL), RD_OK);
  assert_true(norm == 5.0);
  assert_true(fabs(g[0] - 0.6) < 1e-6 && fabs(g[1] + 0.8) < 1e-6);
  assert_true(fabs(rd_mlp_grad_norm(&m) - 1.0) < 1e-6);
  assert_true(rd_mlp_grad_norm(&m) <= 1.0);

  rd_error_t err;
  float keep0 = g[0];
  g[1] = NAN;
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 1.0, &norm, &err), RD_ERANGE);
  assert_true(g[0] == keep0 && isnan(g[1]));
  g[1] = INFINITY;
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 1.0, NULL, &err), RD_ERANGE);
  g[1] = 0;
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 0.0, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_clip_grad_norm(&m, -1.0, NULL, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_clip_grad_norm(&m, INFINITY, NULL, &err), RD_EINVAL);
  assert_true(g[0] == keep0);

  /* A larger net: the global norm spans all layers (not per tensor). */
  const uint32_t sz2[] = {5, 8, 3};
  const rd_nn_act_t act2[] = {RD_NN_RELU, RD_NN_IDENTITY};
  rd_nn_spec_t s2 = rdt_nn_spec(2, sz2, act2);
  rd_mlp_t big;
  make_net(&big, &s2, 1, 0, 1, 0);
  rdt_fill(big.grads, big.n_params, 3, -1.0f, 1.0f);
  double ss = 0;
  for (size_t i = 0; i < big.n_params; i++) ss += (double)big.grads[i] * big.grads[i];
  assert_true(fabs(rd_mlp_grad_norm(&big) - sqrt(ss)) < 1e-12);
  assert_int_equal(rd_mlp_clip_grad_norm(&big, 0.5, &norm, NULL), RD_OK);
  assert_true(fabs(rd_mlp_grad_norm(&big) - 0.5) < 1e-5);
  rd_mlp_free(&big);
  rd_mlp_free(&m);
}

/* ---- target networks ---- */

static void test_target_updates(void **state) {
  (void)state;
  rd_mlp_t src, dst;
  make_net_and_copy(&src, &dst, &(const rd_nn_spec_t){2, {4, 6, 2}, {RD_NN_TANH, RD_NN_IDENTITY}},
                    4);
  rdt_fill(src.params, src.n_params, 8, -1.0f, 1.0f);
  size_t n = src.n_params;
  float *old = malloc(n * sizeof *old);
  memcpy(old, dst.params, n * sizeof *old);

  assert_int_equal(rd_mlp_polyak(&dst, &src, 0.25, NULL), RD_OK);
  for (size_t i = 0; i < n; i++) {
    double want = 0.25 * src.params[i] + 0.75 * old[i];
    assert_true(fabs(dst.params[i] - want) <= 1e-6);
  }
  /* Repeated averaging converges geometrically: after k more steps the gap
   * is 0.75^k of what it was. */
  for (int k = 0; k < 40; k++) assert_int_equal(rd_mlp_polyak(&dst, &src, 0.25, NULL), RD_OK);
  for (size_t i = 0; i < n; i++)
    assert_true(fabs(dst.params[i] - src.params[i]) <= 2.0 * pow(0.75, 41) + 1e-6);
  /* tau = 1 is a hard copy. */
  memcpy(dst.params, old, n * sizeof *old);
  assert_int_equal(rd_mlp_polyak(&dst, &src, 1.0, NULL), RD_OK);
  assert_memory_equal(dst.params, src.params, n * sizeof(float));

  memcpy(dst.params, old, n * sizeof *old);
  assert_int_equal(rd_mlp_copy_params(&dst, &src, NULL), RD_OK);
  assert_memory_equal(dst.params, src.params, n * sizeof(float));
  /* And the copy computes what the source computes. */
  float x[4 * 4], ys[4 * 2], yd[4 * 2];
  rdt_fill(x, 16, 9, -1, 1);
  assert_int_equal(rd_mlp_forward(&src, 4, x, ys, NULL), RD_OK);
  assert_int_equal(rd_mlp_forward(&dst, 4, x, yd, NULL), RD_OK);
  assert_memory_equal(ys, yd, sizeof ys);

  /* Errors change nothing. */
  rd_error_t err;
  memcpy(dst.params, old, n * sizeof *old);
  assert_int_equal(rd_mlp_polyak(&dst, &src, 0.0, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_polyak(&dst, &src, 1.5, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_polyak(&dst, &src, NAN, &err), RD_EINVAL);
  const rd_nn_spec_t s2 = {2, {4, 6, 3}, {RD_NN_TANH, RD_NN_IDENTITY}};
  rd_mlp_t other;
  make_net(&other, &s2, 4, 1, 1, 0);
  assert_int_equal(rd_mlp_polyak(&dst, &other, 0.5, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_copy_params(&dst, &other, &err), RD_EINVAL);
  assert_memory_equal(dst.params, old, n * sizeof(float));
  rd_mlp_free(&other);
  rd_mlp_free(&src);
  rd_mlp_free(&dst);
  free(old);
}

/* The update in pieces (nn.h: rd_mlp_adam_begin, rd_mlp_clip_begin,
 * rd_mlp_polyak_begin and their ranges): ranges that cover the parameters
 * once, in any order, starting at multiples of 16 but of any length, give
 * the bits of the whole-network calls; the begins check as those do and
 * change nothing on an error. */
static void test_update_in_ranges(void **state) {
  (void)state;
  const rd_nn_spec_t s = {3, {4, 64, 64, 2}, {RD_NN_RELU, RD_NN_RELU, RD_NN_IDENTITY}};
  rd_mlp_t a, b, ta, tb;
  make_net_and_copy(&a, &ta, &s, 4);
  make_net_and_copy(&b, &tb, &s, 4);
  const size_t n = a.n_params, bytes = n * sizeof(float);
  assert_int_equal(n % 16, 2); /* 4610: the last range ends off a vector */
  rdt_fill(a.grads, n, 11, -30.0f, 30.0f);
  rdt_fill(a.adam_m, n, 12, -0.1f, 0.1f);
  rdt_fill(a.adam_v, n, 13, 0.0f, 0.1f);
  memcpy(b.grads, a.grads, bytes);
  memcpy(b.adam_m, a.adam_m, bytes);
  memcpy(b.adam_v, a.adam_v, bytes);
  const size_t cut[] = {0, 16, 1040, 2048, 4096, 4608, n}; /* ranges, run last first */
  const size_t n_cut = sizeof cut / sizeof cut[0];
  for (int step = 0; step < 3; step++) {
    double na, nb;
    float scale;
    assert_int_equal(rd_mlp_clip_grad_norm(&a, 1.0, &na, NULL), RD_OK);
    assert_int_equal(rd_mlp_clip_begin(&b, 1.0, &nb, &scale, NULL), RD_OK);
    assert_true(na == nb && scale > 0.0f); /* the gradients are far above 1 */
    for (size_t k = n_cut - 1; k > 0; k--) rd_mlp_scale_grads_range(&b, scale, cut[k - 1], cut[k]);
    assert_memory_equal(a.grads, b.grads, bytes);
    rd_adam_config_t c;
    rd_adam_config_default(&c);
    rd_adam_coef_t k;
    assert_int_equal(rd_mlp_adam_step(&a, &c, NULL), RD_OK);
    assert_int_equal(rd_mlp_adam_begin(&b, &c, &k, NULL), RD_OK);
    for (size_t r = n_cut - 1; r > 0; r--) rd_mlp_adam_range(&b, &k, cut[r - 1], cut[r]);
    assert_memory_equal(a.params, b.params, bytes);
    assert_memory_equal(a.adam_m, b.adam_m, bytes);
    assert_memory_equal(a.adam_v, b.adam_v, bytes);
    assert_int_equal(a.adam_t, b.adam_t);
    assert_int_equal(rd_mlp_polyak(&ta, &a, 0.005, NULL), RD_OK);
    assert_int_equal(rd_mlp_polyak_begin(&tb, &b, 0.005, NULL), RD_OK);
    for (size_t r = n_cut - 1; r > 0; r--) rd_mlp_polyak_range(&tb, &b, 0.005, cut[r - 1], cut[r]);
    assert_memory_equal(ta.params, tb.params, bytes);
    rdt_fill(a.grads, n, 20 + (uint64_t)step, -30.0f, 30.0f);
    memcpy(b.grads, a.grads, bytes);
  }
  /* Within the clip norm: no scaling. */
  double nrm;
  float scale = -1.0f;
  assert_int_equal(rd_mlp_clip_begin(&b, 1e9, &nrm, &scale, NULL), RD_OK);
  assert_true(scale == 0.0f && nrm > 0);
  /* Errors change nothing, Adam's step count included. */
  rd_error_t err;
  rd_adam_config_t bad;
  rd_adam_config_default(&bad);
  bad.lr = -1;
  rd_adam_coef_t k;
  const uint64_t t = b.adam_t;
  assert_int_equal(rd_mlp_adam_begin(&b, &bad, &k, &err), RD_EINVAL);
  assert_int_equal(b.adam_t, t);
  assert_int_equal(rd_mlp_adam_begin(&tb, &bad, &k, &err), RD_EINVAL); /* inference only */
  assert_int_equal(rd_mlp_polyak_begin(&tb, &b, 0.0, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_clip_begin(&b, -1.0, &nrm, &scale, &err), RD_EINVAL);
  b.grads[7] = NAN;
  assert_int_equal(rd_mlp_clip_begin(&b, 1.0, &nrm, &scale, &err), RD_ERANGE);
  rd_mlp_free(&a);
  rd_mlp_free(&b);
  rd_mlp_free(&ta);
  rd_mlp_free(&tb);
}

/* ---- determinism ---- */

/* n steps of forward, Huber, backward, clip, Adam, Polyak on a fixed data
 * stream; returns the final output on probe inputs in y. */
static void train_steps(rd_mlp_t *m, rd_mlp_t *target, int steps, size_t batch, float *y) {
  size_t in = m->spec.sizes[0], out = m->spec.sizes[m->spec.n_layers];
  float *x = malloc(batch * in * sizeof *x), *t = malloc(batch * out * sizeof *t);
  float *dy = malloc(batch * out * sizeof *dy), *w = malloc(batch * sizeof *w);
  rd_adam_config_t ac;
  rd_adam_config_default(&ac);
  for (int k = 0; k < steps; k++) {
    rdt_fill(x, batch * in, 1000 + (uint64_t)k, -1, 1);
    assert_int_equal(rd_mlp_forward(target, batch, x, t, NULL), RD_OK);
    for (size_t i = 0; i < batch * out; i++) t[i] = 0.5f * t[i] + sinf(x[i % (batch * in)]);
    rdt_fill(w, batch, 2000 + (uint64_t)k, 0.1f, 1.0f);
    assert_int_equal(rd_mlp_forward(m, batch, x, NULL, NULL), RD_OK);
    assert_int_equal(rd_nn_huber(batch, out, rd_mlp_output(m), t, w, 1.0, dy, NULL, NULL), RD_OK);
    assert_int_equal(rd_mlp_backward(m, dy, NULL, NULL), RD_OK);
    assert_int_equal(rd_mlp_clip_grad_norm(m, 1.0, NULL, NULL), RD_OK);
    assert_int_equal(rd_mlp_adam_step(m, &ac, NULL), RD_OK);
    assert_int_equal(rd_mlp_polyak(target, m, 0.05, NULL), RD_OK);
  }
  rdt_fill(x, batch * in, 7, -1, 1);
  assert_int_equal(rd_mlp_forward(m, batch, x, y, NULL), RD_OK);
  free(x);
  free(t);
  free(dy);
  free(w);
}

static void determinism_case(const rd_nn_spec_t *s, size_t batch, int steps, uint32_t threads_b) {
  rd_mlp_t a, ta, b, tb;
  make_net(&a, s, (uint32_t)batch, 77, 1, 0);
  make_net(&ta, s, (uint32_t)batch, 78, 1, 1);
  make_net(&b, s, (uint32_t)batch, 77, threads_b, 0);
  make_net(&tb, s, (uint32_t)batch, 78, threads_b, 1);
  size_t out = s->sizes[s->n_layers];
  float *ya = malloc(batch * out * sizeof *ya), *yb = malloc(batch * out * sizeof *yb);
  train_steps(&a, &ta, steps, batch, ya);
  train_steps(&b, &tb, steps, batch, yb);
  assert_memory_equal(a.params, b.params, a.n_params * sizeof(float));
  assert_memory_equal(ta.params, tb.params, a.n_params * sizeof(float));
  assert_memory_equal(a.adam_m, b.adam_m, a.n_params * sizeof(float));
  assert_memory_equal(a.adam_v, b.adam_v, a.n_params * sizeof(float));
  assert_memory_equal(ya, yb, batch * out * sizeof(float));
  /* And training moved the weights (the comparison is not of two inits). */
  rd_mlp_t fresh;
  make_net(&fresh, s, 1, 77, 1, 1);
  assert_memory_not_equal(fresh.params, a.params, a.n_params * sizeof(float));
  rd_mlp_free(&fresh);
  free(ya);
  free(yb);
  rd_mlp_free(&a);
  rd_mlp_free(&ta);
  rd_mlp_free(&b);
  rd_mlp_free(&tb);
}

static void test_determinism_single_thread(void **state) {
  (void)state;
  const uint32_t sz[] = {4, 64, 64, 2};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_RELU, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(3, sz, act);
  determinism_case(&s, 64, 100, 1);
}

static void test_determinism_across_threads(void **state) {
  (void)state;
  /* Wide enough that activations (256 x 256) and Adam (69k parameters) take
   * the OpenMP path with 2 threads; the bits must not change. */
  const uint32_t sz[] = {8, 256, 256, 4};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_TANH, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(3, sz, act);
  assert_true((size_t)256 * 256 >= RD_MLP_OMP_MIN);
  determinism_case(&s, 256, 5, 2);
}

/* ---- a task training solves ---- */

static void test_fit_sine(void **state) {
  (void)state;
  /* y = sin(x) on [-pi, pi], 64 grid points, full batch. Stated budget:
   * MSE below 5e-4 (the target's variance is 0.5) within 3000 Adam steps at
   * lr 5e-3. */
  enum { N = 64, STEPS = 3000 };
  const uint32_t sz[] = {1, 32, 32, 1};
  const rd_nn_act_t act[] = {RD_NN_TANH, RD_NN_TANH, RD_NN_IDENTITY};
  rd_nn_spec_t s = rdt_nn_spec(3, sz, act);
  rd_mlp_t m;
  make_net(&m, &s, N, 2024, 1, 0);
  float x[N], t[N], dy[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)(-M_PI + 2 * M_PI * i / (N - 1));
    t[i] = sinf(x[i]);
  }
  rd_adam_config_t ac;
  rd_adam_config_default(&ac);
  ac.lr = 5e-3;
  double first = 0, loss = 0;
  int step;
  for (step = 0; step < STEPS; step++) {
    assert_int_equal(rd_mlp_forward(&m, N, x, NULL, NULL), RD_OK);
    assert_int_equal(rd_nn_mse(N, 1, rd_mlp_output(&m), t, NULL, dy, &loss, NULL), RD_OK);
    if (step == 0) first = loss;
    if (loss < 5e-4) break;
    assert_int_equal(rd_mlp_backward(&m, dy, NULL, NULL), RD_OK);
    assert_int_equal(rd_mlp_adam_step(&m, &ac, NULL), RD_OK);
  }
  if (loss >= 5e-4) fail_msg("sine fit: MSE %.3g after %d steps (start %.3g)", loss, step, first);
  print_message("sine fit: MSE %.3g -> %.3g in %d steps\n", first, loss, step);
  rd_mlp_free(&m);
}

/* ---- flat format, argument errors ---- */

static void test_save_load(void **state) {
  (void)state;
  const rd_nn_spec_t s = {2, {3, 5, 2}, {RD_NN_RELU, RD_NN_TANH}};
  rd_mlp_t a, b;
  make_net_and_copy(&a, &b, &s, 2);
  size_t nb = rd_nn_flat_bytes(&s), written = 0;
  uint8_t *buf = malloc(nb + 1);
  assert_int_equal(rd_mlp_save(&a, buf, nb, &written, NULL), RD_OK);
  assert_int_equal(written, nb);
  assert_int_equal(rd_mlp_load(&b, buf, nb, NULL), RD_OK);
  assert_memory_equal(a.params, b.params, a.n_params * sizeof(float));

  /* A set for another network, or a damaged one, leaves b as it was. */
  rd_error_t err;
  const rd_nn_spec_t s2 = {2, {3, 6, 2}, {RD_NN_RELU, RD_NN_TANH}};
  rd_mlp_t c;
  make_net(&c, &s2, 1, 3, 1, 1);
  float *keep = malloc(b.n_params * sizeof *keep);
  memcpy(keep, b.params, b.n_params * sizeof *keep);
  size_t nb2 = rd_nn_flat_bytes(&s2);
  uint8_t *buf2 = malloc(nb2);
  assert_int_equal(rd_mlp_save(&c, buf2, nb2, NULL, NULL), RD_OK);
  assert_int_equal(rd_mlp_load(&b, buf2, nb2, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_load(&b, buf, nb - 1, &err), RD_EINVAL);
  const float nan = NAN;
  memcpy(buf + nb - 4, &nan, 4);
  assert_int_equal(rd_mlp_load(&b, buf, nb, &err), RD_EINVAL);
  assert_memory_equal(keep, b.params, b.n_params * sizeof(float));
  /* A diverged learner cannot ship its weights. */
  a.params[0] = NAN;
  assert_int_equal(rd_mlp_save(&a, buf, nb, NULL, &err), RD_EINVAL);
  free(keep);
  free(buf);
  free(buf2);
  rd_mlp_free(&a);
  rd_mlp_free(&b);
  rd_mlp_free(&c);
}

static void test_argument_errors(void **state) {
  (void)state;
  rd_mlp_config_t c;
  rd_mlp_config_default(&c);
  rd_mlp_t m;
  rd_error_t err;
  assert_int_equal(rd_mlp_init(&m, &c, &err), RD_EINVAL); /* empty spec */
  const uint32_t sz[] = {2, 3, 1};
  const rd_nn_act_t act[] = {RD_NN_RELU, RD_NN_IDENTITY};
  c.spec = rdt_nn_spec(2, sz, act);
  c.max_batch = 0;
  assert_int_equal(rd_mlp_init(&m, &c, &err), RD_EINVAL);
  c.max_batch = RD_MLP_MAX_BATCH + 1;
  assert_int_equal(rd_mlp_init(&m, &c, &err), RD_EINVAL);
  c.max_batch = 4;
  assert_int_equal(rd_mlp_init(&m, &c, &err), RD_OK);

  float x[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}, dy[4] = {1, 1, 1, 1}, dx[8];
  /* Backward needs a forward on the current parameters. */
  assert_int_equal(rd_mlp_backward(&m, dy, dx, &err), RD_EINVAL);
  assert_true(strlen(err.msg) > 0);
  assert_int_equal(rd_mlp_forward(&m, 4, x, NULL, NULL), RD_OK);
  assert_int_equal(rd_mlp_backward(&m, dy, dx, NULL), RD_OK);
  rd_adam_config_t ac;
  rd_adam_config_default(&ac);
  assert_int_equal(rd_mlp_adam_step(&m, &ac, NULL), RD_OK);
  assert_int_equal(rd_mlp_backward(&m, dy, dx, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_forward(&m, 4, x, NULL, NULL), RD_OK);
  assert_int_equal(rd_mlp_backward(&m, dy, NULL, NULL), RD_OK); /* dx is optional */
  rd_mlp_free(&m);

  /* An inference-only network forwards but does not train. */
  c.inference_only = 1;
  assert_int_equal(rd_mlp_init(&m, &c, &err), RD_OK);
  assert_int_equal(rd_mlp_forward(&m, 2, x, NULL, NULL), RD_OK);
  assert_int_equal(rd_mlp_backward(&m, dy, dx, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_adam_step(&m, &ac, &err), RD_EINVAL);
  assert_int_equal(rd_mlp_clip_grad_norm(&m, 1.0, NULL, &err), RD_EINVAL);
  assert_true(rd_mlp_grad_norm(&m) == 0.0);
  rd_mlp_free(&m);
}

RDT_MAIN(NULL, NULL,
         cmocka_unit_test(test_init_contract),
         cmocka_unit_test(test_forward_matches_reference),
         cmocka_unit_test(test_gemm_block_edges),
         cmocka_unit_test(test_layer_gemm_products),
         cmocka_unit_test(test_dot_kernel_order),
         cmocka_unit_test(test_loss_values_by_hand),
         cmocka_unit_test(test_loss_errors),
         cmocka_unit_test(test_loss_gradients_fd),
         GRADCHECK_TEST(identity_mse, 0),
         cmocka_unit_test(test_tanh_accuracy),
         cmocka_unit_test(test_views),
         cmocka_unit_test(test_prepacked_weights),
         GRADCHECK_TEST(tanh_mse, 1),
         GRADCHECK_TEST(relu_mse, 2),
         GRADCHECK_TEST(tanh_output_huber, 3),
         GRADCHECK_TEST(mixed_huber, 4),
         cmocka_unit_test(test_gradcheck_catches_errors),
         cmocka_unit_test(test_adam_two_steps_by_hand),
         cmocka_unit_test(test_adam_no_denormal_moments),
         cmocka_unit_test(test_clip_grad_norm),
         cmocka_unit_test(test_target_updates),
         cmocka_unit_test(test_update_in_ranges),
         cmocka_unit_test(test_determinism_single_thread),
         cmocka_unit_test(test_determinism_across_threads),
         cmocka_unit_test(test_fit_sine),
         cmocka_unit_test(test_save_load),
         cmocka_unit_test(test_argument_errors))
