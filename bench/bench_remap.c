/* bench_remap.c - tenancy.remap_gps_gain (issue 24 item 4): the automatic
 * re-mapping's gain, predicted and measured, against the replayd given by
 * --replayd, started with --fpga-csim u250 (the FPGA as C-simulation: the
 * only accelerator on a machine without a GPU or board).
 *
 * Scenario: tenant "big" (weight 1000) registers a CartPole DQN, which maps
 * F-F-F (papers/001 Table V). A second one of the default tenant (weight
 * 1) registers while big's occupies the FPGA: its 1/1001 share there
 * predicts less than the CPU, so the re-mapping places its learner on the
 * CPU. Its GPS is measured there (TrainStep calls of 100 steps for a fixed
 * wall time, big's learner idle). Then big's workload is deleted; the
 * re-mapping moves the second live to F-F-F, and its GPS is measured again.
 *
 *   tenancy.remap_gps_gain            measured GPS after / before the move;
 *                                     params: the measured and predicted GPS
 *                                     both sides, the predicted gain, the codes
 *   tenancy.remap_gps_gain_predicted  the re-mapping's own prediction of the
 *                                     same ratio (its GPS under the set's
 *                                     sharing, after / before)
 *   baseline.tenancy.remap_gps_gain   the same measurement taken twice before
 *                                     the move (A/A): the noise of the ratio
 *
 * What "measured" is here: the learner after the move runs the FPGA learner
 * kernel's C code on this CPU (C-simulation), so its GPS is a CPU timing of
 * that code, NOT an FPGA figure; the prediction is the FPGA model's. The two
 * are expected to disagree: the figure shows the re-mapping happens and what
 * it predicts, and says what C-simulation measures. Table by default;
 * --json one JSON object per line; --quick shorter runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_daemon.h"
#include "bench_util.h"
#include "rd_clock.h"
#include "rdt_daemon.h"
#include "replayctl_cli.h"
#include "replayd_client.h"

static struct {
  bool json, quick;
  const char *replayd;
} O = {false, false, NULL};

static rdt_daemon_t daemon_;
static char admin[256];

static void usage(FILE *f) { fputs("usage: bench_remap --replayd PATH [--json] [--quick]\n", f); }

static void start(void) {
  const char *const args[] = {"--threads", "2", "--fpga-csim", "u250", NULL};
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_remap", .timeout_s = 30};
  bench_daemon_start(&daemon_, O.replayd, &o, admin, sizeof admin);
}

static void emit(const char *name, const char *params, double value, const char *unit,
                 const char *note) {
  bench_emit_note(O.json, 36, 6, name, params, value, unit, note);
}

/* w's placement once it has `events` history events (the re-mapping runs
 * after the call that caused it returned). */
static void wait_events(rdc_client_t *c, const char *id, size_t events, rdc_workload_t *out) {
  double end = rd_clock_now() + 120;
  rdc_error_t e;
  for (;;) {
    if (rdc_describe(c, id, out, &e) != RDC_OK) die("describe: %s", e.msg);
    if (out->placement.n_history >= events) return;
    if (rd_clock_now() > end) die("workload %s: no re-mapping within 120 s", id);
    usleep(20000);
  }
}

/* Steps per second of TrainStep calls of 100 steps over `seconds`. */
static double gps(rdc_client_t *c, const rdc_workload_t *w, double seconds) {
  rdc_train_result_t r;
  rdc_error_t e;
  uint64_t steps = 0;
  double t0 = rd_clock_now();
  while (rd_clock_now() - t0 < seconds) {
    if (rdc_train_step(c, w->id, w->token, 100, &r, &e) != RDC_OK) die("train: %s", e.msg);
    steps += r.steps_done;
  }
  return (double)steps / (rd_clock_now() - t0);
}

