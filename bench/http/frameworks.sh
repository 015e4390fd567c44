#!/usr/bin/env bash
# The framework benchmark (docs/benchmarks.md, "Symfony and Laravel"): two
# applications built from Debian's packages (the test apps of
# bindings/php/tests/fixtures):
#   - Symfony (5.4 on PHP 8.2, 6.4 on PHP 8.4): GET /page/bench, a controller with two injected services
#     rendering a Twig template;
#   - Laravel (8.83 on PHP 8.2, 10.48 on PHP 8.4): GET /api/bench, a route, a controller, a JSON response;
# and a static file of 100 KiB beside an application (GET /bench-100k.bin:
# the pool with --http-root against nginx alone serving the same file, as
# Debian configures it: sendfile, tcp_nopush; goal >= 0.8x nginx);
# and a server-sent-events endpoint (GET /sse: a classic script that
# flushes its first event, then works 1 s before its last): the time to the
# first byte and to the end, by curl, 5 times (medians; goal: first byte
# < 50 ms while the handler runs);
# each application under
#   - shmlink pool --http, 2 PHP workers serving HTTP themselves (Symfony
#     through Shmlink\Runtime\SymfonyRuntime and its unchanged
#     public/index.php, Laravel through bin/laravel-worker.php);
#   - nginx + PHP-FPM (pm = static, 2 children, OPcache on, timestamps not
#     checked), running the same public/index.php;
# loaded by wrk -t1 -c16 on loopback, in interleaved rounds (medians). Every
# answer is checked first (status, content type, and the body with digits
# masked: the Symfony page counts requests). Beside requests/s, p50, p99 and
# errors: CPU per request of the server's processes and of wrk, from /proc.
# Goal (issue 35): the pool at >= 10x FPM's requests/s on each app. Its
# bound on this host, measured in the same run: each application alone in a
# process that booted it once (bench/http/app-floor.php, no server), CPU per
# request; a server adding nothing would reach FPM's CPU per request over
# that (plus wrk's) as its ratio.
#
#   bench/http/frameworks.sh [--php VERSIONS] [--duration SECONDS] [--rounds N] [--out DIR] [--quick]
#
# --php: the PHP versions the applications run on, comma-separated (default
# 8.2,8.4): 8.2 is the host's (Symfony 5.4, Laravel 8.83), 8.4 runs in the
# Debian 13 root of ci/php-root.sh (Symfony 6.4, Laravel 10.48; its nginx,
# PHP-FPM 8.4 and pool workers all in the root, wrk and curl on the host).
# The static file and the server-sent events run once, on the host's PHP.
#
# Defaults: 3 s a row, 3 rounds, results in bench/results/frameworks-latest.
# {md,json}. --quick: 1 s, 1 round. Expects ci/main.sh's build
# (target/release/shmlink, bindings/php/modules/shmlink.so) and ci/setup.sh's
# packages; installs nothing. State in target/frameworks-bench (what an
# earlier run left there is stopped first).
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
root=$(pwd)
duration=3
rounds=3
out=$root/bench/results
# shellcheck source=bench/http/lib.sh
source "$root/bench/http/lib.sh"
# shellcheck source=ci/lib/common.sh
source "$root/ci/lib/common.sh"
# shellcheck source=ci/lib/php-root.sh
source "$root/ci/lib/php-root.sh"
versions=8.2,8.4
rest=()
while [ $# -gt 0 ]; do
  if [ "$1" = --php ]; then versions=${2:?--php needs versions, e.g. 8.2,8.4}; shift 2; else rest+=("$1"); shift; fi
done
bench_args "frameworks bench" bench/http/frameworks.sh "${rest[@]}"
IFS=, read -r -a versions <<<"$versions"
run=$root/target/frameworks-bench
shmlink=$root/target/release/shmlink
module=$root/bindings/php/modules/shmlink.so
lib=$root/bindings/php/lib
fixtures=$root/bindings/php/tests/fixtures
fail() { echo "frameworks bench: $*" >&2; exit 1; }
[ -x "$shmlink" ] || fail "$shmlink is not built (cargo build --release)"
[ -f "$module" ] || fail "$module is not built (ci/php-build.sh)"
for c in wrk nginx "php-fpm$php_root_host_version" curl; do
  command -v "$c" >/dev/null || fail "$c is not installed (ci/setup.sh installs it)"
done
for f in /usr/share/php/Symfony/Bundle/TwigBundle/autoload.php /usr/share/php/Illuminate/autoload.php; do
  [ -f "$f" ] || fail "$f is missing (ci/setup.sh installs the framework packages)"
done
for v in "${versions[@]}"; do
  # Another PHP's root, with the extension built and installed there.
  if [ "$v" != "$php_root_host_version" ]; then
    "$root/ci/php-root.sh" "$v" >/dev/null || fail "no PHP $v root (ci/php-root.sh $v failed)"
  fi
done
mkdir -p "$run" "$out"
# shellcheck source=ci/lib/procs.sh
source "$root/ci/lib/procs.sh"

stop_all() {
  stop_pidfile "$run/nginx.pid" nginx
  stop_pidfile "$run/fpm.pid" php-fpm
  stop_pidfile "$run/pool.pid" "shmlink pool"
  rm -f "$run"/*.sock
}
stop_all
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The applications, as a Composer install would lay them out, per PHP
# version (Symfony's runtime template is that version's Symfony's).
for v in "${versions[@]}"; do
  rm -rf "${run:?}/$v"
  mkdir -p "$run/$v"
  cp -r "$fixtures/symfony-app" "$run/$v/symfony"
  cp -r "$fixtures/laravel-app" "$run/$v/laravel"
  in_php_root "$v" php -r '$t = file_get_contents("/usr/share/php/Symfony/Component/Runtime/Internal/autoload_runtime.template");
        file_put_contents($argv[1] . "/vendor/autoload_runtime.php", strtr($t, [
            "%runtime_class%" => var_export("Symfony\\Component\\Runtime\\SymfonyRuntime", true),
            "%runtime_options%" => var_export(["project_dir" => $argv[1]], true)]));' "$run/$v/symfony"
done
php=$php_root_host_version
export SHMLINK_PHP_LIB=$lib APP_ENV=prod APP_DEBUG=0
declare -A target=([symfony]=/page/bench [laravel]=/api/bench [static]=/bench-100k.bin)
mkdir -p "$run/static/public"
head -c $((100 << 10)) /dev/urandom >"$run/static/public/bench-100k.bin"
printf '<?php\nreturn static fn () => [404, "text/plain", "not a file\\n"];\n' >"$run/static/app.php"
hz=$(getconf CLK_TCK)
results=$run/results.jsonl
: >"$results"
pool_port=$(free_port)
fpm_port=$(free_port)
answers() { poll_until 30 curl -sf -o /dev/null "http://127.0.0.1:$1$2"; }

# The extension: the host's PHP loads the build of bindings/php, a root's
# PHP the one ci/php-root.sh installed there (its ini loads it).
ext_args() { if [ "$php" = "$php_root_host_version" ]; then echo -d "extension=$module"; fi; }

start_pool() {
  local app=$1 cmd files=()
  case $app in
    symfony) cmd=("$run/$php/symfony/public/index.php") ;;
    laravel) cmd=("$lib/bin/laravel-worker.php" "$run/$php/laravel") ;;
    static) cmd=("$root/bench/http/worker.php" "$run/static/app.php"); files=(--http-root "$run/static/public") ;;
    sse) cmd=("$root/bench/http/sse.php") ;;
  esac
  # shellcheck disable=SC2046 # ext_args is words
  (APP_RUNTIME='Shmlink\Runtime\SymfonyRuntime' php_root_exec "$php" "$shmlink" pool --http "127.0.0.1:$pool_port" \
    --workers 2 "${files[@]}" -- php $(ext_args) -d opcache.enable_cli=1 -d memory_limit=512M "${cmd[@]}" \
    </dev/null >"$run/pool.log" 2>&1) &
  echo $! >"$run/pool.pid"
  answers "$pool_port" "${target[$app]}" || fail "shmlink pool ($app) does not answer: $(tail -n 5 "$run/pool.log")"
}

start_fpm() {
  local app=$1
  if [ "$app" = static ]; then
    nginx_static_conf "$run" "$fpm_port" "$run/static/public"
    nginx -p "$run" -c "$run/nginx.conf" -g 'daemon off;' </dev/null >>"$run/nginx.log" 2>&1 &
    echo $! >"$run/nginx.pid"
    answers "$fpm_port" "${target[$app]}" || fail "nginx (static) does not answer: $(tail -n 5 "$run/nginx.log")"
    return
  fi
  fpm_conf "$run"
  (php_root_exec "$php" "php-fpm$php" -R -F -y "$run/fpm.conf" </dev/null >>"$run/fpm.log" 2>&1) &
  echo $! >"$run/fpm.pid"
  poll_until 20 test -S "$run/fpm.sock" || fail "php-fpm did not start: $(tail -n 5 "$run/fpm.log")"
  nginx_conf "$run" "$fpm_port" "fastcgi_param SCRIPT_FILENAME $run/$php/$app/public/index.php; fastcgi_param SCRIPT_NAME /index.php;"
  (php_root_exec "$php" nginx -p "$run" -c "$run/nginx.conf" -g 'daemon off;' </dev/null >>"$run/nginx.log" 2>&1) &
  echo $! >"$run/nginx.pid"
  answers "$fpm_port" "${target[$app]}" || fail "nginx + php-fpm ($app) do not answer: $(tail -n 5 "$run/nginx.log" "$run/fpm.log")"
}

stop_server() {
  case $1 in
    fpm) stop_pidfile "$run/nginx.pid" nginx; stop_pidfile "$run/fpm.pid" php-fpm ;;
    pool) stop_pidfile "$run/pool.pid" "shmlink pool" ;;
  esac
}

port_of() { if [ "$1" = pool ]; then echo "$pool_port"; else echo "$fpm_port"; fi; }

# Status, content type and body (digits masked) of server $1's answer to $2.
answer_of() {
  curl -s -D - -o "$run/body" "http://127.0.0.1:$(port_of "$1")$2" | tr -d '\r' |
    awk 'NR == 1 {print $2} tolower($1) == "content-type:" {sub(/^[^:]*: */, ""); print}'
  tr '0-9' 'N' <"$run/body"
}

