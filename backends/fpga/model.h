/* model.h - analytical performance model of the FPGA backend (issue 5,
 * "design-space exploration"): for a described FPGA part and a workload,
 * the hardware parameters the FPGA design would be built with and the
 * latencies it would reach. Pure C; no XRT, no device needed. The mapper
 * puts these figures in its primitive-platform table next to the CPU and
 * GPU measurements (papers/001 §VI-A3).
 *
 * Parts are data, not code: one `key = value` file per part (parts/NAME.part,
 * installed to RD_FPGA_PARTS_DEFAULT_DIR) with the device totals of AMD's
 * data sheets. Each SLR gets total / slrs of every resource, and a design
 * may use usable_pct percent of it (platform shell, routing: UG1393 says to
 * keep about 10% for infrastructure).
 *
 * Replay management module (RMM, the sum tree; papers/001 §IV-C4, §VI-A2;
 * thesis 004 §4.4.1.2). Confined to one SLR (papers/001 §VI-A2: no cross-SLR
 * routing, so a fast clock). The tree has H levels below the root, K^H >= N.
 * S pipelines ("bank parallelism"), each with one sampler and one updater
 * stage per level, every level in its own SRAM bank per pipeline:
 *   sample_cycles = ceil(B/S) * K + (H - 1) * K
 *   update_cycles = ceil(B/S)     + (H - 1)   (B + (H - 1) with one port
 *                                              per replica, see below)
 * The first terms are papers/001's "B/S x F" and "B/S"; the second is the
 * pipeline's fill, which thesis 004 Eqs 4.2-4.3 add (their factor 2 is not
 * explained there and is left out). S is a power of two: 1 if B <= H, else
 * the largest power of two <= B / H (papers/001: "to fully utilize the
 * parallelism provided by H stages, if B <= H, we use only a single
 * pipeline"; S proportional to B), at most N and RD_FPGA_MAX_S, halved
 * until the pipelines fit the SLR.
 * Why not more: a pipeline owns a contiguous range of subtrees and the
 * batch's targets land in them at random, so B/S is the mean load, close
 * to the busiest pipeline's only when every pipeline gets many items.
 * Because S jumps with B, the RMM latency is a sawtooth in B (it drops
 * where S doubles: a bigger design); for one design (a fixed
 * workload.rmm_s) it never falls as B grows.
 * The banks are those of the kernel (kernels/rmm.h): levels 1..J, J the
 * first level with K^J >= S, are replicated into every pipeline (papers/001:
 * the first log_K S levels are "broadcast to all the pipelines"; choosing a
 * child at level J needs all K siblings), each copy in whole sibling blocks
 * (nodes_{h-1} K words); pipeline p owns C = ceil(nodes_J / S) level-J nodes
 * and all below them (min(C K^(h-J), nodes_{h-1} K) words per bank). S need
 * not be a power of K, so that S can grow smoothly for K = 16.
 * Fixed point (papers/001 §IV-C4): W_b = W_parent - log2 K, so the root
 * holds leaf_bits + H log2 K bits. The root's bound is that of a full tree
 * of K^H leaves: with the per-level rule a tighter root (log2 N) would let
 * a lower level overflow when N < K^H. leaf_bits defaults to the width of
 * the CPU tree's largest leaf for this capacity (common/rd_fixed.h), so the
 * FPGA tree would hold the same integers and pick the same leaves as the
 * CPU and GPU trees; for N = K^H the root is then 63 bits, the CPU bound.
 * Exactness costs SRAM: 2^20 leaves at K = 2 (43- to 62-bit nodes, ~89 Mb)
 * do not fit one U200 SLR, where K = 16 does; papers/001's Table VI tree
 * (4.5 MB for 2^20 leaves) implies ~16-bit leaves (workload.leaf_bits).
 *
 * Update ports of the replicated levels. update_cycles' ceil(B/S) needs
 * every replica of levels 1..J to take up to S deltas per cycle, one from
 * each pipeline, possibly all on one node: every update path crosses these
 * levels, and each pipeline's updater (papers/001 §IV-D4) adds its delta
 * to every copy (§IV-C4 broadcasts the levels but does not say how the
 * copies absorb the pipelines' updates). A bank with one read and one
 * write port (a BRAM's two ports, LUTRAM's RAM64X1D) does one
 * read-modify-write per cycle, so each replicated level is built one of
 * two ways, its w = bank_words[h] words of W = width[h] bits:
 * - registers (RD_FPGA_PORT_REGS): the replicas complete-partitioned into
 *   flip-flops, S w W FFs. A W-bit adder takes W LUTs (carry chain; the
 *   address match that masks a delta fits the same LUT). Per word, S - 1
 *   adders sum the cycle's deltas addressed to it, once for all replicas
 *   (they receive the same deltas), and each replica's word adds that sum:
 *   (2S - 1) w W LUTs. Plus S one-hot address decoders (w outputs of one
 *   LUT6 per 6 address bits, one more per 5 beyond) and every lane's read
 *   mux, a w:1 mux of W bits from 4:1 LUT6 muxes, S W ceil((w - 1) / 3).
 *   No SRAM: the replicas' banks are gone.
 * - write-banked SRAM (RD_FPGA_PORT_BANKED): each replica is S sub-banks,
 *   sub-bank p written only by pipeline p and holding the sum of p's
 *   deltas modulo 2^W (so the sub-banks' sum modulo 2^W is the node's
 *   value, exactly, as the kernel's wrapping words). Pipeline p reads
 *   sub-bank p of its own replica, adds its delta with its updater stage's
 *   adder and writes the sum to sub-bank p of every replica: one read and
 *   one write port per bank, as every bank here. A sampler lane sums the S
 *   sub-banks it reads: S - 1 adders per lane, S (S - 1) W LUTs and as
 *   many FFs for their pipeline registers. S^2 banks of w words, placed as
 *   every bank (LUTRAM, BRAM or URAM).
 * (The leaf level, replicated when J = H, is costed alike: its words take
 * values rather than sums, through the same network.) Multi-pumping (the
 * banks at m times the kernel clock, 2m port cycles per kernel cycle) is
 * not an option here: the read-modify-write would have to close timing at
 * m times the kernel clock, m = 2 serves only S <= 2, and the part files
 * do not carry the block RAMs' clock limits. The choice is joint over the
 * J levels (the banks share one placement): of the 2^J combinations (J <=
 * 12), the one that fits with the smallest sum over resources of used /
 * usable, a resource's share of the SLR being what it takes from the rest
 * of the design. A design whose ports fit neither way keeps one port per
 * replica (a kernel build with both port masks 0), and says so (update_serial,
 * port_limit naming the resource): the replicated levels then take the
 * batch's B deltas one per cycle, update_cycles = B + (H - 1). In the
 * halving of S a design fits only with its ports, so S stops where they
 * fit; but the first S on the way down that fits only with one port is
 * kept too, and the one of the two with the fewer sample + update cycles
 * wins (the RMM's time in papers/001 §VI-A3's table; ties to the ports):
 * with a large K a bigger S samples so much faster that a serial update is
 * the better design. A fixed S (workload.rmm_s) is kept with one port per
 * replica if its ports do not fit. A fixed design (workload.rmm_ports_fixed:
 * S and the ports a kernel build names) is costed as it is, and fails with
 * RD_ERANGE if it does not fit. Not counted: the DSP adders of
 * replicated updater stages stay charged though registers do not use
 * them; the adder trees' latency (log2 S cycles per replicated level, not
 * in the fills, as the crossbar's is not); synthesis merging the equal
 * register replicas (the register figures are then an upper bound).
 *
 * Learner (papers/001 §IV-B3, §VI-A2; thesis 004 §4.3.2 Eq 4.1, §4.4.2.2).
 * DP pipelines each process PI = ceil(B/DP) samples. A pipeline is a chain
 * of n = 3L Tensor Units (TUs): FW through the L layers, LOSS, BW through
 * L-1 layers, WA (weight-gradient accumulation) for the L tensors; for DDPG
 * L is the actor's plus the critic's layers (the actor's update runs FW
 * actor, FW critic, -Q, BW critic to its input, BW actor). The other passes
 * our learner computes per sample (backends/cpu/learner.c) are TUs beside
 * the chain that feed it without making it deeper: DQN's target network
 * and, with double DQN, the online network on s'; DDPG's target actor and
 * critic on s' and the critic's TD path (FW on (s, a), its loss, its BW).
 * They cost resources like any TU. A TU for layer l does in*out
 * multiply-adds per sample (FW, BW, WA); LOSS does sizes[L] (DQN) or 1.
 * DSPs go to each TU in proportion to its multiply-adds (papers/001
 * "pipeline local optimization"): for a stage time T (cycles per sample)
 * TU i gets units_i = ceil(macs_i / T) MAC units, so
 *   T_i = ceil(macs_i / units_i) <= T,   T_max = max_i T_i,
 *   T_pipeline = (PI + n - 1) * T_max,
 *   T_WU = sum_j ceil((DP - 1 + U) * size(W_j) / wu_units),
 * where size(W_j) counts weights and biases of each trained tensor,
 * wu_units is the number of weight banks of one copy (the MAC units of the
 * chain's FW TUs: papers/001 sets r_WU to the number of weight SRAM banks),
 * DP - 1 adds reduce the DP gradients and U multiply-adds update a weight
 * (U = 1, SGD, is papers/001's DP x size(W_j)). The paper's factor f is the
 * smallest GEMM TU's unit count, ceil(min macs / T): units_i = r_i * f with
 * r_i normalised to that TU. Searching T instead of f lets a layer with
 * few multiply-adds share a unit (the paper's integer f >= 1 cannot go
 * below one unit per min-stage, which for Hopper-sized networks already
 * exceeds a U200). Global optimization: for every DP from 1 up (while one
 * pipeline per DP still fits at T = max macs), the smallest T whose DSPs,
 * LUTs, FFs and SRAM fit the learner's SLRs (the paper's "increment f until
 * a resource limit"), then the (DP, T) with the fewest cycles; ties go to
 * fewer pipelines, then to the largest T with the same cycles (fewest
 * resources for that latency).
 *
 * Resources per TU, per pipeline: weight copies in FW and BW TUs (each MAC
 * unit reads its own bank), a gradient accumulator per WA TU, the
 * activations a trained network's FW TU keeps for its BW and WA (its input
 * vector for every sample still in the pipeline behind it), small FIFOs for
 * the rest; one WU module with the optimizer's state. SRAM banks (shared
 * with the RMM): <= 64 words go to LUTRAM (2 LUTs per bit); larger ones to
 * BRAM18 halves (UG573 aspect ratios, a wide word split into 36-bit slices
 * plus the narrowest slice that holds the rest) or, when a bank would take
 * >= 8 BRAM18 and UltraRAM is left, to URAM (4K rows of 72 bits, as many
 * whole words per row as fit), largest banks first; a bank that finds no
 * block RAM spills to URAM.
 *
 * Constants the papers do not state (chosen here; each named below):
 * - DSPs per multiply-add (RD_FPGA_FX16/FX32/FP32): 1, 4 and 5. One DSP48E2
 *   multiplies 27x18 bits and accumulates 48 (UG579); a 32x32 product takes
 *   2x2 of them; papers/001 Table IV's 0.68 TOPS INT32 peak for the U200 is
 *   exactly 6840 / 4 MACs x 2 ops x 200 MHz. fp32: a full-DSP multiplier (3)
 *   plus adder (2) of the Floating-Point Operator (PG060).
 * - LUTs and FFs of the learner per DSP (143, 231): papers/001 Table VI's
 *   DSP-bound DQN learner, 615K LUT and 994K REG for 4315 DSPs. (Its DDPG
 *   learner spent 282 LUTs per DSP; this model will find DDPG designs
 *   DSP-bound where the paper's was LUT-bound.)
 * - RMM logic per stage (142 LUT, 206 FF) and DSPs (one adder per sampler
 *   or updater stage, ceil(W / dsp_alu_bits) DSP48s when the level is wider
 *   than a DSP's 48-bit ALU): Table VI's RMM at S = 32, K = 2, H = 20:
 *   1280 DSP = 32 x 2 x 20, 181K LUT and 263K REG over those 1280 stages.
 * - U and optimizer state words per weight: SGD 1 and 0 (papers/001);
 *   Adam with a Polyak target (our learner) 6 and 2: two multiply-adds each
 *   for m and v, one for the step (its square root and divide are
 *   pipelined beside it), one for the target mix; m and v are kept.
 * - Word widths: fx16 16 bits, fx32 32, fp32 32; gradient accumulators of
 *   fixed-point formats keep the full 2P-bit products (exact reduction).
 *
 * Allocation: none. The part loader reads files with fixed buffers (about
 * 40 KB of stack for a directory); the learner search works on the
 * caller's structures and about 50 KB of stack. Thread-safe: no state.
 */
