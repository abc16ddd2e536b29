/* rmm.h - the FPGA replay management module (RMM): the K-ary sum tree as an
 * HLS kernel (Vitis HLS dialect), written so that it also compiles and runs
 * as plain C (C-simulation). Sources: papers/001 §IV-C4 (one pipeline stage
 * per tree level, every level in its own on-chip bank, bank parallelism S
 * over sub-trees, variable-precision fixed point), §IV-D4 (pipelined
 * updaters with a memo of the sampled path), §VI-A2 (the cycle model);
 * thesis 004 §4.4.1.2 (a template parameterised by depth and fanout, one
 * request stream decoded by an operation code).
 *
 * WHAT RUNS HERE: C-simulation only. No Vitis HLS was available to
 * synthesise this code, so the pragmas, the interface and the II targets
 * are unverified by a tool; the C behaviour is tested against the CPU sum
 * tree (tests/test_fpga_rmm.c).
 *
 * ONE BUILD, ONE TREE SHAPE. As in the paper's template instantiation
 * (papers/001 §VI step 3), the hardware parameters are compile-time
 * constants chosen by the architecture exploration (backends/fpga/model.c):
 *   RMM_K          fanout K, a power of two in [2, 64]
 *   RMM_CAPACITY   leaves N, 2 .. 2^30
 *   RMM_S          bank parallelism S, a power of two <= N
 *   RMM_MIN_TABLE  the fewest leaves of a table this build serves, 1..N
 *                  (default N). Sets the default RMM_MAX_LEAF
 *   RMM_MAX_LEAF   largest leaf accepted (default: the CPU tree's for
 *                  RMM_MIN_TABLE leaves, (2^63 - 1) / RMM_MIN_TABLE; with
 *                  the default, a full tree's total stays below 2^63). A
 *                  build that serves tables of fewer leaves than N raises
 *                  it through RMM_MIN_TABLE; then the caller keeps the total
 *                  below 2^63, as a table does by its own capacity (the
 *                  daemon's C-simulation build, backends/fpga/csim_rmm.c,
 *                  and the XRT build's fpga-xclbin-shape do this)
 *   RMM_LEAF_BITS  leaf width (default: the width of RMM_MAX_LEAF, so this
 *                  tree holds the CPU's integers, common/rd_fixed.h)
 *   RMM_MAX_BATCH  largest sample/update batch (memo and FIFO depth)
 *   RMM_PORT_REGS, RMM_PORT_BANKED  how each replicated level takes the S
 *                  deltas of an update cycle (see UPDATE PORTS): bit h-1 of
 *                  one of them for each level h in 1..J; both 0 (default):
 *                  one port per replica, the update serialises. model.c
 *                  chooses them (rd_fpga_rmm_port_masks; `replayctl plan`
 *                  shows them)
 *   RMM_NO_KERNEL_TOP  defined: leave out rmm_kernel and its static tree
 *                  (a host program that keeps its own trees)
 * Everything else (levels H, widths, banks) is derived below, by the same
 * rules as model.c; tests/test_fpga_rmm.c checks the two agree.
 *
 * REPRESENTATION. Level h (1..H; the root, level 0, is the total register)
 * stores node values, not prefix sums (the CPU's blocks): a sampler stage
 * scans a node's K children with a running sum, one child per cycle
 * (papers/001 §IV-C4: "a register is used to track the accumulated
 * priority while traversing the child nodes"). The rule is the CPU's
 * (backends/cpu/sumtree.h): target t in [0, total) selects the smallest
 * leaf i with leaf[0] + ... + leaf[i] > t, so with the same leaf integers
 * both pick the same leaf for every target, whatever the tree's shape.
 * Level h's words are W_h = RMM_LEAF_BITS + (H - h) log2 K bits wide
 * (W_b = W_parent - log2 K, papers/001 §IV-C4): ap_uint<W_h> in synthesis;
 * in C-simulation uint64_t masked to W_h on every write, so the C model
 * wraps exactly as the hardware words would (a width too small shows up as
 * a wrong total or leaf in the tests, which fill trees with maximal leaves).
 *
 * BANKS (papers/001 §IV-C4, "S sub-trees rooted at the nodes in the first
 * log_K S tree levels ... broadcast to all the pipelines"). Let J be the
 * first level with K^J >= S (J = 0 when S = 1). Levels 1..J are
 * REPLICATED: each of the S pipelines keeps a copy (choosing a child at
 * level J needs all K siblings, which would otherwise sit in different
 * banks). Below, levels J+1..H are PRIVATE: pipeline q owns the level-J
 * nodes [q C, (q + 1) C), C = ceil(nodes_J / S), and every node below them,
 * so a descent or an update path below level J stays inside one bank.
 * Bank depth of a private level h: min(C K^(h-J), nodes_{h-1} K); of a
 * replicated level: nodes_{h-1} K (whole sibling blocks, padding zero).
 *
 * PIPELINES. Sample: a dealer hands target i to lane i mod S; each lane
 * descends the replicated levels in its copy (K cycles per item per stage,
 * the inner child loop pipelined at II = 1); a crossbar then routes the item
 * to the owner of its level-J node, whose private stages finish the descent;
 * a collector writes leaves and the path memo in batch order. Cycles (the
 * model's, papers/001 §VI-A2 "B/S x F" plus thesis 004's fill):
 *   ceil(B/S) K + (H - 1) K   when the items spread evenly over banks.
 * Update: a dealer sends each item, with its path (from the memo,
 * papers/001 §IV-D4, or from the position by shifts), to the pipeline that
 * owns its level-J node (its leaf when J = H; pipeline 0 when S = 1), so
 * the items of one leaf meet in one pipeline in batch order and the later
 * value wins, as on the CPU. The S pipelines run in lockstep, one item
 * each per cycle: the leaf stage computes the delta (new - old, modulo
 * 2^W_H) and every stage above adds it (II = 1; a forwarding register
 * covers back-to-back items on one node); the private levels are the
 * pipeline's own banks, and every replica of the replicated levels adds
 * every pipeline's deltas, so the copies stay equal. Insert is an update
 * of consecutive positions. Cycles: (items of the busiest pipeline) +
 * (H - 1), ceil(B/S) + (H - 1) for an even spread, which needs every
 * replica to take up to S deltas per cycle, possibly on one node.
 *
 * UPDATE PORTS (model.h, "Update ports of the replicated levels"; the
 * build chooses per replicated level, RMM_PORT_REGS / RMM_PORT_BANKED):
 * - registers: the level's replicas are complete-partitioned (every word a
 *   register, RMM_PKIND_h REGS); the S adds to a word in one cycle form an
 *   adder chain, and a lane's read is a mux;
 * - write-banked: each replica is S sub-banks (lh[replica][sub-bank][i]);
 *   pipeline p reads sub-bank p of its own replica, adds its delta and
 *   writes the sum to sub-bank p of every replica, so every sub-bank has one
 *   writer; a node's value is the sum of its S sub-banks modulo 2^W_h,
 *   which a sampler lane adds up (S - 1 adders) when it reads;
 * - neither (both masks 0): each replica is one memory with one port, the
 *   S pipelines' deltas queue for it, and the update takes B + (H - 1)
 *   cycles (the model's update_serial).
 * A level's words are the same integers either way: the C-simulation picks
 * the same leaves for every choice, and tests/test_fpga_rmm.c builds all
 * three. The structural count (rmm_stats_t) follows the choice.
 *
 * What the C-simulation reports as cycles (rmm_stats_t) is this structural
 * count from the real per-lane and per-bank loads of the batch, not a
 * cycle-accurate simulation of the generated RTL.
 */
