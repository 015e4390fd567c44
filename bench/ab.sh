#!/usr/bin/env bash
# Interleaved A/B of the shm call path of two revisions: the mean round trip
# of 64 B calls (busy wait, `shmlink echo` on CPU 1, the call loop on CPU 0),
# A then B, ROUNDS times. On a VM whose host moves the two vCPUs between a
# shared core and two cores every few seconds, runs minutes apart do not
# compare; alternating every ~0.1 s does. Compare rounds in the same
# placement (the shared-core one reads ~0.1-0.2 us, the two-core one ~0.7).
#
#   bench/ab.sh REV_A REV_B [ROUNDS]     e.g. bench/ab.sh c492423 HEAD 8
#
# Each revision is built once by bench/build-rev.sh. Prints one line per
# round and the median of each revision's rounds.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
a=${1:?usage: bench/ab.sh REV_A REV_B [ROUNDS]}
b=${2:?usage: bench/ab.sh REV_A REV_B [ROUNDS]}
rounds=${3:-8}
bin_a=$(bench/build-rev.sh "$a")
bin_b=$(bench/build-rev.sh "$b")
sock=$(mktemp -u -t shmlink-ab.XXXXXX.sock)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -f "$sock"; }
trap cleanup EXIT

one() { # BIN -> mean ns of one run
  "$1/shmlink" echo --listen "shm:$sock" --wait busy >/dev/null 2>&1 &
  server=$!
  taskset -pc 1 "$server" >/dev/null
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.02; done
  taskset -c 0 "$1/call_loop" "shm:$sock" 300000 64 busy | awk '{print $2}'
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
}

ma=(); mb=()
for i in $(seq "$rounds"); do
  x=$(one "$bin_a"); y=$(one "$bin_b")
  ma+=("$x"); mb+=("$y")
  echo "round $i: $a $x ns, $b $y ns"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "median: $a $(median "${ma[@]}") ns, $b $(median "${mb[@]}") ns"
