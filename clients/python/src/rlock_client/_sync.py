"""The sync face: threads. Owners are threads; one watchdog thread per Locks."""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import weakref
from typing import Any, Iterator, Optional, Sequence

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
from .errors import DuplicateValue, Lost, NotAcknowledged, NotHeld

_LINK_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)
_UNSET: Any = object()
_ALL_LOCKS: "weakref.WeakSet[Locks]" = weakref.WeakSet()


class _Server:
    """One server: a pool of idle connections for short commands and one for waits."""

    def __init__(self, settings: _conn.Settings):
        self.settings = settings
        self._idle: list = []
        self._idle_waits: list = []
        self._idle_timed: list = []
        self._mutex = threading.Lock()
        self.pid = os.getpid()

    def _take(self, waits: bool = False):
        with self._mutex:
            pool = self._idle_waits if waits else self._idle
            if pool:
                return pool.pop()
        if waits:
            conn = self.settings.sync_connection(None)
            conn.connect()
            conn.send_command("CLIENT", "ID")
            try:
                conn.rlock_id = conn.read_response()
            except ResponseError:  # CLIENT refused by ACL: waits are then ended by closing
                conn.rlock_id = None
            return conn
        return self.settings.sync_connection(self.settings.socket_timeout)

    def _give(self, conn, waits: bool = False) -> None:
        if self.pid != os.getpid():
            return
        with self._mutex:
            (self._idle_waits if waits else self._idle).append(conn)

    def pipeline(self, cmds: Sequence[Sequence[Any]], timeout: Optional[float] = None) -> list:
        """Sends ``cmds`` in one write and reads every reply; server errors come back as
        values. A broken link raises (the connection is dropped). ``timeout``: on a connection
        of the watchdog's, whose socket timeout it is (renewals must not outwait a lease)."""
        if timeout is not None:
            with self._mutex:
                conn = self._idle_timed.pop() if self._idle_timed else None
            if conn is None:
                conn = self.settings.sync_connection(timeout)
            try:
                conn.send_packed_command(_packed(conn, cmds))
                out = []
                for _ in cmds:
                    try:
                        out.append(conn.read_response())
                    except ResponseError as e:
                        out.append(e)
            except BaseException:
                conn.disconnect()
                raise
            if self.pid == os.getpid():
                with self._mutex:
                    self._idle_timed.append(conn)
            return out
        conn = self._take()
        try:
            conn.send_packed_command(_packed(conn, cmds))
            out = []
            for _ in cmds:
                try:
                    out.append(conn.read_response())
                except ResponseError as e:
                    out.append(e)
        except BaseException:
            conn.disconnect()
            raise
        self._give(conn)
        return out

    def call(self, *args: Any) -> Any:
        return raise_if_error(self.pipeline([args])[0])

    def forget(self) -> None:
        """After fork(): the parent's sockets are the parent's."""
        with self._mutex:
            self._idle = []
            self._idle_waits = []
            self._idle_timed = []
        self._mutex = threading.Lock()
        self.pid = os.getpid()


class _Router:
    def __init__(self, client: Any):
        settings, cluster = _conn.describe(client)
        self.cluster = cluster
        self.single = _Server(settings) if settings else None
        self._base = settings or _conn.cluster_settings(cluster)
        self._nodes: dict = {}
        self._mutex = threading.Lock()

    @property
    def db(self) -> int:
        return self._base.db

    def at(self, host: str, port: int) -> _Server:
        with self._mutex:
            s = self._nodes.get((host, port))
            if s is None:
                s = self._nodes[(host, port)] = _Server(self._base.at(host, port))
            return s

    def server_for(self, key: bytes) -> _Server:
        if self.single is not None:
            return self.single
        return self.at(*_conn.node_of(self.cluster, key))

    def all(self) -> list[_Server]:
        if self.single is not None:
            return [self.single]
        return [self.at(h, p) for h, p in _conn.primaries(self.cluster)]

    def moved(self, e: MovedError) -> _Server:
        try:
            self.cluster.nodes_manager.initialize()
        except Exception:
            pass
        return self.at(e.host, int(e.port))

    def forget(self) -> None:
        for s in [self.single, *self._nodes.values()]:
            if s is not None:
                s.forget()
        self._mutex = threading.Lock()


