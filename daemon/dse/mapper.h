/* mapper.h - which device runs a workload's learner, its replay management
 * module (RMM: the sum tree's sample + update) and its data storage.
 *
 * papers/001 §VI-B, Algorithm 3 (thesis 004 §4.3.1 is the same three steps
 * generalised to a task graph). Pure computation: the caller fills a
 * primitive-platform table (papers/001 §VI-A3: 3 devices x {learner, RMM},
 * from measurements, cached profiles or the FPGA model) and gets back a
 * mapping, its predicted gradient steps per second (GPS) and a sentence
 * saying why. No I/O, no allocation, no global state; thread-safe.
 *
 * Throughputs. TP = B / T (items per second) for every entry.
 *
 * Step 1 (Alg. 3 line 5, learner). The learner goes to argmax_j TP_L^j.
 * Devices within RD_MAPPER_TIE_REL of the best are kept as ties and
 * decided by the rules below. Greedy, as the paper: a slower learner
 * outside the tolerance is never considered (see mapper.c for the one
 * case where that loses).
 *
 * Step 2 (lines 5-7, RMM). With the learner fixed, each RMM device j gets
 * the predicted GPS of the pair (below); the RMM goes to the best. Where
 * the RMM is the bottleneck this is line 5's argmax TP_RMM. Where the
 * learner is, every RMM fast enough to hide behind it gives the same GPS:
 * that is a tie, and ties go to fewer devices, then less traffic - the
 * paper's own explanation of Table V (F-F-F at large CartPole batches
 * although the GPU's RMM is faster; G-C-G/G-C-C for Hopper and Pong
 * although the FPGA's RMM is faster: "the learner remains the bottleneck
 * ... so we map it to CPU for minimized number of devices and
 * communication", §VII-D).
 * The prune (lines 6-7): when the learner is on the GPU and some non-GPU
 * device's RMM throughput is >= the learner's, the GPU is removed from the
 * RMM's options, since sharing the GPU would slow the learner from
 * B/T_L to B/(T_L + T_RMM). Line 6 tests the FPGA only; §VI-B's text says
 * "a non-GPU device", and the CPU's RMM (one thread) shares nothing with a
 * GPU learner either, so any non-GPU device triggers it here;
 * rd_mapping_t.pruned_by says which. Only in the relaxed pipeline (D > 0):
 * in the strict loop nothing overlaps, so sharing costs nothing the serial
 * sum does not already count.
 *
 * Predicted GPS (steps per second) of a pair (learner L, RMM R):
 *   D > 0, L != R, or L == R on the CPU or the FPGA:  1 / max(T_L, T_R)
 *       = min(TP_L, TP_R) / B, eq. (3): the pipeline overlaps the two and
 *       the RMM has its own resources (1 CPU thread, 1 FPGA SLR, §VI-B);
 *   D > 0, L == R == GPU:  1 / (T_L + T_R), the paper's sharing penalty;
 *   D == 0 (strict loop: sample, train, update in turn, papers/001 §V-A):
 *       1 / (T_L + T_R + traffic * RD_MAPPER_WORD_BYTES / link_bytes_per_s),
 *       the transfer term 0 when link_bytes_per_s is 0. The relaxed cases
 *       leave transfers out, as the paper does (they overlap through the
 *       queues; §VII-D measured within 5% of this prediction).
 *
 * CPU sharing. §VI-B's "1 thread on CPU" for the RMM keeps it off the
 * learner's cores only while the CPU has a core for it: §V-B gives the
 * learner and the RMM a host thread each, and the learner's train-step was
 * profiled with cpu_learner_threads threads on an otherwise idle CPU. When
 * L == R == CPU, D > 0 and cpu_learner_threads + 1 > cpu_cores, the two
 * time-share the cores, and the relaxed prediction becomes
 *   1 / max(T_L, T_R, (threads_L * T_L + T_R) / cores)
 * (the core-seconds one step needs, spread over the cores), which is
 * 1/max(T_L, T_R) again as soon as a core is free for the RMM, and tends
 * to §VI-B's GPU-sharing penalty 1/(T_L + T_R) on a single core. With
 * cpu_cores 0 the rule is off (the paper's machine: 1/max).
 *
 * Pipeline costs. The paper's model counts the primitives only. The
 * pipeline the daemon runs (daemon/learn/pipeline.c: learner, RMM and storage
 * all on the CPU, the storage's gather on the sampler's thread) also pays
 * for the gather (T_G) and for handing batches between its two threads:
 * T_H per step in the strict loop (a wake-up each way and the batch
 * crossing cores), T_P per step on the learner's side when batches wait
 * in the queue (queue operations and reading a batch another core wrote).
 * Measured on 2 vCPUs, these were 10-40% of a CartPole step and made the
 * primitive-only prediction up to 3x too high. So when L == R == S == CPU:
 *   D == 0:  1 / (T_L + T_R + T_G + T_H)
 *   D > 0:   1 / max(T_L + T_P, T_R + T_G)   (and CPU sharing with
 *            T_L + T_P and T_R + T_G in place of T_L and T_R).
 * Other mappings keep the paper's formulas: their hand-off costs are
 * not measured here, and for the CPU pair they are the same for every
 * candidate sharing them, so they never change which mapping wins
 * between two all-CPU candidates (there is one).
 *
 * Step 3 (lines 9-16, storage). Per gradient step the storage exchanges
 * C_RMM = B words (indices) with the RMM, C_Learner = B*E (sampled items)
 * with the learner and C_Actor = N_actor*E (inserted items) with the
 * actors, which run on (in replayd: arrive through) the CPU. Placing the
 * storage on device d costs the sum of the C of the primitives NOT on d
 * (line 13 sums over the other primitives, which counts a primitive that
 * shares d's device as remote; the text, "traffic ... with primitives on
 * other heterogeneous devices", does not, and neither does this). The
 * candidates are the devices of the learner, the actors (CPU) and the RMM,
 * in that order, with a strict '<' as line 14, so an exact tie keeps the
 * earlier one; every candidate already hosts a primitive, so storage never
 * adds a device. Storage on the CPU is therefore right when the actors'
 * C is the largest share: for learner G and RMM C, G costs N_actor*E + B
 * and C costs B*E, so C wins iff N_actor >= B(E-1)/E, roughly iff the
 * actors insert at least as many items per step as the learner samples.
 *
 * Ties between whole mappings. Among the candidate (learner, RMM) pairs
 * whose GPS is within RD_MAPPER_TIE_REL of the best: fewest distinct
 * devices (the CPU always counts: actors), then least storage traffic,
 * then higher GPS, then higher RMM throughput, then cpu < gpu < fpga.
 */
