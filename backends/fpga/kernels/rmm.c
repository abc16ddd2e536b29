/* rmm.c - the FPGA replay management module as HLS C (see rmm.h for the
 * architecture, its sources and what has and has not been verified).
 *
 * Every loop that would be a hardware pipeline carries its pragma. In the
 * C build the pragmas are ignored (and -Wunknown-pragmas is silenced here),
 * and a DATAFLOW region runs its processes one after another over the
 * whole batch, which is also how Vitis C-simulation executes one; so the
 * stage loops below run level by level over all items, with the in-flight
 * items' state (residual target, path) in the tree's resid buffer and memo,
 * which stand for the FIFOs between stages. No global state: trees are
 * independent (the kernel top keeps one, rmm_state).
 */
#if !defined(__SYNTHESIS__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

#include "rmm.h"

#ifndef __SYNTHESIS__
#include <stdio.h>
#endif

#ifdef __cplusplus
#define RMM_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define RMM_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

RMM_STATIC_ASSERT(RMM_K >= 2 && RMM_K <= 64 && (RMM_K & (RMM_K - 1)) == 0,
                  "RMM_K must be a power of two in [2, 64]");
RMM_STATIC_ASSERT(RMM_CAPACITY >= 2 && RMM_CAPACITY <= (1 << 30), "RMM_CAPACITY outside [2, 2^30]");
RMM_STATIC_ASSERT(RMM_S >= 1 && RMM_S <= 4096 && (RMM_S & (RMM_S - 1)) == 0 && RMM_S <= RMM_CAPACITY,
                  "RMM_S must be a power of two in [1, min(4096, N)]");
RMM_STATIC_ASSERT(RMM_J <= RMM_H, "more replicated levels than levels");
RMM_STATIC_ASSERT(RMM_LEAF_BITS >= 1 && RMM_LEAF_BITS <= 63, "RMM_LEAF_BITS outside [1, 63]");
RMM_STATIC_ASSERT(RMM_MAX_LEAF >= 1 && RMM_MAX_LEAF <= UINT64_C(0x7fffffffffffffff),
                  "RMM_MAX_LEAF outside [1, 2^63 - 1]");
RMM_STATIC_ASSERT(RMM_MAX_LEAF < (UINT64_C(1) << RMM_LEAF_BITS), "leaves wider than RMM_LEAF_BITS");
RMM_STATIC_ASSERT(RMM_MAX_BATCH >= 1, "RMM_MAX_BATCH must be positive");
RMM_STATIC_ASSERT(RMM_MIN_TABLE >= 1 && RMM_MIN_TABLE <= RMM_CAPACITY,
                  "RMM_MIN_TABLE outside [1, RMM_CAPACITY]");
RMM_STATIC_ASSERT((RMM_PORT_REGS & RMM_PORT_BANKED) == 0,
                  "a level is both in RMM_PORT_REGS and RMM_PORT_BANKED");
RMM_STATIC_ASSERT(((RMM_PORT_REGS | RMM_PORT_BANKED) & ~RMM_J_MASK) == 0,
                  "RMM_PORT_REGS / RMM_PORT_BANKED name a level that is not replicated (1..J)");
RMM_STATIC_ASSERT((RMM_PORT_REGS | RMM_PORT_BANKED) == 0 ||
                      (RMM_PORT_REGS | RMM_PORT_BANKED) == RMM_J_MASK,
                  "RMM_PORT_REGS | RMM_PORT_BANKED must name every replicated level, or none");

/* ------------------------------------------------------------------ */
/* Level access                                                        */
/* ------------------------------------------------------------------ */

/* The value of entry i of level h in bank (or replica) b: its word, or on
 * a write-banked level the sum of its S sub-banks modulo 2^W_h (the
 * reading lane's S - 1 adders). In hardware every call site has a
 * constant h after the stage loops are unrolled per level, and the switch
 * selects that level's memory. */