class Locks:
    """Locks, semaphores, latches and elections on one server or cluster.

    ``Locks(client)`` takes a ``redis.Redis``, ``RedisCluster`` or ``valkey.Valkey``;
    ``Locks.from_url(url)`` makes one. Commands go on connections of the package's own,
    made with the client's address, credentials and TLS settings, which never resend a
    lock command behind your back."""

    def __init__(self, client: Any, *, watchdog_lease: float = 30.0):
        self._watchdog_lease_ms = lease_ms(watchdog_lease)
        self._router = _Router(client)
        self.client_id = new_client_id()
        self._owners = threading.local()
        self._owner_seq = 0
        self._owner_mutex = threading.Lock()
        self._replicas: dict = {}
        self._watchdog = _Watchdog(self)
        self._pid = os.getpid()
        _ALL_LOCKS.add(self)

    @classmethod
    def from_url(cls, url: str, *, cluster: bool = False, watchdog_lease: float = 30.0, **kwargs: Any) -> "Locks":
        """``redis://``, ``rediss://`` (TLS: ``ssl_ca_certs=``, ``ssl_certfile=``,
        ``ssl_keyfile=``) or ``unix://``; ``cluster=True`` for a Redis Cluster."""
        if not isinstance(url, str):
            raise TypeError("url must be a str")
        if cluster:
            from redis.cluster import RedisCluster

            return cls(RedisCluster.from_url(url, **kwargs), watchdog_lease=watchdog_lease)
        import redis

        return cls(redis.Redis.from_url(url, **kwargs), watchdog_lease=watchdog_lease)

    # ------------------------------------------------------------ owners

    def owner(self) -> str:
        """The calling thread's owner id, ``<client-uuid>:<n>``."""
        o = getattr(self._owners, "id", None)
        if o is None or getattr(self._owners, "pid", None) != os.getpid():
            with self._owner_mutex:
                self._owner_seq += 1
                o = owner_id(self.client_id, self._owner_seq)
            self._owners.id = o
            self._owners.pid = os.getpid()
        return o

    def _after_fork(self) -> None:
        self.client_id = new_client_id()
        self._owners = threading.local()
        self._owner_seq = 0
        self._owner_mutex = threading.Lock()
        self._router.forget()
        self._watchdog = _Watchdog(self)
        self._pid = os.getpid()

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
    ) -> "Lock":
        return Lock(self, name, None, lease, wait, fair, fenced, session, sync_replicas, sync_timeout, owner)

    def read_write(self, name: Any, *, owner: Any = None) -> "ReadWriteLock":
        return ReadWriteLock(self, name, owner)

    def multi(
        self,
        names: Sequence[Any],
        *,
        lease: Optional[float] = None,
        wait: Optional[float] = None,
        session: bool = False,
        owner: Any = None,
    ) -> "MultiLock":
        return MultiLock(self, names, lease, wait, session, owner)

    def semaphore(self, name: Any) -> "Semaphore":
        return Semaphore(self, name)

    def permit_semaphore(self, name: Any) -> "PermitSemaphore":
        return PermitSemaphore(self, name)

    def latch(self, name: Any) -> "Latch":
        return Latch(self, name)

    def election(
        self, name: Any, *, sync_replicas: Optional[int] = None, sync_timeout: float = DEFAULT_SYNC_TIMEOUT
    ) -> "Election":
        return Election(self, name, sync_replicas, sync_timeout)

    # ------------------------------------------------------------ queries

    def info(self, name: Any) -> LockInfo:
        return self._do(lock_info(check_name(name)))

    def force_release(self, name: Any) -> bool:
        return self._do(lock_force_release(check_name(name)))

    def waiters(self, name: Any) -> list[Waiter]:
        return self._do(waiters_call(check_name(name)))

    def scan(self, match: Optional[str] = None, type: Optional[str] = None, count: int = SCAN_COUNT) -> Iterator[ScannedLock]:
        """Every lock (``type``: ``"lock"`` or ``"rwlock"``), on every primary."""
        scan_cmd(0, match, type, count)  # refused here, before anything is sent
        for server in self._router.all():
            cursor = 0
            while True:
                cursor, entries = parse_scan(server.call(*scan_cmd(cursor, match, type, count)))
                yield from entries
                if cursor == 0:
                    break

    def stats(self) -> dict:
        """``INFO rlock`` per primary: ``{"host:port": {field: value}}``."""
        out = {}
        for s in self._router.all():
            out[server_name(s.settings.kwargs)] = parse_stats(s.call(*STATS_CMD))
        return out

    def top(self, count: int = 10) -> list[dict]:
        """``RLOCK.TOP``: the most contended keys, on every primary."""
        cmd = top_cmd(count)
        out: list = []
        for s in self._router.all():
            out += parse_top(s.call(*cmd))
        return merge_top(out, count)

    # ------------------------------------------------------------ plumbing

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            self._after_fork()

    def _call(self, key: bytes, *args: Any) -> Any:
        return raise_if_error(self._pipeline(key, [args])[0])

    def _do(self, c: Call) -> Any:
        return c.read(self._pipeline(c.key, c.cmds, resend=c.resend))

    def _pipeline(self, key: bytes, cmds: Sequence[Sequence[Any]], resend: bool = False,
                  timeout: Optional[float] = None) -> list:
        """``cmds`` on the server of ``key``. ``resend``: a broken link sends them once more
        (they carry REQ ids, so the server applies them at most once)."""
        self._check_pid()
        server = self._router.server_for(key)
        for attempt in range(3):
            try:
                out = server.pipeline(cmds, timeout)
            except _LINK_ERRORS:
                if not resend or attempt == 2:
                    raise
                time.sleep(RESEND_AFTER)
                continue
            moved = next((v for v in out if isinstance(v, MovedError)), None)
            if moved is None or self._router.cluster is None:
                return out
            server = self._router.moved(moved)
        return out

    def _replicas_for(self, key: bytes) -> int:
        """How many replicas the key's server has attached (looked up once a second)."""
        server = self._router.server_for(key)
        now = time.monotonic()
        seen = self._replicas.get(id(server))
        if seen is None or now - seen[0] > 1.0:
            seen = (now, attached_replicas(server.call("INFO", "replication")))
            self._replicas[id(server)] = seen
        return int(seen[1])

    def _wait(self, plan: Plan, make: Any, pin: bool = False) -> Any:
        """The one wait of the sync face, on the calling thread: sends ``plan`` on a wait
        connection and returns ``make(replies, conn, w)`` (a Hold, Permits...; ``conn`` the
        connection when ``pin``). Whatever ends it early, from the send until what it made is
        returned (KeyboardInterrupt, an exception raised in this thread, a link that broke
        after the grant was read), another thread ends the wait in the server and gives back
        its grant (``_abandon``): nothing is left held by nobody. ``make`` records in ``w.undo``
        how to give back what it made, as soon as it made it."""
        w = _Wait()
        try:
            replies, conn = self._wait_here(plan, w, pin)
            return make(replies, conn, w)
        except BaseException as e:
            if w.replies is not None or not isinstance(e, _LINK_ERRORS):
                threading.Thread(target=self._abandon, args=(plan, w), name="rlock-abandon", daemon=True).start()
            raise

    def _wait_here(self, plan: Plan, w: "_Wait", pin: bool) -> tuple[list, Any]:
        """Sends ``plan.cmds`` (the first may block in the server) on a wait connection and
        returns (replies, the connection if ``pin``). A broken link sends them again (REQ ids)
        with the wait that is left (``_core.resend_wait``). ``w`` records how far it got (what
        was sent, on which connection, the replies once all are read) for ``_abandon``."""
        self._check_pid()
        server = self._router.server_for(plan.key)
        cmds = plan.cmds
        deadline = wait_deadline(time.monotonic(), plan.block)
        tries = 0
        while True:
            conn = server._take(waits=True)
            w.server, w.conn = server, conn
            replies: list = []
            try:
                w.sent = True
                conn.send_packed_command(_packed(conn, cmds))
                while len(replies) < len(cmds):
                    # In slices, so that an exception raised in this thread lands within one.
                    while not conn.can_read(timeout=0.05):
                        if deadline is not None and time.monotonic() > deadline + WAIT_MARGIN:
                            raise RedisTimeoutError("the server did not answer a wait in time")
                    try:
                        replies.append(conn.read_response())
                    except ResponseError as e:
                        replies.append(e)
            except _LINK_ERRORS as e:
                conn.disconnect()
                if replies:
                    # The grant was read; what follows (HGET, WAIT) is lost: it is given back.
                    w.replies = replies
                    raise
                tries += 1
                again = resend_wait(cmds[0], tries, isinstance(e, RedisTimeoutError), plan.block, deadline,
                                    time.monotonic())
                if again is None:
                    raise
                time.sleep(RESEND_AFTER)
                cmds = [again] + list(cmds[1:])
                continue
            except BaseException:
                conn.disconnect()
                raise
            moved = replies[0] if isinstance(replies[0], MovedError) else None
            if moved is not None and self._router.cluster is not None:
                w.sent = False  # refused: nothing was applied
                server._give(conn, waits=True)
                server = self._router.moved(moved)
                continue
            w.pinned = pin
            w.replies = replies
            if pin:
                return replies, conn
            server._give(conn, waits=True)
            return replies, None

    def _abandon(self, plan: Plan, w: "_Wait") -> None:
        """The caller of ``_wait`` left before what it waited for reached it. Runs in a thread
        of its own: gives back what the wait was granted (``plan.give_back``, whose REQ ids are
        one per grant, so it is applied at most once)."""
        if w.undo is not None:  # made, never handed over: it gives itself back
            _safe(w.undo)
            return
        if w.replies is not None:
            if w.pinned:
                _safe(w.conn.disconnect)  # the SESSION connection of what is given back
            self._give_back(plan, w.replies[0])
            return
        if not w.sent or w.server is None:
            return
        # What was sent is unknown past this point: end it in the server, then ask again with
        # the same REQ id and a 1 ms wait. A grant the first call got is replayed; otherwise
        # this call is new. Either way what it returns is given back.
        server, cid = w.server, getattr(w.conn, "rlock_id", None)
        _safe(w.conn.disconnect)  # the server frees a blocked client whose socket closed
        end = time.monotonic() + 5
        while cid is not None and time.monotonic() < end:
            try:
                if not text(server.call("CLIENT", "LIST", "ID", cid)).strip():
                    break
                server.call("CLIENT", "KILL", "ID", cid)
            except ResponseError:
                # CLIENT refused by ACL: the closed socket ends the wait; give the server a
                # moment to see it, and the REQ id below does the rest.
                time.sleep(0.05)
                break
            except Exception:
                pass
            time.sleep(0.01)
        if not plan.req:
            return  # nothing taken (a latch): nothing to give back
        try:
            v = self._pipeline(plan.key, [plan.again()], resend=True)[0]
        except Exception:
            return
        self._give_back(plan, v)

    def _give_back(self, plan: Plan, reply: Any) -> None:
        cmds = plan.give_back(reply)
        if cmds:
            _safe(self._pipeline, plan.key, cmds, True)


