"""Client and server round trips, in one process and across processes."""

import array
import math
import os
import signal
import threading
import time

import pytest

import shmlink
from conftest import python_server, read_line, wait_until

TRANSPORTS = ["shm", "unix", "tcp"]


def reverse(req):
    return req[::-1]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_round_trip_in_process(serve, transport):
    addrs = serve(reverse)
    with shmlink.Client(addrs[transport]) as c:
        assert c.is_connected
        assert c.transport == transport
        for n in (0, 1, 64, 2048, 100_000):
            data = os.urandom(n)
            assert c.call(data) == data[::-1]
    assert not c.is_connected


def test_past_max_shm_bytes_sessions_use_the_socket_unless_shm_is_required(serve):
    # Room for one session's segment (64 KiB rings: 132 KiB).
    addrs = serve(reverse, max_shm_bytes=135168)
    with shmlink.Client(addrs["shm"]) as first, shmlink.Client(addrs["shm"]) as second:
        assert first.transport == "shm"
        assert second.transport == "unix"
        assert second.call(b"abc") == b"cba"
        with pytest.raises(shmlink.ConnectError, match="max_shm_bytes"):
            shmlink.Client(addrs["shm"], shm_required=True)
        assert first.call(b"xyz") == b"zyx"
    # Once the server has seen the first session end (it reads the goodbye on
    # its own thread), shared memory again (this process may get its own
    # segment back).
    def strict_client():
        try:
            return shmlink.Client(addrs["shm"], shm_required=True)
        except shmlink.ConnectError:
            return None

    with wait_until(strict_client, what="the first session to end on the server") as strict:
        assert strict.transport == "shm"
        assert strict.call(b"12") == b"21"


def _session_segment_mappings():
    """How many times each shmlink session segment is mapped in this
    process, by inode (/proc/self/maps)."""
    counts = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "memfd:shmlink-session" in line:
                inode = line.split()[4]
                counts[inode] = counts.get(inode, 0) + 1
    return counts


def test_a_closed_shm_clients_mapping_is_kept_until_released(serve):
    shmlink.release_kept_mappings()
    addrs = serve(reverse)
    with shmlink.Client(addrs["shm"]) as c:
        assert c.call(b"ab") == b"ba"
        # The server runs in this process too: the session's segment is the
        # one mapped twice (its prepared segments are mapped once).
        both = [inode for inode, n in _session_segment_mappings().items() if n == 2]
        assert len(both) == 1, _session_segment_mappings()
        segment = both[0]
    # Closed: the client keeps its mapping, the server its own (the session's
    # or, once it has seen the end, the one it keeps for this process).
    assert _session_segment_mappings().get(segment) == 2
    shmlink.release_kept_mappings()
    assert _session_segment_mappings().get(segment) == 1, "the server's alone"
    with shmlink.Client(addrs["shm"]) as again:
        assert again.call(b"cd") == b"dc"