#ifndef RD_MAPPER_H
#define RD_MAPPER_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"

/* Relative tolerance within which two predicted throughputs are a tie:
 * profiles repeat to a few percent, so a 1% difference is noise, not a
 * reason to use one more device. */
#define RD_MAPPER_TIE_REL 0.02
/* A word of papers/001's traffic model: 32-bit (FP32/INT32 data). */
#define RD_MAPPER_WORD_BYTES 4
#define RD_MAPPING_EXPLAIN_MAX 1024 /* the longest explanation is about 800 */
#define RD_MAPPING_CODE_MAX 6 /* "G-C-G" + NUL */

typedef enum { RD_DEV_CPU = 0, RD_DEV_GPU = 1, RD_DEV_FPGA = 2 } rd_devkind_t;
#define RD_DEV_COUNT 3

/* Where a table entry came from (for display; the mapper treats all alike). */
typedef enum {
  RD_PT_NONE = 0,     /* no figure: this primitive cannot run on this device */
  RD_PT_MEASURED = 1, /* profiled now by this daemon */
  RD_PT_CACHED = 2,   /* a stored profile of the same device and shape */
  RD_PT_MODEL = 3,    /* the FPGA's analytical model (backends/fpga/model.h) */
  RD_PT_ASSUMED = 4,  /* given by hand (configuration, tests) */
} rd_pt_source_t;

typedef enum { RD_BOTTLENECK_LEARNER = 0, RD_BOTTLENECK_RMM = 1 } rd_bottleneck_t;

/* One row of the table: a device. */
typedef struct {
  int present;              /* the device exists; an absent one's entries are ignored */
  double t_learner;         /* s per train-step at batch B; finite, > 0 unless src_learner is NONE */
  double t_rmm;             /* s per batch of B: sample + priority update; likewise */
  rd_pt_source_t src_learner; /* RD_PT_NONE: the learner cannot run here */
  rd_pt_source_t src_rmm;     /* RD_PT_NONE: the RMM cannot run here */
} rd_pdevice_t;

