/* test_durable.c - a workload's durability through the registry as the
 * daemon runs it (daemon/core/durable.h), with its threads: a hosted
 * learner saved and loaded on its own thread while it trains; journal-mode
 * inserts from several threads acknowledged through the journal while
 * samples and checkpoints (slices, rotation) run beside them, then a
 * restart that replays checkpoint and journal to the same table; the
 * previous checkpoint when the newest is damaged; the streamed export's
 * and import's temporary files. Runs under TSan in CI.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt_file.h"
#include "durable.h"
#include "log.h"
#include "rdt_pb.h"
#include "rdt_th_group.h"
#include "rdt_unit.h"
#include "registry.h"
#include "spec_pb.h"
#include "rdt_main.h"

/* A server's state: store, durability, registry, as main.c builds them. */
typedef struct {
  rd_config_t cfg;
  rd_store_t *store;
  rd_durable_t *d;
  rd_registry_t *r;
} server_t;

static void server_up(server_t *s, const char *name, int restore) {
  rd_config_defaults(&s->cfg);
  snprintf(s->cfg.state_dir, sizeof s->cfg.state_dir, "%s", rdt_fresh(name));
  s->cfg.checkpoint_interval_s = 0;
  s->cfg.journal_commit_us = 100;
  rd_error_t e;
  if (rd_store_open(&s->store, s->cfg.state_dir, &e) != RD_OK) fail_msg("store: %s", e.msg);
  if (rd_durable_create(&s->d, &s->cfg, &e) != RD_OK) fail_msg("durable: %s", e.msg);
  if (rd_registry_create(&s->r, &s->cfg, s->store, &e) != RD_OK) fail_msg("registry: %s", e.msg);
  rd_registry_set_durable(s->r, s->d);
  if (restore) {
    rd_spec_decoder_t dec = rd_spec_pb_decoder(&s->cfg);
    if (rd_registry_restore(s->r, &dec, NULL, &e) != RD_OK) fail_msg("restore: %s", e.msg);
  }
  if (rd_durable_start(s->d, s->r, &e) != RD_OK) fail_msg("start: %s", e.msg);
}

/* A crash as far as the files go: no final checkpoint. */
static void server_down(server_t *s) {
  rd_durable_stop(s->d);
  rd_registry_destroy(s->r);
  rd_durable_destroy(s->d);
  rd_store_close(s->store);
}

typedef rdt_pb_spec_t spec_t;

static void cartpole(spec_t *s, const char *durability, int with_learner) {
  rdt_pb_spec_init(s, "durable", 5000);
  rdt_pb_cartpole(s, 5);
  s->spec.seed = 9;
  s->spec.durability = (char *)durability;
  if (with_learner) rdt_pb_dqn(s, 2, 32, 32);
}

static rd_workload_t *reg(server_t *s, spec_t *sp) {
  rd_workload_t *w = NULL;
  rd_error_t e;
  if (rd_spec_pb_register(s->r, &sp->spec, NULL, &w, &e) != RD_OK) fail_msg("register: %s", e.msg);
  return w;
}

/* A fresh server in state directory `name` and, registered on it, a
 * CartPole workload (durability, with a learner or not); its id in id. */
static rd_workload_t *fresh_workload(server_t *s, const char *name, const char *durability,
                                     int with_learner, char id[RD_WORKLOAD_ID_LEN + 1]) {
  server_up(s, name, 0);
  spec_t sp;
  cartpole(&sp, durability, with_learner);
  rd_workload_t *w = reg(s, &sp);
  memcpy(id, w->id, RD_WORKLOAD_ID_LEN + 1);
  return w;
}

static void insert(rd_workload_t *w, uint32_t n, uint64_t tag, uint64_t *lsn) {
  float obs[64 * 4], rew[64], nxt[64 * 4];
  int32_t act[64];
  uint8_t done[64];
  double prio[64];
  for (uint32_t i = 0; i < n; i++) {
    for (int j = 0; j < 4; j++) obs[i * 4 + j] = nxt[i * 4 + j] = (float)(tag * 100 + i + j);
    act[i] = (int32_t)(i & 1);
    rew[i] = (float)i;
    done[i] = (uint8_t)(i % 9 == 0);
    prio[i] = 0.5 + (double)((tag + i) % 5);
  }
  rd_cbuf_t cols[5] = {{obs, n * 16u}, {act, n * 4u}, {rew, n * 4u}, {nxt, n * 16u}, {done, n}};
  rd_insert_batch_t b = {n, cols, 5, prio, n};
  rd_error_t e;
  if (rd_workload_insert_wait(w, &b, NULL, NULL, NULL, lsn, &e) != RD_OK) fail_msg("insert: %s", e.msg);
}

