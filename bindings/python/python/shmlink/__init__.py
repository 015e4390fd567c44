"""shmlink: fast, safe request/response calls between processes on one
Linux host, over shared memory (``shm:PATH``), Unix sockets (``unix:PATH``)
or TCP (``tcp:HOST:PORT``) behind one API.

>>> import shmlink
>>> with shmlink.Client("shm:/tmp/demo.sock") as c:     # doctest: +SKIP
...     c.call(b"hello")

Every blocking operation releases the GIL. ``Client.acall`` is the
``asyncio`` form of ``Client.call``.
"""

import asyncio as _asyncio
import functools as _functools

from . import _shmlink
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
    "CODE_HANDLER_EXCEPTION",
    "CODE_HANDLER_PANICKED",
    "CODE_RESPONSE_TOO_LARGE",
    "CODE_NOT_ANSWERED",
    "connect_async",
    "release_kept_mappings",
]

__version__ = "0.1.0"

CODE_HANDLER_EXCEPTION = _shmlink.CODE_HANDLER_EXCEPTION
CODE_HANDLER_PANICKED = _shmlink.CODE_HANDLER_PANICKED
CODE_RESPONSE_TOO_LARGE = _shmlink.CODE_RESPONSE_TOO_LARGE
CODE_NOT_ANSWERED = _shmlink.CODE_NOT_ANSWERED
release_kept_mappings = _shmlink.release_kept_mappings


class Client(_shmlink.Client):
    __doc__ = _shmlink.Client.__doc__

    async def acall(self, data, timeout=None):
        """``await client.acall(data)``: ``call`` run in the event loop's
        default executor, so the loop keeps running while the call waits.
        Concurrent ``acall``s on one client are serialized (one session);
        open one client per concurrent caller for parallel calls. Cancelling
        the awaiting task does not withdraw the call: it completes or times
        out in its thread (the client's timeout bounds it) and its response
        is dropped."""
        loop = _asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, _functools.partial(self.call, data, timeout)
        )

    async def asend(self, data):
        """The ``asyncio`` form of ``send``."""
        loop = _asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.send, data)

    async def arecv(self, timeout=None):
        """The ``asyncio`` form of ``recv``."""
        loop = _asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, _functools.partial(self.recv, timeout)
        )

    async def anotify(self, data):
        """The ``asyncio`` form of ``notify``."""
        loop = _asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.notify, data)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()
        return False


async def connect_async(address, **options):
    """Connects a ``Client`` without blocking the event loop."""
    loop = _asyncio.get_running_loop()
    return await loop.run_in_executor(
        None, _functools.partial(Client, address, **options)
    )


class Server(_shmlink.Server):
    __doc__ = _shmlink.Server.__doc__

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class Worker(_shmlink.Worker):
    __doc__ = _shmlink.Worker.__doc__
