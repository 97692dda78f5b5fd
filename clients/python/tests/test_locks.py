"""Locks through the sync face: C01-C05, C07, C17, C18."""

import math
import threading
import time

import pytest
import redis

import rlock_client
from rlock_client import Deadlock, Locks, NotAcquired


def holders(r, key):
    return {k.decode(): int(v) for k, v in r.hgetall(key).items()}


def test_c01_acquire_reenter_release(locks, r, key):
    lock = locks.lock(key)
    first = lock.acquire()
    assert first is not None and first.count == 1
    again = lock.acquire()
    assert again.count == 2
    assert holders(r, key) == {lock.owner(): 2}
    other = locks.lock(key, owner="someone-else")
    assert other.acquire() is None
    assert again.release() is False
    assert holders(r, key) == {lock.owner(): 1}
    assert first.release() is True
    assert r.exists(key) == 0
    assert other.acquire() is not None


def test_c01_context_manager_reenters(locks, r, key):
    lock = locks.lock(key)
    with lock as h1:
        with lock as h2:
            assert h2.count == 2
            assert int(r.hget(key, h1.owner)) == 2
        assert int(r.hget(key, h1.owner)) == 1
    assert r.exists(key) == 0


def test_c02_waiter_granted_in_server_within_50ms(locks, r, key):
    holder = locks.lock(key, owner="holder").acquire()
    got = {}

    def wait():
        h = locks.lock(key, wait=5, owner="waiter").acquire()
        got["at"] = time.monotonic()
        got["hold"] = h

    t = threading.Thread(target=wait)
    t.start()
    deadline = time.monotonic() + 5
    while not locks.waiters(key) and time.monotonic() < deadline:
        time.sleep(0.01)
    waiting = locks.waiters(key)
    assert [w.owner for w in waiting] == ["waiter"]
    released = time.monotonic()
    holder.release()
    t.join()
    assert got["hold"] is not None
    assert got["at"] - released < 0.05, got["at"] - released
    got["hold"].release()


def test_c02_waiters_served_in_arrival_order(locks, r, key):
    holder = locks.lock(key, owner="h").acquire()
    order = []
    threads = []
    for i in range(5):
        def wait(i=i):
            h = locks.lock(key, wait=10, owner=f"w{i}").acquire()
            order.append(i)
            h.release()

        t = threading.Thread(target=wait)
        t.start()
        threads.append(t)
        end = time.monotonic() + 5
        while len(locks.waiters(key)) < i + 1 and time.monotonic() < end:
            time.sleep(0.005)
    holder.release()
    for t in threads:
        t.join()
    assert order == [0, 1, 2, 3, 4]


def test_c03_wait_that_ends(locks, r, key):
    held = locks.lock(key, owner="other").acquire()
    lock = locks.lock(key, wait=0.2)
    t0 = time.monotonic()
    assert lock.acquire() is None
    assert 0.15 < time.monotonic() - t0 < 2
    ran = []
    with pytest.raises(NotAcquired):
        with lock:
            ran.append(1)
    assert ran == []
    assert locks.lock(key).acquire(wait=0) is None
    held.release()


def test_c04_renewal_keeps_the_hold(server, r, key):
    locks = Locks.from_url(server.url, watchdog_lease=0.6)
    r.execute_command("CONFIG", "RESETSTAT")
    lock = locks.lock(key, fenced=True)
    hold = lock.acquire()
    token = hold.token
    time.sleep(1.8)  # three leases
    assert not hold.lost.is_set()
    assert holders(r, key) == {hold.owner: 1}
    stats = r.info("commandstats")
    renewals = stats.get("cmdstat_rlock.renew", {}).get("calls", 0)
    assert 3 <= renewals <= 1.8 / 0.2 + 1, renewals  # at most one per lease/3
    again = lock.acquire()
    assert again.token == token
    again.release()
    hold.release()


def test_c05_loss_told_within_a_third_of_the_lease(server, r, key):
    r.config_set("notify-keyspace-events", "")
    locks = Locks.from_url(server.url, watchdog_lease=0.9)
    hold = locks.lock(key).acquire()
    hold.check()
    r.execute_command("RLOCK.FORCERELEASE", key)
    t0 = time.monotonic()
    assert hold.lost.wait(1.0)
    assert time.monotonic() - t0 <= 0.3 + 0.05
    with pytest.raises(rlock_client.Lost):
        hold.check()


@pytest.mark.parametrize("events", ["Kd", "Ed"])
def test_c05_loss_told_within_100ms_with_keyspace_events(server, r, key, events):
    r.config_set("notify-keyspace-events", events)
    try:
        locks = Locks.from_url(server.url, watchdog_lease=30)
        hold = locks.lock(key).acquire()
        time.sleep(1.2)  # the watchdog has looked at the config and subscribed
        t0 = time.monotonic()
        r.execute_command("RLOCK.FORCERELEASE", key)
        assert hold.lost.wait(1.0)
        assert time.monotonic() - t0 < 0.1, time.monotonic() - t0
    finally:
        r.config_set("notify-keyspace-events", "")


def test_c07_long_wait_outlives_socket_timeout(server, r, key):
    user_client = redis.Redis(port=server.port, socket_timeout=1)
    locks = Locks(user_client)
    holder = locks.lock(key, owner="holder").acquire()
    threading.Timer(2.5, holder.release).start()
    t0 = time.monotonic()
    hold = locks.lock(key, wait=5).acquire()
    assert hold is not None
    assert 2.3 < time.monotonic() - t0 < 5
    assert holders(r, key) == {hold.owner: 1}  # no duplicate grant
    assert hold.release() is True


