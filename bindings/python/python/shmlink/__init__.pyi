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

__all__ = ['Client', 'Server', 'Worker', 'Error', 'ConnectError', 'TimeoutError', 'ClosedError', 'RemoteError', 'ProtocolError', 'MessageTooLargeError', 'InvalidArgumentError', 'BindError', 'CODE_CLOSED', 'CODE_HANDLER_PANICKED', 'CODE_RESPONSE_TOO_LARGE', 'CODE_HANDLER_EXCEPTION', 'CODE_PROTOCOL_ERROR', 'CODE_SHUTTING_DOWN', 'CODE_NOT_ANSWERED', 'CODE_NO_WORKER', 'CODE_QUEUE_FULL', 'CODE_WORKER_DIED', 'CODE_WORKER_TIMEOUT', 'CODE_POOL_STOPPING', 'CODE_NO_WORKERS_START', 'CODE_UNKNOWN_COMMAND', 'connect_async', 'release_kept_mappings']

__version__: str
CODE_CLOSED: int
CODE_HANDLER_PANICKED: int
CODE_RESPONSE_TOO_LARGE: int
CODE_HANDLER_EXCEPTION: int
CODE_PROTOCOL_ERROR: int
CODE_SHUTTING_DOWN: int
CODE_NOT_ANSWERED: int
CODE_NO_WORKER: int
CODE_QUEUE_FULL: int
CODE_WORKER_DIED: int
CODE_WORKER_TIMEOUT: int
CODE_POOL_STOPPING: int
CODE_NO_WORKERS_START: int
CODE_UNKNOWN_COMMAND: int

def release_kept_mappings() -> None: ...

class Client(_shmlink.Client):
    async def acall(self, data: BytesLike, timeout: Optional[float] = None) -> bytes: ...
    async def asend(self, data: BytesLike) -> int: ...
    async def arecv(self, timeout: Optional[float] = None) -> Tuple[int, bytes]: ...
    async def anotify(self, data: BytesLike) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: Any) -> None: ...
    async def __aenter__(self) -> "Client": ...
    async def __aexit__(self, *exc: Any) -> None: ...

class Server(_shmlink.Server):
    def __enter__(self) -> "Server": ...
    def __exit__(self, *exc: Any) -> None: ...

class Worker(_shmlink.Worker):
    def __enter__(self) -> "Worker": ...

async def connect_async(address: str, **options: Any) -> Client: ...
