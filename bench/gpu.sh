#!/usr/bin/env bash
# bench/gpu.sh - build the GPU backend with meson and run every GPU check
# and benchmark, on a machine with a GPU, in one command:
#
#   OUT=dir bash bench/gpu.sh [--quick]
#
# 1. meson setup of a fresh build directory with -Dcuda=enabled
#    -Ddaemon=false (the backends and the GPU programs alone: no gRPC,
#    SQLite, libuv or cmocka needed) and a build of only the programs below
#    (ninja TARGET...), on every core.
# 2. The device checks, self-checking programs (one "ok"/"FAIL" line per
#    check, exit 0 / 1, 77 without a usable GPU): check_gpu_rmm (tables on
#    the GPU replay module and storage against CPU tables, faults, memory),
#    check_gpu_learner (the GPU learner against the CPU learner, the
#    per-element functions, the storage), check_gpu_sumtree --quick (the
#    GPU tree against the CPU tree, byte for byte); the cmocka GPU tests too
#    if cmocka was found.
# 3. The benchmarks: bench_gpu_table (rd_table_* with tree / rows on CPU or
#    GPU), bench_gpu_learner (train-steps per second), bench_gpu_sumtree
#    (one capacity, two fanouts, with the CPU tree as baseline).
#
# Every step has a time limit, and the whole run a budget (GPU_BUDGET_S,
# default 460 s): a step that would start with less than 20 s left is not
# run, and says so. Checks run before benchmarks.
#
# Outputs (in $OUT, or build dir/out without OUT; six files): summary.txt
# (machine, toolchain, one line per step: PASS / FAIL / SKIP / TIMEOUT /
# NOT RUN, and every FAIL line of the checks), build.log, checks.log,
# bench.txt (the benchmarks' tables), bench.json (their JSON lines),
# bench.stderr. The summary is printed last on stdout too.
#
# Environment: GPU_BUILD_DIR (default: a fresh directory under /tmp),
# GPU_BUDGET_S, MESON (default: meson on PATH, else python3 -m
# mesonbuild.mesonmain), NINJA (default: ninja on PATH, else the one of
# python3's ninja package).
# Exit status: 0 if the build passed, every check passed (or was skipped:
# no GPU) and every benchmark ran; 2 for a bad argument; else 1.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    *) echo "gpu.sh: unknown option '$a' (usage: bench/gpu.sh [--quick])" >&2; exit 2 ;;
  esac
done
t_start=$(date +%s)
budget="${GPU_BUDGET_S:-460}"
bdir="${GPU_BUILD_DIR:-$(mktemp -d /tmp/replayd-gpu.XXXXXX)}"
out="${OUT:-$bdir/out}"
mkdir -p "$out"
summary="$out/summary.txt"
checks="$out/checks.log"
benchtxt="$out/bench.txt"
benchjson="$out/bench.json"
bencherr="$out/bench.stderr"
: >"$checks"; : >"$benchtxt"; : >"$benchjson"; : >"$bencherr"

elapsed() { echo $(( $(date +%s) - t_start )); }

# ---- the machine and the tools ----
if [ -n "${MESON:-}" ]; then meson_cmd=($MESON)
elif command -v meson >/dev/null 2>&1; then meson_cmd=(meson)
elif python3 -c 'import mesonbuild' >/dev/null 2>&1; then meson_cmd=(python3 -m mesonbuild.mesonmain)
else meson_cmd=(); fi
if [ -z "${NINJA:-}" ]; then
  if command -v ninja >/dev/null 2>&1; then NINJA=ninja
  else NINJA=$(python3 -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null || true)
  fi
fi
export NINJA
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
{
  echo "# bench/gpu.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)$([ "$quick" = 1 ] && echo ' (--quick)')"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo 'unknown (no .git)')"
  echo "# GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2 | tr '\n' ' ')"
  echo "# nvcc: $("$nvcc_path" --version 2>&1 | tail -1)"
  echo "# gcc: $(gcc --version 2>&1 | head -1)"
  echo "# meson: ${meson_cmd[*]:-none} $("${meson_cmd[@]}" --version 2>/dev/null); ninja: ${NINJA:-none} $("$NINJA" --version 2>/dev/null)"
  echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  echo "# build dir: $bdir; budget ${budget} s"
} >"$summary"
cat "$summary"

names=(); states=(); times=(); notes=()
record() { # name state seconds note
  names+=("$1"); states+=("$2"); times+=("$3"); notes+=("$4")
  printf '%-8s %-20s %4s s  %s\n' "$2" "$1" "$3" "$4"
}

finish() {
  local np=0 nf=0 ns=0
  for i in "${!names[@]}"; do
    case "${states[$i]}" in
      PASS|RAN) np=$((np + 1)) ;;
      SKIP) ns=$((ns + 1)) ;;
      *) nf=$((nf + 1)) ;;
    esac
  done
  {
    echo
    echo "== summary ($(elapsed) s)"
    for i in "${!names[@]}"; do
      printf '%-8s %-20s %4s s  %s\n' "${states[$i]}" "${names[$i]}" "${times[$i]}" "${notes[$i]}"
    done
    if grep -q '^FAIL' "$checks" 2>/dev/null; then
      echo
      echo "== failed checks (checks.log)"
      grep '^FAIL' "$checks" | head -60
    fi
    echo
    echo "RESULT: $np passed or ran, $nf failed / timed out / not run, $ns skipped"
    echo "outputs: $out (summary.txt build.log checks.log bench.txt bench.json bench.stderr)"
  } | tee -a "$summary"
  [ "$nf" = 0 ]
  exit $?
}