class _Wait:
    """How far one wait on the calling thread got (``Locks._wait``)."""

    __slots__ = ("server", "conn", "sent", "replies", "pinned", "undo")

    def __init__(self) -> None:
        self.server: Any = None
        self.conn: Any = None
        self.sent = False
        self.replies: Optional[list] = None
        self.pinned = False  # conn is the caller's (SESSION), not back in the pool
        self.undo: Any = None  # gives back what was made from the replies


def _packed(conn: Any, cmds: Sequence[Sequence[Any]]) -> list:
    p = pack(cmds)
    return [p] if p is not None else conn.pack_commands(cmds)


def _safe(f: Any, *args: Any) -> None:
    try:
        f(*args)
    except Exception:
        pass


def _after_fork_in_child() -> None:
    for locks in list(_ALL_LOCKS):
        locks._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------- the watchdog


class _Watchdog:
    """One thread per Locks: renews every due hold in one pipeline per server, a third of a
    lease after its last renewal; tells loss; with keyspace events on, hears a lock's loss
    within one event (see ``_core.LOSS_EVENTS``)."""

    def __init__(self, locks: Locks):
        self._locks = weakref.ref(locks)
        # Reentrant: a Hold's finalizer (release_later) may run from a garbage collection
        # that starts while this thread holds it.
        self._mutex = threading.RLock()
        self._entries: dict = {}  # id -> (Renewal, threading.Event)
        self._releases: list = []
        self._seq = 0
        self._thread: Optional[threading.Thread] = None
        self._wake = threading.Event()
        self._sleep_until = 0.0
        self.rounds = 0
        self.renewals = 0
        self._pid = os.getpid()
        self._anchor = time.monotonic()

    def new_entry(self) -> int:
        """An id for ``add``, taken first so that one interrupted between the two can be removed."""
        with self._mutex:
            self._seq += 1
            return self._seq

    def add(self, r: Renewal, lost: threading.Event, n: int = 0) -> int:
        r.schedule(self._anchor, time.monotonic())
        with self._mutex:
            if not n:
                self._seq += 1
                n = self._seq
            self._entries[n] = (r, lost)
            self._ensure_thread()
            # Woken only when this hold falls due before the thread would look again: a
            # thread switch per acquire would cost more than the acquire.
            early = r.due_at() < self._sleep_until
        if early:
            self._wake.set()
        return n

    def remove(self, n: int) -> None:
        with self._mutex:
            self._entries.pop(n, None)

    def release_later(self, key: bytes, cmd: list) -> None:
        """A hold dropped without release: given back from the watchdog's thread."""
        with self._mutex:
            self._releases.append((key, cmd))
            self._ensure_thread()
        self._wake.set()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="rlock-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        # An unexpected error (a cluster's node map failing, say) must not end the renewals.
        while True:
            try:
                return self._cycle()
            except Exception:
                logging.getLogger("rlock_client").exception("the watchdog failed; it starts again")
                time.sleep(0.1)

    def _cycle(self) -> None:
        sub = _Subscriber(self)
        idle_since = None
        try:
            while True:
                locks = self._locks()
                if locks is None or self._pid != os.getpid():
                    return
                with self._mutex:
                    entries = list(self._entries.items())
                    releases, self._releases = self._releases, []
                for key, cmd in releases:
                    _safe(locks._pipeline, key, [cmd], True)
                now = time.monotonic()
                if not entries:
                    idle_since = idle_since or now
                    if now - idle_since > 5:
                        with self._mutex:
                            if not self._entries and not self._releases:
                                self._thread = None
                                self._sleep_until = 0.0
                                return
                else:
                    idle_since = None
                due = due_now(entries, now)
                if due:
                    with self._mutex:
                        self._sleep_until = 0.0
                    self._renew(locks, due)
                    continue
                del locks
                sub.sync(entries)
                self._wake.clear()
                timeout = next_look(entries, time.monotonic())
                with self._mutex:
                    self._sleep_until = time.monotonic() + (min(timeout, 0.05) if sub.active else timeout)
                if sub.active:
                    sub.wait(min(timeout, 0.05))
                else:
                    self._wake.wait(timeout)
        finally:
            sub.close()

    def check_now(self, keys: set) -> None:
        """Keyspace events said these keys changed: renew their holds at once."""
        locks = self._locks()
        if locks is None:
            return
        with self._mutex:
            hit, fixed = hit_by_events(list(self._entries.items()), keys)
        if hit:
            self._renew(locks, hit)
        for n, r, ev in fixed:
            try:
                held = locks._call(r.key, *held_cmd(r))
            except Exception:
                continue
            if not held:
                self._lose(n, r, ev, LOST_BY_OTHERS)

    def _lose(self, n: int, r: Renewal, ev: threading.Event, why: str) -> None:
        r.lost_reason = why
        self.remove(n)
        ev.set()

    def _renew(self, locks: Locks, due: list) -> None:
        self.rounds += 1
        now = time.monotonic()
        ran_out, renewable = split_due(due)
        for n, r, ev in ran_out:
            self._lose(n, r, ev, RAN_OUT_FIXED)
        by_server: dict = {}
        for n, r, ev in renewable:
            by_server.setdefault(id(locks._router.server_for(r.key)), []).append((n, r, ev))
        for group in by_server.values():
            cmds = [renew_args(r, new_req_id()) for _, r, _ in group]
            try:
                timeout = renewal_timeout([r.lease_ms for _, r, _ in group])
                replies = locks._pipeline(group[0][1].key, cmds, timeout=timeout)
            except Exception:
                replies = [None] * len(group)
            for (n, r, ev), v in zip(group, replies):
                self.renewals += 1
                why = after_renewal(r, v, now, time.monotonic(), self._anchor)
                if why is not None:
                    self._lose(n, r, ev, why)


