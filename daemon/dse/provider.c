/* provider.c - the list of device providers (provider.h). */
#include "provider.h"

#include <string.h>

static const rd_device_provider_t *const providers[RD_DEV_COUNT] = {
    [RD_DEV_CPU] = &rd_provider_cpu,
    [RD_DEV_GPU] = &rd_provider_gpu,
    [RD_DEV_FPGA] = &rd_provider_fpga,
};

const rd_device_provider_t *const *rd_providers(void) { return providers; }

const rd_device_provider_t *rd_provider_for(const char *kind) {
  for (int r = 0; r < RD_DEV_COUNT; r++)
    if (kind != NULL && strcmp(providers[r]->kind, kind) == 0) return providers[r];
  return NULL;
}

int rd_provider_bind_parts(const rd_device_provider_t *p, rd_placement_t *o,
                           const rd_table_config_t *tc, const rd_learner_config_t *lc,
                           char run[RD_PART_COUNT], int runs[RD_PART_COUNT],
                           char why[RD_PART_COUNT][RD_ERROR_MSG_MAX]) {
  const rd_mapping_t *m = &o->mapping;
  const rd_devkind_t want[RD_PART_COUNT] = {m->learner, m->rmm, m->storage};
  const rd_device_t *d = o->has_device[p->row] ? &o->device[p->row] : NULL;
  int missing = 0;
  for (int i = 0; i < RD_PART_COUNT; i++) {
    why[i][0] = '\0';
    runs[i] = 0;
    if (want[i] != p->row) continue;
    rd_dse_runner_t r;
    memset(&r, 0, sizeof r);
    runs[i] = p->can_run(d, (rd_part_t)i, tc, lc, &r, why[i], RD_ERROR_MSG_MAX);
    if (!runs[i]) {
      missing++;
      continue;
    }
    run[i] = rd_devkind_letter(p->row);
    if (i == RD_PART_LEARNER) {
      o->learner_kind = r.learner_kind;
      o->learner_device = r.learner_device;
      o->learner_ops = r.learner_ops;
    } else {
      if (r.rmm_ops != NULL) o->rmm_ops = r.rmm_ops;
      if (r.storage_ops != NULL) o->storage_ops = r.storage_ops;
    }
  }
  return missing;
}

void rd_provider_append(char *buf, size_t cap, const char *text) {
  size_t n = strnlen(buf, cap);
  if (n + 1 >= cap) return;
  size_t len = strlen(text);
  if (len > cap - n - 1) len = cap - n - 1;
  memcpy(buf + n, text, len);
  buf[n + len] = '\0';
}

void rd_provider_add_why(char *why, size_t cap, const char *text) {
  if (why[0]) rd_provider_append(why, cap, "; ");
  rd_provider_append(why, cap, text);
}
