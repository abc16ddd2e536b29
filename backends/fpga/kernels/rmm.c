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

/* ------------------------------------------------------------------ */
/* Level access                                                        */
/* ------------------------------------------------------------------ */

/* Read entry i of bank (or replica) b of level h. In hardware every call
 * site has a constant h after the stage loops are unrolled per level, and
 * the switch selects that level's memory. */
static uint64_t rmm_get(const rmm_tree_t *t, uint32_t h, uint32_t b, uint64_t i) {
#pragma HLS INLINE
  switch (h) {
#define RMM_GET_CASE(hh) \
  case hh:               \
    return (uint64_t)t->l##hh[b][i];
    RMM_FOR_LEVELS(RMM_GET_CASE)
#undef RMM_GET_CASE
  default:
    return 0;
  }
}

/* Write v into a W_h-bit word: the C build masks exactly as the hardware
 * word truncates. */
static void rmm_put(rmm_tree_t *t, uint32_t h, uint32_t b, uint64_t i, uint64_t v) {
#pragma HLS INLINE
  switch (h) {
#define RMM_PUT_CASE(hh)                                     \
  case hh:                                                   \
    t->l##hh[b][i] = (rmm_l##hh##_t)(v & RMM_MASK(hh));      \
    return;
    RMM_FOR_LEVELS(RMM_PUT_CASE)
#undef RMM_PUT_CASE
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

/* ------------------------------------------------------------------ */
/* Reset, read                                                         */
/* ------------------------------------------------------------------ */

void rmm_reset(rmm_tree_t *t) {
  t->total = 0;
#define RMM_RESET_LEVEL(hh)                                  \
  for (uint32_t b = 0; b < RMM_S; b++)                       \
    for (uint64_t i = 0; i < (uint64_t)RMM_DEPTH(hh); i++) { \
      _Pragma("HLS PIPELINE II=1")                           \
      t->l##hh[b][i] = 0;                                    \
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

  /* One stage per level (a DATAFLOW process each in hardware). Replicated
   * levels: lane i mod S reads its own copy. Private levels: after level J
   * the crossbar has routed the item to bank memo[J][i] / C. */
  for (uint32_t h = 1; h <= (uint32_t)RMM_H; h++) {
#pragma HLS UNROLL
    for (uint32_t i = 0; i < n; i++) {
      const uint64_t parent = t->memo[h - 1][i];
      uint32_t b;
      uint64_t base;
      if (h <= RMM_J) {
        b = i % RMM_S;
        base = parent * RMM_K;
      } else {
        b = (uint32_t)(t->memo[RMM_J][i] / RMM_C);
        base = parent * RMM_K - b * rmm_span(h);
      }
      /* Scan the K children with a running sum (Algorithm 1, lines 9-13):
       * the first child whose inclusive prefix exceeds the target. One
       * child per cycle; the fixed-point add is single-cycle, so the
       * running sum carries no II penalty (papers/001 §IV-C4). */
      const uint64_t r = t->resid[i];
      uint64_t acc = 0;
      uint32_t sel = RMM_K;
      for (uint32_t c = 0; c < RMM_K; c++) {
#pragma HLS PIPELINE II=1
        const uint64_t v = rmm_get(t, h, b, base + c);
        if (sel == RMM_K) {
          if (acc + v > r)
            sel = c;
          else
            acc += v;
        }
      }
      if (sel == RMM_K) return RMM_ECORRUPT; /* r >= the node's sum: inconsistent tree */
      t->resid[i] = r - acc;
      t->memo[h][i] = (uint32_t)(parent * RMM_K + sel);
    }
  }

  /* Collector: leaves in batch order; the memo now holds every path. */
  uint32_t bank_load[RMM_S];
  for (uint32_t q = 0; q < RMM_S; q++) bank_load[q] = 0;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    leaves[i] = t->memo[RMM_H][i];
    bank_load[t->memo[RMM_J][i] / RMM_C]++;
  }
  t->memo_n = n;

  if (st) {
    uint32_t max_bank = 0;
    for (uint32_t q = 0; q < RMM_S; q++)
      if (bank_load[q] > max_bank) max_bank = bank_load[q];
    const uint32_t max_lane = (n + RMM_S - 1) / RMM_S;
    /* The slowest stage sets the rate: lanes above J, banks below it. */
    uint32_t busiest = 0;
    if (RMM_J > 0 && max_lane > busiest) busiest = max_lane;
    if (RMM_J < RMM_H && max_bank > busiest) busiest = max_bank;
    st->max_lane = RMM_J > 0 ? max_lane : 0;
    st->max_bank = RMM_J < RMM_H ? max_bank : 0;
    st->cycles = n ? (uint64_t)busiest * RMM_SAMPLE_ITEM_II + RMM_SAMPLE_FILL : 0;
  }
  return RMM_OK;
}

/* ------------------------------------------------------------------ */
/* Update (papers/001 §IV-D4: one updater stage per level, memo)         */
/* ------------------------------------------------------------------ */

/* Apply one item whose path is e[0..H] (e[0] = 0, e[H] the leaf). */
static void rmm_apply(rmm_tree_t *t, const uint64_t *e, uint64_t v) {
#pragma HLS INLINE
  const uint32_t q = RMM_J < RMM_H ? (uint32_t)(e[RMM_J] / RMM_C) : 0;
  uint64_t old;
  /* Leaf stage: read the old value, write the new one, emit the delta. */
  if (RMM_H > RMM_J) {
    const uint64_t loc = e[RMM_H] - q * rmm_span(RMM_H);
    old = rmm_get(t, RMM_H, q, loc);
    rmm_put(t, RMM_H, q, loc, v);
  } else {
    old = rmm_get(t, RMM_H, 0, e[RMM_H]);
    for (uint32_t r = 0; r < RMM_S; r++) {
#pragma HLS UNROLL
      rmm_put(t, RMM_H, r, e[RMM_H], v);
    }
  }
  /* The delta modulo 2^64; each level keeps it modulo 2^W_h, which is
   * exact because every true node value fits its W_h bits. */
  const uint64_t d = v - old;
  /* Updater stages, leaf's parent to level 1. Private levels: the owner
   * bank. Replicated levels: every copy (broadcast, papers/001 §IV-C4). */
  for (uint32_t h = RMM_H - 1; h >= 1; h--) {
#pragma HLS UNROLL
    if (h > RMM_J) {
      const uint64_t loc = e[h] - q * rmm_span(h);
      rmm_put(t, h, q, loc, rmm_get(t, h, q, loc) + d);
    } else {
      for (uint32_t r = 0; r < RMM_S; r++) {
#pragma HLS UNROLL
        rmm_put(t, h, r, e[h], rmm_get(t, h, r, e[h]) + d);
      }
    }
  }
  t->total = (rmm_root_t)(((uint64_t)t->total + d) & RMM_MASK(0));
}

/* Pipeline loads and cycles of an update batch. */
static void rmm_update_stats(const uint32_t *bank_load, uint32_t n, rmm_stats_t *st) {
  if (!st) return;
  uint32_t max_bank = 0;
  for (uint32_t q = 0; q < RMM_S; q++)
    if (bank_load[q] > max_bank) max_bank = bank_load[q];
  /* All levels replicated (J = H): items are dealt round-robin. */
  const uint32_t max_lane = (n + RMM_S - 1) / RMM_S;
  const uint32_t busiest = RMM_J < RMM_H ? max_bank : max_lane;
  st->max_lane = RMM_J > 0 ? max_lane : 0;
  st->max_bank = RMM_J < RMM_H ? max_bank : 0;
  st->cycles = n ? (uint64_t)busiest * RMM_UPDATE_ITEM_II + RMM_UPDATE_FILL : 0;
}

/* Path of leaf p by shifts (no memo): e[h] = p >> ((H - h) log2 K). */
static void rmm_path_of(uint64_t p, uint64_t *e) {
#pragma HLS INLINE
  for (uint32_t h = 0; h <= (uint32_t)RMM_H; h++) {
#pragma HLS UNROLL
    e[h] = p >> ((RMM_H - h) * RMM_LOG2K);
  }
}

int rmm_update(rmm_tree_t *t, uint32_t n, const uint32_t *pos, const uint64_t *values,
               rmm_stats_t *st) {
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (pos[i] >= (uint32_t)RMM_CAPACITY || values[i] > RMM_MAX_LEAF) return RMM_ERANGE;
  }
  uint32_t bank_load[RMM_S];
  for (uint32_t q = 0; q < RMM_S; q++) bank_load[q] = 0;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=t inter false
    uint64_t e[RMM_H + 1];
    rmm_path_of(pos[i], e);
    bank_load[RMM_J < RMM_H ? e[RMM_J] / RMM_C : 0]++;
    rmm_apply(t, e, values[i]);
  }
  rmm_update_stats(bank_load, n, st);
  return RMM_OK;
}

