#!/usr/bin/env python3
"""asyncio against blocking calls in the Python binding, over shm, in one
run: `await client.acall()` of 64 B one at a time (p50) beside the
blocking `client.call()` with the sleep wait (p50; a loop's client sleeps
too, in the event loop's epoll, rather than spinning), and pipelined
throughput: N `acall`s in flight at once on one client (N tasks each
calling in a loop), with blocking `send`/`recv` keeping N in flight for
reference.

    python async_bench.py [--size 64] [--seconds 0.5] [--rounds 3] [--in-flight 1000] [--markdown FILE]

The server is the C++ example daemon with `--wait sleep` (or --daemon
PATH; without it `shmlink echo --wait sleep`, labelled as such). Rounds
interleave the four measurements; each figure is the median across rounds.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import shmlink

from bench import ROOT, start, stop_all
from wait_matrix import p50_us

WAIT = "sleep"


def check(reply, payload):
    if len(reply) not in (len(payload) // 8, (len(payload) + 7) // 8):
        raise SystemExit(f"wrong response length {len(reply)} for a {len(payload)} B request")


async def acall_p50_us(address, payload, seconds):
    """The median of sequential `await acall()`s, in µs."""
    async with shmlink.Client(address, wait=WAIT) as c:
        acall = c.acall
        for _ in range(1000):
            await acall(payload)
        lat = []
        clock = time.perf_counter_ns
        end = clock() + int(seconds * 1e9)
        while True:
            t0 = clock()
            r = await acall(payload)
            t1 = clock()
            lat.append(t1 - t0)
            if t1 >= end:
                break
        check(r, payload)
        lat.sort()
        return lat[len(lat) // 2] / 1e3


async def acall_pipelined(address, payload, seconds, in_flight):
    """calls/s with `in_flight` tasks each awaiting acall() in a loop on one
    client (so about that many calls are on the session at once)."""
    async with shmlink.Client(address, wait=WAIT) as c:
        acall = c.acall
        done = 0
        stop = False

        async def caller():
            nonlocal done
            while not stop:
                r = await acall(payload)
                done += 1
            check(r, payload)

        tasks = [asyncio.ensure_future(caller()) for _ in range(in_flight)]
        # Warm up for a tenth of the time, then count.
        await asyncio.sleep(seconds / 10)
        n0, t0 = done, time.perf_counter()
        await asyncio.sleep(seconds)
        n1, t1 = done, time.perf_counter()
        stop = True
        await asyncio.gather(*tasks)
        if c.in_flight:
            raise SystemExit(f"{c.in_flight} calls left in flight")
        return (n1 - n0) / (t1 - t0)


def blocking_pipelined(address, payload, seconds, in_flight):
    """calls/s of blocking send/recv keeping `in_flight` calls on the session."""
    with shmlink.Client(address, wait=WAIT) as c:
        send, recv = c.send, c.recv
        for _ in range(in_flight):
            send(payload)
        n = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            for _ in range(256):
                _, r = recv()
                send(payload)
            n += 256
            now = time.perf_counter()
            if now >= end:
                break
        for _ in range(in_flight):
            recv()
        check(r, payload)
        return n / (now - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=0.5, help="per measurement and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--in-flight", type=int, default=1000, help="calls in flight when pipelined")
    ap.add_argument("--daemon", default=str(ROOT / "target/examples/cpp-daemon/shmlink-daemon"))
    ap.add_argument("--shmlink", default=str(ROOT / "target/release/shmlink"))
    ap.add_argument("--markdown", default=None, help="also write the figures as markdown to FILE")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="shlasync")
    address = f"shm:{d}/a.sock"
    procs = []
    try:
        if os.access(args.daemon, os.X_OK):
            p, _ = start([args.daemon, "--wait", WAIT, address], "listening on", "stdout")
            peer = f"the C++ example daemon, `--wait {WAIT}`"
        elif os.access(args.shmlink, os.X_OK):
            p, _ = start([args.shmlink, "echo", "--wait", WAIT, "--listen", address], "ready", "stderr")
            peer = f"`shmlink echo --wait {WAIT}` (the C++ daemon is not built: make examples)"
        else:
            raise SystemExit(f"neither {args.daemon} nor {args.shmlink} is built")
        procs.append(p)
        payload = os.urandom(args.size)
        runs = {k: [] for k in ("call", "acall", "apipe", "bpipe")}
        for _ in range(args.rounds):
            runs["call"].append(p50_us(address, payload, args.seconds, WAIT))
            runs["acall"].append(asyncio.run(acall_p50_us(address, payload, args.seconds)))
            runs["apipe"].append(asyncio.run(
                acall_pipelined(address, payload, args.seconds, args.in_flight)))
            runs["bpipe"].append(blocking_pipelined(address, payload, args.seconds, args.in_flight))
    finally:
        stop_all(procs)
        shutil.rmtree(d, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["acall"] / med["call"]
    load = os.getloadavg()

    def rounds(k, fmt):
        return ", ".join(fmt.format(x) for x in runs[k])

    rows = [
        "| measure | median | rounds |",
        "| --- | ---: | --- |",
        f"| blocking `call()`, wait={WAIT}, one at a time: p50 µs | {med['call']:.2f} "
        f"| {rounds('call', '{:.2f}')} |",
        f"| `await acall()`, one at a time: p50 µs | {med['acall']:.2f} | {rounds('acall', '{:.2f}')} |",
        f"| acall p50 ÷ blocking call p50 | {ratio:.2f} | |",
        f"| `acall()`s, {args.in_flight} in flight on one client: calls/s | {med['apipe']:,.0f} "
        f"| {rounds('apipe', '{:,.0f}')} |",
        f"| blocking `send`/`recv`, {args.in_flight} in flight (reference): calls/s "
        f"| {med['bpipe']:,.0f} | {rounds('bpipe', '{:,.0f}')} |",
    ]
    text = "\n".join([
        "# Python binding: asyncio on the event loop against blocking calls",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {os.cpu_count()} CPUs; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f};"
        f" Python {sys.version.split()[0]}",
        f"- server: {peer}; clients with wait={WAIT}; shm; {args.size} B requests",
        f"- {args.rounds} interleaved rounds of {args.seconds:g} s per measurement; median across rounds",
        "- acall runs on the event loop (no thread per call): the loop waits in epoll on the"
        " client's descriptor, which the server's eventfd ring makes readable",
        "- command: `bindings/python/async_bench.py`",
        "",
        *rows,
        "",
    ])
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
