/* nn.c - MLP forward/backward on a packed GEMM, losses, Adam, target updates.
 *
 * Layer l maps a_l [n x in] to a_{l+1} [n x out]:
 *   a_{l+1} = act(a_l W^T + 1 b^T)      (one GEMM; bias and relu in its epilogue)
 * Backward keeps only the outputs: relu' = [a > 0], tanh' = 1 - a^2, so no
 * pre-activation buffer is needed. With dZ = dA * act'(a_{l+1}):
 *   dW = dZ^T a_l (GEMM)   db = column sums of dZ   dZ_{l-1} = (dZ W) * act'(a_l)
 * where the last product's factor act'(a_l) is the GEMM's epilogue, so the
 * backward pass makes no separate element-wise pass over hidden layers.
 *
 * The GEMM. Each product is C = A B with general strides (BLIS style:
 * element (i, j) of a matrix is at i * rs + j * cs), so the three layouts the
 * passes need - A W^T, dZ^T A, dZ W on row-major batches - are one routine.
 * It is the GotoBLAS/BLIS blocking (Goto & van de Geijn, "Anatomy of
 * high-performance matrix multiplication", TOMS 2008): blocks of KC of the
 * inner dimension, B packed into NR-column panels (in L2), A packed into
 * MR-row panels per MC rows, and a register-blocked MR x NR micro-kernel
 * that keeps the whole C tile in vector registers for the KC updates. A
 * small network's panels are read in place instead where their layout
 * allows (gemm_serial): at 64 units a packed value serves only 64
 * multiply-adds, and the copies cost about as much as the products. The
 * micro-kernel is one body written with GCC vector extensions and compiled
 * for each instruction set (generic SSE2, AVX2+FMA, AVX-512), picked once
 * from the CPU like the sum tree's kernels (RD_NN_ISA forces one).
 *
 * Why not a BLAS. The step is almost all GEMM, so its speed is the GEMM's,
 * and a BLAS makes it depend on the environment (an OPENBLAS_CORETYPE set
 * there holds OpenBLAS to that core's kernels), and OpenBLAS's own threads
 * split the inner dimension differently per thread count, which changes
 * the bits. Its per-call overhead also dominates the 8-unit layers of
 * CartPole. This GEMM fuses the element-wise work into the products and
 * with threads splits only rows or columns of C (below). bench_gemm
 * measures it against OpenBLAS on the machine at hand: docs/benchmarks.md
 * has it faster on the AVX-512 machines and, on an AVX2-only one, slower
 * at some of the learner's shapes.
 *
 * Products of at most 16 columns (output layers, CartPole's 8-unit layers)
 * take a narrow kernel instead (AVX-512, AVX2): one or two masked vectors
 * per row of C, no padding to the general kernel's columns and no packing
 * of A.
 *
 * Determinism. Every element of C is one sequential sum over the inner
 * dimension (blocks of KC in order, FMA per step within a block), whatever
 * tile, thread or orientation (C or C^T) computes it: partial tiles run the
 * same kernel (on a zero-padded copy when short of columns, writing only
 * their rows when short of rows), and a*b == b*a exactly. Which kernel
 * and orientation a product takes depends on its shape, never on the
 * thread count. Threads split C by rows or by columns only, and element-wise
 * loops (Adam included) at multiples of the vector width. So for a given
 * build and instruction set the results are bit-identical for every
 * config.threads.
 */
#include "nn.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rd_philox.h"
#include "rd_tanh.h"
#include "rd_tsan.h"
#include "rd_clock.h"
#include "cpu_isa.h"

/* ---- thread teams ---- */

/* Slow teams (nn.h): whether the cores are free is a property of the
 * machine, not of a network, so the backoff is shared by every network of
 * the process. Relaxed atomics: a race between two networks' updates only
 * shifts when teams are tried again, never what is computed. */
#define TEAM_BACKOFF_MIN_NS UINT64_C(10000000)   /* 10 ms */
#define TEAM_BACKOFF_MAX_NS UINT64_C(1000000000) /* 1 s */
static _Atomic uint64_t team_backoff_ns; /* 0: teams are prompt */
static _Atomic uint64_t team_until_ns;   /* run serially until then */

/* Threads for a parallel job of m now: config.threads, or 1 while backing
 * off from slow teams. */
static int team_size(const rd_mlp_t *m) {
  if (m->threads <= 1) return 1;
  uint64_t until = atomic_load_explicit(&team_until_ns, memory_order_relaxed);
  if (until != 0 && rd_clock_now_ns() < until) return 1;
  return (int)m->threads;
}

/* After a parallel region that started at t0 and whose calling thread
 * finished its own part at t_own: a region much longer than that part
 * doubles the backoff and starts it; a prompt one halves it. */
static void team_done(uint64_t t0, uint64_t t_own) {
  uint64_t t = rd_clock_now_ns(), region = t - t0, own = t_own > t0 ? t_own - t0 : 0;
  uint64_t b = atomic_load_explicit(&team_backoff_ns, memory_order_relaxed);
  if (region > 2 * own + 200000u) {
    b = b ? 2 * b : TEAM_BACKOFF_MIN_NS;
    if (b > TEAM_BACKOFF_MAX_NS) b = TEAM_BACKOFF_MAX_NS;
    atomic_store_explicit(&team_until_ns, t + b, memory_order_relaxed);
  } else {
    b = b / 2 < TEAM_BACKOFF_MIN_NS ? 0 : b / 2;
  }
  atomic_store_explicit(&team_backoff_ns, b, memory_order_relaxed);
}

/* Run `for (size_t i = 0; i < n; i++) body` on the calling thread below
 * RD_MLP_OMP_MIN elements (a thread team costs microseconds, more than the
 * loop of a small net), else split over the team at multiples of 16.
 * Element-wise bodies only: no reductions, so the result never depends on
 * the split. */
#define RD_MLP_FOR(m_, n_, ...)                                                       \
  do {                                                                                \
    size_t rd_n_ = (n_);                                                              \
    int rd_nt_ = rd_n_ >= RD_MLP_OMP_MIN ? team_size(m_) : 1;                         \
    if (rd_nt_ > 1) {                                                                 \
      uint64_t rd_t0_ = rd_clock_now_ns(), rd_own_ = 0;                                        \
      _Pragma("omp parallel num_threads(rd_nt_)") {                                   \
        size_t rd_me_ = (size_t)omp_get_thread_num(), rd_T_ = (size_t)omp_get_num_threads(); \
        size_t rd_b_ = (rd_n_ + 15) / 16;                                             \
        size_t rd_lo_ = rd_b_ * rd_me_ / rd_T_ * 16, rd_hi_ = rd_b_ * (rd_me_ + 1) / rd_T_ * 16; \
        if (rd_hi_ > rd_n_) rd_hi_ = rd_n_;                                           \
        _Pragma("omp simd") for (size_t i = rd_lo_; i < rd_hi_; i++) __VA_ARGS__      \
        if (rd_me_ == 0) rd_own_ = rd_clock_now_ns();                                          \
      }                                                                               \
      team_done(rd_t0_, rd_own_);                                               \
    } else {                                                                          \
      _Pragma("omp simd") for (size_t i = 0; i < rd_n_; i++) __VA_ARGS__              \
    }                                                                                 \
  } while (0)

/* ------------------------------------------------------------------ */
/* GEMM                                                                */
/* ------------------------------------------------------------------ */

/* Blocking. KC x NC floats of packed B (256 KiB) sit in the 1 MiB L2 next
 * to MC x KC of packed A (144 KiB); one B panel (KC x NR, 32 KiB at NR 32)
 * stays in L1 while the MC / MR A panels stream past it. MC is a multiple
 * of every MR and NC of every NR. */
#define GEMM_KC 256u
#define GEMM_MC 144u
#define GEMM_NC 256u
#define GEMM_MAX_MR 12u
#define GEMM_MAX_NR 32u
/* Products below this many multiply-adds stay on the calling thread: a
 * parallel region costs a few microseconds, about what 2^18 MACs take. */
#define GEMM_MT_MIN (1u << 18)

/* C = A B (or C += A B), C m x n, inner dimension k, with an epilogue:
 *   C = [C +] A B [+ 1 bias^T];  then relu, or C *= act'(gate)
 * A[i][p] = a[i rsa + p csa], B[p][j] = b[p rsb + j csb], C[i][j] = c[i rsc + j csc],
 * gate[i][j] = gate[i rsg + j] (the layout of a row-major C). */
struct gemm {
  size_t m, n, k;
  const float *a;
  ptrdiff_t rsa, csa;
  const float *b;
  ptrdiff_t rsb, csb;
  float *c;
  ptrdiff_t rsc, csc;
  int accumulate;
  const float *bias; /* n floats, or NULL */
  int relu;
  const float *gate; /* NULL: none */
  ptrdiff_t rsg;
  rd_nn_act_t gate_act;
  int may_transpose; /* pure product: may compute C^T = B^T A^T if that pads less */
  const float *bpre; /* B packed as gemm_serial packs it (nn.h: prepacked weights), or NULL */
};

/* What the micro-kernel does with one MR x NR tile after its KC updates.
 * first: the tile's first K block (C is read only if accumulating; bias is
 * added); last: the last K block (relu / gate apply); rows: the tile's
 * rows that exist (<= MR): C and gate rows past them are neither read nor
 * written. */
typedef struct {
  int first, last, accumulate, relu;
  const float *bias; /* the tile's NR columns of bias, or NULL */
  const float *gate; /* the tile's gate, row stride rsg, or NULL */
  ptrdiff_t rsg;
  rd_nn_act_t gate_act;
  int rows;
} tile_epi_t;

/* A[r][p] = a[r ars + p acs], B[p][j] = b[p brs + j]: kern takes ars = 1
 * (a packed panel, acs = MR, or an A whose columns are contiguous),
 * kern_rows acs = 1 (an A whose rows are contiguous, read in place). */
typedef void (*kern_fn)(size_t kc, const float *a, ptrdiff_t ars, ptrdiff_t acs, const float *b,
                        ptrdiff_t brs, float *c, ptrdiff_t rsc, const tile_epi_t *e);

typedef void (*adam_fn)(size_t n, float *p, const float *g, float *m, float *v,
                        const rd_adam_coef_t *c);
/* db[j] = sum over i < n of dz[i cols + j], for j0 <= j < j1. */
typedef void (*colsum_fn)(size_t n, size_t cols, const float *dz, size_t j0, size_t j1,
                          float *db);
typedef struct gemm gemm_t;
typedef void (*narrow_fn)(const gemm_t *g, const float *bp);
typedef void (*dot_fn)(const gemm_t *g);
/* dst[q ds + r] = src[r ss + q] for q < 16 and r < rows (0 for rows <= r <
 * 16), writing the first cols floats of each dst row: a 16 x 16 transpose. */
typedef void (*tr16_fn)(const float *src, ptrdiff_t ss, size_t rows, float *dst, ptrdiff_t ds,
                        size_t cols);

struct rd_mlp_kernel {
  const char *name;
  size_t mr, nr;
  kern_fn kern, kern_rows;
  /* Row tiles short of mr rows (the last of a product whose M is not a
   * multiple of mr: 256 = 21 x 12 + 4) run the kernel of part_mr[q] rows,
   * the first that holds them (ascending; 0: none), on the same panels:
   * the full kernel spent its products on the panel's zero rows (a third
   * of a tile at M = 64 or 256 with mr 12). */
  size_t part_mr[2];
  kern_fn part[2], part_rows[2]; /* as kern, kern_rows */
  narrow_fn narrow; /* products of at most 16 columns, or NULL */
  dot_fn dot;       /* forward products of at most 4 columns, or NULL */
  adam_fn adam;
  tr16_fn tr16; /* vector transposes for packing, or NULL (scalar copies) */
  colsum_fn colsum;
};

#if defined(__x86_64__)
#include <immintrin.h>
#define RD_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif

typedef float rd_v4 __attribute__((vector_size(16)));
typedef float rd_v8 __attribute__((vector_size(32)));
typedef float rd_v16 __attribute__((vector_size(64)));

/* The micro-kernel: an MR x (2 W) tile of C in 2 MR vectors of W floats.
 * A: MR values per p, at a + r ars + p acs (AIDX; ars = 1 for kern_, acs =
 * 1 for kern_rows_: one of them a constant, so the addresses stay cheap);
 * B: 2 W floats per p at b + p brs (a packed panel, or B's rows in place).
 * Packing A or B only copies values, and each entry of C adds the same
 * products in the same order either way, so the result does not depend on
 * what was packed. C rows are written whole, up to the tile's e->rows (the
 * caller hands tiles short of columns in as a padded copy). The tile's
 * lines of C are prefetched for writing before the products, so that
 * their misses overlap the KC steps instead of stalling the stores at the
 * end (a batch's activations and gradients outgrow the L2 between uses).
 * Unaligned accesses go through memcpy, which compiles to unaligned
 * vector moves. */
