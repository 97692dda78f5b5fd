"""The asyncio face: ``async with lock as hold``, ``await lock.acquire()``. Owners are
asyncio tasks; one watchdog task per Locks. A wait runs in a task of its own, so cancelling
the caller cannot lose a grant: the wait is ended in the server and a grant that raced the
cancel is read and given back."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
import weakref
from typing import Any, AsyncIterator, Optional, Sequence

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _conn
from ._core import (
    DEFAULT_SYNC_TIMEOUT,
    LOST_BY_OTHERS,
    RAN_OUT_FIXED,
    READ,
    RESEND_AFTER,
    SCAN_COUNT,
    STATS_CMD,
    WAIT_MARGIN,
    WRITE,
    Call,
    Leader,
    LockInfo,
    Plan,
    Renewal,
    ScannedLock,
    Waiter,
    acknowledgements,
    after_renewal,
    attached_replicas,
    check_name,
    check_owner,
    check_replicas,
    check_value,
    due_now,
    election_leader,
    event_channels,
    events_on,
    grant_basis,
    granted,
    held_cmd,
    hit_by_events,
    latch_count,
    latch_count_down,
    latch_plan,
    latch_try_set_count,
    lease_ms,
    lease_plan,
    lock_force_release,
    lock_hold_count,
    lock_info,
    lock_is_held_by,
    lock_is_locked,
    lock_plan,
    lock_release,
    lock_remaining_lease,
    lock_renew,
    lock_spec,
    lost_key,
    merge_top,
    multi_plan,
    multi_release,
    multi_spec,
    new_client_id,
    new_req_id,
    next_look,
    owner_id,
    pack,
    parse_scan,
    parse_stats,
    parse_top,
    permit_renew,
    permit_return,
    raise_if_error,
    read_grant,
    read_latch,
    read_leased,
    read_taken,
    release_cmd,
    renew_args,
    renewal_timeout,
    resend_wait,
    scan_cmd,
    scoped,
    scoped_wait,
    semaphore_add_permits,
    semaphore_available,
    semaphore_plan,
    semaphore_release,
    semaphore_try_set_permits,
    server_name,
    split_due,
    text,
    top_cmd,
    wait_deadline,
    wait_ms,
    waiters_call,
)
from ._core import hold_guard
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

_LINK_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)
_UNSET: Any = object()
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


class _Server:
    def __init__(self, settings: _conn.Settings):
        self.settings = settings
        self._idle: list = []
        self._idle_waits: list = []
        self.pid = os.getpid()

    async def take(self, waits: bool = False):
        pool = self._idle_waits if waits else self._idle
        if pool:
            return pool.pop()
        if waits:
            conn = self.settings.async_connection(None)
            await conn.connect()
            return conn
        return self.settings.async_connection(self.settings.socket_timeout)

    def give(self, conn: Any, waits: bool = False) -> None:
        if self.pid == os.getpid():
            (self._idle_waits if waits else self._idle).append(conn)

    async def pipeline(self, cmds: Sequence[Sequence[Any]]) -> list:
        conn = await self.take()
        try:
            await conn.send_packed_command(_packed(conn, cmds))
            out = []
            for _ in cmds:
                try:
                    out.append(await conn.read_response())
                except ResponseError as e:
                    out.append(e)
        except BaseException:
            await _quietly(conn.disconnect(nowait=True))
            raise
        self.give(conn)
        return out

    async def call(self, *args: Any) -> Any:
        return raise_if_error((await self.pipeline([args]))[0])

    def forget(self) -> None:
        self._idle = []
        self._idle_waits = []
        self.pid = os.getpid()


class _Router:
    def __init__(self, client: Any):
        settings, cluster = _conn.describe(client)
        self.cluster = cluster
        self.single = _Server(settings) if settings else None
        self._base = settings or _conn.cluster_settings(cluster)
        self._nodes: dict = {}
        self._ready = cluster is None

    @property
    def db(self) -> int:
        return self._base.db

    async def ready(self) -> None:
        if not self._ready:
            await self.cluster.initialize()
            self._ready = True

    def at(self, host: str, port: int) -> _Server:
        s = self._nodes.get((host, port))
        if s is None:
            s = self._nodes[(host, port)] = _Server(self._base.at(host, port))
        return s

    async def server_for(self, key: bytes) -> _Server:
        if self.single is not None:
            return self.single
        await self.ready()
        return self.at(*_conn.node_of(self.cluster, key))

    async def all(self) -> list[_Server]:
        if self.single is not None:
            return [self.single]
        await self.ready()
        return [self.at(h, p) for h, p in _conn.primaries(self.cluster)]

    async def moved(self, e: MovedError) -> _Server:
        try:
            await self.cluster.nodes_manager.initialize()
        except Exception:
            pass
        return self.at(e.host, int(e.port))

    def forget(self) -> None:
        for s in [self.single, *self._nodes.values()]:
            if s is not None:
                s.forget()


_ALL_LOCKS: "weakref.WeakSet[Locks]" = weakref.WeakSet()


class Locks:
    """The asyncio twin of ``rlock_client.Locks``: takes a ``redis.asyncio.Redis``,
    ``redis.asyncio.RedisCluster`` or ``valkey.asyncio.Valkey``, or a URL."""

    def __init__(self, client: Any, *, watchdog_lease: float = 30.0):
        self._watchdog_lease_ms = lease_ms(watchdog_lease)
        self._router = _Router(client)
        self.client_id = new_client_id()
        self._owners: "weakref.WeakKeyDictionary[asyncio.Task, str]" = weakref.WeakKeyDictionary()
        self._owner_seq = 0
        self._replicas: dict = {}
        self._watchdog = _Watchdog(self)
        self._pid = os.getpid()
        _ALL_LOCKS.add(self)

    @classmethod
    def from_url(cls, url: str, *, cluster: bool = False, watchdog_lease: float = 30.0, **kwargs: Any) -> "Locks":
        if not isinstance(url, str):
            raise TypeError("url must be a str")
        if cluster:
            from redis.asyncio.cluster import RedisCluster

            return cls(RedisCluster.from_url(url, **kwargs), watchdog_lease=watchdog_lease)
        import redis.asyncio as aredis

        return cls(aredis.Redis.from_url(url, **kwargs), watchdog_lease=watchdog_lease)

    def owner(self) -> str:
        """The calling task's owner id, ``<client-uuid>:<n>``."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("call from inside an asyncio task")
        o = self._owners.get(task)
        if o is None:
            self._owner_seq += 1
            o = self._owners[task] = owner_id(self.client_id, self._owner_seq)
        return o

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            self.client_id = new_client_id()
            self._owners = weakref.WeakKeyDictionary()
            self._router.forget()
            self._watchdog = _Watchdog(self)
            self._pid = os.getpid()

    # handles
    def lock(self, name: Any, *, lease: Optional[float] = None, wait: Optional[float] = None, fair: bool = False,
             fenced: bool = False, session: bool = False, sync_replicas: Optional[int] = None,
             sync_timeout: float = DEFAULT_SYNC_TIMEOUT, owner: Any = None) -> "Lock":
        return Lock(self, name, None, lease, wait, fair, fenced, session, sync_replicas, sync_timeout, owner)

    def read_write(self, name: Any, *, owner: Any = None) -> "ReadWriteLock":
        return ReadWriteLock(self, name, owner)

    def multi(self, names: Sequence[Any], *, lease: Optional[float] = None, wait: Optional[float] = None,
              session: bool = False, owner: Any = None) -> "MultiLock":
        return MultiLock(self, names, lease, wait, session, owner)

    def semaphore(self, name: Any) -> "Semaphore":
        return Semaphore(self, name)

    def permit_semaphore(self, name: Any) -> "PermitSemaphore":
        return PermitSemaphore(self, name)

    def latch(self, name: Any) -> "Latch":
        return Latch(self, name)

    def election(self, name: Any, *, sync_replicas: Optional[int] = None,
                 sync_timeout: float = DEFAULT_SYNC_TIMEOUT) -> "Election":
        return Election(self, name, sync_replicas, sync_timeout)

    # queries
    async def info(self, name: Any) -> LockInfo:
        return await self._do(lock_info(check_name(name)))

    async def force_release(self, name: Any) -> bool:
        return await self._do(lock_force_release(check_name(name)))

    async def waiters(self, name: Any) -> list[Waiter]:
        return await self._do(waiters_call(check_name(name)))

    async def scan(self, match: Optional[str] = None, type: Optional[str] = None,
                   count: int = SCAN_COUNT) -> AsyncIterator[ScannedLock]:
        scan_cmd(0, match, type, count)
        for server in await self._router.all():
            cursor: Optional[int] = None
            while cursor != 0:
                cursor, entries = parse_scan(await server.call(*scan_cmd(cursor or 0, match, type, count)))
                for e in entries:
                    yield e

    async def stats(self) -> dict:
        out = {}
        for s in await self._router.all():
            out[server_name(s.settings.kwargs)] = parse_stats(await s.call(*STATS_CMD))
        return out

    async def top(self, count: int = 10) -> list[dict]:
        cmd = top_cmd(count)
        out: list = []
        for s in await self._router.all():
            out += parse_top(await s.call(*cmd))
        return merge_top(out, count)

    # plumbing
    async def _call(self, key: bytes, *args: Any) -> Any:
        return raise_if_error((await self._pipeline(key, [args]))[0])

    async def _do(self, c: Call) -> Any:
        return c.read(await self._pipeline(c.key, c.cmds, resend=c.resend))

    async def _pipeline(self, key: bytes, cmds: Sequence[Sequence[Any]], resend: bool = False) -> list:
        self._check_pid()
        server = await self._router.server_for(key)
        out: list = []
        for attempt in range(3):
            try:
                out = await server.pipeline(cmds)
            except _LINK_ERRORS:
                if not resend or attempt == 2:
                    raise
                await asyncio.sleep(RESEND_AFTER)
                continue
            moved = next((v for v in out if isinstance(v, MovedError)), None)
            if moved is None or self._router.cluster is None:
                return out
            server = await self._router.moved(moved)
        return out

    async def _replicas_for(self, key: bytes) -> int:
        server = await self._router.server_for(key)
        now = time.monotonic()
        seen = self._replicas.get(id(server))
        if seen is None or now - seen[0] > 1.0:
            seen = (now, attached_replicas(await server.call("INFO", "replication")))
            self._replicas[id(server)] = seen
        return int(seen[1])

    async def _blocking(self, plan: Plan, pin: bool = False) -> tuple[list, Any]:
        """The one wait of the asyncio face: ``plan`` runs in a task of its own, whose replies
        reach the caller through ``fut``, a future of the caller's. Cancelling the caller
        cancels ``fut``, never the wait; the wait is then abandoned (``_abandon``) and what it
        was granted is given back (Rust: a oneshot channel). Returns (replies, the connection
        if ``pin``)."""
        self._check_pid()
        server = await self._router.server_for(plan.key)
        conn = await server.take(waits=True)
        state: dict = {"conn": conn, "server": server, "left": False}
        fut = asyncio.get_running_loop().create_future()
        inner = _spawn(self._wait_into(fut, state, plan))
        try:
            replies = await fut
        except asyncio.CancelledError:
            state["left"] = True
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                replies = fut.result()  # granted as we were cancelled
            else:
                replies = None
            _spawn(self._abandon(state, inner, plan, replies))
            raise
        if pin:
            return replies, state["conn"]
        state["server"].give(state["conn"], waits=True)
        return replies, None

    async def _wait_into(self, fut: asyncio.Future, state: dict, plan: Plan) -> Optional[list]:
        try:
            replies = await self._wait(state, plan)
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
            return None
        if fut.done():  # the caller left: _abandon gives back what this was granted
            return replies
        fut.set_result(replies)
        return None

    async def _wait(self, state: dict, plan: Plan) -> list:
        """Sends ``plan.cmds``; a broken link sends them again (REQ ids) with the wait that
        is left (``_core.resend_wait``), unless the caller left."""
        cmds = plan.cmds
        deadline = wait_deadline(time.monotonic(), plan.block)
        tries = 0
        while True:
            conn = state["conn"]
            replies: list = []
            state["replies"] = replies
            try:
                await conn.send_packed_command(_packed(conn, cmds))
                while len(replies) < len(cmds):
                    t = None if deadline is None else max(0.1, deadline + WAIT_MARGIN - time.monotonic())
                    try:
                        v = await asyncio.wait_for(conn.read_response(timeout=math.inf), t)
                    except asyncio.TimeoutError:
                        raise RedisTimeoutError("the server did not answer a wait in time") from None
                    except ResponseError as e:
                        v = e
                    replies.append(v)
            except _LINK_ERRORS as e:
                await _quietly(conn.disconnect(nowait=True))
                if replies:
                    await self._give_back(plan, replies[0])
                    raise
                tries += 1
                again = resend_wait(cmds[0], tries, isinstance(e, RedisTimeoutError), plan.block, deadline,
                                    time.monotonic())
                if again is None or state["left"]:
                    raise
                await asyncio.sleep(RESEND_AFTER)
                cmds = [again] + list(cmds[1:])
                state["conn"] = await state["server"].take(waits=True)
                continue
            moved = replies[0] if isinstance(replies[0], MovedError) else None
            if moved is not None and self._router.cluster is not None:
                state["server"].give(conn, waits=True)
                state["server"] = await self._router.moved(moved)
                state["conn"] = await state["server"].take(waits=True)
                continue
            return replies

    async def _abandon(self, state: dict, inner: asyncio.Task, plan: Plan, replies: Optional[list]) -> None:
        """The caller left a wait. Its connection is closed (the server frees a blocked client
        whose socket closed: no CLIENT KILL, which an ACL may refuse), then, unless its replies
        are known, the call is sent again with its REQ id and a 1 ms wait: a grant the first
        got is replayed, or the call runs anew. What either replied is given back."""
        if replies is None and not inner.done():
            inner.cancel()
        await _quietly(asyncio.wait({inner}, timeout=1))
        await _quietly(state["conn"].disconnect(nowait=True))
        if replies is None and inner.done() and not inner.cancelled() and inner.exception() is None:
            replies = inner.result()  # read as the caller left
        if replies is None and plan.req:
            try:
                replies = await self._pipeline(plan.key, [plan.again()], resend=True)
            except Exception:
                return
        if replies:
            await self._give_back(plan, replies[0])

    async def _replies(self, plan: Plan) -> list:
        """The replies of a plan that pins no connection: waited for, or sent at once."""
        if plan.waits:
            return (await self._blocking(plan))[0]
        return await self._pipeline(plan.key, plan.cmds, resend=True)

    async def _give_back(self, plan: Plan, reply: Any) -> None:
        cmds = plan.give_back(reply)
        if cmds:
            await _quietly(self._pipeline(plan.key, cmds, True))


