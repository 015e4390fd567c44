# Helpers of the HTTP benchmarks (run.sh, frameworks.sh): free ports, a
# process tree, CPU ticks, the CPU of waited-for children. Expects $run.

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
