/* devices.h - the devices this daemon found at start.
 *
 * Discovery runs once, at start (rd_devices_init):
 *  - the CPU, always: model, logical cores, L1d/L2/L3 sizes, memory and
 *    the widest vector ISA the CPU kernels can use (from /proc/cpuinfo,
 *    /proc/meminfo and /sys/devices/system/cpu, with sysconf as fallback
 *    where /sys has no cache directories, as in some VMs);
 *  - GPUs through the CUDA runtime, when built with CUDA (meson option
 *    `cuda`) and one is present (devices_cuda.c; devices_nocuda.c otherwise);
 *  - FPGA boards through XRT, when built with XRT (meson option `xrt`;
 *    devices_xrt.c) and XILINX_XRT is set: each board xrtDeviceOpen opens
 *    (backend "xrt"), or XRT's no-op shim under XCL_EMULATION_MODE=noop
 *    (backend "xrt-noop": listed, never used: no kernel executes there);
 *  - and, when configured (`fpga-csim = PART`, rd_devices_add_fpga_csim),
 *    one FPGA run as C-simulation (backend "csim", devices_fpga.c): the
 *    kernels' own C code in this process, modelled as that part. No board.
 * An absent device kind is simply not listed; why it is absent is logged
 * once.
 *
 * Fingerprints. Each device has a stable fingerprint, kind + "-" + 16 hex
 * digits of a 64-bit FNV-1a hash of what determines its performance, and
 * nothing else: for a CPU the model string, logical cores, cache sizes,
 * memory rounded to GiB and the ISA level (a VM may hide AVX-512 of the
 * same model); for a GPU its name, SM count, memory (MiB) and compute
 * capability; for an FPGA its model (the board's name, or the part of a
 * C-simulation), SLRs, memory (MiB) and backend ("csim", "xrt",
 * "xrt-noop"), so a C-simulated u250 never shares profiles with a board.
 * Not the hostname, a PCI address or a driver version, so
 * identical machines share profiles (papers/001 §VI: the performance table
 * is a property of the hardware), a restart finds its profiles again, and
 * a plan for a GPU box can be made elsewhere from its exported profiles.
 */
#ifndef RD_DEVICES_H
#define RD_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "rd_error.h"

#define RD_MAX_DEVICES 16
#define RD_DEVICE_FP_MAX 24 /* "cpu-" + 16 hex digits + NUL fits with room */

typedef struct {
  char kind[8];         /* "cpu", "gpu", "fpga" */
  char name[160];       /* for people: model and the figures below */
  char fingerprint[RD_DEVICE_FP_MAX]; /* e.g. "cpu-" + 16 hex digits */
  char status[256];     /* "ok ..." while usable, else "unusable: " + why
                           (rd_devices_mark_unusable); a GPU's also says
                           which of its backends ever ran on a GPU */
  /* What the fingerprint is made of, and what a mapper needs. */
  char model[128];      /* CPU model name, GPU name; FPGA: the board's name (XRT) or the
                           part file's name of a C-simulation ("u250") */
  uint32_t index;       /* among devices of its kind (a GPU's CUDA ordinal) */
  uint32_t cores;       /* CPU: logical CPUs online; GPU: multiprocessors; FPGA: SLRs
                           (0 = unknown) */
  uint64_t memory_bytes; /* CPU: MemTotal; GPU: global memory; FPGA: board memory (a
                            C-simulation has none: its storage is host memory) */
  uint64_t l1d_bytes, l2_bytes, l3_bytes; /* per core/cluster as reported; 0 = unknown */
  char isa[16];         /* CPU: "avx512", "avx2" or "baseline"; GPU: "sm_XY";
                           FPGA: its backend, as below */
  char backend[16];     /* what drives it: "cpu", "cuda"; FPGA: "csim" (C-simulation, no
                           board), "xrt" (a board), "xrt-noop" (XRT's no-op shim) */
  char capabilities[64]; /* what this daemon's backends run here, e.g. "sumtree,table,learner" */
} rd_device_t;

/* Discover once (thread-safe, idempotent) and log each device found and
 * each kind absent. */
void rd_devices_init(void);
/* Copy up to max devices into out (the CPU first); returns the count. */
size_t rd_devices_get(rd_device_t *out, size_t max);
/* The CPU device (every daemon has one). */
void rd_devices_cpu(rd_device_t *out);

/* 1 if d can take work: its status starts with "ok". */
int rd_device_usable(const rd_device_t *d);

/* Give up a device after a failure the daemon saw on it (a GPU learner's
 * init or step failed with no device, out of memory, a driver or cuBLAS
 * error: learner_backend.h). Its status becomes "unusable: " + why, which
 * ListDevices and later placements see (placement.c leaves it out). Logged
 * once; later calls for the same device keep the first reason. Returns 1
 * if a device of that kind and index is listed, else 0. Thread-safe. */
