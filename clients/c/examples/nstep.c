/* nstep.c - see nstep.h. */
#include "nstep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int nstep_init(nstep_t *ns, uint32_t n, double gamma, uint32_t obs_dim, uint32_t action_bytes) {
  memset(ns, 0, sizeof *ns);
  if (n == 0 || n > NSTEP_MAX_N || !(gamma >= 0 && gamma <= 1) || obs_dim == 0 ||
      obs_dim > NSTEP_MAX_OBS || action_bytes == 0 || action_bytes > NSTEP_MAX_ACTION_BYTES)
    return -1;
  ns->n = n;
  ns->gamma = gamma;
  ns->obs_dim = obs_dim;
  ns->action_bytes = action_bytes;
  ns->obs = malloc((size_t)n * obs_dim * sizeof *ns->obs);
  ns->action = malloc((size_t)n * action_bytes);
  ns->reward = malloc((size_t)n * sizeof *ns->reward);
  if (ns->obs == NULL || ns->action == NULL || ns->reward == NULL) {
    nstep_free(ns);
    return -1;
  }
  return 0;
}

void nstep_free(nstep_t *ns) {
  free(ns->obs);
  free(ns->action);
  free(ns->reward);
  memset(ns, 0, sizeof *ns);
}

void nstep_reset(nstep_t *ns) {
  ns->head = 0;
  ns->len = 0;
}

int nstep_batch_init(nstep_batch_t *b, size_t cap, uint32_t obs_dim, uint32_t action_bytes) {
  memset(b, 0, sizeof *b);
  if (cap == 0 || cap > (1u << 24) || obs_dim == 0 || obs_dim > NSTEP_MAX_OBS ||
      action_bytes == 0 || action_bytes > NSTEP_MAX_ACTION_BYTES)
    return -1;
  b->obs_dim = obs_dim;
  b->action_bytes = action_bytes;
  b->cap = cap;
  b->obs = malloc(cap * obs_dim * sizeof(float));
  b->next_obs = malloc(cap * obs_dim * sizeof(float));
  b->reward = malloc(cap * sizeof(float));
  b->discount = malloc(cap * sizeof(float));
  b->action = malloc(cap * action_bytes);
  if (!b->obs || !b->next_obs || !b->reward || !b->discount || !b->action) {
    nstep_batch_free(b);
    return -1;
  }
  return 0;
}

void nstep_batch_free(nstep_batch_t *b) {
  free(b->obs);
  free(b->next_obs);
  free(b->reward);
  free(b->discount);
  free(b->action);
  memset(b, 0, sizeof *b);
}

/* Emit the row of the oldest pending step, whose window is the len steps
 * pending now (m = len), and drop it. */
static void emit_oldest(nstep_t *ns, const float *next_obs, int terminated, nstep_batch_t *out) {
  const uint32_t m = ns->len, d = ns->obs_dim;
  double R = 0, g = 1;
  for (uint32_t k = 0; k < m; k++) {
    R += g * ns->reward[(ns->head + k) % ns->n];
    g *= ns->gamma;
  }
  size_t r = out->count++;
  memcpy(out->obs + r * d, ns->obs + (size_t)ns->head * d, d * sizeof(float));
  memcpy(out->action + r * ns->action_bytes, ns->action + (size_t)ns->head * ns->action_bytes,
         ns->action_bytes);
  out->reward[r] = (float)R;
  memcpy(out->next_obs + r * d, next_obs, d * sizeof(float));
  out->discount[r] = terminated ? 0.0f : (float)g; /* g = gamma^m */
  ns->head = (ns->head + 1) % ns->n;
  ns->len--;
}

int nstep_push(nstep_t *ns, const float *obs, const void *action, float reward,
               const float *next_obs, int terminated, int truncated, nstep_batch_t *out) {
  if (out->obs_dim != ns->obs_dim || out->action_bytes != ns->action_bytes ||
      out->count > out->cap || out->cap - out->count < ns->n)
    return -1;
  /* The ring has room: a full window was emitted by the previous push. */
  uint32_t slot = (ns->head + ns->len) % ns->n;
  memcpy(ns->obs + (size_t)slot * ns->obs_dim, obs, ns->obs_dim * sizeof(float));
  memcpy(ns->action + (size_t)slot * ns->action_bytes, action, ns->action_bytes);
  ns->reward[slot] = reward;
  ns->len++;
  int emitted = 0;
  if (terminated || truncated) {
    /* Episode over: every pending window ends here, shorter and shorter. */
    while (ns->len > 0) {
      emit_oldest(ns, next_obs, terminated, out);
      emitted++;
    }
    ns->head = 0;
  } else if (ns->len == ns->n) {
    emit_oldest(ns, next_obs, 0, out);
    emitted = 1;
  }
  return emitted;
}
