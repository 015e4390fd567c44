# Runs the script that sources it in a scope of its own (crates/scope):
# when it ends, on any way out (an error, Ctrl-C, SIGTERM, its own
# SIGKILL), every process it started is stopped, and its temporary files
# (TMPDIR is the scope's directory) are removed.
#
# Sourced first, before the script changes directory, with its arguments:
#   source "$(dirname "$0")/../ci/lib/scope.sh" "$@"
# Unless the script already runs as a scope's command, this replaces it
# with `shmlink scope -- bash SCRIPT ARGS...`, building the CLI first
# when it is not there (after ci/setup.sh, which installs what the build
# needs). ci/test.sh checks that every script sources it.
if [ "${SHMLINK_SCOPE_PARENT:-}" != "$PPID" ]; then
  scope_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [ ! -x "$scope_repo/target/release/shmlink" ]; then
    "$scope_repo/ci/setup.sh" >&2
    (cd "$scope_repo" && cargo build --release -p shmlink-cli) >&2
  fi
  exec "$scope_repo/target/release/shmlink" scope -- bash "$0" "$@"
fi