async def _closed(conn: Any) -> None:
    """Closes a wait's pinned connection, if any (a SESSION connection that holds nothing)."""
    if conn is not None:
        await _quietly(conn.disconnect(nowait=True))


def _packed(conn: Any, cmds: Sequence[Sequence[Any]]) -> list:
    p = pack(cmds)
    return [p] if p is not None else conn.pack_commands(cmds)


# ---------------------------------------------------------------- the watchdog


class _Watchdog:
    def __init__(self, locks: Locks):
        self._locks = weakref.ref(locks)
        self._entries: dict = {}
        self._releases: list = []
        self._seq = 0
        self._task: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.rounds = 0
        self.renewals = 0
        self._pid = os.getpid()
        self._anchor = time.monotonic()
        self._sub: Any = None
        self._sub_task: Optional[asyncio.Task] = None
        self._channels: set = set()
        self._checked = 0.0
        self._events: Optional[str] = None
        self._sleep_until = 0.0

    def add(self, r: Renewal, lost: asyncio.Event) -> int:
        r.schedule(self._anchor, time.monotonic())
        self._seq += 1
        self._entries[self._seq] = (r, lost)
        # Woken only when this hold falls due before the task would look again.
        self._ensure_task(wake=r.due_at() < self._sleep_until)
        return self._seq

    def remove(self, n: int) -> None:
        self._entries.pop(n, None)

    def release_later(self, key: bytes, cmd: list) -> None:
        self._releases.append((key, cmd))
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            self._ensure_task()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._ensure_task)

    def _ensure_task(self, wake: bool = True) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop = loop
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run())
        if wake and self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        # An unexpected error (a cluster's node map failing, say) must not end the renewals.
        while True:
            try:
                return await self._cycle()
            except Exception:
                logging.getLogger("rlock_client").exception("the watchdog failed; it starts again")
                await asyncio.sleep(0.1)

    async def _cycle(self) -> None:
        idle_since = None
        try:
            while True:
                locks = self._locks()
                if locks is None or self._pid != os.getpid():
                    return
                entries = list(self._entries.items())
                releases, self._releases = self._releases, []
                for key, cmd in releases:
                    await _quietly(locks._pipeline(key, [cmd], True))
                now = time.monotonic()
                if not entries:
                    idle_since = idle_since or now
                    if now - idle_since > 5 and not self._releases:
                        self._sleep_until = 0.0
                        return
                else:
                    idle_since = None
                due = due_now(entries, now)
                if due:
                    await self._renew(locks, due)
                    continue
                await self._sync_events(locks, entries)
                del locks
                assert self._wake is not None
                self._wake.clear()
                timeout = next_look(entries, time.monotonic())
                self._sleep_until = time.monotonic() + timeout
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except asyncio.TimeoutError:
                    pass
                self._sleep_until = 0.0
        finally:
            await self._close_events()

    async def _sync_events(self, locks: Locks, entries: list) -> None:
        if locks._router.single is None:
            return
        if not entries:
            await self._close_events()
            return
        now = time.monotonic()
        if now - self._checked > 1.0:
            self._checked = now
            try:
                flags = await asyncio.wait_for(
                    locks._router.single.call("CONFIG", "GET", "notify-keyspace-events"), 0.5)
                self._events = events_on(text(flags[1]) if flags else "")
            except Exception:
                self._events = None
        if not self._events:
            await self._close_events()
            return
        want = set(event_channels(self._events, locks._router.db, sorted({r.key for _, (r, _) in entries})))
        try:
            if self._sub is None:
                self._sub = locks._router.single.settings.async_connection(None)
                await self._sub.connect()
                self._channels = set()
                self._sub_task = asyncio.get_running_loop().create_task(self._listen(self._sub, locks._router.db))
            add, drop = want - self._channels, self._channels - want
            if add:
                await self._sub.send_command("SUBSCRIBE", *add)
            if drop:
                await self._sub.send_command("UNSUBSCRIBE", *drop)
            self._channels = want
        except Exception:
            await self._close_events()

    async def _listen(self, conn: Any, db: int) -> None:
        try:
            while True:
                key = lost_key(await conn.read_response(timeout=math.inf), db)
                if key is not None:
                    await self.check_now({key})
        except BaseException:
            return

    async def _close_events(self) -> None:
        if self._sub_task is not None:
            self._sub_task.cancel()
            self._sub_task = None
        if self._sub is not None:
            await _quietly(self._sub.disconnect(nowait=True))
            self._sub = None
        self._channels = set()

    async def check_now(self, keys: set) -> None:
        locks = self._locks()
        if locks is None:
            return
        hit, fixed = hit_by_events(list(self._entries.items()), keys)
        if hit:
            await self._renew(locks, hit)
        held = await asyncio.gather(*(locks._call(r.key, *held_cmd(r)) for _, r, _ in fixed), return_exceptions=True)
        for (n, r, ev), v in zip(fixed, held):
            if v == 0:
                self._lose(n, r, ev, LOST_BY_OTHERS)

    def _lose(self, n: int, r: Renewal, ev: asyncio.Event, why: str) -> None:
        r.lost_reason = why
        self.remove(n)
        ev.set()

    async def _renew(self, locks: Locks, due: list) -> None:
        self.rounds += 1
        now = time.monotonic()
        ran_out, renewable = split_due(due)
        for n, r, ev in ran_out:
            self._lose(n, r, ev, RAN_OUT_FIXED)
        groups: dict = {}
        for entry in renewable:
            groups.setdefault(id(await locks._router.server_for(entry[1].key)), []).append(entry)
        for group in groups.values():
            cmds = [renew_args(r, new_req_id()) for _, r, _ in group]
            try:
                timeout = renewal_timeout([r.lease_ms for _, r, _ in group])
                replies = await asyncio.wait_for(locks._pipeline(group[0][1].key, cmds), timeout)
            except Exception:
                replies = [None] * len(group)
            self.renewals += len(group)
            for (n, r, ev), v in zip(group, replies):
                why = after_renewal(r, v, now, time.monotonic(), self._anchor) if n in self._entries else None
                if why is not None:
                    self._lose(n, r, ev, why)


