"""The handle classes, written once for both faces (issue 38).

Every method that talks to a server is a *plan*: a generator that yields requests,
``(face method name, args)``, and receives what the face's method returned (or has its
exception thrown in). Each face runs plans with one driver, ``Locks._run``: the sync face
calls its methods and returns the plan's value; the asyncio face awaits them and returns an
awaitable. A public method is its plan, marked ``@planned``: read from an object of the sync
face it returns the value, from one of the asyncio face an awaitable of it, and its types say
so on both. Threads, tasks and sockets stay in the faces; decisions stay in ``_core``.

The requests a plan may yield (each face's ``Locks`` has these methods):

- ``("_wait", (plan, pin))``: a ``_core.Plan`` sent on a wait connection: (replies, the
  connection if ``pin``);
- ``("_read", (conn, waits, deadline))``: the next reply on a connection (``talk``);
- ``("_undo", (plan,))``: how to give back what a wait made, should the caller leave before it
  is handed over (a plan factory; the sync face runs it from another thread); yielded only
  after a wait (``_wait``), of which a plan runs at most one;
- ``("_close", (conn,))``: a connection closed (None: nothing);
- ``("_sleep", (seconds,))``;
- ``(object, method name, args)``: a method of the face's router (``server_for``, ``all``),
  server (``_take``), connection (``send_packed_command``), a cluster's node map
  (``initialize``) or the watchdog (``_unfollow``).
"""

from __future__ import annotations

import importlib
import math
import logging
import os
import sys
import time
import weakref
from types import MethodType
from typing import (Any, Awaitable, Callable, Concatenate, Generator, Generic, List, Optional, ParamSpec, Sequence,
                    Tuple, TypeVar, overload)

from ._core import (
    DEFAULT_SYNC_TIMEOUT,
    READ,
    SCAN_COUNT,
    RESEND_AFTER,
    STATS_CMD,
    WAIT_MARGIN,
    WRITE,
    LOST_BY_OTHERS,
    RAN_OUT_FIXED,
    Call,
    Leader,
    LockInfo,
    Plan,
    Waiter,
    Renewal,
    acknowledgements,
    after_renewal,
    attached_replicas,
    check_name,
    check_owner,
    check_replicas,
    check_value,
    due_now,
    event_channels,
    events_on,
    election_leader,
    grant_basis,
    held_cmd,
    hit_by_events,
    hold_guard,
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
    scan_cmd,
    top_cmd,
    wait_deadline,
    waiters_call,
    wait_ms,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ._conn import packed
from .errors import DuplicateValue, Lost, NotAcknowledged, NotHeld

T = TypeVar("T")
L = TypeVar("L", bound="Locks")
Request = tuple  # (face method name, args), or (object, method name, args)
Op = Generator[Request, Any, T]  # a plan: run by a face's ``Locks._run``
S = TypeVar("S")
P = ParamSpec("P")


class Sync:
    """What a class of the sync face is: its planned methods return their plan's value."""


class Async:
    """What a class of the asyncio face is: its planned methods return an awaitable of it."""


class planned(Generic[S, P, T]):
    """A public method written once as a plan, run by the face of the object it is read from:
    on a ``Sync`` object a call returns the plan's value, on an ``Async`` one an awaitable of
    it. The plan's parameters and value are the method's types on either face. A public plan
    that only hands over to an inner one returns that plan rather than ``yield from`` it: one
    frame fewer to resume on each request."""

    def __init__(self, plan: Callable[Concatenate[S, P], Op[T]]) -> None:
        self.plan = plan
        self.__doc__ = plan.__doc__
        self.__name__ = plan.__name__

        def run(obj: Any, *args: Any, **kwargs: Any) -> Any:
            return (obj if isinstance(obj, Locks) else obj._locks)._run(plan(obj, *args, **kwargs))

        run.__doc__, run.__name__, run.__qualname__ = plan.__doc__, plan.__name__, plan.__qualname__
        self._run = run  # made once: each read of the method binds it, as Python binds a function

    @overload
    def __get__(self, obj: None, cls: Any) -> "planned[S, P, T]": ...

    @overload
    def __get__(self, obj: Sync, cls: Any) -> Callable[P, T]: ...

    @overload
    def __get__(self, obj: Async, cls: Any) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, obj: Any, cls: Any) -> Callable[P, Any]: ...

    def __get__(self, obj: Any, cls: Any) -> Any:
        if obj is None:
            return self
        return MethodType(self._run, obj)

UNSET: Any = object()
EVENTS_CONFIG = ("CONFIG", "GET", "notify-keyspace-events")
LINK_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)  # a broken link, not a server's refusal


def talk(conn: Any, cmds: Sequence[Sequence[Any]], replies: list, waits: bool, deadline: Optional[float]) -> Op[list]:
    """Sends ``cmds`` in one write on ``conn`` and reads each reply into ``replies`` (a
    server's error as a value), which tells how far it got should it be cut. ``waits``: a
    wait connection, whose first reply may come when the server's wait ends; the face reads it
    so that an interrupt lands within, and gives up a silence past ``deadline``."""
    yield (conn, "send_packed_command", (packed(conn, cmds),))
    while len(replies) < len(cmds):
        try:
            replies.append((yield ("_read", (conn, waits, deadline))))
        except ResponseError as e:
            replies.append(e)
    return replies


def take(server: Any, waits: bool, timeout: Optional[float] = None) -> Op[Any]:
    """An idle connection of ``server``, or (none idle) a new one the face opens. The pool is
    looked at here, not through the face: most calls find one, and a trip through the
    driver costs each call as much as a short command's own work."""
    conn = server.idle(server.kind(waits, timeout))
    if conn is None:
        conn = yield (server, "_take", (waits, timeout))
    return conn


def server_of(router: Any, key: bytes) -> Op[Any]:
    """The server of ``key``: the one server at once, a cluster's node through the face (the
    asyncio face loads the node map first)."""
    if router.single is not None:
        return router.single
    return (yield (router, "server_for", (key,)))


def exchange(server: Any, cmds: Sequence[Sequence[Any]], timeout: Optional[float] = None) -> Op[list]:
    """``cmds`` on a connection of ``server`` (a face's ``_Server``), every reply read. A
    broken link raises, and the connection is dropped. ``timeout``: the watchdog's (renewals
    must not outwait a lease), the socket timeout of connections of its own (sync) or a
    deadline on each read (asyncio)."""
    kind = server.kind(False, timeout)
    conn = server.idle(kind)  # ``take``, inlined: every command passes here
    if conn is None:
        conn = yield (server, "_take", (False, timeout))
    try:
        out = yield from talk(conn, cmds, [], False, None if timeout is None else time.monotonic() + timeout)
    except BaseException:
        yield ("_close", (conn,))
        raise
    server.give(conn, kind)
    return out


def ask(server: Any, *args: Any) -> Op[Any]:
    """One command on ``server``, its error raised."""
    return raise_if_error((yield from exchange(server, [args]))[0])


