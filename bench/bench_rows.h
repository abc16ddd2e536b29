/* bench_rows.h - the CartPole-shaped rows the loopback benchmarks insert
 * (obs float32[4], action int32, reward float32, next_obs float32[4], done
 * bool: 41 bytes a row), as the C client's columns.
 *
 * Contract: bench_rows_make allocates with xmalloc (it dies rather than
 * fail) and fills n rows; bench_rows_free frees them; bench_rows_buffers
 * allocates nothing. */
#ifndef RD_BENCH_ROWS_H
#define RD_BENCH_ROWS_H

#include <stdint.h>

#include "replayd_client.h"

#define BENCH_OBS 4
#define BENCH_ROW_BYTES 41

typedef struct {
  float *obs, *reward, *next_obs;
  int32_t *action;
  uint8_t *done;
  rdc_column_t cols[5];
} bench_rows_t;

void bench_rows_make(bench_rows_t *r, uint32_t n);
void bench_rows_free(bench_rows_t *r);

/* The spec of a workload these rows fit: name, capacity and the five
 * fields (clients/c/examples/cartpole_schema.h's), nothing else set. */
void bench_rows_spec(rdc_spec_t *s, const char *name, uint32_t capacity);

/* A sample's buffers for n rows of those five columns, one after the
 * other in mem (n * BENCH_ROW_BYTES bytes). */
void bench_rows_buffers(uint8_t *mem, uint32_t n, rdc_buffer_t bufs[5]);

#endif
