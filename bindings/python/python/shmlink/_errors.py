"""Exception classes of shmlink, raised by the native module."""

import builtins

__all__ = [
    "Error",
    "ConnectError",
    "TimeoutError",
    "ClosedError",
    "RemoteError",
    "ProtocolError",
    "MessageTooLargeError",
    "InvalidArgumentError",
    "BindError",
]


class Error(Exception):
    """Base class of every shmlink error."""


class ConnectError(Error, builtins.ConnectionError):
    """The session could not be set up: no server at the address, no
    permission on its socket file, or the server refused the session (the
    message carries its reason)."""


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - mirrors the other bindings
    """An operation did not complete in time. A call that timed out before
    its request started streaming leaves the session usable; its late
    response is discarded."""


class ClosedError(Error, builtins.ConnectionError):
    """The session is closed: closed locally, or the peer died or closed
    it. Connect again."""


class RemoteError(Error):
    """The handler on the other side failed.

    Attributes: ``code`` (int), ``message`` (the handler's message) and
    ``call_id`` (for errors from ``Client.recv``, ``arecv``, ``acall`` and
    ``try_recv``, else None)."""

    code: int = 0
    message: str = ""
    call_id = None

    def __init__(self, text, code=None, message=None, call_id=None):
        super().__init__(text)
        if code is not None:
            self.code = code
        if message is not None:
            self.message = message
        if call_id is not None:
            self.call_id = call_id


class ProtocolError(Error):
    """The peer broke the protocol; the session is closed."""


class MessageTooLargeError(Error, builtins.ValueError):
    """A message is larger than the maximum message size; nothing was sent
    and the session stays usable."""


class InvalidArgumentError(Error, builtins.ValueError):
    """An address or option is invalid (the message says which and why)."""


class BindError(Error, builtins.OSError):
    """A server could not listen on an address."""
