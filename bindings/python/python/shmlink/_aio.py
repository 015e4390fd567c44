"""The asyncio forms of ``Client``'s calls, run on the event loop itself:
no thread per call, many calls at once on one session.

How it works (one ``_Waiter`` per client and event loop):

- ``acall`` sends its request (``Client.send``: it does not wait for the
  answer; it may wait briefly for room in a full ring), files a future under
  the call's id and awaits it.
- The client's readiness descriptor (``Client.fileno()``, a ``dup`` of it
  here) is watched with ``loop.add_reader``. It becomes readable when an
  answer has begun to arrive after ``Client.try_recv()`` found none (the
  "armed" state), or when the session ends. The reader then takes every
  answer that arrived (``try_recv()`` until None, which arms the
  descriptor again) and resolves the future each one belongs to; answers
  to calls made with ``send``/``asend`` are kept in arrival order for
  ``arecv``.
- A call that is cancelled (its task cancelled, ``asyncio.wait_for`` or
  ``asyncio.timeout`` expiring, or its own ``timeout``) is abandoned
  (``Client.abandon``): its answer is dropped when it comes and the
  session stays usable.
- When the session ends (the server died or closed it), every waiting
  future gets the error.
- asyncio's selectors are level-triggered, and over ``shm:`` the descriptor
  stays readable after the last answer was taken (it is quieted when a
  ``try_recv()`` next finds nothing, which needs a call in flight). So the
  reader is removed when it fires with nothing waiting, and added again by
  the next call; ``close()`` removes it.
- A blocking ``call``/``recv`` on the same client (from any thread) may take
  answers off the session that the loop waits for, and leaves the
  descriptor unarmed: the native client runs ``_Waiter.kick`` after each,
  which makes the loop look again.
"""

import asyncio
import collections
import os
import weakref

from ._errors import ClosedError, Error, TimeoutError


def seconds(timeout, default):
    """A per-call timeout: the client's default for None, else a positive
    number of seconds (checked as the native calls check theirs)."""
    if timeout is None:
        return default
    t = float(timeout)
    if not (0 < t < float("inf")):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    return t


def _copy(error):
    """A fresh exception of the same class and message, for each of many
    waiters (one instance raised from many tasks would pile up their
    tracebacks)."""
    try:
        return type(error)(*error.args)
    except Exception:
        return error


class Waiter:
    """The calls of one client waiting on one event loop. Used from the
    loop's thread only, except ``kick`` and ``shut``."""

    __slots__ = (
        "loop", "fd", "client", "address", "timeout", "calls", "replies",
        "receivers", "watching", "armed", "closed", "deadlines", "timer",
    )

    def __init__(self, client, loop):
        self.closed = True  # until the descriptor is ours (for __del__)
        self.loop = loop
        self.address = client.address
        self.timeout = client.timeout
        # A duplicate: the loop's selector keeps a registration valid even
        # if the client is dropped (its descriptor closed) while watched.
        self.fd = os.dup(client.fileno())
        # Weak: a reader left registered on an idle client must not keep it
        # (and its session) alive; a client dropped without close() stops
        # the watching as it goes.
        self.client = weakref.ref(client, self.gone)
        self.calls = {}                            # call id -> Future (acall)
        self.replies = collections.deque()         # (id, bytes | RemoteError) for arecv
        self.receivers = collections.deque()       # Futures of waiting arecvs
        self.watching = False
        # Whether the last try_recv() found nothing with a call in flight:
        # the descriptor then becomes readable when an answer comes.
        self.armed = False
        # Deadlines of the calls waiting with the client's timeout, in the
        # order they were made (so in the order they expire), and the one
        # timer that watches the first: cheaper than a timer per call.
        self.deadlines = collections.deque()
        self.timer = None
        self.closed = False

    def __del__(self):
        if not self.closed:
            self.closed = True
            try:
                os.close(self.fd)
            except OSError:
                pass

    # ------------------------------------------------------------ watching

    def watch(self):
        if not self.watching:
            self.loop.add_reader(self.fd, self.on_readable)
            self.watching = True

    def unwatch(self):
        if self.watching:
            self.watching = False
            self.loop.remove_reader(self.fd)  # a no-op on a closed loop

    def on_readable(self):
        client = self.client()
        if client is None:
            self.close(None)
        elif self.calls or self.receivers:
            self.drain(client)
        else:
            # Nothing waits: the descriptor may stay readable until a call
            # next arms it (see the module's docs). Stop watching.
            self.unwatch()

    # ------------------------------------------------------------ answers

    def drain(self, client):
        """Takes every answer that arrived and hands each to its waiter;
        ends armed when something still waits."""
        calls = self.calls
        try_recv = client.try_recv
        armed = False
        try:
            while calls or self.receivers:
                reply = try_recv()
                if reply is None:
                    # Armed when a call is in flight (else try_recv() had
                    # nothing to arm for: arecv's waiters may be only those
                    # that timed out, on their way out).
                    armed = bool(calls) or client.in_flight > 0
                    break
                fut = calls.pop(reply[0], None)
                if fut is None:
                    self.replies.append(reply)
                    if self.receivers:
                        self.hand_replies()
                elif not fut.done():
                    value = reply[1]
                    if type(value) is bytes:
                        fut.set_result(value)
                    else:
                        fut.set_exception(value)
        except Error as e:
            self.end(e)
            return
        self.armed = armed

    def hand_replies(self):
        replies, receivers = self.replies, self.receivers
        while replies and receivers:
            fut = receivers.popleft()
            if fut.done():
                continue
            cid, value = replies.popleft()
            if type(value) is bytes:
                fut.set_result((cid, value))
            else:
                fut.set_exception(value)

    def end(self, error):
        """The session ended: every waiter gets the error."""
        calls = list(self.calls.values())
        receivers = list(self.receivers)
        self.calls.clear()
        self.receivers.clear()
        self.armed = False
        self.unwatch()
        self.deadlines.clear()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for fut in calls + receivers:
            if not fut.done():
                fut.set_exception(_copy(error))

    def deadline(self, fut, call):
        """Times out `fut` (an acall's when `call`, else an arecv's) after
        the client's timeout."""
        d = self.deadlines
        while d and d[0][1].done():  # answered: most often the oldest
            d.popleft()
        at = self.loop.time() + self.timeout
        d.append((at, fut, call))
        if self.timer is None:
            self.timer = self.loop.call_at(at, self.sweep)

    def sweep(self):
        """The first deadline came: expires what is due, waits for the next."""
        self.timer = None
        d = self.deadlines
        now = self.loop.time()
        while d:
            at, fut, call = d[0]
            if not fut.done():
                if at > now:
                    self.timer = self.loop.call_at(at, self.sweep)
                    return
                self.expire(fut, self.timeout, call)
            d.popleft()

    def expire(self, fut, timeout, call):
        """An acall's (`call`) or arecv's timeout passed."""
        if not fut.done():
            # Also a way back should the descriptor have been left unarmed
            # (a blocking recv() that took answers this loop waited for).
            self.armed = False
            then = (
                "the call is abandoned (its answer will be dropped) and the session stays usable"
                if call
                else "the answer, when it comes, is left for the next arecv()"
            )
            fut.set_exception(TimeoutError(
                f"waiting for a response on {self.address} timed out after {timeout:g} s; {then}"
            ))

    def abandon(self, client, call_id):
        try:
            client.abandon(call_id)
        except Error:
            pass  # closed meanwhile: nothing to give up

    # ------------------------------------------------------------ other threads

    def kick(self):
        """Run by the native client after each blocking call/recv, on the
        thread that made it: that call may have taken answers off the
        session (filed for try_recv) and left the descriptor unarmed."""
        self.armed = False
        if (self.calls or self.receivers) and not self.closed:
            try:
                self.loop.call_soon_threadsafe(self.rearm)
            except RuntimeError:
                pass  # the loop is closed: nothing waits on it any more

    def rearm(self):
        self.armed = False
        client = self.client()
        if client is not None and not self.closed and (self.calls or self.receivers):
            self.watch()
            self.drain(client)

    def gone(self, _ref):
        """The client is being deallocated (its descriptor still open)."""
        try:
            self.shut(None)
        except Exception:
            pass  # interpreter shutdown: the loop goes with it

    def close(self, error):
        """Stops watching and releases the descriptor; waiters get `error`
        (or ClosedError). On the loop's thread, or once the loop stopped."""
        if self.closed:
            return
        if error is None:
            error = ClosedError(f"client for {self.address} is closed")
        self.end(error)
        self.closed = True
        os.close(self.fd)

    def shut(self, error):
        """``close`` from any thread: on the loop's thread while it runs."""
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or loop.is_closed() or not loop.is_running():
            self.close(error)
            return
        try:
            loop.call_soon_threadsafe(self.close, error)
        except RuntimeError:  # closed in between
            self.close(error)