static uint64_t rmm_get(const rmm_tree_t *t, uint32_t h, uint32_t b, uint64_t i) {
#pragma HLS INLINE
  switch (h) {
#define RMM_GET_CASE(hh)                                      \
  case hh: {                                                  \
    if (RMM_SUB(hh) == 1) return (uint64_t)t->l##hh[b][0][i]; \
    uint64_t v = 0;                                           \
    for (uint32_t sb = 0; sb < (uint32_t)RMM_SUB(hh); sb++) { \
      _Pragma("HLS UNROLL")                                   \
      v += (uint64_t)t->l##hh[b][sb][i];                      \
    }                                                         \
    return v & RMM_MASK(hh);                                  \
  }
    RMM_FOR_LEVELS(RMM_GET_CASE)
#undef RMM_GET_CASE
  default:
    return 0;
  }
}

/* Pipeline p's updater adds d to node i of level h: in its own bank on a
 * private level (b = p), in every replica on a replicated one (registers
 * or one port: each replica's word; write-banked: sub-bank p of every
 * replica gets replica p's sub-bank p plus d). Words wrap at W_h bits, as
 * the hardware words do. */
static void rmm_add(rmm_tree_t *t, uint32_t h, uint32_t p, uint64_t i, uint64_t d) {
#pragma HLS INLINE
  switch (h) {
#define RMM_ADD_CASE(hh)                                                          \
  case hh:                                                                        \
    if (!RMM_REPLICATED(hh)) {                                                    \
      t->l##hh[p][0][i] = (rmm_l##hh##_t)(((uint64_t)t->l##hh[p][0][i] + d) &     \
                                          RMM_MASK(hh));                          \
    } else if (RMM_IS_BANKED(hh)) {                                               \
      const uint32_t sb = RMM_SUB(hh) > 1 ? p : 0;                                \
      const rmm_l##hh##_t v =                                                     \
          (rmm_l##hh##_t)(((uint64_t)t->l##hh[p][sb][i] + d) & RMM_MASK(hh));     \
      for (uint32_t r = 0; r < RMM_S; r++) {                                      \
        _Pragma("HLS UNROLL")                                                     \
        t->l##hh[r][sb][i] = v;                                                   \
      }                                                                           \
    } else {                                                                      \
      for (uint32_t r = 0; r < RMM_S; r++) {                                      \
        _Pragma("HLS UNROLL")                                                     \
        t->l##hh[r][0][i] = (rmm_l##hh##_t)(((uint64_t)t->l##hh[r][0][i] + d) &   \
                                            RMM_MASK(hh));                        \
      }                                                                           \
    }                                                                             \
    return;
    RMM_FOR_LEVELS(RMM_ADD_CASE)
#undef RMM_ADD_CASE
  default:
    return;
  }
}

/* Level-J nodes a bank owns, times K^(h-J): the first node of bank q at a
 * private level h is q * rmm_span(h). */
static uint64_t rmm_span(uint32_t h) {
#pragma HLS INLINE
  return (uint64_t)RMM_C << ((h - RMM_J) * RMM_LOG2K);
}

/* Where node e of level h lives: replica 0 (replicated levels) or its
 * owner bank, and the index inside it. */
static void rmm_home(uint32_t h, uint64_t e, uint32_t *b, uint64_t *loc) {
#pragma HLS INLINE
  if (h <= RMM_J) {
    *b = 0;
    *loc = e;
  } else {
    uint32_t q = (uint32_t)((e >> ((h - RMM_J) * RMM_LOG2K)) / RMM_C);
    *b = q;
    *loc = e - q * rmm_span(h);
  }
}

/* The crossbar (and an update's dealer): items [0, n), whose pipelines
 * are t->owner[i], grouped by pipeline in batch order into t->order, with
 * t->first[q] and t->load[q]; returns the busiest pipeline's load. In
 * hardware, S FIFOs that each pipeline drains in arrival order. With one
 * pipeline there is no crossbar: it takes the batch in order (rmm_item). */
