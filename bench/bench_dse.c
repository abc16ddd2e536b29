/* bench_dse.c - design-space exploration on registration (issue 5), on a
 * real replayd over loopback.
 *
 * Starts the replayd given by --replayd on 127.0.0.1:0 with a fresh state
 * directory (an empty profile store), then for each benchmark shape of
 * bench/learner_shapes.h (cartpole_ddpg, cartpole_dqn, hopper_ddpg; the
 * learner's defaults, capacity 10^5):
 *   dse.register_ms  the RegisterWorkload call as the client sees it, the
 *                    first time the shape is seen (cache=cold: the daemon
 *                    profiles the CPU within its 1.5 s bound and stores
 *                    the profiles) and the second time (cache=warm: the
 *                    profiles come from SQLite, nothing is measured);
 *   dse.gps_error    |predicted - measured| / measured gradient steps per
 *                    second for the resulting CPU mapping: the prediction
 *                    is the reply's placement.predicted_gps, the
 *                    measurement TrainStep's steps_per_second (the median
 *                    of 5 calls of about 0.3 s each, after a warm-up) on a
 *                    table filled with random rows; at D = 0 (the strict
 *                    loop, the learner spec's default) and D = 50 (papers/001
 *                    §VII's relaxed pipeline).
 *   dse.gps_error_reprofiled  a control for that figure: the same measured
 *                    GPS against the prediction of a Plan made right
 *                    after the measurement from profiles measured again
 *                    (the store cleared first). The two predictions bracket
 *                    the measurement in time: where gps_error misses and
 *                    this one does not, the machine's speed changed between
 *                    the registration's profile and the measurement (this
 *                    VM's vCPUs drift), not the model; where both miss by
 *                    the same, the model does. params.drift is
 *                    reprofiled / registered prediction - 1.
 * Table output by default; --json one JSON object per line; --quick fewer
 * steps.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "replayctl_cli.h"
#include "replayd_client.h"
#include "rd_clock.h"
#include "bench_daemon.h"
#include "bench_util.h"
#include "rdt_daemon.h"

static struct {
  int json, quick;
  const char *replayd;
  uint32_t batch;
  const char *shape; /* --shape: only this one; NULL: all three */
} O = {0, 0, NULL, 64, NULL};

static rdt_daemon_t daemon_;
static char admin_[256]; /* its admin token (bench_daemon_start) */

static void start_daemon(void) {
  static const char *const args[] = {"--threads", "2", NULL};
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_dse", .timeout_s = 6};
  bench_daemon_start(&daemon_, O.replayd, &o, admin_, sizeof admin_);
}

static void emit(const char *name, const char *shape, const char *k2, const char *v2, double value,
                 const char *unit) {
  if (O.json)
    printf("{\"name\": \"%s\", \"params\": {\"shape\": \"%s\", \"%s\": %s}, \"value\": %.6g, "
           "\"unit\": \"%s\"}\n", name, shape, k2, v2, value, unit);
  else
    printf("%-16s %-14s %-12s=%-6s %12.4f %s\n", name, shape, k2, v2, value, unit);
  fflush(stdout);
}

/* Measured steps/s: median of MEASURE_CALLS TrainStep calls after a
 * warm-up, each of `steps` steps or about MEASURE_CALL_S at the predicted
 * rate, whichever is more (1000 CartPole steps took 60 ms: a few ticks). */
