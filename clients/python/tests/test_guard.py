"""C20 guarded writes: ``hold.guard(...)`` sends RLOCK.GUARD, on each server, sync and asyncio.
A write through a hold lands while the hold stands, and is refused, changing nothing, once the
lease ran out, the lock was force-released, or a newer token exists. Needs a module with
RLOCK.GUARD (RLOCK_MODULE)."""

import asyncio
import threading
import time

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from rlock_client import Locks, NotHeld, RlockError, StaleToken
from rlock_client import _core
from rlock_client import asyncio as rl
from proxy import CuttingProxy


def data_of(key):
    """The data a lock guards, in the lock's slot (what a cluster requires)."""
    return f"{{{key}}}:data"


def state(r, key):
    """The lock's and its data's state, to show a refusal changed nothing."""
    return r.hgetall(key), r.get(data_of(key)), r.get(f"redisson_lock_token:{{{key}}}")


def guard_calls(r):
    """Calls of RLOCK.GUARD the server has counted."""
    return r.info("commandstats").get("cmdstat_rlock.guard", {}).get("calls", 0)


# ---------------------------------------------------------------- the plan, without a server


def test_c20_core_the_plan_names_the_hold_its_side_and_token_then_the_command():
    call = _core.hold_guard(b"k", b"o", None, None, ("SET", "{k}:data", b"v\x00"))
    assert call.cmds == [["RLOCK.GUARD", b"k", b"o", "CALL", "SET", "{k}:data", b"v\x00"]]
    assert call.resend is False  # the inner command may have run: never sent again
    call = _core.hold_guard(b"k", b"o", _core.WRITE, 7, ("INCRBY", "{k}:n", 5))
    assert call.cmds == [["RLOCK.GUARD", b"k", b"o", "WRITE", "TOKEN", 7, "CALL", "INCRBY", "{k}:n", 5]]
    # Words after CALL are the inner command's, even when they read like options.
    call = _core.hold_guard(b"k", b"o", _core.READ, None, ("GET", "TOKEN"))
    assert call.cmds == [["RLOCK.GUARD", b"k", b"o", "READ", "CALL", "GET", "TOKEN"]]


@pytest.mark.parametrize(
    "command, error",
    [
        ((), TypeError),
        ((["SET", "x", "v"],), TypeError),
        ((5,), TypeError),
        (("SET", "x", None), TypeError),
        (("SET", "x", True), TypeError),
        (("SET", "x", ["v"]), TypeError),
        (("",), ValueError),
        ((b"",), ValueError),
    ],
)
def test_c20_core_a_bad_command_is_refused_before_sending(command, error):
    with pytest.raises(error):
        _core.hold_guard(b"k", b"o", None, None, command)


def test_c20_core_replies_and_refusals():
    read = _core.hold_guard(b"k", b"o", None, 7, ("GET", "x")).read
    assert read([b"v"]) == b"v"
    assert read([None]) is None
    with pytest.raises(NotHeld) as e:
        read([ResponseError("NOTHELD the lock is not held by this owner")])
    assert type(e.value) is NotHeld and (e.value.key, e.value.owner) == ("k", "o")
    with pytest.raises(StaleToken) as e:
        read([ResponseError("STALETOKEN the lock's fencing token is now 8, not 7")])
    assert isinstance(e.value, NotHeld), "a stale token is a kind of not held"
    assert (e.value.key, e.value.owner, e.value.token, e.value.current) == ("k", "o", 7, 8)
    # The inner command's own error is the caller's, untouched.
    wrongtype = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    with pytest.raises(ResponseError) as e:
        read([wrongtype])
    assert e.value is wrongtype
    assert _core.token_now("the lock's fencing token is now 12, not 7") == 12
    assert _core.token_now("something else") is None


def test_c20_core_a_released_hold_sends_nothing():
    with pytest.raises(RlockError, match="released"):
        _core.hold_guard(b"k", b"o", None, None, ("GET", "x"), released=True)
    with pytest.raises(TypeError):  # a bad command is told as such first
        _core.hold_guard(b"k", b"o", None, None, (), released=True)


# ---------------------------------------------------------------- sync, on each server


def test_c20_a_write_through_a_hold_applies_while_it_stands(locks, r, key):
    hold = locks.lock(key).acquire()
    assert hold.guard("SET", data_of(key), "v1") == b"OK"
    assert r.get(data_of(key)) == b"v1"
    assert hold.guard("APPEND", data_of(key), "+2") == 4  # an integer reply
    assert hold.guard("GET", data_of(key)) == b"v1+2"
    with pytest.raises(ResponseError) as e:  # the inner command's own error
        hold.guard("INCR", data_of(key))
    assert not isinstance(e.value, NotHeld) and str(e.value).startswith("value is not an integer")
    assert hold.release() is True

    fenced = locks.lock(key, fenced=True).acquire()
    assert fenced.token >= 1
    assert fenced.guard("SET", data_of(key), f"t{fenced.token}") == b"OK"  # with TOKEN, its own
    assert r.get(data_of(key)) == f"t{fenced.token}".encode()
    fenced.release()

    rw = locks.read_write(key + ":rw")
    write = rw.write(fenced=True).acquire()
    assert write.guard("SET", data_of(key + ":rw"), "w") == b"OK"  # a write hold: WRITE
    write.release()
    read = rw.read().acquire()
    assert read.guard("GET", data_of(key + ":rw")) == b"w"  # a read hold: READ
    read.release()


