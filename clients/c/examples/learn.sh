#!/usr/bin/env bash
# learn.sh - train CartPole or Pendulum with replayd's hosted learner.
#
#   learn.sh BUILD_DIR [--env cartpole|pendulum] [--algo dqn|ddpg] [--seed S]
#            [--target R] [--time-limit S] [--out CSV] [--actors N]
#            [--eval-every T] [--eval-episodes N] [--keep] [-- REGISTER_FLAGS...]
#
# Starts BUILD_DIR/daemon/replayd on a free loopback port with a temporary
# state directory, registers a workload in continuous training mode (the
# daemon trains by itself as rows arrive), runs N actor processes
# (replayd-learn actor) and every T seconds evaluates the latest weights
# (replayd-learn eval), appending
#
#   wall_s,env_steps,train_steps,weight_version,eval_mean_return
#
# to the CSV (env steps: rows the workload has received; train steps: the
# learner's gradient steps). Stops when the mean evaluation return reaches
# the target (exit 0) or at the time limit (exit 1). Builds nothing. Every
# process it started is stopped on exit, whatever the reason (trap).
# Flags after "--" go to "replayd-learn register" (e.g. -- --hidden 128,128).
set -euo pipefail

prog=learn.sh
usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF

Options (defaults):
  --env cartpole|pendulum   cartpole
  --algo dqn|ddpg           dqn for cartpole, ddpg for pendulum
  --seed S                  1 (workload, actors and evaluation)
  --target R                mean evaluation return to reach: cartpole 475, pendulum -200
  --time-limit S            600 seconds
  --out CSV                 learn.csv
  --actors N                4
  --eval-every T            10 seconds
  --eval-episodes N         100
  --keep                    keep the work directory (daemon and actor logs)
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*" >&2; echo "Try '$prog --help'." >&2; exit 2; }

build="" env=cartpole algo="" seed=1 target="" time_limit=600 out=learn.csv actors=4
eval_every=10 eval_episodes=100 keep=0
register_extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --env) env="${2:?--env needs a value}"; shift 2 ;;
    --algo) algo="${2:?--algo needs a value}"; shift 2 ;;
    --seed) seed="${2:?--seed needs a value}"; shift 2 ;;
    --target) target="${2:?--target needs a value}"; shift 2 ;;
    --time-limit) time_limit="${2:?--time-limit needs a value}"; shift 2 ;;
    --out) out="${2:?--out needs a value}"; shift 2 ;;
    --actors) actors="${2:?--actors needs a value}"; shift 2 ;;
    --eval-every) eval_every="${2:?--eval-every needs a value}"; shift 2 ;;
    --eval-episodes) eval_episodes="${2:?--eval-episodes needs a value}"; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; register_extra=("$@"); break ;;
    -*) usage_error "unknown option $1" ;;
    *) [[ -z "$build" ]] || usage_error "one build directory, not \"$build\" and \"$1\""
       build="$1"; shift ;;
  esac