/* The primitive-platform table and the workload figures Step 3 needs. */
typedef struct {
  rd_pdevice_t dev[RD_DEV_COUNT]; /* indexed by rd_devkind_t; the CPU must be present */
  uint32_t batch;      /* B, >= 1 */
  uint32_t item_words; /* E: words (RD_MAPPER_WORD_BYTES) per stored item, >= 1 */
  /* N_actor: items the actors insert per gradient step, >= 0. papers/001
   * §VII-A runs 16 actors inserting one item each per step (16); with a
   * rate limiter it is B / samples_per_insert; actors running free insert
   * (their items/s) / GPS. */
  double n_actor;
  uint32_t depth;      /* D: batches sampled ahead; 0 = strict loop */
  double link_bytes_per_s; /* host-accelerator link (PCIe) for the strict loop; 0 = not modelled */
  /* The CPU's share rule (see "CPU sharing" above); 0 = not modelled. */
  uint32_t cpu_cores;           /* logical cores the pipeline's threads run on */
  uint32_t cpu_learner_threads; /* threads of the CPU learner's train-step (its profile's) */
  /* The CPU pipeline's own costs per step (see "Pipeline costs" above;
   * profile.h: gather, handoff, pass), >= 0; 0 = not modelled. */
  double cpu_gather_s, cpu_handoff_s, cpu_pass_s;
} rd_ptable_t;

typedef struct {
  rd_devkind_t learner, rmm, storage;
  double gps;            /* predicted gradient steps per second */
  double tp_learner;     /* B / T of the chosen learner entry, items/s */
  double tp_rmm;         /* B / T of the chosen RMM entry, items/s */
  rd_bottleneck_t bottleneck; /* the primitive with the larger time */
  int shares_gpu;        /* learner and RMM on one GPU: GPS = 1/(T_L + T_R) */
  int gpu_rmm_pruned;    /* Step 2 removed the GPU from the RMM's options */
  rd_devkind_t pruned_by; /* when pruned: the fastest non-GPU RMM with TP >= TP_L */
  double traffic_words;  /* per gradient step, the chosen storage placement */
  double traffic_on[RD_DEV_COUNT]; /* the same for storage on each device; -1: not a candidate */
  double transfer_s;     /* strict loop: traffic's time on the link; else 0 */
  uint32_t n_devices;    /* distinct devices used, the CPU included */
  char explain[RD_MAPPING_EXPLAIN_MAX]; /* why, for people (logs, replayctl) */
} rd_mapping_t;

/* "cpu", "gpu", "fpga"; "invalid" otherwise. */
const char *rd_devkind_name(rd_devkind_t d);
/* 'C', 'G', 'F' (papers/001 Table V); '?' otherwise. */
char rd_devkind_letter(rd_devkind_t d);
/* Accepts a name or a letter, any case. RD_EINVAL otherwise. */
int rd_devkind_parse(const char *s, rd_devkind_t *out, rd_error_t *err);
/* "-", "measured", "cached", "model", "assumed"; "invalid" otherwise. */
const char *rd_pt_source_name(rd_pt_source_t s);
/* "learner", "rmm"; "invalid" otherwise. */
const char *rd_bottleneck_name(rd_bottleneck_t b);

/* Check a table: B, E >= 1; N_actor, link finite and >= 0; the CPU
 * present; every entry of a present device with a source other than NONE
 * a finite time > 0 and a known source; at least one present learner and
 * one present RMM entry. RD_EINVAL names the entry ("gpu rmm time -1:
 * ..."). */
int rd_ptable_validate(const rd_ptable_t *t, rd_error_t *err);

/* Algorithm 3 on t (see above). Writes *out only on success, and then
 * every double of *out is a finite number (gps > 0). RD_EINVAL as
 * rd_ptable_validate; RD_ERANGE when finite figures still give one that
 * is not (B / T for a T near 0, a sum of times or the traffic of a huge
 * N_actor overflowing), naming it. */
int rd_map(const rd_ptable_t *t, rd_mapping_t *out, rd_error_t *err);

/* The Learner-RMM-Storage code of papers/001 Table V, e.g. "G-C-G".
 * RD_ETOOBIG if cap < RD_MAPPING_CODE_MAX, RD_EINVAL for a bad device
 * kind; buf holds "" then (if cap > 0). */
int rd_mapping_format(const rd_mapping_t *m, char *buf, size_t cap);

/* The table as text, one line per device plus one of workload figures:
 *
 *   device  learner s   items/s   from      rmm s       items/s   from
 *   cpu     3.000e-03   8.53e+04  measured  5.000e-04   5.12e+05  measured
 *   gpu     (absent)
 *   fpga    1.200e-03   2.13e+05  model     4.000e-05   6.4e+06   model
 *   B=256 E=27 words N_actor=16 items/step D=50 link=off
 *
 * It does not validate (it shows what it is given: a bad entry is how
 * a person finds it). *len (may be NULL) gets the text's length without
 * the NUL, also when it did not fit: RD_ETOOBIG then, and buf holds the
 * truncated text (cap >= *len + 1 is enough). RD_EINVAL for NULL or cap 0. */
int rd_ptable_format(const rd_ptable_t *t, char *buf, size_t cap, size_t *len);

#endif