int rmm_update_sampled(rmm_tree_t *t, uint32_t n, const uint64_t *values, rmm_stats_t *st) {
  if (n > t->memo_n) return RMM_ETOOBIG;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (values[i] > RMM_MAX_LEAF) return RMM_ERANGE;
  }
  uint32_t bank_load[RMM_S];
  for (uint32_t q = 0; q < RMM_S; q++) bank_load[q] = 0;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=t inter false
    /* The memo (papers/001 §IV-D4): the sampler stages wrote item i's
     * node at every level; no index is recomputed. */
    uint64_t e[RMM_H + 1];
    for (uint32_t h = 0; h <= (uint32_t)RMM_H; h++) {
#pragma HLS UNROLL
      e[h] = t->memo[h][i];
    }
    bank_load[RMM_J < RMM_H ? e[RMM_J] / RMM_C : 0]++;
    rmm_apply(t, e, values[i]);
  }
  rmm_update_stats(bank_load, n, st);
  return RMM_OK;
}

int rmm_insert(rmm_tree_t *t, uint32_t first, uint32_t n, const uint64_t *values,
               rmm_stats_t *st) {
  if ((uint64_t)first + n > (uint64_t)RMM_CAPACITY) return RMM_ERANGE;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
    if (values[i] > RMM_MAX_LEAF) return RMM_ERANGE;
  }
  uint32_t bank_load[RMM_S];
  for (uint32_t q = 0; q < RMM_S; q++) bank_load[q] = 0;
  for (uint32_t i = 0; i < n; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS DEPENDENCE variable=t inter false
    uint64_t e[RMM_H + 1];
    rmm_path_of((uint64_t)first + i, e);
    bank_load[RMM_J < RMM_H ? e[RMM_J] / RMM_C : 0]++;
    rmm_apply(t, e, values[i]);
  }
  rmm_update_stats(bank_load, n, st);
  return RMM_OK;
}

