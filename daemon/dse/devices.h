/* devices.h - the devices this daemon found at start.
 *
 * Discovery runs once, at start (rd_devices_init): each device provider
 * (provider.h) lists the devices of its kind, in table order:
 *  - the CPU, always (backends/cpu/provider_cpu.c): model, logical cores,
 *    L1d/L2/L3 sizes, memory and the widest vector ISA the CPU kernels can
 *    use;
 *  - GPUs through the CUDA runtime, when built with CUDA (meson option
 *    `cuda`) and one is present (backends/gpu/provider_gpu_cuda.c);
 *  - FPGA boards through XRT, when built with XRT (meson option `xrt`) and
 *    XILINX_XRT is set (backends/fpga/provider_fpga_xrt.c): each board
 *    xrtDeviceOpen opens (backend "xrt"), or XRT's no-op shim under
 *    XCL_EMULATION_MODE=noop (backend "xrt-noop": listed, never used: no
 *    kernel executes there).
 * A provider may add a configured device later (rd_devices_add): the FPGA
 * run as C-simulation (`fpga-csim = PART`, backend "csim",
 * provider_fpga.h): the kernels' own C code in this process, modelled as
 * that part. No board. An absent device kind is simply not listed; why it
 * is absent is logged once.
 *
 * Fingerprints. Each device has a stable fingerprint, kind + "-" + 16 hex
 * digits of a 64-bit FNV-1a hash of what determines its performance, and
 * nothing else (its provider's fingerprint_key): for a CPU the model
 * string, logical cores, cache sizes, memory rounded to GiB and the ISA
 * level (a VM may hide AVX-512 of the same model); for a GPU its name, SM
 * count, memory (MiB) and compute capability; for an FPGA its model (the
 * board's name, or the part of a C-simulation), SLRs, memory (MiB) and
 * backend ("csim", "xrt", "xrt-noop"), so a C-simulated u250 never shares
 * profiles with a board. Not the hostname, a PCI address or a driver
 * version, so identical machines share profiles (papers/001 §VI: the
 * performance table is a property of the hardware), a restart finds its
 * profiles again, and a plan for a GPU box can be made elsewhere from its
 * exported profiles.
 */
#ifndef RD_DEVICES_H
#define RD_DEVICES_H

#include <stddef.h>
#include <stdint.h>

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

/* Add a device a provider makes from a setting, after discovery (the
 * C-simulation FPGA): under the list's lock, make(list, n, out, ctx, err)
 * sees the devices listed and fills *out, or refuses with an error. The
 * device is appended and logged. make's error, or RD_ETOOBIG if the list
 * is full. Nothing is added on error. Thread-safe. */
typedef int (*rd_device_make_fn)(const rd_device_t *list, size_t n, rd_device_t *out, void *ctx,
                                 rd_error_t *err);
int rd_devices_add(rd_device_make_fn make, void *ctx, rd_error_t *err);

/* Apply fn to every listed device under the list's lock (a provider's
 * setting that changes its devices' status text). Thread-safe. */
void rd_devices_update(void (*fn)(rd_device_t *d, void *ctx), void *ctx);

/* Set d->fingerprint from d's kind and identifying fields (see above). */
void rd_device_fingerprint(rd_device_t *d);

#endif