def close(conn: Any) -> Op[None]:
    if conn is not None:
        yield ("_close", (conn,))


def returns(value: T) -> Op[T]:
    """A plan that sends nothing (``__enter__`` of what is already held)."""
    return value
    yield  # noqa: unreachable; makes this a generator


class Scope:
    """What both faces' scoped forms run: ``_enter()`` and ``_exit(exc_type)`` plans."""

    _locks: Any

    def _enter(self) -> Op[Any]:
        return (yield from returns(self))

    def _exit(self, exc_type: Any, *rest: Any) -> Op[None]:
        yield from self._release()  # type: ignore[attr-defined]


class SyncScope(Scope, Sync):
    """``with x:`` (the sync face)."""

    def __enter__(self) -> Any:
        return self._locks._run(self._enter())

    def __exit__(self, *exc: Any) -> None:
        self._locks._run(self._exit(*exc))


class AsyncScope(Scope, Async):
    """``async with x:`` (the asyncio face): each returns the awaitable of its plan."""

    def __aenter__(self) -> Any:
        return self._locks._run(self._enter())

    def __aexit__(self, *exc: Any) -> Any:
        return self._locks._run(self._exit(*exc))


class Waiting:
    """How far one wait got (``Locks._waiting``); ``gives_back``: a link broken after the
    grant was read gives it back there (the asyncio face; the sync face's ``_abandon`` does)."""

    __slots__ = ("server", "conn", "sent", "replies", "pinned", "undo", "left", "gives_back")

    def __init__(self, gives_back: bool = False, pinned: bool = False) -> None:
        self.server: Any = None
        self.conn: Any = None
        self.sent = False
        self.replies: Optional[list] = None
        self.pinned = pinned  # conn is the caller's (SESSION), not back in the pool
        self.undo: Any = None  # gives back what was made from the replies
        self.left = False  # the caller left: no resend
        self.gives_back = gives_back


# ---------------------------------------------------------------- Locks

# The face's classes, which the generic shared ones name (``_sync.Lock`` is ``Lock[_sync.Hold]``).
H = TypeVar("H", bound="Hold")
MH = TypeVar("MH", bound="MultiHold")
PM = TypeVar("PM", bound="Permits")
LP = TypeVar("LP", bound="LeasedPermit")
LD = TypeVar("LD", bound="Leadership")
LK = TypeVar("LK", bound="Lock")
RW = TypeVar("RW", bound="ReadWriteLock")
ML = TypeVar("ML", bound="MultiLock")
SM = TypeVar("SM", bound="Semaphore")
PS = TypeVar("PS", bound="PermitSemaphore")
LT = TypeVar("LT", bound="Latch")
EL = TypeVar("EL", bound="Election")


