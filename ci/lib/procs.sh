# Process helpers shared by the scripts that start servers (sourced, bash).
#   alive PID                      the process runs (a zombie does not)
#   cmdline PID                    its command line, empty when gone
#   poll_until SECONDS CMD...      runs CMD every 20 ms until it succeeds;
#                                  status 1 after SECONDS
#   stop_process PID SIGNAL SECONDS
#                                  signals PID, waits up to SECONDS for it to
#                                  exit, then kills it and the children it had
#                                  (workers a killed master leaves behind);
#                                  status 1 when it had to be killed
#   stop_pidfile FILE PATTERN      stops the process of pid file FILE (left by
#                                  this run or an interrupted one) if it is
#                                  still the one started (its command line
#                                  contains PATTERN), and removes FILE

alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true; }

poll_until() {
  local seconds=$1 deadline
  shift
  deadline=$(($(date +%s%N) + seconds * 1000000000))
  until "$@"; do
    [ "$(date +%s%N)" -le "$deadline" ] || return 1
    sleep 0.02
  done
}

stop_process() {
  local pid=$1 signal=$2 seconds=$3 kids=() names=() k i
  [ -n "$pid" ] || return 0
  for k in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
    kids+=("$k")
    names+=("$(cmdline "$k")")
  done
  kill "-$signal" "$pid" 2>/dev/null || true
  if ! poll_until "$seconds" eval "! alive $pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for i in "${!kids[@]}"; do
      # Still the same process (not a reused pid): it was ours.
      if alive "${kids[$i]}" && [ "$(cmdline "${kids[$i]}")" = "${names[$i]}" ]; then
        kill -KILL "${kids[$i]}" 2>/dev/null || true
      fi
    done
    return 1
  fi
  wait "$pid" 2>/dev/null || true
}

stop_pidfile() {
  local file=$1 pattern=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if [ -n "$pid" ] && alive "$pid" && [[ "$(cmdline "$pid")" == *"$pattern"* ]]; then
    stop_process "$pid" TERM 10 ||
      echo "$(basename "$file" .pid) (pid $pid) did not stop on SIGTERM: killed" >&2
  fi
  rm -f "$file"
}
