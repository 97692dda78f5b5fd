"""Waits given up and links cut: C06 (threads), C08."""

import ctypes
import random
import threading
import time

import pytest
import redis

from rlock_client import Locks
from proxy import CuttingProxy


class GaveUp(Exception):
    pass


def interrupt(thread: threading.Thread) -> None:
    """Raises GaveUp inside ``thread``, as a KeyboardInterrupt or a timeout would arrive."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(GaveUp))


def interrupt_after_the_first_reply(monkeypatch):
    """A wait connection's first reply is read, then GaveUp is raised in the waiting thread, as an
    interruption landing between the grant's arrival and its recording would."""
    import rlock_client._sync as sync

    take = sync._Server._take

    def taking(self, waits=False, timeout=None):
        conn = take(self, waits, timeout)
        if waits:
            read = conn.read_response

            def read_then_interrupted(*a, **kw):
                read(*a, **kw)
                raise GaveUp()

            conn.read_response = read_then_interrupted
        return conn

    monkeypatch.setattr(sync._Server, "_take", taking)


def abandoned(within=10.0):
    """Waits for the package's threads that end given-up waits (``rlock-abandon``) to finish, so
    that what is checked next is what they left, not a moment of their work."""
    for t in [t for t in threading.enumerate() if t.name == "rlock-abandon"]:
        t.join(within)
        assert not t.is_alive(), "a given-up wait was not ended in time"