class Locks(Generic[LK, RW, ML, SM, PS, LT, EL]):
    """What both faces' ``Locks`` share: the handles, the queries, the per-process state.
    A face adds its driver (``_run``) and the requests' methods, and names its module in
    ``_face`` (whose handle classes the factories make)."""

    _face: Any  # the module of the face whose Locks this is
    _link_errors = LINK_ERRORS

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        module = sys.modules[cls.__module__]
        if hasattr(module, "_Router"):  # a face's own Locks (a user's subclass keeps its face)
            cls._face = module

    def __init__(self, client: Any, *, watchdog_lease: float = 30.0):
        self._watchdog_lease_ms = lease_ms(watchdog_lease)
        self._router = self._face._Router(client, self._face._Server)
        self._replicas: dict = {}
        self._fresh()

    @classmethod
    def from_url(cls: type[L], url: str, *, cluster: bool = False, watchdog_lease: float = 30.0, **kwargs: Any) -> L:
        """``redis://``, ``rediss://`` (TLS: ``ssl_ca_certs=``, ``ssl_certfile=``,
        ``ssl_keyfile=``) or ``unix://``; ``cluster=True`` for a Redis Cluster."""
        if not isinstance(url, str):
            raise TypeError("url must be a str")
        redis = importlib.import_module(cls._redis)
        client = (redis.RedisCluster if cluster else redis.Redis).from_url(url, **kwargs)
        return cls(client, watchdog_lease=watchdog_lease)

    _redis: str  # the face's redis-py module, whose clients ``from_url`` makes

    def _fresh(self) -> None:
        """The state of one process (again after fork(): the parent's is the parent's)."""
        self.client_id = new_client_id()
        self._owner_seq = 0
        self._pid = os.getpid()
        self._owners: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # caller -> owner id
        self._owner_mutex = self._mutex_type()
        self._watchdog = self._face._Watchdog(self)

    # The face's: who calls (the thread, the task), and a lock for what callers share.
    _caller: Any
    _mutex_type: Any

    def owner(self) -> str:
        """The calling thread's (asyncio: task's) owner id, ``<client-uuid>:<n>``."""
        caller = self._caller()
        o = self._owners.get(caller)
        if o is None:
            with self._owner_mutex:
                self._owner_seq += 1
                o = self._owners[caller] = owner_id(self.client_id, self._owner_seq)
        return o

    _scopes = weakref.WeakKeyDictionary  # a handle's open scopes: caller -> its stack

    def _scope(self, scopes: weakref.WeakKeyDictionary) -> list:
        """The caller's open scopes of one handle (``with``, ``async with``), innermost last."""
        return scopes.setdefault(self._caller(), [])

    def _run(self, plan: Op[T]) -> Any:
        raise NotImplementedError

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            self._router.forget()
            self._fresh()

    # ------------------------------------------------------------ handles

    def lock(
        self,
        name: Any,
        *,
        lease: Optional[float] = None,
        wait: Optional[float] = None,
        fair: bool = False,
        fenced: bool = False,
        session: bool = False,
        sync_replicas: Optional[int] = None,
        sync_timeout: float = DEFAULT_SYNC_TIMEOUT,
        owner: Any = None,
    ) -> LK:
        return self._face.Lock(self, name, None, lease, wait, fair, fenced, session, sync_replicas, sync_timeout,
                               owner)

    def read_write(self, name: Any, *, owner: Any = None) -> RW:
        return self._face.ReadWriteLock(self, name, owner)

    def multi(
        self,
        names: Sequence[Any],
        *,
        lease: Optional[float] = None,
        wait: Optional[float] = None,
        session: bool = False,
        owner: Any = None,
    ) -> ML:
        return self._face.MultiLock(self, names, lease, wait, session, owner)

    def semaphore(self, name: Any) -> SM:
        return self._face.Semaphore(self, name)

    def permit_semaphore(self, name: Any) -> PS:
        return self._face.PermitSemaphore(self, name)

    def latch(self, name: Any) -> LT:
        return self._face.Latch(self, name)

    def election(self, name: Any, *, sync_replicas: Optional[int] = None,
                 sync_timeout: float = DEFAULT_SYNC_TIMEOUT) -> EL:
        return self._face.Election(self, name, sync_replicas, sync_timeout)

    # ------------------------------------------------------------ plumbing

    def _sending(self, key: bytes, cmds: Sequence[Sequence[Any]], resend: bool = False,
                 timeout: Optional[float] = None) -> Op[list]:
        """``cmds`` on the server of ``key`` (server errors come back as values). ``resend``: a
        broken link sends them once more (they carry REQ ids, so the server applies them at
        most once). A MOVED reply in a cluster sends them to the node it names."""
        self._check_pid()
        r = self._router  # ``server_of``, inlined: every command passes here
        server = r.single if r.single is not None else (yield (r, "server_for", (key,)))
        out: list = []
        for attempt in range(3):
            try:
                out = yield from exchange(server, cmds, timeout)
            except self._link_errors:
                if not resend or attempt == 2:
                    raise
                yield ("_sleep", (RESEND_AFTER,))
                continue
            moved = next((v for v in out if isinstance(v, MovedError)), None)
            if moved is None or self._router.cluster is None:
                return out
            server = yield from self._moved(moved)
        return out

    def _waiting(self, plan: Plan, w: "Waiting") -> Op[list]:
        """Sends ``plan.cmds`` (the first may block in the server) on a wait connection and
        reads every reply. A broken link sends them again (REQ ids) with the wait that is left
        (``_core.resend_wait``), unless the caller left; MOVED sends them to the node it names.
        ``w`` records how far it got (which server and connection, whether it was sent, the
        replies once all are read), for the face to end a wait its caller left."""
        self._check_pid()
        w.server = yield from server_of(self._router, plan.key)
        cmds = plan.cmds
        deadline = wait_deadline(time.monotonic(), plan.block)
        tries = 0
        while True:
            w.conn = yield from take(w.server, True)
            replies: list = []
            try:
                w.sent = True
                yield from talk(w.conn, cmds, replies, True, None if deadline is None else deadline + WAIT_MARGIN)
            except self._link_errors as e:
                yield from close(w.conn)
                if replies:
                    # The grant was read; what follows (HGET, WAIT) is lost: it is given back.
                    w.replies = replies
                    if w.gives_back:
                        yield from self._giving_back(plan, replies[0])
                    raise
                tries += 1
                again = resend_wait(cmds[0], tries, isinstance(e, RedisTimeoutError), plan.block, deadline,
                                    time.monotonic())
                if again is None or w.left:
                    raise
                yield ("_sleep", (RESEND_AFTER,))
                cmds = [again] + list(cmds[1:])
                continue
            except BaseException:
                yield from close(w.conn)
                raise
            moved = replies[0] if isinstance(replies[0], MovedError) else None
            if moved is not None and self._router.cluster is not None:
                w.sent = False  # refused: nothing was applied
                w.server.give(w.conn, "waits")
                w.server = yield from self._moved(moved)
                continue
            w.replies = replies
            return replies

    def _moved(self, e: MovedError) -> Op[Any]:
        """The server a MOVED reply names, once the cluster's node map is loaded again (if
        that fails, the node the reply names is asked all the same)."""
        try:
            yield (self._router.cluster.nodes_manager, "initialize", ())
        except Exception:
            pass
        return self._router.at(e.host, int(e.port))

    @staticmethod
    def _handed(w: "Waiting", replies: list) -> Tuple[list, Any]:
        """A wait's result handed to its caller: (replies, the connection if pinned); a wait
        connection that is not pinned goes back to its pool."""
        if w.pinned:
            return replies, w.conn
        w.server.give(w.conn, "waits")
        return replies, None

    def _reclaiming(self, plan: Plan, replies: Optional[list]) -> Op[None]:
        """A wait its caller left, whose server-side wait is over: unless its replies are
        known, the call is sent again with its REQ id and a 1 ms wait (a grant the first got
        is replayed, or the call runs anew). What either replied is given back."""
        if replies is None and plan.req:
            try:
                replies = yield from self._sending(plan.key, [plan.again()], True)
            except Exception:
                return
        if replies:
            yield from self._giving_back(plan, replies[0])

    def _giving_back(self, plan: Plan, reply: Any) -> Op[None]:
        cmds = plan.give_back(reply)
        if cmds:
            try:
                yield from self._sending(plan.key, cmds, True)
            except Exception:
                pass

    def _replicas_of(self, key: bytes) -> Op[int]:
        """How many replicas the key's server has attached (looked up once a second)."""
        r = self._router  # ``server_of``, inlined: every command passes here
        server = r.single if r.single is not None else (yield (r, "server_for", (key,)))
        now = time.monotonic()
        seen = self._replicas.get(id(server))
        if seen is None or now - seen[0] > 1.0:
            seen = (now, attached_replicas((yield from ask(server, "INFO", "replication"))))
            self._replicas[id(server)] = seen
        return int(seen[1])

    def _replicas_for(self, key: bytes) -> Any:
        return self._run(self._replicas_of(key))

    def _doing(self, c: Call) -> Op[Any]:
        """The plan of one ``_core.Call``. Plans ``yield from`` it (and ``_sending``) rather than
        asking the face to run it: a nested run costs a driver of its own per command."""
        return c.read((yield from self._sending(c.key, c.cmds, c.resend)))

    def _replies(self, plan: Plan, pin: bool = False) -> Op[Tuple[list, Any]]:
        """The replies of an acquiring plan: waited for on a wait connection (and that
        connection if ``pin``), or sent at once (resent after a broken link: REQ ids, or a mere
        look)."""
        if plan.waits:
            return (yield ("_wait", (plan, pin)))
        return (yield from self._sending(plan.key, plan.cmds, True)), None

    def _call(self, key: bytes, *args: Any) -> Any:
        return self._run(self._calling(key, args))

    def _calling(self, key: bytes, args: Sequence[Any]) -> Op[Any]:
        return raise_if_error((yield from self._sending(key, [args]))[0])

    # ------------------------------------------------------------ queries

    def scan(self, match: Optional[str] = None, type: Optional[str] = None, count: int = SCAN_COUNT) -> "Scan":
        """Every lock (``type``: ``"lock"`` or ``"rwlock"``), on every primary, a page at a
        time: ``for`` over it (the sync face), ``async for`` (the asyncio face)."""
        return Scan(self, match, type, count)

    @planned
    def info(self, name: Any) -> Op[LockInfo]:
        """``LockInfo`` of the lock ``name``."""
        return (yield from self._doing(lock_info(check_name(name))))

    @planned
    def force_release(self, name: Any) -> Op[bool]:
        return (yield from self._doing(lock_force_release(check_name(name))))

    @planned
    def waiters(self, name: Any) -> Op[List[Waiter]]:
        """The ``Waiter`` list of the lock ``name``."""
        return (yield from self._doing(waiters_call(check_name(name))))

    @planned
    def stats(self) -> Op[dict]:
        """``INFO rlock`` per primary: ``{"host:port": {field: value}}``."""
        return self._stats()

    def _stats(self) -> Op[dict]:
        out = {}
        for s in (yield (self._router, "all", ())):
            out[server_name(s.settings.kwargs)] = parse_stats((yield from ask(s, *STATS_CMD)))
        return out

    @planned
    def top(self, count: int = 10) -> Op[list]:
        """``RLOCK.TOP``: the most contended keys, on every primary."""
        return (yield from self._top(top_cmd(count), count))

    def _top(self, cmd: list, count: int) -> Op[list]:
        out: list = []
        for s in (yield (self._router, "all", ())):
            out += parse_top((yield from ask(s, *cmd)))
        return merge_top(out, count)


