#!/usr/bin/env bash
# A root for another PHP than the host's: makes it (or reuses it), builds the
# extension there with that PHP's phpize, linked with the same Rust static
# library as the host's, and installs it with the `shmlink` CLI on the root's
# PATH. Prints the root's path:
#   ci/php-root.sh 8.4                    -> target/php-root/8.4
#   chroot "$(ci/php-root.sh 8.4)" php -m   lists shmlink
#   ci/php-root.sh 8.4 -- CMD ARGS...      runs CMD in the root (in the current
#                                         directory, the repository and /tmp
#                                         seen at their own paths)
# 8.2 is the host's PHP: its root is "/", and the extension is built by
# ci/php-build.sh. PHP 8.4 comes from Debian 13 (trixie) through mmdebstrap:
# ci/lib/php-root.sh says how.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
repo=$(cd "$(dirname "$0")/.." && pwd)
cwd=$PWD
cd "$repo"
step_prefix="php root"
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
# shellcheck source=ci/lib/php-root.sh
source ci/lib/php-root.sh

[ $# -ge 1 ] || { echo "usage: ci/php-root.sh VERSION [-- CMD ARGS...]" >&2; exit 2; }
v=$1; shift
run=()
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] || { echo "php-root: expected -- before a command, got $1" >&2; exit 2; }
  shift
  run=("$@")
fi
dir=$(php_root_dir "$v")

if [ "$v" = "$php_root_host_version" ]; then
  ci/php-build.sh --no-valgrind >&2
else
  php_root_make "$v"
  cargo build --release -p shmlink-capi -p shmlink-cli >"$repo/target/php-root-cargo.log" 2>&1 ||
    { cat "$repo/target/php-root-cargo.log" >&2; exit 1; }
  # The extension, built from scratch with the root's phpize (its writes land
  # in the root's overlay of bindings/php, never in the host's build).
  log="$repo/target/php-root-$v-build.log"
  # shellcheck disable=SC2016 # expanded in the root
  in_php_root "$v" /bin/sh -ec '
    cd bindings/php
    if [ -f Makefile ]; then make distclean >/dev/null 2>&1 || true; fi
    phpize --clean >/dev/null
    phpize >/dev/null
    ./configure --with-shmlink >/dev/null
    make -j"$(nproc)" >/dev/null
    test -f modules/shmlink.so
    install -m 0644 modules/shmlink.so "$(php-config --extension-dir)/shmlink.so"
    for sapi in cli fpm; do
      echo "extension=shmlink.so" >"/etc/php/$(php-config --version | cut -d. -f1,2)/$sapi/conf.d/20-shmlink.ini"
    done
  ' >"$log" 2>&1 || { cat "$log" >&2; echo "php-root: building the extension with PHP $v failed (above)" >&2; exit 1; }
  install -m 0755 target/release/shmlink "$dir/usr/local/bin/shmlink"
  # What the root's PHP says it is, and that it loads the module.
  chroot "$dir" php -r 'if (!extension_loaded("shmlink")) { fwrite(STDERR, "shmlink not loaded\n"); exit(1); }
    fwrite(STDERR, "php-root: PHP " . PHP_VERSION . " with shmlink " . phpversion("shmlink") . "\n");'
fi

if [ ${#run[@]} -gt 0 ]; then
  cd "$cwd"
  in_php_root "$v" "${run[@]}"
else
  echo "$dir"
fi