def waiter(client):
    """The client's waiter on the running loop, made (and the descriptor
    opened) on first use."""
    loop = asyncio.get_running_loop()
    w = client.__dict__.get("_aio")
    if w is not None:
        if w.loop is loop and not w.closed:
            return w
        if w.calls or w.receivers:
            raise RuntimeError(
                f"client for {client.address} has calls waiting on another event loop; "
                "use one client per event loop"
            )
        w.shut(None)
    w = Waiter(client, loop)
    client.__dict__["_aio"] = w
    client._set_wake_hook(w.kick)
    return w


def detach(client, error=None):
    """Before the client closes: waiters get ClosedError, the reader goes."""
    w = client.__dict__.pop("_aio", None)
    if w is not None:
        client._set_wake_hook(None)
        w.shut(error)


async def acall(client, data, timeout):
    w = waiter(client)
    if timeout is not None:
        timeout = seconds(timeout, None)
    cid = client.send(data)
    loop = w.loop
    fut = loop.create_future()
    w.calls[cid] = fut
    if not w.watching:
        w.watch()
    if not w.armed:
        w.drain(client)
    if timeout is None:
        w.deadline(fut, True)
        timer = None
    else:
        timer = loop.call_later(timeout, w.expire, fut, timeout, True)
    try:
        return await fut
    finally:
        if timer is not None:
            timer.cancel()
        if w.calls.pop(cid, None) is not None:
            # Cancelled or timed out before its answer was taken.
            w.abandon(client, cid)


async def arecv(client, timeout):
    w = waiter(client)
    if timeout is not None:
        timeout = seconds(timeout, None)
    waiting = sum(1 for f in w.receivers if not f.done())
    if w.replies and not waiting:
        cid, value = w.replies.popleft()
        if type(value) is bytes:
            return cid, value
        raise value
    # Answers to calls made with send()/asend(), taken or still to come,
    # less those other arecvs already wait for.
    if client.in_flight + len(w.replies) - len(w.calls) - waiting <= 0:
        raise Error(f"recv on the session with {client.address}: no call is in flight")
    loop = w.loop
    fut = loop.create_future()
    w.receivers.append(fut)
    if not w.watching:
        w.watch()
    if not w.armed:
        w.drain(client)
    if timeout is None:
        w.deadline(fut, False)
        timer = None
    else:
        timer = loop.call_later(timeout, w.expire, fut, timeout, False)
    try:
        return await fut
    finally:
        if timer is not None:
            timer.cancel()
        try:
            w.receivers.remove(fut)
        except ValueError:
            pass
