/* profile_setup.c - the measuring table, the train-step's batches and
 * gather's columns (profile_setup.h). */
#include "profile_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "profile_timer.h"
#include "rd_tree_step.h"

/* ------------------------------------------------------------------ */
/* The measuring table                                                 */
/* ------------------------------------------------------------------ */

/* The measuring table's capacity (profile.h): the workload's if its tree
 * fits limit bytes, else the smallest capacity with the same height, else
 * the largest that fits (never below batch). */
static uint32_t table_capacity(const rd_profile_key_t *k, double limit) {
  uint32_t cap = k->capacity;
  if ((double)rd_sumtree_memsize(cap, k->fanout) <= limit) return cap;
  uint64_t blocks[RD_ST_MAX_LEVELS];
  uint32_t h = rd_st_shape(cap, k->fanout, blocks);
  uint32_t lk = rd_st_log2(k->fanout);
  if (h >= 2) {
    uint64_t same = ((uint64_t)1 << (lk * (h - 1))) + 1;
    if (same <= cap && (double)rd_sumtree_memsize((uint32_t)same, k->fanout) <= limit)
      return (uint32_t)same;
  }
  uint32_t lo = k->batch, hi = cap; /* largest fitting capacity in [batch, cap] */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if ((double)rd_sumtree_memsize(mid, k->fanout) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

void rd_profile_table_free(rd_profile_table_t *c) {
  if (c->t.tree.mem != NULL) rd_table_free(&c->t);
  free(c->keys);
  free(c->pool_keys);
  free(c->probs);
  free(c->weights);
  free(c->prio[0]);
  free(c->prio[1]);
  memset(c, 0, sizeof *c);
}

int rd_profile_table_sample(void *p, rd_error_t *err) {
  rd_profile_table_t *c = p;
  return rd_table_sample(&c->t, c->batch, 0.4, 0, &c->out, err);
}

int rd_profile_table_update(void *p, rd_error_t *err) {
  rd_profile_table_t *c = p;
  uint32_t j = c->next++;
  return rd_table_update(&c->t, c->batch, c->pool_keys + (size_t)(j % c->n_pool) * c->batch,
                         c->prio[j & 1], NULL, err);
}

/* Build and fill the measuring table; stop filling at fill_end (keeping at
 * least one batch). */
int rd_profile_table_setup(rd_profile_table_t *c, const rd_profile_shape_t *s, double tree_limit,
                           double fill_end, rd_error_t *err) {
  memset(c, 0, sizeof *c);
  const rd_profile_key_t *k = &s->key;
  rd_table_config_t tc;
  rd_table_config_default(&tc);
  tc.schema.n_fields = 1; /* a 1-byte row: sample and update never read rows */
  snprintf(tc.schema.fields[0].name, sizeof tc.schema.fields[0].name, "x");
  tc.schema.fields[0].dtype = RD_DTYPE_UINT8;
  tc.capacity = table_capacity(k, tree_limit);
  tc.fanout = k->fanout;
  /* The priority transform costs what its class costs (table.c: alpha 0,
   * 1/2 and 1 are special cases, anything else is a pow()); epsilon and
   * max_priority (the fixed-point scale) cost nothing, and the defaults
   * keep the synthetic priorities representable for any alpha. */
  tc.alpha = s->alpha == 0.0 || s->alpha == 0.5 || s->alpha == 1.0 ? s->alpha : 0.6;
  tc.seed = DATA_SEED;
  uint32_t chunk = tc.capacity < FILL_CHUNK ? tc.capacity : FILL_CHUNK;
  tc.max_batch = k->batch > chunk ? k->batch : chunk;
  int rc = rd_table_init(&c->t, &tc, err);
  if (rc) return rc;
  c->batch = k->batch;
  /* Update batches of sampled keys: enough of them (UPDATE_POOL_KEYS keys)
   * that the paths they update are not all in cache, as in the running
   * loop, where every update writes a freshly sampled batch's leaves (a
   * pool of 4 batches of 64 updated in 1.6 us; inside bench_loop's loop the
   * update took 3.9 us). 2^18 / 65536 = 4: at least 4 batches up to
   * 65536 items, then one. */
  c->n_pool = k->batch <= 65536 ? UPDATE_POOL_KEYS / k->batch : 1;
  size_t b = k->batch;
  uint8_t *row = calloc(chunk, 1);
  double *raw = malloc((size_t)chunk * sizeof *raw);
  c->keys = malloc(b * sizeof *c->keys);
  c->probs = malloc(b * sizeof *c->probs);
  c->weights = malloc(b * sizeof *c->weights);
  c->pool_keys = malloc(c->n_pool * b * sizeof *c->pool_keys);
  c->prio[0] = malloc(b * sizeof(double));
  c->prio[1] = malloc(b * sizeof(double));
  if (row == NULL || raw == NULL || c->keys == NULL || c->probs == NULL || c->weights == NULL ||
      c->pool_keys == NULL || c->prio[0] == NULL || c->prio[1] == NULL) {
    rc = rd_error_set(err, RD_ENOMEM, "out of memory for a measuring table of %u items",
                      tc.capacity);
    goto out;
  }
  /* Raw priorities (|TD error|-like) between 0.01 and 2, so the leaves
   * differ and descents take varied paths. */
  uint64_t seed = DATA_SEED;
  for (uint32_t i = 0; i < chunk; i++) raw[i] = 0.01 + 2.0 * (double)rd_profile_unif(&seed, 0, 1);
  for (size_t i = 0; i < b; i++) {
    c->prio[0][i] = 0.01 + 2.0 * (double)rd_profile_unif(&seed, 0, 1);
    c->prio[1][i] = 0.01 + 2.0 * (double)rd_profile_unif(&seed, 0, 1);
  }
  uint64_t filled = 0;
  while (filled < tc.capacity) {
    uint32_t n = tc.capacity - filled < chunk ? (uint32_t)(tc.capacity - filled) : chunk;
    rd_cbuf_t col = {row, n};
    if ((rc = rd_table_insert(&c->t, n, &col, raw, NULL, err)) != RD_OK) goto out;
    filled += n;
    if (filled >= k->batch && rd_clock_now() > fill_end) break;
  }
  c->out = (rd_sample_out_t){c->keys, c->probs, c->weights, NULL};
  for (uint32_t j = 0; j < c->n_pool; j++) {
    rd_sample_out_t o = {c->pool_keys + (size_t)j * b, c->probs, c->weights, NULL};
    if ((rc = rd_table_sample(&c->t, b, 0.4, 0, &o, err)) != RD_OK) goto out;
    if (j >= 3 && rd_clock_now() > fill_end) { /* the setup share is spent: fewer batches */
      c->n_pool = j + 1;
      break;
    }
  }
out:
  free(row);
  free(raw);
  if (rc) rd_profile_table_free(c);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The train-step                                                      */
/* ------------------------------------------------------------------ */

void rd_profile_train_free(rd_profile_train_t *c) {
  if (c->live) rd_learner_free(&c->l);
  free(c->mem);
  free(c->td);
  free(c->ai);
  memset(c, 0, sizeof *c);
}

int rd_profile_train_call(void *p, rd_error_t *err) {
  rd_profile_train_t *c = p;
  uint32_t j = c->next++;
  int rc = rd_learner_step(&c->l, &c->b[j % c->n_b], c->td, NULL, err);
  /* A non-finite step did the work and changed nothing: still a step. */
  return rc == RD_ERANGE ? RD_OK : rc;
}

/* Floats one synthetic batch needs, or 0 if it would exceed MAX_BATCH_BYTES. */
size_t rd_profile_batch_floats(const rd_learner_config_t *lc, uint32_t batch) {
  size_t per_row = 2 * (size_t)lc->obs_dim + 3 + (lc->algo == RD_ALGO_DDPG ? lc->action_dim : 0);
  size_t n = per_row * batch;
  return n * sizeof(float) > MAX_BATCH_BYTES ? 0 : n;
}

/* Synthetic batches as bench/bench_learner.c makes them: observations in
 * [-1, 1), rewards in [-1, 1), IS weights in [0.2, 1), discount 0.99 with
 * every fifth row terminal, valid actions. */
int rd_profile_train_data(rd_profile_train_t *c, const rd_learner_config_t *lc, uint32_t batch,
                          rd_error_t *err) {
  memset(c, 0, sizeof *c);
  size_t per = rd_profile_batch_floats(lc, batch);
  c->n_b = per * sizeof(float) * 2 <= (32u << 20) ? 2 : 1;
  size_t O = lc->obs_dim, A = lc->algo == RD_ALGO_DDPG ? lc->action_dim : 0;
  c->mem = malloc(per * c->n_b * sizeof(float));
  c->td = malloc((size_t)batch * sizeof(float));
  if (lc->algo == RD_ALGO_DQN) c->ai = malloc((size_t)batch * c->n_b * sizeof(int32_t));
  if (c->mem == NULL || c->td == NULL || (lc->algo == RD_ALGO_DQN && c->ai == NULL)) {
    rd_profile_train_free(c);
    return rd_error_set(err, RD_ENOMEM, "out of memory for train-step batches of %u rows", batch);
  }
  uint64_t seed = DATA_SEED ^ batch;
  float *p = c->mem;
  for (uint32_t k = 0; k < c->n_b; k++) {
    float *obs = p, *next = obs + batch * O, *rew = next + batch * O, *disc = rew + batch,
          *w = disc + batch, *af = w + batch;
    p = af + batch * A;
    for (size_t i = 0; i < batch * O; i++) {
      obs[i] = rd_profile_unif(&seed, -1, 1);
      next[i] = rd_profile_unif(&seed, -1, 1);
    }
    for (size_t i = 0; i < batch; i++) {
      rew[i] = rd_profile_unif(&seed, -1, 1);
      w[i] = rd_profile_unif(&seed, 0.2f, 1.0f);
      disc[i] = i % 5 == 4 ? 0.0f : 0.99f;
    }
    int32_t *ai = NULL;
    if (lc->algo == RD_ALGO_DQN) {
      ai = c->ai + (size_t)k * batch;
      for (size_t i = 0; i < batch; i++)
        ai[i] = (int32_t)(rd_splitmix64(&seed) % lc->num_actions);
    } else {
      for (size_t i = 0; i < batch * A; i++)
        af[i] = rd_profile_unif(&seed, lc->action_low, lc->action_high);
    }
    c->b[k] = (rd_batch_t){batch, obs, ai, A ? af : NULL, rew, disc, next, w};
  }
  return RD_OK;
}

/* A conservative estimate of one train-step of `batch` rows: about 10 B P
 * flops for DQN (online forward on s and s', target forward, backward),
 * 8 B P_actor + 14 B P_critic for DDPG, at TRAIN_FLOPS_PER_S. Only the
 * calibration step is guarded by it: real rates differ by 100x between
 * CPUs (this project's VM runs the Hopper step at about 190 GFLOP/s). */
double rd_profile_train_estimate(const rd_learner_config_t *lc, uint32_t batch) {
  rd_nn_spec_t s;
  if (rd_learner_policy_spec(lc, &s, NULL) != RD_OK) return 0;
  double flops, pa = (double)rd_nn_spec_params(&s);
  if (lc->algo == RD_ALGO_DQN) {
    flops = 10.0 * batch * pa;
  } else {
    if (rd_learner_critic_spec(lc, &s, NULL) != RD_OK) return 0;
    flops = 8.0 * batch * pa + 14.0 * batch * (double)rd_nn_spec_params(&s);
  }
  return flops / TRAIN_FLOPS_PER_S;
}

/* Bytes a learner's first step touches for the first time: activation and
 * backward buffers for `batch` rows, estimated as rd_pipeline_memsize does
 * (every layer's units x 2 networks x 3 buffers per network). */
double rd_profile_learner_buffer_bytes(const rd_learner_config_t *lc, uint32_t batch) {
  rd_nn_spec_t specs[2];
  int n = 0;
  if (rd_learner_policy_spec(lc, &specs[n], NULL) == RD_OK) n++;
  if (lc->algo == RD_ALGO_DDPG && rd_learner_critic_spec(lc, &specs[n], NULL) == RD_OK) n++;
  double units = 0;
  for (int i = 0; i < n; i++)
    for (uint32_t l = 0; l <= specs[i].n_layers; l++) units += specs[i].sizes[l];
  return (double)batch * units * 2 * 3 * sizeof(float);
}

/* Bytes of a new learner's parameters: online x4 (weights, gradients, two
 * Adam moments) and the target, as rd_pipeline_memsize counts them. */
double rd_profile_learner_param_bytes(const rd_learner_config_t *lc) {
  rd_nn_spec_t s;
  double params = 0;
  if (rd_learner_policy_spec(lc, &s, NULL) == RD_OK) params += (double)rd_nn_spec_params(&s);
  if (lc->algo == RD_ALGO_DDPG && rd_learner_critic_spec(lc, &s, NULL) == RD_OK)
    params += (double)rd_nn_spec_params(&s);
  return params * 5 * sizeof(float);
}

/* ------------------------------------------------------------------ */
/* The pipeline's own costs: gather, handoff, pass                     */
/* ------------------------------------------------------------------ */

void rd_profile_gather_free(rd_profile_gather_t *g) {
  for (uint32_t c = 0; c < RD_PROFILE_MAX_COLS; c++) {
    free(g->col[c]);
    free(g->dst[c]);
  }
  free(g->idx);
  memset(g, 0, sizeof *g);
}

/* The gather's five columns are the learner's fields (rd_profile_shape_init's
 * order: obs, action, reward, next_obs, done or discount), as a learner
 * reads them: then the strict-loop profile trains on what it gathers. */
static bool learner_columns(const rd_profile_shape_t *s) {
  if (!s->has_learner || s->n_cols != 5) return false;
  const rd_learner_config_t *lc = &s->learner;
  const size_t obs = (size_t)lc->obs_dim * sizeof(float);
  const size_t act = lc->algo == RD_ALGO_DQN ? sizeof(int32_t) : lc->action_dim * sizeof(float);
  return s->col_bytes[0] == obs && s->col_bytes[1] == act && s->col_bytes[2] == sizeof(float) &&
         s->col_bytes[3] == obs && (s->col_bytes[4] == 1 || s->col_bytes[4] == sizeof(float));
}

/* Rows a learner accepts (a pattern, cheap to write), in the five learner
 * columns (learner_columns' order; fb[4] 1: done, else discount), rows
 * first .. first + n - 1: observations and rewards in [-0.5, 0.5), valid
 * actions, every fifth row terminal. */
void rd_profile_fill_learner_rows(uint8_t *const col[5], const size_t fb[5], uint64_t first,
                                  uint64_t n, const rd_learner_config_t *lc) {
  const uint32_t O = lc->obs_dim, A = lc->algo == RD_ALGO_DQN ? 1 : lc->action_dim;
  float *obs = (float *)col[0], *rew = (float *)col[2], *next = (float *)col[3];
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = first + i;
    for (uint32_t j = 0; j < O; j++) {
      obs[i * O + j] = (float)((r * 7 + j * 3) % 16) / 16.0f - 0.5f;
      next[i * O + j] = (float)((r * 5 + j * 11) % 16) / 16.0f - 0.5f;
    }
    rew[i] = (float)(r % 8) / 8.0f - 0.5f;
    if (lc->algo == RD_ALGO_DQN) {
      ((int32_t *)col[1])[i] = (int32_t)(r % lc->num_actions);
    } else {
      for (uint32_t j = 0; j < A; j++)
        ((float *)col[1])[i * A + j] =
            lc->action_low + (lc->action_high - lc->action_low) * (float)((r + j) % 8) / 8.0f;
    }
    if (fb[4] == 1)
      col[4][i] = r % 5 == 4;
    else
      ((float *)col[4])[i] = r % 5 == 4 ? 0.0f : 0.99f;
  }
}

int rd_profile_shape_trains_on_gather(const rd_profile_shape_t *s) {
  return s != NULL && learner_columns(s) && s->key.batch <= s->learner.max_batch;
}

int rd_profile_gather_setup(rd_profile_gather_t *g, const rd_profile_shape_t *s, rd_error_t *err) {
  memset(g, 0, sizeof *g);
  g->batch = s->key.batch;
  uint64_t row = 0;
  if (s->n_cols == 0) { /* no learner fields known: the whole row as one */
    g->n_cols = 1;
    g->fb[0] = s->row_bytes > 0 ? s->row_bytes : 1;
  } else {
    g->n_cols = s->n_cols < RD_PROFILE_MAX_COLS ? s->n_cols : RD_PROFILE_MAX_COLS;
    for (uint32_t c = 0; c < g->n_cols; c++) g->fb[c] = s->col_bytes[c] > 0 ? s->col_bytes[c] : 1;
  }
  for (uint32_t c = 0; c < g->n_cols; c++) row += g->fb[c];
  uint64_t rows = s->key.capacity, fit = GATHER_MAX_BYTES / row;
  if (rows > fit) rows = fit;
  if (rows < 1) rows = 1;
  g->rows = rows;
  uint64_t n_idx = (uint64_t)g->batch * 4 > GATHER_POOL_MIN ? (uint64_t)g->batch * 4
                                                             : GATHER_POOL_MIN;
  g->n_idx = (uint32_t)n_idx;
  g->idx = malloc(n_idx * sizeof *g->idx);
  int ok = g->idx != NULL;
  for (uint32_t c = 0; ok && c < g->n_cols; c++) {
    g->col[c] = malloc(rows * g->fb[c]);
    g->dst[c] = malloc((size_t)g->batch * g->fb[c]);
    ok = g->col[c] != NULL && g->dst[c] != NULL;
    if (ok) memset(g->col[c], 0x3c, rows * g->fb[c]);
  }
  if (ok && learner_columns(s)) rd_profile_fill_learner_rows(g->col, g->fb, 0, rows, &s->learner);
  if (!ok) {
    rd_profile_gather_free(g);
    return rd_error_set(err, RD_ENOMEM, "out of memory for the gather profile");
  }
  uint64_t seed = DATA_SEED ^ 0x6761746865ull;
  for (uint64_t i = 0; i < n_idx; i++) g->idx[i] = (uint32_t)(rd_splitmix64(&seed) % rows);
  return RD_OK;
}

/* rd_table_gather's copy loop (backends/cpu/table.c) on the next window:
 * row by row, each row's slot by one division (the table's key % capacity;
 * here index % rows), the rows GATHER_AHEAD on prefetched. */
#define GATHER_AHEAD 8
int rd_profile_gather_call(void *p, rd_error_t *err) {
  (void)err;
  rd_profile_gather_t *g = p;
  uint32_t first = g->next;
  g->next = (g->next + g->batch) % (g->n_idx - g->batch + 1);
  const uint32_t *idx = g->idx + first;
  size_t ahead[GATHER_AHEAD];
  for (uint32_t i = 0; i < g->batch && i < GATHER_AHEAD; i++) {
    ahead[i] = idx[i] % g->rows;
    for (uint32_t c = 0; c < g->n_cols; c++) __builtin_prefetch(g->col[c] + ahead[i] * g->fb[c]);
  }
  for (uint32_t i = 0; i < g->batch; i++) {
    size_t slot = ahead[i % GATHER_AHEAD];
    if (i + GATHER_AHEAD < g->batch) {
      size_t next = idx[i + GATHER_AHEAD] % g->rows;
      ahead[i % GATHER_AHEAD] = next;
      for (uint32_t c = 0; c < g->n_cols; c++) __builtin_prefetch(g->col[c] + next * g->fb[c]);
    }
    for (uint32_t c = 0; c < g->n_cols; c++)
      memcpy(g->dst[c] + i * g->fb[c], g->col[c] + slot * g->fb[c], g->fb[c]);
  }
  return RD_OK;
}