/* learner_rows.h - helpers of the learner backend tests
 * (test_learner_backend.c, test_fpga_xrt_ops.c): a backend's init that
 * must succeed, its policy saved, and a small batch of learner rows,
 * n <= 64 rows of up to 8
 * observations and 2 action dimensions, deterministic in seed; 3-step
 * discounts (0.99^3, or 0 at an episode's end), IS weights in
 * [0.25, 1.0], actions in range. */
#ifndef RD_TEST_LEARNER_ROWS_H
#define RD_TEST_LEARNER_ROWS_H

#include "learner.h" /* and cmocka.h before this header: the helpers assert */
#include "learner_backend.h"

typedef struct {
  float obs[64 * 8], next[64 * 8], rew[64], disc[64], w[64], af[64 * 2];
  int32_t ai[64];
  rd_batch_t b;
} rows_t;

static void rows(rows_t *r, const rd_learner_config_t *c, size_t n, uint32_t seed) {
  const size_t O = c->obs_dim, D = c->action_dim ? c->action_dim : 1;
  assert_true(n <= 64 && O <= 8 && D <= 2);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < O; j++) {
      x = x * 1664525u + 1013904223u;
      r->obs[i * O + j] = (float)((x >> 8) % 2001) / 1000.0f - 1.0f;
      r->next[i * O + j] = r->obs[i * O + j] * 0.9f + 0.05f;
    }
    x = x * 1664525u + 1013904223u;
    r->rew[i] = (float)((x >> 8) % 301) / 100.0f - 1.5f;
    r->disc[i] = (x >> 20) % 6 == 0 ? 0.0f : 0.970299f; /* 0.99^3 or the end */
    r->w[i] = 0.25f + (float)((x >> 12) % 76) / 100.0f;
    r->ai[i] = (int32_t)((x >> 4) % (c->num_actions ? c->num_actions : 1));
    for (size_t j = 0; j < D; j++)
      r->af[i * D + j] = c->action_low + (c->action_high - c->action_low) *
                                             (float)((x >> (6 + j)) % 101) / 100.0f;
  }
  rd_batch_t b = {n, r->obs, c->algo == RD_ALGO_DQN ? r->ai : NULL,
                  c->algo == RD_ALGO_DDPG ? r->af : NULL, r->rew, r->disc, r->next, r->w};
  r->b = b;
}

/* Init b on ops for c (device 0); fails the test with the message. */
static inline void backend_init_ok(rd_learner_backend_t *b, const rd_learner_ops_t *ops,
                                   const rd_learner_config_t *c) {
  rd_error_t err;
  rd_error_clear(&err);
  int rc = rd_learner_backend_init(b, ops, c, 0, &err);
  if (rc) fail_msg("%s init: %s", ops->name, err.msg);
  assert_int_equal(b->fault, 0);
}

/* The policy of b, saved into buf; its length. */
static inline size_t backend_save(rd_learner_backend_t *b, uint8_t *buf, size_t cap) {
  size_t w = 0;
  rd_error_t err;
  if (b->ops->policy_save(b, buf, cap, &w, &err) != RD_OK) fail_msg("save: %s", err.msg);
  assert_int_equal(w, b->ops->policy_bytes(b));
  return w;
}

#endif
