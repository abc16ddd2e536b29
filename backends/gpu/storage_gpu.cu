/* storage_gpu.cu - row storage in device memory: scatter and gather
 * (storage_gpu.h). */
#include "storage_gpu.h"
#include "cuda_fail.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROW_BYTES (1u << 20)

struct rd_gpu_storage_impl {
  cudaStream_t stream;
  bool own_stream;        /* false: borrowed (rd_gpu_storage_init_on) */
  unsigned char *d_rows;
  uint32_t *d_pos;        /* staging: positions of a host call */
  unsigned char *d_stage; /* staging: rows of a host call */
  unsigned *d_bad;        /* set by a kernel that met a bad position */
  unsigned *h_bad;
  uint32_t *h_pos;        /* pinned staging */
  unsigned char *h_stage;
  uint8_t *seen;          /* host: repeat check, one bit per row */
  int word;               /* bytes per kernel word: 16, 8, 4 or 1 */
};

/* dst row i = rows[pos[i]] (gather) or rows[pos[i]] = src row i (scatter),
 * W words of type T per row: thread t moves word t % W of row t / W. */
template <typename T>
__global__ void k_gather(const T *rows, uint32_t nrows, const uint32_t *pos, size_t n, uint32_t W,
                         T *out, unsigned *bad) {
  const size_t total = n * W;
  for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (size_t)gridDim.x * blockDim.x) {
    size_t i = t / W, w = t % W;
    uint32_t p = pos[i];
    if (p < nrows) {
      out[t] = rows[(size_t)p * W + w];
    } else {
      out[t] = T();
      if (w == 0) atomicOr(bad, 1u);
    }
  }
}

template <typename T>
__global__ void k_scatter(T *rows, uint32_t nrows, const uint32_t *pos, size_t n, uint32_t W,
                          const T *src, unsigned *bad) {
  const size_t total = n * W;
  for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (size_t)gridDim.x * blockDim.x) {
    size_t i = t / W, w = t % W;
    uint32_t p = pos[i];
    if (p < nrows) rows[(size_t)p * W + w] = src[t];
    else if (w == 0) atomicOr(bad, 1u);
  }
}

static unsigned grid_for(size_t n) {
  size_t b = (n + 255) / 256;
  if (b > 16384) b = 16384;
  return b ? (unsigned)b : 1u;
}

static int launch(rd_gpu_storage_t *s, int gather, size_t n, const uint32_t *pos, void *data,
                  rd_error_t *err) {
  rd_gpu_storage_impl *im = s->impl;
  const uint32_t W = s->row_bytes / (uint32_t)im->word;
  const unsigned g = grid_for(n * W);
  switch (im->word) {
#define RD_CASE(B, T)                                                                          \
  case B:                                                                                      \
    if (gather)                                                                                \
      k_gather<T><<<g, 256, 0, im->stream>>>((const T *)im->d_rows, s->rows, pos, n, W,        \
                                             (T *)data, im->d_bad);                            \
    else                                                                                       \
      k_scatter<T><<<g, 256, 0, im->stream>>>((T *)im->d_rows, s->rows, pos, n, W,             \
                                              (const T *)data, im->d_bad);                     \
    break;
    RD_CASE(16, uint4)
    RD_CASE(8, uint2)
    RD_CASE(4, uint32_t)
    RD_CASE(1, uint8_t)
#undef RD_CASE
  default: break;
  }
  RD_CUDA_CK(cudaGetLastError(), gather ? "gather kernel" : "scatter kernel");
  return RD_OK;
}

extern "C" void rd_gpu_storage_free(rd_gpu_storage_t *s) {
  rd_gpu_storage_impl *im = s->impl;
  if (im != NULL) {
    cudaSetDevice(s->device);
    if (im->stream) cudaStreamSynchronize(im->stream);
    cudaFree(im->d_rows);
    cudaFree(im->d_pos);
    cudaFree(im->d_stage);
    cudaFree(im->d_bad);
    cudaFreeHost(im->h_bad);
    cudaFreeHost(im->h_pos);
    cudaFreeHost(im->h_stage);
    if (im->stream && im->own_stream) cudaStreamDestroy(im->stream);
    (void)cudaGetLastError();
    free(im->seen);
    free(im);
  }
  memset(s, 0, sizeof *s);
}

