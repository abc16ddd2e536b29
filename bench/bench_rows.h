/* bench_rows.h - the CartPole-shaped rows the loopback benchmarks insert
 * (obs float32[4], action int32, reward float32, next_obs float32[4], done
 * bool: 41 bytes a row), as the C client's columns, and what sampling them
 * back takes: a sample's buffers and a loop of Sample calls.
 *
 * Contract: bench_rows_make and bench_sample_make allocate with xmalloc
 * (they die rather than fail), bench_rows_free and bench_sample_free free
 * what they allocated; bench_rows_fill dies when the server refuses rows. */
#ifndef RD_BENCH_ROWS_H
#define RD_BENCH_ROWS_H

#include <stdint.h>

#include "bench_util.h"
#include "replayd_client.h"

#define BENCH_OBS 4
#define BENCH_ROW_BYTES 41

typedef struct {
  float *obs, *reward, *next_obs;
  int32_t *action;
  uint8_t *done;
  uint8_t *mem; /* the columns above, one after the other (n * BENCH_ROW_BYTES) */
  rdc_column_t cols[5];
} bench_rows_t;

void bench_rows_make(bench_rows_t *r, uint32_t n);
void bench_rows_free(bench_rows_t *r);

/* The spec of a workload these rows fit: name, capacity and the five
 * fields (clients/c/examples/cartpole_schema.h's), nothing else set. */
void bench_rows_spec(rdc_spec_t *s, const char *name, uint32_t capacity);

/* Insert n rows into w (bench_rows_make's, in InsertBatch calls of batch
 * rows; n a multiple of batch): rows to sample from. */
void bench_rows_fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n, uint32_t batch);

/* What rdc_sample writes for up to n rows of these five columns: io, with
 * its keys, probabilities, weights and columns set, can be passed to every
 * call (its outputs are overwritten). */
typedef struct {
  uint64_t *keys;
  double *prob, *weight;
  uint8_t *mem; /* the columns, one after the other (n * BENCH_ROW_BYTES) */
  rdc_buffer_t bufs[5];
  rdc_sample_t io;
} bench_sample_t;

void bench_sample_make(bench_sample_t *s, uint32_t n);
void bench_sample_free(bench_sample_t *s);

/* Sample calls of batch rows on w, one at a time, until rd_clock_now()
 * reaches t_end; with lat, each call's seconds are added to it. The rows
 * sampled, or -1 after a failed call (its reason on stderr). */
int64_t bench_sample_until(rdc_client_t *c, const rdc_workload_t *w, bench_sample_t *s,
                           uint32_t batch, double t_end, bench_lat_t *lat);

#endif