#define MEASURE_CALLS 5
#define MEASURE_CALL_S 0.3
static double measure_gps(rdc_client_t *c, const rdc_workload_t *w, uint32_t steps,
                          double predicted) {
  if (predicted * MEASURE_CALL_S > steps) steps = (uint32_t)(predicted * MEASURE_CALL_S);
  if (steps > 65536) steps = 65536; /* RD_PIPELINE_MAX_STEPS */
  rdc_train_result_t r;
  rdc_error_t e;
  if (rdc_train_step(c, w->id, w->token, steps / 4 + 1, &r, &e) != RDC_OK) {
    fprintf(stderr, "bench_dse: train: %s\n", e.msg);
    return -1;
  }
  double v[MEASURE_CALLS];
  for (int i = 0; i < MEASURE_CALLS; i++) {
    if (rdc_train_step(c, w->id, w->token, steps, &r, &e) != RDC_OK) {
      fprintf(stderr, "bench_dse: train: %s\n", e.msg);
      return -1;
    }
    v[i] = r.steps_per_second;
  }
  qsort(v, MEASURE_CALLS, sizeof v[0], cmp_double);
  return v[MEASURE_CALLS / 2];
}

/* One dse.gps_error line, or with registered > 0 (the registration's
 * prediction, which pred was re-profiled against) its control
 * dse.gps_error_reprofiled with params.drift. mapping: the table's note
 * for the main figure. */
static void emit_gps_error(const char *shape, uint32_t depth, double pred, double meas,
                           double registered, const char *mapping) {
  const double err = fabs(pred - meas) / meas;
  if (O.json) {
    char b[192];
    int n = snprintf(b, sizeof b, "%u, \"depth\": %u, \"predicted_gps\": %.6g, \"measured_gps\": "
                     "%.6g", O.batch, depth, pred, meas);
    if (registered > 0 && n > 0 && (size_t)n < sizeof b)
      snprintf(b + n, sizeof b - (size_t)n, ", \"drift\": %.4f", pred / registered - 1);
    emit(registered > 0 ? "dse.gps_error_reprofiled" : "dse.gps_error", shape, "batch", b, err,
         "fraction");
    return;
  }
  if (registered > 0)
    printf("%-16s %-14s batch=%-4u D=%-3u %12.4f fraction (control: reprofiled %.0f, drift "
           "%+.1f%%)\n", "  reprofiled", shape, O.batch, depth, err, pred,
           (pred / registered - 1) * 100);
  else
    printf("%-16s %-14s batch=%-4u D=%-3u %12.4f fraction (predicted %.0f, measured %.0f "
           "steps/s; %s)\n", "dse.gps_error", shape, O.batch, depth, err, pred, meas, mapping);
  fflush(stdout);
}

/* The CPU mapping's predicted GPS from profiles measured now: forget the
 * stored profiles (with the daemon's admin token), then Plan the
 * spec, which profiles the CPU again and stores the result. */