/* ------------------------------------------------------------------ */
/* Consistency check (C-simulation only)                               */
/* ------------------------------------------------------------------ */

#ifndef __SYNTHESIS__
#define RMM_FAIL(...) (snprintf(msg, cap, __VA_ARGS__), -1)

int rmm_check(const rmm_tree_t *t, char *msg, size_t cap) {
  if (cap) msg[0] = '\0';
  for (uint32_t h = 1; h <= (uint32_t)RMM_H; h++) {
    uint64_t d = 0; /* bank depth of level h */
    switch (h) {
#define RMM_DEPTH_CASE(hh) \
  case hh:                 \
    d = RMM_DEPTH(hh);     \
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
          /* Replicas equal; entries past the level's nodes are padding. */
          if (v != rmm_get(t, h, 0, i))
            return RMM_FAIL("level %u replica %u entry %llu differs from replica 0", h, b,
                            (unsigned long long)i);
          if (i >= nodes_h && v != 0)
            return RMM_FAIL("level %u padding entry %llu is %llu", h, (unsigned long long)i,
                            (unsigned long long)v);
        } else {
          const uint64_t e = b * rmm_span(h) + i;
          if (e >= nodes_h && v != 0)
            return RMM_FAIL("level %u bank %u padding entry %llu is %llu", h, b,
                            (unsigned long long)i, (unsigned long long)v);
        }
        if (v > (RMM_W(h) >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << RMM_W(h)) - 1))
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
 * tree levels are stored in separate SRAM banks"). */
#define RMM_PARTITION(hh) RMM_PRAGMA(HLS ARRAY_PARTITION variable=rmm_state.l##hh dim=1 complete)

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