# ---------------------------------------------------------------- locks


def _dropped(dog: _Watchdog, entry: int, key: bytes, owner: bytes, side: Optional[str], pid: int) -> None:
    if pid != os.getpid():
        return
    dog.remove(entry)
    dog.release_later(key, release_cmd(key, owner, side, new_req_id()))


class Hold:
    """A granted lock; ``lost`` is an asyncio.Event."""

    def __init__(self, locks: Locks, key: bytes, owner: bytes, side: Optional[str], lease: int, renew: bool,
                 basis: float, token: Optional[int], count: Optional[int], replicas: Optional[int], conn: Any = None):
        self.key = key.decode("utf-8", "replace")
        self.owner = owner.decode("utf-8", "replace")
        self.side = side
        self.token = token
        self.count = count
        self.replicas_acked = replicas
        self.lost = asyncio.Event()
        self._locks, self._key, self._owner, self._conn = locks, key, owner, conn
        self._pid = os.getpid()
        self._released = False
        self._renewal = Renewal(key, owner, side, lease, renew, basis)
        self._entry = locks._watchdog.add(self._renewal, self.lost)
        self._finalizer = weakref.finalize(self, _dropped, locks._watchdog, self._entry, key, owner, side, self._pid)

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"lock {self.key!r}: {self._renewal.lost_reason or 'lost'}")

    @property
    def is_lost(self) -> bool:
        return self.lost.is_set()

    async def renew(self) -> None:
        self.check()
        try:
            await self._locks._do(lock_renew(self._key, self._owner, self.side, self._renewal.lease_ms))
        except Lost:
            self._locks._watchdog._lose(self._entry, self._renewal, self.lost, "the renewal was refused")
            raise
        self._renewal.basis = time.monotonic()

    async def guard(self, *command: Any) -> Any:
        """Runs ``command`` (``"SET", "{orders}:total", "5"``) in the server only while this hold
        stands (``RLOCK.GUARD``, checked in the same server turn), and returns its reply. The
        owner must hold the lock now (on this hold's side), its lease counted to the moment of
        the call, and a fenced hold's token must still be the lock's. Otherwise nothing runs:
        NotHeld (the lease ran out, the lock was force-released or another owner took it), or
        StaleToken (the same owner took it again as a newer hold). The inner command's own
        error is redis-py's. Sent once: a broken link raises, since the command may have run.
        In a cluster, every key of the command must be in the lock's slot (a hash tag)."""
        return await self._locks._do(hold_guard(self._key, self._owner, self.side, self.token, command, self._released))

    async def release(self) -> bool:
        if self._pid != os.getpid() or self._released:
            return False
        self._released = True
        self._finalizer.detach()
        self._locks._watchdog.remove(self._entry)
        call = lock_release(self._key, self._owner, self.side)
        cmd = call.cmds[0]
        try:
            replies = await self._locks._pipeline(self._key, [cmd], resend=True)
        except asyncio.CancelledError:
            # The caller was cancelled meanwhile: the watchdog sends it again, with the same
            # REQ id, so it is applied once whether or not it reached the server.
            self._locks._watchdog.release_later(self._key, cmd)
            raise
        finally:
            if self._conn is not None:
                await _quietly(self._conn.disconnect(nowait=True))
                self._conn = None
        return bool(call.read(replies))

    async def __aenter__(self) -> "Hold":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"Hold(key={self.key!r}, owner={self.owner!r}, token={self.token}, lost={self.lost.is_set()})"


