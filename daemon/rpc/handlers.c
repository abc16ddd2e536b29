/* handlers.c - the RPCs of replayd.v1.Replay: the method table and what
 * each method does.
 *
 * rd_handle decodes a request once for every method (its request type in
 * replayd.proto) and authorizes it as the table's row says (auth.h: the
 * admin's token, or the token of the workload it names, which the handler
 * then gets); a handler checks what else it needs, calls core and packs
 * the reply, or answers core's error through status.h. Memory a call
 * allocates is bounded by max_batch rows, itself bounded by the gRPC
 * message size limit.
 */
#include "handlers.h"

#include <grpc/byte_buffer.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "devices.h"
#include "durability.h"
#include "listing.h"
#include "log.h"
#include "messages.h"
#include "paging.h"
#include "pb_check.h"
#include "placer.h"
#include "plan.h"
#include "rd_clock.h"
#include "rpc_stats.h"
#include "rate_limit.h"
#include "sample_reply.h"
#include "spec_pb.h"
#include "tenant_rpc.h"

/* A decoded request, as a handler gets it. */
typedef struct {
  rd_handler_ctx_t *ctx;
  const rd_call_info_t *ci;
  const void *msg; /* the method's request type, unpacked */
  /* An OWNER method's: the workload the request names, which the call's
   * token opens. rd_handle lets it go once the handler returns, unless
   * the handler takes it (sets w to NULL: a TrainStep answered later). */
  rd_workload_t *w;
} request_t;

typedef rd_reply_when_t (*handler_fn)(request_t *q, rd_reply_t *r);

#define HANDLER(name) static rd_reply_when_t name(request_t *q, rd_reply_t *r)
HANDLER(h_register);
HANDLER(h_describe);
HANDLER(h_list);
HANDLER(h_delete);
HANDLER(h_insert);
HANDLER(h_insert_batch);
HANDLER(h_sample);
HANDLER(h_update);
HANDLER(h_train_step);
HANDLER(h_get_weights);
HANDLER(h_server_info);
HANDLER(h_list_devices);
HANDLER(h_plan);
HANDLER(h_list_profiles);
HANDLER(h_clear_profiles);
HANDLER(h_import_profiles);
HANDLER(h_export_profiles);
HANDLER(h_checkpoint);
HANDLER(h_export_workload);
HANDLER(h_import_workload);
HANDLER(h_set_rate_limiter);
HANDLER(h_add_tenant);
HANDLER(h_set_tenant);
HANDLER(h_list_tenants);
HANDLER(h_remove_tenant);
HANDLER(h_export_stream);

#define SERVICE "/replayd.v1.Replay/"
#define M(method) SERVICE method

/* Who may call a method and what the call needs, as rd_handle checks it
 * once the request decodes (a handler checks whatever else it needs). */
typedef enum {
  IN_HANDLER = 0, /* nothing here: the handler checks what its method needs, if anything */
  ADMIN,       /* the server's admin token (rd_auth_admin) */
  ADMIN_STORE, /* ADMIN, and a profile store to work on (the profile RPCs) */
  OWNER,       /* the request's workload_id, opened by its token (rd_auth_workload): q->w */
  LEARNER,     /* OWNER, of a workload that hosts a learner (rd_workload_learner) */
} who_t;

/* One row per method: its path, where it runs, who may call it and its
 * handler. Its request type is the .proto's (request_type). */
