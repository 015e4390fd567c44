"""Interop: the Python client with the C++ example daemon, the C++ client and
a PHP client with a Python server, Python workers under `shmlink pool`."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import shmlink
from conftest import (
    CPP_CLIENT_BIN,
    DAEMON_BIN,
    PHP_EXT,
    SHMLINK_BIN,
    need,
)

TRANSPORTS = ["shm", "unix", "tcp"]
DAEMON_HOW = "make install PREFIX=$PWD/target/stage && make examples PREFIX=$PWD/target/stage"


def floor8(req):
    return req[: len(req) // 8]


@pytest.fixture
def daemon(procs, sockdir):
    need(DAEMON_BIN, DAEMON_HOW)
    p = procs(
        [DAEMON_BIN, f"shm:{sockdir}/d.sock", f"unix:{sockdir}/du.sock", "tcp:127.0.0.1:0"],
        ready_stream="stdout",
        ready_word="listening on",
    )
    addrs = p.ready_line.split("listening on", 1)[1].split()
    out = {a.split(":", 1)[0]: a for a in addrs if not a.startswith("raw")}
    out["proc"] = p
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_python_client_cpp_daemon(daemon, transport):
    with shmlink.Client(daemon[transport]) as c:
        for n in (0, 7, 8, 2048, 1 << 20):
            data = os.urandom(n)
            assert c.call(data) == data[: n // 8]
        ids = {c.send(bytes([i]) * 64): bytes([i]) * 8 for i in range(32)}
        for _ in range(32):
            cid, resp = c.recv()
            assert ids.pop(cid) == resp
    daemon["proc"].kill(signal.SIGTERM)
    assert daemon["proc"].wait(10) == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cpp_client_python_server(serve, transport):
    need(CPP_CLIENT_BIN, DAEMON_HOW)
    addrs = serve(floor8)
    r = subprocess.run(
        [str(CPP_CLIENT_BIN), addrs[transport], "2000"],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "32 pipelined calls answered" in r.stdout


PHP_CLIENT = r"""
$c = new Shmlink\Client($argv[1]);
$out = [];
$out[] = bin2hex($c->call("hello from php"));
$out[] = bin2hex($c->call(str_repeat("\x01\xff", 100000)));
try { $c->call("fail"); $out[] = "no exception"; }
catch (Shmlink\RemoteException $e) { $out[] = $e->getCode() . " " . $e->getMessage(); }
try { $c->call("plain"); $out[] = "no exception"; }
catch (Shmlink\RemoteException $e) { $out[] = $e->getCode() . " " . $e->getMessage(); }
$id = $c->send("pipelined");
$resp = $c->receive($rid);
$out[] = ($rid === $id ? "same id " : "other id ") . $resp;
echo implode("\n", $out), "\n";
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_php_client_python_server(serve, transport):
    php = shutil.which("php")
    if php is None:
        if os.environ.get("SHMLINK_PY_STRICT") == "1":
            pytest.fail("php is not installed (apt-get install php-cli)")
        pytest.skip("php is not installed (apt-get install php-cli)")
    need(PHP_EXT, "ci/php-build.sh")

    class Rejected(Exception):
        code = 7

    def handler(req):
        if req == b"fail":
            raise Rejected("no thanks")
        if req == b"plain":
            raise RuntimeError("boom")
        return req[::-1]

    addrs = serve(handler)
    r = subprocess.run(
        [php, "-n", "-d", f"extension={PHP_EXT}", "-r", PHP_CLIENT, "--", addrs[transport]],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert bytes.fromhex(lines[0]) == b"hello from php"[::-1]
    assert bytes.fromhex(lines[1]) == (b"\x01\xff" * 100000)[::-1]
    assert lines[2].startswith("7 ") and lines[2].endswith("Rejected: no thanks")
    assert lines[3].startswith(f"{0xFFFF0003} ") and lines[3].endswith("RuntimeError: boom")
    assert lines[4] == "same id denilepip"


WORKER = textwrap.dedent(
    """
    import os, sys
    import shmlink

    class Refused(Exception):
        code = 99

    def handler(req):
        if req == b"pid":
            return str(os.getpid()).encode()
        if req == b"fail":
            raise Refused("worker says no")
        if req == b"exit":
            os._exit(3)
        if req == b"str":
            return "not bytes"
        return b"py:" + req

    mode = sys.argv[1] if len(sys.argv) > 1 else "run"
    pending = []
    w = shmlink.Worker()
    if mode == "run":
        w.run(handler)
    else:
        # The explicit loop: accept / respond / fail.
        while True:
            req = w.accept()
            if req is None:
                break
            if req == b"skip":
                continue  # not answered: the next accept() fails it
            if req == b"twice":
                w.respond(b"first")
                try:
                    w.respond(b"second")
                except shmlink.Error as e:
                    pending.append(str(e))
                continue
            if req == b"last error":
                w.respond(pending[-1].encode() if pending else b"none")
                continue
            try:
                w.respond(handler(req))
            except Refused as e:
                w.fail(e.code, f"Refused: {e}")
    w.close()
    """
)


@pytest.mark.parametrize("mode", ["run", "accept"])
def test_worker_under_pool(procs, sockdir, mode):
    need(SHMLINK_BIN, "cargo build --release -p shmlink-cli")
    script = sockdir / "worker.py"
    script.write_text(WORKER)
    p = procs(
        [SHMLINK_BIN, "pool", "--listen", f"shm:{sockdir}/p.sock", "--workers", "1",
         "--", sys.executable, script, mode],
        ready_word="ready",
    )
    with shmlink.Client(f"shm:{sockdir}/p.sock", timeout=10.0) as c:
        assert c.call(b"hello") == b"py:hello"
        assert c.call(bytearray(b"x" * 100_000)) == b"py:" + b"x" * 100_000
        with pytest.raises(shmlink.RemoteError) as e:
            c.call(b"fail")
        assert e.value.code == 99 and "worker says no" in e.value.message
        pid = int(c.call(b"pid"))
        assert pid > 0
        if mode == "run":
            with pytest.raises(shmlink.RemoteError) as e:
                c.call(b"str")
            assert e.value.code == 0xFFFF0003 and "TypeError" in e.value.message
            # A worker that dies mid-call: the pool answers with its code,
            # starts a new one.
            with pytest.raises(shmlink.RemoteError) as e:
                c.call(b"exit")
            assert e.value.code == 0xFFFF0012
            assert int(c.call(b"pid")) != pid
        else:
            with pytest.raises(shmlink.RemoteError) as e:
                c.call(b"skip")
            assert e.value.code == shmlink.CODE_NOT_ANSWERED == 0xFFFF0006
            assert c.call(b"twice") == b"first"
            assert b"no call is in flight" in c.call(b"last error")
    p.kill(signal.SIGTERM)
    assert p.wait(10) == 0


def test_worker_without_supervisor(monkeypatch, sockdir):
    monkeypatch.delenv("SHMLINK_WORKER", raising=False)
    with pytest.raises(shmlink.InvalidArgumentError, match="SHMLINK_WORKER"):
        shmlink.Worker()
    with pytest.raises(shmlink.ConnectError):
        shmlink.Worker(f"shm:{sockdir}/none.sock")
