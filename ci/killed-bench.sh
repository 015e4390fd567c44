#!/usr/bin/env bash
# A benchmark killed mid-run leaves nothing (issue 49): starts COMMAND as a
# user would, waits until a process whose command line matches PATTERN runs
# (the run is under way, its servers up), sends SIGKILL to the process it
# started, and checks that within 60 s no process of the run is alive and
# nothing of it is left in the temporary directories or /dev/shm.
#
#   ci/killed-bench.sh PATTERN COMMAND [ARGS...]
#   e.g. ci/killed-bench.sh 'nginx: master' bench/http/run.sh --quick
set -euo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
step_prefix="killed bench"
# shellcheck source=ci/lib/common.sh
source ci/lib/common.sh
# shellcheck source=ci/lib/procs.sh
source ci/lib/procs.sh
[ $# -ge 2 ] || { echo "usage: ci/killed-bench.sh PATTERN COMMAND [ARGS...]" >&2; exit 2; }
pattern=$1
shift
mark="SHMLINK_KILLED_BENCH=$$"
log=$TMPDIR/bench.log
dir=$TMPDIR/run
mkdir "$dir"
command="$*"
before=$(temp_entries)
(run_marked "$mark" "$dir" "$@") >"$log" 2>&1 &
pid=$!
under_way() {
  left_by "$mark" | cut -d' ' -f2- | grep -q -- "$pattern" || {
    alive "$pid" || { cat "$log" >&2; fail "'$command' ended before a process matching '$pattern' ran"; }
    return 1
  }
}
poll_until 300 under_way || { cat "$log" >&2; fail "no process matching '$pattern' within 300 s"; }
running=$(left_by "$mark" | wc -l)
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
poll_until 60 test -z "$(left_by "$mark")" ||
  fail "processes of '$command' alive 60 s after its SIGKILL: $(left_by "$mark" | paste -sd';')"
left=$({ comm -13 <(echo "$before") <(temp_entries); ls -A "$dir" | sed "s|^|$dir/|"; })
[ -z "$left" ] || fail "'$command' killed left files: $left"
echo "killed bench: '$command' killed with SIGKILL while $running of its processes ran ('$pattern' among them): none left, no file left"
