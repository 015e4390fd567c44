#!/usr/bin/env bash
# How the pool's dispatch cost depends on how each party waits: `shmlink
# pool bench` (a PHP worker called directly, then through a pool of one)
# for every pair of the pool's --wait (for its clients) and --worker-wait
# (for the worker's answer), the client spinning as PHP clients do by
# default, the workers waiting for calls as --idle-worker-wait says (the
# pool's default when not given). Writes a markdown table to stdout.
#
#   bench/pool/waits.sh [--calls N] [--rounds N] [--idle-worker-wait HOW]
#
# Needs the release build and the PHP extension (ci/main.sh builds both).
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
calls=20000
rounds=3
idle=()
while [ $# -gt 0 ]; do
  case "$1" in
    --calls) calls=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --idle-worker-wait) idle=(--idle-worker-wait "$2"); shift ;;
    *) echo "usage: bench/pool/waits.sh [--calls N] [--rounds N] [--idle-worker-wait HOW]" >&2; exit 2 ;;
  esac
  shift
done
ext="$PWD/bindings/php/modules/shmlink.so"
for f in target/release/shmlink "$ext"; do
  test -e "$f" || { echo "bench/pool/waits.sh: $f is missing (run ci/main.sh first)" >&2; exit 1; }
done
echo "| pool --wait | pool --worker-wait | direct p50 µs | through the pool p50 µs | added µs | pool calls/s |"
echo "|---|---|---:|---:|---:|---:|"
for wait in spin sleep busy; do
  for worker_wait in spin sleep busy; do
    json=$(mktemp)
    target/release/shmlink pool bench --calls "$calls" --rounds "$rounds" --churn-seconds 0 \
      --wait "$wait" --worker-wait "$worker_wait" ${idle[@]+"${idle[@]}"} --json "$json" -- \
      php -d extension="$ext" -d opcache.enable_cli=1 bench/pool/worker.php >/dev/null 2>&1
    python3 - "$json" "$wait" "$worker_wait" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['direct']['p50_us']:.2f} | {d['pool']['p50_us']:.2f} "
      f"| {d['dispatch_p50_us']:.2f} | {d['pool']['calls_per_s']:.0f} |")
EOF
    rm -f "$json"
  done
done
echo
echo "$(nproc) CPUs; $calls calls a round, median of $rounds rounds; 2048 B requests;" \
  "the client waits spin (the default). Command: bench/pool/waits.sh --calls $calls --rounds $rounds"
