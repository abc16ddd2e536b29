/* profile.h - measured latencies of a workload's primitives on a device.
 *
 * papers/001 §VI builds a primitive-platform performance table before it
 * maps a workload: for each device, the latency of each primitive at the
 * workload's shape. This file measures the CPU's entries: the batched
 * sample, the batched priority update and one train-step, at each of a
 * list of thread counts, within a time budget. Storing and reusing them is
 * the store's business (store.h: profiles), not this file's.
 *
 * Shape. What a profile is keyed by besides device, primitive, threads and
 * build (rd_profile_key_t): batch, capacity, fanout, algorithm and the
 * network ("dqn:4-64-64-2", "ddpg:11-256-256-3/14-256-256-1": layer sizes,
 * the DDPG critic after the '/'). Settings outside the key (activation,
 * alpha, learning rates) change latencies little and are measured as the
 * workload has them (alpha by its cost class, below); a later workload
 * differing only there reuses them.
 *
 * Method (rd_profile_measure_cpu). Everything runs on the calling thread
 * (the pipeline costs also on a helper thread, or on a pipeline's two),
 * within budget_s of wall time counted from the call, setup included:
 *
 *  - Table. sample and update never touch rows (the sample primitive is
 *    the sum tree's descent plus keys, probabilities and IS weights; rows
 *    are the gather primitive's), and a sum tree of `capacity` leaves is
 *    small (8.5 bytes an item at K = 16) while rows are not (filling 10^6
 *    Hopper rows of 108 bytes took 0.4 s here, 18x a 1-byte row). So the
 *    measuring table is a real rd_table_t with the workload's capacity,
 *    fanout and priority exponent class but a 1-byte row, filled with the
 *    table's own insert and varied priorities: every descent walks the
 *    real number of levels over a working set of the real size. Where the
 *    tree would exceed RD_PROFILE_TREE_BYTES (64 MiB, about 7.8M items at
 *    K = 16), or the budget's setup share allows less, the table gets the
 *    smallest capacity with the same tree height (K^(h-1) + 1: same depth,
 *    a smaller working set, so latencies are a little optimistic there),
 *    and only if even that does not fit, less. Filling stops when the
 *    setup share (RD_PROFILE_SETUP_SHARE of the budget) is spent, keeping
 *    at least one batch. Each result records the items the table held.
 *    update writes batches of keys sampled from it beforehand, 2^18 keys
 *    in all (at least 4 batches, fewer if the setup share runs out), so
 *    its paths are not all in cache, as in the running loop.
 *  - Train. rd_learner_step (backends/cpu/learner.h) on synthetic batches
 *    of the workload's shape (fixed seed), a fresh learner per thread count
 *    (its OpenMP team size is fixed at init).
 *  - Pipeline costs (hosted learners; papers/001 §V-B: the units are
 *    joined by queues, and what crosses them is not free). gather: B rows
 *    copied at random indices from columns of min(capacity, 32 MiB / row)
 *    rows, one copy per learner field per row as the table stores and
 *    rd_table_gather copies them (col_bytes), with fresh indices every
 *    call: in the running loop every batch's rows are new to the cache.
 *    handoff: one strict-loop step (D = 0), less the isolated train-step,
 *    sample, update and gather latencies: what the strict loop adds per
 *    step to the primitives (the hand-over both ways, each batch crossing
 *    cores, each side running colder than in a loop of its own). For a
 *    bound shape (rd_profile_shape_trains_on_gather: every registered
 *    learner) the step is the daemon's own pipeline (pipeline.c, D = 0, a
 *    fresh learner at the first thread count) on a table of the five
 *    learner fields (the measuring table's capacity, at most 32 MiB of
 *    rows) filled with rows a learner accepts, timed over TrainStep-like
 *    requests of about a repetition's length each; every step must train.
 *    An emulation of that loop (two threads handing synthetic batches over
 *    a mutex) ran the step about 10% faster than the pipeline it copied.
 *    For an unbound shape (no pipeline can run it) the emulation remains:
 *    the calling thread, as the sampler, updates, samples and gathers on
 *    the measuring tables and hands B rows (row_bytes each) to a second
 *    thread that runs a train-step on synthetic batches, and waits for its
 *    B |delta|. pass: what the learner pays per step in the relaxed loop
 *    beyond its train-step (queue operations, reading a batch another core
 *    wrote, the sampler's bursts). For a bound shape, the daemon's
 *    pipeline at D = 50 (papers/001 §VII's depth; the key has no depth, so
 *    it serves every D > 0; less where D + 2 batch slots would exceed
 *    256 MiB, the emulation below 8) as for handoff, its step less the
 *    isolated train-step. Else the emulation with 8 batches in flight and the roles
 *    swapped, so the calling thread (the learner's role) rarely waits (it
 *    overstates the daemon's loop: docs/benchmarks.md). The pipeline's
 *    threads are pinned as the
 *    workload's will be (below); the strict emulation's are unpinned; the
 *    pass emulation pins its two threads to two CPUs (the shape's, else
 *    two the caller may use), as the relaxed loop's busy threads sit on
 *    two cores (unpinned, the scheduler often put its idle producer on
 *    the consumer's CPU).
 *  - Pinning (cores.h). A registered workload's learner and sampler
 *    threads are pinned, and the shape says where (learner_pin,
 *    sampler_pin). The train-step at t threads runs on
 *    rd_cores_for_threads(learner_pin, sampler_pin, t); sample and update
 *    at t threads, and gather, on rd_cores_for_threads(sampler_pin,
 *    learner_pin, t) (the sampler thread runs them in the pipeline); each
 *    on a thread of its own created with that mask, since an OpenMP team
 *    keeps the mask its threads were created with. handoff's pipeline
 *    gets the same pins as the workload's; pass's consumer (the learner's
 *    role) runs on the learner's first CPU and its producer on the
 *    sampler's. Why: two CPUs of one machine can run the same train-step
 *    at different speeds, so a profile taken on one CPU mispredicts a
 *    learner on the other. An unpinned shape (a
 *    replay-only workload, or a pin the kernel refuses: logged) is
 *    measured unpinned, as before.
 *  - Timing. Per primitive: one warm-up call, then up to RD_PROFILE_REPS
 *    (15) repetitions of k calls each (k sized so a repetition takes
 *    about 8 ms, longer than a scheduler tick); the latency is the median
 *    per-call time of the repetitions (the warm-up is never reported).
 *    Why 15: fewer let a median move between registrations of the same
 *    shape (docs/benchmarks.md). The remaining budget is shared among the
 *    primitives still to measure.
 *  - The bound. Nothing starts that is estimated to end past the
 *    deadline: a repetition by the slowest call seen; a sample/update
 *    warm-up by 200 ns an item; a train-step by a calibration: two steps
 *    on the batch's first 64 rows (themselves started only if a slow
 *    CPU's FLOP rate, 2 GFLOP/s, or the previous thread count's step says
 *    they fit), scaled linearly to the batch, plus, for the first full
 *    step, the first touches of the learner's buffers at the process's
 *    page-fault rate (measured once per process on 8 MiB: a new learner's
 *    first step costs several warm ones). A primitive with no repetition
 *    in the budget is left out of the results and logged. So the bound
 *    holds up to an estimate's error; the tests check wall time <= budget
 *    + slack. docs/benchmarks.md has what a cold registration takes of
 *    the default 1.5 s, and the shapes whose train-step does not fit.
 *
 * Allocation: gather's rows (at most 32 MiB) and the hand-off's batches
 * (at most MAX_BATCH_BYTES), the measuring table (at most
 * RD_PROFILE_TREE_BYTES of tree, 1 byte a row), a learner and its
 * batches, and for handoff a table of the learner's fields (at most
 * 32 MiB of rows, a tree no larger than the measuring table's) and its
 * pipeline; all freed before returning.
 * Thread safety: calls are independent; each uses its own objects.
 */