#ifndef RD_FPGA_MODEL_H
#define RD_FPGA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "rd_error.h"
#include "rd_nn_spec.h"

/* Where the installed part files are; meson passes the install location
 * (get_option('datadir')/replayd/fpga-parts). rd_fpga_parts_default_dir()
 * returns the value the library itself was built with. */
#ifndef RD_FPGA_PARTS_DEFAULT_DIR
#define RD_FPGA_PARTS_DEFAULT_DIR "/usr/local/share/replayd/fpga-parts"
#endif

#define RD_FPGA_NAME_MAX 32     /* part name, with its NUL */
#define RD_FPGA_DEVICE_MAX 64   /* device string, with its NUL */
#define RD_FPGA_MAX_SLRS 8
#define RD_FPGA_MAX_PARTS 64    /* part files in one directory */
#define RD_FPGA_MAX_LEVELS 32   /* tree levels below the root */
#define RD_FPGA_MAX_TUS 160     /* DDPG with 16 + 16 layers: 4*16 + 6*16 */
#define RD_FPGA_MAX_BATCH 65536u
#define RD_FPGA_MAX_CAPACITY (1u << 30)
#define RD_FPGA_MAX_S 4096u     /* RMM pipelines considered */

/* Constants chosen by this model (see the header comment for why). */
#define RD_FPGA_RMM_LUT_PER_STAGE 142u
#define RD_FPGA_RMM_FF_PER_STAGE 206u
#define RD_FPGA_LEARNER_LUT_PER_DSP 143u
#define RD_FPGA_LEARNER_FF_PER_DSP 231u
#define RD_FPGA_LUTRAM_MAX_WORDS 64u   /* a bank this shallow is distributed RAM */
#define RD_FPGA_URAM_MIN_BRAM18 8u     /* a bank this large goes to URAM first */

