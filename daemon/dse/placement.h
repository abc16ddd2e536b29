/* placement.h - a workload's design-space exploration (papers/001 §VI,
 * Fig. 8): each device kind's figures, the primitive-platform table, the
 * mapping, and what of it runs where.
 *
 * One call, rd_placement_compute, for a registration and for a plan. It
 * asks every provider (provider.h) for its row, maps, and asks every
 * provider what of the mapping runs on it:
 *
 *  - CPU (always; backends/cpu/provider_cpu.c): sample and update at 1
 *    thread (a table call runs on one thread) and a train-step at each of
 *    rd_profile_default_threads(cores) plus the hosted learner's own thread
 *    count, through the profile cache (profile_cache.h): stored rows of this
 *    CPU, shape and build are reused ("cached"), otherwise measured within
 *    the budget and stored ("measured"). The table's CPU row: T_rmm =
 *    sample + update at 1 thread, T_learner = train at the learner's
 *    thread count; and the CPU pipeline's own costs.
 *  - GPU (backends/gpu/provider_gpu.c): the first present, usable GPU
 *    (devices.h; one marked unusable after a failure is left out). Its rows
 *    come from the profile cache: stored ones of that fingerprint and shape,
 *    imported or measured before ("cached"), else, in a build with the GPU
 *    backend, measured by the GPU profiler (the same per-device budget as
 *    the CPU; "measured") and stored; without it they are absent. A device
 *    fault while measuring marks the GPU unusable. A plan may assume a GPU:
 *    its profile rows (JSON lines as ExportProfiles writes them) for this
 *    shape ("assumed", the fastest thread count of each primitive, any
 *    build).
 *  - FPGA (backends/fpga/provider_fpga.c): the analytical model
 *    (backends/fpga/model.h) for an assumed part or this server's FPGA with
 *    a part file ("model"): the usable C-simulation FPGA (`fpga-csim`; its
 *    model is its part's name) first, else a usable XRT board whose model
 *    names a part (its name, or an Alveo shell name's "uNNN" token:
 *    "xilinx_u250_gen3x16_..." is u250); with an xclbin configured
 *    (provider_fpga.h rd_fpga_provider_setup_xrt) the board comes first. A
 *    design that does not fit leaves the row empty with the reason. On the
 *    C-simulation FPGA the RMM entry is also left empty when no built
 *    kernel holds the table (csim_rmm.h: capacity above 2^20), so the
 *    mapper keeps the RMM off it.
 *
 * The time bound: the CPU and (with the GPU backend) a GPU are measured,
 * each within budget_s (the default RD_PROFILE_DEFAULT_BUDGET_S, 1.5 s;
 * profile.h and provider_gpu.h say what it covers); a cache hit measures
 * nothing. The FPGA model is arithmetic (well under a millisecond).
 *
 * The mapping is papers/001 Algorithm 3 (mapper.h) with N_actor = 16 items
 * per step (the paper's 16 actors, §VII-A) for TrainStep-driven workloads,
 * B / samples_per_insert in continuous mode; E = ceil(row bytes / 4); the
 * pipeline's D; and the CPU-sharing rule with this CPU's cores. What runs
 * (rd_placement_bind: each provider's bind, by its can_run):
 *  - the learner on the GPU when the mapping chose it and the GPU learner
 *    can run there; on the FPGA when the mapping chose it and a kernel runs
 *    it there (provider_fpga.h rd_fpga_provider_run; learner_kind below; a
 *    learner backend that fails falls back to the CPU, pipeline.h); else
 *    on the CPU;
 *  - the sum tree on the GPU when mapped there and the GPU replay module
 *    (backends/gpu/rmm_gpu.h) is built and holds the table; on the FPGA
 *    when mapped there and a kernel runs it: the table's replay module is
 *    the kernel's C code on the C-simulation FPGA (csim_rmm.h) or the
 *    kernel on an XRT board (rmm_xrt.h); else the CPU's;
 *  - the storage: the table's ring in host memory, unless the GPU replay
 *    module runs and holds the rows; the running code says F when it was
 *    mapped to the C-simulation FPGA, whose storage is host memory (the
 *    note says so), C on a board (its memory is not used).
 * So `running` is e.g. "F-F-F", "G-C-C" or "C-C-C"; `note` says what runs
 * ("mapped F-F-F; running F-F-F (FPGA: C-simulation of u250, no board;
 * its storage is host memory)") and why it differs from the mapping
 * ("...: FPGA backend not available: fpga0 is an XRT board but no xclbin
 * is configured ..."). An XRT board runs the kernels of the `fpga-xclbin`
 * setting only; none has ever run here (only XRT's no-op shim, which is
 * never used for workloads). An assumed device runs nothing. A plan
 * computes the same, for the devices it assumes.
 */
#ifndef RD_PLACEMENT_H
#define RD_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "devices.h"
#include "learner_backend.h"
#include "mapper.h"
#include "model.h"
#include "pipeline.h"
#include "profile.h"
#include "rd_error.h"
#include "store.h"
#include "table.h"

#define RD_PLACEMENT_DETAIL_MAX 200
#define RD_PLACEMENT_NOTE_MAX 512
#define RD_PLACEMENT_MAX_GPU_ROWS 4096 /* assumed GPU profile lines, at most */

/* Devices a plan assumes instead of (or besides) this server's. */
typedef struct {
  const rd_profile_t *gpu_rows; /* assumed GPU profiles (any shapes), or NULL */
  size_t n_gpu_rows;
  const rd_fpga_part_t *fpga;   /* an assumed FPGA part, or NULL */
  int ignore_present;           /* leave out this server's own GPUs and FPGAs */
  int cache_only;               /* never measure: RD_ENOTFOUND if the store lacks the CPU's */
} rd_placement_assume_t;

