#!/usr/bin/env bash
# The Rust test suites of the library crates under AddressSanitizer (nightly),
# plus a canary with a deliberate out-of-bounds read that must be reported.
# Multi-process tests run too: the processes they spawn are the instrumented
# test binaries themselves.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
export RUSTFLAGS="-Zsanitizer=address"
export RUSTDOCFLAGS="-Zsanitizer=address"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
target=x86_64-unknown-linux-gnu

echo "=== asan: canary (a deliberate heap overflow must be reported)"
out=$(cargo +nightly run --quiet --release --manifest-path ci/asan-canary/Cargo.toml \
  --target "$target" --target-dir target/asan 2>&1) && {
  echo "$out"; echo "asan: the canary ran without a report: the sanitizer is not working" >&2; exit 1; }
grep -q "AddressSanitizer: heap-buffer-overflow" <<<"$out" || {
  echo "$out"; echo "asan: the canary failed without an AddressSanitizer report" >&2; exit 1; }
echo "asan: canary reported as it must"

echo "=== asan: library test suites"
cargo +nightly test --profile ci --target "$target" --target-dir target/asan \
  -p shmlink-sys -p shmlink-ring -p shmlink -p shmlink-capi --lib --tests
echo "=== asan: done"
