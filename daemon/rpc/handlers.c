/* handlers.c - the RPCs of replayd.v1.Replay.
 *
 * Each handler: check the request's strings on the wire (pb_check.h, for
 * every method in one place), decode (undecodable bytes are
 * INVALID_ARGUMENT), find the workload and check its token, validate
 * against the server's limits, call the table under the workload's lock,
 * pack the reply. Memory a call allocates is bounded by max_batch rows,
 * itself bounded by the gRPC message size limit.
 */
#include "handlers.h"

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "log.h"
#include "model.h"
#include "pb_check.h"
#include "paging.h"
#include "placement.h"
#include "profile_jsonl.h"
#include "provider_fpga.h"

#ifndef RD_VERSION
#define RD_VERSION "0.0.0"
#endif

#define TOKEN_KEY "x-replayd-token"

static const char *const method_paths[RD_M_COUNT] = {
    [RD_M_REGISTER] = "/replayd.v1.Replay/RegisterWorkload",
    [RD_M_DESCRIBE] = "/replayd.v1.Replay/DescribeWorkload",
    [RD_M_LIST] = "/replayd.v1.Replay/ListWorkloads",
    [RD_M_DELETE] = "/replayd.v1.Replay/DeleteWorkload",
    [RD_M_INSERT] = "/replayd.v1.Replay/Insert",
    [RD_M_INSERT_BATCH] = "/replayd.v1.Replay/InsertBatch",
    [RD_M_SAMPLE] = "/replayd.v1.Replay/Sample",
    [RD_M_UPDATE] = "/replayd.v1.Replay/UpdatePriorities",
    [RD_M_TRAIN_STEP] = "/replayd.v1.Replay/TrainStep",
    [RD_M_GET_WEIGHTS] = "/replayd.v1.Replay/GetWeights",
    [RD_M_SERVER_INFO] = "/replayd.v1.Replay/ServerInfo",
    [RD_M_LIST_DEVICES] = "/replayd.v1.Replay/ListDevices",
    [RD_M_PLAN] = "/replayd.v1.Replay/Plan",
    [RD_M_LIST_PROFILES] = "/replayd.v1.Replay/ListProfiles",
    [RD_M_CLEAR_PROFILES] = "/replayd.v1.Replay/ClearProfiles",
    [RD_M_IMPORT_PROFILES] = "/replayd.v1.Replay/ImportProfiles",
    [RD_M_EXPORT_PROFILES] = "/replayd.v1.Replay/ExportProfiles",
};

const char *rd_method_path(rd_method_t m) { return method_paths[m]; }

rd_run_t rd_method_run(rd_method_t m) {
  switch (m) {
  case RD_M_TRAIN_STEP: return RD_RUN_TRAIN;
  case RD_M_INSERT:
  case RD_M_INSERT_BATCH: return RD_RUN_INGEST;
  case RD_M_REGISTER:
  case RD_M_PLAN: return RD_RUN_PLACEMENT;
  case RD_M_DELETE:
  case RD_M_LIST_PROFILES:
  case RD_M_CLEAR_PROFILES:
  case RD_M_IMPORT_PROFILES:
  case RD_M_EXPORT_PROFILES: return RD_RUN_CONTROL;
  default: return RD_RUN_INLINE;
  }
}

/* Each method's request type: every request's strings are checked on the
 * wire (pb_check.h) before it is unpacked, here for all methods at once. */
static const ProtobufCMessageDescriptor *const method_requests[RD_M_COUNT] = {
    [RD_M_REGISTER] = &replayd__v1__workload_spec__descriptor,
    [RD_M_DESCRIBE] = &replayd__v1__workload_ref__descriptor,
    [RD_M_LIST] = &replayd__v1__list_workloads_request__descriptor,
    [RD_M_DELETE] = &replayd__v1__workload_ref__descriptor,
    [RD_M_INSERT] = &replayd__v1__insert_request__descriptor,
    [RD_M_INSERT_BATCH] = &replayd__v1__insert_request__descriptor,
    [RD_M_SAMPLE] = &replayd__v1__sample_request__descriptor,
    [RD_M_UPDATE] = &replayd__v1__update_priorities_request__descriptor,
    [RD_M_TRAIN_STEP] = &replayd__v1__train_step_request__descriptor,
    [RD_M_GET_WEIGHTS] = &replayd__v1__get_weights_request__descriptor,
    [RD_M_SERVER_INFO] = &replayd__v1__server_info_request__descriptor,
    [RD_M_LIST_DEVICES] = &replayd__v1__list_devices_request__descriptor,
    [RD_M_PLAN] = &replayd__v1__plan_request__descriptor,
    [RD_M_LIST_PROFILES] = &replayd__v1__list_profiles_request__descriptor,
    [RD_M_CLEAR_PROFILES] = &replayd__v1__clear_profiles_request__descriptor,
    [RD_M_IMPORT_PROFILES] = &replayd__v1__import_profiles_request__descriptor,
    [RD_M_EXPORT_PROFILES] = &replayd__v1__export_profiles_request__descriptor,
};

/* ------------------------------------------------------------------ */
/* Replies                                                             */
/* ------------------------------------------------------------------ */

static void fail(rd_reply_t *r, grpc_status_code st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(rd_reply_t *r, grpc_status_code st, const char *fmt, ...) {
  va_list ap;
  r->status = st;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

static void pack(rd_reply_t *r, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  grpc_slice s = grpc_slice_malloc(len);
  protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
  r->reply = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  r->status = GRPC_STATUS_OK;
  r->message[0] = '\0';
}

/* 1 if the strings of method m's request body are whole (pb_check.h);
 * otherwise 0 with r set to INVALID_ARGUMENT naming the field. */
static int request_strings_ok(rd_method_t m, const uint8_t *b, size_t n, rd_reply_t *r) {
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_pb_check(method_requests[m], b, n, &err) == RD_OK) return 1;
  fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%s", err.msg);
  return 0;
}

/* Status for a table error (bad batch contents). */
static grpc_status_code table_status(int code) {
  switch (code) {
  case RD_EEMPTY: return GRPC_STATUS_FAILED_PRECONDITION;
  case RD_ENOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
  default: return GRPC_STATUS_INVALID_ARGUMENT;
  }
}

/* Status for a registry error (spec or server limits). */
static grpc_status_code registry_status(int code) {
  switch (code) {
  case RD_EINVAL: return GRPC_STATUS_INVALID_ARGUMENT;
  case RD_ERANGE: return GRPC_STATUS_INVALID_ARGUMENT;
  case RD_ETOOBIG: return GRPC_STATUS_RESOURCE_EXHAUSTED;
  case RD_ENOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
  case RD_ENOTFOUND: return GRPC_STATUS_NOT_FOUND;
  default: return GRPC_STATUS_INTERNAL;
  }
}

/* ------------------------------------------------------------------ */
/* Authorization                                                       */
/* ------------------------------------------------------------------ */

static int find_token(const grpc_metadata_array *md, const char **tok, size_t *len) {
  for (size_t i = 0; i < md->count; i++)
    if (grpc_slice_str_cmp(md->metadata[i].key, TOKEN_KEY) == 0) {
      *tok = (const char *)GRPC_SLICE_START_PTR(md->metadata[i].value);
      *len = GRPC_SLICE_LENGTH(md->metadata[i].value);
      return 1;
    }
  return 0;
}

static int admin_token_ok(const rd_handler_ctx_t *ctx, const char *tok, size_t len) {
  size_t want = strlen(ctx->admin_token);
  unsigned diff = (unsigned)(len ^ want);
  for (size_t i = 0; i < want; i++) diff |= (unsigned)(ctx->admin_token[i] ^ (i < len ? tok[i] : 0));
  return want > 0 && diff == 0;
}

/* The referenced workload `id`, if the call's token opens it; otherwise
 * NULL with the status set. */
static rd_workload_t *authorize(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                                const char *id, int allow_admin, rd_reply_t *r) {
  if (id == NULL || id[0] == '\0') {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "workload_id is required");
    return NULL;
  }
  rd_workload_t *w = rd_registry_get(ctx->registry, id);
  if (w == NULL) {
    fail(r, GRPC_STATUS_NOT_FOUND, "no workload with id \"%.64s\"", id);
    return NULL;
  }
  const char *tok;
  size_t len;
  if (!find_token(md, &tok, &len)) {
    fail(r, GRPC_STATUS_UNAUTHENTICATED,
         "this call needs the workload's token in metadata \"" TOKEN_KEY "\"");
    rd_workload_unref(w);
    return NULL;
  }
  if (!rd_workload_token_ok(w, tok, len) && !(allow_admin && admin_token_ok(ctx, tok, len))) {
    fail(r, GRPC_STATUS_PERMISSION_DENIED, "the token does not open workload %s", w->id);
    rd_workload_unref(w);
    return NULL;
  }
  return w;
}