#define RD_GEMM_KERNEL(NAME, ATTR, V, W, MR, AIDX)                                         \
  ATTR static void NAME(size_t kc, const float *restrict a, ptrdiff_t ars, ptrdiff_t acs,   \
                        const float *restrict bp, ptrdiff_t brs, float *restrict c,          \
                        ptrdiff_t rsc, const tile_epi_t *e) {                               \
    (void)ars, (void)acs;                                                                   \
    V lo[MR], hi[MR];                                                                       \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                                \
      lo[r] = hi[r] = (V){0};                                                               \
      if (r < e->rows) {                                                                    \
        __builtin_prefetch(c + r * rsc, 1, 3);                                              \
        __builtin_prefetch(c + r * rsc + 2 * (W) - 1, 1, 3);                                \
      }                                                                                     \
    }                                                                                       \
    for (size_t p = 0; p < kc; p++) {                                                       \
      V b0, b1;                                                                             \
      memcpy(&b0, bp + (ptrdiff_t)p * brs, sizeof(V));                                      \
      memcpy(&b1, bp + (ptrdiff_t)p * brs + (W), sizeof(V));                                \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                              \
        const float av = a[AIDX];                                                           \
        lo[r] += av * b0;                                                                   \
        hi[r] += av * b1;                                                                   \
      }                                                                                     \
    }                                                                                       \
    const V zero = {0};                                                                     \
    V bias0 = zero, bias1 = zero;                                                           \
    const int add_bias = e->first && e->bias != NULL;                                       \
    const int read_c = !e->first || e->accumulate;                                          \
    if (add_bias) {                                                                         \
      memcpy(&bias0, e->bias, sizeof(V));                                                   \
      memcpy(&bias1, e->bias + (W), sizeof(V));                                             \
    }                                                                                       \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                                \
      if (r >= e->rows) break;                                                              \
      float *cr = c + r * rsc;                                                              \
      V v0 = lo[r], v1 = hi[r], t0, t1;                                                     \
      if (read_c) {                                                                         \
        memcpy(&t0, cr, sizeof(V));                                                         \
        memcpy(&t1, cr + (W), sizeof(V));                                                   \
        v0 = t0 + v0;                                                                       \
        v1 = t1 + v1;                                                                       \
      }                                                                                     \
      if (add_bias) {                                                                       \
        v0 = v0 + bias0;                                                                    \
        v1 = v1 + bias1;                                                                    \
      }                                                                                     \
      if (e->last && e->relu) {                                                             \
        v0 = (V)((__typeof__(v0 > zero))v0 & (v0 > zero));                                  \
        v1 = (V)((__typeof__(v1 > zero))v1 & (v1 > zero));                                  \
      }                                                                                     \
      if (e->last && e->gate != NULL) {                                                     \
        memcpy(&t0, e->gate + r * e->rsg, sizeof(V));                                       \
        memcpy(&t1, e->gate + r * e->rsg + (W), sizeof(V));                                 \
        if (e->gate_act == RD_NN_RELU) {                                                    \
          v0 = (V)((__typeof__(t0 > zero))v0 & (t0 > zero));                                \
          v1 = (V)((__typeof__(t1 > zero))v1 & (t1 > zero));                                \
        } else if (e->gate_act == RD_NN_TANH) {                                             \
          const V d0 = 1.0f - t0 * t0, d1 = 1.0f - t1 * t1;                                 \
          v0 = v0 * d0;                                                                     \
          v1 = v1 * d1;                                                                     \
        }                                                                                   \
      }                                                                                     \
      memcpy(cr, &v0, sizeof(V));                                                           \
      memcpy(cr + (W), &v1, sizeof(V));                                                     \
    }                                                                                       \
  }

/* Register budgets: AVX-512 has 32 vector registers: 24 accumulators
 * (12 x 32), 2 B vectors and the broadcast; AVX2 and SSE have 16: 12
 * accumulators (6 x 16, 6 x 8). */
#define A_PMAJOR (ptrdiff_t)p * acs + r
#define A_ROWS r * ars + (ptrdiff_t)p
RD_GEMM_KERNEL(kern_generic, , rd_v4, 4, 6, A_PMAJOR)
RD_GEMM_KERNEL(kern_rows_generic, , rd_v4, 4, 6, A_ROWS)
RD_GEMM_KERNEL(kern_generic_2, , rd_v4, 4, 2, A_PMAJOR)
RD_GEMM_KERNEL(kern_generic_4, , rd_v4, 4, 4, A_PMAJOR)
RD_GEMM_KERNEL(kern_rows_generic_2, , rd_v4, 4, 2, A_ROWS)
RD_GEMM_KERNEL(kern_rows_generic_4, , rd_v4, 4, 4, A_ROWS)
#if defined(__x86_64__)
RD_GEMM_KERNEL(kern_avx2, __attribute__((target("avx2,fma"))), rd_v8, 8, 6, A_PMAJOR)
RD_GEMM_KERNEL(kern_rows_avx2, __attribute__((target("avx2,fma"))), rd_v8, 8, 6, A_ROWS)
RD_GEMM_KERNEL(kern_avx2_2, __attribute__((target("avx2,fma"))), rd_v8, 8, 2, A_PMAJOR)
RD_GEMM_KERNEL(kern_avx2_4, __attribute__((target("avx2,fma"))), rd_v8, 8, 4, A_PMAJOR)
RD_GEMM_KERNEL(kern_rows_avx2_2, __attribute__((target("avx2,fma"))), rd_v8, 8, 2, A_ROWS)
RD_GEMM_KERNEL(kern_rows_avx2_4, __attribute__((target("avx2,fma"))), rd_v8, 8, 4, A_ROWS)
RD_GEMM_KERNEL(kern_avx512, RD_AVX512, rd_v16, 16, 12, A_PMAJOR)
RD_GEMM_KERNEL(kern_rows_avx512, RD_AVX512, rd_v16, 16, 12, A_ROWS)
RD_GEMM_KERNEL(kern_avx512_4, RD_AVX512, rd_v16, 16, 4, A_PMAJOR)
RD_GEMM_KERNEL(kern_avx512_8, RD_AVX512, rd_v16, 16, 8, A_PMAJOR)
RD_GEMM_KERNEL(kern_rows_avx512_4, RD_AVX512, rd_v16, 16, 4, A_ROWS)
RD_GEMM_KERNEL(kern_rows_avx512_8, RD_AVX512, rd_v16, 16, 8, A_ROWS)
#endif
#undef A_PMAJOR
#undef A_ROWS

/* Column sums (a layer's bias gradient): 4 W columns at a time in
 * registers, each column summed over the rows in order from 0, as the
 * loop it replaced did (a memory add per row and vector: every row stored
 * and reloaded the sums, most of a CartPole backward pass's own time). */
#define RD_COLSUM_KERNEL(NAME, ATTR, V, W)                                                 \
  ATTR static void NAME(size_t n, size_t cols, const float *dz, size_t j0, size_t j1,      \
                        float *db) {                                                       \
    size_t j = j0;                                                                         \
    for (; j + 4 * (W) <= j1; j += 4 * (W)) {                                              \
      V s[4] = {{0}, {0}, {0}, {0}};                                                       \
      for (size_t i = 0; i < n; i++) {                                                     \
        const float *row = dz + i * cols + j;                                              \
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {                              \
          V x;                                                                             \
          memcpy(&x, row + q * (W), sizeof x);                                             \
          s[q] += x;                                                                       \
        }                                                                                  \
      }                                                                                    \
      memcpy(db + j, s, sizeof s);                                                         \
    }                                                                                      \
    for (; j + (W) <= j1; j += (W)) {                                                      \
      V s0 = {0};                                                                          \
      for (size_t i = 0; i < n; i++) {                                                     \
        V x;                                                                               \
        memcpy(&x, dz + i * cols + j, sizeof x);                                           \
        s0 += x;                                                                           \
      }                                                                                    \
      memcpy(db + j, &s0, sizeof s0);                                                      \
    }                                                                                      \
    for (; j < j1; j++) {                                                                  \
      float s0 = 0;                                                                        \
      for (size_t i = 0; i < n; i++) s0 += dz[i * cols + j];                               \
      db[j] = s0;                                                                          \
    }                                                                                      \
  }
RD_COLSUM_KERNEL(colsum_generic, , rd_v4, 4)
#if defined(__x86_64__)
RD_COLSUM_KERNEL(colsum_avx2, __attribute__((target("avx2,fma"))), rd_v8, 8)
RD_COLSUM_KERNEL(colsum_avx512, RD_AVX512, rd_v16, 16)
#endif

/* Adam on n parameters (rd_mlp_adam_step has the formula). Whole vectors in
 * place; the last partial vector on a zero-padded copy through the same
 * code, so every parameter gets the same instructions wherever a thread's
 * range starts. Written per instruction set because GCC will not vectorize
 * sqrtf while it may set errno. */
/* x with every lane below FLT_MIN in magnitude (a denormal) set to +0: a
 * compare's all-ones lanes kept by a bitwise and (vector casts of equal
 * size reinterpret the bits). */
#define FLUSH(x) ((__typeof__(x))((__typeof__((x) < (x)))(x) & (((x) >= FLT_MIN) | ((x) <= -FLT_MIN))))

#define RD_ADAM_KERNEL(ISA, ATTR, V, W, SQRT)                                               \
  ATTR static void adam_##ISA(size_t n, float *p, const float *g, float *m, float *v,        \
                              const rd_adam_coef_t *c) {                                       \
    float tp[W], tg[W], tm[W], tv[W];                                                       \
    for (size_t i = 0; i < n; i += (W)) {                                                   \
      const int whole = i + (W) <= n;                                                       \
      float *pp = p + i, *mp = m + i, *vp = v + i;                                          \
      const float *gp = g + i;                                                              \
      if (!whole) {                                                                         \
        memset(tp, 0, sizeof tp), memset(tg, 0, sizeof tg);                                 \
        memset(tm, 0, sizeof tm), memset(tv, 0, sizeof tv);                                 \
        memcpy(tp, pp, (n - i) * sizeof(float)), memcpy(tg, gp, (n - i) * sizeof(float));   \
        memcpy(tm, mp, (n - i) * sizeof(float)), memcpy(tv, vp, (n - i) * sizeof(float));   \
        pp = tp, gp = tg, mp = tm, vp = tv;                                                 \
      }                                                                                     \
      V gi, mi, vi, pi;                                                                     \
      memcpy(&gi, gp, sizeof gi), memcpy(&mi, mp, sizeof mi);                               \
      memcpy(&vi, vp, sizeof vi), memcpy(&pi, pp, sizeof pi);                               \
      mi = c->b1 * mi + c->g1 * gi;                                                         \
      vi = c->b2 * vi + c->g2 * gi * gi;                                                    \
      pi = pi - c->step * mi / (SQRT(vi) * c->inv_sqrt_bc2 + c->eps);                       \
      mi = FLUSH(mi), vi = FLUSH(vi); /* nn.h: no denormal moments */                       \
      memcpy(mp, &mi, sizeof mi), memcpy(vp, &vi, sizeof vi), memcpy(pp, &pi, sizeof pi);   \
      if (!whole) {                                                                         \
        memcpy(p + i, tp, (n - i) * sizeof(float)), memcpy(m + i, tm, (n - i) * sizeof(float)); \
        memcpy(v + i, tv, (n - i) * sizeof(float));                                         \
      }                                                                                     \
    }                                                                                       \
  }

#if defined(__x86_64__)
RD_ADAM_KERNEL(generic, , rd_v4, 4, _mm_sqrt_ps)
RD_ADAM_KERNEL(avx2, __attribute__((target("avx2,fma"))), rd_v8, 8, _mm256_sqrt_ps)
RD_ADAM_KERNEL(avx512, RD_AVX512, rd_v16, 16, _mm512_sqrt_ps)
#else
static void adam_generic(size_t n, float *p, const float *g, float *m, float *v,
                         const rd_adam_coef_t *c) {
  for (size_t i = 0; i < n; i++) {
    float mi = c->b1 * m[i] + c->g1 * g[i], vi = c->b2 * v[i] + c->g2 * g[i] * g[i];
    p[i] -= c->step * mi / (sqrtf(vi) * c->inv_sqrt_bc2 + c->eps);
    m[i] = fabsf(mi) < FLT_MIN ? 0.0f : mi; /* nn.h: no denormal moments */
    v[i] = fabsf(vi) < FLT_MIN ? 0.0f : vi;
  }
}
#endif

#if defined(__x86_64__)
/* Products with at most 16 columns (output layers of 1-3 units, CartPole's
 * 8-unit layers, the critic's input gradient): one masked 16-lane vector per
 * row of C, 8 rows at a time, A read in place (no packing: K is small or
 * the rows are contiguous), B read in place when its rows are contiguous,
 * else from bp (B packed to 16 columns). The general kernel would compute
 * 32 columns for 1 to 16 and take its padded-copy path on every tile.
 * Rows past m re-read row m - 1 and are not stored. Each element is one
 * sequential FMA sum over p, whatever rows a thread gets. */
