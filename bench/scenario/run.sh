#!/usr/bin/env bash
# The scenario of docs/benchmarks.md (CONTEXT.md scenario 1) end to end: the
# example C++ daemon on shm, unix and tcp (and its raw length-framed
# listeners); the PHP benchmark client (bench/php/bench.php) through the
# extension over each, PHP's own sockets to the raw listeners, a Redis
# broker round trip, and `shmlink pool` with 1 and 2 PHP workers
# (bench/pool/worker.php) answering as the daemon does; 2048 B and 128 B requests, one connection, reconnect
# every 10 calls, reconnect every call; every response checked; one table
# with calls/s, p50, p99 and the ratios to shmlink shm.
#
#   bench/scenario/run.sh [--requests N] [--no-redis] [--php 8.2,8.4] [--out DIR]
#
# --php: the PHP versions to compare on one point (shm, 2048 B, one
# connection) in alternating rounds against the same daemon, before the
# main run: 8.2 is the host's, 8.4 runs in the Debian 13 root of
# ci/php-root.sh; the table's goal PHP 8.4 >= 0.9x PHP 8.2 reads "not
# measured" without it.
#
# --requests: calls a point (default 20000); --no-redis: skip the Redis row
# (skipped with one line anyway when redis-server or php8.2-redis is
# missing); --out: where scenario-latest.{md,json} go (default
# bench/results). Expects the build of ci/main.sh: the daemon in
# target/examples, the extension in bindings/php/modules.
#
# State lives in target/scenario: a rerun, or a run after Ctrl-C, first
# stops what an earlier run left there (pid files, checked against the
# process's command line) and removes its sockets.
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
root=$(pwd)
requests=20000
redis=1
versions=
out=$root/bench/results
while [ $# -gt 0 ]; do
  case $1 in
    --php) versions=${2:?--php needs versions, e.g. 8.2,8.4}; shift 2 ;;
    --requests) requests=${2:?--requests needs a number}; shift 2 ;;
    --no-redis) redis=0; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    *) echo "scenario: unknown argument $1 (bench/scenario/run.sh [--requests N] [--no-redis] [--php 8.2,8.4] [--out DIR])" >&2; exit 2 ;;
  esac
done
run=$root/target/scenario
daemon=$root/target/examples/cpp-daemon/shmlink-daemon
module=$root/bindings/php/modules/shmlink.so
fail() { echo "scenario: $*" >&2; exit 1; }
[ -x "$daemon" ] || fail "$daemon is not built (make install PREFIX=\$PWD/target/stage && make examples PREFIX=\$PWD/target/stage)"
[ -f "$module" ] || fail "$module is not built (ci/php-build.sh)"
mkdir -p "$run" "$out"

# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"

