/* messages.c - Workload, Placement, Device and counters messages. */
#include "messages.h"
#include "workload_move.h"
#include "tenant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_pb.h"

/* What the pipeline actually runs, over what the placement asked for: a
 * GPU learner that failed (pipeline.h) is running on the CPU now. */
static void placement_actual(rd_placement_msg_t *o, const rd_placement_t *p,
                             rd_pipeline_t *pipe) {
  /* The pins as applied: a pin the kernel refused runs unpinned. */
  rd_pipeline_cpus_t pc;
  rd_pipeline_cpus(pipe, &pc);
  rd_pin_format(&pc.learner_pin, o->learner_cpus, sizeof o->learner_cpus);
  rd_pin_format(&pc.sampler_pin, o->sampler_cpus, sizeof o->sampler_cpus);
  rd_pipeline_learner_info_t li;
  rd_pipeline_learner_info(pipe, &li);
  if (!li.fell_back && !li.dead) return;
  snprintf(o->code_running, sizeof o->code_running, "%s", p->running);
  o->code_running[0] = li.dead ? '-' : 'C';
  snprintf(o->note, sizeof o->note, "mapped %s; running %s: the %s learner on %s%u failed%s "
           "(%.200s)%s", p->code[0] ? p->code : "-", o->code_running,
           rd_learner_kind_name(li.requested), rd_learner_kind_name(li.requested),
           p->learner_device, li.at_init ? " at start" : " while training", li.reason,
           li.dead ? "; no learner could be built: not training"
                   : li.at_init ? "; the CPU learner runs"
                                : "; the CPU learner runs from the last published weights");
  if (p->fpga_csim && strchr(o->code_running + 1, 'F') != NULL) {
    size_t n = strlen(o->note);
    snprintf(o->note + n, sizeof o->note - n, "; FPGA: C-simulation of %s, no board; its "
             "storage is host memory", p->fpga_part);
  } else if (p->fpga_xrt && strchr(o->code_running + 1, 'F') != NULL) {
    size_t n = strlen(o->note);
    snprintf(o->note + n, sizeof o->note - n, "; FPGA: XRT board fpga%u, the fpga-xclbin "
             "kernels; replayd has never run on a board", p->fpga_device);
  }
  o->msg.running = o->code_running;
  o->msg.note = o->note;
}

static void platform_row(Replayd__V1__PlatformRow *r, const rd_placement_t *p, int d) {
  const rd_pdevice_t *pd = &p->table.dev[d];
  replayd__v1__platform_row__init(r);
  r->device = (char *)rd_devkind_name((rd_devkind_t)d);
  r->present = pd->present != 0;
  r->learner_source = (char *)rd_pt_source_name(pd->present ? pd->src_learner : RD_PT_NONE);
  r->rmm_source = (char *)rd_pt_source_name(pd->present ? pd->src_rmm : RD_PT_NONE);
  if (pd->present && pd->src_learner != RD_PT_NONE) r->learner_seconds = pd->t_learner;
  if (pd->present && pd->src_rmm != RD_PT_NONE) r->rmm_seconds = pd->t_rmm;
  r->fingerprint = (char *)p->fingerprint[d];
  r->detail = (char *)p->detail[d];
}

void rd_placement_msg(rd_placement_msg_t *o, const rd_placement_t *p, double measured_gps) {
  replayd__v1__placement__init(&o->msg);
  o->msg.mapping = (char *)p->code;
  if (p->mapped) {
    o->msg.learner_device = (char *)rd_devkind_name(p->mapping.learner);
    o->msg.rmm_device = (char *)rd_devkind_name(p->mapping.rmm);
    o->msg.storage_device = (char *)rd_devkind_name(p->mapping.storage);
    o->msg.predicted_gps = p->mapping.gps;
    o->msg.explain = (char *)p->mapping.explain;
    o->msg.bottleneck = (char *)rd_bottleneck_name(p->mapping.bottleneck);
  }
  for (int d = 0; d < RD_DEV_COUNT; d++) {
    platform_row(&o->rows[d], p, d);
    o->rowp[d] = &o->rows[d];
  }
  o->msg.n_table = RD_DEV_COUNT;
  o->msg.table = o->rowp;
  o->msg.measured_gps = measured_gps;
  o->msg.profile_cache_hit = p->cache_hit != 0;
  o->msg.register_ms = p->register_ms;
  o->msg.running = (char *)p->running;
  o->msg.note = (char *)p->note;
  o->msg.batch = p->table.batch;
  o->msg.profiles_measured = p->profiles_measured;
  o->msg.learner_threads = p->learner_threads;
  rd_pin_format(&p->learner_pin, o->learner_cpus, sizeof o->learner_cpus);
  rd_pin_format(&p->sampler_pin, o->sampler_cpus, sizeof o->sampler_cpus);
  o->msg.learner_cpus = o->learner_cpus;
  o->msg.sampler_cpus = o->sampler_cpus;
}

