"""Read-write, multi-key, semaphores, latches, election, queries: C12, C13."""

import threading
import time

import pytest

from rlock_client import DuplicateValue, Leader, Locks, NotAcquired


def test_c12_readers_share_writer_alone(locks, r, key):
    a = locks.read_write(key, owner="a")
    b = locks.read_write(key, owner="b")
    w = locks.read_write(key, owner="w")
    ra = a.read().acquire()
    rb = b.read().acquire()
    assert ra and rb
    assert w.write().acquire() is None
    assert locks.info(key).mode == "read"
    got = {}
    t = threading.Thread(target=lambda: got.update(h=w.write(wait=5).acquire()))
    t.start()
    end = time.monotonic() + 5
    while not locks.waiters(key) and time.monotonic() < end:
        time.sleep(0.01)
    ra.release()
    time.sleep(0.05)
    assert "h" not in got or got["h"] is None  # one reader still holds
    rb.release()
    t.join(5)
    assert got["h"] is not None
    assert locks.info(key).mode == "write"
    assert a.read().acquire() is None  # a writer is alone
    got["h"].release()
    assert not r.exists(key)


def test_c12_multi_key_all_or_none(locks, r, key):
    k1, k2, k3 = f"{{{key}}}:1", f"{{{key}}}:2", f"{{{key}}}:3"
    other = locks.lock(k3, owner="other").acquire()
    assert locks.multi([k1, k2, k3], owner="m").acquire() is None
    assert not r.exists(k1) and not r.exists(k2)  # none taken
    with pytest.raises(NotAcquired):
        with locks.multi([k1, k3], owner="m", wait=0):  # a scoped call with wait=0 tries once
            pass
    other.release()
    with locks.multi([k1, k2, k3], owner="m") as held:
        assert all(r.hget(k, "m") == b"1" for k in (k1, k2, k3))
        assert held.keys == [k1, k2, k3]
    assert not any(r.exists(k) for k in (k1, k2, k3))


def test_c12_semaphore_never_above_n(locks, key):
    sem = locks.semaphore(key)
    assert sem.try_set_permits(3) is True
    assert sem.try_set_permits(5) is False
    inside = [0]
    peak = [0]
    mutex = threading.Lock()

    def worker():
        for _ in range(5):
            p = sem.acquire(wait=10)
            assert p is not None
            with mutex:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.005)
            with mutex:
                inside[0] -= 1
            p.release()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 3
    assert sem.available() == 3
    assert sem.acquire(4) is None


def test_c12_permit_lease_expires(locks, key):
    slots = locks.permit_semaphore(key)
    slots.try_set_permits(1)
    t0 = time.monotonic()
    (permit,) = slots.acquire(lease=1.0)
    assert slots.available() == 0
    assert slots.acquire() is None
    again = slots.acquire(wait=5)  # served when the lease ends
    assert again is not None
    assert 0.9 < time.monotonic() - t0 < 3
    assert permit.lost.wait(1)
    assert again[0].release() is True
    assert slots.available() == 1


def test_c12_renewed_permit_survives_its_lease(server, key):
    locks = Locks.from_url(server.url, watchdog_lease=0.6)
    slots = locks.permit_semaphore(key)
    slots.try_set_permits(1)
    (permit,) = slots.acquire()
    time.sleep(1.5)
    assert not permit.lost.is_set()
    assert slots.available() == 0
    assert permit.release() is True


def test_c12_latch_opens_at_zero(locks, key):
    latch = locks.latch(key)
    assert latch.try_set_count(2) is True
    assert latch.await_zero() is False
    opened = {}
    t = threading.Thread(target=lambda: opened.update(v=latch.await_zero(wait=5)))
    t.start()
    assert latch.count_down() == 1
    time.sleep(0.05)
    assert "v" not in opened
    assert latch.count_down() == 0
    t.join(5)
    assert opened["v"] is True
    assert latch.count() == 0
    assert latch.await_zero(wait=0.1) is True


def test_c13_one_leader_among_four_resign_hands_over(server, key):
    locks = Locks.from_url(server.url, watchdog_lease=2)
    election = locks.election(key)
    seen = []
    stop = threading.Event()

    def observe():
        for leader in election.observe(stop=stop):
            seen.append(leader)

    obs = threading.Thread(target=observe)
    obs.start()
    time.sleep(0.2)
    posts = {}
    mutex = threading.Lock()

    def candidate(i):
        post = election.campaign(f"node-{i}", wait=10)
        with mutex:
            posts[i] = post
            leaders = [p for p in posts.values() if p is not None and not p.hold._released]
            assert len(leaders) == 1
        time.sleep(0.2)
        post.resign()

    threads = [threading.Thread(target=candidate, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    time.sleep(0.2)
    stop.set()
    obs.join(5)
    terms = sorted(p.term for p in posts.values())
    assert len(set(terms)) == 4 and terms == sorted(terms)
    leaders = [x for x in seen if x is not None]
    # each change in order: the terms seen only grow, and each leader was seen
    assert [x.term for x in leaders] == sorted(x.term for x in leaders)
    assert {x.value for x in leaders} == {f"node-{i}" for i in range(4)}
    assert seen[0] is None and seen[-1] is None


def test_c13_duplicate_value_refused(locks, key):
    election = locks.election(key)
    post = election.campaign("same", wait=1)
    with pytest.raises(DuplicateValue):
        election.campaign("same", wait=1)
    assert election.leader() == Leader("same", post.term)
    post.resign()
    assert election.leader() is None


def test_queries(locks, r, key):
    h = locks.lock(key, fenced=True).acquire()
    info = locks.info(key)
    assert info.holders == {h.owner: 1} and info.token == h.token and info.pttl > 0
    found = [s for s in locks.scan(type="lock") if s.key == key]
    assert found and found[0].type == "lock"
    stats = locks.stats()
    assert all("rlock_acquires" in v for v in stats.values())
    assert isinstance(locks.top(5), list)
    assert locks.lock(key).hold_count() == 1
    assert locks.lock(key).unlock() is True
    assert locks.force_release(key) is False
