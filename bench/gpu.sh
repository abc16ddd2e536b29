#!/usr/bin/env bash
# bench/gpu.sh - build, check and benchmark the GPU backend (sum tree,
# storage, learner) on a GPU machine.
#
# usage: bench/gpu.sh [--quick] [--no-bench] [--no-sumtree] [--no-learner]
#
# Needs only nvcc and gcc (no meson, no cmocka), so it runs on a bare CUDA
# machine. Builds into $GPU_BUILD_DIR (default build-gpu/):
#   - the CPU sum tree (backends/cpu/sumtree.c, common/rd_error.c, rd_tree_check.c; gcc -O3
#     -fopenmp), the reference for every cross-check;
#   - the GPU sum tree (backends/gpu/sumtree_gpu.cu; nvcc, sm_80 + sm_90);
#   - tests/gpu/check_gpu_sumtree (GPU vs CPU, bit for bit, every K; error
#     paths) and bench/bench_gpu_sumtree;
#   - tests/gpu/test_sumtree_step and test_gpu_elem (host-only, cmocka) if
#     cmocka is installed;
#   - the CPU learner (backends/cpu/nn.c, learner.c, common/rd_nn_spec.c), the
#     GPU learner and storage (backends/gpu/learner_gpu.cu, storage_gpu.cu;
#     linked with cuBLAS), tests/gpu/check_gpu_learner (GPU vs CPU learner,
#     device vs host element functions, storage gather) and
#     bench/bench_gpu_learner (train-steps per second, 3 shapes x 4 batches).
# Then runs the checks and the benchmarks. Outputs go to $OUT if set, else to
# $GPU_BUILD_DIR/out: nvidia-smi.txt, build.log, check.log, bench.txt (table),
# bench.json (one JSON object per line), bench.stderr, and for the learner
# check_learner.log, bench_learner.txt, bench_learner.json,
# bench_learner.stderr. --no-sumtree / --no-learner skip one part's check
# and benchmark.
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# CHECK_ARGS (default empty; --quick skips the 2^24 trees),
# BENCH_ARGS (default: --cpu --fanouts 2,4,8,16,32,64),
# CHECK_TIMEOUT / BENCH_TIMEOUT in seconds (default 240 / 400),
# LEARNER_CHECK_ARGS (default empty), LEARNER_BENCH_ARGS (default empty),
# LEARNER_CHECK_TIMEOUT / LEARNER_BENCH_TIMEOUT (default 240 / 300).
# Exit status: 0 if the check passed (and the benchmark ran), else non-zero.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bdir="${GPU_BUILD_DIR:-$root/build-gpu}"
out="${OUT:-$bdir/out}"
mkdir -p "$bdir" "$out"

quick=0
bench=1
sumtree=1
learner=1
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --no-bench) bench=0 ;;
    --no-sumtree) sumtree=0 ;;
    --no-learner) learner=0 ;;
    *) echo "gpu.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
check_args="${CHECK_ARGS:-}"
bench_args="${BENCH_ARGS:---cpu --fanouts 2,4,8,16,32,64}"
if [ "$quick" = 1 ]; then
  check_args="$check_args --quick"
  bench_args="$bench_args --quick"
fi

nvcc="${NVCC:-}"
if [ -z "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then nvcc=nvcc; else nvcc=/usr/local/cuda/bin/nvcc; fi
fi

{
  echo "# $(date -u +%FT%TZ) $(uname -n)"
  nvidia-smi -L 2>&1 || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  "$nvcc" --version 2>&1 | tail -2
  gcc --version | head -1
} >"$out/nvidia-smi.txt"
cat "$out/nvidia-smi.txt"

arch=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90)
nvflags=(-std=c++17 -O3 "${arch[@]}" -Werror all-warnings -Xcompiler=-Wall,-Wextra
  -Icommon -Ibackends/cpu -Ibackends/gpu)
cflags=(-std=gnu11 -O3 -fopenmp -Wall -Wextra -Werror -Icommon -Ibackends/cpu -Ibackends/gpu)

