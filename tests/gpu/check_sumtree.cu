/* check_sumtree.cu - the GPU sum tree against the CPU one, on a GPU.
 *
 * A self-checking program (no cmocka: the GPU machine has none), built and
 * run by bench/gpu.sh. For every fanout K and several capacities, a CPU tree
 * (backends/cpu/sumtree.c) and a GPU tree receive the same calls; after
 * each, the GPU levels must hold the same bytes as the CPU levels, and the
 * GPU must select the same leaf as rd_sumtree_sample for every target.
 * Then the error paths. Prints one line per check; exits 1 if any failed,
 * 77 if there is no usable GPU (nothing was checked then).
 *
 *   check_gpu_sumtree [--quick]     (--quick: capacities up to 2^20 only)
 */
#include "sumtree_gpu.h"

extern "C" {
#include "sumtree.h"
}

#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "rd_rng.h"
#include "rdt_rand.h"
#include "rdt_check.h"
#include "check_device.h"

static void die(const char *what, const rd_error_t &err) {
  printf("FAIL %s: %s %s\n", what, rd_err_name(err.code), err.msg);
  exit(1);
}

static void cuda_ok(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

/* A pair of trees and a host mirror of the GPU levels. */
struct pair_t {
  rd_sumtree_t cpu;
  rd_sumtree_t mirror; /* same shape as cpu; receives the GPU levels */
  rd_gpu_sumtree_t gpu;
};

static void pair_init(pair_t *p, uint32_t cap, uint32_t K, uint32_t max_batch) {
  rd_error_t err;
  if (rd_sumtree_init(&p->cpu, cap, K, &err)) die("rd_sumtree_init", err);
  if (rd_sumtree_init(&p->mirror, cap, K, &err)) die("rd_sumtree_init", err);
  if (rd_gpu_sumtree_init(&p->gpu, cap, K, 0, max_batch, &err)) die("rd_gpu_sumtree_init", err);
}

static void pair_free(pair_t *p) {
  rd_sumtree_free(&p->cpu);
  rd_sumtree_free(&p->mirror);
  rd_gpu_sumtree_free(&p->gpu);
}

/* Byte equality of every level, and the mirror is a valid tree. */
static bool same_bytes(pair_t *p, char *why, size_t len) {
  rd_error_t err;
  if (rd_gpu_sumtree_copy_to_host(&p->gpu, p->mirror.level, &err)) {
    snprintf(why, len, "copy_to_host: %s", err.msg);
    return false;
  }
  for (uint32_t h = 0; h < p->cpu.height; h++) {
    size_t n = (size_t)p->cpu.level_blocks[h] * p->cpu.fanout;
    if (memcmp(p->cpu.level[h], p->mirror.level[h], n * 8) != 0) {
      size_t i = 0;
      while (p->cpu.level[h][i] == p->mirror.level[h][i]) i++;
      snprintf(why, len, "level %u entry %zu: cpu %llu gpu %llu", h, i,
               (unsigned long long)p->cpu.level[h][i], (unsigned long long)p->mirror.level[h][i]);
      return false;
    }
  }
  if (rd_sumtree_check(&p->mirror, &err)) {
    snprintf(why, len, "gpu tree inconsistent: %s", err.msg);
    return false;
  }
  uint64_t gt = 0;
  if (rd_gpu_sumtree_total(&p->gpu, &gt, &err) || gt != rd_sumtree_total(&p->cpu)) {
    snprintf(why, len, "total: cpu %llu gpu %llu", (unsigned long long)rd_sumtree_total(&p->cpu),
             (unsigned long long)gt);
    return false;
  }
  snprintf(why, len, "%zu bytes", p->cpu.mem_bytes);
  return true;
}

static void check_bytes(pair_t *p, const char *what) {
  char why[512];
  bool ok = same_bytes(p, why, sizeof why);
  rdt_check(ok, "K=%-2u cap=%-8u %-34s levels byte-identical to CPU (%s)", p->cpu.fanout,
        p->cpu.capacity, what, why);
}

/* Device buffers for the _dev calls. A cudaMemcpy from pageable memory can
 * return before its DMA lands, and the tree's kernels run on its own
 * non-blocking stream, which does not wait for the legacy stream: the
 * device must be synchronised before a _dev call may read the buffer (the
 * caller's side of the _dev contract in sumtree_gpu.h). */
static void ready_for_dev_calls(void) { cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

template <typename T> static T *to_device(const T *h, size_t n) {
  T *d = NULL;
  cuda_ok(cudaMalloc((void **)&d, (n ? n : 1) * sizeof(T)), "cudaMalloc");
  if (n) cuda_ok(cudaMemcpy(d, h, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  ready_for_dev_calls();
  return d;
}

/* Targets: 0, total-1, both sides of the first and last leaf boundaries,
 * random ones. */
static std::vector<uint64_t> make_targets(const rd_sumtree_t *t, uint64_t *seed, size_t n_random) {
  std::vector<uint64_t> tg;
  uint64_t total = rd_sumtree_total(t);
  tg.push_back(0);
  tg.push_back(total - 1);
  uint64_t run = 0;
  for (uint32_t i = 0; i < t->capacity; i++) {
    run += rd_sumtree_get(t, i);
    if (i < 3000 || i + 3000 > t->capacity) {
      if (run > 0 && run - 1 < total) tg.push_back(run - 1);
      if (run < total) tg.push_back(run);
    }
  }
  for (size_t r = 0; r < n_random; r++)
    tg.push_back((uint64_t)(((unsigned __int128)rd_splitmix64(seed) * total) >> 64));
  return tg;
}

static void check_sample(pair_t *p, uint64_t *seed, size_t n_random, const char *what) {
  rd_error_t err;
  if (rd_sumtree_total(&p->cpu) == 0) return;
  std::vector<uint64_t> tg = make_targets(&p->cpu, seed, n_random);
  size_t n = tg.size();
  std::vector<uint32_t> want(n), host(n), dev(n);
  if (rd_sumtree_sample(&p->cpu, n, tg.data(), want.data(), &err)) die("rd_sumtree_sample", err);
  int rc = rd_gpu_sumtree_sample(&p->gpu, n, tg.data(), host.data(), &err);
  size_t bad = 0;
  for (size_t i = 0; i < n && rc == 0; i++) bad += host[i] != want[i];
  rdt_check(rc == 0 && bad == 0, "K=%-2u cap=%-8u %-34s %zu targets, %zu differ (%s)", p->cpu.fanout,
        p->cpu.capacity, what, n, bad, rc ? err.msg : "host pointers");
  /* Device pointers, in batches of max_batch. */
  uint64_t *d_tg = to_device(tg.data(), n);
  uint32_t *d_lv = NULL;
  cuda_ok(cudaMalloc((void **)&d_lv, n * 4), "cudaMalloc");
  rc = 0;
  for (size_t done = 0; done < n && rc == 0; done += p->gpu.max_batch) {
    size_t c = n - done < p->gpu.max_batch ? n - done : p->gpu.max_batch;
    rc = rd_gpu_sumtree_sample_dev(&p->gpu, c, d_tg + done, d_lv + done, &err);
  }
  if (rc == 0) rc = rd_gpu_sumtree_sync(&p->gpu, &err);
  cuda_ok(cudaMemcpy(dev.data(), d_lv, n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  bad = 0;
  for (size_t i = 0; i < n && rc == 0; i++) bad += dev[i] != want[i];
  rdt_check(rc == 0 && bad == 0, "K=%-2u cap=%-8u %-34s %zu targets, %zu differ (%s)", p->cpu.fanout,
        p->cpu.capacity, what, n, bad, rc ? err.msg : "device pointers");
  cudaFree(d_tg);
  cudaFree(d_lv);
}

/* Update batches: spread, crowded (many duplicates), a run of the last leaves. */
static void make_batch(const rd_sumtree_t *t, uint64_t *seed, size_t n, int shape,
                       std::vector<uint32_t> &pos, std::vector<uint64_t> &val) {
  pos.resize(n);
  val.resize(n);
  uint32_t span = shape == 1 ? (t->capacity < 7 ? t->capacity : 7) : t->capacity;
  for (size_t i = 0; i < n; i++) {
    pos[i] = shape == 2 ? t->capacity - 1 - (uint32_t)(i % t->capacity)
                        : (uint32_t)(rd_splitmix64(seed) % span);
    val[i] = rdt_wide_u64(seed, t->max_leaf);
  }
}

static void check_updates(pair_t *p, uint64_t *seed, const std::vector<size_t> &sizes) {
  rd_error_t err;
  std::vector<uint32_t> pos;
  std::vector<uint64_t> val;
  int round = 0;
  for (size_t n : sizes) {
    for (int shape = 0; shape < 3; shape++, round++) {
      make_batch(&p->cpu, seed, n, shape, pos, val);
      if (rd_sumtree_update(&p->cpu, n, pos.data(), val.data(), &err)) die("rd_sumtree_update", err);
      bool dev = (round & 1) && n <= p->gpu.max_batch;
      int rc;
      if (dev) {
        uint32_t *d_pos = to_device(pos.data(), n);
        uint64_t *d_val = to_device(val.data(), n);
        rc = rd_gpu_sumtree_update_dev(&p->gpu, n, d_pos, d_val, &err);
        if (rc == 0) rc = rd_gpu_sumtree_sync(&p->gpu, &err);
        cudaFree(d_pos);
        cudaFree(d_val);
      } else {
        rc = rd_gpu_sumtree_update(&p->gpu, n, pos.data(), val.data(), &err);
      }
      char what[64];
      snprintf(what, sizeof what, "update n=%zu %s %s", n,
               shape == 0 ? "spread" : shape == 1 ? "crowded" : "run", dev ? "dev" : "host");
      if (rc) {
        rdt_check(false, "K=%-2u cap=%-8u %-34s failed: %s", p->cpu.fanout, p->cpu.capacity, what,
              err.msg);
        continue;
      }
      check_bytes(p, what);
    }
  }
}

static void check_set_ranges(pair_t *p, uint64_t *seed, int rounds) {
  rd_error_t err;
  std::vector<uint64_t> val;
  for (int r = 0; r < rounds; r++) {
    uint32_t cap = p->cpu.capacity;
    uint32_t first = (uint32_t)(rd_splitmix64(seed) % cap);
    size_t n = 1 + rd_splitmix64(seed) % (cap - first);
    if (r % 3 == 0 && n > 3 * (size_t)p->gpu.max_batch / 2) n = 3 * (size_t)p->gpu.max_batch / 2;
    /* small ranges too: the one-block path */
    static const size_t small[] = {1, 5, 32, 100, 1024};
    if (r % 3 == 2) n = small[(r / 3) % 5] < cap - first ? small[(r / 3) % 5] : cap - first;
    val.resize(n);
    for (size_t i = 0; i < n; i++) val[i] = rdt_wide_u64(seed, p->cpu.max_leaf);
    if (rd_sumtree_set_range(&p->cpu, first, n, val.data(), &err)) die("rd_sumtree_set_range", err);
    bool dev = (r & 1) && n <= p->gpu.max_batch;
    int rc;
    if (dev) {
      uint64_t *d_val = to_device(val.data(), n);
      rc = rd_gpu_sumtree_set_range_dev(&p->gpu, first, n, d_val, &err);
      if (rc == 0) rc = rd_gpu_sumtree_sync(&p->gpu, &err);
      cudaFree(d_val);
    } else {
      rc = rd_gpu_sumtree_set_range(&p->gpu, first, n, val.data(), &err);
    }
    char what[64];
    snprintf(what, sizeof what, "set_range [%u,+%zu) %s", first, n, dev ? "dev" : "host");
    if (rc) {
      rdt_check(false, "K=%-2u cap=%-8u %-34s failed: %s", p->cpu.fanout, p->cpu.capacity, what,
            err.msg);
      continue;
    }
    check_bytes(p, what);
  }
}

static void check_fanout_capacity(uint32_t K, uint32_t cap, uint32_t max_batch, bool big) {
  uint64_t seed = 0x1234 + K * 7919u + cap;
  pair_t p;
  pair_init(&p, cap, K, max_batch);
  rd_error_t err;
  /* Fill everything (host API, chunked by max_batch). */
  std::vector<uint64_t> v(cap);
  for (uint32_t i = 0; i < cap; i++) v[i] = rdt_wide_u64(&seed, p.cpu.max_leaf);
  if (v.size() == 1 && v[0] == 0) v[0] = 1;
  if (rd_sumtree_set_range(&p.cpu, 0, cap, v.data(), &err)) die("rd_sumtree_set_range", err);
  int rc = rd_gpu_sumtree_set_range(&p.gpu, 0, cap, v.data(), &err);
  if (rc) rdt_check(false, "set_range: %s", err.msg);
  check_bytes(&p, "set_range (fill)");
  check_sample(&p, &seed, big ? 100000 : 20000, "sample after fill");
  /* <= 1024 items: the one-block path (applied in the block when n * min(K,32)
   * <= 1024, else by k_apply); above: radix sort + scan + k_apply. */
  if (big)
    check_updates(&p, &seed, {1, 32, 1024, 4096, 65536, 100000});
  else
    check_updates(&p, &seed, {1, 2, 7, 32, 33, 128, 513, 1024, 1025, 4096, 65536, 70000});
  check_sample(&p, &seed, 20000, "sample after updates");
  check_set_ranges(&p, &seed, big ? 6 : 15);
  /* Zero leaves: a run of zeros and scattered zeros, then sample the edges. */
  {
    size_t n = cap / 3;
    std::vector<uint64_t> z(n, 0);
    uint32_t first = cap / 3;
    if (n > 0) {
      rd_sumtree_set_range(&p.cpu, first, n, z.data(), &err);
      rc = rd_gpu_sumtree_set_range(&p.gpu, first, n, z.data(), &err);
      if (rc) rdt_check(false, "set_range zeros: %s", err.msg);
    }
    std::vector<uint32_t> pos;
    std::vector<uint64_t> val;
    make_batch(&p.cpu, &seed, cap < 1000 ? cap : 1000, 0, pos, val);
    for (auto &x : val) x = 0;
    rd_sumtree_update(&p.cpu, pos.size(), pos.data(), val.data(), &err);
    rc = rd_gpu_sumtree_update(&p.gpu, pos.size(), pos.data(), val.data(), &err);
    if (rc) rdt_check(false, "update zeros: %s", err.msg);
    check_bytes(&p, "zeros");
    check_sample(&p, &seed, 5000, "sample with zero leaves");
  }
  pair_free(&p);
}

/* ------------------------------------------------------------------ */
/* Error paths                                                         */
/* ------------------------------------------------------------------ */

static void check_errors(void) {
  rd_error_t err;
  rd_gpu_sumtree_t g;
  rdt_check(rd_gpu_sumtree_init(&g, 100, 3, 0, 64, &err) == RD_EINVAL, "init fanout 3 -> RD_EINVAL");
  rdt_check(rd_gpu_sumtree_init(&g, 100, 128, 0, 64, &err) == RD_EINVAL, "init fanout 128 -> RD_EINVAL");
  rdt_check(rd_gpu_sumtree_init(&g, 0, 8, 0, 64, &err) == RD_EINVAL, "init capacity 0 -> RD_EINVAL");
  rdt_check(rd_gpu_sumtree_init(&g, (1u << 28) + 1, 8, 0, 64, &err) == RD_EINVAL,
        "init capacity 2^28+1 -> RD_EINVAL");
  rdt_check(rd_gpu_sumtree_init(&g, 100, 8, 0, 0, &err) == RD_EINVAL, "init max_batch 0 -> RD_EINVAL");
  int rc = rd_gpu_sumtree_init(&g, 100, 8, 99, 64, &err);
  rdt_check(rc == RD_EINVAL, "init device 99 -> RD_EINVAL (%s)", err.msg);

  /* Out of device memory: hold all but 64 MiB, then ask for ~1 GiB. */
  {
    size_t free_b = 0, total_b = 0;
    cuda_ok(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    void *hog = NULL;
    size_t want = free_b > (64u << 20) ? free_b - (64u << 20) : 0;
    while (want > 0 && cudaMalloc(&hog, want) != cudaSuccess) {
      (void)cudaGetLastError();
      want -= 256u << 20 < want ? 256u << 20 : want;
    }
    rc = rd_gpu_sumtree_init(&g, 1u << 26, 2, 0, 1024, &err);
    rdt_check(rc == RD_ENOMEM, "init needing %zu MiB with ~64 MiB free -> RD_ENOMEM (%s: %s)",
          rd_gpu_sumtree_memsize(1u << 26, 2) >> 20, rd_err_name(rc), err.msg);
    if (rc == RD_OK) rd_gpu_sumtree_free(&g);
    cudaFree(hog);
    rc = rd_gpu_sumtree_init(&g, 1u << 26, 2, 0, 1024, &err);
    rdt_check(rc == RD_OK, "the same init after the memory is back -> RD_OK (%s)",
          rc == RD_OK ? "ok" : err.msg);
    if (rc == RD_OK) rd_gpu_sumtree_free(&g);
  }

  const uint32_t cap = 1000, K = 32;
  pair_t p;
  pair_init(&p, cap, K, 256);
  uint64_t total = 1;
  rc = rd_gpu_sumtree_total(&p.gpu, &total, &err);
  rdt_check(rc == RD_OK && total == 0, "total of a new tree is 0");
  uint64_t tg0 = 0;
  uint32_t leaf = 7;
  rdt_check(rd_gpu_sumtree_sample(&p.gpu, 1, &tg0, &leaf, &err) == RD_EEMPTY,
        "sample an empty tree -> RD_EEMPTY (%s)", err.msg);
  uint64_t seed = 99;
  std::vector<uint64_t> v(cap);
  for (auto &x : v) x = 1 + rd_splitmix64(&seed) % 1000;
  rd_sumtree_set_range(&p.cpu, 0, cap, v.data(), &err);
  rd_gpu_sumtree_set_range(&p.gpu, 0, cap, v.data(), &err);
  check_bytes(&p, "errors: fill");

  uint32_t pos[3] = {1, cap, 2};
  uint64_t val[3] = {5, 5, 5};
  rc = rd_gpu_sumtree_update(&p.gpu, 3, pos, val, &err);
  rdt_check(rc == RD_ERANGE, "update position %u -> RD_ERANGE (%s)", cap, err.msg);
  check_bytes(&p, "after the refused update");
  pos[1] = 3;
  val[2] = p.cpu.max_leaf + 1;
  rc = rd_gpu_sumtree_update(&p.gpu, 3, pos, val, &err);
  rdt_check(rc == RD_ERANGE, "update value max_leaf+1 -> RD_ERANGE (%s)", err.msg);
  check_bytes(&p, "after the refused update");
  rc = rd_gpu_sumtree_set_range(&p.gpu, cap - 1, 2, val, &err);
  rdt_check(rc == RD_ERANGE, "set_range past capacity -> RD_ERANGE (%s)", err.msg);
  rc = rd_gpu_sumtree_set_range(&p.gpu, 0, 3, val, &err);
  rdt_check(rc == RD_ERANGE, "set_range value max_leaf+1 -> RD_ERANGE (%s)", err.msg);
  check_bytes(&p, "after the refused set_range");
  uint64_t tot = rd_sumtree_total(&p.cpu);
  uint64_t tg[2] = {0, tot};
  uint32_t lv[2];
  rc = rd_gpu_sumtree_sample(&p.gpu, 2, tg, lv, &err);
  rdt_check(rc == RD_ERANGE, "sample target == total -> RD_ERANGE (%s)", err.msg);

  /* Device-pointer calls: validated by the kernels, reported by sync. */
  uint32_t *d_pos = to_device(pos, 3);
  uint64_t *d_val = to_device(val, 3); /* val[2] too large */
  rc = rd_gpu_sumtree_update_dev(&p.gpu, 3, d_pos, d_val, &err);
  rdt_check(rc == RD_OK, "update_dev with a bad value enqueues (RD_OK)");
  rc = rd_gpu_sumtree_sync(&p.gpu, &err);
  rdt_check(rc == RD_ERANGE, "sync reports it -> RD_ERANGE (%s)", err.msg);
  check_bytes(&p, "after the refused update_dev");
  rdt_check(rd_gpu_sumtree_sync(&p.gpu, &err) == RD_OK, "the next sync is clean");
  uint32_t badpos[3] = {4, 5, cap + 10};
  uint64_t okval[3] = {1, 2, 3};
  cuda_ok(cudaMemcpy(d_pos, badpos, sizeof badpos, cudaMemcpyHostToDevice), "cudaMemcpy");
  cuda_ok(cudaMemcpy(d_val, okval, sizeof okval, cudaMemcpyHostToDevice), "cudaMemcpy");
  ready_for_dev_calls();
  rc = rd_gpu_sumtree_update_dev(&p.gpu, 3, d_pos, d_val, &err);
  /* A pending device error is returned by the next host call, which does nothing else. */
  uint32_t gp = 9;
  uint64_t gv = 9;
  int rc2 = rd_gpu_sumtree_update(&p.gpu, 1, &gp, &gv, &err);
  rdt_check(rc == RD_OK && rc2 == RD_ERANGE, "pending update_dev error returned by the next host call (%s)",
        err.msg);
  check_bytes(&p, "after the refused update_dev + host call");
  rc = rd_gpu_sumtree_update(&p.gpu, 1, &gp, &gv, &err);
  rd_sumtree_update(&p.cpu, 1, &gp, &gv, &err);
  rdt_check(rc == RD_OK, "then the host call works");
  check_bytes(&p, "after the host update");
  rc = rd_gpu_sumtree_update_dev(&p.gpu, 257, d_pos, d_val, &err);
  rdt_check(rc == RD_ETOOBIG, "update_dev of 257 > max_batch 256 -> RD_ETOOBIG (%s)", err.msg);
  rc = rd_gpu_sumtree_set_range_dev(&p.gpu, cap - 2, 3, d_val, &err);
  rdt_check(rc == RD_ERANGE, "set_range_dev past capacity -> RD_ERANGE (%s)", err.msg);

  tot = rd_sumtree_total(&p.cpu);
  uint64_t tgs[4] = {0, tot + 5, tot - 1, ~0ull};
  uint64_t *d_tg = to_device(tgs, 4);
  uint32_t *d_lv = NULL;
  cuda_ok(cudaMalloc((void **)&d_lv, 16), "cudaMalloc");
  rc = rd_gpu_sumtree_sample_dev(&p.gpu, 4, d_tg, d_lv, &err);
  rc2 = rd_gpu_sumtree_sync(&p.gpu, &err);
  uint32_t got[4], want[2];
  cuda_ok(cudaMemcpy(got, d_lv, 16, cudaMemcpyDeviceToHost), "cudaMemcpy");
  uint64_t good[2] = {0, tot - 1};
  rd_sumtree_sample(&p.cpu, 2, good, want, &err);
  rdt_check(rc == RD_OK && rc2 == RD_ERANGE && got[1] == RD_GPU_BAD_LEAF && got[3] == RD_GPU_BAD_LEAF &&
            got[0] == want[0] && got[2] == want[1],
        "sample_dev with bad targets: RD_GPU_BAD_LEAF for them, right leaves for the rest, sync "
        "-> RD_ERANGE");
  cudaFree(d_pos);
  cudaFree(d_val);
  cudaFree(d_tg);
  cudaFree(d_lv);
  pair_free(&p);
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  int skip = check_device_or_skip();
  if (skip) return skip;
  /* The library's own device queries, where CUDA found a device. */
  rd_error_t err;
  int count = 0;
  if (rd_gpu_device_count(&count, &err)) die("rd_gpu_device_count", err);
  char name[256];
  if (rd_gpu_device_name(0, name, sizeof name, &err)) die("rd_gpu_device_name", err);
  printf("device 0 of %d: %s\n", count, name);
  rdt_check(true, "rd_gpu_device_count = %d, device 0 = %s", count, name);

  const uint32_t fanouts[] = {2, 4, 8, 16, 32, 64};
  for (uint32_t K : fanouts) {
    const uint32_t caps[] = {1, K - 1 ? K - 1 : 1, K + 1, 1000, 65536 + 3, 1u << 20};
    for (uint32_t cap : caps) check_fanout_capacity(K, cap, 65536, false);
    /* A small max_batch: every host call is split into chunks. */
    check_fanout_capacity(K, 5000, 777, false);
    if (!quick) check_fanout_capacity(K, 1u << 24, 65536, true);
  }
  check_errors();
  printf("%d checks, %d failed\n", rdt_check_passed() + rdt_check_failed(), rdt_check_failed());
  return rdt_check_failed() ? 1 : 0;
}