RD_AVX512 static void narrow_avx512(const gemm_t *g, const float *bp) {
  const __mmask16 mask = (__mmask16)((1u << g->n) - 1);
  const float *b = bp != NULL ? bp : g->b;
  const ptrdiff_t rsb = bp != NULL ? 16 : g->rsb;
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  const __m512 bias = g->bias != NULL ? _mm512_maskz_loadu_ps(mask, g->bias) : zero;
  for (size_t i0 = 0; i0 < g->m; i0 += 8) {
    const float *ar[8];
    for (size_t r = 0; r < 8; r++)
      ar[r] = g->a + (ptrdiff_t)(i0 + r < g->m ? i0 + r : g->m - 1) * g->rsa;
    __m512 acc[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) acc[r] = zero;
    for (size_t p = 0; p < g->k; p++) {
      const __m512 bv = _mm512_maskz_loadu_ps(mask, b + (ptrdiff_t)p * rsb);
      const ptrdiff_t ap = (ptrdiff_t)p * g->csa;
#pragma GCC unroll 8
      for (int r = 0; r < 8; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ar[r][ap]), bv, acc[r]);
    }
    size_t rows = g->m - i0 < 8 ? g->m - i0 : 8;
    for (size_t r = 0; r < rows; r++) {
      float *c = g->c + (ptrdiff_t)(i0 + r) * g->rsc;
      __m512 v = acc[r];
      if (g->accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, c), v);
      if (g->bias != NULL) v = _mm512_add_ps(v, bias);
      if (g->relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);
      if (g->gate != NULL) {
        const __m512 gv = _mm512_maskz_loadu_ps(mask, g->gate + (ptrdiff_t)(i0 + r) * g->rsg);
        if (g->gate_act == RD_NN_RELU)
          v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(gv, zero, _CMP_GT_OQ), v);
        else if (g->gate_act == RD_NN_TANH)
          v = _mm512_mul_ps(v, _mm512_fnmadd_ps(gv, gv, one));
      }
      _mm512_mask_storeu_ps(c, mask, v);
    }
  }
}
#endif

#if defined(__x86_64__)
/* The horizontal sums of the 4 N vectors acc[r][j] (r < 4, j < N), lane
 * r N + j of the result, the other lanes 0. Each sum is added in the order
 * of _mm512_reduce_add_ps (the upper 256 bits onto the lower, then the
 * upper 128 of that, then lanes i + 2, then lane 1 onto lane 0; the
 * operand order of each add kept too), so its bits are that call's,
 * but the 4 N reductions share their shuffles: pairs of vectors are
 * halved together, then fours, then the last two steps run on four
 * vectors' lanes at once, about a quarter of the instructions. */
RD_AVX512 static inline __attribute__((always_inline)) __m512 dot_sums(const __m512 acc[4][4],
                                                                      const size_t N) {
  const size_t M = 4 * N; /* vectors, in lane order k = r N + j */
  __m512 v[16], s[8], t[4];
#pragma GCC unroll 16
  for (size_t k = 0; k < M; k++) v[k] = acc[k / N][k % N];
  /* s[i]: the 256-bit halves of v[2i] and v[2i+1] added, in its 128-bit
   * quarters (lo, hi) of v[2i], then of v[2i+1]. */
#pragma GCC unroll 8
  for (size_t i = 0; i < M / 2; i++)
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44));
  /* t[m]: quarter q holds the 128-bit halves of s's v[4m + q] added. */
#pragma GCC unroll 4
  for (size_t m = 0; m < M / 4; m++)
    t[m] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * m], s[2 * m + 1], 0xDD),
                         _mm512_shuffle_f32x4(s[2 * m], s[2 * m + 1], 0x88));
#pragma GCC unroll 4
  for (size_t m = M / 4; m < 4; m++) t[m] = _mm512_setzero_ps();
  /* Lanes i + 2 onto lanes i (i < 2), for t[0] and t[1] in u01 and t[2]
   * and t[3] in u23: [t0 0, t0 1, t1 0, t1 1] per quarter. */
  const __m512 u01 = _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u23 = N > 2 ? _mm512_add_ps(_mm512_shuffle_ps(t[2], t[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                           _mm512_shuffle_ps(t[2], t[3], _MM_SHUFFLE(3, 2, 3, 2)))
                           : _mm512_setzero_ps();
  /* Lane 1 onto lane 0: lane 4 q + m of r is the sum of v[4 m + q]. */
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, r);
}

/* Output layers of 1 to 4 units (Q values, the critic's Q, the actor's
 * actions): C[i][j] = sum_p A[i][p] B[p][j] with A's rows and B's columns
 * contiguous (a_l and the rows of W) as dot products: 16 lanes along p, 4
 * rows at a time, then one horizontal sum per element (a fixed order).
 * The narrow kernel would spend a 16-lane FMA per multiply-add here. Rows
 * past m re-read row m - 1 and are not stored. N, the number of columns,
 * is a constant of each instantiation (dot_avx512 picks one): with a
 * runtime N the epilogue indexed the accumulators by runtime values, so
 * GCC kept all 16 in memory and every multiply-add loaded and stored one. */
RD_AVX512 static inline __attribute__((always_inline)) void dot_body(const gemm_t *g,
                                                                    const size_t N) {
  const size_t K = g->k, K16 = K / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);
  /* C is row-major with N columns (dot_fits): 4 rows are 4 N consecutive
   * floats, one masked vector; bias[j] sits in lane r N + j. */
  const __m512 zero = _mm512_setzero_ps();
  __m512 bias = zero;
  if (g->bias != NULL) {
    const __m512i col = _mm512_set_epi32(15 % N, 14 % N, 13 % N, 12 % N, 11 % N, 10 % N, 9 % N,
                                         8 % N, 7 % N, 6 % N, 5 % N, 4 % N, 3 % N, 2 % N, 1 % N, 0);
    bias = _mm512_permutexvar_ps(col, _mm512_maskz_loadu_ps((__mmask16)((1u << N) - 1), g->bias));
  }
  for (size_t i0 = 0; i0 < g->m; i0 += 4) {
    const float *ar[4];
    for (size_t r = 0; r < 4; r++) ar[r] = g->a + (ptrdiff_t)(i0 + r < g->m ? i0 + r : g->m - 1) * g->rsa;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
    for (size_t p = 0; p < K; p += 16) {
      const __mmask16 mk = p < K16 ? (__mmask16)0xffff : tail;
      __m512 bv[4];
#pragma GCC unroll 4
      for (size_t j = 0; j < 4; j++)
        bv[j] = j < N ? _mm512_maskz_loadu_ps(mk, g->b + (ptrdiff_t)j * g->csb + (ptrdiff_t)p)
                      : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        const __m512 av = _mm512_maskz_loadu_ps(mk, ar[r] + p);
#pragma GCC unroll 4
        for (size_t j = 0; j < 4; j++)
          if (j < N) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
      }
    }
    const size_t rows = g->m - i0 < 4 ? g->m - i0 : 4;
    /* Lane r N + j: row r's sum of column j. */
    __m512 v = dot_sums(acc, N);
    const __mmask16 keep = (__mmask16)((1u << (rows * N)) - 1);
    float *c = g->c + (ptrdiff_t)i0 * (ptrdiff_t)N;
    if (g->accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(keep, c), v);
    if (g->bias != NULL) v = _mm512_add_ps(v, bias);
    if (g->relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);
    _mm512_mask_storeu_ps(c, keep, v);
  }
}

RD_AVX512 static void dot_avx512(const gemm_t *g) {
  switch (g->n) {
  case 1: dot_body(g, 1); break;
  case 2: dot_body(g, 2); break;
  case 3: dot_body(g, 3); break;
  default: dot_body(g, 4); break;
  }
}

#define RD_AVX2 __attribute__((target("avx2,fma")))

/* The AVX2 dot-product kernel: dot_avx512's scheme with 8 lanes along the
 * inner dimension and 4 rows a group for N <= 2, 2 rows for N = 3, 4 (the
 * accumulators, B's columns and A's vector fit the 16 registers). The
 * general kernel spent a 16-column tile with its padded copy on each 6
 * rows of a 1-4 unit output layer. Lanes are added upper 4 onto lower,
 * lanes 2, 3 onto 0, 1, lane 1 onto 0 (the AVX-512 order's last three
 * steps), the R N sums of a group with shared shuffles. */
RD_AVX2 static inline __attribute__((always_inline)) __m256 dot_sums8(const __m256 acc[4][4],
                                                                     const size_t N,
                                                                     const size_t R) {
  const size_t M = R * N; /* 4, 6 or 8 vectors, in lane order k = r N + j */
  __m256 v[8], s[4];
#pragma GCC unroll 8
  for (size_t k = 0; k < M; k++) v[k] = acc[k / N][k % N];
  /* s[i]: the 128-bit halves of v[2i] (low lane) and v[2i+1] (high) added. */
#pragma GCC unroll 4
  for (size_t i = 0; i < M / 2; i++)
    s[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20));
#pragma GCC unroll 4
  for (size_t i = M / 2; i < 4; i++) s[i] = _mm256_setzero_ps();
  /* Lanes 2, 3 onto 0, 1: u01 holds v0, v2 (low lane), v1, v3 (high). */
  const __m256 u01 = _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 u23 = M > 4 ? _mm256_add_ps(_mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                           _mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2)))
                           : _mm256_setzero_ps();
  /* Lane 1 onto 0: [v0, v2, v4, v6 | v1, v3, v5, v7]. */
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

RD_AVX2 static inline __attribute__((always_inline)) void dot_body8(const gemm_t *g,
                                                                   const size_t N) {
  const size_t R = N <= 2 ? 4 : 2;
  const size_t K = g->k, K8 = K / 8 * 8;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(K - K8)), lane);
  const __m256 zero = _mm256_setzero_ps();
  __m256 bias = zero;
  if (g->bias != NULL) {
    float pat[8];
    for (size_t k = 0; k < 8; k++) pat[k] = g->bias[k % N];
    bias = _mm256_loadu_ps(pat);
  }
  for (size_t i0 = 0; i0 < g->m; i0 += R) {
    const float *ar[4];
    for (size_t r = 0; r < R; r++) ar[r] = g->a + (ptrdiff_t)(i0 + r < g->m ? i0 + r : g->m - 1) * g->rsa;
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (size_t r = 0; r < 4; r++)
#pragma GCC unroll 4
      for (size_t j = 0; j < 4; j++) acc[r][j] = zero;
    for (size_t p = 0; p < K; p += 8) {
      const int full = p < K8;
      __m256 bv[4];
#pragma GCC unroll 4
      for (size_t j = 0; j < 4; j++) {
        const float *bj = g->b + (ptrdiff_t)j * g->csb + (ptrdiff_t)p;
        bv[j] = j >= N ? zero : full ? _mm256_loadu_ps(bj) : _mm256_maskload_ps(bj, tail);
      }
#pragma GCC unroll 4
      for (size_t r = 0; r < 4; r++) {
        if (r >= R) break;
        const __m256 av = full ? _mm256_loadu_ps(ar[r] + p) : _mm256_maskload_ps(ar[r] + p, tail);
#pragma GCC unroll 4
        for (size_t j = 0; j < 4; j++)
          if (j < N) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
      }
    }
    const size_t rows = g->m - i0 < R ? g->m - i0 : R;
    __m256 v = dot_sums8(acc, N, R); /* lane r N + j: row r, column j */
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(rows * N)), lane);
    float *c = g->c + (ptrdiff_t)i0 * (ptrdiff_t)N;
    if (g->accumulate) v = _mm256_add_ps(_mm256_maskload_ps(c, keep), v);
    if (g->bias != NULL) v = _mm256_add_ps(v, bias);
    if (g->relu) v = _mm256_and_ps(v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
    _mm256_maskstore_ps(c, keep, v);
  }
}

RD_AVX2 static void dot_avx2(const gemm_t *g) {
  switch (g->n) {
  case 1: dot_body8(g, 1); break;
  case 2: dot_body8(g, 2); break;
  case 3: dot_body8(g, 3); break;
  default: dot_body8(g, 4); break;
  }
}

