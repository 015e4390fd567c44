#!/usr/bin/env python3
"""Python client, 2 KiB calls: shmlink over shm against Python's own `socket`
module over a Unix socket with 4-byte length framing, to the same server.

    python bench.py [--size 2048] [--seconds 2] [--rounds 3] [--wait spin]

The server is the C++ example daemon (target/examples/cpp-daemon/
shmlink-daemon, or --daemon PATH), listening on shm and on a raw Unix
socket (--raw-unix): one process, the same work behind both. Without the
daemon, `shmlink echo` (target/release/shmlink) serves shm and a raw echo
listener in C-less Python serves the socket side (printed as such: that
peer is slower, so the ratio is flattering, and the goal reads "not
measured": build the daemon for the real figure). Short rounds alternate between the two so that both see the same
machine; the median round of each is reported, with the ratio of the
medians and the ratios of adjacent pairs of rounds.
"""

import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import shmlink

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/common"))
import goals  # noqa: E402
import scope  # noqa: E402


def start(argv, word, stream):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pipe = p.stdout if stream == "stdout" else p.stderr
    deadline = time.monotonic() + 20
    for line in pipe:
        if word in line:
            return p, line
        if time.monotonic() > deadline:
            break
    p.kill()
    raise SystemExit(f"{argv[0]} did not get ready: {p.stderr.read() if stream == 'stdout' else ''}")


