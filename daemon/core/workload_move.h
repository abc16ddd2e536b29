/* workload_move.h - move a placed workload to another mapping, live
 * (issue 24 item 4), and the history of where it ran.
 *
 * A move has two parts, each exact or not done:
 *  - the table (replay module and storage): under the workload's lock, a
 *    snapshot of every row, leaf, key counter, draw counter and stat
 *    (table.h rd_table_snapshot_*) is restored into a new table on the
 *    new modules (rd_table_restore), which then replaces the old one in
 *    place. Calls wait on the lock meanwhile (a bound: one copy of the
 *    table) and then run on the new table; none fails because of the move.
 *    Sampling continues the same Philox stream, so the samples after a
 *    move are those the table would have drawn without it.
 *  - the learner: rd_pipeline_move_learner (the whole training state moves
 *    through the backends' state ops, between two steps).
 * The placement then says what runs (its mapping, running code, note),
 * and the history gets one event.
 */
#ifndef RD_WORKLOAD_MOVE_H
#define RD_WORKLOAD_MOVE_H

#include <stdint.h>

#include "placement.h"
#include "rd_error.h"
#include "table.h"
#include "place_history.h"
#include "workload.h"

/* Move the table t onto rmm and storage (NULL: the CPU tree, host
 * columns), exactly (above). Caller holds the table's lock. RD_OK with
 * nothing done if it is there already; RD_EBUSY while a checkpoint's
 * snapshot runs (try again later); RD_ENOMEM, or the new module's create
 * error (RD_EINVAL): nothing changed. */
int rd_table_move(rd_table_t *t, const rd_rmm_ops_t *rmm, const rd_storage_ops_t *storage,
                  rd_error_t *err);

/* The placement `to` for w, a copy of w's placement with its mapping
 * forced to learner l and RMM r (the mapper's storage rule and GPS),
 * bound to what runs (rd_placement_bind). RD_EINVAL if w has no placement
 * or its table cannot map that way. */
int rd_workload_plan_move(rd_workload_t *w, rd_devkind_t l, rd_devkind_t r, rd_placement_t *to,
                          rd_error_t *err);

/* Move w to `to` (rd_workload_plan_move's): the table, then the learner;
 * record ev (its from/to/moved are filled here) in w's history. On an
 * error the part that moved stays moved and the placement says what
 * runs; the event's reason says what failed. */
int rd_workload_move(rd_workload_t *w, const rd_placement_t *to, rd_place_event_t *ev,
                     rd_error_t *err);

/* What w is charged running placement pl (rd_workload_config_charge: its
 * table on pl's replay module and storage, its learner where pl runs it)
 * into *bytes, and the GPU memory of that (rd_workload_config_gpu_bytes)
 * into *gpu_bytes: what the registry charges for a move (registry.h
 * rd_registry_move_begin). */
void rd_workload_charge_for(rd_workload_t *w, const rd_placement_t *pl, uint64_t *bytes,
                            uint64_t *gpu_bytes);

/* Record ev in w's history (its time is set here). */
void rd_workload_history_add(rd_workload_t *w, const rd_place_event_t *ev);

/* A copy of w's history (oldest first) and of its placement (*has_pl 0:
 * none), read under its lock. */
void rd_workload_history(rd_workload_t *w, rd_place_history_t *out);
void rd_workload_placement_copy(rd_workload_t *w, rd_placement_t *out, int *has_pl);

#endif
