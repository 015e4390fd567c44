#!/usr/bin/env bash
# A real Prometheus server scraping a pool: starts `shmlink pool --metrics`
# (native echo workers), Debian's `prometheus` with a 1 s scrape of it,
# makes calls (and a reload), waits until Prometheus has scraped the pool
# after them, and prints what its query API answers, as markdown.
#
#   bench/pool/prometheus.sh [--calls N] [--markdown FILE]
#
# Needs target/release/shmlink and shmlink-echo-worker (cargo build
# --release) and prometheus (ci/setup.sh). Everything it starts is stopped
# on the way out, whatever happens.
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
calls=200
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --calls) calls=$2; shift 2 ;;
    --markdown) out=$2; shift 2 ;;
    *) echo "usage: bench/pool/prometheus.sh [--calls N] [--markdown FILE]" >&2; exit 2 ;;
  esac
done
shmlink=$PWD/target/release/shmlink
worker=$PWD/target/release/shmlink-echo-worker
command -v prometheus >/dev/null || { echo "prometheus.sh: prometheus is not installed (ci/setup.sh)" >&2; exit 1; }
dir=$(mktemp -d -t shmlink-prom.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$shmlink" pool --listen "shm:$dir/pool.sock" --workers 2 --metrics 127.0.0.1:0 -- "$worker" \
  >"$dir/pool.log" 2>&1 &
pids+=($!)
wait_for 20 grep -q 'metrics at' "$dir/pool.log" || { cat "$dir/pool.log" >&2; exit 1; }
target=$(grep -o 'metrics at http://[0-9.:]*' "$dir/pool.log" | sed 's|metrics at http://||')

port=$(free_port)
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: shmlink-pool
    static_configs:
      - targets: ["$target"]
EOF
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
  --web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$port/api/v1"
query() { curl -sf --get --data-urlencode "query=$1" "$api/query"; }
# The first value of a query's answer ("" when it has none).
first() { query "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'; }
# Whether query $1 answers $2 now (evaluated at each try).
answers() { test "$(first "$1" 2>/dev/null)" = "$2"; }
wait_for 60 answers 'up{job="shmlink-pool"}' 1 ||
  { tail -20 "$dir/prometheus.log" >&2; exit 1; }

for i in $(seq "$calls"); do "$shmlink" call "shm:$dir/pool.sock" "call $i" >/dev/null; done
"$shmlink" call "shm:$dir/pool.sock" fail >/dev/null 2>&1 || true
"$shmlink" pool reload "$dir/pool.sock.ctl" >/dev/null
# Until Prometheus has scraped the pool after the calls and the reload.
wait_for 60 answers 'shmlink_pool_worker_restarts_total{reason="reload"}' 2 ||
  { echo "prometheus.sh: Prometheus never saw the reload" >&2; exit 1; }
wait_for 30 answers 'shmlink_pool_calls_total' "$((calls + 1))" ||
  { echo "prometheus.sh: Prometheus never saw the $((calls + 1)) calls" >&2; exit 1; }

rows=()
for q in 'up{job="shmlink-pool"}' 'shmlink_pool_calls_total' 'sum(shmlink_pool_call_errors_total)' \
  'shmlink_pool_worker_restarts_total{reason="reload"}' 'sum(shmlink_pool_workers{state="idle"})' \
  'histogram_quantile(0.5, shmlink_pool_call_duration_seconds_bucket) * 1e6' \
  'histogram_quantile(0.99, shmlink_pool_call_duration_seconds_bucket) * 1e6' \
  'count(shmlink_pool_worker_memory_bytes)'; do
  rows+=("| \`$q\` | $(first "$q" | python3 -c 'import sys; v=sys.stdin.read().strip(); print(f"{float(v):.4g}" if v else "-")') |")
done
text=$(
  echo "# A Prometheus server scraping shmlink pool"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(prometheus --version 2>&1 | head -1)"
  echo "- command: \`bench/pool/prometheus.sh --calls $calls\` (in \`ci/main.sh --full\`): a pool of 2 native echo"
  echo "  workers with \`--metrics\`, scraped every second; $calls calls and one failing call through the"
  echo "  pool (each a \`shmlink call\` process, so each on a session of its own), then \`pool reload\`"
  echo
  echo "## What Prometheus answers"
  echo
  echo "| query | value |"
  echo "| --- | ---: |"
  printf '%s\n' "${rows[@]}"
)
echo "$text"
[ -z "$out" ] || echo "$text" >"$out"