/* Resource counts: DSP48 slices, 6-input LUTs, flip-flops, 36 Kb block RAMs
 * (two 18 Kb halves each), 288 Kb UltraRAMs. */
typedef struct {
  uint64_t dsp, lut, ff, bram36, uram;
} rd_fpga_res_t;

/* One FPGA part, as a part file describes it. */
typedef struct {
  char name[RD_FPGA_NAME_MAX];     /* "u200"; equals the file's stem */
  char device[RD_FPGA_DEVICE_MAX]; /* "xcu200-fsgd2104-2-e" (informational) */
  uint32_t slrs;                   /* super logic regions, 1..RD_FPGA_MAX_SLRS */
  rd_fpga_res_t per_slr;           /* device totals / slrs */
  uint32_t usable_pct;             /* percent of each SLR a design may use, 1..100 */
  uint32_t clock_mhz;              /* default kernel clock */
  uint32_t dsp_alu_bits;           /* width of one DSP's adder (48 for DSP48E2) */
  uint32_t ddr_banks, ddr_gb;      /* off-chip DDR: channels, GiB */
  uint32_t hbm_gb, hbm_channels;   /* in-package HBM (0 if none) */
  uint32_t mem_bw_gbps;            /* peak off-chip bandwidth, GB/s */
} rd_fpga_part_t;

