#!/usr/bin/env bash
# The Go binding's figures, in one run: a 64 B sync ping-pong of the Go
# client over shm against Go's own net.UnixConn, with the same call made
# with a cancellable context beside the blocking one (interleaved rounds in
# one benchmark), then against shmipc-go (bench/shmipc, its own module,
# interleaved with shmlink in one benchmark), then the wait-strategy matrix
# (BenchmarkWaitMatrix: sleep, spin = the default, busy at 64 B and 2 KiB)
# twice: quiet, then beside a CPU hog (`shmlink __hog`, unpinned). Writes a
# markdown summary with the ratios and their goals (met, missed, or not
# measured: shmipc-go's when its module cannot be fetched).
#
#   bindings/go/bench.sh [--markdown FILE] [--calls N]
#
# Needs the C library staged (make install PREFIX=target/stage), as
# bindings/go/test.sh does.
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
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
repo=$root
# shellcheck source=bindings/go/staged.sh
source ./staged.sh
export PKG_CONFIG_PATH="$root/target/stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
log=$(mktemp)
hog=""
stop_hog() {
  if [ -n "$hog" ]; then
    kill "$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
    hog=""
  fi
}
trap 'stop_hog; rm -f "$log"' EXIT
go test -run '^$' -bench 'PingPong64$' -benchtime "${calls}x" . | tee "$log"
# shmipc-go comes from the Go module proxy: without it (no network, nothing
# in the module cache) its benchmark is left out and its goal reads "not
# measured".
if (cd bench/shmipc && go mod download) >/dev/null 2>&1; then
  (cd bench/shmipc && go test -run '^$' -bench . -benchtime "$((calls / 2))x" .) | tee -a "$log"
else
  echo "bench.sh: shmipc-go not at hand (go mod download in bindings/go/bench/shmipc failed): no shmipc-go rows" | tee -a "$log"
fi
# The wait matrix, quiet then beside the hog (it spins until killed, or until
# it finds itself re-parented should this script die without its trap). The
# marker lines tell the python below which run is which.
echo "bench.sh: wait matrix, load quiet" | tee -a "$log"
go test -run '^$' -bench 'WaitMatrix$' -benchtime "${calls}x" . | tee -a "$log"
"$root/target/release/shmlink" __hog &
hog=$!
echo "bench.sh: wait matrix, load busy" | tee -a "$log"
SHMLINK_HOG_PID=$hog go test -run '^$' -bench 'WaitMatrix$' -benchtime "${calls}x" . | tee -a "$log"
stop_hog
python3 - "$log" "$out" "$root" <<'PY'
import os, re, sys, time
log, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(sys.argv[3], "bench/common"))
from placement import NOTE, at_placement
import goals
runs = {}
matrix = {}  # load -> metrics of BenchmarkWaitMatrix
load = None
# A benchmark that prints splits its result line: the metrics may follow on
# a line of their own, after the printed text. Each line is told by its
# metrics: go-unixconn (PingPong64), shmipc-go (bench/shmipc), spin-64
# (WaitMatrix, its load from the marker line before it).
no_shmipc = False
for line in open(log):
    if line.startswith("bench.sh: shmipc-go not at hand"):
        no_shmipc = True
        continue
    if line.startswith("bench.sh: wait matrix, load "):
        load = line.split()[-1]
        continue
    if "p50-ns" not in line:
        continue
    fields = line.split()
    metrics = {}
    for value, unit in zip(fields, fields[1:]):
        if unit.endswith(("-p50-ns", "-calls/s", "-hog-pct")):
            metrics[unit] = float(value)
    if "go-unixconn-p50-ns" in metrics:
        kind = "unix"
    elif "shmipc-go-p50-ns" in metrics:
        kind = "shmipc"
    elif "spin-64-p50-ns" in metrics and load is not None:
        kind = "matrix " + load
    else:
        sys.exit(f"bench.sh: a benchmark line with unknown p50 metrics: {line.strip()}")
    if kind in runs:
        sys.exit(f"bench.sh: two benchmark lines of {kind}")
    runs[kind] = metrics
    if kind.startswith("matrix "):
        matrix[load] = metrics
want = ["unix", "matrix quiet", "matrix busy"] + ([] if no_shmipc else ["shmipc"])
if sorted(runs) != sorted(want):
    sys.exit(f"bench.sh: expected the benchmark lines {want}, got {sorted(runs)}")
unix, shmipc = runs["unix"], runs.get("shmipc")
def row(name, m, key):
    return f"| {name} | {m[key + '-p50-ns'] / 1e3:.2f} | {m[key + '-calls/s']:,.0f} |"
def ctx_row(name, m, key):
    r = m[key + "-p50-ns"] / m["shmlink-shm-p50-ns"]
    return f"| {name} | {m[key + '-p50-ns'] / 1e3:.2f} | {m[key + '-calls/s']:,.0f} | {r:.2f} |"
r_unix = unix["go-unixconn-p50-ns"] / unix["shmlink-shm-p50-ns"]
r_ipc = shmipc and shmipc["shmlink-shm-p50-ns"] / shmipc["shmipc-go-p50-ns"]
SHMIPC_MISSING = ("shmipc-go not at hand: run bindings/go/bench.sh with network access to the Go proxy"
                  " (proxy.golang.org, or GOPROXY), or with its modules in the cache (go mod download in"
                  " bindings/go/bench/shmipc)")
