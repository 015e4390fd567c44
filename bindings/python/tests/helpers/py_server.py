"""A shmlink server in its own process, for the tests.

    python py_server.py MODE ADDRESS...

MODE: `reverse` (replies with the request reversed), `hang` (never answers:
the handler blocks until the server stops), `gate` (a request `hold`
prints `holding` and blocks until a request `open`, from any session, lets
one holder through, then answers `held`; a request `fail` raises
ValueError; other requests are reversed). Prints `ready ADDR...` on stdout
once bound. SIGTERM stops it through a Python signal handler calling
Server.stop(); SIGINT raises KeyboardInterrupt out of serve().
"""

import signal
import sys
import threading

import shmlink

mode, addresses = sys.argv[1], sys.argv[2:]
server = shmlink.Server(addresses)
released = threading.Event()
gate = threading.Semaphore(0)


def reverse(req):
    return req[::-1]


def hang(req):
    print("handling", flush=True)
    released.wait()
    return b""


def gated(req):
    if req == b"hold":
        print("holding", flush=True)
        gate.acquire()
        return b"held"
    if req == b"open":
        gate.release()
    if req == b"fail":
        raise ValueError("asked to fail")
    return req[::-1]


def on_term(signum, frame):
    released.set()
    gate.release(1000)
    server.stop()


signal.signal(signal.SIGTERM, on_term)
# A process started in the background by a shell without job control (as a
# CI runner may start the tests) inherits SIGINT ignored, and Python then
# installs no KeyboardInterrupt handler: install it.
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    print("ready", *server.addresses, flush=True)
    server.serve({"reverse": reverse, "hang": hang, "gate": gated}[mode])
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("stopped", flush=True)
