/* team.h - a small persistent thread team for the learner's data-parallel
 * step (learner.h: shards).
 *
 * Why not an OpenMP parallel region per step phase: a sleeping libgomp
 * thread takes tens of microseconds to wake (whole scheduler ticks when
 * another process is busy), and a region's end waits for every team
 * thread to arrive, late or not, which is long against a small network's
 * step. Here:
 *  - the calling thread takes part, and tasks are claimed one at a time,
 *    so a late worker costs nothing: the caller simply runs the tasks the
 *    worker did not claim, and waits only for tasks a worker already
 *    started. Task q < 32 goes first to thread q % threads (its home; the
 *    caller is thread 0), so a job of one task per thread runs each task
 *    on the same thread from job to job, and the data a task leaves in its
 *    core's cache is there for the same task of the next job;
 *  - a worker spins for RD_TEAM_SPIN_US after its last task before it
 *    sleeps on a futex, so the phases of one step, and consecutive steps,
 *    find it awake; an idle learner's workers sleep.
 * Which thread runs a task never changes what it computes, so results do
 * not depend on the team (the learner's tasks write disjoint outputs).
 *
 * Jobs are serialized: one rd_team_run at a time per team (the learner's
 * thread). No allocation after create.
 *
 * Idle work. Between jobs a worker mostly waits (the caller runs a step's
 * serial parts meanwhile). An owner with work of its own that any thread
 * may do, in small pieces, can offer it with rd_team_set_idle: the
 * pipeline hands its sampler's work to the learner's workers this way, so
 * that on a machine with as many CPUs as learner threads the sampler does
 * not take a core from the team in the middle of a job.
 */
#ifndef RD_TEAM_H
#define RD_TEAM_H

#include <stdint.h>

#include "rd_error.h"

#define RD_TEAM_MAX_THREADS 64u
#define RD_TEAM_SPIN_US 200u

typedef struct rd_team rd_team_t;

/* A job: fn(arg, i) for every task i in [0, n). */
typedef void (*rd_team_fn)(void *arg, uint32_t task);

/* Idle work: returns 1 if it did some, 0 if it had none. */
typedef int (*rd_team_idle_fn)(void *arg);

/* A team of `threads` (2..RD_TEAM_MAX_THREADS): the caller of rd_team_run
 * and threads - 1 workers started here. RD_EINVAL, RD_ENOMEM, RD_EINTERNAL
 * (a thread could not start). */
int rd_team_create(rd_team_t **out, uint32_t threads, rd_error_t *err);

/* Stops and joins the workers; NULL is fine. */
void rd_team_destroy(rd_team_t *t);

/* Runs the job and returns when every task is done. t NULL or solo != 0:
 * the caller runs every task itself, in order. */
void rd_team_run(rd_team_t *t, int solo, uint32_t n, rd_team_fn fn, void *arg);

/* After it has run out of a job's tasks, a worker calls fn(arg), and again
 * while fn did work and no new job has come (fn NULL: nothing). fn runs
 * beside the caller's serial code and other workers' fn; it must not use
 * the team, never block for long, and should do little per call: a job
 * published meanwhile runs its tasks on the caller until the worker is
 * back. Returns when no worker is inside the previous fn any more, so the
 * caller may free that fn's arg once it set another (or NULL). Any thread;
 * t NULL is fine (no workers, nothing to do). */
void rd_team_set_idle(rd_team_t *t, rd_team_idle_fn fn, void *arg);

#endif
