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
 *                        (the OS's scheduling only).
 *   tenancy.share_error  the same with weights 1:1:2: the largest
 *                        |share_i - weight_i / sum| / (weight_i / sum) over
 *                        the three, share_i = gps_i / sum gps (identical
 *                        learners, so steps/s is device time). baseline.*:
 *                        --learner-shares 0.
 *   tenancy.noisy_p99_ratio  tenant "quiet"'s Sample p99 (batch 512, from a
 *                        100k-capacity table holding 20k rows) while tenant
 *                        "noisy" sends 1000-row InsertBatch calls from two
 *                        clients as fast as they can, retrying at once when
 *                        refused ("retries at once"), or sleeping for the
 *                        "retry in N ms" the refusal names ("waits as
 *                        told"), against a quota of --noisy-rate rows/s;
 *                        over the p99 with the server quiet (the mean of a
 *                        quiet run before and after). baseline.*: the noisy
 *                        tenant without a quota, retrying at once.
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

#include "bench_util.h"
#include "rd_clock.h"
#include "rdt_daemon.h"
#include "replayctl_cli.h"
#include "replayd_client.h"

static struct {
  bool json, quick;
  const char *replayd;
  double noisy_rate;
} O = {false, false, NULL, 20000};

static rdt_daemon_t daemon_;
static char admin[256];

static void usage(FILE *f) {
  fputs("usage: bench_tenancy --replayd PATH [--noisy-rate ROWS_PER_S] [--json] [--quick]\n", f);
}

static void start(int shares) {
  char sh[16]; /* any int fits: -O2 format-truncation check */
  snprintf(sh, sizeof sh, "%d", shares);
  const char *const args[] = {"--threads", "2", "--learner-shares", sh, NULL};
  rdt_daemon_opts_t o = {.args = args, .tag = "bench_tenancy", .timeout_s = 20};
  if (rdt_daemon_start(&daemon_, O.replayd, &o) != 0) die("replayd did not start");
  char path[sizeof daemon_.dir + 16], msg[512];
  snprintf(path, sizeof path, "%s/admin.token", daemon_.dir);
  if (rctl_read_token_file(path, admin, sizeof admin, msg, sizeof msg) != 0) die("%s", msg);
}

static void stop(void) {
  rdt_daemon_stop(&daemon_);
  rdt_daemon_remove(&daemon_);
  memset(&daemon_, 0, sizeof daemon_);
}

static rdc_client_t *client(void) {
  rdc_client_t *c;
  rdc_error_t e;
  if (rdc_connect(daemon_.target, 10, &c, &e) != RDC_OK) die("connect: %s", e.msg);
  rdc_set_deadline(c, 120);
  return c;
}

static void tenant(rdc_client_t *c, const char *name, uint32_t weight, double insert_rate,
                   char *token) {
  rdc_tenant_quota_t q = {0, 0, weight, insert_rate, 0};
  rdc_error_t e;
  if (rdc_tenant_add(c, admin, name, &q, token, NULL, &e) != RDC_OK) die("tenant: %s", e.msg);
}

/* n rows of random values for w's fields (an int action below 2, a
 * discount of 0.99 or 0 for the learner's). */
static void fill(rdc_client_t *c, const rdc_workload_t *w, uint32_t n) {
  const rdc_spec_t *s = &w->spec;
  void *bufs[RDC_MAX_FIELDS];
  uint64_t x = 88172645463325252ull;
  for (uint32_t f = 0; f < s->n_fields; f++) {
    size_t b = rdc_field_bytes(&s->fields[f]);
    bufs[f] = xmalloc((size_t)n * b);
    for (size_t i = 0; i < (size_t)n * b / 4; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const char *name = s->fields[f].name;
      if (strcmp(name, "action") == 0)
        ((int32_t *)bufs[f])[i] = (int32_t)((x >> 33) % 2);
      else if (strcmp(name, "discount") == 0)
        ((float *)bufs[f])[i] = i % 10 == 9 ? 0.0f : 0.99f;
      else
        ((float *)bufs[f])[i] = (float)((x >> 40) * 0x1p-24) * 2 - 1;
    }
  }
  rdc_error_t e;
  for (uint32_t done = 0; done < n;) { /* batches within max_batch */
    uint32_t k = n - done < 4096 ? n - done : 4096;
    rdc_column_t part[RDC_MAX_FIELDS];
    for (uint32_t f = 0; f < s->n_fields; f++) {
      size_t b = rdc_field_bytes(&s->fields[f]);
      part[f].data = (char *)bufs[f] + (size_t)done * b;
      part[f].bytes = (size_t)k * b;
    }
    if (rdc_insert_batch(c, w->id, w->token, k, part, s->n_fields, NULL, NULL, &e) != RDC_OK)
      die("insert: %s", e.msg);
    done += k;
  }
  for (uint32_t f = 0; f < s->n_fields; f++) free(bufs[f]);
}

static void emit(const char *name, const char *params, double value, const char *unit,
                 const char *note) {
  if (O.json)
    printf("{\"name\": \"%s\", \"params\": {%s}, \"value\": %.6g, \"unit\": \"%s\"}\n", name,
           params, value, unit);
  else
    printf("%-32s %10.4f %-9s %s  [%s]\n", name, value, unit, note, params);
  fflush(stdout);
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
  rdc_client_t *c = client();
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
  rdc_client_t *c = client();
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
    if (rdc_register_as(c, token, &spec, &t[i].w, &e) != RDC_OK) die("register: %s", e.msg);
    fill(c, &t[i].w, 5000);
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
  stop();
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

static void fairness(double seconds) {
  static const uint32_t equal[3] = {1, 1, 1}, weighted[3] = {1, 1, 2};
  /* Interleaved: shares on, off, on, off; each figure the mean of its two. */
  double j[2] = {0, 0}, se[2] = {0, 0}, g[3], last[2][2][3];
  for (int rep = 0; rep < 2; rep++)
    for (int shares = 1; shares >= 0; shares--) {
      train_three(shares, equal, seconds, g);
      j[shares] += jain(g, 3) / 2;
      memcpy(last[shares][0], g, sizeof g);
      train_three(shares, weighted, seconds, g);
      se[shares] += share_error(g, weighted) / 2;
      memcpy(last[shares][1], g, sizeof g);
    }
  for (int shares = 1; shares >= 0; shares--) {
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
}

/* ---- A noisy neighbour ---- */

typedef struct {
  rdc_workload_t w;
  atomic_bool *stop;
  int backoff; /* 1: sleep for the "retry in N ms" a refusal names; 0: retry at once */
  uint64_t accepted, refused;
} noisy_t;

static void *noisy(void *arg) {
  noisy_t *n = arg;
  rdc_client_t *c = client();
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

/* The quiet tenant's p99 while the noisy one floods (rate 0: no quota). */
static double noisy_run(rdc_client_t *c, const rdc_workload_t *quiet, const char *noisy_token,
                        const rdc_spec_t *spec, int n, int backoff, double *rows_per_s) {
  noisy_t nz[2];
  atomic_bool stop_flag = false;
  rdc_error_t e;
  for (int i = 0; i < 2; i++) {
    memset(&nz[i], 0, sizeof nz[i]);
    if (rdc_register_as(c, noisy_token, spec, &nz[i].w, &e) != RDC_OK)
      die("register: %s", e.msg);
    nz[i].stop = &stop_flag;
    nz[i].backoff = backoff;
  }
  pthread_t th[2];
  double t0 = rd_clock_now();
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, noisy, &nz[i]);
  usleep(500000); /* the flood is on, the bucket's first second spent */
  double p = p99_samples(c, quiet, n);
  atomic_store(&stop_flag, true);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  double dt = rd_clock_now() - t0;
  *rows_per_s = (double)(nz[0].accepted + nz[1].accepted) / dt;
  for (int i = 0; i < 2; i++) rdc_delete(c, nz[i].w.id, nz[i].w.token, &e);
  return p;
}

static void noisy_neighbour(int n) {
  start(1);
  rdc_client_t *c = client();
  char tq[RDC_TOKEN_MAX], tn[RDC_TOKEN_MAX], tu[RDC_TOKEN_MAX];
  tenant(c, "quiet", 1, 0, tq);
  tenant(c, "noisy", 1, O.noisy_rate, tn);
  tenant(c, "unlimited", 1, 0, tu);
  rdc_spec_t spec;
  char msg[256];
  if (rctl_parse_plan_spec("cartpole_dqn,capacity=100000", &spec, msg, sizeof msg) != 0)
    die("%s", msg);
  spec.has_learner = 0; /* replay only: the flood and the samples, nothing else */
  rdc_workload_t quiet;
  rdc_error_t e;
  if (rdc_register_as(c, tq, &spec, &quiet, &e) != RDC_OK) die("register: %s", e.msg);
  fill(c, &quiet, 20000);
  p99_samples(c, &quiet, n / 4); /* warm-up */
  double q1 = p99_samples(c, &quiet, n), lim_rate, coop_rate, unl_rate;
  double lim = noisy_run(c, &quiet, tn, &spec, n, 0, &lim_rate);
  double coop = noisy_run(c, &quiet, tn, &spec, n, 1, &coop_rate);
  double unl = noisy_run(c, &quiet, tu, &spec, n, 0, &unl_rate);
  double q2 = p99_samples(c, &quiet, n);
  double q = (q1 + q2) / 2;
  char p[320], note[160];
  const struct {
    const char *client;
    double p99, rate;
  } runs[2] = {{"retries at once", lim, lim_rate}, {"waits as told", coop, coop_rate}};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "\"batch\": 512, \"insert_quota_rows_per_s\": %g, \"client\": "
             "\"%s\", \"quiet_p99_ms\": %.3f, \"noisy_p99_ms\": %.3f, \"noisy_rows_per_s\": "
             "%.0f, \"samples\": %d", O.noisy_rate, runs[i].client, q * 1e3, runs[i].p99 * 1e3,
             runs[i].rate, n);
    snprintf(note, sizeof note, "p99 %.2f ms vs %.2f ms quiet; noisy (%s) got %.0f rows/s",
             runs[i].p99 * 1e3, q * 1e3, runs[i].client, runs[i].rate);
    emit("tenancy.noisy_p99_ratio", p, runs[i].p99 / q, "ratio", note);
  }
  snprintf(p, sizeof p, "\"batch\": 512, \"insert_quota_rows_per_s\": 0, \"quiet_p99_ms\": "
           "%.3f, \"noisy_p99_ms\": %.3f, \"noisy_rows_per_s\": %.0f, \"samples\": %d",
           q * 1e3, unl * 1e3, unl_rate, n);
  snprintf(note, sizeof note, "p99 %.2f ms vs %.2f ms quiet; noisy got %.0f rows/s", unl * 1e3,
           q * 1e3, unl_rate);
  emit("baseline.tenancy.noisy_p99_ratio", p, unl / q, "ratio", note);
  rdc_close(c);
  stop();
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (bench_common_opt(argc, argv, &i, &O.json, &O.quick, NULL, usage)) continue;
    if (strcmp(argv[i], "--replayd") == 0 && i + 1 < argc) O.replayd = argv[++i];
    else if (strcmp(argv[i], "--noisy-rate") == 0 && i + 1 < argc) O.noisy_rate = atof(argv[++i]);
    else {
      usage(stderr);
      return 2;
    }
  }
  if (O.replayd == NULL) {
    usage(stderr);
    return 2;
  }
  if (!O.json) {
    char cpu[128], load[32], when[64];
    cpu_model(cpu, sizeof cpu);
    load_average(load, sizeof load);
    utc_now(when, sizeof when);
    printf("bench_tenancy: %s, load %s, %s\n", cpu, load, when);
  }
  fairness(O.quick ? 2.0 : 8.0);
  noisy_neighbour(O.quick ? 400 : 2000);
  return 0;
}