if [ ${#meson_cmd[@]} = 0 ] || [ -z "$NINJA" ]; then
  record build FAIL 0 "no meson or no ninja (set MESON / NINJA)"
  finish
fi

# ---- build ----
targets=(tests/gpu/check_gpu_rmm tests/gpu/check_gpu_learner tests/gpu/check_gpu_sumtree
  tests/gpu/bench_gpu_table tests/gpu/bench_gpu_learner tests/gpu/bench_gpu_sumtree)
echo "== build (meson -Dcuda=enabled -Ddaemon=false, ninja ${#targets[@]} programs)"
t0=$(date +%s)
(
  if [ ! -f "$bdir/build.ninja" ]; then
    "${meson_cmd[@]}" setup "$bdir" -Dcuda=enabled -Ddaemon=false -Dxrt=disabled \
      --buildtype=release || exit 1
  fi
  # The cmocka GPU tests too, where cmocka was found.
  extra=()
  all=$("$NINJA" -C "$bdir" -t targets all 2>/dev/null)
  for t in tests/gpu/test_gpu_rmm tests/gpu/test_gpu_sumtree tests/gpu/test_gpu_learner; do
    grep -q "^$t:" <<<"$all" && extra+=("$t")
  done
  echo "targets: ${targets[*]} ${extra[*]}"
  timeout 300 "$NINJA" -C "$bdir" -j "$(nproc)" "${targets[@]}" "${extra[@]}"
) >"$out/build.log" 2>&1
brc=$?
if [ "$brc" != 0 ]; then
  tail -40 "$out/build.log"
  record build FAIL $(( $(date +%s) - t0 )) "exit $brc; see build.log"
  finish
fi
record build PASS $(( $(date +%s) - t0 )) "$(grep -c '^\[' "$out/build.log") build steps"

# ---- steps ----
# run_step name kind cap_s log cmd...: kind "check" (parse ok/FAIL lines) or
# "bench"; the time limit is cap_s, or what is left of the budget.
run_step() {
  local name=$1 kind=$2 cap=$3 log=$4; shift 4
  local left=$(( budget - $(elapsed) - 5 ))
  if [ "$left" -lt 20 ]; then
    record "$name" "NOT RUN" 0 "the ${budget} s budget is spent"
    return
  fi
  local lim=$(( cap < left ? cap : left ))
  echo "== $name (limit $lim s)"
  echo "==== $name: $*" >>"$log"
  local t0 rc
  t0=$(date +%s)
  if [ "$kind" = check ]; then
    timeout "$lim" "$@" >>"$log" 2>&1
    rc=$?
  else
    timeout "$lim" "$@" >>"$log" 2>>"$bencherr"
    rc=$?
  fi
  local dt=$(( $(date +%s) - t0 )) state note
  if [ "$kind" = check ]; then
    local nok nfail
    nok=$(sed -n "/^==== $name:/,\$p" "$log" | grep -c '^ok\|^\[       OK \]')
    nfail=$(sed -n "/^==== $name:/,\$p" "$log" | grep -c '^FAIL\|^\[  FAILED  \] [a-z]')
    note="$nok ok, $nfail FAIL"
  else
    note="$(sed -n "/^==== $name:/,\$p" "$log" | grep -vc '^#\|^====') lines"
  fi
  case "$rc" in
    0) state=$([ "$kind" = check ] && echo PASS || echo RAN) ;;
    77) state=SKIP; note="no usable GPU" ;;
    124|137) state=TIMEOUT; note="$note; stopped after $lim s" ;;
    *) state=FAIL; note="$note; exit $rc" ;;
  esac
  record "$name" "$state" "$dt" "$note"
}

b="$bdir/tests/gpu"
run_step check_gpu_rmm check 150 "$checks" "$b/check_gpu_rmm" $([ "$quick" = 1 ] && echo --quick)
run_step check_gpu_learner check 120 "$checks" "$b/check_gpu_learner"
run_step check_gpu_sumtree check 120 "$checks" "$b/check_gpu_sumtree" --quick
for t in test_gpu_rmm test_gpu_sumtree test_gpu_learner; do
  if [ -x "$b/$t" ]; then
    run_step "$t" check 60 "$checks" env ASAN_OPTIONS=protect_shadow_gap=0 "$b/$t"
  fi
done
run_step bench_gpu_table bench 100 "$benchtxt" "$b/bench_gpu_table" \
  --json-file "$out/bench_table.json" $([ "$quick" = 1 ] && echo --quick)
run_step bench_gpu_learner bench 120 "$benchtxt" "$b/bench_gpu_learner" \
  --json-file "$out/bench_learner.json" $([ "$quick" = 1 ] && echo --quick)
run_step bench_gpu_sumtree bench 120 "$benchtxt" "$b/bench_gpu_sumtree" --quick --cpu \
  --capacities 1048576 --fanouts 16,32 --json-file "$out/bench_sumtree.json"
# One JSON file back (the machine returns at most 8 files).
cat "$out"/bench_table.json "$out"/bench_learner.json "$out"/bench_sumtree.json \
  >"$benchjson" 2>/dev/null
rm -f "$out"/bench_table.json "$out"/bench_learner.json "$out"/bench_sumtree.json
finish
