"""The plans of ``rlock_client._handles``, run alone: each request a plan yields is answered by
hand, as a face's driver would answer it, with no server and no socket."""

import os

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError

from rlock_client import _handles as h
from rlock_client._core import RESEND_AFTER


class Router:
    cluster = object()  # a cluster: MOVED is followed


def bare_locks():
    locks = h.Locks.__new__(h.Locks)
    locks._router = Router()
    locks._pid = os.getpid()
    return locks


def test_sending_resends_after_a_broken_link_and_follows_moved():
    locks = bare_locks()
    plan = locks._sending(b"k", [["RLOCK.ACQUIRE", "k"]], resend=True)
    assert next(plan) == (locks._router, "server_for", (b"k",))
    assert plan.send("s1") == ("s1", "pipeline", ([["RLOCK.ACQUIRE", "k"]], None))
    assert plan.throw(RedisConnectionError("cut")) == ("_sleep", (RESEND_AFTER,))
    assert plan.send(None) == ("s1", "pipeline", ([["RLOCK.ACQUIRE", "k"]], None))
    moved = MovedError("3999 127.0.0.1:7001")
    assert plan.send([moved]) == (locks._router, "moved", (moved,))
    assert plan.send("s2") == ("s2", "pipeline", ([["RLOCK.ACQUIRE", "k"]], None))
    with pytest.raises(StopIteration) as done:
        plan.send([b"OK"])
    assert done.value.value == [b"OK"]


def test_sending_without_resend_raises_a_broken_link():
    locks = bare_locks()
    plan = locks._sending(b"k", [["PING"]])
    next(plan)
    plan.send("s1")
    with pytest.raises(RedisConnectionError):
        plan.throw(RedisConnectionError("cut"))


def test_a_plan_that_sends_nothing_returns_at_once():
    plan = h.returns(7)
    with pytest.raises(StopIteration) as done:
        next(plan)
    assert done.value.value == 7
