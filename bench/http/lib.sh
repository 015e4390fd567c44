# Helpers of the HTTP benchmarks (run.sh, frameworks.sh): their options,
# the PHP-FPM and nginx configurations, free ports, a process tree, CPU
# ticks, the CPU of waited-for children. The last two expect $run.

# bench_args NAME USAGE ARGS...: --duration, --rounds, --out and --quick
# into the globals duration, rounds and out (set their defaults first).
bench_args() {
  local name=$1 usage=$2
  shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
      --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
      --out) out=${2:?--out needs a directory}; shift 2 ;;
      --quick) duration=1; rounds=1; shift ;;
      *) echo "$name: unknown argument $1 ($usage [--duration S] [--rounds N] [--out DIR] [--quick])" >&2; exit 2 ;;
    esac
  done
}

# fpm_conf DIR: a PHP-FPM configuration in DIR/fpm.conf, listening on
# DIR/fpm.sock: pm = static with 2 children, OPcache on, timestamps not
# checked.
fpm_conf() {
  cat >"$1/fpm.conf" <<CONF
[global]
pid = $1/fpm.master.pid
error_log = $1/fpm.log
daemonize = no
[www]
listen = $1/fpm.sock
listen.mode = 0666
pm = static
pm.max_children = 2
clear_env = no
php_admin_value[opcache.enable] = 1
php_admin_value[opcache.validate_timestamps] = 0
php_admin_value[memory_limit] = 512M
CONF
}

# nginx_with DIR SERVER: an nginx configuration in DIR/nginx.conf, its
# pid, log and temporary files in DIR, access log off, with SERVER (nginx
# directives) inside its http block.
nginx_with() {
  cat >"$1/nginx.conf" <<CONF
worker_processes auto;
pid $1/nginx.master.pid;
error_log $1/nginx.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $1/nginx-body;
  fastcgi_temp_path $1/nginx-fastcgi;
  proxy_temp_path $1/nginx-proxy;
  uwsgi_temp_path $1/nginx-uwsgi;
  scgi_temp_path $1/nginx-scgi;
$2
}
CONF
}

# nginx_conf DIR PORT FASTCGI_PARAMS: nginx on 127.0.0.1:PORT, passing every
# request to DIR/fpm.sock with FASTCGI_PARAMS (nginx directives) after the
# standard parameters.
nginx_conf() {
  nginx_with "$1" "  server {
    listen 127.0.0.1:$2;
    location / {
      include /etc/nginx/fastcgi_params;
      $3
      fastcgi_pass unix:$1/fpm.sock;
    }
  }"
}

# nginx_static_conf DIR PORT ROOT: nginx on 127.0.0.1:PORT, serving the
# files under ROOT as Debian's default configuration does (sendfile and
# tcp_nopush on, types from mime.types).
nginx_static_conf() {
  nginx_with "$1" "  sendfile on;
  tcp_nopush on;
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$2;
    root $3;
  }"
}

free_port() {
  php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false);
             echo substr($n, strrpos($n, ":") + 1);'
}

descendants() {
  local k
  for k in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$k"
    descendants "$k"
  done
}

# CPU ticks (user + system) of the pids given.
ticks() {
  local t=0 p s
  for p in "$@"; do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    t=$((t + ${12} + ${13}))
  done
  echo "$t"
}

# CPU time of this shell's children that were waited for (wrk), in ms,
# into the variable named $1: `times`' second line, read without starting
# a process (whose own time would count).
children_ms() {
  local line t=0 m
  times >"$run/times"
  { read -r line; read -r line; } <"$run/times"
  for m in $line; do
    [[ $m =~ ^([0-9]+)m([0-9]+)\.([0-9]{3})s$ ]] || continue
    t=$((t + 10#${BASH_REMATCH[1]} * 60000 + 10#${BASH_REMATCH[2]} * 1000 + 10#${BASH_REMATCH[3]}))
  done
  printf -v "$1" '%s' "$t"
}