def wait_free(r, key, within=5.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not r.exists(key) and not r.execute_command("RLOCK.WAITERS", key):
            return True
        time.sleep(0.02)
    return False


def test_c06_interrupted_thread_waits_leave_nothing(server, r, key):
    locks = Locks.from_url(server.url)  # 30 s leases: an orphan would stay
    rng = random.Random(6)
    outcomes = {"granted": 0, "interrupted": 0, "none": 0}
    mutex = threading.Lock()
    stop = threading.Event()

    def churn():
        # Grants keep happening while waits are interrupted.
        lock = locks.lock(key, wait=5, owner="churn")
        while not stop.is_set():
            h = lock.acquire()
            if h:
                time.sleep(0.01)
                h.release()
            time.sleep(0.005)

    churner = threading.Thread(target=churn)
    churner.start()

    def waiter():
        kind = "interrupted"
        try:
            try:
                h = locks.lock(key, wait=2).acquire()
                if h is not None:
                    time.sleep(0.005)
                    h.release()
                    kind = "granted"
                else:
                    kind = "none"
            except GaveUp:
                pass
            with mutex:
                finished.add(threading.get_ident())
        except GaveUp:  # arrived while finishing
            kind = "interrupted"
        with mutex:
            outcomes[kind] += 1

    finished: set = set()

    def interrupt_if_waiting(t):
        with mutex:
            if t.is_alive() and t.ident not in finished:
                interrupt(t)

    # Rounds of 40 waiters until at least 5 were interrupted: how many interruptions land in a
    # wait (not before or after it) depends on how busy the machine is.
    rounds = 0
    while rounds < 4 and (rounds == 0 or outcomes["interrupted"] < 5):
        rounds += 1
        threads = []
        for _ in range(40):
            t = threading.Thread(target=waiter)
            t.start()
            threads.append(t)
            threading.Timer(rng.uniform(0.0, 0.03), interrupt_if_waiting, (t,)).start()  # a random moment of its wait
            time.sleep(rng.uniform(0.0, 0.01))
        for t in threads:
            t.join(10)
    stop.set()
    churner.join(10)
    assert sum(outcomes.values()) == 40 * rounds, outcomes
    print("c06 outcomes", outcomes)
    assert outcomes["interrupted"] >= 5, outcomes
    assert wait_free(r, key), (r.hgetall(key), r.execute_command("RLOCK.WAITERS", key))


@pytest.mark.parametrize("step", ["reply read, not recorded", "replies recorded", "hold made"])
def test_c06_interrupted_at_each_step_of_a_grant_leaves_nothing(server, r, key, monkeypatch, step):
    """A lock's wait runs in the calling thread: an interruption that lands after the server
    granted it, at each step before the Hold is returned, still gives the grant back."""
    import rlock_client._sync as sync

    locks = Locks.from_url(server.url)  # 30 s leases: an orphan would stay
    holder = locks.lock(key, owner="holder").acquire()
    if step == "reply read, not recorded":
        interrupt_after_the_first_reply(monkeypatch)
    elif step == "replies recorded":
        def granted_then_interrupted(*a, **kw):
            raise GaveUp()

        import rlock_client._handles as handles  # the plans, written once for both faces

        monkeypatch.setattr(handles, "read_grant", granted_then_interrupted)
    else:
        activate = sync.Hold._activate

        def activated_then_interrupted(self):
            activate(self)
            raise GaveUp()

        monkeypatch.setattr(sync.Hold, "_activate", activated_then_interrupted)
    threading.Timer(0.2, holder.release).start()
    with pytest.raises(GaveUp):
        locks.lock(key, wait=5).acquire()  # waits, then is granted
    monkeypatch.undo()
    assert wait_free(r, key), (r.hgetall(key), r.execute_command("RLOCK.WAITERS", key))
    assert not locks._watchdog._entries


@pytest.fixture
def proxy(server):
    """A proxy to the server that cuts the link when told to (tests/proxy.py), closed after."""
    p = CuttingProxy(server.port)
    yield p
    p.close()


def through(proxy):
    """Locks whose connections go through ``proxy`` (redis-py's own retries left on)."""
    return Locks(redis.Redis(port=proxy.port))


def sent(proxy, *words):
    """What went through ``proxy`` with each of ``words`` in it."""
    return [d for d in proxy.seen if all(w in d for w in words)]


def req_ids(calls):
    return [d.split(b"REQ\r\n")[1].split(b"\r\n")[1] for d in calls]


def killed_while_blocked(server, r, proxy, key, holder, wait, *words):
    """Runs ``wait`` in a thread until it waits on ``key``, kills its connection in the server,
    and once it was resent (``words`` name it) releases ``holder``: what ``wait`` returned."""
    got = {}
    t = threading.Thread(target=lambda: got.update(h=wait()))
    t.start()
    end = time.monotonic() + 5
    while not r.execute_command("RLOCK.WAITERS", key) and time.monotonic() < end:
        time.sleep(0.01)
    (w,) = Locks.from_url(server.url).waiters(key)
    r.execute_command("CLIENT", "KILL", "ID", w.client_id)
    end = time.monotonic() + 5
    while len(sent(proxy, *words)) < 2 and time.monotonic() < end:
        time.sleep(0.01)
    holder.release()
    t.join(10)
    return got.get("h")


def test_c08_acquire_cut_is_resent_with_the_same_req_id(server, r, key, proxy):
    locks = through(proxy)
    proxy.cut_next(b"RLOCK.ACQUIRE")
    hold = locks.lock(key).acquire()
    assert hold is not None
    assert proxy.cuts == 1
    calls = sent(proxy, b"RLOCK.ACQUIRE")
    assert len(calls) == 2, calls  # the cut one, and one resend: nothing silent
    assert calls[0] == calls[1]  # the same REQ id
    assert int(r.hget(key, hold.owner)) == 1  # applied once
    assert hold.release() is True
    assert not r.exists(key)


def test_c08_release_cut_is_resent_with_the_same_req_id(server, r, key, proxy):
    lock = through(proxy).lock(key)
    first = lock.acquire()
    second = lock.acquire()
    assert int(r.hget(key, first.owner)) == 2
    proxy.cut_next(b"RLOCK.RELEASE")
    assert second.release() is False  # the server's first reply, replayed: 0
    calls = sent(proxy, b"RLOCK.RELEASE")
    assert len(calls) == 2 and calls[0] == calls[1]
    assert int(r.hget(key, first.owner)) == 1  # one hold given back, not two
    assert first.release() is True


def test_c08_blocked_acquire_killed_is_resent_with_the_same_req_id(server, r, key, proxy):
    locks = through(proxy)
    holder = locks.lock(key, owner="holder").acquire()
    hold = killed_while_blocked(server, r, proxy, key, holder, locks.lock(key, wait=5, owner="w").acquire,
                                b"RLOCK.ACQUIRE", b"BLOCK")
    assert hold is not None
    calls = sent(proxy, b"RLOCK.ACQUIRE", b"BLOCK")
    assert len(calls) == 2
    ids = req_ids(calls)
    assert ids[0] == ids[1]
    assert int(r.hget(key, "w")) == 1
    hold.release()


def _family(kind, locks, r, key):
    """(start: take what makes the waiter wait, the waiter's call, free: let it be granted,
    left: nothing is held or waiting once the dust settles)."""
    if kind in ("lock", "multi"):
        keys = [f"{{{key}}}:1", f"{{{key}}}:2"]
        held = {}

        def start():
            held["h"] = locks.lock(keys[0], owner="holder").acquire()

        call = (lambda: locks.lock(keys[0], wait=5).acquire()) if kind == "lock" else \
            (lambda: locks.multi(keys, wait=5).acquire())
        return start, call, lambda: held["h"].release(), lambda: all(wait_free(r, k) for k in keys)
    if kind in ("semaphore", "leased permit"):
        sem = locks.semaphore(key) if kind == "semaphore" else locks.permit_semaphore(key)
        call = lambda: sem.acquire(wait=5)  # noqa: E731

        def settled():
            end = time.monotonic() + 5
            while time.monotonic() < end and sem.available() != 1:
                time.sleep(0.02)
            return sem.available() == 1 and not r.execute_command("RLOCK.WAITERS", key)

        # A semaphore never set has no permits: the waiter waits.
        return lambda: None, call, lambda: sem.add_permits(1), settled
    latch = locks.latch(key)
    return (lambda: latch.try_set_count(1), lambda: latch.await_zero(5), latch.count_down,
            lambda: wait_free(r, key))


FAMILIES = ["lock", "multi", "semaphore", "leased permit", "latch"]


@pytest.mark.parametrize("kind", FAMILIES)
def test_c06_every_wait_runs_on_the_calling_thread_and_an_interrupt_leaves_nothing(server, r, key, kind):
    """Multi-key, semaphore and latch waits run on the caller's thread, as a lock's do: an
    interrupt there (KeyboardInterrupt, a timeout) gives the wait up, and nothing stays held."""
    locks = Locks.from_url(server.url)  # 30 s leases: an orphan would stay
    start, call, free, left = _family(kind, locks, r, key)
    start()
    out = {}

    def waiter():
        out["thread"] = threading.current_thread().name
        try:
            out["got"] = call()
        except GaveUp:
            out["gave up"] = True

    t = threading.Thread(target=waiter, name="the caller")
    t.start()
    end = time.monotonic() + 5
    while not r.execute_command("RLOCK.WAITERS", key if kind not in ("lock", "multi") else f"{{{key}}}:1"):
        assert time.monotonic() < end, "the wait never reached the server"
        time.sleep(0.01)
    assert not [x for x in threading.enumerate() if x.name == "rlock-wait"]  # no helper thread
    interrupt(t)
    t.join(5)
    assert out.get("gave up"), out
    free()
    abandoned()
    assert left()
    assert not locks._watchdog._entries


@pytest.mark.parametrize("kind", ["lock", "multi", "semaphore", "leased permit"])
@pytest.mark.parametrize("acl", [False, True], ids=["default user", "CLIENT KILL refused"])
def test_c06_a_grant_read_then_interrupted_is_given_back_once(server, r, key, monkeypatch, kind, acl):
    """The grant reached the client and the thread was interrupted before it was recorded: the
    wait is sent again with its REQ id (the grant is replayed) and given back under the id
    derived from it, also for a user whose ACL refuses CLIENT KILL."""
    url = server.url
    if acl:
        r.execute_command("ACL", "SETUSER", "nokill", "on", ">pw", "~*", "&*", "+@all", "-client|kill")
        url = url.replace("redis://", "redis://nokill:pw@")
    locks = Locks.from_url(url)
    start, call, free, left = _family(kind, locks, r, key)
    start()
    interrupt_after_the_first_reply(monkeypatch)
    threading.Timer(0.2, free).start()
    with pytest.raises(GaveUp):
        call()  # waits, then is granted
    monkeypatch.undo()
    abandoned()
    assert left()
    assert not locks._watchdog._entries


def test_c08_blocked_multi_key_acquire_killed_is_resent_with_the_same_req_id(server, r, key, proxy):
    keys = [f"{{{key}}}:1", f"{{{key}}}:2"]
    locks = through(proxy)
    holder = locks.lock(keys[0], owner="holder").acquire()
    hold = killed_while_blocked(server, r, proxy, keys[0], holder, locks.multi(keys, wait=5, owner="w").acquire,
                                b"RLOCK.MACQUIRE")
    assert hold is not None
    calls = sent(proxy, b"RLOCK.MACQUIRE")
    assert len(calls) == 2
    ids = req_ids(calls)
    assert ids[0] == ids[1]
    assert all(r.hget(k, "w") == b"1" for k in keys)  # applied once
    proxy.cut_next(b"RLOCK.MRELEASE")
    assert hold.release() == 2  # cut, resent with its REQ id: the first reply replayed
    released = sent(proxy, b"RLOCK.MRELEASE")
    assert len(released) == 2 and released[0] == released[1]
    assert not any(r.exists(k) for k in keys)