#ifndef RMM_H_INCLUDED
#define RMM_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Build configuration                                                 */
/* ------------------------------------------------------------------ */

#ifndef RMM_K
#define RMM_K 16
#endif
#ifndef RMM_CAPACITY
#define RMM_CAPACITY 65536
#endif
#ifndef RMM_S
#define RMM_S 1
#endif
#ifndef RMM_MAX_BATCH
#define RMM_MAX_BATCH 1024
#endif

/* Bit length of x (0 for 0) as an integer constant expression. */
#define RMM_BL1(x) ((x) != 0 ? 1 : 0)
#define RMM_BL2(x) (((x) >> 1) ? 1 + RMM_BL1((x) >> 1) : RMM_BL1(x))
#define RMM_BL4(x) (((x) >> 2) ? 2 + RMM_BL2((x) >> 2) : RMM_BL2(x))
#define RMM_BL8(x) (((x) >> 4) ? 4 + RMM_BL4((x) >> 4) : RMM_BL4(x))
#define RMM_BL16(x) (((x) >> 8) ? 8 + RMM_BL8((x) >> 8) : RMM_BL8(x))
#define RMM_BL32(x) (((x) >> 16) ? 16 + RMM_BL16((x) >> 16) : RMM_BL16(x))
#define RMM_BL64(x) (((x) >> 32) ? 32 + RMM_BL32((x) >> 32) : RMM_BL32(x))

