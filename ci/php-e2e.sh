#!/usr/bin/env bash
# End to end: the PHP extension under a real php-fpm behind nginx, against a
# `shmlink echo` server on shm:, unix: and tcp:, all on loopback.
#   ci/php-e2e.sh
# php-fpm runs 4 static children recycled every 25 requests; nginx serves
# bindings/php/e2e/page.php, which makes 20 checked calls per request through
# a persistent client. 4 curl loops send 1,800 requests (600 per transport,
# interleaved); bindings/php/e2e/check.php checks every body and replays the
# Shmlink\stats() of each worker (one connect per transport, a reuse on every
# later request, no reconnect, no error; workers recycled). After php-fpm
# stops gracefully, the echo server must hold no session of the dead workers:
# at most PREPARED_SEGMENTS (12: 4 made ahead, 8 kept for their processes)
# memfd segments and its listening sockets only.
# Installs what is missing with apt (nginx php8.2-fpm php8.2-cli curl) and
# builds the extension (ci/php-build.sh --no-valgrind) when it is not built.
# All state lives in a temporary directory; no system configuration is read
# or written. Ends with one line "php-e2e: PASS ..." (exit 0) or
# "php-e2e: FAIL ..." (exit 1).
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)

children=4         # pm.max_children (pm = static)
max_requests=25    # pm.max_requests: workers are recycled during the run
loops=4            # concurrent curl loops
per_transport=600  # requests per transport
transports=(shm unix tcp)
prepared_segments=12 # shmlink::PREPARED_SEGMENTS: segments the server holds for no session
fpm=/usr/sbin/php-fpm8.2

step_prefix=php-e2e
ci_start=$start
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh

step "setup"
apt_install_missing nginx php8.2-fpm php8.2-cli curl
nginx=$(command -v nginx || echo /usr/sbin/nginx)

# shellcheck source=ci/lib/built.sh
source ci/lib/built.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/shmlink-php-e2e.XXXXXX")
echo_pid= fpm_pid= nginx_pid= curl_pids=()

# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for p in "${curl_pids[@]}"; do stop_process "$p" TERM 5 || true; done
  stop_process "$nginx_pid" TERM 10 || true
  stop_process "$fpm_pid" TERM 10 || true
  stop_process "$echo_pid" TERM 10 || true
  if [ "$status" != 0 ]; then
    for log in echo.log fpm.log fpm.out php-errors.log nginx-error.log; do
      if [ -s "$work/$log" ]; then
        echo "--- $log (last lines)" >&2
        tail -n 20 "$work/$log" >&2
      fi
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The same, failing the run with "timed out ... waiting for $1".
wait_until() {
  local what=$1 seconds=$2
  shift 2
  poll_until "$seconds" "$@" || fail "timed out after $seconds s waiting for $what"
}

# The echo server's socket inodes, sorted, one a line.
echo_sockets() {
  find "/proc/$echo_pid/fd" -mindepth 1 -maxdepth 1 -printf '%l\n' 2>/dev/null | grep '^socket:' | sort || true
}
# The session memfds the echo server holds open.
echo_segments() {
  find "/proc/$echo_pid/fd" -mindepth 1 -maxdepth 1 -printf '%l\n' 2>/dev/null | grep -c 'memfd:shmlink-session' || true
}
# Distinct session memfds the echo server has mapped.
echo_mapped() {
  { grep 'memfd:shmlink-session' "/proc/$echo_pid/maps" 2>/dev/null || true; } | awk '{print $5}' | sort -u | wc -l
}

step "shmlink echo on shm, unix and tcp"
"$root/target/release/shmlink" echo --listen "shm:$work/shm.sock" --listen "unix:$work/unix.sock" \
  --listen tcp:127.0.0.1:0 --ready-file "$work/echo.ready" </dev/null >/dev/null 2>"$work/echo.log" &
echo_pid=$!
echo_ready() {
  alive "$echo_pid" || fail "shmlink echo exited: $(cat "$work/echo.log")"
  [ -s "$work/echo.ready" ] # written by rename: complete once it exists
}
wait_until "shmlink echo" 20 echo_ready
declare -A address
while read -r a; do address[${a%%:*}]=$a; done <"$work/echo.ready"
for t in "${transports[@]}"; do
  [ -n "${address[$t]:-}" ] || fail "no $t address in the ready file: $(cat "$work/echo.ready")"
