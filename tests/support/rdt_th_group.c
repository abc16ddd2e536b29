/* rdt_th_group.c - see rdt_th_group.h. */
#include "rdt_th_group.h"

#include <errno.h>
#include <stdint.h>

/* The group of the thread running this, for rdt_th_stopping and
 * rdt_th_arrive: a worker's fn has only its context and index. */
static _Thread_local rdt_th_group_t *current;

static void *th_main(void *arg) {
  rdt_th_call_t *c = arg;
  current = c->g;
  return (void *)(intptr_t)(c->fn(c->ctx, c->i) != 0);
}

int rdt_th_start(rdt_th_group_t *g, int n, rdt_th_fn fn, void *ctx) {
  if (n < 0 || g->n + n > RDT_TH_MAX) return EINVAL;
  for (int i = 0; i < n; i++) {
    rdt_th_call_t *c = &g->call[g->n];
    *c = (rdt_th_call_t){g, fn, ctx, i};
    int rc = pthread_create(&g->th[g->n], NULL, th_main, c);
    if (rc != 0) return rc;
    g->n++;
  }
  return 0;
}

int rdt_th_join(rdt_th_group_t *g) {
  int failed = 0;
  for (int i = 0; i < g->n; i++) {
    void *ret = NULL;
    if (pthread_join(g->th[i], &ret) != 0 || ret != NULL) failed++;
  }
  g->n = 0;
  return failed;
}

int rdt_th_stop(rdt_th_group_t *g) {
  atomic_store(&g->stop, 1);
  return rdt_th_join(g);
}

int rdt_th_stopping(void) {
  return current != NULL && atomic_load(&current->stop);
}

void rdt_th_arrive(void) {
  if (current != NULL) atomic_fetch_add(&current->arrived, 1);
}

int rdt_th_arrived(rdt_th_group_t *g) {
  return atomic_load(&g->arrived);
}

int rdt_th_run(int n, rdt_th_fn fn, void *ctx) {
  rdt_th_group_t g = {0};
  int rc = rdt_th_start(&g, n, fn, ctx);
  int failed = rdt_th_join(&g);
  return rc != 0 ? -1 : failed;
}