/* ------------------------------------------------------------------ */
/* Workload messages                                                   */
/* ------------------------------------------------------------------ */

/* A Placement message over an rd_placement_t (borrowed strings). */
typedef struct {
  Replayd__V1__Placement msg;
  Replayd__V1__PlatformRow rows[RD_DEV_COUNT];
  Replayd__V1__PlatformRow *rowp[RD_DEV_COUNT];
  char code_running[RD_MAPPING_CODE_MAX];
  char note[RD_PLACEMENT_NOTE_MAX + RD_ERROR_MSG_MAX];
  char learner_cpus[RD_PIN_TEXT_MAX], sampler_cpus[RD_PIN_TEXT_MAX];
} placement_msg_t;

/* What the pipeline actually runs, over what the placement asked for: a
 * GPU learner that failed (pipeline.h) is running on the CPU now. */
static void placement_actual(const rd_placement_t *p, rd_pipeline_t *pipe, placement_msg_t *o) {
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

static void placement_msg(const rd_placement_t *p, double measured_gps, placement_msg_t *o) {
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
    const rd_pdevice_t *pd = &p->table.dev[d];
    Replayd__V1__PlatformRow *r = &o->rows[d];
    replayd__v1__platform_row__init(r);
    r->device = (char *)rd_devkind_name((rd_devkind_t)d);
    r->present = pd->present != 0;
    r->learner_source = (char *)rd_pt_source_name(pd->present ? pd->src_learner : RD_PT_NONE);
    r->rmm_source = (char *)rd_pt_source_name(pd->present ? pd->src_rmm : RD_PT_NONE);
    if (pd->present && pd->src_learner != RD_PT_NONE) r->learner_seconds = pd->t_learner;
    if (pd->present && pd->src_rmm != RD_PT_NONE) r->rmm_seconds = pd->t_rmm;
    r->fingerprint = (char *)p->fingerprint[d];
    r->detail = (char *)p->detail[d];
    o->rowp[d] = r;
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

typedef struct {
  Replayd__V1__Workload msg;
  Replayd__V1__WorkloadCounters counters;
  Replayd__V1__LearnerCounters learner;
  placement_msg_t placement;
} workload_reply_t;

static void workload_reply(rd_workload_t *w, int with_token, workload_reply_t *o) {
  replayd__v1__workload__init(&o->msg);
  replayd__v1__workload_counters__init(&o->counters);
  rd_workload_counters(w, &o->counters);
  o->msg.id = w->id;
  o->msg.token = with_token ? w->token : "";
  o->msg.spec = w->spec;
  o->msg.counters = &o->counters;
  o->msg.created_unix = w->created_unix;
  if (w->pipeline != NULL) {
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
    if (w->placement != NULL) {
      /* Measured GPS: the pipeline's rate over its last training window. */
      placement_msg(w->placement, st.steps > 0 ? st.steps_per_second : 0, &o->placement);
      placement_actual(w->placement, w->pipeline, &o->placement);
      o->msg.placement = &o->placement.msg;
    }
  }
}

/* One placement at a time: two measuring at once would each measure the
 * other (the CPU's cores are the thing measured). */
static pthread_mutex_t place_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *parts_dir(const rd_handler_ctx_t *ctx) {
  return ctx->config->fpga_parts_dir[0] ? ctx->config->fpga_parts_dir : NULL;
}

/* The CPUs the pipeline's threads get (cores.h): the daemon's least used
 * by the live workloads' pins. Unpinned if the mask cannot be read. */
static void assign_cpus(rd_handler_ctx_t *ctx, rd_pipeline_config_t *pc) {
  static int cpus[RD_CORES_MAX]; /* under place_mu */
  static uint32_t load[RD_CORES_MAX];
  size_t n = rd_cores_allowed(cpus, RD_CORES_MAX);
  rd_error_t err;
  rd_error_clear(&err);
  if (n > 0) rd_registry_cpu_load(ctx->registry, cpus, n, load);
  uint32_t threads = ctx->config->learner_threads ? ctx->config->learner_threads : 1;
  if (n == 0 ||
      rd_cores_assign(cpus, load, n, threads, &pc->learner_pin, &pc->sampler_pin, &err) != RD_OK) {
    rd_log_warn("placement", "the pipeline's threads run unpinned: %s",
                n == 0 ? "this process's CPU mask cannot be read" : err.msg);
    memset(&pc->learner_pin, 0, sizeof pc->learner_pin);
    memset(&pc->sampler_pin, 0, sizeof pc->sampler_pin);
  }
}

/* Profile and map, on the CPUs the pipeline will be pinned to. */
static int place(rd_handler_ctx_t *ctx, const rd_table_config_t *tc,
                 const rd_pipeline_config_t *pc, const rd_placement_assume_t *as,
                 rd_placement_t *out, rd_error_t *err) {
  pthread_mutex_lock(&place_mu);
  rd_pipeline_config_t pinned = *pc;
  assign_cpus(ctx, &pinned);
  int rc = rd_placement_compute(ctx->store, tc, &pinned, ctx->config->learner_threads,
                                RD_PROFILE_DEFAULT_BUDGET_S, parts_dir(ctx), as, out, err);
  pthread_mutex_unlock(&place_mu);
  return rc;
}

int rd_handler_restore_placer(void *arg, const rd_table_config_t *tc,
                              const rd_pipeline_config_t *pc, rd_placement_t *out) {
  rd_handler_ctx_t *ctx = arg;
  rd_placement_assume_t as = {NULL, 0, NULL, 0, 1};
  rd_error_t err;
  rd_error_clear(&err);
  return place(ctx, tc, pc, &as, out, &err);
}

static void device_msg(const rd_device_t *d, Replayd__V1__Device *m) {
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

static void do_register(rd_handler_ctx_t *ctx, const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__WorkloadSpec *spec = replayd__v1__workload_spec__unpack(NULL, n, b);
  if (spec == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.WorkloadSpec");
    return;
  }
  rd_workload_t *w;
  rd_error_t err;
  rd_error_clear(&err);
  /* Validate first (nothing is profiled for a bad spec), then profile and
   * map (placement.h: at most RD_PROFILE_DEFAULT_BUDGET_S of measuring),
   * then register with the placement. */
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  int has_learner = 0;
  int rc = rd_registry_spec_config(ctx->registry, spec, &tc, &pc, &has_learner, &err);
  rd_placement_t *pl = NULL;
  if (rc == RD_OK && has_learner) {
    pl = malloc(sizeof *pl);
    if (pl == NULL) {
      rc = rd_error_set(&err, RD_ENOMEM, "out of memory for the placement");
    } else {
      rc = place(ctx, &tc, &pc, NULL, pl, &err);
      if (rc != RD_OK) {
        free(pl);
        pl = NULL;
      }
    }
  }
  if (rc == RD_OK) rc = rd_registry_register_placed(ctx->registry, spec, pl, &w, &err);
  replayd__v1__workload_spec__free_unpacked(spec, NULL);
  if (rc) {
    free(pl);
    fail(r, registry_status(rc), "%s", err.msg);
    return;
  }
  workload_reply_t o;
  workload_reply(w, 1, &o);
  pack(r, &o.msg.base);
  rd_log_info("registry", "registered workload %s (\"%s\", capacity %u, %zu fields, replay "
              "module %s)", w->id, w->spec->name, w->spec->capacity, w->spec->n_fields,
              rd_table_rmm_name(&w->table));
  if (pl != NULL)
    rd_log_info("mapper", "workload %s: %s; profile cache %s (%u measured), %.0f ms; "
                "predicted %.4g GPS", w->id, o.msg.placement ? o.msg.placement->note : pl->note,
                pl->cache_hit ? "hit" : "miss", pl->profiles_measured, pl->register_ms,
                pl->mapped ? pl->mapping.gps : 0.0);
  free(pl);
  rd_workload_unref(w);
}

static void do_describe(rd_handler_ctx_t *ctx, const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__WorkloadRef *ref = replayd__v1__workload_ref__unpack(NULL, n, b);
  if (ref == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.WorkloadRef");
    return;
  }
  rd_workload_t *w = rd_registry_get(ctx->registry, ref->id);
  if (w == NULL) {
    fail(r, GRPC_STATUS_NOT_FOUND, "no workload with id \"%.64s\"", ref->id);
  } else {
    workload_reply_t o;
    workload_reply(w, 0, &o);
    pack(r, &o.msg.base);
    rd_workload_unref(w);
  }
  replayd__v1__workload_ref__free_unpacked(ref, NULL);
}

/* ListWorkloads: one page (paging.h: keyset by id, page_size, and never
 * more than fit the message limit). ServerInfo: the server's figures, the
 * devices and the first page of workloads at the default size, each cut
 * to what fits and flagged, so ServerInfo never fails for size. */
static void do_list(rd_handler_ctx_t *ctx, const uint8_t *b, size_t n, rd_reply_t *r,
                    int server_info) {
  uint32_t page = RD_PAGE_WORKLOADS_DEFAULT;
  char after[RD_WORKLOAD_ID_LEN + 1] = "";
  if (server_info) {
    Replayd__V1__ServerInfoRequest *q = replayd__v1__server_info_request__unpack(NULL, n, b);
    if (q == NULL) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ServerInfoRequest");
      return;
    }
    replayd__v1__server_info_request__free_unpacked(q, NULL);
  } else {
    Replayd__V1__ListWorkloadsRequest *q = replayd__v1__list_workloads_request__unpack(NULL, n, b);
    if (q == NULL) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ListWorkloadsRequest");
      return;
    }
    page = rd_page_size(q->page_size, RD_PAGE_WORKLOADS_DEFAULT, RD_PAGE_WORKLOADS_MAX);
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_page_token_parse_workload(q->page_token, after, &err);
    replayd__v1__list_workloads_request__free_unpacked(q, NULL);
    if (rc) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%s", err.msg);
      return;
    }
  }
  /* Room for the page and one more (is there a next page?), or for what
   * is registered now and one more: if that fills, the page says there may
   * be more, as workloads registered meanwhile could sort anywhere. */
  size_t count = rd_registry_count(ctx->registry);
  size_t cap = (page < count ? page : count) + 1;
  rd_workload_t **ws = calloc(cap, sizeof *ws);
  workload_reply_t *os = calloc(cap, sizeof *os);
  Replayd__V1__Workload **ptrs = calloc(cap, sizeof *ptrs);
  if (ws == NULL || os == NULL || ptrs == NULL) {
    free(ws);
    free(os);
    free(ptrs);
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory listing workloads");
    return;
  }
  size_t k = rd_registry_list_after(ctx->registry, after, ws, cap);
  rd_page_fill_t fill = {rd_page_budget(ctx->config->max_message_bytes), 0, 0};

  /* ServerInfo's own fields, sized with both flags set (their largest). */
  rd_device_t devs[RD_MAX_DEVICES];
  Replayd__V1__Device dm[RD_MAX_DEVICES], *dp[RD_MAX_DEVICES];
  Replayd__V1__ServerInfoResponse si = REPLAYD__V1__SERVER_INFO_RESPONSE__INIT;
  if (server_info) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    si.version = RD_VERSION;
    si.uptime_seconds = (double)now.tv_sec + now.tv_nsec * 1e-9 - ctx->start_time;
    si.workload_count = count > k ? count : k;
    si.workloads_truncated = 1;
    si.devices_truncated = 1;
    rd_page_fill_t dfill = {fill.budget, replayd__v1__server_info_response__get_packed_size(&si),
                            0};
    size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
    for (size_t i = 0; i < nd; i++) {
      device_msg(&devs[i], &dm[i]);
      dp[i] = &dm[i];
      if (rd_page_take(&dfill, rd_pb_field_bytes(replayd__v1__device__get_packed_size(&dm[i])),
                       0) != RD_OK)
        break;
    }
    si.n_devices = dfill.items;
    si.devices = dp;
    si.devices_truncated = si.n_devices < nd;
    fill.used = dfill.used;
  }
  char token[RD_PAGE_TOKEN_MAX + 1];
  for (size_t i = 0; i < k && i < page; i++) {
    workload_reply(ws[i], 0, &os[i]);
    ptrs[i] = &os[i].msg;
    size_t item = rd_pb_field_bytes(replayd__v1__workload__get_packed_size(&os[i].msg));
    /* A ListWorkloads page that ends here carries this item's token. */
    rd_page_token_workload(ws[i]->id, token);
    if (rd_page_take(&fill, item, server_info ? 0 : rd_pb_field_bytes(strlen(token))) != RD_OK) {
      if (fill.items == 0 && !server_info) {
        fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "workload %s alone takes %zu bytes of a "
             "ListWorkloads reply, more than this server's message limit of %u bytes "
             "(--max-message-bytes); DescribeWorkload shows it", ws[i]->id, item,
             ctx->config->max_message_bytes);
        goto out;
      }
      break;
    }
  }
  size_t listed = fill.items;
  int more = listed < k || k == cap;
  if (server_info) {
    si.n_workloads = listed;
    si.workloads = ptrs;
    si.workloads_truncated = more || count > listed;
    pack(r, &si.base);
  } else {
    Replayd__V1__ListWorkloadsResponse m = REPLAYD__V1__LIST_WORKLOADS_RESPONSE__INIT;
    m.n_workloads = listed;
    m.workloads = ptrs;
    if (more) {
      rd_page_token_workload(ws[listed - 1]->id, token);
      m.next_page_token = token;
    }
    pack(r, &m.base);
  }
