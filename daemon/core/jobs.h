/* jobs.h - bounded work queues served by their own threads.
 *
 * Work that can take long (profiling and mapping a workload, SQLite writes
 * that fsync, stopping a learner) must not run on gRPC's completion-queue
 * threads: every client's call waits behind it there. A queue has a fixed
 * number of threads and a fixed number of waiting jobs, both set at
 * creation; a full queue refuses at once, so a flood of slow calls costs
 * the server only the refusals and never a thread or memory per call.
 *
 * A job runs exactly once: fn(arg, 0) on a queue thread, or fn(arg, 1)
 * ("cancelled", on the thread that stops the queue) when the queue stops
 * before it started. Either way the job owns arg afterwards.
 */
#ifndef RD_JOBS_H
#define RD_JOBS_H

#include <stdint.h>

#include "rd_error.h"

typedef struct rd_jobs rd_jobs_t;
typedef void (*rd_job_fn)(void *arg, int cancelled);

/* threads >= 1 runners; at most max_waiting jobs queued beyond the ones
 * running. name appears in log lines and errors. nice > 0 lowers the
 * runners' scheduling priority by that much (per thread; 0 leaves it), so
 * that their work yields the CPU to the daemon's other threads. */
int rd_jobs_create(rd_jobs_t **out, const char *name, uint32_t threads, uint32_t max_waiting,
                   int nice, rd_error_t *err);

/* Queue fn(arg). RD_EBUSY when max_waiting jobs already wait, RD_ECANCELED
 * once the queue is stopping; the job is not taken then (the caller still
 * owns arg) and err says so. */
int rd_jobs_submit(rd_jobs_t *q, rd_job_fn fn, void *arg, rd_error_t *err);

/* Jobs running or waiting right now. */
uint32_t rd_jobs_pending(rd_jobs_t *q);

/* Refuse new jobs, cancel the waiting ones (fn(arg, 1) here), wait for the
 * running ones to return, join the threads and free the queue. */
void rd_jobs_stop(rd_jobs_t *q);

#endif
