#!/usr/bin/env bash
# The release tarball installs as PHP users install extensions: makes it
# (`make -C bindings/php dist`), then, in the PHP 8.4 root (ci/php-root.sh)
# with the module and its ini removed, runs `pecl install` on it, enables it
# as pecl says to, and checks that `php -m` lists shmlink and that it calls
# a `shmlink echo`.
#   ci/php-dist.sh [VERSION]     default 8.4
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
step_prefix="php dist"
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
# shellcheck source=ci/lib/php-root.sh
source ci/lib/php-root.sh
v=${1:-8.4}

step "make -C bindings/php dist"
make -s -C bindings/php dist
version=$(sed -n 's/^#define PHP_SHMLINK_VERSION "\(.*\)"$/\1/p' bindings/php/php_shmlink.h)
tarball=$PWD/target/dist/shmlink-$version.tgz

step "pecl install $(basename "$tarball") with PHP $v"
ci/php-root.sh "$v" >/dev/null
log=$PWD/target/php-dist-$v.log
# shellcheck disable=SC2016 # expanded in the root
in_php_root "$v" /bin/sh -ec '
  tarball=$1 minor=$(php-config --version | cut -d. -f1,2)
  pecl uninstall shmlink >/dev/null 2>&1 || true # what an earlier run installed
  rm -f "$(php-config --extension-dir)/shmlink.so" /etc/php/$minor/*/conf.d/20-shmlink.ini
  if php -m 2>/dev/null | grep -qx shmlink; then echo "shmlink still loaded before pecl install" >&2; exit 1; fi
  pecl install "$tarball"
  echo "extension=shmlink.so" >/etc/php/$minor/cli/conf.d/20-shmlink.ini
  php -m | grep -x shmlink
  dir=$(mktemp -d)
  shmlink echo --reply-ratio 1 --listen "unix:$dir/e.sock" --ready-file "$dir/ready" &
  i=0; until [ -s "$dir/ready" ]; do i=$((i + 1)); [ $i -lt 500 ] || { echo "echo not ready" >&2; exit 1; }; sleep 0.01; done
  php -r "echo (new Shmlink\\Client(\$argv[1]))->call(\"pecl\"), \"\\n\";" "unix:$dir/e.sock"
  kill $!; wait $! 2>/dev/null || true; rm -rf "$dir"
' sh "$tarball" >"$log" 2>&1 || { tail -n 30 "$log" >&2; fail "pecl install of $tarball failed with PHP $v (log: $log)"; }
grep -qx shmlink "$log" || fail "php -m does not list shmlink after pecl install (log: $log)"
grep -qx pecl "$log" || fail "the pecl-installed module did not call shmlink echo (log: $log)"
echo "php dist: $(basename "$tarball") installs with pecl on PHP $v; php -m lists shmlink; it calls shmlink echo"
