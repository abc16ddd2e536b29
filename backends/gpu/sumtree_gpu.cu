/* sumtree_gpu.cu - the exact K-ary sum tree in CUDA (see sumtree_gpu.h).
 *
 * Reading order: device-side error flag, the kernels (sample; deltas and
 * apply for large batches; k_small for batches of up to 1024), their
 * dispatch on K, then the host side: init/free, the enqueue
 * functions shared by both API forms, the host-pointer calls (validate,
 * stage, run, wait), the device-pointer calls (enqueue only) and sync.
 *
 * All index arithmetic, the descent rule and the per-slot update sums come
 * from rd_tree_step.h, which the host test replays against the CPU tree.
 */
#include "sumtree_gpu.h"
#include "cuda_fail.h"
#include "rd_tree_check.h"
#include "rd_tree_step.h"

#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <stdlib.h>
#include <string.h>

#define RD_GPU_ALIGN 256
#define THREADS 256
#define FULL_MASK 0xffffffffu

/* ------------------------------------------------------------------ */
/* Device-side error reporting                                         */
/* ------------------------------------------------------------------ */

/* The first invalid item a kernel met since the last rd_gpu_sumtree_sync. */
typedef struct {
  unsigned int kind;
  unsigned int pad;
  unsigned long long index; /* batch index of the item */
  unsigned long long value; /* the offending position, value or target */
} rd_gpu_flag_t;

enum { BAD_NONE = 0, BAD_POSITION = 1, BAD_VALUE = 2, BAD_TARGET = 3 };

static __device__ void report_bad(rd_gpu_flag_t *f, unsigned int kind, uint64_t index,
                                  uint64_t value) {
  if (atomicCAS(&f->kind, 0u, kind) == 0u) {
    f->index = index;
    f->value = value;
  }
}

typedef struct {
  uint64_t *p[RD_GPU_MAX_LEVELS];
} levels_t;

/* Lanes per descent / per block update: K up to a warp, then 2 slots each. */
template <uint32_t K> struct shape_of {
  static constexpr uint32_t G = K < 32 ? K : 32;
  static constexpr uint32_t SLOTS = K / G;
  static constexpr uint32_t LK = K == 2 ? 1 : K == 4 ? 2 : K == 8 ? 3 : K == 16 ? 4 : K == 32 ? 5 : 6;
  static constexpr uint32_t GMASK = G == 32 ? FULL_MASK : ((1u << (G & 31)) - 1u);
};

/* ------------------------------------------------------------------ */
/* Kernels                                                             */
/* ------------------------------------------------------------------ */

/* Full prefix sum at lane sub of a group of G lanes holding one entry each:
 * the entry plus the last entries of the segments (rd_st_seg) before it,
 * by shuffle. Every lane runs every shuffle. */
template <uint32_t G>
static __device__ __forceinline__ uint64_t full_prefix(uint64_t v, uint32_t gbase, uint32_t sub) {
  uint64_t f = v;
  constexpr uint32_t SEGS = G < RD_ST_SEG_MAX ? 1 : G / RD_ST_SEG_MAX;
#pragma unroll
  for (uint32_t q = 1; q < SEGS; q++) {
    /* the last entry of segment q - 1, which lies before lane sub's from q on */
    const uint64_t end = __shfl_sync(FULL_MASK, v, gbase + RD_ST_SEG_MAX * q - 1);
    if (q <= sub / RD_ST_SEG_MAX) f += end;
  }
  return f;
}

/* Sample: a group of G lanes per target. Per level, lane s loads entry s
 * (and s + 32 for K = 64) of the block and makes it a full prefix sum
 * (full_prefix, rd_st_full), the ballot of "full <= t" counted over the
 * group is j (rd_st_count_le), and the full prefix before j comes by
 * shuffle (rd_st_reduce). Every lane of the warp runs every level, so the
 * warp-wide intrinsics see all lanes; invalid targets descend along child 0
 * (always present) and write RD_GPU_BAD_LEAF. */
