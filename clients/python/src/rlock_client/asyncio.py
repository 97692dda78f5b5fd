"""The asyncio face: ``async with lock as hold``, ``await lock.acquire()``. Owners are
asyncio tasks; one watchdog task per Locks. A wait runs in a task of its own, so cancelling
the caller cannot lose a grant: the wait is ended in the server and a grant that raced the
cancel is read and given back."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any, Optional

from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _conn
from . import _handles as _h
from ._core import (
    Leader,
    LockInfo,
    Plan,
    ScannedLock,
    Waiter,
)
from .errors import (
    Deadlock,
    DeadlockWait,
    DuplicateValue,
    Lost,
    NotAcknowledged,
    NotAcquired,
    NotHeld,
    RlockError,
    StaleToken,
    Unexpected,
)

__all__ = [
    "Locks",
    "Lock",
    "Hold",
    "ReadWriteLock",
    "MultiLock",
    "MultiHold",
    "Semaphore",
    "Permits",
    "PermitSemaphore",
    "LeasedPermit",
    "Latch",
    "Election",
    "Leadership",
    "Leader",
    "LockInfo",
    "ScannedLock",
    "Waiter",
    "RlockError",
    "NotAcquired",
    "NotHeld",
    "StaleToken",
    "Unexpected",
    "Lost",
    "Deadlock",
    "DeadlockWait",
    "NotAcknowledged",
    "DuplicateValue",
]

_BACKGROUND: set = set()


def _spawn(coro: Any) -> asyncio.Task:
    t = asyncio.ensure_future(coro)
    _BACKGROUND.add(t)
    t.add_done_callback(_BACKGROUND.discard)
    return t


async def _quietly(coro: Any) -> None:
    try:
        await coro
    except Exception:
        pass


class _Server(_conn.Pool):
    """One server's idle connections (``_conn.Pool``), opened on the running loop."""

    @staticmethod
    def kind(waits: bool, timeout: Optional[float]) -> str:
        """A renewal's reads carry their deadline here (``Locks._read``): it needs no connections
        of its own."""
        return "waits" if waits else ""

    async def _take(self, waits: bool = False, timeout: Optional[float] = None) -> Any:
        conn = self.idle(self.kind(waits, timeout))
        if conn is None:
            conn = self.settings.connection("redis.asyncio", None if waits else self.settings.socket_timeout)
            # Connected here: a renewal's within its time (a hung server must not hold the watchdog).
            await asyncio.wait_for(conn.connect(), timeout)
        return conn


class _Router(_conn.Router):
    _ready = False  # a cluster's node map, loaded on first use

    async def ready(self) -> None:
        if self.cluster is not None and not self._ready:
            await self.cluster.initialize()
            self._ready = True

    async def server_for(self, key: bytes) -> _Server:  # type: ignore[override]
        await self.ready()
        return self.node_for(key)

    async def all(self) -> list[_Server]:  # type: ignore[override]
        await self.ready()
        return self.nodes()


