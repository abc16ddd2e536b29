/* bench_util.h - what every CPU benchmark program needs besides its
 * measurement: fatal errors, checked allocation, the monotonic clock and
 * the machine facts its report header prints. */
#ifndef RD_BENCH_UTIL_H
#define RD_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* "<program>: <message>" on stderr, exit status 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* malloc that dies on failure (0 bytes allocates 1). */
void *xmalloc(size_t bytes);

/* Allocations freed together (a benchmark's pool of inputs): each
 * bench_arena_alloc is an xmalloc recorded in the arena (zeroed to start;
 * it dies past BENCH_ARENA_MAX), and bench_arena_free frees them all and
 * empties it, so that freeing a pool cannot miss one of its arrays. */
#define BENCH_ARENA_MAX 32
typedef struct {
  void *p[BENCH_ARENA_MAX];
  size_t n;
} bench_arena_t;

void *bench_arena_alloc(bench_arena_t *a, size_t bytes);
void bench_arena_free(bench_arena_t *a);

/* qsort comparator for doubles, ascending (medians of repetitions). */
int cmp_double(const void *a, const void *b);

/* The CPU's model name from /proc/cpuinfo, or "unknown CPU". */
void cpu_model(char *buf, size_t len);

/* The widest x86 vector ISA the CPU has ("avx512", "avx2" or "baseline",
 * from /proc/cpuinfo's flags): what a figure's compiled loops could use. */
const char *cpu_isa(void);

/* The 1-minute load average from /proc/loadavg, or "?": figures taken on a
 * small machine mean little when something else is running. */
void load_average(char *buf, size_t len);

/* Now as "YYYY-MM-DD HH:MM:SS UTC", for a bench header: a figure is worth
 * little without when it was taken. */
void utc_now(char *buf, size_t len);

/* What a report header says of the machine when a run starts: the time
 * (utc_now), the CPU (cpu_model), the online CPUs and the load average. */
typedef struct {
  char date[64], cpu[256], load[32];
  long cpus;
} bench_machine_t;
void bench_machine(bench_machine_t *m);

/* The one-line header of a bench's table: "NAME: date, CPU, ISA isa, N
 * CPUs, load L" (bench_machine, cpu_isa). */
void bench_print_header(const char *name);

/* One figure: with json, the JSON line every benchmark writes ({"name",
 * "params": {params}, "value", "unit"}; params is the inside of the object,
 * already formatted); else a table row. Flushed. */
void bench_emit(bool json, const char *name, const char *params, double value, const char *unit);

/* One figure with a note for a reader of the table: with json, bench_emit's
 * JSON line (the note left out); else "name value unit note  [params]",
 * the name and the unit padded to name_w and unit_w columns. Flushed. */
void bench_emit_note(bool json, int name_w, int unit_w, const char *name, const char *params,
                     double value, const char *unit, const char *note);

/* The end of a run's report: the progress line (progress: one was drawn
 * on stderr) cleared, and "# load average at the end: L" on info. */
void bench_end(FILE *info, bool progress);

/* A run's results, once collected: as JSON lines (json) or as a table. */
void bench_report(bool json, void (*as_json)(void), void (*as_table)(void));

/* libgomp reads OMP_WAIT_POLICY once, at load: unless it is set, set it to
 * passive and re-execute the program (argv); if that fails, say so on
 * stderr and go on. */
void bench_omp_passive(char **argv);

/* An option's value as a uint32 in [lo, hi]: decimal, or 2^e; dies with
 * "<opt>: ..." otherwise. */
uint32_t bench_parse_u32(const char *opt, const char *s, uint64_t lo, uint64_t hi);

/* The options every benchmark takes: --json, --quick, --help (prints
 * usage, exits 0) and --time-ms MS (1..60000; time_ms NULL: not taken).
 * 1 when argv[*i] is one of them (its value consumed), else 0. */
int bench_common_opt(int argc, char **argv, int *i, bool *json, bool *quick, double *time_ms,
                     void (*usage)(FILE *));

