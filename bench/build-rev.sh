#!/usr/bin/env bash
# Builds one revision in a worktree under target/ab/, once, and prints the
# directory that holds its binaries. Used by bench/ab.sh, bench/callgrind.sh
# and bench/compare.sh.
#
#   bench/build-rev.sh REV           shmlink and call_loop
#   bench/build-rev.sh REV --full    also the C library, the example C++
#                                    daemon and the PHP extension built on it
#
# The call loop (crates/core/examples/call_loop.rs) is copied from this tree
# so that older revisions can be measured with the same loop.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
sha=$(git rev-parse --short "${1:?usage: bench/build-rev.sh REV [--full]}^{commit}")
full=0
[ "${2:-}" = --full ] && full=1
dir=$root/target/ab/$sha
want=$dir/bin/call_loop
[ "$full" = 1 ] && want=$dir/bin/shmlink.so
if [ ! -e "$want" ]; then
  rm -rf "$dir/src"
  git worktree prune
  git worktree add -f --detach "$dir/src" "$sha" >/dev/null 2>&1
  cp crates/core/examples/call_loop.rs "$dir/src/crates/core/examples/"
  mkdir -p "$dir/bin"
  (
    cd "$dir/src"
    export CARGO_TARGET_DIR=$dir/target
    cargo build --release -q -p shmlink-cli
    cargo build --release -q -p shmlink --example call_loop
    cp "$dir/target/release/shmlink" "$dir/target/release/examples/call_loop" "$dir/bin/"
    if [ "$full" = 1 ]; then
      # The Makefile and the PHP build look for cargo's output in target/.
      ln -sfn "$dir/target" target
      make -s install PREFIX="$dir/stage" >/dev/null
      make -s examples PREFIX="$dir/stage" >/dev/null
      cp target/examples/cpp-daemon/shmlink-daemon "$dir/bin/"
      cd bindings/php
      phpize >/dev/null
      ./configure --with-shmlink="$dir/stage" >/dev/null
      make -s -j"$(nproc)" >/dev/null
      cp modules/shmlink.so "$dir/bin/"
    fi
  ) >&2
  git worktree remove --force "$dir/src"
fi
echo "$dir/bin"