class Stream:
    """An iterator of either face: ``for`` over it (sync), ``async for`` (asyncio). Each item
    is the value of one plan, ``_next()``, run by the face's driver; ``UNSET`` ends it."""

    _locks: Any

    def _next(self) -> Op[Any]:
        raise NotImplementedError

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Any:
        item = self._locks._run(self._next())
        if item is UNSET:
            raise StopIteration
        return item

    def __aiter__(self) -> "Stream":
        return self

    async def __anext__(self) -> Any:
        item = await self._locks._run(self._next())
        if item is UNSET:
            raise StopAsyncIteration
        return item


class Scan(Stream):
    """``Locks.scan``'s iterator: each page (``RLOCK.SCAN`` on one primary) is one plan,
    run by the face when the entries read so far are used up."""

    def __init__(self, locks: Locks, match: Optional[str], type: Optional[str], count: int):
        scan_cmd(0, match, type, count)  # refused here, before anything is sent
        self._locks = locks
        self._args = (match, type, count)
        self._servers: Optional[list] = None
        self._cursor = 0
        self._entries: list = []

    def _next(self) -> Op[Any]:
        """The next ``ScannedLock``, or ``UNSET`` at the end."""
        if self._servers is None:
            self._servers = list((yield (self._locks._router, "all", ())))
        while not self._entries and self._servers:
            self._cursor, self._entries = parse_scan((yield from ask(self._servers[0],
                                                                     *scan_cmd(self._cursor, *self._args))))
            if self._cursor == 0:
                self._servers.pop(0)
            self._entries.reverse()
        return self._entries.pop() if self._entries else UNSET


# ---------------------------------------------------------------- locks


def _dropped(dog: Any, entry: int, key: bytes, owner: bytes, side: Optional[str], pid: int, gone: list) -> None:
    """A Hold dropped without release: the watchdog gives it back."""
    if pid != os.getpid() or gone[0]:
        return
    dog.remove(entry)
    dog.release_later(key, release_cmd(key, owner, side, new_req_id()))


class Hold(Scope):
    """A granted lock: ``token`` (fenced), ``count`` (hold count), ``replicas_acked``,
    ``lost`` (an Event of the face, set when the hold is gone), ``check()``, ``release()``."""

    def __init__(self, locks: Any, key: bytes, owner: bytes, side: Optional[str], lease: int, renew: bool,
                 basis: float, token: Optional[int], count: Optional[int], replicas: Optional[int], conn: Any = None,
                 activate: bool = True):
        self.key = key.decode("utf-8", "replace")
        self.owner = owner.decode("utf-8", "replace")
        self.side = side
        self.token = token
        self.count = count
        self.replicas_acked = replicas
        self.lost = locks._event()
        self._locks = locks
        self._key = key
        self._owner = owner
        self._conn = conn
        self._pid = os.getpid()
        self._released = False
        self._renewal = Renewal(key, owner, side, lease, renew, basis)
        self._entry = 0
        self._finalizer: Optional[weakref.finalize] = None
        self._gone = [False]  # set when released: a finalizer registered meanwhile does nothing
        if activate:
            self._activate()

    def _activate(self) -> None:
        """Renewed by the watchdog and given back if dropped. Apart from ``__init__`` so that a
        wait can record the Hold first (``_undo``): if the thread is interrupted in here,
        ``release()`` undoes what was done."""
        dog = self._locks._watchdog
        self._entry = dog.new_entry()
        self._finalizer = weakref.finalize(self, _dropped, dog, self._entry, self._key, self._owner, self.side,
                                           self._pid, self._gone)
        dog.add(self._renewal, self.lost, self._entry)

    def check(self) -> None:
        """Raises Lost if the hold is gone."""
        if self.lost.is_set():
            raise Lost(f"lock {self.key!r}: {self._renewal.lost_reason or 'lost'}")

    @property
    def is_lost(self) -> bool:
        return self.lost.is_set()

    @planned
    def renew(self) -> Op[None]:
        """Renews the lease now (the watchdog does it by itself)."""
        return self._renew()

    def _renew(self) -> Op[None]:
        self.check()
        r = self._renewal
        try:
            yield from self._locks._doing(lock_renew(self._key, self._owner, self.side, r.lease_ms))
        except Lost:
            self._locks._watchdog._lose(self._entry, r, self.lost, "the renewal was refused")
            raise
        r.basis = time.monotonic()

    @planned
    def guard(self, *command: Any) -> Op[Any]:
        """Runs ``command`` (``"SET", "{orders}:total", "5"``) in the server only while this hold
        stands (``RLOCK.GUARD``, checked in the same server turn), and returns its reply. The
        owner must hold the lock now (on this hold's side), its lease counted to the moment of
        the call, and a fenced hold's token must still be the lock's. Otherwise nothing runs:
        NotHeld (the lease ran out, the lock was force-released or another owner took it), or
        StaleToken (the same owner took it again as a newer hold). The inner command's own
        error is redis-py's. Sent once: a broken link raises, since the command may have run.
        In a cluster, every key of the command must be in the lock's slot (a hash tag)."""
        return self._guard(command)

    def _guard(self, command: Sequence[Any]) -> Op[Any]:
        return (yield from self._locks._doing(hold_guard(self._key, self._owner, self.side, self.token, command, self._released)))

    @planned
    def release(self) -> Op[bool]:
        """Gives this hold back. True when the lock is free now, False when a re-entry was
        undone. Raises NotHeld when the lock was no longer held (lost). In a child process
        after fork(), releases nothing of the parent's and returns False."""
        return self._release()

    def _release(self) -> Op[bool]:
        if self._pid != os.getpid() or self._released:
            return False
        call = lock_release(self._key, self._owner, self.side)
        cmd = call.cmds[0]
        try:
            self._released = True
            self._gone[0] = True
            if self._finalizer is not None:
                self._finalizer.detach()
            self._locks._watchdog.remove(self._entry)
            replies = yield from self._locks._sending(self._key, [cmd], True)
        except self._locks._link_errors:
            raise
        except BaseException:
            # Interrupted (KeyboardInterrupt, an exception raised in this thread, a cancelled
            # task): the watchdog sends it, with the same REQ id, so it is applied once
            # whether or not it reached the server.
            self._locks._watchdog.release_later(self._key, cmd)
            raise
        finally:
            conn, self._conn = self._conn, None
            yield from close(conn)
        return bool(call.read(replies))

    def __repr__(self) -> str:
        return f"Hold(key={self.key!r}, owner={self.owner!r}, token={self.token}, lost={self.lost.is_set()})"


