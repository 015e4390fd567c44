"""The GIL is released while waiting; the asyncio forms do not block the loop
(more of them, against servers in other processes: test_asyncio.py)."""

import asyncio
import threading
import time

import pytest

import shmlink
from conftest import python_server, read_line


def test_gil_released_during_call(procs, sockdir):
    # A server in another process that never answers: the call waits its
    # whole timeout, during which another Python thread must keep running.
    p = python_server(procs, [f"shm:{sockdir}/g.sock"], "hang")
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    with shmlink.Client(p.ready_line.split()[1]) as c:
        t = threading.Thread(target=count)
        t.start()
        try:
            before = counter[0]
            with pytest.raises(shmlink.TimeoutError):
                c.call(b"x", timeout=0.5)
            during = counter[0] - before
        finally:
            stop.set()
            t.join()
    assert "handling" in read_line(p.p.stdout, 5, "the handler's start")
    # Holding the GIL for 0.5 s would have left the counter near 0
    # (a thread switch at most every 5 ms of the blocked call).
    assert during > 10_000, during


def test_in_process_server_needs_released_gil(serve):
    # The handler runs on a server thread with the GIL; the calling thread
    # waits without it, so this only completes if the GIL is released.
    addrs = serve(lambda req: req.upper())
    with shmlink.Client(addrs["shm"]) as c:
        t0 = time.monotonic()
        for _ in range(1000):
            assert c.call(b"abc") == b"ABC"
        assert time.monotonic() - t0 < 30


def test_acall_does_not_block_the_loop(serve):
    release = threading.Event()

    def handler(req):
        if req == b"wait":
            assert release.wait(10)
        return req[::-1]

    addrs = serve(handler)

    async def main():
        async with shmlink.Client(addrs["shm"]) as c:
            assert await c.acall(b"abc") == b"cba"
            task = asyncio.ensure_future(c.acall(b"wait"))
            ticks = 0
            # The loop keeps running while the call waits (on the loop: the
            # handler runs on a server thread of this process).
            while ticks < 100:
                await asyncio.sleep(0)
                ticks += 1
            assert not task.done()
            release.set()
            assert await asyncio.wait_for(task, 10) == b"tiaw"
            cid = await c.asend(b"xy")
            assert await c.arecv() == (cid, b"yx")
            with pytest.raises(shmlink.TimeoutError):
                release.clear()
                await c.acall(b"wait", timeout=0.2)
            release.set()
        c2 = await shmlink.connect_async(addrs["unix"])
        results = await asyncio.gather(*(c2.acall(bytes([i]) * 3) for i in range(20)))
        assert results == [bytes([i]) * 3 for i in range(20)]
        c2.close()

    asyncio.run(main())


def test_acall_many_clients(serve):
    addrs = serve(lambda req: req)

    async def main():
        clients = [shmlink.Client(addrs["shm"]) for _ in range(4)]
        try:
            out = await asyncio.gather(*(c.acall(b"%d" % i) for i, c in enumerate(clients)))
            assert out == [b"0", b"1", b"2", b"3"]
        finally:
            for c in clients:
                c.close()

    asyncio.run(main())