static void remap_gain(double seconds) {
  start();
  rdc_client_t *c = bench_daemon_client(&daemon_, 300);
  rdc_spec_t spec;
  char msg[256], big[RDC_TOKEN_MAX];
  if (rctl_parse_plan_spec("cartpole_dqn,batch=32,capacity=20000", &spec, msg, sizeof msg) != 0)
    die("%s", msg);
  rdc_tenant_quota_t q = {.weight = 1000};
  rdc_error_t e;
  if (rdc_tenant_add(c, admin, "big", &q, big, NULL, &e) != RDC_OK) die("tenant: %s", e.msg);
  static rdc_workload_t a, b, d;
  bench_register(c, big, &spec, &a);
  /* Its re-mapping job runs before the newcomer's (one queue, in order). */
  if (strcmp(a.placement.running, "F-F-F") != 0)
    die("the occupant runs %s, not F-F-F: %s", a.placement.running, a.placement.note);
  bench_register(c, NULL, &spec, &b);
  wait_events(c, b.id, 1, &d);
  char before_code[8];
  snprintf(before_code, sizeof before_code, "%s", d.placement.running);
  if (before_code[0] != 'C') die("the newcomer's learner runs %s, not on the CPU", before_code);
  bench_daemon_fill(c, &b, 5000);
  rdc_train_result_t r; /* warm-up: the CPU learner's thread-tuning trials */
  if (rdc_train_step(c, b.id, b.token, 500, &r, &e) != RDC_OK) die("train: %s", e.msg);
  double g_before = gps(c, &b, seconds), g_before2 = gps(c, &b, seconds);
  if (rdc_delete(c, a.id, a.token, &e) != RDC_OK) die("delete: %s", e.msg);
  wait_events(c, b.id, 2, &d);
  const rdc_placement_event_t *ev = &d.placement.history[1];
  if (!ev->moved || strcmp(d.placement.running, "F-F-F") != 0)
    die("no move after the delete: %s (%s)", d.placement.running, ev->reason);
  if (rdc_train_step(c, b.id, b.token, 200, &r, &e) != RDC_OK) die("train: %s", e.msg);
  double g_after = gps(c, &b, seconds);
  const double pred = ev->gps_to / ev->gps_from;
  char p[768], note[256];
  snprintf(p, sizeof p,
           "\"from\": \"%s\", \"to\": \"%s\", \"gps_before\": %.1f, \"gps_after\": %.1f, "
           "\"predicted_gps_before\": %.1f, \"predicted_gps_after\": %.1f, "
           "\"predicted_gain\": %.4g, \"seconds\": %.1f, \"fpga\": \"u250 C-simulation: CPU "
           "timings of the kernels' C code\"",
           ev->from, ev->to, g_before, g_after, ev->gps_from, ev->gps_to, pred, seconds);
  snprintf(note, sizeof note, "%s %.0f GPS -> %s %.0f GPS measured; predicted %.0f -> %.0f",
           ev->from, g_before, ev->to, g_after, ev->gps_from, ev->gps_to);
  emit("tenancy.remap_gps_gain", p, g_after / g_before, "ratio", note);
  emit("tenancy.remap_gps_gain_predicted", p, pred, "ratio", "the FPGA model's prediction");
  snprintf(p, sizeof p, "\"code\": \"%s\", \"gps_1\": %.1f, \"gps_2\": %.1f, \"seconds\": %.1f",
           before_code, g_before, g_before2, seconds);
  emit("baseline.tenancy.remap_gps_gain", p, g_before2 / g_before, "ratio",
       "A/A: the same placement measured twice before the move");
  rdc_close(c);
  bench_daemon_stop(&daemon_);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!bench_replayd_opt(argc, argv, &i, &O.json, &O.quick, &O.replayd, usage))
      bench_usage_error(usage);
  if (O.replayd == NULL) bench_usage_error(usage);
  if (!O.json) bench_print_header("bench_remap");
  int reps = O.quick ? 1 : 3;
  for (int i = 0; i < reps; i++) remap_gain(O.quick ? 1.0 : 4.0);
  return 0;
}