static const struct {
  const char *path;
  rd_run_t run;
  who_t who;
  handler_fn handle;
} methods[RD_M_COUNT] = {
    [RD_M_REGISTER] = {M("RegisterWorkload"), RD_RUN_PLACEMENT, IN_HANDLER, h_register},
    [RD_M_DESCRIBE] = {M("DescribeWorkload"), RD_RUN_INLINE, IN_HANDLER, h_describe},
    [RD_M_LIST] = {M("ListWorkloads"), RD_RUN_INLINE, IN_HANDLER, h_list},
    [RD_M_DELETE] = {M("DeleteWorkload"), RD_RUN_CONTROL, IN_HANDLER, h_delete},
    [RD_M_INSERT] = {M("Insert"), RD_RUN_INGEST, IN_HANDLER, h_insert},
    [RD_M_INSERT_BATCH] = {M("InsertBatch"), RD_RUN_INGEST, OWNER, h_insert_batch},
    [RD_M_SAMPLE] = {M("Sample"), RD_RUN_INLINE, OWNER, h_sample},
    [RD_M_UPDATE] = {M("UpdatePriorities"), RD_RUN_INLINE, OWNER, h_update},
    [RD_M_TRAIN_STEP] = {M("TrainStep"), RD_RUN_TRAIN, LEARNER, h_train_step},
    [RD_M_GET_WEIGHTS] = {M("GetWeights"), RD_RUN_INLINE, LEARNER, h_get_weights},
    [RD_M_SERVER_INFO] = {M("ServerInfo"), RD_RUN_INLINE, IN_HANDLER, h_server_info},
    [RD_M_LIST_DEVICES] = {M("ListDevices"), RD_RUN_INLINE, IN_HANDLER, h_list_devices},
    /* Plan and the profile RPCs measure and store: an operator's calls. */
    [RD_M_PLAN] = {M("Plan"), RD_RUN_PLACEMENT, ADMIN, h_plan},
    [RD_M_LIST_PROFILES] = {M("ListProfiles"), RD_RUN_CONTROL, ADMIN_STORE, h_list_profiles},
    [RD_M_CLEAR_PROFILES] = {M("ClearProfiles"), RD_RUN_CONTROL, ADMIN_STORE, h_clear_profiles},
    [RD_M_IMPORT_PROFILES] = {M("ImportProfiles"), RD_RUN_CONTROL, ADMIN_STORE, h_import_profiles},
    [RD_M_EXPORT_PROFILES] = {M("ExportProfiles"), RD_RUN_CONTROL, ADMIN_STORE, h_export_profiles},
    /* Durability (durability.h): writes that take as long as the table is
     * large; an import may place a learner. */
    [RD_M_CHECKPOINT] = {M("Checkpoint"), RD_RUN_CONTROL, IN_HANDLER, h_checkpoint},
    [RD_M_EXPORT_WORKLOAD] = {M("ExportWorkload"), RD_RUN_CONTROL, IN_HANDLER, h_export_workload},
    [RD_M_IMPORT_WORKLOAD] = {M("ImportWorkload"), RD_RUN_PLACEMENT, IN_HANDLER, h_import_workload},
    [RD_M_SET_RATE_LIMITER] = {M("SetRateLimiter"), RD_RUN_CONTROL, OWNER, h_set_rate_limiter},
    /* A stream of its own (server.c, sample_stream.h); rd_handle never runs it. */
    [RD_M_SAMPLE_STREAM] = {M("SampleStream"), RD_RUN_INLINE, IN_HANDLER, NULL},
    [RD_M_ADD_TENANT] = {M("AddTenant"), RD_RUN_CONTROL, ADMIN, h_add_tenant},
    [RD_M_SET_TENANT] = {M("SetTenant"), RD_RUN_CONTROL, ADMIN, h_set_tenant},
    [RD_M_LIST_TENANTS] = {M("ListTenants"), RD_RUN_INLINE, ADMIN, h_list_tenants},
    [RD_M_REMOVE_TENANT] = {M("RemoveTenant"), RD_RUN_CONTROL, ADMIN, h_remove_tenant},
    /* Streams of their own (server.c, durability.h): the export's request
     * writes the file; the import's messages and end do not run here. */
    [RD_M_EXPORT_STREAM] = {M("ExportStream"), RD_RUN_CONTROL, IN_HANDLER, h_export_stream},
    [RD_M_IMPORT_STREAM] = {M("ImportStream"), RD_RUN_CONTROL, IN_HANDLER, NULL},
};

const char *rd_method_path(rd_method_t m) { return methods[m].path; }
rd_run_t rd_method_run(rd_method_t m) { return methods[m].run; }

/* "RegisterWorkload", ...: the method's name in the service. */
static const char *method_name(rd_method_t m) { return methods[m].path + strlen(SERVICE); }

/* What the descriptors say of each method, looked up once (every call
 * needs it): its request type as replayd.proto declares it (NULL: a name
 * the service does not have) and that type's workload_id field (NULL:
 * none; every OWNER method's request has one). */
static struct {
  const ProtobufCMessageDescriptor *request;
  const ProtobufCFieldDescriptor *workload_id;
} resolved[RD_M_COUNT];
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve(void) {
  for (int m = 0; m < RD_M_COUNT; m++) {
    const ProtobufCMethodDescriptor *d =
        protobuf_c_service_descriptor_get_method_by_name(&replayd__v1__replay__descriptor,
                                                         method_name((rd_method_t)m));
    resolved[m].request = d != NULL ? d->input : NULL;
    if (d != NULL)
      resolved[m].workload_id =
          protobuf_c_message_descriptor_get_field_by_name(d->input, "workload_id");
  }
}

static const ProtobufCMessageDescriptor *request_type(rd_method_t m) {
  pthread_once(&resolve_once, resolve);
  return resolved[m].request;
}

/* ------------------------------------------------------------------ */
/* One decode, one bound on replies                                   */
/* ------------------------------------------------------------------ */

/* A request of type desc, unpacked; NULL with r failed if its strings
 * are not whole (pb_check.h) or it does not decode. */
static ProtobufCMessage *decode(const ProtobufCMessageDescriptor *desc, const rd_call_info_t *ci,
                                const uint8_t *b, size_t n, rd_reply_t *r) {
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_pb_check(desc, b, n, &err) != RD_OK) {
    rd_reply_error(r, err.code, "%s", err.msg);
    return NULL;
  }
  ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, n, b);
  if (msg == NULL && ci->stream != NULL)
    rd_reply_error(r, RD_EINVAL, "stream message %llu is not a decodable %s",
                   (unsigned long long)ci->stream->messages, desc->name);
  else if (msg == NULL)
    rd_reply_error(r, RD_EINVAL, "request is not a decodable %s", desc->name);
  return msg;
}

/* Method m's request's workload_id (resolve). */
static const char *workload_id(rd_method_t m, const void *msg) {
  const ProtobufCFieldDescriptor *f = resolved[m].workload_id;
  return f != NULL ? *(char *const *)((const char *)msg + f->offset) : NULL;
}

/* 1 if the call may run method m's handler; otherwise 0 with r failed. An
 * admin's method is refused under the name the service gives it. */
