#!/usr/bin/env bash
# The Go binding's figures, in one run: a 64 B sync ping-pong of the Go
# client over shm against Go's own net.UnixConn (interleaved rounds in one
# benchmark), then against shmipc-go (bench/shmipc, its own module,
# interleaved with shmlink in one benchmark). Writes a markdown summary with
# the ratios and their goals.
#
#   bindings/go/bench.sh [--markdown FILE] [--calls N]
#
# Needs the C library staged (make install PREFIX=target/stage), as
# bindings/go/test.sh does.
set -euo pipefail
out=""
calls=100000
while [ $# -gt 0 ]; do
  case "$1" in
    --markdown) out=$(realpath -m "$2"); shift 2 ;;
    --calls) calls=$2; shift 2 ;;
    *) echo "usage: bindings/go/bench.sh [--markdown FILE] [--calls N]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"
root=$(cd ../.. && pwd)
export PKG_CONFIG_PATH="$root/target/stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test -run '^$' -bench 'PingPong64$' -benchtime "${calls}x" . | tee "$log"
(cd bench/shmipc && go test -run '^$' -bench . -benchtime "$((calls / 2))x" .) | tee -a "$log"
python3 - "$log" "$out" <<'PY'
import os, re, sys, time
log, out = sys.argv[1], sys.argv[2]
runs = []
# A benchmark that prints splits its result line: the metrics may follow on
# a line of their own, after the printed text.
for line in open(log):
    if "p50-ns" not in line:
        continue
    fields = line.split()
    metrics = {}
    for value, unit in zip(fields, fields[1:]):
        if unit.endswith("-p50-ns") or unit.endswith("-calls/s"):
            metrics[unit] = float(value)
    runs.append(metrics)
if len(runs) != 2:
    sys.exit(f"bench.sh: expected 2 benchmark lines with p50 metrics, got {len(runs)}")
unix, shmipc = runs
def row(name, m, key):
    return f"| {name} | {m[key + '-p50-ns'] / 1e3:.2f} | {m[key + '-calls/s']:,.0f} |"
r_unix = unix["go-unixconn-p50-ns"] / unix["shmlink-shm-p50-ns"]
r_ipc = shmipc["shmlink-shm-p50-ns"] / shmipc["shmipc-go-p50-ns"]
ok = lambda c: "PASS" if c else "MISS"
lines = [
    "# Go binding: 64 B sync ping-pong",
    "",
    f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    f"- machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}",
    "- command: `bindings/go/bench.sh` (in `ci/main.sh`); each benchmark interleaves its clients in rounds of 500 calls after 1,000 warm-up calls",
    "",
    "## Against Go's net.UnixConn (one benchmark)",
    "",
    "| client | p50 µs | calls/s |",
    "| --- | ---: | ---: |",
    row("shmlink shm (spin)", unix, "shmlink-shm"),
    row("shmlink shm (sleep)", unix, "shmlink-shm-sleep"),
    row("shmlink unix", unix, "shmlink-unix"),
    row("Go net.UnixConn, 4-byte framing", unix, "go-unixconn"),
    "",
    "## Against shmipc-go (one benchmark)",
    "",
    "| client | p50 µs | calls/s |",
    "| --- | ---: | ---: |",
    row("shmlink shm (spin)", shmipc, "shmlink-shm"),
    row("shmlink shm (sleep)", shmipc, "shmlink-shm-sleep"),
    row("shmipc-go", shmipc, "shmipc-go"),
    "",
    "## Headline",
    "",
    "| check | value | goal | result |",
    "| --- | ---: | ---: | --- |",
    f"| net.UnixConn p50 ÷ shmlink shm p50 | {r_unix:.1f} | ≥ 10 | {ok(r_unix >= 10)} |",
    f"| shmlink shm p50 ÷ shmipc-go p50 | {r_ipc:.3f} | ≤ 0.2 | {ok(r_ipc <= 0.2)} |",
]
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
PY
