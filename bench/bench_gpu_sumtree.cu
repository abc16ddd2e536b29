/* bench_gpu_sumtree.cu - ns per item of the GPU sum tree's three operations.
 *
 * For every capacity, fanout K and batch: sample, update and insert
 * (set_range) on a tree filled with leaves uniform in [1, 2^20] (as
 * bench_sumtree), in two forms:
 *   gpu.sumtree.<op>      device-pointer API: inputs already in device
 *                         memory, batches enqueued back to back on the tree's
 *                         stream, timed with CUDA events (kernels + launch
 *                         overhead, no PCIe copies);
 *   gpu.sumtree.<op>.e2e  host-pointer API: host validation, copies in and
 *                         out, wait for the result, timed on the host clock.
 * With --cpu, also rd_sumtree (backends/cpu, 1 thread) on the same inputs,
 * as sumtree.<op> (the names of bench_sumtree).
 *
 * Inputs come from splitmix64 with a fixed seed, generated before timing,
 * into pools of 2^22 items that the batches cycle through (so successive
 * batches touch different paths and update values differ from the current
 * leaves). One measurement: 2 warm-up batches, then 5 repetitions of `iters`
 * batches (iters ~ 2^21 / batch for the device API, 2^19 / batch for e2e,
 * 2^16 / batch for the CPU, clamped to [8 (CPU: 2), 2000]); the median
 * repetition, in ns per item. Before timing, each tree is checked against a CPU tree with the same
 * leaves (4096 targets must select the same leaves); a mismatch exits 1.
 *
 *   bench_gpu_sumtree [--json] [--json-file PATH] [--quick] [--cpu]
 *                     [--fanouts 8,16,32,64] [--capacities 1048576,16777216]
 *                     [--batches 32,...]
 * --json prints JSON lines instead of the table; --json-file writes them to
 * PATH as well as printing the table. Exit 77 without a usable GPU.
 */
#include "sumtree_gpu.h"

extern "C" {
#include "sumtree.h"
}

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>
#include "rd_rng.h"

static uint64_t leaf_value(uint64_t *s) { return 1 + (rd_splitmix64(s) >> 44); }

#define SEED 0x7265706c61796400ull
#define POOL (1u << 22)
#define MAX_BATCH 65536u
#define REPS 5

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_gpu_sumtree: %s: %s\n", what, msg);
  exit(1);
}
static void ck(cudaError_t e, const char *what) {
  if (e != cudaSuccess) die(what, cudaGetErrorString(e));
}
static void ckr(int rc, const rd_error_t &err, const char *what) {
  if (rc) die(what, err.msg);
}

struct result_t {
  std::string name;
  uint32_t capacity, batch, fanout;
  double ns;
};
static std::vector<result_t> results;
static std::string g_device;
static bool g_json = false;
static const char *g_json_file = NULL;

static void record(const char *name, uint32_t cap, uint32_t batch, uint32_t K, double ns) {
  results.push_back({name, cap, batch, K, ns});
  fprintf(stderr, "  %-24s cap %-9u batch %-6u K %-3u %10.2f ns/item\n", name, cap, batch, K, ns);
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static uint32_t iters_for(uint32_t batch, uint32_t budget, uint32_t min_iters = 8) {
  uint32_t it = budget / batch;
  return it < min_iters ? min_iters : it > 2000 ? 2000 : it;
}

/* Time fn(i) for i = 0.. on the GPU with events: ns per item. */
template <typename F>
static double time_events(cudaStream_t s, uint32_t batch, uint32_t iters, F fn) {
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "cudaEventCreate");
  ck(cudaEventCreate(&b), "cudaEventCreate");
  uint64_t it = 0;
  for (int w = 0; w < 2; w++) fn(it++);
  std::vector<double> reps;
  for (int r = 0; r < REPS; r++) {
    ck(cudaEventRecord(a, s), "cudaEventRecord");
    for (uint32_t i = 0; i < iters; i++) fn(it++);
    ck(cudaEventRecord(b, s), "cudaEventRecord");
    ck(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    reps.push_back(ms * 1e6 / ((double)iters * batch));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(reps);
}

/* Time fn(i) on the host clock (fn returns when its work is done). */
template <typename F> static double time_host(uint32_t batch, uint32_t iters, F fn) {
  uint64_t it = 0;
  for (int w = 0; w < 2; w++) fn(it++);
  std::vector<double> reps;
  for (int r = 0; r < REPS; r++) {
    auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < iters; i++) fn(it++);
    auto t1 = std::chrono::steady_clock::now();
    reps.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                   ((double)iters * batch));
  }
  return median(reps);
}