out:
  for (size_t i = 0; i < k; i++) rd_workload_unref(ws[i]);
  free(ws);
  free(os);
  free(ptrs);
}

static void do_delete(rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const uint8_t *b,
                      size_t n, rd_reply_t *r) {
  Replayd__V1__WorkloadRef *ref = replayd__v1__workload_ref__unpack(NULL, n, b);
  if (ref == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.WorkloadRef");
    return;
  }
  rd_workload_t *w = authorize(ctx, md, ref->id, 1, r);
  if (w != NULL) {
    rd_error_t err;
    rd_error_clear(&err);
    char id[RD_WORKLOAD_ID_LEN + 1];
    memcpy(id, w->id, sizeof id);
    rd_workload_unref(w);
    int rc = rd_registry_delete(ctx->registry, id, &err);
    if (rc) {
      fail(r, registry_status(rc), "%s", err.msg);
    } else {
      Replayd__V1__DeleteWorkloadResponse m = REPLAYD__V1__DELETE_WORKLOAD_RESPONSE__INIT;
      pack(r, &m.base);
      rd_log_info("registry", "deleted workload %s", id);
    }
  }
  replayd__v1__workload_ref__free_unpacked(ref, NULL);
}

/* ------------------------------------------------------------------ */
/* Data calls                                                          */
/* ------------------------------------------------------------------ */

