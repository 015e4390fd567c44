#!/usr/bin/env bash
# Builds the PHP extension (bindings/php/modules/shmlink.so) against the Rust
# static library, from scratch, and checks it: arginfo matches the stub, C
# formatting, one exported symbol, no shared libshmlink needed.
#   ci/php-build.sh [--no-valgrind]
# Installs what is missing with apt (php8.2-dev php8.2-cli php8.2-fpm
# php-parser clang-format, and valgrind unless --no-valgrind).
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
step_prefix="php build"
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
valgrind=1
[ "${1:-}" = "--no-valgrind" ] && valgrind=0

step "setup"
# php8.2-fpm: tests/017-fpm.phpt; php-parser: gen_stub.php's parser.
packages=(php8.2-dev php8.2-cli php8.2-fpm php-parser clang-format)
[ "$valgrind" = 1 ] && packages+=(valgrind)
apt_install_missing "${packages[@]}"
php -r 'if (!function_exists("pcntl_fork")) { fwrite(STDERR, "php: the tests need pcntl\n"); exit(1); }'

step "Rust static library and CLI"
cargo build --release -p shmlink-capi -p shmlink-cli
export SHMLINK_BIN="$root/target/release/shmlink"

cd bindings/php
# The arginfo checks run once per ci/test.sh run (several of its steps build
# the extension), and every time this script runs on its own.
arginfo=0
once_per_run arginfo && arginfo=1
if [ "$arginfo" = 1 ]; then
  step "arginfo is what gen_stub.php makes of the stub"
  tools/gen-arginfo.sh --check
fi
step "C formatting"
clang-format --style=file:"$root/.clang-format" --dry-run --Werror \
  $(ls ./*.c ./*.h | grep -v '_arginfo\.h$')

step "build the extension"
# From scratch, so a re-run never picks up another configuration.
if [ -f Makefile ]; then make distclean >/dev/null 2>&1 || true; fi
phpize --clean >/dev/null
quiet() { "$@" >"$root/target/php-build.log" 2>&1 || { cat "$root/target/php-build.log" >&2; exit 1; }; }
quiet phpize
quiet ./configure --with-shmlink
quiet make -j"$(nproc)"
test -f modules/shmlink.so
# Self-contained: exports get_module only, needs no libshmlink at run time.
exported=$(nm -D --defined-only modules/shmlink.so | awk '{print $3}')
if [ "$exported" != "get_module" ]; then
  echo "php: modules/shmlink.so exports more than get_module:" >&2
  echo "$exported" | head -n 20 >&2
  exit 1
fi
if ldd modules/shmlink.so | grep shmlink >/dev/null; then
  echo "php: modules/shmlink.so links to a shared libshmlink" >&2; exit 1
fi
if [ "$arginfo" = 1 ]; then
  step "the loaded extension's arginfo matches the stub"
  php -n -d extension="$PWD/modules/shmlink.so" tools/check-arginfo.php
fi