static void weights(rd_workload_t *w, uint8_t **buf, size_t *len, uint64_t *ver) {
  size_t cap = rd_pipeline_weights_bytes(w->pipeline);
  *buf = malloc(cap);
  assert_int_equal(rd_pipeline_weights(w->pipeline, 0, *buf, cap, ver, len, NULL), RD_OK);
}

/* The learner is saved on its thread while a TrainStep runs, and loaded
 * at restore: same weights, more steps, a higher version. */
static void train(rd_workload_t *w, uint32_t steps) {
  rd_train_result_t res;
  rd_error_t e;
  if (rd_pipeline_train_wait(w->pipeline, steps, 0, &res, &e) != RD_OK)
    fail_msg("train: %s", e.msg);
}

/* The training thread: 400 steps of workload w. */
static int trainer(void *w, int i) {
  (void)i;
  train(w, 400);
  return 0;
}

static void test_learner_saved_while_training(void **state) {
  (void)state;
  server_t s;
  char id[RD_WORKLOAD_ID_LEN + 1];
  rd_workload_t *w = fresh_workload(&s, "learner", "checkpoint", 1, id);
  for (int i = 0; i < 10; i++) insert(w, 50, (uint64_t)i, NULL);
  rdt_th_group_t g = {0};
  assert_int_equal(rdt_th_start(&g, 1, trainer, w), 0);
  rd_error_t e;
  for (int i = 0; i < 3; i++) /* during the training: slices and the learner's thread */
    assert_int_equal(rd_durable_checkpoint(s.d, w, NULL, &e), RD_OK);
  assert_int_equal(rdt_th_join(&g), 0);
  rd_checkpoint_info_t info;
  assert_int_equal(rd_durable_checkpoint(s.d, w, &info, &e), RD_OK);
  assert_true(info.learner_full);
  assert_int_equal(info.items, 500);
  uint8_t *w1;
  size_t l1;
  uint64_t v1;
  weights(w, &w1, &l1, &v1);
  rd_pipeline_stats_t st;
  rd_pipeline_stats(w->pipeline, &st);
  assert_int_equal(st.steps, 400);
  rd_workload_unref(w);
  server_down(&s);

  server_up(&s, "learner", 1);
  w = rd_registry_get(s.r, id);
  assert_non_null(w);
  assert_int_equal(rd_table_size(&w->table), 500);
  uint8_t *w2;
  size_t l2;
  uint64_t v2;
  weights(w, &w2, &l2, &v2);
  assert_int_equal(l1, l2);
  assert_memory_equal(w1, w2, l1);
  assert_true(v2 > v1);
  rd_pipeline_stats(w->pipeline, &st);
  assert_int_equal(st.steps, 400);
  rd_durable_info_t di;
  rd_durable_info(w, &di);
  assert_non_null(strstr(di.restored, "checkpoint 4"));
  train(w, 20);
  rd_pipeline_stats(w->pipeline, &st);
  assert_int_equal(st.steps, 420);
  free(w1);
  free(w2);
  rd_workload_unref(w);
  server_down(&s);
}

/* Journal mode: inserters acknowledge through the journal while a sampler
 * and checkpoints run; a restart gives back the same table. Inserter id
 * of workload w: 150 batches, tagged by id. */
static int inserter(void *w, int id) {
  rd_journal_t *j = rd_durable_journal(w);
  for (int i = 0; i < 150; i++) {
    uint64_t lsn = 0;
    insert(w, 1 + (uint32_t)(i % 40), (uint64_t)(id * 100000 + i), &lsn);
    assert_true(lsn > 0);
    rd_error_t e;
    if (rd_journal_sync(j, lsn, &e) != RD_OK) fail_msg("not acknowledged: %s", e.msg);
    if (i % 7 == 0) {
      uint64_t key = (uint64_t)i;
      double p = 2.5;
      assert_int_equal(rd_workload_update_lsn(w, 1, &key, 1, &p, NULL, &lsn, &e), RD_OK);
    }
  }
  return 0;
}

static int sample_alloc(void *arg, const rd_table_t *t, uint32_t n, rd_sample_out_t *out,
                        rd_error_t *err) {
  (void)t;
  (void)err;
  uint8_t *mem = arg;
  out->keys = (uint64_t *)mem;
  out->probabilities = (double *)(mem + 8 * n);
  out->weights = (double *)(mem + 16 * n);
  return RD_OK;
}

