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


def measure(shm_addrs, seconds, rounds):
    """{(load, size, wait): median p50 µs}, hog started for the busy load."""
    runs = {}
    for load in LOADS:
        hog = None
        if load == "busy":
            hog = subprocess.Popen([str(ROOT / "target/release/shmlink"), "__hog"])
        try:
            for _ in range(rounds):
                for size in SIZES:
                    payload = os.urandom(size)
                    for w in WAITS:
                        p = p50_us(shm_addrs[w], payload, seconds, w)
                        runs.setdefault((load, size, w), []).append(p)
        finally:
            if hog:
                hog.kill()
                hog.wait()
    return {k: statistics.median(v) for k, v in runs.items()}


def table(cells):
    rows = ["| load | size | " + " | ".join(f"{w} p50 µs" for w in WAITS)
            + " | best | default ÷ best |",
            "| --- | --- | " + " | ".join("---:" for _ in WAITS) + " | --- | ---: |"]
    worst = None
    for load in LOADS:
        for size in SIZES:
            p = {w: cells[(load, size, w)] for w in WAITS}
            best = min(WAITS, key=lambda w: p[w])
            ratio = p[DEFAULT] / p[best]
            if worst is None or ratio > worst[0]:
                worst = (ratio, f"{load} {size} B")
            rows.append(f"| {load} | {size} B | " + " | ".join(f"{p[w]:.2f}" for w in WAITS)
                        + f" | {best} | {ratio:.2f} |")
    verdict = "PASS" if worst[0] <= GOAL else "MISS"
    goal = (f"| Python, shm spin (default) p50 ÷ best strategy's p50, every cell (worst) "
            f"| {worst[0]:.2f} | {worst[1]} | ≤ {GOAL:.2f} | {verdict} |")
    return rows, goal


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="per point and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--daemon", default=str(ROOT / "target/examples/cpp-daemon/shmlink-daemon"))
    ap.add_argument("--markdown", default=None, help="also write the figures as markdown to FILE")
    args = ap.parse_args()
    if not os.access(args.daemon, os.X_OK):
        raise SystemExit(f"{args.daemon} is not built (make examples)")
    d = tempfile.mkdtemp(prefix="shlmatrix", dir="/tmp")
    procs = []
    try:
        addrs = {}
        for w in WAITS:
            addrs[w] = f"shm:{d}/{w}.sock"
            p, _ = start([args.daemon, "--wait", w, addrs[w]], "listening on", "stdout")
            procs.append(p)
        cells = measure(addrs, args.seconds, args.rounds)
    finally:
        stop_all(procs)
        shutil.rmtree(d, ignore_errors=True)
    rows, goal = table(cells)
    text = "\n".join([
        "# Python binding: the wait matrix",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}",
        "- server: the C++ example daemon, one per strategy (`--wait`), the client with the same",
        f"- {args.rounds} interleaved rounds of {args.seconds:g} s per point; median p50 across rounds;"
        " busy: `shmlink __hog` spinning, unpinned",
        "- command: `bindings/python/wait_matrix.py` (in `ci/main.sh`)",
        "",
        "## Wait matrix",
        "",
        *rows,
        "",
        "| check | value | at | goal | result |",
        "| --- | ---: | --- | ---: | --- |",
        goal,
        "",
    ])
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