server_pids() {
  local top
  if [ "$1" = pool ]; then
    top=$(cat "$run/pool.pid")
    echo "$top" $(descendants "$top")
  else
    local nginx fpm
    nginx=$(cat "$run/nginx.pid")
    echo "$nginx" $(descendants "$nginx")
    if [ -s "$run/fpm.pid" ]; then
      fpm=$(cat "$run/fpm.pid")
      echo "$fpm" $(descendants "$fpm")
    fi
  fi
}

# measure SERVER APP ROUND
measure() {
  local server=$1 app=$2 round=$3 pids c0 c1 l0 l1 json
  pids=$(server_pids "$server")
  # shellcheck disable=SC2086
  c0=$(ticks $pids)
  children_ms l0
  json=$(wrk -t1 -c16 -d"${duration}s" -s "$root/bench/http/report.lua" "http://127.0.0.1:$(port_of "$server")${target[$app]}" | tail -n 1)
  children_ms l1
  # shellcheck disable=SC2086
  c1=$(ticks $pids)
  printf '{"server":"%s","app":"%s","php":"%s","round":%s,"cpu_ms":{"server":%s,"load":%s},"wrk":%s}\n' \
    "$server" "$app" "$php" "$round" "$(((c1 - c0) * 1000 / hz))" "$((l1 - l0))" "$json" >>"$results"
  echo "frameworks bench: PHP $php $server $app round $round: $(php -r '$w = json_decode($argv[1], true); printf("%.0f req/s, p50 %.2f ms, p99 %.2f ms, errors %d",
    $w["requests"] / $w["duration_us"] * 1e6, $w["p50_us"] / 1e3, $w["p99_us"] / 1e3,
    $w["connect_errors"] + $w["read_errors"] + $w["write_errors"] + $w["status_errors"] + $w["timeouts"]);' "$json")"
}