#ifndef RD_PROFILE_H
#define RD_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "cores.h"
#include "devices.h"
#include "learner.h"
#include "pipeline.h"
#include "rd_error.h"
#include "table.h"

#define RD_PROFILE_DEFAULT_BUDGET_S 1.5 /* per device per registration */
#define RD_PROFILE_MAX_BUDGET_S 60.0
#define RD_PROFILE_SETUP_SHARE 0.4      /* of the budget, for the table's init and fill */
#define RD_PROFILE_TREE_BYTES (64u << 20)
#define RD_PROFILE_REPS 15              /* repetitions per primitive, at most */
#define RD_PROFILE_MAX_THREAD_COUNTS 16
#define RD_PROFILE_MAX_COLS 6 /* obs, action, reward, next_obs, discount or done */

#define RD_PROFILE_ALGO_MAX 8
#define RD_PROFILE_NETWORK_MAX 160
#define RD_PROFILE_BUILD_MAX 160

typedef enum {
  RD_PRIM_SAMPLE = 0, /* batched prioritized sample: keys, probabilities, IS weights */
  RD_PRIM_UPDATE = 1, /* batched priority update */
  RD_PRIM_TRAIN = 2,  /* one train-step of the hosted learner */
  /* The CPU pipeline's own costs (daemon/learn/pipeline.c), hosted learners only;
   * measured once, at the first thread count: */
  RD_PRIM_GATHER = 3,  /* gather B rows of the workload's row size */
  RD_PRIM_HANDOFF = 4, /* a batch to the learner's thread and its |delta| back, strict loop */
  RD_PRIM_PASS = 5,    /* the learner's cost per batch handed over when batches wait */
} rd_primitive_t;
#define RD_PRIM_COUNT 6
#define RD_PRIM_PIPELINE_COUNT 3 /* gather, handoff, pass */