static uint32_t rmm_route(rmm_tree_t *t, uint32_t n) {
  if (RMM_S == 1) {
    t->first[0] = 0;
    t->load[0] = n;
    return n;
  }
  for (uint32_t q = 0; q < RMM_S; q++) t->load[q] = 0;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    t->load[t->owner[i]]++;
  }
  uint32_t at = 0, busiest = 0;
  for (uint32_t q = 0; q < RMM_S; q++) {
    t->first[q] = at;
    at += t->load[q];
    if (t->load[q] > busiest) busiest = t->load[q];
    t->load[q] = 0; /* refilled below, so each pipeline keeps batch order */
  }
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    const uint32_t q = t->owner[i];
    t->order[t->first[q] + t->load[q]++] = i;
  }
  return busiest;
}

/* The k-th item pipeline q takes after rmm_route. */
static uint32_t rmm_item(const rmm_tree_t *t, uint32_t q, uint32_t k) {
#pragma HLS INLINE
  return RMM_S == 1 ? k : t->order[t->first[q] + k];
}

/* ------------------------------------------------------------------ */
/* Reset, read                                                         */
/* ------------------------------------------------------------------ */

void rmm_reset(rmm_tree_t *t) {
  t->total = 0;
#define RMM_RESET_LEVEL(hh)                                    \
  for (uint32_t b = 0; b < RMM_S; b++)                         \
    for (uint32_t sb = 0; sb < (uint32_t)RMM_SUB(hh); sb++)    \
      for (uint64_t i = 0; i < (uint64_t)RMM_DEPTH(hh); i++) { \
        _Pragma("HLS PIPELINE II=1")                           \
        t->l##hh[b][sb][i] = 0;                                \
      }
  RMM_FOR_LEVELS(RMM_RESET_LEVEL)
#undef RMM_RESET_LEVEL
  t->memo_n = 0;
}

uint64_t rmm_total(const rmm_tree_t *t) { return (uint64_t)t->total; }

uint64_t rmm_leaf(const rmm_tree_t *t, uint32_t pos) {
  if (pos >= (uint32_t)RMM_CAPACITY) return 0;
  uint32_t b;
  uint64_t loc;
  rmm_home(RMM_H, pos, &b, &loc);
  return rmm_get(t, RMM_H, b, loc);
}

/* ------------------------------------------------------------------ */
/* Sample (papers/001 §IV-C4: one sampler stage per level)             */
/* ------------------------------------------------------------------ */

/* One round of the sampler stage of level h: lane q (every q < S at once)
 * descends item[q] if live[q], reading its own bank (or replica) q, whose
 * first child of the item's parent is at base[q]. A lane scans the K
 * children with a running sum (Algorithm 1, lines 9-13) for the first
 * whose inclusive prefix exceeds the residual target: one child per cycle
 * in every lane (the child loop is the pipeline, II = 1, the lanes are
 * unrolled inside it); the fixed-point add is single-cycle, so the running
 * sum carries no II penalty (papers/001 §IV-C4). 0, or -1 if a lane finds
 * no child (its residual is at least the node's sum: an inconsistent
 * tree). The arrays are the lanes' registers. */
