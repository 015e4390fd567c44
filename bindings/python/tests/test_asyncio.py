"""The asyncio forms on the event loop itself: many calls at once on one
client with no thread, cancellation and timeouts that leave the session
usable, a server killed mid-call, over shm and unix, against servers in
other processes. Every wait is on a condition, with a deadline."""

import asyncio
import gc
import struct
import threading

import pytest

import shmlink
from conftest import python_server, read_line

TRANSPORTS = ["shm", "unix"]
# The tests against `shmlink echo`, which listens on tcp too, also run there.
ALL_TRANSPORTS = ["shm", "unix", "tcp"]


def os_threads():
    """The kernel's count of this process's threads."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line in /proc/self/status")


def run(coro, deadline=60):
    """Runs a test's coroutine with an overall deadline: a hang fails."""
    asyncio.run(asyncio.wait_for(coro, deadline))


def registered(loop, fd):
    """Whether the loop's selector watches `fd`."""
    try:
        loop._selector.get_key(fd)  # noqa: SLF001 - the test looks inside asyncio
        return True
    except KeyError:
        return False


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_ten_thousand_acalls_at_once_no_threads(echo, transport):
    # `shmlink echo` answers with the first len/8 bytes: 32-byte requests
    # of one 4-byte number repeated come back as that number.
    n = 10_000
    requests = [struct.pack("<I", i) * 8 for i in range(n)]

    async def main():
        with shmlink.Client(echo[transport]) as c:
            assert await c.acall(b"warm" * 8) == b"warm"
            base = (threading.active_count(), os_threads())
            done = [0]
            tasks = [asyncio.ensure_future(c.acall(r)) for r in requests]
            for t in tasks:
                t.add_done_callback(lambda _t: done.__setitem__(0, done[0] + 1))
            samples = []
            most_in_flight = 0
            while done[0] < n:
                samples.append((threading.active_count(), os_threads()))
                most_in_flight = max(most_in_flight, c.in_flight)
                await asyncio.sleep(0)  # a yield to the loop, not a timed wait
            answers = [t.result() for t in tasks]
            assert answers == [r[:4] for r in requests], "an answer went to the wrong call"
            assert len(samples) >= 2, samples
            assert set(samples) == {base}, f"threads changed from {base}: {sorted(set(samples))}"
            # The calls really were on the session at once.
            assert most_in_flight >= n // 2, most_in_flight
            assert c.in_flight == 0
            assert (threading.active_count(), os_threads()) == base

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelled_and_timed_out_acalls_leave_the_session_usable(procs, sockdir, transport):
    address = f"{transport}:{sockdir}/g.sock"
    p = python_server(procs, [address], "gate")

    async def main():
        opener = shmlink.Client(address)
        with shmlink.Client(address) as c:
            assert await c.acall(b"abc") == b"cba"
            # (cancel the task, asyncio.wait_for's timeout, acall's own timeout)
            for how in ("cancel", "wait_for", "timeout"):
                timeout = 0.2 if how == "timeout" else None
                task = asyncio.ensure_future(c.acall(b"hold", timeout=timeout))
                await asyncio.sleep(0)  # the task's first step sends the call
                assert c.in_flight == 1
                assert "holding" in read_line(p.p.stdout, 10, "the server holding the call")
                if how == "cancel":
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                elif how == "wait_for":
                    with pytest.raises(asyncio.TimeoutError):
                        await asyncio.wait_for(task, 0.2)
                else:
                    with pytest.raises(shmlink.TimeoutError) as e:
                        await task
                    assert "abandoned" in str(e.value)
                # Abandoned: nothing in flight, the session usable.
                assert c.in_flight == 0, how
                assert c.is_connected
                # The server answers the abandoned call late (`held`), then
                # the next one: which must get its own answer.
                assert opener.call(b"open") == b"nepo"
                assert await c.acall(b"after " + how.encode()) == (b"after " + how.encode())[::-1]
                results = await asyncio.gather(*(c.acall(b"%d-x" % i) for i in range(50)))
                assert results == [(b"%d-x" % i)[::-1] for i in range(50)]
                assert c.in_flight == 0
        opener.close()

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_clients_timeout_bounds_acall_and_arecv(procs, sockdir, transport):
    address = f"{transport}:{sockdir}/t.sock"
    p = python_server(procs, [address], "gate")

    async def main():
        opener = shmlink.Client(address)
        with shmlink.Client(address, timeout=0.3) as c:
            assert c.timeout == pytest.approx(0.3)
            with pytest.raises(shmlink.TimeoutError, match="abandoned"):
                await c.acall(b"hold")
            assert c.in_flight == 0
            assert "holding" in read_line(p.p.stdout, 10, "the server holding the call")
            cid = await c.asend(b"queued")  # answered once the hold is let go
            with pytest.raises(shmlink.TimeoutError, match="next arecv"):
                await c.arecv()
            assert opener.call(b"open") == b"nepo"
            assert await c.arecv(timeout=10) == (cid, b"deueuq")
            assert await c.acall(b"abc") == b"cba"
            # A failed handler: RemoteError, raised by acall and arecv.
            with pytest.raises(shmlink.RemoteError, match="asked to fail") as e:
                await c.acall(b"fail")
            assert e.value.code == shmlink.CODE_HANDLER_EXCEPTION
            cid = await c.asend(b"fail")
            with pytest.raises(shmlink.RemoteError) as e:
                await c.arecv()
            assert e.value.call_id == cid
            assert await c.acall(b"abc") == b"cba"
            assert c.in_flight == 0
        opener.close()

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_killed_mid_acall_raises(procs, sockdir, transport):
    address = f"{transport}:{sockdir}/h.sock"
    p = python_server(procs, [address], "hang")

    async def main():
        c = shmlink.Client(address)
        loop = asyncio.get_running_loop()
        calls = [asyncio.ensure_future(c.acall(b"x%d" % i, timeout=30)) for i in range(3)]
        await asyncio.sleep(0)
        sent = await c.asend(b"pipelined")
        assert sent > 0
        receiving = asyncio.ensure_future(c.arecv(timeout=30))
        assert "handling" in read_line(p.p.stdout, 10, "the server handling the call")
        fd = c.__dict__["_aio"].fd
        p.kill()  # SIGKILL
        # Every waiter gets the error well before its 30 s timeout.
        for t in calls + [receiving]:
            with pytest.raises(shmlink.ClosedError):
                await asyncio.wait_for(t, 10)
        assert not c.is_connected
        with pytest.raises(shmlink.ClosedError):
            await c.acall(b"again")
        c.close()
        assert not registered(loop, fd)

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_close_fails_waiting_acalls_and_removes_the_reader(procs, sockdir, transport):
    address = f"{transport}:{sockdir}/c.sock"
    p = python_server(procs, [address], "hang")

    async def main():
        c = shmlink.Client(address)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(c.acall(b"x"))
        await asyncio.sleep(0)
        fd = c.__dict__["_aio"].fd
        assert registered(loop, fd)
        assert "handling" in read_line(p.p.stdout, 10, "the server handling the call")
        c.close()
        with pytest.raises(shmlink.ClosedError, match="close"):
            await asyncio.wait_for(task, 10)
        assert not registered(loop, fd)
        with pytest.raises(shmlink.ClosedError):
            await c.acall(b"y")

    run(main())


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_asend_arecv_and_acall_mix(echo, transport):
    async def main():
        async with shmlink.Client(echo[transport]) as c:
            with pytest.raises(shmlink.Error, match="no call is in flight"):
                await c.arecv()
            ids = [await c.asend(b"%08d" % i * 8) for i in range(3)]
            # acalls in between get their own answers; arecv gets the others,
            # in arrival order, with their ids.
            got = await asyncio.gather(c.acall(b"calledXX" * 8), c.arecv(), c.arecv(), c.arecv())
            assert got[0] == b"calledXX"
            assert got[1:] == [(ids[i], b"%08d" % i) for i in range(3)]
            await c.anotify(b"one-way")
            # A blocking call on the loop's thread while acalls wait: it
            # takes their answers off the session, and they still get them.
            waiting = [asyncio.ensure_future(c.acall(b"w%07d" % i * 8)) for i in range(20)]
            await asyncio.sleep(0)
            assert c.call(b"blocking" * 8) == b"blocking"
            assert await asyncio.wait_for(asyncio.gather(*waiting), 10) == [
                b"w%07d" % i for i in range(20)
            ]
            # The same from another thread, while the loop waits.
            waiting = [asyncio.ensure_future(c.acall(b"t%07d" % i * 8)) for i in range(20)]
            await asyncio.sleep(0)
            loop = asyncio.get_running_loop()
            assert await loop.run_in_executor(None, c.call, b"threaded" * 8) == b"threaded"
            assert await asyncio.wait_for(asyncio.gather(*waiting), 10) == [
                b"t%07d" % i for i in range(20)
            ]
            assert c.in_flight == 0

    run(main())


def test_acall_one_client_on_two_loops_in_turn(echo):
    # asyncio.run twice: the client moves to the second loop once idle.
    c = shmlink.Client(echo["shm"])

    async def one(tag):
        return await c.acall(tag * 8)

    assert asyncio.run(one(b"firstXXX")) == b"firstXXX"
    assert asyncio.run(one(b"secondXX")) == b"secondXX"
    c.close()


def test_client_dropped_without_close_stops_being_watched(echo):
    # Over unix the reader stays registered on an idle client (its socket
    # is not readable); dropping the client must still remove it.
    async def main():
        loop = asyncio.get_running_loop()
        c = shmlink.Client(echo["unix"])
        assert await c.acall(b"12345678") == b"1"
        fd = c.__dict__["_aio"].fd
        assert registered(loop, fd)
        del c
        gc.collect()
        assert not registered(loop, fd)
        # A new client (likely given the same descriptor numbers) works.
        async with shmlink.Client(echo["unix"]) as c2:
            assert await c2.acall(b"abcdefgh") == b"a"

    run(main())
