/* learner_backend.c - the learner backend interface (learner_backend.h):
 * the ops table by kind and the calls every backend goes through. The
 * backends themselves live in their folders (backends/cpu/learner_backend_cpu.c,
 * backends/gpu/learner_backend_gpu.c, backends/fpga/learner_backend_{fpga,xrt}.c). */
#include "learner_backend.h"

#include <string.h>

const rd_learner_ops_t *rd_learner_ops_for(rd_learner_kind_t kind) {
  switch (kind) {
  case RD_LEARNER_ON_GPU: return &rd_learner_ops_gpu;
  case RD_LEARNER_ON_FPGA: return &rd_learner_ops_fpga;
  default: return &rd_learner_ops_cpu;
  }
}

const char *rd_learner_kind_name(rd_learner_kind_t kind) {
  switch (kind) {
  case RD_LEARNER_ON_CPU: return "cpu";
  case RD_LEARNER_ON_GPU: return "gpu";
  case RD_LEARNER_ON_FPGA: return "fpga";
  default: return "?";
  }
}

int rd_learner_fault_gives_up_device(int fault) { return fault == RD_LEARNER_FAULT_DEVICE; }

int rd_learner_backend_adopt(rd_learner_backend_t *b, void *l, int rc, void (*discard)(void *l)) {
  if (rc) {
    discard(l);
    return rc;
  }
  b->impl = l;
  return RD_OK;
}

void rd_learner_backend_release(rd_learner_backend_t *b, void (*release)(void *impl)) {
  if (b->impl == NULL) return;
  release(b->impl);
  b->impl = NULL;
}

int rd_learner_backend_init(rd_learner_backend_t *b, const rd_learner_ops_t *ops,
                            const rd_learner_config_t *c, uint32_t device, rd_error_t *err) {
  memset(b, 0, sizeof *b);
  b->ops = ops;
  b->device = device;
  int rc = ops->init(b, c, device, err);
  if (rc) {
    int fault = b->fault;
    if (b->impl != NULL) ops->destroy(b);
    memset(b, 0, sizeof *b);
    b->fault = fault;
  }
  return rc;
}

void rd_learner_backend_destroy(rd_learner_backend_t *b) {
  if (b->ops != NULL && b->impl != NULL) b->ops->destroy(b);
  b->impl = NULL;
}