static int rmm_stage_round(rmm_tree_t *t, uint32_t h, const uint32_t *item, const int *live,
                           const uint64_t *base) {
  uint64_t acc[RMM_S], r[RMM_S];
  uint32_t sel[RMM_S];
#pragma HLS ARRAY_PARTITION variable=acc complete
#pragma HLS ARRAY_PARTITION variable=r complete
#pragma HLS ARRAY_PARTITION variable=sel complete
  for (uint32_t q = 0; q < RMM_S; q++) {
#pragma HLS UNROLL
    acc[q] = 0;
    sel[q] = RMM_K;
    r[q] = live[q] ? t->resid[item[q]] : 0;
    if (!live[q]) sel[q] = 0; /* closed: an idle lane selects nothing */
  }
  for (uint32_t c = 0; c < RMM_K; c++) {
#pragma HLS PIPELINE II=1
    for (uint32_t q = 0; q < RMM_S; q++) {
#pragma HLS UNROLL
      /* An idle lane reads child c of entry 0 (every bank holds K words)
       * and never selects: its r and acc are 0. */
      const uint64_t v = rmm_get(t, h, q, base[q] + c);
      const int open = sel[q] == RMM_K, take = open && acc[q] + v > r[q];
      sel[q] = take ? c : sel[q];
      acc[q] += open && !take ? v : 0;
    }
  }
  for (uint32_t q = 0; q < RMM_S; q++) {
#pragma HLS UNROLL
    if (!live[q]) continue;
    if (sel[q] == RMM_K) return -1;
    const uint32_t i = item[q];
    t->resid[i] = r[q] - acc[q];
    t->memo[h][i] = (uint32_t)((uint64_t)t->memo[h - 1][i] * RMM_K + sel[q]);
  }
  return 0;
}

int rmm_sample(rmm_tree_t *t, uint32_t n, const uint64_t *targets, uint32_t *leaves,
               rmm_stats_t *st) {
  const uint64_t total = (uint64_t)t->total;
  if (n > RMM_MAX_BATCH) return RMM_ETOOBIG;
  if (total == 0) return RMM_EEMPTY;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (targets[i] >= total) return RMM_ERANGE;
  }

  /* The memo is rewritten below: until the collector, it holds no sample
   * (a descent that finds the tree corrupt leaves none). */
  t->memo_n = 0;
  /* Dealer: item i enters lane i mod S at the root with its target. */
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    t->resid[i] = targets[i];
    t->memo[0][i] = 0;
  }

  /* Replicated levels, one stage each (a DATAFLOW process in hardware):
   * the S lanes in lockstep, lane q on items q, q + S, ... in its copy. */
  const uint32_t lane_rounds = (n + RMM_S - 1) / RMM_S;
  uint32_t item[RMM_S];
  int live[RMM_S];
  uint64_t base[RMM_S];
#pragma HLS ARRAY_PARTITION variable=item complete
#pragma HLS ARRAY_PARTITION variable=live complete
#pragma HLS ARRAY_PARTITION variable=base complete
  for (uint32_t h = 1; h <= (uint32_t)RMM_J; h++) {
#pragma HLS UNROLL
    for (uint32_t k = 0; k < lane_rounds; k++) {
      for (uint32_t q = 0; q < RMM_S; q++) {
#pragma HLS UNROLL
        item[q] = k * RMM_S + q;
        live[q] = item[q] < n;
        base[q] = live[q] ? (uint64_t)t->memo[h - 1][item[q]] * RMM_K : 0;
      }
      if (rmm_stage_round(t, h, item, live, base) != 0) return RMM_ECORRUPT;
    }
  }

  /* Crossbar: each item to the bank that owns its level-J node; the
   * private stages, the S banks in lockstep, each on its own items. */
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    t->owner[i] = (uint32_t)(t->memo[RMM_J][i] / RMM_C);
  }
  const uint32_t bank_rounds = rmm_route(t, n);
  for (uint32_t h = RMM_J + 1; h <= (uint32_t)RMM_H; h++) {
#pragma HLS UNROLL
    for (uint32_t k = 0; k < bank_rounds; k++) {
      for (uint32_t q = 0; q < RMM_S; q++) {
#pragma HLS UNROLL
        live[q] = k < t->load[q];
        item[q] = live[q] ? rmm_item(t, q, k) : 0;
        base[q] = live[q] ? (uint64_t)t->memo[h - 1][item[q]] * RMM_K - q * rmm_span(h) : 0;
      }
      if (rmm_stage_round(t, h, item, live, base) != 0) return RMM_ECORRUPT;
    }
  }

  /* Collector: leaves in batch order; the memo now holds every path. */
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    leaves[i] = t->memo[RMM_H][i];
  }
  t->memo_n = n;

  if (st) {
    /* The slowest stage sets the rate: lanes above J, banks below it. */
    const uint32_t max_lane = RMM_J > 0 ? lane_rounds : 0;
    const uint32_t max_bank = RMM_J < RMM_H ? bank_rounds : 0;
    const uint32_t busiest = max_lane > max_bank ? max_lane : max_bank;
    st->max_lane = max_lane;
    st->max_bank = max_bank;
    st->cycles = n ? (uint64_t)busiest * RMM_SAMPLE_ITEM_II + RMM_SAMPLE_FILL : 0;
  }
  return RMM_OK;
}

