/* plan.c - a Plan's assumed devices. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "handlers.h"
#include "profile_jsonl.h"
#include "provider_fpga.h"

static int blank(const char *p, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
  return 1;
}

/* One assumed GPU profile line into *row. */
static int gpu_row(const char *p, size_t len, size_t line, rd_profile_t *row, rd_reply_t *r) {
  rd_error_t e;
  rd_error_clear(&e);
  if (rd_profile_jsonl_parse(p, len, row, &e) != RD_OK)
    return rd_reply_error(r, RD_EINVAL, "gpu_profiles line %zu: %s", line, e.msg);
  if (strncmp(row->device_fp, "gpu-", 4) != 0)
    return rd_reply_error(r, RD_EINVAL, "gpu_profiles line %zu: device \"%s\" is not a GPU "
                          "(\"gpu-...\")", line, row->device_fp);
  return RD_OK;
}

/* The JSON lines of d as profiles, bounded; none for an empty d. */
static int gpu_rows(const ProtobufCBinaryData *d, rd_profile_t **out, size_t *n,
                    rd_reply_t *r) {
  if (d->len == 0) return RD_OK;
  if (d->len > RD_PLAN_GPU_MAX_BYTES)
    return rd_reply_error(r, RD_ETOOBIG, "gpu_profiles is %zu bytes; at most %u", d->len,
                          RD_PLAN_GPU_MAX_BYTES);
  *out = calloc(RD_PLACEMENT_MAX_GPU_ROWS, sizeof **out);
  if (*out == NULL) return rd_reply_error(r, RD_ENOMEM, "out of memory for the GPU profiles");
  const char *p = (const char *)d->data, *end = p + d->len;
  for (size_t line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (!blank(p, len)) {
      if (*n == RD_PLACEMENT_MAX_GPU_ROWS)
        return rd_reply_error(r, RD_ETOOBIG, "gpu_profiles has more than %d lines",
                              RD_PLACEMENT_MAX_GPU_ROWS);
      int rc = gpu_row(p, len, line, &(*out)[*n], r);
      if (rc) return rc;
      (*n)++;
    }
    p += len + (nl ? 1 : 0);
  }
  if (*n == 0) return rd_reply_error(r, RD_EINVAL, "gpu_profiles has no profile lines");
  return RD_OK;
}

int rd_plan_assume(const Replayd__V1__PlanRequest *q, const char *parts_dir, rd_plan_assume_t *a,
                   rd_reply_t *r) {
  memset(a, 0, sizeof *a);
  a->assume.ignore_present = q->ignore_present;
  if (q->fpga_part[0] != '\0') {
    if (strlen(q->fpga_part) >= RD_FPGA_NAME_MAX)
      return rd_reply_error(r, RD_EINVAL, "fpga_part is longer than %d bytes",
                            RD_FPGA_NAME_MAX - 1);
    rd_error_t e;
    rd_error_clear(&e);
    /* A part the client names and this server lacks is a bad argument. */
    if (rd_fpga_provider_part(q->fpga_part, parts_dir, &a->part, &e) != RD_OK)
      return rd_reply_error(r, RD_EINVAL, "fpga_part: %s", e.msg);
    a->assume.fpga = &a->part;
  }
  int rc = gpu_rows(&q->gpu_profiles, &a->gpu, &a->assume.n_gpu_rows, r);
  a->assume.gpu_rows = a->gpu;
  return rc;
}

void rd_plan_assume_free(rd_plan_assume_t *a) {
  free(a->gpu);
  memset(a, 0, sizeof *a);
}