class _Subscriber:
    """The watchdog's keyspace-event connection: subscribed to each held key's channel
    while ``notify-keyspace-events`` publishes the module's events there."""

    def __init__(self, dog: _Watchdog):
        self.dog = dog
        self.conn: Any = None
        self.channels: set = set()
        self.checked = 0.0
        self.on: Optional[str] = None
        self.db = 0

    @property
    def active(self) -> bool:
        return self.conn is not None

    def sync(self, entries: list) -> None:
        locks = self.dog._locks()
        if locks is None or locks._router.single is None:
            return
        now = time.monotonic()
        if not entries:
            self.close()
            return
        if now - self.checked > 1.0:
            self.checked = now
            try:
                flags = raise_if_error(
                    locks._router.single.pipeline([("CONFIG", "GET", "notify-keyspace-events")], timeout=0.5)[0])
                self.on = events_on(text(flags[1]) if flags else "")
            except Exception:
                self.on = None
        if not self.on:
            self.close()
            return
        db = self.db = locks._router.db
        want = set(event_channels(self.on, db, sorted({r.key for _, (r, _) in entries})))
        try:
            if self.conn is None:
                self.conn = locks._router.single.settings.sync_connection(None)
                self.conn.connect()
                self.channels = set()
            add, drop = want - self.channels, self.channels - want
            if add:
                self.conn.send_command("SUBSCRIBE", *add)
            if drop:
                self.conn.send_command("UNSUBSCRIBE", *drop)
            self.channels = want
        except Exception:
            self.close()

    def wait(self, timeout: float) -> None:
        hit: set = set()
        try:
            end = time.monotonic() + timeout
            while self.conn.can_read(timeout=max(0.0, end - time.monotonic())):
                key = lost_key(self.conn.read_response(), self.db)
                if key is not None:
                    hit.add(key)
                    if not self.conn.can_read(timeout=0):
                        break  # tell it now; later messages are read on the next turn
                if time.monotonic() >= end:
                    break
        except Exception:
            self.close()
        if hit:
            self.dog.check_now(hit)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.disconnect()
            except Exception:
                pass
        self.conn = None
        self.channels = set()


