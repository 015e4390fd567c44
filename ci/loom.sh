#!/usr/bin/env bash
# Model-checks the ring and doorbell protocol with loom (including the canary
# that must fail, proving loom really checks).
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p shmlink-ring --release --test loom --test loom_samples -- --test-threads=2
