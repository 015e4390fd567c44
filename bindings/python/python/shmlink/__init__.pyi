from typing import Any, Optional, Tuple

from . import _shmlink
from ._errors import (
    BindError as BindError,
    ClosedError as ClosedError,
    ConnectError as ConnectError,
    Error as Error,
    InvalidArgumentError as InvalidArgumentError,
    MessageTooLargeError as MessageTooLargeError,
    ProtocolError as ProtocolError,
    RemoteError as RemoteError,
    TimeoutError as TimeoutError,
)
from typing_extensions import Buffer as BytesLike

__all__ = ['Client', 'Server', 'Worker', 'Error', 'ConnectError', 'TimeoutError', 'ClosedError', 'RemoteError', 'ProtocolError', 'MessageTooLargeError', 'InvalidArgumentError', 'BindError', 'CODE_HANDLER_EXCEPTION', 'CODE_HANDLER_PANICKED', 'CODE_RESPONSE_TOO_LARGE', 'CODE_NOT_ANSWERED', 'connect_async', 'release_kept_mappings']

__version__: str
CODE_HANDLER_EXCEPTION: int
CODE_HANDLER_PANICKED: int
CODE_RESPONSE_TOO_LARGE: int
CODE_NOT_ANSWERED: int

def release_kept_mappings() -> None: ...

class Client(_shmlink.Client):
    async def acall(self, data: BytesLike, timeout: Optional[float] = None) -> bytes: ...
    async def asend(self, data: BytesLike) -> int: ...
    async def arecv(self, timeout: Optional[float] = None) -> Tuple[int, bytes]: ...
    async def anotify(self, data: BytesLike) -> None: ...
    def __enter__(self) -> "Client": ...
    async def __aenter__(self) -> "Client": ...
    async def __aexit__(self, *exc: Any) -> None: ...

class Server(_shmlink.Server):
    def __enter__(self) -> "Server": ...
    def __exit__(self, *exc: Any) -> None: ...

class Worker(_shmlink.Worker):
    def __enter__(self) -> "Worker": ...

async def connect_async(address: str, **options: Any) -> Client: ...