void rd_counters_msg(Replayd__V1__WorkloadCounters *m, const rd_workload_counters_t *c) {
  replayd__v1__workload_counters__init(m);
  m->inserts = c->inserts;
  m->samples = c->samples;
  m->updates = c->updates;
  m->stale_updates = c->stale_updates;
  m->size = c->size;
  m->bytes = c->bytes;
}

/* The workload's placement events (workload_move.h), oldest first. */
static void history_msg(rd_placement_msg_t *o, rd_workload_t *w) {
  rd_workload_history(w, &o->history);
  for (uint32_t i = 0; i < o->history.n; i++) {
    const rd_place_event_t *e = &o->history.ev[i];
    Replayd__V1__PlacementEvent *m = &o->ev[i];
    replayd__v1__placement_event__init(m);
    m->unix_ms = e->unix_ms;
    m->moved = e->moved != 0;
    m->from = (char *)e->from;
    m->to = (char *)e->to;
    m->predicted_gps_from = e->gps_from;
    m->predicted_gps_to = e->gps_to;
    m->predicted_total_from = e->total_from;
    m->predicted_total_to = e->total_to;
    m->reason = (char *)e->reason;
    o->evp[i] = m;
  }
  o->msg.n_history = o->history.n;
  o->msg.history = o->evp;
  o->msg.history_total = o->history.total;
}

/* A hosted learner's counters and placement. */
static void learner_msg(rd_workload_msg_t *o, rd_workload_t *w) {
  rd_pipeline_stats_t st;
  rd_pipeline_stats(w->pipeline, &st);
  replayd__v1__learner_counters__init(&o->learner);
  o->learner.steps = st.steps;
  o->learner.weight_version = st.weight_version;
  o->learner.loss = st.loss;
  o->learner.steps_per_second = st.steps_per_second;
  o->learner.skipped_steps = st.skipped_steps;
  o->learner.late_updates = st.late_updates;
  o->msg.learner = &o->learner;
  int has_pl = 0;
  rd_workload_placement_copy(w, &o->placement.copy, &has_pl); /* a move rewrites it */
  if (has_pl) {
    /* Measured GPS: the pipeline's rate over its last training window. */
    rd_placement_t *pl = &o->placement.copy;
    rd_placement_msg(&o->placement, pl, st.steps > 0 ? st.steps_per_second : 0);
    placement_actual(&o->placement, pl, w->pipeline);
    history_msg(&o->placement, w);
    o->msg.placement = &o->placement.msg;
  }
}

void rd_checkpoint_info_msg(Replayd__V1__CheckpointInfo *m, const rd_checkpoint_info_t *c) {
  replayd__v1__checkpoint_info__init(m);
  m->generation = c->gen;
  m->taken_unix_ms = c->taken_unix_ms;
  m->bytes = c->bytes;
  m->seconds = c->seconds;
  m->items = c->items;
  m->learner_full = c->learner_full != 0;
  m->pause_ms = c->hold_max_s * 1e3;
}

/* What survives a restart, and how the workload came back (durable.h). */
static void durability_msg(rd_workload_msg_t *o, const rd_workload_t *w) {
  rd_durable_info_t *d = &o->dinfo;
  rd_durable_info(w, d);
  Replayd__V1__Durability *m = &o->durability;
  replayd__v1__durability__init(m);
  m->mode = (char *)rd_durability_name(d->mode);
  m->checkpoint_interval_s = d->interval_s;
  if (d->has_last) {
    rd_checkpoint_info_msg(&o->last_checkpoint, &d->last);
    m->last = &o->last_checkpoint;
  }
  m->checkpoints = d->checkpoints;
  m->last_error = d->last_error;
  m->restored = d->restored;
  m->journal_records = d->journal.records;
  m->journal_commits = d->journal.commits;
  m->journal_commit_ms_max = d->journal.commit_s_max * 1e3;
  m->journal_error = d->journal.failed ? d->journal.why : "";
  o->msg.durability = m;
}