template <uint32_t K>
__global__ void __launch_bounds__(THREADS)
k_sample(levels_t lv, uint32_t H, uint32_t n, const uint64_t *__restrict__ targets,
         uint32_t *__restrict__ leaves, rd_gpu_flag_t *flag) {
  typedef shape_of<K> S;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t gbase = lane & ~(S::G - 1u); /* first lane of this group */
  const uint32_t sub = lane & (S::G - 1u);
  const uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / S::G;
  const uint64_t total = rd_st_block_total(lv.p[0], K);
  uint64_t t = 0;
  bool ok = false;
  if (i < n) {
    t = targets[i];
    ok = t < total;
    if (!ok && sub == 0) report_bad(flag, BAD_TARGET, i, t);
    if (!ok) t = 0;
  }
  uint64_t e = 0;
  for (uint32_t h = 0; h < H; h++) {
    const uint64_t *blk = lv.p[h] + (e << S::LK);
    uint32_t j;
    uint64_t prev;
    if constexpr (K <= 32) {
      uint64_t v = full_prefix<S::G>(__ldg(blk + sub), gbase, sub);
      uint32_t b = __ballot_sync(FULL_MASK, v <= t);
      j = __popc((b >> gbase) & S::GMASK);
      prev = __shfl_sync(FULL_MASK, v, gbase + (j ? j - 1 : 0));
    } else {
      uint64_t v0 = full_prefix<32>(__ldg(blk + lane), 0, lane);
      uint64_t v1 = full_prefix<32>(__ldg(blk + 32 + lane), 0, lane) +
                    __shfl_sync(FULL_MASK, v0, 31); /* the first 32 children's sum */
      j = __popc(__ballot_sync(FULL_MASK, v0 <= t)) + __popc(__ballot_sync(FULL_MASK, v1 <= t));
      uint32_t idx = j ? j - 1 : 0;
      uint64_t p0 = __shfl_sync(FULL_MASK, v0, idx & 31u);
      uint64_t p1 = __shfl_sync(FULL_MASK, v1, idx & 31u);
      prev = idx < 32 ? p0 : p1;
    }
    if (!ok) j = 0;
    t -= j ? prev : 0;
    e = rd_st_child(e, S::LK, j);
  }
  if (i < n && sub == 0) leaves[i] = ok ? (uint32_t)e : RD_GPU_BAD_LEAF;
}

/* Leaf deltas of sorted item k: value - old leaf for the last item of each
 * position, 0 for the items it overrides. spos == NULL: the contiguous
 * leaves first + k (insert), values in batch order. Validates every item. */
__global__ void __launch_bounds__(THREADS)
k_deltas(const uint64_t *__restrict__ leaf, uint32_t K, uint32_t capacity, uint64_t max_leaf,
         uint32_t n, const uint32_t *__restrict__ spos, const uint32_t *__restrict__ sidx,
         uint64_t first, const uint64_t *__restrict__ values, uint64_t *__restrict__ delta,
         rd_gpu_flag_t *flag) {
  const uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n || flag->kind != BAD_NONE) return;
  const uint64_t p = rd_st_item_leaf(spos, first, k);
  const uint64_t idx = spos ? sidx[k] : k;
  const uint64_t v = values[idx];
  uint64_t d = 0;
  if (p >= capacity) {
    report_bad(flag, BAD_POSITION, idx, p);
  } else if (v > max_leaf) {
    report_bad(flag, BAD_VALUE, idx, v);
  } else if (k + 1 == n || rd_st_item_leaf(spos, first, k + 1) != p) {
    d = v - rd_st_leaf_value(leaf, p, K);
  }
  delta[k] = d;
}

/* Apply: the group of sorted item k writes every block it owns (the blocks
 * it is the first item below), from the leaf level up; owning a block
 * implies owning the finer blocks below it, so the first level it does not
 * own ends its walk. One writer per block and level: plain adds, no atomics,
 * the root written by item 0's group alone. */
template <uint32_t K>
static __device__ __forceinline__ void apply_item(const levels_t &lv, uint32_t H, uint32_t n,
                                                  const uint32_t *spos, uint64_t first,
                                                  const uint64_t *S, uint64_t k, uint32_t sub) {
  typedef shape_of<K> SH;
  const uint64_t p = rd_st_item_leaf(spos, first, k);
  for (uint32_t h = H; h-- > 0;) {
    if (!rd_st_is_owner(spos, first, k, SH::LK, H, h)) break;
    const uint64_t B = rd_st_block(p, SH::LK, H, h);
    uint64_t *blk = lv.p[h] + (B << SH::LK);
#pragma unroll
    for (uint32_t s = 0; s < SH::SLOTS; s++) {
      const uint32_t i = sub + 32u * s;
      const uint64_t a = rd_st_slot_add(spos, first, S, n, k, B, i, SH::LK, H, h);
      if (a) blk[i] += a;
    }
  }
}

template <uint32_t K>
__global__ void __launch_bounds__(THREADS)
k_apply(levels_t lv, uint32_t H, uint32_t n, const uint32_t *__restrict__ spos, uint64_t first,
        const uint64_t *__restrict__ S, const rd_gpu_flag_t *flag) {
  const uint64_t k = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / shape_of<K>::G;
  const uint32_t sub = threadIdx.x & (shape_of<K>::G - 1u);
  if (k >= n || flag->kind != BAD_NONE) return;
  apply_item<K>(lv, H, n, spos, first, S, k, sub);
}

/* Small batches (n <= SMALL_MAX) in one thread block, one launch instead of
 * the sort / deltas / scan / apply sequence (whose launches, not its work,
 * set the cost of a small batch). Thread i validates item i; items are
 * ordered by the unique key (position << 32 | batch index), each thread
 * counting the keys below its own (n <= 1024 compares of broadcast shared
 * loads), which is the stable sort of the large path; deltas, then a block
 * scan. If the groups of all n items fit in the block (n * G <= SMALL_MAX)
 * the same block applies them; otherwise it leaves the sorted positions and
 * the prefix sums in spos_out / S_out for k_apply. S_out is always written
 * (the host reads S_out[n-1], the batch's change of the total). */
