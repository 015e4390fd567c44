#!/usr/bin/env bash
# Interleaved A/B of short sessions (connect, one 64 B call, close) of two
# revisions: `shmlink connect-cost` of each build (its own client and its
# own servers, pinned as it pins them), A then B, ROUNDS times, one round
# of --sessions each. Runs minutes apart on this VM do not compare;
# alternating rounds do. Prints each round's rows and the medians of the
# shm and unix sessions/s, and writes them to OUT (markdown) when given.
#
#   bench/connect-ab.sh REV_A REV_B [ROUNDS] [OUT]   e.g. bench/connect-ab.sh b1553f9 HEAD 5
#
# Each revision is built once by bench/build-rev.sh.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
a=${1:?usage: bench/connect-ab.sh REV_A REV_B [ROUNDS] [OUT]}
b=${2:?usage: bench/connect-ab.sh REV_A REV_B [ROUNDS] [OUT]}
rounds=${3:-5}
out=${4:-}
bin_a=$(bench/build-rev.sh "$a")
bin_b=$(bench/build-rev.sh "$b")
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

one() { # LABEL BIN ROUND
  "$2/shmlink" connect-cost --sessions 5000 --rounds 1 |
    awk -v rev="$1" -v r="$3" -F'|' '$2 ~ /^ (raw unix|unix|shm) $/ {
      gsub(/ /, "", $3); gsub(/ /, "", $4); gsub(/ /, "", $5); gsub(/ /, "", $6)
      sub(/^ /, "", $2); sub(/ $/, "", $2)
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r, rev, $2, $3, $4, $5, $6 }'
}

for i in $(seq "$rounds"); do
  one "$a" "$bin_a" "$i" | tee -a "$rows"
  one "$b" "$bin_b" "$i" | tee -a "$rows"
done

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
col() { awk -F'\t' -v rev="$1" -v t="$2" -v c="$3" '$2 == rev && $3 == t {print $c}' "$rows" | median; }

table() {
  echo "Interleaved \`shmlink connect-cost --sessions 5000 --rounds 1\`, $rounds rounds of each build, A then B (medians across rounds; 64 B calls, client on CPU 0, servers on CPU 1)."
  echo
  echo "| build | transport | sessions/s | connect p50 µs | call p50 µs | close p50 µs |"
  echo "| --- | --- | ---: | ---: | ---: | ---: |"
  for rev in "$a" "$b"; do
    for t in "raw unix" unix shm; do
      echo "| $rev | $t | $(col "$rev" "$t" 4) | $(col "$rev" "$t" 5) | $(col "$rev" "$t" 6) | $(col "$rev" "$t" 7) |"
    done
  done
  echo
  echo "Command: \`bench/connect-ab.sh $a $b $rounds\`"
}
table
if [ -n "$out" ]; then
  table > "$out"
fi