typedef struct rd_placement {
  int mapped;                    /* 0: no table could be mapped (see note) */
  rd_ptable_t table;
  /* The device of this server behind each row (has_device 0: none, or an
   * assumed one): the GPU row's first usable GPU, the FPGA row's device. */
  rd_device_t device[RD_DEV_COUNT];
  int has_device[RD_DEV_COUNT];
  rd_mapping_t mapping;          /* when mapped */
  char fingerprint[RD_DEV_COUNT][RD_FPGA_NAME_MAX + 8];
  char detail[RD_DEV_COUNT][RD_PLACEMENT_DETAIL_MAX];
  int cache_hit;                 /* the CPU's figures came from the store */
  uint32_t profiles_measured;
  double register_ms;            /* profiling and mapping */
  char code[RD_MAPPING_CODE_MAX];    /* the mapping, "G-C-G"; "" if not mapped */
  char running[RD_MAPPING_CODE_MAX]; /* what is instantiated: "C-C-C" */
  char note[RD_PLACEMENT_NOTE_MAX];
  uint32_t learner_threads;
  /* Where the pipeline's threads run (cores.h), as the pipeline config
   * passed in said: the CPU profile was measured there, and the
   * registered pipeline is pinned there. Zeroed: unpinned. */
  rd_pin_t learner_pin, sampler_pin;
  /* The learner's device for the pipeline (pipeline.h learner_kind): the
   * kind and device ordinal of the provider that runs it (provider.h
   * can_run: the GPU when the mapping put the learner there, the GPU
   * learner is built and the GPU is present and usable; the FPGA when a
   * kernel runs it there); else the CPU. running's first letter says the
   * same. What actually runs after a fallback is the pipeline's
   * (rd_pipeline_learner_info). */
  rd_learner_kind_t learner_kind;
  uint32_t learner_device;
  /* The learner's backend when it is not learner_kind's default
   * (rd_learner_ops_for): &rd_learner_ops_fpga_xrt on an XRT board; NULL
   * otherwise. The pipeline's config.learner_ops. */
  const rd_learner_ops_t *learner_ops;
  /* The table's replay module (table.h config.rmm): NULL for the CPU sum
   * tree, else the module of the provider that runs the RMM (the GPU
   * replay module, &rd_fpga_csim_rmm_ops on the C-simulation FPGA,
   * &rd_fpga_xrt_rmm_ops on an XRT board). */
  const rd_rmm_ops_t *rmm_ops;
  /* The table's storage (table.h config.storage): NULL for the table's
   * ring in host memory, the GPU storage when the storage runs on a GPU. */
  const rd_storage_ops_t *storage_ops;
  /* The FPGA provider's (provider_fpga.c), for the note. */
  int fpga_csim;                     /* 1: running has an F, all of it C-simulation */
  int fpga_xrt;                      /* 1: running has an F, all of it an XRT board's kernels */
  uint32_t fpga_device;              /* the FPGA row's device index (C-simulation or board) */
  char fpga_part[RD_FPGA_NAME_MAX];  /* its part, e.g. "u250" */
  /* Why running differs from the mapping (the note's tail; "" if it does
   * not), kept so rd_placement_rmm_on_cpu can rewrite the note. */
  char why[RD_PLACEMENT_NOTE_MAX];
} rd_placement_t;

/* The placement of a hosted-learner workload (tc, pc as the registry
 * validated them). store may be NULL (measure, store nothing); assume may
 * be NULL. Errors: RD_EINVAL (a bad shape, or assumed GPU rows without a
 * row for this shape: nothing is measured then), RD_ENOMEM, RD_EINTERNAL
 * (profiling failed), RD_ENOTFOUND (cache_only and nothing stored). A
 * table that cannot be mapped (no learner figure within the budget) is not
 * an error: mapped = 0 and note says why. */
int rd_placement_compute(rd_store_t *store, const rd_table_config_t *tc,
                         const rd_pipeline_config_t *pc, uint32_t learner_threads,
                         double budget_s, const char *fpga_parts_dir,
                         const rd_placement_assume_t *assume, rd_placement_t *out,
                         rd_error_t *err);

/* What runs of o's mapping (rd_placement_compute's last step, exposed for
 * tests): reads o->mapping, o->code and the rows' devices (o->device,
 * o->has_device) and FPGA part; asks each provider's bind (provider.h).
 * Sets learner_kind, learner_device, learner_ops, rmm_ops, running, the
 * providers' own fields (fpga_csim, fpga_xrt), why and note. */
void rd_placement_bind(rd_placement_t *o, const rd_table_config_t *tc,
                       const rd_learner_config_t *lc);

/* A table could not create the placement's off-CPU replay module (the
 * registry falls back to the CPU tree: e.g. RD_EBUSY, another workload's
 * tree is on that board's kernel, rmm_xrt.h): rmm_ops becomes NULL,
 * running's replay letter C (and its storage letter, where the module held
 * the rows), and the note says why. */
void rd_placement_rmm_on_cpu(rd_placement_t *p, const char *why);

/* The table's replay module or storage failed while serving (a device
 * fault: rmm_gpu.h, rmm_xrt.h) and the table was moved to the CPU
 * (rd_table_to_cpu): the device behind it is given up in the device list
 * (devices.h rd_devices_mark_unusable), and running and the note say what
 * runs now and why, as rd_placement_rmm_on_cpu does at creation. */
void rd_placement_table_failed(rd_placement_t *p, const char *why);

#endif
