/* durability.c - Checkpoint, ExportWorkload and ImportWorkload (and their
 * streams), and the
 * journal's acknowledgements (durability.h). */
#include "durability.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "durable.h"
#include "log.h"
#include "messages.h"
#include "paging.h"
#include "pb_check.h"
#include "placer.h"
#include "spec_pb.h"

/* ------------------------------------------------------------------ */
/* Acknowledgements                                                    */
/* ------------------------------------------------------------------ */

typedef struct {
  rd_journal_waiter_t waiter;
  void *call;
  grpc_byte_buffer *reply;
} ack_t;

/* The journal's syncer (or committer) thread: the record is on disk, or never will be. */
static void ack_done(void *arg, int rc, const rd_error_t *err) {
  ack_t *a = arg;
  rd_reply_t r;
  memset(&r, 0, sizeof r);
  if (rc == RD_OK) {
    rd_reply_buffer(&r, a->reply);
  } else {
    grpc_byte_buffer_destroy(a->reply);
    rd_reply_error(&r, rc, "not acknowledged: %s", err && err->msg[0] ? err->msg : rd_err_name(rc));
  }
  rd_call_reply(a->call, &r);
  free(a);
}

rd_reply_when_t rd_ack_when_durable(rd_workload_t *w, uint64_t lsn, void *call, rd_reply_t *r) {
  rd_journal_t *j = rd_durable_journal(w);
  if (j == NULL || lsn == 0 || r->status != GRPC_STATUS_OK || r->reply == NULL)
    return RD_REPLY_NOW;
  ack_t *a = malloc(sizeof *a);
  if (a == NULL) {
    /* Applied and journalled, but this call cannot wait: never OK unsynced. */
    rd_reply_error(r, RD_ENOMEM, "out of memory waiting for the journal; the call was applied "
                   "but is not acknowledged");
    return RD_REPLY_NOW;
  }
  a->call = call;
  a->reply = r->reply;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_journal_when_durable(j, lsn, &a->waiter, ack_done, a, &err);
  if (rc == 0) {
    r->reply = NULL; /* the journal's thread sends it */
    return RD_REPLY_LATER;
  }
  free(a);
  if (rc < 0) rd_reply_error(r, rc, "not acknowledged: %s", err.msg);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Checkpoint                                                          */
/* ------------------------------------------------------------------ */

/* Every workload that has checkpoints: its id and checkpoint. */
static void checkpoint_all(rd_handler_ctx_t *ctx, rd_reply_t *r) {
  size_t cap = rd_registry_count(ctx->registry) + 16;
  rd_workload_t **ws = calloc(cap, sizeof *ws);
  char **ids = calloc(cap, sizeof *ids);
  Replayd__V1__CheckpointInfo *infos = calloc(cap, sizeof *infos);
  Replayd__V1__CheckpointInfo **ptrs = calloc(cap, sizeof *ptrs);
  if (ws == NULL || ids == NULL || infos == NULL || ptrs == NULL) {
    rd_reply_error(r, RD_ENOMEM, "out of memory");
    goto out;
  }
  size_t n = rd_registry_list(ctx->registry, ws, cap), k = 0, failed = 0;
  rd_error_t first;
  rd_error_clear(&first);
  for (size_t i = 0; i < n; i++) {
    rd_durable_info_t di;
    rd_durable_info(ws[i], &di);
    if (di.mode == RD_DURABILITY_NONE) continue;
    rd_checkpoint_info_t ci;
    rd_error_t e;
    rd_error_clear(&e);
    if (rd_durable_checkpoint(ctx->durable, ws[i], &ci, &e) != RD_OK) {
      if (failed++ == 0) first = e;
      continue;
    }
    ids[k] = ws[i]->id;
    rd_checkpoint_info_msg(&infos[k], &ci);
    ptrs[k] = &infos[k];
    k++;
  }
  if (failed > 0) {
    rd_reply_error(r, first.code, "%zu of %zu checkpoints failed; the first: %s", failed,
                   failed + k, first.msg);
  } else {
    Replayd__V1__CheckpointResponse m = REPLAYD__V1__CHECKPOINT_RESPONSE__INIT;
    m.n_workload_ids = k;
    m.workload_ids = ids;
    m.n_checkpoints = k;
    m.checkpoints = ptrs;
    rd_reply_pack(r, &m.base);
  }
  for (size_t i = 0; i < n; i++) rd_workload_unref(ws[i]);
out:
  free(ws);
  free(ids);
  free(infos);
  free(ptrs);
}

/* Checkpoint, Export and Import need the server's checkpoints: 0 with r
 * failed where it keeps none. */
static int keeps_checkpoints(const rd_handler_ctx_t *ctx, rd_reply_t *r) {
  if (ctx->durable != NULL) return 1;
  rd_reply_error(r, RD_ESTATE, "this server keeps no checkpoints");
  return 0;
}

rd_reply_when_t rd_handle_checkpoint(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                     const void *msg, rd_reply_t *r) {
  const Replayd__V1__CheckpointRequest *m = msg;
  if (!keeps_checkpoints(ctx, r)) return RD_REPLY_NOW;
  if (m->all) {
    if (m->workload_id[0] != '\0')
      rd_reply_error(r, RD_EINVAL, "a checkpoint of all workloads names none");
    else if (rd_auth_admin(ctx, ci->md, "Checkpoint of all workloads", r))
      checkpoint_all(ctx, r);
    return RD_REPLY_NOW;
  }
  rd_workload_t *w = rd_auth_workload(ctx, ci->md, m->workload_id, 1, r);
  if (w == NULL) return RD_REPLY_NOW;
  rd_checkpoint_info_t info;
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_durable_checkpoint(ctx->durable, w, &info, &err);
  if (rc == RD_OK) {
    Replayd__V1__CheckpointInfo im;
    rd_checkpoint_info_msg(&im, &info);
    Replayd__V1__CheckpointInfo *ip = &im;
    char *id = w->id;
    Replayd__V1__CheckpointResponse reply = REPLAYD__V1__CHECKPOINT_RESPONSE__INIT;
    reply.n_workload_ids = 1;
    reply.workload_ids = &id;
    reply.n_checkpoints = 1;
    reply.checkpoints = &ip;
    rd_reply_pack(r, &reply.base);
  } else {
    rd_reply_error(r, rc, "%s", err.msg);
  }
  rd_workload_unref(w);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Export and import                                                   */
/* ------------------------------------------------------------------ */

rd_reply_when_t rd_handle_export(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                 const void *msg, rd_reply_t *r) {
  const Replayd__V1__ExportWorkloadRequest *m = msg;
  if (!keeps_checkpoints(ctx, r)) return RD_REPLY_NOW;
  rd_workload_t *w = rd_auth_workload(ctx, ci->md, m->workload_id, 1, r);
  if (w == NULL) return RD_REPLY_NOW;
  uint8_t *buf = NULL;
  size_t len = 0;
  uint64_t items = 0;
  rd_error_t err;
  rd_error_clear(&err);
  uint64_t max = ctx->config->max_message_bytes - RD_REPLY_HEADROOM;
  int rc = rd_durable_export(ctx->durable, w, max, &buf, &len, &items, &err);
  if (rc == RD_OK) {
    Replayd__V1__ExportWorkloadResponse reply = REPLAYD__V1__EXPORT_WORKLOAD_RESPONSE__INIT;
    reply.data.data = buf;
    reply.data.len = len;
    reply.items = items;
    rd_reply_pack(r, &reply.base);
    rd_log_info("durable", "exported workload %s: %llu items, %zu bytes", w->id,
                (unsigned long long)items, len);
  } else {
    rd_reply_error(r, rc, "%s", err.msg);
  }
  free(buf);
  rd_workload_unref(w);
  return RD_REPLY_NOW;
}

/* The spec the file carries, with the name the request gives. */
static Replayd__V1__WorkloadSpec *import_spec(const uint8_t *spec, size_t len, const char *name,
                                              rd_error_t *err) {
  Replayd__V1__WorkloadSpec *pb = replayd__v1__workload_spec__unpack(NULL, len, spec);
  if (pb == NULL) {
    rd_error_set(err, RD_EINVAL, "the file's spec does not decode");
    return NULL;
  }
  if (name != NULL && name[0] != '\0') {
    char *n = strdup(name);
    if (n == NULL) {
      replayd__v1__workload_spec__free_unpacked(pb, NULL);
      rd_error_set(err, RD_ENOMEM, "out of memory");
      return NULL;
    }
    if (pb->name != protobuf_c_empty_string) free(pb->name);
    pb->name = n;
  }
  return pb;
}

/* An import read and checked (imp, its spec): the new workload, or the
 * error in r; nothing is kept on failure. Takes imp. */
static void import_loaded(rd_handler_ctx_t *ctx, const rd_call_info_t *ci, rd_import_t *imp,
                          const uint8_t *spec, size_t spec_len, const char *name,
                          rd_reply_t *r) {
  rd_error_t err;
  rd_error_clear(&err);
  Replayd__V1__WorkloadSpec *pb = NULL, *echo = NULL;
  rd_spec_pb_t s;
  memset(&s, 0, sizeof s);
  rd_placement_t *pl = NULL;
  rd_workload_t *w = NULL;
  int rc = RD_OK;
  if ((pb = import_spec(spec, spec_len, name, &err)) == NULL) rc = err.code;
  if (rc == RD_OK) rc = rd_spec_pb_decode(ctx->config, pb, &s, &err);
  if (rc == RD_OK && (echo = rd_spec_pb_stored(s.stored, s.stored_len)) == NULL)
    rc = rd_error_set(&err, RD_ENOMEM, "out of memory for the reply");
  /* The caller's tenant owns it, within its quota (tenant.h), as a
   * registration. */
  rd_caller_t who;
  rd_auth_caller(ctx, ci->md, &who);
  if (rc == RD_OK) rc = rd_registry_admit(ctx->registry, who.tenant, &s.config, &err);
  if (rc == RD_OK && s.config.has_learner) {
    if ((pl = malloc(sizeof *pl)) == NULL) {
      rc = rd_error_set(&err, RD_ENOMEM, "out of memory for the placement");
    } else {
      rd_placer_t placer = {ctx->registry, ctx->store, ctx->config};
      rc = rd_place(&placer, &s.config.table, &s.config.learner, NULL, pl, &err);
    }
  }
  char token[RD_WORKLOAD_TOKEN_LEN + 1] = "";
  if (rc == RD_OK)
    rc = rd_registry_register_as(ctx->registry, who.tenant, &s.spec, pl, &w, token, &err);
  rd_caller_release(&who);
  if (rc == RD_OK && (rc = rd_import_apply(ctx->durable, imp, w, &err)) != RD_OK) {
    /* All or nothing: a workload that did not get its data is not kept. */
    rd_error_t e2;
    rd_error_clear(&e2);
    (void)rd_registry_delete(ctx->registry, w->id, &e2);
    rd_workload_unref(w);
    w = NULL;
  }
  rd_spec_pb_release(&s);
  free(pl);
  if (pb != NULL) replayd__v1__workload_spec__free_unpacked(pb, NULL);
  rd_import_free(imp);
  if (rc) {
    if (echo) replayd__v1__workload_spec__free_unpacked(echo, NULL);
    rd_reply_error(r, rc, "import: %s", err.msg);
    rd_secret_wipe(token, sizeof token);
    return;
  }
  rd_workload_msg_t o;
  rd_workload_msg(&o, w, token, echo);
  rd_reply_pack(r, &o.msg.base);
  rd_log_info("durable", "imported workload %s (\"%s\", %llu items)", w->id, w->name,
              (unsigned long long)rd_table_size(&w->table));
  rd_workload_msg_free(&o);
  rd_workload_unref(w);
  rd_secret_wipe(token, sizeof token);
}

/* A file read (rd_import_read, rd_import_sink_finish): what it gave. */
typedef struct {
  rd_import_t *imp;
  const uint8_t *spec;
  size_t spec_len;
  rd_error_t err;
} import_src_t;

/* The read's result rc: its error in r, or the import (import_loaded). */
static void import_read(rd_handler_ctx_t *ctx, const rd_call_info_t *ci, int rc,
                        import_src_t *in, const char *name, rd_reply_t *r) {
  if (rc != RD_OK) rd_reply_error(r, rc, "import: %s; nothing was created", in->err.msg);
  else import_loaded(ctx, ci, in->imp, in->spec, in->spec_len, name, r);
}

rd_reply_when_t rd_handle_import(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                 const void *msg, rd_reply_t *r) {
  const Replayd__V1__ImportWorkloadRequest *m = msg;
  if (!keeps_checkpoints(ctx, r)) return RD_REPLY_NOW; /* an import's bounds live there */
  import_src_t in;
  memset(&in, 0, sizeof in);
  int rc = rd_import_read(ctx->durable, m->data.data, m->data.len, &in.imp, &in.spec,
                          &in.spec_len, &in.err);
  import_read(ctx, ci, rc, &in, m->name, r);
  return RD_REPLY_NOW;
}

/* ------------------------------------------------------------------ */
/* Streamed export and import                                          */
/* ------------------------------------------------------------------ */

struct rd_export_stream {
  rd_export_file_t f;
  uint64_t sent;
  size_t chunk;
  uint8_t *buf;
};

rd_reply_when_t rd_export_stream_open(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                      const Replayd__V1__ExportStreamRequest *m,
                                      rd_export_stream_t **out, rd_reply_t *r) {
  *out = NULL;
  if (!keeps_checkpoints(ctx, r)) return RD_REPLY_NOW;
  size_t chunk = m->chunk_bytes ? m->chunk_bytes : RD_STREAM_CHUNK_DEFAULT;
  size_t most = ctx->config->max_message_bytes - RD_REPLY_HEADROOM;
  if (most > RD_STREAM_CHUNK_MAX) most = RD_STREAM_CHUNK_MAX;
  if (chunk > most) chunk = most; /* at most what was asked, within this server's limits */
  rd_workload_t *w = rd_auth_workload(ctx, ci->md, m->workload_id, 1, r);
  if (w == NULL) return RD_REPLY_NOW;
  rd_export_stream_t *s = calloc(1, sizeof *s);
  uint8_t *buf = malloc(chunk);
  rd_error_t err;
  rd_error_clear(&err);
  int rc = s != NULL && buf != NULL ? rd_durable_export_file(ctx->durable, w, &s->f, &err)
                                    : rd_error_set(&err, RD_ENOMEM, "out of memory");
  if (rc == RD_OK)
    rd_log_info("durable", "exporting workload %s as a stream: %llu items, %llu bytes", w->id,
                (unsigned long long)s->f.items, (unsigned long long)s->f.bytes);
  rd_workload_unref(w);
  if (rc != RD_OK) {
    free(s);
    free(buf);
    rd_reply_error(r, rc, "export: %s", err.msg);
    return RD_REPLY_NOW;
  }
  s->chunk = chunk;
  s->buf = buf;
  *out = s;
  return RD_REPLY_STREAM;
}

int rd_export_stream_next(rd_export_stream_t *s, grpc_byte_buffer **bb, rd_reply_t *r) {
  *bb = NULL;
  if (s->sent >= s->f.bytes) return 0; /* a file has its header: never empty */
  uint64_t left = s->f.bytes - s->sent;
  size_t n = left < s->chunk ? (size_t)left : s->chunk;
  for (size_t got = 0; got < n;) {
    ssize_t k = pread(s->f.fd, s->buf + got, n - got, (off_t)(s->sent + got));
    if (k <= 0) {
      rd_reply_error(r, RD_ESTORE, "export: reading its temporary file: %s",
                     k < 0 ? strerror(errno) : "shorter than written");
      return -1;
    }
    got += (size_t)k;
  }
  Replayd__V1__ExportChunk m = REPLAYD__V1__EXPORT_CHUNK__INIT;
  m.data.data = s->buf;
  m.data.len = n;
  m.offset = s->sent;
  m.total_bytes = s->f.bytes;
  m.items = s->f.items;
  m.xxh3 = s->f.xxh3;
  rd_reply_t one;
  memset(&one, 0, sizeof one);
  rd_reply_pack(&one, &m.base);
  if (one.status != GRPC_STATUS_OK || one.reply == NULL) {
    *r = one;
    return -1;
  }
  *bb = one.reply;
  s->sent += n;
  return 1;
}

void rd_export_stream_free(rd_export_stream_t *s) {
  if (s == NULL) return;
  rd_export_file_close(&s->f);
  free(s->buf);
  free(s);
}

struct rd_import_stream {
  rd_import_sink_t *sink;
  char *name;
  uint64_t messages;
  int ended; /* the end message came: total and xxh3 */
  uint64_t total, xxh3;
};

/* The stream's state, made by its first message: *stp, with its sink open.
 * 0 with r failed if it cannot be. */
static int import_stream_state(rd_handler_ctx_t *ctx, rd_import_stream_t **stp, rd_reply_t *r) {
  if (*stp != NULL) return 1;
  rd_import_stream_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    rd_reply_error(r, RD_ENOMEM, "out of memory");
    return 0;
  }
  *stp = st;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_import_sink_open(ctx->durable, &st->sink, &err) != RD_OK) {
    rd_reply_error(r, err.code, "import: %s", err.msg);
    return 0;
  }
  return 1;
}

