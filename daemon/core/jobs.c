/* jobs.c - bounded work queues served by their own threads (jobs.h).
 *
 * A ring of max_waiting slots under one mutex; runners sleep on a
 * condition variable. Nothing is allocated after creation.
 */
#include "jobs.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

typedef struct {
  rd_job_fn fn;
  void *arg;
} job_t;

struct rd_jobs {
  char name[32];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job_t *ring;
  uint32_t cap, head, count; /* waiting jobs: ring[head .. head + count) mod cap */
  uint32_t running;
  bool stopping;
  int nice;
  uint32_t n_threads;
  pthread_t *threads;
};

static void *runner(void *arg) {
  rd_jobs_t *q = arg;
  /* Raising one's own nice needs no privilege, and on Linux it applies to
   * this thread alone. Without it the work only competes evenly. */
  if (q->nice > 0 && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), q->nice) != 0)
    rd_log_warn("jobs", "%s: could not lower a runner's priority; it competes evenly", q->name);
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (q->count == 0 && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
    if (q->stopping) break; /* what still waits is rd_jobs_stop's to cancel */
    job_t j = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    q->running++;
    pthread_mutex_unlock(&q->mu);
    j.fn(j.arg, 0);
    pthread_mutex_lock(&q->mu);
    q->running--;
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

int rd_jobs_create(rd_jobs_t **out, const char *name, uint32_t threads, uint32_t max_waiting,
                   int nice, rd_error_t *err) {
  if (threads == 0 || max_waiting == 0)
    return rd_error_set(err, RD_EINVAL, "a job queue needs at least one thread and one slot");
  rd_jobs_t *q = calloc(1, sizeof *q);
  if (q == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for job queue %s", name);
  snprintf(q->name, sizeof q->name, "%s", name);
  q->cap = max_waiting;
  q->nice = nice;
  q->ring = calloc(max_waiting, sizeof *q->ring);
  q->threads = calloc(threads, sizeof *q->threads);
  if (q->ring == NULL || q->threads == NULL) {
    free(q->ring);
    free(q->threads);
    free(q);
    return rd_error_set(err, RD_ENOMEM, "out of memory for job queue %s", name);
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  for (uint32_t i = 0; i < threads; i++) {
    if (pthread_create(&q->threads[i], NULL, runner, q) != 0) {
      q->n_threads = i;
      rd_jobs_stop(q);
      return rd_error_set(err, RD_EINTERNAL, "cannot start the threads of job queue %s", name);
    }
  }
  q->n_threads = threads;
  *out = q;
  return RD_OK;
}

int rd_jobs_submit(rd_jobs_t *q, rd_job_fn fn, void *arg, rd_error_t *err) {
  pthread_mutex_lock(&q->mu);
  int rc = RD_OK;
  if (q->stopping) {
    rc = rd_error_set(err, RD_ECANCELED, "the server is shutting down");
  } else if (q->count == q->cap) {
    rc = rd_error_set(err, RD_EBUSY, "%u %s jobs are already waiting; retry later", q->count,
                      q->name);
  } else {
    q->ring[(q->head + q->count) % q->cap] = (job_t){fn, arg};
    q->count++;
    pthread_cond_signal(&q->cv);
  }
  pthread_mutex_unlock(&q->mu);
  return rc;
}

uint32_t rd_jobs_pending(rd_jobs_t *q) {
  pthread_mutex_lock(&q->mu);
  uint32_t n = q->count + q->running;
  pthread_mutex_unlock(&q->mu);
  return n;
}

void rd_jobs_stop(rd_jobs_t *q) {
  pthread_mutex_lock(&q->mu);
  q->stopping = true;
  pthread_cond_broadcast(&q->cv);
  /* Cancel the waiting jobs one at a time outside the lock: a cancelled
   * job may finish a gRPC call, which must not run under our mutex. */
  uint32_t cancelled = 0;
  while (q->count > 0) {
    job_t j = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_mutex_unlock(&q->mu);
    j.fn(j.arg, 1);
    cancelled++;
    pthread_mutex_lock(&q->mu);
  }
  pthread_mutex_unlock(&q->mu);
  for (uint32_t i = 0; i < q->n_threads; i++) pthread_join(q->threads[i], NULL);
  if (cancelled) rd_log_info("jobs", "%s: %u waiting jobs cancelled at shutdown", q->name, cancelled);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q->ring);
  free(q->threads);
  free(q);
}