headline = [r_unix >= 10, None if shmipc is None else r_ipc <= 0.2]
lines = [
    "# Go binding: 64 B sync ping-pong",
    "",
    f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    f"- machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}",
    "- command: `bindings/go/bench.sh` (in `ci/main.sh --full`); each benchmark interleaves its clients in rounds of 500 calls after 1,000 warm-up calls",
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
    "## Cancellable context (the same benchmark)",
    "",
    "| call over shm (spin), 64 B | p50 µs | calls/s | p50 ÷ blocking p50 |",
    "| --- | ---: | ---: | ---: |",
    ctx_row("blocking: `context.Background()`", unix, "shmlink-shm"),
    ctx_row("`context.WithCancel` (sent, its answer tried for ≤ 50 µs in one crossing, then parked on Go's poller)", unix, "shmlink-shm-ctx"),
    ctx_row("`context.WithCancel` on a client that parks on Go's poller at once", unix, "shmlink-shm-ctx-parked"),
    "",
    "Each on its own client to the same server, interleaved with the others above. The parked row is "
    "what an answer slower than the 50 µs wait costs to be woken for (Go's poller, no polling).",
    "",
    "## Against shmipc-go (one benchmark)",
    "",
    *([f"Not measured: {SHMIPC_MISSING}."] if shmipc is None else [
        "| client | p50 µs | calls/s |",
        "| --- | ---: | ---: |",
        row("shmlink shm (spin)", shmipc, "shmlink-shm"),
        row("shmlink shm (sleep)", shmipc, "shmlink-shm-sleep"),
        row("shmipc-go", shmipc, "shmipc-go"),
    ]),
    "",
    "## Headline",
    "",
    "| check | value | goal | result |",
    "| --- | ---: | ---: | --- |",
    f"| net.UnixConn p50 ÷ shmlink shm p50 | {r_unix:.1f} | ≥ 10 | {goals.cell(headline[0])} |",
    f"| shmlink shm p50 ÷ shmipc-go p50 | {SHMIPC_MISSING if shmipc is None else f'{r_ipc:.3f}'} | ≤ 0.2 "
    f"| {goals.cell(headline[1])} |",
    "",
    goals.summary(headline),
]
# The wait matrix: per load and size, each strategy's p50 (server and client
# with the same strategy), the best one, and the default's p50 ÷ the best's.
# Beside the hog, also the default ÷ the best strategy at the placement the
# scheduler gave the default (bench/common/placement.py).
waits = ["sleep", "spin", "busy"]
default = "spin"
lines += [
    "",
    "## Wait matrix (64 B and 2 KiB)",
    "",
    "| load | size | sleep p50 µs | spin (default) p50 µs | busy p50 µs | best | default ÷ best "
    "| hog CPU %: sleep / spin / busy | default ÷ best at its placement |",
    "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
]
worst, worst_placed = None, None
for ld in ["quiet", "busy"]:
    m = matrix[ld]
    for size, label in [(64, "64 B"), (2048, "2 KiB")]:
        p = {w: m[f"{w}-{size}-p50-ns"] for w in waits}
        best = min(waits, key=lambda w: p[w])
        r = p[default] / p[best]
        if worst is None or r > worst[0]:
            worst = (r, f"{ld} {label}")
        hog, placed = "-", r
        if ld == "busy":
            h = {w: m[f"{w}-{size}-hog-pct"] for w in waits}
            hog = " / ".join(f"{h[w]:.0f}" for w in waits)
            placed = at_placement(p, h, default)
        if worst_placed is None or placed > worst_placed[0]:
            worst_placed = (placed, f"{ld} {label}")
        lines.append(f"| {ld} | {label} | " + " | ".join(f"{p[w] / 1e3:.2f}" for w in waits)
                     + f" | {best} | {r:.2f} | {hog} | {placed:.2f} |")
lines += [
    "",
    "p50 of sequential calls over shm, the Go client against `shmlink echo --reply-ratio 1`, both "
    "waiting with the strategy of the column (spin: Spin 0, the adaptive default); all six points "
    "interleaved in rounds of 500 calls in one benchmark, each server stopped (SIGSTOP) outside its "
    "rounds. busy: `shmlink __hog` (unpinned) spins while the benchmark runs.",
    "",
    NOTE,
    "",
    "| check | value | at | goal | result |",
    "| --- | ---: | --- | ---: | --- |",
    f"| default ÷ best, every cell (worst) | {worst[0]:.2f} | {worst[1]} | ≤ 1.2 "
    f"| {goals.cell(worst[0] <= 1.2)} |",
    f"| default ÷ best at its placement, every cell (worst; the bound) | {worst_placed[0]:.2f} "
    f"| {worst_placed[1]} | ≤ 1.2 | {goals.cell(worst_placed[0] <= 1.2)} |",
    "",
    goals.summary([worst[0] <= 1.2, worst_placed[0] <= 1.2]),
]
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
PY