class Locks(_h.Locks["Lock", "ReadWriteLock", "MultiLock", "Semaphore", "PermitSemaphore", "Latch", "Election"],
            _h.Async):
    """The asyncio twin of ``rlock_client.Locks``: takes a ``redis.asyncio.Redis``,
    ``redis.asyncio.RedisCluster`` or ``valkey.asyncio.Valkey``, or a URL."""

    _redis = "redis.asyncio"  # the redis-py module of this face's clients and connections

    # ------------------------------------------------------------ owners: tasks

    @staticmethod
    def _caller() -> asyncio.Task:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("call from inside an asyncio task")
        return task

    _mutex_type = contextlib.nullcontext  # one loop: nothing runs between two awaits
    _event = asyncio.Event  # a hold's ``lost``

    # ------------------------------------------------------------ the driver

    async def _run(self, plan: _h.Op[_h.T]) -> _h.T:
        """Runs a plan of ``_handles``: each request is awaited, its value sent back in (or
        its exception, a cancel too, thrown in)."""
        reply: Any = None
        failed: Optional[BaseException] = None
        while True:
            try:
                req = plan.send(reply) if failed is None else plan.throw(failed)
            except StopIteration as end:
                return end.value
            reply, failed = None, None
            try:
                target, name, args = (self, *req) if len(req) == 2 else req
                reply = await getattr(target, name)(*args)
            except BaseException as e:
                failed = e

    @staticmethod
    async def _close(conn: Any) -> None:
        if conn is not None:
            await _quietly(conn.disconnect(nowait=True))

    @staticmethod
    async def _undo(plan: Any) -> None:
        """A wait runs in a task of its own (``_wait``): a cancelled caller cannot lose its grant."""

    _sleep = staticmethod(asyncio.sleep)

    async def _wait(self, plan: Plan, pin: bool = False) -> tuple[list, Any]:
        """The one wait of the asyncio face: ``plan`` runs in a task of its own, whose replies
        reach the caller through ``fut``, a future of the caller's. Cancelling the caller
        cancels ``fut``, never the wait; the wait is then abandoned (``_abandon``) and what it
        was granted is given back (Rust: a oneshot channel). Returns (replies, the connection
        if ``pin``)."""
        w = _h.Waiting(gives_back=True, pinned=pin)
        fut = asyncio.get_running_loop().create_future()
        inner = _spawn(self._wait_into(fut, w, plan))
        try:
            replies = await fut
        except asyncio.CancelledError:
            w.left = True
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                replies = fut.result()  # granted as we were cancelled
            else:
                replies = None
            _spawn(self._abandon(w, inner, plan, replies))
            raise
        return self._handed(w, replies)

    async def _wait_into(self, fut: asyncio.Future, w: _h.Waiting, plan: Plan) -> Optional[list]:
        try:
            replies = await self._run(self._waiting(plan, w))
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
            return None
        if fut.done():  # the caller left: _abandon gives back what this was granted
            return replies
        fut.set_result(replies)
        return None

    @staticmethod
    async def _read(conn: Any, waits: bool, deadline: Optional[float]) -> Any:
        """The next reply on ``conn``: a wait's as long as the server waits, given up past
        ``deadline``."""
        if deadline is None:  # a short command's read: its socket timeout bounds it
            return await conn.read_response(timeout=math.inf if waits else None)
        try:
            return await asyncio.wait_for(conn.read_response(timeout=math.inf if waits else None),
                                          max(0.1, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise RedisTimeoutError("the server did not answer in time") from None

    async def _abandon(self, w: _h.Waiting, inner: asyncio.Task, plan: Plan, replies: Optional[list]) -> None:
        """The caller left a wait. Its connection is closed (the server frees a blocked client
        whose socket closed: no CLIENT KILL, which an ACL may refuse), then what it was granted
        is given back (``_handles.Locks._reclaiming``)."""
        if replies is None and not inner.done():
            inner.cancel()
        await _quietly(asyncio.wait({inner}, timeout=1))
        if w.conn is not None:
            await _quietly(w.conn.disconnect(nowait=True))
        if replies is None and inner.done() and not inner.cancelled() and inner.exception() is None:
            replies = inner.result()  # read as the caller left
        await self._run(self._reclaiming(plan, replies))


# ---------------------------------------------------------------- the watchdog


class _Watchdog(_h.Watchdog):
    """The watchdog's task (``_handles.Watchdog``) on the loop of the holds it renews, and
    its keyspace-event listener."""

    _mutex = contextlib.nullcontext()  # one loop: nothing runs between two awaits

    _task: Optional[asyncio.Task] = None
    _wake: Optional[asyncio.Event] = None
    _loop: Optional[asyncio.AbstractEventLoop] = None
    _sub_task: Optional[asyncio.Task] = None

    def _runs(self) -> bool:
        """The task, on the running loop; a dropped hold's finalizer, outside the loop, has
        the loop start and wake it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._start, True)
            return False
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop = loop
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._turns())
        return True

    async def _turns(self) -> None:
        try:
            while (looked := self._look()) is not None and (turn := await looked) is not None:
                if not turn[0]:
                    await self._sleep(self._napping(turn[1], math.inf))
        finally:
            await self._unfollow()

    async def _sleep(self, timeout: float) -> None:
        assert self._wake is not None  # made with the task
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        self._sleep_until = 0.0

    def _listen_to(self, conn: Any) -> None:
        """The event connection (``_handles.Watchdog._following``) gets its listener."""
        self._sub_task = asyncio.get_running_loop().create_task(self._listen(conn))

    async def _listen(self, conn: Any) -> None:
        try:
            while True:
                key = self._heard(await conn.read_response(timeout=math.inf))
                checked = None if key is None else self.check_now({key})
                if checked is not None:
                    await checked
        except BaseException:
            return

    def _stop_listening(self) -> None:
        if self._sub_task is not None:
            self._sub_task.cancel()
            self._sub_task = None


# ---------------------------------------------------------------- the handles (``_handles``)


class Hold(_h.Hold, _h.AsyncScope):
    """A granted lock; ``lost`` is an asyncio.Event; ``async with hold:`` releases at the end."""


class Lock(_h.Lock[Hold], _h.AsyncScope):
    """``async with lock as hold:``, ``await lock.acquire()``. Owners are asyncio tasks."""



class MultiHold(_h.MultiHold, _h.AsyncScope):
    """Every lock of a multi-key acquire; ``lost`` (an asyncio.Event) is set when any is lost."""


class MultiLock(_h.MultiLock[MultiHold], _h.AsyncScope):
    """Several locks, all or none; ``async with multi as hold:``."""


class Permits(_h.Permits, _h.AsyncScope):
    """Permits taken from a Semaphore; ``await permits.release()``."""



class LeasedPermit(_h.LeasedPermit, _h.AsyncScope):
    """One leased permit; ``lost`` is an asyncio.Event."""




class Leadership(_h.Leadership, _h.AsyncScope):
    """The post; ``await leadership.resign()``."""


class Semaphore(_h.Semaphore[Permits], _h.Async):
    """``await sem.acquire(permits, wait=)`` -> Permits or None."""


class PermitSemaphore(_h.PermitSemaphore[LeasedPermit], _h.Async):
    """``await slots.acquire(wait=, lease=)`` -> a list of LeasedPermit or None."""


class Latch(_h.Latch, _h.Async):
    """``await latch.await_zero(wait)``."""


class ReadWriteLock(_h.ReadWriteLock[Lock], _h.Async):
    """``rw.read()``, ``rw.write()``: its Lock handles, ``async with`` as any."""


class Election(_h.Election[Leadership], _h.Async):
    """``await election.campaign(value)``; ``async for leader in election.observe():``."""
