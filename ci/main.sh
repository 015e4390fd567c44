#!/usr/bin/env bash
# The README's main command: installs what is missing, builds everything,
# and runs the main job (for now `shmlink bench`: every transport and wait
# strategy against the raw baselines, in one run). Results are written to
# bench/results/latest.{md,json}; extra arguments go to `shmlink bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
cargo build --release --workspace
mkdir -p bench/results
target/release/shmlink bench --rounds 3 --duration 0.5 \
  --json bench/results/latest.json --markdown bench/results/latest.md "$@"
echo "results: bench/results/latest.md bench/results/latest.json"