def test_c20_refused_changing_nothing_once_the_lease_ran_out(locks, r, key):
    hold = locks.lock(key, lease=0.3).acquire()  # a fixed lease: no watchdog renewal
    assert hold.guard("SET", data_of(key), "before") == b"OK"
    time.sleep(0.45)
    before = state(r, key)
    with pytest.raises(NotHeld) as e:
        hold.guard("SET", data_of(key), "after")
    assert not isinstance(e.value, StaleToken)
    assert (e.value.key, e.value.owner) == (key, hold.owner)
    assert state(r, key) == before
    assert before[1] == b"before"


def test_c20_refused_once_the_lease_ran_out_while_the_server_was_busy(locks, server, r, key):
    hold = locks.lock(key, lease=0.2, fenced=True).acquire()
    assert hold.guard("SET", data_of(key), "before") == b"OK"
    busy = threading.Thread(target=lambda: server.client(socket_timeout=10).execute_command("DEBUG", "SLEEP", "0.4"))
    busy.start()
    time.sleep(0.05)  # DEBUG SLEEP is running: the guard below waits behind it
    try:
        with pytest.raises(NotHeld) as e:
            hold.guard("SET", data_of(key), "after")
    finally:
        busy.join()
    assert not isinstance(e.value, StaleToken)
    assert r.get(data_of(key)) == b"before"


def test_c20_refused_changing_nothing_once_force_released(locks, r, key):
    hold = locks.lock(key, fenced=True).acquire()
    assert hold.guard("SET", data_of(key), "before") == b"OK"
    assert locks.force_release(key) is True
    before = state(r, key)
    with pytest.raises(NotHeld) as e:
        hold.guard("SET", data_of(key), "after")
    assert not isinstance(e.value, StaleToken) and str(e.value).startswith("NOTHELD")
    assert state(r, key) == before
    assert before[:2] == ({}, b"before")


def test_c20_refused_changing_nothing_once_a_newer_token_exists(locks, server, r, key):
    first = locks.lock(key, fenced=True).acquire()
    assert first.guard("SET", data_of(key), "first") == b"OK"

    # Another holder takes the lock after a force release, and writes.
    locks.force_release(key)
    second = Locks.from_url(server.url).lock(key, fenced=True, owner="second").acquire()
    assert second.token > first.token
    assert second.guard("SET", data_of(key), "second") == b"OK"
    before = state(r, key)
    with pytest.raises(NotHeld) as e:
        first.guard("SET", data_of(key), "stale")
    assert not isinstance(e.value, StaleToken)
    assert state(r, key) == before and before[1] == b"second"
    second.release()

    # The same owner (a stable owner, in another process or after a restart) takes it again:
    # it holds the lock, but not as the hold with the old token.
    again = Locks.from_url(server.url).lock(key, fenced=True, owner=first.owner).acquire()
    assert again.token > second.token
    before = state(r, key)
    with pytest.raises(StaleToken) as e:
        first.guard("SET", data_of(key), "stale")
    assert isinstance(e.value, NotHeld), "a stale token is a kind of not held"
    assert (e.value.key, e.value.owner, e.value.token, e.value.current) == (key, first.owner, first.token, again.token)
    assert state(r, key) == before
    assert again.guard("SET", data_of(key), "again") == b"OK"  # the newer hold's own token passes
    assert r.get(data_of(key)) == b"again"
    again.release()


def test_c20_bad_commands_raise_before_anything_is_sent(locks, r, key):
    hold = locks.lock(key).acquire()
    sent = guard_calls(r)
    with pytest.raises(TypeError):
        hold.guard()
    with pytest.raises(TypeError):
        hold.guard(["SET", data_of(key), "v"])
    with pytest.raises(TypeError):
        hold.guard("SET", data_of(key), None)
    with pytest.raises(ValueError):
        hold.guard("")
    hold.release()
    with pytest.raises(RlockError, match="released"):
        hold.guard("SET", data_of(key), "v")
    assert guard_calls(r) == sent, "no RLOCK.GUARD reached the server"
    assert r.exists(data_of(key)) == 0