class Lock:
    def __init__(self, locks: Locks, name: Any, side: Optional[str], lease: Any, wait: Any, fair: Any, fenced: Any,
                 session: Any, sync_replicas: Any, sync_timeout: Any, owner: Any):
        self._spec = lock_spec(name, side, lease, wait, fair, fenced, session, sync_replicas, sync_timeout,
                               locks._watchdog_lease_ms)
        key = self._spec.key
        self._locks = locks
        self._owner = None if owner is None else check_owner(owner)
        self._stacks: "weakref.WeakKeyDictionary[asyncio.Task, list]" = weakref.WeakKeyDictionary()
        self._scoped_wait = scoped_wait(wait)
        self.name = key.decode("utf-8", "replace")

    def owner(self) -> str:
        return (self._owner or self._locks.owner().encode()).decode("utf-8", "replace")

    def _owner_bytes(self) -> bytes:
        return self._owner or self._locks.owner().encode()

    async def acquire(self, *, wait: Any = _UNSET) -> Optional[Hold]:
        spec = self._spec
        block = spec.wait_ms if wait is _UNSET else wait_ms(wait)
        locks = self._locks
        locks._check_pid()
        owner = self._owner_bytes()
        replicas = acknowledgements(spec, 0 if spec.sync_replicas is not None else await locks._replicas_for(spec.key))
        plan = lock_plan(spec, owner, block, replicas)
        sent = time.monotonic()
        conn = None
        if plan.waits:
            replies, conn = await locks._blocking(plan, pin=spec.session)
        else:
            replies = await locks._pipeline(spec.key, plan.cmds, resend=True)
        try:
            grant = read_grant(spec, replies, replicas)
            if grant is not None and grant.short:
                await locks._give_back(plan, replies[0])
                raise NotAcknowledged(
                    f"lock {self.name!r}: {grant.acked} of {replicas} replicas acknowledged the grant within "
                    f"{spec.sync_timeout_ms} ms; it was released", grant.acked or 0)
        except BaseException:
            await _closed(conn)
            raise
        if grant is None:
            await _closed(conn)
            return None
        return Hold(locks, spec.key, owner, spec.side, spec.lease_ms, spec.renew,
                    grant_basis(sent, time.monotonic(), block, spec, replicas), grant.token, grant.count,
                    grant.acked, conn)

    async def __aenter__(self) -> Hold:
        hold = scoped(await self.acquire(wait=self._scoped_wait), f"lock {self.name!r}")
        task = asyncio.current_task()
        self._stacks.setdefault(task, []).append(hold)  # type: ignore[arg-type]
        return hold

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        hold = self._stacks[asyncio.current_task()].pop()  # type: ignore[index]
        try:
            await hold.release()
        except NotHeld as e:
            if exc_type is None:
                raise Lost(f"lock {hold.key!r} was lost before the block ended: "
                           f"{hold._renewal.lost_reason or 'not held at release'}") from e

    async def info(self) -> LockInfo:
        return await self._locks.info(self._spec.key)

    async def is_locked(self) -> bool:
        return await self._locks._do(lock_is_locked(self._spec.key))

    async def is_held_by(self, owner: Any = None) -> bool:
        who = check_owner(owner) if owner is not None else self._owner_bytes()
        return await self._locks._do(lock_is_held_by(self._spec.key, who, self._spec.side))

    async def hold_count(self) -> int:
        return await self._locks._do(lock_hold_count(self._spec.key, self._owner_bytes(), self._spec.side))

    async def remaining_lease(self) -> Optional[float]:
        ms = await self._locks._do(lock_remaining_lease(self._spec.key))
        return ms / 1000 if ms is not None else None

    async def force_release(self) -> bool:
        return await self._locks.force_release(self._spec.key)

    async def unlock(self) -> bool:
        return await self._locks._do(lock_release(self._spec.key, self._owner_bytes(), self._spec.side))


