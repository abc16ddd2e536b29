/* fuzz_env.c - the RPC harnesses' in-process daemon (fuzz_env.h). */
#define _GNU_SOURCE
#include "fuzz_env.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "devices.h"
#include "fuzz_scratch.h"
#include "log.h"
#include "placer.h"
#include "rdt_pb.h"
#include "rd_clock.h"
#include "secrets.h"
#include "spec_pb.h"
#include "store.h"

static rd_config_t cfg;
static rd_store_t *store;
static rd_handler_ctx_t ctx;
static char ids[2][RD_WORKLOAD_ID_LEN + 1];
static char tokens[2][RD_WORKLOAD_TOKEN_LEN + 1];
static char admin[RD_WORKLOAD_TOKEN_LEN + 1];

/* ---- rd_place without placer.c: the real computation, a short budget ---- */

int rd_place(const rd_placer_t *p, const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
             const rd_placement_assume_t *assume, rd_placement_t *out, rd_error_t *err) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  int rc = rd_placement_compute(p->store, tc, pc, 1, FUZZ_PROFILE_BUDGET_S, RD_FPGA_PARTS_DIR,
                                assume, out, err);
  pthread_mutex_unlock(&mu);
  return rc;
}

/* ---- A TrainStep's late reply (server.c's rd_call_reply) ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
} late_t;

void rd_call_reply(void *call, rd_reply_t *r) {
  late_t *l = call;
  if (r->reply) grpc_byte_buffer_destroy(r->reply);
  r->reply = NULL;
  pthread_mutex_lock(&l->mu);
  l->done = 1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

/* ---- A rate limiter's wait (server.c): never, the calls here have none ---- */

void rd_call_wait_on(void *call, rd_workload_t *w) {
  (void)call;
  (void)w;
  abort(); /* ci.wait is NULL: a limiter refuses at once instead of parking the call */
}

/* ---- Setup ---- */

static void die(const char *what, const rd_error_t *err) {
  fprintf(stderr, "fuzz_env: %s: %s\n", what, err ? err->msg : "");
  abort();
}

static void close_store(void) { rd_store_close(store); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  grpc_init();
  rd_log_open(NULL, RD_LOG_ERROR, NULL); /* quiet: only what is wrong */
  const char *state = fuzz_scratch();
  fuzz_scratch_on_exit(close_store);
  rd_config_defaults(&cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", state);
  cfg.max_message_bytes = FUZZ_MAX_MESSAGE_BYTES;
  cfg.max_batch = 1024;
  cfg.max_capacity = 4096;
  cfg.max_memory_bytes = 64u << 20;
  cfg.max_workloads = 8;
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_store_open(&store, state, &err) != RD_OK) die("store", &err);
  if (rd_store_admin_token(state, admin, sizeof admin, &err) != RD_OK) die("admin token", &err);
  rd_devices_init();
  ctx.store = store;
  ctx.config = &cfg;
  rd_token_hash(admin, strlen(admin), ctx.admin_token_hash);
  ctx.has_admin_token = 1;
  ctx.start_time = rd_clock_now();
  ctx.start_unix = 1700000000;
  return 0;
}

/* 64 CartPole rows (a sample has something to draw, a TrainStep its
 * min_size). */
static void fill(rd_workload_t *w) {
  static float obs[64 * 4], reward[64];
  static int32_t action[64];
  static uint8_t done[64];
  rd_cbuf_t cols[5] = {{obs, sizeof obs}, {action, sizeof action}, {reward, sizeof reward},
                       {obs, sizeof obs}, {done, sizeof done}};
  rd_insert_batch_t b = {64, cols, 5, NULL, 0};
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_workload_insert(w, &b, NULL, NULL, &err) != RD_OK) die("insert", &err);
}

