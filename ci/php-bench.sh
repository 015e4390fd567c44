#!/usr/bin/env bash
# The PHP client benchmark (bench/php/bench.php) against a server started
# here, on shm:, unix: and tcp: (and the raw length-framed baseline).
#   ci/php-bench.sh          full run (50,000 calls a point, a few minutes):
#                            writes bench/results/php-latest.{md,json}
#   ci/php-bench.sh --quick  smoke test (2,000 calls a point): nothing written
# The server is the example daemon, target/examples/cpp-daemon/shmlink-daemon
# (replies floor(len/8) bytes; also serves the raw baseline), when it is
# built (make install PREFIX=$PWD/target/stage && make examples
# PREFIX=$PWD/target/stage); else `shmlink echo` (ceil(len/8)) without the
# raw baseline. SHMLINK_DAEMON=PATH names another daemon binary (a path that
# does not exist forces `shmlink echo`). On 2 CPUs or more the server runs on
# the last CPU and the clients (PHP, then the Rust client the bench runs) on
# CPU 0.
# Builds the extension (ci/php-build.sh --no-valgrind) and the CLI when
# missing. Fails when a call failed or a response was wrong; a goal missed
# is reported (**missed**), not a failure, and one that could not be
# measured here (no Rust figure, no pool given) reads "not measured" with
# what is missing. Ends with one line "php-bench: ... Goals: N met, N
# missed, N not measured. (T s)".
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *)
    echo "usage: ci/php-bench.sh [--quick]" >&2
    exit 2
    ;;
esac
requests=50000
rust_duration=1.0
[ "$quick" = 1 ] && requests=2000 rust_duration=0.2

step_prefix=php-bench
ci_start=$start
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh

step "setup"
apt_install_missing php8.2-cli
# shellcheck source=ci/lib/built.sh
source ci/lib/built.sh
daemon=${SHMLINK_DAEMON:-$root/target/examples/cpp-daemon/shmlink-daemon}

server_pin=() client_pin=()
cpus=$(nproc)
if [ "$cpus" -ge 2 ] && command -v taskset >/dev/null; then
  server_pin=(taskset -c "$((cpus - 1))")
  client_pin=(taskset -c 0)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/shmlink-php-bench.XXXXXX")
server_pid=
# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"
# SIGTERM, then up to 10 s for the server to exit; status 1 if it was killed.
stop_server() {
  local pid=$server_pid
  server_pid=
  stop_process "$pid" TERM 10
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_server || true
  if [ "$status" != 0 ] && [ -s "$work/server.log" ]; then
    echo "--- server log (last lines)" >&2
    tail -n 20 "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

raw=1
if [ -x "$daemon" ]; then
  step "server: shmlink-daemon (example) on shm, unix, tcp, raw unix and raw tcp"
  reply=floor
  server="shmlink-daemon (examples/cpp-daemon)"
  "${server_pin[@]}" "$daemon" --ready-file "$work/ready" --raw-unix "$work/raw.sock" --raw-tcp 127.0.0.1:0 \
    "shm:$work/shm.sock" "unix:$work/unix.sock" tcp:127.0.0.1:0 </dev/null >"$work/server.log" 2>&1 &
else
  step "server: shmlink echo on shm, unix and tcp"
  echo "note: $daemon not built (make install PREFIX=\$PWD/target/stage && make examples PREFIX=\$PWD/target/stage): no raw baseline"
  reply=ceil
  server="shmlink echo"
  raw=0
  "${server_pin[@]}" target/release/shmlink echo --listen "shm:$work/shm.sock" --listen "unix:$work/unix.sock" \
    --listen tcp:127.0.0.1:0 --ready-file "$work/ready" </dev/null >/dev/null 2>"$work/server.log" &
fi
server_pid=$!
[ ${#server_pin[@]} = 0 ] || server+=", on CPU $((cpus - 1)) (clients on CPU 0)"
# Ready once the file ends with a newline (the daemon writes it in place).
deadline=$(($(date +%s) + 20))
until [ -s "$work/ready" ] && [ -z "$(tail -c 1 "$work/ready")" ]; do
  alive "$server_pid" || fail "the server exited: $(cat "$work/server.log")"
  [ "$(date +%s)" -lt "$deadline" ] || fail "timed out after 20 s waiting for the server"
  sleep 0.02
done
# Addresses, one a line or space-separated: shm:..., raw:unix:PATH, raw:tcp:HOST:PORT.
args=() raw_args=()
for a in $(cat "$work/ready"); do
  case "$a" in
    shm:* | unix:* | tcp:*) args+=("--${a%%:*}" "$a") ;;
    raw:unix:*) raw_args+=(--raw-unix "${a#raw:unix:}") ;;
    raw:tcp:*) raw_args+=(--raw-tcp "${a#raw:tcp:}") ;;
  esac
done
for t in shm unix tcp; do
  [[ " ${args[*]} " == *" --$t "* ]] || fail "no $t address in the ready file: $(cat "$work/ready")"
done
if [ "$raw" = 1 ]; then
  [ ${#raw_args[@]} = 4 ] || fail "no raw addresses in the daemon's ready file: $(cat "$work/ready")"
  if php -r 'exit(extension_loaded("sockets") ? 0 : 1);'; then
    args+=("${raw_args[@]}")
  else
    echo "note: PHP's sockets extension is not loaded: no raw baseline"
  fi
fi
echo "${args[*]}"

step "bench.php: $requests calls a point"
"${client_pin[@]}" php -d extension="$module" bench/php/bench.php "${args[@]}" \
  --requests "$requests" --sizes 2048,128,64 --reconnect-every 0,10,1 --reply "$reply" \
  --rust-bin "$root/target/release/shmlink" --rust-duration "$rust_duration" --server "$server" \
  --json "$work/php.json" --markdown "$work/php.md" || fail "bench.php failed"
stop_server || fail "the server did not exit within 10 s of SIGTERM"

if [ "$quick" = 0 ]; then
  mkdir -p bench/results
  cp "$work/php.json" bench/results/php-latest.json
  cp "$work/php.md" bench/results/php-latest.md
  echo "wrote bench/results/php-latest.md and bench/results/php-latest.json"
fi
summary=$(php -r '$d = json_decode(file_get_contents($argv[1]), true);
  $g = $d["goals_summary"];
  printf("%d points, every response checked. Goals: %d met, %d missed, %d not measured.",
    count($d["points"]), $g["met"], $g["missed"], $g["not_measured"]);' "$work/php.json")
echo "php-bench: $summary ($(($(date +%s) - start)) s)"
