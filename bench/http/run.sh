#!/usr/bin/env bash
# The HTTP benchmark (docs/benchmarks.md, "Serving PHP over HTTP"): three
# apps (bench/http/apps: hello world, bootstrap-heavy, leaky), each run
# unchanged under
#   - shmlink pool --http with 2 PHP workers (OPcache on for the CLI);
#   - nginx + PHP-FPM (pm = static, 2 children, OPcache on);
#   - nginx + PHP-FPM with opcache.preload of the app's files;
# loaded by wrk on loopback (same threads, connections and duration for
# all; app (c) under the pool with --max-memory 64M, as a leaky app must
# run under long-lived workers), plus app (b) under the pool with a reload in
# the middle of the run. One table (requests/s, p50,
# p99, errors, workers' RSS, ratios to nginx + PHP-FPM) and a PNG.
#
#   bench/http/run.sh [--duration SECONDS] [--connections N] [--out DIR] [--quick]
#
# Defaults: 5 s a row after a 1 s warm-up, 16 connections, 2 wrk threads,
# results in bench/results/http-latest.{md,json,png}. --quick: 1 s rows
# (ci/test.sh's short run). Expects the build of ci/main.sh (target/release/
# shmlink, bindings/php/modules/shmlink.so); installs nothing.
#
# State lives in target/http-bench: a rerun, or a run after Ctrl-C, first
# stops what an earlier run left there (pid files checked against the
# process's command line) and removes its sockets.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
duration=5
warmup=1
connections=16
out=$root/bench/results
while [ $# -gt 0 ]; do
  case $1 in
    --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
    --connections) connections=${2:?--connections needs a number}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --quick) duration=1; shift ;;
    *) echo "http bench: unknown argument $1 (bench/http/run.sh [--duration S] [--connections N] [--out DIR] [--quick])" >&2; exit 2 ;;
  esac
done
run=$root/target/http-bench
shmlink=$root/target/release/shmlink
module=$root/bindings/php/modules/shmlink.so
apps=$root/bench/http/apps
fail() { echo "http bench: $*" >&2; exit 1; }
[ -x "$shmlink" ] || fail "$shmlink is not built (cargo build --release)"
[ -f "$module" ] || fail "$module is not built (ci/php-build.sh)"
for c in wrk nginx php-fpm8.2; do
  command -v "$c" >/dev/null || fail "$c is not installed (ci/setup.sh installs it)"
done
mkdir -p "$run" "$out"
# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"

stop_all() {
  stop_pidfile "$run/nginx.pid" nginx
  stop_pidfile "$run/fpm.pid" php-fpm
  stop_pidfile "$run/pool.pid" "shmlink pool"
  rm -f "$run"/*.sock "$run"/*.ctl
}
for f in "$run"/*.pid; do
  [ -e "$f" ] && echo "http bench: cleaning up after an earlier run ($(basename "$f" .pid))"
done
stop_all
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

php "$apps/heavy/generate.php" >/dev/null
port=$(php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false);
                  echo substr($n, strrpos($n, ":") + 1);')
url=http://127.0.0.1:$port
results=$run/results.jsonl
: >"$results"

# PHP-FPM for app $1, with opcache.preload when $2 is "preload".
start_fpm() {
  local app=$1 preload=${2:-} args=()
  cat >"$run/fpm.conf" <<CONF
[global]
pid = $run/fpm.master.pid
error_log = $run/fpm.log
daemonize = no
[www]
listen = $run/fpm.sock
listen.mode = 0666
pm = static
pm.max_children = 2
clear_env = no
php_admin_value[opcache.enable] = 1
php_admin_value[opcache.validate_timestamps] = 0
php_admin_value[memory_limit] = 512M
CONF
  if [ "$preload" = preload ]; then
    args=(-d opcache.preload="$root/bench/http/preload.php" -d opcache.preload_user=root)
  fi
  APP_FILE=$app php-fpm8.2 -R -F -y "$run/fpm.conf" -d extension="$module" "${args[@]}" \
    </dev/null >>"$run/fpm.log" 2>&1 &
  echo $! >"$run/fpm.pid"
  poll_until 20 test -S "$run/fpm.sock" || fail "php-fpm did not start: $(tail -n 5 "$run/fpm.log")"
  cat >"$run/nginx.conf" <<CONF
worker_processes auto;
pid $run/nginx.master.pid;
error_log $run/nginx.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $run/nginx-body;
  fastcgi_temp_path $run/nginx-fastcgi;
  proxy_temp_path $run/nginx-proxy;
  uwsgi_temp_path $run/nginx-uwsgi;
  scgi_temp_path $run/nginx-scgi;
  server {
    listen 127.0.0.1:$port;
    location / {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $root/bench/http/fpm.php;
      fastcgi_param APP_FILE $app;
      fastcgi_pass unix:$run/fpm.sock;
    }
  }
}
CONF
  nginx -p "$run" -c "$run/nginx.conf" -g 'daemon off;' </dev/null >>"$run/nginx.log" 2>&1 &
  echo $! >"$run/nginx.pid"
  poll_until 20 curl -sf -o /dev/null "$url/?id=1" || fail "nginx + php-fpm do not answer: $(tail -n 5 "$run/nginx.log" "$run/fpm.log")"
}

# shmlink pool --http with 2 PHP workers of app $1; more pool options after it.
start_pool() {
  local app=$1
  shift
  "$shmlink" pool --http "127.0.0.1:$port" --workers 2 --control "$run/pool.ctl" "$@" -- \
    php -d extension="$module" -d opcache.enable_cli=1 -d memory_limit=512M \
    "$root/bench/http/worker.php" "$app" </dev/null >"$run/pool.log" 2>&1 &
  echo $! >"$run/pool.pid"
  poll_until 30 curl -sf -o /dev/null "$url/?id=1" || fail "shmlink pool does not answer: $(tail -n 5 "$run/pool.log")"
}

# Resident memory of the workers now, in bytes (summed). The pool reads
# a worker's every half second: a worker just started has none yet, so the
# sum waits (up to 2 s) until every worker has one.
pool_rss() {
  "$shmlink" pool status --json "$run/pool.ctl" | php -r '$s = json_decode(stream_get_contents(STDIN), true);
    $r = array_column($s["workers"], "rss_bytes");
    echo in_array(0, $r, true) ? "" : array_sum($r);'
}
rss_known() { [ -n "$(pool_rss)" ]; }
workers_rss() {
  local server=$1
  if [[ $server == pool* ]]; then
    poll_until 2 rss_known || true
    pool_rss
  else
    local total=0 kb k
    for k in $(cat /proc/"$(cat "$run/fpm.pid")"/task/*/children 2>/dev/null); do
      kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$k/status" 2>/dev/null || echo 0)
      total=$((total + ${kb:-0} * 1024))
    done
    echo "$total"
  fi
}

