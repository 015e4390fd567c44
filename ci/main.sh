#!/usr/bin/env bash
# The README's main command: installs what is missing, builds everything
# (Rust workspace, C library, C/C++ examples, PHP extension) and answers the
# first question in minutes: how much faster than what you use now.
#
#   ci/main.sh [--full | --quick] [--no-redis]
#
# Without a flag (a few minutes after the build): the headline tables, each
# against its baseline in the same run, to target/main/ and printed:
#   - the scenario (bench/scenario/run.sh): the example C++ daemon on shm,
#     unix and tcp, the PHP client over each, plain PHP sockets and a Redis
#     broker beside it, the PHP pool's dispatch;
#   - the HTTP front (bench/http/run.sh, short rows): PHP apps under
#     shmlink pool --http against nginx + PHP-FPM (Swoole when SWOOLE_SO
#     names its extension);
#   - zero copy at 16 MiB (shmlink bench --paths copy,arena,loan) and the
#     latency and CPU plot from 64 B to 16 MiB;
#   - a hot upgrade under load (shmlink upgrade-bench): an echo server
#     replaced 10 times while clients call it; then the pool, under PHP
#     clients and wrk (bench/upgrade/pool.php).
# --full (about 20 minutes): the publication run, to bench/results/ (then
#   bench/publish.sh NAME writes docs/benchmarks.md and the README figures):
#   1. `shmlink bench`: every transport and wait strategy against raw socket
#      baselines measured in the same run, the C library's client beside the
#      Rust one -> bench/results/latest.{md,json}; the wait matrix; the plot
#      -> latest.png; large requests (64 KiB to 1 GiB) streamed, lent
#      through the arena and written in place -> arena-latest.{md,json,png},
#      and 1,000 calls of 1 GiB lent both ways for the memory they leave
#      -> arena-memory-latest.{md,json};
#      the Python and Go bindings against Python's socket module, Go's
#      net.UnixConn and shmipc-go -> {python,go}-latest.md;
#      async calls beside blocking ones (bench/async/run.sh: Rust on tokio,
#      C on epoll, Python on asyncio) -> async-latest.md;
#      publish/subscribe (shmlink bench --pubsub) beside iceoryx2 (bench/iceoryx2,
#      from crates.io) -> pubsub-latest.{md,json};
#      a hot upgrade under load -> upgrade-latest.{md,json}, and of the
#      pool (PHP clients and wrk) -> pool-upgrade-latest.{md,json};
#      the pool's dispatch and churn, its metrics scraped by Prometheus;
#   2. the HTTP benchmark: three PHP apps under shmlink pool --http, Swoole,
#      nginx + PHP-FPM and + preload, loaded by wrk -> http-latest.{md,json,png};
#      Symfony and Laravel under the pool and under nginx + PHP-FPM
#      -> frameworks-latest.{md,json};
#   3. the scenario -> scenario-latest.{md,json}, its table printed last.
# --quick: tiny counts of every step of --full (a smoke run, about a minute
#   after the build; ci/test.sh runs it, writing to target/main-quick).
# --no-redis: no Redis row. A run after an interrupted one cleans up what
# that one left (see bench/scenario/run.sh).
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
step_prefix=main
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
quick=0
mode=first
scenario_args=()
for a in "$@"; do
  case $a in
    --quick) quick=1; mode=full ;;
    --full) mode=full ;;
    --no-redis) scenario_args+=(--no-redis) ;;
    *) echo "usage: ci/main.sh [--full | --quick] [--no-redis]" >&2; exit 2 ;;
  esac
done
out=bench/results
bench_args=(--rounds 3 --duration 0.5)
plot_args=(--duration 0.2)
matrix_args=()
arena_args=(--sizes 64KiB,1MiB,16MiB,256MiB,1GiB --rounds 3 --duration 1)
memory_args=(--sizes 1GiB --requests 1000 --duration 900)
python_args=(--rounds 10 --seconds 0.5)
python_matrix_args=(--rounds 3 --seconds 0.3)
go_args=(--calls 100000)
requests=20000
churn=3
upgrades=10
prometheus_calls=500
if [ "$quick" = 1 ]; then
  out=target/main-quick
  bench_args=(--quick)
  plot_args=(--quick)
  matrix_args=(--sizes 64,1MiB --duration 0.05 --rounds 1)
  arena_args=(--quick --sizes 64KiB,1MiB)
  memory_args=(--sizes 16MiB --requests 20 --duration 10)
  python_args=(--rounds 2 --seconds 0.05)
  python_matrix_args=(--rounds 1 --seconds 0.02)
  go_args=(--calls 4000)
  requests=300
  churn=0.5
  upgrades=2
  prometheus_calls=20