class ReadWriteLock:
    def __init__(self, locks: Locks, name: Any, owner: Any):
        self._locks = locks
        self._key = check_name(name)
        self._owner = None if owner is None else check_owner(owner)

    def read(self, **opts: Any) -> Lock:
        return self._side(READ, opts)

    def write(self, **opts: Any) -> Lock:
        return self._side(WRITE, opts)

    def _side(self, side: str, opts: dict) -> Lock:
        if opts.pop("fair", False):
            raise ValueError("fair does not apply to a read-write lock")
        bad = set(opts) - {"lease", "wait", "fenced", "session", "sync_replicas", "sync_timeout"}
        if bad:
            raise TypeError(f"unexpected options: {', '.join(sorted(bad))}")
        return Lock(self._locks, self._key, side, opts.get("lease"), opts.get("wait"), False,
                    opts.get("fenced", False), opts.get("session", False), opts.get("sync_replicas"),
                    opts.get("sync_timeout", DEFAULT_SYNC_TIMEOUT), self._owner)

    async def info(self) -> LockInfo:
        return await self._locks.info(self._key)

    async def is_locked(self) -> bool:
        return await self._locks._do(lock_is_locked(self._key))

    async def force_release(self) -> bool:
        return await self._locks.force_release(self._key)


class MultiHold:
    def __init__(self, locks: Locks, keys: list, owner: bytes, lease: int, renew: bool, basis: float, conn: Any):
        self.keys = [k.decode("utf-8", "replace") for k in keys]
        self.owner = owner.decode("utf-8", "replace")
        self.lost = asyncio.Event()
        self._locks, self._keys, self._owner, self._conn = locks, keys, owner, conn
        self._renewals = [Renewal(k, owner, None, lease, renew, basis) for k in keys]
        self._entries = [locks._watchdog.add(r, self.lost) for r in self._renewals]
        self._released = False
        self._pid = os.getpid()

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"a lock of {self.keys!r} was lost")

    async def release(self) -> int:
        if self._released or self._pid != os.getpid():
            return 0
        self._released = True
        for e in self._entries:
            self._locks._watchdog.remove(e)
        try:
            return await self._locks._do(multi_release(self._owner, self._keys))
        finally:
            await _closed(self._conn)
            self._conn = None

    async def __aenter__(self) -> "MultiHold":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class MultiLock:
    def __init__(self, locks: Locks, names: Sequence[Any], lease: Any, wait: Any, session: Any, owner: Any):
        self._m = m = multi_spec(names, lease, wait, session, owner, locks._watchdog_lease_ms,
                                 locks._router.cluster is not None)
        self._locks, self._keys, self._lease, self._renew = locks, m.keys, m.lease_ms, m.renew
        self._wait, self._scoped_wait, self._session, self._owner = m.wait_ms, m.scoped_wait, m.session, m.owner
        self._stacks: "weakref.WeakKeyDictionary[asyncio.Task, list]" = weakref.WeakKeyDictionary()

    async def acquire(self, *, wait: Any = _UNSET) -> Optional[MultiHold]:
        block = self._wait if wait is _UNSET else wait_ms(wait)
        locks = self._locks
        locks._check_pid()
        owner = self._owner or locks.owner().encode()
        plan = multi_plan(self._keys, owner, self._lease, block, self._session)
        sent = time.monotonic()
        conn = None
        if plan.waits:
            replies, conn = await locks._blocking(plan, pin=self._session)
            sent = time.monotonic()
        else:
            replies = await locks._pipeline(plan.key, plan.cmds, resend=True)
        try:
            taken = read_taken(replies[0])
        finally:
            if conn is not None and not granted(replies[0]):
                await _closed(conn)
        if not taken:
            return None
        return MultiHold(locks, self._keys, owner, self._lease, self._renew, sent, conn)

    async def __aenter__(self) -> MultiHold:
        h = scoped(await self.acquire(wait=self._scoped_wait), f"the locks {self._keys!r}")
        self._stacks.setdefault(asyncio.current_task(), []).append(h)  # type: ignore[arg-type]
        return h

    async def __aexit__(self, *exc: Any) -> None:
        await self._stacks[asyncio.current_task()].pop().release()  # type: ignore[index]


