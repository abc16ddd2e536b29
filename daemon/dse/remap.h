/* remap.h - papers/001 §VI-B Algorithm 3 over the set of live workloads,
 * with devices shared among them and hysteresis (issue 24, item 4: the
 * decision; nothing here moves a workload).
 *
 * Each workload's primitive-platform table (mapper.h) is its figures
 * alone on each device. Sharing: when workloads put primitives on one
 * device, each gets the device's time in proportion to its weight (the
 * tenant's, share.h), so workload w's times on device d are its own
 * divided by its share there, weight_w / (the weights of every workload
 * with a primitive on d, w's included; a workload's learner and RMM on
 * one device count once).
 *
 * The set's mapping is found by best response in the given order
 * (registration order): each workload in turn runs Algorithm 3 (rd_map)
 * on its table scaled by the shares it would get beside the others' current
 * choices, until a round changes nothing or 4 n rounds have run (a best
 * response need not converge; the last round's choices are kept). The
 * value of a set's mapping is its total predicted gradient steps per
 * second under that sharing. A new workload (placed = 0) is "registered
 * alone": the baseline puts it where its best response to the others'
 * current mappings is, moving nobody.
 *
 * Hysteresis: the proposal replaces the current mappings only if its
 * total exceeds the baseline's by more than `threshold` (relative, e.g.
 * 0.10); otherwise every placed workload keeps its mapping and only new
 * ones take their baseline choice. So a set that comes back to a state it
 * was in gets the same mappings, and gains within the threshold (profiles
 * repeat to a few percent) never move anything: no oscillation.
 *
 * Pure: no I/O, no allocation beyond n items of the caller's, no global
 * state.
 */
#ifndef RD_REMAP_H
#define RD_REMAP_H

#include <stddef.h>
#include <stdint.h>

#include "mapper.h"
#include "rd_error.h"

#define RD_REMAP_MAX 256 /* workloads in one call */

typedef struct {
  rd_ptable_t table;     /* alone (mapper.h), validated by rd_map */
  uint32_t weight;       /* >= 1 */
  int placed;            /* 1: learner and rmm below are its current mapping */
  rd_devkind_t learner, rmm;
} rd_remap_item_t;

typedef struct {
  rd_devkind_t learner, rmm, storage; /* the decision */
  double gps;                         /* its predicted GPS under the decision's sharing */
  double gps_before;                  /* under the baseline's (placed: its current mapping) */
  int moved;                          /* placed, and learner or rmm differs */
} rd_remap_result_t;

typedef struct {
  double total_before, total_proposed; /* the baseline's and the proposal's total GPS */
  int adopted;                         /* the proposal won by more than the threshold */
  uint32_t rounds;                     /* best-response rounds run */
  uint32_t moves;                      /* placed workloads that move */
} rd_remap_summary_t;

/* Decide (above). out[i] for items[i]. RD_EINVAL for n > RD_REMAP_MAX, a
 * weight 0, a placed item whose devices cannot run its primitives, a
 * threshold that is negative or not finite, or a table rd_map refuses
 * (naming the item). */
int rd_remap(const rd_remap_item_t *items, size_t n, double threshold, rd_remap_result_t *out,
             rd_remap_summary_t *sum, rd_error_t *err);

#endif