/* The library's built-in parts directory (RD_FPGA_PARTS_DEFAULT_DIR as
 * this library was compiled). Never NULL. */
const char *rd_fpga_parts_default_dir(void);

/* Load one part file, or every "*.part" file of a directory (sorted by file
 * name), into out[0..*n). Format: one `key = value` per line; '#' starts a
 * comment; blank lines are ignored. Keys: name, slrs, dsp, bram36, uram,
 * lut, ff (device totals, each divisible by slrs), clock_mhz (required);
 * device, usable_pct (100), dsp_alu_bits (48), ddr_banks, ddr_gb, hbm_gb,
 * hbm_channels, mem_bw_gbps (0) optional. A file named X.part must say
 * name = X. Errors: RD_EINVAL "file:line: what" for a malformed line, an
 * unknown or repeated key, a value that is not a whole number or is out
 * of range; "file: ..." for a missing key, an uneven split over SLRs, a
 * name that does not match the file, a name two files share, a directory
 * without part files, a file that cannot be read; RD_ETOOBIG if there are
 * more than cap (or RD_FPGA_MAX_PARTS) parts. Nothing is written on error. */
int rd_fpga_parts_load(const char *dir_or_file, rd_fpga_part_t *out, size_t cap, size_t *n,
                       rd_error_t *err);