/* Check an insert request against the workload's schema and the limits and
 * insert it. keys may be NULL. Returns 0 or sets r. */
static int insert_rows(rd_handler_ctx_t *ctx, rd_workload_t *w,
                       const Replayd__V1__InsertRequest *q, uint64_t *keys, uint64_t *first_key,
                       rd_reply_t *r) {
  const rd_table_config_t *tc = &w->table.config;
  const Replayd__V1__RowBatch *rows = q->rows;
  if (rows == NULL || rows->count == 0) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "insert needs rows with count >= 1");
    return -1;
  }
  if (rows->count > ctx->config->max_batch || rows->count > tc->max_batch) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "insert of %u rows exceeds max_batch %u", rows->count,
         tc->max_batch < ctx->config->max_batch ? tc->max_batch : ctx->config->max_batch);
    return -1;
  }
  if (rows->n_columns != tc->schema.n_fields) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "insert has %zu columns; the schema has %u fields",
         rows->n_columns, tc->schema.n_fields);
    return -1;
  }
  if (q->n_priorities != 0 && q->n_priorities != rows->count) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%zu priorities for %u rows (send one per row or none)",
         q->n_priorities, rows->count);
    return -1;
  }
  rd_cbuf_t cols[RD_SCHEMA_MAX_FIELDS];
  for (size_t f = 0; f < rows->n_columns; f++) {
    cols[f].data = rows->columns[f].data;
    cols[f].bytes = rows->columns[f].len;
  }
  rd_error_t err;
  rd_error_clear(&err);
  pthread_mutex_lock(&w->lock);
  uint64_t first = rd_table_next_key(&w->table);
  int rc = RD_ENOTFOUND;
  if (!atomic_load(&w->deleted)) {
    /* A sampled batch whose rows this insert would overwrite is gathered
     * first (pipeline.h: collision-free inserts). */
    if (w->pipeline) rd_pipeline_before_insert(w->pipeline, rows->count);
    rc = rd_table_insert(&w->table, rows->count, cols, q->n_priorities ? q->priorities : NULL,
                         keys, &err);
    if (rc == RD_OK && w->pipeline) rd_pipeline_after_insert(w->pipeline, rows->count);
  }
  pthread_mutex_unlock(&w->lock);
  if (rc == RD_ENOTFOUND && atomic_load(&w->deleted)) {
    fail(r, GRPC_STATUS_NOT_FOUND, "workload %s was deleted", w->id);
    return -1;
  }
  if (rc) {
    fail(r, table_status(rc), "%s", err.msg);
    return -1;
  }
  if (first_key) *first_key = first;
  return 0;
}

static void do_insert_batch(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                            const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__InsertRequest *q = replayd__v1__insert_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.InsertRequest");
    return;
  }
  rd_workload_t *w = authorize(ctx, md, q->workload_id, 0, r);
  /* The reply lists every new key (up to 10 bytes each): a batch whose
   * keys could not be sent back is refused before anything is inserted. */
  if (w != NULL && q->rows != NULL &&
      (uint64_t)q->rows->count * 10 + RD_REPLY_HEADROOM > ctx->config->max_message_bytes) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "an InsertBatch of %u rows answers %u keys, which "
         "could exceed this server's message limit of %u bytes: send at most %u rows per call, "
         "or use the Insert stream", q->rows->count, q->rows->count,
         ctx->config->max_message_bytes,
         (ctx->config->max_message_bytes - RD_REPLY_HEADROOM) / 10);
    rd_workload_unref(w);
    w = NULL;
  }
  if (w != NULL) {
    uint32_t count = q->rows ? q->rows->count : 0;
    uint64_t *keys = NULL;
    if (count > 0 && count <= ctx->config->max_batch) {
      keys = malloc((size_t)count * sizeof *keys);
      if (keys == NULL) fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    if ((keys != NULL || count == 0 || count > ctx->config->max_batch) &&
        insert_rows(ctx, w, q, keys, NULL, r) == 0) {
      Replayd__V1__InsertResponse m = REPLAYD__V1__INSERT_RESPONSE__INIT;
      m.n_keys = count;
      m.keys = keys;
      m.inserted = count;
      m.first_key = keys[0];
      pack(r, &m.base);
    }
    free(keys);
    rd_workload_unref(w);
  }
  replayd__v1__insert_request__free_unpacked(q, NULL);
}

int rd_handle_insert_message(rd_handler_ctx_t *ctx, rd_insert_stream_t *st,
                             const grpc_metadata_array *md, const uint8_t *b, size_t n,
                             rd_reply_t *r) {
  if (!request_strings_ok(RD_M_INSERT, b, n, r)) return 1;
  Replayd__V1__InsertRequest *q = replayd__v1__insert_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT,
         "stream message %llu is not a decodable replayd.v1.InsertRequest",
         (unsigned long long)st->messages);
    return 1;
  }
  int stop = 1;
  if (st->workload == NULL) {
    st->workload = authorize(ctx, md, q->workload_id, 0, r);
  } else if (q->workload_id[0] != '\0' && strcmp(q->workload_id, st->workload->id) != 0) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "one Insert stream serves one workload (%s, not %.64s)",
         st->workload->id, q->workload_id);
    goto out;
  }
  if (st->workload != NULL) {
    uint64_t first;
    if (insert_rows(ctx, st->workload, q, NULL, &first, r) == 0) {
      if (st->messages == 0) st->first_key = first;
      st->inserted += q->rows->count;
      st->messages++;
      stop = 0;
    }
  }