#define SMALL_MAX 1024u

template <uint32_t K>
__global__ void __launch_bounds__(SMALL_MAX)
k_small(levels_t lv, uint32_t H, uint32_t capacity, uint64_t max_leaf, uint32_t n,
        const uint32_t *__restrict__ pos, uint64_t first, const uint64_t *__restrict__ values,
        uint32_t *__restrict__ spos_out, uint64_t *__restrict__ S_out, rd_gpu_flag_t *flag,
        bool apply) {
  typedef cub::BlockScan<unsigned long long, SMALL_MAX> scan_t;
  __shared__ unsigned long long s_key[SMALL_MAX];
  __shared__ uint32_t s_pos[SMALL_MAX];
  __shared__ uint64_t s_S[SMALL_MAX];
  __shared__ typename scan_t::TempStorage scan_tmp;
  const uint32_t tid = threadIdx.x;
  /* An earlier error skips the batch. No thread may leave before the
   * barrier below, and this read may already see this batch's own report:
   * either way the whole block stops there. */
  bool bad = flag->kind != BAD_NONE;
  uint64_t p = 0, v = 0;
  if (tid < n && !bad) {
    p = pos ? (uint64_t)pos[tid] : first + tid;
    v = values[tid];
    if (p >= capacity) {
      report_bad(flag, BAD_POSITION, tid, p);
      bad = true;
    } else if (v > max_leaf) {
      report_bad(flag, BAD_VALUE, tid, v);
      bad = true;
    }
  }
  if (__syncthreads_or(bad)) return; /* nothing written */
  const uint64_t *leaf = lv.p[H - 1];
  if (pos) {
    const unsigned long long key = ((unsigned long long)p << 32) | tid;
    s_key[tid] = key;
    __syncthreads();
    uint32_t r = 0;
    if (tid < n) {
      for (uint32_t j = 0; j < n; j++) r += s_key[j] < key;
      s_pos[r] = (uint32_t)p;
    }
    __syncthreads();
    if (tid < n) {
      const bool last = r + 1 == n || s_pos[r + 1] != (uint32_t)p;
      s_S[r] = last ? v - rd_st_leaf_value(leaf, p, K) : 0;
    }
  } else if (tid < n) {
    s_S[tid] = v - rd_st_leaf_value(leaf, p, K);
  }
  __syncthreads();
  unsigned long long x = tid < n ? s_S[tid] : 0;
  scan_t(scan_tmp).InclusiveSum(x, x);
  if (tid < n) {
    s_S[tid] = x;
    S_out[tid] = x;
    if (pos && !apply) spos_out[tid] = s_pos[tid];
  }
  if (!apply) return;
  __syncthreads();
  const uint64_t k = tid / shape_of<K>::G;
  if (k < n) apply_item<K>(lv, H, n, pos ? s_pos : NULL, first, s_S, k, tid & (shape_of<K>::G - 1u));
}

__global__ void k_iota(uint32_t *out, uint32_t n) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (uint32_t)i;
}

static uint32_t blocks_for(uint64_t threads) { return (uint32_t)((threads + THREADS - 1) / THREADS); }

template <uint32_t K>
static void launch_sample(cudaStream_t s, const levels_t &lv, uint32_t H, uint32_t n,
                          const uint64_t *tg, uint32_t *lv_out, rd_gpu_flag_t *flag) {
  k_sample<K><<<blocks_for((uint64_t)n * shape_of<K>::G), THREADS, 0, s>>>(lv, H, n, tg, lv_out,
                                                                           flag);
}

template <uint32_t K>
static void launch_small(cudaStream_t s, const levels_t &lv, uint32_t H, uint32_t capacity,
                         uint64_t max_leaf, uint32_t n, const uint32_t *pos, uint64_t first,
                         const uint64_t *values, uint32_t *spos_out, uint64_t *S_out,
                         rd_gpu_flag_t *flag, bool apply) {
  k_small<K><<<1, SMALL_MAX, 0, s>>>(lv, H, capacity, max_leaf, n, pos, first, values, spos_out,
                                     S_out, flag, apply);
}

template <uint32_t K>
static void launch_apply(cudaStream_t s, const levels_t &lv, uint32_t H, uint32_t n,
                         const uint32_t *spos, uint64_t first, const uint64_t *S,
                         const rd_gpu_flag_t *flag) {
  k_apply<K><<<blocks_for((uint64_t)n * shape_of<K>::G), THREADS, 0, s>>>(lv, H, n, spos, first,
                                                                          S, flag);
}

#define RD_DISPATCH_K(K, CALL)                                                                \
  switch (K) {                                                                               \
  case 2: CALL(2); break;                                                                    \
  case 4: CALL(4); break;                                                                    \
  case 8: CALL(8); break;                                                                    \
  case 16: CALL(16); break;                                                                  \
  case 32: CALL(32); break;                                                                  \
  default: CALL(64); break;                                                                  \
  }

