#!/usr/bin/env bash
# The HTTP benchmark (docs/benchmarks.md, "Serving PHP over HTTP"): PHP apps
# (bench/http/apps: hello world, bootstrap-heavy, leaky) run unchanged under
#   - shmlink pool --http, 2 PHP workers, each serving HTTP itself (the
#     default), and with --http-mode front (the pool parses, workers answer
#     calls: the design before issue 32);
#   - Swoole 6.2.2 in SWOOLE_BASE (its default: each worker accepts and
#     parses) and SWOOLE_PROCESS (a master holds the connections), 2
#     workers (bench/http/swoole.php), when Swoole is at hand;
#   - nginx + PHP-FPM (pm = static, 2 children), and with opcache.preload;
#   - the floor: one C process answering a fixed response from memory
#     (bench/http/floor.c), what the kernel's TCP and an event loop cost
#     per request on this machine (hello world only);
# loaded by wrk -t1 on loopback at 16 connections, 256 connections, and 16
# connections with `Connection: close` (a connection per request), in
# interleaved rounds (the median counts: this VM moves its vCPUs), after
# checking that every server gives the same answer (status, content type,
# body) byte for byte. Beside requests/s, p50, p99 and errors: CPU per
# request of each process group (the server's front processes, its
# workers, wrk) from /proc, and for the pool the CPU of its workers' own
# HTTP path, sampled in the workers. Also app (c) under the pool with
# --max-memory 64M and app (b) with a reload in the middle of the run.
#
#   bench/http/run.sh [--duration SECONDS] [--rounds N] [--out DIR] [--quick]
#
# Defaults: 2 s a row, 3 rounds, results in bench/results/http-latest.{md,
# json,png}. --quick: 1 s rows, 1 round (ci/test.sh's short run). Swoole:
# SWOOLE_SO=path/to/swoole.so, or a php with the swoole extension loaded;
# otherwise its rows are left out ("Swoole not at hand"), never a failure.
# Expects the build of ci/main.sh (target/release/shmlink, bindings/php/
# modules/shmlink.so); builds floor.c with cc; installs nothing.
#
# State lives in target/http-bench: a rerun, or a run after Ctrl-C, first
# stops what an earlier run left there (pid files checked against the
# process's command line) and removes its sockets.
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
root=$(pwd)
duration=2
rounds=3
out=$root/bench/results
# shellcheck source=bench/http/lib.sh
source "$root/bench/http/lib.sh"
bench_args "http bench" bench/http/run.sh "$@"
run=$root/target/http-bench
shmlink=$root/target/release/shmlink
module=$root/bindings/php/modules/shmlink.so
apps=$root/bench/http/apps
fail() { echo "http bench: $*" >&2; exit 1; }
[ -x "$shmlink" ] || fail "$shmlink is not built (cargo build --release)"
[ -f "$module" ] || fail "$module is not built (ci/php-build.sh)"
for c in wrk nginx php-fpm8.2 cc curl; do
  command -v "$c" >/dev/null || fail "$c is not installed (ci/setup.sh installs it)"
done
mkdir -p "$run" "$out"
# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"

swoole=()
if [ -n "${SWOOLE_SO:-}" ]; then
  [ -f "$SWOOLE_SO" ] || fail "SWOOLE_SO=$SWOOLE_SO is not a file"
  swoole=(-d extension="$SWOOLE_SO")
elif php -m 2>/dev/null | grep -qx swoole; then
  swoole=(-d swoole.use_shortname=On)
else
  echo "http bench: Swoole not at hand (pecl install swoole, or SWOOLE_SO=path/to/swoole.so): its rows are left out"
fi

