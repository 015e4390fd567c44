#!/usr/bin/env bash
# The PHP extension (bindings/php): build it (ci/php-build.sh), run its .phpt
# suite, then run the suite again under valgrind.
#   ci/php-tests.sh                 everything, on the host's PHP (8.2)
#   ci/php-tests.sh --php 8.4       the same on PHP 8.4, in its Debian 13 root
#                                   (ci/php-root.sh makes it and builds there)
#   ci/php-tests.sh --no-valgrind   skip the memcheck run (about a minute)
# Fails on any failed, borked, skipped or leaking test. Ends with one line
# "php VERSION: N passed, N failed".
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
step_prefix=php
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
# shellcheck source=ci/lib/php-root.sh
source ci/lib/php-root.sh
valgrind=1 version=$php_root_host_version inside=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-valgrind) valgrind=0 ;;
    --php) version=$2; shift ;;
    --inside-root) inside=1 ;;
    *) echo "usage: ci/php-tests.sh [--php VERSION] [--no-valgrind]" >&2; exit 2 ;;
  esac
  shift
done
step_prefix="php $version"
opts=()
[ "$valgrind" = 0 ] && opts+=(--no-valgrind)

if [ "$version" != "$php_root_host_version" ] && [ "$inside" = 0 ]; then
  # Built in the root, then this script again inside it.
  ci/php-root.sh "$version" >/dev/null
  php_root_exec "$version" bash ci/php-tests.sh --php "$version" --inside-root "${opts[@]}"
fi
[ "$inside" = 1 ] || ci/php-build.sh "${opts[@]}"
export SHMLINK_BIN="$root/target/release/shmlink"
cd bindings/php
php -r 'exit(PHP_MAJOR_VERSION . "." . PHP_MINOR_VERSION === $argv[1] ? 0 : 1);' "$version" ||
  fail "php is $(php -r 'echo PHP_VERSION;'), not $version"

# Runs `make test` with the given run-tests arguments; fails on anything
# but passed tests. Sets $passed.
run_suite() {
  local log=$1 args=$2
  rm -f tests/*.diff tests/*.exp tests/*.log tests/*.mem tests/*.out tests/*.sh
  local status=0
  NO_INTERACTION=1 TEST_PHP_ARGS="$args" make test >"$log" 2>&1 || status=$?
  count() { sed -n "s/^Tests $1 *: *\([0-9]*\).*/\1/p" "$log" | head -n1; }
  passed=$(count passed)
  local failed skipped leaked warned total
  failed=$(count failed); skipped=$(count skipped); leaked=$(count leaked); warned=$(count warned)
  total=$(sed -n 's/^Number of tests *: *\([0-9]*\).*/\1/p' "$log" | head -n1)
  if [ "$status" != 0 ] || [ -z "$total" ] || [ "${total:-0}" = 0 ] || [ "${passed:-0}" != "$total" ] \
    || [ "${failed:-0}" != 0 ] || [ "${skipped:-0}" != 0 ] || [ "${leaked:-0}" != 0 ] \
    || [ "${warned:-0}" != 0 ] || ls tests/*.mem >/dev/null 2>&1; then
    sed -n '/^TEST RESULT SUMMARY/,$p' "$log" >&2
    for f in tests/*.diff tests/*.mem; do
      [ -f "$f" ] || continue
      echo "--- $f" >&2
      head -n 60 "$f" >&2
      echo >&2
    done
    echo "php $version: ${passed:-0} passed, $(( ${total:-0} - ${passed:-0} )) failed" >&2
    exit 1
  fi
  sed -n '/^TEST RESULT SUMMARY/,/^Time taken/p' "$log"
}

step "tests"
suffix=""
[ "$version" = "$php_root_host_version" ] || suffix="-$version"
run_suite "$root/target/php-tests$suffix.log" "-q -j2"
suite_passed=$passed

if [ "$valgrind" = 1 ]; then
  step "tests under valgrind (leaks and memory errors)"
  # Two tests at a time (-j2, both suites): each has its own directory and
  # ports, and memcheck's runs are CPU-bound (about 230 s one at a time).
  # The echo server, php-fpm and helper commands run outside valgrind; the
  # forked PHP servers stay inside it. PCRE's JIT confuses memcheck: off.
  export USE_ZEND_ALLOC=0
  export VALGRIND_OPTS="--suppressions=$PWD/tests/valgrind.supp --leak-check=full \
--trace-children-skip=*/shmlink,*/sh,*/kill,*/php-fpm*"
  run_suite "$root/target/php-tests$suffix-valgrind.log" "-q -j2 -m -d pcre.jit=0"
  unset USE_ZEND_ALLOC VALGRIND_OPTS
fi

step "done"
echo "php $version: $suite_passed passed, 0 failed"