/* ------------------------------------------------------------------ */
/* Host side: state, errors                                            */
/* ------------------------------------------------------------------ */

struct rd_gpu_impl {
  cudaStream_t stream;
  unsigned char *d_levels; /* all levels, one allocation */
  unsigned char *d_scratch;
  levels_t lv;
  /* device scratch, max_batch items each */
  unsigned char *d_stage; /* a chunk's values, then its positions (12 bytes/item) */
  uint64_t *d_targets;
  uint32_t *d_leaves;
  uint32_t *d_iota;
  uint32_t *d_spos;
  uint32_t *d_sidx;
  uint64_t *d_delta;
  uint64_t *d_S;
  rd_gpu_flag_t *d_flag;
  void *d_cub;
  size_t cub_bytes;
  int end_bit; /* radix sort key bits: positions < capacity <= 2^end_bit */
  /* pinned host staging */
  unsigned char *h_mem;
  unsigned char *h_stage; /* the pinned mirror of d_stage: one copy per chunk */
  uint64_t *h_targets;
  uint32_t *h_leaves;
  rd_gpu_flag_t *h_flag;
  uint64_t *h_word;
  /* host view of the total, kept by host-pointer calls */
  bool total_known;
  uint64_t total;
  /* device-pointer calls issued since the last sync (their errors wait) */
  bool dev_pending;
};

static size_t align_up(size_t b) { return (b + RD_GPU_ALIGN - 1) & ~(size_t)(RD_GPU_ALIGN - 1); }

extern "C" int rd_gpu_device_count(int *count, rd_error_t *err) {
  int c = 0;
  cudaError_t e = cudaGetDeviceCount(&c);
  *count = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: clear it */
    return rd_error_set(err, RD_EINVAL, "no usable CUDA device: cudaGetDeviceCount: %s (%s)",
                        cudaGetErrorString(e), cudaGetErrorName(e));
  }
  if (c <= 0) return rd_error_set(err, RD_EINVAL, "no usable CUDA device: none found");
  *count = c;
  return RD_OK;
}

