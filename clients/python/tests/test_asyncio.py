"""The asyncio face: C01-C08, C12, C13, C15, C17, C18 for tasks."""

import asyncio
import random
import time

import pytest
import redis.asyncio as aredis

from rlock_client import asyncio as rl
from proxy import CuttingProxy


def alocks(server, **kw):
    return rl.Locks.from_url(server.url, **kw)


async def test_c01_async_acquire_reenter_release(server, r, key):
    locks = alocks(server)
    lock = locks.lock(key)
    h1 = await lock.acquire()
    h2 = await lock.acquire()
    assert (h1.count, h2.count) == (1, 2)
    assert await locks.lock(key, owner="other").acquire() is None
    assert await h2.release() is False
    assert int(r.hget(key, h1.owner)) == 1
    assert await h1.release() is True
    assert not r.exists(key)


async def test_c02_async_waiter_granted_within_50ms_in_order(server, r, key):
    locks = alocks(server)
    holder = await locks.lock(key, owner="h").acquire()
    order = []

    async def waiter(i):
        h = await locks.lock(key, wait=5, owner=f"w{i}").acquire()
        order.append((i, time.monotonic()))
        await h.release()

    tasks = []
    for i in range(4):
        tasks.append(asyncio.create_task(waiter(i)))
        while len(await locks.waiters(key)) < i + 1:
            await asyncio.sleep(0.005)
    released = time.monotonic()
    await holder.release()
    await asyncio.gather(*tasks)
    assert [i for i, _ in order] == [0, 1, 2, 3]
    assert order[0][1] - released < 0.05


async def test_c03_async_wait_ends(server, key):
    locks = alocks(server)
    held = await locks.lock(key, owner="x").acquire()
    assert await locks.lock(key, wait=0.1).acquire() is None
    ran = []
    with pytest.raises(rl.NotAcquired):
        async with locks.lock(key, wait=0.1):
            ran.append(1)
    assert ran == []
    await held.release()


async def test_c04_async_renewal(server, r, key):
    locks = alocks(server, watchdog_lease=0.6)
    h = await locks.lock(key, fenced=True).acquire()
    await asyncio.sleep(1.8)
    assert not h.lost.is_set()
    again = await locks.lock(key, fenced=True).acquire()
    assert again.token == h.token
    await again.release()
    await h.release()


async def test_c05_async_loss_told(server, r, key):
    r.config_set("notify-keyspace-events", "")
    locks = alocks(server, watchdog_lease=0.9)
    h = await locks.lock(key).acquire()
    r.execute_command("RLOCK.FORCERELEASE", key)
    t0 = time.monotonic()
    await asyncio.wait_for(h.lost.wait(), 1)
    assert time.monotonic() - t0 <= 0.35
    with pytest.raises(rl.Lost):
        h.check()


@pytest.mark.parametrize("events", ["Kd", "Ed"])
async def test_c05_async_loss_within_100ms_with_events(server, r, key, events):
    r.config_set("notify-keyspace-events", events)
    try:
        locks = alocks(server)
        h = await locks.lock(key).acquire()
        await asyncio.sleep(1.2)
        t0 = time.monotonic()
        r.execute_command("RLOCK.FORCERELEASE", key)
        await asyncio.wait_for(h.lost.wait(), 1)
        assert time.monotonic() - t0 < 0.1
    finally:
        r.config_set("notify-keyspace-events", "")


async def test_c06_cancelled_tasks_leave_nothing(server, r, key):
    locks = alocks(server)  # 30 s leases: an orphan would stay
    rng = random.Random(16)
    stop = asyncio.Event()

    async def churn():
        lock = locks.lock(key, wait=5, owner="churn")
        while not stop.is_set():
            h = await lock.acquire()
            if h:
                await asyncio.sleep(0.01)
                await h.release()
            await asyncio.sleep(0.003)

    async def waiter():
        try:
            async with locks.lock(key, wait=2):
                await asyncio.sleep(0.005)
        except rl.NotAcquired:
            pass

    churner = asyncio.create_task(churn())
    tasks = []
    loop = asyncio.get_running_loop()
    for _ in range(40):
        t = asyncio.create_task(waiter())
        tasks.append(t)
        loop.call_later(rng.uniform(0, 0.03), t.cancel)  # at a random moment of its wait
        await asyncio.sleep(rng.uniform(0, 0.01))
    results = await asyncio.gather(*tasks, return_exceptions=True)
    stop.set()
    await churner
    cancelled = sum(isinstance(x, asyncio.CancelledError) for x in results)
    assert cancelled >= 5, cancelled
    end = time.monotonic() + 5
    while (r.exists(key) or r.execute_command("RLOCK.WAITERS", key)) and time.monotonic() < end:
        await asyncio.sleep(0.02)
    assert not r.exists(key), r.hgetall(key)