def stop_all(procs):
    """SIGTERM to every process, then up to 10 s each to exit (SIGKILL after)."""
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def raw_echo_listener(path):
    """Fallback raw listener (Python): replies with the first len/8 bytes."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def serve_one(conn):
        with conn:
            buf = bytearray(64 << 20)
            view = memoryview(buf)
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                (n,) = struct.unpack("<I", head)
                got = 0
                while got < n:
                    k = conn.recv_into(view[got:n])
                    if k == 0:
                        return
                    got += k
                conn.sendall(struct.pack("<I", n // 8) + view[: n // 8])

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv


def bench_shm(address, payload, seconds, wait):
    with shmlink.Client(address, wait=wait) as c:
        expect = len(payload) // 8
        for _ in range(1000):
            c.call(payload)
        n = 0
        call = c.call
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            for _ in range(256):
                r = call(payload)
            n += 256
            if len(r) not in (expect, (len(payload) + 7) // 8):
                raise SystemExit(f"wrong shm response length {len(r)}")
            now = time.perf_counter()
            if now >= end:
                return n / (now - t0)


def bench_socket(path, payload, seconds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    frame = struct.pack("<I", len(payload)) + payload
    buf = bytearray(len(payload) + 4)
    view = memoryview(buf)

    def one():
        s.sendall(frame)
        got = 0
        need = 4
        while got < need:
            k = s.recv_into(view[got:], len(buf) - got)
            if k == 0:
                raise SystemExit("raw listener closed the connection")
            got += k
            if got >= 4 and need == 4:
                need = 4 + struct.unpack_from("<I", buf)[0]
        return need - 4

    with s:
        for _ in range(1000):
            one()
        n = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            for _ in range(64):
                r = one()
            n += 64
            if r not in (len(payload) // 8, (len(payload) + 7) // 8):
                raise SystemExit(f"wrong socket response length {r}")
            now = time.perf_counter()
            if now >= end:
                return n / (now - t0)


def bench_cpp(binary, address, calls):
    """calls/s of the C++ example client (its own 2048 B loop)."""
    n = max(1000, int(calls))
    out = subprocess.run([binary, address, str(n)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"{binary} failed: {out.stderr}")
    # "N calls in T s: R calls/s"
    return float(out.stdout.split(":")[1].split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=0.5, help="per round and side")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--wait", default="spin", help="client wait strategy for shm")
    ap.add_argument("--server-wait", default=None, help="the daemon's --wait (sleep, spin, busy)")
    ap.add_argument("--daemon", default=str(ROOT / "target/examples/cpp-daemon/shmlink-daemon"))
    ap.add_argument("--cpp-client", default=str(ROOT / "target/examples/cpp-client/shmlink-cpp-client"),
                    help="also run the C++ client on the same daemon, for reference")
    ap.add_argument("--shmlink", default=str(ROOT / "target/release/shmlink"))
    ap.add_argument("--markdown", default=None, help="also write the figures as markdown to FILE")
    args = ap.parse_args()
    scope.enter(args.shmlink)

    d = tempfile.mkdtemp(prefix="shlbench")
    shm_addr = f"shm:{d}/s.sock"
    raw_path = f"{d}/raw.sock"
    procs, listener = [], None
    try:
        have_daemon = os.access(args.daemon, os.X_OK)
        if have_daemon:
            wait = ["--wait", args.server_wait] if args.server_wait else []
            p, _ = start([args.daemon, *wait, "--raw-unix", raw_path, shm_addr], "listening on", "stdout")
            procs.append(p)
            peer = "C++ daemon (shm) / the same daemon's --raw-unix listener"
        else:
            if not os.access(args.shmlink, os.X_OK):
                raise SystemExit(f"neither {args.daemon} nor {args.shmlink} is built")
            p, _ = start([args.shmlink, "echo", "--listen", shm_addr], "ready", "stderr")
            procs.append(p)
            listener = raw_echo_listener(raw_path)
            peer = "shmlink echo (shm) / a Python raw echo listener (daemon not built)"
        payload = os.urandom(args.size)
        shm, sock, cpp = [], [], []
        use_cpp = procs and os.access(args.cpp_client, os.X_OK) and args.size == 2048
        for _ in range(args.rounds):
            shm.append(bench_shm(shm_addr, payload, args.seconds, args.wait))
            sock.append(bench_socket(raw_path, payload, args.seconds))
            if use_cpp and have_daemon:
                cpp.append(bench_cpp(args.cpp_client, shm_addr, shm[-1] * args.seconds))
        a, b = statistics.median(shm), statistics.median(sock)
        print(f"server: {peer}; {args.size} B requests, {args.rounds} rounds of {args.seconds:g} s "
              f"each, median round; Python {sys.version.split()[0]}")
        print(f"shmlink shm (wait={args.wait}): {a:,.0f} calls/s  (rounds: {', '.join(f'{x:,.0f}' for x in shm)})")
        print(f"socket unix + 4-byte framing: {b:,.0f} calls/s  (rounds: {', '.join(f'{x:,.0f}' for x in sock)})")
        if cpp:
            c = statistics.median(cpp)
            print(f"reference, C++ client on the same daemon (shm, 2048 B): {c:,.0f} calls/s "
                  f"(Python/C++: {a / c:.2f})")
        pairs = sorted(x / y for x, y in zip(shm, sock))
        print(f"ratio shm / socket: {a / b:.1f}x of the medians; per adjacent pair of rounds: "
              f"median {statistics.median(pairs):.1f}x, best {pairs[-1]:.1f}x (goal: >= 10x)")
        load = os.getloadavg()
        print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
              " (spinning waits need idle CPUs: a loaded machine favours --wait sleep)")
        if args.markdown:
            rows = [f"| shmlink over shm (wait={args.wait}) | {a:,.0f} |",
                    f"| Python `socket` over unix, 4-byte framing | {b:,.0f} |"]
            if cpp:
                rows.append(f"| C++ client on the same daemon (reference) | {statistics.median(cpp):,.0f} |")
            # The goal compares against the daemon's raw listener: a Python
            # echo listener in its place is a slower peer, not the baseline.
            if have_daemon:
                met, value = a / b >= 10, f"{a / b:.1f}"
            else:
                met, value = None, (f"the C++ daemon is not built ({a / b:.1f} against a Python echo"
                                    " listener instead of its raw listener): make install"
                                    " PREFIX=$PWD/target/stage && make examples PREFIX=$PWD/target/stage")
            text = "\n".join([
                "# Python binding: 2 KiB calls",
                "",
                f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
                f"- machine: {os.cpu_count()} CPUs; load average {load[0]:.2f}; Python {sys.version.split()[0]}",
                f"- server: {peer}",
                f"- {args.size} B requests; {args.rounds} rounds of {args.seconds:g} s per client, alternating;"
                " median round",
                "- command: `bindings/python/bench.py` (in `ci/main.sh --full`)",
                "",
                "## Calls/s",
                "",
                "| client | calls/s |",
                "| --- | ---: |",
                *rows,
                "",
                "## Headline",
                "",
                "| check | value | goal | result |",
                "| --- | ---: | ---: | --- |",
                f"| shmlink shm ÷ Python socket, calls/s | {value} | ≥ 10 | {goals.cell(met)} |",
                "",
                goals.summary([met]),
                "",
            ])
            Path(args.markdown).write_text(text)
    finally:
        if listener:
            listener.close()
        stop_all(procs)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
