#!/usr/bin/env python3
"""The wait matrix of the Python binding: 64 B and 2 KiB calls from the
Python client to the C++ example daemon over shm, with each wait strategy
on both sides (sleep, spin, busy; `spin` is the adaptive default), on a
quiet machine and beside a CPU hog (`shmlink __hog`, unpinned), and per
cell the default's p50 over the best strategy's.

    python wait_matrix.py [--seconds 0.3] [--rounds 3] [--markdown FILE]

One daemon per strategy runs for the whole matrix; rounds interleave every
(size, strategy) point so that drifting load weighs on all alike, and each
figure is the median p50 across rounds.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import shmlink

from bench import ROOT, start, stop_all

sys.path.insert(0, str(ROOT / "bench/common"))
from placement import NOTE, at_placement  # noqa: E402
import goals  # noqa: E402
import scope  # noqa: E402

WAITS = ("sleep", "spin", "busy")
DEFAULT = "spin"
SIZES = (64, 2048)
LOADS = ("quiet", "busy")
GOAL = 1.2


def p50_us(address, payload, seconds, wait):
    """The median round trip of sequential calls, in µs."""
    with shmlink.Client(address, wait=wait) as c:
        expect = (len(payload) + 7) // 8
        for _ in range(1000):
            c.call(payload)
        lat = []
        call, clock = c.call, time.perf_counter_ns
        end = clock() + int(seconds * 1e9)
        while True:
            t0 = clock()
            r = call(payload)
            t1 = clock()
            lat.append(t1 - t0)
            if len(r) not in (expect, len(payload) // 8):
                raise SystemExit(f"wrong shm response length {len(r)}")
            if t1 >= end:
                break
        lat.sort()
        return lat[len(lat) // 2] / 1e3


def cpu_seconds(pid):
    """CPU time of the one thread of process `pid` so far, in seconds (its
    schedstat: ns, where /proc/PID/stat counts 10 ms ticks)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def measure(shm_addrs, seconds, rounds):
    """({(load, size, wait): median p50 µs}, {(size, wait): median hog CPU
    %}), the hog started for the busy load: how much of a CPU the hog got
    while each busy point ran, what the strategy left to other work."""
    runs, hog_runs = {}, {}
    for load in LOADS:
        hog = None
        if load == "busy":
            hog = subprocess.Popen([str(ROOT / "target/release/shmlink"), "__hog"])
        try:
            for _ in range(rounds):
                for size in SIZES:
                    payload = os.urandom(size)
                    for w in WAITS:
                        before = (time.monotonic(), cpu_seconds(hog.pid)) if hog else None
                        p = p50_us(shm_addrs[w], payload, seconds, w)
                        runs.setdefault((load, size, w), []).append(p)
                        if before:
                            wall = time.monotonic() - before[0]
                            got = cpu_seconds(hog.pid) - before[1]
                            hog_runs.setdefault((size, w), []).append(100 * got / wall)
        finally:
            if hog:
                hog.kill()
                hog.wait()
    med = {k: statistics.median(v) for k, v in runs.items()}
    return med, {k: statistics.median(v) for k, v in hog_runs.items()}


def table(cells, hog):
    """The matrix rows and its two check rows. Beside the hog, a cell also
    gives the default ÷ the best strategy at the placement the scheduler
    gave the default (bench/common/placement.py)."""
    rows = ["| load | size | " + " | ".join(f"{w} p50 µs" for w in WAITS)
            + " | best | default ÷ best | hog CPU %: " + " / ".join(WAITS)
            + " | default ÷ best at its placement |",
            "| --- | --- | " + " | ".join("---:" for _ in WAITS) + " | --- | ---: | ---: | ---: |"]
    worst, worst_placed = None, None
    for load in LOADS:
        for size in SIZES:
            p = {w: cells[(load, size, w)] for w in WAITS}
            best = min(WAITS, key=lambda w: p[w])
            ratio = p[DEFAULT] / p[best]
            if worst is None or ratio > worst[0]:
                worst = (ratio, f"{load} {size} B")
            hogs, placed = "-", ratio
            if load == "busy":
                h = {w: hog[(size, w)] for w in WAITS}
                hogs = " / ".join(f"{h[w]:.0f}" for w in WAITS)
                placed = at_placement(p, h, DEFAULT)
            if worst_placed is None or placed > worst_placed[0]:
                worst_placed = (placed, f"{load} {size} B")
            rows.append(f"| {load} | {size} B | " + " | ".join(f"{p[w]:.2f}" for w in WAITS)
                        + f" | {best} | {ratio:.2f} | {hogs} | {placed:.2f} |")
    checks, states = [], []
    for what, (value, at) in [("best strategy's p50", worst),
                              ("best strategy's p50 at its placement (the bound)", worst_placed)]:
        states.append(value <= GOAL)
        checks.append(f"| Python, shm spin (default) p50 ÷ {what}, every cell (worst) "
                      f"| {value:.2f} | {at} | ≤ {GOAL:.2f} | {goals.cell(states[-1])} |")
    return rows, checks + ["", goals.summary(states)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="per point and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--daemon", default=str(ROOT / "target/examples/cpp-daemon/shmlink-daemon"))
    ap.add_argument("--markdown", default=None, help="also write the figures as markdown to FILE")
    args = ap.parse_args()
    scope.enter(str(ROOT / "target/release/shmlink"))
    if not os.access(args.daemon, os.X_OK):
        raise SystemExit(f"{args.daemon} is not built (make examples)")
    d = tempfile.mkdtemp(prefix="shlmatrix")
    procs = []
    try:
        addrs = {}
        for w in WAITS:
            addrs[w] = f"shm:{d}/{w}.sock"
            p, _ = start([args.daemon, "--wait", w, addrs[w]], "listening on", "stdout")
            procs.append(p)
        cells, hog = measure(addrs, args.seconds, args.rounds)
    finally:
        stop_all(procs)
        shutil.rmtree(d, ignore_errors=True)
    rows, checks = table(cells, hog)
    text = "\n".join([
        "# Python binding: the wait matrix",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}",
        "- server: the C++ example daemon, one per strategy (`--wait`), the client with the same",
        f"- {args.rounds} interleaved rounds of {args.seconds:g} s per point; median p50 across rounds;"
        " busy: `shmlink __hog` spinning, unpinned",
        "- command: `bindings/python/wait_matrix.py` (in `ci/main.sh --full`)",
        "",
        "## Wait matrix",
        "",
        *rows,
        "",
        NOTE + " Why: `busy` keeps both sides runnable, so they spread over both CPUs"
        " and the hog shares one; a side that sleeps (`sleep`, and the default once its CPU"
        " is found contended) is woken next to its peer. Here the server is the C++ daemon.",
        "",
        "| check | value | at | goal | result |",
        "| --- | ---: | --- | ---: | --- |",
        *checks,
        "",
    ])
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