/* ------------------------------------------------------------------ */
/* Update (papers/001 §IV-D4: one updater stage per level, memo)         */
/* ------------------------------------------------------------------ */

/* Where an update batch's paths come from. */
enum { RMM_PATH_POS, RMM_PATH_MEMO, RMM_PATH_RANGE };

/* The node of level h on item i's path (h = H: its leaf): from the memo
 * (papers/001 §IV-D4: the sampler stages wrote item i's node at every
 * level, no index is recomputed), or from its position by a shift,
 * p >> ((H - h) log2 K). */
static uint64_t rmm_node(const rmm_tree_t *t, int src, const uint32_t *pos, uint32_t first,
                         uint32_t i, uint32_t h) {
#pragma HLS INLINE
  if (src == RMM_PATH_MEMO) return t->memo[h][i];
  const uint64_t p = src == RMM_PATH_POS ? pos[i] : (uint64_t)first + i;
  return p >> ((RMM_H - h) * RMM_LOG2K);
}

/* Item i's whole path e[0..H] (e[0] = 0, e[H] the leaf). */
static void rmm_path(const rmm_tree_t *t, int src, const uint32_t *pos, uint32_t first,
                     uint32_t i, uint64_t *e) {
#pragma HLS INLINE
  for (uint32_t h = 0; h <= (uint32_t)RMM_H; h++) {
#pragma HLS UNROLL
    e[h] = rmm_node(t, src, pos, first, i, h);
  }
}

/* Pipeline p applies one item whose path is e: the leaf stage reads the
 * old value from p's bank (or replica) and sends new - old up; every
 * stage above adds it (rmm_add: p's bank, or every replica). */
static void rmm_apply(rmm_tree_t *t, uint32_t p, const uint64_t *e, uint64_t v) {
#pragma HLS INLINE
  const uint64_t off = RMM_J < RMM_H ? (uint64_t)p * rmm_span(RMM_H) : 0;
  const uint64_t old = rmm_get(t, RMM_H, p, e[RMM_H] - off);
  /* The delta modulo 2^64; each level keeps it modulo 2^W_h, which is
   * exact because every true node value fits its W_h bits. */
  const uint64_t d = v - old;
  for (uint32_t h = RMM_H; h >= 1; h--) {
#pragma HLS UNROLL
    rmm_add(t, h, p, h > RMM_J ? e[h] - (uint64_t)p * rmm_span(h) : e[h], d);
  }
  t->total = (rmm_root_t)(((uint64_t)t->total + d) & RMM_MASK(0));
}

#ifndef __SYNTHESIS__
/* C-simulation speed only, no hardware meaning: touch the leaf word an
 * item some rounds ahead will read, so that the CPU overlaps the cache
 * misses of a batch's random leaves (through the dealer's indirection it
 * otherwise waits for each in turn: 2x slower at 2^20 leaves). */