/* Samples workload w until the test stops it. */
static int sampler(void *w, int i) {
  (void)i;
  uint8_t mem[64 * 24];
  rd_sample_request_t q = {64, 0, 0, 0};
  while (!rdt_th_stopping()) {
    rd_error_t e;
    int rc = rd_workload_sample(w, &q, sample_alloc, mem, NULL, &e);
    if (rc != RD_OK && rc != RD_EINVAL && rc != RD_EEMPTY) fail_msg("sample: %s", e.msg);
  }
  return 0;
}

static void image(rd_workload_t *w, rd_table_snapshot_t *s) {
  rd_error_t e;
  pthread_mutex_lock(&w->lock);
  assert_int_equal(rd_table_snapshot_alloc(s, &w->table.config, rd_table_size(&w->table), &e),
                   RD_OK);
  assert_int_equal(rd_table_snapshot_begin(&w->table, s, &e), RD_OK);
  assert_int_equal(rd_table_snapshot_step(&w->table, s, 1u << 30, &e), 1);
  pthread_mutex_unlock(&w->lock);
}

static void test_journal_threads_and_restart(void **state) {
  (void)state;
  server_t s;
  char id[RD_WORKLOAD_ID_LEN + 1];
  rd_workload_t *w = fresh_workload(&s, "journal", "journal", 0, id);
  rdt_th_group_t ins = {0}, smp = {0};
  assert_int_equal(rdt_th_start(&ins, 3, inserter, w), 0);
  assert_int_equal(rdt_th_start(&smp, 1, sampler, w), 0);
  rd_error_t e;
  for (int i = 0; i < 4; i++) {
    usleep(20000);
    assert_int_equal(rd_durable_checkpoint(s.d, w, NULL, &e), RD_OK);
  }
  assert_int_equal(rdt_th_join(&ins), 0);
  assert_int_equal(rdt_th_stop(&smp), 0);
  rd_table_snapshot_t a, b;
  image(w, &a);
  rd_journal_stats_t js;
  rd_journal_stats(rd_durable_journal(w), &js);
  assert_true(js.commits < js.records); /* group commit */
  rd_workload_unref(w);
  server_down(&s);

  server_up(&s, "journal", 1);
  w = rd_registry_get(s.r, id);
  assert_non_null(w);
  rd_durable_info_t di;
  rd_durable_info(w, &di);
  assert_non_null(strstr(di.restored, "journal records"));
  image(w, &b);
  assert_int_equal(a.img.next_key, b.img.next_key);
  assert_int_equal(a.img.size, b.img.size);
  assert_true(a.img.max_p == b.img.max_p);
  assert_memory_equal(a.img.leaves, b.img.leaves, a.img.size * 8);
  for (uint32_t f = 0; f < 5; f++)
    assert_memory_equal(a.img.cols[f], b.img.cols[f], a.img.size * w->table.field_bytes[f]);
  assert_int_equal(a.img.stats.inserts, b.img.stats.inserts);
  assert_int_equal(a.img.stats.updates, b.img.stats.updates);
  rd_table_snapshot_free(&a);
  rd_table_snapshot_free(&b);
  rd_workload_unref(w);
  server_down(&s);
}

/* The newest checkpoint damaged: the previous one, and the reason. */
static void test_damaged_newest(void **state) {
  (void)state;
  server_t s;
  char id[RD_WORKLOAD_ID_LEN + 1];
  rd_workload_t *w = fresh_workload(&s, "damaged", "checkpoint", 0, id);
  rd_error_t e;
  insert(w, 30, 1, NULL);
  assert_int_equal(rd_durable_checkpoint(s.d, w, NULL, &e), RD_OK);
  insert(w, 30, 2, NULL);
  assert_int_equal(rd_durable_checkpoint(s.d, w, NULL, &e), RD_OK);
  rd_workload_unref(w);
  server_down(&s);
  char path[256];
  snprintf(path, sizeof path, "%s/damaged/checkpoints/%s/ckpt-%016x.rdc", rdt_root, id, 2u);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, 300, SEEK_SET);
  int c = fgetc(f);
  fseek(f, 300, SEEK_SET);
  fputc(c ^ 0x55, f);
  fclose(f);
  server_up(&s, "damaged", 1);
  w = rd_registry_get(s.r, id);
  assert_int_equal(rd_table_size(&w->table), 30);
  rd_durable_info_t di;
  rd_durable_info(w, &di);
  assert_non_null(strstr(di.restored, "checkpoint 1"));
  assert_true(di.has_last && di.last.gen == 3); /* restored, then anchored anew */
  strcat(path, ".bad");
  assert_int_equal(access(path, F_OK), 0);
  rd_workload_unref(w);
  server_down(&s);
}

