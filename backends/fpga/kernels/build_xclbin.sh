#!/bin/sh
# build_xclbin.sh - build the FPGA kernels into an xclbin with Vitis (v++).
#
#   meson: ninja -C BUILD xclbin     (never part of the default build)
#   by hand: build_xclbin.sh KERNEL_SRC_DIR OUT_DIR
#
# Without v++ on PATH it says Vitis is not installed and stops (exit 0: the
# rest of the build does not depend on it). With Vitis, the hardware shape
# comes from the environment, as the architecture exploration chose it
# (backends/fpga/model.c; `replayctl plan` shows S for a workload):
#   RD_FPGA_PLATFORM   Vitis platform (default xilinx_u200_gen3x16_xdma_2_202110_1)
#   RD_FPGA_TARGET     hw, hw_emu or sw_emu (default hw)
#   RMM_K, RMM_CAPACITY, RMM_S, RMM_MAX_BATCH   see kernels/rmm.h
#   RMM_PORT_REGS, RMM_PORT_BANKED   the replicated levels' update ports
#                      (kernels/rmm.h; the plan's "ports regs 0x.. banked
#                      0x.."; default 0 0: one port per replica, serial)
#   RMM_MIN_TABLE      the smallest table the build serves (default N); it
#                      sets the leaf bound, and the daemon's
#                      fpga-xclbin-shape must name the same (K,N,BATCH,MIN)
#   RD_FPGA_CLOCK_MHZ  kernel clock (default 300)
#   LRN_DEFS           -D flags for the learner kernel: its build limits
#                      (learner.h LRN_MAX_*) and its per-layer MAC units,
#                      -DLRN_UNITS_N<net>_L<l>=U as the model allocates them
#                      (rd_fpga_learner_unit_defs writes them for a design)
# This path has never been run: there is no Vitis installation where it
# was written. Vitis HLS takes arbitrary-precision types only in C++, so the
# replay kernel is compiled through rmm_hls.cpp (which includes rmm.c); the
# learner kernel (lrn_train_step, learner.c) is plain C with floats. Its
# build limits are learner.h's LRN_MAX_* (override with -D in LRN_DEFS).
set -eu
src=${1:?kernel source directory}
out=${2:?output directory}

if ! command -v v++ >/dev/null 2>&1; then
  echo "xclbin: Vitis is not installed (v++ is not on PATH); no xclbin built." >&2
  echo "xclbin: the kernels run here only as C-simulation (tests/test_fpga_rmm.c)." >&2
  exit 0
fi

platform=${RD_FPGA_PLATFORM:-xilinx_u200_gen3x16_xdma_2_202110_1}
target=${RD_FPGA_TARGET:-hw}
clock=${RD_FPGA_CLOCK_MHZ:-300}
defs="-DRMM_K=${RMM_K:-16} -DRMM_CAPACITY=${RMM_CAPACITY:-65536} -DRMM_S=${RMM_S:-1}"
defs="$defs -DRMM_MAX_BATCH=${RMM_MAX_BATCH:-1024}"
defs="$defs -DRMM_PORT_REGS=${RMM_PORT_REGS:-0} -DRMM_PORT_BANKED=${RMM_PORT_BANKED:-0}"
defs="$defs -DRMM_MIN_TABLE=${RMM_MIN_TABLE:-${RMM_CAPACITY:-65536}}"

mkdir -p "$out"
# shellcheck disable=SC2086 # defs is a list of flags
v++ -c -t "$target" --platform "$platform" -k rmm_kernel \
  --hls.clock "${clock}000000:rmm_kernel" -I "$src" $defs \
  -o "$out/rmm.xo" "$src/rmm_hls.cpp"
# shellcheck disable=SC2086 # LRN_DEFS is a list of flags
v++ -c -t "$target" --platform "$platform" -k lrn_train_step \
  --hls.clock "${clock}000000:lrn_train_step" -I "$src" -I "$src/../../../common" \
  ${LRN_DEFS:-} -o "$out/learner.xo" "$src/learner.c"
v++ -l -t "$target" --platform "$platform" --kernel_frequency "$clock" \
  -o "$out/replayd.xclbin" "$out/rmm.xo" "$out/learner.xo"
echo "xclbin: $out/replayd.xclbin" >&2