def test_tcp_port_zero_is_resolved(serve):
    addrs = serve(reverse)
    host, port = addrs["tcp"][len("tcp:"):].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_round_trip_to_echo_process(echo, transport):
    with shmlink.Client(echo[transport]) as c:
        for n in (0, 1, 9, 2048, 1 << 20):
            data = os.urandom(n)
            assert c.call(data) == data[: math.ceil(n / 8)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_round_trip_to_python_server_process(procs, sockdir, transport):
    addrs = {"shm": f"shm:{sockdir}/p.sock", "unix": f"unix:{sockdir}/p.sock", "tcp": "tcp:127.0.0.1:0"}
    p = python_server(procs, [addrs[transport]], "reverse")
    address = p.ready_line.split()[1]
    with shmlink.Client(address) as c:
        assert c.call(b"abcdef") == b"fedcba"
    p.kill(signal.SIGTERM)
    assert p.wait() == 0


def test_pipelining(echo):
    with shmlink.Client(echo["shm"]) as c:
        sent = {}
        for i in range(200):
            data = bytes([i % 256]) * (8 * (i + 1))
            sent[c.send(data)] = data
        assert c.in_flight == 200
        got = {}
        for _ in range(200):
            cid, resp = c.recv()
            got[cid] = resp
        assert set(got) == set(sent)
        for cid, data in sent.items():
            assert got[cid] == data[: len(data) // 8]
        with pytest.raises(shmlink.Error, match="no call is in flight"):
            c.recv()


def test_call_between_pipelined_calls(serve):
    addrs = serve(reverse)
    with shmlink.Client(addrs["shm"]) as c:
        a = c.send(b"ab")
        assert c.call(b"xyz") == b"zyx"
        assert c.recv() == (a, b"ba")


def test_notify(serve):
    seen = []
    addrs = serve(lambda req: seen.append(bytes(req)) or b"")
    with shmlink.Client(addrs["unix"]) as c:
        assert c.notify(b"one-way") is None
        wait_until(lambda: seen == [b"one-way"], what="the one-way message")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_error_with_code(serve, transport):
    class AppError(Exception):
        code = 42

    def handler(req):
        if req == b"app":
            raise AppError("bad input")
        if req == b"plain":
            raise ValueError("no code here")
        if req == b"str":
            return "not bytes"
        return req

    addrs = serve(handler)
    with shmlink.Client(addrs[transport]) as c:
        with pytest.raises(shmlink.RemoteError) as e:
            c.call(b"app")
        assert e.value.code == 42
        assert e.value.message == "AppError: bad input"
        assert "bad input" in str(e.value)
        with pytest.raises(shmlink.RemoteError) as e:
            c.call(b"plain")
        assert e.value.code == shmlink.CODE_HANDLER_EXCEPTION == 0xFFFF0003
        assert e.value.message == "ValueError: no code here"
        with pytest.raises(shmlink.RemoteError) as e:
            c.call(b"str")
        assert e.value.code == 0xFFFF0003 and "TypeError" in e.value.message
        # The session is still usable after remote errors.
        assert c.call(b"fine") == b"fine"
        # An error reply through recv() names its call.
        cid = c.send(b"app")
        with pytest.raises(shmlink.RemoteError) as e:
            c.recv()
        assert e.value.call_id == cid and e.value.code == 42


def test_handler_may_return_any_buffer(serve):
    addrs = serve(lambda req: memoryview(bytearray(req))[1:])
    with shmlink.Client(addrs["shm"]) as c:
        assert c.call(b"xabc") == b"abc"


def test_buffer_inputs(serve):
    addrs = serve(reverse)
    with shmlink.Client(addrs["shm"]) as c:
        assert c.call(bytearray(b"abc")) == b"cba"
        assert c.call(memoryview(b"hello")[1:4]) == b"lle"
        assert c.call(memoryview(bytearray(b"0123456789"))[::2]) == b"86420"
        assert c.call(array.array("B", [1, 2, 3])) == b"\x03\x02\x01"
        cid = c.send(bytearray(b"xy"))
        assert c.recv() == (cid, b"yx")


@pytest.mark.parametrize("bad", ["text", 12, None, [1, 2]])
def test_wrong_types(serve, bad):
    addrs = serve(reverse)
    with shmlink.Client(addrs["shm"]) as c:
        with pytest.raises(TypeError):
            c.call(bad)
        with pytest.raises(TypeError):
            c.send(bad)
        with pytest.raises(TypeError):
            c.notify(bad)
        assert c.call(b"ok") == b"ko"


def test_timeout_leaves_session_usable(serve):
    release = threading.Event()

    def handler(req):
        if req == b"slow":
            release.wait(10)
        return req

    addrs = serve(handler)
    with shmlink.Client(addrs["shm"], timeout=5.0) as c:
        t0 = time.monotonic()
        with pytest.raises(shmlink.TimeoutError) as e:
            c.call(b"slow", timeout=0.2)
        took = time.monotonic() - t0
        assert 0.15 < took < 2.0
        assert isinstance(e.value, TimeoutError)  # the builtin too
        assert "timed out" in str(e.value)
        release.set()
        # The late response is discarded, never returned to a later call.
        assert c.call(b"next") == b"next"


def test_client_timeout_option(serve):
    release = threading.Event()
    addrs = serve(lambda req: release.wait(10) and req)
    try:
        with shmlink.Client(addrs["unix"], timeout=0.2) as c:
            with pytest.raises(shmlink.TimeoutError):
                c.call(b"x")
    finally:
        release.set()


def test_closed_client(serve):
    addrs = serve(reverse)
    c = shmlink.Client(addrs["shm"])
    c.close()
    c.close()
    assert not c.is_connected
    for op in (lambda: c.call(b"x"), lambda: c.send(b"x"), lambda: c.recv(), lambda: c.notify(b"x")):
        with pytest.raises(shmlink.ClosedError, match="close\\(\\) was called"):
            op()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_echo_killed(echo, transport):
    with shmlink.Client(echo[transport], timeout=5.0) as c:
        assert c.call(b"12345678") == b"1"
        echo["proc"].kill(signal.SIGKILL)
        echo["proc"].wait()
        t0 = time.monotonic()
        with pytest.raises(shmlink.ClosedError):
            c.call(b"12345678")
        assert time.monotonic() - t0 < 0.1
        assert not c.is_connected


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_killed_mid_call(procs, sockdir, transport, record_property):
    addrs = {"shm": f"shm:{sockdir}/h.sock", "unix": f"unix:{sockdir}/h.sock", "tcp": "tcp:127.0.0.1:0"}
    p = python_server(procs, [addrs[transport]], "hang")
    address = p.ready_line.split()[1]
    with shmlink.Client(address, timeout=30.0) as c:
        result = {}

        def call():
            t0 = time.monotonic()
            try:
                c.call(b"never answered")
            except shmlink.Error as e:
                result["error"] = e
            result["took"] = time.monotonic() - t0

        t = threading.Thread(target=call)
        t.start()
        # The request is in the server's hands (its handler is blocked).
        assert "handling" in read_line(p.p.stdout, 10, "the handler's start")
        # is_connected does not wait for the call in progress.
        t0 = time.monotonic()
        assert c.is_connected
        assert time.monotonic() - t0 < 0.5
        killed_at = [0.0]

        def kill():
            killed_at[0] = time.monotonic()
            p.kill(signal.SIGKILL)

        kill()
        t.join(10)
        assert not t.is_alive(), "the call hung after the server was killed"
        noticed = time.monotonic() - killed_at[0]
        record_property("noticed_s", noticed)
        print(f"{transport}: ClosedError {noticed * 1000:.1f} ms after SIGKILL")
        assert isinstance(result.get("error"), shmlink.ClosedError), result
        assert not c.is_connected
        # Issue 19: a ClosedError within 100 ms of the kill, no hang.
        assert noticed < 0.1, f"noticed after {noticed:.3f}s"


def test_server_stopped_closes_sessions(sockdir):
    from conftest import InProcessServer

    s = InProcessServer([f"shm:{sockdir}/x.sock"], reverse)
    c = shmlink.Client(s.addresses[0])
    assert c.call(b"ab") == b"ba"
    s.stop()
    with pytest.raises(shmlink.ClosedError):
        c.call(b"ab")
    c.close()


def test_oversize_request(serve):
    addrs = serve(reverse, max_message_size=4096)
    with shmlink.Client(addrs["shm"]) as c:
        assert c.max_request == 4096
        with pytest.raises(shmlink.MessageTooLargeError, match="exceeds"):
            c.call(bytes(5000))
        assert c.call(bytes(4000)) == bytes(4000)


def test_connect_errors(sockdir):
    with pytest.raises(shmlink.ConnectError) as e:
        shmlink.Client(f"shm:{sockdir}/nobody.sock")
    assert "nobody.sock" in str(e.value)
    assert isinstance(e.value, ConnectionError)
    with pytest.raises(shmlink.InvalidArgumentError, match="invalid address"):
        shmlink.Client("nowhere")
    with pytest.raises(ValueError):
        shmlink.Client("shm:/tmp/x.sock", wait="sometimes")
    with pytest.raises(ValueError):
        shmlink.Client("shm:/tmp/x.sock", timeout=0)
    with pytest.raises(shmlink.InvalidArgumentError, match="ring_size"):
        shmlink.Client("shm:/tmp/x.sock", ring_size=1000)


def test_bind_errors(serve, sockdir):
    addrs = serve(reverse)
    with pytest.raises(shmlink.BindError):
        shmlink.Server([addrs["shm"]])
    with pytest.raises(TypeError):
        shmlink.Server(42)


def test_serve_twice_and_bad_handler(sockdir):
    s = shmlink.Server(f"unix:{sockdir}/once.sock")
    with pytest.raises(TypeError):
        s.serve(42)
    s.stop()
    s.serve(reverse)  # stopped before: returns at once
    with pytest.raises(shmlink.Error, match="already"):
        s.serve(reverse)


def test_wait_strategies(serve):
    addrs = serve(reverse, wait="sleep")
    for wait in ("sleep", "spin", "spin:10", "busy"):
        with shmlink.Client(addrs["shm"], wait=wait) as c:
            assert c.call(b"ab") == b"ba"


def test_server_stop_from_signal_handler(procs, sockdir):
    p = python_server(procs, [f"shm:{sockdir}/sig.sock"], "reverse")
    with shmlink.Client(p.ready_line.split()[1]) as c:
        assert c.call(b"ab") == b"ba"
    p.kill(signal.SIGTERM)
    assert p.wait(5) == 0
    assert not os.path.exists(f"{sockdir}/sig.sock")


def test_keyboard_interrupt_leaves_serve(procs, sockdir):
    p = python_server(procs, [f"unix:{sockdir}/int.sock"], "reverse")
    p.kill(signal.SIGINT)
    assert p.wait(5) == 130


def test_many_threads_share_a_client(serve):
    addrs = serve(reverse)
    errors = []
    with shmlink.Client(addrs["shm"]) as c:
        def work(i):
            try:
                for j in range(200):
                    data = f"{i}-{j}".encode()
                    assert c.call(data) == data[::-1]
            except BaseException as e:
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
    assert not errors