out:
  replayd__v1__insert_request__free_unpacked(q, NULL);
  return stop;
}

void rd_handle_insert_end(rd_handler_ctx_t *ctx, rd_insert_stream_t *st, rd_reply_t *out) {
  (void)ctx;
  Replayd__V1__InsertResponse m = REPLAYD__V1__INSERT_RESPONSE__INIT;
  m.inserted = st->inserted;
  m.first_key = st->first_key;
  pack(out, &m.base);
}

void rd_insert_stream_release(rd_insert_stream_t *st) {
  if (st->workload != NULL) rd_workload_unref(st->workload);
  st->workload = NULL;
}

static void do_sample(rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const uint8_t *b,
                      size_t n, rd_reply_t *r) {
  Replayd__V1__SampleRequest *q = replayd__v1__sample_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.SampleRequest");
    return;
  }
  rd_workload_t *w = authorize(ctx, md, q->workload_id, 0, r);
  if (w == NULL) goto out;
  const rd_table_config_t *tc = &w->table.config;
  uint32_t bs = q->batch_size;
  double beta = q->beta_opt_case == REPLAYD__V1__SAMPLE_REQUEST__BETA_OPT_BETA ? q->beta
                                                                               : w->default_beta;
  if (bs == 0) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "batch_size must be >= 1");
    goto unref;
  }
  if (bs > ctx->config->max_batch || bs > tc->max_batch) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "sample of %u items exceeds max_batch %u", bs,
         tc->max_batch < ctx->config->max_batch ? tc->max_batch : ctx->config->max_batch);
    goto unref;
  }
  /* One allocation for everything the reply carries. */
  size_t nf = tc->schema.n_fields, row = rd_schema_row_bytes(&tc->schema);
  size_t bytes = (size_t)bs * (3 * sizeof(double) + row);
  if (bytes > ctx->config->max_message_bytes) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED,
         "a sample of %u rows (%zu bytes) would exceed the message limit of %u bytes", bs, bytes,
         ctx->config->max_message_bytes);
    goto unref;
  }
  uint8_t *mem = malloc(bytes);
  if (mem == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    goto unref;
  }
  rd_buf_t cols[RD_SCHEMA_MAX_FIELDS];
  ProtobufCBinaryData pcols[RD_SCHEMA_MAX_FIELDS];
  uint64_t *keys = (uint64_t *)mem;
  double *probs = (double *)(keys + bs), *weights = probs + bs;
  uint8_t *p = (uint8_t *)(weights + bs);
  for (size_t f = 0; f < nf; f++) {
    cols[f].data = p;
    cols[f].bytes = (size_t)bs * w->table.field_bytes[f];
    pcols[f].data = p;
    pcols[f].len = cols[f].bytes;
    p += cols[f].bytes;
  }
  rd_sample_out_t so = {keys, probs, weights, cols};
  rd_error_t err;
  rd_error_clear(&err);
  pthread_mutex_lock(&w->lock);
  int gone = atomic_load(&w->deleted);
  int rc = gone ? RD_OK
                : rd_table_sample(&w->table, bs, beta, q->stratified ? RD_SAMPLE_STRATIFIED : 0,
                                  &so, &err);
  uint64_t size = rd_table_size(&w->table);
  pthread_mutex_unlock(&w->lock);
  if (gone) {
    fail(r, GRPC_STATUS_NOT_FOUND, "workload %s was deleted", w->id);
  } else if (rc) {
    fail(r, table_status(rc), "%s", err.msg);
  } else {
    Replayd__V1__RowBatch rb = REPLAYD__V1__ROW_BATCH__INIT;
    rb.count = bs;
    rb.n_columns = nf;
    rb.columns = pcols;
    Replayd__V1__SampleResponse m = REPLAYD__V1__SAMPLE_RESPONSE__INIT;
    m.n_keys = bs;
    m.keys = keys;
    m.n_probabilities = bs;
    m.probabilities = probs;
    m.n_weights = bs;
    m.weights = weights;
    m.table_size = size;
    m.rows = &rb;
    pack(r, &m.base);
  }
  free(mem);
unref:
  rd_workload_unref(w);
out:
  replayd__v1__sample_request__free_unpacked(q, NULL);
}

static void do_update(rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const uint8_t *b,
                      size_t n, rd_reply_t *r) {
  Replayd__V1__UpdatePrioritiesRequest *q =
      replayd__v1__update_priorities_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT,
         "request is not a decodable replayd.v1.UpdatePrioritiesRequest");
    return;
  }
  rd_workload_t *w = authorize(ctx, md, q->workload_id, 0, r);
  if (w == NULL) goto out;
  const rd_table_config_t *tc = &w->table.config;
  if (q->n_keys != q->n_priorities) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%zu keys but %zu priorities", q->n_keys,
         q->n_priorities);
  } else if (q->n_keys > ctx->config->max_batch || q->n_keys > tc->max_batch) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "update of %zu keys exceeds max_batch %u", q->n_keys,
         tc->max_batch < ctx->config->max_batch ? tc->max_batch : ctx->config->max_batch);
  } else {
    rd_error_t err;
    rd_error_clear(&err);
    size_t stale = 0;
    pthread_mutex_lock(&w->lock);
    int gone = atomic_load(&w->deleted);
    int rc = gone ? RD_OK
                  : rd_table_update(&w->table, q->n_keys, q->keys, q->priorities, &stale, &err);
    pthread_mutex_unlock(&w->lock);
    if (gone) {
      fail(r, GRPC_STATUS_NOT_FOUND, "workload %s was deleted", w->id);
    } else if (rc) {
      fail(r, table_status(rc), "%s", err.msg);
    } else {
      Replayd__V1__UpdatePrioritiesResponse m = REPLAYD__V1__UPDATE_PRIORITIES_RESPONSE__INIT;
      m.applied = q->n_keys - stale;
      m.stale = stale;
      pack(r, &m.base);
    }
  }
  rd_workload_unref(w);
out:
  replayd__v1__update_priorities_request__free_unpacked(q, NULL);
}

/* ------------------------------------------------------------------ */
/* Hosted learning                                                     */
/* ------------------------------------------------------------------ */

static rd_workload_t *learner_workload(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                                       const char *id, rd_reply_t *r) {
  rd_workload_t *w = authorize(ctx, md, id, 0, r);
  if (w != NULL && w->pipeline == NULL) {
    fail(r, GRPC_STATUS_FAILED_PRECONDITION, "workload %s has no learner: register it with a "
         "learner spec to train in the server", w->id);
    rd_workload_unref(w);
    return NULL;
  }
  return w;
}

typedef struct {
  rd_workload_t *w;
  rd_async_done_fn done;
  void *call;
  uint32_t steps;
} train_call_t;

