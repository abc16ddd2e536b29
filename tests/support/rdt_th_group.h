/* rdt_th_group.h - a group of worker threads for the tests' races (the
 * threaded tests also run under TSan in CI), in place of each test's
 * argument structs and pthread_create/join loops.
 *
 * Contract: a group starts zeroed (rdt_th_group_t g = {0}). rdt_th_start
 * adds n threads to g, thread i of the call (0 <= i < n) running
 * fn(ctx, i); it returns 0, or pthread_create's error (the threads started
 * before it stay in g). At most RDT_TH_MAX threads in a group. fn returns
 * 0, or non-zero for a failure: cmocka's assertions belong on the test's
 * thread, so a thread reports and the test asserts on the count.
 * rdt_th_join joins every thread of g and returns how many failed;
 * rdt_th_stop first raises g's stop flag, which rdt_th_stopping() reads on
 * the group's threads (workers that loop until the test has seen enough).
 * rdt_th_arrive(), on a thread of a group, adds one to the group's count
 * of arrivals, which rdt_th_arrived(g) reads: a thread saying it got past
 * a point, or how much work the threads did between them.
 * rdt_th_run starts n threads, joins them and returns how many failed, or
 * -1 when one could not start.
 */
#ifndef RDT_TH_GROUP_H
#define RDT_TH_GROUP_H

#include <pthread.h>
#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDT_TH_MAX 16

typedef int (*rdt_th_fn)(void *ctx, int i);

typedef struct rdt_th_group rdt_th_group_t;

/* One thread's call, kept for it in its group. */
typedef struct {
  rdt_th_group_t *g;
  rdt_th_fn fn;
  void *ctx;
  int i;
} rdt_th_call_t;

struct rdt_th_group {
  int n;
  atomic_int stop, arrived;
  pthread_t th[RDT_TH_MAX];
  rdt_th_call_t call[RDT_TH_MAX];
};

int rdt_th_start(rdt_th_group_t *g, int n, rdt_th_fn fn, void *ctx);
int rdt_th_join(rdt_th_group_t *g);
int rdt_th_stop(rdt_th_group_t *g);
int rdt_th_stopping(void);
void rdt_th_arrive(void);
int rdt_th_arrived(rdt_th_group_t *g);
int rdt_th_run(int n, rdt_th_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