done
[[ -n "$build" ]] || usage_error "give the build directory (meson's), e.g. $prog build"
case "$env" in cartpole|pendulum) ;; *) usage_error "--env is cartpole or pendulum" ;; esac
[[ -z "$algo" || "$algo" == dqn || "$algo" == ddpg ]] || usage_error "--algo is dqn or ddpg"
isnum() { [[ "$1" =~ ^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }
isint() { [[ "$1" =~ ^[0-9]+$ ]]; }
isint "$seed" || usage_error "--seed needs a non-negative integer"
isnum "$time_limit" || usage_error "--time-limit needs a number of seconds"
if ! { isint "$actors" && (( actors >= 1 && actors <= 64 )); }; then
  usage_error "--actors needs 1..64"
fi
isnum "$eval_every" || usage_error "--eval-every needs a number of seconds"
if ! { isint "$eval_episodes" && (( eval_episodes >= 1 )); }; then
  usage_error "--eval-episodes needs >= 1"
fi
if [[ -z "$target" ]]; then
  if [[ "$env" == cartpole ]]; then target=475; else target=-200; fi
fi
isnum "$target" || usage_error "--target needs a number"

replayd="$build/daemon/replayd"
learn="$build/clients/c/replayd-learn"
[[ -x "$replayd" ]] || die "no daemon at $replayd (build first: ninja -C $build)"
[[ -x "$learn" ]] || die "no replayd-learn at $learn (build first: ninja -C $build)"

work=$(mktemp -d "${TMPDIR:-/tmp}/replayd-learn.XXXXXX")
daemon_pid=""
actor_pids=()

# Stop what we started: actors first (they flush and close their streams on
# SIGTERM), then the daemon (it drains calls; SIGKILL after 15 s).
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${actor_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${actor_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "$daemon_pid" ]]; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  if (( keep )); then echo "$prog: logs kept in $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
t0=$(now)

# The daemon, on a port the kernel picks; its log names it.
"$replayd" --listen 127.0.0.1:0 --state-dir "$work/state" --log-file "$work/replayd.log" \
  >"$work/replayd.out" 2>&1 &
daemon_pid=$!
port=""
for _ in $(seq 300); do
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    cat "$work/replayd.out" "$work/replayd.log" >&2 2>/dev/null || true
    daemon_pid=""
    die "the daemon exited at start"
  fi
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$work/replayd.log" \
         2>/dev/null | head -n1 || true)
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || die "the daemon did not report its port within 30 s (log: $work/replayd.log)"
server="127.0.0.1:$port"

reg=(register --server "$server" --env "$env" --seed "$seed")
[[ -n "$algo" ]] && reg+=(--algo "$algo")
read -r id token < <("$learn" "${reg[@]}" "${register_extra[@]}") \
  || die "registering the workload failed"
[[ -n "${id:-}" && -n "${token:-}" ]] || die "register printed no id and token"
(umask 077; printf '%s\n' "$token" >"$work/token")
echo "$prog: $env ${algo:-(default algorithm)} on $server, workload $id, $actors actors," \
     "target $target, time limit ${time_limit}s" >&2

common=(--server "$server" --id "$id" --token-file "$work/token" --env "$env")
for ((i = 0; i < actors; i++)); do
  "$learn" actor "${common[@]}" --actor-index "$i" --num-actors "$actors" --seed "$seed" \
    --log "$work/actor-$i.log" 2>"$work/actor-$i.err" &
  actor_pids+=($!)
done

echo "wall_s,env_steps,train_steps,weight_version,eval_mean_return" >"$out"

# A field of eval's one-line JSON ({"key":value,...}).
json_field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }

next_eval=$(awk -v t="$eval_every" 'BEGIN { print t }')
while true; do
  # Sleep until the next evaluation, watching the actors meanwhile.
  while awk -v a="$(elapsed "$t0")" -v b="$next_eval" 'BEGIN { exit !(a < b) }'; do
    for i in "${!actor_pids[@]}"; do
      if ! kill -0 "${actor_pids[$i]}" 2>/dev/null; then
        rc=0
        wait "${actor_pids[$i]}" || rc=$?
        cat "$work/actor-$i.err" >&2 || true
        die "actor $i exited (status $rc)"
      fi
    done
    sleep 0.2
  done
  next_eval=$(awk -v a="$next_eval" -v t="$eval_every" 'BEGIN { print a + t }')

  json=$("$learn" eval "${common[@]}" --seed "$((seed + 1000))" --episodes "$eval_episodes" \
         --json 2>"$work/eval.err") || {
    # No weights yet is normal for the first seconds; anything else is not.
    if grep -q "no weights yet" "$work/eval.err"; then continue; fi
    cat "$work/eval.err" >&2
    die "evaluation failed"
  }
  wall=$(elapsed "$t0")
  mean=$(json_field mean_return "$json")
  line="$wall,$(json_field env_steps "$json"),$(json_field train_steps "$json"),$(json_field weight_version "$json"),$mean"
  echo "$line" >>"$out"
  echo "$prog: $line" >&2
  if isnum "$mean" && awk -v m="$mean" -v t="$target" 'BEGIN { exit !(m >= t) }'; then
    echo "$prog: reached the target $target (mean return $mean) after ${wall}s" >&2
    exit 0
  fi
  if awk -v a="$wall" -v b="$time_limit" 'BEGIN { exit !(a >= b) }'; then
    echo "$prog: time limit ${time_limit}s reached; best so far is in $out" >&2
    exit 1
  fi
done
