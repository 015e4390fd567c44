#!/usr/bin/env bash
# Runs a command N times in a row, as a user would (each run outside any
# scope of ours, with a TMPDIR of its own), and checks after each run that
# it left nothing: no process of it alive (none carries the run's mark in
# its environment, none descends from one, no orphan of it was re-parented
# to this script's scope), nothing in its TMPDIR, no new entry in /tmp or
# /dev/shm (run it on an otherwise quiet machine: another program's new
# files there count too). Stops at the first failed or leaky run.
#
#   ci/repeat.sh N COMMAND [ARGS...]      e.g. ci/repeat.sh 20 ci/main.sh
#
# Prints a line per run (status, seconds, what it left) and a summary; the
# output of run K is in target/repeat/run-K.log. Exit 1 when a run failed
# or left something.
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
step_prefix=repeat
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
# shellcheck source=ci/lib/procs.sh
source ci/lib/procs.sh
[ $# -ge 2 ] && [[ $1 =~ ^[0-9]+$ ]] || { echo "usage: ci/repeat.sh N COMMAND [ARGS...]" >&2; exit 2; }
n=$1
shift
logs=target/repeat
mkdir -p "$logs"
green=0
total_s=0
for k in $(seq "$n"); do
  before=$(temp_entries)
  dir=$TMPDIR/run-$k
  mkdir "$dir"
  t0=$(date +%s)
  status=0
  (run_marked SHMLINK_REPEAT_RUN="$k" "$dir" "$@") >"$logs/run-$k.log" 2>&1 || status=$?
  secs=$(($(date +%s) - t0))
  total_s=$((total_s + secs))
  # Whatever is still stopping gets a few seconds (a janitor finishing).
  poll_until 30 test -z "$(left_by SHMLINK_REPEAT_RUN="$k")" || true
  procs=$(left_by SHMLINK_REPEAT_RUN="$k")
  files=$({ comm -13 <(echo "$before") <(temp_entries); ls -A "$dir" | sed "s|^|$dir/|"; })
  rmdir "$dir" 2>/dev/null || true
  printf 'run %d/%d: exit %d in %d s' "$k" "$n" "$status" "$secs"
  [ -z "$procs" ] && [ -z "$files" ] && echo ", nothing left" ||
    printf ', LEFT: processes [%s] files [%s]\n' "$(echo "$procs" | paste -sd';')" "$(echo "$files" | paste -sd' ')"
  if [ "$status" != 0 ] || [ -n "$procs" ] || [ -n "$files" ]; then
    echo "repeat: run $k of '$*' failed or left something (its output: $logs/run-$k.log):" >&2
    tail -n 20 "$logs/run-$k.log" >&2
    echo "repeat: $green of $k runs green before it" >&2
    exit 1
  fi
  green=$((green + 1))
done
echo "repeat: $green of $n runs of '$*' green, nothing left after any ($((total_s / n)) s a run on average)"