class Permits:
    def __init__(self, sem: "Semaphore", n: int):
        self.count = n
        self._sem = sem
        self._released = False

    async def release(self) -> int:
        if self._released:
            return await self._sem.available()
        self._released = True
        return await self._sem.release(self.count)

    async def __aenter__(self) -> "Permits":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class Semaphore:
    def __init__(self, locks: Locks, name: Any):
        self._locks = locks
        self._key = check_name(name)
        self.name = self._key.decode("utf-8", "replace")

    async def try_set_permits(self, n: int) -> bool:
        return await self._locks._do(semaphore_try_set_permits(self._key, n))

    async def add_permits(self, n: int) -> int:
        return await self._locks._do(semaphore_add_permits(self._key, n))

    async def available(self) -> int:
        return await self._locks._do(semaphore_available(self._key))

    async def acquire(self, permits: int = 1, *, wait: Optional[float] = None) -> Optional[Permits]:
        plan = semaphore_plan(self._key, permits, wait_ms(wait))
        replies = await self._locks._replies(plan)
        return Permits(self, permits) if read_taken(replies[0]) else None

    async def release(self, permits: int = 1) -> int:
        return await self._locks._do(semaphore_release(self._key, permits))


class LeasedPermit:
    def __init__(self, sem: "PermitSemaphore", pid: str, lease: int, renew: bool, basis: float):
        self.id = pid
        self.lost = asyncio.Event()
        self._sem = sem
        self._renewal = Renewal(sem._key, pid.encode(), None, lease, renew, basis, kind="permit")
        self._entry = sem._locks._watchdog.add(self._renewal, self.lost)
        self._released = False

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"permit {self.id} of {self._sem.name!r} was lost")

    async def renew(self) -> None:
        try:
            await self._sem._locks._do(permit_renew(self._renewal.key, self._renewal.owner, self._renewal.lease_ms))
        except Lost:
            self._sem._locks._watchdog._lose(self._entry, self._renewal, self.lost, "not leased")
            self.check()
        self._renewal.basis = time.monotonic()

    async def release(self) -> bool:
        if self._released:
            return False
        self._released = True
        self._sem._locks._watchdog.remove(self._entry)
        return await self._sem.release(self.id)

    async def __aenter__(self) -> "LeasedPermit":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class PermitSemaphore(Semaphore):
    async def acquire(self, permits: int = 1, *, wait: Optional[float] = None,  # type: ignore[override]
                      lease: Optional[float] = None) -> Optional[list[LeasedPermit]]:
        lms = self._locks._watchdog_lease_ms if lease is None else lease_ms(lease)
        plan = lease_plan(self._key, lms, permits, wait_ms(wait))
        ids = read_leased((await self._locks._replies(plan))[0])
        if ids is None:
            return None
        return [LeasedPermit(self, i, lms, lease is None, time.monotonic()) for i in ids]

    async def release(self, permit_id: str) -> bool:  # type: ignore[override]
        return await self._locks._do(permit_return(self._key, permit_id))