extern "C" int rd_gpu_device_name(int ordinal, char *buf, size_t len, rd_error_t *err) {
  int count;
  int rc = rd_gpu_device_count(&count, err);
  if (rc) return rc;
  if (ordinal < 0 || ordinal >= count)
    return rd_error_set(err, RD_EINVAL, "CUDA device %d does not exist (%d found)", ordinal, count);
  cudaDeviceProp prop;
  RD_CUDA_CK(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  if (len > 0) {
    strncpy(buf, prop.name, len - 1);
    buf[len - 1] = '\0';
  }
  return RD_OK;
}

extern "C" size_t rd_gpu_sumtree_memsize(uint32_t capacity, uint32_t fanout) {
  uint64_t blocks[RD_ST_MAX_LEVELS];
  uint32_t height = rd_st_shape(capacity, fanout, blocks);
  size_t total = 0;
  for (uint32_t h = 0; h < height; h++) total += align_up((size_t)blocks[h] * fanout * 8);
  return total;
}

static void release(rd_gpu_sumtree_t *t) {
  struct rd_gpu_impl *m = t->impl;
  if (m) {
    if (m->stream) {
      cudaStreamSynchronize(m->stream);
      cudaStreamDestroy(m->stream);
    }
    cudaFree(m->d_levels);
    cudaFree(m->d_scratch);
    cudaFreeHost(m->h_mem);
    free(m);
  }
  memset(t, 0, sizeof *t);
}

extern "C" void rd_gpu_sumtree_free(rd_gpu_sumtree_t *t) {
  if (t->impl) cudaSetDevice(t->device);
  release(t);
}

/* Carve n items of `size` bytes off *p, 256-byte aligned. */
static void *carve(unsigned char **p, size_t n, size_t size) {
  void *r = *p;
  *p += align_up(n * size);
  return r;
}

extern "C" int rd_gpu_sumtree_init(rd_gpu_sumtree_t *t, uint32_t capacity, uint32_t fanout,
                                   int device, uint32_t max_batch, rd_error_t *err) {
  memset(t, 0, sizeof *t);
  int rc = rd_tree_check_shape(capacity, fanout, err);
  if (rc) return rc;
  if (max_batch == 0 || max_batch > RD_GPU_MAX_BATCH)
    return rd_error_set(err, RD_EINVAL, "max_batch %u is outside [1, %u]", max_batch,
                        RD_GPU_MAX_BATCH);
  int count;
  rc = rd_gpu_device_count(&count, err);
  if (rc) return rc;
  if (device < 0 || device >= count)
    return rd_error_set(err, RD_EINVAL, "CUDA device %d does not exist (%d found)", device, count);
  RD_CUDA_CK(cudaSetDevice(device), "cudaSetDevice");

  uint64_t blocks[RD_ST_MAX_LEVELS];
  t->height = rd_st_shape(capacity, fanout, blocks);
  t->capacity = capacity;
  t->fanout = fanout;
  t->log2_fanout = rd_st_log2(fanout);
  t->max_batch = max_batch;
  t->device = device;
  t->max_leaf = rd_st_max_leaf(capacity);
  size_t off = 0;
  for (uint32_t h = 0; h < t->height; h++) {
    t->level_blocks[h] = blocks[h];
    t->level_offset[h] = off;
    off += align_up((size_t)blocks[h] * fanout * 8);
  }
  t->mem_bytes = off;

  struct rd_gpu_impl *m = (struct rd_gpu_impl *)calloc(1, sizeof *m);
  if (!m) return rd_error_set(err, RD_ENOMEM, "cannot allocate the GPU tree's host state");
  t->impl = m;
  m->total_known = true;
  while (((uint64_t)1 << m->end_bit) < capacity) m->end_bit++;
  if (m->end_bit == 0) m->end_bit = 1;

#define CKI(call, what)                                                                       \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      rc = rd_cuda_fail(err, e_, what);                                                      \
      (void)cudaGetLastError();                                                              \
      release(t);                                                                            \
      return rc;                                                                             \
    }                                                                                        \
  } while (0)

  /* Every initialising copy and fill goes on the tree's own stream (a
   * non-blocking stream does not wait for the legacy default stream). */
  CKI(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  CKI(cudaMalloc((void **)&m->d_levels, t->mem_bytes), "cudaMalloc of the tree's levels");
  CKI(cudaMemsetAsync(m->d_levels, 0, t->mem_bytes, m->stream), "cudaMemsetAsync");
  for (uint32_t h = 0; h < t->height; h++)
    m->lv.p[h] = (uint64_t *)(m->d_levels + t->level_offset[h]);

  size_t sort_bytes = 0, scan_bytes = 0;
  CKI(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const uint32_t *)nullptr,
                                      (uint32_t *)nullptr, (const uint32_t *)nullptr,
                                      (uint32_t *)nullptr, (int)max_batch, 0, m->end_bit),
      "cub::DeviceRadixSort (temporary storage size)");
  CKI(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, (const uint64_t *)nullptr,
                                    (uint64_t *)nullptr, (int)max_batch),
      "cub::DeviceScan (temporary storage size)");
  m->cub_bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
  size_t nb = max_batch;
  size_t scratch = align_up(nb * 12) + align_up(nb * 4) * 4 + align_up(nb * 8) * 3 +
                   align_up(sizeof(rd_gpu_flag_t)) + align_up(m->cub_bytes);
  CKI(cudaMalloc((void **)&m->d_scratch, scratch), "cudaMalloc of the GPU tree's scratch");
  unsigned char *p = m->d_scratch;
  m->d_stage = (unsigned char *)carve(&p, nb, 12);
  m->d_leaves = (uint32_t *)carve(&p, nb, 4);
  m->d_iota = (uint32_t *)carve(&p, nb, 4);
  m->d_spos = (uint32_t *)carve(&p, nb, 4);
  m->d_sidx = (uint32_t *)carve(&p, nb, 4);
  m->d_targets = (uint64_t *)carve(&p, nb, 8);
  m->d_delta = (uint64_t *)carve(&p, nb, 8);
  m->d_S = (uint64_t *)carve(&p, nb, 8);
  m->d_flag = (rd_gpu_flag_t *)carve(&p, 1, sizeof(rd_gpu_flag_t));
  m->d_cub = carve(&p, m->cub_bytes, 1);
  CKI(cudaMemsetAsync(m->d_flag, 0, sizeof(rd_gpu_flag_t), m->stream), "cudaMemsetAsync");
  t->device_bytes = t->mem_bytes + scratch;

  size_t pinned = align_up(nb * 12) + align_up(nb * 4) + align_up(nb * 8) +
                  align_up(sizeof(rd_gpu_flag_t)) + align_up(8 * RD_ST_MAX_FANOUT);
  CKI(cudaHostAlloc((void **)&m->h_mem, pinned, cudaHostAllocDefault),
      "cudaHostAlloc of the GPU tree's pinned staging");
  p = m->h_mem;
  m->h_stage = (unsigned char *)carve(&p, nb, 12);
  m->h_leaves = (uint32_t *)carve(&p, nb, 4);
  m->h_targets = (uint64_t *)carve(&p, nb, 8);
  m->h_flag = (rd_gpu_flag_t *)carve(&p, 1, sizeof(rd_gpu_flag_t));
  m->h_word = (uint64_t *)carve(&p, RD_ST_MAX_FANOUT, 8); /* a word, or the root block */

  k_iota<<<blocks_for(nb), THREADS, 0, m->stream>>>(m->d_iota, max_batch);
  CKI(cudaGetLastError(), "launching k_iota");
  CKI(cudaStreamSynchronize(m->stream), "initializing the GPU tree");