/* Load the part called name from dir (NULL: rd_fpga_parts_default_dir()):
 * the file dir/name.part. RD_ENOTFOUND naming the parts dir does have if
 * there is no such file; RD_EINVAL for a malformed name or file. */
int rd_fpga_part_find(const char *name, const char *dir, rd_fpga_part_t *out, rd_error_t *err);

/* RD_EINVAL naming the bad field (for parts built in code). */
int rd_fpga_part_validate(const rd_fpga_part_t *p, rd_error_t *err);

typedef enum {
  RD_FPGA_NO_LEARNER = 0, /* replay only: no learner on the FPGA */
  RD_FPGA_DQN = 1,        /* same values as rd_algo_t (backends/cpu/learner.h) */
  RD_FPGA_DDPG = 2,
} rd_fpga_algo_t;

typedef enum {
  RD_FPGA_FP32 = 0, /* what our learners compute in (default) */
  RD_FPGA_FX32 = 1, /* 32-bit fixed point (papers/001's INT32 learner) */
  RD_FPGA_FX16 = 2,
} rd_fpga_precision_t;

typedef enum {
  RD_FPGA_ADAM = 0, /* Adam and a Polyak target, as our learner (default) */
  RD_FPGA_SGD = 1,  /* plain SGD: papers/001's T_WU */
} rd_fpga_optimizer_t;

typedef struct {
  uint32_t batch;         /* B, 1..RD_FPGA_MAX_BATCH */
  uint32_t capacity;      /* N, 2..RD_FPGA_MAX_CAPACITY */
  uint32_t fanout;        /* K, a power of two in [2, 64] (as the CPU tree) */
  uint32_t leaf_bits;     /* fixed-point leaf width; 0: the CPU tree's for N */
  uint32_t rmm_s;         /* 0: choose S; else this S (a power of two) */
  int rmm_ports_fixed;    /* 0: choose the update ports; 1 (needs rmm_s): the design
                             of the two masks below, as a kernel build names it
                             (kernels/rmm.h RMM_PORT_REGS, RMM_PORT_BANKED) */
  uint32_t rmm_port_regs;   /* bit h-1: replicated level h in registers */
  uint32_t rmm_port_banked; /* bit h-1: replicated level h write-banked; both 0: one
                               port per replica (update_serial). Else together they
                               name each of levels 1..J once, no other bit */
  rd_fpga_algo_t algo;
  rd_nn_spec_t net[2];    /* DQN: net[0] the Q network. DDPG: net[0] the actor,
                             net[1] the critic ([obs, action] -> 1) */
  int double_dqn;         /* DQN: also run the online network on s' (default 1) */
  rd_fpga_precision_t precision;
  rd_fpga_optimizer_t optimizer;
  uint32_t clock_mhz;     /* 0: the part's */
  uint32_t learner_slrs;  /* 0: all SLRs but the RMM's; else 1..slrs */
} rd_fpga_workload_t;

/* B 32, N 2^20, K 16, leaf_bits 0, rmm_s 0, no learner, double_dqn 1,
 * fp32, Adam, clock_mhz 0, learner_slrs 0; networks zeroed. */
void rd_fpga_workload_default(rd_fpga_workload_t *w);

/* RD_EINVAL naming the bad field (networks: rd_nn_spec_validate's message,
 * DDPG's critic input must be obs + action and its output 1). */