# ---------------------------------------------------------------- locks


class Hold:
    """A granted lock: ``token`` (fenced), ``count`` (hold count), ``replicas_acked``,
    ``lost`` (a threading.Event set when the hold is gone), ``check()``, ``release()``."""

    def __init__(self, locks: Locks, key: bytes, owner: bytes, side: Optional[str], lease: int, renew: bool,
                 basis: float, token: Optional[int], count: Optional[int], replicas: Optional[int], conn: Any = None,
                 activate: bool = True):
        self.key = key.decode("utf-8", "replace")
        self.owner = owner.decode("utf-8", "replace")
        self.side = side
        self.token = token
        self.count = count
        self.replicas_acked = replicas
        self.lost = threading.Event()
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
        wait can record the Hold first (``_Wait.hold``): if the thread is interrupted in here,
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

    def renew(self) -> None:
        """Renews the lease now (the watchdog does it by itself)."""
        self.check()
        r = self._renewal
        try:
            self._locks._do(lock_renew(self._key, self._owner, self.side, r.lease_ms))
        except Lost:
            self._locks._watchdog._lose(self._entry, r, self.lost, "the renewal was refused")
            raise
        r.basis = time.monotonic()

    def guard(self, *command: Any) -> Any:
        """Runs ``command`` (``"SET", "{orders}:total", "5"``) in the server only while this hold
        stands (``RLOCK.GUARD``, checked in the same server turn), and returns its reply. The
        owner must hold the lock now (on this hold's side), its lease counted to the moment of
        the call, and a fenced hold's token must still be the lock's. Otherwise nothing runs:
        NotHeld (the lease ran out, the lock was force-released or another owner took it), or
        StaleToken (the same owner took it again as a newer hold). The inner command's own
        error is redis-py's. Sent once: a broken link raises, since the command may have run.
        In a cluster, every key of the command must be in the lock's slot (a hash tag)."""
        return self._locks._do(hold_guard(self._key, self._owner, self.side, self.token, command, self._released))

    def release(self) -> bool:
        """Gives this hold back. True when the lock is free now, False when a re-entry was
        undone. Raises NotHeld when the lock was no longer held (lost). In a child process
        after fork(), releases nothing of the parent's and returns False."""
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
            replies = self._locks._pipeline(self._key, [cmd], resend=True)
        except _LINK_ERRORS:
            raise
        except BaseException:
            # Interrupted (KeyboardInterrupt, an exception raised in this thread): the
            # watchdog's thread sends it, with the same REQ id, so it is applied once whether
            # or not it reached the server.
            self._locks._watchdog.release_later(self._key, cmd)
            raise
        finally:
            if self._conn is not None:
                self._conn.disconnect()
                self._conn = None
        return bool(call.read(replies))

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Hold(key={self.key!r}, owner={self.owner!r}, token={self.token}, lost={self.lost.is_set()})"


def _release_at_exit(hold: Hold, exc_type: Any) -> None:
    """A ``with`` block ends: a hold lost meanwhile is told as Lost, unless the body raised."""
    try:
        hold.release()
    except NotHeld as e:
        if exc_type is None:
            raise Lost(f"lock {hold.key!r} was lost before the block ended: "
                       f"{hold._renewal.lost_reason or 'not held at release'}") from e


def _dropped(dog: _Watchdog, entry: int, key: bytes, owner: bytes, side: Optional[str], pid: int,
             gone: list) -> None:
    if pid != os.getpid() or gone[0]:
        return
    dog.remove(entry)
    dog.release_later(key, release_cmd(key, owner, side, new_req_id()))