/* A section header of the file at off given raw size raw, its checksums
 * (its own and the end section's chain) made right again. */
static void forge_raw_len(uint8_t *f, size_t len, size_t target, uint64_t raw) {
  rd_le_put64(f + target + 16, raw);
  uint64_t chain = 0;
  for (size_t off = RD_CKPT_HEADER_BYTES; off + RD_CKPT_SECTION_BYTES <= len;) {
    uint8_t *h = f + off;
    if (rd_le_get32(h) == RD_CKPT_END) {
      rd_le_put64(h + 32, chain);
      rd_le_put64(h + 40, XXH3_64bits(h, 40));
      return;
    }
    uint64_t hh = XXH3_64bits(h, 40);
    rd_le_put64(h + 40, hh);
    chain = XXH3_64bits_withSeed(&hh, sizeof hh, chain);
    off += RD_CKPT_SECTION_BYTES + rd_le_get64(h + 24);
  }
  fail_msg("no end section");
}

/* Server s up in state directory `name` with a CartPole workload (no
 * durability, no learner) registered, returned; in *d a second durability
 * on s's configuration but for checkpoint_zstd and import_max_bytes (0:
 * s's), for the exports and imports of other settings. */
static rd_workload_t *up_beside(server_t *s, const char *name, rd_durable_t **d, uint32_t zstd,
                                uint64_t import_max) {
  server_up(s, name, 0);
  rd_config_t c = s->cfg;
  if (zstd) c.checkpoint_zstd = zstd;
  if (import_max) c.import_max_bytes = import_max;
  rd_error_t e;
  assert_int_equal(rd_durable_create(d, &c, &e), RD_OK);
  spec_t sp;
  cartpole(&sp, "none", 0);
  return reg(s, &sp);
}

/* An import's compressed sections each claim 2^63 raw bytes, checksums
 * intact: their sum must not wrap under the server's bound (it did: the
 * meta section's read then asked malloc for 8 EiB). */
static void test_import_sizes_do_not_wrap(void **state) {
  (void)state;
  server_t s;
  rd_durable_t *dz; /* compressed sections: their raw size is the file's word */
  rd_workload_t *w = up_beside(&s, "wrap", &dz, 3, 0);
  insert(w, 60, 1, NULL);
  rd_error_t e;
  uint8_t *f;
  size_t len;
  uint64_t items;
  assert_int_equal(rd_durable_export(dz, w, UINT64_MAX, &f, &len, &items, &e), RD_OK);
  rd_import_t *imp;
  const uint8_t *spec;
  size_t spec_len;
  assert_int_equal(rd_import_read(dz, f, len, &imp, &spec, &spec_len, &e), RD_OK);
  rd_import_free(imp);
  int forged = 0;
  for (size_t off = RD_CKPT_HEADER_BYTES; off + RD_CKPT_SECTION_BYTES <= len && forged < 2;
       off += RD_CKPT_SECTION_BYTES + rd_le_get64(f + off + 24)) {
    if (rd_le_get32(f + off + 8) & RD_CKPT_ZSTD) {
      forge_raw_len(f, len, off, UINT64_C(1) << 63);
      forged++;
    }
  }
  assert_int_equal(forged, 2);
  rd_error_clear(&e);
  assert_int_equal(rd_import_read(dz, f, len, &imp, &spec, &spec_len, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "more bytes of data than this server accepts"));
  free(f);
  rd_durable_destroy(dz);
  rd_workload_unref(w);
  server_down(&s);
}

/* No temporary stream file is ever visible in the checkpoint directory. */
static void no_temp_files(const char *dir) {
  DIR *dp = opendir(dir);
  assert_non_null(dp);
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    if (strncmp(de->d_name, ".export-", 8) == 0 || strncmp(de->d_name, ".import-", 8) == 0)
      fail_msg("a temporary stream file is left: %s", de->d_name);
  }
  closedir(dp);
}

/* The streams' files: an export's file and checksum; an import sink's
 * checksum, size limit and bound on open sinks, each refusal creating
 * nothing. */
