"""The decisions without sockets (rlock_client._core), tested alone."""

import math

import pytest
from redis.exceptions import ResponseError

from rlock_client import Deadlock, DeadlockWait
from rlock_client._core import (
    AcquireSpec,
    Renewal,
    acquire_cmd,
    LOST_REASONS,
    RENEWED,
    give_back_req,
    latch_plan,
    lease_plan,
    lock_plan,
    multi_plan,
    read_grant,
    renewal_outcome,
    resend_wait,
    scoped_wait,
    semaphore_plan,
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
    assert len({give_back_req("r1", n) for n in range(3)}) == 3


def test_each_plan_gives_its_grant_back_under_ids_derived_from_the_acquires():
    spec = AcquireSpec(key=b"k", side="WRITE", fenced=True)
    p = lock_plan(spec, b"o", 100, 1, req="r")
    assert [c[0] for c in p.cmds] == ["RLOCK.ACQUIRE", "HGET", "WAIT"] and p.waits
    assert p.give_back(1) == [["RLOCK.RELEASE", b"k", b"o", "WRITE", "REQ", give_back_req("r")]]
    assert p.give_back(None) == [] and p.again()[p.again().index("BLOCK") + 1] == 1
    assert not lock_plan(AcquireSpec(key=b"k"), b"o", None, 0).waits
    assert lock_plan(AcquireSpec(key=b"k", session=True), b"o", None, 0).waits

    m = multi_plan([b"{a}1", b"{a}2"], b"o", 5000, None, False, req="r")
    assert m.cmds == [["RLOCK.MACQUIRE", b"o", 2, b"{a}1", b"{a}2", "LEASE", 5000, "REQ", "r"]]
    assert m.give_back(2) == [["RLOCK.MRELEASE", b"o", 2, b"{a}1", b"{a}2", "REQ", give_back_req("r")]]
    assert m.key == b"{a}1" and not m.waits and multi_plan([b"x"], b"o", 1, 0, False).waits

    s = semaphore_plan(b"s", 2, 10, req="r")
    assert s.cmds == [["RSEM.ACQUIRE", b"s", "PERMITS", 2, "BLOCK", 10, "REQ", "r"]]
    assert s.give_back(1) == [["RSEM.RELEASE", b"s", "PERMITS", 2, "REQ", give_back_req("r")]]

    lp = lease_plan(b"s", 1000, 2, None, req="r")
    back = lp.give_back([b"i1", b"i2"])
    assert [c[2] for c in back] == [b"i1", b"i2"] and len({c[-1] for c in back}) == 2

    assert latch_plan(b"l", None).cmds == [["RLATCH.AWAIT", b"l"]] and latch_plan(b"l", 5).give_back(1) == []


def test_reading_a_grant():
    fenced = AcquireSpec(key=b"k", fenced=True)
    g = read_grant(fenced, [7, b"2", 0], 1)
    assert (g.token, g.count, g.acked, g.short) == (7, 2, 0, True)
    assert read_grant(fenced, [None, None], 0) is None
    assert read_grant(AcquireSpec(key=b"k"), [1], 0).count == 1
    with pytest.raises(Deadlock):
        read_grant(fenced, [ResponseError('DEADLOCK "a" waits for "k" held by "b"'), None], 0)


def test_the_wait_retry_rule():
    cmd = ["RLOCK.ACQUIRE", b"k", b"o", "BLOCK", 5000, "REQ", "r"]
    assert resend_wait(cmd, 1, False, 5000, 10.0, 8.0)[4] == 2000  # the wait that is left
    assert resend_wait(cmd, 1, True, 5000, 10.0, 8.0) is None  # a timeout is not retried
    assert resend_wait(cmd, 4, False, 5000, 10.0, 8.0) is None
    assert resend_wait(cmd, 1, False, 5000, 10.0, 11.0) is None
    assert resend_wait(cmd, 1, False, 0, None, 11.0) == cmd  # forever


def test_renewal_replies():
    r = Renewal(b"k", b"o", None, 3000, True, basis=0.0)
    assert renewal_outcome(1, r, 1.0) == RENEWED
    assert renewal_outcome(0, r, 1.0) in LOST_REASONS
    assert renewal_outcome(ResponseError("WRONGTYPE x"), r, 1.0) in LOST_REASONS
    assert renewal_outcome(None, r, 1.0) not in LOST_REASONS  # tried again
    assert renewal_outcome(None, r, 3.5) in LOST_REASONS  # the lease ran out meanwhile


def test_a_scoped_call_waits_unless_the_handle_says():
    assert scoped_wait(None) == math.inf and scoped_wait(0) == 0 and scoped_wait(2) == 2


def test_only_published_messages_tell_of_a_loss():
    """The rest of the keyspace decisions are the shared vectors' (test_spec.py)."""
    assert lost_key([b"message", b"__keyspace@0__:x", b"del"], 0) == b"x"
    assert lost_key([b"subscribe", b"__keyspace@0__:x", 1], 0) is None
    assert lost_key([b"pmessage", b"__keyspace@0__:x", b"del"], 0) is None


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


def test_the_watchdogs_bookkeeping():
    from rlock_client._core import after_renewal, hit_by_events, split_due

    r = Renewal(b"k", b"o", None, 3000, True, basis=0.0)
    fixed = Renewal(b"f", b"o", None, 3000, False, basis=0.0)
    assert after_renewal(r, 1, 5.0, 5.1, 0.0) is None and r.basis == 5.0 and r.next_due > 5.1
    assert after_renewal(r, None, 6.0, 6.1, 0.0) is None and r.basis == 5.0  # tried again
    assert after_renewal(r, 0, 6.0, 6.1, 0.0) == LOST_REASONS["refused"]
    assert split_due([(1, r, None), (2, fixed, None)]) == ([(2, fixed, None)], [(1, r, None)])
    entries = [(1, (r, "e1")), (2, (fixed, "e2"))]
    assert hit_by_events(entries, {b"k", b"f"}) == ([(1, r, "e1")], [(2, fixed, "e2")])
    assert hit_by_events(entries, {b"x"}) == ([], [])


def test_server_facts():
    from rlock_client._core import attached_replicas, merge_top, owner_id, server_name

    assert attached_replicas(b"# Replication\r\nrole:master\r\nconnected_slaves:2\r\n") == 2
    assert attached_replicas("role:master") == 0
    assert server_name({"host": "h", "port": 1}) == "h:1" and server_name({"path": "/s"}) == "/s:"
    top = [{"key": "a", "waiters": 1, "waits": 9}, {"key": "b", "waiters": 2}, {"key": "c", "waiters": 1, "waits": 10}]
    assert [e["key"] for e in merge_top(top, 2)] == ["b", "c"]
    assert owner_id("u", 3) == "u:3"