class LockKey:
    """What a lock's handles ask about the lock's key: a Lock's, or a ReadWriteLock's (both
    sides)."""

    _locks: Any
    _key: bytes

    @planned
    def info(self) -> Op[LockInfo]:
        return (yield from self._locks._doing(lock_info(self._key)))

    @planned
    def is_locked(self) -> Op[bool]:
        return (yield from self._locks._doing(lock_is_locked(self._key)))

    @planned
    def force_release(self) -> Op[bool]:
        return (yield from self._locks._doing(lock_force_release(self._key)))


class Lock(LockKey, Scope, Generic[H]):
    """A lock handle. The scoped form acquires (NotAcquired if the wait ends first) and
    releases; ``lock.acquire()`` returns a Hold or None."""

    def __init__(self, locks: Any, name: Any, side: Optional[str], lease: Any, wait: Any, fair: Any, fenced: Any,
                 session: Any, sync_replicas: Any, sync_timeout: Any, owner: Any):
        self._spec = lock_spec(name, side, lease, wait, fair, fenced, session, sync_replicas, sync_timeout,
                               locks._watchdog_lease_ms)
        self._locks = locks
        self._owner = None if owner is None else check_owner(owner)
        self._scopes = locks._scopes()
        self._scoped_wait = scoped_wait(wait)
        self._key = self._spec.key
        self.name = self._key.decode("utf-8", "replace")

    def owner(self) -> str:
        """The owner this handle acquires for, from the calling thread (task)."""
        return self._owner_bytes().decode("utf-8", "replace")

    def _owner_bytes(self) -> bytes:
        return self._owner or self._locks.owner().encode()

    @planned
    def acquire(self, *, wait: Any = UNSET) -> Op[Optional[H]]:
        """Takes the lock (or re-enters it) for the caller's owner: a Hold, or None if it is
        not granted within the wait (the handle's ``wait``, or none: one try)."""
        return self._acquire(wait)

    def _acquire(self, wait: Any) -> Op[Optional[H]]:
        spec = self._spec
        block = spec.wait_ms if wait is UNSET else wait_ms(wait)
        locks = self._locks
        locks._check_pid()
        owner = self._owner_bytes()
        seen = 0 if spec.sync_replicas is not None else (yield from locks._replicas_of(spec.key))
        replicas = acknowledgements(spec, seen)
        plan = lock_plan(spec, owner, block, replicas)
        sent = time.monotonic()
        replies, conn = yield from self._locks._replies(plan, spec.session)
        try:
            grant = read_grant(spec, replies, replicas)
        except BaseException:
            yield from close(conn)
            raise
        if grant is None:
            yield from close(conn)  # a session connection that holds nothing
            return None
        if grant.short:
            try:
                yield from self._locks._sending(spec.key, plan.give_back(replies[0]), True)
            finally:
                yield from close(conn)
            raise NotAcknowledged(
                f"lock {self.name!r}: {grant.acked} of {replicas} replicas acknowledged the grant within "
                f"{spec.sync_timeout_ms} ms; it was released", grant.acked or 0)
        basis = grant_basis(sent, time.monotonic(), block, spec, replicas)
        hold = locks._face.Hold(locks, spec.key, owner, spec.side, spec.lease_ms, spec.renew, basis,
                                grant.token, grant.count, grant.acked, conn, activate=False)
        if plan.waits:  # only a wait is left early; a plan runs at most one
            yield ("_undo", (hold._release,))
        hold._activate()
        return hold

    def _enter(self) -> Op[Hold]:
        hold = scoped((yield from self._acquire(self._scoped_wait)), f"lock {self.name!r}")
        self._locks._scope(self._scopes).append(hold)
        return hold

    def _exit(self, exc_type: Any, *rest: Any) -> Op[None]:
        """A scope ends: a hold lost meanwhile is told as Lost, unless the body raised."""
        hold = self._locks._scope(self._scopes).pop()
        try:
            yield from hold._release()
        except NotHeld as e:
            if exc_type is None:
                raise Lost(f"lock {hold.key!r} was lost before the block ended: "
                           f"{hold._renewal.lost_reason or 'not held at release'}") from e

    # queries, no hold needed
    @planned
    def is_held_by(self, owner: Any = None) -> Op[bool]:
        """Whether ``owner`` (this handle's owner when None) holds the lock (on its side)."""
        who = self._owner_bytes() if owner is None else check_owner(owner)
        return (yield from self._locks._doing(lock_is_held_by(self._spec.key, who, self._spec.side)))

    @planned
    def hold_count(self) -> Op[int]:
        """This handle's owner's hold count (on its side for a read-write lock)."""
        return (yield from self._locks._doing(lock_hold_count(self._spec.key, self._owner_bytes(), self._spec.side)))

    @planned
    def remaining_lease(self) -> Op[Optional[float]]:
        """The lease left in seconds; None when the lock is free (or has no expiry)."""
        return self._remaining_lease()

    def _remaining_lease(self) -> Op[Optional[float]]:
        ms = yield from self._locks._doing(lock_remaining_lease(self._spec.key))
        return None if ms is None else ms / 1000

    @planned
    def unlock(self) -> Op[bool]:
        """One RLOCK.RELEASE for this handle's owner, with no Hold (a hold a previous run left)."""
        return (yield from self._locks._doing(lock_release(self._spec.key, self._owner_bytes(), self._spec.side)))


class ReadWriteLock(LockKey, Generic[LK]):
    """Redisson's RReadWriteLock: ``read(...)`` and ``write(...)`` are Lock handles sharing
    one owner (the caller's unless ``owner=`` was given)."""

    def __init__(self, locks: Any, name: Any, owner: Any):
        self._locks = locks
        self._key = check_name(name)
        self._owner = None if owner is None else check_owner(owner)

    def read(self, **opts: Any) -> LK:
        return self._side(READ, opts)

    def write(self, **opts: Any) -> LK:
        return self._side(WRITE, opts)

    def _side(self, side: str, opts: dict) -> LK:
        if opts.pop("fair", False):
            raise ValueError("fair does not apply to a read-write lock")
        bad = set(opts) - {"lease", "wait", "fenced", "session", "sync_replicas", "sync_timeout"}
        if bad:
            raise TypeError(f"unexpected options: {', '.join(sorted(bad))}")
        return self._locks._face.Lock(self._locks, self._key, side, opts.get("lease"), opts.get("wait"), False,
                                      opts.get("fenced", False), opts.get("session", False),
                                      opts.get("sync_replicas"), opts.get("sync_timeout", DEFAULT_SYNC_TIMEOUT),
                                      self._owner)