cleanup() {
  stop_pidfile "$run/pool1.pid" "shmlink pool"
  stop_pidfile "$run/pool2.pid" "shmlink pool"
  stop_pidfile "$run/worker.pid" bench/redis/worker.php
  stop_pidfile "$run/redis.pid" redis-server
  stop_pidfile "$run/daemon.pid" shmlink-daemon
  rm -f "$run"/*.sock "$run/ready"
}
for f in "$run"/*.pid; do
  [ -e "$f" ] && echo "scenario: cleaning up after an earlier run ($(basename "$f" .pid))"
done
cleanup
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# On 2 CPUs or more the daemon runs on the last CPU, the client on CPU 0.
server_pin=() client_pin=()
cpus=$(nproc)
if [ "$cpus" -ge 2 ] && command -v taskset >/dev/null; then
  server_pin=(taskset -c "$((cpus - 1))")
  client_pin=(taskset -c 0)
fi

echo "scenario: the example daemon on shm, unix, tcp, raw unix and raw tcp"
"${server_pin[@]}" "$daemon" "shm:$run/shm.sock" "unix:$run/unix.sock" tcp:127.0.0.1:0 \
  --raw-unix "$run/raw.sock" --raw-tcp 127.0.0.1:0 --ready-file "$run/ready" </dev/null >"$run/daemon.log" 2>&1 &
echo $! >"$run/daemon.pid"
daemon_ready() {
  alive "$(cat "$run/daemon.pid")" || fail "the daemon exited: $(tail -n 5 "$run/daemon.log")"
  [ -s "$run/ready" ] # written by rename: complete once it exists
}
poll_until 20 daemon_ready || fail "the daemon did not start within 20 s: $(tail -n 5 "$run/daemon.log")"
args=()
for a in $(cat "$run/ready"); do
  case $a in
    shm:* | unix:* | tcp:*) args+=("--${a%%:*}" "$a") ;;
    raw:unix:*) args+=(--raw-unix "${a#raw:unix:}") ;;
    raw:tcp:*) args+=(--raw-tcp "${a#raw:tcp:}") ;;
  esac
done
[ ${#args[@]} = 10 ] || fail "unexpected addresses in the daemon's ready file: $(cat "$run/ready")"

if [ "$redis" = 1 ]; then
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "scenario: no Redis row: redis-server is not installed (apt-get install redis-server php8.2-redis)"
  elif ! php -r 'exit(extension_loaded("redis") ? 0 : 1);'; then  # not `php -m | grep -q`: SIGPIPE under pipefail
    echo "scenario: no Redis row: PHP's redis extension is not installed (apt-get install php8.2-redis)"
  else
    port=$(php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false);
                      echo substr($n, strrpos($n, ":") + 1);')
    echo "scenario: redis-server on 127.0.0.1:$port and the PHP worker (bench/redis/worker.php)"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
      </dev/null >"$run/redis.log" 2>&1 &
    echo $! >"$run/redis.pid"
    redis_ready() {
      alive "$(cat "$run/redis.pid")" || fail "redis-server exited: $(tail -n 5 "$run/redis.log")"
      [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]
    }
    poll_until 20 redis_ready || fail "redis-server did not answer within 20 s"
    php bench/redis/worker.php 127.0.0.1 "$port" </dev/null >"$run/worker.log" 2>&1 &
    echo $! >"$run/worker.pid"
    worker_ready() {
      alive "$(cat "$run/worker.pid")" || fail "the Redis worker exited: $(tail -n 5 "$run/worker.log")"
      grep -qx ready "$run/worker.log"
    }
    poll_until 20 worker_ready || fail "the Redis worker did not start within 20 s"
    args+=(--redis "127.0.0.1:$port")
  fi
fi

# The pools: `shmlink pool` with 1 and with 2 PHP workers (OPcache on, as a
# production CLI worker runs), on the daemon's CPU like the daemon.
shmlink=$root/target/release/shmlink
[ -x "$shmlink" ] || fail "$shmlink is not built (cargo build --release -p shmlink-cli)"
for n in 1 2; do
  "${server_pin[@]}" "$shmlink" pool --listen "shm:$run/pool$n.sock" --workers "$n" -- \
    php -d extension="$module" -d opcache.enable_cli=1 "$root/bench/pool/worker.php" \
    </dev/null >"$run/pool$n.log" 2>&1 &
  echo $! >"$run/pool$n.pid"
done
pool_ready() { # N: the pool of N workers has N of them running
  alive "$(cat "$run/pool$1.pid")" || fail "the pool of $1 exited: $(tail -n 5 "$run/pool$1.log")"
  [ -S "$run/pool$1.sock.ctl" ] || return 1
  "$shmlink" pool status "$run/pool$1.sock.ctl" --json 2>/dev/null |
    php -r '$s = json_decode(stream_get_contents(STDIN), true);
            $up = count(array_filter($s["workers"] ?? [], fn ($w) => $w["state"] === "idle" && !$w["retiring"]));
            exit($up === (int)$argv[1] ? 0 : 1);' "$1"
}
for n in 1 2; do
  poll_until 30 pool_ready "$n" || fail "the pool of $n PHP workers was not ready within 30 s: $(tail -n 5 "$run/pool$n.log")"
done
args+=(--pool1 "shm:$run/pool1.sock" --pool2 "shm:$run/pool2.sock")

# PHP versions on one point, alternating rounds (medians in the report).
version_args=()
if [ -n "$versions" ]; then
  # shellcheck source=ci/lib/php-root.sh
  source "$root/ci/lib/php-root.sh"
  IFS=, read -r -a vs <<<"$versions"
  for v in "${vs[@]}"; do
    [ "$v" = "$php_root_host_version" ] || "$root/ci/php-root.sh" "$v" >/dev/null || fail "no PHP $v root (ci/php-root.sh $v)"
  done
  shm=$(tr -s ' ' '\n' <"$run/ready" | grep '^shm:')
  echo "scenario: PHP ${vs[*]} on shm 2048 B, one connection, 3 alternating rounds of $requests calls"
  for r in 1 2 3; do
    for v in "${vs[@]}"; do
      ext=()
      [ "$v" = "$php_root_host_version" ] && ext=(-d "extension=$module")
      (php_root_exec "$v" "${client_pin[@]}" php "${ext[@]}" bench/php/bench.php --shm "$shm" --requests "$requests" \
        --sizes 2048 --reconnect-every 0 --reply floor --no-rust --json "$run/php-$v-$r.json" >"$run/php-$v-$r.log" 2>&1) ||
        fail "PHP $v round $r failed: $(tail -n 5 "$run/php-$v-$r.log")"
    done
  done
  php -r '$out = [];
    foreach (array_slice($argv, 2) as $v) {
      foreach (glob("$argv[1]/php-$v-*.json") as $f) {
        $j = json_decode(file_get_contents($f), true, flags: JSON_THROW_ON_ERROR);
        $out[$v]["php"] = $j["meta"]["php"];
        $out[$v]["calls_per_s"][] = $j["points"][0]["calls_per_s"];
      }
    }
    file_put_contents("$argv[1]/versions.json", json_encode($out) . "\n");' "$run" "${vs[@]}"
  version_args=(--versions "$run/versions.json")
fi

echo "scenario: bench/php/bench.php, $requests calls a point"
"${client_pin[@]}" php -d extension="$module" bench/php/bench.php "${args[@]}" \
  --requests "$requests" --sizes 2048,128 --reconnect-every 0,10,1 --reply floor --no-rust \
  --server "shmlink-daemon (examples/cpp-daemon)${server_pin:+, on CPU $((cpus - 1)), the client on CPU 0}" \
  --json "$out/scenario-latest.json" --markdown "$out/scenario-latest.md" "${version_args[@]}" ||
  fail "the benchmark failed (every response is checked: see above)"
stop_pidfile "$run/daemon.pid" shmlink-daemon
stop_pidfile "$run/pool1.pid" "shmlink pool"
stop_pidfile "$run/pool2.pid" "shmlink pool"
echo "scenario: results in $out/scenario-latest.md and $out/scenario-latest.json"
