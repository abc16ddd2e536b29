/* rpc_stats.h - what the RPC layer counts for the metrics endpoint: each
 * method's latency histogram and its failures by gRPC status.
 *
 * Off until rd_rpc_stats_enable (the daemon enables it with
 * --metrics-listen), so a daemon without metrics reads no clock for them.
 * An observation is a few relaxed atomic adds, taken on whatever thread
 * served the call; a scrape reads them without stopping anyone, so a
 * histogram read during calls may be a few observations behind, never
 * torn (each bucket is one atomic word). Cardinality is fixed: at most
 * RD_RPC_STATS_METHODS methods and 17 status codes.
 */
#ifndef RD_RPC_STATS_H
#define RD_RPC_STATS_H

#include <stddef.h>
#include <stdint.h>

#define RD_RPC_STATS_METHODS 64
/* Upper bounds (seconds) of the latency buckets, + Inf after them: from
 * a sample's tens of microseconds to a registration's profiling seconds. */
#define RD_RPC_STATS_BUCKETS 18
extern const double rd_rpc_stats_bounds[RD_RPC_STATS_BUCKETS];
#define RD_RPC_STATS_CODES 17 /* gRPC status codes 0..16 */

/* Start counting, naming methods 0..n-1 (names[m] is kept, not copied:
 * static strings). Call once, before the server serves. */
void rd_rpc_stats_enable(const char *const *names, size_t n);
int rd_rpc_stats_enabled(void);

/* One call of method m took seconds and ended with grpc status code. */
void rd_rpc_stats_observe(int m, double seconds, int code);

typedef struct {
  const char *name;                              /* NULL: no such method */
  uint64_t buckets[RD_RPC_STATS_BUCKETS + 1];    /* per bucket, not cumulative; last: + Inf */
  uint64_t count;                                /* the buckets' sum */
  double sum_s;
  uint64_t by_code[RD_RPC_STATS_CODES];
} rd_rpc_method_stats_t;

/* How many methods are named (0 when off), and a copy of method m's. */
size_t rd_rpc_stats_methods(void);
void rd_rpc_stats_read(int m, rd_rpc_method_stats_t *out);

#endif