static int init_impl(rd_gpu_storage_t *s, rd_error_t *err) {
  rd_gpu_storage_impl *im = s->impl;
  const size_t bytes = (size_t)s->rows * s->row_bytes;
  const size_t stage = (size_t)s->max_batch * s->row_bytes;
  if (im->stream == NULL) {
    RD_CUDA_CK(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    im->own_stream = true;
  }
  RD_CUDA_CK(cudaMalloc(&im->d_rows, bytes), "cudaMalloc(rows)");
  RD_CUDA_CK(cudaMalloc(&im->d_pos, s->max_batch * sizeof(uint32_t)), "cudaMalloc(positions)");
  RD_CUDA_CK(cudaMalloc(&im->d_stage, stage), "cudaMalloc(staging)");
  RD_CUDA_CK(cudaMalloc(&im->d_bad, sizeof(unsigned)), "cudaMalloc(flag)");
  RD_CUDA_CK(cudaMallocHost(&im->h_bad, sizeof(unsigned)), "cudaMallocHost(flag)");
  RD_CUDA_CK(cudaMallocHost(&im->h_pos, s->max_batch * sizeof(uint32_t)),
             "cudaMallocHost(positions)");
  RD_CUDA_CK(cudaMallocHost(&im->h_stage, stage), "cudaMallocHost(staging)");
  RD_CUDA_CK(cudaMemsetAsync(im->d_rows, 0, bytes, im->stream), "cudaMemset");
  RD_CUDA_CK(cudaMemsetAsync(im->d_bad, 0, sizeof(unsigned), im->stream), "cudaMemset");
  RD_CUDA_CK(cudaStreamSynchronize(im->stream), "initialisation");
  s->mem_bytes = bytes + stage + s->max_batch * sizeof(uint32_t) + sizeof(unsigned);
  im->seen = (uint8_t *)calloc(((size_t)s->rows + 7) / 8, 1);
  if (im->seen == NULL) return rd_error_set(err, RD_ENOMEM, "cannot allocate the repeat check");
  return RD_OK;
}

extern "C" int rd_gpu_storage_init(rd_gpu_storage_t *s, uint32_t rows, uint32_t row_bytes,
                                   uint32_t max_batch, int device, rd_error_t *err) {
  return rd_gpu_storage_init_on(s, rows, row_bytes, max_batch, device, NULL, err);
}

extern "C" int rd_gpu_storage_init_on(rd_gpu_storage_t *s, uint32_t rows, uint32_t row_bytes,
                                      uint32_t max_batch, int device, void *stream,
                                      rd_error_t *err) {
  memset(s, 0, sizeof *s);
  if (rows == 0) return rd_error_set(err, RD_EINVAL, "storage of 0 rows");
  if (row_bytes == 0 || row_bytes > MAX_ROW_BYTES)
    return rd_error_set(err, RD_EINVAL, "row width %u bytes is outside [1, %u]", row_bytes,
                        MAX_ROW_BYTES);
  if (max_batch == 0 || max_batch > (1u << 24))
    return rd_error_set(err, RD_EINVAL, "max_batch %u is outside [1, 2^24]", max_batch);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rd_cuda_fail(err, e, "cudaGetDeviceCount");
  }
  if (device < 0 || device >= count)
    return rd_error_set(err, RD_EINVAL, "no usable CUDA device: ordinal %d, %d device(s) found",
                        device, count);
  RD_CUDA_CK(cudaSetDevice(device), "cudaSetDevice");
  s->rows = rows;
  s->row_bytes = row_bytes;
  s->max_batch = max_batch;
  s->device = device;
  s->impl = (rd_gpu_storage_impl *)calloc(1, sizeof(rd_gpu_storage_impl));
  if (s->impl == NULL) {
    memset(s, 0, sizeof *s);
    return rd_error_set(err, RD_ENOMEM, "cannot allocate the GPU storage");
  }
  s->impl->stream = (cudaStream_t)stream;
  s->impl->word = row_bytes % 16 == 0 ? 16 : row_bytes % 8 == 0 ? 8 : row_bytes % 4 == 0 ? 4 : 1;
  int rc = init_impl(s, err);
  if (rc) {
    rd_gpu_storage_free(s);
    return rc;
  }
  return RD_OK;
}

