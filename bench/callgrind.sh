#!/usr/bin/env bash
# Instructions per 64 B shm call on each side, counted by callgrind: the echo
# server (busy wait) and the call loop each run under valgrind, and every
# instruction address counts at most once per call (spin loops are waiting,
# not work; see bench/callgrind_net.py). Deterministic, unlike timings.
#
#   bench/callgrind.sh [REV [CALLS]]     default: this tree, 100000 calls
#
# REV is built by bench/build-rev.sh; without it, this tree is built here.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
calls=${2:-100000}
if [ -n "${1:-}" ]; then
  bin=$(bench/build-rev.sh "$1")
else
  cargo build --release -q -p shmlink-cli
  cargo build --release -q -p shmlink --example call_loop
  bin=target/release
  cp target/release/examples/call_loop target/release/call_loop
fi
work=$(mktemp -d -t shmlink-callgrind.XXXXXX)
sock=$work/s.sock
server=""
cleanup() { [ -n "$server" ] && kill -INT "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP_CG:-}" ] && trap '[ -n "$server" ] && kill -INT "$server" 2>/dev/null; cp "$work"/*.cg "$KEEP_CG"/ 2>/dev/null; rm -rf "$work"' EXIT
vg=(valgrind --tool=callgrind --dump-instr=yes)
taskset -c 1 "${vg[@]}" --callgrind-out-file="$work/server.cg" \
  "$bin/shmlink" echo --listen "shm:$sock" --wait busy >/dev/null 2>&1 &
server=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
taskset -c 0 "${vg[@]}" --callgrind-out-file="$work/client.cg" \
  "$bin/call_loop" "shm:$sock" "$calls" 64 busy >/dev/null 2>&1
kill -INT "$server"; wait "$server" 2>/dev/null || true; server=""
c=$(python3 bench/callgrind_net.py "$work/client.cg" "$calls")
s=$(python3 bench/callgrind_net.py "$work/server.cg" "$calls")
echo "instructions per 64 B call: client $c, server $s, round trip $((c + s))"