# One row: wrk on $url$target for $duration s after a warm-up; $4, when
# given, runs in the background meanwhile (the reload row).
measure() {
  local server=$1 app=$2 target=$3 during=${4:-} json rss restarts=0 bg=
  wrk -t2 -c"$connections" -d"${warmup}s" "$url$target" >/dev/null
  if [ -n "$during" ]; then
    (sleep "$(php -r "echo $duration / 3;")"; $during) &
    bg=$!
  fi
  json=$(wrk -t2 -c"$connections" -d"${duration}s" -s "$root/bench/http/report.lua" "$url$target" | tail -n 1)
  [ -z "$bg" ] || wait "$bg"
  rss=$(workers_rss "$server")
  if [[ $server == pool* ]]; then
    restarts=$("$shmlink" pool status --json "$run/pool.ctl" | php -r 'echo json_decode(stream_get_contents(STDIN), true)["restarts"];')
  fi
  printf '{"server":"%s","app":"%s","target":"%s","rss_bytes":%s,"restarts":%s,"wrk":%s}\n' \
    "$server" "$app" "$target" "$rss" "$restarts" "$json" >>"$results"
  echo "http bench: $server $app: $(php -r '$w = json_decode($argv[1], true); printf("%.0f req/s, p50 %.2f ms, p99 %.2f ms, errors %d",
    $w["requests"] / $w["duration_us"] * 1e6, $w["p50_us"] / 1e3, $w["p99_us"] / 1e3,
    $w["connect_errors"] + $w["read_errors"] + $w["write_errors"] + $w["status_errors"] + $w["timeouts"]);' "$json")"
}

reload_pool() { "$shmlink" pool reload "$run/pool.ctl" >/dev/null; }

for name in hello heavy leaky; do
  app=$apps/$name/app.php
  target=/
  pool_args=()
  [ "$name" = heavy ] && target="/?id=4242"
  # The leaky app runs as it must under long-lived workers: recycled.
  [ "$name" = leaky ] && pool_args=(--max-memory 64M)
  start_pool "$app" "${pool_args[@]}"
  measure pool "$name" "$target"
  stop_all
  start_fpm "$app"
  measure fpm "$name" "$target"
  stop_all
  start_fpm "$app" preload
  measure fpm-preload "$name" "$target"
  stop_all
done
start_pool "$apps/heavy/app.php"
measure pool-reload heavy "/?id=4242" reload_pool
stop_all

php "$root/bench/http/report.php" "$results" "$out/http-latest" "wrk -t2 -c$connections -d${duration}s"