done
echo "${address[*]}"
baseline_sockets=$(echo_sockets)
baseline_count=$(echo "$baseline_sockets" | grep -c . || true)
listening=$(awk 'NR > 1 && $4 == "00010000"' /proc/net/unix | grep -cF -e "$work/shm.sock" -e "$work/unix.sock" || true)
echo "echo pid $echo_pid: $baseline_count sockets ($((listening + 1)) listening), $(echo_segments) prepared segments"

step "php-fpm: $children static children, pm.max_requests = $max_requests"
user=$(id -un)
group=$(id -gn)
cat >"$work/fpm.conf" <<EOF
[global]
pid = $work/fpm.pid
error_log = $work/fpm.log
log_level = notice
daemonize = no
process_control_timeout = 10s

[shmlink-e2e]
user = $user
group = $group
listen = $work/fpm.sock
pm = static
pm.max_children = $children
pm.max_requests = $max_requests
catch_workers_output = yes
clear_env = yes
env[SHMLINK_E2E_SHM] = ${address[shm]}
env[SHMLINK_E2E_UNIX] = ${address[unix]}
env[SHMLINK_E2E_TCP] = ${address[tcp]}
php_admin_value[extension] = $module
php_admin_value[error_log] = $work/php-errors.log
php_admin_value[error_reporting] = 32767
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
EOF
as_root=()
[ "$(id -u)" = 0 ] && as_root=(-R)
# -n: no php.ini; the module comes from the pool's php_admin_value only.
"$fpm" -n "${as_root[@]}" --nodaemonize -y "$work/fpm.conf" </dev/null >"$work/fpm.out" 2>&1 &
fpm_pid=$!
fpm_ready() {
  alive "$fpm_pid" || fail "php-fpm exited: $(cat "$work/fpm.out" "$work/fpm.log" 2>/dev/null)"
  [ -S "$work/fpm.sock" ]
}
wait_until "php-fpm" 20 fpm_ready

step "nginx"
mkdir -p "$work/nginx/tmp" "$work/out"
nginx_user=
[ "$(id -u)" = 0 ] && nginx_user="user root root;"
free_port() {
  php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false);
             echo substr($n, strrpos($n, ":") + 1);'
}
for attempt in 1 2 3 4 5; do
  port=$(free_port)
  cat >"$work/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
$nginx_user
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path $work/nginx/tmp/body;
  fastcgi_temp_path $work/nginx/tmp/fastcgi;
  proxy_temp_path $work/nginx/tmp/proxy;
  uwsgi_temp_path $work/nginx/tmp/uwsgi;
  scgi_temp_path $work/nginx/tmp/scgi;
  server {
    listen 127.0.0.1:$port;
    root $root/bindings/php/e2e;
    location = /healthz { return 200 "ok\n"; }
    location = /page.php {
      fastcgi_pass unix:$work/fpm.sock;
      fastcgi_param SCRIPT_FILENAME \$document_root/page.php;
      fastcgi_param SCRIPT_NAME /page.php;
      fastcgi_param REQUEST_URI \$request_uri;
      fastcgi_param QUERY_STRING \$query_string;
      fastcgi_param REQUEST_METHOD \$request_method;
      fastcgi_param SERVER_PROTOCOL \$server_protocol;
      fastcgi_param REMOTE_ADDR \$remote_addr;
      fastcgi_param SERVER_NAME \$server_name;
      fastcgi_param SERVER_PORT \$server_port;
    }
    location / { return 404; }
  }
}
EOF
  : >"$work/nginx-error.log"
  "$nginx" -e "$work/nginx-error.log" -p "$work/nginx/" -c "$work/nginx.conf" </dev/null >"$work/nginx.out" 2>&1 &
  nginx_pid=$!
  nginx_ready() {
    alive "$nginx_pid" || return 0
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/healthz")" = 200 ]
  }
  wait_until "nginx" 20 nginx_ready
  alive "$nginx_pid" && break
  wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=
  grep -q 'Address already in use' "$work/nginx-error.log" "$work/nginx.out" ||
    fail "nginx exited: $(cat "$work/nginx.out" "$work/nginx-error.log")"
  echo "port $port taken meanwhile, another one (attempt $attempt)"
done
[ -n "$nginx_pid" ] || fail "nginx found no free port"
echo "http://127.0.0.1:$port/page.php"