class MultiHold(Scope):
    """Every lock of a multi-key acquire; ``lost`` is set when any is lost."""

    def __init__(self, locks: Any, keys: list, owner: bytes, lease: int, renew: bool, basis: float, conn: Any):
        self.keys = [k.decode("utf-8", "replace") for k in keys]
        self.owner = owner.decode("utf-8", "replace")
        self.lost = locks._event()
        self._locks, self._keys, self._owner, self._conn = locks, keys, owner, conn
        self._renewals = [Renewal(k, owner, None, lease, renew, basis) for k in keys]
        self._entries = [locks._watchdog.add(r, self.lost) for r in self._renewals]
        self._released = False
        self._pid = os.getpid()

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"a lock of {self.keys!r} was lost")

    @planned
    def release(self) -> Op[int]:
        """RLOCK.MRELEASE: how many of the locks are free now. In a child process after
        fork(), releases nothing of the parent's and returns 0."""
        return self._release()

    def _release(self) -> Op[int]:
        if self._released or self._pid != os.getpid():
            return 0
        self._released = True
        for e in self._entries:
            self._locks._watchdog.remove(e)
        try:
            return int((yield from self._locks._doing(multi_release(self._owner, self._keys))))
        finally:
            conn, self._conn = self._conn, None
            yield from close(conn)


class MultiLock(Scope, Generic[MH]):
    """Several locks, all or none (RLOCK.MACQUIRE). In a cluster the names must share a
    slot (a hash tag): names in several slots are refused before anything is sent."""

    def __init__(self, locks: Any, names: Sequence[Any], lease: Any, wait: Any, session: Any, owner: Any):
        self._m = m = multi_spec(names, lease, wait, session, owner, locks._watchdog_lease_ms,
                                 locks._router.cluster is not None)
        self._locks, self._keys, self._lease, self._renew = locks, m.keys, m.lease_ms, m.renew
        self._wait, self._scoped_wait, self._session, self._owner = m.wait_ms, m.scoped_wait, m.session, m.owner
        self._scopes = locks._scopes()

    @planned
    def acquire(self, *, wait: Any = UNSET) -> Op[Optional[MH]]:
        """Takes every lock for the caller's owner, or none: None if they are not all granted
        within the wait (the handle's ``wait``, or none: one try)."""
        return self._acquire(wait)

    def _acquire(self, wait: Any) -> Op[Optional[MH]]:
        block = self._wait if wait is UNSET else wait_ms(wait)
        locks = self._locks
        locks._check_pid()
        owner = self._owner or locks.owner().encode()
        plan = multi_plan(self._keys, owner, self._lease, block, self._session)
        sent = time.monotonic()
        replies, conn = yield from self._locks._replies(plan, self._session)
        try:
            taken = read_taken(replies[0])
        except BaseException:
            yield from close(conn)
            raise
        if not taken:
            yield from close(conn)
            return None
        basis = sent if block is None else time.monotonic()
        hold = locks._face.MultiHold(locks, self._keys, owner, self._lease, self._renew, basis, conn)
        if plan.waits:  # only a wait is left early; a plan runs at most one
            yield ("_undo", (hold._release,))
        return hold

    def _enter(self) -> Op[MultiHold]:
        h = scoped((yield from self._acquire(self._scoped_wait)), f"the locks {self._keys!r}")
        self._locks._scope(self._scopes).append(h)
        return h

    def _exit(self, *exc: Any) -> Op[None]:
        yield from self._locks._scope(self._scopes).pop()._release()


# ---------------------------------------------------------------- semaphores, latches


class Permits(Scope):
    """Permits taken from a Semaphore; ``release()`` gives them back."""

    def __init__(self, sem: "Semaphore", n: int):
        self.count = n
        self._sem = sem
        self._locks = sem._locks
        self._released = False

    @planned
    def release(self) -> Op[int]:
        return self._release()

    def _release(self) -> Op[int]:
        if self._released:
            return int((yield from self._locks._doing(semaphore_available(self._sem._key))))
        self._released = True
        return int((yield from self._locks._doing(semaphore_release(self._sem._key, self.count))))


class Semaphore(Generic[PM]):
    """Redisson's RSemaphore: waits run in the server, in arrival order."""

    def __init__(self, locks: Any, name: Any):
        self._locks = locks
        self._key = check_name(name)
        self.name = self._key.decode("utf-8", "replace")

    @planned
    def try_set_permits(self, n: int) -> Op[bool]:
        return (yield from self._locks._doing(semaphore_try_set_permits(self._key, n)))

    @planned
    def add_permits(self, n: int) -> Op[int]:
        return (yield from self._locks._doing(semaphore_add_permits(self._key, n)))

    @planned
    def available(self) -> Op[int]:
        return (yield from self._locks._doing(semaphore_available(self._key)))

    @planned
    def acquire(self, permits: int = 1, *, wait: Optional[float] = None) -> Op[Optional[PM]]:
        """Takes ``permits`` permits: Permits, or None if not granted within ``wait`` (None:
        one try). The wait runs in the server."""
        return self._acquire(permits, wait)

    def _acquire(self, permits: int, wait: Optional[float]) -> Op[Any]:
        plan = semaphore_plan(self._key, permits, wait_ms(wait))
        replies, _ = yield from self._locks._replies(plan)
        if not read_taken(replies[0]):
            return None
        got = self._locks._face.Permits(self, permits)
        if plan.waits:
            yield ("_undo", (got._release,))
        return got

    @planned
    def release(self, permits: int = 1) -> Op[int]:
        return (yield from self._locks._doing(semaphore_release(self._key, permits)))


class LeasedPermit(Scope):
    """One leased permit: ``id``, ``lost``, ``renew()``, ``release()``; renewed by the
    watchdog unless its lease was fixed."""

    def __init__(self, sem: "PermitSemaphore", pid: str, lease: int, renew: bool, basis: float):
        self.id = pid
        self._sem = sem
        self._locks = locks = sem._locks
        self.lost = locks._event()
        self._renewal = Renewal(sem._key, pid.encode(), None, lease, renew, basis, kind="permit")
        self._entry = locks._watchdog.add(self._renewal, self.lost)
        self._released = False

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"permit {self.id} of {self._sem.name!r} was lost")

    @planned
    def renew(self) -> Op[None]:
        return self._renew()

    def _renew(self) -> Op[None]:
        r = self._renewal
        try:
            yield from self._locks._doing(permit_renew(r.key, r.owner, r.lease_ms))
        except Lost:
            self._locks._watchdog._lose(self._entry, r, self.lost, "not leased")
            self.check()
        r.basis = time.monotonic()

    @planned
    def release(self) -> Op[bool]:
        return self._release()

    def _release(self) -> Op[bool]:
        if self._released:
            return False
        self._released = True
        self._locks._watchdog.remove(self._entry)
        return bool((yield from self._locks._doing(permit_return(self._sem._key, self.id))))