static double reprofiled_prediction(rdc_client_t *c, const rdc_spec_t *spec) {
  const char *token = admin_;
  rdc_error_t e;
  rdc_placement_t *pl = malloc(sizeof *pl);
  if (pl == NULL) return -1;
  double gps = -1;
  if (rdc_clear_profiles(c, token, NULL, &e) != RDC_OK ||
      rdc_plan(c, token, spec, NULL, 0, NULL, 1, pl, &e) != RDC_OK)
    fprintf(stderr, "bench_dse: reprofile: %s\n", e.msg);
  else if (pl->profile_cache_hit)
    fprintf(stderr, "bench_dse: reprofile: the plan did not measure\n");
  else
    gps = pl->predicted_gps;
  free(pl);
  return gps;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) O.json = 1;
    else if (strcmp(argv[i], "--quick") == 0) O.quick = 1;
    else if (strcmp(argv[i], "--replayd") == 0 && i + 1 < argc) O.replayd = argv[++i];
    else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) O.batch = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) O.shape = argv[++i];
    else {
      fprintf(stderr, "usage: bench_dse --replayd PATH [--json] [--quick] [--batch B] "
                      "[--shape cartpole_ddpg|cartpole_dqn|hopper_ddpg]\n");
      return 2;
    }
  }
  if (O.shape != NULL && strcmp(O.shape, "cartpole_ddpg") != 0 &&
      strcmp(O.shape, "cartpole_dqn") != 0 && strcmp(O.shape, "hopper_ddpg") != 0) {
    fprintf(stderr, "bench_dse: unknown --shape %s\n", O.shape);
    return 2;
  }
  if (O.replayd == NULL || O.batch == 0 || O.batch > 65536) {
    fprintf(stderr, "bench_dse: --replayd PATH is required (batch 1..65536)\n");
    return 2;
  }
  start_daemon();
  rdc_client_t *c = bench_daemon_client(&daemon_, 120);
  rdc_error_t e;
  if (!O.json)
    printf("# bench_dse: registration with a cold and a warm profile cache, and predicted vs "
           "measured GPS of the CPU mapping (batch %u)\n%-16s %-14s %-19s %12s %s\n", O.batch,
           "name", "shape", "param", "value", "unit");
  static const char *const shapes[] = {"cartpole_ddpg", "cartpole_dqn", "hopper_ddpg"};
  static const uint32_t depths[] = {0, 50};
  uint32_t steps = O.quick ? 200 : 1000;
  int status = 0;
  rdc_spec_t *spec = malloc(sizeof *spec);
  rdc_workload_t *w = malloc(sizeof *w);
  if (spec == NULL || w == NULL) return 1;
  for (size_t s = 0; s < 3 && status == 0; s++) {
    if (O.shape != NULL && strcmp(O.shape, shapes[s]) != 0) continue;
    for (int pass = 0; pass < 2 && status == 0; pass++) { /* cold, then warm */
      char text[128], msg[256];
      snprintf(text, sizeof text, "%s,batch=%u,capacity=100000", shapes[s], O.batch);
      if (rctl_parse_plan_spec(text, spec, msg, sizeof msg) != 0) {
        fprintf(stderr, "bench_dse: %s\n", msg);
        status = 1;
        break;
      }
      double t0 = rd_clock_now();
      if (rdc_register(c, spec, w, &e) != RDC_OK) {
        fprintf(stderr, "bench_dse: register %s: %s\n", shapes[s], e.msg);
        status = 1;
        break;
      }
      double ms = (rd_clock_now() - t0) * 1e3;
      if (!w->has_placement || w->placement.profile_cache_hit != pass) {
        fprintf(stderr, "bench_dse: %s: expected a cache %s\n", shapes[s], pass ? "hit" : "miss");
        status = 1;
      }
      emit("dse.register_ms", shapes[s], "cache", pass ? "\"warm\"" : "\"cold\"", ms, "ms");
      rdc_delete(c, w->id, w->token, NULL);
    }
    for (size_t di = 0; di < 2 && status == 0; di++) {
      char text[128], msg[256];
      snprintf(text, sizeof text, "%s,batch=%u,capacity=100000,depth=%u", shapes[s], O.batch,
               depths[di]);
      if (rctl_parse_plan_spec(text, spec, msg, sizeof msg) != 0 ||
          rdc_register(c, spec, w, &e) != RDC_OK) {
        fprintf(stderr, "bench_dse: register %s: %s\n", shapes[s], e.msg);
        status = 1;
        break;
      }
      double pred = w->placement.predicted_gps;
      bench_daemon_fill(c, w, 100000); /* the whole capacity, as a running workload's table */
      double meas = measure_gps(c, w, steps, pred);
      if (meas <= 0) {
        status = 1;
        break;
      }
      emit_gps_error(shapes[s], depths[di], pred, meas, 0, w->placement.mapping);
      rdc_delete(c, w->id, w->token, NULL);
      /* The control: profile again now (after the delete, so that the
       * plan pins the same CPUs the workload had) and predict again. */
      double fresh = reprofiled_prediction(c, spec);
      if (fresh <= 0) {
        status = 1;
        break;
      }
      emit_gps_error(shapes[s], depths[di], fresh, meas, pred, NULL);
    }
  }
  free(spec);
  free(w);
  rdc_close(c);
  bench_daemon_stop(&daemon_);
  return status;
}
