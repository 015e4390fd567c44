#!/usr/bin/env bash
# Builds `shmlink` and the call loop (crates/core/examples/call_loop.rs,
# copied from this tree so older revisions can be measured too) of one
# revision in a worktree under target/ab/, once; prints the directory that
# holds the two binaries. Used by bench/ab.sh and bench/callgrind.sh.
#
#   bench/build-rev.sh REV
set -euo pipefail
cd "$(dirname "$0")/.."
sha=$(git rev-parse --short "${1:?usage: bench/build-rev.sh REV}^{commit}")
dir=$(pwd)/target/ab/$sha
if [ ! -x "$dir/bin/call_loop" ]; then
  rm -rf "$dir/src"
  git worktree add -f --detach "$dir/src" "$sha" >/dev/null 2>&1
  cp crates/core/examples/call_loop.rs "$dir/src/crates/core/examples/"
  (cd "$dir/src" && CARGO_TARGET_DIR=$dir/target cargo build --release -q -p shmlink-cli \
    && CARGO_TARGET_DIR=$dir/target cargo build --release -q -p shmlink --example call_loop) >&2
  mkdir -p "$dir/bin"
  cp "$dir/target/release/shmlink" "$dir/target/release/examples/call_loop" "$dir/bin/"
  git worktree remove --force "$dir/src"
fi
echo "$dir/bin"