class Lock:
    """A lock handle. ``with lock as hold:`` acquires (NotAcquired if the wait ends first)
    and releases; ``lock.acquire()`` returns a Hold or None."""

    def __init__(self, locks: Locks, name: Any, side: Optional[str], lease: Any, wait: Any, fair: Any, fenced: Any,
                 session: Any, sync_replicas: Any, sync_timeout: Any, owner: Any):
        self._spec = lock_spec(name, side, lease, wait, fair, fenced, session, sync_replicas, sync_timeout,
                               locks._watchdog_lease_ms)
        key = self._spec.key
        self._locks = locks
        self._owner = None if owner is None else check_owner(owner)
        self._stack = threading.local()
        self._scoped_wait = scoped_wait(wait)
        self.name = key.decode("utf-8", "replace")

    def owner(self) -> str:
        """The owner this handle acquires for, from the calling thread."""
        return (self._owner or self._locks.owner().encode()).decode("utf-8", "replace")

    def _owner_bytes(self) -> bytes:
        return self._owner or self._locks.owner().encode()

    def acquire(self, *, wait: Any = _UNSET) -> Optional[Hold]:
        """Takes the lock (or re-enters it) for the calling thread's owner. Returns None if
        it is not granted within the wait (the handle's ``wait``, or none: one try)."""
        spec = self._spec
        block = spec.wait_ms if wait is _UNSET else wait_ms(wait)
        locks = self._locks
        locks._check_pid()
        owner = self._owner_bytes()
        replicas = acknowledgements(spec, 0 if spec.sync_replicas is not None else locks._replicas_for(spec.key))
        plan = lock_plan(spec, owner, block, replicas)
        sent = time.monotonic()

        def make(replies: list, conn: Any, w: Optional[_Wait]) -> Optional[Hold]:
            try:
                grant = read_grant(spec, replies, replicas)
            except BaseException:
                if conn is not None:
                    conn.disconnect()
                raise
            if grant is None:
                if conn is not None:
                    conn.disconnect()  # a session connection that holds nothing
                return None
            if grant.short:
                try:
                    locks._pipeline(spec.key, plan.give_back(replies[0]), resend=True)
                finally:
                    if conn is not None:
                        conn.disconnect()
                raise NotAcknowledged(
                    f"lock {self.name!r}: {grant.acked} of {replicas} replicas acknowledged the grant within "
                    f"{spec.sync_timeout_ms} ms; it was released", grant.acked or 0)
            basis = grant_basis(sent, time.monotonic(), block, spec, replicas)
            hold = Hold(locks, spec.key, owner, spec.side, spec.lease_ms, spec.renew, basis,
                        grant.token, grant.count, grant.acked, conn, activate=False)
            if w is not None:
                w.undo = hold.release
            hold._activate()
            return hold

        if not plan.waits:
            return make(locks._pipeline(spec.key, plan.cmds, resend=True), None, None)
        return locks._wait(plan, make, pin=spec.session)

    def __enter__(self) -> Hold:
        hold = scoped(self.acquire(wait=self._scoped_wait), f"lock {self.name!r}")
        stack = getattr(self._stack, "holds", None)
        if stack is None:
            stack = self._stack.holds = []
        stack.append(hold)
        return hold

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _release_at_exit(self._stack.holds.pop(), exc_type)

    # queries, no hold needed
    def info(self) -> LockInfo:
        return self._locks.info(self._spec.key)

    def is_locked(self) -> bool:
        return bool(self._locks._do(lock_is_locked(self._spec.key)))

    def is_held_by(self, owner: Any = None) -> bool:
        """Whether ``owner`` (this handle's owner when None) holds the lock (on its side)."""
        who = self._owner_bytes() if owner is None else check_owner(owner)
        return bool(self._locks._do(lock_is_held_by(self._spec.key, who, self._spec.side)))

    def hold_count(self) -> int:
        """This handle's owner's hold count (on its side for a read-write lock)."""
        return int(self._locks._do(lock_hold_count(self._spec.key, self._owner_bytes(), self._spec.side)))

    def remaining_lease(self) -> Optional[float]:
        """The lease left in seconds; None when the lock is free (or has no expiry)."""
        ms = self._locks._do(lock_remaining_lease(self._spec.key))
        return None if ms is None else ms / 1000

    def force_release(self) -> bool:
        return self._locks.force_release(self._spec.key)

    def unlock(self) -> bool:
        """One RLOCK.RELEASE for this handle's owner, with no Hold (a hold a previous run left)."""
        return bool(self._locks._do(lock_release(self._spec.key, self._owner_bytes(), self._spec.side)))


class ReadWriteLock:
    """Redisson's RReadWriteLock: ``read(...)`` and ``write(...)`` are Lock handles sharing
    one owner (the calling thread's unless ``owner=`` was given)."""

    def __init__(self, locks: Locks, name: Any, owner: Any):
        self._locks = locks
        self._key = check_name(name)
        self._owner = None if owner is None else check_owner(owner)

    def read(self, **opts: Any) -> Lock:
        return self._side(READ, opts)

    def write(self, **opts: Any) -> Lock:
        return self._side(WRITE, opts)

    def _side(self, side: str, opts: dict) -> Lock:
        if "fair" in opts and opts["fair"]:
            raise ValueError("fair does not apply to a read-write lock")
        opts.pop("fair", None)
        allowed = {"lease", "wait", "fenced", "session", "sync_replicas", "sync_timeout"}
        bad = set(opts) - allowed
        if bad:
            raise TypeError(f"unexpected options: {', '.join(sorted(bad))}")
        return Lock(self._locks, self._key, side, opts.get("lease"), opts.get("wait"), False,
                    opts.get("fenced", False), opts.get("session", False), opts.get("sync_replicas"),
                    opts.get("sync_timeout", DEFAULT_SYNC_TIMEOUT), self._owner)

    def info(self) -> LockInfo:
        return self._locks.info(self._key)

    def is_locked(self) -> bool:
        return bool(self._locks._do(lock_is_locked(self._key)))

    def force_release(self) -> bool:
        return self._locks.force_release(self._key)


