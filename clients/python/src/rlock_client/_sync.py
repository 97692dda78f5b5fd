"""The sync face: threads. Owners are threads; one watchdog thread per Locks."""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from typing import Any, Optional

from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _conn
from . import _handles as _h
from ._core import (
    Plan,
    text,
)

_ALL_LOCKS: "weakref.WeakSet[Locks]" = weakref.WeakSet()


class _Server(_conn.Pool):
    """One server: its idle connections (``_conn.Pool``), opened here, on the calling thread."""

    def _take(self, waits: bool = False, timeout: Optional[float] = None) -> Any:
        """An idle connection, or a new one: a wait's (connected, its CLIENT ID read, for
        ``_abandon``), or with ``timeout`` as its socket timeout (the watchdog's renewals)."""
        conn = self.idle(self.kind(waits, timeout))
        if conn is not None:
            return conn
        if waits:
            conn = self.settings.connection("redis", None)
            conn.connect()
            conn.send_command("CLIENT", "ID")
            try:
                conn.rlock_id = conn.read_response()
            except ResponseError:  # CLIENT refused by ACL: waits are then ended by closing
                conn.rlock_id = None
            return conn
        return self.settings.connection("redis", self.settings.socket_timeout if timeout is None else timeout)


_Router = _conn.Router  # nothing of its own: a MOVED reply reloads the node map on this thread


class Locks(_h.Locks["Lock", "ReadWriteLock", "MultiLock", "Semaphore", "PermitSemaphore", "Latch", "Election"],
            _h.Sync):
    """Locks, semaphores, latches and elections on one server or cluster.

    ``Locks(client)`` takes a ``redis.Redis``, ``RedisCluster`` or ``valkey.Valkey``;
    ``Locks.from_url(url)`` makes one. Commands go on connections of the package's own,
    made with the client's address, credentials and TLS settings, which never resend a
    lock command behind your back."""


    def __init__(self, client: Any, *, watchdog_lease: float = 30.0):
        super().__init__(client, watchdog_lease=watchdog_lease)
        _ALL_LOCKS.add(self)

    _redis = "redis"  # the redis-py module of this face's clients and connections

    # ------------------------------------------------------------ owners: threads

    _caller = staticmethod(threading.current_thread)
    _mutex_type = threading.Lock

    def _after_fork(self) -> None:
        self._router.forget()
        self._fresh()

    _event = threading.Event  # a hold's ``lost``

    # ------------------------------------------------------------ the driver

    def _run(self, plan: _h.Op[_h.T]) -> _h.T:
        """Runs a plan of ``_handles`` on the calling thread and returns its value. From a
        wait's send until the plan returns, whatever ends it early (KeyboardInterrupt, an
        exception raised in this thread, a link that broke after the grant was read) has
        another thread end the wait in the server and give back its grant (``_abandon``):
        nothing is left held by nobody. The plan tells (``_undo``) how to give back what it
        made, as soon as it made it."""
        w: Optional[_h.Waiting] = None
        waited: Any = None
        try:
            req = next(plan)
            while True:
                try:
                    if len(req) == 3:  # most requests: a method of a connection, server or router
                        out = getattr(req[0], req[1])(*req[2])
                    elif req[0] == "_wait":
                        waited, w = req[1][0], _h.Waiting()
                        out = self._wait_here(waited, w, req[1][1])
                    elif req[0] == "_undo":
                        out = None
                        if w is not None:
                            w.undo = req[1][0]
                    else:
                        out = getattr(self, req[0])(*req[1])
                except BaseException as e:
                    req = plan.throw(e)
                    continue
                req = plan.send(out)
        except StopIteration as done:
            return done.value
        except BaseException as e:
            if w is not None and (w.replies is not None or not isinstance(e, _h.LINK_ERRORS)):
                threading.Thread(target=self._abandon, args=(waited, w), name="rlock-abandon", daemon=True).start()
            raise

    @staticmethod
    def _close(conn: Any) -> None:
        if conn is not None:
            _safe(conn.disconnect)

    _sleep = staticmethod(time.sleep)

    def _wait_here(self, plan: Plan, w: _h.Waiting, pin: bool) -> tuple[list, Any]:
        """The wait of ``plan`` on the calling thread (``_handles.Locks._waiting``): (replies,
        the connection if ``pin``)."""
        w.pinned = pin
        return self._handed(w, self._run(self._waiting(plan, w)))

    @staticmethod
    def _read(conn: Any, waits: bool, deadline: Optional[float]) -> Any:
        """The next reply on ``conn``. A wait's is awaited in slices, so that an exception
        raised in this thread lands within one; past ``deadline`` the silence is given up.
        Other reads end with the connection's socket timeout."""
        while waits and not conn.can_read(timeout=0.05):
            if deadline is not None and time.monotonic() > deadline:
                raise RedisTimeoutError("the server did not answer a wait in time")
        return conn.read_response()

    def _abandon(self, plan: Plan, w: _h.Waiting) -> None:
        """The caller of ``_wait`` left before what it waited for reached it. Runs in a thread
        of its own: gives back what the wait was granted (``plan.give_back``, whose REQ ids are
        one per grant, so it is applied at most once)."""
        if w.undo is not None:  # made, never handed over: it gives itself back
            _safe(self._run, w.undo())
            return
        if w.replies is not None:
            if w.pinned:
                _safe(w.conn.disconnect)  # the SESSION connection of what is given back
            self._run(self._giving_back(plan, w.replies[0]))
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
                if not text(self._run(_h.ask(server, "CLIENT", "LIST", "ID", cid))).strip():
                    break
                self._run(_h.ask(server, "CLIENT", "KILL", "ID", cid))
            except ResponseError:
                # CLIENT refused by ACL: the closed socket ends the wait; give the server a
                # moment to see it, and the REQ id below does the rest.
                time.sleep(0.05)
                break
            except Exception:
                pass
            time.sleep(0.01)
        self._run(self._reclaiming(plan, None))


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