/* The pipeline ended the request (from one of its threads, or from the
 * thread that stopped it): reply, then let the workload go. */
static void train_done(void *arg, const rd_train_result_t *res) {
  train_call_t *tc = arg;
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  switch (res->status) {
  case RD_OK: {
    Replayd__V1__TrainStepResponse m = REPLAYD__V1__TRAIN_STEP_RESPONSE__INIT;
    m.steps_done = res->steps_done;
    m.loss_mean = res->loss_mean;
    m.td_abs_mean = res->td_abs_mean;
    m.td_abs_max = res->td_abs_max;
    m.weight_version = res->weight_version;
    m.steps_per_second = res->steps_per_second;
    m.skipped_steps = res->skipped_steps;
    pack(&r, &m.base);
    break;
  }
  case RD_ETIMEDOUT:
    fail(&r, GRPC_STATUS_DEADLINE_EXCEEDED, "the deadline passed after %u of %u steps (weight "
         "version %llu); the steps done stay done", res->steps_done, tc->steps,
         (unsigned long long)res->weight_version);
    break;
  case RD_ECANCELED:
    fail(&r, GRPC_STATUS_UNAVAILABLE, "%s; %u of %u steps were done", res->message,
         res->steps_done, tc->steps);
    break;
  default:
    fail(&r, GRPC_STATUS_FAILED_PRECONDITION, "%s; %u of %u steps were done", res->message,
         res->steps_done, tc->steps);
  }
  tc->done(tc->call, &r);
  rd_workload_unref(tc->w);
  free(tc);
}

int rd_handle_train_step(rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const uint8_t *b,
                         size_t n, double deadline_mono, rd_async_done_fn done, void *call,
                         rd_reply_t *r) {
  static const uint8_t empty[1];
  if (b == NULL) b = empty;
  if (!request_strings_ok(RD_M_TRAIN_STEP, b, n, r)) return 0;
  Replayd__V1__TrainStepRequest *q = replayd__v1__train_step_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.TrainStepRequest");
    return 0;
  }
  uint32_t steps = q->steps;
  rd_workload_t *w = learner_workload(ctx, md, q->workload_id, r);
  replayd__v1__train_step_request__free_unpacked(q, NULL);
  if (w == NULL) return 0;
  train_call_t *tc = malloc(sizeof *tc);
  if (tc == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    rd_workload_unref(w);
    return 0;
  }
  tc->w = w;
  tc->done = done;
  tc->call = call;
  tc->steps = steps;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_pipeline_train(w->pipeline, steps, deadline_mono, train_done, tc, &err);
  if (rc == RD_OK) return 1; /* train_done replies */
  free(tc);
  /* Continuous mode is a property of the workload (FAILED_PRECONDITION);
   * a concurrent request is a conflict worth retrying (ABORTED). */
  grpc_status_code st = rc == RD_EINVAL      ? GRPC_STATUS_INVALID_ARGUMENT
                        : rc == RD_EBUSY     ? (rd_pipeline_continuous(w->pipeline)
                                                    ? GRPC_STATUS_FAILED_PRECONDITION
                                                    : GRPC_STATUS_ABORTED)
                        : rc == RD_EEMPTY    ? GRPC_STATUS_FAILED_PRECONDITION
                        : rc == RD_ECANCELED ? GRPC_STATUS_UNAVAILABLE
                                             : GRPC_STATUS_INTERNAL;
  fail(r, st, "%s", err.msg);
  rd_workload_unref(w);
  return 0;
}

static void do_get_weights(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                           const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__GetWeightsRequest *q = replayd__v1__get_weights_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.GetWeightsRequest");
    return;
  }
  uint64_t have = q->have_version;
  rd_workload_t *w = learner_workload(ctx, md, q->workload_id, r);
  replayd__v1__get_weights_request__free_unpacked(q, NULL);
  if (w == NULL) return;
  /* Bounded: registration refused policies above --max-message-bytes. */
  size_t cap = rd_pipeline_weights_bytes(w->pipeline);
  uint8_t *buf = malloc(cap ? cap : 1);
  if (buf == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for %zu bytes of weights", cap);
    rd_workload_unref(w);
    return;
  }
  uint64_t version = 0;
  size_t len = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_pipeline_weights(w->pipeline, have, buf, cap, &version, &len, &err);
  if (rc) {
    fail(r, GRPC_STATUS_INTERNAL, "%s", err.msg);
  } else {
    Replayd__V1__GetWeightsResponse m = REPLAYD__V1__GET_WEIGHTS_RESPONSE__INIT;
    m.version = version;
    m.weights.data = buf;
    m.weights.len = len;
    pack(r, &m.base);
  }
  free(buf);
  rd_workload_unref(w);
}

/* ------------------------------------------------------------------ */
/* Devices, plans and profiles                                         */
/* ------------------------------------------------------------------ */

static void do_list_devices(const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__ListDevicesRequest *q = replayd__v1__list_devices_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ListDevicesRequest");
    return;
  }
  replayd__v1__list_devices_request__free_unpacked(q, NULL);
  rd_device_t devs[RD_MAX_DEVICES];
  Replayd__V1__Device dm[RD_MAX_DEVICES], *dp[RD_MAX_DEVICES];
  size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
  for (size_t i = 0; i < nd; i++) {
    device_msg(&devs[i], &dm[i]);
    dp[i] = &dm[i];
  }
  Replayd__V1__ListDevicesResponse m = REPLAYD__V1__LIST_DEVICES_RESPONSE__INIT;
  m.n_devices = nd;
  m.devices = dp;
  pack(r, &m.base);
}

/* The admin calls: the server's admin token in x-replayd-token, as
 * DeleteWorkload accepts it. 1 if allowed; r is set otherwise. */
static int admin_token_required(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                                const char *what, rd_reply_t *r) {
  const char *tok;
  size_t len;
  if (!find_token(md, &tok, &len)) {
    fail(r, GRPC_STATUS_UNAUTHENTICATED,
         "%s needs the server's admin token in metadata \"" TOKEN_KEY "\" (the file "
         "admin.token in its state directory)", what);
    return 0;
  }
  if (!admin_token_ok(ctx, tok, len)) {
    fail(r, GRPC_STATUS_PERMISSION_DENIED, "%s needs the server's admin token; this token is "
         "not it", what);
    return 0;
  }
  return 1;
}

/* The profile RPCs: the admin token, and a store to work on. */
static int admin_only(rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const char *what,
                      rd_reply_t *r) {
  if (!admin_token_required(ctx, md, what, r)) return 0;
  if (ctx->store == NULL) {
    fail(r, GRPC_STATUS_FAILED_PRECONDITION, "this server keeps no profile store");
    return 0;
  }
  return 1;
}

static grpc_status_code store_status(int code) {
  switch (code) {
  case RD_EINVAL: return GRPC_STATUS_INVALID_ARGUMENT;
  case RD_ENOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
  case RD_ETOOBIG: return GRPC_STATUS_RESOURCE_EXHAUSTED;
  default: return GRPC_STATUS_INTERNAL;
  }
}

/* One page of the stored profiles (paging.h: keyset by the store's key,
 * page_size, and never more than fit the message limit). */
