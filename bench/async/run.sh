#!/usr/bin/env bash
# Async calls beside blocking ones, in one run against one server
# (`shmlink echo`, answers whole): at 64 B, one call at a time through an
# event loop (p50) beside the blocking call with the sleep wait (p50), CPU
# per call for each, pipelined async calls from one task or thread, and the
# CPU 1,000 idle async sessions take; for Rust (tokio), C (epoll), PHP
# (stream_select on Client::stream()) and Python (asyncio, its own script
# and server), shm and unix. Go's cancellable calls are in bindings/go/bench.sh.
#   bench/async/run.sh [--calls N] [--markdown FILE]
# Needs: cargo, target/release/shmlink, the PHP extension; the staged C
# library and examples (make install + make examples) for the C rows and
# the Python venv with the binding for Python's, each left out without
# them (a goal then reads "not measured", with what is missing).
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
step_prefix=async
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
calls=20000
markdown=""
python_args=(--rounds 3 --seconds 0.3)
while [ $# -gt 0 ]; do
  case $1 in
    --calls) calls=$2; shift 2 ;;
    --markdown) markdown=$2; shift 2 ;;
    --quick) calls=2000; python_args=(--rounds 1 --seconds 0.05); shift ;;
    *) echo "usage: $0 [--calls N] [--quick] [--markdown FILE]" >&2; exit 2 ;;
  esac
done
cargo build --quiet --release -p shmlink --features tokio --example async_bench
shmlink=target/release/shmlink
loop=target/examples/c-loop/shmlink-c-loop
# Without the C example its rows are left out and its goal reads "not measured".
[ -x "$loop" ] || echo "async: no $loop (make install PREFIX=\$PWD/target/stage && make examples PREFIX=\$PWD/target/stage): no C rows" >&2

dir=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
"$shmlink" echo --listen "shm:$dir/a.sock" --listen "unix:$dir/a-unix.sock" --reply-ratio 1 \
  --max-sessions 4096 --ready-file "$dir/ready" >"$dir/log" 2>&1 &
server=$!
wait_ready "$server" "$dir/ready" "$dir/log" "shmlink echo"

for t in shm unix; do
  addr="$t:$dir/a.sock"
  [ "$t" = unix ] && addr="unix:$dir/a-unix.sock"
  echo "rust $t $(target/release/examples/async_bench "$addr" "$calls")" >>"$dir/rows"
  [ ! -x "$loop" ] || echo "c $t $("$loop" "$addr" --bench "$calls")" >>"$dir/rows"
  echo "php $t $(php -d extension="$PWD/bindings/php/modules/shmlink.so" bench/async/php.php "$addr" "$calls")" >>"$dir/rows"
done
python_md="$dir/python.md"
if [ -x target/python-venv/bin/python ]; then
  target/python-venv/bin/python bindings/python/async_bench.py "${python_args[@]}" \
    --markdown "$python_md" >/dev/null
fi

python3 - "$dir/rows" "$python_md" "$markdown" "$loop" <<'PY'
import json, os, sys
rows, python_md, out, loop = sys.argv[1:5]
sys.path.insert(0, "bench/common")
import goals
lines = ["## Async calls beside blocking ones", "",
         "`bench/async/run.sh`: one `shmlink echo` server, 64 B requests, each figure from this run. "
         "*Blocking* is a call with the sleep wait; *async* is one call at a time through an event loop "
         "(tokio's `AsyncClient::call`; C `shmlink_client_send` + `epoll_wait` + "
         "`shmlink_client_try_receive`; PHP `send()` + `stream_select()` on `Client::stream()` + "
         "`tryReceive()`); *pipelined* keeps 256 calls in flight from one task (Rust) or "
         "thread (C, PHP). CPU is the caller's, per call. Go's calls with a cancellable context "
         "are in the Go section above. The two ways alternate in rounds of 500 calls. Over unix "
         "a round trip is either about 11 µs or about 50 µs depending on where the host puts the "
         "two vCPUs at that moment (a woken thread on an idle vCPU), so unix rows move between "
         "runs by up to 4× in either direction; the shm rows do not wait on the scheduler.", "",
         "| language | transport | blocking p50 | async p50 | async ÷ blocking | blocking CPU/call | async CPU/call | pipelined async calls/s | pipelined CPU/call | 1,000 idle sessions, CPU |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
measured = {}  # (lang, transport) -> the row's JSON
for line in open(rows):
    lang, t, js = line.split(" ", 2)
    r = json.loads(js)
    a = r.get("async_p50_ns", r.get("loop_p50_ns"))
    acpu = r.get("async_cpu_ns", r.get("loop_cpu_ns"))
    b = r["blocking_sleep_p50_ns"]
    ratio = a / b
    r["ratio"] = ratio
    measured[(lang, t)] = r
    idle = r.get("idle_1000_sessions_cpu_pct")
    name = {"rust": "Rust (tokio)", "c": "C (epoll)", "php": "PHP (stream_select)"}[lang]
    lines.append(f"| {name} | {t} | {b/1e3:.2f} µs | {a/1e3:.2f} µs | {ratio:.2f}× | "
                 f"{r['blocking_sleep_cpu_ns']/1e3:.2f} µs | {acpu/1e3:.2f} µs | "
                 f"{r['pipelined_calls_per_s']:,.0f} | {r['pipelined_cpu_ns']/1e3:.2f} µs | "
                 f"{'' if idle is None else f'{idle:.2f} %'} |")
# The goals: (check, value or None, shown value, goal, met); a goal whose
# row is missing says what is missing and how to get it.
missing = {"rust": "no Rust (tokio) shm row: cargo build --release -p shmlink --features tokio --example async_bench",
           "c": f"the C event loop example is not built ({loop}): make install PREFIX=$PWD/target/stage"
                " && make examples PREFIX=$PWD/target/stage"}
rust, c = measured.get(("rust", "shm")), measured.get(("c", "shm"))
idle = rust.get("idle_1000_sessions_cpu_pct") if rust else None
checks = [
    ("Rust (tokio), shm: async ÷ blocking p50", rust and f"{rust['ratio']:.2f}×", "≤ 1.3×",
     rust and rust["ratio"] <= 1.3, missing["rust"]),
    ("C (epoll), shm: async ÷ blocking p50", c and f"{c['ratio']:.2f}×", "≤ 1.3×",
     c and c["ratio"] <= 1.3, missing["c"]),
    ("Rust (tokio), shm: pipelined calls/s", rust and f"{rust['pipelined_calls_per_s']:,.0f}", "≥ 2,000,000",
     rust and rust["pipelined_calls_per_s"] >= 2e6, missing["rust"]),
    ("Rust (tokio), shm: CPU of 1,000 idle sessions", idle is not None and f"{idle:.2f} % of a CPU", "0 % (< 0.5 %)",
     idle < 0.5 if idle is not None else None,
     missing["rust"] if not rust else "the Rust row has no idle-session figure: run again"),
]
lines += ["", "Goals (issue 36):", "", "| check | value | goal | result |", "| --- | ---: | ---: | --- |"]
for check, value, goal, met, why in checks:
    met = None if not value else met
    lines.append(f"| {check} | {value or why} | {goal} | {goals.cell(met)} |")
lines += ["", goals.summary(None if not value else met for _, value, _, met, _ in checks)]
if os.path.exists(python_md) and os.path.getsize(python_md) > 0:
    lines += ["", "### Python (asyncio)", "", "`bindings/python/async_bench.py`, in the same run (its own server):", ""]
    lines += [l.rstrip("\n") for l in open(python_md) if not l.startswith("# ")]
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
PY
