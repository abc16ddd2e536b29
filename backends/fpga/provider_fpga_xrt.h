/* provider_fpga_xrt.h - the FPGA provider's XRT half: what provider_fpga.c
 * asks of XRT. Defined by provider_fpga_xrt.c in a build with XRT and by
 * provider_fpga_noxrt.c without it (meson picks one; provider_fpga.h says
 * what each does). Internal to the FPGA provider. */
#ifndef RD_PROVIDER_FPGA_XRT_H
#define RD_PROVIDER_FPGA_XRT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "learner_backend.h"
#include "rd_error.h"
#include "table.h"

/* 1 if this build has XRT (the XRT replay module and learner exist). */
int rd_fpga_provider_xrt_built(void);

/* Configure the XRT replay module and learner for the xclbin at path, the
 * replay module on board `device` with the replay kernel build `shape`;
 * path NULL clears both. RD_EINVAL when a module refuses (the message
 * names what). Nothing stays configured on error. */
int rd_fpga_provider_xrt_configure(const char *path, uint32_t device,
                                   const rd_fpga_xclbin_shape_t *shape, rd_error_t *err);

/* The XRT replay module's memsize for a table (table.h rd_rmm_ops_t): 0
 * when the configured kernel build cannot hold it, or without XRT. */
size_t rd_fpga_provider_xrt_rmm_memsize(uint32_t capacity, uint32_t fanout);

/* The XRT replay module and learner backend; NULL without XRT. */
const rd_rmm_ops_t *rd_fpga_provider_xrt_rmm_ops(void);
const rd_learner_ops_t *rd_fpga_provider_xrt_learner_ops(void);

/* The fpga-xclbin setting as boards' status text says it (provider_fpga.c),
 * for discovery. */
int rd_fpga_provider_xclbin(void);

#endif