static void do_list_profiles(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                             const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__ListProfilesRequest *q = replayd__v1__list_profiles_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ListProfilesRequest");
    return;
  }
  if (!admin_only(ctx, md, "ListProfiles", r)) {
    replayd__v1__list_profiles_request__free_unpacked(q, NULL);
    return;
  }
  uint32_t page = rd_page_size(q->page_size, RD_PAGE_PROFILES_DEFAULT, RD_PAGE_PROFILES_MAX);
  rd_profile_t after;
  int has_after = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_page_token_parse_profile(q->page_token, &after, &has_after, &err);
  replayd__v1__list_profiles_request__free_unpacked(q, NULL);
  if (rc) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%s", err.msg);
    return;
  }
  rd_profile_t *rows = NULL;
  size_t nr = 0;
  /* One more than the page: is there a next one? */
  rc = rd_store_list_profiles_after(ctx->store, has_after ? &after : NULL, (size_t)page + 1,
                                    &rows, &nr, &err);
  if (rc) {
    fail(r, store_status(rc), "%s", err.msg);
    return;
  }
  Replayd__V1__Profile *pm = calloc(nr ? nr : 1, sizeof *pm);
  Replayd__V1__Profile **pp = calloc(nr ? nr : 1, sizeof *pp);
  char token[RD_PAGE_TOKEN_MAX + 1];
  if (pm == NULL || pp == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory listing %zu profiles", nr);
    goto out;
  }
  rd_page_fill_t fill = {rd_page_budget(ctx->config->max_message_bytes), 0, 0};
  for (size_t i = 0; i < nr && i < page; i++) {
    const rd_profile_t *p = &rows[i];
    Replayd__V1__Profile *m = &pm[i];
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
    /* The page may end here: count this item's token too. */
    if (rd_page_token_profile(p, token, &err) != RD_OK) {
      fail(r, GRPC_STATUS_INTERNAL, "profile %s/%s: %s", p->device_fp,
           rd_primitive_name(p->primitive), err.msg);
      goto out;
    }
    pp[i] = m;
    size_t item = rd_pb_field_bytes(replayd__v1__profile__get_packed_size(m));
    if (rd_page_take(&fill, item, rd_pb_field_bytes(strlen(token))) != RD_OK) {
      if (fill.items == 0) {
        fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "profile (%s, %s, %u threads, %s, batch %u) "
             "alone takes %zu bytes of a ListProfiles reply, more than this server's message "
             "limit of %u bytes (--max-message-bytes)", p->device_fp,
             rd_primitive_name(p->primitive), p->threads, p->shape.network, p->shape.batch,
             item, ctx->config->max_message_bytes);
        goto out;
      }
      break;
    }
  }
  size_t listed = fill.items;
  Replayd__V1__ListProfilesResponse m = REPLAYD__V1__LIST_PROFILES_RESPONSE__INIT;
  m.n_profiles = listed;
  m.profiles = pp;
  if (listed < nr) {
    if (rd_page_token_profile(&rows[listed - 1], token, &err) != RD_OK) {
      fail(r, GRPC_STATUS_INTERNAL, "%s", err.msg);
      goto out;
    }
    m.next_page_token = token;
  }
  pack(r, &m.base);
out:
  free(pm);
  free(pp);
  rd_store_free_profiles(rows);
}

static void do_clear_profiles(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                              const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__ClearProfilesRequest *q = replayd__v1__clear_profiles_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ClearProfilesRequest");
    return;
  }
  replayd__v1__clear_profiles_request__free_unpacked(q, NULL);
  if (!admin_only(ctx, md, "ClearProfiles", r)) return;
  size_t removed = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_clear_profiles(ctx->store, &removed, &err);
  if (rc) {
    fail(r, store_status(rc), "%s", err.msg);
    return;
  }
  rd_log_info("profile", "cleared %zu stored profiles", removed);
  Replayd__V1__ClearProfilesResponse m = REPLAYD__V1__CLEAR_PROFILES_RESPONSE__INIT;
  m.removed = removed;
  pack(r, &m.base);
}

static void do_import_profiles(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                               const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__ImportProfilesRequest *q =
      replayd__v1__import_profiles_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ImportProfilesRequest");
    return;
  }
  if (!admin_only(ctx, md, "ImportProfiles", r)) goto out;
  if (q->jsonl.len > RD_IMPORT_MAX_BYTES) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "an import of %zu bytes exceeds the limit of %u "
         "bytes: split the file", q->jsonl.len, RD_IMPORT_MAX_BYTES);
    goto out;
  }
  size_t imported = 0;
  if (q->jsonl.len > 0) {
    FILE *f = fmemopen(q->jsonl.data, q->jsonl.len, "r");
    if (f == NULL) {
      fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory reading the import");
      goto out;
    }
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_store_import_profiles(ctx->store, f, &imported, &err);
    fclose(f);
    if (rc) {
      fail(r, store_status(rc), "%s; nothing was imported", err.msg);
      goto out;
    }
  }
  rd_log_info("profile", "imported %zu profiles", imported);
  Replayd__V1__ImportProfilesResponse m = REPLAYD__V1__IMPORT_PROFILES_RESPONSE__INIT;
  m.imported = imported;
  pack(r, &m.base);
out:
  replayd__v1__import_profiles_request__free_unpacked(q, NULL);
}

static void do_export_profiles(rd_handler_ctx_t *ctx, const grpc_metadata_array *md,
                               const uint8_t *b, size_t n, rd_reply_t *r) {
  Replayd__V1__ExportProfilesRequest *q =
      replayd__v1__export_profiles_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable ExportProfilesRequest");
    return;
  }
  replayd__v1__export_profiles_request__free_unpacked(q, NULL);
  if (!admin_only(ctx, md, "ExportProfiles", r)) return;
  char *buf = NULL;
  size_t len = 0, count = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory exporting profiles");
    return;
  }
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_export_profiles(ctx->store, f, &count, &err);
  if (fclose(f) != 0 && rc == RD_OK)
    rc = rd_error_set(&err, RD_ENOMEM, "out of memory exporting profiles");
  if (rc) {
    fail(r, store_status(rc), "%s", err.msg);
  } else if (len + 64 > ctx->config->max_message_bytes) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "the export is %zu bytes, more than the message "
         "limit %u", len, ctx->config->max_message_bytes);
  } else {
    Replayd__V1__ExportProfilesResponse m = REPLAYD__V1__EXPORT_PROFILES_RESPONSE__INIT;
    m.jsonl.data = (uint8_t *)buf;
    m.jsonl.len = len;
    m.count = count;
    pack(r, &m.base);
  }
  free(buf);
}