static void add(int i, const Replayd__V1__WorkloadSpec *pb) {
  rd_spec_pb_t s;
  rd_error_t err;
  rd_error_clear(&err);
  rd_workload_t *w = NULL;
  if (rd_spec_pb_decode(&cfg, pb, &s, &err) != RD_OK) die("spec", &err);
  if (rd_registry_register(ctx.registry, &s.spec, NULL, &w, tokens[i], &err) != RD_OK)
    die("register", &err);
  rd_spec_pb_release(&s);
  memcpy(ids[i], w->id, sizeof ids[i]);
  fill(w);
  rd_workload_unref(w);
}

rd_handler_ctx_t *fuzz_env_begin(void) {
  rd_error_t err;
  rd_error_clear(&err);
  if (rd_registry_create(&ctx.registry, &cfg, NULL, &err) != RD_OK) die("registry", &err);
  /* CartPole's rows (rdt_pb_cartpole); w2 also has a DQN learner. */
  rdt_pb_spec_t spec;
  rdt_pb_spec_init(&spec, "w1", 256);
  rdt_pb_cartpole(&spec, 5);
  spec.spec.seed = 7;
  add(0, &spec.spec);
  spec.spec.name = "w2";
  rdt_pb_dqn(&spec, 1, 8, 4);
  add(1, &spec.spec);
  return &ctx;
}

void fuzz_env_end(void) {
  rd_registry_stop_learners(ctx.registry);
  rd_registry_destroy(ctx.registry);
  ctx.registry = NULL;
}

uint8_t *fuzz_env_body(const uint8_t *data, size_t n) {
  uint8_t *b = malloc(n ? n : 1);
  if (b == NULL) abort();
  memcpy(b, data, n);
  for (int w = 0; w < 2; w++) {
    const char *ph = w ? FUZZ_W2 : FUZZ_W1;
    uint8_t *p = b;
    while ((p = memmem(p, n - (size_t)(p - b), ph, RD_WORKLOAD_ID_LEN)) != NULL) {
      memcpy(p, ids[w], RD_WORKLOAD_ID_LEN);
      p += RD_WORKLOAD_ID_LEN;
    }
  }
  return b;
}

void fuzz_env_metadata(uint8_t flags, grpc_metadata_array *md) {
  static grpc_metadata one[2];
  static char wrong[RD_WORKLOAD_TOKEN_LEN + 1], flipped[RD_WORKLOAD_TOKEN_LEN + 1];
  memset(wrong, 'a', RD_WORKLOAD_TOKEN_LEN);
  memcpy(flipped, tokens[0], sizeof flipped);
  flipped[17] ^= 1;
  const char *tok = NULL;
  size_t count = 1;
  switch (flags & 7) {
  case 0: count = 0; break;
  case 1: tok = tokens[0]; break;
  case 2: tok = tokens[1]; break;
  case 3: tok = admin; break;
  case 4: tok = wrong; break;
  case 5: tok = ""; break;
  case 6: tok = flipped; break;
  case 7: tok = tokens[0]; count = 2; break;
  }
  for (size_t i = 0; i < count; i++) {
    one[i].key = grpc_slice_from_static_string(RD_TOKEN_KEY);
    one[i].value = grpc_slice_from_static_string(tok);
  }
  md->count = count;
  md->capacity = 2;
  md->metadata = one;
}

void fuzz_env_call(rd_method_t m, uint8_t flags, const uint8_t *body, size_t n) {
  grpc_metadata_array md;
  fuzz_env_metadata(flags, &md);
  late_t late = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  /* A TrainStep stops at the deadline after its step in progress. */
  rd_call_info_t ci = {&md, rd_clock_now() + 0.05, &late, NULL, NULL, NULL}; /* no wait */
  rd_reply_t out;
  memset(&out, 0, sizeof out);
  rd_reply_when_t when = rd_handle(&ctx, m, &ci, body, n, &out);
  if (when == RD_REPLY_LATER) {
    pthread_mutex_lock(&late.mu);
    while (!late.done) pthread_cond_wait(&late.cv, &late.mu);
    pthread_mutex_unlock(&late.mu);
  }
  if (out.reply) grpc_byte_buffer_destroy(out.reply);
}