static void rmm_prefetch_leaf(const rmm_tree_t *t, uint32_t p, uint64_t leaf) {
  const uint64_t loc = leaf - (RMM_J < RMM_H ? (uint64_t)p * rmm_span(RMM_H) : 0);
  switch (RMM_H) {
#define RMM_PREFETCH_CASE(hh)                  \
  case hh:                                     \
    __builtin_prefetch(&t->l##hh[p][0][loc], 1); \
    return;
    RMM_FOR_LEVELS(RMM_PREFETCH_CASE)
#undef RMM_PREFETCH_CASE
  default:
    return;
  }
}
#define RMM_PREFETCH_AHEAD 8
#endif

/* Apply a validated batch: the dealer sends item i to the pipeline that
 * owns its level-J node (rmm.h, PIPELINES), then the S pipelines run in
 * lockstep, one item each per cycle. */
static void rmm_apply_batch(rmm_tree_t *t, uint32_t n, int src, const uint32_t *pos,
                            uint32_t first, const uint64_t *values, rmm_stats_t *st) {
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    t->owner[i] = (uint32_t)(rmm_node(t, src, pos, first, i, RMM_J) / RMM_C);
  }
  const uint32_t rounds = rmm_route(t, n);
  for (uint32_t k = 0; k < rounds; k++) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=t inter false
    for (uint32_t p = 0; p < RMM_S; p++) {
#pragma HLS UNROLL
      if (k >= t->load[p]) continue;
      const uint32_t i = rmm_item(t, p, k);
      uint64_t e[RMM_H + 1];
#ifndef __SYNTHESIS__
      if (k + RMM_PREFETCH_AHEAD < t->load[p])
        rmm_prefetch_leaf(t, p, rmm_node(t, src, pos, first,
                                         rmm_item(t, p, k + RMM_PREFETCH_AHEAD), RMM_H));
#endif
      rmm_path(t, src, pos, first, i, e);
      rmm_apply(t, p, e, values[i]);
    }
  }
  if (st) {
    /* One port per replica: the replicated levels take the batch's deltas
     * one per cycle (UPDATE PORTS), whatever the pipelines' loads. */
    st->max_lane = 0;
    st->max_bank = rounds;
    const uint64_t busiest = RMM_SERIAL ? n : rounds;
    st->cycles = n ? busiest * RMM_UPDATE_ITEM_II + RMM_UPDATE_FILL : 0;
  }
}

int rmm_update(rmm_tree_t *t, uint32_t n, const uint32_t *pos, const uint64_t *values,
               rmm_stats_t *st) {
  if (n > RMM_MAX_BATCH) return RMM_ETOOBIG;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (pos[i] >= (uint32_t)RMM_CAPACITY || values[i] > RMM_MAX_LEAF) return RMM_ERANGE;
  }
  rmm_apply_batch(t, n, RMM_PATH_POS, pos, 0, values, st);
  return RMM_OK;
}

int rmm_update_sampled(rmm_tree_t *t, uint32_t n, const uint64_t *values, rmm_stats_t *st) {
  if (n > t->memo_n) return RMM_ETOOBIG;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (values[i] > RMM_MAX_LEAF) return RMM_ERANGE;
  }
  rmm_apply_batch(t, n, RMM_PATH_MEMO, NULL, 0, values, st);
  return RMM_OK;
}

int rmm_insert(rmm_tree_t *t, uint32_t first, uint32_t n, const uint64_t *values,
               rmm_stats_t *st) {
  if ((uint64_t)first + n > (uint64_t)RMM_CAPACITY) return RMM_ERANGE;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (values[i] > RMM_MAX_LEAF) return RMM_ERANGE;
  }
  /* Any n: the dealer's buffers hold RMM_MAX_BATCH items, so a longer
   * insert goes through in parts (each a batch, its own fill). */
  uint64_t cycles = 0;
  uint32_t busiest = 0;
  for (uint32_t done = 0; done < n;) {
    const uint32_t m = n - done < (uint32_t)RMM_MAX_BATCH ? n - done : (uint32_t)RMM_MAX_BATCH;
    rmm_stats_t part = {0, 0, 0};
    rmm_apply_batch(t, m, RMM_PATH_RANGE, NULL, first + done, values + done, &part);
    cycles += part.cycles;
    if (part.max_bank > busiest) busiest = part.max_bank;
    done += m;
  }
  if (st) {
    st->cycles = cycles;
    st->max_lane = 0;
    st->max_bank = busiest;
  }
  return RMM_OK;
}

