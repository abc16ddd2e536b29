/* fpga_part.h - synthetic FPGA parts for the model's tests
 * (test_fpga_model.c, test_fpga_rmm.c): every resource given, all of it
 * usable, 48-bit DSP ALUs. Header-only. */
#ifndef RD_TEST_FPGA_PART_H
#define RD_TEST_FPGA_PART_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

static inline void test_fpga_part(rd_fpga_part_t *p, const char *name, uint32_t slrs,
                                  uint64_t dsp, uint64_t lut, uint64_t ff, uint64_t bram36,
                                  uint64_t uram, uint32_t clock_mhz) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->slrs = slrs;
  p->per_slr.dsp = dsp;
  p->per_slr.lut = lut;
  p->per_slr.ff = ff;
  p->per_slr.bram36 = bram36;
  p->per_slr.uram = uram;
  p->usable_pct = 100;
  p->clock_mhz = clock_mhz;
  p->dsp_alu_bits = 48;
}

#endif
