/* bench_rows.c - CartPole-shaped rows for the loopback benchmarks (bench_rows.h). */
#include "bench_rows.h"

#include <stdlib.h>

#include "bench_util.h"
#include "cartpole_schema.h"

void bench_rows_make(bench_rows_t *r, uint32_t n) {
  r->obs = xmalloc(n * BENCH_OBS * sizeof(float));
  r->next_obs = xmalloc(n * BENCH_OBS * sizeof(float));
  r->reward = xmalloc(n * sizeof(float));
  r->action = xmalloc(n * sizeof(int32_t));
  r->done = xmalloc(n);
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

void bench_rows_free(bench_rows_t *r) {
  free(r->obs);
  free(r->next_obs);
  free(r->reward);
  free(r->action);
  free(r->done);
}

void bench_rows_buffers(uint8_t *mem, uint32_t n, rdc_buffer_t bufs[5]) {
  static const size_t widths[5] = {BENCH_OBS * sizeof(float), sizeof(int32_t), sizeof(float),
                                   BENCH_OBS * sizeof(float), 1};
  for (int f = 0; f < 5; f++) {
    bufs[f] = (rdc_buffer_t){mem, n * widths[f], 0};
    mem += n * widths[f];
  }
}

void bench_rows_spec(rdc_spec_t *s, const char *name, uint32_t capacity) {
  rdc_spec_init(s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->capacity = capacity;
  s->n_fields = CP_N_FIELDS;
  cartpole_fields(s->fields);
}
