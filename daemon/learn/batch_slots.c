/* batch_slots.c - batch slot memory (batch_slots.h). */
#include "batch_slots.h"

#include <stdlib.h>

#include "learner_bind.h"

size_t rd_batch_slot_item_bytes(const rd_pipeline_config_t *c, const rd_schema_t *s) {
  size_t b = sizeof(uint64_t) + 3 * sizeof(double) + 3 * sizeof(float);
  for (uint32_t f = 0; f < s->n_fields; f++)
    if (rd_learner_bind_is_field(c, (int)f)) b += rd_field_bytes(&s->fields[f]);
  return b;
}

void rd_batch_slots_free(rd_batch_slot_t *slots, uint32_t n) {
  if (slots == NULL) return;
  for (uint32_t i = 0; i < n; i++) {
    rd_batch_slot_t *s = &slots[i];
    free(s->keys);
    free(s->prob);
    free(s->w64);
    free(s->w);
    free(s->td);
    free(s->prio);
    free(s->discount);
    for (uint32_t f = 0; f < RD_SCHEMA_MAX_FIELDS; f++) free(s->cols[f].data);
  }
  free(slots);
}

rd_batch_slot_t *rd_batch_slots_alloc(uint32_t n, const rd_pipeline_config_t *c,
                                      const rd_schema_t *schema) {
  const size_t B = c->batch;
  rd_batch_slot_t *slots = calloc(n, sizeof *slots);
  int ok = slots != NULL;
  for (uint32_t i = 0; ok && i < n; i++) {
    rd_batch_slot_t *s = &slots[i];
    ok = (s->keys = malloc(B * sizeof *s->keys)) && (s->prob = malloc(B * sizeof *s->prob)) &&
         (s->w64 = malloc(B * sizeof *s->w64)) && (s->w = malloc(B * sizeof *s->w)) &&
         (s->td = malloc(B * sizeof *s->td)) && (s->prio = malloc(B * sizeof *s->prio));
    if (ok && c->f_done >= 0) ok = (s->discount = malloc(B * sizeof *s->discount)) != NULL;
    for (uint32_t f = 0; ok && f < schema->n_fields; f++) {
      if (!rd_learner_bind_is_field(c, (int)f)) continue;
      s->cols[f].bytes = B * rd_field_bytes(&schema->fields[f]);
      ok = (s->cols[f].data = malloc(s->cols[f].bytes)) != NULL;
    }
  }
  if (!ok) {
    rd_batch_slots_free(slots, n);
    return NULL;
  }
  return slots;
}