class PermitSemaphore(Semaphore[Any], Generic[LP]):
    """Redisson's RPermitExpirableSemaphore: leased permits that come back at their lease's end."""

    @planned
    def acquire(self, permits: int = 1, *, wait: Optional[float] = None,  # type: ignore[override]
                lease: Optional[float] = None) -> Op[Optional[List[LP]]]:
        """Leases ``permits`` permits: a list of LeasedPermit, or None if not granted within
        ``wait`` (None: one try)."""
        return self._lease(permits, wait, lease)

    def _lease(self, permits: int, wait: Optional[float], lease: Optional[float]) -> Op[Optional[list]]:
        block = wait_ms(wait)
        lms = self._locks._watchdog_lease_ms if lease is None else lease_ms(lease)
        plan = lease_plan(self._key, lms, permits, block)
        sent = time.monotonic()
        replies, _ = yield from self._locks._replies(plan)
        ids = read_leased(replies[0])
        if ids is None:
            return None
        basis = sent if block is None else time.monotonic()
        made: list = []

        def undo() -> Op[None]:
            # Those made give themselves back; the rest go back under the plan's REQ ids.
            for p in made:
                yield from p._release()
            rest = plan.give_back(ids)[len(made):]
            if rest:
                yield from self._locks._sending(self._key, rest, True)

        if plan.waits:
            yield ("_undo", (undo,))
        for i in ids:
            made.append(self._locks._face.LeasedPermit(self, i, lms, lease is None, basis))
        return made

    @planned
    def release(self, permit_id: str) -> Op[bool]:  # type: ignore[override]
        return (yield from self._locks._doing(permit_return(self._key, permit_id)))


class Latch:
    """Redisson's RCountDownLatch."""

    def __init__(self, locks: Any, name: Any):
        self._locks = locks
        self._key = check_name(name)

    @planned
    def try_set_count(self, n: int) -> Op[bool]:
        return (yield from self._locks._doing(latch_try_set_count(self._key, n)))

    @planned
    def count_down(self) -> Op[int]:
        return (yield from self._locks._doing(latch_count_down(self._key)))

    @planned
    def count(self) -> Op[int]:
        return (yield from self._locks._doing(latch_count(self._key)))

    @planned
    def await_zero(self, wait: Optional[float] = None) -> Op[bool]:
        """True once the count is zero; False if the wait ends first (None: look once). The
        wait runs in the server."""
        return self._await_zero(wait)

    def _await_zero(self, wait: Optional[float]) -> Op[bool]:
        plan = latch_plan(self._key, wait_ms(wait))
        replies, _ = yield from self._locks._replies(plan)
        return read_latch(replies[0])


# ---------------------------------------------------------------- election


class Leadership(Scope):
    """The post: ``value``, ``term`` (the fencing token), ``lost``, ``resign()``."""

    def __init__(self, hold: Hold, value: str):
        self.value = value
        self.term = hold.token or 0
        self.replicas_acked = hold.replicas_acked
        self.lost = hold.lost
        self.hold = hold
        self._locks = hold._locks

    def check(self) -> None:
        self.hold.check()

    @planned
    def guard(self, *command: Any) -> Op[Any]:
        """Runs ``command`` only while this leadership stands, in this term (``hold.guard``):
        a deposed leader's command is refused with NotHeld or StaleToken, and not run."""
        return (yield from self.hold._guard(command))

    @planned
    def resign(self) -> Op[None]:
        return self._release()

    def _release(self) -> Op[None]:
        if not self.hold._released:
            try:
                yield from self.hold._release()
            except NotHeld:
                pass


class Election(Generic[LD]):
    """Leader election on the lock ``name``: the holder leads; its value is the owner and its
    term the fencing token. Leases are the Locks' ``watchdog_lease``."""

    def __init__(self, locks: Any, name: Any, sync_replicas: Any, sync_timeout: Any):
        self._locks = locks
        self._key = check_name(name)
        self._replicas = check_replicas(sync_replicas)
        self._sync_timeout = sync_timeout

    @planned
    def campaign(self, value: str, wait: Optional[float] = math.inf) -> Op[Optional[LD]]:
        """Waits in the server until elected (``wait``: at most so long; None if not elected)."""
        check_value(value)
        return (yield from self._campaign(value, wait))

    def _campaign(self, value: str, wait: Optional[float]) -> Op[Optional[LD]]:
        lock: Lock[Hold] = Lock(self._locks, self._key, None, None, wait, False, True, False, self._replicas,
                    self._sync_timeout, value)
        hold = yield from lock._acquire(UNSET)
        if hold is None:
            return None
        if (hold.count or 1) > 1:
            yield from hold._release()
            raise DuplicateValue(f"{value!r} already leads {self._key!r}")
        return self._locks._face.Leadership(hold, value)

    @planned
    def leader(self) -> Op[Optional[Leader]]:
        """The ``Leader`` now, or None."""
        return (yield from self._locks._doing(election_leader(self._key)))

    def observe(self, poll: float = 0.05, stop: Any = None) -> "Observation":
        """The leader now, then each change (None: no leader), read every ``poll`` seconds,
        until ``stop`` (an Event of the face) is set: ``for leader in election.observe():``
        (sync), ``async for`` (asyncio)."""
        return Observation(self, poll, stop)


class Observation(Stream):
    """``Election.observe``'s iterator: one plan per change of leader."""

    def __init__(self, election: Election, poll: float, stop: Any):
        self._locks = election._locks
        self._key = election._key
        self._poll = poll
        self._stop = stop
        self._last: Any = UNSET
        self._looked = False

    def _next(self) -> Op[Any]:
        while True:
            if self._looked:
                yield ("_sleep", (self._poll,))
            self._looked = True
            if self._stop is not None and self._stop.is_set():
                return UNSET
            now = yield from self._locks._doing(election_leader(self._key))
            if now != self._last:
                self._last = now
                return now



# ---------------------------------------------------------------- the watchdog's bookkeeping


