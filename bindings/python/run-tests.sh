#!/usr/bin/env bash
# Builds and tests the Python bindings from a fresh clone, in a virtualenv
# (Debian 12's system Python refuses `pip install`, PEP 668):
#
#   bindings/python/run-tests.sh [--strict] [--types] [--bench] [pytest args...]
#
# Needs: Rust (cargo), python3 >= 3.11 with venv (apt-get install
# python3-venv); PyPI reachable (maturin, pytest). Builds `shmlink echo/pool`
# if missing. The C++ daemon/client and the PHP extension are used when built
# (make install/examples, ci/php-build.sh); --strict (SHMLINK_PY_STRICT=1)
# fails the tests that need them instead of skipping. --bench also runs
# bench.py once the tests pass; --types checks the stubs (mypy stubtest
# against the built module, mypy --strict on tests/helpers/typed_usage.py).
set -euo pipefail
source "$(dirname "$0")/../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bench=0
types=0
args=()
for a in "$@"; do
  case "$a" in
    --strict) export SHMLINK_PY_STRICT=1 ;;
    --bench) bench=1 ;;
    --types) types=1 ;;
    *) args+=("$a") ;;
  esac
done
venv=${SHMLINK_PY_VENV:-$root/target/python-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
[ -x target/release/shmlink ] || nice -n 10 cargo build --release -p shmlink-cli
nice -n 10 "$venv/bin/pip" install --quiet --disable-pip-version-check ./bindings/python pytest
(cd bindings/python && cargo fmt --check && nice -n 10 cargo clippy --release --quiet -- -D warnings)
"$venv/bin/python" -m pytest -q -rs bindings/python/tests "${args[@]}"
if [ "$types" = 1 ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check mypy
  # disjoint_base: a newer typeshed marker the stubs do not need.
  (cd /tmp && "$venv/bin/python" -m mypy.stubtest shmlink \
    --allowlist "$root/bindings/python/tests/stubtest-allowlist.txt")
  "$venv/bin/python" -m mypy --strict bindings/python/tests/helpers/typed_usage.py
fi
if [ "$bench" = 1 ]; then
  "$venv/bin/python" bindings/python/bench.py
fi
