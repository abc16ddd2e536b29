/* messages.h - core's structures as the wire's messages (api/replayd.proto).
 *
 * Each *_msg_t holds a message and what it points to, on the caller's
 * stack; strings are borrowed from the source, which must outlive it.
 */
#ifndef RD_MESSAGES_H
#define RD_MESSAGES_H

#include "devices.h"
#include "durable.h"
#include "placement.h"
#include "profile.h"
#include "replayd.pb-c.h"
#include "workload.h"

/* A Placement: what the mapping asked for and, over it, what runs now. */
typedef struct {
  Replayd__V1__Placement msg;
  Replayd__V1__PlatformRow rows[RD_DEV_COUNT];
  Replayd__V1__PlatformRow *rowp[RD_DEV_COUNT];
  char code_running[RD_MAPPING_CODE_MAX];
  char note[RD_PLACEMENT_NOTE_MAX + RD_ERROR_MSG_MAX];
  char learner_cpus[RD_PIN_TEXT_MAX], sampler_cpus[RD_PIN_TEXT_MAX];
  rd_placement_t copy;                 /* a registered workload's, read under its lock */
  rd_place_history_t history;          /* its placement events (workload_move.h) */
  Replayd__V1__PlacementEvent ev[RD_PLACE_HISTORY_MAX];
  Replayd__V1__PlacementEvent *evp[RD_PLACE_HISTORY_MAX];
} rd_placement_msg_t;

/* measured_gps: the pipeline's steps per second, 0 for none (a plan). */
void rd_placement_msg(rd_placement_msg_t *o, const rd_placement_t *p, double measured_gps);

/* A Workload: id, spec, counters, learner, placement; token (NULL: none)
 * only at its registration (the server keeps only the token's hash). spec (taken, freed by
 * rd_workload_msg_free; NULL: w's stored spec unpacked here). RD_ENOMEM
 * if that unpack fails; free o either way. */
typedef struct {
  Replayd__V1__Workload msg;
  Replayd__V1__WorkloadCounters counters;
  Replayd__V1__LearnerCounters learner;
  rd_placement_msg_t placement;
  Replayd__V1__Durability durability;
  Replayd__V1__CheckpointInfo last_checkpoint;
  rd_durable_info_t dinfo;
  Replayd__V1__RateLimiterState limiter;
  Replayd__V1__RateLimiterSpec limiter_spec;
} rd_workload_msg_t;

/* A CheckpointInfo of core's (durable.h). */
void rd_checkpoint_info_msg(Replayd__V1__CheckpointInfo *m, const rd_checkpoint_info_t *c);

int rd_workload_msg(rd_workload_msg_t *o, rd_workload_t *w, const char *token,
                    Replayd__V1__WorkloadSpec *spec);
void rd_workload_msg_free(rd_workload_msg_t *o);

/* A rate limiter's config as the wire says it: diffs written out, or
 * samples_per_insert 0 for min_size_to_sample only. */
void rd_limiter_spec_msg(Replayd__V1__RateLimiterSpec *m, const rd_limiter_config_t *c);

void rd_counters_msg(Replayd__V1__WorkloadCounters *m, const rd_workload_counters_t *c);
void rd_device_msg(Replayd__V1__Device *m, const rd_device_t *d);
void rd_profile_msg(Replayd__V1__Profile *m, const rd_profile_t *p);

#endif