/* 8 floats at p: plainly if full, else the lanes of mask (the others 0). */
RD_AVX2 static inline __attribute__((always_inline)) __m256 load8(const float *p, __m256i mask,
                                                                 int full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

/* narrow_avx512's contract on AVX2: NV masked 8-lane vectors per row of C
 * (NV = 1 for at most 8 columns, 2 for at most 16), 12 / NV rows at a
 * time. The general kernel ran every tile of such a product (CartPole's
 * 8-unit layers, an output layer's weight gradient) on a zero-padded copy
 * of 16 columns. A partial vector is loaded and stored through its mask
 * (so an in-place B row's load stays inside B), a whole one plainly. */
RD_AVX2 static inline __attribute__((always_inline)) void narrow_body8(const gemm_t *g,
                                                                      const float *bp,
                                                                      const int NV) {
  const int R = 12 / NV;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[2];
  mask[0] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)g->n), lane);
  mask[1] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)g->n - 8), lane);
  const int full[2] = {g->n >= 8, g->n >= 16}; /* whole vectors take plain moves */
  const float *b = bp != NULL ? bp : g->b;
  const ptrdiff_t rsb = bp != NULL ? 16 : g->rsb;
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  __m256 bias[2] = {zero, zero};
  if (g->bias != NULL)
    for (int v = 0; v < NV; v++) bias[v] = load8(g->bias + 8 * v, mask[v], full[v]);
  for (size_t i0 = 0; i0 < g->m; i0 += (size_t)R) {
    const float *ar[12];
    for (int r = 0; r < R; r++)
      ar[r] = g->a + (ptrdiff_t)(i0 + (size_t)r < g->m ? i0 + (size_t)r : g->m - 1) * g->rsa;
    __m256 acc[12][2];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = zero;
    for (size_t p = 0; p < g->k; p++) {
      __m256 bv[2];
#pragma GCC unroll 2
      for (int v = 0; v < NV; v++) bv[v] = load8(b + (ptrdiff_t)p * rsb + 8 * v, mask[v], full[v]);
      const ptrdiff_t ap = (ptrdiff_t)p * g->csa;
#pragma GCC unroll 12
      for (int r = 0; r < R; r++) {
        const __m256 av = _mm256_broadcast_ss(ar[r] + ap);
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
    const size_t rows = g->m - i0 < (size_t)R ? g->m - i0 : (size_t)R;
    for (size_t r = 0; r < rows; r++) {
      float *c = g->c + (ptrdiff_t)(i0 + r) * g->rsc;
      const float *gr = g->gate != NULL ? g->gate + (ptrdiff_t)(i0 + r) * g->rsg : NULL;
#pragma GCC unroll 2
      for (int v = 0; v < NV; v++) {
        __m256 x = acc[r][v];
        if (g->accumulate) x = _mm256_add_ps(load8(c + 8 * v, mask[v], full[v]), x);
        if (g->bias != NULL) x = _mm256_add_ps(x, bias[v]);
        if (g->relu) x = _mm256_and_ps(x, _mm256_cmp_ps(x, zero, _CMP_GT_OQ));
        if (gr != NULL) {
          const __m256 gv = load8(gr + 8 * v, mask[v], full[v]);
          if (g->gate_act == RD_NN_RELU)
            x = _mm256_and_ps(x, _mm256_cmp_ps(gv, zero, _CMP_GT_OQ));
          else if (g->gate_act == RD_NN_TANH)
            x = _mm256_mul_ps(x, _mm256_fnmadd_ps(gv, gv, one));
        }
        if (full[v])
          _mm256_storeu_ps(c + 8 * v, x);
        else
          _mm256_maskstore_ps(c + 8 * v, mask[v], x);
      }
    }
  }
}

RD_AVX2 static void narrow_avx2(const gemm_t *g, const float *bp) {
  if (g->n <= 8)
    narrow_body8(g, bp, 1);
  else
    narrow_body8(g, bp, 2);
}

/* tr16_avx512's contract on AVX2, as four 8 x 8 transposes (the usual
 * unpack, shuffle, then 128-bit swap). Packing a forward pass's W^T one
 * float at a time was a tenth of a Hopper step on an AVX2 machine: the
 * scalar stores, 64 bytes apart, were its cost. */
RD_AVX2 static void tr16_avx2(const float *src, ptrdiff_t ss, size_t rows, float *dst,
                              ptrdiff_t ds, size_t cols) {
  for (size_t rb = 0; rb < 16 && rb < cols; rb += 8) {
    const size_t w = cols - rb < 8 ? cols - rb : 8; /* floats stored per dst row */
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (size_t qb = 0; qb < 16; qb += 8) {
      __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++)
        r[i] = rb + (size_t)i < rows ? _mm256_loadu_ps(src + (ptrdiff_t)(rb + (size_t)i) * ss +
                                                       (ptrdiff_t)qb)
                                     : _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
      }
      /* u[c] (c < 4) holds columns c and c + 4 of rows 0-3, u[c + 4] of rows 4-7. */
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x20);
        r[c + 4] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x31);
      }
#pragma GCC unroll 8
      for (int q = 0; q < 8; q++) {
        float *d = dst + (ptrdiff_t)(qb + (size_t)q) * ds + (ptrdiff_t)rb;
        if (w == 8)
          _mm256_storeu_ps(d, r[q]);
        else
          _mm256_maskstore_ps(d, keep, r[q]);
      }
    }
  }
}

/* Four rounds of two-source permutes: round b pairs rows i and i + b and
 * interleaves their b-element blocks; after b = 8, 4, 2, 1 row q holds
 * column q. */
