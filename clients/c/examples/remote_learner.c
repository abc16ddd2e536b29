/* remote_learner.c - replayd-remote-learner: the replay side of a learner
 * that trains on its own machine (the Reverb-style use of replayd).
 *
 *   replayd-remote-learner --workload ID --token T [--batch B] [--iterations N]
 *                          [--window W] [--beta B] [--stratified] [--gamma G]
 *
 * The learner's loop is one SampleStream (rdc_sampler_*): the server keeps
 * W batches sampled ahead of it, so a batch is usually here when the
 * learner asks. Each iteration takes a batch of CartPole transitions,
 * checks what came back (counts, column sizes, probabilities, importance
 * weights), computes a new |delta| per item and sends it back on the same
 * stream. When the workload has a rate limiter, batches come as fast as it
 * lets them (at its samples per insert); at the end the program prints the
 * ratio the server kept.
 *
 * PLACEHOLDER: there is no network yet (hosted learning comes later), so
 * |delta| is the TD error of a fixed hand-made value function,
 *   V(s) = (1 - |theta| / 12 deg) * (1 - |x| / 2.4) / (1 - gamma),
 *   |delta| = |r + gamma * (1 - done) * V(s') - V(s)|,
 * which is large near failures and small where the pole is safely up. It
 * exercises the sample -> update loop with plausible priorities; it learns
 * nothing. Replace it with the real learner's TD errors.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cartpole.h"
#include "cartpole_schema.h"
#include "example_args.h"
#include "replayd_client.h"

static const char *prog = "replayd-remote-learner";

static void usage(FILE *f) {
  fprintf(f,
          "usage: replayd-remote-learner [OPTIONS]\n"
          "\n"
          "Sample CartPole batches from a replayd workload and update their priorities.\n"
          "\n"
          "  --server HOST:PORT  server (default $REPLAYD_SERVER, else 127.0.0.1:50051)\n"
          "  --workload ID       the workload (default $REPLAYD_WORKLOAD)\n"
          "  --token T           its token (default $REPLAYD_TOKEN)\n"
          "  --batch B           items per sample (default 256)\n"
          "  --iterations N      sample/update rounds (default 1000)\n"
          "  --window W          batches the server keeps in flight, 1..64 (default 4)\n"
          "  --beta B            importance-sampling exponent (default: the workload's)\n"
          "  --stratified        stratified sampling (one draw per priority slice)\n"
          "  --gamma G           discount of the stand-in TD error (default 0.99)\n"
          "  --timeout S         connect timeout, per-call deadline, how long to wait\n"
          "                      for an empty table to fill and for each batch (default 10)\n"
          "  --wait              wait for the server: at start (until --timeout) and\n"
          "                      whenever it restarts, instead of failing at once\n"
          "  -h, --help          this text\n");
}

/* The placeholder value function (see the file comment). */
static double stand_in_value(const float *obs, double gamma) {
  double up = 1.0 - fabs(obs[2]) / CARTPOLE_THETA_LIMIT;
  double centred = 1.0 - fabs(obs[0]) / CARTPOLE_X_LIMIT;
  if (up < 0) up = 0;
  if (centred < 0) centred = 0;
  return up * centred / (1.0 - gamma);
}