static int authorized(request_t *q, rd_method_t m, rd_reply_t *r) {
  switch (methods[m].who) {
  case ADMIN:
    return rd_auth_admin(q->ctx, q->ci->md, method_name(m), r);
  case ADMIN_STORE:
    if (!rd_auth_admin(q->ctx, q->ci->md, method_name(m), r)) return 0;
    if (q->ctx->store != NULL) return 1;
    rd_reply_error(r, RD_ESTATE, "this server keeps no profile store");
    return 0;
  case OWNER:
  case LEARNER:
    q->w = rd_auth_workload(q->ctx, q->ci->md, workload_id(m, q->msg), 0, r);
    if (q->w == NULL) return 0;
    break;
  default:
    return 1;
  }
  rd_error_t err; /* q->w's: a LEARNER method's needs its learner */
  rd_error_clear(&err);
  if (methods[m].who == OWNER || rd_workload_learner(q->w, &err) == RD_OK) return 1;
  rd_reply_error(r, err.code, "%s", err.msg);
  return 0;
}

static rd_reply_when_t handle(rd_handler_ctx_t *ctx, rd_method_t m, const rd_call_info_t *ci,
                              const uint8_t *body, size_t len, rd_reply_t *out) {
  static const uint8_t empty[1];
  const ProtobufCMessageDescriptor *desc = NULL;
  if (body == NULL) body = empty; /* an empty message is valid protobuf */
  if ((unsigned)m >= RD_M_COUNT || (m == RD_M_INSERT) != (ci->stream != NULL) ||
      methods[m].handle == NULL || (desc = request_type(m)) == NULL) {
    rd_reply_status(out, GRPC_STATUS_UNIMPLEMENTED, "method %d is not served", (int)m);
    return RD_REPLY_NOW;
  }
  ProtobufCMessage *msg = decode(desc, ci, body, len, out);
  if (msg == NULL) return RD_REPLY_NOW;
  request_t q = {ctx, ci, msg, NULL};
  rd_reply_when_t when = RD_REPLY_NOW;
  if (authorized(&q, m, out)) when = methods[m].handle(&q, out);
  if (q.w != NULL) rd_workload_unref(q.w);
  protobuf_c_message_free_unpacked(msg, NULL);
  /* Every reply within the message limit: one that a handler's own bound
   * let through is this clear error rather than gRPC's "Sent message
   * larger than max". */
  size_t bytes = out->reply != NULL ? grpc_byte_buffer_length(out->reply) : 0;
  if (when == RD_REPLY_NOW && bytes > ctx->config->max_message_bytes)
    rd_reply_error(out, RD_ETOOBIG, "the reply to %s is %zu bytes, more than this server's "
                   "message limit of %u bytes (--max-message-bytes)", methods[m].path, bytes,
                   ctx->config->max_message_bytes);
  return when;
}

/* With metrics on (rpc_stats.h), each call's time in its handler and its
 * status: a unary call's, each Insert stream message's, a TrainStep's when
 * train_reply answers it. */
rd_reply_when_t rd_handle(rd_handler_ctx_t *ctx, rd_method_t m, const rd_call_info_t *ci,
                          const uint8_t *body, size_t len, rd_reply_t *out) {
  if (!rd_rpc_stats_enabled()) return handle(ctx, m, ci, body, len, out);
  double t0 = rd_clock_now();
  rd_reply_when_t when = handle(ctx, m, ci, body, len, out);
  if (when != RD_REPLY_LATER)
    rd_rpc_stats_observe((int)m, rd_clock_now() - t0,
                         when == RD_REPLY_MORE ? GRPC_STATUS_OK : (int)out->status);
  return when;
}

/* ------------------------------------------------------------------ */
/* Workloads                                                           */
/* ------------------------------------------------------------------ */