def test_c17_bad_input_raises_before_sending(locks, r, key):
    r.execute_command("CONFIG", "RESETSTAT")
    with pytest.raises(ValueError):
        locks.lock("")
    with pytest.raises(TypeError):
        locks.lock(42)
    with pytest.raises(ValueError):
        locks.lock(key, lease=0)
    with pytest.raises(ValueError):
        locks.lock(key, lease=-1)
    with pytest.raises(ValueError):
        locks.lock(key, wait=-0.5)
    with pytest.raises(TypeError):
        locks.lock(key, wait="5")
    with pytest.raises(TypeError):
        locks.lock(key, fenced="yes")
    with pytest.raises(ValueError):
        locks.lock(key, owner="")
    with pytest.raises(ValueError):
        locks.lock(key, owner="x" * 1025)
    with pytest.raises(TypeError):
        locks.lock(key, sync_replicas="1")
    with pytest.raises(ValueError):
        locks.lock(key).acquire(wait=-1)
    with pytest.raises(ValueError):
        locks.semaphore(key).acquire(0)
    with pytest.raises(TypeError):
        locks.semaphore(key).acquire(1.5)
    with pytest.raises(TypeError):
        locks.multi("ab")
    with pytest.raises(ValueError):
        locks.multi([])
    assert locks.multi([key, key])._keys == [key.encode()]  # named once (the shared vectors)
    with pytest.raises(ValueError):
        locks.latch(key).try_set_count(0)
    with pytest.raises(TypeError):
        Locks("redis://127.0.0.1:1")
    with pytest.raises(ValueError):
        Locks.from_url("redis://127.0.0.1:1", watchdog_lease=0)
    stats = r.info("commandstats")
    assert not [c for c in stats if c.startswith(("cmdstat_rlock", "cmdstat_rsem", "cmdstat_rlatch"))], stats


def test_c18_nested_with_reenters_in_one_thread(locks, r, key):
    lock = locks.lock(key)
    with lock:
        with locks.lock(key) as inner:  # another handle, same thread: same owner
            assert inner.count == 2


def test_c18_threads_crossing_get_deadlock(locks, key):
    a, b = f"{key}:a", f"{key}:b"
    barrier = threading.Barrier(2)
    results = {}

    def worker(first, second, name):
        with locks.lock(first):
            barrier.wait()
            if name == "t2":
                time.sleep(0.3)  # t1 blocks first; t2 closes the cycle
            try:
                with locks.lock(second, wait=3):
                    results[name] = "ok"
            except Deadlock as e:
                results[name] = e

    t1 = threading.Thread(target=worker, args=(a, b, "t1"))
    t2 = threading.Thread(target=worker, args=(b, a, "t2"))
    t1.start()
    t2.start()
    t1.join()
    t2.join()
    assert results["t1"] == "ok"
    err = results["t2"]
    assert isinstance(err, Deadlock)
    assert {w.key for w in err.cycle} == {a, b}
    assert len({w.owner for w in err.cycle}) == 2


def test_c18_hold_released_from_another_thread(locks, r, key):
    hold = locks.lock(key).acquire()
    out = []
    t = threading.Thread(target=lambda: out.append(hold.release()))
    t.start()
    t.join()
    assert out == [True]
    assert r.exists(key) == 0


def test_version():
    """The package says the version its pyproject.toml builds (4.1.0: issue 38)."""
    import os
    import re

    pyproject = os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")
    with open(pyproject) as f:
        (version,) = re.findall(r'^version = "([^"]+)"', f.read(), re.M)
    assert rlock_client.__version__ == version


def test_wait_forever_is_math_inf(locks, key):
    holder = locks.lock(key, owner="x").acquire()
    threading.Timer(0.3, holder.release).start()
    h = locks.lock(key, wait=math.inf).acquire()
    assert h is not None
    h.release()


def test_accepts_valkey_py_and_asyncio_clients(server, r, key):
    valkey = pytest.importorskip("valkey")
    locks = Locks(valkey.Valkey(port=server.port, socket_timeout=1))
    with locks.lock(key, wait=1) as hold:
        assert holders(r, key) == {hold.owner: 1}
    assert not r.exists(key)
    with pytest.raises(TypeError):
        Locks(object())


def test_exit_after_a_loss_raises_lost(server, r, key):
    locks = Locks.from_url(server.url, watchdog_lease=0.6)
    with pytest.raises(rlock_client.Lost):
        with locks.lock(key) as hold:
            r.execute_command("RLOCK.FORCERELEASE", key)
            assert hold.lost.wait(1)
    with pytest.raises(ZeroDivisionError):  # the body's own error is not masked
        with locks.lock(key) as hold:
            r.execute_command("RLOCK.FORCERELEASE", key)
            1 / 0


def test_with_waits_until_granted_unless_the_handle_sets_a_wait(locks, key):
    """``with lock:`` waits as ``with threading.Lock():`` does; ``acquire()`` tries once."""
    holder = locks.lock(key, owner="holder").acquire()
    assert locks.lock(key).acquire() is None
    with pytest.raises(NotAcquired):
        with locks.lock(key, wait=0):
            pass
    with pytest.raises(NotAcquired):
        with locks.multi([key], wait=0.05):
            pass
    threading.Timer(0.2, holder.release).start()
    t0 = time.monotonic()
    with locks.lock(key) as hold:
        assert hold is not None and time.monotonic() - t0 > 0.15
    holder = locks.lock(key, owner="holder").acquire()
    threading.Timer(0.2, holder.release).start()
    with locks.multi([key]) as held:
        assert held.keys == [key]
