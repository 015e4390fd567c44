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
#   run_marked MARK DIR CMD...     becomes CMD (exec: call it in a subshell),
#                                  outside this script's scope as a user's
#                                  shell would run it, with MARK (NAME=VALUE)
#                                  in its environment and TMPDIR=DIR
#   left_by MARK                   the processes still alive that carry MARK
#                                  in their environment, or were orphaned to
#                                  this script's scope (janitors aside), as
#                                  "PID COMMAND" lines
#   temp_entries                   the entries of /tmp and /dev/shm, sorted,
#                                  but for the directories of live scopes
#                                  (whose processes left_by reports if they
#                                  are a run's)
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

run_marked() {
  local mark=$1 dir=$2
  shift 2
  exec env -u SHMLINK_SCOPE_PARENT -u SHMLINK_SCOPE_TMP "$mark" TMPDIR="$dir" "$@"
}

left_by() {
  local mark=$1 d pid seeds=()
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" != $$ ] && [ "$pid" != "$BASHPID" ] || continue
    if grep -qzx "$mark" "$d/environ" 2>/dev/null; then
      seeds+=("$pid")
    fi
  done
  # The seeds, the orphans re-parented to this script's guardian (its
  # janitor aside), and every descendant of either: a process that
  # rewrites its environment for its title (nginx, PHP-FPM) is found
  # through its parent.
  ps -e -o pid=,ppid=,stat=,args= | awk -v seeds="${seeds[*]}" -v guardian="${SHMLINK_SCOPE_PARENT:--1}" \
    -v me=$$ -v subshell="$BASHPID" '
    { pid[NR] = $1; ppid[NR] = $2; st[NR] = $3; $1 = $2 = $3 = ""; args[NR] = substr($0, 4) }
    END {
      n = split(seeds, s, " "); for (i = 1; i <= n; i++) ours[s[i]] = 1
      for (i = 1; i <= NR; i++) if (ppid[i] == guardian && pid[i] != me && args[i] !~ /scope --janitor/) ours[pid[i]] = 1
      do { grew = 0; for (i = 1; i <= NR; i++) if ((ppid[i] in ours) && !(pid[i] in ours)) { ours[pid[i]] = 1; grew = 1 } } while (grew)
      for (i = 1; i <= NR; i++) if ((pid[i] in ours) && pid[i] != me && pid[i] != subshell && st[i] !~ /^Z/ && args[i] !~ /^ps -e/)
        print pid[i], substr(args[i], 1, 100)
    }'
}

temp_entries() {
  local e
  for e in /tmp/* /tmp/.[!.]* /dev/shm/* /dev/shm/.[!.]*; do
    [ -e "$e" ] || continue
    case $e in
      /tmp/shmlink-scope-*) alive "${e#/tmp/shmlink-scope-}" && continue ;;
    esac
    echo "$e"
  done | sort
}