/* These three are cast-free: rmm_levels.h tests RMM_H in #if. */
#define RMM_LOG2K (RMM_BL8(RMM_K) - 1)
#define RMM_LOG2S (RMM_BL16(RMM_S) - 1)

/* Largest leaf the CPU tree accepts for N leaves (rd_st_max_leaf): the
 * total of N of them stays below 2^63. The kernel accepts the same, unless
 * the build raises it (see above). */
#ifndef RMM_MIN_TABLE
#define RMM_MIN_TABLE RMM_CAPACITY
#endif
#ifndef RMM_MAX_LEAF
#define RMM_MAX_LEAF ((UINT64_C(0x7fffffffffffffff)) / (uint64_t)RMM_MIN_TABLE)
#endif
#ifndef RMM_PORT_REGS
#define RMM_PORT_REGS 0
#endif
#ifndef RMM_PORT_BANKED
#define RMM_PORT_BANKED 0
#endif
#ifndef RMM_LEAF_BITS
#define RMM_LEAF_BITS RMM_BL64(RMM_MAX_LEAF)
#endif

/* H: levels below the root, the smallest H with K^H >= N. */
#define RMM_H ((RMM_BL32(RMM_CAPACITY - 1) + RMM_LOG2K - 1) / RMM_LOG2K)
/* J: replicated levels, the smallest J with K^J >= S. */
#define RMM_J ((RMM_LOG2S + RMM_LOG2K - 1) / RMM_LOG2K)

/* Nodes of level h (0..H): ceil(N / K^(H-h)). */
#define RMM_NODES(h) ((((uint64_t)RMM_CAPACITY - 1) >> ((RMM_H - (h)) * RMM_LOG2K)) + 1)
/* Entries of level h (1..H) in whole sibling blocks. */
#define RMM_BLOCKED(h) (RMM_NODES((h) - 1) * (uint64_t)RMM_K)
/* Level-J nodes per bank. */
#define RMM_C ((RMM_NODES(RMM_J) + RMM_S - 1) / RMM_S)
#define RMM_REPLICATED(h) ((h) <= RMM_J)
/* Update ports (UPDATE PORTS above): the bits of levels 1..J, whether the
 * update serialises, and the sub-banks per replica of level h. */
