"""Runs the Python script that calls it in a scope of its own (crates/scope;
ci/lib/scope.sh is the same for shell scripts): when it ends, on any way
out (an exception, Ctrl-C, SIGTERM, its own SIGKILL), every process it
started is stopped, and its temporary files (TMPDIR, and so tempfile's
directory, is the scope's) are removed.

    scope.enter(shmlink)   # first thing, once the CLI's path is known

Unless the script already runs as a scope's command, this replaces the
process with `shmlink scope -- PYTHON ARGS...`, the same command line
(interpreter options included, read from /proc/self/cmdline)."""

import os
import sys


def enter(shmlink):
    if os.environ.get("SHMLINK_SCOPE_PARENT") == str(os.getppid()):
        return
    if not os.access(shmlink, os.X_OK):
        raise SystemExit(f"cannot run in a scope: {shmlink} is missing (build it: cargo build --release -p shmlink-cli)")
    with open("/proc/self/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().rstrip(b"\0").split(b"\0")]
    argv[0] = sys.executable
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(shmlink, [shmlink, "scope", "--", *argv])
