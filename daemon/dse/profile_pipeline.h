/* profile_pipeline.h - the CPU pipeline's own costs (profile.h, "Pipeline
 * costs"): gather, handoff and pass, each measured once per shape at the
 * first thread count. handoff and pass run the daemon's own pipeline
 * (pipeline.h) for a bound shape and an emulation of its two threads for
 * an unbound one. Internal to the profiler (daemon/dse/profile*.c). */
#ifndef RD_PROFILE_PIPELINE_H
#define RD_PROFILE_PIPELINE_H

#include "learner.h"
#include "profile.h"
#include "profile_setup.h"
#include "profile_timer.h"
#include "rd_error.h"

/* Measure pipeline primitive prim (RD_PRIM_GATHER, _HANDOFF or _PASS) of
 * shape s into *tm within [now, slice_end] (and the deadline). tr, when
 * not NULL, holds the train-step's batches and t_train its warm latency at
 * lc's thread count; tab the measuring table and t_sampler the isolated
 * sample + update + gather latency (0: not measured): handoff and pass
 * take those off the step they measure. tm->reps 0: not measured
 * (latency_s -1: not for lack of time). Errors: a set-up's or a failing
 * call's. */
int rd_profile_measure_pipeline(rd_primitive_t prim, const rd_profile_shape_t *s,
                                rd_profile_train_t *tr, const rd_learner_config_t *lc,
                                double t_train, rd_profile_table_t *tab, double t_sampler,
                                double slice_end, double deadline, rd_profile_timing_t *tm,
                                rd_error_t *err);

#endif