#undef CKI
  return RD_OK;
}

extern "C" void *rd_gpu_sumtree_stream(const rd_gpu_sumtree_t *t) {
  return t->impl ? (void *)t->impl->stream : NULL;
}

/* ------------------------------------------------------------------ */
/* Enqueue (shared by the host- and device-pointer forms)              */
/* ------------------------------------------------------------------ */

/* Leaves [first, first+n) (spos == NULL) or the n items at d_pos, with
 * values d_val; n <= max_batch, n > 0. */
static int enqueue_update(rd_gpu_sumtree_t *t, uint32_t n, const uint32_t *d_pos, uint64_t first,
                          const uint64_t *d_val, rd_error_t *err) {
  struct rd_gpu_impl *m = t->impl;
  cudaStream_t s = m->stream;
  const uint32_t *spos = NULL, *sidx = NULL;
  if (n <= SMALL_MAX) {
    const uint32_t G = t->fanout < 32 ? t->fanout : 32;
    const bool apply = (uint64_t)n * G <= SMALL_MAX;
#define RD_SMALL(KK)                                                                          \
  launch_small<KK>(s, m->lv, t->height, t->capacity, t->max_leaf, n, d_pos, first, d_val,      \
                   m->d_spos, m->d_S, m->d_flag, apply)
    RD_DISPATCH_K(t->fanout, RD_SMALL)
#undef RD_SMALL
    RD_CUDA_CK(cudaGetLastError(), "launching k_small");
    if (apply) return RD_OK;
    spos = d_pos ? m->d_spos : NULL;
#define RD_APPLY(KK) launch_apply<KK>(s, m->lv, t->height, n, spos, first, m->d_S, m->d_flag)
    RD_DISPATCH_K(t->fanout, RD_APPLY)
#undef RD_APPLY
    RD_CUDA_CK(cudaGetLastError(), "launching k_apply");
    return RD_OK;
  }
  if (d_pos) {
    size_t bytes = m->cub_bytes;
    RD_CUDA_CK(cub::DeviceRadixSort::SortPairs(m->d_cub, bytes, d_pos, m->d_spos, m->d_iota,
                                               m->d_sidx, (int)n, 0, m->end_bit, s),
          "cub::DeviceRadixSort::SortPairs");
    spos = m->d_spos;
    sidx = m->d_sidx;
  }
  k_deltas<<<blocks_for(n), THREADS, 0, s>>>(m->lv.p[t->height - 1], t->fanout, t->capacity,
                                              t->max_leaf, n, spos, sidx, first, d_val,
                                              m->d_delta, m->d_flag);
  RD_CUDA_CK(cudaGetLastError(), "launching k_deltas");
  size_t bytes = m->cub_bytes;
  RD_CUDA_CK(cub::DeviceScan::InclusiveSum(m->d_cub, bytes, m->d_delta, m->d_S, (int)n, s),
             "cub::DeviceScan::InclusiveSum");
#define RD_APPLY(KK) launch_apply<KK>(s, m->lv, t->height, n, spos, first, m->d_S, m->d_flag)
  RD_DISPATCH_K(t->fanout, RD_APPLY)
#undef RD_APPLY
  RD_CUDA_CK(cudaGetLastError(), "launching k_apply");
  return RD_OK;
}

