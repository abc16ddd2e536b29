/* bench_util.c - see bench_util.h. */
#define _GNU_SOURCE
#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rd_clock.h"
#include "rd_rng.h"

void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", program_invocation_short_name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL) die("out of memory allocating %zu bytes", bytes);
  return p;
}

void *bench_arena_alloc(bench_arena_t *a, size_t bytes) {
  if (a->n == BENCH_ARENA_MAX) die("more than %d arrays in one arena", BENCH_ARENA_MAX);
  return a->p[a->n++] = xmalloc(bytes);
}

void bench_arena_free(bench_arena_t *a) {
  for (size_t i = 0; i < a->n; i++) free(a->p[i]);
  a->n = 0;
}

int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = '\0';
        snprintf(buf, len, "%s", c);
      }
      break;
    }
  }
  fclose(f);
}

const char *cpu_isa(void) {
  const char *isa = "baseline";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return isa;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) == 0) {
      if (strstr(line, " avx512f"))
        isa = "avx512";
      else if (strstr(line, " avx2"))
        isa = "avx2";
      break;
    }
  }
  fclose(f);
  return isa;
}

void load_average(char *buf, size_t len) {
  snprintf(buf, len, "?");
  FILE *f = fopen("/proc/loadavg", "r");
  if (f == NULL) return;
  char first[32];
  if (fscanf(f, "%31s", first) == 1) snprintf(buf, len, "%s", first);
  fclose(f);
}

void utc_now(char *buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    snprintf(buf, len, "?");
}

void bench_machine(bench_machine_t *m) {
  utc_now(m->date, sizeof m->date);
  cpu_model(m->cpu, sizeof m->cpu);
  load_average(m->load, sizeof m->load);
  m->cpus = sysconf(_SC_NPROCESSORS_ONLN);
}

static void emit_json(const char *name, const char *params, double value, const char *unit) {
  printf("{\"name\": \"%s\", \"params\": {%s}, \"value\": %.6g, \"unit\": \"%s\"}\n", name,
         params, value, unit);
}

void bench_emit(bool json, const char *name, const char *params, double value, const char *unit) {
  if (json)
    emit_json(name, params, value, unit);
  else
    printf("%-34s %-44s %14.4g %s\n", name, params, value, unit);
  fflush(stdout);
}

void bench_emit_note(bool json, int name_w, int unit_w, const char *name, const char *params,
                     double value, const char *unit, const char *note) {
  if (json)
    emit_json(name, params, value, unit);
  else
    printf("%-*s %10.4f %-*s %s  [%s]\n", name_w, name, value, unit_w, unit, note, params);
  fflush(stdout);
}

void bench_end(FILE *info, bool progress) {
  if (progress) fputs("\r\033[K", stderr);
  char load[32];
  load_average(load, sizeof load);
  fprintf(info, "# load average at the end: %s\n", load);
}

void bench_report(bool json, void (*as_json)(void), void (*as_table)(void)) {
  if (json)
    as_json();
  else
    as_table();
}

void bench_omp_passive(char **argv) {
  if (getenv("OMP_WAIT_POLICY") != NULL) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "%s: cannot re-execute with OMP_WAIT_POLICY=passive; going on\n",
          program_invocation_short_name);
}

uint32_t bench_parse_u32(const char *opt, const char *s, uint64_t lo, uint64_t hi) {
  uint64_t v;
  char *end;
  errno = 0;
  if (s[0] == '2' && s[1] == '^') {
    unsigned long e = strtoul(s + 2, &end, 10);
    if (*end != '\0' || e > 40) die("%s: cannot parse '%s'", opt, s);
    v = UINT64_C(1) << e;
  } else {
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == '-') die("%s: cannot parse '%s'", opt, s);
    v = x;
  }
  if (v < lo || v > hi)
    die("%s: %" PRIu64 " is outside [%" PRIu64 ", %" PRIu64 "]", opt, v, lo, hi);
  return (uint32_t)v;
}

int bench_common_opt(int argc, char **argv, int *i, bool *json, bool *quick, double *time_ms,
                     void (*usage)(FILE *)) {
  const char *a = argv[*i], *v;
  if (strcmp(a, "--json") == 0) {
    *json = true;
  } else if (strcmp(a, "--quick") == 0) {
    *quick = true;
  } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
    usage(stdout);
    exit(0);
  } else if (time_ms != NULL && (v = bench_opt(argc, argv, i, "--time-ms"))) {
    *time_ms = bench_parse_u32("--time-ms", v, 1, 60000);
  } else {
    return 0;
  }
  return 1;
}

