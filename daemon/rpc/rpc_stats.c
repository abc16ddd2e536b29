/* rpc_stats.c - RPC latency histograms and failures (rpc_stats.h). */
#include "rpc_stats.h"

#include <stdatomic.h>
#include <string.h>

const double rd_rpc_stats_bounds[RD_RPC_STATS_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

typedef struct {
  atomic_uint_fast64_t buckets[RD_RPC_STATS_BUCKETS + 1];
  atomic_uint_fast64_t sum_ns;
  atomic_uint_fast64_t by_code[RD_RPC_STATS_CODES];
} method_t;

static method_t methods[RD_RPC_STATS_METHODS];
static const char *names[RD_RPC_STATS_METHODS];
static atomic_size_t n_methods; /* 0: off */

void rd_rpc_stats_enable(const char *const *nm, size_t n) {
  if (n > RD_RPC_STATS_METHODS) n = RD_RPC_STATS_METHODS;
  for (size_t m = 0; m < n; m++) names[m] = nm[m];
  atomic_store_explicit(&n_methods, n, memory_order_release);
}

int rd_rpc_stats_enabled(void) {
  return atomic_load_explicit(&n_methods, memory_order_relaxed) != 0;
}

void rd_rpc_stats_observe(int m, double seconds, int code) {
  if (m < 0 || (size_t)m >= atomic_load_explicit(&n_methods, memory_order_relaxed)) return;
  method_t *s = &methods[m];
  if (!(seconds >= 0)) seconds = 0; /* NaN or a clock that stepped back */
  size_t b = 0;
  while (b < RD_RPC_STATS_BUCKETS && seconds > rd_rpc_stats_bounds[b]) b++;
  atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
  double ns = seconds * 1e9;
  atomic_fetch_add_explicit(&s->sum_ns, ns < 1.8e19 ? (uint_fast64_t)ns : 0,
                            memory_order_relaxed);
  if (code < 0 || code >= RD_RPC_STATS_CODES) code = 2; /* UNKNOWN */
  atomic_fetch_add_explicit(&s->by_code[code], 1, memory_order_relaxed);
}

size_t rd_rpc_stats_methods(void) {
  return atomic_load_explicit(&n_methods, memory_order_acquire);
}

void rd_rpc_stats_read(int m, rd_rpc_method_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (m < 0 || (size_t)m >= rd_rpc_stats_methods()) return;
  const method_t *s = &methods[m];
  out->name = names[m];
  for (size_t b = 0; b <= RD_RPC_STATS_BUCKETS; b++) {
    out->buckets[b] = atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
    out->count += out->buckets[b];
  }
  out->sum_s = (double)atomic_load_explicit(&s->sum_ns, memory_order_relaxed) * 1e-9;
  for (size_t c = 0; c < RD_RPC_STATS_CODES; c++)
    out->by_code[c] = atomic_load_explicit(&s->by_code[c], memory_order_relaxed);
}
