#!/usr/bin/env bash
# Two revisions side by side in one run: the headline figures of `shmlink
# bench` (shm 64 B with the spin, busy and sleep waits, 2 KiB, 1 MiB,
# pipelined calls/s, sessions/s, unix and tcp, and the bare spin ping-pong as
# a control) and the PHP scenario's shm rows (PHP calling the example C++
# daemon: 2048 B over one connection, and a connection per call). Each round
# measures both builds, in alternating order (A B, then B A), and the table
# compares the medians of the rounds: the VM's placement of its two vCPUs
# drifts, so only measurements this close in time compare.
#
#   bench/compare.sh REV_A REV_B [--rounds N] [--out FILE.md]
#
# Each revision is built once by `bench/build-rev.sh REV --full` (the CLI,
# the C library, the example daemon and the PHP extension, in target/ab/).
# The table goes to stdout and, with --out, to FILE.md (with FILE.json of
# every round's figures beside it).
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
usage="usage: bench/compare.sh REV_A REV_B [--rounds N] [--out FILE.md]"
a=${1:?$usage}
b=${2:?$usage}
shift 2
rounds=3
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=${2:?$usage}; shift 2 ;;
    --out) out=${2:?$usage}; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"
bin_a=$(bench/build-rev.sh "$a" --full)
bin_b=$(bench/build-rev.sh "$b" --full)
work=$(mktemp -d -t shmlink-compare.XXXXXX)
daemon=""
cleanup() {
  [ -n "$daemon" ] && stop_process "$daemon" TERM 10 >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT

pin_server=() pin_client=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  pin_server=(taskset -c 1)
  pin_client=(taskset -c 0)
fi

# measure LABEL BIN ROUND: both parts for one build.
measure() {
  local label=$1 bin=$2 i=$3
  echo "compare: round $i, $label: shmlink bench" >&2
  "$bin/shmlink" bench --quiet --sizes 64,2048,1048576 --duration 0.3 \
    --json "$work/$label-$i-bench.json" >/dev/null
  echo "compare: round $i, $label: PHP client -> C++ daemon over shm" >&2
  rm -f "$work/d.sock" "$work/ready"
  "${pin_server[@]}" "$bin/shmlink-daemon" "shm:$work/d.sock" --ready-file "$work/ready" \
    </dev/null >"$work/daemon.log" 2>&1 &
  daemon=$!
  poll_until 20 test -s "$work/ready" || { cat "$work/daemon.log" >&2; exit 1; }
  "${pin_client[@]}" php -d extension="$bin/shmlink.so" bench/php/bench.php \
    --shm "shm:$work/d.sock" --requests 20000 --sizes 2048 --reconnect-every 0,1 \
    --reply floor --no-rust --json "$work/$label-$i-php.json" >/dev/null
  stop_process "$daemon" TERM 10 || true
  daemon=""
}

for i in $(seq "$rounds"); do
  if [ $((i % 2)) = 1 ]; then
    measure A "$bin_a" "$i"; measure B "$bin_b" "$i"
  else
    measure B "$bin_b" "$i"; measure A "$bin_a" "$i"
  fi
done
python3 bench/compare.py "$work" "$rounds" "$(git rev-parse --short "$a")" \
  "$(git rev-parse --short "$b")" ${out:+--out "$out"}