static int enqueue_sample(const rd_gpu_sumtree_t *t, uint32_t n, const uint64_t *d_tg,
                          uint32_t *d_lv, rd_error_t *err) {
  struct rd_gpu_impl *m = t->impl;
#define RD_SAMPLE(KK) launch_sample<KK>(m->stream, m->lv, t->height, n, d_tg, d_lv, m->d_flag)
  RD_DISPATCH_K(t->fanout, RD_SAMPLE)
#undef RD_SAMPLE
  RD_CUDA_CK(cudaGetLastError(), "launching k_sample");
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Sync and errors found by kernels                                    */
/* ------------------------------------------------------------------ */

extern "C" int rd_gpu_sumtree_sync(const rd_gpu_sumtree_t *t, rd_error_t *err) {
  struct rd_gpu_impl *m = t->impl;
  RD_CUDA_CK(cudaSetDevice(t->device), "cudaSetDevice");
  if (!m->dev_pending) {
    RD_CUDA_CK(cudaStreamSynchronize(m->stream), "waiting for the GPU tree");
    return RD_OK;
  }
  RD_CUDA_CK(cudaMemcpyAsync(m->h_flag, m->d_flag, sizeof *m->h_flag, cudaMemcpyDeviceToHost,
                             m->stream),
             "cudaMemcpyAsync");
  RD_CUDA_CK(cudaStreamSynchronize(m->stream), "waiting for the GPU tree");
  m->dev_pending = false;
  rd_gpu_flag_t f = *m->h_flag;
  if (f.kind == BAD_NONE) return RD_OK;
  RD_CUDA_CK(cudaMemsetAsync(m->d_flag, 0, sizeof *m->d_flag, m->stream), "cudaMemsetAsync");
  RD_CUDA_CK(cudaStreamSynchronize(m->stream), "waiting for the GPU tree");
  switch (f.kind) {
  case BAD_POSITION:
    return rd_error_set(err, RD_ERANGE, "position %llu at batch index %llu is >= capacity %u",
                        f.value, f.index, t->capacity);
  case BAD_VALUE:
    return rd_error_set(err, RD_ERANGE,
                        "leaf value %llu at batch index %llu exceeds the maximum %llu "
                        "(the total of %u leaves must stay below 2^63)",
                        f.value, f.index, (unsigned long long)t->max_leaf, t->capacity);
  default:
    return rd_error_set(err, RD_ERANGE,
                        "target %llu at batch index %llu is >= the total (or the total is 0)",
                        f.value, f.index);
  }
}

/* Host-pointer calls first settle the device-pointer calls before them. */
static int settle(const rd_gpu_sumtree_t *t, rd_error_t *err) {
  RD_CUDA_CK(cudaSetDevice(t->device), "cudaSetDevice");
  return t->impl->dev_pending ? rd_gpu_sumtree_sync(t, err) : RD_OK;
}

extern "C" int rd_gpu_sumtree_total(const rd_gpu_sumtree_t *t, uint64_t *total,
                                    rd_error_t *err) {
  struct rd_gpu_impl *m = t->impl;
  RD_CUDA_CK(cudaSetDevice(t->device), "cudaSetDevice");
  /* The root block: the total is the sum of its segments' last entries. */
  RD_CUDA_CK(cudaMemcpyAsync(m->h_word, m->lv.p[0], (size_t)t->fanout * 8, cudaMemcpyDeviceToHost,
                             m->stream),
             "cudaMemcpyAsync");
  RD_CUDA_CK(cudaStreamSynchronize(m->stream), "waiting for the GPU tree");
  *total = rd_st_block_total(m->h_word, t->fanout); /* after all the work enqueued so far */
  m->total = *total;
  m->total_known = true;
  return RD_OK;
}

extern "C" int rd_gpu_sumtree_copy_to_host(const rd_gpu_sumtree_t *t, uint64_t *const *levels,
                                           rd_error_t *err) {
  struct rd_gpu_impl *m = t->impl;
  RD_CUDA_CK(cudaSetDevice(t->device), "cudaSetDevice");
  RD_CUDA_CK(cudaStreamSynchronize(m->stream), "waiting for the GPU tree");
  for (uint32_t h = 0; h < t->height; h++)
    RD_CUDA_CK(cudaMemcpy(levels[h], m->lv.p[h], (size_t)t->level_blocks[h] * t->fanout * 8,
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy of a level");
  /* The CPU tree's leaf level holds plain values (sumtree.h). */
  rd_st_leaves_from_prefix(levels[t->height - 1],
                           (uint64_t)t->level_blocks[t->height - 1] * t->fanout, t->fanout);
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Host-pointer calls                                                  */
/* ------------------------------------------------------------------ */

static int check_values(const rd_gpu_sumtree_t *t, size_t n, const uint64_t *values,
                        rd_error_t *err) {
  return rd_tree_check_values(n, values, t->max_leaf, t->capacity, err);
}

/* Run one staged chunk and fold its total change (the last prefix sum of
 * its deltas) into the host view of the total. */
static int run_chunk(rd_gpu_sumtree_t *t, uint32_t m_items, bool positions, uint64_t first,
                     rd_error_t *err) {
  struct rd_gpu_impl *m = t->impl;
  cudaStream_t s = m->stream;
  const size_t vbytes = (size_t)m_items * 8;
  const size_t bytes = vbytes + (positions ? (size_t)m_items * 4 : 0);
  RD_CUDA_CK(cudaMemcpyAsync(m->d_stage, m->h_stage, bytes, cudaMemcpyHostToDevice, s),
             "cudaMemcpyAsync of values and positions");
  int rc = enqueue_update(t, m_items, positions ? (const uint32_t *)(m->d_stage + vbytes) : NULL,
                          first, (const uint64_t *)m->d_stage, err);
  if (rc) {
    m->total_known = false;
    return rc;
  }
  RD_CUDA_CK(cudaMemcpyAsync(m->h_word, m->d_S + m_items - 1, 8, cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync");
  cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) {
    m->total_known = false;
    return rd_cuda_fail(err, e, "running an update on the GPU tree");
  }
  m->total += *m->h_word;
  return RD_OK;
}

/* The host-pointer insert (positions NULL: leaves first, first + 1, ...) or
 * update, after the caller's range or position check: the values checked,
 * then chunks of max_batch through the staging buffer, in order (a later
 * chunk's value still wins). */
static int write_chunks(rd_gpu_sumtree_t *t, size_t n, const uint64_t *values,
                        const uint32_t *positions, uint32_t first, rd_error_t *err) {
  int rc = check_values(t, n, values, err);
  if (rc) return rc;
  struct rd_gpu_impl *m = t->impl;
  for (size_t done = 0; done < n; done += t->max_batch) {
    uint32_t c = (uint32_t)(n - done < t->max_batch ? n - done : t->max_batch);
    memcpy(m->h_stage, values + done, (size_t)c * 8);
    if (positions != NULL) memcpy(m->h_stage + (size_t)c * 8, positions + done, (size_t)c * 4);
    rc = run_chunk(t, c, positions != NULL, positions != NULL ? 0 : (uint64_t)first + done, err);
    if (rc) return rc;
  }
  return RD_OK;
}

extern "C" int rd_gpu_sumtree_set_range(rd_gpu_sumtree_t *t, uint32_t first, size_t n,
                                        const uint64_t *values, rd_error_t *err) {
  int rc = settle(t, err);
  if (rc) return rc;
  if (n == 0) return RD_OK;
  rc = rd_tree_check_range(first, n, t->capacity, err);
  if (rc) return rc;
  return write_chunks(t, n, values, NULL, first, err);
}

extern "C" int rd_gpu_sumtree_update(rd_gpu_sumtree_t *t, size_t n, const uint32_t *positions,
                                     const uint64_t *values, rd_error_t *err) {
  int rc = settle(t, err);
  if (rc) return rc;
  rc = rd_tree_check_positions(n, positions, t->capacity, err);
  if (rc) return rc;
  return write_chunks(t, n, values, positions, 0, err);
}

extern "C" int rd_gpu_sumtree_sample(const rd_gpu_sumtree_t *t, size_t n,
                                     const uint64_t *targets, uint32_t *leaves,
                                     rd_error_t *err) {
  int rc = settle(t, err);
  if (rc) return rc;
  struct rd_gpu_impl *m = t->impl;
  uint64_t total = m->total;
  if (!m->total_known) {
    rc = rd_gpu_sumtree_total(t, &total, err);
    if (rc) return rc;
  }
  if (n == 0) return RD_OK;
  rc = rd_tree_check_targets(n, targets, total, err);
  if (rc) return rc;
  cudaStream_t s = m->stream;
  for (size_t done = 0; done < n; done += t->max_batch) {
    uint32_t c = (uint32_t)(n - done < t->max_batch ? n - done : t->max_batch);
    memcpy(m->h_targets, targets + done, (size_t)c * 8);
    RD_CUDA_CK(cudaMemcpyAsync(m->d_targets, m->h_targets, (size_t)c * 8, cudaMemcpyHostToDevice,
                               s),
               "cudaMemcpyAsync of targets");
    rc = enqueue_sample(t, c, m->d_targets, m->d_leaves, err);
    if (rc) return rc;
    RD_CUDA_CK(cudaMemcpyAsync(m->h_leaves, m->d_leaves, (size_t)c * 4, cudaMemcpyDeviceToHost, s),
               "cudaMemcpyAsync of leaves");
    RD_CUDA_CK(cudaStreamSynchronize(s), "sampling on the GPU tree");
    memcpy(leaves + done, m->h_leaves, (size_t)c * 4);
  }
  return RD_OK;
}

/* ------------------------------------------------------------------ */
/* Device-pointer calls                                                */
/* ------------------------------------------------------------------ */

static int check_dev_batch(const rd_gpu_sumtree_t *t, size_t n, rd_error_t *err) {
  if (n > t->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "batch of %zu items exceeds max_batch %u", n,
                        t->max_batch);
  RD_CUDA_CK(cudaSetDevice(t->device), "cudaSetDevice");
  return RD_OK;
}

extern "C" int rd_gpu_sumtree_set_range_dev(rd_gpu_sumtree_t *t, uint32_t first, size_t n,
                                            const uint64_t *d_values, rd_error_t *err) {
  int rc = check_dev_batch(t, n, err);
  if (rc || n == 0) return rc;
  rc = rd_tree_check_range(first, n, t->capacity, err);
  if (rc) return rc;
  t->impl->dev_pending = true;
  t->impl->total_known = false;
  return enqueue_update(t, (uint32_t)n, NULL, first, d_values, err);
}

extern "C" int rd_gpu_sumtree_update_dev(rd_gpu_sumtree_t *t, size_t n,
                                         const uint32_t *d_positions, const uint64_t *d_values,
                                         rd_error_t *err) {
  int rc = check_dev_batch(t, n, err);
  if (rc || n == 0) return rc;
  t->impl->dev_pending = true;
  t->impl->total_known = false;
  return enqueue_update(t, (uint32_t)n, d_positions, 0, d_values, err);
}

extern "C" int rd_gpu_sumtree_sample_dev(const rd_gpu_sumtree_t *t, size_t n,
                                         const uint64_t *d_targets, uint32_t *d_leaves,
                                         rd_error_t *err) {
  int rc = check_dev_batch(t, n, err);
  if (rc || n == 0) return rc;
  t->impl->dev_pending = true;
  return enqueue_sample(t, (uint32_t)n, d_targets, d_leaves, err);
}