total=$((per_transport * ${#transports[@]}))
per_loop=$((total / loops))
step "load: $total requests, $loops concurrent curl loops, transports interleaved"
for ((l = 0; l < loops; l++)); do
  for ((j = 0; j < per_loop; j++)); do
    t=${transports[$(((l + j) % ${#transports[@]}))]}
    echo "url = \"http://127.0.0.1:$port/page.php?t=$t&r=$l-$j\""
    echo "output = \"$work/out/$l-$j.json\""
  done >"$work/out/loop-$l.curl"
done
for ((l = 0; l < loops; l++)); do
  # One curl per loop: sequential requests over a kept-alive connection.
  timeout 300 curl -sS --max-time 30 -K "$work/out/loop-$l.curl" \
    -w '%{http_code} %{url_effective} %{filename_effective}\n' \
    >"$work/out/loop-$l.status" 2>"$work/out/loop-$l.err" &
  curl_pids+=($!)
done
for p in "${curl_pids[@]}"; do
  wait "$p" || fail "a curl loop failed (exit $?): $(cat "$work"/out/loop-*.err)"
done
curl_pids=()

step "check the responses and the stats of every worker"
summary=$(php -n "$root/bindings/php/e2e/check.php" "$work/out" "$total" "$children" "$max_requests") ||
  fail "the responses do not hold"
echo "$summary"

step "sessions held by the echo server while php-fpm runs"
# Recycled workers are gone: only the live children's sessions remain (one
# per transport each).
live_sessions() {
  held=$(($(echo_sockets | wc -l) - baseline_count))
  segments_held=$(echo_segments)
  mapped_held=$(echo_mapped)
  [ "$held" -le $((children * ${#transports[@]})) ] &&
    [ "$segments_held" -le $((prepared_segments + children)) ] &&
    [ "$mapped_held" -le $((prepared_segments + children)) ]
}
poll_until 5 live_sessions ||
  fail "recycled workers' sessions still open: $held connections, $segments_held segments open," \
    "$mapped_held mapped (expected at most $((children * ${#transports[@]})) and $((prepared_segments + children)))"
echo "$held connections, $segments_held segments open, $mapped_held mapped" \
  "(at most $((children * ${#transports[@]})) and $((prepared_segments + children)))"
held_before=$held mapped_before=$mapped_held

step "stop php-fpm (SIGQUIT, graceful)"
stop_process "$fpm_pid" QUIT 15 || fail "php-fpm did not exit within 15 s of SIGQUIT"
fpm_pid=
if grep 'exited on signal' "$work/fpm.log" | grep -v '(SIGQUIT)' >&2; then
  fail "a php-fpm worker died of a signal"
fi
if grep -E 'said into std(out|err)' "$work/fpm.log" >&2; then
  fail "a php-fpm worker wrote to stdout/stderr"
fi
if [ -s "$work/php-errors.log" ]; then
  head -n 20 "$work/php-errors.log" >&2
  fail "PHP logged errors"
fi
exited=$(grep -c 'exited with code 0 after' "$work/fpm.log" || true)
[ "$exited" -gt 0 ] || fail "php-fpm logged no worker exiting with code 0 (none recycled)"
echo "$exited workers exited with code 0 (recycled by pm.max_requests), none died of a signal"

step "no session left on the echo server"
no_sessions() {
  segments_left=$(echo_segments)
  mapped_left=$(echo_mapped)
  sockets_left=$(echo_sockets)
  [ "$segments_left" -le "$prepared_segments" ] && [ "$mapped_left" -le "$prepared_segments" ] &&
    [ "$sockets_left" = "$baseline_sockets" ]
}
if ! poll_until 5 no_sessions; then
  echo "segments open $segments_left, mapped $mapped_left (at most $prepared_segments)" >&2
  echo "sockets now:" $sockets_left >&2
  echo "sockets at start:" $baseline_sockets >&2
  fail "the echo server still holds sessions of dead workers"
fi
alive "$echo_pid" || fail "shmlink echo died"
echo "segments $segments_left open, $mapped_left mapped; sockets: the $baseline_count of its start"

echo "php-e2e: PASS: $summary; $exited workers exited with code 0; echo server: $held_before connections" \
  "and $mapped_before segments mapped with the live workers, after php-fpm stopped $segments_left segments open," \
  "$mapped_left mapped (<= $prepared_segments prepared) and its listening sockets only ($(($(date +%s) - start)) s)"