warm() { wrk -t1 -c16 -d1s "http://127.0.0.1:$(port_of "$1")$2" >/dev/null; }

# The bound: the application's own work per request in a process that
# booted it once (bench/http/app-floor.php), no server around it, on this
# PHP; what a pool of 2 workers could reach if it added nothing.
# shellcheck disable=SC2046 # ext_args is words
floor() {
  local app=$1 json
  json=$(in_php_root "$php" php $(ext_args) -d opcache.enable_cli=1 -d memory_limit=512M \
    "$root/bench/http/app-floor.php" "$app" "$run/$php/$app" "${target[$app]}" "$duration") ||
    fail "$app (PHP $php): bench/http/app-floor.php failed"
  printf '{"server":"floor","app":"%s","php":"%s","cpus":%s,"floor":%s}\n' "$app" "$php" "$(nproc)" "$json" >>"$results"
  echo "frameworks bench: PHP $php $app alone in a booted process: $json"
}

# One server at a time (both would share the 2 CPUs), alternating by round.
# The frameworks on each PHP, the static file on the host's.
cases=()
for v in "${versions[@]}"; do cases+=("$v:symfony" "$v:laravel"); done
cases+=("$php_root_host_version:static")
for case in "${cases[@]}"; do
  php=${case%%:*} app=${case#*:}
  start_pool "$app"
  answer_of pool "${target[$app]}" >"$run/pool.answer"
  stop_server pool
  start_fpm "$app"
  answer_of fpm "${target[$app]}" >"$run/fpm.answer"
  stop_server fpm
  cmp -s "$run/pool.answer" "$run/fpm.answer" ||
    fail "$app (PHP $php): the pool and PHP-FPM answer ${target[$app]} differently: $(diff "$run/pool.answer" "$run/fpm.answer" | head -n 6)"
  head -n 1 "$run/pool.answer" | grep -qx 200 || fail "$app: ${target[$app]} answers $(head -n 1 "$run/pool.answer")"
  for round in $(seq "$rounds"); do
    for server in pool fpm; do
      if [ "$server" = pool ]; then start_pool "$app"; else start_fpm "$app"; fi
      warm "$server" "${target[$app]}"
      measure "$server" "$app" "$round"
      stop_server "$server"
    done
  done
  if [ "$app" != static ]; then floor "$app"; fi
done

# Server-sent events: the first event before the handler's end.
php=$php_root_host_version
target[sse]=/sse
start_pool sse
: >"$run/sse.txt"
for i in 1 2 3 4 5; do
  curl -s -o /dev/null -w '%{time_starttransfer} %{time_total}\n' "http://127.0.0.1:$pool_port/sse" >>"$run/sse.txt"
done
stop_server pool
echo "frameworks bench: SSE first byte and end (s): $(tr '\n' ';' <"$run/sse.txt")"

php "$root/bench/http/frameworks-report.php" "$results" "$out/frameworks-latest" \
  "wrk -t1 -c16 -d${duration}s, $rounds rounds (medians)" "$run/sse.txt"
