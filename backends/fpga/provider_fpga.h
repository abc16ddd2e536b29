/* provider_fpga.h - the FPGA's device provider (daemon/dse/provider.h:
 * rd_provider_fpga, provider_fpga.c): the C-simulation FPGA and XRT
 * boards, their figures from the analytical model (model.h), and which
 * kernel, if any, runs a part mapped to them.
 *
 * provider_fpga.c is built everywhere: the part files, the C-simulation
 * device (`fpga-csim = PART`: the kernels' C code in this process, no
 * board), the FPGA row from the model and the bind. Its XRT half
 * (provider_fpga_xrt.c: board discovery, the XRT replay module and
 * learner) is built only with XRT (meson option `xrt`); without it
 * provider_fpga_noxrt.c answers: no board is found and an xclbin is
 * refused with "built without XRT". Nothing of replayd has run on a board.
 */
#ifndef RD_PROVIDER_FPGA_H
#define RD_PROVIDER_FPGA_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "devices.h"
#include "model.h"
#include "pipeline.h"
#include "rd_error.h"
#include "table.h"

/* ---- Devices ---- */

/* FPGA boards through XRT (provider_fpga_xrt.c). Without XRT in the build
 * it returns 0 with why = "built without XRT: no FPGA discovery". With it:
 * 0 and why when XILINX_XRT is unset (XRT would abort the process on a
 * device open), when XCL_EMULATION_MODE names an emulation this machine
 * cannot run (sw_emu, hw_emu: they need Vitis), or when XRT opens no board
 * (it prints its own error banner then); otherwise each board XRT opens by
 * index, named from the shim's device info, or the one device of XRT's
 * no-op shim (status "unusable: ...": no kernel executes there). A board's
 * index is its XRT device index (the one xrtDeviceOpen, the XRT replay
 * module and the XRT learner take), so indices may skip one XRT could not
 * open. */
size_t rd_fpga_provider_discover(rd_device_t *out, size_t max, char *why, size_t len);

/* The FPGA part called name, as every lookup of the daemon makes it (the
 * C-simulation device, placement, Plan): from parts_dir, the fpga-parts-dir
 * setting, when it is given; with parts_dir NULL from the installed parts
 * (rd_fpga_parts_default_dir) and then, for a replayd that runs from its
 * build directory (not installed), from the source tree's
 * backends/fpga/parts. An installed replayd never reads the source tree.
 * RD_ENOTFOUND names every directory searched, what each holds and the
 * --fpga-parts-dir flag; RD_EINVAL for a malformed name or part file. */
int rd_fpga_provider_part(const char *name, const char *parts_dir, rd_fpga_part_t *out,
                          rd_error_t *err);

/* The directories rd_fpga_provider_part searches for parts_dir, in order,
 * into dirs[0..n) (n is 1 or 2); the strings live as long as the process. */
size_t rd_fpga_provider_parts_dirs(const char *parts_dir, const char *dirs[2]);

/* The C-simulation FPGA modelled as the part called part
 * (rd_fpga_provider_part: parts_dir or, NULL, the default search): kind
 * "fpga", backend "csim", model = the part's name, index as given, status
 * "ok: C-simulation (no board) ...". Fills *out only. */
int rd_fpga_provider_csim(const char *part, const char *parts_dir, uint32_t index,
                          rd_device_t *out, rd_error_t *err);

/* Add the C-simulation FPGA to the device list (after discovery; main.c
 * calls it for the `fpga-csim` setting), indexed after every FPGA listed,
 * and log it. RD_ENOTFOUND or RD_EINVAL for a part that is not there (the
 * message names what the parts dir has), RD_EINVAL if one is already
 * listed, RD_ETOOBIG if the list is full. Nothing is added on error.
 * Thread-safe. */
int rd_fpga_provider_add_csim(const char *part, const char *parts_dir, rd_error_t *err);

/* An XRT board's status and capabilities: with an xclbin configured, "ok
 * (XRT board): ... run the kernels of the fpga-xclbin setting ..." (see
 * rd_fpga_provider_run for when); without one, "ok (XRT board); no xclbin
 * configured ...". Both say replayd has never run on a board. */
void rd_fpga_provider_board_text(int xclbin, rd_device_t *d);

/* ---- The fpga-xclbin setting ---- */

/* The XRT kernels at start (main.c): with c->fpga_xclbin set, check it is
 * an xclbin file ("xclbin2" magic), configure the XRT replay module
 * (rd_fpga_xrt_rmm_configure: the first usable XRT board's index, the
 * path, c->fpga_xclbin_shape with its derived leaf bound) and the XRT
 * learner (rd_learner_fpga_xrt_configure), rewrite the boards' status
 * text (rd_fpga_provider_board_text), and let placements use them. With it
 * empty, clear all of that. Errors name fpga-xclbin: RD_EINVAL for a
 * non-empty path in a build without XRT ("built without XRT"), a file that
 * cannot be read or is not an xclbin, or a configuration the modules
 * refuse; nothing is configured then. No usable XRT board is not an error
 * (logged: nothing runs on an FPGA board then). Call after device
 * discovery, before any placement; not concurrently with placements. */
int rd_fpga_provider_setup_xrt(const rd_config_t *c, rd_error_t *err);

/* ---- What runs a part mapped to an FPGA ---- */

typedef enum {
  RD_FPGA_RUN_CPU = 0, /* no kernel runs it there: the CPU does (why says so) */
  RD_FPGA_RUN_CSIM,    /* the kernel's C-simulation in this process (backend "csim") */
  RD_FPGA_RUN_XRT,     /* the kernel on an XRT board, from the fpga-xclbin setting */
} rd_fpga_run_t;

/* Who runs a part (the replay module or the learner) that the mapping put
 * on FPGA device d. Pure: it reads only its arguments.
 *   d        the FPGA's entry (kind, backend, index, status); NULL: an
 *            assumed part (a plan), which runs nothing
 *   xrt      this build has XRT (the XRT replay module and learner exist)
 *   xclbin   an xclbin is configured (fpga-xclbin)
 *   fits     the part fits the kernel build that would run it on d (the
 *            caller asks that kernel's module); fit_why says why not
 * A usable C-simulation FPGA: RD_FPGA_RUN_CSIM if it fits. A usable XRT
 * board (backend "xrt"): RD_FPGA_RUN_XRT if built with XRT, an xclbin is
 * configured and it fits. Anything else, XRT's no-op shim ("xrt-noop": no
 * kernel executes there) whatever its status says: RD_FPGA_RUN_CPU, with
 * why (len bytes) saying why; why is "" otherwise. */
rd_fpga_run_t rd_fpga_provider_run(const rd_device_t *d, int xrt, int xclbin, int fits,
                                   const char *fit_why, char *why, size_t len);

/* The FPGA model's view of a workload (for the row, tests and tools). */
int rd_fpga_provider_workload(const rd_table_config_t *tc, const rd_pipeline_config_t *pc,
                              rd_fpga_workload_t *out, rd_error_t *err);

#endif
