#!/usr/bin/env bash
# Plain against streamed copies into shared memory, alone and followed by a
# whole read on the other CPU (bench/copy/copy.c): where streaming starts to
# pay, the threshold `Loan::fill_from` uses (shmlink_arena::STREAM_FROM,
# docs/design.md "Arena").
#
#   bench/copy/run.sh [ROUNDS]        prints a markdown table
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../.."
mkdir -p target/copy
cc -O2 -Wall -Wextra -pthread -o target/copy/copy bench/copy/copy.c
target/copy/copy "${1:-25}" 1 4 8 12 16 32 64 256