/* A placement for wc (placer.h) into *out (malloc'd). */
static int place(rd_handler_ctx_t *ctx, const rd_workload_config_t *wc,
                 const rd_placement_assume_t *assume, rd_placement_t **out, rd_error_t *err) {
  *out = malloc(sizeof **out);
  if (*out == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the placement");
  rd_placer_t placer = {ctx->registry, ctx->store, ctx->config};
  int rc = rd_place(&placer, &wc->table, &wc->learner, assume, *out, err);
  if (rc) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

/* A registration's logs: what was registered and, with a learner, where
 * it runs (the note of what runs now: a learner may have failed at start). */
static void log_registered(const rd_workload_t *w, const rd_workload_msg_t *o) {
  rd_log_info("registry", "registered workload %s (\"%s\", capacity %u, %u fields, replay "
              "module %s)", w->id, w->name, w->table.config.capacity,
              w->table.config.schema.n_fields, rd_table_rmm_name(&w->table));
  const rd_placement_t *pl = &o->placement.copy; /* read under its lock */
  if (o->msg.placement != NULL)
    rd_log_info("mapper", "workload %s: %s; profile cache %s (%u measured), %.0f ms; "
                "predicted %.4g GPS", w->id, o->msg.placement->note,
                pl->cache_hit ? "hit" : "miss", pl->profiles_measured, pl->register_ms,
                pl->mapped ? pl->mapping.gps : 0.0);
}

/* Validate first (nothing is profiled for a bad spec), then profile and
 * map (placement.h: at most RD_PROFILE_DEFAULT_BUDGET_S of measuring),
 * then register with the placement. */
HANDLER(h_register) {
  rd_handler_ctx_t *ctx = q->ctx;
  rd_error_t err;
  rd_error_clear(&err);
  rd_spec_pb_t s;
  rd_placement_t *pl = NULL;
  rd_workload_t *w = NULL;
  Replayd__V1__WorkloadSpec *echo = NULL; /* the reply's spec, before anything changes */
  rd_caller_t who; /* the owner: the caller's tenant */
  rd_auth_caller(ctx, q->ci->md, &who);
  int rc = rd_spec_pb_decode(ctx->config, q->msg, &s, &err);
  if (rc == RD_OK && (echo = rd_spec_pb_stored(s.stored, s.stored_len)) == NULL)
    rc = rd_error_set(&err, RD_ENOMEM, "out of memory for the reply");
  /* Admitted before it is profiled: a refusal costs no measuring. */
  if (rc == RD_OK) rc = rd_registry_admit(ctx->registry, who.tenant, &s.config, &err);
  if (rc == RD_OK && s.config.has_learner) rc = place(ctx, &s.config, NULL, &pl, &err);
  char token[RD_WORKLOAD_TOKEN_LEN + 1] = "";
  if (rc == RD_OK)
    rc = rd_registry_register_as(ctx->registry, who.tenant, &s.spec, pl, &w, token, &err);
  rd_caller_release(&who);
  rd_spec_pb_release(&s);
  free(pl);
  if (rc) {
    if (echo) replayd__v1__workload_spec__free_unpacked(echo, NULL);
    rd_reply_error(r, rc, "%s", err.msg);
    return RD_REPLY_NOW;
  }
  rd_workload_msg_t o;
  rd_workload_msg(&o, w, token, echo); /* takes echo, so cannot fail */
  rd_reply_pack(r, &o.msg.base);
  log_registered(w, &o);
  rd_workload_msg_free(&o);
  rd_workload_unref(w);
  rd_secret_wipe(token, sizeof token);
  return RD_REPLY_NOW;
}

HANDLER(h_describe) {
  const Replayd__V1__WorkloadRef *ref = q->msg;
  rd_workload_t *w = rd_registry_get(q->ctx->registry, ref->id);
  rd_caller_t who;
  rd_auth_caller(q->ctx, q->ci->md, &who);
  if (w != NULL && !rd_auth_sees(&who, q->ci->md, w)) { /* another tenant's: not there */
    rd_workload_unref(w);
    w = NULL;
  }
  rd_caller_release(&who);
  if (w == NULL) {
    rd_reply_error(r, RD_ENOTFOUND, "no workload with id \"%.64s\"", ref->id);
    return RD_REPLY_NOW;
  }
  rd_reply_workload(r, w);
  rd_workload_unref(w);
  return RD_REPLY_NOW;
}

void rd_reply_workload(rd_reply_t *r, rd_workload_t *w) {
  rd_workload_msg_t o;
  if (rd_workload_msg(&o, w, NULL, NULL) == RD_OK)
    rd_reply_pack(r, &o.msg.base);
  else
    rd_reply_error(r, RD_ENOMEM, "out of memory describing workload %s", w->id);
  rd_workload_msg_free(&o);
}

/* One page (listing.h: keyset by id, page_size, within the limit). */
HANDLER(h_list) {
  const Replayd__V1__ListWorkloadsRequest *m = q->msg;
  char after[RD_WORKLOAD_ID_LEN + 1] = "";
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_page_token_parse_workload(m->page_token, after, &err) != RD_OK) {
    rd_reply_error(r, RD_EINVAL, "%s", err.msg);
    return RD_REPLY_NOW;
  }
  uint32_t page = rd_page_size(m->page_size, RD_PAGE_WORKLOADS_DEFAULT, RD_PAGE_WORKLOADS_MAX);
  rd_caller_t who;
  rd_auth_caller(q->ctx, q->ci->md, &who);
  rd_list_workloads(q->ctx, who.admin ? NULL : who.tenant, after, page, 0, r);
  rd_caller_release(&who);
  return RD_REPLY_NOW;
}

/* The server's figures, its devices and the first page of workloads at
 * the default size, each cut to what fits (listing.h). */
HANDLER(h_server_info) {
  rd_caller_t who;
  rd_auth_caller(q->ctx, q->ci->md, &who);
  rd_list_workloads(q->ctx, who.admin ? NULL : who.tenant, "", RD_PAGE_WORKLOADS_DEFAULT, 1, r);
  rd_caller_release(&who);
  return RD_REPLY_NOW;
}

HANDLER(h_delete) {
  const Replayd__V1__WorkloadRef *ref = q->msg;
  rd_workload_t *w = rd_auth_workload(q->ctx, q->ci->md, ref->id, 1, r);
  if (w == NULL) return RD_REPLY_NOW;
  char id[RD_WORKLOAD_ID_LEN + 1];
  memcpy(id, w->id, sizeof id);
  rd_workload_unref(w);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_registry_delete(q->ctx->registry, id, &err);
  if (!rd_reply_ok(r, rc, &err)) return RD_REPLY_NOW;
  Replayd__V1__DeleteWorkloadResponse m = REPLAYD__V1__DELETE_WORKLOAD_RESPONSE__INIT;
  rd_reply_pack(r, &m.base);
  rd_log_info("registry", "deleted workload %s", id);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Data calls                                                          */
/* ------------------------------------------------------------------ */

/* m's rows as core's batch; cols has RD_SCHEMA_MAX_FIELDS slots (core
 * refuses a column count that is not the schema's before reading them). */
static void insert_batch(const Replayd__V1__InsertRequest *m, rd_cbuf_t *cols,
                         rd_insert_batch_t *b) {
  memset(b, 0, sizeof *b);
  if (m->rows == NULL) return;
  b->count = m->rows->count;
  b->n_cols = m->rows->n_columns;
  for (size_t f = 0; f < m->rows->n_columns && f < RD_SCHEMA_MAX_FIELDS; f++) {
    cols[f].data = m->rows->columns[f].data;
    cols[f].bytes = m->rows->columns[f].len;
  }
  b->cols = cols;
  b->priorities = m->priorities;
  b->n_priorities = m->n_priorities;
}

/* The call's wait for a rate limiter (workload.h "Flow control"): none
 * when the request asks to fail fast or the call cannot wait. The call
 * refers to w while it may wait. */
static rd_limiter_wait_t *flow_wait(const request_t *q, rd_workload_t *w, int fail_fast) {
  if (fail_fast || q->ci->wait == NULL) return NULL;
  rd_call_wait_on(q->ci->call, w);
  return q->ci->wait;
}

/* The keys an InsertBatch of count rows answers (up to 10 bytes each in the
 * reply): a batch whose keys could not all be sent back is refused before
 * anything is inserted; *keys is allocated only for a batch w can take
 * (NULL otherwise: the insert then names what is wrong). */
static int batch_keys(const rd_config_t *cfg, const rd_workload_t *w, uint32_t count,
                      uint64_t **keys, rd_error_t *err) {
  if ((uint64_t)count * 10 + RD_REPLY_HEADROOM > cfg->max_message_bytes)
    return rd_error_set(err, RD_ETOOBIG, "an InsertBatch of %u rows answers %u keys, which "
                        "could exceed this server's message limit of %u bytes: send at most %u "
                        "rows per call, or use the Insert stream", count, count,
                        cfg->max_message_bytes, (cfg->max_message_bytes - RD_REPLY_HEADROOM) / 10);
  if (count > 0 && count <= w->max_batch && !(*keys = malloc(count * sizeof **keys)))
    return rd_error_set(err, RD_ENOMEM, "out of memory");
  return RD_OK;
}

HANDLER(h_insert_batch) {
  const Replayd__V1__InsertRequest *m = q->msg;
  rd_workload_t *w = q->w;
  rd_insert_batch_t b;
  rd_cbuf_t cols[RD_SCHEMA_MAX_FIELDS];
  insert_batch(m, cols, &b);
  uint64_t *keys = NULL; /* the reply lists every new key */
  rd_error_t err;
  rd_error_clear(&err);
  int rc = batch_keys(q->ctx->config, w, b.count, &keys, &err);
  /* The owner's insert rate (tenant.h); given back if the call does not
   * insert now (it fails, or waits for the rate limiter and runs again). */
  if (rc == RD_OK && !rd_tenant_rpc_rows(w, RD_TENANT_INSERT, b.count, r)) {
    free(keys);
    return RD_REPLY_NOW;
  }
  uint64_t lsn = 0;
  if (rc == RD_OK &&
      (rc = rd_workload_insert_wait(w, &b, flow_wait(q, w, m->fail_fast), keys, NULL, &lsn,
                                    &err)) != RD_OK)
    rd_tenant_rpc_rows_back(w, RD_TENANT_INSERT, b.count);
  if (rc == RD_LIMIT_QUEUED) { /* runs again when the limiter lets it */
    free(keys);
    return RD_REPLY_PARKED;
  }
  if (rc == RD_OK) {
    Replayd__V1__InsertResponse reply = REPLAYD__V1__INSERT_RESPONSE__INIT;
    reply.n_keys = b.count;
    reply.keys = keys;
    reply.inserted = b.count;
    reply.first_key = keys[0];
    rd_reply_pack(r, &reply.base);
  } else {
    rd_reply_error(r, rc, "%s", err.msg);
  }
  free(keys);
  /* Journal mode: answered once its record is on disk (durability.h). */
  return rd_ack_when_durable(w, lsn, q->ci->call, r);
}

/* One message of an Insert stream: the first one names the workload. */
HANDLER(h_insert) {
  const Replayd__V1__InsertRequest *m = q->msg;
  rd_insert_stream_t *st = q->ci->stream;
  if (st->workload == NULL) {
    st->workload = rd_auth_workload(q->ctx, q->ci->md, m->workload_id, 0, r);
    if (st->workload == NULL) return RD_REPLY_NOW;
  } else if (m->workload_id[0] != '\0' && strcmp(m->workload_id, st->workload->id) != 0) {
    rd_reply_error(r, RD_EINVAL, "one Insert stream serves one workload (%s, not %.64s)",
                   st->workload->id, m->workload_id);
    return RD_REPLY_NOW;
  }
  rd_insert_batch_t b;
  rd_cbuf_t cols[RD_SCHEMA_MAX_FIELDS];
  insert_batch(m, cols, &b);
  if (!rd_tenant_rpc_rows(st->workload, RD_TENANT_INSERT, b.count, r)) return RD_REPLY_NOW;
  uint64_t first = 0, lsn = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_workload_insert_wait(st->workload, &b, flow_wait(q, st->workload, m->fail_fast),
                                   NULL, &first, &lsn, &err);
  if (rc != RD_OK) rd_tenant_rpc_rows_back(st->workload, RD_TENANT_INSERT, b.count);
  if (rc == RD_LIMIT_QUEUED) return RD_REPLY_PARKED; /* this message again, later */
  if (!rd_reply_ok(r, rc, &err)) return RD_REPLY_NOW;
  if (lsn > st->lsn) st->lsn = lsn;
  if (st->messages == 0) st->first_key = first;
  st->inserted += b.count;
  st->messages++;
  return RD_REPLY_MORE;
}

rd_reply_when_t rd_handle_insert_end(const rd_insert_stream_t *st, void *call, rd_reply_t *out) {
  Replayd__V1__InsertResponse m = REPLAYD__V1__INSERT_RESPONSE__INIT;
  m.inserted = st->inserted;
  m.first_key = st->first_key;
  rd_reply_pack(out, &m.base);
  /* Journal mode: OK only once every message's record is on disk. */
  return st->workload != NULL ? rd_ack_when_durable(st->workload, st->lsn, call, out)
                              : RD_REPLY_NOW;
}

void rd_insert_stream_release(rd_insert_stream_t *st) {
  if (st->workload != NULL) rd_workload_unref(st->workload);
  st->workload = NULL;
}

/* The rows go from the table straight into the reply (sample_reply.h). */
HANDLER(h_sample) {
  const Replayd__V1__SampleRequest *m = q->msg;
  rd_workload_t *w = q->w;
  rd_sample_request_t sq = {m->batch_size,
                            m->beta_opt_case == REPLAYD__V1__SAMPLE_REQUEST__BETA_OPT_BETA,
                            m->beta, m->stratified ? RD_SAMPLE_STRATIFIED : 0};
  if (!rd_tenant_rpc_rows(w, RD_TENANT_SAMPLE, m->batch_size, r)) return RD_REPLY_NOW;
  rd_sample_reply_t reply;
  memset(&reply, 0, sizeof reply);
  uint64_t size = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_workload_sample_wait(w, &sq, rd_sample_reply_alloc, &reply, &size,
                                   flow_wait(q, w, m->fail_fast), &err);
  if (rc != RD_OK) rd_tenant_rpc_rows_back(w, RD_TENANT_SAMPLE, m->batch_size);
  if (rc == RD_LIMIT_QUEUED) { /* runs again when the limiter lets it */
    rd_sample_reply_free(&reply);
    return RD_REPLY_PARKED;
  }
  if (rc == RD_OK)
    rd_reply_buffer(r, rd_sample_reply_finish(&reply, size, m->keys_fixed64));
  else
    rd_reply_error(r, rc, "%s", err.msg);
  rd_sample_reply_free(&reply);
  return RD_REPLY_NOW;
}

HANDLER(h_update) {
  const Replayd__V1__UpdatePrioritiesRequest *m = q->msg;
  rd_workload_t *w = q->w;
  size_t stale = 0;
  uint64_t lsn = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_workload_update_lsn(w, m->n_keys, m->keys, m->n_priorities, m->priorities, &stale,
                                  &lsn, &err);
  if (rc == RD_OK) {
    Replayd__V1__UpdatePrioritiesResponse reply = REPLAYD__V1__UPDATE_PRIORITIES_RESPONSE__INIT;
    reply.applied = m->n_keys - stale;
    reply.stale = stale;
    rd_reply_pack(r, &reply.base);
  } else {
    rd_reply_error(r, rc, "%s", err.msg);
  }
  return rd_ack_when_durable(w, lsn, q->ci->call, r);
}

/* The owner changes the rate limiter (rate_limit.h). */
HANDLER(h_set_rate_limiter) {
  const Replayd__V1__SetRateLimiterRequest *m = q->msg;
  rd_set_rate_limiter(q->ctx, q->w, m->rate_limiter, r);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Hosted learning                                                     */
/* ------------------------------------------------------------------ */

/* A TrainStep in progress: the workload it holds and the call to answer. */
typedef struct {
  rd_workload_t *w;
  void *call;
  uint32_t steps;
  double t0; /* rd_clock_now at the start, for rpc_stats */
} train_call_t;

/* The one callback of a TrainStep: the pipeline ended the request (on one
 * of its threads, or on the thread that stopped it). Answer the call,
 * then let the workload go. */
static void train_reply(void *arg, const rd_train_result_t *res) {
  train_call_t *tc = arg;
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  Replayd__V1__TrainStepResponse m = REPLAYD__V1__TRAIN_STEP_RESPONSE__INIT;
  switch (res->status) {
  case RD_OK:
    m.steps_done = res->steps_done;
    m.loss_mean = res->loss_mean;
    m.td_abs_mean = res->td_abs_mean;
    m.td_abs_max = res->td_abs_max;
    m.weight_version = res->weight_version;
    m.steps_per_second = res->steps_per_second;
    m.skipped_steps = res->skipped_steps;
    rd_reply_pack(&r, &m.base);
    break;
  case RD_ETIMEDOUT:
    rd_reply_error(&r, RD_ETIMEDOUT, "the deadline passed after %u of %u steps (weight version "
                   "%llu); the steps done stay done", res->steps_done, tc->steps,
                   (unsigned long long)res->weight_version);
    break;
  case RD_ECANCELED:
    rd_reply_error(&r, RD_ECANCELED, "%s; %u of %u steps were done", res->message,
                   res->steps_done, tc->steps);
    break;
  default: /* the learner could not go on: the workload's state, not the request */
    rd_reply_error(&r, RD_ESTATE, "%s; %u of %u steps were done", res->message,
                   res->steps_done, tc->steps);
  }
  if (rd_rpc_stats_enabled())
    rd_rpc_stats_observe(RD_M_TRAIN_STEP, rd_clock_now() - tc->t0, (int)r.status);
  rd_call_reply(tc->call, &r);
  rd_workload_unref(tc->w);
  free(tc);
}

/* Training takes as long as it takes: the handler starts it, and
 * train_reply answers from the pipeline's thread. */
HANDLER(h_train_step) {
  const Replayd__V1__TrainStepRequest *m = q->msg;
  train_call_t *tc = malloc(sizeof *tc);
  if (tc == NULL) {
    rd_reply_error(r, RD_ENOMEM, "out of memory");
    return RD_REPLY_NOW;
  }
  *tc = (train_call_t){q->w, q->ci->call, m->steps, rd_clock_now()};
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_workload_train(q->w, m->steps, q->ci->deadline, train_reply, tc, &err);
  if (rc != RD_OK) {
    free(tc);
    rd_reply_error(r, rc, "%s", err.msg);
    return RD_REPLY_NOW;
  }
  q->w = NULL; /* train_reply answers and unrefs */
  return RD_REPLY_LATER;
}

HANDLER(h_get_weights) {
  const Replayd__V1__GetWeightsRequest *m = q->msg;
  rd_pipeline_t *pipe = q->w->pipeline;
  /* Bounded: registration refused policies above --max-message-bytes. */
  size_t cap = rd_pipeline_weights_bytes(pipe), len = 0;
  uint8_t *buf = malloc(cap + 1);
  uint64_t version = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = buf != NULL
               ? rd_pipeline_weights(pipe, m->have_version, buf, cap, &version, &len, &err)
               : rd_error_set(&err, RD_ENOMEM, "out of memory for %zu bytes of weights", cap);
  if (rc == RD_OK) {
    Replayd__V1__GetWeightsResponse reply = REPLAYD__V1__GET_WEIGHTS_RESPONSE__INIT;
    reply.version = version;
    reply.weights.data = buf;
    reply.weights.len = len;
    rd_reply_pack(r, &reply.base);
  } else {
    rd_reply_error(r, rc, "%s", err.msg);
  }
  free(buf);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Devices, plans and profiles                                         */
/* ------------------------------------------------------------------ */

HANDLER(h_list_devices) {
  (void)q;
  rd_device_t devs[RD_MAX_DEVICES];
  Replayd__V1__Device dm[RD_MAX_DEVICES], *dp[RD_MAX_DEVICES];
  size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
  for (size_t i = 0; i < nd; i++) {
    rd_device_msg(&dm[i], &devs[i]);
    dp[i] = &dm[i];
  }
  Replayd__V1__ListDevicesResponse m = REPLAYD__V1__LIST_DEVICES_RESPONSE__INIT;
  m.n_devices = nd;
  m.devices = dp;
  rd_reply_pack(r, &m.base);
  return RD_REPLY_NOW;
}

static void reply_plan(const rd_placement_t *pl, const Replayd__V1__PlanRequest *m,
                       const rd_plan_assume_t *a, rd_reply_t *r) {
  rd_placement_msg_t pm;
  rd_placement_msg(&pm, pl, 0);
  Replayd__V1__PlanResponse reply = REPLAYD__V1__PLAN_RESPONSE__INIT;
  reply.placement = &pm.msg;
  rd_reply_pack(r, &reply.base);
  rd_log_info("mapper", "plan: %s (gpu %s, fpga %s); profile cache %s, %.0f ms", pl->note,
              a->assume.n_gpu_rows ? "assumed" : "as present",
              m->fpga_part[0] ? m->fpga_part : "as present", pl->cache_hit ? "hit" : "miss",
              pl->register_ms);
}

/* Plan profiles the devices for a spec and stores what it measured, so it
 * is an operator's call (ADMIN in the table), like the profile RPCs:
 * otherwise any client could make the server measure and store without
 * bound. */
HANDLER(h_plan) {
  const Replayd__V1__PlanRequest *m = q->msg;
  const rd_config_t *cfg = q->ctx->config;
  if (m->spec == NULL) {
    rd_reply_error(r, RD_EINVAL, "a plan needs a spec");
    return RD_REPLY_NOW;
  }
  rd_error_t err;
  rd_error_clear(&err);
  rd_spec_pb_t s;
  rd_plan_assume_t a;
  memset(&a, 0, sizeof a);
  rd_placement_t *pl = NULL;
  int rc = rd_spec_pb_decode(cfg, m->spec, &s, &err);
  if (rc == RD_OK && !s.config.has_learner)
    rc = rd_error_set(&err, RD_EINVAL, "a plan maps a hosted learner: the spec needs a learner "
                      "section");
  if (rc)
    rd_reply_error(r, rc, "%s", err.msg);
  else if (rd_plan_assume(m, cfg->fpga_parts_dir[0] ? cfg->fpga_parts_dir : NULL, &a, r) != RD_OK)
    ; /* r says why */
  else if ((rc = place(q->ctx, &s.config, &a.assume, &pl, &err)) != RD_OK)
    rd_reply_error(r, rc, "%s", err.msg);
  else
    reply_plan(pl, m, &a, r);
  free(pl);
  rd_plan_assume_free(&a);
  rd_spec_pb_release(&s);
  return RD_REPLY_NOW;
}

/* One page (listing.h: keyset by the store's key, page_size, within the
 * limit). */
HANDLER(h_list_profiles) {
  const Replayd__V1__ListProfilesRequest *m = q->msg;
  uint32_t page = rd_page_size(m->page_size, RD_PAGE_PROFILES_DEFAULT, RD_PAGE_PROFILES_MAX);
  rd_profile_t after;
  int has_after = 0;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_page_token_parse_profile(m->page_token, &after, &has_after, &err) != RD_OK)
    rd_reply_error(r, RD_EINVAL, "%s", err.msg);
  else
    rd_list_profiles(q->ctx, has_after ? &after : NULL, page, r);
  return RD_REPLY_NOW;
}

/* The end of a call that changed n stored profiles: the change is logged
 * ("<done> n stored profiles") and reply packed. */
static rd_reply_when_t profiles_changed(rd_reply_t *r, const char *done, size_t n,
                                        const ProtobufCMessage *reply) {
  rd_log_info("profile", "%s %zu stored profiles", done, n);
  rd_reply_pack(r, reply);
  return RD_REPLY_NOW;
}

HANDLER(h_clear_profiles) {
  size_t removed = 0;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_store_clear_profiles(q->ctx->store, &removed, &err);
  if (!rd_reply_ok(r, rc, &err)) return RD_REPLY_NOW;
  Replayd__V1__ClearProfilesResponse m = REPLAYD__V1__CLEAR_PROFILES_RESPONSE__INIT;
  m.removed = removed;
  return profiles_changed(r, "cleared", removed, &m.base);
}

/* An import is all or nothing (store.h) and bounded. */
HANDLER(h_import_profiles) {
  const Replayd__V1__ImportProfilesRequest *m = q->msg;
  if (m->jsonl.len > RD_IMPORT_MAX_BYTES) {
    rd_reply_error(r, RD_ETOOBIG, "an import of %zu bytes exceeds the limit of %u bytes: split "
                   "the file", m->jsonl.len, RD_IMPORT_MAX_BYTES);
    return RD_REPLY_NOW;
  }
  size_t imported = 0;
  if (m->jsonl.len > 0) {
    FILE *f = fmemopen(m->jsonl.data, m->jsonl.len, "r");
    if (f == NULL) {
      rd_reply_error(r, RD_ENOMEM, "out of memory reading the import");
      return RD_REPLY_NOW;
    }
    rd_error_t err;
    rd_error_clear(&err);
    int rc = rd_store_import_profiles(q->ctx->store, f, &imported, &err);
    fclose(f);
    if (rc) {
      rd_reply_error(r, rc, "%s; nothing was imported", err.msg);
      return RD_REPLY_NOW;
    }
  }
  Replayd__V1__ImportProfilesResponse reply = REPLAYD__V1__IMPORT_PROFILES_RESPONSE__INIT;
  reply.imported = imported;
  return profiles_changed(r, "imported", imported, &reply.base);
}

HANDLER(h_export_profiles) {
  char *buf = NULL;
  size_t len = 0, count = 0;
  rd_error_t err;
  rd_error_clear(&err);
  FILE *f = open_memstream(&buf, &len);
  int rc = f != NULL ? rd_store_export_profiles(q->ctx->store, f, &count, &err)
                     : rd_error_set(&err, RD_ENOMEM, "out of memory exporting profiles");
  if (f != NULL && fclose(f) != 0 && rc == RD_OK)
    rc = rd_error_set(&err, RD_ENOMEM, "out of memory exporting profiles");
  if (rc) {
    rd_reply_error(r, rc, "%s", err.msg);
  } else if (len + 64 > q->ctx->config->max_message_bytes) {
    rd_reply_error(r, RD_ETOOBIG, "the export is %zu bytes, more than the message limit %u", len,
                   q->ctx->config->max_message_bytes);
  } else {
    Replayd__V1__ExportProfilesResponse m = REPLAYD__V1__EXPORT_PROFILES_RESPONSE__INIT;
    m.jsonl.data = (uint8_t *)buf;
    m.jsonl.len = len;
    m.count = count;
    rd_reply_pack(r, &m.base);
  }
  free(buf);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Durability (durability.c)                                           */
/* ------------------------------------------------------------------ */

HANDLER(h_checkpoint) { return rd_handle_checkpoint(q->ctx, q->ci, q->msg, r); }
HANDLER(h_export_workload) { return rd_handle_export(q->ctx, q->ci, q->msg, r); }
HANDLER(h_import_workload) { return rd_handle_import(q->ctx, q->ci, q->msg, r); }
HANDLER(h_export_stream) {
  if (q->ci->export_stream == NULL) {
    rd_reply_status(r, GRPC_STATUS_UNIMPLEMENTED, "ExportStream is a server stream");
    return RD_REPLY_NOW;
  }
  return rd_export_stream_open(q->ctx, q->ci, q->msg, q->ci->export_stream, r);
}

/* ------------------------------------------------------------------ */
/* Tenants (tenant_rpc.c)                                              */
/* ------------------------------------------------------------------ */

HANDLER(h_add_tenant) { return rd_tenant_rpc_add(q->ctx, q->msg, r); }
HANDLER(h_set_tenant) { return rd_tenant_rpc_set(q->ctx, q->msg, r); }
HANDLER(h_list_tenants) { return rd_tenant_rpc_list(q->ctx, r); }
HANDLER(h_remove_tenant) { return rd_tenant_rpc_remove(q->ctx, q->msg, r); }
