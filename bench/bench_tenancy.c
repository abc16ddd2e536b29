/* bench_tenancy.c - tenants sharing one replayd (issue 24), over loopback
 * against the replayd given by --replayd.
 *
 *   tenancy.jain         three identical CartPole DQN hosted learners
 *                        (cartpole_dqn, batch 64, strict loop), each its
 *                        own tenant of weight 1, trained at once by three
 *                        clients (TrainStep calls of 100 steps, for the
 *                        same wall time): Jain's index of their gradient
 *                        steps/s, (sum x)^2 / (n sum x^2). baseline.* is the
 *                        same run on a daemon started --learner-shares 0
 *                        (the OS's scheduling only). Each with
 *                        --learner-shares 1 (strict) and 2 (work-conserving).
 *   tenancy.share_error  the same with weights 1:1:2: the largest
 *                        |share_i - weight_i / sum| / (weight_i / sum) over
 *                        the three, share_i = gps_i / sum gps (identical
 *                        learners, so steps/s is device time). baseline.*:
 *                        --learner-shares 0.
 *   tenancy.work_conservation  the three learners' total steps/s with
 *                        shares (1 or 2) over without (0), same run.
 *   tenancy.noisy_p99_ratio  tenant "quiet"'s Sample p99 (batch 512, from a
 *                        100k-capacity table holding 20k rows) while tenant
 *                        "noisy" sends 1000-row InsertBatch calls from two
 *                        clients as fast as they can, retrying at once when
 *                        refused ("retries at once"), or sleeping for the
 *                        "retry in N ms" the refusal names ("waits as
 *                        told"), against a quota of --noisy-rate rows/s;
 *                        over the p99 with the server quiet. Interleaved:
 *                        rounds of quiet, noisy, quiet, noisy, ..., each
 *                        noisy p99 over the mean of the quiet ones on
 *                        either side; the median over rounds. baseline.*: the
 *                        noisy tenant without a quota, retrying at once.
 *                        control.*: a quiet run over the quiet ones beside
 *                        it (what the ratio reads with no neighbour).
 * tenancy.remap_gps_gain: bench_remap.c.
 * Table by default; --json one JSON object per line; --quick shorter runs.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
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
  double noisy_rate;
  const char *only; /* "fair" or "noisy": one part */
} O = {false, false, NULL, 20000, NULL};

static rdt_daemon_t daemon_;
static char admin[256];

static void usage(FILE *f) {
  fputs("usage: bench_tenancy --replayd PATH [--noisy-rate ROWS_PER_S] [--only fair|noisy]\n"
        "                     [--json] [--quick]\n", f);
}

static void start(int shares) {
  char sh[16]; /* any int fits: -O2 format-truncation check */
  snprintf(sh, sizeof sh, "%d", shares);
  const char *const args[] = {"--threads", "2", "--learner-shares", sh, NULL};
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_tenancy", .timeout_s = 20};
  bench_daemon_start(&daemon_, O.replayd, &o, admin, sizeof admin);
}

static void tenant(rdc_client_t *c, const char *name, uint32_t weight, double insert_rate,
                   char *token) {
  rdc_tenant_quota_t q = {.weight = weight, .insert_rows_per_second = insert_rate};
  rdc_error_t e;
  if (rdc_tenant_add(c, admin, name, &q, token, NULL, &e) != RDC_OK) die("tenant: %s", e.msg);
}

static void emit(const char *name, const char *params, double value, const char *unit,
                 const char *note) {
  bench_emit_note(O.json, 32, 9, name, params, value, unit, note);
}

/* ---- Fair shares ---- */

typedef struct {
  rdc_workload_t w;
  pthread_barrier_t *go;
  double seconds;
  uint64_t steps;
  double elapsed;
} trainer_t;

