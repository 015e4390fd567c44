#!/usr/bin/env bash
# The floor under `shmlink bench --paths loan`'s large points: what a round
# trip costs right after a fill of 64 KiB to 1 GiB when the path is two
# shared words and nothing else (bench/cold/cold.c). Compare its `shared`
# rows with the bench's loan rows and its `own` rows with the bench's
# control column ("64 B after an equal fill"), measured in the same minutes.
#
#   bench/cold/run.sh [CALLS]         prints a markdown table
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
mkdir -p target/cold
cc -O2 -Wall -Wextra -o target/cold/cold bench/cold/cold.c
target/cold/cold "${1:-15}" 0.0625 1 16 256 1024
