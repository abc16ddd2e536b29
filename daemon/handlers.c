/* handlers.c - the RPCs of replayd.v1.Replay.
 *
 * Each handler: decode (undecodable bytes are INVALID_ARGUMENT), find the
 * workload and check its token, validate against the server's limits,
 * call the table under the workload's lock, pack the reply. Memory a call
 * allocates is bounded by max_batch rows, itself bounded by the gRPC
 * message size limit.
 */
#include "handlers.h"

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "log.h"

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
};

const char *rd_method_path(rd_method_t m) { return method_paths[m]; }

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

typedef struct {
  Replayd__V1__Workload msg;
  Replayd__V1__WorkloadCounters counters;
  Replayd__V1__LearnerCounters learner;
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
  }
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
  int rc = rd_registry_register(ctx->registry, spec, &w, &err);
  replayd__v1__workload_spec__free_unpacked(spec, NULL);
  if (rc) {
    fail(r, registry_status(rc), "%s", err.msg);
    return;
  }
  workload_reply_t o;
  workload_reply(w, 1, &o);
  pack(r, &o.msg.base);
  rd_log_info("registry", "registered workload %s (\"%s\", capacity %u, %zu fields)", w->id,
              w->spec->name, w->spec->capacity, w->spec->n_fields);
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

/* The reply lists at most this many workloads (the registry's own limit is
 * lower unless an operator raised it). */
#define LIST_MAX 4096

static void do_list(rd_handler_ctx_t *ctx, const uint8_t *b, size_t n, rd_reply_t *r,
                    int server_info) {
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
    replayd__v1__list_workloads_request__free_unpacked(q, NULL);
  }
  size_t cap = rd_registry_count(ctx->registry) + 16;
  if (cap > LIST_MAX) cap = LIST_MAX;
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
  size_t k = rd_registry_list(ctx->registry, ws, cap);
  for (size_t i = 0; i < k; i++) {
    workload_reply(ws[i], 0, &os[i]);
    ptrs[i] = &os[i].msg;
  }
  if (server_info) {
    rd_device_t devs[RD_MAX_DEVICES];
    Replayd__V1__Device dm[RD_MAX_DEVICES], *dp[RD_MAX_DEVICES];
    size_t nd = rd_devices_get(devs, RD_MAX_DEVICES);
    for (size_t i = 0; i < nd; i++) {
      replayd__v1__device__init(&dm[i]);
      dm[i].kind = devs[i].kind;
      dm[i].name = devs[i].name;
      dm[i].fingerprint = devs[i].fingerprint;
      dm[i].status = devs[i].status;
      dp[i] = &dm[i];
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    Replayd__V1__ServerInfoResponse m = REPLAYD__V1__SERVER_INFO_RESPONSE__INIT;
    m.version = RD_VERSION;
    m.uptime_seconds = (double)now.tv_sec + now.tv_nsec * 1e-9 - ctx->start_time;
    m.n_devices = nd;
    m.devices = dp;
    m.n_workloads = k;
    m.workloads = ptrs;
    pack(r, &m.base);
  } else {
    Replayd__V1__ListWorkloadsResponse m = REPLAYD__V1__LIST_WORKLOADS_RESPONSE__INIT;
    m.n_workloads = k;
    m.workloads = ptrs;
    pack(r, &m.base);
  }
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

void rd_handle_unary(rd_handler_ctx_t *ctx, rd_method_t m, const grpc_metadata_array *md,
                     const uint8_t *body, size_t len, rd_reply_t *out) {
  static const uint8_t empty[1];
  if (body == NULL) body = empty; /* an empty message is valid protobuf */
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
  default:
    fail(out, GRPC_STATUS_UNIMPLEMENTED, "method %d is not served", (int)m);
  }
}