class Latch:
    def __init__(self, locks: Locks, name: Any):
        self._locks = locks
        self._key = check_name(name)

    async def try_set_count(self, n: int) -> bool:
        return await self._locks._do(latch_try_set_count(self._key, n))

    async def count_down(self) -> int:
        return await self._locks._do(latch_count_down(self._key))

    async def count(self) -> int:
        return await self._locks._do(latch_count(self._key))

    async def await_zero(self, wait: Optional[float] = None) -> bool:
        return read_latch((await self._locks._replies(latch_plan(self._key, wait_ms(wait))))[0])


class Leadership:
    def __init__(self, hold: Hold, value: str):
        self.value = value
        self.term = hold.token or 0
        self.replicas_acked = hold.replicas_acked
        self.lost = hold.lost
        self.hold = hold

    def check(self) -> None:
        self.hold.check()

    async def guard(self, *command: Any) -> Any:
        """Runs ``command`` only while this leadership stands, in this term (``hold.guard``):
        a deposed leader's command is refused with NotHeld or StaleToken, and not run."""
        return await self.hold.guard(*command)

    async def resign(self) -> None:
        if not self.hold._released:
            try:
                await self.hold.release()
            except NotHeld:
                pass

    async def __aenter__(self) -> "Leadership":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.resign()


class Election:
    def __init__(self, locks: Locks, name: Any, sync_replicas: Any, sync_timeout: Any):
        self._locks = locks
        self._key = check_name(name)
        self._replicas = check_replicas(sync_replicas)
        self._sync_timeout = sync_timeout

    async def campaign(self, value: str, wait: Optional[float] = math.inf) -> Optional[Leadership]:
        check_value(value)
        lock = Lock(self._locks, self._key, None, None, wait, False, True, False, self._replicas,
                    self._sync_timeout, value)
        hold = await lock.acquire()
        if hold is None:
            return None
        if (hold.count or 1) > 1:
            await hold.release()
            raise DuplicateValue(f"{value!r} already leads {self._key!r}")
        return Leadership(hold, value)

    async def leader(self) -> Optional[Leader]:
        return await self._locks._do(election_leader(self._key))

    async def observe(self, poll: float = 0.05) -> AsyncIterator[Optional[Leader]]:
        last: Any = _UNSET
        while True:
            now = await self.leader()
            if now != last:
                last = now
                yield now
            await asyncio.sleep(poll)
