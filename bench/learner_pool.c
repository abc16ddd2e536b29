/* learner_pool.c - see learner_pool.h. */
#include "learner_pool.h"

#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "learner_shapes.h"

void learner_pool_init(learner_pool_t *p, const rd_learner_config_t *c, uint32_t batch) {
  memset(p, 0, sizeof *p);
  const size_t O = c->obs_dim, A = c->action_dim;
  rdt_batch_make(&p->rows, c, (size_t)batch * LEARNER_POOL, SEED ^ batch);
  p->td = xmalloc(batch * sizeof(float));
  const rd_batch_t *all = &p->rows.b;
  for (size_t k = 0; k < LEARNER_POOL; k++) {
    size_t r = k * batch;
    p->b[k] = (rd_batch_t){batch,           all->obs + r * O,
                           all->action_i ? all->action_i + r : NULL,
                           all->action_f ? all->action_f + r * A : NULL,
                           all->reward + r, all->discount + r,
                           all->next_obs + r * O, all->weights + r};
  }
}

void learner_pool_free(learner_pool_t *p) {
  rdt_batch_free(&p->rows);
  free(p->td);
}
