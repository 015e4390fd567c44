#!/usr/bin/env bash
# The README's main command: installs what is missing, builds everything,
# and runs the main job (for now `shmlink bench`: every transport and wait
# strategy against raw baselines measured in the same run, the C library's
# client beside the Rust one, and the plot). Results are written to
# bench/results/latest.{md,json,png}; extra arguments go to `shmlink bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
cargo build --release --workspace
make install PREFIX="$PWD/target/stage"
make examples PREFIX="$PWD/target/stage"
mkdir -p bench/results
target/release/shmlink bench --rounds 3 --duration 0.5 \
  --c-client target/examples/bench-c-client/shmlink-c-bench \
  --json bench/results/latest.json --markdown bench/results/latest.md "$@"
target/release/shmlink bench --quiet --duration 0.2 --plot bench/results/latest.png >/dev/null
echo "results: bench/results/latest.md bench/results/latest.json bench/results/latest.png"
