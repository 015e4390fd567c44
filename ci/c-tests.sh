#!/usr/bin/env bash
# Builds and runs the C and C++ API tests (bindings/tests, GoogleTest) against
# an installed shmlink: first a plain build, then one with AddressSanitizer
# and UBSan (-DSHMLINK_SANITIZE=ON, which adds the sanitizer canary test).
#   make install PREFIX=target/stage && ci/c-tests.sh
#   SHMLINK_PREFIX=/some/prefix ci/c-tests.sh
# Build trees: target/ctest/plain and target/ctest/sanitize.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${SHMLINK_PREFIX:-$REPO/target/stage}"

if [ ! -x "$REPO/target/release/shmlink" ]; then
  echo "c-tests: no $REPO/target/release/shmlink (cargo build --release -p shmlink-cli)" >&2
  exit 1
fi
if [ ! -d "$PREFIX" ]; then
  echo "c-tests: no shmlink installed at $PREFIX (run: make install PREFIX=$PREFIX)" >&2
  exit 1
fi

for kind in plain sanitize; do
  build="$REPO/target/ctest/$kind"
  options=(-DCMAKE_PREFIX_PATH="$PREFIX" -DSHMLINK_CLI="$REPO/target/release/shmlink")
  if [ "$kind" = sanitize ]; then
    options+=(-DSHMLINK_SANITIZE=ON)
  fi
  echo "=== c-tests: $kind build in $build"
  cmake -S "$REPO/bindings/tests" -B "$build" "${options[@]}"
  cmake --build "$build" -j2
  ctest --test-dir "$build" --output-on-failure -j2
done
echo "=== c-tests: plain and sanitizer runs passed"
