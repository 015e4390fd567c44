#!/usr/bin/env bash
# Builds the examples against the installed package and runs them: the C++
# daemon on shm, unix and tcp (plus its raw-socket listeners), the C and C++
# clients against each address, the C event-loop client (epoll, 3 sessions), the C bench client once, `shmlink inspect`
# on it (the CLI must be built: target/release/shmlink), then SIGTERM.
#   SHMLINK_PREFIX   where `make install` put shmlink (default target/stage)
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
step_prefix=examples
# shellcheck source=ci/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
cd "$(dirname "$0")/.."
PREFIX=${SHMLINK_PREFIX:-$PWD/target/stage}
make examples PREFIX="$PREFIX"
bin=target/examples

dir=$(mktemp -d)
daemon=""
cleanup() {
  if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then kill -KILL "$daemon"; fi
  rm -rf "$dir"
}
trap cleanup EXIT

"$bin/cpp-daemon/shmlink-daemon" "shm:$dir/d.sock" "unix:$dir/d-unix.sock" tcp:127.0.0.1:0 \
  --raw-unix "$dir/raw.sock" --ready-file "$dir/ready" >"$dir/log" 2>&1 &
daemon=$!
wait_ready "$daemon" "$dir/ready" "$dir/log" "the example daemon"
read -r -a addresses <"$dir/ready"

for a in "${addresses[@]}"; do
  case $a in raw:*) continue ;; esac
  "$bin/c-client/shmlink-c-client" "$a" 2000
  "$bin/cpp-client/shmlink-cpp-client" "$a" 2000
  # One thread on epoll: 3 sessions with 64 calls in flight each.
  "$bin/c-loop/shmlink-c-loop" "$a" 3 64 20
done
out=$("$bin/bench-c-client/shmlink-c-bench" "shm:$dir/d.sock" 2048 2000 100)
echo "$out" | grep -Eq '^\{"size":2048,"calls":2000,"p50_ns":[0-9]+,"p99_ns":[0-9]+,"p999_ns":[0-9]+,"mean_ns":[0-9.]+,"cpu_ns":[0-9]+\}$' \
  || { echo "examples: unexpected c-bench output: $out" >&2; exit 1; }

# `shmlink inspect` on the C++ daemon: its totals, and a session while a
# client runs (listed with its pid and calls), by the daemon's own uid.
shmlink=target/release/shmlink
"$bin/bench-c-client/shmlink-c-bench" "shm:$dir/d.sock" 64 100000000 0 >/dev/null &
bench=$!
seen=""
for _ in $(seq 500); do            # up to 5 s for the session to show its calls
  json=$("$shmlink" inspect "shm:$dir/d.sock" --json)
  if python3 -c 'import json,sys
r = json.loads(sys.argv[1]); pid = int(sys.argv[2])
s = [s for s in r["sessions"] if s["peer_pid"] == pid and s["transport"] == "shm"]
sys.exit(0 if s and s[0]["messages_in"] > 0 and s[0]["ring_c2s"] > 0 and r["server"]["calls"] >= 12000 else 1)' "$json" "$bench"; then
    seen=1; break
  fi
  sleep 0.01
done
kill -KILL "$bench"; wait "$bench" 2>/dev/null || true
[ -n "$seen" ] || { echo "$json"; echo "examples: inspect never showed the bench client's session" >&2; exit 1; }
"$shmlink" inspect "unix:$dir/d-unix.sock" | tee "$dir/inspect.txt"
grep -q "^server pid $daemon at unix:" "$dir/inspect.txt" \
  || { echo "examples: inspect's table does not name the daemon" >&2; exit 1; }
tcp=$(printf '%s\n' "${addresses[@]}" | grep '^tcp:')
if "$shmlink" inspect "$tcp" 2>"$dir/inspect.err"; then
  echo "examples: inspect over TCP was not refused" >&2; exit 1
fi
grep -q "refused an inspection over TCP" "$dir/inspect.err" \
  || { cat "$dir/inspect.err"; echo "examples: TCP refusal unclear" >&2; exit 1; }

kill -TERM "$daemon"
for _ in $(seq 500); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.01; done
if kill -0 "$daemon" 2>/dev/null; then echo "examples: daemon still running 5 s after SIGTERM" >&2; exit 1; fi
status=0; wait "$daemon" || status=$?
daemon=""
cat "$dir/log"
[ "$status" = 0 ] || { echo "examples: daemon exited with $status" >&2; exit 1; }
grep -q "^session opened" "$dir/log" && grep -q "^session closed" "$dir/log" \
  && grep -q "^stopped: " "$dir/log" || { echo "examples: daemon log incomplete" >&2; exit 1; }
[ ! -e "$dir/d.sock" ] && [ ! -e "$dir/d-unix.sock" ] && [ ! -e "$dir/raw.sock" ] \
  || { echo "examples: socket files left behind" >&2; exit 1; }
echo "=== examples: daemon, C and C++ clients, C bench client, inspect ok"