int main(int argc, char **argv) {
  ex_conn_t conn;
  ex_conn_init(&conn);
  uint64_t batch = 256, iterations = 1000, window = 4;
  double beta = NAN, gamma = 0.99;
  int stratified = 0;

  for (int i = 1; i < argc; i++) {
    const char *v;
    if (ex_common_opt(&conn, 1, argc, argv, &i, usage, prog)) {
      continue;
    } else if (strcmp(argv[i], "--stratified") == 0) {
      stratified = 1;
    } else if ((v = ex_opt(argc, argv, &i, "--batch", prog))) {
      batch = ex_u64(v, "--batch", 1, 1u << 20, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--window", prog))) {
      window = ex_u64(v, "--window", 1, 64, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--iterations", prog))) {
      iterations = ex_u64(v, "--iterations", 1, UINT64_MAX, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--beta", prog))) {
      beta = ex_double(v, "--beta", 0, 1, prog);
    } else if ((v = ex_opt(argc, argv, &i, "--gamma", prog))) {
      gamma = ex_double(v, "--gamma", 0, 0.9999, prog);
    } else {
      ex_usage_exit(prog, "unknown argument ", argv[i]);
    }
  }
  if (conn.workload == NULL || conn.token == NULL)
    ex_usage_exit(prog, "give --workload ID --token T (or $REPLAYD_WORKLOAD, $REPLAYD_TOKEN)", "");

  rdc_client_t *c;
  rdc_error_t e;
  if (ex_connect(&conn, &c, &e) != RDC_OK) return ex_fail(prog, NULL, &e);

  rdc_workload_t *wl = malloc(sizeof *wl);
  if (wl == NULL) return 1;
  if (ex_cartpole_workload(c, conn.workload, wl, prog) != 0) return 1;

  /* Buffers sized from the described schema: one per field. */
  size_t b = (size_t)batch;
  rdc_buffer_t cols[CP_N_FIELDS];
  size_t field_bytes[CP_N_FIELDS];
  for (int i = 0; i < CP_N_FIELDS; i++) {
    field_bytes[i] = rdc_field_bytes(&wl->spec.fields[i]);
    cols[i].capacity = b * field_bytes[i];
    cols[i].data = malloc(cols[i].capacity);
    cols[i].bytes = 0;
  }
  uint64_t *keys = malloc(b * sizeof *keys);
  double *probs = malloc(b * sizeof *probs);
  double *weights = malloc(b * sizeof *weights);
  double *delta = malloc(b * sizeof *delta);
  int no_memory = !keys || !probs || !weights || !delta;
  for (int i = 0; i < CP_N_FIELDS; i++) no_memory |= cols[i].data == NULL;
  if (no_memory) {
    fprintf(stderr, "%s: out of memory for a batch of %zu\n", prog, b);
    return 1;
  }

  rdc_sample_t smp = {.keys = keys, .probabilities = probs, .weights = weights,
                      .columns = cols, .n_columns = CP_N_FIELDS};
  rdc_sampler_opts_t so;
  rdc_sampler_opts_init(&so);
  so.batch_size = (uint32_t)b;
  so.beta = beta;
  so.stratified = stratified;
  so.window = (uint32_t)window;
  rdc_sampler_t *sampler = NULL;
  uint64_t samples_total = 0;
  /* The server's update counters before: the stream's updates are told
   * apart from the rest by the difference (stale: overwritten since). */
  rdc_counters_t before = wl->counters;
  double delta_sum = 0, t_wait = 0;
  double t0 = rd_clock_now(), wait_until = t0 + conn.timeout;
  int rc = 0;
  if (rdc_sampler_open(c, conn.workload, conn.token, &so, &sampler, &e) != RDC_OK)
    rc = ex_fail(prog, NULL, &e);
  for (uint64_t it = 0; it < iterations && rc == 0; it++) {
    double ts = rd_clock_now();
    int r = rdc_sampler_next(sampler, conn.timeout, &smp, &e);
    if (r == RDC_FAILED_PRECONDITION && samples_total == 0 && rd_clock_now() < wait_until) {
      /* An empty table and no rate limiter to wait in (the actor has not
       * started yet): the stream ended; open another a little later. */
      rdc_sampler_close(sampler, NULL);
      sampler = NULL;
      usleep(100 * 1000);
      if (rdc_sampler_open(c, conn.workload, conn.token, &so, &sampler, &e) != RDC_OK)
        rc = ex_fail(prog, NULL, &e);
      it--;
      continue;
    }
    if (r != RDC_OK) {
      rc = ex_fail(prog, NULL, &e);
      break;
    }
    t_wait += rd_clock_now() - ts;

    /* Check what came back. */
    if (smp.count != b) {
      fprintf(stderr, "%s: asked for %zu items, got %" PRIu32 "\n", prog, b, smp.count);
      rc = 1;
      break;
    }
    for (int i = 0; i < CP_N_FIELDS && rc == 0; i++)
      if (cols[i].bytes != b * field_bytes[i]) {
        fprintf(stderr, "%s: column %s has %zu bytes, expected %zu\n", prog,
                wl->spec.fields[i].name, cols[i].bytes, b * field_bytes[i]);
        rc = 1;
      }
    double wmax = 0;
    for (size_t k = 0; k < b && rc == 0; k++) {
      if (!(probs[k] > 0 && probs[k] <= 1) || !(weights[k] > 0 && weights[k] <= 1 + 1e-9)) {
        fprintf(stderr, "%s: item %zu: probability %g, weight %g out of (0, 1]\n", prog, k,
                probs[k], weights[k]);
        rc = 1;
      }
      if (weights[k] > wmax) wmax = weights[k];
    }
    if (rc == 0 && fabs(wmax - 1) > 1e-6) {
      fprintf(stderr, "%s: the largest IS weight is %g, not 1\n", prog, wmax);
      rc = 1;
    }
    if (rc) break;

    const float *obs = cols[CP_F_OBS].data, *next = cols[CP_F_NEXT_OBS].data;
    const float *rew = cols[CP_F_REWARD].data;
    const uint8_t *done = cols[CP_F_DONE].data;
    for (size_t k = 0; k < b; k++) {
      double v = stand_in_value(&obs[4 * k], gamma);
      double v_next = done[k] ? 0.0 : stand_in_value(&next[4 * k], gamma);
      delta[k] = fabs(rew[k] + gamma * v_next - v);
      delta_sum += delta[k];
    }
    if (rdc_sampler_update(sampler, b, keys, delta, &e) != RDC_OK) {
      rc = ex_fail(prog, NULL, &e);
      break;
    }
    samples_total += b;
  }
  double dt = rd_clock_now() - t0;
  if (sampler != NULL && rdc_sampler_close(sampler, &e) != RDC_OK && rc == 0)
    rc = ex_fail(prog, NULL, &e);
  if (rc == 0) {
    printf("%" PRIu64 " batches of %zu in %.3f s: %.0f samples/s (waiting for batches %.1f%% "
           "of the time, window %" PRIu64 ")\n",
           iterations, b, dt, dt > 0 ? (double)samples_total / dt : 0.0,
           dt > 0 ? 100 * t_wait / dt : 0.0, window);
    int described = rdc_describe(c, conn.workload, wl, &e) == RDC_OK;
    if (described)
      printf("priority updates: %" PRIu64 " applied, %" PRIu64 " stale (slot overwritten since "
             "sampled); mean stand-in |delta| %.3f; table size %" PRIu64 "\n",
             wl->counters.updates - before.updates,
             wl->counters.stale_updates - before.stale_updates,
             samples_total ? delta_sum / (double)samples_total : 0.0, smp.table_size);
    if (described && wl->has_rate_limiter) {
      const rdc_limiter_state_t *l = &wl->rate_limiter;
      printf("rate limiter: %" PRIu64 " sampled / %" PRIu64 " inserted = %.4f (samples_per_insert "
             "%g); waited %.3f s for inserts, %.3f s for samples\n", l->sampled, l->inserted,
             l->ratio, l->config.samples_per_insert, l->insert_wait_s, l->sample_wait_s);
    }
  }
  for (int i = 0; i < CP_N_FIELDS; i++) free(cols[i].data);
  free(keys);
  free(probs);
  free(weights);
  free(delta);
  free(wl);
  rdc_close(c);
  return rc;
}