static int check_n(const rd_gpu_storage_t *s, size_t n, rd_error_t *err) {
  if (s->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU storage is not initialised");
  if (n > s->max_batch)
    return rd_error_set(err, RD_ETOOBIG, "batch of %zu exceeds max_batch %u", n, s->max_batch);
  return RD_OK;
}

static int check_positions(const rd_gpu_storage_t *s, size_t n, const uint32_t *pos,
                           int distinct, rd_error_t *err) {
  for (size_t i = 0; i < n; i++)
    if (pos[i] >= s->rows)
      return rd_error_set(err, RD_ERANGE, "position %zu is %u; the storage has %u rows", i,
                          pos[i], s->rows);
  if (!distinct) return RD_OK;
  uint8_t *seen = s->impl->seen;
  int rc = RD_OK;
  size_t i = 0;
  for (; i < n; i++) {
    uint8_t bit = (uint8_t)(1u << (pos[i] & 7));
    if (seen[pos[i] >> 3] & bit) {
      rc = rd_error_set(err, RD_EINVAL, "position %u appears twice in one scatter (at %zu)",
                        pos[i], i);
      break;
    }
    seen[pos[i] >> 3] |= bit;
  }
  for (size_t k = 0; k < i; k++) seen[pos[k] >> 3] = 0;
  return rc;
}

/* A scatter's or gather's positions checked (a scatter's: no repeats) and
 * on their way to the device: the pinned host copy, then the device's, on
 * the storage's stream. */
static int stage_positions(rd_gpu_storage_t *s, size_t n, const uint32_t *positions, int scatter,
                           rd_error_t *err) {
  int rc = check_positions(s, n, positions, scatter, err);
  if (rc) return rc;
  rd_gpu_storage_impl *im = s->impl;
  RD_CUDA_CK(cudaSetDevice(s->device), "cudaSetDevice");
  memcpy(im->h_pos, positions, n * sizeof(uint32_t));
  RD_CUDA_CK(cudaMemcpyAsync(im->d_pos, im->h_pos, n * sizeof(uint32_t), cudaMemcpyHostToDevice,
                             im->stream),
             "position copy");
  return RD_OK;
}

extern "C" int rd_gpu_storage_scatter(rd_gpu_storage_t *s, size_t n, const uint32_t *positions,
                                      const void *data, rd_error_t *err) {
  int rc = check_n(s, n, err);
  if (rc || n == 0) return rc;
  if ((rc = stage_positions(s, n, positions, 1, err))) return rc;
  rd_gpu_storage_impl *im = s->impl;
  memcpy(im->h_stage, data, n * s->row_bytes);
  RD_CUDA_CK(cudaMemcpyAsync(im->d_stage, im->h_stage, n * s->row_bytes, cudaMemcpyHostToDevice,
                             im->stream),
             "row copy");
  if ((rc = launch(s, 0, n, im->d_pos, im->d_stage, err))) return rc;
  return rd_gpu_storage_sync(s, err);
}

extern "C" int rd_gpu_storage_gather(rd_gpu_storage_t *s, size_t n, const uint32_t *positions,
                                     void *out, rd_error_t *err) {
  int rc = check_n(s, n, err);
  if (rc || n == 0) return rc;
  if ((rc = stage_positions(s, n, positions, 0, err))) return rc;
  rd_gpu_storage_impl *im = s->impl;
  if ((rc = launch(s, 1, n, im->d_pos, im->d_stage, err))) return rc;
  RD_CUDA_CK(cudaMemcpyAsync(im->h_stage, im->d_stage, n * s->row_bytes, cudaMemcpyDeviceToHost,
                             im->stream),
             "row copy");
  if ((rc = rd_gpu_storage_sync(s, err))) return rc;
  memcpy(out, im->h_stage, n * s->row_bytes);
  return RD_OK;
}

extern "C" int rd_gpu_storage_scatter_dev(rd_gpu_storage_t *s, size_t n,
                                          const uint32_t *d_positions, const void *d_data,
                                          rd_error_t *err) {
  int rc = check_n(s, n, err);
  if (rc || n == 0) return rc;
  RD_CUDA_CK(cudaSetDevice(s->device), "cudaSetDevice");
  return launch(s, 0, n, d_positions, (void *)d_data, err);
}

extern "C" int rd_gpu_storage_gather_dev(rd_gpu_storage_t *s, size_t n,
                                         const uint32_t *d_positions, void *d_out,
                                         rd_error_t *err) {
  int rc = check_n(s, n, err);
  if (rc || n == 0) return rc;
  RD_CUDA_CK(cudaSetDevice(s->device), "cudaSetDevice");
  return launch(s, 1, n, d_positions, d_out, err);
}

extern "C" int rd_gpu_storage_sync(rd_gpu_storage_t *s, rd_error_t *err) {
  if (s->impl == NULL) return rd_error_set(err, RD_EINVAL, "GPU storage is not initialised");
  rd_gpu_storage_impl *im = s->impl;
  RD_CUDA_CK(cudaSetDevice(s->device), "cudaSetDevice");
  RD_CUDA_CK(cudaMemcpyAsync(im->h_bad, im->d_bad, sizeof(unsigned), cudaMemcpyDeviceToHost,
                             im->stream),
             "flag copy");
  RD_CUDA_CK(cudaStreamSynchronize(im->stream), "storage");
  if (*im->h_bad) {
    RD_CUDA_CK(cudaMemsetAsync(im->d_bad, 0, sizeof(unsigned), im->stream), "cudaMemset");
    RD_CUDA_CK(cudaStreamSynchronize(im->stream), "storage");
    return rd_error_set(err, RD_ERANGE,
                        "a device scatter or gather met a position >= %u rows; those rows were "
                        "skipped",
                        s->rows);
  }
  return RD_OK;
}

extern "C" void *rd_gpu_storage_stream(const rd_gpu_storage_t *s) {
  return s->impl != NULL ? (void *)s->impl->stream : NULL;
}

extern "C" void *rd_gpu_storage_rows(const rd_gpu_storage_t *s) {
  return s->impl != NULL ? (void *)s->impl->d_rows : NULL;
}
