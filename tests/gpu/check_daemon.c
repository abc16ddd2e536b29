/* check_daemon.c - the daemon end to end on a GPU: a workload whose
 * mapping puts the sum tree and the rows on the GPU (G-G-G) samples exactly
 * what the same workload samples on a CPU-only daemon.
 *
 * Starts two replayd processes from REPLAYD (one that sees the GPU, one
 * with CUDA_VISIBLE_DEVICES empty), registers the same Hopper-shaped DDPG
 * workload on both (batch 16384, 2^20 items: large enough that the mapper
 * puts the replay module and storage on the GPU), inserts the same rows,
 * then alternates samples (stratified and not) and priority updates on
 * both: keys, probabilities, weights and every column must be the same
 * bytes, since the GPU tree is the CPU tree integer for integer. Then it
 * trains a few steps on each and checks the GPU workload still runs where
 * it was placed. One "ok"/"FAIL" line per check; exit 0 when all passed,
 * 1 otherwise, 77 when the first daemon sees no usable GPU (nothing to
 * check) or its workload was not placed on it (printed: the mapping).
 *
 * usage: check_gpu_daemon REPLAYD [ROWS]
 * (CHECK_GPU_DAEMON_WITHOUT_GPU=1: compare anyway, CPU against CPU.)
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdt_check.h"
#include "rdt_client.h"
#include "rdt_daemon.h"
#include "replayd_client.h"

#define OBS 11
#define ACT 3
#define BATCH 16384
#define CAPACITY (1u << 20)

/* One daemon that sees the GPUs, or (gpu 0) one that does not. */
static int start(rdt_daemon_t *d, const char *replayd, int gpu) {
  static const char *const args[] = {"--max-memory", "16G", "--learner-threads", "4", NULL};
  rdt_daemon_opts_t o = {.args = args, .tag = "gpucheck", .hide_gpus = !gpu};
  return rdt_daemon_start(d, replayd, &o);
}

static void stop(rdt_daemon_t *d) {
  if (d->pid <= 0) return;
  char target[sizeof d->target];
  snprintf(target, sizeof target, "%s", d->target);
  rdt_check(rdt_daemon_stop(d) == 0, "daemon %s stopped cleanly", target);
}

static void make_spec(rdc_spec_t *s) {
  rdc_spec_init(s);
  snprintf(s->name, sizeof s->name, "gpu-check");
  s->n_fields = 5;
  rdt_client_field(&s->fields[0], "obs", RDC_DTYPE_FLOAT32, OBS);
  rdt_client_field(&s->fields[1], "action", RDC_DTYPE_FLOAT32, ACT);
  rdt_client_field(&s->fields[2], "reward", RDC_DTYPE_FLOAT32, 0);
  rdt_client_field(&s->fields[3], "next_obs", RDC_DTYPE_FLOAT32, OBS);
  rdt_client_field(&s->fields[4], "discount", RDC_DTYPE_FLOAT32, 0);
  s->capacity = CAPACITY;
  s->seed = 20261126;
  s->max_batch = BATCH;
  s->has_learner = 1;
  snprintf(s->learner.algorithm, sizeof s->learner.algorithm, "ddpg");
  s->learner.n_hidden = 2;
  s->learner.hidden[0] = s->learner.hidden[1] = 256;
  s->learner.batch_size = BATCH;
}

static const size_t widths[5] = {OBS * 4, ACT * 4, 4, OBS * 4, 4};

/* n rows starting at row r0: deterministic values. */
static void make_rows(uint32_t n, uint64_t r0, uint8_t *mem, rdc_column_t cols[5]) {
  uint8_t *p = mem;
  for (int f = 0; f < 5; f++) {
    float *v = (float *)p;
    for (uint64_t i = 0; i < n * widths[f] / 4; i++)
      v[i] = (float)((int64_t)((r0 * 131 + i * 7 + (uint64_t)f * 977) % 2001) - 1000) / 1000.0f;
    if (f == 4)
      for (uint32_t i = 0; i < n; i++) v[i] = (r0 + i) % 50 == 0 ? 0.0f : 0.99f;
    cols[f] = (rdc_column_t){p, n * widths[f]};
    p += n * widths[f];
  }
}

typedef struct {
  uint64_t *keys;
  double *pr, *w, *pri;
  uint8_t *mem;
  rdc_buffer_t bufs[5];
} sample_buf_t;

