/* profile_setup.h - what the CPU profiler measures on (profile.h,
 * "Method"): the measuring table (sample, update), the train-step's
 * synthetic batches, and gather's columns. Each is set up within the part
 * of the budget its caller gives it, measured through its call functions
 * (profile_timer.h rd_profile_call_fn) and freed by its free function,
 * which is safe on a zeroed or failed one. Internal to the profiler
 * (daemon/dse/profile*.c). */
#ifndef RD_PROFILE_SETUP_H
#define RD_PROFILE_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "learner.h"
#include "profile.h"
#include "rd_error.h"
#include "rd_rng.h"
#include "table.h"

#define FILL_CHUNK 65536u          /* items per insert while filling */
#define TREE_FILL_BPS 128e6        /* tree bytes initialised and filled per second, at least */
#define TRAIN_FLOPS_PER_S 2e9      /* the calibration step's estimate: a slow CPU's rate */
#define CALIB_ROWS 64u             /* rows of the calibration step */
#define CALL_NS_PER_ITEM 200e-9    /* a sample/update's first-call estimate per item */
#define MAX_BATCH_BYTES (64u << 20) /* synthetic train batches; larger: train not measured */
#define COLD_SAFETY 1.5            /* on the first-touch estimate of a learner's first step */
#define GEN_S_PER_FLOAT 10e-9      /* generating synthetic batch data */
#define DATA_SEED UINT64_C(0x70726f66696c65) /* "profile" */
#define GATHER_MAX_BYTES (32u << 20) /* gather's source rows */
#define GATHER_POOL_MIN (1u << 18) /* random row indices, at least */
#define UPDATE_POOL_KEYS (1u << 18) /* sampled keys for update batches (then at least 4 batches) */

/* Uniform in [lo, hi), 24 bits of the synthetic data's generator. */
static inline float rd_profile_unif(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rd_splitmix64(s) >> 40) * 0x1p-24);
}

/* ---- The measuring table: sample and update ---- */

typedef struct {
  rd_table_t t;
  uint32_t batch;
  rd_sample_out_t out;
  uint64_t *keys, *pool_keys; /* sample output; update key batches */
  double *probs, *weights, *prio[2];
  uint32_t n_pool, next;
} rd_profile_table_t;

/* Build and fill the measuring table of shape s (a 1-byte row; its tree at
 * most tree_limit bytes: profile.h); stop filling at fill_end, keeping at
 * least one batch. RD_ENOMEM, or the table's own errors. */
int rd_profile_table_setup(rd_profile_table_t *c, const rd_profile_shape_t *s, double tree_limit,
                           double fill_end, rd_error_t *err);
int rd_profile_table_sample(void *c, rd_error_t *err); /* one batch sampled */
int rd_profile_table_update(void *c, rd_error_t *err); /* one batch of sampled keys updated */
void rd_profile_table_free(rd_profile_table_t *c);

/* ---- The train-step ---- */

typedef struct {
  rd_learner_t l;
  bool live;
  rd_batch_t b[2];
  uint32_t n_b, next;
  float *mem, *td;
  int32_t *ai;
} rd_profile_train_t;

/* Floats one synthetic batch needs, or 0 if it would exceed MAX_BATCH_BYTES. */
size_t rd_profile_batch_floats(const rd_learner_config_t *lc, uint32_t batch);
/* One or two synthetic batches of `batch` rows for lc's learner (the
 * learner itself is the caller's: c->l, c->live). RD_ENOMEM. */
int rd_profile_train_data(rd_profile_train_t *c, const rd_learner_config_t *lc, uint32_t batch,
                          rd_error_t *err);
int rd_profile_train_call(void *c, rd_error_t *err); /* one step of c->l on the next batch */
void rd_profile_train_free(rd_profile_train_t *c);
/* A conservative estimate of one train-step of `batch` rows (seconds). */
double rd_profile_train_estimate(const rd_learner_config_t *lc, uint32_t batch);
/* Bytes a learner's first step of `batch` rows touches for the first time. */
double rd_profile_learner_buffer_bytes(const rd_learner_config_t *lc, uint32_t batch);
/* Bytes of a new learner's parameters. */
double rd_profile_learner_param_bytes(const rd_learner_config_t *lc);

/* ---- Gather: the learner's columns of fresh random rows ---- */

/* Columns as the table keeps them (one array per field), the batch's
 * column buffers, and a pool of random row indices read in windows of B
 * that move on every call (GATHER_POOL_MIN indices at least: batches do not
 * repeat within a cache's lifetime, as in the running loop). */
typedef struct {
  uint8_t *col[RD_PROFILE_MAX_COLS], *dst[RD_PROFILE_MAX_COLS];
  size_t fb[RD_PROFILE_MAX_COLS];
  uint32_t n_cols;
  uint32_t *idx, n_idx; /* the pool */
  uint64_t rows;        /* rows per column (a divisor, as the table's capacity) */
  uint32_t batch, next;
} rd_profile_gather_t;

/* The columns of shape s (at most GATHER_MAX_BYTES of rows; rows a learner
 * accepts when the columns are its fields) and the pool. RD_ENOMEM. */
int rd_profile_gather_setup(rd_profile_gather_t *g, const rd_profile_shape_t *s, rd_error_t *err);
int rd_profile_gather_call(void *g, rd_error_t *err); /* one batch of rows copied */
void rd_profile_gather_free(rd_profile_gather_t *g);

/* Rows a learner of config lc accepts, in the five learner columns (obs,
 * action, reward, next_obs, done or discount; fb[4] 1: done), rows first ..
 * first + n - 1. */
void rd_profile_fill_learner_rows(uint8_t *const col[5], const size_t fb[5], uint64_t first,
                                  uint64_t n, const rd_learner_config_t *lc);

#endif