#define RMM_J_MASK ((1 << RMM_J) - 1)
#define RMM_SERIAL (RMM_J > 0 && (RMM_PORT_REGS | RMM_PORT_BANKED) == 0)
#define RMM_IS_BANKED(h) (RMM_REPLICATED(h) && ((RMM_PORT_BANKED >> ((h) - 1)) & 1))
#define RMM_IS_REGS(h) (RMM_REPLICATED(h) && ((RMM_PORT_REGS >> ((h) - 1)) & 1))
#define RMM_SUB(h) (RMM_IS_BANKED(h) ? RMM_S : 1)
/* Private level h: C K^(h-J) nodes per bank, at most the whole level. */
#define RMM_PRIV_SPAN(h) (RMM_C << (((h) > RMM_J ? (h) - RMM_J : 0) * RMM_LOG2K))
#define RMM_DEPTH(h)                                                              \
  (RMM_REPLICATED(h) ? RMM_BLOCKED(h)                                             \
                     : (RMM_PRIV_SPAN(h) < RMM_BLOCKED(h) ? RMM_PRIV_SPAN(h)      \
                                                          : RMM_BLOCKED(h)))

/* Word width of level h (0 = root): W_b = W_parent - log2 K. */
#define RMM_W(h) (RMM_LEAF_BITS + (RMM_H - (h)) * RMM_LOG2K)
#define RMM_MASK(h) (RMM_W(h) >= 64 ? ~UINT64_C(0) : ((UINT64_C(1) << (RMM_W(h) & 63)) - 1))

/* Pipeline structure, as model.c assumes it (papers/001 §VI-A2). */
#define RMM_STAGES RMM_H               /* one sampler and one updater per level */
#define RMM_SAMPLE_ITEM_II RMM_K       /* cycles per item per sampler stage (K children, II = 1) */
#define RMM_UPDATE_ITEM_II 1           /* cycles per item per updater stage */
#define RMM_SAMPLE_FILL ((RMM_STAGES - 1) * RMM_SAMPLE_ITEM_II)
#define RMM_UPDATE_FILL ((RMM_STAGES - 1) * RMM_UPDATE_ITEM_II)

/* ------------------------------------------------------------------ */
/* Word types                                                          */
/* ------------------------------------------------------------------ */

/* Vitis HLS has arbitrary-precision integers only for C++ (UG1399, "C
 * Arbitrary Precision Types": not supported for C), so the synthesis build
 * compiles this file as C++ (kernels/rmm_hls.cpp includes rmm.c) and takes
 * ap_uint<W>; the C build takes uint64_t and masks. */
#if defined(__SYNTHESIS__) && defined(__cplusplus)
#include <ap_int.h>
#define RMM_UINT(w) ap_uint<(w)>
#else
#define RMM_UINT(w) uint64_t
#endif

#include "rmm_levels.h"

#define RMM_LEVEL_TYPE(h) typedef RMM_UINT(RMM_W(h)) rmm_l##h##_t;
RMM_FOR_LEVELS(RMM_LEVEL_TYPE)
typedef RMM_UINT(RMM_W(0)) rmm_root_t;

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

#define RMM_LEVEL_ARRAY(h) rmm_l##h##_t l##h[RMM_S][RMM_SUB(h)][RMM_DEPTH(h)];

/* The on-chip state: one array per level, lN[bank or replica][sub-bank][i]
 * (one sub-bank except on a write-banked level), the root's total, and the
 * memo of the last sample's paths (memo[h][i]: the node of level h on item
 * i's path; [H] is its leaf). What the FIFOs between stages carry in
 * hardware is here as whole-batch buffers: resid[i], item i's residual
 * target between sampler stages; owner[i], the pipeline the crossbar (or
 * an update's dealer) sends it to; order, the items grouped by pipeline in
 * batch order (pipeline q's are order[first[q] .. first[q] + load[q])). */
typedef struct {
  rmm_root_t total;
  RMM_FOR_LEVELS(RMM_LEVEL_ARRAY)
  uint32_t memo[RMM_H + 1][RMM_MAX_BATCH];
  uint32_t memo_n;
  uint64_t resid[RMM_MAX_BATCH];
  uint32_t owner[RMM_MAX_BATCH];
  uint32_t order[RMM_MAX_BATCH];
  uint32_t first[RMM_S];
  uint32_t load[RMM_S];
} rmm_tree_t;