RD_AVX512 static void tr16_avx512(const float *src, ptrdiff_t ss, size_t rows, float *dst,
                                  ptrdiff_t ds, size_t cols) {
  static const int32_t idx[4][2][16] = {
      {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
       {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}},
      {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
       {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
      {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
       {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
      {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
       {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}},
  };
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++)
    r[i] = (size_t)i < rows ? _mm512_loadu_ps(src + (ptrdiff_t)i * ss) : _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int s = 0; s < 4; s++) {
    const int b = 8 >> s;
    const __m512i lo = _mm512_loadu_si512(idx[s][0]), hi = _mm512_loadu_si512(idx[s][1]);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
      if (i & b) continue;
      const __m512 x = r[i], y = r[i + b];
      r[i] = _mm512_permutex2var_ps(x, lo, y);
      r[i + b] = _mm512_permutex2var_ps(x, hi, y);
    }
  }
  const __mmask16 mask = (__mmask16)((1u << cols) - 1);
#pragma GCC unroll 16
  for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(dst + (ptrdiff_t)q * ds, mask, r[q]);
}
#endif

static const rd_mlp_kernel_t kernels[] = {
    {"generic", 6, 8, kern_generic, kern_rows_generic, {2, 4}, {kern_generic_2, kern_generic_4},
     {kern_rows_generic_2, kern_rows_generic_4}, NULL, NULL, adam_generic, NULL, colsum_generic},
#if defined(__x86_64__)
    {"avx2", 6, 16, kern_avx2, kern_rows_avx2, {2, 4}, {kern_avx2_2, kern_avx2_4},
     {kern_rows_avx2_2, kern_rows_avx2_4}, narrow_avx2, dot_avx2, adam_avx2, tr16_avx2,
     colsum_avx2},
    {"avx512", 12, 32, kern_avx512, kern_rows_avx512, {4, 8}, {kern_avx512_4, kern_avx512_8},
     {kern_rows_avx512_4, kern_rows_avx512_8}, narrow_avx512, dot_avx512, adam_avx512, tr16_avx512,
     colsum_avx512},
#endif
};

/* The variant to run (cpu_isa.h), RD_NN_ISA forcing one. */
static const rd_mlp_kernel_t *pick_kernel(void) {
  return &kernels[rd_cpu_isa_pick(sizeof kernels / sizeof kernels[0], true, false, "RD_NN_ISA")];
}

#define RD_INLINE inline __attribute__((always_inline))

/* Pack mc x kc of A into MR-row panels: panel q holds, for each p, the MR
 * values A[q MR + r][p] (zero past mc). MR is a constant in each
 * instantiation, so the copies of MR values compile to vector moves. */
static RD_INLINE void pack_a_body(size_t mc, size_t kc, const size_t MR, const float *a,
                                  ptrdiff_t rs, ptrdiff_t cs, float *restrict out, tr16_fn tr) {
  for (size_t i0 = 0; i0 < mc; i0 += MR) {
    size_t rows = mc - i0 < MR ? mc - i0 : MR;
    float *dst = out + i0 * kc;
    if (rows == MR && cs == 1) { /* rows contiguous: a transpose of MR x kc */
      const float *src = a + (ptrdiff_t)i0 * rs;
      size_t p = 0;
      if (tr != NULL)
        for (; p + 16 <= kc; p += 16) tr(src + p, rs, MR, dst + p * MR, (ptrdiff_t)MR, MR);
      for (; p < kc; p++)
        for (size_t r = 0; r < MR; r++) dst[p * MR + r] = src[(ptrdiff_t)r * rs + (ptrdiff_t)p];
    } else if (rows == MR && rs == 1) { /* columns contiguous: MR values per p */
      for (size_t p = 0; p < kc; p++)
        memcpy(dst + p * MR, a + (ptrdiff_t)i0 + (ptrdiff_t)p * cs, MR * sizeof(float));
    } else {
      for (size_t p = 0; p < kc; p++) {
        for (size_t r = 0; r < rows; r++)
          dst[p * MR + r] = a[(ptrdiff_t)(i0 + r) * rs + (ptrdiff_t)p * cs];
        for (size_t r = rows; r < MR; r++) dst[p * MR + r] = 0.0f;
      }
    }
  }
}

/* Pack kc x nc of B into NR-column panels: panel q holds, for each p, the
 * NR values B[p][q NR + j] (zero past nc). */
static RD_INLINE void pack_b_body(size_t kc, size_t nc, const size_t NR, const float *b,
                                  ptrdiff_t rs, ptrdiff_t cs, float *restrict out, tr16_fn tr) {
  for (size_t j0 = 0; j0 < nc; j0 += NR) {
    size_t cols = nc - j0 < NR ? nc - j0 : NR;
    float *dst = out + j0 * kc;
    if (cols == NR && cs == 1) {
      for (size_t p = 0; p < kc; p++)
        memcpy(dst + p * NR, b + (ptrdiff_t)p * rs + (ptrdiff_t)j0, NR * sizeof(float));
    } else if (cols == NR && rs == 1 && NR % 16 == 0 && tr != NULL) {
      /* B^T row-major (W^T of the forward pass): 16 x 16 transposes */
      size_t p = 0;
      for (; p + 16 <= kc; p += 16)
        for (size_t jb = 0; jb < NR; jb += 16)
          tr(b + (ptrdiff_t)(j0 + jb) * cs + (ptrdiff_t)p, cs, 16, dst + p * NR + jb,
             (ptrdiff_t)NR, 16);
      for (; p < kc; p++)
        for (size_t j = 0; j < NR; j++)
          dst[p * NR + j] = b[(ptrdiff_t)(j0 + j) * cs + (ptrdiff_t)p];
    } else if (rs == 1) { /* B^T row-major (e.g. W^T): read each column contiguously */
      for (size_t j = 0; j < cols; j++) {
        const float *src = b + (ptrdiff_t)(j0 + j) * cs;
        for (size_t p = 0; p < kc; p++) dst[p * NR + j] = src[p];
      }
      for (size_t p = 0; p < kc; p++)
        for (size_t j = cols; j < NR; j++) dst[p * NR + j] = 0.0f;
    } else {
      for (size_t p = 0; p < kc; p++) {
        for (size_t j = 0; j < cols; j++)
          dst[p * NR + j] = b[(ptrdiff_t)p * rs + (ptrdiff_t)(j0 + j) * cs];
        for (size_t j = cols; j < NR; j++) dst[p * NR + j] = 0.0f;
      }
    }
  }
}

static void pack_a(size_t mc, size_t kc, size_t MR, const float *a, ptrdiff_t rs, ptrdiff_t cs,
                   float *restrict out, tr16_fn tr) {
  if (MR == 12)
    pack_a_body(mc, kc, 12, a, rs, cs, out, tr);
  else
    pack_a_body(mc, kc, 6, a, rs, cs, out, tr);
}

static void pack_b(size_t kc, size_t nc, size_t NR, const float *b, ptrdiff_t rs, ptrdiff_t cs,
                   float *restrict out, tr16_fn tr) {
  switch (NR) {
  case 32: pack_b_body(kc, nc, 32, b, rs, cs, out, tr); break;
  case 16: pack_b_body(kc, nc, 16, b, rs, cs, out, tr); break;
  default: pack_b_body(kc, nc, 8, b, rs, cs, out, tr); break;
  }
}

static size_t round_up(size_t x, size_t q) { return (x + q - 1) / q * q; }

/* Where a tile's A and B panels are: A[r][p] = a[r ars + p acs] (rows
 * true: kern_rows, acs = 1; else ars = 1), B[p][j] = b[p brs + j]. */
typedef struct {
  const float *a, *b;
  ptrdiff_t ars, acs, brs;
  int rows;
} panels_t;

/* The partial kernel a tile of mr < kr->mr rows runs: the first part_mr
 * that holds them, or -1 (the full kernel). */
static int part_of(const rd_mlp_kernel_t *kr, size_t mr) {
  for (int q = 0; q < 2; q++)
    if (mr <= kr->part_mr[q]) return q;
  return -1;
}

/* A tile short of columns (or of a C with csc != 1, gemm_tile below): the
 * kernel runs on a zero-padded copy. A function of its own so that every
 * other tile's call does not set up this one's stack of copies. */
static __attribute__((noinline)) void gemm_tile_padded(kern_fn kern, size_t MR, size_t NR,
                                                       const gemm_t *g, size_t kc,
                                                       const panels_t *pn, float *c, size_t mr,
                                                       size_t nr, const tile_epi_t *e0) {
  tile_epi_t e = *e0;
  e.rows = (int)MR;
  float tile[GEMM_MAX_MR * GEMM_MAX_NR] __attribute__((aligned(64)));
  float gt[GEMM_MAX_MR * GEMM_MAX_NR] __attribute__((aligned(64)));
  float bt[GEMM_MAX_NR] __attribute__((aligned(64)));
  if (!e.first || e.accumulate) { /* the kernel reads the tile only then */
    memset(tile, 0, MR * NR * sizeof(float));
    for (size_t r = 0; r < mr; r++)
      for (size_t j = 0; j < nr; j++)
        tile[r * NR + j] = c[(ptrdiff_t)r * g->rsc + (ptrdiff_t)j * g->csc];
  }
  if (e.bias != NULL) {
    memset(bt, 0, sizeof bt);
    memcpy(bt, e.bias, nr * sizeof(float));
    e.bias = bt;
  }
  if (e.gate != NULL && e.last) {
    memset(gt, 0, MR * NR * sizeof(float));
    for (size_t r = 0; r < mr; r++)
      memcpy(gt + r * NR, e.gate + (ptrdiff_t)r * g->rsg, nr * sizeof(float));
    e.gate = gt;
    e.rsg = (ptrdiff_t)NR;
  }
  kern(kc, pn->a, pn->ars, pn->acs, pn->b, pn->brs, tile, (ptrdiff_t)NR, &e);
  for (size_t r = 0; r < mr; r++)
    for (size_t j = 0; j < nr; j++)
      c[(ptrdiff_t)r * g->rsc + (ptrdiff_t)j * g->csc] = tile[r * NR + j];
}

/* One tile: tiles of a row-major C with all their columns go straight to
 * the kernel; tiles short of columns (and any tile of a C with csc != 1)
 * run the same kernel on a padded copy. A tile short of rows runs the
 * smallest kernel that holds them (part_mr). Every kernel adds each
 * element's products in the same order, so every element is computed by
 * the same instructions either way. */
static inline void gemm_tile(const rd_mlp_kernel_t *kr, const gemm_t *g, size_t kc,
                             const panels_t *pn, size_t i0, size_t j0, size_t mr, size_t nr,
                             int first, int last) {
  const size_t NR = kr->nr;
  size_t MR = kr->mr;
  kern_fn kern = pn->rows ? kr->kern_rows : kr->kern;
  /* A packed partial panel keeps kr->mr rows per p, zero past mr; one read
   * in place has exactly mr rows, a part_mr (gemm_serial). */
  const int q = mr < MR ? part_of(kr, mr) : -1;
  if (q >= 0) {
    MR = kr->part_mr[q];
    kern = pn->rows ? kr->part_rows[q] : kr->part[q];
  }
  float *c = g->c + (ptrdiff_t)i0 * g->rsc + (ptrdiff_t)j0 * g->csc;
  tile_epi_t e = {first,
                  last,
                  g->accumulate,
                  g->relu,
                  g->bias ? g->bias + j0 : NULL,
                  g->gate ? g->gate + (ptrdiff_t)i0 * g->rsg + (ptrdiff_t)j0 : NULL,
                  g->rsg,
                  g->gate_act,
                  (int)mr};
  /* A tile short of rows only writes the rows it has; one short of
   * columns runs on a padded copy. */
  if (nr == NR && g->csc == 1) {
    kern(kc, pn->a, pn->ars, pn->acs, pn->b, pn->brs, c, g->rsc, &e);
    return;
  }
  gemm_tile_padded(kern, MR, NR, g, kc, pn, c, mr, nr, &e);
}

/* A panel whose successive p lie `stride` floats apart is read in place
 * only while its kc steps span at most GEMM_IN_PLACE_BYTES: beyond that
 * (a 256-wide layer's W or X^T) its lines no longer stay in the L1 while
 * the kernel reuses the panel, and the packed copy is faster. */
#define GEMM_IN_PLACE_BYTES ((size_t)64 << 10)
static int in_place_span(size_t kc, ptrdiff_t stride) {
  return (size_t)(stride < 0 ? -stride : stride) * kc * sizeof(float) <= GEMM_IN_PLACE_BYTES;
}

/* The columns of a kc x nc block of B that the kernel reads in place:
 * whole NR panels of a B with contiguous rows, while compact; the rest is
 * packed. gemm_serial and prepack_b both decide by it, so a prepacked B
 * holds exactly the panels gemm_serial would pack. */
static size_t b_in_place(const gemm_t *g, size_t kc, size_t nc, size_t NR) {
  return g->csb == 1 && in_place_span(kc, g->rsb) ? nc / NR * NR : 0;
}

/* The blocked loops on one thread, with that thread's packing buffers
 * (size_packing; both 64-byte aligned). Packing is a copy that costs about
 * as much as the products of a small network's layers (a 64-wide layer
 * does 64 multiply-adds per packed value, some of them through a
 * transpose), so whole panels are read in place where the kernel can:
 * A with contiguous rows (X in Y = X W, dZ in dX = dZ W^T) or columns (X^T
 * in dW = X^T dZ), B with contiguous rows (W, dZ), the last two only while
 * the panel is compact (in_place_span). A last row panel of exactly a
 * partial kernel's rows (part_mr) is read in place too; other partial
 * panels (past the last row or column) and other layouts are packed,
 * zero-padded. */
static void gemm_serial(const rd_mlp_kernel_t *kr, const gemm_t *g, float *apack, float *bpack) {
  const size_t MR = kr->mr, NR = kr->nr;
  const float *bpre = g->bpre; /* the next block's prepacked panels */
  for (size_t jc = 0; jc < g->n; jc += GEMM_NC) {
    size_t nc = g->n - jc < GEMM_NC ? g->n - jc : GEMM_NC;
    for (size_t pc = 0; pc < g->k; pc += GEMM_KC) {
      size_t kc = g->k - pc < GEMM_KC ? g->k - pc : GEMM_KC;
      int first = pc == 0, last = pc + kc == g->k;
      const int a_cols = g->rsa == 1 && in_place_span(kc, g->csa);
      const int a_rows = !a_cols && g->csa == 1;
      const float *b = g->b + (ptrdiff_t)pc * g->rsb + (ptrdiff_t)jc * g->csb;
      /* B in place: only a partial last panel is packed (to the front). */
      const size_t nfull = b_in_place(g, kc, nc, NR);
      const float *bp = bpack;
      if (nfull < nc && bpre != NULL) {
        bp = bpre;
        bpre += round_up(nc - nfull, NR) * kc;
      } else if (nfull < nc) {
        pack_b(kc, nc - nfull, NR, b + (ptrdiff_t)nfull * g->csb, g->rsb, g->csb, bpack,
               kr->tr16);
      }
      for (size_t ic = 0; ic < g->m; ic += GEMM_MC) {
        size_t mc = g->m - ic < GEMM_MC ? g->m - ic : GEMM_MC;
        const float *a = g->a + (ptrdiff_t)ic * g->rsa + (ptrdiff_t)pc * g->csa;
        /* Rows read in place: the whole tiles, and a last partial tile
         * whose kernel (part_of, as gemm_tile picks it) has exactly its
         * rows, so that no kernel reads past them. */
        const size_t rem = mc % MR;
        const int q = rem > 0 ? part_of(kr, rem) : -1;
        const int rem_fits = q >= 0 && kr->part_mr[q] == rem;
        const size_t mfull = a_cols || a_rows ? mc - (rem_fits ? 0 : rem) : 0;
        if (mfull < mc)
          pack_a(mc - mfull, kc, MR, a + (ptrdiff_t)mfull * g->rsa, g->rsa, g->csa, apack,
                 kr->tr16);
        for (size_t jr = 0; jr < nc; jr += NR) {
          size_t nr = nc - jr < NR ? nc - jr : NR;
          panels_t pn;
          if (jr < nfull) {
            pn.b = b + (ptrdiff_t)jr;
            pn.brs = g->rsb;
          } else {
            pn.b = bp + (jr - nfull) * kc;
            pn.brs = (ptrdiff_t)NR;
          }
          for (size_t ir = 0; ir < mc; ir += MR) {
            size_t mr = mc - ir < MR ? mc - ir : MR;
            if (ir < mfull) {
              pn.a = a + (ptrdiff_t)ir * g->rsa;
              pn.rows = a_rows;
              pn.ars = a_rows ? g->rsa : 1;
              pn.acs = a_rows ? 1 : g->csa;
            } else {
              pn.a = apack + (ir - mfull) * kc;
              pn.rows = 0;
              pn.ars = 1;
              pn.acs = (ptrdiff_t)MR;
            }
            gemm_tile(kr, g, kc, &pn, ic + ir, jc + jr, mr, nr, first, last);
          }
        }
      }
    }
  }
}

/* B's panels exactly as gemm_serial packs them, block after block, into
 * out (NULL: only count); returns the floats they take. */
static size_t prepack_b(const rd_mlp_kernel_t *kr, const gemm_t *g, float *out) {
  const size_t NR = kr->nr;
  size_t off = 0;
  for (size_t jc = 0; jc < g->n; jc += GEMM_NC) {
    size_t nc = g->n - jc < GEMM_NC ? g->n - jc : GEMM_NC;
    for (size_t pc = 0; pc < g->k; pc += GEMM_KC) {
      size_t kc = g->k - pc < GEMM_KC ? g->k - pc : GEMM_KC;
      const float *b = g->b + (ptrdiff_t)pc * g->rsb + (ptrdiff_t)jc * g->csb;
      const size_t nfull = b_in_place(g, kc, nc, NR);
      if (nfull == nc) continue;
      if (out != NULL)
        pack_b(kc, nc - nfull, NR, b + (ptrdiff_t)nfull * g->csb, g->rsb, g->csb, out + off,
               kr->tr16);
      off += round_up(nc - nfull, NR) * kc;
    }
  }
  return off;
}

/* Packing scratch of one thread for a network: packed A for at most
 * min(MC, M) rows and packed B for at most min(NC, N) columns, where every
 * product's M is at most max(batch, width), N at most the widest layer and
 * the inner dimension is cut at KC. Sets m->pack_b_off and m->pack_floats. */
static void size_packing(rd_mlp_t *m, size_t batch, size_t width) {
  const rd_mlp_kernel_t *kr = m->kernel;
  size_t dim = batch > width ? batch : width;
  size_t kc = dim < GEMM_KC ? dim : GEMM_KC;
  size_t mc = round_up(dim < GEMM_MC ? dim : GEMM_MC, kr->mr);
  size_t nc = round_up(width < GEMM_NC ? width : GEMM_NC, kr->nr);
  m->pack_b_off = round_up(mc * kc, 16); /* keep packed B 64-byte aligned */
  m->pack_floats = m->pack_b_off + round_up(kc * nc, 16);
}

/* At most 4 columns, A's rows and B's columns contiguous, C row-major with
 * no padding (an output layer's forward product), no gate: the variant's
 * dot-product kernel, if it has one. */
static int dot_fits(const rd_mlp_kernel_t *kr, const gemm_t *g) {
  return kr->dot != NULL && g->n <= 4 && g->csa == 1 && g->rsb == 1 && g->csc == 1 &&
         g->rsc == (ptrdiff_t)g->n && g->gate == NULL;
}

/* The narrow (or dot-product) kernel on m's threads: rows in chunks of 8,
 * B packed to 16 columns first when its rows are not contiguous (each
 * thread packs its own copy; B is at most 16 columns). Falls back to the
 * general kernel if that copy would not fit the packing buffer. */
static void gemm_narrow(rd_mlp_t *m, const gemm_t *g) {
  const rd_mlp_kernel_t *kr = m->kernel;
  const int dot = dot_fits(kr, g); /* else kr->narrow, which gemm checked */
  const int packed = !dot && g->csb != 1;
  if (packed && g->k * 16 > m->pack_floats - m->pack_b_off) {
    gemm_serial(kr, g, m->pack, m->pack + m->pack_b_off);
    return;
  }
  size_t chunks = (g->m + 7) / 8;
  double work = (double)g->m * (double)(dot ? g->n : 16) * (double)g->k;
  int nt = work >= GEMM_MT_MIN && chunks >= 2 ? team_size(m) : 1;
  if (nt <= 1) {
    float *bp = m->pack + m->pack_b_off;
    if (dot) {
      kr->dot(g);
      return;
    }
    if (packed) pack_b(g->k, g->n, 16, g->b, g->rsb, g->csb, bp, kr->tr16);
    kr->narrow(g, packed ? bp : NULL);
    return;
  }
  uint64_t t0 = rd_clock_now_ns(), own = 0;
#pragma omp parallel num_threads(RD_OMP_TEAM(nt))
  {
    size_t me = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
    size_t lo = chunks * me / T * 8, hi = chunks * (me + 1) / T * 8;
    if (hi > g->m) hi = g->m;
    if (hi > lo) {
      gemm_t s = *g;
      s.m = hi - lo;
      s.a += (ptrdiff_t)lo * g->rsa;
      s.c += (ptrdiff_t)lo * g->rsc;
      if (s.gate) s.gate += (ptrdiff_t)lo * g->rsg;
      float *bp = m->pack + me * m->pack_floats + m->pack_b_off;
      if (dot) {
        kr->dot(&s);
      } else {
        if (packed) pack_b(g->k, g->n, 16, g->b, g->rsb, g->csb, bp, kr->tr16);
        kr->narrow(&s, packed ? bp : NULL);
      }
    }
    if (me == 0) own = rd_clock_now_ns();
  }
  team_done(t0, own);
}

/* The narrow (or dot-product) kernel takes g: at most 16 columns, C rows
 * contiguous, and A rows contiguous or at most 16 of them. It reads A in
 * place, one broadcast per row and p; with A's p apart (dZ^T of a weight
 * gradient) each p of a row group is another line, fetched again for the
 * next group, and a tall product ran at half the general kernel's speed,
 * which packs A. */
static int narrow_fits(const rd_mlp_kernel_t *kr, const gemm_t *g) {
  return (dot_fits(kr, g) || (kr->narrow != NULL && g->n <= 16)) && (g->csc == 1 || g->n == 1) &&
         (g->csa == 1 || g->m <= 16);
}

static void gemm(rd_mlp_t *m, const gemm_t *g0) {
  const rd_mlp_kernel_t *kr = m->kernel;
  gemm_t g = *g0;
  if (g.m == 0 || g.n == 0) return;
  /* C^T = B^T A^T computes the same sums; take the orientation whose tiles
   * waste less (e.g. dW of a layer with 11 inputs and 256 outputs), unless
   * the product as it is fits the narrow kernel, which wastes nothing on
   * padding and writes C in place. */
  if (g.may_transpose && g.bias == NULL && g.gate == NULL && !g.relu && !narrow_fits(kr, &g) &&
      round_up(g.n, kr->mr) * round_up(g.m, kr->nr) <
                             round_up(g.m, kr->mr) * round_up(g.n, kr->nr)) {
    gemm_t t = g;
    t.m = g.n, t.n = g.m;
    t.a = g.b, t.rsa = g.csb, t.csa = g.rsb;
    t.b = g.a, t.rsb = g.csa, t.csb = g.rsa;
    t.rsc = g.csc, t.csc = g.rsc;
    t.bpre = NULL;
    g = t;
  }
  if (narrow_fits(kr, &g)) {
    gemm_narrow(m, &g);
    return;
  }
  size_t tiles_m = (g.m + kr->mr - 1) / kr->mr, tiles_n = (g.n + kr->nr - 1) / kr->nr;
  int nt = (double)g.m * (double)g.n * (double)g.k >= GEMM_MT_MIN &&
                   (tiles_m >= 2 || tiles_n >= 2)
               ? team_size(m)
               : 1;
  if (nt <= 1) {
    gemm_serial(kr, &g, m->pack, m->pack + m->pack_b_off);
    return;
  }
  /* Split C by whole tiles of rows (or of columns if it has more of those):
   * never the inner dimension, so each element's sum is the same for any
   * thread count. */
  const int by_rows = tiles_m >= tiles_n;
  uint64_t t0 = rd_clock_now_ns(), own = 0;
#pragma omp parallel num_threads(RD_OMP_TEAM(nt))
  {
    size_t me = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
    size_t tiles = by_rows ? tiles_m : tiles_n, q = by_rows ? kr->mr : kr->nr;
    size_t lo = tiles * me / T * q, hi = tiles * (me + 1) / T * q;
    size_t len = by_rows ? g.m : g.n;
    if (hi > len) hi = len;
    if (hi > lo) {
      gemm_t s = g;
      if (by_rows) {
        s.m = hi - lo;
        s.a += (ptrdiff_t)lo * g.rsa;
        s.c += (ptrdiff_t)lo * g.rsc;
        if (s.gate) s.gate += (ptrdiff_t)lo * g.rsg;
      } else {
        s.n = hi - lo;
        s.bpre = NULL; /* packed for all of B's columns */
        s.b += (ptrdiff_t)lo * g.csb;
        s.c += (ptrdiff_t)lo * g.csc;
        if (s.bias) s.bias += lo;
        if (s.gate) s.gate += lo;
      }
      float *pk = m->pack + me * m->pack_floats;
      gemm_serial(kr, &s, pk, pk + m->pack_b_off);
    }
    if (me == 0) own = rd_clock_now_ns();
  }
  team_done(t0, own);
}

/* ------------------------------------------------------------------ */
/* Networks                                                            */
/* ------------------------------------------------------------------ */

void rd_mlp_config_default(rd_mlp_config_t *c) {
  memset(c, 0, sizeof *c);
  c->max_batch = 256;
  c->seed = 0;
  c->threads = 1;
}

void rd_adam_config_default(rd_adam_config_t *c) {
  c->lr = 1e-3;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
}

/* 64-byte aligned so packing and the simd loops start on a line. */
static float *alloc_floats(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) return NULL;
  return p;
}