int rd_fpga_workload_validate(const rd_fpga_workload_t *w, rd_error_t *err);

/* How a level of the RMM takes the S deltas of an update cycle (see the
 * header comment, "Update ports of the replicated levels"). */
typedef enum {
  RD_FPGA_PORT_NONE = 0,   /* not replicated (the root, a private level): one delta per
                              cycle per bank is all the pipeline sends it */
  RD_FPGA_PORT_ONE = 1,    /* replicated, one read-modify-write per cycle: the batch
                              serialises (update_serial) */
  RD_FPGA_PORT_REGS = 2,   /* replicated in flip-flops (complete partition) */
  RD_FPGA_PORT_BANKED = 3, /* replicated, each replica S write-banked SRAM sub-banks */
} rd_fpga_port_t;

typedef struct {
  uint32_t levels;                         /* H: levels below the root = pipeline stages */
  uint32_t width[RD_FPGA_MAX_LEVELS + 1];  /* bits; [0] root ... [H] leaves */
  uint64_t nodes[RD_FPGA_MAX_LEVELS + 1];  /* nodes per level; [0] = 1 */
  uint32_t leaf_bits;
  uint32_t s;              /* bank parallelism S */
  uint32_t s_batch;        /* S the batch asks for (B/H rule, <= N) */
  uint32_t shared_levels;  /* levels 1..shared_levels are replicated per pipeline
                              (J: the first level with K^J >= S) */
  uint64_t bank_words[RD_FPGA_MAX_LEVELS + 1]; /* words of level h in one pipeline's bank
                                                  (kernels/rmm.h RMM_DEPTH); [0] = 1 */
  const char *limit;       /* what bounds S: "batch", "capacity", "max" (RD_FPGA_MAX_S),
                              "fixed" (workload.rmm_s), "dsp", "lut", "ff", "sram" */
  rd_fpga_port_t port[RD_FPGA_MAX_LEVELS + 1]; /* levels 1..shared_levels: REGS or BANKED,
                                                  ONE when update_serial; NONE elsewhere */
  uint64_t banks[RD_FPGA_MAX_LEVELS + 1];      /* SRAM banks of level h, each bank_words[h]
                                                  deep: S (private, or one port per
                                                  replica), S^2 (banked), 0 (registers:
                                                  S bank_words[h] words of flip-flops);
                                                  [0] = 0, the root is a register */
  int update_serial;       /* 1: the ports fit neither way at this S; the replicated
                              levels serialise the batch, update_cycles = B + (H - 1) */
  const char *port_limit;  /* NULL, or the resource the cheapest design with ports
                              exceeds: at this S when update_serial, else at 2S, where
                              one port per replica fitted (S was halved for the ports) */
  rd_fpga_res_t used_one_port; /* this S with one port per replica (the design before
                                  the ports; against used, what they cost) */
  uint64_t sample_cycles;  /* fill included */
  uint64_t sample_fill_cycles;
  uint64_t update_cycles;
  uint64_t update_fill_cycles;
  uint32_t clock_mhz;
  double sample_s, update_s;
  rd_fpga_res_t used;      /* in the RMM's SLR */
  rd_fpga_res_t avail;     /* that SLR's usable resources */
} rd_fpga_rmm_est_t;

typedef enum {
  RD_FPGA_TU_FW = 0,
  RD_FPGA_TU_LOSS = 1,
  RD_FPGA_TU_BW = 2,
  RD_FPGA_TU_WA = 3,
} rd_fpga_tu_kind_t;

typedef struct {
  char label[16];          /* "FW0", "BW2", "WA1", "LOSS"; side TUs "t:" target,
                              "d:" double DQN, "c:" DDPG critic TD path;
                              DDPG chain: "aFW0" actor, "cFW0" critic, ... */
  rd_fpga_tu_kind_t kind;
  uint32_t net;            /* index into workload.net */
  uint32_t layer;
  uint32_t chain;          /* 1: one of the n chain stages; 0: beside the chain */
  uint32_t depth;          /* 1..n: position in the pipeline */
  uint64_t macs;           /* multiply-adds per sample */
  uint64_t units;          /* MAC units per pipeline: ceil(macs / T) */
  uint64_t dsp;            /* units * DSPs per multiply-add */
  uint64_t cycles;         /* per sample: ceil(macs / units) */
} rd_fpga_tu_t;

