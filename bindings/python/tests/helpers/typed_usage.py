"""Not run: type-checked by run-tests.sh --types (mypy --strict) against the stubs."""

import asyncio
import shmlink

def h(req: bytes) -> bytes:
    return req

s = shmlink.Server(["shm:/tmp/x.sock"], max_sessions=4)
addrs: list[str] = s.addresses
with shmlink.Client("shm:/tmp/x.sock", timeout=1.0) as c:
    r: bytes = c.call(bytearray(b"x"))
    cid, body = c.recv(timeout=0.5)
    n: int = cid + 1
    c.notify(memoryview(b"x"))

async def main() -> bytes:
    async with shmlink.Client("shm:/tmp/x.sock") as c2:
        fd: int = c2.fileno()
        t: float = c2.timeout
        got = c2.try_recv()
        if got is not None:
            gid, value = got
            if isinstance(value, shmlink.RemoteError):
                c2.abandon(gid)
        cid2: int = await c2.asend(b"y")
        rid, rbody = await c2.arecv(timeout=t)
        await c2.anotify(b"z")
        return await c2.acall(b"x", timeout=0.5)

try:
    pass
except shmlink.RemoteError as e:
    code: int = e.code
w = shmlink.Worker()
x = w.accept()
s.serve(h)