class MultiHold:
    """Every lock of a multi-key acquire; ``lost`` is set when any is lost."""

    def __init__(self, locks: Locks, keys: list, owner: bytes, lease: int, renew: bool, basis: float, conn: Any):
        self.keys = [k.decode("utf-8", "replace") for k in keys]
        self.owner = owner.decode("utf-8", "replace")
        self.lost = threading.Event()
        self._locks, self._keys, self._owner, self._conn = locks, keys, owner, conn
        self._renewals = [Renewal(k, owner, None, lease, renew, basis) for k in keys]
        self._entries = [locks._watchdog.add(r, self.lost) for r in self._renewals]
        self._released = False
        self._pid = os.getpid()

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"a lock of {self.keys!r} was lost")

    def release(self) -> int:
        """RLOCK.MRELEASE: how many of the locks are free now. In a child process after
        fork(), releases nothing of the parent's and returns 0."""
        if self._released or self._pid != os.getpid():
            return 0
        self._released = True
        for e in self._entries:
            self._locks._watchdog.remove(e)
        try:
            return int(self._locks._do(multi_release(self._owner, self._keys)))
        finally:
            if self._conn is not None:
                self._conn.disconnect()

    def __enter__(self) -> "MultiHold":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class MultiLock:
    """Several locks, all or none (RLOCK.MACQUIRE). In a cluster the names must share a
    slot (a hash tag): names in several slots are refused before anything is sent."""

    def __init__(self, locks: Locks, names: Sequence[Any], lease: Any, wait: Any, session: Any, owner: Any):
        self._m = m = multi_spec(names, lease, wait, session, owner, locks._watchdog_lease_ms,
                                 locks._router.cluster is not None)
        self._locks, self._keys, self._lease, self._renew = locks, m.keys, m.lease_ms, m.renew
        self._wait, self._scoped_wait, self._session, self._owner = m.wait_ms, m.scoped_wait, m.session, m.owner
        self._stack = threading.local()

    def acquire(self, *, wait: Any = _UNSET) -> Optional[MultiHold]:
        """Takes every lock for the calling thread's owner, or none: None if they are not all
        granted within the wait (the handle's ``wait``, or none: one try)."""
        block = self._wait if wait is _UNSET else wait_ms(wait)
        locks = self._locks
        locks._check_pid()
        owner = self._owner or locks.owner().encode()
        plan = multi_plan(self._keys, owner, self._lease, block, self._session)
        sent = time.monotonic()

        def make(replies: list, conn: Any, w: Optional[_Wait]) -> Optional[MultiHold]:
            try:
                taken = read_taken(replies[0])
            except BaseException:
                if conn is not None:
                    conn.disconnect()
                raise
            if not taken:
                if conn is not None:
                    conn.disconnect()
                return None
            basis = sent if block is None else time.monotonic()
            hold = MultiHold(locks, self._keys, owner, self._lease, self._renew, basis, conn)
            if w is not None:
                w.undo = hold.release
            return hold

        if not plan.waits:
            return make(locks._pipeline(plan.key, plan.cmds, resend=True), None, None)
        return locks._wait(plan, make, pin=self._session)

    def __enter__(self) -> MultiHold:
        h = scoped(self.acquire(wait=self._scoped_wait), f"the locks {self._keys!r}")
        if not hasattr(self._stack, "holds"):
            self._stack.holds = []
        self._stack.holds.append(h)
        return h

    def __exit__(self, *exc: Any) -> None:
        self._stack.holds.pop().release()


# ---------------------------------------------------------------- semaphores, latches


class Permits:
    """Permits taken from a Semaphore; ``release()`` gives them back."""

    def __init__(self, sem: "Semaphore", n: int):
        self.count = n
        self._sem = sem
        self._released = False

    def release(self) -> int:
        if self._released:
            return self._sem.available()
        self._released = True
        return self._sem.release(self.count)

    def __enter__(self) -> "Permits":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Semaphore:
    """Redisson's RSemaphore: waits run in the server, in arrival order."""

    def __init__(self, locks: Locks, name: Any):
        self._locks = locks
        self._key = check_name(name)

    def try_set_permits(self, n: int) -> bool:
        return bool(self._locks._do(semaphore_try_set_permits(self._key, n)))

    def add_permits(self, n: int) -> int:
        return int(self._locks._do(semaphore_add_permits(self._key, n)))

    def available(self) -> int:
        return int(self._locks._do(semaphore_available(self._key)))

    def acquire(self, permits: int = 1, *, wait: Optional[float] = None) -> Optional[Permits]:
        """Takes ``permits`` permits: Permits, or None if not granted within ``wait`` (None:
        one try). The wait runs in the server, on the calling thread."""
        plan = semaphore_plan(self._key, permits, wait_ms(wait))

        def make(replies: list, conn: Any, w: Optional[_Wait]) -> Optional[Permits]:
            if not read_taken(replies[0]):
                return None
            got = Permits(self, permits)
            if w is not None:
                w.undo = got.release
            return got

        if not plan.waits:
            return make(self._locks._pipeline(self._key, plan.cmds, resend=True), None, None)
        return self._locks._wait(plan, make)

    def release(self, permits: int = 1) -> int:
        return int(self._locks._do(semaphore_release(self._key, permits)))