typedef enum {
  RD_PROFILE_MEASURED = 0, /* measured by this daemon */
  RD_PROFILE_IMPORTED = 1, /* came from a file (rd_store_import_profiles) */
} rd_profile_source_t;

/* "sample", "update", "train"; "invalid" otherwise. */
const char *rd_primitive_name(rd_primitive_t p);
/* RD_EINVAL if s names no primitive. */
int rd_primitive_parse(const char *s, rd_primitive_t *out, rd_error_t *err);
/* "measured", "imported"; "invalid" otherwise. */
const char *rd_profile_source_name(rd_profile_source_t s);
int rd_profile_source_parse(const char *s, rd_profile_source_t *out, rd_error_t *err);

/* The workload shape a profile is keyed by. */
typedef struct {
  uint32_t batch;    /* items per sample, update and train-step */
  uint32_t capacity; /* table items */
  uint32_t fanout;   /* sum-tree K */
  char algorithm[RD_PROFILE_ALGO_MAX];  /* "dqn", "ddpg", or "none" (no hosted learner) */
  char network[RD_PROFILE_NETWORK_MAX]; /* "dqn:4-64-64-2", "ddpg:A/C"; "" for "none" */
} rd_profile_key_t;

/* What measuring needs beyond the key. */
typedef struct {
  rd_profile_key_t key;
  uint32_t row_bytes;           /* the workload's row (not measured yet: gather's) */
  /* The fields the pipeline gathers for the learner (its storage unit
   * copies each field of each sampled row from its column): bytes per row
   * of each; n_cols 0 without a learner. */
  uint32_t n_cols;
  uint32_t col_bytes[RD_PROFILE_MAX_COLS];
  double alpha;                 /* the table's priority exponent (its cost class) */
  int has_learner;
  rd_learner_config_t learner;  /* when has_learner; max_batch >= key.batch */
  /* The CPUs the workload's pipeline threads will run on (cores.h;
   * zeroed: unpinned), from its pipeline config. Each primitive is
   * measured where its thread will run ("Pinning" above). */
  rd_pin_t learner_pin, sampler_pin;
} rd_profile_shape_t;

/* The latencies a profile may hold (rd_profile_validate): from a
 * nanosecond, the floor a measurement is clamped to (a clock too coarse
 * for the call), to an hour, far above one primitive call of any workload
 * the daemon accepts. A figure outside is a typo or an attack, not a
 * device, and the mapper's arithmetic on it (B / T, 1 / (T_L + T_R))
 * would leave the finite doubles. */