/* ------------------------------------------------------------------ */
/* Consistency check (C-simulation only)                               */
/* ------------------------------------------------------------------ */

#ifndef __SYNTHESIS__
#define RMM_FAIL(...) (snprintf(msg, cap, __VA_ARGS__), -1)

/* One stored word: sub-bank sb of bank (or replica) b of level h. */
static uint64_t rmm_raw(const rmm_tree_t *t, uint32_t h, uint32_t b, uint32_t sb, uint64_t i) {
  switch (h) {
#define RMM_RAW_CASE(hh) \
  case hh:               \
    return (uint64_t)t->l##hh[b][sb < (uint32_t)RMM_SUB(hh) ? sb : 0][i];
    RMM_FOR_LEVELS(RMM_RAW_CASE)
#undef RMM_RAW_CASE
  default:
    return 0;
  }
}

int rmm_check(const rmm_tree_t *t, char *msg, size_t cap) {
  if (cap) msg[0] = '\0';
  for (uint32_t h = 1; h <= (uint32_t)RMM_H; h++) {
    uint64_t d = 0;  /* bank depth of level h */
    uint32_t nsub = 1; /* sub-banks per replica */
    switch (h) {
#define RMM_DEPTH_CASE(hh)   \
  case hh:                   \
    d = RMM_DEPTH(hh);       \
    nsub = RMM_SUB(hh);      \
    break;
      RMM_FOR_LEVELS(RMM_DEPTH_CASE)
#undef RMM_DEPTH_CASE
    default:
      break;
    }
    const uint64_t nodes_h = (((uint64_t)RMM_CAPACITY - 1) >> ((RMM_H - h) * RMM_LOG2K)) + 1;
    for (uint32_t b = 0; b < RMM_S; b++) {
      for (uint64_t i = 0; i < d; i++) {
        const uint64_t v = rmm_get(t, h, b, i);
        if (h <= RMM_J) {
          /* Replicas equal, sub-bank by sub-bank; entries past the
           * level's nodes are padding, zero in every sub-bank. */
          for (uint32_t sb = 0; sb < nsub; sb++) {
            const uint64_t w = rmm_raw(t, h, b, sb, i);
            if (w != rmm_raw(t, h, 0, sb, i))
              return RMM_FAIL("level %u replica %u sub-bank %u entry %llu differs from "
                              "replica 0", h, b, sb, (unsigned long long)i);
            if (i >= nodes_h && w != 0)
              return RMM_FAIL("level %u padding entry %llu (sub-bank %u) is %llu", h,
                              (unsigned long long)i, sb, (unsigned long long)w);
          }
        } else {
          const uint64_t e = b * rmm_span(h) + i;
          if (e >= nodes_h && v != 0)
            return RMM_FAIL("level %u bank %u padding entry %llu is %llu", h, b,
                            (unsigned long long)i, (unsigned long long)v);
        }
        for (uint32_t sb = 0; sb < nsub; sb++)
          if (rmm_raw(t, h, b, sb, i) >
              (RMM_W(h) >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << RMM_W(h)) - 1))
            return RMM_FAIL("level %u entry %llu wider than %u bits", h, (unsigned long long)i,
                            (unsigned)RMM_W(h));
      }
    }
    /* Every node of level h - 1 is the sum of its K children. */
    const uint64_t parents = (((uint64_t)RMM_CAPACITY - 1) >> ((RMM_H - h + 1) * RMM_LOG2K)) + 1;
    for (uint64_t p = 0; p < parents; p++) {
      uint64_t sum = 0;
      for (uint32_t c = 0; c < RMM_K; c++) {
        uint32_t b;
        uint64_t loc;
        rmm_home(h, p * RMM_K + c, &b, &loc);
        sum += rmm_get(t, h, b, loc);
      }
      uint64_t pv;
      if (h == 1) {
        pv = (uint64_t)t->total;
      } else {
        uint32_t b;
        uint64_t loc;
        rmm_home(h - 1, p, &b, &loc);
        pv = rmm_get(t, h - 1, b, loc);
      }
      if (sum != pv)
        return RMM_FAIL("level %u node %llu is %llu, its children sum to %llu", h - 1,
                        (unsigned long long)p, (unsigned long long)pv, (unsigned long long)sum);
    }
  }
  return 0;
}
#endif