class _Watchdog(_h.Watchdog):
    """The watchdog's thread (``_handles.Watchdog``): one per Locks, started by the first hold
    and ended after 5 s with none; with keyspace events on, hears a lock's loss within one
    event (``_Subscriber``)."""

    def __init__(self, locks: Locks):
        self._mutex = threading.RLock()
        super().__init__(locks)
        self._thread: Optional[threading.Thread] = None
        self._wake = threading.Event()

    def _runs(self) -> bool:
        with self._mutex:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="rlock-watchdog", daemon=True)
                self._thread.start()
        return True

    def _stopped(self) -> None:
        self._thread = None

    def _run(self) -> None:
        try:
            while (turn := self._look()) is not None:
                if turn[0]:
                    continue  # renewed: look again at once
                timeout = self._napping(turn[1], 0.05 if self._sub is not None else math.inf)
                if self._sub is not None:
                    self._hear(timeout)
                else:
                    self._wake.wait(timeout)
        finally:
            self._unfollow()

    # the keyspace-event connection (``_handles.Watchdog._following``), read between turns

    def _hear(self, timeout: float) -> None:
        hit: set = set()
        try:
            end = time.monotonic() + timeout
            while self._sub.can_read(timeout=max(0.0, end - time.monotonic())):
                key = self._heard(self._sub.read_response())
                if key is not None:
                    hit.add(key)
                    if not self._sub.can_read(timeout=0):
                        break  # tell it now; later messages are read on the next turn
                if time.monotonic() >= end:
                    break
        except Exception:
            self._unfollow()
        if hit:
            self.check_now(hit)



# ---------------------------------------------------------------- the handles (``_handles``)


class Hold(_h.Hold, _h.SyncScope):
    """A granted lock: ``token`` (fenced), ``count`` (hold count), ``replicas_acked``,
    ``lost`` (a threading.Event set when the hold is gone), ``check()``, ``release()``;
    ``with hold:`` releases at the end."""


class Lock(_h.Lock[Hold], _h.SyncScope):
    """A lock handle. ``with lock as hold:`` acquires (NotAcquired if the wait ends first)
    and releases; ``lock.acquire()`` returns a Hold or None. Owners are threads."""



class MultiHold(_h.MultiHold, _h.SyncScope):
    """Every lock of a multi-key acquire; ``lost`` (a threading.Event) is set when any is lost."""


class MultiLock(_h.MultiLock[MultiHold], _h.SyncScope):
    """Several locks, all or none (RLOCK.MACQUIRE); ``with multi as hold:``."""


class Permits(_h.Permits, _h.SyncScope):
    """Permits taken from a Semaphore; ``release()`` gives them back."""



class LeasedPermit(_h.LeasedPermit, _h.SyncScope):
    """One leased permit: ``id``, ``lost`` (a threading.Event), ``renew()``, ``release()``."""




class Leadership(_h.Leadership, _h.SyncScope):
    """The post: ``value``, ``term`` (the fencing token), ``lost``, ``resign()``."""


class Semaphore(_h.Semaphore[Permits], _h.Sync):
    """Redisson's RSemaphore: ``acquire(permits, wait=)`` -> Permits or None, ``release()``,
    ``try_set_permits()``, ``add_permits()``, ``available()``."""


class PermitSemaphore(_h.PermitSemaphore[LeasedPermit], _h.Sync):
    """Redisson's RPermitExpirableSemaphore: ``acquire(wait=, lease=)`` -> a list of
    LeasedPermit or None."""


class Latch(_h.Latch, _h.Sync):
    """Redisson's RCountDownLatch: ``await_zero(wait)``, ``count_down()``, ``count()``."""


class ReadWriteLock(_h.ReadWriteLock[Lock], _h.Sync):
    """A read/write lock: ``read()`` and ``write()`` are its Lock handles."""


class Election(_h.Election[Leadership], _h.Sync):
    """Leader election on a lock: ``campaign(value)`` -> Leadership or None, ``leader()``,
    ``observe()`` (an iterator)."""
