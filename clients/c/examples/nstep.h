/* nstep.h - n-step transitions as Ape-X actors build them (papers/003,
 * Horgan et al. 2018), in the row layout replayd's hosted learner reads.
 *
 * The actor pushes every environment step (obs_t, a_t, r_t, obs_{t+1},
 * terminated, truncated). A window of the last n steps is kept; each row
 * is emitted once its window is complete:
 *
 *   obs       obs_t
 *   action    a_t
 *   reward    R = sum_{k<m} gamma^k r_{t+k}
 *   next_obs  obs_{t+m}   (the observation after the window's last step)
 *   discount  gamma^m, or 0 if the episode terminated within the window
 *
 * with m = n for a full window. At an episode end every pending window is
 * flushed with the m <= n steps it has: after a truncation (time limit)
 * with discount gamma^m, so the learner bootstraps from the last
 * observation; after a termination with discount 0. So each environment
 * step yields exactly one row, and the learner's target
 * y = R + discount * Q'(next_obs, .) is the n-step return either way.
 *
 * Rows go into a caller-visible column batch (one array per field, the
 * layout of an insert), so the actor sends it as is.
 *
 * Allocation: nstep_init and nstep_batch_init allocate everything; pushing
 * never allocates. Not thread-safe.
 */
#ifndef RDC_NSTEP_H
#define RDC_NSTEP_H

#include <stddef.h>
#include <stdint.h>

#define NSTEP_MAX_N 64
#define NSTEP_MAX_OBS 65536u
#define NSTEP_MAX_ACTION_BYTES 4096u

/* Columns of up to `cap` rows: obs and next_obs obs_dim floats per row,
 * action action_bytes per row (an int32 or float32[k], copied raw). */
typedef struct {
  uint32_t obs_dim, action_bytes;
  size_t cap, count;
  float *obs, *next_obs, *reward, *discount;
  uint8_t *action;
} nstep_batch_t;

typedef struct {
  uint32_t n, obs_dim, action_bytes;
  double gamma;
  uint32_t head, len;   /* ring of the pending steps, oldest at head */
  float *obs;           /* n x obs_dim */
  uint8_t *action;      /* n x action_bytes */
  double *reward;       /* n */
} nstep_t;

/* 0, or -1 if an argument is out of range (n 1..NSTEP_MAX_N, gamma in
 * [0, 1], obs_dim 1..NSTEP_MAX_OBS, action_bytes 1..NSTEP_MAX_ACTION_BYTES)
 * or memory is short. */
int nstep_init(nstep_t *ns, uint32_t n, double gamma, uint32_t obs_dim, uint32_t action_bytes);
void nstep_free(nstep_t *ns);

/* Drop the pending steps without emitting them (an actor that abandons an
 * episode midway, e.g. after an error). */
void nstep_reset(nstep_t *ns);

/* Steps pushed but not emitted yet. */
static inline uint32_t nstep_pending(const nstep_t *ns) { return ns->len; }

/* cap 1..2^24 rows; 0 or -1 (range or memory). */
int nstep_batch_init(nstep_batch_t *b, size_t cap, uint32_t obs_dim, uint32_t action_bytes);
void nstep_batch_free(nstep_batch_t *b);
/* Room a push needs in the batch: a step can emit up to n rows. */
static inline int nstep_batch_fits(const nstep_t *ns, const nstep_batch_t *b) {
  return b->cap - b->count >= ns->n;
}

/* Push one environment step and append the rows it completes to out.
 * Returns the number of rows appended (0..n), or -1 if out has room for
 * fewer than n more rows or its layout differs from ns (nothing changes
 * then: flush the batch and push again). A terminated or truncated step
 * ends the episode: the next push starts a new one. */
int nstep_push(nstep_t *ns, const float *obs, const void *action, float reward,
               const float *next_obs, int terminated, int truncated, nstep_batch_t *out);

#endif