static void sample_buf_init(sample_buf_t *b) {
  b->keys = calloc(BATCH, sizeof *b->keys);
  b->pr = calloc(BATCH, sizeof *b->pr);
  b->w = calloc(BATCH, sizeof *b->w);
  b->pri = calloc(BATCH, sizeof *b->pri);
  size_t row = 0;
  for (int f = 0; f < 5; f++) row += widths[f];
  b->mem = calloc(BATCH, row);
  uint8_t *p = b->mem;
  for (int f = 0; f < 5; f++) {
    b->bufs[f] = (rdc_buffer_t){p, BATCH * widths[f], 0};
    p += BATCH * widths[f];
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: check_gpu_daemon REPLAYD [ROWS]\n");
    return 2;
  }
  uint64_t rows = argc > 2 ? strtoull(argv[2], NULL, 10) : 3u * BATCH * 8;
  int rmm_on_gpu = 0, rows_on_gpu = 0;
  rdt_daemon_t gd = {0}, cd = {0};
  if (start(&gd, argv[1], 1) || start(&cd, argv[1], 0)) {
    fprintf(stderr, "check_gpu_daemon: a daemon did not start (logs in /tmp/rdt_gpucheck.*)\n");
    return 1;
  }
  rdc_client_t *g, *c;
  rdc_error_t e;
  if (rdc_connect(gd.target, 10, &g, &e) || rdc_connect(cd.target, 10, &c, &e)) {
    fprintf(stderr, "check_gpu_daemon: connect: %s\n", e.msg);
    return 1;
  }
  rdc_set_deadline(g, 120);
  rdc_set_deadline(c, 120);
  rdc_device_t *devs;
  size_t nd;
  int have_gpu = 0;
  if (rdc_list_devices(g, &devs, &nd, &e) == RDC_OK) {
    for (size_t i = 0; i < nd; i++) {
      printf("# device %s: %s (%s)\n", devs[i].kind, devs[i].name, devs[i].status);
      if (strcmp(devs[i].kind, "gpu") == 0 && strncmp(devs[i].status, "ok", 2) == 0) have_gpu = 1;
    }
    rdc_devices_free(devs);
  }
  /* CHECK_GPU_DAEMON_WITHOUT_GPU=1 runs the comparison CPU against CPU, to
   * check this program itself on a machine without a GPU. */
  if (!have_gpu && getenv("CHECK_GPU_DAEMON_WITHOUT_GPU") == NULL) {
    printf("# no usable GPU: nothing to check\n");
    rdc_close(g);
    rdc_close(c);
    stop(&gd), stop(&cd);
    return 77;
  }
  rdc_spec_t spec;
  make_spec(&spec);
  rdc_workload_t *wg = calloc(1, sizeof *wg), *wc = calloc(1, sizeof *wc);
  int rc = rdc_register(g, &spec, wg, &e);
  rdt_check(rc == RDC_OK, "register on the GPU daemon%s%s", rc ? ": " : "", rc ? e.msg : "");
  rc = rdc_register(c, &spec, wc, &e);
  rdt_check(rc == RDC_OK, "register on the CPU daemon%s%s", rc ? ": " : "", rc ? e.msg : "");
  if (rdt_check_failed()) goto out;
  printf("# GPU daemon: mapping %s, running %s, predicted %.4g GPS; note: %s\n",
         wg->placement.mapping, wg->placement.running, wg->placement.predicted_gps,
         wg->placement.note);
  for (size_t i = 0; i < wg->placement.n_rows; i++)
    printf("#   %s: learner %.3g s (%s), rmm %.3g s (%s) %s\n", wg->placement.rows[i].device,
           wg->placement.rows[i].learner_s, wg->placement.rows[i].learner_source,
           wg->placement.rows[i].rmm_s, wg->placement.rows[i].rmm_source,
           wg->placement.rows[i].detail);
  printf("# CPU daemon: mapping %s, running %s\n", wc->placement.mapping, wc->placement.running);
  rmm_on_gpu = wg->placement.running[2] == 'G';
  rows_on_gpu = wg->placement.running[4] == 'G';
  if (!rmm_on_gpu && !rows_on_gpu)
    printf("# the mapper kept the replay module and rows off the GPU: the comparison below is "
           "CPU against CPU\n");
  rdt_check(strcmp(wc->placement.running, "C-C-C") == 0, "the CPU daemon runs C-C-C (%s)",
        wc->placement.running);

  /* The same rows into both. */
  uint8_t *mem = malloc((size_t)BATCH * 128);
  rdc_column_t cols[5];
  uint64_t done = 0;
  for (; done < rows; done += BATCH) {
    make_rows(BATCH, done, mem, cols);
    if (rdc_insert_batch(g, wg->id, wg->token, BATCH, cols, 5, NULL, NULL, &e) ||
        rdc_insert_batch(c, wc->id, wc->token, BATCH, cols, 5, NULL, NULL, &e))
      break;
  }
  rdt_check(done >= rows, "inserted %llu rows into both (%s)", (unsigned long long)done,
        done >= rows ? "ok" : e.msg);

  sample_buf_t a, b;
  sample_buf_init(&a);
  sample_buf_init(&b);
  uint64_t s = 12345;
  for (int r = 0; r < 8; r++) {
    int strat = r & 1;
    rdc_sample_t ia = {a.keys, a.pr, a.w, a.bufs, 5, 0, 0};
    rdc_sample_t ib = {b.keys, b.pr, b.w, b.bufs, 5, 0, 0};
    int ra = rdc_sample(g, wg->id, wg->token, BATCH, 0.4, strat, &ia, &e);
    int rb = rdc_sample(c, wc->id, wc->token, BATCH, 0.4, strat, &ib, &e);
    int same = ra == RDC_OK && rb == RDC_OK &&
               memcmp(a.keys, b.keys, BATCH * 8) == 0 && memcmp(a.pr, b.pr, BATCH * 8) == 0 &&
               memcmp(a.w, b.w, BATCH * 8) == 0;
    for (int f = 0; same && f < 5; f++)
      same = a.bufs[f].bytes == b.bufs[f].bytes &&
             memcmp(a.bufs[f].data, b.bufs[f].data, a.bufs[f].bytes) == 0;
    rdt_check(same, "sample %d (%s, batch %d): keys, probabilities, weights and rows identical%s%s",
          r, strat ? "stratified" : "independent", BATCH, ra || rb ? ": " : "",
          ra || rb ? e.msg : "");
    for (uint32_t i = 0; i < BATCH; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      a.pri[i] = (double)(s >> 40) / (double)(1ull << 24) * 3.0 + 1e-3;
    }
    uint64_t app_a = 0, app_b = 0, st_a = 0, st_b = 0;
    ra = rdc_update_priorities(g, wg->id, wg->token, BATCH, a.keys, a.pri, &app_a, &st_a, &e);
    rb = rdc_update_priorities(c, wc->id, wc->token, BATCH, b.keys, a.pri, &app_b, &st_b, &e);
    rdt_check(ra == RDC_OK && rb == RDC_OK && app_a == app_b && st_a == st_b,
          "update %d: applied %llu / %llu, stale %llu / %llu", r, (unsigned long long)app_a,
          (unsigned long long)app_b, (unsigned long long)st_a, (unsigned long long)st_b);
  }

  rdc_train_result_t tg, tc;
  int rg = rdc_train_step(g, wg->id, wg->token, 20, &tg, &e);
  rdt_check(rg == RDC_OK && tg.steps_done == 20 && isfinite(tg.loss_mean),
        "20 train steps on the GPU daemon: loss %.4g, %.1f steps/s%s%s", tg.loss_mean,
        tg.steps_per_second, rg ? ": " : "", rg ? e.msg : "");
  int rcpu = rdc_train_step(c, wc->id, wc->token, 20, &tc, &e);
  rdt_check(rcpu == RDC_OK && tc.steps_done == 20, "20 train steps on the CPU daemon: %.1f steps/s",
        tc.steps_per_second);
  rc = rdc_describe(g, wg->id, wg, &e);
  rdt_check(rc == RDC_OK, "describe after training");
  printf("# GPU daemon after training: running %s, measured %.4g GPS; note: %s\n",
         wg->placement.running, wg->placement.measured_gps, wg->placement.note);
  rdt_check((wg->placement.running[2] == 'G') == rmm_on_gpu &&
            (wg->placement.running[4] == 'G') == rows_on_gpu,
        "still running where it was placed (%s)", wg->placement.running);
out:
  rdc_close(g);
  rdc_close(c);
  stop(&gd);
  stop(&cd);
  printf("check_gpu_daemon: %d ok, %d FAIL (replay module %s the GPU, rows %s)\n",
         rdt_check_passed(), rdt_check_failed(),
         rmm_on_gpu ? "on" : "off", rows_on_gpu ? "on" : "off");
  if (rdt_check_failed()) return 1;
  return rmm_on_gpu || rows_on_gpu ? 0 : 77;
}
