#!/usr/bin/env bash
# The README's test command: every test suite of the project, from a fresh clone.
#   ci/test.sh            everything (CI runs this through .ci/run)
# Environment: FUZZ_SECONDS (per fuzz target, default 15).
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
step_prefix=test
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
# Marks of what one run did once (the arginfo check), shared with the scripts it calls.
export SHMLINK_CI_RUN
SHMLINK_CI_RUN=$(mktemp -d "${TMPDIR:-/tmp}/shmlink-ci-run.XXXXXX")
trap 'rm -rf "$SHMLINK_CI_RUN"' EXIT

step "setup"
ci/setup.sh

step "format and lints"
cargo fmt --all -- --check
rustfmt --edition 2021 --check fuzz/src/*.rs fuzz/fuzz_targets/*.rs # a workspace of their own
cargo clippy --workspace --all-targets --release -- -D warnings
cargo clippy -p shmlink --features tokio --all-targets --release -- -D warnings
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo clippy -p shmlink-ring --tests -- -D warnings
# Atomics of the ring come only from its sync shim, so loom replaces all of them.
if grep -rn "std::sync::atomic" crates/ring/src | grep -v "crates/ring/src/sync.rs"; then
  echo "ring: use crate::sync instead of std::sync::atomic" >&2; exit 1
fi
# Clocks and the CPU number come through libc (crates/sys/src/clock.rs,
# cpu.rs), never rustix's own vDSO lookup, which crashes under valgrind.
if grep -rn "rustix::time::clock_gettime\|rustix::thread::sched_getcpu\|rustix::time::ClockId" crates bindings --include=*.rs; then
  echo "sys: read clocks and the CPU through crates/sys/src/{clock,cpu}.rs (libc), not rustix's vDSO" >&2; exit 1
fi
# C and C++ sources follow .clang-format (the generated header excepted).
git ls-files -co --exclude-standard '*.c' '*.h' '*.cpp' '*.hpp' \
  | grep -v '^bindings/c/include/shmlink.h$' | grep -v '_arginfo.h$' \
  | xargs -r clang-format --dry-run --Werror

# Every script runs in a scope of its own (ci/lib/scope.sh, sourced before
# it changes directory), so that it stops what it starts on every way out;
# the sourced helpers and ci/setup.sh (which runs before the CLI exists) aside.
for f in $(git ls-files '*.sh' | grep -v -e '^ci/lib/' -e '^ci/setup\.sh$' -e '^bench/http/lib\.sh$' -e '^bindings/go/staged\.sh$'); do
  awk '/ci\/lib\/scope\.sh/ { ok = 1; exit } /^cd / { exit } END { exit !ok }' "$f" ||
    { echo "$f: source ci/lib/scope.sh before any cd (every script runs in a scope)" >&2; exit 1; }
done

# The entry docs name every crate, binding and core folder, and every file
# allowed `unsafe`; the API docs' links all resolve.
python3 ci/entry-docs.py
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --lib --quiet

step "unit, integration and multi-process tests"
cargo test --workspace --profile ci # release's optimizations without its LTO (Cargo.toml)
cargo test --profile ci -p shmlink --features tokio --test tokio_client # the async client (feature tokio)

step "C ABI: header drift, install, GoogleTest (plain and ASan/UBSan), examples"
make check-header
make install PREFIX="$PWD/target/stage"
cargo build --release -p shmlink-cli # the worker tests run their workers under `shmlink pool`
SHMLINK_PREFIX="$PWD/target/stage" ci/c-tests.sh
SHMLINK_PREFIX="$PWD/target/stage" ci/examples.sh

step "PHP extension: .phpt tests, and once under valgrind"
ci/php-tests.sh

step "PHP 8.4 in a Debian 13 root (ci/php-root.sh, mmdebstrap; reused when made): the .phpt suite, plain and under valgrind"
ci/php-tests.sh --php 8.4

step "PHP release tarball (make -C bindings/php dist): pecl install in the PHP 8.4 root, php -m lists shmlink"
ci/php-dist.sh 8.4

step "PHP end to end: php-fpm behind nginx, 1,800 checked requests"
ci/php-e2e.sh

step "Go binding: gofmt, vet, go test and go test -race (interop with Rust, C, C++ and PHP peers)"
SHMLINK_GO_STRICT=1 bindings/go/test.sh

step "Python binding: pip install (maturin), lints, stubs, pytest (interop with C++, PHP, the pool)"
bindings/python/run-tests.sh --strict --types

step "PHP benchmark smoke run (every response checked, figures not)"
ci/php-bench.sh --quick

step "benchmarks killed mid-run leave nothing: bench/http/run.sh (nginx, PHP-FPM, pools, wrk) and the scenario (Redis, the C++ daemon, PHP), each SIGKILLed while its servers run"
ci/killed-bench.sh 'nginx: master' bench/http/run.sh --quick
ci/killed-bench.sh 'redis-server' bench/scenario/run.sh --requests 300

step "hot upgrade of the pool, short: 2 upgrades under PHP clients over shm: and unix: and wrk (no failed shm: call, no HTTP error)"
php bench/upgrade/pool.php --upgrades 2 --check >/dev/null

step "chaos with PHP clients: 3 of 6 clients are PHP processes, 10 s of SIGKILLs"
target/release/shmlink chaos --duration 10 --clients 6 --php-clients 3 \
  --php-extension bindings/php/modules/shmlink.so

step "loom model checks of the ring and doorbell"
ci/loom.sh

step "the ring's unit tests under Miri"
ci/miri.sh

step "Rust test suites under AddressSanitizer, with a canary"
ci/asan.sh

step "fuzz targets, bounded run"
ci/fuzz.sh "${FUZZ_SECONDS:-15}"

step "the main command with tiny counts (ci/main.sh --quick; numbers not checked)"
ci/main.sh --quick >target/main-quick.log 2>&1 || { tail -n 60 target/main-quick.log >&2; exit 1; }
for f in latest.json latest.md latest.png scenario-latest.json scenario-latest.md pool-dispatch-latest.md \
  http-latest.md http-latest.json http-latest.png arena-latest.md arena-latest.json arena-latest.png \
  python-latest.md go-latest.md matrix-latest.md matrix-latest.json python-matrix-latest.md \
  pool-prometheus-latest.md frameworks-latest.md frameworks-latest.json pubsub-latest.md pubsub-latest.json; do
  test -s "target/main-quick/$f" || { echo "main --quick wrote no $f" >&2; exit 1; }
done
grep -q '"client": "c"' target/main-quick/latest.json
# The wait matrix: both loads at both sizes, the C client beside them, and
# the hog it started for the busy load gone.
for row in 'quiet +\| 64 B ' 'quiet +\| 1 MiB ' 'busy +\| 64 B ' 'busy +\| 1 MiB '; do
  grep -Eq "^\| $row" target/main-quick/matrix-latest.md || {
    echo "main --quick: the wait matrix has no cell '$row'" >&2; exit 1; }
done
grep -q 'default ÷ best' target/main-quick/matrix-latest.md
grep -q '"load": "busy"' target/main-quick/matrix-latest.json
grep -q '"client": "c"' target/main-quick/matrix-latest.json
if pgrep -f 'shmlink __hog' >/dev/null; then echo "main --quick left a CPU hog running" >&2; exit 1; fi
# Prometheus scraped the pool, and saw its calls and its reload.
grep -Fq '| `up{job="shmlink-pool"}` | 1 |' target/main-quick/pool-prometheus-latest.md
grep -Fq '| `shmlink_pool_calls_total` | 21 |' target/main-quick/pool-prometheus-latest.md
grep -Fq '| `shmlink_pool_worker_restarts_total{reason="reload"}` | 2 |' target/main-quick/pool-prometheus-latest.md
# Every path at every size and transport of the arena run.
for row in 'shm +\| busy \| 1 MiB +\| loan' 'shm +\| busy \| 1 MiB +\| arena' 'unix +\| - +\| 1 MiB +\| copy'; do
  grep -Eq "\| $row" target/main-quick/arena-latest.md || {
    echo "main --quick: the arena run has no row '$row'" >&2
    exit 1
  }
done
# The pool under churn: every case, no failed call where none may fail.
for row in 'no churn \(the reference\) \| [0-9]+ \| 0 \|' 'recycling \(--max-jobs 5000\) \| [0-9]+ \| 0 \|' \
  'reload \| [0-9]+ \| 0 \|' 'kill -9 of a worker \|' 'recycling every 5000 calls'; do
  grep -Eq "\| $row" target/main-quick/pool-dispatch-latest.md || {
    echo "main --quick: no churn row matching \"$row\"" >&2; exit 1; }
done
# Every goals table ends with its count: met, missed, not measured.
for f in latest.md matrix-latest.md pool-dispatch-latest.md scenario-latest.md python-latest.md \
  python-matrix-latest.md go-latest.md async-latest.md frameworks-latest.md http-latest.md pubsub-latest.md; do
  grep -Eq '^Goals: [0-9]+ met, [0-9]+ missed, [0-9]+ not measured\.$' "target/main-quick/$f" || {
    echo "main --quick: $f has no line \"Goals: N met, N missed, N not measured.\"" >&2; exit 1; }
done
# The HTTP benchmark's short run: every app under every server and load
# (Swoole's rows when it was at hand), no failed request (non-2xx or socket
# error) in any row, the reload row included.
php -r '$r = json_decode(file_get_contents("target/main-quick/http-latest.json"), true)["rows"];
  $have = array_map(fn ($x) => "{$x["server"]} {$x["app"]} {$x["load"]}", $r);
  $want = ["pool hello c16", "pool hello c256", "pool hello close", "front hello c16", "floor hello c16",
    "pool heavy c16", "pool heavy c256", "pool heavy close", "front heavy c16", "fpm hello c16", "fpm heavy c16",
    "fpm-preload heavy c16", "pool-reload heavy c16", "leaky leaky c16"];
  if (in_array("swoole-base hello c16", $have, true)) { foreach (["hello", "heavy"] as $a) { foreach (["c16", "c256", "close"] as $l) {
    $want[] = "swoole-base $a $l"; $want[] = "swoole-process $a $l"; } } }
  $missing = array_diff($want, $have);
  $bad = array_filter($r, fn ($x) => $x["errors"] !== 0);
  if ($missing || $bad) { fwrite(STDERR, "main --quick: HTTP rows missing: " . implode(", ", $missing) . "; with errors: "
    . json_encode(array_values(array_map(fn ($x) => [$x["server"], $x["app"], $x["load"], $x["errors"]], $bad))) . "\n"); exit(1); }'
# The scenario measured PHP 8.4 beside 8.2 (figures not checked).
php -r '$g = json_decode(file_get_contents("target/main-quick/scenario-latest.json"), true)["goals"];
  $v = array_values(array_filter($g, fn ($x) => str_starts_with($x["check"], "PHP 8.4 ÷ PHP 8.2")));
  if (count($v) !== 1 || $v[0]["value"] === null) { fwrite(STDERR, "main --quick: the scenario has no PHP 8.4 figure\n"); exit(1); }'
# The frameworks: both apps on PHP 8.2 and 8.4 under both servers, no failed request.
php -r '$a = json_decode(file_get_contents("target/main-quick/frameworks-latest.json"), true)["apps"];
  foreach (["symfony@8.2", "laravel@8.2", "symfony@8.4", "laravel@8.4", "static"] as $app) { foreach (["pool", "fpm"] as $s) {
    $m = $a[$app]["servers"][$s] ?? null;
    if ($m === null || $m["errors"] !== 0 || $m["rps"] <= 0) { fwrite(STDERR, "main --quick: frameworks $app under $s: "
      . json_encode($m) . "\n"); exit(1); } } }'
# Server-sent events: measured, the first event before the response ended.
php -r '$e = json_decode(file_get_contents("target/main-quick/frameworks-latest.json"), true)["sse"] ?? null;
  if ($e === null || $e["runs"] !== 5 || !($e["first_byte_ms"] < $e["total_ms"])) {
    fwrite(STDERR, "main --quick: the SSE figure is missing or streamed nothing early: " . json_encode($e) . "\n"); exit(1); }'
# The scenario table: every transport and baseline, both sizes, every case.
for row in 'shm +\| +2048 B \| never' 'unix +\| +128 B \| every 1 ' 'tcp +\| +2048 B \| every 10' \
  'raw unix +\| +128 B' 'raw tcp +\| +2048 B' 'redis broker +\| +128 B \| every 1 ' \
  'pool, 1 PHP worker +\| +2048 B \| never' 'pool, 2 PHP workers +\| +128 B \| every 1 '; do
  grep -Eq "\| $row" target/main-quick/scenario-latest.md || {
    echo "main --quick: no row matching \"$row\" in the scenario table" >&2; exit 1; }
done
tail -n 50 target/main-quick.log

step "done in $(( $(date +%s) - ci_start )) s"