class Watchdog:
    """One per Locks: renews every due hold in one pipeline per server, a third of a lease
    after its last renewal, and tells loss. The bookkeeping and the plans of a turn are here;
    each face runs them (a thread, a task), sleeps between turns and listens to keyspace
    events (see ``_core.LOSS_EVENTS``). ``_mutex`` is the face's: a reentrant lock for threads
    (a Hold's finalizer may call ``release_later`` from a garbage collection that starts while
    the watchdog's thread holds it), nothing for tasks."""

    _mutex: Any
    _wake: Any  # the face's Event: set to end the runner's sleep

    def __init__(self, locks: Any):
        self._locks = weakref.ref(locks)
        self._entries: dict = {}  # id -> (Renewal, the face's Event)
        self._releases: list = []
        self._seq = 0
        self._sleep_until = 0.0
        self._idle_since: Optional[float] = None
        self.rounds = 0
        self.renewals = 0
        self._pid = os.getpid()
        self._anchor = time.monotonic()
        self._sub: Any = None  # the keyspace-event connection, while events are on
        self._channels: set = set()
        self._checked = 0.0
        self._events: Optional[str] = None
        self._db = 0  # the event connection's database
        self._close = locks._close  # the face's: closes a connection (None: nothing)

    def _start(self, wake: bool) -> None:
        """Starts the face's runner unless it runs; ``wake``: it looks again at once."""
        if self._runs() and wake:
            self._wake.set()

    def _runs(self) -> bool:
        """Starts the face's runner unless it runs. False if it cannot from here (it is then
        started, and woken, from where it can)."""
        raise NotImplementedError

    def _stopped(self) -> None:
        """The runner ends (nothing left to renew): called under ``_mutex``."""

    def new_entry(self) -> int:
        """An id for ``add``, taken first so that one interrupted between the two can be removed."""
        with self._mutex:
            self._seq += 1
            return self._seq

    def add(self, r: Renewal, lost: Any, n: int = 0) -> int:
        r.schedule(self._anchor, time.monotonic())
        n = n or self.new_entry()
        with self._mutex:
            self._entries[n] = (r, lost)
            # Woken only when this hold falls due before the runner would look again: a
            # switch per acquire would cost more than the acquire.
            early = r.due_at() < self._sleep_until
            self._start(early)
        return n

    def remove(self, n: int) -> None:
        with self._mutex:
            self._entries.pop(n, None)

    def release_later(self, key: bytes, cmd: list) -> None:
        """A hold dropped (or a release interrupted): given back from the watchdog's turn."""
        with self._mutex:
            self._releases.append((key, cmd))
        self._start(True)

    def check_now(self, keys: set) -> Any:
        """Keyspace events said these keys changed: ``_checking`` run by the face (an
        awaitable in the asyncio face; None once the Locks is gone)."""
        locks = self._locks()
        return None if locks is None else locks._run(self._checking(locks, keys))

    def _listen_to(self, conn: Any) -> None:
        """The event connection is open and about to subscribe: the asyncio face starts its
        listener here; the sync face's thread reads it between turns."""

    def _heard(self, reply: Any) -> Optional[bytes]:
        """The lock key a message of the event connection names, if it tells a loss."""
        return lost_key(reply, self._db)

    def _stop_listening(self) -> None:
        """The event connection is about to close: the asyncio face ends its listener."""

    def _unfollow(self) -> Any:
        """Closes the event connection, if any (the face's ``_close``: an awaitable in the
        asyncio face)."""
        self._stop_listening()
        sub, self._sub, self._channels = self._sub, None, set()
        return self._close(sub)

    def _lose(self, n: int, r: Renewal, ev: Any, why: str) -> None:
        r.lost_reason = why
        self.remove(n)
        ev.set()

    def _look(self) -> Any:
        """The next turn, run by the face (an awaitable in the asyncio face); None when the
        Locks is gone or this is a child after fork(). The Locks is held only while it runs."""
        locks = self._locks()
        if locks is None or self._pid != os.getpid():
            return None
        return locks._run(self._turn(locks))

    def _napping(self, entries: list, most: float) -> float:
        """How long the runner sleeps now: until the next hold falls due, at most ``most``
        (``add`` wakes it only for a hold due sooner)."""
        timeout = min(next_look(entries, time.monotonic()), most)
        with self._mutex:
            self._wake.clear()
            self._sleep_until = time.monotonic() + timeout
        return timeout

    def _turn(self, locks: Any) -> Op[Optional[Tuple[bool, list]]]:
        """One look: gives back dropped holds and renews what is due. Returns (look again at
        once, the entries to sleep on), or None when the runner should end (after 5 s with
        nothing to renew). An unexpected error (a cluster's node map failing, say) is logged
        and the next turn comes 0.1 s later: it must not end the renewals."""
        try:
            return (yield from self._turning(locks))
        except Exception:
            logging.getLogger("rlock_client").exception("the watchdog's turn failed; it goes on")
            yield ("_sleep", (0.1,))
            return True, []

    def _turning(self, locks: Any) -> Op[Optional[Tuple[bool, list]]]:
        with self._mutex:
            entries = list(self._entries.items())
            releases, self._releases = self._releases, []
        for key, cmd in releases:
            try:
                yield from locks._sending(key, [cmd], True)
            except Exception:
                pass
        now = time.monotonic()
        if entries:
            self._idle_since = None
        else:
            self._idle_since = self._idle_since or now
            if now - self._idle_since > 5:
                with self._mutex:
                    if not self._entries and not self._releases:
                        self._sleep_until = 0.0
                        self._idle_since = None
                        self._stopped()
                        return None
        due = due_now(entries, now)
        if not due:
            yield from self._following(locks, entries)
            return False, entries
        with self._mutex:
            self._sleep_until = 0.0
        yield from self._renewing(locks, due)
        return True, []

    def _following(self, locks: Any, entries: list) -> Op[None]:
        """Keeps the face's event connection subscribed to each held key's channel while
        ``notify-keyspace-events`` publishes the module's events there (looked up once a
        second; one server, not a cluster), and closes it otherwise."""
        single = locks._router.single
        if single is None:
            return
        if entries and time.monotonic() - self._checked > 1.0:
            self._checked = time.monotonic()
            try:
                flags = raise_if_error((yield from exchange(single, [EVENTS_CONFIG], 0.5))[0])
                self._events = events_on(text(flags[1]) if flags else "")
            except Exception:
                self._events = None
        if not entries or not self._events:
            yield (self, "_unfollow", ())
            return
        want = set(event_channels(self._events, locks._router.db, sorted({r.key for _, (r, _) in entries})))
        try:
            if self._sub is None:
                self._sub = yield (single, "_take", (True,))
                self._db = locks._router.db
                self._channels = set()
                self._listen_to(self._sub)
            add, drop = want - self._channels, self._channels - want
            if add:
                yield (self._sub, "send_command", ("SUBSCRIBE", *add))
            if drop:
                yield (self._sub, "send_command", ("UNSUBSCRIBE", *drop))
            self._channels = want
        except Exception:
            yield (self, "_unfollow", ())

    def _renewing(self, locks: Any, due: list) -> Op[None]:
        self.rounds += 1
        now = time.monotonic()
        ran_out, renewable = split_due(due)
        for n, r, ev in ran_out:
            self._lose(n, r, ev, RAN_OUT_FIXED)
        groups: dict = {}
        for entry in renewable:
            server = yield from server_of(locks._router, entry[1].key)
            groups.setdefault(id(server), []).append(entry)
        for group in groups.values():
            cmds = [renew_args(r, new_req_id()) for _, r, _ in group]
            try:
                timeout = renewal_timeout([r.lease_ms for _, r, _ in group])
                replies = yield from locks._sending(group[0][1].key, cmds, False, timeout)
            except Exception:
                replies = [None] * len(group)
            self.renewals += len(group)
            for (n, r, ev), v in zip(group, replies):
                why = after_renewal(r, v, now, time.monotonic(), self._anchor) if n in self._entries else None
                if why is not None:
                    self._lose(n, r, ev, why)

    def _checking(self, locks: Any, keys: set) -> Op[None]:
        """Keyspace events said these keys changed: renew their holds at once, and ask the
        server whether fixed-lease holds are still held."""
        with self._mutex:
            hit, fixed = hit_by_events(list(self._entries.items()), keys)
        if hit:
            yield from self._renewing(locks, hit)
        for n, r, ev in fixed:
            try:
                held = yield from locks._calling(r.key, held_cmd(r))
            except Exception:
                continue
            if not held:
                self._lose(n, r, ev, LOST_BY_OTHERS)
