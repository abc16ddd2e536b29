/* bench_rows.c - CartPole-shaped rows for the loopback benchmarks (bench_rows.h). */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "bench_rows.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "cartpole_schema.h"
#include "rd_clock.h"

void bench_rows_make(bench_rows_t *r, uint32_t n) {
  /* In this order every column stays aligned for its type. */
  r->mem = xmalloc((size_t)n * BENCH_ROW_BYTES);
  r->obs = (float *)r->mem;
  r->next_obs = r->obs + (size_t)n * BENCH_OBS;
  r->reward = r->next_obs + (size_t)n * BENCH_OBS;
  r->action = (int32_t *)(r->reward + n);
  r->done = (uint8_t *)(r->action + n);
  for (uint32_t i = 0; i < n; i++) {
    for (int k = 0; k < BENCH_OBS; k++)
      r->obs[i * BENCH_OBS + k] = r->next_obs[i * BENCH_OBS + k] = (float)(i + k);
    r->reward[i] = 1.0f;
    r->action[i] = (int32_t)(i & 1);
    r->done[i] = (i % 200) == 199;
  }
  r->cols[0] = (rdc_column_t){r->obs, n * BENCH_OBS * sizeof(float)};
  r->cols[1] = (rdc_column_t){r->action, n * sizeof(int32_t)};
  r->cols[2] = (rdc_column_t){r->reward, n * sizeof(float)};
  r->cols[3] = (rdc_column_t){r->next_obs, n * BENCH_OBS * sizeof(float)};
  r->cols[4] = (rdc_column_t){r->done, n};
}

void bench_rows_free(bench_rows_t *r) { free(r->mem); }

void bench_rows_fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n, uint32_t batch) {
  bench_rows_t r;
  bench_rows_make(&r, batch);
  rdc_error_t e;
  for (uint32_t done = 0; done < n; done += batch)
    if (rdc_insert_batch(c, w->id, w->token, batch, r.cols, 5, NULL, NULL, &e) != RDC_OK)
      die("insert: %s", e.msg);
  bench_rows_free(&r);
}

void bench_sample_make(bench_sample_t *s, uint32_t n) {
  static const size_t widths[5] = {BENCH_OBS * sizeof(float), sizeof(int32_t), sizeof(float),
                                   BENCH_OBS * sizeof(float), 1};
  s->keys = xmalloc(n * sizeof *s->keys);
  s->prob = xmalloc(n * sizeof *s->prob);
  s->weight = xmalloc(n * sizeof *s->weight);
  s->mem = xmalloc((size_t)n * BENCH_ROW_BYTES);
  uint8_t *p = s->mem;
  for (int f = 0; f < 5; f++) {
    s->bufs[f] = (rdc_buffer_t){p, n * widths[f], 0};
    p += n * widths[f];
  }
  s->io = (rdc_sample_t){s->keys, s->prob, s->weight, s->bufs, 5, 0, 0};
}

void bench_sample_free(bench_sample_t *s) {
  free(s->keys);
  free(s->prob);
  free(s->weight);
  free(s->mem);
}

int64_t bench_sample_until(rdc_client_t *c, const rdc_workload_t *w, bench_sample_t *s,
                           uint32_t batch, double t_end, bench_lat_t *lat) {
  int64_t items = 0;
  rdc_error_t e;
  while (rd_clock_now() < t_end) {
    double t0 = rd_clock_now();
    if (rdc_sample(c, w->id, w->token, batch, NAN, 0, &s->io, &e) != RDC_OK) {
      fprintf(stderr, "%s: sample: %s\n", program_invocation_short_name, e.msg);
      return -1;
    }
    if (lat != NULL) bench_lat_add(lat, rd_clock_now() - t0);
    items += batch;
  }
  return items;
}

void bench_rows_spec(rdc_spec_t *s, const char *name, uint32_t capacity) {
  rdc_spec_init(s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->capacity = capacity;
  s->n_fields = CP_N_FIELDS;
  cartpole_fields(s->fields);
}
