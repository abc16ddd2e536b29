/* learner_pool.c - see learner_pool.h. */
#include "learner_pool.h"

#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "learner_shapes.h"

void learner_pool_init(learner_pool_t *p, const rd_learner_config_t *c, uint32_t batch) {
  memset(p, 0, sizeof *p);
  size_t n = (size_t)batch * LEARNER_POOL, O = c->obs_dim;
  p->obs = xmalloc(n * O * sizeof(float));
  p->next = xmalloc(n * O * sizeof(float));
  p->reward = xmalloc(n * sizeof(float));
  p->discount = xmalloc(n * sizeof(float));
  p->w = xmalloc(n * sizeof(float));
  p->td = xmalloc(batch * sizeof(float));
  uint64_t s = SEED ^ batch;
  for (size_t i = 0; i < n * O; i++) {
    p->obs[i] = unif(s, 2 * i, -1, 1);
    p->next[i] = unif(s, 2 * i + 1, -1, 1);
  }
  for (size_t i = 0; i < n; i++) {
    p->reward[i] = unif(s + 1, i, -1, 1);
    p->w[i] = unif(s + 2, i, 0.2f, 1.0f);
    p->discount[i] = i % 5 == 4 ? 0.0f : 0.99f;
  }
  if (c->algo == RD_ALGO_DQN) {
    p->ai = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) p->ai[i] = (int32_t)(rd_philox_u64(s + 3, i) % c->num_actions);
  } else {
    p->af = xmalloc(n * c->action_dim * sizeof(float));
    for (size_t i = 0; i < n * c->action_dim; i++)
      p->af[i] = unif(s + 4, i, c->action_low, c->action_high);
  }
  for (size_t k = 0; k < LEARNER_POOL; k++) {
    size_t r = k * batch;
    p->b[k] = (rd_batch_t){batch,           p->obs + r * O,
                           p->ai ? p->ai + r : NULL,
                           p->af ? p->af + r * c->action_dim : NULL,
                           p->reward + r,   p->discount + r,
                           p->next + r * O, p->w + r};
  }
}

void learner_pool_free(learner_pool_t *p) {
  free(p->obs);
  free(p->next);
  free(p->reward);
  free(p->discount);
  free(p->w);
  free(p->af);
  free(p->ai);
  free(p->td);
}