/* ------------------------------------------------------------------ */
/* Kernel top                                                          */
/* ------------------------------------------------------------------ */

#ifndef RMM_NO_KERNEL_TOP

#define RMM_STR(x) #x
#define RMM_PRAGMA(x) _Pragma(RMM_STR(x))
/* One memory per level and bank (papers/001 §IV-C4: "nodes on different
 * tree levels are stored in separate SRAM banks"): dimension 1, the banks
 * or replicas; a write-banked level also dimension 2, its sub-banks; a
 * level in registers every dimension (rmm.h, UPDATE PORTS; rmm_levels.h
 * RMM_PKIND_h says which). */
#define RMM_PART_BANKS(hh) \
  RMM_PRAGMA(HLS ARRAY_PARTITION variable=rmm_state.l##hh dim=1 complete)
#define RMM_PART_SUBBANKS(hh)                                               \
  RMM_PRAGMA(HLS ARRAY_PARTITION variable=rmm_state.l##hh dim=1 complete)   \
  RMM_PRAGMA(HLS ARRAY_PARTITION variable=rmm_state.l##hh dim=2 complete)
#define RMM_PART_REGS(hh) \
  RMM_PRAGMA(HLS ARRAY_PARTITION variable=rmm_state.l##hh dim=0 complete)
#define RMM_PART_CAT(kind, hh) RMM_PART_##kind(hh)
#define RMM_PART_XCAT(kind, hh) RMM_PART_CAT(kind, hh)
#define RMM_PARTITION(hh) RMM_PART_XCAT(RMM_PKIND_##hh, hh)

static rmm_tree_t rmm_state;

void rmm_kernel(uint32_t op, uint32_t n, uint32_t first, const uint64_t *u64_in,
                const uint32_t *pos_in, uint32_t *leaf_out, uint64_t *info_out) {
#pragma HLS INTERFACE m_axi port = u64_in offset = slave bundle = gmem0
#pragma HLS INTERFACE m_axi port = pos_in offset = slave bundle = gmem1
#pragma HLS INTERFACE m_axi port = leaf_out offset = slave bundle = gmem1
#pragma HLS INTERFACE m_axi port = info_out offset = slave bundle = gmem0
#pragma HLS INTERFACE s_axilite port = op
#pragma HLS INTERFACE s_axilite port = n
#pragma HLS INTERFACE s_axilite port = first
#pragma HLS INTERFACE s_axilite port = return
  RMM_FOR_LEVELS(RMM_PARTITION)
#pragma HLS ARRAY_PARTITION variable = rmm_state.memo dim = 1 complete
  rmm_stats_t st = {0, 0, 0};
  int rc;
  switch (op) {
  case RMM_OP_RESET:
    rmm_reset(&rmm_state);
    rc = RMM_OK;
    break;
  case RMM_OP_SAMPLE:
    rc = rmm_sample(&rmm_state, n, u64_in, leaf_out, &st);
    break;
  case RMM_OP_UPDATE:
    rc = rmm_update(&rmm_state, n, pos_in, u64_in, &st);
    break;
  case RMM_OP_UPDATE_SAMPLED:
    rc = rmm_update_sampled(&rmm_state, n, u64_in, &st);
    break;
  case RMM_OP_INSERT:
    rc = rmm_insert(&rmm_state, first, n, u64_in, &st);
    break;
  case RMM_OP_TOTAL:
    rc = RMM_OK;
    break;
  default:
    rc = RMM_EBADOP;
    break;
  }
  info_out[0] = (uint64_t)rc;
  info_out[1] = rmm_total(&rmm_state);
  info_out[2] = st.cycles;
}
#endif /* RMM_NO_KERNEL_TOP */