void rd_mlp_free(rd_mlp_t *m) {
  if (!m->view) free(m->params);
  free(m->grads);
  free(m->adam_m);
  free(m->adam_v);
  free(m->input);
  for (int l = 0; l < RD_NN_MAX_LAYERS; l++) free(m->act[l]);
  free(m->delta[0]);
  free(m->delta[1]);
  free(m->pack);
  free(m->bpre);
  memset(m, 0, sizeof *m);
}

static void init_weights(rd_mlp_t *m, uint64_t seed) {
  const rd_nn_spec_t *s = &m->spec;
  for (uint32_t l = 0; l < s->n_layers; l++) {
    double in = s->sizes[l], out = s->sizes[l + 1];
    double limit = s->act[l] == RD_NN_RELU ? sqrt(6.0 / in) : sqrt(6.0 / (in + out));
    size_t nw = (size_t)s->sizes[l + 1] * s->sizes[l];
    for (size_t k = 0; k < nw; k++) {
      size_t g = m->w_off[l] + k;
      /* 24 random bits: exactly representable, so u is the same everywhere. */
      double u = (double)(rd_philox_u64(seed, RD_MLP_INIT_DRAW0 + g) >> 40) * 0x1p-24;
      m->params[g] = (float)((2.0 * u - 1.0) * limit);
    }
    memset(m->params + m->b_off[l], 0, (size_t)s->sizes[l + 1] * sizeof(float));
  }
}

int rd_mlp_check_limits(uint32_t max_batch, uint32_t threads, rd_error_t *err) {
  if (max_batch == 0 || max_batch > RD_MLP_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "max_batch %u is outside [1, %u]", max_batch,
                        RD_MLP_MAX_BATCH);
  if (threads > RD_MLP_MAX_THREADS)
    return rd_error_set(err, RD_EINVAL, "threads %u is above %u", threads, RD_MLP_MAX_THREADS);
  return RD_OK;
}

int rd_mlp_init(rd_mlp_t *m, const rd_mlp_config_t *c, rd_error_t *err) {
  memset(m, 0, sizeof *m);
  int rc = rd_nn_spec_validate(&c->spec, err);
  if (rc) return rc;
  rc = rd_mlp_check_limits(c->max_batch, c->threads, err);
  if (rc) return rc;

  const rd_nn_spec_t *s = &c->spec;
  m->spec = *s;
  m->max_batch = c->max_batch;
  m->threads = c->threads ? c->threads : 1;
  m->trainable = !c->inference_only;
  m->kernel = pick_kernel();
  m->n_params = rd_nn_spec_params(s);
  for (uint32_t l = 0; l < s->n_layers; l++) {
    m->w_off[l] = rd_nn_spec_offset(s, l);
    m->b_off[l] = m->w_off[l] + (size_t)s->sizes[l + 1] * s->sizes[l];
  }
  size_t B = c->max_batch, width = rd_nn_spec_max_width(s);
  size_packing(m, B, width);
  int ok = (m->params = alloc_floats(m->n_params)) != NULL;
  ok = ok && (m->input = alloc_floats(B * s->sizes[0])) != NULL;
  ok = ok && (m->pack = alloc_floats(m->pack_floats * m->threads)) != NULL;
  for (uint32_t l = 0; ok && l < s->n_layers; l++)
    ok = (m->act[l] = alloc_floats(B * s->sizes[l + 1])) != NULL;
  if (ok && m->trainable) {
    ok = (m->grads = alloc_floats(m->n_params)) != NULL &&
         (m->adam_m = alloc_floats(m->n_params)) != NULL &&
         (m->adam_v = alloc_floats(m->n_params)) != NULL &&
         (m->delta[0] = alloc_floats(B * width)) != NULL &&
         (m->delta[1] = alloc_floats(B * width)) != NULL;
  }
  if (!ok) {
    rd_mlp_free(m);
    return rd_error_set(err, RD_ENOMEM,
                        "cannot allocate a network of %zu parameters for batches of %zu",
                        rd_nn_spec_params(s), B);
  }
  if (m->trainable) {
    memset(m->grads, 0, m->n_params * sizeof(float));
    memset(m->adam_m, 0, m->n_params * sizeof(float));
    memset(m->adam_v, 0, m->n_params * sizeof(float));
  }
  init_weights(m, c->seed);
  return RD_OK;
}

int rd_mlp_init_view(rd_mlp_t *v, const rd_mlp_t *owner, uint32_t max_rows, int with_grads,
                     rd_error_t *err) {
  memset(v, 0, sizeof *v);
  if (owner->params == NULL || owner->view)
    return rd_error_set(err, RD_EINVAL, "a view needs an initialised network that is not a view");
  if (max_rows == 0 || max_rows > RD_MLP_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "view rows %u are outside [1, %u]", max_rows,
                        RD_MLP_MAX_BATCH);
  const rd_nn_spec_t *s = &owner->spec;
  v->spec = *s;
  v->max_batch = max_rows;
  v->threads = 1;
  v->trainable = with_grads != 0;
  v->kernel = owner->kernel;
  v->n_params = owner->n_params;
  memcpy(v->w_off, owner->w_off, sizeof v->w_off);
  memcpy(v->b_off, owner->b_off, sizeof v->b_off);
  v->view = 1;
  v->params = owner->params;
  v->bpre_from = owner;
  size_t B = max_rows, width = rd_nn_spec_max_width(s);
  size_packing(v, B, width);
  int ok = (v->input = alloc_floats(B * s->sizes[0])) != NULL;
  ok = ok && (v->pack = alloc_floats(v->pack_floats)) != NULL;
  for (uint32_t l = 0; ok && l < s->n_layers; l++)
    ok = (v->act[l] = alloc_floats(B * s->sizes[l + 1])) != NULL;
  if (ok && v->trainable)
    ok = (v->grads = alloc_floats(v->n_params)) != NULL &&
         (v->delta[0] = alloc_floats(B * width)) != NULL &&
         (v->delta[1] = alloc_floats(B * width)) != NULL;
  if (!ok) {
    rd_mlp_free(v);
    return rd_error_set(err, RD_ENOMEM, "cannot allocate a network view for %zu rows", B);
  }
  if (v->trainable) memset(v->grads, 0, v->n_params * sizeof(float));
  return RD_OK;
}

const char *rd_mlp_isa(const rd_mlp_t *m) { return m->kernel->name; }

int rd_mlp_layer_gemm(rd_mlp_t *m, uint32_t l, rd_mlp_gemm_t which, size_t n, const float *a,
                      const float *b, float *c, rd_error_t *err) {
  const rd_nn_spec_t *s = &m->spec;
  if (l >= s->n_layers)
    return rd_error_set(err, RD_EINVAL, "layer %u of a %u-layer network", l, s->n_layers);
  if (n == 0 || n > m->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "%zu rows; the network takes 1..%u", n, m->max_batch);
  size_t in = s->sizes[l], out = s->sizes[l + 1];
  gemm_t g;
  switch (which) { /* the same descriptions rd_mlp_forward and backward build */
  case RD_MLP_GEMM_FORWARD:
    g = (gemm_t){.m = n, .n = out, .k = in, .a = a, .rsa = (ptrdiff_t)in, .csa = 1,
                 .b = b, .rsb = 1, .csb = (ptrdiff_t)in, .c = c, .rsc = (ptrdiff_t)out, .csc = 1};
    break;
  case RD_MLP_GEMM_GRAD_W:
    g = (gemm_t){.m = out, .n = in, .k = n, .a = a, .rsa = 1, .csa = (ptrdiff_t)out,
                 .b = b, .rsb = (ptrdiff_t)in, .csb = 1, .c = c, .rsc = (ptrdiff_t)in, .csc = 1,
                 .may_transpose = 1};
    break;
  case RD_MLP_GEMM_GRAD_X:
    g = (gemm_t){.m = n, .n = in, .k = out, .a = a, .rsa = (ptrdiff_t)out, .csa = 1,
                 .b = b, .rsb = (ptrdiff_t)in, .csb = 1, .c = c, .rsc = (ptrdiff_t)in, .csc = 1};
    break;
  default: return rd_error_set(err, RD_EINVAL, "unknown product %d", (int)which);
  }
  gemm(m, &g);
  return RD_OK;
}