fi

step "setup"
ci/setup.sh

step "build: Rust workspace, C library, examples, PHP extension"
cargo build --release --workspace
make install PREFIX="$PWD/target/stage"
make examples PREFIX="$PWD/target/stage"
ci/php-build.sh --no-valgrind >target/php-build-main.log 2>&1 || {
  cat target/php-build-main.log >&2
  exit 1
}

if [ "$mode" = first ]; then
  out=target/main
  mkdir -p "$out"
  step "zero copy at 16 MiB: streamed, lent through the arena, written in place"
  target/release/shmlink bench --quiet --sizes 16MiB --rounds 1 --duration 0.5 --paths copy,arena,loan \
    --transports shm,unix --waits busy --no-baselines --markdown "$out/arena.md" >/dev/null
  sed -n '/^## Paths/,/^## Headline/p' "$out/arena.md" | sed '$d'
  step "shmlink bench --plot: latency and CPU from 64 B to 16 MiB"
  target/release/shmlink bench --quiet --duration 0.05 --plot "$out/plot.png" >/dev/null
  test -s "$out/plot.png"
  step "HTTP: PHP apps under shmlink pool --http against nginx + PHP-FPM (short rows)"
  bench/http/run.sh --out "$out" --duration 2 --rounds 1
  step "hot upgrade: an echo server replaced 10 times while clients call it"
  target/release/shmlink upgrade-bench --upgrades 10 --markdown "$out/upgrade.md" >/dev/null
  sed -n '/^| figure/,$p' "$out/upgrade.md"
  step "hot upgrade of the pool: PHP clients over shm: and unix:, wrk -c16 on its HTTP front, upgraded 10 times"
  php bench/upgrade/pool.php --upgrades 10 --markdown "$out/pool-upgrade.md" >/dev/null
  sed -n '/^| figure/,$p' "$out/pool-upgrade.md"
  step "the scenario: C++ daemon, PHP client, shm/unix/tcp, raw sockets, Redis, shmlink pool"
  bench/scenario/run.sh --requests 5000 --out "$out" "${scenario_args[@]}"
  step "done"
  echo "tables: $out/arena.md $out/http-latest.md $out/upgrade.md $out/pool-upgrade.md $out/scenario-latest.md; plot: $out/plot.png"
  echo "the publication run, with every baseline and the bindings: ci/main.sh --full"
  exit 0
fi

mkdir -p "$out"
step "shmlink bench: transports and wait strategies against raw sockets"
target/release/shmlink bench "${bench_args[@]}" \
  --c-client target/examples/bench-c-client/shmlink-c-bench \
  --json "$out/latest.json" --markdown "$out/latest.md"

step "shmlink bench --matrix: the default wait against every strategy, quiet and beside a CPU hog"
target/release/shmlink bench --quiet --matrix "${matrix_args[@]}" \
  --c-client target/examples/bench-c-client/shmlink-c-bench \
  --json "$out/matrix-latest.json" --markdown "$out/matrix-latest.md" >/dev/null
sed -n '/^## Wait matrix/,$p' "$out/matrix-latest.md"

step "shmlink bench --plot: latency and CPU from 64 B to 16 MiB"
target/release/shmlink bench --quiet "${plot_args[@]}" --plot "$out/latest.png" >/dev/null
test -s "$out/latest.png"

step "shmlink bench --paths: large requests streamed, lent through the arena, written in place"
target/release/shmlink bench --quiet "${arena_args[@]}" --paths copy,arena,loan --transports shm,unix \
  --waits busy --no-baselines --json "$out/arena-latest.json" --markdown "$out/arena-latest.md" \
  --plot "$out/arena-latest.png" >/dev/null
test -s "$out/arena-latest.png"

step "shmlink bench --paths arena,loan --requests 1000: what 1,000 calls of 1 GiB leave in memory"
target/release/shmlink bench --quiet "${memory_args[@]}" --paths arena,loan --transports shm \
  --waits busy --no-baselines --json "$out/arena-memory-latest.json" \
  --markdown "$out/arena-memory-latest.md" >/dev/null
php bench/arena-checks.php "$out/arena-latest.json" "$out/arena-memory-latest.json"

step "the Python and Go bindings against their languages' own sockets (and shmipc-go)"
venv=target/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check ./bindings/python
"$venv/bin/python" bindings/python/bench.py "${python_args[@]}" --markdown "$out/python-latest.md"
"$venv/bin/python" bindings/python/wait_matrix.py "${python_matrix_args[@]}" --markdown "$out/python-matrix-latest.md"
bindings/go/bench.sh "${go_args[@]}" --markdown "$out/go-latest.md" >/dev/null