static void print_json(FILE *f) {
  for (const result_t &r : results) {
    bool gpu = r.name.compare(0, 4, "gpu.") == 0;
    if (gpu)
      fprintf(f,
              "{\"name\": \"%s\", \"params\": {\"capacity\": %u, \"batch\": %u, \"fanout\": %u, "
              "\"device\": \"%s\"}, \"value\": %.3f, \"unit\": \"ns/item\"}\n",
              r.name.c_str(), r.capacity, r.batch, r.fanout, g_device.c_str(), r.ns);
    else
      fprintf(f,
              "{\"name\": \"%s\", \"params\": {\"capacity\": %u, \"batch\": %u, \"fanout\": %u, "
              "\"threads\": 1}, \"value\": %.3f, \"unit\": \"ns/item\"}\n",
              r.name.c_str(), r.capacity, r.batch, r.fanout, r.ns);
  }
}

static std::vector<uint32_t> parse_list(const char *s) {
  std::vector<uint32_t> v;
  while (*s) {
    char *end;
    unsigned long x = strtoul(s, &end, 10);
    if (end == s) break;
    v.push_back((uint32_t)x);
    s = *end == ',' ? end + 1 : end;
  }
  return v;
}

int main(int argc, char **argv) {
  std::vector<uint32_t> fanouts = {8, 16, 32, 64};
  std::vector<uint32_t> caps = {1u << 20, 1u << 24};
  std::vector<uint32_t> batches = {32, 128, 512, 2048, 8192, 32768, 65536};
  bool quick = false, cpu = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) g_json = true;
    else if (strcmp(a, "--json-file") == 0 && i + 1 < argc) g_json_file = argv[++i];
    else if (strcmp(a, "--quick") == 0) quick = true;
    else if (strcmp(a, "--cpu") == 0) cpu = true;
    else if (strcmp(a, "--fanouts") == 0 && i + 1 < argc) fanouts = parse_list(argv[++i]);
    else if (strcmp(a, "--capacities") == 0 && i + 1 < argc) caps = parse_list(argv[++i]);
    else if (strcmp(a, "--batches") == 0 && i + 1 < argc) batches = parse_list(argv[++i]);
    else {
      fprintf(stderr,
              "usage: bench_gpu_sumtree [--json] [--json-file PATH] [--quick] [--cpu]\n"
              "                         [--fanouts 8,16,32,64] [--capacities 1048576,16777216]\n"
              "                         [--batches 32,...]\n");
      return 2;
    }
  }
  for (uint32_t b : batches)
    if (b == 0 || b > MAX_BATCH || (POOL % b) != 0) die("--batches", "each must divide 2^22 and be <= 65536");
  const uint32_t budget = quick ? (1u << 18) : (1u << 21); /* items per repetition */

  rd_error_t err;
  int count = 0;
  if (rd_gpu_device_count(&count, &err)) {
    printf("SKIP %s\n", err.msg);
    return 77;
  }
  char name[256];
  ckr(rd_gpu_device_name(0, name, sizeof name, &err), err, "rd_gpu_device_name");
  g_device = name;
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  fprintf(stderr, "# bench_gpu_sumtree: %s, driver %d, runtime %d, %u reps x ~%u items, median\n",
          name, drv, rt, REPS, budget);

  uint64_t seed = SEED;
  /* Device pools: positions and values (update, insert), targets (sample). */
  std::vector<uint32_t> h_pos(POOL);
  std::vector<uint64_t> h_val(POOL), h_tg(POOL);
  std::vector<uint32_t> h_out(MAX_BATCH);
  uint32_t *d_pos, *d_out;
  uint64_t *d_val, *d_tg;
  ck(cudaMalloc(&d_pos, POOL * 4ull), "cudaMalloc");
  ck(cudaMalloc(&d_val, POOL * 8ull), "cudaMalloc");
  ck(cudaMalloc(&d_tg, POOL * 8ull), "cudaMalloc");
  ck(cudaMalloc(&d_out, MAX_BATCH * 4ull), "cudaMalloc");
  for (uint32_t i = 0; i < POOL; i++) h_val[i] = leaf_value(&seed);
  ck(cudaMemcpy(d_val, h_val.data(), POOL * 8ull, cudaMemcpyHostToDevice), "cudaMemcpy");

  for (uint32_t cap : caps) {
    for (uint32_t i = 0; i < POOL; i++) h_pos[i] = (uint32_t)rd_rng_below(&seed, cap);
    ck(cudaMemcpy(d_pos, h_pos.data(), POOL * 4ull, cudaMemcpyHostToDevice), "cudaMemcpy");
    std::vector<uint64_t> fill(cap);
    for (uint32_t i = 0; i < cap; i++) fill[i] = leaf_value(&seed);
    for (uint32_t K : fanouts) {
      rd_gpu_sumtree_t g;
      rd_sumtree_t c;
      ckr(rd_gpu_sumtree_init(&g, cap, K, 0, MAX_BATCH, &err), err, "rd_gpu_sumtree_init");
      ckr(rd_sumtree_init(&c, cap, K, &err), err, "rd_sumtree_init");
      ckr(rd_gpu_sumtree_set_range(&g, 0, cap, fill.data(), &err), err, "set_range");
      ckr(rd_sumtree_set_range(&c, 0, cap, fill.data(), &err), err, "set_range");
      uint64_t total = 0;
      ckr(rd_gpu_sumtree_total(&g, &total, &err), err, "total");
      if (total != rd_sumtree_total(&c)) die("check", "GPU and CPU totals differ");
      for (uint32_t i = 0; i < POOL; i++) h_tg[i] = rd_rng_below(&seed, total);
      h_tg[0] = 0;
      h_tg[1] = total - 1;
      ck(cudaMemcpy(d_tg, h_tg.data(), POOL * 8ull, cudaMemcpyHostToDevice), "cudaMemcpy");
      { /* exactness check before timing */
        std::vector<uint32_t> a(4096), b(4096);
        ckr(rd_gpu_sumtree_sample(&g, 4096, h_tg.data(), a.data(), &err), err, "sample");
        ckr(rd_sumtree_sample(&c, 4096, h_tg.data(), b.data(), &err), err, "sample");
        if (a != b) die("check", "GPU and CPU sample different leaves");
      }
      cudaStream_t s = (cudaStream_t)rd_gpu_sumtree_stream(&g);
      for (uint32_t B : batches) {
        uint32_t it = iters_for(B, budget);
        /* sample, device pointers */
        double ns = time_events(s, B, it, [&](uint64_t i) {
          uint64_t off = (i * B) % POOL;
          rd_gpu_sumtree_sample_dev(&g, B, d_tg + off, d_out, &err);
        });
        ckr(rd_gpu_sumtree_sync(&g, &err), err, "sample_dev");
        record("gpu.sumtree.sample", cap, B, K, ns);
        /* sample, host pointers */
        uint32_t it_e2e = iters_for(B, budget / 4);
        ns = time_host(B, it_e2e, [&](uint64_t i) {
          uint64_t off = (i * B) % POOL;
          int rc = rd_gpu_sumtree_sample(&g, B, h_tg.data() + off, h_out.data(), &err);
          if (rc) die("sample", err.msg);
        });
        record("gpu.sumtree.sample.e2e", cap, B, K, ns);
        if (cpu) {
          ns = time_host(B, iters_for(B, budget / 32, 2), [&](uint64_t i) {
            uint64_t off = (i * B) % POOL;
            rd_sumtree_sample(&c, B, h_tg.data() + off, h_out.data(), &err);
          });
          record("sumtree.sample", cap, B, K, ns);
        }
      }
      for (uint32_t B : batches) {
        uint32_t it = iters_for(B, budget);
        double ns = time_events(s, B, it, [&](uint64_t i) {
          uint64_t off = (i * B) % POOL;
          rd_gpu_sumtree_update_dev(&g, B, d_pos + off, d_val + off, &err);
        });
        ckr(rd_gpu_sumtree_sync(&g, &err), err, "update_dev");
        record("gpu.sumtree.update", cap, B, K, ns);
        uint32_t it_e2e = iters_for(B, budget / 4);
        ns = time_host(B, it_e2e, [&](uint64_t i) {
          uint64_t off = (i * B + POOL / 2) % POOL;
          int rc = rd_gpu_sumtree_update(&g, B, h_pos.data() + off, h_val.data() + off, &err);
          if (rc) die("update", err.msg);
        });
        record("gpu.sumtree.update.e2e", cap, B, K, ns);
        if (cpu) {
          ns = time_host(B, iters_for(B, budget / 32, 2), [&](uint64_t i) {
            uint64_t off = (i * B + POOL / 4) % POOL;
            rd_sumtree_update(&c, B, h_pos.data() + off, h_val.data() + off, &err);
          });
          record("sumtree.update", cap, B, K, ns);
        }
      }
      for (uint32_t B : batches) {
        uint32_t it = iters_for(B, budget);
        double ns = time_events(s, B, it, [&](uint64_t i) {
          uint64_t off = (i * B) % POOL;
          rd_gpu_sumtree_set_range_dev(&g, (uint32_t)((i * B) % cap), B, d_val + off, &err);
        });
        ckr(rd_gpu_sumtree_sync(&g, &err), err, "set_range_dev");
        record("gpu.sumtree.insert", cap, B, K, ns);
        uint32_t it_e2e = iters_for(B, budget / 4);
        ns = time_host(B, it_e2e, [&](uint64_t i) {
          uint64_t off = (i * B + POOL / 2) % POOL;
          int rc = rd_gpu_sumtree_set_range(&g, (uint32_t)((i * B) % cap), B, h_val.data() + off,
                                            &err);
          if (rc) die("insert", err.msg);
        });
        record("gpu.sumtree.insert.e2e", cap, B, K, ns);
        if (cpu) {
          ns = time_host(B, iters_for(B, budget / 32, 2), [&](uint64_t i) {
            uint64_t off = (i * B + POOL / 4) % POOL;
            rd_sumtree_set_range(&c, (uint32_t)((i * B) % cap), B, h_val.data() + off, &err);
          });
          record("sumtree.insert", cap, B, K, ns);
        }
      }
      /* The tree must still be exact after all that. */
      rd_sumtree_t m;
      ckr(rd_sumtree_init(&m, cap, K, &err), err, "rd_sumtree_init");
      ckr(rd_gpu_sumtree_copy_to_host(&g, m.level, &err), err, "copy_to_host");
      ckr(rd_sumtree_check(&m, &err), err, "GPU tree after the benchmark");
      rd_sumtree_free(&m);
      rd_sumtree_free(&c);
      rd_gpu_sumtree_free(&g);
    }
  }

  if (g_json_file) {
    FILE *f = fopen(g_json_file, "w");
    if (!f) die(g_json_file, "cannot open for writing");
    print_json(f);
    fclose(f);
  }
  if (g_json) {
    print_json(stdout);
    return 0;
  }
  /* Table: one row per (op, capacity, batch), one column per fanout, per form. */
  printf("# %s; ns/item, median of %d; dev = device pointers (CUDA events), e2e = host "
         "pointers with copies (host clock)%s\n",
         g_device.c_str(), REPS, cpu ? "; cpu = rd_sumtree, 1 thread" : "");
  printf("%-7s %9s %6s %-4s", "op", "capacity", "batch", "form");
  for (uint32_t K : fanouts) printf(" %9s%-2u", "K=", K);
  printf("\n");
  const char *ops[] = {"sample", "update", "insert"};
  const char *forms[] = {"dev", "e2e", "cpu"};
  const char *prefix[] = {"gpu.sumtree.", "gpu.sumtree.", "sumtree."};
  const char *suffix[] = {"", ".e2e", ""};
  for (uint32_t cap : caps)
    for (const char *op : ops) {
      for (uint32_t B : batches)
        for (int f = 0; f < (cpu ? 3 : 2); f++) {
          std::string nm = std::string(prefix[f]) + op + suffix[f];
          printf("%-7s %9u %6u %-4s", op, cap, B, forms[f]);
          for (uint32_t K : fanouts) {
            double v = -1;
            for (const result_t &r : results)
              if (r.name == nm && r.capacity == cap && r.batch == B && r.fanout == K) v = r.ns;
            if (v < 0)
              printf(" %11s", "-");
            else
              printf(" %11.3f", v);
          }
          printf("\n");
        }
      printf("\n");
    }
  return 0;
}