/* One decoded ImportChunk into the stream: its name (first message only),
 * its bytes to the sink, its end. */
static int import_chunk(rd_import_stream_t *st, const Replayd__V1__ImportChunk *m,
                        rd_error_t *err) {
  int rc = RD_OK;
  if (st->ended)
    rc = rd_error_set(err, RD_EINVAL, "a message after the end message");
  else if (m->data.len > RD_STREAM_CHUNK_MAX)
    rc = rd_error_set(err, RD_EINVAL, "a chunk of %zu bytes; at most %u", m->data.len,
                      RD_STREAM_CHUNK_MAX);
  else if (m->name[0] != '\0' && (st->messages > 1 || st->name != NULL))
    rc = rd_error_set(err, RD_EINVAL, "name goes in the first message only");
  else if (m->name[0] != '\0' && (st->name = strdup(m->name)) == NULL)
    rc = rd_error_set(err, RD_ENOMEM, "out of memory");
  if (rc == RD_OK && m->data.len > 0)
    rc = rd_import_sink_write(st->sink, m->data.data, m->data.len, err);
  if (rc == RD_OK && m->end) {
    st->ended = 1;
    st->total = m->total_bytes;
    st->xxh3 = m->xxh3;
  }
  return rc;
}

rd_reply_when_t rd_import_stream_message(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                         rd_import_stream_t **stp, const uint8_t *body,
                                         size_t len, rd_reply_t *r) {
  (void)ci;
  static const uint8_t empty[1];
  if (!keeps_checkpoints(ctx, r) || !import_stream_state(ctx, stp, r)) return RD_REPLY_NOW;
  rd_import_stream_t *st = *stp;
  st->messages++;
  rd_error_t err;
  rd_error_clear(&err);
  const ProtobufCMessageDescriptor *desc = &replayd__v1__import_chunk__descriptor;
  if (rd_pb_check(desc, body ? body : empty, len, &err) != RD_OK) {
    rd_reply_error(r, err.code, "import stream message %llu: %s",
                   (unsigned long long)st->messages, err.msg);
    return RD_REPLY_NOW;
  }
  Replayd__V1__ImportChunk *m = replayd__v1__import_chunk__unpack(NULL, len, body ? body : empty);
  if (m == NULL) {
    rd_reply_error(r, RD_EINVAL, "import stream message %llu is not a decodable %s",
                   (unsigned long long)st->messages, desc->name);
    return RD_REPLY_NOW;
  }
  int rc = import_chunk(st, m, &err);
  replayd__v1__import_chunk__free_unpacked(m, NULL);
  if (rc != RD_OK) {
    rd_reply_error(r, rc, "import stream message %llu: %s", (unsigned long long)st->messages,
                   err.msg);
    return RD_REPLY_NOW;
  }
  return RD_REPLY_MORE;
}

rd_reply_when_t rd_import_stream_end(rd_handler_ctx_t *ctx, const rd_call_info_t *ci,
                                     rd_import_stream_t *st, rd_reply_t *r) {
  if (st == NULL || !st->ended) {
    rd_reply_error(r, RD_EINVAL, "import: the stream closed without its end message (%llu "
                   "bytes came): truncated; nothing was created",
                   st ? (unsigned long long)rd_import_sink_bytes(st->sink) : 0ull);
    return RD_REPLY_NOW;
  }
  import_src_t in;
  memset(&in, 0, sizeof in);
  int rc = rd_import_sink_finish(st->sink, st->total, st->xxh3, &in.imp, &in.spec,
                                 &in.spec_len, &in.err);
  import_read(ctx, ci, rc, &in, st->name, r);
  return RD_REPLY_NOW;
}

void rd_import_stream_free(rd_import_stream_t *st) {
  if (st == NULL) return;
  rd_import_sink_free(st->sink);
  free(st->name);
  free(st);
}