step "async calls beside blocking ones: Rust (tokio), C (epoll), Python (asyncio)"
async_args=()
[ "$quick" = 1 ] && async_args=(--quick)
bench/async/run.sh "${async_args[@]}" --markdown "$out/async-latest.md"

step "publish/subscribe: one-way latency beside iceoryx2, the publisher's cost with 1 and 8 subscribers, 16 MiB samples"
pubsub_args=(--json "$out/pubsub-latest.json" --markdown "$out/pubsub-latest.md")
if [ "$quick" = 1 ]; then
  pubsub_args+=(--quick) # no iceoryx2 build in the smoke run: its goal reads "not measured"
else
  CARGO_TARGET_DIR=target/iceoryx2 cargo build --release --quiet --manifest-path bench/iceoryx2/Cargo.toml
  pubsub_args+=(--iceoryx2 target/iceoryx2/release/iceoryx2-pubsub)
fi
target/release/shmlink bench --pubsub "${pubsub_args[@]}"

step "the pool's dispatch: a PHP worker called directly and through shmlink pool; the pool under churn"
target/release/shmlink pool bench --calls "$requests" --rounds 5 --churn-seconds "$churn" --json "$out/pool-dispatch-latest.json" -- \
  php -d extension="$PWD/bindings/php/modules/shmlink.so" -d opcache.enable_cli=1 bench/pool/worker.php \
  >"$out/pool-dispatch-latest.md"
cat "$out/pool-dispatch-latest.md"

step "hot upgrade: an echo server replaced 10 times while clients call it over shm: and unix: (sessions handed over)"
target/release/shmlink upgrade-bench --upgrades "$upgrades" --json "$out/upgrade-latest.json" \
  --markdown "$out/upgrade-latest.md" >/dev/null
cat "$out/upgrade-latest.md"

step "hot upgrade of the pool: PHP clients over shm: and unix:, wrk -c16 on its HTTP front, upgraded 10 times"
php bench/upgrade/pool.php --upgrades "$upgrades" --json "$out/pool-upgrade-latest.json" \
  --markdown "$out/pool-upgrade-latest.md" >/dev/null
cat "$out/pool-upgrade-latest.md"

step "the pool's metrics scraped by a real Prometheus server"
bench/pool/prometheus.sh --calls "$prometheus_calls" --markdown "$out/pool-prometheus-latest.md"

step "HTTP: PHP apps under shmlink pool --http, Swoole, nginx + PHP-FPM and + preload, loaded by wrk"
http_args=()
[ "$quick" = 1 ] && http_args=(--quick)
# Swoole, the baseline: SWOOLE_SO when given; else built from the archive in
# ../shared/anchors when that is there (users: pecl install swoole); else
# the benchmark leaves its rows out.
if [ -z "${SWOOLE_SO:-}" ] && [ -x ../shared/anchors/build-swoole.sh ]; then
  if so=$(../shared/anchors/build-swoole.sh "$PWD/target/swoole" | tail -n 1); then
    export SWOOLE_SO=$so
  else
    echo "main: Swoole did not build from ../shared/anchors: its rows are left out" >&2
  fi
fi
bench/http/run.sh --out "$out" "${http_args[@]}"

step "HTTP: a Symfony and a Laravel app under shmlink pool --http and nginx + PHP-FPM"
# PHP 8.4 (Debian 13's, in the root ci/php-root.sh makes with mmdebstrap)
# beside 8.2 in the full run and its smoke run; the first run of a new
# machine keeps to the host's PHP, so that it needs no root.
php_versions=8.2
[ "$mode" = full ] && php_versions=8.2,8.4
bench/http/frameworks.sh --php "$php_versions" --out "$out" "${http_args[@]}"

step "the scenario: C++ daemon, PHP client, shm/unix/tcp, raw sockets, Redis, shmlink pool"
bench/scenario/run.sh --requests "$requests" --php "$php_versions" --out "$out" "${scenario_args[@]}"

step "done"
echo "results: $out/latest.md $out/latest.json $out/latest.png $out/upgrade-latest.md $out/pool-upgrade-latest.md $out/arena-latest.md $out/arena-memory-latest.md $out/pool-dispatch-latest.md $out/http-latest.md $out/http-latest.png $out/frameworks-latest.md $out/scenario-latest.md $out/scenario-latest.json"
