/* plan.h - what a Plan request assumes: GPU profile lines (JSON, as
 * ExportProfiles writes them) and an FPGA part, in place of or besides
 * this server's devices (placement.h rd_placement_assume_t).
 */
#ifndef RD_PLAN_H
#define RD_PLAN_H

#include "placement.h"
#include "rd_error.h"
#include "status.h"
#include "replayd.pb-c.h"

typedef struct {
  rd_placement_assume_t assume; /* points into gpu and part */
  rd_profile_t *gpu;            /* owned */
  rd_fpga_part_t part;
} rd_plan_assume_t;

/* Read q's assumptions (parts_dir: --fpga-parts-dir, NULL for the default
 * search). Errors, with r failed: RD_EINVAL (a bad line, naming it; a GPU
 * line for a device that is not a GPU; an unknown part), RD_ETOOBIG (more
 * than RD_PLAN_GPU_MAX_BYTES or RD_PLACEMENT_MAX_GPU_ROWS lines),
 * RD_ENOMEM. Release with rd_plan_assume_free, whatever it returned. */
int rd_plan_assume(const Replayd__V1__PlanRequest *q, const char *parts_dir, rd_plan_assume_t *out,
                   rd_reply_t *r);
void rd_plan_assume_free(rd_plan_assume_t *a);

#endif
