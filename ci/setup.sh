#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12 machine.
# Idempotent: quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

step_prefix=setup
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh

# cmake + libgtest-dev: the C/C++ tests and examples; clang-format: the C/C++
# format check; fonts-dejavu-core: the font of `shmlink bench --plot`;
# php8.2-dev/cli/fpm + php-parser + valgrind: the PHP extension, its build
# (gen_stub) and its tests; nginx + curl: the php-fpm end-to-end test;
# redis-server + php8.2-redis: the Redis broker baseline of the scenario;
# wrk + php8.2-gd: the HTTP load of bench/http (and the HTTP front's short
# test run) and its plot; python3-venv: the Python binding's tests run in a
# virtualenv (Debian's Python refuses pip installs outside one);
# prometheus: `promtool check metrics` in the pool's metrics tests, and the
# Prometheus server that scrapes a pool in the main job; php-nyholm-psr7,
# php-guzzlehttp-psr7 (+ the PSR-7/PSR-17 interfaces): Shmlink\Psr7\Worker's
# tests run against both implementations; php-symfony-framework-bundle and
# php-symfony-runtime, -twig-bundle (5.4): Shmlink\Runtime\SymfonyRuntime's test app;
# php-laravel-framework (8.83) + php8.2-intl: Shmlink\Laravel\Worker's;
# php-amphp-amp (2.6): the PHP client's event-loop test (041-loop-amphp).
apt_install_missing build-essential pkg-config util-linux procps cmake libgtest-dev clang-format \
  fonts-dejavu-core php8.2-dev php8.2-cli php8.2-fpm php-parser valgrind nginx curl redis-server \
  php8.2-redis wrk php8.2-gd python3-venv prometheus \
  php-nyholm-psr7 php-guzzlehttp-psr7 php-psr-http-factory php-psr-http-message \
  php-symfony-framework-bundle php-symfony-runtime php-symfony-twig-bundle php-twig \
  php-laravel-framework php8.2-intl php-amphp-amp

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: installing Rust with rustup is required (https://rustup.rs); cargo not found" >&2
  exit 1
fi
rustup component add clippy rustfmt >/dev/null 2>&1 || true
if ! rustup toolchain list | grep '^nightly' >/dev/null; then
  echo "setup: installing the nightly toolchain (for cargo fuzz)"
  rustup toolchain install nightly --profile minimal >/dev/null
fi
# The committed C header must be what this cbindgen generates: pin its version.
CBINDGEN_VERSION=0.29.4
if ! cbindgen --version 2>/dev/null | grep -x "cbindgen $CBINDGEN_VERSION" >/dev/null; then
  echo "setup: cargo install cbindgen $CBINDGEN_VERSION"
  cargo install cbindgen --version "$CBINDGEN_VERSION" --locked --force >/dev/null 2>&1
fi
echo "setup: ok"
