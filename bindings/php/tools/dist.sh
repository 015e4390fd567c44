#!/usr/bin/env bash
# `make -C bindings/php dist`: the extension's release tarballs, with the Rust
# static library built on the way and carried inside (vendor/), so that a
# machine with PHP's build tools and no Rust builds the module:
#   target/dist/shmlink-VERSION.tgz            PECL's layout (package.xml beside
#                                              shmlink-VERSION/): pecl install
#   target/dist/php_shmlink-VERSION-src.tgz    PIE's pre-packaged source (the
#                                              root composer.json's build-path)
# Fails when package.xml and the tracked sources disagree (a file missing from
# one of them), or its version is not the module's.
set -euo pipefail
source "$(dirname "$0")/../../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/../../.."
repo=$PWD
ext=bindings/php

version=$(sed -n 's/^#define PHP_SHMLINK_VERSION "\(.*\)"$/\1/p' $ext/php_shmlink.h)
[ -n "$version" ] || { echo "dist: no PHP_SHMLINK_VERSION in $ext/php_shmlink.h" >&2; exit 1; }
grep -q "<release>$version</release>" $ext/package.xml ||
  { echo "dist: package.xml's release is not $version (php_shmlink.h)" >&2; exit 1; }

# package.xml lists every source of the module, and nothing else.
listed=$(sed -n 's/.*<file name="\([^"]*\)".*/\1/p' $ext/package.xml | grep -v '^vendor/' | sort)
tracked=$( (cd $ext && git ls-files -- '*.c' '*.h' config.m4 shmlink.stub.php README.md) | sort)
if [ "$listed" != "$tracked" ]; then
  echo "dist: package.xml's files differ from the tracked sources (< package.xml, > git):" >&2
  diff <(echo "$listed") <(echo "$tracked") >&2 || true
  exit 1
fi

echo "dist: cargo build --release -p shmlink-capi"
cargo build --release -p shmlink-capi 2>"$repo/target/dist-cargo.log" ||
  { cat "$repo/target/dist-cargo.log" >&2; exit 1; }

out=$repo/target/dist
stage=$(mktemp -d "${TMPDIR:-/tmp}/shmlink-dist.XXXXXX")
trap 'rm -rf "$stage"' EXIT
tree=$stage/shmlink-$version
mkdir -p "$tree/vendor/include" "$tree/vendor/lib" "$out"
for f in $tracked; do install -D -m 0644 "$ext/$f" "$tree/$f"; done
install -m 0644 bindings/c/include/shmlink.h "$tree/vendor/include/shmlink.h"
# The archive without its debug information (20 MB -> a few): the module
# links what it uses.
objcopy --strip-debug target/release/libshmlink_c.a "$tree/vendor/lib/libshmlink.a"
sed "s|<date>[^<]*</date>|<date>$(date -u +%F)</date>|" $ext/package.xml >"$stage/package.xml"
tar -C "$stage" --owner=0 --group=0 -czf "$out/shmlink-$version.tgz" package.xml "shmlink-$version"
mkdir -p "$stage/pie/bindings"
cp -r "$tree" "$stage/pie/bindings/php"
tar -C "$stage/pie" --owner=0 --group=0 -czf "$out/php_shmlink-$version-src.tgz" bindings
echo "dist: $out/shmlink-$version.tgz ($(du -h "$out/shmlink-$version.tgz" | cut -f1)), $out/php_shmlink-$version-src.tgz"