servers_pids=(pool front swoole-base swoole-process floor nginx fpm)
stop_all() {
  stop_pidfile "$run/nginx.pid" nginx
  stop_pidfile "$run/fpm.pid" php-fpm
  stop_pidfile "$run/pool.pid" "shmlink pool"
  stop_pidfile "$run/front.pid" "shmlink pool"
  stop_pidfile "$run/swoole-base.pid" swoole.php
  stop_pidfile "$run/swoole-process.pid" swoole.php
  stop_pidfile "$run/floor.pid" floor
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
cc -O2 -o "$run/floor" "$root/bench/http/floor.c"
declare -A port
for s in "${servers_pids[@]}"; do port[$s]=$(free_port); done
hz=$(getconf CLK_TCK)
results=$run/results.jsonl
: >"$results"
php_worker=(php -d extension="$module" -d opcache.enable_cli=1 -d memory_limit=512M)

# --- starting and stopping the servers ---------------------------------

answers() { poll_until 30 curl -sf -o /dev/null "http://127.0.0.1:$1$2"; }

# shmlink pool for app $2 as server $1 (pool: workers serve HTTP; front:
# --http-mode front); more pool options after them.
start_pool() {
  local name=$1 app=$2
  shift 2
  local mode=()
  [ "$name" = front ] && mode=(--http-mode front)
  "$shmlink" pool --http "127.0.0.1:${port[$name]}" --workers 2 --control "$run/$name.ctl" \
    "${mode[@]}" "$@" -- "${php_worker[@]}" "$root/bench/http/worker.php" "$app" \
    </dev/null >"$run/$name.log" 2>&1 &
  echo $! >"$run/$name.pid"
  answers "${port[$name]}" "/?id=1" || fail "shmlink pool ($name) does not answer: $(tail -n 5 "$run/$name.log")"
}

start_swoole() {
  local mode=$1 app=$2 name=swoole-$1
  php "${swoole[@]}" -d opcache.enable_cli=1 -d memory_limit=512M "$root/bench/http/swoole.php" \
    "$app" "${port[$name]}" "$mode" 2 </dev/null >"$run/$name.log" 2>&1 &
  echo $! >"$run/$name.pid"
  answers "${port[$name]}" "/?id=1" || fail "Swoole ($mode) does not answer: $(tail -n 5 "$run/$name.log")"
}

start_floor() {
  "$run/floor" "${port[floor]}" </dev/null >"$run/floor.log" 2>&1 &
  echo $! >"$run/floor.pid"
  answers "${port[floor]}" / || fail "the floor server does not answer"
}

# nginx + PHP-FPM for app $1, with opcache.preload when $2 is "preload".
start_fpm() {
  local app=$1 preload=${2:-} args=()
  fpm_conf "$run"
  if [ "$preload" = preload ]; then
    args=(-d opcache.preload="$root/bench/http/preload.php" -d opcache.preload_user=root)
  fi
  APP_FILE=$app php-fpm8.2 -R -F -y "$run/fpm.conf" -d extension="$module" "${args[@]}" \
    </dev/null >>"$run/fpm.log" 2>&1 &
  echo $! >"$run/fpm.pid"
  poll_until 20 test -S "$run/fpm.sock" || fail "php-fpm did not start: $(tail -n 5 "$run/fpm.log")"
  nginx_conf "$run" "${port[fpm]}" "fastcgi_param SCRIPT_FILENAME $root/bench/http/fpm.php; fastcgi_param APP_FILE $app;"
  nginx -p "$run" -c "$run/nginx.conf" -g 'daemon off;' </dev/null >>"$run/nginx.log" 2>&1 &
  echo $! >"$run/nginx.pid"
  answers "${port[fpm]}" "/?id=1" || fail "nginx + php-fpm do not answer: $(tail -n 5 "$run/nginx.log" "$run/fpm.log")"
}

stop_server() {
  case $1 in
    fpm | fpm-preload) stop_pidfile "$run/nginx.pid" nginx; stop_pidfile "$run/fpm.pid" php-fpm ;;
    pool | pool-reload | leaky) stop_pidfile "$run/pool.pid" "shmlink pool" ;;
    front) stop_pidfile "$run/front.pid" "shmlink pool" ;;
    swoole-*) stop_pidfile "$run/$1.pid" swoole.php ;;
    floor) stop_pidfile "$run/floor.pid" floor ;;
  esac
}

# --- what a server answers, and its processes ---------------------------