static void *trainer(void *arg) {
  trainer_t *t = arg;
  rdc_client_t *c = bench_daemon_client(&daemon_, 120);
  rdc_train_result_t r;
  rdc_error_t e;
  pthread_barrier_wait(t->go);
  double t0 = rd_clock_now();
  while (rd_clock_now() - t0 < t->seconds) {
    if (rdc_train_step(c, t->w.id, t->w.token, 100, &r, &e) != RDC_OK) die("train: %s", e.msg);
    t->steps += r.steps_done;
  }
  t->elapsed = rd_clock_now() - t0;
  rdc_close(c);
  return NULL;
}

/* gps[3] of three cartpole_dqn learners of the given weights. */
static void train_three(int shares, const uint32_t weights[3], double seconds, double gps[3]) {
  start(shares);
  rdc_client_t *c = bench_daemon_client(&daemon_, 120);
  rdc_spec_t spec;
  char msg[256];
  if (rctl_parse_plan_spec("cartpole_dqn,batch=64,capacity=20000", &spec, msg, sizeof msg) != 0)
    die("%s", msg);
  trainer_t t[3];
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 3);
  rdc_error_t e;
  for (int i = 0; i < 3; i++) {
    char name[16], token[RDC_TOKEN_MAX];
    snprintf(name, sizeof name, "t%d", i);
    tenant(c, name, weights[i], 0, token);
    memset(&t[i], 0, sizeof t[i]);
    bench_register(c, token, &spec, &t[i].w);
    bench_daemon_fill(c, &t[i].w, 5000);
    rdc_train_result_t r; /* warm-up: the learner's thread-tuning trials */
    if (rdc_train_step(c, t[i].w.id, t[i].w.token, 500, &r, &e) != RDC_OK)
      die("train: %s", e.msg);
    t[i].go = &go;
    t[i].seconds = seconds;
  }
  pthread_t th[3];
  for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, trainer, &t[i]);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 3; i++) gps[i] = (double)t[i].steps / t[i].elapsed;
  pthread_barrier_destroy(&go);
  rdc_close(c);
  bench_daemon_stop(&daemon_);
}

static double jain(const double *x, int n) {
  double s = 0, q = 0;
  for (int i = 0; i < n; i++) s += x[i], q += x[i] * x[i];
  return s * s / (n * q);
}

static double share_error(const double *gps, const uint32_t *w) {
  double sg = gps[0] + gps[1] + gps[2], sw = w[0] + w[1] + w[2], worst = 0;
  for (int i = 0; i < 3; i++) {
    double want = w[i] / sw, e = fabs(gps[i] / sg - want) / want;
    if (e > worst) worst = e;
  }
  return worst;
}

/* Interleaved: --learner-shares 1 (strict), 2 (work-conserving), 0 (off),
 * twice over; each figure the mean of its two runs. */