/* The options of a benchmark against a replayd it starts: bench_common_opt's
 * (no --time-ms) and --replayd PATH (into *replayd). 1 when argv[*i] is
 * one of them, else 0. */
int bench_replayd_opt(int argc, char **argv, int *i, bool *json, bool *quick, const char **replayd,
                      void (*usage)(FILE *));

/* The value of option `name` when argv[*i] is it (moving *i past the
 * value; dies when it is missing), else NULL. */
const char *bench_opt(int argc, char **argv, int *i, const char *name);

/* A command line the program cannot run with: usage on stderr, exit
 * status 2. */
void bench_usage_error(void (*usage)(FILE *)) __attribute__((noreturn));

/* An option no branch took: usage on stderr, then die. */
void bench_unknown_opt(const char *a, void (*usage)(FILE *)) __attribute__((noreturn));

/* A repeatable option's values (--batch 32 --batch 512), in the order given. */
#define BENCH_MAX_LIST 16
typedef struct {
  uint32_t v[BENCH_MAX_LIST];
  size_t n;
} bench_list_t;

/* Appends v; dies "<opt>: at most 16 values" when the list is full. */
void bench_list_add(bench_list_t *l, const char *opt, uint32_t v);

/* When no value was given (l->n == 0): the n defaults v. */
void bench_list_default(bench_list_t *l, const char *opt, const uint32_t *v, size_t n);

/* How long one point is measured: a warm-up of at least warm_s (and 2
 * units) sizes repetitions of about min_s; the figure is the median of
 * reps repetitions. */
#define BENCH_MAX_REPS 16
typedef struct {
  double min_s, warm_s;
  int reps;
  double (*clock)(void); /* seconds; NULL: rd_clock_now (the monotonic clock) */
} bench_timing_t;

/* The calling thread's CPU time in seconds (a clock for bench_timing_t
 * that, on a shared machine, leaves out the time other processes held the
 * core; it counts one thread only). */
double bench_thread_cpu_now(void);

/* The timing of a run: min_s from --time-ms when given (time_ms > 0),
 * else quick_min_s or full_min_s; warm_s likewise (never above min_s);
 * 3 repetitions with --quick, else 5; the monotonic clock. */
void bench_timing_init(bench_timing_t *t, double time_ms, bool quick, double quick_min_s,
                       double full_min_s, double quick_warm_s, double full_warm_s);

/* Runs the next n units of work (a batch of an operation, a train-step);
 * ctx keeps what selects each unit's input. */
typedef void (*bench_run_fn)(void *ctx, uint64_t n);

/* Warm-up: runs 1, 2, 4, ... units until at least t->warm_s and 2 units
 * have passed; returns how many units that rate puts in t->min_s (>= 1). */
uint64_t bench_warm_up(bench_run_fn run, void *ctx, const bench_timing_t *t);

/* Seconds per unit of one repetition of n units (t's clock). */
double bench_rep_seconds(bench_run_fn run, void *ctx, uint64_t n, const bench_timing_t *t);

/* The median of v[0..n) (reorders v). */
double bench_median(double *v, int n);

/* Latencies (seconds) as they come: v (xmalloc'd, grown as needed; the
 * caller frees it) holds n of them. */
typedef struct {
  double *v;
  size_t n, cap;
} bench_lat_t;

void bench_lat_add(bench_lat_t *l, double s);

/* One unit of work; `it` counts units from 0 within a measurement and
 * selects the input. */
typedef void (*bench_unit_fn)(void *ctx, uint64_t it);

/* Targets for checking a sum tree's sample against the leaves' inclusive
 * prefix sums prefix[0..capacity): the edges (0, total - 1), every fourth
 * pair at an exact prefix boundary (prefix(i) and prefix(i) - 1), the rest
 * uniform in [0, total); from splitmix64 stream `seed`. */
void bench_check_targets(const uint64_t *prefix, uint32_t capacity, uint64_t seed, uint64_t *tg,
                         size_t n);

/* Seconds per unit: bench_warm_up, then the median of t->reps repetitions. */
double bench_seconds_per_unit(bench_unit_fn fn, void *ctx, const bench_timing_t *t);

#endif
