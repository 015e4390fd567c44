# A Debian 13 (trixie) root for a PHP the host does not carry (sourced, bash).
#
#   php_root_dir VERSION           the root's path: target/php-root/VERSION ("/" for
#                                  the host's own PHP, 8.2)
#   php_root_make VERSION          makes the root with mmdebstrap, or reuses it when
#                                  its package list is unchanged; prints what it does
#                                  on stderr
#   php_root_exec VERSION CMD...   replaces the shell with CMD run in the root (so that
#                                  `(php_root_exec 8.4 nginx ...) &` leaves $! nginx's)
#   in_php_root VERSION CMD...     runs CMD in the root, in the current directory:
#                                  the repository at its own path, bindings/php as an
#                                  overlay whose writes (the root's build of the
#                                  extension) stay under target/php-root/VERSION.ext,
#                                  the host's /tmp, /dev and a fresh /proc
#
# The host stays Debian 12: its apt sources and libc are untouched. The root is
# made with --variant=apt and only the packages below, so that making it costs
# little of CI's budget (about two minutes with downloads). Needs root (mount
# namespaces and mmdebstrap's root mode), as CI has.

php_root_host_version=8.2

# The packages of a root for PHP $1: PHP (cli, fpm, dev, opcache, intl), the
# C toolchain phpize needs, Symfony 6.4 and Laravel 10 with what their tests
# use, the PSR-7 implementations, PEAR (pecl install of the release tarball),
# nginx and valgrind.
php_root_packages() {
  local v=$1
  echo "php$v-cli php$v-fpm php$v-dev php$v-opcache php$v-intl gcc make libc6-dev procps" \
    "php-symfony-framework-bundle php-symfony-runtime php-symfony-twig-bundle php-twig" \
    "php-laravel-framework php-nyholm-psr7 php-guzzlehttp-psr7 php-psr-http-factory" \
    "php-psr-http-message php-pear nginx valgrind"
}

php_root_dir() {
  if [ "$1" = "$php_root_host_version" ]; then echo /; return; fi
  echo "$(php_root_repo)/target/php-root/$1"
}

php_root_repo() { (cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd); }

# The mirror of the host's own Debian sources (deb.debian.org unless the host
# names another).
php_root_mirror() {
  local m
  m=$(sed -n 's|^URIs: *\(http[^ ]*/debian\)/*$|\1|p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
  [ -n "$m" ] || m=$(sed -n 's|^deb \(http[^ ]*/debian\)/* .*|\1|p' /etc/apt/sources.list 2>/dev/null | head -n1)
  echo "${m:-http://deb.debian.org/debian}"
}

php_root_make() {
  local v=$1 dir stamp want tmp deb
  [ "$v" = "$php_root_host_version" ] && return 0
  case "$v" in
    8.4) ;;
    *) echo "php-root: PHP $v is not offered (8.2 is the host's, 8.4 comes from Debian 13)" >&2; return 1 ;;
  esac
  dir=$(php_root_dir "$v")
  stamp="$dir/.shmlink-root"
  # amphp is in Debian 12 but not in 13: its Debian 12 package (architecture
  # all, plain PHP) goes into the root too.
  want="trixie $(php_root_packages "$v") + bookworm php-amphp-amp"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  [ "$(id -u)" = 0 ] || { echo "php-root: making a root needs root (mmdebstrap, mount namespaces)" >&2; return 1; }
  command -v mmdebstrap >/dev/null || apt_install_missing mmdebstrap
  apt_install_missing debian-archive-keyring
  [ -f /usr/share/keyrings/debian-archive-trixie-stable.gpg ] ||
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
    { echo "php-root: no Debian archive keyring to check trixie with" >&2; return 1; }
  echo "php-root: making a Debian 13 root for PHP $v in $dir (mmdebstrap, about two minutes)" >&2
  tmp="$dir.new"
  rm -rf "$tmp" && mkdir -p "$tmp.debs"
  (cd "$tmp.debs" && apt-get download -qq -o APT::Sandbox::User=root php-amphp-amp) ||
    { echo "php-root: cannot download php-amphp-amp from the host's Debian 12 sources" >&2; return 1; }
  deb=$(ls "$tmp.debs"/php-amphp-amp_*.deb)
  # shellcheck disable=SC2046 # the package list is words
  if ! mmdebstrap --variant=apt --quiet --mode=root \
    --include="$(php_root_packages "$v" | tr -s ' ' ',')" \
    --customize-hook="cp '$deb' \"\$1/tmp/amphp.deb\" && chroot \"\$1\" dpkg -i /tmp/amphp.deb >/dev/null && rm \"\$1/tmp/amphp.deb\"" \
    trixie "$tmp" "$(php_root_mirror)" >"$tmp.log" 2>&1; then
    tail -n 30 "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.debs"
    echo "php-root: mmdebstrap failed (its log above)" >&2
    return 1
  fi
  rm -rf "$tmp.debs" "$tmp.log" "$dir" "$dir.ext"
  echo "$want" >"$tmp/.shmlink-root"
  mv "$tmp" "$dir"
}

in_php_root() { (php_root_exec "$@"); }

php_root_exec() {
  local v=$1; shift
  if [ "$v" = "$php_root_host_version" ]; then exec "$@"; fi
  local dir repo ext
  dir=$(php_root_dir "$v")
  repo=$(php_root_repo)
  ext="$dir.ext"
  mkdir -p "$dir$repo" "$ext/upper" "$ext/work"
  # A mount namespace of its own: the mounts end with the command. Every
  # step execs the next, so the command keeps the shell's pid.
  exec unshare --mount --propagation private -- /bin/sh -ec '
    dir=$1 repo=$2 ext=$3 cwd=$4; shift 4
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount --bind /tmp "$dir/tmp"
    mount --bind "$repo" "$dir$repo"
    mount -t overlay overlay \
      -o "lowerdir=$repo/bindings/php,upperdir=$ext/upper,workdir=$ext/work" "$dir$repo/bindings/php"
    exec chroot "$dir" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
  ' sh "$dir" "$repo" "$ext" "$PWD" \
    env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}