build() {
  set -e
  gcc "${cflags[@]}" -c backends/cpu/sumtree.c -o "$bdir/sumtree.o" &
  gcc "${cflags[@]}" -c common/rd_error.c -o "$bdir/rd_error.o" &
  gcc "${cflags[@]}" -c common/rd_tree_check.c -o "$bdir/rd_tree_check.o" &
  "$nvcc" "${nvflags[@]}" -c backends/gpu/sumtree_gpu.cu -o "$bdir/sumtree_gpu.o" &
  "$nvcc" "${nvflags[@]}" -c tests/gpu/check_gpu_sumtree.cu -o "$bdir/check_gpu_sumtree.o" &
  "$nvcc" "${nvflags[@]}" -c bench/bench_gpu_sumtree.cu -o "$bdir/bench_gpu_sumtree.o" &
  gcc "${cflags[@]}" -c backends/cpu/nn.c -o "$bdir/nn.o" &
  gcc "${cflags[@]}" -c backends/cpu/learner.c -o "$bdir/learner.o" &
  gcc "${cflags[@]}" -c common/rd_nn_spec.c -o "$bdir/rd_nn_spec.o" &
  "$nvcc" "${nvflags[@]}" -c backends/gpu/learner_gpu.cu -o "$bdir/learner_gpu.o" &
  "$nvcc" "${nvflags[@]}" -c backends/gpu/storage_gpu.cu -o "$bdir/storage_gpu.o" &
  "$nvcc" "${nvflags[@]}" -c tests/gpu/check_gpu_learner.cu -o "$bdir/check_gpu_learner.o" &
  "$nvcc" "${nvflags[@]}" -Ibench -c bench/bench_gpu_learner.cu -o "$bdir/bench_gpu_learner.o" &
  for j in $(jobs -p); do wait "$j"; done
  objs=("$bdir/sumtree_gpu.o" "$bdir/sumtree.o" "$bdir/rd_error.o" "$bdir/rd_tree_check.o")
  "$nvcc" "${arch[@]}" "$bdir/check_gpu_sumtree.o" "${objs[@]}" -Xcompiler=-fopenmp \
    -o "$bdir/check_gpu_sumtree"
  "$nvcc" "${arch[@]}" "$bdir/bench_gpu_sumtree.o" "${objs[@]}" -Xcompiler=-fopenmp \
    -o "$bdir/bench_gpu_sumtree"
  lobjs=("$bdir/learner_gpu.o" "$bdir/storage_gpu.o" "$bdir/learner.o" "$bdir/nn.o"
    "$bdir/rd_nn_spec.o" "$bdir/rd_error.o")
  "$nvcc" "${arch[@]}" "$bdir/check_gpu_learner.o" "${lobjs[@]}" -lcublas -Xcompiler=-fopenmp \
    -o "$bdir/check_gpu_learner"
  "$nvcc" "${arch[@]}" "$bdir/bench_gpu_learner.o" "${lobjs[@]}" -lcublas -Xcompiler=-fopenmp \
    -o "$bdir/bench_gpu_learner"
  if [ -f /usr/include/cmocka.h ]; then
    gcc "${cflags[@]}" -UNDEBUG tests/gpu/test_sumtree_step.c "$bdir/sumtree.o" "$bdir/rd_error.o" "$bdir/rd_tree_check.o" \
      -lcmocka -o "$bdir/test_sumtree_step"
    gcc "${cflags[@]}" -UNDEBUG tests/gpu/test_gpu_elem.c "$bdir/nn.o" "$bdir/rd_nn_spec.o" \
      "$bdir/rd_error.o" -lcmocka -lm -o "$bdir/test_gpu_elem"
  fi
}

echo "== build"
t0=$(date +%s)
# A subshell with set -e: the first failed step (or waited-for job) ends it.
# (Not inside an if: bash ignores set -e in a condition.)
(build) >"$out/build.log" 2>&1
if [ $? != 0 ]; then
  cat "$out/build.log"
  echo "gpu.sh: build failed" >&2
  exit 1
fi
echo "built in $(( $(date +%s) - t0 )) s"

rc=0
if [ -x "$bdir/test_sumtree_step" ]; then
  echo "== test_sumtree_step (host)"
  "$bdir/test_sumtree_step" 2>&1 | tail -3
fi

if [ -x "$bdir/test_gpu_elem" ]; then
  echo "== test_gpu_elem (host)"
  "$bdir/test_gpu_elem" 2>&1 | tail -3
fi

if [ "$sumtree" = 1 ]; then
echo "== check_gpu_sumtree $check_args"
t0=$(date +%s)
# shellcheck disable=SC2086
timeout "${CHECK_TIMEOUT:-240}" "$bdir/check_gpu_sumtree" $check_args >"$out/check.log" 2>&1
crc=$?
grep -v '^ok ' "$out/check.log" | tail -40
echo "check: $(grep -c '^ok ' "$out/check.log") ok lines, exit $crc, $(( $(date +%s) - t0 )) s"
[ "$crc" = 0 ] || rc=1

# The benchmark runs even after a failed check (it checks its own trees
# against the CPU before timing them), so one GPU session yields both.
if [ "$bench" = 1 ] && [ "$crc" != 77 ]; then
  [ "$crc" = 0 ] || echo "WARNING: the check failed; benchmark figures below are of a faulty build"
  echo "== bench_gpu_sumtree $bench_args"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout "${BENCH_TIMEOUT:-400}" "$bdir/bench_gpu_sumtree" $bench_args \
    --json-file "$out/bench.json" >"$out/bench.txt" 2>"$out/bench.stderr"
  brc=$?
  cat "$out/bench.txt"
  echo "bench: exit $brc, $(( $(date +%s) - t0 )) s, $(wc -l <"$out/bench.json" 2>/dev/null || echo 0) JSON lines"
  [ "$brc" = 0 ] || { tail -5 "$out/bench.stderr"; rc=1; }
fi
fi # sumtree

if [ "$learner" = 1 ]; then
  largs="${LEARNER_CHECK_ARGS:-}"
  echo "== check_gpu_learner $largs"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout "${LEARNER_CHECK_TIMEOUT:-240}" "$bdir/check_gpu_learner" $largs \
    >"$out/check_learner.log" 2>&1
  lrc=$?
  cat "$out/check_learner.log"
  echo "check_gpu_learner: exit $lrc, $(( $(date +%s) - t0 )) s"
  [ "$lrc" = 0 ] || rc=1
  if [ "$bench" = 1 ] && [ "$lrc" != 77 ]; then
    [ "$lrc" = 0 ] || echo "WARNING: the learner check failed; figures below are of a faulty build"
    bargs="${LEARNER_BENCH_ARGS:-}"
    [ "$quick" = 1 ] && bargs="$bargs --quick"
    echo "== bench_gpu_learner $bargs"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "${LEARNER_BENCH_TIMEOUT:-300}" "$bdir/bench_gpu_learner" $bargs \
      --json-file "$out/bench_learner.json" >"$out/bench_learner.txt" 2>"$out/bench_learner.stderr"
    lbrc=$?
    cat "$out/bench_learner.txt"
    echo "bench_gpu_learner: exit $lbrc, $(( $(date +%s) - t0 )) s"
    [ "$lbrc" = 0 ] || { tail -5 "$out/bench_learner.stderr"; rc=1; }
  fi
fi
exit $rc