int bench_replayd_opt(int argc, char **argv, int *i, bool *json, bool *quick, const char **replayd,
                      void (*usage)(FILE *)) {
  const char *v;
  if (bench_common_opt(argc, argv, i, json, quick, NULL, usage)) return 1;
  if ((v = bench_opt(argc, argv, i, "--replayd")) == NULL) return 0;
  *replayd = v;
  return 1;
}

const char *bench_opt(int argc, char **argv, int *i, const char *name) {
  if (strcmp(argv[*i], name) != 0) return NULL;
  if (*i + 1 >= argc) die("%s needs a value", name);
  return argv[++*i];
}

void bench_usage_error(void (*usage)(FILE *)) {
  usage(stderr);
  exit(2);
}

void bench_unknown_opt(const char *a, void (*usage)(FILE *)) {
  usage(stderr);
  die("unknown option '%s'", a);
}

void bench_lat_add(bench_lat_t *l, double s) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 4096;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (l->v == NULL) die("out of memory for %zu latencies", l->cap);
  }
  l->v[l->n++] = s;
}

void bench_list_add(bench_list_t *l, const char *opt, uint32_t v) {
  if (l->n == BENCH_MAX_LIST) die("%s: at most %d values", opt, BENCH_MAX_LIST);
  l->v[l->n++] = v;
}

void bench_list_default(bench_list_t *l, const char *opt, const uint32_t *v, size_t n) {
  if (l->n != 0) return;
  for (size_t k = 0; k < n; k++) bench_list_add(l, opt, v[k]);
}

void bench_timing_init(bench_timing_t *t, double time_ms, bool quick, double quick_min_s,
                       double full_min_s, double quick_warm_s, double full_warm_s) {
  t->min_s = time_ms > 0 ? time_ms * 1e-3 : (quick ? quick_min_s : full_min_s);
  t->warm_s = quick ? quick_warm_s : full_warm_s;
  if (t->warm_s > t->min_s) t->warm_s = t->min_s;
  t->reps = quick ? 3 : 5;
  t->clock = NULL;
}

double bench_thread_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(const bench_timing_t *t) { return t->clock ? t->clock() : rd_clock_now(); }

uint64_t bench_warm_up(bench_run_fn run, void *ctx, const bench_timing_t *t) {
  uint64_t n = 1, done = 0;
  double t0 = now(t), el;
  for (;;) {
    run(ctx, n);
    done += n;
    el = now(t) - t0;
    if (el >= t->warm_s && done >= 2) break;
    n *= 2;
  }
  double want = (double)done * t->min_s / el;
  return want < 1 ? 1 : (uint64_t)(want + 0.5);
}

double bench_rep_seconds(bench_run_fn run, void *ctx, uint64_t n, const bench_timing_t *t) {
  double t0 = now(t);
  run(ctx, n);
  return (now(t) - t0) / (double)n;
}

double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return v[n / 2];
}

typedef struct {
  bench_unit_fn fn;
  void *ctx;
  uint64_t it;
} unit_run_t;

static void unit_run(void *ctx, uint64_t n) {
  unit_run_t *u = ctx;
  for (uint64_t i = 0; i < n; i++) u->fn(u->ctx, u->it++);
}

double bench_seconds_per_unit(bench_unit_fn fn, void *ctx, const bench_timing_t *t) {
  if (t->reps < 1 || t->reps > BENCH_MAX_REPS)
    die("reps %d is outside [1, %d]", t->reps, BENCH_MAX_REPS);
  unit_run_t u = {fn, ctx, 0};
  uint64_t n = bench_warm_up(unit_run, &u, t);
  double v[BENCH_MAX_REPS];
  for (int r = 0; r < t->reps; r++) v[r] = bench_rep_seconds(unit_run, &u, n, t);
  return bench_median(v, t->reps);
}

void bench_check_targets(const uint64_t *prefix, uint32_t capacity, uint64_t seed, uint64_t *tg,
                         size_t n) {
  uint64_t total = prefix[capacity - 1], s = seed;
  for (size_t i = 0; i < n; i++) {
    uint64_t t;
    if (i == 0) {
      t = 0;
    } else if (i == 1) {
      t = total - 1;
    } else if (i % 4 == 2 || i % 4 == 3) {
      uint64_t q = prefix[rd_rng_below(&s, capacity)];
      t = i % 4 == 2 ? q : q - 1; /* q == 0 (leading zero leaves): t wraps, redrawn below */
      if (t >= total) t = rd_rng_below(&s, total);
    } else {
      t = rd_rng_below(&s, total);
    }
    tg[i] = t;
  }
}

void bench_print_header(const char *name) {
  bench_machine_t m;
  bench_machine(&m);
  printf("%s: %s, %s, ISA %s, %ld CPUs, load %s\n", name, m.date, m.cpu, cpu_isa(), m.cpus,
         m.load);
}