async def test_c07_async_long_wait_outlives_socket_timeout(server, r, key):
    locks = rl.Locks(aredis.Redis(port=server.port, socket_timeout=1))
    holder = await locks.lock(key, owner="holder").acquire()

    async def later():
        await asyncio.sleep(2.5)
        await holder.release()

    asyncio.create_task(later())
    h = await locks.lock(key, wait=5).acquire()
    assert h is not None
    assert {k.decode() for k in r.hgetall(key)} == {h.owner}
    await h.release()


async def test_c08_async_acquire_cut_resent_with_same_req(server, r, key):
    proxy = CuttingProxy(server.port)
    try:
        locks = rl.Locks(aredis.Redis(port=proxy.port))
        proxy.cut_next(b"RLOCK.ACQUIRE")
        h = await locks.lock(key).acquire()
        sent = [d for d in proxy.seen if b"RLOCK.ACQUIRE" in d]
        assert len(sent) == 2 and sent[0] == sent[1]
        assert int(r.hget(key, h.owner)) == 1
        proxy.cut_next(b"RLOCK.RELEASE")
        assert await h.release() is True
        assert len([d for d in proxy.seen if b"RLOCK.RELEASE" in d]) == 2
        assert not r.exists(key)
    finally:
        proxy.close()


async def test_c12_async_synchronizers(server, key):
    locks = alocks(server)
    sem = locks.semaphore(key + ":sem")
    await sem.try_set_permits(1)
    p = await sem.acquire()
    assert await sem.acquire(wait=0.05) is None
    await p.release()
    latch = locks.latch(key + ":latch")
    await latch.try_set_count(1)
    waiter = asyncio.create_task(latch.await_zero(wait=5))
    await asyncio.sleep(0.05)
    await latch.count_down()
    assert await waiter is True
    k1, k2 = f"{{{key}}}:a", f"{{{key}}}:b"
    async with locks.multi([k1, k2]) as m:
        assert len(m.keys) == 2
    rw1 = locks.read_write(key + ":rw", owner="a")
    rw2 = locks.read_write(key + ":rw", owner="b")
    ra, rb = await rw1.read().acquire(), await rw2.read().acquire()
    assert ra and rb
    assert await locks.read_write(key + ":rw", owner="c").write().acquire() is None
    await ra.release()
    await rb.release()
    slots = locks.permit_semaphore(key + ":slots")
    await slots.try_set_permits(1)
    (lp,) = await slots.acquire(lease=0.2)
    again = await slots.acquire(wait=2)
    assert again is not None
    await again[0].release()


async def test_c13_async_election(server, key):
    locks = alocks(server, watchdog_lease=2)
    e = locks.election(key)
    a = await e.campaign("a", wait=1)
    b_task = asyncio.create_task(e.campaign("b", wait=5))
    await asyncio.sleep(0.1)
    assert (await e.leader()).value == "a"
    await a.resign()
    b = await b_task
    assert b.term > a.term
    assert (await e.leader()).value == "b"
    await b.resign()
    assert await e.leader() is None


async def test_c17_async_bad_input(server, key):
    locks = alocks(server)
    with pytest.raises(ValueError):
        locks.lock("")
    with pytest.raises(ValueError):
        locks.lock(key, lease=0)
    with pytest.raises(ValueError):
        locks.lock(key, wait=-1)
    with pytest.raises(TypeError):
        locks.lock(key, wait="1")


async def test_c18_async_tasks_are_owners(server, r, key):
    locks = alocks(server)
    lock = locks.lock(key)
    async with lock as outer:
        async with lock as inner:
            assert inner.count == 2
        other = await asyncio.create_task(lock.acquire())  # another task: another owner
        assert other is None
    hold = await lock.acquire()
    assert await asyncio.create_task(hold.release()) is True  # released from another task
    assert not r.exists(key)