/* ---- prepacked weights ---- */

/* The B operands of layer l's forward (W^T) and backward (dA = dZ W)
 * products, as rd_mlp_forward and backward describe them. */
static gemm_t layer_b(const rd_mlp_t *m, uint32_t l, int bwd) {
  size_t in = m->spec.sizes[l], out = m->spec.sizes[l + 1];
  const float *w = m->params + m->w_off[l];
  if (bwd)
    return (gemm_t){.n = in, .k = out, .csa = 1, .b = w, .rsb = (ptrdiff_t)in, .csb = 1,
                    .rsc = (ptrdiff_t)in, .csc = 1};
  return (gemm_t){.n = out, .k = in, .csa = 1, .b = w, .rsb = 1, .csb = (ptrdiff_t)in,
                  .rsc = (ptrdiff_t)out, .csc = 1};
}

/* A part is prepacked only if gemm_serial would pack it (not a narrow or
 * dot product, not read in place) and it is this large: a smaller B is
 * packed from the L1 or L2 in a few microseconds, less than the team job
 * that would pack it once costs. */
#define PREPACK_MIN_FLOATS 16384u

int rd_mlp_prepack_init(rd_mlp_t *m, rd_error_t *err) {
  if (m->view || m->params == NULL)
    return rd_error_set(err, RD_EINVAL,
                        "prepacked weights need an initialised network, not a view");
  size_t total = 0;
  for (uint32_t l = 0; l < m->spec.n_layers; l++)
    for (int d = 0; d < 2; d++) {
      gemm_t g = layer_b(m, l, d);
      m->bpre_off[l][d] = total;
      const int skip = (d && !m->trainable) || narrow_fits(m->kernel, &g);
      size_t len = skip ? 0 : prepack_b(m->kernel, &g, NULL);
      m->bpre_len[l][d] = len >= PREPACK_MIN_FLOATS ? len : 0;
      total += round_up(m->bpre_len[l][d], 16); /* 64-byte aligned panels */
    }
  free(m->bpre);
  m->bpre_on = 0;
  if ((m->bpre = alloc_floats(total)) == NULL)
    return rd_error_set(err, RD_ENOMEM, "cannot allocate %zu floats of prepacked weights", total);
  return RD_OK;
}

uint32_t rd_mlp_prepack_parts(const rd_mlp_t *m) { return m->bpre ? 2 * m->spec.n_layers : 0; }

size_t rd_mlp_prepack_floats(const rd_mlp_t *m, uint32_t part) {
  return m->bpre_len[part / 2][part % 2];
}

void rd_mlp_prepack_part(rd_mlp_t *m, uint32_t part) {
  const uint32_t l = part / 2;
  const int d = (int)(part % 2);
  if (m->bpre_len[l][d] == 0) return;
  gemm_t g = layer_b(m, l, d);
  prepack_b(m->kernel, &g, m->bpre + m->bpre_off[l][d]);
}

void rd_mlp_prepack_use(rd_mlp_t *m, int on) { m->bpre_on = on && m->bpre != NULL; }

/* Layer l's prepacked B for m (forward or backward), or NULL. */
static const float *prepacked(const rd_mlp_t *m, uint32_t l, int bwd) {
  const rd_mlp_t *o = m->view ? m->bpre_from : m;
  if (o == NULL || !o->bpre_on || o->params != m->params || o->bpre_len[l][bwd] == 0)
    return NULL;
  return o->bpre + o->bpre_off[l][bwd];
}

/* ---- forward ---- */

float rd_nn_tanh(float x) { return rd_tanh(x); }


int rd_mlp_forward(rd_mlp_t *m, size_t n, const float *x, float *y, rd_error_t *err) {
  if (n == 0) return rd_error_set(err, RD_EINVAL, "forward batch is empty");
  if (n > m->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "forward batch %zu exceeds max_batch %u", n,
                        m->max_batch);
  const rd_nn_spec_t *s = &m->spec;
  memcpy(m->input, x, n * s->sizes[0] * sizeof(float));
  const float *a = m->input;
  for (uint32_t l = 0; l < s->n_layers; l++) {
    size_t in = s->sizes[l], out = s->sizes[l + 1];
    float *z = m->act[l];
    /* Z = a W^T + 1 b^T: B[p][j] = W[j][p]. */
    gemm_t g = {.m = n, .n = out, .k = in,
                .a = a, .rsa = (ptrdiff_t)in, .csa = 1,
                .b = m->params + m->w_off[l], .rsb = 1, .csb = (ptrdiff_t)in,
                .c = z, .rsc = (ptrdiff_t)out, .csc = 1,
                .bias = m->params + m->b_off[l], .relu = s->act[l] == RD_NN_RELU,
                .bpre = prepacked(m, l, 0)};
    gemm(m, &g);
    if (s->act[l] == RD_NN_TANH) RD_MLP_FOR(m, n * out, { z[i] = rd_tanh(z[i]); });
    a = z;
  }
  if (y != NULL) memcpy(y, a, n * s->sizes[s->n_layers] * sizeof(float));
  m->fwd_batch = (uint32_t)n;
  return RD_OK;
}

/* ---- backward ---- */

/* dz = da * act'(a), where a is the layer's output. da and dz may alias. */
static void act_grad(rd_mlp_t *m, rd_nn_act_t act, const float *a, const float *da, float *dz,
                     size_t n) {
  switch (act) {
  case RD_NN_RELU: RD_MLP_FOR(m, n, { dz[i] = a[i] > 0.0f ? da[i] : 0.0f; }); break;
  case RD_NN_TANH: RD_MLP_FOR(m, n, { dz[i] = da[i] * (1.0f - a[i] * a[i]); }); break;
  case RD_NN_IDENTITY:
    if (dz != da) memcpy(dz, da, n * sizeof(float));
    break;
  }
}

/* db[j] = sum_i dz[i][j] over n rows, in row order (vectorized across j),
 * split over columns when large: each column's sum has one fixed order. */
static void col_sums(rd_mlp_t *m, size_t n, size_t cols, const float *dz, float *db) {
  const colsum_fn colsum = m->kernel->colsum;
  int nt = n * cols >= RD_MLP_OMP_MIN && cols >= 32 ? team_size(m) : 1;
  if (nt > 1) {
    uint64_t t0 = rd_clock_now_ns(), own = 0;
#pragma omp parallel num_threads(RD_OMP_TEAM(nt))
    {
      size_t me = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
      size_t blocks = (cols + 15) / 16;
      size_t j0 = blocks * me / T * 16, j1 = blocks * (me + 1) / T * 16;
      if (j1 > cols) j1 = cols;
      if (j1 > j0) colsum(n, cols, dz, j0, j1, db);
      if (me == 0) own = rd_clock_now_ns();
    }
    team_done(t0, own);
    return;
  }
  colsum(n, cols, dz, 0, cols, db);
}

static int backward(rd_mlp_t *m, const float *dy, float *dx, int want_grads, rd_error_t *err) {
  if (!m->trainable)
    return rd_error_set(err, RD_EINVAL, "backward on an inference-only network");
  if (m->fwd_batch == 0)
    return rd_error_set(err, RD_EINVAL,
                        "backward needs a forward on the current parameters first");
  const rd_nn_spec_t *s = &m->spec;
  const size_t n = m->fwd_batch;
  const uint32_t L = s->n_layers;
  /* dZ of the output layer; an identity output uses dy as it is. */
  const float *dz = dy;
  if (s->act[L - 1] != RD_NN_IDENTITY) {
    act_grad(m, s->act[L - 1], m->act[L - 1], dy, m->delta[0], n * s->sizes[L]);
    dz = m->delta[0];
  }
  for (uint32_t l = L; l-- > 0;) {
    size_t in = s->sizes[l], out = s->sizes[l + 1];
    const float *a_in = l > 0 ? m->act[l - 1] : m->input;
    if (want_grads) {
      /* dW = dZ^T a_in: A[o][p] = dZ[p][o], B = a_in. */
      gemm_t gw = {.m = out, .n = in, .k = n,
                   .a = dz, .rsa = 1, .csa = (ptrdiff_t)out,
                   .b = a_in, .rsb = (ptrdiff_t)in, .csb = 1,
                   .c = m->grads + m->w_off[l], .rsc = (ptrdiff_t)in, .csc = 1,
                   .may_transpose = 1};
      gemm(m, &gw);
      col_sums(m, n, out, dz, m->grads + m->b_off[l]);
    }
    float *dst = l > 0 ? (dz == m->delta[0] ? m->delta[1] : m->delta[0]) : dx;
    if (dst == NULL) break;
    /* dA = dZ W, times act'(a_in) of the layer below: that layer's dZ. */
    gemm_t ga = {.m = n, .n = in, .k = out,
                 .a = dz, .rsa = (ptrdiff_t)out, .csa = 1,
                 .b = m->params + m->w_off[l], .rsb = (ptrdiff_t)in, .csb = 1,
                 .c = dst, .rsc = (ptrdiff_t)in, .csc = 1, .bpre = prepacked(m, l, 1)};
    if (l > 0 && s->act[l - 1] != RD_NN_IDENTITY) {
      ga.gate = a_in;
      ga.rsg = (ptrdiff_t)in;
      ga.gate_act = s->act[l - 1];
    }
    gemm(m, &ga);
    dz = dst;
  }
  return RD_OK;
}

int rd_mlp_backward(rd_mlp_t *m, const float *dy, float *dx, rd_error_t *err) {
  return backward(m, dy, dx, 1, err);
}

int rd_mlp_backward_input(rd_mlp_t *m, const float *dy, float *dx, rd_error_t *err) {
  if (dx == NULL) return rd_error_set(err, RD_EINVAL, "backward_input needs a dx buffer");
  return backward(m, dy, dx, 0, err);
}

/* ---- optimizer ---- */

int rd_mlp_adam_begin(rd_mlp_t *m, const rd_adam_config_t *c, rd_adam_coef_t *k,
                      rd_error_t *err) {
  if (!m->trainable || m->view)
    return rd_error_set(err, RD_EINVAL, "Adam step on an inference-only network or a view");
  if (!(isfinite(c->lr) && c->lr > 0))
    return rd_error_set(err, RD_EINVAL, "Adam lr must be positive and finite, not %g", c->lr);
  if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
    return rd_error_set(err, RD_EINVAL, "Adam betas must be in [0, 1), not %g and %g", c->beta1,
                        c->beta2);
  if (!(isfinite(c->eps) && c->eps > 0))
    return rd_error_set(err, RD_EINVAL, "Adam eps must be positive and finite, not %g", c->eps);
  uint64_t t = ++m->adam_t;
  /* Bias corrections in double: 1 - b^t underflows float precision early. */
  double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
  const rd_adam_coef_t kk = {(float)c->beta1,         (float)c->beta2,
                             (float)(1.0 - c->beta1), (float)(1.0 - c->beta2),
                             (float)(c->lr / bc1),    (float)(1.0 / sqrt(bc2)),
                             (float)c->eps};
  *k = kk;
  m->fwd_batch = 0;
  return RD_OK;
}

void rd_mlp_adam_range(rd_mlp_t *m, const rd_adam_coef_t *k, size_t lo, size_t hi) {
  if (hi > lo)
    m->kernel->adam(hi - lo, m->params + lo, m->grads + lo, m->adam_m + lo, m->adam_v + lo, k);
}

int rd_mlp_adam_step(rd_mlp_t *m, const rd_adam_config_t *c, rd_error_t *err) {
  rd_adam_coef_t k;
  int rc = rd_mlp_adam_begin(m, c, &k, err);
  if (rc) return rc;
  const size_t n = m->n_params;
  int nt = n >= RD_MLP_OMP_MIN ? team_size(m) : 1;
  if (nt <= 1) {
    rd_mlp_adam_range(m, &k, 0, n);
  } else {
    uint64_t t0 = rd_clock_now_ns(), own = 0;
    /* Ranges start at multiples of 64, so every parameter sees the same
     * vector code for any thread count. */
#pragma omp parallel num_threads(RD_OMP_TEAM(nt))
    {
      size_t me = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
      size_t blocks = (n + 63) / 64, lo = blocks * me / T * 64, hi = blocks * (me + 1) / T * 64;
      if (hi > n) hi = n;
      rd_mlp_adam_range(m, &k, lo, hi);
      if (me == 0) own = rd_clock_now_ns();
    }
    team_done(t0, own);
  }
  return RD_OK;
}

