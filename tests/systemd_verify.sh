#!/bin/sh
# systemd-analyze verify must accept the unit with no complaint. ExecStart
# is pointed at the replayd just built (the unit names its installed path).
set -eu
unit=$1 replayd=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/local/bin/replayd|$replayd|" "$unit" > "$tmp/replayd.service"
out=$(systemd-analyze verify "$tmp/replayd.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; exit 1; fi
echo "systemd-analyze verify: ok"