void rd_limiter_spec_msg(Replayd__V1__RateLimiterSpec *m, const rd_limiter_config_t *c) {
  replayd__v1__rate_limiter_spec__init(m);
  m->min_size_to_sample = c->min_size_to_sample;
  const int min_size_only = c->min_diff == -INFINITY && c->max_diff == INFINITY;
  m->samples_per_insert = min_size_only ? 0 : c->samples_per_insert;
  if (min_size_only) return;
  m->min_diff_opt_case = REPLAYD__V1__RATE_LIMITER_SPEC__MIN_DIFF_OPT_MIN_DIFF;
  m->min_diff = c->min_diff;
  m->max_diff_opt_case = REPLAYD__V1__RATE_LIMITER_SPEC__MAX_DIFF_OPT_MAX_DIFF;
  m->max_diff = c->max_diff;
}

/* The rate limiter's state (when the workload has one). */
static void limiter_msg(rd_workload_msg_t *o, rd_workload_t *w) {
  rd_limiter_info_t li;
  rd_workload_limiter_info(w, &li);
  if (!li.on) return;
  Replayd__V1__RateLimiterState *m = &o->limiter;
  replayd__v1__rate_limiter_state__init(m);
  rd_limiter_spec_msg(&o->limiter_spec, &li.cfg);
  m->spec = &o->limiter_spec;
  m->inserted = li.inserted;
  m->sampled = li.sampled;
  m->ratio = li.inserted ? (double)li.sampled / (double)li.inserted : 0;
  m->blocked_inserts = li.queued_inserts;
  m->blocked_samples = li.queued_samples;
  m->insert_wait_seconds = li.insert_wait_s;
  m->sample_wait_seconds = li.sample_wait_s;
  m->insert_waits = li.insert_waits;
  m->sample_waits = li.sample_waits;
  o->msg.rate_limiter = m;
}

int rd_workload_msg(rd_workload_msg_t *o, rd_workload_t *w, const char *token,
                    Replayd__V1__WorkloadSpec *spec) {
  replayd__v1__workload__init(&o->msg);
  if (spec == NULL) { /* the stored spec: an owner may replace it (SetRateLimiter) */
    size_t len = 0;
    uint8_t *bytes = rd_workload_spec_copy(w, &len);
    if (bytes != NULL) spec = rd_spec_pb_stored(bytes, len);
    free(bytes);
  }
  o->msg.spec = spec;
  if (o->msg.spec == NULL) return RD_ENOMEM;
  rd_workload_counters_t c;
  rd_workload_counters(w, &c);
  rd_counters_msg(&o->counters, &c);
  o->msg.id = w->id;
  o->msg.token = token != NULL ? (char *)token : "";
  o->msg.counters = &o->counters;
  o->msg.created_unix = w->created_unix;
  o->msg.tenant = w->tenant != NULL ? w->tenant->name : "";
  if (w->pipeline != NULL) learner_msg(o, w);
  durability_msg(o, w);
  limiter_msg(o, w);
  return RD_OK;
}

void rd_workload_msg_free(rd_workload_msg_t *o) {
  if (o->msg.spec != NULL) replayd__v1__workload_spec__free_unpacked(o->msg.spec, NULL);
  o->msg.spec = NULL;
}

void rd_device_msg(Replayd__V1__Device *m, const rd_device_t *d) {
  replayd__v1__device__init(m);
  m->kind = (char *)d->kind;
  m->name = (char *)d->name;
  m->fingerprint = (char *)d->fingerprint;
  m->status = (char *)d->status;
  m->capabilities = (char *)d->capabilities;
  m->model = (char *)d->model;
  m->cores = d->cores;
  m->memory_bytes = d->memory_bytes;
  m->isa = (char *)d->isa;
}

void rd_profile_msg(Replayd__V1__Profile *m, const rd_profile_t *p) {
  replayd__v1__profile__init(m);
  m->device = (char *)p->device_fp;
  m->primitive = (char *)rd_primitive_name(p->primitive);
  m->threads = p->threads;
  m->batch = p->shape.batch;
  m->capacity = p->shape.capacity;
  m->fanout = p->shape.fanout;
  m->algorithm = (char *)p->shape.algorithm;
  m->network = (char *)p->shape.network;
  m->build = (char *)p->build;
  m->latency_s = p->latency_s;
  m->reps = p->reps;
  m->items = p->items;
  m->source = (char *)rd_profile_source_name(p->source);
  m->measured_unix = p->measured_unix;
}