static void fairness(double seconds) {
  static const uint32_t equal[3] = {1, 1, 1}, weighted[3] = {1, 1, 2};
  static const int order[3] = {1, 2, 0};
  double j[3] = {0}, se[3] = {0}, g[3], last[3][2][3];
  double total[3][2] = {{0}}; /* [shares][weighted]: steps/s of the three */
  for (int rep = 0; rep < 2; rep++)
    for (int k = 0; k < 3; k++) {
      int shares = order[k];
      train_three(shares, equal, seconds, g);
      j[shares] += jain(g, 3) / 2;
      total[shares][0] += (g[0] + g[1] + g[2]) / 2;
      memcpy(last[shares][0], g, sizeof g);
      train_three(shares, weighted, seconds, g);
      se[shares] += share_error(g, weighted) / 2;
      total[shares][1] += (g[0] + g[1] + g[2]) / 2;
      memcpy(last[shares][1], g, sizeof g);
    }
  for (int k = 0; k < 3; k++) {
    int shares = order[k];
    char p[256], note[160];
    const double *a = last[shares][0], *b = last[shares][1];
    snprintf(p, sizeof p, "\"workloads\": 3, \"learner_shares\": %d, \"seconds\": %g, "
             "\"last_gps\": [%.0f, %.0f, %.0f]", shares, seconds, a[0], a[1], a[2]);
    snprintf(note, sizeof note, "last run %.0f %.0f %.0f steps/s", a[0], a[1], a[2]);
    emit(shares ? "tenancy.jain" : "baseline.tenancy.jain", p, j[shares], "index", note);
    snprintf(p, sizeof p, "\"weights\": \"1:1:2\", \"learner_shares\": %d, \"seconds\": %g, "
             "\"last_gps\": [%.0f, %.0f, %.0f]", shares, seconds, b[0], b[1], b[2]);
    snprintf(note, sizeof note, "last run %.0f %.0f %.0f steps/s", b[0], b[1], b[2]);
    emit(shares ? "tenancy.share_error" : "baseline.tenancy.share_error", p, se[shares],
         "fraction", note);
  }
  /* Work conservation: the three learners' total steps/s with shares over
   * the same without (--learner-shares 0), same run. */
  for (int shares = 1; shares <= 2; shares++)
    for (int wt = 1; wt >= 0; wt--) {
      char p[256], note[160];
      snprintf(p, sizeof p, "\"weights\": \"%s\", \"learner_shares\": %d, \"seconds\": %g, "
               "\"gps_shares\": %.0f, \"gps_no_shares\": %.0f", wt ? "1:1:2" : "1:1:1", shares,
               seconds, total[shares][wt], total[0][wt]);
      snprintf(note, sizeof note, "%.0f vs %.0f steps/s (three learners, shares %d vs 0)",
               total[shares][wt], total[0][wt], shares);
      emit("tenancy.work_conservation", p, total[shares][wt] / total[0][wt], "ratio", note);
    }
}

/* ---- A noisy neighbour ---- */

typedef struct {
  rdc_workload_t w;
  atomic_bool *stop;
  int backoff; /* 1: sleep for the "retry in N ms" a refusal names; 0: retry at once */
  _Atomic uint64_t accepted, refused; /* read by the main thread meanwhile */
} noisy_t;

static void *noisy(void *arg) {
  noisy_t *n = arg;
  rdc_client_t *c = bench_daemon_client(&daemon_, 120);
  const rdc_spec_t *s = &n->w.spec;
  enum { ROWS = 1000 };
  void *bufs[RDC_MAX_FIELDS];
  rdc_column_t cols[RDC_MAX_FIELDS];
  for (uint32_t f = 0; f < s->n_fields; f++) {
    size_t b = rdc_field_bytes(&s->fields[f]);
    bufs[f] = calloc(ROWS, b);
    if (bufs[f] == NULL) die("out of memory");
    cols[f].data = bufs[f];
    cols[f].bytes = ROWS * b;
  }
  rdc_error_t e;
  while (!atomic_load(n->stop)) {
    int rc = rdc_insert_batch(c, n->w.id, n->w.token, ROWS, cols, s->n_fields, NULL, NULL, &e);
    if (rc == RDC_OK) n->accepted += ROWS;
    else if (rc == RDC_RESOURCE_EXHAUSTED) {
      n->refused++;
      const char *at = strstr(e.msg, "retry in ");
      long ms = at != NULL ? strtol(at + 9, NULL, 10) : 0;
      if (n->backoff && ms > 0) usleep((useconds_t)(ms > 1000 ? 1000 : ms) * 1000);
    } else {
      die("noisy insert: %s", e.msg);
    }
  }
  for (uint32_t f = 0; f < s->n_fields; f++) free(bufs[f]);
  rdc_close(c);
  return NULL;
}

static double p99_samples(rdc_client_t *c, const rdc_workload_t *w, int n) {
  double *lat = xmalloc((size_t)n * sizeof *lat);
  uint64_t *keys = xmalloc(512 * sizeof *keys);
  rdc_sample_t io;
  memset(&io, 0, sizeof io);
  io.keys = keys;
  rdc_error_t e;
  for (int i = 0; i < n; i++) {
    double t0 = rd_clock_now();
    if (rdc_sample(c, w->id, w->token, 512, NAN, 0, &io, &e) != RDC_OK) die("sample: %s", e.msg);
    lat[i] = rd_clock_now() - t0;
  }
  qsort(lat, (size_t)n, sizeof *lat, cmp_double);
  double p = lat[(size_t)(0.99 * (n - 1))];
  free(lat);
  free(keys);
  return p;
}

