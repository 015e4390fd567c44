#!/usr/bin/env bash
# The ring's unit tests under Miri (nightly): the unsafe copies of
# RawMemory, the header handles and the producer/consumer bookkeeping are
# checked for undefined behaviour (out-of-bounds or unaligned accesses, data
# races, use after free) in the same tests that run natively, with fewer
# iterations (`iters()` in crates/ring/src/tests/mod.rs).
# Installs the nightly miri component when it is missing.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^miri'; then
  echo "miri: rustup +nightly component add miri rust-src"
  rustup +nightly component add miri rust-src >/dev/null
fi
cd crates/ring
# Real threads and the emulated futex run under Miri's scheduler, with its
# isolation on (the watchdogs read Miri's emulated monotonic clock).
cargo +nightly miri test --lib