port_of() {
  case $1 in
    pool-reload | leaky) echo "${port[pool]}" ;;
    fpm-preload) echo "${port[fpm]}" ;;
    *) echo "${port[$1]}" ;;
  esac
}

# Status, content type and body of $1's answer to $2, one line each.
answer_of() {
  curl -s -D - -o "$run/body" "http://127.0.0.1:$(port_of "$1")$2" | tr -d '\r' |
    awk 'NR == 1 {print $2} tolower($1) == "content-type:" {sub(/^[^:]*: */, ""); print}'
  sha256sum <"$run/body" | cut -d' ' -f1
}

# The pids of server $1's front processes (F) or workers (W): the workers
# are the processes that run the application (the pool's children,
# Swoole's leaf processes, PHP-FPM's children); the front, the others.
group() {
  local pids=() p kids
  case $1 in
    fpm | fpm-preload)
      local nginx fpm
      nginx=$(cat "$run/nginx.pid" 2>/dev/null || true)
      fpm=$(cat "$run/fpm.pid" 2>/dev/null || true)
      if [ "$2" = F ]; then pids=($nginx $(descendants "$nginx") $fpm); else pids=($(descendants "$fpm")); fi ;;
    *)
      local top
      case $1 in pool-reload | leaky) top=$(cat "$run/pool.pid") ;; *) top=$(cat "$run/$1.pid") ;; esac
      for p in "$top" $(descendants "$top"); do
        kids=$(cat /proc/"$p"/task/*/children 2>/dev/null | tr -d ' \n')
        if [ "$2" = W ] && [ -z "$kids" ] && [ "$p" != "$top" ]; then pids+=("$p"); fi
        if [ "$2" = F ] && { [ -n "$kids" ] || [ "$p" = "$top" ]; }; then pids+=("$p"); fi
      done ;;
  esac
  echo "${pids[@]}"
}

# The workers' own HTTP path (pool, workers serving HTTP): ns and samples.
engine() {
  "$shmlink" pool status --json "$run/pool.ctl" 2>/dev/null |
    php -r '$h = json_decode(stream_get_contents(STDIN), true)["http"] ?? null;
            echo $h ? $h["front_cpu_ns"] . " " . $h["front_samples"] : "0 0";'
}

pool_status() { "$shmlink" pool status --json "$run/$1.ctl"; }

rss_of() {
  local total=0 kb p
  for p in $(group "$1" W); do
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    total=$((total + ${kb:-0} * 1024))
  done
  echo "$total"
}

# --- one measurement -----------------------------------------------------

# measure SERVER APP TARGET LOAD ROUND [COMMAND TO RUN MEANWHILE]
measure() {
  local server=$1 app=$2 target=$3 load=$4 round=$5 during=${6:-} args=(-t1) json bg=
  local fpids wpids f0 w0 l0 f1 w1 l1 e0 e1 restarts=0
  case $load in
    c16) args+=(-c16) ;;
    c256) args+=(-c256) ;;
    close) args+=(-c16 -H "Connection: close") ;;
  esac
  fpids=$(group "$server" F)
  wpids=$(group "$server" W)
  e0="0 0"
  [ "$server" = pool ] && e0=$(engine)
  if [ -n "$during" ]; then
    (sleep "$(php -r "echo $duration / 3;")"; $during) &
    bg=$!
  fi
  # shellcheck disable=SC2086
  f0=$(ticks $fpids); w0=$(ticks $wpids)
  local url
  url="http://127.0.0.1:$(port_of "$server")$target"
  children_ms l0
  json=$(wrk "${args[@]}" -d"${duration}s" -s "$root/bench/http/report.lua" "$url")
  children_ms l1
  json=$(echo "$json" | tail -n 1)
  # shellcheck disable=SC2086
  f1=$(ticks $fpids); w1=$(ticks $wpids)
  # A process that exited meanwhile (recycling, a reload) took its CPU
  # time with it: no CPU figure for such a row.
  local cpu
  cpu=$(printf '{"front":%s,"workers":%s,"load":%s}' "$(((f1 - f0) * 1000 / hz))" "$(((w1 - w0) * 1000 / hz))" "$((l1 - l0))")
  if [ "$fpids" != "$(group "$server" F)" ] || [ "$wpids" != "$(group "$server" W)" ]; then cpu=null; fi
  [ -z "$bg" ] || wait "$bg"
  e1="0 0"
  [ "$server" = pool ] && e1=$(engine)
  case $server in pool | pool-reload | leaky | front)
    local ctl=pool
    [ "$server" = front ] && ctl=front
    restarts=$(pool_status $ctl | php -r 'echo json_decode(stream_get_contents(STDIN), true)["restarts"];') ;;
  esac
  printf '{"server":"%s","app":"%s","load":"%s","round":%s,"target":"%s","rss_bytes":%s,"restarts":%s,"cpu_ms":%s,"engine":[%s],"wrk":%s}\n' \
    "$server" "$app" "$load" "$round" "$target" "$(rss_of "$server")" "$restarts" "$cpu" \
    "$(echo "$e0 $e1" | awk '{print $3 - $1 "," $4 - $2}')" "$json" >>"$results"
  echo "http bench: $server $app $load: $(php -r '$w = json_decode($argv[1], true); printf("%.0f req/s, p50 %.2f ms, p99 %.2f ms, errors %d",
    $w["requests"] / $w["duration_us"] * 1e6, $w["p50_us"] / 1e3, $w["p99_us"] / 1e3,
    $w["connect_errors"] + $w["read_errors"] + $w["write_errors"] + $w["status_errors"] + $w["timeouts"]);' "$json")"
}

warm() { wrk -t1 -c16 -d1s "http://127.0.0.1:$(port_of "$1")$2" >/dev/null; }

# Every server of $1 gives the answer of the first to $2, byte for byte.
same_answers() {
  local target=$1 first=$2 want got
  shift 2
  want=$(answer_of "$first" "$target")
  for s in "$@"; do
    got=$(answer_of "$s" "$target")
    [ "$got" = "$want" ] || fail "$s answers $target differently from $first: $(echo "$got" | tr '\n' ' ') against $(echo "$want" | tr '\n' ' ')"
  done
}

# --- the runs --------------------------------------------------------------

reload_pool() { "$shmlink" pool reload "$run/pool.ctl" >/dev/null; }

for name in hello heavy; do
  app=$apps/$name/app.php
  target=/
  [ "$name" = heavy ] && target="/?id=4242"
  servers=(pool front)
  start_pool pool "$app"
  start_pool front "$app"
  if [ ${#swoole[@]} -gt 0 ]; then
    start_swoole base "$app"
    start_swoole process "$app"
    servers+=(swoole-base swoole-process)
  fi
  same_answers "$target" pool "${servers[@]:1}"
  if [ "$name" = hello ]; then
    start_floor
    servers+=(floor)
  fi
  for s in "${servers[@]}"; do warm "$s" "$target"; done
  for round in $(seq "$rounds"); do
    for load in c16 c256 close; do
      for s in "${servers[@]}"; do
        # The floor and the pool's front mode: at 16 connections only.
        if [ "$load" != c16 ] && { [ "$s" = floor ] || [ "$s" = front ]; }; then continue; fi
        measure "$s" "$name" "$target" "$load" "$round"
      done
    done
  done
  for s in "${servers[@]}"; do stop_server "$s"; done
  start_fpm "$app"
  same_answers "$target" fpm
  warm fpm "$target"
  measure fpm "$name" "$target" c16 1
  stop_server fpm
  if [ "$name" = heavy ]; then
    start_fpm "$app" preload
    warm fpm-preload "$target"
    measure fpm-preload "$name" "$target" c16 1
    stop_server fpm-preload
    start_pool pool "$app"
    warm pool "$target"
    measure pool-reload "$name" "$target" c16 1 reload_pool
    stop_server pool
  fi
done
# The leaky app runs as it must under long-lived workers: recycled.
start_pool pool "$apps/leaky/app.php" --max-memory 64M
measure leaky leaky / c16 1
stop_server pool

php "$root/bench/http/report.php" "$results" "$out/http-latest" "wrk -t1 -d${duration}s, $rounds rounds (medians)"