int rd_devices_mark_unusable(const char *kind, uint32_t index, const char *why);

/* Tests only: append d to the list as if a probe had found it (after
 * discovery; ignored when the list is full). */
void rd_devices_inject(const rd_device_t *d);

/* ---- Probes, one per device kind; rd_devices_init calls each once ---- */

/* Read the CPU from files under root: root + "/proc/cpuinfo",
 * "/proc/meminfo", "/sys/devices/system/cpu/online" and
 * "/sys/devices/system/cpu/cpu0/cache/index*". root NULL or "" is this
 * machine, where sysconf fills what the files lack; another root (tests)
 * uses the files only. Always fills *out (unknown parts 0 or "unknown")
 * and its fingerprint. */
void rd_devices_probe_cpu(const char *root, rd_device_t *out);

/* GPUs through the CUDA runtime (devices_cuda.c), or none when built
 * without CUDA (devices_nocuda.c). Fills up to max devices and returns the
 * count; when it returns 0, why (len bytes) says why, for the log. */
size_t rd_devices_probe_gpus(rd_device_t *out, size_t max, char *why, size_t len);

/* FPGA boards through XRT (devices_fpga.c, devices_xrt.c). Without XRT in
 * the build it returns 0 with why = "built without XRT: no FPGA discovery".
 * With it: 0 and why when XILINX_XRT is unset (XRT would abort the process
 * on a device open), when XCL_EMULATION_MODE names an emulation this
 * machine cannot run (sw_emu, hw_emu: they need Vitis), or when XRT opens
 * no board (it prints its own error banner then); otherwise each board XRT
 * opens by index, named from the shim's device info, or the one device of
 * XRT's no-op shim (status "unusable: ...": no kernel executes there).
 * A board's index is its XRT device index (the one xrtDeviceOpen, the
 * XRT replay module and the XRT learner take), so indices may skip one XRT
 * could not open. */
size_t rd_devices_probe_fpgas(rd_device_t *out, size_t max, char *why, size_t len);

/* The FPGA part called name, as every lookup of the daemon makes it (the
 * C-simulation device, placement, Plan): from parts_dir, the fpga-parts-dir
 * setting, when it is given; with parts_dir NULL from the installed parts
 * (rd_fpga_parts_default_dir) and then, for a replayd that runs from its
 * build directory (not installed), from the source tree's
 * backends/fpga/parts. An installed replayd never reads the source tree.
 * RD_ENOTFOUND names every directory searched, what each holds and the
 * --fpga-parts-dir flag; RD_EINVAL for a malformed name or part file. */
int rd_devices_fpga_part(const char *name, const char *parts_dir, rd_fpga_part_t *out,
                         rd_error_t *err);

/* The directories rd_devices_fpga_part searches for parts_dir, in order,
 * into dirs[0..n) (n is 1 or 2); the strings live as long as the process. */
size_t rd_devices_fpga_parts_dirs(const char *parts_dir, const char *dirs[2]);

/* The C-simulation FPGA (devices_fpga.c) modelled as the part called part
 * (rd_devices_fpga_part: parts_dir or, NULL, the default search): kind "fpga",
 * backend "csim", model = the part's name, index after the FPGAs XRT
 * found (above the highest FPGA index listed), status "ok: C-simulation (no
 * board) ...". Fills *out only. */
int rd_devices_fpga_csim(const char *part, const char *parts_dir, uint32_t index,
                         rd_device_t *out, rd_error_t *err);

/* Add the C-simulation FPGA to the list (after discovery; main.c calls it
 * for the `fpga-csim` setting) and log it. RD_ENOTFOUND or RD_EINVAL for a
 * part that is not there (the message names what the parts dir has),
 * RD_EINVAL if one is already listed, RD_ETOOBIG if the list is full.
 * Nothing is added on error. Thread-safe. */
int rd_devices_add_fpga_csim(const char *part, const char *parts_dir, rd_error_t *err);

/* Whether an xclbin is configured for XRT boards (the `fpga-xclbin`
 * setting; placement.c's rd_placement_setup_xrt calls this): an XRT
 * board's status and capabilities say whether anything runs on it (see
 * rd_devices_xrt_board_text). Rewrites the usable boards already listed and
 * sets what later discovery writes. Thread-safe. */
void rd_devices_set_fpga_xclbin(int configured);

/* An XRT board's status and capabilities (devices_fpga.c): with an xclbin
 * configured, "ok (XRT board): runs the kernels of the fpga-xclbin ..."
 * (placement.h says when); without one, "ok (XRT board); no xclbin
 * configured ...". Both say replayd has never run on a board. */
void rd_devices_xrt_board_text(int xclbin, rd_device_t *d);

/* Set d->fingerprint from d's kind and identifying fields (see above). */
void rd_device_fingerprint(rd_device_t *d);

#endif