class LeasedPermit:
    """One leased permit: ``id``, ``lost``, ``renew()``, ``release()``; renewed by the
    watchdog unless its lease was fixed."""

    def __init__(self, sem: "PermitSemaphore", pid: str, lease: int, renew: bool, basis: float):
        self.id = pid
        self.lost = threading.Event()
        self._sem = sem
        self._renewal = Renewal(sem._key, pid.encode(), None, lease, renew, basis, kind="permit")
        self._entry = sem._locks._watchdog.add(self._renewal, self.lost)
        self._released = False

    def check(self) -> None:
        if self.lost.is_set():
            raise Lost(f"permit {self.id} of {self._sem.name!r} was lost")

    def renew(self) -> None:
        r = self._renewal
        try:
            self._sem._locks._do(permit_renew(r.key, r.owner, r.lease_ms))
        except Lost:
            self._sem._locks._watchdog._lose(self._entry, r, self.lost, "not leased")
            self.check()
        r.basis = time.monotonic()

    def release(self) -> bool:
        if self._released:
            return False
        self._released = True
        self._sem._locks._watchdog.remove(self._entry)
        return self._sem.release(self.id)

    def __enter__(self) -> "LeasedPermit":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class PermitSemaphore:
    """Redisson's RPermitExpirableSemaphore: leased permits that come back at their lease's end."""

    def __init__(self, locks: Locks, name: Any):
        self._locks = locks
        self._key = check_name(name)
        self.name = self._key.decode("utf-8", "replace")

    try_set_permits = Semaphore.try_set_permits
    add_permits = Semaphore.add_permits
    available = Semaphore.available

    def acquire(self, permits: int = 1, *, wait: Optional[float] = None, lease: Optional[float] = None) -> Optional[list[LeasedPermit]]:
        """Leases ``permits`` permits: a list of LeasedPermit, or None if not granted within
        ``wait`` (None: one try)."""
        block = wait_ms(wait)
        lms = self._locks._watchdog_lease_ms if lease is None else lease_ms(lease)
        plan = lease_plan(self._key, lms, permits, block)
        sent = time.monotonic()

        def make(replies: list, conn: Any, w: Optional[_Wait]) -> Optional[list[LeasedPermit]]:
            ids = read_leased(replies[0])
            if ids is None:
                return None
            basis = sent if block is None else time.monotonic()
            made: list[LeasedPermit] = []
            if w is not None:
                def undo() -> None:
                    # Those made give themselves back; the rest go back under the plan's REQ ids.
                    for p in made:
                        p.release()
                    rest = plan.give_back(ids)[len(made):]
                    if rest:
                        self._locks._pipeline(self._key, rest, True)

                w.undo = undo
            for i in ids:
                made.append(LeasedPermit(self, i, lms, lease is None, basis))
            return made

        if not plan.waits:
            return make(self._locks._pipeline(self._key, plan.cmds, resend=True), None, None)
        return self._locks._wait(plan, make)

    def release(self, permit_id: str) -> bool:
        return bool(self._locks._do(permit_return(self._key, permit_id)))


class Latch:
    """Redisson's RCountDownLatch."""

    def __init__(self, locks: Locks, name: Any):
        self._locks = locks
        self._key = check_name(name)

    def try_set_count(self, n: int) -> bool:
        return bool(self._locks._do(latch_try_set_count(self._key, n)))

    def count_down(self) -> int:
        return int(self._locks._do(latch_count_down(self._key)))

    def count(self) -> int:
        return int(self._locks._do(latch_count(self._key)))

    def await_zero(self, wait: Optional[float] = None) -> bool:
        """True once the count is zero; False if the wait ends first (None: look once). The
        wait runs in the server, on the calling thread."""
        plan = latch_plan(self._key, wait_ms(wait))
        if not plan.waits:
            return read_latch(self._locks._pipeline(self._key, plan.cmds)[0])
        return self._locks._wait(plan, lambda replies, conn, w: read_latch(replies[0]))


# ---------------------------------------------------------------- election


class Leadership:
    """The post: ``value``, ``term`` (the fencing token), ``lost``, ``resign()``."""

    def __init__(self, hold: Hold, value: str):
        self.value = value
        self.term = hold.token or 0
        self.replicas_acked = hold.replicas_acked
        self.lost = hold.lost
        self.hold = hold

    def check(self) -> None:
        self.hold.check()

    def guard(self, *command: Any) -> Any:
        """Runs ``command`` only while this leadership stands, in this term (``hold.guard``):
        a deposed leader's command is refused with NotHeld or StaleToken, and not run."""
        return self.hold.guard(*command)

    def resign(self) -> None:
        if not self.hold._released:
            try:
                self.hold.release()
            except NotHeld:
                pass

    def __enter__(self) -> "Leadership":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.resign()


class Election:
    """Leader election on the lock ``name``: the holder leads; its value is the owner and its
    term the fencing token. Leases are the Locks' ``watchdog_lease``."""

    def __init__(self, locks: Locks, name: Any, sync_replicas: Any, sync_timeout: Any):
        self._locks = locks
        self._key = check_name(name)
        self._replicas = check_replicas(sync_replicas)
        self._sync_timeout = sync_timeout

    def campaign(self, value: str, wait: Optional[float] = math.inf) -> Optional[Leadership]:
        """Waits in the server until elected (``wait``: at most so long; None if not elected)."""
        check_value(value)
        lock = Lock(self._locks, self._key, None, None, wait, False, True, False, self._replicas,
                    self._sync_timeout, value)
        hold = lock.acquire()
        if hold is None:
            return None
        if (hold.count or 1) > 1:
            hold.release()
            raise DuplicateValue(f"{value!r} already leads {self._key!r}")
        return Leadership(hold, value)

    def leader(self) -> Optional[Leader]:
        return self._locks._do(election_leader(self._key))

    def observe(self, poll: float = 0.05, stop: Optional[threading.Event] = None) -> Iterator[Optional[Leader]]:
        """The leader now, then each change (None: no leader), read every ``poll`` seconds,
        until ``stop`` is set."""
        last: Any = _UNSET
        while stop is None or not stop.is_set():
            now = self.leader()
            if now != last:
                last = now
                yield now
            time.sleep(poll)