/* The quiet tenant's p99 while the noisy one floods (rate 0: no quota);
 * the noisy tenant's inserted rows/s and refused calls/s over the same
 * window (its bucket's first second of burst spent before). */
static double noisy_run(rdc_client_t *c, const rdc_workload_t *quiet, const rdc_workload_t nw[2],
                        int n, int backoff, double *rows_per_s, double *refused_per_s) {
  noisy_t nz[2];
  atomic_bool stop_flag = false;
  for (int i = 0; i < 2; i++) {
    memset(&nz[i], 0, sizeof nz[i]);
    nz[i].w = nw[i];
    nz[i].stop = &stop_flag;
    nz[i].backoff = backoff;
  }
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, noisy, &nz[i]);
  usleep(600000); /* the flood is on, the bucket's burst spent */
  uint64_t a0 = atomic_load(&nz[0].accepted) + atomic_load(&nz[1].accepted);
  uint64_t r0 = atomic_load(&nz[0].refused) + atomic_load(&nz[1].refused);
  double t0 = rd_clock_now();
  double p = p99_samples(c, quiet, n);
  double dt = rd_clock_now() - t0;
  uint64_t a1 = atomic_load(&nz[0].accepted) + atomic_load(&nz[1].accepted);
  uint64_t r1 = atomic_load(&nz[0].refused) + atomic_load(&nz[1].refused);
  atomic_store(&stop_flag, true);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  *rows_per_s = (double)(a1 - a0) / dt;
  *refused_per_s = (double)(r1 - r0) / dt;
  usleep(500000); /* what the flood left (a checkpoint, freed rows) is not the next quiet run's */
  return p;
}

enum { NOISY_ROUNDS_MAX = 16 };

typedef struct {
  const char *name, *client;
  double ratio[NOISY_ROUNDS_MAX], worst, rate_sum, refused_sum;
  double noisy_ms, quiet_ms;
} noisy_figure_t;

static void noisy_emit(const noisy_figure_t *f, int rounds, int n, const char *load0) {
  char p[512], note[200], load[32];
  load_average(load, sizeof load);
  double r[NOISY_ROUNDS_MAX];
  memcpy(r, f->ratio, sizeof r);
  double ratio = bench_median(r, rounds);
  snprintf(p, sizeof p, "\"batch\": 512, \"insert_quota_rows_per_s\": %g, \"client\": \"%s\", "
           "\"quiet_p99_ms\": %.3f, \"p99_ms\": %.3f, \"worst_round\": %.3f, "
           "\"noisy_rows_per_s\": %.0f, \"noisy_refused_per_s\": %.0f, \"rounds\": %d, \"samples\": %d, "
           "\"load\": \"%s .. %s\"",
           strcmp(f->client, "no quota") == 0 ? 0 : O.noisy_rate, f->client,
           f->quiet_ms / rounds, f->noisy_ms / rounds, f->worst, f->rate_sum / rounds, f->refused_sum / rounds, rounds, n,
           load0, load);
  snprintf(note, sizeof note, "mean p99 %.2f ms vs %.2f ms quiet, worst round %.2f; %s, %.0f rows/s",
           f->noisy_ms / rounds, f->quiet_ms / rounds, f->worst, f->client, f->rate_sum / rounds);
  emit(f->name, p, ratio, "ratio", note);
}

/* Interleaved rounds Q N1 Q N2 Q U Q (Q: quiet; N1: the noisy tenant
 * retrying at once; N2: waiting as told; U: no quota): each noisy p99 over
 * the mean of the quiet runs on either side, and the control, a quiet run
 * over the mean of the quiet runs on either side of it (what the ratio
 * reads with no neighbour at all on this machine now). Figures are the
 * median over rounds of each round's ratio. */
