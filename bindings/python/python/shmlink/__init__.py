"""shmlink: fast, safe request/response calls between processes on one
Linux host, over shared memory (``shm:PATH``), Unix sockets (``unix:PATH``)
or TCP (``tcp:HOST:PORT``) behind one API.

>>> import shmlink
>>> with shmlink.Client("shm:/tmp/demo.sock") as c:     # doctest: +SKIP
...     c.call(b"hello")

Every blocking operation releases the GIL. ``Client.acall`` is the
``asyncio`` form of ``Client.call``: it runs on the event loop itself (the
loop watches the client's descriptor), with no thread per call.
"""

import asyncio as _asyncio

from . import _aio, _shmlink
from ._errors import (
    BindError,
    ClosedError,
    ConnectError,
    Error,
    InvalidArgumentError,
    MessageTooLargeError,
    ProtocolError,
    RemoteError,
    TimeoutError,
)

__all__ = [
    "Client",
    "Server",
    "Worker",
    "Error",
    "ConnectError",
    "TimeoutError",
    "ClosedError",
    "RemoteError",
    "ProtocolError",
    "MessageTooLargeError",
    "InvalidArgumentError",
    "BindError",
    "CODE_CLOSED",
    "CODE_HANDLER_PANICKED",
    "CODE_RESPONSE_TOO_LARGE",
    "CODE_HANDLER_EXCEPTION",
    "CODE_PROTOCOL_ERROR",
    "CODE_SHUTTING_DOWN",
    "CODE_NOT_ANSWERED",
    "CODE_NO_WORKER",
    "CODE_QUEUE_FULL",
    "CODE_WORKER_DIED",
    "CODE_WORKER_TIMEOUT",
    "CODE_POOL_STOPPING",
    "CODE_NO_WORKERS_START",
    "CODE_UNKNOWN_COMMAND",
    "connect_async",
    "release_kept_mappings",
]

__version__ = "0.1.0"

# The reserved codes (the registry: crates/wire/src/codes.rs).
CODE_CLOSED = _shmlink.CODE_CLOSED
CODE_HANDLER_PANICKED = _shmlink.CODE_HANDLER_PANICKED
CODE_RESPONSE_TOO_LARGE = _shmlink.CODE_RESPONSE_TOO_LARGE
CODE_HANDLER_EXCEPTION = _shmlink.CODE_HANDLER_EXCEPTION
CODE_PROTOCOL_ERROR = _shmlink.CODE_PROTOCOL_ERROR
CODE_SHUTTING_DOWN = _shmlink.CODE_SHUTTING_DOWN
CODE_NOT_ANSWERED = _shmlink.CODE_NOT_ANSWERED
CODE_NO_WORKER = _shmlink.CODE_NO_WORKER
CODE_QUEUE_FULL = _shmlink.CODE_QUEUE_FULL
CODE_WORKER_DIED = _shmlink.CODE_WORKER_DIED
CODE_WORKER_TIMEOUT = _shmlink.CODE_WORKER_TIMEOUT
CODE_POOL_STOPPING = _shmlink.CODE_POOL_STOPPING
CODE_NO_WORKERS_START = _shmlink.CODE_NO_WORKERS_START
CODE_UNKNOWN_COMMAND = _shmlink.CODE_UNKNOWN_COMMAND
release_kept_mappings = _shmlink.release_kept_mappings


class Client(_shmlink.Client):
    __doc__ = _shmlink.Client.__doc__

    async def acall(self, data, timeout=None):
        """``await client.acall(data)``: ``call`` on the running event loop,
        with no thread: the request is sent at once (``send``: no wait for
        the answer, though a full ring may make it wait briefly for room)
        and the loop is told when the answer comes (it watches the client's
        ``fileno()``). Many ``acall``s may wait at once on one client: they
        are pipelined on its session and each gets its own answer.

        ``timeout`` (seconds) overrides the client's for this call; past it
        TimeoutError is raised. Cancelling the awaiting task (or
        ``asyncio.wait_for``/``asyncio.timeout`` expiring) abandons the call:
        its answer is dropped when it comes and the session stays usable.
        Raises RemoteError (the handler failed), ClosedError (the session
        ended, e.g. the server died, or the client was closed),
        MessageTooLargeError."""
        return await _aio.acall(self, data, timeout)

    async def asend(self, data):
        """The ``asyncio`` form of ``send``: sends at once (no thread) and
        returns the call id; get the answer with ``arecv``."""
        return self.send(data)

    async def arecv(self, timeout=None):
        """The ``asyncio`` form of ``recv``: ``(call_id, response)`` of the
        next answer to a call made with ``send``/``asend``, in arrival order,
        waited for on the running loop (no thread). An error reply raises
        RemoteError whose ``.call_id`` names the call. ``timeout`` defaults
        to the client's; cancelling leaves the answer for the next
        ``arecv``."""
        return await _aio.arecv(self, timeout)

    async def anotify(self, data):
        """The ``asyncio`` form of ``notify``: sends at once, no thread."""
        self.notify(data)

    def close(self):
        """Closes the session (sends a goodbye if it can without waiting).
        Idempotent; later calls raise ClosedError. Pending ``acall``s and
        ``arecv``s raise ClosedError; the event loop stops watching the
        client."""
        _aio.detach(
            self, ClosedError(f"client for {self.address} is closed: close() was called")
        )
        super().close()

    def __exit__(self, *exc):
        self.close()
        return False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()
        return False


async def connect_async(address, **options):
    """Connects a ``Client`` without blocking the event loop: the handshake
    (which waits for the server) runs in the loop's default executor, as
    does opening the client's readiness descriptor; the calls then run on
    the loop itself."""

    def connect():
        c = Client(address, **options)
        try:
            c.fileno()  # over shm: hands the server its eventfd now, off the loop
        except Error:
            pass  # a server of an older build: acall will say so
        return c

    loop = _asyncio.get_running_loop()
    return await loop.run_in_executor(None, connect)


class Server(_shmlink.Server):
    __doc__ = _shmlink.Server.__doc__

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class Worker(_shmlink.Worker):
    __doc__ = _shmlink.Worker.__doc__