static void test_streamed_files(void **state) {
  (void)state;
  server_t s;
  rd_durable_t *small; /* imports of 4096 bytes at most */
  rd_workload_t *w = up_beside(&s, "streams", &small, 0, 4096);
  for (uint64_t t = 0; t < 5; t++) insert(w, 60, t, NULL); /* insert: 64 rows at most */
  rd_error_t e;
  rd_export_file_t f;
  assert_int_equal(rd_durable_export_file(s.d, w, &f, &e), RD_OK);
  no_temp_files(rd_durable_dir(s.d));
  assert_int_equal(f.items, 300);
  uint8_t *data = malloc(f.bytes);
  assert_non_null(data);
  assert_int_equal(pread(f.fd, data, f.bytes, 0), (ssize_t)f.bytes);
  rd_export_file_close(&f);
  assert_true(XXH3_64bits(data, f.bytes) == f.xxh3);
  assert_true(f.bytes > 4096);
  /* At most RD_EXPORT_FILES_MAX open at once; a closed one's place is free. */
  rd_export_file_t exp_[RD_EXPORT_FILES_MAX], more;
  for (int i = 0; i < RD_EXPORT_FILES_MAX; i++)
    assert_int_equal(rd_durable_export_file(s.d, w, &exp_[i], &e), RD_OK);
  assert_int_equal(rd_durable_export_file(s.d, w, &more, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "retry later"));
  assert_int_equal(more.fd, -1);
  rd_export_file_close(&more); /* not open: nothing */
  rd_export_file_close(&exp_[0]);
  assert_int_equal(rd_durable_export_file(s.d, w, &more, &e), RD_OK);
  rd_export_file_close(&more);
  for (int i = 0; i < RD_EXPORT_FILES_MAX; i++) rd_export_file_close(&exp_[i]);

  rd_import_t *imp = NULL;
  const uint8_t *spec;
  size_t spec_len;
  rd_import_sink_t *k;
  /* A wrong checksum, then the right one. */
  assert_int_equal(rd_import_sink_open(s.d, &k, &e), RD_OK);
  for (size_t off = 0; off < f.bytes; off += 1000)
    assert_int_equal(rd_import_sink_write(k, data + off, f.bytes - off < 1000 ? f.bytes - off
                                                                               : 1000, &e),
                     RD_OK);
  assert_int_equal(rd_import_sink_bytes(k), f.bytes);
  assert_int_equal(rd_import_sink_finish(k, f.bytes, f.xxh3 ^ 1, &imp, &spec, &spec_len, &e),
                   RD_EINVAL);
  assert_non_null(strstr(e.msg, "checksum mismatch"));
  assert_null(imp);
  assert_int_equal(rd_import_sink_finish(k, f.bytes - 1, f.xxh3, &imp, &spec, &spec_len, &e),
                   RD_EINVAL);
  assert_int_equal(rd_import_sink_finish(k, f.bytes, f.xxh3, &imp, &spec, &spec_len, &e), RD_OK);
  assert_non_null(imp);
  rd_import_free(imp);
  rd_import_sink_free(k);
  /* The size limit: a write past it writes nothing. */
  assert_int_equal(rd_import_sink_open(small, &k, &e), RD_OK);
  assert_int_equal(rd_import_sink_write(k, data, 4000, &e), RD_OK);
  assert_int_equal(rd_import_sink_write(k, data + 4000, 97, &e), RD_ETOOBIG);
  assert_non_null(strstr(e.msg, "--import-max-bytes"));
  assert_int_equal(rd_import_sink_bytes(k), 4000);
  assert_int_equal(rd_import_sink_write(k, data + 4000, 96, &e), RD_OK);
  rd_import_sink_free(k);
  /* At most RD_IMPORT_SINKS_MAX open; a freed one makes room. */
  rd_import_sink_t *open_[RD_IMPORT_SINKS_MAX];
  for (int i = 0; i < RD_IMPORT_SINKS_MAX; i++)
    assert_int_equal(rd_import_sink_open(s.d, &open_[i], &e), RD_OK);
  assert_int_equal(rd_import_sink_open(s.d, &k, &e), RD_ETOOBIG);
  rd_import_sink_free(open_[0]);
  assert_int_equal(rd_import_sink_open(s.d, &open_[0], &e), RD_OK);
  for (int i = 0; i < RD_IMPORT_SINKS_MAX; i++) rd_import_sink_free(open_[i]);
  no_temp_files(rd_durable_dir(s.d));
  free(data);
  rd_durable_destroy(small);
  rd_workload_unref(w);
  server_down(&s);
}

RDT_MAIN(rdt_root_setup, rdt_root_teardown,
         cmocka_unit_test(test_learner_saved_while_training),
         cmocka_unit_test(test_journal_threads_and_restart),
         cmocka_unit_test(test_damaged_newest),
         cmocka_unit_test(test_import_sizes_do_not_wrap),
         cmocka_unit_test(test_streamed_files))
