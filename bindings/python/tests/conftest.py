"""Fixtures of the shmlink Python suite.

External programs are found in the repository's target directory (override
with SHMLINK_BIN, SHMLINK_DAEMON, SHMLINK_PHP_EXT); each test that needs one
that is missing is skipped with the command that builds it. Nothing waits by
sleeping: every wait is on a condition, with a deadline.
"""

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import shmlink

ROOT = Path(__file__).resolve().parents[3]
HELPERS = Path(__file__).resolve().parent / "helpers"
SHMLINK_BIN = Path(os.environ.get("SHMLINK_BIN", ROOT / "target/release/shmlink"))
DAEMON_BIN = Path(
    os.environ.get("SHMLINK_DAEMON", ROOT / "target/examples/cpp-daemon/shmlink-daemon")
)
CPP_CLIENT_BIN = Path(
    os.environ.get(
        "SHMLINK_CPP_CLIENT", ROOT / "target/examples/cpp-client/shmlink-cpp-client"
    )
)
PHP_EXT = Path(os.environ.get("SHMLINK_PHP_EXT", ROOT / "bindings/php/modules/shmlink.so"))


def wait_until(cond, timeout=5.0, what="condition"):
    """Polls `cond` until it is true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.001)


def read_line(stream, timeout, what):
    """Reads one line from a pipe, waiting at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = stream.fileno()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; got {buf!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 1)
            if not chunk:
                raise AssertionError(f"{what}: the process closed its output; got {buf!r}")
            buf += chunk
    return buf.decode()


class Proc:
    """A child process that prints a ready line; killed at teardown."""

    def __init__(self, argv, ready_stream="stderr", ready_word="ready", timeout=20.0, env=None):
        self.argv = [str(a) for a in argv]
        self.p = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        stream = self.p.stderr if ready_stream == "stderr" else self.p.stdout
        try:
            while True:
                line = read_line(stream, timeout, f"the ready line of {self.argv[0]}")
                if ready_word in line:
                    self.ready_line = line
                    break
        except BaseException:
            self.close()  # never leave a child behind a failed start
            raise

    @property
    def pid(self):
        return self.p.pid

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait(self, timeout=10.0):
        return self.p.wait(timeout)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        for s in (self.p.stdout, self.p.stderr):
            if s:
                s.close()


@pytest.fixture
def sockdir():
    """A short directory for socket files (sun_path is 108 bytes)."""
    d = tempfile.mkdtemp(prefix="shlpy")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def procs():
    started = []

    def start(*args, **kw):
        p = Proc(*args, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


def need(path, how):
    """Skips the test when a peer program is missing; with
    SHMLINK_PY_STRICT=1 (CI, where everything is built) fails it instead."""
    if not path.exists():
        message = f"{path} is not built: {how}"
        if os.environ.get("SHMLINK_PY_STRICT") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def echo(procs, sockdir):
    """`shmlink echo` in another process on shm, unix and tcp; returns
    {transport: address}."""
    need(SHMLINK_BIN, "cargo build --release -p shmlink-cli")

    p = procs(
        [SHMLINK_BIN, "echo", "--listen", f"shm:{sockdir}/e.sock", "--listen",
         f"unix:{sockdir}/u.sock", "--listen", "tcp:127.0.0.1:0"]
    )
    addrs = p.ready_line.split("listening on", 1)[1].split()
    out = {a.split(":", 1)[0]: a for a in addrs}
    out["proc"] = p
    return out


class InProcessServer:
    """A shmlink.Server serving on a Python thread of this process."""

    def __init__(self, addresses, handler, **options):
        self.server = shmlink.Server(addresses, **options)
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(handler,), daemon=True)
        self.thread.start()

    def _run(self, handler):
        try:
            self.server.serve(handler)
        except BaseException as e:  # reported by stop()
            self.error = e

    @property
    def addresses(self):
        return self.server.addresses

    def stop(self):
        self.server.stop()
        self.thread.join(10)
        assert not self.thread.is_alive(), "serve() did not return within 10 s of stop()"
        if self.error:
            raise self.error


@pytest.fixture
def serve(sockdir):
    """serve(handler, **options) -> {transport: address} of an in-process
    server on shm, unix and tcp:127.0.0.1:0."""
    servers = []

    def start(handler, **options):
        n = len(servers)
        s = InProcessServer(
            [f"shm:{sockdir}/s{n}.sock", f"unix:{sockdir}/u{n}.sock", "tcp:127.0.0.1:0"],
            handler,
            **options,
        )
        servers.append(s)
        out = {a.split(":", 1)[0]: a for a in s.addresses}
        out["server"] = s
        return out

    yield start
    for s in servers:
        s.stop()


def python_server(procs, addresses, mode):
    """A Python shmlink server in another process (helpers/py_server.py)."""
    return procs(
        [sys.executable, HELPERS / "py_server.py", mode, *addresses],
        ready_stream="stdout",
    )
