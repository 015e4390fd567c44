#!/usr/bin/env bash
# Regenerates shmlink_arginfo.h from shmlink.stub.php with php-src's
# build/gen_stub.php (shipped by php8.2-dev) and Debian's php-parser package.
#   tools/gen-arginfo.sh           rewrite shmlink_arginfo.h
#   tools/gen-arginfo.sh --check   fail when shmlink_arginfo.h is not what the stub gives
# gen_stub.php wants nikic/PHP-Parser in a PHP-Parser-VERSION directory next
# to itself (it would download it otherwise), so it runs from a temporary
# copy beside a link to the packaged parser.
set -euo pipefail
source "$(dirname "$0")/../../../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
gen=${GEN_STUB:-$(php-config --extension-dir)/build/gen_stub.php}
[ -f "$gen" ] || gen=/usr/lib/php/$(php-config --phpapi)/build/gen_stub.php
[ -f "$gen" ] || { echo "gen-arginfo: gen_stub.php not found (install php8.2-dev)" >&2; exit 1; }
parser=/usr/share/php/PhpParser
[ -d "$parser" ] || { echo "gen-arginfo: $parser not found (apt-get install php-parser)" >&2; exit 1; }
version=$(sed -n 's/^ *\$version = "\([0-9.]*\)";/\1/p' "$gen" | head -n1)
[ -n "$version" ] || { echo "gen-arginfo: cannot read the PHP-Parser version from $gen" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$gen" "$tmp/gen_stub.php"
mkdir -p "$tmp/PHP-Parser-$version/lib"
ln -s "$parser" "$tmp/PHP-Parser-$version/lib/PhpParser"
cp shmlink.stub.php "$tmp/"
php "$tmp/gen_stub.php" -f "$tmp/shmlink.stub.php" >/dev/null

if [ "${1:-}" = "--check" ]; then
  if ! diff -u shmlink_arginfo.h "$tmp/shmlink_arginfo.h"; then
    echo "gen-arginfo: shmlink_arginfo.h is stale; run bindings/php/tools/gen-arginfo.sh" >&2
    exit 1
  fi
  echo "gen-arginfo: shmlink_arginfo.h matches shmlink.stub.php"
else
  cp "$tmp/shmlink_arginfo.h" shmlink_arginfo.h
  echo "gen-arginfo: wrote shmlink_arginfo.h"
fi