async def test_c05_async_loss_told_while_the_server_hangs(flavor):
    import os
    import signal

    from servers import Server

    s = Server(flavor).start()
    try:
        locks = rl.Locks.from_url(s.url, watchdog_lease=0.9)
        hold = await locks.lock("hung").acquire()
        acquired = time.monotonic()
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            await asyncio.wait_for(hold.lost.wait(), 3)
            assert time.monotonic() - acquired < 0.9 + 0.35
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["lock", "multi", "semaphore", "leased permit"])
@pytest.mark.parametrize("acl", [False, True], ids=["default user", "CLIENT refused"])
async def test_c06_a_cancelled_wait_of_each_family_leaves_nothing(server, r, key, kind, acl):
    """A task cancelled while its wait is blocked in the server, or just as it is granted,
    leaves nothing held: the wait's connection is closed and the call is sent again with its
    REQ id, and what that replies is given back; no CLIENT command is needed, so a user whose
    ACL refuses them is served alike."""
    url = server.url
    if acl:
        r.execute_command("ACL", "SETUSER", "noclient", "on", ">pw", "~*", "&*", "+@all", "-client")
        url = url.replace("redis://", "redis://noclient:pw@")
    locks = rl.Locks.from_url(url)  # 30 s leases: an orphan would stay
    keys = [f"{{{key}}}:1", f"{{{key}}}:2"]
    sem = locks.semaphore(key) if kind == "semaphore" else locks.permit_semaphore(key)
    for delay in (0.05, 0.2):  # cancelled while blocked; cancelled as the grant arrives
        if kind in ("lock", "multi"):
            holder = await locks.lock(keys[0], owner="holder").acquire()
            free = holder.release
            call = locks.lock(keys[0], wait=5).acquire() if kind == "lock" else locks.multi(keys, wait=5).acquire()
        else:
            free = lambda: sem.add_permits(1)  # noqa: E731
            call = sem.acquire(wait=5)
        t = asyncio.create_task(call)
        await asyncio.sleep(0.1)
        asyncio.get_running_loop().call_later(delay - 0.05, t.cancel)
        if delay > 0.1:
            await free()
        await asyncio.sleep(0.06)
        if delay <= 0.1:
            await free()
        try:
            got = await t
        except asyncio.CancelledError:
            got = None
        if got is not None:  # granted before the cancel landed: ours to give back
            for g in got if isinstance(got, list) else [got]:
                await g.release()
        import rlock_client.asyncio as face

        if face._BACKGROUND:  # the tasks that end given-up waits: what they leave is checked
            await asyncio.wait(set(face._BACKGROUND), timeout=10)
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if kind in ("lock", "multi"):
                if not any(r.exists(k) or r.execute_command("RLOCK.WAITERS", k) for k in keys):
                    break
            elif await sem.available() == 1:
                break
            await asyncio.sleep(0.02)
        if kind in ("lock", "multi"):
            assert not any(r.exists(k) for k in keys), [r.hgetall(k) for k in keys]
        else:
            assert await sem.available() == 1
            await sem.add_permits(-1)


async def test_async_face_has_the_sync_faces_api(server, r, key):
    import rlock_client as sync_face

    for name in sync_face.__all__:
        if name == "__version__":
            continue
        mine, theirs = getattr(rl, name), getattr(sync_face, name)
        if isinstance(theirs, type):
            missing = {m for m in dir(theirs) if not m.startswith("_")} - set(dir(mine))
            assert not missing, (name, missing)
    locks = alocks(server)
    assert await locks.read_write(key).is_locked() is False
    slots = locks.permit_semaphore(key + ":slots")
    await slots.try_set_permits(1)
    (p,) = await slots.acquire(lease=0.3)
    await asyncio.sleep(0.2)
    await p.renew()
    await asyncio.sleep(0.2)
    assert await slots.available() == 0  # renewed past its first lease
    await p.release()


async def test_async_with_waits_until_granted_unless_the_handle_sets_a_wait(server, key):
    locks = alocks(server)
    holder = await locks.lock(key, owner="holder").acquire()
    assert await locks.lock(key).acquire() is None  # acquire() without a wait tries once
    with pytest.raises(rl.NotAcquired):
        async with locks.lock(key, wait=0):
            pass
    asyncio.get_running_loop().call_later(0.2, lambda: asyncio.ensure_future(holder.release()))
    t0 = time.monotonic()
    async with locks.lock(key) as hold:  # waits
        assert hold is not None and time.monotonic() - t0 > 0.15