def test_c20_a_guard_cut_on_the_way_back_is_not_sent_again(server, r, key):
    proxy = CuttingProxy(server.port)
    try:
        locks = Locks(redis.Redis(port=proxy.port))  # redis-py's own retries left on
        hold = locks.lock(key).acquire()
        proxy.cut_next(b"RLOCK.GUARD")
        with pytest.raises((RedisConnectionError, OSError)):
            hold.guard("INCR", data_of(key))
        assert proxy.cuts == 1
        assert len([d for d in proxy.seen if b"RLOCK.GUARD" in d]) == 1, "sent once"
        assert r.get(data_of(key)) == b"1"  # it ran, once
        assert hold.release() is True
    finally:
        proxy.close()


def test_c20_a_leader_writes_only_while_it_leads_in_its_term(locks, server, r, key):
    leader = locks.election(key).campaign("node-a")
    assert leader.guard("SET", data_of(key), "a") == b"OK"
    locks.force_release(key)
    following = Locks.from_url(server.url).election(key).campaign("node-b")
    assert following.term > leader.term
    with pytest.raises(NotHeld):
        leader.guard("SET", data_of(key), "a again")
    assert r.get(data_of(key)) == b"a"
    assert following.guard("SET", data_of(key), "b") == b"OK"
    following.resign()


# ---------------------------------------------------------------- asyncio, on each server


async def test_c20_async_a_write_through_a_hold_applies_while_it_stands(server, r, key):
    locks = rl.Locks.from_url(server.url)
    hold = await locks.lock(key, fenced=True).acquire()
    assert await hold.guard("SET", data_of(key), "v1") == b"OK"
    assert await hold.guard("APPEND", data_of(key), "+2") == 4
    assert r.get(data_of(key)) == b"v1+2"
    with pytest.raises(ResponseError) as e:
        await hold.guard("INCR", data_of(key))
    assert not isinstance(e.value, NotHeld)
    await hold.release()
    rw = locks.read_write(key + ":rw")
    write = await rw.write().acquire()
    assert await write.guard("SET", data_of(key + ":rw"), "w") == b"OK"
    await write.release()
    read = await rw.read(fenced=True).acquire()
    assert await read.guard("GET", data_of(key + ":rw")) == b"w"
    await read.release()


async def test_c20_async_refused_once_the_lease_ran_out(server, r, key):
    locks = rl.Locks.from_url(server.url)
    hold = await locks.lock(key, lease=0.3).acquire()
    assert await hold.guard("SET", data_of(key), "before") == b"OK"
    await asyncio.sleep(0.45)
    before = state(r, key)
    with pytest.raises(rl.NotHeld) as e:
        await hold.guard("SET", data_of(key), "after")
    assert not isinstance(e.value, StaleToken) and (e.value.key, e.value.owner) == (key, hold.owner)
    assert state(r, key) == before and before[1] == b"before"


async def test_c20_async_refused_once_force_released_or_a_newer_token_exists(server, r, key):
    locks = rl.Locks.from_url(server.url)
    first = await locks.lock(key, fenced=True).acquire()
    assert await first.guard("SET", data_of(key), "first") == b"OK"
    assert await locks.force_release(key) is True
    before = state(r, key)
    with pytest.raises(rl.NotHeld) as e:
        await first.guard("SET", data_of(key), "after")
    assert not isinstance(e.value, rl.StaleToken)
    assert state(r, key) == before and before[:2] == ({}, b"first")

    again = await rl.Locks.from_url(server.url).lock(key, fenced=True, owner=first.owner).acquire()
    assert again.token > first.token
    before = state(r, key)
    with pytest.raises(rl.StaleToken) as e:
        await first.guard("SET", data_of(key), "stale")
    assert (e.value.token, e.value.current) == (first.token, again.token)
    assert state(r, key) == before
    assert await again.guard("SET", data_of(key), "again") == b"OK"
    await again.release()


async def test_c20_async_bad_commands_and_released_holds_send_nothing(server, r, key):
    locks = rl.Locks.from_url(server.url)
    hold = await locks.lock(key).acquire()
    sent = guard_calls(r)
    with pytest.raises(TypeError):
        await hold.guard()
    with pytest.raises(TypeError):
        await hold.guard("SET", data_of(key), None)
    with pytest.raises(ValueError):
        await hold.guard(b"")
    await hold.release()
    with pytest.raises(rl.RlockError, match="released"):
        await hold.guard("SET", data_of(key), "v")
    assert guard_calls(r) == sent
    assert r.exists(data_of(key)) == 0


async def test_c20_async_a_leader_writes_only_while_it_leads(server, r, key):
    locks = rl.Locks.from_url(server.url)
    leader = await locks.election(key).campaign("node-a")
    assert await leader.guard("SET", data_of(key), "a") == b"OK"
    await locks.force_release(key)
    following = await rl.Locks.from_url(server.url).election(key).campaign("node-b")
    assert following.term > leader.term
    with pytest.raises(rl.NotHeld):
        await leader.guard("SET", data_of(key), "a again")
    assert r.get(data_of(key)) == b"a"
    await following.resign()