typedef struct {
  uint32_t dp;             /* data-parallel pipelines */
  uint32_t pi;             /* samples per pipeline, ceil(B / DP) */
  uint64_t f;              /* papers/001's f: MAC units of the smallest GEMM TU */
  uint64_t t_target;       /* T, the stage time the units were sized for */
  uint32_t n;              /* pipeline depth (3L) */
  uint32_t n_tus;          /* TUs per pipeline, chain and side */
  rd_fpga_tu_t tu[RD_FPGA_MAX_TUS];
  uint64_t pipeline_units; /* MAC units of one pipeline */
  uint64_t wu_units;       /* MAC units of the weight-update module */
  uint64_t wu_dsp;
  uint64_t t_max, t_pipeline, t_wu, cycles;
  uint32_t clock_mhz;
  double step_s;           /* cycles at the clock */
  const char *limit;       /* what stops a smaller T at this DP: "stage" (every
                              stage already takes one cycle), "dsp", "lut", "ff", "sram" */
  rd_fpga_res_t used;
  rd_fpga_res_t avail;     /* usable resources of the learner's SLRs */
  uint32_t slrs;           /* SLRs the learner may use */
} rd_fpga_learner_est_t;

typedef struct {
  rd_fpga_rmm_est_t rmm;
  int has_learner;         /* 0 when workload.algo is RD_FPGA_NO_LEARNER */
  rd_fpga_learner_est_t learner;
} rd_fpga_estimate_t;

/* The RMM alone. RD_EINVAL for a bad part or workload; RD_ERANGE, with
 * what it needs and what one SLR has, when the tree does not fit one SLR
 * even with S = 1 (or with the fixed workload.rmm_s). Nothing is written
 * on error. */
int rd_fpga_model_rmm(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                      rd_fpga_rmm_est_t *out, rd_error_t *err);

/* The learner alone. RD_EINVAL as above, also for RD_FPGA_NO_LEARNER or
 * learner_slrs > slrs; RD_ERANGE, naming the resource, its need and what
 * the learner's SLRs have, when even one pipeline with one MAC unit per
 * TU (DP = 1, f = 1) does not fit (e.g. weights beyond on-chip SRAM).
 * Nothing is written on error. */
int rd_fpga_model_learner(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                          rd_fpga_learner_est_t *out, rd_error_t *err);

/* Both, with papers/001's split: the RMM in one SLR, the learner in
 * learner_slrs (default: the rest). Fails as either does. */
int rd_fpga_model_estimate(const rd_fpga_part_t *p, const rd_fpga_workload_t *w,
                           rd_fpga_estimate_t *out, rd_error_t *err);

/* "fp32", "fx32", "fx16" ("invalid" otherwise). */
const char *rd_fpga_precision_name(rd_fpga_precision_t p);

/* "none", "one port", "registers", "banked" ("invalid" otherwise). */
const char *rd_fpga_port_name(rd_fpga_port_t p);

/* The learner kernel's build parameters for this design (kernels/learner.h):
 * "-DLRN_UNITS_N<net>_L<l>=<units>" for every layer of every network, in
 * network then layer order, space-separated, into buf (cap bytes). The
 * FW, BW and WA TUs of one layer get the same units (they do the same
 * multiply-adds). RD_ERANGE if a network is deeper than the kernel's
 * LRN_UNIT_LAYERS (8) or has more than 2 networks, RD_ETOOBIG if cap is too
 * small; buf is then "". */
int rd_fpga_learner_unit_defs(const rd_fpga_learner_est_t *e, char *buf, size_t cap,
                              rd_error_t *err);

/* The replay kernel's build parameters for this design (kernels/rmm.h):
 * RMM_PORT_REGS and RMM_PORT_BANKED, bit h-1 for replicated level h; both
 * 0 when nothing is replicated or the update is serial. */
void rd_fpga_rmm_port_masks(const rd_fpga_rmm_est_t *e, uint32_t *regs, uint32_t *banked);

#endif