/* Status codes (the kernel's status word). */
enum {
  RMM_OK = 0,
  RMM_ERANGE = 1,    /* target >= total, position >= N, value > RMM_MAX_LEAF */
  RMM_EEMPTY = 2,    /* sample from a tree whose total is 0 */
  RMM_ETOOBIG = 3,   /* n > RMM_MAX_BATCH, or more than the last sample (memo update) */
  RMM_EBADOP = 4,    /* unknown operation code */
  RMM_ECORRUPT = 5,  /* a descent found no child: the tree is inconsistent */
};

/* Structural cycle count of one call (see the header comment). */
typedef struct {
  uint64_t cycles;
  uint32_t max_lane;  /* sample: items in the busiest replicated-level lane (0 when J = 0);
                         update: 0 */
  uint32_t max_bank;  /* sample: items in the busiest private bank (0 when J = H);
                         update: items of the busiest pipeline */
} rmm_stats_t;

/* Operation codes of the kernel's request (thesis 004 §4.4.1.2). */
enum {
  RMM_OP_RESET = 0,          /* all leaves 0 */
  RMM_OP_SAMPLE = 1,         /* u64_in: n targets -> leaf_out: n leaves; memo kept */
  RMM_OP_UPDATE = 2,         /* pos_in: n positions, u64_in: n values */
  RMM_OP_UPDATE_SAMPLED = 3, /* u64_in: values of the last sample's first n items */
  RMM_OP_INSERT = 4,         /* leaves [first, first + n) = u64_in */
  RMM_OP_TOTAL = 5,          /* only info_out */
};

/* ------------------------------------------------------------------ */
/* Functions (C-simulation API; the kernel top below wraps them)        */
/* ------------------------------------------------------------------ */

/* All leaves 0, memo empty. */
void rmm_reset(rmm_tree_t *t);

/* leaves[i] = the leaf target[i] selects. RMM_EEMPTY if the total is 0,
 * RMM_ERANGE if a target >= total, RMM_ETOOBIG if n > RMM_MAX_BATCH; then
 * nothing is written. Records the paths in the memo. */
int rmm_sample(rmm_tree_t *t, uint32_t n, const uint64_t *targets, uint32_t *leaves,
               rmm_stats_t *st);

/* Set leaf pos[i] to values[i] in order (the later of two wins). Validates
 * the batch first: RMM_ERANGE / RMM_ETOOBIG change nothing. */
int rmm_update(rmm_tree_t *t, uint32_t n, const uint32_t *pos, const uint64_t *values,
               rmm_stats_t *st);

/* The memo path (papers/001 §IV-D4): set the leaf of the last sample's
 * item i to values[i], i < n <= items of that sample, without computing
 * any index. */
int rmm_update_sampled(rmm_tree_t *t, uint32_t n, const uint64_t *values, rmm_stats_t *st);

/* Leaves [first, first + n) = values (ring-order insert); any n. */
int rmm_insert(rmm_tree_t *t, uint32_t first, uint32_t n, const uint64_t *values,
               rmm_stats_t *st);

uint64_t rmm_total(const rmm_tree_t *t);
uint64_t rmm_leaf(const rmm_tree_t *t, uint32_t pos);

/* C-simulation check: every stored node equals the sum of its children,
 * replicas are equal, padding is 0, the total is the root's sum. 0 or -1
 * with a message. Not part of the hardware. */
int rmm_check(const rmm_tree_t *t, char *msg, size_t cap);

/* The kernel top (one request per call, state kept on chip between calls):
 * info_out[0] status, [1] total, [2] cycles of this request. */
#ifdef __cplusplus
extern "C" {
#endif
void rmm_kernel(uint32_t op, uint32_t n, uint32_t first, const uint64_t *u64_in,
                const uint32_t *pos_in, uint32_t *leaf_out, uint64_t *info_out);
#ifdef __cplusplus
}
#endif

#endif
