/* bench_c_client.c - the C client's side of bench/bench_python_client.py.
 *
 *   bench_c_client TARGET ID TOKEN insert|sample|stream STREAMS BATCH SECONDS
 *
 * Against a running replayd and an existing workload of bench_grpc's
 * CartPole schema (obs float32[4], action int32, reward float32, next_obs
 * float32[4], done bool: 41 bytes a row), runs STREAMS threads for SECONDS,
 * each with its own connection, doing what bench_grpc's grpc.insert and
 * grpc.sample do:
 *   insert  one Insert stream per thread, writing messages of BATCH rows;
 *   sample  Sample(BATCH) with rows, in a loop;
 *   stream  a sampler (rdc_sampler_*, window 8) taking batches of BATCH as
 *           fast as they come, as bench_flow's grpc.sample_stream.
 * Prints one line, "ITEMS ELAPSED_S", on stdout, so that the Python
 * benchmark measures both clients against the same daemon and workload.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rd_clock.h"
#include "replayd_client.h"

#define OBS 4
#define N_FIELDS 5

static const size_t widths[N_FIELDS] = {OBS * 4, 4, 4, OBS * 4, 1};

typedef struct {
  const char *target, *id, *token;
  uint32_t batch;
  double t_end;
  uint64_t items;
  int failed;
  int stream; /* sample through a sampler (SampleStream) */
} job_t;

static void *insert_worker(void *arg) {
  job_t *j = arg;
  uint32_t n = j->batch;
  float *obs = xmalloc(n * OBS * sizeof(float)), *next = xmalloc(n * OBS * sizeof(float));
  float *reward = xmalloc(n * sizeof(float));
  int32_t *action = xmalloc(n * sizeof(int32_t));
  uint8_t *done = xmalloc(n);
  for (uint32_t i = 0; i < n; i++) {
    for (int k = 0; k < OBS; k++) obs[i * OBS + k] = next[i * OBS + k] = (float)(i + k);
    reward[i] = 1.0f;
    action[i] = (int32_t)(i & 1);
    done[i] = (i % 200) == 199;
  }
  rdc_column_t cols[N_FIELDS] = {{obs, n * widths[0]}, {action, n * widths[1]},
                                 {reward, n * widths[2]}, {next, n * widths[3]},
                                 {done, n * widths[4]}};
  rdc_client_t *c;
  rdc_error_t err;
  rdc_insert_stream_t *s = NULL;
  if (rdc_connect(j->target, 5, &c, &err) != RDC_OK) {
    fprintf(stderr, "bench_c_client: connect: %s\n", err.msg);
    j->failed = 1;
    goto out;
  }
  rdc_set_deadline(c, 600);
  if (rdc_insert_stream_open(c, j->id, j->token, &s, &err) != RDC_OK) {
    fprintf(stderr, "bench_c_client: open: %s\n", err.msg);
    j->failed = 1;
  } else {
    uint64_t sent = 0, inserted = 0;
    while (rd_clock_now() < j->t_end) {
      if (rdc_insert_stream_write(s, n, cols, N_FIELDS, NULL, &err) != RDC_OK) {
        fprintf(stderr, "bench_c_client: write: %s\n", err.msg);
        j->failed = 1;
        break;
      }
      sent += n;
    }
    if (rdc_insert_stream_close(s, &inserted, NULL, &err) != RDC_OK) {
      fprintf(stderr, "bench_c_client: close: %s\n", err.msg);
      j->failed = 1;
    } else if (inserted != sent) {
      j->failed = 1;
    }
    j->items = inserted;
  }
  rdc_close(c);
out:
  free(obs);
  free(next);
  free(reward);
  free(action);
  free(done);
  return NULL;
}

static void *sample_worker(void *arg) {
  job_t *j = arg;
  uint32_t b = j->batch;
  uint64_t *keys = xmalloc(b * sizeof *keys);
  double *pr = xmalloc(b * sizeof *pr), *w = xmalloc(b * sizeof *w);
  size_t row = 0;
  for (int f = 0; f < N_FIELDS; f++) row += widths[f];
  uint8_t *mem = xmalloc(b * row);
  rdc_buffer_t bufs[N_FIELDS];
  uint8_t *p = mem;
  for (int f = 0; f < N_FIELDS; f++) {
    bufs[f] = (rdc_buffer_t){p, b * widths[f], 0};
    p += b * widths[f];
  }
  rdc_client_t *c;
  rdc_error_t err;
  if (rdc_connect(j->target, 5, &c, &err) != RDC_OK) {
    fprintf(stderr, "bench_c_client: connect: %s\n", err.msg);
    j->failed = 1;
  } else {
    rdc_set_deadline(c, 30);
    rdc_sampler_t *s = NULL;
    rdc_sampler_opts_t so;
    rdc_sampler_opts_init(&so);
    so.batch_size = b;
    so.window = 8;
    if (j->stream && rdc_sampler_open(c, j->id, j->token, &so, &s, &err) != RDC_OK) {
      fprintf(stderr, "bench_c_client: sampler: %s\n", err.msg);
      j->failed = 1;
    }
    while (!j->failed && rd_clock_now() < j->t_end) {
      rdc_sample_t io = {keys, pr, w, bufs, N_FIELDS, 0, 0};
      int rc = j->stream ? rdc_sampler_next(s, 30, &io, &err)
                         : rdc_sample(c, j->id, j->token, b, NAN, 0, &io, &err);
      if (rc != RDC_OK) {
        fprintf(stderr, "bench_c_client: sample: %s\n", err.msg);
        j->failed = 1;
        break;
      }
      j->items += b;
    }
    if (s != NULL) rdc_sampler_close(s, NULL);
    rdc_close(c);
  }
  free(keys);
  free(pr);
  free(w);
  free(mem);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 8 || (strcmp(argv[4], "insert") != 0 && strcmp(argv[4], "sample") != 0 &&
                    strcmp(argv[4], "stream") != 0)) {
    fprintf(stderr,
            "usage: bench_c_client TARGET ID TOKEN insert|sample|stream STREAMS BATCH SECONDS\n");
    return 2;
  }
  int streams = atoi(argv[5]), batch = atoi(argv[6]);
  double seconds = atof(argv[7]);
  if (streams < 1 || streams > 64 || batch < 1 || batch > 65536 || !(seconds > 0)) {
    fprintf(stderr, "bench_c_client: STREAMS 1..64, BATCH 1..65536, SECONDS > 0\n");
    return 2;
  }
  void *(*fn)(void *) = strcmp(argv[4], "insert") == 0 ? insert_worker : sample_worker;
  job_t *jobs = calloc((size_t)streams, sizeof *jobs);
  pthread_t *th = calloc((size_t)streams, sizeof *th);
  if (jobs == NULL || th == NULL) die("out of memory");
  double t0 = rd_clock_now();
  for (int i = 0; i < streams; i++) {
    jobs[i] = (job_t){argv[1], argv[2], argv[3], (uint32_t)batch, t0 + seconds, 0, 0,
                      strcmp(argv[4], "stream") == 0};
    if (pthread_create(&th[i], NULL, fn, &jobs[i]) != 0) die("pthread_create failed");
  }
  uint64_t items = 0;
  int failed = 0;
  for (int i = 0; i < streams; i++) {
    pthread_join(th[i], NULL);
    items += jobs[i].items;
    failed |= jobs[i].failed;
  }
  double elapsed = rd_clock_now() - t0;
  printf("%llu %.6f\n", (unsigned long long)items, elapsed);
  free(jobs);
  free(th);
  return failed;
}