static void noisy_neighbour(int n, int rounds) {
  start(1);
  rdc_client_t *c = bench_daemon_client(&daemon_, 120);
  char tq[RDC_TOKEN_MAX], tn[RDC_TOKEN_MAX], tu[RDC_TOKEN_MAX], load0[32];
  load_average(load0, sizeof load0);
  tenant(c, "quiet", 1, 0, tq);
  tenant(c, "noisy", 1, O.noisy_rate, tn);
  tenant(c, "unlimited", 1, 0, tu);
  rdc_spec_t spec;
  char msg[256];
  if (rctl_parse_plan_spec("cartpole_dqn,capacity=100000", &spec, msg, sizeof msg) != 0)
    die("%s", msg);
  spec.has_learner = 0; /* replay only: the flood and the samples, nothing else */
  rdc_workload_t quiet, nw[2][2]; /* the noisy tenant's and the unlimited one's */
  bench_register(c, tq, &spec, &quiet);
  /* Registered once: a registration or a deletion (freeing a full table)
   * next to a quiet run would be read as the neighbour's cost. */
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 2; i++)
      bench_register(c, k ? tu : tn, &spec, &nw[k][i]);
  bench_daemon_fill(c, &quiet, 20000);
  p99_samples(c, &quiet, n / 4); /* warm-up */
  noisy_figure_t f[4] = {{.name = "tenancy.noisy_p99_ratio", .client = "retries at once"},
                         {.name = "tenancy.noisy_p99_ratio", .client = "waits as told"},
                         {.name = "baseline.tenancy.noisy_p99_ratio", .client = "no quota"},
                         {.name = "control.tenancy.noisy_p99_ratio",
                          .client = "none (quiet vs quiet)"}};
  if (rounds > NOISY_ROUNDS_MAX) rounds = NOISY_ROUNDS_MAX;
  double q_prev = p99_samples(c, &quiet, n);
  for (int r = 0; r < rounds; r++) {
    double nz[3], rate[3], refused[3], q[3];
    for (int k = 0; k < 3; k++) {
      nz[k] = noisy_run(c, &quiet, nw[k == 2], n, k == 1, &rate[k], &refused[k]);
      q[k] = p99_samples(c, &quiet, n);
    }
    double before[3] = {q_prev, q[0], q[1]};
    for (int k = 0; k < 3; k++) {
      double base = (before[k] + q[k]) / 2, ratio = nz[k] / base;
      f[k].ratio[r] = ratio;
      if (ratio > f[k].worst) f[k].worst = ratio;
      f[k].rate_sum += rate[k];
      f[k].refused_sum += refused[k];
      f[k].noisy_ms += nz[k] * 1e3;
      f[k].quiet_ms += base * 1e3;
    }
    double ctl = q[0] / ((q_prev + q[1]) / 2); /* a quiet run as if it were the noisy one */
    f[3].ratio[r] = ctl;
    if (ctl > f[3].worst) f[3].worst = ctl;
    f[3].noisy_ms += q[0] * 1e3;
    f[3].quiet_ms += (q_prev + q[1]) / 2 * 1e3;
    q_prev = q[2];
  }
  for (int k = 0; k < 4; k++) noisy_emit(&f[k], rounds, n, load0);
  rdc_close(c);
  bench_daemon_stop(&daemon_);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (bench_replayd_opt(argc, argv, &i, &O.json, &O.quick, &O.replayd, usage)) continue;
    if ((v = bench_opt(argc, argv, &i, "--noisy-rate"))) O.noisy_rate = atof(v);
    else if ((v = bench_opt(argc, argv, &i, "--only"))) O.only = v;
    else bench_usage_error(usage);
  }
  if (O.replayd == NULL) bench_usage_error(usage);
  if (!O.json) bench_print_header("bench_tenancy");
  if (O.only == NULL || strcmp(O.only, "fair") == 0) fairness(O.quick ? 2.0 : 8.0);
  if (O.only == NULL || strcmp(O.only, "noisy") == 0)
    noisy_neighbour(O.quick ? 400 : 2000, O.quick ? 2 : 5);
  return 0;
}