double rd_mlp_grad_norm(const rd_mlp_t *m) {
  if (!m->trainable) return 0.0;
  /* In double, in a fixed order: 16 interleaved partial sums (so the loop
   * vectorizes instead of waiting on one add chain) combined pairwise; a
   * fixed order keeps it bit-reproducible and double keeps a 10^6-parameter
   * sum accurate. */
  double part[16] = {0};
  const float *g = m->grads;
  size_t n = m->n_params, i = 0;
  for (; i + 16 <= n; i += 16)
#pragma omp simd
    for (size_t j = 0; j < 16; j++) part[j] += (double)g[i + j] * g[i + j];
  for (size_t j = 0; i < n; i++, j++) part[j] += (double)g[i] * g[i];
  for (size_t w = 8; w > 0; w /= 2)
    for (size_t j = 0; j < w; j++) part[j] += part[j + w];
  return sqrt(part[0]);
}

int rd_mlp_clip_begin(rd_mlp_t *m, double max_norm, double *norm, float *scale,
                      rd_error_t *err) {
  if (!m->trainable || m->view)
    return rd_error_set(err, RD_EINVAL, "clipping an inference-only network or a view");
  if (!(isfinite(max_norm) && max_norm > 0))
    return rd_error_set(err, RD_EINVAL, "max gradient norm must be positive and finite, not %g",
                        max_norm);
  double nrm = rd_mlp_grad_norm(m);
  if (!isfinite(nrm))
    return rd_error_set(err, RD_ERANGE, "gradient norm is %g; skip this step", nrm);
  if (norm != NULL) *norm = nrm;
  *scale = nrm > max_norm ? (float)(max_norm / (nrm + 1e-6)) : 0.0f;
  return RD_OK;
}

/* The range calls run the same element-wise expressions as the whole-network
 * ones; nn.c is built without FMA contraction, so vector and scalar lanes
 * give the same bits and so does any split. */
void rd_mlp_scale_grads_range(rd_mlp_t *m, float scale, size_t lo, size_t hi) {
  float *restrict g = m->grads;
#pragma omp simd
  for (size_t i = lo; i < hi; i++) g[i] *= scale;
}

int rd_mlp_clip_grad_norm(rd_mlp_t *m, double max_norm, double *norm, rd_error_t *err) {
  float scale;
  int rc = rd_mlp_clip_begin(m, max_norm, norm, &scale, err);
  if (rc) return rc;
  if (scale != 0.0f) {
    float *g = m->grads;
    RD_MLP_FOR(m, m->n_params, { g[i] *= scale; });
  }
  return RD_OK;
}

/* ---- target networks ---- */

static int same_spec(const rd_mlp_t *dst, const rd_mlp_t *src, rd_error_t *err) {
  if (dst->view) return rd_error_set(err, RD_EINVAL, "a view's parameters are its owner's");
  if (!rd_nn_spec_equal(&dst->spec, &src->spec))
    return rd_error_set(err, RD_EINVAL, "target and source networks have different specs");
  return RD_OK;
}

int rd_mlp_copy_params(rd_mlp_t *dst, const rd_mlp_t *src, rd_error_t *err) {
  int rc = same_spec(dst, src, err);
  if (rc) return rc;
  memcpy(dst->params, src->params, src->n_params * sizeof(float));
  dst->fwd_batch = 0;
  return RD_OK;
}

int rd_mlp_polyak_begin(rd_mlp_t *dst, const rd_mlp_t *src, double tau, rd_error_t *err) {
  int rc = same_spec(dst, src, err);
  if (rc) return rc;
  if (!(tau > 0 && tau <= 1))
    return rd_error_set(err, RD_EINVAL, "Polyak tau must be in (0, 1], not %g", tau);
  dst->fwd_batch = 0;
  return RD_OK;
}

void rd_mlp_polyak_range(rd_mlp_t *dst, const rd_mlp_t *src, double tau, size_t lo, size_t hi) {
  const float t = (float)tau, keep = (float)(1.0 - tau);
  float *restrict d = dst->params;
  const float *restrict s = src->params;
#pragma omp simd
  for (size_t i = lo; i < hi; i++) d[i] = t * s[i] + keep * d[i];
}

int rd_mlp_polyak(rd_mlp_t *dst, const rd_mlp_t *src, double tau, rd_error_t *err) {
  int rc = rd_mlp_polyak_begin(dst, src, tau, err);
  if (rc) return rc;
  const float t = (float)tau, keep = (float)(1.0 - tau);
  float *restrict d = dst->params;
  const float *restrict s = src->params;
  RD_MLP_FOR(dst, dst->n_params, { d[i] = t * s[i] + keep * d[i]; });
  return RD_OK;
}

/* ---- flat format ---- */

int rd_mlp_save(const rd_mlp_t *m, void *buf, size_t cap, size_t *written, rd_error_t *err) {
  return rd_nn_flat_write(&m->spec, m->params, buf, cap, written, err);
}

int rd_mlp_load(rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err) {
  if (m->view) return rd_error_set(err, RD_EINVAL, "a view's parameters are its owner's");
  int rc = rd_nn_flat_load(buf, len, &m->spec, m->params, m->n_params, err);
  if (rc) return rc;
  m->fwd_batch = 0;
  return RD_OK;
}

/* ---- training state (checkpoints) ---- */

#define STATE_MAGIC 0x534d4452u /* "RDMS" */
#define STATE_HEAD 24u

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

size_t rd_mlp_state_bytes(const rd_mlp_t *m) {
  size_t moments = m->trainable ? 2 * m->n_params * sizeof(float) : 0;
  return STATE_HEAD + rd_nn_flat_bytes(&m->spec) + moments;
}

int rd_mlp_state_save(const rd_mlp_t *m, void *buf, size_t cap, size_t *written,
                      rd_error_t *err) {
  if (m->view) return rd_error_set(err, RD_EINVAL, "a view's parameters are its owner's");
  size_t need = rd_mlp_state_bytes(m), flat = rd_nn_flat_bytes(&m->spec);
  if (cap < need)
    return rd_error_set(err, RD_ETOOBIG, "a network's state needs %zu bytes, not %zu", need, cap);
  uint8_t *p = buf;
  int rc = rd_nn_flat_write(&m->spec, m->params, p + STATE_HEAD, flat, NULL, err);
  if (rc) return rc;
  put32(p, STATE_MAGIC);
  put32(p + 4, (uint32_t)m->trainable);
  put64(p + 8, m->adam_t);
  put64(p + 16, flat);
  if (m->trainable) {
    memcpy(p + STATE_HEAD + flat, m->adam_m, m->n_params * sizeof(float));
    memcpy(p + STATE_HEAD + flat + m->n_params * sizeof(float), m->adam_v,
           m->n_params * sizeof(float));
  }
  if (written) *written = need;
  return RD_OK;
}

int rd_mlp_state_check(const rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err) {
  if (m->view) return rd_error_set(err, RD_EINVAL, "a view's parameters are its owner's");
  const uint8_t *p = buf;
  size_t flat = rd_nn_flat_bytes(&m->spec);
  if (len < STATE_HEAD || get32(p) != STATE_MAGIC)
    return rd_error_set(err, RD_EINVAL, "not a network's saved state");
  if ((int)get32(p + 4) != m->trainable)
    return rd_error_set(err, RD_EINVAL, "the saved network is %s; this one is %s",
                        get32(p + 4) ? "trainable" : "inference-only",
                        m->trainable ? "trainable" : "inference-only");
  if (get64(p + 16) != flat || len != rd_mlp_state_bytes(m))
    return rd_error_set(err, RD_EINVAL, "the saved network has %zu bytes; one of this network's "
                        "spec has %zu", len, rd_mlp_state_bytes(m));
  rd_nn_spec_t s;
  int rc = rd_nn_flat_parse(p + STATE_HEAD, flat, &s, NULL, 0, err);
  if (rc) return rc;
  if (!rd_nn_spec_equal(&s, &m->spec))
    return rd_error_set(err, RD_EINVAL, "the saved network has a different shape");
  if (m->trainable) {
    const uint8_t *mv = p + STATE_HEAD + flat;
    for (size_t i = 0; i < 2 * m->n_params; i++) {
      float x;
      memcpy(&x, mv + i * sizeof(float), sizeof x);
      if (!isfinite(x) || (i >= m->n_params && x < 0))
        return rd_error_set(err, RD_EINVAL, "Adam %s moment %zu of the saved network is %g",
                            i < m->n_params ? "first" : "second", i % m->n_params, (double)x);
    }
  }
  return RD_OK;
}

int rd_mlp_state_load(rd_mlp_t *m, const void *buf, size_t len, rd_error_t *err) {
  int rc = rd_mlp_state_check(m, buf, len, err);
  if (rc) return rc;
  const uint8_t *p = buf;
  size_t flat = rd_nn_flat_bytes(&m->spec);
  rc = rd_nn_flat_load(p + STATE_HEAD, flat, &m->spec, m->params, m->n_params, err);
  if (rc) return rc;
  if (m->trainable) {
    memcpy(m->adam_m, p + STATE_HEAD + flat, m->n_params * sizeof(float));
    memcpy(m->adam_v, p + STATE_HEAD + flat + m->n_params * sizeof(float),
           m->n_params * sizeof(float));
    m->adam_t = get64(p + 8);
  }
  m->fwd_batch = 0;
  return RD_OK;
}

/* ---- losses ---- */

static int check_loss_args(size_t n, size_t lo, size_t m, size_t dim, const float *w,
                           rd_error_t *err) {
  if (n == 0 || dim == 0)
    return rd_error_set(err, RD_EINVAL, "loss over %zu samples of %zu outputs", n, dim);
  if (lo > n || m > n - lo)
    return rd_error_set(err, RD_EINVAL, "rows [%zu, %zu) are not inside a batch of %zu", lo,
                        lo + m, n);
  if (w != NULL)
    for (size_t i = lo; i < lo + m; i++)
      if (!(isfinite(w[i]) && w[i] >= 0))
        return rd_error_set(err, RD_EINVAL, "importance weight %zu is %g", i, (double)w[i]);
  return RD_OK;
}

/* Rows [lo, lo + m) of the mean over n x dim of w_i * l(e), e = y -
 * target: their gradient into dy (when not NULL), and the sum of w_i times
 * their row's l into *sum (when not NULL), in row order. l(e) = e^2 (delta
 * 0, MSE) or Huber's 0.5 e^2 within delta, else delta (|e| - 0.5 delta). */
static void loss_rows(size_t n, size_t lo, size_t m, size_t dim, const float *y,
                      const float *target, const float *w, double delta, float *dy,
                      double *sum) {
  const double inv = 1.0 / ((double)n * (double)dim);
  double s = 0.0;
  for (size_t i = lo; i < lo + m; i++) {
    double wi = w != NULL ? w[i] : 1.0, row = 0.0;
    for (size_t j = 0; j < dim; j++) {
      double e = (double)y[i * dim + j] - target[i * dim + j], ae = fabs(e), g;
      if (delta == 0) {
        row += e * e;
        g = 2.0 * e;
      } else if (ae <= delta) {
        row += 0.5 * e * e;
        g = e;
      } else {
        row += delta * (ae - 0.5 * delta);
        g = e > 0 ? delta : -delta;
      }
      if (dy != NULL) dy[i * dim + j] = (float)(wi * inv * g);
    }
    s += wi * row;
  }
  if (sum != NULL) *sum = s;
}

static int weighted_loss(size_t n, size_t dim, const float *y, const float *target,
                         const float *w, double delta, float *dy, double *loss, rd_error_t *err) {
  int rc = check_loss_args(n, 0, n, dim, w, err);
  if (rc) return rc;
  double sum;
  loss_rows(n, 0, n, dim, y, target, w, delta, dy, &sum);
  if (loss != NULL) *loss = sum * (1.0 / ((double)n * (double)dim));
  return RD_OK;
}

int rd_nn_mse(size_t n, size_t dim, const float *y, const float *target, const float *w,
              float *dy, double *loss, rd_error_t *err) {
  return weighted_loss(n, dim, y, target, w, 0.0, dy, loss, err);
}

static int check_delta(double delta, rd_error_t *err) {
  if (!(isfinite(delta) && delta > 0))
    return rd_error_set(err, RD_EINVAL, "Huber delta must be positive and finite, not %g", delta);
  return RD_OK;
}

int rd_nn_huber(size_t n, size_t dim, const float *y, const float *target, const float *w,
                double delta, float *dy, double *loss, rd_error_t *err) {
  int rc = check_delta(delta, err);
  return rc ? rc : weighted_loss(n, dim, y, target, w, delta, dy, loss, err);
}

int rd_nn_huber_rows(size_t n, size_t lo, size_t m, size_t dim, const float *y,
                     const float *target, const float *w, double delta, float *dy,
                     rd_error_t *err) {
  int rc = check_delta(delta, err);
  if (rc == RD_OK) rc = check_loss_args(n, lo, m, dim, w, err);
  if (rc == RD_OK) loss_rows(n, lo, m, dim, y, target, w, delta, dy, NULL);
  return rc;
}