/* Parse a plan's assumed GPU profiles: JSON lines, bounded. */
static int parse_gpu_rows(const ProtobufCBinaryData *d, rd_profile_t **out, size_t *n,
                          rd_reply_t *r) {
  *out = NULL;
  *n = 0;
  if (d->len == 0) return 0;
  if (d->len > RD_PLAN_GPU_MAX_BYTES) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "gpu_profiles is %zu bytes; at most %u",
         d->len, RD_PLAN_GPU_MAX_BYTES);
    return -1;
  }
  rd_profile_t *rows = calloc(RD_PLACEMENT_MAX_GPU_ROWS, sizeof *rows);
  if (rows == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the GPU profiles");
    return -1;
  }
  const char *p = (const char *)d->data, *end = p + d->len;
  size_t line = 0, k = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    line++;
    int blank = 1;
    for (size_t i = 0; i < len; i++)
      if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') blank = 0;
    if (!blank) {
      rd_error_t err;
      rd_error_clear(&err);
      if (k == RD_PLACEMENT_MAX_GPU_ROWS) {
        fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "gpu_profiles has more than %d lines",
             RD_PLACEMENT_MAX_GPU_ROWS);
        free(rows);
        return -1;
      }
      if (rd_profile_jsonl_parse(p, len, &rows[k], &err) != RD_OK) {
        fail(r, GRPC_STATUS_INVALID_ARGUMENT, "gpu_profiles line %zu: %s", line, err.msg);
        free(rows);
        return -1;
      }
      if (strncmp(rows[k].device_fp, "gpu-", 4) != 0) {
        fail(r, GRPC_STATUS_INVALID_ARGUMENT, "gpu_profiles line %zu: device \"%s\" is not a "
             "GPU (\"gpu-...\")", line, rows[k].device_fp);
        free(rows);
        return -1;
      }
      k++;
    }
    p += len + (nl ? 1 : 0);
  }
  if (k == 0) {
    free(rows);
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "gpu_profiles has no profile lines");
    return -1;
  }
  *out = rows;
  *n = k;
  return 0;
}

/* Plan profiles the devices for a spec and stores what it measured, so it
 * is an operator's call (admin token), like the profile RPCs: otherwise
 * any client could make the server measure and store without bound. */
static void do_plan(rd_handler_ctx_t *ctx, const grpc_metadata_array *md, const uint8_t *b,
                    size_t n, rd_reply_t *r) {
  Replayd__V1__PlanRequest *q = replayd__v1__plan_request__unpack(NULL, n, b);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request is not a decodable replayd.v1.PlanRequest");
    return;
  }
  if (!admin_token_required(ctx, md, "Plan", r)) {
    replayd__v1__plan_request__free_unpacked(q, NULL);
    return;
  }
  rd_profile_t *gpu = NULL;
  size_t n_gpu = 0;
  rd_fpga_part_t part;
  rd_placement_t *pl = NULL;
  rd_error_t err;
  rd_error_clear(&err);
  if (q->spec == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "a plan needs a spec");
    goto out;
  }
  rd_table_config_t tc;
  rd_pipeline_config_t pc;
  int has_learner = 0;
  int rc = rd_registry_spec_config(ctx->registry, q->spec, &tc, &pc, &has_learner, &err);
  if (rc) {
    fail(r, registry_status(rc), "%s", err.msg);
    goto out;
  }
  if (!has_learner) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "a plan maps a hosted learner: the spec needs a "
         "learner section");
    goto out;
  }
  if (q->fpga_part[0] != '\0') {
    if (strlen(q->fpga_part) >= RD_FPGA_NAME_MAX) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "fpga_part is longer than %d bytes",
           RD_FPGA_NAME_MAX - 1);
      goto out;
    }
    rc = rd_fpga_provider_part(q->fpga_part, parts_dir(ctx), &part, &err);
    if (rc) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "fpga_part: %s", err.msg);
      goto out;
    }
  }
  if (parse_gpu_rows(&q->gpu_profiles, &gpu, &n_gpu, r) != 0) goto out;
  pl = malloc(sizeof *pl);
  if (pl == NULL) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the plan");
    goto out;
  }
  rd_placement_assume_t as = {gpu, n_gpu, q->fpga_part[0] ? &part : NULL, q->ignore_present, 0};
  rc = place(ctx, &tc, &pc, &as, pl, &err);
  if (rc) {
    fail(r, registry_status(rc), "%s", err.msg);
    goto out;
  }
  placement_msg_t pm;
  placement_msg(pl, 0, &pm);
  Replayd__V1__PlanResponse m = REPLAYD__V1__PLAN_RESPONSE__INIT;
  m.placement = &pm.msg;
  pack(r, &m.base);
  rd_log_info("mapper", "plan: %s (gpu %s, fpga %s); profile cache %s, %.0f ms", pl->note,
              n_gpu ? "assumed" : "as present", q->fpga_part[0] ? q->fpga_part : "as present",
              pl->cache_hit ? "hit" : "miss", pl->register_ms);
out:
  free(pl);
  free(gpu);
  replayd__v1__plan_request__free_unpacked(q, NULL);
}

void rd_handle_unary(rd_handler_ctx_t *ctx, rd_method_t m, const grpc_metadata_array *md,
                     const uint8_t *body, size_t len, rd_reply_t *out) {
  static const uint8_t empty[1];
  if (body == NULL) body = empty; /* an empty message is valid protobuf */
  if ((unsigned)m < RD_M_COUNT && !request_strings_ok(m, body, len, out)) return;
  switch (m) {
  case RD_M_REGISTER: do_register(ctx, body, len, out); break;
  case RD_M_DESCRIBE: do_describe(ctx, body, len, out); break;
  case RD_M_LIST: do_list(ctx, body, len, out, 0); break;
  case RD_M_SERVER_INFO: do_list(ctx, body, len, out, 1); break;
  case RD_M_DELETE: do_delete(ctx, md, body, len, out); break;
  case RD_M_INSERT_BATCH: do_insert_batch(ctx, md, body, len, out); break;
  case RD_M_SAMPLE: do_sample(ctx, md, body, len, out); break;
  case RD_M_UPDATE: do_update(ctx, md, body, len, out); break;
  case RD_M_GET_WEIGHTS: do_get_weights(ctx, md, body, len, out); break;
  case RD_M_LIST_DEVICES: do_list_devices(body, len, out); break;
  case RD_M_PLAN: do_plan(ctx, md, body, len, out); break;
  case RD_M_LIST_PROFILES: do_list_profiles(ctx, md, body, len, out); break;
  case RD_M_CLEAR_PROFILES: do_clear_profiles(ctx, md, body, len, out); break;
  case RD_M_IMPORT_PROFILES: do_import_profiles(ctx, md, body, len, out); break;
  case RD_M_EXPORT_PROFILES: do_export_profiles(ctx, md, body, len, out); break;
  default:
    fail(out, GRPC_STATUS_UNIMPLEMENTED, "method %d is not served", (int)m);
  }
  /* Every reply within the message limit: one that a handler's own bound
   * let through is this clear error rather than gRPC's "Sent message
   * larger than max". */
  if (out->status == GRPC_STATUS_OK && out->reply != NULL &&
      grpc_byte_buffer_length(out->reply) > ctx->config->max_message_bytes) {
    size_t bytes = grpc_byte_buffer_length(out->reply);
    grpc_byte_buffer_destroy(out->reply);
    out->reply = NULL;
    fail(out, GRPC_STATUS_RESOURCE_EXHAUSTED, "the reply to %s is %zu bytes, more than this "
         "server's message limit of %u bytes (--max-message-bytes)", method_paths[m], bytes,
         ctx->config->max_message_bytes);
  }
}