#define RD_PROFILE_LATENCY_MIN_S 1e-9
#define RD_PROFILE_LATENCY_MAX_S 3600.0

/* One measured (or imported) latency. */
typedef struct {
  char device_fp[RD_DEVICE_FP_MAX];
  rd_primitive_t primitive;
  uint32_t threads;
  rd_profile_key_t shape;
  char build[RD_PROFILE_BUILD_MAX]; /* rd_profile_build() of the daemon that measured it */
  double latency_s;      /* median seconds per call, in [RD_PROFILE_LATENCY_MIN_S, _MAX_S] */
  uint32_t reps;         /* repetitions the median is of, >= 1 */
  uint64_t items;        /* sample/update: items the measuring table held; train: 0 */
  rd_profile_source_t source;
  int64_t measured_unix; /* when it was measured (kept on import) */
} rd_profile_t;

/* The shape of a workload: its table config and, if it has a hosted
 * learner, its pipeline config (NULL for none). batch 0 takes pc->batch;
 * a replay-only workload passes the batch its clients sample. RD_EINVAL
 * names what is wrong. */
int rd_profile_shape_init(rd_profile_shape_t *out, const rd_table_config_t *tc,
                          const rd_pipeline_config_t *pc, uint32_t batch, rd_error_t *err);

/* 1 if the strict-loop profile (handoff) of this shape runs the daemon's
 * pipeline, whose learner trains on the rows it gathers (the gather
 * columns are the learner's bound fields, rd_pipeline_bind_schema); 0 if
 * an emulation on synthetic batches stands in (an unbound config). */
int rd_profile_shape_trains_on_gather(const rd_profile_shape_t *s);

/* Check a key's fields (ranges, algorithm, network syntax). RD_EINVAL. */
int rd_profile_key_validate(const rd_profile_key_t *k, rd_error_t *err);

/* 1 if the two keys are the same shape. */
int rd_profile_key_equal(const rd_profile_key_t *a, const rd_profile_key_t *b);

/* This build: "<meson version> <git describe> <compiler>-<version> <buildtype>"
 * (plus " sanitize=..." in sanitizer builds). Static storage. */
const char *rd_profile_build(void);

/* The thread counts worth measuring on a CPU of `cores` logical cores:
 * 1, 2, 4, ... up to and including cores. Returns the count (<= cap). */
size_t rd_profile_default_threads(uint32_t cores, uint32_t *out, size_t cap);

/* Measure sample, update and (with a learner) train at each of the n
 * thread counts, and (with a learner) gather, handoff and pass once (distinct, 1..RD_MLP_MAX_THREADS, n <= RD_PROFILE_MAX_THREAD_COUNTS)
 * on this machine's CPU, within budget_s seconds (0 < budget_s <=
 * RD_PROFILE_MAX_BUDGET_S; see above for what the bound covers). Writes
 * the results, per thread count in the given order sample, update, train,
 * then gather, handoff and pass (at the first thread count), to out (cap
 * must hold 2, or 3 per thread count and 3 more) and their number to
 * *n_out, which is smaller when the budget ran out. Each result carries
 * the CPU's fingerprint, rd_profile_build(), source RD_PROFILE_MEASURED
 * and the time. Errors: RD_EINVAL (bad shape, thread counts, budget or
 * cap), RD_ENOMEM; a failing primitive call (which a valid shape does not
 * cause) is RD_EINTERNAL. On error *n_out is 0 (out may have been
 * written). */
int rd_profile_measure_cpu(const rd_profile_shape_t *shape, const uint32_t *thread_counts,
                           size_t n, double budget_s, rd_profile_t *out, size_t cap,
                           size_t *n_out, rd_error_t *err);

/* The checks rd_profile_measure_cpu makes of its arguments (RD_EINVAL),
 * for callers that may answer from stored profiles instead. */
int rd_profile_check(const rd_profile_shape_t *shape, const uint32_t *thread_counts, size_t n,
                     double budget_s, size_t cap, rd_error_t *err);

#endif
