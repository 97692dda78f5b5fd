"""The decisions without sockets (rlock_client._core), tested alone."""

import math

import pytest

from rlock_client import DeadlockWait
from rlock_client._core import (
    AcquireSpec,
    Renewal,
    acquire_cmd,
    client_is_blocked_in,
    event_channels,
    events_on,
    give_back_req,
    lease_ms,
    lost_key,
    pack,
    parse_cycle,
    parse_info,
    wait_ms,
)


def test_parse_cycle_unescapes_and_marks_kept_locks():
    msg = r'DEADLOCK "b" waits for "k1" held by "a"; "a\"x" waits for "k\\2" kept for "m\x01"'
    assert parse_cycle(msg) == [
        DeadlockWait("b", "k1", "a", False),
        DeadlockWait('a"x', "k\\2", "m\x01", True),
    ]


def test_times():
    assert lease_ms(0.0004) == 1 and lease_ms(30) == 30000
    assert wait_ms(None) is None and wait_ms(0) is None and wait_ms(math.inf) == 0
    assert wait_ms(0.0001) == 1 and wait_ms(5) == 5000
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ValueError):
            lease_ms(bad)
    with pytest.raises(TypeError):
        lease_ms(True)


def test_acquire_command_carries_every_option_and_a_req_id():
    spec = AcquireSpec(key=b"k", side="WRITE", lease_ms=5000, fenced=True, session=True)
    assert acquire_cmd(spec, b"o", "r1", 0) == [
        "RLOCK.ACQUIRE", b"k", b"o", "WRITE", "LEASE", 5000, "BLOCK", 0, "TOKEN", "SESSION", "REQ", "r1"]


def test_pack_writes_what_the_driver_would_and_leaves_it_other_kinds():
    import redis

    conn = redis.Connection(port=1)  # never connected
    cmds = [["RLOCK.ACQUIRE", b"k\xff", "\u00e9o", "LEASE", 30000, "BLOCK", 0, "REQ", "r1"], ["WAIT", 1, -5]]
    assert pack(cmds) == b"".join(conn.pack_commands(cmds))
    assert pack([["X", 1.5]]) is None and pack([["X", True]]) is None


def test_a_give_back_has_one_req_id_of_its_own():
    assert give_back_req("r1") == give_back_req("r1") != "r1"


def test_client_list_line():
    line = "id=7 addr=127.0.0.1:1 flags=b db=0 cmd=rlock.acquire user=default"
    assert client_is_blocked_in(line, "RLOCK.ACQUIRE")
    assert not client_is_blocked_in(line.replace("flags=b", "flags=N"), "rlock.acquire")
    assert not client_is_blocked_in(line, "rsem.acquire")


def test_events_modes_and_messages():
    assert events_on("Kd") == "K" and events_on("KEA") == "K" and events_on("Ed") == "E"
    assert events_on("Kg") is None and events_on("") is None
    assert event_channels("K", 0, {b"x"}) == {b"__keyspace@0__:x"}
    assert b"__keyevent@2__:rlock.forcerelease" in event_channels("E", 2, {b"x"})
    assert lost_key([b"message", b"__keyspace@0__:x", b"rlock.forcerelease"]) == b"x"
    assert lost_key([b"message", b"__keyspace@0__:x", b"rlock.acquire"]) is None
    assert lost_key([b"message", b"__keyevent@0__:rlock.expire", b"y"]) == b"y"
    assert lost_key([b"subscribe", b"__keyspace@0__:x", 1]) is None


def test_renewals_fall_on_one_grid():
    a = Renewal(b"a", b"o", None, 3000, True, 0.0)
    b = Renewal(b"b", b"o", None, 3000, True, 0.0)
    a.schedule(100.0, 100.2)
    b.schedule(100.0, 100.9)
    assert a.due_at() == b.due_at() == 101.0
    fixed = Renewal(b"c", b"o", None, 3000, False, 5.0)
    assert fixed.due_at() == 8.0


def test_parse_info_resp2():
    info = parse_info([b"blocked", 1, b"holders", [b"alice", 2], b"pttl", 900, b"queue", [], b"token", 7])
    assert info.holders == {"alice": 2} and info.pttl == 900 and info.token == 7 and info.locked
    free = parse_info([b"blocked", 0, b"holders", [], b"pttl", -2, b"queue", [], b"token", None])
    assert free.pttl is None and not free.locked
