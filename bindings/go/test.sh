#!/usr/bin/env bash
# The Go binding's checks, for ci/test.sh: gofmt, go vet, go test, go test -race.
# Needs Go >= 1.24 and the staged library (make install PREFIX=$PWD/target/stage);
# the interop tests also use target/release/shmlink (cargo build --release -p shmlink-cli)
# and, when built, target/examples/cpp-daemon/shmlink-daemon (make examples), and
# are skipped without them.
#
#   bindings/go/test.sh            from the repository root (or anywhere)
#   bindings/go/test.sh --bench    also the benchmarks (and the shmipc-go comparison,
#                                  which needs the Go module proxy the first time)
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here"

# The machine image keeps Go in /usr/local/go (Debian 12's golang-go is too old).
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH=$PATH:/usr/local/go/bin
fi
if ! command -v go >/dev/null; then
  echo "bindings/go/test.sh: go not found (Go >= 1.24 needed)" >&2
  exit 1
fi
if [ ! -f "$repo/target/stage/lib/libshmlink.a" ] || [ ! -f "$repo/target/stage/include/shmlink.h" ]; then
  echo "bindings/go/test.sh: no staged library: run make install PREFIX=\$PWD/target/stage in $repo" >&2
  exit 1
fi
export CGO_ENABLED=1
# shellcheck source=bindings/go/staged.sh
source "$here/staged.sh"

unformatted=$(gofmt -l . )
if [ -n "$unformatted" ]; then
  echo "bindings/go/test.sh: not gofmt'ed: $unformatted" >&2
  exit 1
fi
echo "== go vet"
go vet ./...
echo "== go test"
go test -count=1 ./...
echo "== go test -race"
go test -race -count=1 ./...
if [ "${1:-}" = "--bench" ]; then
  echo "== benchmarks"
  go test -run '^$' -bench . -benchtime 100000x .
  (cd bench/shmipc && go vet ./... && go test -run '^$' -bench . -benchtime 50000x .)
fi
echo "bindings/go/test.sh: ok"
